#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/rand.h"
#include "http/query.h"
#include "relay/sessions/agents.h"
#include "relay/turn/approvals.h"
#include "relay/turn/deltas.h"
#include "relay/e2e/e2e.h"
#include "relay/core/hub.h"
#include "relay/installations/manifest.h"
#include "relay/core/ops.h"
#include "relay/core/feature.h"
#include "relay/sessions/context.h"
#include "relay/sessions/sessions.h"
#include "relay/core/target.h"
#include "auth/token.h"
#include "relay/core/updates.h"
#include "relay/core/views.h"

#define ID_CHARS  20
#define TITLE_MAX 200
/* an envelope of a 200-character title, in base64, with room */
#define TITLE_CT_MAX 1024
/* issue 36: an encrypted session's project ({id, worktree_branch?, name?, path?}) sealed */
#define PROJECT_CT_MAX 8192

static int check_installation_id(const char *s, size_t len)
{
    return rl_installation_id_is_valid(s, len) ? 0 : -1;
}

/* issue 36: a plain session's project: an opaque id from the bridge's list and a worktree to make. */
static const rl_field_t project_fields[] = {
    RL_FIELD_STRING_CHECK("id", RL_F_REQUIRED, 1, 64, rl_printable_check, RL_PRINTABLE_MESSAGE),
    RL_FIELD_STRING_CHECK("worktree_branch", 0, 1, 100, rl_printable_check, RL_PRINTABLE_MESSAGE),
    RL_FIELD_END,
};
static const rl_schema_t project_schema = RL_SCHEMA(project_fields);

static const rl_field_t resume_fields[] = {
    RL_FIELD_STRING_CHECK("agent_session_id", RL_F_REQUIRED, 1, 256, rl_printable_check, RL_PRINTABLE_MESSAGE),
    RL_FIELD_END,
};
static const rl_schema_t resume_schema = RL_SCHEMA(resume_fields);

static const rl_field_t session_create_fields[] = {
    RL_FIELD_STRING_CHECK("installation_id", RL_F_REQUIRED, 1, 64, check_installation_id,
                          "Installation ids look like inst_ followed by 16 letters or digits"),
    RL_FIELD_STRING("title", RL_F_NULLABLE, 0, TITLE_MAX),
    RL_FIELD_BOOLEAN("encrypted", 0),
    RL_FIELD_CT("title_ct", RL_F_NULLABLE, TITLE_CT_MAX),
    /* issue 36: which of the bridge's agents, in which project, continuing which of the agent's sessions */
    RL_FIELD_STRING("agent", 0, 1, 32),
    RL_FIELD_OBJECT("project", 0, &project_schema),
    RL_FIELD_CT("project_ct", 0, PROJECT_CT_MAX),
    RL_FIELD_OBJECT("resume", 0, &resume_schema),
    RL_FIELD_END,
};
const rl_schema_t rl_session_create_schema = RL_SCHEMA(session_create_fields);

/* One of title, title_ct (an encrypted session's) and model is required (rl_session_change). */
static const rl_field_t session_rename_fields[] = {
    RL_FIELD_STRING("title", RL_F_NULLABLE, 0, TITLE_MAX),
    RL_FIELD_CT("title_ct", RL_F_NULLABLE, TITLE_CT_MAX),
    /* ours (issue 26): the model the agent should use, told to the bridge as session.model.changed */
    RL_FIELD_STRING("model", RL_F_NULLABLE, 1, 128),
    RL_FIELD_END,
};
const rl_schema_t rl_session_rename_schema = RL_SCHEMA(session_rename_fields);

static const rl_field_t session_cancel_fields[] = {
    RL_FIELD_STRING("interaction_id", RL_F_NULLABLE, 1, 64),
    RL_FIELD_END,
};
const rl_schema_t rl_session_cancel_schema = RL_SCHEMA(session_cancel_fields);

/* ---- create ---- */

struct session_create {
    rl_op_t op;
    const char *user_id, *installation_id, *session_id, *title;
    const char *agent, *project, *resume; /* issue 36: as the row keeps them */
    int64_t now, delete_grace;
    int encrypted;
    const char *bridge; /* result: the installation to notify */
};

static int session_create_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct session_create *op = (void *)base;
    rl_installation_row_t installation;
    rl_session_row_t session = {op->session_id, op->user_id, op->installation_id, op->title, "active",
                                op->now,        op->now,     RL_NO_TIME};
    int result = RL_TXN(txn, installation_get, op->installation_id, &installation);

    session.encrypted = op->encrypted;
    session.agent = op->agent;
    session.project = op->project;
    session.resume = op->resume;
    /* Another user's installation looks like none at all. */
    if (result == RL_E_NOT_FOUND || (result == 0 && strcmp(installation.user_id, op->user_id) != 0))
        return RL_E_INSTALLATION_NOT_FOUND;
    if (result != 0)
        return result;
    if (strcmp(installation.state, "live") != 0)
        return RL_E_INSTALLATION_REVOKED;
    /* issue 36: a session names one of the agents the bridge said it runs, or none (its default). */
    if (op->agent != NULL && !rl_manifest_agent_declared(installation.manifest, op->agent))
        return RL_E_AGENT_NOT_DECLARED;
    if ((result = RL_TXN(txn, session_insert, &session)) != 0)
        return result;
    /* spec: a new session reaches the bridge as session.started. */
    if ((result = rl_update_append(txn, op->installation_id, RL_UP_SESSION_STARTED, op->session_id, NULL,
                                   rl_update_session_started(&session), op->now, &op->op.update_id)) != 0)
        return result;
    op->bridge = op->installation_id;
    op->op.value = rl_view_session(&session, op->delete_grace);
    return 0;
}

static const rl_store_op_type_t session_create_type = RL_OP_TYPE(session_create, 1, session_create_run);

static void on_session_created(rl_store_op_t *base)
{
    struct session_create *op = (void *)base;
    rl_call_t *call = base->arg;
    const rl_sessions_ctx_t *ctx = rl_feature_of(call, RL_FEATURE_SESSIONS);
    json_t *session = op->op.value;

    if (base->result == RL_E_AGENT_NOT_DECLARED) {
        rl_call_fail_full(call, base->result, NULL,
                          json_pack("[{s:s, s:s, s:s}]", "path", "agent", "code", "invalid_enum_value", "message",
                                    "The installation's manifest declares no agent of this name"),
                          NULL);
    } else if (base->result != 0) {
        rl_call_fail(call, base->result, NULL);
    } else {
        rl_hub_publish(ctx->hub, call->principal, RL_EV_SESSION_CREATED,
                       json_pack("{s:O, s:O}", "session_id", json_object_get(session, "id"), "session", session));
        rl_updates_notify(ctx->bus, op->bridge, op->op.update_id);
        rl_call_reply(call, json_pack("{s:O, s:O}", "session_id", json_object_get(session, "id"), "session", session));
    }
    rl_call_release(call);
}

int rl_session_create(rl_call_t *call)
{
    const rl_sessions_ctx_t *ctx = rl_feature_of(call, RL_FEATURE_SESSIONS);
    struct session_create *op;
    char session_id[32];
    static const char *const plain[] = {"title", "project", NULL};
    const char *field = NULL;
    int encrypted = json_is_true(json_object_get(call->body, "encrypted"));
    json_t *project = json_object_get(call->body, "project");
    char *text;

    if (rl_e2e_body_check(call->body, encrypted, plain, &field) != 0) {
        rl_e2e_fail_field(call, field, encrypted);
        return 0;
    }
    op = rl_op_new(&session_create_type, sizeof(*op));
    rl_rand_id(session_id, sizeof(session_id), "ses_", ID_CHARS);
    op->user_id = rl_op_str(op, call->principal);
    op->installation_id = rl_op_str(op, rl_body_string(call, "installation_id"));
    op->session_id = rl_op_str(op, session_id);
    op->encrypted = json_is_true(json_object_get(call->body, "encrypted"));
    /* An encrypted session's title column holds the client's envelope (title_ct). */
    op->title = rl_op_str(op, rl_body_string(call, op->encrypted ? "title_ct" : "title"));
    op->agent = rl_op_str(op, rl_body_string(call, "agent"));
    /* A plain project is kept as JSON (only the keys the schema knows); an encrypted one as its envelope. */
    if (op->encrypted) {
        op->project = rl_op_str(op, rl_body_string(call, "project_ct"));
    } else if (json_is_object(project)) {
        json_t *kept = json_pack("{s:O}", "id", json_object_get(project, "id"));
        if (json_object_get(project, "worktree_branch") != NULL)
            json_object_set(kept, "worktree_branch", json_object_get(project, "worktree_branch"));
        text = json_dumps(kept, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(kept);
        op->project = rl_op_str(op, text);
        free(text);
    }
    op->resume =
        rl_op_str(op, json_string_value(json_object_get(json_object_get(call->body, "resume"), "agent_session_id")));
    op->now = rl_clock_now_ms();
    op->delete_grace = ctx->config->delete_grace;
    rl_op_submit_for(call, op, on_session_created);
    return 0;
}

/* ---- the state machine ---- */

struct session_change {
    rl_op_t op;
    const char *user_id, *session_id, *title, *model;
    rl_session_op_t change;
    int64_t now, delete_grace;
    int changed;
    json_t *body; /* a rename's body (a reference), for the rule of its session */
    int set_title, set_model;
    const char *bad_field; /* result: the field the plaintext-or-ciphertext rule refused */
    int encrypted;         /* result: the session's */
    const char *bridge;    /* result: the installation told of a new model */
};

static void session_change_dispose(rl_store_op_t *base)
{
    json_decref(((struct session_change *)base)->body);
    rl_op_dispose(base);
}

/* The user's session, deleted or not; anyone else's is not found. */
int rl_session_of_user(rl_txn_t *txn, const char *user_id, const char *session_id, rl_session_row_t *session)
{
    int result = RL_TXN(txn, session_get, session_id, session);

    if (result == RL_E_NOT_FOUND || (result == 0 && strcmp(session->user_id, user_id) != 0))
        return RL_E_SESSION_NOT_FOUND;
    return result;
}

static int session_change_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct session_change *op = (void *)base;
    rl_session_row_t session;
    int result = rl_session_of_user(txn, op->user_id, op->session_id, &session);

    if (result != 0)
        return result;
    op->changed = 1;
    if (op->change == RL_SESSION_RESTORE) {
        /* brief: restore works inside the grace; afterwards the session is as good as purged. */
        if (session.deleted_at == RL_NO_TIME)
            op->changed = 0;
        else if (session.deleted_at + op->delete_grace <= op->now)
            return RL_E_SESSION_NOT_FOUND;
        else
            session.deleted_at = RL_NO_TIME;
    } else if (session.deleted_at != RL_NO_TIME) {
        /* Deleted sessions are not found by any route but restore. */
        return RL_E_SESSION_NOT_FOUND;
    } else if (op->change == RL_SESSION_RENAME) {
        static const char *const plain[] = {"title", NULL};
        /* issue 26: an encrypted session's title is its envelope; a plain one takes no *_ct. */
        op->encrypted = session.encrypted;
        if ((result = rl_e2e_body_check(op->body, session.encrypted, plain, &op->bad_field)) != 0)
            return result;
        if (op->set_title)
            session.title = json_string_value(json_object_get(op->body, session.encrypted ? "title_ct" : "title"));
        /* Setting the model it has changes nothing, and tells nobody. */
        if (op->set_model && ((session.model == NULL && op->model == NULL) ||
                              (session.model != NULL && op->model != NULL && strcmp(session.model, op->model) == 0)))
            op->set_model = 0;
        if (op->set_model)
            session.model = op->model;
        /* ours: the bridge hears of a new model at once (authors' update session.model.changed). */
        if (op->set_model) {
            json_t *payload = json_pack("{s:{s:s, s:s?}, s:s?}", "session", "id", session.id, "model", session.model,
                                        "model", session.model);
            if ((result = rl_update_append(txn, session.installation_id, RL_UP_SESSION_MODEL_CHANGED, session.id, NULL,
                                           payload, op->now, &op->op.update_id)) != 0)
                return result;
            op->bridge = session.installation_id;
        }
    } else if (op->change == RL_SESSION_ARCHIVE || op->change == RL_SESSION_UNARCHIVE) {
        const char *target = op->change == RL_SESSION_ARCHIVE ? "archived" : "active";
        if (strcmp(session.state, target) == 0)
            op->changed = 0;
        session.state = target;
    } else {
        session.deleted_at = op->now;
    }
    /* issue 36: the bridge closes the agent's session when the user puts it away (not when brought back). */
    if (op->changed && (op->change == RL_SESSION_ARCHIVE || op->change == RL_SESSION_DELETE) &&
        rl_target_installation_check(txn, session.installation_id) == 0) {
        json_t *payload = json_pack("{s:{s:s}, s:s}", "session", "id", session.id, "reason",
                                    op->change == RL_SESSION_ARCHIVE ? "archived" : "deleted");
        if ((result = rl_update_append(txn, session.installation_id, RL_UP_SESSION_CLOSED, session.id, NULL, payload,
                                       op->now, &op->op.update_id)) != 0)
            return result;
        op->bridge = session.installation_id;
    }
    if (op->changed) {
        session.updated_at = op->now;
        if ((result = RL_TXN(txn, session_update, &session)) != 0)
            return result;
    }
    op->op.value = rl_view_session(&session, op->delete_grace);
    return 0;
}

static const rl_store_op_type_t session_change_type = {"session_change", 1, session_change_run, session_change_dispose};

static void on_session_changed(rl_store_op_t *base)
{
    struct session_change *op = (void *)base;
    rl_call_t *call = base->arg;
    const rl_sessions_ctx_t *ctx = rl_feature_of(call, RL_FEATURE_SESSIONS);
    json_t *session = op->op.value, *id;

    if (op->change == RL_SESSION_DELETE || op->change == RL_SESSION_RESTORE) {
        /* Its messages' records are reloaded by their next delta: 410 after a delete, streaming again after a restore.
         */
        if (base->result == 0 && op->changed)
            rl_deltas_forget_session(ctx->deltas, json_string_value(json_object_get(session, "id")));
        rl_deltas_changing(ctx->deltas, 0);
    }
    if (base->result != 0) {
        if (base->result == RL_E_INVALID_REQUEST && op->bad_field != NULL)
            rl_e2e_fail_field(call, op->bad_field, op->encrypted);
        else
            rl_call_fail(call, base->result, NULL);
        rl_call_release(call);
        return;
    }
    id = json_object_get(session, "id");
    if (op->bridge != NULL)
        rl_updates_notify(ctx->bus, op->bridge, op->op.update_id);
    /* A new model is news to clients too (session_updated), whatever else the rename did. */
    if (op->bridge != NULL && op->change == RL_SESSION_RENAME)
        rl_hub_publish(ctx->hub, call->principal, RL_EV_SESSION_UPDATED,
                       json_pack("{s:O, s:O, s:O}", "session_id", id, "state", json_object_get(session, "state"),
                                 "session", session));
    /* spec: each transition emits its event; a request that changes nothing emits none. */
    if (op->change == RL_SESSION_RENAME && op->set_title) {
        json_t *renamed = json_pack("{s:O, s:O, s:O}", "session_id", id, "title", json_object_get(session, "title"),
                                    "session", session);
        if (json_object_get(session, "title_ct") != NULL)
            json_object_set(renamed, "title_ct", json_object_get(session, "title_ct"));
        rl_hub_publish(ctx->hub, call->principal, RL_EV_SESSION_RENAMED, renamed);
    } else if (op->changed && op->change == RL_SESSION_DELETE) {
        rl_hub_publish(ctx->hub, call->principal, RL_EV_SESSION_DELETED,
                       json_pack("{s:O, s:O, s:O}", "session_id", id, "deleted_at",
                                 json_object_get(session, "deleted_at"), "restore_until",
                                 json_object_get(session, "restore_until")));
    } else if (op->changed) {
        rl_hub_publish(ctx->hub, call->principal, RL_EV_SESSION_UPDATED,
                       json_pack("{s:O, s:O, s:O}", "session_id", id, "state", json_object_get(session, "state"),
                                 "session", session));
    }
    rl_call_reply(call, json_pack("{s:O, s:O}", "session_id", id, "session", session));
    rl_call_release(call);
}

/* The session state machine's transitions; the route row says which (call->handler_tag). */
int rl_session_change(rl_call_t *call)
{
    const rl_sessions_ctx_t *ctx = rl_feature_of(call, RL_FEATURE_SESSIONS);
    struct session_change *op;
    char session_id[72];
    int result = rl_path_id(call, 0, session_id, sizeof(session_id), RL_E_SESSION_NOT_FOUND);

    if (result != 0)
        return result;
    op = rl_op_new(&session_change_type, sizeof(*op));
    op->change = (rl_session_op_t)call->handler_tag;
    op->user_id = rl_op_str(op, call->principal);
    op->session_id = rl_op_str(op, session_id);
    if (op->change == RL_SESSION_RENAME) {
        op->body = json_incref(call->body);
        op->set_title = json_object_get(call->body, "title") != NULL || json_object_get(call->body, "title_ct") != NULL;
        op->set_model = json_object_get(call->body, "model") != NULL;
        op->model = rl_op_str(op, rl_body_string(call, "model"));
        if (!op->set_title && !op->set_model) {
            rl_store_op_free(&op->op.base);
            rl_call_fail_full(call, RL_E_INVALID_REQUEST, NULL,
                              json_pack("[{s:s, s:s, s:s}]", "path", "title", "code", "invalid_type", "message",
                                        "Required (or title_ct, or model)"),
                              NULL);
            return 0;
        }
    }
    op->now = rl_clock_now_ms();
    op->delete_grace = ctx->config->delete_grace;
    /* A delete or a restore changes what a delta to the session's messages gets: the records hear of it. */
    if (op->change == RL_SESSION_DELETE || op->change == RL_SESSION_RESTORE)
        rl_deltas_changing(ctx->deltas, 1);
    rl_op_submit_for(call, op, on_session_changed);
    return 0;
}

/* ---- cancel ---- */

struct session_cancel {
    rl_op_t op;
    const char *user_id, *session_id, *interaction_id;
    int64_t now;
    const char *bridge; /* result: the installation to notify; op.value: the turn's approvals it expired */
};

int rl_session_live(rl_txn_t *txn, const char *user_id, const char *session_id, rl_session_row_t *session)
{
    rl_installation_row_t installation;
    int result = rl_session_of_user(txn, user_id, session_id, session);

    if (result != 0)
        return result;
    if (session->deleted_at != RL_NO_TIME)
        return RL_E_SESSION_NOT_FOUND;
    result = RL_TXN(txn, installation_get, session->installation_id, &installation);
    if (result == 0 && strcmp(installation.state, "live") != 0)
        result = RL_E_INSTALLATION_REVOKED;
    return result == RL_E_NOT_FOUND ? RL_E_INSTALLATION_NOT_FOUND : result;
}

static int session_cancel_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct session_cancel *op = (void *)base;
    rl_session_row_t session;
    rl_interaction_row_t interaction;
    int result = rl_session_live(txn, op->user_id, op->session_id, &session);

    if (result != 0)
        return result;
    if (op->interaction_id != NULL) {
        result = RL_TXN(txn, interaction_get, op->interaction_id, &interaction);
        if (result == RL_E_NOT_FOUND || (result == 0 && strcmp(interaction.session_id, op->session_id) != 0))
            return RL_E_INTERACTION_NOT_FOUND;
        if (result != 0)
            return result;
    }
    op->bridge = session.installation_id;
    result = rl_update_append(txn, session.installation_id, RL_UP_SESSION_CANCELLED, op->session_id, op->interaction_id,
                              rl_update_session_cancelled(op->interaction_id), op->now, &op->op.update_id);
    /*
     * ours: the agent drops what it asked in a cancelled turn (ACP answers its
     * permission requests "cancelled"), so the turn's pending approvals can no
     * longer be answered: they expire now rather than at their expires_at.
     */
    if (result == 0) {
        json_decref(op->op.value);
        op->op.value = json_array();
        result = rl_approvals_expire_turn(txn, op->user_id, op->session_id, op->interaction_id, op->now, op->op.value);
    }
    return result;
}

static const rl_store_op_type_t session_cancel_type = RL_OP_TYPE(session_cancel, 1, session_cancel_run);

static void on_session_cancelled(rl_store_op_t *base)
{
    struct session_cancel *op = (void *)base;
    rl_call_t *call = base->arg;
    const rl_sessions_ctx_t *ctx = rl_feature_of(call, RL_FEATURE_SESSIONS);

    if (base->result != 0) {
        rl_call_fail(call, base->result, NULL);
    } else {
        rl_updates_notify(ctx->bus, op->bridge, op->op.update_id);
        rl_approvals_publish_expired(ctx->hub, ctx->bus, op->op.value);
        rl_call_reply(call,
                      json_pack("{s:s, s:s?}", "session_id", op->session_id, "interaction_id", op->interaction_id));
    }
    rl_call_release(call);
}

int rl_session_cancel(rl_call_t *call)
{
    struct session_cancel *op;
    char session_id[72];
    int result = rl_path_id(call, 0, session_id, sizeof(session_id), RL_E_SESSION_NOT_FOUND);

    if (result != 0)
        return result;
    op = rl_op_new(&session_cancel_type, sizeof(*op));
    op->user_id = rl_op_str(op, call->principal);
    op->session_id = rl_op_str(op, session_id);
    op->interaction_id = rl_op_str(op, call->body != NULL ? rl_body_string(call, "interaction_id") : NULL);
    op->now = rl_clock_now_ms();
    rl_op_submit_for(call, op, on_session_cancelled);
    return 0;
}

/* ---- the list, deleted ones included (the web client's "restore" list) ---- */

struct sessions_list {
    rl_op_t op;
    const char *user_id;
    int deleted;
    int64_t deleted_after;
    rl_session_row_t *rows; /* result */
    size_t count;
};

static int sessions_list_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct sessions_list *op = (void *)base;

    if (op->deleted)
        return RL_TXN(txn, sessions_deleted_of_user, op->user_id, op->deleted_after, &op->rows, &op->count);
    return RL_TXN(txn, sessions_of_user, op->user_id, &op->rows, &op->count);
}

static const rl_store_op_type_t sessions_list_type = RL_OP_TYPE(sessions_list, 0, sessions_list_run);

static void on_sessions_listed(rl_store_op_t *base)
{
    struct sessions_list *op = (void *)base;
    rl_call_t *call = base->arg;
    const rl_sessions_ctx_t *ctx = rl_feature_of(call, RL_FEATURE_SESSIONS);
    json_t *sessions;
    size_t i;

    if (base->result != 0) {
        rl_call_fail(call, base->result, NULL);
    } else {
        sessions = json_array();
        for (i = 0; i < op->count; ++i)
            json_array_append_new(sessions, rl_view_session(&op->rows[i], ctx->config->delete_grace));
        rl_call_reply(call, json_pack("{s:o}", "sessions", sessions));
    }
    rl_call_release(call);
}

int rl_sessions_list(rl_call_t *call)
{
    const rl_sessions_ctx_t *ctx = rl_feature_of(call, RL_FEATURE_SESSIONS);
    struct sessions_list *op;
    char state[16] = "";

    switch (rl_query_param(call->req, "state", state, sizeof(state))) {
    case 1:
        break;
    case 0:
        if (strcmp(state, "deleted") == 0 || strcmp(state, "live") == 0)
            break;
        /* fall through */
    default:
        rl_call_fail_full(call, RL_E_INVALID_REQUEST, NULL,
                          json_pack("[{s:s, s:s, s:s}]", "path", "state", "code", "invalid_enum_value", "message",
                                    "state must be live or deleted"),
                          NULL);
        return 0;
    }
    op = rl_op_new(&sessions_list_type, sizeof(*op));
    op->user_id = rl_op_str(op, call->principal);
    op->deleted = strcmp(state, "deleted") == 0;
    /* brief: a deleted session can be restored for the grace period; after it, it is as good as gone. */
    op->deleted_after = rl_clock_now_ms() - ctx->config->delete_grace;
    rl_op_submit_for(call, op, on_sessions_listed);
    return 0;
}

int rl_sessions_open(const rl_sessions_ctx_t *ctx, rl_sessions_ctx_t **out)
{
    void *copy;
    int result = rl_feature_copy(ctx, sizeof(*ctx), &copy);

    *out = copy;
    return result;
}

void rl_sessions_close(rl_sessions_ctx_t *sessions)
{
    free(sessions);
}
