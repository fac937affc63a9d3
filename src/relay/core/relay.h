/*
 * The relay application: its configuration and the parts it is made of,
 * tied to one event loop. Each part keeps its own state behind its own
 * header (auth.h, hub.h, bridge_ws.h, deltas.h, sweeps.h, ...); this
 * struct only holds them together and is what route handlers reach through
 * call->app. Loop thread only.
 */
#ifndef RL_RELAY_RELAY_H
#define RL_RELAY_RELAY_H

#include <h2o.h>

#include "bus/bus.h"
#include "http/server.h"
#include "relay/core/auth.h"
#include "relay/core/config.h"
#include "relay/core/feature.h"
#include "store/store.h"

struct rl_ratelimit;
struct rl_auth;
struct rl_hub;
struct rl_deltas;
struct rl_sweeps;
struct rl_housekeeping;
struct rl_push;

typedef struct rl_relay {
    rl_config_t config;
    h2o_loop_t *loop;
    char node_id[24]; /* this process, unique across the nodes of a relay */
    rl_store_t *store;
    rl_bus_t *bus;
    /*
     * Other nodes may share the store and the bus (any bus but "local"): a
     * node's caches of open messages and bridge tokens may then be stale, and
     * writes ask the store (deltas.c, target.h). One node alone skips that.
     */
    int shared;
    struct rl_hub *hub;           /* client events (hub.c) */
    struct rl_ratelimit *limiter; /* token buckets (ratelimit.c) */
    struct rl_auth *auth;         /* token verification and what it remembers (auth.c) */
    struct rl_deltas *deltas;     /* open messages and their pending deltas (deltas.c) */
    struct rl_sweeps *sweeps;     /* the store's once-a-second sweeps (sweeps.c) */
    struct rl_housekeeping *housekeeping;
    struct rl_push *push;             /* Web Push to the users' devices (push.c) */
    void *features[RL_FEATURE_COUNT]; /* each feature's own context (feature.h), NULL until open */
    struct rl_rpc *rpc;               /* requests of this node to bridges, waiting for answers (rpc.c) */
    rl_http_config_t http;
    rl_http_server_t *server;
    char address[300];               /* where server listens, once started (HOST:PORT) */
    h2o_timeout_t zero_timeout;      /* runs work on the next loop turn */
    h2o_timeout_entry_t store_flush; /* an inline store: flush on the next turn */
    h2o_socket_t *store_wake;        /* the store's wake fd (a dup), read by the loop */
    struct rl_jobs *jobs;            /* work off the loop: push, key refresh (common/jobs.h) */
    h2o_socket_t *jobs_wake;         /* the jobs' eventfd (a dup), read by the loop */
    h2o_timeout_t heartbeat_timeout; /* shared by every event stream */
    int datalock;                    /* the data folder's lock (datalock.h), held until the process ends */
} rl_relay_t;

/*
 * relayd's route table (routes.c): every feature's rows, assembled on the
 * first call. Loop thread.
 */
const rl_route_t *rl_relay_routes(size_t *count);

/*
 * Opens the store, the bus, the key source and the server on loop, from
 * relay->config. Blocking (startup). 0 or -1 with the cause logged.
 */
int rl_relay_start(rl_relay_t *relay, h2o_loop_t *loop);
/*
 * Call before each turn of the loop: when an inline store has work
 * waiting, its flush runs inside the next turn, in h2o's timeout phase,
 * like every other callback that touches sockets.
 */
void rl_relay_before_turn(rl_relay_t *relay);
/*
 * SIGTERM, first step (docs/operations.md, "Stopping"): stops accepting
 * connections, turns keep-alive off and sends HTTP/2 GOAWAY, and closes
 * bridge sockets with 1012 so that bridges reconnect at once. The loop
 * keeps running afterwards, so that requests in flight finish and the close
 * handshakes complete, until rl_relay_quiet() or the shutdown timeout.
 */
void rl_relay_shutdown_begin(rl_relay_t *relay);
/* 1 once nothing started before the shutdown is still going: no bridge socket open. */
int rl_relay_quiet(rl_relay_t *relay);
/* Stops listening, flushes the store and frees everything. */
void rl_relay_stop(rl_relay_t *relay);

#endif
