#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "http/trace.h"

static int parse(const char *text, rl_traceparent_t *out)
{
    return rl_traceparent_parse(text, strlen(text), out);
}

static void test_request_id_rules(void **state)
{
    char id[21];
    char long_id[66];

    assert_true(rl_request_id_is_valid("abc", 3));
    assert_true(rl_request_id_is_valid("A-b_c.d:9", 9));
    assert_false(rl_request_id_is_valid("", 0));
    assert_false(rl_request_id_is_valid("has space", 9));
    assert_false(rl_request_id_is_valid("a/b", 3));
    memset(long_id, 'a', sizeof(long_id));
    assert_true(rl_request_id_is_valid(long_id, 64));
    assert_false(rl_request_id_is_valid(long_id, 65));

    rl_request_id_generate(id);
    assert_int_equal(strlen(id), 20);
    assert_memory_equal(id, "req_", 4);
    for (size_t i = 4; i < 20; ++i)
        assert_true((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f'));
}

static void test_traceparent_valid(void **state)
{
    rl_traceparent_t tp;

    assert_int_equal(parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", &tp), 0);
    assert_string_equal(tp.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_string_equal(tp.parent_id, "00f067aa0ba902b7");
    assert_int_equal(tp.flags, 1);
    assert_int_equal(parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", &tp), 0);
    assert_int_equal(tp.flags, 0);
    /* A later version may carry more fields after a dash. */
    assert_int_equal(parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", &tp), 0);
}

static void test_traceparent_invalid(void **state)
{
    rl_traceparent_t tp;
    static const char *const bad[] = {
        "",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
        "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i)
        assert_int_equal(parse(bad[i], &tp), -1);
}

static void test_traceparent_respond(void **state)
{
    rl_traceparent_t in, out;
    char header[RL_TRACEPARENT_LEN + 1], trace_id[33];

    assert_int_equal(parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", &in), 0);
    rl_traceparent_respond(&in, header, trace_id);
    assert_int_equal(strlen(header), RL_TRACEPARENT_LEN);
    assert_int_equal(parse(header, &out), 0);
    assert_string_equal(out.trace_id, in.trace_id);
    assert_string_equal(trace_id, in.trace_id);
    assert_string_not_equal(out.parent_id, in.parent_id);
    assert_int_equal(out.flags, 0);

    rl_traceparent_respond(NULL, header, trace_id);
    assert_int_equal(parse(header, &out), 0);
    assert_int_equal(out.flags, 1);
    assert_string_equal(out.trace_id, trace_id);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_id_rules),
        cmocka_unit_test(test_traceparent_valid),
        cmocka_unit_test(test_traceparent_invalid),
        cmocka_unit_test(test_traceparent_respond),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
