/*
 * What the Redis bus's files share (private to src/bus): its limits, the
 * bus itself, the subscriber's records of a user listened to and a topic
 * joined, and the functions one file calls in another. bus_redis.c is the
 * core; each service is a bus_redis_<service>.c (docs/internals/bus.md).
 */
#ifndef RL_BUS_BUS_REDIS_INTERNAL_H
#define RL_BUS_BUS_REDIS_INTERNAL_H

#include <h2o.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "bus/bus.h"
#include "bus/redis.h"
#include "common/buf.h"
#include "common/strmap.h"
#include "http/later.h"

#define KEY_MAX           1200
#define USERS_MAX         1000000
#define TOPICS_MAX        1000000
#define PRESENCE_MAX      1000000
#define OWNER_MAX         95
#define READ_MAX          256           /* events in one read */
#define READ_BYTES        (1024 * 1024) /* a read stops adding events past this many bytes */
#define PRESENCE_LEASE_MS 10000         /* by default, a presence its node stops renewing lapses after this */
#define LEASE_RENEWALS    5             /* renewals (and claims of others' lapses) per lease: see rl_bus__redis_open */
#define RENEW_BATCH       256           /* installations renewed by one script call */
#define SUBSCRIBE_BATCH   256           /* channels in one SUBSCRIBE */
#define CATCH_UP_HELD     4096          /* live events held per user while catching up */
#define SIGNALS_LOGGED    16            /* signals a topic's log keeps for nodes that just joined */
#define SIGNALS_LOG_MS    60000         /* and for how long */
#define SIGNAL_LOGGED_MAX (64 * 1024)   /* a larger signal (a bridge's answer, rpc.c) is sent but not logged */
#define SIGNALS_HELD      64            /* live signals held per topic while reading its log */
#define MISSED_MAX        4096          /* topics whose lost signals are remembered, to say "missed" */
#define REPLY_TIMEOUT_MS  2000
#define KEEPALIVE_MS      5000
#define QUEUE_BYTES       (64 * 1024 * 1024)
#define REPLY_BYTES       (64 * 1024 * 1024)
#define PENDING_MAX       100000
#define BATCH_EVENTS      1024          /* events in one publish call */
#define BATCH_USERS       256           /* users in one publish call */
#define BATCH_BYTES       (1024 * 1024) /* a publish call is sent once its strings reach this */
#define START_WAIT_MS     2000          /* how long opening waits for Redis before the node starts anyway */
#define KEEP_MS           250           /* by default, how often a node renews and returns its bucket leases */
#define KEEP_BATCH        256           /* buckets in one renewal call */
#define LEASE_MS          1000          /* a bucket share's lease, unless renewed (idle ones are returned) */
#define LEASE_MARGIN_MS   1000          /* Redis keeps a lease this much longer than its node uses it */
#define NODE_TTL_MS       10000         /* a node that stops saying it is live counts for this long */
#define WAITERS_MAX       256           /* takes waiting for one bucket's lease call */
#define SHARE_IDLE_MS     10000         /* a bucket nobody took from for this long is forgotten (no lease held) */
#define SHARES_MAX        1000000

/* Redis's clock in milliseconds: ids, rings, buckets and leases follow one clock for every node. */
#define LUA_NOW                                                                                                        \
    "local t = redis.call('TIME')\n"                                                                                   \
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"

/*
 * Where this node's presence cache stands (docs/internals/bus.md,
 * "Presence"): a load is sent only once subscribed to the presence channel,
 * so that no change falls between the load and the subscription, and at
 * most one is on its way. A subscription lost while a load is on its way
 * keeps it in mind (OFF_LOADING): once subscribed again, that load
 * is answered before the next is sent.
 */
enum cache_state {
    CACHE_OFF,         /* changes are not heard: no load is sent */
    CACHE_OFF_LOADING, /* lost while a load is on its way, which no longer stands for anything */
    CACHE_WANTED,      /* subscribed: a load is to be sent (the connection was not ready, or one failed) */
    CACHE_LOADING,     /* subscribed, a load on its way */
    CACHE_LOADED,      /* subscribed, and loaded since (changes keep it current) */
};

/* What moves the presence cache from one state to the next (rbus_cache_to). */
enum cache_event {
    CACHE_EV_SUBSCRIBED, /* the presence channel's subscription is confirmed */
    CACHE_EV_LOST,       /* the subscription connection is lost */
    CACHE_EV_SENT,       /* a load was sent */
    CACHE_EV_LOADED,     /* the load was answered, sent after the latest subscription */
    CACHE_EV_AGAIN,      /* the load failed, or was sent before the latest subscription: load again */
};

/* An answer that the bus gives on the next loop turn (never inside the call). */
struct deferred {
    rl_later_item_t item; /* first */
    enum { DEFER_READ, DEFER_TAKE, DEFER_LEASE, DEFER_CLEARED } kind;
    rl_bus_read_cb read_cb;
    rl_bus_take_cb take_cb;
    rl_bus_lease_cb lease_cb;
    rl_bus_cleared_cb cleared_cb;
    void *arg;
    int value;
};

/* A take waiting for the lease call of its bucket (redis_take). */

/* The events published during this loop turn, sent at its end as one call (send_events). */
struct batch_user {
    size_t user, user_len, counter, ring, channel, number; /* offsets in bytes */
};
struct batch_event {
    size_t user; /* in users */
    size_t name, name_len, data, data_len;
};
struct event_batch {
    rl_later_item_t item;
    struct batch_user users[BATCH_USERS];
    size_t nusers;
    struct batch_event events[BATCH_EVENTS];
    size_t nevents;
    rl_buf_t bytes; /* every string of the call, NUL-terminated */
};

struct redis_bus {
    rl_bus_t super;
    rl_bus_config_t config;
    h2o_loop_t *loop;
    rl_redis_location_t location;
    rl_redis_t *cmd, *sub;
    int64_t idle_ttl_ms;
    int64_t lease_ms, renew_ms; /* a presence's lease, and how often this node renews its own (a fifth of it) */
    char events_channel[32];    /* "relay:<db>:ev:", then the user */
    char signals_channel[32];   /* "relay:<db>:sig:", then the topic */
    char presence_channel[32];
    rl_strmap_t *users;    /* user -> struct listener */
    uint64_t listeners;    /* listeners created, for their generations */
    rl_strmap_t *topics;   /* topic -> struct joined */
    rl_strmap_t *presence; /* installation -> struct cached */
    rl_strmap_t *own;      /* installation -> struct own */
    enum cache_state cache;
    /* Subscriptions to the presence channel so far, and the one the load in flight was sent after: a load
     * sent before the latest (re)subscription does not stand for it (a change may fall in between). */
    uint64_t presence_subscriptions, load_subscription;
    uint64_t loads;
    int dropping; /* an episode of dropped events or signals is under way (and was logged) */
    uint64_t dropped_events, dropped_signals;
    /*
     * Topics this node could not send a signal to: each is told RL_BUS_MISSED once Redis answers again, so
     * that its readers look again. Past MISSED_MAX, the others are only logged (missed_overflow).
     */
    rl_strmap_t *missed;
    int missed_overflow;
    rl_later_t later;
    rl_strmap_t *shares; /* bucket -> struct share */
    /*
     * The settlement visits the leased shares, and of the others only those
     * filed SHARE_IDLE_MS ago, oldest first: its cost follows the buckets
     * in use, not every bucket taken from in the last 10 s (a walk of 50 000
     * took the loop 29 ms, four times a second).
     */
    h2o_linklist_t shares_leased, shares_idle;
    h2o_timeout_entry_t settle;
    char node_field[24];    /* "h:<node>": this node's field in a bucket's hash, and (from 2) its name */
    int nodes;              /* live nodes, as Redis last said */
    int64_t lost_ms;        /* when the command connection was lost (monotonic), -1 while it is up */
    rl_later_t batch_later; /* the batch's own end of turn (later holds only struct deferred) */
    struct event_batch batch;
    char ring_length[24], ring_age[24], idle_ttl[24]; /* the publish script's settings, as text */
    h2o_timeout_entry_t renew;
    int closing;
};

/*
 * Listening to a user. A SUBSCRIBE takes effect some time after the call,
 * and on another connection than the PUBLISH of an event: an event
 * published meanwhile would never reach this node. So listening starts by
 * reading the user's newest id (the mark), and once the subscription is
 * confirmed, reads from the ring what followed the mark and delivers it,
 * holding back the live events that arrive meanwhile, then goes live: every
 * event published after listen() is delivered, once, in order. After the
 * subscription connection comes back, the same catch-up starts from the last
 * event delivered, so that what was published while it was down is not
 * missed either (as far as the ring still holds it).
 */
struct listener {
    unsigned count;
    uint64_t gen; /* tells this listener from an earlier one of the same user */
    int marked, subscribed, reading, live, overflowed;
    int64_t delivered; /* the newest id handed to this node (the mark at first); -1 when unknown */
    size_t nheld;
    rl_bus_event_t *held; /* live events that came while catching up */
};

/* A read on behalf of a listener or a joined topic, which may be gone when it is answered. */
struct listen_op {
    struct redis_bus *bus;
    uint64_t gen;
    char name[]; /* the user or the topic */
};

/*
 * Joining a topic, for the same reason as listening to a user: a signal
 * sent between join() and the SUBSCRIBE taking effect would be lost. Each
 * topic keeps a short log in Redis; joining reads the topic's counter (the
 * mark), and once subscribed, delivers from the log what came after it,
 * holding back what arrives live meanwhile. A signal is delivered at most
 * once (numbers seen are skipped), also when the subscription connection
 * comes back and the log is read again.
 */
struct joined {
    unsigned count;
    uint64_t gen;
    int marked, subscribed, reading, live, overflowed;
    int resubscribed;  /* the subscription was lost and comes back: RL_BUS_MISSED once live again */
    int64_t delivered; /* the number of the last signal delivered (the mark at first); -1 when unknown */
    size_t nheld;
    char *held[SIGNALS_HELD]; /* "<seq> <message>" that came while catching up */
};

/* ---- shared by the core and the services (bus_redis.c) --------------------------------------- */

int64_t rbus_mono_ms(void);
/* Writes prefix + name into buf; -1 when it does not fit (a name that long is not the relay's). */
int rbus_key(char *buf, size_t size, const char *prefix, const char *name);
void rbus_count_drops(struct redis_bus *bus, uint64_t *counter, size_t n, const char *what);
struct deferred *rbus_defer(struct redis_bus *bus, int kind, void *arg);
void rbus_subscription(struct redis_bus *bus, const char *command, const char *prefix, const char *name);
struct listen_op *rbus_listen_op_new(struct redis_bus *bus, const char *user_id, uint64_t gen);

/* ---- user events (bus_redis_events.c) -------------------------------------------------------- */

extern rl_redis_script_t rbus_publish_script, rbus_read_script;
void redis_publish(rl_bus_t *super, const char *user_id, const char *name, const char *data, size_t len);
void redis_read(rl_bus_t *super, const char *user_id, int64_t after_id, size_t max, rl_bus_read_cb cb, void *arg);
void redis_listen(rl_bus_t *super, const char *user_id, int on);
void rbus_on_turn_end(rl_later_item_t *item);
void rbus_listener_free(void *p);
void rbus_catch_up(struct redis_bus *bus, const char *user_id, struct listener *l);
void rbus_on_event_message(struct redis_bus *bus, const char *user_id, const redisReply *payload);

/* ---- signals (bus_redis_signals.c) ----------------------------------------------------------- */

extern rl_redis_script_t rbus_signal_script;
void redis_signal(rl_bus_t *super, const char *topic, json_t *message);
void redis_join(rl_bus_t *super, const char *topic, int on);
void rbus_joined_free(void *p);
void rbus_read_log(struct redis_bus *bus, const char *topic, struct joined *j);
void rbus_send_missed(struct redis_bus *bus);
void rbus_on_signal_message(struct redis_bus *bus, const char *topic, const redisReply *payload);

/* ---- presence (bus_redis_presence.c) --------------------------------------------------------- */

extern rl_redis_script_t rbus_presence_set_script, rbus_presence_clear_script, rbus_presence_renew_script,
    rbus_presence_load_script, rbus_presence_lapse_script;
void redis_presence_set(rl_bus_t *super, const char *installation_id, const char *owner, const char *health);
void redis_presence_clear(rl_bus_t *super, const char *installation_id, const char *owner, rl_bus_cleared_cb cb,
                          void *arg);
const char *redis_presence_get(rl_bus_t *super, const char *installation_id);
void redis_sweep(rl_bus_t *super, int64_t now_ms, unsigned parts);
void rbus_on_presence_message(struct redis_bus *bus, const char *payload, size_t len);
void rbus_maybe_load(struct redis_bus *bus);
void rbus_cache_to(struct redis_bus *bus, enum cache_event event);
void rbus_on_renew(h2o_timeout_entry_t *entry);
int rbus_assert_own(const char *id, void *value, void *arg);

/* ---- buckets and leases (bus_redis_buckets.c) ------------------------------------------------ */

extern rl_redis_script_t rbus_lease_bucket_script, rbus_keep_buckets_script, rbus_node_script, rbus_lease_script;
void redis_take(rl_bus_t *super, const char *bucket, double capacity, double refill_per_s, int64_t now_ms,
                rl_bus_take_cb cb, void *arg);
void redis_lease(rl_bus_t *super, const char *name, const char *holder, int64_t ttl_ms, rl_bus_lease_cb cb, void *arg);
void redis_retire(rl_bus_t *super, rl_bus_retired_cb cb, void *arg);
void rbus_on_settle_tick(h2o_timeout_entry_t *entry);
void rbus_share_free(void *value);
int rbus_forget_share(const char *bucket, void *value, void *arg);
void rbus_say_live(struct redis_bus *bus);

#endif
