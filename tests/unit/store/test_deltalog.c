/*
 * The delta log (src/store/deltalog.c): a record decodes to what was
 * encoded, a record cut short or failing its checksum decodes to nothing
 * (the torn tail of a kill -9), and a fold writes each record once: those
 * already stored (a crash between a fold's commit and the log's truncation)
 * and those of a message that no longer streams are skipped. Then through
 * relayd's store: a batch of log records is one append and no transaction,
 * any other operation folds the log first, and a restart replays it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/error.h"
#include "store/deltalog.h"
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_record_decodes_to_what_was_encoded),
        cmocka_unit_test(test_a_torn_or_corrupt_record_decodes_to_nothing),
        cmocka_unit_test(test_a_field_too_long_for_its_length_is_refused),
        cmocka_unit_test_setup_teardown(test_records_are_folded_before_other_operations_and_once, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
