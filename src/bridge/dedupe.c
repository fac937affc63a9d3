#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bridge/dedupe.h"

struct rl_dedupe {
    size_t capacity, count, next; /* ring: next slot to overwrite */
    char (*ids)[RL_DEDUPE_ID_MAX];
    /* Index: slot + 1 of the ring entry, 0 empty, SIZE_MAX a tombstone. */
    size_t *index;
    size_t index_size; /* a power of two, at least twice capacity */
    size_t tombs;      /* tombstones in the index; past index_size / 4 it is rebuilt */
};

#define TOMB SIZE_MAX

static uint64_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    while (*s != '\0')
        h = (h ^ (unsigned char)*s++) * 1099511628211ull;
    return h;
}

rl_dedupe_t *rl_dedupe_new(size_t capacity)
{
    rl_dedupe_t *d = calloc(1, sizeof(*d));

    if (d == NULL)
        return NULL;
    d->capacity = capacity > 0 ? capacity : RL_DEDUPE_CAPACITY;
    d->index_size = 16;
    while (d->index_size < d->capacity * 2)
        d->index_size <<= 1;
    d->ids = calloc(d->capacity, sizeof(*d->ids));
    d->index = calloc(d->index_size, sizeof(*d->index));
    if (d->ids == NULL || d->index == NULL) {
        rl_dedupe_free(d);
        return NULL;
    }
    return d;
}

void rl_dedupe_free(rl_dedupe_t *d)
{
    if (d == NULL)
        return;
    free(d->ids);
    free(d->index);
    free(d);
}

/* The index position holding id, or the first free one on its probe path when absent (*found 0). */
static size_t probe(const rl_dedupe_t *d, const char *id, int *found)
{
    size_t mask = d->index_size - 1, pos = (size_t)hash(id) & mask, free_pos = SIZE_MAX;

    for (;;) {
        size_t v = d->index[pos];
        if (v == 0) {
            *found = 0;
            return free_pos != SIZE_MAX ? free_pos : pos;
        }
        if (v == TOMB) {
            if (free_pos == SIZE_MAX)
                free_pos = pos;
        } else if (strcmp(d->ids[v - 1], id) == 0) {
            *found = 1;
            return pos;
        }
        pos = (pos + 1) & mask;
    }
}

int rl_dedupe_seen(const rl_dedupe_t *d, const char *id)
{
    int found;

    if (strlen(id) >= RL_DEDUPE_ID_MAX)
        return 0;
    probe(d, id, &found);
    return found;
}

/* Rebuilds the index from the ring: forgetting an id leaves a tombstone, and probes must end on an empty
 * slot. */
static void rebuild(rl_dedupe_t *d)
{
    size_t i, slot;
    int found;

    memset(d->index, 0, d->index_size * sizeof(*d->index));
    d->tombs = 0;
    for (i = 0; i < d->count; i++) {
        slot = (d->next + d->capacity - d->count + i) % d->capacity;
        d->index[probe(d, d->ids[slot], &found)] = slot + 1;
    }
}

int rl_dedupe_add(rl_dedupe_t *d, const char *id)
{
    int found;
    size_t pos;

    if (strlen(id) >= RL_DEDUPE_ID_MAX)
        return -1;
    probe(d, id, &found);
    if (found)
        return 0;
    if (d->count == d->capacity) {
        int old_found;
        size_t old = probe(d, d->ids[d->next], &old_found);
        if (old_found) {
            d->index[old] = TOMB;
            d->tombs++;
        }
    } else {
        d->count++;
    }
    memcpy(d->ids[d->next], id, strlen(id) + 1);
    pos = probe(d, id, &found);
    if (d->index[pos] == TOMB)
        d->tombs--;
    d->index[pos] = d->next + 1;
    d->next = (d->next + 1) % d->capacity;
    if (d->tombs > d->index_size / 4)
        rebuild(d);
    return 1;
}
