/*
 * Every rl_txn_* operation of store.h, written once for the SQL backends:
 * a statement in the dialect-neutral form of sql.h, its parameters, and
 * the row description (rows.h) that binds and reads it. The driver of the
 * connection (sqlite.c, postgres.c) runs them.
 *
 * Where the engines differ, the statement says so once: `@bytewise` where
 * text must compare byte by byte (PostgreSQL's collations do not), a
 * `locked` suffix for the reads a writing operation must lock on an engine
 * where transactions run side by side (SQLite's one writer needs none),
 * `@inserted` for the column that orders messages by insertion (SQLite's
 * rowid, PostgreSQL's seq). Inserts are ON CONFLICT DO NOTHING, which both
 * engines know: a key taken is RL_E_CONFLICT without a failed statement,
 * which in PostgreSQL would abort the operation's savepoint.
 *
 * Nothing here knows a rule of the relay; docs/internals/store.md says what
 * each function must do for any backend.
 */
#include <stdint.h>
#include <string.h>

#include "common/error.h"
#include "store/rows.h"
#include "store/sql.h"

RL_ROW_DESCRIBE(user_row, rl_user_row_t, RL_ROW_USER);
RL_ROW_DESCRIBE(pairing_row, rl_pairing_row_t, RL_ROW_PAIRING);
RL_ROW_DESCRIBE(installation_row, rl_installation_row_t, RL_ROW_INSTALLATION);
RL_ROW_DESCRIBE(session_row, rl_session_row_t, RL_ROW_SESSION);
RL_ROW_DESCRIBE(interaction_row, rl_interaction_row_t, RL_ROW_INTERACTION);
RL_ROW_DESCRIBE(message_row, rl_message_row_t, RL_ROW_MESSAGE);
RL_ROW_DESCRIBE(delta_run_row, rl_delta_run_row_t, RL_ROW_DELTA_RUN);
RL_ROW_DESCRIBE(idempotency_row, rl_idempotency_row_t, RL_ROW_IDEMPOTENCY);
RL_ROW_DESCRIBE(task_row, rl_task_row_t, RL_ROW_TASK);
RL_ROW_DESCRIBE(approval_row, rl_approval_row_t, RL_ROW_APPROVAL);
RL_ROW_DESCRIBE(capability_row, rl_capability_row_t, RL_ROW_CAPABILITY);
RL_ROW_DESCRIBE(grant_row, rl_grant_row_t, RL_ROW_GRANT);
RL_ROW_DESCRIBE(update_row, rl_update_row_t, RL_ROW_UPDATE);
RL_ROW_DESCRIBE(attachment_row, rl_attachment_row_t, RL_ROW_ATTACHMENT);
RL_ROW_DESCRIBE(login_code_row, rl_login_code_row_t, RL_ROW_LOGIN_CODE);
RL_ROW_DESCRIBE(push_subscription_row, rl_push_subscription_row_t, RL_ROW_PUSH_SUBSCRIPTION);
RL_ROW_DESCRIBE(device_row, rl_device_row_t, RL_ROW_DEVICE);
RL_ROW_DESCRIBE(recipient_row, rl_recipient_row_t, RL_ROW_RECIPIENT);
RL_ROW_DESCRIBE(agent_file_row, rl_agent_file_row_t, RL_ROW_AGENT_FILE);

/* Results of one or two values. */
typedef struct int_value {
    int64_t value;
} int_value_t;
typedef struct text_value {
    const char *value;
} text_value_t;
typedef struct delta_keys_value {
    const char *keys;
    int64_t created_at;
} delta_keys_value_t;
#define RL_ROW_INT_VALUE(F, N, T)  F(T, value, value, INT)
#define RL_ROW_TEXT_VALUE(F, N, T) F(T, value, value, TEXT)
#define RL_ROW_DELTA_KEYS(F, N, T) F(T, keys, keys, TEXT) N(T, created_at, created_at, INT)
#define RL_ROW_DELTA_WRITTEN(F, N, T)                                                                                  \
    F(T, i, i, INT) N(T, seq, seq, INT) N(T, gap_keys, gap_keys, TEXT) N(T, gap_bytes, gap_bytes, INT)
RL_ROW_DESCRIBE(int_value, int_value_t, RL_ROW_INT_VALUE);
RL_ROW_DESCRIBE(text_value, text_value_t, RL_ROW_TEXT_VALUE);
RL_ROW_DESCRIBE(delta_keys_value, delta_keys_value_t, RL_ROW_DELTA_KEYS);
RL_ROW_DESCRIBE(delta_written, rl_delta_written_t, RL_ROW_DELTA_WRITTEN);

/*
 * A read by key inside a writing operation locks its row until the commit
 * where transactions run side by side: another node's operation on the same
 * row waits, so a rule checked on the row still holds when this one writes.
 * The lists that sweeps read to write back skip the rows another node holds,
 * so that two nodes never expire or end the same row.
 */
#define FOR_UPDATE  " FOR UPDATE"
#define SKIP_LOCKED " FOR UPDATE SKIP LOCKED"

#define GET(txn, stmt, desc, out, ...) rl_sql__get((txn), (stmt), (desc), (out), RL_SQL_PARAMS(__VA_ARGS__))
#define LIST(txn, stmt, desc, rows, count, ...)                                                                        \
    rl_sql__list((txn), (stmt), (desc), (rows), (count), RL_SQL_PARAMS(__VA_ARGS__))
#define WRITE(txn, stmt, changes, ...) rl_sql__write((txn), (stmt), (changes), RL_SQL_PARAMS(__VA_ARGS__))
#define WRITE_ONE(txn, stmt, ...)      rl_sql__write_one((txn), (stmt), RL_SQL_PARAMS(__VA_ARGS__))

/* ---- transaction control: the driver's ---------------------------------------------------------- */

int rl_txn_begin(rl_txn_t *txn)
{
    return RL_SQL_TXN(txn)->driver->begin(txn);
}

int rl_txn_commit(rl_txn_t *txn)
{
    return RL_SQL_TXN(txn)->driver->commit(txn);
}

void rl_txn_rollback(rl_txn_t *txn)
{
    RL_SQL_TXN(txn)->driver->rollback(txn);
}

int rl_txn_savepoint(rl_txn_t *txn)
{
    return RL_SQL_TXN(txn)->driver->savepoint(txn);
}

void rl_txn_release(rl_txn_t *txn, int keep)
{
    RL_SQL_TXN(txn)->driver->release(txn, keep);
}

void rl_txn_close(rl_txn_t *txn)
{
    RL_SQL_TXN(txn)->driver->close(txn);
}

int rl_txn_run_batch(rl_txn_t *txn, rl_store_op_t *batch)
{
    const rl_sql_driver_t *driver = RL_SQL_TXN(txn)->driver;

    return driver->run_batch != NULL ? driver->run_batch(txn, batch) : 1;
}

int rl_txn_write_now(rl_txn_t *txn, rl_store_op_t *batch, int *was_empty)
{
    const rl_sql_driver_t *driver = RL_SQL_TXN(txn)->driver;

    return driver->write_now != NULL ? driver->write_now(txn, batch, was_empty) : 1;
}

int64_t rl_txn_due_ms(rl_txn_t *txn)
{
    const rl_sql_driver_t *driver = RL_SQL_TXN(txn)->driver;

    return driver->due_ms != NULL ? driver->due_ms(txn) : -1;
}

/* ---- users ------------------------------------------------------------------------------------- */

int rl_txn_user_insert_ignore(rl_txn_t *txn, const rl_user_row_t *row)
{
    static const rl_sql_t sql = {RL_ROW_INSERT("users", RL_ROW_USER)};

    return rl_sql__insert_ignore(txn, &sql, &user_row, row);
}

int rl_txn_user_get(rl_txn_t *txn, const char *id, rl_user_row_t *out)
{
    static const rl_sql_t sql = {"SELECT " RL_ROW_COLUMNS(RL_ROW_USER) " FROM users WHERE id = ?", FOR_UPDATE};

    return GET(txn, &sql, &user_row, out, P_TEXT(id));
}

/* ---- pairings ---------------------------------------------------------------------------------- */

#define PAIRING_SELECT "SELECT " RL_ROW_COLUMNS(RL_ROW_PAIRING) " FROM pairings"

int rl_txn_pairing_insert(rl_txn_t *txn, const rl_pairing_row_t *row)
{
    /* No conflict target: a poll hash taken and a code pending already (the partial index) are both conflicts. */
    static const rl_sql_t sql = {RL_ROW_INSERT("pairings", RL_ROW_PAIRING)};

    return rl_sql__insert(txn, &sql, &pairing_row, row);
}

int rl_txn_pairing_by_code(rl_txn_t *txn, const char *code_hash, rl_pairing_row_t *out)
{
    static const rl_sql_t sql = {PAIRING_SELECT " WHERE code_hash = ? AND state = 'pending'", FOR_UPDATE};

    return GET(txn, &sql, &pairing_row, out, P_TEXT(code_hash));
}

int rl_txn_pairing_by_poll(rl_txn_t *txn, const char *poll_hash, rl_pairing_row_t *out)
{
    static const rl_sql_t sql = {PAIRING_SELECT " WHERE poll_hash = ?", FOR_UPDATE};

    return GET(txn, &sql, &pairing_row, out, P_TEXT(poll_hash));
}

int rl_txn_pairing_update(rl_txn_t *txn, const rl_pairing_row_t *row)
{
    static const rl_sql_t sql = {
        "UPDATE pairings SET state = ?, user_id = ?, claimed_at = ?, redeem_by = ? WHERE poll_hash = ?"};

    return WRITE_ONE(txn, &sql, P_TEXT(row->state), P_TEXT(row->user_id), P_TIME(row->claimed_at),
                     P_TEXT(row->redeem_by), P_TEXT(row->poll_hash));
}

int rl_txn_pairing_delete_lapsed(rl_txn_t *txn, const char *code_hash, int64_t at)
{
    static const rl_sql_t sql = {"DELETE FROM pairings WHERE code_hash = ? AND state = 'pending' AND expires_at <= ?"};

    return WRITE(txn, &sql, NULL, P_TEXT(code_hash), P_INT(at));
}

int rl_txn_pairings_purge(rl_txn_t *txn, int64_t expired_before)
{
    static const rl_sql_t sql = {"DELETE FROM pairings WHERE expires_at < ?"};

    return WRITE(txn, &sql, NULL, P_INT(expired_before));
}

/* ---- installations ------------------------------------------------------------------------------- */

#define INSTALLATION_SELECT "SELECT " RL_ROW_COLUMNS(RL_ROW_INSTALLATION) " FROM installations"

/* A token's environment when the caller names none: the schema's column default too. */
static const char default_token_env[] = "live";

int rl_txn_installation_insert(rl_txn_t *txn, const rl_installation_row_t *row)
{
    static const rl_sql_t sql = {RL_ROW_INSERT("installations", RL_ROW_INSTALLATION)};
    rl_installation_row_t values = *row;

    if (values.token_env == NULL)
        values.token_env = default_token_env;
    return rl_sql__insert(txn, &sql, &installation_row, &values);
}

int rl_txn_installation_get(rl_txn_t *txn, const char *id, rl_installation_row_t *out)
{
    static const rl_sql_t sql = {INSTALLATION_SELECT " WHERE id = ?", FOR_UPDATE};

    return GET(txn, &sql, &installation_row, out, P_TEXT(id));
}

int rl_txn_installation_update(rl_txn_t *txn, const rl_installation_row_t *row)
{
    static const rl_sql_t sql = {"UPDATE installations SET token_hash = ?, token_env = ?, custom_display_name = ?,"
                                 " custom_emoji = ?, state = ?, manifest = ?, revoked_at = ?, bridge_version = ?"
                                 " WHERE id = ?"};

    return WRITE_ONE(txn, &sql, P_TEXT(row->token_hash),
                     P_TEXT(row->token_env != NULL ? row->token_env : default_token_env),
                     P_TEXT(row->custom_display_name), P_TEXT(row->custom_emoji), P_TEXT(row->state),
                     P_TEXT(row->manifest), P_TIME(row->revoked_at), P_TEXT(row->bridge_version), P_TEXT(row->id));
}

int rl_txn_installations_of_user(rl_txn_t *txn, const char *user_id, rl_installation_row_t **rows, size_t *count)
{
    static const rl_sql_t sql = {INSTALLATION_SELECT " WHERE user_id = ? ORDER BY created_at, id @bytewise"};

    return LIST(txn, &sql, &installation_row, rows, count, P_TEXT(user_id));
}

/* ---- sessions ---------------------------------------------------------------------------------- */

#define SESSION_SELECT "SELECT " RL_ROW_COLUMNS(RL_ROW_SESSION) " FROM sessions"

int rl_txn_session_insert(rl_txn_t *txn, const rl_session_row_t *row)
{
    static const rl_sql_t sql = {RL_ROW_INSERT("sessions", RL_ROW_SESSION)};

    return rl_sql__insert(txn, &sql, &session_row, row);
}

int rl_txn_session_get(rl_txn_t *txn, const char *id, rl_session_row_t *out)
{
    static const rl_sql_t sql = {SESSION_SELECT " WHERE id = ?", FOR_UPDATE};

    return GET(txn, &sql, &session_row, out, P_TEXT(id));
}

int rl_txn_session_update(rl_txn_t *txn, const rl_session_row_t *row)
{
    /* encrypted, agent, project and resume are fixed at creation: never written again. */
    static const rl_sql_t sql = {"UPDATE sessions SET title = ?, state = ?, updated_at = ?, deleted_at = ?, model = ?,"
                                 " agent_state = ? WHERE id = ?"};

    return WRITE_ONE(txn, &sql, P_TEXT(row->title), P_TEXT(row->state), P_INT(row->updated_at), P_TIME(row->deleted_at),
                     P_TEXT(row->model), P_TEXT(row->agent_state), P_TEXT(row->id));
}

int rl_txn_sessions_of_user(rl_txn_t *txn, const char *user_id, rl_session_row_t **rows, size_t *count)
{
    static const rl_sql_t sql = {SESSION_SELECT " WHERE user_id = ? AND deleted_at IS NULL"
                                                " ORDER BY updated_at DESC, id @bytewise"};

    return LIST(txn, &sql, &session_row, rows, count, P_TEXT(user_id));
}

int rl_txn_sessions_deleted_of_user(rl_txn_t *txn, const char *user_id, int64_t deleted_after, rl_session_row_t **rows,
                                    size_t *count)
{
    static const rl_sql_t sql = {SESSION_SELECT " WHERE user_id = ? AND deleted_at > ?"
                                                " ORDER BY deleted_at DESC, id @bytewise"};

    return LIST(txn, &sql, &session_row, rows, count, P_TEXT(user_id), P_INT(deleted_after));
}

int rl_txn_sessions_purge(rl_txn_t *txn, int64_t deleted_before, int64_t *purged)
{
    /*
     * Interactions, messages and attachment uses go with their session (ON
     * DELETE CASCADE); tasks, approvals and capability requests have no such key.
     */
#define PURGED " WHERE session_id IN (SELECT id FROM sessions WHERE deleted_at IS NOT NULL AND deleted_at <= ?)"
    static const rl_sql_t children[] = {
        {"DELETE FROM tasks" PURGED},
        {"DELETE FROM approvals" PURGED},
        {"DELETE FROM capability_requests" PURGED},
    };
#undef PURGED
    static const rl_sql_t sql = {"DELETE FROM sessions WHERE deleted_at IS NOT NULL AND deleted_at <= ?"};
    size_t i;
    int result;

    for (i = 0; i < sizeof(children) / sizeof(children[0]); ++i)
        if ((result = WRITE(txn, &children[i], NULL, P_INT(deleted_before))) != 0)
            return result;
    return WRITE(txn, &sql, purged, P_INT(deleted_before));
}

/* ---- interactions ------------------------------------------------------------------------------- */

int rl_txn_interaction_insert(rl_txn_t *txn, const rl_interaction_row_t *row)
{
    static const rl_sql_t sql = {RL_ROW_INSERT("interactions", RL_ROW_INTERACTION)};

    return rl_sql__insert(txn, &sql, &interaction_row, row);
}

int rl_txn_interaction_get(rl_txn_t *txn, const char *id, rl_interaction_row_t *out)
{
    static const rl_sql_t sql = {"SELECT " RL_ROW_COLUMNS(RL_ROW_INTERACTION) " FROM interactions WHERE id = ?",
                                 FOR_UPDATE};

    return GET(txn, &sql, &interaction_row, out, P_TEXT(id));
}

/* ---- messages ---------------------------------------------------------------------------------- */

#define MESSAGE_SELECT "SELECT " RL_ROW_COLUMNS(RL_ROW_MESSAGE) " FROM messages"

int rl_txn_message_insert(rl_txn_t *txn, const rl_message_row_t *row)
{
    static const rl_sql_t sql = {RL_ROW_INSERT("messages", RL_ROW_MESSAGE)};

    return rl_sql__insert(txn, &sql, &message_row, row);
}

int rl_txn_message_get(rl_txn_t *txn, const char *id, rl_message_row_t *out)
{
    static const rl_sql_t sql = {MESSAGE_SELECT " WHERE id = ?", FOR_UPDATE};

    return GET(txn, &sql, &message_row, out, P_TEXT(id));
}

int rl_txn_message_update(rl_txn_t *txn, const rl_message_row_t *row)
{
    static const rl_sql_t sql = {"UPDATE messages SET text = ?, usage = ?, finish_reason = ?, state = ?,"
                                 " finalized_at = ?, placeholder = ? WHERE id = ?"};

    return WRITE_ONE(txn, &sql, P_TEXT(row->text), P_TEXT(row->usage), P_TEXT(row->finish_reason), P_TEXT(row->state),
                     P_TIME(row->finalized_at), P_INT32(row->placeholder), P_TEXT(row->id));
}

int rl_txn_messages_page(rl_txn_t *txn, const char *session_id, const char *before, int limit, rl_message_row_t **rows,
                         size_t *count)
{
    static const rl_sql_t cursor_sql = {"SELECT @inserted FROM messages WHERE id = ? AND session_id = ?"};
    static const rl_sql_t page_sql = {MESSAGE_SELECT " WHERE session_id = ? AND @inserted < ?"
                                                     " ORDER BY @inserted DESC LIMIT ?"};
    int_value_t cursor = {INT64_MAX};
    int result;

    /* Insertion order: the page ends where the cursor message sits. */
    if (before != NULL &&
        (result = GET(txn, &cursor_sql, &int_value, &cursor, P_TEXT(before), P_TEXT(session_id))) != 0) {
        *rows = NULL;
        *count = 0;
        return result;
    }
    return LIST(txn, &page_sql, &message_row, rows, count, P_TEXT(session_id), P_INT(cursor.value), P_INT32(limit));
}

int rl_txn_messages_by_time(rl_txn_t *txn, const char *session_id, int64_t before_at, const char *before_id, int limit,
                            rl_message_row_t **rows, size_t *count)
{
    /* Insertion order; a missing before_id gives 0, below every message. */
    static const rl_sql_t sql = {MESSAGE_SELECT
                                 " WHERE session_id = ?1 AND (created_at < ?2 OR (created_at = ?2"
                                 " AND @inserted < coalesce((SELECT @inserted FROM messages WHERE id = ?3), 0)))"
                                 " ORDER BY created_at DESC, @inserted DESC LIMIT ?4"};

    return LIST(txn, &sql, &message_row, rows, count, P_TEXT(session_id), P_INT(before_at), P_TEXT(before_id),
                P_INT32(limit));
}

int rl_txn_messages_open_before(rl_txn_t *txn, int64_t at, int limit, rl_message_row_t **rows, size_t *count)
{
    /* The sweep that ends these messages writes them back: it takes the rows another node is not already ending. */
    static const rl_sql_t sql = {
        "SELECT " RL_ROW_COLUMNS_OF(
            "m.",
            RL_ROW_MESSAGE) " FROM messages m LEFT JOIN interactions i"
                            " ON i.id = m.interaction_id WHERE m.state = 'streaming' AND coalesce(i.created_at, m.created_at) <= ?"
                            " ORDER BY m.created_at, m.@inserted LIMIT ?",
        " FOR UPDATE OF m SKIP LOCKED"};

    return LIST(txn, &sql, &message_row, rows, count, P_INT(at), P_INT32(limit));
}

/* ---- streamed deltas ---------------------------------------------------------------------------- */

int rl_txn_delta_run_insert(rl_txn_t *txn, const rl_delta_run_row_t *row)
{
    static const rl_sql_t sql = {RL_ROW_INSERT("message_deltas", RL_ROW_DELTA_RUN)};

    return rl_sql__insert_ignore(txn, &sql, &delta_run_row, row);
}

int rl_txn_delta_runs_of(rl_txn_t *txn, const char *message_id, rl_delta_run_row_t **rows, size_t *count)
{
    static const rl_sql_t sql = {"SELECT " RL_ROW_COLUMNS(RL_ROW_DELTA_RUN) " FROM message_deltas WHERE message_id = ?"
                                                                            " ORDER BY seq"};

    return LIST(txn, &sql, &delta_run_row, rows, count, P_TEXT(message_id));
}

int rl_txn_delta_next_seq(rl_txn_t *txn, const char *message_id, int64_t *next)
{
    static const rl_sql_t sql = {"SELECT seq_last FROM message_deltas WHERE message_id = ? ORDER BY seq DESC LIMIT 1",
                                 FOR_UPDATE};
    int_value_t last = {0};
    int result = GET(txn, &sql, &int_value, &last, P_TEXT(message_id));

    if (result != 0 && result != RL_E_NOT_FOUND)
        return result;
    *next = last.value + 1;
    return 0;
}

int rl_txn_delta_runs_delete(rl_txn_t *txn, const char *message_id)
{
    static const rl_sql_t sql = {"DELETE FROM message_deltas WHERE message_id = ?"};

    return WRITE(txn, &sql, NULL, P_TEXT(message_id));
}

int rl_txn_delta_keys_put(rl_txn_t *txn, const char *message_id, const char *keys, int64_t created_at)
{
    static const rl_sql_t sql = {"INSERT INTO delta_keys(message_id, keys, created_at) VALUES (?, ?, ?)"
                                 " ON CONFLICT (message_id) DO UPDATE SET keys = excluded.keys,"
                                 " created_at = excluded.created_at"};

    return WRITE(txn, &sql, NULL, P_TEXT(message_id), P_TEXT(keys), P_INT(created_at));
}

int rl_txn_delta_keys_get(rl_txn_t *txn, const char *message_id, const char **keys, int64_t *created_at)
{
    static const rl_sql_t sql = {"SELECT keys, created_at FROM delta_keys WHERE message_id = ?", FOR_UPDATE};
    delta_keys_value_t out;
    int result = GET(txn, &sql, &delta_keys_value, &out, P_TEXT(message_id));

    if (result == 0) {
        *keys = out.keys;
        *created_at = out.created_at;
    }
    return result;
}

/*
 * PostgreSQL only (a JSON recordset, FOR UPDATE OF): the checks of
 * rl_txn_delta_runs_insert_checked and the insert in one statement.
 * The message's row is locked as the transactional path's read locks it,
 * so that an end on another node waits for this insert (and folds it) or
 * runs first (and this run is refused); the primary key (message_id, seq)
 * refuses the second of two nodes that numbered a run alike. A run whose
 * node had not seen the runs other nodes stored since (a bridge whose
 * requests a balancer spreads over nodes) is stored after them, the keys
 * and the size of what it had not seen checked here and returned, rather
 * than refused and read again: the same one round trip.
 */
#define STRING_OF(x)  #x
#define STRING_OF_(x) STRING_OF(x)
#define DELTA_GAP     " FROM message_deltas d WHERE d.message_id = r.message_id AND d.seq_last >= r.seq"
int rl_txn_delta_runs_insert_checked(rl_txn_t *txn, const char *runs, rl_delta_written_t **written, size_t *count)
{
    static const rl_sql_t sql = {
        "WITH r AS (SELECT * FROM json_to_recordset(?::json) AS x(i BIGINT, message_id TEXT, seq BIGINT, "
        "seq_last BIGINT, delta TEXT, keys TEXT, installation_id TEXT, room BIGINT)), "
        "ok AS (SELECT r.i, r.message_id, nx.next AS seq, nx.next + r.seq_last - r.seq AS seq_last, r.delta, r.keys, "
        "CASE WHEN nx.next = r.seq THEN NULL ELSE g.keys END AS gap_keys, g.bytes AS gap_bytes FROM r "
        "JOIN messages m ON m.id = r.message_id "
        "JOIN sessions s ON s.id = m.session_id "
        "JOIN installations n ON n.id = r.installation_id "
        "CROSS JOIN LATERAL (SELECT COALESCE((SELECT d.seq_last FROM message_deltas d WHERE d.message_id = "
        "r.message_id ORDER BY d.seq DESC LIMIT 1), 0) + 1 AS next) nx "
        "CROSS JOIN LATERAL (SELECT count(*) AS runs, COALESCE(sum(octet_length(d.delta)), 0) AS bytes, "
        "COALESCE(json_agg(d.keys::json ORDER BY d.seq), '[]'::json)::text AS keys" DELTA_GAP " AND nx.next > r.seq) g "
        "WHERE m.role = 'agent' AND m.state = 'streaming' AND s.installation_id = r.installation_id "
        "AND s.deleted_at IS NULL AND n.state <> 'revoked' "
        "AND (nx.next = r.seq OR (nx.next > r.seq AND g.runs <= " STRING_OF_(RL_DELTA_GAP_RUNS) " "
        "AND g.bytes + octet_length(r.delta) <= r.room AND NOT EXISTS (SELECT 1" DELTA_GAP " AND EXISTS ("
        "SELECT 1 FROM json_array_elements(d.keys::json) gk, json_array_elements(r.keys::json) rk "
        "WHERE gk->>0 = rk->>0)))) "
        "FOR UPDATE OF m), "
        "ins AS (INSERT INTO message_deltas(message_id, seq, seq_last, delta, keys) "
        "SELECT message_id, seq, seq_last, convert_to(delta, 'UTF8'), keys FROM ok "
        "ON CONFLICT DO NOTHING RETURNING message_id, seq) "
        "SELECT ok.i, ok.seq, ok.gap_keys, ok.gap_bytes FROM ok "
        "JOIN ins ON ins.message_id = ok.message_id AND ins.seq = ok.seq"};

    if (!RL_SQL_TXN(txn)->driver->dialect.numbered)
        return 1;
    return LIST(txn, &sql, &delta_written, written, count, P_TEXT(runs));
}

int rl_txn_delta_keys_purge(rl_txn_t *txn, int64_t created_before)
{
    static const rl_sql_t sql = {"DELETE FROM delta_keys WHERE created_at < ?"};

    return WRITE(txn, &sql, NULL, P_INT(created_before));
}

/* ---- idempotency --------------------------------------------------------------------------------- */

#define IDEMPOTENCY_SELECT "SELECT " RL_ROW_COLUMNS(RL_ROW_IDEMPOTENCY) " FROM idempotency"

int rl_txn_idempotency_get(rl_txn_t *txn, const char *owner, const char *scope, const char *key,
                           rl_idempotency_row_t *out)
{
    static const rl_sql_t sql = {IDEMPOTENCY_SELECT " WHERE owner = ? AND scope = ? AND key = ?", FOR_UPDATE};
    const rl_sql_driver_t *driver = RL_SQL_TXN(txn)->driver;
    int result;

    /*
     * FOR UPDATE cannot lock a key that is not recorded yet, and a retried
     * request may run on two nodes at once: the key itself is locked first
     * (until the commit), so that the second waits for the first and finds
     * its record (a replay) rather than meeting it at insert (a conflict).
     */
    if (txn->writing && driver->lock_key != NULL && (result = driver->lock_key(txn, owner, scope, key)) != 0)
        return result;
    return GET(txn, &sql, &idempotency_row, out, P_TEXT(owner), P_TEXT(scope), P_TEXT(key));
}

int rl_txn_idempotency_insert(rl_txn_t *txn, const rl_idempotency_row_t *row)
{
    static const rl_sql_t sql = {RL_ROW_INSERT("idempotency", RL_ROW_IDEMPOTENCY)};

    return rl_sql__insert(txn, &sql, &idempotency_row, row);
}

int rl_txn_idempotency_delete(rl_txn_t *txn, const char *owner, const char *scope, const char *key)
{
    static const rl_sql_t sql = {"DELETE FROM idempotency WHERE owner = ? AND scope = ? AND key = ?"};

    return WRITE_ONE(txn, &sql, P_TEXT(owner), P_TEXT(scope), P_TEXT(key));
}

int rl_txn_idempotency_of_scope(rl_txn_t *txn, const char *owner, const char *scope, rl_idempotency_row_t **rows,
                                size_t *count)
{
    static const rl_sql_t sql = {IDEMPOTENCY_SELECT " WHERE owner = ? AND scope = ?"};

    return LIST(txn, &sql, &idempotency_row, rows, count, P_TEXT(owner), P_TEXT(scope));
}

int rl_txn_idempotency_purge(rl_txn_t *txn, int64_t created_before)
{
    static const rl_sql_t sql = {"DELETE FROM idempotency WHERE created_at < ?"};

    return WRITE(txn, &sql, NULL, P_INT(created_before));
}

/* ---- tasks ------------------------------------------------------------------------------------- */

#define TASK_SELECT "SELECT " RL_ROW_COLUMNS(RL_ROW_TASK) " FROM tasks"

int rl_txn_task_insert(rl_txn_t *txn, const rl_task_row_t *row)
{
    static const rl_sql_t sql = {RL_ROW_INSERT("tasks", RL_ROW_TASK)};

    return rl_sql__insert(txn, &sql, &task_row, row);
}

int rl_txn_task_get(rl_txn_t *txn, const char *installation_id, const char *task_id, rl_task_row_t *out)
{
    static const rl_sql_t sql = {TASK_SELECT " WHERE installation_id = ? AND task_id = ?", FOR_UPDATE};

    return GET(txn, &sql, &task_row, out, P_TEXT(installation_id), P_TEXT(task_id));
}

int rl_txn_task_update(rl_txn_t *txn, const rl_task_row_t *row)
{
    static const rl_sql_t sql = {
        "UPDATE tasks SET status = ?, status_label = ?, name = ?, updated_at = ?,"
        " partial_result = ?, result = ?, error = ? WHERE installation_id = ? AND task_id = ?"};

    return WRITE_ONE(txn, &sql, P_TEXT(row->status), P_TEXT(row->status_label), P_TEXT(row->name),
                     P_INT(row->updated_at), P_TEXT(row->partial_result), P_TEXT(row->result), P_TEXT(row->error),
                     P_TEXT(row->installation_id), P_TEXT(row->task_id));
}

int rl_txn_tasks_by_time(rl_txn_t *txn, const char *session_id, int64_t before_at, const char *before_id, int limit,
                         rl_task_row_t **rows, size_t *count)
{
    /* A NULL before_id makes the comparison NULL: no task at before_at. */
    static const rl_sql_t sql = {TASK_SELECT " WHERE session_id = ?1 AND (created_at < ?2"
                                             " OR (created_at = ?2 AND task_id @bytewise < ?3))"
                                             " ORDER BY created_at DESC, task_id @bytewise DESC LIMIT ?4"};

    return LIST(txn, &sql, &task_row, rows, count, P_TEXT(session_id), P_INT(before_at), P_TEXT(before_id),
                P_INT32(limit));
}

/* ---- approvals ------------------------------------------------------------------------------------ */

#define APPROVAL_SELECT "SELECT " RL_ROW_COLUMNS(RL_ROW_APPROVAL) " FROM approvals"

int rl_txn_approval_insert(rl_txn_t *txn, const rl_approval_row_t *row)
{
    static const rl_sql_t sql = {RL_ROW_INSERT("approvals", RL_ROW_APPROVAL)};

    return rl_sql__insert(txn, &sql, &approval_row, row);
}

int rl_txn_approval_get(rl_txn_t *txn, const char *installation_id, const char *id, rl_approval_row_t *out)
{
    static const rl_sql_t sql = {APPROVAL_SELECT " WHERE installation_id = ? AND id = ?", FOR_UPDATE};

    return GET(txn, &sql, &approval_row, out, P_TEXT(installation_id), P_TEXT(id));
}

int rl_txn_approval_update(rl_txn_t *txn, const rl_approval_row_t *row)
{
    static const rl_sql_t sql = {
        "UPDATE approvals SET state = ?, decision = ?, scope = ?, scope_value = ?,"
        " resolved_at = ?, decision_sig = ?, device_id = ? WHERE installation_id = ? AND id = ?"};

    return WRITE_ONE(txn, &sql, P_TEXT(row->state), P_TEXT(row->decision), P_TEXT(row->scope), P_TEXT(row->scope_value),
                     P_TIME(row->resolved_at), P_TEXT(row->decision_sig), P_TEXT(row->device_id),
                     P_TEXT(row->installation_id), P_TEXT(row->id));
}

int rl_txn_approvals_of_user_by_id(rl_txn_t *txn, const char *user_id, const char *id, rl_approval_row_t **rows,
                                   size_t *count)
{
    /* A decision writes the row it finds here. */
    static const rl_sql_t sql = {APPROVAL_SELECT " WHERE user_id = ? AND id = ?"
                                                 " ORDER BY created_at, installation_id @bytewise",
                                 FOR_UPDATE};

    return LIST(txn, &sql, &approval_row, rows, count, P_TEXT(user_id), P_TEXT(id));
}

int rl_txn_approvals_pending_of_user(rl_txn_t *txn, const char *user_id, int64_t after, rl_approval_row_t **rows,
                                     size_t *count)
{
    static const rl_sql_t sql = {APPROVAL_SELECT " WHERE user_id = ? AND state = 'pending' AND expires_at > ?"
                                                 " ORDER BY created_at, id @bytewise"};

    return LIST(txn, &sql, &approval_row, rows, count, P_TEXT(user_id), P_INT(after));
}

int rl_txn_approvals_by_time(rl_txn_t *txn, const char *session_id, int64_t before_at, const char *before_id, int limit,
                             rl_approval_row_t **rows, size_t *count)
{
    static const rl_sql_t sql = {APPROVAL_SELECT " WHERE session_id = ?1 AND (created_at < ?2"
                                                 " OR (created_at = ?2 AND id @bytewise < ?3))"
                                                 " ORDER BY created_at DESC, id @bytewise DESC LIMIT ?4"};

    return LIST(txn, &sql, &approval_row, rows, count, P_TEXT(session_id), P_INT(before_at), P_TEXT(before_id),
                P_INT32(limit));
}

int rl_txn_approvals_due(rl_txn_t *txn, int64_t at, int limit, rl_approval_row_t **rows, size_t *count)
{
    /*
     * The expiry sweep writes these back. A row that another transaction
     * resolved meanwhile no longer matches (PostgreSQL checks the condition
     * again on the row it locks).
     */
    static const rl_sql_t sql = {APPROVAL_SELECT " WHERE state = 'pending' AND expires_at <= ?"
                                                 " ORDER BY expires_at, id @bytewise LIMIT ?",
                                 SKIP_LOCKED};

    return LIST(txn, &sql, &approval_row, rows, count, P_INT(at), P_INT32(limit));
}

/* ---- device capability requests ------------------------------------------------------------------ */

#define CAPABILITY_SELECT "SELECT " RL_ROW_COLUMNS(RL_ROW_CAPABILITY) " FROM capability_requests"

int rl_txn_capability_insert(rl_txn_t *txn, const rl_capability_row_t *row)
{
    static const rl_sql_t sql = {RL_ROW_INSERT("capability_requests", RL_ROW_CAPABILITY)};

    return rl_sql__insert(txn, &sql, &capability_row, row);
}

int rl_txn_capability_get(rl_txn_t *txn, const char *id, rl_capability_row_t *out)
{
    /* An answer writes the row it reads: the first answer wins. */
    static const rl_sql_t sql = {CAPABILITY_SELECT " WHERE id = ?", FOR_UPDATE};

    return GET(txn, &sql, &capability_row, out, P_TEXT(id));
}

int rl_txn_capability_update(rl_txn_t *txn, const rl_capability_row_t *row)
{
    static const rl_sql_t sql = {"UPDATE capability_requests SET state = ?, answer = ?, answered_at = ? WHERE id = ?"};

    return WRITE_ONE(txn, &sql, P_TEXT(row->state), P_TEXT(row->answer), P_TIME(row->answered_at), P_TEXT(row->id));
}

int rl_txn_capabilities_pending_of_user(rl_txn_t *txn, const char *user_id, int64_t after, rl_capability_row_t **rows,
                                        size_t *count)
{
    static const rl_sql_t sql = {CAPABILITY_SELECT " WHERE user_id = ? AND state = 'pending' AND expires_at > ?"
                                                   " ORDER BY created_at, id @bytewise"};

    return LIST(txn, &sql, &capability_row, rows, count, P_TEXT(user_id), P_INT(after));
}

int rl_txn_capabilities_due(rl_txn_t *txn, int64_t at, int limit, rl_capability_row_t **rows, size_t *count)
{
    /* As approvals_due: the sweep takes the rows no other node is answering or expiring right now. */
    static const rl_sql_t sql = {CAPABILITY_SELECT " WHERE state = 'pending' AND expires_at <= ?"
                                                   " ORDER BY expires_at, id @bytewise LIMIT ?",
                                 SKIP_LOCKED};

    return LIST(txn, &sql, &capability_row, rows, count, P_INT(at), P_INT32(limit));
}

/* ---- grants ----------------------------------------------------------------------------------------- */

#define GRANT_SELECT "SELECT " RL_ROW_COLUMNS(RL_ROW_GRANT) " FROM grants"

int rl_txn_grant_insert_ignore(rl_txn_t *txn, const rl_grant_row_t *row)
{
    static const rl_sql_t sql = {RL_ROW_INSERT("grants", RL_ROW_GRANT)};

    return rl_sql__insert_ignore(txn, &sql, &grant_row, row);
}

int rl_txn_grants_of(rl_txn_t *txn, const char *installation_id, const char *action, rl_grant_row_t **rows,
                     size_t *count)
{
    static const rl_sql_t sql = {GRANT_SELECT " WHERE installation_id = ? AND action = ? ORDER BY created_at"};

    return LIST(txn, &sql, &grant_row, rows, count, P_TEXT(installation_id), P_TEXT(action));
}

int rl_txn_grants_of_installation(rl_txn_t *txn, const char *installation_id, rl_grant_row_t **rows, size_t *count)
{
    static const rl_sql_t sql = {GRANT_SELECT " WHERE installation_id = ?"
                                              " ORDER BY created_at, action @bytewise, scope @bytewise,"
                                              " scope_value @bytewise"};

    return LIST(txn, &sql, &grant_row, rows, count, P_TEXT(installation_id));
}

int rl_txn_grant_delete(rl_txn_t *txn, const rl_grant_row_t *row)
{
    static const rl_sql_t sql = {
        "DELETE FROM grants WHERE installation_id = ? AND action = ? AND scope = ? AND scope_value = ?"};

    return WRITE_ONE(txn, &sql, P_TEXT(row->installation_id), P_TEXT(row->action), P_TEXT(row->scope),
                     P_TEXT(row->scope_value));
}

/* ---- the update queue ---------------------------------------------------------------------------- */

int rl_txn_update_append(rl_txn_t *txn, rl_update_row_t *row)
{
    /* The counter's row stays locked until the commit: two nodes never issue the same id. */
    static const rl_sql_t counter_sql = {
        "UPDATE installations SET next_update_id = next_update_id + 1 WHERE id = ? RETURNING next_update_id - 1"};
    static const rl_sql_t insert_sql = {
        "INSERT INTO updates(" RL_ROW_COLUMNS(RL_ROW_UPDATE) ") VALUES (" RL_ROW_MARKS(RL_ROW_UPDATE) ")"};
    int_value_t id;
    int result = GET(txn, &counter_sql, &int_value, &id, P_TEXT(row->installation_id));

    if (result != 0)
        return result;
    row->update_id = id.value;
    return rl_sql__insert(txn, &insert_sql, &update_row, row);
}

int rl_txn_updates_after(rl_txn_t *txn, const char *installation_id, int64_t after_id, int64_t since, int limit,
                         rl_update_row_t **rows, size_t *count)
{
    static const rl_sql_t sql = {
        "SELECT " RL_ROW_COLUMNS(RL_ROW_UPDATE) " FROM updates WHERE installation_id = ?"
                                                " AND update_id > ? AND created_at >= ? ORDER BY update_id LIMIT ?"};

    return LIST(txn, &sql, &update_row, rows, count, P_TEXT(installation_id), P_INT(after_id), P_INT(since),
                P_INT32(limit));
}

int rl_txn_updates_ack(rl_txn_t *txn, const char *installation_id, int64_t up_to)
{
    static const rl_sql_t drop_sql = {"DELETE FROM updates WHERE installation_id = ? AND update_id <= ?"};
    /* The larger of the two: SQLite spells it max(a, b), PostgreSQL greatest(a, b). */
    static const rl_sql_t mark_sql = {"UPDATE installations SET acked_update_id = CASE WHEN acked_update_id > ?1"
                                      " THEN acked_update_id ELSE ?1 END WHERE id = ?2"};
    int result = WRITE(txn, &drop_sql, NULL, P_TEXT(installation_id), P_INT(up_to));

    return result != 0 ? result : WRITE(txn, &mark_sql, NULL, P_INT(up_to), P_TEXT(installation_id));
}

int rl_txn_updates_purge(rl_txn_t *txn, int64_t created_before)
{
    static const rl_sql_t sql = {"DELETE FROM updates WHERE created_at < ?"};

    return WRITE(txn, &sql, NULL, P_INT(created_before));
}

/* ---- attachments --------------------------------------------------------------------------------- */

#define ATTACHMENT_SELECT "SELECT " RL_ROW_COLUMNS(RL_ROW_ATTACHMENT) " FROM attachments"

int rl_txn_attachment_insert(rl_txn_t *txn, const rl_attachment_row_t *row)
{
    static const rl_sql_t sql = {RL_ROW_INSERT("attachments", RL_ROW_ATTACHMENT)};

    return rl_sql__insert(txn, &sql, &attachment_row, row);
}

int rl_txn_attachment_get(rl_txn_t *txn, const char *key, rl_attachment_row_t *out)
{
    static const rl_sql_t sql = {ATTACHMENT_SELECT " WHERE key = ?", FOR_UPDATE};

    return GET(txn, &sql, &attachment_row, out, P_TEXT(key));
}

int rl_txn_attachment_use(rl_txn_t *txn, const char *key, const char *session_id, int64_t now)
{
    static const rl_sql_t use = {"INSERT INTO attachment_uses(key, session_id) VALUES (?, ?) ON CONFLICT DO NOTHING"};
    static const rl_sql_t first = {"UPDATE attachments SET used_at = ? WHERE key = ? AND used_at IS NULL"};
    int result = WRITE(txn, &use, NULL, P_TEXT(key), P_TEXT(session_id));

    return result != 0 ? result : WRITE(txn, &first, NULL, P_INT(now), P_TEXT(key));
}

int rl_txn_attachments_usage(rl_txn_t *txn, const char *user_id, int64_t *bytes)
{
    /* PostgreSQL's SUM of BIGINT is NUMERIC: cast back to an integer. */
    static const rl_sql_t sql = {
        "SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT) FROM attachments WHERE user_id = ? AND doomed_at IS NULL"};
    int_value_t out;
    int result = GET(txn, &sql, &int_value, &out, P_TEXT(user_id));

    if (result == 0)
        *bytes = out.value;
    return result;
}

int rl_txn_attachments_unreferenced(rl_txn_t *txn, int64_t unused_before, int limit, rl_attachment_row_t **rows,
                                    size_t *count)
{
    static const rl_sql_t sql = {"SELECT " RL_ROW_COLUMNS(
        RL_ROW_ATTACHMENT) " FROM ("
                           " SELECT * FROM attachments a WHERE used_at IS NOT NULL AND doomed_at IS NULL"
                           "  AND NOT EXISTS (SELECT 1 FROM attachment_uses u WHERE u.key = a.key)"
                           " UNION ALL"
                           " SELECT * FROM attachments WHERE used_at IS NULL AND doomed_at IS NULL"
                           "  AND created_at < ?) x"
                           " ORDER BY created_at, key @bytewise LIMIT ?"};

    return LIST(txn, &sql, &attachment_row, rows, count, P_INT(unused_before), P_INT32(limit));
}

int rl_txn_attachment_doom(rl_txn_t *txn, const char *key, int64_t now)
{
    static const rl_sql_t sql = {"UPDATE attachments SET doomed_at = ? WHERE key = ? AND doomed_at IS NULL"};

    return WRITE_ONE(txn, &sql, P_INT(now), P_TEXT(key));
}

int rl_txn_attachments_doomed(rl_txn_t *txn, int limit, rl_attachment_row_t **rows, size_t *count)
{
    static const rl_sql_t sql = {ATTACHMENT_SELECT " WHERE doomed_at IS NOT NULL"
                                                   " ORDER BY doomed_at, key @bytewise LIMIT ?"};

    return LIST(txn, &sql, &attachment_row, rows, count, P_INT32(limit));
}

int rl_txn_attachment_delete(rl_txn_t *txn, const char *key)
{
    static const rl_sql_t uses = {"DELETE FROM attachment_uses WHERE key = ?"};
    static const rl_sql_t row = {"DELETE FROM attachments WHERE key = ? AND doomed_at IS NOT NULL"};
    int result = WRITE_ONE(txn, &row, P_TEXT(key));

    return result != 0 ? result : WRITE(txn, &uses, NULL, P_TEXT(key));
}

/* ---- secrets ------------------------------------------------------------------------------------- */

int rl_txn_secret_insert_ignore(rl_txn_t *txn, const char *name, const char *value, int64_t created_at)
{
    static const rl_sql_t sql = {
        "INSERT INTO secrets(name, value, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING"};

    return WRITE(txn, &sql, NULL, P_TEXT(name), P_TEXT(value), P_INT(created_at));
}

int rl_txn_secret_get(rl_txn_t *txn, const char *name, const char **value)
{
    static const rl_sql_t sql = {"SELECT value FROM secrets WHERE name = ?", FOR_UPDATE};
    text_value_t out;
    int result = GET(txn, &sql, &text_value, &out, P_TEXT(name));

    if (result == 0)
        *value = out.value;
    return result;
}

/* ---- the web client: sign-in codes and push subscriptions ---------------------------------------- */

int rl_txn_login_code_insert(rl_txn_t *txn, const rl_login_code_row_t *row)
{
    static const rl_sql_t sql = {RL_ROW_INSERT("login_codes", RL_ROW_LOGIN_CODE)};

    return rl_sql__insert(txn, &sql, &login_code_row, row);
}

int rl_txn_login_code_get(rl_txn_t *txn, const char *code_hash, rl_login_code_row_t *out)
{
    static const rl_sql_t sql = {"SELECT " RL_ROW_COLUMNS(RL_ROW_LOGIN_CODE) " FROM login_codes WHERE code_hash = ?",
                                 FOR_UPDATE};

    return GET(txn, &sql, &login_code_row, out, P_TEXT(code_hash));
}

int rl_txn_login_code_delete(rl_txn_t *txn, const char *code_hash)
{
    static const rl_sql_t sql = {"DELETE FROM login_codes WHERE code_hash = ?"};

    return WRITE_ONE(txn, &sql, P_TEXT(code_hash));
}

int rl_txn_login_codes_purge(rl_txn_t *txn, int64_t expired_before)
{
    static const rl_sql_t sql = {"DELETE FROM login_codes WHERE expires_at < ?"};

    return WRITE(txn, &sql, NULL, P_INT(expired_before));
}

#define PUSH_SUBSCRIPTION_SELECT "SELECT " RL_ROW_COLUMNS(RL_ROW_PUSH_SUBSCRIPTION) " FROM push_subscriptions"

int rl_txn_push_subscription_insert(rl_txn_t *txn, const rl_push_subscription_row_t *row)
{
    static const rl_sql_t sql = {RL_ROW_INSERT("push_subscriptions", RL_ROW_PUSH_SUBSCRIPTION)};

    return rl_sql__insert(txn, &sql, &push_subscription_row, row);
}

int rl_txn_push_subscription_get(rl_txn_t *txn, const char *endpoint, rl_push_subscription_row_t *out)
{
    static const rl_sql_t sql = {PUSH_SUBSCRIPTION_SELECT " WHERE endpoint = ?", FOR_UPDATE};

    return GET(txn, &sql, &push_subscription_row, out, P_TEXT(endpoint));
}

int rl_txn_push_subscription_delete(rl_txn_t *txn, const char *endpoint)
{
    static const rl_sql_t sql = {"DELETE FROM push_subscriptions WHERE endpoint = ?"};

    return WRITE_ONE(txn, &sql, P_TEXT(endpoint));
}

int rl_txn_push_subscriptions_of_user(rl_txn_t *txn, const char *user_id, rl_push_subscription_row_t **rows,
                                      size_t *count)
{
    static const rl_sql_t sql = {PUSH_SUBSCRIPTION_SELECT " WHERE user_id = ? ORDER BY created_at, endpoint @bytewise"};

    return LIST(txn, &sql, &push_subscription_row, rows, count, P_TEXT(user_id));
}

/* ---- end-to-end encryption (issue 26): devices, confirmations, wrapped keys, agent files --------- */

int rl_txn_pairing_by_code_any(rl_txn_t *txn, const char *code_hash, rl_pairing_row_t *out)
{
    static const rl_sql_t sql = {PAIRING_SELECT " WHERE code_hash = ? ORDER BY created_at DESC LIMIT 1"};

    return GET(txn, &sql, &pairing_row, out, P_TEXT(code_hash));
}

#define DEVICE_SELECT "SELECT " RL_ROW_COLUMNS(RL_ROW_DEVICE) " FROM devices"

int rl_txn_device_insert(rl_txn_t *txn, const rl_device_row_t *row)
{
    static const rl_sql_t sql = {RL_ROW_INSERT("devices", RL_ROW_DEVICE)};

    return rl_sql__insert(txn, &sql, &device_row, row);
}

int rl_txn_device_get(rl_txn_t *txn, const char *id, rl_device_row_t *out)
{
    static const rl_sql_t sql = {DEVICE_SELECT " WHERE id = ?", FOR_UPDATE};

    return GET(txn, &sql, &device_row, out, P_TEXT(id));
}

int rl_txn_device_update(rl_txn_t *txn, const rl_device_row_t *row)
{
    static const rl_sql_t sql = {"UPDATE devices SET label = ?, pubkey = ?, revoked_at = ? WHERE id = ?"};

    return WRITE_ONE(txn, &sql, P_TEXT(row->label), P_TEXT(row->pubkey), P_TIME(row->revoked_at), P_TEXT(row->id));
}

int rl_txn_devices_of_user(rl_txn_t *txn, const char *user_id, rl_device_row_t **rows, size_t *count)
{
    static const rl_sql_t sql = {DEVICE_SELECT " WHERE user_id = ? AND revoked_at IS NULL"
                                               " ORDER BY created_at, id @bytewise"};

    return LIST(txn, &sql, &device_row, rows, count, P_TEXT(user_id));
}

int rl_txn_confirmation_put(rl_txn_t *txn, const char *device_id, const char *bridge_device_id, int64_t at)
{
    static const rl_sql_t sql = {"INSERT INTO device_confirmations(device_id, bridge_device_id, at) VALUES (?, ?, ?)"
                                 " ON CONFLICT DO NOTHING"};

    return WRITE(txn, &sql, NULL, P_TEXT(device_id), P_TEXT(bridge_device_id), P_INT(at));
}

int rl_txn_confirmation_get(rl_txn_t *txn, const char *device_id, const char *bridge_device_id)
{
    static const rl_sql_t sql = {"SELECT 1 FROM device_confirmations WHERE device_id = ? AND bridge_device_id = ?"};
    int_value_t out;

    return GET(txn, &sql, &int_value, &out, P_TEXT(device_id), P_TEXT(bridge_device_id));
}

int rl_txn_confirmations_delete(rl_txn_t *txn, const char *device_id)
{
    static const rl_sql_t sql = {"DELETE FROM device_confirmations WHERE device_id = ?1 OR bridge_device_id = ?1"};

    return WRITE(txn, &sql, NULL, P_TEXT(device_id));
}

int rl_txn_recipient_put(rl_txn_t *txn, const rl_recipient_row_t *row)
{
    static const rl_sql_t sql = {
        "INSERT INTO session_recipients(" RL_ROW_COLUMNS(RL_ROW_RECIPIENT) ") VALUES (" RL_ROW_MARKS(
            RL_ROW_RECIPIENT) ") ON CONFLICT (session_id, device_id) DO UPDATE SET"
                              " wrapped_session_key = excluded.wrapped_session_key,"
                              " wrapped_by_device_id = excluded.wrapped_by_device_id, created_at = excluded.created_at,"
                              " grant_sig = excluded.grant_sig"};

    return rl_sql__insert_ignore(txn, &sql, &recipient_row, row);
}

int rl_txn_recipient_get(rl_txn_t *txn, const char *session_id, const char *device_id)
{
    static const rl_sql_t sql = {"SELECT 1 FROM session_recipients WHERE session_id = ? AND device_id = ?"};
    int_value_t out;

    return GET(txn, &sql, &int_value, &out, P_TEXT(session_id), P_TEXT(device_id));
}

int rl_txn_recipients_delete(rl_txn_t *txn, const char *device_id)
{
    static const rl_sql_t sql = {"DELETE FROM session_recipients WHERE device_id = ?"};

    return WRITE(txn, &sql, NULL, P_TEXT(device_id));
}

int rl_txn_recipients_of_device(rl_txn_t *txn, const char *device_id, int64_t since, rl_recipient_row_t **rows,
                                size_t *count)
{
    static const rl_sql_t sql = {"SELECT " RL_ROW_COLUMNS(
        RL_ROW_RECIPIENT) " FROM session_recipients"
                          " WHERE device_id = ? AND created_at >= ? ORDER BY created_at, session_id @bytewise"};

    return LIST(txn, &sql, &recipient_row, rows, count, P_TEXT(device_id), P_INT(since));
}

int rl_txn_agent_file_put(rl_txn_t *txn, const rl_agent_file_row_t *row)
{
    static const rl_sql_t sql = {
        "INSERT INTO session_agent_files(" RL_ROW_COLUMNS(RL_ROW_AGENT_FILE) ") VALUES (" RL_ROW_MARKS(
            RL_ROW_AGENT_FILE) ") ON CONFLICT (session_id, path_blind_idx) DO UPDATE SET tool = excluded.tool,"
                               " mime = excluded.mime, path_ct = excluded.path_ct,"
                               " display_name_ct = excluded.display_name_ct, size_bytes = excluded.size_bytes,"
                               " updated_at = excluded.updated_at"};

    return rl_sql__insert_ignore(txn, &sql, &agent_file_row, row);
}

int rl_txn_agent_files_of_session(rl_txn_t *txn, const char *session_id, rl_agent_file_row_t **rows, size_t *count)
{
    static const rl_sql_t sql = {"SELECT " RL_ROW_COLUMNS(
        RL_ROW_AGENT_FILE) " FROM session_agent_files"
                           " WHERE session_id = ? ORDER BY updated_at DESC, path_blind_idx @bytewise"};

    return LIST(txn, &sql, &agent_file_row, rows, count, P_TEXT(session_id));
}
