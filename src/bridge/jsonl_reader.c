#include <stdlib.h>
#include <string.h>

#include "bridge/jsonl_reader.h"

void rl_jsonl_reader_init(rl_jsonl_reader_t *r, size_t max_line)
{
    memset(r, 0, sizeof(*r));
    r->max = max_line;
}

void rl_jsonl_reader_free(rl_jsonl_reader_t *r)
{
    free(r->buf);
    memset(r, 0, sizeof(*r));
}

int rl_jsonl_reader_feed(rl_jsonl_reader_t *r, const char *bytes, size_t len, rl_jsonl_line_cb cb, void *user)
{
    int result = 0;

    while (len > 0) {
        const char *nl = memchr(bytes, '\n', len);
        size_t n = nl != NULL ? (size_t)(nl - bytes) : len;

        if (!r->skipping && r->len + n > r->max) {
            r->skipping = 1;
            r->len = 0;
            result = -1;
        }
        if (!r->skipping && n > 0) {
            if (r->len + n > r->cap) {
                size_t cap = r->cap > 0 ? r->cap : 1024;
                char *grown;
                while (cap < r->len + n)
                    cap *= 2;
                grown = realloc(r->buf, cap);
                if (grown == NULL)
                    return -1;
                r->buf = grown;
                r->cap = cap;
            }
            memcpy(r->buf + r->len, bytes, n);
            r->len += n;
        }
        if (nl == NULL)
            break;
        if (!r->skipping) {
            size_t l = r->len;
            if (l > 0 && r->buf[l - 1] == '\r')
                l--;
            cb(user, r->buf != NULL ? r->buf : "", l);
        }
        r->skipping = 0;
        r->len = 0;
        bytes += n + 1;
        len -= n + 1;
    }
    return result;
}
