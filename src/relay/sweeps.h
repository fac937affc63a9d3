/*
 * The relay's once-a-second sweeps of the store: approvals that expired,
 * messages left open past their follow-up window. Each is one operation at
 * a time; a sweep that is still running is not started again.
 */
#ifndef RL_RELAY_SWEEPS_H
#define RL_RELAY_SWEEPS_H

#include <stdint.h>

struct rl_relay;
typedef struct rl_sweeps rl_sweeps_t;

rl_sweeps_t *rl_sweeps_start(struct rl_relay *relay);
/* The sweep operations this node has finished (each row of the table once per round it ran): what a test
 * waits on instead of sleeping through a few rounds. */
uint64_t rl_sweeps_done(const rl_sweeps_t *sweeps);
/* Stops the timer (shutdown: nothing new is queued); rl_sweeps_free once the store drained. */
void rl_sweeps_stop(rl_sweeps_t *sweeps);
void rl_sweeps_free(rl_sweeps_t *sweeps);

#endif
