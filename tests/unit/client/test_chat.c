/*
 * The chat state machine (client/chat.c): events in, the screen or JSON lines
 * out, and the calls it makes. The calls are answered here from canned JSON;
 * the real ones run in tests/e2e/test_6x.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client/chat.h"
#include "common/clock.h"

typedef struct fixture {
    rl_chat_t *chat;
    FILE *out, *err;
    char *out_text, *err_text;
    size_t out_len, err_len;
    json_t *snapshot;  /* what ops.snapshot answers */
    json_t *history;   /* what ops.history answers */
    json_t *decisions; /* [approval_id, decision, scope] of each decide call */
    int failed;        /* ops.failed calls */
    long heartbeat;    /* ops.hello's argument */
    int history_calls;
} fixture_t;

static int op_decide(void *user, const char *approval_id, const char *decision, const char *scope, json_t **result,
                     rl_api_error_t *error)
{
    fixture_t *f = user;

    json_array_append_new(f->decisions, json_pack("[s, s, s?]", approval_id, decision, scope));
    *result = json_pack("{s:s, s:s}", "approval_id", approval_id, "decision", decision);
    return 0;
}

static int op_snapshot(void *user, json_t **snapshot, rl_api_error_t *error)
{
    fixture_t *f = user;

    if (f->snapshot == NULL) {
        memset(error, 0, sizeof(*error));
        error->status = 500;
        return -1;
    }
    *snapshot = json_incref(f->snapshot);
    return 0;
}

static int op_history(void *user, const char *session_id, int limit, json_t **history, rl_api_error_t *error)
{
    fixture_t *f = user;

    f->history_calls++;
    *history = json_incref(f->history);
    return 0;
}

static void op_failed(void *user, const rl_api_error_t *error)
{
    ((fixture_t *)user)->failed++;
}

static void op_hello(void *user, long heartbeat_ms)
{
    ((fixture_t *)user)->heartbeat = heartbeat_ms;
}

static fixture_t *start(rl_chat_mode_t mode, int json, int interactive, int max_count)
{
    fixture_t *f = calloc(1, sizeof(*f));
    rl_chat_options_t options;

    f->out = open_memstream(&f->out_text, &f->out_len);
    f->err = open_memstream(&f->err_text, &f->err_len);
    f->decisions = json_array();
    f->snapshot = json_pack("{s:i, s:[]}", "ts", 1, "pending_approvals");
    f->history = json_pack("{s:[], s:b}", "messages", "has_more", 0);
    memset(&options, 0, sizeof(options));
    options.mode = mode;
    options.session_id = mode == RL_CHAT_WATCH ? NULL : "ses_1";
    options.json = json;
    options.interactive = interactive;
    options.max_count = max_count;
    options.out = f->out;
    options.err = f->err;
    options.out_term = (rl_term_t){0, 0, 80};
    options.err_term = (rl_term_t){0, 0, 80};
    options.ops = (rl_chat_ops_t){op_decide, op_snapshot, op_history, op_failed, op_hello, f};
    f->chat = rl_chat_new(&options);
    assert_non_null(f->chat);
    return f;
}

static void stop(fixture_t *f)
{
    rl_chat_free(f->chat);
    fclose(f->out);
    fclose(f->err);
    free(f->out_text);
    free(f->err_text);
    json_decref(f->snapshot);
    json_decref(f->history);
    json_decref(f->decisions);
    free(f);
}

/* Everything written to out so far. */
static const char *out(fixture_t *f)
{
    fflush(f->out);
    return f->out_text != NULL ? f->out_text : "";
}

static void event(fixture_t *f, const char *name, const char *id, const char *fmt, ...)
{
    char data[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(data, sizeof(data), fmt, ap);
    va_end(ap);
    rl_chat_event(f->chat, name, id, data, strlen(data));
}

/* The JSON lines of out, as one array. */
static json_t *lines(fixture_t *f)
{
    json_t *all = json_array();
    const char *p = out(f);

    while (*p != '\0') {
        const char *nl = strchr(p, '\n');
        size_t n = nl != NULL ? (size_t)(nl - p) : strlen(p);
        json_t *line = json_loadb(p, n, 0, NULL);
        assert_non_null(line);
        json_array_append_new(all, line);
        p += n + (nl != NULL);
    }
    return all;
}

static const char *line_event(json_t *all, size_t i)
{
    return json_string_value(json_object_get(json_array_get(all, i), "event"));
}

static void send_one(fixture_t *f)
{
    json_t *sent = json_pack("{s:s, s:s}", "interaction_id", "int_1", "message_id", "msg_u");

    rl_chat_sent(f->chat, sent);
    json_decref(sent);
}

static void test_a_turn_streams_and_ends_complete(void **state)
{
    fixture_t *f = start(RL_CHAT_SEND, 1, 0, 0);
    json_t *all;

    send_one(f);
    assert_true(rl_chat_turn_active(f->chat));
    event(f, "hello", NULL, "{\"heartbeat_ms\": 25000}");
    assert_int_equal(f->heartbeat, 25000);
    /* The user's own message and another interaction's events are not this turn's. */
    event(f, "message_added", "1", "{\"interaction_id\":\"int_1\",\"role\":\"user\",\"text\":\"hi\"}");
    event(f, "message_delta", "2", "{\"interaction_id\":\"int_0\",\"delta\":\"elsewhere\"}");
    event(f, "message_added", "3",
          "{\"interaction_id\":\"int_1\",\"role\":\"agent\",\"message_id\":\"msg_a\",\"text\":\" \"}");
    event(f, "message_delta", "4", "{\"interaction_id\":\"int_1\",\"message_id\":\"msg_a\",\"delta\":\"It is \"}");
    event(f, "task_created", "5", "{\"interaction_id\":\"int_1\",\"task_id\":\"t1\",\"name\":\"weather\"}");
    event(f, "message_delta", "6", "{\"interaction_id\":\"int_1\",\"message_id\":\"msg_a\",\"delta\":\"sunny.\"}");
    assert_int_equal(rl_chat_outcome(f->chat), RL_CHAT_PENDING);
    event(f, "message_finalized", "7",
          "{\"interaction_id\":\"int_1\",\"role\":\"agent\",\"message_id\":\"msg_a\",\"text\":\"It is "
          "sunny.\",\"finish_reason\":\"stop\"}");
    assert_false(rl_chat_turn_active(f->chat));
    assert_int_equal(rl_chat_outcome(f->chat), RL_CHAT_COMPLETE);
    all = lines(f);
    assert_int_equal(json_array_size(all), 6);
    assert_string_equal(line_event(all, 0), "sent");
    assert_string_equal(line_event(all, 1), "message_added");
    assert_string_equal(line_event(all, 2), "message_delta");
    assert_string_equal(line_event(all, 3), "task_created");
    assert_string_equal(line_event(all, 4), "message_delta");
    assert_string_equal(line_event(all, 5), "done");
    assert_string_equal(json_string_value(json_object_get(json_array_get(all, 2), "id")), "4");
    assert_string_equal(json_string_value(json_object_get(json_object_get(json_array_get(all, 5), "data"), "source")),
                        "stream");
    json_decref(all);
    stop(f);
}

static void test_a_reply_without_finish_reason_is_incomplete(void **state)
{
    fixture_t *f = start(RL_CHAT_SEND, 0, 0, 0);

    send_one(f);
    event(f, "message_finalized", "1",
          "{\"interaction_id\":\"int_1\",\"role\":\"agent\",\"text\":\"partial\\n\\n[the agent failed]\","
          "\"finish_reason\":null}");
    assert_int_equal(rl_chat_outcome(f->chat), RL_CHAT_INCOMPLETE);
    assert_non_null(strstr(out(f), "agent> partial"));
    stop(f);
}

static void test_approvals_are_deduplicated_across_snapshot_and_stream(void **state)
{
    fixture_t *f = start(RL_CHAT_SEND, 1, 0, 0);
    json_t *all;

    json_decref(f->snapshot);
    f->snapshot = json_pack("{s:i, s:[{s:s, s:s, s:s}, {s:s, s:s, s:s}]}", "ts", 1, "pending_approvals", "approval_id",
                            "apr_1", "session_id", "ses_1", "title", "Run", "approval_id", "apr_other", "session_id",
                            "ses_2", "title", "Elsewhere");
    assert_int_equal(rl_chat_snapshot(f->chat), 0);
    event(f, "approval_requested", "9", "{\"approval_id\":\"apr_1\",\"session_id\":\"ses_1\"}");
    all = lines(f);
    /* One line: the other session's approval is not this command's business. */
    assert_int_equal(json_array_size(all), 1);
    assert_string_equal(line_event(all, 0), "approval_requested");
    json_decref(all);
    /* A snapshot that cannot be read is the program's to report. */
    json_decref(f->snapshot);
    f->snapshot = NULL;
    assert_int_equal(rl_chat_snapshot(f->chat), -1);
    assert_int_equal(f->failed, 1);
    stop(f);
}

static void test_approve_for_this_session_answers_the_next_request(void **state)
{
    fixture_t *f = start(RL_CHAT_CHAT, 0, 1, 0);

    send_one(f);
    event(f, "approval_requested", "1",
          "{\"approval_id\":\"apr_1\",\"session_id\":\"ses_1\",\"title\":\"Deploy\",\"command\":\"./deploy\"}");
    assert_true(rl_chat_prompting(f->chat));
    assert_non_null(strstr(out(f), "approve for this session"));
    assert_non_null(strstr(out(f), "./deploy"));
    /* A line that is no answer is refused and the prompt stays. */
    assert_int_equal(rl_chat_answer(f->chat, "maybe"), 1);
    assert_true(rl_chat_prompting(f->chat));
    assert_int_equal(rl_chat_answer(f->chat, "s"), 1);
    assert_false(rl_chat_prompting(f->chat));
    event(f, "approval_requested", "2", "{\"approval_id\":\"apr_2\",\"session_id\":\"ses_1\",\"title\":\"Restart\"}");
    assert_false(rl_chat_prompting(f->chat));
    assert_non_null(strstr(out(f), "approved for this session: Restart"));
    /* spec, decision mapping: the client-only approveForSession is stored as approve. */
    assert_int_equal(json_array_size(f->decisions), 2);
    assert_string_equal(json_string_value(json_array_get(json_array_get(f->decisions, 0), 1)), "approve");
    assert_string_equal(json_string_value(json_array_get(json_array_get(f->decisions, 1), 0)), "apr_2");
    assert_string_equal(json_string_value(json_array_get(json_array_get(f->decisions, 1), 1)), "approve");
    /* No prompt, no answer: a line is the user's message again. */
    assert_int_equal(rl_chat_answer(f->chat, "a"), 0);
    stop(f);
}

static void test_always_approve_is_approve_always_with_scope_tool(void **state)
{
    fixture_t *f = start(RL_CHAT_CHAT, 0, 1, 0);

    send_one(f);
    event(f, "approval_requested", "1", "{\"approval_id\":\"apr_1\",\"session_id\":\"ses_1\",\"title\":\"Run\"}");
    assert_int_equal(rl_chat_answer(f->chat, "a"), 1);
    assert_string_equal(json_string_value(json_array_get(json_array_get(f->decisions, 0), 1)), "approve_always");
    assert_string_equal(json_string_value(json_array_get(json_array_get(f->decisions, 0), 2)), "tool");
    stop(f);
}

static void test_resync_reads_the_snapshot_and_polls_the_turn(void **state)
{
    fixture_t *f = start(RL_CHAT_SEND, 1, 0, 0);
    json_t *all;

    send_one(f);
    event(f, "resync", "10", "{\"reason\":\"buffer_gap\"}");
    json_decref(f->history);
    f->history =
        json_pack("{s:[{s:s, s:s, s:s, s:s, s:s, s:s}]}", "messages", "role", "agent", "interaction_id", "int_1",
                  "message_id", "msg_a", "state", "final", "text", "from the history", "finish_reason", "stop");
    rl_chat_tick(f->chat, rl_clock_mono_ms());
    assert_int_equal(f->history_calls, 1);
    assert_int_equal(rl_chat_outcome(f->chat), RL_CHAT_COMPLETE);
    all = lines(f);
    assert_string_equal(line_event(all, 1), "resync");
    assert_string_equal(line_event(all, 2), "polled");
    assert_string_equal(line_event(all, 3), "done");
    assert_string_equal(json_string_value(json_object_get(json_object_get(json_array_get(all, 3), "data"), "source")),
                        "poll");
    json_decref(all);
    /* Once the turn is over nothing is polled. */
    rl_chat_tick(f->chat, rl_clock_mono_ms() + 5000);
    assert_int_equal(f->history_calls, 1);
    stop(f);
}

static void test_a_deleted_session_ends_the_turn(void **state)
{
    fixture_t *f = start(RL_CHAT_SEND, 1, 0, 0);

    send_one(f);
    event(f, "session_deleted", "3", "{\"session_id\":\"ses_2\"}");
    assert_null(rl_chat_gone(f->chat));
    event(f, "session_deleted", "4", "{\"session_id\":\"ses_1\"}");
    assert_non_null(rl_chat_gone(f->chat));
    assert_int_equal(rl_chat_outcome(f->chat), RL_CHAT_GONE);
    assert_false(rl_chat_turn_active(f->chat));
    stop(f);
}

static void test_watch_shows_every_event_up_to_its_count(void **state)
{
    fixture_t *f = start(RL_CHAT_WATCH, 1, 0, 2);
    json_t *all;

    event(f, "hello", NULL, "{\"heartbeat_ms\": 1000}");
    event(f, "session_created", "1", "{\"session_id\":\"ses_9\"}");
    event(f, "session_renamed", "2", "{\"session_id\":\"ses_9\"}");
    assert_int_equal(rl_chat_count(f->chat), 2);
    assert_int_equal(f->heartbeat, 1000);
    all = lines(f);
    assert_int_equal(json_array_size(all), 2);
    assert_null(json_object_get(json_array_get(all, 0), "id"));
    assert_string_equal(json_string_value(json_object_get(json_array_get(all, 1), "id")), "1");
    json_decref(all);
    stop(f);
}

static void test_the_screen_of_a_turn(void **state)
{
    fixture_t *f = start(RL_CHAT_CHAT, 0, 1, 0);

    rl_chat_prompt(f->chat);
    send_one(f);
    event(f, "message_delta", "1", "{\"interaction_id\":\"int_1\",\"delta\":\"one \"}");
    event(f, "message_delta", "2", "{\"interaction_id\":\"int_1\",\"delta\":\"two\"}");
    event(f, "task_created", "3",
          "{\"interaction_id\":\"int_1\",\"task_id\":\"t\",\"name\":\"deploy\",\"status_label\":\"rsync\"}");
    rl_chat_cancelled(f->chat);
    assert_int_equal(rl_chat_outcome(f->chat), RL_CHAT_CANCELLED);
    /* Cancelled from the chat: the reply is followed to its stored end, which the screen then matches. */
    assert_true(rl_chat_turn_active(f->chat));
    event(f, "message_delta", "4", "{\"interaction_id\":\"int_1\",\"delta\":\" three\"}");
    event(f, "message_finalized", "5",
          "{\"interaction_id\":\"int_1\",\"role\":\"agent\",\"message_id\":\"msg_2\","
          "\"text\":\"one two three [cancelled]\",\"finish_reason\":null}");
    assert_false(rl_chat_turn_active(f->chat));
    assert_int_equal(rl_chat_outcome(f->chat), RL_CHAT_CANCELLED);
    assert_string_equal(out(f), "you> agent> one two\n  ▶ task deploy started: rsync\nagent>  three [cancelled]\n"
                                "■ turn cancelled\nyou> ");
    stop(f);
}

static void test_a_cancelled_reply_is_followed_for_a_while_only(void **state)
{
    fixture_t *f = start(RL_CHAT_CHAT, 0, 1, 0);

    send_one(f);
    event(f, "message_delta", "1", "{\"interaction_id\":\"int_1\",\"delta\":\"one\"}");
    rl_chat_cancelled(f->chat);
    rl_chat_tick(f->chat, rl_clock_mono_ms() + 1000);
    assert_true(rl_chat_turn_active(f->chat));
    /* The rest goes on the same line: the stored reply's text, as it was stored. */
    event(f, "message_delta", "2", "{\"interaction_id\":\"int_1\",\"delta\":\" two\"}");
    /* The agent never stops: the chat stops following and says so. */
    rl_chat_tick(f->chat, rl_clock_mono_ms() + RL_CHAT_CANCEL_FOLLOW_MS + 1000);
    assert_false(rl_chat_turn_active(f->chat));
    assert_non_null(strstr(out(f), "agent> one two\n■ turn cancelled (the agent has not stopped yet"));
    stop(f);
    /* A second Ctrl-C stops following at once; send never follows. */
    f = start(RL_CHAT_CHAT, 0, 1, 0);
    send_one(f);
    rl_chat_cancelled(f->chat);
    rl_chat_cancelled(f->chat);
    assert_false(rl_chat_turn_active(f->chat));
    assert_string_equal(out(f), "■ turn cancelled\n");
    stop(f);
    f = start(RL_CHAT_SEND, 0, 0, 0);
    send_one(f);
    rl_chat_cancelled(f->chat);
    assert_false(rl_chat_turn_active(f->chat));
    assert_int_equal(rl_chat_outcome(f->chat), RL_CHAT_CANCELLED);
    stop(f);
}

static void test_a_reply_s_lines_are_labelled_once(void **state)
{
    fixture_t *f = start(RL_CHAT_CHAT, 0, 1, 0);

    send_one(f);
    event(f, "message_delta", "1", "{\"interaction_id\":\"int_1\",\"delta\":\"ls:\\n\"}");
    event(f, "message_delta", "2", "{\"interaction_id\":\"int_1\",\"delta\":\"a\\nb\\n\"}");
    event(f, "task_created", "3", "{\"interaction_id\":\"int_1\",\"task_id\":\"t\",\"name\":\"shell\"}");
    event(f, "message_delta", "4", "{\"interaction_id\":\"int_1\",\"delta\":\"done\"}");
    /* An output's lines go on under the label; after a task line, the reply is labelled again. */
    assert_string_equal(out(f), "agent> ls:\na\nb\n  ▶ task shell started\nagent> done");
    stop(f);
}

static void test_a_grant_s_answer_is_one_line(void **state)
{
    fixture_t *f = start(RL_CHAT_CHAT, 0, 1, 0);

    send_one(f);
    event(f, "approval_resolved", "1",
          "{\"approval_id\":\"apr_1\",\"session_id\":\"ses_1\",\"interaction_id\":\"int_1\","
          "\"decision\":\"approve_always\",\"auto_resolved\":true,\"title\":\"Run a command\","
          "\"command\":\"ls -la\"}");
    assert_string_equal(out(f), "✓ approved by your \"always approve\" grant: ls -la\n");
    /* A decision made elsewhere was shown where it was made: nothing here. */
    event(f, "approval_resolved", "2",
          "{\"approval_id\":\"apr_2\",\"session_id\":\"ses_1\",\"interaction_id\":\"int_1\","
          "\"decision\":\"approve\"}");
    assert_string_equal(out(f), "✓ approved by your \"always approve\" grant: ls -la\n");
    assert_int_equal(json_array_size(f->decisions), 0);
    stop(f);
}

static void test_a_finished_task_shows_its_status_not_its_last_progress(void **state)
{
    fixture_t *f = start(RL_CHAT_SEND, 0, 0, 0);

    send_one(f);
    event(f, "task_created", "1",
          "{\"interaction_id\":\"int_1\",\"task_id\":\"t\",\"name\":\"shell\",\"status_label\":\"deciding\"}");
    event(f, "task_progress", "2", "{\"interaction_id\":\"int_1\",\"task_id\":\"t\",\"status_label\":\"halfway\"}");
    /* The relay repeats the last label on the end event: it is not the end's own. */
    event(f, "task_completed", "3",
          "{\"interaction_id\":\"int_1\",\"task_id\":\"t\",\"name\":\"shell\",\"status_label\":\"halfway\"}");
    /* An end that brings its own label shows it. */
    event(f, "task_created", "4", "{\"interaction_id\":\"int_1\",\"task_id\":\"u\",\"name\":\"copy\"}");
    event(f, "task_failed", "5",
          "{\"interaction_id\":\"int_1\",\"task_id\":\"u\",\"name\":\"copy\",\"status_label\":\"disk full\"}");
    assert_string_equal(out(f), "  ▶ task shell started: deciding\n  ✓ task shell completed\n"
                                "  ▶ task copy started\n  ✗ task copy failed: disk full\n");
    stop(f);
}

static void test_tool_calls_show_their_diffs_plans_and_output(void **state)
{
    fixture_t *f = start(RL_CHAT_CHAT, 0, 1, 0);
    static const char diff[] = "{\"type\":\"diff\",\"path\":\"/w/a.py\",\"old_text\":\"x = 1\\n\","
                               "\"new_text\":\"x = 2\\n\"}";

    send_one(f);
    event(f, "task_created", "1",
          "{\"interaction_id\":\"int_1\",\"task_id\":\"p\",\"kind\":\"plan\",\"status_label\":\"Plan\"}");
    event(f, "task_progress", "2",
          "{\"interaction_id\":\"int_1\",\"task_id\":\"p\",\"kind\":\"plan\",\"partial_result\":{\"entries\":["
          "{\"content\":\"Read a.py\",\"priority\":\"low\",\"status\":\"completed\"},"
          "{\"content\":\"Edit a.py\",\"priority\":\"high\",\"status\":\"in_progress\"},"
          "{\"content\":\"Test\",\"priority\":\"low\",\"status\":\"pending\"}]}}");
    assert_non_null(strstr(out(f), "  plan\n    [x] Read a.py\n    [~] Edit a.py (high)\n    [ ] Test\n"));
    event(f, "task_created", "3",
          "{\"interaction_id\":\"int_1\",\"task_id\":\"e\",\"kind\":\"edit\",\"status_label\":\"Edit a.py\","
          "\"args\":{\"path\":\"/w/a.py\"}}");
    assert_non_null(strstr(out(f), "  ▶ task edit started: Edit a.py\n    args {\"path\":\"/w/a.py\"}\n"));
    event(f, "task_completed", "4",
          "{\"interaction_id\":\"int_1\",\"task_id\":\"e\",\"kind\":\"edit\",\"status_label\":\"Edit a.py\","
          "\"name\":\"Edit a.py\",\"result\":{\"content\":[%s]}}",
          diff);
    assert_non_null(strstr(out(f), "  ✓ task Edit a.py completed\n    --- a/w/a.py\n    +++ b/w/a.py\n"
                                   "    @@ -1,1 +1,1 @@\n    -x = 1\n    +x = 2\n"));
    event(f, "task_created", "5", "{\"interaction_id\":\"int_1\",\"task_id\":\"r\",\"kind\":\"execute\"}");
    event(f, "task_failed", "6",
          "{\"interaction_id\":\"int_1\",\"task_id\":\"r\",\"kind\":\"execute\",\"result\":{\"content\":["
          "{\"type\":\"terminal\",\"terminal_id\":\"t\",\"output\":\"1 failed\",\"exit_code\":1}]},"
          "\"error\":{\"message\":\"exit status 1\"}}");
    assert_non_null(strstr(out(f), "  ✗ task execute failed\n      1 failed\n    exit status 1\n"
                                   "    error: exit status 1\n"));
    /* The edit's diff is in the approval it asks for. */
    event(f, "approval_requested", "7",
          "{\"approval_id\":\"apr_1\",\"session_id\":\"ses_1\",\"title\":\"Edit a.py\",\"content\":[%s]}", diff);
    assert_non_null(strstr(out(f), "Edit a.py\n  --- a/w/a.py\n  +++ b/w/a.py\n  @@ -1,1 +1,1 @@\n"));
    stop(f);
}

static void test_one_key_answers_and_says_so(void **state)
{
    fixture_t *f = start(RL_CHAT_CHAT, 0, 1, 0);

    rl_chat_set_single_key(f->chat, 1);
    send_one(f);
    event(f, "approval_requested", "1", "{\"approval_id\":\"apr_1\",\"session_id\":\"ses_1\",\"title\":\"Run\"}");
    assert_non_null(strstr(out(f), "one key answers, no Enter needed\nanswer> "));
    assert_int_equal(rl_chat_answer(f->chat, "d"), 1);
    /* A denial reads as one. */
    assert_non_null(strstr(out(f), "answer> \n✗ denied\n"));
    assert_null(strstr(out(f), "✓"));
    stop(f);
    f = start(RL_CHAT_CHAT, 0, 1, 0);
    send_one(f);
    event(f, "approval_requested", "1", "{\"approval_id\":\"apr_1\",\"session_id\":\"ses_1\",\"title\":\"Run\"}");
    assert_non_null(strstr(out(f), "type the letter, then Enter\nanswer> "));
    stop(f);
}

/* A turn that began with a tool call leaves an empty placeholder ended as a tool call: not shown. */
static void test_an_empty_tool_call_end_is_hidden(void **state)
{
    static const struct {
        const char *json;
        int hidden;
    } cases[] = {
        {"{\"role\":\"agent\",\"text\":\" \",\"finish_reason\":\"tool_call\"}", 1},
        {"{\"role\":\"agent\",\"text\":\"\",\"finish_reason\":\"tool_call\"}", 1},
        {"{\"role\":\"agent\",\"text\":\"Reading.\",\"finish_reason\":\"tool_call\"}", 0},
        {"{\"role\":\"agent\",\"text\":\" \",\"finish_reason\":\"stop\"}", 0},
        {"{\"role\":\"agent\",\"text\":\" \",\"finish_reason\":null}", 0},
        {"{\"role\":\"user\",\"text\":\" \",\"finish_reason\":\"tool_call\"}", 0},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *message = json_loads(cases[i].json, 0, NULL);
        char *printed = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&printed, &len);
        rl_term_t term = {0};

        assert_non_null(message);
        assert_int_equal(rl_chat_message_is_hidden(message), cases[i].hidden);
        rl_chat_print_message(out, &term, message);
        fclose(out);
        assert_int_equal(len == 0, cases[i].hidden);
        free(printed);
        json_decref(message);
    }
}

/* Issue 40, item 6: the text after a tool call or an approval is a new message below it, and the chat follows. */
static void test_a_turn_goes_on_in_its_next_message(void **state)
{
    fixture_t *f = start(RL_CHAT_CHAT, 0, 1, 0);

    (void)state;
    send_one(f);
    event(f, "message_added", "1",
          "{\"interaction_id\":\"int_1\",\"role\":\"agent\",\"message_id\":\"msg_a\",\"text\":\" \"}");
    event(f, "message_delta", "2", "{\"interaction_id\":\"int_1\",\"message_id\":\"msg_a\",\"delta\":\"Reading.\"}");
    event(f, "task_created", "3", "{\"interaction_id\":\"int_1\",\"task_id\":\"t\",\"name\":\"read\"}");
    event(f, "message_finalized", "4",
          "{\"interaction_id\":\"int_1\",\"role\":\"agent\",\"message_id\":\"msg_a\",\"text\":\"Reading.\","
          "\"finish_reason\":\"tool_call\"}");
    /* Not the end of the turn: the next message is its text after the tool call. */
    assert_true(rl_chat_turn_active(f->chat));
    event(f, "message_added", "5",
          "{\"interaction_id\":\"int_1\",\"role\":\"agent\",\"message_id\":\"msg_b\",\"text\":\" \"}");
    event(f, "message_delta", "6", "{\"interaction_id\":\"int_1\",\"message_id\":\"msg_b\",\"delta\":\"Done.\"}");
    rl_chat_tick(f->chat, rl_clock_mono_ms() + RL_CHAT_NEXT_MESSAGE_MS + 1000);
    assert_true(rl_chat_turn_active(f->chat));
    event(f, "message_finalized", "7",
          "{\"interaction_id\":\"int_1\",\"role\":\"agent\",\"message_id\":\"msg_b\",\"text\":\"Done.\","
          "\"finish_reason\":\"stop\"}");
    assert_false(rl_chat_turn_active(f->chat));
    assert_int_equal(rl_chat_outcome(f->chat), RL_CHAT_COMPLETE);
    assert_string_equal(out(f), "agent> Reading.\n  ▶ task read started\nagent> Done.\nyou> ");
    stop(f);

    /* Another bridge may end a whole turn as a tool call: with no next message in time, that was its end. */
    f = start(RL_CHAT_SEND, 1, 0, 0);
    send_one(f);
    event(f, "message_finalized", "1",
          "{\"interaction_id\":\"int_1\",\"role\":\"agent\",\"message_id\":\"msg_a\",\"text\":\"Calling.\","
          "\"finish_reason\":\"tool_call\"}");
    rl_chat_tick(f->chat, rl_clock_mono_ms() + 1000);
    assert_true(rl_chat_turn_active(f->chat));
    rl_chat_tick(f->chat, rl_clock_mono_ms() + RL_CHAT_NEXT_MESSAGE_MS + 1000);
    assert_false(rl_chat_turn_active(f->chat));
    assert_int_equal(rl_chat_outcome(f->chat), RL_CHAT_COMPLETE);
    {
        json_t *all = lines(f);
        assert_string_equal(line_event(all, json_array_size(all) - 1), "done");
        assert_string_equal(json_string_value(json_object_get(
                                json_object_get(json_array_get(all, json_array_size(all) - 1), "data"), "text")),
                            "Calling.");
        json_decref(all);
    }
    stop(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_turn_streams_and_ends_complete),
        cmocka_unit_test(test_a_reply_without_finish_reason_is_incomplete),
        cmocka_unit_test(test_approvals_are_deduplicated_across_snapshot_and_stream),
        cmocka_unit_test(test_approve_for_this_session_answers_the_next_request),
        cmocka_unit_test(test_always_approve_is_approve_always_with_scope_tool),
        cmocka_unit_test(test_resync_reads_the_snapshot_and_polls_the_turn),
        cmocka_unit_test(test_a_deleted_session_ends_the_turn),
        cmocka_unit_test(test_watch_shows_every_event_up_to_its_count),
        cmocka_unit_test(test_a_cancelled_reply_is_followed_for_a_while_only),
        cmocka_unit_test(test_a_grant_s_answer_is_one_line),
        cmocka_unit_test(test_a_reply_s_lines_are_labelled_once),
        cmocka_unit_test(test_the_screen_of_a_turn),
        cmocka_unit_test(test_a_finished_task_shows_its_status_not_its_last_progress),
        cmocka_unit_test(test_one_key_answers_and_says_so),
        cmocka_unit_test(test_tool_calls_show_their_diffs_plans_and_output),
        cmocka_unit_test(test_an_empty_tool_call_end_is_hidden),
        cmocka_unit_test(test_a_turn_goes_on_in_its_next_message),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
