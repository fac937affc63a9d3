/*
 * The PostgreSQL backend: plain storage of the relay's rows, in a database
 * that several relayd nodes share.
 *
 * One connection per node, used by the store's worker thread only: the
 * worker runs every batch in order on it, which is what operations need
 * (each one sees the ones submitted before it). Calls are synchronous for
 * the worker but never unbounded: each statement is sent without blocking
 * and its answer waited for with a deadline, so a server that hangs turns
 * into RL_E_UNAVAILABLE rather than a worker stuck for ever.
 *
 * Transactions are READ COMMITTED and run beside other nodes' transactions,
 * so a writing operation locks what it reads: a row read by key takes FOR
 * UPDATE, and the lists the sweeps read to write back (approvals due,
 * messages left open) take FOR UPDATE SKIP LOCKED, so that two nodes never
 * expire or end the same row and a sweep never overwrites a decision that
 * another node is making. Counters are one UPDATE ... RETURNING.
 *
 * An insert meeting an existing key is ON CONFLICT DO NOTHING and answers
 * RL_E_CONFLICT when it changed no row, which leaves the transaction usable.
 * Any statement that fails aborts the transaction (or the operation's
 * savepoint) in PostgreSQL: later statements then fail at once with the
 * same error, without a round trip, until the worker rolls the savepoint
 * back or the batch ends.
 *
 * The connection is made again by itself: when it is lost, the next begin
 * connects, and while that fails begin answers RL_E_UNAVAILABLE at once for
 * a back-off of 100 ms doubling to 5 s. The loss and the return are logged
 * once each. The URL may carry a password: it is kept in memory only, and
 * logs name the host and database.
 *
 * This file is PostgreSQL's driver (sql.h): connection, transactions,
 * locking, and one statement at a time; the operations themselves are
 * written once for every SQL engine in ops.c. Nothing here knows a rule of
 * the relay; docs/internals/store.md says what each function must do for
 * any backend.
 */
#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "store/backends.h"
#include "store/postgres.h"
#include "store/rows.h"
#include "store/schema.h"
#include "store/sql.h"

#define STMT_CACHE 256
#define STMT_NAME  24 /* "s" and a size_t */

/* Type oids of pg_type, fixed since PostgreSQL's first releases. */
#define OID_BOOL  16
#define OID_BYTEA 17
#define OID_INT8  20
#define OID_INT4  23
#define OID_TEXT  25

#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS   5000
/* Set on relayd's connections when the server, the role and the URL leave them at PostgreSQL's default. */
#define STATEMENT_TIMEOUT_MS   10000
#define IDLE_IN_TXN_TIMEOUT_MS 60000
#define CONFIGURE_WAIT_MS      5000
#define MIGRATION_LOCK         353349034329LL /* "RELAY" */

struct pg_txn {
    rl_sql_txn_t base;
    PGconn *conn;
    char *conninfo;  /* the URL as given: it may carry a password, so it is never logged */
    char where[256]; /* host and database, for logs */
    /* Statements prepared on this connection, by address and form (locked or not); named s<index>. */
    struct {
        const rl_sql_t *stmt;
        int locked;
    } prepared[STMT_CACHE];
    size_t nprepared;
    /* The error that aborted the transaction (or the savepoint), until it is rolled back. */
    int failed;
    int in_txn, in_savepoint;
    /* The loss was logged and the connection is not back yet: since when, and the attempts since. */
    int lost;
    int64_t lost_at_us;
    int attempts;
    int64_t retry_at_us, backoff_ms;
    /* How long one statement may take before the server counts as hung, and whether one did. */
    int wait_ms;
    int timed_out;
};

#define TXN(txn) ((struct pg_txn *)(txn))

/* ---- waiting for the server, with a deadline --------------------------------------------------- */

static void on_notice(void *arg, const char *message)
{
    /* libpq prints notices on stderr by default, which would break the log's one JSON object per line. */
    rl_log_debug("postgres notice: %.*s", (int)strcspn(message, "\n"), message);
}

/* Drops the connection: every later call fails with RL_E_UNAVAILABLE until begin connects again. */
static int lose(struct pg_txn *t, const char *why)
{
    if (!t->lost) {
        rl_log_warn("the store lost its PostgreSQL connection (%s): %.*s; reconnecting, with a back-off of %d ms "
                    "doubling to %d ms while it fails",
                    t->where, (int)strcspn(why, "\n"), why, BACKOFF_FIRST_MS, BACKOFF_MAX_MS);
        t->lost = 1;
        t->lost_at_us = rl_clock_mono_us();
        t->attempts = 0;
    }
    PQfinish(t->conn);
    t->conn = NULL;
    t->nprepared = 0;
    t->in_txn = t->in_savepoint = 0;
    t->failed = RL_E_UNAVAILABLE;
    /* The first attempt is at the next begin; back-off starts if it fails. */
    t->retry_at_us = 0;
    t->backoff_ms = BACKOFF_FIRST_MS;
    return RL_E_UNAVAILABLE;
}

/* Waits until the socket is ready for events or the deadline passes: 1 ready, 0 timed out, -1 failed. */
static int wait_socket(struct pg_txn *t, short events, int64_t deadline_us)
{
    struct pollfd pfd = {.fd = PQsocket(t->conn), .events = events};

    for (;;) {
        int64_t left = deadline_us - rl_clock_mono_us();
        int rc;
        if (left <= 0)
            return 0;
        rc = poll(&pfd, 1, (int)((left + 999) / 1000));
        if (rc > 0)
            return 1;
        if (rc < 0 && errno != EINTR)
            return -1;
    }
}

/*
 * Waits for every result of what was sent. Returns the first error result,
 * or the last result; NULL when the connection broke or the server did not
 * answer in time (the connection is then dropped and *error says
 * RL_E_UNAVAILABLE).
 */
static PGresult *await(struct pg_txn *t, int *error)
{
    int64_t deadline = rl_clock_mono_us() + (int64_t)t->wait_ms * 1000;
    PGresult *kept = NULL, *res;
    int flushed, ready;

    /* Everything sent since the last wait, answered: one network round trip (relay_store_round_trips_total). */
    ++t->base.base.round_trips;
    while ((flushed = PQflush(t->conn)) == 1) {
        ready = wait_socket(t, POLLIN | POLLOUT, deadline);
        if (ready <= 0)
            goto hung;
        if (!PQconsumeInput(t->conn))
            goto broken;
    }
    if (flushed < 0)
        goto broken;
    for (;;) {
        while (PQisBusy(t->conn)) {
            ready = wait_socket(t, POLLIN, deadline);
            if (ready <= 0)
                goto hung;
            if (!PQconsumeInput(t->conn))
                goto broken;
        }
        res = PQgetResult(t->conn);
        if (res == NULL)
            break;
        if (kept != NULL && PQresultStatus(kept) == PGRES_FATAL_ERROR) {
            PQclear(res);
        } else {
            PQclear(kept);
            kept = res;
        }
    }
    if (kept == NULL || (PQstatus(t->conn) == CONNECTION_BAD && PQresultStatus(kept) == PGRES_FATAL_ERROR)) {
        PQclear(kept);
        goto broken;
    }
    return kept;
hung:
    PQclear(kept);
    rl_log_warn("the store's PostgreSQL server (%s) did not answer within %d ms", t->where, t->wait_ms);
    t->timed_out = 1;
    *error = lose(t, "no answer in time");
    return NULL;
broken:
    PQclear(kept);
    *error = lose(t, PQerrorMessage(t->conn));
    return NULL;
}

/* ---- errors ------------------------------------------------------------------------------------- */

/* SQLSTATEs (and classes, two characters) that mean "try again later" rather than a bug. */
static const char *const unavailable_states[] = {
    "08",    /* connection exception */
    "53",    /* insufficient resources: too many connections, disk full, out of memory */
    "40001", /* serialization failure */
    "40P01", /* deadlock detected */
    "55P03", /* lock not available */
    "57014", /* query canceled: the statement timeout */
    "57P01", /* admin shutdown */
    "57P02", /* crash shutdown */
    "57P03", /* cannot connect now: starting up or shutting down */
    "25P03", /* idle in transaction session timeout */
};

static int error_of_state(const char *state)
{
    size_t i;

    if (state == NULL)
        return RL_E_INTERNAL;
    if (strcmp(state, "23505") == 0 || strcmp(state, "23503") == 0)
        return RL_E_CONFLICT;
    /* disk_full: the server's disk; reported once per episode by the worker (worker.c, note_full). */
    if (strcmp(state, "53100") == 0)
        return RL_E_STORAGE_FULL;
    for (i = 0; i < sizeof(unavailable_states) / sizeof(unavailable_states[0]); ++i)
        if (strncmp(state, unavailable_states[i], strlen(unavailable_states[i])) == 0)
            return RL_E_UNAVAILABLE;
    return RL_E_INTERNAL;
}

/*
 * A failed statement: its error, logged unless it is a conflict the caller
 * expects. The transaction (or savepoint) is aborted in PostgreSQL, so the
 * error sticks until it is rolled back. Values are not logged (the detail
 * of a unique violation quotes the key), only the state, the message and
 * the statement's static text.
 */
static int failure(struct pg_txn *t, PGresult *res, const char *sql)
{
    const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    const char *message = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
    int result = error_of_state(state);

    if (message == NULL)
        message = PQresultErrorMessage(res);
    if (result == RL_E_INTERNAL)
        rl_log_error("postgres %s: %.*s (in: %.100s)", state != NULL ? state : "-", (int)strcspn(message, "\n"),
                     message, sql);
    else if (result == RL_E_UNAVAILABLE)
        rl_log_warn("postgres %s: %.*s", state, (int)strcspn(message, "\n"), message);
    if (t->in_txn)
        t->failed = result;
    return result;
}

/* ---- the driver: statements ---------------------------------------------------------------------- */

static const rl_sql_driver_t pg_driver;

struct params {
    int n;
    Oid types[RL_SQL_MAX_PARAMS];
    const char *values[RL_SQL_MAX_PARAMS];
    int lengths[RL_SQL_MAX_PARAMS], formats[RL_SQL_MAX_PARAMS];
    unsigned char ints[RL_SQL_MAX_PARAMS][8];
};

static void put_be(unsigned char *out, uint64_t v, int bytes)
{
    int i;

    for (i = bytes - 1; i >= 0; --i, v >>= 8)
        out[i] = (unsigned char)(v & 0xff);
}

/*
 * The parameters as libpq takes them: numbers and bytes (BYTEA) travel in
 * binary, strings as text; the types are given to the server when the
 * statement is prepared.
 */
static void bind(struct params *p, const rl_sql_param_t *params, int n)
{
    int i;

    for (i = 0; i < n; ++i) {
        const rl_sql_param_t *param = &params[i];
        p->values[i] = NULL;
        p->lengths[i] = 0;
        p->formats[i] = 1;
        switch (param->type) {
        case RL_SQL_TEXT:
            p->types[i] = OID_TEXT;
            p->formats[i] = 0;
            p->values[i] = param->text;
            break;
        case RL_SQL_BYTES:
            p->types[i] = OID_BYTEA;
            p->values[i] = param->text;
            p->lengths[i] = (int)param->len;
            break;
        case RL_SQL_BOOL:
            /* A BOOLEAN column takes no integer: one byte, 0 or 1, in binary. */
            p->types[i] = OID_BOOL;
            p->ints[i][0] = param->value != 0;
            p->values[i] = (const char *)p->ints[i];
            p->lengths[i] = 1;
            break;
        case RL_SQL_INT32:
            p->types[i] = OID_INT4;
            put_be(p->ints[i], (uint64_t)(uint32_t)(int)param->value, 4);
            p->values[i] = (const char *)p->ints[i];
            p->lengths[i] = 4;
            break;
        default:
            p->types[i] = OID_INT8;
            if (param->type == RL_SQL_TIME && param->value == RL_NO_TIME)
                break;
            put_be(p->ints[i], (uint64_t)param->value, 8);
            p->values[i] = (const char *)p->ints[i];
            p->lengths[i] = 8;
            break;
        }
    }
    p->n = n;
}

/* Transaction control and other parameterless text, by the simple protocol (several statements allowed). */
static int control(struct pg_txn *t, const char *sql, PGresult **out)
{
    PGresult *res;
    int result = 0;

    if (out != NULL)
        *out = NULL;
    if (t->conn == NULL)
        return RL_E_UNAVAILABLE;
    if (!PQsendQuery(t->conn, sql))
        return lose(t, PQerrorMessage(t->conn));
    res = await(t, &result);
    if (res == NULL)
        return result;
    if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK) {
        result = failure(t, res, sql);
        PQclear(res);
        return result;
    }
    if (out != NULL)
        *out = res;
    else
        PQclear(res);
    return 0;
}

/*
 * The name of stmt's prepared statement on this connection (its locked form
 * apart), preparing it on first use; "" when the cache is full.
 */
static int statement(struct pg_txn *t, const rl_sql_t *stmt, int locked, const struct params *p, char name[STMT_NAME])
{
    PGresult *res;
    char *text;
    size_t i;
    int result = 0, sent;

    for (i = 0; i < t->nprepared; ++i) {
        if (t->prepared[i].stmt == stmt && t->prepared[i].locked == locked) {
            snprintf(name, STMT_NAME, "s%zu", i);
            return 0;
        }
    }
    if (t->nprepared == STMT_CACHE) {
        rl_log_warn("postgres: statement cache full");
        name[0] = '\0';
        return 0;
    }
    snprintf(name, STMT_NAME, "s%zu", t->nprepared);
    if ((text = rl_sql__rewrite(&pg_driver.dialect, stmt, locked)) == NULL)
        return RL_E_INTERNAL;
    sent = PQsendPrepare(t->conn, name, text, p->n, p->types);
    free(text);
    if (!sent)
        return lose(t, PQerrorMessage(t->conn));
    res = await(t, &result);
    if (res == NULL)
        return result;
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        result = failure(t, res, stmt->text);
        PQclear(res);
        return result;
    }
    PQclear(res);
    t->prepared[t->nprepared].stmt = stmt;
    t->prepared[t->nprepared].locked = locked;
    ++t->nprepared;
    return 0;
}

/* Runs stmt with its parameters and takes every row of its result: the cursor walks them. */
static int pg_run(rl_txn_t *txn, const rl_sql_t *stmt, int locked, const rl_sql_param_t *params, int n,
                  rl_sql_cursor_t *cur)
{
    struct pg_txn *t = TXN(txn);
    struct params p;
    PGresult *res;
    char name[STMT_NAME], *text;
    int result = 0, sent;

    if (t->failed != 0)
        return t->failed;
    if (t->conn == NULL)
        return RL_E_UNAVAILABLE;
    bind(&p, params, n);
    if ((result = statement(t, stmt, locked, &p, name)) != 0)
        return result;
    if (name[0] != '\0') {
        sent = PQsendQueryPrepared(t->conn, name, p.n, p.values, p.lengths, p.formats, 1);
    } else {
        if ((text = rl_sql__rewrite(&pg_driver.dialect, stmt, locked)) == NULL)
            return RL_E_INTERNAL;
        sent = PQsendQueryParams(t->conn, text, p.n, p.types, p.values, p.lengths, p.formats, 1);
        free(text);
    }
    if (!sent)
        return lose(t, PQerrorMessage(t->conn));
    res = await(t, &result);
    if (res == NULL)
        return result;
    if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK) {
        result = failure(t, res, stmt->text);
        PQclear(res);
        return result;
    }
    cur->handle = res;
    return 0;
}

static int pg_next(rl_sql_cursor_t *cur)
{
    cur->on_row = ++cur->row < PQntuples(cur->handle);
    return cur->on_row;
}

static int pg_is_null(const rl_sql_cursor_t *cur, int col)
{
    return PQgetisnull(cur->handle, cur->row, col);
}

/* A binary integer column of any width (results are binary); NULL is 0. */
static int64_t pg_integer(const rl_sql_cursor_t *cur, int col)
{
    const unsigned char *bytes = (const unsigned char *)PQgetvalue(cur->handle, cur->row, col);
    int len = PQgetlength(cur->handle, cur->row, col), i;
    uint64_t v;

    if (PQgetisnull(cur->handle, cur->row, col) || len == 0)
        return 0;
    /* Sign-extended from the first byte: the columns are signed. */
    v = (bytes[0] & 0x80) ? UINT64_MAX : 0;
    for (i = 0; i < len; ++i)
        v = (v << 8) | bytes[i];
    return (int64_t)v;
}

static const char *pg_bytes(const rl_sql_cursor_t *cur, int col, size_t *len)
{
    if (PQgetisnull(cur->handle, cur->row, col)) {
        *len = 0;
        return NULL;
    }
    *len = (size_t)PQgetlength(cur->handle, cur->row, col);
    return PQgetvalue(cur->handle, cur->row, col);
}

static int pg_finish(rl_sql_cursor_t *cur, int64_t *changes)
{
    if (changes != NULL)
        *changes = strtoll(PQcmdTuples(cur->handle), NULL, 10);
    PQclear(cur->handle);
    cur->handle = NULL;
    return 0;
}

/*
 * FOR UPDATE cannot lock a key that is not recorded yet: the key itself is
 * locked (a transaction advisory lock on its hash, until the commit). A
 * statement of its own: the read after it must take its snapshot once the
 * lock is held.
 */
static int pg_lock_key(rl_txn_t *txn, const char *owner, const char *scope, const char *key)
{
    static const rl_sql_t sql = {
        "SELECT pg_advisory_xact_lock(hashtextextended(? || chr(31) || ? || chr(31) || ?, 0))"};

    return rl_sql__write(txn, &sql, NULL, RL_SQL_PARAMS(P_TEXT(owner), P_TEXT(scope), P_TEXT(key)));
}

/* ---- the connection ------------------------------------------------------------------------------ */

/* "database DB on HOST:PORT" for a connection URL, for logs: never its user or password. */
static void describe(const char *conninfo, char *out, size_t outsz)
{
    PQconninfoOption *options = PQconninfoParse(conninfo, NULL), *o;
    const char *host = NULL, *port = NULL, *db = NULL;

    for (o = options; o != NULL && o->keyword != NULL; ++o) {
        if (o->val == NULL || o->val[0] == '\0')
            continue;
        if (strcmp(o->keyword, "host") == 0 || (host == NULL && strcmp(o->keyword, "hostaddr") == 0))
            host = o->val;
        else if (strcmp(o->keyword, "port") == 0)
            port = o->val;
        else if (strcmp(o->keyword, "dbname") == 0)
            db = o->val;
    }
    snprintf(out, outsz, "database %s on %s%s%s", db != NULL ? db : "(default)", host != NULL ? host : "localhost",
             port != NULL ? ":" : "", port != NULL ? port : "");
    PQconninfoFree(options);
}

/*
 * The session's settings: a statement timeout (so that a lock wait or a slow
 * server ends in RL_E_UNAVAILABLE) and an idle-in-transaction timeout (so
 * that a node stopped in the middle of a batch does not hold its row locks
 * for ever), each unless the operator set one (in the URL's options, for the
 * role or the database); and synchronous_commit never off, so that a commit
 * answered is durable. The client's own deadline is twice the statement
 * timeout and a second: a server that has not answered by then is hung.
 */
static int configure(struct pg_txn *t)
{
    static const char sql[] = "SELECT name, setting, source FROM pg_settings WHERE name IN"
                              " ('statement_timeout', 'idle_in_transaction_session_timeout', 'synchronous_commit')";
    char set[256] = "";
    size_t used = 0;
    int64_t statement_ms = STATEMENT_TIMEOUT_MS;
    PGresult *res;
    int i, result;

    /* A server that accepts a connection and then does not answer this is hung. */
    t->wait_ms = CONFIGURE_WAIT_MS;
    if ((result = control(t, sql, &res)) != 0)
        return result;
    for (i = 0; i < PQntuples(res); ++i) {
        const char *name = PQgetvalue(res, i, 0), *setting = PQgetvalue(res, i, 1), *source = PQgetvalue(res, i, 2);
        int is_default = strcmp(source, "default") == 0;
        if (strcmp(name, "statement_timeout") == 0) {
            if (is_default)
                used += snprintf(set + used, sizeof(set) - used, "SET statement_timeout = %d;", STATEMENT_TIMEOUT_MS);
            else
                statement_ms = strtoll(setting, NULL, 10);
        } else if (strcmp(name, "idle_in_transaction_session_timeout") == 0 && is_default) {
            used += snprintf(set + used, sizeof(set) - used, "SET idle_in_transaction_session_timeout = %d;",
                             IDLE_IN_TXN_TIMEOUT_MS);
        } else if (strcmp(name, "synchronous_commit") == 0 && strcmp(setting, "off") == 0) {
            rl_log_warn("synchronous_commit is off for the store (%s): relayd sets it on for its connection", t->where);
            used += snprintf(set + used, sizeof(set) - used, "SET synchronous_commit = on;");
        }
    }
    PQclear(res);
    if (statement_ms <= 0)
        statement_ms = STATEMENT_TIMEOUT_MS;
    if (used > 0 && (result = control(t, set, NULL)) != 0)
        return result;
    t->wait_ms = (int)(2 * statement_ms + 1000);
    return 0;
}

/* A new connection with relayd's session settings: 0, or -1 with the reason in why. */
static int connect_now(struct pg_txn *t, char *why, size_t whysz)
{
    /*
     * Defaults first: the URL's own parameters, expanded from dbname, come
     * after them and win. The keepalives find a peer that vanished from the
     * network, connect_timeout a server that does not answer at all.
     */
    static const char *const keywords[] = {"connect_timeout",  "keepalives",
                                           "keepalives_idle",  "keepalives_interval",
                                           "keepalives_count", "tcp_user_timeout",
                                           "application_name", "client_encoding",
                                           "dbname",           NULL};
    const char *values[] = {"5", "1", "10", "5", "3", "30000", "relayd", "UTF8", t->conninfo, NULL};
    PGconn *conn = PQconnectdbParams(keywords, values, 1);

    if (conn == NULL || PQstatus(conn) != CONNECTION_OK) {
        const char *message = conn != NULL ? PQerrorMessage(conn) : "out of memory";
        snprintf(why, whysz, "%.*s", (int)strcspn(message, "\n"), message);
        PQfinish(conn);
        return -1;
    }
    PQsetNoticeProcessor(conn, on_notice, t);
    if (PQsetnonblocking(conn, 1) != 0) {
        snprintf(why, whysz, "cannot make the connection non-blocking");
        PQfinish(conn);
        return -1;
    }
    t->conn = conn;
    t->nprepared = 0;
    t->failed = 0;
    t->in_txn = t->in_savepoint = 0;
    if (configure(t) != 0) {
        snprintf(why, whysz, "cannot apply the session settings");
        PQfinish(t->conn);
        t->conn = NULL;
        return -1;
    }
    return 0;
}

/* Connects when there is no connection and the back-off allows it. 0 or RL_E_UNAVAILABLE. */
static int reconnect(struct pg_txn *t)
{
    int64_t now = rl_clock_mono_us();
    char why[256];
    int was_lost = t->lost;

    if (t->conn != NULL)
        return 0;
    if (now < t->retry_at_us)
        return RL_E_UNAVAILABLE;
    ++t->attempts;
    if (connect_now(t, why, sizeof(why)) != 0) {
        if (!t->lost) {
            rl_log_warn("the store cannot reach PostgreSQL (%s): %s; retrying, with a back-off of %d ms doubling to "
                        "%d ms",
                        t->where, why, BACKOFF_FIRST_MS, BACKOFF_MAX_MS);
            t->lost_at_us = now;
            t->attempts = 1;
        }
        t->lost = 1;
        rl_log_debug("store reconnect failed, next try in %lld ms: %s", (long long)t->backoff_ms, why);
        t->retry_at_us = now + t->backoff_ms * 1000;
        t->backoff_ms = t->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : t->backoff_ms * 2;
        return RL_E_UNAVAILABLE;
    }
    if (was_lost)
        rl_log_info("the store's PostgreSQL connection (%s) is back after %lld ms and %d attempts", t->where,
                    (long long)((now - t->lost_at_us) / 1000), t->attempts);
    t->lost = 0;
    t->backoff_ms = BACKOFF_FIRST_MS;
    return 0;
}

/* ---- transaction control ------------------------------------------------------------------------- */

static int pg_begin(rl_txn_t *txn)
{
    struct pg_txn *t = TXN(txn);
    int result;

    t->failed = 0;
    t->timed_out = 0;
    t->in_txn = t->in_savepoint = 0;
    if ((result = reconnect(t)) != 0)
        return result;
    result = control(t, "BEGIN", NULL);
    /*
     * A connection the server closed while idle (a restart, an administrator)
     * is found here; nothing was done in this transaction yet, so a new one
     * is tried at once rather than failing the batch. Not after a server that
     * did not answer: it would likely not answer again.
     */
    if (result == RL_E_UNAVAILABLE && t->conn == NULL && !t->timed_out) {
        t->failed = 0;
        if ((result = reconnect(t)) == 0)
            result = control(t, "BEGIN", NULL);
    }
    if (result == 0)
        t->in_txn = 1;
    t->failed = 0;
    return result;
}

/* Statements outside a transaction, each its own: the connection is made again when it was lost. */
/*
 * A batch whose every operation is of checked deltas (rl_store_op_type_t.deltas):
 * each op's run is one statement, atomic by itself, so each runs on its own
 * outside a transaction (autocommit): one round trip per op instead of
 * BEGIN, SAVEPOINT, RELEASE and COMMIT around it. 0 when it ran so (each
 * op's result set), 1 when the batch needs a transaction.
 */
static int pg_run_batch(rl_txn_t *txn, rl_store_op_t *batch)
{
    struct pg_txn *t = TXN(txn);
    rl_store_op_t *op;
    int ready;

    for (op = batch; op != NULL; op = op->next)
        if (op->type->deltas == NULL || op->type->deltas(op, NULL) != RL_STORE_DELTAS_CHECKED)
            return 1;
    t->failed = 0;
    t->timed_out = 0;
    t->in_txn = t->in_savepoint = 0;
    ready = reconnect(t);
    /* As the worker answers a batch whose begin failed: the outage keeps its word, anything else is internal. */
    if (ready != 0 && ready != RL_E_UNAVAILABLE && ready != RL_E_STORAGE_FULL)
        ready = RL_E_INTERNAL;
    for (op = batch; op != NULL; op = op->next) {
        txn->arena = &op->arena;
        txn->writing = op->type->writes;
        op->result = ready != 0 ? ready : op->type->run(txn, op);
    }
    txn->arena = NULL;
    txn->writing = 0;
    return 0;
}

static void pg_rollback(rl_txn_t *txn)
{
    struct pg_txn *t = TXN(txn);

    if (t->in_txn && t->conn != NULL)
        control(t, "ROLLBACK", NULL);
    t->in_txn = t->in_savepoint = 0;
    t->failed = 0;
}

static int pg_commit(rl_txn_t *txn)
{
    struct pg_txn *t = TXN(txn);
    PGresult *res = NULL;
    int result = t->failed;

    if (!t->in_txn)
        return result != 0 ? result : RL_E_UNAVAILABLE;
    if (result != 0) {
        pg_rollback(txn);
        return result;
    }
    /*
     * A lost connection here leaves the outcome unknown: the writes answer
     * 503 and a retry with the same idempotency key finds them if they were
     * kept.
     */
    result = control(t, "COMMIT", &res);
    /* COMMIT of a transaction that failed answers ROLLBACK, not an error. */
    if (result == 0 && strcmp(PQcmdStatus(res), "COMMIT") != 0) {
        rl_log_error("postgres: the transaction was rolled back at commit (%s)", PQcmdStatus(res));
        result = RL_E_INTERNAL;
    }
    PQclear(res);
    t->in_txn = t->in_savepoint = 0;
    t->failed = 0;
    return result;
}

static int pg_savepoint(rl_txn_t *txn)
{
    struct pg_txn *t = TXN(txn);
    int result;

    if (t->failed != 0)
        return t->failed;
    if ((result = control(t, "SAVEPOINT op", NULL)) == 0)
        t->in_savepoint = 1;
    return result;
}

static void pg_release(rl_txn_t *txn, int keep)
{
    struct pg_txn *t = TXN(txn);

    if (!t->in_savepoint || t->conn == NULL)
        return;
    t->in_savepoint = 0;
    if (keep && t->failed != 0) {
        rl_log_error("postgres: an operation succeeded after a failed statement; its writes are undone");
        keep = 0;
    }
    if (control(t, keep ? "RELEASE SAVEPOINT op" : "ROLLBACK TO SAVEPOINT op; RELEASE SAVEPOINT op", NULL) == 0)
        t->failed = 0;
}

/* ---- opening and closing -------------------------------------------------------------------------- */

static void pg_close(rl_txn_t *txn)
{
    struct pg_txn *t = TXN(txn);

    if (t->conn != NULL && t->in_txn)
        control(t, "ROLLBACK", NULL);
    PQfinish(t->conn);
    if (t->conninfo != NULL) {
        /* It may hold a password. */
        explicit_bzero(t->conninfo, strlen(t->conninfo));
        free(t->conninfo);
    }
    free(t);
}

static const rl_sql_driver_t pg_driver = {
    .name = "postgres",
    /* Text compares in the database's collation unless told; messages.seq is their insertion order. */
    .dialect = {.numbered = 1, .bytewise = " COLLATE \"C\"", .inserted = "seq", .row_locks = 1},
    .begin = pg_begin,
    .commit = pg_commit,
    .rollback = pg_rollback,
    .savepoint = pg_savepoint,
    .release = pg_release,
    .close = pg_close,
    .run_batch = pg_run_batch,
    .run = pg_run,
    .next = pg_next,
    .is_null = pg_is_null,
    .integer = pg_integer,
    .bytes = pg_bytes,
    .finish = pg_finish,
    .lock_key = pg_lock_key,
};

typedef struct version_row {
    int64_t version;
} version_row_t;
#define RL_ROW_VERSION(F, N, T) F(T, version, version, INT)
RL_ROW_DESCRIBE(version_row, version_row_t, RL_ROW_VERSION);

/*
 * Brings the schema to the binary's version (schema.c: PostgreSQL's steps),
 * one step per transaction. Each transaction takes an advisory lock first,
 * so nodes that start together wait for each other and migrate once. The
 * tables and columns are SQLite's, by name (the end-to-end tests and
 * relayd migrate read them so).
 */
static int migrate(struct pg_txn *t)
{
    static const rl_sql_t lock_sql = {"SELECT pg_advisory_xact_lock(?)"};
    static const rl_sql_t version_sql = {"SELECT coalesce(max(version), 0) FROM schema_version"};
    version_row_t row = {0};
    int target = rl_schema_target(RL_SCHEMA_POSTGRES);
    rl_arena_t arena = {NULL};
    char insert[96];
    int version = 0, result;

    t->base.base.arena = &arena;
    for (;;) {
        if ((result = control(t, "BEGIN", NULL)) != 0)
            break;
        t->in_txn = 1;
        if ((result = rl_sql__write(&t->base.base, &lock_sql, NULL, RL_SQL_PARAMS(P_INT(MIGRATION_LOCK)))) != 0 ||
            (result = control(t, "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)", NULL)) != 0 ||
            (result = rl_sql__get(&t->base.base, &version_sql, &version_row, &row, NULL, 0)) != 0)
            break;
        version = (int)row.version;
        if (version > target) {
            rl_log_error("the store (%s) is at schema version %d, newer than this relayd (%d)", t->where, version,
                         target);
            result = RL_E_INTERNAL;
            break;
        }
        if (version == target) {
            result = pg_commit(&t->base.base);
            break;
        }
        snprintf(insert, sizeof(insert), "INSERT INTO schema_version VALUES (%d)", version + 1);
        if ((result = control(t, rl_schema_step(RL_SCHEMA_POSTGRES, version), NULL)) != 0 ||
            (result = control(t, insert, NULL)) != 0 || (result = pg_commit(&t->base.base)) != 0)
            break;
        rl_log_info("store (%s) migrated to PostgreSQL schema version %d", t->where, version + 1);
    }
    if (t->in_txn)
        pg_rollback(&t->base.base);
    t->base.base.arena = NULL;
    rl_arena_free(&arena);
    return result == 0 ? 0 : -1;
}

int rl_store_postgres_target_version(void)
{
    return rl_schema_target(RL_SCHEMA_POSTGRES);
}

/* The one value of sql on conn (read only), or NULL with the reason in why. The caller clears the result. */
static PGresult *read_value(PGconn *conn, const char *sql, const char *where, char *why, size_t whysz)
{
    PGresult *res = PQexec(conn, sql);

    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 || PQnfields(res) != 1) {
        const char *message = PQresultErrorMessage(res);
        snprintf(why, whysz, "cannot read the schema version of %s: %.*s", where, (int)strcspn(message, "\n"), message);
        PQclear(res);
        return NULL;
    }
    return res;
}

int rl_store_postgres_version(const char *conninfo, int *version, char *where, size_t wheresz, char *why, size_t whysz)
{
    struct pg_txn t = {0};
    PGresult *res = NULL;
    PQconninfoOption *parsed;
    char *error = NULL;
    int result = -1;

    /* libpq's parse errors may quote the URL, password included: say only that it is wrong. */
    parsed = PQconninfoParse(conninfo, &error);
    PQfreemem(error);
    if (parsed == NULL) {
        snprintf(why, whysz,
                 "the store URL is not a valid PostgreSQL connection URI "
                 "(postgres://user:password@host:port/db)");
        return -1;
    }
    PQconninfoFree(parsed);
    describe(conninfo, where, wheresz);
    t.conninfo = (char *)conninfo;
    if (connect_now(&t, why, whysz) != 0)
        return -1;
    /* A session that cannot write, whatever follows: --check changes nothing. */
    PQclear(PQexec(t.conn, "SET default_transaction_read_only = on"));
    if ((res = read_value(t.conn, "SELECT to_regclass('schema_version') IS NOT NULL", where, why, whysz)) == NULL)
        goto out;
    *version = 0;
    if (strcmp(PQgetvalue(res, 0, 0), "t") == 0) {
        PQclear(res);
        if ((res = read_value(t.conn, "SELECT coalesce(max(version), 0) FROM schema_version", where, why, whysz)) ==
            NULL)
            goto out;
        *version = atoi(PQgetvalue(res, 0, 0));
    }
    result = 0;
out:
    PQclear(res);
    PQfinish(t.conn);
    return result;
}

int rl_store__postgres_open(const char *conninfo, rl_store_use_t use, rl_txn_t **out)
{
    struct pg_txn *t = calloc(1, sizeof(*t));
    char *error = NULL, why[256];
    PQconninfoOption *parsed;
    (void)use; /* a server has no file beside it: every use is the same */

    if (t == NULL)
        return -1;
    t->base.driver = &pg_driver;
    t->backoff_ms = BACKOFF_FIRST_MS;
    /* libpq's parse errors may quote the URL, password included: say only that it is wrong. */
    parsed = PQconninfoParse(conninfo, &error);
    PQfreemem(error);
    if (parsed == NULL) {
        rl_log_error("the store URL is not a valid PostgreSQL connection URI (postgres://user:password@host:port/db)");
        free(t);
        return -1;
    }
    PQconninfoFree(parsed);
    describe(conninfo, t->where, sizeof(t->where));
    if ((t->conninfo = strdup(conninfo)) == NULL)
        goto fail;
    if (connect_now(t, why, sizeof(why)) != 0) {
        rl_log_error("cannot connect to the store's PostgreSQL server (%s): %s", t->where, why);
        goto fail;
    }
    if (migrate(t) != 0)
        goto fail;
    *out = &t->base.base;
    return 0;
fail:
    pg_close(&t->base.base);
    return -1;
}

struct pg_conn *rl_store__postgres_conn(rl_txn_t *txn)
{
    return RL_SQL_TXN(txn)->driver == &pg_driver ? TXN(txn)->conn : NULL;
}
