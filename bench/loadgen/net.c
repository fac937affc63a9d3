#include "net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define READ_CHUNK 65536
#define MAX_EVENTS 512
#define BUFFER_CAP (64u << 20) /* a peer that sends more than this without a complete unit is cut off */

struct loop {
    int epfd;
};

enum { CK_SIZE, CK_EXT, CK_DATA, CK_DATA_CR, CK_DONE };

/* Set by net_tls_client(): every connection opened afterwards runs TLS over its socket. */
static SSL_CTX *tls_ctx;

int net_tls_client(void)
{
    if (tls_ctx != NULL)
        return 0;
    tls_ctx = SSL_CTX_new(TLS_client_method());
    if (tls_ctx == NULL)
        return -1;
    SSL_CTX_set_verify(tls_ctx, SSL_VERIFY_NONE, NULL);
    /*
     * Thousands of idle sessions are held: release the record buffers between records, and let a
     * retried SSL_write() pass a write buffer that grew (and moved) meanwhile.
     */
    SSL_CTX_set_mode(tls_ctx,
                     SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    return 0;
}

uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

loop_t *loop_new(void)
{
    loop_t *loop = calloc(1, sizeof(*loop));

    if (loop == NULL)
        return NULL;
    loop->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (loop->epfd < 0) {
        free(loop);
        return NULL;
    }
    return loop;
}

int parse_hostport(const char *text, struct sockaddr_in *dst)
{
    char host[64];
    const char *colon = strrchr(text, ':');

    if (colon == NULL || (size_t)(colon - text) >= sizeof(host))
        return -1;
    memcpy(host, text, (size_t)(colon - text));
    host[colon - text] = '\0';
    memset(dst, 0, sizeof(*dst));
    dst->sin_family = AF_INET;
    dst->sin_port = htons((uint16_t)atoi(colon + 1));
    return inet_pton(AF_INET, host, &dst->sin_addr) == 1 ? 0 : -1;
}

struct in_addr addr_plus(const char *base, unsigned n)
{
    struct in_addr a;

    inet_pton(AF_INET, base, &a);
    a.s_addr = htonl(ntohl(a.s_addr) + n);
    return a;
}

static int grow(char **buf, size_t *cap, size_t need)
{
    size_t ncap = *cap ? *cap : 4096;
    char *nbuf;

    if (need <= *cap)
        return 0;
    if (need > BUFFER_CAP)
        return -1;
    while (ncap < need)
        ncap *= 2;
    nbuf = realloc(*buf, ncap);
    if (nbuf == NULL)
        return -1;
    *buf = nbuf;
    *cap = ncap;
    return 0;
}

static void set_events(conn_t *c, int want_out)
{
    struct epoll_event ev;

    if (c->want_out == want_out)
        return;
    c->want_out = want_out;
    ev.events = EPOLLIN | (want_out ? EPOLLOUT : 0);
    ev.data.ptr = c;
    epoll_ctl(c->loop->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

conn_t *conn_new(loop_t *loop, enum conn_mode mode, const struct sockaddr_in *dst, const struct in_addr *src)
{
    conn_t *c = calloc(1, sizeof(*c));
    struct epoll_event ev;
    int one = 1, fd;

    if (c == NULL)
        return NULL;
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        free(c);
        return NULL;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (src != NULL) {
        struct sockaddr_in sa;

        /* Leave the port to connect(), so that each source address has its own port range per destination. */
        setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
        memset(&sa, 0, sizeof(sa));
        sa.sin_family = AF_INET;
        sa.sin_addr = *src;
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
            close(fd);
            free(c);
            return NULL;
        }
    }
    if (connect(fd, (const struct sockaddr *)dst, sizeof(*dst)) != 0 && errno != EINPROGRESS) {
        close(fd);
        free(c);
        return NULL;
    }
    c->loop = loop;
    c->fd = fd;
    c->mode = mode;
    c->state = CS_CONNECTING;
    c->clen = -1;
    c->want_out = 1;
    ev.events = EPOLLIN | EPOLLOUT;
    ev.data.ptr = c;
    if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        close(fd);
        free(c);
        return NULL;
    }
    return c;
}

void conn_close(conn_t *c)
{
    if (c->state == CS_CLOSED)
        return;
    if (c->ssl != NULL) {
        SSL_free(c->ssl);
        c->ssl = NULL;
    }
    close(c->fd); /* also leaves the epoll set */
    c->fd = -1;
    c->state = CS_CLOSED;
}

void conn_free(conn_t *c)
{
    if (c == NULL)
        return;
    conn_close(c);
    free(c->wbuf);
    free(c->rbuf);
    free(c->sbuf);
    free(c);
}

static void fail(conn_t *c, int err)
{
    if (c->state == CS_CLOSED)
        return;
    conn_close(c);
    if (c->on_close != NULL)
        c->on_close(c, err);
}

static void flush(conn_t *c)
{
    if (c->handshaking)
        return;
    while (c->woff < c->wlen) {
        ssize_t n;

        if (c->ssl != NULL) {
            int w = SSL_write(c->ssl, c->wbuf + c->woff, (int)(c->wlen - c->woff));

            if (w <= 0) {
                int e = SSL_get_error(c->ssl, w);

                /* Waiting for the peer's bytes (TLS 1.3 has no renegotiation: rare); on_readable() retries. */
                if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
                    set_events(c, e == SSL_ERROR_WANT_WRITE);
                    return;
                }
                ERR_clear_error();
                fail(c, EPROTO);
                return;
            }
            c->woff += (size_t)w;
            continue;
        }
        n = write(c->fd, c->wbuf + c->woff, c->wlen - c->woff);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                set_events(c, 1);
                return;
            }
            if (errno == EINTR)
                continue;
            fail(c, errno);
            return;
        }
        c->woff += (size_t)n;
    }
    c->woff = c->wlen = 0;
    set_events(c, 0);
}

int conn_send(conn_t *c, const void *buf, size_t len)
{
    if (c->state == CS_CLOSED)
        return -1;
    if (c->woff > 0 && c->woff == c->wlen)
        c->woff = c->wlen = 0;
    if (grow(&c->wbuf, &c->wcap, c->wlen + len) != 0)
        return -1;
    memcpy(c->wbuf + c->wlen, buf, len);
    c->wlen += len;
    c->t_sent = now_ns();
    if (c->state == CS_OPEN)
        flush(c);
    return c->state == CS_CLOSED ? -1 : 0;
}

int conn_ws_send(conn_t *c, int opcode, const void *payload, size_t len)
{
    unsigned char frame[14 + 256];
    const unsigned char *p = payload;
    unsigned char mask[4] = {0x5a, 0xc3, 0x17, 0x8e};
    size_t h = 0, i;

    if (len > 256)
        return -1;
    frame[h++] = (unsigned char)(0x80 | opcode);
    if (len < 126) {
        frame[h++] = (unsigned char)(0x80 | len);
    } else {
        frame[h++] = 0x80 | 126;
        frame[h++] = (unsigned char)(len >> 8);
        frame[h++] = (unsigned char)(len & 0xff);
    }
    memcpy(frame + h, mask, 4);
    h += 4;
    for (i = 0; i < len; ++i)
        frame[h + i] = p[i] ^ mask[i & 3];
    return conn_send(c, frame, h + len);
}

/* Parses the response head at the front of rbuf. 1 when complete, 0 when more is needed, -1 on garbage. */
static int parse_head(conn_t *c)
{
    char *end = memmem(c->rbuf, c->rlen, "\r\n\r\n", 4), *line, *next;

    if (end == NULL)
        return c->rlen > 65536 ? -1 : 0;
    c->head_len = (size_t)(end - c->rbuf) + 4;
    if (c->rlen < 12 || memcmp(c->rbuf, "HTTP/1.", 7) != 0)
        return -1;
    c->status = atoi(c->rbuf + 9);
    c->chunked = 0;
    c->clen = -1;
    c->retry_after = 0;
    for (line = memchr(c->rbuf, '\n', c->head_len); line != NULL && line < end; line = next) {
        ++line;
        next = memchr(line, '\n', (size_t)(end + 2 - line));
        if (next == NULL)
            break;
        if (strncasecmp(line, "content-length:", 15) == 0)
            c->clen = strtol(line + 15, NULL, 10);
        else if (strncasecmp(line, "retry-after:", 12) == 0)
            c->retry_after = 1;
        else if (strncasecmp(line, "transfer-encoding:", 18) == 0 && memmem(line, (size_t)(next - line), "chunked", 7))
            c->chunked = 1;
    }
    c->head_done = 1;
    c->ck_state = CK_SIZE;
    c->ck_left = 0;
    c->ck_digits = 0;
    return 1;
}

static void consume(conn_t *c, size_t n)
{
    if (n >= c->rlen) {
        c->rlen = 0;
        return;
    }
    memmove(c->rbuf, c->rbuf + n, c->rlen - n);
    c->rlen -= n;
}

static int hexval(int ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/*
 * Feeds body bytes through the chunk decoder (when the body is chunked),
 * appending the payload to sbuf. Returns the number of input bytes used; stops
 * at the end of the body (CK_DONE).
 */
static size_t dechunk(conn_t *c, const char *p, size_t n)
{
    size_t i = 0;

    if (!c->chunked) {
        if (grow(&c->sbuf, &c->scap, c->slen + n) != 0)
            return 0;
        memcpy(c->sbuf + c->slen, p, n);
        c->slen += n;
        return n;
    }
    while (i < n && c->ck_state != CK_DONE) {
        int ch, v;
        size_t take;

        switch (c->ck_state) {
        case CK_SIZE:
            ch = (unsigned char)p[i++];
            if ((v = hexval(ch)) >= 0) {
                c->ck_left = c->ck_left * 16 + (size_t)v;
                c->ck_digits++;
            } else if (ch == '\n') {
                if (c->ck_digits == 0)
                    break; /* the CRLF after a chunk's data, seen here when split */
                c->ck_state = c->ck_left > 0 ? CK_DATA : CK_DONE;
                c->ck_digits = 0;
            } else if (ch == ';') {
                c->ck_state = CK_EXT;
            }
            break;
        case CK_EXT:
            if (p[i++] == '\n') {
                c->ck_state = c->ck_left > 0 ? CK_DATA : CK_DONE;
                c->ck_digits = 0;
            }
            break;
        case CK_DATA:
            take = n - i < c->ck_left ? n - i : c->ck_left;
            if (grow(&c->sbuf, &c->scap, c->slen + take) != 0)
                return i;
            memcpy(c->sbuf + c->slen, p + i, take);
            c->slen += take;
            i += take;
            c->ck_left -= take;
            if (c->ck_left == 0)
                c->ck_state = CK_DATA_CR;
            break;
        case CK_DATA_CR:
            if (p[i++] == '\n') {
                c->ck_state = CK_SIZE;
                c->ck_left = 0;
                c->ck_digits = 0;
            }
            break;
        }
    }
    return i;
}

/* Hands every complete `data:` line in sbuf to on_data and keeps the partial rest. */
static void sse_lines(conn_t *c, uint64_t at)
{
    size_t start = 0;

    for (;;) {
        char *nl = memchr(c->sbuf + start, '\n', c->slen - start);
        size_t len;
        const char *line;

        if (nl == NULL)
            break;
        line = c->sbuf + start;
        len = (size_t)(nl - line);
        if (len > 0 && line[len - 1] == '\r')
            --len;
        if (len >= 5 && memcmp(line, "data:", 5) == 0 && c->on_data != NULL) {
            size_t skip = (len > 5 && line[5] == ' ') ? 6 : 5;
            c->on_data(c, line + skip, len - skip, at);
            if (c->state == CS_CLOSED)
                return;
        }
        start = (size_t)(nl - c->sbuf) + 1;
    }
    if (start > 0) {
        memmove(c->sbuf, c->sbuf + start, c->slen - start);
        c->slen -= start;
    }
}

static void handle_http(conn_t *c)
{
    while (c->rlen > 0 && c->state != CS_CLOSED) {
        int r;

        if (!c->head_done) {
            r = parse_head(c);
            if (r < 0) {
                fail(c, EPROTO);
                return;
            }
            if (r == 0)
                return;
        }
        if (c->chunked) {
            size_t used;

            c->slen = 0;
            c->ck_state = CK_SIZE;
            c->ck_left = 0;
            c->ck_digits = 0;
            used = dechunk(c, c->rbuf + c->head_len, c->rlen - c->head_len);
            if (c->ck_state != CK_DONE)
                return;
            /* skip the final CRLF after the zero chunk when present */
            if (c->head_len + used + 2 <= c->rlen && c->rbuf[c->head_len + used] == '\r')
                used += 2;
            c->head_done = 0;
            if (c->on_response != NULL)
                c->on_response(c, c->status, c->sbuf, c->slen);
            consume(c, c->head_len + used);
        } else {
            size_t blen = c->clen > 0 ? (size_t)c->clen : 0;
            if (c->rlen < c->head_len + blen)
                return;
            c->head_done = 0;
            if (c->on_response != NULL)
                c->on_response(c, c->status, c->rbuf + c->head_len, blen);
            if (c->state == CS_CLOSED)
                return;
            consume(c, c->head_len + blen);
        }
    }
}

static void handle_sse(conn_t *c, uint64_t at)
{
    if (!c->head_done) {
        int r = parse_head(c);
        if (r < 0) {
            fail(c, EPROTO);
            return;
        }
        if (r == 0)
            return;
        consume(c, c->head_len);
        if (c->on_open != NULL)
            c->on_open(c, c->status);
        if (c->state == CS_CLOSED)
            return;
    }
    if (c->rlen > 0) {
        size_t used = dechunk(c, c->rbuf, c->rlen);
        consume(c, used);
        sse_lines(c, at);
    }
}

static void handle_ws(conn_t *c, uint64_t at)
{
    if (!c->head_done) {
        int r = parse_head(c);
        if (r < 0) {
            fail(c, EPROTO);
            return;
        }
        if (r == 0)
            return;
        consume(c, c->head_len);
        if (c->on_open != NULL)
            c->on_open(c, c->status);
        if (c->state == CS_CLOSED || c->status != 101)
            return;
    }
    while (c->rlen >= 2 && c->state != CS_CLOSED) {
        const unsigned char *p = (const unsigned char *)c->rbuf;
        int opcode = p[0] & 0x0f, masked = p[1] & 0x80;
        uint64_t len = p[1] & 0x7f;
        size_t h = 2, i;

        if (len == 126) {
            if (c->rlen < 4)
                return;
            len = ((uint64_t)p[2] << 8) | p[3];
            h = 4;
        } else if (len == 127) {
            if (c->rlen < 10)
                return;
            len = 0;
            for (i = 0; i < 8; ++i)
                len = (len << 8) | p[2 + i];
            h = 10;
        }
        if (masked)
            h += 4;
        if (c->rlen < h + len)
            return;
        if (masked) {
            unsigned char *q = (unsigned char *)c->rbuf + h;
            for (i = 0; i < len; ++i)
                q[i] ^= p[h - 4 + (i & 3)];
        }
        if (opcode == 0x9) {
            conn_ws_send(c, 0xA, c->rbuf + h, len > 125 ? 125 : len);
        } else if (opcode == 0x8) {
            c->ws_close_code = len >= 2 ? (p[h] << 8) | p[h + 1] : 1005;
            fail(c, 0);
            return;
        } else if ((opcode == 0x1 || opcode == 0x0) && c->on_data != NULL) {
            c->on_data(c, c->rbuf + h, len, at);
        }
        consume(c, h + len);
    }
}

/* One step of the TLS handshake; once it is done, what conn_send() queued meanwhile goes out. */
static void tls_step(conn_t *c)
{
    int r = SSL_do_handshake(c->ssl), e;

    if (r == 1) {
        c->handshaking = 0;
        set_events(c, c->woff < c->wlen);
        flush(c);
        return;
    }
    e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        set_events(c, e == SSL_ERROR_WANT_WRITE);
        return;
    }
    ERR_clear_error();
    fail(c, EPROTO);
}

static void dispatch(conn_t *c, uint64_t at);

/*
 * Reads what TLS has decrypted, record by record, until the socket has nothing more: epoll only
 * reports the socket, not the plaintext OpenSSL already holds.
 */
static void tls_readable(conn_t *c)
{
    if (c->handshaking) {
        tls_step(c);
        if (c->handshaking || c->state == CS_CLOSED)
            return;
    }
    if (c->woff < c->wlen)
        flush(c);
    while (c->state != CS_CLOSED) {
        int n, e;

        if (grow(&c->rbuf, &c->rcap, c->rlen + READ_CHUNK) != 0) {
            fail(c, ENOMEM);
            return;
        }
        n = SSL_read(c->ssl, c->rbuf + c->rlen, (int)(c->rcap - c->rlen));
        if (n <= 0) {
            e = SSL_get_error(c->ssl, n);
            if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
                return;
            ERR_clear_error();
            fail(c, e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && errno == 0) ? 0 : EPROTO);
            return;
        }
        c->rlen += (size_t)n;
        dispatch(c, now_ns());
    }
}

static void on_readable(conn_t *c)
{
    ssize_t n;

    if (c->ssl != NULL) {
        tls_readable(c);
        return;
    }
    if (grow(&c->rbuf, &c->rcap, c->rlen + READ_CHUNK) != 0) {
        fail(c, ENOMEM);
        return;
    }
    n = read(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen);
    if (n == 0) {
        fail(c, 0);
        return;
    }
    if (n < 0) {
        if (errno != EAGAIN && errno != EINTR)
            fail(c, errno);
        return;
    }
    c->rlen += (size_t)n;
    dispatch(c, now_ns());
}

static void dispatch(conn_t *c, uint64_t at)
{
    switch (c->mode) {
    case CONN_HTTP:
        handle_http(c);
        break;
    case CONN_SSE:
        handle_sse(c, at);
        break;
    case CONN_WS:
        handle_ws(c, at);
        break;
    }
}

int loop_poll(loop_t *loop, int64_t timeout_ns)
{
    struct epoll_event events[MAX_EVENTS];
    struct timespec ts, *tsp = NULL;
    int n, i;

    if (timeout_ns >= 0) {
        ts.tv_sec = timeout_ns / 1000000000;
        ts.tv_nsec = timeout_ns % 1000000000;
        tsp = &ts;
    }
    n = epoll_pwait2(loop->epfd, events, MAX_EVENTS, tsp, NULL);
    for (i = 0; i < n; ++i) {
        conn_t *c = events[i].data.ptr;

        if (c->state == CS_CLOSED)
            continue;
        if (c->state == CS_CONNECTING && (events[i].events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
            int err = 0;
            socklen_t len = sizeof(err);

            getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
            if (err != 0) {
                fail(c, err);
                continue;
            }
            c->state = CS_OPEN;
            if (tls_ctx != NULL) {
                c->ssl = SSL_new(tls_ctx);
                if (c->ssl == NULL || SSL_set_fd(c->ssl, c->fd) != 1) {
                    fail(c, ENOMEM);
                    continue;
                }
                SSL_set_connect_state(c->ssl);
                c->handshaking = 1;
                tls_step(c);
                continue;
            }
            flush(c);
            if (c->state == CS_CLOSED)
                continue;
        } else if ((events[i].events & EPOLLOUT) && c->handshaking) {
            tls_step(c);
            continue;
        } else if (events[i].events & EPOLLOUT) {
            flush(c);
            if (c->state == CS_CLOSED)
                continue;
        }
        if (events[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
            on_readable(c);
    }
    return n;
}

/* ---- blocking calls for setup and verification ---- */

struct sync_state {
    int done, status;
    char *body;
};

static void sync_response(conn_t *c, int status, const char *body, size_t len)
{
    struct sync_state *st = c->user;

    st->done = 1;
    st->status = status;
    st->body = malloc(len + 1);
    if (st->body != NULL) {
        memcpy(st->body, body, len);
        st->body[len] = '\0';
    }
}

static void sync_closed(conn_t *c, int err)
{
    struct sync_state *st = c->user;

    if (st != NULL && !st->done) {
        st->done = 1;
        st->status = -1;
    }
}

int sync_call(loop_t *loop, conn_t **cp, const struct sockaddr_in *dst, const struct in_addr *src, const char *method,
              const char *path, const char *bearer, const char *body, char **resp)
{
    struct sync_state st = {0, -1, NULL};
    size_t blen = body != NULL ? strlen(body) : 0;
    char *req;
    int n, attempt;
    uint64_t deadline;

    *resp = NULL;
    req = malloc(blen + (bearer != NULL ? strlen(bearer) : 0) + strlen(path) + 512);
    if (req == NULL)
        return -1;
    n = sprintf(req,
                "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s%s%sContent-Type: application/json\r\n"
                "Content-Length: %zu\r\n\r\n",
                method, path, bearer != NULL ? "Authorization: Bearer " : "", bearer != NULL ? bearer : "",
                bearer != NULL ? "\r\n" : "", blen);
    if (blen > 0)
        memcpy(req + n, body, blen);
    for (attempt = 0; attempt < 2; ++attempt) {
        st.done = 0;
        if (*cp != NULL && (*cp)->state == CS_CLOSED) {
            conn_free(*cp);
            *cp = NULL;
        }
        if (*cp == NULL) {
            *cp = conn_new(loop, CONN_HTTP, dst, src);
            if (*cp == NULL)
                break;
            (*cp)->on_response = sync_response;
            (*cp)->on_close = sync_closed;
        }
        (*cp)->user = &st;
        if (conn_send(*cp, req, (size_t)n + blen) != 0) {
            conn_free(*cp);
            *cp = NULL;
            continue;
        }
        deadline = now_ns() + 30ull * 1000000000ull;
        while (!st.done && now_ns() < deadline)
            loop_poll(loop, 100000000);
        if (*cp != NULL)
            (*cp)->user = NULL;
        if (st.done && st.status > 0)
            break;
        /* A keep-alive connection the server closed meanwhile: try once on a new one. */
        conn_free(*cp);
        *cp = NULL;
        if (!st.done)
            break;
    }
    free(req);
    *resp = st.body;
    return st.done ? st.status : -1;
}
