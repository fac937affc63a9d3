#include <string.h>

#include "http/route.h"

/* Matches one pattern against a path, segment by segment; ":name" takes any non-empty segment. */
static int pattern_match(const char *pattern, const char *path, size_t path_len, rl_route_param_t *params)
{
    const char *p = pattern, *s = path, *end = path + path_len;
    size_t nparams = 0;

    while (*p != '\0' && s < end) {
        if (*p == ':') {
            const char *seg_end = memchr(s, '/', (size_t)(end - s));
            if (seg_end == NULL)
                seg_end = end;
            if (seg_end == s || nparams == RL_ROUTE_MAX_PARAMS)
                return 0;
            params[nparams].base = s;
            params[nparams].len = (size_t)(seg_end - s);
            ++nparams;
            s = seg_end;
            while (*p != '\0' && *p != '/')
                ++p;
            continue;
        }
        if (*p != *s)
            return 0;
        ++p;
        ++s;
    }
    return *p == '\0' && s == end;
}

/* Whether method is already in the comma-separated list. */
static int method_listed(const char *list, const char *method)
{
    size_t len = strlen(method);
    const char *p = list;

    while ((p = strstr(p, method)) != NULL) {
        if ((p == list || p[-1] == ' ') && (p[len] == ',' || p[len] == '\0'))
            return 1;
        p += len;
    }
    return 0;
}

rl_route_result_t rl_route_find(const rl_route_t *routes, size_t count, const char *method, size_t method_len,
                                const char *path, size_t path_len, const rl_route_t **out, rl_route_param_t *params,
                                char *allow, size_t allowsz)
{
    rl_route_param_t scratch[RL_ROUTE_MAX_PARAMS];
    int path_seen = 0;
    size_t i, used = 0;

    /* A trailing slash names the same resource. */
    if (path_len > 1 && path[path_len - 1] == '/')
        --path_len;
    if (allow != NULL && allowsz > 0)
        allow[0] = '\0';
    for (i = 0; i < count; ++i) {
        const rl_route_t *route = &routes[i];
        if (!pattern_match(route->pattern, path, path_len, scratch))
            continue;
        if (strlen(route->method) == method_len && memcmp(route->method, method, method_len) == 0) {
            memcpy(params, scratch, sizeof(scratch));
            *out = route;
            return RL_ROUTE_MATCHED;
        }
        path_seen = 1;
        if (allow != NULL && !method_listed(allow, route->method)) {
            size_t mlen = strlen(route->method);
            if (used + mlen + 3 < allowsz) {
                if (used > 0) {
                    memcpy(allow + used, ", ", 2);
                    used += 2;
                }
                memcpy(allow + used, route->method, mlen);
                used += mlen;
                allow[used] = '\0';
            }
        }
    }
    return path_seen ? RL_ROUTE_NO_METHOD : RL_ROUTE_NO_PATH;
}
