/*
 * The in-process bus: one node. Each user has a ring of its last events;
 * topics, presence and token buckets are maps of this process, and every
 * lease is this node's. Events are delivered inside
 * publish (the streaming hot path pays no extra loop turn); reads, signals
 * and presence answers wait for the next turn of the loop, as a networked
 * bus's would, so that callers are written for both.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus/bus.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/event.h"
#include "common/log.h"
#include "common/strmap.h"
#include "http/later.h"

#define TOPICS_MAX   1000000
#define PRESENCE_MAX 1000000
#define OWNER_MAX    95

struct ring_entry {
    int64_t id;
    int64_t created_ms;
    rl_blob_t *frame;
};

struct hub {
    int64_t first_id;      /* the first id this hub issues */
    int64_t last_id;       /* the newest id issued; first_id - 1 before any */
    int64_t evicted_up_to; /* highest id no longer in the ring; first_id - 1 before any eviction */
    struct ring_entry *ring;
    size_t capacity;
    size_t head, count; /* ring[head] is the oldest */
    unsigned listeners;
};

struct bucket {
    double tokens, capacity, refill_per_s;
    int64_t updated_ms;
};

struct presence {
    char owner[OWNER_MAX + 1];
    char health[16];
};

/* Work for the end of the loop turn: a read, a signal, or a presence answer. */
struct deferred {
    rl_later_item_t item; /* first */
    struct local_bus *bus;
    enum { DEFER_READ, DEFER_SIGNAL, DEFER_CLEARED } kind;
    int64_t after_id;
    size_t max;
    rl_bus_read_cb read_cb;
    rl_bus_cleared_cb cleared_cb;
    void *arg;
    int cleared;
    json_t *message;
    char name[]; /* the user or the topic */
};

struct local_bus {
    rl_bus_t super;
    rl_bus_config_t config;
    h2o_loop_t *loop;
    rl_strmap_t *hubs;
    rl_strmap_t *topics;   /* topic -> join count (as a pointer-sized integer) */
    rl_strmap_t *presence; /* installation id -> struct presence */
    rl_strmap_t *buckets;  /* bucket key -> struct bucket */
    int64_t highest_id;    /* the highest id any hub of this process has issued */
    rl_later_t later;
};

static void hub_free(void *p)
{
    struct hub *hub = p;
    size_t i;

    for (i = 0; i < hub->count; ++i)
        rl_blob_release(hub->ring[(hub->head + i) % hub->capacity].frame);
    free(hub->ring);
    free(hub);
}

static struct ring_entry *ring_at(struct hub *hub, size_t index)
{
    return &hub->ring[(hub->head + index) % hub->capacity];
}

static void evict_oldest(struct hub *hub)
{
    struct ring_entry *oldest = ring_at(hub, 0);

    hub->evicted_up_to = oldest->id;
    rl_blob_release(oldest->frame);
    oldest->frame = NULL;
    hub->head = (hub->head + 1) % hub->capacity;
    --hub->count;
}

/* spec: the buffer keeps 5 minutes or 256 events; older ones go. */
static void expire(struct local_bus *bus, struct hub *hub, int64_t now_ms)
{
    while (hub->count > 0 && ring_at(hub, 0)->created_ms < now_ms - bus->config.max_age_ms)
        evict_oldest(hub);
}

static struct hub *hub_get(struct local_bus *bus, const char *user_id, int create)
{
    struct hub *hub = rl_strmap_get(bus->hubs, user_id);

    if (hub != NULL || !create)
        return hub;
    hub = calloc(1, sizeof(*hub));
    if (hub == NULL)
        return NULL;
    hub->capacity = bus->config.max_events;
    hub->ring = calloc(hub->capacity, sizeof(*hub->ring));
    /*
     * Ids never repeat: a new hub starts from the clock, and above anything
     * this process issued, with a gap of one so that no earlier id can look
     * like "the one before the first".
     */
    hub->first_id = rl_clock_now_ms() * 1000;
    if (hub->first_id < bus->highest_id + 2)
        hub->first_id = bus->highest_id + 2;
    hub->last_id = hub->first_id - 1;
    hub->evicted_up_to = hub->first_id - 1;
    if (hub->ring == NULL || rl_strmap_put(bus->hubs, user_id, hub) != 0) {
        free(hub->ring);
        free(hub);
        return NULL;
    }
    return hub;
}

/* ---- deferred work --------------------------------------------------------------------------- */

static void run_deferred(rl_later_item_t *item);

static struct deferred *defer(struct local_bus *bus, int kind, const char *name)
{
    size_t len = strlen(name);
    struct deferred *d = calloc(1, sizeof(*d) + len + 1);

    if (d == NULL)
        return NULL;
    d->bus = bus;
    d->kind = kind;
    memcpy(d->name, name, len + 1);
    d->item.run = run_deferred;
    rl_later_add(&bus->later, &d->item);
    return d;
}

static void answer_read(struct local_bus *bus, struct deferred *d)
{
    struct hub *hub = hub_get(bus, d->name, 1);
    rl_bus_event_t events[64];
    rl_bus_read_t read = {0};
    size_t max = d->max < 64 ? d->max : 64;

    if (hub == NULL) {
        d->read_cb(RL_E_UNAVAILABLE, NULL, d->arg);
        return;
    }
    expire(bus, hub, rl_clock_now_ms());
    read.newest = hub->last_id;
    read.events = events;
    /*
     * The replay is exact when every event after after_id is still in the
     * ring: the id must be one this hub issued (or the one just before its
     * first), and no event after it may have been evicted. An id from an
     * earlier process, or from the future, cannot be resumed.
     */
    if (d->after_id < hub->first_id - 1 || d->after_id > hub->last_id || d->after_id < hub->evicted_up_to) {
        read.gap = 1;
    } else if (hub->count > 0) {
        /* Ids in the ring are consecutive, so the next one sits at a computed index. */
        size_t at = (size_t)(d->after_id + 1 - ring_at(hub, 0)->id);
        for (; at < hub->count && read.count < max; ++at, ++read.count) {
            events[read.count].id = ring_at(hub, at)->id;
            events[read.count].frame = ring_at(hub, at)->frame;
        }
    }
    d->read_cb(0, &read, d->arg);
}

static int joined(struct local_bus *bus, const char *topic)
{
    return rl_strmap_get(bus->topics, topic) != NULL;
}

static void run_deferred(rl_later_item_t *item)
{
    struct deferred *d = (struct deferred *)item;
    struct local_bus *bus = d->bus;

    switch (d->kind) {
    case DEFER_READ:
        answer_read(bus, d);
        break;
    case DEFER_SIGNAL:
        if (joined(bus, d->name) && bus->config.handlers.signal != NULL)
            bus->config.handlers.signal(bus->config.handlers.ctx, d->name, d->message);
        json_decref(d->message);
        break;
    case DEFER_CLEARED:
        d->cleared_cb(d->cleared, d->arg);
        break;
    }
    free(d);
}

static void drop_deferred(rl_later_item_t *item)
{
    struct deferred *d = (struct deferred *)item;

    json_decref(d->message);
    free(d);
}

/* ---- the operations -------------------------------------------------------------------------- */

static void local_publish(rl_bus_t *super, const char *user_id, const char *name, const char *data, size_t len)
{
    struct local_bus *bus = (void *)super;
    struct hub *hub = hub_get(bus, user_id, 1);
    int64_t now = rl_clock_now_ms(), id;
    struct ring_entry *slot;
    rl_blob_t *frame;

    if (hub == NULL) {
        rl_log_warn("event bus full: dropping %s for a user", name);
        return;
    }
    id = hub->last_id + 1;
    /* rl_event_frame_text logs why it refused. */
    if ((frame = rl_event_frame_text(id, name, strlen(name), data, len)) == NULL)
        return;
    hub->last_id = id;
    if (id > bus->highest_id)
        bus->highest_id = id;
    expire(bus, hub, now);
    if (hub->count == hub->capacity)
        evict_oldest(hub);
    slot = ring_at(hub, hub->count);
    slot->id = id;
    slot->created_ms = now;
    slot->frame = frame;
    ++hub->count;
    if (hub->listeners > 0 && bus->config.handlers.event != NULL)
        bus->config.handlers.event(bus->config.handlers.ctx, user_id, id, frame);
}

static void local_read(rl_bus_t *super, const char *user_id, int64_t after_id, size_t max, rl_bus_read_cb cb, void *arg)
{
    struct local_bus *bus = (void *)super;
    struct deferred *d = defer(bus, DEFER_READ, user_id);

    if (d == NULL) {
        rl_log_error("out of memory reading the event ring");
        abort();
    }
    d->after_id = after_id;
    d->max = max;
    d->read_cb = cb;
    d->arg = arg;
}

static void local_listen(rl_bus_t *super, const char *user_id, int on)
{
    struct local_bus *bus = (void *)super;
    struct hub *hub = hub_get(bus, user_id, on);

    if (hub == NULL)
        return;
    if (on)
        ++hub->listeners;
    else if (hub->listeners > 0)
        --hub->listeners;
}

static void local_signal(rl_bus_t *super, const char *topic, json_t *message)
{
    struct local_bus *bus = (void *)super;
    struct deferred *d;

    if (!joined(bus, topic) || (d = defer(bus, DEFER_SIGNAL, topic)) == NULL) {
        json_decref(message);
        return;
    }
    d->message = message;
}

static void local_join(rl_bus_t *super, const char *topic, int on)
{
    struct local_bus *bus = (void *)super;
    uintptr_t count = (uintptr_t)rl_strmap_get(bus->topics, topic);

    if (on) {
        if (rl_strmap_put(bus->topics, topic, (void *)(count + 1)) != 0)
            rl_log_warn("bus: too many topics; %s not joined", topic);
    } else if (count > 1) {
        rl_strmap_put(bus->topics, topic, (void *)(count - 1));
    } else if (count == 1) {
        rl_strmap_remove(bus->topics, topic);
    }
}

static void local_presence_set(rl_bus_t *super, const char *installation_id, const char *owner, const char *health)
{
    struct local_bus *bus = (void *)super;
    struct presence *p = rl_strmap_get(bus->presence, installation_id);

    if (p == NULL) {
        p = calloc(1, sizeof(*p));
        if (p == NULL || rl_strmap_put(bus->presence, installation_id, p) != 0) {
            free(p);
            rl_log_warn("bus: too many installations present");
            return;
        }
    }
    snprintf(p->owner, sizeof(p->owner), "%s", owner);
    snprintf(p->health, sizeof(p->health), "%s", health);
}

static void local_presence_clear(rl_bus_t *super, const char *installation_id, const char *owner, rl_bus_cleared_cb cb,
                                 void *arg)
{
    struct local_bus *bus = (void *)super;
    struct presence *p = rl_strmap_get(bus->presence, installation_id);
    struct deferred *d;
    int cleared = p != NULL && strcmp(p->owner, owner) == 0;

    if (cleared)
        free(rl_strmap_remove(bus->presence, installation_id));
    if (cb == NULL)
        return;
    if ((d = defer(bus, DEFER_CLEARED, installation_id)) == NULL) {
        rl_log_error("out of memory clearing a presence");
        abort();
    }
    d->cleared = cleared;
    d->cleared_cb = cb;
    d->arg = arg;
}

static const char *local_presence_get(rl_bus_t *super, const char *installation_id)
{
    struct local_bus *bus = (void *)super;
    struct presence *p = rl_strmap_get(bus->presence, installation_id);

    return p != NULL ? p->health : "offline";
}

static void refill(struct bucket *bucket, int64_t now_ms)
{
    if (now_ms > bucket->updated_ms) {
        bucket->tokens += (double)(now_ms - bucket->updated_ms) / 1000.0 * bucket->refill_per_s;
        if (bucket->tokens > bucket->capacity)
            bucket->tokens = bucket->capacity;
        bucket->updated_ms = now_ms;
    }
}

static int bucket_full(const char *key, void *value, void *arg)
{
    struct bucket *bucket = value;

    refill(bucket, *(int64_t *)arg);
    return bucket->tokens >= bucket->capacity;
}

static void local_take(rl_bus_t *super, const char *key, double capacity, double refill_per_s, int64_t now_ms,
                       rl_bus_take_cb cb, void *arg)
{
    struct local_bus *bus = (void *)super;
    struct bucket *bucket = rl_strmap_get(bus->buckets, key);

    if (bucket == NULL) {
        bucket = malloc(sizeof(*bucket));
        if (bucket == NULL) {
            cb(RL_E_INTERNAL, 0, arg);
            return;
        }
        *bucket = (struct bucket){capacity, capacity, refill_per_s, now_ms};
        if (rl_strmap_put(bus->buckets, key, bucket) != 0) {
            /* Full: drop the buckets that refilled, then try once more; fail closed otherwise. */
            rl_strmap_sweep(bus->buckets, bucket_full, &now_ms, free);
            if (rl_strmap_put(bus->buckets, key, bucket) != 0) {
                free(bucket);
                rl_log_warn("rate limiter full; refusing a request");
                cb(RL_E_RATE_LIMITED, 0, arg);
                return;
            }
        }
    }
    bucket->capacity = capacity;
    bucket->refill_per_s = refill_per_s;
    refill(bucket, now_ms);
    if (bucket->tokens >= 1.0) {
        bucket->tokens -= 1.0;
        cb(0, bucket->tokens, arg);
    } else {
        cb(RL_E_RATE_LIMITED, bucket->tokens, arg);
    }
}

static void local_lease(rl_bus_t *super, const char *name, const char *holder, int64_t ttl_ms, rl_bus_lease_cb cb,
                        void *arg)
{
    /* One node: it holds every lease. */
    cb(1, arg);
}

static int sweep_hub(const char *key, void *value, void *arg)
{
    struct local_bus *bus = ((void **)arg)[0];
    int64_t now = *(int64_t *)((void **)arg)[1];
    struct hub *hub = value;

    expire(bus, hub, now);
    /*
     * An idle user with nothing left to replay is forgotten; should it come
     * back, its new ids start above every old one and an old Last-Event-ID is
     * treated as a gap, which is the truth.
     */
    return hub->count == 0 && hub->listeners == 0;
}

static void local_sweep(rl_bus_t *super, int64_t now_ms, unsigned parts)
{
    struct local_bus *bus = (void *)super;
    void *state[2] = {bus, &now_ms};

    rl_strmap_sweep_part(bus->hubs, sweep_hub, state, hub_free, parts);
    rl_strmap_sweep_part(bus->buckets, bucket_full, &now_ms, free, parts);
}

static void local_close(rl_bus_t *super)
{
    struct local_bus *bus = (void *)super;

    rl_later_dispose(&bus->later, drop_deferred);
    rl_strmap_free(bus->hubs, hub_free);
    rl_strmap_free(bus->topics, NULL);
    rl_strmap_free(bus->presence, free);
    rl_strmap_free(bus->buckets, free);
    free(bus);
}

static void local_retire(rl_bus_t *super, rl_bus_retired_cb cb, void *arg)
{
    cb(arg);
}

static const struct rl_bus_ops local_ops = {
    .name = "local",
    .close = local_close,
    .publish = local_publish,
    .read = local_read,
    .listen = local_listen,
    .signal = local_signal,
    .join = local_join,
    .presence_set = local_presence_set,
    .presence_clear = local_presence_clear,
    .presence_get = local_presence_get,
    .take = local_take,
    .lease = local_lease,
    .sweep = local_sweep,
    .retire = local_retire,
};

int rl_bus__local_open(h2o_loop_t *loop, const rl_bus_config_t *config, rl_bus_t **out)
{
    struct local_bus *bus = calloc(1, sizeof(*bus));

    if (bus == NULL)
        return -1;
    bus->super.ops = &local_ops;
    bus->config = *config;
    if (bus->config.max_events == 0)
        bus->config.max_events = 1;
    bus->loop = loop;
    rl_later_init(&bus->later, loop);
    bus->hubs = rl_strmap_new(config->max_users);
    bus->topics = rl_strmap_new(TOPICS_MAX);
    bus->presence = rl_strmap_new(PRESENCE_MAX);
    bus->buckets = rl_strmap_new(config->max_buckets > 0 ? config->max_buckets : 200000);
    if (bus->hubs == NULL || bus->topics == NULL || bus->presence == NULL || bus->buckets == NULL) {
        local_close(&bus->super);
        return -1;
    }
    *out = &bus->super;
    return 0;
}
