/*
 * The bridge update queue (spec "Bridge updates") against a real store:
 * ids count up per installation; the bridge's ack drops what it covers;
 * a reconnect replays what is unacknowledged from the replay window, in
 * order, and nothing older; and what each update carries.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "relay/core/updates.c"
#include "store_fixture.h"

#define INST_B "inst_bbbbbbbbbbbbbbbb"
#define WINDOW (5 * 60 * 1000)

struct append {
    const char *installation_id;
    rl_update_t type;
    int64_t now, update_id;
};

static int append_run(rl_txn_t *txn, void *arg)
{
    struct append *a = arg;

    return rl_update_append(txn, a->installation_id, a->type, FIX_SESSION, NULL, json_object(), a->now, &a->update_id);
}

/* Appends one update; its id, or the error (negative). */
static int64_t append(rl_store_t *store, const char *installation_id, rl_update_t type, int64_t now)
{
    struct append a = {installation_id, type, now, 0};
    int result = in_txn(store, append_run, &a);

    return result != 0 ? result : a.update_id;
}

struct ack {
    const char *installation_id;
    int64_t up_to;
};

static int ack_run(rl_txn_t *txn, void *arg)
{
    struct ack *a = arg;

    return RL_TXN(txn, updates_ack, a->installation_id, a->up_to);
}

static int ack(rl_store_t *store, const char *installation_id, int64_t up_to)
{
    struct ack a = {installation_id, up_to};

    return in_txn(store, ack_run, &a);
}

static int seed_two_run(rl_txn_t *txn, void *arg)
{
    int result = seed_world_run(txn, arg);

    return result != 0 ? result : seed_installation(txn, INST_B, FIX_USER);
}

/* spec: update ids count up per installation; one installation's queue is not another's. */
static void test_ids_count_up_per_installation(void **state)
{
    rl_store_t *store = *state;
    int64_t a1, a2, b1;

    assert_int_equal(in_txn(store, seed_two_run, NULL), 0);
    a1 = append(store, FIX_INSTALLATION, RL_UP_SESSION_STARTED, 1000);
    b1 = append(store, INST_B, RL_UP_SESSION_STARTED, 1001);
    a2 = append(store, FIX_INSTALLATION, RL_UP_SESSION_MESSAGE, 1002);
    assert_true(a1 > 0 && b1 > 0);
    assert_true(a2 > a1);
    assert_string_equal(queued_updates(store, FIX_INSTALLATION, 0, 0), "session.started,session.message");
    assert_string_equal(queued_updates(store, INST_B, 0, 0), "session.started");
    /* An installation that is not there has no queue. */
    assert_int_equal(append(store, "inst_zzzzzzzzzzzzzzzz", RL_UP_SESSION_STARTED, 1003), RL_E_INSTALLATION_NOT_FOUND);
}

/*
 * spec: the bridge acks up_to_update_id after processing, which lets the
 * server drop updates up to that id: a reconnect replays only what follows,
 * in order. Ids are never given again once acknowledged.
 */
static void test_ack_drops_and_replay_follows(void **state)
{
    rl_store_t *store = *state;
    int64_t ids[4], later;
    size_t i;

    assert_int_equal(seed_world(store), 0);
    for (i = 0; i < 4; ++i)
        ids[i] = append(store, FIX_INSTALLATION, i % 2 == 0 ? RL_UP_SESSION_MESSAGE : RL_UP_SESSION_CANCELLED,
                        1000 + (int64_t)i);
    assert_int_equal(ack(store, FIX_INSTALLATION, ids[1]), 0);
    assert_string_equal(queued_updates(store, FIX_INSTALLATION, 0, 0), "session.message,session.cancelled");
    /* The socket reads after the last id it sent: what it sent is not sent again. */
    assert_string_equal(queued_updates(store, FIX_INSTALLATION, ids[2], 0), "session.cancelled");
    assert_int_equal(ack(store, FIX_INSTALLATION, ids[3]), 0);
    assert_string_equal(queued_updates(store, FIX_INSTALLATION, 0, 0), "");
    later = append(store, FIX_INSTALLATION, RL_UP_SESSION_STARTED, 2000);
    assert_true(later > ids[3]);
    assert_string_equal(queued_updates(store, FIX_INSTALLATION, 0, 0), "session.started");
}

/* spec: on reconnect, unacknowledged updates from the last 5 minutes are replayed; older gaps are not. */
static void test_replay_window(void **state)
{
    rl_store_t *store = *state;
    int64_t now = 10 * 60 * 1000;

    assert_int_equal(seed_world(store), 0);
    append(store, FIX_INSTALLATION, RL_UP_SESSION_STARTED, now - WINDOW - 1);
    append(store, FIX_INSTALLATION, RL_UP_SESSION_MESSAGE, now - WINDOW);
    append(store, FIX_INSTALLATION, RL_UP_SESSION_CANCELLED, now - 1);
    assert_string_equal(queued_updates(store, FIX_INSTALLATION, 0, now - WINDOW), "session.message,session.cancelled");
}

/*
 * spec: session.message carries session (id, title) and message (text,
 * attachments); approval.resolved carries approval_id, decision, and scope
 * and scope_value only when there are.
 */
static void test_payloads(void **state)
{
    rl_session_row_t session = {FIX_SESSION, FIX_USER, FIX_INSTALLATION, "T", "active", 1, 1, RL_NO_TIME};
    json_t *message =
        json_pack("{s:s, s:s, s:[], s:n}", "message_id", "msg_1", "text", "hi", "attachments", "reply_to");
    json_t *payload = rl_update_session_message(&session, message, "extended");

    (void)state;
    assert_string_equal(json_string_value(json_object_get(json_object_get(payload, "session"), "id")), FIX_SESSION);
    assert_string_equal(json_string_value(json_object_get(json_object_get(payload, "session"), "title")), "T");
    assert_string_equal(json_string_value(json_object_get(json_object_get(payload, "message"), "text")), "hi");
    assert_true(json_is_array(json_object_get(json_object_get(payload, "message"), "attachments")));
    assert_string_equal(json_string_value(json_object_get(json_object_get(payload, "message"), "thought_level")),
                        "extended");
    json_decref(payload);
    json_decref(message);
    payload = rl_update_approval_resolved("apr_1", "deny", NULL, NULL);
    assert_string_equal(json_string_value(json_object_get(payload, "decision")), "deny");
    assert_null(json_object_get(payload, "scope"));
    assert_null(json_object_get(payload, "scope_value"));
    json_decref(payload);
    payload = rl_update_approval_resolved("apr_1", "approve_always", "tool", "ls");
    assert_string_equal(json_string_value(json_object_get(payload, "scope_value")), "ls");
    json_decref(payload);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        INLINE(test_ids_count_up_per_installation),
        INLINE(test_ack_drops_and_replay_follows),
        INLINE(test_replay_window),
        cmocka_unit_test(test_payloads),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
