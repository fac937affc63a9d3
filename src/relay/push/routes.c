/*
 * The route rows of Web Push subscriptions (docs/api.md); src/relay/routes.c
 * assembles every feature's rows into relayd's table.
 */
#include "relay/core/auth.h"
#include "relay/push/push.h"
#include "relay/push/routes.h"

const rl_route_t rl_push_routes[] = {
    {"POST", "/v1/me/push-subscriptions", rl_push_subscribe, RL_AUTH_USER, "default", &rl_push_subscribe_schema, 0},
    {"DELETE", "/v1/me/push-subscriptions", rl_push_unsubscribe, RL_AUTH_USER, "default", &rl_push_unsubscribe_schema,
     0},
};

const size_t rl_push_nroutes = sizeof(rl_push_routes) / sizeof(rl_push_routes[0]);
