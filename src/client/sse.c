/*
 * The SSE reader of the client core: the EventSource parser, and a
 * reconnecting libcurl stream around it. See sse.h.
 */
#include "client/sse.h"
#include "client/client.h"
#include "client/backoff.h"
#include "common/clock.h"

#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define DEFAULT_MAX_LINE (64u * 1024u)
#define DEFAULT_MAX_DATA (1024u * 1024u)
#define ERROR_BODY_MAX   4096
#define MAX_WAIT_FDS     32

/* ---- the parser ---- */

int rl_sse_parser_init(rl_sse_parser_t *parser, size_t max_line, size_t max_data, rl_sse_on_event_t on_event,
                       void *user)
{
    memset(parser, 0, sizeof(*parser));
    parser->max_line = max_line != 0 ? max_line : DEFAULT_MAX_LINE;
    parser->max_data = max_data != 0 ? max_data : DEFAULT_MAX_DATA;
    parser->on_event = on_event;
    parser->user = user;
    parser->retry_ms = -1;
    parser->line = malloc(parser->max_line + 1);
    parser->data = malloc(parser->max_data + 1);
    if (parser->line == NULL || parser->data == NULL) {
        rl_sse_parser_free(parser);
        return RL_SSE_E_NOMEM;
    }
    return RL_SSE_OK;
}

void rl_sse_parser_free(rl_sse_parser_t *parser)
{
    free(parser->line);
    free(parser->data);
    parser->line = NULL;
    parser->data = NULL;
}

void rl_sse_parser_reset(rl_sse_parser_t *parser)
{
    parser->line_len = 0;
    parser->data_len = 0;
    parser->has_data = 0;
    parser->has_id = 0;
    parser->after_cr = 0;
    parser->event[0] = '\0';
}

static void dispatch(rl_sse_parser_t *parser)
{
    rl_sse_event_t event;

    /* EventSource: an event without any data line is not dispatched; its id still counts. */
    if (parser->has_data) {
        if (parser->data_len > 0 && parser->data[parser->data_len - 1] == '\n')
            parser->data_len--;
        parser->data[parser->data_len] = '\0';
        event.id = parser->last_id;
        event.has_id = parser->has_id;
        event.event = parser->event[0] != '\0' ? parser->event : "message";
        event.data = parser->data;
        event.data_len = parser->data_len;
        if (parser->on_event != NULL)
            parser->on_event(parser->user, &event);
    }
    parser->data_len = 0;
    parser->has_data = 0;
    parser->has_id = 0;
    parser->event[0] = '\0';
}

static int is_field(const char *name, size_t len, const char *field)
{
    return strlen(field) == len && memcmp(name, field, len) == 0;
}

static int process_line(rl_sse_parser_t *parser)
{
    const char *line = parser->line, *value, *colon;
    size_t len = parser->line_len, name_len, value_len;

    if (len == 0) {
        dispatch(parser);
        return RL_SSE_OK;
    }
    if (line[0] == ':')
        return RL_SSE_OK;
    colon = memchr(line, ':', len);
    if (colon != NULL) {
        name_len = (size_t)(colon - line);
        value = colon + 1;
        value_len = len - name_len - 1;
        if (value_len > 0 && value[0] == ' ') {
            value++;
            value_len--;
        }
    } else {
        name_len = len;
        value = line + len;
        value_len = 0;
    }
    if (is_field(line, name_len, "data")) {
        if (parser->data_len + value_len + 1 > parser->max_data)
            return RL_SSE_E_TOO_LARGE;
        memcpy(parser->data + parser->data_len, value, value_len);
        parser->data_len += value_len;
        parser->data[parser->data_len++] = '\n';
        parser->has_data = 1;
    } else if (is_field(line, name_len, "event")) {
        size_t n = value_len < RL_SSE_EVENT_MAX - 1 ? value_len : RL_SSE_EVENT_MAX - 1;
        memcpy(parser->event, value, n);
        parser->event[n] = '\0';
    } else if (is_field(line, name_len, "id")) {
        /* EventSource: an id holding NUL is ignored; so is one we could not keep whole. */
        if (memchr(value, '\0', value_len) == NULL && value_len < RL_SSE_ID_MAX) {
            memcpy(parser->last_id, value, value_len);
            parser->last_id[value_len] = '\0';
            parser->has_id = 1;
        }
    } else if (is_field(line, name_len, "retry")) {
        long ms = 0;
        size_t i;
        for (i = 0; i < value_len && value[i] >= '0' && value[i] <= '9' && ms < 100000000; ++i)
            ms = ms * 10 + (value[i] - '0');
        if (value_len > 0 && i == value_len)
            parser->retry_ms = ms;
    }
    return RL_SSE_OK;
}

int rl_sse_parser_feed(rl_sse_parser_t *parser, const char *buf, size_t len)
{
    size_t i;
    int result = RL_SSE_OK;

    for (i = 0; i < len; ++i) {
        char c = buf[i];
        if (parser->after_cr) {
            parser->after_cr = 0;
            if (c == '\n')
                continue;
        }
        if (c == '\r' || c == '\n') {
            parser->after_cr = c == '\r';
            result = process_line(parser);
            parser->line_len = 0;
            if (result != RL_SSE_OK)
                goto out;
            continue;
        }
        if (parser->line_len >= parser->max_line) {
            result = RL_SSE_E_TOO_LARGE;
            goto out;
        }
        parser->line[parser->line_len++] = c;
    }
out:
    if (result != RL_SSE_OK)
        rl_sse_parser_reset(parser);
    return result;
}

/* ---- the stream ---- */

struct rl_sse_stream {
    char *url, *user_agent;
    char **headers;
    size_t nheaders;
    long connect_timeout_ms, idle_timeout_ms, backoff_initial_ms;
    int max_attempts;
    rl_sse_on_event_t on_event;
    rl_sse_on_state_t on_state;
    void *user;

    rl_sse_parser_t parser;
    CURLM *multi;
    CURL *easy; /* the connection in progress, or NULL */
    struct curl_slist *request_headers;
    int connected;    /* the current connection answered 200 */
    int parse_failed; /* the current connection broke a parser cap */
    long status;
    char error_body[ERROR_BODY_MAX + 1];
    char request_id[72]; /* X-Request-ID of the last answer (spec client rule 6: logged with errors) */
    size_t error_len;
    rl_backoff_t backoff;    /* the wait before the next failed-connection retry */
    int failures;            /* consecutive connections that never answered 200 */
    int64_t next_attempt_at; /* monotonic ms; 0: now */
    int64_t last_read_at;
    int over; /* RL_SSE_E_* once the stream is over for good */
};

static char *copy(const char *s)
{
    return s != NULL ? strdup(s) : NULL;
}

int rl_sse_stream_new(const rl_sse_options_t *options, rl_sse_stream_t **out)
{
    rl_sse_stream_t *stream;
    size_t i, n = 0;
    int result;

    *out = NULL;
    if (options->url == NULL || options->on_event == NULL)
        return RL_SSE_E_USAGE;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return RL_SSE_E_NOMEM;
    stream = calloc(1, sizeof(*stream));
    if (stream == NULL)
        return RL_SSE_E_NOMEM;
    while (options->headers != NULL && options->headers[n] != NULL)
        n++;
    stream->headers = calloc(n + 1, sizeof(char *));
    stream->url = copy(options->url);
    stream->user_agent = copy(options->user_agent != NULL ? options->user_agent : "relay-client");
    result = RL_SSE_E_NOMEM;
    if (stream->headers == NULL || stream->url == NULL || stream->user_agent == NULL)
        goto out;
    for (i = 0; i < n; ++i) {
        stream->headers[i] = copy(options->headers[i]);
        if (stream->headers[i] == NULL)
            goto out;
        stream->nheaders++;
    }
    stream->connect_timeout_ms = options->connect_timeout_ms > 0 ? options->connect_timeout_ms : 5000;
    stream->idle_timeout_ms = options->idle_timeout_ms > 0 ? options->idle_timeout_ms : 60000;
    rl_backoff_init(&stream->backoff, options->backoff_initial_ms, options->backoff_max_ms);
    stream->backoff_initial_ms = stream->backoff.first_ms;
    stream->max_attempts = options->max_attempts;
    stream->on_event = options->on_event;
    stream->on_state = options->on_state;
    stream->user = options->user;
    if (rl_sse_parser_init(&stream->parser, options->max_line, options->max_data, options->on_event, options->user) !=
        RL_SSE_OK)
        goto out;
    if (options->last_event_id != NULL && strlen(options->last_event_id) < RL_SSE_ID_MAX)
        strcpy(stream->parser.last_id, options->last_event_id);
    stream->multi = curl_multi_init();
    if (stream->multi == NULL)
        goto out;
    *out = stream;
    return RL_SSE_OK;
out:
    rl_sse_stream_free(stream);
    return result;
}

static void drop_connection(rl_sse_stream_t *stream)
{
    if (stream->easy != NULL) {
        curl_multi_remove_handle(stream->multi, stream->easy);
        curl_easy_cleanup(stream->easy);
        stream->easy = NULL;
    }
    curl_slist_free_all(stream->request_headers);
    stream->request_headers = NULL;
}

void rl_sse_stream_free(rl_sse_stream_t *stream)
{
    size_t i;

    if (stream == NULL)
        return;
    drop_connection(stream);
    if (stream->multi != NULL)
        curl_multi_cleanup(stream->multi);
    rl_sse_parser_free(&stream->parser);
    for (i = 0; i < stream->nheaders; ++i)
        free(stream->headers[i]);
    free(stream->headers);
    free(stream->url);
    free(stream->user_agent);
    free(stream);
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    rl_sse_stream_t *stream = userdata;
    size_t len = size * nmemb;

    stream->last_read_at = rl_clock_mono_ms();
    if (stream->status == 0)
        curl_easy_getinfo(stream->easy, CURLINFO_RESPONSE_CODE, &stream->status);
    if (stream->status != 200) {
        size_t room = ERROR_BODY_MAX - stream->error_len;
        size_t n = len < room ? len : room;
        memcpy(stream->error_body + stream->error_len, ptr, n);
        stream->error_len += n;
        stream->error_body[stream->error_len] = '\0';
        return len;
    }
    if (!stream->connected) {
        stream->connected = 1;
        /* spec: reconnect backoff resets after a successful open. */
        stream->failures = 0;
        rl_backoff_reset(&stream->backoff);
        if (stream->on_state != NULL)
            stream->on_state(stream->user, RL_SSE_CONNECTED, 200, "connected", 0);
    }
    if (rl_sse_parser_feed(&stream->parser, ptr, len) != RL_SSE_OK) {
        stream->parse_failed = 1;
        return 0; /* ends the transfer; the next connection resumes from the last id */
    }
    return len;
}

static size_t on_header(char *buffer, size_t size, size_t nitems, void *userdata)
{
    static const char name[] = "x-request-id:";
    rl_sse_stream_t *stream = userdata;
    size_t len = size * nitems, n;

    if (len > sizeof(name) - 1 && strncasecmp(buffer, name, sizeof(name) - 1) == 0) {
        const char *value = buffer + sizeof(name) - 1;
        size_t left = len - (sizeof(name) - 1);
        while (left > 0 && (*value == ' ' || *value == '\t')) {
            value++;
            left--;
        }
        while (left > 0 && (value[left - 1] == '\r' || value[left - 1] == '\n' || value[left - 1] == ' '))
            left--;
        n = left < sizeof(stream->request_id) - 1 ? left : sizeof(stream->request_id) - 1;
        memcpy(stream->request_id, value, n);
        stream->request_id[n] = '\0';
    }
    return len;
}

static int start_connection(rl_sse_stream_t *stream)
{
    char last_id[RL_SSE_ID_MAX + 32];
    size_t i;

    rl_sse_parser_reset(&stream->parser);
    stream->connected = 0;
    stream->parse_failed = 0;
    stream->status = 0;
    stream->error_len = 0;
    stream->error_body[0] = '\0';
    stream->request_id[0] = '\0';
    stream->easy = curl_easy_init();
    if (stream->easy == NULL)
        return RL_SSE_E_NOMEM;
    for (i = 0; i < stream->nheaders; ++i)
        stream->request_headers = curl_slist_append(stream->request_headers, stream->headers[i]);
    stream->request_headers = curl_slist_append(stream->request_headers, "Accept: text/event-stream");
    stream->request_headers = curl_slist_append(stream->request_headers, "Cache-Control: no-cache");
    if (stream->parser.last_id[0] != '\0') {
        snprintf(last_id, sizeof(last_id), "Last-Event-ID: %s", stream->parser.last_id);
        stream->request_headers = curl_slist_append(stream->request_headers, last_id);
    }
    rl_client_tls_setup(stream->easy);
    curl_easy_setopt(stream->easy, CURLOPT_URL, stream->url);
    curl_easy_setopt(stream->easy, CURLOPT_HTTPHEADER, stream->request_headers);
    curl_easy_setopt(stream->easy, CURLOPT_USERAGENT, stream->user_agent);
    curl_easy_setopt(stream->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(stream->easy, CURLOPT_CONNECTTIMEOUT_MS, stream->connect_timeout_ms);
    curl_easy_setopt(stream->easy, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(stream->easy, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(stream->easy, CURLOPT_WRITEDATA, stream);
    curl_easy_setopt(stream->easy, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(stream->easy, CURLOPT_HEADERDATA, stream);
    curl_easy_setopt(stream->easy, CURLOPT_PROTOCOLS_STR, "http,https");
    stream->last_read_at = rl_clock_mono_ms();
    if (curl_multi_add_handle(stream->multi, stream->easy) != CURLM_OK) {
        drop_connection(stream);
        return RL_SSE_E_NOMEM;
    }
    return RL_SSE_OK;
}

/* The connection ended (done, failed or idle): decide what comes next. */
static void connection_ended(rl_sse_stream_t *stream, const char *why)
{
    int was_connected = stream->connected;
    long status = stream->status, delay;
    curl_off_t retry_after = 0;

    if (stream->easy != NULL)
        curl_easy_getinfo(stream->easy, CURLINFO_RETRY_AFTER, &retry_after);
    drop_connection(stream);
    stream->connected = 0;
    /* A final 4xx means the stream will not come back by retrying (spec client rules 1 and 4). */
    if (status >= 400 && status < 500 && status != 408 && status != 429) {
        stream->over = RL_SSE_E_REFUSED;
        if (stream->on_state != NULL)
            stream->on_state(stream->user, RL_SSE_DISCONNECTED, status, "the server refused the stream", -1);
        return;
    }
    if (was_connected) {
        delay = stream->backoff_initial_ms;
    } else {
        stream->failures++;
        if (stream->max_attempts > 0 && stream->failures >= stream->max_attempts) {
            stream->over = RL_SSE_E_GAVE_UP;
            if (stream->on_state != NULL)
                stream->on_state(stream->user, RL_SSE_DISCONNECTED, status, why, -1);
            return;
        }
        delay = rl_backoff_next(&stream->backoff);
    }
    if (retry_after > 0 && retry_after * 1000 > delay)
        delay = (long)retry_after * 1000;
    stream->next_attempt_at = rl_clock_mono_ms() + delay;
    if (stream->on_state != NULL)
        stream->on_state(stream->user, RL_SSE_DISCONNECTED, status, why, delay);
}

static void reap(rl_sse_stream_t *stream)
{
    CURLMsg *msg;
    int left;

    while ((msg = curl_multi_info_read(stream->multi, &left)) != NULL) {
        if (msg->msg != CURLMSG_DONE || msg->easy_handle != stream->easy)
            continue;
        if (stream->parse_failed)
            connection_ended(stream, "an event passed the size cap");
        else if (msg->data.result == CURLE_OK)
            connection_ended(stream, "the server ended the stream");
        else
            connection_ended(stream, rl_client_failure_text(msg->data.result));
        return;
    }
}

int rl_sse_stream_wait(rl_sse_stream_t *stream, const int *fds, int nfds, long timeout_ms, unsigned *ready)
{
    struct curl_waitfd extra[MAX_WAIT_FDS];
    struct pollfd pfds[MAX_WAIT_FDS];
    int64_t now = rl_clock_mono_ms();
    long wait = timeout_ms;
    int i, running;

    if (ready != NULL)
        *ready = 0;
    if (nfds > MAX_WAIT_FDS)
        return RL_SSE_E_USAGE;
    if (stream->over != 0)
        return stream->over;
    if (stream->easy == NULL && now >= stream->next_attempt_at) {
        int result = start_connection(stream);
        if (result != RL_SSE_OK)
            return result;
    }
    if (stream->easy == NULL) {
        long until = (long)(stream->next_attempt_at - now);
        if (until < wait)
            wait = until;
        for (i = 0; i < nfds; ++i) {
            pfds[i].fd = fds[i];
            pfds[i].events = POLLIN;
            pfds[i].revents = 0;
        }
        if (poll(pfds, (nfds_t)nfds, (int)(wait > 0 ? wait : 0)) > 0 && ready != NULL) {
            for (i = 0; i < nfds; ++i) {
                if (pfds[i].revents != 0)
                    *ready |= 1u << i;
            }
        }
        return RL_SSE_OK;
    }
    curl_multi_perform(stream->multi, &running);
    reap(stream);
    if (stream->over != 0)
        return stream->over;
    if (stream->easy != NULL) {
        long idle_left = (long)(stream->last_read_at + stream->idle_timeout_ms - rl_clock_mono_ms());
        if (idle_left < wait)
            wait = idle_left > 0 ? idle_left : 0;
    }
    for (i = 0; i < nfds; ++i) {
        extra[i].fd = fds[i];
        extra[i].events = CURL_WAIT_POLLIN;
        extra[i].revents = 0;
    }
    curl_multi_poll(stream->multi, extra, (unsigned)nfds, (int)(wait > 0 ? wait : 0), NULL);
    if (ready != NULL) {
        for (i = 0; i < nfds; ++i) {
            if (extra[i].revents != 0)
                *ready |= 1u << i;
        }
    }
    curl_multi_perform(stream->multi, &running);
    reap(stream);
    if (stream->easy != NULL && rl_clock_mono_ms() - stream->last_read_at >= stream->idle_timeout_ms)
        connection_ended(stream, "nothing arrived within the idle timeout");
    return stream->over;
}

void rl_sse_stream_set_idle_timeout(rl_sse_stream_t *stream, long idle_timeout_ms)
{
    if (idle_timeout_ms > 0)
        stream->idle_timeout_ms = idle_timeout_ms;
}

const char *rl_sse_stream_last_id(const rl_sse_stream_t *stream)
{
    return stream->parser.last_id;
}

int rl_sse_stream_connected(const rl_sse_stream_t *stream)
{
    return stream->easy != NULL && stream->connected;
}

const char *rl_sse_stream_request_id(const rl_sse_stream_t *stream)
{
    return stream->request_id;
}

long rl_sse_stream_status(const rl_sse_stream_t *stream, const char **error_body)
{
    if (error_body != NULL)
        *error_body = stream->error_body;
    return stream->status;
}
