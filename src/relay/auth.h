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
/* Drops lapsed cache entries; housekeeping. */
void rl_auth_sweep(rl_auth_t *auth, int64_t now_ms, unsigned parts);

#endif
