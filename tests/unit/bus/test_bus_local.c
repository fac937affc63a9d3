/*
 * The in-process bus: event ids, the replay ring and its gaps, delivery to
 * listening users, signals on topics, presence. Runs a real h2o loop for
 * what the bus answers on the next turn.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bus/bus.h"
#include "common/error.h"

struct recorder {
    int64_t ids[64];
    char users[64][16];
    char last[256];
    int count;
    /* signals */
    char topics[16][64];
    char messages[16][128];
    int signals;
};

static struct recorder rec;
static h2o_loop_t *loop;

static void on_event(void *ctx, const char *user_id, int64_t id, rl_blob_t *frame)
{
    struct recorder *r = ctx;

    snprintf(r->users[r->count], sizeof(r->users[0]), "%s", user_id);
    r->ids[r->count++] = id;
    snprintf(r->last, sizeof(r->last), "%s", frame->bytes);
}

static void on_signal(void *ctx, const char *topic, json_t *message)
{
    struct recorder *r = ctx;
    char *text = json_dumps(message, JSON_COMPACT | JSON_SORT_KEYS);

    snprintf(r->topics[r->signals], sizeof(r->topics[0]), "%s", topic);
    snprintf(r->messages[r->signals], sizeof(r->messages[0]), "%s", text);
    ++r->signals;
    free(text);
}

static rl_bus_t *bus_new(size_t events, int64_t age_ms, size_t users)
{
    rl_bus_config_t config = {.max_events = events, .max_age_ms = age_ms, .max_users = users};
    rl_bus_t *bus = NULL;

    memset(&rec, 0, sizeof(rec));
    config.handlers.event = on_event;
    config.handlers.signal = on_signal;
    config.handlers.ctx = &rec;
    assert_int_equal(rl_bus_open("local", loop, &config, &bus), 0);
    return bus;
}

/* Runs the loop until what the bus deferred has run. */
static void turn(void)
{
    int i;

    for (i = 0; i < 3; ++i)
        h2o_evloop_run(loop, 1);
}

static void publish(rl_bus_t *bus, const char *user, int n)
{
    rl_bus_publish(bus, user, "session_renamed", json_pack("{s:i}", "n", n));
}

struct reading {
    int calls, result, gap;
    int64_t newest, ids[64];
    size_t count;
};

static void on_read(int result, const rl_bus_read_t *read, void *arg)
{
    struct reading *r = arg;
    size_t i;

    ++r->calls;
    r->result = result;
    if (result != 0)
        return;
    r->gap = read->gap;
    r->newest = read->newest;
    r->count = read->count;
    for (i = 0; i < read->count; ++i)
        r->ids[i] = read->events[i].id;
}

static struct reading read_after(rl_bus_t *bus, const char *user, int64_t after)
{
    struct reading r = {0};

    rl_bus_read(bus, user, after, 64, on_read, &r);
    /* Never inside the call. */
    assert_int_equal(r.calls, 0);
    turn();
    assert_int_equal(r.calls, 1);
    return r;
}

/* The id of the user's newest event, or the position before the first one to come. */
static int64_t newest(rl_bus_t *bus, const char *user)
{
    return read_after(bus, user, 0).newest;
}

static void test_live_delivery_and_encoding(void **state)
{
    rl_bus_t *bus = bus_new(8, 60000, 100);
    int64_t before = newest(bus, "alice");
    char expected[128];

    rl_bus_listen(bus, "alice", 1);
    rl_bus_listen(bus, "alice", 1);
    publish(bus, "alice", 1);
    publish(bus, "alice", 2);
    /* bob has no listener on this node: his events are kept, not delivered. */
    publish(bus, "bob", 1);
    assert_int_equal(rec.count, 2);
    assert_int_equal(rec.ids[0], before + 1);
    assert_int_equal(rec.ids[1], before + 2);
    assert_string_equal(rec.users[1], "alice");
    snprintf(expected, sizeof(expected), "id: %lld\nevent: session_renamed\ndata: {\"n\":2}\n\n",
             (long long)(before + 2));
    assert_string_equal(rec.last, expected);
    /* Listening nests: one stop leaves the other listener. */
    rl_bus_listen(bus, "alice", 0);
    publish(bus, "alice", 3);
    assert_int_equal(rec.count, 3);
    rl_bus_listen(bus, "alice", 0);
    publish(bus, "alice", 4);
    assert_int_equal(rec.count, 3);
    assert_int_equal(read_after(bus, "bob", newest(bus, "bob") - 1).count, 1);
    rl_bus_close(bus);
}

static void test_exact_replay(void **state)
{
    rl_bus_t *bus = bus_new(8, 60000, 100);
    int64_t first = newest(bus, "alice") + 1;
    struct reading r;

    publish(bus, "alice", 1);
    publish(bus, "alice", 2);
    publish(bus, "alice", 3);
    r = read_after(bus, "alice", first);
    assert_int_equal(r.result, 0);
    assert_false(r.gap);
    assert_int_equal(r.count, 2);
    assert_int_equal(r.ids[0], first + 1);
    assert_int_equal(r.ids[1], first + 2);
    assert_int_equal(r.newest, first + 2);
    /* Resuming from the newest id replays nothing and is still exact. */
    r = read_after(bus, "alice", first + 2);
    assert_false(r.gap);
    assert_int_equal(r.count, 0);
    /* And the id just before the first one covers the whole ring. */
    r = read_after(bus, "alice", first - 1);
    assert_false(r.gap);
    assert_int_equal(r.count, 3);
    rl_bus_close(bus);
}

static void test_gaps(void **state)
{
    rl_bus_t *bus = bus_new(3, 60000, 100);
    int64_t first = newest(bus, "alice") + 1;
    struct reading r;
    int i;

    for (i = 1; i <= 5; ++i)
        publish(bus, "alice", i);
    /* Only the last 3 are kept: resuming after the first would skip two events. */
    assert_true(read_after(bus, "alice", first).gap);
    /* After the last evicted one, it is exact again. */
    r = read_after(bus, "alice", first + 1);
    assert_false(r.gap);
    assert_int_equal(r.count, 3);
    /* A reader that falls behind while reading learns that its next event is gone. */
    publish(bus, "alice", 6);
    publish(bus, "alice", 7);
    r = read_after(bus, "alice", first + 2);
    assert_true(r.gap);
    assert_int_equal(r.newest, first + 6);
    /* Ids this ring never issued: from the future, or from an earlier process. */
    assert_true(read_after(bus, "alice", first + 100).gap);
    assert_true(read_after(bus, "alice", 12345).gap);
    /* A user with no events yet: any remembered id is from elsewhere. */
    assert_true(read_after(bus, "carol", 1).gap);
    rl_bus_close(bus);
}

static void test_age_limit_and_sweep(void **state)
{
    rl_bus_t *bus = bus_new(8, 0, 100);
    int64_t first = newest(bus, "alice") + 1;

    publish(bus, "alice", 1);
    /* With a zero window everything published is already too old to replay. */
    rl_bus_sweep(bus, first / 1000 + 1000);
    assert_true(read_after(bus, "alice", first - 1).gap);
    /* An idle user is forgotten; its next ids start well above the old ones, even within the same millisecond. */
    rl_bus_sweep(bus, first / 1000 + 1000);
    rl_bus_listen(bus, "alice", 1);
    publish(bus, "alice", 2);
    assert_int_equal(rec.count, 1);
    assert_true(rec.ids[0] > first + 1);
    rl_bus_close(bus);
}

static void test_user_cap(void **state)
{
    rl_bus_t *bus = bus_new(4, 60000, 2);

    publish(bus, "a", 1);
    publish(bus, "b", 1);
    /* A third user does not fit: the event is dropped and the ring cannot be read. */
    publish(bus, "c", 1);
    assert_int_equal(read_after(bus, "a", 0).result, 0);
    assert_int_equal(read_after(bus, "c", 0).result, RL_E_UNAVAILABLE);
    rl_bus_close(bus);
}

static void test_signals_reach_joined_topics_on_the_next_turn(void **state)
{
    rl_bus_t *bus = bus_new(4, 60000, 10);

    rl_bus_join(bus, "installation:a", 1);
    rl_bus_join(bus, "installation:a", 1);
    rl_bus_signal(bus, "installation:a", json_pack("{s:s}", "type", "updates"));
    rl_bus_signal(bus, "installation:b", json_pack("{s:s}", "type", "updates"));
    assert_int_equal(rec.signals, 0);
    turn();
    assert_int_equal(rec.signals, 1);
    assert_string_equal(rec.topics[0], "installation:a");
    assert_string_equal(rec.messages[0], "{\"type\":\"updates\"}");
    /* Joins nest. */
    rl_bus_join(bus, "installation:a", 0);
    rl_bus_signal(bus, "installation:a", json_pack("{s:s}", "type", "replaced"));
    turn();
    assert_int_equal(rec.signals, 2);
    rl_bus_join(bus, "installation:a", 0);
    rl_bus_signal(bus, "installation:a", json_pack("{s:s}", "type", "replaced"));
    turn();
    assert_int_equal(rec.signals, 2);
    rl_bus_close(bus);
}

static void on_cleared(int cleared, void *arg)
{
    *(int *)arg = cleared;
}

static void test_presence_belongs_to_its_owner(void **state)
{
    rl_bus_t *bus = bus_new(4, 60000, 10);
    int cleared = -1;

    assert_string_equal(rl_bus_presence_get(bus, "inst_a"), "offline");
    rl_bus_presence_set(bus, "inst_a", "node1:1", "healthy");
    assert_string_equal(rl_bus_presence_get(bus, "inst_a"), "healthy");
    /* A newer connection takes the installation over. */
    rl_bus_presence_set(bus, "inst_a", "node2:1", "degraded");
    assert_string_equal(rl_bus_presence_get(bus, "inst_a"), "degraded");
    /* The older one going away does not make it offline. */
    rl_bus_presence_clear(bus, "inst_a", "node1:1", on_cleared, &cleared);
    assert_int_equal(cleared, -1);
    turn();
    assert_int_equal(cleared, 0);
    assert_string_equal(rl_bus_presence_get(bus, "inst_a"), "degraded");
    rl_bus_presence_clear(bus, "inst_a", "node2:1", on_cleared, &cleared);
    turn();
    assert_int_equal(cleared, 1);
    assert_string_equal(rl_bus_presence_get(bus, "inst_a"), "offline");
    rl_bus_close(bus);
}

struct taken {
    int calls, result;
    double tokens;
};

static void on_taken(int result, double tokens, void *arg)
{
    struct taken *t = arg;

    ++t->calls;
    t->result = result;
    t->tokens = tokens;
}

static void test_buckets_burst_then_refill(void **state)
{
    rl_bus_t *bus = bus_new(4, 60000, 10);
    struct taken t = {0};
    int i;

    /* 10 tokens, 2 a second: a burst of ten, then one back every 500 ms. */
    for (i = 0; i < 10; ++i) {
        rl_bus_take(bus, "installation/inst_a/approval", 10, 2, 1000000, on_taken, &t);
        turn();
        assert_int_equal(t.result, 0);
        assert_true(t.tokens > 8.99 - i && t.tokens < 9.01 - i);
    }
    rl_bus_take(bus, "installation/inst_a/approval", 10, 2, 1000000, on_taken, &t);
    turn();
    assert_int_equal(t.result, RL_E_RATE_LIMITED);
    /* Another key is another bucket. */
    rl_bus_take(bus, "installation/inst_b/approval", 10, 2, 1000000, on_taken, &t);
    turn();
    assert_int_equal(t.result, 0);
    rl_bus_take(bus, "installation/inst_a/approval", 10, 2, 1000499, on_taken, &t);
    turn();
    assert_int_equal(t.result, RL_E_RATE_LIMITED);
    rl_bus_take(bus, "installation/inst_a/approval", 10, 2, 1000500, on_taken, &t);
    turn();
    assert_int_equal(t.result, 0);
    assert_int_equal(t.calls, 14);
    rl_bus_close(bus);
}

static void test_buckets_are_capped_and_swept(void **state)
{
    rl_bus_config_t config = {.max_events = 4, .max_age_ms = 60000, .max_users = 10, .max_buckets = 2};
    rl_bus_t *bus = NULL;
    struct taken t = {0};

    assert_int_equal(rl_bus_open("local", loop, &config, &bus), 0);
    rl_bus_take(bus, "a", 5, 1, 1000, on_taken, &t);
    turn();
    rl_bus_take(bus, "b", 5, 1, 1000, on_taken, &t);
    turn();
    /* Full, and neither bucket has refilled: a third key fails closed. */
    rl_bus_take(bus, "c", 5, 1, 1000, on_taken, &t);
    turn();
    assert_int_equal(t.result, RL_E_RATE_LIMITED);
    /* Once the others refilled they are dropped to make room. */
    rl_bus_take(bus, "c", 5, 1, 10000, on_taken, &t);
    turn();
    assert_int_equal(t.result, 0);
    rl_bus_close(bus);
}

static void on_lease(int held, void *arg)
{
    *(int *)arg = held;
}

static void test_one_node_holds_every_lease(void **state)
{
    rl_bus_t *bus = bus_new(4, 60000, 10);
    int held = -1;

    rl_bus_lease(bus, "sweeps", "node_a", 3000, on_lease, &held);
    turn();
    assert_int_equal(held, 1);
    rl_bus_close(bus);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_live_delivery_and_encoding),
        cmocka_unit_test(test_exact_replay),
        cmocka_unit_test(test_gaps),
        cmocka_unit_test(test_age_limit_and_sweep),
        cmocka_unit_test(test_user_cap),
        cmocka_unit_test(test_signals_reach_joined_topics_on_the_next_turn),
        cmocka_unit_test(test_presence_belongs_to_its_owner),
        cmocka_unit_test(test_buckets_burst_then_refill),
        cmocka_unit_test(test_buckets_are_capped_and_swept),
        cmocka_unit_test(test_one_node_holds_every_lease),
    };
    int failed;

    loop = h2o_evloop_create();
    failed = cmocka_run_group_tests(tests, NULL, NULL);
    return failed;
}
