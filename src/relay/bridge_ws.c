/*
 * One bridge socket per installation. Updates are durable in the store until
 * acknowledged: on connect the socket replays what is unacknowledged from
 * the replay window, in order, then follows new updates as they are queued,
 * always reading from the store after the last id it sent, so that replay
 * and live delivery can never reorder or skip.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <h2o/websocket.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/strmap.h"
#include "relay/attachments.h"
#include "relay/bridge_ws.h"
#include "relay/relay.h"

#define FRAME_MAX        (64 * 1024) /* the largest frame a bridge may send */
#define QUEUED_MAX       1024        /* frames waiting for a bridge that does not read */
#define FETCH_BATCH      128
#define SOCKETS_MAX      200000
#define MISSED_PONGS_MAX 3 /* spec: after three missed pongs the socket closes with 4001 */

enum health { HEALTH_HEALTHY, HEALTH_DEGRADED };

struct bridge_socket {
    rl_relay_t *relay;
    h2o_websocket_conn_t *ws;
    char installation_id[32];
    char user_id[RL_PRINCIPAL_MAX + 1];
    int64_t sent_up_to;
    unsigned pending; /* store operations in flight that hold this socket */
    int fetching, refetch;
    int awaiting_pong, missed_pongs;
    enum health health;
    int closing; /* a close frame is queued */
    int gone;    /* the connection is closed; free once pending drops to 0 */
    h2o_timeout_entry_t ping_timer, pong_timer, close_timer;
};

static rl_strmap_t *sockets_of(rl_relay_t *relay)
{
    return relay->bridge_sockets;
}

static void publish_health(struct bridge_socket *sock, const char *status)
{
    rl_relay_publish(sock->relay, sock->user_id, "agent_health_changed",
                     json_pack("{s:s, s:s}", "installation_id", sock->installation_id, "status", status));
}

const char *rl_bridge_health(rl_relay_t *relay, const char *installation_id)
{
    struct bridge_socket *sock =
        relay->bridge_sockets != NULL ? rl_strmap_get(relay->bridge_sockets, installation_id) : NULL;

    if (sock == NULL)
        return "offline";
    return sock->health == HEALTH_HEALTHY ? "healthy" : "degraded";
}

static void unlink_timers(struct bridge_socket *sock)
{
    if (h2o_timeout_is_linked(&sock->ping_timer))
        h2o_timeout_unlink(&sock->ping_timer);
    if (h2o_timeout_is_linked(&sock->pong_timer))
        h2o_timeout_unlink(&sock->pong_timer);
    if (h2o_timeout_is_linked(&sock->close_timer))
        h2o_timeout_unlink(&sock->close_timer);
}

static void release(struct bridge_socket *sock)
{
    if (--sock->pending == 0 && sock->gone)
        free(sock);
}

/* The connection is over: forget it, tell the user the agent is offline if no newer socket took its place. */
static void finish(struct bridge_socket *sock)
{
    rl_strmap_t *sockets = sockets_of(sock->relay);

    if (sock->gone)
        return;
    sock->gone = 1;
    unlink_timers(sock);
    if (sockets != NULL && rl_strmap_get(sockets, sock->installation_id) == sock) {
        rl_strmap_remove(sockets, sock->installation_id);
        publish_health(sock, "offline");
        rl_log_info("bridge %s disconnected", sock->installation_id);
    }
    sock->ws = NULL;
    /* Drops the connection's own reference; store operations in flight hold theirs. */
    release(sock);
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
    h2o_timeout_link(sock->relay->loop, &sock->relay->pong_timeout, &sock->close_timer);
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

static json_t *update_frame(struct bridge_socket *sock, json_t *row)
{
    char id[24], created[RL_ISO8601_LEN];
    json_t *payload = json_object_get(row, "payload");
    json_t *message = json_object_get(payload, "message");

    snprintf(id, sizeof(id), "%lld", (long long)json_integer_value(json_object_get(row, "update_id")));
    rl_clock_iso8601(json_integer_value(json_object_get(row, "created_at")), created);
    /* brief: delivery hydrates a signed, expiring URL for each attachment. */
    if (message != NULL)
        rl_attachments_hydrate(sock->relay, json_object_get(message, "attachments"));
    return json_pack("{s:s, s:{s:s, s:O, s:O, s:O, s:s, s:s, s:O}}", "type", "update", "update", "update_id", id,
                     "type", json_object_get(row, "type"), "session_id", json_object_get(row, "session_id"),
                     "interaction_id", json_object_get(row, "interaction_id"), "installation_id", sock->installation_id,
                     "created_at", created, "payload", payload);
}

static void fetch(struct bridge_socket *sock);

static void on_fetched(int result, json_t *value, void *arg)
{
    struct bridge_socket *sock = arg;
    json_t *updates = json_object_get(value, "updates"), *row;
    size_t i, count = json_array_size(updates);

    sock->fetching = 0;
    if (!sock->gone && result == 0) {
        json_array_foreach(updates, i, row)
        {
            int64_t id = json_integer_value(json_object_get(row, "update_id"));
            if (id <= sock->sent_up_to)
                continue;
            if (send_frame(sock, update_frame(sock, row)) != 0)
                break;
            sock->sent_up_to = id;
        }
        if (count == FETCH_BATCH || sock->refetch) {
            sock->refetch = 0;
            fetch(sock);
        }
    }
    json_decref(value);
    release(sock);
}

static void fetch(struct bridge_socket *sock)
{
    if (sock->gone || sock->closing)
        return;
    if (sock->fetching) {
        sock->refetch = 1;
        return;
    }
    sock->fetching = 1;
    ++sock->pending;
    /* spec: on reconnect, unacknowledged updates from the last 5 minutes are replayed, in order. */
    rl_store_updates_list(sock->relay->store, sock->installation_id, sock->sent_up_to,
                          rl_clock_now_ms() - sock->relay->config.replay_window, FETCH_BATCH, on_fetched, sock);
}

static void on_update_queued(rl_relay_t *relay, const char *installation_id, int64_t update_id)
{
    struct bridge_socket *sock = rl_strmap_get(relay->bridge_sockets, installation_id);

    if (sock != NULL && update_id > sock->sent_up_to)
        fetch(sock);
}

static void on_installation_revoked(rl_relay_t *relay, const char *installation_id)
{
    struct bridge_socket *sock = rl_strmap_get(relay->bridge_sockets, installation_id);

    /* spec: close code 4401 tells the bridge it is unauthorised and must not reconnect. */
    if (sock != NULL)
        close_with(sock, 4401, "installation revoked");
}

static void on_acked(int result, json_t *value, void *arg)
{
    struct bridge_socket *sock = arg;

    json_decref(value);
    if (result != 0 && !sock->gone)
        rl_log_warn("bridge %s: could not record an ack", sock->installation_id);
    release(sock);
}

static void set_health(struct bridge_socket *sock, enum health health)
{
    if (sock->health == health)
        return;
    sock->health = health;
    publish_health(sock, health == HEALTH_HEALTHY ? "healthy" : "degraded");
}

static void on_frame(struct bridge_socket *sock, const char *bytes, size_t len)
{
    json_t *frame = json_loadb(bytes, len, JSON_REJECT_DUPLICATES, NULL);
    const char *type = json_string_value(json_object_get(frame, "type"));

    if (type == NULL) {
        rl_log_info("bridge %s sent a frame that is not a JSON object with a type", sock->installation_id);
    } else if (strcmp(type, "pong") == 0) {
        sock->awaiting_pong = 0;
        sock->missed_pongs = 0;
        if (h2o_timeout_is_linked(&sock->pong_timer))
            h2o_timeout_unlink(&sock->pong_timer);
        set_health(sock, HEALTH_HEALTHY);
    } else if (strcmp(type, "ack") == 0) {
        const char *text = json_string_value(json_object_get(frame, "up_to_update_id"));
        char *tail = NULL;
        long long up_to = text != NULL ? strtoll(text, &tail, 10) : 0;
        /* An ack can only cover what was sent; anything else is ignored. */
        if (text != NULL && *text != '\0' && *tail == '\0' && up_to > 0 && up_to <= sock->sent_up_to) {
            ++sock->pending;
            rl_store_updates_ack(sock->relay->store, sock->installation_id, up_to, on_acked, sock);
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
        sock->awaiting_pong = 1;
        if (!h2o_timeout_is_linked(&sock->pong_timer))
            h2o_timeout_link(sock->relay->loop, &sock->relay->pong_timeout, &sock->pong_timer);
        h2o_timeout_link(sock->relay->loop, &sock->relay->ping_timeout, &sock->ping_timer);
    }
}

static void on_pong_timer(h2o_timeout_entry_t *entry)
{
    struct bridge_socket *sock = H2O_STRUCT_FROM_MEMBER(struct bridge_socket, pong_timer, entry);

    if (!sock->awaiting_pong)
        return;
    sock->awaiting_pong = 0;
    ++sock->missed_pongs;
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
    rl_relay_t *relay = call->app;
    h2o_req_t *req = call->req;
    struct bridge_socket *sock, *previous;
    const char *client_key;
    int was_online;

    if (req->version >= 0x200 || h2o_is_websocket_handshake(req, &client_key) != 0 || client_key == NULL) {
        rl_call_fail(call, RL_E_INVALID_REQUEST, "this route takes a WebSocket upgrade over HTTP/1.1");
        return 0;
    }
    sock = calloc(1, sizeof(*sock));
    if (sock == NULL)
        return RL_E_INTERNAL;
    sock->relay = relay;
    sock->pending = 1;
    snprintf(sock->installation_id, sizeof(sock->installation_id), "%.*s", (int)sizeof(sock->installation_id) - 1,
             call->principal);
    snprintf(sock->user_id, sizeof(sock->user_id), "%s", call->owner);
    sock->ping_timer.cb = on_ping_timer;
    sock->pong_timer.cb = on_pong_timer;
    sock->close_timer.cb = on_close_timer;

    previous = rl_strmap_get(relay->bridge_sockets, sock->installation_id);
    was_online = previous != NULL;
    if (previous != NULL) {
        rl_strmap_remove(relay->bridge_sockets, sock->installation_id);
        close_with(previous, 1000, "replaced by a newer connection of this installation");
    }
    if (rl_strmap_put(relay->bridge_sockets, sock->installation_id, sock) != 0) {
        free(sock);
        rl_call_fail(call, RL_E_UNAVAILABLE, "too many bridge connections");
        return 0;
    }

    call->responded = 1;
    call->status = 101;
    rl__call_common_headers(call);
    rl__call_log(call);
    sock->ws = h2o_upgrade_to_websocket(req, client_key, sock, on_message);
    wslay_event_config_set_max_recv_msg_length(sock->ws->ws_ctx, FRAME_MAX);
    rl_log_info("bridge %s connected", sock->installation_id);

    send_frame(sock, json_pack("{s:s, s:s}", "type", "ready", "installation_id", sock->installation_id));
    if (!was_online || (previous != NULL && previous->health != HEALTH_HEALTHY))
        publish_health(sock, "healthy");
    h2o_timeout_link(relay->loop, &relay->ping_timeout, &sock->ping_timer);
    fetch(sock);
    return 0;
}

int rl_bridge_ws_init(rl_relay_t *relay)
{
    relay->bridge_sockets = rl_strmap_new(SOCKETS_MAX);
    if (relay->bridge_sockets == NULL)
        return -1;
    h2o_timeout_init(relay->loop, &relay->ping_timeout, (uint64_t)relay->config.ws_ping_interval);
    h2o_timeout_init(relay->loop, &relay->pong_timeout, (uint64_t)relay->config.ws_pong_timeout);
    relay->on_update_queued = on_update_queued;
    relay->on_installation_revoked = on_installation_revoked;
    return 0;
}

static int going_away(const char *key, void *value, void *arg)
{
    close_with(value, 1001, "relay shutting down");
    return 1;
}

void rl_bridge_ws_dispose(rl_relay_t *relay)
{
    if (relay->bridge_sockets == NULL)
        return;
    rl_strmap_sweep(relay->bridge_sockets, going_away, NULL, NULL);
    rl_strmap_free(relay->bridge_sockets, NULL);
    relay->bridge_sockets = NULL;
}
