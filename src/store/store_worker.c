/*
 * The store worker: runs a synchronous-in-the-call backend (SQLite) on a
 * thread of its own, so that the event loop never waits for a query, a
 * commit or the write lock.
 *
 * Each operation called on the loop is copied into a job (strings duplicated,
 * JSON deep-copied: nothing the caller owns is touched after the call
 * returns) and queued. The worker takes every queued job at once, runs them
 * in order against the backend, and flushes the backend: one transaction per
 * batch, commit before any result is released (group commit). The results
 * go to a done list and one byte down a pipe wakes the loop, whose
 * rl_store_flush runs the callbacks in submission order. Order is therefore
 * the same as with the backend alone: an operation sees every operation
 * submitted before it, reads included.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "common/log.h"
#include "store/store.h"

#define JOB_STRINGS 10
#define JOB_NUMBERS 5

struct job;
typedef void (*job_run_fn)(rl_store_t *inner, struct job *job);

struct job {
    struct job *next;
    struct worker_store *owner;
    job_run_fn run;
    rl_store_cb cb;
    void *arg;
    /* the operation's arguments, owned by the job */
    char *s[JOB_STRINGS];
    int64_t n[JOB_NUMBERS];
    int k[2];
    json_t *body;
    rl_delta_batch_t *batch;
    /* its outcome */
    int result;
    json_t *value;
};

struct job_list {
    struct job *head, *tail;
};

struct worker_store {
    rl_store_t super;
    rl_store_t *inner;
    pthread_t thread;
    int thread_running;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    struct job_list todo; /* loop -> worker, under lock */
    struct job_list done; /* worker -> loop, under lock */
    struct job_list ran;  /* filled by the backend's callbacks during a flush; worker only */
    size_t outstanding;   /* submitted, callback not yet run; loop only */
    int stopping;
    int pipe_read, pipe_write;
};

static void list_push(struct job_list *list, struct job *job)
{
    job->next = NULL;
    if (list->tail != NULL)
        list->tail->next = job;
    else
        list->head = job;
    list->tail = job;
}

static void list_append(struct job_list *list, struct job_list *more)
{
    if (more->head == NULL)
        return;
    if (list->tail != NULL)
        list->tail->next = more->head;
    else
        list->head = more->head;
    list->tail = more->tail;
    more->head = more->tail = NULL;
}

static char *copy(const char *text)
{
    char *dup;

    if (text == NULL)
        return NULL;
    dup = strdup(text);
    if (dup == NULL) {
        rl_log_error("out of memory queueing a store operation");
        abort();
    }
    return dup;
}

static struct job *job_new(job_run_fn run, rl_store_cb cb, void *arg)
{
    struct job *job = calloc(1, sizeof(*job));

    if (job == NULL) {
        rl_log_error("out of memory queueing a store operation");
        abort();
    }
    job->run = run;
    job->cb = cb;
    job->arg = arg;
    return job;
}

static void job_free_args(struct job *job)
{
    size_t i;

    for (i = 0; i < JOB_STRINGS; ++i) {
        free(job->s[i]);
        job->s[i] = NULL;
    }
    json_decref(job->body);
    job->body = NULL;
    rl_delta_batch_free(job->batch);
    job->batch = NULL;
}

static void job_free(struct job *job)
{
    job_free_args(job);
    json_decref(job->value);
    free(job);
}

static void submit(rl_store_t *super, struct job *job)
{
    struct worker_store *store = (void *)super;

    job->owner = store;
    ++store->outstanding;
    pthread_mutex_lock(&store->lock);
    list_push(&store->todo, job);
    pthread_cond_signal(&store->wake);
    pthread_mutex_unlock(&store->lock);
}

/* The backend's callback, on the worker thread during its flush: keeps the outcome for the loop. */
static void job_ran(int result, json_t *value, void *arg)
{
    struct job *job = arg;

    job->result = result;
    job->value = value;
    list_push(&job->owner->ran, job);
}

static void *worker_main(void *p)
{
    struct worker_store *store = p;
    sigset_t all;

    /* Signals belong to the loop thread (stop.c); none should interrupt a query here. */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    pthread_mutex_lock(&store->lock);
    for (;;) {
        struct job *job, *next;

        while (store->todo.head == NULL && !store->stopping)
            pthread_cond_wait(&store->wake, &store->lock);
        if (store->todo.head == NULL)
            break;
        job = store->todo.head;
        store->todo.head = store->todo.tail = NULL;
        pthread_mutex_unlock(&store->lock);
        for (; job != NULL; job = next) {
            next = job->next;
            job->run(store->inner, job);
            job_free_args(job);
        }
        /* Commits the batch, then hands every outcome to job_ran in order. */
        rl_store_flush(store->inner);
        pthread_mutex_lock(&store->lock);
        list_append(&store->done, &store->ran);
        pthread_mutex_unlock(&store->lock);
        /* A full pipe already says there is something to collect. */
        if (write(store->pipe_write, "x", 1) < 0 && errno != EAGAIN) {
        }
        pthread_mutex_lock(&store->lock);
    }
    pthread_mutex_unlock(&store->lock);
    return NULL;
}

static int worker_pending(rl_store_t *super)
{
    return ((struct worker_store *)super)->outstanding > 0;
}

static int worker_wake_fd(rl_store_t *super)
{
    return ((struct worker_store *)super)->pipe_read;
}

static void worker_flush(rl_store_t *super)
{
    struct worker_store *store = (void *)super;
    struct job *job, *next;
    char sink[256];

    while (read(store->pipe_read, sink, sizeof(sink)) > 0) {
    }
    pthread_mutex_lock(&store->lock);
    job = store->done.head;
    store->done.head = store->done.tail = NULL;
    pthread_mutex_unlock(&store->lock);
    for (; job != NULL; job = next) {
        json_t *value = job->value;
        next = job->next;
        job->value = NULL;
        --store->outstanding;
        if (job->cb != NULL)
            job->cb(job->result, value, job->arg);
        else
            json_decref(value);
        job_free(job);
    }
}

static void worker_close(rl_store_t *super)
{
    struct worker_store *store = (void *)super;

    if (store->thread_running) {
        /* Callbacks may queue more work; all of it runs before the worker stops. */
        rl_store_drain(super);
        pthread_mutex_lock(&store->lock);
        store->stopping = 1;
        pthread_cond_signal(&store->wake);
        pthread_mutex_unlock(&store->lock);
        /* The worker finishes what was queued before it stops. */
        pthread_join(store->thread, NULL);
        worker_flush(super);
    }
    if (store->inner != NULL)
        rl_store_close(store->inner);
    if (store->pipe_read >= 0)
        close(store->pipe_read);
    if (store->pipe_write >= 0)
        close(store->pipe_write);
    pthread_mutex_destroy(&store->lock);
    pthread_cond_destroy(&store->wake);
    free(store);
}

/* -- one submit and one run function per operation ------------------------------------------------ */

static json_t *body_copy(json_t *body)
{
    json_t *dup;

    if (body == NULL)
        return NULL;
    dup = json_deep_copy(body);
    if (dup == NULL) {
        rl_log_error("out of memory queueing a store operation");
        abort();
    }
    return dup;
}

static void run_user_ensure(rl_store_t *inner, struct job *job)
{
    rl_store_user_ensure(inner, job->s[0], job->n[0], job_ran, job);
}

static void worker_user_ensure(rl_store_t *super, const char *user_id, int64_t now, rl_store_cb cb, void *arg)
{
    struct job *job = job_new(run_user_ensure, cb, arg);

    job->s[0] = copy(user_id);
    job->n[0] = now;
    submit(super, job);
}

static void run_pairing_insert(rl_store_t *inner, struct job *job)
{
    rl_pairing_new_t pairing = {job->s[0], job->s[1], job->s[2], job->s[3], job->s[4], job->n[0], job->n[1]};

    rl_store_pairing_insert(inner, &pairing, job_ran, job);
}

static void worker_pairing_insert(rl_store_t *super, const rl_pairing_new_t *pairing, rl_store_cb cb, void *arg)
{
    struct job *job = job_new(run_pairing_insert, cb, arg);

    job->s[0] = copy(pairing->poll_hash);
    job->s[1] = copy(pairing->code_hash);
    job->s[2] = copy(pairing->installation_id);
    job->s[3] = copy(pairing->connector_type);
    job->s[4] = copy(pairing->host_label);
    job->n[0] = pairing->created_at;
    job->n[1] = pairing->expires_at;
    submit(super, job);
}

static void run_pairing_claim(rl_store_t *inner, struct job *job)
{
    rl_store_pairing_claim(inner, job->s[0], job->s[1], job->n[0], job_ran, job);
}

static void worker_pairing_claim(rl_store_t *super, const char *code_hash, const char *user_id, int64_t now,
                                 rl_store_cb cb, void *arg)
{
    struct job *job = job_new(run_pairing_claim, cb, arg);

    job->s[0] = copy(code_hash);
    job->s[1] = copy(user_id);
    job->n[0] = now;
    submit(super, job);
}

static void run_pairing_poll(rl_store_t *inner, struct job *job)
{
    rl_store_pairing_poll(inner, job->s[0], job->s[1], job->s[2], job->n[0], job_ran, job);
}

static void worker_pairing_poll(rl_store_t *super, const char *poll_hash, const char *token_hash, const char *token_env,
                                int64_t now, rl_store_cb cb, void *arg)
{
    struct job *job = job_new(run_pairing_poll, cb, arg);

    job->s[0] = copy(poll_hash);
    job->s[1] = copy(token_hash);
    job->s[2] = copy(token_env);
    job->n[0] = now;
    submit(super, job);
}

static void run_installation_get(rl_store_t *inner, struct job *job)
{
    rl_store_installation_get(inner, job->s[0], job_ran, job);
}

static void worker_installation_get(rl_store_t *super, const char *installation_id, rl_store_cb cb, void *arg)
{
    struct job *job = job_new(run_installation_get, cb, arg);

    job->s[0] = copy(installation_id);
    submit(super, job);
}

static void run_installation_set_manifest(rl_store_t *inner, struct job *job)
{
    rl_store_installation_set_manifest(inner, job->s[0], job->s[1], job_ran, job);
}

static void worker_installation_set_manifest(rl_store_t *super, const char *installation_id, const char *manifest,
                                             rl_store_cb cb, void *arg)
{
    struct job *job = job_new(run_installation_set_manifest, cb, arg);

    job->s[0] = copy(installation_id);
    job->s[1] = copy(manifest);
    submit(super, job);
}

static void run_purge(rl_store_t *inner, struct job *job)
{
    rl_store_purge(inner, job->n[0], job->n[1], job_ran, job);
}

static void worker_purge(rl_store_t *super, int64_t now, int64_t delete_grace, rl_store_cb cb, void *arg)
{
    struct job *job = job_new(run_purge, cb, arg);

    job->n[0] = now;
    job->n[1] = delete_grace;
    submit(super, job);
}

static void run_me_get(rl_store_t *inner, struct job *job)
{
    rl_store_me_get(inner, job->s[0], job_ran, job);
}

static void worker_me_get(rl_store_t *super, const char *user_id, rl_store_cb cb, void *arg)
{
    struct job *job = job_new(run_me_get, cb, arg);

    job->s[0] = copy(user_id);
    submit(super, job);
}

static void run_installation_patch(rl_store_t *inner, struct job *job)
{
    rl_installation_patch_t patch = {job->k[0], job->k[1], job->s[2], job->s[3]};

    rl_store_installation_patch(inner, job->s[0], job->s[1], &patch, job_ran, job);
}

static void worker_installation_patch(rl_store_t *super, const char *user_id, const char *installation_id,
                                      const rl_installation_patch_t *patch, rl_store_cb cb, void *arg)
{
    struct job *job = job_new(run_installation_patch, cb, arg);

    job->s[0] = copy(user_id);
    job->s[1] = copy(installation_id);
    job->s[2] = copy(patch->name);
    job->s[3] = copy(patch->emoji);
    job->k[0] = patch->set_name;
    job->k[1] = patch->set_emoji;
    submit(super, job);
}

static void run_installation_revoke(rl_store_t *inner, struct job *job)
{
    rl_store_installation_revoke(inner, job->s[0], job->s[1], job->n[0], job_ran, job);
}

static void worker_installation_revoke(rl_store_t *super, const char *user_id, const char *installation_id, int64_t now,
                                       rl_store_cb cb, void *arg)
{
    struct job *job = job_new(run_installation_revoke, cb, arg);

    job->s[0] = copy(user_id);
    job->s[1] = copy(installation_id);
    job->n[0] = now;
    submit(super, job);
}

static void run_session_create(rl_store_t *inner, struct job *job)
{
    rl_session_new_t session = {job->s[0], job->s[1], job->s[2], job->s[3], job->n[0]};

    rl_store_session_create(inner, &session, job_ran, job);
}

static void worker_session_create(rl_store_t *super, const rl_session_new_t *session, rl_store_cb cb, void *arg)
{
    struct job *job = job_new(run_session_create, cb, arg);

    job->s[0] = copy(session->user_id);
    job->s[1] = copy(session->installation_id);
    job->s[2] = copy(session->session_id);
    job->s[3] = copy(session->title);
    job->n[0] = session->now;
    submit(super, job);
}

static void run_session_change(rl_store_t *inner, struct job *job)
{
    rl_store_session_change(inner, job->s[0], job->s[1], (rl_session_op_t)job->k[0], job->s[2], job->n[0], job->n[1],
                            job_ran, job);
}

static void worker_session_change(rl_store_t *super, const char *user_id, const char *session_id, rl_session_op_t op,
                                  const char *title, int64_t now, int64_t delete_grace, rl_store_cb cb, void *arg)
{
    struct job *job = job_new(run_session_change, cb, arg);

    job->s[0] = copy(user_id);
    job->s[1] = copy(session_id);
    job->s[2] = copy(title);
    job->k[0] = (int)op;
    job->n[0] = now;
    job->n[1] = delete_grace;
    submit(super, job);
}

static void run_session_cancel(rl_store_t *inner, struct job *job)
{
    rl_store_session_cancel(inner, job->s[0], job->s[1], job->s[2], job->n[0], job_ran, job);
}

static void worker_session_cancel(rl_store_t *super, const char *user_id, const char *session_id,
                                  const char *interaction_id, int64_t now, rl_store_cb cb, void *arg)
{
    struct job *job = job_new(run_session_cancel, cb, arg);

    job->s[0] = copy(user_id);
    job->s[1] = copy(session_id);
    job->s[2] = copy(interaction_id);
    job->n[0] = now;
    submit(super, job);
}

static void run_messages_list(rl_store_t *inner, struct job *job)
{
    rl_store_messages_list(inner, job->s[0], job->s[1], job->k[0], job->s[2], job_ran, job);
}

static void worker_messages_list(rl_store_t *super, const char *user_id, const char *session_id, int limit,
                                 const char *before, rl_store_cb cb, void *arg)
{
    struct job *job = job_new(run_messages_list, cb, arg);

    job->s[0] = copy(user_id);
    job->s[1] = copy(session_id);
    job->s[2] = copy(before);
    job->k[0] = limit;
    submit(super, job);
}

static void run_message_send(rl_store_t *inner, struct job *job)
{
    rl_message_send_t send = {job->s[0], job->s[1], job->s[2], job->s[3], job->s[4],
                              job->s[5], job->s[6], job->s[7], job->n[0]};

    rl_store_message_send(inner, &send, job_ran, job);
}

static void worker_message_send(rl_store_t *super, const rl_message_send_t *send, rl_store_cb cb, void *arg)
{
    struct job *job = job_new(run_message_send, cb, arg);

    job->s[0] = copy(send->user_id);
    job->s[1] = copy(send->session_id);
    job->s[2] = copy(send->interaction_id);
    job->s[3] = copy(send->message_id);
    job->s[4] = copy(send->text);
    job->s[5] = copy(send->attachments);
    job->s[6] = copy(send->reply_to);
    job->s[7] = copy(send->thought_level);
    job->n[0] = send->now;
    submit(super, job);
}

static void run_attachment_insert(rl_store_t *inner, struct job *job)
{
    rl_attachment_new_t attachment = {job->s[0], job->s[1], job->s[2], job->s[3], job->n[0], job->n[1]};

    rl_store_attachment_insert(inner, &attachment, job_ran, job);
}

static void worker_attachment_insert(rl_store_t *super, const rl_attachment_new_t *attachment, rl_store_cb cb,
                                     void *arg)
{
    struct job *job = job_new(run_attachment_insert, cb, arg);

    job->s[0] = copy(attachment->key);
    job->s[1] = copy(attachment->user_id);
    job->s[2] = copy(attachment->mime);
    job->s[3] = copy(attachment->name);
    job->n[0] = attachment->size;
    job->n[1] = attachment->now;
    submit(super, job);
}

static void run_attachment_get(rl_store_t *inner, struct job *job)
{
    rl_store_attachment_get(inner, job->s[0], job_ran, job);
}

static void worker_attachment_get(rl_store_t *super, const char *key, rl_store_cb cb, void *arg)
{
    struct job *job = job_new(run_attachment_get, cb, arg);

    job->s[0] = copy(key);
    submit(super, job);
}

static void run_session_get(rl_store_t *inner, struct job *job)
{
    rl_store_session_get(inner, job->s[0], job->s[1], job_ran, job);
}

static void worker_session_get(rl_store_t *super, const char *user_id, const char *session_id, rl_store_cb cb,
                               void *arg)
{
    struct job *job = job_new(run_session_get, cb, arg);

    job->s[0] = copy(user_id);
    job->s[1] = copy(session_id);
    submit(super, job);
}

/* The bridge writes: s[0..3] carry the idempotency record, s[4..6] and n[0..1] the target. */
static void copy_idem(struct job *job, const rl_idempotency_t *idem)
{
    job->s[0] = copy(idem->owner);
    job->s[1] = copy(idem->scope);
    job->s[2] = copy(idem->key);
    job->s[3] = copy(idem->body_hash);
}

static rl_idempotency_t job_idem(const struct job *job)
{
    return (rl_idempotency_t){job->s[0], job->s[1], job->s[2], job->s[3]};
}

static void copy_target(struct job *job, const rl_bridge_target_t *target)
{
    job->s[4] = copy(target->installation_id);
    job->s[5] = copy(target->session_id);
    job->s[6] = copy(target->interaction_id);
    job->n[0] = target->now;
    job->n[1] = target->followup_ms;
}

static rl_bridge_target_t job_target(const struct job *job)
{
    return (rl_bridge_target_t){job->s[4], job->s[5], job->s[6], job->n[0], job->n[1]};
}

static void run_message_open(rl_store_t *inner, struct job *job)
{
    rl_idempotency_t idem = job_idem(job);
    rl_bridge_target_t target = job_target(job);

    rl_store_message_open(inner, &idem, &target, job->s[7], job->s[8], job->body, job_ran, job);
}

static void worker_message_open(rl_store_t *super, const rl_idempotency_t *idem, const rl_bridge_target_t *target,
                                const char *message_id, const char *user_id, json_t *body, rl_store_cb cb, void *arg)
{
    struct job *job = job_new(run_message_open, cb, arg);

    copy_idem(job, idem);
    copy_target(job, target);
    job->s[7] = copy(message_id);
    job->s[8] = copy(user_id);
    job->body = body_copy(body);
    submit(super, job);
}

static void run_message_stream_state(rl_store_t *inner, struct job *job)
{
    rl_store_message_stream_state(inner, job->s[0], job->s[1], job->s[2], job_ran, job);
}

static void worker_message_stream_state(rl_store_t *super, const char *installation_id, const char *message_id,
                                        const char *scope, rl_store_cb cb, void *arg)
{
    struct job *job = job_new(run_message_stream_state, cb, arg);

    job->s[0] = copy(installation_id);
    job->s[1] = copy(message_id);
    job->s[2] = copy(scope);
    submit(super, job);
}

static void run_deltas_append(rl_store_t *inner, struct job *job)
{
    rl_delta_batch_t *batch = job->batch;

    job->batch = NULL;
    rl_store_deltas_append(inner, batch, job->n[0], job_ran, job);
}

static void worker_deltas_append(rl_store_t *super, rl_delta_batch_t *batch, int64_t now, rl_store_cb cb, void *arg)
{
    struct job *job = job_new(run_deltas_append, cb, arg);

    job->batch = batch; /* taken, not copied: the caller lets go of it */
    job->n[0] = now;
    submit(super, job);
}

static void run_message_end(rl_store_t *inner, struct job *job)
{
    rl_idempotency_t idem = job_idem(job);

    rl_store_message_end(inner, &idem, job->s[4], job->s[5], job->body, job->n[0], job_ran, job);
}

static void worker_message_end(rl_store_t *super, const rl_idempotency_t *idem, const char *installation_id,
                               const char *message_id, json_t *body, int64_t now, rl_store_cb cb, void *arg)
{
    struct job *job = job_new(run_message_end, cb, arg);

    copy_idem(job, idem);
    job->s[4] = copy(installation_id);
    job->s[5] = copy(message_id);
    job->body = body_copy(body);
    job->n[0] = now;
    submit(super, job);
}

static void run_task_step(rl_store_t *inner, struct job *job)
{
    rl_idempotency_t idem = job_idem(job);
    rl_bridge_target_t target = job_target(job);

    rl_store_task_step(inner, &idem, &target, (rl_task_step_t)job->k[0], job->body, job_ran, job);
}

static void worker_task_step(rl_store_t *super, const rl_idempotency_t *idem, const rl_bridge_target_t *target,
                             rl_task_step_t step, json_t *body, rl_store_cb cb, void *arg)
{
    struct job *job = job_new(run_task_step, cb, arg);

    copy_idem(job, idem);
    copy_target(job, target);
    job->k[0] = (int)step;
    job->body = body_copy(body);
    submit(super, job);
}

static void run_approval_request(rl_store_t *inner, struct job *job)
{
    rl_idempotency_t idem = job_idem(job);
    rl_bridge_target_t target = job_target(job);

    rl_store_approval_request(inner, &idem, &target, job->body, job->n[2], job_ran, job);
}

static void worker_approval_request(rl_store_t *super, const rl_idempotency_t *idem, const rl_bridge_target_t *target,
                                    json_t *body, int64_t expires_at, rl_store_cb cb, void *arg)
{
    struct job *job = job_new(run_approval_request, cb, arg);

    copy_idem(job, idem);
    copy_target(job, target);
    job->body = body_copy(body);
    job->n[2] = expires_at;
    submit(super, job);
}

static void run_approval_decide(rl_store_t *inner, struct job *job)
{
    rl_store_approval_decide(inner, job->s[0], job->s[1], job->s[2], job->s[3], job->s[4], job->n[0], job_ran, job);
}

static void worker_approval_decide(rl_store_t *super, const char *user_id, const char *approval_id,
                                   const char *decision, const char *scope, const char *scope_value, int64_t now,
                                   rl_store_cb cb, void *arg)
{
    struct job *job = job_new(run_approval_decide, cb, arg);

    job->s[0] = copy(user_id);
    job->s[1] = copy(approval_id);
    job->s[2] = copy(decision);
    job->s[3] = copy(scope);
    job->s[4] = copy(scope_value);
    job->n[0] = now;
    submit(super, job);
}

static void run_approval_expire(rl_store_t *inner, struct job *job)
{
    rl_store_approval_expire(inner, job->s[0], job->n[0], job_ran, job);
}

static void worker_approval_expire(rl_store_t *super, const char *approval_id, int64_t now, rl_store_cb cb, void *arg)
{
    struct job *job = job_new(run_approval_expire, cb, arg);

    job->s[0] = copy(approval_id);
    job->n[0] = now;
    submit(super, job);
}

static void run_approvals_pending(rl_store_t *inner, struct job *job)
{
    rl_store_approvals_pending(inner, job->s[0], job->n[0], job_ran, job);
}

static void worker_approvals_pending(rl_store_t *super, const char *user_id, int64_t due_before, rl_store_cb cb,
                                     void *arg)
{
    struct job *job = job_new(run_approvals_pending, cb, arg);

    job->s[0] = copy(user_id);
    job->n[0] = due_before;
    submit(super, job);
}

static void run_updates_list(rl_store_t *inner, struct job *job)
{
    rl_store_updates_list(inner, job->s[0], job->n[0], job->n[1], job->k[0], job_ran, job);
}

static void worker_updates_list(rl_store_t *super, const char *installation_id, int64_t after_id, int64_t since_ms,
                                int limit, rl_store_cb cb, void *arg)
{
    struct job *job = job_new(run_updates_list, cb, arg);

    job->s[0] = copy(installation_id);
    job->n[0] = after_id;
    job->n[1] = since_ms;
    job->k[0] = limit;
    submit(super, job);
}

static void run_updates_ack(rl_store_t *inner, struct job *job)
{
    rl_store_updates_ack(inner, job->s[0], job->n[0], job_ran, job);
}

static void worker_updates_ack(rl_store_t *super, const char *installation_id, int64_t up_to, rl_store_cb cb, void *arg)
{
    struct job *job = job_new(run_updates_ack, cb, arg);

    job->s[0] = copy(installation_id);
    job->n[0] = up_to;
    submit(super, job);
}

static void run_purge_bridge(rl_store_t *inner, struct job *job)
{
    rl_store_purge_bridge(inner, job->n[0], job->n[1], job->n[2], job_ran, job);
}

static void worker_purge_bridge(rl_store_t *super, int64_t now, int64_t idempotency_ttl, int64_t replay_window,
                                rl_store_cb cb, void *arg)
{
    struct job *job = job_new(run_purge_bridge, cb, arg);

    job->n[0] = now;
    job->n[1] = idempotency_ttl;
    job->n[2] = replay_window;
    submit(super, job);
}

static const struct rl_store_ops worker_ops = {
    .name = "worker",
    .close = worker_close,
    .pending = worker_pending,
    .flush = worker_flush,
    .wake_fd = worker_wake_fd,
    .user_ensure = worker_user_ensure,
    .pairing_insert = worker_pairing_insert,
    .pairing_claim = worker_pairing_claim,
    .pairing_poll = worker_pairing_poll,
    .installation_get = worker_installation_get,
    .installation_set_manifest = worker_installation_set_manifest,
    .purge = worker_purge,
    .me_get = worker_me_get,
    .installation_patch = worker_installation_patch,
    .installation_revoke = worker_installation_revoke,
    .session_create = worker_session_create,
    .session_change = worker_session_change,
    .session_cancel = worker_session_cancel,
    .messages_list = worker_messages_list,
    .message_send = worker_message_send,
    .attachment_insert = worker_attachment_insert,
    .attachment_get = worker_attachment_get,
    .session_get = worker_session_get,
    .message_open = worker_message_open,
    .message_stream_state = worker_message_stream_state,
    .deltas_append = worker_deltas_append,
    .message_end = worker_message_end,
    .task_step = worker_task_step,
    .approval_request = worker_approval_request,
    .approval_decide = worker_approval_decide,
    .approval_expire = worker_approval_expire,
    .approvals_pending = worker_approvals_pending,
    .updates_list = worker_updates_list,
    .updates_ack = worker_updates_ack,
    .purge_bridge = worker_purge_bridge,
};

int rl_store__worker_open(rl_store_t *inner, rl_store_t **out)
{
    struct worker_store *store = calloc(1, sizeof(*store));
    int fds[2];

    if (store == NULL) {
        rl_store_close(inner);
        return -1;
    }
    store->super.ops = &worker_ops;
    store->inner = inner;
    store->pipe_read = store->pipe_write = -1;
    pthread_mutex_init(&store->lock, NULL);
    pthread_cond_init(&store->wake, NULL);
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
        rl_log_error("cannot create the store's wake-up pipe: %s", strerror(errno));
        goto fail;
    }
    store->pipe_read = fds[0];
    store->pipe_write = fds[1];
    if (pthread_create(&store->thread, NULL, worker_main, store) != 0) {
        rl_log_error("cannot start the store thread: %s", strerror(errno));
        goto fail;
    }
    store->thread_running = 1;
    *out = &store->super;
    return 0;
fail:
    worker_close(&store->super);
    return -1;
}
