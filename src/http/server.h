/*
 * The HTTP core shared by relayd and catalogd: an h2o server on h2o's own
 * epoll loop that dispatches every request through one const route table.
 *
 * Pipeline per request: correlation ids, credentials-in-URL check, route
 * lookup (404/405), the application's authenticate hook (asynchronous), its
 * rate-limit hook, JSON body validation against the route's schema, then the
 * handler. Everything runs on the loop thread.
 */
#ifndef RL_HTTP_SERVER_H
#define RL_HTTP_SERVER_H

#include <h2o.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "http/call.h"
#include "http/route.h"

typedef struct rl_http_server rl_http_server_t;
struct phr_header;

/* A lower body limit for one request, decided from its head (rl_http_hooks_t.head_limit). */
typedef struct rl_http_head_limit {
    size_t limit;    /* the most bytes this request's body may have */
    int err;         /* what a longer body is refused with: an RL_E_* whose status is 413 */
    json_t *details; /* that refusal's details, or NULL; the server takes the reference */
} rl_http_head_limit_t;

typedef struct rl_http_hooks {
    /*
     * Called for routes whose auth kind is not 0. Must call
     * rl_call_proceed(call, err) exactly once, now or later.
     */
    void (*authenticate)(rl_call_t *call);
    /*
     * Called for routes with a bucket, after authentication. Fills call->rate
     * and calls rl_call_limited(call, 0 or RL_E_RATE_LIMITED) exactly once,
     * now or later (a shared bucket answers over the network).
     */
    void (*limit)(rl_call_t *call);
    /*
     * Optional, for routes flagged RL_ROUTE_HEAD_LIMIT, over HTTP/1: called
     * on the loop as soon as a request head is parsed, before any of its
     * body is read, with its Authorization header (NULL, 0 when absent).
     * Returns 1 with *limit filled to lower the route's limit for this
     * request (a declared Content-Length past it is refused at once, a
     * chunked body as it passes it), or 0 to leave it. It must answer from
     * what the application already knows: no I/O, nothing asynchronous.
     */
    int (*head_limit)(void *app, const rl_route_t *route, const char *authorization, size_t len,
                      rl_http_head_limit_t *limit);
} rl_http_hooks_t;

typedef struct rl_http_config {
    const rl_route_t *routes;
    size_t nroutes;
    /*
     * Paths under this prefix get the API treatment: envelope errors for
     * h2o's own refusals, correlation headers, and 400 invalid_token_location
     * for credentials in the URL. "/v1/" for relayd.
     */
    const char *api_prefix;
    size_t max_body;             /* larger request bodies get 413 before they are read */
    uint64_t request_timeout_ms; /* a request head or body slower than this is cut off */
    /*
     * Optional: returns 1 when a path or query carries a credential, which
     * is refused with 400 invalid_token_location under the API prefix.
     */
    int (*url_carries_credentials)(const char *url, size_t len);
    /* Gzip 200 responses of compressible types (text, JSON) for clients that accept it. */
    int compress;
    /* PEM certificate chain and private key: serve HTTPS (h2 and http/1.1 by ALPN). NULL or "" for plain HTTP. */
    const char *tls_cert, *tls_key;
    /*
     * Open connections one client address may hold (an IPv6 address counts
     * as its /64); more are closed as soon as they are accepted. 0 for no
     * cap. Connections from trusted proxies are not counted.
     */
    size_t max_connections_per_address;
    /*
     * Nonzero: listeners take SO_REUSEPORT, so that other processes (of the
     * same user) may listen on the same address and port; the kernel spreads
     * new connections among them.
     */
    int reuse_port;
    /*
     * Comma-separated CIDR blocks of reverse proxies (NULL or "" for none).
     * A request whose direct peer is one of them takes its client address
     * from forwarded_header ("x-forwarded-for" when NULL, or "forwarded"),
     * the right-most entry that is not a trusted proxy (http/peer.h).
     */
    const char *trusted_proxies;
    const char *forwarded_header;
    rl_http_hooks_t hooks;
    void *app;
    /*
     * Routes flagged RL_ROUTE_SHED are refused with 503 and Retry-After,
     * before authentication and before their body is read, while the loop
     * lags more than this (ms; server.c's loop_lag_ms). 0: never.
     */
    uint64_t loop_lag_max_ms;
} rl_http_config_t;

/* Creates the server on loop. The config (and its route table) must outlive the server. 0 or -1. */
int rl_http_server_create(h2o_loop_t *loop, const rl_http_config_t *config, rl_http_server_t **out);
/*
 * Listens on "HOST:PORT" ("[::1]:8080" for IPv6; port 0 picks a free one).
 * Writes the bound address into bound (e.g. "127.0.0.1:43121"). 0 or -1 with
 * a message logged.
 */
int rl_http_server_listen(rl_http_server_t *server, const char *hostport, char *bound, size_t boundsz);
/*
 * Loads the certificate and key files again (after a renewal): new
 * connections get them, open ones keep theirs. 0, or -1 with the reason
 * logged and the old ones still served. 0 when the server has no TLS.
 */
int rl_http_server_reload_tls(rl_http_server_t *server);
/* Whether the server speaks TLS. */
int rl_http_server_tls(const rl_http_server_t *server);
/* Stops accepting new connections; open ones are left to finish or to be closed with the loop. */
void rl_http_server_stop_listening(rl_http_server_t *server);
/*
 * A graceful stop, first step: stops accepting, turns keep-alive off for
 * the answers still to come and sends HTTP/2 GOAWAY, and ends every event
 * stream cleanly (rl_sse_end_all). The loop must keep running until
 * rl_http_server_busy() says 0 or the caller's deadline passes.
 */
void rl_http_server_shutdown(rl_http_server_t *server);
/*
 * 1 while something started before the stop is under way: a request being
 * handled or answered, or an HTTP/1 connection part way through receiving a
 * request (its head or body). Idle keep-alive connections do not count.
 */
int rl_http_server_busy(rl_http_server_t *server);
/*
 * The Prometheus text of this server: connections by protocol, requests in
 * flight, requests by route, method and status, and latency histograms by
 * route (docs/operations.md, "Monitoring"). Loop thread.
 */
void rl_http_server_write_metrics(rl_http_server_t *server, FILE *out);
/* How many answers of route had this status (the metrics: deltas a second are sendMessageDelta's 200s). */
uint64_t rl_http_server_answers(const rl_http_server_t *server, const rl_route_t *route, int status);
/* Internal (call.c): counts one answer of route (NULL: none matched) with its status and latency. */
void rl__http_server_observe(rl_http_server_t *server, const rl_route_t *route, int status, int64_t took_us);
h2o_context_t *rl_http_server_context(rl_http_server_t *server);
/*
 * Call after every turn of the event loop: puts the body limit back to the
 * JSON default (see h2o_shim.c).
 */
void rl_http_server_after_turn(rl_http_server_t *server);
/*
 * Internal (h2o_shim.c): sets the body limit for the route that method and
 * path name, lowered by the head_limit hook when the route asks for it.
 */
void rl__http_server_limit_for(rl_http_server_t *server, const char *method, size_t method_len, const char *path,
                               size_t path_len, const struct phr_header *headers, size_t num_headers);
/* Internal (server.c -> h2o_shim.c): server's routes set the body limit of each HTTP/1 head parsed. */
void rl__http_bodylimit_attach(rl_http_server_t *server);
/*
 * Internal (server.c -> h2o_shim.c): one request through h2o's HTTP/1 path on
 * a private loop, to see that both of the shim's functions are in force.
 * 0 (once it passed, at once), or -1 with the reason in why.
 */
int rl__http_shim_check(char *why, size_t whysz);
/*
 * Internal (h2o_shim.c): the connection of a link of the context's private
 * list of HTTP/1 connections (ctx->http1._conns), for the graceful stop.
 */
h2o_conn_t *rl__http_shim_http1_conn(h2o_linklist_t *link);
/* Internal (linger.c): whether the server accepted this socket (its connections linger at close). */
int rl__http_server_accepted(const h2o_socket_t *sock);
/*
 * Internal (h2o_shim.c -> linger.c): before h2o closes sock, a duplicate of
 * its descriptor when the connection should linger (*loop set), else -1; and
 * the lingering of that duplicate once h2o has closed its socket.
 */
int rl__http_linger_keep(h2o_socket_t *sock, h2o_loop_t **loop);
void rl__http_linger_start(h2o_loop_t *loop, int fd);
/* Internal (linger.c): connections lingering after their close, and closing them all. */
size_t rl__http_lingering(void);
void rl__http_linger_close_all(void);
void rl_http_server_free(rl_http_server_t *server);

#endif
