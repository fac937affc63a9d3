#include <limits.h>
#include <string.h>

#include "common/percent.h"
#include "http/query.h"

/* The raw (still encoded) value of parameter name: 0 found, 1 absent, -1 given more than once. */
static int find_value(const h2o_req_t *req, const char *name, const char **value_out, size_t *len_out)
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
    *value_out = value;
    *len_out = value_len;
    return 0;
}

int rl_query_param(const h2o_req_t *req, const char *name, char *out, size_t outsz)
{
    const char *value = NULL;
    size_t value_len = 0;
    int result = find_value(req, name, &value, &value_len);

    if (result != 0)
        return result;
    return rl_percent_decode(value, value_len, out, outsz, RL_PERCENT_FORM) >= 0 ? 0 : -1;
}

int rl_query_integer(const h2o_req_t *req, const char *name, long long *out)
{
    char decoded[64];
    const char *value = NULL;
    size_t value_len = 0, i = 0;
    unsigned long long magnitude = 0, limit;
    int negative, result = find_value(req, name, &value, &value_len);

    if (result == 1)
        return 1;
    if (result != 0)
        return RL_QUERY_TWICE;
    /*
     * A short value is decoded (a client may escape a digit); a long one can
     * only be a number when it is plain digits, read as they are, whatever
     * their count.
     */
    if (value_len < sizeof(decoded)) {
        int len = rl_percent_decode(value, value_len, decoded, sizeof(decoded), RL_PERCENT_FORM);
        if (len < 0)
            return RL_QUERY_NOT_INTEGER;
        value = decoded;
        value_len = (size_t)len;
    }
    negative = value_len > 0 && value[0] == '-';
    i = value_len > 0 && (value[0] == '-' || value[0] == '+');
    if (i == value_len)
        return RL_QUERY_NOT_INTEGER;
    limit = negative ? (unsigned long long)LLONG_MAX + 1 : (unsigned long long)LLONG_MAX;
    for (; i < value_len; ++i) {
        unsigned digit = (unsigned)(value[i] - '0');
        if (digit > 9)
            return RL_QUERY_NOT_INTEGER;
        /* Past the range, the number saturates: the caller clamps it or calls it too big. */
        magnitude = magnitude > (limit - digit) / 10 ? limit : magnitude * 10 + digit;
    }
    *out = negative ? (magnitude == limit ? LLONG_MIN : -(long long)magnitude) : (long long)magnitude;
    return 0;
}
