/*
 * The delta log (src/store/deltalog.c): a record decodes to what was
 * encoded, a record cut short or failing its checksum decodes to nothing
 * (the torn tail of a kill -9), and a fold writes each record once: those
 * already stored (a crash between a fold's commit and the log's truncation)
 * and those of a message that no longer streams are skipped. Then through
 * relayd's store: a batch of log records is one append and no transaction,
 * any other operation folds the log first, and a restart replays it.
 * Written on the loop (rl_store_write_now) while the worker folds: the two
 * files take turns and no record is lost or stored twice. Records left in
 * both files by a killed relayd are folded as one set, whichever was
 * written last, and relayd backup's copy takes both.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "common/error.h"
#include "store/deltalog.h"
#include "store/sqlite.h"
#include "store/store.h"

static void test_a_record_decodes_to_what_was_encoded(void **state)
{
    rl_deltalog_buf_t buf = {0};
    rl_deltalog_record_t r;
    size_t first;

    (void)state;
    assert_int_equal(rl_deltalog_encode(&buf, "msg_1", 7, "key-a", "hash-a", "he\0llo", 6), 0);
    first = buf.len;
    assert_int_equal(rl_deltalog_encode(&buf, "msg_2", 1, "k", "h", "", 0), 0);
    assert_int_equal(rl_deltalog_decode(buf.data, buf.len, &r), first);
    assert_int_equal(r.seq, 7);
    assert_memory_equal(r.message_id, "msg_1", 5);
    assert_int_equal(r.message_id_len, 5);
    assert_memory_equal(r.key, "key-a", 5);
    assert_memory_equal(r.body_hash, "hash-a", 6);
    assert_int_equal(r.delta_len, 6);
    assert_memory_equal(r.delta, "he\0llo", 6);
    assert_int_equal(rl_deltalog_decode(buf.data + first, buf.len - first, &r), buf.len - first);
    assert_int_equal(r.seq, 1);
    assert_int_equal(r.delta_len, 0);
    rl_deltalog_buf_free(&buf);
}

static void test_a_torn_or_corrupt_record_decodes_to_nothing(void **state)
{
    rl_deltalog_buf_t buf = {0};
    rl_deltalog_record_t r;
    size_t cut;

    (void)state;
    assert_int_equal(rl_deltalog_encode(&buf, "msg_1", 3, "key", "hash", "delta", 5), 0);
    for (cut = 0; cut < buf.len; ++cut)
        assert_int_equal(rl_deltalog_decode(buf.data, cut, &r), 0);
    buf.data[buf.len - 1] ^= 0x01;
    assert_int_equal(rl_deltalog_decode(buf.data, buf.len, &r), 0);
    buf.data[buf.len - 1] ^= 0x01;
    buf.data[0] ^= 0x40; /* the length */
    assert_int_equal(rl_deltalog_decode(buf.data, buf.len, &r), 0);
    rl_deltalog_buf_free(&buf);
}

static void test_a_field_too_long_for_its_length_is_refused(void **state)
{
    rl_deltalog_buf_t buf = {0};
    char *key = malloc(70000);

    (void)state;
    memset(key, 'k', 69999);
    key[69999] = '\0';
    assert_int_equal(rl_deltalog_encode(&buf, "msg_1", 1, key, "h", "d", 1), -1);
    assert_int_equal(buf.len, 0);
    free(key);
    rl_deltalog_buf_free(&buf);
}

/* ---- through a real store ---- */

static char folder[64];

static int setup(void **state)
{
    strcpy(folder, "/tmp/rl-deltalog-XXXXXX");
    (void)state;
    return mkdtemp(folder) != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[128];

    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf %s", folder);
    return system(cmd) == 0 ? 0 : -1;
}

typedef int (*txn_fn)(rl_txn_t *txn, void *arg);

struct call {
    rl_store_op_t base;
    txn_fn fn;
    void *arg;
};

static int call_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct call *op = (void *)base;

    return op->fn(txn, op->arg);
}

static const rl_store_op_type_t call_type = {"test_call", 1, call_run, NULL, NULL};

static void on_called(rl_store_op_t *base)
{
    *(int *)base->arg = base->result;
}

/* Runs fn in a transaction of the store's worker: its result. */
static int in_txn(rl_store_t *store, txn_fn fn, void *arg)
{
    struct call *op = rl_store_op_new(&call_type, sizeof(*op));
    int result = -1;

    op->fn = fn;
    op->arg = arg;
    rl_store_submit(store, &op->base, on_called, &result);
    rl_store_drain(store);
    return result;
}

/* An op of log records only, as deltas.c makes one. */
struct logged {
    rl_store_op_t base;
    const char *message_id;
    int64_t seq;
    const char *key, *delta;
    int result;
};

static int logged_deltas(rl_store_op_t *base, rl_store_deltas_t *sink)
{
    struct logged *op = (void *)base;

    if (sink != NULL &&
        rl_store_deltas_put(sink, op->message_id, op->seq, op->key, "hash", op->delta, strlen(op->delta)) != 0)
        return 0;
    return RL_STORE_DELTAS_TRUSTED;
}

static int logged_run(rl_txn_t *txn, rl_store_op_t *base)
{
    (void)txn;
    (void)base;
    fail_msg("a batch of log records ran in a transaction");
    return RL_E_INTERNAL;
}

static const rl_store_op_type_t logged_type = {"test_logged", 1, logged_run, NULL, logged_deltas};

static void append(rl_store_t *store, const char *message_id, int64_t seq, const char *key, const char *delta)
{
    struct logged *op = rl_store_op_new(&logged_type, sizeof(*op));
    int result = -1;

    op->message_id = message_id;
    op->seq = seq;
    op->key = key;
    op->delta = delta;
    rl_store_submit(store, &op->base, on_called, &result);
    rl_store_drain(store);
    assert_int_equal(result, 0);
}

#define USER    "usr_1"
#define INST    "inst_1"
#define SESSION "ses_1"
#define MSG     "msg_1"
#define ENDED   "msg_2"

static int seed_run(rl_txn_t *txn, void *arg)
{
    rl_user_row_t user = {.id = USER, .created_at = 1};
    rl_installation_row_t inst = {.id = INST,
                                  .user_id = USER,
                                  .token_env = "live",
                                  .connector_type = "claude",
                                  .host_label = "h",
                                  .state = "live",
                                  .created_at = 1,
                                  .revoked_at = RL_NO_TIME,
                                  .manifest = "{}"};
    rl_session_row_t session = {.id = SESSION,
                                .user_id = USER,
                                .installation_id = INST,
                                .title = "t",
                                .state = "active",
                                .created_at = 1,
                                .updated_at = 1,
                                .deleted_at = RL_NO_TIME};
    rl_message_row_t msg = {.id = MSG,
                            .session_id = SESSION,
                            .role = "agent",
                            .text = "",
                            .attachments = "[]",
                            .state = "streaming",
                            .created_at = 1,
                            .finalized_at = RL_NO_TIME,
                            .placeholder = 1};
    int result;

    (void)arg;
    if ((result = RL_TXN(txn, user_insert_ignore, &user)) != 0 ||
        (result = RL_TXN(txn, installation_insert, &inst)) != 0 ||
        (result = RL_TXN(txn, session_insert, &session)) != 0 || (result = RL_TXN(txn, message_insert, &msg)) != 0)
        return result;
    msg.id = ENDED;
    msg.state = "final";
    msg.finalized_at = 2;
    return RL_TXN(txn, message_insert, &msg);
}

struct stored {
    const char *message_id;
    char text[256];
    char keys[256]; /* the runs' keys columns, one after the other */
    size_t runs;
};

static int stored_run(rl_txn_t *txn, void *arg)
{
    struct stored *s = arg;
    rl_delta_run_row_t *runs;
    size_t count, i, at = 0;
    int result = RL_TXN(txn, delta_runs_of, s->message_id, &runs, &count);

    s->text[0] = s->keys[0] = '\0';
    s->runs = count;
    for (i = 0; i < count && result == 0; ++i)
        at += (size_t)snprintf(s->text + at, sizeof(s->text) - at, "%.*s", (int)runs[i].text_len, runs[i].text);
    for (at = 0, i = 0; i < count && result == 0; ++i)
        at += (size_t)snprintf(s->keys + at, sizeof(s->keys) - at, "%s", runs[i].keys);
    return result;
}

static struct stored stored(rl_store_t *store, const char *message_id)
{
    struct stored s = {.message_id = message_id};

    assert_int_equal(in_txn(store, stored_run, &s), 0);
    return s;
}

static char log_file[128];

static size_t file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    long n;

    if (f == NULL)
        return 0;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fclose(f);
    return (size_t)n;
}

static void test_records_are_folded_before_other_operations_and_once(void **state)
{
    rl_store_t *store = NULL;
    rl_store_figures_t figures;
    struct stored s;
    FILE *f;
    rl_deltalog_buf_t buf = {0};

    (void)state;
    snprintf(log_file, sizeof(log_file), "%s/relay.db-deltas.log", folder);
    assert_int_equal(rl_store_open(folder, &store), 0);
    assert_int_equal(in_txn(store, seed_run, NULL), 0);
    append(store, MSG, 1, "k1", "a");
    append(store, MSG, 2, "k\"2\xc3\xa9", "b");
    append(store, ENDED, 1, "k1", "lost");
    rl_store_figures(store, &figures);
    assert_int_equal(figures.log_appends, 3);
    assert_true(file_size(log_file) > 0);
    /* Any other operation sees them: the log is folded first, into one run of the message. */
    s = stored(store, MSG);
    assert_string_equal(s.text, "ab");
    assert_int_equal(s.runs, 1);
    /* Its keys as deltas.c reads them back (jansson): json_dumps(JSON_COMPACT) of [[key, hash], ...]. */
    assert_string_equal(s.keys, "[[\"k1\",\"hash\"],[\"k\\\"2\xc3\xa9\",\"hash\"]]");
    /* Of a message that no longer streams, nothing. */
    assert_string_equal(stored(store, ENDED).text, "");
    assert_int_equal(file_size(log_file), 0);
    rl_store_figures(store, &figures);
    assert_true(figures.log_folds >= 1);
    append(store, MSG, 3, "k3", "c");
    rl_store_close(store);
    /* Closing folded it. */
    assert_int_equal(file_size(log_file), 0);

    /* A crash between a fold's commit and the log's truncation: records 2 and 3 again, then 4 and a torn tail. */
    assert_int_equal(rl_deltalog_encode(&buf, MSG, 2, "k2", "hash", "b", 1), 0);
    assert_int_equal(rl_deltalog_encode(&buf, MSG, 3, "k3", "hash", "c", 1), 0);
    assert_int_equal(rl_deltalog_encode(&buf, MSG, 4, "k4", "hash", "d", 1), 0);
    assert_int_equal(rl_deltalog_encode(&buf, MSG, 5, "k5", "hash", "e", 1), 0);
    f = fopen(log_file, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf.data, 1, buf.len - 3, f), buf.len - 3);
    fclose(f);
    rl_deltalog_buf_free(&buf);
    store = NULL;
    assert_int_equal(rl_store_open(folder, &store), 0);
    assert_int_equal(file_size(log_file), 0);
    s = stored(store, MSG);
    assert_string_equal(s.text, "abcd");
    append(store, MSG, 5, "k5", "E");
    assert_string_equal(stored(store, MSG).text, "abcdE");
    rl_store_close(store);
}

/* ---- written on the loop while the worker folds ---- */

#define RACE_FOLDS      100     /* the worker's folds of records while the deltas are written */
#define RACE_DELTAS_MAX 1000000 /* the writer stops here if the folds have not come by then */

struct writer {
    rl_store_t *store;
    int refused; /* write_now answered 1: the store would not take the batch on this thread */
    int failed;  /* an append that did not succeed */
    int stop;    /* set by the test once the worker has folded RACE_FOLDS times */
    int64_t written;
};

static const char *const letters = "abcdefghijklmnopqrstuvwxyz";

static void *write_deltas(void *arg)
{
    struct writer *w = arg;
    char key[32];
    int64_t seq;

    for (seq = 1; seq <= RACE_DELTAS_MAX && !__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE); ++seq) {
        struct logged *op = rl_store_op_new(&logged_type, sizeof(*op));
        snprintf(key, sizeof(key), "k%lld", (long long)seq);
        op->message_id = MSG;
        op->seq = seq;
        op->key = key;
        op->delta = (const char[]){letters[seq % 26], '\0'};
        if (rl_store_write_now(w->store, &op->base) != 0)
            w->refused = 1;
        else if (op->base.result != 0)
            w->failed = 1;
        rl_store_op_free(&op->base);
        if (w->refused)
            break;
        w->written = seq;
    }
    return NULL;
}

static int whole_run(rl_txn_t *txn, void *arg)
{
    char *text = arg;
    rl_delta_run_row_t *runs;
    size_t count, i, at = 0;
    int64_t next = 1;
    int result = RL_TXN(txn, delta_runs_of, MSG, &runs, &count);

    for (i = 0; i < count && result == 0; ++i) {
        /* Runs follow each other with no gap and no overlap. */
        if (runs[i].seq != next)
            return RL_E_CONFLICT;
        next = runs[i].seq_last + 1;
        memcpy(text + at, runs[i].text, runs[i].text_len);
        at += runs[i].text_len;
    }
    text[at] = '\0';
    return result;
}

/* An operation that only makes the worker begin a transaction, which folds the log. */
static int nothing_run(rl_txn_t *txn, void *arg)
{
    (void)txn;
    (void)arg;
    return 0;
}

static void test_written_on_the_loop_while_the_worker_folds_nothing_is_lost_or_doubled(void **state)
{
    rl_store_t *store = NULL;
    rl_store_figures_t figures;
    struct writer w = {0};
    pthread_t thread;
    char *text = malloc(RACE_DELTAS_MAX + 1), *expected = malloc(RACE_DELTAS_MAX + 1);
    int64_t seq;
    int folds;

    (void)state;
    assert_int_equal(rl_store_open(folder, &store), 0);
    assert_int_equal(in_txn(store, seed_run, NULL), 0);
    w.store = store;
    assert_int_equal(pthread_create(&thread, NULL, write_deltas, &w), 0);
    /* Every operation of the worker folds what is in the log meanwhile: many folds, each racing the writes. */
    /* Until the worker has folded records RACE_FOLDS times while the writer went on (each a race). */
    for (folds = 0, figures.log_folds = 0; figures.log_folds < RACE_FOLDS && folds < 100 * RACE_FOLDS; ++folds) {
        assert_int_equal(in_txn(store, nothing_run, NULL), 0);
        rl_store_figures(store, &figures);
    }
    __atomic_store_n(&w.stop, 1, __ATOMIC_RELEASE);
    assert_int_equal(pthread_join(thread, NULL), 0);
    assert_int_equal(w.refused, 0);
    assert_int_equal(w.failed, 0);
    rl_store_figures(store, &figures);
    assert_int_equal(figures.log_appends, w.written);
    /* The race was run: the worker folded many times while the deltas were written. */
    assert_true(w.written > RACE_FOLDS);
    assert_true(figures.log_folds >= RACE_FOLDS);
    assert_int_equal(in_txn(store, whole_run, text), 0);
    for (seq = 1; seq <= w.written; ++seq)
        expected[seq - 1] = letters[seq % 26];
    expected[w.written] = '\0';
    assert_string_equal(text, expected);
    rl_store_close(store);
    /* And as a restart finds it. */
    store = NULL;
    assert_int_equal(rl_store_open(folder, &store), 0);
    assert_int_equal(in_txn(store, whole_run, text), 0);
    assert_string_equal(text, expected);
    rl_store_close(store);
    free(text);
    free(expected);
}

/* Writes records seq first..last of MSG (delta: the seq's letter) to path, cut short by cut bytes. */
static void write_records(const char *path, int64_t first, int64_t last, size_t cut)
{
    rl_deltalog_buf_t buf = {0};
    char key[32];
    FILE *f;
    int64_t seq;

    for (seq = first; seq <= last; ++seq) {
        snprintf(key, sizeof(key), "k%lld", (long long)seq);
        assert_int_equal(rl_deltalog_encode(&buf, MSG, seq, key, "hash", (const char[]){letters[seq % 26], '\0'}, 1),
                         0);
    }
    assert_non_null(f = fopen(path, "wb"));
    assert_int_equal(fwrite(buf.data, 1, buf.len - cut, f), buf.len - cut);
    fclose(f);
    rl_deltalog_buf_free(&buf);
}

static void test_records_left_in_both_files_are_folded_as_one_set(void **state)
{
    rl_store_t *store = NULL;
    char first[160], second[160], copy[160], why[256], text[64];
    int version = 0;

    (void)state;
    assert_int_equal(rl_store_open(folder, &store), 0);
    assert_int_equal(in_txn(store, seed_run, NULL), 0);
    rl_store_close(store);
    snprintf(first, sizeof(first), "%s/relay.db-deltas.log", folder);
    rl_deltalog_second_path(first, second, sizeof(second));
    /*
     * A relayd killed during a fold: the file it was folding (here the
     * second, seqs 1-3) and the one the loop had moved to (the first, 4-6,
     * its last write torn).
     */
    write_records(second, 1, 3, 0);
    write_records(first, 4, 7, 2);
    /* relayd backup's copy, taken from the files as they are: both, sorted together. */
    snprintf(copy, sizeof(copy), "%s/copy.db", folder);
    {
        char db[160];
        snprintf(db, sizeof(db), "%s/relay.db", folder);
        assert_int_equal(rl_store_sqlite_copy(db, copy, &version, why, sizeof(why)), 0);
    }
    assert_int_equal(rl_store_open(folder, &store), 0);
    assert_int_equal(file_size(first), 0);
    assert_int_equal(file_size(second), 0);
    assert_int_equal(in_txn(store, whole_run, text), 0);
    assert_string_equal(text, "bcdefg");
    rl_store_close(store);
    {
        char where[200];
        rl_store_t *copied = NULL;
        snprintf(where, sizeof(where), "sqlite:%s", copy);
        assert_int_equal(rl_store_open_inline(where, &copied), 0);
        assert_int_equal(in_txn(copied, whole_run, text), 0);
        assert_string_equal(text, "bcdefg");
        rl_store_close(copied);
    }
}

/* ---- past the log's limit, the loop leaves its deltas to the worker ---- */

#define BIG_DELTA (4u * 1024 * 1024)
#define LOG_LIMIT (64u * 1024 * 1024) /* sqlite.c's LOG_MAX */

struct run_bytes {
    size_t runs, bytes;
    int64_t last;
};

static int run_bytes_run(rl_txn_t *txn, void *arg)
{
    struct run_bytes *b = arg;
    rl_delta_run_row_t *runs;
    size_t count, i;
    int result = RL_TXN(txn, delta_runs_of, MSG, &runs, &count);

    b->runs = count;
    b->bytes = 0;
    b->last = 0;
    for (i = 0; i < count && result == 0; ++i) {
        b->bytes += runs[i].text_len;
        b->last = runs[i].seq_last;
    }
    return result;
}

static struct logged *big_op(int64_t seq, const char *delta)
{
    struct logged *op = rl_store_op_new(&logged_type, sizeof(*op));

    op->message_id = MSG;
    op->seq = seq;
    op->key = "k";
    op->delta = delta;
    return op;
}

static size_t log_bytes(void)
{
    char second[160];

    snprintf(log_file, sizeof(log_file), "%s/relay.db-deltas.log", folder);
    snprintf(second, sizeof(second), "%s.b", log_file);
    return file_size(log_file) + file_size(second);
}

static void test_past_the_logs_limit_the_loop_leaves_deltas_to_the_worker(void **state)
{
    rl_store_t *store = NULL;
    sqlite3 *holder = NULL;
    char *delta = malloc(BIG_DELTA + 1), db_path[128];
    struct logged *op;
    struct run_bytes b;
    int64_t seq, refused_at = 0;
    size_t before;
    int result = -1;

    (void)state;
    memset(delta, 'x', BIG_DELTA);
    delta[BIG_DELTA] = '\0';
    assert_int_equal(rl_store_open(folder, &store), 0);
    assert_int_equal(in_txn(store, seed_run, NULL), 0);
    /* Another process holds the database: the worker's folds fail (each after its 5 s of retries). */
    snprintf(db_path, sizeof(db_path), "%s/relay.db", folder);
    assert_int_equal(sqlite3_open(db_path, &holder), SQLITE_OK);
    assert_int_equal(sqlite3_exec(holder, "BEGIN EXCLUSIVE", NULL, NULL, NULL), SQLITE_OK);
    for (seq = 1; seq <= 2 * LOG_LIMIT / BIG_DELTA && refused_at == 0; ++seq) {
        op = big_op(seq, delta);
        before = log_bytes();
        if (rl_store_write_now(store, &op->base) != 0) {
            refused_at = seq;
            /* Refused whole: nothing of it is in the log, and it ran nowhere. */
            assert_int_equal(log_bytes(), before);
            assert_int_equal(rl_store_op_ran(&op->base), 0);
            break;
        }
        assert_int_equal(op->base.result, 0);
        rl_store_op_free(&op->base);
    }
    /* The log took deltas until it held LOG_LIMIT bytes not yet folded, and no more. */
    assert_true(refused_at > 0);
    assert_true(log_bytes() >= LOG_LIMIT);
    assert_true(log_bytes() < LOG_LIMIT + BIG_DELTA + 4096);
    assert_int_equal(refused_at, LOG_LIMIT / BIG_DELTA + 1);
    /* Released, the refused one goes to the worker, which folds the log first and then writes it. */
    assert_int_equal(sqlite3_exec(holder, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(holder);
    rl_store_submit(store, &op->base, on_called, &result);
    rl_store_drain(store);
    assert_int_equal(result, 0);
    assert_int_equal(in_txn(store, run_bytes_run, &b), 0);
    assert_int_equal(b.last, refused_at);
    assert_int_equal(b.bytes, (size_t)refused_at * BIG_DELTA);
    assert_true(log_bytes() == 0);
    /* Folded, the log takes the loop's writes again. */
    op = big_op(refused_at + 1, delta);
    assert_int_equal(rl_store_write_now(store, &op->base), 0);
    assert_int_equal(op->base.result, 0);
    rl_store_op_free(&op->base);
    assert_true(log_bytes() > 0);
    rl_store_close(store);
    free(delta);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_record_decodes_to_what_was_encoded),
        cmocka_unit_test(test_a_torn_or_corrupt_record_decodes_to_nothing),
        cmocka_unit_test(test_a_field_too_long_for_its_length_is_refused),
        cmocka_unit_test_setup_teardown(test_records_are_folded_before_other_operations_and_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_written_on_the_loop_while_the_worker_folds_nothing_is_lost_or_doubled,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_records_left_in_both_files_are_folded_as_one_set, setup, teardown),
        cmocka_unit_test_setup_teardown(test_past_the_logs_limit_the_loop_leaves_deltas_to_the_worker, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
