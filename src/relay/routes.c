/*
 * relayd's route table, assembled from the features' rows (each feature's
 * routes.c: method, pattern, handler, auth, rate bucket, body schema) and
 * /healthz, once, on the loop thread. A path's methods are rows of one feature,
 * so the order of the features changes no answer (a 405's Allow lists them in
 * the feature's order).
 */
#include <assert.h>
#include <string.h>

#include "common/error.h"
#include "relay/core/relay.h"
#include "relay/e2e/routes.h"
#include "relay/identity/routes.h"
#include "relay/installations/routes.h"
#include "relay/media/routes.h"
#include "relay/push/routes.h"
#include "relay/sessions/routes.h"
#include "relay/turn/routes.h"

static int healthz(rl_call_t *call)
{
    rl_call_reply(call, json_pack("{s:s}", "status", "ok"));
    return 0;
}

static const rl_route_t health_routes[] = {
    {"GET", "/healthz", healthz, RL_AUTH_NONE, NULL, NULL, 0},
};

static const struct feature_rows {
    const rl_route_t *rows;
    const size_t *count;
} features[] = {
    {health_routes, NULL},
    {rl_installations_routes, &rl_installations_nroutes},
    {rl_identity_routes, &rl_identity_nroutes},
    {rl_sessions_routes, &rl_sessions_nroutes},
    {rl_turn_routes, &rl_turn_nroutes},
    {rl_media_routes, &rl_media_nroutes},
    {rl_e2e_routes, &rl_e2e_nroutes},
    {rl_push_routes, &rl_push_nroutes},
};

/* Room for every row: a new feature's rows past it trip the assert at start. */
#define RL_RELAY_ROUTES_MAX 128

const rl_route_t *rl_relay_routes(size_t *count)
{
    static rl_route_t table[RL_RELAY_ROUTES_MAX];
    static size_t used;
    size_t i;

    if (used == 0)
        for (i = 0; i < sizeof(features) / sizeof(features[0]); ++i) {
            size_t n =
                features[i].count != NULL ? *features[i].count : sizeof(health_routes) / sizeof(health_routes[0]);
            assert(used + n <= RL_RELAY_ROUTES_MAX);
            memcpy(table + used, features[i].rows, n * sizeof(table[0]));
            used += n;
        }
    *count = used;
    return table;
}
