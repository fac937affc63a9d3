/*
 * relayd's route table: every /v1 route of the spec that exists so far, one
 * row each (method, pattern, handler, auth, rate bucket, body schema).
 */
#include "common/error.h"
#include "relay/sessions/agents.h"
#include "http/validate.h"
#include "relay/turn/approvals.h"
#include "relay/media/attachments.h"
#include "relay/turn/bridge.h"
#include "relay/installations/bridge_ws.h"
#include "relay/media/capabilities.h"
#include "relay/turn/deltas.h"
#include "relay/e2e/e2e.h"
#include "relay/turn/grants.h"
#include "relay/installations/installations.h"
#include "relay/identity/login.h"
#include "relay/installations/manifest.h"
#include "relay/identity/me.h"
#include "relay/turn/messages.h"
#include "relay/installations/pairing.h"
#include "relay/push/push.h"
#include "relay/core/relay.h"
#include "relay/sessions/sessions.h"
#include "relay/identity/stream.h"
#include "relay/sessions/timeline.h"
#include "relay/identity/webapp.h"

static int healthz(rl_call_t *call)
{
    rl_call_reply(call, json_pack("{s:s}", "status", "ok"));
    return 0;
}

const rl_route_t rl_relay_routes[] = {
    {"GET", "/healthz", healthz, RL_AUTH_NONE, NULL, NULL, 0},
    /* Pairing: per-IP buckets on the unauthenticated routes, per-user on the claim. */
    {"POST", "/v1/pairing/start", rl_pairing_start, RL_AUTH_NONE, "pairing", &rl_pairing_start_schema, 0},
    {"POST", "/v1/pairing/poll", rl_pairing_poll, RL_AUTH_NONE, "pairing", &rl_pairing_poll_schema, 0},
    /* the protocol authors' long poll by code (docs/api.md "Encrypted sessions") */
    {"GET", "/v1/pairing/poll", rl_pairing_wait, RL_AUTH_NONE, "pairing", NULL, 0},
    {"POST", "/v1/me/pairing/claim", rl_pairing_claim, RL_AUTH_USER, "claim", &rl_pairing_claim_schema, 0},
    /* Client API. */
    {"GET", "/v1/me", rl_me_get, RL_AUTH_USER, "default", NULL, 0},
    {"GET", "/v1/me/stream", rl_stream_open, RL_AUTH_USER, "default", NULL, 0},
    {"POST", "/v1/me/sessions", rl_session_create, RL_AUTH_USER, "default", &rl_session_create_schema, 0},
    {"PATCH", "/v1/me/sessions/:id", rl_session_change, RL_AUTH_USER, "default", &rl_session_rename_schema, 0, 0,
     RL_SESSION_RENAME},
    {"DELETE", "/v1/me/sessions/:id", rl_session_change, RL_AUTH_USER, "default", NULL, 0, 0, RL_SESSION_DELETE},
    {"POST", "/v1/me/sessions/:id/archive", rl_session_change, RL_AUTH_USER, "default", NULL, 0, 0, RL_SESSION_ARCHIVE},
    {"POST", "/v1/me/sessions/:id/unarchive", rl_session_change, RL_AUTH_USER, "default", NULL, 0, 0,
     RL_SESSION_UNARCHIVE},
    {"POST", "/v1/me/sessions/:id/restore", rl_session_change, RL_AUTH_USER, "default", NULL, 0, 0, RL_SESSION_RESTORE},
    {"POST", "/v1/me/sessions/:id/cancel", rl_session_cancel, RL_AUTH_USER, "default", &rl_session_cancel_schema, 0},
    /* issue 36: steering the session's agent (docs/api.md "Agents and projects") */
    {"POST", "/v1/me/sessions/:id/config", rl_session_config, RL_AUTH_USER, "default", &rl_session_config_schema, 0},
    {"GET", "/v1/me/sessions/:id/messages", rl_messages_list, RL_AUTH_USER, "default", NULL, 0},
    {"GET", "/v1/me/sessions/:id/timeline", rl_timeline_list, RL_AUTH_USER, "default", NULL, 0},
    {"POST", "/v1/me/sessions/:id/send", rl_message_send, RL_AUTH_USER, "default", &rl_message_send_schema, 0},
    {"PATCH", "/v1/me/installations/:id", rl_installation_patch, RL_AUTH_USER, "default", &rl_installation_patch_schema,
     0},
    {"DELETE", "/v1/me/installations/:id", rl_installation_revoke, RL_AUTH_USER, "default", NULL, 0},
    {"POST", "/v1/me/approvals/:id", rl_approval_decide, RL_AUTH_USER, "default", &rl_approval_decide_schema, 0},
    {"POST", "/v1/me/capabilities/:id", rl_capability_answer, RL_AUTH_USER, "default", &rl_capability_answer_schema, 0},
    {"GET", "/v1/me/snapshot", rl_snapshot_get, RL_AUTH_USER, "default", NULL, 0},
    {"POST", "/v1/me/attachments", rl_attachment_upload, RL_AUTH_USER, "default", NULL,
     RL_ROUTE_RAW_BODY | RL_ROUTE_HEAD_LIMIT, RL_ATTACHMENT_MAX},
    /* Signed download links: the signature is the credential. */
    {"GET", "/v1/files/:key", rl_attachment_download, RL_AUTH_NONE, NULL, NULL, 0},
    /* Bridge REST. */
    {"GET", "/v1/bridge/ws", rl_bridge_ws_open, RL_AUTH_BRIDGE_UPGRADE, "default", NULL, 0},
    {"POST", "/v1/bridge/setManifest", rl_manifest_set, RL_AUTH_BRIDGE, "default", &rl_manifest_schema, 0},
    /* issue 36: the agent's state in a session (docs/api.md "Session state") */
    {"POST", "/v1/bridge/sessions/:id/state", rl_bridge_session_state, RL_AUTH_BRIDGE, "task", &rl_session_state_schema,
     0, RL_SESSION_STATE_MAX},
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
    /* ours: a capability request is a prompt to the user, as an approval is, so it shares its bucket. */
    {"POST", "/v1/bridge/requestDeviceCapability", rl_bridge_request_capability, RL_AUTH_BRIDGE, "approval",
     &rl_request_capability_schema, 0},
    {"POST", "/v1/bridge/uploadAttachment", rl_bridge_upload, RL_AUTH_BRIDGE, "default", NULL,
     RL_ROUTE_RAW_BODY | RL_ROUTE_HEAD_LIMIT, RL_ATTACHMENT_MAX},
    /* The web client (docs/web.md): its files, how it signs in, grants and push subscriptions. */
    {"GET", "/", rl_webapp_page, RL_AUTH_NONE, NULL, NULL, 0},
    {"GET", "/pair", rl_webapp_page, RL_AUTH_NONE, NULL, NULL, 0},
    {"GET", "/login", rl_webapp_page, RL_AUTH_NONE, NULL, NULL, 0},
    {"GET", "/sw.js", rl_webapp_file, RL_AUTH_NONE, NULL, NULL, 0},
    {"GET", "/manifest.webmanifest", rl_webapp_file, RL_AUTH_NONE, NULL, NULL, 0},
    {"GET", "/app/:version/:name", rl_webapp_file, RL_AUTH_NONE, NULL, NULL, 0},
    {"GET", "/app/:version/vendor/:lib/:name", rl_webapp_file, RL_AUTH_NONE, NULL, NULL, 0}, /* web/app/vendor/ */
    {"GET", "/v1/web/config", rl_webapp_config, RL_AUTH_NONE, "default", NULL, 0},
    {"POST", "/v1/login/exchange", rl_login_exchange, RL_AUTH_NONE, "login", &rl_login_exchange_schema, 0},
    {"GET", "/v1/me/sessions", rl_sessions_list, RL_AUTH_USER, "default", NULL, 0},
    {"GET", "/v1/me/grants", rl_grants_list, RL_AUTH_USER, "default", NULL, 0},
    {"DELETE", "/v1/me/grants/:id", rl_grant_revoke, RL_AUTH_USER, "default", NULL, 0},
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
    {"GET", "/v1/me/installations/:id/models", rl_installation_models, RL_AUTH_USER, "default", NULL, 0},
    /* issue 36: the bridge's projects and the agent's own sessions, live (docs/api.md "The bridge's socket") */
    {"GET", "/v1/me/installations/:id/projects", rl_installation_projects, RL_AUTH_USER, "default", NULL, 0},
    {"GET", "/v1/me/installations/:id/agent-sessions", rl_installation_agent_sessions, RL_AUTH_USER, "default", NULL,
     0},
    {"POST", "/v1/bridge/notifyToolFile", rl_bridge_notify_tool_file, RL_AUTH_BRIDGE, "default",
     &rl_notify_tool_file_schema, 0},
    {"POST", "/v1/bridge/devices", rl_bridge_device_register, RL_AUTH_BRIDGE, "default", &rl_bridge_device_schema, 0},
    {"POST", "/v1/bridge/createSession", rl_bridge_session_create, RL_AUTH_BRIDGE, "default", &rl_bridge_session_schema,
     0},
    {"POST", "/v1/bridge/sessions/:id/recipients", rl_recipients_put, RL_AUTH_BRIDGE, "default", &rl_recipients_schema,
     0},
    {"POST", "/v1/me/push-subscriptions", rl_push_subscribe, RL_AUTH_USER, "default", &rl_push_subscribe_schema, 0},
    {"DELETE", "/v1/me/push-subscriptions", rl_push_unsubscribe, RL_AUTH_USER, "default", &rl_push_unsubscribe_schema,
     0},
};

const size_t rl_relay_nroutes = sizeof(rl_relay_routes) / sizeof(rl_relay_routes[0]);
