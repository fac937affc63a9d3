/* Line splitting with a cap on one line (bridge/jsonl_reader.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "bridge/jsonl_reader.h"

static char lines[8][64];
static int nlines;

static void collect(void *user, const char *line, size_t len)
{
    (void)user;
    snprintf(lines[nlines++], sizeof(lines[0]), "%.*s", (int)len, line);
}

static void test_lines_across_reads(void **state)
{
    rl_jsonl_reader_t r;

    (void)state;
    nlines = 0;
    rl_jsonl_reader_init(&r, 100);
    assert_int_equal(rl_jsonl_reader_feed(&r, "{\"a\":", 5, collect, NULL), 0);
    assert_int_equal(nlines, 0);
    assert_int_equal(rl_jsonl_reader_feed(&r, "1}\r\n{}\n\npart", 12, collect, NULL), 0);
    assert_int_equal(nlines, 3);
    assert_string_equal(lines[0], "{\"a\":1}");
    assert_string_equal(lines[1], "{}");
    assert_string_equal(lines[2], "");
    rl_jsonl_reader_feed(&r, "ial\n", 4, collect, NULL);
    assert_string_equal(lines[3], "partial");
    rl_jsonl_reader_free(&r);
}

static void test_an_overlong_line_is_dropped_up_to_its_newline(void **state)
{
    rl_jsonl_reader_t r;
    char big[50];

    (void)state;
    nlines = 0;
    memset(big, 'x', sizeof(big));
    rl_jsonl_reader_init(&r, 10);
    assert_int_equal(rl_jsonl_reader_feed(&r, big, sizeof(big), collect, NULL), -1);
    assert_int_equal(rl_jsonl_reader_feed(&r, "xx\nok\n", 6, collect, NULL), 0);
    assert_int_equal(nlines, 1);
    assert_string_equal(lines[0], "ok");
    rl_jsonl_reader_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lines_across_reads),
        cmocka_unit_test(test_an_overlong_line_is_dropped_up_to_its_newline),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
