/* Background jobs (jobs.h): worker threads, one eventfd back to the loop. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/jobs.h"
#include "common/log.h"

/* Kinds in use at once: a bridge has a handful. */
#define KINDS_MAX 16

/* What a worker hands back: bytes posted by a run, or (bytes NULL) its end. */
typedef struct event {
    struct event *next;
    rl_job_t *job;
    char *bytes;
    size_t len;
    int done;
} event_t;

typedef struct kind_count {
    const rl_job_kind_t *kind;
    int running;
    size_t queued; /* waiting or running */
} kind_count_t;

struct rl_jobs {
    pthread_mutex_t lock;
    pthread_cond_t work;  /* a job came, a kind's slot freed, or the stop */
    pthread_cond_t space; /* the loop took what was posted, or the stop */
    pthread_t threads[RL_JOBS_THREADS_MAX];
    int nthreads, idle;
    int post_waiters; /* runs waiting in rl_job_post for space */
    rl_job_t *head, *tail; /* waiting */
    rl_job_t *running;     /* under way on a worker, linked by next */
    event_t *events, *events_tail;
    size_t posted; /* bytes of events not taken */
    kind_count_t kinds[KINDS_MAX];
    int stopping; /* atomic: the client core polls it */
    int efd;
};

static kind_count_t *count_of(rl_jobs_t *jobs, const rl_job_kind_t *kind)
{
    int i;

    for (i = 0; i < KINDS_MAX && jobs->kinds[i].kind != NULL; i++)
        if (jobs->kinds[i].kind == kind)
            return &jobs->kinds[i];
    if (i == KINDS_MAX)
        return NULL;
    jobs->kinds[i].kind = kind;
    return &jobs->kinds[i];
}

static void wake_loop(rl_jobs_t *jobs)
{
    uint64_t one = 1;

    if (write(jobs->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
        rl_log(RL_LOG_WARN, "could not wake the loop: %s", strerror(errno));
}

/* Appends an event; with the lock held. */
static void push_event(rl_jobs_t *jobs, event_t *event)
{
    if (jobs->events_tail != NULL)
        jobs->events_tail->next = event;
    else
        jobs->events = event;
    jobs->events_tail = event;
    wake_loop(jobs);
}

/* The oldest waiting job whose kind has a free slot, taken off the queue; with the lock held. */
static rl_job_t *take_runnable(rl_jobs_t *jobs)
{
    rl_job_t **p, *prev = NULL;

    for (p = &jobs->head; *p != NULL; prev = *p, p = &(*p)->next) {
        rl_job_t *job = *p;
        kind_count_t *count = count_of(jobs, job->kind);
        if (job->kind->max_running > 0 && count->running >= job->kind->max_running)
            continue;
        *p = job->next;
        if (jobs->tail == job)
            jobs->tail = prev;
        job->next = jobs->running;
        jobs->running = job;
        count->running++;
        return job;
    }
    return NULL;
}

/* Takes job off the list of runs under way; with the lock held. */
static void unlink_running(rl_jobs_t *jobs, rl_job_t *job)
{
    rl_job_t **p;

    for (p = &jobs->running; *p != NULL; p = &(*p)->next) {
        if (*p == job) {
            *p = job->next;
            job->next = NULL;
            return;
        }
    }
}

static void *worker_main(void *arg)
{
    rl_jobs_t *jobs = arg;

    pthread_mutex_lock(&jobs->lock);
    while (!jobs->stopping) {
        rl_job_t *job = take_runnable(jobs);
        event_t *event;
        kind_count_t *count;
        if (job == NULL) {
            jobs->idle++;
            pthread_cond_wait(&jobs->work, &jobs->lock);
            jobs->idle--;
            continue;
        }
        pthread_mutex_unlock(&jobs->lock);
        job->run(job);
        /* Made at the submit, so that the loop always hears of the end. */
        event = job->end;
        job->end = NULL;
        pthread_mutex_lock(&jobs->lock);
        unlink_running(jobs, job);
        count = count_of(jobs, job->kind);
        count->running--;
        count->queued--;
        event->job = job;
        event->done = 1;
        push_event(jobs, event);
        /* A slot of its kind is free: a waiting job of that kind may go. */
        pthread_cond_broadcast(&jobs->work);
    }
    pthread_mutex_unlock(&jobs->lock);
    return NULL;
}

rl_jobs_t *rl_jobs_start(void)
{
    rl_jobs_t *jobs = calloc(1, sizeof(*jobs));

    if (jobs == NULL)
        return NULL;
    jobs->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (jobs->efd < 0) {
        free(jobs);
        return NULL;
    }
    pthread_mutex_init(&jobs->lock, NULL);
    pthread_cond_init(&jobs->work, NULL);
    pthread_cond_init(&jobs->space, NULL);
    return jobs;
}

int rl_jobs_fd(const rl_jobs_t *jobs)
{
    return jobs->efd;
}

const int *rl_jobs_stop_flag(const rl_jobs_t *jobs)
{
    return &jobs->stopping;
}

void rl_jobs_waiting(rl_jobs_t *jobs, int *idle_workers, int *blocked_posts)
{
    pthread_mutex_lock(&jobs->lock);
    *idle_workers = jobs->idle;
    *blocked_posts = jobs->post_waiters;
    pthread_mutex_unlock(&jobs->lock);
}

int rl_job_stopping(const rl_job_t *job)
{
    return __atomic_load_n(&job->jobs->stopping, __ATOMIC_ACQUIRE);
}

int rl_jobs_submit(rl_jobs_t *jobs, rl_job_t *job)
{
    kind_count_t *count;
    int result = -1;

    pthread_mutex_lock(&jobs->lock);
    count = count_of(jobs, job->kind);
    if (jobs->stopping || count == NULL || (job->kind->max_queued > 0 && count->queued >= job->kind->max_queued))
        goto out;
    job->end = calloc(1, sizeof(event_t));
    if (job->end == NULL)
        goto out;
    /* Every thread is busy: one more, while the pool may grow. */
    if (jobs->idle == 0 && jobs->nthreads < RL_JOBS_THREADS_MAX) {
        if (pthread_create(&jobs->threads[jobs->nthreads], NULL, worker_main, jobs) == 0)
            jobs->nthreads++;
        else if (jobs->nthreads == 0) {
            free(job->end);
            job->end = NULL;
            goto out;
        }
    }
    job->jobs = jobs;
    job->next = NULL;
    job->stopped = 0;
    if (jobs->tail != NULL)
        jobs->tail->next = job;
    else
        jobs->head = job;
    jobs->tail = job;
    count->queued++;
    pthread_cond_signal(&jobs->work);
    result = 0;
out:
    pthread_mutex_unlock(&jobs->lock);
    return result;
}

int rl_job_post(rl_job_t *job, const char *bytes, size_t len)
{
    rl_jobs_t *jobs = job->jobs;
    event_t *event = calloc(1, sizeof(*event));
    int result = -1;

    if (event != NULL)
        event->bytes = malloc(len > 0 ? len : 1);
    if (event == NULL || event->bytes == NULL) {
        free(event);
        return -1;
    }
    memcpy(event->bytes, bytes, len);
    event->len = len;
    event->job = job;
    pthread_mutex_lock(&jobs->lock);
    while (!jobs->stopping && jobs->posted > 0 && jobs->posted + len > RL_JOBS_POST_MAX) {
        jobs->post_waiters++;
        pthread_cond_wait(&jobs->space, &jobs->lock);
        jobs->post_waiters--;
    }
    if (!jobs->stopping) {
        jobs->posted += len;
        push_event(jobs, event);
        event = NULL;
        result = 0;
    }
    pthread_mutex_unlock(&jobs->lock);
    if (event != NULL) {
        free(event->bytes);
        free(event);
    }
    return result;
}

static event_t *take_events(rl_jobs_t *jobs)
{
    event_t *events;
    uint64_t n;

    if (read(jobs->efd, &n, sizeof(n)) < 0 && errno != EAGAIN)
        rl_log(RL_LOG_WARN, "eventfd: %s", strerror(errno));
    pthread_mutex_lock(&jobs->lock);
    events = jobs->events;
    jobs->events = jobs->events_tail = NULL;
    jobs->posted = 0;
    pthread_cond_broadcast(&jobs->space);
    pthread_mutex_unlock(&jobs->lock);
    return events;
}

void rl_jobs_dispatch(rl_jobs_t *jobs)
{
    event_t *event = take_events(jobs);

    while (event != NULL) {
        event_t *next = event->next;
        if (event->done)
            event->job->done(event->job);
        else if (event->job->progress != NULL)
            event->job->progress(event->job, event->bytes, event->len);
        free(event->bytes);
        free(event);
        event = next;
    }
}

void rl_jobs_stop(rl_jobs_t *jobs)
{
    event_t *event;
    int i;
    rl_job_t *wake[RL_JOBS_THREADS_MAX], *run;
    int nwake = 0;

    if (jobs == NULL)
        return;
    pthread_mutex_lock(&jobs->lock);
    __atomic_store_n(&jobs->stopping, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&jobs->work);
    pthread_cond_broadcast(&jobs->space);
    /* One run per worker at most; their done is called below, so they stay valid until then. */
    for (run = jobs->running; run != NULL && nwake < RL_JOBS_THREADS_MAX; run = run->next)
        if (run->interrupt != NULL)
            wake[nwake++] = run;
    pthread_mutex_unlock(&jobs->lock);
    /* Outside the lock: an interrupt may take its owner's lock, which a run holds while it posts. */
    for (i = 0; i < nwake; i++)
        wake[i]->interrupt(wake[i]);
    for (i = 0; i < jobs->nthreads; i++)
        pthread_join(jobs->threads[i], NULL);
    /* Finished ones first (their progress is dropped), then those that never ran. */
    event = take_events(jobs);
    while (event != NULL) {
        event_t *next = event->next;
        if (event->done) {
            event->job->stopped = 1;
            event->job->done(event->job);
        }
        free(event->bytes);
        free(event);
        event = next;
    }
    while (jobs->head != NULL) {
        rl_job_t *job = jobs->head;
        jobs->head = job->next;
        free(job->end);
        job->end = NULL;
        job->stopped = 1;
        job->done(job);
    }
    close(jobs->efd);
    pthread_cond_destroy(&jobs->space);
    pthread_cond_destroy(&jobs->work);
    pthread_mutex_destroy(&jobs->lock);
    free(jobs);
}
