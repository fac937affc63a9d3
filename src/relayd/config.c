#include <ctype.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/duration.h"
#include "http/peer.h"
#include "relayd/config.h"

enum setting_kind { SETTING_STRING, SETTING_DURATION, SETTING_COUNT };

struct setting {
    const char *name;
    enum setting_kind kind;
    size_t offset;
    size_t size; /* for strings */
    const char *fallback;
    const char *help;
};

#define STRING(name, field, fallback, help)                                                                            \
    {                                                                                                                  \
        name, SETTING_STRING, offsetof(rl_config_t, field), sizeof(((rl_config_t *)0)->field), fallback, help          \
    }
#define DURATION(name, field, fallback, help)                                                                          \
    {                                                                                                                  \
        name, SETTING_DURATION, offsetof(rl_config_t, field), 0, fallback, help                                        \
    }
#define COUNT(name, field, fallback, help)                                                                             \
    {                                                                                                                  \
        name, SETTING_COUNT, offsetof(rl_config_t, field), 0, fallback, help                                           \
    }

static const struct setting settings[] = {
    STRING("listen", listen, "127.0.0.1:8080", "address to listen on, HOST:PORT"),
    STRING("reuse-port", reuse_port, "off",
           "on: relayd processes share the listen port, one per core (needs a postgres:// store and a redis bus)"),
    STRING("data", data, "data", "data folder (SQLite store, signing key, attachments)"),
    STRING("store", store, "", "the store: sqlite:PATH or postgres://... (default: the data folder's relay.db)"),
    STRING("attachments", attachments, "",
           "folder of uploaded files (default DATA/attachments); several nodes must share one"),
    STRING("bus", bus, "local",
           "the bus between relay nodes: local (one node), redis://[:password@]HOST:PORT/N or unix:///PATH"),
    DURATION("bus-settle", bus_settle, "250ms",
             "a shared bus: how often a node renews (or returns) its leases of rate bucket shares"),
    DURATION("bus-outage-grace", bus_outage_grace, "30s",
             "a shared bus: how long a node serves rate buckets alone (its part of each) while the bus is unreachable"),
    STRING("log-level", log_level, "info", "debug, info, warn or error"),
    STRING("log-format", log_format, "auto", "json, text, or auto (text on a terminal, JSON otherwise)"),
    STRING("public-url", public_url, "", "base URL clients use to reach this relay (default http(s)://LISTEN)"),
    STRING("tls-cert", tls_cert, "", "PEM certificate chain: serve HTTPS (HTTP/2 and 1.1); SIGHUP reloads it"),
    STRING("tls-key", tls_key, "", "PEM private key of --tls-cert"),
    STRING("token-env", token_env, "live", "environment tag in minted bridge tokens: live or test"),
    STRING("jwt-issuer", jwt_issuer, "", "issuer of user tokens (required with --jwks-file/--jwks-url)"),
    STRING("jwt-audience", jwt_audience, "", "audience of user tokens (required with --jwks-file/--jwks-url)"),
    STRING("jwks-file", jwks_file, "", "JWKS file of an external OpenID Connect provider"),
    STRING("jwks-url", jwks_url, "", "JWKS URL of an external OpenID Connect provider"),
    DURATION("jwks-refresh", jwks_refresh, "10m", "how often --jwks-url is fetched again"),
    DURATION("pairing-ttl", pairing_ttl, "120s", "lifetime of a pairing code"),
    DURATION("approval-ttl", approval_ttl, "5m", "lifetime of a pending approval"),
    DURATION("capability-ttl", capability_ttl, "2m", "lifetime of a pending device capability request"),
    DURATION("ws-ping-interval", ws_ping_interval, "30s", "bridge socket ping interval"),
    DURATION("ws-pong-timeout", ws_pong_timeout, "10s", "time a bridge has to answer a ping"),
    DURATION("sse-heartbeat", sse_heartbeat, "25s", "event stream heartbeat interval"),
    DURATION("replay-window", replay_window, "5m", "SSE ring buffer age and bridge update replay window"),
    DURATION("followup-window", followup_window, "30m", "time after an update during which the bridge may answer"),
    DURATION("delete-grace", delete_grace, "24h", "time a deleted session can be restored"),
    DURATION("idempotency-ttl", idempotency_ttl, "24h", "time an idempotency key is remembered"),
    DURATION("request-timeout", request_timeout, "10s", "time a client has to send a request head and body"),
    DURATION("shutdown-timeout", shutdown_timeout, "10s", "on SIGTERM, time requests in flight get to finish"),
    DURATION("attachment-url-ttl", attachment_url_ttl, "1h", "lifetime of a signed attachment download URL"),
    COUNT("sse-buffer-events", sse_buffer_events, "256", "events kept per user for stream resume"),
    COUNT("store-queue-max", store_queue_max, "4096",
          "store operations waiting for the database past which requests get 503 at once"),
    COUNT("delta-backlog-max", delta_backlog_max, "16384",
          "streamed deltas not yet stored past which new ones get 503 at once"),
    DURATION("delta-wait-max", delta_wait_max, "100ms",
             "time the oldest streamed delta not yet stored may wait past which new ones get 503 at once"),
    DURATION("loop-lag-max", loop_lag_max, "50ms",
             "how far behind the event loop may fall before new deltas get 503 unread (0: never)"),
    COUNT("max-message-bytes", max_message_bytes, "1048576",
          "the longest text (in bytes) a message may hold, its deltas included; at most 4194304"),
    COUNT("attachment-quota", attachment_quota, "1073741824",
          "bytes of attachments one user may keep (uploads past it are refused with 413 quota_exceeded)"),
    DURATION("unused-attachment-ttl", unused_attachment_ttl, "24h",
             "time after which an upload no message references is removed"),
    COUNT("max-connections-per-address", max_connections_per_address, "256",
          "open connections one client address (an IPv6 /64) may hold; trusted proxies are not counted"),
    STRING("trusted-proxies", trusted_proxies, "",
           "CIDR blocks of reverse proxies (10.0.0.0/8,::1): their forwarding header names the client"),
    STRING("forwarded-header", forwarded_header, "x-forwarded-for",
           "the header trusted proxies write: x-forwarded-for or forwarded"),
    STRING("oidc-client-id", oidc_client_id, "", "client id of the web app at --jwt-issuer (sign-in with PKCE)"),
    STRING("oidc-scope", oidc_scope, "openid offline_access", "scopes the web app asks --jwt-issuer for"),
    STRING("web-connect-src", web_connect_src, "", "more origins the web app may fetch from, space-separated"),
    DURATION("web-token-ttl", web_token_ttl, "30d", "lifetime of the token a sign-in link is exchanged for"),
    STRING("push-subject", push_subject, "", "contact sent to push services, mailto: or https: (default --public-url)"),
    STRING("push-endpoints", push_endpoints, "https",
           "push services allowed: https (port 443, public addresses), or any (http, any address: tests only)"),
    STRING("push-networks", push_networks, "",
           "CIDR blocks (10.0.0.0/8,fd00::/8) where push endpoints may also be, on any port: your own push service"),
    DURATION("push-timeout", push_timeout, "10s", "time one push may take, connecting included"),
    COUNT("push-user-max", push_user_max, "64",
          "pushes one user may have waiting or in flight; past it theirs are dropped, nobody else's"),
    DURATION("push-backoff", push_backoff, "1m",
             "time a push endpoint is skipped after a failure, doubled after each further one (at most 1h)"),
    COUNT("push-failures-max", push_failures_max, "5", "failed pushes in a row after which a subscription is deleted"),
    STRING("metrics-listen", metrics_listen, "",
           "HOST:PORT of a listener serving Prometheus metrics at /metrics (off by default)"),
};

#define NSETTINGS (sizeof(settings) / sizeof(settings[0]))

static void env_name(const char *name, char *out, size_t outsz)
{
    size_t i = 0;

    snprintf(out, outsz, "RELAY_");
    for (i = 6; *name != '\0' && i + 1 < outsz; ++name, ++i)
        out[i] = *name == '-' ? '_' : (char)toupper((unsigned char)*name);
    out[i] = '\0';
}

static int apply(rl_config_t *config, const struct setting *setting, const char *value, const char *origin)
{
    char *field = (char *)config + setting->offset;
    int64_t number;
    char *end;

    switch (setting->kind) {
    case SETTING_STRING:
        if (strlen(value) >= setting->size) {
            fprintf(stderr, "relayd: %s: value too long for %s\n", origin, setting->name);
            return -1;
        }
        memcpy(field, value, strlen(value) + 1);
        return 0;
    case SETTING_DURATION:
        if (rl_duration_parse(value, &number) != 0) {
            fprintf(stderr, "relayd: %s: '%s' is not a duration for %s (use a unit: 250ms, 3s, 5m, 24h)\n", origin,
                    value, setting->name);
            return -1;
        }
        memcpy(field, &number, sizeof(number));
        return 0;
    case SETTING_COUNT:
        number = strtoll(value, &end, 10);
        if (*value == '\0' || *end != '\0' || number <= 0) {
            fprintf(stderr, "relayd: %s: '%s' is not a positive count for %s\n", origin, value, setting->name);
            return -1;
        }
        memcpy(field, &number, sizeof(number));
        return 0;
    }
    return -1;
}

/* HOST:PORT or [V6]:PORT; the host is resolved only when listening. */
static int listen_syntax_ok(const char *listen)
{
    const char *colon = listen[0] == '[' ? strstr(listen, "]:") : strrchr(listen, ':');
    const char *port;
    char *end;
    long number;

    if (colon == NULL || colon == listen)
        return 0;
    port = colon + (listen[0] == '[' ? 2 : 1);
    if (*port == '\0')
        return 0;
    number = strtol(port, &end, 10);
    return *end == '\0' && number >= 0 && number <= 65535;
}

/*
 * Processes on one port are nodes of one relay among which the kernel
 * spreads the connections: each holds a data folder of its own (its lock),
 * so they share nothing but what --store and --bus name. The data folder's
 * SQLite file cannot be shared so, and nodes on a local bus would not see
 * each other's events and bridges.
 */
static int reuse_port_check(const rl_config_t *config)
{
    if (strcmp(config->reuse_port, "off") == 0)
        return 0;
    if (strcmp(config->reuse_port, "on") != 0) {
        fprintf(stderr, "relayd: --reuse-port must be on or off, not '%s'\n", config->reuse_port);
        return -1;
    }
    if (strncmp(config->store, "postgres://", 11) != 0 && strncmp(config->store, "postgresql://", 13) != 0) {
        fprintf(stderr, "relayd: --reuse-port needs --store postgres://...: the processes on one port each hold a data "
                        "folder of their own (its lock allows one relayd), so a SQLite store cannot be shared by them "
                        "(docs/operations.md, \"One process per core\")\n");
        return -1;
    }
    if (strcmp(config->bus, "local") == 0 || config->bus[0] == '\0') {
        fprintf(stderr, "relayd: --reuse-port needs --bus redis://... (or unix://...): on the local bus the processes "
                        "on one port would not see each other's events and bridges\n");
        return -1;
    }
    return 0;
}

static const struct setting *find(const char *name, size_t len)
{
    size_t i;

    for (i = 0; i < NSETTINGS; ++i) {
        if (strlen(settings[i].name) == len && memcmp(settings[i].name, name, len) == 0)
            return &settings[i];
    }
    return NULL;
}

int rl_config_load(rl_config_t *config, int argc, char **argv, int first, int *rest)
{
    rl_cidr_set_t proxies;
    char error[256];
    size_t i;
    int a;

    memset(config, 0, sizeof(*config));
    for (i = 0; i < NSETTINGS; ++i) {
        char name[64];
        const char *value;
        env_name(settings[i].name, name, sizeof(name));
        if (apply(config, &settings[i], settings[i].fallback, "default") != 0)
            return -1;
        value = getenv(name);
        if (value != NULL && apply(config, &settings[i], value, name) != 0)
            return -1;
    }
    for (a = first; a < argc; ++a) {
        const char *arg = argv[a], *eq, *value;
        const struct setting *setting;
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            rl_config_usage(stdout);
            return 1;
        }
        if (strncmp(arg, "--", 2) != 0)
            break;
        eq = strchr(arg, '=');
        setting = find(arg + 2, eq != NULL ? (size_t)(eq - arg - 2) : strlen(arg + 2));
        if (setting == NULL) {
            fprintf(stderr, "relayd: unknown option %s (see relayd --help)\n", arg);
            return -1;
        }
        if (eq != NULL) {
            value = eq + 1;
        } else if (a + 1 < argc) {
            value = argv[++a];
        } else {
            fprintf(stderr, "relayd: option %s needs a value\n", arg);
            return -1;
        }
        if (apply(config, setting, value, arg) != 0)
            return -1;
    }
    *rest = a;
    if (!listen_syntax_ok(config->listen)) {
        fprintf(stderr, "relayd: --listen must be HOST:PORT or [IPv6]:PORT with a port from 0 to 65535, not '%s'\n",
                config->listen);
        return -1;
    }
    if (config->metrics_listen[0] != '\0' && !listen_syntax_ok(config->metrics_listen)) {
        fprintf(stderr, "relayd: --metrics-listen must be HOST:PORT or [IPv6]:PORT, not '%s'\n",
                config->metrics_listen);
        return -1;
    }
    if (reuse_port_check(config) != 0)
        return -1;
    if (strcmp(config->log_format, "json") != 0 && strcmp(config->log_format, "text") != 0 &&
        strcmp(config->log_format, "auto") != 0) {
        fprintf(stderr, "relayd: --log-format must be json, text or auto\n");
        return -1;
    }
    if (strcmp(config->token_env, "live") != 0 && strcmp(config->token_env, "test") != 0) {
        fprintf(stderr, "relayd: --token-env must be live or test\n");
        return -1;
    }
    if ((config->jwks_file[0] != '\0' || config->jwks_url[0] != '\0') &&
        (config->jwt_issuer[0] == '\0' || config->jwt_audience[0] == '\0')) {
        fprintf(stderr, "relayd: --jwks-file and --jwks-url need --jwt-issuer and --jwt-audience\n");
        return -1;
    }
    /* A message travels whole in message_finalized: it must fit an event stream's queue with room to spare. */
    if (config->max_message_bytes > RL_MESSAGE_BYTES_MAX) {
        fprintf(stderr, "relayd: --max-message-bytes may be at most %d\n", RL_MESSAGE_BYTES_MAX);
        return -1;
    }
    if (rl_cidr_set_parse(config->trusted_proxies, &proxies, error, sizeof(error)) != 0) {
        fprintf(stderr, "relayd: --trusted-proxies: %s\n", error);
        return -1;
    }
    rl_cidr_set_free(&proxies);
    if (strcmp(config->forwarded_header, "x-forwarded-for") != 0 &&
        strcmp(config->forwarded_header, "forwarded") != 0) {
        fprintf(stderr, "relayd: --forwarded-header must be x-forwarded-for or forwarded\n");
        return -1;
    }
    if (strcmp(config->push_endpoints, "https") != 0 && strcmp(config->push_endpoints, "any") != 0) {
        fprintf(stderr, "relayd: --push-endpoints must be https or any\n");
        return -1;
    }
    if (rl_cidr_set_parse(config->push_networks, &proxies, error, sizeof(error)) != 0) {
        fprintf(stderr, "relayd: --push-networks: %s\n", error);
        return -1;
    }
    rl_cidr_set_free(&proxies);
    if (config->push_timeout < 100) {
        fprintf(stderr, "relayd: --push-timeout must be at least 100ms\n");
        return -1;
    }
    if (config->oidc_client_id[0] != '\0' && config->jwt_issuer[0] == '\0') {
        fprintf(stderr, "relayd: --oidc-client-id needs --jwt-issuer (and --jwks-url or --jwks-file)\n");
        return -1;
    }
    if (config->jwks_file[0] != '\0' && config->jwks_url[0] != '\0') {
        fprintf(stderr, "relayd: give --jwks-file or --jwks-url, not both\n");
        return -1;
    }
    return 0;
}

void rl_config_usage(FILE *out)
{
    size_t i;

    fprintf(out, "usage: relayd [--listen HOST:PORT] [--data DIR] [settings...]\n"
                 "       relayd token USER [--data DIR] [--ttl DURATION]\n"
                 "       relayd login-link USER [--data DIR] [--store URL] [--ttl DURATION] [--public-url URL]\n"
                 "                         [--listen HOST:PORT]\n"
                 "       relayd backup DEST [--data DIR] [--store sqlite:PATH] [--attachments DIR]\n"
                 "       relayd restore SRC [--data DIR] [--attachments DIR]\n"
                 "       relayd migrate --from sqlite:PATH --to postgres://USER:PASSWORD@HOST/DB\n"
                 "       relayd migrate --check [--data DIR] [--store sqlite:PATH|postgres://...]\n"
                 "       relayd --version\n"
                 "       relayd COMMAND --help   (what one of the commands above does)\n\n"
                 "Runs the relay in the foreground; logs go to stderr, as text on a terminal and JSON lines\n"
                 "otherwise (--log-format). SIGTERM stops it gracefully, SIGHUP reloads the TLS certificate.\n"
                 "Each setting may also come from the environment variable shown.\n\n");
    for (i = 0; i < NSETTINGS; ++i) {
        char name[64], flag[48];
        env_name(settings[i].name, name, sizeof(name));
        snprintf(flag, sizeof(flag), "--%s", settings[i].name);
        fprintf(out, "  %-22s %s\n  %-22s default %s, env %s\n", flag, settings[i].help, "",
                settings[i].fallback[0] != '\0' ? settings[i].fallback : "(none)", name);
    }
}
