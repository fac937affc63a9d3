/* Unit tests of src/client/term.c: NO_COLOR, TERM=dumb, and wrapping with marks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "client/term.h"

static char *wrapped(const rl_term_t *term, const char *text, int indent, int marked)
{
    char *out = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&out, &len);

    if (marked)
        rl_term_wrap_marked(fp, term, text, indent, RL_TERM_BOLD);
    else
        rl_term_wrap(fp, term, text, indent);
    fclose(fp);
    return out;
}

static void test_detect(void **state)
{
    rl_term_t term;
    int fds[2];

    assert_int_equal(pipe(fds), 0);
    setenv("COLUMNS", "100", 1);
    unsetenv("NO_COLOR");
    rl_term_detect(fds[1], &term);
    assert_false(term.tty);
    assert_false(term.colour); /* never colour a pipe */
    assert_int_equal(term.width, 100);
    assert_string_equal(rl_term_style(&term, RL_TERM_BOLD), "");
    close(fds[0]);
    close(fds[1]);
}

static void test_styles_follow_colour(void **state)
{
    rl_term_t colour = {1, 1, 80}, plain = {1, 0, 80};

    assert_string_equal(rl_term_style(&colour, RL_TERM_BOLD), "\033[1m");
    assert_string_equal(rl_term_style(&colour, RL_TERM_RESET), "\033[0m");
    assert_string_equal(rl_term_style(&plain, RL_TERM_RED), "");
}

static void test_wrap(void **state)
{
    rl_term_t narrow = {0, 0, 20};
    char *out = wrapped(&narrow, "one two three four five six seven", 2, 0);

    assert_string_equal(out, "  one two three four\n  five six seven\n");
    free(out);
    out = wrapped(&narrow, "first\nsecond", 0, 0);
    assert_string_equal(out, "first\nsecond\n");
    free(out);
    /* Marks vanish without colour and do not count towards the width. */
    out = wrapped(&narrow, "a **bold** word", 0, 1);
    assert_string_equal(out, "a bold word\n");
    free(out);
}

static void test_wrap_marked_colour(void **state)
{
    rl_term_t colour = {1, 1, 80};
    char *out = wrapped(&colour, "x **y** z", 0, 1);

    assert_string_equal(out, "x \033[1my\033[0m z\n");
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_detect),
        cmocka_unit_test(test_styles_follow_colour),
        cmocka_unit_test(test_wrap),
        cmocka_unit_test(test_wrap_marked_colour),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
