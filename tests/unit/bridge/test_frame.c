/* The update-frame parser and the jsonl protocol's line parser (bridge/frame.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "bridge/frame.h"

static int parse_frame(const char *text, rl_frame_t *f)
{
    char err[128];
    return rl_frame_parse(text, strlen(text), f, err, sizeof(err));
}

static int parse_line(const char *text, rl_agent_line_t *l)
{
    char err[160];
    return rl_agent_line_parse(text, strlen(text), l, err, sizeof(err));
}

static void test_update_frames(void **state)
{
    rl_frame_t f;

    (void)state;
    assert_int_equal(
        parse_frame("{\"type\":\"update\",\"update\":{\"update_id\":\"42\",\"type\":\"session.message\","
                    "\"session_id\":\"ses_1\",\"interaction_id\":\"int_1\",\"installation_id\":\"inst_1\","
                    "\"created_at\":\"2026-01-01T00:00:00.000Z\",\"payload\":{\"message\":{\"text\":\"hi\"}}}}",
                    &f),
        0);
    assert_int_equal(f.type, RL_FRAME_UPDATE);
    assert_string_equal(f.update_id, "42");
    assert_string_equal(f.update_type, "session.message");
    assert_string_equal(f.session_id, "ses_1");
    assert_string_equal(f.interaction_id, "int_1");
    assert_true(json_is_object(f.payload));
    rl_frame_free(&f);
    /* interaction_id null or absent reads "" */
    assert_int_equal(parse_frame("{\"type\":\"update\",\"update\":{\"update_id\":\"1\",\"type\":\"approval.expired\","
                                 "\"session_id\":\"s\",\"interaction_id\":null,\"payload\":{}}}",
                                 &f),
                     0);
    assert_string_equal(f.interaction_id, "");
    rl_frame_free(&f);
}

static void test_other_frames(void **state)
{
    rl_frame_t f;

    (void)state;
    assert_int_equal(parse_frame("{\"type\":\"ready\",\"installation_id\":\"inst_x\"}", &f), 0);
    assert_int_equal(f.type, RL_FRAME_READY);
    assert_string_equal(f.installation_id, "inst_x");
    rl_frame_free(&f);
    assert_int_equal(parse_frame("{\"type\":\"ping\"}", &f), 0);
    assert_int_equal(f.type, RL_FRAME_PING);
    rl_frame_free(&f);
    /* a type from a later relay is not an error */
    assert_int_equal(parse_frame("{\"type\":\"hello-from-the-future\"}", &f), 0);
    assert_int_equal(f.type, RL_FRAME_OTHER);
    rl_frame_free(&f);
}

static void test_bad_frames(void **state)
{
    static const char *const bad[] = {
        "",
        "[]",
        "{}",
        "{\"type\":1}",
        "not json",
        "{\"type\":\"update\"}",
        "{\"type\":\"update\",\"update\":{\"update_id\":\"\",\"type\":\"x\",\"payload\":{}}}",
        "{\"type\":\"update\",\"update\":{\"update_id\":7,\"type\":\"x\",\"payload\":{}}}",
        "{\"type\":\"update\",\"update\":{\"update_id\":\"7\",\"type\":\"x\",\"payload\":[]}}",
        "{\"type\":\"ping\",\"type\":\"ready\"}",
    };
    rl_frame_t f;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(parse_frame(bad[i], &f), -1);
}

static void test_agent_lines(void **state)
{
    rl_agent_line_t l;

    (void)state;
    assert_int_equal(
        parse_line("{\"type\":\"delta\",\"session_id\":\"s\",\"interaction_id\":\"i\",\"text\":\"x\"}", &l), 0);
    assert_int_equal(l.type, RL_LINE_DELTA);
    assert_string_equal(l.session_id, "s");
    rl_agent_line_free(&l);
    assert_int_equal(parse_line("{\"type\":\"manifest\",\"tools\":[]}", &l), 0);
    assert_int_equal(l.type, RL_LINE_MANIFEST);
    rl_agent_line_free(&l);
    assert_int_equal(parse_line("{\"type\":\"task_finish\",\"session_id\":\"s\",\"interaction_id\":\"i\","
                                "\"task_id\":\"t\",\"status\":\"completed\",\"extra\":1}",
                                &l),
                     0);
    assert_int_equal(l.type, RL_LINE_TASK_FINISH);
    rl_agent_line_free(&l);
    assert_int_equal(parse_line("{\"type\":\"approval_request\",\"session_id\":\"s\",\"interaction_id\":\"i\","
                                "\"action\":\"exec\",\"title\":\"t\"}",
                                &l),
                     0);
    assert_int_equal(l.type, RL_LINE_APPROVAL_REQUEST);
    rl_agent_line_free(&l);
    assert_int_equal(parse_line("{\"type\":\"capability_request\",\"session_id\":\"s\",\"interaction_id\":\"i\","
                                "\"capability\":\"location\",\"reason\":\"r\"}",
                                &l),
                     0);
    assert_int_equal(l.type, RL_LINE_CAPABILITY_REQUEST);
    rl_agent_line_free(&l);
}

static void test_bad_agent_lines(void **state)
{
    static const char *const bad[] = {
        "",
        "null",
        "{\"type\":\"delta\"}",
        "{\"type\":\"delta\",\"session_id\":\"s\",\"interaction_id\":\"i\"}",
        "{\"type\":\"delta\",\"session_id\":\"s\",\"interaction_id\":\"i\",\"text\":3}",
        "{\"type\":\"manifest\"}",
        "{\"type\":\"capability_request\",\"session_id\":\"s\",\"interaction_id\":\"i\",\"capability\":\"camera\"}",
        "{\"type\":\"manifest\",\"tools\":{}}",
        "{\"type\":\"task_start\",\"session_id\":\"s\",\"interaction_id\":\"i\",\"task_id\":\"t\"}",
        "{\"type\":\"nope\"}",
        "{\"text\":\"no type\"}",
        "{\"type\":\"end\",\"session_id\":\"\",\"interaction_id\":\"i\"}",
    };
    rl_agent_line_t l;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(parse_line(bad[i], &l), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_update_frames), cmocka_unit_test(test_other_frames),    cmocka_unit_test(test_bad_frames),
        cmocka_unit_test(test_agent_lines),   cmocka_unit_test(test_bad_agent_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
