/*
 * The approval rules (spec "Approval", docs/api.md "Approvals") against a
 * real store: a request is pending until the first decision, which wins; a
 * decision after expires_at is 410; approve_always stores a grant that
 * answers later requests at once; the sweep expires what is due, once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "relay/turn/approvals.c"
#include "store_fixture.h"

#define TTL 120000
#define T0  10000

/* The request's body as the bridge sends it (validated by the route's schema). */
static json_t *request_body(const char *approval_id, const char *action, const char *command)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "session_id", FIX_SESSION, "interaction_id",
                     "int_one", "approval_id", approval_id, "action", action, "title", "Run it?", "message", "",
                     "severity", "high", "command", command, "idempotency_key", approval_id);
}

static int auto_resolved, replayed;
static char response_decision[32];

static void check_request(rl_store_op_t *base)
{
    struct approval_request *op = (void *)base;
    const char *decision = json_string_value(json_object_get(op->w.response, "decision"));

    auto_resolved = op->auto_resolved;
    replayed = op->w.replay;
    snprintf(response_decision, sizeof(response_decision), "%s", decision != NULL ? decision : "");
}

/* As rl_bridge_request_approval builds it: idempotency scope "approval:", key the approval id. */
static int request(rl_store_t *store, json_t *body, int64_t now)
{
    struct approval_request *op = rl_op_new(&approval_request_type, sizeof(*op));
    char hash[RL_BODY_HASH_HEX + 1];
    rl_idempotency_t idem;
    rl_bridge_target_t target = {FIX_INSTALLATION, FIX_SESSION, "int_one", now, 30 * 60 * 1000, 0};

    assert_int_equal(rl_idempotency_body_hash(body, hash), 0);
    idem = (rl_idempotency_t){FIX_INSTALLATION, "approval:", json_string_value(json_object_get(body, "approval_id")),
                              hash, now - 86400000};
    rl_idempotency_copy(&op->w.op.base.arena, &op->w.idem, &idem);
    rl_target_copy(&op->w.op.base.arena, &op->w.target, &target);
    op->w.body = body;
    op->expires_at = now + TTL;
    auto_resolved = -1;
    return run_op(store, op, check_request);
}

static int changed;
static char decided[32];

static void check_decide(rl_store_op_t *base)
{
    struct approval_decide *op = (void *)base;
    const char *decision = json_string_value(json_object_get(op->op.value, "decision"));

    changed = op->changed;
    snprintf(decided, sizeof(decided), "%s", decision != NULL ? decision : "");
}

static int decide(rl_store_t *store, const char *user_id, const char *approval_id, const char *decision,
                  const char *scope, const char *of_installation, int64_t now)
{
    struct approval_decide *op = rl_op_new(&approval_decide_type, sizeof(*op));

    op->user_id = rl_op_str(op, user_id);
    op->approval_id = rl_op_str(op, approval_id);
    op->decision = rl_op_str(op, decision);
    op->scope = rl_op_str(op, scope);
    op->of_installation = rl_op_str(op, of_installation);
    op->now = now;
    changed = -1;
    decided[0] = '\0';
    return run_op(store, op, check_decide);
}

static int seed_turn_run(rl_txn_t *txn, void *arg)
{
    int result = seed_world_run(txn, arg);

    return result != 0 ? result : seed_interaction(txn, "int_one", FIX_SESSION, T0);
}

static void seed(rl_store_t *store)
{
    assert_int_equal(in_txn(store, seed_turn_run, NULL), 0);
}

/* brief: the first decision wins; a later one gets it back (idempotent), and the bridge hears once. */
static void test_first_decision_wins(void **state)
{
    rl_store_t *store = *state;

    seed(store);
    assert_int_equal(request(store, request_body("apr_1", "shell", "ls"), T0), 0);
    assert_int_equal(auto_resolved, 0);
    assert_int_equal(decide(store, FIX_USER, "apr_1", "approve", NULL, NULL, T0 + 1), 0);
    assert_int_equal(changed, 1);
    assert_string_equal(decided, "approve");
    assert_int_equal(decide(store, FIX_USER, "apr_1", "deny", NULL, NULL, T0 + 2), 0);
    assert_int_equal(changed, 0);
    assert_string_equal(decided, "approve");
    assert_string_equal(queued_updates(store, FIX_INSTALLATION, 0, 0), "approval.resolved");
}

/* spec: a decision at or after expires_at is 410 approval_expired; another user's approval is 404. */
static void test_decision_after_expiry_and_ownership(void **state)
{
    rl_store_t *store = *state;

    seed(store);
    assert_int_equal(request(store, request_body("apr_1", "shell", "ls"), T0), 0);
    assert_int_equal(decide(store, "mallory", "apr_1", "approve", NULL, NULL, T0 + 1), RL_E_APPROVAL_NOT_FOUND);
    assert_int_equal(decide(store, FIX_USER, "apr_1", "approve", NULL, NULL, T0 + TTL), RL_E_APPROVAL_EXPIRED);
    assert_int_equal(decide(store, FIX_USER, "apr_1", "approve", NULL, NULL, T0 + TTL - 1), 0);
}

/*
 * spec: approve_always stores a permanent grant for (action, scope,
 * scope_value); brief: a later request it covers is resolved at once and
 * the bridge still hears approval.resolved. A request it does not cover
 * still asks.
 */
static void test_approve_always_grants(void **state)
{
    rl_store_t *store = *state;

    seed(store);
    assert_int_equal(request(store, request_body("apr_1", "shell", "ls"), T0), 0);
    assert_int_equal(decide(store, FIX_USER, "apr_1", "approve_always", "tool", NULL, T0 + 1), 0);
    assert_int_equal(request(store, request_body("apr_2", "shell", "ls"), T0 + 2), 0);
    assert_int_equal(auto_resolved, 1);
    assert_string_equal(response_decision, "approve_always");
    /* The grant is for the command: another command of the same action asks. */
    assert_int_equal(request(store, request_body("apr_3", "shell", "rm -rf /"), T0 + 3), 0);
    assert_int_equal(auto_resolved, 0);
    /* ...and another action with the same command asks too. */
    assert_int_equal(request(store, request_body("apr_4", "write", "ls"), T0 + 4), 0);
    assert_int_equal(auto_resolved, 0);
    assert_string_equal(queued_updates(store, FIX_INSTALLATION, 0, 0), "approval.resolved,approval.resolved");
}

static size_t pending;

static void check_snapshot(rl_store_op_t *base)
{
    pending = json_array_size(json_object_get(((rl_op_t *)base)->value, "pending_approvals"));
}

/* The user's pending approvals, as GET /v1/me/snapshot lists them. */
static size_t snapshot_count(rl_store_t *store)
{
    struct snapshot *op = rl_op_new(&snapshot_type, sizeof(*op));

    op->user_id = rl_op_str(op, FIX_USER);
    op->now = T0 + 10;
    pending = (size_t)-1;
    assert_int_equal(run_op(store, op, check_snapshot), 0);
    return pending;
}

/*
 * spec "Limits": the same key with the same body replays the stored answer;
 * the same approval id with another body is 409 idempotency_conflict.
 */
static void test_request_idempotency(void **state)
{
    rl_store_t *store = *state;

    seed(store);
    assert_int_equal(request(store, request_body("apr_1", "shell", "ls"), T0), 0);
    assert_int_equal(replayed, 0);
    assert_int_equal(request(store, request_body("apr_1", "shell", "ls"), T0 + 1), 0);
    assert_int_equal(replayed, 1);
    assert_int_equal(request(store, request_body("apr_1", "shell", "pwd"), T0 + 2), RL_E_IDEMPOTENCY_CONFLICT);
    /* The user was asked once. */
    assert_int_equal(snapshot_count(store), 1);
}

static int second_installation_run(rl_txn_t *txn, void *arg)
{
    int result = seed_installation(txn, "inst_bbbbbbbbbbbbbbbb", FIX_USER);
    rl_approval_row_t approval = {.id = "apr_1",
                                  .installation_id = "inst_bbbbbbbbbbbbbbbb",
                                  .user_id = FIX_USER,
                                  .session_id = "ses_bbbbbbbbbbbbbbbbbbbb",
                                  .interaction_id = "int_two",
                                  .request = "{\"action\":\"shell\"}",
                                  .state = "pending",
                                  .created_at = T0,
                                  .expires_at = T0 + TTL,
                                  .resolved_at = RL_NO_TIME};

    (void)arg;
    if (result == 0)
        result = seed_session(txn, "ses_bbbbbbbbbbbbbbbbbbbb", FIX_USER, "inst_bbbbbbbbbbbbbbbb");
    if (result == 0)
        result = seed_interaction(txn, "int_two", "ses_bbbbbbbbbbbbbbbbbbbb", T0);
    return result != 0 ? result : RL_TXN(txn, approval_insert, &approval);
}

/* ours: approval ids are per installation; when two of the user's use one, the user names which (409 otherwise). */
static void test_same_id_on_two_installations(void **state)
{
    rl_store_t *store = *state;

    seed(store);
    assert_int_equal(request(store, request_body("apr_1", "shell", "ls"), T0), 0);
    assert_int_equal(in_txn(store, second_installation_run, NULL), 0);
    assert_int_equal(decide(store, FIX_USER, "apr_1", "deny", NULL, NULL, T0 + 1), RL_E_APPROVAL_AMBIGUOUS);
    assert_int_equal(decide(store, FIX_USER, "apr_1", "deny", NULL, "inst_bbbbbbbbbbbbbbbb", T0 + 1), 0);
    assert_int_equal(changed, 1);
    assert_string_equal(queued_updates(store, "inst_bbbbbbbbbbbbbbbb", 0, 0), "approval.resolved");
    assert_string_equal(queued_updates(store, FIX_INSTALLATION, 0, 0), "");
}

static size_t swept;

static void check_sweep(rl_store_op_t *base)
{
    swept = json_array_size(((rl_op_t *)base)->value);
}

static size_t sweep(rl_store_t *store, int64_t now)
{
    swept = (size_t)-1;
    run_op(store, rl_approvals_expiry(NULL, now), check_sweep);
    return swept;
}

/*
 * brief: a pending approval expires at its expires_at: approval.expired to
 * the bridge, once (a second sweep finds nothing), and a decision after it
 * is 410; a resolved approval never expires.
 */
static void test_expiry_sweep(void **state)
{
    rl_store_t *store = *state;

    seed(store);
    assert_int_equal(request(store, request_body("apr_1", "shell", "ls"), T0), 0);
    assert_int_equal(request(store, request_body("apr_2", "shell", "pwd"), T0), 0);
    assert_int_equal(decide(store, FIX_USER, "apr_2", "deny", NULL, NULL, T0 + 1), 0);
    assert_int_equal(sweep(store, T0 + TTL - 1), 0);
    assert_int_equal(sweep(store, T0 + TTL), 1);
    assert_int_equal(sweep(store, T0 + TTL + 1000), 0);
    assert_string_equal(queued_updates(store, FIX_INSTALLATION, 0, 0), "approval.resolved,approval.expired");
    assert_int_equal(decide(store, FIX_USER, "apr_1", "approve", NULL, NULL, T0 + TTL + 1), RL_E_APPROVAL_EXPIRED);
    /* The one decided before stays decided. */
    assert_int_equal(decide(store, FIX_USER, "apr_2", "approve", NULL, NULL, T0 + TTL + 1), 0);
    assert_string_equal(decided, "deny");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        INLINE(test_first_decision_wins),          INLINE(test_decision_after_expiry_and_ownership),
        INLINE(test_approve_always_grants),        INLINE(test_request_idempotency),
        INLINE(test_same_id_on_two_installations), INLINE(test_expiry_sweep),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
