/*
 * The sessions feature's context (docs/internals/layout.md, "The relay by
 * feature"): what sessions, their timeline and the agent's state use of the
 * relay, and nothing more. Its handlers reach it through
 * rl_feature_of(call, RL_FEATURE_SESSIONS). Loop thread only.
 */
#ifndef RL_RELAY_SESSIONS_CONTEXT_H
#define RL_RELAY_SESSIONS_CONTEXT_H

#include "bus/bus.h"
#include "relay/core/config.h"

struct rl_hub;
struct rl_deltas;
struct rl_rpc;
struct rl_media;

/* Filled by relay.c; each must outlive the feature. */
typedef struct rl_sessions_ctx {
    const rl_config_t *config;
    rl_bus_t *bus;            /* a change the bridge must hear of wakes it (updates.h) */
    struct rl_hub *hub;       /* session events to the user */
    struct rl_deltas *deltas; /* the open messages of a session that changes or goes; the timeline's flush */
    struct rl_rpc *rpc;       /* the bridge's projects, agent sessions and models, asked live */
    struct rl_media *media;   /* the timeline's attachment links */
} rl_sessions_ctx_t;

/* A copy of ctx: the handlers' context. Startup; 0 or -1 (out of memory). */
int rl_sessions_open(const rl_sessions_ctx_t *ctx, rl_sessions_ctx_t **out);
/* NULL is ignored. */
void rl_sessions_close(rl_sessions_ctx_t *sessions);

#endif
