/*
 * Rows as clients see them: the JSON views of sessions, installations,
 * messages, approvals and tasks (docs/api.md). Pure functions of their
 * arguments, so that an operation may build them on the store's worker.
 * Each returns a new reference.
 */
#ifndef RL_RELAY_VIEWS_H
#define RL_RELAY_VIEWS_H

#include <jansson.h>

#include "store/store.h"

/* A nullable timestamp as JSON: null for RL_NO_TIME. */
json_t *rl_view_time(int64_t at);
/* Decodes a JSON column; fallback (stolen) when it is NULL or not JSON. */
json_t *rl_view_json(const char *text, json_t *fallback);

json_t *rl_view_user(const rl_user_row_t *row);
/*
 * health is the agent's: "healthy", "degraded" or "offline". The token hash
 * never leaves the store. agent and commands come from the manifest.
 */
json_t *rl_view_installation(const rl_installation_row_t *row, const char *health);
/* brief: a deleted session shows until when it can be restored (deleted_at + the grace). */
json_t *rl_view_session(const rl_session_row_t *row, int64_t delete_grace);
/* Sets a session's agent, project (or project_ct) and resume in view, as the Session view and updates show them. */
void rl_view_session_agent(json_t *view, const rl_session_row_t *row);
/* text is the message's text as clients see it (the streamed text of an open message). */
json_t *rl_view_message(const rl_message_row_t *row, const char *text, size_t text_len);
/* The approval with its request's fields, state and decision. */
json_t *rl_view_approval(const rl_approval_row_t *row);
/* The spec's pending-approval entry (snapshot, approval_requested) of an approval view. */
json_t *rl_view_pending_approval(json_t *approval);
/*
 * In place, for a session that is end-to-end encrypted (issue 26): the
 * message's text becomes text_ct (and deltas_ct while its deltas are kept
 * apart), the task's content fields become their *_ct twins; the plain
 * keys stay, null, so that a client reading them finds no text.
 */
void rl_view_seal_message(json_t *view);
void rl_view_seal_task(json_t *view);
/* The task with its args, last partial_result, result and error (null when none). */
json_t *rl_view_task(const rl_task_row_t *row);

#endif
