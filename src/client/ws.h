/*
 * A WebSocket client for the relay's bridge socket: wslay framing over a
 * libcurl connect-only connection. Debian's libcurl 7.88 has no WebSocket
 * support, so curl only opens the connection (TCP, TLS, an HTTPS_PROXY
 * CONNECT tunnel) and this module writes the HTTP/1.1 Upgrade itself,
 * checks the 101 answer and Sec-WebSocket-Accept, then frames with wslay.
 *
 * The socket is non-blocking after the handshake: the caller polls
 * rl_ws_fd() for rl_ws_events() and calls rl_ws_handle() when it is ready.
 * One thread uses a socket at a time.
 */
#ifndef RL_CLIENT_WS_H
#define RL_CLIENT_WS_H

#include <stddef.h>

typedef struct rl_ws rl_ws_t;

/* Called for each complete text message (not NUL-terminated). */
typedef void (*rl_ws_message_cb)(void *user, const char *text, size_t len);

typedef struct rl_ws_options {
    const char *url;    /* http(s):// or ws(s):// URL of the socket */
    const char *token;  /* sent as "Authorization: Bearer ..."; never logged */
    long timeout_ms;    /* connect and handshake; 0: 10 s */
    size_t max_message; /* larger incoming messages fail the connection; 0: 1 MiB */
    rl_ws_message_cb on_message;
    void *user;
} rl_ws_options_t;

enum {
    RL_WS_E_CONNECT = -1,  /* no connection, or the handshake failed */
    RL_WS_E_REFUSED = -2,  /* an HTTP answer other than 101; see *status */
    RL_WS_E_PROTOCOL = -3, /* a bad 101 (Accept mismatch) or bad framing */
    RL_WS_E_CLOSED = -4,   /* the connection is over; see rl_ws_close_code */
};

/*
 * Connects and upgrades. Returns 0 with *out set, or a negative RL_WS_E_*;
 * *status receives the HTTP status of a refused upgrade (401 for a bad
 * token) and err a reason for people. Blocks for at most timeout_ms.
 */
int rl_ws_connect(const rl_ws_options_t *options, rl_ws_t **out, long *status, char *err, size_t errsz);
void rl_ws_free(rl_ws_t *ws);

int rl_ws_fd(const rl_ws_t *ws);
/* POLLIN and/or POLLOUT, as the socket wants now. */
short rl_ws_events(const rl_ws_t *ws);
/*
 * Reads and writes what it can without blocking, calling on_message for each
 * message. 0 while the connection lives; RL_WS_E_CLOSED once it is over
 * (peer close, error or EOF).
 */
int rl_ws_handle(rl_ws_t *ws);
/* Queues a text message (written by the next rl_ws_handle). 0 or -1. */
int rl_ws_send_text(rl_ws_t *ws, const char *text, size_t len);
/* Queues a close frame. */
void rl_ws_close(rl_ws_t *ws, int code, const char *reason);
/* The close code the peer sent (1006 when none arrived), and its reason. */
int rl_ws_close_code(const rl_ws_t *ws);
const char *rl_ws_close_reason(const rl_ws_t *ws);

/* Sec-WebSocket-Accept for a key (RFC 6455 4.2.2), into out (29 bytes). Exposed for tests. */
void rl_ws_accept_for(const char *key, char out[29]);

#endif
