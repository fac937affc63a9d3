/*
 * The Redis bus's signals (docs/internals/bus.md, "Signals"): sending one
 * through the signal script (which logs it for late joiners), joining a
 * topic (a mark, the subscription, the log, then live), and the topics
 * told RL_BUS_MISSED when Redis answers again after signals to them were
 * lost.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus/bus_redis_internal.h"
#include "common/log.h"

/*
 * KEYS: the topic's counter and log (a list of its last messages, each
 * "<seq> <message>"). ARGV: message, channel, log length (0: the message
 * is not logged), lifetime (ms). A node that just joined reads the log for
 * what was sent between its join and its SUBSCRIBE taking effect
 * (docs/internals/bus.md). A new counter starts from the clock, so that
 * numbers keep growing after Redis lost its data.
 */
rl_redis_script_t rbus_signal_script = {LUA_NOW "local seq = redis.call('INCR', KEYS[1])\n"
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

void rbus_joined_free(void *p)
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
        rbus_read_log(bus, topic, j);
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
void rbus_read_log(struct redis_bus *bus, const char *topic, struct joined *j)
{
    char log[KEY_MAX];
    const char *argv[4] = {"LRANGE", log, "0", "-1"};
    size_t lens[4] = {6, 0, 1, 2};
    struct listen_op *op;

    if (j->live || j->reading || !j->marked || !j->subscribed)
        return;
    if (j->delivered < 0 || rbus_key(log, sizeof(log), "relay:sig:log:", topic) < 0 ||
        (op = rbus_listen_op_new(bus, topic, j->gen)) == NULL) {
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
        rbus_read_log(op->bus, op->name, j);
    }
    free(op);
}

void redis_join(rl_bus_t *super, const char *topic, int on)
{
    struct redis_bus *bus = (void *)super;
    struct joined *j = rl_strmap_get(bus->topics, topic);
    char counter[KEY_MAX];
    const char *argv[2] = {"GET", counter};
    size_t lens[2] = {3, 0};
    struct listen_op *op;

    if (!on) {
        if (j != NULL && --j->count == 0) {
            rbus_joined_free(rl_strmap_remove(bus->topics, topic));
            rbus_subscription(bus, "UNSUBSCRIBE", bus->signals_channel, topic);
        }
        return;
    }
    if (j != NULL) {
        ++j->count;
        return;
    }
    if (rbus_key(counter, sizeof(counter), "relay:sig:n:", topic) < 0 || (j = calloc(1, sizeof(*j))) == NULL ||
        rl_strmap_put(bus->topics, topic, j) != 0) {
        free(j);
        rl_log_warn("redis bus: too many topics, or one too long; a topic is not joined");
        return;
    }
    j->count = 1;
    j->gen = ++bus->listeners;
    j->delivered = -1;
    lens[1] = strlen(counter);
    if ((op = rbus_listen_op_new(bus, topic, j->gen)) == NULL ||
        rl_redis_command(bus->cmd, 2, argv, lens, on_topic_marked, op) != 0) {
        free(op);
        j->marked = 1;
    }
    rbus_subscription(bus, "SUBSCRIBE", bus->signals_channel, topic);
}

/* ---- signals and messages -------------------------------------------------------------------- */

/* A signal to topic could not be sent: counted, and the topic remembered to be told RL_BUS_MISSED later. */
static void signal_dropped(struct redis_bus *bus, const char *topic)
{
    rbus_count_drops(bus, &bus->dropped_signals, 1, "a signal");
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

static int tell_missed(const char *topic, void *value, void *arg)
{
    redis_signal(arg, topic, json_pack("{s:s}", "type", RL_BUS_MISSED));
    return 1;
}

/* Redis answers again: every topic this node lost a signal to is told RL_BUS_MISSED. */
void rbus_send_missed(struct redis_bus *bus)
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

void redis_signal(rl_bus_t *super, const char *topic, json_t *message)
{
    struct redis_bus *bus = (void *)super;
    char counter[KEY_MAX], log[KEY_MAX], channel[KEY_MAX], length[16], ttl[24];
    char *text = json_dumps(message, JSON_COMPACT);
    const char *argv[6] = {counter, log, text, channel, length, ttl};
    struct signalled *sent;
    size_t lens[6], i;

    json_decref(message);
    if (text == NULL || rbus_key(channel, sizeof(channel), bus->signals_channel, topic) < 0 ||
        rbus_key(counter, sizeof(counter), "relay:sig:n:", topic) < 0 ||
        rbus_key(log, sizeof(log), "relay:sig:log:", topic) < 0) {
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
    if (rl_redis_eval(bus->cmd, &rbus_signal_script, 2, 6, argv, lens, on_signalled, sent) != 0) {
        free(sent);
        signal_dropped(bus, topic);
    }
out:
    free(text);
}

void rbus_on_signal_message(struct redis_bus *bus, const char *topic, const redisReply *payload)
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
