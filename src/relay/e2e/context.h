/*
 * The e2e feature's context (docs/internals/layout.md, "The relay by
 * feature"): what devices, recipients and session files use of the relay,
 * and nothing more. Its handlers reach it through
 * rl_feature_of(call, RL_FEATURE_E2E). Loop thread only.
 */
#ifndef RL_RELAY_E2E_CONTEXT_H
#define RL_RELAY_E2E_CONTEXT_H

#include "bus/bus.h"
#include "relay/core/config.h"

struct rl_hub;
struct rl_rpc;

/* Filled by relay.c; each must outlive the feature. */
typedef struct rl_e2e_ctx {
    const rl_config_t *config;
    rl_bus_t *bus;      /* a device or a wrapped key the bridge must hear of wakes it (updates.h) */
    struct rl_hub *hub; /* device and session events to the user */
    struct rl_rpc *rpc; /* an agent file's bytes, asked of the bridge live */
} rl_e2e_ctx_t;

/* A copy of ctx: the handlers' context. Startup; 0 or -1 (out of memory). */
int rl_e2e_open(const rl_e2e_ctx_t *ctx, rl_e2e_ctx_t **out);
/* NULL is ignored. */
void rl_e2e_close(rl_e2e_ctx_t *e2e);

#endif
