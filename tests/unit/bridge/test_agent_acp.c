/*
 * The acp adapter's handling of what an agent reports (bridge/agent_acp.c),
 * included here to reach its statics: each session/update kind, a
 * permission request and its answers, the end of a prompt, checked as the
 * bridge calls they become. The loop's services are stubs that record.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "../../../src/bridge/agent_acp.c"
#include "../../../src/bridge/acp_fetch.c"
#include "../../../src/bridge/acp_files.c"
#include "../../../src/bridge/acp_perm.c"
#include "../../../src/bridge/acp_rpc.c"
#include "../../../src/bridge/acp_session.c"
#include "../../../src/bridge/acp_tasks.c"
#include "../../../src/bridge/acp_list.c"
#include "../../../src/bridge/acp_steer.c"
#include "../../../src/bridge/child.c"

/* ---- the loop's services, recorded ---------------------------------------------------------------- */

static json_t *calls; /* [{"call": "line"|"text"|"break"|"finish", ...}] */

void rl_bridge_watch(rl_bridge_t *bridge, int fd, short events, rl_bridge_fd_cb cb, void *user)
{
    (void)bridge, (void)fd, (void)events, (void)cb, (void)user;
}

void rl_bridge_unwatch(rl_bridge_t *bridge, int fd)
{
    (void)bridge, (void)fd;
}

void rl_bridge_text(rl_bridge_t *bridge, rl_turn_t *turn, const char *bytes, size_t len)
{
    (void)bridge, (void)turn;
    json_array_append_new(calls, json_pack("{s:s, s:s%}", "call", "text", "text", bytes, len));
}

void rl_bridge_finish(rl_bridge_t *bridge, rl_turn_t *turn, const char *finish_reason, json_t *usage,
                      const char *error_text)
{
    (void)bridge, (void)turn;
    json_array_append_new(calls, json_pack("{s:s, s:s?, s:O?, s:s?}", "call", "finish", "finish_reason", finish_reason,
                                           "usage", usage, "error", error_text));
}

void rl_bridge_break(rl_bridge_t *bridge, rl_turn_t *turn)
{
    (void)bridge, (void)turn;
    json_array_append_new(calls, json_pack("{s:s}", "call", "break"));
}

rl_jobs_t *rl_bridge_jobs(rl_bridge_t *bridge)
{
    (void)bridge;
    return NULL;
}

const char *rl_bridge_cwd(const rl_bridge_t *bridge)
{
    (void)bridge;
    return NULL;
}

const char *rl_bridge_session_cwd(rl_bridge_t *bridge, const char *session_id)
{
    (void)bridge;
    (void)session_id;
    return NULL;
}

int rl_bridge_project_folder(rl_bridge_t *bridge, const char *project_id, char *out)
{
    (void)bridge;
    (void)project_id;
    (void)out;
    return 1;
}

void rl_bridge_agent_line(rl_bridge_t *bridge, rl_agent_line_t *line)
{
    (void)bridge;
    json_object_set_new(line->root, "call", json_string("line"));
    json_array_append_new(calls, line->root);
}

void rl_bridge_fail(rl_bridge_t *bridge, const char *why)
{
    (void)bridge;
    fail_msg("rl_bridge_fail: %s", why);
}

void rl_bridge_child_signals(void)
{
}

/* Session states and request answers: recorded apart from calls, which the tests count. */
static json_t *states;

void rl_bridge_state(rl_bridge_t *bridge, const char *session_id, json_t *fields)
{
    (void)bridge;
    if (states == NULL)
        states = json_array();
    json_array_append_new(states, json_pack("{s:s, s:O}", "session_id", session_id, "fields", fields));
}

void rl_bridge_answer(rl_bridge_t *bridge, const char *type, json_t *req_id, const char *device_id, json_t *answer)
{
    (void)bridge;
    if (states == NULL)
        states = json_array();
    json_array_append_new(states, json_pack("{s:s, s:O, s:s?, s:O}", "answer", type, "req_id", req_id, "device_id",
                                            device_id, "body", answer));
}

/* Files the agent touched: recorded apart from calls, which the tests count. */
static json_t *tool_files;

void rl_bridge_tool_file(rl_bridge_t *bridge, const char *session_id, const char *tool, const char *path)
{
    (void)bridge;
    if (tool_files == NULL)
        tool_files = json_array();
    json_array_append_new(tool_files,
                          json_pack("{s:s, s:s, s:s}", "session_id", session_id, "tool", tool, "path", path));
}

/* ---- a fixture: an agent with one session and one running prompt ------------------------------------ */

typedef struct fixture {
    struct rl_agent *agent;
    session_t *session;
    prompt_t *prompt;
    int out[2]; /* what the adapter writes to the agent: read from out[0] */
} fixture_t;

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof(*f));
    json_t *message = json_pack("{s:s}", "text", "hello");

    assert_int_equal(pipe2(f->out, O_NONBLOCK), 0);
    f->agent = calloc(1, sizeof(*f->agent));
    f->agent->command = strdup("true");
    f->agent->child = new_child(f->agent);
    /* The agent's stdin is the fixture's pipe: no process runs. */
    f->agent->child->in_fd = f->out[1];
    f->agent->initialized = 1;
    f->session = calloc(1, sizeof(*f->session));
    snprintf(f->session->relay_id, sizeof(f->session->relay_id), "ses_1");
    f->session->acp_id = strdup("acp_1");
    f->session->state = SESSION_READY;
    f->agent->sessions = f->session;
    f->prompt = calloc(1, sizeof(*f->prompt));
    f->prompt->turn = rl_turn_new("ses_1", "int_1");
    rl_buf_init(&f->prompt->thought, RL_ACP_THOUGHT_MAX + 4);
    f->prompt->message = message;
    f->session->queue = f->prompt;
    f->session->running = 1;
    calls = json_array();
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;

    while (f->session->queue != NULL)
        rl_acp__prompt_free(f->agent, f->session, f->session->queue);
    while (f->agent->requests != NULL) {
        request_t *r = f->agent->requests;
        f->agent->requests = r->next;
        free(r);
    }
    free(f->session->acp_id);
    free(f->session);
    json_decref(f->agent->commands);
    free(f->agent->mode);
    f->agent->child->in_fd = -1; /* the pipe is the fixture's to close */
    rl_child_free(f->agent->child);
    free(f->agent->command);
    free(f->agent);
    close(f->out[0]);
    close(f->out[1]);
    json_decref(calls);
    free(f);
    return 0;
}

static void update(fixture_t *f, const char *json)
{
    json_error_t err;
    json_t *u = json_loads(json, 0, &err);

    if (u == NULL)
        fail_msg("bad test JSON: %s", err.text);
    json_t *params = json_pack("{s:s, s:o}", "sessionId", "acp_1", "update", u);
    rl_acp__on_update(f->agent, params);
    json_decref(params);
}

/* The recorded calls, as compact JSON without the addressing every line carries, then forgotten. */
static char *taken(void)
{
    json_t *item;
    size_t i;
    char *text;

    json_array_foreach(calls, i, item)
    {
        json_object_del(item, "session_id");
        json_object_del(item, "interaction_id");
    }
    text = json_dumps(calls, JSON_COMPACT | JSON_SORT_KEYS);
    json_array_clear(calls);
    return text;
}

static void expect_calls(const char *expected)
{
    json_t *want = json_loads(expected, 0, NULL);
    char *want_text, *got;

    assert_non_null(want);
    want_text = json_dumps(want, JSON_COMPACT | JSON_SORT_KEYS);
    got = taken();
    assert_string_equal(got, want_text);
    free(got);
    free(want_text);
    json_decref(want);
}

/* The next message the adapter wrote to the agent. */
static json_t *written(fixture_t *f)
{
    char buf[8192];
    ssize_t n = read(f->out[0], buf, sizeof(buf) - 1);

    assert_true(n > 0);
    buf[n] = '\0';
    assert_non_null(strchr(buf, '\n'));
    return json_loads(buf, JSON_DISABLE_EOF_CHECK, NULL);
}

/* ---- the tests ------------------------------------------------------------------------------------- */

static void test_text_and_ignored_updates(void **state)
{
    fixture_t *f = *state;

    update(f, "{\"sessionUpdate\":\"agent_message_chunk\",\"content\":{\"type\":\"text\",\"text\":\"hi \"}}");
    update(f, "{\"sessionUpdate\":\"user_message_chunk\",\"content\":{\"type\":\"text\",\"text\":\"echo\"}}");
    update(f, "{\"sessionUpdate\":\"usage_update\",\"used\":1,\"size\":2}");
    update(f, "{\"sessionUpdate\":\"something_new\"}");
    update(f, "{\"sessionUpdate\":\"agent_message_chunk\",\"content\":{\"type\":\"image\",\"data\":\"AA==\"}}");
    expect_calls("[{\"call\":\"text\",\"text\":\"hi \"}]");
    /* while a session loads, its replayed history is not news */
    f->session->loading = 1;
    update(f, "{\"sessionUpdate\":\"agent_message_chunk\",\"content\":{\"type\":\"text\",\"text\":\"old\"}}");
    expect_calls("[]");
}

static void test_a_tool_call_and_its_updates(void **state)
{
    fixture_t *f = *state;

    update(f, "{\"sessionUpdate\":\"tool_call\",\"toolCallId\":\"c1\",\"title\":\"Run ls\",\"kind\":\"execute\","
              "\"status\":\"pending\",\"rawInput\":{\"command\":\"ls\"}}");
    expect_calls("[{\"call\":\"break\"},"
                 "{\"call\":\"line\",\"type\":\"task_start\",\"task_id\":\"c1\",\"kind\":\"execute\","
                 "\"status_label\":\"Run ls\",\"name\":\"Run ls\",\"args\":{\"command\":\"ls\"}}]");
    update(f, "{\"sessionUpdate\":\"tool_call_update\",\"toolCallId\":\"c1\",\"status\":\"in_progress\","
              "\"content\":[{\"type\":\"content\",\"content\":{\"type\":\"text\",\"text\":\"a b\"}}]}");
    expect_calls("[{\"call\":\"line\",\"type\":\"task_progress\",\"task_id\":\"c1\",\"status_label\":\"Run ls\","
                 "\"partial_result\":{\"content\":[{\"type\":\"text\",\"text\":\"a b\"}],\"locations\":[]}}]");
    /* an update that says nothing new (Claude Code's _meta-only one) is no call */
    update(f, "{\"sessionUpdate\":\"tool_call_update\",\"toolCallId\":\"c1\",\"_meta\":{\"x\":1}}");
    expect_calls("[]");
    update(f, "{\"sessionUpdate\":\"tool_call_update\",\"toolCallId\":\"c1\",\"status\":\"completed\","
              "\"rawOutput\":{\"exit\":0}}");
    expect_calls("[{\"call\":\"line\",\"type\":\"task_finish\",\"task_id\":\"c1\",\"status\":\"completed\","
                 "\"status_label\":\"Run ls\",\"name\":\"Run ls\",\"result\":{\"content\":[{\"type\":\"text\","
                 "\"text\":\"a b\"}],\"locations\":[],\"raw_output\":{\"exit\":0}}}]");
    /* after its end, a call's updates are not news */
    update(f, "{\"sessionUpdate\":\"tool_call_update\",\"toolCallId\":\"c1\",\"status\":\"failed\"}");
    expect_calls("[]");
    /* a failure carries its text as the error */
    update(f, "{\"sessionUpdate\":\"tool_call\",\"toolCallId\":\"c2\",\"title\":\"Read\",\"kind\":\"read\","
              "\"rawInput\":\"/etc\"}");
    update(f, "{\"sessionUpdate\":\"tool_call_update\",\"toolCallId\":\"c2\",\"status\":\"failed\","
              "\"content\":[{\"type\":\"content\",\"content\":{\"type\":\"text\",\"text\":\"denied\"}}]}");
    expect_calls("[{\"call\":\"break\"},"
                 "{\"call\":\"line\",\"type\":\"task_start\",\"task_id\":\"c2\",\"kind\":\"read\","
                 "\"status_label\":\"Read\",\"name\":\"Read\",\"args\":{\"input\":\"/etc\"}},"
                 "{\"call\":\"line\",\"type\":\"task_finish\",\"task_id\":\"c2\",\"status\":\"failed\","
                 "\"status_label\":\"Read\",\"name\":\"Read\",\"error\":{\"message\":\"denied\"},"
                 "\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"denied\"}],\"locations\":[]}}]");
}

static void test_a_call_announced_before_its_input_waits_for_it(void **state)
{
    fixture_t *f = *state;

    update(f, "{\"sessionUpdate\":\"tool_call\",\"toolCallId\":\"t1\",\"title\":\"Write\",\"kind\":\"edit\","
              "\"status\":\"pending\",\"rawInput\":{},\"content\":[]}");
    expect_calls("[{\"call\":\"break\"}]");
    update(f, "{\"sessionUpdate\":\"tool_call_update\",\"toolCallId\":\"t1\",\"title\":\"Write a.txt\","
              "\"rawInput\":{\"file_path\":\"/w/a.txt\"},\"content\":[{\"type\":\"diff\",\"path\":\"/w/a.txt\","
              "\"newText\":\"x\"}]}");
    expect_calls("[{\"call\":\"line\",\"type\":\"task_start\",\"task_id\":\"t1\",\"kind\":\"edit\","
                 "\"status_label\":\"Write a.txt\",\"name\":\"Write a.txt\",\"args\":{\"file_path\":\"/w/a.txt\"}},"
                 "{\"call\":\"line\",\"type\":\"task_progress\",\"task_id\":\"t1\",\"status_label\":\"Write a.txt\","
                 "\"partial_result\":{\"content\":[{\"type\":\"diff\",\"path\":\"/w/a.txt\",\"old_text\":null,"
                 "\"new_text\":\"x\"}],\"locations\":[]}}]");
}

static void test_plans_thoughts_commands_and_mode(void **state)
{
    fixture_t *f = *state;

    update(f, "{\"sessionUpdate\":\"plan\",\"entries\":[{\"content\":\"a\",\"priority\":\"high\","
              "\"status\":\"pending\"}]}");
    update(f, "{\"sessionUpdate\":\"plan\",\"entries\":[{\"content\":\"a\",\"priority\":\"high\","
              "\"status\":\"completed\"}]}");
    expect_calls("[{\"call\":\"break\"},"
                 "{\"call\":\"line\",\"type\":\"task_start\",\"task_id\":\"plan_int_1\",\"kind\":\"plan\","
                 "\"status_label\":\"Plan\"},"
                 "{\"call\":\"line\",\"type\":\"task_progress\",\"task_id\":\"plan_int_1\",\"partial_result\":"
                 "{\"entries\":[{\"content\":\"a\",\"priority\":\"high\",\"status\":\"pending\"}]}},"
                 "{\"call\":\"break\"},"
                 "{\"call\":\"line\",\"type\":\"task_progress\",\"task_id\":\"plan_int_1\",\"partial_result\":"
                 "{\"entries\":[{\"content\":\"a\",\"priority\":\"high\",\"status\":\"completed\"}]}}]");
    update(f, "{\"sessionUpdate\":\"agent_thought_chunk\",\"content\":{\"type\":\"text\",\"text\":\"hmm \"}}");
    update(f, "{\"sessionUpdate\":\"agent_thought_chunk\",\"content\":{\"type\":\"text\",\"text\":\"ok\"}}");
    update(f, "{\"sessionUpdate\":\"agent_message_chunk\",\"content\":{\"type\":\"text\",\"text\":\"done\"}}");
    /* the second chunk came within 500 ms of the first: it waits for the finish */
    expect_calls("[{\"call\":\"break\"},"
                 "{\"call\":\"line\",\"type\":\"task_start\",\"task_id\":\"think_int_1_1\",\"kind\":\"think\","
                 "\"status_label\":\"Thinking\"},"
                 "{\"call\":\"line\",\"type\":\"task_progress\",\"task_id\":\"think_int_1_1\","
                 "\"partial_result\":{\"text\":\"hmm \"}},"
                 "{\"call\":\"line\",\"type\":\"task_finish\",\"task_id\":\"think_int_1_1\",\"status\":\"completed\","
                 "\"result\":{\"text\":\"hmm ok\"}},"
                 "{\"call\":\"text\",\"text\":\"done\"}]");
    update(f, "{\"sessionUpdate\":\"available_commands_update\",\"availableCommands\":[{\"name\":\"/web\","
              "\"description\":\"Search\",\"input\":{\"hint\":\"query\"}},{\"name\":\"test\",\"description\":\"Run\","
              "\"input\":null}]}");
    update(f, "{\"sessionUpdate\":\"current_mode_update\",\"currentModeId\":\"code\"}");
    expect_calls("[{\"call\":\"line\",\"type\":\"manifest\",\"tools\":[],\"agent\":{\"name\":\"acp\"},"
                 "\"commands\":[{\"name\":\"web\",\"description\":\"Search\",\"input_hint\":\"query\"},"
                 "{\"name\":\"test\",\"description\":\"Run\"}]},"
                 "{\"call\":\"line\",\"type\":\"manifest\",\"tools\":[],\"agent\":{\"name\":\"acp\",\"mode\":\"code\"},"
                 "\"commands\":[{\"name\":\"web\",\"description\":\"Search\",\"input_hint\":\"query\"},"
                 "{\"name\":\"test\",\"description\":\"Run\"}]}]");
    /* the same mode again is no news */
    update(f, "{\"sessionUpdate\":\"current_mode_update\",\"currentModeId\":\"code\"}");
    expect_calls("[]");
    /* the plan completes with the turn */
    rl_acp__close_items(f->agent, f->prompt, "completed", NULL);
    expect_calls("[{\"call\":\"line\",\"type\":\"task_finish\",\"task_id\":\"plan_int_1\",\"status\":\"completed\","
                 "\"result\":{\"entries\":[{\"content\":\"a\",\"priority\":\"high\",\"status\":\"completed\"}]}}]");
}

static void answer_with(fixture_t *f, const char *decision_line, const char *expected_outcome)
{
    json_t *params = json_loads("{\"sessionId\":\"acp_1\",\"toolCall\":{\"toolCallId\":\"c9\",\"title\":\"Edit a.c\","
                                "\"kind\":\"edit\",\"rawInput\":{\"file_path\":\"/w/a.c\"},\"content\":[{\"type\":"
                                "\"diff\",\"path\":\"/w/a.c\",\"oldText\":\"a\",\"newText\":\"b\"}]},\"options\":["
                                "{\"optionId\":\"ok\",\"name\":\"Allow\",\"kind\":\"allow_once\"},"
                                "{\"optionId\":\"always\",\"name\":\"Always\",\"kind\":\"allow_always\"},"
                                "{\"optionId\":\"no\",\"name\":\"Reject\",\"kind\":\"reject_once\"}]}",
                                0, NULL);
    json_t *id = json_integer(0), *line, *answer, *want;
    char text[256];

    rl_acp__on_permission(f->agent, id, params);
    json_decref(params);
    line = json_array_get(calls, json_array_size(calls) - 1);
    assert_string_equal(json_string_value(json_object_get(line, "type")), "approval_request");
    snprintf(text, sizeof(text), decision_line, json_string_value(json_object_get(line, "approval_id")));
    json_array_clear(calls);
    line = json_loads(text, 0, NULL);
    rl_acp__notify(f->agent, line);
    json_decref(line);
    answer = written(f);
    want = json_loads(expected_outcome, 0, NULL);
    assert_true(json_equal(json_object_get(json_object_get(answer, "result"), "outcome"), want));
    assert_int_equal(json_integer_value(json_object_get(answer, "id")), 0);
    assert_null(f->agent->permissions);
    json_decref(answer);
    json_decref(want);
    json_decref(id);
}

static void test_a_permission_request_and_each_answer(void **state)
{
    fixture_t *f = *state;
    json_t *params = json_loads("{\"sessionId\":\"acp_1\",\"toolCall\":{\"toolCallId\":\"c9\",\"title\":\"Edit a.c\","
                                "\"kind\":\"edit\",\"rawInput\":{\"file_path\":\"/w/a.c\"},\"content\":[{\"type\":"
                                "\"diff\",\"path\":\"/w/a.c\",\"oldText\":\"a\",\"newText\":\"b\"}]},\"options\":[]}",
                                0, NULL);
    json_t *id = json_string("r1"), *request, *answer, *decision;
    const char *id_text;
    char *content;

    rl_acp__on_permission(f->agent, id, params);
    json_decref(params);
    json_decref(id);
    /* a call never announced is created first, then the approval asked */
    request = json_array_get(calls, 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(calls, 1), "type")), "task_start");
    assert_string_equal(json_string_value(json_object_get(request, "type")), "approval_request");
    assert_string_equal(json_string_value(json_object_get(request, "action")), "edit");
    assert_string_equal(json_string_value(json_object_get(request, "severity")), "medium");
    assert_string_equal(json_string_value(json_object_get(request, "title")), "Edit a.c");
    assert_string_equal(json_string_value(json_object_get(request, "message")), "The agent asks to edit /w/a.c");
    assert_string_equal(json_string_value(json_object_get(request, "command")), "/w/a.c");
    assert_string_equal(json_string_value(json_object_get(request, "tool_call_id")), "c9");
    id_text = json_string_value(json_object_get(request, "approval_id"));
    assert_int_equal(strncmp(id_text, "apr_", 4), 0);
    assert_int_equal(strlen(id_text), 36);
    assert_int_equal(strspn(id_text + 4, "0123456789abcdef"), 32);
    content = json_dumps(json_object_get(request, "content"), JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(content, "[{\"new_text\":\"b\",\"old_text\":\"a\",\"path\":\"/w/a.c\",\"type\":\"diff\"}]");
    free(content);
    /* no option offered at all: cancelled */
    decision = json_pack("{s:s, s:s, s:s}", "type", "approval", "approval_id",
                         json_string_value(json_object_get(request, "approval_id")), "decision", "allow-once");
    rl_acp__notify(f->agent, decision);
    json_decref(decision);
    answer = written(f);
    assert_string_equal(json_string_value(json_object_get(answer, "id")), "r1");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(json_object_get(answer, "result"), "outcome"), "outcome")),
        "cancelled");
    json_decref(answer);
    json_array_clear(calls);

    answer_with(f, "{\"type\":\"approval\",\"approval_id\":\"%s\",\"decision\":\"allow-once\"}",
                "{\"outcome\":\"selected\",\"optionId\":\"ok\"}");
    answer_with(f, "{\"type\":\"approval\",\"approval_id\":\"%s\",\"decision\":\"allow-always\"}",
                "{\"outcome\":\"selected\",\"optionId\":\"ok\"}");
    answer_with(f, "{\"type\":\"approval\",\"approval_id\":\"%s\",\"decision\":\"deny\"}",
                "{\"outcome\":\"selected\",\"optionId\":\"no\"}");
    answer_with(f, "{\"type\":\"approval_expired\",\"approval_id\":\"%s\"}",
                "{\"outcome\":\"selected\",\"optionId\":\"no\"}");
}

static void test_cancel_answers_permissions_and_the_stop_reason_ends_the_turn(void **state)
{
    fixture_t *f = *state;
    json_t *params = json_loads("{\"sessionId\":\"acp_1\",\"toolCall\":{\"toolCallId\":\"c5\",\"title\":\"Run\","
                                "\"kind\":\"execute\",\"rawInput\":{\"command\":\"make\"}},\"options\":["
                                "{\"optionId\":\"ok\",\"name\":\"Allow\",\"kind\":\"allow_once\"}]}",
                                0, NULL);
    json_t *id = json_integer(7), *msg;
    rl_jsonrpc_msg_t response;
    request_t *r = calloc(1, sizeof(*r));

    rl_acp__on_permission(f->agent, id, params);
    json_decref(params);
    json_decref(id);
    json_array_clear(calls);
    acp_cancel(f->agent, "ses_1", "int_1");
    msg = written(f); /* the permission, answered cancelled; then session/cancel */
    assert_int_equal(json_integer_value(json_object_get(msg, "id")), 7);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(json_object_get(msg, "result"), "outcome"), "outcome")),
        "cancelled");
    json_decref(msg);
    /* the prompt's answer: cancelled; the open call is cancelled with the turn */
    r->kind = REQ_PROMPT;
    r->session = f->session;
    r->prompt = f->prompt;
    memset(&response, 0, sizeof(response));
    response.kind = RL_JSONRPC_RESPONSE;
    response.root =
        json_loads("{\"stopReason\":\"cancelled\",\"usage\":{\"inputTokens\":3,\"outputTokens\":4}}", 0, NULL);
    response.result = response.root;
    rl_acp__on_prompted(f->agent, r, &response);
    json_decref(response.root);
    free(r);
    expect_calls("[{\"call\":\"line\",\"type\":\"task_finish\",\"task_id\":\"c5\",\"status\":\"cancelled\","
                 "\"status_label\":\"Run\",\"name\":\"Run\",\"result\":{\"content\":[],\"locations\":[]}},"
                 "{\"call\":\"finish\",\"error\":null,\"finish_reason\":\"cancelled\",\"usage\":{\"input_tokens\":3,"
                 "\"output_tokens\":4}}]");
    assert_null(f->session->queue);
    assert_int_equal(f->session->running, 0);
}

static prompt_t *queue_another(fixture_t *f, const char *interaction)
{
    prompt_t *p = calloc(1, sizeof(*p));

    p->turn = rl_turn_new("ses_1", interaction);
    p->message = json_pack("{s:s}", "text", "later");
    f->prompt->next = p;
    return p;
}

static void test_a_waiting_message_cancelled_ends_at_once(void **state)
{
    fixture_t *f = *state;

    queue_another(f, "int_2");
    acp_cancel(f->agent, "ses_1", "int_2");
    expect_calls("[{\"call\":\"finish\",\"finish_reason\":\"cancelled\",\"usage\":null,\"error\":null}]");
    assert_ptr_equal(f->session->queue, f->prompt);
    assert_null(f->prompt->next);
    assert_int_equal(f->prompt->cancelled, 0);
}

static void test_a_dead_agent_ends_the_running_reply_and_keeps_the_rest(void **state)
{
    fixture_t *f = *state;
    prompt_t *later = queue_another(f, "int_2");
    char *why;

    update(f, "{\"sessionUpdate\":\"tool_call\",\"toolCallId\":\"c1\",\"title\":\"Run\",\"kind\":\"execute\","
              "\"rawInput\":{\"command\":\"make\"}}");
    json_array_clear(calls);
    agent_gone(f->agent, "the agent exited with status 3");
    why = taken();
    assert_non_null(strstr(why, "\"status\":\"failed\""));
    assert_non_null(strstr(why, "\"finish_reason\":\"error\""));
    assert_non_null(strstr(why, "[the agent exited with status 3; relay-bridge restarts it: send the message again]"));
    free(why);
    /* the next message waits for the new process; its session is opened again then */
    assert_ptr_equal(f->session->queue, later);
    assert_int_equal(f->session->state, SESSION_CLOSED);
    assert_int_equal(f->session->running, 0);
}

static void test_an_agent_that_dies_before_initialize_fails_what_waits(void **state)
{
    fixture_t *f = *state;

    f->session->running = 0;
    f->session->state = SESSION_CLOSED;
    f->agent->initialized = 0;
    agent_gone(f->agent, "the agent exited with status 127");
    expect_calls("[{\"call\":\"finish\",\"finish_reason\":\"error\",\"usage\":null,\"error\":"
                 "\"[the agent could not start: the agent exited with status 127; see relay-bridge's log]\"}]");
    assert_null(f->session->queue);
}

static void test_an_encrypted_sessions_tool_task_has_no_name(void **state)
{
    fixture_t *f = *state;

    f->prompt->turn->encrypted = 1;
    update(f, "{\"sessionUpdate\":\"tool_call\",\"toolCallId\":\"c1\",\"title\":\"Run cat /home/a/plan.txt\","
              "\"kind\":\"execute\",\"rawInput\":{\"command\":\"cat /home/a/plan.txt\"}}");
    update(f, "{\"sessionUpdate\":\"tool_call_update\",\"toolCallId\":\"c1\",\"status\":\"completed\"}");
    /* The title is the label only, which the bridge seals; nothing names the task in clear. */
    expect_calls("[{\"call\":\"break\"},"
                 "{\"call\":\"line\",\"type\":\"task_start\",\"task_id\":\"c1\",\"kind\":\"execute\","
                 "\"status_label\":\"Run cat /home/a/plan.txt\",\"args\":{\"command\":\"cat /home/a/plan.txt\"}},"
                 "{\"call\":\"line\",\"type\":\"task_finish\",\"task_id\":\"c1\",\"status\":\"completed\","
                 "\"status_label\":\"Run cat /home/a/plan.txt\",\"result\":{\"content\":[],\"locations\":[]}}]");
}

static void reason_of(const char *error, const char *expected)
{
    rl_jsonrpc_msg_t msg = {0};
    char out[ERROR_MESSAGE_MAX + ERROR_DATA_MAX + 8];

    msg.error = json_loads(error, 0, NULL);
    assert_non_null(msg.error);
    error_reason(&msg, out, sizeof(out));
    assert_string_equal(out, expected);
    json_decref(msg.error);
}

static void test_a_failures_reason_is_its_message_and_data(void **state)
{
    char long_details[1501], expected[1600];

    (void)state;
    reason_of("{\"code\":-32603,\"message\":\"Internal error\",\"data\":{\"details\":\"Query closed\"}}",
              "Internal error (Query closed)");
    reason_of("{\"code\":-32603,\"message\":\"Internal error\",\"data\":\"no key\"}", "Internal error (no key)");
    reason_of("{\"code\":-32603,\"message\":\"Internal error\",\"data\":{\"code\":7}}",
              "Internal error ({\"code\":7})");
    reason_of("{\"code\":-32603,\"message\":\"Internal error\",\"data\":null}", "Internal error");
    reason_of("{\"code\":-32603,\"message\":\"Internal error\"}", "Internal error");
    /* Long details are cut at ERROR_DATA_MAX bytes. */
    memset(long_details, 'x', 1500);
    long_details[1500] = '\0';
    snprintf(expected, sizeof(expected), "{\"code\":1,\"message\":\"m\",\"data\":{\"details\":\"%s\"}}", long_details);
    {
        rl_jsonrpc_msg_t msg = {0};
        char out[ERROR_MESSAGE_MAX + ERROR_DATA_MAX + 8];
        msg.error = json_loads(expected, 0, NULL);
        error_reason(&msg, out, sizeof(out));
        assert_int_equal(strlen(out), strlen("m ()") + ERROR_DATA_MAX);
        json_decref(msg.error);
    }
}

static void test_the_stderr_tail_keeps_the_last_whole_lines(void **state)
{
    fixture_t *f = *state;
    char line[100], text[FAILURE_TEXT_MAX];
    int i;

    for (i = 0; i < 100; i++) {
        snprintf(line, sizeof(line), "line %03d of the agent's complaints, forty-odd bytes", i);
        tail_add(f->agent->child, line, strlen(line));
    }
    assert_true(f->agent->child->tail_len <= STDERR_TAIL);
    assert_int_equal(f->agent->child->err_tail[f->agent->child->tail_len - 1], '\n');
    assert_non_null(strstr(f->agent->child->err_tail, "line 099 of"));
    assert_null(strstr(f->agent->child->err_tail, "line 000 of"));
    /* Whole lines: it starts at the start of one. */
    assert_memory_equal(f->agent->child->err_tail, "line ", 5);
    rl_acp__failure_text(f->agent, "[the agent failed: x]", text, sizeof(text));
    {
        static const char head[] = "[the agent failed: x]\n\nThe agent's last lines on stderr:\nline ";
        assert_memory_equal(text, head, sizeof(head) - 1);
    }
    rl_acp__tail_reset(f->agent);
    rl_acp__failure_text(f->agent, "[the agent failed: y]", text, sizeof(text));
    assert_string_equal(text, "[the agent failed: y]");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_text_and_ignored_updates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_tool_call_and_its_updates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_call_announced_before_its_input_waits_for_it, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plans_thoughts_commands_and_mode, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_permission_request_and_each_answer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_answers_permissions_and_the_stop_reason_ends_the_turn, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_waiting_message_cancelled_ends_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_dead_agent_ends_the_running_reply_and_keeps_the_rest, setup, teardown),
        cmocka_unit_test_setup_teardown(test_an_agent_that_dies_before_initialize_fails_what_waits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_an_encrypted_sessions_tool_task_has_no_name, setup, teardown),
        cmocka_unit_test(test_a_failures_reason_is_its_message_and_data),
        cmocka_unit_test_setup_teardown(test_the_stderr_tail_keeps_the_last_whole_lines, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
