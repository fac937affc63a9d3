/* Approvals: the bridge's request, the user's decision, the snapshot, and expiry (approvals.c). */
#ifndef RL_RELAY_APPROVALS_H
#define RL_RELAY_APPROVALS_H

#include "http/call.h"
#include "http/validate.h"
#include "store/store.h"

struct rl_relay;

int rl_bridge_request_approval(rl_call_t *call);
int rl_approval_decide(rl_call_t *call);
int rl_snapshot_get(rl_call_t *call);
extern const rl_schema_t rl_request_approval_schema, rl_approval_decide_schema;

/* The expiry sweep (sweeps.c): an operation that expires what is due at now, and what follows its commit. */
rl_store_op_t *rl_approvals_expiry(struct rl_relay *relay, int64_t now);
void rl_approvals_expired(struct rl_relay *relay, rl_store_op_t *op);

#endif
