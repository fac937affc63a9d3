/*
 * Sessions (spec "Session"): creation, the state machine (rename, archive,
 * unarchive, soft delete, restore) and cancelling a turn.
 */
#ifndef RL_RELAY_SESSIONS_H
#define RL_RELAY_SESSIONS_H

#include "http/call.h"
#include "http/validate.h"

typedef enum rl_session_op {
    RL_SESSION_RENAME,
    RL_SESSION_ARCHIVE,
    RL_SESSION_UNARCHIVE,
    RL_SESSION_DELETE,
    RL_SESSION_RESTORE,
} rl_session_op_t;

#include "store/store.h"

/* In a transaction: the user's session, deleted or not; anyone else's is RL_E_SESSION_NOT_FOUND. */
int rl_session_of_user(rl_txn_t *txn, const char *user_id, const char *session_id, rl_session_row_t *session);
/*
 * In a transaction: the user's session that is not deleted, on a live
 * installation. RL_E_SESSION_NOT_FOUND, RL_E_INSTALLATION_REVOKED.
 */
int rl_session_live(rl_txn_t *txn, const char *user_id, const char *session_id, rl_session_row_t *session);

int rl_session_create(rl_call_t *call);
int rl_session_change(rl_call_t *call); /* route tag: rl_session_op_t */
int rl_session_cancel(rl_call_t *call);
/* GET /v1/me/sessions?state=deleted: the user's sessions (or those deleted and still restorable). */
int rl_sessions_list(rl_call_t *call);
extern const rl_schema_t rl_session_create_schema, rl_session_rename_schema, rl_session_cancel_schema;

#endif
