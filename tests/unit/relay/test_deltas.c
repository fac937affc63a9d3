/*
 * The rules of streamed deltas (spec "Streaming" and "Limits", docs/api.md
 * "sendMessageDelta") against a real store: idempotency per (message, key)
 * with 409 on another body, keys that outlive the message's end for the
 * idempotency TTL, sequence order and the conflict of a stale record, 409
 * after the end, 410 once the session is deleted, and the message size cap.
 * The batch write and the record's load run in the store; delta_rule is
 * what a delta meets against the loaded record.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "relay/turn/deltas.c"
#include "relay/core/text.h"
#include "store_fixture.h"

#define MSG  "msg_aaaaaaaaaaaaaaaaaaaa"
#define MSG2 "msg_bbbbbbbbbbbbbbbbbbbb"
#define TTL  86400000
#define T0   10000

static int seed_message(rl_txn_t *txn, const char *id, const char *role, const char *text, int placeholder)
{
    rl_message_row_t row = {.id = id,
                            .session_id = FIX_SESSION,
                            .interaction_id = "int_one",
                            .role = role,
                            .text = text,
                            .attachments = "[]",
                            .state = strcmp(role, "agent") == 0 ? "streaming" : "final",
                            .created_at = T0,
                            .finalized_at = RL_NO_TIME,
                            .placeholder = placeholder};

    return RL_TXN(txn, message_insert, &row);
}

static int seed_run(rl_txn_t *txn, void *arg)
{
    int result = seed_world_run(txn, arg);

    if (result == 0)
        result = seed_interaction(txn, "int_one", FIX_SESSION, T0);
    if (result == 0)
        result = seed_message(txn, MSG, "agent", RL_PLACEHOLDER_TEXT, 1);
    if (result == 0)
        result = seed_message(txn, MSG2, "agent", "hello", 0);
    return result;
}

static void seed(rl_store_t *store)
{
    assert_int_equal(in_txn(store, seed_run, NULL), 0);
}

/* A delta as apply adds it: every row names its installation, so that its run is checked. */
static void add(rl_delta_batch_t *batch, const char *message_id, int64_t seq, const char *delta, const char *key,
                const char *installation_id)
{
    rl_delta_row_t *row = rl_delta_batch_add_for(batch, message_id, seq, delta, strlen(delta), key, "hash", NULL, NULL);

    assert_non_null(row);
    row->installation_id = installation_id;
}

static int write_run_txn(rl_txn_t *txn, void *batch)
{
    return rl_delta_batch_write(txn, batch);
}

static int outcome_of(rl_delta_batch_t *batch, const char *message_id, int64_t seq)
{
    rl_delta_row_t *row;

    for (row = batch->head; row != NULL; row = row->next)
        if (strcmp(row->message_id, message_id) == 0 && row->seq == seq)
            return row->outcome;
    return 1;
}

/* The message's stored deltas, joined in seq order, and the seq after them. */
struct stored {
    const char *message_id;
    char text[256];
    int64_t next_seq;
};

static int stored_run(rl_txn_t *txn, void *arg)
{
    struct stored *s = arg;
    rl_delta_run_row_t *runs;
    size_t count, i, at = 0;
    int result = RL_TXN(txn, delta_runs_of, s->message_id, &runs, &count);

    s->text[0] = '\0';
    for (i = 0; i < count && result == 0; ++i)
        at += (size_t)snprintf(s->text + at, sizeof(s->text) - at, "%.*s", (int)runs[i].text_len, runs[i].text);
    return result != 0 ? result : RL_TXN(txn, delta_next_seq, s->message_id, &s->next_seq);
}

static struct stored *stored(rl_store_t *store, const char *message_id)
{
    static struct stored s;

    s = (struct stored){.message_id = message_id};
    assert_int_equal(in_txn(store, stored_run, &s), 0);
    return &s;
}

/* spec: deltas are applied in seq order, whatever order a batch holds them in. */
static void test_batch_keeps_seq_order(void **state)
{
    rl_store_t *store = *state;
    rl_delta_batch_t *batch = rl_delta_batch_new();

    seed(store);
    add(batch, MSG, 2, "b", "k2", FIX_INSTALLATION);
    add(batch, MSG, 1, "a", "k1", FIX_INSTALLATION);
    add(batch, MSG, 3, "c", "k3", FIX_INSTALLATION);
    assert_int_equal(in_txn(store, write_run_txn, batch), 0);
    assert_int_equal(outcome_of(batch, MSG, 1), 0);
    assert_int_equal(outcome_of(batch, MSG, 3), 0);
    rl_delta_batch_free(batch);
    assert_string_equal(stored(store, MSG)->text, "abc");
    assert_int_equal(stored(store, MSG)->next_seq, 4);
}

/*
 * A run that does not start at the store's next seq was numbered by a stale
 * record (another node wrote to the message): RL_E_CONFLICT, nothing of it
 * written, and the other messages' runs of the batch still are.
 */
static void test_stale_run_conflicts(void **state)
{
    rl_store_t *store = *state;
    rl_delta_batch_t *batch = rl_delta_batch_new();

    seed(store);
    add(batch, MSG, 1, "a", "k1", FIX_INSTALLATION);
    assert_int_equal(in_txn(store, write_run_txn, batch), 0);
    rl_delta_batch_free(batch);
    batch = rl_delta_batch_new();
    add(batch, MSG, 1, "x", "k9", FIX_INSTALLATION);
    add(batch, MSG2, 1, " world", "k1", FIX_INSTALLATION);
    assert_int_equal(in_txn(store, write_run_txn, batch), 0);
    assert_int_equal(outcome_of(batch, MSG, 1), RL_E_CONFLICT);
    assert_int_equal(outcome_of(batch, MSG2, 1), 0);
    rl_delta_batch_free(batch);
    assert_string_equal(stored(store, MSG)->text, "a");
    assert_string_equal(stored(store, MSG2)->text, " world");
}

static int delete_session_run(rl_txn_t *txn, void *arg)
{
    rl_session_row_t session;
    int result = RL_TXN(txn, session_get, FIX_SESSION, &session);

    (void)arg;
    session.deleted_at = T0 + 5;
    return result != 0 ? result : RL_TXN(txn, session_update, &session);
}

static int user_message_run(rl_txn_t *txn, void *arg)
{
    (void)arg;
    return seed_message(txn, "msg_user", "user", "hi", 0);
}

static int seed_installation_run_b(rl_txn_t *txn, void *arg)
{
    (void)arg;
    return seed_installation(txn, "inst_bbbbbbbbbbbbbbbb", FIX_USER);
}

/*
 * spec: a delta to a message that is not the installation's agent message is
 * 404 message_not_found; once its session is deleted, 410 session_deleted.
 */
static void test_run_targets(void **state)
{
    rl_store_t *store = *state;
    rl_delta_batch_t *batch = rl_delta_batch_new();

    seed(store);
    assert_int_equal(in_txn(store, user_message_run, NULL), 0);
    assert_int_equal(in_txn(store, seed_installation_run_b, NULL), 0);
    add(batch, MSG, 1, "a", "k1", "inst_bbbbbbbbbbbbbbbb");
    add(batch, "msg_user", 1, "a", "k1", FIX_INSTALLATION);
    add(batch, "msg_nowhere", 1, "a", "k1", FIX_INSTALLATION);
    assert_int_equal(in_txn(store, write_run_txn, batch), 0);
    assert_int_equal(outcome_of(batch, MSG, 1), RL_E_MESSAGE_NOT_FOUND);
    assert_int_equal(outcome_of(batch, "msg_user", 1), RL_E_MESSAGE_NOT_FOUND);
    assert_int_equal(outcome_of(batch, "msg_nowhere", 1), RL_E_MESSAGE_NOT_FOUND);
    rl_delta_batch_free(batch);
    assert_int_equal(in_txn(store, delete_session_run, NULL), 0);
    batch = rl_delta_batch_new();
    add(batch, MSG, 1, "a", "k1", FIX_INSTALLATION);
    assert_int_equal(in_txn(store, write_run_txn, batch), 0);
    assert_int_equal(outcome_of(batch, MSG, 1), RL_E_SESSION_DELETED);
    rl_delta_batch_free(batch);
    assert_string_equal(stored(store, MSG)->text, "");
}

/* ---- the record and the rule a delta meets ---- */

static struct open_message *loaded;

static void check_load(rl_store_op_t *base)
{
    struct stream_state *op = (void *)base;

    loaded = NULL;
    if (base->result != 0)
        return;
    loaded = record_new(op->message_id, op->installation_id);
    assert_non_null(loaded);
    record_load(loaded, op);
}

/* The record of the message as a node loads it from the store at now. */
static struct open_message *load(rl_store_t *store, const char *message_id, int64_t now)
{
    struct stream_state *op = rl_op_new(&stream_state_type, sizeof(*op));
    char scope[96];

    scope_of(message_id, scope, sizeof(scope));
    op->installation_id = rl_op_str(op, FIX_INSTALLATION);
    op->message_id = rl_op_str(op, message_id);
    op->scope = rl_op_str(op, scope);
    op->now = now;
    op->ttl = TTL;
    assert_int_equal(run_op(store, op, check_load), 0);
    return loaded;
}

static void write_one(rl_store_t *store, const char *message_id, int64_t seq, const char *delta, const char *key,
                      const char *hash)
{
    rl_delta_batch_t *batch = rl_delta_batch_new();
    rl_delta_row_t *row = rl_delta_batch_add_for(batch, message_id, seq, delta, strlen(delta), key, hash, NULL, NULL);

    row->installation_id = FIX_INSTALLATION;
    assert_int_equal(in_txn(store, write_run_txn, batch), 0);
    assert_int_equal(row->outcome, 0);
    rl_delta_batch_free(batch);
}

/*
 * spec "Limits": a delta's key is unique per message: the same key with the
 * same body replays (idempotent), with another body it is 409
 * idempotency_conflict; a new key is a new delta, numbered after the
 * stored ones.
 */
static void test_key_replays_or_conflicts(void **state)
{
    rl_store_t *store = *state;
    struct open_message *record;

    seed(store);
    write_one(store, MSG, 1, "a", "k1", "h1");
    record = load(store, MSG, T0 + 10);
    assert_int_equal(record->next_seq, 2);
    assert_int_equal(delta_rule(record, "k1", "h1", 1, 1000, T0 + 10), DELTA_REPLAY);
    assert_int_equal(delta_rule(record, "k1", "h2", 1, 1000, T0 + 10), RL_E_IDEMPOTENCY_CONFLICT);
    assert_int_equal(delta_rule(record, "k2", "h1", 1, 1000, T0 + 10), 0);
    /* Keys are per message: k1 on another message is new. */
    record_unref(record);
    record = load(store, MSG2, T0 + 10);
    assert_int_equal(delta_rule(record, "k1", "h2", 1, 1000, T0 + 10), 0);
    record_unref(record);
}

/* A key whose first delta is still being written: the same body waits for its answer (503), another is 409. */
static void test_key_being_written(void **state)
{
    rl_store_t *store = *state;
    struct open_message *record;

    seed(store);
    record = load(store, MSG, T0 + 10);
    key_pending(record, "k1", "h1");
    assert_int_equal(delta_rule(record, "k1", "h1", 1, 1000, T0 + 10), DELTA_WRITING);
    assert_int_equal(delta_rule(record, "k1", "h2", 1, 1000, T0 + 10), RL_E_IDEMPOTENCY_CONFLICT);
    record_unref(record);
}

static int end_run(rl_txn_t *txn, void *arg)
{
    rl_message_row_t message;
    int64_t now = *(int64_t *)arg;
    int result = RL_TXN(txn, message_get, MSG, &message);

    if (result != 0)
        return result;
    message.state = "final";
    message.finalized_at = now;
    if ((result = RL_TXN(txn, message_update, &message)) != 0)
        return result;
    return rl_deltas_fold(txn, MSG, now);
}

/*
 * spec: after sendMessageEnd a new delta is 409 message_finalized; the ended
 * message's keys still replay for --idempotency-ttl (a retry of an answered
 * delta is answered idempotent, not refused), and not after.
 */
static void test_keys_outlive_the_end(void **state)
{
    rl_store_t *store = *state;
    struct open_message *record;
    int64_t ended = T0 + 100;

    seed(store);
    write_one(store, MSG, 1, "a", "k1", "h1");
    assert_int_equal(in_txn(store, end_run, &ended), 0);
    /* The deltas folded into the text: no run is left, yet the key is known. */
    assert_string_equal(stored(store, MSG)->text, "");
    record = load(store, MSG, ended + 1);
    assert_int_equal(delta_rule(record, "k1", "h1", 1, 1000, ended + 1), DELTA_REPLAY);
    assert_int_equal(delta_rule(record, "k1", "h2", 1, 1000, ended + 1), RL_E_IDEMPOTENCY_CONFLICT);
    assert_int_equal(delta_rule(record, "k2", "h1", 1, 1000, ended + 1), RL_E_MESSAGE_FINALIZED);
    /*
     * The record a node keeps lets the keys lapse when a fresh load (and
     * every other idempotency record) does: still there at exactly the TTL,
     * gone a millisecond later.
     */
    assert_int_equal(delta_rule(record, "k1", "h1", 1, 1000, ended + TTL), DELTA_REPLAY);
    assert_int_equal(delta_rule(record, "k1", "h1", 1, 1000, ended + TTL + 1), RL_E_MESSAGE_FINALIZED);
    record_unref(record);
    record = load(store, MSG, ended + TTL);
    assert_int_equal(delta_rule(record, "k1", "h1", 1, 1000, ended + TTL), DELTA_REPLAY);
    record_unref(record);
    record = load(store, MSG, ended + TTL + 1);
    assert_int_equal(delta_rule(record, "k1", "h1", 1, 1000, ended + TTL + 1), RL_E_MESSAGE_FINALIZED);
    record_unref(record);
}

/* spec: a delta to a message whose session was deleted is 410 session_deleted; a replay still answers. */
static void test_deleted_session(void **state)
{
    rl_store_t *store = *state;
    struct open_message *record;

    seed(store);
    write_one(store, MSG, 1, "a", "k1", "h1");
    assert_int_equal(in_txn(store, delete_session_run, NULL), 0);
    record = load(store, MSG, T0 + 10);
    assert_int_equal(record->deleted, 1);
    assert_int_equal(delta_rule(record, "k2", "h2", 1, 1000, T0 + 10), RL_E_SESSION_DELETED);
    assert_int_equal(delta_rule(record, "k1", "h1", 1, 1000, T0 + 10), DELTA_REPLAY);
    record_unref(record);
}

/*
 * ours (docs/api.md "Limits"): a message's text is capped at
 * --max-message-bytes, whether it comes whole or in deltas: the delta that
 * would pass the cap is 413 message_too_large, not cut. The placeholder's
 * single space does not count; an opening text does.
 */
static void test_size_cap(void **state)
{
    rl_store_t *store = *state;
    struct open_message *record;

    seed(store);
    write_one(store, MSG, 1, "12345", "k1", "h1");
    write_one(store, MSG2, 1, "12345", "k1", "h1");
    record = load(store, MSG, T0 + 10);
    assert_int_equal(record->text_bytes, 5);
    assert_int_equal(delta_rule(record, "k2", "h", 5, 10, T0 + 10), 0);
    assert_int_equal(delta_rule(record, "k2", "h", 6, 10, T0 + 10), RL_E_MESSAGE_TOO_LARGE);
    record_unref(record);
    record = load(store, MSG2, T0 + 10);
    assert_int_equal(record->text_bytes, 10);
    assert_int_equal(delta_rule(record, "k2", "h", 0, 10, T0 + 10), 0);
    assert_int_equal(delta_rule(record, "k2", "h", 1, 10, T0 + 10), RL_E_MESSAGE_TOO_LARGE);
    /* A replay of a stored key is answered whatever the cap says. */
    assert_int_equal(delta_rule(record, "k1", "h1", 5, 10, T0 + 10), DELTA_REPLAY);
    record_unref(record);
}

/* ---- one node: the records are the truth, and every change to a message's state tells them ---- */

/* A node's deltas with no services: no loop, nothing submitted (the pending batch stays empty). */
struct node {
    rl_config_t config;
    rl_deltas_t deltas;
};

static void node_init(struct node *n)
{
    memset(n, 0, sizeof(*n));
    n->config.idempotency_ttl = TTL;
    n->deltas.config = &n->config;
    n->deltas.open_messages = rl_strmap_new(16);
    n->deltas.pending = rl_delta_batch_new();
    n->deltas.newest = &n->deltas.oldest;
    n->deltas.exclusive = 1;
    assert_non_null(n->deltas.open_messages);
    assert_non_null(n->deltas.pending);
}

static void node_free(struct node *n)
{
    rl_strmap_free(n->deltas.open_messages, message_free);
    rl_delta_batch_free(n->deltas.pending);
}

static void open_record(struct node *n, const char *message_id)
{
    json_t *session = json_string(FIX_SESSION), *interaction = json_string("int_one");

    rl_deltas_opened(&n->deltas, message_id, FIX_INSTALLATION, FIX_USER, session, interaction, 0, 0);
    json_decref(session);
    json_decref(interaction);
    assert_non_null(rl_strmap_get(n->deltas.open_messages, message_id));
}

/*
 * A trusted batch (one node, its records the truth) is written without
 * reading the message back: even to a message the store says is gone, which
 * the records would have refused. A batch that is not trusted is checked.
 */
static void test_a_trusted_batch_reads_nothing_back(void **state)
{
    rl_store_t *store = *state;
    rl_delta_batch_t *batch = rl_delta_batch_new();

    seed(store);
    assert_int_equal(in_txn(store, delete_session_run, NULL), 0);
    add(batch, MSG, 1, "a", "k1", FIX_INSTALLATION);
    batch->trusted = 1;
    assert_int_equal(in_txn(store, write_run_txn, batch), 0);
    assert_int_equal(outcome_of(batch, MSG, 1), 0);
    rl_delta_batch_free(batch);
    batch = rl_delta_batch_new();
    add(batch, MSG, 2, "b", "k2", FIX_INSTALLATION);
    assert_int_equal(in_txn(store, write_run_txn, batch), 0);
    assert_int_equal(outcome_of(batch, MSG, 2), RL_E_SESSION_DELETED);
    rl_delta_batch_free(batch);
}

/*
 * While a change to messages' state is in the store (a session deleted or
 * restored, the sweep of messages left open), a batch submitted is not
 * trusted, nor is one whose deltas gathered meanwhile; once the change came
 * back and the records heard of it, new batches are trusted again. Several
 * nodes never trust.
 */
static void test_batches_are_trusted_only_when_no_change_is_unaccounted_for(void **state)
{
    struct node n;
    rl_delta_batch_t *batch;

    (void)state;
    node_init(&n);
    assert_true(batch_trusted(&n.deltas, n.deltas.pending));
    rl_deltas_changing(&n.deltas, 1);
    assert_false(batch_trusted(&n.deltas, n.deltas.pending));
    /* A delta joins the pending batch while the change is in the store. */
    assert_int_equal(rl_delta_batch_add(n.deltas.pending, MSG, 1, "a", 1, "k1", "h1"), 0);
    rl_deltas_changing(&n.deltas, 0);
    assert_int_equal(n.deltas.changing, 0);
    assert_false(batch_trusted(&n.deltas, n.deltas.pending));
    /* (As submit would hand it to the store.) */
    rl_delta_batch_free(n.deltas.pending);
    n.deltas.pending = rl_delta_batch_new();
    /* A batch that starts after the change came back is. */
    batch = rl_delta_batch_new();
    assert_true(batch_trusted(&n.deltas, batch));
    batch->shared = 1;
    assert_false(batch_trusted(&n.deltas, batch));
    /* Nor a store that other processes may write (sqlite:PATH, PostgreSQL). */
    batch->shared = 0;
    n.deltas.exclusive = 0;
    assert_false(batch_trusted(&n.deltas, batch));
    n.deltas.exclusive = 1;
    rl_delta_batch_free(batch);
    /* Two changes at once: trusted only when both came back. */
    rl_deltas_changing(&n.deltas, 1);
    rl_deltas_changing(&n.deltas, 1);
    rl_deltas_changing(&n.deltas, 0);
    batch = rl_delta_batch_new();
    assert_false(batch_trusted(&n.deltas, batch));
    rl_deltas_changing(&n.deltas, 0);
    assert_true(batch_trusted(&n.deltas, batch));
    rl_delta_batch_free(batch);
    node_free(&n);
}

/* sendMessageEnd and the sweep of messages left open tell the record: a new delta is 409, a replay still answers. */
static void test_an_end_or_the_sweep_finalizes_the_record(void **state)
{
    struct node n;
    struct open_message *record;

    (void)state;
    node_init(&n);
    open_record(&n, MSG);
    record = rl_strmap_get(n.deltas.open_messages, MSG);
    key_stored(record, "k1", "h1");
    rl_deltas_ending(&n.deltas, MSG, 1);
    assert_int_equal(delta_rule(record, "k2", "h2", 1, 1000, T0), RL_E_MESSAGE_FINALIZED);
    rl_deltas_ending(&n.deltas, MSG, 0);
    assert_int_equal(delta_rule(record, "k2", "h2", 1, 1000, T0), 0);
    rl_deltas_finalized(&n.deltas, MSG);
    assert_int_equal(delta_rule(record, "k2", "h2", 1, 1000, rl_clock_now_ms()), RL_E_MESSAGE_FINALIZED);
    assert_int_equal(delta_rule(record, "k1", "h1", 1, 1000, rl_clock_now_ms()), DELTA_REPLAY);
    node_free(&n);
}

/*
 * A session deleted (or restored) drops its messages' records, and a purge
 * drops them all: the next delta reloads the truth from the store, 410
 * after a delete.
 */
static void test_a_deleted_or_purged_session_drops_its_records(void **state)
{
    rl_store_t *store = *state;
    struct open_message *record;
    struct node n;

    node_init(&n);
    open_record(&n, MSG);
    open_record(&n, MSG2);
    rl_deltas_forget_session(&n.deltas, "ses_elsewhere");
    assert_non_null(rl_strmap_get(n.deltas.open_messages, MSG));
    rl_deltas_forget_session(&n.deltas, FIX_SESSION);
    assert_null(rl_strmap_get(n.deltas.open_messages, MSG));
    assert_null(rl_strmap_get(n.deltas.open_messages, MSG2));
    seed(store);
    assert_int_equal(in_txn(store, delete_session_run, NULL), 0);
    record = load(store, MSG, T0 + 10);
    assert_int_equal(delta_rule(record, "k2", "h2", 1, 1000, T0 + 10), RL_E_SESSION_DELETED);
    record_unref(record);
    open_record(&n, MSG);
    rl_deltas_forget_all(&n.deltas);
    assert_int_equal(rl_strmap_size(n.deltas.open_messages), 0);
    node_free(&n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        INLINE(test_batch_keeps_seq_order),
        INLINE(test_stale_run_conflicts),
        INLINE(test_run_targets),
        INLINE(test_key_replays_or_conflicts),
        INLINE(test_key_being_written),
        INLINE(test_keys_outlive_the_end),
        INLINE(test_deleted_session),
        INLINE(test_size_cap),
        INLINE(test_a_trusted_batch_reads_nothing_back),
        INLINE(test_batches_are_trusted_only_when_no_change_is_unaccounted_for),
        INLINE(test_an_end_or_the_sweep_finalizes_the_record),
        INLINE(test_a_deleted_or_purged_session_drops_its_records),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
