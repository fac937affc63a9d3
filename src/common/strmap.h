/*
 * A string-keyed hash map with a fixed maximum size (every structure fed by
 * peers has a cap). Keys are copied; values are opaque pointers owned by the
 * caller. Single-threaded.
 */
#ifndef RL_COMMON_STRMAP_H
#define RL_COMMON_STRMAP_H

#include <stddef.h>

typedef struct rl_strmap rl_strmap_t;

/* max_entries is the cap; 0 or -1 from put when it is reached. NULL on allocation failure. */
rl_strmap_t *rl_strmap_new(size_t max_entries);
/* Frees the map; free_value (may be NULL) is called on each value. */
void rl_strmap_free(rl_strmap_t *map, void (*free_value)(void *));
void *rl_strmap_get(const rl_strmap_t *map, const char *key);
/* Inserts or replaces; returns 0, or -1 when full or out of memory. The old value is not freed. */
int rl_strmap_put(rl_strmap_t *map, const char *key, void *value);
/* Removes key and returns its value (NULL when absent). */
void *rl_strmap_remove(rl_strmap_t *map, const char *key);
size_t rl_strmap_size(const rl_strmap_t *map);
/*
 * Calls visit for every entry; when visit returns nonzero the entry is
 * removed (free_value, if not NULL, frees its value).
 */
void rl_strmap_sweep(rl_strmap_t *map, int (*visit)(const char *key, void *value, void *arg), void *arg,
                     void (*free_value)(void *));
/*
 * As rl_strmap_sweep, over one of `parts` shares of the map: the next
 * 1/parts of its slots after where the last call stopped. Called every
 * period, it visits every entry once in `parts` periods without holding the
 * caller for a whole map at once (a sweep of 50 000 rate buckets took the
 * loop 29 ms). parts 1 is the whole map. Entries in the half of a table
 * still being doubled wait for a later call.
 */
void rl_strmap_sweep_part(rl_strmap_t *map, int (*visit)(const char *key, void *value, void *arg), void *arg,
                          void (*free_value)(void *), unsigned parts);

#endif
