/*
 * Token buckets keyed by (scope, owner, bucket) (spec "Rate limits"), so that
 * two owners never share one. Loop thread only.
 *
 * The buckets live in this process: with several relay nodes each node
 * limits on its own, which multiplies the effective rate by the node count.
 * docs/operations.md says so; a shared backend would sit behind this same
 * interface.
 */
#ifndef RL_RELAY_RATELIMIT_H
#define RL_RELAY_RATELIMIT_H

#include <stdint.h>

#include "http/call.h"

typedef struct rl_ratelimit rl_ratelimit_t;

typedef struct rl_bucket_spec {
    const char *name;
    double capacity;
    double refill_per_s;
} rl_bucket_spec_t;

/* max_keys caps the number of live buckets; NULL on allocation failure. */
rl_ratelimit_t *rl_ratelimit_new(size_t max_keys);
void rl_ratelimit_free(rl_ratelimit_t *limiter);
/* The spec's row for a bucket name, or NULL. */
const rl_bucket_spec_t *rl_ratelimit_bucket(const char *name);
/*
 * Takes one token from the bucket for (scope, owner). Fills rate with the
 * X-RateLimit-* figures either way. Returns 0, or RL_E_RATE_LIMITED with
 * rate->retry_after_ms set. When the cap on live buckets is reached and no
 * idle bucket can be dropped, the request is refused (fail closed).
 */
int rl_ratelimit_take(rl_ratelimit_t *limiter, const char *scope, const char *owner, const char *bucket, int64_t now_ms,
                      rl_call_rate_t *rate);
/*
 * The per-address row of a bucket that authenticated routes also take from
 * per client address ("claim"), or NULL when the bucket has none.
 */
const rl_bucket_spec_t *rl_ratelimit_address_bucket(const char *name);
/*
 * For a bucket with a per-address row: takes one token from (ip, address,
 * bucket) with that row's figures, as rl_ratelimit_take. For any other
 * bucket it takes nothing, returns 0 and leaves rate->set 0. address is the
 * client's address group (http/peer.h: an IPv6 /64).
 */
int rl_ratelimit_take_address(rl_ratelimit_t *limiter, const char *address, const char *bucket, int64_t now_ms,
                              rl_call_rate_t *rate);
/* Drops buckets that have refilled completely; call now and then. */
void rl_ratelimit_sweep(rl_ratelimit_t *limiter, int64_t now_ms);

#endif
