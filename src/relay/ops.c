#include "relay/ops.h"
#include "relay/relay.h"

void rl_op_dispose(rl_store_op_t *op)
{
    json_decref(((rl_op_t *)op)->value);
}

void rl_op_submit_for(rl_call_t *call, void *op, rl_store_done_cb done)
{
    rl_relay_t *relay = call->app;

    rl_call_hold(call);
    rl_store_submit(relay->store, op, done, call);
}
