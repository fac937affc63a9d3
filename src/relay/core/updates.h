/*
 * The bridge update queue (spec "Bridge updates"): what each update carries,
 * its append inside the transaction of whatever caused it, and the signal
 * that tells the node holding the installation's socket to read the queue.
 */
#ifndef RL_RELAY_UPDATES_H
#define RL_RELAY_UPDATES_H

#include <jansson.h>

#include "bus/bus.h"
#include "common/event_names.h"
#include "store/store.h"

/* In a transaction: appends an update; payload is stolen; *update_id receives its id. */
int rl_update_append(rl_txn_t *txn, const char *installation_id, rl_update_t type, const char *session_id,
                     const char *interaction_id, json_t *payload, int64_t now, int64_t *update_id);

/* Payloads (new references). spec: session.message carries session (id, title) and message (text, attachments). */
json_t *rl_update_session_started(const rl_session_row_t *session);
json_t *rl_update_session_message(const rl_session_row_t *session, json_t *message, const char *thought_level);
json_t *rl_update_session_cancelled(const char *interaction_id);
json_t *rl_update_approval_resolved(const char *approval_id, const char *decision, const char *scope,
                                    const char *scope_value);
json_t *rl_update_approval_expired(const char *approval_id);

/* The bus topic of an installation's signals: "installation:" + its id. */
void rl_update_topic(const char *installation_id, char *out, size_t outsz);
/* On the loop, after the commit: tells whoever holds the installation's socket that update_id waits. */
void rl_updates_notify(rl_bus_t *bus, const char *installation_id, int64_t update_id);

#endif
