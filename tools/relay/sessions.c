/* relay: sessions and their history: sessions, new, rename, archive, unarchive, delete, restore, history, cancel. */
#include <stdio.h>
#include <string.h>

#include "client/chat.h"
#include "relay.h"

int relay_run_sessions(const rl_cli_args_t *args)
{
    const char *want = rl_cli_value(args, "archived") != NULL ? "archived" : "active";
    const json_t *session;
    json_t *me, *list;
    size_t i;
    int status = relay_fetch_me(&me);

    if (status != EXIT_OK)
        return status;
    list = json_array();
    json_array_foreach(json_object_get(me, "sessions"), i, session)
    {
        if (strcmp(rl_cli_str(session, "state"), want) == 0)
            json_array_append(list, (json_t *)session);
    }
    if (relay.cli.json) {
        json_t *out = json_pack("{s:O}", "sessions", list);
        relay_print_json(out);
        json_decref(out);
    } else {
        if (json_array_size(list) == 0)
            printf("no %s sessions\n", want);
        json_array_foreach(list, i, session) relay_show_session(session);
    }
    json_decref(list);
    json_decref(me);
    return EXIT_OK;
}

int relay_run_new(const rl_cli_args_t *args)
{
    const char *installation = rl_cli_value(args, "installation"), *title = rl_cli_value(args, "title");
    json_t *body;
    int status;

    if (installation == NULL)
        return relay_report(EXIT_USAGE, "new needs --installation ID (see relay installations)", NULL);
    status = relay_need_login();
    if (status != EXIT_OK)
        return status;
    body = json_pack("{s:s}", "installation_id", installation);
    if (title != NULL)
        json_object_set_new(body, "title", json_string(title));
    return relay_call_and_show("POST", "/v1/me/sessions", body, "new session: ", "session", relay_show_session);
}

/* The one-call session commands, one row each. */
typedef struct session_action {
    const char *name;
    const char *method;
    const char *path; /* %s is the session id */
    const char *done;
} session_action_t;

static const session_action_t session_actions[] = {
    {"rename", "PATCH", "/v1/me/sessions/%s", "renamed %s\n"},
    {"archive", "POST", "/v1/me/sessions/%s/archive", "archived %s\n"},
    {"unarchive", "POST", "/v1/me/sessions/%s/unarchive", "unarchived %s\n"},
    {"delete", "DELETE", "/v1/me/sessions/%s", "deleted %s (relay restore brings it back within 24 h)\n"},
    {"restore", "POST", "/v1/me/sessions/%s/restore", "restored %s\n"},
};

int relay_run_session_action(const rl_cli_args_t *args)
{
    const session_action_t *action = NULL;
    char path[512];
    rl_api_error_t error;
    json_t *body = NULL, *result;
    size_t i;
    int status = relay_need_login();

    if (status != EXIT_OK)
        return status;
    for (i = 0; i < sizeof(session_actions) / sizeof(session_actions[0]); ++i) {
        if (strcmp(session_actions[i].name, args->command->name) == 0)
            action = &session_actions[i];
    }
    if (strcmp(action->name, "rename") == 0)
        body = json_pack("{s:o}", "title",
                         args->positional[1][0] != '\0' ? json_string(args->positional[1]) : json_null());
    rl_api_path(path, sizeof(path), action->path, args->positional[0]);
    status = relay_call(action->method, path, body, &result, &error);
    json_decref(body);
    if (status != 0)
        return relay_report_api(&error);
    return relay_print_result(result, action->done, args->positional[0]);
}

int relay_run_history(const rl_cli_args_t *args)
{
    int limit = 50, status;
    json_t *result;
    size_t i, n;

    if (relay_parse_int(rl_cli_value(args, "limit"), 1, 100, &limit) != 0)
        return relay_report(EXIT_USAGE, "--limit must be an integer from 1 to 100", NULL);
    status = relay_need_login();
    if (status != EXIT_OK)
        return status;
    status = relay_fetch_history(args->positional[0], limit, &result);
    if (status != EXIT_OK)
        return status;
    if (relay.cli.json) {
        relay_print_json(result);
    } else {
        const json_t *messages = json_object_get(result, "messages");
        n = json_array_size(messages);
        if (n == 0)
            printf("no messages yet\n");
        for (i = n; i > 0; --i)
            rl_chat_print_message(stdout, &relay.cli.out, json_array_get(messages, i - 1));
    }
    json_decref(result);
    return EXIT_OK;
}

int relay_run_cancel(const rl_cli_args_t *args)
{
    const char *interaction = rl_cli_value(args, "interaction");
    char path[512];
    rl_api_error_t error;
    json_t *body, *result;
    int status = relay_need_login();

    if (status != EXIT_OK)
        return status;
    body = json_object();
    if (interaction != NULL)
        json_object_set_new(body, "interaction_id", json_string(interaction));
    rl_api_path(path, sizeof(path), "/v1/me/sessions/%s/cancel", args->positional[0]);
    status = relay_call("POST", path, body, &result, &error);
    json_decref(body);
    if (status != 0)
        return relay_report_api(&error);
    return relay_print_result(result, "asked the agent to stop the turn in %s\n", args->positional[0]);
}
