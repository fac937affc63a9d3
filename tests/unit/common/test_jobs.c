/*
 * The background jobs (common/jobs.c): runs on workers, progress
 * and done on the loop in order, a kind's cap on running and queued jobs,
 * the back-pressure on what workers post, and the stop.
 */
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/jobs.h"
#include "common/clock.h"

typedef struct test_job {
    rl_job_t job; /* first */
    int number;
    int gate;    /* atomic: run waits until it is set (or the stop) */
    int running; /* atomic */
    int posts;   /* how many lines run posts */
    size_t post_len;
    char seen[256]; /* progress received on the loop */
    int done, stopped;
} test_job_t;

static int max_running_seen, running_now;
static pthread_mutex_t count_lock = PTHREAD_MUTEX_INITIALIZER;
static char order[256]; /* the numbers of jobs as their done came */

static void test_run(rl_job_t *job)
{
    test_job_t *t = (test_job_t *)job;
    char line[64];
    int i;

    pthread_mutex_lock(&count_lock);
    if (++running_now > max_running_seen)
        max_running_seen = running_now;
    pthread_mutex_unlock(&count_lock);
    __atomic_store_n(&t->running, 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&t->gate, __ATOMIC_ACQUIRE) && !rl_job_stopping(job))
        usleep(1000);
    for (i = 0; i < t->posts; i++) {
        if (t->post_len > 0) {
            char *big = calloc(1, t->post_len);
            rl_job_post(job, big, t->post_len);
            free(big);
        } else {
            snprintf(line, sizeof(line), "%d.%d;", t->number, i);
            rl_job_post(job, line, strlen(line));
        }
    }
    pthread_mutex_lock(&count_lock);
    running_now--;
    pthread_mutex_unlock(&count_lock);
}

static void test_progress(rl_job_t *job, const char *bytes, size_t len)
{
    test_job_t *t = (test_job_t *)job;

    if (t->post_len == 0)
        snprintf(t->seen + strlen(t->seen), sizeof(t->seen) - strlen(t->seen), "%.*s", (int)len, bytes);
    else
        t->seen[0]++;
}

static void test_done(rl_job_t *job)
{
    test_job_t *t = (test_job_t *)job;

    t->done++;
    t->stopped = job->stopped;
    snprintf(order + strlen(order), sizeof(order) - strlen(order), "%d,", t->number);
}

static void init(test_job_t *t, const rl_job_kind_t *kind, int number, int gate, int posts)
{
    memset(t, 0, sizeof(*t));
    t->job.kind = kind;
    t->job.run = test_run;
    t->job.progress = test_progress;
    t->job.done = test_done;
    t->number = number;
    t->gate = gate;
    t->posts = posts;
}

/* Polls the queue's eventfd and dispatches until cond holds (5 s at most). */
static int idle_workers(rl_jobs_t *jobs)
{
    int idle, blocked;

    rl_jobs_waiting(jobs, &idle, &blocked);
    return idle;
}

#define UNTIL(jobs, cond)                                                                                              \
    do {                                                                                                               \
        long deadline_ = rl_clock_mono_ms() + 5000;                                                                    \
        while (!(cond)) {                                                                                              \
            struct pollfd pfd_ = {.fd = rl_jobs_fd(jobs), .events = POLLIN};                                           \
            assert_true(rl_clock_mono_ms() < deadline_);                                                               \
            if (poll(&pfd_, 1, 20) > 0)                                                                                \
                rl_jobs_dispatch(jobs);                                                                                \
        }                                                                                                              \
    } while (0)

static void test_progress_then_done_in_order_on_the_loop(void **state)
{
    static const rl_job_kind_t kind = {"test", 0, 0};
    rl_jobs_t *jobs = rl_jobs_start();
    test_job_t a, b;

    (void)state;
    order[0] = '\0';
    init(&a, &kind, 1, 1, 3);
    init(&b, &kind, 2, 1, 2);
    assert_int_equal(rl_jobs_submit(jobs, &a.job), 0);
    UNTIL(jobs, a.done == 1);
    assert_int_equal(rl_jobs_submit(jobs, &b.job), 0);
    UNTIL(jobs, b.done == 1);
    assert_string_equal(a.seen, "1.0;1.1;1.2;");
    assert_string_equal(b.seen, "2.0;2.1;");
    assert_string_equal(order, "1,2,");
    assert_int_equal(a.stopped, 0);
    rl_jobs_stop(jobs);
    /* Done once only. */
    assert_int_equal(a.done, 1);
    assert_int_equal(b.done, 1);
}

static void test_a_kinds_caps_on_running_and_queued_jobs(void **state)
{
    static const rl_job_kind_t one_at_a_time = {"serial", 1, 3};
    static const rl_job_kind_t other = {"other", 0, 0};
    rl_jobs_t *jobs = rl_jobs_start();
    test_job_t t[4], free_one;
    int i;

    (void)state;
    max_running_seen = 0;
    for (i = 0; i < 4; i++)
        init(&t[i], &one_at_a_time, i, 0, 0);
    for (i = 0; i < 3; i++)
        assert_int_equal(rl_jobs_submit(jobs, &t[i].job), 0);
    /* Three wait or run already: the fourth is refused, and stays the caller's. */
    assert_int_equal(rl_jobs_submit(jobs, &t[3].job), -1);
    UNTIL(jobs, __atomic_load_n(&t[0].running, __ATOMIC_ACQUIRE));
    /* The event: a worker is free and yet leaves the second waiting (its kind runs one at a time). */
    UNTIL(jobs, idle_workers(jobs) > 0);
    assert_int_equal(__atomic_load_n(&t[1].running, __ATOMIC_ACQUIRE), 0);
    /* Another kind is not held up by it. */
    init(&free_one, &other, 9, 1, 1);
    assert_int_equal(rl_jobs_submit(jobs, &free_one.job), 0);
    UNTIL(jobs, free_one.done == 1);
    for (i = 0; i < 3; i++)
        __atomic_store_n(&t[i].gate, 1, __ATOMIC_RELEASE);
    UNTIL(jobs, t[0].done && t[1].done && t[2].done);
    assert_int_equal(max_running_seen, 2); /* a serial one and the other */
    /* Room again for the refused one. */
    __atomic_store_n(&t[3].gate, 1, __ATOMIC_RELEASE);
    assert_int_equal(rl_jobs_submit(jobs, &t[3].job), 0);
    UNTIL(jobs, t[3].done == 1);
    rl_jobs_stop(jobs);
}

static void test_posts_past_the_cap_wait_for_the_loop(void **state)
{
    static const rl_job_kind_t kind = {"big", 0, 0};
    rl_jobs_t *jobs = rl_jobs_start();
    test_job_t t;

    (void)state;
    init(&t, &kind, 1, 1, 3);
    t.post_len = RL_JOBS_POST_MAX / 2 + 1;
    assert_int_equal(rl_jobs_submit(jobs, &t.job), 0);
    /* Two posts do not fit together: the second waits until the loop took the first (not taken here yet). */
    {
        long deadline = rl_clock_mono_ms() + 5000;
        int idle, blocked = 0;

        while (blocked == 0 && rl_clock_mono_ms() < deadline && poll(NULL, 0, 1) == 0)
            rl_jobs_waiting(jobs, &idle, &blocked);
        assert_int_equal(blocked, 1);
    }
    assert_int_equal(t.done, 0);
    UNTIL(jobs, t.done == 1);
    assert_int_equal(t.seen[0], 3);
    rl_jobs_stop(jobs);
}

static void test_the_stop_ends_runs_and_reports_every_job(void **state)
{
    static const rl_job_kind_t serial = {"serial", 1, 0};
    rl_jobs_t *jobs = rl_jobs_start();
    test_job_t running, waiting;
    long started;

    (void)state;
    init(&running, &serial, 1, 0, 0);
    init(&waiting, &serial, 2, 0, 0);
    assert_int_equal(rl_jobs_submit(jobs, &running.job), 0);
    assert_int_equal(rl_jobs_submit(jobs, &waiting.job), 0);
    UNTIL(jobs, __atomic_load_n(&running.running, __ATOMIC_ACQUIRE));
    started = rl_clock_mono_ms();
    /* The running one watches rl_job_stopping; the waiting one never runs. Both are done, as stopped. */
    rl_jobs_stop(jobs);
    assert_true(rl_clock_mono_ms() - started < 1000);
    assert_int_equal(running.done, 1);
    assert_int_equal(running.stopped, 1);
    assert_int_equal(waiting.done, 1);
    assert_int_equal(waiting.stopped, 1);
    assert_int_equal(__atomic_load_n(&waiting.running, __ATOMIC_ACQUIRE), 0);
    rl_jobs_stop(NULL);
}

/* A run that waits on a condition of its own, as push's sender waits in curl_multi_poll. */
typedef struct waiting_job {
    rl_job_t job; /* first */
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int woken, started, interrupted, done, stopped;
} waiting_job_t;

static void waiting_run(rl_job_t *job)
{
    waiting_job_t *w = (waiting_job_t *)job;

    pthread_mutex_lock(&w->lock);
    w->started = 1;
    /* No look at rl_job_stopping while it waits: only the interrupt can end this wait. */
    while (!w->woken)
        pthread_cond_wait(&w->wake, &w->lock);
    pthread_mutex_unlock(&w->lock);
}

static void waiting_interrupt(rl_job_t *job)
{
    waiting_job_t *w = (waiting_job_t *)job;

    pthread_mutex_lock(&w->lock);
    w->interrupted++;
    w->woken = 1;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
}

static void waiting_done(rl_job_t *job)
{
    waiting_job_t *w = (waiting_job_t *)job;

    w->done++;
    w->stopped = job->stopped;
}

static void test_the_stop_interrupts_a_run_that_waits_on_its_own(void **state)
{
    static const rl_job_kind_t kind = {"waiting", 1, 1}, plain_kind = {"plain", 0, 0};
    rl_jobs_t *jobs = rl_jobs_start();
    waiting_job_t w;
    test_job_t plain;
    int started;

    (void)state;
    memset(&w, 0, sizeof(w));
    pthread_mutex_init(&w.lock, NULL);
    pthread_cond_init(&w.wake, NULL);
    w.job.kind = &kind;
    w.job.run = waiting_run;
    w.job.done = waiting_done;
    w.job.interrupt = waiting_interrupt;
    assert_int_equal(rl_jobs_submit(jobs, &w.job), 0);
    /* A job without an interrupt beside it: it watches the flag, as before. */
    init(&plain, &plain_kind, 1, 0, 0);
    assert_int_equal(rl_jobs_submit(jobs, &plain.job), 0);
    do {
        pthread_mutex_lock(&w.lock);
        started = w.started;
        pthread_mutex_unlock(&w.lock);
        if (!started)
            usleep(1000);
    } while (!started);
    /* Without the interrupt this join would never return (the test would hang, and ctest time it out). */
    rl_jobs_stop(jobs);
    assert_int_equal(w.interrupted, 1);
    assert_int_equal(w.done, 1);
    assert_int_equal(w.stopped, 1);
    assert_int_equal(plain.done, 1);
    pthread_cond_destroy(&w.wake);
    pthread_mutex_destroy(&w.lock);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_progress_then_done_in_order_on_the_loop),
        cmocka_unit_test(test_a_kinds_caps_on_running_and_queued_jobs),
        cmocka_unit_test(test_posts_past_the_cap_wait_for_the_loop),
        cmocka_unit_test(test_the_stop_ends_runs_and_reports_every_job),
        cmocka_unit_test(test_the_stop_interrupts_a_run_that_waits_on_its_own),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
