/*
 * The Redis bus's rate buckets and leases (docs/internals/bus.md, "Rate
 * buckets"): each node's lease of a share of a bucket, the outage slices
 * served alone while Redis is away, the settlement that renews and returns
 * the shares, named leases, and this node saying it is live (the shares
 * are sized by how many nodes are).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus/bus_redis_internal.h"
#include "common/error.h"
#include "common/log.h"

/*
 * Rate buckets, exact across nodes (docs/internals/bus.md, "Rate buckets").
 * A bucket is a hash: "tokens" and "ms", the reserve (what no node holds)
 * and when it was last refilled, by Redis's clock; and one field per node
 * that leases a share of it, "h:<node>" = "<size> <expires ms>". A share of
 * size s is a bucket of its own on its node: s tokens of the capacity and
 * s / capacity of the refill; the reserve has the rest of both. So the
 * shares and the reserve together never hold more than the capacity nor
 * refill faster than the rate, however many nodes take from them. A share
 * whose lease ran out (its node died or stopped renewing) goes back to the
 * reserve empty: what it held is lost, never granted twice. It goes back
 * when its lease ran out, not when a script next reads the bucket: the
 * reserve refills up to each lapse with the room it had, then with the
 * lapsed share's room as well (else a node dead for longer than its lease
 * leaves its users' buckets empty on the others). A missing bucket
 * is a full reserve; the key expires once every lease ran out and the
 * reserve would be full. Live nodes are KEYS[#KEYS], a sorted set of node ->
 * when it lapses (the node script).
 */
/* clang-format off */
#define LUA_BUCKET                                                                                                     \
    "local t = redis.call('TIME')\n"                                                                                   \
    "local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000\n"                                                      \
    "local live = redis.call('ZCOUNT', KEYS[#KEYS], '(' .. string.format('%.17g', now), '+inf')\n"                     \
    "local function fmt(x) return string.format('%.17g', x) end\n"                                                     \
    "local function load(key, capacity, rate)\n"                                                                       \
    "  local all = redis.call('HGETALL', key)\n"                                                                       \
    "  local b = {leases = {}, held = 0}\n"                                                                            \
    "  for i = 1, #all, 2 do\n"                                                                                        \
    "    local f, v = all[i], all[i + 1]\n"                                                                            \
    "    if f == 'tokens' then b.tokens = tonumber(v)\n"                                                               \
    "    elseif f == 'ms' then b.at = tonumber(v)\n"                                                                   \
    "    else\n"                                                                                                       \
    "      local size, expires = string.match(v, '^(%S+) (%S+)$')\n"                                                   \
    "      b.leases[f] = {tonumber(size), tonumber(expires)}\n"                                                        \
    "      b.held = b.held + tonumber(size)\n"                                                                         \
    "    end\n"                                                                                                        \
    "  end\n"                                                                                                          \
    "  if b.tokens == nil or b.at == nil then b.tokens, b.at = capacity - b.held, now end\n"                           \
    "  local function refill(to)\n"                                                                                    \
    "    if to <= b.at then return end\n"                                                                              \
    "    local room = capacity - b.held\n"                                                                             \
    "    if b.tokens < room and capacity > 0 then\n"                                                                   \
    "      b.tokens = math.min(room, b.tokens + (to - b.at) / 1000 * rate * room / capacity)\n"                        \
    "    end\n"                                                                                                        \
    "    b.at = to\n"                                                                                                  \
    "  end\n"                                                                                                          \
    "  local lapsed = {}\n"                                                                                            \
    "  for f, l in pairs(b.leases) do\n"                                                                               \
    "    if l[2] <= now then lapsed[#lapsed + 1] = {f, l[1], l[2]} end\n"                                              \
    "  end\n"                                                                                                          \
    "  table.sort(lapsed, function(x, y) return x[3] < y[3] end)\n"                                                    \
    "  for _, l in ipairs(lapsed) do\n"                                                                                \
    "    refill(l[3])\n"                                                                                               \
    "    redis.call('HDEL', key, l[1])\n"                                                                              \
    "    b.held = b.held - l[2]\n"                                                                                     \
    "    b.leases[l[1]] = nil\n"                                                                                       \
    "  end\n"                                                                                                          \
    "  refill(now)\n"                                                                                                  \
    "  return b\n"                                                                                                     \
    "end\n"                                                                                                            \
    "local function save(key, b, capacity, rate)\n"                                                                    \
    "  redis.call('HSET', key, 'tokens', fmt(b.tokens), 'ms', fmt(b.at))\n"                                            \
    "  local last = now\n"                                                                                             \
    "  for _, l in pairs(b.leases) do if l[2] > last then last = l[2] end end\n"                                       \
    "  local ttl = 86400000\n"                                                                                         \
    "  if rate > 0 then ttl = math.ceil(last - now + (capacity - b.tokens) / rate * 1000) + 1000 end\n"                \
    "  redis.call('PEXPIRE', key, ttl)\n"                                                                              \
    "end\n"                                                                                                            \
    "local function share_size(capacity, b)\n"                                                                         \
    "  local size = capacity\n"                                                                                        \
    "  if live > 1 then size = math.max(1, math.floor(capacity / (4 * live))) end\n"                                   \
    "  return math.min(size, capacity - b.held)\n"                                                                     \
    "end\n"
/* clang-format on */

/*
 * A node's lease of a share, asked when its share is empty (or it has
 * none). KEYS: the bucket, the live nodes. ARGV: capacity, refill per
 * second, the node's field, what its share still holds, the lease's
 * lifetime (ms). "" for what the share holds while Redis has a lease of
 * this node is the node restarted (or back from an outage) without knowing
 * it: the old share goes back to the reserve as if full, forgiven as what
 * a node granted alone in an outage is. The node's old
 * lease ends, a new one begins: the share's size (the whole bucket for a
 * node alone, else a quarter of the bucket's part per live node, at least a
 * token, within what no other node holds; 0 when less than a token is
 * free), filled from the reserve as far as it holds. Answers {size, level,
 * reserve, held by every node, live nodes}.
 */
rl_redis_script_t rbus_lease_bucket_script = {
    LUA_BUCKET "local capacity, rate, field, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[5])\n"
               "local b = load(KEYS[1], capacity, rate)\n"
               "local mine = b.leases[field]\n"
               "if mine then\n"
               "  local back = tonumber(ARGV[4]) or mine[1]\n"
               "  b.tokens = b.tokens + math.min(back, mine[1])\n"
               "  b.held = b.held - mine[1]\n"
               "  b.leases[field] = nil\n"
               "  redis.call('HDEL', KEYS[1], field)\n"
               "end\n"
               "local size, level = share_size(capacity, b), 0\n"
               "if size >= 1 then\n"
               "  if b.tokens > 0 then level = math.min(size, b.tokens) end\n"
               "  b.tokens = b.tokens - level\n"
               "  b.held = b.held + size\n"
               "  b.leases[field] = {size, now + ttl}\n"
               "  redis.call('HSET', KEYS[1], field, fmt(size) .. ' ' .. fmt(now + ttl))\n"
               "else\n"
               "  size = 0\n"
               "end\n"
               "save(KEYS[1], b, capacity, rate)\n"
               "return {fmt(size), fmt(level), fmt(b.tokens), fmt(b.held), live}\n"};

/*
 * A node's renewals and returns, for every bucket it holds a share of (up
 * to 256 a call). KEYS: the buckets, then the live nodes. ARGV: the node's
 * field, the lease's lifetime (ms), then for each bucket capacity, refill
 * per second, "r" (renew) or "x" (return), and what the share holds. A
 * return gives the share back to the reserve. A renewal extends the lease
 * and resizes the share to the number of live nodes now: a smaller share
 * gives what it holds above its new size back to the reserve, a larger one
 * takes from the reserve what the reserve can no longer keep. Answers the
 * live nodes, then for each bucket {size (-1: the lease had run out), the
 * change to the share's level, reserve, held by every node}.
 */
rl_redis_script_t rbus_keep_buckets_script = {
    LUA_BUCKET "local field, ttl = ARGV[1], tonumber(ARGV[2])\n"
               "local out = {live}\n"
               "for k = 1, #KEYS - 1 do\n"
               "  local capacity, rate = tonumber(ARGV[4 * k - 1]), tonumber(ARGV[4 * k])\n"
               "  local op, level = ARGV[4 * k + 1], tonumber(ARGV[4 * k + 2])\n"
               "  local b = load(KEYS[k], capacity, rate)\n"
               "  local mine = b.leases[field]\n"
               "  local size, delta = -1, 0\n"
               "  if mine then\n"
               "    b.held = b.held - mine[1]\n"
               "    b.leases[field] = nil\n"
               "    redis.call('HDEL', KEYS[k], field)\n"
               "    size = 0\n"
               "    if op == 'r' then size = share_size(capacity, b) end\n"
               "    if size < 1 then\n"
               "      b.tokens = b.tokens + math.min(level, mine[1])\n"
               "      size = 0\n"
               "    else\n"
               "      if level > size then\n"
               "        delta = size - level\n"
               "        b.tokens = b.tokens - delta\n"
               "      end\n"
               "      local room = capacity - b.held - size\n"
               "      if b.tokens > room then\n"
               "        delta = delta + b.tokens - room\n"
               "        b.tokens = room\n"
               "      end\n"
               "      b.held = b.held + size\n"
               "      b.leases[field] = {size, now + ttl}\n"
               "      redis.call('HSET', KEYS[k], field, fmt(size) .. ' ' .. fmt(now + ttl))\n"
               "    end\n"
               "  end\n"
               "  save(KEYS[k], b, capacity, rate)\n"
               "  out[#out + 1] = fmt(size)\n"
               "  out[#out + 1] = fmt(delta)\n"
               "  out[#out + 1] = fmt(b.tokens)\n"
               "  out[#out + 1] = fmt(b.held)\n"
               "end\n"
               "return out\n"};

/*
 * KEYS: the live nodes. ARGV: the node, how long it stays live unless it
 * says so again (ms), "add" or "remove". Answers how many nodes are live.
 */
rl_redis_script_t rbus_node_script = {
    LUA_NOW "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now))\n"
            "if ARGV[3] == 'add' then\n"
            "  redis.call('ZADD', KEYS[1], string.format('%d', now + tonumber(ARGV[2])), ARGV[1])\n"
            "  redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
            "else\n"
            "  redis.call('ZREM', KEYS[1], ARGV[1])\n"
            "end\n"
            "return redis.call('ZCARD', KEYS[1])\n"};

/* KEYS: the lease. ARGV: holder, lifetime (ms). 1 when holder holds it now. */
rl_redis_script_t rbus_lease_script = {"if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end\n"
                                       "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
                                       "  redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
                                       "  return 1\n"
                                       "end\n"
                                       "return 0\n"};

static const char NODES_KEY[] = "relay:nodes";

struct waiter {
    struct waiter *next;
    rl_bus_take_cb cb;
    void *arg;
};

/* Where a share's lease stands. */
enum share_state {
    SHARE_NONE,    /* no lease: a take asks Redis (or is refused until quiet_until_ms) */
    SHARE_LEASING, /* a lease call is in flight: takes wait for it */
    SHARE_LEASED,  /* the share may grant until expires_ms */
    SHARE_ALONE,   /* the outage slice: Redis is away, the share grants from this node's part of the bucket */
};

/*
 * A rate bucket as this node knows it: its lease of a share of the bucket
 * (a bucket of its own: size tokens of the capacity, size / capacity of the
 * refill), and what the last answer said of the reserve (what no node
 * holds). While Redis is away, the share is an outage slice instead (alone).
 */
struct share {
    double capacity, rate;
    enum share_state state;
    double size;            /* of the capacity */
    double level;           /* tokens in the share as of at_ms; below 0 when owed */
    int64_t at_ms;          /* monotonic, as every time here */
    int64_t expires_ms;     /* the lease, by this node's clock: before Redis's (LEASE_MARGIN_MS) */
    uint64_t generation;    /* of the lease: a renewal's answer applies to the lease it renewed */
    double reserve;         /* the reserve's level as of reserve_ms */
    double reserve_size;    /* its part of the capacity (and of the refill) */
    int64_t reserve_ms;     /* 0: never heard of */
    int64_t quiet_until_ms; /* no share was to be had: refused here until then */
    int64_t touched_ms;     /* the last take */
    int keeping;            /* a renewal is in flight (besides the state: a take may lease anew meanwhile) */
    struct waiter *waiters; /* in order */
    struct waiter **waiters_tail;
    size_t nwaiters;
    h2o_linklist_t link; /* in the bus's shares_leased or shares_idle (share_file) */
    int64_t filed_ms;    /* when it was put in that list */
    char bucket[];       /* its key in the bus's shares */
};

int rbus_forget_share(const char *bucket, void *value, void *arg)
{
    struct share *s = value;

    if (s->state != SHARE_LEASING)
        s->state = SHARE_NONE;
    s->reserve = s->reserve_size = 0;
    s->reserve_ms = s->quiet_until_ms = 0;
    return 0;
}

/* ---- buckets and leases ---------------------------------------------------------------------- */

/*
 * Rate buckets, exact across nodes (docs/internals/bus.md, "Rate buckets").
 * A node serves a bucket from its lease of a share of it (a bucket of its
 * own, refilled by this node's clock), inside the call; when the share is
 * empty and the reserve may hold a token, a take costs one call of the lease
 * script, which gives back what the share held and leases a new one. Every
 * keep interval one call renews the leases in use (resized to the number of
 * live nodes) and returns the idle ones. What the shares and the reserve
 * hold together never exceeds the bucket, so no owner gets more than its
 * capacity and refill however many nodes serve it. While Redis is away a
 * node serves each bucket from an outage slice, its part (1 / live nodes)
 * of the bucket, for the outage grace.
 */

static int64_t mono_now(void)
{
    return rbus_mono_ms();
}

static double slice_rate(const struct share *s, double size)
{
    return s->capacity > 0 ? s->rate * size / s->capacity : 0;
}

/* The share refilled to now by its part of the rate, up to its size. */
/* The share grants from what it holds: a lease from Redis or, while Redis is away, the outage slice. */
static int share_holds(const struct share *s)
{
    return s->state == SHARE_LEASED || s->state == SHARE_ALONE;
}

static void share_refill(struct share *s, int64_t now)
{
    if (now > s->at_ms) {
        if (s->level < s->size) {
            s->level += (double)(now - s->at_ms) / 1000.0 * slice_rate(s, s->size);
            if (s->level > s->size)
                s->level = s->size;
        }
        s->at_ms = now;
    }
}

/* The reserve as of now, as far as this node can tell (other nodes may have taken from it). */
static double reserve_at(const struct share *s, int64_t now)
{
    double level = s->reserve;

    if (s->reserve_ms > 0 && now > s->reserve_ms && level < s->reserve_size) {
        level += (double)(now - s->reserve_ms) / 1000.0 * slice_rate(s, s->reserve_size);
        if (level > s->reserve_size)
            level = s->reserve_size;
    }
    return level;
}

/* What a client is told is left: this node's share and the reserve (another node's share is within one lease). */
static double seen(const struct share *s, int64_t now)
{
    return (share_holds(s) ? s->level : 0) + reserve_at(s, now);
}

/*
 * How full the reserve must be before an empty share asks it again: a
 * share's worth (or all it can hold), so that a client above its rate costs
 * one call per share's worth of refill rather than one per token.
 */
static double ask_threshold(const struct share *s)
{
    double want = share_holds(s) && s->size > 1 ? s->size : 1;

    return want < s->reserve_size ? want : s->reserve_size;
}

static int worth_asking(const struct share *s, int64_t now)
{
    return s->reserve_size >= 1 && reserve_at(s, now) >= ask_threshold(s);
}

/*
 * The level reported with a refusal: below one by the refill of the time
 * until this node grants again (its share holds a token, or the reserve is
 * worth asking), so that Retry-After says when to come back.
 */
static double refused_level(const struct share *s, int64_t now)
{
    double wait = -1, level = seen(s, now);

    if (share_holds(s) && slice_rate(s, s->size) > 0)
        wait = (1 - s->level) / slice_rate(s, s->size);
    if (s->reserve_size >= 1 && slice_rate(s, s->reserve_size) > 0) {
        double w = (ask_threshold(s) - reserve_at(s, now)) / slice_rate(s, s->reserve_size);
        if (w < 0)
            w = 0;
        if (wait < 0 || w < wait)
            wait = w;
    }
    if (wait >= 0 && s->rate > 0 && 1 - s->rate * wait < level)
        level = 1 - s->rate * wait;
    return level;
}

/* Takes one token from the share this node holds, inside the call. */
static void take_here(struct share *s, int64_t now, rl_bus_take_cb cb, void *arg)
{
    if (share_holds(s))
        share_refill(s, now);
    if (share_holds(s) && s->level >= 1) {
        s->level -= 1;
        cb(0, seen(s, now), arg);
    } else {
        cb(RL_E_RATE_LIMITED, refused_level(s, now), arg);
    }
}

/* Whether Redis has been away for longer than the outage slices may serve. */
static int past_grace(struct redis_bus *bus, int64_t now)
{
    return bus->config.bucket_grace_ms <= 0 || (bus->lost_ms >= 0 && now - bus->lost_ms >= bus->config.bucket_grace_ms);
}

/* Redis was just found away (if it was not already): whether the outage slices may no longer serve. */
static int away_too_long(struct redis_bus *bus)
{
    int64_t now = mono_now();

    if (bus->lost_ms < 0)
        bus->lost_ms = now;
    return past_grace(bus, now);
}

/*
 * Redis is away (or just went) and the grace has not run out. The node
 * serves the bucket alone from its part of it, capacity / N and refill / N
 * for the N live nodes it last heard of, starting from what it knew: its
 * share and its part of the reserve, or a full slice for a bucket it never
 * saw. If Redis is away for every node, they grant no more than the bucket.
 */
static void take_alone(struct redis_bus *bus, struct share *s, int64_t now, rl_bus_take_cb cb, void *arg)
{
    if (s->state != SHARE_ALONE) {
        double n = bus->nodes > 1 ? bus->nodes : 1, size = s->capacity / n, level = size;
        if (share_holds(s) || s->reserve_ms > 0) {
            if (share_holds(s)) {
                share_refill(s, now);
                level = s->level + reserve_at(s, now) / n;
            } else {
                level = reserve_at(s, now) / n;
            }
            if (level > size)
                level = size;
        }
        s->state = SHARE_ALONE;
        s->size = size;
        s->level = level;
        s->at_ms = now;
        s->expires_ms = INT64_MAX;
        s->reserve = s->reserve_size = 0;
        s->reserve_ms = 0;
    }
    take_here(s, now, cb, arg);
}

/* Puts a share in the list the settlement looks at for it: the leased ones (not outage slices), or the others. */
static void share_file(struct redis_bus *bus, struct share *s, int64_t now)
{
    if (h2o_linklist_is_linked(&s->link))
        h2o_linklist_unlink(&s->link);
    s->filed_ms = now;
    h2o_linklist_insert(s->state == SHARE_LEASED ? &bus->shares_leased : &bus->shares_idle, &s->link);
}

static struct share *share_of(struct redis_bus *bus, const char *bucket, double capacity, double refill_per_s)
{
    struct share *s = rl_strmap_get(bus->shares, bucket);
    size_t len = strlen(bucket);

    if (s != NULL)
        return s;
    if ((s = calloc(1, sizeof(*s) + len + 1)) == NULL)
        return NULL;
    memcpy(s->bucket, bucket, len + 1);
    if (rl_strmap_put(bus->shares, bucket, s) != 0) {
        free(s);
        return NULL;
    }
    s->capacity = capacity;
    s->rate = refill_per_s;
    s->waiters_tail = &s->waiters;
    share_file(bus, s, mono_now());
    return s;
}

void rbus_share_free(void *value)
{
    struct share *s = value;

    if (h2o_linklist_is_linked(&s->link))
        h2o_linklist_unlink(&s->link);

    while (s->waiters != NULL) {
        struct waiter *w = s->waiters;
        s->waiters = w->next;
        free(w);
    }
    free(s);
}

static int wait_for_lease(struct share *s, rl_bus_take_cb cb, void *arg)
{
    struct waiter *w;

    if (s->nwaiters >= WAITERS_MAX || (w = malloc(sizeof(*w))) == NULL)
        return -1;
    *w = (struct waiter){NULL, cb, arg};
    *s->waiters_tail = w;
    s->waiters_tail = &w->next;
    s->nwaiters++;
    return 0;
}

struct lease_call {
    struct redis_bus *bus;
    int64_t sent_ms; /* the answer is the bucket as of (a little after) then: counting from then is the safe side */
    int had_share;   /* the share given back, for an outage slice to start from when no answer comes */
    double back;
    char key[]; /* the bucket */
};

static void parse_reserve(struct share *s, const redisReply *reserve, const redisReply *held, int64_t sent_ms)
{
    s->reserve = strtod(reserve->str, NULL);
    s->reserve_size = s->capacity - strtod(held->str, NULL);
    s->reserve_ms = sent_ms;
}

static void on_bucket_leased(redisReply *reply, void *arg)
{
    struct lease_call *op = arg;
    struct redis_bus *bus = op->bus;
    struct share *s;
    struct waiter *w;
    int64_t now = mono_now();
    size_t i;
    int answered, alone;

    if (bus->closing || (s = rl_strmap_get(bus->shares, op->key)) == NULL)
        goto out;
    answered = reply != NULL && reply->type == REDIS_REPLY_ARRAY && reply->elements == 5 &&
               reply->element[4]->type == REDIS_REPLY_INTEGER;
    for (i = 0; answered && i < 4; ++i)
        answered = reply->element[i]->type == REDIS_REPLY_STRING;
    s->state = SHARE_NONE;
    if (answered) {
        double size = strtod(reply->element[0]->str, NULL);
        bus->nodes = (int)reply->element[4]->integer;
        parse_reserve(s, reply->element[2], reply->element[3], op->sent_ms);
        if (size >= 1) {
            s->state = SHARE_LEASED;
            s->size = size;
            s->level = strtod(reply->element[1]->str, NULL);
            s->at_ms = op->sent_ms;
            s->expires_ms = op->sent_ms + LEASE_MS;
            share_file(op->bus, s, now);
        } else {
            /* Every other token of capacity is leased: their renewals may shrink them within a keep interval. */
            s->quiet_until_ms = now + (s->reserve_size >= 1 ? 0 : bus->config.bucket_settle_ms);
        }
    } else {
        if (reply != NULL && reply->type == REDIS_REPLY_ERROR)
            rl_log_warn("redis bus: leasing a rate bucket failed: %s", reply->str);
        if (op->had_share) {
            s->state = SHARE_LEASED;
            s->level = op->back;
            s->at_ms = op->sent_ms;
            share_file(op->bus, s, now);
        }
    }
    /* The waiters' callbacks may take again (from this bucket too): the list is detached first. */
    w = s->waiters;
    s->waiters = NULL;
    s->waiters_tail = &s->waiters;
    s->nwaiters = 0;
    /*
     * The connection went while this waited (or a Redis going down answered
     * an error): as if Redis had been away already, within the grace. Only
     * a lost connection starts the grace's clock.
     */
    alone = !answered && (reply == NULL ? !away_too_long(bus) : !past_grace(bus, now));
    while (w != NULL) {
        struct waiter *next = w->next;
        if (answered)
            take_here(s, now, w->cb, w->arg);
        else if (alone)
            take_alone(bus, s, now, w->cb, w->arg);
        else
            w->cb(RL_E_UNAVAILABLE, 0, w->arg);
        free(w);
        w = next;
    }
out:
    free(op);
}

/* Gives back what the share holds and leases a new one; cb is answered with the call's answer. */
static void lease_bucket(struct redis_bus *bus, struct share *s, const char *bucket, int64_t now, rl_bus_take_cb cb,
                         void *arg)
{
    char name[KEY_MAX], cap[32], rate[32], back[32], ttl[24];
    const char *argv[7] = {name, NODES_KEY, cap, rate, bus->node_field, back, ttl};
    size_t lens[7], i, len = strlen(bucket);
    struct lease_call *op;

    if ((op = malloc(sizeof(*op) + len + 1)) == NULL || rbus_key(name, sizeof(name), "relay:bucket:", bucket) < 0) {
        free(op);
        cb(RL_E_UNAVAILABLE, 0, arg);
        return;
    }
    if (wait_for_lease(s, cb, arg) != 0) {
        free(op);
        cb(RL_E_UNAVAILABLE, 0, arg);
        return;
    }
    op->bus = bus;
    op->sent_ms = now;
    op->had_share = share_holds(s);
    memcpy(op->key, bucket, len + 1);
    back[0] = '\0';
    if (share_holds(s)) {
        share_refill(s, now);
        op->back = s->level;
        snprintf(back, sizeof(back), "%.17g", s->level);
    }
    snprintf(cap, sizeof(cap), "%.17g", s->capacity);
    snprintf(rate, sizeof(rate), "%.17g", s->rate);
    snprintf(ttl, sizeof(ttl), "%d", LEASE_MS + LEASE_MARGIN_MS);
    for (i = 0; i < 7; ++i)
        lens[i] = strlen(argv[i]);
    /* What the share held is Redis's again from here: nothing is granted from it until the answer. */
    s->state = SHARE_LEASING;
    s->generation++;
    if (rl_redis_eval(bus->cmd, &rbus_lease_bucket_script, 2, 7, argv, lens, on_bucket_leased, op) != 0)
        on_bucket_leased(NULL, op);
}

void redis_take(rl_bus_t *super, const char *bucket, double capacity, double refill_per_s, int64_t now_ms,
                rl_bus_take_cb cb, void *arg)
{
    struct redis_bus *bus = (void *)super;
    int64_t now = mono_now();
    struct share *s = share_of(bus, bucket, capacity, refill_per_s);

    if (s == NULL) {
        /* As many buckets as this node may keep are live: a new one fails closed, as on the local bus. */
        cb(RL_E_RATE_LIMITED, 0, arg);
        return;
    }
    s->touched_ms = now;
    /* The spec's figures may change with a new version of the relay while the share lives. */
    s->capacity = capacity;
    s->rate = refill_per_s;
    if (!rl_redis_ready(bus->cmd)) {
        if (away_too_long(bus)) {
            rbus_defer(bus, DEFER_TAKE, arg)->take_cb = cb;
            return;
        }
        take_alone(bus, s, now, cb, arg);
        return;
    }
    if (s->state == SHARE_LEASING) {
        if (wait_for_lease(s, cb, arg) != 0)
            cb(RL_E_RATE_LIMITED, refused_level(s, now), arg);
        return;
    }
    if (share_holds(s) && now < s->expires_ms) {
        share_refill(s, now);
        if (s->level >= 1 || !worth_asking(s, now)) {
            take_here(s, now, cb, arg);
            return;
        }
    } else if (!share_holds(s) && now < s->quiet_until_ms) {
        take_here(s, now, cb, arg);
        return;
    }
    lease_bucket(bus, s, bucket, now, cb, arg);
}

/* One call renewing and returning leases: the buckets it carries, in the order of its keys. */
struct keep_op {
    struct redis_bus *bus;
    int64_t sent_ms;
    size_t count;
    char *keys[KEEP_BATCH];
    uint64_t generations[KEEP_BATCH]; /* of each renewed lease; 0 for a return */
    double levels[KEEP_BATCH];        /* what each share held when sent */
};

static void on_kept(redisReply *reply, void *arg)
{
    struct keep_op *op = arg;
    struct redis_bus *bus = op->bus;
    int64_t now = mono_now();
    size_t i, j;
    int answered;

    if (bus->closing)
        goto out;
    answered = reply != NULL && reply->type == REDIS_REPLY_ARRAY && reply->elements == 1 + 4 * op->count &&
               reply->element[0]->type == REDIS_REPLY_INTEGER;
    for (j = 1; answered && j < reply->elements; ++j)
        answered = reply->element[j]->type == REDIS_REPLY_STRING;
    if (reply != NULL && reply->type == REDIS_REPLY_ERROR)
        rl_log_warn("redis bus: renewing rate bucket leases failed: %s", reply->str);
    if (answered)
        bus->nodes = (int)reply->element[0]->integer;
    for (i = 0; i < op->count; ++i) {
        struct share *s = rl_strmap_get(bus->shares, op->keys[i]);
        redisReply **e = answered ? reply->element + 1 + 4 * i : NULL;
        if (s == NULL)
            continue;
        if (op->generations[i] != 0)
            s->keeping = 0;
        /* No answer: a renewed lease runs out by itself; the next take leases anew. */
        if (e == NULL || s->state == SHARE_LEASING || s->state == SHARE_ALONE)
            continue;
        if (op->generations[i] != 0 && s->state == SHARE_LEASED && s->generation == op->generations[i]) {
            double size = strtod(e[0]->str, NULL);
            if (size >= 1) {
                /* What the share granted since is its own: the change applies to its level now. */
                share_refill(s, now);
                s->size = size;
                s->level += strtod(e[1]->str, NULL);
                if (s->level > s->size)
                    s->level = s->size;
                s->expires_ms = op->sent_ms + LEASE_MS;
            } else {
                /* The lease had run out in Redis: what the share held is lost (never granted twice). */
                s->state = SHARE_NONE;
            }
        }
        if (s->state == SHARE_LEASED || op->generations[i] == 0)
            parse_reserve(s, e[2], e[3], op->sent_ms);
    }
out:
    for (i = 0; i < op->count; ++i)
        free(op->keys[i]);
    free(op);
}

static void send_keep(struct redis_bus *bus, struct keep_op *op)
{
    const char **argv = malloc((2 * op->count + 3 + 4 * op->count) * sizeof(*argv));
    size_t *lens = malloc((2 * op->count + 3 + 4 * op->count) * sizeof(*lens));
    char(*numbers)[32] = malloc(op->count * 3 * sizeof(*numbers));
    char(*names)[KEY_MAX] = malloc(op->count * sizeof(*names));
    char ttl[24];
    size_t i, n = 0;

    if (argv == NULL || lens == NULL || numbers == NULL || names == NULL)
        goto fail;
    for (i = 0; i < op->count; ++i) {
        rbus_key(names[i], KEY_MAX, "relay:bucket:", op->keys[i]);
        argv[n++] = names[i];
    }
    argv[n++] = NODES_KEY;
    argv[n++] = bus->node_field;
    snprintf(ttl, sizeof(ttl), "%d", LEASE_MS + LEASE_MARGIN_MS);
    argv[n++] = ttl;
    for (i = 0; i < op->count; ++i) {
        struct share *s = rl_strmap_get(bus->shares, op->keys[i]);
        snprintf(numbers[3 * i], 32, "%.17g", s->capacity);
        snprintf(numbers[3 * i + 1], 32, "%.17g", s->rate);
        snprintf(numbers[3 * i + 2], 32, "%.17g", op->levels[i]);
        argv[n++] = numbers[3 * i];
        argv[n++] = numbers[3 * i + 1];
        argv[n++] = op->generations[i] != 0 ? "r" : "x";
        argv[n++] = numbers[3 * i + 2];
    }
    for (i = 0; i < n; ++i)
        lens[i] = strlen(argv[i]);
    op->sent_ms = mono_now();
    if (rl_redis_eval(bus->cmd, &rbus_keep_buckets_script, (int)op->count + 1, (int)n, argv, lens, on_kept, op) == 0)
        op = NULL;
fail:
    free(argv);
    free(lens);
    free(numbers);
    free(names);
    if (op != NULL)
        on_kept(NULL, op);
}

struct keeping {
    struct redis_bus *bus;
    struct keep_op *op;
    int64_t now;
    int retiring; /* shutdown: every lease is returned */
};

/*
 * Visits one bucket: renews a lease in use that runs out within half a
 * lease, returns one idle for a lease (or run out), forgets a bucket idle
 * for long without a lease. 1 removes it.
 */
static int keep_share(const char *bucket, void *value, void *arg)
{
    struct keeping *st = arg;
    struct share *s = value;
    int renew;

    if (s->state == SHARE_LEASING || s->keeping || s->state == SHARE_ALONE)
        return 0;
    if (s->state == SHARE_NONE)
        return st->now - s->touched_ms > SHARE_IDLE_MS;
    renew = !st->retiring && st->now - s->touched_ms < LEASE_MS && st->now < s->expires_ms;
    if (renew && s->expires_ms - st->now > LEASE_MS / 2)
        return 0;
    if (strlen(bucket) + sizeof("relay:bucket:") > KEY_MAX)
        return 0;
    if (st->op == NULL) {
        if ((st->op = calloc(1, sizeof(*st->op))) == NULL)
            return 0;
        st->op->bus = st->bus;
    }
    if ((st->op->keys[st->op->count] = strdup(bucket)) == NULL)
        return 0;
    share_refill(s, st->now);
    st->op->levels[st->op->count] = s->level;
    st->op->generations[st->op->count] = renew ? s->generation : 0;
    st->op->count++;
    if (renew) {
        s->keeping = 1;
    } else {
        /* Given back: the reserve is Redis's to hand to whichever node asks next. */
        s->state = SHARE_NONE;
    }
    if (st->op->count == KEEP_BATCH) {
        send_keep(st->bus, st->op);
        st->op = NULL;
    }
    return 0;
}

/*
 * The leased shares, each renewed or returned when due (keep_share); then
 * the others filed more than SHARE_IDLE_MS ago: each forgotten if idle that
 * long, else filed again (a share leased meanwhile goes to the leased).
 */
static void settle_shares(struct keeping *st)
{
    struct redis_bus *bus = st->bus;
    h2o_linklist_t *node, *next;
    struct share *s;

    for (node = bus->shares_leased.next; node != &bus->shares_leased; node = next) {
        next = node->next;
        s = H2O_STRUCT_FROM_MEMBER(struct share, link, node);
        if (s->state == SHARE_LEASED)
            keep_share(s->bucket, s, st);
        if (s->state != SHARE_LEASED)
            share_file(bus, s, st->now);
    }
    while (!h2o_linklist_is_empty(&bus->shares_idle)) {
        s = H2O_STRUCT_FROM_MEMBER(struct share, link, bus->shares_idle.next);
        if (st->now - s->filed_ms <= SHARE_IDLE_MS)
            break;
        if (s->state == SHARE_NONE && keep_share(s->bucket, s, st)) {
            rl_strmap_remove(bus->shares, s->bucket);
            rbus_share_free(s);
        } else {
            share_file(bus, s, st->now);
        }
    }
}

void rbus_on_settle_tick(h2o_timeout_entry_t *entry)
{
    struct redis_bus *bus = H2O_STRUCT_FROM_MEMBER(struct redis_bus, settle, entry);
    struct keeping st = {bus, NULL, mono_now(), 0};

    h2o_timeout_link(bus->loop, rl_redis__loop_timeout(bus->loop, (uint64_t)bus->config.bucket_settle_ms),
                     &bus->settle);
    if (!rl_redis_ready(bus->cmd)) {
        if (bus->lost_ms < 0)
            bus->lost_ms = st.now;
        return;
    }
    settle_shares(&st);
    if (st.op != NULL)
        send_keep(bus, st.op);
}

static void on_node_said(redisReply *reply, void *arg)
{
    struct redis_bus *bus = arg;

    if (!bus->closing && reply != NULL && reply->type == REDIS_REPLY_INTEGER)
        bus->nodes = (int)reply->integer;
}

struct retiring {
    struct redis_bus *bus;
    rl_bus_retired_cb cb;
    void *arg;
};

static void on_retired(redisReply *reply, void *arg)
{
    struct retiring *r = arg;

    r->cb(r->arg);
    free(r);
}

/* Shutdown: every lease returned, then this node no longer counted live (the reply comes after theirs). */
void redis_retire(rl_bus_t *super, rl_bus_retired_cb cb, void *arg)
{
    struct redis_bus *bus = (void *)super;
    struct keeping st = {bus, NULL, mono_now(), 1};
    const char *argv[4] = {NODES_KEY, bus->node_field + 2, "0", "remove"};
    size_t lens[4], i;
    struct retiring *r;

    if (!rl_redis_ready(bus->cmd) || (r = malloc(sizeof(*r))) == NULL) {
        cb(arg);
        return;
    }
    *r = (struct retiring){bus, cb, arg};
    rl_strmap_sweep(bus->shares, keep_share, &st, rbus_share_free);
    if (st.op != NULL)
        send_keep(bus, st.op);
    for (i = 0; i < 4; ++i)
        lens[i] = strlen(argv[i]);
    if (rl_redis_eval(bus->cmd, &rbus_node_script, 1, 4, argv, lens, on_retired, r) != 0) {
        free(r);
        cb(arg);
    }
}

/* Tells Redis this node is live (the shares are sized by how many are), for NODE_TTL_MS. */
void rbus_say_live(struct redis_bus *bus)
{
    char ttl[24];
    const char *argv[4] = {NODES_KEY, bus->node_field + 2, ttl, "add"};
    size_t lens[4], i;

    snprintf(ttl, sizeof(ttl), "%d", NODE_TTL_MS);
    for (i = 0; i < 4; ++i)
        lens[i] = strlen(argv[i]);
    rl_redis_eval(bus->cmd, &rbus_node_script, 1, 4, argv, lens, on_node_said, bus);
}

struct lease_op {
    struct redis_bus *bus;
    rl_bus_lease_cb cb;
    void *arg;
};

static void on_leased(redisReply *reply, void *arg)
{
    struct lease_op *op = arg;

    if (!op->bus->closing) {
        if (reply != NULL && reply->type == REDIS_REPLY_ERROR)
            rl_log_warn("redis bus: taking a lease failed: %s", reply->str);
        op->cb(reply != NULL && reply->type == REDIS_REPLY_INTEGER && reply->integer == 1, op->arg);
    }
    free(op);
}

void redis_lease(rl_bus_t *super, const char *name, const char *holder, int64_t ttl_ms, rl_bus_lease_cb cb, void *arg)
{
    struct redis_bus *bus = (void *)super;
    char lease[KEY_MAX], ttl[24];
    const char *argv[3] = {lease, holder, ttl};
    size_t lens[3], i;
    struct lease_op *op = malloc(sizeof(*op));

    if (op == NULL || rbus_key(lease, sizeof(lease), "relay:lease:", name) < 0 || ttl_ms <= 0)
        goto fail;
    *op = (struct lease_op){bus, cb, arg};
    snprintf(ttl, sizeof(ttl), "%lld", (long long)ttl_ms);
    for (i = 0; i < 3; ++i)
        lens[i] = strlen(argv[i]);
    if (rl_redis_eval(bus->cmd, &rbus_lease_script, 1, 3, argv, lens, on_leased, op) == 0)
        return;
fail:
    free(op);
    rbus_defer(bus, DEFER_LEASE, arg)->lease_cb = cb;
}
