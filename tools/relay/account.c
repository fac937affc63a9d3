/* relay: the account and its installations: login, logout, whoami, pair, installations, installation. */
#include <stdio.h>
#include <string.h>

#include "client/credentials.h"
#include "relay.h"

int relay_run_login(const rl_cli_args_t *args)
{
    const char *server = rl_cli_value(args, "server"), *token = rl_cli_value(args, "token");
    char path[1100];
    rl_api_error_t error;
    json_t *me, *doc;
    int status;

    if (server == NULL || token == NULL || server[0] == '\0' || token[0] == '\0')
        return relay_report(EXIT_USAGE, "login needs --server URL and --token TOKEN", NULL);
    if (strncmp(server, "http://", 7) != 0 && strncmp(server, "https://", 8) != 0)
        return relay_report(EXIT_USAGE, "--server must be an http:// or https:// URL", NULL);
    relay.server = server;
    relay.token = token;
    status = relay_connect();
    if (status != EXIT_OK)
        return status;
    if (relay_call("GET", "/v1/me", NULL, &me, &error) != 0)
        return relay_report_api(&error);
    doc = json_pack("{s:s, s:s, s:O}", "server", rl_api_base(relay.api), "token", token, "user_id",
                    json_object_get(json_object_get(me, "user"), "id"));
    if (rl_credentials_save(RELAY_CREDENTIALS, doc) != 0 ||
        rl_credentials_path(RELAY_CREDENTIALS, path, sizeof(path)) != 0) {
        json_decref(doc);
        json_decref(me);
        return relay_report(EXIT_RUNTIME, "cannot write the credentials file", NULL);
    }
    if (relay.cli.json) {
        json_t *out = json_pack("{s:s, s:s, s:s}", "server", rl_api_base(relay.api), "user_id",
                                rl_cli_str(doc, "user_id"), "credentials", path);
        relay_print_json(out);
        json_decref(out);
    } else {
        printf("logged in to %s as %s%s%s\ncredentials saved in %s\n", rl_api_base(relay.api),
               relay_style(RL_TERM_BOLD), rl_cli_str(doc, "user_id"), relay_style(RL_TERM_RESET), path);
    }
    json_decref(doc);
    json_decref(me);
    return EXIT_OK;
}

int relay_run_logout(const rl_cli_args_t *args)
{
    if (rl_credentials_remove(RELAY_CREDENTIALS) != 0)
        return relay_report(EXIT_RUNTIME, "cannot remove the credentials file", NULL);
    if (relay.cli.json) {
        json_t *out = json_pack("{s:b}", "logged_out", 1);
        relay_print_json(out);
        json_decref(out);
    } else {
        printf("logged out\n");
    }
    return EXIT_OK;
}

int relay_run_whoami(const rl_cli_args_t *args)
{
    json_t *me;
    int status = relay_fetch_me(&me);

    if (status != EXIT_OK)
        return status;
    if (relay.cli.json) {
        json_t *out = json_pack("{s:s, s:O, s:i, s:i}", "server", relay.server, "user", json_object_get(me, "user"),
                                "installations", (int)json_array_size(json_object_get(me, "installations")), "sessions",
                                (int)json_array_size(json_object_get(me, "sessions")));
        relay_print_json(out);
        json_decref(out);
    } else {
        printf("%s%s%s on %s: %zu installation(s), %zu session(s)\n", relay_style(RL_TERM_BOLD),
               rl_cli_str(json_object_get(me, "user"), "id"), relay_style(RL_TERM_RESET), relay.server,
               json_array_size(json_object_get(me, "installations")), json_array_size(json_object_get(me, "sessions")));
    }
    json_decref(me);
    return EXIT_OK;
}

int relay_run_installations(const rl_cli_args_t *args)
{
    int all = rl_cli_value(args, "all") != NULL;
    const json_t *inst;
    json_t *me, *list;
    size_t i, hidden = 0;
    int status = relay_fetch_me(&me);

    if (status != EXIT_OK)
        return status;
    /* A revoked installation can never answer again: it stays out of the list unless asked for. */
    list = json_array();
    json_array_foreach(json_object_get(me, "installations"), i, inst)
    {
        if (all || !relay_revoked(inst))
            json_array_append(list, (json_t *)inst);
        else
            hidden++;
    }
    if (relay.cli.json) {
        json_t *out = json_pack("{s:O}", "installations", list);
        relay_print_json(out);
        json_decref(out);
    } else {
        if (json_array_size(list) == 0)
            printf("no installations yet: start relay-bridge pair on a machine, then relay pair CODE\n");
        json_array_foreach(list, i, inst) relay_show_installation(inst);
        if (hidden > 0)
            rl_cli_note(&relay.cli, "(%zu revoked installation(s) not shown: relay installations --all)", hidden);
    }
    json_decref(list);
    json_decref(me);
    return EXIT_OK;
}

/*
 * A pairing code as people type it: 7 letters, in any case, with dashes or
 * spaces between them ("qwe-rtyu"). 0 with the letters in capitals in code,
 * or -1.
 */
static int pairing_code(const char *typed, char code[8])
{
    size_t n = 0;

    for (; *typed != '\0'; ++typed) {
        char c = *typed;
        if (c == '-' || c == ' ')
            continue;
        if (n == 7 || !((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')))
            return -1;
        code[n++] = c >= 'a' ? (char)(c - 'a' + 'A') : c;
    }
    code[n] = '\0';
    return n == 7 ? 0 : -1;
}

int relay_run_pair(const rl_cli_args_t *args)
{
    char code[8], message[200];
    json_t *body;
    int status;

    if (pairing_code(args->positional[0], code) != 0) {
        snprintf(message, sizeof(message),
                 "a pairing code is the 7 letters relay-bridge pair shows (such as QWERTYU), not '%.40s'",
                 args->positional[0]);
        return relay_report(EXIT_USAGE, message, NULL);
    }
    status = relay_need_login();
    if (status != EXIT_OK)
        return status;
    body = json_pack("{s:s}", "code", code);
    return relay_call_and_show("POST", "/v1/me/pairing/claim", body, "paired: ", "installation",
                               relay_show_installation);
}

/* The subcommands of `installation`, one row each. */
typedef struct installation_action {
    const char *name;
    int needs_value;
    const char *method;
    const char *field; /* PATCH field, or NULL */
    const char *done;  /* human message, %s is the id */
} installation_action_t;

static const installation_action_t installation_actions[] = {
    {"rename", 1, "PATCH", "custom_display_name", "renamed %s\n"},
    {"emoji", 1, "PATCH", "custom_emoji", "set the emoji of %s\n"},
    {"revoke", 0, "DELETE", NULL, "revoked %s: its bridge is disconnected and cannot come back\n"},
};

int relay_run_installation(const rl_cli_args_t *args)
{
    const installation_action_t *action = NULL;
    const char *id = args->positional[1];
    char path[512], message[200];
    rl_api_error_t error;
    json_t *body = NULL, *result;
    size_t i;
    int status;

    for (i = 0; i < sizeof(installation_actions) / sizeof(installation_actions[0]); ++i) {
        if (strcmp(installation_actions[i].name, args->positional[0]) == 0)
            action = &installation_actions[i];
    }
    if (action == NULL) {
        snprintf(message, sizeof(message), "installation needs rename, emoji or revoke, not '%.40s'",
                 args->positional[0]);
        return relay_report(EXIT_USAGE, message, NULL);
    }
    if ((args->npositional == 3) != action->needs_value) {
        snprintf(message, sizeof(message), "installation %s takes %s", action->name,
                 action->needs_value ? "<id> <value> (\"\" clears it)" : "<id> only");
        return relay_report(EXIT_USAGE, message, NULL);
    }
    status = relay_need_login();
    if (status != EXIT_OK)
        return status;
    if (action->field != NULL) {
        const char *value = args->positional[2];
        body = json_object();
        json_object_set_new(body, action->field, value[0] != '\0' ? json_string(value) : json_null());
    }
    rl_api_path(path, sizeof(path), "/v1/me/installations/%s", id);
    status = relay_call(action->method, path, body, &result, &error);
    json_decref(body);
    if (status != 0)
        return relay_report_api(&error);
    return relay_print_result(result, action->done, id);
}
