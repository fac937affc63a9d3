/*
 * GET /v1/me/stream: the user's events as Server-Sent Events. hello on
 * connect; with Last-Event-ID, exactly what followed it, or resync when that
 * is no longer buffered; then live events and heartbeats.
 *
 * Ids of a user's events are consecutive, so a stream always knows whether
 * it missed one: it keeps a cursor (the last id it sent) and sends a live
 * event only when it is the next one. Whenever it is behind (a resume, or a
 * live event that skipped ids because the bus delivered out of step with a
 * read), it pulls the missing events from the user's ring on the bus, at its
 * reader's pace: the next batch only once its queue has drained below a
 * low-water mark. So any backlog the ring holds can be replayed to a slow
 * client without overflowing its queue, the frames sent are the ring's own,
 * and a bus that delivers from another node cannot reorder or skip events.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/event.h"
#include "common/event_names.h"
#include "http/sse.h"
#include "relay/core/hub.h"
#include "relay/core/feature.h"
#include "relay/identity/identity.h"
#include "relay/identity/stream.h"

/* A reader this far behind on live events is cut off; it resumes with Last-Event-ID. */
#define STREAM_MAX_FRAMES 4096
#define STREAM_MAX_BYTES  (8 * 1024 * 1024)
/* While catching up, the queue is refilled from the ring up to about this much. */
#define REPLAY_LOW_WATER (256 * 1024)
#define READ_BATCH       64

struct stream {
    rl_hub_subscriber_t subscriber;
    rl_hub_t *hub;
    rl_sse_t *sse;
    char user_id[RL_PRINCIPAL_MAX + 1];
    int64_t cursor;    /* the last event id sent; unknown (-1) until the first one */
    int64_t live_seen; /* the highest live id seen while behind */
    int catching_up;   /* events after cursor are to be read from the ring */
    int reading;       /* a ring read is in flight (one at a time) */
    /*
     * The SSE stream holds one reference until its on_end, which runs after
     * the loop turn in which it ended (never inside a send or a delivery);
     * a ring read in flight holds another, since the bus answers it later.
     */
    unsigned refs;
};

static void stream_release(struct stream *stream)
{
    if (--stream->refs == 0)
        free(stream);
}

static int send_resync(struct stream *stream, int64_t newest)
{
    json_t *data = json_pack("{s:s, s:s}", "reason", "buffer_gap", "snapshot", "/v1/me/snapshot");
    rl_blob_t *frame = data != NULL ? rl_event_frame(newest, rl_event_name(RL_EV_RESYNC), data) : NULL;
    int result;

    json_decref(data);
    stream->cursor = newest;
    result = frame != NULL ? rl_sse_send(stream->sse, frame) : -1;
    rl_blob_release(frame);
    return result;
}

static void pull(struct stream *stream);

static void on_read(int result, const rl_bus_read_t *read, void *arg)
{
    struct stream *stream = arg;
    size_t i;

    stream->reading = 0;
    /* The stream ended while the read was in flight: only the read's reference is left to drop. */
    if (stream->sse == NULL)
        goto out;
    if (result != 0) {
        /* The ring cannot be read now: end the stream; the client resumes from its cursor. */
        rl_sse_end(stream->sse);
        goto out;
    }
    if (read->gap) {
        /* brief: the ring moved on (or never held that id): say so, and go on from the newest event. */
        stream->catching_up = 0;
        send_resync(stream, read->newest);
    } else {
        for (i = 0; i < read->count; ++i) {
            if (read->events[i].id <= stream->cursor)
                continue;
            stream->cursor = read->events[i].id;
            if (rl_sse_send(stream->sse, read->events[i].frame) != 0)
                goto out;
        }
    }
    if (!stream->catching_up)
        goto out;
    if (read->count < READ_BATCH && stream->cursor >= read->newest && stream->cursor >= stream->live_seen) {
        stream->catching_up = 0;
        goto out;
    }
    if (rl_sse_queued_bytes(stream->sse) < REPLAY_LOW_WATER)
        pull(stream);
out:
    stream_release(stream);
}

/* Reads the next batch after the cursor; one read at a time. */
static void pull(struct stream *stream)
{
    if (stream->reading || stream->sse == NULL)
        return;
    stream->reading = 1;
    ++stream->refs;
    rl_bus_read(rl_hub_bus(stream->hub), stream->user_id, stream->cursor, READ_BATCH, on_read, stream);
}

static void deliver(rl_hub_subscriber_t *subscriber, int64_t id, rl_blob_t *frame)
{
    struct stream *stream = H2O_STRUCT_FROM_MEMBER(struct stream, subscriber, subscriber);

    if (stream->sse == NULL || (stream->cursor >= 0 && id <= stream->cursor))
        return;
    if (stream->catching_up || (stream->cursor >= 0 && id != stream->cursor + 1)) {
        /* Behind: the ring has this one too, and everything before it. */
        if (id > stream->live_seen)
            stream->live_seen = id;
        if (!stream->catching_up) {
            stream->catching_up = 1;
            pull(stream);
        }
        return;
    }
    stream->cursor = id;
    rl_sse_send(stream->sse, frame);
}

static void on_drain(void *arg)
{
    struct stream *stream = arg;

    if (stream->catching_up)
        pull(stream);
}

static void on_end(void *arg, const char *why)
{
    struct stream *stream = arg;

    /* Runs after the loop turn in which the stream ended, outside any delivery of the hub. */
    stream->sse = NULL;
    rl_hub_unsubscribe(stream->hub, &stream->subscriber);
    stream_release(stream);
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
    const rl_identity_t *identity = rl_feature_of(call, RL_FEATURE_IDENTITY);
    struct stream *stream = calloc(1, sizeof(*stream));
    rl_sse_config_t config = {0};
    int64_t last_id = 0;
    int has_last = 0, sent;
    const char *header;
    size_t header_len;
    json_t *hello;
    rl_blob_t *frame;

    if (stream == NULL)
        return RL_E_INTERNAL;
    header = rl_call_header(call, "last-event-id", &header_len);
    if (header != NULL) {
        has_last = 1;
        /* An id that cannot be ours is resumed from 0, which the ring answers with a gap: resync. */
        if (parse_last_event_id(header, header_len, &last_id) != 0)
            last_id = 0;
    }
    stream->refs = 1;
    stream->hub = identity->ctx.hub;
    stream->subscriber.deliver = deliver;
    stream->cursor = -1;
    stream->live_seen = -1;
    snprintf(stream->user_id, sizeof(stream->user_id), "%s", call->principal);
    config.max_queued_frames = STREAM_MAX_FRAMES;
    config.max_queued_bytes = STREAM_MAX_BYTES;
    config.heartbeat = identity->ctx.heartbeat;
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
                      "heartbeat_ms", (json_int_t)identity->ctx.config->sse_heartbeat);
    frame = hello != NULL ? rl_event_frame(RL_EVENT_NO_ID, rl_event_name(RL_EV_HELLO), hello) : NULL;
    json_decref(hello);
    if (frame == NULL) {
        rl_sse_end(stream->sse);
        return 0;
    }
    sent = rl_sse_send(stream->sse, frame);
    rl_blob_release(frame);
    if (sent != 0)
        return 0;
    if (rl_hub_subscribe(identity->ctx.hub, call->principal, &stream->subscriber) != 0) {
        rl_sse_end(stream->sse);
        return 0;
    }
    /* Without Last-Event-ID the stream starts with the next event, whatever its id. */
    if (has_last) {
        stream->cursor = last_id;
        stream->catching_up = 1;
        pull(stream);
    }
    return 0;
}
