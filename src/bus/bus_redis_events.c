/*
 * The Redis bus's user events (docs/internals/bus.md, "User events"): a
 * loop turn's events published as one script call, the ring read, and
 * listening to a user (a mark, the subscription, a catch-up from the ring,
 * then live). The core (bus_redis.c) hands this file the events channel's
 * messages and subscription confirmations.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus/bus_redis_internal.h"
#include "common/blob.h"
#include "common/error.h"
#include "common/event.h"
#include "common/log.h"

/*
 * Every event this node published during one loop turn, for any number of
 * users, in one call. KEYS: each user's counter (hash: first, last) and ring
 * (sorted set: score the id, member "<created ms> <event>"), two per user.
 * ARGV: ring length, ring age (ms), idle lifetime of the keys (ms), the
 * number of users U, each user's channel (U of them), then the events in
 * publish order as (user's number from 1, name, data) triples. Each event
 * gets the user's next id, its place in the ring and its PUBLISH in that
 * order; each user's ring is cut once, after its last event. A new counter
 * starts from the clock (ms * 1000), so that ids keep increasing after the
 * keys of an idle user expired. Times only grow with ids, so the events too
 * old to keep are a prefix of the ring. An event travels (on the channel,
 * and in the ring after its time) as "<id> <name> <data>": what the event
 * is, never how a client sees it; each node builds the SSE record. Answers
 * the number of events.
 */
rl_redis_script_t rbus_publish_script = {
    LUA_NOW "local length, age, ttl, users = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])\n"
            "local newest, count = {}, 0\n"
            "for i = 5 + users, #ARGV - 2, 3 do\n"
            "  local u = tonumber(ARGV[i])\n"
            "  local counter, ring = KEYS[2 * u - 1], KEYS[2 * u]\n"
            "  local id = redis.call('HINCRBY', counter, 'last', 1)\n"
            "  if id == 1 then\n"
            "    id = now * 1000\n"
            "    redis.call('HSET', counter, 'first', string.format('%d', id), 'last', string.format('%d', id))\n"
            "  end\n"
            "  local sid = string.format('%d', id)\n"
            "  local event = sid .. ' ' .. ARGV[i + 1] .. ' ' .. ARGV[i + 2]\n"
            "  redis.call('ZADD', ring, sid, string.format('%d', now) .. ' ' .. event)\n"
            "  redis.call('PUBLISH', ARGV[4 + u], event)\n"
            "  newest[u] = id\n"
            "  count = count + 1\n"
            "end\n"
            "local cutoff = now - age\n"
            "for u, id in pairs(newest) do\n"
            "  local counter, ring = KEYS[2 * u - 1], KEYS[2 * u]\n"
            "  redis.call('ZREMRANGEBYSCORE', ring, '-inf', string.format('%d', id - length))\n"
            "  while true do\n"
            "    local oldest = redis.call('ZRANGE', ring, 0, 0)\n"
            "    if #oldest == 0 or tonumber(string.match(oldest[1], '^%d+')) >= cutoff then break end\n"
            "    redis.call('ZREMRANGEBYRANK', ring, 0, 0)\n"
            "  end\n"
            "  redis.call('PEXPIRE', counter, ttl)\n"
            "  redis.call('PEXPIRE', ring, ttl)\n"
            "end\n"
            "return count\n"};

/*
 * KEYS: counter, ring. ARGV: after id, max events, ring age (ms), idle
 * lifetime (ms), byte budget. Answers {gap, newest, members...}. Reading a
 * user without a counter creates one, so that "newest" is the position
 * before the first id to come. The replay is exact when after is an id the
 * counter issued (or the one before its first) and the event after it is
 * still in the ring and young enough: ids are consecutive and times grow
 * with them, so then every later one is too.
 */
rl_redis_script_t rbus_read_script = {
    LUA_NOW "local h = redis.call('HMGET', KEYS[1], 'first', 'last')\n"
            "local first, last = tonumber(h[1]), tonumber(h[2])\n"
            "if first == nil or last == nil then\n"
            "  first = now * 1000\n"
            "  last = first - 1\n"
            "  redis.call('HSET', KEYS[1], 'first', string.format('%d', first), 'last', string.format('%d', last))\n"
            "  redis.call('PEXPIRE', KEYS[1], ARGV[4])\n"
            "end\n"
            "local after = tonumber(ARGV[1])\n"
            "if after < first - 1 or after > last then return {1, last} end\n"
            "if after == last then return {0, last} end\n"
            "local items = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. ARGV[1], '+inf', 'WITHSCORES', 'LIMIT', 0, "
            "tonumber(ARGV[2]))\n"
            "if #items == 0 or tonumber(items[2]) ~= after + 1 or\n"
            "   tonumber(string.match(items[1], '^%d+')) < now - tonumber(ARGV[3]) then\n"
            "  return {1, last}\n"
            "end\n"
            "local out, bytes = {0, last}, 0\n"
            "for i = 1, #items, 2 do\n"
            "  out[#out + 1] = items[i]\n"
            "  bytes = bytes + #items[i]\n"
            "  if bytes >= tonumber(ARGV[5]) then break end\n"
            "end\n"
            "return out\n"};

/* ---- user events ----------------------------------------------------------------------------- */

/* Formats the user's two keys; -1 when the user id is too long to be one of ours. */
static int event_keys(const char *user_id, char *counter, char *ring)
{
    if (rbus_key(counter, KEY_MAX, "relay:ev:n:", user_id) < 0 ||
        rbus_key(ring, KEY_MAX, "relay:ev:ring:", user_id) < 0) {
        rl_log_warn("redis bus: a user id of %zu bytes is too long", strlen(user_id));
        return -1;
    }
    return 0;
}

/* One batch on its way: how many events it carries, counted as dropped if it fails. */
struct batch_op {
    struct redis_bus *bus;
    size_t events;
};

static void on_published(redisReply *reply, void *arg)
{
    struct batch_op *op = arg;
    struct redis_bus *bus = op->bus;

    if (bus->closing)
        goto out;
    if (reply == NULL)
        rbus_count_drops(bus, &bus->dropped_events, op->events, "events");
    else if (reply->type == REDIS_REPLY_ERROR)
        rl_log_warn("redis bus: publishing %zu events failed: %s", op->events, reply->str);
out:
    free(op);
}

static void events_reset(struct event_batch *b)
{
    b->nusers = b->nevents = 0;
    rl_buf_reset(&b->bytes);
}

/* Where the batch's strings are, once no more are appended (the buffer may move until then). */
static const char *at(const struct event_batch *b, size_t offset)
{
    return b->bytes.bytes + offset;
}

/*
 * Sends every event of the batch as one call of the publish script (the
 * order of the arguments is the script's), and empties the batch. Reads of
 * the ring send the batch first, so that a read after a publish finds it.
 */
static void send_events(struct redis_bus *bus)
{
    struct event_batch *b = &bus->batch;
    size_t argc = 2 * b->nusers + 4 + b->nusers + 3 * b->nevents, i, n = 0;
    const char **argv;
    size_t *lens;
    struct batch_op *op;
    char users[16];

    if (b->nevents == 0) {
        events_reset(b);
        return;
    }
    argv = malloc(argc * sizeof(*argv));
    lens = malloc(argc * sizeof(*lens));
    op = malloc(sizeof(*op));
    if (argv == NULL || lens == NULL || op == NULL) {
        rbus_count_drops(bus, &bus->dropped_events, b->nevents, "events");
        goto out;
    }
    for (i = 0; i < b->nusers; ++i) {
        argv[n] = at(b, b->users[i].counter), lens[n++] = strlen(at(b, b->users[i].counter));
        argv[n] = at(b, b->users[i].ring), lens[n++] = strlen(at(b, b->users[i].ring));
    }
    snprintf(users, sizeof(users), "%zu", b->nusers);
    argv[n] = bus->ring_length, lens[n++] = strlen(bus->ring_length);
    argv[n] = bus->ring_age, lens[n++] = strlen(bus->ring_age);
    argv[n] = bus->idle_ttl, lens[n++] = strlen(bus->idle_ttl);
    argv[n] = users, lens[n++] = strlen(users);
    for (i = 0; i < b->nusers; ++i)
        argv[n] = at(b, b->users[i].channel), lens[n++] = strlen(at(b, b->users[i].channel));
    for (i = 0; i < b->nevents; ++i) {
        const struct batch_event *e = &b->events[i];
        argv[n] = at(b, b->users[e->user].number), lens[n++] = strlen(at(b, b->users[e->user].number));
        argv[n] = at(b, e->name), lens[n++] = e->name_len;
        argv[n] = at(b, e->data), lens[n++] = e->data_len;
    }
    *op = (struct batch_op){bus, b->nevents};
    if (rl_redis_eval(bus->cmd, &rbus_publish_script, (int)(2 * b->nusers), (int)argc, argv, lens, on_published, op) ==
        0)
        op = NULL;
    else
        rbus_count_drops(bus, &bus->dropped_events, b->nevents, "events");
out:
    free(op);
    free(argv);
    free(lens);
    events_reset(b);
}

void rbus_on_turn_end(rl_later_item_t *item)
{
    struct redis_bus *bus = H2O_STRUCT_FROM_MEMBER(struct redis_bus, batch.item, item);

    send_events(bus);
}

/* Appends a NUL-terminated string to the batch's bytes; its offset, or -1. */
static ptrdiff_t batch_string(struct event_batch *b, const char *text, size_t len)
{
    size_t offset = b->bytes.len;

    if (rl_buf_append(&b->bytes, text, len) != 0 || rl_buf_append(&b->bytes, "", 1) != 0) {
        b->bytes.len = offset;
        return -1;
    }
    return (ptrdiff_t)offset;
}

/* The user's number in the batch, adding the user (keys, channel) when new; -1 when it cannot. */
static int batch_user(struct redis_bus *bus, const char *user_id)
{
    struct event_batch *b = &bus->batch;
    char counter[KEY_MAX], ring[KEY_MAX], channel[KEY_MAX], number[16];
    struct batch_user *u;
    ptrdiff_t offsets[4];
    size_t i, len = strlen(user_id);

    /* The events of a turn mostly come in runs of one user: look at the last one first. */
    for (i = b->nusers; i-- > 0;) {
        if (b->users[i].user_len == len && memcmp(at(b, b->users[i].user), user_id, len) == 0)
            return (int)i;
    }
    if (event_keys(user_id, counter, ring) != 0 || rbus_key(channel, sizeof(channel), bus->events_channel, user_id) < 0)
        return -1;
    snprintf(number, sizeof(number), "%zu", b->nusers + 1);
    u = &b->users[b->nusers];
    if ((offsets[0] = batch_string(b, user_id, len)) < 0 ||
        (offsets[1] = batch_string(b, counter, strlen(counter))) < 0 ||
        (offsets[2] = batch_string(b, ring, strlen(ring))) < 0 ||
        (offsets[3] = batch_string(b, channel, strlen(channel))) < 0 ||
        (u->number = (size_t)batch_string(b, number, strlen(number))) == (size_t)-1)
        return -1;
    u->user = (size_t)offsets[0], u->user_len = len;
    u->counter = (size_t)offsets[1], u->ring = (size_t)offsets[2], u->channel = (size_t)offsets[3];
    return (int)b->nusers++;
}

/*
 * An event joins this turn's batch, which is sent at the end of the turn
 * (or at once when it is full): one script call per node per turn, whatever
 * the number of users, since the node's events of a turn all go to the same
 * Redis anyway and one call is what a round trip costs there. Ids are
 * assigned by the script in the order of the calls.
 */
void redis_publish(rl_bus_t *super, const char *user_id, const char *name, const char *data, size_t len)
{
    struct redis_bus *bus = (void *)super;
    struct event_batch *b = &bus->batch;
    struct batch_event *e;
    ptrdiff_t name_at, data_at;
    int user;

    /* Event names are the relay's own short identifiers; one that is not a plain token is a bug, not data. */
    if (!rl_event_name_valid(name, strlen(name)) || !rl_event_payload_valid(data, len)) {
        rl_log_warn("could not encode %s", name);
        return;
    }
    if (b->nevents == BATCH_EVENTS || b->nusers == BATCH_USERS || b->bytes.len + len + KEY_MAX * 4 > BATCH_BYTES)
        send_events(bus);
    if ((user = batch_user(bus, user_id)) < 0 || (name_at = batch_string(b, name, strlen(name))) < 0 ||
        (data_at = batch_string(b, data, len)) < 0) {
        rbus_count_drops(bus, &bus->dropped_events, 1, "an event");
        return;
    }
    e = &b->events[b->nevents++];
    *e = (struct batch_event){(size_t)user, (size_t)name_at, strlen(name), (size_t)data_at, len};
    rl_later_add(&bus->batch_later, &b->item);
}

struct read_op {
    struct redis_bus *bus;
    rl_bus_read_cb cb;
    void *arg;
    int internal; /* the bus's own read (listening): answered even when closing, so that it frees its state */
};

/*
 * A ring member written before events travelled as (id, name, data): the
 * finished record, "id: N\nevent: ...\ndata: ...\n\n". It is replayed as it
 * is, so that streams resume across an upgrade of the nodes; such members
 * age out of the ring within one replay window.
 */
static rl_blob_t *legacy_frame(const char *text, size_t len, int64_t *id)
{
    int64_t n = 0;
    size_t i;

    if (len < 8 || memcmp(text, "id: ", 4) != 0 || memcmp(text + len - 2, "\n\n", 2) != 0)
        return NULL;
    for (i = 4; i < len && i < 23 && text[i] >= '0' && text[i] <= '9'; ++i)
        n = n * 10 + (text[i] - '0');
    if (i == 4 || text[i] != '\n')
        return NULL;
    *id = n;
    return rl_blob_new(text, len);
}

/*
 * The record of an event as it travels ("<id> <name> <data>", the publish
 * script's), built by this node's encoder; NULL when the text is not one
 * (logged by the caller) or memory runs out. *id is set when it is not NULL.
 */
static rl_blob_t *event_frame(const char *text, size_t len, int64_t *id)
{
    const char *name, *space;
    int64_t n = 0;
    size_t i;

    if (len >= 4 && memcmp(text, "id: ", 4) == 0)
        return legacy_frame(text, len, id);
    for (i = 0; i < len && i < 19 && text[i] >= '0' && text[i] <= '9'; ++i)
        n = n * 10 + (text[i] - '0');
    if (i == 0 || i >= len || text[i] != ' ')
        return NULL;
    name = text + i + 1;
    space = memchr(name, ' ', len - (size_t)(name - text));
    if (space == NULL)
        return NULL;
    *id = n;
    return rl_event_frame_text(n, name, (size_t)(space - name), space + 1, len - (size_t)(space + 1 - text));
}

static void on_read_reply(redisReply *reply, void *arg)
{
    struct read_op *op = arg;
    rl_bus_read_t read = {0};
    size_t i;

    if (op->bus->closing && !op->internal)
        goto out;
    if (op->bus->closing || reply == NULL || reply->type != REDIS_REPLY_ARRAY || reply->elements < 2 ||
        reply->element[0]->type != REDIS_REPLY_INTEGER || reply->element[1]->type != REDIS_REPLY_INTEGER) {
        if (reply != NULL && reply->type == REDIS_REPLY_ERROR)
            rl_log_warn("redis bus: reading a ring failed: %s", reply->str);
        op->cb(RL_E_UNAVAILABLE, NULL, op->arg);
        goto out;
    }
    read.gap = reply->element[0]->integer != 0;
    read.newest = reply->element[1]->integer;
    read.events = calloc(reply->elements, sizeof(*read.events));
    if (read.events == NULL) {
        op->cb(RL_E_UNAVAILABLE, NULL, op->arg);
        goto out;
    }
    for (i = 2; i < reply->elements; ++i) {
        const redisReply *member = reply->element[i];
        const char *space = member->type == REDIS_REPLY_STRING ? memchr(member->str, ' ', member->len) : NULL;
        size_t len = space != NULL ? member->len - (size_t)(space + 1 - member->str) : 0;
        int64_t id = -1;
        rl_blob_t *frame = space != NULL ? event_frame(space + 1, len, &id) : NULL;
        if (frame == NULL)
            break;
        read.events[read.count].id = id;
        read.events[read.count++].frame = frame;
    }
    if (i < reply->elements) {
        rl_log_warn("redis bus: a ring holds an unreadable event");
        op->cb(RL_E_UNAVAILABLE, NULL, op->arg);
    } else {
        op->cb(0, &read, op->arg);
    }
    for (i = 0; i < read.count; ++i)
        rl_blob_release(read.events[i].frame);
    free(read.events);
out:
    free(op);
}

static void read_ring(struct redis_bus *bus, const char *user_id, int64_t after_id, size_t max, rl_bus_read_cb cb,
                      void *arg, int internal)
{
    char counter[KEY_MAX], ring[KEY_MAX], after[24], count[24], age[24], ttl[24], budget[24];
    const char *argv[7];
    size_t lens[7], i;
    struct read_op *op = malloc(sizeof(*op));
    struct deferred *d;

    /* What this node published before the read is in the ring when the read runs. */
    send_events(bus);
    if (op == NULL || event_keys(user_id, counter, ring) != 0)
        goto fail;
    *op = (struct read_op){bus, cb, arg, internal};
    snprintf(after, sizeof(after), "%lld", (long long)after_id);
    /* At least one: LIMIT 0 0 would answer nothing, which the script takes for a gap. */
    snprintf(count, sizeof(count), "%zu", max == 0 ? 1 : max < READ_MAX ? max : READ_MAX);
    snprintf(age, sizeof(age), "%lld", (long long)bus->config.max_age_ms);
    snprintf(ttl, sizeof(ttl), "%lld", (long long)bus->idle_ttl_ms);
    snprintf(budget, sizeof(budget), "%d", READ_BYTES);
    argv[0] = counter, argv[1] = ring, argv[2] = after, argv[3] = count;
    argv[4] = age, argv[5] = ttl, argv[6] = budget;
    for (i = 0; i < 7; ++i)
        lens[i] = strlen(argv[i]);
    if (rl_redis_eval(bus->cmd, &rbus_read_script, 2, 7, argv, lens, on_read_reply, op) == 0)
        return;
fail:
    free(op);
    d = rbus_defer(bus, DEFER_READ, arg);
    d->read_cb = cb;
    d->value = internal;
}

void redis_read(rl_bus_t *super, const char *user_id, int64_t after_id, size_t max, rl_bus_read_cb cb, void *arg)
{
    read_ring((void *)super, user_id, after_id, max, cb, arg, 0);
}

static void drop_held(struct listener *l)
{
    size_t i;

    for (i = 0; i < l->nheld; ++i)
        rl_blob_release(l->held[i].frame);
    l->nheld = 0;
}

void rbus_listener_free(void *p)
{
    struct listener *l = p;

    drop_held(l);
    free(l->held);
    free(l);
}

static struct listener *listener_of(struct redis_bus *bus, const char *user_id, uint64_t gen)
{
    struct listener *l = rl_strmap_get(bus->users, user_id);

    return l != NULL && l->gen == gen ? l : NULL;
}

static struct listener *hand_over(struct redis_bus *bus, const char *user_id, uint64_t gen, int64_t id,
                                  rl_blob_t *frame)
{
    struct listener *l = listener_of(bus, user_id, gen);

    if (l == NULL || (l->delivered >= 0 && id <= l->delivered))
        return l;
    l->delivered = id;
    if (bus->config.handlers.event != NULL)
        bus->config.handlers.event(bus->config.handlers.ctx, user_id, id, frame);
    return listener_of(bus, user_id, gen);
}

static void go_live(struct redis_bus *bus, const char *user_id, struct listener *l)
{
    rl_bus_event_t *held = l->held;
    uint64_t gen = l->gen;
    size_t i, n = l->nheld;

    if (l->overflowed) {
        /* Too much came meanwhile to hold: read the ring once more instead. */
        l->overflowed = 0;
        drop_held(l);
        rbus_catch_up(bus, user_id, l);
        return;
    }
    l->live = 1;
    l->held = NULL;
    l->nheld = 0;
    for (i = 0; i < n; ++i) {
        if (l != NULL)
            l = hand_over(bus, user_id, gen, held[i].id, held[i].frame);
        rl_blob_release(held[i].frame);
    }
    free(held);
}

static void on_caught_up(int result, const rl_bus_read_t *read, void *arg)
{
    struct listen_op *op = arg;
    struct listener *l = op->bus->closing ? NULL : listener_of(op->bus, op->name, op->gen);
    size_t i;

    if (l == NULL)
        goto out;
    l->reading = 0;
    if (result != 0 || read->gap || read->count == 0) {
        /* Nothing (more) to catch up, or the ring cannot say: a stream notices a gap by the next id. */
        go_live(op->bus, op->name, l);
        goto out;
    }
    for (i = 0; i < read->count && l != NULL; ++i)
        l = hand_over(op->bus, op->name, op->gen, read->events[i].id, read->events[i].frame);
    if (l != NULL)
        rbus_catch_up(op->bus, op->name, l);
out:
    free(op);
}

/* Reads what followed the last event delivered, once the mark is known and the subscription confirmed. */
void rbus_catch_up(struct redis_bus *bus, const char *user_id, struct listener *l)
{
    struct listen_op *op;

    if (l->live || l->reading || !l->marked || !l->subscribed)
        return;
    if (l->delivered < 0 || (op = rbus_listen_op_new(bus, user_id, l->gen)) == NULL) {
        go_live(bus, user_id, l);
        return;
    }
    l->reading = 1;
    read_ring(bus, user_id, l->delivered, READ_MAX, on_caught_up, op, 1);
}

static void on_marked(int result, const rl_bus_read_t *read, void *arg)
{
    struct listen_op *op = arg;
    struct listener *l = op->bus->closing ? NULL : listener_of(op->bus, op->name, op->gen);

    if (l != NULL) {
        l->marked = 1;
        l->delivered = result == 0 ? read->newest : -1;
        rbus_catch_up(op->bus, op->name, l);
    }
    free(op);
}

void redis_listen(rl_bus_t *super, const char *user_id, int on)
{
    struct redis_bus *bus = (void *)super;
    struct listener *l = rl_strmap_get(bus->users, user_id);
    struct listen_op *op;

    if (!on) {
        if (l != NULL && --l->count == 0) {
            rbus_listener_free(rl_strmap_remove(bus->users, user_id));
            rbus_subscription(bus, "UNSUBSCRIBE", bus->events_channel, user_id);
        }
        return;
    }
    if (l != NULL) {
        ++l->count;
        return;
    }
    if ((l = calloc(1, sizeof(*l))) == NULL || rl_strmap_put(bus->users, user_id, l) != 0) {
        free(l);
        rl_log_warn("redis bus: too many users listened to; one is not followed");
        return;
    }
    l->count = 1;
    l->gen = ++bus->listeners;
    l->delivered = -1;
    if ((op = rbus_listen_op_new(bus, user_id, l->gen)) != NULL)
        read_ring(bus, user_id, 0, 1, on_marked, op, 1);
    else
        l->marked = 1;
    rbus_subscription(bus, "SUBSCRIBE", bus->events_channel, user_id);
}

void rbus_on_event_message(struct redis_bus *bus, const char *user_id, const redisReply *payload)
{
    struct listener *l = rl_strmap_get(bus->users, user_id);
    int64_t id = -1;
    rl_blob_t *frame;

    /* A message sent before an UNSUBSCRIBE took effect. */
    if (l == NULL)
        return;
    /* The record is built once here, when the event reaches this node, and shared by all its streams. */
    if ((frame = event_frame(payload->str, payload->len, &id)) == NULL) {
        rl_log_warn("redis bus: an unreadable event for a user");
        return;
    }
    if (l->live) {
        hand_over(bus, user_id, l->gen, id, frame);
    } else if (l->held == NULL && (l->held = calloc(CATCH_UP_HELD, sizeof(*l->held))) == NULL) {
        l->overflowed = 1;
    } else if (l->nheld == CATCH_UP_HELD) {
        drop_held(l);
        l->overflowed = 1;
    } else {
        l->held[l->nheld].id = id;
        l->held[l->nheld++].frame = rl_blob_retain(frame);
    }
    rl_blob_release(frame);
}
