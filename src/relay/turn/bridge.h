/*
 * The bridge's REST writes (under /v1/bridge) and the shape they share: a store
 * operation that checks its target, applies the idempotency rule, writes,
 * and records its answer, all in one savepoint (rl_bridge_write_run).
 */
#ifndef RL_RELAY_BRIDGE_H
#define RL_RELAY_BRIDGE_H

#include "http/call.h"
#include "http/validate.h"
#include "relay/core/idempotency.h"
#include "relay/core/ops.h"
#include "relay/core/target.h"

/* The idempotency_key field of the bridge's schemas: any non-empty string up to 256 characters (brief). */
#define RL_FIELD_IDEMPOTENCY_KEY RL_FIELD_STRING("idempotency_key", RL_F_REQUIRED, 1, 256)

typedef enum rl_task_step { RL_TASK_CREATE, RL_TASK_UPDATE, RL_TASK_FINISH } rl_task_step_t;

typedef struct rl_bridge_write {
    rl_op_t op;
    rl_idempotency_t idem;
    rl_bridge_target_t target;
    json_t *body; /* the request body (a reference: never changed once submitted) */
    /*
     * issue 26: the body's plaintext content fields, refused in an encrypted
     * session (NULL-terminated; NULL: none), checked once the session is known.
     */
    const char *const *plain;
    /* results */
    int replay;               /* the response is the stored one */
    json_t *response;         /* what the bridge is answered */
    rl_session_row_t session; /* the target session: its user_id is whom to tell */
    const char *bad_field;    /* a refusal of the plaintext-or-ciphertext rule: the field */
    int bad_required;         /* ... and whether it is missing (else present where it may not be) */
} rl_bridge_write_t;

/*
 * A new write for call, an operation of type (size bytes, starting with
 * rl_bridge_write_t) whose idempotency scope is scope_kind:scope_id and key
 * is key (NULL: none). Its target is the body's session_id and
 * interaction_id. The idempotency TTL, the follow-up window and whether
 * nodes share the store come from the turn's context (turn.h), whichever
 * feature's route call is (capability requests use it too). NULL when out
 * of memory. Loop thread.
 */
void *rl_bridge_write_new(rl_call_t *call, const rl_store_op_type_t *type, size_t size, const char *scope_kind,
                          const char *scope_id, const char *key);
/*
 * In a transaction: check (NULL: the target check of target.h), then the
 * idempotency check (a replay sets replay and the stored response), then
 * apply, which sets response, then the record of the response.
 */
int rl_bridge_write_run(rl_txn_t *txn, rl_bridge_write_t *w, int (*check)(rl_txn_t *, rl_bridge_write_t *),
                        int (*apply)(rl_txn_t *, rl_bridge_write_t *));
/* The dispose of every bridge write type. */
void rl_bridge_write_dispose(rl_store_op_t *op);
/*
 * In a transaction: refuses (RL_E_INVALID_REQUEST) a write that lacks field,
 * naming it, so that the answer says which field the session needs.
 */
int rl_bridge_write_require(rl_bridge_write_t *w, const char *field);
/* Answers a failed write: errors[] naming the field for the rule of rl_e2e_body_check, else the error. */
void rl_bridge_write_fail(rl_call_t *call, rl_bridge_write_t *w, int result);
/* Answers the call with the write's response (marked idempotent on a replay); 1 when it was a replay. */
int rl_bridge_write_answer(rl_call_t *call, rl_bridge_write_t *w);

struct rl_turn_ctx;
/*
 * The sweep that ends messages left open past their follow-up window
 * (sweeps.c hands it the turn's context): its operation, and what follows.
 */
rl_store_op_t *rl_messages_lapse(struct rl_turn_ctx *turn, int64_t now);
/*
 * The sweep's first step: a read of whether any message is due to be ended
 * (nothing changes). rl_messages_lapse_next, after it: the operation that
 * ends them (rl_messages_lapse), or NULL when none is due (or after any
 * other operation). rl_messages_lapsed finishes either.
 */
rl_store_op_t *rl_messages_lapse_due(struct rl_turn_ctx *turn, int64_t now);
rl_store_op_t *rl_messages_lapse_next(struct rl_turn_ctx *turn, const rl_store_op_t *op, int64_t now);
void rl_messages_lapsed(struct rl_turn_ctx *turn, rl_store_op_t *op);

int rl_bridge_send_message(rl_call_t *call);
int rl_bridge_send_end(rl_call_t *call);
int rl_bridge_task(rl_call_t *call); /* route tag: rl_task_step_t */
int rl_bridge_upload(rl_call_t *call);
extern const rl_schema_t rl_send_message_schema, rl_send_delta_schema, rl_send_end_schema, rl_create_task_schema,
    rl_update_task_schema, rl_finish_task_schema;

#endif
