/*
 * A session's agent state as the relay shows it (docs/api.md, "Session
 * state"): mode, model, effort, the agent's options, an error; kept per
 * session by the loop and posted whole (POST /v1/bridge/sessions/:id/state)
 * each time a field changes. Loop thread only.
 */
#ifndef RL_BRIDGE_AGENT_STATE_H
#define RL_BRIDGE_AGENT_STATE_H

#include <jansson.h>

#include "bridge/agent.h"
#include "common/strmap.h"

/*
 * Merges fields (borrowed) into session_id's state and posts the result: a
 * key set to null is removed; "state" is "ready" until a post says otherwise.
 * Nothing is posted when the merge changed nothing.
 */
void rl_bridge_state(rl_bridge_t *bridge, const char *session_id, json_t *fields);
/* The session's state as last posted (borrowed), or NULL. */
json_t *rl_bridge_state_get(rl_bridge_t *bridge, const char *session_id);

/* bridge.c, for this file: the states by session id (json_t * values), and the writer. */
rl_strmap_t *rl_bridge__states(rl_bridge_t *bridge);
void rl_bridge__submit_call(rl_bridge_t *bridge, rl_call_t call, json_t *body);

#endif
