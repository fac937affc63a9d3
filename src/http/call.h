/*
 * One API call: the request, its route and parameters, the authenticated
 * principal, and the correlation ids. Handlers answer through rl_call_reply
 * and rl_call_fail, which write the spec's envelope and common headers.
 *
 * Lifetime: the call outlives its h2o request when an asynchronous step is
 * pending. Whoever starts such a step takes a reference with rl_call_hold and
 * drops it with rl_call_release in the completion; if the client went away
 * meanwhile, call->req is NULL and replies are silently dropped. All of this
 * runs on the event-loop thread only.
 */
#ifndef RL_HTTP_CALL_H
#define RL_HTTP_CALL_H

#include <h2o.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdint.h>

#include "common/json_flat.h"
#include "http/peer.h"
#include "http/route.h"
#include "http/trace.h"

struct rl_http_server;

typedef struct rl_call_rate {
    int set;
    const char *bucket;     /* bucket id, e.g. "delta" */
    const char *scope;      /* "installation", "user", "ip" */
    long limit;             /* capacity */
    long remaining;         /* whole tokens left after this request */
    double reset_after;     /* seconds until the bucket is full */
    int64_t retry_after_ms; /* only when limited: time until one token is back */
} rl_call_rate_t;

#define RL_PRINCIPAL_MAX 256

/* A body the flat reader read (RL_ROUTE_FLAT_BODY): its members, and the bytes they point into. */
typedef struct rl_call_flat {
    rl_json_flat_t object;
    char scratch[]; /* decoded keys and strings */
} rl_call_flat_t;

typedef struct rl_call {
    h2o_req_t *req; /* NULL once the client has gone */
    struct rl_http_server *server;
    const rl_route_t *route;
    void *app;
    unsigned refs;
    int responded;
    int status;
    rl_route_param_t params[RL_ROUTE_MAX_PARAMS];
    json_t *body;         /* the validated JSON body, or NULL */
    rl_call_flat_t *flat; /* or, on a route flagged RL_ROUTE_FLAT_BODY, the body read flat and valid; or NULL */

    /* Filled by the application's authenticate hook. */
    int principal_kind;
    char principal[RL_PRINCIPAL_MAX + 1];
    char owner[RL_PRINCIPAL_MAX + 1]; /* for an installation: the user it belongs to */

    char request_id[RL_REQUEST_ID_MAX + 1];
    char trace_id[33];
    char traceparent[RL_TRACEPARENT_LEN + 1];
    char peer[INET6_ADDRSTRLEN];       /* the client's address: behind trusted proxies, the one they name */
    char peer_group[RL_ADDR_TEXT_MAX]; /* what per-address limits count it under (IPv6: its /64) */
    char via[INET6_ADDRSTRLEN];        /* the trusted proxy it came through, or "" */
    char route_name[96];               /* for the access log */
    char method[8];
    int64_t started_us;
    rl_call_rate_t rate;
    int handler_tag; /* free for a handler to carry a small value to its completion */
} rl_call_t;

void rl_call_hold(rl_call_t *call);
/* Drops a reference; the last one frees the call and its body. */
void rl_call_release(rl_call_t *call);
/* 1 while an answer can still be sent. */
int rl_call_alive(const rl_call_t *call);

/* Answers 200 {"ok":true,"result":result}. Steals result (NULL means {}). */
void rl_call_reply(rl_call_t *call, json_t *result);
/* The same answer with the result already encoded as compact JSON (len bytes, only read): no tree is built. */
void rl_call_reply_text(rl_call_t *call, const char *result, size_t len);
/*
 * For a call whose body came flat (call->flat): reads the body again as the
 * generic path does (jansson and the route's schema) into call->body and
 * drops call->flat, so that a handler that meets a rule it does not check
 * on the flat form answers exactly what the generic path answers. 0; or the
 * call was answered with the validator's error, or is no longer alive, and
 * a negative error is returned. A call without a flat body: 0, unchanged.
 */
int rl_call_body_generic(rl_call_t *call);
/* Answers the error's status with {"ok":false,"error":{code,message}}; message NULL = the table's default. */
void rl_call_fail(rl_call_t *call, int err, const char *message);
/*
 * As rl_call_fail, with optional errors[] (validation problems) and details
 * objects; steals both.
 */
void rl_call_fail_full(rl_call_t *call, int err, const char *message, json_t *errors, json_t *details);
/*
 * Answers with a body of any type (plain text, a file's bytes, JSON not in
 * the envelope). The common headers and the access log line are written as
 * for an envelope; Cache-Control defaults to no-store unless the handler
 * added one. The body is copied.
 */
void rl_call_send(rl_call_t *call, int status, const char *content_type, const void *body, size_t len);
/* Adds a response header (copied into the request pool). */
void rl_call_add_header(rl_call_t *call, const char *name, const char *value, size_t value_len);
/* Finds a request header by lower-case name; returns its value or NULL. */
const char *rl_call_header(const rl_call_t *call, const char *name, size_t *len);
/* Copies a path parameter into buf (NUL-terminated); returns 0 or -1 when it does not fit. */
int rl_call_param(const rl_call_t *call, size_t index, char *buf, size_t bufsz);

/* Internal to src/http: the correlation and rate headers, and the access log line. */
void rl__call_common_headers(rl_call_t *call);
void rl__call_log(rl_call_t *call);

/*
 * Continues the request pipeline after the application's authenticate hook:
 * err 0 goes on to rate limiting, validation and the handler; a negative
 * error answers with it. Must be called exactly once per authenticate call.
 */
void rl_call_proceed(rl_call_t *call, int err);
/*
 * Continues after the application's rate-limit hook, which fills call->rate
 * and calls this exactly once, now or later: err 0 goes on to validation and
 * the handler; RL_E_RATE_LIMITED (or any error) answers with it.
 */
void rl_call_limited(rl_call_t *call, int err);

#endif
