/*
 * spec (delivery rule 1): updates arrive at least once; the bridge
 * de-duplicates by update_id over the last 10 000 ids. A ring of the ids
 * seen, with an open-addressing index over it so that a lookup is O(1).
 * One thread.
 */
#ifndef RL_BRIDGE_DEDUPE_H
#define RL_BRIDGE_DEDUPE_H

#include <stddef.h>

#define RL_DEDUPE_CAPACITY 10000
#define RL_DEDUPE_ID_MAX   64

typedef struct rl_dedupe rl_dedupe_t;

/* capacity 0 means RL_DEDUPE_CAPACITY. NULL when out of memory. */
rl_dedupe_t *rl_dedupe_new(size_t capacity);
void rl_dedupe_free(rl_dedupe_t *dedupe);
/*
 * Remembers id (at most RL_DEDUPE_ID_MAX - 1 bytes; longer ids are refused
 * with -1) and returns 1 when it was new, 0 when it was already among the
 * last `capacity` ids. The oldest id is forgotten once capacity is reached.
 */
int rl_dedupe_add(rl_dedupe_t *dedupe, const char *id);
/* 1 when id is among the remembered ids. */
int rl_dedupe_seen(const rl_dedupe_t *dedupe, const char *id);

#endif
