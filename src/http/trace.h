/*
 * Request correlation: X-Request-ID and W3C traceparent (spec: "Common
 * headers on every /v1 response"). Pure functions, any thread.
 */
#ifndef RL_HTTP_TRACE_H
#define RL_HTTP_TRACE_H

#include <stddef.h>
#include <stdint.h>

#define RL_REQUEST_ID_MAX  64
#define RL_TRACEPARENT_LEN 55

typedef struct rl_traceparent {
    char trace_id[33];  /* 32 lowercase hex */
    char parent_id[17]; /* 16 lowercase hex */
    uint8_t flags;
} rl_traceparent_t;

/* spec: a client value matching [A-Za-z0-9._:-]{1,64} is echoed unchanged. */
int rl_request_id_is_valid(const char *value, size_t len);
/* Writes "req_" + 16 lowercase hex and a NUL; out needs 21 bytes. */
void rl_request_id_generate(char *out);

/*
 * Parses a traceparent header. Version 00 must be exactly 55 characters;
 * a later version (not ff) may carry more after a '-', which is ignored.
 * All-zero trace or parent ids and upper-case hex are invalid.
 * Returns 0, or -1 when the value must be treated as absent.
 */
int rl_traceparent_parse(const char *value, size_t len, rl_traceparent_t *out);
/*
 * Derives the response traceparent: keeps a valid incoming trace id and
 * flags with a fresh parent id, or starts a new sampled trace. Writes 55
 * characters and a NUL into out (56 bytes); trace_id_out (33 bytes) gets the
 * trace id for logging.
 */
void rl_traceparent_respond(const rl_traceparent_t *incoming, char *out, char *trace_id_out);

#endif
