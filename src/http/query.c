#include <string.h>

#include "common/percent.h"
#include "http/query.h"

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
    return rl_percent_decode(value, value_len, out, outsz, RL_PERCENT_FORM) >= 0 ? 0 : -1;
}
