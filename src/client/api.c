#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/api.h"
#include "client/client.h"
#include "client/retry.h"

/* A command gives up after this many tries of one call, 429 and 503 included. */
#define MAX_ATTEMPTS 6

struct rl_api {
    rl_client_t *client;
    char *authorization; /* "Authorization: Bearer ..." */
    char device[96];     /* "X-Relay-Device: dev_..." or "" */
    rl_retry_bucket_t bucket;
    rl_api_note_t note;
    void *note_user;
};

int rl_api_new(const char *server, const char *token, const char *user_agent, rl_api_t **out)
{
    rl_client_options_t options = {5000, 30000, 16u * 1024u * 1024u, user_agent};
    rl_api_t *api = calloc(1, sizeof(*api));
    size_t len = strlen(token) + sizeof("Authorization: Bearer ");
    int result;

    *out = NULL;
    if (api == NULL)
        return RL_CLIENT_E_TRANSFER;
    result = rl_client_new(server, &options, &api->client);
    api->authorization = malloc(len);
    if (result != 0 || api->authorization == NULL) {
        rl_api_free(api);
        return result != 0 ? result : RL_CLIENT_E_TRANSFER;
    }
    snprintf(api->authorization, len, "Authorization: Bearer %s", token);
    *out = api;
    return 0;
}

void rl_api_free(rl_api_t *api)
{
    if (api == NULL)
        return;
    rl_client_free(api->client);
    if (api->authorization != NULL) {
        memset(api->authorization, 0, strlen(api->authorization));
        free(api->authorization);
    }
    free(api);
}

void rl_api_set_note(rl_api_t *api, rl_api_note_t note, void *user)
{
    api->note = note;
    api->note_user = user;
}

const char *rl_api_base(const rl_api_t *api)
{
    return rl_client_base(api->client);
}

static void retrying(void *user, int attempt, int result, const rl_client_response_t *response, const json_t *answer,
                     long delay_ms)
{
    rl_api_t *api = user;
    char line[400];

    if (api->note == NULL)
        return;
    if (response->request_id[0] != '\0')
        snprintf(line, sizeof(line), "HTTP %ld (request %s); retrying in %ld ms", response->status,
                 response->request_id, delay_ms);
    else if (result != 0)
        /* The error that ends the command names the server; the notes before it only count the tries. */
        snprintf(line, sizeof(line), "no answer (try %d); retrying in %ld ms", attempt, delay_ms);
    else
        snprintf(line, sizeof(line), "HTTP %ld; retrying in %ld ms", response->status, delay_ms);
    api->note(api->note_user, line);
}

int rl_api_call(rl_api_t *api, const char *method, const char *path, const json_t *body, json_t **result,
                rl_api_error_t *error)
{
    const char *headers[4] = {api->authorization, "Content-Type: application/json",
                              api->device[0] != '\0' ? api->device : NULL, NULL};
    rl_retry_policy_t policy = {.max_attempts = MAX_ATTEMPTS};
    rl_retry_hooks_t hooks = {NULL, retrying, api};
    rl_client_response_t response;
    json_t *answer = NULL;
    char *text = body != NULL ? json_dumps(body, JSON_COMPACT) : NULL;
    int rc, ret = -1;

    memset(error, 0, sizeof(*error));
    if (result != NULL)
        *result = NULL;
    rc = rl_retry_request(api->client, &policy, &api->bucket, &hooks, method, path, headers, text,
                          text != NULL ? strlen(text) : 0, &response, &answer);
    if (rc != 0) {
        error->transport = 1;
        /* response.error names the server already: once is enough. */
        snprintf(error->message, sizeof(error->message), "%s", response.error);
        goto out;
    }
    error->status = response.status;
    snprintf(error->request_id, sizeof(error->request_id), "%s", response.request_id);
    if (response.status != 200 || answer == NULL || !json_is_true(json_object_get(answer, "ok"))) {
        const char *code = rl_client_error_code(answer), *said = rl_client_error_message(answer);
        snprintf(error->code, sizeof(error->code), "%s", code != NULL ? code : "");
        const json_t *first = json_array_get(json_object_get(json_object_get(answer, "error"), "errors"), 0);
        snprintf(error->message, sizeof(error->message), "%s", said != NULL ? said : "the relay refused the request");
        /* A validation failure says which field and why: that is what the user can fix. */
        if (json_is_string(json_object_get(first, "message")))
            snprintf(error->message, sizeof(error->message), "%.120s (%s%s%.120s)",
                     said != NULL ? said : "the relay refused the request",
                     json_string_value(json_object_get(first, "path")) != NULL
                         ? json_string_value(json_object_get(first, "path"))
                         : "",
                     json_string_length(json_object_get(first, "path")) > 0 ? ": " : "",
                     json_string_value(json_object_get(first, "message")));
        goto out;
    }
    if (result != NULL)
        *result = json_incref(json_object_get(answer, "result"));
    ret = 0;
out:
    json_decref(answer);
    rl_client_response_free(&response);
    free(text);
    return ret;
}

int rl_api_path(char *out, size_t outsz, const char *fmt, const char *id)
{
    char *escaped = rl_client_escape(id);
    int n;

    if (escaped == NULL)
        return -1;
    n = snprintf(out, outsz, fmt, escaped);
    free(escaped);
    return n >= 0 && (size_t)n < outsz ? 0 : -1;
}

void rl_api_set_device(rl_api_t *api, const char *device_id)
{
    if (device_id == NULL || device_id[0] == '\0')
        api->device[0] = '\0';
    else
        snprintf(api->device, sizeof(api->device), "X-Relay-Device: %.64s", device_id);
}
