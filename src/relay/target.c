#include <string.h>

#include "common/error.h"
#include "relay/target.h"

void rl_target_copy(rl_arena_t *arena, rl_bridge_target_t *dst, const rl_bridge_target_t *src)
{
    dst->installation_id = rl_arena_strdup(arena, src->installation_id);
    dst->session_id = rl_arena_strdup(arena, src->session_id);
    dst->interaction_id = rl_arena_strdup(arena, src->interaction_id);
    dst->now = src->now;
    dst->followup_ms = src->followup_ms;
    dst->shared = src->shared;
}

int rl_target_installation_check(rl_txn_t *txn, const char *installation_id)
{
    rl_installation_row_t installation;
    int result = RL_TXN(txn, installation_get, installation_id, &installation);

    if (result != 0)
        return result == RL_E_NOT_FOUND ? RL_E_INVALID_TOKEN : result;
    return strcmp(installation.state, "revoked") == 0 ? RL_E_INSTALLATION_GONE : 0;
}

int rl_target_check(rl_txn_t *txn, const rl_bridge_target_t *target, rl_session_row_t *session)
{
    rl_interaction_row_t interaction;
    int result = RL_TXN(txn, session_get, target->session_id, session);

    if (result != 0)
        return result == RL_E_NOT_FOUND ? RL_E_SESSION_NOT_FOUND : result;
    /* Another installation's session looks like none at all. */
    if (strcmp(session->installation_id, target->installation_id) != 0)
        return RL_E_SESSION_NOT_FOUND;
    /* spec: writing to a session deleted mid-stream fails with 410 session_deleted. */
    if (session->deleted_at != RL_NO_TIME)
        return RL_E_SESSION_DELETED;
    if (target->interaction_id == NULL)
        return 0;
    result = RL_TXN(txn, interaction_get, target->interaction_id, &interaction);
    if (result != 0 || strcmp(interaction.session_id, target->session_id) != 0)
        return result == 0 || result == RL_E_NOT_FOUND ? RL_E_INTERACTION_NOT_FOUND : result;
    /* spec: the follow-up window closes 30 minutes after the update. */
    if (interaction.created_at + target->followup_ms < target->now)
        return RL_E_INTERACTION_EXPIRED;
    return 0;
}
