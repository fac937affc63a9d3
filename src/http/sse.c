#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/event.h"
#include "common/event_names.h"
#include "common/hex.h"
#include "common/log.h"
#include "common/strmap.h"
#include "http/later.h"
#include "http/sse.h"

#define MAX_BATCH 64

struct rl_sse {
    h2o_generator_t generator; /* first: h2o hands it back to proceed and stop */
    rl_call_t *call;
    rl_sse_config_t config;
    rl_blob_t **queue;
    size_t queue_head, queue_count, queue_capacity, queued_bytes;
    rl_blob_t *inflight[MAX_BATCH];
    size_t ninflight;
    /*
     * HTTP/1.1: the stream writes its own chunked framing (h2o's encoder
     * formats each chunk's size with an sprintf); the size line of the
     * write in flight.
     */
    int chunked;
    char chunk_head[2 * sizeof(size_t) + 3];
    int sending;
    int ending;      /* rl_sse_end was asked */
    const char *why; /* the stream is over (why, for on_end); NULL while it lasts */
    int released;    /* h2o holds the generator no more: the response was finished or disposed of */
    h2o_timeout_entry_t heartbeat;
    rl_http_hangup_t hangup; /* HTTP/1: the connection, read by the stream to hear its reader hang up */
    /*
     * A stream that is over is reaped here after the loop turn, never inside
     * the call or callback that ended it: on_end runs there, and the memory
     * goes once h2o has released the response too.
     */
    rl_later_item_t reap;
    rl_sse_t *prev, *next; /* every live stream, for a graceful stop */
};

/* The live streams of this process, what they have carried, and the ones to reap (loop thread only). */
static rl_sse_t *live;
static rl_sse_stats_t stats;
static rl_later_t reaper;
static h2o_loop_t *reaper_loop;

/* The socket of req's connection, through h2o's public API (the connection's get_socket), or NULL. */
static h2o_socket_t *conn_socket(h2o_req_t *req)
{
    return req->conn->callbacks->get_socket != NULL ? req->conn->callbacks->get_socket(req->conn) : NULL;
}

/* The descriptor of req's connection, or -1. */
static int conn_fd(h2o_req_t *req)
{
    h2o_socket_t *sock = conn_socket(req);

    return sock != NULL ? h2o_socket_get_fd(sock) : -1;
}

int rl__http_conn_shutdown(h2o_req_t *req)
{
    int fd = conn_fd(req);

    return fd >= 0 ? shutdown(fd, SHUT_RDWR) : -1;
}

/* What waits to be written; the frames in flight stay, h2o may still be writing them. */
static void release_queue(rl_sse_t *sse)
{
    size_t i;

    for (i = 0; i < sse->queue_count; ++i)
        rl_blob_release(sse->queue[(sse->queue_head + i) % sse->queue_capacity]);
    sse->queue_count = sse->queued_bytes = 0;
    free(sse->queue);
    sse->queue = NULL;
    sse->queue_capacity = 0;
}

static void release_all(rl_sse_t *sse)
{
    size_t i;

    release_queue(sse);
    for (i = 0; i < sse->ninflight; ++i)
        rl_blob_release(sse->inflight[i]);
    sse->ninflight = 0;
}

/* Requests that read their connection, by h2o's socket (whose data is h2o's own connection). */
static rl_strmap_t *hangups;

static void socket_key(const h2o_socket_t *sock, char key[2 * sizeof(void *) + 1])
{
    uintptr_t v = (uintptr_t)sock;

    rl_hex_encode(&v, sizeof(v), key);
}

/*
 * Always before h2o closes the socket, which it does only after disposing of
 * the request (the owner's stop, then this) or after a response finished
 * (this came first).
 */
void rl__http_hangup_stop(rl_http_hangup_t *hangup)
{
    char key[2 * sizeof(void *) + 1];

    if (hangup->sock == NULL)
        return;
    socket_key(hangup->sock, key);
    rl_strmap_remove(hangups, key);
    h2o_socket_read_stop(hangup->sock);
    hangup->sock = NULL;
}

static void hangup_stop(rl_sse_t *sse)
{
    rl__http_hangup_stop(&sse->hangup);
}

/* The stream is over: marked here, reaped (on_end, then freed) after the loop turn. */
static void end_once(rl_sse_t *sse, const char *why)
{
    if (sse->why != NULL)
        return;
    sse->why = why;
    hangup_stop(sse);
    if (h2o_timeout_is_linked(&sse->heartbeat))
        h2o_timeout_unlink(&sse->heartbeat);
    rl_later_add(&reaper, &sse->reap);
}

static void destroy(rl_sse_t *sse)
{
    if (sse->prev != NULL)
        sse->prev->next = sse->next;
    else
        live = sse->next;
    if (sse->next != NULL)
        sse->next->prev = sse->prev;
    --stats.open;
    hangup_stop(sse);
    release_all(sse);
    rl_call_release(sse->call);
    free(sse);
}

static void reap(rl_later_item_t *item)
{
    rl_sse_t *sse = H2O_STRUCT_FROM_MEMBER(rl_sse_t, reap, item);
    void (*on_end)(void *arg, const char *why) = sse->config.on_end;

    if (on_end != NULL) {
        sse->config.on_end = NULL;
        on_end(sse->config.arg, sse->why);
    }
    release_queue(sse);
    if (!sse->released && !sse->sending && sse->call->req != NULL) {
        /* Cut off with no write in flight: no on_proceed will come to end the response, so it ends here. */
        sse->released = 1;
        h2o_send(sse->call->req, NULL, 0, H2O_SEND_STATE_ERROR);
    }
    /* Otherwise a write is in flight: on_proceed or on_stop releases the response and reaps again. */
    if (sse->released)
        destroy(sse);
}

/* A chunk's size line ("1a2\r\n") into out; its length. */
static size_t chunk_size_line(char *out, size_t len)
{
    static const char digits[] = "0123456789abcdef";
    char tmp[2 * sizeof(size_t)];
    size_t n = 0, i;

    do {
        tmp[n++] = digits[len & 15];
        len >>= 4;
    } while (len != 0);
    for (i = 0; i < n; ++i)
        out[i] = tmp[n - 1 - i];
    out[n] = '\r';
    out[n + 1] = '\n';
    return n + 2;
}

static void flush(rl_sse_t *sse)
{
    h2o_iovec_t bufs[MAX_BATCH + 2];
    h2o_req_t *req = sse->call->req;
    size_t n = 0;

    if (sse->sending || req == NULL)
        return;
    while (sse->queue_count > 0 && n < MAX_BATCH) {
        rl_blob_t *frame = sse->queue[sse->queue_head];
        sse->queue_head = (sse->queue_head + 1) % sse->queue_capacity;
        --sse->queue_count;
        sse->queued_bytes -= frame->len;
        sse->inflight[n] = frame;
        bufs[n] = h2o_iovec_init(frame->bytes, frame->len);
        ++n;
    }
    if (n > 0) {
        stats.frames_sent += n;
        sse->ninflight = n;
        sse->sending = 1;
        if (sse->chunked) {
            size_t len = 0, i;
            for (i = 0; i < n; ++i)
                len += bufs[i].len;
            memmove(bufs + 1, bufs, n * sizeof(bufs[0]));
            bufs[0] = h2o_iovec_init(sse->chunk_head, chunk_size_line(sse->chunk_head, len));
            bufs[n + 1] = h2o_iovec_init(H2O_STRLIT("\r\n"));
            n += 2;
        }
        h2o_send(req, bufs, n, H2O_SEND_STATE_IN_PROGRESS);
        return;
    }
    if (sse->ending && !sse->released) {
        /* Everything was written: finish the response. h2o will not call back again. */
        static h2o_iovec_t last = {H2O_STRLIT("0\r\n\r\n")};

        end_once(sse, "closed");
        sse->released = 1;
        h2o_send(req, sse->chunked ? &last : NULL, sse->chunked ? 1 : 0, H2O_SEND_STATE_FINAL);
    }
}

static void on_proceed(h2o_generator_t *generator, h2o_req_t *req)
{
    rl_sse_t *sse = (rl_sse_t *)generator;
    size_t i;

    for (i = 0; i < sse->ninflight; ++i)
        rl_blob_release(sse->inflight[i]);
    sse->ninflight = 0;
    sse->sending = 0;
    if (sse->why != NULL && !sse->ending) {
        /* Cut off while a write was in flight: end the response now that h2o lets us. */
        sse->released = 1;
        h2o_send(req, NULL, 0, H2O_SEND_STATE_ERROR);
        rl_later_add(&reaper, &sse->reap);
        return;
    }
    flush(sse);
    /* The owner may refill a stream that replays at its reader's pace; it may end it, too. */
    if (!sse->sending && sse->queue_count == 0 && sse->why == NULL && sse->config.on_drain != NULL)
        sse->config.on_drain(sse->config.arg);
}

/* h2o is disposing of the request: the client went away or the connection was cut. */
static void on_stop(h2o_generator_t *generator, h2o_req_t *req)
{
    rl_sse_t *sse = (rl_sse_t *)generator;

    end_once(sse, "client gone");
    sse->released = 1;
    /* Already reaped once (cut off, write in flight): the memory goes now that h2o let go. */
    rl_later_add(&reaper, &sse->reap);
}

static void on_heartbeat(h2o_timeout_entry_t *entry)
{
    rl_sse_t *sse = H2O_STRUCT_FROM_MEMBER(rl_sse_t, heartbeat, entry);
    json_t *data = json_pack("{s:I}", "ts", (json_int_t)rl_clock_now_ms());
    rl_blob_t *frame = data != NULL ? rl_event_frame(RL_EVENT_NO_ID, rl_event_name(RL_EV_HEARTBEAT), data) : NULL;
    int result = frame != NULL ? rl_sse_send(sse, frame) : -1;

    if (result == 0)
        ++stats.heartbeats;
    json_decref(data);
    rl_blob_release(frame);
    if (result == 0)
        h2o_timeout_link(sse->call->req->conn->ctx->loop, sse->config.heartbeat, &sse->heartbeat);
}

/*
 * h2o's HTTP/1 reads nothing from a connection while a response lasts, so a
 * reader that hung up would be noticed only at the second write after it
 * (the first is answered with a reset), or at a heartbeat: until then the
 * user counts as watching, and a finished reply is not pushed to them. The
 * stream reads the connection itself, through h2o's socket (no descriptor
 * of its own: a stream costs one, as before): what a client sends after its
 * request is dropped (an event stream has nothing to read, and its
 * connection is never reused, see rl__http_hangup_watch), and the end of
 * the input or an error ends the stream at once. HTTP/2 reads all along and
 * tells h2o itself. A long poll uses the same watch (relay/pairing.c).
 */
static void on_hangup_read(h2o_socket_t *sock, const char *err)
{
    char key[2 * sizeof(void *) + 1];
    rl_http_hangup_t *hangup;

    socket_key(sock, key);
    hangup = hangups != NULL ? rl_strmap_get(hangups, key) : NULL;
    if (hangup == NULL) {
        h2o_socket_read_stop(sock);
        return;
    }
    if (err == NULL) {
        h2o_buffer_consume(&sock->input, sock->input->size);
        return;
    }
    rl__http_hangup_stop(hangup);
    hangup->on_gone(hangup);
}

int rl__http_hangup_watch(rl_http_hangup_t *hangup, h2o_req_t *req, void (*on_gone)(rl_http_hangup_t *hangup))
{
    h2o_socket_t *sock = req->version < 0x200 ? conn_socket(req) : NULL;
    char key[2 * sizeof(void *) + 1];

    hangup->sock = NULL;
    hangup->on_gone = on_gone;
    if (sock == NULL)
        return -1;
    if (hangups == NULL && (hangups = rl_strmap_new(SIZE_MAX)) == NULL)
        return -1;
    socket_key(sock, key);
    if (rl_strmap_put(hangups, key, hangup) != 0)
        return -1;
    /* What the watch reads is gone for h2o: no request may follow on this connection. */
    req->http1_is_persistent = 0;
    hangup->sock = sock;
    h2o_socket_read_start(sock, on_hangup_read);
    return 0;
}

static void on_stream_hangup(rl_http_hangup_t *hangup)
{
    rl_sse_t *sse = H2O_STRUCT_FROM_MEMBER(rl_sse_t, hangup, hangup);

    end_once(sse, "client gone");
    release_queue(sse);
    /* A write in flight fails now rather than at the peer's reset; with none, reap ends the response. */
    if (sse->call->req != NULL)
        (void)rl__http_conn_shutdown(sse->call->req);
}

static void hangup_start(rl_sse_t *sse, h2o_req_t *req)
{
    (void)rl__http_hangup_watch(&sse->hangup, req, on_stream_hangup);
}

rl_sse_t *rl_sse_start(rl_call_t *call, const rl_sse_config_t *config)
{
    h2o_req_t *req = call->req;
    rl_sse_t *sse;

    if (!rl_call_alive(call))
        return NULL;
    sse = calloc(1, sizeof(*sse));
    if (sse == NULL)
        return NULL;
    if (reaper_loop == NULL) {
        reaper_loop = req->conn->ctx->loop;
        rl_later_init(&reaper, reaper_loop);
    }
    sse->reap.run = reap;
    sse->generator.proceed = on_proceed;
    sse->generator.stop = on_stop;
    sse->next = live;
    if (live != NULL)
        live->prev = sse;
    live = sse;
    ++stats.open;
    ++stats.opened;
    sse->call = call;
    rl_call_hold(call);
    sse->config = *config;
    call->responded = 1;
    call->status = 200;

    req->res.status = 200;
    req->res.reason = "OK";
    req->res.content_length = SIZE_MAX;
    /* Compression would hold events back until a block fills up. */
    req->compress_hint = H2O_COMPRESS_HINT_DISABLE;
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL,
                   H2O_STRLIT("text/event-stream; charset=utf-8"));
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL, H2O_STRLIT("no-cache"));
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("x-accel-buffering"), 0, NULL, H2O_STRLIT("no"));
    /* A response that names its transfer coding is left alone by h2o's chunked encoder: flush frames it. */
    if (req->version == 0x101) {
        sse->chunked = 1;
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_TRANSFER_ENCODING, NULL, H2O_STRLIT("chunked"));
    }
    rl__call_common_headers(call);
    rl__call_log(call);
    hangup_start(sse, req);
    h2o_start_response(req, &sse->generator);
    if (config->heartbeat != NULL)
        h2o_timeout_link(req->conn->ctx->loop, config->heartbeat, &sse->heartbeat);
    sse->heartbeat.cb = on_heartbeat;
    return sse;
}

static void cut_off(rl_sse_t *sse)
{
    rl_log_fields(RL_LOG_WARN, json_pack("{s:s, s:s, s:I, s:I}", "msg", "event stream cut off: reader too slow",
                                         "request_id", sse->call->request_id, "queued_frames",
                                         (json_int_t)sse->queue_count, "queued_bytes", (json_int_t)sse->queued_bytes));
    ++stats.cut_off;
    end_once(sse, "too slow");
    release_queue(sse);
    /*
     * The write in flight is stuck on a peer that does not read; only cutting
     * the connection gets h2o to give the request back (on_stop). When the
     * connection cannot be found, on_proceed ends the response instead.
     */
    if (sse->call->req != NULL && rl__http_conn_shutdown(sse->call->req) != 0)
        rl_log_warn("could not cut the connection of a slow event stream; it ends at its next write");
}

int rl_sse_send(rl_sse_t *sse, rl_blob_t *frame)
{
    if (sse->why != NULL || sse->ending)
        return -1;
    if (sse->queue_count + 1 > sse->config.max_queued_frames ||
        sse->queued_bytes + frame->len > sse->config.max_queued_bytes) {
        cut_off(sse);
        return -1;
    }
    if (sse->queue_count == sse->queue_capacity) {
        size_t capacity = sse->queue_capacity == 0 ? 8 : sse->queue_capacity * 2, i;
        rl_blob_t **queue = malloc(capacity * sizeof(*queue));
        if (queue == NULL) {
            cut_off(sse);
            return -1;
        }
        for (i = 0; i < sse->queue_count; ++i)
            queue[i] = sse->queue[(sse->queue_head + i) % sse->queue_capacity];
        free(sse->queue);
        sse->queue = queue;
        sse->queue_head = 0;
        sse->queue_capacity = capacity;
    }
    sse->queue[(sse->queue_head + sse->queue_count) % sse->queue_capacity] = rl_blob_retain(frame);
    ++sse->queue_count;
    sse->queued_bytes += frame->len;
    flush(sse);
    return 0;
}

int rl_sse_send_text(rl_sse_t *sse, const char *text, size_t len)
{
    rl_blob_t *frame = rl_blob_new(text, len);
    int result;

    if (frame == NULL)
        return -1;
    result = rl_sse_send(sse, frame);
    rl_blob_release(frame);
    return result;
}

size_t rl_sse_queued_bytes(const rl_sse_t *sse)
{
    return sse->queued_bytes;
}

void rl_sse_end(rl_sse_t *sse)
{
    if (sse->why != NULL || sse->ending)
        return;
    sse->ending = 1;
    flush(sse);
}

void rl_sse_end_all(void)
{
    rl_sse_t *sse, *next;

    for (sse = live; sse != NULL; sse = next) {
        next = sse->next;
        rl_sse_end(sse);
    }
}

void rl_sse_stats(rl_sse_stats_t *out)
{
    *out = stats;
}
