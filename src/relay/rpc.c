/* Requests from relayd to a bridge, through the bus (rpc.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "common/rand.h"
#include "common/strmap.h"
#include "relay/relay.h"
#include "relay/rpc.h"
#include "relay/updates.h"

#define PENDING_MAX 4096

struct pending {
    rl_rpc_t *rpc;
    rl_call_t *call;
    char req_id[64];
    void (*answer)(rl_call_t *call, json_t *reply, int error);
    h2o_timeout_entry_t timer;
};

struct rl_rpc {
    rl_relay_t *relay;
    rl_strmap_t *pending; /* req_id -> struct pending */
    h2o_timeout_t timeout;
    char topic[64];
};

static void topic_of(const char *node_id, char *out, size_t outsz)
{
    snprintf(out, outsz, "rpc:%s", node_id);
}

static void settle(struct pending *p, json_t *reply, int error)
{
    if (h2o_timeout_is_linked(&p->timer))
        h2o_timeout_unlink(&p->timer);
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

    if (rpc == NULL || (rpc->pending = rl_strmap_new(PENDING_MAX)) == NULL) {
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
    if (h2o_timeout_is_linked(&p->timer))
        h2o_timeout_unlink(&p->timer);
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
    rl_bus_join(rpc->relay->bus, rpc->topic, 0);
    h2o_timeout_dispose(rpc->relay->loop, &rpc->timeout);
    free(rpc);
}

void rl_rpc_ask(rl_rpc_t *rpc, rl_call_t *call, const char *installation_id, json_t *frame,
                void (*answer)(rl_call_t *call, json_t *reply, int error))
{
    rl_relay_t *relay = rpc->relay;
    struct pending *p;
    char topic[96], random[24];

    /* No socket of the installation on any node: say so now rather than after the timeout. */
    if (strcmp(rl_bus_presence_get(relay->bus, installation_id), "offline") == 0 ||
        rl_strmap_size(rpc->pending) >= PENDING_MAX || (p = calloc(1, sizeof(*p))) == NULL) {
        json_decref(frame);
        answer(call, NULL, RL_E_BRIDGE_OFFLINE);
        return;
    }
    p->rpc = rpc;
    p->call = call;
    p->answer = answer;
    rl_rand_base62(random, 16);
    random[16] = '\0';
    snprintf(p->req_id, sizeof(p->req_id), "rq_%s.%s", relay->node_id, random);
    if (rl_strmap_put(rpc->pending, p->req_id, p) != 0) {
        free(p);
        json_decref(frame);
        answer(call, NULL, RL_E_BRIDGE_OFFLINE);
        return;
    }
    rl_call_hold(call);
    p->timer.cb = on_timeout;
    h2o_timeout_link(relay->loop, &rpc->timeout, &p->timer);
    json_object_set_new(frame, "req_id", json_string(p->req_id));
    rl_update_topic(installation_id, topic, sizeof(topic));
    rl_bus_signal(relay->bus, topic, json_pack("{s:s, s:o}", "type", "request", "frame", frame));
}

void rl_rpc_bridge_answered(rl_relay_t *relay, const char *installation_id, json_t *frame, size_t len)
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
    rl_bus_signal(relay->bus, topic, json_pack("{s:s, s:O}", "type", "response", "frame", frame));
}

void rl_rpc_on_signal(rl_relay_t *relay, const char *topic, json_t *message)
{
    json_t *frame = json_object_get(message, "frame");
    const char *req_id = json_string_value(json_object_get(frame, "req_id"));
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
    settle(p, frame, 0);
}
