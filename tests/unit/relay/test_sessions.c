/*
 * The session rules (spec "Session", docs/api.md "Sessions") against a real
 * store: creation on the user's own live installation, the state machine
 * (rename, archive, unarchive, delete, restore inside the grace) and
 * cancelling a turn.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "relay/sessions/sessions.c"
#include "store_fixture.h"

#define GRACE 60000

static char session_state[16], session_title[64];
static int64_t session_deleted_at, update_id;
static int session_changed;

static void check_session(rl_store_op_t *base)
{
    json_t *view = ((rl_op_t *)base)->value;
    json_t *deleted_at = json_object_get(view, "deleted_at");

    snprintf(session_state, sizeof(session_state), "%s", json_string_value(json_object_get(view, "state")));
    snprintf(session_title, sizeof(session_title), "%s",
             json_is_string(json_object_get(view, "title")) ? json_string_value(json_object_get(view, "title"))
                                                            : "(null)");
    session_deleted_at = json_is_integer(deleted_at) ? json_integer_value(deleted_at) : RL_NO_TIME;
    update_id = ((rl_op_t *)base)->update_id;
}

static void check_change(rl_store_op_t *base)
{
    session_changed = ((struct session_change *)base)->changed;
    if (base->result == 0)
        check_session(base);
}

static int create(rl_store_t *store, const char *user_id, const char *installation_id, const char *session_id)
{
    struct session_create *op = rl_op_new(&session_create_type, sizeof(*op));

    op->user_id = rl_op_str(op, user_id);
    op->installation_id = rl_op_str(op, installation_id);
    op->session_id = rl_op_str(op, session_id);
    op->title = rl_op_str(op, "hello");
    op->now = 2000;
    op->delete_grace = GRACE;
    update_id = 0;
    return run_op(store, op, check_session);
}

static int change(rl_store_t *store, const char *user_id, rl_session_op_t what, const char *title, int64_t now)
{
    struct session_change *op = rl_op_new(&session_change_type, sizeof(*op));

    op->user_id = rl_op_str(op, user_id);
    op->session_id = rl_op_str(op, FIX_SESSION);
    op->change = what;
    op->title = rl_op_str(op, title);
    /* A rename reads its title from the body, as the route passes it (the session's field: title or title_ct). */
    if (what == RL_SESSION_RENAME) {
        op->body = json_pack("{s:s?}", "title", title);
        op->set_title = 1;
    }
    op->now = now;
    op->delete_grace = GRACE;
    session_changed = -1;
    return run_op(store, op, check_change);
}

/* spec: a session is created on one of the user's installations and reaches the bridge as session.started. */
static void test_create_on_own_live_installation(void **state)
{
    rl_store_t *store = *state;

    assert_int_equal(seed_world(store), 0);
    assert_int_equal(create(store, FIX_USER, FIX_INSTALLATION, "ses_bbbbbbbbbbbbbbbbbbbb"), 0);
    assert_string_equal(session_state, "active");
    assert_true(update_id > 0);
    assert_string_equal(queued_updates(store, FIX_INSTALLATION, 0, 0), "session.started");
}

/* spec: another user's installation looks like none at all (404 installation_not_found). */
static void test_create_on_someone_elses_installation(void **state)
{
    rl_store_t *store = *state;

    assert_int_equal(seed_world(store), 0);
    assert_int_equal(create(store, "mallory", FIX_INSTALLATION, "ses_bbbbbbbbbbbbbbbbbbbb"),
                     RL_E_INSTALLATION_NOT_FOUND);
    assert_int_equal(create(store, FIX_USER, "inst_zzzzzzzzzzzzzzzz", "ses_bbbbbbbbbbbbbbbbbbbb"),
                     RL_E_INSTALLATION_NOT_FOUND);
    /* Nothing was queued for the bridge by the refused creations. */
    assert_string_equal(queued_updates(store, FIX_INSTALLATION, 0, 0), "");
}

static int revoke_run(rl_txn_t *txn, void *arg)
{
    rl_installation_row_t row;
    int result = RL_TXN(txn, installation_get, FIX_INSTALLATION, &row);

    (void)arg;
    if (result != 0)
        return result;
    row.state = "revoked";
    row.revoked_at = 1500;
    return RL_TXN(txn, installation_update, &row);
}

/* spec: a revoked installation takes no new sessions (403 installation_revoked). */
static void test_create_on_revoked_installation(void **state)
{
    rl_store_t *store = *state;

    assert_int_equal(seed_world(store), 0);
    assert_int_equal(in_txn(store, revoke_run, NULL), 0);
    assert_int_equal(create(store, FIX_USER, FIX_INSTALLATION, "ses_bbbbbbbbbbbbbbbbbbbb"), RL_E_INSTALLATION_REVOKED);
}

/* spec: active <-> archived; a transition to the state the session is in changes nothing (and emits no event). */
static void test_archive_unarchive(void **state)
{
    rl_store_t *store = *state;

    assert_int_equal(seed_world(store), 0);
    assert_int_equal(change(store, FIX_USER, RL_SESSION_ARCHIVE, NULL, 3000), 0);
    assert_int_equal(session_changed, 1);
    assert_string_equal(session_state, "archived");
    assert_int_equal(change(store, FIX_USER, RL_SESSION_ARCHIVE, NULL, 3001), 0);
    assert_int_equal(session_changed, 0);
    assert_string_equal(session_state, "archived");
    assert_int_equal(change(store, FIX_USER, RL_SESSION_UNARCHIVE, NULL, 3002), 0);
    assert_int_equal(session_changed, 1);
    assert_string_equal(session_state, "active");
    assert_int_equal(change(store, FIX_USER, RL_SESSION_UNARCHIVE, NULL, 3003), 0);
    assert_int_equal(session_changed, 0);
}

/* spec: rename sets the title (null clears it); another user's session is 404 session_not_found. */
static void test_rename_and_ownership(void **state)
{
    rl_store_t *store = *state;

    assert_int_equal(seed_world(store), 0);
    assert_int_equal(change(store, FIX_USER, RL_SESSION_RENAME, "new name", 3000), 0);
    assert_string_equal(session_title, "new name");
    assert_int_equal(change(store, FIX_USER, RL_SESSION_RENAME, NULL, 3001), 0);
    assert_string_equal(session_title, "(null)");
    assert_int_equal(change(store, "mallory", RL_SESSION_RENAME, "mine", 3002), RL_E_SESSION_NOT_FOUND);
    assert_int_equal(change(store, "mallory", RL_SESSION_DELETE, NULL, 3003), RL_E_SESSION_NOT_FOUND);
}

/*
 * brief: delete is soft: a deleted session is found by no route but
 * restore, which works inside the grace; after it the session is as good as
 * purged (404).
 */
static void test_delete_and_restore_within_grace(void **state)
{
    rl_store_t *store = *state;

    assert_int_equal(seed_world(store), 0);
    assert_int_equal(change(store, FIX_USER, RL_SESSION_DELETE, NULL, 3000), 0);
    assert_int_equal(session_deleted_at, 3000);
    assert_int_equal(change(store, FIX_USER, RL_SESSION_ARCHIVE, NULL, 3001), RL_E_SESSION_NOT_FOUND);
    assert_int_equal(change(store, FIX_USER, RL_SESSION_RENAME, "x", 3001), RL_E_SESSION_NOT_FOUND);
    assert_int_equal(change(store, FIX_USER, RL_SESSION_DELETE, NULL, 3001), RL_E_SESSION_NOT_FOUND);
    assert_int_equal(change(store, FIX_USER, RL_SESSION_RESTORE, NULL, 3000 + GRACE - 1), 0);
    assert_int_equal(session_changed, 1);
    assert_int_equal(session_deleted_at, RL_NO_TIME);
    /* Restoring a session that is not deleted changes nothing. */
    assert_int_equal(change(store, FIX_USER, RL_SESSION_RESTORE, NULL, 3000 + GRACE), 0);
    assert_int_equal(session_changed, 0);
}

static void test_restore_after_grace(void **state)
{
    rl_store_t *store = *state;

    assert_int_equal(seed_world(store), 0);
    assert_int_equal(change(store, FIX_USER, RL_SESSION_DELETE, NULL, 3000), 0);
    assert_int_equal(change(store, FIX_USER, RL_SESSION_RESTORE, NULL, 3000 + GRACE), RL_E_SESSION_NOT_FOUND);
}

/* ---- cancel ---- */

struct cancel_result {
    int result;
    size_t expired;
};
static struct cancel_result cancelled;

static void check_cancel(rl_store_op_t *base)
{
    cancelled.result = base->result;
    cancelled.expired = json_array_size(((rl_op_t *)base)->value);
}

static int cancel_turn(rl_store_t *store, const char *interaction_id, int64_t now)
{
    struct session_cancel *op = rl_op_new(&session_cancel_type, sizeof(*op));

    op->user_id = rl_op_str(op, FIX_USER);
    op->session_id = rl_op_str(op, FIX_SESSION);
    op->interaction_id = rl_op_str(op, interaction_id);
    op->now = now;
    cancelled = (struct cancel_result){1, 0};
    run_op(store, op, check_cancel);
    return cancelled.result;
}

static int seed_pending_approvals_run(rl_txn_t *txn, void *arg)
{
    static const char *const turns[] = {"int_one", "int_two"};
    size_t i;
    int result = 0;

    (void)arg;
    for (i = 0; i < 2 && result == 0; ++i) {
        rl_approval_row_t approval = {.id = turns[i] + 4,
                                      .installation_id = FIX_INSTALLATION,
                                      .user_id = FIX_USER,
                                      .session_id = FIX_SESSION,
                                      .interaction_id = turns[i],
                                      .request = "{\"action\":\"shell\"}",
                                      .state = "pending",
                                      .created_at = 2000,
                                      .expires_at = 100000,
                                      .resolved_at = RL_NO_TIME};
        if ((result = seed_interaction(txn, turns[i], FIX_SESSION, 2000)) == 0)
            result = RL_TXN(txn, approval_insert, &approval);
    }
    return result;
}

/*
 * spec: cancel reaches the bridge as session.cancelled; ours: the cancelled
 * turn's pending approvals expire at once (approval.expired), the other
 * turn's stay pending.
 */
static void test_cancel_expires_the_turns_approvals(void **state)
{
    rl_store_t *store = *state;

    assert_int_equal(seed_world(store), 0);
    assert_int_equal(in_txn(store, seed_pending_approvals_run, NULL), 0);
    assert_int_equal(cancel_turn(store, "int_one", 3000), 0);
    assert_int_equal(cancelled.expired, 1);
    assert_string_equal(queued_updates(store, FIX_INSTALLATION, 0, 0), "session.cancelled,approval.expired");
    /* Without an interaction, the whole session's turns are cancelled: the other approval goes too. */
    assert_int_equal(cancel_turn(store, NULL, 3001), 0);
    assert_int_equal(cancelled.expired, 1);
}

/* spec: an interaction of another session is 404 interaction_not_found; a deleted session 404. */
static void test_cancel_targets(void **state)
{
    rl_store_t *store = *state;

    assert_int_equal(seed_world(store), 0);
    assert_int_equal(cancel_turn(store, "int_missing", 3000), RL_E_INTERACTION_NOT_FOUND);
    assert_int_equal(change(store, FIX_USER, RL_SESSION_DELETE, NULL, 3000), 0);
    assert_int_equal(cancel_turn(store, NULL, 3001), RL_E_SESSION_NOT_FOUND);
    /* Only the delete told the bridge (issue 36: session.closed); the refused cancels queued nothing. */
    assert_string_equal(queued_updates(store, FIX_INSTALLATION, 0, 0), "session.closed");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        INLINE(test_create_on_own_live_installation),
        INLINE(test_create_on_someone_elses_installation),
        INLINE(test_create_on_revoked_installation),
        INLINE(test_archive_unarchive),
        INLINE(test_rename_and_ownership),
        INLINE(test_delete_and_restore_within_grace),
        INLINE(test_restore_after_grace),
        INLINE(test_cancel_expires_the_turns_approvals),
        INLINE(test_cancel_targets),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
