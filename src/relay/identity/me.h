/* GET /v1/me: the account, its installations with their health, and its sessions. */
#ifndef RL_RELAY_ME_H
#define RL_RELAY_ME_H

#include <stdint.h>

#include "http/call.h"

struct rl_hub;
typedef struct rl_me_cache rl_me_cache_t;

int rl_me_get(rl_call_t *call);
/* The cache of /v1/me answers (me.c), listening to the users' events on hub; NULL when out of memory. */
rl_me_cache_t *rl_me_cache_new(struct rl_hub *hub);
/* Drops lapsed answers; housekeeping. */
void rl_me_cache_sweep(rl_me_cache_t *cache, int64_t now_ms, unsigned parts);
void rl_me_cache_free(rl_me_cache_t *cache);

#endif
