/* Text delta batching in ~30 ms windows, on UTF-8 boundaries, under a size cap (bridge/batch.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bridge/batch.h"

static void test_bytes_of_one_window_go_out_together(void **state)
{
    rl_batch_t b;
    size_t len;
    char *out;

    (void)state;
    rl_batch_init(&b, 30);
    assert_int_equal(rl_batch_due(&b), -1);
    rl_batch_append(&b, "hel", 3, 1000);
    rl_batch_append(&b, "lo", 2, 1010);
    /* the window opened with the first bytes */
    assert_int_equal(rl_batch_due(&b), 1030);
    out = rl_batch_take(&b, 1024, 0, &len);
    assert_string_equal(out, "hello");
    assert_int_equal(len, 5);
    free(out);
    assert_null(rl_batch_take(&b, 1024, 0, &len));
    assert_int_equal(rl_batch_due(&b), -1);
    /* the next bytes open a new window */
    rl_batch_append(&b, "!", 1, 2000);
    assert_int_equal(rl_batch_due(&b), 2030);
    rl_batch_free(&b);
}

static void test_a_utf8_sequence_is_never_split(void **state)
{
    rl_batch_t b;
    size_t len;
    char *out;

    (void)state;
    rl_batch_init(&b, 30);
    /* "é" is C3 A9: only its first byte has arrived */
    rl_batch_append(&b, "caf\xc3", 4, 0);
    out = rl_batch_take(&b, 1024, 0, &len);
    assert_string_equal(out, "caf");
    free(out);
    assert_null(rl_batch_take(&b, 1024, 0, &len));
    rl_batch_append(&b, "\xa9!", 2, 40);
    out = rl_batch_take(&b, 1024, 0, &len);
    assert_string_equal(out, "\xc3\xa9!");
    free(out);
    /* a 4-byte sequence cut after 3 bytes waits too */
    rl_batch_append(&b, "\xf0\x9f\x98", 3, 50);
    assert_null(rl_batch_take(&b, 1024, 0, &len));
    rl_batch_append(&b, "\x80", 1, 60);
    out = rl_batch_take(&b, 1024, 0, &len);
    assert_string_equal(out, "\xf0\x9f\x98\x80");
    free(out);
    rl_batch_free(&b);
}

static void test_chunks_respect_the_cap_and_final_takes_all(void **state)
{
    rl_batch_t b;
    size_t len, total = 0;
    char *out;
    char big[100];

    (void)state;
    memset(big, 'x', sizeof(big));
    rl_batch_init(&b, 30);
    rl_batch_append(&b, big, sizeof(big), 0);
    while ((out = rl_batch_take(&b, 40, 0, &len)) != NULL) {
        assert_true(len <= 40);
        total += len;
        free(out);
    }
    assert_int_equal(total, 100);
    /* an agent that ends mid-sequence: the final flush sends what there is */
    rl_batch_append(&b, "a\xe2\x82", 3, 0);
    out = rl_batch_take(&b, 40, 1, &len);
    assert_int_equal(len, 3);
    free(out);
    rl_batch_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes_of_one_window_go_out_together),
        cmocka_unit_test(test_a_utf8_sequence_is_never_split),
        cmocka_unit_test(test_chunks_respect_the_cap_and_final_takes_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
