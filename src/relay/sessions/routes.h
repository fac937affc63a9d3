/* The route rows this feature serves (routes.c); src/relay/routes.c assembles them. */
#ifndef RL_RELAY_SESSIONS_ROUTES_H
#define RL_RELAY_SESSIONS_ROUTES_H

#include <stddef.h>

#include "http/route.h"

extern const rl_route_t rl_sessions_routes[];
extern const size_t rl_sessions_nroutes;

#endif
