/*
 * Lingering close for the server's plain-TCP connections.
 *
 * When relayd answers a request before reading its body (h2o refuses a
 * Content-Length over the route's limit with 413 right after the head) and
 * then closes the connection, the kernel answers the body bytes still
 * arriving with a reset, and a reset may throw away the answer before the
 * client read it: the client sees "connection reset" where the relay said
 * 413. h2o 2.2.5 closes at once (lingering close is a TODO in its http1.c).
 *
 * The shim's h2o_socket_close (h2o_shim.c) asks rl__http_linger_keep first:
 * for a connection the server accepted (marked by rl__http_server_accepted)
 * over plain TCP whose peer has not closed yet, it keeps a duplicate of the
 * descriptor; h2o then closes and frees its socket, and
 * rl__http_linger_start half-closes the duplicate, so the peer reads the end of the response,
 * and reads and drops whatever the peer still sends, until the peer closes,
 * falls quiet for LINGER_IDLE_MS, or LINGER_MAX_MS have passed. At most
 * LINGER_MAX_SOCKETS linger at a time; past that a connection closes at
 * once, as before. TLS connections end with h2o's own close_notify and are
 * left to h2o.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <h2o.h>

#include "common/clock.h"
#include "common/log.h"
#include "http/server.h"

#define LINGER_IDLE_MS     2000
#define LINGER_MAX_MS      10000
#define LINGER_MAX_SOCKETS 1024

struct lingerer {
    h2o_linklist_t link;
    h2o_socket_t *sock;
    int64_t deadline_us;
    h2o_timeout_entry_t idle;
};

static struct {
    h2o_loop_t *loop;
    h2o_timeout_t idle;
    h2o_linklist_t all;
    size_t count;
} lingering;

static void lingerer_end(struct lingerer *l)
{
    if (h2o_timeout_is_linked(&l->idle))
        h2o_timeout_unlink(&l->idle);
    h2o_linklist_unlink(&l->link);
    --lingering.count;
    /* Not marked as accepted: this close is h2o's own. */
    h2o_socket_close(l->sock);
    free(l);
}

static void on_linger_idle(h2o_timeout_entry_t *entry)
{
    lingerer_end(H2O_STRUCT_FROM_MEMBER(struct lingerer, idle, entry));
}

static void on_linger_read(h2o_socket_t *sock, const char *err)
{
    struct lingerer *l = sock->data;

    if (err != NULL || rl_clock_mono_us() >= l->deadline_us) {
        lingerer_end(l);
        return;
    }
    h2o_buffer_consume(&sock->input, sock->input->size);
    h2o_timeout_unlink(&l->idle);
    h2o_timeout_link(lingering.loop, &lingering.idle, &l->idle);
}

/* Whether the peer may still send: it has not closed and the socket has not failed. */
static int peer_may_send(int fd)
{
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);

    return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
}

void rl__http_linger_start(h2o_loop_t *loop, int fd)
{
    struct lingerer *l = calloc(1, sizeof(*l));

    if (l == NULL) {
        close(fd);
        return;
    }
    if (lingering.loop == NULL) {
        lingering.loop = loop;
        h2o_timeout_init(loop, &lingering.idle, LINGER_IDLE_MS);
        h2o_linklist_init_anchor(&lingering.all);
    }
    shutdown(fd, SHUT_WR);
    l->sock = h2o_evloop_socket_create(loop, fd, 0);
    l->sock->data = l;
    l->deadline_us = rl_clock_mono_us() + (int64_t)LINGER_MAX_MS * 1000;
    l->idle.cb = on_linger_idle;
    h2o_linklist_insert(&lingering.all, &l->link);
    ++lingering.count;
    h2o_timeout_link(loop, &lingering.idle, &l->idle);
    h2o_socket_read_start(l->sock, on_linger_read);
}

int rl__http_linger_keep(h2o_socket_t *sock, h2o_loop_t **loop)
{
    int own;

    if (sock->ssl != NULL || !rl__http_server_accepted(sock) || lingering.count >= LINGER_MAX_SOCKETS ||
        (lingering.loop != NULL && lingering.loop != h2o_socket_get_loop(sock)))
        return -1;
    own = h2o_socket_get_fd(sock);
    if (own < 0 || !peer_may_send(own))
        return -1;
    *loop = h2o_socket_get_loop(sock);
    return fcntl(own, F_DUPFD_CLOEXEC, 0);
}

size_t rl__http_lingering(void)
{
    return lingering.count;
}

void rl__http_linger_close_all(void)
{
    while (lingering.loop != NULL && !h2o_linklist_is_empty(&lingering.all))
        lingerer_end(H2O_STRUCT_FROM_MEMBER(struct lingerer, link, lingering.all.next));
}
