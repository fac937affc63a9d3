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

/* Pulls everything after `after` the way a resuming stream does. */
static int pull(rl_bus_t *bus, const char *user, int64_t after, int64_t *ids, int max)
{
    rl_blob_t *frame;
    int64_t id;
    int n = 0;

    while (n < max && rl_bus_next(bus, user, after, &id, &frame) == RL_BUS_EVENT) {
        ids[n++] = id;
        after = id;
    }
    return n;
}

static void test_live_delivery_and_encoding(void **state)
{
    rl_bus_t *bus = bus_new(8, 60000);
    struct recorder a = {.sub.deliver = record}, b = {.sub.deliver = record}, other = {.sub.deliver = record};
    int64_t newest, id;
    char expected[128];

    assert_int_equal(rl_bus_subscribe(bus, "alice", &a.sub, &newest), 0);
    /* Before any event, newest is the position just before the first id, and it resumes exactly. */
    id = newest;
    assert_int_equal(rl_bus_resume(bus, "alice", id), RL_BUS_RESUMED);
    assert_int_equal(rl_bus_subscribe(bus, "alice", &b.sub, &newest), 0);
    assert_int_equal(rl_bus_subscribe(bus, "bob", &other.sub, &newest), 0);
    assert_int_equal(rl_bus_subscribers(bus, "alice"), 2);
    assert_int_equal(publish(bus, "alice", 1), id + 1);
    assert_int_equal(publish(bus, "alice", 2), id + 2);
    /* Both of alice's streams get both events; bob's gets none. */
    assert_int_equal(a.count, 2);
    assert_int_equal(b.count, 2);
    assert_int_equal(other.count, 0);
    snprintf(expected, sizeof(expected), "id: %lld\nevent: session_renamed\ndata: {\"n\":2}\n\n", (long long)(id + 2));
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
    int64_t first = publish(bus, "alice", 1), ids[16];

    publish(bus, "alice", 2);
    publish(bus, "alice", 3);
    assert_int_equal(rl_bus_resume(bus, "alice", first), RL_BUS_RESUMED);
    assert_int_equal(pull(bus, "alice", first, ids, 16), 2);
    assert_int_equal(ids[0], first + 1);
    assert_int_equal(ids[1], first + 2);
    /* Resuming from the newest id replays nothing and is still exact. */
    assert_int_equal(rl_bus_resume(bus, "alice", first + 2), RL_BUS_RESUMED);
    assert_int_equal(pull(bus, "alice", first + 2, ids, 16), 0);
    /* And the id just before the first one covers the whole ring. */
    assert_int_equal(rl_bus_resume(bus, "alice", first - 1), RL_BUS_RESUMED);
    assert_int_equal(pull(bus, "alice", first - 1, ids, 16), 3);
    rl_bus_free(bus);
}

static void test_gaps(void **state)
{
    rl_bus_t *bus = bus_new(3, 60000);
    int64_t first = publish(bus, "alice", 1), ids[16], id;
    rl_blob_t *frame;
    int i;

    for (i = 2; i <= 5; ++i)
        publish(bus, "alice", i);
    /* Only the last 3 are kept: resuming after the first would skip two events. */
    assert_int_equal(rl_bus_resume(bus, "alice", first), RL_BUS_GAP);
    assert_int_equal(rl_bus_next(bus, "alice", first, &id, &frame), RL_BUS_LOST);
    /* After the last evicted one, it is exact again. */
    assert_int_equal(rl_bus_resume(bus, "alice", first + 1), RL_BUS_RESUMED);
    assert_int_equal(pull(bus, "alice", first + 1, ids, 16), 3);
    /* A reader that falls behind while pulling learns that its next event is gone. */
    publish(bus, "alice", 6);
    publish(bus, "alice", 7);
    assert_int_equal(rl_bus_next(bus, "alice", first + 2, &id, &frame), RL_BUS_LOST);
    /* Ids this hub never issued: from the future, or from an earlier process. */
    assert_int_equal(rl_bus_resume(bus, "alice", first + 100), RL_BUS_GAP);
    assert_int_equal(rl_bus_resume(bus, "alice", 12345), RL_BUS_GAP);
    /* A user with no events yet: any remembered id is from elsewhere. */
    assert_int_equal(rl_bus_resume(bus, "carol", 1), RL_BUS_GAP);
    rl_bus_free(bus);
}

static void test_age_limit_and_sweep(void **state)
{
    rl_bus_t *bus = bus_new(8, 0);
    int64_t first = publish(bus, "alice", 1);

    /* With a zero window everything published is already too old to replay. */
    rl_bus_sweep(bus, first / 1000 + 1000);
    assert_int_equal(rl_bus_resume(bus, "alice", first - 1), RL_BUS_GAP);
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
        cmocka_unit_test(test_live_delivery_and_encoding),
        cmocka_unit_test(test_exact_replay),
        cmocka_unit_test(test_gaps),
        cmocka_unit_test(test_age_limit_and_sweep),
        cmocka_unit_test(test_user_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
