/* Where a bridge write lands (spec "Errors": 404/410 for the session and the interaction). */
#ifndef RL_RELAY_TARGET_H
#define RL_RELAY_TARGET_H

#include "store/store.h"

typedef struct rl_bridge_target {
    const char *installation_id;
    const char *session_id;
    const char *interaction_id; /* NULL when the route allows none */
    int64_t now;
    int64_t followup_ms;
    int shared; /* other nodes write too: check the installation in the transaction (below) */
} rl_bridge_target_t;

/* Copies src into dst with its strings in arena. */
void rl_target_copy(rl_arena_t *arena, rl_bridge_target_t *dst, const rl_bridge_target_t *src);
/*
 * In a transaction: the session must be the installation's and not deleted,
 * the interaction (when given) of that session and inside the follow-up
 * window. Fills *session. RL_E_SESSION_NOT_FOUND, RL_E_SESSION_DELETED,
 * RL_E_INTERACTION_NOT_FOUND, RL_E_INTERACTION_EXPIRED.
 */
int rl_target_check(rl_txn_t *txn, const rl_bridge_target_t *target, rl_session_row_t *session);
/*
 * In a transaction: the installation a bridge writes as still stands.
 * RL_E_INSTALLATION_GONE once revoked, RL_E_INVALID_TOKEN when it is not
 * there. Bridge writes ask when other nodes share the store (`shared`),
 * because a node's cache of bridge tokens learns of a revocation made on
 * another node only when the bus tells it, and the store knows as soon as
 * the revocation is answered. One node alone drops the cache entry as it
 * revokes, and skips the lookup.
 */
int rl_target_installation_check(rl_txn_t *txn, const char *installation_id);

#endif
