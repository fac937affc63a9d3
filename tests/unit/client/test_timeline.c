/* Unit tests of src/client/timeline.c: task cards, plans, blocks and approvals as relay history shows them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "client/timeline.h"

static const rl_term_t plain = {0, 0, 80};

typedef void (*print_fn)(FILE *out, const rl_term_t *term, const json_t *object);

/* What print writes for the object in json (its clock column cut off: it is local time). */
static char *printed(print_fn print, const char *json)
{
    json_t *object = json_loads(json, 0, NULL);
    char *out = NULL, *text;
    size_t len = 0;
    FILE *fp = open_memstream(&out, &len);

    assert_non_null(object);
    print(fp, &plain, object);
    fclose(fp);
    json_decref(object);
    assert_int_equal(strncmp(out, "--:--", 5) == 0 || out[2] == ':', 1);
    text = strdup(strchr(out, ' ') + 1);
    free(out);
    return text;
}

static void test_a_failed_task_with_its_output_and_error(void **state)
{
    char *got = printed(rl_timeline_print_task,
                        "{\"task_id\":\"r\",\"kind\":\"execute\",\"name\":null,\"status_label\":\"pytest\","
                        "\"status\":\"failed\",\"args\":{\"command\":\"pytest -q\"},\"partial_result\":null,"
                        "\"result\":{\"content\":[{\"type\":\"terminal\",\"output\":\"F.\\n1 failed\","
                        "\"exit_code\":1}]},\"error\":{\"message\":\"exit status 1\"},\"created_at\":0}");

    assert_string_equal(got, "✗ task pytest failed, execute\n  args {\"command\":\"pytest -q\"}\n    F.\n"
                             "    1 failed\n  exit status 1\n  error: exit status 1\n");
    free(got);
}

static void test_a_plan_and_a_running_task_show_what_they_showed_last(void **state)
{
    char *got =
        printed(rl_timeline_print_task,
                "{\"task_id\":\"plan_1\",\"kind\":\"plan\",\"status\":\"progressing\",\"status_label\":\"Plan\","
                "\"args\":null,\"partial_result\":{\"entries\":[{\"content\":\"One\",\"status\":\"completed\"},"
                "{\"content\":\"Two\",\"status\":\"pending\"}]},\"result\":null,\"error\":null}");

    assert_string_equal(got, "▶ plan Plan running\n  [x] One\n  [ ] Two\n");
    free(got);
    got = printed(rl_timeline_print_task, "{\"task_id\":\"t\",\"kind\":\"read\",\"status\":\"completed\",\"args\":{},"
                                          "\"result\":{\"content\":[{\"type\":\"image\"},{\"type\":\"text\","
                                          "\"text\":\"cut\",\"truncated\":true}]}}");
    assert_string_equal(
        got, "✓ task read completed, read\n  (a block of type image, which this client does not show)\n  cut\n"
             "  (cut by the bridge)\n");
    free(got);
}

static void test_an_ended_task_shows_its_final_state_once(void **state)
{
    /* The tour's echo agent: its last label was "running"; the relay keeps it after the end (issue 35, item 9). */
    char *got = printed(rl_timeline_print_task,
                        "{\"task_id\":\"t\",\"kind\":\"exec\",\"name\":\"shell\",\"status_label\":\"running\","
                        "\"status\":\"completed\",\"args\":null,\"result\":null,\"error\":null}");

    assert_string_equal(got, "✓ task shell completed, exec\n");
    free(got);
    got = printed(rl_timeline_print_task,
                  "{\"task_id\":\"t\",\"kind\":\"exec\",\"name\":\"shell\",\"status_label\":\"Running\","
                  "\"status\":\"progressing\",\"args\":null,\"result\":null,\"error\":null}");
    assert_string_equal(got, "▶ task shell running, exec\n");
    free(got);
}

static void test_approvals_with_their_content_and_decision(void **state)
{
    char *got =
        printed(rl_timeline_print_approval,
                "{\"approval_id\":\"apr_1\",\"title\":\"Edit a.py\",\"severity\":\"medium\",\"state\":\"resolved\","
                "\"decision\":\"approve_always\",\"scope\":\"tool\",\"message\":\"May I?\",\"command\":\"a.py\","
                "\"content\":[{\"type\":\"diff\",\"path\":\"a.py\",\"old_text\":null,\"new_text\":\"x\"}]}");

    assert_string_equal(got, "? approval Edit a.py medium → approved always (tool)\n  May I?\n  command: a.py\n"
                             "  --- /dev/null\n  +++ b/a.py\n  @@ -0,0 +1,1 @@\n  +x\n");
    free(got);
    got = printed(rl_timeline_print_approval, "{\"title\":\"Run\",\"severity\":\"high\",\"state\":\"expired\"}");
    assert_string_equal(got, "? approval Run high → expired unanswered\n");
    free(got);
    got = printed(rl_timeline_print_approval, "{\"title\":\"Run\",\"severity\":\"high\",\"state\":\"resolved\","
                                              "\"decision\":\"deny\",\"content\":null}");
    assert_string_equal(got, "? approval Run high → denied\n");
    free(got);
}

static void test_long_output_is_cut_with_a_count(void **state)
{
    char *out = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&out, &len);
    json_t *value = json_string("a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\nn\no\np\nq\nr\ns\nt\nu\nv");

    rl_timeline_print_outcome(fp, &plain, value, 2);
    fclose(fp);
    assert_non_null(strstr(out, "  t\n  … 2 more lines\n"));
    assert_null(strstr(out, "  u\n"));
    json_decref(value);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_failed_task_with_its_output_and_error),
        cmocka_unit_test(test_a_plan_and_a_running_task_show_what_they_showed_last),
        cmocka_unit_test(test_an_ended_task_shows_its_final_state_once),
        cmocka_unit_test(test_approvals_with_their_content_and_decision),
        cmocka_unit_test(test_long_output_is_cut_with_a_count),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
