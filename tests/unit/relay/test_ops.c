/*
 * Operations of the relay against a real store: a failing write leaves no
 * trace, and a batch of streamed deltas is one row per message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "relay/turn/deltas.h"
#include "relay/installations/manifest.c"
#include "store_fixture.h"

static int get_run(rl_txn_t *txn, rl_store_op_t *base)
{
    rl_installation_row_t row;

    return RL_TXN(txn, installation_get, "inst_nobodyhere0000", &row);
}

static const rl_store_op_type_t get_type = RL_OP_TYPE(installation_get, 0, get_run);

static void test_failed_write_leaves_no_trace(void **state)
{
    rl_store_t *store = *state;
    struct manifest_set *op = rl_op_new(&manifest_set_type, sizeof(*op));

    op->installation_id = "inst_nobodyhere0000";
    op->body = json_object();
    assert_int_equal(run_op(store, op, NULL), RL_E_INSTALLATION_NOT_FOUND);
    assert_int_equal(run_op(store, rl_op_new(&get_type, sizeof(rl_op_t)), NULL), RL_E_NOT_FOUND);
}

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
}

static const rl_store_op_type_t append_type = {"deltas_append", 1, append_run, append_dispose};

static void test_a_delta_batch_is_one_row_per_message(void **state)
{
    rl_store_t *store = *state;
    struct append *op = rl_op_new(&append_type, sizeof(*op));
    rl_delta_batch_t *batch = rl_delta_batch_new();
    char path[96];
    sqlite3 *db;
    sqlite3_stmt *stmt;

    /* two messages' deltas interleaved, as they arrive */
    assert_int_equal(rl_delta_batch_add(batch, "msg_a", 1, "one ", 4, "ka1", "ha1"), 0);
    assert_int_equal(rl_delta_batch_add(batch, "msg_b", 1, "uno ", 4, "kb1", "hb1"), 0);
    assert_int_equal(rl_delta_batch_add(batch, "msg_a", 2, "two ", 4, "ka2", "ha2"), 0);
    assert_int_equal(rl_delta_batch_add(batch, "msg_a", 3, "three", 5, "ka3", "ha3"), 0);
    assert_int_equal(rl_delta_batch_add(batch, "msg_b", 2, "dos", 3, "kb2", "hb2"), 0);
    op->batch = batch;
    assert_int_equal(run_op(store, op, NULL), 0);

    snprintf(path, sizeof(path), "%s/relay.db", fixture_folder);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        BOTH(test_failed_write_leaves_no_trace),
        BOTH(test_a_delta_batch_is_one_row_per_message),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
