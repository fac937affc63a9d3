/*
 * The route rows of pairing, installations, the manifest and the bridge's socket (docs/api.md); src/relay/routes.c
 * assembles every feature's rows into relayd's table.
 */
#include "relay/core/auth.h"
#include "relay/installations/bridge_ws.h"
#include "relay/installations/installations.h"
#include "relay/installations/manifest.h"
#include "relay/installations/pairing.h"
#include "relay/installations/routes.h"

const rl_route_t rl_installations_routes[] = {
    /* Pairing: per-IP buckets on the unauthenticated routes, per-user on the claim. */
    {"POST", "/v1/pairing/start", rl_pairing_start, RL_AUTH_NONE, "pairing", &rl_pairing_start_schema, 0},
    {"POST", "/v1/pairing/poll", rl_pairing_poll, RL_AUTH_NONE, "pairing", &rl_pairing_poll_schema, 0},
    /* the protocol authors' long poll by code (docs/api.md "Encrypted sessions") */
    {"GET", "/v1/pairing/poll", rl_pairing_wait, RL_AUTH_NONE, "pairing", NULL, 0},
    {"POST", "/v1/me/pairing/claim", rl_pairing_claim, RL_AUTH_USER, "claim", &rl_pairing_claim_schema, 0},
    {"PATCH", "/v1/me/installations/:id", rl_installation_patch, RL_AUTH_USER, "default", &rl_installation_patch_schema,
     0},
    {"DELETE", "/v1/me/installations/:id", rl_installation_revoke, RL_AUTH_USER, "default", NULL, 0},
    {"GET", "/v1/bridge/ws", rl_bridge_ws_open, RL_AUTH_BRIDGE_UPGRADE, "default", NULL, 0},
    {"POST", "/v1/bridge/setManifest", rl_manifest_set, RL_AUTH_BRIDGE, "default", &rl_manifest_schema, 0},
};

const size_t rl_installations_nroutes = sizeof(rl_installations_routes) / sizeof(rl_installations_routes[0]);
