#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/histogram.h"
#include "common/log.h"
#include "common/strmap.h"
#include "http/head.h"
#include "http/peer.h"
#include "http/server.h"
#include "http/sse.h"
#include "http/tls.h"
#include "http/validate.h"

#define MAX_LISTENERS          4
#define RL_HTTP_MMAP_THRESHOLD (4 * 1024 * 1024)
/* How long accepting stops when the process is out of descriptors. */
#define ACCEPT_PAUSE_MS 100
/* Running out of descriptors again within this long after the last time is the same episode (one log line). */
#define STARVED_QUIET_US (10 * 1000000LL)
/* Refused connections of the per-address cap are logged at most this often (with a count). */
#define CAP_LOG_INTERVAL_US (60 * 1000000LL)
/* Addresses tracked by the per-address cap; each holds an open connection, so the descriptor limit comes first. */
#define ADDRESSES_MAX (1u << 22)

/*
 * Open connections per client address. Shared by the server and by every
 * counted connection (whose close callback may run after the server is
 * freed, at process exit), so it is freed by whichever lets go last.
 */
struct address_table {
    rl_strmap_t *counts; /* address group -> struct address_count */
    size_t refs;
};

struct address_count {
    struct address_table *table;
    size_t connections;
    char key[RL_ADDR_TEXT_MAX];
};

/*
 * What one route (or "none matched") has answered: counts by status, and
 * latency. Plain integers on the loop thread: the metrics cost one
 * increment per answer and a bucket search (docs/internals/http.md).
 */
#define STATUS_MIN 100
#define STATUS_MAX 599
struct route_stats {
    uint64_t by_status[STATUS_MAX - STATUS_MIN + 1];
    rl_histogram_t latency;
};

/* A request refused because the loop lags is asked to come back in this long (503 retry_after_ms). */
#define LAG_RETRY_MS 250
/* Requests read in one loop turn past which the turn counts as full (loop_lag_ms): h2o's epoll takes 256 events. */
#define FULL_TURN_REQUESTS 200

/* The longest request path a lowered body limit is kept for; longer ones keep the route's limit. */
#define HEAD_PATH_MAX 2048

struct rl_http_server {
    const rl_http_config_t *config;
    struct route_stats *stats; /* one per route, and the last for answers no route gave */
    size_t in_flight;          /* requests from on_req until h2o disposes of them */
    uint64_t refused_by_cap;   /* connections refused by the per-address cap, ever */
    h2o_globalconf_t globalconf;
    h2o_context_t context;
    h2o_accept_ctx_t accept_ctx;
    h2o_socket_t *listeners[MAX_LISTENERS];
    size_t nlisteners;
    SSL_CTX **retired_tls; /* contexts replaced by a reload, kept until the server goes (see reload) */
    size_t nretired_tls;
    rl_cidr_set_t trusted_proxies;
    rl_forwarded_kind_t forwarded;
    const char *forwarded_name;      /* lower case, as h2o keeps request header names */
    struct address_table *addresses; /* NULL without a per-address cap */
    int64_t cap_logged_us;           /* when the cap last logged a refusal */
    unsigned long cap_refused;       /* refusals since then */
    /* Accepting paused because descriptors ran out (see on_accept). */
    h2o_timeout_t accept_pause;
    h2o_timeout_entry_t accept_resume;
    int64_t starved_since_us; /* 0 outside such an episode */
    int64_t starved_last_us;  /* the last accept that failed for want of descriptors */
    unsigned long starved_pauses;
    /*
     * A limit the head_limit hook set for the request whose head was parsed
     * last: h2o's 413 for that request (at once, inside the same parse call)
     * carries its error instead of payload_too_large. The request's path is
     * kept to be sure the 413 is that request's (h2o keeps a copy of its own).
     */
    rl_http_head_limit_t head_refusal;
    char head_refusal_path[HEAD_PATH_MAX];
    size_t head_refusal_path_len; /* 0: no refusal set */
    /* The loop's last turn (loop_lag_ms): when it ended and how long it ran, in h2o's clock (ms). */
    uint64_t turn_end_ms, turn_busy_ms;
    /*
     * Requests read in the turn running now; and when the run of full
     * turns the loop is in began (0: the last turn was not full). A turn
     * that read FULL_TURN_REQUESTS or more was likely handed only part of
     * what was ready (h2o takes at most 256 events from epoll a turn).
     */
    unsigned turn_requests;
    uint64_t backlog_since_ms;
    uint64_t shed;            /* requests refused because the loop lagged, ever */
    int generic_bodies;       /* RELAY_GENERIC_BODIES: no flat reading (rl_http_server_create) */
    rl_route_index_t *routes; /* the config's table, indexed */
};

struct route_handler {
    h2o_handler_t super;
    rl_http_server_t *server;
};

struct call_guard {
    rl_call_t *call;
};

struct api_error_filter {
    h2o_filter_t super;
    rl_http_server_t *server;
};

struct envelope_ostream {
    h2o_ostream_t super;
    h2o_iovec_t body;
    int sent;
};

static void on_accept_resume(h2o_timeout_entry_t *entry);

static int under_prefix(const rl_http_server_t *server, h2o_iovec_t path)
{
    const char *prefix = server->config->api_prefix;
    size_t len = prefix != NULL ? strlen(prefix) : 0;

    return len > 0 && path.len >= len && memcmp(path.base, prefix, len) == 0;
}

/* Most forwarding header lines one request may carry; more are not believed at all. */
#define FORWARDED_LINES_MAX 16

/*
 * The call's client address: the socket's peer, or, when that peer is a
 * trusted proxy, the client its forwarding header names (http/peer.h). A
 * header that cannot be read leaves the proxy's own address: a request
 * whose origin is unknown shares the proxy's limits rather than escape them.
 */
static void identify_peer(rl_http_server_t *server, h2o_req_t *req, rl_call_t *call)
{
    struct sockaddr_storage ss;
    socklen_t len = req->conn->callbacks->get_peername(req->conn, (struct sockaddr *)&ss);
    rl_addr_t direct, client;

    call->peer[0] = call->peer_group[0] = call->via[0] = '\0';
    if (len == 0 || rl_addr_from_sockaddr((struct sockaddr *)&ss, &direct) != 0)
        return;
    client = direct;
    if (server->trusted_proxies.count > 0 && rl_cidr_set_contains(&server->trusted_proxies, &direct)) {
        const char *values[FORWARDED_LINES_MAX];
        size_t lens[FORWARDED_LINES_MAX], n = 0;
        ssize_t index = -1;
        while ((index = h2o_find_header_by_str(&req->headers, server->forwarded_name, strlen(server->forwarded_name),
                                               index)) >= 0 &&
               n < FORWARDED_LINES_MAX + 1) {
            if (n < FORWARDED_LINES_MAX) {
                values[n] = req->headers.entries[index].value.base;
                lens[n] = req->headers.entries[index].value.len;
            }
            ++n;
        }
        if (n > 0 && n <= FORWARDED_LINES_MAX &&
            rl_forwarded_client(server->forwarded, values, lens, n, &server->trusted_proxies, &client) == 0)
            rl_addr_format(&direct, call->via, sizeof(call->via));
        else
            client = direct;
    }
    rl_addr_format(&client, call->peer, sizeof(call->peer));
    rl_addr_group(&client, call->peer_group, sizeof(call->peer_group));
}

/* Request id and traceparent, shared by calls and by h2o's own error responses. */
static void correlate(h2o_req_t *req, char *request_id, char *traceparent, char *trace_id)
{
    ssize_t index = h2o_find_header_by_str(&req->headers, H2O_STRLIT("x-request-id"), -1);
    rl_traceparent_t incoming;
    int have_trace = 0;

    if (index >= 0 &&
        rl_request_id_is_valid(req->headers.entries[index].value.base, req->headers.entries[index].value.len)) {
        memcpy(request_id, req->headers.entries[index].value.base, req->headers.entries[index].value.len);
        request_id[req->headers.entries[index].value.len] = '\0';
    } else {
        rl_request_id_generate(request_id);
    }
    index = h2o_find_header_by_str(&req->headers, H2O_STRLIT("traceparent"), -1);
    if (index >= 0)
        have_trace = rl_traceparent_parse(req->headers.entries[index].value.base, req->headers.entries[index].value.len,
                                          &incoming) == 0;
    rl_traceparent_respond(have_trace ? &incoming : NULL, traceparent, trace_id);
}

static void on_guard_dispose(void *p)
{
    struct call_guard *guard = p;

    --guard->call->server->in_flight;
    guard->call->req = NULL;
    rl_call_release(guard->call);
}

static size_t route_limit(const rl_http_server_t *server, const rl_route_t *route)
{
    return route->max_body != 0 ? route->max_body : server->config->max_body;
}

static void head_refusal_clear(rl_http_server_t *server)
{
    json_decref(server->head_refusal.details);
    memset(&server->head_refusal, 0, sizeof(server->head_refusal));
    server->head_refusal_path_len = 0;
}

void rl__http_server_limit_for(rl_http_server_t *server, const char *method, size_t method_len, const char *path,
                               size_t path_len, const struct phr_header *headers, size_t num_headers)
{
    const char *query = memchr(path, '?', path_len), *authorization = NULL, *full_path = path;
    size_t full_len = path_len;
    rl_route_param_t params[RL_ROUTE_MAX_PARAMS];
    const rl_route_t *route = NULL;
    size_t limit = server->config->max_body, authorization_len = 0, i;
    rl_http_head_limit_t lower = {0, 0, NULL};

    head_refusal_clear(server);
    if (query != NULL)
        path_len = (size_t)(query - path);
    if (rl_route_index_find(server->routes, method, method_len, path, path_len, &route, params, NULL, 0) ==
        RL_ROUTE_MATCHED)
        limit = route_limit(server, route);
    if (route != NULL && (route->flags & RL_ROUTE_HEAD_LIMIT) != 0 && server->config->hooks.head_limit != NULL) {
        for (i = 0; i < num_headers; ++i) {
            if (headers[i].name_len == 13 && strncasecmp(headers[i].name, "authorization", 13) == 0) {
                authorization = headers[i].value;
                authorization_len = headers[i].value_len;
                break;
            }
        }
        if (full_len <= HEAD_PATH_MAX &&
            server->config->hooks.head_limit(server->config->app, route, authorization, authorization_len, &lower) &&
            lower.limit < limit) {
            limit = lower.limit;
            server->head_refusal = lower;
            memcpy(server->head_refusal_path, full_path, full_len);
            server->head_refusal_path_len = full_len;
        } else {
            json_decref(lower.details);
        }
    }
    server->globalconf.max_request_entity_size = limit;
}

/* Wall-clock ms, the clock h2o's loop keeps its turn's start in (h2o_now). */
static uint64_t wall_ms(void)
{
    struct timeval tv;

    gettimeofday(&tv, NULL);
    return (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
}

/*
 * How long a request read now may have waited for the loop, in ms: the
 * time since this turn began (h2o_now is taken when epoll_wait returns, and
 * every request of the turn was readable then), or the whole previous turn
 * when the loop went straight from it into this one (its bytes may have
 * arrived while the last turn ran). Two clock reads, nothing kept per
 * request: cheap enough to ask before every shed-able request.
 */
static uint64_t loop_lag_ms(rl_http_server_t *server)
{
    uint64_t now = wall_ms(), start = h2o_now(server->context.loop);
    uint64_t lag = now > start ? now - start : 0;

    if (start <= server->turn_end_ms + 1 && server->turn_busy_ms > lag)
        lag = server->turn_busy_ms;
    /*
     * Past a run of full turns, each short: what each turn's epoll_wait
     * left unread waited through them all. With thousands of connections
     * ready at once every turn stays short, and the loop still falls a
     * second behind.
     */
    if (server->backlog_since_ms != 0 && now > server->backlog_since_ms && now - server->backlog_since_ms > lag)
        lag = now - server->backlog_since_ms;
    return lag;
}

void rl_http_server_after_turn(rl_http_server_t *server)
{
    uint64_t start = h2o_now(server->context.loop);

    /*
     * A full turn lengthens the run, one that was not full ends it. No gap
     * between full turns is idle time (the loop's own work between two
     * turns, the store's answers, is not): a loop that found epoll_wait
     * with nothing to hand it would not read a full turn next.
     */
    if (server->turn_requests < FULL_TURN_REQUESTS)
        server->backlog_since_ms = 0;
    else if (server->backlog_since_ms == 0)
        server->backlog_since_ms = start;
    server->turn_requests = 0;
    server->turn_end_ms = wall_ms();
    server->turn_busy_ms = server->turn_end_ms > start ? server->turn_end_ms - start : 0;
    server->globalconf.max_request_entity_size = server->config->max_body;
    if (server->head_refusal_path_len != 0)
        head_refusal_clear(server);
}

/*
 * A hot route's body read by the flat reader, when it is a flat object that
 * meets every rule of the route's schema: one allocation, no tree. 0 with
 * call->flat set, or -1 for the generic path.
 */
static int read_flat(rl_call_t *call, const char *bytes, size_t len)
{
    /* A decoded string and its NUL fit in its quoted form; the slack spares the reader's margin checks. */
    size_t scratch_len = len + 16;
    rl_call_flat_t *flat = malloc(sizeof(*flat) + scratch_len);

    if (flat == NULL)
        return -1;
    if (rl_json_flat_parse(bytes, len, flat->scratch, scratch_len, &flat->object) != 0 ||
        rl_validate_flat(call->route->body, &flat->object) != 0) {
        free(flat);
        return -1;
    }
    call->flat = flat;
    return 0;
}

static void run_handler(rl_call_t *call)
{
    const rl_route_t *route = call->route;
    h2o_req_t *req = call->req;
    int result;

    /* Normally h2o refused it already; this catches bodies that arrived while a larger limit was in force. */
    if (req->entity.base != NULL && req->entity.len > route_limit(call->server, route)) {
        rl_call_fail(call, RL_E_PAYLOAD_TOO_LARGE, NULL);
        return;
    }
    if (route->body != NULL && (route->flags & RL_ROUTE_RAW_BODY) == 0 &&
        !((route->flags & RL_ROUTE_FLAT_BODY) != 0 && !call->server->generic_bodies &&
          read_flat(call, req->entity.base, req->entity.len) == 0)) {
        json_t *errors = json_array();
        result = rl_validate_body(route->body, req->entity.base, req->entity.len, 1, &call->body, errors);
        if (result != 0) {
            /* The validator's own error: invalid_request with errors[], or internal_error when memory ran out. */
            rl_call_fail_full(call, result, NULL, result == RL_E_INVALID_REQUEST ? errors : NULL, NULL);
            if (result != RL_E_INVALID_REQUEST)
                json_decref(errors);
            return;
        }
        json_decref(errors);
    }
    result = route->handler(call);
    if (result < 0 && rl_call_alive(call))
        rl_call_fail(call, result, NULL);
}

void rl_call_proceed(rl_call_t *call, int err)
{
    rl_http_server_t *server = call->server;

    if (!rl_call_alive(call))
        return;
    if (err < 0) {
        rl_call_fail(call, err, NULL);
        return;
    }
    if (call->route->bucket != NULL && server->config->hooks.limit != NULL) {
        rl_call_hold(call);
        server->config->hooks.limit(call);
        rl_call_release(call);
        return;
    }
    run_handler(call);
}

void rl_call_limited(rl_call_t *call, int err)
{
    if (!rl_call_alive(call))
        return;
    if (err < 0) {
        rl_call_fail(call, err, NULL);
        return;
    }
    run_handler(call);
}

/*
 * Requests the HTTP core refuses before routing: a head that head.c marked
 * (framing that a proxy could read differently, no Host; the connection is
 * closed after the answer), two Authorization headers (which one would a
 * proxy or a log have checked?), a path that decodes to a NUL byte (every
 * C string after it would see a shorter id). Returns 1 when it answered.
 */
static int refuse_head(rl_call_t *call, h2o_req_t *req)
{
    const char *why = rl__http_head_refusal(req);
    ssize_t first;

    if (why != NULL) {
        req->http1_is_persistent = 0;
        rl_call_fail(call, RL_E_INVALID_REQUEST, why);
        return 1;
    }
    first = h2o_find_header(&req->headers, H2O_TOKEN_AUTHORIZATION, -1);
    if (first >= 0 && h2o_find_header(&req->headers, H2O_TOKEN_AUTHORIZATION, first) >= 0) {
        rl_call_fail(call, RL_E_INVALID_REQUEST, "more than one Authorization header");
        return 1;
    }
    if (memchr(req->path_normalized.base, '\0', req->path_normalized.len) != NULL) {
        rl_call_fail(call, RL_E_INVALID_REQUEST, "the path holds a NUL byte");
        return 1;
    }
    return 0;
}

/* Copies len bytes and a NUL into out (cut to fit). snprintf showed in the profile here. */
static void copy_text(char *out, size_t outsz, const char *text, size_t len)
{
    if (len >= outsz)
        len = outsz - 1;
    memcpy(out, text, len);
    out[len] = '\0';
}

/*
 * A call with every byte zero. Zeroing only the fields around its text
 * fields saved ~450 instructions a request, but left bytes past a text
 * field's first one undefined, and route_name was then written as "-"
 * without its NUL: the access log read past it (caught under ASan by
 * test_06). Whole zeroing keeps every text field terminated by construction.
 */
static rl_call_t *new_call(void)
{
    return calloc(1, sizeof(rl_call_t));
}

static int on_req(h2o_handler_t *self, h2o_req_t *req)
{
    rl_http_server_t *server = ((struct route_handler *)self)->server;
    const rl_http_config_t *config = server->config;
    rl_call_t *call = new_call();
    struct call_guard *guard;
    char allow[64];
    h2o_iovec_t path = req->path_normalized;
    const rl_route_t *route = NULL;
    rl_route_result_t found;

    if (call == NULL)
        return -1;
    call->req = req;
    call->server = server;
    call->app = config->app;
    call->refs = 1;
    call->started_us = rl_clock_mono_us();
    copy_text(call->method, sizeof(call->method), req->method.base, req->method.len);
    memcpy(call->route_name, "-", 2);
    identify_peer(server, req, call);
    correlate(req, call->request_id, call->traceparent, call->trace_id);
    /* The guard lives in the request's pool: when h2o drops the request, the call learns of it. */
    guard = h2o_mem_alloc_shared(&req->pool, sizeof(*guard), on_guard_dispose);
    guard->call = call;
    ++server->in_flight;
    ++server->turn_requests;

    if (refuse_head(call, req))
        return 0;
    if (config->url_carries_credentials != NULL && under_prefix(server, path) &&
        config->url_carries_credentials(req->path.base, req->path.len)) {
        rl_call_fail(call, RL_E_INVALID_TOKEN_LOCATION, NULL);
        return 0;
    }

    found = rl_route_index_find(server->routes, req->method.base, req->method.len, path.base, path.len, &route,
                                call->params, allow, sizeof(allow));
    if (found == RL_ROUTE_NO_PATH) {
        rl_call_fail(call, RL_E_NOT_FOUND, NULL);
        return 0;
    }
    if (found == RL_ROUTE_NO_METHOD) {
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_ALLOW, NULL, allow, strlen(allow));
        rl_call_fail(call, RL_E_METHOD_NOT_ALLOWED, NULL);
        return 0;
    }
    call->route = route;
    call->handler_tag = route->tag;
    copy_text(call->route_name, sizeof(call->route_name), route->pattern, strlen(route->pattern));
    /* Before authentication and the body: a refusal must cost the lagging loop next to nothing. */
    if ((route->flags & RL_ROUTE_SHED) != 0 && config->loop_lag_max_ms > 0 &&
        loop_lag_ms(server) > config->loop_lag_max_ms) {
        ++server->shed;
        call->rate.retry_after_ms = LAG_RETRY_MS;
        rl_call_fail(call, RL_E_UNAVAILABLE, "the server is behind; retry");
        return 0;
    }

    if (route->auth != 0 && config->hooks.authenticate != NULL) {
        rl_call_hold(call);
        config->hooks.authenticate(call);
        rl_call_release(call);
        return 0;
    }
    rl_call_proceed(call, 0);
    return 0;
}

/*
 * h2o answers some requests itself before any handler runs: a body over the
 * size limit (413), a broken chunked encoding (400). Under the API prefix
 * those answers are rewritten into the spec's envelope with the usual
 * correlation headers, so that clients see one error format.
 */
static void envelope_do_send(h2o_ostream_t *self, h2o_req_t *req, h2o_iovec_t *bufs, size_t bufcnt,
                             h2o_send_state_t state)
{
    struct envelope_ostream *ostream = (void *)self;

    if (!ostream->sent) {
        ostream->sent = 1;
        h2o_ostream_send_next(self, req, &ostream->body, 1, state);
    } else {
        h2o_ostream_send_next(self, req, NULL, 0, state);
    }
}

static void api_error_on_setup_ostream(h2o_filter_t *self, h2o_req_t *req, h2o_ostream_t **slot)
{
    rl_http_server_t *server = ((struct api_error_filter *)self)->server;
    char request_id[RL_REQUEST_ID_MAX + 1], traceparent[RL_TRACEPARENT_LEN + 1], trace_id[33];
    int err = req->res.status == 413 ? RL_E_PAYLOAD_TOO_LARGE : RL_E_INVALID_REQUEST;
    struct envelope_ostream *ostream;
    json_t *details = NULL;
    ssize_t index;
    json_t *envelope;
    char *text;

    if (req->res.status < 400 || !under_prefix(server, req->path_normalized)) {
        h2o_setup_next_ostream(req, slot);
        return;
    }
    /* The 413 of a limit the application lowered from this request's head: its own error. */
    if (req->res.status == 413 && server->head_refusal_path_len != 0 &&
        req->input.path.len == server->head_refusal_path_len &&
        memcmp(req->input.path.base, server->head_refusal_path, req->input.path.len) == 0 &&
        rl_error_status(server->head_refusal.err) == 413) {
        err = server->head_refusal.err;
        details = json_incref(server->head_refusal.details);
    }
    correlate(req, request_id, traceparent, trace_id);
    envelope = json_pack("{s:b, s:{s:s, s:s}}", "ok", 0, "error", "code", rl_error_code(err), "message",
                         rl_error_message(err));
    if (details != NULL)
        json_object_set_new(json_object_get(envelope, "error"), "details", details);
    text = json_dumps(envelope, JSON_COMPACT);
    json_decref(envelope);
    ostream = (void *)h2o_add_ostream(req, sizeof(*ostream), slot);
    ostream->super.do_send = envelope_do_send;
    ostream->sent = 0;
    ostream->body = h2o_strdup(&req->pool, text != NULL ? text : "{\"ok\":false}", SIZE_MAX);
    free(text);
    req->res.content_length = ostream->body.len;
    index = h2o_find_header(&req->res.headers, H2O_TOKEN_CONTENT_TYPE, -1);
    if (index >= 0)
        req->res.headers.entries[index].value = h2o_iovec_init(H2O_STRLIT("application/json; charset=utf-8"));
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("x-request-id"), 1, NULL,
                          h2o_strdup(&req->pool, request_id, SIZE_MAX).base, strlen(request_id));
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("traceparent"), 1, NULL,
                          h2o_strdup(&req->pool, traceparent, SIZE_MAX).base, strlen(traceparent));
    index = h2o_find_header_by_str(&req->headers, H2O_STRLIT("tracestate"), -1);
    if (index >= 0)
        h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("tracestate"), 1, NULL,
                              req->headers.entries[index].value.base, req->headers.entries[index].value.len);
    rl__http_server_observe(server, NULL, req->res.status, -1);
    rl_log_fields(RL_LOG_INFO, json_pack("{s:s, s:s, s:s, s:s#, s:s, s:i}", "msg", "request", "request_id", request_id,
                                         "trace_id", trace_id, "method", req->method.base, (int)req->method.len,
                                         "route", "-", "status", req->res.status));
    h2o_setup_next_ostream(req, &ostream->super.next);
}

int rl_http_server_create(h2o_loop_t *loop, const rl_http_config_t *config, rl_http_server_t **out)
{
    rl_http_server_t *server = calloc(1, sizeof(*server));
    h2o_hostconf_t *hostconf;
    h2o_pathconf_t *pathconf;
    struct route_handler *handler;
    struct api_error_filter *filter;
    char error[256];

    if (server == NULL)
        return -1;
    if (rl__http_shim_check(error, sizeof(error)) != 0) {
        rl_log_error("refusing to start: %s (docs/internals/http.md, \"h2o from the outside\")", error);
        free(server);
        return -1;
    }
    server->config = config;
    /*
     * A diagnostic switch, read once: RELAY_GENERIC_BODIES=1 sends every
     * body through jansson and the validator, as before the flat reader, so
     * that the two paths can be compared on one build (tests/e2e/test_105).
     */
    server->generic_bodies = getenv("RELAY_GENERIC_BODIES") != NULL &&
                             strcmp(getenv("RELAY_GENERIC_BODIES"), "0") != 0 &&
                             getenv("RELAY_GENERIC_BODIES")[0] != '\0';
    server->stats = calloc(config->nroutes + 1, sizeof(*server->stats));
    server->routes = rl_route_index_new(config->routes, config->nroutes);
    if (server->stats == NULL || server->routes == NULL) {
        free(server->stats);
        rl_route_index_free(server->routes);
        free(server);
        return -1;
    }
    h2o_config_init(&server->globalconf);
    /*
     * No server name here: h2o's HTTP/1 would write it with an sprintf per
     * answer. Every answer relayd writes carries "server: relay" as one of
     * its own headers instead (rl__call_common_headers).
     */
    server->globalconf.server_name = h2o_iovec_init(H2O_STRLIT(""));
    server->globalconf.max_request_entity_size = config->max_body;
    if (config->request_timeout_ms > 0) {
        server->globalconf.http1.req_timeout = config->request_timeout_ms;
        server->globalconf.http2.idle_timeout = config->request_timeout_ms;
    }
    hostconf = h2o_config_register_host(&server->globalconf, h2o_iovec_init(H2O_STRLIT("default")), 65535);
    pathconf = h2o_config_register_path(hostconf, "/", 0);
    handler = (void *)h2o_create_handler(pathconf, sizeof(*handler));
    handler->super.on_req = on_req;
    handler->server = server;
    if (config->compress) {
        h2o_compress_args_t args;
        memset(&args, 0, sizeof(args));
        args.min_size = 256;
        args.gzip.quality = 6;
        args.brotli.quality = -1;
        h2o_compress_register(pathconf, &args);
    }
    filter = (void *)h2o_create_filter(&hostconf->fallback_path, sizeof(*filter));
    filter->super.on_setup_ostream = api_error_on_setup_ostream;
    filter->server = server;

    for (size_t i = 0; i < config->nroutes; ++i) {
        if (config->routes[i].max_body > config->max_body) {
            /* Large bodies live in file-backed buffers rather than in the heap. */
            if (h2o_socket_buffer_mmap_settings.threshold > RL_HTTP_MMAP_THRESHOLD)
                h2o_socket_buffer_mmap_settings.threshold = RL_HTTP_MMAP_THRESHOLD;
            rl__http_bodylimit_attach(server);
            break;
        }
    }
    h2o_context_init(&server->context, loop, &server->globalconf);
    server->accept_ctx.ctx = &server->context;
    server->accept_ctx.hosts = server->globalconf.hosts;
    if (rl_http_server_tls(server) != (config->tls_key != NULL && config->tls_key[0] != '\0')) {
        rl_log_error("--tls-cert and --tls-key go together");
        return -1;
    }
    if (rl_http_server_tls(server) &&
        (server->accept_ctx.ssl_ctx = rl_http_tls_context(config->tls_cert, config->tls_key)) == NULL)
        return -1;
    if (rl_cidr_set_parse(config->trusted_proxies != NULL ? config->trusted_proxies : "", &server->trusted_proxies,
                          error, sizeof(error)) != 0) {
        rl_log_error("--trusted-proxies: %s", error);
        return -1;
    }
    if (config->forwarded_header == NULL || strcasecmp(config->forwarded_header, "x-forwarded-for") == 0) {
        server->forwarded = RL_FORWARDED_XFF;
        server->forwarded_name = "x-forwarded-for";
    } else if (strcasecmp(config->forwarded_header, "forwarded") == 0) {
        server->forwarded = RL_FORWARDED_RFC7239;
        server->forwarded_name = "forwarded";
    } else {
        rl_log_error("--forwarded-header must be x-forwarded-for or forwarded");
        return -1;
    }
    if (config->max_connections_per_address > 0) {
        server->addresses = calloc(1, sizeof(*server->addresses));
        if (server->addresses == NULL || (server->addresses->counts = rl_strmap_new(ADDRESSES_MAX)) == NULL)
            return -1;
        server->addresses->refs = 1;
    }
    h2o_timeout_init(server->context.loop, &server->accept_pause, ACCEPT_PAUSE_MS);
    server->accept_resume.cb = on_accept_resume;
    *out = server;
    return 0;
}

int rl_http_server_tls(const rl_http_server_t *server)
{
    const rl_http_config_t *config = server->config;

    return config->tls_cert != NULL && config->tls_cert[0] != '\0';
}

int rl_http_server_reload_tls(rl_http_server_t *server)
{
    SSL_CTX *fresh, *old = server->accept_ctx.ssl_ctx, **retired;

    if (!rl_http_server_tls(server))
        return 0;
    retired = realloc(server->retired_tls, (server->nretired_tls + 1) * sizeof(*retired));
    if (retired == NULL)
        return -1;
    server->retired_tls = retired;
    if ((fresh = rl_http_tls_context(server->config->tls_cert, server->config->tls_key)) == NULL)
        return -1;
    /*
     * The old context is not freed: h2o 2.2.5 keeps the raw pointer of a
     * connection accepted before now and calls SSL_new with it only when the
     * client's first bytes arrive, without taking a reference. A context is a
     * few KiB and reloads come every few weeks.
     */
    server->accept_ctx.ssl_ctx = fresh;
    server->retired_tls[server->nretired_tls++] = old;
    rl_log_info("TLS certificate reloaded from %s", server->config->tls_cert);
    return 0;
}

static void address_table_release(struct address_table *table)
{
    if (--table->refs > 0)
        return;
    rl_strmap_free(table->counts, free);
    free(table);
}

static void on_counted_close(void *data)
{
    struct address_count *count = data;
    struct address_table *table = count->table;

    if (--count->connections == 0) {
        rl_strmap_remove(table->counts, count->key);
        free(count);
        address_table_release(table);
    }
}

/* Every accepted socket carries one of the two close hooks: that is how linger.c knows it. */
static void on_uncounted_close(void *data)
{
    (void)data;
}

int rl__http_server_accepted(const h2o_socket_t *sock)
{
    return sock->on_close.cb == on_counted_close || sock->on_close.cb == on_uncounted_close;
}

/*
 * The per-address cap: returns 0 and counts the connection until its socket
 * closes, or -1 when its address already holds the maximum. Trusted proxies
 * carry many clients and are not counted; an address the table has no room
 * for is let through (every tracked address holds a descriptor, so the
 * table cannot fill before the descriptor limit does).
 */
static int admit(rl_http_server_t *server, h2o_socket_t *sock)
{
    struct address_table *table = server->addresses;
    struct address_count *count;
    struct sockaddr_storage ss;
    rl_addr_t addr;
    char key[RL_ADDR_TEXT_MAX];

    sock->on_close.cb = on_uncounted_close;
    sock->on_close.data = NULL;
    if (table == NULL || h2o_socket_getpeername(sock, (struct sockaddr *)&ss) == 0 ||
        rl_addr_from_sockaddr((struct sockaddr *)&ss, &addr) != 0 ||
        rl_cidr_set_contains(&server->trusted_proxies, &addr))
        return 0;
    rl_addr_group(&addr, key, sizeof(key));
    count = rl_strmap_get(table->counts, key);
    if (count != NULL && count->connections >= server->config->max_connections_per_address) {
        int64_t now = rl_clock_mono_us();
        ++server->cap_refused;
        ++server->refused_by_cap;
        if (server->cap_logged_us == 0 || now - server->cap_logged_us >= CAP_LOG_INTERVAL_US) {
            rl_log_fields(RL_LOG_WARN, json_pack("{s:s, s:s, s:I, s:I}", "msg",
                                                 "connection refused: its address holds the most it may", "address",
                                                 key, "limit", (json_int_t)server->config->max_connections_per_address,
                                                 "refused", (json_int_t)server->cap_refused));
            server->cap_logged_us = now;
            server->cap_refused = 0;
        }
        return -1;
    }
    if (count == NULL) {
        count = calloc(1, sizeof(*count));
        if (count == NULL)
            return 0;
        count->table = table;
        snprintf(count->key, sizeof(count->key), "%s", key);
        if (rl_strmap_put(table->counts, key, count) != 0) {
            free(count);
            return 0;
        }
        ++table->refs;
    }
    ++count->connections;
    sock->on_close.cb = on_counted_close;
    sock->on_close.data = count;
    return 0;
}

static void listeners_read(rl_http_server_t *server, int on);

static void on_accept_resume(h2o_timeout_entry_t *entry)
{
    rl_http_server_t *server = H2O_STRUCT_FROM_MEMBER(rl_http_server_t, accept_resume, entry);

    listeners_read(server, 1);
}

/*
 * Out of descriptors: the pending connection stays in the kernel's queue and
 * the listener stays readable, so accepting again at once would spin a core
 * until a descriptor frees up. Stop reading the listeners for a moment
 * instead, and say so once per episode.
 */
static void pause_accepting(rl_http_server_t *server, int err)
{
    listeners_read(server, 0);
    if (!h2o_timeout_is_linked(&server->accept_resume))
        h2o_timeout_link(server->context.loop, &server->accept_pause, &server->accept_resume);
    ++server->starved_pauses;
    server->starved_last_us = rl_clock_mono_us();
    if (server->starved_since_us == 0) {
        struct rlimit limit;
        json_int_t nofile = getrlimit(RLIMIT_NOFILE, &limit) == 0 ? (json_int_t)limit.rlim_cur : -1;
        server->starved_since_us = server->starved_last_us;
        rl_log_fields(RL_LOG_WARN, json_pack("{s:s, s:s, s:I, s:i}", "msg",
                                             "out of file descriptors: new connections wait until some close", "error",
                                             strerror(err), "nofile", nofile, "retry_ms", ACCEPT_PAUSE_MS));
    }
}

static void on_accept(h2o_socket_t *listener, const char *err)
{
    rl_http_server_t *server = listener->data;
    h2o_socket_t *sock;

    if (err != NULL)
        return;
    /* Accept everything that is waiting; each new socket gets its own connection state in h2o. */
    for (;;) {
        sock = h2o_evloop_socket_accept(listener);
        if (sock == NULL) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                pause_accepting(server, errno);
            return;
        }
        /* An episode ends once accepting has worked for a while, not at the first descriptor that frees up. */
        if (server->starved_since_us != 0 && rl_clock_mono_us() - server->starved_last_us >= STARVED_QUIET_US) {
            rl_log_fields(RL_LOG_INFO,
                          json_pack("{s:s, s:f, s:I}", "msg", "descriptors available again", "short_for_ms",
                                    (double)(server->starved_last_us - server->starved_since_us) / 1000.0, "pauses",
                                    (json_int_t)server->starved_pauses));
            server->starved_since_us = 0;
            server->starved_pauses = 0;
        }
        if (admit(server, sock) != 0) {
            sock->on_close.cb = NULL; /* refused at once: nothing to linger for */
            h2o_socket_close(sock);
            continue;
        }
        h2o_accept(&server->accept_ctx, sock);
    }
}

static int split_hostport(const char *hostport, char *host, size_t hostsz, char *port, size_t portsz)
{
    const char *colon;

    if (hostport[0] == '[') {
        const char *close = strchr(hostport, ']');
        if (close == NULL || close[1] != ':' || (size_t)(close - hostport) > hostsz)
            return -1;
        snprintf(host, hostsz, "%.*s", (int)(close - hostport - 1), hostport + 1);
        colon = close + 1;
    } else {
        colon = strrchr(hostport, ':');
        if (colon == NULL || (size_t)(colon - hostport) >= hostsz)
            return -1;
        snprintf(host, hostsz, "%.*s", (int)(colon - hostport), hostport);
    }
    if (colon[1] == '\0' || strlen(colon + 1) >= portsz)
        return -1;
    snprintf(port, portsz, "%s", colon + 1);
    return 0;
}

int rl_http_server_listen(rl_http_server_t *server, const char *hostport, char *bound, size_t boundsz)
{
    char host[256], port[16], addr[INET6_ADDRSTRLEN];
    struct addrinfo hints = {0}, *res = NULL;
    struct sockaddr_storage ss;
    socklen_t sslen = sizeof(ss);
    int fd = -1, on = 1, rc;
    h2o_socket_t *sock;

    if (server->nlisteners == MAX_LISTENERS || split_hostport(hostport, host, sizeof(host), port, sizeof(port)) != 0) {
        rl_log_error("cannot listen on '%s': expected HOST:PORT", hostport);
        return -1;
    }
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    rc = getaddrinfo(host[0] != '\0' ? host : NULL, port, &hints, &res);
    if (rc != 0) {
        rl_log_error("cannot listen on '%s': %s", hostport, gai_strerror(rc));
        return -1;
    }
    fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) != 0 ||
        (server->config->reuse_port && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on)) != 0) ||
        bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &sslen) != 0) {
        rl_log_error("cannot listen on '%s': %s", hostport, strerror(errno));
        if (fd >= 0)
            close(fd);
        freeaddrinfo(res);
        return -1;
    }
    freeaddrinfo(res);
    if (ss.ss_family == AF_INET6) {
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, addr, sizeof(addr));
        snprintf(bound, boundsz, "[%s]:%u", addr, ntohs(((struct sockaddr_in6 *)&ss)->sin6_port));
    } else {
        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, addr, sizeof(addr));
        snprintf(bound, boundsz, "%s:%u", addr, ntohs(((struct sockaddr_in *)&ss)->sin_port));
    }
    sock = h2o_evloop_socket_create(server->context.loop, fd, H2O_SOCKET_FLAG_DONT_READ);
    sock->data = server;
    h2o_socket_read_start(sock, on_accept);
    server->listeners[server->nlisteners++] = sock;
    return 0;
}

static void listeners_read(rl_http_server_t *server, int on)
{
    size_t i;

    for (i = 0; i < server->nlisteners; ++i) {
        if (on)
            h2o_socket_read_start(server->listeners[i], on_accept);
        else
            h2o_socket_read_stop(server->listeners[i]);
    }
}

void rl_http_server_stop_listening(rl_http_server_t *server)
{
    size_t i;

    if (h2o_timeout_is_linked(&server->accept_resume))
        h2o_timeout_unlink(&server->accept_resume);
    for (i = 0; i < server->nlisteners; ++i) {
        h2o_socket_read_stop(server->listeners[i]);
        h2o_socket_close(server->listeners[i]);
    }
    server->nlisteners = 0;
}

void rl__http_server_observe(rl_http_server_t *server, const rl_route_t *route, int status, int64_t took_us)
{
    struct route_stats *stats =
        &server->stats[route != NULL ? (size_t)(route - server->config->routes) : server->config->nroutes];

    if (status >= STATUS_MIN && status <= STATUS_MAX)
        ++stats->by_status[status - STATUS_MIN];
    if (took_us >= 0)
        rl_histogram_observe_us(&stats->latency, (uint64_t)took_us);
}

uint64_t rl_http_server_answers(const rl_http_server_t *server, const rl_route_t *route, int status)
{
    size_t i = route != NULL ? (size_t)(route - server->config->routes) : server->config->nroutes;

    if (status < STATUS_MIN || status > STATUS_MAX || i > server->config->nroutes)
        return 0;
    return server->stats[i].by_status[status - STATUS_MIN];
}

void rl_http_server_shutdown(rl_http_server_t *server)
{
    rl_http_server_stop_listening(server);
    h2o_context_request_shutdown(&server->context);
    rl_sse_end_all();
}

/*
 * The HTTP/1 connections of the context come from the shim
 * (rl__http_shim_http1_conn: h2o keeps them on a private list), which the
 * start-up check has verified against a live connection.
 */
static size_t count_links(const h2o_linklist_t *list)
{
    const h2o_linklist_t *node;
    size_t n = 0;

    for (node = list->next; node != list; node = node->next)
        ++n;
    return n;
}

int rl_http_server_busy(rl_http_server_t *server)
{
    h2o_linklist_t *list = &server->context.http1._conns, *node;

    if (server->in_flight > 0)
        return 1;
    for (node = list->next; node != list; node = node->next) {
        h2o_conn_t *conn = rl__http_shim_http1_conn(node);
        h2o_socket_t *sock;
        if (conn->ctx != &server->context)
            return 1; /* not the layout this was written for: do not pretend to know */
        sock = conn->callbacks->get_socket != NULL ? conn->callbacks->get_socket(conn) : NULL;
        if (sock != NULL && sock->input != NULL && sock->input->size > 0)
            return 1;
    }
    return 0;
}

/* A label value as the text format wants it: backslash, quote and newline escaped. */
static void write_label(FILE *out, const char *value)
{
    for (; *value != '\0'; ++value) {
        if (*value == '\\' || *value == '"')
            fputc('\\', out);
        if (*value == '\n') {
            fputs("\\n", out);
            continue;
        }
        fputc(*value, out);
    }
}

static void route_labels(const rl_http_server_t *server, size_t i, char *out, size_t outsz)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    out[0] = '\0';
    if (f == NULL)
        return;
    fputs("method=\"", f);
    write_label(f, i < server->config->nroutes ? server->config->routes[i].method : "-");
    fputs("\",route=\"", f);
    write_label(f, i < server->config->nroutes ? server->config->routes[i].pattern : "-");
    fputc('"', f);
    if (fclose(f) == 0 && text != NULL)
        snprintf(out, outsz, "%s", text);
    free(text);
}

void rl_http_server_write_metrics(rl_http_server_t *server, FILE *out)
{
    char labels[512];
    size_t i;
    int code;

    fputs("# HELP relay_http_connections Open client connections, by protocol (HTTP/1.1 or HTTP/2).\n"
          "# TYPE relay_http_connections gauge\n",
          out);
    fprintf(out, "relay_http_connections{protocol=\"http1\"} %zu\n", count_links(&server->context.http1._conns));
    fprintf(out, "relay_http_connections{protocol=\"http2\"} %zu\n", count_links(&server->context.http2._conns));
    fputs("# HELP relay_http_connections_refused_total Connections closed at accept: their address held the most "
          "it may (--max-connections-per-address).\n"
          "# TYPE relay_http_connections_refused_total counter\n",
          out);
    fprintf(out, "relay_http_connections_refused_total %llu\n", (unsigned long long)server->refused_by_cap);
    fputs("# HELP relay_http_requests_in_flight Requests being handled or answered (event streams included).\n"
          "# TYPE relay_http_requests_in_flight gauge\n",
          out);
    fprintf(out, "relay_http_requests_in_flight %zu\n", server->in_flight);
    fputs("# HELP relay_http_shed_total Requests refused with 503 before their body was read, because the loop "
          "lagged past --loop-lag-max.\n"
          "# TYPE relay_http_shed_total counter\n",
          out);
    fprintf(out, "relay_http_shed_total %llu\n", (unsigned long long)server->shed);
    fputs("# HELP relay_http_requests_total Answers, by route (the route table's pattern; \"-\": none matched), "
          "method and status.\n"
          "# TYPE relay_http_requests_total counter\n",
          out);
    for (i = 0; i <= server->config->nroutes; ++i) {
        route_labels(server, i, labels, sizeof(labels));
        for (code = STATUS_MIN; code <= STATUS_MAX; ++code) {
            if (server->stats[i].by_status[code - STATUS_MIN] != 0)
                fprintf(out, "relay_http_requests_total{%s,code=\"%d\"} %llu\n", labels, code,
                        (unsigned long long)server->stats[i].by_status[code - STATUS_MIN]);
        }
    }
    fputs("# HELP relay_rate_limit_refusals_total Requests refused by a rate-limit bucket (429), by route.\n"
          "# TYPE relay_rate_limit_refusals_total counter\n",
          out);
    for (i = 0; i <= server->config->nroutes; ++i) {
        if (server->stats[i].by_status[429 - STATUS_MIN] == 0)
            continue;
        route_labels(server, i, labels, sizeof(labels));
        fprintf(out, "relay_rate_limit_refusals_total{%s} %llu\n", labels,
                (unsigned long long)server->stats[i].by_status[429 - STATUS_MIN]);
    }
    fputs("# HELP relay_http_request_duration_seconds Time from a request's arrival at its route to its answer "
          "(for an event stream or a socket: to its start), by route.\n"
          "# TYPE relay_http_request_duration_seconds histogram\n",
          out);
    for (i = 0; i <= server->config->nroutes; ++i) {
        if (server->stats[i].latency.count == 0)
            continue;
        route_labels(server, i, labels, sizeof(labels));
        rl_histogram_write(out, "relay_http_request_duration_seconds", labels, &server->stats[i].latency);
    }
}

h2o_context_t *rl_http_server_context(rl_http_server_t *server)
{
    return &server->context;
}

void rl_http_server_free(rl_http_server_t *server)
{
    if (server == NULL)
        return;
    rl_http_server_stop_listening(server);
    rl__http_linger_close_all();
    head_refusal_clear(server);
    h2o_timeout_dispose(server->context.loop, &server->accept_pause);
    h2o_context_dispose(&server->context);
    h2o_config_dispose(&server->globalconf);
    /* Open connections hold their own references; these are only the server's. */
    SSL_CTX_free(server->accept_ctx.ssl_ctx);
    for (size_t i = 0; i < server->nretired_tls; ++i)
        SSL_CTX_free(server->retired_tls[i]);
    free(server->retired_tls);
    free(server->stats);
    rl_route_index_free(server->routes);
    rl_cidr_set_free(&server->trusted_proxies);
    if (server->addresses != NULL)
        address_table_release(server->addresses);
    free(server);
}
