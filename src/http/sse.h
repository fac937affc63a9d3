/*
 * A Server-Sent Events response on one call (text/event-stream, never
 * compressed, never buffered by proxies). Frames are reference-counted blobs
 * (records built by common/event.h) shared with other streams; each stream queues at most a fixed number of
 * frames and bytes, and a reader that falls that far behind is cut off (it
 * can resume with Last-Event-ID) so that it never slows anyone else down.
 * Loop thread only.
 */
#ifndef RL_HTTP_SSE_H
#define RL_HTTP_SSE_H

#include <h2o.h>
#include <jansson.h>
#include <stdint.h>

#include "common/blob.h"
#include "http/call.h"

typedef struct rl_sse rl_sse_t;

typedef struct rl_sse_config {
    size_t max_queued_frames;
    size_t max_queued_bytes;
    /* Shared timeout list whose duration is the heartbeat interval, or NULL for none. */
    h2o_timeout_t *heartbeat;
    /*
     * Called once when the stream has ended for any reason (the client went
     * away, it was cut off, or rl_sse_end finished), after the loop turn in
     * which it ended: never inside rl_sse_send, rl_sse_end or any other call
     * of the owner's. Until then the stream is still there and refuses
     * sends. The owner drops its pointer in on_end; the stream must not be
     * used after on_end returns.
     */
    void (*on_end)(void *arg, const char *why);
    /* Optional: called when everything queued has been handed to the connection. */
    void (*on_drain)(void *arg);
    void *arg;
} rl_sse_config_t;

/*
 * Answers the call with 200 text/event-stream and returns the stream, or
 * NULL when the client is already gone. The config is copied.
 */
rl_sse_t *rl_sse_start(rl_call_t *call, const rl_sse_config_t *config);
/*
 * Queues a frame (retained). Returns 0, or -1 when the stream has ended or
 * this frame overflowed its queue and it was cut off (on_end follows after
 * the loop turn; the stream stays valid until then).
 */
int rl_sse_send(rl_sse_t *sse, rl_blob_t *frame);
/* Queues a copy of text as a frame; as rl_sse_send. */
int rl_sse_send_text(rl_sse_t *sse, const char *text, size_t len);
/* Bytes queued and not yet handed to the connection. */
size_t rl_sse_queued_bytes(const rl_sse_t *sse);
/* Ends the stream after what is queued has been written (on_end after the loop turn that finishes it). */
void rl_sse_end(rl_sse_t *sse);
/*
 * A graceful stop: every live stream ends as rl_sse_end ends one (what is
 * queued is written, then the response finishes cleanly, so that clients
 * reconnect with Last-Event-ID rather than see an error).
 */
void rl_sse_end_all(void);

/* What the streams of this process have done, for the metrics. */
typedef struct rl_sse_stats {
    size_t open;          /* streams now */
    uint64_t opened;      /* streams started */
    uint64_t frames_sent; /* events and heartbeats handed to connections */
    uint64_t heartbeats;  /* heartbeats queued */
    uint64_t cut_off;     /* streams cut off because their reader fell behind */
} rl_sse_stats_t;
void rl_sse_stats(rl_sse_stats_t *out);

/*
 * Cuts the connection that carries req (both directions), so that h2o
 * notices on its own and disposes of every request on it. Used where h2o
 * 2.2.5 offers no way to abort a response whose write is stuck. Returns 0,
 * or -1 when the connection could not be identified safely.
 */
int rl__http_conn_shutdown(h2o_req_t *req);

/*
 * h2o's HTTP/1 reads nothing from a connection while a response lasts, so a
 * client that hung up would be noticed only at the first write after it.
 * A request that holds its answer (an event stream, a long poll) reads the
 * connection itself, through h2o's socket: what the client sends after its
 * request is dropped (the connection is then never reused), and the end of
 * the input or an error calls on_gone once, on the loop, the watch already
 * stopped. HTTP/2 reads all along and tells h2o itself (the request is
 * disposed of).
 */
typedef struct rl_http_hangup rl_http_hangup_t;
struct rl_http_hangup {
    h2o_socket_t *sock; /* NULL while not watching */
    void (*on_gone)(rl_http_hangup_t *hangup);
};
/* Watches req's connection: 0, or -1 when it is not watched (HTTP/2, or the connection not identified safely). */
int rl__http_hangup_watch(rl_http_hangup_t *hangup, h2o_req_t *req, void (*on_gone)(rl_http_hangup_t *hangup));
/* Stops watching (nothing when not watching): before the response is finished or the request released. */
void rl__http_hangup_stop(rl_http_hangup_t *hangup);

#endif
