/*
 * The route rows of devices, recipients and session files of encrypted sessions (docs/api.md); src/relay/routes.c
 * assembles every feature's rows into relayd's table.
 */
#include "relay/core/auth.h"
#include "relay/e2e/e2e.h"
#include "relay/e2e/routes.h"

const rl_route_t rl_e2e_routes[] = {
    /* End-to-end encryption (docs/api.md "Encrypted sessions"). */
    {"POST", "/v1/me/devices", rl_device_register, RL_AUTH_USER, "default", &rl_device_register_schema, 0},
    {"GET", "/v1/me/devices", rl_devices_list, RL_AUTH_USER, "default", NULL, 0},
    {"DELETE", "/v1/me/devices/:id", rl_device_revoke, RL_AUTH_USER, "default", NULL, 0},
    {"POST", "/v1/me/devices/:id/confirm", rl_device_confirm, RL_AUTH_USER, "default", &rl_device_confirm_schema, 0},
    {"GET", "/v1/me/devices/:id/keys", rl_device_keys, RL_AUTH_USER, "default", NULL, 0},
    {"POST", "/v1/me/sessions/:id/recipients", rl_recipients_put, RL_AUTH_USER, "default", &rl_recipients_schema, 0},
    {"GET", "/v1/me/sessions/:id/files", rl_session_files_list, RL_AUTH_USER, "default", NULL, 0},
    {"GET", "/v1/me/sessions/:id/files/:blind_idx", rl_session_file_read, RL_AUTH_USER, "default", NULL, 0},
    {"POST", "/v1/me/sessions/:id/files/read", rl_session_file_read_plain, RL_AUTH_USER, "default",
     &rl_file_read_plain_schema, 0},
    {"POST", "/v1/bridge/notifyToolFile", rl_bridge_notify_tool_file, RL_AUTH_BRIDGE, "default",
     &rl_notify_tool_file_schema, 0},
    {"POST", "/v1/bridge/devices", rl_bridge_device_register, RL_AUTH_BRIDGE, "default", &rl_bridge_device_schema, 0},
    {"POST", "/v1/bridge/createSession", rl_bridge_session_create, RL_AUTH_BRIDGE, "default", &rl_bridge_session_schema,
     0},
    {"POST", "/v1/bridge/sessions/:id/recipients", rl_recipients_put, RL_AUTH_BRIDGE, "default", &rl_recipients_schema,
     0},
};

const size_t rl_e2e_nroutes = sizeof(rl_e2e_routes) / sizeof(rl_e2e_routes[0]);
