/*
 * spec (delivery rule 5): reconnect backoff starts at 1 s, doubles each
 * time, is capped at 30 s and is reset after a successful open.
 * Pure; one thread.
 */
#ifndef RL_CLIENT_BACKOFF_H
#define RL_CLIENT_BACKOFF_H

typedef struct rl_backoff {
    long first_ms, cap_ms, next_ms;
} rl_backoff_t;

/* first_ms 0 means 1000, cap_ms 0 means 30000. */
void rl_backoff_init(rl_backoff_t *backoff, long first_ms, long cap_ms);
/* The delay before the next attempt; the one after is twice as long, up to the cap. */
long rl_backoff_next(rl_backoff_t *backoff);
/* After a successful open. */
void rl_backoff_reset(rl_backoff_t *backoff);

#endif
