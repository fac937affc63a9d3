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
     * Called with each live event for the subscriber's user, in id order.
     * frame is the encoded SSE record ("id: ...\nevent: ...\ndata: ...\n\n");
     * retain it to keep it past the call. deliver may call
     * rl_bus_unsubscribe on itself.
     */
    void (*deliver)(rl_bus_subscriber_t *self, int64_t id, rl_blob_t *frame);
    /* Owned by the bus while subscribed. */
    h2o_linklist_t _link;
    void *_hub;
};

typedef enum rl_bus_resume {
    RL_BUS_RESUMED, /* every event after the given id is still buffered */
    RL_BUS_GAP,     /* events after it are no longer buffered (or it was never issued here): resync */
} rl_bus_resume_t;

typedef enum rl_bus_next_result {
    RL_BUS_EVENT,     /* *id and *frame hold the next event */
    RL_BUS_CAUGHT_UP, /* nothing after after_id yet */
    RL_BUS_LOST,      /* the next event was evicted before it was read */
} rl_bus_next_result_t;

typedef struct rl_bus_config {
    size_t max_events;  /* replay buffer length per user */
    int64_t max_age_ms; /* replay buffer age */
    size_t max_users;   /* cap on users with live state */
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
 * Subscribes to the user's live events. *newest receives the position of the
 * user's sequence: the latest event's id, or the id just before the first
 * one to come. 0, or a negative error when the bus is full.
 */
int rl_bus_subscribe(rl_bus_t *bus, const char *user_id, rl_bus_subscriber_t *sub, int64_t *newest);
/* The position of the user's sequence (see rl_bus_subscribe) without subscribing. */
void rl_bus_subscribe_position(rl_bus_t *bus, const char *user_id, int64_t *newest);
/* Whether everything after last_event_id can still be replayed for user_id. */
rl_bus_resume_t rl_bus_resume(rl_bus_t *bus, const char *user_id, int64_t last_event_id);
/*
 * Reads the user's first buffered event after after_id, for a stream that
 * replays at its reader's pace. The frame is borrowed: retain it to keep it.
 */
rl_bus_next_result_t rl_bus_next(rl_bus_t *bus, const char *user_id, int64_t after_id, int64_t *id, rl_blob_t **frame);
/* Detaches a subscriber; safe to call twice. */
void rl_bus_unsubscribe(rl_bus_t *bus, rl_bus_subscriber_t *sub);
/* Drops expired events and forgets idle users; call now and then. */
void rl_bus_sweep(rl_bus_t *bus, int64_t now_ms);
/* Number of subscribers of a user (for tests and metrics). */
size_t rl_bus_subscribers(rl_bus_t *bus, const char *user_id);

#endif
