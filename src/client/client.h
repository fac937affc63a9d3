/*
 * The client core's HTTP layer, shared by the command-line programs (catalog
 * now; relay and relay-bridge later): GET requests over libcurl against one
 * base URL, with timeouts, extra headers, the status and a body captured up
 * to a cap fixed in advance, plus helpers to decode JSON answers and the
 * error envelopes of relayd and catalogd.
 *
 * A client is used by one thread at a time. rl_client_new calls
 * curl_global_init the first time, which is not thread-safe: create the
 * first client before starting threads.
 */
#ifndef RL_CLIENT_CLIENT_H
#define RL_CLIENT_CLIENT_H

#include <curl/curl.h>
#include <jansson.h>
#include <stddef.h>

typedef struct rl_client rl_client_t;

typedef struct rl_client_options {
    long connect_timeout_ms; /* 0: 5 s */
    long timeout_ms;         /* the whole exchange; 0: 30 s */
    size_t max_body;         /* bytes kept of a body; a larger one fails with RL_CLIENT_E_TOO_LARGE; 0: 64 MiB */
    const char *user_agent;  /* NULL: "relay-client" */
    /*
     * NULL, or a flag another thread sets (atomically) to end a transfer in
     * progress: it then fails with RL_CLIENT_E_STOPPED within about a second.
     */
    const int *stop;
} rl_client_options_t;

typedef enum rl_client_error {
    RL_CLIENT_OK = 0,
    RL_CLIENT_E_USAGE = -1,     /* a bad base URL or argument */
    RL_CLIENT_E_CONNECT = -2,   /* name resolution or connection failed */
    RL_CLIENT_E_TIMEOUT = -3,   /* no complete answer in time */
    RL_CLIENT_E_TOO_LARGE = -4, /* the body passed max_body */
    RL_CLIENT_E_TRANSFER = -5,  /* anything else on the wire */
    RL_CLIENT_E_STOPPED = -6,   /* rl_retry_request: the caller stopped the retries; or options.stop was set */
    RL_CLIENT_E_TRUST = -7,     /* the server's certificate is not trusted (or the CA bundle is unreadable) */
} rl_client_error_t;

typedef struct rl_client_response {
    long status; /* HTTP status; 0 when no answer arrived */
    char *body;  /* NUL-terminated (the NUL is not counted in len); owned by the response */
    size_t len;
    char content_type[128]; /* "" when absent */
    char error[256];        /* why the request failed, for people, naming the server once; "" on success */
    /* Headers the relay's clients act on ("" or -1 when absent). */
    char request_id[72];          /* X-Request-ID: log it with every error (spec client rule 6) */
    long retry_after_s;           /* Retry-After */
    long ratelimit_limit;         /* X-RateLimit-Limit */
    long ratelimit_remaining;     /* X-RateLimit-Remaining */
    double ratelimit_reset_after; /* X-RateLimit-Reset-After, seconds; -1 when absent */
    char ratelimit_bucket[32];    /* X-RateLimit-Bucket */
} rl_client_response_t;

/*
 * Creates a client for base_url ("http://127.0.0.1:8090", a trailing slash is
 * dropped). options may be NULL. Returns 0, or RL_CLIENT_E_USAGE when the URL
 * is not http:// or https://.
 */
int rl_client_new(const char *base_url, const rl_client_options_t *options, rl_client_t **out);
void rl_client_free(rl_client_t *client);
/*
 * TLS trust for a curl handle of the client core: the system's CA store;
 * CURL_CA_BUNDLE (as the curl tool reads it) names a PEM bundle to use
 * instead of the default bundle file, for a relay whose certificate comes
 * from a private CA. Peer and host name are always verified.
 */
void rl_client_tls_setup(CURL *curl);
/* The base URL as normalised by rl_client_new. */
const char *rl_client_base(const rl_client_t *client);

/*
 * GETs base_url + path (path starts with '/', already escaped). headers is a
 * NULL-terminated list of "Name: value" lines, or NULL. Returns 0 when an
 * answer arrived, whatever its status, or a negative rl_client_error_t with
 * response->error saying why. Free the response with rl_client_response_free
 * in both cases.
 */
int rl_client_get(rl_client_t *client, const char *path, const char *const *headers, rl_client_response_t *response);
/*
 * One GET of an absolute URL (scheme://host[:port]/path, e.g. a signed link
 * relayd handed out) with a client made for it and freed after. Returns as
 * rl_client_get, or -1 when url has no path or is too
 * long (response->status 0). Free the response in every case. Blocking: call
 * it from a thread that may wait.
 */
int rl_client_get_url(const char *url, const rl_client_options_t *options, rl_client_response_t *response);
/*
 * Any method: body (len bytes, may be NULL) is sent as is; give its type in
 * headers ("Content-Type: application/json"). Same contract as
 * rl_client_get.
 */
int rl_client_request(rl_client_t *client, const char *method, const char *path, const char *const *headers,
                      const void *body, size_t len, rl_client_response_t *response);
void rl_client_response_free(rl_client_response_t *response);

/*
 * Our words for a libcurl failure (a CURLcode), for people: what happened,
 * without naming the server, never curl's own wording ("Transferred a
 * partial file"). Static text.
 */
const char *rl_client_failure_text(int curl_code);
/*
 * Whether a libcurl failure happened before any answer could begin
 * (resolution, connection, TLS): "cannot reach" is then the right verb.
 */
int rl_client_failure_is_reach(int curl_code);

/* Percent-escapes s for a URL path segment or query value. Returns a malloc'd string, or NULL. */
char *rl_client_escape(const char *s);

/*
 * Parses the body as one JSON value. Returns a new reference, or NULL with a
 * message in err (errsz bytes).
 */
json_t *rl_client_json(const rl_client_response_t *response, char *err, size_t errsz);

/*
 * The human message of an error answer: error.message of the relay/catalog
 * envelope, or an "error" string; NULL when the body says neither. The
 * pointer lives as long as body.
 */
const char *rl_client_error_message(const json_t *body);
/* error.code of the envelope, or NULL. */
const char *rl_client_error_code(const json_t *body);

#endif
