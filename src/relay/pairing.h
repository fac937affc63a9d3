/* Pairing (spec "Pairing"): start and poll for bridges, claim for users. */
#ifndef RL_RELAY_PAIRING_H
#define RL_RELAY_PAIRING_H

#include "http/call.h"
#include "http/validate.h"

int rl_pairing_start(rl_call_t *call);
int rl_pairing_poll(rl_call_t *call);
int rl_pairing_claim(rl_call_t *call);
extern const rl_schema_t rl_pairing_start_schema, rl_pairing_poll_schema, rl_pairing_claim_schema;

#endif
