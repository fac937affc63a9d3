/* Requests from relayd to a bridge, through the bus (rpc.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/rand.h"
#include "common/strmap.h"
#include "relay/core/relay.h"
#include "relay/core/rpc.h"
#include "relay/core/updates.h"

/*
 * The caps on what waits for bridges on this node (docs/api.md "The
 * bridge's socket"). An installation's and a user's own caps come first, so
 * that bridges which never answer hold at most their owner's share; the
 * node's cap stays as the last guard.
 */
#define PENDING_MAX          4096
#define PER_INSTALLATION_MAX 16
#define PER_USER_MAX         64
#define RETRY_MIN_MS         1000

struct pending {
    rl_rpc_t *rpc;
    rl_call_t *call;
    char req_id[64];
    char installation_id[64];
    char user_id[RL_PRINCIPAL_MAX + 1];
    int64_t deadline_ms;
    void (*answer)(rl_call_t *call, json_t *reply, int error);
    h2o_timeout_entry_t timer;
};

/* How many requests of one installation ("i:<id>") or one user ("u:<id>") wait. */
struct count {
    unsigned n;
};

struct rl_rpc {
    rl_relay_t *relay;
    rl_strmap_t *pending; /* req_id -> struct pending */
    rl_strmap_t *counts;  /* "i:<installation>" or "u:<user>" -> struct count */
    h2o_timeout_t timeout;
    char topic[64];
};

static void topic_of(const char *node_id, char *out, size_t outsz)
{
    snprintf(out, outsz, "rpc:%s", node_id);
}

static void count_key(char scope, const char *id, char *out, size_t outsz)
{
    snprintf(out, outsz, "%c:%s", scope, id);
}

static unsigned count_of(const rl_rpc_t *rpc, char scope, const char *id)
{
    char key[RL_PRINCIPAL_MAX + 8];
    const struct count *count;

    count_key(scope, id, key, sizeof(key));
    count = rl_strmap_get(rpc->counts, key);
    return count != NULL ? count->n : 0;
}

/* Adds one (up) or takes one away; an entry lives only while its count is not 0. */
static int count_step(rl_rpc_t *rpc, char scope, const char *id, int up)
{
    char key[RL_PRINCIPAL_MAX + 8];
    struct count *count;

    count_key(scope, id, key, sizeof(key));
    count = rl_strmap_get(rpc->counts, key);
    if (!up) {
        if (count != NULL && --count->n == 0)
            free(rl_strmap_remove(rpc->counts, key));
        return 0;
    }
    if (count == NULL) {
        count = calloc(1, sizeof(*count));
        if (count == NULL || rl_strmap_put(rpc->counts, key, count) != 0) {
            free(count);
            return -1;
        }
    }
    ++count->n;
    return 0;
}

static void forget(struct pending *p)
{
    if (h2o_timeout_is_linked(&p->timer))
        h2o_timeout_unlink(&p->timer);
    count_step(p->rpc, 'i', p->installation_id, 0);
    count_step(p->rpc, 'u', p->user_id, 0);
}

static void settle(struct pending *p, json_t *reply, int error)
{
    forget(p);
    rl_strmap_remove(p->rpc->pending, p->req_id);
    p->answer(p->call, reply, error);
    rl_call_release(p->call);
    free(p);
}

static void on_timeout(h2o_timeout_entry_t *entry)
{
    struct pending *p = H2O_STRUCT_FROM_MEMBER(struct pending, timer, entry);

    settle(p, NULL, RL_E_BRIDGE_TIMEOUT);
}

rl_rpc_t *rl_rpc_new(rl_relay_t *relay)
{
    rl_rpc_t *rpc = calloc(1, sizeof(*rpc));

    if (rpc == NULL)
        return NULL;
    rpc->pending = rl_strmap_new(PENDING_MAX);
    /* At most two counts per pending request. */
    rpc->counts = rl_strmap_new(2 * PENDING_MAX);
    if (rpc->pending == NULL || rpc->counts == NULL) {
        rl_strmap_free(rpc->pending, NULL);
        rl_strmap_free(rpc->counts, NULL);
        free(rpc);
        return NULL;
    }
    rpc->relay = relay;
    h2o_timeout_init(relay->loop, &rpc->timeout, RL_RPC_TIMEOUT_MS);
    topic_of(relay->node_id, rpc->topic, sizeof(rpc->topic));
    rl_bus_join(relay->bus, rpc->topic, 1);
    return rpc;
}

static int settle_unavailable(const char *key, void *value, void *arg)
{
    struct pending *p = value;

    (void)key, (void)arg;
    forget(p);
    p->answer(p->call, NULL, RL_E_BRIDGE_OFFLINE);
    rl_call_release(p->call);
    free(p);
    return 1;
}

void rl_rpc_free(rl_rpc_t *rpc)
{
    if (rpc == NULL)
        return;
    rl_strmap_sweep(rpc->pending, settle_unavailable, NULL, NULL);
    rl_strmap_free(rpc->pending, NULL);
    rl_strmap_free(rpc->counts, free);
    rl_bus_join(rpc->relay->bus, rpc->topic, 0);
    h2o_timeout_dispose(rpc->relay->loop, &rpc->timeout);
    free(rpc);
}

/* The soonest deadline among the requests of one scope ('n': all of the node's). */
struct soonest {
    char scope;
    const char *id;
    int64_t deadline_ms;
};

static int find_soonest(const char *key, void *value, void *arg)
{
    const struct pending *p = value;
    struct soonest *s = arg;
    const char *id = s->scope == 'i' ? p->installation_id : s->scope == 'u' ? p->user_id : NULL;

    (void)key;
    if ((id == NULL || strcmp(id, s->id) == 0) && (s->deadline_ms == 0 || p->deadline_ms < s->deadline_ms))
        s->deadline_ms = p->deadline_ms;
    return 0;
}

/*
 * Which cap, if any, a new request of installation_id for user_id would
 * pass: the installation's, the user's, then the node's. Retry-After is
 * when the soonest of the requests that fill it is answered or times out.
 */
static int refuse_over_cap(rl_rpc_t *rpc, rl_call_t *call, const char *installation_id, const char *user_id)
{
    static const struct {
        char scope;
        const char *name;
        unsigned max;
        int error;
    } caps[] = {
        {'i', "installation", PER_INSTALLATION_MAX, RL_E_BRIDGE_BUSY},
        {'u', "user", PER_USER_MAX, RL_E_BRIDGE_BUSY},
        {'n', "node", PENDING_MAX, RL_E_UNAVAILABLE},
    };
    struct soonest soonest = {0, NULL, 0};
    char message[160];
    size_t i;
    unsigned n = 0;
    int64_t wait;

    for (i = 0; i < sizeof(caps) / sizeof(caps[0]); ++i) {
        soonest.scope = caps[i].scope;
        soonest.id = caps[i].scope == 'i' ? installation_id : user_id;
        n = caps[i].scope == 'n' ? (unsigned)rl_strmap_size(rpc->pending) : count_of(rpc, caps[i].scope, soonest.id);
        if (n >= caps[i].max)
            break;
    }
    if (i == sizeof(caps) / sizeof(caps[0]))
        return 0;
    rl_strmap_sweep(rpc->pending, find_soonest, &soonest, NULL);
    wait = soonest.deadline_ms - rl_clock_mono_ms();
    call->rate.retry_after_ms = wait > RETRY_MIN_MS ? wait : RETRY_MIN_MS;
    snprintf(message, sizeof(message), "%u requests of this %s already wait for a bridge's answer (the cap is %u)", n,
             caps[i].name, caps[i].max);
    rl_call_fail_full(call, caps[i].error, message, NULL,
                      json_pack("{s:s, s:i}", "cap", caps[i].name, "limit", (int)caps[i].max));
    rl_log_info("a request to bridge %s was refused: the %s cap (%u) is reached", installation_id, caps[i].name,
                caps[i].max);
    return 1;
}

void rl_rpc_ask(rl_rpc_t *rpc, rl_call_t *call, const char *installation_id, json_t *frame,
                void (*answer)(rl_call_t *call, json_t *reply, int error))
{
    rl_relay_t *relay = rpc->relay;
    struct pending *p = NULL;
    char topic[96], random[24];

    /* No socket of the installation on any node: say so now rather than after the timeout. */
    if (strcmp(rl_bus_presence_get(relay->bus, installation_id), "offline") == 0)
        goto offline;
    if (refuse_over_cap(rpc, call, installation_id, call->principal)) {
        json_decref(frame);
        return;
    }
    p = calloc(1, sizeof(*p));
    if (p == NULL)
        goto offline;
    p->rpc = rpc;
    p->call = call;
    p->answer = answer;
    snprintf(p->installation_id, sizeof(p->installation_id), "%s", installation_id);
    snprintf(p->user_id, sizeof(p->user_id), "%s", call->principal);
    rl_rand_base62(random, 16);
    random[16] = '\0';
    snprintf(p->req_id, sizeof(p->req_id), "rq_%s.%s", relay->node_id, random);
    if (rl_strmap_put(rpc->pending, p->req_id, p) != 0)
        goto offline;
    if (count_step(rpc, 'i', p->installation_id, 1) != 0) {
        rl_strmap_remove(rpc->pending, p->req_id);
        goto offline;
    }
    if (count_step(rpc, 'u', p->user_id, 1) != 0) {
        count_step(rpc, 'i', p->installation_id, 0);
        rl_strmap_remove(rpc->pending, p->req_id);
        goto offline;
    }
    rl_call_hold(call);
    p->deadline_ms = rl_clock_mono_ms() + RL_RPC_TIMEOUT_MS;
    p->timer.cb = on_timeout;
    h2o_timeout_link(relay->loop, &rpc->timeout, &p->timer);
    json_object_set_new(frame, "req_id", json_string(p->req_id));
    rl_update_topic(installation_id, topic, sizeof(topic));
    rl_bus_signal(relay->bus, topic, json_pack("{s:s, s:o}", "type", "request", "frame", frame));
    return;

offline:
    free(p);
    json_decref(frame);
    answer(call, NULL, RL_E_BRIDGE_OFFLINE);
}

void rl_rpc_bridge_answered(rl_rpc_t *rpc, const char *installation_id, json_t *frame, size_t len)
{
    const char *req_id = json_string_value(json_object_get(frame, "req_id"));
    const char *dot = req_id != NULL ? strchr(req_id, '.') : NULL;
    char node[32], topic[64];

    if (req_id == NULL || strncmp(req_id, "rq_", 3) != 0 || dot == NULL || (size_t)(dot - req_id - 3) >= sizeof(node)) {
        rl_log_debug("bridge %s answered a request relayd did not send", installation_id);
        return;
    }
    if (len > RL_RPC_REPLY_MAX) {
        rl_log_warn("bridge %s answered %s with %zu bytes, over the %d cap; dropped", installation_id, req_id, len,
                    RL_RPC_REPLY_MAX);
        return;
    }
    memcpy(node, req_id + 3, (size_t)(dot - req_id - 3));
    node[dot - req_id - 3] = '\0';
    topic_of(node, topic, sizeof(topic));
    /* The installation that answered rides along: the asking node takes the answer only from the one it asked. */
    rl_bus_signal(rpc->relay->bus, topic,
                  json_pack("{s:s, s:s, s:O}", "type", "response", "installation_id", installation_id, "frame", frame));
}

void rl_rpc_on_signal(rl_relay_t *relay, const char *topic, json_t *message)
{
    json_t *frame = json_object_get(message, "frame");
    const char *req_id = json_string_value(json_object_get(frame, "req_id"));
    const char *from = json_string_value(json_object_get(message, "installation_id"));
    struct pending *p;

    (void)topic;
    if (relay->rpc == NULL || req_id == NULL)
        return;
    p = rl_strmap_get(relay->rpc->pending, req_id);
    if (p == NULL) {
        /* Answered after its timeout, or a req_id nobody here sent. */
        rl_log_debug("an answer to the unknown request %s was dropped", req_id);
        return;
    }
    if (from == NULL || strcmp(from, p->installation_id) != 0) {
        rl_log_warn("bridge %s answered %s, a request to bridge %s; dropped", from != NULL ? from : "(unnamed)", req_id,
                    p->installation_id);
        return;
    }
    settle(p, frame, 0);
}

void rl_rpc_pass_on(rl_call_t *call, json_t *reply, int error)
{
    json_t *copy;

    if (error != 0) {
        rl_call_fail(call, error, NULL);
        return;
    }
    if (json_is_object(json_object_get(reply, "error"))) {
        rl_call_fail_full(call, RL_E_UPSTREAM, "the bridge could not answer", NULL,
                          json_pack("{s:O}", "bridge_error", json_object_get(reply, "error")));
        return;
    }
    copy = json_deep_copy(reply);
    json_object_del(copy, "type");
    json_object_del(copy, "req_id");
    rl_call_reply(call, copy);
}
