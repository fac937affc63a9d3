/*
 * Approvals (spec "Approval"): the bridge's request, with grants that
 * resolve it at once; the user's decision; the snapshot of pending ones; and
 * their expiry. Expiry is a sweep of the store once a second (sweeps.c), so
 * it needs no timers per approval and survives restarts: an approval expires
 * within a second of its expires_at, and the state is checked and changed in
 * one transaction, so two sweeps (or two nodes) never expire one twice.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base64.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "http/validate.h"
#include "relay/turn/approvals.h"
#include "relay/turn/bridge.h"
#include "relay/media/capabilities.h"
#include "relay/e2e/e2e.h"
#include "relay/turn/grants.h"
#include "relay/core/hub.h"
#include "relay/push/push.h"
#include "relay/core/feature.h"
#include "relay/turn/turn.h"
#include "relay/core/updates.h"
#include "relay/core/views.h"

#define SWEEP_MAX 500

static const char *const decisions[] = {"approve", "approve_always", "deny", NULL};
static const char *const scopes[] = {"session", "tool", "domain", "all", NULL};
/* spec: low, medium, high; critical comes from the protocol authors' connectors and ranks above high. */
static const char *const severities[] = {"low", "medium", "high", "critical", NULL};

static const rl_field_t decide_fields[] = {
    RL_FIELD_ENUM("decision", RL_F_REQUIRED, decisions),
    RL_FIELD_ENUM("scope", RL_F_NULLABLE, scopes),
    RL_FIELD_STRING("scope_value", RL_F_NULLABLE, 0, 8192),
    /* ours: which installation's approval, when several of the user's use the same id */
    RL_FIELD_STRING("installation_id", RL_F_NULLABLE, 1, 64),
    /* ours (issue 26): the client device's MAC of its decision, for the bridge to check; opaque here */
    RL_FIELD_STRING("decision_sig", RL_F_NULLABLE, 1, 128),
    RL_FIELD_STRING("device_id", RL_F_NULLABLE, 1, 64),
    RL_FIELD_END,
};
const rl_schema_t rl_approval_decide_schema = RL_SCHEMA(decide_fields);

/*
 * ours: what the agent shows with its request, as content blocks (docs/api.md
 * "Content blocks"): each an object with a string type, kept as sent; the
 * 1 MB body limit bounds them.
 */
#define CONTENT_MAX 32
static const rl_field_t content_block_fields[] = {
    RL_FIELD_STRING("type", RL_F_REQUIRED, 1, 64),
    RL_FIELD_END,
};
static const rl_schema_t content_block_schema = RL_SCHEMA(content_block_fields);
static const rl_field_t content_block_item = RL_FIELD_OBJECT(NULL, RL_F_REQUIRED, &content_block_schema);

static const rl_field_t request_approval_fields[] = {
    RL_FIELD_STRING("session_id", RL_F_REQUIRED, 1, 64),
    RL_FIELD_STRING("interaction_id", 0, 1, 64), /* required but in a session the bridge created (target.h) */
    RL_FIELD_STRING("approval_id", RL_F_REQUIRED, 1, 128),
    RL_FIELD_STRING("action", RL_F_REQUIRED, 1, 128),
    /* required in a plain session, refused in an encrypted one (approval_plain) */
    RL_FIELD_STRING("title", RL_F_NULL_ABSENT, 1, 200),
    RL_FIELD_STRING("message", RL_F_NULL_ABSENT, 0, 4000),
    RL_FIELD_STRING("command", RL_F_NULLABLE, 0, 8192),
    RL_FIELD_STRING("host", RL_F_NULLABLE, 0, 255),
    RL_FIELD_ENUM("severity", RL_F_REQUIRED, severities),
    RL_FIELD_STRING("tool_call_id", RL_F_NULLABLE, 1, 128),
    RL_FIELD_ARRAY("content", RL_F_NULLABLE, 0, CONTENT_MAX, &content_block_item),
    /* issue 26: title, message, command, host, tool_call_id (and the authors' approval_slug), sealed */
    RL_FIELD_CT("details_ct", 0, 0),
    RL_FIELD_IDEMPOTENCY_KEY,
    RL_FIELD_END,
};
const rl_schema_t rl_request_approval_schema = RL_SCHEMA(request_approval_fields);
static const char *const approval_plain[] = {"title", "message", "command", "host", "tool_call_id", "content", NULL};

/* spec: approval_resolved (client) and approval.resolved (bridge) carry the same payload. */
static json_t *resolution(json_t *approval)
{
    json_t *event =
        json_pack("{s:O, s:O, s:O, s:O}", "approval_id", json_object_get(approval, "approval_id"), "decision",
                  json_object_get(approval, "decision"), "session_id", json_object_get(approval, "session_id"),
                  "interaction_id", json_object_get(approval, "interaction_id"));

    if (json_is_string(json_object_get(approval, "scope")))
        json_object_set(event, "scope", json_object_get(approval, "scope"));
    if (json_is_string(json_object_get(approval, "scope_value")))
        json_object_set(event, "scope_value", json_object_get(approval, "scope_value"));
    return event;
}

/*
 * ours: the spec asks nothing of the user for a request an approve_always
 * grant answers, and says nothing to the client. Clients are told anyway,
 * so that a chat can say in one line what its grant let through: the
 * resolution, marked auto_resolved, with what was asked.
 */
static json_t *auto_resolution(json_t *approval)
{
    static const char *const asked[] = {"action", "title", "command"};
    json_t *event = resolution(approval);
    size_t i;

    json_object_set_new(event, "auto_resolved", json_true());
    for (i = 0; i < sizeof(asked) / sizeof(asked[0]); ++i) {
        if (json_is_string(json_object_get(approval, asked[i])))
            json_object_set(event, asked[i], json_object_get(approval, asked[i]));
    }
    return event;
}

/* ---- the bridge's request ---- */

struct approval_request {
    rl_bridge_write_t w;
    int64_t expires_at;
    int auto_resolved; /* result */
};

static int approval_request_apply(rl_txn_t *txn, rl_bridge_write_t *w)
{
    struct approval_request *op = (void *)w;
    const char *approval_id = json_string_value(json_object_get(w->body, "approval_id"));
    const char *action = json_string_value(json_object_get(w->body, "action"));
    rl_approval_row_t approval;
    rl_grant_row_t grant;
    json_t *request;
    char *request_text;
    int result = RL_TXN(txn, approval_get, w->target.installation_id, approval_id, &approval);

    /* The id is taken by this installation, with another body under another key. Other installations' ids are theirs.
     */
    if (result == 0)
        return RL_E_IDEMPOTENCY_CONFLICT;
    if (result != RL_E_NOT_FOUND)
        return result;
    /* issue 26: the sealed details in an encrypted session, the plain title and message in another. */
    result = rl_bridge_write_require(w, w->session.encrypted ? "details_ct" : "title");
    if (result == 0 && !w->session.encrypted)
        result = rl_bridge_write_require(w, "message");
    if (result != 0)
        return result;
    /*
     * issue 26: in an encrypted session only a decision the user's device
     * signed counts (the bridge checks it): relayd resolves nothing itself.
     */
    result =
        w->session.encrypted ? RL_E_NOT_FOUND : rl_grant_find(txn, w->target.installation_id, action, w->body, &grant);
    if (result != 0 && result != RL_E_NOT_FOUND)
        return result;
    op->auto_resolved = result == 0;
    request = json_pack("{s:O, s:O?, s:O?, s:O, s:O?, s:O?, s:O?, s:O?}", "action", json_object_get(w->body, "action"),
                        "title", json_object_get(w->body, "title"), "message", json_object_get(w->body, "message"),
                        "severity", json_object_get(w->body, "severity"), "command",
                        json_object_get(w->body, "command"), "host", json_object_get(w->body, "host"), "tool_call_id",
                        json_object_get(w->body, "tool_call_id"), "content", json_object_get(w->body, "content"));
    if (request != NULL && w->session.encrypted)
        json_object_set(request, "details_ct", json_object_get(w->body, "details_ct"));
    request_text = json_dumps(request, JSON_COMPACT);
    json_decref(request);
    if (request_text == NULL)
        return RL_E_INTERNAL;
    approval = (rl_approval_row_t){
        .id = approval_id,
        .installation_id = w->target.installation_id,
        .user_id = w->session.user_id,
        .session_id = w->target.session_id,
        .interaction_id = w->target.interaction_id,
        .request = rl_arena_strdup(txn->arena, request_text),
        .state = op->auto_resolved ? "resolved" : "pending",
        .decision = op->auto_resolved ? "approve_always" : NULL,
        .scope = op->auto_resolved ? grant.scope : NULL,
        .scope_value = op->auto_resolved ? grant.scope_value : NULL,
        .created_at = w->target.now,
        .expires_at = op->expires_at,
        .resolved_at = op->auto_resolved ? w->target.now : RL_NO_TIME,
    };
    free(request_text);
    if ((result = RL_TXN(txn, approval_insert, &approval)) != 0)
        return result;
    if (op->auto_resolved) {
        /* brief: an earlier approve_always grant resolves the request at once and still tells the bridge. */
        w->response = json_pack("{s:s, s:b, s:s, s:s, s:s}", "approval_id", approval_id, "auto_resolved", 1, "decision",
                                "approve_always", "scope", grant.scope, "scope_value", grant.scope_value);
        result = rl_update_append(
            txn, w->target.installation_id, RL_UP_APPROVAL_RESOLVED, w->target.session_id, w->target.interaction_id,
            rl_update_approval_resolved(approval_id, "approve_always", grant.scope, grant.scope_value), w->target.now,
            &w->op.update_id);
    } else {
        w->response = json_pack("{s:s, s:b, s:I}", "approval_id", approval_id, "auto_resolved", 0, "expires_at",
                                (json_int_t)op->expires_at);
    }
    w->op.value = rl_view_approval(&approval);
    return result;
}

static int approval_request_run(rl_txn_t *txn, rl_store_op_t *base)
{
    return rl_bridge_write_run(txn, (void *)base, NULL, approval_request_apply);
}

static const rl_store_op_type_t approval_request_type = {"approval_request", 1, approval_request_run,
                                                         rl_bridge_write_dispose};

static void on_approval_requested(rl_store_op_t *base)
{
    struct approval_request *op = (void *)base;
    rl_call_t *call = base->arg;
    const rl_turn_ctx_t *turn = rl_feature_of(call, RL_FEATURE_TURN);

    if (base->result != 0) {
        rl_bridge_write_fail(call, &op->w, base->result);
    } else if (!rl_bridge_write_answer(call, &op->w)) {
        if (op->auto_resolved) {
            rl_updates_notify(turn->bus, call->principal, op->w.op.update_id);
            rl_hub_publish(turn->hub, op->w.session.user_id, RL_EV_APPROVAL_RESOLVED, auto_resolution(op->w.op.value));
        } else {
            json_t *event = rl_view_pending_approval(op->w.op.value);
            /* The user's devices hear of it even with the app closed (docs/web.md). */
            rl_push_approval_requested(turn->push, op->w.session.user_id, event);
            rl_hub_publish(turn->hub, op->w.session.user_id, RL_EV_APPROVAL_REQUESTED, event);
        }
    }
    rl_call_release(call);
}

int rl_bridge_request_approval(rl_call_t *call)
{
    const rl_turn_ctx_t *turn = rl_feature_of(call, RL_FEATURE_TURN);
    struct approval_request *op = rl_bridge_write_new(call, &approval_request_type, sizeof(*op), "approval", "",
                                                      rl_body_string(call, "approval_id"));

    if (op == NULL)
        return RL_E_INTERNAL;
    op->expires_at = op->w.target.now + turn->config->approval_ttl;
    op->w.plain = approval_plain;
    op->w.target.turn_bound = 1;
    rl_op_submit_for(call, op, on_approval_requested);
    return 0;
}

/* ---- the user's decision ---- */

struct approval_decide {
    rl_op_t op;
    const char *user_id, *approval_id, *decision, *scope, *scope_value;
    const char *decision_sig, *device_id; /* issue 26: carried to the bridge as given */
    const char *of_installation;          /* NULL: whichever of the user's installations has the id */
    int64_t now;
    int changed;    /* result: the first decision, stored and sent to the bridge */
    int forwarded;  /* result: a later signed decision of an encrypted session, sent to the bridge too */
    json_t *errors; /* result: with RL_E_INVALID_REQUEST, what the decision lacks in an encrypted session */
    const char *installation_id; /* result */
};

static void add_problem(json_t *errors, const char *path, const char *code, const char *message)
{
    json_array_append_new(errors, json_pack("{s:s, s:s, s:s}", "path", path, "code", code, "message", message));
}

/*
 * issue 34: in an encrypted session a decision counts only as signed by a
 * device (docs/api.md "Approval decisions: what is signed"). relayd cannot
 * check the MAC, but it refuses what cannot possibly verify, so that an
 * unsigned decision cannot be the first one: a decision_sig that is not the
 * base64 of 32 bytes, a device_id that is not a live client device of the
 * user. 0, or RL_E_INVALID_REQUEST with op->errors.
 */
static int check_signed(rl_txn_t *txn, struct approval_decide *op)
{
    rl_device_row_t device;
    long sig_bytes = op->decision_sig != NULL ? rl_base64_check(op->decision_sig, strlen(op->decision_sig), NULL) : -1;
    int result = op->device_id != NULL ? RL_TXN(txn, device_get, op->device_id, &device) : RL_E_NOT_FOUND;

    if (result != 0 && result != RL_E_NOT_FOUND)
        return result;
    op->errors = json_array();
    if (op->decision_sig == NULL)
        add_problem(op->errors, "decision_sig", "invalid_type", "Required");
    else if (sig_bytes != 32)
        add_problem(op->errors, "decision_sig", "invalid_string",
                    "Expected the base64 of a 32-byte HMAC-SHA256 (44 characters)");
    if (op->device_id == NULL)
        add_problem(op->errors, "device_id", "invalid_type", "Required");
    else if (result != 0 || strcmp(device.user_id, op->user_id) != 0 || device.installation_id != NULL ||
             device.revoked_at != RL_NO_TIME)
        add_problem(op->errors, "device_id", "invalid_string", "Expected a live client device of yours");
    if (json_array_size(op->errors) > 0)
        return RL_E_INVALID_REQUEST;
    json_decref(op->errors);
    op->errors = NULL;
    return 0;
}

/* The bridge hears this decision (approval.resolved), with its signature; approve_always also stores its grant. */
static int send_decision(rl_txn_t *txn, struct approval_decide *op, const rl_approval_row_t *approval)
{
    json_t *payload;
    int result;

    if (strcmp(op->decision, "approve_always") == 0) {
        /* spec: approve_always stores a permanent grant for (action, scope, scope_value). */
        json_t *request = rl_view_json(approval->request, json_object());
        rl_grant_row_t grant = {approval->installation_id, json_string_value(json_object_get(request, "action")),
                                op->scope, op->scope_value, op->now};
        result = RL_TXN(txn, grant_insert_ignore, &grant);
        json_decref(request);
        if (result != 0)
            return result;
    }
    payload = rl_update_approval_resolved(approval->id, op->decision, op->scope, op->scope_value);
    if (op->decision_sig != NULL)
        json_object_set_new(payload, "decision_sig", json_string(op->decision_sig));
    if (op->device_id != NULL)
        json_object_set_new(payload, "device_id", json_string(op->device_id));
    op->installation_id = rl_arena_strdup(txn->arena, approval->installation_id);
    return rl_update_append(txn, approval->installation_id, RL_UP_APPROVAL_RESOLVED, approval->session_id,
                            approval->interaction_id, payload, op->now, &op->op.update_id);
}

/* The grant an approve_always decision makes, its scope and value copied into the operation. */
static void grant_of_decision(struct approval_decide *op, const rl_approval_row_t *approval)
{
    json_t *view = rl_view_approval(approval);

    rl_grant_of_decision(view, &op->scope, &op->scope_value);
    op->scope = op->scope != NULL ? rl_op_str(op, op->scope) : NULL;
    op->scope_value = op->scope_value != NULL ? rl_op_str(op, op->scope_value) : NULL;
    json_decref(view);
}

static int same(const char *a, const char *b)
{
    return a != NULL && b != NULL && strcmp(a, b) == 0;
}

static int approval_decide_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct approval_decide *op = (void *)base;
    rl_approval_row_t approval, *rows, *found = NULL;
    rl_session_row_t session;
    size_t count, i;
    int result = RL_TXN(txn, approvals_of_user_by_id, op->user_id, op->approval_id, &rows, &count);

    if (result != 0)
        return result;
    /*
     * Approval ids are per installation: only the user's own installations
     * are looked at, and when two of them use the id the user names one.
     */
    for (i = 0; i < count; ++i) {
        if (op->of_installation != NULL && strcmp(rows[i].installation_id, op->of_installation) != 0)
            continue;
        if (found != NULL)
            return RL_E_APPROVAL_AMBIGUOUS;
        found = &rows[i];
    }
    if (found == NULL)
        return RL_E_APPROVAL_NOT_FOUND;
    approval = *found;
    result = RL_TXN(txn, session_get, approval.session_id, &session);
    if (result != 0 && result != RL_E_NOT_FOUND)
        return result;
    session.encrypted = result == 0 && session.encrypted;
    result = session.encrypted ? check_signed(txn, op) : 0;
    if (result != 0)
        return result;
    if (strcmp(approval.state, "resolved") == 0) {
        op->op.value = rl_view_approval(&approval);
        /* brief: the first decision wins; a later one gets it back. */
        if (!session.encrypted ||
            (same(approval.device_id, op->device_id) && same(approval.decision_sig, op->decision_sig)))
            return 0;
        /*
         * issue 34: relayd cannot tell a forged signature from the user's, and
         * the bridge drops one that does not verify. So in an encrypted session
         * a later decision signed otherwise is not answered with the first: it
         * goes to the bridge too, which acts on the first that verifies and
         * ignores the rest. The record keeps the first decision.
         */
        if (strcmp(op->decision, "approve_always") == 0)
            grant_of_decision(op, &approval);
        op->forwarded = 1;
        return send_decision(txn, op, &approval);
    }
    if (strcmp(approval.state, "pending") != 0 || approval.expires_at <= op->now)
        return RL_E_APPROVAL_EXPIRED;
    if (strcmp(op->decision, "approve_always") == 0)
        grant_of_decision(op, &approval);
    approval.state = "resolved";
    approval.decision = op->decision;
    approval.scope = op->scope;
    approval.scope_value = op->scope_value;
    approval.resolved_at = op->now;
    approval.decision_sig = op->decision_sig;
    approval.device_id = op->device_id;
    result = RL_TXN(txn, approval_update, &approval);
    if (result == 0)
        result = send_decision(txn, op, &approval);
    if (result != 0)
        return result;
    op->changed = 1;
    op->op.value = rl_view_approval(&approval);
    return 0;
}

static void approval_decide_dispose(rl_store_op_t *base)
{
    struct approval_decide *op = (void *)base;

    json_decref(op->errors);
    rl_op_dispose(base);
}

static const rl_store_op_type_t approval_decide_type = {"approval_decide", 1, approval_decide_run,
                                                        approval_decide_dispose};

static void on_decided(rl_store_op_t *base)
{
    struct approval_decide *op = (void *)base;
    rl_call_t *call = base->arg;
    const rl_turn_ctx_t *turn = rl_feature_of(call, RL_FEATURE_TURN);
    json_t *reply;

    if (base->result == RL_E_INVALID_REQUEST && op->errors != NULL) {
        rl_call_fail_full(call, base->result, "in an encrypted session a decision must be signed by a device",
                          json_incref(op->errors), NULL);
        rl_call_release(call);
        return;
    }
    if (base->result != 0) {
        rl_call_fail(call, base->result, NULL);
        rl_call_release(call);
        return;
    }
    reply = resolution(op->op.value);
    if (op->forwarded) {
        /* This decision, as the bridge got it; the approval's record keeps the first. */
        json_object_set_new(reply, "decision", json_string(op->decision));
        json_object_del(reply, "scope");
        json_object_del(reply, "scope_value");
        if (op->scope != NULL)
            json_object_set_new(reply, "scope", json_string(op->scope));
        if (op->scope_value != NULL)
            json_object_set_new(reply, "scope_value", json_string(op->scope_value));
        json_object_set_new(reply, "forwarded", json_true());
    }
    if ((op->changed || op->forwarded) && op->decision_sig != NULL)
        json_object_set_new(reply, "decision_sig", json_string(op->decision_sig));
    if ((op->changed || op->forwarded) && op->device_id != NULL)
        json_object_set_new(reply, "device_id", json_string(op->device_id));
    if (op->changed) {
        /* spec: approval_resolved to the client and approval.resolved to the bridge, with the same payload. */
        rl_hub_publish(turn->hub, call->principal, RL_EV_APPROVAL_RESOLVED, json_incref(reply));
        rl_updates_notify(turn->bus, op->installation_id, op->op.update_id);
    } else if (op->forwarded) {
        rl_updates_notify(turn->bus, op->installation_id, op->op.update_id);
    } else {
        json_object_set_new(reply, "idempotent", json_true());
    }
    rl_call_reply(call, reply);
    rl_call_release(call);
}

int rl_approval_decide(rl_call_t *call)
{
    struct approval_decide *op;
    char approval_id[140];

    if (rl_call_param(call, 0, approval_id, sizeof(approval_id)) != 0)
        return RL_E_APPROVAL_NOT_FOUND;
    op = rl_op_new(&approval_decide_type, sizeof(*op));
    op->user_id = rl_op_str(op, call->principal);
    op->approval_id = rl_op_str(op, approval_id);
    op->decision = rl_op_str(op, rl_body_string(call, "decision"));
    op->scope = rl_op_str(op, rl_body_string(call, "scope"));
    op->scope_value = rl_op_str(op, rl_body_string(call, "scope_value"));
    op->of_installation = rl_op_str(op, rl_body_string(call, "installation_id"));
    op->decision_sig = rl_op_str(op, rl_body_string(call, "decision_sig"));
    op->device_id = rl_op_str(op, rl_body_string(call, "device_id"));
    op->now = rl_clock_now_ms();
    rl_op_submit_for(call, op, on_decided);
    return 0;
}

/* ---- the snapshot ---- */

struct snapshot {
    rl_op_t op;
    const char *user_id;
    int64_t now;
};

static int snapshot_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct snapshot *op = (void *)base;
    rl_approval_row_t *rows;
    size_t count, i;
    json_t *approvals, *capabilities;
    int result = RL_TXN(txn, approvals_pending_of_user, op->user_id, op->now, &rows, &count);

    if (result != 0)
        return result;
    approvals = json_array();
    for (i = 0; i < count; ++i) {
        json_t *approval = rl_view_approval(&rows[i]);
        json_array_append_new(approvals, rl_view_pending_approval(approval));
        json_decref(approval);
    }
    if ((result = rl_capabilities_pending(txn, op->user_id, op->now, &capabilities)) != 0) {
        json_decref(approvals);
        return result;
    }
    /* ours: the pending capability requests beside the spec's pending approvals (docs/api.md). */
    op->op.value = json_pack("{s:o, s:o}", "pending_approvals", approvals, "pending_capability_requests", capabilities);
    return 0;
}

static const rl_store_op_type_t snapshot_type = RL_OP_TYPE(approvals_pending, 0, snapshot_run);

static void on_snapshot(rl_store_op_t *base)
{
    struct snapshot *op = (void *)base;
    rl_call_t *call = base->arg;

    if (base->result != 0)
        rl_call_fail(call, base->result, NULL);
    else
        rl_call_reply(call, json_pack("{s:I, s:O, s:O}", "ts", (json_int_t)rl_clock_now_ms(), "pending_approvals",
                                      json_object_get(op->op.value, "pending_approvals"), "pending_capability_requests",
                                      json_object_get(op->op.value, "pending_capability_requests")));
    rl_call_release(call);
}

int rl_snapshot_get(rl_call_t *call)
{
    struct snapshot *op = rl_op_new(&snapshot_type, sizeof(*op));

    op->user_id = rl_op_str(op, call->principal);
    op->now = rl_clock_now_ms();
    rl_op_submit_for(call, op, on_snapshot);
    return 0;
}

/* ---- expiry ---- */

struct expire {
    rl_op_t op;
    int64_t now;
    /* results: the approvals this sweep expired, each {approval, update_id} */
};

static int expire_one(rl_txn_t *txn, rl_approval_row_t *approval, int64_t now, json_t *expired)
{
    int64_t update_id = 0;
    int result;

    approval->state = "expired";
    approval->resolved_at = now;
    /* spec: the bridge hears approval.expired and denies the request to the agent. */
    if ((result = RL_TXN(txn, approval_update, approval)) != 0 ||
        (result = rl_update_append(txn, approval->installation_id, RL_UP_APPROVAL_EXPIRED, approval->session_id,
                                   approval->interaction_id, rl_update_approval_expired(approval->id), now,
                                   &update_id)) != 0)
        return result;
    json_array_append_new(
        expired, json_pack("{s:o, s:I}", "approval", rl_view_approval(approval), "update_id", (json_int_t)update_id));
    return 0;
}

static int expire_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct expire *op = (void *)base;
    rl_approval_row_t *rows;
    size_t count, i;
    int result = RL_TXN(txn, approvals_due, op->now, SWEEP_MAX, &rows, &count);

    if (result != 0)
        return result;
    op->op.value = json_array();
    for (i = 0; i < count && result == 0; ++i)
        result = expire_one(txn, &rows[i], op->now, op->op.value);
    return result;
}

int rl_approvals_expire_turn(rl_txn_t *txn, const char *user_id, const char *session_id, const char *interaction_id,
                             int64_t now, json_t *expired)
{
    rl_approval_row_t *rows;
    size_t count, i;
    int result = RL_TXN(txn, approvals_pending_of_user, user_id, now, &rows, &count);

    for (i = 0; i < count && result == 0; ++i) {
        if (strcmp(rows[i].session_id, session_id) != 0 ||
            (interaction_id != NULL && strcmp(rows[i].interaction_id, interaction_id) != 0))
            continue;
        result = expire_one(txn, &rows[i], now, expired);
    }
    return result;
}

static const rl_store_op_type_t expire_type = RL_OP_TYPE(approvals_expire, 1, expire_run);

rl_store_op_t *rl_approvals_expiry(rl_turn_ctx_t *turn, int64_t now)
{
    struct expire *op = rl_op_new(&expire_type, sizeof(*op));

    op->now = now;
    return &op->op.base;
}

void rl_approvals_expired(rl_turn_ctx_t *turn, rl_store_op_t *base)
{
    struct expire *op = (void *)base;

    if (base->result != 0) {
        /* The store logs its own outage once (RL_E_UNAVAILABLE): the sweep meeting it is not news each second. */
        if (base->result == RL_E_UNAVAILABLE)
            rl_log_debug("the approval expiry sweep found the store unavailable; it runs again in a second");
        else
            rl_log_warn("the approval expiry sweep failed; it runs again in a second");
        return;
    }
    rl_approvals_publish_expired(turn->hub, turn->bus, op->op.value);
}

void rl_approvals_publish_expired(struct rl_hub *hub, rl_bus_t *bus, json_t *expired)
{
    json_t *item;
    size_t i;

    json_array_foreach(expired, i, item)
    {
        json_t *approval = json_object_get(item, "approval");
        /* brief: approval_expired to the client, approval.expired to the bridge. */
        rl_hub_publish(hub, json_string_value(json_object_get(approval, "user_id")), RL_EV_APPROVAL_EXPIRED,
                       json_pack("{s:O, s:O, s:O}", "approval_id", json_object_get(approval, "approval_id"),
                                 "session_id", json_object_get(approval, "session_id"), "interaction_id",
                                 json_object_get(approval, "interaction_id")));
        rl_updates_notify(bus, json_string_value(json_object_get(approval, "installation_id")),
                          json_integer_value(json_object_get(item, "update_id")));
    }
}
