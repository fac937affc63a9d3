/*
 * Where the user-token key set comes from: a file read once at start, an
 * http(s) URL refreshed in the background, or a fixed set (the embedded
 * issuer's). Whatever the origin, readers get a complete, immutable
 * rl_jwks_t; a refresh swaps the whole set at once, so a reader never sees
 * half of one and never waits on the network.
 */
#ifndef RL_RELAY_JWKS_SOURCE_H
#define RL_RELAY_JWKS_SOURCE_H

#include <stdint.h>

#include "auth/jwt.h"
#include "common/jobs.h"

/* Limits on one fetch of a JWKS URL. */
#define RL_JWKS_FETCH_TIMEOUT_MS   10000
#define RL_JWKS_CONNECT_TIMEOUT_MS 5000
/* Longer refresh intervals are shortened to this (one week). */
#define RL_JWKS_REFRESH_MAX_MS ((int64_t)7 * 24 * 3600 * 1000)
/* rl_jwks_source_refresh_soon never refetches sooner than this after the last fetch. */
#define RL_JWKS_EARLY_REFRESH_GAP_MS 30000

typedef struct rl_jwks_source rl_jwks_source_t;

/*
 * Reads the JWKS file at path once (at most RL_JWKS_DOC_MAX bytes). Returns 0
 * and *out (close with rl_jwks_source_close), or -1 with a clear message
 * logged when the file cannot be read or holds no usable key. Startup thread.
 */
int rl_jwks_source_open_file(const char *path, rl_jwks_source_t **out);
/*
 * Fetches the JWKS at url (http or https; redirects followed, never from
 * https down to http) synchronously, then submits to jobs (common/jobs.h) a
 * run that fetches it again every refresh_ms (<= 0: never, and jobs may be
 * NULL; longer than RL_JWKS_REFRESH_MAX_MS: that) until jobs stop. A fetch succeeds on HTTP 200 with a body of at most
 * RL_JWKS_DOC_MAX bytes that rl_jwks_parse accepts; a failed refresh keeps the previous set and logs a warning. The url
 * is copied; logs show only its scheme and host. Returns 0 and *out, or -1 with a clear message logged when the first
 * fetch fails (startup must then stop). Startup thread, before the event loop runs: it blocks up to
 * RL_JWKS_FETCH_TIMEOUT_MS.
 */
int rl_jwks_source_open_url(const char *url, int64_t refresh_ms, rl_jobs_t *jobs, rl_jwks_source_t **out);
/*
 * A source that always returns keys (e.g. rl_jwt_issuer_jwks). Takes its own
 * reference; the caller keeps and still unrefs its own. Returns 0, or -1 on
 * allocation failure or NULL keys. Any thread.
 */
int rl_jwks_source_open_static(rl_jwks_t *keys, rl_jwks_source_t **out);
/*
 * The current set with a new reference the caller must rl_jwks_unref (never
 * NULL once open succeeded). Thread-safe; takes a mutex held only for a
 * pointer copy, never across network or parsing work, so the loop thread may
 * call it per request.
 */
rl_jwks_t *rl_jwks_source_get(rl_jwks_source_t *source);
/*
 * Asks a URL source to refetch now, e.g. after a token named an unknown kid
 * (key rotation), but never sooner than RL_JWKS_EARLY_REFRESH_GAP_MS after the
 * previous fetch so that unauthenticated clients cannot make the relay hammer
 * the provider. Never blocks; no effect on file and static sources. Any thread.
 */
void rl_jwks_source_refresh_soon(rl_jwks_source_t *source);
/*
 * What a URL source's refresh has decided (for tests, which wait for its next decision rather than sleep
 * through it): how many times it has decided, the monotonic time (µs) it waits for now (0 while it fetches),
 * and when it last fetched. Any thread.
 */
typedef struct rl_jwks_schedule {
    uint64_t rounds;
    int64_t waits_until_us, last_fetch_us;
} rl_jwks_schedule_t;
void rl_jwks_source_schedule(rl_jwks_source_t *source, rl_jwks_schedule_t *out);
/*
 * Frees the source. A URL source's refresh must have ended first: its jobs
 * stopped (rl_jobs_stop interrupts the refresh's wait, aborts a fetch in
 * progress and joins it). References handed out by get stay valid. NULL is
 * ignored. The loop thread; not concurrently with other calls on the source.
 */
void rl_jwks_source_close(rl_jwks_source_t *source);

#endif
