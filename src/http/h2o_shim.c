/*
 * The two places where relayd and catalogd reach inside h2o 2.2.5, and the
 * start-up check that both are in force.
 *
 * h2o offers no public hook for either, so each is an exported function of
 * the same name as h2o's own, which h2o's shared library calls through its
 * PLT and so reaches ours first (CMakeLists.txt exports both):
 *
 * - phr_parse_request, h2o's HTTP/1 head parser: after h2o's own parse, the
 *   head checks against request smuggling run (head.c) and the request body
 *   limit is set for the route the head names (rl__http_server_limit_for).
 *   h2o checks a Content-Length against one global max_request_entity_size
 *   right after this call, and offers no hook in between, so the limit is
 *   exactly the route's: JSON routes refuse anything over 1 MB before
 *   reading it, while attachment uploads take 25 MB. The main loop puts the
 *   limit back to the JSON default after every turn
 *   (rl_http_server_after_turn), so HTTP/2 streams and chunked bodies see
 *   the strict default; uploads larger than that need HTTP/1.1 with a
 *   Content-Length.
 * - h2o_socket_close: a plain-TCP connection the server accepted lingers
 *   after its close (linger.c), so that a peer still sending a body reads
 *   the answer instead of a reset.
 *
 * Were either not picked up (a libh2o built with -Bsymbolic, a static link,
 * a linker that drops the export), h2o would call its own silently: no head
 * checks, one body limit for every route, resets instead of answers. So
 * rl__http_shim_check sends one request through h2o's own HTTP/1 path on a
 * socket pair, on a private loop, before a server is made, and the server
 * refuses to start unless both functions ran (docs/internals/http.md, "h2o
 * from the outside").
 *
 * One more thing is read from h2o's private structures: its list of HTTP/1
 * connections (ctx->http1._conns), which the graceful stop walks to see
 * whether a request is still arriving. h2o 2.2.5 links each connection
 * right after its h2o_conn_t header and its socket pointer (lib/http1.c,
 * struct st_h2o_http1_conn_t); the check finds its own connection through
 * that layout, or refuses to start too. Everything else relayd needs from
 * h2o is public API.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <h2o.h>
#include <h2o/http1.h>
#include <h2o/version.h>

#include "common/clock.h"
#include "common/log.h"
#include "http/head.h"
#include "http/server.h"

#define CHECK_TIMEOUT_MS 2000

typedef int (*parse_request_fn)(const char *buf, size_t len, const char **method, size_t *method_len, const char **path,
                                size_t *path_len, int *minor_version, struct phr_header *headers, size_t *num_headers,
                                size_t last_len);
typedef void (*socket_close_fn)(h2o_socket_t *sock);

/* Each set once its function has run in this process: what the start-up check looks for. */
static int parse_seen, close_seen;
/* The server whose routes set the body limit (the one with a route past the JSON default), or NULL. */
static rl_http_server_t *limited_server;

void rl__http_bodylimit_attach(rl_http_server_t *server)
{
    limited_server = server;
}

/*
 * The test build relayd-unhooked (CMakeLists.txt) compiles this file with
 * RL_SHIM_UNHOOKED: the two functions are then hidden inside the program,
 * as a linker that did not export them would leave them, so that the suite
 * sees the start-up check refuse (tests/e2e/test_140_h2o_shim.py).
 */
#ifdef RL_SHIM_UNHOOKED
#define SHIM_EXPORT __attribute__((visibility("hidden")))
#else
#define SHIM_EXPORT
#endif

SHIM_EXPORT int phr_parse_request(const char *buf, size_t len, const char **method, size_t *method_len,
                                  const char **path, size_t *path_len, int *minor_version, struct phr_header *headers,
                                  size_t *num_headers, size_t last_len);
SHIM_EXPORT void h2o_socket_close(h2o_socket_t *sock);

int phr_parse_request(const char *buf, size_t len, const char **method, size_t *method_len, const char **path,
                      size_t *path_len, int *minor_version, struct phr_header *headers, size_t *num_headers,
                      size_t last_len)
{
    static parse_request_fn next;
    size_t capacity = *num_headers;
    int result;

    if (next == NULL) {
        next = (parse_request_fn)dlsym(RTLD_NEXT, "phr_parse_request");
        if (next == NULL) {
            rl_log_error("phr_parse_request: h2o's parser not found");
            return -1;
        }
    }
    parse_seen = 1;
    result = next(buf, len, method, method_len, path, path_len, minor_version, headers, num_headers, last_len);
    result = rl__http_head_check(buf, len, method, method_len, path, path_len, minor_version, headers, num_headers,
                                 capacity, result);
    if (result > 0 && limited_server != NULL)
        rl__http_server_limit_for(limited_server, *method, *method_len, *path, *path_len, headers, *num_headers);
    return result;
}

void h2o_socket_close(h2o_socket_t *sock)
{
    static socket_close_fn next;
    h2o_loop_t *loop = NULL;
    int fd;

    if (next == NULL && (next = (socket_close_fn)dlsym(RTLD_NEXT, "h2o_socket_close")) == NULL) {
        rl_log_error("h2o_socket_close: h2o's own not found");
        abort();
    }
    close_seen = 1;
    fd = rl__http_linger_keep(sock, &loop);
    next(sock);
    if (fd >= 0)
        rl__http_linger_start(loop, fd);
}

/* ---- the start-up check ------------------------------------------------------------------------- */

struct check {
    h2o_globalconf_t conf;
    h2o_context_t context;
    h2o_accept_ctx_t accept;
    int answered;  /* the handler ran */
    int layout_ok; /* the handler found its connection on the context's list, where the layout says */
};

#define HTTP1_LINK_OFFSET (sizeof(h2o_conn_t) + sizeof(h2o_socket_t *))

h2o_conn_t *rl__http_shim_http1_conn(h2o_linklist_t *link)
{
    return (h2o_conn_t *)((char *)link - HTTP1_LINK_OFFSET);
}

struct check_handler {
    h2o_handler_t super;
    struct check *check;
};

static int on_check_req(h2o_handler_t *self, h2o_req_t *req)
{
    struct check *check = ((struct check_handler *)self)->check;

    h2o_linklist_t *list = &check->context.http1._conns, *node;

    check->answered = 1;
    for (node = list->next; node != list; node = node->next)
        check->layout_ok |= rl__http_shim_http1_conn(node) == req->conn;
    req->res.status = 204;
    req->res.reason = "No Content";
    h2o_send_inline(req, NULL, 0);
    return 0;
}

int rl__http_shim_check(char *why, size_t whysz)
{
    static const char request[] = "GET /shim-check HTTP/1.1\r\nHost: shim\r\nConnection: close\r\n\r\n";
    static int passed;
    h2o_evloop_t *loop = NULL;
    h2o_multithread_queue_t *queue;
    struct check check;
    struct check_handler *handler;
    h2o_hostconf_t *host;
    h2o_socket_t *sock;
    int pair[2] = {-1, -1}, result = -1;
    int64_t deadline = rl_clock_mono_ms() + CHECK_TIMEOUT_MS;
    struct timeval now;
    char drain[512];

    if (passed)
        return 0;
    memset(&check, 0, sizeof(check));
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) != 0) {
        snprintf(why, whysz, "cannot make a socket pair for the h2o check: %s", strerror(errno));
        return -1;
    }
    loop = h2o_evloop_create();
    h2o_config_init(&check.conf);
    host = h2o_config_register_host(&check.conf, h2o_iovec_init(H2O_STRLIT("default")), 65535);
    handler = (void *)h2o_create_handler(h2o_config_register_path(host, "/", 0), sizeof(*handler));
    handler->super.on_req = on_check_req;
    handler->check = &check;
    h2o_context_init(&check.context, loop, &check.conf);
    check.accept.ctx = &check.context;
    check.accept.hosts = check.conf.hosts;
    sock = h2o_evloop_socket_create(loop, pair[0], 0);
    pair[0] = -1; /* h2o's now: its close is the one under test */
    gettimeofday(&now, NULL);
    h2o_http1_accept(&check.accept, sock, now);
    if (write(pair[1], request, sizeof(request) - 1) != (ssize_t)(sizeof(request) - 1)) {
        snprintf(why, whysz, "cannot write the h2o check's request: %s", strerror(errno));
        goto out;
    }
    /* Until h2o has answered and closed its end (the peer reads end of file), or the time is up. */
    for (;;) {
        ssize_t n = read(pair[1], drain, sizeof(drain));
        if (n == 0)
            break;
        if ((n < 0 && errno != EAGAIN && errno != EINTR) || rl_clock_mono_ms() >= deadline)
            break;
        if (n < 0)
            h2o_evloop_run(loop, 10);
    }
    if (!check.answered)
        snprintf(why, whysz, "h2o did not answer the start-up check's request");
    else if (!parse_seen)
        snprintf(why, whysz,
                 "h2o does not call relay's phr_parse_request (the request head checks and per-route "
                 "body limits would be off)");
    else if (!check.layout_ok)
        snprintf(why, whysz,
                 "h2o's HTTP/1 connections are not laid out as relay reads them (a graceful stop "
                 "could not tell an arriving request)");
    else if (!close_seen)
        snprintf(why, whysz,
                 "h2o does not call relay's h2o_socket_close (connections would reset instead of "
                 "lingering)");
    else
        result = 0;
out:
    if (pair[1] >= 0)
        close(pair[1]);
    /* Lets h2o finish with the connection before its context goes. */
    h2o_evloop_run(loop, 0);
    queue = check.context.queue;
    h2o_context_dispose(&check.context);
#if H2O_LIBRARY_VERSION_MAJOR == 0 && H2O_LIBRARY_VERSION_MINOR <= 13
    /* h2o 2.2's h2o_multithread_destroy_queue closes the queue's pipe but never frees the queue itself. */
    free(queue);
#endif
    h2o_config_dispose(&check.conf);
    h2o_evloop_destroy(loop);
    passed = result == 0;
    return result;
}
