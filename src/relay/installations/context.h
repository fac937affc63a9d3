/*
 * The installations feature's context (docs/internals/layout.md, "The relay
 * by feature"): what pairing, installations, the manifest and the bridge's
 * socket use of the relay, and nothing more, with what the feature keeps of
 * its own beside it (this node's bridge sockets, its held pairing polls).
 * Its handlers reach it through rl_feature_of(call,
 * RL_FEATURE_INSTALLATIONS). Loop thread only.
 */
#ifndef RL_RELAY_INSTALLATIONS_CONTEXT_H
#define RL_RELAY_INSTALLATIONS_CONTEXT_H

#include <h2o.h>

#include "bus/bus.h"
#include "relay/core/config.h"
#include "relay/core/feature.h"
#include "store/store.h"

struct rl_hub;
struct rl_auth;
struct rl_rpc;
struct rl_media;
struct rl_bridge_ws;
struct rl_pair_waits;

/* What installations use of the relay, filled by relay.c; each must outlive the feature. */
typedef struct rl_installations_ctx {
    const rl_config_t *config;
    rl_store_t *store;
    rl_bus_t *bus;          /* presence, the installation's topic, revocations to every node */
    struct rl_hub *hub;     /* installation and agent health events to the user */
    struct rl_auth *auth;   /* a revoked installation's token is forgotten at once */
    struct rl_rpc *rpc;     /* a bridge's answer to a request of relayd goes to the node that asked */
    struct rl_media *media; /* the attachment links of the updates a socket delivers */
    h2o_loop_t *loop;       /* the sockets' and the held polls' timers */
    const char *node_id;    /* this process: a socket's owner on the bus */
} rl_installations_ctx_t;

/* The feature: its context, and what it keeps. */
typedef struct rl_installations {
    rl_installations_ctx_t ctx;
    struct rl_bridge_ws *sockets;     /* this node's bridge sockets (bridge_ws.c) */
    struct rl_pair_waits *pair_waits; /* the authors' pairing long polls held here (pairing.c) */
} rl_installations_t;

/* The feature a handler's call reaches (its relay's, open while the server listens). */
static inline rl_installations_t *rl_installations_of(const rl_call_t *call)
{
    return rl_feature_of(call, RL_FEATURE_INSTALLATIONS);
}

/* Copies ctx and makes the registry of sockets and of held polls. Startup; 0 or -1 (out of memory). */
int rl_installations_open(const rl_installations_ctx_t *ctx, rl_installations_t **out);
/*
 * Frees what rl_installations_open made; the sockets were closed
 * (rl_bridge_ws_close_all) and the store has drained. NULL is ignored.
 */
void rl_installations_close(rl_installations_t *installations);

#endif
