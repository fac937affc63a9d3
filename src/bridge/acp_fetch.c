/* The acp adapter: attachments fetched for a prompt by the bridge's job queue (acp.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "bridge/acp.h"
#include "client/client.h"
#include "client/credentials.h"
#include "common/log.h"

/* ---- attachments fetched for the prompt ------------------------------------------------------- */

/* What to fetch of an attachment for an agent with these capabilities: "image", "text" or NULL (a link will do). */
static const char *inline_kind(struct rl_agent *a, json_t *attachment, long *max)
{
    const char *mime = json_string_value(json_object_get(attachment, "mime"));
    json_int_t size = json_integer_value(json_object_get(attachment, "size"));

    if (mime == NULL || !json_is_string(json_object_get(attachment, "url")))
        return NULL;
    if (a->image && strncmp(mime, "image/", 6) == 0 && size <= FETCH_IMAGE_MAX) {
        *max = FETCH_IMAGE_MAX;
        return "image";
    }
    if (a->embedded_context && strncmp(mime, "text/", 5) == 0 && size <= FETCH_TEXT_MAX) {
        *max = FETCH_TEXT_MAX;
        return "text";
    }
    return NULL;
}

/* One GET of an absolute URL with the client core: the body, or NULL. */
static char *fetch_url(const char *url, long max, size_t *len, const int *stop)
{
    rl_client_options_t options = {5000, FETCH_TIMEOUT_MS, (size_t)max, "relay-bridge", stop};
    rl_client_response_t response;
    char *body = NULL;

    if (rl_client_get_url(url, &options, &response) == 0 && response.status == 200) {
        body = response.body;
        *len = response.len;
        response.body = NULL;
    } else {
        rl_log(RL_LOG_WARN, "acp: could not fetch an attachment (HTTP %ld %s): sent as a link", response.status,
               response.error);
    }
    rl_client_response_free(&response);
    return body;
}

/*
 * The bytes of a sealed attachment the bridge opened itself (bridge/sealed.h:
 * a file:// URL under its config folder, never one the relay gave): read
 * from disk, up to max bytes. The body, or NULL.
 */
static char *read_opened(const char *path, long max, size_t *len)
{
    char *body = malloc((size_t)max + 1);
    size_t got = 0;
    ssize_t n = 1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    while (fd >= 0 && body != NULL && n > 0 && got <= (size_t)max) {
        n = read(fd, body + got, (size_t)max + 1 - got);
        if (n < 0 && errno == EINTR)
            n = 1;
        else if (n > 0)
            got += (size_t)n;
    }
    if (fd < 0 || n < 0 || got > (size_t)max) {
        rl_log(RL_LOG_WARN, "acp: could not read an opened attachment (%s): sent as a link",
               fd < 0 || n < 0 ? strerror(errno) : "too large");
        free(body);
        body = NULL;
    }
    if (fd >= 0)
        close(fd);
    *len = got;
    return body;
}

/*
 * 1 when path is a file the bridge wrote when it opened a sealed attachment
 * (bridge/sealed.h: <config>/attachments/<key>/<name>). Only those are read
 * from disk: a path the relay put in an update names nothing to read.
 */
static int opened_here(const char *path)
{
    char dir[3200], *real = NULL, *folder = NULL;
    size_t n = 0;
    int result = 0;

    if (path == NULL || rl_credentials_path("attachments", dir, sizeof(dir)) != 0)
        return 0;
    n = strlen(dir);
    if (n < 5)
        return 0;
    dir[n - 5] = '\0'; /* the ".json" the credentials path adds, as sealed.c takes it off */
    folder = realpath(dir, NULL);
    real = realpath(path, NULL);
    if (folder != NULL && real != NULL && strncmp(real, folder, strlen(folder)) == 0 && real[strlen(folder)] == '/')
        result = 1;
    free(folder);
    free(real);
    return result;
}

static const rl_job_kind_t fetch_kind = {"attachment fetch", 0, 0};

static void fetch_run(rl_job_t *job)
{
    fetch_t *f = (fetch_t *)job;
    json_t *want;
    size_t i;

    json_array_foreach(f->wanted, i, want)
    {
        const char *as = json_string_value(json_object_get(want, "as"));
        const char *url = json_string_value(json_object_get(want, "url"));
        json_t *block = NULL;
        size_t len = 0;
        const char *opened = json_string_value(json_object_get(want, "path"));
        long max = (long)json_integer_value(json_object_get(want, "max"));
        char *body = as == NULL       ? NULL
                     : opened != NULL ? read_opened(opened, max, &len)
                                      : fetch_url(url, max, &len, rl_jobs_stop_flag(job->jobs));

        if (body != NULL && strcmp(as, "image") == 0) {
            char *data = malloc(4 * ((len + 2) / 3) + 1);
            if (data != NULL) {
                EVP_EncodeBlock((unsigned char *)data, (const unsigned char *)body, (int)len);
                block = json_pack("{s:s, s:s, s:O, s:s}", "type", "image", "data", data, "mimeType",
                                  json_object_get(want, "mime"), "uri", url);
            }
            free(data);
        } else if (body != NULL) {
            json_t *text = json_stringn(body, len);
            /* Not UTF-8 after all: the link will do. */
            if (text != NULL)
                block = json_pack("{s:s, s:{s:s, s:O, s:o}}", "type", "resource", "resource", "uri", url, "mimeType",
                                  json_object_get(want, "mime"), "text", text);
        }
        free(body);
        json_array_append_new(f->blocks, block != NULL ? block : json_null());
    }
}

/* A fetch is back: its blocks go to its prompt, which may now be sent. */
static void fetch_done(rl_job_t *job)
{
    fetch_t *done = (fetch_t *)job, **pp;
    struct rl_agent *a = done->agent;
    session_t *s;
    int stopped = job->stopped;

    for (pp = &a->fetches; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == done) {
            *pp = done->next;
            break;
        }
    }
    if (done->prompt != NULL) {
        done->prompt->fetch = NULL;
        if (!stopped)
            done->prompt->inline_blocks = json_incref(done->blocks);
    }
    json_decref(done->wanted);
    json_decref(done->blocks);
    free(done);
    for (s = a->sessions; !stopped && s != NULL; s = s->next)
        rl_acp__pump(a, s);
}

/* Starts fetching p's attachments that go inline; the prompt waits for them. Nothing to fetch: nothing done. */
void rl_acp__fetch_start(struct rl_agent *a, prompt_t *p)
{
    json_t *wanted = json_array(), *item;
    fetch_t *f;
    size_t i, count = 0;
    long max = 0;

    json_array_foreach(json_object_get(p->message, "attachments"), i, item)
    {
        const char *as = inline_kind(a, item, &max);
        if (as != NULL) {
            json_t *want = json_pack("{s:s, s:O, s:O, s:I}", "as", as, "url", json_object_get(item, "url"), "mime",
                                     json_object_get(item, "mime"), "max", (json_int_t)max);
            /* In an encrypted session the bridge opened the file itself: its bytes are on this machine. */
            if (want != NULL && opened_here(json_string_value(json_object_get(item, "path"))))
                json_object_set(want, "path", json_object_get(item, "path"));
            json_array_append_new(wanted, want);
            count++;
        } else {
            json_array_append_new(wanted, json_null());
        }
    }
    f = count > 0 ? calloc(1, sizeof(*f)) : NULL;
    if (f == NULL) {
        json_decref(wanted);
        return;
    }
    f->wanted = wanted;
    f->blocks = json_array();
    f->prompt = p;
    f->agent = a;
    f->job.kind = &fetch_kind;
    f->job.run = fetch_run;
    f->job.done = fetch_done;
    if (rl_bridge_jobs(a->bridge) == NULL || rl_jobs_submit(rl_bridge_jobs(a->bridge), &f->job) != 0) {
        json_decref(f->wanted);
        json_decref(f->blocks);
        free(f);
        return;
    }
    p->fetch = f;
    f->next = a->fetches;
    a->fetches = f;
}
