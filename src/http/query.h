/* Query strings: percent-decoding and parameter lookup. Pure functions, any thread. */
#ifndef RL_HTTP_QUERY_H
#define RL_HTTP_QUERY_H

#include <h2o.h>

/* Percent-decodes len bytes of src ('+' is a space) into dst (dstsz with the NUL); 0, or -1 when malformed, too long or holding a NUL. */
int rl_url_decode(const char *src, size_t len, char *dst, size_t dstsz);
/* Finds parameter name in the request's query and decodes it into out: 0 found, 1 absent, -1 malformed. */
int rl_query_param(const h2o_req_t *req, const char *name, char *out, size_t outsz);

#endif
