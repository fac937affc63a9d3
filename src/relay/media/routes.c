/*
 * The route rows of attachments and device capability requests (docs/api.md); src/relay/routes.c
 * assembles every feature's rows into relayd's table.
 */
#include "relay/core/auth.h"
#include "relay/media/attachments.h"
#include "relay/media/capabilities.h"
#include "relay/media/routes.h"

const rl_route_t rl_media_routes[] = {
    {"POST", "/v1/me/capabilities/:id", rl_capability_answer, RL_AUTH_USER, "default", &rl_capability_answer_schema, 0},
    {"POST", "/v1/me/attachments", rl_attachment_upload, RL_AUTH_USER, "default", NULL,
     RL_ROUTE_RAW_BODY | RL_ROUTE_HEAD_LIMIT, RL_ATTACHMENT_MAX},
    /* Signed download links: the signature is the credential. */
    {"GET", "/v1/files/:key", rl_attachment_download, RL_AUTH_NONE, NULL, NULL, 0},
    /* ours: a capability request is a prompt to the user, as an approval is, so it shares its bucket. */
    {"POST", "/v1/bridge/requestDeviceCapability", rl_bridge_request_capability, RL_AUTH_BRIDGE, "approval",
     &rl_request_capability_schema, 0},
};

const size_t rl_media_nroutes = sizeof(rl_media_routes) / sizeof(rl_media_routes[0]);
