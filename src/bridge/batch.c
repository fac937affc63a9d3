#include <stdlib.h>
#include <string.h>

#include "bridge/batch.h"

void rl_batch_init(rl_batch_t *b, long window_ms)
{
    memset(b, 0, sizeof(*b));
    rl_buf_init(&b->text, RL_BATCH_MAX);
    b->window_ms = window_ms;
    b->opened_at = -1;
}

void rl_batch_free(rl_batch_t *b)
{
    rl_buf_free(&b->text);
}

int rl_batch_append(rl_batch_t *b, const char *bytes, size_t len, long now_ms)
{
    if (len == 0)
        return 0;
    if (rl_buf_append(&b->text, bytes, len) != 0)
        return -1;
    if (b->opened_at < 0)
        b->opened_at = now_ms;
    return 0;
}

long rl_batch_due(const rl_batch_t *b)
{
    return b->opened_at < 0 ? -1 : b->opened_at + b->window_ms;
}

/* The longest prefix of at most n bytes that does not end inside a UTF-8 sequence. */
static size_t utf8_boundary(const unsigned char *s, size_t n)
{
    size_t i = n, back = 0;

    while (i > 0 && back < 4 && (s[i - 1] & 0xC0) == 0x80) {
        i--;
        back++;
    }
    if (i == 0)
        return n;
    {
        unsigned char lead = s[i - 1];
        size_t need = lead < 0x80             ? 1
                      : (lead & 0xE0) == 0xC0 ? 2
                      : (lead & 0xF0) == 0xE0 ? 3
                      : (lead & 0xF8) == 0xF0 ? 4
                                              : 1;
        if (need == 1)
            return n;
        return back + 1 >= need ? n : i - 1;
    }
}

char *rl_batch_take(rl_batch_t *b, size_t max, int final, size_t *len)
{
    size_t n = b->text.len < max ? b->text.len : max;
    char *out;

    if (!final || n < b->text.len)
        n = utf8_boundary((const unsigned char *)b->text.bytes, n);
    if (n == 0) {
        if (b->text.len == 0)
            b->opened_at = -1;
        return NULL;
    }
    out = malloc(n + 1);
    if (out == NULL)
        return NULL;
    memcpy(out, b->text.bytes, n);
    out[n] = '\0';
    rl_buf_consume(&b->text, n);
    /* A kept tail waits for its next bytes, under a new window. */
    b->opened_at = -1;
    *len = n;
    return out;
}
