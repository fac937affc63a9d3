/*
 * Fuzz target: a request body of any of relayd's routes, as a phone or a
 * bridge sends it, through the route's own schema (each feature's routes.c, assembled by src/relay/routes.c):
 * the session state (POST /v1/bridge/sessions/:id/state) and config (POST
 * /v1/me/sessions/:id/config) bodies among them. The input's first line
 * names the route ("POST /v1/bridge/sessions/:id/state"; any other line
 * picks one of the routes with a body schema by its bytes), the rest is the
 * body, so that the corpus stays right when the table changes order. Besides the
 * sanitizers it checks the contract of rl_validate_body, that the flat
 * reader of the hot routes (common/json_flat.c, rl_validate_flat) never
 * takes a body the generic path refuses, and runs the plaintext-or-
 * ciphertext rule (rl_e2e_body_check) over what passed, as both a plain and
 * an encrypted session.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/json_flat.h"
#include "http/validate.h"
#include "relay/core/relay.h"
#include "relay/e2e/e2e.h"
#include "check_errors.h"

/* The keys a plain body may carry and an encrypted session's may not, as the handlers name them. */
static const char *const plain[] = {"text", "delta", "project", "title", "message", "args", "result", NULL};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const rl_route_t *routes[256];
    const rl_route_t *route;
    size_t nroutes = 0, i, count;
    const rl_route_t *all = rl_relay_routes(&count);
    rl_json_flat_t flat;
    json_t *errors, *body = NULL;
    const char *field, *bytes;
    char *scratch;
    const char *newline = memchr(data, '\n', size);
    size_t head = newline != NULL ? (size_t)(newline - (const char *)data) : 0, sum = 0;
    int result, flat_result = -1;

    for (i = 0; i < count && nroutes < 256; ++i) {
        if (all[i].body != NULL && !(all[i].flags & RL_ROUTE_RAW_BODY))
            routes[nroutes++] = &all[i];
    }
    if (newline == NULL || nroutes == 0)
        return 0;
    route = NULL;
    for (i = 0; i < nroutes && route == NULL; ++i) {
        size_t method = strlen(routes[i]->method);
        if (head == method + 1 + strlen(routes[i]->pattern) && memcmp(data, routes[i]->method, method) == 0 &&
            data[method] == ' ' && memcmp(data + method + 1, routes[i]->pattern, head - method - 1) == 0)
            route = routes[i];
    }
    for (i = 0; i < head; ++i)
        sum += data[i];
    if (route == NULL)
        route = routes[sum % nroutes];
    bytes = (const char *)data + head + 1;
    size -= head + 1;
    errors = json_array();
    if (errors == NULL)
        return 0;
    result = rl_validate_body(route->body, bytes, size, 1, &body, errors);
    if (result == 0 && (body == NULL || json_array_size(errors) != 0))
        abort();
    if (result == RL_E_INVALID_REQUEST &&
        (body != NULL || json_array_size(errors) == 0 || json_array_size(errors) > RL_VALIDATE_MAX_ERRORS))
        abort();
    fuzz_check_errors(errors);
    /* The flat path answers only what the generic one would take (http/server.c). */
    scratch = malloc(size + 1);
    if (scratch != NULL && size > 0 && rl_json_flat_parse(bytes, size, scratch, size + 1, &flat) == 0)
        flat_result = rl_validate_flat(route->body, &flat);
    if (flat_result == 0 && result != 0)
        abort();
    free(scratch);
    if (body != NULL) {
        if (rl_e2e_body_check(body, 0, plain, &field) != 0 && field == NULL)
            abort();
        if (rl_e2e_body_check(body, 1, plain, &field) != 0 && field == NULL)
            abort();
    }
    json_decref(body);
    json_decref(errors);
    return 0;
}
