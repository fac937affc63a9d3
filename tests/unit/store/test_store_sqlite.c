/*
 * The SQLite store against a real database file in a temporary folder: each
 * test runs on the backend used directly and on the relay's store worker.
 */
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "common/error.h"
#include "store/store.h"

struct outcome {
    int calls;
    int result;
    json_t *value;
};

static void record(int result, json_t *value, void *arg)
{
    struct outcome *outcome = arg;

    ++outcome->calls;
    outcome->result = result;
    json_decref(outcome->value);
    outcome->value = value;
}

static char folder[] = "/tmp/rl-store-test-XXXXXX";
static int direct; /* 1: the SQLite backend itself; 0: behind the worker thread, as relayd runs it */

static int open_store(rl_store_t **store)
{
    char path[64];

    if (!direct)
        return rl_store_open(folder, store);
    snprintf(path, sizeof(path), "%s/relay.db", folder);
    return rl_store__sqlite_open(path, store);
}

static int setup(void **state)
{
    rl_store_t *store = NULL;

    strcpy(folder, "/tmp/rl-store-test-XXXXXX");
    assert_non_null(mkdtemp(folder));
    assert_int_equal(open_store(&store), 0);
    *state = store;
    return 0;
}

static int setup_direct(void **state)
{
    direct = 1;
    return setup(state);
}

static int setup_worker(void **state)
{
    direct = 0;
    return setup(state);
}

static int teardown(void **state)
{
    char cmd[128];

    rl_store_close(*state);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", folder);
    assert_int_equal(system(cmd), 0);
    return 0;
}

static const rl_pairing_new_t pairing = {
    .poll_hash = "poll-hash-1",
    .code_hash = "code-hash-1",
    .installation_id = "inst_0123456789abcdef",
    .connector_type = "exec",
    .host_label = "laptop",
    .created_at = 1000,
    .expires_at = 121000,
};

static void test_callbacks_are_deferred(void **state)
{
    rl_store_t *store = *state;
    struct outcome out = {0};

    rl_store_user_ensure(store, "alice", 1, record, &out);
    /* Never inside the call: only the flush after the loop turn runs it. */
    assert_int_equal(out.calls, 0);
    assert_true(rl_store_pending(store));
    rl_store_drain(store);
    assert_int_equal(out.calls, 1);
    assert_int_equal(out.result, 0);
    assert_false(rl_store_pending(store));
}

static void test_pairing_lifecycle(void **state)
{
    rl_store_t *store = *state;
    struct outcome out = {0};

    rl_store_pairing_insert(store, &pairing, record, &out);
    rl_store_drain(store);
    assert_int_equal(out.result, 0);

    rl_store_pairing_poll(store, "poll-hash-1", "tok-hash", "live", 2000, record, &out);
    rl_store_drain(store);
    assert_int_equal(out.result, 0);
    assert_string_equal(json_string_value(json_object_get(out.value, "status")), "pending");

    rl_store_pairing_claim(store, "code-hash-1", "alice", 3000, record, &out);
    rl_store_drain(store);
    assert_int_equal(out.result, 0);
    assert_string_equal(json_string_value(json_object_get(out.value, "id")), "inst_0123456789abcdef");
    assert_string_equal(json_string_value(json_object_get(out.value, "user_id")), "alice");

    /* Consumed once. */
    rl_store_pairing_claim(store, "code-hash-1", "bob", 3001, record, &out);
    rl_store_drain(store);
    assert_int_equal(out.result, RL_E_PAIRING_NOT_FOUND);

    rl_store_pairing_poll(store, "poll-hash-1", "tok-hash", "live", 4000, record, &out);
    rl_store_drain(store);
    assert_int_equal(out.result, 0);
    assert_string_equal(json_string_value(json_object_get(out.value, "status")), "paired");

    rl_store_installation_get(store, "inst_0123456789abcdef", record, &out);
    rl_store_drain(store);
    assert_int_equal(out.result, 0);
    assert_string_equal(json_string_value(json_object_get(out.value, "token_hash")), "tok-hash");

    /* The token is handed out once. */
    rl_store_pairing_poll(store, "poll-hash-1", "other", "live", 5000, record, &out);
    rl_store_drain(store);
    assert_int_equal(out.result, RL_E_PAIRING_NOT_FOUND);
    json_decref(out.value);
}

static void test_pairing_expiry_and_collision(void **state)
{
    rl_store_t *store = *state;
    struct outcome out = {0};
    rl_pairing_new_t second = pairing;

    rl_store_pairing_insert(store, &pairing, record, &out);
    rl_store_drain(store);
    assert_int_equal(out.result, 0);

    /* The same live code cannot be issued twice... */
    second.poll_hash = "poll-hash-2";
    second.created_at = 2000;
    rl_store_pairing_insert(store, &second, record, &out);
    rl_store_drain(store);
    assert_int_equal(out.result, RL_E_IDEMPOTENCY_CONFLICT);

    rl_store_pairing_poll(store, "poll-hash-1", "h", "live", 121000, record, &out);
    rl_store_drain(store);
    assert_int_equal(out.result, RL_E_PAIRING_EXPIRED);
    rl_store_pairing_claim(store, "code-hash-1", "alice", 121000, record, &out);
    rl_store_drain(store);
    assert_int_equal(out.result, RL_E_PAIRING_NOT_FOUND);

    /* ...but once it expired, it may be minted again. */
    second.created_at = 130000;
    second.expires_at = 250000;
    rl_store_pairing_insert(store, &second, record, &out);
    rl_store_drain(store);
    assert_int_equal(out.result, 0);
    json_decref(out.value);
}

static void test_failed_write_leaves_no_trace(void **state)
{
    rl_store_t *store = *state;
    struct outcome out = {0};

    rl_store_installation_set_manifest(store, "inst_nobodyhere0000", "{}", record, &out);
    rl_store_drain(store);
    assert_int_equal(out.result, RL_E_INSTALLATION_NOT_FOUND);
    rl_store_installation_get(store, "inst_nobodyhere0000", record, &out);
    rl_store_drain(store);
    assert_int_equal(out.result, RL_E_INSTALLATION_NOT_FOUND);
    json_decref(out.value);
}

static void test_reopen_keeps_data(void **state)
{
    rl_store_t *store = *state;
    struct outcome out = {0};

    rl_store_pairing_insert(store, &pairing, record, &out);
    rl_store_pairing_claim(store, "code-hash-1", "alice", 3000, record, &out);
    rl_store_drain(store);
    assert_int_equal(out.result, 0);
    rl_store_close(store);
    /* Migrations are not applied twice and the data is still there. */
    assert_int_equal(open_store(&store), 0);
    *state = store;
    rl_store_installation_get(store, "inst_0123456789abcdef", record, &out);
    rl_store_drain(store);
    assert_int_equal(out.result, 0);
    json_decref(out.value);
}

static void test_a_delta_batch_is_one_row_per_message(void **state)
{
    rl_store_t *store = *state;
    struct outcome out = {0};
    rl_delta_batch_t *batch = rl_delta_batch_new();
    char path[96];
    sqlite3 *db;
    sqlite3_stmt *stmt;

    /* two messages' deltas interleaved, as they arrive */
    assert_int_equal(rl_delta_batch_add(batch, "msg_a", 1, "one ", 4, "inst", "message:msg_a", "ka1", "ha1"), 0);
    assert_int_equal(rl_delta_batch_add(batch, "msg_b", 1, "uno ", 4, "inst", "message:msg_b", "kb1", "hb1"), 0);
    assert_int_equal(rl_delta_batch_add(batch, "msg_a", 2, "two ", 4, "inst", "message:msg_a", "ka2", "ha2"), 0);
    assert_int_equal(rl_delta_batch_add(batch, "msg_a", 3, "three", 5, "inst", "message:msg_a", "ka3", "ha3"), 0);
    assert_int_equal(rl_delta_batch_add(batch, "msg_b", 2, "dos", 3, "inst", "message:msg_b", "kb2", "hb2"), 0);
    rl_store_deltas_append(store, batch, 1000, record, &out);
    rl_store_drain(store);
    assert_int_equal(out.result, 0);

    snprintf(path, sizeof(path), "%s/relay.db", folder);
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT message_id, seq, seq_last, delta, keys FROM message_deltas"
                                        " ORDER BY message_id, seq",
                                        -1, &stmt, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(stmt), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(stmt, 0), "msg_a");
    assert_int_equal(sqlite3_column_int64(stmt, 1), 1);
    assert_int_equal(sqlite3_column_int64(stmt, 2), 3);
    assert_string_equal((const char *)sqlite3_column_text(stmt, 3), "one two three");
    assert_string_equal((const char *)sqlite3_column_text(stmt, 4),
                        "[[\"ka1\",\"ha1\"],[\"ka2\",\"ha2\"],[\"ka3\",\"ha3\"]]");
    assert_int_equal(sqlite3_step(stmt), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(stmt, 0), "msg_b");
    assert_int_equal(sqlite3_column_int64(stmt, 2), 2);
    assert_string_equal((const char *)sqlite3_column_text(stmt, 3), "uno dos");
    assert_int_equal(sqlite3_step(stmt), SQLITE_DONE);
    sqlite3_finalize(stmt);
    sqlite3_close(db);
}

/* -- the worker ----------------------------------------------------------------------------- */

struct ordered {
    int seen[64];
    int count;
    pthread_t thread;
    int wrong_thread;
};

struct ordered_call {
    struct ordered *log;
    int index;
};

static void record_order(int result, json_t *value, void *arg)
{
    struct ordered_call *call = arg;

    json_decref(value);
    call->log->seen[call->log->count++] = result == 0 || result == RL_E_INSTALLATION_NOT_FOUND ? call->index : -1;
    if (!pthread_equal(pthread_self(), call->log->thread))
        call->log->wrong_thread = 1;
}

static void test_worker_runs_callbacks_in_order_on_the_flushing_thread(void **state)
{
    rl_store_t *store = *state;
    struct ordered log = {.thread = pthread_self()};
    struct ordered_call calls[64];
    int i;

    for (i = 0; i < 64; ++i) {
        calls[i] = (struct ordered_call){&log, i};
        /* reads and writes interleaved: a read sees every write submitted before it */
        if (i % 2 == 0)
            rl_store_user_ensure(store, "alice", i, record_order, &calls[i]);
        else
            rl_store_installation_get(store, "inst_none", record_order, &calls[i]);
    }
    rl_store_drain(store);
    assert_int_equal(log.count, 64);
    assert_false(log.wrong_thread);
    for (i = 0; i < 64; ++i)
        assert_int_equal(log.seen[i], i);
}

static void test_worker_wakes_the_loop_through_its_fd(void **state)
{
    rl_store_t *store = *state;
    struct outcome out = {0};
    struct pollfd wait = {.fd = rl_store_wake_fd(store), .events = POLLIN};

    assert_true(wait.fd >= 0);
    rl_store_user_ensure(store, "alice", 1, record, &out);
    assert_int_equal(poll(&wait, 1, 10000), 1);
    assert_int_equal(out.calls, 0); /* only the flush runs callbacks */
    rl_store_flush(store);
    assert_int_equal(out.calls, 1);
    assert_int_equal(out.result, 0);
    assert_false(rl_store_pending(store));
    /* nothing left: the fd was emptied by the flush */
    wait.revents = 0;
    assert_int_equal(poll(&wait, 1, 0), 0);
}

static void test_worker_copies_the_arguments(void **state)
{
    rl_store_t *store = *state;
    struct outcome out = {0};
    char code_hash[32], user[32];
    rl_pairing_new_t copy = pairing;

    rl_store_pairing_insert(store, &copy, record, &out);
    memset(&copy, 0, sizeof(copy));
    strcpy(code_hash, "code-hash-1");
    strcpy(user, "alice");
    rl_store_pairing_claim(store, code_hash, user, 3000, record, &out);
    /* the caller's buffers change at once; the queued operation must not see it */
    strcpy(code_hash, "wrong-code!");
    strcpy(user, "mallory");
    rl_store_drain(store);
    assert_int_equal(out.result, 0);
    assert_string_equal(json_string_value(json_object_get(out.value, "user_id")), "alice");
    json_decref(out.value);
}

static void test_worker_close_finishes_queued_work(void **state)
{
    rl_store_t *store = *state;
    struct outcome out = {0};

    rl_store_pairing_insert(store, &pairing, record, &out);
    rl_store_close(store);
    /* closing ran the callback after committing */
    assert_int_equal(out.calls, 1);
    assert_int_equal(out.result, 0);
    assert_int_equal(open_store(&store), 0);
    *state = store;
    rl_store_pairing_poll(store, "poll-hash-1", "tok", "live", 2000, record, &out);
    rl_store_drain(store);
    assert_int_equal(out.result, 0);
    assert_string_equal(json_string_value(json_object_get(out.value, "status")), "pending");
    json_decref(out.value);
}

#define BOTH(test)                                                                                                     \
    cmocka_unit_test_setup_teardown(test, setup_direct, teardown),                                                     \
        cmocka_unit_test_setup_teardown(test, setup_worker, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        BOTH(test_callbacks_are_deferred),
        BOTH(test_pairing_lifecycle),
        BOTH(test_pairing_expiry_and_collision),
        BOTH(test_failed_write_leaves_no_trace),
        BOTH(test_reopen_keeps_data),
        BOTH(test_a_delta_batch_is_one_row_per_message),
        cmocka_unit_test_setup_teardown(test_worker_runs_callbacks_in_order_on_the_flushing_thread, setup_worker,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_worker_wakes_the_loop_through_its_fd, setup_worker, teardown),
        cmocka_unit_test_setup_teardown(test_worker_copies_the_arguments, setup_worker, teardown),
        cmocka_unit_test_setup_teardown(test_worker_close_finishes_queued_work, setup_worker, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
