/*
 * A growable byte buffer with a hard cap fixed when it is created (the house
 * rule: every buffer fed by a peer has one). The bytes are always followed by
 * a NUL once anything is held, so a buffer of text can be read as a string.
 * A failed append leaves the buffer as it was and says why: out of memory or
 * over the cap. Not thread-safe: one owner at a time.
 */
#ifndef RL_COMMON_BUF_H
#define RL_COMMON_BUF_H

#include <stddef.h>

/* rl_buf_write's answer when the descriptor would block with bytes left. */
#define RL_BUF_AGAIN 1

enum rl_buf_error {
    RL_BUF_E_NOMEM = -1,    /* the allocator refused */
    RL_BUF_E_TOO_LARGE = -2 /* the append would pass the buffer's cap */
};

typedef struct rl_buf {
    char *bytes;  /* NULL until the first byte; then NUL-terminated after len */
    size_t len;   /* bytes held */
    size_t alloc; /* bytes allocated, the NUL's included */
    size_t cap;   /* len never passes this */
} rl_buf_t;

/* An empty buffer that will hold at most cap bytes; allocates nothing. */
void rl_buf_init(rl_buf_t *buf, size_t cap);
/* Gives back the memory; the buffer is empty (same cap) and can be used again. */
void rl_buf_free(rl_buf_t *buf);
/* Empties the buffer and keeps its memory for the next use. */
void rl_buf_reset(rl_buf_t *buf);
/* Appends len bytes: 0, or an rl_buf_error with the buffer unchanged. */
int rl_buf_append(rl_buf_t *buf, const void *bytes, size_t len);
/* Appends a NUL-terminated string, without its NUL. As rl_buf_append. */
int rl_buf_append_str(rl_buf_t *buf, const char *text);
/* Appends formatted text. As rl_buf_append (a format error counts as RL_BUF_E_NOMEM). */
int rl_buf_printf(rl_buf_t *buf, const char *format, ...) __attribute__((format(printf, 2, 3)));
/* Drops the first n bytes (all of them when n >= len), keeping the rest in order. */
void rl_buf_consume(rl_buf_t *buf, size_t n);
/*
 * Hands the bytes to the caller: a malloc'd NUL-terminated string (an empty
 * one when nothing is held) and, when len is not NULL, its length; the buffer
 * is left empty. NULL when out of memory (the buffer is then unchanged).
 */
char *rl_buf_take(rl_buf_t *buf, size_t *len);
/*
 * Writes the bytes to fd (non-blocking) until all are written or it would
 * block, dropping what was written. 0 when the buffer is empty,
 * RL_BUF_AGAIN when bytes are left for the next time fd is writable, or -1
 * with errno on a write error (the unwritten bytes are kept).
 */
int rl_buf_write(rl_buf_t *buf, int fd);
/* The bytes as a string: "" while nothing has been held. Valid until the next change. */
static inline const char *rl_buf_str(const rl_buf_t *buf)
{
    return buf->bytes != NULL ? buf->bytes : "";
}

#endif
