/*
 * The Redis bus's presence (docs/internals/bus.md, "Presence"): this
 * node's own presences and their renewal, the cache of every presence fed
 * by replies, the presence channel and a load, and the claims of the
 * presences whose node stopped renewing them.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus/bus_redis_internal.h"
#include "common/log.h"

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
rl_redis_script_t rbus_presence_set_script = {
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
rl_redis_script_t rbus_presence_clear_script = {
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
rl_redis_script_t rbus_presence_renew_script = {
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
rl_redis_script_t rbus_presence_load_script = {
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
rl_redis_script_t rbus_presence_lapse_script = {
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

static const char PRESENCE_KEY[] = "relay:presence";
static const char LEASES_KEY[] = "relay:presence:lease";
static const char SEQUENCE_KEY[] = "relay:presence:seq";

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
    c->expires_ms = rbus_mono_ms() + lease_ms;
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

void rbus_on_presence_message(struct redis_bus *bus, const char *payload, size_t len)
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
                c->expires_ms = rbus_mono_ms() + lease;
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

    if (rbus_key(retired, sizeof(retired), "relay:presence:retired:", installation_id) < 0 ||
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
    if (rl_redis_eval(bus->cmd, &rbus_presence_set_script, 4, 10, argv, lens, on_presence_set, op) != 0)
        free(op);
}

void redis_presence_set(rl_bus_t *super, const char *installation_id, const char *owner, const char *health)
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

void redis_presence_clear(rl_bus_t *super, const char *installation_id, const char *owner, rl_bus_cleared_cb cb,
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
        c->expires_ms = rbus_mono_ms() + bus->lease_ms;
        guess = 1;
    }
    *op = (struct clear_op){bus, cb, arg, guess};
    memcpy(op->installation_id, installation_id, id_len + 1);
    for (i = 0; i < 6; ++i)
        lens[i] = strlen(argv[i]);
    if (rl_redis_eval(bus->cmd, &rbus_presence_clear_script, 3, 6, argv, lens, on_presence_cleared, op) == 0)
        return;
    free(op);
    if (cb != NULL) {
        struct deferred *d = rbus_defer(bus, DEFER_CLEARED, arg);
        d->cleared_cb = cb;
        d->value = guess;
    }
}

const char *redis_presence_get(rl_bus_t *super, const char *installation_id)
{
    struct redis_bus *bus = (void *)super;
    struct cached *c = rl_strmap_get(bus->presence, installation_id);
    struct own *own = rl_strmap_get(bus->own, installation_id);
    int alive = c != NULL && !c->gone && c->expires_ms > rbus_mono_ms();

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

static void on_presence_loaded(redisReply *reply, void *arg)
{
    struct redis_bus *bus = arg;
    char health[16], owner[OWNER_MAX + 1];
    struct load_sweep sweep;
    int64_t seq;
    size_t i;

    if (bus->closing)
        return;
    if (reply == NULL || reply->type != REDIS_REPLY_ARRAY || reply->elements < 1 ||
        reply->element[0]->type != REDIS_REPLY_INTEGER) {
        if (reply != NULL && reply->type == REDIS_REPLY_ERROR)
            rl_log_warn("redis bus: loading presences failed: %s", reply->str);
        rbus_cache_to(bus, CACHE_EV_AGAIN);
        return;
    }
    rbus_cache_to(bus, bus->load_subscription == bus->presence_subscriptions ? CACHE_EV_LOADED : CACHE_EV_AGAIN);
    ++bus->loads;
    for (i = 1; i + 2 < reply->elements; i += 3) {
        const redisReply *id = reply->element[i], *value = reply->element[i + 1], *left = reply->element[i + 2];
        if (id->type == REDIS_REPLY_STRING && value->type == REDIS_REPLY_STRING && left->type == REDIS_REPLY_INTEGER &&
            parse_value(value->str, &seq, health, owner) == 0) {
            struct cached *c;
            apply(bus, id->str, seq, owner, health, left->integer, 0);
            /* A change the cache knew already: its lease is as the snapshot says. */
            if ((c = cached_get(bus, id->str, 0)) != NULL && c->seq == seq && !c->gone)
                c->expires_ms = rbus_mono_ms() + left->integer;
        }
    }
    /* What the snapshot does not hold, and no change after it brought, was cleared or lapsed before it. */
    sweep.load = bus->loads;
    sweep.snapshot = reply->element[0]->integer;
    rl_strmap_sweep(bus->presence, stale_after_load, &sweep, free);
    /* The subscription came back while this load was on its way: once more, after it. */
    rbus_maybe_load(bus);
}

/*
 * The presence cache's next state, by its state (rows) and the event
 * (columns). An event that cannot come in a state leaves it as it is.
 */
/* clang-format off */
static const enum cache_state cache_next[][CACHE_EV_AGAIN + 1] = {
    /* state                 SUBSCRIBED     LOST               SENT               LOADED        AGAIN */
    [CACHE_OFF]         = {CACHE_WANTED,  CACHE_OFF,         CACHE_OFF,         CACHE_OFF,    CACHE_OFF},
    [CACHE_OFF_LOADING] = {CACHE_LOADING, CACHE_OFF_LOADING, CACHE_OFF_LOADING, CACHE_OFF,    CACHE_OFF},
    [CACHE_WANTED]      = {CACHE_WANTED,  CACHE_OFF,         CACHE_LOADING,     CACHE_WANTED, CACHE_WANTED},
    [CACHE_LOADING]     = {CACHE_LOADING, CACHE_OFF_LOADING, CACHE_LOADING,     CACHE_LOADED, CACHE_WANTED},
    [CACHE_LOADED]      = {CACHE_WANTED,  CACHE_OFF,         CACHE_LOADED,      CACHE_LOADED, CACHE_LOADED},
};
/* clang-format on */

void rbus_cache_to(struct redis_bus *bus, enum cache_event event)
{
    bus->cache = cache_next[bus->cache][event];
}

/* Loads every presence into the cache, once subscribed to their changes (so that none falls in between). */
void rbus_maybe_load(struct redis_bus *bus)
{
    const char *argv[3] = {PRESENCE_KEY, LEASES_KEY, SEQUENCE_KEY};
    size_t lens[3] = {strlen(PRESENCE_KEY), strlen(LEASES_KEY), strlen(SEQUENCE_KEY)};

    if (bus->cache != CACHE_WANTED || !rl_redis_ready(bus->cmd))
        return;
    bus->load_subscription = bus->presence_subscriptions;
    if (rl_redis_eval(bus->cmd, &rbus_presence_load_script, 3, 3, argv, lens, on_presence_loaded, bus) == 0)
        rbus_cache_to(bus, CACHE_EV_SENT);
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
    if (rl_redis_eval(bus->cmd, &rbus_presence_renew_script, 3, (int)(5 + op->count), argv, lens, on_renewed, op) != 0)
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
    int64_t now = rbus_mono_ms();

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
    c->expires_ms = rbus_mono_ms() + bus->lease_ms;
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

    rl_redis_eval(bus->cmd, &rbus_presence_lapse_script, 3, 3, argv, lens, on_lapse_claimed, bus);
}

/* Every fifth of a lease: renew this node's presences, claim and drop the lapsed ones of the others. */
void rbus_on_renew(h2o_timeout_entry_t *entry)
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
        rbus_say_live(bus);
    }
    prune_cache(bus);
    rbus_maybe_load(bus);
}

int rbus_assert_own(const char *id, void *value, void *arg)
{
    send_presence_set(arg, id, value);
    return 0;
}

void redis_sweep(rl_bus_t *super, int64_t now_ms, unsigned parts)
{
    struct redis_bus *bus = (void *)super;
    int64_t now = rbus_mono_ms();

    /* Redis expires the rings and buckets itself; this node only has its presence cache to prune. */
    rl_strmap_sweep_part(bus->presence, lapsed, &now, free, parts);
}
