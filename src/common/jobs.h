/*
 * Background jobs, the one way relayd and relay-bridge run work off their
 * loop (docs/internals/layout.md, "Threads"): work that would block the loop
 * (an HTTP call to a model server or a push service, a key set fetched, an
 * attachment fetched for an agent's prompt) runs here, on worker threads,
 * and comes back to the loop through one eventfd, which the loop watches
 * (relay-bridge polls it; relayd wraps it in an h2o socket). A subsystem
 * adds a job kind, not a thread with its own pipe.
 *
 * A job is a struct of its owner's that embeds rl_job_t. Its run goes on a
 * worker; what run posts (rl_job_post) reaches its progress callback on the
 * loop, in order, and then done, once: the owner frees the job there. Each
 * kind caps how many of its jobs run at once and how many may wait or run;
 * the pool starts threads as jobs need them, up to RL_JOBS_THREADS_MAX, and
 * keeps them until the stop. What workers post and the loop has not taken
 * is capped at RL_JOBS_POST_MAX bytes: a worker that would pass it waits
 * (as a writer on a full pipe would).
 *
 * The stop (rl_jobs_stop) sets a flag a run must watch (rl_job_stopping, or
 * the client core's stop flag, rl_jobs_stop_flag), wakes the runs that wait
 * on something else (interrupt, below), joins the workers, and
 * calls done with job->stopped set for every job not done yet, run or not:
 * the owner frees it and acts on nothing.
 */
#ifndef RL_COMMON_JOBS_H
#define RL_COMMON_JOBS_H

#include <stddef.h>

#define RL_JOBS_THREADS_MAX 32
#define RL_JOBS_POST_MAX    (16u * 1024u * 1024u)

typedef struct rl_jobs rl_jobs_t;
typedef struct rl_job rl_job_t;

typedef struct rl_job_kind {
    const char *name;  /* for the log */
    int max_running;   /* at once; 0: as many as the pool has threads */
    size_t max_queued; /* waiting or running; past it rl_jobs_submit refuses; 0: no cap */
} rl_job_kind_t;

struct rl_job {
    /* The owner's, set before rl_jobs_submit. */
    const rl_job_kind_t *kind;
    void (*run)(rl_job_t *job);                                     /* a worker thread */
    void (*progress)(rl_job_t *job, const char *bytes, size_t len); /* the loop; may be NULL */
    void (*done)(rl_job_t *job);                                    /* the loop, once */
    /*
     * May be NULL. For a run that waits on something of its own (a
     * curl_multi_poll, a condition variable) rather than on rl_job_stopping:
     * rl_jobs_stop calls it on the loop, after setting the flag and without
     * the queue's lock, for each job then running, and it wakes that wait so
     * that the run sees the flag and returns. The job is not freed meanwhile
     * (its done comes later, from the same stop).
     */
    void (*interrupt)(rl_job_t *job);
    /* The queue's. */
    rl_jobs_t *jobs;
    rl_job_t *next;
    void *end;   /* the event that reports its end */
    int stopped; /* done came from rl_jobs_stop: run may not have run */
};

/* The queue; no thread runs until a job comes. NULL when out of resources. Loop thread. */
rl_jobs_t *rl_jobs_start(void);
/* See above; NULL is a no-op. Loop thread. */
void rl_jobs_stop(rl_jobs_t *jobs);
/* The eventfd that becomes readable when progress or a done is waiting. */
int rl_jobs_fd(const rl_jobs_t *jobs);
/*
 * Queues job (kind, run and done set): 0, or -1 when its kind holds
 * max_queued jobs already, the queue stops, or no thread can be started for
 * it (the caller then still owns it and treats it as failed). Loop thread.
 */
int rl_jobs_submit(rl_jobs_t *jobs, rl_job_t *job);
/* Calls progress and done of what the workers finished, oldest first. Loop thread. */
void rl_jobs_dispatch(rl_jobs_t *jobs);
/* From run: hands a copy of bytes to the job's progress on the loop. 0, or -1 once the queue stops. */
int rl_job_post(rl_job_t *job, const char *bytes, size_t len);
/* 1 once the queue stops: a run ends as soon as it can. Any thread. */
int rl_job_stopping(const rl_job_t *job);
/* The same flag as an int the client core polls (rl_client_options_t.stop). */
const int *rl_jobs_stop_flag(const rl_jobs_t *jobs);
/*
 * What the queue waits on now (for tests, which wait for these events rather than sleep and check that
 * nothing happened): workers with nothing they may run, and runs whose post waits for the loop to take
 * earlier ones (RL_JOBS_POST_MAX). Any thread.
 */
void rl_jobs_waiting(rl_jobs_t *jobs, int *idle_workers, int *blocked_posts);

#endif
