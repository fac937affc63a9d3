/*
 * Streamed deltas (POST /v1/bridge/sendMessageDelta): answered only once
 * durable, and right whichever node a call lands on.
 *
 * A delta is checked against a record of its open message (owner, state,
 * the idempotency keys its deltas used, the next sequence number), kept in
 * memory and loaded from the store on first use: a replay or a conflicting
 * key is answered at once. A new delta takes the next sequence number, is
 * published to the user's streams at once (streaming latency is the
 * product), and joins the pending batch; the batch goes to the store as one
 * operation GROUP_COMMIT_MS after its first delta (or at once when it is
 * large), and while one is being written the next one gathers. Only when
 * its batch has committed is a delta answered, so a kill -9 loses nothing
 * that was answered (docs/api.md says what a client may see of the rest).
 * A commit per delta cost about 20 KB of WAL frames and 120-160 us of CPU
 * per delta on SQLite; a batch shares both.
 *
 * A node that is its store's only writer (rl_store_exclusive: the data
 * folder's own SQLite store, whose folder lock relayd holds; and a local
 * bus) has the truth in its records: a batch is *trusted* and written without
 * reading anything back (check_run), and it is one write(2) to the store's
 * delta log rather than a transaction, made here on the loop at the end of
 * the turn its first delta came in, and answered in that turn
 * (rl_store_write_now; docs/internals/store.md, "The delta log"). That
 * holds only while every change to a message's state tells the records:
 * sendMessageEnd (rl_deltas_ending, rl_deltas_finalized), the sweep of
 * messages left open, a session deleted or restored
 * (rl_deltas_changing around the store operation, then rl_deltas_finalized
 * or rl_deltas_forget_session), a purge (rl_deltas_forget_all). While such a
 * change is in the store, and for the deltas that gathered meanwhile, a
 * batch is not trusted and is checked like a shared one. (A revoked
 * installation is refused by auth before its delta gets here.)
 *
 * Otherwise (PostgreSQL, a SQLite file shared as sqlite:PATH, a shared bus)
 * the record is a cache: another node may have written
 * to the message meanwhile. The batch checks each message (the message
 * still streaming, its session not deleted, and the store's next sequence
 * number the one the record assumed; the message's row is locked while it
 * is read, where the backend needs it); on PostgreSQL every run's checks
 * and insert are one statement, one round trip per batch. A message that
 * moved on elsewhere has its record dropped and its deltas applied again
 * against a fresh one, where a retry that another node already stored is
 * now a replay.
 *
 * On a shared bus (several nodes) a delta is published only once its batch
 * committed, not when it joins the batch: this node's record may be stale,
 * and a retry whose first attempt another node stored, or a delta to a
 * message another node ended, looks new here until the store says
 * otherwise. Publishing early, the user saw such a retry twice
 * (tests/e2e/test_80). One node alone has the truth in its record and keeps
 * publishing at once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/json_flat.h"
#include "common/log.h"
#include "common/strmap.h"
#include "relay/turn/deltas.h"
#include "relay/e2e/e2e.h"
#include "relay/core/hub.h"
#include "relay/core/idempotency.h"
#include "relay/core/ops.h"
#include "relay/core/feature.h"
#include "relay/core/target.h"
#include "relay/turn/turn.h"

#define OPEN_MESSAGES_MAX    100000
#define KEYS_PER_MESSAGE_MAX 100000
#define IDLE_MS              (5 * 60 * 1000)
/*
 * A batch goes to the store's worker this long after its first delta, or at
 * once when this large; written on the loop (an exclusive store), at the end
 * of the loop turn instead (rl_deltas_new).
 */
#define GROUP_COMMIT_MS 2
/*
 * On a shared store (PostgreSQL) a batch is one statement, one round trip,
 * whatever its size, and a small one comes back in 1-2 ms: sent the moment
 * the previous one returned, batches at 5 000 deltas/s over 100 bridges
 * held 4 deltas (0.26 round trips a delta). So a shared store's batch
 * gathers this long after its first delta even when the previous one came
 * back sooner. Measured at 5 000/s over 100 bridges (RelWithDebInfo, one
 * node, tests/support/pg.sh, 3 runs): 5 ms gave 0.037-0.044 round trips a
 * delta and p99 13-33 ms; 3 ms 0.070 and p99 8-10 ms; 8 ms batches of ~100
 * whose statement took ~14 ms, and only 4 530/s got through (every bridge
 * waits for its answer).
 */
#define SHARED_GROUP_COMMIT_MS 5
#define BATCH_MAX              4096
/* A retry of a delta still being written is asked to come back in this long (503). */
#define RETRY_PENDING_MS 100
/*
 * When the store falls behind, new deltas are refused at once (503 with
 * this retry_after_ms) rather than queued for seconds: past
 * --delta-backlog-max deltas not yet written, or once the oldest of them has
 * waited longer than --delta-wait-max. The count alone never tripped in the
 * benchmark: each bridge has one delta in flight, so 3 000 bridges at twice
 * the store's pace hold 3 000 deltas, and each waited up to a second.
 */
#define OVERLOAD_RETRY_MS 250

struct waiting {
    rl_call_t *call;
    struct waiting *next;
};

/*
 * Where a record stands. Its session's deletion is not one of them: a
 * message of a deleted session may be streaming or ended (and its end still
 * times its keys), so it is a fact of its own (deleted).
 */
enum record_state {
    RECORD_STREAMING, /* the message takes deltas (a new record's state) */
    RECORD_ENDED,     /* the message was finalized: deltas are refused */
    RECORD_LOADING,   /* asked of the store: deltas wait (waiting), nothing else is known yet */
};

struct open_message {
    unsigned refs; /* the map's, and one per delta in flight */
    char message_id[72];
    char installation_id[32];
    char user_id[RL_PRINCIPAL_MAX + 1];
    json_t *session_id, *interaction_id;
    rl_strmap_t *keys;    /* stored deltas: idempotency key -> its body hash (a string of its own) */
    rl_strmap_t *pending; /* deltas being written: key -> body hash (a string of its own) */
    int64_t next_seq;
    enum record_state state;
    int deleted;           /* its session is (known to be) deleted */
    int encrypted;         /* its session is: deltas are delta_ct envelopes, each stored after a '\n' (views.c) */
    int ending;            /* sendMessageEnd calls in the store */
    int64_t keys_until_ms; /* an ended message's keys stop replaying then (--idempotency-ttl); 0 while it streams */
    size_t text_bytes;     /* its text so far, stored and pending (--max-message-bytes) */
    struct waiting *waiting, **waiting_tail;
    int64_t used_ms;
};

struct rl_deltas {
    /* What the deltas use of the turn's context (turn.h), copied at their start. */
    const rl_config_t *config;
    rl_store_t *store;
    struct rl_hub *hub;
    h2o_loop_t *loop;
    int shared; /* other nodes share the store and bus: they write to messages too, and deltas publish on commit */
    rl_strmap_t *open_messages; /* message id -> its record */
    rl_delta_batch_t *pending;  /* applied, waiting for the next batch */
    unsigned inflight;          /* batches in the store */
    struct append *oldest;      /* the first of them (the store answers in order), or NULL */
    struct append **newest;     /* where the next one is linked */
    size_t unwritten;           /* deltas pending or in the store */
    h2o_timeout_t group_commit;
    h2o_timeout_entry_t due;
    unsigned changing; /* changes to messages' state in the store, not yet told to the records */
    int exclusive;     /* no other process writes to the store (rl_store_exclusive): records are the truth */
};

static void record_unref(struct open_message *message)
{
    if (--message->refs > 0)
        return;
    json_decref(message->session_id);
    json_decref(message->interaction_id);
    rl_strmap_free(message->keys, free);
    rl_strmap_free(message->pending, free);
    free(message);
}

/* Remembers a stored delta's key and body hash (replays answer from them); takes body_hash (malloc'd, or NULL). */
static void key_kept(struct open_message *message, const char *key, char *body_hash)
{
    char *old = rl_strmap_get(message->keys, key);

    if (body_hash == NULL)
        return;
    if (rl_strmap_put(message->keys, key, body_hash) != 0)
        free(body_hash);
    else
        free(old);
}

/* Remembers a delta being written (a copy of body_hash), replacing one of the same key. */
static void key_pending(struct open_message *message, const char *key, const char *body_hash)
{
    char *copy = strdup(body_hash), *old = rl_strmap_get(message->pending, key);

    if (copy == NULL)
        return;
    if (rl_strmap_put(message->pending, key, copy) != 0)
        free(copy);
    else
        free(old);
}

/* As key_kept, with a copy of body_hash. */
static void key_stored(struct open_message *message, const char *key, const char *body_hash)
{
    key_kept(message, key, body_hash != NULL ? strdup(body_hash) : NULL);
}

/* The map's reference; the record lives on while deltas of it are in flight. */
static void message_free(void *p)
{
    record_unref(p);
}

static struct open_message *record_new(const char *message_id, const char *installation_id)
{
    struct open_message *message = calloc(1, sizeof(*message));

    if (message == NULL)
        return NULL;
    message->refs = 1;
    snprintf(message->message_id, sizeof(message->message_id), "%s", message_id);
    snprintf(message->installation_id, sizeof(message->installation_id), "%.*s",
             (int)sizeof(message->installation_id) - 1, installation_id);
    /*
     * Not a JSON object: a message that streams for minutes holds tens of
     * thousands of keys, and jansson rehashes a whole object when it doubles
     * (rl_strmap moves a few slots per insertion).
     */
    message->keys = rl_strmap_new(KEYS_PER_MESSAGE_MAX);
    message->pending = rl_strmap_new(KEYS_PER_MESSAGE_MAX);
    if (message->keys == NULL || message->pending == NULL) {
        rl_strmap_free(message->keys, free);
        rl_strmap_free(message->pending, free);
        free(message);
        return NULL;
    }
    message->next_seq = 1;
    message->used_ms = rl_clock_now_ms();
    message->waiting_tail = &message->waiting;
    return message;
}

/* Drops the record from the map (the truth is in the store); deltas in flight keep their reference. */
static void forget(rl_deltas_t *deltas, struct open_message *message)
{
    if (rl_strmap_get(deltas->open_messages, message->message_id) == message) {
        rl_strmap_remove(deltas->open_messages, message->message_id);
        record_unref(message);
    }
}

/*
 * What call->handler_tag carries across the passes of one delta (the route
 * gives 0): that it was published, and that its record was reloaded once
 * because a refusal came from a record that may be stale (reload_refused).
 */
#define TAG_PUBLISHED 1
#define TAG_RELOADED  2

/*
 * Whether a refusal of a delta by its message's state (ended, session
 * deleted) should be asked of the store again first: the records are a
 * cache (another node writes to the store), and this delta's record was not
 * reloaded for it yet. Another node may have stored this very delta before
 * the message ended there; this node's record then lacks its key and would
 * answer 409 message_finalized to the bridge's retry of an acknowledged
 * delta, where the spec says a replay (found by the soak, issue 39).
 */
static int reload_refused(const rl_deltas_t *deltas, const rl_call_t *call, int refusal)
{
    return (refusal == RL_E_MESSAGE_FINALIZED || refusal == RL_E_SESSION_DELETED) &&
           (!deltas->exclusive || deltas->shared) && (call->handler_tag & TAG_RELOADED) == 0;
}

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
    return rl_delta_batch_add_for(batch, message_id, seq, delta, delta_len, key, body_hash, NULL, NULL) != NULL ? 0
                                                                                                                : -1;
}

rl_delta_row_t *rl_delta_batch_add_for(rl_delta_batch_t *batch, const char *message_id, int64_t seq, const char *delta,
                                       size_t delta_len, const char *key, const char *body_hash, rl_call_t *call,
                                       void *record)
{
    size_t lens[3] = {strlen(message_id), strlen(key), strlen(body_hash)};
    rl_delta_row_t *row = malloc(sizeof(*row) + lens[0] + lens[1] + lens[2] + delta_len + 4);
    char *at;

    if (row == NULL)
        return NULL;
    at = row->text;
    row->next = NULL;
    row->seq = seq;
    row->outcome = 0;
    row->room = INT64_MAX;
    row->moved_next = 0;
    row->gap_keys = NULL;
    row->gap_bytes = 0;
    row->installation_id = NULL;
    row->call = call;
    row->record = record;
    row->message_id = put(&at, message_id, lens[0]);
    row->key = put(&at, key, lens[1]);
    row->body_hash = put(&at, body_hash, lens[2]);
    row->delta = put(&at, delta, delta_len);
    row->delta_len = delta_len;
    if (batch->count == 0)
        batch->first_ms = rl_clock_mono_ms();
    *batch->tail = row;
    batch->tail = &row->next;
    ++batch->count;
    return row;
}

void rl_delta_batch_free(rl_delta_batch_t *batch)
{
    rl_delta_row_t *row, *next;

    if (batch == NULL)
        return;
    for (row = batch->head; row != NULL; row = next) {
        next = row->next;
        free(row->gap_keys);
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
static int write_run(rl_txn_t *txn, rl_delta_row_t *const *rows, size_t n)
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

/*
 * The rule every run of a message passes before it is written: the message
 * is an agent message of this installation, its session is not deleted, it
 * still streams, and its next stored seq is where the run starts (else
 * another node wrote to it since the record was loaded: RL_E_CONFLICT).
 */
/* The answers of check_run that refuse one message's run, not the batch (a failure of the store). */
static int run_refused(int outcome)
{
    return outcome == RL_E_CONFLICT || outcome == RL_E_MESSAGE_FINALIZED || outcome == RL_E_SESSION_DELETED ||
           outcome == RL_E_MESSAGE_NOT_FOUND || outcome == RL_E_INSTALLATION_GONE || outcome == RL_E_INVALID_TOKEN;
}

static int check_run(rl_txn_t *txn, const rl_delta_batch_t *batch, const rl_delta_row_t *first)
{
    rl_message_row_t message;
    rl_session_row_t session;
    int64_t next = 0;
    int result;

    /* One node whose records are the truth (rl_delta_batch_t.trusted): nothing to read back. */
    if (first->installation_id == NULL || batch->trusted)
        return 0;
    /* Another node may have revoked the installation since this one's token cache last heard (target.h). */
    if ((batch->shared && (result = rl_target_installation_check(txn, first->installation_id)) != 0) ||
        (result = rl_deltas_message_of(txn, first->installation_id, first->message_id, &message, &session)) != 0)
        return result;
    if (strcmp(message.state, "streaming") != 0)
        return RL_E_MESSAGE_FINALIZED;
    if ((result = RL_TXN(txn, delta_next_seq, first->message_id, &next)) != 0)
        return result;
    return next == first->seq ? 0 : RL_E_CONFLICT;
}

/* The end of the run of consecutive seqs of one message that starts at rows[start]. */
static size_t run_end(rl_delta_row_t *const *rows, size_t n, size_t start)
{
    size_t end;

    for (end = start + 1; end < n && strcmp(rows[end]->message_id, rows[start]->message_id) == 0 &&
                          rows[end]->seq == rows[end - 1]->seq + 1;
         ++end) {
    }
    return end;
}

/*
 * A checked batch in one statement (rl_txn_delta_runs_insert_checked):
 * every run's checks and insert, one round trip. A run the statement did
 * not write goes through check_run for its reason; one that passes it now
 * was refused for its seq: another node wrote first and what it wrote could
 * not be taken in (too many runs, too large with this one, or holding one of
 * its keys: a retry stored there): RL_E_CONFLICT, and the record is
 * reloaded. A run stored after other nodes' runs carries them back to its
 * record (catch_up). 1 when the backend has no such statement.
 */
static int write_checked(rl_txn_t *txn, const rl_delta_batch_t *batch, rl_delta_row_t **rows, size_t n)
{
    json_t *runs = json_array();
    rl_delta_written_t *written = NULL;
    size_t count = 0, start, end, i, r;
    char *text = NULL;
    int result = RL_E_INTERNAL;

    for (start = 0, r = 0; start < n && runs != NULL; start = end, ++r) {
        json_t *keys = json_array();
        char *delta = NULL, *keys_text;
        size_t len = 0;
        end = run_end(rows, n, start);
        for (i = start; i < end; ++i)
            len += rows[i]->delta_len;
        if (keys == NULL || (delta = malloc(len + 1)) == NULL) {
            json_decref(keys);
            goto out;
        }
        for (len = 0, i = start; i < end; ++i) {
            memcpy(delta + len, rows[i]->delta, rows[i]->delta_len);
            len += rows[i]->delta_len;
            json_array_append_new(keys, json_pack("[s, s]", rows[i]->key, rows[i]->body_hash));
        }
        keys_text = json_dumps(keys, JSON_COMPACT);
        json_decref(keys);
        if (keys_text == NULL ||
            json_array_append_new(runs,
                                  json_pack("{s:I, s:s, s:I, s:I, s:s%, s:s, s:s?, s:I}", "i", (json_int_t)r,
                                            "message_id", rows[start]->message_id, "seq", (json_int_t)rows[start]->seq,
                                            "seq_last", (json_int_t)rows[end - 1]->seq, "delta", delta, len, "keys",
                                            keys_text, "installation_id", rows[start]->installation_id, "room",
                                            (json_int_t)rows[start]->room)) != 0) {
            free(delta);
            free(keys_text);
            goto out;
        }
        free(delta);
        free(keys_text);
    }
    if (runs == NULL || (text = json_dumps(runs, JSON_COMPACT)) == NULL)
        goto out;
    result = RL_TXN(txn, delta_runs_insert_checked, text, &written, &count);
    if (result != 0)
        goto out;
    for (start = 0, r = 0; start < n && result == 0; start = end, ++r) {
        int outcome = RL_E_CONFLICT;
        end = run_end(rows, n, start);
        for (i = 0; i < count && written[i].i != (int64_t)r; ++i) {
        }
        if (i < count) {
            outcome = 0;
            if (written[i].gap_keys != NULL) {
                rows[start]->moved_next = written[i].seq + (rows[end - 1]->seq - rows[start]->seq) + 1;
                rows[start]->gap_bytes = written[i].gap_bytes;
                if ((rows[start]->gap_keys = strdup(written[i].gap_keys)) == NULL)
                    result = RL_E_INTERNAL;
            }
        } else if ((outcome = check_run(txn, batch, rows[start])) == 0) {
            outcome = RL_E_CONFLICT;
        } else if (!run_refused(outcome)) {
            result = outcome;
        }
        for (i = start; i < end; ++i)
            rows[i]->outcome = outcome;
    }
out:
    json_decref(runs);
    free(text);
    return result;
}

int rl_delta_batch_write(rl_txn_t *txn, rl_delta_batch_t *batch)
{
    rl_delta_row_t **rows = calloc(batch->count > 0 ? batch->count : 1, sizeof(*rows)), *row;
    size_t n = 0, start, end, i;
    int result = 0;

    if (rows == NULL)
        return RL_E_INTERNAL;
    /*
     * One row per message and batch: at 50 deltas/s a message gets several
     * per batch, and every row costs a B-tree insert and its WAL pages. A run
     * is cut where seqs are not consecutive (they always are).
     */
    for (row = batch->head; row != NULL; row = row->next)
        rows[n++] = row;
    qsort(rows, n, sizeof(*rows), by_message_then_seq);
    /* Several nodes: the checks and the insert of every run in one statement, where the backend has it. */
    if (!batch->trusted && n > 0 && rows[0]->installation_id != NULL &&
        (result = write_checked(txn, batch, rows, n)) != 1) {
        free(rows);
        return result;
    }
    result = 0;
    for (start = 0; start < n && result == 0; start = end) {
        int outcome;
        for (end = start + 1; end < n && strcmp(rows[end]->message_id, rows[start]->message_id) == 0 &&
                              rows[end]->seq == rows[end - 1]->seq + 1;
             ++end) {
        }
        /* A message's run that fails its rule is not written; the others of the batch are. */
        outcome = check_run(txn, batch, rows[start]);
        if (outcome == 0)
            result = write_run(txn, rows + start, end - start);
        else if (!run_refused(outcome))
            result = outcome;
        for (i = start; i < end; ++i)
            rows[i]->outcome = outcome;
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
    int64_t now, ttl;
    struct open_message *record;
    int64_t keys_until; /* result: when the keys of an ended message lapse, or 0 */
    size_t text_bytes;  /* result: the length of its text so far */
    /* results (op.value: the keys of its deltas, key -> body hash) */
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
    int64_t folded_at = 0;
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
    for (i = 0; i < count; ++i) {
        /* A record past its lifetime counts as absent (housekeeping may not have removed it yet). */
        if (records[i].created_at >= op->now - op->ttl)
            json_object_set_new(op->op.value, records[i].key, json_string(records[i].body_hash));
    }
    if ((result = RL_TXN(txn, delta_runs_of, op->message_id, &runs, &count)) != 0)
        return result;
    op->next_seq = 1;
    /* The opening text counts unless it is the placeholder, which the first delta replaces. */
    op->text_bytes = op->message.placeholder ? 0 : strlen(op->message.text);
    for (i = 0; i < count; ++i) {
        op->text_bytes += runs[i].text_len;
        add_run_keys(op->op.value, runs[i].keys);
        if (runs[i].seq_last >= op->next_seq)
            op->next_seq = runs[i].seq_last + 1;
    }
    result = RL_TXN(txn, delta_keys_get, op->message_id, &folded, &folded_at);
    if (result == 0 && folded_at >= op->now - op->ttl) {
        json_t *keys = json_loads(folded, 0, NULL);
        json_object_update(op->op.value, keys);
        json_decref(keys);
        op->keys_until = folded_at + op->ttl;
    }
    return result == RL_E_NOT_FOUND ? 0 : result;
}

static const rl_store_op_type_t stream_state_type = RL_OP_TYPE(message_stream_state, 0, stream_state_run);

/* ---- batches ---- */

#define RAW(out, literal) rl_json_out_raw((out), (literal), sizeof(literal) - 1)

/* A JSON string of the record (session_id, interaction_id), or null. */
static void out_string_or_null(rl_json_out_t *out, const json_t *value)
{
    if (json_is_string(value))
        rl_json_out_string(out, json_string_value(value), json_string_length(value));
    else
        RAW(out, "null");
}

/*
 * spec: message_delta, to the user's streams; an encrypted message's carries
 * delta_ct (text: the envelope) and a null delta. Written by the compact
 * writer in the order the jansson object had (session_id, message_id,
 * delta, interaction_id, ts[, delta_ct]): the same bytes, without a tree.
 */
static void publish_delta(rl_deltas_t *deltas, struct open_message *message, const char *text, size_t len)
{
    rl_json_out_t out;

    rl_json_out_init(&out);
    RAW(&out, "{\"session_id\":");
    out_string_or_null(&out, message->session_id);
    RAW(&out, ",\"message_id\":");
    rl_json_out_string(&out, message->message_id, strlen(message->message_id));
    RAW(&out, ",\"delta\":");
    if (message->encrypted)
        RAW(&out, "null");
    else
        rl_json_out_string(&out, text, len);
    RAW(&out, ",\"interaction_id\":");
    out_string_or_null(&out, message->interaction_id);
    RAW(&out, ",\"ts\":");
    rl_json_out_integer(&out, rl_clock_now_ms());
    if (message->encrypted) {
        RAW(&out, ",\"delta_ct\":");
        rl_json_out_string(&out, text, len);
    }
    RAW(&out, "}");
    if (!out.failed)
        rl_hub_publish_text(deltas->hub, message->user_id, RL_EV_MESSAGE_DELTA, out.bytes, out.len);
    rl_json_out_free(&out);
}

/* A string of the call's body, read flat (the fast path) or from jansson's tree (the generic one). */
static const char *body_string(const rl_call_t *call, const char *key, size_t *len)
{
    const rl_json_flat_member_t *member;
    json_t *value;

    if (call->flat != NULL) {
        member = rl_json_flat_get(&call->flat->object, key);
        if (member == NULL || member->type != RL_JSON_FLAT_STRING)
            return NULL;
        if (len != NULL)
            *len = member->len;
        return member->string;
    }
    value = json_object_get(call->body, key);
    if (!json_is_string(value))
        return NULL;
    if (len != NULL)
        *len = json_string_length(value);
    return json_string_value(value);
}

/* {"message_id":id} or, for a replay, {"message_id":id,"idempotent":true}: the answer, without a tree. */
static void reply_delta(rl_call_t *call, const char *message_id, int idempotent)
{
    rl_json_out_t out;

    rl_json_out_init(&out);
    RAW(&out, "{\"message_id\":");
    rl_json_out_string(&out, message_id, strlen(message_id));
    if (idempotent)
        RAW(&out, ",\"idempotent\":true");
    RAW(&out, "}");
    if (out.failed)
        rl_call_fail(call, RL_E_INTERNAL, NULL);
    else
        rl_call_reply_text(call, out.bytes, out.len);
    rl_json_out_free(&out);
}

struct append {
    rl_op_t op;
    rl_delta_batch_t *batch;
    struct append *next; /* the batch submitted after this one, while both are in the store */
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

/*
 * On the worker: what the batch's deltas are (store.h, rl_store_op_type_t.deltas).
 * A trusted batch's deltas go to the sink when there is one (the SQLite
 * store's delta log, folded into runs later as write_run would). Several
 * nodes: a batch is checked in one statement (write_checked), which needs
 * no transaction around it.
 */
static int append_deltas(rl_store_op_t *base, rl_store_deltas_t *sink)
{
    rl_delta_batch_t *batch = ((struct append *)base)->batch;
    rl_delta_row_t *row;

    if (!batch->trusted)
        return RL_STORE_DELTAS_CHECKED;
    for (row = batch->head; row != NULL && sink != NULL; row = row->next) {
        if (rl_store_deltas_put(sink, row->message_id, row->seq, row->key, row->body_hash, row->delta,
                                row->delta_len) != 0)
            return 0;
        row->outcome = 0;
    }
    return RL_STORE_DELTAS_TRUSTED;
}

static const rl_store_op_type_t append_type = {"deltas_append", 1, append_run, append_dispose, append_deltas};

static void submit(rl_deltas_t *deltas);
static void apply(rl_deltas_t *deltas, struct open_message *message, rl_call_t *call);
static void dispatch(rl_deltas_t *deltas, rl_call_t *call);

/*
 * A run stored after runs other nodes had stored since its record last heard (a bridge whose requests are
 * spread over nodes): the record takes in what they held, their keys (a retry of theirs is a replay here) and
 * their size, and numbers the deltas still gathering after the run as the store now does. A record that cannot
 * take them is dropped: the next delta reads the message again.
 */
static void catch_up(rl_deltas_t *deltas, struct open_message *message, const rl_delta_row_t *first)
{
    json_t *runs = json_loads(first->gap_keys, 0, NULL), *run, *pair;
    rl_delta_row_t *row;
    int64_t next = first->moved_next;
    size_t i, j;

    json_array_foreach(runs, i, run)
    {
        json_array_foreach(run, j, pair)
        {
            const char *key = json_string_value(json_array_get(pair, 0));
            const char *hash = json_string_value(json_array_get(pair, 1));
            if (key != NULL && hash != NULL)
                key_stored(message, key, hash);
        }
    }
    json_decref(runs);
    if (runs == NULL) {
        forget(deltas, message);
        return;
    }
    message->text_bytes += (size_t)first->gap_bytes;
    /* The deltas gathering now follow the run, in order. */
    for (row = deltas->pending->head; row != NULL; row = row->next)
        if (row->record == message)
            row->seq = next++;
    message->next_seq = next;
}

/* The answer to one delta of a committed batch, in arrival order. */
static void settle(rl_deltas_t *deltas, rl_delta_row_t *row, int result)
{
    struct open_message *message = row->record;
    rl_call_t *call = row->call;
    char *hash = rl_strmap_remove(message->pending, row->key);

    /* The pending hash moves to the stored keys as it is: no copy per delta. */
    if (result == 0)
        key_kept(message, row->key, hash);
    else
        free(hash);
    if (result == 0 && row->moved_next != 0)
        catch_up(deltas, message, row);
    if (result == 0) {
        size_t len = 0;
        const char *text = body_string(call, message->encrypted ? "delta_ct" : "delta", &len);
        if (deltas->shared && text != NULL)
            publish_delta(deltas, message, text, len);
        reply_delta(call, message->message_id, 0);
    } else if (result == RL_E_CONFLICT || reload_refused(deltas, call, result)) {
        /* Another node wrote to this message: what the store holds now decides (dispatch reloads it). */
        if (result != RL_E_CONFLICT)
            call->handler_tag |= TAG_RELOADED;
        forget(deltas, message);
        dispatch(deltas, call);
    } else {
        /* The delta was not stored: its bytes no longer count. */
        message->text_bytes -= row->delta_len < message->text_bytes ? row->delta_len : message->text_bytes;
        if (result == RL_E_MESSAGE_FINALIZED)
            message->state = RECORD_ENDED;
        else if (result == RL_E_SESSION_DELETED)
            message->deleted = 1;
        else
            forget(deltas, message);
        rl_call_fail(call, result, NULL);
    }
    rl_call_release(call);
    record_unref(message);
}

/* The answers to a batch the store has written (or failed), in arrival order: answers and events keep it. */
static void settle_batch(rl_deltas_t *deltas, struct append *op)
{
    rl_delta_row_t *row;

    deltas->unwritten -= op->batch->count;
    for (row = op->batch->head; row != NULL; row = row->next)
        settle(deltas, row, op->op.base.result != 0 ? op->op.base.result : row->outcome);
}

static void on_written(rl_store_op_t *base)
{
    struct append *op = (void *)base;
    rl_deltas_t *deltas = base->arg;

    --deltas->inflight;
    if ((deltas->oldest = op->next) == NULL)
        deltas->newest = &deltas->oldest;
    settle_batch(deltas, op);
    /*
     * One node's next batch goes now: it holds what arrived while this one
     * was written. A shared store's waits out its window
     * (SHARED_GROUP_COMMIT_MS) from its first delta, below.
     */
    if (deltas->inflight == 0 && deltas->pending->count > 0) {
        if (!deltas->shared || deltas->pending->count >= BATCH_MAX ||
            rl_clock_mono_ms() - deltas->pending->first_ms >= SHARED_GROUP_COMMIT_MS)
            submit(deltas);
        else if (!h2o_timeout_is_linked(&deltas->due))
            h2o_timeout_link(deltas->loop, &deltas->group_commit, &deltas->due);
    }
}

/*
 * Whether a batch submitted now may skip check_run's reads: this process is
 * its store's only writer (rl_store_exclusive), the bus is local, and no
 * change to a message's state is unaccounted for, neither in the store now
 * nor while its deltas gathered (rl_deltas_changing).
 */
static int batch_trusted(const rl_deltas_t *deltas, const rl_delta_batch_t *batch)
{
    return deltas->exclusive && !batch->shared && deltas->changing == 0 && !batch->doubted;
}

/* Hands the pending batch to the store. */
static void submit(rl_deltas_t *deltas)
{
    rl_delta_batch_t *next;
    struct append *op;

    if (deltas->pending->count == 0 || (next = rl_delta_batch_new()) == NULL)
        return;
    next->shared = deltas->shared;
    if (h2o_timeout_is_linked(&deltas->due))
        h2o_timeout_unlink(&deltas->due);
    deltas->pending->trusted = batch_trusted(deltas, deltas->pending);
    op = rl_op_new(&append_type, sizeof(*op));
    op->batch = deltas->pending;
    deltas->pending = next;
    /*
     * One node on its own data folder: a trusted batch is written here, on
     * the loop, with one write(2) to the store's delta log, and answered in
     * this same turn (rl_store_write_now). Not while a batch of ours is in
     * the store (an untrusted one, checked there): this one must follow it.
     */
    if (deltas->exclusive && deltas->inflight == 0 && op->batch->trusted &&
        rl_store_write_now(deltas->store, &op->op.base) == 0) {
        settle_batch(deltas, op);
        rl_store_op_free(&op->op.base);
        return;
    }
    ++deltas->inflight;
    *deltas->newest = op;
    deltas->newest = &op->next;
    rl_store_submit(deltas->store, &op->op.base, on_written, deltas);
}

static void on_due(h2o_timeout_entry_t *entry)
{
    rl_deltas_t *deltas = H2O_STRUCT_FROM_MEMBER(rl_deltas_t, due, entry);

    /* While a batch is being written, the next one gathers; on_written sends it. */
    if (deltas->inflight == 0)
        submit(deltas);
}

void rl_deltas_flush(rl_deltas_t *deltas)
{
    if (deltas != NULL && deltas->pending != NULL)
        submit(deltas);
}

/*
 * How long the oldest delta the store has not written yet has waited, in
 * ms. A batch the worker has finished does not count, even before the loop
 * has run its callback: when the loop itself is the bottleneck, refusing
 * deltas frees none of its time (a refusal costs it almost what a delta
 * does), and counting its lag here made it refuse nearly everything once
 * behind (a benchmark at 50 000 deltas/s offered delivered 10-57/s).
 */
static int64_t unwritten_wait_ms(const rl_deltas_t *deltas)
{
    const struct append *op = deltas->oldest;
    const rl_delta_batch_t *batch;

    while (op != NULL && rl_store_op_ran(&op->op.base))
        op = op->next;
    batch = op != NULL ? op->batch : deltas->pending;
    return batch->count > 0 ? rl_clock_mono_ms() - batch->first_ms : 0;
}

size_t rl_deltas_pending(rl_deltas_t *deltas)
{
    return deltas != NULL && deltas->pending != NULL ? deltas->pending->count + deltas->inflight : 0;
}

rl_deltas_t *rl_deltas_new(const rl_turn_ctx_t *turn)
{
    rl_deltas_t *deltas = calloc(1, sizeof(*deltas));

    if (deltas == NULL)
        return NULL;
    deltas->config = turn->config;
    deltas->store = turn->store;
    deltas->hub = turn->hub;
    deltas->loop = turn->loop;
    deltas->shared = turn->shared;
    deltas->exclusive = turn->store != NULL && rl_store_exclusive(turn->store);
    deltas->newest = &deltas->oldest;
    deltas->open_messages = rl_strmap_new(OPEN_MESSAGES_MAX);
    deltas->pending = rl_delta_batch_new();
    if (deltas->open_messages == NULL || deltas->pending == NULL) {
        rl_deltas_free(deltas);
        return NULL;
    }
    deltas->pending->shared = turn->shared;
    /*
     * Written on the loop (an exclusive store, above in submit), a batch goes
     * at the end of the loop turn its first delta came in (h2o runs a 0 ms
     * timeout in the same h2o_evloop_run, after the sockets' callbacks): the
     * deltas of that turn share one write(2), and their answers go out in
     * the turn too, so h2o never stops and restarts reading their
     * connections in epoll. To the worker, it waits its window.
     */
    h2o_timeout_init(turn->loop, &deltas->group_commit,
                     turn->shared        ? SHARED_GROUP_COMMIT_MS
                     : deltas->exclusive ? 0
                                         : GROUP_COMMIT_MS);
    deltas->due.cb = on_due;
    return deltas;
}

void rl_deltas_free(rl_deltas_t *deltas)
{
    if (deltas == NULL)
        return;
    if (h2o_timeout_is_linked(&deltas->due))
        h2o_timeout_unlink(&deltas->due);
    if (deltas->open_messages != NULL)
        h2o_timeout_dispose(deltas->loop, &deltas->group_commit);
    rl_strmap_free(deltas->open_messages, message_free);
    rl_delta_batch_free(deltas->pending);
    free(deltas);
}

/* ---- records ---- */

static int idle(const char *key, void *value, void *arg)
{
    struct open_message *message = value;

    return message->state != RECORD_LOADING && message->refs == 1 && message->used_ms < *(int64_t *)arg;
}

void rl_deltas_sweep(rl_deltas_t *deltas, int64_t now_ms, unsigned parts)
{
    int64_t before = now_ms - IDLE_MS;

    rl_strmap_sweep_part(deltas->open_messages, idle, &before, message_free, parts);
}

static int of_session(const char *key, void *value, void *arg)
{
    struct open_message *message = value;

    return message->state != RECORD_LOADING && json_is_string(message->session_id) &&
           strcmp(json_string_value(message->session_id), (const char *)arg) == 0;
}

void rl_deltas_forget_session(rl_deltas_t *deltas, const char *session_id)
{
    /* A deleted session's open messages answer 410 from now on: the next delta reloads the truth. */
    rl_strmap_sweep(deltas->open_messages, of_session, (void *)session_id, message_free);
}

void rl_deltas_changing(rl_deltas_t *deltas, int begin)
{
    if (deltas == NULL)
        return;
    if (begin) {
        rl_deltas_flush(deltas);
        ++deltas->changing;
        return;
    }
    if (deltas->changing > 0)
        --deltas->changing;
    /* Deltas that joined while the change was in the store met records that had not heard of it. */
    if (deltas->pending != NULL && deltas->pending->count > 0)
        deltas->pending->doubted = 1;
}

static int any(const char *key, void *value, void *arg)
{
    (void)key;
    (void)arg;
    return ((struct open_message *)value)->state != RECORD_LOADING;
}

void rl_deltas_forget_all(rl_deltas_t *deltas)
{
    if (deltas != NULL)
        rl_strmap_sweep(deltas->open_messages, any, NULL, message_free);
}

void rl_deltas_finalized(rl_deltas_t *deltas, const char *message_id)
{
    struct open_message *message = rl_strmap_get(deltas->open_messages, message_id);

    if (message != NULL && message->state == RECORD_STREAMING) {
        message->state = RECORD_ENDED;
        message->keys_until_ms = rl_clock_now_ms() + deltas->config->idempotency_ttl;
    }
}

void rl_deltas_ending(rl_deltas_t *deltas, const char *message_id, int ending)
{
    struct open_message *message = rl_strmap_get(deltas->open_messages, message_id);

    if (message == NULL || message->state == RECORD_LOADING)
        return;
    if (ending)
        message->ending++;
    else if (message->ending > 0)
        message->ending--;
}

void rl_deltas_opened(rl_deltas_t *deltas, const char *message_id, const char *installation_id, const char *user_id,
                      json_t *session_id, json_t *interaction_id, size_t text_bytes, int encrypted)
{
    struct open_message *message = record_new(message_id, installation_id);

    if (message == NULL)
        return;
    snprintf(message->user_id, sizeof(message->user_id), "%s", user_id);
    message->session_id = json_incref(session_id);
    message->interaction_id = json_incref(interaction_id);
    message->text_bytes = text_bytes;
    message->encrypted = encrypted;
    if (rl_strmap_put(deltas->open_messages, message_id, message) != 0)
        record_unref(message);
}

/* What delta_rule says of a delta besides 0 (new) and an error. */
#define DELTA_REPLAY  1 /* its key was stored with this body: answer idempotent */
#define DELTA_WRITING 2 /* its key is being written with this body: its answer is not known yet */

/*
 * The rules a delta of body_hash under key meets against its message's
 * record at now, in this order: a stored key replays, or with another body
 * is RL_E_IDEMPOTENCY_CONFLICT (spec: the same key with the same body
 * replays; another body is a conflict), as is a key being written; then
 * RL_E_SESSION_DELETED, RL_E_MESSAGE_FINALIZED, and RL_E_MESSAGE_TOO_LARGE
 * when the text would pass cap bytes. 0 for a new delta.
 */
static int delta_rule(const struct open_message *message, const char *key, const char *body_hash, size_t delta_len,
                      size_t cap, int64_t now)
{
    const char *seen;

    /*
     * An ended message's keys count for --idempotency-ttl after its end, like
     * every other idempotency record: up to and including keys_until_ms, as
     * stream_state_run and rl_idempotency_check count.
     */
    seen = message->keys_until_ms == 0 || now <= message->keys_until_ms ? rl_strmap_get(message->keys, key) : NULL;
    if (seen != NULL)
        return strcmp(seen, body_hash) == 0 ? DELTA_REPLAY : RL_E_IDEMPOTENCY_CONFLICT;
    seen = rl_strmap_get(message->pending, key);
    if (seen != NULL)
        return strcmp(seen, body_hash) == 0 ? DELTA_WRITING : RL_E_IDEMPOTENCY_CONFLICT;
    if (message->deleted)
        return RL_E_SESSION_DELETED;
    if (message->state == RECORD_ENDED || message->ending > 0)
        return RL_E_MESSAGE_FINALIZED;
    /* A message's text has a cap (--max-message-bytes); the delta that would pass it is refused, not cut. */
    if (message->text_bytes > cap || delta_len > cap - message->text_bytes)
        return RL_E_MESSAGE_TOO_LARGE;
    return 0;
}

/*
 * Whether a body read flat meets apply's own rules for its message (issue
 * 26: in an encrypted session delta_ct and no delta; in a plain one delta
 * and no *_ct key). A body that does not is read again by the generic path,
 * whose answer (the field named, in its words) is the one given.
 */
static int flat_body_fits(const rl_json_flat_t *body, int encrypted)
{
    const rl_json_flat_member_t *member;
    size_t i;

    if (encrypted) {
        member = rl_json_flat_get(body, "delta");
        if (member != NULL && member->type != RL_JSON_FLAT_NULL)
            return 0;
        member = rl_json_flat_get(body, "delta_ct");
        return member != NULL && member->type == RL_JSON_FLAT_STRING;
    }
    for (i = 0; i < body->count; ++i)
        if (body->members[i].key_len > 3 && memcmp(body->members[i].key + body->members[i].key_len - 3, "_ct", 3) == 0)
            return 0;
    member = rl_json_flat_get(body, "delta");
    return member != NULL && member->type == RL_JSON_FLAT_STRING;
}

/* The digest of a delta's body, from whichever reader read it (both write the same canonical bytes). */
static int delta_body_hash(rl_call_t *call, rl_body_digest_t digest, char out[RL_BODY_HASH_HEX + 1])
{
    return call->flat != NULL ? rl_idempotency_body_digest_flat(&call->flat->object, digest, out)
                              : rl_idempotency_body_digest(call->body, digest, out);
}

/* Checks one delta against a loaded record; a new one joins the pending batch, answered once it is written. */
static void apply(rl_deltas_t *deltas, struct open_message *message, rl_call_t *call)
{
    const char *key, *text;
    char body_hash[RL_BODY_HASH_HEX + 1], *stored = NULL;
    static const char *const plain[] = {"delta", NULL};
    const char *field = NULL;
    rl_delta_row_t *row;
    size_t text_len = 0, len;
    int rule;

    if (!rl_call_alive(call))
        return;
    if (strcmp(message->installation_id, call->principal) != 0) {
        rl_call_fail(call, RL_E_MESSAGE_NOT_FOUND, NULL);
        return;
    }
    if (call->flat != NULL && !flat_body_fits(&call->flat->object, message->encrypted) &&
        rl_call_body_generic(call) != 0)
        return;
    /* issue 26: the plaintext-or-ciphertext rule of the message's session, then the field it needs. */
    if (call->flat == NULL && rl_e2e_body_check(call->body, message->encrypted, plain, &field) != 0) {
        rl_e2e_fail_field(call, field, message->encrypted);
        return;
    }
    key = body_string(call, "idempotency_key", NULL);
    text = body_string(call, message->encrypted ? "delta_ct" : "delta", &text_len);
    if (text == NULL) {
        rl_call_fail_full(call, RL_E_INVALID_REQUEST, NULL,
                          json_pack("[{s:s, s:s, s:s}]", "path", message->encrypted ? "delta_ct" : "delta", "code",
                                    "invalid_type", "message", "Required"),
                          NULL);
        return;
    }
    if (delta_body_hash(call, RL_BODY_BLAKE2B, body_hash) != 0) {
        rl_call_fail(call, RL_E_INTERNAL, NULL);
        return;
    }
    message->used_ms = rl_clock_now_ms();
    /* An encrypted delta is kept as '\n' and its envelope, and counts as such: relayd cannot count characters. */
    len = text_len + (message->encrypted ? 1 : 0);
    rule = delta_rule(message, key, body_hash, len, (size_t)deltas->config->max_message_bytes, message->used_ms);
    if (rule == RL_E_IDEMPOTENCY_CONFLICT) {
        /* A key stored before BLAKE2b took over holds the body's SHA-256 (idempotency.h). */
        char legacy[RL_BODY_HASH_HEX + 1];
        int again;

        if (delta_body_hash(call, RL_BODY_SHA256, legacy) == 0 &&
            ((again = delta_rule(message, key, legacy, len, (size_t)deltas->config->max_message_bytes,
                                 message->used_ms)) == DELTA_REPLAY ||
             again == DELTA_WRITING))
            rule = again;
    }
    if (rule == DELTA_REPLAY) {
        reply_delta(call, message->message_id, 1);
        return;
    }
    if (rule == DELTA_WRITING) {
        call->rate.retry_after_ms = RETRY_PENDING_MS;
        rl_call_fail(call, RL_E_UNAVAILABLE, "this delta is still being written; retry");
        return;
    }
    if (rule != 0 && reload_refused(deltas, call, rule)) {
        call->handler_tag |= TAG_RELOADED;
        forget(deltas, message);
        dispatch(deltas, call);
        return;
    }
    if (rule != 0) {
        rl_call_fail(call, rule, NULL);
        return;
    }
    if (deltas->unwritten >= (size_t)deltas->config->delta_backlog_max ||
        unwritten_wait_ms(deltas) > deltas->config->delta_wait_max) {
        call->rate.retry_after_ms = OVERLOAD_RETRY_MS;
        rl_call_fail(call, RL_E_UNAVAILABLE, "deltas arrive faster than they can be stored; retry");
        return;
    }
    if (rl_strmap_size(message->keys) + rl_strmap_size(message->pending) >= KEYS_PER_MESSAGE_MAX) {
        rl_call_fail(call, RL_E_UNAVAILABLE, "this message has too many deltas");
        return;
    }
    if (message->encrypted && (stored = malloc(len + 1)) != NULL) {
        stored[0] = '\n';
        memcpy(stored + 1, text, text_len);
        stored[len] = '\0';
    }
    row = message->encrypted && stored == NULL
              ? NULL
              : rl_delta_batch_add_for(deltas->pending, message->message_id, message->next_seq,
                                       stored != NULL ? stored : text, len, key, body_hash, call, message);
    free(stored);
    if (row == NULL) {
        rl_call_fail(call, RL_E_INTERNAL, NULL);
        return;
    }
    /* The first delta of a message in a batch carries the checks for its run (check_run). */
    row->installation_id = message->installation_id;
    row->room = (int64_t)deltas->config->max_message_bytes - (int64_t)message->text_bytes;
    message->next_seq++;
    ++deltas->unwritten;
    message->text_bytes += len;
    key_pending(message, key, body_hash);
    ++message->refs;
    rl_call_hold(call);
    /* Published once, even if a conflict with another node makes it go through here again. */
    if ((call->handler_tag & TAG_PUBLISHED) == 0 && !deltas->shared) {
        call->handler_tag |= TAG_PUBLISHED;
        publish_delta(deltas, message, text, text_len);
    }
    if (deltas->pending->count >= BATCH_MAX)
        submit(deltas);
    else if (!h2o_timeout_is_linked(&deltas->due))
        h2o_timeout_link(deltas->loop, &deltas->group_commit, &deltas->due);
}

/* Fills a record from what stream_state read of its message. */
static void record_load(struct open_message *message, struct stream_state *op)
{
    const char *key;
    json_t *hash;

    snprintf(message->user_id, sizeof(message->user_id), "%s", op->session.user_id);
    message->session_id = json_string(op->message.session_id);
    message->interaction_id =
        op->message.interaction_id != NULL ? json_string(op->message.interaction_id) : json_null();
    message->next_seq = op->next_seq;
    message->deleted = op->deleted;
    message->state = strcmp(op->message.state, "streaming") == 0 ? RECORD_STREAMING : RECORD_ENDED;
    message->keys_until_ms = op->keys_until;
    message->text_bytes = op->text_bytes;
    message->encrypted = op->session.encrypted;
    json_object_foreach(op->op.value, key, hash)
    {
        key_stored(message, key, json_string_value(hash));
    }
}

static void on_loaded(rl_store_op_t *base)
{
    struct stream_state *op = (void *)base;
    struct open_message *message = op->record;
    rl_deltas_t *deltas = base->arg;
    struct waiting *w, *next;

    message->state = RECORD_STREAMING;
    if (base->result == 0)
        record_load(message, op);
    ++message->refs;
    for (w = message->waiting; w != NULL; w = next) {
        next = w->next;
        /* Its record is fresh from the store: a refusal by the message's state stands (reload_refused). */
        w->call->handler_tag |= TAG_RELOADED;
        if (base->result != 0)
            rl_call_fail(w->call, base->result, NULL);
        else
            apply(deltas, message, w->call);
        rl_call_release(w->call);
        free(w);
    }
    message->waiting = NULL;
    message->waiting_tail = &message->waiting;
    /* A record that could not be loaded is not kept: the next delta asks the store again. */
    if (base->result != 0)
        forget(deltas, message);
    record_unref(message);
}

/* A delta for the record of its message: applied now, or once the record is loaded. */
static void dispatch(rl_deltas_t *deltas, rl_call_t *call)
{
    const char *message_id = body_string(call, "message_id", NULL);
    struct open_message *message = rl_strmap_get(deltas->open_messages, message_id);
    struct stream_state *op;
    struct waiting *w;
    char scope[96];

    if (message != NULL && message->state != RECORD_LOADING) {
        apply(deltas, message, call);
        return;
    }
    w = calloc(1, sizeof(*w));
    if (w == NULL) {
        rl_call_fail(call, RL_E_INTERNAL, NULL);
        return;
    }
    if (message == NULL) {
        message = record_new(message_id, call->principal);
        if (message == NULL || rl_strmap_put(deltas->open_messages, message_id, message) != 0) {
            if (message != NULL)
                record_unref(message);
            free(w);
            rl_call_fail(call, RL_E_UNAVAILABLE, "too many messages are streaming");
            return;
        }
        message->state = RECORD_LOADING;
        op = rl_op_new(&stream_state_type, sizeof(*op));
        op->installation_id = rl_op_str(op, call->principal);
        op->message_id = rl_op_str(op, message_id);
        scope_of(message_id, scope, sizeof(scope));
        op->scope = rl_op_str(op, scope);
        op->now = rl_clock_now_ms();
        op->ttl = deltas->config->idempotency_ttl;
        op->record = message;
        /* Deltas of this message still pending go first, so that the store's next seq is right. */
        submit(deltas);
        rl_store_submit(deltas->store, &op->op.base, on_loaded, deltas);
    }
    w->call = call;
    rl_call_hold(call);
    *message->waiting_tail = w;
    message->waiting_tail = &w->next;
}

int rl_bridge_send_delta(rl_call_t *call)
{
    const rl_turn_ctx_t *turn = rl_feature_of(call, RL_FEATURE_TURN);

    dispatch(turn->deltas, call);
    return 0;
}
