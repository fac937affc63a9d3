/*
 * Splits a byte stream into lines with a cap on one line's length (every
 * buffer fed by a peer has a cap). One thread.
 */
#ifndef RL_BRIDGE_JSONL_READER_H
#define RL_BRIDGE_JSONL_READER_H

#include <stddef.h>

#include "common/buf.h"

typedef void (*rl_jsonl_line_cb)(void *user, const char *line, size_t len);

typedef struct rl_jsonl_reader {
    rl_buf_t line; /* capped at the longest line */
    int skipping;  /* inside a line that passed max: dropped up to its newline */
} rl_jsonl_reader_t;

void rl_jsonl_reader_init(rl_jsonl_reader_t *reader, size_t max_line);
void rl_jsonl_reader_free(rl_jsonl_reader_t *reader);
/*
 * Feeds bytes; calls cb for each complete line, without its "\n" (a "\r"
 * before it is dropped too). Returns 0, or -1 when a line passed the cap
 * (it is dropped; reading resumes after its newline).
 */
int rl_jsonl_reader_feed(rl_jsonl_reader_t *reader, const char *bytes, size_t len, rl_jsonl_line_cb cb, void *user);

#endif
