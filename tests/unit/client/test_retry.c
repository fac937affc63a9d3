/* The spec's client error rules (client/retry.c) and the credentials file (client/credentials.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "client/credentials.h"
#include "client/retry.h"

static rl_client_response_t answer(long status, long retry_after_s)
{
    rl_client_response_t response;

    memset(&response, 0, sizeof(response));
    response.status = status;
    response.retry_after_s = retry_after_s;
    response.ratelimit_remaining = -1;
    response.ratelimit_reset_after = -1;
    return response;
}

static void test_client_errors_are_final(void **state)
{
    long delay;
    long statuses[] = {200, 400, 401, 403, 404, 409, 410, 413, 422};

    for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); ++i) {
        rl_client_response_t r = answer(statuses[i], -1);
        assert_int_equal(rl_retry_decide(NULL, 1, 0, &r, NULL, 0.5, &delay), RL_RETRY_DONE);
        assert_int_equal(delay, 0);
    }
}

static void test_rate_limited_waits_with_jitter(void **state)
{
    rl_client_response_t r = answer(429, 2);
    json_t *body = json_pack("{s:{s:s, s:i}}", "error", "code", "rate_limited", "retry_after_ms", 1500);
    long delay;

    /* retry_after_ms wins over Retry-After, with plus or minus 25 %. */
    assert_int_equal(rl_retry_decide(NULL, 1, 0, &r, body, 0.0, &delay), RL_RETRY_AGAIN);
    assert_int_equal(delay, 1125);
    assert_int_equal(rl_retry_decide(NULL, 7, 0, &r, body, 0.999999, &delay), RL_RETRY_AGAIN);
    assert_int_equal(delay, 1875);
    /* Retry-After alone, and no advice at all: never a tight loop. */
    assert_int_equal(rl_retry_decide(NULL, 1, 0, &r, NULL, 0.5, &delay), RL_RETRY_AGAIN);
    assert_int_equal(delay, 2000);
    r = answer(503, -1);
    assert_int_equal(rl_retry_decide(NULL, 1, 0, &r, NULL, 0.5, &delay), RL_RETRY_AGAIN);
    assert_int_equal(delay, 1000);
    /* An advised wait beyond the policy's patience gives up. */
    r = answer(429, 600);
    assert_int_equal(rl_retry_decide(NULL, 1, 0, &r, NULL, 0.5, &delay), RL_RETRY_DONE);
    json_decref(body);
}

static void test_server_errors_back_off_three_times(void **state)
{
    rl_client_response_t r = answer(500, -1);
    long delay;

    assert_int_equal(rl_retry_decide(NULL, 1, 0, &r, NULL, 0.5, &delay), RL_RETRY_AGAIN);
    assert_int_equal(delay, 500);
    assert_int_equal(rl_retry_decide(NULL, 2, 0, &r, NULL, 0.5, &delay), RL_RETRY_AGAIN);
    assert_int_equal(delay, 1000);
    assert_int_equal(rl_retry_decide(NULL, 3, 0, &r, NULL, 0.5, &delay), RL_RETRY_AGAIN);
    assert_int_equal(delay, 2000);
    assert_int_equal(rl_retry_decide(NULL, 4, 0, &r, NULL, 0.5, &delay), RL_RETRY_DONE);
    /* No answer at all counts the same; a usage error does not. */
    assert_int_equal(rl_retry_decide(NULL, 1, RL_CLIENT_E_CONNECT, &r, NULL, 0.5, &delay), RL_RETRY_AGAIN);
    assert_int_equal(rl_retry_decide(NULL, 1, RL_CLIENT_E_USAGE, &r, NULL, 0.5, &delay), RL_RETRY_DONE);
}

static void test_bucket_wait(void **state)
{
    rl_client_response_t r = answer(200, -1);

    assert_int_equal(rl_retry_bucket_wait_ms(&r), 0);
    r.ratelimit_remaining = 3;
    r.ratelimit_reset_after = 2.5;
    assert_int_equal(rl_retry_bucket_wait_ms(&r), 0);
    r.ratelimit_remaining = 0;
    assert_int_equal(rl_retry_bucket_wait_ms(&r), 2500);
}

static void test_credentials(void **state)
{
    char dir[] = "/tmp/rl-cred-XXXXXX", path[4096], cmd[256];
    json_t *doc, *back;
    struct stat st;

    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/nested/relay", dir);
    setenv("RELAY_CONFIG_DIR", path, 1);
    assert_null(rl_credentials_load("bridge"));
    doc = json_pack("{s:s, s:s}", "server", "http://127.0.0.1:8080", "token", "secret");
    assert_int_equal(rl_credentials_save("bridge", doc), 0);
    assert_int_equal(rl_credentials_path("bridge", path, sizeof(path)), 0);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    back = rl_credentials_load("bridge");
    assert_non_null(back);
    assert_true(json_equal(doc, back));
    json_decref(back);
    /* A file others may read is refused. */
    chmod(path, 0644);
    assert_null(rl_credentials_load("bridge"));
    assert_int_equal(rl_credentials_remove("bridge"), 0);
    assert_int_equal(rl_credentials_remove("bridge"), 0);
    json_decref(doc);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_client_errors_are_final),
        cmocka_unit_test(test_rate_limited_waits_with_jitter),
        cmocka_unit_test(test_server_errors_back_off_three_times),
        cmocka_unit_test(test_bucket_wait),
        cmocka_unit_test(test_credentials),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
