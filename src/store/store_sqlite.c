/*
 * The embedded SQLite store.
 *
 * Everything runs on one thread (relayd's store worker, store_worker.c)
 * against one connection in WAL mode with synchronous=NORMAL: a commit is a write(2) into the WAL and no fsync, which
 * is durable against a crash of the process (the bar is kill -9), not against
 * power loss. Writes queued between two flushes share one transaction, each
 * operation inside its own savepoint so that a failing one leaves no trace;
 * rl_store_flush commits and only then runs the callbacks. Checkpoints (the
 * only fsyncs) run on a background thread with its own connection, so the
 * writer never waits for the disk to flush.
 */
#include <errno.h>
#include <stdarg.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <time.h>

#include "common/error.h"
#include "common/log.h"
#include "store/store.h"

#define STMT_CACHE 64

struct completion {
    rl_store_cb cb;
    void *arg;
    int result;
    int is_write;
    json_t *value;
};

struct sqlite_store {
    rl_store_t super;
    sqlite3 *db;
    char *path;
    int in_txn;
    struct completion *queue;
    size_t count, capacity;
    struct {
        const char *sql;
        sqlite3_stmt *stmt;
    } cache[STMT_CACHE];
    size_t ncache;
    pthread_t checkpointer;
    int checkpointer_running;
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
};

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

static sqlite3_stmt *prepare(struct sqlite_store *store, const char *sql)
{
    sqlite3_stmt *stmt = NULL;
    size_t i;

    /* Statements are keyed by the address of their (static) text. */
    for (i = 0; i < store->ncache; ++i) {
        if (store->cache[i].sql == sql) {
            sqlite3_reset(store->cache[i].stmt);
            sqlite3_clear_bindings(store->cache[i].stmt);
            return store->cache[i].stmt;
        }
    }
    if (sqlite3_prepare_v3(store->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, NULL) != SQLITE_OK) {
        rl_log_error("sqlite prepare: %s", sqlite3_errmsg(store->db));
        return NULL;
    }
    if (store->ncache < STMT_CACHE) {
        store->cache[store->ncache].sql = sql;
        store->cache[store->ncache].stmt = stmt;
        ++store->ncache;
    }
    return stmt;
}

static void bind_text(sqlite3_stmt *stmt, int index, const char *text)
{
    if (text == NULL)
        sqlite3_bind_null(stmt, index);
    else
        sqlite3_bind_text(stmt, index, text, -1, SQLITE_TRANSIENT);
}

/* Turns the current row into an object keyed by column name. */
static json_t *row_object(sqlite3_stmt *stmt)
{
    json_t *row = json_object();
    int i, n = sqlite3_column_count(stmt);

    for (i = 0; i < n; ++i) {
        const char *name = sqlite3_column_name(stmt, i);
        switch (sqlite3_column_type(stmt, i)) {
        case SQLITE_INTEGER:
            json_object_set_new(row, name, json_integer(sqlite3_column_int64(stmt, i)));
            break;
        case SQLITE_FLOAT:
            json_object_set_new(row, name, json_real(sqlite3_column_double(stmt, i)));
            break;
        case SQLITE_NULL:
            json_object_set_new(row, name, json_null());
            break;
        default:
            json_object_set_new(
                row, name,
                json_stringn((const char *)sqlite3_column_text(stmt, i), (size_t)sqlite3_column_bytes(stmt, i)));
            break;
        }
    }
    return row;
}

typedef json_t *(*row_builder_fn)(struct sqlite_store *store, sqlite3_stmt *stmt);

static json_t *plain_row(struct sqlite_store *store, sqlite3_stmt *stmt)
{
    return row_object(stmt);
}

/* Runs a query by one id: 0 and *out built from its row, `missing` when there is none. */
static int select_by_id(struct sqlite_store *store, const char *sql, const char *id, row_builder_fn build, int missing,
                        json_t **out)
{
    sqlite3_stmt *stmt = prepare(store, sql);
    int rc;

    if (stmt == NULL)
        return RL_E_INTERNAL;
    bind_text(stmt, 1, id);
    rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW)
        *out = build(store, stmt);
    sqlite3_reset(stmt);
    if (rc == SQLITE_ROW)
        return 0;
    return rc == SQLITE_DONE ? missing : RL_E_INTERNAL;
}

static void complete(struct sqlite_store *store, rl_store_cb cb, void *arg, int result, json_t *value, int is_write)
{
    if (store->count == store->capacity) {
        size_t capacity = store->capacity == 0 ? 64 : store->capacity * 2;
        struct completion *queue = realloc(store->queue, capacity * sizeof(*queue));
        if (queue == NULL) {
            rl_log_error("out of memory queueing a store completion");
            abort();
        }
        store->queue = queue;
        store->capacity = capacity;
    }
    store->queue[store->count++] = (struct completion){cb, arg, result, is_write, value};
}

/* Opens the turn's transaction if needed, then a savepoint for one operation. */
static int write_begin(struct sqlite_store *store)
{
    if (!store->in_txn) {
        if (exec_sql(store->db, "BEGIN IMMEDIATE") != 0)
            return -1;
        store->in_txn = 1;
    }
    return exec_sql(store->db, "SAVEPOINT op");
}

/* Keeps or undoes the operation's savepoint; on failure the store is as it was before the operation. */
static void write_end(struct sqlite_store *store, int result)
{
    if (result == 0) {
        exec_sql(store->db, "RELEASE op");
    } else {
        exec_sql(store->db, "ROLLBACK TO op");
        exec_sql(store->db, "RELEASE op");
    }
}

static int step_done(struct sqlite_store *store, sqlite3_stmt *stmt)
{
    int rc = sqlite3_step(stmt);

    if (rc == SQLITE_DONE)
        return 0;
    if ((rc & 0xff) == SQLITE_CONSTRAINT)
        return RL_E_IDEMPOTENCY_CONFLICT;
    rl_log_error("sqlite step: %s", sqlite3_errmsg(store->db));
    return RL_E_INTERNAL;
}

/*
 * Prepares sql, binds its parameters from the varargs as types says ('s' a
 * string or NULL, 'I' an int64_t, 'i' an int), and steps it to the end: the
 * common shape of a write. 0, RL_E_IDEMPOTENCY_CONFLICT on a constraint, or
 * RL_E_INTERNAL.
 */
static int exec_bound(struct sqlite_store *store, const char *sql, const char *types, ...)
{
    sqlite3_stmt *stmt = prepare(store, sql);
    va_list ap;
    int index = 1;

    if (stmt == NULL)
        return RL_E_INTERNAL;
    va_start(ap, types);
    for (; *types != '\0'; ++types, ++index) {
        if (*types == 's')
            bind_text(stmt, index, va_arg(ap, const char *));
        else if (*types == 'I')
            sqlite3_bind_int64(stmt, index, va_arg(ap, int64_t));
        else
            sqlite3_bind_int(stmt, index, va_arg(ap, int));
    }
    va_end(ap);
    return step_done(store, stmt);
}

static int sqlite_pending(rl_store_t *super)
{
    struct sqlite_store *store = (void *)super;

    return store->count > 0 || store->in_txn;
}

static void sqlite_flush(rl_store_t *super)
{
    struct sqlite_store *store = (void *)super;

    while (store->count > 0 || store->in_txn) {
        struct completion *batch = store->queue;
        size_t i, count = store->count;
        int commit_failed = 0;

        if (store->in_txn) {
            store->in_txn = 0;
            if (exec_sql(store->db, "COMMIT") != 0) {
                exec_sql(store->db, "ROLLBACK");
                commit_failed = 1;
            }
        }
        /* Callbacks may queue more work; they get a fresh queue while this batch runs. */
        store->queue = NULL;
        store->count = store->capacity = 0;
        for (i = 0; i < count; ++i) {
            struct completion *c = &batch[i];
            if (commit_failed && c->is_write && c->result == 0) {
                json_decref(c->value);
                c->value = NULL;
                c->result = RL_E_INTERNAL;
            }
            if (c->cb != NULL)
                c->cb(c->result, c->value, c->arg);
            else
                json_decref(c->value);
        }
        free(batch);
    }
}

static void sqlite_user_ensure(rl_store_t *super, const char *user_id, int64_t now, rl_store_cb cb, void *arg)
{
    static const char sql[] = "INSERT OR IGNORE INTO users(id, created_at) VALUES (?, ?)";
    struct sqlite_store *store = (void *)super;
    sqlite3_stmt *stmt;
    int result = RL_E_INTERNAL;

    if (write_begin(store) == 0 && (stmt = prepare(store, sql)) != NULL) {
        bind_text(stmt, 1, user_id);
        sqlite3_bind_int64(stmt, 2, now);
        result = step_done(store, stmt);
        write_end(store, result);
    }
    complete(store, cb, arg, result, NULL, 1);
}

static void sqlite_pairing_insert(rl_store_t *super, const rl_pairing_new_t *pairing, rl_store_cb cb, void *arg)
{
    static const char clear_sql[] =
        "DELETE FROM pairings WHERE code_hash = ? AND state = 'pending' AND expires_at <= ?";
    static const char insert_sql[] =
        "INSERT INTO pairings(poll_hash, code_hash, installation_id, connector_type, host_label, state,"
        " created_at, expires_at) VALUES (?, ?, ?, ?, ?, 'pending', ?, ?)";
    struct sqlite_store *store = (void *)super;
    int result = RL_E_INTERNAL;

    if (write_begin(store) != 0)
        goto out;
    /* A code that expired unclaimed may be minted again. */
    if ((result = exec_bound(store, clear_sql, "sI", pairing->code_hash, (int64_t)pairing->created_at)) != 0)
        goto end;
    result = exec_bound(store, insert_sql, "sssssII", pairing->poll_hash, pairing->code_hash, pairing->installation_id,
                        pairing->connector_type, pairing->host_label, (int64_t)pairing->created_at,
                        (int64_t)pairing->expires_at);
end:
    write_end(store, result);
out:
    complete(store, cb, arg, result, NULL, 1);
}

static const char installation_select_sql[] =
    "SELECT id, user_id, token_hash, token_env, connector_type, host_label, custom_display_name, custom_emoji,"
    " state, created_at, revoked_at FROM installations WHERE id = ?";

static int select_installation(struct sqlite_store *store, const char *id, json_t **out)
{
    return select_by_id(store, installation_select_sql, id, plain_row, RL_E_INSTALLATION_NOT_FOUND, out);
}

static void sqlite_pairing_claim(rl_store_t *super, const char *code_hash, const char *user_id, int64_t now,
                                 rl_store_cb cb, void *arg)
{
    static const char find_sql[] = "SELECT installation_id, connector_type, host_label, expires_at FROM pairings"
                                   " WHERE code_hash = ? AND state = 'pending'";
    static const char user_sql[] = "INSERT OR IGNORE INTO users(id, created_at) VALUES (?, ?)";
    static const char consume_sql[] = "UPDATE pairings SET state = 'claimed', user_id = ?, claimed_at = ?"
                                      " WHERE code_hash = ? AND state = 'pending'";
    static const char create_sql[] = "INSERT INTO installations(id, user_id, connector_type, host_label, state,"
                                     " created_at) VALUES (?, ?, ?, ?, 'live', ?)";
    struct sqlite_store *store = (void *)super;
    char installation_id[64], connector_type[128], host_label[512];
    json_t *installation = NULL;
    sqlite3_stmt *stmt;
    int result = RL_E_INTERNAL;

    if (write_begin(store) != 0)
        goto out;
    if ((stmt = prepare(store, find_sql)) == NULL)
        goto end;
    bind_text(stmt, 1, code_hash);
    if (sqlite3_step(stmt) != SQLITE_ROW || sqlite3_column_int64(stmt, 3) <= now) {
        /* spec: a code is valid 120 s and consumed once; unknown, expired and consumed look the same. */
        sqlite3_reset(stmt);
        result = RL_E_PAIRING_NOT_FOUND;
        goto end;
    }
    snprintf(installation_id, sizeof(installation_id), "%s", (const char *)sqlite3_column_text(stmt, 0));
    snprintf(connector_type, sizeof(connector_type), "%s", (const char *)sqlite3_column_text(stmt, 1));
    snprintf(host_label, sizeof(host_label), "%s", (const char *)sqlite3_column_text(stmt, 2));
    sqlite3_reset(stmt);

    if ((result = exec_bound(store, user_sql, "sI", user_id, (int64_t)now)) != 0)
        goto end;
    if ((result = exec_bound(store, consume_sql, "sIs", user_id, (int64_t)now, code_hash)) != 0)
        goto end;
    if ((result = exec_bound(store, create_sql, "ssssI", installation_id, user_id, connector_type, host_label,
                             (int64_t)now)) != 0)
        goto end;
    result = select_installation(store, installation_id, &installation);
end:
    write_end(store, result);
out:
    complete(store, cb, arg, result, result == 0 ? installation : NULL, 1);
    if (result != 0)
        json_decref(installation);
}

static void sqlite_pairing_poll(rl_store_t *super, const char *poll_hash, const char *token_hash, const char *token_env,
                                int64_t now, rl_store_cb cb, void *arg)
{
    static const char find_sql[] = "SELECT state, installation_id, expires_at FROM pairings WHERE poll_hash = ?";
    static const char token_sql[] = "UPDATE installations SET token_hash = ?, token_env = ? WHERE id = ?";
    static const char spend_sql[] = "UPDATE pairings SET state = 'delivered' WHERE poll_hash = ?";
    struct sqlite_store *store = (void *)super;
    char state[16], installation_id[64];
    int64_t expires_at;
    json_t *value = NULL;
    sqlite3_stmt *stmt;
    int result = RL_E_INTERNAL;

    if (write_begin(store) != 0)
        goto out;
    if ((stmt = prepare(store, find_sql)) == NULL)
        goto end;
    bind_text(stmt, 1, poll_hash);
    if (sqlite3_step(stmt) != SQLITE_ROW) {
        sqlite3_reset(stmt);
        result = RL_E_PAIRING_NOT_FOUND;
        goto end;
    }
    snprintf(state, sizeof(state), "%s", (const char *)sqlite3_column_text(stmt, 0));
    snprintf(installation_id, sizeof(installation_id), "%s", (const char *)sqlite3_column_text(stmt, 1));
    expires_at = sqlite3_column_int64(stmt, 2);
    sqlite3_reset(stmt);

    if (strcmp(state, "pending") == 0) {
        result = expires_at <= now ? RL_E_PAIRING_EXPIRED : 0;
        if (result == 0)
            value = json_pack("{s:s}", "status", "pending");
        goto end;
    }
    if (strcmp(state, "claimed") != 0) {
        /* The token is handed out once; a spent pairing is gone. */
        result = RL_E_PAIRING_NOT_FOUND;
        goto end;
    }
    if ((result = exec_bound(store, token_sql, "sss", token_hash, token_env, installation_id)) != 0)
        goto end;
    if ((result = exec_bound(store, spend_sql, "s", poll_hash)) != 0)
        goto end;
    value = json_pack("{s:s, s:s}", "status", "paired", "installation_id", installation_id);
end:
    write_end(store, result);
out:
    complete(store, cb, arg, result, result == 0 ? value : NULL, 1);
    if (result != 0)
        json_decref(value);
}

static void sqlite_installation_get(rl_store_t *super, const char *installation_id, rl_store_cb cb, void *arg)
{
    struct sqlite_store *store = (void *)super;
    json_t *installation = NULL;
    int result = select_installation(store, installation_id, &installation);

    complete(store, cb, arg, result, installation, 0);
}

static void sqlite_installation_set_manifest(rl_store_t *super, const char *installation_id, const char *manifest,
                                             rl_store_cb cb, void *arg)
{
    static const char sql[] = "UPDATE installations SET manifest = ? WHERE id = ?";
    struct sqlite_store *store = (void *)super;
    sqlite3_stmt *stmt;
    int result = RL_E_INTERNAL;

    if (write_begin(store) == 0 && (stmt = prepare(store, sql)) != NULL) {
        bind_text(stmt, 1, manifest);
        bind_text(stmt, 2, installation_id);
        result = step_done(store, stmt);
        if (result == 0 && sqlite3_changes(store->db) == 0)
            result = RL_E_INSTALLATION_NOT_FOUND;
        write_end(store, result);
    }
    complete(store, cb, arg, result, NULL, 1);
}

static void sqlite_purge(rl_store_t *super, int64_t now, int64_t delete_grace, rl_store_cb cb, void *arg)
{
    /* Pairings are kept an hour past expiry so that a late poll still gets a clear answer. */
    static const char pairings_sql[] = "DELETE FROM pairings WHERE expires_at < ?";
    /* spec: a deleted session has a 24 h grace; then it goes, and its messages with it (ON DELETE CASCADE). */
    static const char sessions_sql[] = "DELETE FROM sessions WHERE deleted_at IS NOT NULL AND deleted_at <= ?";
    struct sqlite_store *store = (void *)super;
    int result = RL_E_INTERNAL, purged = 0;

    if (write_begin(store) != 0)
        goto out;
    if ((result = exec_bound(store, pairings_sql, "I", (int64_t)(now - 3600 * 1000))) != 0)
        goto end;
    result = exec_bound(store, sessions_sql, "I", (int64_t)(now - delete_grace));
    purged = sqlite3_changes(store->db);
end:
    write_end(store, result);
out:
    complete(store, cb, arg, result, result == 0 ? json_pack("{s:i}", "sessions", purged) : NULL, 1);
}

/* ---- client API ---- */

static const char session_select_sql[] = "SELECT id, installation_id, title, state, created_at, updated_at, deleted_at"
                                         " FROM sessions WHERE id = ? AND user_id = ?";

/* The user's session (deleted ones included); RL_E_SESSION_NOT_FOUND for anyone else's. */
static int select_session(struct sqlite_store *store, const char *user_id, const char *session_id, json_t **out)
{
    sqlite3_stmt *stmt = prepare(store, session_select_sql);
    int rc;

    if (stmt == NULL)
        return RL_E_INTERNAL;
    bind_text(stmt, 1, session_id);
    bind_text(stmt, 2, user_id);
    rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW)
        *out = row_object(stmt);
    sqlite3_reset(stmt);
    if (rc == SQLITE_ROW)
        return 0;
    return rc == SQLITE_DONE ? RL_E_SESSION_NOT_FOUND : RL_E_INTERNAL;
}

/* The user's installation; RL_E_INSTALLATION_NOT_FOUND for anyone else's. */
static int select_user_installation(struct sqlite_store *store, const char *user_id, const char *id, json_t **out)
{
    json_t *row = NULL;
    int result = select_installation(store, id, &row);

    const char *owner = result == 0 ? json_string_value(json_object_get(row, "user_id")) : NULL;

    if (result == 0 && (owner == NULL || strcmp(owner, user_id) != 0)) {
        json_decref(row);
        return RL_E_INSTALLATION_NOT_FOUND;
    }
    *out = row;
    return result;
}

static int installation_live(json_t *installation)
{
    const char *state = json_string_value(json_object_get(installation, "state"));

    return state != NULL && strcmp(state, "live") == 0;
}

/*
 * Appends an update to the installation's queue; its id is the installation's
 * next counter value. Steals payload.
 */
static int enqueue_update(struct sqlite_store *store, const char *installation_id, const char *type,
                          const char *session_id, const char *interaction_id, json_t *payload, int64_t now,
                          int64_t *update_id)
{
    static const char counter_sql[] =
        "UPDATE installations SET next_update_id = next_update_id + 1 WHERE id = ? RETURNING next_update_id - 1";
    static const char insert_sql[] = "INSERT INTO updates(installation_id, update_id, type, session_id,"
                                     " interaction_id, payload, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)";
    sqlite3_stmt *stmt;
    char *text;
    int result;

    text = json_dumps(payload, JSON_COMPACT);
    json_decref(payload);
    if (text == NULL || (stmt = prepare(store, counter_sql)) == NULL) {
        free(text);
        return RL_E_INTERNAL;
    }
    bind_text(stmt, 1, installation_id);
    if (sqlite3_step(stmt) != SQLITE_ROW) {
        sqlite3_reset(stmt);
        free(text);
        return RL_E_INSTALLATION_NOT_FOUND;
    }
    *update_id = sqlite3_column_int64(stmt, 0);
    sqlite3_reset(stmt);
    if ((stmt = prepare(store, insert_sql)) == NULL) {
        free(text);
        return RL_E_INTERNAL;
    }
    bind_text(stmt, 1, installation_id);
    sqlite3_bind_int64(stmt, 2, *update_id);
    bind_text(stmt, 3, type);
    bind_text(stmt, 4, session_id);
    bind_text(stmt, 5, interaction_id);
    bind_text(stmt, 6, text);
    sqlite3_bind_int64(stmt, 7, now);
    result = step_done(store, stmt);
    free(text);
    return result;
}

static void sqlite_me_get(rl_store_t *super, const char *user_id, rl_store_cb cb, void *arg)
{
    static const char user_sql[] = "SELECT id, created_at FROM users WHERE id = ?";
    static const char installations_sql[] =
        "SELECT id, user_id, token_hash, token_env, connector_type, host_label, custom_display_name, custom_emoji,"
        " state, created_at, revoked_at FROM installations WHERE user_id = ? ORDER BY created_at, id";
    static const char sessions_sql[] = "SELECT id, installation_id, title, state, created_at, updated_at, deleted_at"
                                       " FROM sessions WHERE user_id = ? AND deleted_at IS NULL"
                                       " ORDER BY updated_at DESC, id";
    struct sqlite_store *store = (void *)super;
    json_t *value =
        json_pack("{s:o, s:o, s:o}", "user", json_null(), "installations", json_array(), "sessions", json_array());
    sqlite3_stmt *stmt;
    int result = RL_E_INTERNAL, own_txn = !store->in_txn;

    /* Three reads in one transaction take SQLite's file lock once, not three times. */
    if (own_txn && exec_sql(store->db, "BEGIN") != 0)
        goto out;
    if ((stmt = prepare(store, user_sql)) == NULL)
        goto out;
    bind_text(stmt, 1, user_id);
    if (sqlite3_step(stmt) == SQLITE_ROW)
        json_object_set_new(value, "user", row_object(stmt));
    sqlite3_reset(stmt);
    if ((stmt = prepare(store, installations_sql)) == NULL)
        goto out;
    bind_text(stmt, 1, user_id);
    while (sqlite3_step(stmt) == SQLITE_ROW)
        json_array_append_new(json_object_get(value, "installations"), row_object(stmt));
    sqlite3_reset(stmt);
    if ((stmt = prepare(store, sessions_sql)) == NULL)
        goto out;
    bind_text(stmt, 1, user_id);
    while (sqlite3_step(stmt) == SQLITE_ROW)
        json_array_append_new(json_object_get(value, "sessions"), row_object(stmt));
    sqlite3_reset(stmt);
    result = 0;
out:
    if (own_txn && !store->in_txn)
        exec_sql(store->db, "COMMIT");
    if (result != 0) {
        json_decref(value);
        value = NULL;
    }
    complete(store, cb, arg, result, value, 0);
}

static void sqlite_installation_patch(rl_store_t *super, const char *user_id, const char *installation_id,
                                      const rl_installation_patch_t *patch, rl_store_cb cb, void *arg)
{
    static const char sql[] = "UPDATE installations SET"
                              " custom_display_name = CASE WHEN ? THEN ? ELSE custom_display_name END,"
                              " custom_emoji = CASE WHEN ? THEN ? ELSE custom_emoji END"
                              " WHERE id = ? AND user_id = ?";
    struct sqlite_store *store = (void *)super;
    json_t *installation = NULL;
    int result = RL_E_INTERNAL;

    if (write_begin(store) != 0)
        goto out;
    if ((result = select_user_installation(store, user_id, installation_id, &installation)) != 0)
        goto end;
    json_decref(installation);
    installation = NULL;
    if ((result = exec_bound(store, sql, "isisss", (int)(patch->set_name), patch->name, (int)(patch->set_emoji),
                             patch->emoji, installation_id, user_id)) != 0)
        goto end;
    result = select_installation(store, installation_id, &installation);
end:
    write_end(store, result);
out:
    complete(store, cb, arg, result, result == 0 ? installation : NULL, 1);
    if (result != 0)
        json_decref(installation);
}

static void sqlite_installation_revoke(rl_store_t *super, const char *user_id, const char *installation_id, int64_t now,
                                       rl_store_cb cb, void *arg)
{
    static const char sql[] = "UPDATE installations SET state = 'revoked', revoked_at = ?"
                              " WHERE id = ? AND user_id = ? AND state != 'revoked'";
    struct sqlite_store *store = (void *)super;
    json_t *installation = NULL, *value = NULL;
    int result = RL_E_INTERNAL, changed = 0;

    if (write_begin(store) != 0)
        goto out;
    if ((result = select_user_installation(store, user_id, installation_id, &installation)) != 0)
        goto end;
    json_decref(installation);
    installation = NULL;
    if ((result = exec_bound(store, sql, "Iss", (int64_t)now, installation_id, user_id)) != 0)
        goto end;
    changed = sqlite3_changes(store->db) > 0;
    if ((result = select_installation(store, installation_id, &installation)) != 0)
        goto end;
    value = json_pack("{s:o, s:b}", "installation", installation, "changed", changed);
end:
    write_end(store, result);
out:
    complete(store, cb, arg, result, result == 0 ? value : NULL, 1);
}

static void sqlite_session_create(rl_store_t *super, const rl_session_new_t *session, rl_store_cb cb, void *arg)
{
    static const char sql[] = "INSERT INTO sessions(id, user_id, installation_id, title, state, created_at,"
                              " updated_at) VALUES (?, ?, ?, ?, 'active', ?, ?)";
    struct sqlite_store *store = (void *)super;
    json_t *installation = NULL, *row = NULL, *value = NULL;
    int64_t update_id = 0;
    int result = RL_E_INTERNAL;

    if (write_begin(store) != 0)
        goto out;
    if ((result = select_user_installation(store, session->user_id, session->installation_id, &installation)) != 0)
        goto end;
    if (!installation_live(installation)) {
        result = RL_E_INSTALLATION_REVOKED;
        goto end;
    }
    if ((result = exec_bound(store, sql, "ssssII", session->session_id, session->user_id, session->installation_id,
                             session->title, (int64_t)session->now, (int64_t)session->now)) != 0)
        goto end;
    if ((result = select_session(store, session->user_id, session->session_id, &row)) != 0)
        goto end;
    /* spec: a new session reaches the bridge as session.started. */
    result = enqueue_update(
        store, session->installation_id, "session.started", session->session_id, NULL,
        json_pack("{s:{s:s, s:O}}", "session", "id", session->session_id, "title", json_object_get(row, "title")),
        session->now, &update_id);
    if (result == 0)
        value = json_pack("{s:O, s:I}", "session", row, "update_id", (json_int_t)update_id);
end:
    write_end(store, result);
out:
    json_decref(installation);
    json_decref(row);
    complete(store, cb, arg, result, result == 0 ? value : NULL, 1);
}

static void sqlite_session_change(rl_store_t *super, const char *user_id, const char *session_id, rl_session_op_t op,
                                  const char *title, int64_t now, int64_t delete_grace, rl_store_cb cb, void *arg)
{
    static const char rename_sql[] = "UPDATE sessions SET title = ?, updated_at = ? WHERE id = ?";
    static const char state_sql[] = "UPDATE sessions SET state = ?, updated_at = ? WHERE id = ?";
    static const char delete_sql[] = "UPDATE sessions SET deleted_at = ?, updated_at = ? WHERE id = ?";
    static const char restore_sql[] = "UPDATE sessions SET deleted_at = NULL, updated_at = ? WHERE id = ?";
    struct sqlite_store *store = (void *)super;
    json_t *row = NULL, *value = NULL, *deleted_at;
    const char *state;
    sqlite3_stmt *stmt = NULL;
    int result = RL_E_INTERNAL, changed = 1;

    if (write_begin(store) != 0)
        goto out;
    if ((result = select_session(store, user_id, session_id, &row)) != 0)
        goto end;
    result = RL_E_INTERNAL;
    deleted_at = json_object_get(row, "deleted_at");
    state = json_string_value(json_object_get(row, "state"));
    if (op == RL_SESSION_RESTORE) {
        /* brief: restore works inside the grace; afterwards the session is as good as purged. */
        if (json_is_null(deleted_at)) {
            changed = 0;
        } else if (json_integer_value(deleted_at) + delete_grace <= now) {
            result = RL_E_SESSION_NOT_FOUND;
            goto end;
        } else if ((stmt = prepare(store, restore_sql)) != NULL) {
            sqlite3_bind_int64(stmt, 1, now);
            bind_text(stmt, 2, session_id);
        }
    } else if (!json_is_null(deleted_at)) {
        result = RL_E_SESSION_NOT_FOUND;
        goto end;
    } else if (op == RL_SESSION_RENAME) {
        if ((stmt = prepare(store, rename_sql)) != NULL) {
            bind_text(stmt, 1, title);
            sqlite3_bind_int64(stmt, 2, now);
            bind_text(stmt, 3, session_id);
        }
    } else if (op == RL_SESSION_ARCHIVE || op == RL_SESSION_UNARCHIVE) {
        const char *target = op == RL_SESSION_ARCHIVE ? "archived" : "active";
        if (state != NULL && strcmp(state, target) == 0) {
            changed = 0;
        } else if ((stmt = prepare(store, state_sql)) != NULL) {
            bind_text(stmt, 1, target);
            sqlite3_bind_int64(stmt, 2, now);
            bind_text(stmt, 3, session_id);
        }
    } else if ((stmt = prepare(store, delete_sql)) != NULL) {
        sqlite3_bind_int64(stmt, 1, now);
        sqlite3_bind_int64(stmt, 2, now);
        bind_text(stmt, 3, session_id);
    }
    if (changed) {
        if (stmt == NULL || (result = step_done(store, stmt)) != 0)
            goto end;
        json_decref(row);
        row = NULL;
        if ((result = select_session(store, user_id, session_id, &row)) != 0)
            goto end;
    }
    result = 0;
    value = json_pack("{s:O, s:b}", "session", row, "changed", changed);
end:
    write_end(store, result);
out:
    json_decref(row);
    complete(store, cb, arg, result, result == 0 ? value : NULL, 1);
}

/* The session must be the user's and not deleted, and its installation live. */
static int live_session(struct sqlite_store *store, const char *user_id, const char *session_id, json_t **session)
{
    json_t *installation = NULL;
    int result = select_session(store, user_id, session_id, session);

    if (result != 0)
        return result;
    if (!json_is_null(json_object_get(*session, "deleted_at")))
        return RL_E_SESSION_NOT_FOUND;
    result = select_installation(store, json_string_value(json_object_get(*session, "installation_id")), &installation);
    if (result == 0 && !installation_live(installation))
        result = RL_E_INSTALLATION_REVOKED;
    json_decref(installation);
    return result;
}

static void sqlite_session_cancel(rl_store_t *super, const char *user_id, const char *session_id,
                                  const char *interaction_id, int64_t now, rl_store_cb cb, void *arg)
{
    static const char interaction_sql[] = "SELECT 1 FROM interactions WHERE id = ? AND session_id = ?";
    struct sqlite_store *store = (void *)super;
    json_t *session = NULL, *value = NULL;
    sqlite3_stmt *stmt;
    int64_t update_id = 0;
    int result = RL_E_INTERNAL;

    if (write_begin(store) != 0)
        goto out;
    if ((result = live_session(store, user_id, session_id, &session)) != 0)
        goto end;
    if (interaction_id != NULL) {
        result = RL_E_INTERNAL;
        if ((stmt = prepare(store, interaction_sql)) == NULL)
            goto end;
        bind_text(stmt, 1, interaction_id);
        bind_text(stmt, 2, session_id);
        result = sqlite3_step(stmt) == SQLITE_ROW ? 0 : RL_E_INTERACTION_NOT_FOUND;
        sqlite3_reset(stmt);
        if (result != 0)
            goto end;
    }
    result = enqueue_update(
        store, json_string_value(json_object_get(session, "installation_id")), "session.cancelled", session_id,
        interaction_id, interaction_id != NULL ? json_pack("{s:s}", "interaction_id", interaction_id) : json_object(),
        now, &update_id);
    if (result == 0)
        value = json_pack("{s:O, s:I}", "session", session, "update_id", (json_int_t)update_id);
end:
    write_end(store, result);
out:
    json_decref(session);
    complete(store, cb, arg, result, result == 0 ? value : NULL, 1);
}

static const char message_columns[] = "id, session_id, interaction_id, role, text, attachments, reply_to, usage,"
                                      " finish_reason, state, created_at, finalized_at, placeholder";

/*
 * The text of an open message: its deltas in order, after the opening text
 * unless that was the placeholder (which the first delta replaces).
 */
/*
 * The (key, body_hash) pairs of a message's stored deltas, ?3 being the
 * message id: schema 6 rows carry a JSON array of pairs, schema 5 rows one pair.
 */
#define DELTA_KEYS_OF_MESSAGE                                                                                          \
    "SELECT key, body_hash FROM message_deltas WHERE message_id = ?3 AND key IS NOT NULL"                              \
    " UNION ALL SELECT json_extract(p.value, '$[0]'), json_extract(p.value, '$[1]')"                                   \
    " FROM message_deltas, json_each(message_deltas.keys) AS p"                                                        \
    " WHERE message_deltas.message_id = ?3 AND message_deltas.keys IS NOT NULL"

static int streamed_text(struct sqlite_store *store, const char *message_id, const char *opening, int placeholder,
                         json_t **out)
{
    static const char sql[] = "SELECT delta FROM message_deltas WHERE message_id = ? ORDER BY seq";
    sqlite3_stmt *stmt = prepare(store, sql);
    size_t len = placeholder ? 0 : strlen(opening), cap = len + 256;
    char *text = malloc(cap);
    int rc, any = 0;

    if (stmt == NULL || text == NULL) {
        free(text);
        return RL_E_INTERNAL;
    }
    memcpy(text, opening, len);
    bind_text(stmt, 1, message_id);
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        size_t n = (size_t)sqlite3_column_bytes(stmt, 0);
        if (len + n + 1 > cap) {
            char *grown;
            cap = (len + n + 1) * 2;
            grown = realloc(text, cap);
            if (grown == NULL) {
                sqlite3_reset(stmt);
                free(text);
                return RL_E_INTERNAL;
            }
            text = grown;
        }
        memcpy(text + len, sqlite3_column_text(stmt, 0), n);
        len += n;
        any = 1;
    }
    sqlite3_reset(stmt);
    if (!any && placeholder) {
        text[0] = ' ';
        len = 1;
    }
    *out = json_stringn(text, len);
    free(text);
    return rc == SQLITE_DONE && *out != NULL ? 0 : RL_E_INTERNAL;
}

/* A message row as the API shows it: JSON columns decoded, the id under message_id, streamed text joined. */
static json_t *message_object(struct sqlite_store *store, sqlite3_stmt *stmt)
{
    json_t *row = row_object(stmt), *decoded, *text = NULL;
    const char *keys[] = {"attachments", "usage"};
    const char *state = json_string_value(json_object_get(row, "state"));
    size_t i;

    if (state != NULL && strcmp(state, "streaming") == 0 &&
        streamed_text(store, json_string_value(json_object_get(row, "id")),
                      json_string_value(json_object_get(row, "text")),
                      (int)json_integer_value(json_object_get(row, "placeholder")), &text) == 0)
        json_object_set_new(row, "text", text);
    json_object_del(row, "placeholder");

    json_object_set(row, "message_id", json_object_get(row, "id"));
    json_object_del(row, "id");
    for (i = 0; i < 2; ++i) {
        const char *text = json_string_value(json_object_get(row, keys[i]));
        decoded = text != NULL ? json_loads(text, 0, NULL) : NULL;
        json_object_set_new(row, keys[i], decoded != NULL ? decoded : (i == 0 ? json_array() : json_null()));
    }
    return row;
}

static void sqlite_messages_list(rl_store_t *super, const char *user_id, const char *session_id, int limit,
                                 const char *before, rl_store_cb cb, void *arg)
{
    static const char cursor_sql[] = "SELECT rowid FROM messages WHERE id = ? AND session_id = ?";
    static char page_sql[256];
    struct sqlite_store *store = (void *)super;
    json_t *session = NULL, *messages = json_array(), *value = NULL;
    sqlite3_stmt *stmt;
    int64_t cursor = INT64_MAX;
    int result, count = 0;

    if (page_sql[0] == '\0')
        snprintf(page_sql, sizeof(page_sql),
                 "SELECT %s FROM messages WHERE session_id = ? AND rowid < ? ORDER BY rowid DESC LIMIT ?",
                 message_columns);
    if ((result = select_session(store, user_id, session_id, &session)) != 0)
        goto out;
    if (!json_is_null(json_object_get(session, "deleted_at"))) {
        result = RL_E_SESSION_NOT_FOUND;
        goto out;
    }
    result = RL_E_INTERNAL;
    if (before != NULL) {
        if ((stmt = prepare(store, cursor_sql)) == NULL)
            goto out;
        bind_text(stmt, 1, before);
        bind_text(stmt, 2, session_id);
        if (sqlite3_step(stmt) == SQLITE_ROW)
            cursor = sqlite3_column_int64(stmt, 0);
        else
            cursor = -1;
        sqlite3_reset(stmt);
        if (cursor < 0) {
            result = RL_E_MESSAGE_NOT_FOUND;
            goto out;
        }
    }
    if ((stmt = prepare(store, page_sql)) == NULL)
        goto out;
    bind_text(stmt, 1, session_id);
    sqlite3_bind_int64(stmt, 2, cursor);
    /* One row more than asked tells whether there is another page. */
    sqlite3_bind_int(stmt, 3, limit + 1);
    while (sqlite3_step(stmt) == SQLITE_ROW) {
        if (++count > limit)
            break;
        json_array_append_new(messages, message_object(store, stmt));
    }
    sqlite3_reset(stmt);
    result = 0;
    value = json_pack("{s:O, s:b, s:O}", "messages", messages, "has_more", count > limit, "next_cursor",
                      count > limit ? json_object_get(json_array_get(messages, (size_t)limit - 1), "message_id")
                                    : json_null());
out:
    json_decref(messages);
    json_decref(session);
    complete(store, cb, arg, result, result == 0 ? value : NULL, 0);
}

static int select_message(struct sqlite_store *store, const char *message_id, json_t **out)
{
    static char sql[256];

    if (sql[0] == '\0')
        snprintf(sql, sizeof(sql), "SELECT %s FROM messages WHERE id = ?", message_columns);
    return select_by_id(store, sql, message_id, message_object, RL_E_MESSAGE_NOT_FOUND, out);
}

/*
 * Resolves attachment references against the user's uploads: the stored
 * mime, size and name win over whatever the client claimed. RL_E_NOT_FOUND
 * for a key that is not the user's.
 */
static int resolve_attachments(struct sqlite_store *store, const char *user_id, const char *refs, char **out)
{
    static const char sql[] = "SELECT key, mime, size, name FROM attachments WHERE key = ? AND user_id = ?";
    json_t *items = json_loads(refs, 0, NULL), *resolved = json_array(), *item;
    sqlite3_stmt *stmt;
    int result = 0;
    size_t i;

    if (!json_is_array(items)) {
        result = RL_E_INTERNAL;
        goto out;
    }
    json_array_foreach(items, i, item)
    {
        if ((stmt = prepare(store, sql)) == NULL) {
            result = RL_E_INTERNAL;
            goto out;
        }
        bind_text(stmt, 1, json_string_value(json_object_get(item, "key")));
        bind_text(stmt, 2, user_id);
        if (sqlite3_step(stmt) != SQLITE_ROW) {
            sqlite3_reset(stmt);
            result = RL_E_NOT_FOUND;
            goto out;
        }
        json_array_append_new(resolved, row_object(stmt));
        sqlite3_reset(stmt);
    }
    *out = json_dumps(resolved, JSON_COMPACT);
    if (*out == NULL)
        result = RL_E_INTERNAL;
out:
    json_decref(items);
    json_decref(resolved);
    return result;
}

static void sqlite_message_send(rl_store_t *super, const rl_message_send_t *send, rl_store_cb cb, void *arg)
{
    char *attachments = NULL;
    static const char reply_sql[] = "SELECT 1 FROM messages WHERE id = ? AND session_id = ?";
    static const char interaction_sql[] = "INSERT INTO interactions(id, session_id, created_at) VALUES (?, ?, ?)";
    static const char message_sql[] = "INSERT INTO messages(id, session_id, interaction_id, role, text, attachments,"
                                      " reply_to, state, created_at, finalized_at)"
                                      " VALUES (?, ?, ?, 'user', ?, ?, ?, 'final', ?, ?)";
    static const char touch_sql[] = "UPDATE sessions SET updated_at = ? WHERE id = ?";
    struct sqlite_store *store = (void *)super;
    json_t *session = NULL, *message = NULL, *value = NULL, *payload;
    sqlite3_stmt *stmt;
    int64_t update_id = 0;
    int result = RL_E_INTERNAL;

    if (write_begin(store) != 0)
        goto out;
    if ((result = live_session(store, send->user_id, send->session_id, &session)) != 0)
        goto end;
    if ((result = resolve_attachments(store, send->user_id, send->attachments, &attachments)) != 0)
        goto end;
    result = RL_E_INTERNAL;
    if (send->reply_to != NULL) {
        if ((stmt = prepare(store, reply_sql)) == NULL)
            goto end;
        bind_text(stmt, 1, send->reply_to);
        bind_text(stmt, 2, send->session_id);
        result = sqlite3_step(stmt) == SQLITE_ROW ? 0 : RL_E_MESSAGE_NOT_FOUND;
        sqlite3_reset(stmt);
        if (result != 0)
            goto end;
        result = RL_E_INTERNAL;
    }
    if ((result = exec_bound(store, interaction_sql, "ssI", send->interaction_id, send->session_id,
                             (int64_t)send->now)) != 0)
        goto end;
    if ((result = exec_bound(store, message_sql, "ssssssII", send->message_id, send->session_id, send->interaction_id,
                             send->text, attachments, send->reply_to, (int64_t)send->now, (int64_t)send->now)) != 0)
        goto end;
    if ((result = exec_bound(store, touch_sql, "Is", (int64_t)send->now, send->session_id)) != 0)
        goto end;
    if ((result = select_message(store, send->message_id, &message)) != 0)
        goto end;
    /* spec: session.message carries session (id, title) and message (text, attachments). */
    payload = json_pack("{s:{s:s, s:O}, s:{s:s, s:s, s:O, s:O, s:s}}", "session", "id", send->session_id, "title",
                        json_object_get(session, "title"), "message", "message_id", send->message_id, "text",
                        send->text, "attachments", json_object_get(message, "attachments"), "reply_to",
                        json_object_get(message, "reply_to"), "thought_level", send->thought_level);
    result = enqueue_update(store, json_string_value(json_object_get(session, "installation_id")), "session.message",
                            send->session_id, send->interaction_id, payload, send->now, &update_id);
    if (result == 0)
        value =
            json_pack("{s:O, s:O, s:I}", "message", message, "session", session, "update_id", (json_int_t)update_id);
end:
    write_end(store, result);
out:
    json_decref(session);
    json_decref(message);
    free(attachments);
    complete(store, cb, arg, result, result == 0 ? value : NULL, 1);
}

static void sqlite_session_get(rl_store_t *super, const char *user_id, const char *session_id, rl_store_cb cb,
                               void *arg)
{
    struct sqlite_store *store = (void *)super;
    json_t *session = NULL;
    int result = select_session(store, user_id, session_id, &session);

    complete(store, cb, arg, result, session, 0);
}

static void sqlite_attachment_insert(rl_store_t *super, const rl_attachment_new_t *attachment, rl_store_cb cb,
                                     void *arg)
{
    static const char sql[] = "INSERT INTO attachments(key, user_id, mime, size, name, created_at)"
                              " VALUES (?, ?, ?, ?, ?, ?)";
    struct sqlite_store *store = (void *)super;
    sqlite3_stmt *stmt;
    int result = RL_E_INTERNAL;

    if (write_begin(store) == 0 && (stmt = prepare(store, sql)) != NULL) {
        bind_text(stmt, 1, attachment->key);
        bind_text(stmt, 2, attachment->user_id);
        bind_text(stmt, 3, attachment->mime);
        sqlite3_bind_int64(stmt, 4, attachment->size);
        bind_text(stmt, 5, attachment->name);
        sqlite3_bind_int64(stmt, 6, attachment->now);
        result = step_done(store, stmt);
        write_end(store, result);
    }
    complete(store, cb, arg, result, NULL, 1);
}

static void sqlite_attachment_get(rl_store_t *super, const char *key, rl_store_cb cb, void *arg)
{
    static const char sql[] = "SELECT key, user_id, mime, size, name, created_at FROM attachments WHERE key = ?";
    struct sqlite_store *store = (void *)super;
    json_t *row = NULL;
    sqlite3_stmt *stmt;
    int result = RL_E_INTERNAL, rc;

    if ((stmt = prepare(store, sql)) != NULL) {
        bind_text(stmt, 1, key);
        rc = sqlite3_step(stmt);
        if (rc == SQLITE_ROW)
            row = row_object(stmt);
        sqlite3_reset(stmt);
        result = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? RL_E_NOT_FOUND : RL_E_INTERNAL;
    }
    complete(store, cb, arg, result, row, 0);
}

/* ---- bridge writes ---- */

/* 0: a new write; 1: a replay, *cached holds the stored response; RL_E_IDEMPOTENCY_CONFLICT. */
static int idem_check(struct sqlite_store *store, const rl_idempotency_t *idem, json_t **cached)
{
    static const char sql[] = "SELECT body_hash, response FROM idempotency WHERE owner = ? AND scope = ? AND key = ?";
    sqlite3_stmt *stmt;
    int result = 0;

    if (idem == NULL || idem->key == NULL)
        return 0;
    if ((stmt = prepare(store, sql)) == NULL)
        return RL_E_INTERNAL;
    bind_text(stmt, 1, idem->owner);
    bind_text(stmt, 2, idem->scope);
    bind_text(stmt, 3, idem->key);
    if (sqlite3_step(stmt) == SQLITE_ROW) {
        if (strcmp((const char *)sqlite3_column_text(stmt, 0), idem->body_hash) != 0) {
            result = RL_E_IDEMPOTENCY_CONFLICT;
        } else {
            *cached = json_loads((const char *)sqlite3_column_text(stmt, 1), 0, NULL);
            result = *cached != NULL ? 1 : RL_E_INTERNAL;
        }
    }
    sqlite3_reset(stmt);
    return result;
}

static int idem_record(struct sqlite_store *store, const rl_idempotency_t *idem, json_t *response, int64_t now)
{
    static const char sql[] = "INSERT INTO idempotency(owner, scope, key, body_hash, response, created_at)"
                              " VALUES (?, ?, ?, ?, ?, ?)";
    sqlite3_stmt *stmt;
    char *text;
    int result;

    if (idem == NULL || idem->key == NULL)
        return 0;
    if ((stmt = prepare(store, sql)) == NULL || (text = json_dumps(response, JSON_COMPACT)) == NULL)
        return RL_E_INTERNAL;
    bind_text(stmt, 1, idem->owner);
    bind_text(stmt, 2, idem->scope);
    bind_text(stmt, 3, idem->key);
    bind_text(stmt, 4, idem->body_hash);
    bind_text(stmt, 5, text);
    sqlite3_bind_int64(stmt, 6, now);
    result = step_done(store, stmt);
    free(text);
    return result;
}

static json_t *replay_value(json_t *cached)
{
    return json_pack("{s:o, s:b}", "response", cached, "idempotent", 1);
}

/* spec: writes land in a session of this installation that is not deleted, inside the follow-up window. */
static int check_target(struct sqlite_store *store, const rl_bridge_target_t *target, json_t **session)
{
    static const char session_sql[] =
        "SELECT id, user_id, installation_id, title, deleted_at FROM sessions WHERE id = ?";
    static const char interaction_sql[] = "SELECT created_at FROM interactions WHERE id = ? AND session_id = ?";
    const char *owner;
    sqlite3_stmt *stmt;
    int result = 0;

    if ((stmt = prepare(store, session_sql)) == NULL)
        return RL_E_INTERNAL;
    bind_text(stmt, 1, target->session_id);
    if (sqlite3_step(stmt) != SQLITE_ROW) {
        sqlite3_reset(stmt);
        return RL_E_SESSION_NOT_FOUND;
    }
    *session = row_object(stmt);
    sqlite3_reset(stmt);
    owner = json_string_value(json_object_get(*session, "installation_id"));
    if (owner == NULL || strcmp(owner, target->installation_id) != 0)
        return RL_E_SESSION_NOT_FOUND;
    if (!json_is_null(json_object_get(*session, "deleted_at")))
        return RL_E_SESSION_DELETED;
    if (target->interaction_id == NULL)
        return 0;
    if ((stmt = prepare(store, interaction_sql)) == NULL)
        return RL_E_INTERNAL;
    bind_text(stmt, 1, target->interaction_id);
    bind_text(stmt, 2, target->session_id);
    if (sqlite3_step(stmt) != SQLITE_ROW)
        result = RL_E_INTERACTION_NOT_FOUND;
    else if (sqlite3_column_int64(stmt, 0) + target->followup_ms < target->now)
        result = RL_E_INTERACTION_EXPIRED;
    sqlite3_reset(stmt);
    return result;
}

static void sqlite_message_open(rl_store_t *super, const rl_idempotency_t *idem, const rl_bridge_target_t *target,
                                const char *message_id, const char *user_id, json_t *body, rl_store_cb cb, void *arg)
{
    static const char sql[] =
        "INSERT INTO messages(id, session_id, interaction_id, role, text, attachments, reply_to,"
        " usage, state, created_at, placeholder) VALUES (?, ?, ?, 'agent', ?, ?, ?, ?, 'streaming', ?, ?)";
    struct sqlite_store *store = (void *)super;
    json_t *session = NULL, *cached = NULL, *message = NULL, *value = NULL, *response;
    const char *text = json_string_value(json_object_get(body, "text"));
    char *refs = NULL, *attachments = NULL, *usage = NULL;
    sqlite3_stmt *stmt;
    int result = RL_E_INTERNAL, placeholder = text == NULL || text[0] == '\0';

    if (write_begin(store) != 0)
        goto out;
    if ((result = check_target(store, target, &session)) != 0)
        goto end;
    if ((result = idem_check(store, idem, &cached)) != 0) {
        if (result == 1) {
            value = replay_value(cached);
            result = 0;
        }
        goto end;
    }
    refs = json_object_get(body, "attachments") != NULL ? json_dumps(json_object_get(body, "attachments"), JSON_COMPACT)
                                                        : strdup("[]");
    if (refs == NULL || (result = resolve_attachments(store, json_string_value(json_object_get(session, "user_id")),
                                                      refs, &attachments)) != 0)
        goto end;
    result = RL_E_INTERNAL;
    if (json_object_get(body, "usage") != NULL &&
        (usage = json_dumps(json_object_get(body, "usage"), JSON_COMPACT)) == NULL)
        goto end;
    if ((stmt = prepare(store, sql)) == NULL)
        goto end;
    bind_text(stmt, 1, message_id);
    bind_text(stmt, 2, target->session_id);
    bind_text(stmt, 3, target->interaction_id);
    /* spec: a placeholder agent message has the text of a single space. */
    bind_text(stmt, 4, placeholder ? " " : text);
    bind_text(stmt, 5, attachments);
    bind_text(stmt, 6, json_string_value(json_object_get(body, "reply_to")));
    bind_text(stmt, 7, usage);
    sqlite3_bind_int64(stmt, 8, target->now);
    sqlite3_bind_int(stmt, 9, placeholder);
    if ((result = step_done(store, stmt)) != 0)
        goto end;
    response = json_pack("{s:s}", "message_id", message_id);
    if ((result = idem_record(store, idem, response, target->now)) == 0 &&
        (result = select_message(store, message_id, &message)) == 0)
        value = json_pack("{s:O, s:b, s:O, s:o}", "response", response, "idempotent", 0, "user_id",
                          json_object_get(session, "user_id"), "message", message);
    json_decref(response);
end:
    write_end(store, result);
out:
    json_decref(session);
    free(refs);
    free(attachments);
    free(usage);
    if (result != 0) {
        json_decref(value);
        value = NULL;
    }
    complete(store, cb, arg, result, value, 1);
}

/* The message with its session's owner, if it belongs to the installation. */
static int bridge_message(struct sqlite_store *store, const char *installation_id, const char *message_id, json_t **row)
{
    static const char sql[] =
        "SELECT m.id AS message_id, m.session_id, m.interaction_id, m.state, m.text, m.placeholder,"
        " s.user_id, s.installation_id, s.deleted_at FROM messages m"
        " JOIN sessions s ON s.id = m.session_id WHERE m.id = ? AND m.role = 'agent'";
    sqlite3_stmt *stmt = prepare(store, sql);
    const char *owner;
    int rc;

    if (stmt == NULL)
        return RL_E_INTERNAL;
    bind_text(stmt, 1, message_id);
    rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW)
        *row = row_object(stmt);
    sqlite3_reset(stmt);
    if (rc != SQLITE_ROW)
        return rc == SQLITE_DONE ? RL_E_MESSAGE_NOT_FOUND : RL_E_INTERNAL;
    owner = json_string_value(json_object_get(*row, "installation_id"));
    if (owner == NULL || strcmp(owner, installation_id) != 0)
        return RL_E_MESSAGE_NOT_FOUND;
    if (!json_is_null(json_object_get(*row, "deleted_at")))
        return RL_E_SESSION_DELETED;
    return 0;
}

static void sqlite_message_stream_state(rl_store_t *super, const char *installation_id, const char *message_id,
                                        const char *scope, rl_store_cb cb, void *arg)
{
    static const char seq_sql[] =
        "SELECT coalesce(max(coalesce(seq_last, seq)), 0) + 1 FROM message_deltas WHERE message_id = ?";
    /*
     * A delta's key is in its batch's row while the message streams (schema 6: keys; schema 5: key),
     * in delta_keys once it ended, or in idempotency for deltas stored before schema 5.
     */
    static const char keys_sql[] = "SELECT key, body_hash FROM idempotency WHERE owner = ?1 AND scope = ?2"
                                   " UNION ALL " DELTA_KEYS_OF_MESSAGE
                                   " UNION ALL SELECT k.key, k.value FROM delta_keys, json_each(delta_keys.keys) AS k"
                                   "  WHERE delta_keys.message_id = ?3";
    struct sqlite_store *store = (void *)super;
    json_t *row = NULL, *keys = json_object(), *value = NULL;
    sqlite3_stmt *stmt;
    int64_t next_seq = 1;
    int result = bridge_message(store, installation_id, message_id, &row), deleted = 0;

    /* A deleted session still answers, so that the caller can say 410 rather than 404. */
    if (result == RL_E_SESSION_DELETED) {
        deleted = 1;
        result = 0;
    }
    if (result != 0)
        goto out;
    result = RL_E_INTERNAL;
    if ((stmt = prepare(store, seq_sql)) == NULL)
        goto out;
    bind_text(stmt, 1, message_id);
    if (sqlite3_step(stmt) == SQLITE_ROW)
        next_seq = sqlite3_column_int64(stmt, 0);
    sqlite3_reset(stmt);
    if ((stmt = prepare(store, keys_sql)) == NULL)
        goto out;
    bind_text(stmt, 1, installation_id);
    bind_text(stmt, 2, scope);
    bind_text(stmt, 3, message_id);
    while (sqlite3_step(stmt) == SQLITE_ROW)
        json_object_set_new(keys, (const char *)sqlite3_column_text(stmt, 0),
                            json_string((const char *)sqlite3_column_text(stmt, 1)));
    sqlite3_reset(stmt);
    value =
        json_pack("{s:O, s:O, s:O, s:O, s:O, s:b, s:I, s:O}", "message_id", json_object_get(row, "message_id"),
                  "session_id", json_object_get(row, "session_id"), "interaction_id",
                  json_object_get(row, "interaction_id"), "user_id", json_object_get(row, "user_id"), "state",
                  json_object_get(row, "state"), "deleted", deleted, "next_seq", (json_int_t)next_seq, "keys", keys);
    result = value != NULL ? 0 : RL_E_INTERNAL;
out:
    json_decref(row);
    json_decref(keys);
    complete(store, cb, arg, result, result == 0 ? value : NULL, 0);
}

static int by_message_then_seq(const void *a, const void *b)
{
    const rl_delta_row_t *x = *(const rl_delta_row_t *const *)a, *y = *(const rl_delta_row_t *const *)b;
    int order = strcmp(x->message_id, y->message_id);

    return order != 0 ? order : (x->seq > y->seq) - (x->seq < y->seq);
}

/* Writes the run rows[0..n) of one message's consecutive deltas as one row. */
static int write_delta_run(struct sqlite_store *store, const rl_delta_row_t *const *rows, size_t n)
{
    static const char sql[] = "INSERT OR IGNORE INTO message_deltas(message_id, seq, seq_last, delta, keys)"
                              " VALUES (?, ?, ?, ?, ?)";
    json_t *keys = json_array();
    char *text = NULL, *keys_text = NULL;
    size_t len = 0, i;
    sqlite3_stmt *stmt;
    int result = RL_E_INTERNAL;

    for (i = 0; i < n; ++i)
        len += rows[i]->delta_len;
    if (keys == NULL || (text = malloc(len + 1)) == NULL)
        goto out;
    for (len = 0, i = 0; i < n; ++i) {
        memcpy(text + len, rows[i]->delta, rows[i]->delta_len);
        len += rows[i]->delta_len;
        /* The key and body hash are the delta's idempotency record (replayed as {message_id}). */
        if (json_array_append_new(keys, json_pack("[s, s]", rows[i]->key, rows[i]->body_hash)) != 0)
            goto out;
    }
    if ((keys_text = json_dumps(keys, JSON_COMPACT)) == NULL || (stmt = prepare(store, sql)) == NULL)
        goto out;
    sqlite3_bind_text(stmt, 1, rows[0]->message_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(stmt, 2, rows[0]->seq);
    sqlite3_bind_int64(stmt, 3, rows[n - 1]->seq);
    sqlite3_bind_text(stmt, 4, text, (int)len, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 5, keys_text, -1, SQLITE_STATIC);
    result = step_done(store, stmt);
    sqlite3_clear_bindings(stmt);
out:
    json_decref(keys);
    free(text);
    free(keys_text);
    return result;
}

static void sqlite_deltas_append(rl_store_t *super, rl_delta_batch_t *batch, int64_t now, rl_store_cb cb, void *arg)
{
    struct sqlite_store *store = (void *)super;
    const rl_delta_row_t **rows = calloc(batch->count > 0 ? batch->count : 1, sizeof(*rows)), *row;
    size_t n = 0, start, end;
    int result = RL_E_INTERNAL;

    if (rows == NULL || write_begin(store) != 0)
        goto out;
    /*
     * One row per message and batch: at 50 deltas/s a message gets five per
     * 100 ms batch, and every row costs a B-tree insert and its WAL pages.
     * A run is cut where seqs are not consecutive (they always are today).
     */
    for (row = batch->head; row != NULL; row = row->next)
        rows[n++] = row;
    qsort(rows, n, sizeof(*rows), by_message_then_seq);
    result = 0;
    for (start = 0; start < n && result == 0; start = end) {
        for (end = start + 1; end < n && strcmp(rows[end]->message_id, rows[start]->message_id) == 0 &&
                              rows[end]->seq == rows[end - 1]->seq + 1;
             ++end) {
        }
        result = write_delta_run(store, rows + start, end - start);
    }
    write_end(store, result);
out:
    free(rows);
    rl_delta_batch_free(batch);
    complete(store, cb, arg, result, NULL, 1);
}

static void sqlite_message_end(rl_store_t *super, const rl_idempotency_t *idem, const char *installation_id,
                               const char *message_id, json_t *body, int64_t now, rl_store_cb cb, void *arg)
{
    static const char sql[] = "UPDATE messages SET text = ?, usage = coalesce(?, usage), finish_reason = ?,"
                              " state = 'final', finalized_at = ?, placeholder = 0 WHERE id = ?";
    /* The deltas' keys outlive their text: a replayed delta still answers idempotent. */
    static const char keys_sql[] = "INSERT OR REPLACE INTO delta_keys(message_id, keys, created_at)"
                                   " SELECT ?1, json_group_object(key, body_hash), ?2 FROM (" DELTA_KEYS_OF_MESSAGE ")"
                                   " GROUP BY ?1"; /* no deltas, no row */
    static const char clear_sql[] = "DELETE FROM message_deltas WHERE message_id = ?";
    struct sqlite_store *store = (void *)super;
    json_t *row = NULL, *cached = NULL, *value = NULL, *message = NULL, *text = NULL, *response;
    char *usage = NULL;
    sqlite3_stmt *stmt;
    int result = RL_E_INTERNAL;

    if (write_begin(store) != 0)
        goto out;
    if ((result = bridge_message(store, installation_id, message_id, &row)) != 0)
        goto end;
    if ((result = idem_check(store, idem, &cached)) != 0) {
        if (result == 1) {
            value = replay_value(cached);
            result = 0;
        }
        goto end;
    }
    if (strcmp(json_string_value(json_object_get(row, "state")), "streaming") != 0) {
        result = RL_E_MESSAGE_FINALIZED;
        goto end;
    }
    /* spec: the canonical text replaces the streamed one; without it, the streamed text is kept. */
    if (json_is_string(json_object_get(body, "text")))
        text = json_incref(json_object_get(body, "text"));
    else if ((result = streamed_text(store, message_id, json_string_value(json_object_get(row, "text")),
                                     (int)json_integer_value(json_object_get(row, "placeholder")), &text)) != 0)
        goto end;
    result = RL_E_INTERNAL;
    if (json_object_get(body, "usage") != NULL &&
        (usage = json_dumps(json_object_get(body, "usage"), JSON_COMPACT)) == NULL)
        goto end;
    if ((result = exec_bound(store, sql, "sssIs", json_string_value(text), usage,
                             json_string_value(json_object_get(body, "finish_reason")), (int64_t)now, message_id)) != 0)
        goto end;
    result = RL_E_INTERNAL;
    if ((stmt = prepare(store, keys_sql)) == NULL)
        goto end;
    bind_text(stmt, 3, message_id);
    sqlite3_bind_int64(stmt, 2, now);
    bind_text(stmt, 1, message_id);
    if ((result = step_done(store, stmt)) != 0)
        goto end;
    if ((result = exec_bound(store, clear_sql, "s", message_id)) != 0)
        goto end;
    response = json_pack("{s:s}", "message_id", message_id);
    if ((result = idem_record(store, idem, response, now)) == 0 &&
        (result = select_message(store, message_id, &message)) == 0)
        value = json_pack("{s:O, s:b, s:O, s:o}", "response", response, "idempotent", 0, "user_id",
                          json_object_get(row, "user_id"), "message", message);
    json_decref(response);
end:
    write_end(store, result);
out:
    json_decref(row);
    json_decref(text);
    free(usage);
    if (result != 0) {
        json_decref(value);
        value = NULL;
    }
    complete(store, cb, arg, result, value, 1);
}

/* brief: once a manifest lists tools, a task naming another tool is refused. */
static int check_tool(struct sqlite_store *store, const char *installation_id, const char *name)
{
    static const char sql[] = "SELECT manifest FROM installations WHERE id = ?";
    sqlite3_stmt *stmt;
    json_t *manifest = NULL, *tools, *tool;
    int result = 0;
    size_t i;

    if (name == NULL)
        return 0;
    if ((stmt = prepare(store, sql)) == NULL)
        return RL_E_INTERNAL;
    bind_text(stmt, 1, installation_id);
    if (sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_type(stmt, 0) == SQLITE_TEXT)
        manifest = json_loads((const char *)sqlite3_column_text(stmt, 0), 0, NULL);
    sqlite3_reset(stmt);
    tools = json_object_get(manifest, "tools");
    if (json_array_size(tools) > 0) {
        result = RL_E_TOOL_NOT_DECLARED;
        json_array_foreach(tools, i, tool)
        {
            const char *declared = json_string_value(json_object_get(tool, "name"));
            if (declared != NULL && strcmp(declared, name) == 0)
                result = 0;
        }
    }
    json_decref(manifest);
    return result;
}

static void sqlite_task_step(rl_store_t *super, const rl_idempotency_t *idem, const rl_bridge_target_t *target,
                             rl_task_step_t step, json_t *body, rl_store_cb cb, void *arg)
{
    static const char find_sql[] = "SELECT task_id, session_id, interaction_id, kind, name, status, status_label"
                                   " FROM tasks WHERE installation_id = ? AND task_id = ?";
    static const char create_sql[] =
        "INSERT INTO tasks(installation_id, task_id, session_id, interaction_id, kind, name,"
        " status, status_label, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, 'created', ?, ?, ?)";
    static const char update_sql[] =
        "UPDATE tasks SET status = ?, status_label = coalesce(?, status_label),"
        " name = coalesce(?, name), updated_at = ? WHERE installation_id = ? AND task_id = ?";
    struct sqlite_store *store = (void *)super;
    const char *task_id = json_string_value(json_object_get(body, "task_id"));
    const char *name = json_string_value(json_object_get(body, "name"));
    json_t *session = NULL, *cached = NULL, *value = NULL, *task = NULL, *response;
    sqlite3_stmt *stmt;
    int result = RL_E_INTERNAL;

    if (write_begin(store) != 0)
        goto out;
    if ((result = check_target(store, target, &session)) != 0)
        goto end;
    if ((result = idem_check(store, idem, &cached)) != 0) {
        if (result == 1) {
            value = replay_value(cached);
            result = 0;
        }
        goto end;
    }
    if ((result = check_tool(store, target->installation_id, name)) != 0)
        goto end;
    result = RL_E_INTERNAL;
    if ((stmt = prepare(store, find_sql)) == NULL)
        goto end;
    bind_text(stmt, 1, target->installation_id);
    bind_text(stmt, 2, task_id);
    if (sqlite3_step(stmt) == SQLITE_ROW)
        task = row_object(stmt);
    sqlite3_reset(stmt);
    if (step == RL_TASK_CREATE) {
        /* A second create of the same task with another body is the idempotency conflict of its scope. */
        if (task != NULL) {
            result = RL_E_IDEMPOTENCY_CONFLICT;
            goto end;
        }
        if ((stmt = prepare(store, create_sql)) == NULL)
            goto end;
        bind_text(stmt, 1, target->installation_id);
        bind_text(stmt, 2, task_id);
        bind_text(stmt, 3, target->session_id);
        bind_text(stmt, 4, target->interaction_id);
        bind_text(stmt, 5, json_string_value(json_object_get(body, "kind")));
        bind_text(stmt, 6, name);
        bind_text(stmt, 7, json_string_value(json_object_get(body, "status_label")));
        sqlite3_bind_int64(stmt, 8, target->now);
        sqlite3_bind_int64(stmt, 9, target->now);
    } else {
        const char *status;
        if (task == NULL || strcmp(json_string_value(json_object_get(task, "session_id")), target->session_id) != 0 ||
            strcmp(json_string_value(json_object_get(task, "interaction_id")), target->interaction_id) != 0) {
            result = RL_E_TASK_NOT_FOUND;
            goto end;
        }
        status = json_string_value(json_object_get(task, "status"));
        /* spec: created, then progress steps, then exactly one of completed, failed, cancelled. */
        if (strcmp(status, "created") != 0 && strcmp(status, "progressing") != 0) {
            result = RL_E_TASK_FINISHED;
            goto end;
        }
        if ((stmt = prepare(store, update_sql)) == NULL)
            goto end;
        bind_text(stmt, 1, step == RL_TASK_UPDATE ? "progressing" : json_string_value(json_object_get(body, "status")));
        bind_text(stmt, 2, json_string_value(json_object_get(body, "status_label")));
        bind_text(stmt, 3, name);
        sqlite3_bind_int64(stmt, 4, target->now);
        bind_text(stmt, 5, target->installation_id);
        bind_text(stmt, 6, task_id);
    }
    if ((result = step_done(store, stmt)) != 0)
        goto end;
    json_decref(task);
    task = NULL;
    result = RL_E_INTERNAL;
    if ((stmt = prepare(store, find_sql)) == NULL)
        goto end;
    bind_text(stmt, 1, target->installation_id);
    bind_text(stmt, 2, task_id);
    if (sqlite3_step(stmt) == SQLITE_ROW)
        task = row_object(stmt);
    sqlite3_reset(stmt);
    if (task == NULL)
        goto end;
    response = json_pack("{s:s}", "task_id", task_id);
    if ((result = idem_record(store, idem, response, target->now)) == 0)
        value = json_pack("{s:O, s:b, s:O, s:O}", "response", response, "idempotent", 0, "user_id",
                          json_object_get(session, "user_id"), "task", task);
    json_decref(response);
end:
    write_end(store, result);
out:
    json_decref(session);
    json_decref(task);
    if (result != 0) {
        json_decref(value);
        value = NULL;
    }
    complete(store, cb, arg, result, value, 1);
}

static const char approval_columns[] = "id, installation_id, user_id, session_id, interaction_id, request, state,"
                                       " decision, scope, scope_value, created_at, expires_at, resolved_at";

/* An approval as clients see it: the request's fields, its state and, once decided, the decision. */
static json_t *approval_object(struct sqlite_store *store, sqlite3_stmt *stmt)
{
    json_t *row = row_object(stmt);
    json_t *request = json_loads(json_string_value(json_object_get(row, "request")), 0, NULL);
    json_t *approval =
        json_pack("{s:O, s:O, s:n, s:O, s:O, s:O, s:O, s:O, s:O, s:O, s:O, s:O, s:O, s:O}", "approval_id",
                  json_object_get(row, "id"), "installation_id", json_object_get(row, "installation_id"), "agent_id",
                  "session_id", json_object_get(row, "session_id"), "interaction_id",
                  json_object_get(row, "interaction_id"), "state", json_object_get(row, "state"), "decision",
                  json_object_get(row, "decision"), "scope", json_object_get(row, "scope"), "scope_value",
                  json_object_get(row, "scope_value"), "expires_at", json_object_get(row, "expires_at"), "ts",
                  json_object_get(row, "created_at"), "resolved_at", json_object_get(row, "resolved_at"), "user_id",
                  json_object_get(row, "user_id"), "created_at", json_object_get(row, "created_at"));
    const char *fields[] = {"action", "title", "message", "severity", "command", "host", "tool_call_id"};
    size_t i;

    for (i = 0; i < sizeof(fields) / sizeof(fields[0]); ++i) {
        json_t *field = json_object_get(request, fields[i]);
        json_object_set(approval, fields[i], field != NULL ? field : json_null());
    }
    json_decref(request);
    json_decref(row);
    return approval;
}

static int select_approval(struct sqlite_store *store, const char *approval_id, json_t **out)
{
    static char sql[256];

    if (sql[0] == '\0')
        snprintf(sql, sizeof(sql), "SELECT %s FROM approvals WHERE id = ?", approval_columns);
    return select_by_id(store, sql, approval_id, approval_object, RL_E_APPROVAL_NOT_FOUND, out);
}

/*
 * A grant (action, scope, scope_value) covers a request for the same action:
 * scope all covers everything, session the session it names, tool the
 * command, domain the host.
 */
static int grant_covers(const char *scope, const char *value, json_t *body)
{
    const char *subject = NULL;

    if (strcmp(scope, "all") == 0)
        return 1;
    if (strcmp(scope, "session") == 0)
        subject = json_string_value(json_object_get(body, "session_id"));
    else if (strcmp(scope, "tool") == 0)
        subject = json_string_value(json_object_get(body, "command"));
    else if (strcmp(scope, "domain") == 0)
        subject = json_string_value(json_object_get(body, "host"));
    return subject != NULL && strcmp(subject, value) == 0;
}

static void sqlite_approval_request(rl_store_t *super, const rl_idempotency_t *idem, const rl_bridge_target_t *target,
                                    json_t *body, int64_t expires_at, rl_store_cb cb, void *arg)
{
    static const char grants_sql[] = "SELECT scope, scope_value FROM grants WHERE installation_id = ? AND action = ?";
    static const char insert_sql[] =
        "INSERT INTO approvals(id, installation_id, user_id, session_id, interaction_id,"
        " request, state, decision, scope, scope_value, created_at, expires_at, resolved_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
    struct sqlite_store *store = (void *)super;
    const char *approval_id = json_string_value(json_object_get(body, "approval_id"));
    json_t *session = NULL, *cached = NULL, *value = NULL, *approval = NULL, *response = NULL, *request;
    char *request_text = NULL, grant_scope[16] = "", grant_value[512] = "";
    int64_t update_id = 0;
    sqlite3_stmt *stmt;
    int result = RL_E_INTERNAL, granted = 0;

    if (write_begin(store) != 0)
        goto out;
    if ((result = check_target(store, target, &session)) != 0)
        goto end;
    if ((result = idem_check(store, idem, &cached)) != 0) {
        if (result == 1) {
            value = replay_value(cached);
            result = 0;
        }
        goto end;
    }
    if (select_approval(store, approval_id, &approval) == 0) {
        /* The id is taken (by another installation, or with another body under another key). */
        result = RL_E_IDEMPOTENCY_CONFLICT;
        goto end;
    }
    result = RL_E_INTERNAL;
    if ((stmt = prepare(store, grants_sql)) == NULL)
        goto end;
    bind_text(stmt, 1, target->installation_id);
    bind_text(stmt, 2, json_string_value(json_object_get(body, "action")));
    while (!granted && sqlite3_step(stmt) == SQLITE_ROW) {
        const char *scope = (const char *)sqlite3_column_text(stmt, 0);
        const char *scope_value = (const char *)sqlite3_column_text(stmt, 1);
        if (grant_covers(scope, scope_value, body)) {
            granted = 1;
            snprintf(grant_scope, sizeof(grant_scope), "%s", scope);
            snprintf(grant_value, sizeof(grant_value), "%s", scope_value);
        }
    }
    sqlite3_reset(stmt);
    request = json_pack("{s:O, s:O, s:O, s:O, s:O?, s:O?, s:O?}", "action", json_object_get(body, "action"), "title",
                        json_object_get(body, "title"), "message", json_object_get(body, "message"), "severity",
                        json_object_get(body, "severity"), "command", json_object_get(body, "command"), "host",
                        json_object_get(body, "host"), "tool_call_id", json_object_get(body, "tool_call_id"));
    request_text = json_dumps(request, JSON_COMPACT);
    json_decref(request);
    if (request_text == NULL || (stmt = prepare(store, insert_sql)) == NULL)
        goto end;
    bind_text(stmt, 1, approval_id);
    bind_text(stmt, 2, target->installation_id);
    bind_text(stmt, 3, json_string_value(json_object_get(session, "user_id")));
    bind_text(stmt, 4, target->session_id);
    bind_text(stmt, 5, target->interaction_id);
    bind_text(stmt, 6, request_text);
    bind_text(stmt, 7, granted ? "resolved" : "pending");
    bind_text(stmt, 8, granted ? "approve_always" : NULL);
    bind_text(stmt, 9, granted ? grant_scope : NULL);
    bind_text(stmt, 10, granted ? grant_value : NULL);
    sqlite3_bind_int64(stmt, 11, target->now);
    sqlite3_bind_int64(stmt, 12, expires_at);
    if (granted)
        sqlite3_bind_int64(stmt, 13, target->now);
    else
        sqlite3_bind_null(stmt, 13);
    if ((result = step_done(store, stmt)) != 0)
        goto end;
    if (granted) {
        /* brief: an earlier approve_always grant resolves the request at once and still tells the bridge. */
        response = json_pack("{s:s, s:b, s:s, s:s, s:s}", "approval_id", approval_id, "auto_resolved", 1, "decision",
                             "approve_always", "scope", grant_scope, "scope_value", grant_value);
        result = enqueue_update(store, target->installation_id, "approval.resolved", target->session_id,
                                target->interaction_id,
                                json_pack("{s:s, s:s, s:s, s:s}", "approval_id", approval_id, "decision",
                                          "approve_always", "scope", grant_scope, "scope_value", grant_value),
                                target->now, &update_id);
    } else {
        response = json_pack("{s:s, s:b, s:I}", "approval_id", approval_id, "auto_resolved", 0, "expires_at",
                             (json_int_t)expires_at);
        result = 0;
    }
    if (result != 0 || (result = idem_record(store, idem, response, target->now)) != 0 ||
        (result = select_approval(store, approval_id, &approval)) != 0)
        goto end;
    value = json_pack("{s:O, s:b, s:O, s:O, s:b, s:I}", "response", response, "idempotent", 0, "user_id",
                      json_object_get(session, "user_id"), "approval", approval, "auto_resolved", granted, "update_id",
                      (json_int_t)update_id);
end:
    write_end(store, result);
out:
    json_decref(session);
    json_decref(approval);
    json_decref(response);
    free(request_text);
    if (result != 0) {
        json_decref(value);
        value = NULL;
    }
    complete(store, cb, arg, result, value, 1);
}

static void sqlite_approval_decide(rl_store_t *super, const char *user_id, const char *approval_id,
                                   const char *decision, const char *scope, const char *scope_value, int64_t now,
                                   rl_store_cb cb, void *arg)
{
    static const char resolve_sql[] =
        "UPDATE approvals SET state = 'resolved', decision = ?, scope = ?, scope_value = ?,"
        " resolved_at = ? WHERE id = ? AND state = 'pending'";
    static const char grant_sql[] =
        "INSERT OR IGNORE INTO grants(installation_id, action, scope, scope_value, created_at)"
        " VALUES (?, ?, ?, ?, ?)";
    struct sqlite_store *store = (void *)super;
    json_t *approval = NULL, *value = NULL, *update;
    const char *state, *owner, *installation_id;
    int64_t update_id = 0;
    int result = RL_E_INTERNAL;

    if (write_begin(store) != 0)
        goto out;
    if ((result = select_approval(store, approval_id, &approval)) != 0)
        goto end;
    owner = json_string_value(json_object_get(approval, "user_id"));
    if (owner == NULL || strcmp(owner, user_id) != 0) {
        result = RL_E_APPROVAL_NOT_FOUND;
        goto end;
    }
    state = json_string_value(json_object_get(approval, "state"));
    if (strcmp(state, "resolved") == 0) {
        /* brief: the first decision wins; a later one gets it back. */
        value = json_pack("{s:O, s:b}", "approval", approval, "changed", 0);
        result = 0;
        goto end;
    }
    if (strcmp(state, "pending") != 0 || json_integer_value(json_object_get(approval, "expires_at")) <= now) {
        result = RL_E_APPROVAL_EXPIRED;
        goto end;
    }
    installation_id = json_string_value(json_object_get(approval, "installation_id"));
    /*
     * A grant without a value takes it from the request: the tool scope
     * covers this command, domain this host, session this session
     * (approveCommandAlways in the spec's decision table).
     */
    if (strcmp(decision, "approve_always") == 0) {
        if (scope == NULL)
            scope = "all";
        if (scope_value == NULL) {
            const char *from = strcmp(scope, "tool") == 0      ? "command"
                               : strcmp(scope, "domain") == 0  ? "host"
                               : strcmp(scope, "session") == 0 ? "session_id"
                                                               : NULL;
            scope_value = from != NULL ? json_string_value(json_object_get(approval, from)) : "";
            if (scope_value == NULL)
                scope_value = "";
        }
    }
    if ((result = exec_bound(store, resolve_sql, "sssIs", decision, scope, scope_value, (int64_t)now, approval_id)) !=
        0)
        goto end;
    if (strcmp(decision, "approve_always") == 0) {
        /* spec: approve_always stores a permanent grant for (action, scope, scope_value). */
        if ((result = exec_bound(store, grant_sql, "ssssI", installation_id,
                                 json_string_value(json_object_get(approval, "action")), scope != NULL ? scope : "all",
                                 scope_value != NULL ? scope_value : "", (int64_t)now)) != 0)
            goto end;
    }
    update = json_pack("{s:s, s:s}", "approval_id", approval_id, "decision", decision);
    if (scope != NULL)
        json_object_set_new(update, "scope", json_string(scope));
    if (scope_value != NULL)
        json_object_set_new(update, "scope_value", json_string(scope_value));
    result = enqueue_update(store, installation_id, "approval.resolved",
                            json_string_value(json_object_get(approval, "session_id")),
                            json_string_value(json_object_get(approval, "interaction_id")), update, now, &update_id);
    if (result != 0)
        goto end;
    json_decref(approval);
    approval = NULL;
    if ((result = select_approval(store, approval_id, &approval)) != 0)
        goto end;
    value = json_pack("{s:O, s:b, s:I}", "approval", approval, "changed", 1, "update_id", (json_int_t)update_id);
end:
    write_end(store, result);
out:
    json_decref(approval);
    if (result != 0) {
        json_decref(value);
        value = NULL;
    }
    complete(store, cb, arg, result, value, 1);
}

static void sqlite_approval_expire(rl_store_t *super, const char *approval_id, int64_t now, rl_store_cb cb, void *arg)
{
    static const char sql[] = "UPDATE approvals SET state = 'expired', resolved_at = ?"
                              " WHERE id = ? AND state = 'pending' AND expires_at <= ?";
    struct sqlite_store *store = (void *)super;
    json_t *approval = NULL, *value = NULL;
    int64_t update_id = 0;
    int result = RL_E_INTERNAL, changed;

    if (write_begin(store) != 0)
        goto out;
    if ((result = exec_bound(store, sql, "IsI", (int64_t)now, approval_id, (int64_t)now)) != 0)
        goto end;
    changed = sqlite3_changes(store->db) > 0;
    if ((result = select_approval(store, approval_id, &approval)) != 0)
        goto end;
    /* spec: the bridge hears approval.expired and denies the request to the agent. */
    if (changed)
        result = enqueue_update(store, json_string_value(json_object_get(approval, "installation_id")),
                                "approval.expired", json_string_value(json_object_get(approval, "session_id")),
                                json_string_value(json_object_get(approval, "interaction_id")),
                                json_pack("{s:s}", "approval_id", approval_id), now, &update_id);
    if (result == 0)
        value =
            json_pack("{s:O, s:b, s:I}", "approval", approval, "changed", changed, "update_id", (json_int_t)update_id);
end:
    write_end(store, result);
out:
    json_decref(approval);
    if (result != 0) {
        json_decref(value);
        value = NULL;
    }
    complete(store, cb, arg, result, value, 1);
}

static void sqlite_approvals_pending(rl_store_t *super, const char *user_id, int64_t due_before, rl_store_cb cb,
                                     void *arg)
{
    static char user_sql[256], due_sql[256];
    struct sqlite_store *store = (void *)super;
    json_t *approvals = json_array();
    sqlite3_stmt *stmt;
    int result = RL_E_INTERNAL;

    if (user_sql[0] == '\0') {
        snprintf(
            user_sql, sizeof(user_sql),
            "SELECT %s FROM approvals WHERE user_id = ? AND state = 'pending' AND expires_at > ? ORDER BY created_at",
            approval_columns);
        snprintf(due_sql, sizeof(due_sql),
                 "SELECT %s FROM approvals WHERE state = 'pending' AND expires_at <= ? ORDER BY expires_at LIMIT 500",
                 approval_columns);
    }
    if ((stmt = prepare(store, user_id != NULL ? user_sql : due_sql)) != NULL) {
        if (user_id != NULL) {
            bind_text(stmt, 1, user_id);
            sqlite3_bind_int64(stmt, 2, due_before);
        } else {
            sqlite3_bind_int64(stmt, 1, due_before);
        }
        while (sqlite3_step(stmt) == SQLITE_ROW)
            json_array_append_new(approvals, approval_object(store, stmt));
        sqlite3_reset(stmt);
        result = 0;
    }
    complete(store, cb, arg, result, result == 0 ? json_pack("{s:o}", "approvals", approvals) : NULL, 0);
    if (result != 0)
        json_decref(approvals);
}

static void sqlite_updates_list(rl_store_t *super, const char *installation_id, int64_t after_id, int64_t since_ms,
                                int limit, rl_store_cb cb, void *arg)
{
    static const char sql[] =
        "SELECT update_id, type, session_id, interaction_id, payload, created_at FROM updates"
        " WHERE installation_id = ? AND update_id > ? AND created_at >= ? ORDER BY update_id LIMIT ?";
    struct sqlite_store *store = (void *)super;
    json_t *updates = json_array();
    sqlite3_stmt *stmt;
    int result = RL_E_INTERNAL;

    if ((stmt = prepare(store, sql)) != NULL) {
        bind_text(stmt, 1, installation_id);
        sqlite3_bind_int64(stmt, 2, after_id);
        sqlite3_bind_int64(stmt, 3, since_ms);
        sqlite3_bind_int(stmt, 4, limit);
        while (sqlite3_step(stmt) == SQLITE_ROW) {
            json_t *row = row_object(stmt);
            json_t *payload = json_loads(json_string_value(json_object_get(row, "payload")), 0, NULL);
            json_object_set_new(row, "payload", payload != NULL ? payload : json_object());
            json_array_append_new(updates, row);
        }
        sqlite3_reset(stmt);
        result = 0;
    }
    complete(store, cb, arg, result, result == 0 ? json_pack("{s:o}", "updates", updates) : NULL, 0);
    if (result != 0)
        json_decref(updates);
}

static void sqlite_updates_ack(rl_store_t *super, const char *installation_id, int64_t up_to, rl_store_cb cb, void *arg)
{
    static const char drop_sql[] = "DELETE FROM updates WHERE installation_id = ? AND update_id <= ?";
    static const char mark_sql[] = "UPDATE installations SET acked_update_id = max(acked_update_id, ?) WHERE id = ?";
    struct sqlite_store *store = (void *)super;
    int result = RL_E_INTERNAL;

    if (write_begin(store) != 0)
        goto out;
    if ((result = exec_bound(store, drop_sql, "sI", installation_id, (int64_t)up_to)) != 0)
        goto end;
    result = exec_bound(store, mark_sql, "Is", (int64_t)up_to, installation_id);
end:
    write_end(store, result);
out:
    complete(store, cb, arg, result, NULL, 1);
}

static void sqlite_purge_bridge(rl_store_t *super, int64_t now, int64_t idempotency_ttl, int64_t replay_window,
                                rl_store_cb cb, void *arg)
{
    static const char idem_sql[] = "DELETE FROM idempotency WHERE created_at < ?";
    static const char delta_keys_sql[] = "DELETE FROM delta_keys WHERE created_at < ?";
    /* spec: updates older than the replay window are never replayed; the history covers them. */
    static const char updates_sql[] = "DELETE FROM updates WHERE created_at < ?";
    /* Tool calls are ephemeral; a day is plenty to catch late updates. */
    static const char tasks_sql[] = "DELETE FROM tasks WHERE updated_at < ?";
    struct sqlite_store *store = (void *)super;
    const char *sqls[] = {idem_sql, delta_keys_sql, updates_sql, tasks_sql};
    int64_t limits[] = {now - idempotency_ttl, now - idempotency_ttl, now - replay_window, now - 86400000};
    sqlite3_stmt *stmt;
    int result = RL_E_INTERNAL;
    size_t i;

    if (write_begin(store) != 0)
        goto out;
    for (i = 0; i < sizeof(sqls) / sizeof(sqls[0]); ++i) {
        result = RL_E_INTERNAL;
        if ((stmt = prepare(store, sqls[i])) == NULL)
            goto end;
        sqlite3_bind_int64(stmt, 1, limits[i]);
        if ((result = step_done(store, stmt)) != 0)
            goto end;
    }
end:
    write_end(store, result);
out:
    complete(store, cb, arg, result, NULL, 1);
}

/* Checkpoints on a thread of its own: they fsync, and the loop must never wait for that. */
static void *checkpoint_main(void *p)
{
    struct sqlite_store *store = p;
    sqlite3 *db = NULL;
    int rc, frames = 0, copied = 0;
    sigset_t all;

    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);

    if (sqlite3_open_v2(store->path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        rl_log_error("sqlite checkpointer: cannot open %s", store->path);
        sqlite3_close(db);
        return NULL;
    }
    sqlite3_busy_timeout(db, 1000);
    /*
     * A connection learns that the database is in WAL mode only when it first
     * reads it; until then a checkpoint succeeds and does nothing, and the WAL
     * grows without bound (bench/PROFILE-NOTES.md, finding 1).
     */
    if (sqlite3_exec(db, "SELECT 1 FROM sqlite_master LIMIT 1", NULL, NULL, NULL) != SQLITE_OK)
        rl_log_warn("sqlite checkpointer: cannot read %s: %s", store->path, sqlite3_errmsg(db));
    pthread_mutex_lock(&store->lock);
    while (!store->stopping) {
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += 1;
        pthread_cond_timedwait(&store->wake, &store->lock, &deadline);
        if (store->stopping)
            break;
        pthread_mutex_unlock(&store->lock);
        /* PASSIVE never blocks the writer; frames still in use are left for the next round. */
        rc = sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_PASSIVE, &frames, &copied);
        if (rc != SQLITE_OK && rc != SQLITE_BUSY)
            rl_log_warn("sqlite checkpoint failed: %s", sqlite3_errstr(rc));
        else if (frames > 0)
            rl_log_debug("sqlite checkpoint: %d of %d WAL frames copied", copied, frames);
        pthread_mutex_lock(&store->lock);
    }
    pthread_mutex_unlock(&store->lock);
    sqlite3_close(db);
    return NULL;
}

static void sqlite_close(rl_store_t *super)
{
    struct sqlite_store *store = (void *)super;
    size_t i;

    sqlite_flush(super);
    if (store->checkpointer_running) {
        pthread_mutex_lock(&store->lock);
        store->stopping = 1;
        pthread_cond_signal(&store->wake);
        pthread_mutex_unlock(&store->lock);
        pthread_join(store->checkpointer, NULL);
    }
    for (i = 0; i < store->ncache; ++i)
        sqlite3_finalize(store->cache[i].stmt);
    if (store->db != NULL) {
        sqlite3_wal_checkpoint_v2(store->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
        sqlite3_close(store->db);
    }
    pthread_mutex_destroy(&store->lock);
    pthread_cond_destroy(&store->wake);
    free(store->queue);
    free(store->path);
    free(store);
}

static const struct rl_store_ops sqlite_ops = {
    .name = "sqlite",
    .close = sqlite_close,
    .pending = sqlite_pending,
    .flush = sqlite_flush,
    .user_ensure = sqlite_user_ensure,
    .pairing_insert = sqlite_pairing_insert,
    .pairing_claim = sqlite_pairing_claim,
    .pairing_poll = sqlite_pairing_poll,
    .installation_get = sqlite_installation_get,
    .installation_set_manifest = sqlite_installation_set_manifest,
    .purge = sqlite_purge,
    .me_get = sqlite_me_get,
    .installation_patch = sqlite_installation_patch,
    .installation_revoke = sqlite_installation_revoke,
    .session_create = sqlite_session_create,
    .session_change = sqlite_session_change,
    .session_cancel = sqlite_session_cancel,
    .messages_list = sqlite_messages_list,
    .message_send = sqlite_message_send,
    .attachment_insert = sqlite_attachment_insert,
    .attachment_get = sqlite_attachment_get,
    .session_get = sqlite_session_get,
    .message_open = sqlite_message_open,
    .message_stream_state = sqlite_message_stream_state,
    .deltas_append = sqlite_deltas_append,
    .message_end = sqlite_message_end,
    .task_step = sqlite_task_step,
    .approval_request = sqlite_approval_request,
    .approval_decide = sqlite_approval_decide,
    .approval_expire = sqlite_approval_expire,
    .approvals_pending = sqlite_approvals_pending,
    .updates_list = sqlite_updates_list,
    .updates_ack = sqlite_updates_ack,
    .purge_bridge = sqlite_purge_bridge,
};

static int migrate(struct sqlite_store *store)
{
    sqlite3_stmt *stmt = NULL;
    int version = 0, target = (int)(sizeof(migrations) / sizeof(migrations[0]));
    char sql[64];

    if (exec_sql(store->db, "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)") != 0)
        return -1;
    if (sqlite3_prepare_v2(store->db, "SELECT max(version) FROM schema_version", -1, &stmt, NULL) != SQLITE_OK)
        return -1;
    if (sqlite3_step(stmt) == SQLITE_ROW)
        version = sqlite3_column_int(stmt, 0);
    sqlite3_finalize(stmt);
    if (version > target) {
        rl_log_error("the store is at schema version %d, newer than this relayd (%d)", version, target);
        return -1;
    }
    while (version < target) {
        if (exec_sql(store->db, "BEGIN IMMEDIATE") != 0)
            return -1;
        snprintf(sql, sizeof(sql), "INSERT INTO schema_version VALUES (%d)", version + 1);
        if (exec_sql(store->db, migrations[version]) != 0 || exec_sql(store->db, sql) != 0) {
            exec_sql(store->db, "ROLLBACK");
            return -1;
        }
        if (exec_sql(store->db, "COMMIT") != 0)
            return -1;
        ++version;
        rl_log_info("store migrated to schema version %d", version);
    }
    return 0;
}

int rl_store__sqlite_open(const char *path, rl_store_t **out)
{
    struct sqlite_store *store = calloc(1, sizeof(*store));

    if (store == NULL)
        return -1;
    store->super.ops = &sqlite_ops;
    store->path = strdup(path);
    pthread_mutex_init(&store->lock, NULL);
    pthread_cond_init(&store->wake, NULL);
    if (sqlite3_open_v2(path, &store->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) !=
        SQLITE_OK) {
        rl_log_error("cannot open the store at %s: %s", path, sqlite3_errmsg(store->db));
        goto fail;
    }
    sqlite3_busy_timeout(store->db, 5000);
    if (exec_sql(store->db, "PRAGMA journal_mode=WAL") != 0 || exec_sql(store->db, "PRAGMA synchronous=NORMAL") != 0 ||
        exec_sql(store->db, "PRAGMA foreign_keys=ON") != 0 ||
        exec_sql(store->db, "PRAGMA journal_size_limit=67108864") != 0 ||
        /*
         * A batch of a few hundred deltas dirties pages all over two B-trees; with
         * SQLite's default 2 MiB cache the writer spilled pages in the middle of
         * its transaction (sqlite3PcacheFetchStress in the profile). 64 MiB keeps
         * a batch in memory until its commit.
         */
        exec_sql(store->db, "PRAGMA cache_size=-65536") != 0 || migrate(store) != 0)
        goto fail;
    /* Checkpoints belong to the background thread, never to a commit on the loop. */
    sqlite3_wal_autocheckpoint(store->db, 0);
    if (pthread_create(&store->checkpointer, NULL, checkpoint_main, store) != 0) {
        rl_log_error("cannot start the checkpoint thread: %s", strerror(errno));
        goto fail;
    }
    store->checkpointer_running = 1;
    *out = &store->super;
    return 0;
fail:
    sqlite_close(&store->super);
    return -1;
}
