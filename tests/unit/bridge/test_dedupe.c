/* spec delivery rule 1: de-duplication by update_id over the last 10 000 ids (bridge/dedupe.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "bridge/dedupe.h"

static void test_a_second_delivery_is_recognised(void **state)
{
    rl_dedupe_t *d = rl_dedupe_new(0);

    (void)state;
    assert_int_equal(rl_dedupe_add(d, "1"), 1);
    assert_int_equal(rl_dedupe_add(d, "2"), 1);
    assert_int_equal(rl_dedupe_add(d, "1"), 0);
    assert_int_equal(rl_dedupe_seen(d, "2"), 1);
    assert_int_equal(rl_dedupe_seen(d, "3"), 0);
    rl_dedupe_free(d);
}

static void test_the_window_is_the_last_10000_ids(void **state)
{
    rl_dedupe_t *d = rl_dedupe_new(0);
    char id[32];
    int i;

    (void)state;
    for (i = 1; i <= 10000; i++) {
        snprintf(id, sizeof(id), "%d", i);
        assert_int_equal(rl_dedupe_add(d, id), 1);
    }
    /* every one of the 10 000 is still known */
    for (i = 1; i <= 10000; i++) {
        snprintf(id, sizeof(id), "%d", i);
        assert_int_equal(rl_dedupe_seen(d, id), 1);
    }
    /* the 10 001st pushes out the oldest only */
    assert_int_equal(rl_dedupe_add(d, "10001"), 1);
    assert_int_equal(rl_dedupe_seen(d, "1"), 0);
    assert_int_equal(rl_dedupe_seen(d, "2"), 1);
    /* and a forgotten id counts as new again */
    assert_int_equal(rl_dedupe_add(d, "1"), 1);
    assert_int_equal(rl_dedupe_seen(d, "2"), 0);
    rl_dedupe_free(d);
}

static void test_many_rotations_keep_the_index_consistent(void **state)
{
    rl_dedupe_t *d = rl_dedupe_new(100);
    char id[32];
    int i;

    (void)state;
    for (i = 0; i < 100000; i++) {
        snprintf(id, sizeof(id), "u%d", i);
        assert_int_equal(rl_dedupe_add(d, id), 1);
        assert_int_equal(rl_dedupe_add(d, id), 0);
        if (i >= 100) {
            snprintf(id, sizeof(id), "u%d", i - 100);
            assert_int_equal(rl_dedupe_seen(d, id), 0);
            snprintf(id, sizeof(id), "u%d", i - 99);
            assert_int_equal(rl_dedupe_seen(d, id), 1);
        }
    }
    rl_dedupe_free(d);
}

static void test_overlong_ids_are_refused(void **state)
{
    rl_dedupe_t *d = rl_dedupe_new(0);
    char id[RL_DEDUPE_ID_MAX + 1];

    (void)state;
    memset(id, '7', sizeof(id) - 1);
    id[sizeof(id) - 1] = '\0';
    assert_int_equal(rl_dedupe_add(d, id), -1);
    rl_dedupe_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_second_delivery_is_recognised),
        cmocka_unit_test(test_the_window_is_the_last_10000_ids),
        cmocka_unit_test(test_many_rotations_keep_the_index_consistent),
        cmocka_unit_test(test_overlong_ids_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
