#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "push/push_endpoint.h"

#define HOST_MAX 253

/* An address block: the first prefix bits of bytes (4 of them for IPv4). */
struct block {
    int family;
    unsigned char bytes[16];
    unsigned prefix;
};

#define V4(a, b, c, d, len)                                                                                            \
    {                                                                                                                  \
        AF_INET, {a, b, c, d}, len                                                                                     \
    }

/*
 * IPv4 blocks that are not public unicast (IANA's special-purpose registry,
 * RFC 6890 and its updates): this host, private, shared (carrier-grade NAT),
 * loopback, link-local (the cloud metadata services at 169.254.169.254),
 * protocol assignments, documentation, benchmarking, multicast, reserved and
 * broadcast.
 */
static const struct block v4_special[] = {
    V4(0, 0, 0, 0, 8),      V4(10, 0, 0, 0, 8),     V4(100, 64, 0, 0, 10), V4(127, 0, 0, 0, 8),
    V4(169, 254, 0, 0, 16), V4(172, 16, 0, 0, 12),  V4(192, 0, 0, 0, 24),  V4(192, 0, 2, 0, 24),
    V4(192, 88, 99, 0, 24), V4(192, 168, 0, 0, 16), V4(198, 18, 0, 0, 15), V4(198, 51, 100, 0, 24),
    V4(203, 0, 113, 0, 24), V4(224, 0, 0, 0, 4),    V4(240, 0, 0, 0, 4),
};

/*
 * IPv6: only global unicast (2000::/3) is routable on the internet, and
 * within it these are not: protocol assignments (Teredo among them),
 * documentation (two blocks), and 6to4, which embeds an IPv4 address that
 * could be anything.
 */
static const struct block v6_global = {AF_INET6, {0x20}, 3};
static const struct block v6_special[] = {
    {AF_INET6, {0x20, 0x01, 0x00, 0x00}, 23},
    {AF_INET6, {0x20, 0x01, 0x0d, 0xb8}, 32},
    {AF_INET6, {0x20, 0x02}, 16},
    {AF_INET6, {0x3f, 0xff}, 20},
};
/* NAT64's well-known prefix (RFC 6052): an IPv6-only host reaches IPv4 through it; judged by the IPv4 inside. */
static const struct block v6_nat64 = {AF_INET6, {0x00, 0x64, 0xff, 0x9b}, 96};

static int in_block(const struct block *block, const rl_addr_t *addr)
{
    unsigned full = block->prefix / 8, rest = block->prefix % 8;

    if (addr->family != block->family || memcmp(addr->bytes, block->bytes, full) != 0)
        return 0;
    return rest == 0 || ((addr->bytes[full] ^ block->bytes[full]) & (0xff00 >> rest) & 0xff) == 0;
}

static int in_any(const struct block *blocks, size_t count, const rl_addr_t *addr)
{
    size_t i;

    for (i = 0; i < count; ++i) {
        if (in_block(&blocks[i], addr))
            return 1;
    }
    return 0;
}

int rl_push_address_is_public(const rl_addr_t *addr)
{
    if (addr->family == AF_INET)
        return !in_any(v4_special, sizeof(v4_special) / sizeof(v4_special[0]), addr);
    if (addr->family != AF_INET6)
        return 0;
    if (in_block(&v6_nat64, addr)) {
        rl_addr_t inner = {AF_INET, {0}};
        memcpy(inner.bytes, addr->bytes + 12, 4);
        return rl_push_address_is_public(&inner);
    }
    return in_block(&v6_global, addr) && !in_any(v6_special, sizeof(v6_special) / sizeof(v6_special[0]), addr);
}

static int address_ok(const rl_push_policy_t *policy, const rl_addr_t *addr, int port)
{
    if (policy->any || rl_cidr_set_contains(&policy->networks, addr))
        return 1;
    return rl_push_address_is_public(addr) && port == 443;
}

int rl_push_address_allowed(const rl_push_policy_t *policy, const struct sockaddr *sa)
{
    rl_addr_t addr;
    int port;

    if (rl_addr_from_sockaddr(sa, &addr) != 0)
        return 0;
    port = ntohs(sa->sa_family == AF_INET ? ((const struct sockaddr_in *)sa)->sin_port
                                          : ((const struct sockaddr_in6 *)sa)->sin6_port);
    return address_ok(policy, &addr, port);
}

int rl_push_policy_init(rl_push_policy_t *policy, const char *endpoints, const char *networks, char *err, size_t errsz)
{
    memset(policy, 0, sizeof(*policy));
    if (strcmp(endpoints, "any") != 0 && strcmp(endpoints, "https") != 0) {
        snprintf(err, errsz, "--push-endpoints must be https or any");
        return -1;
    }
    policy->any = strcmp(endpoints, "any") == 0;
    return rl_cidr_set_parse(networks, &policy->networks, err, errsz);
}

void rl_push_policy_free(rl_push_policy_t *policy)
{
    rl_cidr_set_free(&policy->networks);
}

/* A host name's characters (LDH, with the underscore some services use); IP literals are read apart. */
static int host_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
           c == '_';
}

/*
 * Whether the last label of host is numeric (decimal, or 0x hex): a name
 * like that is an IPv4 address to a URL parser ("2130706433", "0x7f.1",
 * "127.1" are all 127.0.0.1), never a DNS name.
 */
static int ends_in_number(const char *host)
{
    const char *label = strrchr(host, '.');
    size_t i;
    int hex;

    label = label != NULL ? label + 1 : host;
    if (label[0] == '\0')
        return 0;
    hex = label[0] == '0' && (label[1] == 'x' || label[1] == 'X');
    for (i = hex ? 2 : 0; label[i] != '\0'; ++i) {
        char c = label[i];
        if (!((c >= '0' && c <= '9') || (hex && ((c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))))
            return 0;
    }
    return 1;
}

static int is_localhost(const char *host)
{
    size_t len = strlen(host);

    return strcasecmp(host, "localhost") == 0 || (len > 10 && strcasecmp(host + len - 10, ".localhost") == 0);
}

const char *rl_push_endpoint_check(const rl_push_policy_t *policy, const char *endpoint, size_t len)
{
    char host[HOST_MAX + 2];
    const char *authority, *end, *host_end, *p;
    size_t scheme, host_len, i;
    long port = 443;
    rl_addr_t addr;
    int literal = 0;

    for (i = 0; i < len; ++i) {
        if ((unsigned char)endpoint[i] <= 0x20 || (unsigned char)endpoint[i] >= 0x7f)
            return "endpoint must be an absolute https URL of printable ASCII";
    }
    scheme = len >= 8 && strncasecmp(endpoint, "https://", 8) == 0 ? 8 : 0;
    if (scheme == 0 && policy->any && len >= 7 && strncasecmp(endpoint, "http://", 7) == 0) {
        scheme = 7;
        port = 80;
    }
    if (scheme == 0)
        return "endpoint must be an absolute https URL";
    authority = endpoint + scheme;
    for (end = authority; end < endpoint + len && *end != '/' && *end != '?' && *end != '#'; ++end) {
        /* A backslash is a path separator to some URL parsers and part of the host to others. */
        if (*end == '@' || *end == '\\')
            return "endpoint must not carry a user name or password";
    }
    if (end == authority)
        return "endpoint must name a host";
    if (*authority == '[') {
        host_end = memchr(authority, ']', (size_t)(end - authority));
        if (host_end == NULL)
            return "endpoint's host is not a valid IPv6 address";
        p = host_end + 1;
        host_len = (size_t)(host_end - authority - 1);
        if (host_len == 0 || host_len > INET6_ADDRSTRLEN)
            return "endpoint's host is not a valid IPv6 address";
        memcpy(host, authority + 1, host_len);
        host[host_len] = '\0';
        if (strchr(host, ':') == NULL || rl_addr_parse(host, host_len, &addr) != 0)
            return "endpoint's host is not a valid IPv6 address";
        literal = 1;
    } else {
        host_end = memchr(authority, ':', (size_t)(end - authority));
        if (host_end == NULL)
            host_end = end;
        p = host_end;
        host_len = (size_t)(host_end - authority);
        if (host_len == 0 || host_len > HOST_MAX + 1)
            return "endpoint must name a host";
        memcpy(host, authority, host_len);
        host[host_len] = '\0';
        /* A trailing dot names the same host. */
        if (host[host_len - 1] == '.')
            host[--host_len] = '\0';
        for (i = 0; i < host_len; ++i) {
            if (!host_char(host[i]))
                return "endpoint's host must be a DNS name or an IP address";
        }
        if (host_len == 0 || host[0] == '.' || strstr(host, "..") != NULL)
            return "endpoint's host must be a DNS name or an IP address";
        if (ends_in_number(host)) {
            struct in_addr v4;
            /* inet_aton reads every legacy form (decimal, octal, hex, short), as URL parsers and resolvers do. */
            if (inet_aton(host, &v4) == 0)
                return "endpoint's host must be a DNS name or an IP address";
            memset(&addr, 0, sizeof(addr));
            addr.family = AF_INET;
            memcpy(addr.bytes, &v4, 4);
            literal = 1;
        } else if (is_localhost(host)) {
            /* RFC 6761: localhost names resolve to loopback, whatever a resolver says. */
            memset(&addr, 0, sizeof(addr));
            addr.family = AF_INET;
            addr.bytes[0] = 127;
            addr.bytes[3] = 1;
            literal = 1;
        }
    }
    if (p < end) {
        if (*p != ':' || p + 1 == end || end - p > 6)
            return "endpoint's port is not a number from 1 to 65535";
        port = 0;
        for (i = 1; p + i < end; ++i) {
            if (p[i] < '0' || p[i] > '9')
                return "endpoint's port is not a number from 1 to 65535";
            port = port * 10 + (p[i] - '0');
        }
        if (port < 1 || port > 65535)
            return "endpoint's port is not a number from 1 to 65535";
    }
    if (policy->any)
        return NULL;
    /* Names are judged again on each address they resolve to, when the sender connects. */
    if (literal && !address_ok(policy, &addr, (int)port))
        return "endpoint's address is not a public one (see --push-networks)";
    if (port != 443 && policy->networks.count == 0)
        return "endpoint must use port 443";
    return NULL;
}
