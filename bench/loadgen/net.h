/*
 * The generator's network core: one epoll loop, non-blocking TCP
 * connections bound to a chosen loopback source address, and three ways of
 * reading them: keep-alive HTTP/1.1 request/response, a Server-Sent Events
 * stream (chunked or not), and a WebSocket client.
 *
 * Connections are never freed inside a callback: conn_close() closes the
 * socket and marks the connection, its owner frees it outside loop_poll().
 */
#ifndef BENCH_NET_H
#define BENCH_NET_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

uint64_t now_ns(void);

typedef struct loop loop_t;
typedef struct conn conn_t;

enum conn_mode { CONN_HTTP, CONN_SSE, CONN_WS };
enum conn_state { CS_CONNECTING, CS_OPEN, CS_CLOSED };

/* HTTP: one complete response. */
typedef void (*conn_response_cb)(conn_t *c, int status, const char *body, size_t len);
/* SSE: the payload of one `data:` line; WebSocket: one text message. `at` is when it was read. */
typedef void (*conn_data_cb)(conn_t *c, const char *data, size_t len, uint64_t at);
/* SSE and WebSocket: the response head arrived with this status (101 for an upgrade). */
typedef void (*conn_open_cb)(conn_t *c, int status);
/* The connection closed (err is an errno, 0 for an orderly end). Not called by conn_close(). */
typedef void (*conn_close_cb)(conn_t *c, int err);

struct conn {
    loop_t *loop;
    int fd;
    enum conn_mode mode;
    enum conn_state state;
    char *wbuf;
    size_t wlen, woff, wcap;
    char *rbuf;
    size_t rlen, rcap;
    /* response head */
    int head_done, status, chunked;
    long clen;
    size_t head_len;
    /* streaming body (SSE): chunk decoder and line buffer */
    int ck_state, ck_digits;
    size_t ck_left;
    char *sbuf;
    size_t slen, scap;
    int ws_close_code;
    int want_out;
    conn_response_cb on_response;
    conn_data_cb on_data;
    conn_open_cb on_open;
    conn_close_cb on_close;
    void *user;
    long idx;
    uint64_t t0, seq;
    /* when the request now in flight was written (HTTP), and whether its answer carried Retry-After */
    uint64_t t_sent;
    int retry_after;
    /* TLS (net_tls_client()): the session, and whether its handshake is still running */
    void *ssl;
    int handshaking;
};

loop_t *loop_new(void);
/*
 * Every connection opened after this call speaks TLS (any certificate is accepted: the benchmark
 * talks to its own relayd on loopback; no ALPN, so HTTP/1.1). 0 or -1.
 */
int net_tls_client(void);
/* Waits at most timeout_ns (-1: forever) and dispatches what is ready. */
int loop_poll(loop_t *loop, int64_t timeout_ns);

/* Starts a non-blocking connect from src (NULL: any) to dst. NULL on immediate failure. */
conn_t *conn_new(loop_t *loop, enum conn_mode mode, const struct sockaddr_in *dst, const struct in_addr *src);
/* Queues bytes and writes what the socket takes now. */
int conn_send(conn_t *c, const void *buf, size_t len);
/* Sends one masked WebSocket frame. */
int conn_ws_send(conn_t *c, int opcode, const void *payload, size_t len);
void conn_close(conn_t *c);
void conn_free(conn_t *c);

/* Parses "HOST:PORT" into dst. 0 or -1. */
int parse_hostport(const char *text, struct sockaddr_in *dst);
/* The n-th address after base (base + n, host order arithmetic). */
struct in_addr addr_plus(const char *base, unsigned n);

/*
 * A blocking call over *cp (opened from src when NULL or closed), for setup and verification.
 * Returns the status (or -1 on a transport error / timeout); *body is malloc'd, NUL-terminated.
 */
int sync_call(loop_t *loop, conn_t **cp, const struct sockaddr_in *dst, const struct in_addr *src, const char *method,
              const char *path, const char *bearer, const char *body, char **resp);

#endif
