#include <stdint.h>
#include <stdlib.h>
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

/* ---- the index ---- */

struct rl_route_index {
    const rl_route_t *routes;
    size_t count;
    size_t mask;   /* slots - 1, a power of two at least twice the exact routes */
    int32_t *slot; /* a route's position in the table, or -1 */
};

static uint32_t hash_of(const char *method, size_t method_len, const char *path, size_t path_len)
{
    uint32_t h = 2166136261u;
    size_t i;

    for (i = 0; i < method_len; ++i)
        h = (h ^ (unsigned char)method[i]) * 16777619u;
    h = (h ^ ' ') * 16777619u;
    for (i = 0; i < path_len; ++i)
        h = (h ^ (unsigned char)path[i]) * 16777619u;
    return h;
}

/* Whether a row before routes[i] would answer a request for routes[i]'s path with its method. */
static int shadowed(const rl_route_t *routes, size_t i)
{
    rl_route_param_t scratch[RL_ROUTE_MAX_PARAMS];
    size_t len = strlen(routes[i].pattern), j;

    if (len > 1 && routes[i].pattern[len - 1] == '/')
        return 1; /* a lookup trims a trailing slash: leave such a row to the scan */
    for (j = 0; j < i; ++j)
        if (strcmp(routes[j].method, routes[i].method) == 0 &&
            pattern_match(routes[j].pattern, routes[i].pattern, len, scratch))
            return 1;
    return 0;
}

rl_route_index_t *rl_route_index_new(const rl_route_t *routes, size_t count)
{
    rl_route_index_t *index = calloc(1, sizeof(*index));
    size_t slots = 16, i;

    if (index == NULL)
        return NULL;
    while (slots < count * 2)
        slots *= 2;
    index->routes = routes;
    index->count = count;
    index->mask = slots - 1;
    index->slot = malloc(slots * sizeof(*index->slot));
    if (index->slot == NULL) {
        free(index);
        return NULL;
    }
    for (i = 0; i < slots; ++i)
        index->slot[i] = -1;
    for (i = 0; i < count; ++i) {
        size_t at;
        if (strchr(routes[i].pattern, ':') != NULL || shadowed(routes, i))
            continue;
        at = hash_of(routes[i].method, strlen(routes[i].method), routes[i].pattern, strlen(routes[i].pattern)) &
             index->mask;
        while (index->slot[at] >= 0)
            at = (at + 1) & index->mask;
        index->slot[at] = (int32_t)i;
    }
    return index;
}

void rl_route_index_free(rl_route_index_t *index)
{
    if (index == NULL)
        return;
    free(index->slot);
    free(index);
}

rl_route_result_t rl_route_index_find(const rl_route_index_t *index, const char *method, size_t method_len,
                                      const char *path, size_t path_len, const rl_route_t **out,
                                      rl_route_param_t *params, char *allow, size_t allowsz)
{
    size_t len = path_len > 1 && path[path_len - 1] == '/' ? path_len - 1 : path_len;
    size_t at = hash_of(method, method_len, path, len) & index->mask;

    for (; index->slot[at] >= 0; at = (at + 1) & index->mask) {
        const rl_route_t *route = &index->routes[index->slot[at]];
        if (strlen(route->pattern) == len && memcmp(route->pattern, path, len) == 0 &&
            strlen(route->method) == method_len && memcmp(route->method, method, method_len) == 0) {
            if (allow != NULL && allowsz > 0)
                allow[0] = '\0';
            *out = route;
            return RL_ROUTE_MATCHED;
        }
    }
    return rl_route_find(index->routes, index->count, method, method_len, path, path_len, out, params, allow, allowsz);
}
