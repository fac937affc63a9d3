/*
 * Approvals from the client's side: the decision, the snapshot of pending
 * approvals, and their expiry. Expiry is a sweep of the store once a second,
 * so it needs no timers of its own and survives restarts: an approval
 * expires within a second of its expires_at.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "http/validate.h"
#include "relay/relay.h"

#define SWEEP_MS 1000

static const char *const decisions[] = {"approve", "approve_always", "deny", NULL};
static const char *const scopes[] = {"session", "tool", "domain", "all", NULL};

static const rl_field_t decide_fields[] = {
    RL_FIELD_ENUM("decision", RL_F_REQUIRED, decisions),
    RL_FIELD_ENUM("scope", RL_F_NULLABLE, scopes),
    RL_FIELD_STRING("scope_value", RL_F_NULLABLE, 0, 8192),
    RL_FIELD_END,
};
const rl_schema_t rl_approval_decide_schema = RL_SCHEMA(decide_fields);

json_t *rl_approval_view(json_t *approval)
{
    static const char *const fields[] = {"approval_id", "installation_id", "agent_id",   "session_id", "interaction_id",
                                         "action",      "title",           "message",    "severity",   "command",
                                         "host",        "tool_call_id",    "expires_at", "ts"};
    json_t *view = json_object();
    size_t i;

    for (i = 0; i < sizeof(fields) / sizeof(fields[0]); ++i) {
        json_t *field = json_object_get(approval, fields[i]);
        json_object_set(view, fields[i], field != NULL ? field : json_null());
    }
    return view;
}

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

static void on_decided(int result, json_t *value, void *arg)
{
    rl_call_t *call = arg;
    rl_relay_t *relay = call->app;

    if (result != 0) {
        rl_call_fail(call, result, NULL);
    } else {
        json_t *approval = json_object_get(value, "approval");
        json_t *reply = resolution(approval);
        if (json_is_true(json_object_get(value, "changed"))) {
            /* spec: approval_resolved to the client and approval.resolved to the bridge, with the same payload. */
            rl_relay_publish(relay, call->principal, "approval_resolved", json_incref(reply));
            rl_relay_update_queued(relay, json_string_value(json_object_get(approval, "installation_id")),
                                   json_integer_value(json_object_get(value, "update_id")));
        } else {
            /* brief: the first decision wins; a later one gets it back. */
            json_object_set_new(reply, "idempotent", json_true());
        }
        rl_call_reply(call, reply);
    }
    json_decref(value);
    rl_call_release(call);
}

int rl_approval_decide(rl_call_t *call)
{
    rl_relay_t *relay = call->app;
    const char *scope = json_string_value(json_object_get(call->body, "scope"));
    const char *scope_value = json_string_value(json_object_get(call->body, "scope_value"));
    char approval_id[140];

    if (rl_call_param(call, 0, approval_id, sizeof(approval_id)) != 0)
        return RL_E_APPROVAL_NOT_FOUND;
    rl_call_hold(call);
    rl_store_approval_decide(relay->store, call->principal, approval_id,
                             json_string_value(json_object_get(call->body, "decision")), scope, scope_value,
                             rl_clock_now_ms(), on_decided, call);
    return 0;
}

static void on_snapshot(int result, json_t *value, void *arg)
{
    rl_call_t *call = arg;

    if (result != 0) {
        rl_call_fail(call, result, NULL);
    } else {
        json_t *pending = json_array(), *approval;
        size_t i;
        json_array_foreach(json_object_get(value, "approvals"), i, approval)
            json_array_append_new(pending, rl_approval_view(approval));
        rl_call_reply(call, json_pack("{s:I, s:o}", "ts", (json_int_t)rl_clock_now_ms(), "pending_approvals", pending));
    }
    json_decref(value);
    rl_call_release(call);
}

int rl_snapshot_get(rl_call_t *call)
{
    rl_relay_t *relay = call->app;

    rl_call_hold(call);
    rl_store_approvals_pending(relay->store, call->principal, rl_clock_now_ms(), on_snapshot, call);
    return 0;
}

static void on_expired(int result, json_t *value, void *arg)
{
    rl_relay_t *relay = arg;
    json_t *approval = json_object_get(value, "approval");

    if (result == 0 && json_is_true(json_object_get(value, "changed"))) {
        /* brief: approval_expired to the client, approval.expired to the bridge. */
        rl_relay_publish(relay, json_string_value(json_object_get(approval, "user_id")), "approval_expired",
                         json_pack("{s:O, s:O, s:O}", "approval_id", json_object_get(approval, "approval_id"),
                                   "session_id", json_object_get(approval, "session_id"), "interaction_id",
                                   json_object_get(approval, "interaction_id")));
        rl_relay_update_queued(relay, json_string_value(json_object_get(approval, "installation_id")),
                               json_integer_value(json_object_get(value, "update_id")));
    }
    json_decref(value);
}

static void on_due(int result, json_t *value, void *arg)
{
    rl_relay_t *relay = arg;
    json_t *approval;
    int64_t now = rl_clock_now_ms();
    size_t i;

    relay->approvals_sweeping = 0;
    if (result == 0) {
        json_array_foreach(json_object_get(value, "approvals"), i, approval) rl_store_approval_expire(
            relay->store, json_string_value(json_object_get(approval, "approval_id")), now, on_expired, relay);
    }
    json_decref(value);
}

static void on_sweep(h2o_timeout_entry_t *entry)
{
    rl_relay_t *relay = H2O_STRUCT_FROM_MEMBER(rl_relay_t, approvals_sweep, entry);

    if (!relay->approvals_sweeping) {
        relay->approvals_sweeping = 1;
        rl_store_approvals_pending(relay->store, NULL, rl_clock_now_ms(), on_due, relay);
    }
    h2o_timeout_link(relay->loop, &relay->approval_timeout, &relay->approvals_sweep);
}

void rl_approvals_start(rl_relay_t *relay)
{
    h2o_timeout_init(relay->loop, &relay->approval_timeout, SWEEP_MS);
    relay->approvals_sweep.cb = on_sweep;
    h2o_timeout_link(relay->loop, &relay->approval_timeout, &relay->approvals_sweep);
}

void rl_approvals_stop(rl_relay_t *relay)
{
    if (h2o_timeout_is_linked(&relay->approvals_sweep))
        h2o_timeout_unlink(&relay->approvals_sweep);
}
