#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/strmap.h"

struct entry {
    struct entry *next;
    uint64_t hash;
    void *value;
    char key[];
};

/*
 * The table doubles when it holds more entries than slots, and the entries
 * move to the new table a few slots at a time (MOVE_STEP on each insertion),
 * not all at once: a map of 64 000 keys moved in one go held the loop for
 * milliseconds, and a hundred streamed messages whose maps doubled together
 * held it for 20-50 ms (the streaming p99 of issue 16). While slots of the
 * old table remain, an entry whose old slot is not moved yet is found there.
 */
#define MOVE_STEP 64

struct rl_strmap {
    struct entry **slots;
    size_t nslots, size, max_entries;
    struct entry **old; /* while growing: the previous table, its slots [moved, nold) not moved yet */
    size_t nold, moved;
    size_t part; /* the share rl_strmap_sweep_part visits next */
};

/* FNV-1a: keys here are short ids and addresses; seeding is unnecessary because sizes are capped. */
static uint64_t hash_key(const char *key)
{
    uint64_t h = 1469598103934665603ull;

    while (*key != '\0') {
        h ^= (unsigned char)*key++;
        h *= 1099511628211ull;
    }
    return h;
}

rl_strmap_t *rl_strmap_new(size_t max_entries)
{
    rl_strmap_t *map = calloc(1, sizeof(*map));

    if (map == NULL)
        return NULL;
    map->nslots = 64;
    map->max_entries = max_entries;
    map->slots = calloc(map->nslots, sizeof(*map->slots));
    if (map->slots == NULL) {
        free(map);
        return NULL;
    }
    return map;
}

static void free_chain(struct entry *e, void (*free_value)(void *))
{
    struct entry *next;

    for (; e != NULL; e = next) {
        next = e->next;
        if (free_value != NULL)
            free_value(e->value);
        free(e);
    }
}

void rl_strmap_free(rl_strmap_t *map, void (*free_value)(void *))
{
    size_t i;

    if (map == NULL)
        return;
    for (i = 0; i < map->nslots; ++i)
        free_chain(map->slots[i], free_value);
    for (i = map->moved; map->old != NULL && i < map->nold; ++i)
        free_chain(map->old[i], free_value);
    free(map->slots);
    free(map->old);
    free(map);
}

/* The chain an entry of this hash is in, or goes to: the old table's while its slot is not moved yet. */
static struct entry **chain(const rl_strmap_t *map, uint64_t hash)
{
    if (map->old != NULL && (hash & (map->nold - 1)) >= map->moved)
        return &map->old[hash & (map->nold - 1)];
    return &map->slots[hash & (map->nslots - 1)];
}

static struct entry **find(const rl_strmap_t *map, const char *key, uint64_t hash)
{
    struct entry **link = chain(map, hash);

    while (*link != NULL && ((*link)->hash != hash || strcmp((*link)->key, key) != 0))
        link = &(*link)->next;
    return link;
}

void *rl_strmap_get(const rl_strmap_t *map, const char *key)
{
    struct entry **link = find(map, key, hash_key(key));

    return *link != NULL ? (*link)->value : NULL;
}

/* Moves up to MOVE_STEP slots of the old table into the new one; frees it once all have moved. */
static void move_some(rl_strmap_t *map)
{
    size_t end = map->moved + MOVE_STEP < map->nold ? map->moved + MOVE_STEP : map->nold;

    for (; map->moved < end; ++map->moved) {
        struct entry *e = map->old[map->moved], *next;
        for (; e != NULL; e = next) {
            next = e->next;
            e->next = map->slots[e->hash & (map->nslots - 1)];
            map->slots[e->hash & (map->nslots - 1)] = e;
        }
        map->old[map->moved] = NULL;
    }
    if (map->moved == map->nold) {
        free(map->old);
        map->old = NULL;
        map->nold = map->moved = 0;
    }
}

/* Starts doubling the table: the entries move over the next insertions (move_some). */
static void grow(rl_strmap_t *map)
{
    size_t nslots = map->nslots * 2;
    struct entry **slots = calloc(nslots, sizeof(*slots));

    if (slots == NULL)
        return;
    map->old = map->slots;
    map->nold = map->nslots;
    map->moved = 0;
    map->slots = slots;
    map->nslots = nslots;
}

int rl_strmap_put(rl_strmap_t *map, const char *key, void *value)
{
    uint64_t hash = hash_key(key);
    struct entry **link = find(map, key, hash), *e;
    size_t len;

    if (*link != NULL) {
        (*link)->value = value;
        return 0;
    }
    if (map->size >= map->max_entries)
        return -1;
    len = strlen(key);
    e = malloc(sizeof(*e) + len + 1);
    if (e == NULL)
        return -1;
    e->next = NULL;
    e->hash = hash;
    e->value = value;
    memcpy(e->key, key, len + 1);
    *link = e;
    ++map->size;
    /*
     * The old table is gone before the next doubling: its nold slots move in
     * nold / MOVE_STEP insertions, while the next doubling waits for nold more.
     */
    if (map->old != NULL)
        move_some(map);
    else if (map->size > map->nslots)
        grow(map);
    return 0;
}

void *rl_strmap_remove(rl_strmap_t *map, const char *key)
{
    struct entry **link = find(map, key, hash_key(key)), *e = *link;
    void *value;

    if (e == NULL)
        return NULL;
    *link = e->next;
    value = e->value;
    free(e);
    --map->size;
    return value;
}

size_t rl_strmap_size(const rl_strmap_t *map)
{
    return map->size;
}

static void sweep_chain(rl_strmap_t *map, struct entry **link, int (*visit)(const char *key, void *value, void *arg),
                        void *arg, void (*free_value)(void *))
{
    while (*link != NULL) {
        struct entry *e = *link;
        if (visit(e->key, e->value, arg)) {
            *link = e->next;
            if (free_value != NULL)
                free_value(e->value);
            free(e);
            --map->size;
        } else {
            link = &e->next;
        }
    }
}

void rl_strmap_sweep(rl_strmap_t *map, int (*visit)(const char *key, void *value, void *arg), void *arg,
                     void (*free_value)(void *))
{
    size_t i;

    for (i = 0; i < map->nslots; ++i)
        sweep_chain(map, &map->slots[i], visit, arg, free_value);
    for (i = map->moved; map->old != NULL && i < map->nold; ++i)
        sweep_chain(map, &map->old[i], visit, arg, free_value);
}

void rl_strmap_sweep_part(rl_strmap_t *map, int (*visit)(const char *key, void *value, void *arg), void *arg,
                          void (*free_value)(void *), unsigned parts)
{
    size_t i, end;

    if (parts <= 1) {
        rl_strmap_sweep(map, visit, arg, free_value);
        return;
    }
    map->part %= parts;
    end = map->nslots * (map->part + 1) / parts;
    for (i = map->nslots * map->part / parts; i < end; ++i)
        sweep_chain(map, &map->slots[i], visit, arg, free_value);
    ++map->part;
}
