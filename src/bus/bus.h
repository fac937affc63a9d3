/*
 * The bus: everything one relay node tells the others, behind a seam that
 * an in-process backend (bus_local.c, one node) and a networked one (several
 * nodes) implement alike. Four services:
 *
 * - User events. Each user has one sequence of events with consecutive,
 *   increasing ids shared by every node, and a replay ring of the last N
 *   events or T milliseconds, whichever is smaller (spec: 256 events or 5
 *   minutes). publish assigns the id; nodes that listen to a user get its
 *   events through handlers.event, in id order; read gives what the ring
 *   holds after an id, or says that it no longer can (a gap).
 *
 * - Signals: small JSON messages on named topics, for every node that joined
 *   the topic (the sender included). Delivery is at most once and may be
 *   later than the call; what must not be lost lives in the store, and a
 *   signal only says "look again" or "act now". When a backend may have
 *   lost signals of a joined topic (its server was away, or a node could
 *   not send them), it delivers {"type": RL_BUS_MISSED} on that topic once
 *   it can carry signals again: a reader looks again at what it follows.
 *
 * - Presence: which connection serves an installation's bridge socket and
 *   with what health, readable by every node.
 *
 * - Shared counters and leases: token buckets that every node takes from
 *   atomically (rate limits), and named leases that one node at a time
 *   holds (the work that must run once across nodes).
 *
 * Loop thread only. A backend may deliver an event inside publish (the
 * local one does) or later, and answer take and lease inside the call; read
 * and presence_clear callbacks never run inside the call. See
 * docs/internals/bus.md.
 */
#ifndef RL_BUS_BUS_H
#define RL_BUS_BUS_H

#include <h2o.h>
#include <jansson.h>
#include <stdint.h>

#include "common/blob.h"

typedef struct rl_bus rl_bus_t;

/* The type of the signal a backend delivers on a topic whose signals may have been lost (above). */
#define RL_BUS_MISSED "missed"

typedef struct rl_bus_event {
    int64_t id;
    /*
     * The event's SSE record, built once on this node by common/event.h from
     * what the bus carries (id, name, payload) and shared by every reader.
     */
    rl_blob_t *frame;
} rl_bus_event_t;

/* What a read of a user's ring found. */
typedef struct rl_bus_read {
    int gap;        /* some event after after_id is no longer buffered (or after_id was never issued) */
    int64_t newest; /* the user's newest event id, or the position before the first one to come */
    size_t count;
    rl_bus_event_t *events; /* in id order; borrowed for the callback: retain a frame to keep it */
} rl_bus_read_t;

/* result 0 and *read, or a negative RL_E_* error (read is then NULL). */
typedef void (*rl_bus_read_cb)(int result, const rl_bus_read_t *read, void *arg);
/* Whether presence_clear removed the installation's presence. */
typedef void (*rl_bus_cleared_cb)(int cleared, void *arg);
/*
 * result 0: a token was taken; RL_E_RATE_LIMITED: none was left; another
 * negative RL_E_* error: the bus cannot answer (nothing was taken). tokens is
 * what the bucket holds after the call (fractional; meaningful for 0 and
 * RL_E_RATE_LIMITED).
 */
typedef void (*rl_bus_take_cb)(int result, double tokens, void *arg);
/* Whether this holder holds the lease now (0 too when the bus cannot answer). */
typedef void (*rl_bus_lease_cb)(int held, void *arg);
/* The node has given back what it held (or the bus could not be told). */
typedef void (*rl_bus_retired_cb)(void *arg);

/* What the bus hands to this node. */
typedef struct rl_bus_handlers {
    /* A live event of a user this node listens to (frame borrowed; retain to keep). */
    void (*event)(void *ctx, const char *user_id, int64_t id, rl_blob_t *frame);
    /* A signal on a topic this node joined (message borrowed). */
    void (*signal)(void *ctx, const char *topic, json_t *message);
    /*
     * A networked bus: the presence of an installation lapsed (its node
     * stopped renewing it: that node died or lost the bus) and nobody set it
     * again. Each lapse goes to one node only, so that the user is told once.
     * NULL to ignore.
     */
    void (*presence_lapsed)(void *ctx, const char *installation_id);
    void *ctx;
} rl_bus_handlers_t;

typedef struct rl_bus_config {
    size_t max_events;  /* replay ring length per user */
    int64_t max_age_ms; /* replay ring age */
    size_t max_users;   /* cap on users with live state in this node */
    size_t max_buckets; /* cap on token buckets this node keeps (the local bus) */
    /*
     * A networked bus: how long a presence outlives the last renewal of its
     * node (a node that dies leaves nothing "healthy" for longer); 0 for
     * the backend's default. The local bus has no use for it.
     */
    int64_t presence_lease_ms;
    /*
     * A networked bus: how often a node renews the leases of the bucket
     * shares it uses and returns the idle ones (0 for the backend's default,
     * 250 ms), and how long it serves buckets alone, each from its part of
     * the bucket, while the bus is unreachable (0: not at all; take then
     * answers RL_E_UNAVAILABLE at once). docs/internals/bus.md.
     */
    int64_t bucket_settle_ms;
    int64_t bucket_grace_ms;
    /*
     * A networked bus: this node's name for its leases of bucket shares,
     * the same across its restarts (so that a node restarted after a crash
     * takes its old leases back at once instead of waiting for them to
     * lapse) and never another live node's; at most 20 characters of
     * [A-Za-z0-9_]. NULL or "": a new random name each time.
     */
    const char *node;
    rl_bus_handlers_t handlers;
} rl_bus_config_t;

struct rl_bus_ops {
    const char *name;
    void (*close)(rl_bus_t *bus);
    /* data: the event's payload, encoded as compact JSON (no line break), len bytes; only read. */
    void (*publish)(rl_bus_t *bus, const char *user_id, const char *name, const char *data, size_t len);
    void (*read)(rl_bus_t *bus, const char *user_id, int64_t after_id, size_t max, rl_bus_read_cb cb, void *arg);
    void (*listen)(rl_bus_t *bus, const char *user_id, int on);
    void (*signal)(rl_bus_t *bus, const char *topic, json_t *message);
    void (*join)(rl_bus_t *bus, const char *topic, int on);
    void (*presence_set)(rl_bus_t *bus, const char *installation_id, const char *owner, const char *health);
    void (*presence_clear)(rl_bus_t *bus, const char *installation_id, const char *owner, rl_bus_cleared_cb cb,
                           void *arg);
    const char *(*presence_get)(rl_bus_t *bus, const char *installation_id);
    void (*take)(rl_bus_t *bus, const char *key, double capacity, double refill_per_s, int64_t now_ms,
                 rl_bus_take_cb cb, void *arg);
    void (*lease)(rl_bus_t *bus, const char *name, const char *holder, int64_t ttl_ms, rl_bus_lease_cb cb, void *arg);
    void (*sweep)(rl_bus_t *bus, int64_t now_ms, unsigned parts);
    void (*retire)(rl_bus_t *bus, rl_bus_retired_cb cb, void *arg);
};

struct rl_bus {
    const struct rl_bus_ops *ops;
};

/*
 * Opens the bus at location: "local" (the default, one node), or a Redis
 * shared by several nodes, "redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]" or
 * "unix:///PATH[?db=N&password=P]" (bus_redis.c; it connects in the
 * background and reconnects by itself). The config is copied. 0, or -1 with
 * the cause logged.
 */
int rl_bus_open(const char *location, h2o_loop_t *loop, const rl_bus_config_t *config, rl_bus_t **out);

/* Closes the bus; no handler runs afterwards. */
static inline void rl_bus_close(rl_bus_t *bus)
{
    if (bus != NULL)
        bus->ops->close(bus);
}
/*
 * Publishes event `name` with `data`, already encoded as compact JSON (len
 * bytes, no line break; only read), to the user: a new id, the ring, every
 * node that listens. Failures are logged (the event is lost, which a
 * client's resume turns into a resync). The hot path (deltas) encodes its
 * events with a small writer and publishes them through this.
 */
static inline void rl_bus_publish_text(rl_bus_t *bus, const char *user_id, const char *name, const char *data,
                                       size_t len)
{
    bus->ops->publish(bus, user_id, name, data, len);
}
/* As rl_bus_publish_text, from a JSON value (stolen; NULL for {}), encoded here. */
void rl_bus_publish(rl_bus_t *bus, const char *user_id, const char *name, json_t *data);
/* Reads at most max events of the user's ring after after_id. */
static inline void rl_bus_read(rl_bus_t *bus, const char *user_id, int64_t after_id, size_t max, rl_bus_read_cb cb,
                               void *arg)
{
    bus->ops->read(bus, user_id, after_id, max, cb, arg);
}
/* Starts (on 1) or stops (on 0) this node's interest in a user's live events; calls nest. */
static inline void rl_bus_listen(rl_bus_t *bus, const char *user_id, int on)
{
    bus->ops->listen(bus, user_id, on);
}
/* Sends message (stolen) to every node that joined topic. */
static inline void rl_bus_signal(rl_bus_t *bus, const char *topic, json_t *message)
{
    bus->ops->signal(bus, topic, message);
}
/* Joins (on 1) or leaves (on 0) a topic; calls nest. */
static inline void rl_bus_join(rl_bus_t *bus, const char *topic, int on)
{
    bus->ops->join(bus, topic, on);
}
/* Records that owner (a connection id unique across nodes) serves the installation, with health. */
static inline void rl_bus_presence_set(rl_bus_t *bus, const char *installation_id, const char *owner,
                                       const char *health)
{
    bus->ops->presence_set(bus, installation_id, owner, health);
}
/* Forgets the installation's presence if owner still holds it; cb says whether it did. */
static inline void rl_bus_presence_clear(rl_bus_t *bus, const char *installation_id, const char *owner,
                                         rl_bus_cleared_cb cb, void *arg)
{
    bus->ops->presence_clear(bus, installation_id, owner, cb, arg);
}
/* The installation's health as this node knows it: "healthy", "degraded" or "offline". */
static inline const char *rl_bus_presence_get(rl_bus_t *bus, const char *installation_id)
{
    return bus->ops->presence_get(bus, installation_id);
}
/*
 * Takes one token from the bucket `key` (capacity tokens, refilled at
 * refill_per_s; full when first seen). The bucket is shared by every node,
 * which together never grant more than it. A networked bus may count time
 * by its own clock instead of now_ms, and may answer from a share of the
 * bucket that this node leased, inside the call (docs/internals/bus.md,
 * "Rate buckets").
 */
static inline void rl_bus_take(rl_bus_t *bus, const char *key, double capacity, double refill_per_s, int64_t now_ms,
                               rl_bus_take_cb cb, void *arg)
{
    bus->ops->take(bus, key, capacity, refill_per_s, now_ms, cb, arg);
}
/*
 * Takes or renews the lease `name` for holder (unique across nodes) for
 * ttl_ms, unless another holder has it; cb says whether holder holds it.
 */
static inline void rl_bus_lease(rl_bus_t *bus, const char *name, const char *holder, int64_t ttl_ms, rl_bus_lease_cb cb,
                                void *arg)
{
    bus->ops->lease(bus, name, holder, ttl_ms, cb, arg);
}
/* Drops what has expired; call now and then. */
static inline void rl_bus_sweep(rl_bus_t *bus, int64_t now_ms)
{
    bus->ops->sweep(bus, now_ms, 1);
}
/* As rl_bus_sweep over one of `parts` shares of what the bus keeps (rl_strmap_sweep_part): the next one each call. */
static inline void rl_bus_sweep_part(rl_bus_t *bus, int64_t now_ms, unsigned parts)
{
    bus->ops->sweep(bus, now_ms, parts);
}

/*
 * At shutdown, once nothing takes from the buckets any more: gives back what
 * this node holds of the shared state that others would otherwise wait for
 * to lapse (its leases of bucket shares, its place among the live nodes),
 * then calls cb, inside the call or on a later turn of the loop (which the
 * caller keeps turning). The local bus holds nothing: cb at once.
 */
static inline void rl_bus_retire(rl_bus_t *bus, rl_bus_retired_cb cb, void *arg)
{
    bus->ops->retire(bus, cb, arg);
}

/*
 * Commands and script calls this process has sent to a networked bus's
 * server (Redis) since it started, each call of a pipeline counted; 0 on the
 * local bus. The metric relay_bus_calls_total.
 */
uint64_t rl_bus_calls_total(void);
/*
 * The claims of lapsed presences this process made and Redis answered (each
 * renewal period, and again while a claim moves a full batch); 0 on the
 * local bus. The metric relay_presence_claims_total: what a test waits on
 * instead of sleeping through a few claims.
 */
uint64_t rl_bus_presence_claims_total(void);

/* Backends. */
int rl_bus__local_open(h2o_loop_t *loop, const rl_bus_config_t *config, rl_bus_t **out);
int rl_bus__redis_open(const char *location, h2o_loop_t *loop, const rl_bus_config_t *config, rl_bus_t **out);

#endif
