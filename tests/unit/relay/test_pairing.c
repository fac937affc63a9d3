/* Pairing's store operations against a real store: the code's lifecycle, its expiry and collisions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "relay/installations/pairing.c"
#include "store_fixture.h"

static int insert(rl_store_t *store, const char *poll_hash, const char *code_hash, int64_t created_at,
                  int64_t expires_at)
{
    struct pairing_insert *op = rl_op_new(&pairing_insert_type, sizeof(*op));

    op->row = (rl_pairing_row_t){rl_op_str(op, poll_hash),
                                 rl_op_str(op, code_hash),
                                 "inst_0123456789abcdef",
                                 "exec",
                                 "laptop",
                                 "pending",
                                 NULL,
                                 created_at,
                                 expires_at,
                                 RL_NO_TIME};
    return run_op(store, op, NULL);
}

static char polled_status[16], polled_installation[40];

static void check_poll(rl_store_op_t *base)
{
    struct pairing_poll *op = (void *)base;

    snprintf(polled_status, sizeof(polled_status), "%s", op->paired ? "paired" : "pending");
    snprintf(polled_installation, sizeof(polled_installation), "%s",
             op->installation_id != NULL ? op->installation_id : "");
}

static int poll_pairing(rl_store_t *store, const char *poll_hash, const char *token_hash, int64_t now)
{
    struct pairing_poll *op = rl_op_new(&pairing_poll_type, sizeof(*op));

    op->poll_hash = rl_op_str(op, poll_hash);
    op->token_hash = rl_op_str(op, token_hash);
    op->token_env = "live";
    op->now = now;
    polled_status[0] = '\0';
    return run_op(store, op, check_poll);
}

static char claimed_user[32];

static void check_claim(rl_store_op_t *base)
{
    struct pairing_claim *op = (void *)base;

    snprintf(claimed_user, sizeof(claimed_user), "%s", base->result == 0 ? op->installation.user_id : "");
}

static int claim(rl_store_t *store, const char *code_hash, const char *user, int64_t now)
{
    struct pairing_claim *op = rl_op_new(&pairing_claim_type, sizeof(*op));
    char copy[32];

    /* The operation owns its arguments: the caller's buffer may change at once. */
    snprintf(copy, sizeof(copy), "%s", user);
    op->code_hash = rl_op_str(op, code_hash);
    op->user_id = rl_op_str(op, copy);
    op->now = now;
    memset(copy, 'x', sizeof(copy) - 1);
    return run_op(store, op, check_claim);
}

static char token_hash[80];

struct installation_get {
    rl_op_t op;
    rl_installation_row_t row;
};

static void check_installation(rl_store_op_t *base)
{
    struct installation_get *get = (void *)base;

    snprintf(token_hash, sizeof(token_hash), "%s", get->row.token_hash != NULL ? get->row.token_hash : "");
}

static int installation_run(rl_txn_t *txn, rl_store_op_t *base)
{
    return RL_TXN(txn, installation_get, "inst_0123456789abcdef", &((struct installation_get *)base)->row);
}

static const rl_store_op_type_t installation_type = RL_OP_TYPE(installation_get, 0, installation_run);

static void test_pairing_lifecycle(void **state)
{
    rl_store_t *store = *state;
    struct installation_get *get;

    assert_int_equal(insert(store, "poll-hash-1", "code-hash-1", 1000, 121000), 0);
    assert_int_equal(poll_pairing(store, "poll-hash-1", "tok-hash", 2000), 0);
    assert_string_equal(polled_status, "pending");
    assert_int_equal(claim(store, "code-hash-1", "alice", 3000), 0);
    assert_string_equal(claimed_user, "alice");
    /* Consumed once. */
    assert_int_equal(claim(store, "code-hash-1", "bob", 3001), RL_E_PAIRING_NOT_FOUND);
    assert_int_equal(poll_pairing(store, "poll-hash-1", "tok-hash", 4000), 0);
    assert_string_equal(polled_status, "paired");
    assert_string_equal(polled_installation, "inst_0123456789abcdef");
    get = rl_op_new(&installation_type, sizeof(*get));
    assert_int_equal(run_op(store, get, check_installation), 0);
    assert_string_equal(token_hash, "tok-hash");
    /* The token is handed out once. */
    assert_int_equal(poll_pairing(store, "poll-hash-1", "other", 5000), RL_E_PAIRING_NOT_FOUND);
}

static void test_pairing_expiry_and_collision(void **state)
{
    rl_store_t *store = *state;

    assert_int_equal(insert(store, "poll-hash-1", "code-hash-1", 1000, 121000), 0);
    /* The same live code cannot be issued twice... */
    assert_int_equal(insert(store, "poll-hash-2", "code-hash-1", 2000, 122000), RL_E_CONFLICT);
    assert_int_equal(poll_pairing(store, "poll-hash-1", "h", 121000), RL_E_PAIRING_EXPIRED);
    assert_int_equal(claim(store, "code-hash-1", "alice", 121000), RL_E_PAIRING_NOT_FOUND);
    /* ...but once it expired, it may be minted again. */
    assert_int_equal(insert(store, "poll-hash-2", "code-hash-1", 130000, 250000), 0);
}

static void test_reopen_keeps_data(void **state)
{
    rl_store_t *store = *state;
    struct installation_get *get;

    assert_int_equal(insert(store, "poll-hash-1", "code-hash-1", 1000, 121000), 0);
    assert_int_equal(claim(store, "code-hash-1", "alice", 3000), 0);
    rl_store_close(store);
    /* Migrations are not applied twice and the data is still there. */
    store = fixture_open();
    assert_non_null(store);
    *state = store;
    get = rl_op_new(&installation_type, sizeof(*get));
    assert_int_equal(run_op(store, get, NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        BOTH(test_pairing_lifecycle),
        BOTH(test_pairing_expiry_and_collision),
        BOTH(test_reopen_keeps_data),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
