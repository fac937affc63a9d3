/*
 * The client core's Server-Sent Events reader, in two layers:
 *
 *   - rl_sse_parser: the EventSource wire format (lines ended by CRLF, LF or
 *     CR; `id:`, `event:`, `data:`, `retry:` and `:` comments; an event is
 *     dispatched on a blank line), fed arbitrary chunks. Every buffer has a
 *     cap fixed at creation, so a peer cannot make it grow without bound.
 *   - rl_sse_stream: a libcurl streaming GET that feeds a parser, keeps the
 *     last event id and reconnects with `Last-Event-ID` after a drop, with
 *     the spec's backoff (1 s doubling to a 30 s cap, reset after a
 *     successful open) and an idle timeout that the caller sets from the
 *     server's heartbeat interval. It is driven from the caller's loop
 *     (rl_sse_stream_wait), so that a program can watch its own file
 *     descriptors (a terminal, a signal pipe) at the same time.
 *
 * Neither layer is thread-safe; use one from one thread.
 */
#ifndef RL_CLIENT_SSE_H
#define RL_CLIENT_SSE_H

#include <stddef.h>

#define RL_SSE_ID_MAX    256 /* longest id kept; a longer one is ignored, as one holding NUL */
#define RL_SSE_EVENT_MAX 128 /* longest event name kept; a longer one is truncated */

typedef enum rl_sse_error {
    RL_SSE_OK = 0,
    RL_SSE_E_TOO_LARGE = -1, /* a line or an event's data passed its cap */
    RL_SSE_E_NOMEM = -2,
    RL_SSE_E_USAGE = -3,   /* bad options */
    RL_SSE_E_REFUSED = -4, /* the server answered the stream with a final 4xx (401, 403, 404, 410) */
    RL_SSE_E_GAVE_UP = -5, /* max_attempts consecutive failed connections */
} rl_sse_error_t;

/* One dispatched event. Strings are NUL-terminated and live until the callback returns. */
typedef struct rl_sse_event {
    const char *id;    /* the last event id after this event ("" when none was ever set) */
    int has_id;        /* this event carried an `id:` field itself */
    const char *event; /* the event type; "message" when the event named none */
    const char *data;  /* data lines joined by '\n' */
    size_t data_len;
} rl_sse_event_t;

typedef void (*rl_sse_on_event_t)(void *user, const rl_sse_event_t *event);

typedef struct rl_sse_parser {
    rl_sse_on_event_t on_event;
    void *user;
    size_t max_line, max_data;
    char *line; /* the line being read, max_line + 1 bytes */
    size_t line_len;
    char *data; /* the data of the event being read, max_data + 1 bytes */
    size_t data_len;
    int has_data; /* a data field was seen (it may be empty) */
    int has_id;
    int after_cr; /* the previous byte ended a line with CR: a following LF belongs to it */
    char event[RL_SSE_EVENT_MAX];
    char last_id[RL_SSE_ID_MAX];
    long retry_ms; /* the last `retry:` field, or -1 */
} rl_sse_parser_t;

/*
 * Prepares a parser: lines longer than max_line bytes and events whose data
 * is longer than max_data bytes are errors (0 picks 64 KiB and 1 MiB).
 * on_event is called for each complete event. Returns 0 or RL_SSE_E_NOMEM.
 */
int rl_sse_parser_init(rl_sse_parser_t *parser, size_t max_line, size_t max_data, rl_sse_on_event_t on_event,
                       void *user);
void rl_sse_parser_free(rl_sse_parser_t *parser);
/*
 * Feeds len bytes. Returns 0, or RL_SSE_E_TOO_LARGE once a cap was passed
 * (the parser is then reset: what was being read is dropped, the last id
 * kept). Events complete in buf are dispatched before it returns.
 */
int rl_sse_parser_feed(rl_sse_parser_t *parser, const char *buf, size_t len);
/* Drops a partly read line and event (a connection ended), keeping the last id. */
void rl_sse_parser_reset(rl_sse_parser_t *parser);

/* ---- the reconnecting stream ---- */

typedef enum rl_sse_state {
    RL_SSE_CONNECTED,    /* the server answered 200: events follow */
    RL_SSE_DISCONNECTED, /* the connection ended or failed; a reconnect is scheduled */
} rl_sse_state_t;

/* status: the HTTP status of the last answer (0 when none); why: for people. */
typedef void (*rl_sse_on_state_t)(void *user, rl_sse_state_t state, long status, const char *why, long reconnect_in_ms);

typedef struct rl_sse_options {
    const char *url;            /* the full URL of the stream */
    const char *const *headers; /* "Name: value" lines, NULL-terminated, or NULL (Authorization goes here) */
    const char *last_event_id;  /* sent on the first connection too, or NULL */
    long connect_timeout_ms;    /* 0: 5 s */
    long idle_timeout_ms;       /* nothing read for this long ends the connection; 0: 60 s */
    long backoff_initial_ms;    /* 0: 1 s (spec: reconnect backoff) */
    long backoff_max_ms;        /* 0: 30 s */
    int max_attempts;           /* consecutive failed connections before giving up; 0: never give up */
    size_t max_line, max_data;  /* parser caps, 0 for the defaults */
    const char *user_agent;     /* NULL: "relay-client" */
    rl_sse_on_event_t on_event;
    rl_sse_on_state_t on_state; /* may be NULL */
    void *user;
} rl_sse_options_t;

typedef struct rl_sse_stream rl_sse_stream_t;

/* Copies options (strings included). Returns 0, RL_SSE_E_USAGE or RL_SSE_E_NOMEM. Connects on the first wait.
 */
int rl_sse_stream_new(const rl_sse_options_t *options, rl_sse_stream_t **out);
void rl_sse_stream_free(rl_sse_stream_t *stream);

/*
 * Runs the stream for at most timeout_ms (0 returns after one round of
 * work without waiting): reads, dispatches events through on_event and
 * state changes through on_state, reconnects when it is time. It returns
 * early when one of the nfds descriptors in fds becomes readable; bit i of
 * *ready (when ready is not NULL) is then set for fds[i] (at most 32 fds).
 * Returns 0, or a negative rl_sse_error_t when the stream is over for good
 * (RL_SSE_E_REFUSED: the server refused it; see rl_sse_stream_status).
 * A signal interrupting the wait returns 0.
 */
int rl_sse_stream_wait(rl_sse_stream_t *stream, const int *fds, int nfds, long timeout_ms, unsigned *ready);

/* Changes the idle timeout, say to twice the heartbeat the server announced. Applies at once. */
void rl_sse_stream_set_idle_timeout(rl_sse_stream_t *stream, long idle_timeout_ms);
/* The last event id seen ("" when none), which the next connection sends as Last-Event-ID. */
const char *rl_sse_stream_last_id(const rl_sse_stream_t *stream);
/* Whether a connection is open and answered 200. */
int rl_sse_stream_connected(const rl_sse_stream_t *stream);
/* The X-Request-ID of the last answer ("" when none), to log with an error. */
const char *rl_sse_stream_request_id(const rl_sse_stream_t *stream);
/* The status of the last answer (0 when none), and its body when it was an error ("" otherwise). */
long rl_sse_stream_status(const rl_sse_stream_t *stream, const char **error_body);

#endif
