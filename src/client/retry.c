#include <math.h>

#include "client/retry.h"

static long with_jitter(long ms, double jitter)
{
    /* spec: about plus or minus 25 %. */
    return (long)llround((double)ms * (0.75 + 0.5 * jitter));
}

rl_retry_verdict_t rl_retry_decide(const rl_retry_policy_t *policy, int attempt, int result,
                                   const rl_client_response_t *response, const json_t *body, double jitter,
                                   long *delay_ms)
{
    int max_retries = policy != NULL && policy->max_server_retries > 0 ? policy->max_server_retries : 3;
    long backoff = policy != NULL && policy->backoff_ms > 0 ? policy->backoff_ms : 500;
    long max_wait = policy != NULL && policy->max_wait_ms > 0 ? policy->max_wait_ms : 120000;
    long status = result == 0 ? response->status : 0;

    *delay_ms = 0;
    if (result == RL_CLIENT_E_USAGE || result == RL_CLIENT_E_TOO_LARGE)
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
