/*
 * The turn's context (docs/internals/layout.md, "The relay by feature"):
 * what messages, their deltas, tasks, approvals and grants use of the
 * relay, and nothing more. Its handlers reach it through
 * rl_feature_of(call, RL_FEATURE_TURN); its sweeps are handed it by
 * sweeps.c. Loop thread only.
 */
#ifndef RL_RELAY_TURN_H
#define RL_RELAY_TURN_H

#include <h2o.h>

#include "bus/bus.h"
#include "relay/core/config.h"
#include "store/store.h"

struct rl_hub;
struct rl_deltas;
struct rl_push;
struct rl_media;

/* Filled by relay.c; each must outlive the feature. */
typedef struct rl_turn_ctx {
    const rl_config_t *config;
    rl_store_t *store;        /* the deltas' batches and their records' loads */
    rl_bus_t *bus;            /* a write the bridge must hear of wakes it (updates.h); the bridge's presence */
    struct rl_hub *hub;       /* messages, deltas, tasks, approvals and grants to the user */
    h2o_loop_t *loop;         /* the deltas' group commit */
    struct rl_deltas *deltas; /* the open messages and their pending deltas */
    struct rl_push *push;     /* a finished reply or an approval asked becomes a Web Push */
    struct rl_media *media;   /* a message's attachment links */
    int shared;               /* other nodes share the store and the bus (rl_relay_t.shared) */
} rl_turn_ctx_t;

/* A copy of ctx: the handlers' context. Startup; 0 or -1 (out of memory). */
int rl_turn_open(const rl_turn_ctx_t *ctx, rl_turn_ctx_t **out);
/* NULL is ignored. */
void rl_turn_close(rl_turn_ctx_t *turn);

#endif
