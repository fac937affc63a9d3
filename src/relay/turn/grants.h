/*
 * Permanent grants (spec "Approval"): an approve_always decision stores a
 * grant for (action, scope, scope_value); a later request for the same
 * action that the grant covers is resolved without asking the user.
 */
#ifndef RL_RELAY_GRANTS_H
#define RL_RELAY_GRANTS_H

#include <jansson.h>

#include "http/call.h"
#include "store/store.h"

/*
 * Whether a grant covers a request (its JSON fields session_id, command,
 * host): scope all covers every request of the action, session the session
 * it names, tool the command, domain the host.
 */
int rl_grant_covers(const rl_grant_row_t *grant, json_t *request);
/* In a transaction: the installation's first grant for the action that covers request. 0 or RL_E_NOT_FOUND. */
int rl_grant_find(rl_txn_t *txn, const char *installation_id, const char *action, json_t *request, rl_grant_row_t *out);
/*
 * The grant an approve_always decision makes: without a scope it covers all;
 * without a value it takes the request's (tool: its command, domain: its
 * host, session: its session; the spec's approveCommandAlways). *scope and
 * *value point into approval (a view) or are literals.
 */
void rl_grant_of_decision(json_t *approval, const char **scope, const char **value);

/*
 * The user's grants, to see and revoke (docs/api.md): GET /v1/me/grants and
 * DELETE /v1/me/grants/:id. A grant's id is "grt_" and 16 hex digits of a
 * SHA-256 of its (installation, action, scope, scope_value), so ids need no
 * storage and a grant made again after a revoke gets the same id.
 */
#define RL_GRANT_ID_LEN 20
/* The grant's id into out (RL_GRANT_ID_LEN + 1 bytes). */
void rl_grant_id(const rl_grant_row_t *grant, char *out);
int rl_grants_list(rl_call_t *call);
int rl_grant_revoke(rl_call_t *call);

#endif
