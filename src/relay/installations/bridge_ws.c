/*
 * One bridge socket per installation. Updates are durable in the store until
 * acknowledged: on connect the socket replays what is unacknowledged from
 * the replay window, in order, then follows new updates as they are queued,
 * always reading from the store after the last id it sent, so that replay
 * and live delivery can never reorder or skip.
 *
 * What other nodes need to know travels on the bus: the node holding an
 * installation's socket joins the installation's topic, where "updates"
 * (read the queue again) and "replaced" (a newer socket opened elsewhere)
 * arrive; revocations arrive on the auth topic; the socket's health is its
 * presence, which every node reads.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <h2o/websocket.h>

#include "bus/bus.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/strmap.h"
#include "http/later.h"
#include "relay/media/attachments.h"
#include "relay/installations/bridge_ws.h"
#include "relay/installations/context.h"
#include "relay/installations/installations.h"
#include "relay/e2e/e2e.h"
#include "relay/core/rpc.h"
#include "relay/core/hub.h"
#include "relay/core/ops.h"
#include "relay/core/updates.h"

#define FRAME_MAX        (64 * 1024) /* the largest frame a bridge may send, but for an answer awaited */
#define ASKED_MAX        64          /* requests one socket waits to answer: 16 per asking node, a few nodes */
#define ASKED_GRACE_MS   5000        /* a request is forgotten this long after its asker stopped waiting */
#define QUEUED_MAX       1024        /* frames waiting for a bridge that does not read */
#define FETCH_BATCH      128
#define SOCKETS_MAX      200000
#define MISSED_PONGS_MAX 3 /* spec: after three missed pongs the socket closes with 4001 */

enum health { HEALTH_HEALTHY, HEALTH_DEGRADED };

struct asked {
    char req_id[64];
    int64_t until_ms; /* monotonic: forgotten after */
};

struct rl_bridge_ws {
    rl_installations_ctx_t *ctx;
    rl_strmap_t *sockets; /* installation id -> its socket on this node */
    h2o_timeout_t ping_timeout, pong_timeout, asked_timeout;
    uint64_t connections;          /* counts sockets opened, for their owner ids */
    size_t live;                   /* sockets whose connection is not over */
    int shutting_down;             /* rl_bridge_ws_close_all ran: no new sockets */
    uint64_t pings, pongs, missed; /* pings sent, pongs read, pong deadlines passed (relay_bridge_pings_total) */
    rl_later_t reaper;             /* sockets whose connection ended this turn drop its reference after the turn */
};

struct bridge_socket {
    rl_installations_ctx_t *ctx;
    rl_bridge_ws_t *registry;
    h2o_websocket_conn_t *ws;
    char installation_id[32];
    char owner[64]; /* this connection, unique across nodes (presence and replacement) */
    char user_id[RL_PRINCIPAL_MAX + 1];
    int64_t sent_up_to;
    unsigned pending; /* store operations in flight that hold this socket */
    int fetching, refetch;
    int awaiting_pong, missed_pongs;
    enum health health;
    int registered; /* the registry's socket for its installation, joined to its topic */
    int closing;    /* a close frame is queued */
    int gone;       /* the connection is closed; free once pending drops to 0 */
    /*
     * Requests of relayd sent on this socket and not answered yet (rpc.h),
     * oldest first; allocated only while one waits, when the socket also
     * takes frames up to RL_RPC_REPLY_MAX instead of FRAME_MAX.
     */
    struct asked *asked;
    unsigned nasked;
    h2o_timeout_entry_t ping_timer, pong_timer, close_timer, asked_timer;
    rl_later_item_t reap;
};

static void publish_health(rl_installations_ctx_t *ctx, const char *user_id, const char *installation_id,
                           const char *status)
{
    rl_hub_publish(ctx->hub, user_id, RL_EV_AGENT_HEALTH_CHANGED,
                   json_pack("{s:s, s:s}", "installation_id", installation_id, "status", status));
}

/* Joins (on 1) or leaves the installation's topic, where updates and replacements are signalled. */
static void join(struct bridge_socket *sock, int on)
{
    char topic[96];

    rl_update_topic(sock->installation_id, topic, sizeof(topic));
    rl_bus_join(sock->ctx->bus, topic, on);
}

struct offline {
    rl_installations_ctx_t *ctx;
    char installation_id[32];
    char user_id[RL_PRINCIPAL_MAX + 1];
};

static void on_presence_cleared(int cleared, void *arg)
{
    struct offline *offline = arg;

    /* Only if no newer socket (on this node or another) took the installation over. */
    if (cleared) {
        publish_health(offline->ctx, offline->user_id, offline->installation_id, "offline");
        rl_log_info("bridge %s disconnected", offline->installation_id);
    }
    free(offline);
}

/*
 * A presence lapsed on the bus: the node that held the socket died (or lost
 * the bus) without closing it, and this node was picked to tell the user.
 * The bus knows installations, not users: the store says whose it is.
 */
struct lapsed {
    rl_op_t op;
    const char *installation_id;
    rl_installation_row_t row;
};

static int lapsed_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct lapsed *op = (void *)base;

    return RL_TXN(txn, installation_get, op->installation_id, &op->row);
}

static const rl_store_op_type_t lapsed_type = RL_OP_TYPE(presence_lapsed, 0, lapsed_run);

static void on_lapsed_owner(rl_store_op_t *base)
{
    struct lapsed *op = (void *)base;
    rl_bridge_ws_t *registry = base->arg;
    rl_installations_ctx_t *ctx = registry->ctx;

    /* A revoked installation was announced offline by its revocation; a socket that came back meanwhile is not. */
    if (base->result != 0 || strcmp(op->row.state, "live") != 0 ||
        strcmp(rl_bus_presence_get(ctx->bus, op->installation_id), "offline") != 0)
        return;
    publish_health(ctx, op->row.user_id, op->installation_id, "offline");
    rl_log_info("bridge %s lost with its node (its presence lapsed)", op->installation_id);
}

void rl_bridge_ws_lapsed(rl_bridge_ws_t *registry, const char *installation_id)
{
    struct lapsed *op = rl_op_new(&lapsed_type, sizeof(*op));

    op->installation_id = rl_op_str(op, installation_id);
    rl_store_submit(registry->ctx->store, &op->op.base, on_lapsed_owner, registry);
}

static void unlink_timers(struct bridge_socket *sock)
{
    if (h2o_timeout_is_linked(&sock->ping_timer))
        h2o_timeout_unlink(&sock->ping_timer);
    if (h2o_timeout_is_linked(&sock->pong_timer))
        h2o_timeout_unlink(&sock->pong_timer);
    if (h2o_timeout_is_linked(&sock->close_timer))
        h2o_timeout_unlink(&sock->close_timer);
    if (h2o_timeout_is_linked(&sock->asked_timer))
        h2o_timeout_unlink(&sock->asked_timer);
}

static void release(struct bridge_socket *sock)
{
    if (--sock->pending == 0 && sock->gone) {
        free(sock->asked);
        free(sock);
    }
}

/* The connection is over: forget it, tell the user the agent is offline if no newer socket took its place. */
/* The socket is no longer the one this node serves its installation with. */
static void detach(struct bridge_socket *sock)
{
    if (!sock->registered)
        return;
    sock->registered = 0;
    rl_strmap_remove(sock->registry->sockets, sock->installation_id);
    join(sock, 0);
}

static void finish(struct bridge_socket *sock)
{
    struct offline *offline;

    if (sock->gone)
        return;
    sock->gone = 1;
    --sock->registry->live;
    unlink_timers(sock);
    if (sock->registered) {
        detach(sock);
        if ((offline = calloc(1, sizeof(*offline))) != NULL) {
            offline->ctx = sock->ctx;
            memcpy(offline->installation_id, sock->installation_id, sizeof(offline->installation_id));
            memcpy(offline->user_id, sock->user_id, sizeof(offline->user_id));
        }
        rl_bus_presence_clear(sock->ctx->bus, sock->installation_id, sock->owner,
                              offline != NULL ? on_presence_cleared : NULL, offline);
    }
    sock->ws = NULL;
    /*
     * The connection's own reference is dropped after the loop turn, never
     * inside the callback that saw the connection end; store operations in
     * flight hold theirs.
     */
    rl_later_add(&sock->registry->reaper, &sock->reap);
}

static void reap(rl_later_item_t *item)
{
    release(H2O_STRUCT_FROM_MEMBER(struct bridge_socket, reap, item));
}

static void proceed(struct bridge_socket *sock)
{
    /* Until h2o has sent the 101 the socket is not attached; it proceeds by itself then. */
    if (sock->ws != NULL && sock->ws->sock != NULL)
        h2o_websocket_proceed(sock->ws);
}

static void close_with(struct bridge_socket *sock, uint16_t code, const char *reason)
{
    if (sock->gone || sock->closing)
        return;
    sock->closing = 1;
    wslay_event_queue_close(sock->ws->ws_ctx, code, (const uint8_t *)reason, strlen(reason));
    if (h2o_timeout_is_linked(&sock->ping_timer))
        h2o_timeout_unlink(&sock->ping_timer);
    if (h2o_timeout_is_linked(&sock->pong_timer))
        h2o_timeout_unlink(&sock->pong_timer);
    /* A peer that never answers the close frame is dropped after the pong deadline. */
    h2o_timeout_link(sock->ctx->loop, &sock->registry->pong_timeout, &sock->close_timer);
    proceed(sock);
}

/* Queues one JSON frame; a bridge that lets too many pile up is cut off (it gets the rest on reconnect). */
static int send_frame(struct bridge_socket *sock, json_t *frame)
{
    struct wslay_event_msg msg;
    char *text;
    int result;

    if (sock->gone || sock->closing) {
        json_decref(frame);
        return -1;
    }
    if (wslay_event_get_queued_msg_count(sock->ws->ws_ctx) >= QUEUED_MAX) {
        json_decref(frame);
        rl_log_warn("bridge %s is not reading; closing its socket", sock->installation_id);
        close_with(sock, 1008, "too many unread frames");
        return -1;
    }
    text = json_dumps(frame, JSON_COMPACT);
    json_decref(frame);
    if (text == NULL)
        return -1;
    msg.opcode = WSLAY_TEXT_FRAME;
    msg.msg = (const uint8_t *)text;
    msg.msg_length = strlen(text);
    /* wslay copies the message into its queue. */
    result = wslay_event_queue_msg(sock->ws->ws_ctx, &msg);
    free(text);
    proceed(sock);
    return result == 0 ? 0 : -1;
}

static json_t *update_frame(struct bridge_socket *sock, const rl_update_row_t *row)
{
    char id[24], created[RL_ISO8601_LEN];
    json_t *payload = json_loads(row->payload, 0, NULL);
    json_t *message;

    if (payload == NULL)
        payload = json_object();
    message = json_object_get(payload, "message");
    snprintf(id, sizeof(id), "%lld", (long long)row->update_id);
    rl_clock_iso8601(row->created_at, created);
    /* brief: delivery hydrates a signed, expiring URL for each attachment. */
    if (message != NULL)
        rl_attachments_sign(sock->ctx->media, json_object_get(message, "attachments"));
    /* ours: a device_capability.result's photo, likewise. */
    rl_attachments_sign(sock->ctx->media, json_object_get(payload, "attachments"));
    return json_pack("{s:s, s:{s:s, s:s, s:s?, s:s?, s:s, s:s, s:o}}", "type", "update", "update", "update_id", id,
                     "type", row->type, "session_id", row->session_id, "interaction_id", row->interaction_id,
                     "installation_id", sock->installation_id, "created_at", created, "payload", payload);
}

static void fetch(struct bridge_socket *sock);

struct updates_read {
    rl_op_t op;
    const char *installation_id;
    int64_t after_id, since;
    int limit;
    rl_update_row_t *rows; /* results */
    size_t count;
};

static int updates_read_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct updates_read *op = (void *)base;

    return RL_TXN(txn, updates_after, op->installation_id, op->after_id, op->since, op->limit, &op->rows, &op->count);
}

static const rl_store_op_type_t updates_read_type = RL_OP_TYPE(updates_list, 0, updates_read_run);

static void on_fetched(rl_store_op_t *base)
{
    struct updates_read *op = (void *)base;
    struct bridge_socket *sock = base->arg;
    size_t i;

    sock->fetching = 0;
    if (!sock->gone && base->result == 0) {
        for (i = 0; i < op->count; ++i) {
            if (op->rows[i].update_id <= sock->sent_up_to)
                continue;
            if (send_frame(sock, update_frame(sock, &op->rows[i])) != 0)
                break;
            sock->sent_up_to = op->rows[i].update_id;
        }
        if (op->count == FETCH_BATCH || sock->refetch) {
            sock->refetch = 0;
            fetch(sock);
        }
    }
    release(sock);
}

static void fetch(struct bridge_socket *sock)
{
    struct updates_read *op;

    if (sock->gone || sock->closing)
        return;
    if (sock->fetching) {
        sock->refetch = 1;
        return;
    }
    sock->fetching = 1;
    ++sock->pending;
    op = rl_op_new(&updates_read_type, sizeof(*op));
    op->installation_id = rl_op_str(op, sock->installation_id);
    op->after_id = sock->sent_up_to;
    /* spec: on reconnect, unacknowledged updates from the last 5 minutes are replayed, in order. */
    op->since = rl_clock_now_ms() - sock->ctx->config->replay_window;
    op->limit = FETCH_BATCH;
    rl_store_submit(sock->ctx->store, &op->op.base, on_fetched, sock);
}

/* ---- requests of relayd waiting for this socket's answer ---- */

/* The frame cap follows the requests: a large answer is taken only while one is awaited. */
static void set_frame_cap(struct bridge_socket *sock)
{
    if (sock->ws != NULL)
        wslay_event_config_set_max_recv_msg_length(sock->ws->ws_ctx, sock->nasked > 0 ? RL_RPC_REPLY_MAX : FRAME_MAX);
}

static void asked_remove(struct bridge_socket *sock, unsigned at)
{
    memmove(&sock->asked[at], &sock->asked[at + 1], (sock->nasked - at - 1) * sizeof(sock->asked[0]));
    if (--sock->nasked > 0)
        return;
    /* An idle socket holds nothing for requests. */
    free(sock->asked);
    sock->asked = NULL;
    if (h2o_timeout_is_linked(&sock->asked_timer))
        h2o_timeout_unlink(&sock->asked_timer);
    set_frame_cap(sock);
}

static void asked_add(struct bridge_socket *sock, const char *req_id)
{
    struct asked *entry;

    if (req_id == NULL || strlen(req_id) >= sizeof(entry->req_id))
        return;
    if (sock->asked == NULL)
        sock->asked = calloc(ASKED_MAX, sizeof(*sock->asked));
    if (sock->asked == NULL)
        return;
    if (sock->nasked == ASKED_MAX) {
        rl_log_warn("bridge %s has %d requests unanswered; the oldest is forgotten", sock->installation_id, ASKED_MAX);
        asked_remove(sock, 0);
    }
    entry = &sock->asked[sock->nasked++];
    snprintf(entry->req_id, sizeof(entry->req_id), "%s", req_id);
    entry->until_ms = rl_clock_mono_ms() + RL_RPC_TIMEOUT_MS + ASKED_GRACE_MS;
    if (!h2o_timeout_is_linked(&sock->asked_timer))
        h2o_timeout_link(sock->ctx->loop, &sock->registry->asked_timeout, &sock->asked_timer);
    set_frame_cap(sock);
}

/* The index of req_id among the requests this socket was sent and still awaits, or -1. */
static int asked_find(const struct bridge_socket *sock, const char *req_id)
{
    int64_t now = rl_clock_mono_ms();
    unsigned i;

    for (i = 0; req_id != NULL && i < sock->nasked; ++i)
        if (strcmp(sock->asked[i].req_id, req_id) == 0)
            return sock->asked[i].until_ms > now ? (int)i : -1;
    return -1;
}

static void on_asked_timer(h2o_timeout_entry_t *entry)
{
    struct bridge_socket *sock = H2O_STRUCT_FROM_MEMBER(struct bridge_socket, asked_timer, entry);
    int64_t now = rl_clock_mono_ms();

    /*
     * The askers gave up on these (504): their answers are no longer taken
     * (asked_find), nor, from now, large frames. An entry added after the
     * timer was linked waits for the next turn of it: at most one more period.
     */
    while (sock->nasked > 0 && sock->asked[0].until_ms <= now)
        asked_remove(sock, 0);
    if (sock->nasked > 0 && !h2o_timeout_is_linked(&sock->asked_timer))
        h2o_timeout_link(sock->ctx->loop, &sock->registry->asked_timeout, &sock->asked_timer);
}

void rl_bridge_ws_on_signal(rl_bridge_ws_t *registry, const char *topic, json_t *message)
{
    const char *type = json_string_value(json_object_get(message, "type"));
    const char *installation_id = strchr(topic, ':') != NULL ? strchr(topic, ':') + 1 : "";
    struct bridge_socket *sock = rl_strmap_get(registry->sockets, installation_id);
    const char *owner = json_string_value(json_object_get(message, "owner"));

    if (sock == NULL || type == NULL)
        return;
    if (strcmp(type, "updates") == 0) {
        if (json_integer_value(json_object_get(message, "update_id")) > sock->sent_up_to)
            fetch(sock);
    } else if (strcmp(type, RL_BUS_MISSED) == 0) {
        /* Updates may have been queued while their signals were lost: the queue is read again. */
        fetch(sock);
    } else if (strcmp(type, "request") == 0 && json_is_object(json_object_get(message, "frame"))) {
        /* issue 26: a request of any node to this bridge (rpc.c); only this socket may answer it. */
        if (send_frame(sock, json_incref(json_object_get(message, "frame"))) == 0)
            asked_add(sock, json_string_value(json_object_get(json_object_get(message, "frame"), "req_id")));
    } else if (strcmp(type, "replaced") == 0 && owner != NULL && strcmp(owner, sock->owner) != 0) {
        /* A newer socket of this installation opened on another node: it takes over (and its presence). */
        detach(sock);
        close_with(sock, 1000, "replaced by a newer connection of this installation");
    }
}

void rl_bridge_ws_revoked(rl_bridge_ws_t *registry, const char *installation_id)
{
    struct bridge_socket *sock = rl_strmap_get(registry->sockets, installation_id);

    /* spec: close code 4401 tells the bridge it is unauthorised and must not reconnect. */
    if (sock != NULL)
        close_with(sock, 4401, "installation revoked");
}

struct updates_ack {
    rl_op_t op;
    const char *installation_id;
    int64_t up_to;
};

static int updates_ack_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct updates_ack *op = (void *)base;

    return RL_TXN(txn, updates_ack, op->installation_id, op->up_to);
}

static const rl_store_op_type_t updates_ack_type = RL_OP_TYPE(updates_ack, 1, updates_ack_run);

static void on_acked(rl_store_op_t *base)
{
    struct bridge_socket *sock = base->arg;

    if (base->result != 0 && !sock->gone)
        rl_log_warn("bridge %s: could not record an ack", sock->installation_id);
    release(sock);
}

static void set_health(struct bridge_socket *sock, enum health health)
{
    const char *status = health == HEALTH_HEALTHY ? "healthy" : "degraded";

    if (sock->health == health)
        return;
    sock->health = health;
    rl_bus_presence_set(sock->ctx->bus, sock->installation_id, sock->owner, status);
    publish_health(sock->ctx, sock->user_id, sock->installation_id, status);
}

/*
 * spec: the bridge acks up_to_update_id, a string, to let the server drop
 * updates up to it. An ack can only cover what was sent on this socket (ids
 * 1..sent_up_to): anything else is -1 and ignored. 0 with *up_to otherwise.
 */
static int ack_up_to(const char *text, int64_t sent_up_to, int64_t *up_to)
{
    char *tail = NULL;
    long long value = text != NULL ? strtoll(text, &tail, 10) : 0;

    if (text == NULL || *text == '\0' || *tail != '\0' || value <= 0 || value > sent_up_to)
        return -1;
    *up_to = value;
    return 0;
}

static void on_frame(struct bridge_socket *sock, const char *bytes, size_t len)
{
    json_t *frame = json_loadb(bytes, len, JSON_REJECT_DUPLICATES, NULL);
    const char *type = json_string_value(json_object_get(frame, "type"));
    const char *req_id = json_string_value(json_object_get(frame, "req_id"));
    int asked = asked_find(sock, req_id);

    if (len > FRAME_MAX && asked < 0) {
        /* Large frames are let in for an awaited answer only; anything else that large is what 1009 is for. */
        rl_log_warn("bridge %s sent a %zu-byte frame that answers nothing it was asked; closing", sock->installation_id,
                    len);
        close_with(sock, 1009, "frame too large");
    } else if (type == NULL) {
        rl_log_info("bridge %s sent a frame that is not a JSON object with a type", sock->installation_id);
    } else if (req_id != NULL && asked < 0) {
        /* Another installation's req_id, a late answer, or one never sent: only the socket asked may answer. */
        rl_log_warn("bridge %s answered %s, a request it was not sent (or no longer awaited); dropped",
                    sock->installation_id, req_id);
    } else if (req_id != NULL) {
        /* issue 26: the answer to a request of relayd's (rpc.c). */
        asked_remove(sock, (unsigned)asked);
        rl_rpc_bridge_answered(sock->ctx->rpc, sock->installation_id, frame, len);
    } else if (strcmp(type, "hello") == 0) {
        /* issue 26: the authors' first frame; its version is shown in /v1/me. Unknown types stay a no-op. */
        rl_installation_hello(sock->ctx, sock->installation_id, json_string_value(json_object_get(frame, "version")));
    } else if (strcmp(type, "pong") == 0) {
        ++sock->registry->pongs;
        sock->awaiting_pong = 0;
        sock->missed_pongs = 0;
        if (h2o_timeout_is_linked(&sock->pong_timer))
            h2o_timeout_unlink(&sock->pong_timer);
        set_health(sock, HEALTH_HEALTHY);
    } else if (strcmp(type, "ack") == 0) {
        int64_t up_to;
        if (ack_up_to(json_string_value(json_object_get(frame, "up_to_update_id")), sock->sent_up_to, &up_to) == 0) {
            struct updates_ack *op = rl_op_new(&updates_ack_type, sizeof(*op));
            op->installation_id = rl_op_str(op, sock->installation_id);
            op->up_to = up_to;
            ++sock->pending;
            rl_store_submit(sock->ctx->store, &op->op.base, on_acked, sock);
        } else {
            rl_log_info("bridge %s acked an update it was not sent", sock->installation_id);
        }
    }
    json_decref(frame);
}

static void on_message(h2o_websocket_conn_t *ws, const struct wslay_event_on_msg_recv_arg *arg)
{
    struct bridge_socket *sock = ws->data;

    if (arg == NULL) {
        finish(sock);
        h2o_websocket_close(ws);
        return;
    }
    if (arg->opcode == WSLAY_TEXT_FRAME)
        on_frame(sock, (const char *)arg->msg, arg->msg_length);
}

static void on_ping_timer(h2o_timeout_entry_t *entry)
{
    struct bridge_socket *sock = H2O_STRUCT_FROM_MEMBER(struct bridge_socket, ping_timer, entry);

    /* spec: a ping every 30 s; the pong is due within 10 s. */
    if (send_frame(sock, json_pack("{s:s}", "type", "ping")) == 0) {
        ++sock->registry->pings;
        sock->awaiting_pong = 1;
        if (!h2o_timeout_is_linked(&sock->pong_timer))
            h2o_timeout_link(sock->ctx->loop, &sock->registry->pong_timeout, &sock->pong_timer);
        h2o_timeout_link(sock->ctx->loop, &sock->registry->ping_timeout, &sock->ping_timer);
    }
}

static void on_pong_timer(h2o_timeout_entry_t *entry)
{
    struct bridge_socket *sock = H2O_STRUCT_FROM_MEMBER(struct bridge_socket, pong_timer, entry);

    if (!sock->awaiting_pong)
        return;
    sock->awaiting_pong = 0;
    ++sock->missed_pongs;
    ++sock->registry->missed;
    set_health(sock, HEALTH_DEGRADED);
    if (sock->missed_pongs >= MISSED_PONGS_MAX) {
        rl_log_info("bridge %s missed %d pongs; closing", sock->installation_id, sock->missed_pongs);
        close_with(sock, 4001, "missed pongs");
    }
}

static void on_close_timer(h2o_timeout_entry_t *entry)
{
    struct bridge_socket *sock = H2O_STRUCT_FROM_MEMBER(struct bridge_socket, close_timer, entry);
    h2o_websocket_conn_t *ws = sock->ws;

    finish(sock);
    if (ws != NULL)
        h2o_websocket_close(ws);
}

int rl_bridge_ws_open(rl_call_t *call)
{
    rl_bridge_ws_t *registry = rl_installations_of(call)->sockets;
    rl_installations_ctx_t *ctx = registry->ctx;
    h2o_req_t *req = call->req;
    struct bridge_socket *sock, *previous;
    const char *client_key, *health;
    char topic[96];

    if (req->version >= 0x200 || h2o_is_websocket_handshake(req, &client_key) != 0 || client_key == NULL) {
        rl_call_fail(call, RL_E_INVALID_REQUEST, "this route takes a WebSocket upgrade over HTTP/1.1");
        return 0;
    }
    if (registry->shutting_down) {
        rl_call_fail(call, RL_E_UNAVAILABLE, "the relay is restarting");
        return 0;
    }
    sock = calloc(1, sizeof(*sock));
    if (sock == NULL)
        return RL_E_INTERNAL;
    sock->ctx = ctx;
    sock->registry = registry;
    sock->pending = 1;
    snprintf(sock->installation_id, sizeof(sock->installation_id), "%.*s", (int)sizeof(sock->installation_id) - 1,
             call->principal);
    snprintf(sock->user_id, sizeof(sock->user_id), "%s", call->owner);
    snprintf(sock->owner, sizeof(sock->owner), "%s:%llu", ctx->node_id, (unsigned long long)++registry->connections);
    sock->ping_timer.cb = on_ping_timer;
    sock->pong_timer.cb = on_pong_timer;
    sock->close_timer.cb = on_close_timer;
    sock->asked_timer.cb = on_asked_timer;
    sock->reap.run = reap;

    /* What every node knows of the installation before this socket takes it over. */
    health = rl_bus_presence_get(ctx->bus, sock->installation_id);
    previous = rl_strmap_get(registry->sockets, sock->installation_id);
    if (previous != NULL) {
        detach(previous);
        close_with(previous, 1000, "replaced by a newer connection of this installation");
    }
    if (rl_strmap_put(registry->sockets, sock->installation_id, sock) != 0) {
        free(sock);
        rl_call_fail(call, RL_E_UNAVAILABLE, "too many bridge connections");
        return 0;
    }
    sock->registered = 1;
    ++registry->live;
    join(sock, 1);
    rl_bus_presence_set(ctx->bus, sock->installation_id, sock->owner, "healthy");
    /* A socket of this installation on another node closes: this one replaces it. */
    rl_update_topic(sock->installation_id, topic, sizeof(topic));
    rl_bus_signal(ctx->bus, topic, json_pack("{s:s, s:s}", "type", "replaced", "owner", sock->owner));

    call->responded = 1;
    call->status = 101;
    rl__call_common_headers(call);
    rl__call_log(call);
    sock->ws = h2o_upgrade_to_websocket(req, client_key, sock, on_message);
    wslay_event_config_set_max_recv_msg_length(sock->ws->ws_ctx, FRAME_MAX);
    rl_log_info("bridge %s connected", sock->installation_id);

    send_frame(sock, json_pack("{s:s, s:s}", "type", "ready", "installation_id", sock->installation_id));
    if (strcmp(health, "healthy") != 0)
        publish_health(ctx, sock->user_id, sock->installation_id, "healthy");
    h2o_timeout_link(ctx->loop, &registry->ping_timeout, &sock->ping_timer);
    fetch(sock);
    return 0;
}

rl_bridge_ws_t *rl_bridge_ws_new(rl_installations_ctx_t *ctx)
{
    rl_bridge_ws_t *registry = calloc(1, sizeof(*registry));

    if (registry == NULL)
        return NULL;
    registry->ctx = ctx;
    registry->sockets = rl_strmap_new(SOCKETS_MAX);
    if (registry->sockets == NULL) {
        free(registry);
        return NULL;
    }
    rl_later_init(&registry->reaper, ctx->loop);
    h2o_timeout_init(ctx->loop, &registry->ping_timeout, (uint64_t)ctx->config->ws_ping_interval);
    h2o_timeout_init(ctx->loop, &registry->pong_timeout, (uint64_t)ctx->config->ws_pong_timeout);
    h2o_timeout_init(ctx->loop, &registry->asked_timeout, RL_RPC_TIMEOUT_MS + ASKED_GRACE_MS);
    return registry;
}

void rl_bridge_ws_free(rl_bridge_ws_t *registry)
{
    if (registry == NULL || registry->live > 0)
        return;
    /*
     * No connection is open: no socket's timer is linked any more (finish
     * unlinked them), and those still queued for their reaping go now.
     */
    rl_later_dispose(&registry->reaper, reap);
    h2o_timeout_dispose(registry->ctx->loop, &registry->ping_timeout);
    h2o_timeout_dispose(registry->ctx->loop, &registry->pong_timeout);
    h2o_timeout_dispose(registry->ctx->loop, &registry->asked_timeout);
    rl_strmap_free(registry->sockets, NULL);
    free(registry);
}

static int going_away(const char *key, void *value, void *arg)
{
    struct bridge_socket *sock = value;

    /* The sweep removes the entry; the node no longer serves the installation. */
    sock->registered = 0;
    join(sock, 0);
    rl_bus_presence_clear(sock->ctx->bus, sock->installation_id, sock->owner, NULL, NULL);
    /* 1012 (service restart): the bridge reconnects at once, to another node or to this relay started again. */
    close_with(sock, 1012, "relay restarting");
    return 1;
}

void rl_bridge_ws_close_all(rl_bridge_ws_t *registry)
{
    if (registry == NULL)
        return;
    registry->shutting_down = 1;
    rl_strmap_sweep(registry->sockets, going_away, registry, NULL);
}

struct health_counts {
    size_t healthy, degraded;
};

static int count_health(const char *key, void *value, void *arg)
{
    const struct bridge_socket *sock = value;
    struct health_counts *counts = arg;

    if (sock->health == HEALTH_HEALTHY)
        ++counts->healthy;
    else
        ++counts->degraded;
    return 0;
}

void rl_bridge_ws_health(rl_bridge_ws_t *registry, size_t *healthy, size_t *degraded)
{
    struct health_counts counts = {0, 0};

    if (registry != NULL)
        rl_strmap_sweep(registry->sockets, count_health, &counts, NULL);
    *healthy = counts.healthy;
    *degraded = counts.degraded;
}

void rl_bridge_ws_pings(const rl_bridge_ws_t *registry, uint64_t *sent, uint64_t *answered, uint64_t *missed)
{
    *sent = registry != NULL ? registry->pings : 0;
    *answered = registry != NULL ? registry->pongs : 0;
    *missed = registry != NULL ? registry->missed : 0;
}

size_t rl_bridge_ws_count(const rl_bridge_ws_t *registry)
{
    return registry != NULL ? registry->live : 0;
}
