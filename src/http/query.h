/* Query strings: percent-decoding and parameter lookup. Pure functions, any thread. */
#ifndef RL_HTTP_QUERY_H
#define RL_HTTP_QUERY_H

#include <h2o.h>

enum rl_url_error {
    RL_URL_E_ESCAPE = -1, /* a '%' not followed by two hex digits */
    RL_URL_E_LENGTH = -2, /* the result does not fit in dst */
    RL_URL_E_NUL = -3,    /* the result would hold a NUL byte */
};

/*
 * Percent-decodes len bytes of src ('+' is a space) into dst (dstsz bytes,
 * NUL-terminated). Returns the decoded length, or a negative rl_url_error.
 */
int rl_url_decode(const char *src, size_t len, char *dst, size_t dstsz);
/*
 * Finds parameter name in the request's query and decodes it into out: 0
 * found, 1 absent, -1 malformed or given more than once (the name matched
 * exactly, before any decoding).
 */
int rl_query_param(const h2o_req_t *req, const char *name, char *out, size_t outsz);

#endif
