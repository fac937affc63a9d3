#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "bridge/rest.h"
#include "client/retry.h"
#include "common/rand.h"

/* The relay's cap on one delta is 64 KiB; merged deltas stay below it. */
#define MERGE_MAX (60 * 1024)

/* One row per call: its route and its rate bucket (spec, Limits). */
static const struct call_route {
    const char *path;
    const char *bucket;
} routes[] = {
    [RL_CALL_SEND_MESSAGE] = {"/v1/bridge/sendMessage", "msg"},
    [RL_CALL_DELTA] = {"/v1/bridge/sendMessageDelta", "delta"},
    [RL_CALL_END] = {"/v1/bridge/sendMessageEnd", "msg"},
    [RL_CALL_CREATE_TASK] = {"/v1/bridge/createTask", "task"},
    [RL_CALL_UPDATE_TASK] = {"/v1/bridge/updateTask", "task"},
    [RL_CALL_FINISH_TASK] = {"/v1/bridge/finishTask", "task"},
    [RL_CALL_REQUEST_APPROVAL] = {"/v1/bridge/requestApproval", "approval"},
    [RL_CALL_SET_MANIFEST] = {"/v1/bridge/setManifest", "default"},
    /* relayd puts a capability request in the approval bucket: both are prompts to a person. */
    [RL_CALL_REQUEST_CAPABILITY] = {"/v1/bridge/requestDeviceCapability", "approval"},
    [RL_CALL_REGISTER_DEVICE] = {"/v1/bridge/devices", "default"},
    [RL_CALL_ADD_RECIPIENTS] = {"/v1/bridge/sessions/%s/recipients", "default"},
    [RL_CALL_NOTIFY_TOOL_FILE] = {"/v1/bridge/notifyToolFile", "default"},
    [RL_CALL_SESSION_STATE] = {"/v1/bridge/sessions/%s/state", "task"},
};

/* The calls whose outcome the loop hears of, failed or not: the agent waits on them. */
static int reported_back(rl_call_t call)
{
    return call == RL_CALL_END || call == RL_CALL_REQUEST_APPROVAL || call == RL_CALL_REQUEST_CAPABILITY ||
           call == RL_CALL_REGISTER_DEVICE;
}

#define NBUCKETS 5
static const char *const bucket_names[NBUCKETS] = {"msg", "delta", "task", "approval", "default"};

typedef struct op {
    struct op *next;
    rl_call_t call;
    rl_turn_t *turn;
    json_t *body;
    size_t bytes; /* of a delta: its text, counted in queued_bytes while queued */
} op_t;

struct rl_rest {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    op_t *head, *tail;
    int pending;
    size_t queued_bytes, max_queued; /* deltas waiting: see RL_REST_MAX_QUEUED */
    int stopping;
    int revoked;
    int efd;
    rl_rest_result_t *results, *results_tail;
    /* Writer thread only. */
    rl_client_t *client;
    char auth[256];
    rl_retry_policy_t policy;
    rl_retry_bucket_t buckets[NBUCKETS];
};

rl_turn_t *rl_turn_new(const char *session_id, const char *interaction_id)
{
    rl_turn_t *turn = calloc(1, sizeof(*turn));

    if (turn == NULL)
        return NULL;
    turn->refs = 1;
    snprintf(turn->session_id, sizeof(turn->session_id), "%s", session_id);
    snprintf(turn->interaction_id, sizeof(turn->interaction_id), "%s", interaction_id);
    return turn;
}

void rl_turn_ref(rl_turn_t *turn)
{
    __atomic_add_fetch(&turn->refs, 1, __ATOMIC_RELAXED);
}

void rl_turn_unref(rl_turn_t *turn)
{
    if (turn != NULL && __atomic_sub_fetch(&turn->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        free(turn->incomplete_text);
        free(turn);
    }
}

void rl_rest_new_key(char out[37])
{
    unsigned char r[16];

    rl_rand_bytes(r, sizeof(r));
    r[6] = (unsigned char)((r[6] & 0x0f) | 0x40);
    r[8] = (unsigned char)((r[8] & 0x3f) | 0x80);
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3],
             r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13], r[14], r[15]);
}

static int bucket_index(const char *name)
{
    int i;

    for (i = 0; i < NBUCKETS; i++)
        if (strcmp(bucket_names[i], name) == 0)
            return i;
    return NBUCKETS - 1;
}

static void deadline_in(struct timespec *ts, long ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/* Sleeps until deadline unless stopping. Called with the lock held. 0, or -1 when stopping. */
static int sleep_until(rl_rest_t *rest, const struct timespec *deadline)
{
    while (!rest->stopping) {
        if (pthread_cond_timedwait(&rest->cond, &rest->lock, deadline) == ETIMEDOUT)
            return 0;
    }
    return -1;
}

static void post(rl_rest_t *rest, op_t *op, int ok, json_t *result, const char *code)
{
    rl_rest_result_t *r = calloc(1, sizeof(*r));
    uint64_t one = 1;

    if (r == NULL)
        return;
    r->call = op->call;
    r->turn = op->turn;
    if (r->turn != NULL)
        rl_turn_ref(r->turn);
    r->ok = ok;
    r->body = json_incref(op->body);
    r->result = json_incref(result);
    snprintf(r->code, sizeof(r->code), "%s", code != NULL ? code : "");
    pthread_mutex_lock(&rest->lock);
    if (rest->results_tail != NULL)
        rest->results_tail->next = r;
    else
        rest->results = r;
    rest->results_tail = r;
    pthread_mutex_unlock(&rest->lock);
    if (write(rest->efd, &one, sizeof(one)) < 0)
        rl_log(RL_LOG_WARN, "could not wake the loop: %s", strerror(errno));
}

/* Merges deltas of the same message queued right behind op (lock held, before the first attempt). */
static void merge_deltas(rl_rest_t *rest, op_t *op)
{
    const char *text = json_string_value(json_object_get(op->body, "delta"));
    size_t len = json_string_length(json_object_get(op->body, "delta"));
    char *merged;

    if (text == NULL || rest->head == NULL || rest->head->call != RL_CALL_DELTA || rest->head->turn != op->turn)
        return;
    merged = malloc(MERGE_MAX + 1);
    if (merged == NULL)
        return;
    memcpy(merged, text, len);
    while (rest->head != NULL && rest->head->call == RL_CALL_DELTA && rest->head->turn == op->turn) {
        op_t *next = rest->head;
        json_t *d = json_object_get(next->body, "delta");
        size_t n = json_string_length(d);
        if (len + n > MERGE_MAX)
            break;
        memcpy(merged + len, json_string_value(d), n);
        len += n;
        rest->head = next->next;
        if (rest->head == NULL)
            rest->tail = NULL;
        rest->pending--;
        rest->queued_bytes -= next->bytes;
        json_decref(next->body);
        rl_turn_unref(next->turn);
        free(next);
    }
    json_object_set_new(op->body, "delta", json_stringn(merged, len));
    free(merged);
}

static void log_error(const char *path, const rl_client_response_t *response, int result, const char *code,
                      const char *what)
{
    if (result != 0)
        rl_log(RL_LOG_WARN, "%s: %s (%s)", path, response->error, what);
    else
        rl_log(RL_LOG_WARN, "%s: HTTP %ld %s request_id=%s (%s)", path, response->status, code != NULL ? code : "",
               response->request_id, what);
}

/* What the retry hooks of one call need: the writer (for its waits) and the route (for the log). */
typedef struct call_ctx {
    rl_rest_t *rest;
    const char *path;
} call_ctx_t;

/* The writer's waits (buckets, Retry-After, backoff) are timed waits on its condition variable, which a stop ends. */
static int writer_wait(void *user, long ms)
{
    call_ctx_t *call = user;
    struct timespec until;
    int result;

    deadline_in(&until, ms);
    pthread_mutex_lock(&call->rest->lock);
    result = sleep_until(call->rest, &until);
    pthread_mutex_unlock(&call->rest->lock);
    return result;
}

static void writer_retrying(void *user, int attempt, int result, const rl_client_response_t *response,
                            const json_t *answer, long delay_ms)
{
    call_ctx_t *call = user;

    log_error(call->path, response, result, rl_client_error_code(answer), "retrying");
}

/* Makes one call with the spec's retry rules. Lock not held. */
static void perform(rl_rest_t *rest, op_t *op)
{
    const struct call_route *route = &routes[op->call];
    const char *headers[] = {rest->auth, "Content-Type: application/json", NULL};
    char path[256];
    call_ctx_t call = {rest, path};
    rl_retry_hooks_t hooks = {writer_wait, writer_retrying, &call};
    rl_client_response_t response;
    json_t *answer = NULL;
    const char *code;
    char *text;
    int result;

    if (op->turn != NULL && op->turn->dropped) {
        if (reported_back(op->call))
            post(rest, op, 0, NULL, "dropped");
        return;
    }
    snprintf(path, sizeof(path), "%s", route->path);
    if (op->call == RL_CALL_ADD_RECIPIENTS || op->call == RL_CALL_SESSION_STATE) {
        const char *sid = json_string_value(json_object_get(op->body, "session_id"));
        /* Session ids are [A-Za-z0-9_]: nothing to escape in a path. */
        if (sid == NULL ||
            strspn(sid, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") != strlen(sid))
            return;
        snprintf(path, sizeof(path), route->path, sid);
        json_object_del(op->body, "session_id");
    }
    if ((op->call == RL_CALL_DELTA || op->call == RL_CALL_END) && op->turn != NULL) {
        if (op->turn->message_id[0] == '\0') {
            /* The message never opened (its sendMessage failed): nothing to add to. */
            if (op->call == RL_CALL_END)
                post(rest, op, 0, NULL, "no_message");
            return;
        }
        json_object_set_new(op->body, "message_id", json_string(op->turn->message_id));
    }
    /*
     * A reply too long for a canonical text that also lost a delta cannot be stored whole: it ends with
     * what arrived and says so, with finish_reason "error" (relayd keeps "incomplete" for its own
     * endings, and an end without a reason would read as a whole reply), rather than with a silent hole.
     */
    if (op->call == RL_CALL_END && op->turn != NULL && op->turn->incomplete_text != NULL &&
        __atomic_load_n(&op->turn->lost_text, __ATOMIC_ACQUIRE)) {
        rl_log(RL_LOG_WARN,
               "interaction %s: a delta was lost and the reply is too long to resend: ending it as "
               "incomplete",
               op->turn->interaction_id);
        json_object_del(op->body, "text");
        json_object_del(op->body, "text_ct");
        json_object_set_new(op->body, op->turn->encrypted ? "text_ct" : "text", json_string(op->turn->incomplete_text));
        json_object_set_new(op->body, "finish_reason", json_string("error"));
    }
    text = json_dumps(op->body, JSON_COMPACT);
    if (text == NULL)
        return;
    result = rl_retry_request(rest->client, &rest->policy, &rest->buckets[bucket_index(route->bucket)], &hooks, "POST",
                              path, headers, text, strlen(text), &response, &answer);
    free(text);
    if (result == RL_CLIENT_E_STOPPED)
        goto out;
    code = rl_client_error_code(answer);
    if (result == 0 && response.status >= 200 && response.status < 300) {
        json_t *r = json_object_get(answer, "result");
        if (op->call == RL_CALL_SEND_MESSAGE && op->turn != NULL)
            snprintf(op->turn->message_id, sizeof(op->turn->message_id), "%s",
                     json_string_value(json_object_get(r, "message_id")) != NULL
                         ? json_string_value(json_object_get(r, "message_id"))
                         : "");
        if (reported_back(op->call))
            post(rest, op, 1, r, NULL);
        goto out;
    }
    log_error(path, &response, result, code, "giving up");
    if (result == 0 && (response.status == 401 || (code != NULL && strcmp(code, "installation_revoked") == 0))) {
        pthread_mutex_lock(&rest->lock);
        rest->revoked = 1;
        pthread_mutex_unlock(&rest->lock);
    }
    /* spec (client rule 4): 410 drops the in-flight work, the target is gone. */
    if (op->turn != NULL && (op->call == RL_CALL_SEND_MESSAGE || (result == 0 && response.status == 410)))
        op->turn->dropped = 1;
    if (op->call == RL_CALL_DELTA && op->turn != NULL)
        __atomic_store_n(&op->turn->lost_text, 1, __ATOMIC_RELEASE);
    post(rest, op, 0, NULL, code != NULL ? code : result != 0 ? "no_answer" : "error");
out:
    json_decref(answer);
    rl_client_response_free(&response);
}

static void *writer_main(void *arg)
{
    rl_rest_t *rest = arg;

    pthread_mutex_lock(&rest->lock);
    while (!rest->stopping) {
        op_t *op = rest->head;
        if (op == NULL) {
            pthread_cond_wait(&rest->cond, &rest->lock);
            continue;
        }
        rest->head = op->next;
        if (rest->head == NULL)
            rest->tail = NULL;
        rest->queued_bytes -= op->bytes;
        if (op->call == RL_CALL_DELTA)
            merge_deltas(rest, op);
        pthread_mutex_unlock(&rest->lock);
        perform(rest, op);
        json_decref(op->body);
        rl_turn_unref(op->turn);
        free(op);
        pthread_mutex_lock(&rest->lock);
        rest->pending--;
    }
    pthread_mutex_unlock(&rest->lock);
    return NULL;
}

rl_rest_t *rl_rest_start(rl_client_t *client, const char *token, const rl_rest_options_t *options)
{
    rl_rest_t *rest = calloc(1, sizeof(*rest));
    pthread_condattr_t attr;

    if (rest == NULL)
        return NULL;
    rest->client = client;
    snprintf(rest->auth, sizeof(rest->auth), "Authorization: Bearer %s", token);
    rest->policy.backoff_ms = options != NULL && options->retry_backoff_ms > 0 ? options->retry_backoff_ms : 1000;
    rest->policy.outage_ms = options != NULL ? options->outage_ms : 0;
    rest->max_queued = options != NULL && options->max_queued > 0 ? options->max_queued : RL_REST_MAX_QUEUED;
    rest->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_mutex_init(&rest->lock, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&rest->cond, &attr);
    pthread_condattr_destroy(&attr);
    if (rest->efd < 0 || pthread_create(&rest->thread, NULL, writer_main, rest) != 0) {
        if (rest->efd >= 0)
            close(rest->efd);
        free(rest);
        return NULL;
    }
    return rest;
}

void rl_rest_stop(rl_rest_t *rest)
{
    rl_rest_result_t *r;

    if (rest == NULL)
        return;
    pthread_mutex_lock(&rest->lock);
    rest->stopping = 1;
    pthread_cond_broadcast(&rest->cond);
    pthread_mutex_unlock(&rest->lock);
    pthread_join(rest->thread, NULL);
    while (rest->head != NULL) {
        op_t *op = rest->head;
        rest->head = op->next;
        json_decref(op->body);
        rl_turn_unref(op->turn);
        free(op);
    }
    r = rl_rest_results(rest);
    while (r != NULL) {
        rl_rest_result_t *next = r->next;
        rl_rest_result_free(r);
        r = next;
    }
    rl_client_free(rest->client);
    close(rest->efd);
    pthread_cond_destroy(&rest->cond);
    pthread_mutex_destroy(&rest->lock);
    memset(rest->auth, 0, sizeof(rest->auth));
    free(rest);
}

int rl_rest_fd(const rl_rest_t *rest)
{
    return rest->efd;
}

void rl_rest_submit(rl_rest_t *rest, rl_call_t call, rl_turn_t *turn, json_t *body)
{
    op_t *op = calloc(1, sizeof(*op));

    if (op == NULL) {
        json_decref(body);
        return;
    }
    op->call = call;
    op->turn = turn;
    op->body = body;
    if (call == RL_CALL_DELTA)
        op->bytes = json_string_length(json_object_get(body, "delta"));
    pthread_mutex_lock(&rest->lock);
    if (op->bytes > 0 && rest->queued_bytes + op->bytes > rest->max_queued) {
        size_t waiting = rest->queued_bytes;
        pthread_mutex_unlock(&rest->lock);
        /* The END's canonical text brings this text to the relay: dropping it loses no word. */
        if (turn != NULL && !__atomic_exchange_n(&turn->lost_text, 1, __ATOMIC_ACQ_REL))
            rl_log(RL_LOG_WARN,
                   "interaction %s: %zu bytes of deltas are waiting for the relay: dropping new ones "
                   "until the end of the message carries the whole text",
                   turn->interaction_id, waiting);
        json_decref(body);
        free(op);
        return;
    }
    if (turn != NULL)
        rl_turn_ref(turn);
    rest->queued_bytes += op->bytes;
    if (rest->tail != NULL)
        rest->tail->next = op;
    else
        rest->head = op;
    rest->tail = op;
    rest->pending++;
    pthread_cond_broadcast(&rest->cond);
    pthread_mutex_unlock(&rest->lock);
}

rl_rest_result_t *rl_rest_results(rl_rest_t *rest)
{
    rl_rest_result_t *r;
    uint64_t n;

    if (read(rest->efd, &n, sizeof(n)) < 0 && errno != EAGAIN)
        rl_log(RL_LOG_WARN, "eventfd: %s", strerror(errno));
    pthread_mutex_lock(&rest->lock);
    r = rest->results;
    rest->results = rest->results_tail = NULL;
    pthread_mutex_unlock(&rest->lock);
    return r;
}

void rl_rest_result_free(rl_rest_result_t *r)
{
    rl_turn_unref(r->turn);
    json_decref(r->body);
    json_decref(r->result);
    free(r);
}

int rl_rest_revoked(rl_rest_t *rest)
{
    int revoked;

    pthread_mutex_lock(&rest->lock);
    revoked = rest->revoked;
    pthread_mutex_unlock(&rest->lock);
    return revoked;
}

int rl_rest_pending(rl_rest_t *rest)
{
    int pending;

    pthread_mutex_lock(&rest->lock);
    pending = rest->pending;
    pthread_mutex_unlock(&rest->lock);
    return pending;
}
