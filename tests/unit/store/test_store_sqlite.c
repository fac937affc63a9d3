/* The SQLite store against a real database file in a temporary folder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

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

static int setup(void **state)
{
    rl_store_t *store = NULL;

    strcpy(folder, "/tmp/rl-store-test-XXXXXX");
    assert_non_null(mkdtemp(folder));
    assert_int_equal(rl_store_open(folder, &store), 0);
    *state = store;
    return 0;
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
    rl_store_flush(store);
    assert_int_equal(out.calls, 1);
    assert_int_equal(out.result, 0);
    assert_false(rl_store_pending(store));
}

static void test_pairing_lifecycle(void **state)
{
    rl_store_t *store = *state;
    struct outcome out = {0};

    rl_store_pairing_insert(store, &pairing, record, &out);
    rl_store_flush(store);
    assert_int_equal(out.result, 0);

    rl_store_pairing_poll(store, "poll-hash-1", "tok-hash", "live", 2000, record, &out);
    rl_store_flush(store);
    assert_int_equal(out.result, 0);
    assert_string_equal(json_string_value(json_object_get(out.value, "status")), "pending");

    rl_store_pairing_claim(store, "code-hash-1", "alice", 3000, record, &out);
    rl_store_flush(store);
    assert_int_equal(out.result, 0);
    assert_string_equal(json_string_value(json_object_get(out.value, "id")), "inst_0123456789abcdef");
    assert_string_equal(json_string_value(json_object_get(out.value, "user_id")), "alice");

    /* Consumed once. */
    rl_store_pairing_claim(store, "code-hash-1", "bob", 3001, record, &out);
    rl_store_flush(store);
    assert_int_equal(out.result, RL_E_PAIRING_NOT_FOUND);

    rl_store_pairing_poll(store, "poll-hash-1", "tok-hash", "live", 4000, record, &out);
    rl_store_flush(store);
    assert_int_equal(out.result, 0);
    assert_string_equal(json_string_value(json_object_get(out.value, "status")), "paired");

    rl_store_installation_get(store, "inst_0123456789abcdef", record, &out);
    rl_store_flush(store);
    assert_int_equal(out.result, 0);
    assert_string_equal(json_string_value(json_object_get(out.value, "token_hash")), "tok-hash");

    /* The token is handed out once. */
    rl_store_pairing_poll(store, "poll-hash-1", "other", "live", 5000, record, &out);
    rl_store_flush(store);
    assert_int_equal(out.result, RL_E_PAIRING_NOT_FOUND);
    json_decref(out.value);
}

static void test_pairing_expiry_and_collision(void **state)
{
    rl_store_t *store = *state;
    struct outcome out = {0};
    rl_pairing_new_t second = pairing;

    rl_store_pairing_insert(store, &pairing, record, &out);
    rl_store_flush(store);
    assert_int_equal(out.result, 0);

    /* The same live code cannot be issued twice... */
    second.poll_hash = "poll-hash-2";
    second.created_at = 2000;
    rl_store_pairing_insert(store, &second, record, &out);
    rl_store_flush(store);
    assert_int_equal(out.result, RL_E_IDEMPOTENCY_CONFLICT);

    rl_store_pairing_poll(store, "poll-hash-1", "h", "live", 121000, record, &out);
    rl_store_flush(store);
    assert_int_equal(out.result, RL_E_PAIRING_EXPIRED);
    rl_store_pairing_claim(store, "code-hash-1", "alice", 121000, record, &out);
    rl_store_flush(store);
    assert_int_equal(out.result, RL_E_PAIRING_NOT_FOUND);

    /* ...but once it expired, it may be minted again. */
    second.created_at = 130000;
    second.expires_at = 250000;
    rl_store_pairing_insert(store, &second, record, &out);
    rl_store_flush(store);
    assert_int_equal(out.result, 0);
    json_decref(out.value);
}

static void test_failed_write_leaves_no_trace(void **state)
{
    rl_store_t *store = *state;
    struct outcome out = {0};

    rl_store_installation_set_manifest(store, "inst_nobodyhere0000", "{}", record, &out);
    rl_store_flush(store);
    assert_int_equal(out.result, RL_E_INSTALLATION_NOT_FOUND);
    rl_store_installation_get(store, "inst_nobodyhere0000", record, &out);
    rl_store_flush(store);
    assert_int_equal(out.result, RL_E_INSTALLATION_NOT_FOUND);
    json_decref(out.value);
}

static void test_reopen_keeps_data(void **state)
{
    rl_store_t *store = *state;
    struct outcome out = {0};

    rl_store_pairing_insert(store, &pairing, record, &out);
    rl_store_pairing_claim(store, "code-hash-1", "alice", 3000, record, &out);
    rl_store_flush(store);
    assert_int_equal(out.result, 0);
    rl_store_close(store);
    /* Migrations are not applied twice and the data is still there. */
    assert_int_equal(rl_store_open(folder, &store), 0);
    *state = store;
    rl_store_installation_get(store, "inst_0123456789abcdef", record, &out);
    rl_store_flush(store);
    assert_int_equal(out.result, 0);
    json_decref(out.value);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_callbacks_are_deferred, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pairing_lifecycle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pairing_expiry_and_collision, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_write_leaves_no_trace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reopen_keeps_data, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
