#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/crypto.h>

#include "common/base64.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/jobs.h"
#include "common/log.h"
#include "common/strmap.h"
#include "relay/core/hub.h"
#include "relay/core/ops.h"
#include "relay/push/push.h"
#include "push/push_endpoint.h"
#include "relay/core/feature.h"
#include "auth/token.h"
#include "push/webpush.h"

/*
 * Pushes in flight at once; a push service answers in tens of milliseconds.
 * One user may hold a few of them and one push service origin half, so that
 * endpoints that never answer (one user's, or many users' aimed at one host)
 * leave room for everyone else's.
 */
#define INFLIGHT_MAX        32
#define USER_INFLIGHT_MAX   4
#define ORIGIN_INFLIGHT_MAX (INFLIGHT_MAX / 2)
#define CONNECT_MS_MAX      5000
/* Endpoints whose pushes failed, remembered for their back-off; past this many, new ones are not. */
#define HEALTH_MAX 100000
/* The longest an endpoint is skipped after failures. */
#define BACKOFF_MAX_MS (3600 * 1000)
/* A VAPID token is signed for 12 hours and reused for an origin until an hour before it lapses. */
#define VAPID_TTL_S   (12 * 3600)
#define VAPID_SPARE_S 3600
#define VAPID_CACHE   16
#define ORIGIN_MAX    512
/* How much of a text a notification shows. */
#define SNIPPET_CHARS 160
/* A finished reply is worth a push for a day; an approval until it expires. */
#define REPLY_TTL_S (24 * 3600)

struct push_user;

struct push_job {
    struct push_job *next;
    struct rl_push *push;
    struct push_user *user; /* whose push it is; cleared once it is done */
    char origin[ORIGIN_MAX];
    char *endpoint;
    char *payload;
    size_t payload_len;
    unsigned char p256dh[RL_WEBPUSH_KEY_LEN];
    unsigned char auth[RL_WEBPUSH_AUTH_LEN];
    int64_t ttl_s;
    const char *urgency; /* static */
    /* the sender's, while in flight */
    CURL *easy;
    struct curl_slist *headers;
    unsigned char *body;
    /* the outcome */
    long status;
    int failed;  /* no HTTP answer at all */
    int refused; /* an address it resolved to is outside the policy */
    int counted; /* in its origin's load (sender only) */
};

struct job_list {
    struct push_job *head, *tail;
};

/*
 * One user's pushes, waiting and in flight. The users with pushes waiting
 * form a ring that the sender serves in turn, one push each, so that a user
 * with a thousand pushes waiting delays another's first by one turn, not a
 * thousand. Guarded by the push's lock.
 */
struct push_user {
    char id[RL_PRINCIPAL_MAX + 1];
    struct job_list todo;
    size_t waiting, flying;
    struct push_user *next; /* in the ring */
    int in_ring;
};

/* Pushes in flight to one push service origin; sender only. */
struct origin_load {
    char origin[ORIGIN_MAX];
    size_t flying;
};

/* An endpoint whose last pushes failed: skipped until retry_at_ms, dropped after --push-failures-max. Loop only. */
struct endpoint_health {
    int64_t failures;
    int64_t retry_at_ms;
};

struct vapid_token {
    char origin[ORIGIN_MAX];
    char *authorization;
    int64_t until_s;
};

struct rl_push {
    rl_push_ctx_t ctx; /* what it uses of the relay */
    rl_vapid_t *vapid;
    rl_push_policy_t policy; /* where pushes may go (push_endpoint.h); immutable once open */
    char subject[600];
    CURLM *multi;
    rl_job_t sender;      /* the sender's run, on the relay's background jobs */
    int sender_running;   /* submitted, and its done not heard yet */
    pthread_mutex_t lock; /* guards users, ring, done, total */
    rl_strmap_t *users;   /* user id -> struct push_user, while they have pushes waiting or in flight */
    struct push_user *ring_head, *ring_tail;
    size_t ring_count;
    size_t total; /* pushes waiting or in flight, all users */
    struct job_list done;
    struct vapid_token tokens[VAPID_CACHE];   /* sender only */
    struct push_job *flying[INFLIGHT_MAX];    /* sender only, then the stopper after the join */
    struct origin_load origins[INFLIGHT_MAX]; /* sender only */
    rl_strmap_t *health;                      /* SHA-256 of an endpoint -> struct endpoint_health; loop only */
    size_t dropped, dropped_user, backed_off; /* loop only */
};

/* What an event turns into: the user's subscriptions are read, then each gets the payload. */
struct push_targets {
    rl_store_op_t base;
    rl_push_t *push;
    const char *user_id, *payload; /* in the arena */
    int64_t ttl_s;
    const char *urgency;
    rl_push_subscription_row_t *rows; /* result */
    size_t count;
};

static int push_targets_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct push_targets *op = (void *)base;

    return RL_TXN(txn, push_subscriptions_of_user, op->user_id, &op->rows, &op->count);
}

static const rl_store_op_type_t push_targets_type = {"push_targets", 0, push_targets_run, NULL};

/* A subscription the push service called gone, or one the user dropped (user_id set: only theirs). */
struct push_forget {
    rl_store_op_t base;
    const char *user_id, *endpoint;
    int removed; /* result */
};

static int push_forget_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct push_forget *op = (void *)base;
    rl_push_subscription_row_t row;
    int result = RL_TXN(txn, push_subscription_get, op->endpoint, &row);

    /* Someone else's endpoint is as unknown as one that never was. */
    if (result == RL_E_NOT_FOUND || (result == 0 && op->user_id != NULL && strcmp(row.user_id, op->user_id) != 0))
        return 0;
    if (result == 0)
        result = RL_TXN(txn, push_subscription_delete, op->endpoint);
    op->removed = result == 0;
    return result;
}

static const rl_store_op_type_t push_forget_type = {"push_forget", 1, push_forget_run, NULL};

/* A browser subscribes: its endpoint is (re)bound to this user, and the user keeps the newest few. */
struct push_subscribe {
    rl_store_op_t base;
    rl_push_subscription_row_t row;
    size_t keep;
};

static int same_secret(const char *a, const char *b)
{
    size_t len = a != NULL ? strlen(a) : 0;

    return a != NULL && b != NULL && strlen(b) == len && CRYPTO_memcmp(a, b, len) == 0;
}

static int push_subscribe_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct push_subscribe *op = (void *)base;
    rl_push_subscription_row_t existing, *rows;
    size_t count, i;
    int result = RL_TXN(txn, push_subscription_get, op->row.endpoint, &existing);

    /*
     * The same browser may sign in as someone else: the endpoint follows the
     * newest sign-in, but only with the keys it has, which only that browser
     * (and this store) knows. Knowing another user's endpoint alone must not
     * turn their notifications off, nor put one's own on their screen.
     */
    if (result == 0 && strcmp(existing.user_id, op->row.user_id) != 0 &&
        !(same_secret(existing.p256dh, op->row.p256dh) && same_secret(existing.auth, op->row.auth)))
        return RL_E_CONFLICT;
    if (result == 0)
        result = RL_TXN(txn, push_subscription_delete, op->row.endpoint);
    if ((result != 0 && result != RL_E_NOT_FOUND) || (result = RL_TXN(txn, push_subscription_insert, &op->row)) != 0 ||
        (result = RL_TXN(txn, push_subscriptions_of_user, op->row.user_id, &rows, &count)) != 0)
        return result;
    for (i = 0; i + op->keep < count && result == 0; ++i)
        result = RL_TXN(txn, push_subscription_delete, rows[i].endpoint);
    return result;
}

static const rl_store_op_type_t push_subscribe_type = {"push_subscribe", 1, push_subscribe_run, NULL};

static void list_push(struct job_list *list, struct push_job *job)
{
    job->next = NULL;
    if (list->tail != NULL)
        list->tail->next = job;
    else
        list->head = job;
    list->tail = job;
}

static void job_free(struct push_job *job)
{
    if (job == NULL)
        return;
    free(job->endpoint);
    if (job->payload != NULL) {
        OPENSSL_cleanse(job->payload, job->payload_len);
        free(job->payload);
    }
    curl_slist_free_all(job->headers);
    free(job->body);
    OPENSSL_cleanse(job->auth, sizeof(job->auth));
    free(job);
}

/* scheme://host[:port]; what logs show of an endpoint, whose path is a capability. */
static void origin_of(const char *url, char *out, size_t outsz)
{
    const char *host = strstr(url, "://");
    size_t len = host != NULL ? (size_t)(host + 3 - url) + strcspn(host + 3, "/?#") : 0;

    if (len == 0 || len >= outsz)
        len = 0;
    memcpy(out, url, len);
    out[len] = '\0';
}

/* ---- the sender thread ---- */

static const char *vapid_for(struct rl_push *push, const char *endpoint)
{
    char origin[ORIGIN_MAX];
    int64_t now = rl_clock_now_ms() / 1000;
    struct vapid_token *slot = NULL, *oldest = &push->tokens[0];
    size_t i;

    origin_of(endpoint, origin, sizeof(origin));
    for (i = 0; i < VAPID_CACHE; ++i) {
        struct vapid_token *token = &push->tokens[i];
        if (strcmp(token->origin, origin) == 0) {
            slot = token;
            break;
        }
        if (token->until_s < oldest->until_s)
            oldest = token;
    }
    if (slot != NULL && slot->authorization != NULL && slot->until_s - VAPID_SPARE_S > now)
        return slot->authorization;
    if (slot == NULL)
        slot = oldest;
    free(slot->authorization);
    snprintf(slot->origin, sizeof(slot->origin), "%s", origin);
    slot->authorization = rl_vapid_authorization(push->vapid, endpoint, push->subject, now, VAPID_TTL_S);
    slot->until_s = now + VAPID_TTL_S;
    return slot->authorization;
}

static size_t discard(char *data, size_t size, size_t count, void *arg)
{
    return size * count;
}

/*
 * Every address libcurl is about to connect to, after it has resolved the
 * endpoint's name: the address actually connected to is the one judged, so
 * a name that resolved to a public address at subscription and to an
 * internal one now (DNS rebinding) gets no connection.
 */
static curl_socket_t open_socket(void *arg, curlsocktype purpose, struct curl_sockaddr *address)
{
    struct push_job *job = arg;

    if (purpose != CURLSOCKTYPE_IPCXN || !rl_push_address_allowed(&job->push->policy, &address->addr)) {
        job->refused = 1;
        return CURL_SOCKET_BAD;
    }
    return socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
}

/* Encrypts and sets up one request; 0, or -1 when the job cannot be sent (it is then done, failed). */
static int start_job(struct rl_push *push, struct push_job *job)
{
    char header[128];
    const char *authorization = vapid_for(push, job->endpoint);
    long len, timeout = (long)push->ctx.config->push_timeout;

    job->body = malloc(RL_WEBPUSH_BODY_LEN(job->payload_len));
    if (authorization == NULL || job->body == NULL)
        return -1;
    len = rl_webpush_encrypt(job->p256dh, job->auth, NULL, NULL, job->payload, job->payload_len, job->body,
                             RL_WEBPUSH_BODY_LEN(job->payload_len));
    if (len < 0 || (job->easy = curl_easy_init()) == NULL)
        return -1;
    job->headers = curl_slist_append(job->headers, "Content-Type: application/octet-stream");
    job->headers = curl_slist_append(job->headers, "Content-Encoding: aes128gcm");
    snprintf(header, sizeof(header), "TTL: %lld", (long long)job->ttl_s);
    job->headers = curl_slist_append(job->headers, header);
    snprintf(header, sizeof(header), "Urgency: %s", job->urgency);
    job->headers = curl_slist_append(job->headers, header);
    job->headers = curl_slist_append(job->headers, "Expect:");
    {
        size_t alen = strlen(authorization) + 32;
        char *line = malloc(alen);
        if (line == NULL)
            return -1;
        snprintf(line, alen, "Authorization: %s", authorization);
        job->headers = curl_slist_append(job->headers, line);
        free(line);
    }
    curl_easy_setopt(job->easy, CURLOPT_URL, job->endpoint);
    curl_easy_setopt(job->easy, CURLOPT_PROTOCOLS_STR, push->policy.any ? "http,https" : "https");
    curl_easy_setopt(job->easy, CURLOPT_FOLLOWLOCATION, 0L);
    /* A proxy from the environment would be the address connected to, and it would reach anywhere. */
    curl_easy_setopt(job->easy, CURLOPT_PROXY, "");
    curl_easy_setopt(job->easy, CURLOPT_OPENSOCKETFUNCTION, open_socket);
    curl_easy_setopt(job->easy, CURLOPT_OPENSOCKETDATA, job);
    curl_easy_setopt(job->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(job->easy, CURLOPT_TIMEOUT_MS, timeout);
    curl_easy_setopt(job->easy, CURLOPT_CONNECTTIMEOUT_MS, timeout < CONNECT_MS_MAX ? timeout : (long)CONNECT_MS_MAX);
    curl_easy_setopt(job->easy, CURLOPT_POST, 1L);
    curl_easy_setopt(job->easy, CURLOPT_POSTFIELDS, job->body);
    curl_easy_setopt(job->easy, CURLOPT_POSTFIELDSIZE, len);
    curl_easy_setopt(job->easy, CURLOPT_HTTPHEADER, job->headers);
    curl_easy_setopt(job->easy, CURLOPT_USERAGENT, "relayd");
    curl_easy_setopt(job->easy, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(job->easy, CURLOPT_PRIVATE, job);
    if (curl_multi_add_handle(push->multi, job->easy) != CURLM_OK)
        return -1;
    return 0;
}

static void fly(struct rl_push *push, struct push_job *job, struct push_job *replace)
{
    size_t i;

    for (i = 0; i < INFLIGHT_MAX; ++i) {
        if (push->flying[i] == replace) {
            push->flying[i] = job;
            return;
        }
    }
}

static struct origin_load *origin_load_of(struct rl_push *push, const char *origin, int create)
{
    size_t i;
    struct origin_load *free_slot = NULL;

    for (i = 0; i < INFLIGHT_MAX; ++i) {
        struct origin_load *load = &push->origins[i];
        if (load->flying > 0 && strcmp(load->origin, origin) == 0)
            return load;
        if (load->flying == 0 && free_slot == NULL)
            free_slot = load;
    }
    if (create && free_slot != NULL)
        snprintf(free_slot->origin, sizeof(free_slot->origin), "%s", origin);
    return create ? free_slot : NULL;
}

static void ring_append(struct rl_push *push, struct push_user *user)
{
    user->next = NULL;
    user->in_ring = 1;
    if (push->ring_tail != NULL)
        push->ring_tail->next = user;
    else
        push->ring_head = user;
    push->ring_tail = user;
    ++push->ring_count;
}

static struct push_user *ring_pop(struct rl_push *push)
{
    struct push_user *user = push->ring_head;

    push->ring_head = user->next;
    if (push->ring_head == NULL)
        push->ring_tail = NULL;
    user->next = NULL;
    user->in_ring = 0;
    --push->ring_count;
    return user;
}

/*
 * The next push to start, lock held: the users in turn, skipping one whose
 * share of the pushes in flight is taken, or whose next push goes to an
 * origin whose share is. NULL when none may start now.
 */
static struct push_job *next_job(struct rl_push *push)
{
    size_t tries, count = push->ring_count;

    for (tries = 0; tries < count; ++tries) {
        struct push_user *user = ring_pop(push);
        struct push_job *job = user->todo.head;
        struct origin_load *load = origin_load_of(push, job->origin, 0);
        if (user->flying < USER_INFLIGHT_MAX && (load == NULL || load->flying < ORIGIN_INFLIGHT_MAX)) {
            user->todo.head = job->next;
            if (user->todo.head == NULL)
                user->todo.tail = NULL;
            --user->waiting;
            ++user->flying;
            if (user->todo.head != NULL)
                ring_append(push, user);
            return job;
        }
        ring_append(push, user);
    }
    return NULL;
}

static void user_free(void *value)
{
    struct push_user *user = value;
    struct push_job *job, *next;

    for (job = user->todo.head; job != NULL; job = next) {
        next = job->next;
        job_free(job);
    }
    free(user);
}

static void finish_job(struct rl_push *push, struct push_job *job)
{
    struct origin_load *load = origin_load_of(push, job->origin, 0);

    fly(push, NULL, job);
    if (load != NULL && job->counted)
        --load->flying;
    if (job->easy != NULL) {
        curl_multi_remove_handle(push->multi, job->easy);
        curl_easy_cleanup(job->easy);
        job->easy = NULL;
    }
    pthread_mutex_lock(&push->lock);
    --job->user->flying;
    --push->total;
    if (job->user->flying == 0 && job->user->waiting == 0)
        user_free(rl_strmap_remove(push->users, job->user->id));
    job->user = NULL;
    list_push(&push->done, job);
    pthread_mutex_unlock(&push->lock);
    /* The loop collects the done list (collect_done); once the jobs stop, rl_push_close frees it. */
    rl_job_post(&push->sender, "x", 1);
}

/* The sender: a run that lasts until the relay stops (interrupt_sender wakes its poll then). */
static void sender_run(rl_job_t *sender)
{
    struct rl_push *push = H2O_STRUCT_FROM_MEMBER(struct rl_push, sender, sender);
    int inflight = 0;
    sigset_t all;

    /* Signals belong to the loop thread (src/http/stop.c). */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    while (!rl_job_stopping(sender)) {
        struct push_job *job = NULL;
        CURLMsg *msg;
        int running = 0, left;

        pthread_mutex_lock(&push->lock);
        while (inflight < INFLIGHT_MAX && (job = next_job(push)) != NULL) {
            pthread_mutex_unlock(&push->lock);
            if (start_job(push, job) == 0) {
                struct origin_load *load = origin_load_of(push, job->origin, 1);
                if (load != NULL) {
                    ++load->flying;
                    job->counted = 1;
                }
                fly(push, job, NULL);
                ++inflight;
            } else {
                job->failed = 1;
                finish_job(push, job);
            }
            pthread_mutex_lock(&push->lock);
        }
        pthread_mutex_unlock(&push->lock);
        curl_multi_perform(push->multi, &running);
        while ((msg = curl_multi_info_read(push->multi, &left)) != NULL) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&job);
            if (msg->data.result == CURLE_OK)
                curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &job->status);
            else
                job->failed = 1;
            --inflight;
            finish_job(push, job);
        }
        curl_multi_poll(push->multi, NULL, 0, 1000, NULL);
    }
}

static void interrupt_sender(rl_job_t *sender)
{
    struct rl_push *push = H2O_STRUCT_FROM_MEMBER(struct rl_push, sender, sender);

    curl_multi_wakeup(push->multi);
}

static void sender_done(rl_job_t *sender)
{
    struct rl_push *push = H2O_STRUCT_FROM_MEMBER(struct rl_push, sender, sender);

    push->sender_running = 0;
}

/* ---- the loop's side ---- */

static void on_forgotten(rl_store_op_t *base)
{
    if (base->result != 0)
        rl_log_warn("could not delete an expired push subscription");
}

static void forget_endpoint(struct rl_push *push, const char *endpoint)
{
    struct push_forget *op = rl_store_op_new(&push_forget_type, sizeof(*op));

    op->endpoint = rl_arena_strdup(&op->base.arena, endpoint);
    rl_store_submit(push->ctx.store, &op->base, on_forgotten, push);
}

static int health_lapsed(const char *key, void *value, void *arg)
{
    const struct endpoint_health *health = value;

    return health->retry_at_ms + BACKOFF_MAX_MS < *(const int64_t *)arg;
}

/*
 * A push that failed (no answer, a refused address, or a status other than
 * 2xx, 404 and 410): its endpoint is skipped for --push-backoff, twice as
 * long after each further failure, and its subscription is deleted after
 * --push-failures-max in a row. Returns the failures so far, 0 once dropped.
 */
static int64_t endpoint_failed(struct rl_push *push, const char *endpoint)
{
    const rl_config_t *config = push->ctx.config;
    char key[RL_TOKEN_HASH_HEX + 1];
    struct endpoint_health *health;
    int64_t now = rl_clock_now_ms(), backoff = config->push_backoff, failures;

    rl_token_hash(endpoint, strlen(endpoint), key);
    health = rl_strmap_get(push->health, key);
    if (health == NULL) {
        health = calloc(1, sizeof(*health));
        if (health == NULL)
            return 1;
        if (rl_strmap_size(push->health) >= HEALTH_MAX)
            rl_strmap_sweep(push->health, health_lapsed, &now, free);
        if (rl_strmap_put(push->health, key, health) != 0) {
            free(health);
            return 1;
        }
    }
    failures = ++health->failures;
    if (failures >= config->push_failures_max) {
        free(rl_strmap_remove(push->health, key));
        forget_endpoint(push, endpoint);
        return 0;
    }
    while (--failures > 0 && backoff < BACKOFF_MAX_MS)
        backoff *= 2;
    health->retry_at_ms = now + (backoff < BACKOFF_MAX_MS ? backoff : BACKOFF_MAX_MS);
    return health->failures;
}

static void endpoint_answered(struct rl_push *push, const char *endpoint)
{
    char key[RL_TOKEN_HASH_HEX + 1];

    if (rl_strmap_size(push->health) == 0)
        return;
    rl_token_hash(endpoint, strlen(endpoint), key);
    free(rl_strmap_remove(push->health, key));
}

/* Whether the endpoint is in its back-off after failures: its pushes are not even queued meanwhile. */
static int endpoint_resting(struct rl_push *push, const char *endpoint)
{
    char key[RL_TOKEN_HASH_HEX + 1];
    struct endpoint_health *health;

    if (rl_strmap_size(push->health) == 0)
        return 0;
    rl_token_hash(endpoint, strlen(endpoint), key);
    health = rl_strmap_get(push->health, key);
    return health != NULL && health->retry_at_ms > rl_clock_now_ms();
}

/* On the loop: what the sender finished (it posted a byte for each). */
static void collect_done(rl_job_t *sender, const char *bytes, size_t len)
{
    struct rl_push *push = H2O_STRUCT_FROM_MEMBER(struct rl_push, sender, sender);
    struct push_job *job, *next;

    (void)bytes;
    (void)len;
    pthread_mutex_lock(&push->lock);
    job = push->done.head;
    push->done.head = push->done.tail = NULL;
    pthread_mutex_unlock(&push->lock);
    for (; job != NULL; job = next) {
        next = job->next;
        if (job->status == 404 || job->status == 410) {
            /* RFC 8030 §7.3: the subscription is gone for good; forget it. */
            rl_log_fields(RL_LOG_INFO, json_pack("{s:s, s:s, s:i}", "msg", "push subscription expired", "push_service",
                                                 job->origin, "status", (int)job->status));
            endpoint_answered(push, job->endpoint);
            forget_endpoint(push, job->endpoint);
        } else if (job->failed || job->status < 200 || job->status >= 300) {
            int64_t failures = endpoint_failed(push, job->endpoint);
            rl_log_fields(
                RL_LOG_WARN,
                json_pack("{s:s, s:s, s:i, s:s, s:I}", "msg",
                          failures == 0 ? "push subscription dropped after failed pushes" : "push not accepted",
                          "push_service", job->origin, "status", job->failed ? 0 : (int)job->status, "reason",
                          job->refused  ? "address not allowed (--push-endpoints, --push-networks)"
                          : job->failed ? "no answer"
                                        : "refused by the push service",
                          "failures", (json_int_t)(failures == 0 ? push->ctx.config->push_failures_max : failures)));
        } else {
            endpoint_answered(push, job->endpoint);
            rl_log_fields(RL_LOG_DEBUG, json_pack("{s:s, s:s, s:i}", "msg", "push sent", "push_service", job->origin,
                                                  "status", (int)job->status));
        }
        job_free(job);
    }
}

int rl_push_open(const rl_push_ctx_t *ctx, rl_push_t **out)
{
    struct rl_push *push = calloc(1, sizeof(*push));
    static const rl_job_kind_t sender_kind = {"push sender", 1, 1};
    char error[256];

    *out = NULL;
    if (push == NULL)
        return -1;
    push->ctx = *ctx;
    pthread_mutex_init(&push->lock, NULL);
    /* From here on, a failure leaves a push that rl_push_close can take apart (the relay's stop does). */
    *out = push;
    push->users = rl_strmap_new(RL_PUSH_QUEUE_MAX + INFLIGHT_MAX);
    push->health = rl_strmap_new(HEALTH_MAX);
    if (push->users == NULL || push->health == NULL)
        return -1;
    if (rl_push_policy_init(&push->policy, ctx->config->push_endpoints, ctx->config->push_networks, error,
                            sizeof(error)) != 0) {
        rl_log_error("push: %s", error);
        return -1;
    }
    /* RFC 8292 §2.1: a contact for the push service, a mailto: or https: URI. */
    snprintf(push->subject, sizeof(push->subject), "%s",
             ctx->config->push_subject[0] != '\0' ? ctx->config->push_subject : ctx->config->public_url);
    if (rl_vapid_open(ctx->config->data, &push->vapid) != 0)
        return -1;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || (push->multi = curl_multi_init()) == NULL) {
        rl_log_error("push: cannot initialise libcurl");
        return -1;
    }
    push->sender.kind = &sender_kind;
    push->sender.run = sender_run;
    push->sender.progress = collect_done;
    push->sender.done = sender_done;
    push->sender.interrupt = interrupt_sender;
    if (rl_jobs_submit(ctx->jobs, &push->sender) != 0) {
        rl_log_error("push: cannot start the sender");
        return -1;
    }
    push->sender_running = 1;
    return 0;
}

void rl_push_close(rl_push_t *push)
{
    struct push_job *job, *next;
    size_t i;

    if (push == NULL)
        return;
    /* The relay stops its background jobs first (rl_relay_stop): the sender has returned. */
    assert(!push->sender_running);
    if (push->users != NULL)
        rl_strmap_free(push->users, user_free);
    rl_strmap_free(push->health, free);
    for (job = push->done.head; job != NULL; job = next) {
        next = job->next;
        job_free(job);
    }
    /* The sender has stopped: what it had in flight is abandoned. */
    for (i = 0; i < INFLIGHT_MAX; ++i) {
        job = push->flying[i];
        if (job == NULL)
            continue;
        if (job->easy != NULL) {
            curl_multi_remove_handle(push->multi, job->easy);
            curl_easy_cleanup(job->easy);
        }
        job_free(job);
    }
    if (push->multi != NULL) {
        curl_multi_cleanup(push->multi);
        curl_global_cleanup();
    }
    for (i = 0; i < VAPID_CACHE; ++i)
        free(push->tokens[i].authorization);
    rl_vapid_free(push->vapid);
    rl_push_policy_free(&push->policy);
    pthread_mutex_destroy(&push->lock);
    free(push);
}

void rl_push_skipped(const rl_push_t *push, rl_push_skipped_t *out)
{
    memset(out, 0, sizeof(*out));
    if (push == NULL)
        return;
    out->backing_off = push->backed_off;
    out->queue_full = push->dropped;
    out->user_queue_full = push->dropped_user;
}

const char *rl_push_public_key(rl_push_t *push)
{
    return push != NULL && push->vapid != NULL ? rl_vapid_public_key(push->vapid) : NULL;
}

static void enqueue(struct rl_push *push, const char *user_id, const rl_push_subscription_row_t *subscription,
                    const struct push_targets *pending)
{
    const char *endpoint = subscription->endpoint, *p256dh = subscription->p256dh, *auth = subscription->auth;
    unsigned char key[RL_WEBPUSH_KEY_LEN + 3], secret[RL_WEBPUSH_AUTH_LEN + 3];
    struct push_user *user;
    struct push_job *job;
    enum { QUEUED, DROP_USER, DROP_ALL } verdict = QUEUED;
    if (endpoint == NULL || p256dh == NULL || auth == NULL || strlen(p256dh) > 88 || strlen(auth) > 24 ||
        rl_base64url_decode(p256dh, strlen(p256dh), key) != RL_WEBPUSH_KEY_LEN ||
        rl_base64url_decode(auth, strlen(auth), secret) != RL_WEBPUSH_AUTH_LEN)
        return;
    /*
     * A subscription made before the policy was (or under a laxer one) is
     * judged again: the decision rests on the URL alone, never on what the
     * target would answer, so dropping it tells its owner nothing.
     */
    if (rl_push_endpoint_check(&push->policy, endpoint, strlen(endpoint)) != NULL) {
        char origin[ORIGIN_MAX];
        origin_of(endpoint, origin, sizeof(origin));
        rl_log_fields(RL_LOG_WARN, json_pack("{s:s, s:s}", "msg", "push subscription dropped: endpoint not allowed",
                                             "push_service", origin));
        forget_endpoint(push, endpoint);
        return;
    }
    if (endpoint_resting(push, endpoint)) {
        if (push->backed_off++ % 100 == 0)
            rl_log_info("push: skipped a push to an endpoint backing off after failures (%zu so far)",
                        push->backed_off);
        return;
    }
    job = calloc(1, sizeof(*job));
    if (job == NULL)
        return;
    job->push = push;
    job->endpoint = strdup(endpoint);
    job->payload = strdup(pending->payload);
    job->payload_len = strlen(pending->payload);
    if (job->endpoint == NULL || job->payload == NULL) {
        job_free(job);
        return;
    }
    origin_of(endpoint, job->origin, sizeof(job->origin));
    memcpy(job->p256dh, key, RL_WEBPUSH_KEY_LEN);
    memcpy(job->auth, secret, RL_WEBPUSH_AUTH_LEN);
    job->ttl_s = pending->ttl_s;
    job->urgency = pending->urgency;
    pthread_mutex_lock(&push->lock);
    user = rl_strmap_get(push->users, user_id);
    if (push->total >= RL_PUSH_QUEUE_MAX) {
        verdict = DROP_ALL;
    } else if (user != NULL && user->waiting + user->flying >= (size_t)push->ctx.config->push_user_max) {
        verdict = DROP_USER;
    } else if (user == NULL) {
        user = calloc(1, sizeof(*user));
        if (user != NULL)
            snprintf(user->id, sizeof(user->id), "%s", user_id);
        if (user == NULL || rl_strmap_put(push->users, user_id, user) != 0) {
            free(user);
            verdict = DROP_ALL;
        }
    }
    if (verdict == QUEUED) {
        job->user = user;
        list_push(&user->todo, job);
        ++user->waiting;
        ++push->total;
        if (!user->in_ring)
            ring_append(push, user);
    }
    pthread_mutex_unlock(&push->lock);
    if (verdict == QUEUED) {
        curl_multi_wakeup(push->multi);
        return;
    }
    job_free(job);
    /* Only the user past their share loses pushes; the others' keep their place. */
    if (verdict == DROP_USER && push->dropped_user++ % 100 == 0)
        rl_log_fields(RL_LOG_WARN,
                      json_pack("{s:s, s:s, s:I, s:I}", "msg", "push dropped: this user has too many waiting",
                                "user_id", user_id, "limit", (json_int_t)push->ctx.config->push_user_max, "dropped",
                                (json_int_t)push->dropped_user));
    if (verdict == DROP_ALL && push->dropped++ % 100 == 0)
        rl_log_fields(RL_LOG_WARN, json_pack("{s:s, s:I, s:I}", "msg", "push dropped: too many waiting", "limit",
                                             (json_int_t)RL_PUSH_QUEUE_MAX, "dropped", (json_int_t)push->dropped));
}

static void on_targets(rl_store_op_t *base)
{
    struct push_targets *op = (void *)base;
    size_t i;

    if (base->result != 0) {
        rl_log_warn("push: cannot read the subscriptions of a user");
        return;
    }
    for (i = 0; i < op->count; ++i)
        enqueue(op->push, op->user_id, &op->rows[i], op);
}

/* The first n code points of text, with an ellipsis when cut. */
static json_t *snippet(const char *text, size_t n)
{
    size_t i = 0, chars = 0;
    char *cut;
    json_t *out;

    if (text == NULL)
        return json_string("");
    while (text[i] != '\0' && chars < n) {
        ++i;
        while (((unsigned char)text[i] & 0xc0) == 0x80)
            ++i;
        ++chars;
    }
    if (text[i] == '\0')
        return json_string(text);
    cut = malloc(i + 4);
    if (cut == NULL)
        return json_string("");
    memcpy(cut, text, i);
    memcpy(cut + i, "\xe2\x80\xa6", 4);
    out = json_string(cut);
    free(cut);
    return out;
}

/* Reads the user's subscriptions and queues note (stolen) for each. */
static void push_to_user(rl_push_t *push, const char *user_id, json_t *note, int64_t ttl_s, const char *urgency)
{
    struct push_targets *op;
    char *payload = note != NULL ? json_dumps(note, JSON_COMPACT) : NULL;

    json_decref(note);
    if (payload == NULL || strlen(payload) > RL_WEBPUSH_PAYLOAD_MAX) {
        free(payload);
        return;
    }
    op = rl_store_op_new(&push_targets_type, sizeof(*op));
    op->push = push;
    op->user_id = rl_arena_strdup(&op->base.arena, user_id);
    op->payload = rl_arena_strdup(&op->base.arena, payload);
    op->ttl_s = ttl_s;
    op->urgency = urgency;
    free(payload);
    rl_store_submit(push->ctx.store, &op->base, on_targets, push);
}

/* Where a notification takes the user: the app routes by fragment, which no server log sees. */
static void session_url(json_t *data, char *url, size_t size)
{
    const char *session_id = json_string_value(json_object_get(data, "session_id"));

    snprintf(url, size, "/#/s/%s", session_id != NULL ? session_id : "");
}

/*
 * issue 26: a notification of an encrypted session carries no plaintext:
 * the envelope (key) as the relay has it, for the service worker to open
 * with the session key on the device, under a generic title. An envelope
 * is never cut: one that does not fit is left out, and the title is all.
 */
static json_t *sealed_note(json_t *note, const char *key, json_t *envelope)
{
    char *text;

    json_object_set_new(note, "encrypted", json_true());
    if (!json_is_string(envelope))
        return note;
    json_object_set(note, key, envelope);
    text = json_dumps(note, JSON_COMPACT);
    if (text == NULL || strlen(text) > RL_WEBPUSH_PAYLOAD_MAX)
        json_object_del(note, key);
    free(text);
    return note;
}

void rl_push_approval_requested(rl_push_t *push, const char *user_id, json_t *event)
{
    const char *command = json_string_value(json_object_get(event, "command"));
    int64_t expires_at = json_integer_value(json_object_get(event, "expires_at")), ttl_s;
    char url[160];

    if (push == NULL)
        return;
    session_url(event, url, sizeof(url));
    /* An approval is worth a push only while it can still be answered. */
    ttl_s = (expires_at - rl_clock_now_ms()) / 1000;
    if (json_object_get(event, "details_ct") != NULL) {
        json_t *note = json_pack(
            "{s:s, s:s, s:s, s:O, s:O, s:O, s:O, s:s, s:I}", "kind", "approval", "title", "Approval needed", "body", "",
            "severity", json_object_get(event, "severity"), "session_id", json_object_get(event, "session_id"),
            "installation_id", json_object_get(event, "installation_id"), "approval_id",
            json_object_get(event, "approval_id"), "url", url, "expires_at", (json_int_t)expires_at);
        push_to_user(push, user_id, sealed_note(note, "details_ct", json_object_get(event, "details_ct")),
                     ttl_s < 1 ? 1 : ttl_s, "high");
        return;
    }
    push_to_user(
        push, user_id,
        json_pack("{s:s, s:o, s:o, s:O, s:O, s:O, s:O, s:s, s:I}", "kind", "approval", "title",
                  snippet(json_string_value(json_object_get(event, "title")), 80), "body",
                  snippet(command != NULL && command[0] != '\0' ? command
                                                                : json_string_value(json_object_get(event, "message")),
                          SNIPPET_CHARS),
                  "severity", json_object_get(event, "severity"), "session_id", json_object_get(event, "session_id"),
                  "installation_id", json_object_get(event, "installation_id"), "approval_id",
                  json_object_get(event, "approval_id"), "url", url, "expires_at", (json_int_t)expires_at),
        ttl_s < 1 ? 1 : ttl_s, "high");
}

void rl_push_reply_finalized(rl_push_t *push, const char *user_id, json_t *message)
{
    const char *role = json_string_value(json_object_get(message, "role"));
    char url[160];

    /* A reply the user is watching needs no notification. */
    if (push == NULL || role == NULL || strcmp(role, "agent") != 0 || rl_hub_subscribers(push->ctx.hub, user_id) > 0)
        return;
    session_url(message, url, sizeof(url));
    if (json_object_get(message, "text_ct") != NULL) {
        json_t *note = json_pack("{s:s, s:s, s:s, s:O, s:O, s:s}", "kind", "reply", "title", "New message", "body", "",
                                 "session_id", json_object_get(message, "session_id"), "message_id",
                                 json_object_get(message, "message_id"), "url", url);
        /* A message kept as its opening envelope and deltas has no one envelope to show. */
        push_to_user(
            push, user_id,
            sealed_note(note, "text_ct",
                        json_object_get(message, "deltas_ct") == NULL ? json_object_get(message, "text_ct") : NULL),
            REPLY_TTL_S, "normal");
        return;
    }
    push_to_user(push, user_id,
                 json_pack("{s:s, s:s, s:o, s:O, s:O, s:s}", "kind", "reply", "title", "New reply", "body",
                           snippet(json_string_value(json_object_get(message, "text")), SNIPPET_CHARS), "session_id",
                           json_object_get(message, "session_id"), "message_id", json_object_get(message, "message_id"),
                           "url", url),
                 REPLY_TTL_S, "normal");
}

/* ---- routes ---- */

static int check_p256dh(const char *s, size_t len)
{
    unsigned char point[RL_WEBPUSH_KEY_LEN + 3];

    return len <= 88 && rl_base64url_decode(s, len, point) == RL_WEBPUSH_KEY_LEN &&
                   rl_webpush_point_is_valid(point, RL_WEBPUSH_KEY_LEN)
               ? 0
               : -1;
}

static int check_auth(const char *s, size_t len)
{
    unsigned char secret[RL_WEBPUSH_AUTH_LEN + 3];

    return len <= 24 && rl_base64url_decode(s, len, secret) == RL_WEBPUSH_AUTH_LEN ? 0 : -1;
}

/* The schema's part: the shape every policy shares. Where the URL may point is the policy's (rl_push_subscribe). */
static int check_endpoint(const char *s, size_t len)
{
    static const rl_push_policy_t lenient = {1, {0, NULL}};

    return rl_push_endpoint_check(&lenient, s, len) == NULL ? 0 : -1;
}

static const rl_field_t keys_fields[] = {
    RL_FIELD_STRING_CHECK("p256dh", RL_F_REQUIRED, 1, 88, check_p256dh,
                          "p256dh must be the base64url of an uncompressed P-256 point (65 bytes)"),
    RL_FIELD_STRING_CHECK("auth", RL_F_REQUIRED, 1, 24, check_auth, "auth must be the base64url of 16 bytes"),
    RL_FIELD_END,
};
static const rl_schema_t keys_schema = RL_SCHEMA(keys_fields);

static const rl_field_t subscribe_fields[] = {
    RL_FIELD_STRING_CHECK("endpoint", RL_F_REQUIRED, 1, RL_PUSH_ENDPOINT_MAX, check_endpoint,
                          "endpoint must be an absolute http(s) URL with a host"),
    RL_FIELD_OBJECT("keys", RL_F_REQUIRED, &keys_schema),
    RL_FIELD_END,
};
const rl_schema_t rl_push_subscribe_schema = RL_SCHEMA(subscribe_fields);

static const rl_field_t unsubscribe_fields[] = {
    RL_FIELD_STRING("endpoint", RL_F_REQUIRED, 1, RL_PUSH_ENDPOINT_MAX),
    RL_FIELD_END,
};
const rl_schema_t rl_push_unsubscribe_schema = RL_SCHEMA(unsubscribe_fields);

static void on_subscribed(rl_store_op_t *base)
{
    struct push_subscribe *op = (void *)base;
    rl_call_t *call = base->arg;

    if (base->result == RL_E_CONFLICT)
        rl_call_fail(call, base->result, "another user holds this endpoint with other keys");
    else if (base->result != 0)
        rl_call_fail(call, base->result, NULL);
    else
        rl_call_reply(
            call, json_pack("{s:s, s:I}", "endpoint", op->row.endpoint, "created_at", (json_int_t)op->row.created_at));
    rl_call_release(call);
}

int rl_push_subscribe(rl_call_t *call)
{
    rl_push_t *push = rl_feature_of(call, RL_FEATURE_PUSH);
    const char *endpoint = rl_body_string(call, "endpoint");
    json_t *keys = json_object_get(call->body, "keys");
    struct push_subscribe *op;
    const char *why;

    if (push == NULL)
        return RL_E_INTERNAL;
    /* Where a push may go: docs/operations.md, "Security", push endpoints. */
    why = rl_push_endpoint_check(&push->policy, endpoint, strlen(endpoint));
    if (why != NULL) {
        rl_call_fail_full(call, RL_E_INVALID_REQUEST, NULL,
                          json_pack("[{s:s, s:s, s:s}]", "path", "endpoint", "code", "invalid_string", "message", why),
                          NULL);
        return 0;
    }
    op = rl_store_op_new(&push_subscribe_type, sizeof(*op));
    op->row.endpoint = rl_op_str(op, endpoint);
    op->row.user_id = rl_op_str(op, call->principal);
    op->row.p256dh = rl_op_str(op, json_string_value(json_object_get(keys, "p256dh")));
    op->row.auth = rl_op_str(op, json_string_value(json_object_get(keys, "auth")));
    op->row.created_at = rl_clock_now_ms();
    op->keep = RL_PUSH_SUBSCRIPTIONS_MAX;
    rl_op_submit_for(call, op, on_subscribed);
    return 0;
}

static void on_unsubscribed(rl_store_op_t *base)
{
    struct push_forget *op = (void *)base;
    rl_call_t *call = base->arg;

    if (base->result != 0)
        rl_call_fail(call, base->result, NULL);
    else
        rl_call_reply(call, json_pack("{s:b}", "removed", op->removed));
    rl_call_release(call);
}

int rl_push_unsubscribe(rl_call_t *call)
{
    struct push_forget *op = rl_store_op_new(&push_forget_type, sizeof(*op));

    op->user_id = rl_op_str(op, call->principal);
    op->endpoint = rl_op_str(op, rl_body_string(call, "endpoint"));
    rl_op_submit_for(call, op, on_unsubscribed);
    return 0;
}
