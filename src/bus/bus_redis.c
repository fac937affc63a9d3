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
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus/bus.h"
#include "bus/redis.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/event.h"
#include "common/buf.h"
#include "common/log.h"
#include "common/rand.h"
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

/* ---- the scripts ----------------------------------------------------------------------------- */

/* Redis's clock in milliseconds: ids, rings, buckets and leases follow one clock for every node. */
#define LUA_NOW                                                                                                        \
    "local t = redis.call('TIME')\n"                                                                                   \
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"

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
static rl_redis_script_t publish_script = {
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
static rl_redis_script_t read_script = {
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
static rl_redis_script_t lease_bucket_script = {
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
static rl_redis_script_t keep_buckets_script = {
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
static rl_redis_script_t node_script = {
    LUA_NOW "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now))\n"
            "if ARGV[3] == 'add' then\n"
            "  redis.call('ZADD', KEYS[1], string.format('%d', now + tonumber(ARGV[2])), ARGV[1])\n"
            "  redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
            "else\n"
            "  redis.call('ZREM', KEYS[1], ARGV[1])\n"
            "end\n"
            "return redis.call('ZCARD', KEYS[1])\n"};

/* KEYS: the lease. ARGV: holder, lifetime (ms). 1 when holder holds it now. */
static rl_redis_script_t lease_script = {
    "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end\n"
    "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
    "  redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "  return 1\n"
    "end\n"
    "return 0\n"};

/*
 * Presence: KEYS[1] a hash, installation -> "<seq> <health> <owner>";
 * KEYS[2] a sorted set, installation -> when its lease lapses (Redis ms).
 * Lapsed entries are moved by whichever script comes next to KEYS[1]
 * ":lapsed" (a hash, installation -> its last value), where the lapse script
 * hands each to exactly one node, which tells the user that the agent is
 * offline (its node died: nobody else would). No presence message is sent
 * for them, since every cache lapses them by itself. KEYS[3], where a script
 * has it, numbers the changes; a new sequence starts from the clock, so that
 * numbers keep growing after Redis lost its data. (The lapsed hash's name is
 * made from KEYS[1] rather than passed: Redis Cluster is not supported.)
 */
/* clang-format off */
#define LUA_PRESENCE                                                                                                   \
    LUA_NOW                                                                                                            \
    "local function owner_of(value)\n"                                                                                 \
    "  return value and string.match(value, '^%d+ %S+ (.+)$')\n"                                                       \
    "end\n"                                                                                                            \
    "local function next_seq()\n"                                                                                      \
    "  local seq = redis.call('INCR', KEYS[3])\n"                                                                      \
    "  if seq == 1 then\n"                                                                                             \
    "    seq = now * 1000\n"                                                                                           \
    "    redis.call('SET', KEYS[3], string.format('%d', seq))\n"                                                       \
    "  end\n"                                                                                                          \
    "  return seq\n"                                                                                                   \
    "end\n"                                                                                                            \
    "local lapsed = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', string.format('%d', now), 'LIMIT', 0, 100)\n"         \
    "for _, lapsed_id in ipairs(lapsed) do\n"                                                                          \
    "  local value = redis.call('HGET', KEYS[1], lapsed_id)\n"                                                         \
    "  if value then\n"                                                                                                \
    "    redis.call('HSET', KEYS[1] .. ':lapsed', lapsed_id, value)\n"                                                 \
    "    redis.call('PEXPIRE', KEYS[1] .. ':lapsed', 600000)\n"                                                        \
    "  end\n"                                                                                                          \
    "  redis.call('HDEL', KEYS[1], lapsed_id)\n"                                                                       \
    "  redis.call('ZREM', KEYS[2], lapsed_id)\n"                                                                       \
    "end\n"

/*
 * KEYS: hash, leases, sequence, the installation's retired owners. ARGV:
 * installation, owner, health, lease (ms), channel, mode. "take" (the relay
 * says so: a new socket) replaces another owner, which is retired: an owner
 * once replaced can never set the presence again, so that a late health
 * change of an old socket cannot steal it back. "keep" (a node asserting
 * again what it held before a reconnection) never replaces anyone. Answers
 * {set, the value now}.
 */
static rl_redis_script_t presence_set_script = {
    LUA_PRESENCE
    "local current = redis.call('HGET', KEYS[1], ARGV[1])\n"
    "local owner = owner_of(current)\n"
    "if redis.call('SISMEMBER', KEYS[4], ARGV[2]) == 1 or (ARGV[6] == 'keep' and owner and owner ~= ARGV[2]) then\n"
    "  return {0, current or ''}\n"
    "end\n"
    "if owner and owner ~= ARGV[2] then\n"
    "  redis.call('SADD', KEYS[4], owner)\n"
    "  redis.call('PEXPIRE', KEYS[4], 600000)\n"
    "end\n"
    "local seq = next_seq()\n"
    "local value = string.format('%d', seq) .. ' ' .. ARGV[3] .. ' ' .. ARGV[2]\n"
    "redis.call('HSET', KEYS[1], ARGV[1], value)\n"
    "redis.call('ZADD', KEYS[2], string.format('%d', now + tonumber(ARGV[4])), ARGV[1])\n"
    "redis.call('PUBLISH', ARGV[5], cjson.encode({op = 'set', i = ARGV[1], o = ARGV[2], h = ARGV[3],\n"
    "                                             s = string.format('%d', seq), t = tonumber(ARGV[4])}))\n"
    "return {1, value}\n"};

/*
 * KEYS: hash, leases, sequence. ARGV: installation, owner, channel. The
 * clear's number when owner held it and it is gone, else 0.
 */
static rl_redis_script_t presence_clear_script = {
    LUA_PRESENCE
    "if owner_of(redis.call('HGET', KEYS[1], ARGV[1])) ~= ARGV[2] then return 0 end\n"
    "redis.call('HDEL', KEYS[1], ARGV[1])\n"
    "redis.call('ZREM', KEYS[2], ARGV[1])\n"
    "local seq = next_seq()\n"
    "redis.call('PUBLISH', ARGV[3], cjson.encode({op = 'clear', i = ARGV[1], o = ARGV[2],\n"
    "                                             s = string.format('%d', seq)}))\n"
    "return seq\n"};

/*
 * KEYS: hash, leases, sequence. ARGV: lease (ms), channel, then
 * installation and owner pairs. Answers one number per pair: 1 renewed, 0
 * another owner has it, 2 nobody has it (it lapsed: set it again).
 */
static rl_redis_script_t presence_renew_script = {
    LUA_PRESENCE
    "local renewed, answer = {}, {}\n"
    "for i = 3, #ARGV, 2 do\n"
    "  local owner = owner_of(redis.call('HGET', KEYS[1], ARGV[i]))\n"
    "  if owner == ARGV[i + 1] then\n"
    "    redis.call('ZADD', KEYS[2], string.format('%d', now + tonumber(ARGV[1])), ARGV[i])\n"
    "    renewed[#renewed + 1] = ARGV[i]\n"
    "    renewed[#renewed + 1] = ARGV[i + 1]\n"
    "    answer[#answer + 1] = 1\n"
    "  elseif owner then\n"
    "    answer[#answer + 1] = 0\n"
    "  else\n"
    "    answer[#answer + 1] = 2\n"
    "  end\n"
    "end\n"
    "if #renewed > 0 then\n"
    "  redis.call('PUBLISH', ARGV[2], cjson.encode({op = 'renew', t = tonumber(ARGV[1]), r = renewed}))\n"
    "end\n"
    "return answer\n"};

/* KEYS: hash, leases, sequence. Answers {sequence, then installation, value, ms left, for each live presence}. */
static rl_redis_script_t presence_load_script = {
    LUA_PRESENCE
    "local out = {tonumber(redis.call('GET', KEYS[3]) or '0')}\n"
    "local all = redis.call('HGETALL', KEYS[1])\n"
    "for i = 1, #all, 2 do\n"
    "  local expires = tonumber(redis.call('ZSCORE', KEYS[2], all[i]) or '0')\n"
    "  if expires > now then\n"
    "    out[#out + 1] = all[i]\n"
    "    out[#out + 1] = all[i + 1]\n"
    "    out[#out + 1] = expires - now\n"
    "  end\n"
    "end\n"
    "return out\n"};

/*
 * KEYS: hash, leases, sequence. Takes at most 256 lapsed presences off the
 * lapsed hash and answers those that nobody set again since, each to this
 * node only: {installation, its last value} for each.
 */
static rl_redis_script_t presence_lapse_script = {
    LUA_PRESENCE
    "local lapsed_key = KEYS[1] .. ':lapsed'\n"
    "local ids = redis.call('HKEYS', lapsed_key)\n"
    "local out = {}\n"
    "for i = 1, math.min(#ids, 256) do\n"
    "  local value = redis.call('HGET', lapsed_key, ids[i])\n"
    "  redis.call('HDEL', lapsed_key, ids[i])\n"
    "  if redis.call('HEXISTS', KEYS[1], ids[i]) == 0 then\n"
    "    out[#out + 1] = ids[i]\n"
    "    out[#out + 1] = value\n"
    "  end\n"
    "end\n"
    "return out\n"};
/* clang-format on */

/*
 * KEYS: the topic's counter and log (a list of its last messages, each
 * "<seq> <message>"). ARGV: message, channel, log length (0: the message
 * is not logged), lifetime (ms). A node that just joined reads the log for
 * what was sent between its join and its SUBSCRIBE taking effect
 * (docs/internals/bus.md). A new counter starts from the clock, so that
 * numbers keep growing after Redis lost its data.
 */
static rl_redis_script_t signal_script = {LUA_NOW "local seq = redis.call('INCR', KEYS[1])\n"
                                                  "if seq == 1 then\n"
                                                  "  seq = now * 1000\n"
                                                  "  redis.call('SET', KEYS[1], string.format('%d', seq))\n"
                                                  "end\n"
                                                  "local item = string.format('%d', seq) .. ' ' .. ARGV[1]\n"
                                                  "if tonumber(ARGV[3]) > 0 then\n"
                                                  "  redis.call('RPUSH', KEYS[2], item)\n"
                                                  "  redis.call('LTRIM', KEYS[2], -tonumber(ARGV[3]), -1)\n"
                                                  "  redis.call('PEXPIRE', KEYS[2], ARGV[4])\n"
                                                  "end\n"
                                                  "redis.call('PEXPIRE', KEYS[1], ARGV[4])\n"
                                                  "redis.call('PUBLISH', ARGV[2], item)\n"
                                                  "return seq\n"};

static rl_redis_script_t *const scripts[] = {
    &signal_script,         &publish_script,        &read_script,          &lease_bucket_script,
    &keep_buckets_script,   &node_script,           &lease_script,         &presence_set_script,
    &presence_clear_script, &presence_renew_script, &presence_load_script, &presence_lapse_script,
};

/* ---- the bus --------------------------------------------------------------------------------- */

static const char PRESENCE_KEY[] = "relay:presence";
static const char LEASES_KEY[] = "relay:presence:lease";
static const char SEQUENCE_KEY[] = "relay:presence:seq";
static const char NODES_KEY[] = "relay:nodes";

/* This node's view of an installation's presence. */
struct cached {
    int64_t seq;        /* of the last change applied (not bumped by this node's own unconfirmed ones) */
    int64_t expires_ms; /* on this node's monotonic clock */
    uint64_t load;      /* the presence load that last saw it */
    int gone;           /* cleared: kept until expires_ms so that an older change cannot revive it */
    char owner[OWNER_MAX + 1];
    char health[16];
};

/* A presence this node set: renewed while it lasts, asserted again after a reconnection. */
struct own {
    char owner[OWNER_MAX + 1];
    char health[16];
    int take;    /* the relay's set has not reached Redis yet: assert it as a take-over */
    int64_t seq; /* the number of its set, once confirmed (0 before) */
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
    int presence_subscribed, load_wanted, loading;
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

static int64_t mono_ms(void)
{
    return rl_clock_mono_us() / 1000;
}

static void say_live(struct redis_bus *bus);

/* Writes prefix + name into buf; -1 when it does not fit (a name that long is not the relay's). */
static int key(char *buf, size_t size, const char *prefix, const char *name)
{
    int len = snprintf(buf, size, "%s%s", prefix, name);

    return len < 0 || (size_t)len >= size ? -1 : len;
}

static void count_drops(struct redis_bus *bus, uint64_t *counter, size_t n, const char *what)
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

static struct deferred *defer(struct redis_bus *bus, int kind, void *arg)
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

/* ---- user events ----------------------------------------------------------------------------- */

/* Formats the user's two keys; -1 when the user id is too long to be one of ours. */
static int event_keys(const char *user_id, char *counter, char *ring)
{
    if (key(counter, KEY_MAX, "relay:ev:n:", user_id) < 0 || key(ring, KEY_MAX, "relay:ev:ring:", user_id) < 0) {
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
        count_drops(bus, &bus->dropped_events, op->events, "events");
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
        count_drops(bus, &bus->dropped_events, b->nevents, "events");
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
    if (rl_redis_eval(bus->cmd, &publish_script, (int)(2 * b->nusers), (int)argc, argv, lens, on_published, op) == 0)
        op = NULL;
    else
        count_drops(bus, &bus->dropped_events, b->nevents, "events");
out:
    free(op);
    free(argv);
    free(lens);
    events_reset(b);
}

static void on_turn_end(rl_later_item_t *item)
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
    if (event_keys(user_id, counter, ring) != 0 || key(channel, sizeof(channel), bus->events_channel, user_id) < 0)
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
static void redis_publish(rl_bus_t *super, const char *user_id, const char *name, const char *data, size_t len)
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
        count_drops(bus, &bus->dropped_events, 1, "an event");
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
    if (rl_redis_eval(bus->cmd, &read_script, 2, 7, argv, lens, on_read_reply, op) == 0)
        return;
fail:
    free(op);
    d = defer(bus, DEFER_READ, arg);
    d->read_cb = cb;
    d->value = internal;
}

static void redis_read(rl_bus_t *super, const char *user_id, int64_t after_id, size_t max, rl_bus_read_cb cb, void *arg)
{
    read_ring((void *)super, user_id, after_id, max, cb, arg, 0);
}

/* ---- subscriptions --------------------------------------------------------------------------- */

/* Sends one SUBSCRIBE or UNSUBSCRIBE, if the subscription connection is up (else it is done on connection). */
static void subscription(struct redis_bus *bus, const char *command, const char *prefix, const char *name)
{
    char channel[KEY_MAX];
    const char *argv[2] = {command, channel};
    size_t lens[2];

    if (!rl_redis_ready(bus->sub) || key(channel, sizeof(channel), prefix, name) < 0)
        return;
    lens[0] = strlen(command);
    lens[1] = strlen(channel);
    if (rl_redis_subscription(bus->sub, 2, argv, lens) != 0)
        rl_log_warn("redis bus: could not send %s for a channel", command);
}

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

static void drop_held(struct listener *l)
{
    size_t i;

    for (i = 0; i < l->nheld; ++i)
        rl_blob_release(l->held[i].frame);
    l->nheld = 0;
}

static void listener_free(void *p)
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

static struct listen_op *listen_op_new(struct redis_bus *bus, const char *user_id, uint64_t gen)
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

static void catch_up(struct redis_bus *bus, const char *user_id, struct listener *l);

static void go_live(struct redis_bus *bus, const char *user_id, struct listener *l)
{
    rl_bus_event_t *held = l->held;
    uint64_t gen = l->gen;
    size_t i, n = l->nheld;

    if (l->overflowed) {
        /* Too much came meanwhile to hold: read the ring once more instead. */
        l->overflowed = 0;
        drop_held(l);
        catch_up(bus, user_id, l);
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
        catch_up(op->bus, op->name, l);
out:
    free(op);
}

/* Reads what followed the last event delivered, once the mark is known and the subscription confirmed. */
static void catch_up(struct redis_bus *bus, const char *user_id, struct listener *l)
{
    struct listen_op *op;

    if (l->live || l->reading || !l->marked || !l->subscribed)
        return;
    if (l->delivered < 0 || (op = listen_op_new(bus, user_id, l->gen)) == NULL) {
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
        catch_up(op->bus, op->name, l);
    }
    free(op);
}

static void redis_listen(rl_bus_t *super, const char *user_id, int on)
{
    struct redis_bus *bus = (void *)super;
    struct listener *l = rl_strmap_get(bus->users, user_id);
    struct listen_op *op;

    if (!on) {
        if (l != NULL && --l->count == 0) {
            listener_free(rl_strmap_remove(bus->users, user_id));
            subscription(bus, "UNSUBSCRIBE", bus->events_channel, user_id);
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
    if ((op = listen_op_new(bus, user_id, l->gen)) != NULL)
        read_ring(bus, user_id, 0, 1, on_marked, op, 1);
    else
        l->marked = 1;
    subscription(bus, "SUBSCRIBE", bus->events_channel, user_id);
}

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

static void joined_free(void *p)
{
    struct joined *j = p;
    size_t i;

    for (i = 0; i < j->nheld; ++i)
        free(j->held[i]);
    free(j);
}

static struct joined *joined_of(struct redis_bus *bus, const char *topic, uint64_t gen)
{
    struct joined *j = rl_strmap_get(bus->topics, topic);

    return j != NULL && j->gen == gen ? j : NULL;
}

/* Delivers one "<seq> <message>" unless seen; the topic may be left afterwards. */
static struct joined *deliver_signal(struct redis_bus *bus, const char *topic, uint64_t gen, const char *item,
                                     size_t len)
{
    struct joined *j = joined_of(bus, topic, gen);
    const char *space = memchr(item, ' ', len);
    int64_t seq = space != NULL ? strtoll(item, NULL, 10) : -1;
    json_t *message;

    if (j == NULL || seq < 0 || (j->delivered >= 0 && seq <= j->delivered))
        return j;
    j->delivered = seq;
    message = json_loadb(space + 1, len - (size_t)(space + 1 - item), 0, NULL);
    if (json_is_object(message) && bus->config.handlers.signal != NULL)
        bus->config.handlers.signal(bus->config.handlers.ctx, topic, message);
    else if (!json_is_object(message))
        rl_log_warn("redis bus: an unreadable signal on a topic");
    json_decref(message);
    return joined_of(bus, topic, gen);
}

static void read_log(struct redis_bus *bus, const char *topic, struct joined *j);

static void topic_live(struct redis_bus *bus, const char *topic, struct joined *j)
{
    char *held[SIGNALS_HELD];
    uint64_t gen = j->gen;
    size_t i, n = j->nheld;

    if (j->overflowed) {
        j->overflowed = 0;
        for (i = 0; i < j->nheld; ++i)
            free(j->held[i]);
        j->nheld = 0;
        read_log(bus, topic, j);
        return;
    }
    j->live = 1;
    memcpy(held, j->held, n * sizeof(held[0]));
    j->nheld = 0;
    for (i = 0; i < n; ++i) {
        if (j != NULL)
            j = deliver_signal(bus, topic, gen, held[i], strlen(held[i]));
        free(held[i]);
    }
    /*
     * Back after a lost subscription: what was sent meanwhile came from the log, unless Redis lost it (a
     * restart) or never logged it (too large). The readers look again.
     */
    if (j != NULL && j->resubscribed) {
        json_t *missed = json_pack("{s:s}", "type", RL_BUS_MISSED);
        j->resubscribed = 0;
        if (missed != NULL && bus->config.handlers.signal != NULL)
            bus->config.handlers.signal(bus->config.handlers.ctx, topic, missed);
        json_decref(missed);
    }
}

static void on_log(redisReply *reply, void *arg)
{
    struct listen_op *op = arg;
    struct joined *j = op->bus->closing ? NULL : joined_of(op->bus, op->name, op->gen);
    size_t i;

    if (j == NULL)
        goto out;
    j->reading = 0;
    if (reply != NULL && reply->type == REDIS_REPLY_ARRAY) {
        for (i = 0; i < reply->elements && j != NULL; ++i) {
            if (reply->element[i]->type == REDIS_REPLY_STRING)
                j = deliver_signal(op->bus, op->name, op->gen, reply->element[i]->str, reply->element[i]->len);
        }
    }
    if (j != NULL)
        topic_live(op->bus, op->name, j);
out:
    free(op);
}

/* Reads the topic's log once the mark is known and the subscription confirmed. */
static void read_log(struct redis_bus *bus, const char *topic, struct joined *j)
{
    char log[KEY_MAX];
    const char *argv[4] = {"LRANGE", log, "0", "-1"};
    size_t lens[4] = {6, 0, 1, 2};
    struct listen_op *op;

    if (j->live || j->reading || !j->marked || !j->subscribed)
        return;
    if (j->delivered < 0 || key(log, sizeof(log), "relay:sig:log:", topic) < 0 ||
        (op = listen_op_new(bus, topic, j->gen)) == NULL) {
        topic_live(bus, topic, j);
        return;
    }
    lens[1] = strlen(log);
    j->reading = 1;
    if (rl_redis_command(bus->cmd, 4, argv, lens, on_log, op) != 0) {
        free(op);
        j->reading = 0;
        topic_live(bus, topic, j);
    }
}

static void on_topic_marked(redisReply *reply, void *arg)
{
    struct listen_op *op = arg;
    struct joined *j = op->bus->closing ? NULL : joined_of(op->bus, op->name, op->gen);

    if (j != NULL) {
        j->marked = 1;
        if (reply != NULL && reply->type == REDIS_REPLY_STRING)
            j->delivered = strtoll(reply->str, NULL, 10);
        else if (reply != NULL && reply->type == REDIS_REPLY_NIL)
            j->delivered = 0;
        read_log(op->bus, op->name, j);
    }
    free(op);
}

static void redis_join(rl_bus_t *super, const char *topic, int on)
{
    struct redis_bus *bus = (void *)super;
    struct joined *j = rl_strmap_get(bus->topics, topic);
    char counter[KEY_MAX];
    const char *argv[2] = {"GET", counter};
    size_t lens[2] = {3, 0};
    struct listen_op *op;

    if (!on) {
        if (j != NULL && --j->count == 0) {
            joined_free(rl_strmap_remove(bus->topics, topic));
            subscription(bus, "UNSUBSCRIBE", bus->signals_channel, topic);
        }
        return;
    }
    if (j != NULL) {
        ++j->count;
        return;
    }
    if (key(counter, sizeof(counter), "relay:sig:n:", topic) < 0 || (j = calloc(1, sizeof(*j))) == NULL ||
        rl_strmap_put(bus->topics, topic, j) != 0) {
        free(j);
        rl_log_warn("redis bus: too many topics, or one too long; a topic is not joined");
        return;
    }
    j->count = 1;
    j->gen = ++bus->listeners;
    j->delivered = -1;
    lens[1] = strlen(counter);
    if ((op = listen_op_new(bus, topic, j->gen)) == NULL ||
        rl_redis_command(bus->cmd, 2, argv, lens, on_topic_marked, op) != 0) {
        free(op);
        j->marked = 1;
    }
    subscription(bus, "SUBSCRIBE", bus->signals_channel, topic);
}

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
    bus->presence_subscribed = 0;
    rl_strmap_sweep(bus->users, unsubscribed, NULL, NULL);
    rl_strmap_sweep(bus->topics, left, NULL, NULL);
}

/* ---- presence -------------------------------------------------------------------------------- */

/*
 * Each node keeps two maps: its own presences (the bridge sockets it
 * serves, known first-hand) and a cache of every presence, fed by the
 * scripts' replies, the presence channel and a load on (re)connection.
 * Every change in Redis carries a sequence number; the cache applies a
 * change only when it is newer than what it holds, so messages and replies
 * may arrive in any order. Sequence numbers start from the clock, like event
 * ids, so that they keep increasing after Redis lost its data.
 */

static struct cached *cached_get(struct redis_bus *bus, const char *installation_id, int create)
{
    struct cached *c = rl_strmap_get(bus->presence, installation_id);

    if (c != NULL || !create)
        return c;
    if ((c = calloc(1, sizeof(*c))) == NULL || rl_strmap_put(bus->presence, installation_id, c) != 0) {
        free(c);
        rl_log_warn("redis bus: too many installations present");
        return NULL;
    }
    c->gone = 1;
    return c;
}

/* Applies a change numbered seq (force: whatever the cache holds); health NULL for a clear. */
static void apply(struct redis_bus *bus, const char *installation_id, int64_t seq, const char *owner,
                  const char *health, int64_t lease_ms, int force)
{
    struct cached *c = cached_get(bus, installation_id, 1);

    if (c == NULL)
        return;
    c->load = bus->loads;
    if (!force && seq <= c->seq)
        return;
    c->seq = seq;
    c->gone = health == NULL;
    c->expires_ms = mono_ms() + lease_ms;
    snprintf(c->owner, sizeof(c->owner), "%s", owner != NULL ? owner : "");
    snprintf(c->health, sizeof(c->health), "%s", health != NULL ? health : "");
}

/* Parses a stored value "<seq> <health> <owner>". */
static int parse_value(const char *value, int64_t *seq, char *health, char *owner)
{
    long long n;

    if (sscanf(value, "%lld %15s %95s", &n, health, owner) != 3)
        return -1;
    *seq = n;
    return 0;
}

static void on_presence_message(struct redis_bus *bus, const char *payload, size_t len)
{
    json_t *message = json_loadb(payload, len, 0, NULL);
    const char *op = json_string_value(json_object_get(message, "op"));
    const char *id = json_string_value(json_object_get(message, "i"));
    const char *owner = json_string_value(json_object_get(message, "o"));
    const char *health = json_string_value(json_object_get(message, "h"));
    const char *seq = json_string_value(json_object_get(message, "s"));
    int64_t lease = json_integer_value(json_object_get(message, "t"));
    struct cached *c;

    if (op == NULL) {
        rl_log_warn("redis bus: an unreadable presence message");
    } else if (strcmp(op, "set") == 0 && id != NULL && owner != NULL && health != NULL && seq != NULL) {
        apply(bus, id, strtoll(seq, NULL, 10), owner, health, lease, 0);
    } else if (strcmp(op, "clear") == 0 && id != NULL && seq != NULL) {
        apply(bus, id, strtoll(seq, NULL, 10), owner, NULL, bus->lease_ms, 0);
    } else if (strcmp(op, "renew") == 0) {
        json_t *pairs = json_object_get(message, "r");
        size_t i;
        for (i = 0; i + 1 < json_array_size(pairs); i += 2) {
            const char *renewed = json_string_value(json_array_get(pairs, i));
            const char *by = json_string_value(json_array_get(pairs, i + 1));
            c = renewed != NULL ? cached_get(bus, renewed, 0) : NULL;
            if (c != NULL && !c->gone && by != NULL && strcmp(c->owner, by) == 0)
                c->expires_ms = mono_ms() + lease;
        }
    }
    json_decref(message);
}

struct set_op {
    struct redis_bus *bus;
    char owner[OWNER_MAX + 1];
    char installation_id[];
};

static void on_presence_set(redisReply *reply, void *arg)
{
    struct set_op *op = arg;
    struct redis_bus *bus = op->bus;
    char health[16], owner[OWNER_MAX + 1];
    struct own *own;
    int64_t seq;

    if (bus->closing || reply == NULL || reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
        reply->element[0]->type != REDIS_REPLY_INTEGER || reply->element[1]->type != REDIS_REPLY_STRING) {
        if (reply != NULL && reply->type == REDIS_REPLY_ERROR)
            rl_log_warn("redis bus: setting a presence failed: %s", reply->str);
        goto out;
    }
    own = rl_strmap_get(bus->own, op->installation_id);
    if (own != NULL && strcmp(own->owner, op->owner) != 0)
        own = NULL; /* a newer set of this node replaced it meanwhile: its own reply will tell */
    if (reply->element[0]->integer == 1) {
        if (parse_value(reply->element[1]->str, &seq, health, owner) != 0)
            goto out;
        if (own != NULL) {
            own->take = 0;
            own->seq = seq;
        }
        apply(bus, op->installation_id, seq, owner, health, bus->lease_ms, 0);
        goto out;
    }
    /* Another owner holds it, or this one was replaced: this node no longer serves it. */
    if (own != NULL)
        free(rl_strmap_remove(bus->own, op->installation_id));
    if (parse_value(reply->element[1]->str, &seq, health, owner) == 0)
        apply(bus, op->installation_id, seq, owner, health, bus->lease_ms, 1);
out:
    free(op);
}

/* Runs the set script for one of this node's presences. */
static void send_presence_set(struct redis_bus *bus, const char *installation_id, const struct own *own)
{
    char lease[24], retired[KEY_MAX];
    const char *argv[10];
    size_t lens[10], i, id_len = strlen(installation_id);
    struct set_op *op;

    if (key(retired, sizeof(retired), "relay:presence:retired:", installation_id) < 0 ||
        (op = malloc(sizeof(*op) + id_len + 1)) == NULL)
        return;
    op->bus = bus;
    memcpy(op->owner, own->owner, sizeof(op->owner));
    memcpy(op->installation_id, installation_id, id_len + 1);
    snprintf(lease, sizeof(lease), "%lld", (long long)bus->lease_ms);
    argv[0] = PRESENCE_KEY, argv[1] = LEASES_KEY, argv[2] = SEQUENCE_KEY, argv[3] = retired;
    argv[4] = installation_id, argv[5] = own->owner, argv[6] = own->health, argv[7] = lease;
    argv[8] = bus->presence_channel, argv[9] = own->take ? "take" : "keep";
    for (i = 0; i < 10; ++i)
        lens[i] = strlen(argv[i]);
    if (rl_redis_eval(bus->cmd, &presence_set_script, 4, 10, argv, lens, on_presence_set, op) != 0)
        free(op);
}

static void redis_presence_set(rl_bus_t *super, const char *installation_id, const char *owner, const char *health)
{
    struct redis_bus *bus = (void *)super;
    struct own *own = rl_strmap_get(bus->own, installation_id);

    if (strlen(owner) > OWNER_MAX || strlen(health) >= sizeof(own->health) || strchr(owner, ' ') != NULL ||
        strchr(health, ' ') != NULL) {
        rl_log_warn("redis bus: a presence owner or health that cannot be stored");
        return;
    }
    if (own == NULL) {
        if ((own = calloc(1, sizeof(*own))) == NULL || rl_strmap_put(bus->own, installation_id, own) != 0) {
            free(own);
            rl_log_warn("redis bus: too many installations present");
            return;
        }
    }
    snprintf(own->owner, sizeof(own->owner), "%s", owner);
    snprintf(own->health, sizeof(own->health), "%s", health);
    own->take = 1;
    own->seq = 0;
    send_presence_set(bus, installation_id, own);
}

struct clear_op {
    struct redis_bus *bus;
    rl_bus_cleared_cb cb;
    void *arg;
    int guess; /* what this node knew: the answer when Redis cannot give one */
    char installation_id[];
};

static void on_presence_cleared(redisReply *reply, void *arg)
{
    struct clear_op *op = arg;
    int cleared = op->guess;

    if (op->bus->closing)
        goto out;
    if (reply != NULL && reply->type == REDIS_REPLY_INTEGER) {
        cleared = reply->integer > 0;
        /* The clear's own number: older changes still on their way cannot bring the presence back. */
        if (cleared)
            apply(op->bus, op->installation_id, reply->integer, NULL, NULL, op->bus->lease_ms, 0);
    } else if (reply != NULL && reply->type == REDIS_REPLY_ERROR) {
        rl_log_warn("redis bus: clearing a presence failed: %s", reply->str);
    }
    if (op->cb != NULL)
        op->cb(cleared, op->arg);
out:
    free(op);
}

static void redis_presence_clear(rl_bus_t *super, const char *installation_id, const char *owner, rl_bus_cleared_cb cb,
                                 void *arg)
{
    struct redis_bus *bus = (void *)super;
    struct own *own = rl_strmap_get(bus->own, installation_id);
    struct cached *c = cached_get(bus, installation_id, 0);
    const char *argv[6] = {PRESENCE_KEY, LEASES_KEY, SEQUENCE_KEY, installation_id, owner, bus->presence_channel};
    size_t lens[6], i, id_len = strlen(installation_id);
    struct clear_op *op = malloc(sizeof(*op) + id_len + 1);
    int guess = 0;

    if (op == NULL) {
        rl_log_error("out of memory clearing a presence");
        abort();
    }
    if (own != NULL && strcmp(own->owner, owner) == 0) {
        free(rl_strmap_remove(bus->own, installation_id));
        guess = 1;
    }
    if (c != NULL && !c->gone && strcmp(c->owner, owner) == 0) {
        /* Gone at once in this node's view; the script's answer numbers the change. */
        c->gone = 1;
        c->expires_ms = mono_ms() + bus->lease_ms;
        guess = 1;
    }
    *op = (struct clear_op){bus, cb, arg, guess};
    memcpy(op->installation_id, installation_id, id_len + 1);
    for (i = 0; i < 6; ++i)
        lens[i] = strlen(argv[i]);
    if (rl_redis_eval(bus->cmd, &presence_clear_script, 3, 6, argv, lens, on_presence_cleared, op) == 0)
        return;
    free(op);
    if (cb != NULL) {
        struct deferred *d = defer(bus, DEFER_CLEARED, arg);
        d->cleared_cb = cb;
        d->value = guess;
    }
}

static const char *redis_presence_get(rl_bus_t *super, const char *installation_id)
{
    struct redis_bus *bus = (void *)super;
    struct cached *c = rl_strmap_get(bus->presence, installation_id);
    struct own *own = rl_strmap_get(bus->own, installation_id);
    int alive = c != NULL && !c->gone && c->expires_ms > mono_ms();

    /*
     * This node's own socket is known first-hand, and stays so while Redis
     * cannot be reached; unless a change after its confirmed set shows that
     * another socket took the installation over (this one is closing then).
     */
    if (own != NULL &&
        !(own->seq > 0 && c != NULL && c->seq > own->seq && (c->gone || strcmp(c->owner, own->owner) != 0)))
        return own->health;
    return alive ? c->health : "offline";
}

struct load_sweep {
    uint64_t load;
    int64_t snapshot;
};

static int stale_after_load(const char *key, void *value, void *arg)
{
    struct cached *c = value;
    struct load_sweep *sweep = arg;

    return c->load != sweep->load && c->seq <= sweep->snapshot;
}

static void maybe_load(struct redis_bus *bus);

static void on_presence_loaded(redisReply *reply, void *arg)
{
    struct redis_bus *bus = arg;
    char health[16], owner[OWNER_MAX + 1];
    struct load_sweep sweep;
    int64_t seq;
    size_t i;

    if (bus->closing)
        return;
    bus->loading = 0;
    if (reply == NULL || reply->type != REDIS_REPLY_ARRAY || reply->elements < 1 ||
        reply->element[0]->type != REDIS_REPLY_INTEGER) {
        if (reply != NULL && reply->type == REDIS_REPLY_ERROR)
            rl_log_warn("redis bus: loading presences failed: %s", reply->str);
        return;
    }
    if (bus->load_subscription == bus->presence_subscriptions)
        bus->load_wanted = 0;
    ++bus->loads;
    for (i = 1; i + 2 < reply->elements; i += 3) {
        const redisReply *id = reply->element[i], *value = reply->element[i + 1], *left = reply->element[i + 2];
        if (id->type == REDIS_REPLY_STRING && value->type == REDIS_REPLY_STRING && left->type == REDIS_REPLY_INTEGER &&
            parse_value(value->str, &seq, health, owner) == 0) {
            struct cached *c;
            apply(bus, id->str, seq, owner, health, left->integer, 0);
            /* A change the cache knew already: its lease is as the snapshot says. */
            if ((c = cached_get(bus, id->str, 0)) != NULL && c->seq == seq && !c->gone)
                c->expires_ms = mono_ms() + left->integer;
        }
    }
    /* What the snapshot does not hold, and no change after it brought, was cleared or lapsed before it. */
    sweep.load = bus->loads;
    sweep.snapshot = reply->element[0]->integer;
    rl_strmap_sweep(bus->presence, stale_after_load, &sweep, free);
    /* The subscription came back while this load was on its way: once more, after it. */
    maybe_load(bus);
}

/* Loads every presence into the cache, once subscribed to their changes (so that none falls in between). */
static void maybe_load(struct redis_bus *bus)
{
    const char *argv[3] = {PRESENCE_KEY, LEASES_KEY, SEQUENCE_KEY};
    size_t lens[3] = {strlen(PRESENCE_KEY), strlen(LEASES_KEY), strlen(SEQUENCE_KEY)};

    if (!bus->load_wanted || bus->loading || !bus->presence_subscribed || !rl_redis_ready(bus->cmd))
        return;
    bus->load_subscription = bus->presence_subscriptions;
    if (rl_redis_eval(bus->cmd, &presence_load_script, 3, 3, argv, lens, on_presence_loaded, bus) == 0)
        bus->loading = 1;
}

/* Installations and owners sent in one renewal. */
struct renew_op {
    struct redis_bus *bus;
    size_t count;
    char *pairs[2 * RENEW_BATCH];
};

static void renew_op_free(struct renew_op *op)
{
    size_t i;

    for (i = 0; i < op->count; ++i)
        free(op->pairs[i]);
    free(op);
}

static void on_renewed(redisReply *reply, void *arg)
{
    struct renew_op *op = arg;
    struct redis_bus *bus = op->bus;
    size_t i;

    if (bus->closing || reply == NULL || reply->type != REDIS_REPLY_ARRAY || reply->elements != op->count / 2) {
        if (reply != NULL && reply->type == REDIS_REPLY_ERROR)
            rl_log_warn("redis bus: renewing presences failed: %s", reply->str);
        goto out;
    }
    for (i = 0; i < reply->elements; ++i) {
        const char *id = op->pairs[2 * i], *owner = op->pairs[2 * i + 1];
        struct own *own = rl_strmap_get(bus->own, id);
        if (own == NULL || strcmp(own->owner, owner) != 0 || reply->element[i]->integer == 1)
            continue;
        if (reply->element[i]->integer == 0)
            free(rl_strmap_remove(bus->own, id));
        else
            send_presence_set(bus, id, own);
    }
out:
    renew_op_free(op);
}

static void send_renewal(struct redis_bus *bus, struct renew_op *op)
{
    const char *argv[5 + 2 * RENEW_BATCH];
    size_t lens[5 + 2 * RENEW_BATCH], i;
    char lease[24];

    snprintf(lease, sizeof(lease), "%lld", (long long)bus->lease_ms);
    argv[0] = PRESENCE_KEY, argv[1] = LEASES_KEY, argv[2] = SEQUENCE_KEY;
    argv[3] = lease, argv[4] = bus->presence_channel;
    for (i = 0; i < op->count; ++i)
        argv[5 + i] = op->pairs[i];
    for (i = 0; i < 5 + op->count; ++i)
        lens[i] = strlen(argv[i]);
    if (rl_redis_eval(bus->cmd, &presence_renew_script, 3, (int)(5 + op->count), argv, lens, on_renewed, op) != 0)
        renew_op_free(op);
}

struct renewal {
    struct redis_bus *bus;
    struct renew_op *op;
};

static int renew_own(const char *id, void *value, void *arg)
{
    struct renewal *r = arg;
    struct own *own = value;
    char *pair[2];

    if (r->op == NULL && (r->op = calloc(1, sizeof(*r->op))) == NULL)
        return 0;
    r->op->bus = r->bus;
    pair[0] = strdup(id);
    pair[1] = strdup(own->owner);
    if (pair[0] == NULL || pair[1] == NULL) {
        free(pair[0]);
        free(pair[1]);
        return 0;
    }
    r->op->pairs[r->op->count++] = pair[0];
    r->op->pairs[r->op->count++] = pair[1];
    if (r->op->count == 2 * RENEW_BATCH) {
        send_renewal(r->bus, r->op);
        r->op = NULL;
    }
    return 0;
}

static int lapsed(const char *key, void *value, void *arg)
{
    struct cached *c = value;

    return c->expires_ms <= *(int64_t *)arg;
}

static void prune_cache(struct redis_bus *bus)
{
    int64_t now = mono_ms();

    rl_strmap_sweep(bus->presence, lapsed, &now, free);
}

static void claim_lapsed(struct redis_bus *bus);

/*
 * A lapse this node claimed is over in Redis, whatever the cache says: the
 * cache times a lease from when it heard of the set or renewal, later than
 * Redis did, so for that delay it would still answer the lapsed health, and
 * the relay, which says offline only when presence_get does, would say
 * nothing (the lost offline of issue 39: nobody else is told of this lapse).
 * The entry is marked gone unless the cache holds a change newer than the
 * lapsed value (a set since, heard before this answer).
 */
static void lapse_cached(struct redis_bus *bus, const char *installation_id, const char *value)
{
    char health[16], owner[OWNER_MAX + 1];
    struct cached *c = cached_get(bus, installation_id, 0);
    int64_t seq;

    if (c == NULL || parse_value(value, &seq, health, owner) != 0 || c->seq > seq)
        return;
    c->seq = seq;
    c->gone = 1;
    c->expires_ms = mono_ms() + bus->lease_ms;
}

/* Claims of lapsed presences answered, this process's (relay_presence_claims_total). Loop thread. */
static uint64_t lapse_claims;

uint64_t rl_bus_presence_claims_total(void)
{
    return lapse_claims;
}

static void on_lapse_claimed(redisReply *reply, void *arg)
{
    struct redis_bus *bus = arg;
    size_t i;

    if (bus->closing || reply == NULL || reply->type != REDIS_REPLY_ARRAY) {
        if (reply != NULL && reply->type == REDIS_REPLY_ERROR)
            rl_log_warn("redis bus: taking lapsed presences failed: %s", reply->str);
        return;
    }
    lapse_claims++;
    for (i = 0; i + 1 < reply->elements; i += 2) {
        if (reply->element[i]->type != REDIS_REPLY_STRING)
            continue;
        if (reply->element[i + 1]->type == REDIS_REPLY_STRING)
            lapse_cached(bus, reply->element[i]->str, reply->element[i + 1]->str);
        if (bus->config.handlers.presence_lapsed != NULL)
            bus->config.handlers.presence_lapsed(bus->config.handlers.ctx, reply->element[i]->str);
    }
    /*
     * A script moves at most 100 lapses: a node that died with more bridges
     * is claimed batch after batch now, not one batch a renewal (100 every
     * 2 s would break the 15 s of docs/operations.md past ~200 bridges).
     */
    if (reply->elements > 0 && rl_redis_ready(bus->cmd))
        claim_lapsed(bus);
}

/* Takes the presences whose node stopped renewing them: each goes to one node, which says offline. */
static void claim_lapsed(struct redis_bus *bus)
{
    const char *argv[3] = {PRESENCE_KEY, LEASES_KEY, SEQUENCE_KEY};
    size_t lens[3] = {strlen(PRESENCE_KEY), strlen(LEASES_KEY), strlen(SEQUENCE_KEY)};

    rl_redis_eval(bus->cmd, &presence_lapse_script, 3, 3, argv, lens, on_lapse_claimed, bus);
}

/* Every fifth of a lease: renew this node's presences, claim and drop the lapsed ones of the others. */
static void on_renew(h2o_timeout_entry_t *entry)
{
    struct redis_bus *bus = H2O_STRUCT_FROM_MEMBER(struct redis_bus, renew, entry);
    struct renewal r = {bus, NULL};

    h2o_timeout_link(bus->loop, rl_redis__loop_timeout(bus->loop, (uint64_t)bus->renew_ms), &bus->renew);
    if (rl_redis_ready(bus->cmd))
        rl_strmap_sweep(bus->own, renew_own, &r, NULL);
    if (r.op != NULL) {
        if (r.op->count > 0)
            send_renewal(bus, r.op);
        else
            free(r.op);
    }
    if (rl_redis_ready(bus->cmd)) {
        claim_lapsed(bus);
        say_live(bus);
    }
    prune_cache(bus);
    maybe_load(bus);
}

static int assert_own(const char *id, void *value, void *arg)
{
    send_presence_set(arg, id, value);
    return 0;
}

static int forget_share(const char *bucket, void *value, void *arg)
{
    struct share *s = value;

    if (s->state != SHARE_LEASING)
        s->state = SHARE_NONE;
    s->reserve = s->reserve_size = 0;
    s->reserve_ms = s->quiet_until_ms = 0;
    return 0;
}

static void send_missed(struct redis_bus *bus);

static void on_cmd_lost(rl_redis_t *redis, void *ctx)
{
    struct redis_bus *bus = ctx;

    if (bus->lost_ms < 0)
        bus->lost_ms = mono_ms();
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
    send_missed(bus);
    /*
     * The outage slices served alone meanwhile: what they gave is forgiven,
     * and each bucket's next take leases a share again (the leases Redis
     * kept run out by themselves; it may have lost them too).
     */
    say_live(bus);
    bus->lost_ms = -1;
    rl_strmap_sweep(bus->shares, forget_share, NULL, NULL);
    /* Redis may have lost them (a restart without persistence), or they lapsed meanwhile. */
    rl_strmap_sweep(bus->own, assert_own, bus, NULL);
    maybe_load(bus);
}

/* ---- signals and messages -------------------------------------------------------------------- */

/* A signal to topic could not be sent: counted, and the topic remembered to be told RL_BUS_MISSED later. */
static void signal_dropped(struct redis_bus *bus, const char *topic)
{
    count_drops(bus, &bus->dropped_signals, 1, "a signal");
    if (bus->missed == NULL || rl_strmap_get(bus->missed, topic) != NULL)
        return;
    if (rl_strmap_put(bus->missed, topic, (void *)1) != 0 && !bus->missed_overflow) {
        bus->missed_overflow = 1;
        rl_log_warn("redis bus: signals to more than %d topics were lost in this outage; the others' readers "
                    "look again only at their next signal",
                    MISSED_MAX);
    }
}

/* What a signal's reply needs: the bus, and the topic (to remember it if the signal is lost). */
struct signalled {
    struct redis_bus *bus;
    char topic[];
};

static void on_signalled(redisReply *reply, void *arg)
{
    struct signalled *sent = arg;
    struct redis_bus *bus = sent->bus;

    if (bus->closing)
        goto out;
    if (reply == NULL)
        signal_dropped(bus, sent->topic);
    else if (reply->type == REDIS_REPLY_ERROR)
        rl_log_warn("redis bus: a signal failed: %s", reply->str);
out:
    free(sent);
}

static void redis_signal(rl_bus_t *super, const char *topic, json_t *message);

static int tell_missed(const char *topic, void *value, void *arg)
{
    redis_signal(arg, topic, json_pack("{s:s}", "type", RL_BUS_MISSED));
    return 1;
}

/* Redis answers again: every topic this node lost a signal to is told RL_BUS_MISSED. */
static void send_missed(struct redis_bus *bus)
{
    rl_strmap_t *lost = bus->missed;

    if (lost == NULL || rl_strmap_size(lost) == 0)
        return;
    /* Told from a map of its own: a signal lost again now is remembered for the next return. */
    bus->missed = rl_strmap_new(MISSED_MAX);
    bus->missed_overflow = 0;
    rl_strmap_sweep(lost, tell_missed, bus, NULL);
    rl_strmap_free(lost, NULL);
}

static void redis_signal(rl_bus_t *super, const char *topic, json_t *message)
{
    struct redis_bus *bus = (void *)super;
    char counter[KEY_MAX], log[KEY_MAX], channel[KEY_MAX], length[16], ttl[24];
    char *text = json_dumps(message, JSON_COMPACT);
    const char *argv[6] = {counter, log, text, channel, length, ttl};
    struct signalled *sent;
    size_t lens[6], i;

    json_decref(message);
    if (text == NULL || key(channel, sizeof(channel), bus->signals_channel, topic) < 0 ||
        key(counter, sizeof(counter), "relay:sig:n:", topic) < 0 ||
        key(log, sizeof(log), "relay:sig:log:", topic) < 0) {
        rl_log_warn("redis bus: a signal that cannot be sent");
        goto out;
    }
    /*
     * The log is for a node that joins a topic late; a node's own "rpc:"
     * topic, where the large answers go, is joined once at start. Logging
     * them would keep up to 16 answers of 3 MiB in Redis for a minute.
     */
    snprintf(length, sizeof(length), "%d", strlen(text) > SIGNAL_LOGGED_MAX ? 0 : SIGNALS_LOGGED);
    snprintf(ttl, sizeof(ttl), "%d", SIGNALS_LOG_MS);
    for (i = 0; i < 6; ++i)
        lens[i] = strlen(argv[i]);
    sent = malloc(sizeof(*sent) + strlen(topic) + 1);
    if (sent == NULL) {
        signal_dropped(bus, topic);
        goto out;
    }
    sent->bus = bus;
    memcpy(sent->topic, topic, strlen(topic) + 1);
    if (rl_redis_eval(bus->cmd, &signal_script, 2, 6, argv, lens, on_signalled, sent) != 0) {
        free(sent);
        signal_dropped(bus, topic);
    }
out:
    free(text);
}

static int starts_with(const redisReply *s, const char *prefix, size_t len)
{
    return s->len >= len && memcmp(s->str, prefix, len) == 0;
}

static void on_event_message(struct redis_bus *bus, const char *user_id, const redisReply *payload)
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

static void on_signal_message(struct redis_bus *bus, const char *topic, const redisReply *payload)
{
    struct joined *j = rl_strmap_get(bus->topics, topic);
    char *item;

    if (j == NULL)
        return;
    if (j->live) {
        deliver_signal(bus, topic, j->gen, payload->str, payload->len);
    } else if (j->nheld == SIGNALS_HELD || (item = malloc(payload->len + 1)) == NULL) {
        j->overflowed = 1;
    } else {
        memcpy(item, payload->str, payload->len);
        item[payload->len] = '\0';
        j->held[j->nheld++] = item;
    }
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
            on_event_message(bus, channel->str + events_len, payload);
        else if (starts_with(channel, bus->signals_channel, signals_len))
            on_signal_message(bus, channel->str + signals_len, payload);
        else if (strcmp(channel->str, bus->presence_channel) == 0)
            on_presence_message(bus, payload->str, payload->len);
    } else if (strcmp(kind, "subscribe") == 0 && strcmp(channel->str, bus->presence_channel) == 0) {
        bus->presence_subscribed = 1;
        bus->presence_subscriptions++;
        bus->load_wanted = 1;
        maybe_load(bus);
    } else if (strcmp(kind, "subscribe") == 0 && starts_with(channel, bus->signals_channel, signals_len)) {
        struct joined *j = rl_strmap_get(bus->topics, channel->str + signals_len);
        if (j != NULL) {
            j->subscribed = 1;
            read_log(bus, channel->str + signals_len, j);
        }
    } else if (strcmp(kind, "subscribe") == 0 && starts_with(channel, bus->events_channel, events_len)) {
        struct listener *l = rl_strmap_get(bus->users, channel->str + events_len);
        if (l != NULL) {
            l->subscribed = 1;
            catch_up(bus, channel->str + events_len, l);
        }
    }
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
    return mono_ms();
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

static void share_free(void *value)
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

    if ((op = malloc(sizeof(*op) + len + 1)) == NULL || key(name, sizeof(name), "relay:bucket:", bucket) < 0) {
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
    if (rl_redis_eval(bus->cmd, &lease_bucket_script, 2, 7, argv, lens, on_bucket_leased, op) != 0)
        on_bucket_leased(NULL, op);
}

static void redis_take(rl_bus_t *super, const char *bucket, double capacity, double refill_per_s, int64_t now_ms,
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
            defer(bus, DEFER_TAKE, arg)->take_cb = cb;
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
        key(names[i], KEY_MAX, "relay:bucket:", op->keys[i]);
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
    if (rl_redis_eval(bus->cmd, &keep_buckets_script, (int)op->count + 1, (int)n, argv, lens, on_kept, op) == 0)
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
            share_free(s);
        } else {
            share_file(bus, s, st->now);
        }
    }
}

static void on_settle_tick(h2o_timeout_entry_t *entry)
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
static void redis_retire(rl_bus_t *super, rl_bus_retired_cb cb, void *arg)
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
    rl_strmap_sweep(bus->shares, keep_share, &st, share_free);
    if (st.op != NULL)
        send_keep(bus, st.op);
    for (i = 0; i < 4; ++i)
        lens[i] = strlen(argv[i]);
    if (rl_redis_eval(bus->cmd, &node_script, 1, 4, argv, lens, on_retired, r) != 0) {
        free(r);
        cb(arg);
    }
}

/* Tells Redis this node is live (the shares are sized by how many are), for NODE_TTL_MS. */
static void say_live(struct redis_bus *bus)
{
    char ttl[24];
    const char *argv[4] = {NODES_KEY, bus->node_field + 2, ttl, "add"};
    size_t lens[4], i;

    snprintf(ttl, sizeof(ttl), "%d", NODE_TTL_MS);
    for (i = 0; i < 4; ++i)
        lens[i] = strlen(argv[i]);
    rl_redis_eval(bus->cmd, &node_script, 1, 4, argv, lens, on_node_said, bus);
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

static void redis_lease(rl_bus_t *super, const char *name, const char *holder, int64_t ttl_ms, rl_bus_lease_cb cb,
                        void *arg)
{
    struct redis_bus *bus = (void *)super;
    char lease[KEY_MAX], ttl[24];
    const char *argv[3] = {lease, holder, ttl};
    size_t lens[3], i;
    struct lease_op *op = malloc(sizeof(*op));

    if (op == NULL || key(lease, sizeof(lease), "relay:lease:", name) < 0 || ttl_ms <= 0)
        goto fail;
    *op = (struct lease_op){bus, cb, arg};
    snprintf(ttl, sizeof(ttl), "%lld", (long long)ttl_ms);
    for (i = 0; i < 3; ++i)
        lens[i] = strlen(argv[i]);
    if (rl_redis_eval(bus->cmd, &lease_script, 1, 3, argv, lens, on_leased, op) == 0)
        return;
fail:
    free(op);
    defer(bus, DEFER_LEASE, arg)->lease_cb = cb;
}

/* ---- the backend ----------------------------------------------------------------------------- */

static void redis_sweep(rl_bus_t *super, int64_t now_ms, unsigned parts)
{
    struct redis_bus *bus = (void *)super;
    int64_t now = mono_ms();

    /* Redis expires the rings and buckets itself; this node only has its presence cache to prune. */
    rl_strmap_sweep_part(bus->presence, lapsed, &now, free, parts);
}

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
    rl_strmap_free(bus->shares, share_free);
    rl_later_dispose(&bus->later, drop_deferred);
    rl_buf_free(&bus->batch.bytes);
    rl_strmap_free(bus->users, listener_free);
    rl_strmap_free(bus->topics, joined_free);
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
    bus->batch.item.run = on_turn_end;
    rl_buf_init(&bus->batch.bytes, SIZE_MAX);
    snprintf(bus->ring_length, sizeof(bus->ring_length), "%zu", bus->config.max_events);
    snprintf(bus->ring_age, sizeof(bus->ring_age), "%lld", (long long)bus->config.max_age_ms);
    snprintf(bus->idle_ttl, sizeof(bus->idle_ttl), "%lld", (long long)bus->idle_ttl_ms);
    bus->renew.cb = on_renew;
    bus->settle.cb = on_settle_tick;
    bus->lost_ms = mono_ms(); /* not connected yet */
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
        int64_t deadline = mono_ms() + START_WAIT_MS;
        while (!(rl_redis_ready(bus->cmd) && rl_redis_ready(bus->sub)) && mono_ms() < deadline)
            h2o_evloop_run(loop, 10);
        if (!rl_redis_ready(bus->cmd) || !rl_redis_ready(bus->sub))
            rl_log_warn("redis bus at %s: not connected after %d ms; starting anyway", bus->location.display,
                        START_WAIT_MS);
    }
    *out = &bus->super;
    return 0;
}
