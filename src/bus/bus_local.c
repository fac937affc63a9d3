/*
 * The in-process bus: one hub per user holding a ring of the last events and
 * the list of that user's subscribers. A published event is encoded into one
 * blob that the ring and every subscriber share.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <h2o/memory.h>

#include "bus/bus.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/strmap.h"
#include "http/sse.h"

struct ring_entry {
    int64_t id;
    int64_t created_ms;
    rl_blob_t *frame;
};

struct hub {
    char *user_id;
    int64_t first_id;      /* the first id this hub issues */
    int64_t last_id;       /* the newest id issued; first_id - 1 before any */
    int64_t evicted_up_to; /* highest id no longer in the ring; first_id - 1 before any eviction */
    struct ring_entry *ring;
    size_t capacity;
    size_t head, count; /* ring[head] is the oldest */
    h2o_linklist_t subscribers;
};

struct rl_bus {
    rl_bus_config_t config;
    rl_strmap_t *hubs;
    int64_t highest_id; /* the highest id any hub of this process has issued */
};

rl_bus_t *rl_bus_new(const rl_bus_config_t *config)
{
    rl_bus_t *bus = calloc(1, sizeof(*bus));

    if (bus == NULL)
        return NULL;
    bus->config = *config;
    if (bus->config.max_events == 0)
        bus->config.max_events = 1;
    bus->hubs = rl_strmap_new(config->max_users);
    if (bus->hubs == NULL) {
        free(bus);
        return NULL;
    }
    return bus;
}

static void hub_free(void *p)
{
    struct hub *hub = p;
    size_t i;

    for (i = 0; i < hub->count; ++i)
        rl_blob_release(hub->ring[(hub->head + i) % hub->capacity].frame);
    free(hub->ring);
    free(hub->user_id);
    free(hub);
}

void rl_bus_free(rl_bus_t *bus)
{
    if (bus == NULL)
        return;
    rl_strmap_free(bus->hubs, hub_free);
    free(bus);
}

static struct ring_entry *ring_at(const rl_bus_t *bus, struct hub *hub, size_t index)
{
    return &hub->ring[(hub->head + index) % hub->capacity];
}

static void evict_oldest(rl_bus_t *bus, struct hub *hub)
{
    struct ring_entry *oldest = ring_at(bus, hub, 0);

    hub->evicted_up_to = oldest->id;
    rl_blob_release(oldest->frame);
    oldest->frame = NULL;
    hub->head = (hub->head + 1) % hub->capacity;
    --hub->count;
}

/* spec: the buffer keeps 5 minutes or 256 events; older ones go. */
static void expire(rl_bus_t *bus, struct hub *hub, int64_t now_ms)
{
    while (hub->count > 0 && ring_at(bus, hub, 0)->created_ms < now_ms - bus->config.max_age_ms)
        evict_oldest(bus, hub);
}

static struct hub *hub_get(rl_bus_t *bus, const char *user_id, int create)
{
    struct hub *hub = rl_strmap_get(bus->hubs, user_id);

    if (hub != NULL || !create)
        return hub;
    hub = calloc(1, sizeof(*hub));
    if (hub == NULL)
        return NULL;
    hub->user_id = strdup(user_id);
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
    h2o_linklist_init_anchor(&hub->subscribers);
    if (hub->user_id == NULL || hub->ring == NULL || rl_strmap_put(bus->hubs, user_id, hub) != 0) {
        free(hub->ring);
        free(hub->user_id);
        free(hub);
        return NULL;
    }
    return hub;
}

int64_t rl_bus_publish(rl_bus_t *bus, const char *user_id, const char *name, json_t *data)
{
    struct hub *hub = hub_get(bus, user_id, 1);
    int64_t now = rl_clock_now_ms(), id;
    struct ring_entry *slot;
    h2o_linklist_t *node, *next;
    rl_blob_t *frame;

    if (hub == NULL) {
        json_decref(data);
        rl_log_warn("event bus full: dropping %s for a user", name);
        return RL_E_UNAVAILABLE;
    }
    /* The id is taken only once the record exists, so that a failed encoding leaves no gap. */
    id = hub->last_id + 1;
    frame = rl_sse_frame_new(id, name, data);
    json_decref(data);
    if (frame == NULL)
        return RL_E_INTERNAL;
    hub->last_id = id;
    if (id > bus->highest_id)
        bus->highest_id = id;

    expire(bus, hub, now);
    if (hub->count == hub->capacity)
        evict_oldest(bus, hub);
    slot = ring_at(bus, hub, hub->count);
    slot->id = id;
    slot->created_ms = now;
    slot->frame = frame;
    ++hub->count;

    /* A subscriber may unsubscribe itself from inside deliver. */
    for (node = hub->subscribers.next; node != &hub->subscribers; node = next) {
        rl_bus_subscriber_t *sub = H2O_STRUCT_FROM_MEMBER(rl_bus_subscriber_t, _link, node);
        next = node->next;
        sub->deliver(sub, id, frame);
    }
    return id;
}

int rl_bus_subscribe(rl_bus_t *bus, const char *user_id, rl_bus_subscriber_t *sub, int64_t *newest)
{
    struct hub *hub = hub_get(bus, user_id, 1);

    if (hub == NULL)
        return RL_E_UNAVAILABLE;
    expire(bus, hub, rl_clock_now_ms());
    *newest = hub->last_id;
    sub->_hub = hub;
    h2o_linklist_insert(&hub->subscribers, &sub->_link);
    return 0;
}

void rl_bus_subscribe_position(rl_bus_t *bus, const char *user_id, int64_t *newest)
{
    struct hub *hub = rl_strmap_get(bus->hubs, user_id);

    *newest = hub != NULL ? hub->last_id : 0;
}

rl_bus_resume_t rl_bus_resume(rl_bus_t *bus, const char *user_id, int64_t last_event_id)
{
    struct hub *hub = hub_get(bus, user_id, 1);

    if (hub == NULL)
        return RL_BUS_GAP;
    expire(bus, hub, rl_clock_now_ms());
    /*
     * The replay is exact when every event after last_event_id is still in
     * the ring: the id must be one this hub issued (or the one just before
     * its first), and no event after it may have been evicted. An id from an
     * earlier process, or from the future, cannot be resumed.
     */
    if (last_event_id < hub->first_id - 1 || last_event_id > hub->last_id || last_event_id < hub->evicted_up_to)
        return RL_BUS_GAP;
    return RL_BUS_RESUMED;
}

rl_bus_next_result_t rl_bus_next(rl_bus_t *bus, const char *user_id, int64_t after_id, int64_t *id, rl_blob_t **frame)
{
    struct hub *hub = rl_strmap_get(bus->hubs, user_id);
    struct ring_entry *entry;

    if (hub == NULL || after_id < hub->evicted_up_to)
        return RL_BUS_LOST;
    if (after_id >= hub->last_id)
        return RL_BUS_CAUGHT_UP;
    /* Ids in the ring are consecutive, so the next one sits at a computed index. */
    entry = ring_at(bus, hub, (size_t)(after_id + 1 - ring_at(bus, hub, 0)->id));
    *id = entry->id;
    *frame = entry->frame;
    return RL_BUS_EVENT;
}

void rl_bus_unsubscribe(rl_bus_t *bus, rl_bus_subscriber_t *sub)
{
    if (sub->_hub == NULL)
        return;
    h2o_linklist_unlink(&sub->_link);
    sub->_hub = NULL;
}

struct sweep_state {
    rl_bus_t *bus;
    int64_t now_ms;
};

static int sweep_hub(const char *key, void *value, void *arg)
{
    struct sweep_state *state = arg;
    struct hub *hub = value;

    expire(state->bus, hub, state->now_ms);
    /*
     * An idle user with nothing left to replay is forgotten; should it come
     * back, its new ids start above every old one and an old Last-Event-ID is
     * treated as a gap, which is the truth.
     */
    return hub->count == 0 && h2o_linklist_is_empty(&hub->subscribers);
}

void rl_bus_sweep(rl_bus_t *bus, int64_t now_ms)
{
    struct sweep_state state = {bus, now_ms};

    rl_strmap_sweep(bus->hubs, sweep_hub, &state, hub_free);
}

size_t rl_bus_subscribers(rl_bus_t *bus, const char *user_id)
{
    struct hub *hub = rl_strmap_get(bus->hubs, user_id);
    h2o_linklist_t *node;
    size_t n = 0;

    if (hub == NULL)
        return 0;
    for (node = hub->subscribers.next; node != &hub->subscribers; node = node->next)
        ++n;
    return n;
}
