/*
 * Who the user is (docs/internals/layout.md, "The relay by feature"):
 * sign-in links (login.c), GET /v1/me and its cache (me.c), the user's
 * event stream (stream.c), the web client's files and settings (webapp.c).
 * The feature's context holds what it uses of the relay and nothing more;
 * its handlers reach it through rl_feature_of(call, RL_FEATURE_IDENTITY).
 * Loop thread only.
 */
#ifndef RL_RELAY_IDENTITY_H
#define RL_RELAY_IDENTITY_H

#include <h2o.h>
#include <stdint.h>

#include "bus/bus.h"
#include "relay/core/config.h"

struct rl_hub;
struct rl_push;
struct rl_login;
struct rl_webapp;
struct rl_me_cache;

/* What identity uses of the relay, filled by relay.c; each must outlive the feature. */
typedef struct rl_identity_ctx {
    const rl_config_t *config;
    rl_bus_t *bus;            /* installations' presence in GET /v1/me */
    struct rl_hub *hub;       /* the user's events: the streams, and what drops a cached /v1/me */
    h2o_timeout_t *heartbeat; /* shared by every event stream */
    struct rl_push *push;     /* the VAPID key of GET /v1/web/config */
} rl_identity_ctx_t;

/* The feature: its context, and the parts it keeps. */
typedef struct rl_identity {
    rl_identity_ctx_t ctx;
    struct rl_login *login;       /* the embedded issuer's key for the exchange */
    struct rl_webapp *webapp;     /* the web client's policy */
    struct rl_me_cache *me_cache; /* answers of GET /v1/me */
} rl_identity_t;

/* Copies ctx and opens the parts. Startup; 0 or -1 with the cause logged. */
int rl_identity_open(const rl_identity_ctx_t *ctx, rl_identity_t **out);
/*
 * Frees the sign-in key and the web client's policy. The /v1/me cache listens
 * to the hub like the streams do, and is left to the process's exit with
 * them (relay.c says why). NULL is ignored.
 */
void rl_identity_close(rl_identity_t *identity);
/* Drops lapsed /v1/me answers, a share each call (housekeeping). NULL is ignored. */
void rl_identity_sweep(rl_identity_t *identity, int64_t now_ms, unsigned parts);

#endif
