/*
 * Client addresses: who a request comes from, for per-address limits and the
 * access log.
 *
 * - An IPv6 client usually holds a whole /64, so per-address limits group
 *   IPv6 addresses by their /64 (an IPv4-mapped IPv6 address counts as the
 *   IPv4 address it maps).
 * - Behind a load balancer every connection comes from the balancer. When
 *   the direct peer is one of the trusted proxies (CIDR blocks), the client
 *   is read from the forwarding header the proxies write (X-Forwarded-For, or
 *   Forwarded): walking it from the right, the first address that is not a
 *   trusted proxy. Entries to its left were written by the client and are
 *   never believed.
 *
 * Pure functions over caller-owned memory, any thread.
 */
#ifndef RL_HTTP_PEER_H
#define RL_HTTP_PEER_H

#include <netinet/in.h>
#include <stddef.h>
#include <sys/socket.h>

/* An IPv4 address (family AF_INET, 4 bytes) or an IPv6 one (AF_INET6, 16 bytes). */
typedef struct rl_addr {
    int family;
    unsigned char bytes[16];
} rl_addr_t;

/* Longest text of rl_addr_format and rl_addr_group, with the NUL. */
#define RL_ADDR_TEXT_MAX (INET6_ADDRSTRLEN + 4)

/* Fills addr from a socket address; an IPv4-mapped IPv6 address becomes IPv4. 0, or -1 for other families. */
int rl_addr_from_sockaddr(const struct sockaddr *sa, rl_addr_t *addr);
/*
 * Parses an address as forwarding headers write it: "192.0.2.1",
 * "192.0.2.1:4711", "2001:db8::1", "[2001:db8::1]", "[2001:db8::1]:4711",
 * optionally in double quotes (Forwarded). 0, or -1 when it is none of these
 * (also for "unknown" and obfuscated identifiers).
 */
int rl_addr_parse(const char *text, size_t len, rl_addr_t *addr);
/* The address as text ("192.0.2.1", "2001:db8::1") into out (RL_ADDR_TEXT_MAX bytes). */
void rl_addr_format(const rl_addr_t *addr, char *out, size_t outsz);
/*
 * The key per-address limits count under: the IPv4 address itself, or an
 * IPv6 address's /64 written as "2001:db8:1:2::/64".
 */
void rl_addr_group(const rl_addr_t *addr, char *out, size_t outsz);

/* A set of CIDR blocks. */
typedef struct rl_cidr_set {
    size_t count;
    struct rl_cidr {
        rl_addr_t base;
        unsigned prefix;
    } * blocks;
} rl_cidr_set_t;

/*
 * Parses "10.0.0.0/8,192.0.2.7,2001:db8::/32" (commas, optional spaces; an
 * address without a length is a single host) into set, which the caller
 * frees with rl_cidr_set_free. "" gives an empty set. 0, or -1 with a
 * message in err when an entry is malformed (bits set past the prefix
 * length are refused too, as they are usually a typo).
 */
int rl_cidr_set_parse(const char *text, rl_cidr_set_t *set, char *err, size_t errsz);
void rl_cidr_set_free(rl_cidr_set_t *set);
/* 1 when addr lies in one of the blocks. */
int rl_cidr_set_contains(const rl_cidr_set_t *set, const rl_addr_t *addr);

/* Which forwarding header the trusted proxies write. */
typedef enum rl_forwarded_kind { RL_FORWARDED_XFF, RL_FORWARDED_RFC7239 } rl_forwarded_kind_t;

/*
 * The client behind trusted proxies. values are the header's field values in
 * the order received (several header lines form one list). Walks the list
 * from the right and returns in client the first address not in trusted
 * (the left-most one when all are). Returns 0, or -1 when the header holds
 * no address, or the walk meets an entry that is not one ("unknown", an
 * obfuscated name, garbage): the caller then keeps the direct peer.
 */
int rl_forwarded_client(rl_forwarded_kind_t kind, const char *const *values, const size_t *lens, size_t nvalues,
                        const rl_cidr_set_t *trusted, rl_addr_t *client);

#endif
