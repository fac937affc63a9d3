#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "common/error.h"
#include "relay/e2e/e2e.h"

#define CHECK(fn, text) fn((text), strlen(text))

static void test_pubkey(void **state)
{
    (void)state;
    assert_int_equal(CHECK(rl_e2e_pubkey_check, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"), 0);
    /* Uppercase, short, long, not hex. */
    assert_int_equal(CHECK(rl_e2e_pubkey_check, "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef"),
                     -1);
    assert_int_equal(CHECK(rl_e2e_pubkey_check, "0123456789abcdef"), -1);
    assert_int_equal(CHECK(rl_e2e_pubkey_check, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0"),
                     -1);
    assert_int_equal(CHECK(rl_e2e_pubkey_check, "g123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"),
                     -1);
}

static void test_envelope(void **state)
{
    (void)state;
    /* 0x01 and 28 bytes: the shortest envelope (nonce, empty ciphertext, tag). */
    assert_int_equal(CHECK(rl_e2e_envelope_check, "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="), 0);
    /* The empty-value sentinel. */
    assert_int_equal(CHECK(rl_e2e_envelope_check, "AA=="), 0);
    /* One byte short, unpadded, url alphabet, another version, a wrap, junk. */
    assert_int_equal(CHECK(rl_e2e_envelope_check, "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=="), -1);
    assert_int_equal(CHECK(rl_e2e_envelope_check, "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"), -1);
    assert_int_equal(CHECK(rl_e2e_envelope_check, "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA-_A="), -1);
    assert_int_equal(CHECK(rl_e2e_envelope_check, "AgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="), -1);
    assert_int_equal(CHECK(rl_e2e_envelope_check, "hello world!"), -1);
    assert_int_equal(CHECK(rl_e2e_envelope_check, "AQ=A"), -1);
    assert_int_equal(CHECK(rl_e2e_envelope_check, ""), -1);
}

static void test_wrap(void **state)
{
    char longer[300];

    (void)state;
    assert_int_equal(CHECK(rl_e2e_wrap_check,
                           "AgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="),
                     0);
    assert_int_equal(CHECK(rl_e2e_wrap_check,
                           "AwAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="),
                     -1);
    assert_int_equal(CHECK(rl_e2e_wrap_check, "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="), -1);
    /* Over 256 characters. */
    memset(longer, 'A', 260);
    longer[0] = 'A', longer[1] = 'g', longer[260] = '\0';
    assert_int_equal(CHECK(rl_e2e_wrap_check, longer), -1);
}

static void test_blind_index(void **state)
{
    (void)state;
    assert_int_equal(CHECK(rl_e2e_blind_index_check, "Zm9vYmFyYmF6cXV4MTIzNA"), 0);
    assert_int_equal(CHECK(rl_e2e_blind_index_check, "a-b_c"), 0);
    assert_int_equal(CHECK(rl_e2e_blind_index_check, "a+b"), -1);
    assert_int_equal(CHECK(rl_e2e_blind_index_check, "a=="), -1);
    assert_int_equal(CHECK(rl_e2e_blind_index_check, ""), -1);
}

static void test_body_rule(void **state)
{
    static const char *const plain[] = {"text", "title", NULL};
    json_t *body = json_pack("{s:s, s:s}", "session_id", "ses_1", "text_ct", "AA==");
    const char *field = NULL;

    (void)state;
    /* Ciphertext in an encrypted session; plaintext refused there, *_ct refused in a plain one. */
    assert_int_equal(rl_e2e_body_check(body, 1, plain, &field), 0);
    assert_int_equal(rl_e2e_body_check(body, 0, plain, &field), RL_E_INVALID_REQUEST);
    assert_string_equal(field, "text_ct");
    json_object_set_new(body, "text", json_string("hello"));
    assert_int_equal(rl_e2e_body_check(body, 1, plain, &field), RL_E_INVALID_REQUEST);
    assert_string_equal(field, "text");
    /* A null carries nothing. */
    json_object_set_new(body, "text", json_null());
    assert_int_equal(rl_e2e_body_check(body, 1, plain, &field), 0);
    json_object_del(body, "text_ct");
    assert_int_equal(rl_e2e_body_check(body, 0, plain, &field), 0);
    json_decref(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pubkey),      cmocka_unit_test(test_envelope),  cmocka_unit_test(test_wrap),
        cmocka_unit_test(test_blind_index), cmocka_unit_test(test_body_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
