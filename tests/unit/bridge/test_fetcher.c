/*
 * The bridge's download thread (bridge/fetcher.c) against a small HTTP server
 * on loopback: results come back in order through the eventfd, the queue is
 * bounded, and a stop ends a download that hangs and frees what is queued.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "bridge/fetcher.h"
#include "common/jobs.h"
#include "client/client.h"

/* A server of one thread: /ok answers "hello", /hang never answers, anything else 404. */
typedef struct server {
    int fd, port;
    int hung[RL_FETCH_QUEUE_MAX + 4];
    int nhung;
    pthread_t thread;
} server_t;

static void *serve(void *arg)
{
    server_t *s = arg;
    static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello";
    static const char missing[] = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

    for (;;) {
        char head[2048];
        size_t n = 0;
        int c = accept(s->fd, NULL, NULL);
        if (c < 0)
            return NULL;
        while (n < sizeof(head) - 1) {
            ssize_t r = read(c, head + n, sizeof(head) - 1 - n);
            if (r <= 0)
                break;
            n += (size_t)r;
            head[n] = '\0';
            if (strstr(head, "\r\n\r\n") != NULL)
                break;
        }
        head[n] = '\0';
        if (strncmp(head, "GET /hang ", 10) == 0 && s->nhung < (int)(sizeof(s->hung) / sizeof(s->hung[0]))) {
            s->hung[s->nhung++] = c;
            continue;
        }
        if (strncmp(head, "GET /ok ", 8) == 0) {
            if (write(c, ok, sizeof(ok) - 1) < 0)
                break;
        } else if (write(c, missing, sizeof(missing) - 1) < 0) {
            break;
        }
        close(c);
    }
    return NULL;
}

static void server_start(server_t *s)
{
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(addr);

    memset(s, 0, sizeof(*s));
    s->fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(s->fd >= 0);
    assert_int_equal(bind(s->fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    assert_int_equal(listen(s->fd, 128), 0);
    assert_int_equal(getsockname(s->fd, (struct sockaddr *)&addr, &len), 0);
    s->port = ntohs(addr.sin_port);
    assert_int_equal(pthread_create(&s->thread, NULL, serve, s), 0);
}

static void server_stop(server_t *s)
{
    int i;

    shutdown(s->fd, SHUT_RDWR);
    close(s->fd);
    pthread_join(s->thread, NULL);
    for (i = 0; i < s->nhung; i++)
        close(s->hung[i]);
}

static void url_of(const server_t *s, const char *path, char *out, size_t outsz)
{
    snprintf(out, outsz, "http://127.0.0.1:%d%s", s->port, path);
}

static long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static int readied; /* the fetcher's ready callbacks */

static void on_ready(void *user)
{
    (void)user;
    readied++;
}

/* Runs the jobs' loop side and collects results until count have come (within_ms at most), in order. */
static size_t collect(rl_jobs_t *jobs, rl_fetcher_t *f, rl_fetch_t **got, size_t count, long within_ms)
{
    size_t n = 0;
    long deadline = now_ms() + within_ms;

    while (n < count && now_ms() < deadline) {
        struct pollfd p = {.fd = rl_jobs_fd(jobs), .events = POLLIN};
        rl_fetch_t *job;
        int before = readied;
        if (poll(&p, 1, 200) <= 0)
            continue;
        rl_jobs_dispatch(jobs);
        if (readied == before)
            continue;
        for (job = rl_fetcher_results(f); job != NULL; job = job->next)
            got[n++] = job;
    }
    return n;
}

static int setup(void **state)
{
    rl_client_t *client = NULL;

    (void)state;
    /* curl's global init, before any thread: as rl_bridge_run does with its REST client. */
    assert_int_equal(rl_client_new("http://127.0.0.1", NULL, &client), 0);
    rl_client_free(client);
    return 0;
}

static void test_results_come_back_in_order_on_the_loop(void **state)
{
    server_t s;
    rl_jobs_t *jobs = rl_jobs_start();
    rl_fetcher_t *f;
    rl_fetch_t *got[3];
    char url[128];
    int owner;
    size_t i;

    (void)state;
    server_start(&s);
    f = rl_fetcher_start(jobs, on_ready, NULL);
    assert_non_null(f);
    url_of(&s, "/ok", url, sizeof(url));
    assert_int_equal(rl_fetcher_submit(f, url, &owner, 0), 0);
    url_of(&s, "/missing", url, sizeof(url));
    assert_int_equal(rl_fetcher_submit(f, url, &owner, 1), 0);
    url_of(&s, "/ok", url, sizeof(url));
    assert_int_equal(rl_fetcher_submit(f, url, &owner, 2), 0);
    assert_int_equal(collect(jobs, f, got, 3, 10000), 3);
    for (i = 0; i < 3; i++) {
        assert_ptr_equal(got[i]->owner, &owner);
        assert_int_equal(got[i]->index, i);
    }
    assert_non_null(got[0]->body);
    assert_int_equal(got[0]->len, 5);
    assert_memory_equal(got[0]->body, "hello", 5);
    /* Only a 200 gives bytes: anything else is a failed download. */
    assert_null(got[1]->body);
    assert_memory_equal(got[2]->body, "hello", 5);
    for (i = 0; i < 3; i++)
        rl_fetch_free(got[i]);
    rl_jobs_stop(jobs);
    rl_fetcher_stop(f);
    server_stop(&s);
}

static void test_the_queue_is_bounded_and_a_stop_ends_a_hung_download(void **state)
{
    server_t s;
    rl_jobs_t *jobs = rl_jobs_start();
    rl_fetcher_t *f;
    rl_fetch_t *got[1];
    char hang[128], ok[128];
    long started;
    int i;

    (void)state;
    server_start(&s);
    f = rl_fetcher_start(jobs, on_ready, NULL);
    assert_non_null(f);
    url_of(&s, "/hang", hang, sizeof(hang));
    url_of(&s, "/ok", ok, sizeof(ok));
    assert_int_equal(rl_fetcher_submit(f, hang, NULL, 0), 0);
    for (i = 1; i < RL_FETCH_QUEUE_MAX; i++)
        assert_int_equal(rl_fetcher_submit(f, ok, NULL, (size_t)i), 0);
    /* The 65th job is refused: its item fails as download_failed in the loop. */
    assert_int_equal(rl_fetcher_submit(f, ok, NULL, 99), -1);
    /* The first download hangs, so nothing comes back and nothing else starts. */
    assert_int_equal(collect(jobs, f, got, 1, 1000), 0);
    assert_int_equal(rl_fetcher_submit(f, ok, NULL, 99), -1);
    started = now_ms();
    /* The jobs' stop ends the download and frees what never ran, then the fetcher goes (ASan sees no leak). */
    rl_jobs_stop(jobs);
    rl_fetcher_stop(f);
    /* Well under the download's own 60 s: the stop flag ends it (curl checks it about once a second). */
    assert_true(now_ms() - started < 3000);
    server_stop(&s);
}

/* issue 34: only the relay's own signed file links are followed. */
static void test_only_the_relays_signed_links_are_followed(void **state)
{
    static const char sig[] = "0123456789abcdef0123456789abcdef";
    static const struct {
        const char *server, *url;
        int allowed;
    } cases[] = {
        {"http://127.0.0.1:8080", "http://127.0.0.1:8080/v1/files/att_abc?exp=17&sig=%s", 1},
        {"http://127.0.0.1:8080/", "http://127.0.0.1:8080/v1/files/att_abc?exp=17&sig=%s", 1},
        {"HTTPS://Relay.Example", "https://relay.example:443/v1/files/att_abc?exp=17&sig=%s", 1},
        {"https://relay.example/relay/", "https://relay.example/relay/v1/files/att_abc?exp=17&sig=%s", 1},
        {"http://[::1]:9", "http://[::1]:9/v1/files/att_abc?exp=17&sig=%s", 1},
        /* another origin: host, port, scheme */
        {"http://127.0.0.1:8080", "http://127.0.0.1:8081/v1/files/att_abc?exp=17&sig=%s", 0},
        {"http://127.0.0.1:8080", "http://127.0.0.2:8080/v1/files/att_abc?exp=17&sig=%s", 0},
        {"http://127.0.0.1:8080", "https://127.0.0.1:8080/v1/files/att_abc?exp=17&sig=%s", 0},
        {"http://relay.example", "http://169.254.169.254/v1/files/att_abc?exp=17&sig=%s", 0},
        {"http://relay.example", "file:///etc/passwd", 0},
        /* the relay's host as a user part, a fragment, a backslash, a space */
        {"http://relay.example", "http://relay.example@10.0.0.1/v1/files/att_abc?exp=17&sig=%s", 0},
        {"http://relay.example", "http://relay.example:80@10.0.0.1/v1/files/att_abc?exp=17&sig=%s", 0},
        {"http://relay.example", "http://relay.example/v1/files/att_abc?exp=17&sig=%s#x", 0},
        {"http://relay.example", "http://10.0.0.1\\@relay.example/v1/files/att_abc?exp=17&sig=%s", 0},
        {"http://relay.example", "http://relay.example/v1/files/att abc?exp=17&sig=%s", 0},
        /* not the signed shape */
        {"http://relay.example", "http://relay.example/v1/me?exp=17&sig=%s", 0},
        {"http://relay.example", "http://relay.example/v1/files/att_abc?exp=17&sig=%s&x=1", 0},
        {"http://relay.example", "http://relay.example/v1/files/att_abc/../x?exp=17&sig=%s", 0},
        {"http://relay.example", "http://relay.example/v1/files/att_abc?sig=%s", 0},
        {"http://relay.example/relay", "http://relay.example/v1/files/att_abc?exp=17&sig=%s", 0},
        {"http://relay.example", "http://relay.example:99999/v1/files/att_abc?exp=17&sig=%s", 0},
        {NULL, "http://relay.example/v1/files/att_abc?exp=17&sig=%s", 0},
    };
    char url[512];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        snprintf(url, sizeof(url), cases[i].url, sig);
        if (rl_fetch_link_allowed(cases[i].server, url) != cases[i].allowed)
            fail_msg("case %zu: %s under %s", i, url, cases[i].server != NULL ? cases[i].server : "(none)");
    }
    assert_int_equal(
        rl_fetch_link_allowed("http://relay.example", "http://relay.example/v1/files/att_abc?exp=17&sig=abc"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_results_come_back_in_order_on_the_loop),
        cmocka_unit_test(test_the_queue_is_bounded_and_a_stop_ends_a_hung_download),
        cmocka_unit_test(test_only_the_relays_signed_links_are_followed),
    };

    return cmocka_run_group_tests(tests, setup, NULL);
}
