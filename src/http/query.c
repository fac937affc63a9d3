#include <string.h>

#include "http/query.h"

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int rl_url_decode(const char *src, size_t len, char *dst, size_t dstsz)
{
    size_t i, o = 0;

    for (i = 0; i < len; ++i) {
        char c = src[i];
        if (c == '%') {
            int hi, lo;
            if (i + 2 >= len)
                return RL_URL_E_ESCAPE;
            hi = hex_value(src[i + 1]);
            lo = hex_value(src[i + 2]);
            if (hi < 0 || lo < 0)
                return RL_URL_E_ESCAPE;
            c = (char)(hi << 4 | lo);
            i += 2;
        } else if (c == '+') {
            c = ' ';
        }
        if (c == '\0')
            return RL_URL_E_NUL;
        if (o + 1 >= dstsz)
            return RL_URL_E_LENGTH;
        dst[o++] = c;
    }
    if (dstsz == 0)
        return RL_URL_E_LENGTH;
    dst[o] = '\0';
    return (int)o;
}

int rl_query_param(const h2o_req_t *req, const char *name, char *out, size_t outsz)
{
    size_t name_len = strlen(name);
    const char *p, *end, *value = NULL;
    size_t value_len = 0;

    if (req->query_at == SIZE_MAX)
        return 1;
    p = req->path.base + req->query_at + 1;
    end = req->path.base + req->path.len;
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        size_t len = (size_t)((amp != NULL ? amp : end) - p);
        if (len >= name_len && memcmp(p, name, name_len) == 0 && (len == name_len || p[name_len] == '=')) {
            /* Given twice, which one counts would be a guess that a proxy or a cache may make differently. */
            if (value != NULL)
                return -1;
            value = len > name_len ? p + name_len + 1 : p + len;
            value_len = len > name_len ? len - name_len - 1 : 0;
        }
        p += len + 1;
    }
    if (value == NULL)
        return 1;
    return rl_url_decode(value, value_len, out, outsz) >= 0 ? 0 : -1;
}
