/*
 * Housekeeping, once a minute: what lapsed goes (idempotency records past
 * their TTL, updates past the replay window, pairings, sign-in codes), and
 * the caches of this node are trimmed. Sessions past their delete grace go
 * with their messages, tasks and approvals in the attachment sweep.
 */
#ifndef RL_RELAY_HOUSEKEEPING_H
#define RL_RELAY_HOUSEKEEPING_H

struct rl_relay;
typedef struct rl_housekeeping rl_housekeeping_t;

rl_housekeeping_t *rl_housekeeping_start(struct rl_relay *relay);
void rl_housekeeping_stop(rl_housekeeping_t *housekeeping);

#endif
