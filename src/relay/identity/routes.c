/*
 * The route rows of sign-in, the user's stream and GET /v1/me, the web client's files (docs/api.md); src/relay/routes.c
 * assembles every feature's rows into relayd's table.
 */
#include "relay/core/auth.h"
#include "relay/identity/login.h"
#include "relay/identity/me.h"
#include "relay/identity/stream.h"
#include "relay/identity/webapp.h"
#include "relay/identity/routes.h"

const rl_route_t rl_identity_routes[] = {
    {"GET", "/v1/me", rl_me_get, RL_AUTH_USER, "default", NULL, 0},
    {"GET", "/v1/me/stream", rl_stream_open, RL_AUTH_USER, "default", NULL, 0},
    /* The web client (docs/web.md): its files and how it signs in. */
    {"GET", "/", rl_webapp_page, RL_AUTH_NONE, NULL, NULL, 0},
    {"GET", "/pair", rl_webapp_page, RL_AUTH_NONE, NULL, NULL, 0},
    {"GET", "/login", rl_webapp_page, RL_AUTH_NONE, NULL, NULL, 0},
    {"GET", "/sw.js", rl_webapp_file, RL_AUTH_NONE, NULL, NULL, 0},
    {"GET", "/manifest.webmanifest", rl_webapp_file, RL_AUTH_NONE, NULL, NULL, 0},
    {"GET", "/app/:version/:name", rl_webapp_file, RL_AUTH_NONE, NULL, NULL, 0},
    {"GET", "/app/:version/vendor/:lib/:name", rl_webapp_file, RL_AUTH_NONE, NULL, NULL, 0}, /* web/app/vendor/ */
    {"GET", "/v1/web/config", rl_webapp_config, RL_AUTH_NONE, "default", NULL, 0},
    {"POST", "/v1/login/exchange", rl_login_exchange, RL_AUTH_NONE, "login", &rl_login_exchange_schema, 0},
};

const size_t rl_identity_nroutes = sizeof(rl_identity_routes) / sizeof(rl_identity_routes[0]);
