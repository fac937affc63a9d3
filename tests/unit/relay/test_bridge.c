/*
 * The bridge's REST writes (spec "Bridge REST", "Limits") against a real
 * store: sendMessage opens an agent message (a placeholder for empty text)
 * and replays per key; sendMessageEnd makes it final once, with the
 * canonical text or the streamed one; messages left open past the
 * follow-up window end as incomplete; tasks go created, progress, then
 * exactly one end.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "relay/turn/bridge.c"
#include "store_fixture.h"

#define FOLLOWUP (30 * 60 * 1000)
#define T0       10000

static int seed_run(rl_txn_t *txn, void *arg)
{
    int result = seed_world_run(txn, arg);

    return result != 0 ? result : seed_interaction(txn, "int_one", FIX_SESSION, T0);
}

static void seed(rl_store_t *store)
{
    assert_int_equal(in_txn(store, seed_run, NULL), 0);
}

/* A bridge write as rl_bridge_write_new builds it; body is stolen. */
static void *write_op(const rl_store_op_type_t *type, size_t size, json_t *body, const char *scope, const char *key,
                      int64_t now)
{
    rl_bridge_write_t *w = rl_op_new(type, size);
    char hash[RL_BODY_HASH_HEX + 1];
    rl_idempotency_t idem;
    rl_bridge_target_t target = {FIX_INSTALLATION,
                                 json_string_value(json_object_get(body, "session_id")),
                                 json_string_value(json_object_get(body, "interaction_id")),
                                 now,
                                 FOLLOWUP,
                                 0};

    assert_int_equal(rl_idempotency_body_hash(body, hash), 0);
    idem = (rl_idempotency_t){FIX_INSTALLATION, scope, key, hash, now - 86400000};
    rl_idempotency_copy(&w->op.base.arena, &w->idem, &idem);
    rl_target_copy(&w->op.base.arena, &w->target, &target);
    w->body = body;
    return w;
}

static int replay;
static json_t *view;

static void check_write(rl_store_op_t *base)
{
    rl_bridge_write_t *w = (void *)base;

    replay = w->replay;
    json_decref(view);
    view = json_incref(w->replay ? w->response : w->op.value);
}

static const char *view_string(const char *key)
{
    return json_string_value(json_object_get(view, key));
}

static int open_message(rl_store_t *store, const char *message_id, const char *text, const char *key, int64_t now)
{
    struct message_open *op;
    json_t *body = json_pack("{s:s, s:s, s:s, s:s}", "session_id", FIX_SESSION, "interaction_id", "int_one", "text",
                             text, "idempotency_key", key);
    char scope[96];

    snprintf(scope, sizeof(scope), "sendMessage:%s", FIX_SESSION);
    op = write_op(&message_open_type, sizeof(*op), body, scope, key, now);
    op->message_id = rl_op_str(op, message_id);
    replay = -1;
    return run_op(store, op, check_write);
}

/* body: the end's fields besides message_id and idempotency_key (stolen). */
static int end_message(rl_store_t *store, const char *message_id, json_t *body, const char *key, int64_t now)
{
    struct message_end *op;
    char scope[96];

    json_object_set_new(body, "message_id", json_string(message_id));
    json_object_set_new(body, "idempotency_key", json_string(key));
    snprintf(scope, sizeof(scope), "message:%s", message_id);
    op = write_op(&message_end_type, sizeof(*op), body, scope, key, now);
    op->message_id = rl_op_str(op, message_id);
    replay = -1;
    return run_op(store, op, check_write);
}

struct delta {
    const char *message_id, *text;
    int64_t seq;
};

static int delta_run(rl_txn_t *txn, void *arg)
{
    struct delta *d = arg;
    rl_delta_batch_t *batch = rl_delta_batch_new();
    rl_delta_row_t *row =
        rl_delta_batch_add_for(batch, d->message_id, d->seq, d->text, strlen(d->text), d->text, "hash", NULL, NULL);
    int result;

    row->installation_id = FIX_INSTALLATION;
    result = rl_delta_batch_write(txn, batch);
    if (result == 0)
        result = row->outcome;
    rl_delta_batch_free(batch);
    return result;
}

static void stream(rl_store_t *store, const char *message_id, int64_t seq, const char *text)
{
    struct delta d = {message_id, text, seq};

    assert_int_equal(in_txn(store, delta_run, &d), 0);
}

/*
 * spec: sendMessage with empty text opens a placeholder (the text of a
 * single space), streaming; the same key and body replays the first answer
 * (the same message_id, idempotent); another body is 409.
 */
static void test_send_message_placeholder_and_replay(void **state)
{
    rl_store_t *store = *state;

    seed(store);
    assert_int_equal(open_message(store, "msg_1", "", "k1", T0), 0);
    assert_int_equal(replay, 0);
    assert_string_equal(view_string("text"), " ");
    assert_string_equal(view_string("state"), "streaming");
    assert_int_equal(open_message(store, "msg_2", "", "k1", T0 + 1), 0);
    assert_int_equal(replay, 1);
    assert_string_equal(view_string("message_id"), "msg_1");
    assert_int_equal(open_message(store, "msg_3", "other", "k1", T0 + 2), RL_E_IDEMPOTENCY_CONFLICT);
}

/* spec: a write to an interaction past its follow-up window is 410 interaction_expired. */
static void test_send_message_after_window(void **state)
{
    rl_store_t *store = *state;

    seed(store);
    assert_int_equal(open_message(store, "msg_1", "late", "k1", T0 + FOLLOWUP + 1), RL_E_INTERACTION_EXPIRED);
}

/*
 * spec: sendMessageEnd without text keeps the streamed text; a second end
 * is 409 message_finalized, and the same end sent again is answered
 * idempotent. The protocol authors' end_turn is stored as stop.
 */
static void test_end_keeps_streamed_text_once(void **state)
{
    rl_store_t *store = *state;

    seed(store);
    assert_int_equal(open_message(store, "msg_1", "", "k1", T0), 0);
    stream(store, "msg_1", 1, "Hel");
    stream(store, "msg_1", 2, "lo");
    assert_int_equal(end_message(store, "msg_1", json_pack("{s:s}", "finish_reason", "end_turn"), "e1", T0 + 5), 0);
    assert_string_equal(view_string("text"), "Hello");
    assert_string_equal(view_string("state"), "final");
    assert_string_equal(view_string("finish_reason"), "stop");
    assert_int_equal(end_message(store, "msg_1", json_pack("{s:s}", "finish_reason", "end_turn"), "e1", T0 + 6), 0);
    assert_int_equal(replay, 1);
    assert_int_equal(end_message(store, "msg_1", json_object(), "e2", T0 + 7), RL_E_MESSAGE_FINALIZED);
}

/* spec: the canonical text of sendMessageEnd replaces the streamed one. */
static void test_end_canonical_text(void **state)
{
    rl_store_t *store = *state;

    seed(store);
    assert_int_equal(open_message(store, "msg_1", "", "k1", T0), 0);
    stream(store, "msg_1", 1, "draft");
    assert_int_equal(end_message(store, "msg_1", json_pack("{s:s}", "text", "final words"), "e1", T0 + 5), 0);
    assert_string_equal(view_string("text"), "final words");
}

static size_t lapsed;

static void check_lapse(rl_store_op_t *base)
{
    json_t *item = json_array_get(((rl_op_t *)base)->value, 0);

    lapsed = json_array_size(((rl_op_t *)base)->value);
    json_decref(view);
    view = json_incref(json_object_get(item, "message"));
}

static size_t lapse(rl_store_t *store, int64_t now)
{
    /* The sweep's operation as sweeps.c makes it: no deltas are pending here. */
    rl_config_t config = {.followup_window = FOLLOWUP};
    rl_turn_ctx_t turn = {.config = &config, .deltas = NULL};

    lapsed = (size_t)-1;
    assert_int_equal(run_op(store, rl_messages_lapse(&turn, now), check_lapse), 0);
    return lapsed;
}

/*
 * ours (docs/api.md): a message still streaming when its interaction's
 * follow-up window closes is ended by the relay with its streamed text and
 * finish_reason incomplete; not while the bridge may still write to it.
 */
static void test_lapse_after_window(void **state)
{
    rl_store_t *store = *state;

    seed(store);
    assert_int_equal(open_message(store, "msg_1", "", "k1", T0), 0);
    stream(store, "msg_1", 1, "half a");
    /* At exactly 30 minutes the bridge may still write (target.c): the message is still its to end. */
    assert_int_equal(lapse(store, T0 + FOLLOWUP), 0);
    assert_int_equal(lapse(store, T0 + FOLLOWUP + 1), 1);
    assert_string_equal(view_string("text"), "half a");
    assert_string_equal(view_string("finish_reason"), "incomplete");
    assert_string_equal(view_string("state"), "final");
    assert_int_equal(lapse(store, T0 + FOLLOWUP + 1000), 0);
}

/* ---- tasks ---- */

static int task(rl_store_t *store, rl_task_step_t step, const char *interaction_id, json_t *fields, int64_t now)
{
    static const char *const kinds[] = {"task.create", "task.update", "task.finish"};
    struct task_step *op;
    char scope[300];

    json_object_set_new(fields, "session_id", json_string(FIX_SESSION));
    json_object_set_new(fields, "interaction_id", json_string(interaction_id));
    json_object_set_new(fields, "task_id", json_string("tsk_1"));
    /* spec: create and finish are keyed by the task id; updates only by their own key. */
    if (step == RL_TASK_UPDATE) {
        snprintf(scope, sizeof(scope), "%s:tsk_1", kinds[step]);
        op = write_op(&task_step_type, sizeof(*op), fields, scope, NULL, now);
    } else {
        snprintf(scope, sizeof(scope), "%s:", kinds[step]);
        op = write_op(&task_step_type, sizeof(*op), fields, scope, "tsk_1", now);
    }
    op->step = step;
    replay = -1;
    return run_op(store, op, check_write);
}

/*
 * spec: a task is created, then has progress steps, then exactly one of
 * completed, failed, cancelled: a step after its end is 409 task_finished;
 * a second create with another body is 409; the same finish again replays.
 */
static void test_task_lifecycle(void **state)
{
    rl_store_t *store = *state;

    seed(store);
    assert_int_equal(task(store, RL_TASK_UPDATE, "int_one", json_object(), T0), RL_E_TASK_NOT_FOUND);
    assert_int_equal(task(store, RL_TASK_CREATE, "int_one", json_pack("{s:s}", "kind", "shell"), T0), 0);
    assert_string_equal(view_string("status"), "created");
    assert_int_equal(task(store, RL_TASK_CREATE, "int_one", json_pack("{s:s}", "kind", "edit"), T0 + 1),
                     RL_E_IDEMPOTENCY_CONFLICT);
    assert_int_equal(task(store, RL_TASK_UPDATE, "int_one", json_pack("{s:i}", "progress_percent", 50), T0 + 2), 0);
    assert_string_equal(view_string("status"), "progressing");
    assert_int_equal(task(store, RL_TASK_FINISH, "int_one", json_pack("{s:s}", "status", "completed"), T0 + 3), 0);
    assert_string_equal(view_string("status"), "completed");
    assert_int_equal(task(store, RL_TASK_FINISH, "int_one", json_pack("{s:s}", "status", "completed"), T0 + 4), 0);
    assert_int_equal(replay, 1);
    assert_int_equal(task(store, RL_TASK_FINISH, "int_one", json_pack("{s:s}", "status", "failed"), T0 + 5),
                     RL_E_IDEMPOTENCY_CONFLICT);
    assert_int_equal(task(store, RL_TASK_UPDATE, "int_one", json_object(), T0 + 6), RL_E_TASK_FINISHED);
    json_decref(view);
    view = NULL;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        INLINE(test_send_message_placeholder_and_replay),
        INLINE(test_send_message_after_window),
        INLINE(test_end_keeps_streamed_text_once),
        INLINE(test_end_canonical_text),
        INLINE(test_lapse_after_window),
        INLINE(test_task_lifecycle),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
