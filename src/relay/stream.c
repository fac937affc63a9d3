/*
 * GET /v1/me/stream: the user's events as Server-Sent Events. hello on
 * connect; with Last-Event-ID, exactly what followed it, or resync when that
 * is no longer buffered; then live events and heartbeats.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "http/sse.h"
#include "relay/relay.h"

/* A reader this far behind is cut off; it resumes with Last-Event-ID. */
#define STREAM_MAX_FRAMES 4096
#define STREAM_MAX_BYTES (8 * 1024 * 1024)

struct stream {
    rl_bus_subscriber_t subscriber;
    rl_relay_t *relay;
    rl_sse_t *sse;
    int subscribing; /* inside rl_bus_subscribe: freeing must wait */
    int ended;
};

static void deliver(rl_bus_subscriber_t *subscriber, int64_t id, rl_blob_t *frame)
{
    struct stream *stream = H2O_STRUCT_FROM_MEMBER(struct stream, subscriber, subscriber);

    /* The stream may be gone after this call (cut off): nothing touches it afterwards. */
    if (!stream->ended)
        rl_sse_send(stream->sse, frame);
}

static void on_end(void *arg, const char *why)
{
    struct stream *stream = arg;

    stream->ended = 1;
    stream->sse = NULL;
    rl_bus_unsubscribe(stream->relay->bus, &stream->subscriber);
    if (!stream->subscribing)
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
    int has_last = 0, resume, bad_last = 0;
    const char *header;
    size_t header_len;
    char text[256];
    int len;

    if (stream == NULL)
        return RL_E_INTERNAL;
    header = rl_call_header(call, "last-event-id", &header_len);
    if (header != NULL) {
        has_last = 1;
        bad_last = parse_last_event_id(header, header_len, &last_id) != 0;
    }
    stream->relay = relay;
    stream->subscriber.deliver = deliver;
    config.max_queued_frames = STREAM_MAX_FRAMES;
    config.max_queued_bytes = STREAM_MAX_BYTES;
    config.heartbeat = &relay->heartbeat_timeout;
    config.on_end = on_end;
    config.arg = stream;
    stream->sse = rl_sse_start(call, &config);
    if (stream->sse == NULL) {
        free(stream);
        return 0;
    }
    len = snprintf(text, sizeof(text), "event: hello\ndata: {\"user_id\":\"%s\",\"ts\":%lld,\"heartbeat_ms\":%lld}\n\n",
                   call->principal, (long long)rl_clock_now_ms(), (long long)relay->config.sse_heartbeat);
    if (rl_sse_send_text(stream->sse, text, (size_t)len) != 0)
        return 0;

    stream->subscribing = 1;
    resume = rl_bus_subscribe(relay->bus, call->principal, has_last && !bad_last, last_id, &stream->subscriber,
                              &newest);
    stream->subscribing = 0;
    if (stream->ended) {
        free(stream);
        return 0;
    }
    if (resume < 0) {
        rl_sse_end(stream->sse);
        return 0;
    }
    if (resume == RL_BUS_GAP || bad_last) {
        /* brief: when Last-Event-ID is older than the buffer, say so; the client fetches the snapshot. */
        len = snprintf(text, sizeof(text),
                       "id: %lld\nevent: resync\ndata: {\"reason\":\"buffer_gap\",\"snapshot\":\"/v1/me/snapshot\"}\n\n",
                       (long long)newest);
        rl_sse_send_text(stream->sse, text, (size_t)len);
    }
    return 0;
}
