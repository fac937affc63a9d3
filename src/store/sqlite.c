/*
 * The embedded SQLite backend: plain storage of the relay's rows.
 *
 * One connection, used by one thread (the store's worker), WAL with
 * synchronous=NORMAL: a commit is a write(2) into the WAL and no fsync, which
 * is durable against a crash of the process (the bar is kill -9), not against
 * power loss. Checkpoints (the only fsyncs) run on a background thread with
 * a connection of its own, so that a commit never waits for the disk; the
 * thread also keeps the WAL bounded (checkpoint_main). The
 * write lock is taken at begin (BEGIN IMMEDIATE): every transaction is the
 * only writer, so a row read in it cannot change before the same
 * transaction writes.
 *
 * Nothing here knows a rule of the relay; docs/internals/store.md says what
 * each function must do for any backend.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/error.h"
#include "common/log.h"
#include "store/backends.h"
#include "store/sqlite.h"

#define STMT_CACHE 128

struct sqlite_txn {
    rl_txn_t base;
    sqlite3 *db;
    char *path;
    struct {
        const char *sql;
        sqlite3_stmt *stmt;
    } cache[STMT_CACHE];
    size_t ncache;
    pthread_t checkpointer;
    int checkpointer_running;
    int wal_told;               /* writer only: the WAL's frames when the checkpointer was last woken */
    pthread_mutex_t restarting; /* held by the checkpointer while it restarts the WAL: no write begins */
    int wal_frames;             /* under lock: the WAL's frames after the last commit */
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int stopping;
};

/* Each migration moves the schema one version up; they run in order, once, inside a transaction. */
static const char *const migrations[] = {
    /* 1: every table of the relay, even where later features fill them. */
    "CREATE TABLE users ("
    "  id TEXT PRIMARY KEY,"
    "  created_at INTEGER NOT NULL);"
    "CREATE TABLE installations ("
    "  id TEXT PRIMARY KEY,"
    "  user_id TEXT NOT NULL REFERENCES users(id),"
    "  token_hash TEXT,"
    "  token_env TEXT NOT NULL DEFAULT 'live',"
    "  connector_type TEXT NOT NULL,"
    "  host_label TEXT NOT NULL,"
    "  custom_display_name TEXT,"
    "  custom_emoji TEXT,"
    "  state TEXT NOT NULL DEFAULT 'live',"
    "  manifest TEXT,"
    "  next_update_id INTEGER NOT NULL DEFAULT 1,"
    "  acked_update_id INTEGER NOT NULL DEFAULT 0,"
    "  created_at INTEGER NOT NULL,"
    "  revoked_at INTEGER);"
    "CREATE INDEX installations_user ON installations(user_id);"
    "CREATE TABLE pairings ("
    "  poll_hash TEXT PRIMARY KEY,"
    "  code_hash TEXT NOT NULL,"
    "  installation_id TEXT NOT NULL,"
    "  connector_type TEXT NOT NULL,"
    "  host_label TEXT NOT NULL,"
    "  state TEXT NOT NULL,"
    "  user_id TEXT,"
    "  created_at INTEGER NOT NULL,"
    "  expires_at INTEGER NOT NULL,"
    "  claimed_at INTEGER);"
    "CREATE UNIQUE INDEX pairings_live_code ON pairings(code_hash) WHERE state = 'pending';"
    "CREATE TABLE sessions ("
    "  id TEXT PRIMARY KEY,"
    "  user_id TEXT NOT NULL REFERENCES users(id),"
    "  installation_id TEXT NOT NULL REFERENCES installations(id),"
    "  title TEXT,"
    "  state TEXT NOT NULL DEFAULT 'active',"
    "  created_at INTEGER NOT NULL,"
    "  updated_at INTEGER NOT NULL,"
    "  deleted_at INTEGER);"
    "CREATE INDEX sessions_user ON sessions(user_id);"
    "CREATE TABLE interactions ("
    "  id TEXT PRIMARY KEY,"
    "  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
    "  created_at INTEGER NOT NULL);"
    "CREATE TABLE messages ("
    "  id TEXT PRIMARY KEY,"
    "  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
    "  interaction_id TEXT,"
    "  role TEXT NOT NULL,"
    "  text TEXT NOT NULL,"
    "  attachments TEXT,"
    "  reply_to TEXT,"
    "  usage TEXT,"
    "  finish_reason TEXT,"
    "  state TEXT NOT NULL,"
    "  created_at INTEGER NOT NULL,"
    "  finalized_at INTEGER);"
    "CREATE INDEX messages_session ON messages(session_id, created_at);"
    "CREATE TABLE approvals ("
    "  id TEXT PRIMARY KEY,"
    "  installation_id TEXT NOT NULL,"
    "  session_id TEXT NOT NULL,"
    "  interaction_id TEXT NOT NULL,"
    "  request TEXT NOT NULL,"
    "  state TEXT NOT NULL,"
    "  decision TEXT,"
    "  scope TEXT,"
    "  scope_value TEXT,"
    "  created_at INTEGER NOT NULL,"
    "  expires_at INTEGER NOT NULL,"
    "  resolved_at INTEGER);"
    "CREATE TABLE grants ("
    "  installation_id TEXT NOT NULL,"
    "  action TEXT NOT NULL,"
    "  scope TEXT NOT NULL,"
    "  scope_value TEXT NOT NULL,"
    "  created_at INTEGER NOT NULL,"
    "  PRIMARY KEY (installation_id, action, scope, scope_value));"
    "CREATE TABLE idempotency ("
    "  owner TEXT NOT NULL,"
    "  scope TEXT NOT NULL,"
    "  key TEXT NOT NULL,"
    "  body_hash TEXT NOT NULL,"
    "  response TEXT NOT NULL,"
    "  created_at INTEGER NOT NULL,"
    "  PRIMARY KEY (owner, scope, key));"
    "CREATE TABLE updates ("
    "  installation_id TEXT NOT NULL,"
    "  update_id INTEGER NOT NULL,"
    "  type TEXT NOT NULL,"
    "  session_id TEXT,"
    "  interaction_id TEXT,"
    "  payload TEXT NOT NULL,"
    "  created_at INTEGER NOT NULL,"
    "  PRIMARY KEY (installation_id, update_id));",
    /* 2: uploaded attachments, and the index that pages a session's history. */
    "CREATE TABLE attachments ("
    "  key TEXT PRIMARY KEY,"
    "  user_id TEXT NOT NULL,"
    "  mime TEXT NOT NULL,"
    "  size INTEGER NOT NULL,"
    "  name TEXT,"
    "  created_at INTEGER NOT NULL);"
    "CREATE INDEX sessions_deleted ON sessions(deleted_at) WHERE deleted_at IS NOT NULL;"
    "CREATE INDEX updates_created ON updates(created_at);",
    /* 3: streamed messages as append-only deltas, task state, approval owners. */
    "ALTER TABLE messages ADD COLUMN placeholder INTEGER NOT NULL DEFAULT 0;"
    "CREATE TABLE message_deltas ("
    "  message_id TEXT NOT NULL,"
    "  seq INTEGER NOT NULL,"
    "  delta TEXT NOT NULL,"
    "  PRIMARY KEY (message_id, seq));"
    "CREATE TABLE tasks ("
    "  installation_id TEXT NOT NULL,"
    "  task_id TEXT NOT NULL,"
    "  session_id TEXT NOT NULL,"
    "  interaction_id TEXT NOT NULL,"
    "  kind TEXT,"
    "  name TEXT,"
    "  status TEXT NOT NULL,"
    "  status_label TEXT,"
    "  created_at INTEGER NOT NULL,"
    "  updated_at INTEGER NOT NULL,"
    "  PRIMARY KEY (installation_id, task_id));"
    "ALTER TABLE approvals ADD COLUMN user_id TEXT;"
    "CREATE INDEX approvals_pending ON approvals(expires_at) WHERE state = 'pending';"
    "CREATE INDEX idempotency_created ON idempotency(created_at);",
    /*
     * 4: the two tables written on every streamed delta are clustered on
     * their keys, so that an insert touches one B-tree instead of a table
     * and its key index (half the pages each commit writes to the WAL).
     */
    "CREATE TABLE message_deltas_new ("
    "  message_id TEXT NOT NULL,"
    "  seq INTEGER NOT NULL,"
    "  delta TEXT NOT NULL,"
    "  PRIMARY KEY (message_id, seq)) WITHOUT ROWID;"
    "INSERT INTO message_deltas_new SELECT message_id, seq, delta FROM message_deltas;"
    "DROP TABLE message_deltas;"
    "ALTER TABLE message_deltas_new RENAME TO message_deltas;"
    "CREATE TABLE idempotency_new ("
    "  owner TEXT NOT NULL,"
    "  scope TEXT NOT NULL,"
    "  key TEXT NOT NULL,"
    "  body_hash TEXT NOT NULL,"
    "  response TEXT NOT NULL,"
    "  created_at INTEGER NOT NULL,"
    "  PRIMARY KEY (owner, scope, key)) WITHOUT ROWID;"
    "INSERT INTO idempotency_new SELECT owner, scope, key, body_hash, response, created_at FROM idempotency;"
    "DROP TABLE idempotency;"
    "ALTER TABLE idempotency_new RENAME TO idempotency;"
    "CREATE INDEX idempotency_created ON idempotency(created_at);",
    /*
     * 5: a delta's idempotency key lives in its own row instead of a row of
     * its own in `idempotency` (one B-tree insert per delta, not two); when
     * the message ends, its keys move to one `delta_keys` row per message,
     * kept as long as other idempotency records.
     */
    "ALTER TABLE message_deltas ADD COLUMN key TEXT;"
    "ALTER TABLE message_deltas ADD COLUMN body_hash TEXT;"
    "CREATE TABLE delta_keys ("
    "  message_id TEXT PRIMARY KEY,"
    "  keys TEXT NOT NULL,"
    "  created_at INTEGER NOT NULL) WITHOUT ROWID;"
    "CREATE INDEX delta_keys_created ON delta_keys(created_at);",
    /*
     * 6: a batch writes one row per message, not per delta: the row holds
     * the deltas of seq..seq_last joined, and their keys as a JSON array of
     * [key, body hash] pairs (rows of schema 5 keep key and body_hash).
     */
    "ALTER TABLE message_deltas ADD COLUMN seq_last INTEGER;"
    "ALTER TABLE message_deltas ADD COLUMN keys TEXT;",
    /*
     * 7: every streamed-delta row in the shape of schema 6 (the rows of
     * schema 5 carried one key each in key and body_hash), so that the
     * backend reads one shape. Deltas stored before schema 5 keep their keys
     * in `idempotency`.
     */
    "UPDATE message_deltas SET keys = json_array(json_array(key, body_hash)) WHERE keys IS NULL AND key IS NOT NULL;"
    "UPDATE message_deltas SET keys = '[]' WHERE keys IS NULL;"
    "UPDATE message_deltas SET seq_last = seq WHERE seq_last IS NULL;",
    /* 8: the messages still streaming, for the sweep that ends those left open past their window. */
    "CREATE INDEX messages_streaming ON messages(created_at) WHERE state = 'streaming';",
    /* 9: the secrets every node of a relay shares: the token-signing and URL-signing keys. */
    "CREATE TABLE secrets ("
    "  name TEXT PRIMARY KEY,"
    "  value TEXT NOT NULL,"
    "  created_at INTEGER NOT NULL) WITHOUT ROWID;",
    /*
     * 10: the web client: sign-in codes (their SHA-256, single use, short
     * lived) and Web Push subscriptions (the keys the messages are
     * encrypted for must be kept as they are).
     */
    "CREATE TABLE login_codes ("
    "  code_hash TEXT PRIMARY KEY,"
    "  user_id TEXT NOT NULL,"
    "  created_at INTEGER NOT NULL,"
    "  expires_at INTEGER NOT NULL);"
    "CREATE INDEX login_codes_expires ON login_codes(expires_at);"
    "CREATE TABLE push_subscriptions ("
    "  endpoint TEXT PRIMARY KEY,"
    "  user_id TEXT NOT NULL REFERENCES users(id),"
    "  p256dh TEXT NOT NULL,"
    "  auth TEXT NOT NULL,"
    "  created_at INTEGER NOT NULL);"
    "CREATE INDEX push_subscriptions_user ON push_subscriptions(user_id, created_at);",
    /*
     * 11: an approval id is unique per installation, not across the relay
     * (issue 11): one installation's ids neither block nor reveal another's.
     * A user's decision finds the approval by (user_id, id).
     */
    "CREATE TABLE approvals_new ("
    "  id TEXT NOT NULL,"
    "  installation_id TEXT NOT NULL,"
    "  user_id TEXT,"
    "  session_id TEXT NOT NULL,"
    "  interaction_id TEXT NOT NULL,"
    "  request TEXT NOT NULL,"
    "  state TEXT NOT NULL,"
    "  decision TEXT,"
    "  scope TEXT,"
    "  scope_value TEXT,"
    "  created_at INTEGER NOT NULL,"
    "  expires_at INTEGER NOT NULL,"
    "  resolved_at INTEGER,"
    "  PRIMARY KEY (installation_id, id));"
    "INSERT INTO approvals_new(id, installation_id, user_id, session_id, interaction_id, request, state, decision,"
    "  scope, scope_value, created_at, expires_at, resolved_at)"
    "  SELECT id, installation_id, user_id, session_id, interaction_id, request, state, decision, scope, scope_value,"
    "  created_at, expires_at, resolved_at FROM approvals;"
    "DROP TABLE approvals;"
    "ALTER TABLE approvals_new RENAME TO approvals;"
    "CREATE INDEX approvals_pending ON approvals(expires_at) WHERE state = 'pending';"
    "CREATE INDEX approvals_of_user ON approvals(user_id, id);",
    /*
     * 12: attachments go when nothing references them any more (issue 11):
     * which sessions use each one (kept with the session, gone with its
     * purge), when it was first used, and when it was marked for removal
     * (its file is unlinked before the row goes). The uses of messages
     * stored before are filled in from their attachments.
     */
    "ALTER TABLE attachments ADD COLUMN used_at INTEGER;"
    "ALTER TABLE attachments ADD COLUMN doomed_at INTEGER;"
    "CREATE TABLE attachment_uses ("
    "  key TEXT NOT NULL,"
    "  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
    "  PRIMARY KEY (key, session_id)) WITHOUT ROWID;"
    "CREATE INDEX attachment_uses_session ON attachment_uses(session_id);"
    "INSERT OR IGNORE INTO attachment_uses(key, session_id)"
    "  SELECT json_extract(j.value, '$.key'), m.session_id FROM messages m, json_each(m.attachments) j"
    "  WHERE m.attachments IS NOT NULL AND json_valid(m.attachments)"
    "  AND json_extract(j.value, '$.key') IN (SELECT key FROM attachments);"
    "UPDATE attachments SET used_at = created_at WHERE key IN (SELECT key FROM attachment_uses);"
    "CREATE INDEX attachments_of_user ON attachments(user_id);"
    "CREATE INDEX attachments_unused ON attachments(created_at) WHERE used_at IS NULL AND doomed_at IS NULL;"
    "CREATE INDEX attachments_used ON attachments(used_at) WHERE used_at IS NOT NULL AND doomed_at IS NULL;"
    "CREATE INDEX attachments_doomed ON attachments(doomed_at) WHERE doomed_at IS NOT NULL;",
    /*
     * 13: a session's timeline (issue 22): tasks keep their arguments and
     * results (JSON text) for as long as their session, and go with it
     * instead of a day after their last update; approvals go with their
     * session too. Tasks and approvals are read by session in time order.
     * Those whose session is already gone are dropped now.
     */
    "ALTER TABLE tasks ADD COLUMN args TEXT;"
    "ALTER TABLE tasks ADD COLUMN partial_result TEXT;"
    "ALTER TABLE tasks ADD COLUMN result TEXT;"
    "ALTER TABLE tasks ADD COLUMN error TEXT;"
    "DELETE FROM tasks WHERE session_id NOT IN (SELECT id FROM sessions);"
    "DELETE FROM approvals WHERE session_id NOT IN (SELECT id FROM sessions);"
    "CREATE INDEX tasks_session ON tasks(session_id, created_at, task_id);"
    "CREATE INDEX approvals_session ON approvals(session_id, created_at, id);",
    /*
     * 14: device capability requests (issue 28), kept like approvals: by
     * the relay's id, pending ones by user and by expiry for the sweep.
     */
    "CREATE TABLE capability_requests ("
    "  id TEXT PRIMARY KEY,"
    "  installation_id TEXT NOT NULL,"
    "  user_id TEXT NOT NULL,"
    "  session_id TEXT NOT NULL,"
    "  interaction_id TEXT NOT NULL,"
    "  capability TEXT NOT NULL,"
    "  request TEXT NOT NULL,"
    "  state TEXT NOT NULL,"
    "  answer TEXT,"
    "  created_at INTEGER NOT NULL,"
    "  expires_at INTEGER NOT NULL,"
    "  answered_at INTEGER);"
    "CREATE INDEX capability_requests_pending ON capability_requests(expires_at) WHERE state = 'pending';"
    "CREATE INDEX capability_requests_of_user ON capability_requests(user_id, created_at);"
    "CREATE INDEX capability_requests_session ON capability_requests(session_id);",
    /*
     * 15: end-to-end encryption (issue 26): devices (public keys), which
     * bridges each client device confirmed, the session keys wrapped for
     * each device, the files agents touched (by blind index); a session's
     * encrypted flag and model, an installation's bridge version.
     */
    "ALTER TABLE sessions ADD COLUMN encrypted INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE sessions ADD COLUMN model TEXT;"
    "ALTER TABLE installations ADD COLUMN bridge_version TEXT;"
    "CREATE TABLE devices ("
    "  id TEXT PRIMARY KEY,"
    "  user_id TEXT NOT NULL,"
    "  installation_id TEXT,"
    "  platform TEXT NOT NULL,"
    "  label TEXT,"
    "  pubkey TEXT NOT NULL,"
    "  created_at INTEGER NOT NULL,"
    "  revoked_at INTEGER);"
    "CREATE INDEX devices_of_user ON devices(user_id, created_at) WHERE revoked_at IS NULL;"
    "CREATE TABLE device_confirmations ("
    "  device_id TEXT NOT NULL,"
    "  bridge_device_id TEXT NOT NULL,"
    "  at INTEGER NOT NULL,"
    "  PRIMARY KEY (device_id, bridge_device_id)) WITHOUT ROWID;"
    "CREATE INDEX device_confirmations_bridge ON device_confirmations(bridge_device_id);"
    "CREATE TABLE session_recipients ("
    "  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
    "  device_id TEXT NOT NULL,"
    "  wrapped_session_key TEXT NOT NULL,"
    "  wrapped_by_device_id TEXT,"
    "  created_at INTEGER NOT NULL,"
    "  PRIMARY KEY (session_id, device_id)) WITHOUT ROWID;"
    "CREATE INDEX session_recipients_device ON session_recipients(device_id, created_at);"
    "CREATE TABLE session_agent_files ("
    "  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
    "  path_blind_idx TEXT NOT NULL,"
    "  tool TEXT NOT NULL,"
    "  size_bytes INTEGER,"
    "  mime TEXT,"
    "  path_ct TEXT NOT NULL,"
    "  display_name_ct TEXT NOT NULL,"
    "  updated_at INTEGER NOT NULL,"
    "  PRIMARY KEY (session_id, path_blind_idx)) WITHOUT ROWID;",
};

/* ---- statements ---------------------------------------------------------------------------------- */

static int exec_sql(sqlite3 *db, const char *sql)
{
    char *errmsg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &errmsg);

    if (rc != SQLITE_OK) {
        rl_log_error("sqlite: %s", errmsg != NULL ? errmsg : sqlite3_errstr(rc));
        sqlite3_free(errmsg);
        return -1;
    }
    return 0;
}

/* A prepared statement for sql, a static text: prepared once, cached by its address, reset for use. */
static sqlite3_stmt *prepare(struct sqlite_txn *t, const char *sql)
{
    sqlite3_stmt *stmt = NULL;
    size_t i;

    for (i = 0; i < t->ncache; ++i) {
        if (t->cache[i].sql == sql) {
            sqlite3_reset(t->cache[i].stmt);
            sqlite3_clear_bindings(t->cache[i].stmt);
            return t->cache[i].stmt;
        }
    }
    if (sqlite3_prepare_v3(t->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, NULL) != SQLITE_OK) {
        rl_log_error("sqlite prepare: %s", sqlite3_errmsg(t->db));
        return NULL;
    }
    if (t->ncache < STMT_CACHE) {
        t->cache[t->ncache].sql = sql;
        t->cache[t->ncache].stmt = stmt;
        ++t->ncache;
    } else {
        rl_log_warn("sqlite: statement cache full");
    }
    return stmt;
}

/*
 * Binds the varargs as types says: 's' a string or NULL, 'I' an int64_t,
 * 'T' an int64_t timestamp where RL_NO_TIME is NULL, 'i' an int, 'b' a
 * (const char *, size_t) pair of bytes taken as text.
 */
static void bind_va(sqlite3_stmt *stmt, const char *types, va_list ap)
{
    int index = 1;

    for (; *types != '\0'; ++types, ++index) {
        switch (*types) {
        case 's': {
            const char *text = va_arg(ap, const char *);
            if (text == NULL)
                sqlite3_bind_null(stmt, index);
            else
                sqlite3_bind_text(stmt, index, text, -1, SQLITE_STATIC);
            break;
        }
        case 'b': {
            const char *bytes = va_arg(ap, const char *);
            size_t len = va_arg(ap, size_t);
            sqlite3_bind_text(stmt, index, bytes, (int)len, SQLITE_STATIC);
            break;
        }
        case 'T': {
            int64_t at = va_arg(ap, int64_t);
            if (at == RL_NO_TIME)
                sqlite3_bind_null(stmt, index);
            else
                sqlite3_bind_int64(stmt, index, at);
            break;
        }
        case 'I':
            sqlite3_bind_int64(stmt, index, va_arg(ap, int64_t));
            break;
        default:
            sqlite3_bind_int(stmt, index, va_arg(ap, int));
            break;
        }
    }
}

static int step_error(struct sqlite_txn *t, int rc)
{
    if ((rc & 0xff) == SQLITE_CONSTRAINT)
        return RL_E_CONFLICT;
    rl_log_error("sqlite step: %s", sqlite3_errmsg(t->db));
    return RL_E_INTERNAL;
}

/* Prepares, binds and steps a write to its end. 0, RL_E_CONFLICT or RL_E_INTERNAL; *changes when asked. */
static int write_rows(struct sqlite_txn *t, int64_t *changes, const char *sql, const char *types, ...)
{
    sqlite3_stmt *stmt = prepare(t, sql);
    va_list ap;
    int rc;

    if (stmt == NULL)
        return RL_E_INTERNAL;
    va_start(ap, types);
    bind_va(stmt, types, ap);
    va_end(ap);
    rc = sqlite3_step(stmt);
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
    if (rc != SQLITE_DONE)
        return step_error(t, rc);
    if (changes != NULL)
        *changes = sqlite3_changes64(t->db);
    return 0;
}

/* As write_rows for a write by key: RL_E_NOT_FOUND when it changed no row. */
static int write_one(struct sqlite_txn *t, const char *sql, const char *types, ...)
{
    sqlite3_stmt *stmt = prepare(t, sql);
    va_list ap;
    int rc;

    if (stmt == NULL)
        return RL_E_INTERNAL;
    va_start(ap, types);
    bind_va(stmt, types, ap);
    va_end(ap);
    rc = sqlite3_step(stmt);
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
    if (rc != SQLITE_DONE)
        return step_error(t, rc);
    return sqlite3_changes(t->db) > 0 ? 0 : RL_E_NOT_FOUND;
}

/* Starts a read: the statement with its parameters bound, or NULL. */
static sqlite3_stmt *query(struct sqlite_txn *t, const char *sql, const char *types, ...)
{
    sqlite3_stmt *stmt = prepare(t, sql);
    va_list ap;

    if (stmt == NULL)
        return NULL;
    va_start(ap, types);
    bind_va(stmt, types, ap);
    va_end(ap);
    return stmt;
}

static void done_with(sqlite3_stmt *stmt)
{
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
}

static const char *col_text(struct sqlite_txn *t, sqlite3_stmt *stmt, int i)
{
    if (sqlite3_column_type(stmt, i) == SQLITE_NULL)
        return NULL;
    return rl_arena_strndup(t->base.arena, (const char *)sqlite3_column_text(stmt, i),
                            (size_t)sqlite3_column_bytes(stmt, i));
}

static int64_t col_time(sqlite3_stmt *stmt, int i)
{
    return sqlite3_column_type(stmt, i) == SQLITE_NULL ? RL_NO_TIME : sqlite3_column_int64(stmt, i);
}

typedef void (*read_row_fn)(struct sqlite_txn *t, sqlite3_stmt *stmt, void *out);

/* One row by key: 0 with *out filled, RL_E_NOT_FOUND, or RL_E_INTERNAL. */
static int read_one(struct sqlite_txn *t, sqlite3_stmt *stmt, read_row_fn read, void *out)
{
    int rc;

    if (stmt == NULL)
        return RL_E_INTERNAL;
    rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW)
        read(t, stmt, out);
    done_with(stmt);
    if (rc == SQLITE_ROW)
        return 0;
    return rc == SQLITE_DONE ? RL_E_NOT_FOUND : step_error(t, rc);
}

/* Every row into an array of elem-sized rows in the arena. */
static int read_all(struct sqlite_txn *t, sqlite3_stmt *stmt, read_row_fn read, size_t elem, void **rows, size_t *count)
{
    size_t capacity = 0;
    char *items = NULL;
    int rc;

    *rows = NULL;
    *count = 0;
    if (stmt == NULL)
        return RL_E_INTERNAL;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        items = rl_arena_grow(t->base.arena, items, *count, &capacity, elem);
        memset(items + *count * elem, 0, elem);
        read(t, stmt, items + *count * elem);
        ++*count;
    }
    done_with(stmt);
    *rows = items;
    return rc == SQLITE_DONE ? 0 : step_error(t, rc);
}

#define TXN(txn) ((struct sqlite_txn *)(txn))

/* ---- transaction control ------------------------------------------------------------------------- */

static int run_static(struct sqlite_txn *t, const char *sql)
{
    sqlite3_stmt *stmt = prepare(t, sql);
    int rc;

    if (stmt == NULL)
        return -1;
    rc = sqlite3_step(stmt);
    sqlite3_reset(stmt);
    if (rc != SQLITE_DONE) {
        rl_log_error("sqlite %s: %s", sql, sqlite3_errmsg(t->db));
        return -1;
    }
    return 0;
}

static const char begin_sql[] = "BEGIN IMMEDIATE";
static const char commit_sql[] = "COMMIT";
static const char savepoint_sql[] = "SAVEPOINT op";
static const char release_sql[] = "RELEASE op";
static const char undo_sql[] = "ROLLBACK TO op";

static int sqlite_begin(rl_txn_t *txn)
{
    struct sqlite_txn *t = TXN(txn);

    /* Yields to a restart of the WAL (checkpoint_main), which would otherwise wait for a gap between batches. */
    pthread_mutex_lock(&t->restarting);
    pthread_mutex_unlock(&t->restarting);
    return run_static(t, begin_sql) == 0 ? 0 : RL_E_INTERNAL;
}

/*
 * The WAL restarts (its next frame is written at its start again) only when a
 * write begins while every frame in it is already copied to the database.
 * Under sustained writes a checkpoint never finds that: new frames arrive
 * while it copies, and the WAL grows without bound (430 MB beside a 118 MB
 * database in a streaming benchmark). The checkpointer thread copies frames
 * as they come (woken every CHECKPOINT_STEP frames, not once a second), and
 * past WAL_FRAMES_MAX it restarts the WAL itself (checkpoint_main).
 *
 * The writer used to truncate the WAL after its commit past WAL_FRAMES_MAX:
 * it then copied up to a second's frames and fsynced them itself, 55-97 ms
 * during which no batch was written (every 1.5 s at 5 000 deltas/s: the
 * streaming p99).
 */
#define WAL_FRAMES_MAX  16384 /* 64 MiB of 4 KiB pages */
#define CHECKPOINT_STEP 1024  /* frames (4 MiB) written between two wake-ups of the checkpointer */

static int on_wal_commit(void *arg, sqlite3 *db, const char *name, int frames)
{
    struct sqlite_txn *t = arg;

    (void)db;
    (void)name;
    if (frames - t->wal_told >= CHECKPOINT_STEP || frames < t->wal_told) {
        t->wal_told = frames;
        pthread_mutex_lock(&t->lock);
        t->wal_frames = frames;
        pthread_cond_signal(&t->wake);
        pthread_mutex_unlock(&t->lock);
    }
    return SQLITE_OK;
}

static int sqlite_commit(rl_txn_t *txn)
{
    return run_static(TXN(txn), commit_sql) == 0 ? 0 : RL_E_INTERNAL;
}

static void sqlite_rollback(rl_txn_t *txn)
{
    if (!sqlite3_get_autocommit(TXN(txn)->db))
        exec_sql(TXN(txn)->db, "ROLLBACK");
}

static int sqlite_savepoint(rl_txn_t *txn)
{
    return run_static(TXN(txn), savepoint_sql) == 0 ? 0 : RL_E_INTERNAL;
}

static void sqlite_release(rl_txn_t *txn, int keep)
{
    if (!keep)
        run_static(TXN(txn), undo_sql);
    run_static(TXN(txn), release_sql);
}

/* ---- users ------------------------------------------------------------------------------------- */

static int sqlite_user_insert_ignore(rl_txn_t *txn, const rl_user_row_t *row)
{
    static const char sql[] = "INSERT OR IGNORE INTO users(id, created_at) VALUES (?, ?)";

    return write_rows(TXN(txn), NULL, sql, "sI", row->id, row->created_at);
}

static void read_user(struct sqlite_txn *t, sqlite3_stmt *stmt, void *out)
{
    rl_user_row_t *row = out;

    row->id = col_text(t, stmt, 0);
    row->created_at = sqlite3_column_int64(stmt, 1);
}

static int sqlite_user_get(rl_txn_t *txn, const char *id, rl_user_row_t *out)
{
    static const char sql[] = "SELECT id, created_at FROM users WHERE id = ?";

    return read_one(TXN(txn), query(TXN(txn), sql, "s", id), read_user, out);
}

/* ---- pairings ---------------------------------------------------------------------------------- */

#define PAIRING_COLUMNS                                                                                                \
    "poll_hash, code_hash, installation_id, connector_type, host_label, state, user_id, created_at, expires_at,"       \
    " claimed_at"

static void read_pairing(struct sqlite_txn *t, sqlite3_stmt *stmt, void *out)
{
    rl_pairing_row_t *row = out;

    row->poll_hash = col_text(t, stmt, 0);
    row->code_hash = col_text(t, stmt, 1);
    row->installation_id = col_text(t, stmt, 2);
    row->connector_type = col_text(t, stmt, 3);
    row->host_label = col_text(t, stmt, 4);
    row->state = col_text(t, stmt, 5);
    row->user_id = col_text(t, stmt, 6);
    row->created_at = sqlite3_column_int64(stmt, 7);
    row->expires_at = sqlite3_column_int64(stmt, 8);
    row->claimed_at = col_time(stmt, 9);
}

static int sqlite_pairing_insert(rl_txn_t *txn, const rl_pairing_row_t *row)
{
    static const char sql[] = "INSERT INTO pairings(" PAIRING_COLUMNS ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

    return write_rows(TXN(txn), NULL, sql, "sssssssIIT", row->poll_hash, row->code_hash, row->installation_id,
                      row->connector_type, row->host_label, row->state, row->user_id, row->created_at, row->expires_at,
                      row->claimed_at);
}

static int sqlite_pairing_by_code(rl_txn_t *txn, const char *code_hash, rl_pairing_row_t *out)
{
    static const char sql[] = "SELECT " PAIRING_COLUMNS " FROM pairings WHERE code_hash = ? AND state = 'pending'";

    return read_one(TXN(txn), query(TXN(txn), sql, "s", code_hash), read_pairing, out);
}

static int sqlite_pairing_by_poll(rl_txn_t *txn, const char *poll_hash, rl_pairing_row_t *out)
{
    static const char sql[] = "SELECT " PAIRING_COLUMNS " FROM pairings WHERE poll_hash = ?";

    return read_one(TXN(txn), query(TXN(txn), sql, "s", poll_hash), read_pairing, out);
}

static int sqlite_pairing_update(rl_txn_t *txn, const rl_pairing_row_t *row)
{
    static const char sql[] = "UPDATE pairings SET state = ?, user_id = ?, claimed_at = ? WHERE poll_hash = ?";

    return write_one(TXN(txn), sql, "ssTs", row->state, row->user_id, row->claimed_at, row->poll_hash);
}

static int sqlite_pairing_delete_lapsed(rl_txn_t *txn, const char *code_hash, int64_t at)
{
    static const char sql[] = "DELETE FROM pairings WHERE code_hash = ? AND state = 'pending' AND expires_at <= ?";

    return write_rows(TXN(txn), NULL, sql, "sI", code_hash, at);
}

static int sqlite_pairings_purge(rl_txn_t *txn, int64_t expired_before)
{
    static const char sql[] = "DELETE FROM pairings WHERE expires_at < ?";

    return write_rows(TXN(txn), NULL, sql, "I", expired_before);
}

/* ---- installations ------------------------------------------------------------------------------- */

#define INSTALLATION_COLUMNS                                                                                           \
    "id, user_id, token_hash, token_env, connector_type, host_label, custom_display_name, custom_emoji, state,"        \
    " manifest, created_at, revoked_at, bridge_version"

static void read_installation(struct sqlite_txn *t, sqlite3_stmt *stmt, void *out)
{
    rl_installation_row_t *row = out;

    row->id = col_text(t, stmt, 0);
    row->user_id = col_text(t, stmt, 1);
    row->token_hash = col_text(t, stmt, 2);
    row->token_env = col_text(t, stmt, 3);
    row->connector_type = col_text(t, stmt, 4);
    row->host_label = col_text(t, stmt, 5);
    row->custom_display_name = col_text(t, stmt, 6);
    row->custom_emoji = col_text(t, stmt, 7);
    row->state = col_text(t, stmt, 8);
    row->manifest = col_text(t, stmt, 9);
    row->created_at = sqlite3_column_int64(stmt, 10);
    row->revoked_at = col_time(stmt, 11);
    row->bridge_version = col_text(t, stmt, 12);
}

static int sqlite_installation_insert(rl_txn_t *txn, const rl_installation_row_t *row)
{
    static const char sql[] =
        "INSERT INTO installations(" INSTALLATION_COLUMNS ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

    return write_rows(TXN(txn), NULL, sql, "ssssssssssITs", row->id, row->user_id, row->token_hash,
                      row->token_env != NULL ? row->token_env : "live", row->connector_type, row->host_label,
                      row->custom_display_name, row->custom_emoji, row->state, row->manifest, row->created_at,
                      row->revoked_at, row->bridge_version);
}

static int sqlite_installation_get(rl_txn_t *txn, const char *id, rl_installation_row_t *out)
{
    static const char sql[] = "SELECT " INSTALLATION_COLUMNS " FROM installations WHERE id = ?";

    return read_one(TXN(txn), query(TXN(txn), sql, "s", id), read_installation, out);
}

static int sqlite_installation_update(rl_txn_t *txn, const rl_installation_row_t *row)
{
    static const char sql[] = "UPDATE installations SET token_hash = ?, token_env = ?, custom_display_name = ?,"
                              " custom_emoji = ?, state = ?, manifest = ?, revoked_at = ?, bridge_version = ? WHERE id = ?";

    return write_one(TXN(txn), sql, "ssssssTss", row->token_hash, row->token_env != NULL ? row->token_env : "live",
                     row->custom_display_name, row->custom_emoji, row->state, row->manifest, row->revoked_at,
                     row->bridge_version, row->id);
}

static int sqlite_installations_of_user(rl_txn_t *txn, const char *user_id, rl_installation_row_t **rows, size_t *count)
{
    static const char sql[] =
        "SELECT " INSTALLATION_COLUMNS " FROM installations WHERE user_id = ? ORDER BY created_at, id";

    return read_all(TXN(txn), query(TXN(txn), sql, "s", user_id), read_installation, sizeof(**rows), (void **)rows,
                    count);
}

/* ---- sessions ---------------------------------------------------------------------------------- */

#define SESSION_COLUMNS                                                                                                \
    "id, user_id, installation_id, title, state, created_at, updated_at, deleted_at, encrypted, model"

static void read_session(struct sqlite_txn *t, sqlite3_stmt *stmt, void *out)
{
    rl_session_row_t *row = out;

    row->id = col_text(t, stmt, 0);
    row->user_id = col_text(t, stmt, 1);
    row->installation_id = col_text(t, stmt, 2);
    row->title = col_text(t, stmt, 3);
    row->state = col_text(t, stmt, 4);
    row->created_at = sqlite3_column_int64(stmt, 5);
    row->updated_at = sqlite3_column_int64(stmt, 6);
    row->deleted_at = col_time(stmt, 7);
    row->encrypted = sqlite3_column_int(stmt, 8) != 0;
    row->model = col_text(t, stmt, 9);
}

static int sqlite_session_insert(rl_txn_t *txn, const rl_session_row_t *row)
{
    static const char sql[] = "INSERT INTO sessions(" SESSION_COLUMNS ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

    return write_rows(TXN(txn), NULL, sql, "sssssIITIs", row->id, row->user_id, row->installation_id, row->title,
                      row->state, row->created_at, row->updated_at, row->deleted_at, (int64_t)row->encrypted,
                      row->model);
}

static int sqlite_session_get(rl_txn_t *txn, const char *id, rl_session_row_t *out)
{
    static const char sql[] = "SELECT " SESSION_COLUMNS " FROM sessions WHERE id = ?";

    return read_one(TXN(txn), query(TXN(txn), sql, "s", id), read_session, out);
}

static int sqlite_session_update(rl_txn_t *txn, const rl_session_row_t *row)
{
    static const char sql[] =
        "UPDATE sessions SET title = ?, state = ?, updated_at = ?, deleted_at = ?, model = ? WHERE id = ?";

    return write_one(TXN(txn), sql, "ssITss", row->title, row->state, row->updated_at, row->deleted_at, row->model,
                     row->id);
}

static int sqlite_sessions_of_user(rl_txn_t *txn, const char *user_id, rl_session_row_t **rows, size_t *count)
{
    static const char sql[] = "SELECT " SESSION_COLUMNS " FROM sessions WHERE user_id = ? AND deleted_at IS NULL"
                              " ORDER BY updated_at DESC, id";

    return read_all(TXN(txn), query(TXN(txn), sql, "s", user_id), read_session, sizeof(**rows), (void **)rows, count);
}

static int sqlite_sessions_deleted_of_user(rl_txn_t *txn, const char *user_id, int64_t deleted_after,
                                           rl_session_row_t **rows, size_t *count)
{
    static const char sql[] = "SELECT " SESSION_COLUMNS " FROM sessions WHERE user_id = ? AND deleted_at > ?"
                              " ORDER BY deleted_at DESC, id";

    return read_all(TXN(txn), query(TXN(txn), sql, "sI", user_id, deleted_after), read_session, sizeof(**rows),
                    (void **)rows, count);
}

static int sqlite_sessions_purge(rl_txn_t *txn, int64_t deleted_before, int64_t *purged)
{
    /* Interactions and messages go with their session (ON DELETE CASCADE); tasks and approvals have no such key. */
    static const char tasks_sql[] = "DELETE FROM tasks WHERE session_id IN"
                                    " (SELECT id FROM sessions WHERE deleted_at IS NOT NULL AND deleted_at <= ?)";
    static const char approvals_sql[] = "DELETE FROM approvals WHERE session_id IN"
                                        " (SELECT id FROM sessions WHERE deleted_at IS NOT NULL AND deleted_at <= ?)";
    static const char sql[] = "DELETE FROM sessions WHERE deleted_at IS NOT NULL AND deleted_at <= ?";
    int result;

    static const char capabilities_sql[] =
        "DELETE FROM capability_requests WHERE session_id IN"
        " (SELECT id FROM sessions WHERE deleted_at IS NOT NULL AND deleted_at <= ?)";
    if ((result = write_rows(TXN(txn), NULL, tasks_sql, "I", deleted_before)) != 0 ||
        (result = write_rows(TXN(txn), NULL, approvals_sql, "I", deleted_before)) != 0 ||
        (result = write_rows(TXN(txn), NULL, capabilities_sql, "I", deleted_before)) != 0)
        return result;
    return write_rows(TXN(txn), purged, sql, "I", deleted_before);
}

/* ---- interactions ------------------------------------------------------------------------------- */

static void read_interaction(struct sqlite_txn *t, sqlite3_stmt *stmt, void *out)
{
    rl_interaction_row_t *row = out;

    row->id = col_text(t, stmt, 0);
    row->session_id = col_text(t, stmt, 1);
    row->created_at = sqlite3_column_int64(stmt, 2);
}

static int sqlite_interaction_insert(rl_txn_t *txn, const rl_interaction_row_t *row)
{
    static const char sql[] = "INSERT INTO interactions(id, session_id, created_at) VALUES (?, ?, ?)";

    return write_rows(TXN(txn), NULL, sql, "ssI", row->id, row->session_id, row->created_at);
}

static int sqlite_interaction_get(rl_txn_t *txn, const char *id, rl_interaction_row_t *out)
{
    static const char sql[] = "SELECT id, session_id, created_at FROM interactions WHERE id = ?";

    return read_one(TXN(txn), query(TXN(txn), sql, "s", id), read_interaction, out);
}

/* ---- messages ---------------------------------------------------------------------------------- */

#define MESSAGE_COLUMNS                                                                                                \
    "id, session_id, interaction_id, role, text, attachments, reply_to, usage, finish_reason, state, created_at,"      \
    " finalized_at, placeholder"

static void read_message(struct sqlite_txn *t, sqlite3_stmt *stmt, void *out)
{
    rl_message_row_t *row = out;

    row->id = col_text(t, stmt, 0);
    row->session_id = col_text(t, stmt, 1);
    row->interaction_id = col_text(t, stmt, 2);
    row->role = col_text(t, stmt, 3);
    row->text = col_text(t, stmt, 4);
    row->attachments = col_text(t, stmt, 5);
    row->reply_to = col_text(t, stmt, 6);
    row->usage = col_text(t, stmt, 7);
    row->finish_reason = col_text(t, stmt, 8);
    row->state = col_text(t, stmt, 9);
    row->created_at = sqlite3_column_int64(stmt, 10);
    row->finalized_at = col_time(stmt, 11);
    row->placeholder = sqlite3_column_int(stmt, 12);
}

static int sqlite_message_insert(rl_txn_t *txn, const rl_message_row_t *row)
{
    static const char sql[] =
        "INSERT INTO messages(" MESSAGE_COLUMNS ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

    return write_rows(TXN(txn), NULL, sql, "ssssssssssITi", row->id, row->session_id, row->interaction_id, row->role,
                      row->text, row->attachments, row->reply_to, row->usage, row->finish_reason, row->state,
                      row->created_at, row->finalized_at, row->placeholder);
}

static int sqlite_message_get(rl_txn_t *txn, const char *id, rl_message_row_t *out)
{
    static const char sql[] = "SELECT " MESSAGE_COLUMNS " FROM messages WHERE id = ?";

    return read_one(TXN(txn), query(TXN(txn), sql, "s", id), read_message, out);
}

static int sqlite_message_update(rl_txn_t *txn, const rl_message_row_t *row)
{
    static const char sql[] = "UPDATE messages SET text = ?, usage = ?, finish_reason = ?, state = ?,"
                              " finalized_at = ?, placeholder = ? WHERE id = ?";

    return write_one(TXN(txn), sql, "ssssTis", row->text, row->usage, row->finish_reason, row->state, row->finalized_at,
                     row->placeholder, row->id);
}

static int sqlite_messages_page(rl_txn_t *txn, const char *session_id, const char *before, int limit,
                                rl_message_row_t **rows, size_t *count)
{
    static const char cursor_sql[] = "SELECT rowid FROM messages WHERE id = ? AND session_id = ?";
    static const char page_sql[] = "SELECT " MESSAGE_COLUMNS " FROM messages WHERE session_id = ? AND rowid < ?"
                                   " ORDER BY rowid DESC LIMIT ?";
    struct sqlite_txn *t = TXN(txn);
    int64_t cursor = INT64_MAX;

    /* Insertion order is the rowid's: the page ends where the cursor message sits. */
    if (before != NULL) {
        sqlite3_stmt *stmt = query(t, cursor_sql, "ss", before, session_id);
        int rc;
        if (stmt == NULL)
            return RL_E_INTERNAL;
        rc = sqlite3_step(stmt);
        if (rc == SQLITE_ROW)
            cursor = sqlite3_column_int64(stmt, 0);
        done_with(stmt);
        if (rc != SQLITE_ROW)
            return rc == SQLITE_DONE ? RL_E_NOT_FOUND : step_error(t, rc);
    }
    return read_all(t, query(t, page_sql, "sIi", session_id, cursor, limit), read_message, sizeof(**rows),
                    (void **)rows, count);
}

static int sqlite_messages_by_time(rl_txn_t *txn, const char *session_id, int64_t before_at, const char *before_id,
                                   int limit, rl_message_row_t **rows, size_t *count)
{
    /* Insertion order is the rowid's; a missing before_id gives -1, below every rowid. */
    static const char sql[] =
        "SELECT " MESSAGE_COLUMNS " FROM messages WHERE session_id = ?1 AND (created_at < ?2 OR (created_at = ?2"
        " AND rowid < coalesce((SELECT rowid FROM messages WHERE id = ?3), -1)))"
        " ORDER BY created_at DESC, rowid DESC LIMIT ?4";

    return read_all(TXN(txn), query(TXN(txn), sql, "sIsi", session_id, before_at, before_id, limit), read_message,
                    sizeof(**rows), (void **)rows, count);
}

static int sqlite_messages_open_before(rl_txn_t *txn, int64_t at, int limit, rl_message_row_t **rows, size_t *count)
{
    static const char sql[] =
        "SELECT m.id, m.session_id, m.interaction_id, m.role, m.text, m.attachments, m.reply_to, m.usage,"
        " m.finish_reason, m.state, m.created_at, m.finalized_at, m.placeholder"
        " FROM messages m LEFT JOIN interactions i ON i.id = m.interaction_id"
        " WHERE m.state = 'streaming' AND coalesce(i.created_at, m.created_at) <= ? ORDER BY m.created_at LIMIT ?";

    return read_all(TXN(txn), query(TXN(txn), sql, "Ii", at, limit), read_message, sizeof(**rows), (void **)rows,
                    count);
}

/* ---- streamed deltas ---------------------------------------------------------------------------- */

static void read_delta_run(struct sqlite_txn *t, sqlite3_stmt *stmt, void *out)
{
    rl_delta_run_row_t *row = out;

    row->message_id = col_text(t, stmt, 0);
    row->seq = sqlite3_column_int64(stmt, 1);
    row->seq_last = sqlite3_column_int64(stmt, 2);
    row->text_len = (size_t)sqlite3_column_bytes(stmt, 3);
    row->text = col_text(t, stmt, 3);
    row->keys = col_text(t, stmt, 4);
}

static int sqlite_delta_run_insert(rl_txn_t *txn, const rl_delta_run_row_t *row)
{
    static const char sql[] = "INSERT OR IGNORE INTO message_deltas(message_id, seq, seq_last, delta, keys)"
                              " VALUES (?, ?, ?, ?, ?)";

    return write_rows(TXN(txn), NULL, sql, "sIIbs", row->message_id, row->seq, row->seq_last, row->text, row->text_len,
                      row->keys);
}

static int sqlite_delta_runs_of(rl_txn_t *txn, const char *message_id, rl_delta_run_row_t **rows, size_t *count)
{
    static const char sql[] =
        "SELECT message_id, seq, seq_last, delta, keys FROM message_deltas WHERE message_id = ? ORDER BY seq";

    return read_all(TXN(txn), query(TXN(txn), sql, "s", message_id), read_delta_run, sizeof(**rows), (void **)rows,
                    count);
}

static void read_int(struct sqlite_txn *t, sqlite3_stmt *stmt, void *out)
{
    *(int64_t *)out = sqlite3_column_int64(stmt, 0);
}

static int sqlite_delta_next_seq(rl_txn_t *txn, const char *message_id, int64_t *next)
{
    static const char sql[] = "SELECT seq_last FROM message_deltas WHERE message_id = ? ORDER BY seq DESC LIMIT 1";
    int64_t last = 0;
    int result = read_one(TXN(txn), query(TXN(txn), sql, "s", message_id), read_int, &last);

    if (result != 0 && result != RL_E_NOT_FOUND)
        return result;
    *next = last + 1;
    return 0;
}

static int sqlite_delta_runs_delete(rl_txn_t *txn, const char *message_id)
{
    static const char sql[] = "DELETE FROM message_deltas WHERE message_id = ?";

    return write_rows(TXN(txn), NULL, sql, "s", message_id);
}

static int sqlite_delta_keys_put(rl_txn_t *txn, const char *message_id, const char *keys, int64_t created_at)
{
    static const char sql[] = "INSERT OR REPLACE INTO delta_keys(message_id, keys, created_at) VALUES (?, ?, ?)";

    return write_rows(TXN(txn), NULL, sql, "ssI", message_id, keys, created_at);
}

struct delta_keys_out {
    const char **keys;
    int64_t *created_at;
};

static void read_text(struct sqlite_txn *t, sqlite3_stmt *stmt, void *out)
{
    *(const char **)out = col_text(t, stmt, 0);
}

static void read_delta_keys(struct sqlite_txn *t, sqlite3_stmt *stmt, void *out)
{
    struct delta_keys_out *row = out;

    *row->keys = col_text(t, stmt, 0);
    *row->created_at = sqlite3_column_int64(stmt, 1);
}

static int sqlite_delta_keys_get(rl_txn_t *txn, const char *message_id, const char **keys, int64_t *created_at)
{
    static const char sql[] = "SELECT keys, created_at FROM delta_keys WHERE message_id = ?";
    struct delta_keys_out out = {keys, created_at};

    return read_one(TXN(txn), query(TXN(txn), sql, "s", message_id), read_delta_keys, &out);
}

static int sqlite_delta_keys_purge(rl_txn_t *txn, int64_t created_before)
{
    static const char sql[] = "DELETE FROM delta_keys WHERE created_at < ?";

    return write_rows(TXN(txn), NULL, sql, "I", created_before);
}

/* ---- idempotency --------------------------------------------------------------------------------- */

#define IDEMPOTENCY_COLUMNS "owner, scope, key, body_hash, response, created_at"

static void read_idempotency(struct sqlite_txn *t, sqlite3_stmt *stmt, void *out)
{
    rl_idempotency_row_t *row = out;

    row->owner = col_text(t, stmt, 0);
    row->scope = col_text(t, stmt, 1);
    row->key = col_text(t, stmt, 2);
    row->body_hash = col_text(t, stmt, 3);
    row->response = col_text(t, stmt, 4);
    row->created_at = sqlite3_column_int64(stmt, 5);
}

static int sqlite_idempotency_get(rl_txn_t *txn, const char *owner, const char *scope, const char *key,
                                  rl_idempotency_row_t *out)
{
    static const char sql[] =
        "SELECT " IDEMPOTENCY_COLUMNS " FROM idempotency WHERE owner = ? AND scope = ? AND key = ?";

    return read_one(TXN(txn), query(TXN(txn), sql, "sss", owner, scope, key), read_idempotency, out);
}

static int sqlite_idempotency_insert(rl_txn_t *txn, const rl_idempotency_row_t *row)
{
    static const char sql[] = "INSERT INTO idempotency(" IDEMPOTENCY_COLUMNS ") VALUES (?, ?, ?, ?, ?, ?)";

    return write_rows(TXN(txn), NULL, sql, "sssssI", row->owner, row->scope, row->key, row->body_hash, row->response,
                      row->created_at);
}

static int sqlite_idempotency_delete(rl_txn_t *txn, const char *owner, const char *scope, const char *key)
{
    static const char sql[] = "DELETE FROM idempotency WHERE owner = ? AND scope = ? AND key = ?";

    return write_one(TXN(txn), sql, "sss", owner, scope, key);
}

static int sqlite_idempotency_of_scope(rl_txn_t *txn, const char *owner, const char *scope, rl_idempotency_row_t **rows,
                                       size_t *count)
{
    static const char sql[] = "SELECT " IDEMPOTENCY_COLUMNS " FROM idempotency WHERE owner = ? AND scope = ?";

    return read_all(TXN(txn), query(TXN(txn), sql, "ss", owner, scope), read_idempotency, sizeof(**rows), (void **)rows,
                    count);
}

static int sqlite_idempotency_purge(rl_txn_t *txn, int64_t created_before)
{
    static const char sql[] = "DELETE FROM idempotency WHERE created_at < ?";

    return write_rows(TXN(txn), NULL, sql, "I", created_before);
}

/* ---- tasks ------------------------------------------------------------------------------------- */

#define TASK_COLUMNS                                                                                                   \
    "installation_id, task_id, session_id, interaction_id, kind, name, status, status_label, created_at, updated_at,"  \
    " args, partial_result, result, error"

static void read_task(struct sqlite_txn *t, sqlite3_stmt *stmt, void *out)
{
    rl_task_row_t *row = out;

    row->installation_id = col_text(t, stmt, 0);
    row->task_id = col_text(t, stmt, 1);
    row->session_id = col_text(t, stmt, 2);
    row->interaction_id = col_text(t, stmt, 3);
    row->kind = col_text(t, stmt, 4);
    row->name = col_text(t, stmt, 5);
    row->status = col_text(t, stmt, 6);
    row->status_label = col_text(t, stmt, 7);
    row->created_at = sqlite3_column_int64(stmt, 8);
    row->updated_at = sqlite3_column_int64(stmt, 9);
    row->args = col_text(t, stmt, 10);
    row->partial_result = col_text(t, stmt, 11);
    row->result = col_text(t, stmt, 12);
    row->error = col_text(t, stmt, 13);
}

static int sqlite_task_insert(rl_txn_t *txn, const rl_task_row_t *row)
{
    static const char sql[] = "INSERT INTO tasks(" TASK_COLUMNS ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

    return write_rows(TXN(txn), NULL, sql, "ssssssssIIssss", row->installation_id, row->task_id, row->session_id,
                      row->interaction_id, row->kind, row->name, row->status, row->status_label, row->created_at,
                      row->updated_at, row->args, row->partial_result, row->result, row->error);
}

static int sqlite_task_get(rl_txn_t *txn, const char *installation_id, const char *task_id, rl_task_row_t *out)
{
    static const char sql[] = "SELECT " TASK_COLUMNS " FROM tasks WHERE installation_id = ? AND task_id = ?";

    return read_one(TXN(txn), query(TXN(txn), sql, "ss", installation_id, task_id), read_task, out);
}

static int sqlite_task_update(rl_txn_t *txn, const rl_task_row_t *row)
{
    static const char sql[] = "UPDATE tasks SET status = ?, status_label = ?, name = ?, updated_at = ?,"
                              " partial_result = ?, result = ?, error = ? WHERE installation_id = ? AND task_id = ?";

    return write_one(TXN(txn), sql, "sssIsssss", row->status, row->status_label, row->name, row->updated_at,
                     row->partial_result, row->result, row->error, row->installation_id, row->task_id);
}

static int sqlite_tasks_by_time(rl_txn_t *txn, const char *session_id, int64_t before_at, const char *before_id,
                                int limit, rl_task_row_t **rows, size_t *count)
{
    /* A NULL before_id makes the comparison NULL: no task at before_at. */
    static const char sql[] = "SELECT " TASK_COLUMNS " FROM tasks WHERE session_id = ?1 AND (created_at < ?2"
                              " OR (created_at = ?2 AND task_id < ?3)) ORDER BY created_at DESC, task_id DESC LIMIT ?4";

    return read_all(TXN(txn), query(TXN(txn), sql, "sIsi", session_id, before_at, before_id, limit), read_task,
                    sizeof(**rows), (void **)rows, count);
}

/* ---- approvals and grants ------------------------------------------------------------------------ */

#define APPROVAL_COLUMNS                                                                                               \
    "id, installation_id, user_id, session_id, interaction_id, request, state, decision, scope, scope_value,"          \
    " created_at, expires_at, resolved_at"

static void read_approval(struct sqlite_txn *t, sqlite3_stmt *stmt, void *out)
{
    rl_approval_row_t *row = out;

    row->id = col_text(t, stmt, 0);
    row->installation_id = col_text(t, stmt, 1);
    row->user_id = col_text(t, stmt, 2);
    row->session_id = col_text(t, stmt, 3);
    row->interaction_id = col_text(t, stmt, 4);
    row->request = col_text(t, stmt, 5);
    row->state = col_text(t, stmt, 6);
    row->decision = col_text(t, stmt, 7);
    row->scope = col_text(t, stmt, 8);
    row->scope_value = col_text(t, stmt, 9);
    row->created_at = sqlite3_column_int64(stmt, 10);
    row->expires_at = sqlite3_column_int64(stmt, 11);
    row->resolved_at = col_time(stmt, 12);
}

static int sqlite_approval_insert(rl_txn_t *txn, const rl_approval_row_t *row)
{
    static const char sql[] =
        "INSERT INTO approvals(" APPROVAL_COLUMNS ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

    return write_rows(TXN(txn), NULL, sql, "ssssssssssIIT", row->id, row->installation_id, row->user_id,
                      row->session_id, row->interaction_id, row->request, row->state, row->decision, row->scope,
                      row->scope_value, row->created_at, row->expires_at, row->resolved_at);
}

static int sqlite_approval_get(rl_txn_t *txn, const char *installation_id, const char *id, rl_approval_row_t *out)
{
    static const char sql[] = "SELECT " APPROVAL_COLUMNS " FROM approvals WHERE installation_id = ? AND id = ?";

    return read_one(TXN(txn), query(TXN(txn), sql, "ss", installation_id, id), read_approval, out);
}

static int sqlite_approval_update(rl_txn_t *txn, const rl_approval_row_t *row)
{
    static const char sql[] = "UPDATE approvals SET state = ?, decision = ?, scope = ?, scope_value = ?,"
                              " resolved_at = ? WHERE installation_id = ? AND id = ?";

    return write_one(TXN(txn), sql, "ssssTss", row->state, row->decision, row->scope, row->scope_value,
                     row->resolved_at, row->installation_id, row->id);
}

static int sqlite_approvals_of_user_by_id(rl_txn_t *txn, const char *user_id, const char *id, rl_approval_row_t **rows,
                                          size_t *count)
{
    static const char sql[] =
        "SELECT " APPROVAL_COLUMNS " FROM approvals WHERE user_id = ? AND id = ? ORDER BY created_at, installation_id";

    return read_all(TXN(txn), query(TXN(txn), sql, "ss", user_id, id), read_approval, sizeof(**rows), (void **)rows,
                    count);
}

static int sqlite_approvals_pending_of_user(rl_txn_t *txn, const char *user_id, int64_t after, rl_approval_row_t **rows,
                                            size_t *count)
{
    static const char sql[] = "SELECT " APPROVAL_COLUMNS " FROM approvals WHERE user_id = ? AND state = 'pending'"
                              " AND expires_at > ? ORDER BY created_at";

    return read_all(TXN(txn), query(TXN(txn), sql, "sI", user_id, after), read_approval, sizeof(**rows), (void **)rows,
                    count);
}

static int sqlite_approvals_by_time(rl_txn_t *txn, const char *session_id, int64_t before_at, const char *before_id,
                                    int limit, rl_approval_row_t **rows, size_t *count)
{
    static const char sql[] = "SELECT " APPROVAL_COLUMNS " FROM approvals WHERE session_id = ?1 AND (created_at < ?2"
                              " OR (created_at = ?2 AND id < ?3)) ORDER BY created_at DESC, id DESC LIMIT ?4";

    return read_all(TXN(txn), query(TXN(txn), sql, "sIsi", session_id, before_at, before_id, limit), read_approval,
                    sizeof(**rows), (void **)rows, count);
}

static int sqlite_approvals_due(rl_txn_t *txn, int64_t at, int limit, rl_approval_row_t **rows, size_t *count)
{
    static const char sql[] = "SELECT " APPROVAL_COLUMNS " FROM approvals WHERE state = 'pending' AND expires_at <= ?"
                              " ORDER BY expires_at LIMIT ?";

    return read_all(TXN(txn), query(TXN(txn), sql, "Ii", at, limit), read_approval, sizeof(**rows), (void **)rows,
                    count);
}

/* ---- device capability requests ------------------------------------------------------------------ */

#define CAPABILITY_COLUMNS                                                                                             \
    "id, installation_id, user_id, session_id, interaction_id, capability, request, state, answer, created_at,"        \
    " expires_at, answered_at"

static void read_capability(struct sqlite_txn *t, sqlite3_stmt *stmt, void *out)
{
    rl_capability_row_t *row = out;

    row->id = col_text(t, stmt, 0);
    row->installation_id = col_text(t, stmt, 1);
    row->user_id = col_text(t, stmt, 2);
    row->session_id = col_text(t, stmt, 3);
    row->interaction_id = col_text(t, stmt, 4);
    row->capability = col_text(t, stmt, 5);
    row->request = col_text(t, stmt, 6);
    row->state = col_text(t, stmt, 7);
    row->answer = col_text(t, stmt, 8);
    row->created_at = sqlite3_column_int64(stmt, 9);
    row->expires_at = sqlite3_column_int64(stmt, 10);
    row->answered_at = col_time(stmt, 11);
}

static int sqlite_capability_insert(rl_txn_t *txn, const rl_capability_row_t *row)
{
    static const char sql[] =
        "INSERT INTO capability_requests(" CAPABILITY_COLUMNS ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

    return write_rows(TXN(txn), NULL, sql, "sssssssssIIT", row->id, row->installation_id, row->user_id, row->session_id,
                      row->interaction_id, row->capability, row->request, row->state, row->answer, row->created_at,
                      row->expires_at, row->answered_at);
}

static int sqlite_capability_get(rl_txn_t *txn, const char *id, rl_capability_row_t *out)
{
    static const char sql[] = "SELECT " CAPABILITY_COLUMNS " FROM capability_requests WHERE id = ?";

    return read_one(TXN(txn), query(TXN(txn), sql, "s", id), read_capability, out);
}

static int sqlite_capability_update(rl_txn_t *txn, const rl_capability_row_t *row)
{
    static const char sql[] = "UPDATE capability_requests SET state = ?, answer = ?, answered_at = ? WHERE id = ?";

    return write_one(TXN(txn), sql, "ssTs", row->state, row->answer, row->answered_at, row->id);
}

static int sqlite_capabilities_pending_of_user(rl_txn_t *txn, const char *user_id, int64_t after,
                                               rl_capability_row_t **rows, size_t *count)
{
    static const char sql[] = "SELECT " CAPABILITY_COLUMNS " FROM capability_requests WHERE user_id = ?"
                              " AND state = 'pending' AND expires_at > ? ORDER BY created_at, id";

    return read_all(TXN(txn), query(TXN(txn), sql, "sI", user_id, after), read_capability, sizeof(**rows),
                    (void **)rows, count);
}

static int sqlite_capabilities_due(rl_txn_t *txn, int64_t at, int limit, rl_capability_row_t **rows, size_t *count)
{
    static const char sql[] = "SELECT " CAPABILITY_COLUMNS " FROM capability_requests WHERE state = 'pending'"
                              " AND expires_at <= ? ORDER BY expires_at, id LIMIT ?";

    return read_all(TXN(txn), query(TXN(txn), sql, "Ii", at, limit), read_capability, sizeof(**rows), (void **)rows,
                    count);
}

static void read_grant(struct sqlite_txn *t, sqlite3_stmt *stmt, void *out)
{
    rl_grant_row_t *row = out;

    row->installation_id = col_text(t, stmt, 0);
    row->action = col_text(t, stmt, 1);
    row->scope = col_text(t, stmt, 2);
    row->scope_value = col_text(t, stmt, 3);
    row->created_at = sqlite3_column_int64(stmt, 4);
}

static int sqlite_grant_insert_ignore(rl_txn_t *txn, const rl_grant_row_t *row)
{
    static const char sql[] = "INSERT OR IGNORE INTO grants(installation_id, action, scope, scope_value, created_at)"
                              " VALUES (?, ?, ?, ?, ?)";

    return write_rows(TXN(txn), NULL, sql, "ssssI", row->installation_id, row->action, row->scope, row->scope_value,
                      row->created_at);
}

static int sqlite_grants_of(rl_txn_t *txn, const char *installation_id, const char *action, rl_grant_row_t **rows,
                            size_t *count)
{
    static const char sql[] = "SELECT installation_id, action, scope, scope_value, created_at FROM grants"
                              " WHERE installation_id = ? AND action = ? ORDER BY created_at";

    return read_all(TXN(txn), query(TXN(txn), sql, "ss", installation_id, action), read_grant, sizeof(**rows),
                    (void **)rows, count);
}

static int sqlite_grants_of_installation(rl_txn_t *txn, const char *installation_id, rl_grant_row_t **rows,
                                         size_t *count)
{
    static const char sql[] = "SELECT installation_id, action, scope, scope_value, created_at FROM grants"
                              " WHERE installation_id = ? ORDER BY created_at, action, scope, scope_value";

    return read_all(TXN(txn), query(TXN(txn), sql, "s", installation_id), read_grant, sizeof(**rows), (void **)rows,
                    count);
}

static int sqlite_grant_delete(rl_txn_t *txn, const rl_grant_row_t *row)
{
    static const char sql[] =
        "DELETE FROM grants WHERE installation_id = ? AND action = ? AND scope = ? AND scope_value = ?";

    return write_one(TXN(txn), sql, "ssss", row->installation_id, row->action, row->scope, row->scope_value);
}

/* ---- the update queue ---------------------------------------------------------------------------- */

static void read_update(struct sqlite_txn *t, sqlite3_stmt *stmt, void *out)
{
    rl_update_row_t *row = out;

    row->installation_id = col_text(t, stmt, 0);
    row->update_id = sqlite3_column_int64(stmt, 1);
    row->type = col_text(t, stmt, 2);
    row->session_id = col_text(t, stmt, 3);
    row->interaction_id = col_text(t, stmt, 4);
    row->payload = col_text(t, stmt, 5);
    row->created_at = sqlite3_column_int64(stmt, 6);
}

static int sqlite_update_append(rl_txn_t *txn, rl_update_row_t *row)
{
    static const char counter_sql[] =
        "UPDATE installations SET next_update_id = next_update_id + 1 WHERE id = ? RETURNING next_update_id - 1";
    static const char insert_sql[] = "INSERT INTO updates(installation_id, update_id, type, session_id,"
                                     " interaction_id, payload, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)";
    struct sqlite_txn *t = TXN(txn);
    sqlite3_stmt *stmt = query(t, counter_sql, "s", row->installation_id);
    int rc;

    if (stmt == NULL)
        return RL_E_INTERNAL;
    rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW)
        row->update_id = sqlite3_column_int64(stmt, 0);
    /* RETURNING hands its rows out before the change is applied: step to the end. */
    while (rc == SQLITE_ROW)
        rc = sqlite3_step(stmt);
    done_with(stmt);
    if (rc != SQLITE_DONE)
        return step_error(t, rc);
    if (sqlite3_changes(t->db) == 0)
        return RL_E_NOT_FOUND;
    return write_rows(t, NULL, insert_sql, "sIssssI", row->installation_id, row->update_id, row->type, row->session_id,
                      row->interaction_id, row->payload, row->created_at);
}

static int sqlite_updates_after(rl_txn_t *txn, const char *installation_id, int64_t after_id, int64_t since, int limit,
                                rl_update_row_t **rows, size_t *count)
{
    static const char sql[] =
        "SELECT installation_id, update_id, type, session_id, interaction_id, payload, created_at FROM updates"
        " WHERE installation_id = ? AND update_id > ? AND created_at >= ? ORDER BY update_id LIMIT ?";

    return read_all(TXN(txn), query(TXN(txn), sql, "sIIi", installation_id, after_id, since, limit), read_update,
                    sizeof(**rows), (void **)rows, count);
}

static int sqlite_updates_ack(rl_txn_t *txn, const char *installation_id, int64_t up_to)
{
    static const char drop_sql[] = "DELETE FROM updates WHERE installation_id = ? AND update_id <= ?";
    static const char mark_sql[] = "UPDATE installations SET acked_update_id = max(acked_update_id, ?) WHERE id = ?";
    int result = write_rows(TXN(txn), NULL, drop_sql, "sI", installation_id, up_to);

    return result != 0 ? result : write_rows(TXN(txn), NULL, mark_sql, "Is", up_to, installation_id);
}

static int sqlite_updates_purge(rl_txn_t *txn, int64_t created_before)
{
    static const char sql[] = "DELETE FROM updates WHERE created_at < ?";

    return write_rows(TXN(txn), NULL, sql, "I", created_before);
}

/* ---- attachments --------------------------------------------------------------------------------- */

static void read_attachment(struct sqlite_txn *t, sqlite3_stmt *stmt, void *out)
{
    rl_attachment_row_t *row = out;

    row->key = col_text(t, stmt, 0);
    row->user_id = col_text(t, stmt, 1);
    row->mime = col_text(t, stmt, 2);
    row->size = sqlite3_column_int64(stmt, 3);
    row->name = col_text(t, stmt, 4);
    row->created_at = sqlite3_column_int64(stmt, 5);
    row->used_at = col_time(stmt, 6);
    row->doomed_at = col_time(stmt, 7);
}

#define ATTACHMENT_COLUMNS "key, user_id, mime, size, name, created_at, used_at, doomed_at"

static int sqlite_attachment_insert(rl_txn_t *txn, const rl_attachment_row_t *row)
{
    static const char sql[] = "INSERT INTO attachments(" ATTACHMENT_COLUMNS ") VALUES (?, ?, ?, ?, ?, ?, ?, ?)";

    return write_rows(TXN(txn), NULL, sql, "sssIsITT", row->key, row->user_id, row->mime, row->size, row->name,
                      row->created_at, row->used_at, row->doomed_at);
}

static int sqlite_attachment_get(rl_txn_t *txn, const char *key, rl_attachment_row_t *out)
{
    static const char sql[] = "SELECT " ATTACHMENT_COLUMNS " FROM attachments WHERE key = ?";

    return read_one(TXN(txn), query(TXN(txn), sql, "s", key), read_attachment, out);
}

static int sqlite_attachment_use(rl_txn_t *txn, const char *key, const char *session_id, int64_t now)
{
    static const char use[] = "INSERT OR IGNORE INTO attachment_uses(key, session_id) VALUES (?, ?)";
    static const char first[] = "UPDATE attachments SET used_at = ? WHERE key = ? AND used_at IS NULL";
    int result = write_rows(TXN(txn), NULL, use, "ss", key, session_id);

    return result != 0 ? result : write_rows(TXN(txn), NULL, first, "Is", now, key);
}

static int sqlite_attachments_usage(rl_txn_t *txn, const char *user_id, int64_t *bytes)
{
    static const char sql[] = "SELECT COALESCE(SUM(size), 0) FROM attachments WHERE user_id = ? AND doomed_at IS NULL";

    return read_one(TXN(txn), query(TXN(txn), sql, "s", user_id), read_int, bytes);
}

static int sqlite_attachments_unreferenced(rl_txn_t *txn, int64_t unused_before, int limit, rl_attachment_row_t **rows,
                                           size_t *count)
{
    static const char sql[] =
        "SELECT " ATTACHMENT_COLUMNS " FROM ("
        " SELECT * FROM attachments a WHERE used_at IS NOT NULL AND doomed_at IS NULL"
        "  AND NOT EXISTS (SELECT 1 FROM attachment_uses u WHERE u.key = a.key)"
        " UNION ALL"
        " SELECT * FROM attachments WHERE used_at IS NULL AND doomed_at IS NULL AND created_at < ?)"
        " ORDER BY created_at LIMIT ?";

    return read_all(TXN(txn), query(TXN(txn), sql, "Ii", unused_before, limit), read_attachment, sizeof(**rows),
                    (void **)rows, count);
}

static int sqlite_attachment_doom(rl_txn_t *txn, const char *key, int64_t now)
{
    static const char sql[] = "UPDATE attachments SET doomed_at = ? WHERE key = ? AND doomed_at IS NULL";

    return write_one(TXN(txn), sql, "Is", now, key);
}

static int sqlite_attachments_doomed(rl_txn_t *txn, int limit, rl_attachment_row_t **rows, size_t *count)
{
    static const char sql[] =
        "SELECT " ATTACHMENT_COLUMNS " FROM attachments WHERE doomed_at IS NOT NULL ORDER BY doomed_at LIMIT ?";

    return read_all(TXN(txn), query(TXN(txn), sql, "i", limit), read_attachment, sizeof(**rows), (void **)rows, count);
}

static int sqlite_attachment_delete(rl_txn_t *txn, const char *key)
{
    static const char uses[] = "DELETE FROM attachment_uses WHERE key = ?";
    static const char row[] = "DELETE FROM attachments WHERE key = ? AND doomed_at IS NOT NULL";
    int result = write_one(TXN(txn), row, "s", key);

    return result != 0 ? result : write_rows(TXN(txn), NULL, uses, "s", key);
}

/* ---- secrets ---------------------------------------------------------------------------------- */

static int sqlite_secret_insert_ignore(rl_txn_t *txn, const char *name, const char *value, int64_t created_at)
{
    static const char sql[] = "INSERT OR IGNORE INTO secrets(name, value, created_at) VALUES (?, ?, ?)";

    return write_rows(TXN(txn), NULL, sql, "ssI", name, value, created_at);
}

static int sqlite_secret_get(rl_txn_t *txn, const char *name, const char **value)
{
    static const char sql[] = "SELECT value FROM secrets WHERE name = ?";

    return read_one(TXN(txn), query(TXN(txn), sql, "s", name), read_text, value);
}

/* ---- the web client: sign-in codes and push subscriptions ---------------------------------------- */

static void read_login_code(struct sqlite_txn *t, sqlite3_stmt *stmt, void *out)
{
    rl_login_code_row_t *row = out;

    row->code_hash = col_text(t, stmt, 0);
    row->user_id = col_text(t, stmt, 1);
    row->created_at = sqlite3_column_int64(stmt, 2);
    row->expires_at = sqlite3_column_int64(stmt, 3);
}

static int sqlite_login_code_insert(rl_txn_t *txn, const rl_login_code_row_t *row)
{
    static const char sql[] = "INSERT INTO login_codes(code_hash, user_id, created_at, expires_at) VALUES (?, ?, ?, ?)";

    return write_rows(TXN(txn), NULL, sql, "ssII", row->code_hash, row->user_id, row->created_at, row->expires_at);
}

static int sqlite_login_code_get(rl_txn_t *txn, const char *code_hash, rl_login_code_row_t *out)
{
    static const char sql[] = "SELECT code_hash, user_id, created_at, expires_at FROM login_codes WHERE code_hash = ?";

    return read_one(TXN(txn), query(TXN(txn), sql, "s", code_hash), read_login_code, out);
}

static int sqlite_login_code_delete(rl_txn_t *txn, const char *code_hash)
{
    static const char sql[] = "DELETE FROM login_codes WHERE code_hash = ?";

    return write_one(TXN(txn), sql, "s", code_hash);
}

static int sqlite_login_codes_purge(rl_txn_t *txn, int64_t expired_before)
{
    static const char sql[] = "DELETE FROM login_codes WHERE expires_at < ?";

    return write_rows(TXN(txn), NULL, sql, "I", expired_before);
}

static void read_push_subscription(struct sqlite_txn *t, sqlite3_stmt *stmt, void *out)
{
    rl_push_subscription_row_t *row = out;

    row->endpoint = col_text(t, stmt, 0);
    row->user_id = col_text(t, stmt, 1);
    row->p256dh = col_text(t, stmt, 2);
    row->auth = col_text(t, stmt, 3);
    row->created_at = sqlite3_column_int64(stmt, 4);
}

static int sqlite_push_subscription_insert(rl_txn_t *txn, const rl_push_subscription_row_t *row)
{
    static const char sql[] =
        "INSERT INTO push_subscriptions(endpoint, user_id, p256dh, auth, created_at) VALUES (?, ?, ?, ?, ?)";

    return write_rows(TXN(txn), NULL, sql, "ssssI", row->endpoint, row->user_id, row->p256dh, row->auth,
                      row->created_at);
}

static int sqlite_push_subscription_get(rl_txn_t *txn, const char *endpoint, rl_push_subscription_row_t *out)
{
    static const char sql[] =
        "SELECT endpoint, user_id, p256dh, auth, created_at FROM push_subscriptions WHERE endpoint = ?";

    return read_one(TXN(txn), query(TXN(txn), sql, "s", endpoint), read_push_subscription, out);
}

static int sqlite_push_subscription_delete(rl_txn_t *txn, const char *endpoint)
{
    static const char sql[] = "DELETE FROM push_subscriptions WHERE endpoint = ?";

    return write_one(TXN(txn), sql, "s", endpoint);
}

static int sqlite_push_subscriptions_of_user(rl_txn_t *txn, const char *user_id, rl_push_subscription_row_t **rows,
                                             size_t *count)
{
    static const char sql[] = "SELECT endpoint, user_id, p256dh, auth, created_at FROM push_subscriptions"
                              " WHERE user_id = ? ORDER BY created_at, endpoint";

    return read_all(TXN(txn), query(TXN(txn), sql, "s", user_id), read_push_subscription, sizeof(**rows), (void **)rows,
                    count);
}

/* ---- end-to-end encryption (issue 26) ---------------------------------------------------------- */

static int sqlite_pairing_by_code_any(rl_txn_t *txn, const char *code_hash, rl_pairing_row_t *out)
{
    static const char sql[] =
        "SELECT " PAIRING_COLUMNS " FROM pairings WHERE code_hash = ? ORDER BY created_at DESC LIMIT 1";

    return read_one(TXN(txn), query(TXN(txn), sql, "s", code_hash), read_pairing, out);
}

#define DEVICE_COLUMNS "id, user_id, installation_id, platform, label, pubkey, created_at, revoked_at"

static void read_device(struct sqlite_txn *t, sqlite3_stmt *stmt, void *out)
{
    rl_device_row_t *row = out;

    row->id = col_text(t, stmt, 0);
    row->user_id = col_text(t, stmt, 1);
    row->installation_id = col_text(t, stmt, 2);
    row->platform = col_text(t, stmt, 3);
    row->label = col_text(t, stmt, 4);
    row->pubkey = col_text(t, stmt, 5);
    row->created_at = sqlite3_column_int64(stmt, 6);
    row->revoked_at = col_time(stmt, 7);
}

static int sqlite_device_insert(rl_txn_t *txn, const rl_device_row_t *row)
{
    static const char sql[] = "INSERT INTO devices(" DEVICE_COLUMNS ") VALUES (?, ?, ?, ?, ?, ?, ?, ?)";

    return write_rows(TXN(txn), NULL, sql, "ssssssIT", row->id, row->user_id, row->installation_id, row->platform,
                      row->label, row->pubkey, row->created_at, row->revoked_at);
}

static int sqlite_device_get(rl_txn_t *txn, const char *id, rl_device_row_t *out)
{
    static const char sql[] = "SELECT " DEVICE_COLUMNS " FROM devices WHERE id = ?";

    return read_one(TXN(txn), query(TXN(txn), sql, "s", id), read_device, out);
}

static int sqlite_device_update(rl_txn_t *txn, const rl_device_row_t *row)
{
    static const char sql[] = "UPDATE devices SET label = ?, pubkey = ?, revoked_at = ? WHERE id = ?";

    return write_one(TXN(txn), sql, "ssTs", row->label, row->pubkey, row->revoked_at, row->id);
}

static int sqlite_devices_of_user(rl_txn_t *txn, const char *user_id, rl_device_row_t **rows, size_t *count)
{
    static const char sql[] =
        "SELECT " DEVICE_COLUMNS " FROM devices WHERE user_id = ? AND revoked_at IS NULL ORDER BY created_at, id";

    return read_all(TXN(txn), query(TXN(txn), sql, "s", user_id), read_device, sizeof(**rows), (void **)rows, count);
}

static int sqlite_confirmation_put(rl_txn_t *txn, const char *device_id, const char *bridge_device_id, int64_t at)
{
    static const char sql[] = "INSERT OR IGNORE INTO device_confirmations(device_id, bridge_device_id, at)"
                              " VALUES (?, ?, ?)";

    return write_rows(TXN(txn), NULL, sql, "ssI", device_id, bridge_device_id, at);
}

static void read_nothing(struct sqlite_txn *t, sqlite3_stmt *stmt, void *out)
{
    (void)t, (void)stmt, (void)out;
}

static int sqlite_confirmation_get(rl_txn_t *txn, const char *device_id, const char *bridge_device_id)
{
    static const char sql[] = "SELECT 1 FROM device_confirmations WHERE device_id = ? AND bridge_device_id = ?";

    return read_one(TXN(txn), query(TXN(txn), sql, "ss", device_id, bridge_device_id), read_nothing, NULL);
}

static int sqlite_confirmations_delete(rl_txn_t *txn, const char *device_id)
{
    static const char sql[] = "DELETE FROM device_confirmations WHERE device_id = ? OR bridge_device_id = ?";

    return write_rows(TXN(txn), NULL, sql, "ss", device_id, device_id);
}

#define RECIPIENT_COLUMNS "session_id, device_id, wrapped_session_key, wrapped_by_device_id, created_at"

static void read_recipient(struct sqlite_txn *t, sqlite3_stmt *stmt, void *out)
{
    rl_recipient_row_t *row = out;

    row->session_id = col_text(t, stmt, 0);
    row->device_id = col_text(t, stmt, 1);
    row->wrapped_session_key = col_text(t, stmt, 2);
    row->wrapped_by_device_id = col_text(t, stmt, 3);
    row->created_at = sqlite3_column_int64(stmt, 4);
}

static int sqlite_recipient_put(rl_txn_t *txn, const rl_recipient_row_t *row)
{
    static const char sql[] = "INSERT OR REPLACE INTO session_recipients(" RECIPIENT_COLUMNS ") VALUES (?, ?, ?, ?, ?)";

    return write_rows(TXN(txn), NULL, sql, "ssssI", row->session_id, row->device_id, row->wrapped_session_key,
                      row->wrapped_by_device_id, row->created_at);
}

static int sqlite_recipients_delete(rl_txn_t *txn, const char *device_id)
{
    static const char sql[] = "DELETE FROM session_recipients WHERE device_id = ?";

    return write_rows(TXN(txn), NULL, sql, "s", device_id);
}

static int sqlite_recipients_of_device(rl_txn_t *txn, const char *device_id, int64_t since, rl_recipient_row_t **rows,
                                       size_t *count)
{
    static const char sql[] = "SELECT " RECIPIENT_COLUMNS " FROM session_recipients WHERE device_id = ?"
                              " AND created_at >= ? ORDER BY created_at, session_id";

    return read_all(TXN(txn), query(TXN(txn), sql, "sI", device_id, since), read_recipient, sizeof(**rows),
                    (void **)rows, count);
}

#define AGENT_FILE_COLUMNS "session_id, path_blind_idx, tool, mime, path_ct, display_name_ct, size_bytes, updated_at"

static void read_agent_file(struct sqlite_txn *t, sqlite3_stmt *stmt, void *out)
{
    rl_agent_file_row_t *row = out;

    row->session_id = col_text(t, stmt, 0);
    row->path_blind_idx = col_text(t, stmt, 1);
    row->tool = col_text(t, stmt, 2);
    row->mime = col_text(t, stmt, 3);
    row->path_ct = col_text(t, stmt, 4);
    row->display_name_ct = col_text(t, stmt, 5);
    row->size_bytes = col_time(stmt, 6);
    row->updated_at = sqlite3_column_int64(stmt, 7);
}

static int sqlite_agent_file_put(rl_txn_t *txn, const rl_agent_file_row_t *row)
{
    static const char sql[] =
        "INSERT OR REPLACE INTO session_agent_files(" AGENT_FILE_COLUMNS ") VALUES (?, ?, ?, ?, ?, ?, ?, ?)";

    return write_rows(TXN(txn), NULL, sql, "ssssssTI", row->session_id, row->path_blind_idx, row->tool, row->mime,
                      row->path_ct, row->display_name_ct, row->size_bytes, row->updated_at);
}

static int sqlite_agent_files_of_session(rl_txn_t *txn, const char *session_id, rl_agent_file_row_t **rows,
                                         size_t *count)
{
    static const char sql[] = "SELECT " AGENT_FILE_COLUMNS " FROM session_agent_files WHERE session_id = ?"
                              " ORDER BY updated_at DESC, path_blind_idx";

    return read_all(TXN(txn), query(TXN(txn), sql, "s", session_id), read_agent_file, sizeof(**rows), (void **)rows,
                    count);
}

/* ---- the connection ------------------------------------------------------------------------------ */

/*
 * A connection that finds the database locked retries every BUSY_SLEEP_US,
 * up to the milliseconds in its argument (the writer 5 s, the checkpointer
 * 1 s). SQLite's own handler (sqlite3_busy_timeout) sleeps 1, 2, 5, 10,
 * 15... ms between tries: a connection held for 2 ms would lose 8.
 */
#define BUSY_SLEEP_US 200

static int busy_retry(void *limit_ms, int tries)
{
    if ((int64_t)tries * BUSY_SLEEP_US >= (int64_t)(intptr_t)limit_ms * 1000)
        return 0;
    usleep(BUSY_SLEEP_US);
    return 1;
}

/* Copies what the WAL holds to the database; *frames is then the WAL's length. */
static int checkpoint(sqlite3 *db, int mode, int *frames)
{
    int copied = 0, rc;

    *frames = 0;
    rc = sqlite3_wal_checkpoint_v2(db, NULL, mode, frames, &copied);
    if (rc != SQLITE_OK && rc != SQLITE_BUSY)
        rl_log_warn("sqlite checkpoint failed: %s", sqlite3_errstr(rc));
    else if (*frames > 0)
        rl_log_debug("sqlite checkpoint: %d of %d WAL frames copied", copied, *frames);
    return rc;
}

/*
 * Restarts the WAL: RESTART takes the write lock, copies the frames left,
 * fsyncs the database, and waits until no reader uses the WAL, so that the
 * next commit writes from its start. The writer's next transaction waits
 * for it (t->restarting) rather than leave the checkpointer to find the
 * write lock free: a worker with batches queued begins the next one
 * microseconds after its commit, and the checkpointer tries every 200 us
 * for a second before it gives up, while the WAL grows.
 */
static void restart(struct sqlite_txn *t, sqlite3 *db)
{
    int frames = 0;

    pthread_mutex_lock(&t->restarting);
    if (checkpoint(db, SQLITE_CHECKPOINT_RESTART, &frames) == SQLITE_OK)
        rl_log_debug("sqlite: the WAL restarts after %d frames", frames);
    pthread_mutex_unlock(&t->restarting);
}

/*
 * Checkpoints on a thread of their own: they fsync, and no commit should
 * wait for that. Woken by the writer every CHECKPOINT_STEP frames (or once
 * a second), it copies them (PASSIVE: never in the writer's way). Past
 * WAL_FRAMES_MAX it restarts the WAL: one more PASSIVE pass copies what
 * came during the last one, then RESTART takes the write lock, copies the
 * few frames left, fsyncs, and lets the next commit write from the WAL's
 * start. The writer waits only for that last step: a few hundred frames at
 * most, a millisecond or two. journal_size_limit then trims the file back to
 * 64 MiB.
 */
static void *checkpoint_main(void *p)
{
    struct sqlite_txn *t = p;
    sqlite3 *db = NULL;
    int frames = 0, seen = -1;
    sigset_t all;

    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    if (sqlite3_open_v2(t->path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        rl_log_error("sqlite checkpointer: cannot open %s", t->path);
        sqlite3_close(db);
        return NULL;
    }
    sqlite3_busy_handler(db, busy_retry, (void *)(intptr_t)1000);
    /*
     * A connection learns that the database is in WAL mode only when it first
     * reads it; until then a checkpoint succeeds and does nothing, and the WAL
     * grows without bound (bench/PROFILE-NOTES.md, finding 1).
     */
    if (sqlite3_exec(db, "SELECT 1 FROM sqlite_master LIMIT 1", NULL, NULL, NULL) != SQLITE_OK)
        rl_log_warn("sqlite checkpointer: cannot read %s: %s", t->path, sqlite3_errmsg(db));
    pthread_mutex_lock(&t->lock);
    while (!t->stopping) {
        if (t->wal_frames == seen) {
            struct timespec deadline;
            clock_gettime(CLOCK_REALTIME, &deadline);
            deadline.tv_sec += 1;
            pthread_cond_timedwait(&t->wake, &t->lock, &deadline);
            if (t->stopping)
                break;
        }
        seen = t->wal_frames;
        pthread_mutex_unlock(&t->lock);
        if (checkpoint(db, SQLITE_CHECKPOINT_PASSIVE, &frames) == SQLITE_OK && frames > WAL_FRAMES_MAX &&
            checkpoint(db, SQLITE_CHECKPOINT_PASSIVE, &frames) == SQLITE_OK)
            restart(t, db);
        pthread_mutex_lock(&t->lock);
    }
    pthread_mutex_unlock(&t->lock);
    sqlite3_close(db);
    return NULL;
}

static void sqlite_close(rl_txn_t *txn)
{
    struct sqlite_txn *t = TXN(txn);
    size_t i;

    if (t->checkpointer_running) {
        pthread_mutex_lock(&t->lock);
        t->stopping = 1;
        pthread_cond_signal(&t->wake);
        pthread_mutex_unlock(&t->lock);
        pthread_join(t->checkpointer, NULL);
    }
    for (i = 0; i < t->ncache; ++i)
        sqlite3_finalize(t->cache[i].stmt);
    if (t->db != NULL) {
        if (!sqlite3_get_autocommit(t->db))
            exec_sql(t->db, "ROLLBACK");
        sqlite3_wal_checkpoint_v2(t->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
        sqlite3_close(t->db);
    }
    pthread_mutex_destroy(&t->lock);
    pthread_mutex_destroy(&t->restarting);
    pthread_cond_destroy(&t->wake);
    free(t->path);
    free(t);
}

static const struct rl_txn_ops sqlite_ops = {
    .name = "sqlite",
    .begin = sqlite_begin,
    .commit = sqlite_commit,
    .rollback = sqlite_rollback,
    .savepoint = sqlite_savepoint,
    .release = sqlite_release,
    .close = sqlite_close,
    .user_insert_ignore = sqlite_user_insert_ignore,
    .user_get = sqlite_user_get,
    .pairing_insert = sqlite_pairing_insert,
    .pairing_by_code = sqlite_pairing_by_code,
    .pairing_by_poll = sqlite_pairing_by_poll,
    .pairing_update = sqlite_pairing_update,
    .pairing_delete_lapsed = sqlite_pairing_delete_lapsed,
    .pairings_purge = sqlite_pairings_purge,
    .installation_insert = sqlite_installation_insert,
    .installation_get = sqlite_installation_get,
    .installation_update = sqlite_installation_update,
    .installations_of_user = sqlite_installations_of_user,
    .session_insert = sqlite_session_insert,
    .session_get = sqlite_session_get,
    .session_update = sqlite_session_update,
    .sessions_of_user = sqlite_sessions_of_user,
    .sessions_deleted_of_user = sqlite_sessions_deleted_of_user,
    .sessions_purge = sqlite_sessions_purge,
    .interaction_insert = sqlite_interaction_insert,
    .interaction_get = sqlite_interaction_get,
    .message_insert = sqlite_message_insert,
    .message_get = sqlite_message_get,
    .message_update = sqlite_message_update,
    .messages_page = sqlite_messages_page,
    .messages_by_time = sqlite_messages_by_time,
    .messages_open_before = sqlite_messages_open_before,
    .delta_run_insert = sqlite_delta_run_insert,
    .delta_runs_of = sqlite_delta_runs_of,
    .delta_next_seq = sqlite_delta_next_seq,
    .delta_runs_delete = sqlite_delta_runs_delete,
    .delta_keys_put = sqlite_delta_keys_put,
    .delta_keys_get = sqlite_delta_keys_get,
    .delta_keys_purge = sqlite_delta_keys_purge,
    .idempotency_get = sqlite_idempotency_get,
    .idempotency_insert = sqlite_idempotency_insert,
    .idempotency_delete = sqlite_idempotency_delete,
    .idempotency_of_scope = sqlite_idempotency_of_scope,
    .idempotency_purge = sqlite_idempotency_purge,
    .task_insert = sqlite_task_insert,
    .task_get = sqlite_task_get,
    .task_update = sqlite_task_update,
    .tasks_by_time = sqlite_tasks_by_time,
    .approval_insert = sqlite_approval_insert,
    .approval_get = sqlite_approval_get,
    .approval_update = sqlite_approval_update,
    .approvals_of_user_by_id = sqlite_approvals_of_user_by_id,
    .approvals_pending_of_user = sqlite_approvals_pending_of_user,
    .approvals_by_time = sqlite_approvals_by_time,
    .approvals_due = sqlite_approvals_due,
    .capability_insert = sqlite_capability_insert,
    .capability_get = sqlite_capability_get,
    .capability_update = sqlite_capability_update,
    .capabilities_pending_of_user = sqlite_capabilities_pending_of_user,
    .capabilities_due = sqlite_capabilities_due,
    .grant_insert_ignore = sqlite_grant_insert_ignore,
    .grants_of = sqlite_grants_of,
    .grants_of_installation = sqlite_grants_of_installation,
    .grant_delete = sqlite_grant_delete,
    .update_append = sqlite_update_append,
    .updates_after = sqlite_updates_after,
    .updates_ack = sqlite_updates_ack,
    .updates_purge = sqlite_updates_purge,
    .attachment_insert = sqlite_attachment_insert,
    .attachment_get = sqlite_attachment_get,
    .secret_insert_ignore = sqlite_secret_insert_ignore,
    .secret_get = sqlite_secret_get,
    .pairing_by_code_any = sqlite_pairing_by_code_any,
    .device_insert = sqlite_device_insert,
    .device_get = sqlite_device_get,
    .device_update = sqlite_device_update,
    .devices_of_user = sqlite_devices_of_user,
    .confirmation_put = sqlite_confirmation_put,
    .confirmation_get = sqlite_confirmation_get,
    .confirmations_delete = sqlite_confirmations_delete,
    .recipient_put = sqlite_recipient_put,
    .recipients_delete = sqlite_recipients_delete,
    .recipients_of_device = sqlite_recipients_of_device,
    .agent_file_put = sqlite_agent_file_put,
    .agent_files_of_session = sqlite_agent_files_of_session,
    .login_code_insert = sqlite_login_code_insert,
    .login_code_get = sqlite_login_code_get,
    .login_code_delete = sqlite_login_code_delete,
    .login_codes_purge = sqlite_login_codes_purge,
    .push_subscription_insert = sqlite_push_subscription_insert,
    .push_subscription_get = sqlite_push_subscription_get,
    .push_subscription_delete = sqlite_push_subscription_delete,
    .push_subscriptions_of_user = sqlite_push_subscriptions_of_user,
    .attachment_use = sqlite_attachment_use,
    .attachments_usage = sqlite_attachments_usage,
    .attachments_unreferenced = sqlite_attachments_unreferenced,
    .attachment_doom = sqlite_attachment_doom,
    .attachments_doomed = sqlite_attachments_doomed,
    .attachment_delete = sqlite_attachment_delete,
};

static int migrate(struct sqlite_txn *t)
{
    sqlite3_stmt *stmt = NULL;
    int version = 0, target = (int)(sizeof(migrations) / sizeof(migrations[0]));
    char sql[64];

    if (exec_sql(t->db, "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)") != 0)
        return -1;
    if (sqlite3_prepare_v2(t->db, "SELECT max(version) FROM schema_version", -1, &stmt, NULL) != SQLITE_OK)
        return -1;
    if (sqlite3_step(stmt) == SQLITE_ROW)
        version = sqlite3_column_int(stmt, 0);
    sqlite3_finalize(stmt);
    if (version > target) {
        rl_log_error("the store is at schema version %d, newer than this relayd (%d)", version, target);
        return -1;
    }
    while (version < target) {
        if (exec_sql(t->db, "BEGIN IMMEDIATE") != 0)
            return -1;
        snprintf(sql, sizeof(sql), "INSERT INTO schema_version VALUES (%d)", version + 1);
        if (exec_sql(t->db, migrations[version]) != 0 || exec_sql(t->db, sql) != 0) {
            exec_sql(t->db, "ROLLBACK");
            return -1;
        }
        if (exec_sql(t->db, "COMMIT") != 0)
            return -1;
        ++version;
        rl_log_info("store migrated to schema version %d", version);
    }
    return 0;
}

int rl_store__sqlite_open(const char *path, rl_txn_t **out)
{
    struct sqlite_txn *t = calloc(1, sizeof(*t));

    if (t == NULL)
        return -1;
    t->base.ops = &sqlite_ops;
    t->path = strdup(path);
    pthread_mutex_init(&t->lock, NULL);
    pthread_mutex_init(&t->restarting, NULL);
    pthread_cond_init(&t->wake, NULL);
    if (t->path == NULL)
        goto fail;
    if (sqlite3_open_v2(path, &t->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) !=
        SQLITE_OK) {
        rl_log_error("cannot open the store at %s: %s", path, sqlite3_errmsg(t->db));
        goto fail;
    }
    sqlite3_busy_handler(t->db, busy_retry, (void *)(intptr_t)5000);
    if (exec_sql(t->db, "PRAGMA journal_mode=WAL") != 0 || exec_sql(t->db, "PRAGMA synchronous=NORMAL") != 0 ||
        exec_sql(t->db, "PRAGMA foreign_keys=ON") != 0 || exec_sql(t->db, "PRAGMA journal_size_limit=67108864") != 0 ||
        /*
         * A batch of a few hundred deltas dirties pages all over two B-trees; with
         * SQLite's default 2 MiB cache the writer spilled pages in the middle of
         * its transaction (sqlite3PcacheFetchStress in the profile). 64 MiB keeps
         * a batch in memory until its commit.
         */
        exec_sql(t->db, "PRAGMA cache_size=-65536") != 0 || migrate(t) != 0)
        goto fail;
    /* Checkpoints belong to the background thread, never to a commit. */
    sqlite3_wal_autocheckpoint(t->db, 0);
    sqlite3_wal_hook(t->db, on_wal_commit, t);
    if (pthread_create(&t->checkpointer, NULL, checkpoint_main, t) != 0) {
        rl_log_error("cannot start the checkpoint thread: %s", strerror(errno));
        goto fail;
    }
    t->checkpointer_running = 1;
    *out = &t->base;
    return 0;
fail:
    sqlite_close(&t->base);
    return -1;
}

/* ---- one-shot access for relayd's commands (sqlite.h) --------------------------------------------- */

int rl_store_sqlite_target_version(void)
{
    return (int)(sizeof(migrations) / sizeof(migrations[0]));
}

/*
 * Opening a WAL database, even read-only, creates its -wal and -shm files
 * when relayd is not running. Run as root against a folder that belongs to
 * the service's user, those would be root's and the next start of relayd
 * could not open them: they are given to the database's owner.
 */
static void give_side_files_to_owner(const char *path, const struct stat *db)
{
    static const char *const suffixes[] = {"-wal", "-shm"};
    char side[4200];
    struct stat st;
    size_t i;

    if (geteuid() != 0)
        return;
    for (i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); ++i) {
        snprintf(side, sizeof(side), "%s%s", path, suffixes[i]);
        if (stat(side, &st) == 0 && (st.st_uid != db->st_uid || st.st_gid != db->st_gid) &&
            chown(side, db->st_uid, db->st_gid) != 0) {
            /* Nothing better to do: the message of the next start names the file. */
        }
    }
}

/* A read-only connection to an existing database file; NULL with the reason in why. */
static sqlite3 *open_existing(const char *path, struct stat *st, int *err_no, char *why, size_t whysz)
{
    sqlite3 *db = NULL;

    if (err_no != NULL)
        *err_no = 0;
    if (stat(path, st) != 0) {
        if (err_no != NULL)
            *err_no = errno;
        snprintf(why, whysz, "%s: %s", path, strerror(errno));
        return NULL;
    }
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        snprintf(why, whysz, "cannot open %s: %s", path, db != NULL ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return NULL;
    }
    sqlite3_busy_timeout(db, 10000);
    return db;
}

static int read_version(sqlite3 *db, int *version, char *why, size_t whysz)
{
    sqlite3_stmt *stmt = NULL;
    int rc;

    *version = 0;
    rc = sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'",
                            -1, &stmt, NULL);
    if (rc != SQLITE_OK || sqlite3_step(stmt) != SQLITE_ROW) {
        snprintf(why, whysz, "not a readable SQLite database: %s", sqlite3_errmsg(db));
        sqlite3_finalize(stmt);
        return -1;
    }
    rc = sqlite3_column_int(stmt, 0);
    sqlite3_finalize(stmt);
    if (rc == 0)
        return 0;
    if (sqlite3_prepare_v2(db, "SELECT coalesce(max(version), 0) FROM schema_version", -1, &stmt, NULL) != SQLITE_OK ||
        sqlite3_step(stmt) != SQLITE_ROW) {
        snprintf(why, whysz, "cannot read the schema version: %s", sqlite3_errmsg(db));
        sqlite3_finalize(stmt);
        return -1;
    }
    *version = sqlite3_column_int(stmt, 0);
    sqlite3_finalize(stmt);
    return 0;
}

int rl_store_sqlite_version(const char *path, int *version, int *err_no, char *why, size_t whysz)
{
    struct stat st;
    sqlite3 *db = open_existing(path, &st, err_no, why, whysz);
    int result;

    if (db == NULL)
        return -1;
    result = read_version(db, version, why, whysz);
    sqlite3_close(db);
    give_side_files_to_owner(path, &st);
    return result;
}

int rl_store_sqlite_copy(const char *src, const char *dest, int *version, char *why, size_t whysz)
{
    struct stat st;
    sqlite3 *from = open_existing(src, &st, NULL, why, whysz), *to = NULL;
    sqlite3_backup *backup = NULL;
    sqlite3_stmt *stmt = NULL;
    int result = -1, rc, fd;

    if (from == NULL)
        return -1;
    if (access(dest, F_OK) == 0) {
        snprintf(why, whysz, "%s already exists", dest);
        goto out_keep;
    }
    if (sqlite3_open_v2(dest, &to, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) !=
        SQLITE_OK) {
        snprintf(why, whysz, "cannot create %s: %s", dest, to != NULL ? sqlite3_errmsg(to) : "out of memory");
        goto out;
    }
    backup = sqlite3_backup_init(to, "main", from, "main");
    if (backup == NULL) {
        snprintf(why, whysz, "cannot start the copy: %s", sqlite3_errmsg(to));
        goto out;
    }
    /* All pages in one step: one read transaction, so one consistent state of the source. */
    do {
        rc = sqlite3_backup_step(backup, -1);
        if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED)
            sqlite3_sleep(50);
    } while (rc == SQLITE_BUSY || rc == SQLITE_LOCKED);
    rc = sqlite3_backup_finish(backup);
    backup = NULL;
    if (rc != SQLITE_OK) {
        snprintf(why, whysz, "the copy failed: %s", sqlite3_errmsg(to));
        goto out;
    }
    if (sqlite3_prepare_v2(to, "PRAGMA quick_check", -1, &stmt, NULL) != SQLITE_OK ||
        sqlite3_step(stmt) != SQLITE_ROW || strcmp((const char *)sqlite3_column_text(stmt, 0), "ok") != 0) {
        snprintf(why, whysz, "the copy does not pass PRAGMA quick_check: %s",
                 stmt != NULL && sqlite3_column_text(stmt, 0) != NULL ? (const char *)sqlite3_column_text(stmt, 0)
                                                                      : sqlite3_errmsg(to));
        sqlite3_finalize(stmt);
        goto out;
    }
    sqlite3_finalize(stmt);
    if (read_version(to, version, why, whysz) != 0)
        goto out;
    /* The copy stands alone: its WAL folded in, one file on disk. */
    if (exec_sql(to, "PRAGMA wal_checkpoint(TRUNCATE)") != 0) {
        snprintf(why, whysz, "cannot finish %s", dest);
        goto out;
    }
    result = 0;
out:
    if (to != NULL)
        sqlite3_close(to);
    if (result == 0) {
        fd = open(dest, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || fsync(fd) != 0) {
            snprintf(why, whysz, "cannot flush %s to disk: %s", dest, strerror(errno));
            result = -1;
        }
        if (fd >= 0)
            close(fd);
    }
    if (result != 0) {
        char side[4200];
        unlink(dest);
        snprintf(side, sizeof(side), "%s-wal", dest);
        unlink(side);
        snprintf(side, sizeof(side), "%s-shm", dest);
        unlink(side);
    }
out_keep:
    sqlite3_close(from);
    give_side_files_to_owner(src, &st);
    return result;
}
