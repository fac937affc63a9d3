#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "common/strmap.h"
#include "relay/ratelimit.h"

/*
 * spec: the bucket table; "pairing" and "claim" are ours, for the unauthenticated pairing routes, and "login"
 * for the web client's sign-in link exchange, per IP (docs/web.md).
 */
static const rl_bucket_spec_t buckets[] = {
    {"msg", 30, 10},     {"delta", 200, 100}, {"task", 60, 30},  {"approval", 10, 2}, {"memory", 60, 20},
    {"default", 30, 10}, {"pairing", 20, 1},  {"claim", 5, 0.1}, {"login", 10, 0.5},
};

/*
 * Buckets that an authenticated route also takes from per client address
 * (brief: per-IP buckets guard the claim route), so that many accounts from
 * one address do not multiply its rate. Their own figures: an office pairing
 * a few machines at once stays under them.
 */
static const rl_bucket_spec_t address_buckets[] = {
    {"claim", 10, 0.1},
};

struct bucket_state {
    const rl_bucket_spec_t *spec;
    double tokens;
    int64_t updated_ms;
};

struct rl_ratelimit {
    rl_strmap_t *states;
};

const rl_bucket_spec_t *rl_ratelimit_bucket(const char *name)
{
    size_t i;

    for (i = 0; i < sizeof(buckets) / sizeof(buckets[0]); ++i) {
        if (strcmp(buckets[i].name, name) == 0)
            return &buckets[i];
    }
    return NULL;
}

const rl_bucket_spec_t *rl_ratelimit_address_bucket(const char *name)
{
    size_t i;

    for (i = 0; name != NULL && i < sizeof(address_buckets) / sizeof(address_buckets[0]); ++i) {
        if (strcmp(address_buckets[i].name, name) == 0)
            return &address_buckets[i];
    }
    return NULL;
}

rl_ratelimit_t *rl_ratelimit_new(size_t max_keys)
{
    rl_ratelimit_t *limiter = calloc(1, sizeof(*limiter));

    if (limiter == NULL)
        return NULL;
    limiter->states = rl_strmap_new(max_keys);
    if (limiter->states == NULL) {
        free(limiter);
        return NULL;
    }
    return limiter;
}

void rl_ratelimit_free(rl_ratelimit_t *limiter)
{
    if (limiter == NULL)
        return;
    rl_strmap_free(limiter->states, free);
    free(limiter);
}

static void refill(struct bucket_state *state, int64_t now_ms)
{
    if (now_ms > state->updated_ms) {
        state->tokens += (double)(now_ms - state->updated_ms) / 1000.0 * state->spec->refill_per_s;
        if (state->tokens > state->spec->capacity)
            state->tokens = state->spec->capacity;
        state->updated_ms = now_ms;
    }
}

static int is_full(const char *key, void *value, void *arg)
{
    struct bucket_state *state = value;

    refill(state, *(int64_t *)arg);
    return state->tokens >= state->spec->capacity;
}

void rl_ratelimit_sweep(rl_ratelimit_t *limiter, int64_t now_ms)
{
    rl_strmap_sweep(limiter->states, is_full, &now_ms, free);
}

static int take(rl_ratelimit_t *limiter, const char *scope, const char *owner, const rl_bucket_spec_t *spec,
                int64_t now_ms, rl_call_rate_t *rate)
{
    struct bucket_state *state;
    char key[512];
    int result = 0;

    snprintf(key, sizeof(key), "%s\x1f%s\x1f%s", scope, owner, spec->name);
    state = rl_strmap_get(limiter->states, key);
    if (state == NULL) {
        state = malloc(sizeof(*state));
        if (state != NULL) {
            state->spec = spec;
            state->tokens = spec->capacity;
            state->updated_ms = now_ms;
        }
        if (state != NULL && rl_strmap_put(limiter->states, key, state) != 0) {
            rl_ratelimit_sweep(limiter, now_ms);
            if (rl_strmap_put(limiter->states, key, state) != 0) {
                free(state);
                state = NULL;
            }
        }
    }
    rate->set = 1;
    rate->bucket = spec->name;
    rate->scope = scope;
    rate->limit = (long)spec->capacity;
    if (state == NULL) {
        rl_log_warn("rate limiter full; refusing a request on bucket %s", spec->name);
        rate->remaining = 0;
        rate->reset_after = spec->capacity / spec->refill_per_s;
        rate->retry_after_ms = (int64_t)ceil(1000.0 / spec->refill_per_s);
        return RL_E_RATE_LIMITED;
    }
    refill(state, now_ms);
    if (state->tokens >= 1.0) {
        state->tokens -= 1.0;
        rate->retry_after_ms = 0;
    } else {
        rate->retry_after_ms = (int64_t)ceil((1.0 - state->tokens) / spec->refill_per_s * 1000.0);
        result = RL_E_RATE_LIMITED;
    }
    rate->remaining = (long)floor(state->tokens);
    rate->reset_after = (spec->capacity - state->tokens) / spec->refill_per_s;
    return result;
}

int rl_ratelimit_take(rl_ratelimit_t *limiter, const char *scope, const char *owner, const char *bucket, int64_t now_ms,
                      rl_call_rate_t *rate)
{
    const rl_bucket_spec_t *spec = rl_ratelimit_bucket(bucket);

    return take(limiter, scope, owner, spec != NULL ? spec : rl_ratelimit_bucket("default"), now_ms, rate);
}

int rl_ratelimit_take_address(rl_ratelimit_t *limiter, const char *address, const char *bucket, int64_t now_ms,
                              rl_call_rate_t *rate)
{
    const rl_bucket_spec_t *spec = rl_ratelimit_address_bucket(bucket);

    if (spec == NULL) {
        memset(rate, 0, sizeof(*rate));
        return 0;
    }
    return take(limiter, "ip", address, spec, now_ms, rate);
}
