/*
 * Text delta batching: spec (Limits) asks bridges to batch text deltas into
 * windows of about 30 ms. Bytes appended while a window is open go out
 * together when it closes. A flush never splits a UTF-8 sequence (the relay
 * refuses invalid UTF-8): an incomplete tail waits for its next bytes.
 * A batch never exceeds max bytes (the relay's delta cap is 64 KiB).
 * One thread.
 */
#ifndef RL_BRIDGE_BATCH_H
#define RL_BRIDGE_BATCH_H

#include <stddef.h>

#include "common/buf.h"

/*
 * The most one batch holds: far above what one window gathers (a delta is
 * one agent line at most, 8 MiB), a bound so that an agent that floods its
 * output cannot take all memory.
 */
#define RL_BATCH_MAX (64u * 1024u * 1024u)

typedef struct rl_batch {
    rl_buf_t text;
    long window_ms;
    long opened_at; /* ms, -1 when no window is open */
} rl_batch_t;

void rl_batch_init(rl_batch_t *batch, long window_ms);
void rl_batch_free(rl_batch_t *batch);
/* Appends bytes, opening a window at now_ms when none is open. 0 or -1 (memory, or past RL_BATCH_MAX). */
int rl_batch_append(rl_batch_t *batch, const char *bytes, size_t len, long now_ms);
/* When the open window closes (ms), or -1. */
long rl_batch_due(const rl_batch_t *batch);
/*
 * Takes out the next chunk to send: at most max bytes ending on a UTF-8
 * boundary, or everything when final (a stream that ends mid-sequence sends
 * its bytes as they are; the caller replaces them). Returns a malloc'd
 * NUL-terminated string and its length, or NULL when nothing is ready.
 * Call repeatedly until NULL. The window closes when the buffer empties.
 */
char *rl_batch_take(rl_batch_t *batch, size_t max, int final, size_t *len);

#endif
