/* Approvals: the bridge's request, the user's decision, the snapshot, and expiry (approvals.c). */
#ifndef RL_RELAY_APPROVALS_H
#define RL_RELAY_APPROVALS_H

#include "http/call.h"
#include "http/validate.h"

struct rl_relay;
typedef struct rl_approvals rl_approvals_t;

int rl_bridge_request_approval(rl_call_t *call);
int rl_approval_decide(rl_call_t *call);
int rl_snapshot_get(rl_call_t *call);
extern const rl_schema_t rl_request_approval_schema, rl_approval_decide_schema;

/* Starts the expiry sweep (once a second); NULL when out of memory. */
rl_approvals_t *rl_approvals_start(struct rl_relay *relay);
/* Stops the sweep (shutdown: nothing new is queued); rl_approvals_free after the store drained. */
void rl_approvals_stop(rl_approvals_t *approvals);
void rl_approvals_free(rl_approvals_t *approvals);

#endif
