#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "http/call.h"
#include "http/server.h"
#include "http/validate.h"

/* The retry_after_ms of a 503 whose cause did not say how long to wait. */
#define UNAVAILABLE_RETRY_MS 1000
/* A full disk is not freed in a second: someone has to make room (docs/operations.md, "A full disk"). */
#define STORAGE_FULL_RETRY_MS 10000

void rl_call_hold(rl_call_t *call)
{
    ++call->refs;
}

void rl_call_release(rl_call_t *call)
{
    if (--call->refs > 0)
        return;
    json_decref(call->body);
    free(call->flat);
    free(call);
}

int rl_call_alive(const rl_call_t *call)
{
    return call->req != NULL && !call->responded;
}

void rl_call_add_header(rl_call_t *call, const char *name, const char *value, size_t value_len)
{
    h2o_req_t *req = call->req;
    char *copy = h2o_mem_alloc_pool(&req->pool, value_len);

    memcpy(copy, value, value_len);
    h2o_add_header_by_str(&req->pool, &req->res.headers, name, strlen(name), 1, NULL, copy, value_len);
}

const char *rl_call_header(const rl_call_t *call, const char *name, size_t *len)
{
    ssize_t index = h2o_find_header_by_str(&call->req->headers, name, strlen(name), -1);

    if (index < 0)
        return NULL;
    *len = call->req->headers.entries[index].value.len;
    return call->req->headers.entries[index].value.base;
}

int rl_call_param(const rl_call_t *call, size_t index, char *buf, size_t bufsz)
{
    const rl_route_param_t *param = &call->params[index];

    if (param->len + 1 > bufsz)
        return -1;
    memcpy(buf, param->base, param->len);
    buf[param->len] = '\0';
    return 0;
}

/* Writes a non-negative integer in decimal; returns its length. printf showed in the profile here. */
static size_t format_uint(char *out, unsigned long long value)
{
    char digits[24];
    size_t n = 0, i;

    do {
        digits[n++] = (char)('0' + value % 10);
        value /= 10;
    } while (value != 0);
    for (i = 0; i < n; ++i)
        out[i] = digits[n - 1 - i];
    return n;
}

/*
 * Adds a header whose name is a literal and no h2o token (x-*, traceparent,
 * tracestate): no token lookup, no strlen, the name not copied (h2o keeps
 * the pointer; a literal lives as long as the process). The value is copied.
 */
#define ADD_PLAIN(call, literal, value, value_len)                                                                     \
    add_plain_header((call), literal, sizeof(literal) - 1, (value), (value_len))
static void add_plain_header(rl_call_t *call, const char *name, size_t name_len, const char *value, size_t value_len)
{
    h2o_req_t *req = call->req;
    char *copy = h2o_mem_alloc_pool(&req->pool, value_len);

    memcpy(copy, value, value_len);
    h2o_add_header_by_str(&req->pool, &req->res.headers, name, name_len, 0, NULL, copy, value_len);
}

static void add_rate_headers(rl_call_t *call)
{
    const rl_call_rate_t *rate = &call->rate;
    long long millis;
    char value[32];
    size_t len;

    if (!rate->set) {
        /* A 503 of a route without a bucket still says when to come back (rl_call_fail_full). */
        if (rate->retry_after_ms > 0)
            rl_call_add_header(call, "retry-after", value,
                               format_uint(value, (unsigned long long)((rate->retry_after_ms + 999) / 1000)));
        return;
    }
    ADD_PLAIN(call, "x-ratelimit-limit", value, format_uint(value, (unsigned long long)rate->limit));
    ADD_PLAIN(call, "x-ratelimit-remaining", value,
              format_uint(value, (unsigned long long)(rate->remaining > 0 ? rate->remaining : 0)));
    millis = (long long)(rate->reset_after * 1000.0 + 0.5);
    /* spec: X-RateLimit-Reset is in epoch seconds; round up so that the bucket is really full then. */
    ADD_PLAIN(call, "x-ratelimit-reset", value,
              format_uint(value, (unsigned long long)((rl_clock_now_ms() + millis + 999) / 1000)));
    /* Reset-After in decimal seconds with milliseconds: "12.345". */
    len = format_uint(value, (unsigned long long)(millis / 1000));
    value[len++] = '.';
    value[len++] = (char)('0' + millis / 100 % 10);
    value[len++] = (char)('0' + millis / 10 % 10);
    value[len++] = (char)('0' + millis % 10);
    ADD_PLAIN(call, "x-ratelimit-reset-after", value, len);
    ADD_PLAIN(call, "x-ratelimit-bucket", rate->bucket, strlen(rate->bucket));
    ADD_PLAIN(call, "x-ratelimit-scope", rate->scope, strlen(rate->scope));
    if (rate->retry_after_ms > 0)
        rl_call_add_header(call, "retry-after", value,
                           format_uint(value, (unsigned long long)((rate->retry_after_ms + 999) / 1000)));
}

static void log_access(rl_call_t *call)
{
    int64_t took_us = rl_clock_mono_us() - call->started_us;
    json_t *fields;

    /* The metrics count every answer, logged or not (plain increments: server.c). */
    rl__http_server_observe(call->server, call->route, call->status, took_us);
    if (!rl_log_enabled(RL_LOG_INFO))
        return;
    fields = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:f, s:s}", "msg", "request", "request_id", call->request_id,
                       "trace_id", call->trace_id, "method", call->method, "route", call->route_name, "status",
                       call->status, "duration_ms", (double)took_us / 1000.0, "peer", call->peer);
    if (fields != NULL && call->via[0] != '\0')
        json_object_set_new(fields, "via", json_string(call->via));
    rl_log_fields(RL_LOG_INFO, fields);
}

static const char *reason_phrase(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 304:
        return "Not Modified";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 409:
        return "Conflict";
    case 410:
        return "Gone";
    case 413:
        return "Payload Too Large";
    case 422:
        return "Unprocessable Entity";
    case 429:
        return "Too Many Requests";
    case 451:
        return "Unavailable For Legal Reasons";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    default:
        return status < 400 ? "OK" : status < 500 ? "Client Error" : "Internal Server Error";
    }
}

void rl__call_common_headers(rl_call_t *call)
{
    size_t tracestate_len;
    const char *tracestate;

    /* Room for every header below at once: the vector doubled three times per answer in the profile. */
    h2o_vector_reserve(&call->req->pool, &call->req->res.headers, call->req->res.headers.size + 10);
    h2o_add_header(&call->req->pool, &call->req->res.headers, H2O_TOKEN_SERVER, NULL, H2O_STRLIT("relay"));
    ADD_PLAIN(call, "x-request-id", call->request_id, strlen(call->request_id));
    ADD_PLAIN(call, "traceparent", call->traceparent, strlen(call->traceparent));
    /* spec: tracestate is passed through verbatim. */
    tracestate = rl_call_header(call, "tracestate", &tracestate_len);
    if (tracestate != NULL)
        ADD_PLAIN(call, "tracestate", tracestate, tracestate_len);
    add_rate_headers(call);
}

void rl__call_log(rl_call_t *call)
{
    log_access(call);
}

void rl_call_send(rl_call_t *call, int status, const char *content_type, const void *bytes, size_t len)
{
    h2o_req_t *req = call->req;
    static h2o_generator_t generator = {NULL, NULL};
    h2o_iovec_t body;

    if (!rl_call_alive(call))
        return;
    call->responded = 1;
    call->status = status;
    body.base = h2o_mem_alloc_pool(&req->pool, len > 0 ? len : 1);
    body.len = len;
    if (len > 0)
        memcpy(body.base, bytes, len);

    req->res.status = status;
    req->res.reason = reason_phrase(status);
    /* A 304 has no body; its length is left for h2o to leave out. */
    req->res.content_length = status == 304 ? SIZE_MAX : body.len;
    if (content_type != NULL)
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, content_type, strlen(content_type));
    if (h2o_find_header(&req->res.headers, H2O_TOKEN_CACHE_CONTROL, -1) < 0)
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL, H2O_STRLIT("no-store"));
    rl__call_common_headers(call);
    log_access(call);

    h2o_start_response(req, &generator);
    h2o_send(req, status == 304 ? NULL : &body, status == 304 ? 0 : 1, H2O_SEND_STATE_FINAL);
}

/* Writes the envelope with rl_call_send. Steals envelope. */
static void send_envelope(rl_call_t *call, int status, json_t *envelope)
{
    char *text = json_dumps(envelope, JSON_COMPACT);

    json_decref(envelope);
    if (text == NULL) {
        static const char fallback[] = "{\"ok\":false,\"error\":{\"code\":\"internal_error\"}}";
        rl_call_send(call, 500, "application/json; charset=utf-8", fallback, sizeof(fallback) - 1);
        return;
    }
    rl_call_send(call, status, "application/json; charset=utf-8", text, strlen(text));
    free(text);
}

struct text_buf {
    char *base;
    size_t len, cap;
    char local[2048];
};

static int text_append(const char *bytes, size_t len, void *arg)
{
    struct text_buf *buf = arg;

    if (buf->len + len > buf->cap) {
        size_t cap = (buf->len + len) * 2;
        char *grown = buf->base == buf->local ? malloc(cap) : realloc(buf->base, cap);
        if (grown == NULL)
            return -1;
        if (buf->base == buf->local)
            memcpy(grown, buf->local, buf->len);
        buf->base = grown;
        buf->cap = cap;
    }
    memcpy(buf->base + buf->len, bytes, len);
    buf->len += len;
    return 0;
}

/* The success envelope, written around the result's own serialisation: no wrapper object, no extra copy. */
void rl_call_reply(rl_call_t *call, json_t *result)
{
    static const char head[] = "{\"ok\":true,\"result\":";
    struct text_buf buf;

    buf.base = buf.local;
    buf.len = 0;
    buf.cap = sizeof(buf.local);
    if (result == NULL)
        result = json_object();
    text_append(head, sizeof(head) - 1, &buf);
    if (result == NULL || json_dump_callback(result, text_append, &buf, JSON_COMPACT | JSON_ENCODE_ANY) != 0 ||
        text_append("}", 1, &buf) != 0) {
        static const char fallback[] = "{\"ok\":false,\"error\":{\"code\":\"internal_error\"}}";
        rl_call_send(call, 500, "application/json; charset=utf-8", fallback, sizeof(fallback) - 1);
    } else {
        rl_call_send(call, 200, "application/json; charset=utf-8", buf.base, buf.len);
    }
    json_decref(result);
    if (buf.base != buf.local)
        free(buf.base);
}

void rl_call_reply_text(rl_call_t *call, const char *result, size_t len)
{
    static const char head[] = "{\"ok\":true,\"result\":";
    rl_json_out_t out;

    rl_json_out_init(&out);
    rl_json_out_raw(&out, head, sizeof(head) - 1);
    rl_json_out_raw(&out, result, len);
    rl_json_out_raw(&out, "}", 1);
    if (out.failed) {
        static const char fallback[] = "{\"ok\":false,\"error\":{\"code\":\"internal_error\"}}";
        rl_call_send(call, 500, "application/json; charset=utf-8", fallback, sizeof(fallback) - 1);
    } else {
        rl_call_send(call, 200, "application/json; charset=utf-8", out.bytes, out.len);
    }
    rl_json_out_free(&out);
}

int rl_call_body_generic(rl_call_t *call)
{
    json_t *errors;
    int result;

    if (call->flat == NULL)
        return 0;
    free(call->flat);
    call->flat = NULL;
    if (!rl_call_alive(call))
        return RL_E_INTERNAL;
    /* What run_handler does for a route without RL_ROUTE_FLAT_BODY (server.c). */
    errors = json_array();
    result = rl_validate_body(call->route->body, call->req->entity.base, call->req->entity.len, 1, &call->body, errors);
    if (result != 0) {
        rl_call_fail_full(call, result, NULL, result == RL_E_INVALID_REQUEST ? errors : NULL, NULL);
        if (result != RL_E_INVALID_REQUEST)
            json_decref(errors);
        return result;
    }
    json_decref(errors);
    return 0;
}

/*
 * The envelope of an error with neither errors[] nor details, written
 * without a tree: the answer of every refusal under overload. The bytes are
 * the ones jansson writes for it (the same keys in the same order); a
 * message jansson would refuse (not UTF-8) takes jansson's path, and its
 * answer, as before.
 */
#define RAW(out, literal) rl_json_out_raw((out), (literal), sizeof(literal) - 1)

static int fail_text(rl_call_t *call, int status, const char *code, const char *message)
{
    rl_json_out_t out;
    size_t message_len = strlen(message);

    if (!rl_json_utf8_valid(message, message_len) || !rl_json_utf8_valid(code, strlen(code)))
        return -1;
    rl_json_out_init(&out);
    RAW(&out, "{\"ok\":false,\"error\":{\"code\":");
    rl_json_out_string(&out, code, strlen(code));
    RAW(&out, ",\"message\":");
    rl_json_out_string(&out, message, message_len);
    if ((status == 429 || status == 503) && call->rate.retry_after_ms > 0) {
        RAW(&out, ",\"retry_after_ms\":");
        rl_json_out_integer(&out, call->rate.retry_after_ms);
    }
    rl_json_out_raw(&out, "}}", 2);
    if (out.failed) {
        rl_json_out_free(&out);
        return -1;
    }
    rl_call_send(call, status, "application/json; charset=utf-8", out.bytes, out.len);
    rl_json_out_free(&out);
    return 0;
}

void rl_call_fail_full(rl_call_t *call, int err, const char *message, json_t *errors, json_t *details)
{
    const char *text = message != NULL ? message : rl_error_message(err);
    int status = rl_error_status(err);
    json_t *error;

    /*
     * spec: retry_after_ms is set on 429 and 503. A 503 whose cause gave no
     * time (the store or the bus could not be reached: they reconnect with a
     * back-off of their own) says a second, in the body and in Retry-After.
     */
    if (status == 503 && call->rate.retry_after_ms <= 0)
        call->rate.retry_after_ms = err == RL_E_STORAGE_FULL ? STORAGE_FULL_RETRY_MS : UNAVAILABLE_RETRY_MS;
    if (errors == NULL && details == NULL && fail_text(call, status, rl_error_code(err), text) == 0)
        return;
    error = json_pack("{s:s, s:s}", "code", rl_error_code(err), "message", text);
    if (errors != NULL)
        json_object_set_new(error, "errors", errors);
    if (details != NULL)
        json_object_set_new(error, "details", details);
    if ((status == 429 || status == 503) && call->rate.retry_after_ms > 0)
        json_object_set_new(error, "retry_after_ms", json_integer(call->rate.retry_after_ms));
    send_envelope(call, status, json_pack("{s:b, s:o}", "ok", 0, "error", error));
}

void rl_call_fail(rl_call_t *call, int err, const char *message)
{
    rl_call_fail_full(call, err, message, NULL, NULL);
}
