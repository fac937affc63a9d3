/* The spec's client error rules (client/retry.c) and the credentials file (client/credentials.c). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

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

static void test_outage_window_keeps_retrying_without_an_answer(void **state)
{
    rl_retry_policy_t policy = {.backoff_ms = 1000, .outage_ms = 60000};
    rl_client_response_t r = answer(0, -1);
    long delay;

    /* Beyond rule 3's three retries, doubling to the 30 s cap, while the window lasts. */
    assert_int_equal(rl_retry_decide_after(&policy, 4, 10000, RL_CLIENT_E_CONNECT, &r, NULL, 0.5, &delay),
                     RL_RETRY_AGAIN);
    assert_int_equal(delay, 8000);
    assert_int_equal(rl_retry_decide_after(&policy, 9, 50000, RL_CLIENT_E_CONNECT, &r, NULL, 0.5, &delay),
                     RL_RETRY_AGAIN);
    assert_int_equal(delay, 30000);
    assert_int_equal(rl_retry_decide_after(&policy, 40, 50000, RL_CLIENT_E_TRANSFER, &r, NULL, 0.5, &delay),
                     RL_RETRY_AGAIN);
    assert_int_equal(delay, 30000);
    assert_int_equal(rl_retry_decide_after(&policy, 9, 60000, RL_CLIENT_E_CONNECT, &r, NULL, 0.5, &delay),
                     RL_RETRY_DONE);
    /* A proxy's 502 or 504 says the relay behind it is away: the same. */
    r = answer(502, -1);
    assert_int_equal(rl_retry_decide_after(&policy, 5, 1000, 0, &r, NULL, 0.5, &delay), RL_RETRY_AGAIN);
    r = answer(504, -1);
    assert_int_equal(rl_retry_decide_after(&policy, 5, 1000, 0, &r, NULL, 0.5, &delay), RL_RETRY_AGAIN);
    /* An answer of the relay is not an outage: a 500 still gets three retries, a 4xx none. */
    r = answer(500, -1);
    assert_int_equal(rl_retry_decide_after(&policy, 4, 1000, 0, &r, NULL, 0.5, &delay), RL_RETRY_DONE);
    r = answer(404, -1);
    assert_int_equal(rl_retry_decide_after(&policy, 1, 1000, 0, &r, NULL, 0.5, &delay), RL_RETRY_DONE);
}

/* A scripted HTTP server on loopback: one canned answer per connection, in order, then the last one again. */
typedef struct script {
    int fd, port;
    const char *const *answers;
    int served;
    pthread_t thread;
} script_t;

static void *serve(void *arg)
{
    script_t *script = arg;
    char request[4096];

    for (;;) {
        int conn = accept(script->fd, NULL, NULL);
        const char *answer;
        if (conn < 0)
            return NULL;
        if (read(conn, request, sizeof(request)) <= 0) {
            close(conn);
            continue;
        }
        answer = script->answers[script->served];
        if (script->answers[script->served + 1] != NULL)
            script->served++;
        if (write(conn, answer, strlen(answer)) < 0) {
        }
        close(conn);
    }
}

static void script_start(script_t *script, const char *const *answers)
{
    struct sockaddr_in addr = {.sin_family = AF_INET};
    socklen_t len = sizeof(addr);

    memset(script, 0, sizeof(*script));
    script->answers = answers;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    script->fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(bind(script->fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    assert_int_equal(listen(script->fd, 8), 0);
    getsockname(script->fd, (struct sockaddr *)&addr, &len);
    script->port = ntohs(addr.sin_port);
    pthread_create(&script->thread, NULL, serve, script);
}

static void script_stop(script_t *script)
{
    shutdown(script->fd, SHUT_RDWR);
    close(script->fd);
    pthread_join(script->thread, NULL);
}

typedef struct hooks_seen {
    int retries, waits, stop_after;
    long last_delay;
} hooks_seen_t;

static int count_wait(void *user, long ms)
{
    hooks_seen_t *seen = user;

    seen->waits++;
    return seen->stop_after > 0 && seen->waits >= seen->stop_after;
}

static void count_retry(void *user, int attempt, int result, const rl_client_response_t *response, const json_t *answer,
                        long delay_ms)
{
    hooks_seen_t *seen = user;

    seen->retries++;
    seen->last_delay = delay_ms;
}

#define ANSWER_500 "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
#define ANSWER_200                                                                                                     \
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-RateLimit-Remaining: 0\r\n"                                \
    "X-RateLimit-Reset-After: 2.5\r\nContent-Length: 30\r\nConnection: close\r\n\r\n{\"ok\":true,\"result\":{\"n\":1}}  "

static void test_one_loop_retries_server_errors_then_answers(void **state)
{
    static const char *const answers[] = {ANSWER_500, ANSWER_500, ANSWER_200, NULL};
    rl_retry_policy_t policy = {.backoff_ms = 10};
    hooks_seen_t seen = {0};
    rl_retry_hooks_t hooks = {count_wait, count_retry, &seen};
    rl_retry_bucket_t bucket = {0};
    rl_client_response_t response;
    rl_client_t *client;
    json_t *answer;
    script_t script;
    char base[64];

    script_start(&script, answers);
    snprintf(base, sizeof(base), "http://127.0.0.1:%d", script.port);
    assert_int_equal(rl_client_new(base, NULL, &client), 0);
    assert_int_equal(
        rl_retry_request(client, &policy, &bucket, &hooks, "POST", "/x", NULL, "{}", 2, &response, &answer), 0);
    assert_int_equal(response.status, 200);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(answer, "result"), "n")), 1);
    assert_int_equal(seen.retries, 2);
    assert_true(seen.last_delay >= 15 && seen.last_delay <= 25);
    /* The answer left the bucket empty: the next call waits for Reset-After. */
    assert_true(bucket.ready_at_ms > 0);
    json_decref(answer);
    rl_client_response_free(&response);
    rl_client_free(client);
    script_stop(&script);
}

static void test_one_loop_stops_when_told(void **state)
{
    static const char *const answers[] = {ANSWER_500, NULL};
    rl_retry_policy_t policy = {.backoff_ms = 10, .max_attempts = 2};
    hooks_seen_t seen = {0};
    rl_retry_hooks_t hooks = {count_wait, count_retry, &seen};
    rl_client_response_t response;
    rl_client_t *client;
    json_t *answer;
    script_t script;
    char base[64];

    script_start(&script, answers);
    snprintf(base, sizeof(base), "http://127.0.0.1:%d", script.port);
    assert_int_equal(rl_client_new(base, NULL, &client), 0);
    /* max_attempts caps the tries: the second 500 is the answer. */
    assert_int_equal(rl_retry_request(client, &policy, NULL, &hooks, "GET", "/x", NULL, NULL, 0, &response, &answer),
                     0);
    assert_int_equal(response.status, 500);
    assert_int_equal(seen.retries, 1);
    json_decref(answer);
    rl_client_response_free(&response);
    /* A wait hook that gives up ends the call at once. */
    policy.max_attempts = 0;
    seen = (hooks_seen_t){.stop_after = 1};
    assert_int_equal(rl_retry_request(client, &policy, NULL, &hooks, "GET", "/x", NULL, NULL, 0, &response, &answer),
                     RL_CLIENT_E_STOPPED);
    assert_null(answer);
    assert_int_equal(response.status, 0);
    rl_client_response_free(&response);
    rl_client_free(client);
    script_stop(&script);
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
        cmocka_unit_test(test_outage_window_keeps_retrying_without_an_answer),
        cmocka_unit_test(test_one_loop_retries_server_errors_then_answers),
        cmocka_unit_test(test_one_loop_stops_when_told),
        cmocka_unit_test(test_credentials),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
