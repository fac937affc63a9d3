/* Approvals: the bridge's request, the user's decision, the snapshot, and expiry (approvals.c). */
#ifndef RL_RELAY_APPROVALS_H
#define RL_RELAY_APPROVALS_H

#include "bus/bus.h"
#include "http/call.h"
#include "http/validate.h"
#include "store/store.h"

struct rl_turn_ctx;
struct rl_hub;

int rl_bridge_request_approval(rl_call_t *call);
int rl_approval_decide(rl_call_t *call);
int rl_snapshot_get(rl_call_t *call);
extern const rl_schema_t rl_request_approval_schema, rl_approval_decide_schema;

/*
 * The expiry sweep (sweeps.c hands it the turn's context): an operation that
 * expires what is due at now, and what follows its commit.
 */
rl_store_op_t *rl_approvals_expiry(struct rl_turn_ctx *turn, int64_t now);
void rl_approvals_expired(struct rl_turn_ctx *turn, rl_store_op_t *op);
/*
 * Inside a store transaction (the worker's thread): expires the user's
 * pending approvals of session_id (of interaction_id only, unless NULL), as
 * the sweep does, and appends each to expired as {approval, update_id}.
 * A cancelled turn's approvals can no longer be answered (sessions.c).
 */
int rl_approvals_expire_turn(rl_txn_t *txn, const char *user_id, const char *session_id, const char *interaction_id,
                             int64_t now, json_t *expired);
/*
 * On the loop, after the commit: the events of what rl_approvals_expire_turn
 * or the sweep expired, to the users (hub) and to their bridges (bus).
 */
void rl_approvals_publish_expired(struct rl_hub *hub, rl_bus_t *bus, json_t *expired);

#endif
