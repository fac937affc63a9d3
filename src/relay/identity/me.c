/*
 * GET /v1/me, with a cache of its answer per user.
 *
 * Every change of what /v1/me shows comes with an event to its user
 * (installation_created/updated/revoked, agent_health_changed,
 * session_created/renamed/updated/deleted, message_added for a send, which
 * moves the session's updated_at). So a cached answer listens to its user's
 * events through the hub, as a stream does, and any event drops it (one this
 * node publishes as it is published, before a networked bus brings it back); so does
 * its age (CACHE_TTL_MS), which bounds what a networked bus could miss while
 * its subscription starts. An answer whose read raced an event is not kept.
 */
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/strmap.h"
#include "relay/core/feature.h"
#include "relay/core/hub.h"
#include "relay/identity/identity.h"
#include "relay/identity/me.h"
#include "relay/core/ops.h"
#include "relay/core/views.h"

#define CACHE_TTL_MS 30000
#define CACHE_MAX    100000
#define CONTENT_TYPE "application/json; charset=utf-8"

/* One user's cached answer, or the read that will fill it. */
struct entry {
    rl_hub_subscriber_t subscriber;
    rl_me_cache_t *cache;
    char user_id[RL_PRINCIPAL_MAX + 1];
    char *body; /* the whole envelope, or NULL while it is read */
    size_t len;
    int64_t until_ms;
    int dirty;   /* an event came while the answer was read */
    int reading; /* a read holds the entry */
    int dropped; /* out of the map; freed when the read is done */
};

struct rl_me_cache {
    rl_hub_t *hub;
    rl_strmap_t *entries; /* user id -> struct entry */
};

static void entry_free(void *p)
{
    struct entry *entry = p;

    rl_hub_unsubscribe(entry->cache->hub, &entry->subscriber);
    if (entry->reading) {
        entry->dropped = 1;
        return;
    }
    free(entry->body);
    free(entry);
}

static void drop(struct entry *entry)
{
    if (rl_strmap_get(entry->cache->entries, entry->user_id) == entry)
        rl_strmap_remove(entry->cache->entries, entry->user_id);
    entry_free(entry);
}

/* Any event of the user may change what /v1/me shows. */
static void on_published(rl_hub_subscriber_t *subscriber)
{
    struct entry *entry = H2O_STRUCT_FROM_MEMBER(struct entry, subscriber, subscriber);

    if (entry->reading)
        entry->dirty = 1;
    else
        drop(entry);
}

static void on_event(rl_hub_subscriber_t *subscriber, int64_t id, rl_blob_t *frame)
{
    (void)id;
    (void)frame;
    on_published(subscriber);
}

rl_me_cache_t *rl_me_cache_new(rl_hub_t *hub)
{
    rl_me_cache_t *cache = calloc(1, sizeof(*cache));

    if (cache == NULL)
        return NULL;
    cache->hub = hub;
    cache->entries = rl_strmap_new(CACHE_MAX);
    if (cache->entries == NULL) {
        free(cache);
        return NULL;
    }
    return cache;
}

static int lapsed(const char *key, void *value, void *arg)
{
    struct entry *entry = value;

    return !entry->reading && entry->until_ms <= *(int64_t *)arg;
}

void rl_me_cache_sweep(rl_me_cache_t *cache, int64_t now_ms, unsigned parts)
{
    if (cache != NULL)
        rl_strmap_sweep_part(cache->entries, lapsed, &now_ms, entry_free, parts);
}

void rl_me_cache_free(rl_me_cache_t *cache)
{
    if (cache == NULL)
        return;
    rl_strmap_free(cache->entries, entry_free);
    free(cache);
}

struct me {
    rl_op_t op;
    struct entry *entry; /* the cache entry the answer fills, or NULL */
    const char *user_id;
    int has_user;
    rl_user_row_t user;
    rl_installation_row_t *installations;
    size_t ninstallations;
    rl_session_row_t *sessions;
    size_t nsessions;
};

static int me_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct me *op = (void *)base;
    int result = RL_TXN(txn, user_get, op->user_id, &op->user);

    if (result != 0 && result != RL_E_NOT_FOUND)
        return result;
    op->has_user = result == 0;
    if ((result = RL_TXN(txn, installations_of_user, op->user_id, &op->installations, &op->ninstallations)) != 0)
        return result;
    /* Deleted sessions are left out (brief): they are reached by their id until purged. */
    return RL_TXN(txn, sessions_of_user, op->user_id, &op->sessions, &op->nsessions);
}

static const rl_store_op_type_t me_type = RL_OP_TYPE(me_get, 0, me_run);

static void on_me(rl_store_op_t *base)
{
    struct me *op = (void *)base;
    struct entry *entry = op->entry;
    rl_call_t *call = base->arg;
    const rl_identity_t *identity = rl_feature_of(call, RL_FEATURE_IDENTITY);
    json_t *installations, *sessions, *envelope;
    char *body;
    size_t i;

    if (entry != NULL) {
        entry->reading = 0;
        if (entry->dropped) {
            entry_free(entry);
            entry = NULL;
        } else if (base->result != 0 || entry->dirty) {
            drop(entry);
            entry = NULL;
        }
    }
    if (base->result != 0) {
        rl_call_fail(call, base->result, NULL);
        rl_call_release(call);
        return;
    }
    installations = json_array();
    sessions = json_array();
    for (i = 0; i < op->ninstallations; ++i)
        json_array_append_new(installations,
                              rl_view_installation(&op->installations[i],
                                                   rl_bus_presence_get(identity->ctx.bus, op->installations[i].id)));
    for (i = 0; i < op->nsessions; ++i)
        json_array_append_new(sessions, rl_view_session(&op->sessions[i], identity->ctx.config->delete_grace));
    envelope = json_pack("{s:b, s:{s:o, s:o, s:o}}", "ok", 1, "result", "user",
                         op->has_user ? rl_view_user(&op->user) : json_null(), "installations", installations,
                         "sessions", sessions);
    body = envelope != NULL ? json_dumps(envelope, JSON_COMPACT) : NULL;
    json_decref(envelope);
    if (body == NULL) {
        if (entry != NULL)
            drop(entry);
        rl_call_fail(call, RL_E_INTERNAL, NULL);
        rl_call_release(call);
        return;
    }
    rl_call_send(call, 200, CONTENT_TYPE, body, strlen(body));
    if (entry != NULL) {
        entry->body = body;
        entry->len = strlen(body);
        entry->until_ms = rl_clock_now_ms() + CACHE_TTL_MS;
    } else {
        free(body);
    }
    rl_call_release(call);
}

/* A cache entry that listens to the user before its read is submitted, so no event in between is missed. */
static struct entry *entry_new(rl_me_cache_t *cache, const char *user_id)
{
    struct entry *entry = calloc(1, sizeof(*entry));

    if (entry == NULL)
        return NULL;
    entry->cache = cache;
    entry->subscriber.deliver = on_event;
    /* A change made on this node shows in the next /v1/me here at once, not after the bus's round trip. */
    entry->subscriber.published = on_published;
    snprintf(entry->user_id, sizeof(entry->user_id), "%s", user_id);
    if (rl_hub_subscribe(cache->hub, user_id, &entry->subscriber) != 0) {
        free(entry);
        return NULL;
    }
    if (rl_strmap_put(cache->entries, user_id, entry) != 0) {
        rl_hub_unsubscribe(cache->hub, &entry->subscriber);
        free(entry);
        return NULL;
    }
    entry->reading = 1;
    return entry;
}

int rl_me_get(rl_call_t *call)
{
    const rl_identity_t *identity = rl_feature_of(call, RL_FEATURE_IDENTITY);
    rl_me_cache_t *cache = identity->me_cache;
    struct entry *entry = cache != NULL ? rl_strmap_get(cache->entries, call->principal) : NULL;
    struct me *op;

    if (entry != NULL && entry->body != NULL && entry->until_ms > rl_clock_now_ms()) {
        rl_call_send(call, 200, CONTENT_TYPE, entry->body, entry->len);
        return 0;
    }
    if (entry != NULL && !entry->reading)
        drop(entry);
    op = rl_op_new(&me_type, sizeof(*op));
    op->user_id = rl_op_str(op, call->principal);
    /* One read fills the entry; concurrent misses read on their own. */
    if (cache != NULL && rl_strmap_get(cache->entries, call->principal) == NULL)
        op->entry = entry_new(cache, call->principal);
    rl_op_submit_for(call, op, on_me);
    return 0;
}
