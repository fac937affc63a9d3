/*
 * The relay's start and stop: the parts it is made of, in the order they
 * depend on each other, and the two places where the outside comes in
 * besides HTTP: the store's completions and the bus's deliveries.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/rand.h"
#include "relay/media/attachments.h"
#include "relay/media/media.h"
#include "relay/core/auth.h"
#include "relay/installations/bridge_ws.h"
#include "relay/core/datalock.h"
#include "relay/turn/deltas.h"
#include "relay/housekeeping.h"
#include "relay/core/hub.h"
#include "relay/installations/installations.h"
#include "relay/keys.h"
#include "relay/identity/identity.h"
#include "common/jobs.h"
#include "relay/push/push.h"
#include "relay/core/ratelimit.h"
#include "relay/installations/pairing.h"
#include "relay/core/rpc.h"
#include "relay/core/relay.h"
#include "relay/sessions/context.h"
#include "relay/e2e/context.h"
#include "relay/installations/context.h"
#include "relay/turn/turn.h"
#include "relay/sweeps.h"
#include "auth/token.h"

#define RATE_KEYS_MAX 200000 /* buckets the local bus keeps */
#define MAX_JSON_BODY (1024 * 1024)
#define BUS_USERS_MAX 1000000

/*
 * Completions answer requests and write to sockets. Run outside
 * h2o_evloop_run (as they once were, right after it returned), a write that
 * completed at once could meet the next epoll pass with h2o's socket state
 * half updated, which h2o 2.2.5 asserts on under a burst of connections (the
 * reconnect storm of bench/run.sh reproduced it every time). Inside the loop,
 * in the timeout phase, they run like every other h2o callback.
 */
static void on_store_flush(h2o_timeout_entry_t *entry)
{
    rl_relay_t *relay = H2O_STRUCT_FROM_MEMBER(rl_relay_t, store_flush, entry);

    rl_store_flush(relay->store);
}

/* The store's worker has callbacks for us: they run here, like any other socket callback. */
static void on_store_wake(h2o_socket_t *sock, const char *err)
{
    rl_relay_t *relay = sock->data;

    h2o_buffer_consume(&sock->input, sock->input->size);
    if (err != NULL) {
        rl_log_error("the store's wake-up pipe failed: %s", err);
        abort();
    }
    rl_store_flush(relay->store);
}

static int watch_store(rl_relay_t *relay)
{
    int fd = rl_store_wake_fd(relay->store);

    if (fd < 0)
        return 0;
    /* h2o closes what it watches; the store keeps its own descriptor. */
    if ((fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) {
        rl_log_error("cannot watch the store: %s", strerror(errno));
        return -1;
    }
    relay->store_wake = h2o_evloop_socket_create(relay->loop, fd, 0);
    relay->store_wake->data = relay;
    h2o_socket_read_start(relay->store_wake, on_store_wake);
    return 0;
}

/* Background jobs finished or posted something: their callbacks run here, like any other socket callback. */
static void on_jobs_wake(h2o_socket_t *sock, const char *err)
{
    rl_relay_t *relay = sock->data;

    h2o_buffer_consume(&sock->input, sock->input->size);
    if (err != NULL) {
        rl_log_error("the background jobs' eventfd failed: %s", err);
        abort();
    }
    rl_jobs_dispatch(relay->jobs);
}

static int start_jobs(rl_relay_t *relay)
{
    int fd;

    relay->jobs = rl_jobs_start();
    /* h2o closes what it watches; the queue keeps its own descriptor. */
    if (relay->jobs == NULL || (fd = fcntl(rl_jobs_fd(relay->jobs), F_DUPFD_CLOEXEC, 0)) < 0) {
        rl_log_error("cannot start the background jobs: %s", strerror(errno));
        return -1;
    }
    relay->jobs_wake = h2o_evloop_socket_create(relay->loop, fd, 0);
    relay->jobs_wake->data = relay;
    h2o_socket_read_start(relay->jobs_wake, on_jobs_wake);
    return 0;
}

void rl_relay_before_turn(rl_relay_t *relay)
{
    if (relay->store_wake == NULL && rl_store_pending(relay->store) && !h2o_timeout_is_linked(&relay->store_flush))
        h2o_timeout_link(relay->loop, &relay->zero_timeout, &relay->store_flush);
}

/* The server's hook is handed the relay; media's check takes media's context. */
static int head_limit(void *app, const rl_route_t *route, const char *authorization, size_t len,
                      rl_http_head_limit_t *limit)
{
    rl_relay_t *relay = app;

    return rl_attachments_head_limit(relay->features[RL_FEATURE_MEDIA], route, authorization, len, limit);
}

/* ---- the bus's deliveries ---- */

static void on_bus_event(void *ctx, const char *user_id, int64_t id, rl_blob_t *frame)
{
    rl_relay_t *relay = ctx;

    rl_hub_deliver(relay->hub, user_id, id, frame);
}

/* This node's bridge sockets, kept by the installations feature; NULL while it is not open. */
static rl_bridge_ws_t *sockets_of(const rl_relay_t *relay)
{
    const rl_installations_t *installations = relay->features[RL_FEATURE_INSTALLATIONS];

    return installations != NULL ? installations->sockets : NULL;
}

static void on_auth_signal(rl_relay_t *relay, const char *topic, json_t *message)
{
    const char *installation_id = json_string_value(json_object_get(message, "installation_id"));

    rl_auth_on_signal(relay->auth, message);
    if (installation_id != NULL && sockets_of(relay) != NULL &&
        strcmp(json_string_value(json_object_get(message, "type")), "installation_revoked") == 0)
        rl_bridge_ws_revoked(sockets_of(relay), installation_id);
}

static void on_installation_signal(rl_relay_t *relay, const char *topic, json_t *message)
{
    if (sockets_of(relay) != NULL)
        rl_bridge_ws_on_signal(sockets_of(relay), topic, message);
}

/* Which part of the relay a topic belongs to, by its prefix. */
static const struct {
    const char *prefix;
    void (*handle)(rl_relay_t *relay, const char *topic, json_t *message);
} signal_routes[] = {
    {RL_TOPIC_AUTH, on_auth_signal},
    {"installation:", on_installation_signal},
    {"rpc:", rl_rpc_on_signal},
};

static void on_bus_signal(void *ctx, const char *topic, json_t *message)
{
    rl_relay_t *relay = ctx;
    size_t i;

    if (json_string_value(json_object_get(message, "type")) == NULL)
        return;
    for (i = 0; i < sizeof(signal_routes) / sizeof(signal_routes[0]); ++i) {
        if (strncmp(topic, signal_routes[i].prefix, strlen(signal_routes[i].prefix)) == 0) {
            signal_routes[i].handle(relay, topic, message);
            return;
        }
    }
}

static void on_presence_lapsed(void *ctx, const char *installation_id)
{
    rl_relay_t *relay = ctx;

    /* Not before the relay has its sockets, nor after the store closed (shutdown). */
    if (sockets_of(relay) != NULL && relay->store != NULL)
        rl_bridge_ws_lapsed(sockets_of(relay), installation_id);
}

/*
 * This node's name on the bus for its rate bucket leases: kept in the data
 * folder (whose lock makes it one relayd's at a time), so that a node
 * restarted after a crash takes back the leases its previous process held
 * rather than find its buckets leased for two seconds. A name that cannot
 * be kept is a new one each start.
 */
static void bus_node_name(const char *data, char *out, size_t size)
{
    char path[4200], text[32];
    ssize_t n = -1;
    size_t i;
    int fd;

    out[0] = '\0';
    snprintf(path, sizeof(path), "%s/bus-node", data);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        n = read(fd, text, sizeof(text) - 1);
        close(fd);
    }
    for (i = 0; n > 0 && i < (size_t)n; ++i) {
        if (!isalnum((unsigned char)text[i]) && text[i] != '_')
            n = -1;
    }
    if (n > 0 && (size_t)n < size && n <= 20) {
        memcpy(out, text, (size_t)n);
        out[n] = '\0';
        return;
    }
    if (rl_rand_id(out, size, "node_", 12) != 0)
        return;
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, out, strlen(out)) != (ssize_t)strlen(out))
        rl_log_warn("cannot keep the bus node name in %s: a restart will wait for its old leases to lapse", path);
    if (fd >= 0)
        close(fd);
}

static int open_bus(rl_relay_t *relay)
{
    char node[24];
    rl_bus_config_t config = {
        .max_events = (size_t)relay->config.sse_buffer_events,
        .max_age_ms = relay->config.replay_window,
        .max_users = BUS_USERS_MAX,
        .max_buckets = RATE_KEYS_MAX,
        .bucket_settle_ms = relay->config.bus_settle,
        .bucket_grace_ms = relay->config.bus_outage_grace,
        .node = node,
        .handlers = {.event = on_bus_event,
                     .signal = on_bus_signal,
                     .presence_lapsed = on_presence_lapsed,
                     .ctx = relay},
    };

    node[0] = '\0';
    /* The local bus has no leases: a node alone on it writes nothing more to its data folder. */
    if (strcmp(relay->config.bus, "") != 0 && strcmp(relay->config.bus, "local") != 0)
        bus_node_name(relay->config.data, node, sizeof(node));
    if (rl_bus_open(relay->config.bus, relay->loop, &config, &relay->bus) != 0)
        return -1;
    relay->shared = strcmp(relay->config.bus, "") != 0 && strcmp(relay->config.bus, "local") != 0;
    rl_bus_join(relay->bus, RL_TOPIC_AUTH, 1);
    relay->hub = rl_hub_new(relay->bus, relay->loop, BUS_USERS_MAX);
    return relay->hub != NULL ? 0 : -1;
}

int rl_relay_start(rl_relay_t *relay, h2o_loop_t *loop)
{
    rl_config_t *config = &relay->config;
    rl_push_ctx_t push;
    rl_identity_ctx_t identity;
    rl_identity_t *opened;
    rl_media_ctx_t media;
    rl_media_t *media_opened;
    rl_sessions_ctx_t sessions, *sessions_opened;
    rl_e2e_ctx_t e2e, *e2e_opened;
    rl_installations_ctx_t installations;
    rl_installations_t *installations_opened;
    rl_turn_ctx_t turn, *turn_opened;
    char why[4400];

    relay->loop = loop;
    rl_rand_id(relay->node_id, sizeof(relay->node_id), "node_", 12);
    /* The server (and its TLS files) first: bad settings are refused before anything is written. */
    relay->http.routes = rl_relay_routes(&relay->http.nroutes);
    relay->http.api_prefix = "/v1/";
    relay->http.max_body = MAX_JSON_BODY;
    relay->http.request_timeout_ms = (uint64_t)config->request_timeout;
    relay->http.url_carries_credentials = rl_url_carries_token;
    relay->http.hooks.authenticate = rl_relay_authenticate;
    relay->http.hooks.limit = rl_relay_limit;
    relay->http.hooks.head_limit = head_limit;
    relay->http.app = relay;
    relay->http.tls_cert = config->tls_cert;
    relay->http.tls_key = config->tls_key;
    relay->http.max_connections_per_address = (size_t)config->max_connections_per_address;
    relay->http.reuse_port = strcmp(config->reuse_port, "on") == 0;
    relay->http.trusted_proxies = config->trusted_proxies;
    relay->http.forwarded_header = config->forwarded_header;
    relay->http.loop_lag_max_ms = (uint64_t)config->loop_lag_max;
    if (rl_http_server_create(loop, &relay->http, &relay->server) != 0)
        return -1;
    if (mkdir(config->data, 0700) != 0 && errno != EEXIST) {
        rl_log_error("cannot create the data folder %s: %s", config->data, strerror(errno));
        return -1;
    }
    /* One relayd per data folder; the lock goes with the process (docs/operations.md, "The data folder"). */
    relay->datalock = rl_datalock_take(config->data, why, sizeof(why));
    if (relay->datalock < 0) {
        rl_log_error("%s", why);
        return -1;
    }
    /* The background jobs before what submits to them (the user-token keys' refresh, push). */
    if (start_jobs(relay) != 0)
        return -1;
    if (rl_store_open(config->store[0] != '\0' ? config->store : config->data, &relay->store) != 0 ||
        rl_keys_sync(relay->store, config->data) != 0 || rl_auth_open(relay, &relay->auth) != 0)
        return -1;
    h2o_timeout_init(loop, &relay->zero_timeout, 0);
    relay->store_flush.cb = on_store_flush;
    if (watch_store(relay) != 0 || open_bus(relay) != 0)
        return -1;
    relay->limiter = rl_ratelimit_new(relay->bus);
    h2o_timeout_init(loop, &relay->heartbeat_timeout, (uint64_t)config->sse_heartbeat);
    /* The turn's services; its deltas (which media and sessions hold too) are made from them first. */
    turn = (rl_turn_ctx_t){.config = config,
                           .store = relay->store,
                           .bus = relay->bus,
                           .hub = relay->hub,
                           .loop = loop,
                           .shared = relay->shared};
    relay->deltas = rl_deltas_new(&turn);
    relay->sweeps = rl_sweeps_start(relay);
    relay->rpc = rl_rpc_new(relay);
    if (relay->rpc == NULL || relay->limiter == NULL || relay->deltas == NULL || relay->sweeps == NULL)
        return -1;
    media = (rl_media_ctx_t){.config = config,
                             .store = relay->store,
                             .bus = relay->bus,
                             .hub = relay->hub,
                             .auth = relay->auth,
                             .deltas = relay->deltas,
                             .loop = loop,
                             .zero_timeout = &relay->zero_timeout,
                             .shared = relay->shared};
    if (rl_media_open(&media, &media_opened) != 0)
        return -1;
    relay->features[RL_FEATURE_MEDIA] = media_opened;
    sessions = (rl_sessions_ctx_t){.config = config,
                                   .bus = relay->bus,
                                   .hub = relay->hub,
                                   .deltas = relay->deltas,
                                   .rpc = relay->rpc,
                                   .media = media_opened};
    if (rl_sessions_open(&sessions, &sessions_opened) != 0)
        return -1;
    relay->features[RL_FEATURE_SESSIONS] = sessions_opened;
    e2e = (rl_e2e_ctx_t){.config = config, .bus = relay->bus, .hub = relay->hub, .rpc = relay->rpc};
    if (rl_e2e_open(&e2e, &e2e_opened) != 0)
        return -1;
    relay->features[RL_FEATURE_E2E] = e2e_opened;
    installations = (rl_installations_ctx_t){.config = config,
                                             .store = relay->store,
                                             .bus = relay->bus,
                                             .hub = relay->hub,
                                             .auth = relay->auth,
                                             .rpc = relay->rpc,
                                             .media = media_opened,
                                             .loop = loop,
                                             .node_id = relay->node_id};
    if (rl_installations_open(&installations, &installations_opened) != 0)
        return -1;
    relay->features[RL_FEATURE_INSTALLATIONS] = installations_opened;

    if (rl_http_server_listen(relay->server, config->listen, relay->address, sizeof(relay->address)) != 0)
        return -1;
    if (config->public_url[0] == '\0')
        snprintf(config->public_url, sizeof(config->public_url), "%s://%s",
                 rl_http_server_tls(relay->server) ? "https" : "http", relay->address);
    /* For relayd login-link beside it: the address it serves, the port it picked included. */
    if (rl_dataurl_write(config->data, config->public_url) != 0)
        rl_log_warn("cannot write %s/%s: %s (relayd login-link then needs --public-url)", config->data, RL_DATAURL_FILE,
                    strerror(errno));
    relay->housekeeping = rl_housekeeping_start(relay);
    if (relay->housekeeping == NULL)
        return -1;
    /*
     * Push takes the public URL as its default VAPID contact; identity (the
     * web client among it) hands push's key to the app.
     */
    push = (rl_push_ctx_t){config, relay->store, relay->hub, relay->jobs};
    if (rl_push_open(&push, &relay->push) != 0)
        return -1;
    relay->features[RL_FEATURE_PUSH] = relay->push;
    identity = (rl_identity_ctx_t){config, relay->bus, relay->hub, &relay->heartbeat_timeout, relay->push};
    if (rl_identity_open(&identity, &opened) != 0)
        return -1;
    relay->features[RL_FEATURE_IDENTITY] = opened;
    /* The turn last: a finished reply and an approval asked go to push, attachment links are signed by media. */
    turn.deltas = relay->deltas;
    turn.push = relay->push;
    turn.media = media_opened;
    if (rl_turn_open(&turn, &turn_opened) != 0)
        return -1;
    relay->features[RL_FEATURE_TURN] = turn_opened;
    return 0;
}

void rl_relay_shutdown_begin(rl_relay_t *relay)
{
    rl_installations_t *installations = relay->features[RL_FEATURE_INSTALLATIONS];

    if (relay->server != NULL)
        rl_http_server_shutdown(relay->server);
    if (installations != NULL) {
        rl_bridge_ws_close_all(installations->sockets);
        rl_pair_waits_close(installations->pair_waits);
    }
}

int rl_relay_quiet(rl_relay_t *relay)
{
    return rl_bridge_ws_count(sockets_of(relay)) == 0 && (relay->server == NULL || !rl_http_server_busy(relay->server));
}

void rl_relay_stop(rl_relay_t *relay)
{
    rl_sweeps_stop(relay->sweeps);
    rl_housekeeping_stop(relay->housekeeping);
    relay->housekeeping = NULL;
    if (relay->server != NULL)
        rl_http_server_stop_listening(relay->server);
    /*
     * Everything already accepted finishes first, while the sockets, the
     * open-message records and the pending batch its callbacks use are still
     * there: deltas answered but not yet persisted are written, and a
     * callback that queues more work (or answers a delta that waited for
     * its record) is waited for too.
     */
    if (relay->store != NULL) {
        do {
            rl_deltas_flush(relay->deltas);
            rl_store_drain(relay->store);
        } while (rl_deltas_pending(relay->deltas) > 0);
    }
    /*
     * The background jobs stop (push's sender among them: what it still
     * sends is dropped); push's completions (the subscriptions a push goes
     * to) ran in the drain.
     */
    rl_jobs_stop(relay->jobs);
    relay->jobs = NULL;
    if (relay->jobs_wake != NULL) {
        h2o_socket_read_stop(relay->jobs_wake);
        h2o_socket_close(relay->jobs_wake);
        relay->jobs_wake = NULL;
    }
    rl_push_close(relay->push);
    relay->push = NULL;
    rl_bridge_ws_close_all(sockets_of(relay));
    if (h2o_timeout_is_linked(&relay->store_flush))
        h2o_timeout_unlink(&relay->store_flush);
    rl_deltas_free(relay->deltas);
    relay->deltas = NULL;
    /* The held pairing polls answer, the sockets whose connection ended go (and the feature with them). */
    rl_installations_close(relay->features[RL_FEATURE_INSTALLATIONS]);
    relay->features[RL_FEATURE_INSTALLATIONS] = NULL;
    rl_rpc_free(relay->rpc);
    relay->rpc = NULL;
    rl_sweeps_free(relay->sweeps);
    relay->sweeps = NULL;
    if (relay->store_wake != NULL) {
        h2o_socket_read_stop(relay->store_wake);
        h2o_socket_close(relay->store_wake);
        relay->store_wake = NULL;
    }
    /* Nothing is queued any more: closing stops the worker and checkpoints. */
    rl_store_close(relay->store);
    relay->store = NULL;
    rl_auth_close(relay->auth);
    relay->auth = NULL;
    rl_e2e_close(relay->features[RL_FEATURE_E2E]);
    relay->features[RL_FEATURE_E2E] = NULL;
    rl_turn_close(relay->features[RL_FEATURE_TURN]);
    relay->features[RL_FEATURE_TURN] = NULL;
    rl_sessions_close(relay->features[RL_FEATURE_SESSIONS]);
    relay->features[RL_FEATURE_SESSIONS] = NULL;
    rl_media_close(relay->features[RL_FEATURE_MEDIA]);
    relay->features[RL_FEATURE_MEDIA] = NULL;
    rl_identity_close(relay->features[RL_FEATURE_IDENTITY]);
    relay->features[RL_FEATURE_IDENTITY] = NULL;
    /*
     * The HTTP server, the bus and what hangs off live connections (streams
     * subscribed to the hub, bridge sockets) are left to the process exit:
     * h2o 2.2.5 cannot dispose of a context while connections are open, and
     * it has no call that closes them all.
     */
}
