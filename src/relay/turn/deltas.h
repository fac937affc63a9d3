/*
 * Streamed deltas (POST /v1/bridge/sendMessageDelta), answered once durable, and
 * the rules of a streamed message's stored deltas. Loop thread only, but for
 * the functions marked "in a transaction", which run on the store's worker.
 */
#ifndef RL_RELAY_DELTAS_H
#define RL_RELAY_DELTAS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "http/call.h"
#include "store/store.h"

struct rl_turn_ctx;
typedef struct rl_deltas rl_deltas_t;

/*
 * Deltas applied and answered, waiting to be persisted: one allocation per
 * delta with its strings inside, so that building a batch on the loop costs
 * a memcpy and handing it to the store costs nothing.
 */
typedef struct rl_delta_row {
    struct rl_delta_row *next;
    int64_t seq;
    const char *message_id, *key, *body_hash, *delta; /* all into text[] */
    size_t delta_len;
    /* The first delta of a message in a batch names its installation: its run is checked (deltas.c). */
    const char *installation_id;
    /* The room its message's text had left when it was applied (--max-message-bytes): a run another node's
     * runs pushed back must still fit with them (rl_txn_delta_runs_insert_checked). */
    int64_t room;
    /* Set by the write: 0, or why this delta's run was not written. */
    int outcome;
    /* Set by the write on a run's first row when the run was stored after runs other nodes had stored (its
     * node's record had not seen them): the seq after it as stored, what those runs held (their keys: a JSON
     * array of keys arrays; malloc'd) and their size. 0 and NULL otherwise. */
    int64_t moved_next;
    char *gap_keys;
    int64_t gap_bytes;
    /* The loop's: the call waiting for the answer, and the message's record. */
    rl_call_t *call;
    void *record;
    char text[];
} rl_delta_row_t;

typedef struct rl_delta_batch {
    rl_delta_row_t *head, **tail;
    size_t count;
    int shared; /* other nodes write too: each run checks its installation as well (rl_turn_ctx_t.shared) */
    /*
     * The store's only writer, a local bus, and no change to a message's
     * state in flight when it was submitted (deltas.c, batch_trusted): the
     * records it was applied against are the truth, and its
     * runs are written without reading the store back (check_run). 0 (the
     * default) checks every run.
     */
    int trusted;
    int doubted;      /* a change finished while it gathered: it is not trusted (rl_deltas_changing) */
    int64_t first_ms; /* when its first delta joined it (rl_clock_mono_ms) */
} rl_delta_batch_t;

rl_delta_batch_t *rl_delta_batch_new(void);
/* Copies one delta in; 0, or -1 when out of memory. */
int rl_delta_batch_add(rl_delta_batch_t *batch, const char *message_id, int64_t seq, const char *delta,
                       size_t delta_len, const char *key, const char *body_hash);
/* As rl_delta_batch_add, for a call waiting on it; the new row, or NULL. */
rl_delta_row_t *rl_delta_batch_add_for(rl_delta_batch_t *batch, const char *message_id, int64_t seq, const char *delta,
                                       size_t delta_len, const char *key, const char *body_hash, rl_call_t *call,
                                       void *record);
void rl_delta_batch_free(rl_delta_batch_t *batch);
/*
 * In a transaction: writes a batch, one run (row) per message and run of
 * consecutive seqs. A run whose first row names its installation is checked
 * first, and its rows' outcome says why it was not written:
 * RL_E_MESSAGE_NOT_FOUND, RL_E_SESSION_DELETED, RL_E_MESSAGE_FINALIZED, or
 * RL_E_CONFLICT (the store's next seq is not where the run starts: another
 * node wrote to the message). Other errors fail the whole write.
 */
int rl_delta_batch_write(rl_txn_t *txn, rl_delta_batch_t *batch);

/*
 * The deltas of this node, from turn's config, store, hub, loop and shared
 * (copied; its deltas, push and media are not read: relay.c makes the deltas
 * before the contexts that hold them). NULL when out of memory.
 */
rl_deltas_t *rl_deltas_new(const struct rl_turn_ctx *turn);
void rl_deltas_free(rl_deltas_t *deltas);
int rl_bridge_send_delta(rl_call_t *call);
/* Queues every pending delta for the store now; what is queued after lands after them. */
void rl_deltas_flush(rl_deltas_t *deltas);
/* Deltas not yet answered: pending, or batches in the store. */
size_t rl_deltas_pending(rl_deltas_t *deltas);
/* Forgets records unused for a while; housekeeping. */
void rl_deltas_sweep(rl_deltas_t *deltas, int64_t now_ms, unsigned parts);
/* A session was deleted: its messages' records must be reloaded. */
void rl_deltas_forget_session(rl_deltas_t *deltas, const char *session_id);
/*
 * sendMessage opened a message: its record starts with text_bytes of text (0 for a placeholder), without asking the
 * store. encrypted: its session's (its deltas are envelopes, kept apart).
 */
void rl_deltas_opened(rl_deltas_t *deltas, const char *message_id, const char *installation_id, const char *user_id,
                      json_t *session_id, json_t *interaction_id, size_t text_bytes, int encrypted);
/*
 * A change to messages' state that the records do not foresee (a session
 * deleted, restored or purged, messages ended by the sweep) goes to the
 * store (begin = 1) or has come back and told the records (begin = 0,
 * after rl_deltas_finalized / rl_deltas_forget_session). Meanwhile, and for
 * the deltas that gathered meanwhile, batches are checked against the
 * store rather than trusted. begin = 1 also queues the pending deltas
 * first: they were answered as before the change.
 */
void rl_deltas_changing(rl_deltas_t *deltas, int begin);
/* Forgets every record: the store is the truth again (a purge that removed messages). */
void rl_deltas_forget_all(rl_deltas_t *deltas);
/* sendMessageEnd finalised a message: later deltas get 409. */
void rl_deltas_finalized(rl_deltas_t *deltas, const char *message_id);
/*
 * A sendMessageEnd for the message is in the store (ending = 1) or has come
 * back (ending = 0): meanwhile a new delta is refused like one after the end,
 * so that nothing is answered that the end would not fold in.
 */
void rl_deltas_ending(rl_deltas_t *deltas, const char *message_id, int ending);

/*
 * In a transaction: the installation's agent message and its session.
 * RL_E_MESSAGE_NOT_FOUND (not an agent message of this installation),
 * RL_E_SESSION_DELETED (its session is deleted; both rows are filled).
 */
int rl_deltas_message_of(rl_txn_t *txn, const char *installation_id, const char *message_id, rl_message_row_t *message,
                         rl_session_row_t *session);
/*
 * In a transaction, when the message ends: its deltas' keys move into one
 * record kept like other idempotency records (so a replayed delta still
 * answers idempotent), and its delta rows go (its text is now canonical).
 */
int rl_deltas_fold(rl_txn_t *txn, const char *message_id, int64_t now);

#endif
