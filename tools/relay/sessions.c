/* relay: sessions and their history: sessions, new, rename, archive, unarchive, delete, restore, history, cancel. */
#include <stdio.h>
#include <string.h>

#include "client/chat.h"
#include "client/timeline.h"
#include "relay.h"

int relay_run_sessions(const rl_cli_args_t *args)
{
    const char *want = rl_cli_value(args, "archived") != NULL ? "archived" : "active";
    int all = rl_cli_value(args, "all") != NULL;
    const json_t *session;
    json_t *me, *list;
    size_t i;
    int status = relay_fetch_me(&me);

    if (status != EXIT_OK)
        return status;
    list = json_array();
    json_array_foreach(json_object_get(me, "sessions"), i, session)
    {
        if (strcmp(rl_cli_str(session, "state"), want) == 0 && (all || !relay_on_revoked(me, session)))
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

/*
 * The installation a new session runs on when none is given: the only one
 * not revoked, or else the only healthy one. EXIT_OK with its id in out, or
 * reported.
 */
static int default_installation(const json_t *me, char *out, size_t outsz)
{
    const json_t *inst, *live_one = NULL, *healthy_one = NULL;
    size_t i, live = 0, healthy = 0;
    char message[600], ids[400] = "";

    json_array_foreach(json_object_get(me, "installations"), i, inst)
    {
        if (relay_revoked(inst))
            continue;
        live++;
        live_one = inst;
        if (strlen(ids) + 40 < sizeof(ids))
            snprintf(ids + strlen(ids), sizeof(ids) - strlen(ids), "%s%s", ids[0] != '\0' ? ", " : "",
                     rl_cli_str(inst, "id"));
        if (strcmp(rl_cli_str(inst, "health"), "healthy") == 0) {
            healthy++;
            healthy_one = inst;
        }
    }
    if (live == 0)
        return relay_report(EXIT_RUNTIME,
                            "no installation to run a session on: start relay-bridge pair on a machine, "
                            "then relay pair CODE",
                            NULL);
    if (live > 1 && healthy != 1) {
        snprintf(message, sizeof(message),
                 "%zu installations could run the session (%s), %zu of them healthy: choose one with "
                 "--installation ID",
                 live, ids, healthy);
        return relay_report(EXIT_USAGE, message, NULL);
    }
    inst = live == 1 ? live_one : healthy_one;
    snprintf(out, outsz, "%s", rl_cli_str(inst, "id"));
    rl_cli_note(&relay.cli, "relay: on %s, %s", out,
                live == 1 ? "your only installation" : "your only healthy installation");
    return EXIT_OK;
}

/*
 * issue 36: the agent, project and agent session a new session names:
 * agent and resume in *extra, the project ({id, worktree_branch?}) in
 * *project (sent plain, or sealed in an encrypted session). EXIT_OK or reported.
 */
static int agent_fields(const rl_cli_args_t *args, json_t **extra, json_t **project)
{
    const char *agent = rl_cli_value(args, "agent"), *id = rl_cli_value(args, "project");
    const char *worktree = rl_cli_value(args, "worktree"), *resume = rl_cli_value(args, "resume");

    *extra = json_object();
    *project = NULL;
    if (worktree != NULL && id == NULL)
        return relay_report(EXIT_USAGE, "--worktree needs --project (the project the worktree is made in)", NULL);
    if (agent != NULL)
        json_object_set_new(*extra, "agent", json_string(agent));
    if (resume != NULL)
        json_object_set_new(*extra, "resume", json_pack("{s:s}", "agent_session_id", resume));
    if (id != NULL) {
        *project = json_pack("{s:s}", "id", id);
        if (worktree != NULL)
            json_object_set_new(*project, "worktree_branch", json_string(worktree));
    }
    return EXIT_OK;
}

static int new_session(const rl_cli_args_t *args, const char *installation, const char *title, const json_t *extra,
                       const json_t *project)
{
    char chosen[128];
    json_t *body;
    int status = EXIT_OK;

    if (installation == NULL) {
        json_t *me = NULL;
        status = relay_fetch_me(&me);
        if (status == EXIT_OK)
            status = default_installation(me, chosen, sizeof(chosen));
        json_decref(me);
        if (status != EXIT_OK)
            return status;
        installation = chosen;
    }
    if (rl_cli_value(args, "plain") == NULL) {
        status = relay_e2e_new_session(installation, title, rl_cli_value(args, "encrypted") != NULL, extra, project);
        if (status >= 0)
            return status;
    }
    body = json_pack("{s:s}", "installation_id", installation);
    if (title != NULL)
        json_object_set_new(body, "title", json_string(title));
    json_object_update(body, (json_t *)extra);
    if (project != NULL)
        json_object_set(body, "project", (json_t *)project);
    return relay_call_and_show("POST", "/v1/me/sessions", body, "new session: ", "session", relay_show_session);
}

int relay_run_new(const rl_cli_args_t *args)
{
    const char *installation = rl_cli_value(args, "installation"), *title = rl_cli_value(args, "title");
    json_t *extra = NULL, *project = NULL;
    int status;

    status = relay_need_login();
    if (status == EXIT_OK)
        status = agent_fields(args, &extra, &project);
    if (status != EXIT_OK) {
        json_decref(extra);
        json_decref(project);
        return status;
    }
    status = new_session(args, installation, title, extra, project);
    json_decref(extra);
    json_decref(project);
    return status;
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

/* How history shows each kind of timeline item: one row each. */
static void show_message(const json_t *message)
{
    rl_chat_print_message(stdout, &relay.cli.out, message);
}

static void show_task(const json_t *task)
{
    rl_timeline_print_task(stdout, &relay.cli.out, task);
}

static void show_approval(const json_t *approval)
{
    rl_timeline_print_approval(stdout, &relay.cli.out, approval);
}

static const struct item_kind {
    const char *type;
    void (*show)(const json_t *object);
} item_kinds[] = {
    {"message", show_message},
    {"task", show_task},
    {"approval", show_approval},
};

/*
 * The session's timeline, oldest first as the help says (the relay pages it
 * newest first): on a terminal each item as chat shows it, with diffs and
 * plans; as JSON {items, messages, has_more, next_cursor}, where messages
 * are the items' messages (what this command printed before the timeline).
 */
int relay_run_history(const rl_cli_args_t *args)
{
    const char *session_id = args->npositional > 0 ? args->positional[0] : NULL;
    char newest[128];
    int limit = 50, status;
    json_t *result, *items, *messages;
    const json_t *item;
    size_t i, k, n;

    if (relay_parse_int(rl_cli_value(args, "limit"), 1, 100, &limit) != 0)
        return relay_report(EXIT_USAGE, "--limit must be an integer from 1 to 100", NULL);
    status = relay_need_login();
    if (status != EXIT_OK)
        return status;
    /* Without a session, the newest one, as relay chat takes it. */
    if (args->npositional == 0) {
        status = relay_newest_session("history", newest, sizeof(newest));
        if (status != EXIT_OK)
            return status;
        session_id = newest;
    }
    status = relay_fetch_timeline(session_id, limit, &result);
    if (status != EXIT_OK)
        return status;
    items = json_array();
    messages = json_array();
    n = json_array_size(json_object_get(result, "items"));
    for (i = n; i > 0; --i) {
        item = json_array_get(json_object_get(result, "items"), i - 1);
        json_array_append(items, (json_t *)item);
        if (json_object_get(item, "message") != NULL)
            json_array_append(messages, json_object_get(item, "message"));
    }
    if (relay.cli.json) {
        json_t *out =
            json_pack("{s:O, s:O, s:O, s:O}", "items", items, "messages", messages, "has_more",
                      json_object_get(result, "has_more"), "next_cursor", json_object_get(result, "next_cursor"));
        relay_print_json(out);
        json_decref(out);
    } else {
        if (n == 0)
            printf("no messages yet\n");
        if (json_is_true(json_object_get(result, "has_more")))
            rl_cli_note(&relay.cli, "relay: older items are not shown (--limit shows up to 100)");
        json_array_foreach(items, i, item)
        {
            for (k = 0; k < sizeof(item_kinds) / sizeof(item_kinds[0]); ++k) {
                if (strcmp(rl_cli_str(item, "type"), item_kinds[k].type) == 0)
                    item_kinds[k].show(json_object_get(item, item_kinds[k].type));
            }
        }
    }
    json_decref(items);
    json_decref(messages);
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

int relay_newest_session(const char *command, char *out, size_t outsz)
{
    const json_t *session, *newest = NULL;
    json_int_t newest_at = -1;
    json_t *me;
    size_t i;
    int status = relay_fetch_me(&me);

    if (status != EXIT_OK)
        return status;
    json_array_foreach(json_object_get(me, "sessions"), i, session)
    {
        json_int_t at = json_integer_value(json_object_get(session, "updated_at"));
        if (json_integer_value(json_object_get(session, "created_at")) > at)
            at = json_integer_value(json_object_get(session, "created_at"));
        if (strcmp(rl_cli_str(session, "state"), "active") != 0 || relay_on_revoked(me, session))
            continue;
        if (at > newest_at) {
            newest = session;
            newest_at = at;
        }
    }
    if (newest == NULL) {
        json_decref(me);
        return relay_report(EXIT_RUNTIME,
                            strcmp(command, "chat") == 0 ? "no session to chat in yet: start one with relay new"
                                                         : "no session yet: start one with relay new",
                            NULL);
    }
    snprintf(out, outsz, "%s", rl_cli_str(newest, "id"));
    rl_cli_note(&relay.cli, "relay: %s your newest session, %s%s%s%s (relay %s SESSION picks another)",
                strcmp(command, "chat") == 0 ? "chatting in" : "showing", out,
                rl_cli_str(newest, "title")[0] != '\0' ? " \"" : "", rl_cli_str(newest, "title"),
                rl_cli_str(newest, "title")[0] != '\0' ? "\"" : "", command);
    json_decref(me);
    return EXIT_OK;
}
