/*
 * Issue 36 (docs/api.md): a session's agent, project and state. The
 * bridge posts the agent's state (POST /v1/bridge/sessions/:id/state),
 * clients steer it (POST /v1/me/sessions/:id/config) and ask the bridge,
 * live, for its projects and the agent's own sessions.
 */
#ifndef RL_RELAY_AGENTS_H
#define RL_RELAY_AGENTS_H

#include <stddef.h>

#include "http/call.h"
#include "http/validate.h"

/* Printable ASCII (0x20-0x7e) only: opaque ids a bridge mints and a client sends back. 0 or -1. */
int rl_printable_check(const char *s, size_t len);
#define RL_PRINTABLE_MESSAGE "Expected printable ASCII"

/* Routes (routes.c); their bodies are at most this large. */
#define RL_SESSION_STATE_MAX (32 * 1024)
int rl_bridge_session_state(rl_call_t *call); /* POST /v1/bridge/sessions/:id/state */
extern const rl_schema_t rl_session_state_schema;
int rl_session_config(rl_call_t *call); /* POST /v1/me/sessions/:id/config */
extern const rl_schema_t rl_session_config_schema;
/* GET /v1/me/installations/:id/projects and /agent-sessions: asked of the bridge (rpc.h), answered as it answers. */
int rl_installation_projects(rl_call_t *call);
int rl_installation_agent_sessions(rl_call_t *call);
int rl_installation_models(rl_call_t *call); /* GET /v1/me/installations/:id/models, the same way */

#endif
