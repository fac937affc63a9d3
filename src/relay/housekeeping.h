/*
 * Housekeeping, once a minute: what lapsed goes (idempotency records past
 * their TTL, updates past the replay window, old tasks, pairings, sessions
 * past their delete grace), and the caches of this node are trimmed.
 */
#ifndef RL_RELAY_HOUSEKEEPING_H
#define RL_RELAY_HOUSEKEEPING_H

struct rl_relay;
typedef struct rl_housekeeping rl_housekeeping_t;

rl_housekeeping_t *rl_housekeeping_start(struct rl_relay *relay);
void rl_housekeeping_stop(rl_housekeeping_t *housekeeping);

#endif
