/*
 * The spec's client handling rules for errors, as a decision, so that a
 * blocking program (relay) can sleep on it and an event-driven one
 * (relay-bridge) can set a timer:
 *   1. 4xx: no blind retry (the caller inspects the code);
 *   2. 429 and 503: wait Retry-After (or error.retry_after_ms) with about
 *      plus or minus 25 % jitter, never in a tight loop;
 *   3. other 5xx, and failures to get any answer: up to 3 retries with
 *      exponential backoff;
 *   4. 410: stop, the target is gone;
 *   5. retries resend the same body, so idempotency keys are reused.
 * Pure functions; any thread.
 */
#ifndef RL_CLIENT_RETRY_H
#define RL_CLIENT_RETRY_H

#include "client/client.h"

typedef enum rl_retry_verdict {
    RL_RETRY_DONE,  /* a final answer: success, or an error to act on */
    RL_RETRY_AGAIN, /* wait *delay_ms, then send the same request again */
} rl_retry_verdict_t;

typedef struct rl_retry_policy {
    int max_server_retries; /* rule 3; 0 means 3 */
    long backoff_ms;        /* first backoff of rule 3, doubled each time; 0 means 500 */
    long max_wait_ms;       /* a longer advised wait gives up instead; 0 means 120000 */
} rl_retry_policy_t;

/*
 * Decides after attempt number `attempt` (1 for the first) that ended with
 * result (rl_client_request's return) and response. body is the decoded
 * answer or NULL (read for error.retry_after_ms). jitter is a number in
 * [0, 1) (pass a random one; tests pass fixed values).
 */
rl_retry_verdict_t rl_retry_decide(const rl_retry_policy_t *policy, int attempt, int result,
                                   const rl_client_response_t *response, const json_t *body, double jitter,
                                   long *delay_ms);

/*
 * How long to wait before the next call on a rate bucket, from the last
 * answer's X-RateLimit-* headers: Reset-After when Remaining is 0, else 0.
 */
long rl_retry_bucket_wait_ms(const rl_client_response_t *response);

#endif
