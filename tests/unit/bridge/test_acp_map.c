/* The Agent Client Protocol's vocabulary mapped onto the relay's (bridge/acp_map.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bridge/acp_map.h"
#include "common/buf.h"

static void test_every_update_kind_of_the_schema_has_its_bridge_call(void **state)
{
    /* The eleven sessionUpdate kinds of ACP schema v1, each with what the bridge does. */
    static const struct {
        const char *kind;
        rl_acp_update_t update;
        const char *call;
    } expected[] = {
        {"agent_message_chunk", RL_ACP_UPDATE_TEXT, "sendMessageDelta"},
        {"agent_thought_chunk", RL_ACP_UPDATE_THOUGHT, "createTask/updateTask kind think"},
        {"tool_call", RL_ACP_UPDATE_TOOL_CALL, "createTask"},
        {"tool_call_update", RL_ACP_UPDATE_TOOL_UPDATE, "updateTask/finishTask"},
        {"plan", RL_ACP_UPDATE_PLAN, "createTask/updateTask kind plan"},
        {"available_commands_update", RL_ACP_UPDATE_COMMANDS, "setManifest commands"},
        {"current_mode_update", RL_ACP_UPDATE_MODE, "setManifest agent.mode"},
        {"user_message_chunk", RL_ACP_UPDATE_IGNORE, NULL},
        {"usage_update", RL_ACP_UPDATE_USAGE, "sendMessageEnd usage.context_*"},
        {"config_option_update", RL_ACP_UPDATE_CONFIG, "POST /v1/bridge/sessions/:id/state options"},
        {"session_info_update", RL_ACP_UPDATE_IGNORE, NULL},
    };
    size_t i, k;

    (void)state;
    assert_int_equal(rl_acp_updates_count, sizeof(expected) / sizeof(expected[0]));
    for (i = 0; i < sizeof(expected) / sizeof(expected[0]); i++) {
        assert_int_equal(rl_acp_update_of(expected[i].kind), expected[i].update);
        for (k = 0; k < rl_acp_updates_count; k++)
            if (strcmp(rl_acp_updates[k].kind, expected[i].kind) == 0)
                break;
        assert_true(k < rl_acp_updates_count);
        if (expected[i].call == NULL)
            assert_null(rl_acp_updates[k].call);
        else
            assert_string_equal(rl_acp_updates[k].call, expected[i].call);
    }
    assert_int_equal(rl_acp_update_of("something_new"), RL_ACP_UPDATE_IGNORE);
    assert_int_equal(rl_acp_update_of(NULL), RL_ACP_UPDATE_IGNORE);
}

static void test_stop_reasons_map_to_finish_reasons(void **state)
{
    (void)state;
    assert_string_equal(rl_acp_finish_reason("end_turn"), "stop");
    assert_string_equal(rl_acp_finish_reason("max_tokens"), "length");
    assert_string_equal(rl_acp_finish_reason("max_turn_requests"), "length");
    assert_string_equal(rl_acp_finish_reason("refusal"), "content_filter");
    assert_string_equal(rl_acp_finish_reason("cancelled"), "cancelled");
    assert_string_equal(rl_acp_finish_reason("a_future_reason"), "stop");
    assert_string_equal(rl_acp_finish_reason(NULL), "stop");
}

static void test_usage_of_a_prompt_response(void **state)
{
    json_t *acp = json_pack("{s:i, s:i, s:i, s:i, s:i, s:s}", "inputTokens", 12, "outputTokens", 5, "totalTokens", 17,
                            "thoughtTokens", 2, "cachedReadTokens", 40, "model", "a model's name");
    json_t *usage = rl_acp_usage(acp),
           *expected = json_pack("{s:i, s:i, s:i, s:i}", "input_tokens", 12, "output_tokens", 5, "total_tokens", 17,
                                 "cached_tokens", 40);

    (void)state;
    assert_true(json_equal(usage, expected));
    json_decref(usage);
    json_decref(expected);
    json_decref(acp);
    acp = json_pack("{s:i}", "thoughtTokens", 3);
    assert_null(rl_acp_usage(acp));
    json_decref(acp);
    acp = json_pack("{s:i, s:s}", "inputTokens", -1, "outputTokens", "5");
    assert_null(rl_acp_usage(acp));
    json_decref(acp);
    assert_null(rl_acp_usage(NULL));
}

static void test_usage_update_becomes_context_figures(void **state)
{
    json_t *update = json_pack("{s:s, s:i, s:i, s:{s:f, s:s}, s:s}", "sessionUpdate", "usage_update", "used", 42000,
                               "size", 200000, "cost", "amount", 0.25, "currency", "USD", "model", "secret-model");
    json_t *got = rl_acp_context_usage(update);
    json_t *expected = json_pack("{s:i, s:i, s:{s:f, s:s}}", "context_used", 42000, "context_size", 200000, "cost",
                                 "amount", 0.25, "currency", "USD");

    (void)state;
    assert_true(json_equal(got, expected));
    json_decref(got);
    json_decref(expected);
    json_decref(update);
    /* A currency that is not a code (it could be any text), a negative count, a size of 0: not taken. */
    update = json_pack("{s:i, s:i, s:{s:f, s:s}}", "used", -1, "size", 0, "cost", "amount", 1.0, "currency",
                       "dollars of /home/me");
    assert_null(rl_acp_context_usage(update));
    json_decref(update);
    update = json_pack("{s:i, s:{s:f, s:s}}", "used", 7, "cost", "amount", -2.0, "currency", "EUR");
    got = rl_acp_context_usage(update);
    expected = json_pack("{s:i}", "context_used", 7);
    assert_true(json_equal(got, expected));
    json_decref(got);
    json_decref(expected);
    json_decref(update);
    assert_null(rl_acp_context_usage(NULL));
}

static void test_terminal_meta_of_claude_code_and_codex(void **state)
{
    const char *data;
    size_t len;
    json_t *exit, *update;

    (void)state;
    /* Announced: terminal_info, no output yet. */
    update = json_loads("{\"_meta\":{\"terminal_info\":{\"terminal_id\":\"t1\"}},\"toolCallId\":\"t1\"}", 0, NULL);
    assert_int_equal(rl_acp_terminal_meta(update, &data, &len, &exit), 1);
    assert_null(data);
    assert_null(exit);
    json_decref(update);
    update = json_loads("{\"_meta\":{\"terminal_output\":{\"terminal_id\":\"t1\",\"data\":\"one\\n\"}}}", 0, NULL);
    assert_int_equal(rl_acp_terminal_meta(update, &data, &len, &exit), 1);
    assert_int_equal(len, 4);
    assert_memory_equal(data, "one\n", 4);
    json_decref(update);
    update = json_loads("{\"_meta\":{\"terminal_exit\":{\"terminal_id\":\"t1\",\"exit_code\":2,\"signal\":null}},"
                        "\"status\":\"failed\"}",
                        0, NULL);
    assert_int_equal(rl_acp_terminal_meta(update, &data, &len, &exit), 1);
    assert_null(data);
    assert_int_equal(json_integer_value(exit), 2);
    json_decref(update);
    /* ACP's terminal content alone names one too. */
    update = json_loads("{\"content\":[{\"type\":\"terminal\",\"terminalId\":\"t1\"}]}", 0, NULL);
    assert_int_equal(rl_acp_terminal_meta(update, &data, &len, &exit), 1);
    json_decref(update);
    update = json_loads("{\"content\":[{\"type\":\"content\",\"content\":{\"type\":\"text\",\"text\":\"x\"}}],"
                        "\"_meta\":{\"claudeCode\":{}}}",
                        0, NULL);
    assert_int_equal(rl_acp_terminal_meta(update, &data, &len, &exit), 0);
    json_decref(update);
}

static void test_usage_of_gemini_cli_in_the_answers_meta(void **state)
{
    json_t *result = json_loads("{\"stopReason\":\"end_turn\",\"_meta\":{\"quota\":{\"token_count\":"
                                "{\"input_tokens\":90,\"output_tokens\":12},\"model_usage\":[{\"model\":\"m\"}]}}}",
                                0, NULL);
    json_t *usage = rl_acp_prompt_usage(result),
           *expected = json_pack("{s:i, s:i}", "input_tokens", 90, "output_tokens", 12);

    (void)state;
    assert_true(json_equal(usage, expected));
    json_decref(usage);
    json_decref(result);
    /* ACP's usage wins when both are there. */
    result = json_pack("{s:{s:i}, s:{s:{s:{s:i}}}}", "usage", "inputTokens", 3, "_meta", "quota", "token_count",
                       "input_tokens", 90);
    usage = rl_acp_prompt_usage(result);
    json_decref(expected);
    expected = json_pack("{s:i}", "input_tokens", 3);
    assert_true(json_equal(usage, expected));
    json_decref(usage);
    json_decref(result);
    json_decref(expected);
    result = json_pack("{s:s}", "stopReason", "end_turn");
    assert_null(rl_acp_prompt_usage(result));
    json_decref(result);
}

static void test_terminal_of_a_raw_output(void **state)
{
    const char *whole;
    size_t len;
    json_t *exit;
    json_t *raw = json_pack("{s:s, s:s, s:i}", "stdout", "x", "aggregated_output", "first\nsecond\n", "exit_code", 2);

    (void)state;
    rl_acp_terminal_raw_output(raw, &whole, &len, &exit);
    assert_string_equal(whole, "first\nsecond\n");
    assert_int_equal(len, 13);
    assert_int_equal(json_integer_value(exit), 2);
    json_decref(raw);
    raw = json_string("just text");
    rl_acp_terminal_raw_output(raw, &whole, &len, &exit);
    assert_null(whole);
    assert_null(exit);
    json_decref(raw);
}

static void test_terminal_tail_keeps_the_last_16k_on_a_character(void **state)
{
    rl_buf_t tail;
    char *chunk = malloc(RL_ACP_TERMINAL_MAX + 10);
    size_t i;

    (void)state;
    rl_buf_init(&tail, 2 * RL_ACP_TERMINAL_MAX);
    assert_int_equal(rl_acp_terminal_append(&tail, "hello ", 6), 0);
    assert_int_equal(rl_acp_terminal_append(&tail, "world", 5), 0);
    assert_string_equal(rl_buf_str(&tail), "hello world");
    /* "é" (2 bytes) repeated past the cap after "aé": the cut falls inside that "é", which goes whole. */
    for (i = 0; i + 1 < RL_ACP_TERMINAL_MAX + 10; i += 2) {
        chunk[i] = (char)0xC3;
        chunk[i + 1] = (char)0xA9;
    }
    rl_buf_reset(&tail);
    assert_int_equal(rl_acp_terminal_append(&tail, "a\xc3\xa9", 3), 0);
    assert_int_equal(rl_acp_terminal_append(&tail, chunk, RL_ACP_TERMINAL_MAX - 1), 1);
    assert_int_equal(tail.len, RL_ACP_TERMINAL_MAX - 1);
    assert_memory_equal(tail.bytes, chunk, RL_ACP_TERMINAL_MAX - 1);
    /* One chunk larger than the cap alone. */
    rl_buf_reset(&tail);
    assert_int_equal(rl_acp_terminal_append(&tail, chunk + 1, RL_ACP_TERMINAL_MAX + 8), 1);
    assert_true(tail.len <= RL_ACP_TERMINAL_MAX && tail.len >= RL_ACP_TERMINAL_MAX - 1);
    assert_int_equal((unsigned char)tail.bytes[0], 0xC3);
    /* Small chunks past the cap: the oldest go. */
    rl_buf_reset(&tail);
    for (i = 0; i < 3000; i++)
        rl_acp_terminal_append(&tail, "line 123456\n", 12);
    assert_int_equal(tail.len, RL_ACP_TERMINAL_MAX);
    assert_memory_equal(tail.bytes + tail.len - 12, "line 123456\n", 12);
    rl_buf_free(&tail);
    free(chunk);
}

static void test_tool_kinds_and_their_severity(void **state)
{
    static const char *const low[] = {"read", "search", "think", "fetch"};
    static const char *const medium[] = {"edit", "move", "switch_mode", "other"};
    static const char *const high[] = {"execute", "delete"};
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(low) / sizeof(low[0]); i++) {
        assert_string_equal(rl_acp_tool_kind(low[i]), low[i]);
        assert_string_equal(rl_acp_severity(low[i]), "low");
    }
    for (i = 0; i < sizeof(medium) / sizeof(medium[0]); i++)
        assert_string_equal(rl_acp_severity(medium[i]), "medium");
    for (i = 0; i < sizeof(high) / sizeof(high[0]); i++)
        assert_string_equal(rl_acp_severity(high[i]), "high");
    assert_string_equal(rl_acp_tool_kind("hack"), "other");
    assert_string_equal(rl_acp_tool_kind(NULL), "other");
    assert_string_equal(rl_acp_severity(NULL), "medium");
}

static json_t *options_of(const char *kinds)
{
    json_t *options = json_array();
    char copy[128], *kind, *save = NULL;

    strcpy(copy, kinds);
    for (kind = strtok_r(copy, " ", &save); kind != NULL; kind = strtok_r(NULL, " ", &save))
        json_array_append_new(options, json_pack("{s:s, s:s, s:s}", "optionId", kind, "name", kind, "kind", kind));
    return options;
}

static void expect_option(const char *offered, rl_acp_decision_t decision, const char *chosen)
{
    json_t *options = options_of(offered);
    const char *id = rl_acp_option_for(options, decision);

    if (chosen == NULL)
        assert_null(id);
    else
        assert_string_equal(id, chosen);
    json_decref(options);
}

static void test_decisions_choose_the_offered_option_of_their_kind(void **state)
{
    const char *all = "reject_always allow_always reject_once allow_once";

    (void)state;
    expect_option(all, RL_ACP_APPROVE, "allow_once");
    /* the relay's grant, not the agent's own "always", answers the next identical request */
    expect_option(all, RL_ACP_APPROVE_ALWAYS, "allow_once");
    expect_option(all, RL_ACP_DENY, "reject_once");
    expect_option(all, RL_ACP_EXPIRED, "reject_once");
    /* fallbacks */
    expect_option("allow_always reject_always", RL_ACP_APPROVE_ALWAYS, "allow_always");
    expect_option("allow_once reject_always", RL_ACP_DENY, "reject_always");
    expect_option("allow_once reject_always", RL_ACP_EXPIRED, "reject_always");
    /* a plain approval never grants more than once; no option at all: the caller answers cancelled */
    expect_option("allow_always reject_once", RL_ACP_APPROVE, NULL);
    expect_option("allow_once allow_always", RL_ACP_DENY, NULL);
    expect_option("", RL_ACP_APPROVE, NULL);
}

static void test_gateway_words_become_decisions(void **state)
{
    (void)state;
    assert_int_equal(rl_acp_decision_of("allow-once"), RL_ACP_APPROVE);
    assert_int_equal(rl_acp_decision_of("allow-always"), RL_ACP_APPROVE_ALWAYS);
    assert_int_equal(rl_acp_decision_of("deny"), RL_ACP_DENY);
    /* anything else is never consent */
    assert_int_equal(rl_acp_decision_of("approve"), RL_ACP_DENY);
    assert_int_equal(rl_acp_decision_of(NULL), RL_ACP_DENY);
}

static void test_content_is_normalised_into_our_blocks(void **state)
{
    json_t *acp = json_loads("["
                             "{\"type\":\"content\",\"content\":{\"type\":\"text\",\"text\":\"hello\"}},"
                             "{\"type\":\"diff\",\"path\":\"/w/a.c\",\"oldText\":\"x\\n\",\"newText\":\"y\\n\"},"
                             "{\"type\":\"diff\",\"path\":\"/w/new.c\",\"newText\":\"fresh\"},"
                             "{\"type\":\"diff\",\"path\":\"/w/b.c\",\"oldText\":null,\"newText\":\"b\"},"
                             "{\"type\":\"content\",\"content\":{\"type\":\"image\",\"data\":\"AA==\","
                             "\"mimeType\":\"image/png\"}},"
                             "{\"type\":\"terminal\",\"terminalId\":\"t1\"},"
                             "{\"type\":\"content\",\"content\":{\"type\":\"resource\",\"resource\":"
                             "{\"uri\":\"file:///w/r\",\"text\":\"embedded\"}}},"
                             "{\"type\":\"content\",\"content\":{\"type\":\"resource_link\",\"uri\":\"file:///w/l\","
                             "\"name\":\"l\"}},"
                             "{\"type\":\"mystery\"}, 42]",
                             0, NULL);
    json_t *expected = json_loads("["
                                  "{\"type\":\"text\",\"text\":\"hello\"},"
                                  "{\"type\":\"diff\",\"path\":\"/w/a.c\",\"old_text\":\"x\\n\",\"new_text\":\"y\\n\"},"
                                  "{\"type\":\"diff\",\"path\":\"/w/new.c\",\"old_text\":null,\"new_text\":\"fresh\"},"
                                  "{\"type\":\"diff\",\"path\":\"/w/b.c\",\"old_text\":null,\"new_text\":\"b\"},"
                                  "{\"type\":\"text\",\"text\":\"embedded\"},"
                                  "{\"type\":\"text\",\"text\":\"file:///w/l\"}]",
                                  0, NULL);
    size_t omitted = 0;
    json_t *blocks;

    (void)state;
    blocks = rl_acp_content(acp, RL_ACP_FIELD_MAX, &omitted);
    assert_true(json_equal(blocks, expected));
    assert_int_equal(omitted, 3); /* the image, the unknown type and the number; a terminal is the task's "terminal" */
    json_decref(blocks);
    blocks = rl_acp_content(NULL, RL_ACP_FIELD_MAX, &omitted);
    assert_int_equal(json_array_size(blocks), 0);
    assert_int_equal(omitted, 0);
    json_decref(blocks);
    json_decref(acp);
    json_decref(expected);
}

static void test_long_fields_are_cut_on_a_character_and_marked(void **state)
{
    /* "é" is two bytes: a cut at 4 bytes of "aaaéé" falls inside the first é and backs off before it. */
    json_t *acp =
        json_pack("[{s:s, s:s, s:s, s:s}, {s:s, s:{s:s, s:s}}]", "type", "diff", "path", "/w/x", "oldText", "ab",
                  "newText", "aaa\xc3\xa9\xc3\xa9", "type", "content", "content", "type", "text", "text", "abcdefgh");
    size_t omitted;
    json_t *blocks = rl_acp_content(acp, 4, &omitted);
    json_t *diff = json_array_get(blocks, 0), *text = json_array_get(blocks, 1);

    (void)state;
    assert_string_equal(json_string_value(json_object_get(diff, "new_text")), "aaa");
    assert_string_equal(json_string_value(json_object_get(diff, "old_text")), "ab");
    assert_true(json_is_true(json_object_get(diff, "truncated")));
    assert_string_equal(json_string_value(json_object_get(text, "text")), "abcd");
    assert_true(json_is_true(json_object_get(text, "truncated")));
    json_decref(blocks);
    blocks = rl_acp_content(acp, RL_ACP_FIELD_MAX, &omitted);
    assert_null(json_object_get(json_array_get(blocks, 0), "truncated"));
    json_decref(blocks);
    json_decref(acp);
}

static void test_raw_input_becomes_args(void **state)
{
    json_t *object = json_pack("{s:s}", "command", "ls"), *number = json_integer(3), *args;

    (void)state;
    args = rl_acp_args(object);
    assert_true(json_equal(args, object));
    json_decref(args);
    args = rl_acp_args(number);
    assert_int_equal(json_integer_value(json_object_get(args, "input")), 3);
    json_decref(args);
    assert_null(rl_acp_args(NULL));
    assert_null(rl_acp_args(json_null()));
    json_decref(object);
    json_decref(number);
}

static void test_raw_values_are_bounded(void **state)
{
    char big[40000];
    json_t *raw, *bounded, *args;

    (void)state;
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    /* a Write's rawInput: the whole file in "content" */
    raw = json_pack("{s:s, s:s, s:[i, b, n], s:{s:s}}", "file_path", "/w/a", "content", big, "list", 1, 1, "deep", "x",
                    big);
    args = rl_acp_args(raw);
    assert_string_equal(json_string_value(json_object_get(args, "file_path")), "/w/a");
    assert_int_equal(json_string_length(json_object_get(args, "content")), RL_ACP_VALUE_STRING_MAX);
    assert_int_equal(json_string_length(json_object_get(json_object_get(args, "deep"), "x")), RL_ACP_VALUE_STRING_MAX);
    assert_true(json_equal(json_object_get(args, "list"), json_object_get(raw, "list")));
    json_decref(args);
    /* the total: strings past it are cut short, then replaced by an ellipsis */
    bounded = rl_acp_bounded(raw, 30000, 30010);
    assert_true(json_string_length(json_object_get(bounded, "content")) +
                    json_string_length(json_object_get(json_object_get(bounded, "deep"), "x")) <=
                30010);
    json_decref(bounded);
    json_decref(raw);
    raw = json_string(big);
    bounded = rl_acp_bounded(raw, 10, 100);
    assert_string_equal(json_string_value(bounded), "aaaaaaaaaa");
    json_decref(bounded);
    json_decref(raw);
    assert_null(rl_acp_bounded(NULL, 10, 10));
}

static void test_content_past_the_budget_is_left_out(void **state)
{
    char *big = malloc(RL_ACP_FIELD_MAX + 1);
    json_t *acp = json_array(), *blocks;
    size_t omitted, i;

    (void)state;
    memset(big, 'b', RL_ACP_FIELD_MAX);
    big[RL_ACP_FIELD_MAX] = '\0';
    for (i = 0; i < 4; i++)
        json_array_append_new(
            acp, json_pack("{s:s, s:{s:s, s:s}}", "type", "content", "content", "type", "text", "text", big));
    blocks = rl_acp_content(acp, RL_ACP_FIELD_MAX, &omitted);
    /* two blocks of 256 KiB fit in 640 KiB, a third would not */
    assert_int_equal(json_array_size(blocks), 2);
    assert_int_equal(omitted, 2);
    json_decref(blocks);
    json_decref(acp);
    free(big);
}

static void expect_command(const char *kind, const char *call, const char *expected)
{
    json_t *tool = json_loads(call, 0, NULL);
    char *command = rl_acp_command_of(kind, tool);

    assert_non_null(tool);
    assert_string_equal(command, expected);
    free(command);
    json_decref(tool);
}

static void test_the_input_that_identifies_a_tool_call(void **state)
{
    (void)state;
    expect_command("execute", "{\"title\":\"Run\",\"rawInput\":{\"command\":\"ls -la\"}}", "ls -la");
    expect_command("execute", "{\"title\":\"Run\",\"rawInput\":{\"command\":[\"git\",\"status\"]}}", "git status");
    expect_command("execute", "{\"title\":\"Run tests\"}", "Run tests");
    /* a shell running one line (Codex's argv): the line */
    expect_command("execute", "{\"title\":\"t\",\"rawInput\":{\"command\":[\"/bin/bash\",\"-lc\",\"make test\"]}}",
                   "make test");
    expect_command("execute", "{\"title\":\"t\",\"rawInput\":{\"command\":[\"python3\",\"-c\",\"print(1)\"]}}",
                   "python3 -c print(1)");
    expect_command("edit", "{\"title\":\"Edit\",\"rawInput\":{\"file_path\":\"/w/a.c\",\"old\":\"x\"}}", "/w/a.c");
    expect_command("edit", "{\"title\":\"Edit\",\"locations\":[{\"path\":\"/w/a.c\"},{\"path\":\"/w/b.c\"}]}",
                   "/w/a.c /w/b.c");
    expect_command("edit",
                   "{\"title\":\"Edit\",\"content\":[{\"type\":\"diff\",\"path\":\"/w/d.c\",\"newText\":\"\"}]}",
                   "/w/d.c");
    expect_command("read", "{\"title\":\"Read\",\"rawInput\":{\"path\":\"/w/r\"}}", "/w/r");
    expect_command("move", "{\"title\":\"Move\",\"rawInput\":{\"path\":\"/w/a\",\"new_path\":\"/w/b\"}}", "/w/a /w/b");
    expect_command("fetch", "{\"title\":\"Fetch\",\"rawInput\":{\"url\":\"https://example.com\"}}",
                   "https://example.com");
    expect_command("search", "{\"title\":\"Search for x\",\"rawInput\":{\"pattern\":\"x\"}}", "Search for x");
    expect_command(NULL, "{\"title\":\"Something\"}", "Something");
}

static void test_a_string_cut_never_splits_a_character(void **state)
{
    int cut;
    json_t *s;

    (void)state;
    s = rl_acp_string_cut("\xe2\x82\xac\xe2\x82\xac", 6, 4, &cut); /* two euro signs, three bytes each */
    assert_string_equal(json_string_value(s), "\xe2\x82\xac");
    assert_int_equal(cut, 1);
    json_decref(s);
    s = rl_acp_string_cut("abc", 3, 3, &cut);
    assert_string_equal(json_string_value(s), "abc");
    assert_int_equal(cut, 0);
    json_decref(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_update_kind_of_the_schema_has_its_bridge_call),
        cmocka_unit_test(test_stop_reasons_map_to_finish_reasons),
        cmocka_unit_test(test_usage_of_a_prompt_response),
        cmocka_unit_test(test_usage_update_becomes_context_figures),
        cmocka_unit_test(test_terminal_meta_of_claude_code_and_codex),
        cmocka_unit_test(test_usage_of_gemini_cli_in_the_answers_meta),
        cmocka_unit_test(test_terminal_of_a_raw_output),
        cmocka_unit_test(test_terminal_tail_keeps_the_last_16k_on_a_character),
        cmocka_unit_test(test_tool_kinds_and_their_severity),
        cmocka_unit_test(test_decisions_choose_the_offered_option_of_their_kind),
        cmocka_unit_test(test_gateway_words_become_decisions),
        cmocka_unit_test(test_content_is_normalised_into_our_blocks),
        cmocka_unit_test(test_long_fields_are_cut_on_a_character_and_marked),
        cmocka_unit_test(test_raw_input_becomes_args),
        cmocka_unit_test(test_raw_values_are_bounded),
        cmocka_unit_test(test_content_past_the_budget_is_left_out),
        cmocka_unit_test(test_the_input_that_identifies_a_tool_call),
        cmocka_unit_test(test_a_string_cut_never_splits_a_character),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
