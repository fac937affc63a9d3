/*
 * The bus's contract (docs/internals/bus.md), as code: event ids, the
 * replay ring and its gaps, delivery to listening users, signals on topics,
 * presence, token buckets and leases. It runs against the bus at
 * RL_TEST_BUS ("local" when unset); RL_TEST_BUS_RESET, a shell command, is
 * run before each test to empty a shared bus. tests/support/redis.sh runs it
 * against a throwaway redis-server (ctest's bus/contract_redis), where cases
 * that need a shared bus run too: two buses ("nodes") on one Redis, a Redis
 * restart, a node that dies.
 *
 * A networked bus answers and delivers later than the local one, so the
 * cases wait for what they expect (wait_for) and, before asserting that
 * something did not arrive, let the bus settle: a signal on a fresh topic,
 * sent and received on the same bus, comes after everything published
 * before it and after every earlier subscription took effect.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "bus/bus.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/event.h"

#define WAIT_MS 5000

struct recorder {
    int64_t ids[64];
    char users[64][16];
    char frames[64][256];
    char last[256];
    int count;
    /* signals */
    char topics[16][64];
    char messages[16][128];
    int signals;
    int missed;       /* RL_BUS_MISSED deliveries */
    char barrier[32]; /* the settling signal this recorder waits for */
    int barrier_seen;
};

static struct recorder rec;
static h2o_loop_t *loop;
static const char *location = "local";
static int local;
static int barriers;

static int64_t mono_ms(void)
{
    return rl_clock_mono_us() / 1000;
}

/* Runs the loop until *flag is set, for at most ms; whether it was set. */
static int run_until(const int *flag, int64_t ms)
{
    int64_t deadline = mono_ms() + ms;

    while (!*flag && mono_ms() < deadline)
        h2o_evloop_run(loop, 10);
    return *flag;
}

/* Runs the loop for ms. */
static void run_for(int64_t ms)
{
    int never = 0;

    run_until(&never, ms);
}

#define wait_for(cond)                                                                                                 \
    do {                                                                                                               \
        int64_t deadline_ = mono_ms() + WAIT_MS;                                                                       \
        while (!(cond) && mono_ms() < deadline_)                                                                       \
            h2o_evloop_run(loop, 10);                                                                                  \
        assert_true(cond);                                                                                             \
    } while (0)

static void on_event(void *ctx, const char *user_id, int64_t id, rl_blob_t *frame)
{
    struct recorder *r = ctx;

    if (r->count == 64)
        return;
    snprintf(r->users[r->count], sizeof(r->users[0]), "%s", user_id);
    snprintf(r->frames[r->count], sizeof(r->frames[0]), "%s", frame->bytes);
    r->ids[r->count++] = id;
    snprintf(r->last, sizeof(r->last), "%s", frame->bytes);
}

static void on_signal(void *ctx, const char *topic, json_t *message)
{
    struct recorder *r = ctx;
    const char *type;
    char *text;

    if (strncmp(topic, "barrier:", 8) == 0) {
        if (strcmp(topic, r->barrier) == 0)
            r->barrier_seen = 1;
        return;
    }
    /* Counted apart: the bus says so where signals may have been lost (a Redis outage). */
    type = json_string_value(json_object_get(message, "type"));
    if (type != NULL && strcmp(type, RL_BUS_MISSED) == 0) {
        ++r->missed;
        return;
    }
    if (r->signals == 16)
        return;
    text = json_dumps(message, JSON_COMPACT | JSON_SORT_KEYS);
    snprintf(r->topics[r->signals], sizeof(r->topics[0]), "%s", topic);
    snprintf(r->messages[r->signals], sizeof(r->messages[0]), "%s", text);
    ++r->signals;
    free(text);
}

/* Lets the bus catch up: everything sent on it before has been delivered. */
static void settle_with(rl_bus_t *bus, struct recorder *r)
{
    int64_t deadline = mono_ms() + WAIT_MS;

    snprintf(r->barrier, sizeof(r->barrier), "barrier:%d", ++barriers);
    r->barrier_seen = 0;
    rl_bus_join(bus, r->barrier, 1);
    /* The first signals may go out before the subscription took effect: send again until one comes back. */
    while (!r->barrier_seen) {
        assert_true(mono_ms() < deadline);
        rl_bus_signal(bus, r->barrier, json_pack("{s:s}", "type", "barrier"));
        run_until(&r->barrier_seen, 100);
    }
    rl_bus_join(bus, r->barrier, 0);
}

static void settle(rl_bus_t *bus)
{
    settle_with(bus, &rec);
}

static rl_bus_t *node_new(struct recorder *r, size_t events, int64_t age_ms, size_t users, int64_t lease_ms)
{
    rl_bus_config_t config = {
        .max_events = events, .max_age_ms = age_ms, .max_users = users, .presence_lease_ms = lease_ms};
    rl_bus_t *bus = NULL;

    memset(r, 0, sizeof(*r));
    config.handlers.event = on_event;
    config.handlers.signal = on_signal;
    config.handlers.ctx = r;
    assert_int_equal(rl_bus_open(location, loop, &config, &bus), 0);
    return bus;
}

static rl_bus_t *bus_new(size_t events, int64_t age_ms, size_t users)
{
    return node_new(&rec, events, age_ms, users, 0);
}

static void publish(rl_bus_t *bus, const char *user, int n)
{
    rl_bus_publish(bus, user, "session_renamed", json_pack("{s:i}", "n", n));
}

struct reading {
    int calls, result, gap;
    int64_t newest, ids[64];
    char frames[64][256];
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
    for (i = 0; i < read->count && i < 64; ++i) {
        r->ids[i] = read->events[i].id;
        snprintf(r->frames[i], sizeof(r->frames[0]), "%s", read->events[i].frame->bytes);
    }
}

static struct reading read_after(rl_bus_t *bus, const char *user, int64_t after)
{
    struct reading r = {0};

    rl_bus_read(bus, user, after, 64, on_read, &r);
    /* Never inside the call. */
    assert_int_equal(r.calls, 0);
    run_until(&r.calls, WAIT_MS);
    assert_int_equal(r.calls, 1);
    return r;
}

/* The id of the user's newest event, or the position before the first one to come. */
static int64_t newest(rl_bus_t *bus, const char *user)
{
    return read_after(bus, user, 0).newest;
}

static int setup(void **state)
{
    const char *reset = getenv("RL_TEST_BUS_RESET");

    if (reset != NULL && reset[0] != '\0')
        assert_int_equal(system(reset), 0);
    return 0;
}

/* ---- every bus ------------------------------------------------------------------------------- */

static void test_live_delivery_and_encoding(void **state)
{
    rl_bus_t *bus = bus_new(8, 60000, 100);
    int64_t before = newest(bus, "alice");
    char expected[128];

    rl_bus_listen(bus, "alice", 1);
    rl_bus_listen(bus, "alice", 1);
    settle(bus);
    publish(bus, "alice", 1);
    publish(bus, "alice", 2);
    /* bob has no listener on this node: his events are kept, not delivered. */
    publish(bus, "bob", 1);
    settle(bus);
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
    settle(bus);
    assert_int_equal(rec.count, 3);
    rl_bus_listen(bus, "alice", 0);
    publish(bus, "alice", 4);
    settle(bus);
    assert_int_equal(rec.count, 3);
    assert_int_equal(read_after(bus, "bob", newest(bus, "bob") - 1).count, 1);
    rl_bus_close(bus);
}

/*
 * The bus carries the event (id, name, payload), not its record: whatever the
 * payload's strings hold (spaces, line breaks, what looks like another
 * record), a live delivery and a read of the ring give the record this
 * node's encoder builds from the same event. A name that is not a plain
 * token is refused before anything is stored.
 */
static void test_events_travel_as_id_name_payload(void **state)
{
    rl_bus_t *bus = bus_new(8, 60000, 100);
    json_t *data =
        json_pack("{s:s, s:s, s:i}", "text", "a b\n\nevent: forged\ndata: {}\n\n", "note", "caf\u00e9 \r", "n", 7);
    int64_t before = newest(bus, "erin");
    rl_blob_t *expected = rl_event_frame(before + 1, "message_delta", data);
    struct reading read;

    assert_non_null(expected);
    rl_bus_listen(bus, "erin", 1);
    settle(bus);
    rl_bus_publish(bus, "erin", "message_delta", json_incref(data));
    rl_bus_publish(bus, "erin", "two words", json_pack("{}"));
    rl_bus_publish(bus, "erin", "line\nbreak", json_pack("{}"));
    settle(bus);
    assert_int_equal(rec.count, 1);
    assert_int_equal(rec.ids[0], before + 1);
    assert_string_equal(rec.frames[0], expected->bytes);
    read = read_after(bus, "erin", before);
    assert_int_equal(read.result, 0);
    assert_int_equal(read.gap, 0);
    assert_int_equal(read.count, 1);
    assert_int_equal(read.newest, before + 1);
    assert_string_equal(read.frames[0], expected->bytes);
    rl_blob_release(expected);
    json_decref(data);
    rl_bus_listen(bus, "erin", 0);
    rl_bus_close(bus);
}

static void test_an_event_right_after_listen_is_delivered(void **state)
{
    rl_bus_t *bus = bus_new(8, 60000, 100);
    int64_t before = newest(bus, "dora");

    /* No settling in between: what this node publishes after listen() reaches it, in order. */
    rl_bus_listen(bus, "dora", 1);
    publish(bus, "dora", 1);
    publish(bus, "dora", 2);
    wait_for(rec.count == 2);
    assert_int_equal(rec.ids[0], before + 1);
    assert_int_equal(rec.ids[1], before + 2);
    settle(bus);
    assert_int_equal(rec.count, 2);
    /* Listening again after a stop: the same. */
    rl_bus_listen(bus, "dora", 0);
    rl_bus_listen(bus, "dora", 1);
    publish(bus, "dora", 3);
    wait_for(rec.count == 3);
    assert_int_equal(rec.ids[2], before + 3);
    rl_bus_close(bus);
}

/*
 * Many events of several users published in one loop turn (a networked bus
 * sends them together at its end): each user's arrive at a listening node in
 * publish order with consecutive ids, and the ring replays them all.
 */
static void test_a_turns_events_of_several_users_arrive_in_order(void **state)
{
    static const char *const users[3] = {"ula", "vic", "wes"};
    rl_bus_t *bus = bus_new(64, 60000, 100);
    int64_t before[3];
    int i, u, seen[3] = {0};

    for (u = 0; u < 3; ++u) {
        before[u] = newest(bus, users[u]);
        rl_bus_listen(bus, users[u], 1);
    }
    settle(bus);
    /* 20 events each, interleaved, without running the loop in between. */
    for (i = 0; i < 20; ++i) {
        for (u = 0; u < 3; ++u)
            publish(bus, users[u], i);
    }
    wait_for(rec.count == 60);
    settle(bus);
    assert_int_equal(rec.count, 60);
    for (i = 0; i < 60; ++i) {
        char data[32];
        for (u = 0; u < 3 && strcmp(rec.users[i], users[u]) != 0; ++u)
            ;
        assert_true(u < 3);
        assert_int_equal(rec.ids[i], before[u] + 1 + seen[u]);
        snprintf(data, sizeof(data), "data: {\"n\":%d}\n\n", seen[u]);
        assert_true(strstr(rec.frames[i], data) != NULL);
        ++seen[u];
    }
    for (u = 0; u < 3; ++u) {
        struct reading r = read_after(bus, users[u], before[u]);
        assert_int_equal(seen[u], 20);
        assert_false(r.gap);
        assert_int_equal(r.count, 20);
        assert_int_equal(r.newest, before[u] + 20);
        for (i = 0; i < 20; ++i)
            assert_int_equal(r.ids[i], before[u] + 1 + i);
        rl_bus_listen(bus, users[u], 0);
    }
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
    /* The ring's frames are the events' own records. */
    assert_true(strstr(r.frames[1], "data: {\"n\":3}\n\n") != NULL);
    assert_true(strncmp(r.frames[1], "id: ", 4) == 0);
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
    /*
     * With a zero window everything published is already too old to replay
     * (once the clock moved on). A networked bus sends a turn's events at its
     * end, which is their time: let the turn end first.
     */
    run_for(20);
    usleep(2000);
    rl_bus_sweep(bus, first / 1000 + 1000);
    assert_true(read_after(bus, "alice", first - 1).gap);
    /*
     * An idle user is forgotten; its next ids start well above the old ones,
     * even within the same millisecond. A networked bus forgets it when its
     * keys expire, a few replay windows later (here: 0 ms windows, plus a
     * second).
     */
    if (!local)
        run_for(1500);
    rl_bus_sweep(bus, first / 1000 + 1000);
    rl_bus_listen(bus, "alice", 1);
    settle(bus);
    publish(bus, "alice", 2);
    settle(bus);
    assert_int_equal(rec.count, 1);
    assert_true(rec.ids[0] > first + 1);
    rl_bus_close(bus);
}

static void test_signals_reach_joined_topics_on_the_next_turn(void **state)
{
    rl_bus_t *bus = bus_new(4, 60000, 10);

    rl_bus_join(bus, "installation:a", 1);
    rl_bus_join(bus, "installation:a", 1);
    settle(bus);
    rl_bus_signal(bus, "installation:a", json_pack("{s:s}", "type", "updates"));
    rl_bus_signal(bus, "installation:b", json_pack("{s:s}", "type", "updates"));
    assert_int_equal(rec.signals, 0);
    settle(bus);
    assert_int_equal(rec.signals, 1);
    assert_string_equal(rec.topics[0], "installation:a");
    assert_string_equal(rec.messages[0], "{\"type\":\"updates\"}");
    /* Joins nest. */
    rl_bus_join(bus, "installation:a", 0);
    rl_bus_signal(bus, "installation:a", json_pack("{s:s}", "type", "replaced"));
    settle(bus);
    assert_int_equal(rec.signals, 2);
    rl_bus_join(bus, "installation:a", 0);
    rl_bus_signal(bus, "installation:a", json_pack("{s:s}", "type", "replaced"));
    settle(bus);
    assert_int_equal(rec.signals, 2);
    rl_bus_close(bus);
}

static void test_a_signal_right_after_join_is_delivered(void **state)
{
    rl_bus_t *bus = bus_new(4, 60000, 10);
    int i;

    /* No settling in between: what this node signals after join() reaches it, once, in order. */
    rl_bus_join(bus, "installation:c", 1);
    for (i = 0; i < 3; ++i)
        rl_bus_signal(bus, "installation:c", json_pack("{s:s, s:i}", "type", "updates", "update_id", i + 1));
    wait_for(rec.signals == 3);
    assert_string_equal(rec.messages[0], "{\"type\":\"updates\",\"update_id\":1}");
    assert_string_equal(rec.messages[2], "{\"type\":\"updates\",\"update_id\":3}");
    settle(bus);
    assert_int_equal(rec.signals, 3);
    /* Joining again later does not bring back what was already sent. */
    rl_bus_join(bus, "installation:c", 0);
    rl_bus_join(bus, "installation:c", 1);
    rl_bus_signal(bus, "installation:c", json_pack("{s:s}", "type", "replaced"));
    wait_for(rec.signals == 4);
    settle(bus);
    assert_int_equal(rec.signals, 4);
    assert_string_equal(rec.messages[3], "{\"type\":\"replaced\"}");
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
    wait_for(cleared != -1);
    assert_int_equal(cleared, 0);
    assert_string_equal(rl_bus_presence_get(bus, "inst_a"), "degraded");
    cleared = -1;
    rl_bus_presence_clear(bus, "inst_a", "node2:1", on_cleared, &cleared);
    wait_for(cleared != -1);
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

static void take(rl_bus_t *bus, const char *key, double capacity, double refill, int64_t now, struct taken *t)
{
    int calls = t->calls;

    rl_bus_take(bus, key, capacity, refill, now, on_taken, t);
    wait_for(t->calls == calls + 1);
}

static void test_buckets_burst_then_refill(void **state)
{
    rl_bus_t *bus = bus_new(4, 60000, 10);
    struct taken t = {0};
    int64_t started = mono_ms();
    int i;

    /*
     * 10 tokens, 2 a second: a burst of ten, then one back every 500 ms. The
     * local bus counts by the now_ms it is given; a networked one by its own
     * clock, so that real time passes here and refills a little meanwhile.
     */
    for (i = 0; i < 10; ++i) {
        double refilled = local ? 0 : 2.0 * (double)(mono_ms() - started + 1) / 1000.0;
        take(bus, "installation/inst_a/approval", 10, 2, 1000000, &t);
        assert_int_equal(t.result, 0);
        assert_true(t.tokens > 8.99 - i && t.tokens < 9.01 - i + refilled);
    }
    take(bus, "installation/inst_a/approval", 10, 2, 1000000, &t);
    assert_int_equal(t.result, RL_E_RATE_LIMITED);
    /* Another key is another bucket. */
    take(bus, "installation/inst_b/approval", 10, 2, 1000000, &t);
    assert_int_equal(t.result, 0);
    take(bus, "installation/inst_a/approval", 10, 2, 1000499, &t);
    assert_int_equal(t.result, RL_E_RATE_LIMITED);
    if (!local)
        run_for(600);
    take(bus, "installation/inst_a/approval", 10, 2, 1000500, &t);
    assert_int_equal(t.result, 0);
    assert_int_equal(t.calls, 14);
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
    wait_for(held != -1);
    assert_int_equal(held, 1);
    rl_bus_close(bus);
}

/* ---- the local bus --------------------------------------------------------------------------- */

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

static void test_buckets_are_capped_and_swept(void **state)
{
    rl_bus_config_t config = {.max_events = 4, .max_age_ms = 60000, .max_users = 10, .max_buckets = 2};
    rl_bus_t *bus = NULL;
    struct taken t = {0};

    assert_int_equal(rl_bus_open("local", loop, &config, &bus), 0);
    take(bus, "a", 5, 1, 1000, &t);
    take(bus, "b", 5, 1, 1000, &t);
    /* Full, and neither bucket has refilled: a third key fails closed. */
    take(bus, "c", 5, 1, 1000, &t);
    assert_int_equal(t.result, RL_E_RATE_LIMITED);
    /* Once the others refilled they are dropped to make room. */
    take(bus, "c", 5, 1, 10000, &t);
    assert_int_equal(t.result, 0);
    rl_bus_close(bus);
}

/* ---- a shared bus: several nodes on one Redis ------------------------------------------------ */

static struct recorder rec_b, rec_c;

static void test_two_nodes_share_one_sequence(void **state)
{
    rl_bus_t *a = node_new(&rec, 8, 60000, 100, 0), *b = node_new(&rec_b, 8, 60000, 100, 0);
    int64_t before = newest(a, "alice");
    struct reading r;
    int i;

    /* Both nodes see the same position, whichever asks. */
    assert_int_equal(newest(b, "alice"), before);
    rl_bus_listen(b, "alice", 1);
    settle_with(b, &rec_b);
    publish(a, "alice", 1);
    settle_with(a, &rec);
    publish(b, "alice", 2);
    settle_with(b, &rec_b);
    publish(a, "alice", 3);
    settle_with(a, &rec);
    settle_with(b, &rec_b);
    /* One sequence: consecutive ids, in the order the events were published, whichever node published them. */
    assert_int_equal(rec_b.count, 3);
    for (i = 0; i < 3; ++i) {
        char data[32];
        assert_int_equal(rec_b.ids[i], before + 1 + i);
        snprintf(data, sizeof(data), "data: {\"n\":%d}", i + 1);
        assert_true(strstr(rec_b.frames[i], data) != NULL);
    }
    /* Node a, which does not listen, got nothing live, and its ring holds the very frames b got. */
    assert_int_equal(rec.count, 0);
    r = read_after(a, "alice", before);
    assert_false(r.gap);
    assert_int_equal(r.count, 3);
    for (i = 0; i < 3; ++i)
        assert_string_equal(r.frames[i], rec_b.frames[i]);
    /* A resume from b's last id on a: nothing missed. */
    r = read_after(a, "alice", rec_b.ids[2]);
    assert_false(r.gap);
    assert_int_equal(r.count, 0);
    rl_bus_close(a);
    rl_bus_close(b);
}

static void test_two_nodes_share_signals_presence_buckets_and_leases(void **state)
{
    rl_bus_t *a = node_new(&rec, 8, 60000, 100, 0), *b = node_new(&rec_b, 8, 60000, 100, 0), *c;
    struct taken t = {0};
    int cleared = -1, held = -1;

    /* Signals: a joined, b sends. */
    rl_bus_join(a, "installation:x", 1);
    settle_with(a, &rec);
    rl_bus_signal(b, "installation:x", json_pack("{s:s}", "type", "updates"));
    settle_with(b, &rec_b);
    settle_with(a, &rec);
    assert_int_equal(rec.signals, 1);
    assert_string_equal(rec.topics[0], "installation:x");
    assert_int_equal(rec_b.signals, 0);

    /* Presence set on a is seen on b. */
    rl_bus_presence_set(a, "inst_p", "node_a:1", "healthy");
    wait_for(strcmp(rl_bus_presence_get(b, "inst_p"), "healthy") == 0);
    /* A newer socket on b takes over; a sees it. */
    rl_bus_presence_set(b, "inst_p", "node_b:1", "degraded");
    wait_for(strcmp(rl_bus_presence_get(a, "inst_p"), "degraded") == 0);
    /* The replaced socket's late health change cannot take it back. */
    rl_bus_presence_set(a, "inst_p", "node_a:1", "healthy");
    settle_with(a, &rec);
    settle_with(b, &rec_b);
    assert_string_equal(rl_bus_presence_get(a, "inst_p"), "degraded");
    assert_string_equal(rl_bus_presence_get(b, "inst_p"), "degraded");
    /* Nor does its clear. */
    rl_bus_presence_clear(a, "inst_p", "node_a:1", on_cleared, &cleared);
    wait_for(cleared != -1);
    assert_int_equal(cleared, 0);
    /* A node that starts now loads what is there. */
    c = node_new(&rec_c, 8, 60000, 100, 0);
    wait_for(strcmp(rl_bus_presence_get(c, "inst_p"), "degraded") == 0);
    /* The owner's clear is seen everywhere. */
    cleared = -1;
    rl_bus_presence_clear(b, "inst_p", "node_b:1", on_cleared, &cleared);
    wait_for(cleared != -1);
    assert_int_equal(cleared, 1);
    wait_for(strcmp(rl_bus_presence_get(a, "inst_p"), "offline") == 0);
    wait_for(strcmp(rl_bus_presence_get(c, "inst_p"), "offline") == 0);

    /*
     * One bucket for every node, each serving from its leased share: 3
     * tokens, taken twice on a; b takes the last one, and none is left on
     * either (the waits are from the settlements before leases: the bucket
     * is exact without them).
     */
    take(a, "bridge/inst_p/msg", 3, 0.001, 0, &t);
    take(a, "bridge/inst_p/msg", 3, 0.001, 0, &t);
    run_for(600);
    take(b, "bridge/inst_p/msg", 3, 0.001, 0, &t);
    assert_int_equal(t.result, 0);
    take(b, "bridge/inst_p/msg", 3, 0.001, 0, &t);
    assert_int_equal(t.result, RL_E_RATE_LIMITED);
    run_for(600);
    take(a, "bridge/inst_p/msg", 3, 0.001, 0, &t);
    assert_int_equal(t.result, RL_E_RATE_LIMITED);

    /* One holder of a lease at a time; the holder renews it. */
    rl_bus_lease(a, "sweeps", "node_a", 5000, on_lease, &held);
    wait_for(held != -1);
    assert_int_equal(held, 1);
    held = -1;
    rl_bus_lease(b, "sweeps", "node_b", 5000, on_lease, &held);
    wait_for(held != -1);
    assert_int_equal(held, 0);
    held = -1;
    rl_bus_lease(a, "sweeps", "node_a", 5000, on_lease, &held);
    wait_for(held != -1);
    assert_int_equal(held, 1);
    /* A lease that lapses goes to the next one who asks. */
    held = -1;
    rl_bus_lease(a, "short", "node_a", 100, on_lease, &held);
    wait_for(held != -1);
    assert_int_equal(held, 1);
    run_for(200);
    held = -1;
    rl_bus_lease(b, "short", "node_b", 100, on_lease, &held);
    wait_for(held != -1);
    assert_int_equal(held, 1);
    rl_bus_close(a);
    rl_bus_close(b);
    rl_bus_close(c);
}

static void test_a_dead_nodes_presence_lapses(void **state)
{
    /* A 600 ms lease, renewed every 200 ms by the node that set it. */
    rl_bus_t *a = node_new(&rec, 8, 60000, 100, 600), *b = node_new(&rec_b, 8, 60000, 100, 600);

    rl_bus_presence_set(a, "inst_d", "node_a:1", "healthy");
    wait_for(strcmp(rl_bus_presence_get(b, "inst_d"), "healthy") == 0);
    /* Renewed: still there well after one lease. */
    run_for(1500);
    assert_string_equal(rl_bus_presence_get(b, "inst_d"), "healthy");
    /* Node a dies without clearing anything: b stops believing it within a lease or so. */
    rl_bus_close(a);
    wait_for(strcmp(rl_bus_presence_get(b, "inst_d"), "offline") == 0);
    rl_bus_close(b);
}

static void on_read_result(int result, const rl_bus_read_t *read, void *arg)
{
    *(int *)arg = result;
}

static void on_taken_result(int result, double tokens, void *arg)
{
    *(int *)arg = result;
}

/*
 * A ring member written before events travelled as (id, name, data) holds
 * the finished record; a node of this version replays it as it is, so that
 * a stream resumes across an upgrade of the nodes (docs/internals/bus.md).
 */
static void test_a_ring_written_before_the_upgrade_replays(void **state)
{
    const char *dir = getenv("RL_TEST_REDIS_DIR");
    const char *record = "id: 41\nevent: message_delta\ndata: {\"n\":41}\n\n";
    rl_bus_t *bus = bus_new(8, 60000, 100);
    char command[1024];
    struct reading r;

    assert_non_null(dir);
    snprintf(
        command, sizeof(command),
        "redis-cli -s '%s/redis.sock' ZADD relay:ev:ring:olga 41 \"%lld id: 41\nevent: message_delta\ndata: "
        "{\\\"n\\\":41}\n\n\" >/dev/null && redis-cli -s '%s/redis.sock' HSET relay:ev:n:olga first 41 last 41 >/dev/null",
        dir, (long long)(rl_clock_now_ms()), dir);
    assert_int_equal(system(command), 0);
    r = read_after(bus, "olga", 40);
    assert_int_equal(r.result, 0);
    assert_false(r.gap);
    assert_int_equal(r.count, 1);
    assert_int_equal(r.ids[0], 41);
    assert_string_equal(r.frames[0], record);
    rl_bus_close(bus);
}

static void test_redis_restart(void **state)
{
    const char *stop = getenv("RL_TEST_REDIS_STOP"), *start = getenv("RL_TEST_REDIS_START");
    rl_bus_t *a = node_new(&rec, 8, 60000, 100, 0), *b = node_new(&rec_b, 8, 60000, 100, 0);
    int64_t before;
    int result, held, calls;

    assert_non_null(stop);
    assert_non_null(start);
    rl_bus_listen(a, "alice", 1);
    rl_bus_join(a, "installation:r", 1);
    rl_bus_presence_set(a, "inst_r", "node_a:1", "healthy");
    wait_for(strcmp(rl_bus_presence_get(b, "inst_r"), "healthy") == 0);
    settle(a);
    publish(b, "alice", 1);
    settle_with(b, &rec_b);
    settle(a);
    assert_int_equal(rec.count, 1);
    before = rec.ids[0];

    assert_int_equal(system(stop), 0);
    /* Down: reads and takes answer 503's error (later, never inside the call), a lease is not held. */
    result = 1;
    rl_bus_read(a, "alice", before, 64, on_read_result, &result);
    assert_int_equal(result, 1);
    wait_for(result != 1);
    assert_int_equal(result, RL_E_UNAVAILABLE);
    result = 1;
    rl_bus_take(a, "ip/1/pairing", 20, 1, 0, on_taken_result, &result);
    wait_for(result != 1);
    assert_int_equal(result, RL_E_UNAVAILABLE);
    held = -1;
    rl_bus_lease(a, "sweeps", "node_a", 5000, on_lease, &held);
    wait_for(held != -1);
    assert_int_equal(held, 0);
    /* Publishing and signalling are dropped, not queued; presence is answered from what the node knows. */
    publish(a, "alice", 2);
    rl_bus_signal(a, "installation:r", json_pack("{s:s}", "type", "updates"));
    assert_string_equal(rl_bus_presence_get(a, "inst_r"), "healthy");
    assert_string_equal(rl_bus_presence_get(b, "inst_r"), "healthy");
    run_for(300);

    /* Back (empty: no persistence). Everything recovers by itself. */
    assert_int_equal(system(start), 0);
    result = 1;
    {
        int64_t deadline = mono_ms() + 15000;
        while (result != 0 && mono_ms() < deadline) {
            result = 1;
            rl_bus_take(a, "ip/1/pairing", 20, 1, 0, on_taken_result, &result);
            wait_for(result != 1);
            if (result != 0)
                run_for(100);
        }
        assert_int_equal(result, 0);
    }
    /* a subscribed again: an event published on b reaches it, with an id above every earlier one. */
    calls = rec.count;
    settle(a);
    settle_with(b, &rec_b);
    publish(b, "alice", 3);
    settle_with(b, &rec_b);
    settle(a);
    assert_int_equal(rec.count, calls + 1);
    assert_true(rec.ids[rec.count - 1] > before);
    assert_true(strstr(rec.last, "data: {\"n\":3}") != NULL);
    /* The old id is not in the new ring: a resume from it is a gap. */
    assert_true(read_after(a, "alice", before).gap);
    /*
     * Signals flow again. The topic was told twice that signals may have been lost: once by a's subscription
     * coming back, once by a itself, which could not send the signal above.
     */
    rl_bus_signal(b, "installation:r", json_pack("{s:s}", "type", "updates"));
    settle_with(b, &rec_b);
    settle(a);
    assert_int_equal(rec.signals, 1);
    assert_int_equal(rec.missed, 2);
    /* a stated its presence again, and b loaded it again. */
    wait_for(strcmp(rl_bus_presence_get(b, "inst_r"), "healthy") == 0);
    {
        int cleared = -1;
        rl_bus_presence_clear(a, "inst_r", "node_a:1", on_cleared, &cleared);
        wait_for(cleared != -1);
        assert_int_equal(cleared, 1);
    }
    wait_for(strcmp(rl_bus_presence_get(b, "inst_r"), "offline") == 0);
    rl_bus_close(a);
    rl_bus_close(b);
}

/*
 * Buckets from leased shares: once a node leased a share of a bucket, takes
 * are answered inside the call without a call to Redis, and one renewal per
 * half lease carries every bucket. While Redis is away outage slices serve
 * for the grace (here 1 s), buckets this node did not know included; past
 * it, take answers RL_E_UNAVAILABLE. Once back, each bucket is leased again.
 */
/*
 * The settlement visits the leased shares and, of the others, those idle
 * for long (src/bus/bus_redis.c, settle_shares): a bucket in use stays
 * leased and renewed, one left idle is given back and then forgotten, making
 * room for a new one under max_buckets.
 */
static void test_idle_bucket_shares_are_forgotten_and_busy_ones_kept(void **state)
{
    rl_bus_config_t config = {
        .max_events = 8, .max_age_ms = 60000, .max_users = 100, .max_buckets = 2, .bucket_settle_ms = 50};
    rl_bus_t *bus = NULL;
    struct taken t = {0};
    int64_t until;
    uint64_t calls;
    int takes = 0;

    assert_int_equal(rl_bus_open(location, loop, &config, &bus), 0);
    take(bus, "user/busy/default", 1000, 100, 0, &t);
    assert_int_equal(t.result, 0);
    take(bus, "user/idle/default", 5, 1, 0, &t);
    assert_int_equal(t.result, 0);
    /* Two buckets kept: a third fails closed. */
    take(bus, "user/new/default", 5, 1, 0, &t);
    assert_int_equal(t.result, RL_E_RATE_LIMITED);
    /* The busy one taken from for longer than a bucket is kept idle (10 s): from its share, renewed. */
    calls = rl_bus_calls_total();
    until = mono_ms() + 11500;
    while (mono_ms() < until) {
        take(bus, "user/busy/default", 1000, 100, 0, &t);
        assert_int_equal(t.result, 0);
        ++takes;
        run_for(100);
    }
    calls = rl_bus_calls_total() - calls;
    print_message("%d takes, %llu bus calls\n", takes, (unsigned long long)calls);
    /* A renewal every half lease at most, the idle one's return, the node's say-live: never a call per take. */
    assert_true(calls < (uint64_t)takes / 2);
    /* The idle one was forgotten: the new bucket fits. */
    take(bus, "user/new/default", 5, 1, 0, &t);
    assert_int_equal(t.result, 0);
    rl_bus_close(bus);
}

static void test_bucket_shares_spare_round_trips_and_outlive_an_outage(void **state)
{
    const char *stop = getenv("RL_TEST_REDIS_STOP"), *start = getenv("RL_TEST_REDIS_START");
    rl_bus_config_t config = {.max_events = 8, .max_age_ms = 60000, .max_users = 100, .bucket_grace_ms = 1000};
    rl_bus_t *bus = NULL;
    struct taken t = {0};
    uint64_t calls;
    int i, keys;

    assert_non_null(stop);
    assert_non_null(start);
    memset(&rec, 0, sizeof(rec));
    assert_int_equal(rl_bus_open(location, loop, &config, &bus), 0);
    /* The first take of each bucket asks Redis. */
    for (keys = 0; keys < 20; ++keys) {
        char key[32];
        snprintf(key, sizeof(key), "user/u%d/default", keys);
        take(bus, key, 1000, 1, 0, &t);
        assert_int_equal(t.result, 0);
    }
    /* Then 2 000 takes over 20 buckets and about a second: a renewal or two, no call per take. */
    calls = rl_bus_calls_total();
    for (i = 0; i < 2000; ++i) {
        char key[32];
        int before = t.calls;
        snprintf(key, sizeof(key), "user/u%d/default", i % keys);
        rl_bus_take(bus, key, 1000, 1, 0, on_taken, &t);
        /* Inside the call. */
        assert_int_equal(t.calls, before + 1);
        assert_int_equal(t.result, 0);
        if (i % 200 == 0)
            run_for(100);
    }
    /* One node alone leases each whole bucket: renewals only, all 20 buckets in one call every half lease. */
    assert_true(rl_bus_calls_total() - calls <= 6);
    assert_true(rl_bus_calls_total() - calls >= 1);

    assert_int_equal(system(stop), 0);
    /* Away: a known bucket and a new one are served from shares... */
    take(bus, "user/u1/default", 1000, 1, 0, &t);
    assert_int_equal(t.result, 0);
    take(bus, "user/new/default", 2, 0.001, 0, &t);
    assert_int_equal(t.result, 0);
    take(bus, "user/new/default", 2, 0.001, 0, &t);
    take(bus, "user/new/default", 2, 0.001, 0, &t);
    /* ...which stay buckets... */
    assert_int_equal(t.result, RL_E_RATE_LIMITED);
    /* ...until the grace ends. */
    run_for(1100);
    take(bus, "user/u1/default", 1000, 1, 0, &t);
    assert_int_equal(t.result, RL_E_UNAVAILABLE);
    take(bus, "user/other/default", 1000, 1, 0, &t);
    assert_int_equal(t.result, RL_E_UNAVAILABLE);

    assert_int_equal(system(start), 0);
    {
        int64_t deadline = mono_ms() + 15000;
        do {
            run_for(100);
            take(bus, "user/u1/default", 1000, 1, 0, &t);
        } while (t.result != 0 && mono_ms() < deadline);
        assert_int_equal(t.result, 0);
    }
    /* Redis came back empty: the bucket is full again there, as the node now knows. */
    assert_true(t.tokens > 990);
    rl_bus_close(bus);
}

int main(void)
{
    const struct CMUnitTest every_bus[] = {
        cmocka_unit_test_setup(test_live_delivery_and_encoding, setup),
        cmocka_unit_test_setup(test_events_travel_as_id_name_payload, setup),
        cmocka_unit_test_setup(test_an_event_right_after_listen_is_delivered, setup),
        cmocka_unit_test_setup(test_a_turns_events_of_several_users_arrive_in_order, setup),
        cmocka_unit_test_setup(test_exact_replay, setup),
        cmocka_unit_test_setup(test_gaps, setup),
        cmocka_unit_test_setup(test_age_limit_and_sweep, setup),
        cmocka_unit_test_setup(test_signals_reach_joined_topics_on_the_next_turn, setup),
        cmocka_unit_test_setup(test_a_signal_right_after_join_is_delivered, setup),
        cmocka_unit_test_setup(test_presence_belongs_to_its_owner, setup),
        cmocka_unit_test_setup(test_buckets_burst_then_refill, setup),
        cmocka_unit_test_setup(test_one_node_holds_every_lease, setup),
    };
    const struct CMUnitTest local_bus[] = {
        cmocka_unit_test(test_user_cap),
        cmocka_unit_test(test_buckets_are_capped_and_swept),
    };
    const struct CMUnitTest shared_bus[] = {
        cmocka_unit_test_setup(test_two_nodes_share_one_sequence, setup),
        cmocka_unit_test_setup(test_two_nodes_share_signals_presence_buckets_and_leases, setup),
        cmocka_unit_test_setup(test_a_dead_nodes_presence_lapses, setup),
        cmocka_unit_test_setup(test_redis_restart, setup),
        cmocka_unit_test_setup(test_bucket_shares_spare_round_trips_and_outlive_an_outage, setup),
        cmocka_unit_test_setup(test_idle_bucket_shares_are_forgotten_and_busy_ones_kept, setup),
        cmocka_unit_test_setup(test_a_ring_written_before_the_upgrade_replays, setup),
    };
    const char *other = getenv("RL_TEST_BUS");
    int failed;

    if (other != NULL && other[0] != '\0')
        location = other;
    local = strcmp(location, "local") == 0;
    /* As in relayd: a write to a server that went away is an error to handle, not a signal that kills. */
    signal(SIGPIPE, SIG_IGN);
    loop = h2o_evloop_create();
    failed = cmocka_run_group_tests_name("every bus", every_bus, NULL, NULL);
    if (local)
        failed += cmocka_run_group_tests_name("the local bus", local_bus, NULL, NULL);
    else
        failed += cmocka_run_group_tests_name("a shared bus", shared_bus, NULL, NULL);
    return failed;
}
