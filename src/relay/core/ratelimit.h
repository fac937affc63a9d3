/*
 * Token buckets keyed by (scope, owner, bucket) (spec "Rate limits"), so that
 * two owners never share one. The buckets themselves are the bus's (bus.h,
 * take): in the process with the local bus, shared by every node with a
 * networked one, so that a bridge alternating between nodes has one bucket.
 * This module holds the table of buckets and turns a take into the
 * X-RateLimit-* figures. Loop thread only.
 */
#ifndef RL_RELAY_RATELIMIT_H
#define RL_RELAY_RATELIMIT_H

#include <stdint.h>

#include "bus/bus.h"
#include "http/call.h"

typedef struct rl_ratelimit rl_ratelimit_t;

typedef struct rl_bucket_spec {
    const char *name;
    double capacity;
    double refill_per_s;
} rl_bucket_spec_t;

/* 0 (taken), RL_E_RATE_LIMITED, or RL_E_UNAVAILABLE when the bus cannot answer; the rate is filled. */
typedef void (*rl_ratelimit_cb)(int result, void *arg);

/* A limiter taking from bus's buckets; NULL on allocation failure. */
rl_ratelimit_t *rl_ratelimit_new(rl_bus_t *bus);
void rl_ratelimit_free(rl_ratelimit_t *limiter);
/* The spec's row for a bucket name, or NULL. */
const rl_bucket_spec_t *rl_ratelimit_bucket(const char *name);
/*
 * The per-address row of a bucket that authenticated routes also take from
 * per client address ("claim"), or NULL when the bucket has none.
 */
const rl_bucket_spec_t *rl_ratelimit_address_bucket(const char *name);
/*
 * Takes one token from the bucket for (scope, owner) (an unknown bucket name
 * is "default"), fills rate with the X-RateLimit-* figures either way (and
 * retry_after_ms when refused), then calls cb, inside the call or later.
 * scope must be a literal: rate keeps the pointer.
 */
void rl_ratelimit_take(rl_ratelimit_t *limiter, const char *scope, const char *owner, const char *bucket,
                       int64_t now_ms, rl_call_rate_t *rate, rl_ratelimit_cb cb, void *arg);
/*
 * For a bucket with a per-address row: takes one token from (ip, address,
 * bucket) with that row's figures, as rl_ratelimit_take. For any other
 * bucket it takes nothing, leaves rate->set 0 and calls cb with 0. address is
 * the client's address group (http/peer.h: an IPv6 /64).
 */
void rl_ratelimit_take_address(rl_ratelimit_t *limiter, const char *address, const char *bucket, int64_t now_ms,
                               rl_call_rate_t *rate, rl_ratelimit_cb cb, void *arg);
/* The X-RateLimit-* figures of a bucket holding tokens after a take that ended with result. */
void rl_ratelimit_fill(const rl_bucket_spec_t *spec, const char *scope, int result, double tokens,
                       rl_call_rate_t *rate);

#endif
