#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "catalog/cache.h"

void rl_catalog_etag(const void *bytes, size_t len, char *etag)
{
    const unsigned char *p = bytes;
    uint64_t hash = 0xcbf29ce484222325ull; /* FNV-1a, 64 bits: fast, and collisions only cost a re-download */
    size_t i;

    for (i = 0; i < len; ++i) {
        hash ^= p[i];
        hash *= 0x100000001b3ull;
    }
    snprintf(etag, RL_CATALOG_ETAG_LEN, "W/\"%016llx\"", (unsigned long long)hash);
}

static int is_ows(char c)
{
    return c == ' ' || c == '\t';
}

int rl_catalog_etag_matches(const char *value, size_t len, const char *etag)
{
    /* The opaque part of our own tag: the text between its quotes. */
    const char *opaque = strchr(etag, '"') + 1;
    size_t opaque_len = strlen(opaque) - 1, i = 0;

    while (i < len) {
        size_t start;
        while (i < len && (is_ows(value[i]) || value[i] == ','))
            ++i;
        if (i == len)
            break;
        if (value[i] == '*')
            return 1;
        if (i + 1 < len && value[i] == 'W' && value[i + 1] == '/')
            i += 2;
        if (i >= len || value[i] != '"')
            return 0;
        start = ++i;
        while (i < len && value[i] != '"')
            ++i;
        if (i == len)
            return 0;
        if (i - start == opaque_len && memcmp(value + start, opaque, opaque_len) == 0)
            return 1;
        ++i;
    }
    return 0;
}
