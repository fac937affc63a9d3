/*
 * Authentication of API calls (user JWTs on /v1/me, bridge tokens on
 * /v1/bridge) and the rate-limit hook, with what they remember between
 * calls. Loop thread only.
 */
#ifndef RL_RELAY_AUTH_H
#define RL_RELAY_AUTH_H

#include <jansson.h>
#include <stdint.h>

#include "http/call.h"

struct rl_relay;
typedef struct rl_auth rl_auth_t;

/*
 * Auth kinds of the route table: every feature's rows name one, so they live
 * here rather than in relay.h, which a feature with a context of its own
 * does not include.
 */
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

/* Opens the key source (an external JWKS, or the embedded issuer's key) from relay->config. Startup; 0 or -1. */
int rl_auth_open(struct rl_relay *relay, rl_auth_t **out);
void rl_auth_close(rl_auth_t *auth);
/* The server's hooks. */
void rl_relay_authenticate(rl_call_t *call);
void rl_relay_limit(rl_call_t *call);
/* Drops what is remembered of an installation's token (it was revoked). */
void rl_auth_forget_installation(rl_auth_t *auth, const char *installation_id);
/* A signal on the auth topic (installations.h): another node revoked an installation. */
void rl_auth_on_signal(rl_auth_t *auth, json_t *message);
/*
 * The user an Authorization header value ("Bearer ...") speaks for, from
 * what this node remembers alone: a user token it verified and that has not
 * lapsed, or a bridge token whose installation it looked up recently, is not
 * revoked and whose secret matches. 0 with the user id in user (usersz
 * bytes), or -1 when the credential is not one it knows (it is then checked
 * the usual way, later). No I/O; loop thread.
 */
int rl_auth_known_owner(rl_auth_t *auth, const char *authorization, size_t len, char *user, size_t usersz);
/* Drops lapsed cache entries; housekeeping. */
void rl_auth_sweep(rl_auth_t *auth, int64_t now_ms, unsigned parts);

#endif
