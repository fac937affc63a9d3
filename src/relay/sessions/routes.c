/*
 * The route rows of sessions, their timeline, the agent's state, projects and sessions (docs/api.md);
 * src/relay/routes.c assembles every feature's rows into relayd's table.
 */
#include "relay/core/auth.h"
#include "relay/sessions/agents.h"
#include "relay/sessions/sessions.h"
#include "relay/sessions/timeline.h"
#include "relay/sessions/routes.h"

const rl_route_t rl_sessions_routes[] = {
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
    {"GET", "/v1/me/sessions/:id/timeline", rl_timeline_list, RL_AUTH_USER, "default", NULL, 0},
    /* issue 36: the agent's state in a session (docs/api.md "Session state") */
    {"POST", "/v1/bridge/sessions/:id/state", rl_bridge_session_state, RL_AUTH_BRIDGE, "task", &rl_session_state_schema,
     0, RL_SESSION_STATE_MAX},
    {"GET", "/v1/me/sessions", rl_sessions_list, RL_AUTH_USER, "default", NULL, 0},
    {"GET", "/v1/me/installations/:id/models", rl_installation_models, RL_AUTH_USER, "default", NULL, 0},
    /* issue 36: the bridge's projects and the agent's own sessions, live (docs/api.md "The bridge's socket") */
    {"GET", "/v1/me/installations/:id/projects", rl_installation_projects, RL_AUTH_USER, "default", NULL, 0},
    {"GET", "/v1/me/installations/:id/agent-sessions", rl_installation_agent_sessions, RL_AUTH_USER, "default", NULL,
     0},
};

const size_t rl_sessions_nroutes = sizeof(rl_sessions_routes) / sizeof(rl_sessions_routes[0]);
