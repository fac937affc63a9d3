/*
 * Device capability requests (ours; the spec's device_capability_request
 * event, docs/api.md "Device capabilities"): the bridge's request, the
 * user's answer, the pending ones in the snapshot, and their expiry
 * (capabilities.c). Loop thread, except the store operations' run.
 */
#ifndef RL_RELAY_CAPABILITIES_H
#define RL_RELAY_CAPABILITIES_H

#include <jansson.h>

#include "http/call.h"
#include "http/validate.h"
#include "store/store.h"

struct rl_media;

/* POST /v1/bridge/requestDeviceCapability */
int rl_bridge_request_capability(rl_call_t *call);
/* POST /v1/me/capabilities/:id */
int rl_capability_answer(rl_call_t *call);
extern const rl_schema_t rl_request_capability_schema, rl_capability_answer_schema;

/*
 * In a transaction: the user's pending requests (the snapshot's
 * pending_capability_requests), a new array in *out. 0 or a store error.
 */
int rl_capabilities_pending(rl_txn_t *txn, const char *user_id, int64_t now, json_t **out);

/* The expiry sweep (sweeps.c): an operation that expires what is due at now, and what follows its commit. */
rl_store_op_t *rl_capabilities_expiry(struct rl_media *media, int64_t now);
void rl_capabilities_expired(struct rl_media *media, rl_store_op_t *op);

/*
 * Which answer field a capability takes ("location" or "attachment_key");
 * NULL for a capability relayd does not know. Pure: the unit tests read it.
 */
const char *rl_capability_answer_field(const char *capability);
/*
 * Which answer a body (valid by rl_capability_answer_schema) gives:
 * "location", "attachment_key" or "refused" (refused: true), or NULL when
 * it gives none of them or more than one. Pure.
 */
const char *rl_capability_answer_given(json_t *body);

#endif
