#include "common/error.h"
#include "relay/core/ops.h"
#include "relay/core/relay.h"

void rl_op_dispose(rl_store_op_t *op)
{
    json_decref(((rl_op_t *)op)->value);
}

/*
 * Past --store-queue-max operations waiting for the store's worker, a new request is
 * refused at once (503 with retry_after_ms) rather than queued behind them:
 * a slow or unreachable database must not turn into seconds of waiting.
 */
#define STORE_QUEUE_MAX 4096
#define STORE_RETRY_MS  500

void rl_op_submit_for(rl_call_t *call, void *op, rl_store_done_cb done)
{
    rl_relay_t *relay = call->app;

    if (rl_store_queued(relay->store) >= (size_t)relay->config.store_queue_max) {
        rl_store_op_free(op);
        call->rate.retry_after_ms = STORE_RETRY_MS;
        rl_call_fail(call, RL_E_UNAVAILABLE, "the store (the database) is not keeping up; retry later");
        return;
    }
    rl_call_hold(call);
    rl_store_submit(relay->store, op, done, call);
}
