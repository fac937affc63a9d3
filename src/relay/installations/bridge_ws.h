/*
 * The bridge's WebSocket (GET /v1/bridge/ws): delivery of updates, ping and
 * pong, and the agent health that follows them. Loop thread only.
 *
 * The registry holds the sockets of this node. Which node holds an
 * installation's socket, and its health, is the installation's presence on
 * the bus; updates queued and revocations decided on any node reach the
 * socket through bus signals (docs/internals/bus.md).
 */
#ifndef RL_RELAY_BRIDGE_WS_H
#define RL_RELAY_BRIDGE_WS_H

#include <jansson.h>

#include "http/call.h"

struct rl_installations_ctx;
typedef struct rl_bridge_ws rl_bridge_ws_t;

/* The registry of this node's sockets (rl_installations_open); NULL when out of memory. */
rl_bridge_ws_t *rl_bridge_ws_new(struct rl_installations_ctx *ctx);
/*
 * Frees the registry at the stop, after rl_bridge_ws_close_all and the
 * store's drain: the sockets whose connection ended are freed with it. One
 * whose connection is still open (--shutdown-timeout passed) is left to the
 * process exit, as h2o's connections are, and the registry with it. NULL is
 * ignored.
 */
void rl_bridge_ws_free(rl_bridge_ws_t *registry);
/*
 * Shutdown: closes every socket with 1012 (service restart), so that bridges
 * reconnect at once; the sockets go as their close handshakes end (or after
 * the pong deadline). Afterwards rl_bridge_ws_open refuses new upgrades.
 */
void rl_bridge_ws_close_all(rl_bridge_ws_t *registry);
/* Sockets of this node not yet closed (shutdown waits for them). */
size_t rl_bridge_ws_count(const rl_bridge_ws_t *registry);
/* This node's registered sockets by health (the metrics); walks them all. */
void rl_bridge_ws_health(rl_bridge_ws_t *registry, size_t *healthy, size_t *degraded);
/* Pings this node sent its bridges, pongs it read, pong deadlines that passed unanswered. */
void rl_bridge_ws_pings(const rl_bridge_ws_t *registry, uint64_t *sent, uint64_t *answered, uint64_t *missed);
/* The route handler: authenticates, upgrades, says ready, replays, then goes live. */
int rl_bridge_ws_open(rl_call_t *call);
/* A signal on an installation's topic (updates, replaced). */
void rl_bridge_ws_on_signal(rl_bridge_ws_t *registry, const char *topic, json_t *message);
/* The installation was revoked: its socket here, if any, closes with 4401. */
void rl_bridge_ws_revoked(rl_bridge_ws_t *registry, const char *installation_id);
/*
 * The bus says an installation's presence lapsed (its node is gone) and this
 * node is the one to tell: publishes agent_health_changed offline to its
 * user, unless a socket holds it again or it was revoked. Loop thread.
 */
void rl_bridge_ws_lapsed(rl_bridge_ws_t *registry, const char *installation_id);

#endif
