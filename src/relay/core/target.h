/* Where a bridge write lands (spec "Errors": 404/410 for the session and the interaction). */
#ifndef RL_RELAY_TARGET_H
#define RL_RELAY_TARGET_H

#include "store/store.h"

typedef struct rl_bridge_target {
    const char *installation_id;
    const char *session_id;
    const char *interaction_id; /* NULL when the body gives none */
    int64_t now;
    int64_t followup_ms;
    int shared;      /* other nodes write too: check the installation in the transaction (below) */
    int turn_bound;  /* the write belongs to a turn (tasks, approvals, capability requests): no interaction is 400 */
    int own_session; /* result: the write is in the bridge's turn of a session it created (below) */
} rl_bridge_target_t;

/*
 * The bridge's turn: a session the bridge created (POST
 * /v1/bridge/createSession) has no user message to answer, so it starts
 * with an interaction of its own, whose id is the session's behind
 * RL_TARGET_TURN_PREFIX ("int_ses_..."), an id relayd never mints for a
 * user's turn. Written into out (n bytes); -1 when it does not fit.
 */
#define RL_TARGET_TURN_PREFIX "int_"
int rl_target_turn_id(const char *session_id, char *out, size_t n);

/* Copies src into dst with its strings in arena. */
void rl_target_copy(rl_arena_t *arena, rl_bridge_target_t *dst, const rl_bridge_target_t *src);
/*
 * In a transaction: the session must be the installation's and not deleted,
 * the interaction (when given) of that session and inside the follow-up
 * window. Fills *session. RL_E_SESSION_NOT_FOUND, RL_E_SESSION_DELETED,
 * RL_E_INTERACTION_NOT_FOUND, RL_E_INTERACTION_EXPIRED.
 *
 * Without an interaction, in a session the bridge created, the write is the
 * bridge's turn's (target->interaction_id becomes its id, in txn's arena;
 * own_session is set): a turn-bound write meets its follow-up window, any
 * other write made after that window stands outside any turn, as it would
 * in any session. In a session the user started, a turn-bound write without
 * an interaction is RL_E_INVALID_REQUEST (interaction_id required).
 */
int rl_target_check(rl_txn_t *txn, rl_bridge_target_t *target, rl_session_row_t *session);
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
