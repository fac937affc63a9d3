#include <stdio.h>
#include <string.h>

#include "relay/core/views.h"

json_t *rl_view_time(int64_t at)
{
    return at == RL_NO_TIME ? json_null() : json_integer(at);
}

static json_t *text_or_null(const char *text)
{
    return text != NULL ? json_string(text) : json_null();
}

json_t *rl_view_json(const char *text, json_t *fallback)
{
    json_t *decoded = text != NULL ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;

    if (decoded == NULL)
        return fallback;
    json_decref(fallback);
    return decoded;
}

json_t *rl_view_user(const rl_user_row_t *row)
{
    return json_pack("{s:s, s:I}", "id", row->id, "created_at", (json_int_t)row->created_at);
}

/*
 * ours: the agent the manifest names ({name, version, mode} or null), the
 * commands it offers and (issue 36) the agents the bridge runs, each list []
 * when none.
 */
static void manifest_parts(const char *manifest, json_t **agent, json_t **commands, json_t **agents)
{
    json_t *parsed = rl_view_json(manifest, json_object()), *named = json_object_get(parsed, "agent");

    *agent = json_null();
    if (json_is_object(named)) {
        json_t *version = json_object_get(named, "version"), *mode = json_object_get(named, "mode");
        json_decref(*agent);
        *agent = json_pack("{s:O, s:O, s:O}", "name", json_object_get(named, "name"), "version",
                           version != NULL ? version : json_null(), "mode", mode != NULL ? mode : json_null());
    }
    *commands = json_object_get(parsed, "commands");
    *commands = json_is_array(*commands) ? json_incref(*commands) : json_array();
    *agents = json_object_get(parsed, "agents");
    *agents = json_is_array(*agents) ? json_incref(*agents) : json_array();
    json_decref(parsed);
}

json_t *rl_view_installation(const rl_installation_row_t *row, const char *health)
{
    json_t *agent, *commands, *agents;

    manifest_parts(row->manifest, &agent, &commands, &agents);
    return json_pack("{s:s, s:o, s:o, s:s, s:s, s:s, s:I, s:s, s:o, s:o, s:o, s:o}", "id", row->id,
                     "custom_display_name", text_or_null(row->custom_display_name), "custom_emoji",
                     text_or_null(row->custom_emoji), "connector_type", row->connector_type, "host_label",
                     row->host_label, "state", row->state, "created_at", (json_int_t)row->created_at, "health", health,
                     "agent", agent, "commands", commands, "agents", agents, "bridge_version",
                     text_or_null(row->bridge_version));
}

json_t *rl_view_session(const rl_session_row_t *row, int64_t delete_grace)
{
    json_t *view = json_pack("{s:s, s:s, s:o, s:s, s:I, s:I, s:o, s:o, s:b, s:o}", "id", row->id, "installation_id",
                             row->installation_id, "title", text_or_null(row->encrypted ? NULL : row->title), "state",
                             row->state, "created_at", (json_int_t)row->created_at, "updated_at",
                             (json_int_t)row->updated_at, "deleted_at", rl_view_time(row->deleted_at), "restore_until",
                             rl_view_time(row->deleted_at == RL_NO_TIME ? RL_NO_TIME : row->deleted_at + delete_grace),
                             "encrypted", row->encrypted, "model", text_or_null(row->model));

    /* An encrypted session's title column holds the client's envelope. */
    if (row->encrypted)
        json_object_set_new(view, "title_ct", text_or_null(row->title));
    rl_view_session_agent(view, row);
    /* What the bridge last said of the agent (POST /v1/bridge/sessions/:id/state), or null. */
    json_object_set_new(view, "agent_state", rl_view_json(row->agent_state, json_null()));
    return view;
}

/*
 * issue 36: agent (null: the bridge's default), project (a plain session's;
 * an encrypted one's envelope is project_ct, project then null) and resume
 * ({agent_session_id} or null).
 */
void rl_view_session_agent(json_t *view, const rl_session_row_t *row)
{
    json_object_set_new(view, "agent", text_or_null(row->agent));
    if (row->encrypted) {
        json_object_set_new(view, "project", json_null());
        json_object_set_new(view, "project_ct", text_or_null(row->project));
    } else {
        json_object_set_new(view, "project", rl_view_json(row->project, json_null()));
    }
    json_object_set_new(view, "resume",
                        row->resume != NULL ? json_pack("{s:s}", "agent_session_id", row->resume) : json_null());
}

/*
 * An encrypted message's text column holds its envelopes: the opening (or
 * final) text_ct, then each delta_ct of a message that ended without one,
 * separated by '\n' (never in base64). Open messages add their deltas the
 * same way (deltas.c), so one split serves every read.
 */
void rl_view_seal_message(json_t *view)
{
    const char *text = json_string_value(json_object_get(view, "text"));
    const char *cut;
    json_t *deltas;

    if (text == NULL)
        return;
    cut = strchr(text, '\n');
    json_object_set_new(view, "text_ct", cut != NULL ? json_stringn(text, (size_t)(cut - text)) : json_string(text));
    deltas = json_array();
    while (cut != NULL) {
        const char *next = strchr(cut + 1, '\n');
        size_t len = next != NULL ? (size_t)(next - cut - 1) : strlen(cut + 1);
        if (len > 0)
            json_array_append_new(deltas, json_stringn(cut + 1, len));
        cut = next;
    }
    if (json_array_size(deltas) > 0)
        json_object_set_new(view, "deltas_ct", deltas);
    else
        json_decref(deltas);
    json_object_set_new(view, "text", json_null());
}

/* An encrypted session's task columns hold envelopes (as JSON strings): each moves to its *_ct key. */
void rl_view_seal_task(json_t *view)
{
    static const char *const keys[] = {"status_label", "args", "partial_result", "result", "error"};
    char name[32];
    size_t i;

    for (i = 0; i < sizeof(keys) / sizeof(keys[0]); ++i) {
        json_t *value = json_object_get(view, keys[i]);
        snprintf(name, sizeof(name), "%s_ct", keys[i]);
        json_object_set_new(view, name, json_is_string(value) ? json_incref(value) : json_null());
        json_object_set_new(view, keys[i], json_null());
    }
}

json_t *rl_view_message(const rl_message_row_t *row, const char *text, size_t text_len)
{
    return json_pack("{s:s, s:s, s:o, s:s, s:s%, s:o, s:o, s:o, s:o, s:s, s:I, s:o}", "message_id", row->id,
                     "session_id", row->session_id, "interaction_id", text_or_null(row->interaction_id), "role",
                     row->role, "text", text, text_len, "attachments", rl_view_json(row->attachments, json_array()),
                     "reply_to", text_or_null(row->reply_to), "usage", rl_view_json(row->usage, json_null()),
                     "finish_reason", text_or_null(row->finish_reason), "state", row->state, "created_at",
                     (json_int_t)row->created_at, "finalized_at", rl_view_time(row->finalized_at));
}

json_t *rl_view_approval(const rl_approval_row_t *row)
{
    static const char *const fields[] = {"action",  "title", "message",      "severity",
                                         "command", "host",  "tool_call_id", "content"};
    json_t *request = rl_view_json(row->request, json_object());
    json_t *approval = json_pack(
        "{s:s, s:s, s:n, s:s, s:s, s:s, s:o, s:o, s:o, s:I, s:I, s:o, s:o, s:I}", "approval_id", row->id,
        "installation_id", row->installation_id, "agent_id", "session_id", row->session_id, "interaction_id",
        row->interaction_id, "state", row->state, "decision", text_or_null(row->decision), "scope",
        text_or_null(row->scope), "scope_value", text_or_null(row->scope_value), "expires_at",
        (json_int_t)row->expires_at, "ts", (json_int_t)row->created_at, "resolved_at", rl_view_time(row->resolved_at),
        "user_id", text_or_null(row->user_id), "created_at", (json_int_t)row->created_at);
    size_t i;

    for (i = 0; i < sizeof(fields) / sizeof(fields[0]); ++i) {
        json_t *field = json_object_get(request, fields[i]);
        json_object_set(approval, fields[i], field != NULL ? field : json_null());
    }
    /* issue 26: an encrypted session's approval has its details sealed, and only them. */
    if (json_object_get(request, "details_ct") != NULL)
        json_object_set(approval, "details_ct", json_object_get(request, "details_ct"));
    json_decref(request);
    return approval;
}

json_t *rl_view_pending_approval(json_t *approval)
{
    static const char *const fields[] = {"approval_id", "installation_id", "agent_id",   "session_id", "interaction_id",
                                         "action",      "title",           "message",    "severity",   "command",
                                         "host",        "tool_call_id",    "expires_at", "ts",         "content"};
    json_t *view = json_object();
    size_t i;

    for (i = 0; i < sizeof(fields) / sizeof(fields[0]); ++i) {
        json_t *field = json_object_get(approval, fields[i]);
        json_object_set(view, fields[i], field != NULL ? field : json_null());
    }
    if (json_object_get(approval, "details_ct") != NULL)
        json_object_set(view, "details_ct", json_object_get(approval, "details_ct"));
    return view;
}

json_t *rl_view_task(const rl_task_row_t *row)
{
    return json_pack("{s:s, s:s, s:s, s:o, s:o, s:s, s:o, s:o, s:o, s:o, s:o, s:I, s:I}", "task_id", row->task_id,
                     "session_id", row->session_id, "interaction_id", row->interaction_id, "kind",
                     text_or_null(row->kind), "name", text_or_null(row->name), "status", row->status, "status_label",
                     text_or_null(row->status_label), "args", rl_view_json(row->args, json_null()), "partial_result",
                     rl_view_json(row->partial_result, json_null()), "result", rl_view_json(row->result, json_null()),
                     "error", rl_view_json(row->error, json_null()), "created_at", (json_int_t)row->created_at,
                     "updated_at", (json_int_t)row->updated_at);
}
