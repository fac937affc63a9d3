#include <stdlib.h>
#include <string.h>

#include "bridge/reply.h"

void rl_reply_init(rl_reply_t *reply)
{
    memset(reply, 0, sizeof(*reply));
    rl_buf_init(&reply->text, 4 * (size_t)RL_REPLY_TEXT_MAX);
}

void rl_reply_free(rl_reply_t *reply)
{
    rl_buf_free(&reply->text);
    rl_reply_init(reply);
}

static int continuation(unsigned char byte)
{
    return (byte & 0xC0) == 0x80;
}

int rl_reply_append(rl_reply_t *reply, const char *bytes, size_t len)
{
    size_t take = 0, chars = 0;

    if (reply->overflow)
        return 0;
    /* Whole characters while they fit under the cap. */
    while (take < len) {
        size_t end = take + 1;
        while (end < len && continuation((unsigned char)bytes[end]))
            end++;
        if (reply->chars + chars == RL_REPLY_TEXT_MAX) {
            reply->overflow = 1;
            break;
        }
        chars++;
        take = end;
    }
    if (rl_buf_append(&reply->text, bytes, take) != 0) {
        reply->overflow = 1;
        return -1;
    }
    reply->chars += chars;
    return 0;
}

json_t *rl_reply_canonical(const rl_reply_t *reply)
{
    if (reply->overflow)
        return NULL;
    return json_stringn(rl_buf_str(&reply->text), reply->text.len);
}

char *rl_reply_incomplete(const rl_reply_t *reply)
{
    size_t note = strlen(RL_REPLY_INCOMPLETE_NOTE), keep = reply->text.len, chars = reply->chars;
    char *out;

    /* The note is ASCII: one character per byte. Drop whole characters from the end until it fits. */
    while (keep > 0 && chars + note > RL_REPLY_TEXT_MAX) {
        do
            keep--;
        while (keep > 0 && continuation((unsigned char)reply->text.bytes[keep]));
        chars--;
    }
    out = malloc(keep + note + 1);
    if (out == NULL)
        return NULL;
    if (keep > 0)
        memcpy(out, reply->text.bytes, keep);
    memcpy(out + keep, RL_REPLY_INCOMPLETE_NOTE, note + 1);
    return out;
}
