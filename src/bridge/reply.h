/*
 * The text of one agent message as the bridge sent it, kept so that
 * sendMessageEnd can carry it as the canonical text (spec: sendMessageEnd's
 * text "if omitted the streamed text is kept"): the stored reply is then
 * whole even when a delta was lost on the way, during an outage of the
 * relay say. The text is bounded by relayd's cap on a message's text; a
 * longer reply keeps its first RL_REPLY_TEXT_MAX characters here, for the
 * case where it must be ended as incomplete. One thread.
 */
#ifndef RL_BRIDGE_REPLY_H
#define RL_BRIDGE_REPLY_H

#include <jansson.h>
#include <stddef.h>

#include "common/buf.h"

/* Characters (code points): relayd refuses a longer message text (docs/api.md). */
#define RL_REPLY_TEXT_MAX 100000

/* What an incomplete reply ends with, after the text that did arrive. */
#define RL_REPLY_INCOMPLETE_NOTE "\n\n[incomplete: part of this reply could not be delivered to the relay]"

typedef struct rl_reply {
    rl_buf_t text; /* at most 4 bytes a character: RL_REPLY_TEXT_MAX characters always fit */
    size_t chars;  /* code points */
    int overflow;  /* the reply was longer than RL_REPLY_TEXT_MAX characters: text holds its start */
} rl_reply_t;

void rl_reply_init(rl_reply_t *reply);
void rl_reply_free(rl_reply_t *reply);
/*
 * Appends what the bridge sent as a delta (valid UTF-8). Past the cap only
 * the characters that fit are kept and overflow is set. 0, or -1 when out of
 * memory (the reply then counts as overflowed: it is no longer whole).
 */
int rl_reply_append(rl_reply_t *reply, const char *bytes, size_t len);
/*
 * The canonical text for sendMessageEnd: a new string, or NULL when the
 * reply overflowed (the streamed text is then kept as the relay folded it).
 */
json_t *rl_reply_canonical(const rl_reply_t *reply);
/*
 * The text of the reply ended as incomplete: its start, cut on a character
 * boundary so that the note fits under the cap, then RL_REPLY_INCOMPLETE_NOTE.
 * A malloc'd string, or NULL when out of memory.
 */
char *rl_reply_incomplete(const rl_reply_t *reply);

#endif
