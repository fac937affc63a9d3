#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/clock.h"
#include "common/log.h"
#include "relay/attachments.h"
#include "relay/bridge_ws.h"
#include "relay/deltas.h"
#include "relay/relay.h"
#include "relay/token.h"

#define HOUSEKEEPING_MS 60000
#define RATE_KEYS_MAX   200000
#define KNOWN_USERS_MAX 100000
#define MAX_JSON_BODY   (1024 * 1024)
#define BUS_USERS_MAX   1000000

static void on_purged(int result, json_t *value, void *arg)
{
    json_decref(value);
    if (result != 0)
        rl_log_warn("store purge failed");
}

static void on_housekeeping(h2o_timeout_entry_t *entry)
{
    rl_relay_t *relay = H2O_STRUCT_FROM_MEMBER(rl_relay_t, housekeeping, entry);
    int64_t now = rl_clock_now_ms();

    rl_ratelimit_sweep(relay->limiter, now);
    rl_bus_sweep(relay->bus, now);
    rl_auth_sweep(relay, now);
    rl_deltas_sweep(relay, now);
    rl_store_purge_bridge(relay->store, now, relay->config.idempotency_ttl, relay->config.replay_window, on_purged,
                          relay);
    rl_store_purge(relay->store, now, relay->config.delete_grace, on_purged, relay);
    h2o_timeout_link(relay->loop, &relay->housekeeping_timeout, &relay->housekeeping);
}

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

void rl_relay_before_turn(rl_relay_t *relay)
{
    if (relay->store_wake == NULL && rl_store_pending(relay->store) && !h2o_timeout_is_linked(&relay->store_flush))
        h2o_timeout_link(relay->loop, &relay->zero_timeout, &relay->store_flush);
}

static int open_keys(rl_relay_t *relay)
{
    rl_config_t *config = &relay->config;
    rl_jwt_issuer_t *issuer = NULL;
    rl_jwks_t *keys;
    int result;

    if (config->jwks_file[0] != '\0' || config->jwks_url[0] != '\0') {
        relay->policy.issuer = config->jwt_issuer;
        relay->policy.audience = config->jwt_audience;
        relay->policy.leeway_s = 30;
        return config->jwks_file[0] != '\0'
                   ? rl_jwks_source_open_file(config->jwks_file, &relay->jwks)
                   : rl_jwks_source_open_url(config->jwks_url, config->jwks_refresh, &relay->jwks);
    }
    /* brief: the embedded default is its own issuer, verified by the same code as an external one. */
    if (rl_jwt_issuer_open(config->data, &issuer) != 0)
        return -1;
    keys = rl_jwt_issuer_jwks(issuer);
    rl_jwt_issuer_free(issuer);
    if (keys == NULL)
        return -1;
    relay->policy.issuer = RL_EMBEDDED_ISSUER;
    relay->policy.audience = RL_EMBEDDED_AUDIENCE;
    relay->policy.leeway_s = 30;
    result = rl_jwks_source_open_static(keys, &relay->jwks);
    rl_jwks_unref(keys);
    return result;
}

int rl_relay_start(rl_relay_t *relay, h2o_loop_t *loop)
{
    rl_config_t *config = &relay->config;
    rl_bus_config_t bus_config;
    char bound[300];

    relay->loop = loop;
    /* The server (and its TLS files) first: bad settings are refused before anything is written. */
    relay->http.routes = rl_relay_routes;
    relay->http.nroutes = rl_relay_nroutes;
    relay->http.api_prefix = "/v1/";
    relay->http.max_body = MAX_JSON_BODY;
    relay->http.request_timeout_ms = (uint64_t)config->request_timeout;
    relay->http.url_carries_credentials = rl_url_carries_token;
    relay->http.hooks.authenticate = rl_relay_authenticate;
    relay->http.hooks.limit = rl_relay_limit;
    relay->http.app = relay;
    relay->http.tls_cert = config->tls_cert;
    relay->http.tls_key = config->tls_key;
    relay->http.max_connections_per_address = (size_t)config->max_connections_per_address;
    relay->http.trusted_proxies = config->trusted_proxies;
    relay->http.forwarded_header = config->forwarded_header;
    if (rl_http_server_create(loop, &relay->http, &relay->server) != 0)
        return -1;
    if (mkdir(config->data, 0700) != 0 && errno != EEXIST) {
        rl_log_error("cannot create the data folder %s: %s", config->data, strerror(errno));
        return -1;
    }
    if (rl_store_open(config->data, &relay->store) != 0 || open_keys(relay) != 0 || rl_attachments_open(relay) != 0)
        return -1;
    h2o_timeout_init(loop, &relay->zero_timeout, 0);
    relay->store_flush.cb = on_store_flush;
    if (watch_store(relay) != 0)
        return -1;
    relay->limiter = rl_ratelimit_new(RATE_KEYS_MAX);
    relay->known_users = rl_strmap_new(KNOWN_USERS_MAX);
    relay->verified_tokens = rl_strmap_new(KNOWN_USERS_MAX);
    relay->bridge_tokens = rl_strmap_new(KNOWN_USERS_MAX);
    bus_config.max_events = (size_t)config->sse_buffer_events;
    bus_config.max_age_ms = config->replay_window;
    bus_config.max_users = BUS_USERS_MAX;
    relay->bus = rl_bus_new(&bus_config);
    if (relay->limiter == NULL || relay->known_users == NULL || relay->bus == NULL || relay->verified_tokens == NULL ||
        relay->bridge_tokens == NULL)
        return -1;
    h2o_timeout_init(loop, &relay->heartbeat_timeout, (uint64_t)config->sse_heartbeat);
    if (rl_bridge_ws_init(relay) != 0 || rl_deltas_init(relay) != 0)
        return -1;
    rl_approvals_start(relay);

    if (rl_http_server_listen(relay->server, config->listen, bound, sizeof(bound)) != 0)
        return -1;
    if (config->public_url[0] == '\0')
        snprintf(config->public_url, sizeof(config->public_url), "%s://%s",
                 rl_http_server_tls(relay->server) ? "https" : "http", bound);

    h2o_timeout_init(loop, &relay->housekeeping_timeout, HOUSEKEEPING_MS);
    relay->housekeeping_started = 1;
    relay->housekeeping.cb = on_housekeeping;
    h2o_timeout_link(loop, &relay->housekeeping_timeout, &relay->housekeeping);
    rl_log_fields(RL_LOG_INFO,
                  json_pack("{s:s, s:s, s:s}", "msg", "listening", "address", bound, "data", config->data));
    return 0;
}

void rl_relay_stop(rl_relay_t *relay)
{
    if (relay->loop != NULL)
        rl_approvals_stop(relay);
    if (relay->server != NULL)
        rl_http_server_stop_listening(relay->server);
    /*
     * Everything already accepted finishes first, while the sockets, the
     * open-message records and the pending batch its callbacks use are still
     * there: deltas answered but not yet persisted are written, and a
     * callback that queues more work (or answers a delta that waited for
     * its record) is waited for too.
     */
    if (relay->store != NULL && relay->open_messages != NULL && relay->pending_deltas != NULL) {
        if (h2o_timeout_is_linked(&relay->delta_flush))
            h2o_timeout_unlink(&relay->delta_flush);
        do {
            rl_deltas_flush(relay);
            rl_store_drain(relay->store);
        } while (relay->pending_deltas->count > 0);
    } else if (relay->store != NULL) {
        rl_store_drain(relay->store);
    }
    rl_bridge_ws_dispose(relay);
    if (h2o_timeout_is_linked(&relay->store_flush))
        h2o_timeout_unlink(&relay->store_flush);
    if (relay->housekeeping_started) {
        if (h2o_timeout_is_linked(&relay->housekeeping))
            h2o_timeout_unlink(&relay->housekeeping);
        h2o_timeout_dispose(relay->loop, &relay->housekeeping_timeout);
        relay->housekeeping_started = 0;
    }
    rl_delta_batch_free(relay->pending_deltas);
    relay->pending_deltas = NULL;
    if (relay->store_wake != NULL) {
        h2o_socket_read_stop(relay->store_wake);
        h2o_socket_close(relay->store_wake);
        relay->store_wake = NULL;
    }
    /* Nothing is queued any more: closing stops the worker and checkpoints. */
    if (relay->store != NULL)
        rl_store_close(relay->store);
    relay->store = NULL;
    if (relay->jwks != NULL)
        rl_jwks_source_close(relay->jwks);
    relay->jwks = NULL;
    /*
     * The HTTP server and what hangs off live connections are left to the
     * process exit: h2o 2.2.5 cannot dispose of a context while connections
     * are open, and it has no call that closes them all.
     */
}
