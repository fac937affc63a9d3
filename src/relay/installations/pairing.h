/* Pairing (spec "Pairing"): start and poll for bridges, claim for users. */
#ifndef RL_RELAY_PAIRING_H
#define RL_RELAY_PAIRING_H

#include "http/call.h"
#include "http/validate.h"

int rl_pairing_start(rl_call_t *call);
int rl_pairing_poll(rl_call_t *call);
int rl_pairing_claim(rl_call_t *call);
/*
 * The authors' long poll by code (issue 26): GET /v1/pairing/poll?code=&timeout=.
 * A held request re-reads the store every RL_PAIR_WAIT_TICK_MS, so a claim
 * on any node of the relay is seen; at most RL_PAIR_WAITS_MAX wait per node.
 */
int rl_pairing_wait(rl_call_t *call);
#define RL_PAIR_WAIT_TICK_MS 500
#define RL_PAIR_WAITS_MAX    1024
struct rl_installations_ctx;
typedef struct rl_pair_waits rl_pair_waits_t;
/* The node's held polls (rl_installations_open). Loop thread. NULL when out of memory. */
rl_pair_waits_t *rl_pair_waits_new(const struct rl_installations_ctx *ctx);
/* Answers every held poll "pending" now, so that a graceful stop need not wait for them. */
void rl_pair_waits_close(rl_pair_waits_t *waits);
/* Pairing polls held on this node now (relay_pairing_polls_waiting). */
size_t rl_pair_waits_count(const rl_pair_waits_t *waits);
/* Frees it; rl_pair_waits_close ran and the store has drained. */
void rl_pair_waits_free(rl_pair_waits_t *waits);
extern const rl_schema_t rl_pairing_start_schema, rl_pairing_poll_schema, rl_pairing_claim_schema;

#endif
