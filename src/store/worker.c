/*
 * The store's worker: runs operations against a backend's transactions.
 *
 * It knows nothing of what an operation does. It takes every queued
 * operation at once (a batch), opens one transaction, runs each operation in
 * order (a writing one inside a savepoint, so that a failing one leaves no
 * trace and does not take the others with it), commits once (group commit:
 * the busier the relay, the bigger the batch), and hands the batch back to
 * the loop, whose rl_store_flush runs the done callbacks in submission order.
 * An operation therefore sees every operation submitted before it, and a
 * write is answered only after its commit.
 *
 * Threaded (relayd): the batch runs on a thread of its own and one byte down
 * a pipe wakes the loop, so that the loop never waits for a query, a lock or
 * a commit. Inline (tests, one-shot commands): rl_store_flush runs the queued
 * batch on the calling thread first.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "store/store.h"

/* A full disk's episode ends at a write that succeeds this long after the last refusal (note_full). */
#define FULL_QUIET_MS 2000

struct op_list {
    rl_store_op_t *head, *tail;
    size_t count;
};

struct rl_store {
    rl_txn_t *txn; /* the backend's connection: the worker's alone while it runs */
    int threaded;
    pthread_t thread;
    int thread_running;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    struct op_list todo; /* loop -> worker, under lock */
    struct op_list done; /* worker -> loop, under lock */
    size_t outstanding;  /* submitted, done callback not yet run; loop only */
    int stopping;
    int pipe_read, pipe_write;
    rl_store_figures_t figures; /* under lock: the worker writes them, a metrics scrape reads them */
    uint64_t now_appends;       /* batches rl_store_write_now wrote (under lock) */
    uint64_t full_since;        /* figures.full_refusals when the full disk's episode began (under lock) */
    int64_t full_last_ms;       /* when a write was last refused for a full disk (rl_clock_mono_ms, under lock) */
};

static void list_push(struct op_list *list, rl_store_op_t *op)
{
    op->next = NULL;
    if (list->tail != NULL)
        list->tail->next = op;
    else
        list->head = op;
    list->tail = op;
    ++list->count;
}

static void list_append(struct op_list *list, struct op_list *more)
{
    if (more->head == NULL)
        return;
    if (list->tail != NULL)
        list->tail->next = more->head;
    else
        list->head = more->head;
    list->tail = more->tail;
    list->count += more->count;
    more->head = more->tail = NULL;
    more->count = 0;
}

void *rl_store_op_new(const rl_store_op_type_t *type, size_t size)
{
    rl_store_op_t *op = calloc(1, size < sizeof(*op) ? sizeof(*op) : size);

    if (op == NULL) {
        fputs("relay: out of memory queueing a store operation\n", stderr);
        abort();
    }
    op->type = type;
    return op;
}

void rl_store_op_free(rl_store_op_t *op)
{
    if (op == NULL)
        return;
    if (op->type->dispose != NULL)
        op->type->dispose(op);
    rl_arena_free(&op->arena);
    free(op);
}

/*
 * What an operation answers when the backend failed it: the outage
 * (RL_E_UNAVAILABLE: 503, retry later) and the full disk
 * (RL_E_STORAGE_FULL: 503 storage_full) keep their word, anything else is
 * an internal error.
 */
static int batch_error(int result)
{
    return result == RL_E_UNAVAILABLE || result == RL_E_STORAGE_FULL ? result : RL_E_INTERNAL;
}

/*
 * Runs one batch in one transaction. Every operation's result is set; writes
 * fail together if the commit does. A backend that cannot begin or commit
 * because its server is unreachable says RL_E_UNAVAILABLE, and the
 * operations answer that (503, retry later) rather than an internal error.
 * A backend's own work (rl_txn_due_ms) is done by its begin and commit,
 * before the first operation: an empty batch does only that.
 */
static void run_batch(rl_txn_t *txn, rl_store_op_t *batch, int64_t *commit_us)
{
    rl_store_op_t *op;
    int began = rl_txn_begin(txn), wrote = 0, committed;
    int64_t commit_started;

    for (op = batch; op != NULL; op = op->next) {
        int saved;
        if (began != 0) {
            op->result = batch_error(began);
            continue;
        }
        txn->arena = &op->arena;
        txn->writing = op->type->writes;
        /* A connection lost earlier in the batch fails the savepoint: that is a 503 too. */
        if (op->type->writes && (saved = rl_txn_savepoint(txn)) != 0) {
            op->result = batch_error(saved);
            continue;
        }
        op->result = op->type->run(txn, op);
        if (op->type->writes) {
            rl_txn_release(txn, op->result == 0);
            wrote |= op->result == 0;
        }
    }
    txn->arena = NULL;
    txn->writing = 0;
    if (began != 0)
        return;
    commit_started = rl_clock_mono_us();
    committed = rl_txn_commit(txn);
    *commit_us = rl_clock_mono_us() - commit_started;
    if (committed != 0) {
        rl_txn_rollback(txn);
        /* Nothing of the batch is durable: no write may be answered as done. */
        for (op = batch; op != NULL && wrote; op = op->next)
            if (op->type->writes && op->result == 0)
                op->result = batch_error(committed);
    }
}

/* The figures of one batch; under the store's lock when threaded. */
static void count_batch(rl_store_t *store, size_t operations, int64_t commit_us, int appended)
{
    store->figures.batches += !appended;
    store->figures.log_appends = store->txn->appends + store->now_appends;
    store->figures.log_folds = store->txn->folds;
    store->figures.operations += operations;
    store->figures.round_trips = store->txn->round_trips;
    if (commit_us >= 0)
        rl_histogram_observe_us(&store->figures.commit, (uint64_t)commit_us);
}

/*
 * A full disk is one episode, told once when it begins and once when it
 * ends (docs/operations.md, "A full disk"), however many writes it refuses
 * meanwhile; the refusals are counted for the metrics. A nearly full disk
 * still takes the writes that fit in pages SQLite already has, so the
 * episode ends at a write that succeeds FULL_QUIET_MS after the last
 * refusal, not at the first one. Under the store's lock when threaded.
 */
static void note_full(rl_store_t *store, const struct op_list *batch)
{
    const rl_store_op_t *op;
    uint64_t refused = 0;
    int wrote = 0;
    int64_t now;

    for (op = batch->head; op != NULL; op = op->next) {
        refused += op->result == RL_E_STORAGE_FULL;
        wrote |= op->type->writes && op->result == 0;
    }
    /* The common case, a disk with room: nothing more to do (the delta path pays the loop above only). */
    if (refused == 0 && !store->figures.full)
        return;
    now = rl_clock_mono_ms();
    store->figures.full_refusals += refused;
    if (refused > 0)
        store->full_last_ms = now;
    if (refused > 0 && !store->figures.full) {
        store->figures.full = 1;
        store->full_since = store->figures.full_refusals - refused;
        rl_log_warn("the store's disk is full: writes are refused (503 storage_full) until there is room again");
    } else if (refused == 0 && wrote && store->figures.full && now - store->full_last_ms >= FULL_QUIET_MS) {
        store->figures.full = 0;
        rl_log_info("the store's disk has room again: %llu writes were refused meanwhile",
                    (unsigned long long)(store->figures.full_refusals - store->full_since));
    }
}

/*
 * Runs a batch (empty: only the backend's own work) the backend's own way
 * (rl_txn_run_batch) or in one transaction, and counts it.
 */
static void run_counted(rl_store_t *store, struct op_list *batch, int locked)
{
    int64_t commit_us = -1;
    uint64_t appends = store->txn->appends;

    if (batch->head == NULL || rl_txn_run_batch(store->txn, batch->head) != 0)
        run_batch(store->txn, batch->head, &commit_us);
    if (locked)
        pthread_mutex_lock(&store->lock);
    count_batch(store, batch->count, commit_us, store->txn->appends != appends);
    note_full(store, batch);
    if (locked)
        pthread_mutex_unlock(&store->lock);
}

/* Waits for work, or until the backend's own work is due (rl_txn_due_ms). Under the store's lock. */
static void wait_for_work(rl_store_t *store)
{
    while (store->todo.head == NULL && !store->stopping) {
        int64_t wait_ms = rl_txn_due_ms(store->txn);
        if (wait_ms == 0)
            return;
        if (wait_ms > 0) {
            struct timespec until;
            clock_gettime(CLOCK_MONOTONIC, &until);
            until.tv_sec += wait_ms / 1000;
            until.tv_nsec += (wait_ms % 1000) * 1000000;
            if (until.tv_nsec >= 1000000000) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&store->wake, &store->lock, &until);
        } else {
            pthread_cond_wait(&store->wake, &store->lock);
        }
    }
}

static void *worker_main(void *p)
{
    rl_store_t *store = p;
    rl_store_op_t *op;
    sigset_t all;

    /* Signals belong to the loop thread (src/http/stop.c); none should interrupt a query here. */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    pthread_mutex_lock(&store->lock);
    for (;;) {
        struct op_list batch;
        wait_for_work(store);
        if (store->todo.head == NULL && store->stopping)
            break;
        batch = store->todo;
        store->todo.head = store->todo.tail = NULL;
        store->todo.count = 0;
        pthread_mutex_unlock(&store->lock);
        /* No operation: the backend's own work (the SQLite delta log's fold: it is big, or a second old). */
        run_counted(store, &batch, 1);
        if (batch.head == NULL) {
            pthread_mutex_lock(&store->lock);
            continue;
        }
        for (op = batch.head; op != NULL; op = op->next)
            __atomic_store_n(&op->ran, 1, __ATOMIC_RELEASE);
        pthread_mutex_lock(&store->lock);
        list_append(&store->done, &batch);
        pthread_mutex_unlock(&store->lock);
        /* A full pipe already says there is something to collect. */
        if (write(store->pipe_write, "x", 1) < 0 && errno != EAGAIN) {
        }
        pthread_mutex_lock(&store->lock);
    }
    pthread_mutex_unlock(&store->lock);
    return NULL;
}

int rl_store_op_ran(const rl_store_op_t *op)
{
    return __atomic_load_n(&op->ran, __ATOMIC_ACQUIRE);
}

void rl_store_submit(rl_store_t *store, rl_store_op_t *op, rl_store_done_cb done, void *arg)
{
    op->done = done;
    op->arg = arg;
    ++store->outstanding;
    pthread_mutex_lock(&store->lock);
    list_push(&store->todo, op);
    if (store->threaded)
        pthread_cond_signal(&store->wake);
    pthread_mutex_unlock(&store->lock);
}

int rl_store_write_now(rl_store_t *store, rl_store_op_t *op)
{
    struct op_list one = {op, op, 1};
    int was_empty = 0;

    op->next = NULL;
    /* The backend's own thread-safe path (the delta log's lock): the worker may be in a batch meanwhile. */
    if (rl_txn_write_now(store->txn, op, &was_empty) != 0)
        return 1;
    op->ran = 1;
    pthread_mutex_lock(&store->lock);
    /* txn->appends is the worker's: the sum count_batch makes is kept by adding one here. */
    ++store->now_appends;
    ++store->figures.log_appends;
    store->figures.operations += 1;
    note_full(store, &one);
    /* The worker may wait without a deadline (nothing was due): the log's fold now has one (wait_for_work). */
    if (was_empty && store->threaded)
        pthread_cond_signal(&store->wake);
    pthread_mutex_unlock(&store->lock);
    return 0;
}

int rl_store_exclusive(rl_store_t *store)
{
    return store->txn->exclusive;
}

int rl_store_pending(rl_store_t *store)
{
    return store->outstanding > 0;
}

int rl_store_wake_fd(rl_store_t *store)
{
    return store->threaded ? store->pipe_read : -1;
}

void rl_store_figures(rl_store_t *store, rl_store_figures_t *out)
{
    pthread_mutex_lock(&store->lock);
    *out = store->figures;
    out->queued = store->todo.count;
    pthread_mutex_unlock(&store->lock);
}

size_t rl_store_queued(rl_store_t *store)
{
    size_t n;

    pthread_mutex_lock(&store->lock);
    n = store->todo.count;
    pthread_mutex_unlock(&store->lock);
    return n;
}

/* Runs the done callbacks of the finished operations, in order, and frees them. */
static void complete(rl_store_t *store, rl_store_op_t *op)
{
    rl_store_op_t *next;

    for (; op != NULL; op = next) {
        next = op->next;
        --store->outstanding;
        if (op->done != NULL)
            op->done(op);
        rl_store_op_free(op);
    }
}

void rl_store_flush(rl_store_t *store)
{
    rl_store_op_t *op;
    struct op_list batch;
    char sink[256];

    if (!store->threaded) {
        /* Done callbacks may queue more work: it runs in this flush too. */
        while (store->todo.head != NULL) {
            batch = store->todo;
            store->todo.head = store->todo.tail = NULL;
            store->todo.count = 0;
            run_counted(store, &batch, 0);
            for (op = batch.head; op != NULL; op = op->next)
                op->ran = 1;
            complete(store, batch.head);
        }
        return;
    }
    while (read(store->pipe_read, sink, sizeof(sink)) > 0) {
    }
    pthread_mutex_lock(&store->lock);
    batch = store->done;
    store->done.head = store->done.tail = NULL;
    store->done.count = 0;
    pthread_mutex_unlock(&store->lock);
    complete(store, batch.head);
}

void rl_store_drain(rl_store_t *store)
{
    while (rl_store_pending(store)) {
        int fd = rl_store_wake_fd(store);
        if (fd >= 0) {
            struct pollfd wait = {.fd = fd, .events = POLLIN};
            if (poll(&wait, 1, -1) < 0 && errno != EINTR)
                break;
        }
        rl_store_flush(store);
    }
}

void rl_store_close(rl_store_t *store)
{
    if (store == NULL)
        return;
    if (store->thread_running) {
        /* Callbacks may queue more work; all of it runs before the worker stops. */
        rl_store_drain(store);
        pthread_mutex_lock(&store->lock);
        store->stopping = 1;
        pthread_cond_signal(&store->wake);
        pthread_mutex_unlock(&store->lock);
        pthread_join(store->thread, NULL);
        rl_store_flush(store);
    } else {
        rl_store_drain(store);
    }
    /* At shutdown the backend's own work is done (the delta log goes into the database): none is left behind. */
    if (store->txn != NULL && rl_txn_due_ms(store->txn) >= 0) {
        struct op_list none = {NULL, NULL, 0};
        run_counted(store, &none, 0);
    }
    if (store->txn != NULL)
        rl_txn_close(store->txn);
    if (store->pipe_read >= 0)
        close(store->pipe_read);
    if (store->pipe_write >= 0)
        close(store->pipe_write);
    pthread_mutex_destroy(&store->lock);
    pthread_cond_destroy(&store->wake);
    free(store);
}

int rl_store__wrap(rl_txn_t *txn, int threaded, rl_store_t **out)
{
    rl_store_t *store = calloc(1, sizeof(*store));
    int fds[2];

    if (store == NULL) {
        rl_txn_close(txn);
        return -1;
    }
    store->txn = txn;
    store->threaded = threaded;
    store->pipe_read = store->pipe_write = -1;
    pthread_mutex_init(&store->lock, NULL);
    {
        /* The wait for the backend's own work counts on the monotonic clock (wait_for_work). */
        pthread_condattr_t attr;
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&store->wake, &attr);
        pthread_condattr_destroy(&attr);
    }
    /*
     * Work the backend has due at once is done before anything else runs: a
     * delta log left by a relayd that was killed is replayed (sqlite.c), so
     * that what it answered is in the database from the first operation on.
     */
    if (rl_txn_due_ms(txn) == 0) {
        struct op_list none = {NULL, NULL, 0};
        run_counted(store, &none, 0);
        if (rl_txn_due_ms(txn) == 0) {
            rl_log_error("cannot finish the work the store's last run left (the log above says why); not starting");
            rl_store_close(store);
            return -1;
        }
    }
    if (threaded) {
        if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
            rl_log_error("cannot create the store's wake-up pipe: %s", strerror(errno));
            rl_store_close(store);
            return -1;
        }
        store->pipe_read = fds[0];
        store->pipe_write = fds[1];
        if (pthread_create(&store->thread, NULL, worker_main, store) != 0) {
            rl_log_error("cannot start the store's worker thread");
            rl_store_close(store);
            return -1;
        }
        store->thread_running = 1;
    }
    *out = store;
    return 0;
}
