/* relay: output, login and the one call of the client API that every command uses. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "client/credentials.h"
#include "relay.h"

relay_t relay;

/* ---- output ---- */

int relay_report(int status, const char *message, json_t *extra)
{
    return rl_cli_report(&relay.cli, status, message, extra);
}

int relay_report_api(const rl_api_error_t *error)
{
    char message[600];
    json_t *extra;

    if (error->transport)
        return relay_report(EXIT_RUNTIME, error->message, NULL);
    snprintf(message, sizeof(message), "%s (HTTP %ld %s, request %s)", error->message, error->status,
             error->code[0] != '\0' ? error->code : "error", error->request_id[0] != '\0' ? error->request_id : "-");
    extra = json_pack("{s:i, s:s, s:s}", "status", (int)error->status, "code", error->code, "request_id",
                      error->request_id);
    return relay_report(EXIT_RUNTIME, message, extra);
}

const char *relay_style(rl_term_style_t style)
{
    return rl_cli_style(&relay.cli, style);
}

void relay_print_json(const json_t *value)
{
    rl_cli_print_json(&relay.cli, value);
}

int relay_print_result(json_t *result, const char *human_fmt, const char *id)
{
    if (relay.cli.json)
        relay_print_json(result);
    else
        printf(human_fmt, id);
    json_decref(result);
    return EXIT_OK;
}

static rl_term_style_t health_style(const char *health)
{
    if (strcmp(health, "healthy") == 0)
        return RL_TERM_GREEN;
    if (strcmp(health, "degraded") == 0)
        return RL_TERM_YELLOW;
    return RL_TERM_RED;
}

void relay_show_installation(const json_t *inst)
{
    const char *name = rl_cli_str(inst, "custom_display_name"), *emoji = rl_cli_str(inst, "custom_emoji");

    printf("%s%s%s  %s%s%s%s  %s%s%s  %s(%s, %s)%s\n", relay_style(RL_TERM_BOLD), rl_cli_str(inst, "id"),
           relay_style(RL_TERM_RESET), emoji, emoji[0] != '\0' ? " " : "",
           name[0] != '\0' ? name : rl_cli_str(inst, "host_label"),
           strcmp(rl_cli_str(inst, "state"), "revoked") == 0 ? " [revoked]" : "",
           relay_style(health_style(rl_cli_str(inst, "health"))), rl_cli_str(inst, "health"),
           relay_style(RL_TERM_RESET), relay_style(RL_TERM_DIM), rl_cli_str(inst, "connector_type"),
           rl_cli_str(inst, "host_label"), relay_style(RL_TERM_RESET));
}

void relay_show_session(const json_t *session)
{
    const char *title = rl_cli_str(session, "title");

    const char *agent = rl_cli_str(session, "agent");

    /* issue 36: the agent, when the session named one (else the bridge's default). */
    printf("%s%s%s  %s%s  %son %s%s%s%s\n", relay_style(RL_TERM_BOLD), rl_cli_str(session, "id"),
           relay_style(RL_TERM_RESET), title[0] != '\0' ? title : "(untitled)",
           strcmp(rl_cli_str(session, "state"), "archived") == 0 ? " [archived]" : "", relay_style(RL_TERM_DIM),
           rl_cli_str(session, "installation_id"), agent[0] != '\0' ? ", agent " : "", agent,
           relay_style(RL_TERM_RESET));
}

/* ---- requests ---- */

static void retry_note(void *user, const char *text)
{
    rl_cli_note(&relay.cli, "relay: %s", text);
}

/* Makes relay.api once; -1 with why in message when the server is not an http(s) URL. */
static int open_api(char *message, size_t messagesz)
{
    if (relay.api != NULL)
        return 0;
    if (rl_api_new(relay.server, relay.token, RELAY_USER_AGENT, &relay.api) != 0) {
        snprintf(message, messagesz, "the server must be an http:// or https:// URL, not '%.200s'", relay.server);
        return -1;
    }
    rl_api_set_note(relay.api, retry_note, NULL);
    return 0;
}

int relay_connect(void)
{
    char message[300];

    if (open_api(message, sizeof(message)) != 0)
        return relay_report(EXIT_RUNTIME, message, NULL);
    return EXIT_OK;
}

int relay_call(const char *method, const char *path, const json_t *body, json_t **result, rl_api_error_t *error)
{
    char message[300];

    if (open_api(message, sizeof(message)) != 0) {
        memset(error, 0, sizeof(*error));
        error->transport = 1;
        snprintf(error->message, sizeof(error->message), "%s", message);
        return -1;
    }
    if (rl_api_call(relay.api, method, path, body, result, error) != 0)
        return -1;
    if (result != NULL)
        relay_e2e_open_result(*result);
    return 0;
}

int relay_call_and_show(const char *method, const char *path, json_t *body, const char *label, const char *key,
                        void (*show)(const json_t *object))
{
    rl_api_error_t error;
    json_t *result;
    int status = relay_call(method, path, body, &result, &error);

    json_decref(body);
    if (status != 0)
        return relay_report_api(&error);
    if (relay.cli.json) {
        relay_print_json(result);
    } else {
        printf("%s", label);
        show(json_object_get(result, key));
    }
    json_decref(result);
    return EXIT_OK;
}

int relay_need_login(void)
{
    const char *server = getenv("RELAY_SERVER"), *token = getenv("RELAY_TOKEN");

    if (relay.credentials == NULL)
        relay.credentials = rl_credentials_load(RELAY_CREDENTIALS);
    if (relay.credentials == NULL && errno == EPERM)
        return relay_report(EXIT_RUNTIME, "the credentials file may be read by others; fix its mode (chmod 600)", NULL);
    relay.server = server != NULL && server[0] != '\0' ? server : rl_cli_str(relay.credentials, "server");
    relay.token = token != NULL && token[0] != '\0' ? token : rl_cli_str(relay.credentials, "token");
    if (relay.server[0] == '\0' || relay.token[0] == '\0')
        return relay_report(EXIT_RUNTIME, "not logged in: run relay login --server URL --token TOKEN", NULL);
    return EXIT_OK;
}

int relay_fetch_me(json_t **me)
{
    rl_api_error_t error;
    int status = relay_need_login();

    if (status != EXIT_OK)
        return status;
    if (relay_call("GET", "/v1/me", NULL, me, &error) != 0)
        return relay_report_api(&error);
    return EXIT_OK;
}

int relay_fetch_history(const char *session_id, int limit, json_t **result)
{
    char path[600], escaped_path[512];
    rl_api_error_t error;

    rl_api_path(escaped_path, sizeof(escaped_path), "/v1/me/sessions/%s/messages", session_id);
    snprintf(path, sizeof(path), "%s?limit=%d", escaped_path, limit);
    if (relay_call("GET", path, NULL, result, &error) != 0)
        return relay_report_api(&error);
    return EXIT_OK;
}

int relay_fetch_timeline(const char *session_id, int limit, json_t **result)
{
    char path[600], escaped_path[512];
    rl_api_error_t error;

    rl_api_path(escaped_path, sizeof(escaped_path), "/v1/me/sessions/%s/timeline", session_id);
    snprintf(path, sizeof(path), "%s?limit=%d", escaped_path, limit);
    if (relay_call("GET", path, NULL, result, &error) != 0)
        return relay_report_api(&error);
    return EXIT_OK;
}

int relay_revoked(const json_t *installation)
{
    return strcmp(rl_cli_str(installation, "state"), "revoked") == 0;
}

int relay_on_revoked(const json_t *me, const json_t *session)
{
    const json_t *inst;
    size_t i;

    json_array_foreach(json_object_get(me, "installations"), i, inst)
    {
        if (strcmp(rl_cli_str(inst, "id"), rl_cli_str(session, "installation_id")) == 0)
            return relay_revoked(inst);
    }
    return 0;
}

int relay_parse_int(const char *text, int min, int max, int *out)
{
    char *end;
    long n;

    if (text == NULL)
        return 0;
    n = strtol(text, &end, 10);
    if (text[0] == '\0' || *end != '\0' || n < min || n > max)
        return -1;
    *out = (int)n;
    return 0;
}
