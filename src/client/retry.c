#include <math.h>
#include <stdio.h>
#include <string.h>

#include "client/retry.h"
#include "common/clock.h"
#include "common/rand.h"

static long with_jitter(long ms, double jitter)
{
    /* spec: about plus or minus 25 %. */
    return (long)llround((double)ms * (0.75 + 0.5 * jitter));
}

rl_retry_verdict_t rl_retry_decide(const rl_retry_policy_t *policy, int attempt, int result,
                                   const rl_client_response_t *response, const json_t *body, double jitter,
                                   long *delay_ms)
{
    return rl_retry_decide_after(policy, attempt, 0, result, response, body, jitter, delay_ms);
}

rl_retry_verdict_t rl_retry_decide_after(const rl_retry_policy_t *policy, int attempt, long elapsed_ms, int result,
                                         const rl_client_response_t *response, const json_t *body, double jitter,
                                         long *delay_ms)
{
    int max_retries = policy != NULL && policy->max_server_retries > 0 ? policy->max_server_retries : 3;
    long backoff = policy != NULL && policy->backoff_ms > 0 ? policy->backoff_ms : 500;
    long max_wait = policy != NULL && policy->max_wait_ms > 0 ? policy->max_wait_ms : 120000;
    long status = result == 0 ? response->status : 0;

    *delay_ms = 0;
    /* What trying again cannot change: a bad URL, an untrusted certificate, an answer too large. */
    if (result == RL_CLIENT_E_USAGE || result == RL_CLIENT_E_TOO_LARGE || result == RL_CLIENT_E_STOPPED ||
        result == RL_CLIENT_E_TRUST)
        return RL_RETRY_DONE;
    if (status == 429 || status == 503) {
        long advised = -1;
        json_t *ms = json_object_get(json_object_get(body, "error"), "retry_after_ms");
        if (json_is_integer(ms) && json_integer_value(ms) > 0)
            advised = (long)json_integer_value(ms);
        else if (response->retry_after_s >= 0)
            advised = response->retry_after_s * 1000;
        /* Never loop tightly, even when the server gave no advice. */
        if (advised < 1000)
            advised = advised < 0 ? 1000 : advised;
        if (advised > max_wait)
            return RL_RETRY_DONE;
        *delay_ms = with_jitter(advised, jitter);
        return RL_RETRY_AGAIN;
    }
    if (status != 0 && status < 500)
        return RL_RETRY_DONE;
    if ((result != 0 || status == 502 || status == 504) && policy != NULL && policy->outage_ms > 0) {
        /*
         * No answer at all, or a proxy in front saying the relay behind it gave none: the relay may be
         * restarting, so keep the write for the outage window.
         */
        long wait = attempt > 16 ? RL_RETRY_OUTAGE_BACKOFF_MAX_MS : backoff << (attempt - 1);
        if (elapsed_ms >= policy->outage_ms)
            return RL_RETRY_DONE;
        *delay_ms = with_jitter(wait < RL_RETRY_OUTAGE_BACKOFF_MAX_MS ? wait : RL_RETRY_OUTAGE_BACKOFF_MAX_MS, jitter);
        return RL_RETRY_AGAIN;
    }
    /* Other 5xx, or no answer at all: bounded retries with exponential backoff. */
    if (attempt > max_retries)
        return RL_RETRY_DONE;
    *delay_ms = with_jitter(backoff << (attempt - 1), jitter);
    return RL_RETRY_AGAIN;
}

long rl_retry_bucket_wait_ms(const rl_client_response_t *response)
{
    if (response->ratelimit_remaining != 0 || response->ratelimit_reset_after < 0)
        return 0;
    return (long)ceil(response->ratelimit_reset_after * 1000.0);
}

static double random_jitter(void)
{
    uint32_t r;

    rl_rand_bytes(&r, sizeof(r));
    return (double)r / 4294967296.0;
}

/* Waits through the hook; nonzero when the caller gives up. */
static int pause_for(const rl_retry_hooks_t *hooks, long ms)
{
    if (ms <= 0)
        return 0;
    if (hooks != NULL && hooks->wait != NULL)
        return hooks->wait(hooks->user, ms);
    rl_clock_sleep_ms(ms);
    return 0;
}

static int stopped(rl_client_response_t *response)
{
    memset(response, 0, sizeof(*response));
    response->retry_after_s = -1;
    response->ratelimit_limit = -1;
    response->ratelimit_remaining = -1;
    response->ratelimit_reset_after = -1;
    snprintf(response->error, sizeof(response->error), "stopped before an answer came");
    return RL_CLIENT_E_STOPPED;
}

int rl_retry_request(rl_client_t *client, const rl_retry_policy_t *policy, rl_retry_bucket_t *bucket,
                     const rl_retry_hooks_t *hooks, const char *method, const char *path, const char *const *headers,
                     const void *body, size_t len, rl_client_response_t *response, json_t **answer)
{
    int64_t started = rl_clock_mono_ms();
    int attempt, result;

    *answer = NULL;
    for (attempt = 1;; ++attempt) {
        long delay = 0, wait_ms;

        /* spec: rate limits: wait for X-RateLimit-Reset-After when the last answer left the bucket empty. */
        if (bucket != NULL && pause_for(hooks, (long)(bucket->ready_at_ms - rl_clock_mono_ms())) != 0)
            return stopped(response);
        result = rl_client_request(client, method, path, headers, body, len, response);
        if (result == 0) {
            *answer = rl_client_json(response, NULL, 0);
            /*
             * A 429 or 503 says when to try again itself (rule 2); its Reset-After is the time until the bucket is
             * full again, far longer than the wait for the one token the retry needs.
             */
            wait_ms = response->status != 429 && response->status != 503 ? rl_retry_bucket_wait_ms(response) : 0;
            if (bucket != NULL && wait_ms > 0)
                bucket->ready_at_ms = rl_clock_mono_ms() + wait_ms;
        }
        if (result == 0 && response->status >= 200 && response->status < 300)
            return result;
        if ((policy != NULL && policy->max_attempts > 0 && attempt >= policy->max_attempts) ||
            rl_retry_decide_after(policy, attempt, (long)(rl_clock_mono_ms() - started), result, response, *answer,
                                  random_jitter(), &delay) == RL_RETRY_DONE)
            return result;
        if (hooks != NULL && hooks->retrying != NULL)
            hooks->retrying(hooks->user, attempt, result, response, *answer, delay);
        json_decref(*answer);
        *answer = NULL;
        rl_client_response_free(response);
        if (pause_for(hooks, delay) != 0)
            return stopped(response);
    }
}
