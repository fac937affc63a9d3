#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "auth/token.h"

#define GOOD "inst_0123456789abcdef:s_live_0123456789ABCDEFGHIJKLMNOPQRSTUV"

static int parse(const char *text, rl_bridge_token_t *out)
{
    return rl_bridge_token_parse(text, strlen(text), out);
}

static void test_parse_valid(void **state)
{
    rl_bridge_token_t token, again;
    char expected[65];

    assert_int_equal(parse(GOOD, &token), 0);
    assert_string_equal(token.installation_id, "inst_0123456789abcdef");
    assert_string_equal(token.env, "live");
    /* Hashed on demand, once: the parsed text is let go of then. */
    assert_string_equal(token.secret_hash, "");
    assert_int_equal(rl_bridge_token_hash(&token), 0);
    rl_token_hash("s_live_0123456789ABCDEFGHIJKLMNOPQRSTUV", 39, expected);
    assert_string_equal(token.secret_hash, expected);
    assert_null(token.secret);
    assert_int_equal(rl_bridge_token_hash(&token), 0);
    assert_string_equal(token.secret_hash, expected);
    assert_int_equal(parse("inst_0123456789abcdef:s_test_0123456789ABCDEFGHIJKLMNOPQRSTUVxyz", &again), 0);
    assert_string_equal(again.env, "test");
}

/* The stored token hashes are SHA-256 in lower-case hex: the FIPS 180-2 vectors, one of them longer than a block. */
static void test_hash_is_sha256(void **state)
{
    char hash[65];

    (void)state;
    rl_token_hash("abc", 3, hash);
    assert_string_equal(hash, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    rl_token_hash("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, hash);
    assert_string_equal(hash, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    rl_token_hash("", 0, hash);
    assert_string_equal(hash, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

static void test_parse_invalid(void **state)
{
    rl_bridge_token_t token;
    static const char *const bad[] = {
        "",
        "inst_0123456789abcdef",
        "inst_0123456789abcde:s_live_0123456789ABCDEFGHIJKLMNOPQRSTUVW", /* 15-char id */
        "inst_0123456789abcdef:s_prod_0123456789ABCDEFGHIJKLMNOPQRSTUV", /* env */
        "inst_0123456789abcdef:s_live_0123456789ABCDEFGHIJKLMNOPQRSTU",  /* 31 chars */
        "inst_0123456789abcdef:s_live_0123456789ABCDEFGHIJKLMNOPQRSTU!", /* not base62 */
        "inst_0123456789abcdef;s_live_0123456789ABCDEFGHIJKLMNOPQRSTUV", /* separator */
        "INST_0123456789abcdef:s_live_0123456789ABCDEFGHIJKLMNOPQRSTUV", /* prefix case */
        "inst_0123456789abcdef:x_live_0123456789ABCDEFGHIJKLMNOPQRSTUV",
        "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.c2ln",
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i)
        assert_int_equal(parse(bad[i], &token), -1);
}

/* The mac tells one secret from another, and is the same for the same secret; without text or hash there is no hash. */
static void test_mac(void **state)
{
    rl_bridge_token_t a, b, c, d;
    char other[] = GOOD;

    (void)state;
    assert_int_equal(parse(GOOD, &a), 0);
    assert_int_equal(parse(GOOD, &b), 0);
    assert_true(rl_bridge_token_mac_equal(&a, b.mac));
    other[sizeof(other) - 2] = 'W';
    assert_int_equal(parse(other, &c), 0);
    assert_false(rl_bridge_token_mac_equal(&a, c.mac));
    /* The installation id is not part of it: only the secret is. */
    other[sizeof(other) - 2] = 'V';
    other[5] = '9';
    assert_int_equal(parse(other, &d), 0);
    assert_true(rl_bridge_token_mac_equal(&a, d.mac));
    d.secret = NULL;
    assert_int_equal(rl_bridge_token_hash(&d), -1);
}

static void test_mint_roundtrip(void **state)
{
    char whole[RL_TOKEN_MAX], hash[65];
    rl_bridge_token_t token;

    rl_bridge_token_mint("inst_0123456789abcdef", "live", whole, sizeof(whole), hash);
    assert_true(strlen(whole) >= 50);
    assert_int_equal(parse(whole, &token), 0);
    assert_int_equal(rl_bridge_token_hash(&token), 0);
    assert_true(rl_token_hash_equal(token.secret_hash, hash));
    assert_false(rl_token_hash_equal(token.secret_hash, "00"));
    /* Another valid secret of the same shape must not match. */
    whole[strlen(whole) - 1] = whole[strlen(whole) - 1] == 'A' ? 'B' : 'A';
    assert_int_equal(parse(whole, &token), 0);
    assert_int_equal(rl_bridge_token_hash(&token), 0);
    assert_false(rl_token_hash_equal(token.secret_hash, hash));
}

static void test_url_credentials(void **state)
{
    static const char *const carrying[] = {
        "/v1/pairing/" GOOD,
        "/v1/me?x="
        "inst_0123456789abcdef%3As_live_abc",
        "/v1/me?token=abc",
        "/v1/me?a=1&access_token=abc",
        "/v1/me?x=eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl",
        /* The same, percent-encoded in the ways a server would decode. */
        "/v1/me?x=eyJhbGciOiJFZERTQSJ9%2EeyJzdWIiOiJ4In0%2Ec2lnbmF0dXJl",
        "/v1/me?x=%65yJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl",
        "/v1/me?x=eyJhbGciOiJFZERTQSJ9%252EeyJzdWIiOiJ4In0%252Ec2lnbmF0dXJl",
        "/v1/me/sessions/eyJhbGciOiJFZERTQSJ9%2eeyJzdWIiOiJ4In0%2ec2lnbmF0dXJl",
        "/v1/me?x=inst%5F0123456789abcdef:s_live_abc",
        "/v1/me?x=%69%6e%73%74%5f0123456789abcdef%3a%73_live_abc",
        "/v1/me?%74oken=abc",
        "/v1/me?access%5Ftoken=abc",
    };
    static const char *const clean[] = {
        "/v1/me",
        "/v1/me/sessions/ses_abc?limit=20&before=msg_1",
        "/v1/me?token=",
        "/v1/me/installations/inst_0123456789abcdef",
        "/v1/me?tokens_seen=1",
        "/v1/me?name=%65yJ%20notes%2Etxt",
        "/v1/me?x=%zz%4",
        "/v1/me?x=%",
        "/v1/me?x=%2525252E",
    };

    for (size_t i = 0; i < sizeof(carrying) / sizeof(carrying[0]); ++i)
        assert_true(rl_url_carries_token(carrying[i], strlen(carrying[i])));
    for (size_t i = 0; i < sizeof(clean) / sizeof(clean[0]); ++i)
        assert_false(rl_url_carries_token(clean[i], strlen(clean[i])));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_valid),     cmocka_unit_test(test_hash_is_sha256),
        cmocka_unit_test(test_parse_invalid),   cmocka_unit_test(test_mint_roundtrip),
        cmocka_unit_test(test_mac),
        cmocka_unit_test(test_url_credentials),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
