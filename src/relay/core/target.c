#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "relay/core/target.h"

void rl_target_copy(rl_arena_t *arena, rl_bridge_target_t *dst, const rl_bridge_target_t *src)
{
    dst->installation_id = rl_arena_strdup(arena, src->installation_id);
    dst->session_id = rl_arena_strdup(arena, src->session_id);
    dst->interaction_id = rl_arena_strdup(arena, src->interaction_id);
    dst->now = src->now;
    dst->followup_ms = src->followup_ms;
    dst->shared = src->shared;
    dst->turn_bound = src->turn_bound;
    dst->own_session = src->own_session;
}

int rl_target_installation_check(rl_txn_t *txn, const char *installation_id)
{
    rl_installation_row_t installation;
    int result = RL_TXN(txn, installation_get, installation_id, &installation);

    if (result != 0)
        return result == RL_E_NOT_FOUND ? RL_E_INVALID_TOKEN : result;
    return strcmp(installation.state, "revoked") == 0 ? RL_E_INSTALLATION_GONE : 0;
}

int rl_target_turn_id(const char *session_id, char *out, size_t n)
{
    int len = snprintf(out, n, RL_TARGET_TURN_PREFIX "%s", session_id);

    return len < 0 || (size_t)len >= n ? -1 : 0;
}

/* The interaction, of the session and inside its follow-up window. */
static int interaction_check(rl_txn_t *txn, const rl_bridge_target_t *target, const char *interaction_id)
{
    rl_interaction_row_t interaction;
    int result = RL_TXN(txn, interaction_get, interaction_id, &interaction);

    if (result != 0 || strcmp(interaction.session_id, target->session_id) != 0)
        return result == 0 || result == RL_E_NOT_FOUND ? RL_E_INTERACTION_NOT_FOUND : result;
    /* spec: the follow-up window closes 30 minutes after the update. */
    if (interaction.created_at + target->followup_ms < target->now)
        return RL_E_INTERACTION_EXPIRED;
    return 0;
}

int rl_target_check(rl_txn_t *txn, rl_bridge_target_t *target, rl_session_row_t *session)
{
    char turn[96];
    int result = RL_TXN(txn, session_get, target->session_id, session);

    if (result != 0)
        return result == RL_E_NOT_FOUND ? RL_E_SESSION_NOT_FOUND : result;
    /* Another installation's session looks like none at all. */
    if (strcmp(session->installation_id, target->installation_id) != 0)
        return RL_E_SESSION_NOT_FOUND;
    /* spec: writing to a session deleted mid-stream fails with 410 session_deleted. */
    if (session->deleted_at != RL_NO_TIME)
        return RL_E_SESSION_DELETED;
    if (rl_target_turn_id(session->id, turn, sizeof(turn)) != 0)
        return target->interaction_id != NULL ? interaction_check(txn, target, target->interaction_id)
               : target->turn_bound           ? RL_E_INVALID_REQUEST
                                              : 0;
    if (target->interaction_id != NULL) {
        /* Named: the bridge's turn only by its id (a user's turn in the bridge's session is the user's). */
        result = interaction_check(txn, target, target->interaction_id);
        target->own_session = result == 0 && strcmp(target->interaction_id, turn) == 0;
        return result;
    }
    /* No interaction: the bridge's turn, in a session it created (target.h). */
    result = interaction_check(txn, target, turn);
    if (result == RL_E_INTERACTION_NOT_FOUND)
        return target->turn_bound ? RL_E_INVALID_REQUEST : 0;
    if (result == RL_E_INTERACTION_EXPIRED || result == 0)
        target->own_session = 1;
    if (result == RL_E_INTERACTION_EXPIRED && !target->turn_bound)
        return 0;
    if (result == 0)
        target->interaction_id = rl_arena_strdup(txn->arena, turn);
    return result;
}
