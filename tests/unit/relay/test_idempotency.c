/*
 * Idempotent writes (spec "Limits": same key and same body returns the
 * cached response with idempotent: true; same key with a different body is
 * 409 idempotency_conflict; keys are unique for 24 hours, then recycled),
 * against a real store.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "relay/core/idempotency.c"
#include "store_fixture.h"

#define TTL 86400000
#define T0  100000000

struct attempt {
    const char *owner, *scope, *key;
    json_t *body;
    int64_t now;
    char response[128];
};

/* A write's two ends as rl_bridge_write_run runs them: the check, and for a new key the record of the answer. */
static int attempt_run(rl_txn_t *txn, void *arg)
{
    struct attempt *a = arg;
    char hash[RL_BODY_HASH_HEX + 1];
    rl_idempotency_t idem;
    const char *stored = NULL;
    json_t *answer;
    int result;

    if (rl_idempotency_body_hash(a->body, hash) != 0)
        return RL_E_INTERNAL;
    idem = (rl_idempotency_t){a->owner, a->scope, a->key, hash, a->now - TTL};
    result = rl_idempotency_check(txn, &idem, &stored);
    if (result == 1) {
        snprintf(a->response, sizeof(a->response), "%s", stored);
        return 0;
    }
    if (result != 0)
        return result;
    answer = json_pack("{s:I}", "answered_at", (json_int_t)a->now);
    result = rl_idempotency_record(txn, &idem, answer, a->now);
    json_decref(answer);
    snprintf(a->response, sizeof(a->response), "new");
    return result;
}

static const char *attempt(rl_store_t *store, const char *owner, const char *scope, const char *key, const char *text,
                           int64_t now)
{
    static struct attempt a;
    int result;

    a = (struct attempt){owner, scope, key, json_pack("{s:s, s:s?}", "text", text, "idempotency_key", key), now, ""};
    result = in_txn(store, attempt_run, &a);
    json_decref(a.body);
    if (result == RL_E_IDEMPOTENCY_CONFLICT)
        return "conflict";
    return result == 0 ? a.response : "(error)";
}

/* spec: same key, same body: the first answer; another body: 409. */
static void test_replay_and_conflict(void **state)
{
    rl_store_t *store = *state;

    assert_string_equal(attempt(store, FIX_INSTALLATION, "sendMessage:s", "k1", "hi", T0), "new");
    assert_string_equal(attempt(store, FIX_INSTALLATION, "sendMessage:s", "k1", "hi", T0 + 5),
                        "{\"answered_at\":100000000}");
    assert_string_equal(attempt(store, FIX_INSTALLATION, "sendMessage:s", "k1", "bye", T0 + 6), "conflict");
}

/* A key is unique per (owner, scope): another installation's, or another scope's, is its own. A write without a key is
 * never a replay. */
static void test_keys_are_per_owner_and_scope(void **state)
{
    rl_store_t *store = *state;

    assert_string_equal(attempt(store, FIX_INSTALLATION, "sendMessage:s", "k1", "hi", T0), "new");
    assert_string_equal(attempt(store, "inst_bbbbbbbbbbbbbbbb", "sendMessage:s", "k1", "bye", T0 + 1), "new");
    assert_string_equal(attempt(store, FIX_INSTALLATION, "sendMessage:t", "k1", "bye", T0 + 2), "new");
    assert_string_equal(attempt(store, FIX_INSTALLATION, "sendMessage:s", NULL, "hi", T0 + 3), "new");
    assert_string_equal(attempt(store, FIX_INSTALLATION, "sendMessage:s", NULL, "hi", T0 + 4), "new");
}

/* spec: keys are unique for 24 hours, then recycled, whether or not housekeeping removed the record yet. */
static void test_keys_lapse_after_ttl(void **state)
{
    rl_store_t *store = *state;

    assert_string_equal(attempt(store, FIX_INSTALLATION, "sendMessage:s", "k1", "hi", T0), "new");
    assert_string_equal(attempt(store, FIX_INSTALLATION, "sendMessage:s", "k1", "bye", T0 + TTL), "conflict");
    assert_string_equal(attempt(store, FIX_INSTALLATION, "sendMessage:s", "k1", "bye", T0 + TTL + 1), "new");
    assert_string_equal(attempt(store, FIX_INSTALLATION, "sendMessage:s", "k1", "bye", T0 + TTL + 2),
                        "{\"answered_at\":186400001}");
}

/* The body is compared by its canonical JSON: the order of its keys does not matter. */
static void test_body_hash_is_canonical(void **state)
{
    json_t *a = json_pack("{s:s, s:i}", "text", "hi", "n", 1), *b = json_pack("{s:i, s:s}", "n", 1, "text", "hi");
    json_t *c = json_pack("{s:s, s:i}", "text", "hi", "n", 2);
    char ha[RL_BODY_HASH_HEX + 1], hb[RL_BODY_HASH_HEX + 1], hc[RL_BODY_HASH_HEX + 1];

    (void)state;
    assert_int_equal(rl_idempotency_body_hash(a, ha), 0);
    assert_int_equal(rl_idempotency_body_hash(b, hb), 0);
    assert_int_equal(rl_idempotency_body_hash(c, hc), 0);
    assert_string_equal(ha, hb);
    assert_string_not_equal(ha, hc);
    json_decref(a);
    json_decref(b);
    json_decref(c);
}

/* The two digests of one body, against Python's hashlib over the canonical bytes {"n":1,"text":"hi"}. */
static void test_body_digests(void **state)
{
    json_t *a = json_pack("{s:s, s:i}", "text", "hi", "n", 1);
    char sha[RL_BODY_HASH_HEX + 1], b2[RL_BODY_HASH_HEX + 1], plain[RL_BODY_HASH_HEX + 1];

    (void)state;
    assert_int_equal(rl_idempotency_body_digest(a, RL_BODY_SHA256, sha), 0);
    assert_string_equal(sha, "fdae9030065f798a4ab5431e8a45d75e4877accc80853d8119e8ad078832d0e1");
    assert_int_equal(rl_idempotency_body_hash(a, plain), 0);
    assert_string_equal(plain, sha);
    assert_int_equal(rl_idempotency_body_digest(a, RL_BODY_BLAKE2B, b2), 0);
    assert_string_equal(b2, "87374b70e0b41dc3ffdcddb21b4f9a503f98151a28cc585d2e15c94d2ceb237e");
    json_decref(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_body_digests),
        INLINE(test_replay_and_conflict),
        INLINE(test_keys_are_per_owner_and_scope),
        INLINE(test_keys_lapse_after_ttl),
        cmocka_unit_test(test_body_hash_is_canonical),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
