/*
 * Streamed deltas (POST /v1/bridge/sendMessageDelta) on the fast path.
 *
 * A delta is checked against an in-memory record of its open message (owner,
 * state, the idempotency keys its deltas used), published and answered at
 * once, and persisted with the other pending deltas in one transaction every
 * DELTA_FLUSH_MS, and always before the message's sendMessageEnd is applied.
 * A commit per delta wrote about 22 KB of WAL frames for 64 bytes of text
 * and capped the relay at a few thousand deltas a second; issue 4 allows an
 * open stream to lose its last fraction of a second in a crash, and
 * docs/api.md says exactly what is guaranteed.
 *
 * The record is loaded from the store on first use; deltas that arrive while
 * it loads wait behind it, so order is kept. Records of this process only:
 * one relay node serves a message's deltas (docs/operations.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/strmap.h"
#include "relay/deltas.h"
#include "relay/hub.h"
#include "relay/idempotency.h"
#include "relay/ops.h"
#include "relay/relay.h"

#define DELTA_FLUSH_MS       100
#define OPEN_MESSAGES_MAX    100000
#define KEYS_PER_MESSAGE_MAX 100000
#define IDLE_MS              (5 * 60 * 1000)

struct waiting {
    rl_call_t *call;
    struct waiting *next;
};

struct open_message {
    char message_id[72];
    char installation_id[32];
    char user_id[RL_PRINCIPAL_MAX + 1];
    json_t *session_id, *interaction_id;
    json_t *keys; /* idempotency key -> body hash */
    int64_t next_seq;
    int loading, finalized, deleted;
    int ending; /* sendMessageEnd calls in the store */
    struct waiting *waiting, **waiting_tail;
    int64_t used_ms;
};

struct rl_deltas {
    rl_relay_t *relay;
    rl_strmap_t *open_messages; /* message id -> what its deltas are checked against */
    rl_delta_batch_t *pending;  /* applied and answered, not yet persisted */
    h2o_timeout_t flush_period;
    h2o_timeout_entry_t flush;
};

/* ---- the batch ---- */

rl_delta_batch_t *rl_delta_batch_new(void)
{
    rl_delta_batch_t *batch = calloc(1, sizeof(*batch));

    if (batch != NULL)
        batch->tail = &batch->head;
    return batch;
}

/* Copies `len` bytes and a NUL to *at, returns where they went. */
static const char *put(char **at, const char *text, size_t len)
{
    char *start = *at;

    memcpy(start, text, len);
    start[len] = '\0';
    *at += len + 1;
    return start;
}

int rl_delta_batch_add(rl_delta_batch_t *batch, const char *message_id, int64_t seq, const char *delta,
                       size_t delta_len, const char *key, const char *body_hash)
{
    size_t lens[3] = {strlen(message_id), strlen(key), strlen(body_hash)};
    rl_delta_row_t *row = malloc(sizeof(*row) + lens[0] + lens[1] + lens[2] + delta_len + 4);
    char *at;

    if (row == NULL)
        return -1;
    at = row->text;
    row->next = NULL;
    row->seq = seq;
    row->message_id = put(&at, message_id, lens[0]);
    row->key = put(&at, key, lens[1]);
    row->body_hash = put(&at, body_hash, lens[2]);
    row->delta = put(&at, delta, delta_len);
    row->delta_len = delta_len;
    *batch->tail = row;
    batch->tail = &row->next;
    ++batch->count;
    return 0;
}

void rl_delta_batch_free(rl_delta_batch_t *batch)
{
    rl_delta_row_t *row, *next;

    if (batch == NULL)
        return;
    for (row = batch->head; row != NULL; row = next) {
        next = row->next;
        free(row);
    }
    free(batch);
}

static int by_message_then_seq(const void *a, const void *b)
{
    const rl_delta_row_t *x = *(const rl_delta_row_t *const *)a, *y = *(const rl_delta_row_t *const *)b;
    int order = strcmp(x->message_id, y->message_id);

    return order != 0 ? order : (x->seq > y->seq) - (x->seq < y->seq);
}

/* Writes the run rows[0..n) of one message's consecutive deltas as one row. */
static int write_run(rl_txn_t *txn, const rl_delta_row_t *const *rows, size_t n)
{
    json_t *keys = json_array();
    rl_delta_run_row_t run = {rows[0]->message_id, rows[0]->seq, rows[n - 1]->seq, NULL, 0, NULL};
    char *text = NULL, *keys_text = NULL;
    size_t len = 0, i;
    int result = RL_E_INTERNAL;

    for (i = 0; i < n; ++i)
        len += rows[i]->delta_len;
    if (keys == NULL || (text = malloc(len + 1)) == NULL)
        goto out;
    for (len = 0, i = 0; i < n; ++i) {
        memcpy(text + len, rows[i]->delta, rows[i]->delta_len);
        len += rows[i]->delta_len;
        /* The key and body hash are the delta's idempotency record (replayed as {message_id}). */
        if (json_array_append_new(keys, json_pack("[s, s]", rows[i]->key, rows[i]->body_hash)) != 0)
            goto out;
    }
    if ((keys_text = json_dumps(keys, JSON_COMPACT)) == NULL)
        goto out;
    run.text = text;
    run.text_len = len;
    run.keys = keys_text;
    result = RL_TXN(txn, delta_run_insert, &run);
out:
    json_decref(keys);
    free(text);
    free(keys_text);
    return result;
}

int rl_delta_batch_write(rl_txn_t *txn, rl_delta_batch_t *batch)
{
    const rl_delta_row_t **rows = calloc(batch->count > 0 ? batch->count : 1, sizeof(*rows)), *row;
    size_t n = 0, start, end;
    int result = 0;

    if (rows == NULL)
        return RL_E_INTERNAL;
    /*
     * One row per message and batch: at 50 deltas/s a message gets five per
     * 100 ms batch, and every row costs a B-tree insert and its WAL pages.
     * A run is cut where seqs are not consecutive (they always are today).
     */
    for (row = batch->head; row != NULL; row = row->next)
        rows[n++] = row;
    qsort(rows, n, sizeof(*rows), by_message_then_seq);
    for (start = 0; start < n && result == 0; start = end) {
        for (end = start + 1; end < n && strcmp(rows[end]->message_id, rows[start]->message_id) == 0 &&
                              rows[end]->seq == rows[end - 1]->seq + 1;
             ++end) {
        }
        result = write_run(txn, rows + start, end - start);
    }
    free(rows);
    return result;
}

/* ---- rules of stored deltas ---- */

int rl_deltas_message_of(rl_txn_t *txn, const char *installation_id, const char *message_id, rl_message_row_t *message,
                         rl_session_row_t *session)
{
    int result = RL_TXN(txn, message_get, message_id, message);

    if (result == 0 && strcmp(message->role, "agent") != 0)
        result = RL_E_NOT_FOUND;
    if (result == 0)
        result = RL_TXN(txn, session_get, message->session_id, session);
    if (result == 0 && strcmp(session->installation_id, installation_id) != 0)
        result = RL_E_NOT_FOUND;
    if (result != 0)
        return result == RL_E_NOT_FOUND ? RL_E_MESSAGE_NOT_FOUND : result;
    return session->deleted_at != RL_NO_TIME ? RL_E_SESSION_DELETED : 0;
}

/* Adds the [key, body hash] pairs of a stored run to keys. */
static void add_run_keys(json_t *keys, const char *pairs)
{
    json_t *parsed = pairs != NULL ? json_loads(pairs, 0, NULL) : NULL, *pair;
    size_t i;

    json_array_foreach(parsed, i, pair)
    {
        const char *key = json_string_value(json_array_get(pair, 0));
        if (key != NULL)
            json_object_set(keys, key, json_array_get(pair, 1));
    }
    json_decref(parsed);
}

int rl_deltas_fold(rl_txn_t *txn, const char *message_id, int64_t now)
{
    rl_delta_run_row_t *runs;
    size_t count, i;
    json_t *keys;
    char *text;
    int result = RL_TXN(txn, delta_runs_of, message_id, &runs, &count);

    if (result != 0 || count == 0)
        return result;
    keys = json_object();
    for (i = 0; i < count; ++i)
        add_run_keys(keys, runs[i].keys);
    text = json_dumps(keys, JSON_COMPACT);
    json_decref(keys);
    if (text == NULL)
        return RL_E_INTERNAL;
    result = RL_TXN(txn, delta_keys_put, message_id, text, now);
    free(text);
    return result != 0 ? result : RL_TXN(txn, delta_runs_delete, message_id);
}

/* ---- loading a record ---- */

static void scope_of(const char *message_id, char *out, size_t outsz)
{
    /* The same idempotency scope as sendMessageEnd's (bridge.c): per message_id. */
    snprintf(out, outsz, "message:%s", message_id);
}

struct stream_state {
    rl_op_t op;
    const char *installation_id, *message_id, *scope;
    struct open_message *record;
    /* results */
    rl_message_row_t message;
    rl_session_row_t session;
    int deleted;
    int64_t next_seq;
};

static int stream_state_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct stream_state *op = (void *)base;
    rl_idempotency_row_t *records;
    rl_delta_run_row_t *runs;
    const char *folded = NULL;
    size_t count, i;
    int result = rl_deltas_message_of(txn, op->installation_id, op->message_id, &op->message, &op->session);

    /* A deleted session still answers, so that the delta can say 410 rather than 404. */
    if (result == RL_E_SESSION_DELETED) {
        op->deleted = 1;
        result = 0;
    }
    if (result != 0)
        return result;
    op->op.value = json_object();
    /*
     * A delta's key is in its run while the message streams, in delta_keys
     * once it ended, or in idempotency for deltas stored before schema 5.
     */
    if ((result = RL_TXN(txn, idempotency_of_scope, op->installation_id, op->scope, &records, &count)) != 0)
        return result;
    for (i = 0; i < count; ++i)
        json_object_set_new(op->op.value, records[i].key, json_string(records[i].body_hash));
    if ((result = RL_TXN(txn, delta_runs_of, op->message_id, &runs, &count)) != 0)
        return result;
    op->next_seq = 1;
    for (i = 0; i < count; ++i) {
        add_run_keys(op->op.value, runs[i].keys);
        if (runs[i].seq_last >= op->next_seq)
            op->next_seq = runs[i].seq_last + 1;
    }
    result = RL_TXN(txn, delta_keys_get, op->message_id, &folded);
    if (result == 0) {
        json_t *keys = json_loads(folded, 0, NULL);
        json_object_update(op->op.value, keys);
        json_decref(keys);
    }
    return result == RL_E_NOT_FOUND ? 0 : result;
}

static const rl_store_op_type_t stream_state_type = RL_OP_TYPE(message_stream_state, 0, stream_state_run);

static void message_free(void *p)
{
    struct open_message *message = p;

    json_decref(message->session_id);
    json_decref(message->interaction_id);
    json_decref(message->keys);
    free(message);
}

/* ---- persisting ---- */

struct append {
    rl_op_t op;
    rl_delta_batch_t *batch;
};

static int append_run(rl_txn_t *txn, rl_store_op_t *base)
{
    return rl_delta_batch_write(txn, ((struct append *)base)->batch);
}

static void append_dispose(rl_store_op_t *base)
{
    rl_delta_batch_free(((struct append *)base)->batch);
    rl_op_dispose(base);
}

static const rl_store_op_type_t append_type = {"deltas_append", 1, append_run, append_dispose};

static void on_flushed(rl_store_op_t *base)
{
    if (base->result != 0)
        rl_log_error("persisting streamed deltas failed; the open messages miss them until their end");
}

void rl_deltas_flush(rl_deltas_t *deltas)
{
    rl_delta_batch_t *next;
    struct append *op;

    if (deltas == NULL || deltas->pending == NULL || deltas->pending->count == 0 ||
        (next = rl_delta_batch_new()) == NULL)
        return;
    op = rl_op_new(&append_type, sizeof(*op));
    op->batch = deltas->pending;
    deltas->pending = next;
    rl_store_submit(deltas->relay->store, &op->op.base, on_flushed, deltas);
}

size_t rl_deltas_pending(rl_deltas_t *deltas)
{
    return deltas != NULL && deltas->pending != NULL ? deltas->pending->count : 0;
}

static void on_flush_timer(h2o_timeout_entry_t *entry)
{
    rl_deltas_t *deltas = H2O_STRUCT_FROM_MEMBER(rl_deltas_t, flush, entry);

    rl_deltas_flush(deltas);
}

rl_deltas_t *rl_deltas_new(rl_relay_t *relay)
{
    rl_deltas_t *deltas = calloc(1, sizeof(*deltas));

    if (deltas == NULL)
        return NULL;
    deltas->relay = relay;
    deltas->open_messages = rl_strmap_new(OPEN_MESSAGES_MAX);
    deltas->pending = rl_delta_batch_new();
    if (deltas->open_messages == NULL || deltas->pending == NULL) {
        rl_deltas_free(deltas);
        return NULL;
    }
    h2o_timeout_init(relay->loop, &deltas->flush_period, DELTA_FLUSH_MS);
    deltas->flush.cb = on_flush_timer;
    return deltas;
}

void rl_deltas_free(rl_deltas_t *deltas)
{
    if (deltas == NULL)
        return;
    if (h2o_timeout_is_linked(&deltas->flush))
        h2o_timeout_unlink(&deltas->flush);
    if (deltas->open_messages != NULL)
        h2o_timeout_dispose(deltas->relay->loop, &deltas->flush_period);
    rl_strmap_free(deltas->open_messages, message_free);
    rl_delta_batch_free(deltas->pending);
    free(deltas);
}

/* ---- records ---- */

static int idle(const char *key, void *value, void *arg)
{
    struct open_message *message = value;

    return !message->loading && message->used_ms < *(int64_t *)arg;
}

void rl_deltas_sweep(rl_deltas_t *deltas, int64_t now_ms)
{
    int64_t before = now_ms - IDLE_MS;

    rl_strmap_sweep(deltas->open_messages, idle, &before, message_free);
}

static int of_session(const char *key, void *value, void *arg)
{
    struct open_message *message = value;

    return !message->loading && json_is_string(message->session_id) &&
           strcmp(json_string_value(message->session_id), (const char *)arg) == 0;
}

void rl_deltas_forget_session(rl_deltas_t *deltas, const char *session_id)
{
    /* A deleted session's open messages answer 410 from now on: the next delta reloads the truth. */
    rl_strmap_sweep(deltas->open_messages, of_session, (void *)session_id, message_free);
}

void rl_deltas_finalized(rl_deltas_t *deltas, const char *message_id)
{
    struct open_message *message = rl_strmap_get(deltas->open_messages, message_id);

    if (message != NULL && !message->loading)
        message->finalized = 1;
}

void rl_deltas_ending(rl_deltas_t *deltas, const char *message_id, int ending)
{
    struct open_message *message = rl_strmap_get(deltas->open_messages, message_id);

    if (message == NULL || message->loading)
        return;
    if (ending)
        message->ending++;
    else if (message->ending > 0)
        message->ending--;
}

void rl_deltas_opened(rl_deltas_t *deltas, const char *message_id, const char *installation_id, const char *user_id,
                      json_t *session_id, json_t *interaction_id)
{
    struct open_message *message = calloc(1, sizeof(*message));

    if (message == NULL)
        return;
    snprintf(message->message_id, sizeof(message->message_id), "%s", message_id);
    snprintf(message->installation_id, sizeof(message->installation_id), "%.*s",
             (int)sizeof(message->installation_id) - 1, installation_id);
    snprintf(message->user_id, sizeof(message->user_id), "%s", user_id);
    message->session_id = json_incref(session_id);
    message->interaction_id = json_incref(interaction_id);
    message->keys = json_object();
    message->next_seq = 1;
    message->used_ms = rl_clock_now_ms();
    if (rl_strmap_put(deltas->open_messages, message_id, message) != 0)
        message_free(message);
}

/* Applies one delta to a loaded record and answers it. */
static void apply(rl_deltas_t *deltas, struct open_message *message, rl_call_t *call)
{
    rl_relay_t *relay = deltas->relay;
    const char *key = rl_body_string(call, "idempotency_key");
    json_t *delta = json_object_get(call->body, "delta");
    char body_hash[RL_BODY_HASH_HEX + 1];
    const char *seen;

    if (!rl_call_alive(call))
        return;
    if (strcmp(message->installation_id, call->principal) != 0) {
        rl_call_fail(call, RL_E_MESSAGE_NOT_FOUND, NULL);
        return;
    }
    if (rl_idempotency_body_hash(call->body, body_hash) != 0) {
        rl_call_fail(call, RL_E_INTERNAL, NULL);
        return;
    }
    message->used_ms = rl_clock_now_ms();
    /* spec: the same key with the same body replays; another body is a conflict. */
    seen = json_string_value(json_object_get(message->keys, key));
    if (seen != NULL) {
        if (strcmp(seen, body_hash) != 0)
            rl_call_fail(call, RL_E_IDEMPOTENCY_CONFLICT, NULL);
        else
            rl_call_reply(call, json_pack("{s:s, s:b}", "message_id", message->message_id, "idempotent", 1));
        return;
    }
    if (message->deleted) {
        rl_call_fail(call, RL_E_SESSION_DELETED, NULL);
        return;
    }
    if (message->finalized || message->ending > 0) {
        rl_call_fail(call, RL_E_MESSAGE_FINALIZED, NULL);
        return;
    }
    if (json_object_size(message->keys) >= KEYS_PER_MESSAGE_MAX) {
        rl_call_fail(call, RL_E_UNAVAILABLE, "this message has too many deltas");
        return;
    }
    if (rl_delta_batch_add(deltas->pending, message->message_id, message->next_seq, json_string_value(delta),
                           json_string_length(delta), key, body_hash) != 0) {
        rl_call_fail(call, RL_E_INTERNAL, NULL);
        return;
    }
    message->next_seq++;
    json_object_set_new(message->keys, key, json_string(body_hash));
    if (!h2o_timeout_is_linked(&deltas->flush))
        h2o_timeout_link(relay->loop, &deltas->flush_period, &deltas->flush);
    rl_hub_publish(relay->hub, message->user_id, "message_delta",
                   json_pack("{s:O, s:s, s:O, s:O, s:I}", "session_id", message->session_id, "message_id",
                             message->message_id, "delta", delta, "interaction_id", message->interaction_id, "ts",
                             (json_int_t)rl_clock_now_ms()));
    rl_call_reply(call, json_pack("{s:s}", "message_id", message->message_id));
}

static void on_loaded(rl_store_op_t *base)
{
    struct stream_state *op = (void *)base;
    struct open_message *message = op->record;
    rl_deltas_t *deltas = base->arg;
    struct waiting *w, *next;

    message->loading = 0;
    if (base->result == 0) {
        snprintf(message->user_id, sizeof(message->user_id), "%s", op->session.user_id);
        message->session_id = json_string(op->message.session_id);
        message->interaction_id =
            op->message.interaction_id != NULL ? json_string(op->message.interaction_id) : json_null();
        message->next_seq = op->next_seq;
        message->deleted = op->deleted;
        message->finalized = strcmp(op->message.state, "streaming") != 0;
        json_object_update(message->keys, op->op.value);
    }
    for (w = message->waiting; w != NULL; w = next) {
        next = w->next;
        if (base->result != 0)
            rl_call_fail(w->call, base->result, NULL);
        else
            apply(deltas, message, w->call);
        rl_call_release(w->call);
        free(w);
    }
    message->waiting = NULL;
    /* A record that could not be loaded is not kept: the next delta asks the store again. */
    if (base->result != 0 && rl_strmap_get(deltas->open_messages, message->message_id) == message) {
        rl_strmap_remove(deltas->open_messages, message->message_id);
        message_free(message);
    }
}

int rl_bridge_send_delta(rl_call_t *call)
{
    rl_relay_t *relay = call->app;
    rl_deltas_t *deltas = relay->deltas;
    const char *message_id = rl_body_string(call, "message_id");
    struct open_message *message = rl_strmap_get(deltas->open_messages, message_id);
    struct stream_state *op;
    struct waiting *w;
    char scope[96];

    if (message != NULL && !message->loading) {
        apply(deltas, message, call);
        return 0;
    }
    if (message == NULL) {
        message = calloc(1, sizeof(*message));
        if (message == NULL)
            return RL_E_INTERNAL;
        snprintf(message->message_id, sizeof(message->message_id), "%s", message_id);
        snprintf(message->installation_id, sizeof(message->installation_id), "%.*s",
                 (int)sizeof(message->installation_id) - 1, call->principal);
        message->keys = json_object();
        message->loading = 1;
        message->used_ms = rl_clock_now_ms();
        message->waiting_tail = &message->waiting;
        if (rl_strmap_put(deltas->open_messages, message_id, message) != 0) {
            message_free(message);
            return RL_E_UNAVAILABLE;
        }
        /* Pending deltas of an earlier life of this record go first, so the store's next seq is right. */
        rl_deltas_flush(deltas);
        op = rl_op_new(&stream_state_type, sizeof(*op));
        op->installation_id = rl_op_str(op, call->principal);
        op->message_id = rl_op_str(op, message_id);
        scope_of(message_id, scope, sizeof(scope));
        op->scope = rl_op_str(op, scope);
        op->record = message;
        rl_store_submit(relay->store, &op->op.base, on_loaded, deltas);
    }
    w = calloc(1, sizeof(*w));
    if (w == NULL)
        return RL_E_INTERNAL;
    w->call = call;
    rl_call_hold(call);
    *message->waiting_tail = w;
    message->waiting_tail = &w->next;
    return 0;
}
