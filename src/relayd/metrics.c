/*
 * Every figure is read when scraped: the HTTP core's counters (server.c),
 * the event streams' (sse.c), the hub's, the bridge sockets' health, and the
 * store's worker figures, copied under the lock the worker takes anyway.
 * Nothing here runs on the request path.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "http/sse.h"
#include "relay/installations/bridge_ws.h"
#include "relay/installations/context.h"
#include "relay/installations/pairing.h"
#include "relay/core/hub.h"
#include "relay/media/media.h"
#include "relay/push/push.h"
#include "relayd/metrics.h"
#include "relay/core/relay.h"
#include "relay/sweeps.h"
#include "rl_version.h"

static const rl_route_t *route_of(const rl_relay_t *relay, const char *method, const char *pattern)
{
    size_t i;

    for (i = 0; i < relay->http.nroutes; ++i) {
        if (strcmp(relay->http.routes[i].method, method) == 0 && strcmp(relay->http.routes[i].pattern, pattern) == 0)
            return &relay->http.routes[i];
    }
    return NULL;
}

/*
 * The backend's name, not the location's scheme: a Redis bus may be reached
 * through unix:///path, and neither its path nor a password belongs here.
 */
static const char *bus_backend(const char *location)
{
    if (location == NULL || location[0] == '\0' || strcmp(location, "local") == 0)
        return "local";
    return "redis";
}

static void write_relay(rl_relay_t *relay, FILE *out)
{
    const rl_route_t *delta = route_of(relay, "POST", "/v1/bridge/sendMessageDelta");
    size_t healthy, degraded;
    uint64_t pings, pongs, missed;
    rl_store_figures_t store;
    rl_sse_stats_t streams;
    rl_push_skipped_t pushes;
    uint64_t attachments_refusals;
    int attachments_full = rl_media_disk_full(relay->features[RL_FEATURE_MEDIA], &attachments_refusals);
    const rl_installations_t *installations = relay->features[RL_FEATURE_INSTALLATIONS];

    fprintf(out,
            "# HELP relay_build_info The running relayd.\n# TYPE relay_build_info gauge\n"
            "relay_build_info{version=\"%s\"} 1\n",
            RL_VERSION);
    rl_bridge_ws_health(installations != NULL ? installations->sockets : NULL, &healthy, &degraded);
    fprintf(out,
            "# HELP relay_bridge_sockets Bridge sockets held by this node, by health (healthy: answering pings; "
            "degraded: missed pongs).\n# TYPE relay_bridge_sockets gauge\n"
            "relay_bridge_sockets{health=\"healthy\"} %zu\nrelay_bridge_sockets{health=\"degraded\"} %zu\n",
            healthy, degraded);
    rl_bridge_ws_pings(installations != NULL ? installations->sockets : NULL, &pings, &pongs, &missed);
    fprintf(out,
            "# HELP relay_bridge_pings_total Pings this node sent to bridge sockets.\n"
            "# TYPE relay_bridge_pings_total counter\nrelay_bridge_pings_total %llu\n"
            "# HELP relay_bridge_pongs_total Pongs this node read from bridge sockets.\n"
            "# TYPE relay_bridge_pongs_total counter\nrelay_bridge_pongs_total %llu\n"
            "# HELP relay_bridge_pongs_missed_total Pings whose pong deadline (--ws-pong-timeout) passed "
            "unanswered.\n# TYPE relay_bridge_pongs_missed_total counter\nrelay_bridge_pongs_missed_total %llu\n"
            "# HELP relay_pairing_polls_waiting Pairing polls (GET /v1/pairing/poll) held on this node until a "
            "claim or their timeout.\n# TYPE relay_pairing_polls_waiting gauge\nrelay_pairing_polls_waiting %zu\n",
            (unsigned long long)pings, (unsigned long long)pongs, (unsigned long long)missed,
            installations != NULL ? rl_pair_waits_count(installations->pair_waits) : 0);
    rl_push_skipped(relay->features[RL_FEATURE_PUSH], &pushes);
    fprintf(out,
            "# HELP relay_push_skipped_total Web Pushes not sent, by why: to an endpoint backing off after "
            "failures, the sender's queue full, the user's share of it full.\n"
            "# TYPE relay_push_skipped_total counter\n"
            "relay_push_skipped_total{reason=\"backing_off\"} %llu\n"
            "relay_push_skipped_total{reason=\"queue_full\"} %llu\n"
            "relay_push_skipped_total{reason=\"user_queue_full\"} %llu\n",
            (unsigned long long)pushes.backing_off, (unsigned long long)pushes.queue_full,
            (unsigned long long)pushes.user_queue_full);
    rl_sse_stats(&streams);
    fprintf(
        out,
        "# HELP relay_event_streams Client event streams (GET /v1/me/stream) open on this node.\n"
        "# TYPE relay_event_streams gauge\nrelay_event_streams %zu\n"
        "# HELP relay_event_streams_cut_off_total Event streams cut off because their reader fell too far "
        "behind.\n# TYPE relay_event_streams_cut_off_total counter\nrelay_event_streams_cut_off_total %llu\n"
        "# HELP relay_events_published_total Events this node published to users' streams.\n"
        "# TYPE relay_events_published_total counter\nrelay_events_published_total %llu\n"
        "# HELP relay_events_delivered_total Events handed to client connections (one per stream that "
        "carries it; heartbeats not counted).\n# TYPE relay_events_delivered_total counter\n"
        "relay_events_delivered_total %llu\n",
        streams.open, (unsigned long long)streams.cut_off, (unsigned long long)rl_hub_published(relay->hub),
        (unsigned long long)(streams.frames_sent > streams.heartbeats ? streams.frames_sent - streams.heartbeats : 0));
    fprintf(out,
            "# HELP relay_deltas_total Streamed deltas accepted (sendMessageDelta answered 200); rate() gives "
            "deltas a second.\n# TYPE relay_deltas_total counter\nrelay_deltas_total %llu\n",
            (unsigned long long)(delta != NULL ? rl_http_server_answers(relay->server, delta, 200) : 0));
    rl_store_figures(relay->store, &store);
    fprintf(out,
            "# HELP relay_store_queue_depth Store operations waiting for the store's worker.\n"
            "# TYPE relay_store_queue_depth gauge\nrelay_store_queue_depth %zu\n"
            "# HELP relay_store_batches_total Store transactions run (each a batch of operations, one commit; a "
            "fold of the delta log is one).\n"
            "# TYPE relay_store_batches_total counter\nrelay_store_batches_total %llu\n"
            "# HELP relay_store_log_appends_total Batches of streamed deltas written to the SQLite delta log "
            "instead of a transaction (one write(2) each).\n"
            "# TYPE relay_store_log_appends_total counter\nrelay_store_log_appends_total %llu\n"
            "# HELP relay_store_log_folds_total Transactions that folded the delta log into the database.\n"
            "# TYPE relay_store_log_folds_total counter\nrelay_store_log_folds_total %llu\n"
            "# HELP relay_store_round_trips_total Network round trips to the PostgreSQL store (all operations; 0 "
            "on SQLite).\n"
            "# TYPE relay_store_round_trips_total counter\nrelay_store_round_trips_total %llu\n"
            "# HELP relay_store_operations_total Store operations run.\n"
            "# TYPE relay_store_operations_total counter\nrelay_store_operations_total %llu\n"
            "# HELP relay_store_commit_duration_seconds Time each store commit took.\n"
            "# TYPE relay_store_commit_duration_seconds histogram\n",
            store.queued, (unsigned long long)store.batches, (unsigned long long)store.log_appends,
            (unsigned long long)store.log_folds, (unsigned long long)store.round_trips,
            (unsigned long long)store.operations);
    rl_histogram_write(out, "relay_store_commit_duration_seconds", "", &store.commit);
    fprintf(out,
            "# HELP relay_disk_full Whether the last write to this folder's disk was refused for lack of room "
            "(1 until a write succeeds again).\n"
            "# TYPE relay_disk_full gauge\nrelay_disk_full{folder=\"store\"} %d\n"
            "relay_disk_full{folder=\"attachments\"} %d\n"
            "# HELP relay_disk_full_refusals_total Writes answered 503 storage_full because the disk was full.\n"
            "# TYPE relay_disk_full_refusals_total counter\n"
            "relay_disk_full_refusals_total{folder=\"store\"} %llu\n"
            "relay_disk_full_refusals_total{folder=\"attachments\"} %llu\n",
            store.full, attachments_full, (unsigned long long)store.full_refusals,
            (unsigned long long)attachments_refusals);
    fprintf(out,
            "# HELP relay_sweeps_total Sweep operations of the store (expiry, lapse, purge) this node finished; "
            "only the node holding the sweeps' lease runs them.\n"
            "# TYPE relay_sweeps_total counter\nrelay_sweeps_total %llu\n",
            (unsigned long long)rl_sweeps_done(relay->sweeps));
    fprintf(out,
            "# HELP relay_bus_info The bus between relay nodes (local: one node; redis: shared).\n"
            "# TYPE relay_bus_info gauge\nrelay_bus_info{backend=\"%s\"} 1\n"
            "# HELP relay_bus_calls_total Commands and script calls this node sent to the bus's server (Redis), "
            "each call of a pipeline counted; 0 on the local bus.\n"
            "# TYPE relay_bus_calls_total counter\nrelay_bus_calls_total %llu\n"
            "# HELP relay_presence_claims_total Claims of lapsed bridge presences this node made on the bus "
            "(Redis answered; 0 on the local bus).\n"
            "# TYPE relay_presence_claims_total counter\nrelay_presence_claims_total %llu\n",
            bus_backend(relay->config.bus), (unsigned long long)rl_bus_calls_total(),
            (unsigned long long)rl_bus_presence_claims_total());
}

static int on_metrics(rl_call_t *call)
{
    rl_relay_t *relay = call->app;
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);

    if (out == NULL)
        return RL_E_INTERNAL;
    rl_http_server_write_metrics(relay->server, out);
    write_relay(relay, out);
    if (fclose(out) != 0 || text == NULL) {
        free(text);
        return RL_E_INTERNAL;
    }
    rl_call_send(call, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
    free(text);
    return 0;
}

#ifdef RL_TEST_CLOCK
/*
 * relayd-testclock only (the tests' build, never installed): POST
 * /test/clock/<ms> moves this process's wall clock ms forward, so that a
 * test of a rule that waits (an idempotency key's lifetime, the replay
 * window) advances time instead of sleeping through it.
 */
static int on_test_clock(rl_call_t *call)
{
    char digits[16];
    size_t len = call->params[0].len;
    char *end = NULL;
    long long ms;

    if (len == 0 || len >= sizeof(digits))
        return RL_E_INVALID_REQUEST;
    memcpy(digits, call->params[0].base, len);
    digits[len] = '\0';
    ms = strtoll(digits, &end, 10);
    if (*end != '\0' || ms <= 0)
        return RL_E_INVALID_REQUEST;
    rl_clock_advance_ms((int64_t)ms);
    rl_call_reply(call, json_pack("{s:I}", "now_ms", (json_int_t)rl_clock_now_ms()));
    return 0;
}
#endif

static const rl_route_t metrics_routes[] = {
    {"GET", "/metrics", on_metrics, 0, NULL, NULL, 0},
#ifdef RL_TEST_CLOCK
    {"POST", "/test/clock/:ms", on_test_clock, 0, NULL, NULL, 0},
#endif
};

/* The metrics listener is relayd's, not the relay's: one per process, on the relay's loop (loop thread only). */
static rl_http_config_t metrics_http;
static rl_http_server_t *metrics_server;

int rl_metrics_open(rl_relay_t *relay)
{
    char bound[300];

    if (relay->config.metrics_listen[0] == '\0')
        return 0;
    metrics_http.routes = metrics_routes;
    metrics_http.nroutes = sizeof(metrics_routes) / sizeof(metrics_routes[0]);
    metrics_http.max_body = 1024;
    metrics_http.request_timeout_ms = (uint64_t)relay->config.request_timeout;
    metrics_http.app = relay;
    if (rl_http_server_create(relay->loop, &metrics_http, &metrics_server) != 0 ||
        rl_http_server_listen(metrics_server, relay->config.metrics_listen, bound, sizeof(bound)) != 0)
        return -1;
    rl_log_fields(RL_LOG_INFO, json_pack("{s:s, s:s}", "msg", "metrics listening", "address", bound));
    return 0;
}

void rl_metrics_shutdown(void)
{
    if (metrics_server != NULL)
        rl_http_server_stop_listening(metrics_server);
}
