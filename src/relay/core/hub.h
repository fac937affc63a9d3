/*
 * The client event hub: the streams of this node, per user, and the door to
 * the bus through which every event is published and every node's events
 * arrive. The first stream of a user makes this node listen to that user on
 * the bus; the last one stops it. Loop thread only.
 */
#ifndef RL_RELAY_HUB_H
#define RL_RELAY_HUB_H

#include <h2o.h>
#include <jansson.h>
#include <stdint.h>

#include "bus/bus.h"
#include "common/blob.h"
#include "common/event_names.h"

typedef struct rl_hub rl_hub_t;
typedef struct rl_hub_subscriber rl_hub_subscriber_t;

struct rl_hub_subscriber {
    /*
     * Each live event of the subscriber's user, in id order as the bus hands
     * them (a subscriber checks for gaps itself). frame is borrowed: retain
     * it to keep it. deliver may unsubscribe its own subscriber.
     */
    void (*deliver)(rl_hub_subscriber_t *self, int64_t id, rl_blob_t *frame);
    /*
     * Optional (NULL: not called): this node has just published an event of
     * the subscriber's user, which the bus brings back later (a networked bus:
     * after a round trip). For what must not outlive the node's own writes,
     * such as a cached /v1/me answer. May unsubscribe its own subscriber.
     */
    void (*published)(rl_hub_subscriber_t *self);
    /* The hub's. */
    rl_hub_subscriber_t *_prev, *_next;
    void *_user;
};

/*
 * NULL when out of memory. The bus must outlive the hub. A user whose last
 * subscriber went is forgotten (and the bus stops listening to it) after the
 * loop turn, on loop.
 */
rl_hub_t *rl_hub_new(rl_bus_t *bus, h2o_loop_t *loop, size_t max_users);
/* Frees the hub; every subscriber must be gone. */
void rl_hub_free(rl_hub_t *hub);
/*
 * Publishes an event to a user's streams on every node. Steals data. The
 * user's subscribers here that have a `published` hook hear of it at once.
 */
void rl_hub_publish(rl_hub_t *hub, const char *user_id, rl_event_t event, json_t *data);
/* As rl_hub_publish, with data already encoded as compact JSON (len bytes, no line break; only read). */
void rl_hub_publish_text(rl_hub_t *hub, const char *user_id, rl_event_t event, const char *data, size_t len);
/* 0, or RL_E_UNAVAILABLE when this node holds streams of too many users. */
int rl_hub_subscribe(rl_hub_t *hub, const char *user_id, rl_hub_subscriber_t *sub);
/* Detaches a subscriber; safe to call twice. */
void rl_hub_unsubscribe(rl_hub_t *hub, rl_hub_subscriber_t *sub);
/* The bus's event handler: hands a live event to the user's subscribers here. */
void rl_hub_deliver(rl_hub_t *hub, const char *user_id, int64_t id, rl_blob_t *frame);
/* Number of this node's subscribers of a user (tests, metrics). */
size_t rl_hub_subscribers(rl_hub_t *hub, const char *user_id);
/* The bus the hub publishes to (for reads of the ring). */
rl_bus_t *rl_hub_bus(rl_hub_t *hub);
/* Events this node has published, ever (the metrics). */
uint64_t rl_hub_published(const rl_hub_t *hub);

#endif
