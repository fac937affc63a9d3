/* A session's agent state, merged and posted (agent_state.h). */
#include "bridge/agent_state.h"
#include "common/log.h"
#include "common/strmap.h"

json_t *rl_bridge_state_get(rl_bridge_t *bridge, const char *session_id)
{
    rl_strmap_t *states = rl_bridge__states(bridge);

    return states != NULL && session_id != NULL ? rl_strmap_get(states, session_id) : NULL;
}

void rl_bridge_state(rl_bridge_t *bridge, const char *session_id, json_t *fields)
{
    rl_strmap_t *states = rl_bridge__states(bridge);
    json_t *old = rl_bridge_state_get(bridge, session_id), *next, *value, *body;
    const char *key;

    if (states == NULL || session_id == NULL || !json_is_object(fields))
        return;
    next = old != NULL ? json_deep_copy(old) : json_pack("{s:s}", "state", "ready");
    if (next == NULL)
        return;
    json_object_foreach(fields, key, value)
    {
        if (json_is_null(value))
            json_object_del(next, key);
        else
            json_object_set(next, key, value);
    }
    if (old != NULL && json_equal(old, next)) {
        json_decref(next);
        return;
    }
    json_decref(rl_strmap_remove(states, session_id));
    /* The map is capped (a bridge serves far fewer sessions): one not kept is still posted whole. */
    if (rl_strmap_put(states, session_id, json_incref(next)) != 0) {
        json_decref(next);
        rl_log(RL_LOG_WARN, "session %s: its agent state could not be remembered", session_id);
    }
    body = json_deep_copy(next);
    json_decref(next);
    if (body == NULL)
        return;
    json_object_set_new(body, "session_id", json_string(session_id));
    rl_bridge__submit_call(bridge, RL_CALL_SESSION_STATE, body);
}
