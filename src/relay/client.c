/*
 * The client API (/v1/me): the account, sessions and their state machine,
 * history, sending, and installation settings. Every change is durable
 * before it is answered or published: handlers answer and publish from the
 * store's completion callbacks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/rand.h"
#include "http/query.h"
#include "http/validate.h"
#include "relay/attachments.h"
#include "relay/bridge_ws.h"
#include "relay/deltas.h"
#include "relay/relay.h"
#include "relay/token.h"

#define ID_CHARS        20
#define TITLE_MAX       200
#define TEXT_MAX        0 /* unbounded: the 1 MB body limit bounds a text (issue 11) */
#define HISTORY_DEFAULT 50
#define HISTORY_MAX     100

static int check_installation_id(const char *s, size_t len)
{
    return rl_installation_id_is_valid(s, len) ? 0 : -1;
}

static const rl_field_t session_create_fields[] = {
    RL_FIELD_STRING_CHECK("installation_id", RL_F_REQUIRED, 1, 64, check_installation_id,
                          "Installation ids look like inst_ followed by 16 letters or digits"),
    RL_FIELD_STRING("title", RL_F_NULLABLE, 0, TITLE_MAX),
    RL_FIELD_END,
};
const rl_schema_t rl_session_create_schema = RL_SCHEMA(session_create_fields);

static const rl_field_t session_rename_fields[] = {
    RL_FIELD_STRING("title", RL_F_REQUIRED | RL_F_NULLABLE, 0, TITLE_MAX),
    RL_FIELD_END,
};
const rl_schema_t rl_session_rename_schema = RL_SCHEMA(session_rename_fields);

static const rl_field_t session_cancel_fields[] = {
    RL_FIELD_STRING("interaction_id", RL_F_NULLABLE, 1, 64),
    RL_FIELD_END,
};
const rl_schema_t rl_session_cancel_schema = RL_SCHEMA(session_cancel_fields);

static const char *const thought_levels[] = {"default", "extended", "max", NULL};

static const rl_field_t message_send_fields[] = {
    RL_FIELD_STRING("text", RL_F_REQUIRED, 0, TEXT_MAX),
    RL_FIELD_ARRAY("attachments", 0, 0, 10, &rl_attachment_ref_item),
    RL_FIELD_STRING("reply_to", RL_F_NULLABLE, 1, 64),
    RL_FIELD_ENUM("thought_level", 0, thought_levels),
    RL_FIELD_END,
};
const rl_schema_t rl_message_send_schema = RL_SCHEMA(message_send_fields);

static const rl_field_t installation_patch_fields[] = {
    RL_FIELD_STRING("custom_display_name", RL_F_NULLABLE, 1, 64),
    RL_FIELD_STRING("custom_emoji", RL_F_NULLABLE, 1, 16),
    RL_FIELD_END,
};
const rl_schema_t rl_installation_patch_schema = RL_SCHEMA(installation_patch_fields);

/* ---- views ---- */

json_t *rl_installation_view(rl_relay_t *relay, json_t *row)
{
    json_t *view = json_pack("{s:O, s:O, s:O, s:O, s:O, s:O, s:O, s:s}", "id", json_object_get(row, "id"),
                             "custom_display_name", json_object_get(row, "custom_display_name"), "custom_emoji",
                             json_object_get(row, "custom_emoji"), "connector_type",
                             json_object_get(row, "connector_type"), "host_label", json_object_get(row, "host_label"),
                             "state", json_object_get(row, "state"), "created_at", json_object_get(row, "created_at"),
                             "health", rl_bridge_health(relay, json_string_value(json_object_get(row, "id"))));

    json_decref(row);
    return view;
}

json_t *rl_session_view(rl_relay_t *relay, json_t *row)
{
    json_t *deleted_at = json_object_get(row, "deleted_at");
    json_t *view = json_pack("{s:O, s:O, s:O, s:O, s:O, s:O, s:O}", "id", json_object_get(row, "id"), "installation_id",
                             json_object_get(row, "installation_id"), "title", json_object_get(row, "title"), "state",
                             json_object_get(row, "state"), "created_at", json_object_get(row, "created_at"),
                             "updated_at", json_object_get(row, "updated_at"), "deleted_at", deleted_at);

    /* brief: a deleted session can be restored for the grace period, then it is purged. */
    json_object_set_new(view, "restore_until",
                        json_is_integer(deleted_at)
                            ? json_integer(json_integer_value(deleted_at) + relay->config.delete_grace)
                            : json_null());
    json_decref(row);
    return view;
}

void rl_relay_publish(rl_relay_t *relay, const char *user_id, const char *name, json_t *data)
{
    if (rl_bus_publish(relay->bus, user_id, name, data) < 0)
        rl_log_warn("could not publish %s", name);
}

void rl_relay_update_queued(rl_relay_t *relay, const char *installation_id, int64_t update_id)
{
    if (relay->on_update_queued != NULL)
        relay->on_update_queued(relay, installation_id, update_id);
}

/* Copies path parameter i; an id longer than any we mint cannot exist. */
static int param(rl_call_t *call, size_t i, char *buf, size_t bufsz, int not_found)
{
    return rl_call_param(call, i, buf, bufsz) == 0 ? 0 : not_found;
}

static const char *body_string(rl_call_t *call, const char *key)
{
    return json_string_value(json_object_get(call->body, key));
}

/* ---- GET /v1/me ---- */

static void on_me(int result, json_t *value, void *arg)
{
    rl_call_t *call = arg;
    rl_relay_t *relay = call->app;
    json_t *installations = json_array(), *sessions = json_array(), *item;
    size_t i;

    if (result != 0) {
        rl_call_fail(call, result, NULL);
    } else {
        json_array_foreach(json_object_get(value, "installations"), i, item)
            json_array_append_new(installations, rl_installation_view(relay, json_incref(item)));
        json_array_foreach(json_object_get(value, "sessions"), i, item)
            json_array_append_new(sessions, rl_session_view(relay, json_incref(item)));
        rl_call_reply(call, json_pack("{s:O, s:O, s:O}", "user", json_object_get(value, "user"), "installations",
                                      installations, "sessions", sessions));
    }
    json_decref(installations);
    json_decref(sessions);
    json_decref(value);
    rl_call_release(call);
}

int rl_me_get(rl_call_t *call)
{
    rl_relay_t *relay = call->app;

    rl_call_hold(call);
    rl_store_me_get(relay->store, call->principal, on_me, call);
    return 0;
}

/* ---- sessions ---- */

static void on_session_created(int result, json_t *value, void *arg)
{
    rl_call_t *call = arg;
    rl_relay_t *relay = call->app;

    if (result != 0) {
        rl_call_fail(call, result, NULL);
    } else {
        json_t *session = rl_session_view(relay, json_incref(json_object_get(value, "session")));
        rl_relay_publish(relay, call->principal, "session_created",
                         json_pack("{s:O, s:O}", "session_id", json_object_get(session, "id"), "session", session));
        rl_relay_update_queued(relay, json_string_value(json_object_get(session, "installation_id")),
                               json_integer_value(json_object_get(value, "update_id")));
        rl_call_reply(call, json_pack("{s:O, s:o}", "session_id", json_object_get(session, "id"), "session", session));
    }
    json_decref(value);
    rl_call_release(call);
}

int rl_session_create(rl_call_t *call)
{
    rl_relay_t *relay = call->app;
    char session_id[32];
    rl_session_new_t session;

    rl_rand_id(session_id, sizeof(session_id), "ses_", ID_CHARS);
    session.user_id = call->principal;
    session.installation_id = body_string(call, "installation_id");
    session.session_id = session_id;
    session.title = body_string(call, "title");
    session.now = rl_clock_now_ms();
    rl_call_hold(call);
    rl_store_session_create(relay->store, &session, on_session_created, call);
    return 0;
}

static void on_session_changed(int result, json_t *value, void *arg)
{
    rl_call_t *call = arg;
    rl_relay_t *relay = call->app;
    rl_session_op_t op = (rl_session_op_t)call->handler_tag;
    json_t *session;
    int changed;

    if (result != 0) {
        rl_call_fail(call, result, NULL);
        json_decref(value);
        rl_call_release(call);
        return;
    }
    session = rl_session_view(relay, json_incref(json_object_get(value, "session")));
    changed = json_is_true(json_object_get(value, "changed"));
    /* spec: each transition emits its event; a request that changes nothing emits none. */
    if (op == RL_SESSION_RENAME) {
        rl_relay_publish(relay, call->principal, "session_renamed",
                         json_pack("{s:O, s:O, s:O}", "session_id", json_object_get(session, "id"), "title",
                                   json_object_get(session, "title"), "session", session));
    } else if (changed && op == RL_SESSION_DELETE) {
        rl_deltas_forget_session(relay, json_string_value(json_object_get(session, "id")));
        rl_relay_publish(relay, call->principal, "session_deleted",
                         json_pack("{s:O, s:O, s:O}", "session_id", json_object_get(session, "id"), "deleted_at",
                                   json_object_get(session, "deleted_at"), "restore_until",
                                   json_object_get(session, "restore_until")));
    } else if (changed) {
        rl_relay_publish(relay, call->principal, "session_updated",
                         json_pack("{s:O, s:O, s:O}", "session_id", json_object_get(session, "id"), "state",
                                   json_object_get(session, "state"), "session", session));
    }
    rl_call_reply(call, json_pack("{s:O, s:o}", "session_id", json_object_get(session, "id"), "session", session));
    json_decref(value);
    rl_call_release(call);
}

/* The session state machine's transitions; the route row says which (call->handler_tag). */
int rl_session_change(rl_call_t *call)
{
    rl_relay_t *relay = call->app;
    rl_session_op_t op = (rl_session_op_t)call->handler_tag;
    char session_id[72];
    int result = param(call, 0, session_id, sizeof(session_id), RL_E_SESSION_NOT_FOUND);

    if (result != 0)
        return result;
    rl_call_hold(call);
    rl_store_session_change(relay->store, call->principal, session_id, op,
                            op == RL_SESSION_RENAME ? body_string(call, "title") : NULL, rl_clock_now_ms(),
                            relay->config.delete_grace, on_session_changed, call);
    return 0;
}

static void on_session_cancelled(int result, json_t *value, void *arg)
{
    rl_call_t *call = arg;
    rl_relay_t *relay = call->app;

    if (result != 0) {
        rl_call_fail(call, result, NULL);
    } else {
        json_t *session = json_object_get(value, "session");
        rl_relay_update_queued(relay, json_string_value(json_object_get(session, "installation_id")),
                               json_integer_value(json_object_get(value, "update_id")));
        rl_call_reply(call, json_pack("{s:O, s:O}", "session_id", json_object_get(session, "id"), "interaction_id",
                                      call->body != NULL && json_object_get(call->body, "interaction_id") != NULL
                                          ? json_object_get(call->body, "interaction_id")
                                          : json_null()));
    }
    json_decref(value);
    rl_call_release(call);
}

int rl_session_cancel(rl_call_t *call)
{
    rl_relay_t *relay = call->app;
    char session_id[72];
    int result = param(call, 0, session_id, sizeof(session_id), RL_E_SESSION_NOT_FOUND);

    if (result != 0)
        return result;
    rl_call_hold(call);
    rl_store_session_cancel(relay->store, call->principal, session_id, body_string(call, "interaction_id"),
                            rl_clock_now_ms(), on_session_cancelled, call);
    return 0;
}

/* ---- history ---- */

static void on_history(int result, json_t *value, void *arg)
{
    rl_call_t *call = arg;

    if (result != 0) {
        if (result == RL_E_MESSAGE_NOT_FOUND)
            rl_call_fail_full(
                call, RL_E_INVALID_REQUEST, "the cursor is not a message of this session",
                json_pack("[{s:s, s:s, s:s}]", "path", "before", "code", "invalid_string", "message", "Unknown cursor"),
                NULL);
        else
            rl_call_fail(call, result, NULL);
    } else {
        json_t *message;
        size_t i;
        json_array_foreach(json_object_get(value, "messages"), i, message)
            rl_attachments_hydrate(call->app, json_object_get(message, "attachments"));
        rl_call_reply(call, json_incref(value));
    }
    json_decref(value);
    rl_call_release(call);
}

int rl_messages_list(rl_call_t *call)
{
    rl_relay_t *relay = call->app;
    h2o_req_t *req = call->req;
    char session_id[72], before[72] = "", value[80], *tail;
    json_t *errors = json_array();
    long limit = HISTORY_DEFAULT;
    int result = param(call, 0, session_id, sizeof(session_id), RL_E_SESSION_NOT_FOUND);

    if (result != 0) {
        json_decref(errors);
        return result;
    }
    switch (rl_query_param(req, "limit", value, sizeof(value))) {
    case 1:
        break;
    case 0:
        limit = strtol(value, &tail, 10);
        if (value[0] != '\0' && *tail == '\0' && limit >= 1 && limit <= HISTORY_MAX)
            break;
        json_array_append_new(errors, value[0] == '\0' || *tail != '\0'
                                          ? json_pack("{s:s, s:s, s:s}", "path", "limit", "code", "invalid_type",
                                                      "message", "Expected integer, received string")
                                          : json_pack("{s:s, s:s, s:s}", "path", "limit", "code",
                                                      limit < 1 ? "too_small" : "too_big", "message",
                                                      limit < 1 ? "Number must be greater than or equal to 1"
                                                                : "Number must be less than or equal to 100"));
        break;
    default:
        json_array_append_new(errors, json_pack("{s:s, s:s, s:s}", "path", "limit", "code", "invalid_type", "message",
                                                "Expected integer, received string"));
    }
    if (rl_query_param(req, "before", before, sizeof(before)) == -1 ||
        (before[0] == '\0' && req->query_at != SIZE_MAX && rl_query_param(req, "before", value, sizeof(value)) == 0))
        json_array_append_new(errors, json_pack("{s:s, s:s, s:s}", "path", "before", "code", "invalid_string",
                                                "message", "Invalid cursor"));
    if (json_array_size(errors) > 0) {
        rl_call_fail_full(call, RL_E_INVALID_REQUEST, NULL, errors, NULL);
        return 0;
    }
    json_decref(errors);
    /* Deltas answered but not yet persisted are part of the history: they land before this read. */
    rl_deltas_flush(relay);
    rl_call_hold(call);
    rl_store_messages_list(relay->store, call->principal, session_id, (int)limit, before[0] != '\0' ? before : NULL,
                           on_history, call);
    return 0;
}

/* ---- send ---- */

static void on_sent(int result, json_t *value, void *arg)
{
    rl_call_t *call = arg;
    rl_relay_t *relay = call->app;

    if (result == RL_E_NOT_FOUND) {
        rl_call_fail_full(call, RL_E_INVALID_REQUEST, NULL,
                          json_pack("[{s:s, s:s, s:s}]", "path", "attachments", "code", "invalid_string", "message",
                                    "Unknown attachment key"),
                          NULL);
    } else if (result == RL_E_MESSAGE_NOT_FOUND) {
        rl_call_fail_full(call, RL_E_INVALID_REQUEST, NULL,
                          json_pack("[{s:s, s:s, s:s}]", "path", "reply_to", "code", "invalid_string", "message",
                                    "No such message in this session"),
                          NULL);
    } else if (result != 0) {
        rl_call_fail(call, result, NULL);
    } else {
        json_t *message = json_object_get(value, "message");
        json_t *session = json_object_get(value, "session");
        /* spec: the user message is announced as message_added, then reaches the bridge as session.message. */
        rl_attachments_hydrate(relay, json_object_get(message, "attachments"));
        rl_relay_publish(relay, call->principal, "message_added", json_incref(message));
        rl_relay_update_queued(relay, json_string_value(json_object_get(session, "installation_id")),
                               json_integer_value(json_object_get(value, "update_id")));
        rl_call_reply(call, json_pack("{s:O, s:O}", "interaction_id", json_object_get(message, "interaction_id"),
                                      "message_id", json_object_get(message, "message_id")));
    }
    json_decref(value);
    rl_call_release(call);
}

struct send {
    rl_call_t *call;
    char session_id[72];
};

static void store_message(struct send *send)
{
    rl_call_t *call = send->call;
    rl_relay_t *relay = call->app;
    json_t *attachments = json_object_get(call->body, "attachments");
    const char *thought_level = body_string(call, "thought_level");
    char interaction_id[32], message_id[32];
    rl_message_send_t message;
    char *attachments_text = attachments != NULL ? json_dumps(attachments, JSON_COMPACT) : strdup("[]");

    if (attachments_text == NULL) {
        rl_call_fail(call, RL_E_INTERNAL, NULL);
        rl_call_release(call);
        return;
    }
    rl_rand_id(interaction_id, sizeof(interaction_id), "int_", ID_CHARS);
    rl_rand_id(message_id, sizeof(message_id), "msg_", ID_CHARS);
    message.user_id = call->principal;
    message.session_id = send->session_id;
    message.interaction_id = interaction_id;
    message.message_id = message_id;
    message.text = body_string(call, "text");
    message.attachments = attachments_text;
    message.reply_to = body_string(call, "reply_to");
    message.thought_level = thought_level != NULL ? thought_level : "default";
    message.now = rl_clock_now_ms();
    rl_store_message_send(relay->store, &message, on_sent, call);
    free(attachments_text);
}

static void on_send_target(int result, json_t *session, void *arg)
{
    struct send *send = arg;
    rl_call_t *call = send->call;
    rl_relay_t *relay = call->app;
    const char *installation_id = json_string_value(json_object_get(session, "installation_id"));

    if (result != 0) {
        rl_call_fail(call, result, NULL);
        rl_call_release(call);
    } else if (installation_id != NULL && strcmp(rl_bridge_health(relay, installation_id), "degraded") == 0) {
        /* brief: an offline agent gets the message queued; a degraded one is refused until it answers again. */
        call->rate.retry_after_ms = relay->config.ws_pong_timeout;
        rl_call_fail(call, RL_E_AGENT_DEGRADED, NULL);
        rl_call_release(call);
    } else {
        store_message(send);
    }
    json_decref(session);
    free(send);
}

int rl_message_send(rl_call_t *call)
{
    rl_relay_t *relay = call->app;
    json_t *attachments = json_object_get(call->body, "attachments");
    struct send *send;

    if (body_string(call, "text")[0] == '\0' && json_array_size(attachments) == 0) {
        rl_call_fail_full(call, RL_E_INVALID_REQUEST, NULL,
                          json_pack("[{s:s, s:s, s:s}]", "path", "text", "code", "too_small", "message",
                                    "A message needs text or at least one attachment"),
                          NULL);
        return 0;
    }
    send = calloc(1, sizeof(*send));
    if (send == NULL)
        return RL_E_INTERNAL;
    send->call = call;
    if (param(call, 0, send->session_id, sizeof(send->session_id), RL_E_SESSION_NOT_FOUND) != 0) {
        free(send);
        return RL_E_SESSION_NOT_FOUND;
    }
    rl_call_hold(call);
    rl_store_session_get(relay->store, call->principal, send->session_id, on_send_target, send);
    return 0;
}

/* ---- installations ---- */

static void on_installation_patched(int result, json_t *value, void *arg)
{
    rl_call_t *call = arg;
    rl_relay_t *relay = call->app;

    if (result != 0) {
        rl_call_fail(call, result, NULL);
    } else {
        json_t *view = rl_installation_view(relay, value);
        value = NULL;
        rl_relay_publish(relay, call->principal, "installation_updated",
                         json_pack("{s:O, s:O}", "installation_id", json_object_get(view, "id"), "installation", view));
        rl_call_reply(call, json_pack("{s:o}", "installation", view));
    }
    json_decref(value);
    rl_call_release(call);
}

int rl_installation_patch(rl_call_t *call)
{
    rl_relay_t *relay = call->app;
    char installation_id[40];
    rl_installation_patch_t patch;
    int result = param(call, 0, installation_id, sizeof(installation_id), RL_E_INSTALLATION_NOT_FOUND);

    if (result != 0)
        return result;
    patch.set_name = json_object_get(call->body, "custom_display_name") != NULL;
    patch.set_emoji = json_object_get(call->body, "custom_emoji") != NULL;
    patch.name = body_string(call, "custom_display_name");
    patch.emoji = body_string(call, "custom_emoji");
    if (!patch.set_name && !patch.set_emoji) {
        rl_call_fail_full(call, RL_E_INVALID_REQUEST, "nothing to change",
                          json_pack("[{s:s, s:s, s:s}]", "path", "", "code", "too_small", "message",
                                    "Give custom_display_name, custom_emoji or both"),
                          NULL);
        return 0;
    }
    rl_call_hold(call);
    rl_store_installation_patch(relay->store, call->principal, installation_id, &patch, on_installation_patched, call);
    return 0;
}

static void on_installation_revoked(int result, json_t *value, void *arg)
{
    rl_call_t *call = arg;
    rl_relay_t *relay = call->app;

    if (result != 0) {
        rl_call_fail(call, result, NULL);
    } else {
        json_t *view = rl_installation_view(relay, json_incref(json_object_get(value, "installation")));
        const char *id = json_string_value(json_object_get(view, "id"));
        if (json_is_true(json_object_get(value, "changed"))) {
            rl_log_info("installation %s revoked", id);
            rl_relay_publish(relay, call->principal, "installation_revoked",
                             json_pack("{s:s, s:O}", "installation_id", id, "installation", view));
            rl_auth_forget_installation(relay, id);
            if (relay->on_installation_revoked != NULL)
                relay->on_installation_revoked(relay, id);
        }
        rl_call_reply(call, json_pack("{s:o}", "installation", view));
    }
    json_decref(value);
    rl_call_release(call);
}

int rl_installation_revoke(rl_call_t *call)
{
    rl_relay_t *relay = call->app;
    char installation_id[40];
    int result = param(call, 0, installation_id, sizeof(installation_id), RL_E_INSTALLATION_NOT_FOUND);

    if (result != 0)
        return result;
    rl_call_hold(call);
    rl_store_installation_revoke(relay->store, call->principal, installation_id, rl_clock_now_ms(),
                                 on_installation_revoked, call);
    return 0;
}
