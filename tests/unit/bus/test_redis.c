/*
 * The Redis client (src/bus/redis.c) against a real redis-server: run it
 * through tests/support/redis.sh, which starts a throwaway one and says
 * where (RL_TEST_BUS) and how to stop and start it again. Locations,
 * pipelining, subscriptions, AUTH and SELECT, reconnection, a server too
 * slow to answer, caps, a flushed script cache, and freeing a client from
 * its own callback.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "bus/redis.h"
#include "common/clock.h"
#include "common/error.h"

#define WAIT_MS 5000

static h2o_loop_t *loop;
static rl_redis_location_t server;

static int64_t mono_ms(void)
{
    return rl_clock_mono_us() / 1000;
}

#define wait_for(cond)                                                                                                 \
    do {                                                                                                               \
        int64_t deadline_ = mono_ms() + WAIT_MS;                                                                       \
        while (!(cond) && mono_ms() < deadline_)                                                                       \
            h2o_evloop_run(loop, 10);                                                                                  \
        assert_true(cond);                                                                                             \
    } while (0)

static void run_for(int64_t ms)
{
    int64_t deadline = mono_ms() + ms;

    while (mono_ms() < deadline)
        h2o_evloop_run(loop, 10);
}

/* What a client told us. */
struct events {
    int ready, lost, pushes;
    char last_push[128];
};

static void on_ready(rl_redis_t *redis, void *ctx)
{
    ++((struct events *)ctx)->ready;
}

static void on_lost(rl_redis_t *redis, void *ctx)
{
    ++((struct events *)ctx)->lost;
}

static void on_push(rl_redis_t *redis, redisReply *reply, void *ctx)
{
    struct events *e = ctx;

    ++e->pushes;
    if (reply->elements == 3 && reply->element[2]->type == REDIS_REPLY_STRING)
        snprintf(e->last_push, sizeof(e->last_push), "%s %s %s", reply->element[0]->str, reply->element[1]->str,
                 reply->element[2]->str);
    else
        snprintf(e->last_push, sizeof(e->last_push), "%s", reply->element[0]->str);
}

static rl_redis_config_t config_for(struct events *e)
{
    rl_redis_config_t config = {
        .name = "test",
        .max_pending = 10000,
        .max_queued_bytes = 16 * 1024 * 1024,
        .max_reply_bytes = 16 * 1024 * 1024,
        .reply_timeout_ms = 2000,
        .keepalive_ms = 1000,
        .on_ready = on_ready,
        .on_lost = on_lost,
        .ctx = e,
    };
    return config;
}

static rl_redis_t *client_at(const rl_redis_location_t *where, const rl_redis_config_t *config)
{
    rl_redis_t *redis = NULL;

    assert_int_equal(rl_redis_new(loop, where, config, &redis), 0);
    return redis;
}

/* A reply, kept as text: "s:<string>", "i:<integer>", "e:<error>", "a:<count>", "n" (nil), or "-" (none came). */
struct answer {
    int calls;
    char text[256];
};

static void on_reply(redisReply *reply, void *arg)
{
    struct answer *a = arg;

    ++a->calls;
    if (reply == NULL)
        snprintf(a->text, sizeof(a->text), "-");
    else if (reply->type == REDIS_REPLY_STRING || reply->type == REDIS_REPLY_STATUS)
        snprintf(a->text, sizeof(a->text), "s:%.200s", reply->str);
    else if (reply->type == REDIS_REPLY_INTEGER)
        snprintf(a->text, sizeof(a->text), "i:%lld", reply->integer);
    else if (reply->type == REDIS_REPLY_ERROR)
        snprintf(a->text, sizeof(a->text), "e:%.200s", reply->str);
    else if (reply->type == REDIS_REPLY_ARRAY)
        snprintf(a->text, sizeof(a->text), "a:%zu", reply->elements);
    else
        snprintf(a->text, sizeof(a->text), "n");
}

/* Sends a command made of words; 0 or the error of rl_redis_command. */
static int send_words(rl_redis_t *redis, struct answer *a, int argc, ...)
{
    const char *argv[8];
    size_t lens[8];
    va_list ap;
    int i;

    va_start(ap, argc);
    for (i = 0; i < argc; ++i) {
        argv[i] = va_arg(ap, const char *);
        lens[i] = strlen(argv[i]);
    }
    va_end(ap);
    return rl_redis_command(redis, argc, argv, lens, on_reply, a);
}

/* Sends a command and waits for its answer. */
static const char *ask(rl_redis_t *redis, int argc, const char *w1, const char *w2, const char *w3)
{
    static struct answer a;

    memset(&a, 0, sizeof(a));
    assert_int_equal(send_words(redis, &a, argc, w1, w2, w3), 0);
    wait_for(a.calls == 1);
    return a.text;
}

static void test_locations(void **state)
{
    rl_redis_location_t l;
    const char *why = NULL;
    static const char *const bad[] = {
        "http://localhost:6379",
        "rediss://localhost:6379/0",
        "redis://",
        "redis://:pw@",
        "redis://host:0",
        "redis://host:70000",
        "redis://host:12x",
        "redis://host/x",
        "redis://host/1/2",
        "redis://[::1",
        "redis://[::1]x",
        "redis://:bad%zz@host",
        "redis://:%00@host",
        "unix://relative.sock",
        "unix://",
        "unix:///tmp/r.sock?db",
        "unix:///tmp/r.sock?db=x",
        "unix:///tmp/r.sock?port=1",
    };
    size_t i;

    assert_int_equal(rl_redis_parse_location("redis://10.0.0.5:6380/2", &l, &why), 0);
    assert_false(l.is_unix);
    assert_string_equal(l.host, "10.0.0.5");
    assert_int_equal(l.port, 6380);
    assert_int_equal(l.db, 2);
    assert_string_equal(l.password, "");
    assert_string_equal(l.display, "redis://10.0.0.5:6380/2");

    assert_int_equal(rl_redis_parse_location("redis://cache.internal", &l, &why), 0);
    assert_string_equal(l.host, "cache.internal");
    assert_int_equal(l.port, 6379);
    assert_int_equal(l.db, 0);

    /* The password is kept, %-decoded, and never shown. */
    assert_int_equal(rl_redis_parse_location("redis://:s3cr%40t@h:7000/5", &l, &why), 0);
    assert_string_equal(l.password, "s3cr@t");
    assert_string_equal(l.user, "");
    assert_null(strstr(l.display, "s3cr"));
    assert_string_equal(l.display, "redis://:***@h:7000/5");

    assert_int_equal(rl_redis_parse_location("redis://relay:pw@[::1]:7001/3", &l, &why), 0);
    assert_string_equal(l.user, "relay");
    assert_string_equal(l.password, "pw");
    assert_string_equal(l.host, "::1");
    assert_int_equal(l.port, 7001);
    assert_string_equal(l.display, "redis://relay:***@[::1]:7001/3");

    assert_int_equal(rl_redis_parse_location("unix:///run/redis/redis.sock?db=4&password=hidden", &l, &why), 0);
    assert_true(l.is_unix);
    assert_string_equal(l.path, "/run/redis/redis.sock");
    assert_int_equal(l.db, 4);
    assert_string_equal(l.password, "hidden");
    assert_null(strstr(l.display, "hidden"));

    assert_int_equal(rl_redis_parse_location("unix:///tmp/r.sock", &l, &why), 0);
    assert_int_equal(l.db, 0);
    assert_string_equal(l.display, "unix:///tmp/r.sock?db=0");

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
        why = NULL;
        if (rl_redis_parse_location(bad[i], &l, &why) != -1)
            fail_msg("accepted %s", bad[i]);
        assert_non_null(why);
    }
}

static void test_pipelined_commands_answer_in_order(void **state)
{
    struct events e = {0};
    rl_redis_config_t config = config_for(&e);
    rl_redis_t *redis = client_at(&server, &config);
    static struct answer answers[1000];
    char expected[32];
    int i;

    memset(answers, 0, sizeof(answers));
    assert_string_equal(ask(redis, 2, "DEL", "counter", NULL), "i:0");
    assert_int_equal(e.ready, 1);
    /* All sent before any reply is read: the FIFO matches each reply to its command. */
    for (i = 0; i < 1000; ++i)
        assert_int_equal(send_words(redis, &answers[i], 2, "INCR", "counter"), 0);
    assert_int_equal(answers[0].calls, 0);
    wait_for(answers[999].calls == 1);
    for (i = 0; i < 1000; ++i) {
        snprintf(expected, sizeof(expected), "i:%d", i + 1);
        assert_string_equal(answers[i].text, expected);
    }
    /* Error replies are replies. */
    assert_true(strncmp(ask(redis, 2, "NOSUCHCOMMAND", "x", NULL), "e:ERR", 5) == 0);
    rl_redis_free(redis);
    assert_int_equal(e.lost, 0);
}

static void test_subscriptions_arrive_as_pushes(void **state)
{
    struct events e = {0}, s = {0};
    rl_redis_config_t config = config_for(&e), sub_config = config_for(&s);
    rl_redis_t *redis, *sub;
    const char *argv[3] = {"SUBSCRIBE", "news", "weather"};
    size_t lens[3] = {9, 4, 7};
    struct answer pong = {0};

    sub_config.on_push = on_push;
    redis = client_at(&server, &config);
    sub = client_at(&server, &sub_config);
    wait_for(s.ready == 1);
    assert_int_equal(rl_redis_subscription(sub, 3, argv, lens), 0);
    wait_for(s.pushes == 2);
    assert_string_equal(s.last_push, "subscribe");
    assert_string_equal(ask(redis, 3, "PUBLISH", "news", "hello"), "i:1");
    wait_for(s.pushes == 3);
    assert_string_equal(s.last_push, "message news hello");
    /* A command with a reply still works while subscribed: PING answers ["pong", ""]. */
    assert_int_equal(send_words(sub, &pong, 1, "PING"), 0);
    wait_for(pong.calls == 1);
    assert_string_equal(pong.text, "a:2");
    /* On a command connection, an array that looks like a message is an ordinary reply. */
    assert_string_equal(ask(redis, 2, "DEL", "list", NULL), "i:0");
    assert_string_equal(ask(redis, 3, "RPUSH", "list", "message"), "i:1");
    assert_string_equal(ask(redis, 3, "RPUSH", "list", "a"), "i:2");
    {
        struct answer range = {0};
        assert_int_equal(send_words(redis, &range, 4, "LRANGE", "list", "0", "-1"), 0);
        wait_for(range.calls == 1);
        assert_string_equal(range.text, "a:2");
    }
    rl_redis_free(sub);
    rl_redis_free(redis);
}

static int stderr_to(const char *path)
{
    int saved = dup(2), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

    assert_true(saved >= 0 && fd >= 0);
    dup2(fd, 2);
    close(fd);
    return saved;
}

static void stderr_back(int saved)
{
    dup2(saved, 2);
    close(saved);
}

static void test_auth_and_select(void **state)
{
    struct events admin_e = {0}, good_e = {0}, other_e = {0}, bad_e = {0};
    rl_redis_config_t admin_config = config_for(&admin_e), good_config = config_for(&good_e),
                      other_config = config_for(&other_e), bad_config = config_for(&bad_e);
    rl_redis_location_t good = server, other = server, bad = server;
    rl_redis_t *admin, *with_password, *other_db, *without;
    char log[] = "/tmp/rl-redis-log-XXXXXX", text[8192];
    struct answer refused = {0};
    int saved, fd;
    ssize_t n;

    admin = client_at(&server, &admin_config);
    {
        struct answer a = {0};
        const char *argv[4] = {"CONFIG", "SET", "requirepass", "Sesame-7f3"};
        size_t lens[4] = {6, 3, 11, 10};
        assert_int_equal(rl_redis_command(admin, 4, argv, lens, on_reply, &a), 0);
        wait_for(a.calls == 1);
        assert_string_equal(a.text, "s:OK");
    }
    /* The right password, database 3; another client on database 0 does not see its key. */
    snprintf(good.password, sizeof(good.password), "Sesame-7f3");
    good.db = 3;
    snprintf(other.password, sizeof(other.password), "Sesame-7f3");
    with_password = client_at(&good, &good_config);
    other_db = client_at(&other, &other_config);
    assert_string_equal(ask(with_password, 3, "SET", "only-in-3", "yes"), "s:OK");
    assert_string_equal(ask(with_password, 2, "GET", "only-in-3", NULL), "s:yes");
    assert_string_equal(ask(other_db, 2, "GET", "only-in-3", NULL), "n");

    /* No password: the handshake is refused, the command queued meanwhile fails, the log shows no secret. */
    snprintf(bad.password, sizeof(bad.password), "wrong-Sesame");
    fd = mkstemp(log);
    assert_true(fd >= 0);
    close(fd);
    saved = stderr_to(log);
    without = client_at(&bad, &bad_config);
    assert_int_equal(send_words(without, &refused, 1, "PING"), 0);
    wait_for(refused.calls == 1);
    run_for(300);
    stderr_back(saved);
    assert_string_equal(refused.text, "-");
    assert_int_equal(bad_e.ready, 0);
    fd = open(log, O_RDONLY);
    n = read(fd, text, sizeof(text) - 1);
    close(fd);
    unlink(log);
    assert_true(n > 0);
    text[n] = '\0';
    assert_non_null(strstr(text, "cannot connect"));
    assert_null(strstr(text, "Sesame"));
    /* Logged once, not at every attempt. */
    assert_null(strstr(strstr(text, "cannot connect") + 1, "cannot connect"));
    rl_redis_free(without);

    {
        struct answer a = {0};
        const char *argv[4] = {"CONFIG", "SET", "requirepass", ""};
        size_t lens[4] = {6, 3, 11, 0};
        assert_int_equal(rl_redis_command(admin, 4, argv, lens, on_reply, &a), 0);
        wait_for(a.calls == 1);
        assert_string_equal(a.text, "s:OK");
    }
    assert_string_equal(ask(with_password, 1, "FLUSHDB", NULL, NULL), "s:OK");
    rl_redis_free(with_password);
    rl_redis_free(other_db);
    rl_redis_free(admin);
}

static void test_reconnects_after_a_restart(void **state)
{
    const char *stop = getenv("RL_TEST_REDIS_STOP"), *start = getenv("RL_TEST_REDIS_START");
    struct events e = {0};
    rl_redis_config_t config = config_for(&e);
    rl_redis_t *redis = client_at(&server, &config);
    struct answer a = {0};
    int64_t down_at;

    assert_non_null(stop);
    assert_non_null(start);
    assert_string_equal(ask(redis, 1, "PING", NULL, NULL), "s:PONG");
    assert_int_equal(system(stop), 0);
    wait_for(e.lost == 1);
    down_at = mono_ms();
    /* Down, between attempts: refused at once, nothing queued for later. */
    assert_int_equal(send_words(redis, &a, 1, "PING"), RL_E_UNAVAILABLE);
    assert_false(rl_redis_ready(redis));
    run_for(600);
    assert_int_equal(system(start), 0);
    wait_for(e.ready == 2);
    /* The back-off had not reached its 5 s ceiling: back within a few hundred ms of the server. */
    assert_true(mono_ms() - down_at < 4000);
    assert_string_equal(ask(redis, 1, "PING", NULL, NULL), "s:PONG");
    assert_int_equal(e.lost, 1);
    rl_redis_free(redis);
}

static void test_a_server_that_does_not_answer_counts_as_lost(void **state)
{
    struct events e = {0}, admin_e = {0};
    rl_redis_config_t config = config_for(&e), admin_config = config_for(&admin_e);
    rl_redis_t *redis, *admin;
    struct answer a = {0}, pause = {0};

    config.reply_timeout_ms = 300;
    redis = client_at(&server, &config);
    admin = client_at(&server, &admin_config);
    assert_string_equal(ask(redis, 1, "PING", NULL, NULL), "s:PONG");
    /* The server stops answering every client for 1.5 s. */
    assert_int_equal(send_words(admin, &pause, 3, "CLIENT", "PAUSE", "1500"), 0);
    wait_for(pause.calls == 1);
    assert_int_equal(send_words(redis, &a, 1, "PING"), 0);
    wait_for(a.calls == 1);
    /* No reply in 300 ms: the command fails and the connection is dropped, long before the pause ends. */
    assert_string_equal(a.text, "-");
    assert_int_equal(e.lost, 1);
    /* It comes back once the server answers again. */
    wait_for(e.ready == 2);
    assert_string_equal(ask(redis, 1, "PING", NULL, NULL), "s:PONG");
    rl_redis_free(redis);
    rl_redis_free(admin);
}

static void test_caps(void **state)
{
    struct events e = {0}, big_e = {0}, admin_e = {0};
    rl_redis_config_t config = config_for(&e), big_config = config_for(&big_e), admin_config = config_for(&admin_e);
    rl_redis_t *redis, *small_replies, *admin;
    struct answer a[3] = {{0}}, big = {0};
    char value[4096];
    const char *argv[3] = {"SET", "big", value};
    size_t lens[3] = {3, 3, sizeof(value)};

    config.max_pending = 2;
    config.max_queued_bytes = 512;
    redis = client_at(&server, &config);
    wait_for(e.ready == 1);
    /* At most two commands wait for a reply. */
    assert_int_equal(send_words(redis, &a[0], 1, "PING"), 0);
    assert_int_equal(send_words(redis, &a[1], 1, "PING"), 0);
    assert_int_equal(send_words(redis, &a[2], 1, "PING"), RL_E_UNAVAILABLE);
    wait_for(a[1].calls == 1);
    assert_int_equal(send_words(redis, &a[2], 1, "PING"), 0);
    wait_for(a[2].calls == 1);
    /* A command larger than the output cap is refused. */
    memset(value, 'x', sizeof(value));
    assert_int_equal(rl_redis_command(redis, 3, argv, lens, on_reply, &big), RL_E_UNAVAILABLE);

    /* A reply larger than the reply cap drops the connection, which comes back. */
    admin = client_at(&server, &admin_config);
    assert_int_equal(rl_redis_command(admin, 3, argv, lens, on_reply, &big), 0);
    wait_for(big.calls == 1);
    assert_string_equal(big.text, "s:OK");
    big_config.max_reply_bytes = 1024;
    small_replies = client_at(&server, &big_config);
    assert_string_equal(ask(small_replies, 2, "GET", "big", NULL), "-");
    assert_int_equal(big_e.lost, 1);
    wait_for(big_e.ready == 2);
    assert_string_equal(ask(small_replies, 2, "STRLEN", "big", NULL), "i:4096");
    rl_redis_free(small_replies);
    rl_redis_free(redis);
    rl_redis_free(admin);
}

static void test_a_flushed_script_cache_falls_back_to_eval(void **state)
{
    static rl_redis_script_t loaded = {"return tonumber(ARGV[1]) + 1"}, unknown = {"return 'never loaded'"};
    static rl_redis_script_t *const scripts[] = {&loaded};
    struct events e = {0};
    rl_redis_config_t config = config_for(&e);
    rl_redis_t *redis;
    struct answer a = {0}, b = {0};
    const char *argv[1] = {"41"};
    size_t lens[1] = {2};

    rl_redis_script_init(&loaded);
    rl_redis_script_init(&unknown);
    assert_int_equal(strlen(loaded.sha), 40);
    config.scripts = scripts;
    config.nscripts = 1;
    redis = client_at(&server, &config);
    assert_int_equal(rl_redis_eval(redis, &loaded, 0, 1, argv, lens, on_reply, &a), 0);
    wait_for(a.calls == 1);
    assert_string_equal(a.text, "i:42");
    /* The server forgets every script: the call is sent again as EVAL. */
    assert_string_equal(ask(redis, 2, "SCRIPT", "FLUSH", NULL), "s:OK");
    memset(&a, 0, sizeof(a));
    assert_int_equal(rl_redis_eval(redis, &loaded, 0, 1, argv, lens, on_reply, &a), 0);
    wait_for(a.calls == 1);
    assert_string_equal(a.text, "i:42");
    /* A script the connection never loaded works the same way. */
    assert_int_equal(rl_redis_eval(redis, &unknown, 0, 0, argv, lens, on_reply, &b), 0);
    wait_for(b.calls == 1);
    assert_string_equal(b.text, "s:never loaded");
    assert_int_equal(e.lost, 0);
    rl_redis_free(redis);
}

struct freeing {
    rl_redis_t *redis;
    int calls;
};

static void free_from_callback(redisReply *reply, void *arg)
{
    struct freeing *f = arg;

    ++f->calls;
    rl_redis_free(f->redis);
}

static void test_freed_from_its_own_callback(void **state)
{
    struct events e = {0};
    rl_redis_config_t config = config_for(&e);
    struct freeing f = {0};
    struct answer later = {0};
    const char *argv[1] = {"PING"};
    size_t lens[1] = {4};

    f.redis = client_at(&server, &config);
    assert_int_equal(rl_redis_command(f.redis, 1, argv, lens, free_from_callback, &f), 0);
    assert_int_equal(send_words(f.redis, &later, 1, "PING"), 0);
    wait_for(f.calls == 1);
    /* The command after it never gets its reply: it is told so. */
    assert_int_equal(later.calls, 1);
    assert_string_equal(later.text, "-");
    run_for(100);
    assert_int_equal(f.calls, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_locations),
        cmocka_unit_test(test_pipelined_commands_answer_in_order),
        cmocka_unit_test(test_subscriptions_arrive_as_pushes),
        cmocka_unit_test(test_auth_and_select),
        cmocka_unit_test(test_reconnects_after_a_restart),
        cmocka_unit_test(test_a_server_that_does_not_answer_counts_as_lost),
        cmocka_unit_test(test_caps),
        cmocka_unit_test(test_a_flushed_script_cache_falls_back_to_eval),
        cmocka_unit_test(test_freed_from_its_own_callback),
    };
    const char *location = getenv("RL_TEST_BUS"), *why = NULL;

    if (location == NULL || strncmp(location, "unix://", 7) != 0) {
        fprintf(stderr, "run this test through tests/support/redis.sh run, which starts a redis-server\n");
        return 1;
    }
    if (rl_redis_parse_location(location, &server, &why) != 0) {
        fprintf(stderr, "RL_TEST_BUS: %s\n", why);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    loop = h2o_evloop_create();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
