/*
 * The store: every durable fact of the relay, behind an asynchronous
 * interface so that a networked backend (PostgreSQL) can plug in without
 * blocking the event loop.
 *
 * Contract for every operation:
 * - it is called on the loop thread and never blocks on the network;
 * - its callback runs later, never inside the call itself, on the loop thread,
 *   with result 0 or a negative RL_E_* error and, on success, a JSON value
 *   (a new reference the callback owns; may be NULL for "nothing to return");
 * - a write's callback runs only after the write is durable against a crash
 *   of the process (kill -9);
 * - an operation that fails leaves the store as it was.
 *
 * rl_store_open gives the relay its backend wrapped in a worker thread
 * (store_worker.c): operations are copied and queued, the worker runs them in
 * order and commits them in batches, and rl_store_wake_fd() becomes readable
 * when callbacks wait; the loop then calls rl_store_flush(), which runs them.
 * A backend without a wake fd (SQLite used directly, as the unit tests do)
 * completes during the call and its rl_store_flush() commits what was queued
 * and then runs the callbacks.
 */
#ifndef RL_STORE_STORE_H
#define RL_STORE_STORE_H

#include <jansson.h>
#include <stdint.h>

typedef struct rl_store rl_store_t;
typedef void (*rl_store_cb)(int result, json_t *value, void *arg);

typedef struct rl_pairing_new {
    const char *poll_hash;       /* hex SHA-256 of the poll token */
    const char *code_hash;       /* hex SHA-256 of the 7-letter code */
    const char *installation_id; /* minted now, becomes the installation on claim */
    const char *connector_type;
    const char *host_label;
    int64_t created_at, expires_at; /* ms */
} rl_pairing_new_t;

typedef enum rl_session_op {
    RL_SESSION_RENAME,
    RL_SESSION_ARCHIVE,
    RL_SESSION_UNARCHIVE,
    RL_SESSION_DELETE,
    RL_SESSION_RESTORE,
} rl_session_op_t;

typedef struct rl_session_new {
    const char *user_id;
    const char *installation_id;
    const char *session_id;
    const char *title; /* NULL for none */
    int64_t now;
} rl_session_new_t;

typedef struct rl_message_send {
    const char *user_id;
    const char *session_id;
    const char *interaction_id; /* minted by the caller */
    const char *message_id;     /* minted by the caller */
    const char *text;
    const char *attachments; /* JSON array text, "[]" when none */
    const char *reply_to;    /* NULL for none */
    const char *thought_level;
    int64_t now;
} rl_message_send_t;

typedef struct rl_installation_patch {
    int set_name, set_emoji;
    const char *name, *emoji; /* NULL clears */
} rl_installation_patch_t;

typedef struct rl_attachment_new {
    const char *key;
    const char *user_id;
    const char *mime;
    const char *name; /* NULL for none */
    int64_t size;
    int64_t now;
} rl_attachment_new_t;

/*
 * Idempotency of one bridge write (spec "Limits"): a key is unique per
 * (owner, scope) for the idempotency TTL. The same key with the same body
 * gives back the stored response with "idempotent": true; with another body
 * the write fails with RL_E_IDEMPOTENCY_CONFLICT. key NULL: no idempotency.
 */
typedef struct rl_idempotency {
    const char *owner; /* the installation */
    const char *scope; /* e.g. "sendMessage:ses_..." */
    const char *key;
    const char *body_hash; /* hex SHA-256 of the canonical body */
} rl_idempotency_t;

/* Where a bridge write lands, checked against the installation and the follow-up window. */
typedef struct rl_bridge_target {
    const char *installation_id;
    const char *session_id;
    const char *interaction_id; /* NULL when the route allows none */
    int64_t now;
    int64_t followup_ms;
} rl_bridge_target_t;

typedef enum rl_task_step { RL_TASK_CREATE, RL_TASK_UPDATE, RL_TASK_FINISH } rl_task_step_t;

/*
 * Streamed deltas applied and acknowledged, waiting to be persisted: one
 * allocation per delta, strings inside it, so that building a batch on the
 * loop costs a memcpy and handing it to the store costs nothing.
 */
typedef struct rl_delta_row {
    struct rl_delta_row *next;
    int64_t seq;
    const char *message_id, *owner, *scope, *key, *body_hash, *delta; /* all into text[] */
    size_t delta_len;
    char text[];
} rl_delta_row_t;

typedef struct rl_delta_batch {
    rl_delta_row_t *head, **tail;
    size_t count;
} rl_delta_batch_t;

rl_delta_batch_t *rl_delta_batch_new(void);
/* Copies one delta in; 0, or -1 when out of memory. */
int rl_delta_batch_add(rl_delta_batch_t *batch, const char *message_id, int64_t seq, const char *delta,
                       size_t delta_len, const char *owner, const char *scope, const char *key, const char *body_hash);
void rl_delta_batch_free(rl_delta_batch_t *batch);

struct rl_store_ops {
    const char *name;
    void (*close)(rl_store_t *store);
    int (*pending)(rl_store_t *store);
    void (*flush)(rl_store_t *store);
    int (*wake_fd)(rl_store_t *store); /* NULL when operations complete during the call */
    void (*user_ensure)(rl_store_t *store, const char *user_id, int64_t now, rl_store_cb cb, void *arg);
    void (*pairing_insert)(rl_store_t *store, const rl_pairing_new_t *pairing, rl_store_cb cb, void *arg);
    void (*pairing_claim)(rl_store_t *store, const char *code_hash, const char *user_id, int64_t now, rl_store_cb cb,
                          void *arg);
    void (*pairing_poll)(rl_store_t *store, const char *poll_hash, const char *token_hash, const char *token_env,
                         int64_t now, rl_store_cb cb, void *arg);
    void (*installation_get)(rl_store_t *store, const char *installation_id, rl_store_cb cb, void *arg);
    void (*installation_set_manifest)(rl_store_t *store, const char *installation_id, const char *manifest,
                                      rl_store_cb cb, void *arg);
    void (*purge)(rl_store_t *store, int64_t now, int64_t delete_grace, rl_store_cb cb, void *arg);
    void (*me_get)(rl_store_t *store, const char *user_id, rl_store_cb cb, void *arg);
    void (*installation_patch)(rl_store_t *store, const char *user_id, const char *installation_id,
                               const rl_installation_patch_t *patch, rl_store_cb cb, void *arg);
    void (*installation_revoke)(rl_store_t *store, const char *user_id, const char *installation_id, int64_t now,
                                rl_store_cb cb, void *arg);
    void (*session_create)(rl_store_t *store, const rl_session_new_t *session, rl_store_cb cb, void *arg);
    void (*session_change)(rl_store_t *store, const char *user_id, const char *session_id, rl_session_op_t op,
                           const char *title, int64_t now, int64_t delete_grace, rl_store_cb cb, void *arg);
    void (*session_cancel)(rl_store_t *store, const char *user_id, const char *session_id, const char *interaction_id,
                           int64_t now, rl_store_cb cb, void *arg);
    void (*messages_list)(rl_store_t *store, const char *user_id, const char *session_id, int limit, const char *before,
                          rl_store_cb cb, void *arg);
    void (*message_send)(rl_store_t *store, const rl_message_send_t *send, rl_store_cb cb, void *arg);
    void (*attachment_insert)(rl_store_t *store, const rl_attachment_new_t *attachment, rl_store_cb cb, void *arg);
    void (*attachment_get)(rl_store_t *store, const char *key, rl_store_cb cb, void *arg);
    void (*session_get)(rl_store_t *store, const char *user_id, const char *session_id, rl_store_cb cb, void *arg);
    void (*message_open)(rl_store_t *store, const rl_idempotency_t *idem, const rl_bridge_target_t *target,
                         const char *message_id, const char *user_id, json_t *body, rl_store_cb cb, void *arg);
    void (*message_stream_state)(rl_store_t *store, const char *installation_id, const char *message_id,
                                 const char *scope, rl_store_cb cb, void *arg);
    void (*deltas_append)(rl_store_t *store, rl_delta_batch_t *batch, int64_t now, rl_store_cb cb, void *arg);
    void (*message_end)(rl_store_t *store, const rl_idempotency_t *idem, const char *installation_id,
                        const char *message_id, json_t *body, int64_t now, rl_store_cb cb, void *arg);
    void (*task_step)(rl_store_t *store, const rl_idempotency_t *idem, const rl_bridge_target_t *target,
                      rl_task_step_t step, json_t *body, rl_store_cb cb, void *arg);
    void (*approval_request)(rl_store_t *store, const rl_idempotency_t *idem, const rl_bridge_target_t *target,
                             json_t *body, int64_t expires_at, rl_store_cb cb, void *arg);
    void (*approval_decide)(rl_store_t *store, const char *user_id, const char *approval_id, const char *decision,
                            const char *scope, const char *scope_value, int64_t now, rl_store_cb cb, void *arg);
    void (*approval_expire)(rl_store_t *store, const char *approval_id, int64_t now, rl_store_cb cb, void *arg);
    void (*approvals_pending)(rl_store_t *store, const char *user_id, int64_t due_before, rl_store_cb cb, void *arg);
    void (*updates_list)(rl_store_t *store, const char *installation_id, int64_t after_id, int64_t since_ms, int limit,
                         rl_store_cb cb, void *arg);
    void (*updates_ack)(rl_store_t *store, const char *installation_id, int64_t up_to, rl_store_cb cb, void *arg);
    void (*purge_bridge)(rl_store_t *store, int64_t now, int64_t idempotency_ttl, int64_t replay_window, rl_store_cb cb,
                         void *arg);
};

struct rl_store {
    const struct rl_store_ops *ops;
};

/*
 * Opens the store named by location: a folder (the embedded SQLite default,
 * file relay.db inside it) or "sqlite:PATH". Applies pending schema
 * migrations. Blocking; call before the loop runs. 0 or -1 with a log line.
 */
int rl_store_open(const char *location, rl_store_t **out);
int rl_store__sqlite_open(const char *path, rl_store_t **out);
/* Runs `inner` on a thread of its own; takes ownership of it, even on failure. */
int rl_store__worker_open(rl_store_t *inner, rl_store_t **out);
/* Blocks until every operation submitted so far has run its callback (tests, shutdown). */
void rl_store_drain(rl_store_t *store);

static inline void rl_store_close(rl_store_t *store)
{
    store->ops->close(store);
}
/* Non-zero while an operation's callback has not run yet. */
static inline int rl_store_pending(rl_store_t *store)
{
    return store->ops->pending(store);
}
/* Runs the callbacks that are ready; never waits for the worker. */
static inline void rl_store_flush(rl_store_t *store)
{
    store->ops->flush(store);
}
/* A descriptor that is readable when rl_store_flush has callbacks to run, or -1. */
static inline int rl_store_wake_fd(rl_store_t *store)
{
    return store->ops->wake_fd != NULL ? store->ops->wake_fd(store) : -1;
}

/* Creates the user on first sight; value NULL. */
static inline void rl_store_user_ensure(rl_store_t *store, const char *user_id, int64_t now, rl_store_cb cb, void *arg)
{
    store->ops->user_ensure(store, user_id, now, cb, arg);
}
/* Records a new pairing; RL_E_IDEMPOTENCY_CONFLICT when the code is already live (mint another). */
static inline void rl_store_pairing_insert(rl_store_t *store, const rl_pairing_new_t *pairing, rl_store_cb cb,
                                           void *arg)
{
    store->ops->pairing_insert(store, pairing, cb, arg);
}
/*
 * Consumes a pending, unexpired code for user_id and creates its
 * installation; value is the installation object. RL_E_PAIRING_NOT_FOUND for
 * an unknown, expired or consumed code.
 */
static inline void rl_store_pairing_claim(rl_store_t *store, const char *code_hash, const char *user_id, int64_t now,
                                          rl_store_cb cb, void *arg)
{
    store->ops->pairing_claim(store, code_hash, user_id, now, cb, arg);
}
/*
 * Polls a pairing: value {"status":"pending"} while unclaimed, or, once
 * claimed, stores token_hash on the installation and answers
 * {"status":"paired","installation_id":...}; after that the pairing is spent.
 * RL_E_PAIRING_EXPIRED past expiry, RL_E_PAIRING_NOT_FOUND for unknown or spent.
 */
static inline void rl_store_pairing_poll(rl_store_t *store, const char *poll_hash, const char *token_hash,
                                         const char *token_env, int64_t now, rl_store_cb cb, void *arg)
{
    store->ops->pairing_poll(store, poll_hash, token_hash, token_env, now, cb, arg);
}
/* value: the installation object, including "token_hash"; RL_E_INSTALLATION_NOT_FOUND. */
static inline void rl_store_installation_get(rl_store_t *store, const char *installation_id, rl_store_cb cb, void *arg)
{
    store->ops->installation_get(store, installation_id, cb, arg);
}
/* Replaces the installation's agent manifest (JSON text); value NULL. RL_E_INSTALLATION_NOT_FOUND. */
static inline void rl_store_installation_set_manifest(rl_store_t *store, const char *installation_id,
                                                      const char *manifest, rl_store_cb cb, void *arg)
{
    store->ops->installation_set_manifest(store, installation_id, manifest, cb, arg);
}
/*
 * Removes expired, spent state: old pairings, and sessions (with their
 * messages) deleted more than delete_grace ago; value {"sessions": n}.
 */
static inline void rl_store_purge(rl_store_t *store, int64_t now, int64_t delete_grace, rl_store_cb cb, void *arg)
{
    store->ops->purge(store, now, delete_grace, cb, arg);
}
/*
 * value {"user": {id, created_at}, "installations": [installation...],
 * "sessions": [session...]} with deleted sessions left out.
 */
static inline void rl_store_me_get(rl_store_t *store, const char *user_id, rl_store_cb cb, void *arg)
{
    store->ops->me_get(store, user_id, cb, arg);
}
/* Sets the name and/or emoji of the user's installation; value the installation. RL_E_INSTALLATION_NOT_FOUND. */
static inline void rl_store_installation_patch(rl_store_t *store, const char *user_id, const char *installation_id,
                                               const rl_installation_patch_t *patch, rl_store_cb cb, void *arg)
{
    store->ops->installation_patch(store, user_id, installation_id, patch, cb, arg);
}
/*
 * Revokes the user's installation; value {"installation": ..., "changed":
 * bool} (false when it was already revoked). RL_E_INSTALLATION_NOT_FOUND.
 */
static inline void rl_store_installation_revoke(rl_store_t *store, const char *user_id, const char *installation_id,
                                                int64_t now, rl_store_cb cb, void *arg)
{
    store->ops->installation_revoke(store, user_id, installation_id, now, cb, arg);
}
/*
 * Creates a session on a live installation of the user and queues the
 * bridge update session.started; value {"session": ..., "update_id": n}.
 * RL_E_INSTALLATION_NOT_FOUND, RL_E_INSTALLATION_REVOKED.
 */
static inline void rl_store_session_create(rl_store_t *store, const rl_session_new_t *session, rl_store_cb cb,
                                           void *arg)
{
    store->ops->session_create(store, session, cb, arg);
}
/*
 * Applies a state-machine transition to the user's session; value
 * {"session": ..., "changed": bool}. Deleted sessions are not found except
 * by RL_SESSION_RESTORE within delete_grace. RL_E_SESSION_NOT_FOUND.
 */
static inline void rl_store_session_change(rl_store_t *store, const char *user_id, const char *session_id,
                                           rl_session_op_t op, const char *title, int64_t now, int64_t delete_grace,
                                           rl_store_cb cb, void *arg)
{
    store->ops->session_change(store, user_id, session_id, op, title, now, delete_grace, cb, arg);
}
/*
 * Queues session.cancelled for the session's bridge; value {"session": ...,
 * "update_id": n}. RL_E_SESSION_NOT_FOUND, RL_E_INSTALLATION_REVOKED,
 * RL_E_INTERACTION_NOT_FOUND (an interaction_id not of this session).
 */
static inline void rl_store_session_cancel(rl_store_t *store, const char *user_id, const char *session_id,
                                           const char *interaction_id, int64_t now, rl_store_cb cb, void *arg)
{
    store->ops->session_cancel(store, user_id, session_id, interaction_id, now, cb, arg);
}
/*
 * A page of the session's messages, newest first, older than `before` (a
 * message id, or NULL); value {"messages": [...], "has_more": bool,
 * "next_cursor": id or null}. RL_E_SESSION_NOT_FOUND, RL_E_MESSAGE_NOT_FOUND
 * (an unknown cursor).
 */
static inline void rl_store_messages_list(rl_store_t *store, const char *user_id, const char *session_id, int limit,
                                          const char *before, rl_store_cb cb, void *arg)
{
    store->ops->messages_list(store, user_id, session_id, limit, before, cb, arg);
}
/*
 * Records the user's message and its interaction and queues session.message
 * for the bridge; value {"message": ..., "session": ..., "update_id": n}.
 * RL_E_SESSION_NOT_FOUND, RL_E_INSTALLATION_REVOKED, RL_E_MESSAGE_NOT_FOUND
 * (reply_to unknown in this session).
 */
static inline void rl_store_message_send(rl_store_t *store, const rl_message_send_t *send, rl_store_cb cb, void *arg)
{
    store->ops->message_send(store, send, cb, arg);
}
/* The user's session, deleted or not; RL_E_SESSION_NOT_FOUND. */
static inline void rl_store_session_get(rl_store_t *store, const char *user_id, const char *session_id, rl_store_cb cb,
                                        void *arg)
{
    store->ops->session_get(store, user_id, session_id, cb, arg);
}
/* Records an uploaded attachment; value NULL. */
static inline void rl_store_attachment_insert(rl_store_t *store, const rl_attachment_new_t *attachment, rl_store_cb cb,
                                              void *arg)
{
    store->ops->attachment_insert(store, attachment, cb, arg);
}
/* value the attachment {key, user_id, mime, size, name, created_at}; RL_E_NOT_FOUND. */
static inline void rl_store_attachment_get(rl_store_t *store, const char *key, rl_store_cb cb, void *arg)
{
    store->ops->attachment_get(store, key, cb, arg);
}

/*
 * The bridge's writes. Each one checks its target (session of this
 * installation, not deleted; interaction of that session, inside the
 * follow-up window), applies the idempotency rule, and on success answers
 * {"response": {...}, "idempotent": bool, "user_id": owner, ...} plus what
 * the caller needs to publish. A replay carries only response and
 * idempotent. Errors: RL_E_SESSION_NOT_FOUND, RL_E_SESSION_DELETED,
 * RL_E_INTERACTION_NOT_FOUND, RL_E_INTERACTION_EXPIRED,
 * RL_E_MESSAGE_NOT_FOUND, RL_E_IDEMPOTENCY_CONFLICT and those listed below.
 */
/* Opens an agent message (placeholder " " when text is empty); adds "message". */
static inline void rl_store_message_open(rl_store_t *store, const rl_idempotency_t *idem,
                                         const rl_bridge_target_t *target, const char *message_id, const char *user_id,
                                         json_t *body, rl_store_cb cb, void *arg)
{
    store->ops->message_open(store, idem, target, message_id, user_id, body, cb, arg);
}
/*
 * What a streamed message's deltas are checked against: value {message_id,
 * session_id, interaction_id, user_id, state, deleted (bool), next_seq,
 * keys: {idempotency key: body hash}} for the installation's agent message.
 * scope is the idempotency scope of its deltas. RL_E_MESSAGE_NOT_FOUND.
 */
static inline void rl_store_message_stream_state(rl_store_t *store, const char *installation_id, const char *message_id,
                                                 const char *scope, rl_store_cb cb, void *arg)
{
    store->ops->message_stream_state(store, installation_id, message_id, scope, cb, arg);
}
/*
 * Persists deltas already applied and acknowledged, each with the idempotency
 * record of its key (replayed as {message_id}). Takes the batch: the caller
 * must not touch it after the call. value NULL.
 */
static inline void rl_store_deltas_append(rl_store_t *store, rl_delta_batch_t *batch, int64_t now, rl_store_cb cb,
                                          void *arg)
{
    store->ops->deltas_append(store, batch, now, cb, arg);
}
/* Finalises a message with its canonical text and usage; adds "message". RL_E_MESSAGE_FINALIZED. */
static inline void rl_store_message_end(rl_store_t *store, const rl_idempotency_t *idem, const char *installation_id,
                                        const char *message_id, json_t *body, int64_t now, rl_store_cb cb, void *arg)
{
    store->ops->message_end(store, idem, installation_id, message_id, body, now, cb, arg);
}
/*
 * One step of a task's lifecycle; adds "task". RL_E_TASK_NOT_FOUND (update or
 * finish of an unknown task), RL_E_TASK_FINISHED (after its end),
 * RL_E_TOOL_NOT_DECLARED (a name missing from the manifest).
 */
static inline void rl_store_task_step(rl_store_t *store, const rl_idempotency_t *idem, const rl_bridge_target_t *target,
                                      rl_task_step_t step, json_t *body, rl_store_cb cb, void *arg)
{
    store->ops->task_step(store, idem, target, step, body, cb, arg);
}
/*
 * Records an approval request; adds "approval". When an approve_always grant
 * matches, the approval is resolved at once: adds "auto_resolved": true and
 * the queued "update_id" of approval.resolved.
 */
static inline void rl_store_approval_request(rl_store_t *store, const rl_idempotency_t *idem,
                                             const rl_bridge_target_t *target, json_t *body, int64_t expires_at,
                                             rl_store_cb cb, void *arg)
{
    store->ops->approval_request(store, idem, target, body, expires_at, cb, arg);
}
/*
 * The user's decision on a pending approval; value {"approval", "changed",
 * "update_id"?}. The first decision wins: a later one answers the stored
 * approval with changed false. RL_E_APPROVAL_NOT_FOUND, RL_E_APPROVAL_EXPIRED.
 */
static inline void rl_store_approval_decide(rl_store_t *store, const char *user_id, const char *approval_id,
                                            const char *decision, const char *scope, const char *scope_value,
                                            int64_t now, rl_store_cb cb, void *arg)
{
    store->ops->approval_decide(store, user_id, approval_id, decision, scope, scope_value, now, cb, arg);
}
/* Expires a pending approval that is due; value {"approval", "changed", "update_id"?, "user_id"}. */
static inline void rl_store_approval_expire(rl_store_t *store, const char *approval_id, int64_t now, rl_store_cb cb,
                                            void *arg)
{
    store->ops->approval_expire(store, approval_id, now, cb, arg);
}
/*
 * Pending approvals, oldest first: the user's (user_id set), or everyone's
 * that are due before due_before (user_id NULL). value {"approvals": [...]}.
 */
static inline void rl_store_approvals_pending(rl_store_t *store, const char *user_id, int64_t due_before,
                                              rl_store_cb cb, void *arg)
{
    store->ops->approvals_pending(store, user_id, due_before, cb, arg);
}
/* Unacknowledged updates after after_id created since since_ms, in order; value {"updates": [...]}. */
static inline void rl_store_updates_list(rl_store_t *store, const char *installation_id, int64_t after_id,
                                         int64_t since_ms, int limit, rl_store_cb cb, void *arg)
{
    store->ops->updates_list(store, installation_id, after_id, since_ms, limit, cb, arg);
}
/* Drops the installation's updates up to and including up_to; value NULL. */
static inline void rl_store_updates_ack(rl_store_t *store, const char *installation_id, int64_t up_to, rl_store_cb cb,
                                        void *arg)
{
    store->ops->updates_ack(store, installation_id, up_to, cb, arg);
}
/* Drops idempotency records past their TTL, updates past the replay window and old tasks; value NULL. */
static inline void rl_store_purge_bridge(rl_store_t *store, int64_t now, int64_t idempotency_ttl, int64_t replay_window,
                                         rl_store_cb cb, void *arg)
{
    store->ops->purge_bridge(store, now, idempotency_ttl, replay_window, cb, arg);
}

#endif
