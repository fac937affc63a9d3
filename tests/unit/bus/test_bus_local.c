/* The in-process bus: ids, the replay ring, and when a Last-Event-ID can be resumed. */
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
    rl_bus_subscriber_t sub;
    int64_t ids[64];
    char last[256];
    int count;
};

static void record(rl_bus_subscriber_t *sub, int64_t id, rl_blob_t *frame)
{
    struct recorder *r = (struct recorder *)sub;

    r->ids[r->count++] = id;
    snprintf(r->last, sizeof(r->last), "%s", frame->bytes);
}

static rl_bus_t *bus_new(size_t events, int64_t age_ms)
{
    rl_bus_config_t config = {.max_events = events, .max_age_ms = age_ms, .max_users = 100};

    return rl_bus_new(&config);
}

static int64_t publish(rl_bus_t *bus, const char *user, int n)
{
    return rl_bus_publish(bus, user, "session_renamed", json_pack("{s:i}", "n", n));
}

static void test_live_delivery_and_encoding(void **state)
{
    rl_bus_t *bus = bus_new(8, 60000);
    struct recorder a = {.sub.deliver = record}, b = {.sub.deliver = record}, other = {.sub.deliver = record};
    int64_t newest, id;
    char expected[128];

    assert_int_equal(rl_bus_subscribe(bus, "alice", 0, 0, &a.sub, &newest), RL_BUS_FRESH);
    /* Before any event, newest is the position just before the first id. */
    id = newest;
    rl_bus_unsubscribe(bus, &a.sub);
    assert_int_equal(rl_bus_subscribe(bus, "alice", 1, id, &a.sub, &newest), RL_BUS_RESUMED);
    assert_int_equal(rl_bus_subscribe(bus, "alice", 0, 0, &b.sub, &newest), RL_BUS_FRESH);
    assert_int_equal(rl_bus_subscribe(bus, "bob", 0, 0, &other.sub, &newest), RL_BUS_FRESH);
    assert_int_equal(rl_bus_subscribers(bus, "alice"), 2);
    assert_int_equal(publish(bus, "alice", 1), id + 1);
    id = id + 1;
    assert_int_equal(publish(bus, "alice", 2), id + 1);
    /* Both of alice's streams get both events; bob's gets none. */
    assert_int_equal(a.count, 2);
    assert_int_equal(b.count, 2);
    assert_int_equal(other.count, 0);
    snprintf(expected, sizeof(expected), "id: %lld\nevent: session_renamed\ndata: {\"n\":2}\n\n", (long long)(id + 1));
    assert_string_equal(a.last, expected);
    rl_bus_unsubscribe(bus, &a.sub);
    rl_bus_unsubscribe(bus, &a.sub);
    publish(bus, "alice", 3);
    assert_int_equal(a.count, 2);
    assert_int_equal(b.count, 3);
    rl_bus_unsubscribe(bus, &b.sub);
    rl_bus_unsubscribe(bus, &other.sub);
    rl_bus_free(bus);
}

static void test_exact_replay(void **state)
{
    rl_bus_t *bus = bus_new(8, 60000);
    struct recorder r = {.sub.deliver = record};
    int64_t first = publish(bus, "alice", 1), newest;

    publish(bus, "alice", 2);
    publish(bus, "alice", 3);
    assert_int_equal(rl_bus_subscribe(bus, "alice", 1, first, &r.sub, &newest), RL_BUS_RESUMED);
    assert_int_equal(newest, first + 2);
    assert_int_equal(r.count, 2);
    assert_int_equal(r.ids[0], first + 1);
    assert_int_equal(r.ids[1], first + 2);
    rl_bus_unsubscribe(bus, &r.sub);

    /* Resuming from the newest id replays nothing and is still exact. */
    memset(r.ids, 0, sizeof(r.ids));
    r.count = 0;
    assert_int_equal(rl_bus_subscribe(bus, "alice", 1, first + 2, &r.sub, &newest), RL_BUS_RESUMED);
    assert_int_equal(r.count, 0);
    rl_bus_unsubscribe(bus, &r.sub);
    /* And the id just before the first one covers the whole ring. */
    r.count = 0;
    assert_int_equal(rl_bus_subscribe(bus, "alice", 1, first - 1, &r.sub, &newest), RL_BUS_RESUMED);
    assert_int_equal(r.count, 3);
    rl_bus_unsubscribe(bus, &r.sub);
    rl_bus_free(bus);
}

static void test_gaps(void **state)
{
    rl_bus_t *bus = bus_new(3, 60000);
    struct recorder r = {.sub.deliver = record};
    int64_t first = publish(bus, "alice", 1), newest;
    int i;

    for (i = 2; i <= 5; ++i)
        publish(bus, "alice", i);
    /* Only the last 3 are kept: resuming after the first would skip two events. */
    assert_int_equal(rl_bus_subscribe(bus, "alice", 1, first, &r.sub, &newest), RL_BUS_GAP);
    assert_int_equal(r.count, 0);
    assert_int_equal(newest, first + 4);
    rl_bus_unsubscribe(bus, &r.sub);
    /* After the last evicted one, it is exact again. */
    assert_int_equal(rl_bus_subscribe(bus, "alice", 1, first + 1, &r.sub, &newest), RL_BUS_RESUMED);
    assert_int_equal(r.count, 3);
    rl_bus_unsubscribe(bus, &r.sub);
    /* Ids this hub never issued: from the future, or from an earlier process. */
    assert_int_equal(rl_bus_subscribe(bus, "alice", 1, first + 100, &r.sub, &newest), RL_BUS_GAP);
    rl_bus_unsubscribe(bus, &r.sub);
    assert_int_equal(rl_bus_subscribe(bus, "alice", 1, 12345, &r.sub, &newest), RL_BUS_GAP);
    rl_bus_unsubscribe(bus, &r.sub);
    /* A user with no events yet: any remembered id is from elsewhere. */
    assert_int_equal(rl_bus_subscribe(bus, "carol", 1, 1, &r.sub, &newest), RL_BUS_GAP);
    rl_bus_unsubscribe(bus, &r.sub);
    rl_bus_free(bus);
}

static void test_age_limit_and_sweep(void **state)
{
    rl_bus_t *bus = bus_new(8, 0);
    struct recorder r = {.sub.deliver = record};
    int64_t first = publish(bus, "alice", 1), newest;

    /* With a zero window everything published is already too old to replay. */
    rl_bus_sweep(bus, first / 1000 + 1000);
    assert_int_equal(rl_bus_subscribe(bus, "alice", 1, first - 1, &r.sub, &newest), RL_BUS_GAP);
    rl_bus_unsubscribe(bus, &r.sub);
    /* An idle user is forgotten; its next ids start well above the old ones, even within the same millisecond. */
    rl_bus_sweep(bus, first / 1000 + 1000);
    assert_true(publish(bus, "alice", 2) > first + 1);
    rl_bus_free(bus);
}

static void test_user_cap(void **state)
{
    rl_bus_config_t config = {.max_events = 4, .max_age_ms = 60000, .max_users = 2};
    rl_bus_t *bus = rl_bus_new(&config);

    assert_true(publish(bus, "a", 1) > 0);
    assert_true(publish(bus, "b", 1) > 0);
    assert_int_equal(publish(bus, "c", 1), RL_E_UNAVAILABLE);
    rl_bus_free(bus);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_live_delivery_and_encoding), cmocka_unit_test(test_exact_replay),
        cmocka_unit_test(test_gaps), cmocka_unit_test(test_age_limit_and_sweep), cmocka_unit_test(test_user_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
