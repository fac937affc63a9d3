/*
 * Where a bridge write lands (spec "Errors", "Limits"): the installation's
 * own session, not deleted (410 session_deleted), and an interaction of
 * that session inside its follow-up window (410 interaction_expired 30
 * minutes after the update), against a real store.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "relay/core/target.c"
#include "store_fixture.h"

#define FOLLOWUP (30 * 60 * 1000)
#define T0       10000
#define INST_B   "inst_bbbbbbbbbbbbbbbb"

static int seed_run(rl_txn_t *txn, void *arg)
{
    int result = seed_world_run(txn, arg);

    if (result == 0)
        result = seed_installation(txn, INST_B, FIX_USER);
    if (result == 0)
        result = seed_session(txn, "ses_bbbbbbbbbbbbbbbbbbbb", FIX_USER, INST_B);
    if (result == 0)
        result = seed_interaction(txn, "int_one", FIX_SESSION, T0);
    if (result == 0)
        result = seed_interaction(txn, "int_two", "ses_bbbbbbbbbbbbbbbbbbbb", T0);
    return result;
}

static int check_run(rl_txn_t *txn, void *arg)
{
    rl_session_row_t session;

    return rl_target_check(txn, arg, &session);
}

static int check(rl_store_t *store, const char *installation_id, const char *session_id, const char *interaction_id,
                 int64_t now)
{
    rl_bridge_target_t target = {installation_id, session_id, interaction_id, now, FOLLOWUP, 0};

    return in_txn(store, check_run, &target);
}

/* spec: the follow-up window closes 30 minutes after the update: a write after it is 410 interaction_expired. */
static void test_followup_window(void **state)
{
    rl_store_t *store = *state;

    assert_int_equal(in_txn(store, seed_run, NULL), 0);
    assert_int_equal(check(store, FIX_INSTALLATION, FIX_SESSION, "int_one", T0), 0);
    assert_int_equal(check(store, FIX_INSTALLATION, FIX_SESSION, "int_one", T0 + FOLLOWUP), 0);
    assert_int_equal(check(store, FIX_INSTALLATION, FIX_SESSION, "int_one", T0 + FOLLOWUP + 1),
                     RL_E_INTERACTION_EXPIRED);
    /* A write to the session without an interaction has no window. */
    assert_int_equal(check(store, FIX_INSTALLATION, FIX_SESSION, NULL, T0 + 10 * FOLLOWUP), 0);
}

/*
 * spec: another installation's session looks like none (404
 * session_not_found), an interaction of another session is 404
 * interaction_not_found.
 */
static void test_ownership(void **state)
{
    rl_store_t *store = *state;

    assert_int_equal(in_txn(store, seed_run, NULL), 0);
    assert_int_equal(check(store, INST_B, FIX_SESSION, "int_one", T0), RL_E_SESSION_NOT_FOUND);
    assert_int_equal(check(store, FIX_INSTALLATION, "ses_nowhere", NULL, T0), RL_E_SESSION_NOT_FOUND);
    assert_int_equal(check(store, FIX_INSTALLATION, FIX_SESSION, "int_two", T0), RL_E_INTERACTION_NOT_FOUND);
    assert_int_equal(check(store, FIX_INSTALLATION, FIX_SESSION, "int_nowhere", T0), RL_E_INTERACTION_NOT_FOUND);
}

static int delete_run(rl_txn_t *txn, void *arg)
{
    rl_session_row_t session;
    int result = RL_TXN(txn, session_get, FIX_SESSION, &session);

    (void)arg;
    session.deleted_at = T0 + 1;
    return result != 0 ? result : RL_TXN(txn, session_update, &session);
}

static int revoke_run(rl_txn_t *txn, void *arg)
{
    rl_installation_row_t row;
    int result = RL_TXN(txn, installation_get, INST_B, &row);

    (void)arg;
    row.state = "revoked";
    row.revoked_at = T0;
    return result != 0 ? result : RL_TXN(txn, installation_update, &row);
}

struct turn_check {
    rl_bridge_target_t target;
    int result;
};

static int turn_run(rl_txn_t *txn, void *arg)
{
    struct turn_check *c = arg;
    rl_session_row_t session;

    c->result = rl_target_check(txn, &c->target, &session);
    /* The resolved id lives in the transaction's arena: compare it here. */
    if (c->target.interaction_id != NULL && strcmp(c->target.interaction_id, "int_" FIX_SESSION) != 0)
        c->result = -1000;
    return 0;
}

static int turn(rl_store_t *store, int turn_bound, int64_t now, int *own, int *resolved)
{
    struct turn_check c = {{FIX_INSTALLATION, FIX_SESSION, NULL, now, FOLLOWUP, 0, turn_bound, 0}, 0};

    assert_int_equal(in_txn(store, turn_run, &c), 0);
    *own = c.target.own_session;
    *resolved = c.target.interaction_id != NULL;
    return c.result;
}

static int bridge_turn_run(rl_txn_t *txn, void *arg)
{
    (void)arg;
    return seed_interaction(txn, "int_" FIX_SESSION, FIX_SESSION, T0);
}

/*
 * ours: without an interaction, a turn-bound write (task, approval) is 400
 * in a session the user started; in a session the bridge created it is the
 * bridge's turn's, inside that turn's window; a message past the window
 * stands outside any turn.
 */
static void test_bridge_turn(void **state)
{
    rl_store_t *store = *state;
    int own, resolved;

    assert_int_equal(in_txn(store, seed_run, NULL), 0);
    assert_int_equal(turn(store, 1, T0, &own, &resolved), RL_E_INVALID_REQUEST);
    assert_int_equal(own, 0);
    assert_int_equal(turn(store, 0, T0, &own, &resolved), 0);
    assert_int_equal(own + resolved, 0);
    assert_int_equal(in_txn(store, bridge_turn_run, NULL), 0);
    assert_int_equal(turn(store, 1, T0 + FOLLOWUP, &own, &resolved), 0);
    assert_int_equal(own + resolved, 2);
    assert_int_equal(turn(store, 0, T0, &own, &resolved), 0);
    assert_int_equal(own + resolved, 2);
    assert_int_equal(turn(store, 1, T0 + FOLLOWUP + 1, &own, &resolved), RL_E_INTERACTION_EXPIRED);
    assert_int_equal(turn(store, 0, T0 + FOLLOWUP + 1, &own, &resolved), 0);
    assert_int_equal(own, 1);
    assert_int_equal(resolved, 0);
}

static int installation_run(rl_txn_t *txn, void *arg)
{
    return rl_target_installation_check(txn, arg);
}

/*
 * spec: writing to a session deleted mid-stream is 410 session_deleted (the
 * window does not matter); a revoked installation's writes are 410
 * installation_gone, an unknown one's token invalid.
 */
static void test_gone(void **state)
{
    rl_store_t *store = *state;

    assert_int_equal(in_txn(store, seed_run, NULL), 0);
    assert_int_equal(in_txn(store, delete_run, NULL), 0);
    assert_int_equal(check(store, FIX_INSTALLATION, FIX_SESSION, "int_one", T0 + 2), RL_E_SESSION_DELETED);
    assert_int_equal(check(store, FIX_INSTALLATION, FIX_SESSION, NULL, T0 + 2), RL_E_SESSION_DELETED);
    assert_int_equal(in_txn(store, installation_run, FIX_INSTALLATION), 0);
    assert_int_equal(in_txn(store, revoke_run, NULL), 0);
    assert_int_equal(in_txn(store, installation_run, INST_B), RL_E_INSTALLATION_GONE);
    assert_int_equal(in_txn(store, installation_run, "inst_zzzzzzzzzzzzzzzz"), RL_E_INVALID_TOKEN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        INLINE(test_followup_window),
        INLINE(test_ownership),
        INLINE(test_gone),
        INLINE(test_bridge_turn),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
