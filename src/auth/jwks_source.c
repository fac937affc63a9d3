#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/jobs.h"
#include "common/log.h"
#include "auth/jwks_source.h"

#define ORIGIN_MAX 300

struct rl_jwks_source {
    pthread_mutex_t lock; /* guards current, wake_early and last_fetch_us */
    pthread_cond_t wake;  /* on CLOCK_MONOTONIC: wakes the refresh thread to stop or refetch */
    rl_jwks_t *current;
    char *url;               /* NULL for file and static sources */
    char origin[ORIGIN_MAX]; /* scheme://host of url: what logs show, since a URL may carry a secret */
    int64_t refresh_ms;
    int64_t last_fetch_us; /* monotonic time of the last fetch attempt */
    int wake_early;        /* rl_jwks_source_refresh_soon was called */
    int64_t waits_until_us; /* what the refresh waits for now (monotonic; 0: a fetch runs) */
    uint64_t rounds;        /* how many times the refresh has decided what to wait for */
    atomic_bool stopping;  /* read by curl's progress callback, outside the lock */
    rl_job_t refresher;    /* the refresh, a run on the relay's background jobs */
    int has_refresher;     /* submitted */
    int refresher_done;    /* its done was called (the jobs stopped); loop only */
};

static rl_jwks_source_t *source_new(void)
{
    rl_jwks_source_t *source = calloc(1, sizeof(*source));
    pthread_condattr_t attr;

    if (source == NULL)
        return NULL;
    pthread_mutex_init(&source->lock, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&source->wake, &attr);
    pthread_condattr_destroy(&attr);
    atomic_init(&source->stopping, 0);
    return source;
}

/* Replaces the current set; the old one lives on in whichever readers still hold it. */
static void source_swap(rl_jwks_source_t *source, rl_jwks_t *keys)
{
    rl_jwks_t *old;

    pthread_mutex_lock(&source->lock);
    old = source->current;
    source->current = keys;
    pthread_mutex_unlock(&source->lock);
    rl_jwks_unref(old);
}

int rl_jwks_source_open_static(rl_jwks_t *keys, rl_jwks_source_t **out)
{
    rl_jwks_source_t *source;

    *out = NULL;
    if (keys == NULL)
        return -1;
    source = source_new();
    if (source == NULL)
        return -1;
    source->current = rl_jwks_ref(keys);
    *out = source;
    return 0;
}

int rl_jwks_source_open_file(const char *path, rl_jwks_source_t **out)
{
    char *text = NULL;
    struct stat st;
    size_t have = 0;
    rl_jwks_t *keys = NULL;
    int fd, result = -1;

    *out = NULL;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0) {
        rl_log_error("jwks file %s: %s", path, strerror(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode) || st.st_size > RL_JWKS_DOC_MAX) {
        rl_log_error("jwks file %s: not a regular file of at most %d bytes", path, RL_JWKS_DOC_MAX);
        goto out;
    }
    text = malloc((size_t)st.st_size + 1);
    if (text == NULL) {
        rl_log_error("jwks file %s: %s", path, strerror(ENOMEM));
        goto out;
    }
    while (have < (size_t)st.st_size) {
        ssize_t got = read(fd, text + have, (size_t)st.st_size - have);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            rl_log_error("jwks file %s: %s", path, strerror(errno));
            goto out;
        }
        if (got == 0)
            break;
        have += (size_t)got;
    }
    if (rl_jwks_parse(text, have, &keys) != 0) {
        rl_log_error("jwks file %s: not a JWKS with at least one usable RS256, ES256 or EdDSA key", path);
        goto out;
    }
    result = rl_jwks_source_open_static(keys, out);
    if (result == 0)
        rl_log_info("user-token keys: %zu from %s", rl_jwks_count(keys), path);
out:
    rl_jwks_unref(keys);
    free(text);
    if (fd >= 0)
        close(fd);
    return result;
}

/* ---- URL source ---- */

static size_t body_write(char *data, size_t size, size_t count, void *userdata)
{
    size_t len = size * count;

    /* Returning short makes curl fail the transfer: the cap holds even without a Content-Length. */
    return rl_buf_append(userdata, data, len) == 0 ? len : 0;
}

static int fetch_progress(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
    rl_jwks_source_t *source = userdata;

    return atomic_load(&source->stopping) ? 1 : 0;
}

/* Fetches and parses the set once. Returns 0 and *out, or -1 with a log-safe reason in err. */
static int source_fetch(rl_jwks_source_t *source, rl_jwks_t **out, char *err, size_t errsz)
{
    char curl_err[CURL_ERROR_SIZE] = "";
    rl_buf_t body;
    struct curl_slist *headers = NULL;
    CURL *curl = curl_easy_init();
    int https = strncasecmp(source->url, "https:", 6) == 0;
    long status = 0;
    CURLcode code;
    int result = -1;

    *out = NULL;
    rl_buf_init(&body, RL_JWKS_DOC_MAX);
    if (curl == NULL) {
        snprintf(err, errsz, "cannot start a transfer");
        goto out;
    }
    headers = curl_slist_append(NULL, "Accept: application/jwk-set+json, application/json");
    curl_easy_setopt(curl, CURLOPT_URL, source->url);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, https ? "https" : "http,https");
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 3L);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, (long)RL_JWKS_FETCH_TIMEOUT_MS);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, (long)RL_JWKS_CONNECT_TIMEOUT_MS);
    curl_easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)RL_JWKS_DOC_MAX);
    curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "relayd");
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, curl_err);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, body_write);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, fetch_progress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, source);
    code = curl_easy_perform(curl);
    if (code != CURLE_OK) {
        snprintf(err, errsz, "%s", curl_err[0] != '\0' ? curl_err : curl_easy_strerror(code));
        goto out;
    }
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200) {
        snprintf(err, errsz, "HTTP status %ld", status);
        goto out;
    }
    if (body.len == 0 || rl_jwks_parse(body.bytes, body.len, out) != 0) {
        snprintf(err, errsz, "not a JWKS with at least one usable RS256, ES256 or EdDSA key");
        goto out;
    }
    result = 0;
out:
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    rl_buf_free(&body);
    return result;
}

/* The refresh: a run that lasts until the jobs stop (interrupt_refresh wakes its wait then). */
static void refresh_run(rl_job_t *job)
{
    rl_jwks_source_t *source = (rl_jwks_source_t *)((char *)job - offsetof(rl_jwks_source_t, refresher));
    char err[CURL_ERROR_SIZE + 64];

    pthread_mutex_lock(&source->lock);
    while (!atomic_load(&source->stopping)) {
        int64_t due = source->last_fetch_us + source->refresh_ms * 1000;
        int64_t now = rl_clock_mono_us();
        rl_jwks_t *keys;

        if (source->wake_early && source->last_fetch_us + RL_JWKS_EARLY_REFRESH_GAP_MS * 1000 < due)
            due = source->last_fetch_us + RL_JWKS_EARLY_REFRESH_GAP_MS * 1000;
        source->rounds++;
        source->waits_until_us = now < due ? due : 0;
        if (now < due) {
            struct timespec deadline = {.tv_sec = due / 1000000, .tv_nsec = due % 1000000 * 1000};
            pthread_cond_timedwait(&source->wake, &source->lock, &deadline);
            continue;
        }
        source->wake_early = 0;
        source->last_fetch_us = now;
        pthread_mutex_unlock(&source->lock);
        if (source_fetch(source, &keys, err, sizeof(err)) == 0) {
            rl_log_debug("user-token keys: %zu from %s", rl_jwks_count(keys), source->origin);
            source_swap(source, keys);
        } else if (!atomic_load(&source->stopping)) {
            rl_log_warn("user-token keys: refresh from %s failed, keeping the previous set: %s", source->origin, err);
        }
        pthread_mutex_lock(&source->lock);
    }
    pthread_mutex_unlock(&source->lock);
}

static void interrupt_refresh(rl_job_t *job)
{
    rl_jwks_source_t *source = (rl_jwks_source_t *)((char *)job - offsetof(rl_jwks_source_t, refresher));

    pthread_mutex_lock(&source->lock);
    atomic_store(&source->stopping, 1);
    pthread_cond_signal(&source->wake);
    pthread_mutex_unlock(&source->lock);
}

static void refresh_done(rl_job_t *job)
{
    rl_jwks_source_t *source = (rl_jwks_source_t *)((char *)job - offsetof(rl_jwks_source_t, refresher));

    source->refresher_done = 1;
}

/* Fills source->origin with scheme://host; refuses URLs that are not absolute http(s). */
static int url_origin(const char *url, char *origin, size_t size)
{
    CURLU *parsed = curl_url();
    char *scheme = NULL, *host = NULL;
    int result = -1;

    if (parsed == NULL || curl_url_set(parsed, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_get(parsed, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        curl_url_get(parsed, CURLUPART_HOST, &host, 0) != CURLUE_OK)
        goto out;
    if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0)
        goto out;
    snprintf(origin, size, "%s://%s", scheme, host);
    result = 0;
out:
    curl_free(scheme);
    curl_free(host);
    curl_url_cleanup(parsed);
    return result;
}

int rl_jwks_source_open_url(const char *url, int64_t refresh_ms, rl_jobs_t *jobs, rl_jwks_source_t **out)
{
    static const rl_job_kind_t refresh_kind = {"user-token key refresh", 0, 0};
    rl_jwks_source_t *source = NULL;
    char err[CURL_ERROR_SIZE + 64];
    rl_jwks_t *keys = NULL;
    int result = -1;

    *out = NULL;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        rl_log_error("user-token keys: cannot initialise libcurl");
        return -1;
    }
    source = source_new();
    if (source != NULL)
        source->url = strdup(url);
    if (source == NULL || source->url == NULL) {
        rl_log_error("user-token keys: %s", strerror(ENOMEM));
        rl_jwks_source_close(source);
        curl_global_cleanup();
        return -1;
    }
    if (url_origin(url, source->origin, sizeof(source->origin)) != 0) {
        rl_log_error("user-token keys: the JWKS URL is not an absolute http or https URL");
        goto out;
    }
    source->refresh_ms = refresh_ms > RL_JWKS_REFRESH_MAX_MS ? RL_JWKS_REFRESH_MAX_MS : refresh_ms;
    source->last_fetch_us = rl_clock_mono_us();
    if (source_fetch(source, &keys, err, sizeof(err)) != 0) {
        rl_log_error("user-token keys: cannot fetch the JWKS from %s: %s", source->origin, err);
        goto out;
    }
    rl_log_info("user-token keys: %zu from %s", rl_jwks_count(keys), source->origin);
    source->current = keys;
    if (refresh_ms > 0) {
        source->refresher.kind = &refresh_kind;
        source->refresher.run = refresh_run;
        source->refresher.done = refresh_done;
        source->refresher.interrupt = interrupt_refresh;
        if (jobs == NULL || rl_jobs_submit(jobs, &source->refresher) != 0) {
            rl_log_error("user-token keys: cannot start the refresh");
            goto out;
        }
        source->has_refresher = 1;
    }
    *out = source;
    source = NULL;
    result = 0;
out:
    rl_jwks_source_close(source);
    return result;
}

rl_jwks_t *rl_jwks_source_get(rl_jwks_source_t *source)
{
    rl_jwks_t *keys;

    pthread_mutex_lock(&source->lock);
    keys = rl_jwks_ref(source->current);
    pthread_mutex_unlock(&source->lock);
    return keys;
}

void rl_jwks_source_schedule(rl_jwks_source_t *source, rl_jwks_schedule_t *out)
{
    pthread_mutex_lock(&source->lock);
    out->rounds = source->rounds;
    out->waits_until_us = source->waits_until_us;
    out->last_fetch_us = source->last_fetch_us;
    pthread_mutex_unlock(&source->lock);
}

void rl_jwks_source_refresh_soon(rl_jwks_source_t *source)
{
    if (!source->has_refresher)
        return;
    pthread_mutex_lock(&source->lock);
    source->wake_early = 1;
    pthread_cond_signal(&source->wake);
    pthread_mutex_unlock(&source->lock);
}

void rl_jwks_source_close(rl_jwks_source_t *source)
{
    if (source == NULL)
        return;
    /* Its jobs stopped first (rl_relay_stop): the refresh has returned. */
    assert(!source->has_refresher || source->refresher_done);
    /* Pairs with the curl_global_init of rl_jwks_source_open_url, which is what gave the source a url. */
    if (source->url != NULL)
        curl_global_cleanup();
    rl_jwks_unref(source->current);
    pthread_cond_destroy(&source->wake);
    pthread_mutex_destroy(&source->lock);
    free(source->url);
    free(source);
}
