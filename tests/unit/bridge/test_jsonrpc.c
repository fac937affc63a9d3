/* JSON-RPC 2.0 lines of the acp adapter (bridge/jsonrpc.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "bridge/jsonrpc.h"

static int parse(const char *line, rl_jsonrpc_msg_t *msg, json_t **bad_id)
{
    char err[160];
    return rl_jsonrpc_parse(line, strlen(line), msg, bad_id, err, sizeof(err));
}

static void test_requests_notifications_and_responses(void **state)
{
    rl_jsonrpc_msg_t msg;
    json_t *bad_id;

    (void)state;
    assert_int_equal(
        parse("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"fs/read_text_file\",\"params\":{\"path\":\"/a\"}}", &msg,
              &bad_id),
        0);
    assert_int_equal(msg.kind, RL_JSONRPC_REQUEST);
    assert_string_equal(msg.method, "fs/read_text_file");
    assert_int_equal(json_integer_value(msg.id), 5);
    assert_true(json_is_object(msg.params));
    rl_jsonrpc_msg_free(&msg);

    assert_int_equal(parse("{\"jsonrpc\":\"2.0\",\"id\":\"abc\",\"method\":\"x\"}", &msg, &bad_id), 0);
    assert_int_equal(msg.kind, RL_JSONRPC_REQUEST);
    assert_string_equal(json_string_value(msg.id), "abc");
    assert_null(msg.params);
    rl_jsonrpc_msg_free(&msg);

    assert_int_equal(parse("{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{}}", &msg, &bad_id), 0);
    assert_int_equal(msg.kind, RL_JSONRPC_NOTIFICATION);
    assert_null(msg.id);
    rl_jsonrpc_msg_free(&msg);

    /* id null is a notification for our purposes: nothing can be answered to it */
    assert_int_equal(parse("{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"n\"}", &msg, &bad_id), 0);
    assert_int_equal(msg.kind, RL_JSONRPC_NOTIFICATION);
    rl_jsonrpc_msg_free(&msg);

    assert_int_equal(parse("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":null}", &msg, &bad_id), 0);
    assert_int_equal(msg.kind, RL_JSONRPC_RESPONSE);
    assert_true(json_is_null(msg.result));
    assert_int_equal(rl_jsonrpc_error_code(&msg), 0);
    rl_jsonrpc_msg_free(&msg);

    assert_int_equal(
        parse("{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":-32000,\"message\":\"Authentication required\"}}",
              &msg, &bad_id),
        0);
    assert_int_equal(msg.kind, RL_JSONRPC_RESPONSE);
    assert_int_equal(rl_jsonrpc_error_code(&msg), RL_JSONRPC_AUTH_REQUIRED);
    assert_string_equal(rl_jsonrpc_error_message(&msg), "Authentication required");
    rl_jsonrpc_msg_free(&msg);
}

static void expect_error(const char *line, int code, const char *id)
{
    rl_jsonrpc_msg_t msg;
    json_t *bad_id = NULL;

    assert_int_equal(parse(line, &msg, &bad_id), code);
    assert_null(msg.root);
    if (id == NULL) {
        assert_null(bad_id);
    } else {
        char *text = json_dumps(bad_id, JSON_ENCODE_ANY);
        assert_string_equal(text, id);
        free(text);
    }
    json_decref(bad_id);
}

static void test_malformed_lines_get_the_spec_codes(void **state)
{
    (void)state;
    expect_error("not json", RL_JSONRPC_PARSE_ERROR, NULL);
    expect_error("{\"jsonrpc\":\"2.0\",\"id\":1,", RL_JSONRPC_PARSE_ERROR, NULL);
    expect_error("[{\"jsonrpc\":\"2.0\",\"method\":\"a\"}]", RL_JSONRPC_INVALID_REQUEST, NULL);
    expect_error("42", RL_JSONRPC_INVALID_REQUEST, NULL);
    expect_error("{\"id\":7,\"method\":\"a\"}", RL_JSONRPC_INVALID_REQUEST, "7");
    expect_error("{\"jsonrpc\":\"1.0\",\"id\":\"x\",\"method\":\"a\"}", RL_JSONRPC_INVALID_REQUEST, "\"x\"");
    expect_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":5}", RL_JSONRPC_INVALID_REQUEST, "1");
    expect_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\",\"params\":3}", RL_JSONRPC_INVALID_REQUEST, "1");
    expect_error("{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"a\"}", RL_JSONRPC_INVALID_REQUEST, NULL);
    expect_error("{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"a\"}", RL_JSONRPC_INVALID_REQUEST, NULL);
    expect_error("{\"jsonrpc\":\"2.0\",\"id\":1}", RL_JSONRPC_INVALID_REQUEST, "1");
    expect_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":1,\"error\":{\"code\":1}}", RL_JSONRPC_INVALID_REQUEST, "1");
    expect_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":\"bad\"}", RL_JSONRPC_INVALID_REQUEST, "1");
    expect_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,\"method\":\"a\"}", RL_JSONRPC_PARSE_ERROR, NULL);
}

static void expect_json(json_t *built, const char *expected)
{
    json_t *want = json_loads(expected, 0, NULL);

    assert_non_null(built);
    assert_non_null(want);
    assert_true(json_equal(built, want));
    json_decref(built);
    json_decref(want);
}

static void test_builders(void **state)
{
    json_t *id = json_string("r1");

    (void)state;
    expect_json(rl_jsonrpc_request(3, "session/new", json_pack("{s:s}", "cwd", "/w")),
                "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"session/new\",\"params\":{\"cwd\":\"/w\"}}");
    expect_json(rl_jsonrpc_notification("session/cancel", NULL),
                "{\"jsonrpc\":\"2.0\",\"method\":\"session/cancel\",\"params\":{}}");
    expect_json(rl_jsonrpc_result(id, NULL), "{\"jsonrpc\":\"2.0\",\"id\":\"r1\",\"result\":null}");
    expect_json(rl_jsonrpc_error(id, RL_JSONRPC_METHOD_NOT_FOUND, "Method not found"),
                "{\"jsonrpc\":\"2.0\",\"id\":\"r1\",\"error\":{\"code\":-32601,\"message\":\"Method not found\"}}");
    expect_json(rl_jsonrpc_error(NULL, RL_JSONRPC_PARSE_ERROR, "Parse error"),
                "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"Parse error\"}}");
    json_decref(id);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_requests_notifications_and_responses),
        cmocka_unit_test(test_malformed_lines_get_the_spec_codes),
        cmocka_unit_test(test_builders),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
