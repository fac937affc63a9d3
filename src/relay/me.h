/* GET /v1/me: the account, its installations with their health, and its sessions. */
#ifndef RL_RELAY_ME_H
#define RL_RELAY_ME_H

#include "http/call.h"

int rl_me_get(rl_call_t *call);

#endif
