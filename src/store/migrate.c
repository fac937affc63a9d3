/*
 * `relayd migrate --from sqlite:PATH --to postgres://...`: a single node's
 * whole store copied into PostgreSQL, so that a relay that outgrows one
 * node keeps its history, tokens, grants and idempotency records.
 *
 * Both stores are brought to this relayd's schema by their own backends
 * first (sqlite.c, postgres.c): the copy then reads one known shape and
 * writes another. The source is read inside one read transaction (a
 * consistent snapshot); the target is written inside one transaction with
 * its tables locked against writers, by COPY, so that a failure leaves it
 * as empty as it was. Columns are copied by name; a SQLite column that the
 * PostgreSQL schema does not have stops the copy, unless it is one known to
 * be obsolete, so that no data is dropped silently when the schemas drift.
 */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <libpq-fe.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/hex.h"
#include "store/backends.h"
#include "store/deltalog.h"
#include "store/migrate.h"

/* Parents before children, so that the foreign keys hold row by row. */
static const struct {
    const char *name;
    /* Insertion order, which PostgreSQL's messages.seq takes over from SQLite's rowid. */
    const char *order;
} tables[] = {
    {"users", NULL},
    {"installations", NULL},
    {"pairings", NULL},
    {"sessions", NULL},
    {"interactions", NULL},
    {"messages", "rowid"},
    {"message_deltas", NULL},
    {"delta_keys", NULL},
    {"approvals", NULL},
    {"grants", NULL},
    {"idempotency", NULL},
    {"updates", NULL},
    {"tasks", NULL},
    {"attachments", NULL},
    {"secrets", NULL},
    {"login_codes", NULL},
    {"push_subscriptions", NULL},
    {"attachment_uses", NULL},
    {"capability_requests", NULL},
    {"devices", NULL},
    {"device_confirmations", NULL},
    {"session_recipients", NULL},
    {"session_agent_files", NULL},
};

#define NTABLES (sizeof(tables) / sizeof(tables[0]))

/* SQLite columns with no PostgreSQL twin on purpose (schema.c, PostgreSQL step 1). */
static const char *const obsolete[] = {
    /* Schema 5's one key per delta row: schema 7 moved every key into `keys`. */
    "message_deltas.key",
    "message_deltas.body_hash",
};

#define COPY_CHUNK 65536

struct copy {
    sqlite3 *src;
    PGconn *dst;
    char error[512];
    int64_t counts[NTABLES];
    int64_t total;
    int terminal;
};

static int fail(struct copy *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct copy *c, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(c->error, sizeof(c->error), fmt, ap);
    va_end(ap);
    return -1;
}

/* PostgreSQL's message without its trailing newline. */
static const char *pg_message(PGconn *conn)
{
    static char message[256];
    const char *text = PQerrorMessage(conn);

    snprintf(message, sizeof(message), "%.*s", (int)strcspn(text, "\n"), text);
    return message;
}

static int pg_ok(struct copy *c, const char *sql)
{
    PGresult *res = PQexec(c->dst, sql);
    int ok = PQresultStatus(res) == PGRES_COMMAND_OK || PQresultStatus(res) == PGRES_TUPLES_OK;

    PQclear(res);
    return ok ? 0 : fail(c, "PostgreSQL: %s", pg_message(c->dst));
}

/* ---- the two schemas ------------------------------------------------------------------------------ */

struct column {
    char name[64];
    int bytea;
};

/* The columns of table that both stores have, in PostgreSQL's order. */
static int shared_columns(struct copy *c, const char *table, struct column *cols, int max, int *n)
{
    static const char pg_sql[] = "SELECT column_name, data_type FROM information_schema.columns"
                                 " WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position";
    char pragma[128], qualified[160];
    const char *params[1] = {table};
    sqlite3_stmt *stmt = NULL;
    PGresult *res;
    int i, rows, found, result = 0;
    size_t k;

    *n = 0;
    res = PQexecParams(c->dst, pg_sql, 1, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        PQclear(res);
        return fail(c, "PostgreSQL: %s", pg_message(c->dst));
    }
    rows = PQntuples(res);
    snprintf(pragma, sizeof(pragma), "PRAGMA table_info(\"%s\")", table);
    if (sqlite3_prepare_v2(c->src, pragma, -1, &stmt, NULL) != SQLITE_OK) {
        PQclear(res);
        return fail(c, "SQLite: %s", sqlite3_errmsg(c->src));
    }
    while (result == 0 && sqlite3_step(stmt) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(stmt, 1);
        for (found = -1, i = 0; i < rows; ++i)
            if (strcmp(PQgetvalue(res, i, 0), name) == 0)
                found = i;
        if (found < 0) {
            snprintf(qualified, sizeof(qualified), "%s.%s", table, name);
            for (k = 0; k < sizeof(obsolete) / sizeof(obsolete[0]); ++k)
                if (strcmp(obsolete[k], qualified) == 0)
                    break;
            if (k == sizeof(obsolete) / sizeof(obsolete[0]))
                result = fail(c, "column %s of the SQLite store has no place in the PostgreSQL schema", qualified);
            continue;
        }
        if (*n == max || strlen(name) >= sizeof(cols[0].name)) {
            result = fail(c, "table %s has too many or too long columns", table);
            break;
        }
        snprintf(cols[*n].name, sizeof(cols[0].name), "%s", name);
        cols[*n].bytea = strcmp(PQgetvalue(res, found, 1), "bytea") == 0;
        ++*n;
    }
    sqlite3_finalize(stmt);
    PQclear(res);
    return result;
}

/* Every table of the SQLite store must be one this copy knows: nothing is left behind. */
static int known_tables(struct copy *c)
{
    static const char sql[] = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
                              " AND name <> 'schema_version'";
    sqlite3_stmt *stmt = NULL;
    int result = 0;
    size_t i;

    if (sqlite3_prepare_v2(c->src, sql, -1, &stmt, NULL) != SQLITE_OK)
        return fail(c, "SQLite: %s", sqlite3_errmsg(c->src));
    while (result == 0 && sqlite3_step(stmt) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(stmt, 0);
        for (i = 0; i < NTABLES && strcmp(tables[i].name, name) != 0; ++i) {
        }
        if (i == NTABLES)
            result = fail(c, "table %s of the SQLite store is unknown to this relayd", name);
    }
    sqlite3_finalize(stmt);
    return result;
}

static int schema_version_sqlite(struct copy *c)
{
    sqlite3_stmt *stmt = NULL;
    int version = 0;

    if (sqlite3_prepare_v2(c->src, "SELECT max(version) FROM schema_version", -1, &stmt, NULL) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW)
        version = sqlite3_column_int(stmt, 0);
    sqlite3_finalize(stmt);
    return version;
}

static int schema_version_pg(struct copy *c)
{
    PGresult *res = PQexec(c->dst, "SELECT max(version) FROM schema_version");
    int version = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 ? atoi(PQgetvalue(res, 0, 0)) : 0;

    PQclear(res);
    return version;
}

/* Locks every table against writers for the copy, and checks that each is empty. */
static int empty_target(struct copy *c)
{
    char sql[1024], probe[128];
    size_t i, used = 0;

    used += (size_t)snprintf(sql + used, sizeof(sql) - used, "LOCK TABLE ");
    for (i = 0; i < NTABLES; ++i)
        used += (size_t)snprintf(sql + used, sizeof(sql) - used, "%s%s", i > 0 ? ", " : "", tables[i].name);
    snprintf(sql + used, sizeof(sql) - used, " IN EXCLUSIVE MODE");
    if (pg_ok(c, sql) != 0)
        return -1;
    for (i = 0; i < NTABLES; ++i) {
        PGresult *res;
        int rows;
        snprintf(probe, sizeof(probe), "SELECT 1 FROM %s LIMIT 1", tables[i].name);
        res = PQexec(c->dst, probe);
        rows = PQresultStatus(res) == PGRES_TUPLES_OK ? PQntuples(res) : -1;
        PQclear(res);
        if (rows != 0)
            return rows < 0 ? fail(c, "PostgreSQL: %s", pg_message(c->dst))
                            : fail(c,
                                   "the PostgreSQL database is not empty (table %s has rows): migrate copies into"
                                   " an empty database only",
                                   tables[i].name);
    }
    return 0;
}

/* ---- copying ----------------------------------------------------------------------------------- */

/* A value in COPY's text format: backslash escapes for the separators, \N for NULL, \\x... hex for BYTEA. */
static int put_value(rl_buf_t *b, sqlite3_stmt *stmt, int i, int bytea)
{
    const unsigned char *v;
    int n, k, result = 0;

    if (sqlite3_column_type(stmt, i) == SQLITE_NULL)
        return rl_buf_append(b, "\\N", 2);
    if (bytea) {
        v = sqlite3_column_blob(stmt, i);
        n = sqlite3_column_bytes(stmt, i);
        result = rl_buf_append(b, "\\\\x", 3);
        for (k = 0; k < n && result == 0; ++k) {
            char pair[3];
            rl_hex_encode(&v[k], 1, pair);
            result = rl_buf_append(b, pair, 2);
        }
        return result;
    }
    v = sqlite3_column_text(stmt, i);
    n = sqlite3_column_bytes(stmt, i);
    for (k = 0; k < n && result == 0; ++k) {
        switch (v[k]) {
        case '\\':
            result = rl_buf_append(b, "\\\\", 2);
            break;
        case '\n':
            result = rl_buf_append(b, "\\n", 2);
            break;
        case '\r':
            result = rl_buf_append(b, "\\r", 2);
            break;
        case '\t':
            result = rl_buf_append(b, "\\t", 2);
            break;
        default:
            result = rl_buf_append(b, &v[k], 1);
            break;
        }
    }
    return result;
}

static int copy_table(struct copy *c, size_t index)
{
    const char *table = tables[index].name;
    struct column cols[32];
    rl_buf_t b;
    char select[2048], copy[2048];
    size_t sel = 0, cp = 0;
    sqlite3_stmt *stmt = NULL;
    PGresult *res;
    int64_t read = 0, written;
    int n, i, rc, result = -1;

    /* PQputCopyData takes an int: the cap keeps a chunk (a row past COPY_CHUNK included) under it. */
    rl_buf_init(&b, INT_MAX);
    if (shared_columns(c, table, cols, 32, &n) != 0)
        return -1;
    if (n == 0)
        return fail(c, "table %s has no column in common between the two schemas", table);
    sel += (size_t)snprintf(select + sel, sizeof(select) - sel, "SELECT ");
    cp += (size_t)snprintf(copy + cp, sizeof(copy) - cp, "COPY %s (", table);
    for (i = 0; i < n; ++i) {
        sel += (size_t)snprintf(select + sel, sizeof(select) - sel, "%s\"%s\"", i > 0 ? ", " : "", cols[i].name);
        cp += (size_t)snprintf(copy + cp, sizeof(copy) - cp, "%s\"%s\"", i > 0 ? ", " : "", cols[i].name);
    }
    sel += (size_t)snprintf(select + sel, sizeof(select) - sel, " FROM \"%s\"", table);
    if (tables[index].order != NULL)
        snprintf(select + sel, sizeof(select) - sel, " ORDER BY %s", tables[index].order);
    snprintf(copy + cp, sizeof(copy) - cp, ") FROM STDIN");
    if (sqlite3_prepare_v2(c->src, select, -1, &stmt, NULL) != SQLITE_OK)
        return fail(c, "SQLite: %s", sqlite3_errmsg(c->src));
    res = PQexec(c->dst, copy);
    if (PQresultStatus(res) != PGRES_COPY_IN) {
        PQclear(res);
        sqlite3_finalize(stmt);
        return fail(c, "PostgreSQL: %s", pg_message(c->dst));
    }
    PQclear(res);
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        for (i = 0; i < n; ++i)
            if ((i > 0 && rl_buf_append(&b, "\t", 1) != 0) || put_value(&b, stmt, i, cols[i].bytea) != 0)
                goto out_of_memory;
        if (rl_buf_append(&b, "\n", 1) != 0)
            goto out_of_memory;
        ++read;
        if (b.len >= COPY_CHUNK) {
            if (PQputCopyData(c->dst, b.bytes, (int)b.len) != 1)
                break;
            rl_buf_reset(&b);
        }
    }
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        PQputCopyEnd(c->dst, "the source could not be read");
        fail(c, "SQLite: %s", sqlite3_errmsg(c->src));
    } else if ((b.len > 0 && PQputCopyData(c->dst, b.bytes, (int)b.len) != 1) || PQputCopyEnd(c->dst, NULL) != 1) {
        fail(c, "PostgreSQL: %s", pg_message(c->dst));
    } else {
        result = 0;
    }
    /* The COPY's own outcome (a row the target refused) comes with its result. */
    while ((res = PQgetResult(c->dst)) != NULL) {
        if (result == 0 && PQresultStatus(res) != PGRES_COMMAND_OK) {
            fail(c, "PostgreSQL refused a row of %s: %s", table, pg_message(c->dst));
            result = -1;
        } else if (result == 0) {
            written = strtoll(PQcmdTuples(res), NULL, 10);
            if (written != read)
                result = fail(c, "table %s: %lld rows read, %lld written", table, (long long)read, (long long)written);
        }
        PQclear(res);
    }
    sqlite3_finalize(stmt);
    rl_buf_free(&b);
    if (result == 0) {
        c->counts[index] = read;
        c->total += read;
        if (c->terminal) {
            printf("  %-16s %10lld rows\n", table, (long long)read);
            fflush(stdout);
        }
    }
    return result;
out_of_memory:
    PQputCopyEnd(c->dst, "out of memory");
    while ((res = PQgetResult(c->dst)) != NULL)
        PQclear(res);
    sqlite3_finalize(stmt);
    rl_buf_free(&b);
    return fail(c, "out of memory");
}

/* ---- the command ----------------------------------------------------------------------------------- */

static void report(struct copy *c, int ok, const char *from, int v_sqlite, int v_pg, int64_t ms)
{
    json_t *summary, *counts;
    size_t i;

    if (!ok)
        fprintf(stderr, "relayd migrate: %s\n", c->error);
    if (c->terminal) {
        if (ok)
            printf("copied %lld rows in %lld ms\n", (long long)c->total, (long long)ms);
        else
            printf("nothing was copied\n");
        return;
    }
    if (ok) {
        counts = json_object();
        for (i = 0; i < NTABLES; ++i)
            json_object_set_new(counts, tables[i].name, json_integer(c->counts[i]));
        summary = json_pack("{s:b, s:s, s:s?, s:s?, s:{s:i, s:i}, s:o, s:I, s:I}", "ok", 1, "from", from, "to_database",
                            c->dst != NULL ? PQdb(c->dst) : NULL, "to_host", c->dst != NULL ? PQhost(c->dst) : NULL,
                            "schema_version", "sqlite", v_sqlite, "postgres", v_pg, "tables", counts, "rows",
                            (json_int_t)c->total, "duration_ms", (json_int_t)ms);
    } else {
        summary = json_pack("{s:b, s:s, s:s}", "ok", 0, "from", from, "error", c->error);
    }
    json_dumpf(summary, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
    fputc('\n', stdout);
    fflush(stdout);
    json_decref(summary);
}

int rl_store_migrate(const char *sqlite_path, const char *postgres_url)
{
    struct copy c;
    rl_txn_t *source = NULL, *target = NULL;
    char from[4200];
    int64_t started = rl_clock_mono_us();
    int v_sqlite = 0, v_pg = 0, ok = 0, began = 0;
    char log_path[4200];
    rl_deltalog_files_t log = {0};
    size_t i;

    memset(&c, 0, sizeof(c));
    c.terminal = isatty(STDOUT_FILENO);
    snprintf(from, sizeof(from), "sqlite:%s", sqlite_path);
    /* The SQLite backend would create a missing file: a wrong path must not look like an empty store. */
    if (access(sqlite_path, R_OK | W_OK) != 0) {
        fail(&c, "cannot open the SQLite store %s: %s", sqlite_path, strerror(errno));
        goto out;
    }
    if (rl_store__sqlite_open(sqlite_path, RL_STORE_ONE_SHOT, &source) != 0) {
        fail(&c, "cannot open the SQLite store %s (the log above says why)", sqlite_path);
        goto out;
    }
    rl_txn_close(source);
    /*
     * Deltas a relayd answered and had not folded when it stopped (a kill -9)
     * are in its delta log: read before the snapshot, folded into the copy
     * before its commit, with the fold's rules (what is there is skipped).
     */
    snprintf(log_path, sizeof(log_path), "%s-deltas.log", sqlite_path);
    if (rl_deltalog_read_files(log_path, &log) != 0) {
        fail(&c, "cannot read %s: %s", log_path, strerror(errno));
        goto out;
    }
    if (sqlite3_open_v2(sqlite_path, &c.src, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        fail(&c, "cannot open the SQLite store %s: %s", sqlite_path, sqlite3_errmsg(c.src));
        goto out;
    }
    sqlite3_busy_timeout(c.src, 5000);
    /* One snapshot of the source for the whole copy. */
    if (sqlite3_exec(c.src, "BEGIN", NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_exec(c.src, "SELECT 1 FROM schema_version LIMIT 1", NULL, NULL, NULL) != SQLITE_OK) {
        fail(&c, "cannot read the SQLite store: %s", sqlite3_errmsg(c.src));
        goto out;
    }
    v_sqlite = schema_version_sqlite(&c);
    if (known_tables(&c) != 0)
        goto out;
    if (rl_store__postgres_open(postgres_url, RL_STORE_ONE_SHOT, &target) != 0) {
        fail(&c, "cannot open the PostgreSQL store (the log above says why)");
        goto out;
    }
    c.dst = (PGconn *)rl_store__postgres_conn(target);
    /* A copy takes as long as it takes: no statement timeout, and blocking calls. */
    if (PQsetnonblocking(c.dst, 0) != 0 ||
        pg_ok(&c, "SET statement_timeout = 0; SET idle_in_transaction_session_timeout = 0") != 0)
        goto out;
    v_pg = schema_version_pg(&c);
    if (pg_ok(&c, "BEGIN") != 0)
        goto out;
    began = 1;
    if (empty_target(&c) != 0)
        goto out;
    if (c.terminal) {
        printf("copying %s (schema %d) into database %s on %s (schema %d)\n", from, v_sqlite, PQdb(c.dst),
               PQhost(c.dst), v_pg);
        fflush(stdout);
    }
    for (i = 0; i < NTABLES; ++i)
        if (copy_table(&c, i) != 0)
            goto out;
    if (log.len[0] + log.len[1] > 0 && rl_deltalog_fold_files(target, &log, NULL) != 0) {
        fail(&c, "cannot fold the delta log %s into the copy", log_path);
        goto out;
    }
    if (pg_ok(&c, "COMMIT") != 0)
        goto out;
    began = 0;
    ok = 1;
out:
    /* Not pg_ok: the reason the copy stopped is what the operator must read. */
    if (began)
        PQclear(PQexec(c.dst, "ROLLBACK"));
    report(&c, ok, from, v_sqlite, v_pg, (rl_clock_mono_us() - started) / 1000);
    if (c.src != NULL)
        sqlite3_close(c.src);
    if (target != NULL)
        rl_txn_close(target);
    rl_deltalog_files_free(&log);
    return ok ? 0 : 1;
}
