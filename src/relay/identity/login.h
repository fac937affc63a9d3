/*
 * Sign-in links for the web client (docs/web.md), for the embedded issuer:
 * `relayd login-link USER` stores a single-use code (its SHA-256 only) and
 * prints a link that carries the code in its fragment; the app posts the
 * code to POST /v1/login/exchange, which spends it and answers a user token.
 * A fragment never reaches a server, so the code sits in no access log.
 */
#ifndef RL_RELAY_LOGIN_H
#define RL_RELAY_LOGIN_H

#include "http/call.h"
#include "http/validate.h"
#include "relay/core/config.h"

#define RL_LOGIN_CODE_CHARS  32 /* base62: about 190 bits */
#define RL_LOGIN_TTL_DEFAULT "10m"
#define RL_LOGIN_TTL_MAX_MS  (24LL * 3600 * 1000)

typedef struct rl_login rl_login_t;

/* Opens the embedded issuer's key for the exchange (none with an external provider). Startup; 0 or -1. */
int rl_login_open(const rl_config_t *config, rl_login_t **out);
void rl_login_close(rl_login_t *login);

/* POST /v1/login/exchange {code}: the token for the link's user, once. */
int rl_login_exchange(rl_call_t *call);
extern const rl_schema_t rl_login_exchange_schema;

/*
 * `relayd login-link USER [--data DIR] [--store URL] [--ttl 10m] [--public-url URL]`:
 * the link alone on stdout's last line (a QR code of it above, on a
 * terminal). Works beside a running relayd on the same folder. Returns the
 * exit status.
 */
int rl_login_link_command(int argc, char **argv);

#endif
