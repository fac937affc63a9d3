/* Unit tests of src/catalog/snippet.c: windows, marks, prefixes, cuts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "catalog/snippet.h"

static const char *snip(const char *q, const char *text)
{
    static char out[512];

    rl_catalog_snippet(q, text, out, sizeof(out));
    return out;
}

static void test_marks_and_prefix(void **state)
{
    assert_string_equal(snip("swe bench", "Builds SWE-bench from real issues."),
                        "Builds **SWE**-**bench** from real issues.");
    assert_string_equal(snip("gpqa diam", "GPQA Diamond questions"), "**GPQA** **Diamond** questions");
    /* A finished word is not a prefix. */
    assert_string_equal(snip("gpqa diam ", "GPQA Diamond questions"), "**GPQA** Diamond questions");
    assert_string_equal(snip("\"diam\"", "GPQA Diamond"), "");
    assert_string_equal(snip("caf", "Un caf\xc3\xa9 noir"), "Un **caf\xc3\xa9** noir");
    assert_int_equal(rl_catalog_snippet("zzz", "nothing here", (char[8]){0}, 8), 0);
    assert_int_equal(rl_catalog_snippet("!!", "nothing here", (char[8]){0}, 8), 0);
}

static void test_window(void **state)
{
    const char *text = "w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 target w12 w13 w14 w15 w16 w17 w18 w19 w20 w21 w22 w23 w24 "
                       "w25 w26 w27 w28 w29 w30.";
    const char *out = snip("target", text);

    assert_string_equal(out, "…w7 w8 w9 w10 **target** w12 w13 w14 w15 w16 w17 w18 w19 w20 w21 w22 w23 w24…");
    out = snip("w29", text);
    assert_string_equal(out, "…w13 w14 w15 w16 w17 w18 w19 w20 w21 w22 w23 w24 w25 w26 w27 w28 **w29** w30.");
    out = snip("w2", "w1 w2 w3.");
    assert_string_equal(out, "w1 **w2** w3.");
}

static void test_cut_on_a_character(void **state)
{
    char out[10];

    assert_int_equal(rl_catalog_snippet("x", "x \xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", out, sizeof(out)), 1);
    assert_string_equal(out, "**x** \xc3\xa9");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_marks_and_prefix),
        cmocka_unit_test(test_window),
        cmocka_unit_test(test_cut_on_a_character),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
