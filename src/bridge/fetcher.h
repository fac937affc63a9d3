/*
 * The bridge's downloads (docs/bridge.md, "Inside"): the sealed attachments
 * of encrypted sessions are fetched from their signed links on a thread of
 * their own, so that the loop never waits on a download (up to a minute
 * each) while it has pings to answer and other sessions to serve.
 *
 * Each download is a job of the bridge's background jobs (common/jobs.h), of
 * a kind that runs one at a time, in the order submitted, with the blocking
 * client (5 s to connect, 60 s in all, a body capped at RL_FETCH_BODY_MAX).
 * Finished ones are kept, oldest first, for rl_fetcher_results(); the
 * fetcher's ready callback says when, on the loop. Everything a peer can feed
 * is bounded: one download at a time, at most RL_FETCH_QUEUE_MAX jobs queued
 * or in flight, each body capped.
 */
#ifndef RL_BRIDGE_FETCHER_H
#define RL_BRIDGE_FETCHER_H

#include <stddef.h>

#include "common/jobs.h"

/* relayd's upload cap (25 MB) plus a sealed envelope's version byte, nonce and tag. */
#define RL_FETCH_BODY_MAX (25 * 1024 * 1024 + 29)
/* Jobs waiting or in flight; past it a new one is refused. */
#define RL_FETCH_QUEUE_MAX 64

typedef struct rl_fetcher rl_fetcher_t;

/* One download, handed back to the loop once done. */
typedef struct rl_fetch {
    rl_job_t job; /* first: the download is a job */
    struct rl_fetcher *fetcher;
    struct rl_fetch *next;
    void *owner;  /* the loop's, as given to rl_fetcher_submit; untouched by the worker */
    size_t index; /* the same */
    char *url;
    char *body; /* the answer's body on a 200, owned by the job; NULL when the download failed */
    size_t len;
} rl_fetch_t;

/*
 * A fetcher whose downloads run on jobs; ready(user) is called on the loop
 * (from rl_jobs_dispatch) when results are waiting. A client of the client
 * core must have been made before (curl's global init is not thread-safe).
 * NULL on failure.
 */
rl_fetcher_t *rl_fetcher_start(rl_jobs_t *jobs, void (*ready)(void *user), void *user);
/*
 * Frees the results not taken and the fetcher. Downloads not done yet end
 * with the jobs (rl_jobs_stop: one in progress ends within about a second),
 * which free them without the fetcher. Loop thread; NULL is a no-op.
 */
void rl_fetcher_stop(rl_fetcher_t *fetcher);
/*
 * Queues a GET of url (copied) for owner and index. 0, or -1 when the queue
 * holds RL_FETCH_QUEUE_MAX jobs already (or memory ran out): the caller
 * treats the download as failed. Loop thread.
 */
int rl_fetcher_submit(rl_fetcher_t *fetcher, const char *url, void *owner, size_t index);
/* Takes every finished job, oldest first; free each with rl_fetch_free. Loop thread. */
rl_fetch_t *rl_fetcher_results(rl_fetcher_t *fetcher);
void rl_fetch_free(rl_fetch_t *job);

/*
 * 1 when url is a signed file link of the relay at server (the bridge's
 * configured base URL), as relayd makes them: the same scheme, host and port
 * (80 and 443 when unsaid), then server's own path, /v1/files/<key>,
 * ?exp=<digits>&sig=<32 hex digits> and nothing else; 0 for anything else,
 * so that a hostile relay cannot make the bridge (or its agent) request an
 * address of the bridge's own network. No user part, no fragment, no space,
 * control or non-ASCII byte, no backslash. Pure, any thread.
 */
int rl_fetch_link_allowed(const char *server, const char *url);

#endif
