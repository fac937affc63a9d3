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
 * This file is SQLite's driver (sql.h): connection, transactions, and one
 * statement at a time; the operations themselves are written once for
 * every SQL engine in ops.c. It also owns the delta log of relayd's own
 * data folder (deltalog.h, "The delta log" below): the worker sees it only
 * as rl_txn_run_batch, rl_txn_due_ms and a begin that folds it. Nothing here knows a rule of the relay;
 * docs/internals/store.md says what each function must do for any backend.
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

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "store/backends.h"
#include "store/sql.h"
#include "store/deltalog.h"
#include "store/schema.h"
#include "store/sqlite.h"

#define TXN(txn) ((struct sqlite_txn *)(txn))

#define STMT_CACHE 256

/* The delta log is folded once it holds this much, or once its oldest record has waited this long. */
#define FOLD_BYTES (4u * 1024 * 1024)
#define FOLD_MS    1000
/* Past this much not yet folded, the loop writes no more to the log: its batches wait for the worker. */
#define LOG_MAX (16u * FOLD_BYTES)

struct sqlite_txn {
    rl_sql_txn_t base;
    sqlite3 *db;
    char *path;
    /* The delta log (relayd's own data folder), or NULL: the loop and the worker append, the worker folds. */
    rl_deltalog_t *log;
    rl_deltalog_t *log_lock;   /* the same file held only for its shared lock (sqlite:PATH in relayd), or NULL */
    rl_deltalog_buf_t log_buf; /* a batch's records before their one write, on the worker */
    rl_deltalog_buf_t now_buf; /* the same on the loop (rl_txn_write_now) */
    int folding;               /* the open transaction folded the log: it is emptied after the commit */
    struct {
        const rl_sql_t *stmt;
        sqlite3_stmt *handle;
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

/* ---- the driver: statements ---------------------------------------------------------------------- */

static const rl_sql_driver_t sqlite_driver;

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

/* stmt's prepared statement: prepared once, cached by its address, ready to bind (finish resets it). */
static sqlite3_stmt *prepare(struct sqlite_txn *t, const rl_sql_t *stmt)
{
    sqlite3_stmt *handle = NULL;
    char *text;
    size_t i;
    int rc;

    for (i = 0; i < t->ncache; ++i)
        if (t->cache[i].stmt == stmt)
            return t->cache[i].handle;
    if ((text = rl_sql__rewrite(&sqlite_driver.dialect, stmt, 0)) == NULL)
        return NULL;
    rc = sqlite3_prepare_v3(t->db, text, -1, SQLITE_PREPARE_PERSISTENT, &handle, NULL);
    free(text);
    if (rc != SQLITE_OK) {
        rl_log_error("sqlite prepare: %s", sqlite3_errmsg(t->db));
        return NULL;
    }
    if (t->ncache < STMT_CACHE) {
        t->cache[t->ncache].stmt = stmt;
        t->cache[t->ncache].handle = handle;
        ++t->ncache;
    } else {
        rl_log_warn("sqlite: statement cache full");
    }
    return handle;
}

/*
 * Whether rc says the disk (or the user's quota) is full: SQLite answers
 * SQLITE_FULL, or an I/O error whose system error is ENOSPC when the WAL or a
 * temporary file could not grow. The worker reports that once per episode
 * (worker.c, note_full), so it is not logged here per statement.
 */
static int disk_full(struct sqlite_txn *t, int rc)
{
    int sys = sqlite3_system_errno(t->db);

    return (rc & 0xff) == SQLITE_FULL || ((rc & 0xff) == SQLITE_IOERR && (sys == ENOSPC || sys == EDQUOT));
}

static int step_error(struct sqlite_txn *t, int rc)
{
    if ((rc & 0xff) == SQLITE_CONSTRAINT)
        return RL_E_CONFLICT;
    if (disk_full(t, rc))
        return RL_E_STORAGE_FULL;
    rl_log_error("sqlite step: %s", sqlite3_errmsg(t->db));
    return RL_E_INTERNAL;
}

static int sqlite_run(rl_txn_t *txn, const rl_sql_t *stmt, int locked, const rl_sql_param_t *params, int n,
                      rl_sql_cursor_t *cur)
{
    sqlite3_stmt *handle = prepare(TXN(txn), stmt);
    int i;

    (void)locked; /* one writer at a time: what a transaction reads cannot change under it */
    if (handle == NULL)
        return RL_E_INTERNAL;
    for (i = 0; i < n; ++i) {
        const rl_sql_param_t *p = &params[i];
        switch (p->type) {
        case RL_SQL_TEXT:
            if (p->text == NULL)
                sqlite3_bind_null(handle, i + 1);
            else
                sqlite3_bind_text(handle, i + 1, p->text, -1, SQLITE_STATIC);
            break;
        case RL_SQL_BYTES:
            sqlite3_bind_text(handle, i + 1, p->text, (int)p->len, SQLITE_STATIC);
            break;
        case RL_SQL_TIME:
            if (p->value == RL_NO_TIME)
                sqlite3_bind_null(handle, i + 1);
            else
                sqlite3_bind_int64(handle, i + 1, p->value);
            break;
        case RL_SQL_INT32:
            sqlite3_bind_int(handle, i + 1, (int)p->value);
            break;
        default:
            sqlite3_bind_int64(handle, i + 1, p->value);
            break;
        }
    }
    cur->handle = handle;
    return 0;
}

static int sqlite_next(rl_sql_cursor_t *cur)
{
    int rc = sqlite3_step(cur->handle);

    cur->on_row = rc == SQLITE_ROW;
    if (rc == SQLITE_ROW || rc == SQLITE_DONE)
        return rc == SQLITE_ROW;
    return step_error(TXN(cur->txn), rc);
}

static int sqlite_is_null(const rl_sql_cursor_t *cur, int col)
{
    return sqlite3_column_type(cur->handle, col) == SQLITE_NULL;
}

static int64_t sqlite_integer(const rl_sql_cursor_t *cur, int col)
{
    return sqlite3_column_int64(cur->handle, col);
}

static const char *sqlite_bytes(const rl_sql_cursor_t *cur, int col, size_t *len)
{
    const char *text = (const char *)sqlite3_column_text(cur->handle, col);

    *len = (size_t)sqlite3_column_bytes(cur->handle, col);
    /* NULL only for a NULL column (an empty text or blob is ""), or when SQLite ran out of memory. */
    return text;
}

static int sqlite_finish(rl_sql_cursor_t *cur, int64_t *changes)
{
    struct sqlite_txn *t = TXN(cur->txn);
    sqlite3_stmt *handle = cur->handle;
    int result = 0, rc;

    /* A write's RETURNING hands its rows out before the change is applied: step to the end. */
    if (cur->on_row && !sqlite3_stmt_readonly(handle)) {
        while ((rc = sqlite3_step(handle)) == SQLITE_ROW)
            ;
        if (rc != SQLITE_DONE)
            result = step_error(t, rc);
    }
    if (result == 0 && changes != NULL)
        *changes = sqlite3_changes64(t->db);
    sqlite3_reset(handle);
    sqlite3_clear_bindings(handle);
    cur->on_row = 0;
    return result;
}
/* ---- transaction control ------------------------------------------------------------------------- */

static int run_static(struct sqlite_txn *t, const rl_sql_t *stmt)
{
    sqlite3_stmt *handle = prepare(t, stmt);
    int rc;

    if (handle == NULL)
        return RL_E_INTERNAL;
    rc = sqlite3_step(handle);
    sqlite3_reset(handle);
    if (rc == SQLITE_DONE)
        return 0;
    if (disk_full(t, rc))
        return RL_E_STORAGE_FULL;
    rl_log_error("sqlite %s: %s", stmt->text, sqlite3_errmsg(t->db));
    return RL_E_INTERNAL;
}

static const rl_sql_t begin_sql = {"BEGIN IMMEDIATE"};
static const rl_sql_t commit_sql = {"COMMIT"};
static const rl_sql_t savepoint_sql = {"SAVEPOINT op"};
static const rl_sql_t release_sql = {"RELEASE op"};
static const rl_sql_t undo_sql = {"ROLLBACK TO op"};

static void sqlite_rollback(rl_txn_t *txn);

/*
 * Begins the write transaction. Whatever the delta log holds goes into the
 * database first, in this transaction: every operation sees every delta
 * answered before it (a read of an open message, an end, a sweep, an
 * export). The log is emptied once this transaction commits.
 */
static int sqlite_begin(rl_txn_t *txn)
{
    struct sqlite_txn *t = TXN(txn);
    int result;

    /* Yields to a restart of the WAL (checkpoint_main), which would otherwise wait for a gap between batches. */
    pthread_mutex_lock(&t->restarting);
    pthread_mutex_unlock(&t->restarting);
    t->folding = 0;
    result = run_static(t, &begin_sql);
    if (result != 0 || t->log == NULL || rl_deltalog_size(t->log) == 0)
        return result;
    result = rl_deltalog_fold(t->log, txn);
    if (result != 0) {
        if (result != RL_E_STORAGE_FULL)
            rl_log_error("cannot fold the delta log into the store (%d); its operations fail", result);
        sqlite_rollback(txn);
        return result;
    }
    t->folding = 1;
    return 0;
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
    struct sqlite_txn *t = TXN(txn);
    int result = run_static(t, &commit_sql);

    if (result == 0 && t->folding) {
        rl_deltalog_truncate(t->log);
        ++txn->folds;
    }
    t->folding = 0;
    return result;
}

static void sqlite_rollback(rl_txn_t *txn)
{
    TXN(txn)->folding = 0;
    if (!sqlite3_get_autocommit(TXN(txn)->db))
        exec_sql(TXN(txn)->db, "ROLLBACK");
}

/* ---- the delta log (deltalog.h) ------------------------------------------------------------------ */

/*
 * A batch whose every operation is of trusted deltas: their records as one
 * write(2) to the log, answered once it returns (deltalog.h says why that is
 * as durable as a commit here). 0 when it was written so (each op's result
 * set), 1 when the batch needs a transaction.
 */
static int append_batch(struct sqlite_txn *t, rl_deltalog_buf_t *buf, rl_store_op_t *batch, size_t max, int *was_empty)
{
    rl_store_op_t *op;
    int result;

    if (t->log == NULL)
        return 1;
    buf->len = 0;
    for (op = batch; op != NULL; op = op->next)
        if (op->type->deltas == NULL || op->type->deltas(op, buf) != RL_STORE_DELTAS_TRUSTED)
            return 1;
    if ((result = rl_deltalog_append(t->log, buf, max, was_empty)) == RL_DELTALOG_FULL)
        return 1;
    for (op = batch; op != NULL; op = op->next)
        op->result = result;
    /* A big batch's buffer is not kept for the small ones after it. */
    if (buf->cap > FOLD_BYTES)
        rl_deltalog_buf_free(buf);
    return 0;
}

static int sqlite_run_batch(rl_txn_t *txn, rl_store_op_t *batch)
{
    int appended = append_batch(TXN(txn), &TXN(txn)->log_buf, batch, 0, NULL) == 0;

    txn->appends += appended;
    return !appended;
}

/*
 * The same on the calling thread, the loop (rl_txn_write_now): the log's
 * files take appends from both threads under their lock, and the worker's
 * fold reads only a file no longer appended to.
 */
static int sqlite_write_now(rl_txn_t *txn, rl_store_op_t *batch, int *was_empty)
{
    struct sqlite_txn *t = TXN(txn);

    /*
     * Folds that cannot keep up (the database held by another process, a
     * slow disk) would let the log grow without bound: past LOG_MAX a batch
     * goes to the worker, behind the fold, where the delta backlog's limits
     * (--delta-backlog-max, --delta-wait-max) shed load as for any store
     * that falls behind.
     */
    return append_batch(t, &t->now_buf, batch, LOG_MAX, was_empty);
}

/* The log's fold is due once it is big, or its oldest record a second old; -1 while it is empty. */
static int64_t sqlite_due_ms(rl_txn_t *txn)
{
    struct sqlite_txn *t = TXN(txn);
    int64_t since_ms = 0, wait_ms;
    int left_over = 0;
    size_t size = t->log != NULL ? rl_deltalog_pending(t->log, &since_ms, &left_over) : 0;

    if (size == 0)
        return -1;
    /* A log left by a relayd that was killed is due at once: the worker folds it before anything else runs. */
    if (size >= FOLD_BYTES || left_over)
        return 0;
    wait_ms = since_ms + FOLD_MS - rl_clock_mono_ms();
    return wait_ms > 0 ? wait_ms : 0;
}

static int sqlite_savepoint(rl_txn_t *txn)
{
    return run_static(TXN(txn), &savepoint_sql);
}

static void sqlite_release(rl_txn_t *txn, int keep)
{
    if (!keep)
        run_static(TXN(txn), &undo_sql);
    run_static(TXN(txn), &release_sql);
}

/* ---- the connection ------------------------------------------------------------------------------ */

/*
 * A connection that finds the database locked retries every BUSY_SLEEP_US,
 * up to the milliseconds in its argument (the writer 5 s, the checkpointer
 * 1 s). SQLite's own handler (sqlite3_busy_timeout) sleeps 1, 2, 5, 10,
 * 15... ms between tries: a connection held for 2 ms would lose 8.
 */
#define BUSY_SLEEP_US 200

static uint64_t lock_waits; /* atomic: rl_store_sqlite_lock_waits */

uint64_t rl_store_sqlite_lock_waits(void)
{
    return __atomic_load_n(&lock_waits, __ATOMIC_ACQUIRE);
}

static int busy_retry(void *limit_ms, int tries)
{
    if (tries == 0)
        __atomic_add_fetch(&lock_waits, 1, __ATOMIC_RELEASE);
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
    rl_deltalog_close(t->log);
    rl_deltalog_close(t->log_lock);
    rl_deltalog_buf_free(&t->log_buf);
    rl_deltalog_buf_free(&t->now_buf);
    for (i = 0; i < t->ncache; ++i)
        sqlite3_finalize(t->cache[i].handle);
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

static const rl_sql_driver_t sqlite_driver = {
    .name = "sqlite",
    /* Text compares bytewise by default (BINARY); a table's rowid is its insertion order. */
    .dialect = {.numbered = 0, .bytewise = "", .inserted = "rowid", .row_locks = 0},
    .begin = sqlite_begin,
    .commit = sqlite_commit,
    .rollback = sqlite_rollback,
    .savepoint = sqlite_savepoint,
    .release = sqlite_release,
    .close = sqlite_close,
    .run_batch = sqlite_run_batch,
    .write_now = sqlite_write_now,
    .due_ms = sqlite_due_ms,
    .run = sqlite_run,
    .next = sqlite_next,
    .is_null = sqlite_is_null,
    .integer = sqlite_integer,
    .bytes = sqlite_bytes,
    .finish = sqlite_finish,
    .lock_key = NULL, /* BEGIN IMMEDIATE: one writer, so a key checked stays unrecorded until it commits */
};

static int migrate(struct sqlite_txn *t)
{
    sqlite3_stmt *stmt = NULL;
    int version = 0, target = rl_schema_target(RL_SCHEMA_SQLITE);
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
        if (exec_sql(t->db, rl_schema_step(RL_SCHEMA_SQLITE, version)) != 0 || exec_sql(t->db, sql) != 0) {
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

/*
 * relayd's SQLite store streams deltas through a log beside the database
 * (deltalog.h), and its open-message records are the truth, only when the
 * store is the data folder's own: relayd holds that folder's lock, so no
 * other relayd writes to it. Its log is locked exclusively; a relayd given
 * the same file as sqlite:PATH (nodes sharing a file, which check every
 * delta against the store) takes that lock shared, so the two can never
 * meet. One-shot commands take neither: they must not fold or cut the log
 * of a relayd that runs meanwhile.
 */
static int open_log(struct sqlite_txn *t, rl_store_use_t use)
{
    char path[4200];

    if (use == RL_STORE_ONE_SHOT)
        return 0;
    snprintf(path, sizeof(path), "%s-deltas.log", t->path);
    if (use == RL_STORE_SHARED) {
        /* Held for its shared lock as long as relayd runs; nothing is written to it. */
        t->log_lock = rl_deltalog_open(path, 0);
        return t->log_lock != NULL ? 0 : -1;
    }
    if ((t->log = rl_deltalog_open(path, 1)) == NULL)
        return -1;
    t->base.base.exclusive = 1;
    /* Due at once (sqlite_due_ms): the worker folds it before anything else runs. */
    if (rl_deltalog_size(t->log) > 0)
        rl_log_info("folding the delta log left by the last run (%zu bytes)", rl_deltalog_size(t->log));
    return 0;
}

int rl_store__sqlite_open(const char *path, rl_store_use_t use, rl_txn_t **out)
{
    struct sqlite_txn *t = calloc(1, sizeof(*t));

    if (t == NULL)
        return -1;
    t->base.driver = &sqlite_driver;
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
        exec_sql(t->db, "PRAGMA cache_size=-65536") != 0 ||
        /*
         * The fold's statements (an insert that may abort within the
         * transaction) kept a statement journal, and the sweeps' sorts temporary
         * b-trees, in an unlinked file under /var/tmp: half the worker's pwrites
         * of a streaming run. Both are small and short-lived: in memory.
         */
        exec_sql(t->db, "PRAGMA temp_store=MEMORY") != 0 || migrate(t) != 0)
        goto fail;
    /* Checkpoints belong to the background thread, never to a commit. */
    sqlite3_wal_autocheckpoint(t->db, 0);
    sqlite3_wal_hook(t->db, on_wal_commit, t);
    if (pthread_create(&t->checkpointer, NULL, checkpoint_main, t) != 0) {
        rl_log_error("cannot start the checkpoint thread: %s", strerror(errno));
        goto fail;
    }
    t->checkpointer_running = 1;
    if (open_log(t, use) != 0)
        goto fail;
    *out = &t->base.base;
    return 0;
fail:
    sqlite_close(&t->base.base);
    return -1;
}

/* ---- one-shot access for relayd's commands (sqlite.h) --------------------------------------------- */

int rl_store_sqlite_target_version(void)
{
    return rl_schema_target(RL_SCHEMA_SQLITE);
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

/*
 * Folds a delta log's bytes into the copy open as db, through a backend
 * connection of its own on the same file (the copy is nobody else's yet).
 */
static int fold_log_into(sqlite3 *db, const rl_deltalog_files_t *files, char *why, size_t whysz)
{
    const char *path = sqlite3_db_filename(db, "main");
    rl_txn_t *txn = NULL;
    size_t records = 0;
    int result;

    if (path == NULL || rl_store__sqlite_open(path, RL_STORE_ONE_SHOT, &txn) != 0) {
        snprintf(why, whysz, "cannot open the copy to fold the delta log into it");
        return -1;
    }
    if ((result = rl_txn_begin(txn)) == 0 && (result = rl_deltalog_fold_files(txn, files, &records)) == 0)
        result = rl_txn_commit(txn);
    else
        rl_txn_rollback(txn);
    rl_txn_close(txn);
    if (result != 0)
        snprintf(why, whysz, "cannot fold the delta log into the copy (%d)", result);
    else
        rl_log_info("folded %zu deltas of the running relayd's delta log into the copy", records);
    return result != 0 ? -1 : 0;
}

int rl_store_sqlite_copy(const char *src, const char *dest, int *version, char *why, size_t whysz)
{
    struct stat st;
    sqlite3 *from = open_existing(src, &st, NULL, why, whysz), *to = NULL;
    sqlite3_backup *backup = NULL;
    sqlite3_stmt *stmt = NULL;
    int result = -1, rc, fd;
    char log_path[4200];
    rl_deltalog_files_t log = {0};

    if (from == NULL)
        return -1;
    if (access(dest, F_OK) == 0) {
        snprintf(why, whysz, "%s already exists", dest);
        goto out_keep;
    }
    /*
     * Deltas a running relayd answered but has not folded yet are in its
     * delta log (deltalog.h): read before the database is copied, so that
     * whatever the log loses to a fold meanwhile is in the copy, and folded
     * into the copy afterwards (what the copy holds already is skipped).
     */
    snprintf(log_path, sizeof(log_path), "%s-deltas.log", src);
    if (rl_deltalog_read_files(log_path, &log) != 0) {
        snprintf(why, whysz, "cannot read %s: %s", log_path, strerror(errno));
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
    if (log.len[0] + log.len[1] > 0 && fold_log_into(to, &log, why, whysz) != 0)
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
    rl_deltalog_files_free(&log);
    sqlite3_close(from);
    give_side_files_to_owner(src, &st);
    return result;
}
