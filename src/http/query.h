/* Query strings: parameter lookup (the decoding is common/percent.h). Pure functions, any thread. */
#ifndef RL_HTTP_QUERY_H
#define RL_HTTP_QUERY_H

#include <h2o.h>

/*
 * Finds parameter name in the request's query and decodes it into out: 0
 * found, 1 absent, -1 malformed or given more than once (the name matched
 * exactly, before any decoding).
 */
int rl_query_param(const h2o_req_t *req, const char *name, char *out, size_t outsz);

#endif
