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

#define RL_QUERY_NOT_INTEGER (-1)
#define RL_QUERY_TWICE       (-2)
/*
 * Reads parameter name as a whole decimal number (an optional sign, then
 * digits, as many as sent) into *out, saturated to the range of long long,
 * so that the caller clamps an over-large number or calls it too big rather
 * than failing to read it. 0 found, 1 absent, RL_QUERY_NOT_INTEGER for
 * anything else (empty, a fraction, letters, a bad escape), RL_QUERY_TWICE
 * when given more than once.
 */
int rl_query_integer(const h2o_req_t *req, const char *name, long long *out);

#endif
