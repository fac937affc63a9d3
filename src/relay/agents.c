/*
 * Issue 36 (docs/api.md "Agents and projects", "Session state"): what the
 * bridge says of a session's agent, posted as its agent_state and told to
 * the user's clients; the user's steering of it; the bridge's projects and
 * the agent's own sessions, asked of the bridge live (agents.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "relay/agents.h"
#include "relay/e2e.h"
#include "relay/hub.h"
#include "relay/ops.h"
#include "relay/relay.h"
#include "relay/target.h"
#include "relay/views.h"

#define WORD_MAX 128  /* mode, model, effort, option ids, names and values, error codes */
#define TEXT_MAX 1024 /* a description, an error's message, a project's path */

int rl_printable_check(const char *s, size_t len)
{
    size_t i;

    for (i = 0; i < len; ++i)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
            return -1;
    return 0;
}

/* ---- POST /v1/bridge/sessions/:id/state ---- */

static const char *const states[] = {"starting", "ready", "refused", "ended", NULL};
static const char *const option_kinds[] = {"mode", "model", "effort", "select", "toggle", NULL};
static const char *const risks[] = {"high", NULL};

static const rl_field_t value_fields[] = {
    RL_FIELD_STRING("value", RL_F_REQUIRED, 0, WORD_MAX),
    RL_FIELD_STRING("name", RL_F_REQUIRED, 0, WORD_MAX),
    RL_FIELD_STRING("description", RL_F_NULLABLE, 0, TEXT_MAX),
    RL_FIELD_ENUM("risk", RL_F_NULLABLE, risks),
    RL_FIELD_END,
};
static const rl_schema_t value_schema = RL_SCHEMA(value_fields);
static const rl_field_t value_item = RL_FIELD_OBJECT(NULL, RL_F_REQUIRED, &value_schema);

/* An option's value is a string (≤ 128), a toggle's boolean, or null: checked by state_problem. */
static const rl_field_t option_fields[] = {
    RL_FIELD_STRING("id", RL_F_REQUIRED, 1, WORD_MAX),  RL_FIELD_STRING("name", RL_F_REQUIRED, 0, WORD_MAX),
    RL_FIELD_ENUM("kind", RL_F_REQUIRED, option_kinds), RL_FIELD_ANY("value", 0),
    RL_FIELD_ARRAY("values", 0, 0, 64, &value_item),    RL_FIELD_END,
};
static const rl_schema_t option_schema = RL_SCHEMA(option_fields);
static const rl_field_t option_item = RL_FIELD_OBJECT(NULL, RL_F_REQUIRED, &option_schema);

static const rl_field_t cost_fields[] = {
    RL_FIELD_NUMBER_MIN("amount", RL_F_REQUIRED, 0),
    RL_FIELD_STRING("currency", RL_F_REQUIRED, 1, 16),
    RL_FIELD_END,
};
static const rl_schema_t cost_schema = RL_SCHEMA(cost_fields);

static const rl_field_t usage_fields[] = {
    RL_FIELD_INTEGER_MIN("context_used", RL_F_NULLABLE, 0),
    RL_FIELD_INTEGER_MIN("context_size", RL_F_NULLABLE, 0),
    RL_FIELD_OBJECT("cost", RL_F_NULLABLE, &cost_schema),
    RL_FIELD_END,
};
static const rl_schema_t usage_schema = RL_SCHEMA(usage_fields);

static const rl_field_t error_fields[] = {
    RL_FIELD_STRING("code", RL_F_REQUIRED, 1, WORD_MAX),
    RL_FIELD_STRING("message", RL_F_NULLABLE, 0, TEXT_MAX),
    RL_FIELD_END,
};
static const rl_schema_t error_schema = RL_SCHEMA(error_fields);

static const rl_field_t project_fields[] = {
    RL_FIELD_STRING_CHECK("id", RL_F_REQUIRED, 1, 64, rl_printable_check, RL_PRINTABLE_MESSAGE),
    RL_FIELD_STRING("name", RL_F_NULLABLE, 0, WORD_MAX),
    RL_FIELD_STRING("path", RL_F_NULLABLE, 0, TEXT_MAX),
    RL_FIELD_STRING("branch", RL_F_NULLABLE, 0, WORD_MAX),
    RL_FIELD_END,
};
static const rl_schema_t project_schema = RL_SCHEMA(project_fields);

static const rl_field_t state_fields[] = {
    RL_FIELD_ENUM("state", RL_F_REQUIRED, states),
    RL_FIELD_STRING("mode", RL_F_NULLABLE, 0, WORD_MAX),
    RL_FIELD_STRING("model", RL_F_NULLABLE, 0, WORD_MAX),
    RL_FIELD_STRING("effort", RL_F_NULLABLE, 0, WORD_MAX),
    RL_FIELD_ARRAY("options", RL_F_NULLABLE, 0, 32, &option_item),
    RL_FIELD_OBJECT("usage", RL_F_NULLABLE, &usage_schema),
    RL_FIELD_OBJECT("error", RL_F_NULLABLE, &error_schema),
    RL_FIELD_OBJECT("project", RL_F_NULLABLE, &project_schema),
    /* ours: an encrypted session's project as the bridge found it, sealed ({id, name, path, branch}) */
    RL_FIELD_CT("project_ct", RL_F_NULLABLE, 8192),
    RL_FIELD_END,
};
const rl_schema_t rl_session_state_schema = RL_SCHEMA(state_fields);

/* The keys an agent_state keeps, in this order: anything else in the body is not kept. */
static const char *const state_keys[] = {"state", "mode",  "model",   "effort",    "options",
                                         "usage", "error", "project", "project_ct"};

/* What the schema cannot say: each option's value is a string of ≤ 128 characters, a boolean or null. */
static int state_problem(const json_t *body, char *path, size_t pathsz)
{
    json_t *option, *value;
    size_t i;

    json_array_foreach(json_object_get(body, "options"), i, option)
    {
        value = json_object_get(option, "value");
        if (value == NULL || json_is_null(value) || json_is_boolean(value))
            continue;
        if (json_is_string(value) && json_string_length(value) <= WORD_MAX)
            continue;
        snprintf(path, pathsz, "options.%zu.value", i);
        return -1;
    }
    return 0;
}

struct session_state {
    rl_op_t op;
    const char *installation_id, *session_id;
    json_t *body; /* a reference to the call's body */
    int64_t now;
    const char *bad_field; /* result: the field the session's kind refuses */
    int encrypted;         /* result: the session's */
    const char *user_id;   /* result: whom to tell */
};

static void session_state_dispose(rl_store_op_t *base)
{
    json_decref(((struct session_state *)base)->body);
    rl_op_dispose(base);
}

/* The installation's own session, not deleted (spec "Targets": 404 for anyone else's, 410 once deleted). */
static int bridge_session(rl_txn_t *txn, const char *installation_id, const char *session_id, rl_session_row_t *session)
{
    int result = rl_target_installation_check(txn, installation_id);

    if (result != 0)
        return result;
    result = RL_TXN(txn, session_get, session_id, session);
    if (result == RL_E_NOT_FOUND || (result == 0 && strcmp(session->installation_id, installation_id) != 0))
        return RL_E_SESSION_NOT_FOUND;
    if (result == 0 && session->deleted_at != RL_NO_TIME)
        return RL_E_SESSION_DELETED;
    return result;
}

static int session_state_run(rl_txn_t *txn, rl_store_op_t *base)
{
    static const char *const plain[] = {"project", NULL};
    struct session_state *op = (void *)base;
    rl_session_row_t session;
    json_t *state, *stored;
    char *text;
    size_t i;
    int result = bridge_session(txn, op->installation_id, op->session_id, &session);

    if (result != 0)
        return result;
    /* A project in clear never rests in an encrypted session; a plain one takes no envelope. */
    op->encrypted = session.encrypted;
    if ((result = rl_e2e_body_check(op->body, session.encrypted, plain, &op->bad_field)) != 0)
        return result;
    state = json_object();
    for (i = 0; i < sizeof(state_keys) / sizeof(state_keys[0]); ++i) {
        json_t *value = json_object_get(op->body, state_keys[i]);
        if (value != NULL && !json_is_null(value))
            json_object_set(state, state_keys[i], value);
    }
    /* The latest post replaces the state, but one without usage keeps the meter's last reading. */
    stored = rl_view_json(session.agent_state, json_null());
    if (json_object_get(state, "usage") == NULL && json_is_object(json_object_get(stored, "usage")))
        json_object_set(state, "usage", json_object_get(stored, "usage"));
    json_decref(stored);
    text = json_dumps(state, JSON_COMPACT | JSON_SORT_KEYS);
    if (text == NULL) {
        json_decref(state);
        return RL_E_INTERNAL;
    }
    session.agent_state = rl_arena_strdup(txn->arena, text);
    free(text);
    if ((result = RL_TXN(txn, session_update, &session)) != 0) {
        json_decref(state);
        return result;
    }
    op->user_id = rl_arena_strdup(txn->arena, session.user_id);
    op->op.value = state;
    return 0;
}

static const rl_store_op_type_t session_state_type = {"session_state", 1, session_state_run, session_state_dispose};

static void on_session_state(rl_store_op_t *base)
{
    struct session_state *op = (void *)base;
    rl_call_t *call = base->arg;
    rl_relay_t *relay = call->app;

    if (base->result == RL_E_INVALID_REQUEST && op->bad_field != NULL) {
        rl_e2e_fail_field(call, op->bad_field, op->encrypted);
    } else if (base->result != 0) {
        rl_call_fail(call, base->result, NULL);
    } else {
        rl_hub_publish(relay->hub, op->user_id, "session_state",
                       json_pack("{s:s, s:O}", "session_id", op->session_id, "agent_state", op->op.value));
        rl_call_reply(call, json_pack("{s:s, s:O}", "session_id", op->session_id, "agent_state", op->op.value));
    }
    rl_call_release(call);
}

int rl_bridge_session_state(rl_call_t *call)
{
    struct session_state *op;
    char session_id[72], path[48];
    int result = rl_path_id(call, 0, session_id, sizeof(session_id), RL_E_SESSION_NOT_FOUND);

    if (result != 0)
        return result;
    if (state_problem(call->body, path, sizeof(path)) != 0) {
        rl_call_fail_full(call, RL_E_INVALID_REQUEST, NULL,
                          json_pack("[{s:s, s:s, s:s}]", "path", path, "code", "invalid_type", "message",
                                    "Expected a string of at most 128 characters, a boolean or null"),
                          NULL);
        return 0;
    }
    op = rl_op_new(&session_state_type, sizeof(*op));
    op->installation_id = rl_op_str(op, call->principal);
    op->session_id = rl_op_str(op, session_id);
    op->body = json_incref(call->body);
    op->now = rl_clock_now_ms();
    rl_op_submit_for(call, op, on_session_state);
    return 0;
}
