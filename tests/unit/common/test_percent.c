/* Unit tests for src/common/hex.c and src/common/percent.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/hex.h"
#include "common/percent.h"

static void test_hex_value_and_encode(void **state)
{
    const unsigned char bytes[] = {0x00, 0x0f, 0xa5, 0xff};
    char out[9];

    (void)state;
    assert_int_equal(rl_hex_value('0'), 0);
    assert_int_equal(rl_hex_value('9'), 9);
    assert_int_equal(rl_hex_value('a'), 10);
    assert_int_equal(rl_hex_value('F'), 15);
    assert_int_equal(rl_hex_value('g'), -1);
    assert_int_equal(rl_hex_value('/'), -1);
    assert_int_equal(rl_hex_value(0), -1);
    assert_int_equal(rl_hex_value(0xe9), -1);
    rl_hex_encode(bytes, sizeof(bytes), out);
    assert_string_equal(out, "000fa5ff");
    rl_hex_encode(bytes, 0, out);
    assert_string_equal(out, "");
}

static void test_strict(void **state)
{
    char out[16];

    (void)state;
    assert_int_equal(rl_percent_decode("a%20b+c", 7, out, sizeof(out), 0), 5);
    assert_string_equal(out, "a b+c");
    assert_int_equal(rl_percent_decode("a%20b+c", 7, out, sizeof(out), RL_PERCENT_FORM), 5);
    assert_string_equal(out, "a b c");
    assert_int_equal(rl_percent_decode("%41%7a", 6, out, sizeof(out), 0), 2);
    assert_string_equal(out, "Az");
    assert_int_equal(rl_percent_decode("%4", 2, out, sizeof(out), 0), RL_PERCENT_E_ESCAPE);
    assert_int_equal(rl_percent_decode("%", 1, out, sizeof(out), 0), RL_PERCENT_E_ESCAPE);
    assert_int_equal(rl_percent_decode("%zz", 3, out, sizeof(out), 0), RL_PERCENT_E_ESCAPE);
    assert_int_equal(rl_percent_decode("a%00", 4, out, sizeof(out), 0), RL_PERCENT_E_NUL);
    assert_int_equal(rl_percent_decode("0123456789abcdef", 16, out, sizeof(out), 0), RL_PERCENT_E_LENGTH);
    assert_int_equal(rl_percent_decode("0123456789abcde", 15, out, sizeof(out), 0), 15);
    assert_int_equal(rl_percent_decode("", 0, out, sizeof(out), 0), 0);
    assert_string_equal(out, "");
    assert_int_equal(rl_percent_decode("", 0, out, 0, 0), RL_PERCENT_E_LENGTH);
}

static void test_lenient_in_place(void **state)
{
    char buf[32];
    int n;

    (void)state;
    strcpy(buf, "%2541%zz%4");
    n = rl_percent_decode(buf, strlen(buf), buf, sizeof(buf), RL_PERCENT_LENIENT);
    assert_int_equal(n, 8);
    assert_string_equal(buf, "%41%zz%4");
    n = rl_percent_decode(buf, (size_t)n, buf, sizeof(buf), RL_PERCENT_LENIENT);
    assert_int_equal(n, 6);
    assert_string_equal(buf, "A%zz%4");
    strcpy(buf, "a%00b+");
    n = rl_percent_decode(buf, strlen(buf), buf, sizeof(buf), RL_PERCENT_LENIENT);
    assert_int_equal(n, 4);
    assert_memory_equal(buf, "a\0b+", 5);
}

static void test_encode(void **state)
{
    char out[64];

    (void)state;
    assert_int_equal(rl_percent_encode("a b/c~", 6, out, "-._~"), 10);
    assert_string_equal(out, "a%20b%2Fc~");
    assert_int_equal(rl_percent_encode("\xc3\xa9%", 3, out, "-._~"), 9);
    assert_string_equal(out, "%C3%A9%25");
    /* Only what keep names passes, besides letters and digits. */
    assert_int_equal(rl_percent_encode("a!b.c", 5, out, "!"), 7);
    assert_string_equal(out, "a!b%2Ec");
    assert_int_equal(rl_percent_encode("x\0y", 3, out, ""), 5);
    assert_string_equal(out, "x%00y");
    assert_int_equal(rl_percent_encode("", 0, out, ""), 0);
    assert_string_equal(out, "");
}

static void test_round_trip(void **state)
{
    char bytes[256], encoded[3 * 256 + 1], decoded[257];
    int i;

    (void)state;
    for (i = 0; i < 256; ++i)
        bytes[i] = (char)(i == 0 ? 1 : i);
    rl_percent_encode(bytes, sizeof(bytes), encoded, "-._~");
    assert_int_equal(rl_percent_decode(encoded, strlen(encoded), decoded, sizeof(decoded), 0), 256);
    assert_memory_equal(decoded, bytes, sizeof(bytes));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hex_value_and_encode), cmocka_unit_test(test_strict),
        cmocka_unit_test(test_lenient_in_place),     cmocka_unit_test(test_encode),
        cmocka_unit_test(test_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
