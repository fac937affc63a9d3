/* The per-operation bump allocator (store.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"

#define CHUNK_MIN 2048
#define ALIGN     16

struct rl_arena_chunk {
    rl_arena_chunk_t *next;
    size_t size, used;
    _Alignas(ALIGN) unsigned char bytes[];
};

static void out_of_memory(void)
{
    fputs("relay: out of memory in a store operation\n", stderr);
    abort();
}

void *rl_arena_alloc(rl_arena_t *arena, size_t n)
{
    rl_arena_chunk_t *chunk = arena->head;
    size_t need = (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    void *at;

    if (need == 0)
        need = ALIGN;
    if (chunk == NULL || chunk->size - chunk->used < need) {
        size_t size = need > CHUNK_MIN ? need : CHUNK_MIN;
        chunk = malloc(sizeof(*chunk) + size);
        if (chunk == NULL)
            out_of_memory();
        chunk->size = size;
        chunk->used = 0;
        /* A chunk made for one large item goes behind the current one, which keeps its free space. */
        if (arena->head != NULL && size == need && need > CHUNK_MIN) {
            chunk->next = arena->head->next;
            arena->head->next = chunk;
        } else {
            chunk->next = arena->head;
            arena->head = chunk;
        }
    }
    at = chunk->bytes + chunk->used;
    chunk->used += need;
    return at;
}

char *rl_arena_strndup(rl_arena_t *arena, const char *text, size_t len)
{
    char *copy;

    if (text == NULL)
        return NULL;
    copy = rl_arena_alloc(arena, len + 1);
    memcpy(copy, text, len);
    copy[len] = '\0';
    return copy;
}

char *rl_arena_strdup(rl_arena_t *arena, const char *text)
{
    return text != NULL ? rl_arena_strndup(arena, text, strlen(text)) : NULL;
}

void *rl_arena_grow(rl_arena_t *arena, void *items, size_t count, size_t *capacity, size_t elem)
{
    void *grown;

    if (count < *capacity)
        return items;
    *capacity = *capacity == 0 ? 8 : *capacity * 2;
    grown = rl_arena_alloc(arena, *capacity * elem);
    if (count > 0)
        memcpy(grown, items, count * elem);
    return grown;
}

void rl_arena_free(rl_arena_t *arena)
{
    rl_arena_chunk_t *chunk, *next;

    for (chunk = arena->head; chunk != NULL; chunk = next) {
        next = chunk->next;
        free(chunk);
    }
    arena->head = NULL;
}
