#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/rand.h"
#include "http/query.h"
#include "relay/media/attachments.h"
#include "relay/turn/deltas.h"
#include "relay/e2e/e2e.h"
#include "relay/core/hub.h"
#include "relay/core/idempotency.h"
#include "relay/turn/messages.h"
#include "relay/core/ops.h"
#include "relay/core/feature.h"
#include "relay/sessions/sessions.h"
#include "relay/core/text.h"
#include "relay/core/updates.h"
#include "relay/core/views.h"
#include "relay/turn/turn.h"

#define ID_CHARS        20
#define TEXT_MAX        0 /* unbounded: the 1 MB body limit bounds a text (issue 11) */
#define HISTORY_DEFAULT 50
#define HISTORY_MAX     100
/*
 * A page stops taking messages once their texts pass this, so that a page
 * is bounded whatever --limit asks: at most this plus one message
 * (--max-message-bytes, at most 4 MiB).
 */
#define HISTORY_PAGE_BYTES (4 * 1024 * 1024)

static const char *const thought_levels[] = {"default", "extended", "max", NULL};

static const rl_field_t message_send_fields[] = {
    RL_FIELD_STRING("text", RL_F_NULL_ABSENT, 0, TEXT_MAX),
    RL_FIELD_CT("text_ct", 0, TEXT_MAX),
    RL_FIELD_ARRAY("attachments", 0, 0, 10, &rl_attachment_ref_item),
    RL_FIELD_STRING("reply_to", RL_F_NULLABLE, 1, 64),
    RL_FIELD_ENUM("thought_level", 0, thought_levels),
    /* ours: a client that sends again after a lost answer (an outbox) is answered, not sent twice. */
    RL_FIELD_STRING("idempotency_key", 0, 1, 256),
    RL_FIELD_END,
};
const rl_schema_t rl_message_send_schema = RL_SCHEMA(message_send_fields);

static json_t *problem(const char *path, const char *code, const char *message)
{
    return json_pack("[{s:s, s:s, s:s}]", "path", path, "code", code, "message", message);
}

/* ---- history ---- */

struct history {
    rl_op_t op;
    const char *user_id, *session_id, *before;
    int limit;
};

static int history_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct history *op = (void *)base;
    rl_session_row_t session;
    rl_message_row_t *rows;
    json_t *messages;
    size_t count, i, shown, bytes;
    int result = rl_session_of_user(txn, op->user_id, op->session_id, &session);

    if (result != 0)
        return result;
    if (session.deleted_at != RL_NO_TIME)
        return RL_E_SESSION_NOT_FOUND;
    /* One row more than asked tells whether there is another page. */
    result = RL_TXN(txn, messages_page, op->session_id, op->before, op->limit + 1, &rows, &count);
    if (result != 0)
        return result == RL_E_NOT_FOUND ? RL_E_MESSAGE_NOT_FOUND : result;
    messages = json_array();
    for (i = 0, bytes = 0; i < count && i < (size_t)op->limit && (i == 0 || bytes < HISTORY_PAGE_BYTES); ++i) {
        const char *text;
        size_t len;
        if ((result = rl_text_of(txn, &rows[i], &text, &len)) != 0) {
            json_decref(messages);
            return result;
        }
        bytes += len;
        json_array_append_new(messages, rl_view_message(&rows[i], text, len));
        if (session.encrypted)
            rl_view_seal_message(json_array_get(messages, json_array_size(messages) - 1));
    }
    shown = i;
    op->op.value = json_pack("{s:o, s:b, s:o}", "messages", messages, "has_more", count > shown, "next_cursor",
                             count > shown ? json_string(rows[shown - 1].id) : json_null());
    return 0;
}

static const rl_store_op_type_t history_type = RL_OP_TYPE(messages_list, 0, history_run);

static void on_history(rl_store_op_t *base)
{
    struct history *op = (void *)base;
    rl_call_t *call = base->arg;

    if (base->result == RL_E_MESSAGE_NOT_FOUND) {
        rl_call_fail_full(call, RL_E_INVALID_REQUEST, "the cursor is not a message of this session",
                          problem("before", "invalid_string", "Unknown cursor"), NULL);
    } else if (base->result != 0) {
        rl_call_fail(call, base->result, NULL);
    } else {
        const rl_turn_ctx_t *turn = rl_feature_of(call, RL_FEATURE_TURN);
        json_t *message;
        size_t i;
        json_array_foreach(json_object_get(op->op.value, "messages"), i, message)
            rl_attachments_sign(turn->media, json_object_get(message, "attachments"));
        rl_call_reply(call, json_incref(op->op.value));
    }
    rl_call_release(call);
}

int rl_page_query(rl_call_t *call, int *limit_out, char *before, size_t beforesz)
{
    h2o_req_t *req = call->req;
    char value[80];
    json_t *errors = json_array();
    long limit = HISTORY_DEFAULT;
    long long asked = 0;

    /* A number of any length is read: past 100 it is too big, as 101 is, not a malformed one. */
    switch (rl_query_integer(req, "limit", &asked)) {
    case 1:
        break;
    case 0:
        if (asked >= 1 && asked <= HISTORY_MAX) {
            limit = (long)asked;
            break;
        }
        json_array_append_new(errors, json_pack("{s:s, s:s, s:s}", "path", "limit", "code",
                                                asked < 1 ? "too_small" : "too_big", "message",
                                                asked < 1 ? "Number must be greater than or equal to 1"
                                                          : "Number must be less than or equal to 100"));
        break;
    default:
        json_array_append_new(errors, json_pack("{s:s, s:s, s:s}", "path", "limit", "code", "invalid_type", "message",
                                                "Expected integer, received string"));
    }
    before[0] = '\0';
    if (rl_query_param(req, "before", before, beforesz) == -1 ||
        (before[0] == '\0' && req->query_at != SIZE_MAX && rl_query_param(req, "before", value, sizeof(value)) == 0))
        json_array_append_new(errors, json_pack("{s:s, s:s, s:s}", "path", "before", "code", "invalid_string",
                                                "message", "Invalid cursor"));
    if (json_array_size(errors) > 0) {
        rl_call_fail_full(call, RL_E_INVALID_REQUEST, NULL, errors, NULL);
        return 1;
    }
    json_decref(errors);
    *limit_out = (int)limit;
    return 0;
}

int rl_messages_list(rl_call_t *call)
{
    const rl_turn_ctx_t *turn = rl_feature_of(call, RL_FEATURE_TURN);
    char session_id[72], before[72];
    struct history *op;
    int limit, result = rl_path_id(call, 0, session_id, sizeof(session_id), RL_E_SESSION_NOT_FOUND);

    if (result != 0)
        return result;
    if (rl_page_query(call, &limit, before, sizeof(before)) != 0)
        return 0;
    /* Deltas answered but not yet persisted are part of the history: they land before this read. */
    rl_deltas_flush(turn->deltas);
    op = rl_op_new(&history_type, sizeof(*op));
    op->user_id = rl_op_str(op, call->principal);
    op->session_id = rl_op_str(op, session_id);
    op->before = before[0] != '\0' ? rl_op_str(op, before) : NULL;
    op->limit = limit;
    rl_op_submit_for(call, op, on_history);
    return 0;
}

/* ---- send ---- */

struct send {
    rl_op_t op;
    const char *user_id, *session_id, *interaction_id, *message_id, *text, *reply_to, *thought_level;
    json_t *refs; /* the body's attachments (a reference; never changed) */
    int64_t now;
    rl_idempotency_t idem; /* key NULL: the send carries none */
    const char *bridge;    /* result: the session's installation */
    const char *problem;   /* result: an attachment that breaks the session's sealing rule */
    json_t *replayed;      /* result: the stored answer of an earlier send with the same key */
};

static void send_dispose(rl_store_op_t *base)
{
    json_decref(((struct send *)base)->refs);
    json_decref(((struct send *)base)->replayed);
    rl_op_dispose(base);
}

static int send_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct send *op = (void *)base;
    rl_session_row_t session;
    rl_message_row_t reply_to, message = {0};
    rl_interaction_row_t interaction = {op->interaction_id, op->session_id, op->now};
    json_t *attachments = NULL, *view, *answer;
    char *attachments_text;
    const char *stored = NULL;
    int result = rl_session_live(txn, op->user_id, op->session_id, &session);

    if (result != 0)
        return result;
    result = rl_idempotency_check(txn, &op->idem, &stored);
    if (result == 1) {
        json_decref(op->replayed);
        op->replayed = json_loads(stored, 0, NULL);
        return op->replayed != NULL ? 0 : RL_E_INTERNAL;
    }
    if (result != 0)
        return result;
    if ((result = rl_attachments_resolve(txn, op->user_id, op->refs,
                                         session.encrypted ? RL_ATTACHMENTS_SEALED : RL_ATTACHMENTS_PLAIN, &attachments,
                                         &op->problem)) != 0)
        return result;
    /* The session now keeps these files: they go when it is purged, not before. */
    if ((result = rl_attachments_use(txn, attachments, op->session_id, op->now)) != 0) {
        json_decref(attachments);
        return result;
    }
    if (op->reply_to != NULL) {
        result = RL_TXN(txn, message_get, op->reply_to, &reply_to);
        if (result == RL_E_NOT_FOUND || (result == 0 && strcmp(reply_to.session_id, op->session_id) != 0))
            result = RL_E_MESSAGE_NOT_FOUND;
        if (result != 0) {
            json_decref(attachments);
            return result;
        }
    }
    attachments_text = json_dumps(attachments, JSON_COMPACT);
    json_decref(attachments);
    if (attachments_text == NULL)
        return RL_E_INTERNAL;
    message.id = op->message_id;
    message.session_id = op->session_id;
    message.interaction_id = op->interaction_id;
    message.role = "user";
    message.text = op->text;
    message.attachments = rl_arena_strdup(txn->arena, attachments_text);
    free(attachments_text);
    message.reply_to = op->reply_to;
    message.state = "final";
    message.created_at = message.finalized_at = op->now;
    if ((result = RL_TXN(txn, interaction_insert, &interaction)) != 0 ||
        (result = RL_TXN(txn, message_insert, &message)) != 0)
        return result;
    session.updated_at = op->now;
    if ((result = RL_TXN(txn, session_update, &session)) != 0)
        return result;
    view = rl_view_message(&message, message.text, strlen(message.text));
    if (session.encrypted)
        rl_view_seal_message(view);
    /* spec: the user's message reaches the bridge as session.message. */
    result = rl_update_append(txn, session.installation_id, RL_UP_SESSION_MESSAGE, op->session_id, op->interaction_id,
                              rl_update_session_message(&session, view, op->thought_level), op->now, &op->op.update_id);
    if (result != 0) {
        json_decref(view);
        return result;
    }
    op->bridge = session.installation_id;
    op->op.value = view;
    answer = json_pack("{s:s, s:s}", "interaction_id", op->interaction_id, "message_id", op->message_id);
    result = rl_idempotency_record(txn, &op->idem, answer, op->now);
    json_decref(answer);
    return result;
}

static const rl_store_op_type_t send_type = {"message_send", 1, send_run, send_dispose};

static void on_sent(rl_store_op_t *base)
{
    struct send *op = (void *)base;
    rl_call_t *call = base->arg;
    const rl_turn_ctx_t *turn = rl_feature_of(call, RL_FEATURE_TURN);
    json_t *message = op->op.value;

    if (base->result == RL_E_NOT_FOUND) {
        rl_call_fail_full(call, RL_E_INVALID_REQUEST, NULL,
                          problem("attachments", "invalid_string", "Unknown attachment key"), NULL);
    } else if (base->result == RL_E_INVALID_REQUEST && op->problem != NULL) {
        rl_call_fail_full(call, RL_E_INVALID_REQUEST, NULL, problem("attachments", "invalid_string", op->problem),
                          NULL);
    } else if (base->result == RL_E_MESSAGE_NOT_FOUND) {
        rl_call_fail_full(call, RL_E_INVALID_REQUEST, NULL,
                          problem("reply_to", "invalid_string", "No such message in this session"), NULL);
    } else if (base->result != 0) {
        rl_call_fail(call, base->result, NULL);
    } else if (op->replayed != NULL) {
        /* The same key and body sent again: the first send's answer, and nothing sent twice. */
        json_object_set_new(op->replayed, "idempotent", json_true());
        rl_call_reply(call, json_incref(op->replayed));
    } else {
        /* spec: the user message is announced as message_added, then reaches the bridge as session.message. */
        rl_attachments_sign(turn->media, json_object_get(message, "attachments"));
        rl_hub_publish(turn->hub, call->principal, RL_EV_MESSAGE_ADDED, json_incref(message));
        rl_updates_notify(turn->bus, op->bridge, op->op.update_id);
        rl_call_reply(call, json_pack("{s:O, s:O}", "interaction_id", json_object_get(message, "interaction_id"),
                                      "message_id", json_object_get(message, "message_id")));
    }
    rl_call_release(call);
}

static void store_message(rl_call_t *call, const char *session_id)
{
    struct send *op = rl_op_new(&send_type, sizeof(*op));
    const char *thought_level = rl_body_string(call, "thought_level");
    char id[32], scope[96], body_hash[RL_BODY_HASH_HEX + 1];
    rl_idempotency_t idem = {0};
    const rl_turn_ctx_t *turn = rl_feature_of(call, RL_FEATURE_TURN);

    /* Keys are the user's, per session; the scope cannot meet a bridge route's ("sendMessage:…"). */
    if (rl_body_string(call, "idempotency_key") != NULL && rl_idempotency_body_hash(call->body, body_hash) == 0) {
        snprintf(scope, sizeof(scope), "me.send:%s", session_id);
        idem = (rl_idempotency_t){call->principal, scope, rl_body_string(call, "idempotency_key"), body_hash,
                                  rl_clock_now_ms() - turn->config->idempotency_ttl};
    }
    rl_idempotency_copy(&op->op.base.arena, &op->idem, &idem);

    op->user_id = rl_op_str(op, call->principal);
    op->session_id = rl_op_str(op, session_id);
    rl_rand_id(id, sizeof(id), "int_", ID_CHARS);
    op->interaction_id = rl_op_str(op, id);
    rl_rand_id(id, sizeof(id), "msg_", ID_CHARS);
    op->message_id = rl_op_str(op, id);
    /* An encrypted session's text column holds the envelope (views.c); the rule was checked on the session. */
    op->text = rl_op_str(op, rl_body_string(call, rl_body_string(call, "text_ct") != NULL ? "text_ct" : "text"));
    op->reply_to = rl_op_str(op, rl_body_string(call, "reply_to"));
    op->thought_level = rl_op_str(op, thought_level != NULL ? thought_level : "default");
    op->refs = json_object_get(call->body, "attachments") != NULL
                   ? json_incref(json_object_get(call->body, "attachments"))
                   : json_array();
    op->now = rl_clock_now_ms();
    rl_op_submit_for(call, op, on_sent);
}

/* The send's first step: which installation the session is on, to refuse a degraded agent before storing. */
struct send_target {
    rl_op_t op;
    const char *user_id, *session_id;
    const char *installation_id; /* result */
    int encrypted;               /* result */
};

static int send_target_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct send_target *op = (void *)base;
    rl_session_row_t session;
    int result = rl_session_of_user(txn, op->user_id, op->session_id, &session);

    if (result == 0) {
        op->installation_id = session.installation_id;
        op->encrypted = session.encrypted;
    }
    return result;
}

static const rl_store_op_type_t send_target_type = RL_OP_TYPE(session_get, 0, send_target_run);

static void on_send_target(rl_store_op_t *base)
{
    struct send_target *op = (void *)base;
    rl_call_t *call = base->arg;
    const rl_turn_ctx_t *turn = rl_feature_of(call, RL_FEATURE_TURN);
    static const char *const plain[] = {"text", NULL};
    const char *field = NULL, *text = rl_body_string(call, op->encrypted ? "text_ct" : "text");

    if (base->result != 0) {
        rl_call_fail(call, base->result, NULL);
    } else if (rl_e2e_body_check(call->body, op->encrypted, plain, &field) != 0) {
        /* issue 26: plaintext in an encrypted session, or ciphertext in a plain one, is refused by name. */
        rl_e2e_fail_field(call, field, op->encrypted);
    } else if ((text == NULL || text[0] == '\0') && json_array_size(json_object_get(call->body, "attachments")) == 0) {
        rl_call_fail_full(call, RL_E_INVALID_REQUEST, NULL,
                          problem(op->encrypted ? "text_ct" : "text", text == NULL ? "invalid_type" : "too_small",
                                  text == NULL ? "Required" : "A message needs text or at least one attachment"),
                          NULL);
    } else if (strcmp(rl_bus_presence_get(turn->bus, op->installation_id), "degraded") == 0) {
        /* brief: an offline agent gets the message queued; a degraded one is refused until it answers again. */
        call->rate.retry_after_ms = turn->config->ws_pong_timeout;
        rl_call_fail(call, RL_E_AGENT_DEGRADED, NULL);
    } else {
        store_message(call, op->session_id);
    }
    rl_call_release(call);
}

int rl_message_send(rl_call_t *call)
{
    const rl_turn_ctx_t *turn = rl_feature_of(call, RL_FEATURE_TURN);
    struct send_target *op;
    char session_id[72];

    const char *text = rl_body_string(call, "text"), *text_ct = rl_body_string(call, "text_ct");

    if (rl_path_id(call, 0, session_id, sizeof(session_id), RL_E_SESSION_NOT_FOUND) != 0)
        return RL_E_SESSION_NOT_FOUND;
    /* The same cap as an agent's message (--max-message-bytes). */
    if ((text != NULL && strlen(text) > (size_t)turn->config->max_message_bytes) ||
        (text_ct != NULL && strlen(text_ct) > (size_t)turn->config->max_message_bytes))
        return RL_E_MESSAGE_TOO_LARGE;
    op = rl_op_new(&send_target_type, sizeof(*op));
    op->user_id = rl_op_str(op, call->principal);
    op->session_id = rl_op_str(op, session_id);
    rl_op_submit_for(call, op, on_send_target);
    return 0;
}
