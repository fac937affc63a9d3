/*
 * The spec's client handling rules for errors: a decision, and the one
 * retry loop of the client programs built on it (rl_retry_request, used by
 * relay, relay-bridge's pairing and its writer thread):
 *   1. 4xx: no blind retry (the caller inspects the code);
 *   2. 429 and 503: wait Retry-After (or error.retry_after_ms) with about
 *      plus or minus 25 % jitter, never in a tight loop;
 *   3. other 5xx, and failures to get any answer: up to 3 retries with
 *      exponential backoff;
 *   4. 410: stop, the target is gone;
 *   5. retries resend the same body, so idempotency keys are reused.
 * A policy may add an outage window: an attempt that got no answer at all
 * (the relay is down or restarting), or a 502 or 504 from a proxy in front
 * of it, is then retried, with a backoff doubling to 30 s, until the window
 * has passed since the first attempt, instead of rule 3's three times.
 * The decision functions are pure; any thread.
 */
#ifndef RL_CLIENT_RETRY_H
#define RL_CLIENT_RETRY_H

#include <stdint.h>

#include "client/client.h"

typedef enum rl_retry_verdict {
    RL_RETRY_DONE,  /* a final answer: success, or an error to act on */
    RL_RETRY_AGAIN, /* wait *delay_ms, then send the same request again */
} rl_retry_verdict_t;

typedef struct rl_retry_policy {
    int max_server_retries; /* rule 3; 0 means 3 */
    long backoff_ms;        /* first backoff of rule 3, doubled each time; 0 means 500 */
    long max_wait_ms;       /* a longer advised wait gives up instead; 0 means 120000 */
    int max_attempts;       /* rl_retry_request stops after this many attempts, 429 and 503 included; 0: no cap */
    long outage_ms;         /* the outage window (above); 0: none */
} rl_retry_policy_t;

/* The longest wait between two attempts inside an outage window (the spec's reconnect cap). */
#define RL_RETRY_OUTAGE_BACKOFF_MAX_MS 30000L

/*
 * Decides after attempt number `attempt` (1 for the first) that ended with
 * result (rl_client_request's return) and response. body is the decoded
 * answer or NULL (read for error.retry_after_ms). jitter is a number in
 * [0, 1) (pass a random one; tests pass fixed values).
 */
rl_retry_verdict_t rl_retry_decide(const rl_retry_policy_t *policy, int attempt, int result,
                                   const rl_client_response_t *response, const json_t *body, double jitter,
                                   long *delay_ms);
/* As rl_retry_decide, elapsed_ms after the first attempt began (for the outage window). */
rl_retry_verdict_t rl_retry_decide_after(const rl_retry_policy_t *policy, int attempt, long elapsed_ms, int result,
                                         const rl_client_response_t *response, const json_t *body, double jitter,
                                         long *delay_ms);

/*
 * How long to wait before the next call on a rate bucket, from the last
 * answer's X-RateLimit-* headers: Reset-After when Remaining is 0, else 0.
 */
long rl_retry_bucket_wait_ms(const rl_client_response_t *response);

/* A rate bucket as the client sees it: when its next call may go. One thread. */
typedef struct rl_retry_bucket {
    int64_t ready_at_ms; /* rl_clock_mono_ms() before which the next call waits; 0: now */
} rl_retry_bucket_t;

typedef struct rl_retry_hooks {
    /*
     * Waits ms milliseconds before an attempt; returns nonzero to give up at
     * once (the program is stopping). NULL: a plain sleep.
     */
    int (*wait)(void *user, long ms);
    /* Told about each failed attempt that will be tried again after delay_ms (a log line, a note). May be NULL. */
    void (*retrying)(void *user, int attempt, int result, const rl_client_response_t *response, const json_t *answer,
                     long delay_ms);
    void *user;
} rl_retry_hooks_t;

/*
 * Makes one call under the rules above: waits for bucket (may be NULL) and
 * moves it from each answer's X-RateLimit-* headers (except a 429 or 503's,
 * where Retry-After rules), decides after each attempt with a random jitter,
 * waits and resends the same body. policy and hooks may be NULL. Returns
 * rl_client_request's result of the last attempt (0 when an answer arrived,
 * of whatever status), or RL_CLIENT_E_STOPPED when hooks->wait gave up.
 * response is the last attempt's and *answer its decoded JSON body (a new
 * reference, NULL when there was none): free both in every case.
 */
int rl_retry_request(rl_client_t *client, const rl_retry_policy_t *policy, rl_retry_bucket_t *bucket,
                     const rl_retry_hooks_t *hooks, const char *method, const char *path, const char *const *headers,
                     const void *body, size_t len, rl_client_response_t *response, json_t **answer);

#endif
