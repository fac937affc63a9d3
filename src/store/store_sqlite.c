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

static void sqlite_purge(rl_store_t *super, int64_t now, rl_store_cb cb, void *arg)
{
    /* Pairings are kept an hour past expiry so that a late poll still gets a clear answer. */
    static const char sql[] = "DELETE FROM pairings WHERE expires_at < ?";
    struct sqlite_store *store = (void *)super;
    sqlite3_stmt *stmt;
    int result = RL_E_INTERNAL;

    if (write_begin(store) == 0 && (stmt = prepare(store, sql)) != NULL) {
        sqlite3_bind_int64(stmt, 1, now - 3600 * 1000);
        result = step_done(store, stmt);
        write_end(store, result);
    }
    complete(store, cb, arg, result, NULL, 1);
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
