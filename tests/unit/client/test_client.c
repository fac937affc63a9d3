/*
 * Unit tests of src/client/client.c that need no server: URL escaping, base
 * URL checks, JSON decoding, the error envelopes, and the failure of an
 * unreachable host. The exchanges with a live server are covered end to end
 * (tests/e2e/test_21_catalog_cli.py).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "client/client.h"

static void test_escape(void **state)
{
    char *s = rl_client_escape("swe bench/x?&=%\xc3\xa9~._-");

    assert_string_equal(s, "swe%20bench%2Fx%3F%26%3D%25%C3%A9~._-");
    free(s);
    s = rl_client_escape("");
    assert_string_equal(s, "");
    free(s);
}

static void test_base_url(void **state)
{
    rl_client_t *client = NULL;

    assert_int_equal(rl_client_new("ftp://x", NULL, &client), RL_CLIENT_E_USAGE);
    assert_int_equal(rl_client_new("127.0.0.1:8090", NULL, &client), RL_CLIENT_E_USAGE);
    assert_int_equal(rl_client_new(NULL, NULL, &client), RL_CLIENT_E_USAGE);
    assert_int_equal(rl_client_new("http://127.0.0.1:8090//", NULL, &client), 0);
    assert_string_equal(rl_client_base(client), "http://127.0.0.1:8090");
    rl_client_free(client);
}

static void test_unreachable(void **state)
{
    rl_client_options_t options = {1000, 2000, 1024, "test"};
    rl_client_response_t response;
    rl_client_t *client = NULL;

    /* Port 1 on loopback: nothing listens there, the kernel refuses at once. */
    assert_int_equal(rl_client_new("http://127.0.0.1:1", &options, &client), 0);
    assert_int_equal(rl_client_get(client, "/api/v1", NULL, &response), RL_CLIENT_E_CONNECT);
    assert_int_equal(response.status, 0);
    assert_non_null(strstr(response.error, "cannot reach http://127.0.0.1:1"));
    rl_client_response_free(&response);
    rl_client_free(client);
}

static void test_json_and_envelopes(void **state)
{
    rl_client_response_t response = {404, NULL, 0, "application/json", ""};
    char err[200];
    json_t *body;

    response.body = strdup("{\"ok\":false,\"error\":{\"code\":\"entity_not_found\",\"message\":\"no model\"}}");
    response.len = strlen(response.body);
    body = rl_client_json(&response, err, sizeof(err));
    assert_non_null(body);
    assert_string_equal(rl_client_error_message(body), "no model");
    assert_string_equal(rl_client_error_code(body), "entity_not_found");
    json_decref(body);
    free(response.body);

    response.body = strdup("{\"error\":\"plain\"}");
    response.len = strlen(response.body);
    body = rl_client_json(&response, err, sizeof(err));
    assert_string_equal(rl_client_error_message(body), "plain");
    assert_null(rl_client_error_code(body));
    json_decref(body);
    free(response.body);

    response.body = strdup("<html>");
    response.len = strlen(response.body);
    assert_null(rl_client_json(&response, err, sizeof(err)));
    assert_non_null(strstr(err, "not JSON"));
    free(response.body);

    response.body = NULL;
    response.len = 0;
    assert_null(rl_client_json(&response, err, sizeof(err)));
    assert_non_null(strstr(err, "no body"));
    body = json_pack("{s:i}", "x", 1);
    assert_null(rl_client_error_message(body));
    json_decref(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_base_url),
        cmocka_unit_test(test_unreachable),
        cmocka_unit_test(test_json_and_envelopes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
