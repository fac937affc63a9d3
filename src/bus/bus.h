/*
 * The client event bus: publish an event to a user, subscribe a stream to a
 * user. Each user has a sequence of events with increasing ids and a replay
 * buffer of the last N events or T milliseconds, whichever is smaller (spec:
 * 256 events or 5 minutes), so that a stream reconnecting with
 * Last-Event-ID gets exactly what it missed.
 *
 * This is the seam for running several relay nodes: the in-process backend
 * (bus_local.c) serves one node; a Redis backend would implement the same
 * functions. Loop thread only.
 *
 * Event ids: the first event a node publishes for a user gets an id derived
 * from the wall clock (milliseconds * 1000), and later ones count up from it,
 * so ids keep increasing for that user across restarts and a Last-Event-ID
 * from before a restart is recognised as a gap.
 */
#ifndef RL_BUS_BUS_H
#define RL_BUS_BUS_H

#include <h2o/linklist.h>
#include <jansson.h>
#include <stdint.h>

#include "common/blob.h"

typedef struct rl_bus rl_bus_t;
typedef struct rl_bus_subscriber rl_bus_subscriber_t;

struct rl_bus_subscriber {
    /*
     * Called with each event for the subscriber's user, in id order: first the
     * replay, then live events. frame is the encoded SSE record ("id: ...\n
     * event: ...\ndata: ...\n\n"); retain it to keep it past the call.
     * deliver may call rl_bus_unsubscribe on itself.
     */
    void (*deliver)(rl_bus_subscriber_t *self, int64_t id, rl_blob_t *frame);
    /* Owned by the bus while subscribed. */
    h2o_linklist_t _link;
    void *_hub;
};

typedef enum rl_bus_resume {
    RL_BUS_FRESH,   /* no Last-Event-ID: live events only */
    RL_BUS_RESUMED, /* everything after Last-Event-ID was replayed */
    RL_BUS_GAP,     /* events after Last-Event-ID are no longer buffered: the client must resync */
} rl_bus_resume_t;

typedef struct rl_bus_config {
    size_t max_events;      /* replay buffer length per user */
    int64_t max_age_ms;     /* replay buffer age */
    size_t max_users;       /* cap on users with live state */
} rl_bus_config_t;

/* NULL on allocation failure. The config is copied. */
rl_bus_t *rl_bus_new(const rl_bus_config_t *config);
/* Frees the bus; subscribers must have been unsubscribed. */
void rl_bus_free(rl_bus_t *bus);

/*
 * Publishes event `name` with `data` (stolen) to every stream of user_id and
 * to its replay buffer. The record is encoded once. Returns the event id, or
 * a negative error.
 */
int64_t rl_bus_publish(rl_bus_t *bus, const char *user_id, const char *name, json_t *data);
/*
 * Subscribes to user_id. With has_last set, replays what followed
 * last_event_id through sub->deliver before returning. *newest receives the
 * position of the user's sequence: the latest event's id, or the id just
 * before the first one to come; resuming from it is always exact. Returns
 * how the stream resumes; a negative error when the bus is full.
 */
int rl_bus_subscribe(rl_bus_t *bus, const char *user_id, int has_last, int64_t last_event_id,
                     rl_bus_subscriber_t *sub, int64_t *newest);
/* Detaches a subscriber; safe to call twice. */
void rl_bus_unsubscribe(rl_bus_t *bus, rl_bus_subscriber_t *sub);
/* Drops expired events and forgets idle users; call now and then. */
void rl_bus_sweep(rl_bus_t *bus, int64_t now_ms);
/* Number of subscribers of a user (for tests and metrics). */
size_t rl_bus_subscribers(rl_bus_t *bus, const char *user_id);

#endif
