/* The route rows this feature serves (routes.c); src/relay/routes.c assembles them. */
#ifndef RL_RELAY_MEDIA_ROUTES_H
#define RL_RELAY_MEDIA_ROUTES_H

#include <stddef.h>

#include "http/route.h"

extern const rl_route_t rl_media_routes[];
extern const size_t rl_media_nroutes;

#endif
