/*
 * Where relayd may send a Web Push: the rule an endpoint must meet when a
 * user subscribes it, and the rule every address the sender connects to must
 * meet (docs/operations.md, "Security": push endpoints).
 *
 * An endpoint is a URL an authenticated user hands the relay, which the relay
 * then POSTs to: without a rule it reaches whatever the relay's network
 * reaches (SSRF). By default only https on port 443 to public unicast
 * addresses is allowed. The check runs twice: on the URL when it is
 * subscribed (literal addresses, names like localhost, userinfo, ports), and
 * on each address the sender is about to connect to, after name resolution,
 * so that a name which resolves somewhere else later (DNS rebinding) gets no
 * further than the first. Pure functions, any thread.
 */
#ifndef RL_RELAY_PUSH_ENDPOINT_H
#define RL_RELAY_PUSH_ENDPOINT_H

#include <stddef.h>
#include <sys/socket.h>

#include "http/peer.h"

typedef struct rl_push_policy {
    /* --push-endpoints any: a test push service; http, any port, any address. */
    int any;
    /* --push-networks: private blocks an operator's own push service lives in (any port there). */
    rl_cidr_set_t networks;
} rl_push_policy_t;

/*
 * Parses the settings into policy (endpoints: "https" or "any"; networks:
 * CIDR blocks as --trusted-proxies takes them). 0, or -1 with a message in
 * err. The caller frees with rl_push_policy_free.
 */
int rl_push_policy_init(rl_push_policy_t *policy, const char *endpoints, const char *networks, char *err, size_t errsz);
void rl_push_policy_free(rl_push_policy_t *policy);

/*
 * Checks endpoint (len bytes, not NUL-terminated) against policy: an absolute
 * https URL (http too with any), no userinfo, a host that is a name or an IP
 * literal, and, for a literal or a loopback name, an allowed address; the
 * port 443 unless the policy names networks. Returns NULL when it may be
 * subscribed, else the reason as a sentence for errors[].
 */
const char *rl_push_endpoint_check(const rl_push_policy_t *policy, const char *endpoint, size_t len);

/* 1 when addr (IPv4, or IPv6 with IPv4-mapped addresses as IPv4) is public unicast: routable on the internet. */
int rl_push_address_is_public(const rl_addr_t *addr);

/*
 * 1 when the sender may connect to sa (an AF_INET or AF_INET6 socket address
 * with its port): a public unicast address on port 443, or an address in the
 * policy's networks on any port, or anything under any.
 */
int rl_push_address_allowed(const rl_push_policy_t *policy, const struct sockaddr *sa);

#endif
