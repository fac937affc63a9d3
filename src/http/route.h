/*
 * Route tables: each API surface is one const array of rl_route_t (method,
 * path pattern with :params, handler, auth kind, rate bucket, body schema).
 * Adding a route is adding a row.
 */
#ifndef RL_HTTP_ROUTE_H
#define RL_HTTP_ROUTE_H

#include <stddef.h>

#define RL_ROUTE_MAX_PARAMS 4

struct rl_call;
struct rl_schema;

/*
 * A handler answers with rl_call_reply()/rl_call_fail(), now or later from a
 * completion callback, and returns 0; or it returns a negative RL_E_* error
 * without having answered, and the core answers with that error.
 */
typedef int (*rl_route_handler_fn)(struct rl_call *call);

typedef struct rl_route {
    const char *method;  /* "GET", "POST", "PATCH", "DELETE" */
    const char *pattern; /* "/v1/me/sessions/:id/archive" */
    rl_route_handler_fn handler;
    int auth;                     /* application-defined auth kind; 0 = none */
    const char *bucket;           /* rate-limit bucket name, or NULL */
    const struct rl_schema *body; /* JSON body schema, or NULL when the body is ignored */
    unsigned flags;               /* RL_ROUTE_* */
    size_t max_body;              /* body limit of this route; 0 = the server's (JSON) limit */
    int tag;                      /* handed to the handler as call->handler_tag (one handler, several rows) */
} rl_route_t;

/* The route takes its body raw (not JSON) and reads it itself. */
#define RL_ROUTE_RAW_BODY 0x1u
/* The application may lower the body limit from the request head (rl_http_hooks_t.head_limit). */
#define RL_ROUTE_HEAD_LIMIT 0x2u
/*
 * A hot route: a body that is one flat object (common/json_flat.h) and meets
 * every rule of the route's schema is read without jansson into call->flat,
 * and call->body stays NULL; any other body takes the generic path (jansson
 * and the validator: call->body, and the same errors as ever).
 */
#define RL_ROUTE_FLAT_BODY 0x4u
/*
 * Refused with 503 and Retry-After right after routing, before
 * authentication or its body, while the loop lags past
 * rl_http_config_t.loop_lag_max_ms (docs/internals/http.md).
 */
#define RL_ROUTE_SHED 0x8u

typedef struct rl_route_param {
    const char *base;
    size_t len;
} rl_route_param_t;

typedef enum rl_route_result {
    RL_ROUTE_MATCHED,
    RL_ROUTE_NO_PATH,   /* 404: no pattern matches the path */
    RL_ROUTE_NO_METHOD, /* 405: a pattern matches, but not with this method */
} rl_route_result_t;

/*
 * Finds the row for method + path (path without the query string). On a
 * match *out points at the row and params receive the :param segments in
 * order (pointing into path). On RL_ROUTE_NO_METHOD, allow (if not NULL)
 * receives the methods that would match, comma-separated, in a buffer of
 * allowsz bytes.
 */
rl_route_result_t rl_route_find(const rl_route_t *routes, size_t count, const char *method, size_t method_len,
                                const char *path, size_t path_len, const rl_route_t **out, rl_route_param_t *params,
                                char *allow, size_t allowsz);

/*
 * The same lookup through an index built once per table: a route without
 * :params is found by a hash of its method and path, when no row before it
 * would match its path with its method (else, and for everything else, the
 * table is scanned as rl_route_find does, with the same answers). The table
 * must outlive the index. NULL when out of memory.
 */
typedef struct rl_route_index rl_route_index_t;
rl_route_index_t *rl_route_index_new(const rl_route_t *routes, size_t count);
void rl_route_index_free(rl_route_index_t *index);
rl_route_result_t rl_route_index_find(const rl_route_index_t *index, const char *method, size_t method_len,
                                      const char *path, size_t path_len, const rl_route_t **out,
                                      rl_route_param_t *params, char *allow, size_t allowsz);

#endif
