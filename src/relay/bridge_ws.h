/*
 * The bridge's WebSocket (GET /v1/bridge/ws): delivery of updates, ping and
 * pong, and the agent health that follows them. Loop thread only.
 *
 * Which node holds an installation's socket, and so its health, is state of
 * this process: with several relay nodes, updates queued on one node reach a
 * socket on another only through a shared bus (docs/operations.md).
 */
#ifndef RL_RELAY_BRIDGE_WS_H
#define RL_RELAY_BRIDGE_WS_H

#include "http/call.h"

struct rl_relay;

/* Sets up the socket registry and registers the relay's bridge hooks. 0 or -1. */
int rl_bridge_ws_init(struct rl_relay *relay);
/* Closes every socket (going away) and frees the registry. */
void rl_bridge_ws_dispose(struct rl_relay *relay);
/* The route handler: authenticates, upgrades, says ready, replays, then goes live. */
int rl_bridge_ws_open(rl_call_t *call);
/* "healthy", "degraded" or "offline". */
const char *rl_bridge_health(struct rl_relay *relay, const char *installation_id);

#endif
