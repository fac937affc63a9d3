/*
 * The relay's client API (the /v1/me routes) as the terminal client calls it: one
 * call is one request under the spec's client handling rules
 * (rl_retry_request), with the user's bearer token, the account's one rate
 * bucket, and the {ok, result} / {ok: false, error} envelope decoded.
 * One thread.
 */
#ifndef RL_CLIENT_API_H
#define RL_CLIENT_API_H

#include <jansson.h>
#include <stddef.h>

/* Why a call failed. */
typedef struct rl_api_error {
    int transport;       /* no answer at all */
    long status;         /* HTTP status; 0 without an answer */
    char code[64];       /* error.code of the envelope, or "" */
    char message[300];   /* for people */
    char request_id[72]; /* X-Request-ID of the answer (spec client rule 6), or "" */
} rl_api_error_t;

typedef struct rl_api rl_api_t;

/* Told before each retry, with a line for people ("HTTP 429 (request req_...); retrying in 1200 ms"). */
typedef void (*rl_api_note_t)(void *user, const char *text);

/*
 * A client of server (an http:// or https:// base URL) with token, which is
 * copied and sent only in the Authorization header. Returns 0, or
 * RL_CLIENT_E_USAGE for a URL of another scheme.
 */
int rl_api_new(const char *server, const char *token, const char *user_agent, rl_api_t **out);
void rl_api_free(rl_api_t *api);
void rl_api_set_note(rl_api_t *api, rl_api_note_t note, void *user);
/*
 * Sends "X-Relay-Device: device_id" with every later call (the device this
 * client holds keys as, docs/api.md "Devices"); NULL or "" stops it.
 */
void rl_api_set_device(rl_api_t *api, const char *device_id);
/* The server's base URL as normalised (no trailing slash). */
const char *rl_api_base(const rl_api_t *api);

/*
 * One call. body (may be NULL) is sent as JSON and not stolen. Returns 0
 * with *result (may be NULL) holding the envelope's result, a new reference;
 * or -1 with error filled. A call gives up after 6 attempts, 429 and 503
 * included.
 */
int rl_api_call(rl_api_t *api, const char *method, const char *path, const json_t *body, json_t **result,
                rl_api_error_t *error);

/* Formats fmt, which holds one %s, with id percent-escaped into out. 0, or -1 when it does not fit. */
int rl_api_path(char *out, size_t outsz, const char *fmt, const char *id);

#endif
