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
#include "common/rand.h"
#include "http/query.h"
#include "relay/sessions/agents.h"
#include "relay/e2e/e2e.h"
#include "relay/core/hub.h"
#include "relay/installations/manifest.h"
#include "relay/core/ops.h"
#include "relay/core/feature.h"
#include "relay/sessions/context.h"
#include "relay/core/rpc.h"
#include "relay/sessions/sessions.h"
#include "relay/core/target.h"
#include "relay/core/updates.h"
#include "relay/core/views.h"

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
    const rl_sessions_ctx_t *ctx = rl_feature_of(call, RL_FEATURE_SESSIONS);

    if (base->result == RL_E_INVALID_REQUEST && op->bad_field != NULL) {
        rl_e2e_fail_field(call, op->bad_field, op->encrypted);
    } else if (base->result != 0) {
        rl_call_fail(call, base->result, NULL);
    } else {
        rl_hub_publish(ctx->hub, op->user_id, RL_EV_SESSION_STATE,
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

/* ---- POST /v1/me/sessions/:id/config ---- */

static const rl_field_t config_option_fields[] = {
    RL_FIELD_STRING("id", RL_F_REQUIRED, 1, WORD_MAX),
    RL_FIELD_STRING("value", RL_F_REQUIRED, 1, WORD_MAX),
    RL_FIELD_END,
};
static const rl_schema_t config_option_schema = RL_SCHEMA(config_option_fields);

static const rl_field_t config_fields[] = {
    RL_FIELD_OBJECT("option", RL_F_REQUIRED, &config_option_schema),
    /* an encrypted session's: the device's MAC of the change, for the bridge to check (relayd cannot) */
    RL_FIELD_STRING("device_id", RL_F_NULLABLE, 1, 64),
    RL_FIELD_STRING("config_sig", RL_F_NULLABLE, 1, 128),
    RL_FIELD_INTEGER_MIN("ts", RL_F_NULLABLE, 0),
    RL_FIELD_END,
};
const rl_schema_t rl_session_config_schema = RL_SCHEMA(config_fields);

/* What an encrypted session's change must carry for the bridge to take it. */
static const char *const signed_fields[] = {"device_id", "config_sig", "ts"};

struct session_config {
    rl_op_t op;
    const char *user_id, *session_id, *request_id;
    json_t *body; /* a reference to the call's body */
    int64_t now;
    json_t *errors;     /* result: what an encrypted session's change lacks */
    const char *bridge; /* result: the installation told */
};

static void session_config_dispose(rl_store_op_t *base)
{
    struct session_config *op = (void *)base;

    json_decref(op->body);
    json_decref(op->errors);
    rl_op_dispose(base);
}

static int session_config_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct session_config *op = (void *)base;
    rl_session_row_t session;
    json_t *payload, *value;
    size_t i;
    int result = rl_session_live(txn, op->user_id, op->session_id, &session);

    if (result != 0)
        return result;
    if (session.encrypted) {
        for (i = 0; i < sizeof(signed_fields) / sizeof(signed_fields[0]); ++i) {
            value = json_object_get(op->body, signed_fields[i]);
            if (value != NULL && !json_is_null(value))
                continue;
            if (op->errors == NULL)
                op->errors = json_array();
            json_array_append_new(op->errors,
                                  json_pack("{s:s, s:s, s:s}", "path", signed_fields[i], "code", "invalid_type",
                                            "message", "Required (the session is end-to-end encrypted)"));
        }
        if (op->errors != NULL)
            return RL_E_INVALID_REQUEST;
    }
    payload = json_pack("{s:s, s:O}", "request_id", op->request_id, "option", json_object_get(op->body, "option"));
    for (i = 0; i < sizeof(signed_fields) / sizeof(signed_fields[0]); ++i) {
        value = json_object_get(op->body, signed_fields[i]);
        if (value != NULL && !json_is_null(value))
            json_object_set(payload, signed_fields[i], value);
    }
    if ((result = rl_update_append(txn, session.installation_id, RL_UP_SESSION_CONFIG, session.id, NULL, payload,
                                   op->now, &op->op.update_id)) != 0)
        return result;
    op->bridge = rl_arena_strdup(txn->arena, session.installation_id);
    return 0;
}

static const rl_store_op_type_t session_config_type = {"session_config", 1, session_config_run, session_config_dispose};

static void on_session_config(rl_store_op_t *base)
{
    struct session_config *op = (void *)base;
    rl_call_t *call = base->arg;
    const rl_sessions_ctx_t *ctx = rl_feature_of(call, RL_FEATURE_SESSIONS);
    json_t *answer;
    char *text;

    if (base->result == RL_E_INVALID_REQUEST && op->errors != NULL) {
        rl_call_fail_full(call, base->result, NULL, json_incref(op->errors), NULL);
    } else if (base->result != 0) {
        rl_call_fail(call, base->result, NULL);
    } else {
        rl_updates_notify(ctx->bus, op->bridge, op->op.update_id);
        /* 202: the bridge applies the change later and says so with its next state. */
        answer = json_pack("{s:b, s:{s:s, s:s}}", "ok", 1, "result", "session_id", op->session_id, "request_id",
                           op->request_id);
        text = json_dumps(answer, JSON_COMPACT);
        if (text != NULL)
            rl_call_send(call, 202, "application/json; charset=utf-8", text, strlen(text));
        else
            rl_call_fail(call, RL_E_INTERNAL, NULL);
        free(text);
        json_decref(answer);
    }
    rl_call_release(call);
}

int rl_session_config(rl_call_t *call)
{
    struct session_config *op;
    char session_id[72], request_id[32];
    int result = rl_path_id(call, 0, session_id, sizeof(session_id), RL_E_SESSION_NOT_FOUND);

    if (result != 0)
        return result;
    op = rl_op_new(&session_config_type, sizeof(*op));
    rl_rand_id(request_id, sizeof(request_id), "cfg_", 20);
    op->user_id = rl_op_str(op, call->principal);
    op->session_id = rl_op_str(op, session_id);
    op->request_id = rl_op_str(op, request_id);
    op->body = json_incref(call->body);
    op->now = rl_clock_now_ms();
    rl_op_submit_for(call, op, on_session_config);
    return 0;
}

/* ---- GET /v1/me/installations/:id/projects and /agent-sessions: asked of the bridge, live ---- */

/* A query parameter as the route takes it. */
struct param {
    const char *name;
    size_t max;
    int required;
    int (*check)(const char *s, size_t len);
    const char *message;
};

static const struct param projects_params[] = {
    {"device_id", 64, 0, rl_printable_check, "Expected a device id (1-64 printable characters)"},
};
static const struct param agent_sessions_params[] = {
    {"agent", 32, 1, NULL, "Expected the name of one of the installation's agents (1-32 characters)"},
    {"project_id", 64, 1, rl_printable_check, "Expected a project id (1-64 printable characters)"},
    {"device_id", 64, 0, rl_printable_check, "Expected a device id (1-64 printable characters)"},
};

struct bridge_list {
    rl_op_t op;
    const char *user_id, *installation_id;
    json_t *frame;     /* the request for the bridge, but for its req_id */
    const char *agent; /* checked against the manifest, when the request names one */
};

static void bridge_list_dispose(rl_store_op_t *base)
{
    json_decref(((struct bridge_list *)base)->frame);
    rl_op_dispose(base);
}

static int bridge_list_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct bridge_list *op = (void *)base;
    rl_installation_row_t installation;
    int result = RL_TXN(txn, installation_get, op->installation_id, &installation);

    if (result == RL_E_NOT_FOUND || (result == 0 && strcmp(installation.user_id, op->user_id) != 0))
        return RL_E_INSTALLATION_NOT_FOUND;
    if (result != 0)
        return result;
    if (strcmp(installation.state, "live") != 0)
        return RL_E_INSTALLATION_REVOKED;
    if (op->agent != NULL && !rl_manifest_agent_declared(installation.manifest, op->agent))
        return RL_E_AGENT_NOT_DECLARED;
    return 0;
}

static const rl_store_op_type_t bridge_list_type = {"bridge_list", 0, bridge_list_run, bridge_list_dispose};

static void on_bridge_list_checked(rl_store_op_t *base)
{
    struct bridge_list *op = (void *)base;
    rl_call_t *call = base->arg;
    const rl_sessions_ctx_t *ctx = rl_feature_of(call, RL_FEATURE_SESSIONS);

    if (base->result == RL_E_AGENT_NOT_DECLARED) {
        rl_call_fail_full(call, base->result, NULL,
                          json_pack("[{s:s, s:s, s:s}]", "path", "agent", "code", "invalid_enum_value", "message",
                                    "The installation's manifest declares no agent of this name"),
                          NULL);
    } else if (base->result != 0) {
        rl_call_fail(call, base->result, NULL);
    } else {
        /* The frame goes to the bridge; the answer is passed on as it came (rpc.h caps, times out, refuses). */
        rl_rpc_ask(ctx->rpc, call, op->installation_id, op->frame, rl_rpc_pass_on);
        op->frame = NULL;
    }
    rl_call_release(call);
}

/* Reads the route's parameters into the frame: 0, or the call was answered 400. */
static int read_params(rl_call_t *call, const struct param *params, size_t count, json_t *frame)
{
    char value[72];
    size_t i, len;
    int found;

    for (i = 0; i < count; ++i) {
        found = call->req != NULL ? rl_query_param(call->req, params[i].name, value, sizeof(value)) : 1;
        len = found == 0 ? strlen(value) : 0;
        if (found == 1 && !params[i].required)
            continue;
        if (found != 0 || len == 0 || len > params[i].max ||
            (params[i].check != NULL && params[i].check(value, len) != 0)) {
            rl_call_fail_full(call, RL_E_INVALID_REQUEST, NULL,
                              json_pack("[{s:s, s:s, s:s}]", "path", params[i].name, "code",
                                        found == 1 ? "invalid_type" : "invalid_string", "message",
                                        found == 1 ? "Required" : params[i].message),
                              NULL);
            return -1;
        }
        json_object_set_new(frame, params[i].name, json_string(value));
    }
    return 0;
}

static int bridge_list(rl_call_t *call, const char *type, const struct param *params, size_t count)
{
    struct bridge_list *op;
    char id[40];
    json_t *frame;
    int result = rl_path_id(call, 0, id, sizeof(id), RL_E_INSTALLATION_NOT_FOUND);

    if (result != 0)
        return result;
    frame = json_pack("{s:s}", "type", type);
    if (read_params(call, params, count, frame) != 0) {
        json_decref(frame);
        return 0;
    }
    op = rl_op_new(&bridge_list_type, sizeof(*op));
    op->user_id = rl_op_str(op, call->principal);
    op->installation_id = rl_op_str(op, id);
    op->agent = rl_op_str(op, json_string_value(json_object_get(frame, "agent")));
    op->frame = frame;
    rl_op_submit_for(call, op, on_bridge_list_checked);
    return 0;
}

int rl_installation_projects(rl_call_t *call)
{
    return bridge_list(call, "projects.list.req", projects_params,
                       sizeof(projects_params) / sizeof(projects_params[0]));
}

int rl_installation_agent_sessions(rl_call_t *call)
{
    return bridge_list(call, "agent_sessions.list.req", agent_sessions_params,
                       sizeof(agent_sessions_params) / sizeof(agent_sessions_params[0]));
}

/* The bridge's models (GET /v1/me/installations/:id/models): asked as its projects are, with no parameter. */
int rl_installation_models(rl_call_t *call)
{
    return bridge_list(call, "models.list.req", NULL, 0);
}
