/* The canonical text of a reply (bridge/reply.c): kept whole up to relayd's cap, cut on characters past it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bridge/reply.h"

static void test_a_reply_is_kept_whole_under_the_cap(void **state)
{
    rl_reply_t reply;
    json_t *text;

    rl_reply_init(&reply);
    text = rl_reply_canonical(&reply);
    assert_string_equal(json_string_value(text), "");
    json_decref(text);
    assert_int_equal(rl_reply_append(&reply, "x01 x02 ", 8), 0);
    assert_int_equal(rl_reply_append(&reply, "caf\xc3\xa9", 5), 0);
    assert_int_equal(reply.chars, 12);
    text = rl_reply_canonical(&reply);
    assert_string_equal(json_string_value(text), "x01 x02 caf\xc3\xa9");
    json_decref(text);
    rl_reply_free(&reply);
}

static void test_past_the_cap_only_whole_characters_are_kept(void **state)
{
    size_t n = RL_REPLY_TEXT_MAX - 10, note = strlen(RL_REPLY_INCOMPLETE_NOTE);
    char *many = malloc(n), *incomplete;
    const char *accents =
        "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9";
    rl_reply_t reply;

    memset(many, 'a', n);
    rl_reply_init(&reply);
    assert_int_equal(rl_reply_append(&reply, many, n), 0);
    assert_false(reply.overflow);
    /* Twelve two-byte characters; ten fit. */
    assert_int_equal(rl_reply_append(&reply, accents, strlen(accents)), 0);
    assert_true(reply.overflow);
    assert_int_equal(reply.chars, RL_REPLY_TEXT_MAX);
    assert_int_equal(reply.text.len, n + 20);
    assert_null(rl_reply_canonical(&reply));
    assert_int_equal(rl_reply_append(&reply, "more", 4), 0);
    assert_int_equal(reply.text.len, n + 20);
    /* Incomplete: the start, cut so that the note fits under the cap, never inside a character. */
    incomplete = rl_reply_incomplete(&reply);
    assert_int_equal(strlen(incomplete), (n - note + 10) + note);
    assert_string_equal(incomplete + strlen(incomplete) - note, RL_REPLY_INCOMPLETE_NOTE);
    assert_int_equal(incomplete[0], 'a');
    free(incomplete);
    free(many);
    rl_reply_free(&reply);
}

static void test_a_short_incomplete_reply_keeps_everything(void **state)
{
    rl_reply_t reply;
    char *incomplete;

    rl_reply_init(&reply);
    rl_reply_append(&reply, "part", 4);
    incomplete = rl_reply_incomplete(&reply);
    assert_string_equal(incomplete, "part" RL_REPLY_INCOMPLETE_NOTE);
    free(incomplete);
    rl_reply_free(&reply);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_reply_is_kept_whole_under_the_cap),
        cmocka_unit_test(test_past_the_cap_only_whole_characters_are_kept),
        cmocka_unit_test(test_a_short_incomplete_reply_keeps_everything),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
