/*
 * An immutable, reference-counted byte string: one published event encoded
 * once and shared by every subscriber queue and the replay buffer. Loop
 * thread only (the count is not atomic).
 */
#ifndef RL_COMMON_BLOB_H
#define RL_COMMON_BLOB_H

#include <stddef.h>

typedef struct rl_blob {
    unsigned refs;
    size_t len;
    char bytes[];
} rl_blob_t;

/* A blob holding a copy of bytes (a NUL follows them), with one reference; NULL on allocation failure. */
rl_blob_t *rl_blob_new(const void *bytes, size_t len);
static inline rl_blob_t *rl_blob_retain(rl_blob_t *blob)
{
    ++blob->refs;
    return blob;
}
/* Drops a reference; the last one frees the blob. NULL is ignored. */
void rl_blob_release(rl_blob_t *blob);

#endif
