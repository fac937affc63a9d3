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

struct rl_strmap {
    struct entry **slots;
    size_t nslots, size, max_entries;
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

void rl_strmap_free(rl_strmap_t *map, void (*free_value)(void *))
{
    size_t i;

    if (map == NULL)
        return;
    for (i = 0; i < map->nslots; ++i) {
        struct entry *e = map->slots[i], *next;
        for (; e != NULL; e = next) {
            next = e->next;
            if (free_value != NULL)
                free_value(e->value);
            free(e);
        }
    }
    free(map->slots);
    free(map);
}

static struct entry **find(const rl_strmap_t *map, const char *key, uint64_t hash)
{
    struct entry **link = &map->slots[hash & (map->nslots - 1)];

    while (*link != NULL && ((*link)->hash != hash || strcmp((*link)->key, key) != 0))
        link = &(*link)->next;
    return link;
}

void *rl_strmap_get(const rl_strmap_t *map, const char *key)
{
    struct entry **link = find(map, key, hash_key(key));

    return *link != NULL ? (*link)->value : NULL;
}

static void grow(rl_strmap_t *map)
{
    size_t nslots = map->nslots * 2, i;
    struct entry **slots = calloc(nslots, sizeof(*slots));

    if (slots == NULL)
        return;
    for (i = 0; i < map->nslots; ++i) {
        struct entry *e = map->slots[i], *next;
        for (; e != NULL; e = next) {
            next = e->next;
            e->next = slots[e->hash & (nslots - 1)];
            slots[e->hash & (nslots - 1)] = e;
        }
    }
    free(map->slots);
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
    if (++map->size > map->nslots)
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

void rl_strmap_sweep(rl_strmap_t *map, int (*visit)(const char *key, void *value, void *arg), void *arg,
                     void (*free_value)(void *))
{
    size_t i;

    for (i = 0; i < map->nslots; ++i) {
        struct entry **link = &map->slots[i];
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
}
