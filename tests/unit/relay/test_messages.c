/*
 * The user's messages (spec "Session", docs/api.md "Messages") against a
 * real store: a send to a live session stores a final user message in a new
 * interaction and queues session.message for the bridge; a send with an
 * idempotency key is answered, not sent twice; reply_to names a message of
 * the session; the history pages newest first.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "relay/turn/messages.c"
#include "store_fixture.h"

#define T0 10000

static int replayed;
static char sent_message[32];

static void check_send(rl_store_op_t *base)
{
    struct send *op = (void *)base;

    replayed = op->replayed != NULL;
    snprintf(sent_message, sizeof(sent_message), "%s",
             op->replayed != NULL ? json_string_value(json_object_get(op->replayed, "message_id")) : op->message_id);
}

/* As store_message builds it: keys are the user's, per session ("me.send:" + session). */
static int send_message(rl_store_t *store, const char *session_id, const char *message_id, const char *text,
                        const char *key, const char *reply_to, int64_t now)
{
    struct send *op = rl_op_new(&send_type, sizeof(*op));
    json_t *body = json_pack("{s:s, s:s?, s:s?}", "text", text, "idempotency_key", key, "reply_to", reply_to);
    char scope[96], hash[RL_BODY_HASH_HEX + 1], interaction_id[32];
    rl_idempotency_t idem = {0};

    if (key != NULL) {
        assert_int_equal(rl_idempotency_body_hash(body, hash), 0);
        snprintf(scope, sizeof(scope), "me.send:%s", session_id);
        idem = (rl_idempotency_t){FIX_USER, scope, key, hash, now - 86400000};
    }
    json_decref(body);
    rl_idempotency_copy(&op->op.base.arena, &op->idem, &idem);
    snprintf(interaction_id, sizeof(interaction_id), "int_%s", message_id + 4);
    op->user_id = rl_op_str(op, FIX_USER);
    op->session_id = rl_op_str(op, session_id);
    op->interaction_id = rl_op_str(op, interaction_id);
    op->message_id = rl_op_str(op, message_id);
    op->text = rl_op_str(op, text);
    op->reply_to = rl_op_str(op, reply_to);
    op->thought_level = "default";
    op->refs = json_array();
    op->now = now;
    replayed = -1;
    return run_op(store, op, check_send);
}

/* spec: the user's message is stored final in a new interaction and reaches the bridge as session.message. */
static void test_send_queues_for_the_bridge(void **state)
{
    rl_store_t *store = *state;

    assert_int_equal(seed_world(store), 0);
    assert_int_equal(send_message(store, FIX_SESSION, "msg_1", "hello", NULL, NULL, T0), 0);
    assert_int_equal(replayed, 0);
    assert_string_equal(queued_updates(store, FIX_INSTALLATION, 0, 0), "session.message");
    /* Without a key, the same text sent again is another message. */
    assert_int_equal(send_message(store, FIX_SESSION, "msg_2", "hello", NULL, NULL, T0 + 1), 0);
    assert_int_equal(replayed, 0);
    assert_string_equal(queued_updates(store, FIX_INSTALLATION, 0, 0), "session.message,session.message");
}

/*
 * ours (docs/api.md): a send with an idempotency_key sent again with the
 * same body is answered with the first send's ids and not sent twice;
 * with another body it is 409 idempotency_conflict. Keys are per session.
 */
static void test_send_idempotency(void **state)
{
    rl_store_t *store = *state;

    assert_int_equal(in_txn(store, seed_world_run, NULL), 0);
    assert_int_equal(send_message(store, FIX_SESSION, "msg_1", "hello", "k1", NULL, T0), 0);
    assert_int_equal(send_message(store, FIX_SESSION, "msg_2", "hello", "k1", NULL, T0 + 1), 0);
    assert_int_equal(replayed, 1);
    assert_string_equal(sent_message, "msg_1");
    assert_int_equal(send_message(store, FIX_SESSION, "msg_3", "bye", "k1", NULL, T0 + 2), RL_E_IDEMPOTENCY_CONFLICT);
    assert_string_equal(queued_updates(store, FIX_INSTALLATION, 0, 0), "session.message");
}

static int second_session_run(rl_txn_t *txn, void *arg)
{
    (void)arg;
    return seed_session(txn, "ses_bbbbbbbbbbbbbbbbbbbb", FIX_USER, FIX_INSTALLATION);
}

/* docs/api.md: reply_to names a message of the same session; another's is 400 (RL_E_MESSAGE_NOT_FOUND here). */
static void test_reply_to_in_session(void **state)
{
    rl_store_t *store = *state;

    assert_int_equal(seed_world(store), 0);
    assert_int_equal(in_txn(store, second_session_run, NULL), 0);
    assert_int_equal(send_message(store, FIX_SESSION, "msg_1", "hello", NULL, NULL, T0), 0);
    assert_int_equal(send_message(store, FIX_SESSION, "msg_2", "re", NULL, "msg_1", T0 + 1), 0);
    assert_int_equal(send_message(store, "ses_bbbbbbbbbbbbbbbbbbbb", "msg_3", "re", NULL, "msg_1", T0 + 2),
                     RL_E_MESSAGE_NOT_FOUND);
    assert_int_equal(send_message(store, FIX_SESSION, "msg_4", "re", NULL, "msg_nowhere", T0 + 3),
                     RL_E_MESSAGE_NOT_FOUND);
    /* A refused send queued nothing. */
    assert_string_equal(queued_updates(store, FIX_INSTALLATION, 0, 0), "session.message,session.message");
}

static int delete_run(rl_txn_t *txn, void *arg)
{
    rl_session_row_t session;
    int result = RL_TXN(txn, session_get, FIX_SESSION, &session);

    (void)arg;
    session.deleted_at = T0;
    return result != 0 ? result : RL_TXN(txn, session_update, &session);
}

static int revoke_run(rl_txn_t *txn, void *arg)
{
    rl_installation_row_t row;
    int result = RL_TXN(txn, installation_get, FIX_INSTALLATION, &row);

    (void)arg;
    row.state = "revoked";
    row.revoked_at = T0;
    return result != 0 ? result : RL_TXN(txn, installation_update, &row);
}

/* spec: a deleted session is 404 session_not_found; a session on a revoked installation is 403 installation_revoked. */
static void test_send_targets(void **state)
{
    rl_store_t *store = *state;

    assert_int_equal(seed_world(store), 0);
    assert_int_equal(in_txn(store, second_session_run, NULL), 0);
    assert_int_equal(in_txn(store, revoke_run, NULL), 0);
    assert_int_equal(send_message(store, FIX_SESSION, "msg_1", "hello", NULL, NULL, T0), RL_E_INSTALLATION_REVOKED);
    assert_int_equal(in_txn(store, delete_run, NULL), 0);
    assert_int_equal(send_message(store, FIX_SESSION, "msg_2", "hello", NULL, NULL, T0), RL_E_SESSION_NOT_FOUND);
}

static json_t *page;

static void check_history(rl_store_op_t *base)
{
    json_decref(page);
    page = json_incref(((rl_op_t *)base)->value);
}

static int history(rl_store_t *store, const char *user_id, const char *before, int limit)
{
    struct history *op = rl_op_new(&history_type, sizeof(*op));

    op->user_id = rl_op_str(op, user_id);
    op->session_id = rl_op_str(op, FIX_SESSION);
    op->before = rl_op_str(op, before);
    op->limit = limit;
    return run_op(store, op, check_history);
}

static const char *page_message(size_t i)
{
    return json_string_value(json_object_get(json_array_get(json_object_get(page, "messages"), i), "message_id"));
}

/*
 * spec: the history is newest first, limit per page, with has_more and a
 * cursor for the next page; an unknown cursor is 400; another user's or a
 * deleted session is 404 session_not_found.
 */
static void test_history_pages(void **state)
{
    rl_store_t *store = *state;

    assert_int_equal(seed_world(store), 0);
    assert_int_equal(send_message(store, FIX_SESSION, "msg_1", "one", NULL, NULL, T0), 0);
    assert_int_equal(send_message(store, FIX_SESSION, "msg_2", "two", NULL, NULL, T0 + 1), 0);
    assert_int_equal(send_message(store, FIX_SESSION, "msg_3", "three", NULL, NULL, T0 + 2), 0);
    assert_int_equal(history(store, FIX_USER, NULL, 2), 0);
    assert_string_equal(page_message(0), "msg_3");
    assert_string_equal(page_message(1), "msg_2");
    assert_true(json_is_true(json_object_get(page, "has_more")));
    assert_string_equal(json_string_value(json_object_get(page, "next_cursor")), "msg_2");
    assert_int_equal(history(store, FIX_USER, "msg_2", 2), 0);
    assert_string_equal(page_message(0), "msg_1");
    assert_true(json_is_false(json_object_get(page, "has_more")));
    assert_true(json_is_null(json_object_get(page, "next_cursor")));
    assert_int_equal(history(store, FIX_USER, "msg_nowhere", 2), RL_E_MESSAGE_NOT_FOUND);
    assert_int_equal(history(store, "mallory", NULL, 2), RL_E_SESSION_NOT_FOUND);
    assert_int_equal(in_txn(store, delete_run, NULL), 0);
    assert_int_equal(history(store, FIX_USER, NULL, 2), RL_E_SESSION_NOT_FOUND);
    json_decref(page);
    page = NULL;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        INLINE(test_send_queues_for_the_bridge),
        INLINE(test_send_idempotency),
        INLINE(test_reply_to_in_session),
        INLINE(test_send_targets),
        INLINE(test_history_pages),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
