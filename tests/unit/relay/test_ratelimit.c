#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "bus/bus.h"
#include "common/error.h"
#include "relay/core/ratelimit.h"

/* The limiter takes from the local bus's buckets, which answer inside the call. */
static h2o_loop_t *loop;
static rl_bus_t *bus;

static rl_ratelimit_t *limiter_new(size_t max_buckets)
{
    rl_bus_config_t config = {.max_events = 4, .max_age_ms = 1000, .max_users = 4, .max_buckets = max_buckets};

    assert_int_equal(rl_bus_open("local", loop, &config, &bus), 0);
    return rl_ratelimit_new(bus);
}

static void limiter_free(rl_ratelimit_t *limiter)
{
    rl_ratelimit_free(limiter);
    rl_bus_close(bus);
}

static void on_taken(int result, void *arg)
{
    *(int *)arg = result;
}

static int take(rl_ratelimit_t *limiter, const char *scope, const char *owner, const char *bucket, int64_t now,
                rl_call_rate_t *rate)
{
    int result = 1;

    rl_ratelimit_take(limiter, scope, owner, bucket, now, rate, on_taken, &result);
    assert_int_not_equal(result, 1);
    return result;
}

static int take_address(rl_ratelimit_t *limiter, const char *address, const char *bucket, int64_t now,
                        rl_call_rate_t *rate)
{
    int result = 1;

    rl_ratelimit_take_address(limiter, address, bucket, now, rate, on_taken, &result);
    assert_int_not_equal(result, 1);
    return result;
}

static void test_spec_buckets(void **state)
{
    static const struct {
        const char *name;
        double capacity, refill;
    } spec[] = {{"msg", 30, 10},     {"delta", 200, 100}, {"task", 60, 30},
                {"approval", 10, 2}, {"memory", 60, 20},  {"default", 30, 10}};

    for (size_t i = 0; i < sizeof(spec) / sizeof(spec[0]); ++i) {
        const rl_bucket_spec_t *bucket = rl_ratelimit_bucket(spec[i].name);
        assert_non_null(bucket);
        assert_true(bucket->capacity == spec[i].capacity);
        assert_true(bucket->refill_per_s == spec[i].refill);
    }
    assert_null(rl_ratelimit_bucket("nope"));
}

static void test_burst_then_refill(void **state)
{
    rl_ratelimit_t *limiter = limiter_new(100);
    rl_call_rate_t rate;
    int64_t now = 1000000;
    int i;

    for (i = 0; i < 10; ++i) {
        memset(&rate, 0, sizeof(rate));
        assert_int_equal(take(limiter, "installation", "inst_a", "approval", now, &rate), 0);
        assert_int_equal(rate.remaining, 9 - i);
        assert_int_equal(rate.limit, 10);
        assert_string_equal(rate.bucket, "approval");
        assert_string_equal(rate.scope, "installation");
    }
    assert_int_equal(take(limiter, "installation", "inst_a", "approval", now, &rate), RL_E_RATE_LIMITED);
    assert_int_equal(rate.remaining, 0);
    /* 2 tokens a second: one is back after 500 ms. */
    assert_int_equal(rate.retry_after_ms, 500);
    assert_true(rate.reset_after > 4.99 && rate.reset_after < 5.01);
    /* Another owner has a bucket of its own. */
    assert_int_equal(take(limiter, "installation", "inst_b", "approval", now, &rate), 0);
    assert_int_equal(take(limiter, "installation", "inst_a", "approval", now + 499, &rate),
                     RL_E_RATE_LIMITED);
    assert_int_equal(take(limiter, "installation", "inst_a", "approval", now + 500, &rate), 0);
    limiter_free(limiter);
}

static void test_cap_and_sweep(void **state)
{
    rl_ratelimit_t *limiter = limiter_new(2);
    rl_call_rate_t rate;

    assert_int_equal(take(limiter, "ip", "a", "default", 0, &rate), 0);
    assert_int_equal(take(limiter, "ip", "b", "default", 0, &rate), 0);
    /* Full and nothing idle: refused rather than unlimited. */
    assert_int_equal(take(limiter, "ip", "c", "default", 0, &rate), RL_E_RATE_LIMITED);
    /* Once the others have refilled they can be dropped and c gets a bucket. */
    assert_int_equal(take(limiter, "ip", "c", "default", 1000, &rate), 0);
    limiter_free(limiter);
}

static void test_address_buckets(void **state)
{
    rl_ratelimit_t *limiter = limiter_new(100);
    rl_call_rate_t rate;
    int i;

    assert_non_null(rl_ratelimit_address_bucket("claim"));
    assert_null(rl_ratelimit_address_bucket("default"));
    assert_null(rl_ratelimit_address_bucket(NULL));
    /* A bucket without a per-address row takes nothing. */
    memset(&rate, 0xff, sizeof(rate));
    assert_int_equal(take_address(limiter, "192.0.2.1", "default", 0, &rate), 0);
    assert_int_equal(rate.set, 0);
    for (i = 0; i < 10; ++i)
        assert_int_equal(take_address(limiter, "192.0.2.1", "claim", 0, &rate), 0);
    assert_int_equal(take_address(limiter, "192.0.2.1", "claim", 0, &rate), RL_E_RATE_LIMITED);
    assert_string_equal(rate.scope, "ip");
    assert_string_equal(rate.bucket, "claim");
    assert_int_equal(rate.limit, 10);
    /* The per-user claim bucket of someone at that address is its own, and so is another address. */
    assert_int_equal(take(limiter, "user", "192.0.2.1", "claim", 0, &rate), 0);
    assert_int_equal(take_address(limiter, "2001:db8::/64", "claim", 0, &rate), 0);
    /* The pairing bucket of the same address is a different one too. */
    assert_int_equal(take(limiter, "ip", "192.0.2.1", "pairing", 0, &rate), 0);
    limiter_free(limiter);
}

static void test_the_figures_of_a_take(void **state)
{
    const rl_bucket_spec_t *delta = rl_ratelimit_bucket("delta");
    rl_call_rate_t rate;

    rl_ratelimit_fill(delta, "installation", 0, 150.5, &rate);
    assert_int_equal(rate.limit, 200);
    assert_int_equal(rate.remaining, 150);
    assert_true(rate.reset_after > 0.494 && rate.reset_after < 0.496);
    assert_int_equal(rate.retry_after_ms, 0);
    rl_ratelimit_fill(delta, "installation", RL_E_RATE_LIMITED, 0.25, &rate);
    assert_int_equal(rate.remaining, 0);
    assert_int_equal(rate.retry_after_ms, 8);
    /* A bus that cannot answer: come back in a second. */
    rl_ratelimit_fill(delta, "installation", RL_E_UNAVAILABLE, 0, &rate);
    assert_int_equal(rate.retry_after_ms, 1000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spec_buckets),
        cmocka_unit_test(test_burst_then_refill),
        cmocka_unit_test(test_cap_and_sweep),
        cmocka_unit_test(test_address_buckets),
        cmocka_unit_test(test_the_figures_of_a_take),
    };
    loop = h2o_evloop_create();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
