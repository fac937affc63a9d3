/*
 * The Redis bus: every node on the same Redis (and database) shares one
 * sequence of event ids per user, one replay ring, signals, presence, token
 * buckets and leases. docs/internals/bus.md ("Redis backend") describes the
 * keys, scripts and channels, and what happens when Redis fails.
 *
 * Two connections (redis.c): one for commands and scripts, one for
 * SUBSCRIBE, whose messages carry live events, signals and presence changes
 * to this node. Everything that must be atomic is one Lua script, run by
 * EVALSHA: the events of a loop turn, each with its id, its place in the
 * ring and its PUBLISH; a node's lease of a share of a rate bucket (takes
 * are served from the share in between) and the renewals of its leases; a
 * lease's take or renewal;
 * a presence's compare-and-set.
 * Listening to a user and joining a topic catch up from the ring (or the
 * topic's log) once the subscription is confirmed, so that nothing sent
 * after the call is lost to the subscription taking effect later.
 *
 * Redis down or slow: publish and signal are dropped (logged once per
 * episode, counted), read answers RL_E_UNAVAILABLE, take answers from this
 * node's part of each bucket for the outage grace and RL_E_UNAVAILABLE
 * after it, lease answers
 * "not held", presence_get answers from this node's cache. Both connections
 * come back by themselves; subscriptions, this node's presences and the
 * presence cache are restored then.
 *
 * This file is the core: the two connections, the subscriber and its
 * dispatch of messages, the outage state, deferred answers and the ops
 * table. Each service is a file of its own over bus_redis_internal.h:
 * bus_redis_events.c (a user's events: publish, read, listen),
 * bus_redis_signals.c (signals and topics), bus_redis_presence.c (presence,
 * its load and the claims of lapses), bus_redis_buckets.c (rate buckets,
 * their shares and settlement, named leases, this node's liveness).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus/bus.h"
#include "bus/bus_redis_internal.h"
#include "bus/redis.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/rand.h"
#include "common/strmap.h"
#include "http/later.h"

/* Every service's scripts, loaded on the command connection (the subscription one runs none). */
static rl_redis_script_t *const scripts[] = {
    &rbus_signal_script,         &rbus_publish_script,        &rbus_read_script,          &rbus_lease_bucket_script,
    &rbus_keep_buckets_script,   &rbus_node_script,           &rbus_lease_script,         &rbus_presence_set_script,
    &rbus_presence_clear_script, &rbus_presence_renew_script, &rbus_presence_load_script, &rbus_presence_lapse_script,
};

int64_t rbus_mono_ms(void)
{
    return rl_clock_mono_us() / 1000;
}

/* Writes prefix + name into buf; -1 when it does not fit (a name that long is not the relay's). */
int rbus_key(char *buf, size_t size, const char *prefix, const char *name)
{
    int len = snprintf(buf, size, "%s%s", prefix, name);

    return len < 0 || (size_t)len >= size ? -1 : len;
}

void rbus_count_drops(struct redis_bus *bus, uint64_t *counter, size_t n, const char *what)
{
    *counter += n;
    if (!bus->dropping) {
        bus->dropping = 1;
        rl_log_warn("redis bus at %s: cannot send %s; events and signals are dropped until Redis answers again",
                    bus->location.display, what);
    }
}

/* ---- deferred answers ------------------------------------------------------------------------ */

static void run_deferred(rl_later_item_t *item)
{
    struct deferred *d = (struct deferred *)item;

    switch (d->kind) {
    case DEFER_READ:
        d->read_cb(RL_E_UNAVAILABLE, NULL, d->arg);
        break;
    case DEFER_TAKE:
        d->take_cb(RL_E_UNAVAILABLE, 0, d->arg);
        break;
    case DEFER_LEASE:
        d->lease_cb(0, d->arg);
        break;
    case DEFER_CLEARED:
        d->cleared_cb(d->value, d->arg);
        break;
    }
    free(d);
}

/* Closing: the bus's own reads are answered (so that they free their state); the others are dropped. */
static void drop_deferred(rl_later_item_t *item)
{
    struct deferred *d = (struct deferred *)item;

    if (d->kind == DEFER_READ && d->value)
        d->read_cb(RL_E_UNAVAILABLE, NULL, d->arg);
    free(d);
}

struct deferred *rbus_defer(struct redis_bus *bus, int kind, void *arg)
{
    struct deferred *d = calloc(1, sizeof(*d));

    if (d == NULL) {
        rl_log_error("out of memory answering a bus call");
        abort();
    }
    d->kind = kind;
    d->arg = arg;
    d->item.run = run_deferred;
    rl_later_add(&bus->later, &d->item);
    return d;
}

/* ---- subscriptions --------------------------------------------------------------------------- */

/* Sends one SUBSCRIBE or UNSUBSCRIBE, if the subscription connection is up (else it is done on connection). */
void rbus_subscription(struct redis_bus *bus, const char *command, const char *prefix, const char *name)
{
    char channel[KEY_MAX];
    const char *argv[2] = {command, channel};
    size_t lens[2];

    if (!rl_redis_ready(bus->sub) || rbus_key(channel, sizeof(channel), prefix, name) < 0)
        return;
    lens[0] = strlen(command);
    lens[1] = strlen(channel);
    if (rl_redis_subscription(bus->sub, 2, argv, lens) != 0)
        rl_log_warn("redis bus: could not send %s for a channel", command);
}

struct listen_op *rbus_listen_op_new(struct redis_bus *bus, const char *user_id, uint64_t gen)
{
    size_t len = strlen(user_id);
    struct listen_op *op = malloc(sizeof(*op) + len + 1);

    if (op != NULL) {
        op->bus = bus;
        op->gen = gen;
        memcpy(op->name, user_id, len + 1);
    }
    return op;
}

/* Hands one event to the relay; the listener may be gone afterwards (the bus allows a handler to stop listening). */

/* Channels gathered for one SUBSCRIBE. */
struct batch {
    struct redis_bus *bus;
    const char *prefix;
    char *channels[SUBSCRIBE_BATCH];
    size_t count;
};

static void send_batch(struct batch *b)
{
    const char *argv[SUBSCRIBE_BATCH + 1];
    size_t lens[SUBSCRIBE_BATCH + 1], i;

    if (b->count == 0)
        return;
    argv[0] = "SUBSCRIBE";
    lens[0] = 9;
    for (i = 0; i < b->count; ++i) {
        argv[i + 1] = b->channels[i];
        lens[i + 1] = strlen(b->channels[i]);
    }
    if (rl_redis_subscription(b->bus->sub, (int)b->count + 1, argv, lens) != 0)
        rl_log_warn("redis bus: could not subscribe again to %zu channels", b->count);
    for (i = 0; i < b->count; ++i)
        free(b->channels[i]);
    b->count = 0;
}

static int add_to_batch(const char *name, void *value, void *arg)
{
    struct batch *b = arg;
    size_t len = strlen(b->prefix) + strlen(name) + 1;
    char *channel = malloc(len);

    if (channel != NULL) {
        snprintf(channel, len, "%s%s", b->prefix, name);
        b->channels[b->count++] = channel;
        if (b->count == SUBSCRIBE_BATCH)
            send_batch(b);
    }
    return 0;
}

/* The subscription connection is (back) up: subscribe to everything this node follows. */
static void on_sub_ready(rl_redis_t *redis, void *ctx)
{
    struct redis_bus *bus = ctx;
    struct batch b = {.bus = bus, .prefix = ""};

    add_to_batch(bus->presence_channel, NULL, &b);
    b.prefix = bus->events_channel;
    rl_strmap_sweep(bus->users, add_to_batch, &b, NULL);
    send_batch(&b);
    b.prefix = bus->signals_channel;
    rl_strmap_sweep(bus->topics, add_to_batch, &b, NULL);
    send_batch(&b);
}

static int unsubscribed(const char *user_id, void *value, void *arg)
{
    struct listener *l = value;

    /* Events published from now on are missed here: catch up once subscribed again. */
    l->subscribed = 0;
    l->live = 0;
    return 0;
}

static int left(const char *topic, void *value, void *arg)
{
    struct joined *j = value;

    /* Signals sent from now on are missed here: read the log once subscribed again (and say so). */
    j->subscribed = 0;
    j->live = 0;
    j->resubscribed = 1;
    return 0;
}

static void on_sub_lost(rl_redis_t *redis, void *ctx)
{
    struct redis_bus *bus = ctx;

    /* Changes published meanwhile are missed: the cache is loaded again once subscribed. */
    rbus_cache_to(bus, CACHE_EV_LOST);
    rl_strmap_sweep(bus->users, unsubscribed, NULL, NULL);
    rl_strmap_sweep(bus->topics, left, NULL, NULL);
}

/* ---- the command connection ------------------------------------------------------------------ */

static void on_cmd_lost(rl_redis_t *redis, void *ctx)
{
    struct redis_bus *bus = ctx;

    if (bus->lost_ms < 0)
        bus->lost_ms = rbus_mono_ms();
}

/* The command connection is (back) up. */
static void on_cmd_ready(rl_redis_t *redis, void *ctx)
{
    struct redis_bus *bus = ctx;

    if (bus->dropping) {
        rl_log_info("redis bus at %s: sending again; %llu events and %llu signals were dropped meanwhile",
                    bus->location.display, (unsigned long long)bus->dropped_events,
                    (unsigned long long)bus->dropped_signals);
        bus->dropping = 0;
        bus->dropped_events = bus->dropped_signals = 0;
    }
    rbus_send_missed(bus);
    /*
     * The outage slices served alone meanwhile: what they gave is forgiven,
     * and each bucket's next take leases a share again (the leases Redis
     * kept run out by themselves; it may have lost them too).
     */
    rbus_say_live(bus);
    bus->lost_ms = -1;
    rl_strmap_sweep(bus->shares, rbus_forget_share, NULL, NULL);
    /* Redis may have lost them (a restart without persistence), or they lapsed meanwhile. */
    rl_strmap_sweep(bus->own, rbus_assert_own, bus, NULL);
    rbus_maybe_load(bus);
}

/* ---- the subscriber's messages, each to its service ------------------------------------------ */

static int starts_with(const redisReply *s, const char *prefix, size_t len)
{
    return s->len >= len && memcmp(s->str, prefix, len) == 0;
}

static void on_push(rl_redis_t *redis, redisReply *reply, void *ctx)
{
    struct redis_bus *bus = ctx;
    const char *kind = reply->element[0]->str;
    const redisReply *channel = reply->elements >= 2 ? reply->element[1] : NULL;
    size_t events_len = strlen(bus->events_channel), signals_len = strlen(bus->signals_channel);

    if (channel == NULL || channel->type != REDIS_REPLY_STRING)
        return;
    if (strcmp(kind, "message") == 0 && reply->elements == 3 && reply->element[2]->type == REDIS_REPLY_STRING) {
        const redisReply *payload = reply->element[2];
        if (starts_with(channel, bus->events_channel, events_len))
            rbus_on_event_message(bus, channel->str + events_len, payload);
        else if (starts_with(channel, bus->signals_channel, signals_len))
            rbus_on_signal_message(bus, channel->str + signals_len, payload);
        else if (strcmp(channel->str, bus->presence_channel) == 0)
            rbus_on_presence_message(bus, payload->str, payload->len);
    } else if (strcmp(kind, "subscribe") == 0 && strcmp(channel->str, bus->presence_channel) == 0) {
        bus->presence_subscriptions++;
        rbus_cache_to(bus, CACHE_EV_SUBSCRIBED);
        rbus_maybe_load(bus);
    } else if (strcmp(kind, "subscribe") == 0 && starts_with(channel, bus->signals_channel, signals_len)) {
        struct joined *j = rl_strmap_get(bus->topics, channel->str + signals_len);
        if (j != NULL) {
            j->subscribed = 1;
            rbus_read_log(bus, channel->str + signals_len, j);
        }
    } else if (strcmp(kind, "subscribe") == 0 && starts_with(channel, bus->events_channel, events_len)) {
        struct listener *l = rl_strmap_get(bus->users, channel->str + events_len);
        if (l != NULL) {
            l->subscribed = 1;
            rbus_catch_up(bus, channel->str + events_len, l);
        }
    }
}

/* ---- the backend ----------------------------------------------------------------------------- */

static void redis_close(rl_bus_t *super)
{
    struct redis_bus *bus = (void *)super;

    /* The clients fail what waits for a reply; the callbacks see closing and only free their state. */
    bus->closing = 1;
    rl_later_dispose(&bus->batch_later, NULL);
    rl_redis_free(bus->cmd);
    rl_redis_free(bus->sub);
    if (h2o_timeout_is_linked(&bus->renew))
        h2o_timeout_unlink(&bus->renew);
    if (h2o_timeout_is_linked(&bus->settle))
        h2o_timeout_unlink(&bus->settle);
    rl_strmap_free(bus->shares, rbus_share_free);
    rl_later_dispose(&bus->later, drop_deferred);
    rl_buf_free(&bus->batch.bytes);
    rl_strmap_free(bus->users, rbus_listener_free);
    rl_strmap_free(bus->topics, rbus_joined_free);
    rl_strmap_free(bus->missed, NULL);
    rl_strmap_free(bus->presence, free);
    rl_strmap_free(bus->own, free);
    free(bus);
}

static const struct rl_bus_ops redis_ops = {
    .name = "redis",
    .close = redis_close,
    .publish = redis_publish,
    .read = redis_read,
    .listen = redis_listen,
    .signal = redis_signal,
    .join = redis_join,
    .presence_set = redis_presence_set,
    .presence_clear = redis_presence_clear,
    .presence_get = redis_presence_get,
    .take = redis_take,
    .lease = redis_lease,
    .sweep = redis_sweep,
    .retire = redis_retire,
};

int rl_bus__redis_open(const char *location, h2o_loop_t *loop, const rl_bus_config_t *config, rl_bus_t **out)
{
    static int scripts_ready;
    struct redis_bus *bus;
    rl_redis_config_t cmd = {
        .name = "commands",
        .scripts = scripts,
        .nscripts = sizeof(scripts) / sizeof(scripts[0]),
        .max_pending = PENDING_MAX,
        .max_queued_bytes = QUEUE_BYTES,
        .max_reply_bytes = REPLY_BYTES,
        .reply_timeout_ms = REPLY_TIMEOUT_MS,
        .keepalive_ms = KEEPALIVE_MS,
        .on_ready = on_cmd_ready,
        .on_lost = on_cmd_lost,
    };
    rl_redis_config_t sub = cmd;
    const char *why = NULL;
    size_t i;

    if (!scripts_ready) {
        for (i = 0; i < sizeof(scripts) / sizeof(scripts[0]); ++i)
            rl_redis_script_init(scripts[i]);
        scripts_ready = 1;
    }
    if ((bus = calloc(1, sizeof(*bus))) == NULL)
        return -1;
    /* The location is not repeated: it may hold a password. */
    if (rl_redis_parse_location(location, &bus->location, &why) != 0) {
        rl_log_error("bad bus location: %s", why);
        free(bus);
        return -1;
    }
    bus->super.ops = &redis_ops;
    bus->config = *config;
    if (bus->config.max_events == 0)
        bus->config.max_events = 1;
    bus->loop = loop;
    /* A user's keys outlive a few replay windows of silence, then go. */
    bus->idle_ttl_ms = 3 * bus->config.max_age_ms + 1000;
    bus->lease_ms = config->presence_lease_ms > 0 ? config->presence_lease_ms : PRESENCE_LEASE_MS;
    /*
     * docs/operations.md promises a dead node's bridges offline within 15 s:
     * its last renewal lands at the latest at its death, the presence lapses
     * a lease (10 s) later, and a surviving node claims it at its next
     * renewal, at most a fifth of a lease after that: 12 s. A live node whose
     * renewals stall keeps its presences for four fifths of a lease (8 s).
     */
    bus->renew_ms = bus->lease_ms / LEASE_RENEWALS > 0 ? bus->lease_ms / LEASE_RENEWALS : 1;
    /* Channels, unlike keys, are shared by every database of a server: they carry the database's number. */
    snprintf(bus->events_channel, sizeof(bus->events_channel), "relay:%d:ev:", bus->location.db);
    snprintf(bus->signals_channel, sizeof(bus->signals_channel), "relay:%d:sig:", bus->location.db);
    snprintf(bus->presence_channel, sizeof(bus->presence_channel), "relay:%d:presence", bus->location.db);
    bus->users = rl_strmap_new(config->max_users > 0 ? config->max_users : USERS_MAX);
    bus->topics = rl_strmap_new(TOPICS_MAX);
    bus->missed = rl_strmap_new(MISSED_MAX);
    bus->presence = rl_strmap_new(PRESENCE_MAX);
    bus->own = rl_strmap_new(PRESENCE_MAX);
    rl_later_init(&bus->later, loop);
    rl_later_init(&bus->batch_later, loop);
    bus->batch.item.run = rbus_on_turn_end;
    rl_buf_init(&bus->batch.bytes, SIZE_MAX);
    snprintf(bus->ring_length, sizeof(bus->ring_length), "%zu", bus->config.max_events);
    snprintf(bus->ring_age, sizeof(bus->ring_age), "%lld", (long long)bus->config.max_age_ms);
    snprintf(bus->idle_ttl, sizeof(bus->idle_ttl), "%lld", (long long)bus->idle_ttl_ms);
    bus->renew.cb = rbus_on_renew;
    bus->settle.cb = rbus_on_settle_tick;
    bus->lost_ms = rbus_mono_ms(); /* not connected yet */
    bus->nodes = 1;
    if (config->node != NULL && config->node[0] != '\0' && strlen(config->node) + 3 <= sizeof(bus->node_field))
        snprintf(bus->node_field, sizeof(bus->node_field), "h:%s", config->node);
    else
        rl_rand_id(bus->node_field, sizeof(bus->node_field), "h:node_", 12);
    if (bus->config.bucket_settle_ms <= 0)
        bus->config.bucket_settle_ms = KEEP_MS;
    bus->shares = rl_strmap_new(config->max_buckets > 0 ? config->max_buckets : SHARES_MAX);
    h2o_linklist_init_anchor(&bus->shares_leased);
    h2o_linklist_init_anchor(&bus->shares_idle);
    cmd.ctx = bus;
    sub.name = "subscriptions";
    sub.scripts = NULL;
    sub.nscripts = 0;
    sub.max_pending = 1000;
    sub.on_ready = on_sub_ready;
    sub.on_lost = on_sub_lost;
    sub.on_push = on_push;
    sub.ctx = bus;
    if (bus->users == NULL || bus->topics == NULL || bus->missed == NULL || bus->presence == NULL || bus->own == NULL ||
        bus->shares == NULL || rl_redis_new(loop, &bus->location, &cmd, &bus->cmd) != 0 ||
        rl_redis_new(loop, &bus->location, &sub, &bus->sub) != 0) {
        redis_close(&bus->super);
        return -1;
    }
    h2o_timeout_link(loop, rl_redis__loop_timeout(loop, (uint64_t)bus->renew_ms), &bus->renew);
    h2o_timeout_link(loop, rl_redis__loop_timeout(loop, (uint64_t)bus->config.bucket_settle_ms), &bus->settle);
    /*
     * Opening is part of starting a node, before it serves anyone: give
     * Redis a moment, so that the first streams and events find the bus
     * connected instead of racing its connections. A Redis that is not there
     * yet does not stop the node; the bus comes up when Redis does.
     */
    {
        int64_t deadline = rbus_mono_ms() + START_WAIT_MS;
        while (!(rl_redis_ready(bus->cmd) && rl_redis_ready(bus->sub)) && rbus_mono_ms() < deadline)
            h2o_evloop_run(loop, 10);
        if (!rl_redis_ready(bus->cmd) || !rl_redis_ready(bus->sub))
            rl_log_warn("redis bus at %s: not connected after %d ms; starting anyway", bus->location.display,
                        START_WAIT_MS);
    }
    *out = &bus->super;
    return 0;
}
