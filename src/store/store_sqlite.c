/*
 * The embedded SQLite store.
 *
 * Everything runs on the loop thread against one connection in WAL mode with
 * synchronous=NORMAL: a commit is a write(2) into the WAL and no fsync, which
 * is durable against a crash of the process (the bar is kill -9), not against
 * power loss. Writes made during one loop turn share one transaction, each
 * operation inside its own savepoint so that a failing one leaves no trace;
 * rl_store_flush commits and only then runs the callbacks. Checkpoints (the
 * only fsyncs) run on a background thread with its own connection, so the
 * loop never waits for the disk to flush.
 */
#include <errno.h>
#include <pthread.h>
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
            json_object_set_new(row, name, json_stringn((const char *)sqlite3_column_text(stmt, i),
                                                        (size_t)sqlite3_column_bytes(stmt, i)));
            break;
        }
    }
    return row;
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
    sqlite3_stmt *stmt;
    int result = RL_E_INTERNAL;

    if (write_begin(store) != 0)
        goto out;
    /* A code that expired unclaimed may be minted again. */
    if ((stmt = prepare(store, clear_sql)) == NULL)
        goto end;
    bind_text(stmt, 1, pairing->code_hash);
    sqlite3_bind_int64(stmt, 2, pairing->created_at);
    if ((result = step_done(store, stmt)) != 0)
        goto end;
    result = RL_E_INTERNAL;
    if ((stmt = prepare(store, insert_sql)) == NULL)
        goto end;
    bind_text(stmt, 1, pairing->poll_hash);
    bind_text(stmt, 2, pairing->code_hash);
    bind_text(stmt, 3, pairing->installation_id);
    bind_text(stmt, 4, pairing->connector_type);
    bind_text(stmt, 5, pairing->host_label);
    sqlite3_bind_int64(stmt, 6, pairing->created_at);
    sqlite3_bind_int64(stmt, 7, pairing->expires_at);
    result = step_done(store, stmt);
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
    sqlite3_stmt *stmt = prepare(store, installation_select_sql);
    int rc;

    if (stmt == NULL)
        return RL_E_INTERNAL;
    bind_text(stmt, 1, id);
    rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW) {
        *out = row_object(stmt);
        sqlite3_reset(stmt);
        return 0;
    }
    sqlite3_reset(stmt);
    return rc == SQLITE_DONE ? RL_E_INSTALLATION_NOT_FOUND : RL_E_INTERNAL;
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

    if ((stmt = prepare(store, user_sql)) == NULL)
        goto end;
    bind_text(stmt, 1, user_id);
    sqlite3_bind_int64(stmt, 2, now);
    if ((result = step_done(store, stmt)) != 0)
        goto end;
    result = RL_E_INTERNAL;
    if ((stmt = prepare(store, consume_sql)) == NULL)
        goto end;
    bind_text(stmt, 1, user_id);
    sqlite3_bind_int64(stmt, 2, now);
    bind_text(stmt, 3, code_hash);
    if ((result = step_done(store, stmt)) != 0)
        goto end;
    result = RL_E_INTERNAL;
    if ((stmt = prepare(store, create_sql)) == NULL)
        goto end;
    bind_text(stmt, 1, installation_id);
    bind_text(stmt, 2, user_id);
    bind_text(stmt, 3, connector_type);
    bind_text(stmt, 4, host_label);
    sqlite3_bind_int64(stmt, 5, now);
    if ((result = step_done(store, stmt)) != 0)
        goto end;
    result = select_installation(store, installation_id, &installation);
end:
    write_end(store, result);
out:
    complete(store, cb, arg, result, result == 0 ? installation : NULL, 1);
    if (result != 0)
        json_decref(installation);
}

static void sqlite_pairing_poll(rl_store_t *super, const char *poll_hash, const char *token_hash,
                                const char *token_env, int64_t now, rl_store_cb cb, void *arg)
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
    if ((stmt = prepare(store, token_sql)) == NULL)
        goto end;
    bind_text(stmt, 1, token_hash);
    bind_text(stmt, 2, token_env);
    bind_text(stmt, 3, installation_id);
    if ((result = step_done(store, stmt)) != 0)
        goto end;
    result = RL_E_INTERNAL;
    if ((stmt = prepare(store, spend_sql)) == NULL)
        goto end;
    bind_text(stmt, 1, poll_hash);
    if ((result = step_done(store, stmt)) != 0)
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
    sqlite3_stmt *stmt;
    int result = RL_E_INTERNAL, purged = 0;

    if (write_begin(store) != 0)
        goto out;
    if ((stmt = prepare(store, pairings_sql)) == NULL)
        goto end;
    sqlite3_bind_int64(stmt, 1, now - 3600 * 1000);
    if ((result = step_done(store, stmt)) != 0)
        goto end;
    result = RL_E_INTERNAL;
    if ((stmt = prepare(store, sessions_sql)) == NULL)
        goto end;
    sqlite3_bind_int64(stmt, 1, now - delete_grace);
    result = step_done(store, stmt);
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
    json_t *value = json_pack("{s:o, s:o, s:o}", "user", json_null(), "installations", json_array(), "sessions",
                              json_array());
    sqlite3_stmt *stmt;
    int result = RL_E_INTERNAL;

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
    sqlite3_stmt *stmt;
    int result = RL_E_INTERNAL;

    if (write_begin(store) != 0)
        goto out;
    if ((result = select_user_installation(store, user_id, installation_id, &installation)) != 0)
        goto end;
    json_decref(installation);
    installation = NULL;
    result = RL_E_INTERNAL;
    if ((stmt = prepare(store, sql)) == NULL)
        goto end;
    sqlite3_bind_int(stmt, 1, patch->set_name);
    bind_text(stmt, 2, patch->name);
    sqlite3_bind_int(stmt, 3, patch->set_emoji);
    bind_text(stmt, 4, patch->emoji);
    bind_text(stmt, 5, installation_id);
    bind_text(stmt, 6, user_id);
    if ((result = step_done(store, stmt)) != 0)
        goto end;
    result = select_installation(store, installation_id, &installation);
end:
    write_end(store, result);
out:
    complete(store, cb, arg, result, result == 0 ? installation : NULL, 1);
    if (result != 0)
        json_decref(installation);
}

static void sqlite_installation_revoke(rl_store_t *super, const char *user_id, const char *installation_id,
                                       int64_t now, rl_store_cb cb, void *arg)
{
    static const char sql[] = "UPDATE installations SET state = 'revoked', revoked_at = ?"
                              " WHERE id = ? AND user_id = ? AND state != 'revoked'";
    struct sqlite_store *store = (void *)super;
    json_t *installation = NULL, *value = NULL;
    sqlite3_stmt *stmt;
    int result = RL_E_INTERNAL, changed = 0;

    if (write_begin(store) != 0)
        goto out;
    if ((result = select_user_installation(store, user_id, installation_id, &installation)) != 0)
        goto end;
    json_decref(installation);
    installation = NULL;
    result = RL_E_INTERNAL;
    if ((stmt = prepare(store, sql)) == NULL)
        goto end;
    sqlite3_bind_int64(stmt, 1, now);
    bind_text(stmt, 2, installation_id);
    bind_text(stmt, 3, user_id);
    if ((result = step_done(store, stmt)) != 0)
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
    sqlite3_stmt *stmt;
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
    result = RL_E_INTERNAL;
    if ((stmt = prepare(store, sql)) == NULL)
        goto end;
    bind_text(stmt, 1, session->session_id);
    bind_text(stmt, 2, session->user_id);
    bind_text(stmt, 3, session->installation_id);
    bind_text(stmt, 4, session->title);
    sqlite3_bind_int64(stmt, 5, session->now);
    sqlite3_bind_int64(stmt, 6, session->now);
    if ((result = step_done(store, stmt)) != 0)
        goto end;
    if ((result = select_session(store, session->user_id, session->session_id, &row)) != 0)
        goto end;
    /* spec: a new session reaches the bridge as session.started. */
    result = enqueue_update(store, session->installation_id, "session.started", session->session_id, NULL,
                            json_pack("{s:{s:s, s:O}}", "session", "id", session->session_id, "title",
                                      json_object_get(row, "title")),
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

static void sqlite_session_change(rl_store_t *super, const char *user_id, const char *session_id,
                                  rl_session_op_t op, const char *title, int64_t now, int64_t delete_grace,
                                  rl_store_cb cb, void *arg)
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
    result = select_installation(store, json_string_value(json_object_get(*session, "installation_id")),
                                 &installation);
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
    result = enqueue_update(store, json_string_value(json_object_get(session, "installation_id")),
                            "session.cancelled", session_id, interaction_id,
                            interaction_id != NULL ? json_pack("{s:s}", "interaction_id", interaction_id)
                                                   : json_object(),
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
                                      " finish_reason, state, created_at, finalized_at";

/* A message row as the API shows it: JSON columns decoded, the id under message_id. */
static json_t *message_object(sqlite3_stmt *stmt)
{
    json_t *row = row_object(stmt), *decoded;
    const char *keys[] = {"attachments", "usage"};
    size_t i;

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
        json_array_append_new(messages, message_object(stmt));
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
    static char sql[160];
    sqlite3_stmt *stmt;
    int rc;

    if (sql[0] == '\0')
        snprintf(sql, sizeof(sql), "SELECT %s FROM messages WHERE id = ?", message_columns);
    if ((stmt = prepare(store, sql)) == NULL)
        return RL_E_INTERNAL;
    bind_text(stmt, 1, message_id);
    rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW)
        *out = message_object(stmt);
    sqlite3_reset(stmt);
    if (rc == SQLITE_ROW)
        return 0;
    return rc == SQLITE_DONE ? RL_E_MESSAGE_NOT_FOUND : RL_E_INTERNAL;
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
    json_array_foreach (items, i, item) {
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
    if ((stmt = prepare(store, interaction_sql)) == NULL)
        goto end;
    bind_text(stmt, 1, send->interaction_id);
    bind_text(stmt, 2, send->session_id);
    sqlite3_bind_int64(stmt, 3, send->now);
    if ((result = step_done(store, stmt)) != 0)
        goto end;
    result = RL_E_INTERNAL;
    if ((stmt = prepare(store, message_sql)) == NULL)
        goto end;
    bind_text(stmt, 1, send->message_id);
    bind_text(stmt, 2, send->session_id);
    bind_text(stmt, 3, send->interaction_id);
    bind_text(stmt, 4, send->text);
    bind_text(stmt, 5, attachments);
    bind_text(stmt, 6, send->reply_to);
    sqlite3_bind_int64(stmt, 7, send->now);
    sqlite3_bind_int64(stmt, 8, send->now);
    if ((result = step_done(store, stmt)) != 0)
        goto end;
    result = RL_E_INTERNAL;
    if ((stmt = prepare(store, touch_sql)) == NULL)
        goto end;
    sqlite3_bind_int64(stmt, 1, send->now);
    bind_text(stmt, 2, send->session_id);
    if ((result = step_done(store, stmt)) != 0)
        goto end;
    if ((result = select_message(store, send->message_id, &message)) != 0)
        goto end;
    /* spec: session.message carries session (id, title) and message (text, attachments). */
    payload = json_pack("{s:{s:s, s:O}, s:{s:s, s:s, s:O, s:O, s:s}}", "session", "id", send->session_id, "title",
                        json_object_get(session, "title"), "message", "message_id", send->message_id, "text",
                        send->text, "attachments", json_object_get(message, "attachments"), "reply_to",
                        json_object_get(message, "reply_to"), "thought_level", send->thought_level);
    result = enqueue_update(store, json_string_value(json_object_get(session, "installation_id")),
                            "session.message", send->session_id, send->interaction_id, payload, send->now,
                            &update_id);
    if (result == 0)
        value = json_pack("{s:O, s:O, s:I}", "message", message, "session", session, "update_id",
                          (json_int_t)update_id);
end:
    write_end(store, result);
out:
    json_decref(session);
    json_decref(message);
    free(attachments);
    complete(store, cb, arg, result, result == 0 ? value : NULL, 1);
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

/* Checkpoints on a thread of its own: they fsync, and the loop must never wait for that. */
static void *checkpoint_main(void *p)
{
    struct sqlite_store *store = p;
    sqlite3 *db = NULL;

    if (sqlite3_open_v2(store->path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        rl_log_error("sqlite checkpointer: cannot open %s", store->path);
        sqlite3_close(db);
        return NULL;
    }
    sqlite3_busy_timeout(db, 1000);
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
        sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
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
    if (sqlite3_open_v2(path, &store->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                        NULL) != SQLITE_OK) {
        rl_log_error("cannot open the store at %s: %s", path, sqlite3_errmsg(store->db));
        goto fail;
    }
    sqlite3_busy_timeout(store->db, 5000);
    if (exec_sql(store->db, "PRAGMA journal_mode=WAL") != 0 || exec_sql(store->db, "PRAGMA synchronous=NORMAL") != 0 ||
        exec_sql(store->db, "PRAGMA foreign_keys=ON") != 0 ||
        exec_sql(store->db, "PRAGMA journal_size_limit=67108864") != 0 || migrate(store) != 0)
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
