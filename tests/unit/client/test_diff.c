/* Unit tests of src/client/diff.c: hunks, context, new files, limits, colour and escapes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "client/diff.h"

static const rl_term_t plain = {0, 0, 80}, colour = {1, 1, 80};

static char *diff(const rl_term_t *term, const char *path, const char *old_text, const char *new_text, int indent,
                  size_t max_lines)
{
    char *out = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&out, &len);

    assert_int_equal(rl_diff_print(fp, term, path, old_text, new_text, indent, max_lines), 0);
    fclose(fp);
    return out;
}

static void expect(const char *old_text, const char *new_text, const char *want)
{
    char *got = diff(&plain, "/w/f.py", old_text, new_text, 0, 0);

    assert_string_equal(got, want);
    free(got);
}

static void test_one_changed_line_with_its_context(void **state)
{
    expect("a\nb\nc\nd\ne\nf\ng\nh\n", "a\nb\nc\nd\nE\nf\ng\nh\n",
           "--- a/w/f.py\n+++ b/w/f.py\n@@ -2,7 +2,7 @@\n b\n c\n d\n-e\n+E\n f\n g\n h\n");
}

static void test_far_changes_make_two_hunks_and_near_ones_one(void **state)
{
    expect("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n", "X\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\nY\n",
           "--- a/w/f.py\n+++ b/w/f.py\n@@ -1,4 +1,4 @@\n-1\n+X\n 2\n 3\n 4\n@@ -9,4 +9,4 @@\n 9\n 10\n 11\n-12\n+Y\n");
    /* six kept lines between two changes: one hunk, as diff -u */
    expect("1\n2\n3\n4\n5\n6\n7\n8\n", "X\n2\n3\n4\n5\n6\n7\nY\n",
           "--- a/w/f.py\n+++ b/w/f.py\n@@ -1,8 +1,8 @@\n-1\n+X\n 2\n 3\n 4\n 5\n 6\n 7\n-8\n+Y\n");
}

static void test_insertions_deletions_and_a_new_file(void **state)
{
    expect("a\nc\n", "a\nb\nc\n", "--- a/w/f.py\n+++ b/w/f.py\n@@ -1,2 +1,3 @@\n a\n+b\n c\n");
    expect("a\nb\nc\n", "a\nc\n", "--- a/w/f.py\n+++ b/w/f.py\n@@ -1,3 +1,2 @@\n a\n-b\n c\n");
    expect(NULL, "x = 1\ny = 2", "--- /dev/null\n+++ b/w/f.py\n@@ -0,0 +1,2 @@\n+x = 1\n+y = 2\n");
    expect("gone\n", "", "--- a/w/f.py\n+++ b/w/f.py\n@@ -1,1 +0,0 @@\n-gone\n");
    expect("same\n", "same\n", "--- a/w/f.py\n+++ b/w/f.py\n(no changes)\n");
}

static void test_the_common_subsequence_is_kept(void **state)
{
    /* a moved block: the longest run stays, the rest is removed and added */
    expect("a\nb\nc\nd\n", "b\nc\nd\na\n", "--- a/w/f.py\n+++ b/w/f.py\n@@ -1,4 +1,4 @@\n-a\n b\n c\n d\n+a\n");
}

static void test_a_limit_cuts_the_diff_and_says_so(void **state)
{
    char *got = diff(&plain, "f", NULL, "1\n2\n3\n4\n5\n", 2, 3);

    assert_string_equal(got,
                        "  --- /dev/null\n  +++ b/f\n  @@ -0,0 +1,5 @@\n  +1\n  +2\n  … 3 more lines of this diff\n");
    free(got);
}

static void test_colour_on_a_terminal_and_no_escapes_from_the_agent(void **state)
{
    char *got = diff(&colour, "f", "a\n", "b\x1b[2J\n", 0, 0);

    assert_non_null(strstr(got, "\x1b[31m-a\x1b[0m"));
    assert_non_null(strstr(got, "\x1b[32m+b?[2J\x1b[0m"));
    assert_non_null(strstr(got, "\x1b[36m@@ -1,1 +1,1 @@"));
    free(got);
    got = diff(&plain, "f", "a\n", "b\x1b[2J\n", 0, 0);
    assert_null(strchr(got, '\x1b'));
    free(got);
}

static void test_a_large_edit_beyond_the_bound_is_replaced_whole(void **state)
{
    size_t n = 3000, i;
    char *old_text = malloc(n * 8), *new_text = malloc(n * 8), *got;
    size_t a = 0, b = 0;

    for (i = 0; i < n; ++i) {
        a += (size_t)sprintf(old_text + a, "o%zu\n", i);
        b += (size_t)sprintf(new_text + b, "n%zu\n", i);
    }
    got = diff(&plain, "f", old_text, new_text, 0, 0);
    assert_non_null(strstr(got, "@@ -1,3000 +1,3000 @@\n-o0\n-o1\n"));
    assert_non_null(strstr(got, "-o2999\n+n0\n"));
    free(got);
    free(old_text);
    free(new_text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_changed_line_with_its_context),
        cmocka_unit_test(test_far_changes_make_two_hunks_and_near_ones_one),
        cmocka_unit_test(test_insertions_deletions_and_a_new_file),
        cmocka_unit_test(test_the_common_subsequence_is_kept),
        cmocka_unit_test(test_a_limit_cuts_the_diff_and_says_so),
        cmocka_unit_test(test_colour_on_a_terminal_and_no_escapes_from_the_agent),
        cmocka_unit_test(test_a_large_edit_beyond_the_bound_is_replaced_whole),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
