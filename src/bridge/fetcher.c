/* The bridge's downloads, on its background jobs (fetcher.h). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bridge/fetcher.h"
#include "client/client.h"
#include "common/log.h"

#define LINK_SIG_HEX 32

#define FETCH_CONNECT_MS 5000
#define FETCH_TOTAL_MS   60000

struct rl_fetcher {
    rl_jobs_t *jobs;
    void (*ready)(void *user);
    void *user;
    rl_fetch_t *results, *results_tail; /* done, not taken yet: loop only */
};

/* One download at a time, in order; past RL_FETCH_QUEUE_MAX queued or in flight, a submit is refused. */
static const rl_job_kind_t download_kind = {"sealed attachment download", 1, RL_FETCH_QUEUE_MAX};

/* One GET of an absolute URL (the signed link relayd hydrated): job->body on a 200, else logged. A worker. */
static void download(rl_job_t *base)
{
    rl_fetch_t *job = (rl_fetch_t *)base;
    rl_client_options_t options = {FETCH_CONNECT_MS, FETCH_TOTAL_MS, RL_FETCH_BODY_MAX, "relay-bridge",
                                   rl_jobs_stop_flag(base->jobs)};
    rl_client_response_t response;
    int result = rl_client_get_url(job->url, &options, &response);

    if (result == 0 && response.status == 200) {
        job->body = response.body;
        job->len = response.len;
        response.body = NULL;
    } else if (result != RL_CLIENT_E_STOPPED) {
        rl_log(RL_LOG_WARN, "sealed attachment: download failed (HTTP %ld %s)", response.status, response.error);
    }
    rl_client_response_free(&response);
}

/* The loop: a finished download joins the results; one the stop ended is only freed (the fetcher may be gone). */
static void downloaded(rl_job_t *base)
{
    rl_fetch_t *job = (rl_fetch_t *)base;
    rl_fetcher_t *fetcher = job->fetcher;

    if (base->stopped) {
        rl_fetch_free(job);
        return;
    }
    job->next = NULL;
    if (fetcher->results_tail != NULL)
        fetcher->results_tail->next = job;
    else
        fetcher->results = job;
    fetcher->results_tail = job;
    fetcher->ready(fetcher->user);
}

rl_fetcher_t *rl_fetcher_start(rl_jobs_t *jobs, void (*ready)(void *user), void *user)
{
    rl_fetcher_t *fetcher = jobs != NULL ? calloc(1, sizeof(*fetcher)) : NULL;

    if (fetcher == NULL)
        return NULL;
    fetcher->jobs = jobs;
    fetcher->ready = ready;
    fetcher->user = user;
    return fetcher;
}

void rl_fetcher_stop(rl_fetcher_t *fetcher)
{
    rl_fetch_t *job;

    if (fetcher == NULL)
        return;
    while ((job = fetcher->results) != NULL) {
        fetcher->results = job->next;
        rl_fetch_free(job);
    }
    free(fetcher);
}

int rl_fetcher_submit(rl_fetcher_t *fetcher, const char *url, void *owner, size_t index)
{
    rl_fetch_t *job = calloc(1, sizeof(*job));

    if (job != NULL)
        job->url = strdup(url);
    if (job == NULL || job->url == NULL) {
        free(job);
        return -1;
    }
    job->job.kind = &download_kind;
    job->job.run = download;
    job->job.done = downloaded;
    job->fetcher = fetcher;
    job->owner = owner;
    job->index = index;
    if (rl_jobs_submit(fetcher->jobs, &job->job) != 0) {
        rl_fetch_free(job);
        return -1;
    }
    return 0;
}

rl_fetch_t *rl_fetcher_results(rl_fetcher_t *fetcher)
{
    rl_fetch_t *done = fetcher->results;

    fetcher->results = fetcher->results_tail = NULL;
    return done;
}

void rl_fetch_free(rl_fetch_t *job)
{
    if (job == NULL)
        return;
    free(job->url);
    free(job->body);
    free(job);
}

/* ---- which links the bridge follows ---- */

struct origin {
    int https;
    char host[256];
    long port;
    const char *path; /* what follows the authority */
};

/* Splits an http(s) URL into its origin and the rest; -1 when it is not one, or has a user part. */
static int parse_origin(const char *url, struct origin *out)
{
    const char *authority, *end, *port = NULL;
    size_t host_len, i;

    if (strncasecmp(url, "https://", 8) == 0) {
        out->https = 1;
        authority = url + 8;
    } else if (strncasecmp(url, "http://", 7) == 0) {
        out->https = 0;
        authority = url + 7;
    } else {
        return -1;
    }
    end = authority + strcspn(authority, "/?#");
    for (i = 0; url[i] != '\0'; ++i) {
        unsigned char c = (unsigned char)url[i];
        if (c <= 0x20 || c >= 0x7f || c == '\\' || c == '#')
            return -1;
    }
    if (memchr(authority, '@', (size_t)(end - authority)) != NULL)
        return -1;
    if (authority[0] == '[') {
        const char *close = memchr(authority, ']', (size_t)(end - authority));
        if (close == NULL)
            return -1;
        host_len = (size_t)(close + 1 - authority);
        if (close + 1 < end && close[1] != ':')
            return -1;
        port = close + 1 < end ? close + 2 : NULL;
    } else {
        const char *colon = memchr(authority, ':', (size_t)(end - authority));
        host_len = (size_t)((colon != NULL ? colon : end) - authority);
        port = colon != NULL ? colon + 1 : NULL;
    }
    if (host_len == 0 || host_len >= sizeof(out->host))
        return -1;
    memcpy(out->host, authority, host_len);
    out->host[host_len] = '\0';
    out->port = out->https ? 443 : 80;
    if (port != NULL) {
        out->port = 0;
        if (port == end || end - port > 5)
            return -1;
        for (; port < end; ++port) {
            if (*port < '0' || *port > '9')
                return -1;
            out->port = out->port * 10 + (*port - '0');
        }
        if (out->port == 0 || out->port > 65535)
            return -1;
    }
    out->path = end;
    return 0;
}

/* The length of s's run of characters that satisfy accept, at most max; 0 when longer or empty. */
static size_t run_of(const char *s, int (*accept)(int), size_t max)
{
    size_t n = 0;

    while (s[n] != '\0' && accept((unsigned char)s[n]))
        ++n;
    return n <= max ? n : 0;
}

static int key_char(int c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

static int digit_char(int c)
{
    return c >= '0' && c <= '9';
}

static int hex_char(int c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

int rl_fetch_link_allowed(const char *server, const char *url)
{
    struct origin relay, link;
    size_t base_len, n;
    const char *rest;

    if (server == NULL || url == NULL || parse_origin(server, &relay) != 0 || parse_origin(url, &link) != 0)
        return 0;
    if (relay.https != link.https || relay.port != link.port || strcasecmp(relay.host, link.host) != 0)
        return 0;
    /* The server's own path, if it has one (a relay behind a path prefix), without its trailing slash. */
    base_len = strcspn(relay.path, "?#");
    while (base_len > 0 && relay.path[base_len - 1] == '/')
        --base_len;
    if (strncmp(link.path, relay.path, base_len) != 0 || strncmp(link.path + base_len, "/v1/files/", 10) != 0)
        return 0;
    rest = link.path + base_len + 10;
    n = run_of(rest, key_char, 64);
    if (n == 0 || strncmp(rest + n, "?exp=", 5) != 0)
        return 0;
    rest += n + 5;
    n = run_of(rest, digit_char, 20);
    if (n == 0 || strncmp(rest + n, "&sig=", 5) != 0)
        return 0;
    rest += n + 5;
    return run_of(rest, hex_char, LINK_SIG_HEX) == LINK_SIG_HEX && rest[LINK_SIG_HEX] == '\0';
}
