/*
 * The route rows of messages and deltas, tasks, approvals, the snapshot and grants (docs/api.md); src/relay/routes.c
 * assembles every feature's rows into relayd's table.
 */
#include "relay/core/auth.h"
#include "relay/media/attachments.h"
#include "relay/turn/approvals.h"
#include "relay/turn/bridge.h"
#include "relay/turn/deltas.h"
#include "relay/turn/grants.h"
#include "relay/turn/messages.h"
#include "relay/turn/routes.h"

const rl_route_t rl_turn_routes[] = {
    {"GET", "/v1/me/sessions/:id/messages", rl_messages_list, RL_AUTH_USER, "default", NULL, 0},
    {"POST", "/v1/me/sessions/:id/send", rl_message_send, RL_AUTH_USER, "default", &rl_message_send_schema, 0},
    {"POST", "/v1/me/approvals/:id", rl_approval_decide, RL_AUTH_USER, "default", &rl_approval_decide_schema, 0},
    {"GET", "/v1/me/snapshot", rl_snapshot_get, RL_AUTH_USER, "default", NULL, 0},
    {"POST", "/v1/bridge/sendMessage", rl_bridge_send_message, RL_AUTH_BRIDGE, "msg", &rl_send_message_schema, 0},
    /* The hot route: read flat when it can be, refused unread while the loop lags (http/route.h). */
    {"POST", "/v1/bridge/sendMessageDelta", rl_bridge_send_delta, RL_AUTH_BRIDGE, "delta", &rl_send_delta_schema,
     RL_ROUTE_FLAT_BODY | RL_ROUTE_SHED},
    {"POST", "/v1/bridge/sendMessageEnd", rl_bridge_send_end, RL_AUTH_BRIDGE, "msg", &rl_send_end_schema, 0},
    {"POST", "/v1/bridge/createTask", rl_bridge_task, RL_AUTH_BRIDGE, "task", &rl_create_task_schema, 0, 0,
     RL_TASK_CREATE},
    {"POST", "/v1/bridge/updateTask", rl_bridge_task, RL_AUTH_BRIDGE, "task", &rl_update_task_schema, 0, 0,
     RL_TASK_UPDATE},
    {"POST", "/v1/bridge/finishTask", rl_bridge_task, RL_AUTH_BRIDGE, "task", &rl_finish_task_schema, 0, 0,
     RL_TASK_FINISH},
    {"POST", "/v1/bridge/requestApproval", rl_bridge_request_approval, RL_AUTH_BRIDGE, "approval",
     &rl_request_approval_schema, 0},
    {"POST", "/v1/bridge/uploadAttachment", rl_bridge_upload, RL_AUTH_BRIDGE, "default", NULL,
     RL_ROUTE_RAW_BODY | RL_ROUTE_HEAD_LIMIT, RL_ATTACHMENT_MAX},
    {"GET", "/v1/me/grants", rl_grants_list, RL_AUTH_USER, "default", NULL, 0},
    {"DELETE", "/v1/me/grants/:id", rl_grant_revoke, RL_AUTH_USER, "default", NULL, 0},
};

const size_t rl_turn_nroutes = sizeof(rl_turn_routes) / sizeof(rl_turn_routes[0]);
