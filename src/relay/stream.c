/*
 * GET /v1/me/stream: the user's events as Server-Sent Events. hello on
 * connect; with Last-Event-ID, exactly what followed it, or resync when that
 * is no longer buffered; then live events and heartbeats.
 *
 * A resuming stream replays at its reader's pace: it pulls the next events
 * from the user's ring whenever its queue has drained below a low-water mark,
 * and only switches to live delivery once it has caught up. So any backlog
 * the ring holds can be replayed to a slow client without overflowing its
 * queue, and the frames replayed are the ring's own, shared, not copies.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "http/sse.h"
#include "relay/relay.h"

/* A reader this far behind on live events is cut off; it resumes with Last-Event-ID. */
#define STREAM_MAX_FRAMES 4096
#define STREAM_MAX_BYTES  (8 * 1024 * 1024)
/* While catching up, the queue is refilled from the ring up to about this much. */
#define REPLAY_LOW_WATER (256 * 1024)

struct stream {
    rl_bus_subscriber_t subscriber;
    rl_relay_t *relay;
    rl_sse_t *sse;
    char user_id[RL_PRINCIPAL_MAX + 1];
    int64_t cursor;  /* the last event id handed to the stream */
    int catching_up; /* events after cursor are still to be pulled from the ring */
    int pumping;     /* inside pump(): the stream may end meanwhile, freeing waits */
    int ended;
};

static int send_resync(struct stream *stream, int64_t newest)
{
    json_t *data = json_pack("{s:s, s:s}", "reason", "buffer_gap", "snapshot", "/v1/me/snapshot");
    rl_blob_t *frame = data != NULL ? rl_sse_frame_new(newest, "resync", data) : NULL;
    int result;

    json_decref(data);
    /* Before sending: a stream cut off inside rl_sse_send may be freed by then. */
    stream->cursor = newest;
    result = frame != NULL ? rl_sse_send(stream->sse, frame) : -1;
    rl_blob_release(frame);
    return result;
}

/* Pulls from the ring while the queue has room; switches to live delivery once caught up. */
static void pump(struct stream *stream)
{
    rl_bus_t *bus = stream->relay->bus;

    stream->pumping = 1;
    while (!stream->ended && stream->catching_up && rl_sse_queued_bytes(stream->sse) < REPLAY_LOW_WATER) {
        rl_blob_t *frame;
        int64_t id, newest;
        switch (rl_bus_next(bus, stream->user_id, stream->cursor, &id, &frame)) {
        case RL_BUS_EVENT:
            stream->cursor = id;
            rl_sse_send(stream->sse, frame);
            break;
        case RL_BUS_CAUGHT_UP:
            stream->catching_up = 0;
            break;
        case RL_BUS_LOST:
            /* The ring moved on faster than this reader: say so, and go on from the newest event. */
            stream->catching_up = 0;
            rl_bus_subscribe_position(bus, stream->user_id, &newest);
            send_resync(stream, newest);
            break;
        }
    }
    stream->pumping = 0;
    if (stream->ended)
        free(stream);
}

static void deliver(rl_bus_subscriber_t *subscriber, int64_t id, rl_blob_t *frame)
{
    struct stream *stream = H2O_STRUCT_FROM_MEMBER(struct stream, subscriber, subscriber);

    /* While catching up, live events wait in the ring and are pulled in order. */
    if (stream->ended || stream->catching_up)
        return;
    stream->cursor = id;
    /* The stream may be gone after this call (cut off): nothing touches it afterwards. */
    rl_sse_send(stream->sse, frame);
}

static void on_drain(void *arg)
{
    struct stream *stream = arg;

    if (stream->catching_up)
        pump(stream);
}

static void on_end(void *arg, const char *why)
{
    struct stream *stream = arg;

    stream->ended = 1;
    stream->sse = NULL;
    rl_bus_unsubscribe(stream->relay->bus, &stream->subscriber);
    if (!stream->pumping)
        free(stream);
}

/* Last-Event-ID is one of our decimal ids; anything else cannot be resumed. */
static int parse_last_event_id(const char *value, size_t len, int64_t *id)
{
    int64_t n = 0;
    size_t i;

    if (len == 0 || len > 18)
        return -1;
    for (i = 0; i < len; ++i) {
        if (value[i] < '0' || value[i] > '9')
            return -1;
        n = n * 10 + (value[i] - '0');
    }
    *id = n;
    return 0;
}

int rl_stream_open(rl_call_t *call)
{
    rl_relay_t *relay = call->app;
    struct stream *stream = calloc(1, sizeof(*stream));
    rl_sse_config_t config = {0};
    int64_t last_id = 0, newest = 0;
    int has_last = 0, resumable = 0, sent;
    const char *header;
    size_t header_len;
    json_t *hello;
    rl_blob_t *frame;

    if (stream == NULL)
        return RL_E_INTERNAL;
    header = rl_call_header(call, "last-event-id", &header_len);
    if (header != NULL) {
        has_last = 1;
        resumable = parse_last_event_id(header, header_len, &last_id) == 0 &&
                    rl_bus_resume(relay->bus, call->principal, last_id) == RL_BUS_RESUMED;
    }
    stream->relay = relay;
    stream->subscriber.deliver = deliver;
    snprintf(stream->user_id, sizeof(stream->user_id), "%s", call->principal);
    config.max_queued_frames = STREAM_MAX_FRAMES;
    config.max_queued_bytes = STREAM_MAX_BYTES;
    config.heartbeat = &relay->heartbeat_timeout;
    config.on_end = on_end;
    config.on_drain = on_drain;
    config.arg = stream;
    stream->sse = rl_sse_start(call, &config);
    if (stream->sse == NULL) {
        free(stream);
        return 0;
    }
    /* The user id is the token's subject: it goes through the JSON encoder like every other string. */
    hello = json_pack("{s:s, s:I, s:I}", "user_id", call->principal, "ts", (json_int_t)rl_clock_now_ms(),
                      "heartbeat_ms", (json_int_t)relay->config.sse_heartbeat);
    frame = hello != NULL ? rl_sse_frame_new(RL_SSE_NO_ID, "hello", hello) : NULL;
    json_decref(hello);
    if (frame == NULL) {
        rl_sse_end(stream->sse);
        return 0;
    }
    sent = rl_sse_send(stream->sse, frame);
    rl_blob_release(frame);
    if (sent != 0)
        return 0;
    if (rl_bus_subscribe(relay->bus, call->principal, &stream->subscriber, &newest) != 0) {
        rl_sse_end(stream->sse);
        return 0;
    }
    if (has_last && !resumable) {
        /* brief: when Last-Event-ID is older than the buffer, say so; the client fetches the snapshot. */
        send_resync(stream, newest);
    } else if (has_last) {
        stream->cursor = last_id;
        stream->catching_up = 1;
        pump(stream);
    } else {
        stream->cursor = newest;
    }
    return 0;
}
