/*
 * Streamed deltas (POST /v1/bridge/sendMessageDelta) on the fast path.
 *
 * A delta is checked against an in-memory record of its open message (owner,
 * state, the idempotency keys its deltas used), published and answered at
 * once, and persisted with the other pending deltas in one transaction every
 * DELTA_FLUSH_MS, and always before the message's sendMessageEnd is applied.
 * A commit per delta wrote about 22 KB of WAL frames for 64 bytes of text
 * and capped the relay at a few thousand deltas a second; issue 4 allows an
 * open stream to lose its last fraction of a second in a crash, and
 * docs/api.md says exactly what is guaranteed.
 *
 * The record is loaded from the store on first use; deltas that arrive while
 * it loads wait behind it, so order is kept. Records of this process only:
 * one relay node serves a message's deltas (docs/operations.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/strmap.h"
#include "relay/deltas.h"
#include "relay/relay.h"
#include "relay/token.h"

#define DELTA_FLUSH_MS       100
#define OPEN_MESSAGES_MAX    100000
#define KEYS_PER_MESSAGE_MAX 100000
#define IDLE_MS              (5 * 60 * 1000)

struct waiting {
    rl_call_t *call;
    struct waiting *next;
};

struct open_message {
    char message_id[72];
    char installation_id[32];
    char user_id[RL_PRINCIPAL_MAX + 1];
    json_t *session_id, *interaction_id;
    json_t *keys; /* idempotency key -> body hash */
    int64_t next_seq;
    int loading, finalized, deleted;
    int ending; /* sendMessageEnd calls in the store */
    struct waiting *waiting, **waiting_tail;
    int64_t used_ms;
};

static void message_free(void *p)
{
    struct open_message *message = p;

    json_decref(message->session_id);
    json_decref(message->interaction_id);
    json_decref(message->keys);
    free(message);
}

int rl_deltas_init(rl_relay_t *relay)
{
    relay->open_messages = rl_strmap_new(OPEN_MESSAGES_MAX);
    relay->pending_deltas = rl_delta_batch_new();
    if (relay->open_messages == NULL || relay->pending_deltas == NULL)
        return -1;
    h2o_timeout_init(relay->loop, &relay->delta_flush_timeout, DELTA_FLUSH_MS);
    return 0;
}

static void on_flushed(int result, json_t *value, void *arg)
{
    json_decref(value);
    if (result != 0)
        rl_log_error("persisting streamed deltas failed; the open messages miss them until their end");
}

void rl_deltas_flush(rl_relay_t *relay)
{
    rl_delta_batch_t *next;

    if (relay->pending_deltas == NULL || relay->pending_deltas->count == 0 || (next = rl_delta_batch_new()) == NULL)
        return;
    rl_store_deltas_append(relay->store, relay->pending_deltas, rl_clock_now_ms(), on_flushed, relay);
    relay->pending_deltas = next;
}

static void on_flush_timer(h2o_timeout_entry_t *entry)
{
    rl_relay_t *relay = H2O_STRUCT_FROM_MEMBER(rl_relay_t, delta_flush, entry);

    rl_deltas_flush(relay);
}

static int idle(const char *key, void *value, void *arg)
{
    struct open_message *message = value;

    return !message->loading && message->used_ms < *(int64_t *)arg;
}

void rl_deltas_sweep(rl_relay_t *relay, int64_t now_ms)
{
    int64_t before = now_ms - IDLE_MS;

    rl_strmap_sweep(relay->open_messages, idle, &before, message_free);
}

static int of_session(const char *key, void *value, void *arg)
{
    struct open_message *message = value;

    return !message->loading && json_is_string(message->session_id) &&
           strcmp(json_string_value(message->session_id), (const char *)arg) == 0;
}

void rl_deltas_forget_session(rl_relay_t *relay, const char *session_id)
{
    /* A deleted session's open messages answer 410 from now on: the next delta reloads the truth. */
    rl_strmap_sweep(relay->open_messages, of_session, (void *)session_id, message_free);
}

void rl_deltas_finalized(rl_relay_t *relay, const char *message_id)
{
    struct open_message *message = rl_strmap_get(relay->open_messages, message_id);

    if (message != NULL && !message->loading)
        message->finalized = 1;
}

void rl_deltas_ending(rl_relay_t *relay, const char *message_id, int ending)
{
    struct open_message *message = rl_strmap_get(relay->open_messages, message_id);

    if (message == NULL || message->loading)
        return;
    if (ending)
        message->ending++;
    else if (message->ending > 0)
        message->ending--;
}

void rl_deltas_opened(rl_relay_t *relay, const char *message_id, const char *installation_id, const char *user_id,
                      json_t *session_id, json_t *interaction_id)
{
    struct open_message *message = calloc(1, sizeof(*message));

    if (message == NULL)
        return;
    snprintf(message->message_id, sizeof(message->message_id), "%s", message_id);
    snprintf(message->installation_id, sizeof(message->installation_id), "%.*s",
             (int)sizeof(message->installation_id) - 1, installation_id);
    snprintf(message->user_id, sizeof(message->user_id), "%s", user_id);
    message->session_id = json_incref(session_id);
    message->interaction_id = json_incref(interaction_id);
    message->keys = json_object();
    message->next_seq = 1;
    message->used_ms = rl_clock_now_ms();
    if (rl_strmap_put(relay->open_messages, message_id, message) != 0)
        message_free(message);
}

static void scope_of(const char *message_id, char *out, size_t outsz)
{
    /* The same idempotency scope as the store's message writes (bridge.c): per message_id. */
    snprintf(out, outsz, "message:%s", message_id);
}

/* Applies one delta to a loaded record and answers it. */
static void apply(rl_relay_t *relay, struct open_message *message, rl_call_t *call)
{
    const char *key = json_string_value(json_object_get(call->body, "idempotency_key"));
    json_t *delta = json_object_get(call->body, "delta");
    char body_hash[RL_TOKEN_HASH_HEX + 1], scope[96];
    const char *seen;
    char *canonical;

    if (!rl_call_alive(call))
        return;
    if (strcmp(message->installation_id, call->principal) != 0) {
        rl_call_fail(call, RL_E_MESSAGE_NOT_FOUND, NULL);
        return;
    }
    canonical = json_dumps(call->body, JSON_COMPACT | JSON_SORT_KEYS);
    if (canonical == NULL) {
        rl_call_fail(call, RL_E_INTERNAL, NULL);
        return;
    }
    rl_token_hash(canonical, strlen(canonical), body_hash);
    free(canonical);
    message->used_ms = rl_clock_now_ms();
    /* spec: the same key with the same body replays; another body is a conflict. */
    seen = json_string_value(json_object_get(message->keys, key));
    if (seen != NULL) {
        if (strcmp(seen, body_hash) != 0)
            rl_call_fail(call, RL_E_IDEMPOTENCY_CONFLICT, NULL);
        else
            rl_call_reply(call, json_pack("{s:s, s:b}", "message_id", message->message_id, "idempotent", 1));
        return;
    }
    if (message->deleted) {
        rl_call_fail(call, RL_E_SESSION_DELETED, NULL);
        return;
    }
    if (message->finalized || message->ending > 0) {
        rl_call_fail(call, RL_E_MESSAGE_FINALIZED, NULL);
        return;
    }
    if (json_object_size(message->keys) >= KEYS_PER_MESSAGE_MAX) {
        rl_call_fail(call, RL_E_UNAVAILABLE, "this message has too many deltas");
        return;
    }
    scope_of(message->message_id, scope, sizeof(scope));
    if (rl_delta_batch_add(relay->pending_deltas, message->message_id, message->next_seq, json_string_value(delta),
                           json_string_length(delta), message->installation_id, scope, key, body_hash) != 0) {
        rl_call_fail(call, RL_E_INTERNAL, NULL);
        return;
    }
    message->next_seq++;
    json_object_set_new(message->keys, key, json_string(body_hash));
    if (!h2o_timeout_is_linked(&relay->delta_flush)) {
        relay->delta_flush.cb = on_flush_timer;
        h2o_timeout_link(relay->loop, &relay->delta_flush_timeout, &relay->delta_flush);
    }
    rl_relay_publish(relay, message->user_id, "message_delta",
                     json_pack("{s:O, s:s, s:O, s:O, s:I}", "session_id", message->session_id, "message_id",
                               message->message_id, "delta", delta, "interaction_id", message->interaction_id, "ts",
                               (json_int_t)rl_clock_now_ms()));
    rl_call_reply(call, json_pack("{s:s}", "message_id", message->message_id));
}

static void on_loaded(int result, json_t *value, void *arg)
{
    struct open_message *message = arg;
    rl_call_t *call = NULL;
    rl_relay_t *relay = NULL;
    struct waiting *w, *next;

    message->loading = 0;
    if (result == 0) {
        const char *key;
        json_t *hash;
        snprintf(message->user_id, sizeof(message->user_id), "%s",
                 json_string_value(json_object_get(value, "user_id")));
        message->session_id = json_incref(json_object_get(value, "session_id"));
        message->interaction_id = json_incref(json_object_get(value, "interaction_id"));
        message->next_seq = json_integer_value(json_object_get(value, "next_seq"));
        message->deleted = json_is_true(json_object_get(value, "deleted"));
        message->finalized = strcmp(json_string_value(json_object_get(value, "state")), "streaming") != 0;
        json_object_foreach(json_object_get(value, "keys"), key, hash) json_object_set(message->keys, key, hash);
    }
    for (w = message->waiting; w != NULL; w = next) {
        next = w->next;
        call = w->call;
        relay = call->app;
        if (result != 0)
            rl_call_fail(call, result, NULL);
        else
            apply(relay, message, call);
        rl_call_release(call);
        free(w);
    }
    message->waiting = NULL;
    json_decref(value);
    /* A record that could not be loaded is not kept: the next delta asks the store again. */
    if (result != 0 && relay != NULL && rl_strmap_get(relay->open_messages, message->message_id) == message) {
        rl_strmap_remove(relay->open_messages, message->message_id);
        message_free(message);
    }
}

int rl_bridge_send_delta(rl_call_t *call)
{
    rl_relay_t *relay = call->app;
    const char *message_id = json_string_value(json_object_get(call->body, "message_id"));
    struct open_message *message = rl_strmap_get(relay->open_messages, message_id);
    struct waiting *w;
    char scope[96];

    if (message != NULL && !message->loading) {
        apply(relay, message, call);
        return 0;
    }
    if (message == NULL) {
        message = calloc(1, sizeof(*message));
        if (message == NULL)
            return RL_E_INTERNAL;
        snprintf(message->message_id, sizeof(message->message_id), "%s", message_id);
        snprintf(message->installation_id, sizeof(message->installation_id), "%.*s",
                 (int)sizeof(message->installation_id) - 1, call->principal);
        message->keys = json_object();
        message->loading = 1;
        message->used_ms = rl_clock_now_ms();
        message->waiting_tail = &message->waiting;
        if (rl_strmap_put(relay->open_messages, message_id, message) != 0) {
            message_free(message);
            return RL_E_UNAVAILABLE;
        }
        scope_of(message_id, scope, sizeof(scope));
        /* Pending deltas of an earlier life of this record go first, so the store's next seq is right. */
        rl_deltas_flush(relay);
        rl_store_message_stream_state(relay->store, call->principal, message_id, scope, on_loaded, message);
    }
    w = calloc(1, sizeof(*w));
    if (w == NULL)
        return RL_E_INTERNAL;
    w->call = call;
    rl_call_hold(call);
    *message->waiting_tail = w;
    message->waiting_tail = &w->next;
    return 0;
}
