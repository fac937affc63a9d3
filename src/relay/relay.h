/*
 * The relay application: configuration, store, limiter, user-token keys and
 * the HTTP server, tied to one event loop. Loop thread only.
 */
#ifndef RL_RELAY_RELAY_H
#define RL_RELAY_RELAY_H

#include <h2o.h>

#include "bus/bus.h"
#include "common/strmap.h"
#include "http/server.h"
#include "relay/config.h"
#include "relay/jwks_source.h"
#include "relay/jwt.h"
#include "relay/ratelimit.h"
#include "store/store.h"

/* Auth kinds of the route table. */
enum rl_auth_kind {
    RL_AUTH_NONE = 0,
    RL_AUTH_USER,           /* a user JWT */
    RL_AUTH_BRIDGE,         /* a bridge token on REST: a revoked installation is 410 */
    RL_AUTH_BRIDGE_UPGRADE, /* a bridge token on the socket upgrade: a revoked installation is 401 */
};

/* call->principal_kind */
enum rl_principal_kind { RL_PRINCIPAL_NONE = 0, RL_PRINCIPAL_USER, RL_PRINCIPAL_INSTALLATION };

/* The embedded issuer's names, used when no external provider is configured. */
#define RL_EMBEDDED_ISSUER   "relayd"
#define RL_EMBEDDED_AUDIENCE "relay"

struct rl_relay;

typedef struct rl_relay {
    rl_config_t config;
    h2o_loop_t *loop;
    rl_store_t *store;
    rl_ratelimit_t *limiter;
    rl_jwks_source_t *jwks;
    rl_jwt_policy_t policy;
    rl_strmap_t *known_users;     /* users already ensured in the store by this process */
    rl_strmap_t *verified_tokens; /* SHA-256 of a verified user token -> its sub, until it lapses (auth.c) */
    rl_strmap_t *bridge_tokens;   /* installation id -> its token hash, owner and state, briefly (auth.c) */
    rl_http_config_t http;
    rl_http_server_t *server;
    h2o_timeout_t housekeeping_timeout;
    h2o_timeout_entry_t housekeeping;
    int housekeeping_started;
    rl_bus_t *bus;
    unsigned char url_key[32];       /* signs attachment download URLs */
    h2o_timeout_t zero_timeout;      /* runs work on the next loop turn */
    h2o_timeout_entry_t store_flush; /* a store without a wake fd: flush on the next turn */
    h2o_socket_t *store_wake;        /* the store's wake fd (a dup), read by the loop */
    h2o_timeout_t heartbeat_timeout; /* shared by every event stream */
    /*
     * Hooks for the bridge channel: an update was queued for an installation,
     * an installation was revoked. NULL until a bridge transport registers.
     */
    void (*on_update_queued)(struct rl_relay *relay, const char *installation_id, int64_t update_id);
    void (*on_installation_revoked)(struct rl_relay *relay, const char *installation_id);
    rl_strmap_t *bridge_sockets; /* installation id -> its socket (relay/bridge_ws.c) */
    rl_strmap_t *open_messages;  /* message id -> what its deltas are checked against (relay/deltas.c) */
    rl_delta_batch_t *pending_deltas; /* applied and answered, not yet persisted */
    h2o_timeout_t delta_flush_timeout;
    h2o_timeout_entry_t delta_flush;
    h2o_timeout_t ping_timeout, pong_timeout;
    h2o_timeout_t approval_timeout; /* the expiry sweep's period (relay/approvals.c) */
    h2o_timeout_entry_t approvals_sweep;
    int approvals_sweeping;
} rl_relay_t;

extern const rl_route_t rl_relay_routes[];
extern const size_t rl_relay_nroutes;

/*
 * Opens the store, the key source and the server on loop, from
 * relay->config. Blocking (startup). 0 or -1 with the cause logged.
 */
int rl_relay_start(rl_relay_t *relay, h2o_loop_t *loop);
/*
 * Call before each turn of the loop: when the store has work waiting, its
 * flush (commit, then completions) runs inside the next turn, in h2o's
 * timeout phase, like every other callback that touches sockets.
 */
void rl_relay_before_turn(rl_relay_t *relay);
/* Stops listening, flushes the store and frees everything. */
void rl_relay_stop(rl_relay_t *relay);

/* The server's hooks (relay/auth.c). */
void rl_relay_authenticate(rl_call_t *call);
int rl_relay_limit(rl_call_t *call);
/* Drops what auth remembers of an installation (on revoke). */
void rl_auth_forget_installation(rl_relay_t *relay, const char *installation_id);
/* Drops lapsed cache entries; housekeeping. */
void rl_auth_sweep(rl_relay_t *relay, int64_t now_ms);

/* Route handlers (relay/pairing.c). */
int rl_pairing_start(rl_call_t *call);
int rl_pairing_poll(rl_call_t *call);
int rl_pairing_claim(rl_call_t *call);
extern const struct rl_schema rl_pairing_start_schema, rl_pairing_poll_schema, rl_pairing_claim_schema;

/* Route handlers (relay/manifest.c). */
int rl_manifest_set(rl_call_t *call);
extern const struct rl_schema rl_manifest_schema;

/* Client API handlers (relay/client.c, relay/stream.c). */
int rl_me_get(rl_call_t *call);
int rl_session_create(rl_call_t *call);
int rl_session_change(rl_call_t *call); /* route tag: rl_session_op_t */
int rl_session_cancel(rl_call_t *call);
int rl_messages_list(rl_call_t *call);
int rl_message_send(rl_call_t *call);
int rl_installation_patch(rl_call_t *call);
int rl_installation_revoke(rl_call_t *call);
int rl_stream_open(rl_call_t *call);
int rl_attachment_upload(rl_call_t *call);
int rl_attachment_download(rl_call_t *call);
extern const struct rl_schema rl_session_create_schema, rl_session_rename_schema, rl_session_cancel_schema,
    rl_message_send_schema, rl_installation_patch_schema;

/* Bridge handlers (relay/bridge.c, relay/bridge_ws.c) and approvals (relay/approvals.c). */
int rl_bridge_send_message(rl_call_t *call);
int rl_bridge_send_delta(rl_call_t *call);
int rl_bridge_send_end(rl_call_t *call);
int rl_bridge_task(rl_call_t *call); /* route tag: rl_task_step_t */
int rl_bridge_request_approval(rl_call_t *call);
int rl_bridge_upload(rl_call_t *call);
int rl_approval_decide(rl_call_t *call);
int rl_snapshot_get(rl_call_t *call);
extern const struct rl_schema rl_send_message_schema, rl_send_delta_schema, rl_send_end_schema, rl_create_task_schema,
    rl_update_task_schema, rl_finish_task_schema, rl_request_approval_schema, rl_approval_decide_schema;
/* An approval as the stream and the snapshot show it (new reference). */
json_t *rl_approval_view(json_t *approval);
/* Starts and stops the expiry sweep. */
void rl_approvals_start(rl_relay_t *relay);
void rl_approvals_stop(rl_relay_t *relay);

/* The installation as clients see it (no token hash), with its agent health. Steals row. */
json_t *rl_installation_view(rl_relay_t *relay, json_t *row);
/* The session as clients see it. Steals row. */
json_t *rl_session_view(rl_relay_t *relay, json_t *row);
/* Publishes an event to a user's streams. Steals data. */
void rl_relay_publish(rl_relay_t *relay, const char *user_id, const char *name, json_t *data);
/* Tells the bridge channel that an update is waiting. */
void rl_relay_update_queued(rl_relay_t *relay, const char *installation_id, int64_t update_id);

#endif
