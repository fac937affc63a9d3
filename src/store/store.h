/*
 * The store: every durable fact of the relay, behind an asynchronous seam
 * that any backend (SQLite embedded, PostgreSQL) can sit behind.
 *
 * Two halves:
 *
 * - Operations (the relay's side). An operation is one struct that starts
 *   with rl_store_op_t: its type (name, whether it writes, and the function
 *   that runs it), its arguments and its results. The relay builds it on the
 *   loop, rl_store_submit() queues it, a worker runs type->run inside a
 *   transaction, and op->done runs later on the loop with op->result and the
 *   filled results; the store frees the operation afterwards. The rules of
 *   the relay live in those run functions (src/relay); the store knows none
 *   of them.
 *
 * - Transactions (the backend's side): the rl_txn_* functions below,
 *   begin, savepoints, commit, and typed reads and writes of rows, called
 *   directly. Nothing else: no rule, no JSON. See docs/internals/store.md.
 *
 * Contract for every operation:
 * - rl_store_submit is called on the loop thread and never blocks;
 * - done never runs inside the call: it runs from rl_store_flush on the loop
 *   thread, in submission order;
 * - an operation sees every operation submitted before it;
 * - a write's done runs only after the write is durable against a crash of
 *   the process (kill -9);
 * - an operation whose run returns an error leaves the store as it was
 *   (its savepoint is rolled back), and the others of its batch are kept.
 */
#ifndef RL_STORE_STORE_H
#define RL_STORE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "common/histogram.h"

/* A nullable timestamp or count column that is NULL. */
#define RL_NO_TIME INT64_MIN

/* ---- memory of one operation ------------------------------------------------------------------ */

/*
 * A bump allocator owned by an operation: its arguments, and every row a
 * backend reads for it, live here until the operation is freed. Not
 * thread-safe; the loop fills it before submit and the worker after, which
 * the queue's lock orders.
 */
typedef struct rl_arena_chunk rl_arena_chunk_t;
typedef struct rl_arena {
    rl_arena_chunk_t *head;
} rl_arena_t;

/* n bytes aligned for any type; aborts when memory is exhausted (as every queueing path does). */
void *rl_arena_alloc(rl_arena_t *arena, size_t n);
/* Copies of text (NULL stays NULL); the n variant copies len bytes and adds a NUL. */
char *rl_arena_strdup(rl_arena_t *arena, const char *text);
char *rl_arena_strndup(rl_arena_t *arena, const char *text, size_t len);
/* Grows an array of elem-sized items held in the arena to at least n items (the old copy is left behind). */
void *rl_arena_grow(rl_arena_t *arena, void *items, size_t count, size_t *capacity, size_t elem);
void rl_arena_free(rl_arena_t *arena);

/* ---- operations ------------------------------------------------------------------------------- */

typedef struct rl_store rl_store_t;
typedef struct rl_txn rl_txn_t;
typedef struct rl_store_op rl_store_op_t;
/* Where an operation of streamed deltas hands them to a backend that stores them its own way (rl_store_deltas_put). */
typedef struct rl_store_deltas rl_store_deltas_t;

/* What an operation of streamed deltas is (rl_store_op_type_t.deltas). */
enum {
    /*
     * The relay checked them against records only this process writes
     * (rl_store_exclusive): they are stored as they are. Given a sink, the
     * op hands each delta to rl_store_deltas_put, in order, and the backend
     * may store them without calling run (the SQLite backend's delta log).
     */
    RL_STORE_DELTAS_TRUSTED = 1,
    /* run checks and writes them in one statement, atomic by itself: no transaction is needed around it. */
    RL_STORE_DELTAS_CHECKED = 2,
};

typedef struct rl_store_op_type {
    const char *name;
    /* Runs inside a savepoint of its batch's transaction, and its done waits for the commit. */
    int writes;
    /* On the store's worker thread: reads and writes through txn, fills the op's results. 0 or RL_E_*. */
    int (*run)(rl_txn_t *txn, rl_store_op_t *op);
    /* Optional, on the loop thread: frees what the op owns outside its arena. */
    void (*dispose)(rl_store_op_t *op);
    /*
     * Optional, on the worker: an operation that only appends streamed
     * deltas says what they are: RL_STORE_DELTAS_TRUSTED (handing each to
     * rl_store_deltas_put when sink is not NULL), RL_STORE_DELTAS_CHECKED,
     * or 0 when it must run in a transaction as any write (a put failed).
     * A backend may then run a batch of such operations its own way
     * (rl_txn_run_batch): the SQLite backend appends trusted deltas to its
     * delta log, PostgreSQL runs checked ones outside a transaction.
     */
    int (*deltas)(rl_store_op_t *op, rl_store_deltas_t *sink);
} rl_store_op_type_t;

/* Called on the loop thread once the operation has run; the store frees it when this returns. */
typedef void (*rl_store_done_cb)(rl_store_op_t *op);

struct rl_store_op {
    const rl_store_op_type_t *type;
    rl_store_done_cb done;
    void *arg;
    int result;
    rl_arena_t arena;
    rl_store_op_t *next; /* the store's queues */
    int ran;             /* set by the worker once its batch has committed (rl_store_op_ran) */
};

/* A zeroed operation of size bytes (the type's own struct) with its type set; aborts when out of memory. */
void *rl_store_op_new(const rl_store_op_type_t *type, size_t size);
/*
 * Hands one delta of a trusted operation to sink (rl_store_op_type_t.deltas).
 * 0, or -1 (out of memory, or a field too long): the op then runs in a
 * transaction after all.
 */
int rl_store_deltas_put(rl_store_deltas_t *sink, const char *message_id, int64_t seq, const char *key,
                        const char *body_hash, const char *delta, size_t delta_len);
/* Frees an operation that was never submitted. */
void rl_store_op_free(rl_store_op_t *op);
/*
 * Whether the worker has finished a submitted operation (its batch
 * committed or failed), although the loop may not have run its done
 * callback yet: how long a write waits for the store itself, apart from
 * the loop's own lag.
 */
int rl_store_op_ran(const rl_store_op_t *op);

/*
 * Opens the store at location: "sqlite:PATH", or a data folder (its
 * relay.db). The backend runs on a worker thread of its own. Blocking
 * (start-up). 0 or -1 with the cause logged.
 */
int rl_store_open(const char *location, rl_store_t **out);
/*
 * As rl_store_open without a thread: operations run when rl_store_flush is
 * called, on the calling thread. For tests and one-shot commands.
 */
int rl_store_open_inline(const char *location, rl_store_t **out);
/* Queues op; op->done(op) runs later (see the contract above). done may be NULL. */
void rl_store_submit(rl_store_t *store, rl_store_op_t *op, rl_store_done_cb done, void *arg);
/*
 * Stores op (a batch of one operation) at once, on the loop, when the
 * backend can without a transaction: the SQLite store's delta log takes a
 * batch of trusted deltas with one write(2) (docs/internals/store.md, "The
 * delta log"). 0 once it is as durable as a commit, with op->result set: the
 * caller answers now, keeps op and frees it (rl_op_free); or 1 when the
 * backend cannot, and op must be submitted. Only when nothing the op must
 * follow is still queued: the caller keeps its own order (deltas.c writes
 * now only while none of its batches is in the store).
 */
int rl_store_write_now(rl_store_t *store, rl_store_op_t *op);
/* Whether operations are queued or running, or done callbacks wait. */
int rl_store_pending(rl_store_t *store);
/* A descriptor that is readable when done callbacks wait, or -1 for an inline store. */
int rl_store_wake_fd(rl_store_t *store);
/* Runs the done callbacks that wait (inline: runs the queued operations first). */
void rl_store_flush(rl_store_t *store);
/* Blocks until nothing is pending, running callbacks as they come. */
void rl_store_drain(rl_store_t *store);
/* Drains, stops the worker and closes the backend. */
void rl_store_close(rl_store_t *store);
/*
 * Whether this process is the store's only writer: a SQLite store in relayd's
 * own data folder (whose lock relayd holds), with its delta log. Deltas
 * (deltas.c) then trust their open-message records. 0 for PostgreSQL, a
 * sqlite:PATH store (other relayds may share the file) and inline stores.
 */
int rl_store_exclusive(rl_store_t *store);
/* Operations queued and not yet taken by the worker (for shedding load and for metrics). */
size_t rl_store_queued(rl_store_t *store);

/* What the worker has done so far, for the metrics (docs/operations.md, "Monitoring"). */
typedef struct rl_store_figures {
    uint64_t batches;       /* transactions run (a fold of the delta log is one) */
    uint64_t log_appends;   /* batches written to the delta log instead (one write(2) each, no transaction) */
    uint64_t log_folds;     /* transactions that folded the delta log into the database */
    uint64_t round_trips;   /* network round trips to the database server (PostgreSQL; 0 on SQLite) */
    uint64_t operations;    /* operations run in them */
    rl_histogram_t commit;  /* time each commit took (the WAL write, or PostgreSQL's COMMIT) */
    size_t queued;          /* operations waiting for the worker now */
    uint64_t full_refusals; /* operations refused because the disk was full (RL_E_STORAGE_FULL) */
    int full;               /* 1 from a refusal for a full disk until a write succeeds again */
} rl_store_figures_t;
/* Copies the figures, under the lock the worker already takes once per batch. Loop thread. */
void rl_store_figures(rl_store_t *store, rl_store_figures_t *out);

/* ---- rows -------------------------------------------------------------------------------------- */

/*
 * Rows are plain values: strings point into the operation's arena (NULL for
 * a NULL column), timestamps are milliseconds (RL_NO_TIME for NULL). Columns
 * that hold JSON (attachments, usage, manifest, request, payload, keys,
 * response) are text the relay encodes and decodes.
 */
typedef struct rl_user_row {
    const char *id;
    int64_t created_at;
} rl_user_row_t;

typedef struct rl_pairing_row {
    const char *poll_hash, *code_hash, *installation_id, *connector_type, *host_label;
    const char *state; /* pending, claimed, delivered */
    const char *user_id;
    int64_t created_at, expires_at, claimed_at;
    /*
     * Who may redeem it: "poll_token" (only POST /v1/pairing/poll with the
     * start's poll token), "addr:<address>" (also the code's long poll from
     * that address), or NULL (an authors' start nobody polled yet: the first
     * poll binds it). docs/api.md, "Who redeems a pairing".
     */
    const char *redeem_by;
} rl_pairing_row_t;

typedef struct rl_installation_row {
    const char *id, *user_id, *token_hash, *token_env, *connector_type, *host_label;
    const char *custom_display_name, *custom_emoji;
    const char *state; /* live, revoked */
    const char *manifest;
    int64_t created_at, revoked_at;
    const char *bridge_version; /* the bridge's hello {version} (issue 26), or NULL */
} rl_installation_row_t;

/*
 * encrypted (issue 26) is fixed at creation: the session's content columns
 * (its title, its messages' text, its tasks' label, args and results) then
 * hold the clients' base64 envelopes instead of plaintext.
 */
typedef struct rl_session_row {
    const char *id, *user_id, *installation_id, *title;
    const char *state; /* active, archived */
    int64_t created_at, updated_at, deleted_at;
    int encrypted;
    const char *model; /* the model a client chose for the session, or NULL */
    /*
     * issue 36: the agent named at the start (NULL: the bridge's default),
     * the project (a plain session's {id, worktree_branch?} as JSON text, an
     * encrypted one's project_ct envelope), the agent session resumed (its
     * id), and the bridge's last agent_state (JSON text); each NULL when none.
     */
    const char *agent, *project, *resume, *agent_state;
} rl_session_row_t;

typedef struct rl_interaction_row {
    const char *id, *session_id;
    int64_t created_at;
} rl_interaction_row_t;

typedef struct rl_message_row {
    const char *id, *session_id, *interaction_id;
    const char *role; /* user, agent */
    const char *text, *attachments, *reply_to, *usage, *finish_reason;
    const char *state; /* streaming, final */
    int64_t created_at, finalized_at;
    int placeholder;
} rl_message_row_t;

/* Streamed deltas seq..seq_last of one message, joined, with keys: a JSON array of [key, body hash]. */
typedef struct rl_delta_run_row {
    const char *message_id;
    int64_t seq, seq_last;
    const char *text;
    size_t text_len;
    const char *keys;
} rl_delta_run_row_t;

/*
 * A tool call, kept as long as its session. args, partial_result (the last
 * one), result and error are the bridge's JSON values as text, NULL when it
 * sent none: each came in one request body, so the 1 MB body limit bounds it.
 */
typedef struct rl_task_row {
    const char *installation_id, *task_id, *session_id, *interaction_id, *kind, *name;
    const char *status; /* created, progressing, completed, failed, cancelled */
    const char *status_label;
    int64_t created_at, updated_at;
    const char *args, *partial_result, *result, *error;
} rl_task_row_t;

typedef struct rl_approval_row {
    const char *id, *installation_id, *user_id, *session_id, *interaction_id;
    const char *request; /* the bridge's fields, JSON */
    const char *state;   /* pending, resolved, expired */
    const char *decision, *scope, *scope_value;
    int64_t created_at, expires_at, resolved_at;
    /* issue 34: the first decision's signature and signing device, as given (encrypted sessions), or NULL */
    const char *decision_sig, *device_id;
} rl_approval_row_t;

/*
 * ours: a device capability request (docs/api.md "Device capabilities"): the
 * relay names it (id, unique across the relay). request and answer are JSON
 * text: the bridge's reason and the user's location or photo.
 */
typedef struct rl_capability_row {
    const char *id, *installation_id, *user_id, *session_id, *interaction_id;
    const char *capability; /* location, camera */
    const char *request;    /* JSON: reason */
    const char *state;      /* pending, answered, refused, expired */
    const char *answer;     /* JSON or NULL: {location} or {attachment} */
    int64_t created_at, expires_at, answered_at;
} rl_capability_row_t;

typedef struct rl_grant_row {
    const char *installation_id, *action, *scope, *scope_value;
    int64_t created_at;
} rl_grant_row_t;

typedef struct rl_idempotency_row {
    const char *owner, *scope, *key, *body_hash, *response;
    int64_t created_at;
} rl_idempotency_row_t;

typedef struct rl_update_row {
    const char *installation_id;
    int64_t update_id;
    const char *type, *session_id, *interaction_id, *payload;
    int64_t created_at;
} rl_update_row_t;

typedef struct rl_attachment_row {
    const char *key, *user_id, *mime, *name;
    int64_t size, created_at;
    int64_t used_at;   /* when a message first referenced it; RL_NO_TIME while never */
    int64_t doomed_at; /* when it was marked for removal (its file is going); RL_NO_TIME otherwise */
} rl_attachment_row_t;

/* A sign-in link's code (the web client), kept as its SHA-256 only. */
typedef struct rl_login_code_row {
    const char *code_hash, *user_id;
    int64_t created_at, expires_at;
} rl_login_code_row_t;

/* A browser's Web Push subscription: the push service's endpoint and the keys its messages are encrypted for. */
typedef struct rl_push_subscription_row {
    const char *endpoint, *user_id, *p256dh, *auth;
    int64_t created_at;
} rl_push_subscription_row_t;

/*
 * End-to-end encryption (issue 26). A device is a public key of the user's:
 * a bridge's (installation_id set, one live per installation) or a client's.
 * Keys are opaque to the store.
 */
typedef struct rl_device_row {
    const char *id, *user_id, *installation_id, *platform, *label, *pubkey;
    int64_t created_at, revoked_at;
} rl_device_row_t;

/* A session key wrapped for one device, keyed by (session_id, device_id). */
typedef struct rl_recipient_row {
    const char *session_id, *device_id, *wrapped_session_key, *wrapped_by_device_id;
    int64_t created_at;
    const char *grant_sig; /* the signer's grant_sig (docs/api.md, "Signed grants"), or NULL */
} rl_recipient_row_t;

/* A file an agent touched in a session, keyed by (session_id, path_blind_idx); size_bytes RL_NO_TIME when unknown. */
typedef struct rl_agent_file_row {
    const char *session_id, *path_blind_idx, *tool, *mime, *path_ct, *display_name_ct;
    int64_t size_bytes, updated_at;
} rl_agent_file_row_t;

/* ---- transactions: the operations the relay's run functions call -------------------------------- */

/*
 * Plain functions, one implementation (ops.c, for both SQL engines; the
 * engines differ only in the driver of sql.h). Called as
 * RL_TXN(txn, session_get, id, &row), which is rl_txn_session_get(txn, id, &row).
 *
 * Every function runs on the thread that owns the transaction and returns 0
 * or a negative RL_E_* error: RL_E_NOT_FOUND when a read by key finds no
 * row (or an update/delete by key changes none), RL_E_CONFLICT when an
 * insert meets a row with the same key, RL_E_UNAVAILABLE when the
 * backend's server cannot be reached or the transaction must be tried again
 * (a deadlock, a serialization failure), RL_E_INTERNAL for anything else
 * (logged by the backend). Lists are arrays in the arena, in the order the
 * function names. Reads inside a writing operation lock what they read
 * where the engine needs it (rl_txn_t.writing), so that a rule checked on a
 * row still holds when the operation writes.
 */
/* Transaction control, used by the store's worker only. */
int rl_txn_begin(rl_txn_t *txn);
int rl_txn_commit(rl_txn_t *txn);
void rl_txn_rollback(rl_txn_t *txn);
int rl_txn_savepoint(rl_txn_t *txn);
/* Ends the savepoint: keep 1 keeps its writes, 0 undoes them. */
void rl_txn_release(rl_txn_t *txn, int keep);
void rl_txn_close(rl_txn_t *txn);
/*
 * Runs a whole batch (ops linked by next) the backend's own way, without a
 * transaction of the worker's: 0 with every op's result set, or 1 when the
 * batch needs a transaction (begin, a savepoint per write, commit). The
 * SQLite backend appends a batch of trusted deltas to its delta log
 * (counting txn->appends); PostgreSQL runs a batch of checked deltas
 * outside a transaction, each op one statement (one round trip per op
 * instead of BEGIN, SAVEPOINT, RELEASE and COMMIT around them). See
 * rl_store_op_type_t.deltas.
 */
int rl_txn_run_batch(rl_txn_t *txn, rl_store_op_t *batch);
/*
 * As rl_txn_run_batch, on the calling thread while the worker may be
 * running a batch of its own (rl_store_write_now): only what the backend
 * can store without the connection (the SQLite backend's delta log takes a
 * batch of trusted deltas). 0 with every op's result set, or 1 when the
 * batch must go to the worker. *was_empty: the backend had no work of its
 * own due before (rl_txn_due_ms was -1), and now has.
 */
int rl_txn_write_now(rl_txn_t *txn, rl_store_op_t *batch, int *was_empty);
/*
 * Whether the backend has work of its own that a transaction does (the
 * SQLite backend's delta log, which its begin folds): -1 none, 0 due now,
 * else the milliseconds until it is. The worker then runs an empty batch
 * (begin, commit); at close, it runs one for any work held (>= 0).
 */
int64_t rl_txn_due_ms(rl_txn_t *txn);

/* users: insert_ignore keeps an existing row */
int rl_txn_user_insert_ignore(rl_txn_t *txn, const rl_user_row_t *row);
int rl_txn_user_get(rl_txn_t *txn, const char *id, rl_user_row_t *out);

/* pairings: at most one pending row per code_hash */
int rl_txn_pairing_insert(rl_txn_t *txn, const rl_pairing_row_t *row);
int rl_txn_pairing_by_code(rl_txn_t *txn, const char *code_hash, rl_pairing_row_t *out); /* the pending one */
int rl_txn_pairing_by_poll(rl_txn_t *txn, const char *poll_hash, rl_pairing_row_t *out);
int rl_txn_pairing_update(rl_txn_t *txn,
                          const rl_pairing_row_t *row); /* state, user_id, claimed_at, redeem_by by poll_hash */
/* Deletes the pending rows of code_hash that expired at or before `at`. */
int rl_txn_pairing_delete_lapsed(rl_txn_t *txn, const char *code_hash, int64_t at);
int rl_txn_pairings_purge(rl_txn_t *txn, int64_t expired_before);

/* installations */
int rl_txn_installation_insert(rl_txn_t *txn, const rl_installation_row_t *row);
int rl_txn_installation_get(rl_txn_t *txn, const char *id, rl_installation_row_t *out);
/* token_hash, token_env, custom_display_name, custom_emoji, state, manifest, revoked_at by id */
int rl_txn_installation_update(rl_txn_t *txn, const rl_installation_row_t *row);
/* The user's installations by created_at, id. */
int rl_txn_installations_of_user(rl_txn_t *txn, const char *user_id, rl_installation_row_t **rows, size_t *count);

/* sessions */
int rl_txn_session_insert(rl_txn_t *txn, const rl_session_row_t *row);
int rl_txn_session_get(rl_txn_t *txn, const char *id, rl_session_row_t *out);
int rl_txn_session_update(rl_txn_t *txn, const rl_session_row_t *row); /* title, state, updated_at, deleted_at */
/* The user's sessions that are not deleted, most recently updated first. */
int rl_txn_sessions_of_user(rl_txn_t *txn, const char *user_id, rl_session_row_t **rows, size_t *count);
/* The user's sessions deleted after deleted_after (still restorable), most recently deleted first. */
int rl_txn_sessions_deleted_of_user(rl_txn_t *txn, const char *user_id, int64_t deleted_after, rl_session_row_t **rows,
                                    size_t *count);
/*
 * Deletes sessions deleted at or before `before`, with their
 * interactions, messages, tasks, approvals, capability requests and
 * attachment uses.
 */
int rl_txn_sessions_purge(rl_txn_t *txn, int64_t deleted_before, int64_t *purged);

/* interactions */
int rl_txn_interaction_insert(rl_txn_t *txn, const rl_interaction_row_t *row);
int rl_txn_interaction_get(rl_txn_t *txn, const char *id, rl_interaction_row_t *out);

/* messages */
int rl_txn_message_insert(rl_txn_t *txn, const rl_message_row_t *row);
int rl_txn_message_get(rl_txn_t *txn, const char *id, rl_message_row_t *out);
/* text, usage, finish_reason, state, finalized_at, placeholder by id */
int rl_txn_message_update(rl_txn_t *txn, const rl_message_row_t *row);
/*
 * Up to limit messages of the session in the order they were inserted,
 * newest first, older than the message `before` (NULL: from the newest).
 * RL_E_NOT_FOUND when before is not a message of the session.
 */
int rl_txn_messages_page(rl_txn_t *txn, const char *session_id, const char *before, int limit, rl_message_row_t **rows,
                         size_t *count);
/*
 * The session's messages for its timeline, newest first: up to limit of
 * those created before before_at, and those created at before_at that
 * were inserted before the message before_id (NULL: none of them);
 * ordered by created_at, then insertion, descending.
 */
int rl_txn_messages_by_time(rl_txn_t *txn, const char *session_id, int64_t before_at, const char *before_id, int limit,
                            rl_message_row_t **rows, size_t *count);
/*
 * Messages still streaming whose interaction (or, for one without, the
 * message itself) was created at or before `at`, oldest first, at most limit.
 */
int rl_txn_messages_open_before(rl_txn_t *txn, int64_t at, int limit, rl_message_row_t **rows, size_t *count);

/* streamed deltas of open messages, as runs that do not overlap; a run whose (message_id, seq) exists is ignored */
int rl_txn_delta_run_insert(rl_txn_t *txn, const rl_delta_run_row_t *row);
int rl_txn_delta_runs_of(rl_txn_t *txn, const char *message_id, rl_delta_run_row_t **rows, size_t *count); /* by seq */
/* The seq after the message's last stored delta: its last run's seq_last + 1, or 1 when none. */
int rl_txn_delta_next_seq(rl_txn_t *txn, const char *message_id, int64_t *next);
int rl_txn_delta_runs_delete(rl_txn_t *txn, const char *message_id);
/* the idempotency keys of an ended message's deltas: a JSON object key -> body hash */
int rl_txn_delta_keys_put(rl_txn_t *txn, const char *message_id, const char *keys, int64_t created_at);
int rl_txn_delta_keys_get(rl_txn_t *txn, const char *message_id, const char **keys, int64_t *created_at);
int rl_txn_delta_keys_purge(rl_txn_t *txn, int64_t created_before);
/*
 * Several messages' runs checked and inserted by one statement (one
 * round trip): runs is a JSON array of objects {i, message_id, seq,
 * seq_last, delta, keys, installation_id, room}. A run is inserted only when
 * its installation exists and is not revoked, its message is an agent
 * message of a session of that installation that is not deleted, and the
 * message streams (its row is locked meanwhile). It goes where the message's
 * stored runs end: at seq when that is the one after them, or later when
 * other nodes stored runs from seq on (the gap), provided the gap holds at
 * most RL_DELTA_GAP_RUNS runs, none of the run's idempotency keys, and no
 * more than room bytes together with the run. A (message_id, seq) already
 * stored is not inserted either (two nodes that numbered a run alike).
 * *written (in the arena) receives one entry per run inserted: its i, the
 * seq it was stored at, and, when that is not the seq asked, the gap's keys
 * (a JSON array of the gap's runs' keys arrays) and its size in bytes; *count
 * how many. 1 when the backend has no such statement (SQLite: check and
 * insert run by run).
 */
#define RL_DELTA_GAP_RUNS 64
typedef struct rl_delta_written {
    int64_t i, seq;
    const char *gap_keys; /* NULL when stored where asked */
    int64_t gap_bytes;
} rl_delta_written_t;
int rl_txn_delta_runs_insert_checked(rl_txn_t *txn, const char *runs, rl_delta_written_t **written, size_t *count);

/* idempotency records */
int rl_txn_idempotency_get(rl_txn_t *txn, const char *owner, const char *scope, const char *key,
                           rl_idempotency_row_t *out);
int rl_txn_idempotency_insert(rl_txn_t *txn, const rl_idempotency_row_t *row);
int rl_txn_idempotency_delete(rl_txn_t *txn, const char *owner, const char *scope, const char *key);
int rl_txn_idempotency_of_scope(rl_txn_t *txn, const char *owner, const char *scope, rl_idempotency_row_t **rows,
                                size_t *count);
int rl_txn_idempotency_purge(rl_txn_t *txn, int64_t created_before);

/* tasks, keyed by (installation_id, task_id) */
int rl_txn_task_insert(rl_txn_t *txn, const rl_task_row_t *row);
int rl_txn_task_get(rl_txn_t *txn, const char *installation_id, const char *task_id, rl_task_row_t *out);
/* status, status_label, name, updated_at, partial_result, result, error by key */
int rl_txn_task_update(rl_txn_t *txn, const rl_task_row_t *row);
/*
 * The session's tasks for its timeline, newest first: up to limit of
 * those created before before_at, and those created at before_at whose
 * task_id sorts (bytewise) before before_id (NULL: none of them); ordered
 * by created_at, then task_id, descending. Tasks go with their session
 * (sessions_purge).
 */
int rl_txn_tasks_by_time(rl_txn_t *txn, const char *session_id, int64_t before_at, const char *before_id, int limit,
                         rl_task_row_t **rows, size_t *count);

/* approvals */
int rl_txn_approval_insert(rl_txn_t *txn, const rl_approval_row_t *row);
/* Approvals are keyed by (installation_id, id): two installations may use the same id. */
int rl_txn_approval_get(rl_txn_t *txn, const char *installation_id, const char *id, rl_approval_row_t *out);
/* state, decision, scope, scope_value, resolved_at by (installation_id, id) */
int rl_txn_approval_update(rl_txn_t *txn, const rl_approval_row_t *row);
/* The user's approvals called id (one per installation at most), oldest first. */
int rl_txn_approvals_of_user_by_id(rl_txn_t *txn, const char *user_id, const char *id, rl_approval_row_t **rows,
                                   size_t *count);
/* The user's pending approvals that expire after `after`, oldest first. */
int rl_txn_approvals_pending_of_user(rl_txn_t *txn, const char *user_id, int64_t after, rl_approval_row_t **rows,
                                     size_t *count);
/* As tasks_by_time, for the session's approvals, by created_at then id. */
int rl_txn_approvals_by_time(rl_txn_t *txn, const char *session_id, int64_t before_at, const char *before_id, int limit,
                             rl_approval_row_t **rows, size_t *count);
/* Anyone's pending approvals that expire at or before `at`, soonest first, at most limit. */
int rl_txn_approvals_due(rl_txn_t *txn, int64_t at, int limit, rl_approval_row_t **rows, size_t *count);

/* device capability requests, keyed by id; they go with their session (sessions_purge) */
int rl_txn_capability_insert(rl_txn_t *txn, const rl_capability_row_t *row);
int rl_txn_capability_get(rl_txn_t *txn, const char *id, rl_capability_row_t *out);
/* state, answer, answered_at by id */
int rl_txn_capability_update(rl_txn_t *txn, const rl_capability_row_t *row);
/* The user's pending requests that expire after `after`, oldest first. */
int rl_txn_capabilities_pending_of_user(rl_txn_t *txn, const char *user_id, int64_t after, rl_capability_row_t **rows,
                                        size_t *count);
/* Anyone's pending requests that expire at or before `at`, soonest first, at most limit. */
int rl_txn_capabilities_due(rl_txn_t *txn, int64_t at, int limit, rl_capability_row_t **rows, size_t *count);

/* grants; insert_ignore keeps an existing (installation_id, action, scope, scope_value) */
int rl_txn_grant_insert_ignore(rl_txn_t *txn, const rl_grant_row_t *row);
int rl_txn_grants_of(rl_txn_t *txn, const char *installation_id, const char *action, rl_grant_row_t **rows,
                     size_t *count);
/* Every grant of the installation, by created_at. */
int rl_txn_grants_of_installation(rl_txn_t *txn, const char *installation_id, rl_grant_row_t **rows, size_t *count);
/* Deletes the grant with the row's installation_id, action, scope and scope_value. */
int rl_txn_grant_delete(rl_txn_t *txn, const rl_grant_row_t *row);

/* the bridge update queue: ids count up per installation */
int rl_txn_update_append(rl_txn_t *txn, rl_update_row_t *row); /* sets row->update_id */
/* Updates after after_id created at or after since, by id, at most limit. */
int rl_txn_updates_after(rl_txn_t *txn, const char *installation_id, int64_t after_id, int64_t since, int limit,
                         rl_update_row_t **rows, size_t *count);
/* Drops the installation's updates up to and including up_to, and remembers it as acknowledged. */
int rl_txn_updates_ack(rl_txn_t *txn, const char *installation_id, int64_t up_to);
int rl_txn_updates_purge(rl_txn_t *txn, int64_t created_before);

/* attachments */
int rl_txn_attachment_insert(rl_txn_t *txn, const rl_attachment_row_t *row);
int rl_txn_attachment_get(rl_txn_t *txn, const char *key, rl_attachment_row_t *out);

/* secrets every node shares (the signing keys), by name; insert_ignore keeps an existing value */
int rl_txn_secret_insert_ignore(rl_txn_t *txn, const char *name, const char *value, int64_t created_at);
int rl_txn_secret_get(rl_txn_t *txn, const char *name, const char **value);
/* the web client's sign-in codes, by code_hash */
int rl_txn_login_code_insert(rl_txn_t *txn, const rl_login_code_row_t *row);
int rl_txn_login_code_get(rl_txn_t *txn, const char *code_hash, rl_login_code_row_t *out);
int rl_txn_login_code_delete(rl_txn_t *txn, const char *code_hash);
int rl_txn_login_codes_purge(rl_txn_t *txn, int64_t expired_before);

/* Web Push subscriptions, by endpoint */
int rl_txn_push_subscription_insert(rl_txn_t *txn, const rl_push_subscription_row_t *row);
int rl_txn_push_subscription_get(rl_txn_t *txn, const char *endpoint, rl_push_subscription_row_t *out);
int rl_txn_push_subscription_delete(rl_txn_t *txn, const char *endpoint);
/* The user's subscriptions, oldest first. */
int rl_txn_push_subscriptions_of_user(rl_txn_t *txn, const char *user_id, rl_push_subscription_row_t **rows,
                                      size_t *count);
/* Records that session references the attachment (kept once), and sets its used_at if it was never used. */
int rl_txn_attachment_use(rl_txn_t *txn, const char *key, const char *session_id, int64_t now);
/* The total size of the user's attachments that are not doomed. */
int rl_txn_attachments_usage(rl_txn_t *txn, const char *user_id, int64_t *bytes);
/*
 * Attachments no session references, not doomed: those used once (their
 * sessions are gone) and those never used and created before
 * unused_before; oldest first, at most limit.
 */
int rl_txn_attachments_unreferenced(rl_txn_t *txn, int64_t unused_before, int limit, rl_attachment_row_t **rows,
                                    size_t *count);
/* Sets doomed_at of an attachment not yet doomed; RL_E_NOT_FOUND otherwise. */
int rl_txn_attachment_doom(rl_txn_t *txn, const char *key, int64_t now);
/* Doomed attachments, longest doomed first, at most limit. */
int rl_txn_attachments_doomed(rl_txn_t *txn, int limit, rl_attachment_row_t **rows, size_t *count);
/* Deletes a doomed attachment and its uses; RL_E_NOT_FOUND when there is none. */
int rl_txn_attachment_delete(rl_txn_t *txn, const char *key);

/* ---- end-to-end encryption (issue 26) ---- */
/* The pairing of code_hash most recently created, whatever its state. */
int rl_txn_pairing_by_code_any(rl_txn_t *txn, const char *code_hash, rl_pairing_row_t *out);
int rl_txn_device_insert(rl_txn_t *txn, const rl_device_row_t *row);
int rl_txn_device_get(rl_txn_t *txn, const char *id, rl_device_row_t *out); /* revoked ones too */
/* label, pubkey, revoked_at by id */
int rl_txn_device_update(rl_txn_t *txn, const rl_device_row_t *row);
/* The user's devices not revoked, by created_at, id. */
int rl_txn_devices_of_user(rl_txn_t *txn, const char *user_id, rl_device_row_t **rows, size_t *count);
/* Records that client device_id confirmed bridge_device_id (kept once). */
int rl_txn_confirmation_put(rl_txn_t *txn, const char *device_id, const char *bridge_device_id, int64_t at);
/* 0 when device_id confirmed bridge_device_id, RL_E_NOT_FOUND otherwise. */
int rl_txn_confirmation_get(rl_txn_t *txn, const char *device_id, const char *bridge_device_id);
/* Deletes every confirmation made by or of the device. */
int rl_txn_confirmations_delete(rl_txn_t *txn, const char *device_id);
/* Inserts or replaces the wrap of (session_id, device_id). */
int rl_txn_recipient_put(rl_txn_t *txn, const rl_recipient_row_t *row);
/* 0 when the session's key is wrapped for the device, RL_E_NOT_FOUND otherwise. */
int rl_txn_recipient_get(rl_txn_t *txn, const char *session_id, const char *device_id);
/* Deletes every wrap addressed to the device. */
int rl_txn_recipients_delete(rl_txn_t *txn, const char *device_id);
/* The wraps addressed to the device created at or after since, by created_at, session_id. */
int rl_txn_recipients_of_device(rl_txn_t *txn, const char *device_id, int64_t since, rl_recipient_row_t **rows,
                                size_t *count);
/* Inserts or replaces the file of (session_id, path_blind_idx). */
int rl_txn_agent_file_put(rl_txn_t *txn, const rl_agent_file_row_t *row);
/* The session's files, most recently touched first. */
int rl_txn_agent_files_of_session(rl_txn_t *txn, const char *session_id, rl_agent_file_row_t **rows, size_t *count);

struct rl_txn {
    /* Set by a backend that is this process's alone: rl_store_exclusive. */
    int exclusive;
    /* Round trips to the server so far (a network backend counts them; worker thread). */
    uint64_t round_trips;
    /*
     * Batches rl_txn_run_batch stored in a log of the backend's instead of a
     * transaction, and commits that folded such a log into the database
     * (the SQLite backend's delta log; worker thread): the figures.
     */
    uint64_t appends, folds;
    /* Set by the worker around each operation: where rows read go, and whether the operation writes. */
    rl_arena_t *arena;
    int writing;
};

/* An operation's call: RL_TXN(txn, session_get, id, &row) is rl_txn_session_get(txn, id, &row). */
#define RL_TXN(txn, fn, ...) rl_txn_##fn((txn), __VA_ARGS__)

/*
 * The backend connection at location (see rl_store_open), migrated, as a
 * one-shot command or a test opens it (no delta log). 0 or -1 with the
 * cause logged.
 */
int rl_store__backend_open(const char *location, rl_txn_t **out);
/* Wraps a backend connection into a store (worker.c): on a thread of its own, or inline. Takes txn. */
int rl_store__wrap(rl_txn_t *txn, int threaded, rl_store_t **out);

#endif
