/*
 * The relay application: configuration, store, limiter, user-token keys and
 * the HTTP server, tied to one event loop. Loop thread only.
 */
#ifndef RL_RELAY_RELAY_H
#define RL_RELAY_RELAY_H

#include <h2o.h>

#include "common/strmap.h"
#include "http/server.h"
#include "relay/config.h"
#include "relay/jwks_source.h"
#include "relay/jwt.h"
#include "relay/ratelimit.h"
#include "store/store.h"

/* Auth kinds of the route table. */
enum rl_auth_kind {
    RL_AUTH_NONE = 0,
    RL_AUTH_USER,           /* a user JWT */
    RL_AUTH_BRIDGE,         /* a bridge token on REST: a revoked installation is 410 */
    RL_AUTH_BRIDGE_UPGRADE, /* a bridge token on the socket upgrade: a revoked installation is 401 */
};

/* call->principal_kind */
enum rl_principal_kind { RL_PRINCIPAL_NONE = 0, RL_PRINCIPAL_USER, RL_PRINCIPAL_INSTALLATION };

/* The embedded issuer's names, used when no external provider is configured. */
#define RL_EMBEDDED_ISSUER "relayd"
#define RL_EMBEDDED_AUDIENCE "relay"

typedef struct rl_relay {
    rl_config_t config;
    h2o_loop_t *loop;
    rl_store_t *store;
    rl_ratelimit_t *limiter;
    rl_jwks_source_t *jwks;
    rl_jwt_policy_t policy;
    rl_strmap_t *known_users; /* users already ensured in the store by this process */
    rl_http_config_t http;
    rl_http_server_t *server;
    h2o_timeout_t housekeeping_timeout;
    h2o_timeout_entry_t housekeeping;
} rl_relay_t;

extern const rl_route_t rl_relay_routes[];
extern const size_t rl_relay_nroutes;

/*
 * Opens the store, the key source and the server on loop, from
 * relay->config. Blocking (startup). 0 or -1 with the cause logged.
 */
int rl_relay_start(rl_relay_t *relay, h2o_loop_t *loop);
/* Stops listening, flushes the store and frees everything. */
void rl_relay_stop(rl_relay_t *relay);

/* The server's hooks (relay/auth.c). */
void rl_relay_authenticate(rl_call_t *call);
int rl_relay_limit(rl_call_t *call);

/* Route handlers (relay/pairing.c). */
int rl_pairing_start(rl_call_t *call);
int rl_pairing_poll(rl_call_t *call);
int rl_pairing_claim(rl_call_t *call);
extern const struct rl_schema rl_pairing_start_schema, rl_pairing_poll_schema, rl_pairing_claim_schema;

/* Route handlers (relay/manifest.c). */
int rl_manifest_set(rl_call_t *call);
extern const struct rl_schema rl_manifest_schema;

/* The installation as clients see it (no token hash). Steals row. */
json_t *rl_installation_view(json_t *row);

#endif
