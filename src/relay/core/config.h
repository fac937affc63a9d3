/*
 * The relay's settings, as the domain reads them. relayd fills them from
 * its flags, the environment and the defaults (relayd/config.h).
 */
#ifndef RL_RELAY_CONFIG_H
#define RL_RELAY_CONFIG_H

#include <stdint.h>
#include <stdio.h>

/* The largest --max-message-bytes: half of an event stream's 8 MiB queue. */
#define RL_MESSAGE_BYTES_MAX (4 * 1024 * 1024)

typedef struct rl_config {
    char listen[256];
    char reuse_port[8]; /* "on": listen beside other relayd processes on the same port (SO_REUSEPORT), or "off" */
    char data[1024];
    char store[1024]; /* "" for the data folder's relay.db */
    char bus[1024];
    int64_t bus_settle;       /* ms between a node's renewals of its bucket share leases (a shared bus) */
    int64_t bus_outage_grace; /* ms the shares keep serving while the bus is unreachable */
    char attachments[1024];   /* "" for DATA/attachments */
    char log_level[16];
    char log_format[8]; /* json, text, or auto: text on a terminal */
    char public_url[512];
    char tls_cert[1024]; /* "" for plain HTTP */
    char tls_key[1024];
    char token_env[8];
    /* User tokens: an external OpenID Connect issuer, or the embedded one when no JWKS is set. */
    char jwt_issuer[512];
    char jwt_audience[256];
    char jwks_file[1024];
    char jwks_url[1024];
    int64_t jwks_refresh;
    /* spec durations, in milliseconds */
    int64_t pairing_ttl;
    int64_t approval_ttl;
    int64_t capability_ttl;
    int64_t ws_ping_interval;
    int64_t ws_pong_timeout;
    int64_t sse_heartbeat;
    int64_t replay_window;
    int64_t followup_window;
    int64_t delete_grace;
    int64_t idempotency_ttl;
    int64_t request_timeout;
    int64_t shutdown_timeout; /* SIGTERM: how long requests in flight get to finish */
    int64_t attachment_url_ttl;
    int64_t sse_buffer_events;
    int64_t store_queue_max; /* shedding: see relayd/config.c */
    int64_t delta_backlog_max;
    int64_t delta_wait_max; /* ms */
    int64_t loop_lag_max;   /* ms: sendMessageDelta gets 503 before its body is read while the loop lags more */
    /* Abuse limits (docs/operations.md, Security). */
    int64_t max_connections_per_address;
    int64_t max_message_bytes;     /* the longest text one message may hold, streamed or not */
    int64_t attachment_quota;      /* bytes of attachments one user may keep */
    int64_t unused_attachment_ttl; /* an upload no message references is removed after this */
    char trusted_proxies[4096];    /* CIDR blocks, comma-separated; "" for none */
    char forwarded_header[32];     /* "x-forwarded-for" or "forwarded" */
    /* The web client (docs/web.md). */
    char oidc_client_id[256]; /* "" unless the app signs in through --jwt-issuer with PKCE */
    char oidc_scope[256];
    char web_connect_src[1024]; /* more origins the app may fetch from (an identity provider's token endpoint) */
    int64_t web_token_ttl;      /* lifetime of a token exchanged for a sign-in link */
    char push_subject[512];     /* VAPID contact; default the public URL */
    char push_endpoints[8];     /* "https", or "any": plain http, any address and port (a test push service) */
    char push_networks[4096];   /* CIDR blocks push endpoints may also reach (an operator's own push service) */
    int64_t push_timeout;       /* ms one push may take, connection included */
    int64_t push_user_max;      /* pushes one user may have waiting or in flight */
    int64_t push_backoff;       /* ms an endpoint is skipped after its first failure, doubling after each */
    int64_t push_failures_max;  /* failures in a row after which a subscription is dropped */
    char metrics_listen[256];   /* HOST:PORT of the Prometheus listener, "" for none */
} rl_config_t;

#endif
