#include <string.h>

#include "bridge/jsonl_reader.h"

void rl_jsonl_reader_init(rl_jsonl_reader_t *r, size_t max_line)
{
    memset(r, 0, sizeof(*r));
    rl_buf_init(&r->line, max_line);
}

void rl_jsonl_reader_free(rl_jsonl_reader_t *r)
{
    rl_buf_free(&r->line);
    r->skipping = 0;
}

int rl_jsonl_reader_feed(rl_jsonl_reader_t *r, const char *bytes, size_t len, rl_jsonl_line_cb cb, void *user)
{
    int result = 0;

    while (len > 0) {
        const char *nl = memchr(bytes, '\n', len);
        size_t n = nl != NULL ? (size_t)(nl - bytes) : len;

        if (!r->skipping) {
            int appended = rl_buf_append(&r->line, bytes, n);
            if (appended == RL_BUF_E_TOO_LARGE) {
                r->skipping = 1;
                rl_buf_reset(&r->line);
                result = -1;
            } else if (appended != 0) {
                return -1;
            }
        }
        if (nl == NULL)
            break;
        if (!r->skipping) {
            size_t l = r->line.len;
            if (l > 0 && r->line.bytes[l - 1] == '\r')
                l--;
            cb(user, rl_buf_str(&r->line), l);
        }
        r->skipping = 0;
        rl_buf_reset(&r->line);
        bytes += n + 1;
        len -= n + 1;
    }
    return result;
}
