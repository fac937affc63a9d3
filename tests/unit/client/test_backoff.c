/* spec delivery rule 5: 1 s doubling to a 30 s cap, reset after a successful open (client/backoff.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "client/backoff.h"

static void test_the_sequence_doubles_to_the_cap(void **state)
{
    static const long expected[] = {1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000};
    rl_backoff_t b;
    size_t i;

    (void)state;
    rl_backoff_init(&b, 0, 0);
    for (i = 0; i < sizeof(expected) / sizeof(expected[0]); i++)
        assert_int_equal(rl_backoff_next(&b), expected[i]);
}

static void test_reset_starts_over(void **state)
{
    rl_backoff_t b;

    (void)state;
    rl_backoff_init(&b, 0, 0);
    rl_backoff_next(&b);
    rl_backoff_next(&b);
    rl_backoff_next(&b);
    rl_backoff_reset(&b);
    assert_int_equal(rl_backoff_next(&b), 1000);
    assert_int_equal(rl_backoff_next(&b), 2000);
}

static void test_custom_bounds(void **state)
{
    rl_backoff_t b;

    (void)state;
    rl_backoff_init(&b, 100, 250);
    assert_int_equal(rl_backoff_next(&b), 100);
    assert_int_equal(rl_backoff_next(&b), 200);
    assert_int_equal(rl_backoff_next(&b), 250);
    assert_int_equal(rl_backoff_next(&b), 250);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_sequence_doubles_to_the_cap),
        cmocka_unit_test(test_reset_starts_over),
        cmocka_unit_test(test_custom_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
