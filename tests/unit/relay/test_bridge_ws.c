/*
 * The bridge socket's side of the update queue (spec "Bridge updates"):
 * which acks count, and the reads and acks it runs in the store: a
 * reconnect reads what is unacknowledged from the replay window, in order.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "relay/installations/bridge_ws.c"
#include "store_fixture.h"

#define WINDOW (5 * 60 * 1000)

/* spec: ack carries up_to_update_id as a string; it can only cover what this socket sent. */
static void test_ack_covers_only_what_was_sent(void **state)
{
    int64_t up_to = -1;

    (void)state;
    assert_int_equal(ack_up_to("7", 7, &up_to), 0);
    assert_int_equal(up_to, 7);
    assert_int_equal(ack_up_to("3", 7, &up_to), 0);
    assert_int_equal(up_to, 3);
    up_to = -1;
    assert_int_equal(ack_up_to("8", 7, &up_to), -1);
    assert_int_equal(ack_up_to("0", 7, &up_to), -1);
    assert_int_equal(ack_up_to("-1", 7, &up_to), -1);
    assert_int_equal(ack_up_to("", 7, &up_to), -1);
    assert_int_equal(ack_up_to("7x", 7, &up_to), -1);
    assert_int_equal(ack_up_to(NULL, 7, &up_to), -1);
    assert_int_equal(ack_up_to("99999999999999999999", 7, &up_to), -1);
    /* Nothing sent yet: nothing to ack. */
    assert_int_equal(ack_up_to("1", 0, &up_to), -1);
    assert_int_equal(up_to, -1);
}

struct append_one {
    rl_update_t type;
    int64_t now, id;
};

static int append_run(rl_txn_t *txn, void *arg)
{
    struct append_one *a = arg;

    return rl_update_append(txn, FIX_INSTALLATION, a->type, FIX_SESSION, NULL, json_object(), a->now, &a->id);
}

static int64_t append(rl_store_t *store, rl_update_t type, int64_t now)
{
    struct append_one a = {type, now, 0};

    assert_int_equal(in_txn(store, append_run, &a), 0);
    return a.id;
}

static char read_types[256];

static void check_read(rl_store_op_t *base)
{
    struct updates_read *op = (void *)base;
    size_t i, at = 0;

    read_types[0] = '\0';
    for (i = 0; i < op->count; ++i)
        at += (size_t)snprintf(read_types + at, sizeof(read_types) - at, "%s%s", i > 0 ? "," : "", op->rows[i].type);
}

/* The read fetch() runs: after the last id sent, none older than the window, at most limit. */
static const char *read_queue(rl_store_t *store, int64_t after_id, int64_t now, int limit)
{
    struct updates_read *op = rl_op_new(&updates_read_type, sizeof(*op));

    op->installation_id = rl_op_str(op, FIX_INSTALLATION);
    op->after_id = after_id;
    op->since = now - WINDOW;
    op->limit = limit;
    assert_int_equal(run_op(store, op, check_read), 0);
    return read_types;
}

static int ack(rl_store_t *store, int64_t up_to)
{
    struct updates_ack *op = rl_op_new(&updates_ack_type, sizeof(*op));

    op->installation_id = rl_op_str(op, FIX_INSTALLATION);
    op->up_to = up_to;
    return run_op(store, op, NULL);
}

/*
 * spec: on reconnect (a new socket reads from 0), the server replays the
 * unacknowledged updates of the last 5 minutes, in order; what was acked
 * is dropped; gaps older than the window are not replayed.
 */
static void test_reconnect_replays_unacked_in_window(void **state)
{
    rl_store_t *store = *state;
    int64_t now = 20 * 60 * 1000, first;

    assert_int_equal(seed_world(store), 0);
    append(store, RL_UP_SESSION_STARTED, now - WINDOW - 1000);
    first = append(store, RL_UP_SESSION_MESSAGE, now - 60000);
    append(store, RL_UP_APPROVAL_RESOLVED, now - 30000);
    append(store, RL_UP_SESSION_CANCELLED, now - 10);
    assert_string_equal(read_queue(store, 0, now, 100), "session.message,approval.resolved,session.cancelled");
    /* Batches: a limited read gives the oldest first; the next read goes on after the last id sent. */
    assert_string_equal(read_queue(store, 0, now, 1), "session.message");
    assert_string_equal(read_queue(store, first, now, 100), "approval.resolved,session.cancelled");
    assert_int_equal(ack(store, first + 1), 0);
    assert_string_equal(read_queue(store, 0, now, 100), "session.cancelled");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ack_covers_only_what_was_sent),
        INLINE(test_reconnect_replays_unacked_in_window),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
