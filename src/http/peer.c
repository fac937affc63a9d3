#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/peer.h"

static const unsigned char v4_mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

static void set_v4(rl_addr_t *addr, const void *bytes)
{
    memset(addr, 0, sizeof(*addr));
    addr->family = AF_INET;
    memcpy(addr->bytes, bytes, 4);
}

static void set_v6(rl_addr_t *addr, const unsigned char *bytes)
{
    /* A mapped IPv4 address is the IPv4 client it maps, whichever way it arrived. */
    if (memcmp(bytes, v4_mapped_prefix, sizeof(v4_mapped_prefix)) == 0) {
        set_v4(addr, bytes + 12);
        return;
    }
    memset(addr, 0, sizeof(*addr));
    addr->family = AF_INET6;
    memcpy(addr->bytes, bytes, 16);
}

int rl_addr_from_sockaddr(const struct sockaddr *sa, rl_addr_t *addr)
{
    if (sa->sa_family == AF_INET) {
        set_v4(addr, &((const struct sockaddr_in *)sa)->sin_addr);
        return 0;
    }
    if (sa->sa_family == AF_INET6) {
        set_v6(addr, ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr);
        return 0;
    }
    return -1;
}

static int parse_plain(const char *text, size_t len, rl_addr_t *addr)
{
    char buf[INET6_ADDRSTRLEN];
    unsigned char bytes[16];

    if (len == 0 || len >= sizeof(buf))
        return -1;
    memcpy(buf, text, len);
    buf[len] = '\0';
    if (inet_pton(AF_INET, buf, bytes) == 1) {
        set_v4(addr, bytes);
        return 0;
    }
    if (inet_pton(AF_INET6, buf, bytes) == 1) {
        set_v6(addr, bytes);
        return 0;
    }
    return -1;
}

static int is_port(const char *text, size_t len)
{
    size_t i;

    if (len == 0 || len > 5)
        return 0;
    for (i = 0; i < len; ++i) {
        if (text[i] < '0' || text[i] > '9')
            return 0;
    }
    return 1;
}

int rl_addr_parse(const char *text, size_t len, rl_addr_t *addr)
{
    const char *colon;

    while (len > 0 && (*text == ' ' || *text == '\t'))
        ++text, --len;
    while (len > 0 && (text[len - 1] == ' ' || text[len - 1] == '\t'))
        --len;
    if (len >= 2 && text[0] == '"' && text[len - 1] == '"')
        ++text, len -= 2;
    if (len > 0 && text[0] == '[') {
        const char *close = memchr(text, ']', len);
        size_t after;
        if (close == NULL)
            return -1;
        after = len - (size_t)(close - text) - 1;
        if (after != 0 && !(close[1] == ':' && is_port(close + 2, after - 1)))
            return -1;
        if (parse_plain(text + 1, (size_t)(close - text - 1), addr) != 0 || addr->family != AF_INET6)
            return -1;
        return 0;
    }
    if (parse_plain(text, len, addr) == 0)
        return 0;
    /* "192.0.2.1:4711": an IPv4 address with a port (an IPv6 one would have brackets). */
    colon = memchr(text, ':', len);
    if (colon != NULL && memchr(colon + 1, ':', len - (size_t)(colon - text) - 1) == NULL &&
        is_port(colon + 1, len - (size_t)(colon - text) - 1) && parse_plain(text, (size_t)(colon - text), addr) == 0 &&
        addr->family == AF_INET)
        return 0;
    return -1;
}

void rl_addr_format(const rl_addr_t *addr, char *out, size_t outsz)
{
    if (outsz == 0)
        return;
    out[0] = '\0';
    /* Dotted quads by hand: inet_ntop's sprintf showed in the profile, twice a request. */
    if (addr->family == AF_INET && outsz >= INET_ADDRSTRLEN) {
        size_t n = 0, i;
        for (i = 0; i < 4; ++i) {
            unsigned v = addr->bytes[i];
            if (i > 0)
                out[n++] = '.';
            if (v >= 100)
                out[n++] = (char)('0' + v / 100);
            if (v >= 10)
                out[n++] = (char)('0' + v / 10 % 10);
            out[n++] = (char)('0' + v % 10);
        }
        out[n] = '\0';
    } else if (addr->family == AF_INET || addr->family == AF_INET6) {
        inet_ntop(addr->family, addr->bytes, out, (socklen_t)outsz);
    }
}

void rl_addr_group(const rl_addr_t *addr, char *out, size_t outsz)
{
    rl_addr_t prefix;
    size_t len;

    if (addr->family != AF_INET6) {
        rl_addr_format(addr, out, outsz);
        return;
    }
    prefix = *addr;
    memset(prefix.bytes + 8, 0, 8);
    rl_addr_format(&prefix, out, outsz);
    len = strlen(out);
    if (len + 4 < outsz)
        memcpy(out + len, "/64", 4);
}

static int in_block(const struct rl_cidr *block, const rl_addr_t *addr)
{
    unsigned full = block->prefix / 8, rest = block->prefix % 8;

    if (block->base.family != addr->family)
        return 0;
    if (memcmp(block->base.bytes, addr->bytes, full) != 0)
        return 0;
    return rest == 0 || ((block->base.bytes[full] ^ addr->bytes[full]) & (0xff << (8 - rest)) & 0xff) == 0;
}

int rl_cidr_set_contains(const rl_cidr_set_t *set, const rl_addr_t *addr)
{
    size_t i;

    for (i = 0; set != NULL && i < set->count; ++i) {
        if (in_block(&set->blocks[i], addr))
            return 1;
    }
    return 0;
}

void rl_cidr_set_free(rl_cidr_set_t *set)
{
    free(set->blocks);
    set->blocks = NULL;
    set->count = 0;
}

static int parse_block(const char *text, size_t len, struct rl_cidr *block)
{
    const char *slash = memchr(text, '/', len);
    unsigned max, bits = 0, i;

    if (rl_addr_parse(text, slash != NULL ? (size_t)(slash - text) : len, &block->base) != 0)
        return -1;
    max = block->base.family == AF_INET ? 32 : 128;
    if (slash == NULL) {
        block->prefix = max;
        return 0;
    }
    if (slash + 1 == text + len || text + len - slash - 1 > 3)
        return -1;
    for (i = 1; slash + i < text + len; ++i) {
        if (slash[i] < '0' || slash[i] > '9')
            return -1;
        bits = bits * 10 + (unsigned)(slash[i] - '0');
    }
    /* A mapped IPv4 block was turned into IPv4: its length counts the 96 bits of the mapping. */
    if (block->base.family == AF_INET && memchr(text, ':', (size_t)(slash - text)) != NULL) {
        if (bits < 96)
            return -1;
        bits -= 96;
    }
    if (bits > max)
        return -1;
    block->prefix = bits;
    for (i = bits; i < max; ++i) {
        if (block->base.bytes[i / 8] & (0x80 >> (i % 8)))
            return -1;
    }
    return 0;
}

int rl_cidr_set_parse(const char *text, rl_cidr_set_t *set, char *err, size_t errsz)
{
    const char *p = text;

    set->count = 0;
    set->blocks = NULL;
    while (*p != '\0') {
        const char *comma = strchr(p, ',');
        size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
        struct rl_cidr *grown;
        while (len > 0 && *p == ' ')
            ++p, --len;
        while (len > 0 && p[len - 1] == ' ')
            --len;
        if (len > 0) {
            grown = realloc(set->blocks, (set->count + 1) * sizeof(*grown));
            if (grown == NULL) {
                snprintf(err, errsz, "out of memory");
                rl_cidr_set_free(set);
                return -1;
            }
            set->blocks = grown;
            if (parse_block(p, len, &set->blocks[set->count]) != 0) {
                snprintf(err, errsz, "'%.*s' is not an address or CIDR block (such as 10.0.0.0/8 or 2001:db8::/32)",
                         (int)(len > 64 ? 64 : len), p);
                rl_cidr_set_free(set);
                return -1;
            }
            ++set->count;
        }
        if (comma == NULL)
            break;
        p = comma + 1;
    }
    return 0;
}

/* The address of one Forwarded element ("for=...;proto=https"), or -1. */
static int forwarded_for(const char *element, size_t len, rl_addr_t *addr)
{
    const char *p = element, *end = element + len;

    while (p < end) {
        const char *semi = memchr(p, ';', (size_t)(end - p)), *stop = semi != NULL ? semi : end;
        while (p < stop && (*p == ' ' || *p == '\t'))
            ++p;
        if (stop - p > 4 && strncasecmp(p, "for=", 4) == 0)
            return rl_addr_parse(p + 4, (size_t)(stop - p - 4), addr);
        p = stop + 1;
    }
    return -1;
}

/*
 * The entries of the list, right to left: the field values in reverse order,
 * each split at its commas. A comma inside a quoted Forwarded value cannot
 * hold an address, so a plain split is enough to find them.
 */
int rl_forwarded_client(rl_forwarded_kind_t kind, const char *const *values, const size_t *lens, size_t nvalues,
                        const rl_cidr_set_t *trusted, rl_addr_t *client)
{
    size_t v = nvalues;
    int found = 0;

    while (v-- > 0) {
        const char *start = values[v], *end = values[v] + lens[v];
        while (end > start) {
            const char *entry = end, *first;
            rl_addr_t addr;
            while (entry > start && entry[-1] != ',')
                --entry;
            first = entry;
            while (first < end && (*first == ' ' || *first == '\t'))
                ++first;
            /* An empty entry ("a,,b") is no hop; anything else must be an address. */
            if (first < end) {
                int parsed = kind == RL_FORWARDED_XFF ? rl_addr_parse(first, (size_t)(end - first), &addr)
                                                      : forwarded_for(first, (size_t)(end - first), &addr);
                if (parsed != 0)
                    return -1;
                *client = addr;
                found = 1;
                if (!rl_cidr_set_contains(trusted, &addr))
                    return 0;
            }
            end = entry > start ? entry - 1 : start;
        }
    }
    /* Every hop is a trusted proxy: the first one is where the request began. */
    return found ? 0 : -1;
}
