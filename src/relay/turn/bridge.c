/*
 * The bridge's REST writes under /v1/bridge: streamed messages, tasks and
 * uploads (approval requests are in approvals.c, deltas in deltas.c). Every
 * write of one (session, interaction) is applied and published in arrival
 * order: requests reach the store in the order h2o hands them over and the
 * store completes them in that order, so a delta never overtakes its
 * placeholder.
 *
 * Each write is one store operation whose run is rl_bridge_write_run: the
 * target check, the idempotency check (a replay answers the stored
 * response), the write itself, and the record of its answer, in one
 * savepoint.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/rand.h"
#include "http/validate.h"
#include "relay/media/attachments.h"
#include "relay/turn/bridge.h"
#include "relay/turn/deltas.h"
#include "relay/e2e/e2e.h"
#include "relay/core/hub.h"
#include "relay/installations/manifest.h"
#include "relay/push/push.h"
#include "relay/core/feature.h"
#include "relay/core/text.h"
#include "auth/token.h"
#include "relay/core/updates.h"
#include "relay/core/views.h"
#include "relay/turn/turn.h"

#define ID_CHARS  20
#define TEXT_MAX  0 /* unbounded: the 1 MB body limit bounds a text (issue 11) */
#define DELTA_MAX 65536
/* A delta's envelope: base64 of 29 bytes more than its text, and UTF-8 text can take 4 bytes a character. */
#define DELTA_CT_MAX (DELTA_MAX * 6)

static const char *const message_plain[] = {"text", NULL};
static const char *const task_plain[] = {"status_label", "args", "partial_result", "result", "error", NULL};
/* an envelope of a 200-character label, in base64, with room */
#define LABEL_CT_MAX 1200

/*
 * spec: stop, length, content_filter, tool_call. The protocol authors'
 * connectors also send their RFC's vocabulary: each is accepted and stored
 * as what it means (docs/api.md). "incomplete" is the relay's own, for a
 * message it had to end itself (rl_messages_lapse), never a bridge's.
 */
static const struct {
    const char *sent, *stored;
} finish_reason_map[] = {
    {"stop", "stop"},           {"length", "length"},     {"content_filter", "content_filter"},
    {"tool_call", "tool_call"}, {"error", "error"},       {"cancelled", "cancelled"},
    {"end_turn", "stop"},       {"max_tokens", "length"}, {"stop_sequence", "stop"},
    {"tool_use", "tool_call"},
};
static const char *const finish_reasons[] = {"stop",      "length",   "content_filter", "tool_call",     "error",
                                             "cancelled", "end_turn", "max_tokens",     "stop_sequence", "tool_use",
                                             NULL};

#define FINISH_INCOMPLETE "incomplete"
#define LAPSE_BATCH       100

/*
 * The spec makes finish_reason optional, and the protocol authors' own bridge
 * never sends one: an end without a reason is a normal end, stored as "stop",
 * so that every client reads it the same way (docs/api.md). The relay's own
 * endings (rl_messages_lapse) name theirs and do not come here.
 */
static const char *stored_finish_reason(const char *sent)
{
    size_t i;

    if (sent == NULL)
        return "stop";
    for (i = 0; i < sizeof(finish_reason_map) / sizeof(finish_reason_map[0]); ++i)
        if (strcmp(sent, finish_reason_map[i].sent) == 0)
            return finish_reason_map[i].stored;
    return NULL;
}
static const char *const task_statuses[] = {"completed", "failed", "cancelled", NULL};

static const rl_field_t usage_fields[] = {
    RL_FIELD_INTEGER_MIN("input_tokens", 0, 0),      RL_FIELD_INTEGER_MIN("output_tokens", 0, 0),
    RL_FIELD_NUMBER_MIN("estimated_cost_usd", 0, 0), RL_FIELD_STRING("model", 0, 0, 128),
    RL_FIELD_STRING("provider", 0, 0, 128),          RL_FIELD_END,
};
static const rl_schema_t usage_schema = RL_SCHEMA(usage_fields);

static const rl_field_t send_message_fields[] = {
    RL_FIELD_STRING("session_id", RL_F_REQUIRED, 1, 64),
    RL_FIELD_STRING("interaction_id", RL_F_NULLABLE, 1, 64),
    RL_FIELD_STRING("text", RL_F_NULL_ABSENT, 0, TEXT_MAX),
    RL_FIELD_CT("text_ct", 0, TEXT_MAX),
    RL_FIELD_ARRAY("attachments", 0, 0, 10, &rl_attachment_ref_item),
    RL_FIELD_STRING("reply_to", RL_F_NULLABLE, 1, 64),
    RL_FIELD_OBJECT("usage", RL_F_NULLABLE, &usage_schema),
    RL_FIELD_IDEMPOTENCY_KEY,
    RL_FIELD_END,
};
const rl_schema_t rl_send_message_schema = RL_SCHEMA(send_message_fields);

static const rl_field_t send_delta_fields[] = {
    RL_FIELD_STRING("message_id", RL_F_REQUIRED, 1, 64),
    RL_FIELD_STRING("delta", RL_F_NULL_ABSENT, 0, DELTA_MAX),
    RL_FIELD_CT("delta_ct", 0, DELTA_CT_MAX),
    RL_FIELD_IDEMPOTENCY_KEY,
    RL_FIELD_END,
};
const rl_schema_t rl_send_delta_schema = RL_SCHEMA(send_delta_fields);

static const rl_field_t send_end_fields[] = {
    RL_FIELD_STRING("message_id", RL_F_REQUIRED, 1, 64),
    RL_FIELD_STRING("text", RL_F_NULL_ABSENT, 0, TEXT_MAX),
    RL_FIELD_CT("text_ct", 0, TEXT_MAX),
    RL_FIELD_OBJECT("usage", RL_F_NULLABLE, &usage_schema),
    RL_FIELD_ENUM("finish_reason", RL_F_NULLABLE, finish_reasons),
    RL_FIELD_IDEMPOTENCY_KEY,
    RL_FIELD_END,
};
const rl_schema_t rl_send_end_schema = RL_SCHEMA(send_end_fields);

#define TASK_TARGET                                                                                                    \
    RL_FIELD_STRING("session_id", RL_F_REQUIRED, 1, 64), RL_FIELD_STRING("interaction_id", 0, 1, 64),                  \
        RL_FIELD_STRING("task_id", RL_F_REQUIRED, 1, 256)

static const rl_field_t create_task_fields[] = {
    TASK_TARGET,
    RL_FIELD_STRING("kind", RL_F_REQUIRED, 1, 64),
    RL_FIELD_STRING("name", 0, 1, 128),
    RL_FIELD_STRING("status_label", RL_F_NULLABLE, 0, 200),
    RL_FIELD_OBJECT("args", RL_F_NULLABLE, NULL),
    RL_FIELD_CT("status_label_ct", RL_F_NULLABLE, LABEL_CT_MAX),
    RL_FIELD_CT("args_ct", RL_F_NULLABLE, 0),
    RL_FIELD_END,
};
const rl_schema_t rl_create_task_schema = RL_SCHEMA(create_task_fields);

static const rl_field_t update_task_fields[] = {
    TASK_TARGET,
    RL_FIELD_NUMBER_RANGE("progress_percent", RL_F_NULLABLE, 0, 100),
    RL_FIELD_ANY("partial_result", 0),
    RL_FIELD_STRING("status_label", RL_F_NULLABLE, 0, 200),
    RL_FIELD_CT("status_label_ct", RL_F_NULLABLE, LABEL_CT_MAX),
    RL_FIELD_CT("partial_result_ct", RL_F_NULLABLE, 0),
    RL_FIELD_STRING("idempotency_key", 0, 1, 256),
    RL_FIELD_END,
};
const rl_schema_t rl_update_task_schema = RL_SCHEMA(update_task_fields);

static const rl_field_t finish_task_fields[] = {
    TASK_TARGET,
    RL_FIELD_ENUM("status", RL_F_REQUIRED, task_statuses),
    RL_FIELD_STRING("name", 0, 1, 128),
    RL_FIELD_STRING("status_label", RL_F_NULLABLE, 0, 200),
    RL_FIELD_ANY("error", 0),
    RL_FIELD_ANY("result", 0),
    RL_FIELD_CT("status_label_ct", RL_F_NULLABLE, LABEL_CT_MAX),
    RL_FIELD_CT("error_ct", RL_F_NULLABLE, 0),
    RL_FIELD_CT("result_ct", RL_F_NULLABLE, 0),
    RL_FIELD_END,
};
const rl_schema_t rl_finish_task_schema = RL_SCHEMA(finish_task_fields);

/* ---- the common shape of a write ---- */

void rl_bridge_write_dispose(rl_store_op_t *base)
{
    rl_bridge_write_t *w = (void *)base;

    json_decref(w->body);
    json_decref(w->response);
    rl_op_dispose(base);
}

void *rl_bridge_write_new(rl_call_t *call, const rl_store_op_type_t *type, size_t size, const char *scope_kind,
                          const char *scope_id, const char *key)
{
    const rl_turn_ctx_t *turn = rl_feature_of(call, RL_FEATURE_TURN);
    rl_bridge_write_t *w;
    rl_idempotency_t idem;
    rl_bridge_target_t target;
    char scope[320], body_hash[RL_BODY_HASH_HEX + 1];

    /* spec: same key, same body gives the cached response; the body is compared through its canonical hash. */
    if (rl_idempotency_body_hash(call->body, body_hash) != 0)
        return NULL;
    w = rl_op_new(type, size);
    snprintf(scope, sizeof(scope), "%s:%s", scope_kind, scope_id != NULL ? scope_id : "");
    idem =
        (rl_idempotency_t){call->principal, scope, key, body_hash, rl_clock_now_ms() - turn->config->idempotency_ttl};
    rl_idempotency_copy(&w->op.base.arena, &w->idem, &idem);
    target = (rl_bridge_target_t){.installation_id = call->principal,
                                  .session_id = rl_body_string(call, "session_id"),
                                  .interaction_id = rl_body_string(call, "interaction_id"),
                                  .now = rl_clock_now_ms(),
                                  .followup_ms = turn->config->followup_window,
                                  .shared = turn->shared};
    rl_target_copy(&w->op.base.arena, &w->target, &target);
    /* The validated body is never changed once a handler runs: the worker reads it alongside. */
    w->body = json_incref(call->body);
    return w;
}

static int target_check(rl_txn_t *txn, rl_bridge_write_t *w)
{
    int result = rl_target_check(txn, &w->target, &w->session);

    /* A turn-bound write without an interaction, in a session the user started: the field is required. */
    if (result == RL_E_INVALID_REQUEST) {
        w->bad_field = "interaction_id";
        w->bad_required = 1;
    }
    return result;
}

int rl_bridge_write_run(rl_txn_t *txn, rl_bridge_write_t *w, int (*check)(rl_txn_t *, rl_bridge_write_t *),
                        int (*apply)(rl_txn_t *, rl_bridge_write_t *))
{
    const char *stored = NULL;
    int result = w->target.shared ? rl_target_installation_check(txn, w->target.installation_id) : 0;

    if (result == 0)
        result = (check != NULL ? check : target_check)(txn, w);
    /* issue 26: plaintext in an encrypted session, or ciphertext in a plain one, is refused by name. */
    if (result == 0)
        result = rl_e2e_body_check(w->body, w->session.encrypted, w->plain, &w->bad_field);

    if (result != 0)
        return result;
    result = rl_idempotency_check(txn, &w->idem, &stored);
    if (result == 1) {
        w->replay = 1;
        w->response = json_loads(stored, 0, NULL);
        return w->response != NULL ? 0 : RL_E_INTERNAL;
    }
    if (result != 0 || (result = apply(txn, w)) != 0)
        return result;
    return rl_idempotency_record(txn, &w->idem, w->response, w->target.now);
}

int rl_bridge_write_require(rl_bridge_write_t *w, const char *field)
{
    if (json_object_get(w->body, field) != NULL)
        return 0;
    w->bad_field = field;
    w->bad_required = 1;
    return RL_E_INVALID_REQUEST;
}

void rl_bridge_write_fail(rl_call_t *call, rl_bridge_write_t *w, int result)
{
    if (result == RL_E_INVALID_REQUEST && w->bad_field != NULL && w->bad_required)
        rl_call_fail_full(
            call, RL_E_INVALID_REQUEST, NULL,
            json_pack("[{s:s, s:s, s:s}]", "path", w->bad_field, "code", "invalid_type", "message", "Required"), NULL);
    else if (result == RL_E_INVALID_REQUEST && w->bad_field != NULL)
        rl_e2e_fail_field(call, w->bad_field, w->session.encrypted);
    else
        rl_call_fail(call, result, NULL);
}

int rl_bridge_write_answer(rl_call_t *call, rl_bridge_write_t *w)
{
    json_t *response = json_deep_copy(w->response);

    if (w->replay)
        json_object_set_new(response, "idempotent", json_true());
    rl_call_reply(call, response);
    return w->replay;
}

/* ---- messages ---- */

struct message_open {
    rl_bridge_write_t w;
    const char *message_id;
    const char *problem; /* result: an attachment that breaks the session's sealing rule */
};

static int message_open_apply(rl_txn_t *txn, rl_bridge_write_t *w)
{
    struct message_open *op = (void *)w;
    /* An encrypted session's text column holds the envelope (views.c). */
    const char *text = json_string_value(json_object_get(w->body, w->session.encrypted ? "text_ct" : "text"));
    json_t *refs = json_object_get(w->body, "attachments"), *none, *attachments = NULL, *usage;
    int placeholder = text == NULL || text[0] == '\0', result;
    rl_message_row_t message = {0};
    char *attachments_text, *usage_text = NULL;

    if ((result = rl_bridge_write_require(w, w->session.encrypted ? "text_ct" : "text")) != 0)
        return result;
    none = json_array();
    result = rl_attachments_resolve(txn, w->session.user_id, refs != NULL ? refs : none,
                                    w->session.encrypted ? RL_ATTACHMENTS_SEALED : RL_ATTACHMENTS_PLAIN, &attachments,
                                    &op->problem);
    json_decref(none);
    /* The session now keeps these files: they go when it is purged, not before. */
    if (result == 0 && (result = rl_attachments_use(txn, attachments, w->target.session_id, w->target.now)) != 0)
        json_decref(attachments);
    if (result != 0)
        return result;
    attachments_text = json_dumps(attachments, JSON_COMPACT);
    json_decref(attachments);
    usage = json_object_get(w->body, "usage");
    if (attachments_text == NULL || (usage != NULL && (usage_text = json_dumps(usage, JSON_COMPACT)) == NULL)) {
        free(attachments_text);
        return RL_E_INTERNAL;
    }
    message.id = op->message_id;
    message.session_id = w->target.session_id;
    message.interaction_id = w->target.interaction_id;
    message.role = "agent";
    /* spec: a placeholder agent message has the text of a single space. */
    message.text = placeholder ? RL_PLACEHOLDER_TEXT : text;
    message.attachments = rl_arena_strdup(txn->arena, attachments_text);
    message.reply_to = json_string_value(json_object_get(w->body, "reply_to"));
    message.usage = rl_arena_strdup(txn->arena, usage_text);
    message.state = "streaming";
    message.created_at = w->target.now;
    message.finalized_at = RL_NO_TIME;
    message.placeholder = placeholder;
    free(attachments_text);
    free(usage_text);
    if ((result = RL_TXN(txn, message_insert, &message)) != 0)
        return result;
    /* A message of the bridge's own encrypted session: the devices still without its key are announced again. */
    if (w->target.own_session && w->session.encrypted &&
        (result = rl_e2e_reannounce(txn, w->session.user_id, w->target.installation_id, w->target.session_id,
                                    w->target.now, &w->op.update_id)) != 0)
        return result;
    w->response = json_pack("{s:s}", "message_id", op->message_id);
    w->op.value = rl_view_message(&message, message.text, strlen(message.text));
    if (w->session.encrypted)
        rl_view_seal_message(w->op.value);
    return 0;
}

static int message_open_run(rl_txn_t *txn, rl_store_op_t *base)
{
    return rl_bridge_write_run(txn, (void *)base, NULL, message_open_apply);
}

static const rl_store_op_type_t message_open_type = {"message_open", 1, message_open_run, rl_bridge_write_dispose};

static void on_message_opened(rl_store_op_t *base)
{
    rl_bridge_write_t *w = (void *)base;
    rl_call_t *call = base->arg;
    const rl_turn_ctx_t *turn = rl_feature_of(call, RL_FEATURE_TURN);

    if (base->result == RL_E_NOT_FOUND) {
        rl_call_fail_full(call, RL_E_INVALID_REQUEST, NULL,
                          json_pack("[{s:s, s:s, s:s}]", "path", "attachments", "code", "invalid_string", "message",
                                    "Unknown attachment key"),
                          NULL);
    } else if (base->result == RL_E_INVALID_REQUEST && ((struct message_open *)w)->problem != NULL) {
        rl_call_fail_full(call, RL_E_INVALID_REQUEST, NULL,
                          json_pack("[{s:s, s:s, s:s}]", "path", "attachments", "code", "invalid_string", "message",
                                    ((struct message_open *)w)->problem),
                          NULL);
    } else if (base->result != 0) {
        rl_bridge_write_fail(call, w, base->result);
    } else if (!rl_bridge_write_answer(call, w)) {
        json_t *message = w->op.value;
        if (w->op.update_id != 0)
            rl_updates_notify(turn->bus, call->principal, w->op.update_id);
        rl_deltas_opened(turn->deltas, json_string_value(json_object_get(message, "message_id")), call->principal,
                         w->session.user_id, json_object_get(message, "session_id"),
                         json_object_get(message, "interaction_id"),
                         json_string_length(json_object_get(call->body, w->session.encrypted ? "text_ct" : "text")),
                         w->session.encrypted);
        /* spec: the agent placeholder is announced as message_added. */
        rl_attachments_sign(turn->media, json_object_get(message, "attachments"));
        rl_hub_publish(turn->hub, w->session.user_id, RL_EV_MESSAGE_ADDED, json_incref(message));
    }
    rl_call_release(call);
}

/* A message's text has a cap (--max-message-bytes), whether it comes whole or in deltas (deltas.c). */
static int text_too_long(rl_call_t *call)
{
    const rl_turn_ctx_t *turn = rl_feature_of(call, RL_FEATURE_TURN);
    const char *text = rl_body_string(call, "text"), *text_ct = rl_body_string(call, "text_ct");

    /* An encrypted text's cap applies to its envelope: relayd cannot count what it cannot read. */
    return (text != NULL && strlen(text) > (size_t)turn->config->max_message_bytes) ||
           (text_ct != NULL && strlen(text_ct) > (size_t)turn->config->max_message_bytes);
}

int rl_bridge_send_message(rl_call_t *call)
{
    struct message_open *op;
    char message_id[32];

    if (text_too_long(call))
        return RL_E_MESSAGE_TOO_LARGE;
    op = rl_bridge_write_new(call, &message_open_type, sizeof(*op), "sendMessage", rl_body_string(call, "session_id"),
                             rl_body_string(call, "idempotency_key"));
    if (op == NULL)
        return RL_E_INTERNAL;
    op->w.plain = message_plain;
    rl_rand_id(message_id, sizeof(message_id), "msg_", ID_CHARS);
    op->message_id = rl_op_str(op, message_id);
    rl_op_submit_for(call, op, on_message_opened);
    return 0;
}

struct message_end {
    rl_bridge_write_t w;
    const char *message_id;
    rl_message_row_t message;
};

/* The message must be an agent message of this installation's, in a session not deleted. */
static int message_end_check(rl_txn_t *txn, rl_bridge_write_t *w)
{
    struct message_end *op = (void *)w;
    int result = rl_deltas_message_of(txn, w->target.installation_id, op->message_id, &op->message, &w->session);

    return result;
}

/*
 * In a transaction: a streaming message becomes final with text (NULL: its
 * streamed text), and its deltas fold into the canonical text. Sets *view.
 */
static int finalize(rl_txn_t *txn, rl_message_row_t *message, const char *text, size_t len, const char *finish_reason,
                    int64_t now, json_t **view)
{
    int result;

    if (text == NULL && (result = rl_text_of(txn, message, &text, &len)) != 0)
        return result;
    message->text = text;
    message->finish_reason = finish_reason;
    message->state = "final";
    message->finalized_at = now;
    message->placeholder = 0;
    if ((result = RL_TXN(txn, message_update, message)) != 0)
        return result;
    /* The deltas' keys outlive their text: a replayed delta still answers idempotent. */
    if ((result = rl_deltas_fold(txn, message->id, now)) != 0)
        return result;
    *view = rl_view_message(message, text, len);
    return 0;
}

static int message_end_apply(rl_txn_t *txn, rl_bridge_write_t *w)
{
    struct message_end *op = (void *)w;
    rl_message_row_t *message = &op->message;
    json_t *canonical = json_object_get(w->body, w->session.encrypted ? "text_ct" : "text"),
           *usage = json_object_get(w->body, "usage");
    const char *text = NULL;
    char *usage_text = NULL;
    size_t len = 0;
    int result;

    if (strcmp(message->state, "streaming") != 0)
        return RL_E_MESSAGE_FINALIZED;
    /* spec: the canonical text replaces the streamed one; without it, the streamed text is kept. */
    if (json_is_string(canonical)) {
        len = json_string_length(canonical);
        text = rl_arena_strndup(txn->arena, json_string_value(canonical), len);
    }
    if (usage != NULL) {
        if ((usage_text = json_dumps(usage, JSON_COMPACT)) == NULL)
            return RL_E_INTERNAL;
        message->usage = rl_arena_strdup(txn->arena, usage_text);
        free(usage_text);
    }
    w->response = json_pack("{s:s}", "message_id", op->message_id);
    /* An encrypted message without a final text_ct keeps its opening envelope and its deltas' (views.c). */
    result = finalize(txn, message, text, len,
                      stored_finish_reason(json_string_value(json_object_get(w->body, "finish_reason"))), w->target.now,
                      &w->op.value);
    if (result == 0 && w->session.encrypted)
        rl_view_seal_message(w->op.value);
    return result;
}

static int message_end_run(rl_txn_t *txn, rl_store_op_t *base)
{
    return rl_bridge_write_run(txn, (void *)base, message_end_check, message_end_apply);
}

static const rl_store_op_type_t message_end_type = {"message_end", 1, message_end_run, rl_bridge_write_dispose};

static void on_message_ended(rl_store_op_t *base)
{
    struct message_end *op = (void *)base;
    rl_bridge_write_t *w = &op->w;
    rl_call_t *call = base->arg;
    const rl_turn_ctx_t *turn = rl_feature_of(call, RL_FEATURE_TURN);

    rl_deltas_ending(turn->deltas, op->message_id, 0);
    if (base->result != 0) {
        rl_bridge_write_fail(call, w, base->result);
    } else if (!rl_bridge_write_answer(call, w)) {
        json_t *message = w->op.value;
        rl_deltas_finalized(turn->deltas, op->message_id);
        rl_attachments_sign(turn->media, json_object_get(message, "attachments"));
        /* A finished reply reaches the user's devices when no stream of theirs is open (docs/web.md). */
        rl_push_reply_finalized(turn->push, w->session.user_id, message);
        rl_hub_publish(turn->hub, w->session.user_id, RL_EV_MESSAGE_FINALIZED, json_incref(message));
    }
    rl_call_release(call);
}

int rl_bridge_send_end(rl_call_t *call)
{
    const rl_turn_ctx_t *turn = rl_feature_of(call, RL_FEATURE_TURN);
    const char *message_id = rl_body_string(call, "message_id");
    struct message_end *op;

    if (text_too_long(call))
        return RL_E_MESSAGE_TOO_LARGE;
    op = rl_bridge_write_new(call, &message_end_type, sizeof(*op), "message", message_id,
                             rl_body_string(call, "idempotency_key"));
    if (op == NULL)
        return RL_E_INTERNAL;
    op->w.plain = message_plain;
    op->message_id = rl_op_str(op, message_id);
    /* The deltas answered so far land before the end that folds them into the canonical text. */
    rl_deltas_flush(turn->deltas);
    rl_deltas_ending(turn->deltas, message_id, 1);
    rl_op_submit_for(call, op, on_message_ended);
    return 0;
}

/* ---- messages left open ---- */

/*
 * No message stays open for ever: an agent message still streaming when its
 * interaction's follow-up window closes (the bridge may write to it no
 * more) is ended by the relay with its streamed text and finish_reason
 * "incomplete", and message_finalized tells the clients.
 */
struct lapse {
    rl_op_t op; /* value: [{"message", "user_id", "deleted"}] */
    int64_t at, now;
};

static int lapse_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct lapse *op = (void *)base;
    rl_message_row_t *rows;
    size_t count, i;
    int result = RL_TXN(txn, messages_open_before, op->at, LAPSE_BATCH, &rows, &count);

    if (result != 0)
        return result;
    op->op.value = json_array();
    for (i = 0; i < count; ++i) {
        rl_session_row_t session;
        json_t *view = NULL;
        if ((result = RL_TXN(txn, session_get, rows[i].session_id, &session)) != 0 ||
            (result = finalize(txn, &rows[i], NULL, 0, FINISH_INCOMPLETE, op->now, &view)) != 0)
            return result;
        if (session.encrypted)
            rl_view_seal_message(view);
        json_array_append_new(op->op.value, json_pack("{s:o, s:s, s:b}", "message", view, "user_id", session.user_id,
                                                      "deleted", session.deleted_at != RL_NO_TIME));
    }
    return 0;
}

static const rl_store_op_type_t lapse_type = RL_OP_TYPE(messages_lapse, 1, lapse_run);

/*
 * The sweep's first step only reads whether any message is due. Ending one
 * is a change to a message's state: while it is in the store, the deltas
 * that come are checked on the worker rather than written on the loop
 * (rl_deltas_changing), and wait behind that transaction and the fold of
 * the delta log it begins with. Taken each second with nothing to end, it
 * put a run of answers behind the worker every second; now only a sweep
 * that has something to end does.
 */
struct lapse_due {
    rl_op_t op;
    int64_t at;
    size_t due;
};

static int lapse_due_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct lapse_due *op = (void *)base;
    rl_message_row_t *rows;
    size_t count = 0;
    int result = RL_TXN(txn, messages_open_before, op->at, 1, &rows, &count);

    op->due = result == 0 ? count : 0;
    return result;
}

static const rl_store_op_type_t lapse_due_type = RL_OP_TYPE(messages_lapse_due, 0, lapse_due_run);

/* The window closes after followup_window: at exactly that age the bridge may still write (target.c). */
static int64_t lapse_at(const rl_turn_ctx_t *turn, int64_t now)
{
    return now - turn->config->followup_window - 1;
}

rl_store_op_t *rl_messages_lapse_due(rl_turn_ctx_t *turn, int64_t now)
{
    struct lapse_due *op = rl_op_new(&lapse_due_type, sizeof(*op));

    op->at = lapse_at(turn, now);
    return &op->op.base;
}

rl_store_op_t *rl_messages_lapse_next(rl_turn_ctx_t *turn, const rl_store_op_t *base, int64_t now)
{
    if (base->type != &lapse_due_type || base->result != 0 || ((const struct lapse_due *)base)->due == 0)
        return NULL;
    return rl_messages_lapse(turn, now);
}

rl_store_op_t *rl_messages_lapse(rl_turn_ctx_t *turn, int64_t now)
{
    struct lapse *op = rl_op_new(&lapse_type, sizeof(*op));

    /*
     * What was answered of these messages is in their text; deltas that
     * arrive while the sweep is in the store are checked against it.
     */
    rl_deltas_changing(turn->deltas, 1);
    op->at = lapse_at(turn, now);
    op->now = now;
    return &op->op.base;
}

void rl_messages_lapsed(rl_turn_ctx_t *turn, rl_store_op_t *base)
{
    struct lapse *op = (void *)base;
    json_t *item;
    size_t i;

    /* The first step changed nothing (rl_messages_lapse_next takes it on); a failed one is tried next second. */
    if (base->type == &lapse_due_type)
        return;
    if (base->result == 0)
        json_array_foreach(op->op.value, i, item)
        {
            rl_deltas_finalized(turn->deltas,
                                json_string_value(json_object_get(json_object_get(item, "message"), "message_id")));
        }
    rl_deltas_changing(turn->deltas, 0);
    if (base->result != 0) {
        /* The store logs its own outage once (RL_E_UNAVAILABLE): the sweep meeting it is not news each second. */
        if (base->result == RL_E_UNAVAILABLE)
            rl_log_debug("ending messages left open found the store unavailable; the sweep runs again in a second");
        else
            rl_log_warn("ending messages left open failed; the sweep runs again in a second");
        return;
    }
    json_array_foreach(op->op.value, i, item)
    {
        json_t *message = json_object_get(item, "message");
        rl_log_info("message %s was left open past its follow-up window; ended as incomplete",
                    json_string_value(json_object_get(message, "message_id")));
        if (json_is_true(json_object_get(item, "deleted")))
            continue;
        rl_attachments_sign(turn->media, json_object_get(message, "attachments"));
        rl_hub_publish(turn->hub, json_string_value(json_object_get(item, "user_id")), RL_EV_MESSAGE_FINALIZED,
                       json_incref(message));
    }
}

/* ---- tasks ---- */

struct task_step {
    rl_bridge_write_t w;
    rl_task_step_t step;
};

/* A JSON value of the body as a column's text in the arena: NULL when the body has no such key. */
static int body_json(rl_txn_t *txn, json_t *body, const char *key, const char **out)
{
    json_t *value = json_object_get(body, key);
    char *text;

    *out = NULL;
    if (value == NULL)
        return 0;
    if ((text = json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY)) == NULL)
        return RL_E_INTERNAL;
    *out = rl_arena_strdup(txn->arena, text);
    free(text);
    return 0;
}

static int task_step_apply(rl_txn_t *txn, rl_bridge_write_t *w)
{
    struct task_step *op = (void *)w;
    const char *task_id = json_string_value(json_object_get(w->body, "task_id"));
    const char *name = json_string_value(json_object_get(w->body, "name"));
    /* An encrypted session's task columns hold the envelopes, the JSON ones as JSON strings (views.c). */
    int sealed = w->session.encrypted;
    const char *label = json_string_value(json_object_get(w->body, sealed ? "status_label_ct" : "status_label"));
    const char *args, *partial, *outcome, *error;
    rl_installation_row_t installation;
    rl_task_row_t task;
    int result;

    if (name != NULL) {
        if ((result = RL_TXN(txn, installation_get, w->target.installation_id, &installation)) != 0)
            return result;
        if (!rl_manifest_declares(installation.manifest, name))
            return RL_E_TOOL_NOT_DECLARED;
    }
    /* Each of these came in this body, so the 1 MB body limit bounds what a task keeps (docs/api.md). */
    if ((result = body_json(txn, w->body, sealed ? "args_ct" : "args", &args)) != 0 ||
        (result = body_json(txn, w->body, sealed ? "partial_result_ct" : "partial_result", &partial)) != 0 ||
        (result = body_json(txn, w->body, sealed ? "result_ct" : "result", &outcome)) != 0 ||
        (result = body_json(txn, w->body, sealed ? "error_ct" : "error", &error)) != 0)
        return result;
    result = RL_TXN(txn, task_get, w->target.installation_id, task_id, &task);
    if (result != 0 && result != RL_E_NOT_FOUND)
        return result;
    if (op->step == RL_TASK_CREATE) {
        /* A second create of the same task with another body is the idempotency conflict of its scope. */
        if (result == 0)
            return RL_E_IDEMPOTENCY_CONFLICT;
        task = (rl_task_row_t){
            .installation_id = w->target.installation_id,
            .task_id = task_id,
            .session_id = w->target.session_id,
            .interaction_id = w->target.interaction_id,
            .kind = json_string_value(json_object_get(w->body, "kind")),
            .name = name,
            .status = "created",
            .status_label = label,
            .created_at = w->target.now,
            .updated_at = w->target.now,
            .args = args,
        };
        result = RL_TXN(txn, task_insert, &task);
    } else {
        if (result != 0 || strcmp(task.session_id, w->target.session_id) != 0 ||
            strcmp(task.interaction_id, w->target.interaction_id) != 0)
            return RL_E_TASK_NOT_FOUND;
        /* spec: created, then progress steps, then exactly one of completed, failed, cancelled. */
        if (strcmp(task.status, "created") != 0 && strcmp(task.status, "progressing") != 0)
            return RL_E_TASK_FINISHED;
        task.status =
            op->step == RL_TASK_UPDATE ? "progressing" : json_string_value(json_object_get(w->body, "status"));
        if (label != NULL)
            task.status_label = label;
        if (name != NULL)
            task.name = name;
        /* The last partial result is kept (a step without one keeps the one before); the end sets the outcome. */
        if (partial != NULL)
            task.partial_result = partial;
        if (op->step == RL_TASK_FINISH) {
            task.result = outcome;
            task.error = error;
        }
        task.updated_at = w->target.now;
        result = RL_TXN(txn, task_update, &task);
    }
    if (result != 0)
        return result;
    w->response = json_pack("{s:s}", "task_id", task_id);
    /* The event names the task and carries the step's own values from the body: the stored ones need no decoding. */
    task.partial_result = task.result = task.error = NULL;
    if (op->step != RL_TASK_CREATE)
        task.args = NULL;
    w->op.value = rl_view_task(&task);
    if (sealed)
        rl_view_seal_task(w->op.value);
    return 0;
}

static int task_step_run(rl_txn_t *txn, rl_store_op_t *base)
{
    return rl_bridge_write_run(txn, (void *)base, NULL, task_step_apply);
}

static const rl_store_op_type_t task_step_type = {"task_step", 1, task_step_run, rl_bridge_write_dispose};

/*
 * The event of a task step, from the stored task and the step's body. Every
 * one names the task's session, interaction, kind, name and label, so that a
 * client may draw its card from whichever event it sees first (docs/api.md).
 */
static void publish_task(const rl_turn_ctx_t *turn, const char *user_id, rl_task_step_t step, json_t *task,
                         json_t *body)
{
    /* issue 26: an encrypted session's task carries the *_ct twins (a plain one's view has none of them). */
    static const char *const shared[] = {"task_id", "session_id",   "interaction_id", "kind",
                                         "name",    "status_label", "status_label_ct"};
    static const char *const sealed_steps[] = {"partial_result_ct", "result_ct", "error_ct"};
    rl_event_t name = RL_EV_TASK_CREATED;
    json_t *event = json_object();
    size_t i;

    for (i = 0; i < sizeof(shared) / sizeof(shared[0]); ++i)
        json_object_set(event, shared[i], json_object_get(task, shared[i]));
    for (i = 0; i < sizeof(sealed_steps) / sizeof(sealed_steps[0]); ++i)
        if (json_object_get(body, sealed_steps[i]) != NULL)
            json_object_set(event, sealed_steps[i], json_object_get(body, sealed_steps[i]));
    if (step == RL_TASK_CREATE) {
        json_object_set(event, "args", json_object_get(task, "args"));
        if (json_object_get(task, "args_ct") != NULL)
            json_object_set(event, "args_ct", json_object_get(task, "args_ct"));
    } else if (step == RL_TASK_UPDATE) {
        name = RL_EV_TASK_PROGRESS;
        json_object_set(event, "progress_percent",
                        json_object_get(body, "progress_percent") != NULL ? json_object_get(body, "progress_percent")
                                                                          : json_null());
        if (json_object_get(body, "partial_result") != NULL)
            json_object_set(event, "partial_result", json_object_get(body, "partial_result"));
    } else {
        const char *status = json_string_value(json_object_get(body, "status"));
        name = strcmp(status, "completed") == 0 ? RL_EV_TASK_COMPLETED
               : strcmp(status, "failed") == 0  ? RL_EV_TASK_FAILED
                                                : RL_EV_TASK_CANCELLED;
        if (json_object_get(body, "result") != NULL)
            json_object_set(event, "result", json_object_get(body, "result"));
        if (json_object_get(body, "error") != NULL)
            json_object_set(event, "error", json_object_get(body, "error"));
        json_object_set_new(event, "status", json_string(status));
    }
    rl_hub_publish(turn->hub, user_id, name, event);
}

static void on_task(rl_store_op_t *base)
{
    struct task_step *op = (void *)base;
    rl_call_t *call = base->arg;

    if (base->result != 0)
        rl_bridge_write_fail(call, &op->w, base->result);
    else if (!rl_bridge_write_answer(call, &op->w))
        publish_task(rl_feature_of(call, RL_FEATURE_TURN), op->w.session.user_id, op->step, op->w.op.value, call->body);
    rl_call_release(call);
}

/* The task routes: the row says which step of the lifecycle (call->handler_tag). */
int rl_bridge_task(rl_call_t *call)
{
    rl_task_step_t step = (rl_task_step_t)call->handler_tag;
    const char *task_id = rl_body_string(call, "task_id");
    const char *kinds[] = {"task.create", "task.update", "task.finish"};
    struct task_step *op;

    /*
     * spec: the idempotency scope of the task routes is the task id: a create
     * and a finish each happen once per task; updates are distinct events
     * unless they carry an idempotency_key.
     */
    if (step == RL_TASK_UPDATE)
        op = rl_bridge_write_new(call, &task_step_type, sizeof(*op), kinds[step], task_id,
                                 rl_body_string(call, "idempotency_key"));
    else
        op = rl_bridge_write_new(call, &task_step_type, sizeof(*op), kinds[step], "", task_id);
    if (op == NULL)
        return RL_E_INTERNAL;
    op->step = step;
    op->w.plain = task_plain;
    /* Required but in a session the bridge created (its turn's: target.h). */
    op->w.target.turn_bound = 1;
    rl_op_submit_for(call, op, on_task);
    return 0;
}

/* ---- uploads ---- */

int rl_bridge_upload(rl_call_t *call)
{
    /* A bridge's upload belongs to the installation's user, so that its messages can reference it. */
    return rl_attachment_upload_for(call, call->owner);
}
