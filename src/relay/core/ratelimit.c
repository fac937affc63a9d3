#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "common/strmap.h"
#include "relay/core/ratelimit.h"

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

struct rl_ratelimit {
    rl_bus_t *bus;
};

/* One take in flight: the bus may answer later (a shared bucket is a network round trip away). */
struct take {
    const rl_bucket_spec_t *spec;
    const char *scope;
    rl_call_rate_t *rate;
    rl_ratelimit_cb cb;
    void *arg;
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

rl_ratelimit_t *rl_ratelimit_new(rl_bus_t *bus)
{
    rl_ratelimit_t *limiter = calloc(1, sizeof(*limiter));

    if (limiter != NULL)
        limiter->bus = bus;
    return limiter;
}

void rl_ratelimit_free(rl_ratelimit_t *limiter)
{
    free(limiter);
}

void rl_ratelimit_fill(const rl_bucket_spec_t *spec, const char *scope, int result, double tokens, rl_call_rate_t *rate)
{
    rate->set = 1;
    rate->bucket = spec->name;
    rate->scope = scope;
    rate->limit = (long)spec->capacity;
    /*
     * A shared bucket may be below zero (a share that shrank owes what it
     * had granted), and a refusal's level is set below one by the wait
     * until its node grants again: none remains, and the times count it.
     */
    rate->remaining = tokens > 0 ? (long)floor(tokens) : 0;
    rate->reset_after = (spec->capacity - tokens) / spec->refill_per_s;
    if (result == 0)
        rate->retry_after_ms = 0;
    else if (result == RL_E_RATE_LIMITED)
        rate->retry_after_ms = (int64_t)ceil((1.0 - tokens) / spec->refill_per_s * 1000.0);
    else
        rate->retry_after_ms = 1000; /* the bus cannot answer: try again in a second */
}

static void on_taken(int result, double tokens, void *arg)
{
    struct take *take = arg;

    rl_ratelimit_fill(take->spec, take->scope, result, tokens, take->rate);
    take->cb(result == 0 || result == RL_E_RATE_LIMITED ? result : RL_E_UNAVAILABLE, take->arg);
    free(take);
}

/* Appends text to key[*len] without passing its last byte (the cut snprintf makes). */
static void key_append(char *key, size_t size, size_t *len, const char *text)
{
    size_t n = strlen(text);

    if (n > size - 1 - *len)
        n = size - 1 - *len;
    memcpy(key + *len, text, n);
    *len += n;
    key[*len] = '\0';
}

static void take(rl_ratelimit_t *limiter, const char *scope, const char *owner, const rl_bucket_spec_t *spec,
                 int64_t now_ms, rl_call_rate_t *rate, rl_ratelimit_cb cb, void *arg)
{
    struct take *state = malloc(sizeof(*state));
    char key[512];
    size_t len = 0;

    if (state == NULL) {
        rl_ratelimit_fill(spec, scope, RL_E_INTERNAL, 0, rate);
        cb(RL_E_INTERNAL, arg);
        return;
    }
    *state = (struct take){spec, scope, rate, cb, arg};
    /* scope US owner US name; snprintf cost some 1 200 instructions a request in the profile. */
    key_append(key, sizeof(key), &len, scope);
    key_append(key, sizeof(key), &len, "\x1f");
    key_append(key, sizeof(key), &len, owner);
    key_append(key, sizeof(key), &len, "\x1f");
    key_append(key, sizeof(key), &len, spec->name);
    rl_bus_take(limiter->bus, key, spec->capacity, spec->refill_per_s, now_ms, on_taken, state);
}

void rl_ratelimit_take(rl_ratelimit_t *limiter, const char *scope, const char *owner, const char *bucket,
                       int64_t now_ms, rl_call_rate_t *rate, rl_ratelimit_cb cb, void *arg)
{
    const rl_bucket_spec_t *spec = rl_ratelimit_bucket(bucket);

    take(limiter, scope, owner, spec != NULL ? spec : rl_ratelimit_bucket("default"), now_ms, rate, cb, arg);
}

void rl_ratelimit_take_address(rl_ratelimit_t *limiter, const char *address, const char *bucket, int64_t now_ms,
                               rl_call_rate_t *rate, rl_ratelimit_cb cb, void *arg)
{
    const rl_bucket_spec_t *spec = rl_ratelimit_address_bucket(bucket);

    if (spec == NULL) {
        memset(rate, 0, sizeof(*rate));
        cb(0, arg);
        return;
    }
    take(limiter, "ip", address, spec, now_ms, rate, cb, arg);
}
