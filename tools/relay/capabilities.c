/*
 * relay: device capability requests (docs/api.md "Device capabilities")
 * answered from a terminal: capabilities lists the pending ones, capability
 * refuses one or gives a location typed by hand. A terminal has no camera
 * to offer: a photo is the web client's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relay.h"

static void show_request(const json_t *request)
{
    printf("%s%s%s  %s  %s\n", relay_style(RL_TERM_BOLD), rl_cli_str(request, "request_id"), relay_style(RL_TERM_RESET),
           rl_cli_str(request, "capability"), rl_cli_str(request, "reason"));
}

int relay_run_capabilities(const rl_cli_args_t *args)
{
    rl_api_error_t error;
    const json_t *request;
    json_t *snapshot, *pending;
    size_t i;
    int status = relay_need_login();

    (void)args;
    if (status != EXIT_OK)
        return status;
    if (relay_call("GET", "/v1/me/snapshot", NULL, &snapshot, &error) != 0)
        return relay_report_api(&error);
    /* An older relay has no such key: nothing is pending there. */
    pending = json_object_get(snapshot, "pending_capability_requests");
    if (relay.cli.json) {
        json_t *out = json_pack("{s:O}", "pending_capability_requests", pending != NULL ? pending : json_array());
        relay_print_json(out);
        json_decref(out);
    } else {
        if (json_array_size(pending) == 0)
            printf("no pending capability requests\n");
        json_array_foreach(pending, i, request) show_request(request);
    }
    json_decref(snapshot);
    return EXIT_OK;
}

/* "LAT,LON" or "LAT,LON,ACCURACY" (metres; 0 when not given: as exact as typed). 0, or -1 when it is not that. */
static int parse_location(const char *text, double *latitude, double *longitude, double *accuracy)
{
    char rest[2];
    int n = sscanf(text, "%lf,%lf,%lf%1s", latitude, longitude, accuracy, rest);

    if (n == 2)
        *accuracy = 0;
    return n == 2 || n == 3 ? 0 : -1;
}

/*
 * In an encrypted session a location goes sealed: the relay refuses it in
 * clear. The snapshot's reasons come opened when this device holds the key
 * (then the key says so); a reason_ct still there says the session is
 * encrypted and this device cannot answer it. A request no longer pending
 * is left to the relay to answer (expired, or already answered).
 */
static int seal_if_encrypted(const char *request_id, json_t *body)
{
    rl_api_error_t error;
    const json_t *request;
    json_t *snapshot;
    size_t i;
    int status = EXIT_OK;

    if (json_object_get(body, "location") == NULL)
        return EXIT_OK;
    if (relay_call("GET", "/v1/me/snapshot", NULL, &snapshot, &error) != 0)
        return relay_report_api(&error);
    json_array_foreach(json_object_get(snapshot, "pending_capability_requests"), i, request)
    {
        if (strcmp(rl_cli_str(request, "request_id"), request_id) == 0)
            status = relay_e2e_seal_answer(rl_cli_str(request, "session_id"), body,
                                           json_object_get(request, "reason_ct") != NULL);
    }
    json_decref(snapshot);
    return status;
}

int relay_run_capability(const rl_cli_args_t *args)
{
    const char *how = args->positional[0], *where = args->positional[2];
    double latitude, longitude, accuracy;
    char path[512];
    rl_api_error_t error;
    json_t *body, *result;
    int status;

    if (strcmp(how, "refuse") == 0 && where == NULL)
        body = json_pack("{s:b}", "refused", 1);
    else if (strcmp(how, "location") == 0 && where != NULL &&
             parse_location(where, &latitude, &longitude, &accuracy) == 0)
        body = json_pack("{s:{s:f, s:f, s:f}}", "location", "latitude", latitude, "longitude", longitude, "accuracy",
                         accuracy);
    else
        return relay_report(EXIT_USAGE, "capability takes refuse <request> or location <request> LAT,LON[,ACCURACY]",
                            NULL);
    status = relay_need_login();
    if (status != EXIT_OK) {
        json_decref(body);
        return status;
    }
    if ((status = seal_if_encrypted(args->positional[1], body)) != EXIT_OK) {
        json_decref(body);
        return status;
    }
    rl_api_path(path, sizeof(path), "/v1/me/capabilities/%s", args->positional[1]);
    status = relay_call("POST", path, body, &result, &error);
    json_decref(body);
    if (status != 0)
        return relay_report_api(&error);
    if (relay.cli.json)
        relay_print_json(result);
    else
        printf("%s: %s%s\n", args->positional[1], rl_cli_str(result, "status"),
               json_is_true(json_object_get(result, "idempotent")) ? " (already answered)" : "");
    json_decref(result);
    return EXIT_OK;
}
