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
 * Nothing here knows a rule of the relay; docs/internals/store.md says what
 * each function must do for any backend.
 */
#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "store/backends.h"

#define STMT_CACHE 128
#define MAX_PARAMS 16
#define STMT_NAME  24 /* "s" and a size_t */

/* Type oids of pg_type, fixed since PostgreSQL's first releases. */
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
    rl_txn_t base;
    PGconn *conn;
    char *conninfo;  /* the URL as given: it may carry a password, so it is never logged */
    char where[256]; /* host and database, for logs */
    /* Statements prepared on this connection, by the address of their static text; named s<index>. */
    const char *prepared[STMT_CACHE];
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

/* ---- migrations ---------------------------------------------------------------------------------- */

/*
 * Each migration moves the schema one version up; they run in order, once,
 * each in a transaction that holds an advisory lock, so that nodes starting
 * together migrate once. Version 1 is the whole schema of SQLite version 10,
 * with the same tables and columns (the end-to-end tests read them by name);
 * a later SQLite migration gets its twin here.
 */
static const char *const migrations[] = {
    /* 1: every table of the relay as of SQLite schema 10. */
    "CREATE TABLE users ("
    "  id TEXT PRIMARY KEY,"
    "  created_at BIGINT NOT NULL);"
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
    "  next_update_id BIGINT NOT NULL DEFAULT 1,"
    "  acked_update_id BIGINT NOT NULL DEFAULT 0,"
    "  created_at BIGINT NOT NULL,"
    "  revoked_at BIGINT);"
    "CREATE INDEX installations_user ON installations(user_id);"
    "CREATE TABLE pairings ("
    "  poll_hash TEXT PRIMARY KEY,"
    "  code_hash TEXT NOT NULL,"
    "  installation_id TEXT NOT NULL,"
    "  connector_type TEXT NOT NULL,"
    "  host_label TEXT NOT NULL,"
    "  state TEXT NOT NULL,"
    "  user_id TEXT,"
    "  created_at BIGINT NOT NULL,"
    "  expires_at BIGINT NOT NULL,"
    "  claimed_at BIGINT);"
    "CREATE UNIQUE INDEX pairings_live_code ON pairings(code_hash) WHERE state = 'pending';"
    "CREATE TABLE sessions ("
    "  id TEXT PRIMARY KEY,"
    "  user_id TEXT NOT NULL REFERENCES users(id),"
    "  installation_id TEXT NOT NULL REFERENCES installations(id),"
    "  title TEXT,"
    "  state TEXT NOT NULL DEFAULT 'active',"
    "  created_at BIGINT NOT NULL,"
    "  updated_at BIGINT NOT NULL,"
    "  deleted_at BIGINT);"
    "CREATE INDEX sessions_user ON sessions(user_id);"
    "CREATE INDEX sessions_deleted ON sessions(deleted_at) WHERE deleted_at IS NOT NULL;"
    "CREATE TABLE interactions ("
    "  id TEXT PRIMARY KEY,"
    "  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
    "  created_at BIGINT NOT NULL);"
    /* PostgreSQL does not index the referencing side: without it a purge's cascade reads the whole table. */
    "CREATE INDEX interactions_session ON interactions(session_id);"
    /* seq orders a session's messages by insertion, as SQLite's rowid does. */
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
    "  created_at BIGINT NOT NULL,"
    "  finalized_at BIGINT,"
    "  placeholder INTEGER NOT NULL DEFAULT 0,"
    "  seq BIGSERIAL NOT NULL);"
    "CREATE INDEX messages_session ON messages(session_id, seq);"
    "CREATE INDEX messages_streaming ON messages(created_at) WHERE state = 'streaming';"
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
    "  created_at BIGINT NOT NULL,"
    "  expires_at BIGINT NOT NULL,"
    "  resolved_at BIGINT,"
    "  user_id TEXT);"
    "CREATE INDEX approvals_pending ON approvals(expires_at) WHERE state = 'pending';"
    "CREATE TABLE grants ("
    "  installation_id TEXT NOT NULL,"
    "  action TEXT NOT NULL,"
    "  scope TEXT NOT NULL,"
    "  scope_value TEXT NOT NULL,"
    "  created_at BIGINT NOT NULL,"
    "  PRIMARY KEY (installation_id, action, scope, scope_value));"
    "CREATE TABLE idempotency ("
    "  owner TEXT NOT NULL,"
    "  scope TEXT NOT NULL,"
    "  key TEXT NOT NULL,"
    "  body_hash TEXT NOT NULL,"
    "  response TEXT NOT NULL,"
    "  created_at BIGINT NOT NULL,"
    "  PRIMARY KEY (owner, scope, key));"
    "CREATE INDEX idempotency_created ON idempotency(created_at);"
    "CREATE TABLE updates ("
    "  installation_id TEXT NOT NULL,"
    "  update_id BIGINT NOT NULL,"
    "  type TEXT NOT NULL,"
    "  session_id TEXT,"
    "  interaction_id TEXT,"
    "  payload TEXT NOT NULL,"
    "  created_at BIGINT NOT NULL,"
    "  PRIMARY KEY (installation_id, update_id));"
    "CREATE INDEX updates_created ON updates(created_at);"
    "CREATE TABLE attachments ("
    "  key TEXT PRIMARY KEY,"
    "  user_id TEXT NOT NULL,"
    "  mime TEXT NOT NULL,"
    "  size BIGINT NOT NULL,"
    "  name TEXT,"
    "  created_at BIGINT NOT NULL);"
    /*
     * A run's text is bytes with a length (the contract): BYTEA holds any
     * byte, where TEXT refuses NUL. SQLite's key and body_hash columns of
     * schema 5 are gone: schema 7 moved every key into keys.
     */
    "CREATE TABLE message_deltas ("
    "  message_id TEXT NOT NULL,"
    "  seq BIGINT NOT NULL,"
    "  seq_last BIGINT NOT NULL,"
    "  delta BYTEA NOT NULL,"
    "  keys TEXT NOT NULL,"
    "  PRIMARY KEY (message_id, seq));"
    "CREATE TABLE delta_keys ("
    "  message_id TEXT PRIMARY KEY,"
    "  keys TEXT NOT NULL,"
    "  created_at BIGINT NOT NULL);"
    "CREATE INDEX delta_keys_created ON delta_keys(created_at);"
    "CREATE TABLE tasks ("
    "  installation_id TEXT NOT NULL,"
    "  task_id TEXT NOT NULL,"
    "  session_id TEXT NOT NULL,"
    "  interaction_id TEXT NOT NULL,"
    "  kind TEXT,"
    "  name TEXT,"
    "  status TEXT NOT NULL,"
    "  status_label TEXT,"
    "  created_at BIGINT NOT NULL,"
    "  updated_at BIGINT NOT NULL,"
    "  PRIMARY KEY (installation_id, task_id));"
    /* The secrets every node of a relay shares: the token-signing and URL-signing keys. */
    "CREATE TABLE secrets ("
    "  name TEXT PRIMARY KEY,"
    "  value TEXT NOT NULL,"
    "  created_at BIGINT NOT NULL);"
    /* The web client's sign-in codes (their SHA-256) and Web Push subscriptions. */
    "CREATE TABLE login_codes ("
    "  code_hash TEXT PRIMARY KEY,"
    "  user_id TEXT NOT NULL,"
    "  created_at BIGINT NOT NULL,"
    "  expires_at BIGINT NOT NULL);"
    "CREATE INDEX login_codes_expires ON login_codes(expires_at);"
    "CREATE TABLE push_subscriptions ("
    "  endpoint TEXT PRIMARY KEY,"
    "  user_id TEXT NOT NULL REFERENCES users(id),"
    "  p256dh TEXT NOT NULL,"
    "  auth TEXT NOT NULL,"
    "  created_at BIGINT NOT NULL);"
    "CREATE INDEX push_subscriptions_user ON push_subscriptions(user_id, created_at);",
    /* 2 (SQLite 11): an approval id is unique per installation; a user's decision finds it by (user_id, id). */
    "ALTER TABLE approvals DROP CONSTRAINT approvals_pkey;"
    "ALTER TABLE approvals ADD PRIMARY KEY (installation_id, id);"
    "CREATE INDEX approvals_of_user ON approvals(user_id, id);",
    /*
     * 3 (SQLite 12): which sessions use each attachment, when it was first
     * used and when it was marked for removal; the uses of messages stored
     * before are filled in from their attachments.
     */
    "ALTER TABLE attachments ADD COLUMN used_at BIGINT;"
    "ALTER TABLE attachments ADD COLUMN doomed_at BIGINT;"
    "CREATE TABLE attachment_uses ("
    "  key TEXT NOT NULL,"
    "  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
    "  PRIMARY KEY (key, session_id));"
    "CREATE INDEX attachment_uses_session ON attachment_uses(session_id);"
    "INSERT INTO attachment_uses(key, session_id)"
    "  SELECT DISTINCT j->>'key', m.session_id FROM messages m, jsonb_array_elements(m.attachments::jsonb) j"
    "  WHERE m.attachments LIKE '[%' AND j->>'key' IN (SELECT key FROM attachments);"
    "UPDATE attachments SET used_at = created_at WHERE key IN (SELECT key FROM attachment_uses);"
    "CREATE INDEX attachments_of_user ON attachments(user_id);"
    "CREATE INDEX attachments_unused ON attachments(created_at) WHERE used_at IS NULL AND doomed_at IS NULL;"
    "CREATE INDEX attachments_used ON attachments(used_at) WHERE used_at IS NOT NULL AND doomed_at IS NULL;"
    "CREATE INDEX attachments_doomed ON attachments(doomed_at) WHERE doomed_at IS NOT NULL;",
    /*
     * 4 (SQLite 13): a session's timeline: tasks keep their arguments and
     * results for as long as their session and go with it, as approvals do;
     * the three kinds are read by session in time order.
     */
    "ALTER TABLE tasks ADD COLUMN args TEXT;"
    "ALTER TABLE tasks ADD COLUMN partial_result TEXT;"
    "ALTER TABLE tasks ADD COLUMN result TEXT;"
    "ALTER TABLE tasks ADD COLUMN error TEXT;"
    "DELETE FROM tasks WHERE session_id NOT IN (SELECT id FROM sessions);"
    "DELETE FROM approvals WHERE session_id NOT IN (SELECT id FROM sessions);"
    "CREATE INDEX tasks_session ON tasks(session_id, created_at, task_id COLLATE \"C\");"
    "CREATE INDEX approvals_session ON approvals(session_id, created_at, id COLLATE \"C\");"
    "CREATE INDEX messages_session_time ON messages(session_id, created_at, seq);",
    /* 5 (SQLite 14): device capability requests (issue 28), kept like approvals. */
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
    "  created_at BIGINT NOT NULL,"
    "  expires_at BIGINT NOT NULL,"
    "  answered_at BIGINT);"
    "CREATE INDEX capability_requests_pending ON capability_requests(expires_at) WHERE state = 'pending';"
    "CREATE INDEX capability_requests_of_user ON capability_requests(user_id, created_at);"
    "CREATE INDEX capability_requests_session ON capability_requests(session_id);",
    /* 6 (SQLite 15): end-to-end encryption (issue 26). */
    "ALTER TABLE sessions ADD COLUMN encrypted BOOLEAN NOT NULL DEFAULT FALSE;"
    "ALTER TABLE sessions ADD COLUMN model TEXT;"
    "ALTER TABLE installations ADD COLUMN bridge_version TEXT;"
    "CREATE TABLE devices ("
    "  id TEXT PRIMARY KEY,"
    "  user_id TEXT NOT NULL,"
    "  installation_id TEXT,"
    "  platform TEXT NOT NULL,"
    "  label TEXT,"
    "  pubkey TEXT NOT NULL,"
    "  created_at BIGINT NOT NULL,"
    "  revoked_at BIGINT);"
    "CREATE INDEX devices_of_user ON devices(user_id, created_at) WHERE revoked_at IS NULL;"
    "CREATE TABLE device_confirmations ("
    "  device_id TEXT NOT NULL,"
    "  bridge_device_id TEXT NOT NULL,"
    "  at BIGINT NOT NULL,"
    "  PRIMARY KEY (device_id, bridge_device_id));"
    "CREATE INDEX device_confirmations_bridge ON device_confirmations(bridge_device_id);"
    "CREATE TABLE session_recipients ("
    "  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
    "  device_id TEXT NOT NULL,"
    "  wrapped_session_key TEXT NOT NULL,"
    "  wrapped_by_device_id TEXT,"
    "  created_at BIGINT NOT NULL,"
    "  PRIMARY KEY (session_id, device_id));"
    "CREATE INDEX session_recipients_device ON session_recipients(device_id, created_at);"
    "CREATE TABLE session_agent_files ("
    "  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
    "  path_blind_idx TEXT NOT NULL,"
    "  tool TEXT NOT NULL,"
    "  size_bytes BIGINT,"
    "  mime TEXT,"
    "  path_ct TEXT NOT NULL,"
    "  display_name_ct TEXT NOT NULL,"
    "  updated_at BIGINT NOT NULL,"
    "  PRIMARY KEY (session_id, path_blind_idx));",
};

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

/* ---- statements --------------------------------------------------------------------------------- */

struct params {
    int n;
    Oid types[MAX_PARAMS];
    const char *values[MAX_PARAMS];
    int lengths[MAX_PARAMS], formats[MAX_PARAMS];
    unsigned char ints[MAX_PARAMS][8];
};

static void put_be(unsigned char *out, uint64_t v, int bytes)
{
    int i;

    for (i = bytes - 1; i >= 0; --i, v >>= 8)
        out[i] = (unsigned char)(v & 0xff);
}

/*
 * Binds the varargs as types says, like the SQLite backend: 's' a string or
 * NULL, 'I' an int64_t, 'T' an int64_t timestamp where RL_NO_TIME is NULL,
 * 'i' an int, 'b' a (const char *, size_t) pair of bytes (BYTEA). Numbers
 * and bytes travel in binary, strings as text; the types are given to the
 * server when the statement is prepared.
 */
static void bind_va(struct params *p, const char *types, va_list ap)
{
    int i;

    for (i = 0; types[i] != '\0'; ++i) {
        p->values[i] = NULL;
        p->lengths[i] = 0;
        p->formats[i] = 1;
        switch (types[i]) {
        case 's':
            p->types[i] = OID_TEXT;
            p->formats[i] = 0;
            p->values[i] = va_arg(ap, const char *);
            break;
        case 'b':
            p->types[i] = OID_BYTEA;
            p->values[i] = va_arg(ap, const char *);
            p->lengths[i] = (int)va_arg(ap, size_t);
            break;
        case 'I':
        case 'T': {
            int64_t v = va_arg(ap, int64_t);
            p->types[i] = OID_INT8;
            if (types[i] == 'T' && v == RL_NO_TIME)
                break;
            put_be(p->ints[i], (uint64_t)v, 8);
            p->values[i] = (const char *)p->ints[i];
            p->lengths[i] = 8;
            break;
        }
        default:
            p->types[i] = OID_INT4;
            put_be(p->ints[i], (uint64_t)(uint32_t)va_arg(ap, int), 4);
            p->values[i] = (const char *)p->ints[i];
            p->lengths[i] = 4;
            break;
        }
    }
    p->n = i;
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

/* The name of sql's prepared statement on this connection, preparing it on first use; "" when the cache is full. */
static int statement(struct pg_txn *t, const char *sql, const struct params *p, char name[STMT_NAME])
{
    PGresult *res;
    size_t i;
    int result = 0;

    for (i = 0; i < t->nprepared; ++i) {
        if (t->prepared[i] == sql) {
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
    if (!PQsendPrepare(t->conn, name, sql, p->n, p->types))
        return lose(t, PQerrorMessage(t->conn));
    res = await(t, &result);
    if (res == NULL)
        return result;
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        result = failure(t, res, sql);
        PQclear(res);
        return result;
    }
    PQclear(res);
    t->prepared[t->nprepared++] = sql;
    return 0;
}

/* Runs sql, a static text, with its parameters: 0 with *out (to PQclear), or an RL_E_* error. */
static int run_va(struct pg_txn *t, PGresult **out, const char *sql, const char *types, va_list ap)
{
    struct params p;
    PGresult *res;
    char name[STMT_NAME];
    int result = 0, sent;

    *out = NULL;
    if (t->failed != 0)
        return t->failed;
    if (t->conn == NULL)
        return RL_E_UNAVAILABLE;
    bind_va(&p, types, ap);
    if ((result = statement(t, sql, &p, name)) != 0)
        return result;
    if (name[0] != '\0')
        sent = PQsendQueryPrepared(t->conn, name, p.n, p.values, p.lengths, p.formats, 1);
    else
        sent = PQsendQueryParams(t->conn, sql, p.n, p.types, p.values, p.lengths, p.formats, 1);
    if (!sent)
        return lose(t, PQerrorMessage(t->conn));
    res = await(t, &result);
    if (res == NULL)
        return result;
    if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK) {
        result = failure(t, res, sql);
        PQclear(res);
        return result;
    }
    *out = res;
    return 0;
}

static int64_t changed(PGresult *res)
{
    return strtoll(PQcmdTuples(res), NULL, 10);
}

/* A write: 0 or an error; *changes (when asked) the rows it changed. */
static int write_rows(struct pg_txn *t, int64_t *changes, const char *sql, const char *types, ...)
{
    PGresult *res;
    va_list ap;
    int result;

    va_start(ap, types);
    result = run_va(t, &res, sql, types, ap);
    va_end(ap);
    if (result == 0 && changes != NULL)
        *changes = changed(res);
    PQclear(res);
    return result;
}

/* A write by key: RL_E_NOT_FOUND when it changed no row. */
static int write_one(struct pg_txn *t, const char *sql, const char *types, ...)
{
    PGresult *res;
    va_list ap;
    int result;

    va_start(ap, types);
    result = run_va(t, &res, sql, types, ap);
    va_end(ap);
    if (result == 0 && changed(res) == 0)
        result = RL_E_NOT_FOUND;
    PQclear(res);
    return result;
}

/* An INSERT ... ON CONFLICT DO NOTHING: RL_E_CONFLICT when the key was there (no error, no abort). */
static int insert_row(struct pg_txn *t, const char *sql, const char *types, ...)
{
    PGresult *res;
    va_list ap;
    int result;

    va_start(ap, types);
    result = run_va(t, &res, sql, types, ap);
    va_end(ap);
    if (result == 0 && changed(res) == 0)
        result = RL_E_CONFLICT;
    PQclear(res);
    return result;
}

/* ---- reading rows ------------------------------------------------------------------------------- */

static const char *col_text(struct pg_txn *t, PGresult *res, int row, int col)
{
    if (PQgetisnull(res, row, col))
        return NULL;
    return rl_arena_strndup(t->base.arena, PQgetvalue(res, row, col), (size_t)PQgetlength(res, row, col));
}

/* A binary integer column of any width; NULL is `null`. */
static int64_t col_int(PGresult *res, int row, int col, int64_t null)
{
    const unsigned char *bytes = (const unsigned char *)PQgetvalue(res, row, col);
    int len = PQgetlength(res, row, col), i;
    uint64_t v;

    if (PQgetisnull(res, row, col) || len == 0)
        return null;
    /* Sign-extended from the first byte: the columns are signed. */
    v = (bytes[0] & 0x80) ? UINT64_MAX : 0;
    for (i = 0; i < len; ++i)
        v = (v << 8) | bytes[i];
    return (int64_t)v;
}

static int64_t col_int64(PGresult *res, int row, int col)
{
    return col_int(res, row, col, 0);
}

static int64_t col_time(PGresult *res, int row, int col)
{
    return col_int(res, row, col, RL_NO_TIME);
}

typedef void (*read_row_fn)(struct pg_txn *t, PGresult *res, int row, void *out);

/* One row by key: 0 with *out filled, RL_E_NOT_FOUND, or an error. */
static int get_one(struct pg_txn *t, read_row_fn read, void *out, const char *sql, const char *types, ...)
{
    PGresult *res;
    va_list ap;
    int result;

    va_start(ap, types);
    result = run_va(t, &res, sql, types, ap);
    va_end(ap);
    if (result == 0) {
        if (PQntuples(res) > 0)
            read(t, res, 0, out);
        else
            result = RL_E_NOT_FOUND;
    }
    PQclear(res);
    return result;
}

/* Every row into an array of elem-sized rows in the arena. */
static int get_all(struct pg_txn *t, read_row_fn read, size_t elem, void **rows, size_t *count, const char *sql,
                   const char *types, ...)
{
    PGresult *res;
    va_list ap;
    char *items = NULL;
    int result, n, i;

    *rows = NULL;
    *count = 0;
    va_start(ap, types);
    result = run_va(t, &res, sql, types, ap);
    va_end(ap);
    if (result != 0)
        return result;
    n = PQntuples(res);
    if (n > 0) {
        items = rl_arena_alloc(t->base.arena, (size_t)n * elem);
        memset(items, 0, (size_t)n * elem);
        for (i = 0; i < n; ++i)
            read(t, res, i, items + (size_t)i * elem);
    }
    PQclear(res);
    *rows = items;
    *count = (size_t)n;
    return 0;
}

/*
 * A read by key inside a writing operation locks its row until the commit:
 * another node's operation on the same row waits, so a rule checked on the
 * row still holds when this one writes. Each pair is {plain, locking}.
 */
#define BY_KEY(select)                                                                                                 \
    {                                                                                                                  \
        select, select " FOR UPDATE"                                                                                   \
    }
#define LOCKING(t, pair) ((pair)[(t)->base.writing != 0])

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

/* ---- users ------------------------------------------------------------------------------------- */

static int pg_user_insert_ignore(rl_txn_t *txn, const rl_user_row_t *row)
{
    static const char sql[] = "INSERT INTO users(id, created_at) VALUES ($1, $2) ON CONFLICT DO NOTHING";

    return write_rows(TXN(txn), NULL, sql, "sI", row->id, row->created_at);
}

static void read_user(struct pg_txn *t, PGresult *res, int r, void *out)
{
    rl_user_row_t *row = out;

    row->id = col_text(t, res, r, 0);
    row->created_at = col_int64(res, r, 1);
}

static int pg_user_get(rl_txn_t *txn, const char *id, rl_user_row_t *out)
{
    static const char *const sql[2] = BY_KEY("SELECT id, created_at FROM users WHERE id = $1");

    return get_one(TXN(txn), read_user, out, LOCKING(TXN(txn), sql), "s", id);
}

/* ---- pairings ---------------------------------------------------------------------------------- */

#define PAIRING_COLUMNS                                                                                                \
    "poll_hash, code_hash, installation_id, connector_type, host_label, state, user_id, created_at, expires_at,"       \
    " claimed_at"

static void read_pairing(struct pg_txn *t, PGresult *res, int r, void *out)
{
    rl_pairing_row_t *row = out;

    row->poll_hash = col_text(t, res, r, 0);
    row->code_hash = col_text(t, res, r, 1);
    row->installation_id = col_text(t, res, r, 2);
    row->connector_type = col_text(t, res, r, 3);
    row->host_label = col_text(t, res, r, 4);
    row->state = col_text(t, res, r, 5);
    row->user_id = col_text(t, res, r, 6);
    row->created_at = col_int64(res, r, 7);
    row->expires_at = col_int64(res, r, 8);
    row->claimed_at = col_time(res, r, 9);
}

static int pg_pairing_insert(rl_txn_t *txn, const rl_pairing_row_t *row)
{
    /* No conflict target: a poll hash taken and a code pending already (the partial index) are both conflicts. */
    static const char sql[] = "INSERT INTO pairings(" PAIRING_COLUMNS ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9,"
                              " $10) ON CONFLICT DO NOTHING";

    return insert_row(TXN(txn), sql, "sssssssIIT", row->poll_hash, row->code_hash, row->installation_id,
                      row->connector_type, row->host_label, row->state, row->user_id, row->created_at, row->expires_at,
                      row->claimed_at);
}

static int pg_pairing_by_code(rl_txn_t *txn, const char *code_hash, rl_pairing_row_t *out)
{
    static const char *const sql[2] =
        BY_KEY("SELECT " PAIRING_COLUMNS " FROM pairings WHERE code_hash = $1 AND state = 'pending'");

    return get_one(TXN(txn), read_pairing, out, LOCKING(TXN(txn), sql), "s", code_hash);
}

static int pg_pairing_by_poll(rl_txn_t *txn, const char *poll_hash, rl_pairing_row_t *out)
{
    static const char *const sql[2] = BY_KEY("SELECT " PAIRING_COLUMNS " FROM pairings WHERE poll_hash = $1");

    return get_one(TXN(txn), read_pairing, out, LOCKING(TXN(txn), sql), "s", poll_hash);
}

static int pg_pairing_update(rl_txn_t *txn, const rl_pairing_row_t *row)
{
    static const char sql[] = "UPDATE pairings SET state = $1, user_id = $2, claimed_at = $3 WHERE poll_hash = $4";

    return write_one(TXN(txn), sql, "ssTs", row->state, row->user_id, row->claimed_at, row->poll_hash);
}

static int pg_pairing_delete_lapsed(rl_txn_t *txn, const char *code_hash, int64_t at)
{
    static const char sql[] = "DELETE FROM pairings WHERE code_hash = $1 AND state = 'pending' AND expires_at <= $2";

    return write_rows(TXN(txn), NULL, sql, "sI", code_hash, at);
}

static int pg_pairings_purge(rl_txn_t *txn, int64_t expired_before)
{
    static const char sql[] = "DELETE FROM pairings WHERE expires_at < $1";

    return write_rows(TXN(txn), NULL, sql, "I", expired_before);
}

/* ---- installations ------------------------------------------------------------------------------- */

#define INSTALLATION_COLUMNS                                                                                           \
    "id, user_id, token_hash, token_env, connector_type, host_label, custom_display_name, custom_emoji, state,"        \
    " manifest, created_at, revoked_at, bridge_version"

static void read_installation(struct pg_txn *t, PGresult *res, int r, void *out)
{
    rl_installation_row_t *row = out;

    row->id = col_text(t, res, r, 0);
    row->user_id = col_text(t, res, r, 1);
    row->token_hash = col_text(t, res, r, 2);
    row->token_env = col_text(t, res, r, 3);
    row->connector_type = col_text(t, res, r, 4);
    row->host_label = col_text(t, res, r, 5);
    row->custom_display_name = col_text(t, res, r, 6);
    row->custom_emoji = col_text(t, res, r, 7);
    row->state = col_text(t, res, r, 8);
    row->manifest = col_text(t, res, r, 9);
    row->created_at = col_int64(res, r, 10);
    row->revoked_at = col_time(res, r, 11);
    row->bridge_version = col_text(t, res, r, 12);
}

static int pg_installation_insert(rl_txn_t *txn, const rl_installation_row_t *row)
{
    static const char sql[] = "INSERT INTO installations(" INSTALLATION_COLUMNS ") VALUES ($1, $2, $3, $4, $5, $6, $7,"
                              " $8, $9, $10, $11, $12, $13) ON CONFLICT DO NOTHING";

    return insert_row(TXN(txn), sql, "ssssssssssITs", row->id, row->user_id, row->token_hash,
                      row->token_env != NULL ? row->token_env : "live", row->connector_type, row->host_label,
                      row->custom_display_name, row->custom_emoji, row->state, row->manifest, row->created_at,
                      row->revoked_at, row->bridge_version);
}

static int pg_installation_get(rl_txn_t *txn, const char *id, rl_installation_row_t *out)
{
    static const char *const sql[2] = BY_KEY("SELECT " INSTALLATION_COLUMNS " FROM installations WHERE id = $1");

    return get_one(TXN(txn), read_installation, out, LOCKING(TXN(txn), sql), "s", id);
}

static int pg_installation_update(rl_txn_t *txn, const rl_installation_row_t *row)
{
    static const char sql[] = "UPDATE installations SET token_hash = $1, token_env = $2, custom_display_name = $3,"
                              " custom_emoji = $4, state = $5, manifest = $6, revoked_at = $7, bridge_version = $8"
                              " WHERE id = $9";

    return write_one(TXN(txn), sql, "ssssssTss", row->token_hash, row->token_env != NULL ? row->token_env : "live",
                     row->custom_display_name, row->custom_emoji, row->state, row->manifest, row->revoked_at,
                     row->bridge_version, row->id);
}

static int pg_installations_of_user(rl_txn_t *txn, const char *user_id, rl_installation_row_t **rows, size_t *count)
{
    /* Ids compare byte by byte, as in SQLite, whatever the database's collation. */
    static const char sql[] =
        "SELECT " INSTALLATION_COLUMNS " FROM installations WHERE user_id = $1 ORDER BY created_at, id COLLATE \"C\"";

    return get_all(TXN(txn), read_installation, sizeof(**rows), (void **)rows, count, sql, "s", user_id);
}

/* ---- sessions ---------------------------------------------------------------------------------- */

#define SESSION_COLUMNS                                                                                                \
    "id, user_id, installation_id, title, state, created_at, updated_at, deleted_at, encrypted::int, model"
#define SESSION_INSERT_COLUMNS                                                                                         \
    "id, user_id, installation_id, title, state, created_at, updated_at, deleted_at, encrypted, model"

static void read_session(struct pg_txn *t, PGresult *res, int r, void *out)
{
    rl_session_row_t *row = out;

    row->id = col_text(t, res, r, 0);
    row->user_id = col_text(t, res, r, 1);
    row->installation_id = col_text(t, res, r, 2);
    row->title = col_text(t, res, r, 3);
    row->state = col_text(t, res, r, 4);
    row->created_at = col_int64(res, r, 5);
    row->updated_at = col_int64(res, r, 6);
    row->deleted_at = col_time(res, r, 7);
    row->encrypted = col_int64(res, r, 8) != 0;
    row->model = col_text(t, res, r, 9);
}

static int pg_session_insert(rl_txn_t *txn, const rl_session_row_t *row)
{
    static const char sql[] = "INSERT INTO sessions(" SESSION_INSERT_COLUMNS
                              ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::int::boolean, $10) ON CONFLICT DO NOTHING";

    return insert_row(TXN(txn), sql, "sssssIITIs", row->id, row->user_id, row->installation_id, row->title, row->state,
                      row->created_at, row->updated_at, row->deleted_at, (int64_t)row->encrypted, row->model);
}

static int pg_session_get(rl_txn_t *txn, const char *id, rl_session_row_t *out)
{
    static const char *const sql[2] = BY_KEY("SELECT " SESSION_COLUMNS " FROM sessions WHERE id = $1");

    return get_one(TXN(txn), read_session, out, LOCKING(TXN(txn), sql), "s", id);
}

static int pg_session_update(rl_txn_t *txn, const rl_session_row_t *row)
{
    static const char sql[] =
        "UPDATE sessions SET title = $1, state = $2, updated_at = $3, deleted_at = $4, model = $5 WHERE id = $6";

    return write_one(TXN(txn), sql, "ssITss", row->title, row->state, row->updated_at, row->deleted_at, row->model,
                     row->id);
}

static int pg_sessions_of_user(rl_txn_t *txn, const char *user_id, rl_session_row_t **rows, size_t *count)
{
    static const char sql[] = "SELECT " SESSION_COLUMNS " FROM sessions WHERE user_id = $1 AND deleted_at IS NULL"
                              " ORDER BY updated_at DESC, id COLLATE \"C\"";

    return get_all(TXN(txn), read_session, sizeof(**rows), (void **)rows, count, sql, "s", user_id);
}

static int pg_sessions_deleted_of_user(rl_txn_t *txn, const char *user_id, int64_t deleted_after,
                                       rl_session_row_t **rows, size_t *count)
{
    static const char sql[] = "SELECT " SESSION_COLUMNS " FROM sessions WHERE user_id = $1 AND deleted_at > $2"
                              " ORDER BY deleted_at DESC, id COLLATE \"C\"";

    return get_all(TXN(txn), read_session, sizeof(**rows), (void **)rows, count, sql, "sI", user_id, deleted_after);
}

static int pg_sessions_purge(rl_txn_t *txn, int64_t deleted_before, int64_t *purged)
{
    /* Interactions and messages go with their session (ON DELETE CASCADE); tasks and approvals have no such key. */
    static const char tasks_sql[] = "DELETE FROM tasks WHERE session_id IN"
                                    " (SELECT id FROM sessions WHERE deleted_at IS NOT NULL AND deleted_at <= $1)";
    static const char approvals_sql[] = "DELETE FROM approvals WHERE session_id IN"
                                        " (SELECT id FROM sessions WHERE deleted_at IS NOT NULL AND deleted_at <= $1)";
    static const char sql[] = "DELETE FROM sessions WHERE deleted_at IS NOT NULL AND deleted_at <= $1";
    int result;

    static const char capabilities_sql[] =
        "DELETE FROM capability_requests WHERE session_id IN"
        " (SELECT id FROM sessions WHERE deleted_at IS NOT NULL AND deleted_at <= $1)";
    if ((result = write_rows(TXN(txn), NULL, tasks_sql, "I", deleted_before)) != 0 ||
        (result = write_rows(TXN(txn), NULL, approvals_sql, "I", deleted_before)) != 0 ||
        (result = write_rows(TXN(txn), NULL, capabilities_sql, "I", deleted_before)) != 0)
        return result;
    return write_rows(TXN(txn), purged, sql, "I", deleted_before);
}

/* ---- interactions ------------------------------------------------------------------------------- */

static void read_interaction(struct pg_txn *t, PGresult *res, int r, void *out)
{
    rl_interaction_row_t *row = out;

    row->id = col_text(t, res, r, 0);
    row->session_id = col_text(t, res, r, 1);
    row->created_at = col_int64(res, r, 2);
}

static int pg_interaction_insert(rl_txn_t *txn, const rl_interaction_row_t *row)
{
    static const char sql[] =
        "INSERT INTO interactions(id, session_id, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING";

    return insert_row(TXN(txn), sql, "ssI", row->id, row->session_id, row->created_at);
}

static int pg_interaction_get(rl_txn_t *txn, const char *id, rl_interaction_row_t *out)
{
    static const char *const sql[2] = BY_KEY("SELECT id, session_id, created_at FROM interactions WHERE id = $1");

    return get_one(TXN(txn), read_interaction, out, LOCKING(TXN(txn), sql), "s", id);
}

/* ---- messages ---------------------------------------------------------------------------------- */

#define MESSAGE_COLUMNS                                                                                                \
    "id, session_id, interaction_id, role, text, attachments, reply_to, usage, finish_reason, state, created_at,"      \
    " finalized_at, placeholder"

static void read_message(struct pg_txn *t, PGresult *res, int r, void *out)
{
    rl_message_row_t *row = out;

    row->id = col_text(t, res, r, 0);
    row->session_id = col_text(t, res, r, 1);
    row->interaction_id = col_text(t, res, r, 2);
    row->role = col_text(t, res, r, 3);
    row->text = col_text(t, res, r, 4);
    row->attachments = col_text(t, res, r, 5);
    row->reply_to = col_text(t, res, r, 6);
    row->usage = col_text(t, res, r, 7);
    row->finish_reason = col_text(t, res, r, 8);
    row->state = col_text(t, res, r, 9);
    row->created_at = col_int64(res, r, 10);
    row->finalized_at = col_time(res, r, 11);
    row->placeholder = (int)col_int64(res, r, 12);
}

static int pg_message_insert(rl_txn_t *txn, const rl_message_row_t *row)
{
    static const char sql[] = "INSERT INTO messages(" MESSAGE_COLUMNS ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9,"
                              " $10, $11, $12, $13) ON CONFLICT DO NOTHING";

    return insert_row(TXN(txn), sql, "ssssssssssITi", row->id, row->session_id, row->interaction_id, row->role,
                      row->text, row->attachments, row->reply_to, row->usage, row->finish_reason, row->state,
                      row->created_at, row->finalized_at, row->placeholder);
}

static int pg_message_get(rl_txn_t *txn, const char *id, rl_message_row_t *out)
{
    static const char *const sql[2] = BY_KEY("SELECT " MESSAGE_COLUMNS " FROM messages WHERE id = $1");

    return get_one(TXN(txn), read_message, out, LOCKING(TXN(txn), sql), "s", id);
}

static int pg_message_update(rl_txn_t *txn, const rl_message_row_t *row)
{
    static const char sql[] = "UPDATE messages SET text = $1, usage = $2, finish_reason = $3, state = $4,"
                              " finalized_at = $5, placeholder = $6 WHERE id = $7";

    return write_one(TXN(txn), sql, "ssssTis", row->text, row->usage, row->finish_reason, row->state, row->finalized_at,
                     row->placeholder, row->id);
}

static void read_int(struct pg_txn *t, PGresult *res, int r, void *out)
{
    *(int64_t *)out = col_int64(res, r, 0);
}

static int pg_messages_page(rl_txn_t *txn, const char *session_id, const char *before, int limit,
                            rl_message_row_t **rows, size_t *count)
{
    static const char cursor_sql[] = "SELECT seq FROM messages WHERE id = $1 AND session_id = $2";
    static const char page_sql[] = "SELECT " MESSAGE_COLUMNS " FROM messages WHERE session_id = $1 AND seq < $2"
                                   " ORDER BY seq DESC LIMIT $3";
    struct pg_txn *t = TXN(txn);
    int64_t cursor = INT64_MAX;
    int result;

    /* Insertion order is seq's: the page ends where the cursor message sits. */
    if (before != NULL && (result = get_one(t, read_int, &cursor, cursor_sql, "ss", before, session_id)) != 0) {
        *rows = NULL;
        *count = 0;
        return result;
    }
    return get_all(t, read_message, sizeof(**rows), (void **)rows, count, page_sql, "sIi", session_id, cursor, limit);
}

static int pg_messages_by_time(rl_txn_t *txn, const char *session_id, int64_t before_at, const char *before_id,
                               int limit, rl_message_row_t **rows, size_t *count)
{
    /* Insertion order is seq's; a missing before_id gives 0, below every seq. */
    static const char sql[] =
        "SELECT " MESSAGE_COLUMNS " FROM messages WHERE session_id = $1 AND (created_at < $2 OR (created_at = $2"
        " AND seq < coalesce((SELECT seq FROM messages WHERE id = $3), 0)))"
        " ORDER BY created_at DESC, seq DESC LIMIT $4";

    return get_all(TXN(txn), read_message, sizeof(**rows), (void **)rows, count, sql, "sIsi", session_id, before_at,
                   before_id, limit);
}

static int pg_messages_open_before(rl_txn_t *txn, int64_t at, int limit, rl_message_row_t **rows, size_t *count)
{
    /*
     * The sweep that ends these messages writes them back: in a writing
     * operation it takes the rows another node is not already ending.
     */
#define OPEN_BEFORE                                                                                                    \
    "SELECT m.id, m.session_id, m.interaction_id, m.role, m.text, m.attachments, m.reply_to, m.usage,"                 \
    " m.finish_reason, m.state, m.created_at, m.finalized_at, m.placeholder"                                           \
    " FROM messages m LEFT JOIN interactions i ON i.id = m.interaction_id"                                             \
    " WHERE m.state = 'streaming' AND coalesce(i.created_at, m.created_at) <= $1 ORDER BY m.created_at, m.seq"         \
    " LIMIT $2"
    static const char *const sql[2] = {OPEN_BEFORE, OPEN_BEFORE " FOR UPDATE OF m SKIP LOCKED"};
#undef OPEN_BEFORE

    return get_all(TXN(txn), read_message, sizeof(**rows), (void **)rows, count, LOCKING(TXN(txn), sql), "Ii", at,
                   limit);
}

/* ---- streamed deltas ---------------------------------------------------------------------------- */

static void read_delta_run(struct pg_txn *t, PGresult *res, int r, void *out)
{
    rl_delta_run_row_t *row = out;

    row->message_id = col_text(t, res, r, 0);
    row->seq = col_int64(res, r, 1);
    row->seq_last = col_int64(res, r, 2);
    row->text_len = (size_t)PQgetlength(res, r, 3);
    row->text = col_text(t, res, r, 3);
    row->keys = col_text(t, res, r, 4);
}

static int pg_delta_run_insert(rl_txn_t *txn, const rl_delta_run_row_t *row)
{
    static const char sql[] = "INSERT INTO message_deltas(message_id, seq, seq_last, delta, keys)"
                              " VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING";

    return write_rows(TXN(txn), NULL, sql, "sIIbs", row->message_id, row->seq, row->seq_last, row->text, row->text_len,
                      row->keys);
}

static int pg_delta_runs_of(rl_txn_t *txn, const char *message_id, rl_delta_run_row_t **rows, size_t *count)
{
    static const char sql[] =
        "SELECT message_id, seq, seq_last, delta, keys FROM message_deltas WHERE message_id = $1 ORDER BY seq";

    return get_all(TXN(txn), read_delta_run, sizeof(**rows), (void **)rows, count, sql, "s", message_id);
}

static int pg_delta_next_seq(rl_txn_t *txn, const char *message_id, int64_t *next)
{
    static const char *const sql[2] =
        BY_KEY("SELECT seq_last FROM message_deltas WHERE message_id = $1 ORDER BY seq DESC LIMIT 1");
    int64_t last = 0;
    int result = get_one(TXN(txn), read_int, &last, LOCKING(TXN(txn), sql), "s", message_id);

    if (result != 0 && result != RL_E_NOT_FOUND)
        return result;
    *next = last + 1;
    return 0;
}

static int pg_delta_runs_delete(rl_txn_t *txn, const char *message_id)
{
    static const char sql[] = "DELETE FROM message_deltas WHERE message_id = $1";

    return write_rows(TXN(txn), NULL, sql, "s", message_id);
}

static int pg_delta_keys_put(rl_txn_t *txn, const char *message_id, const char *keys, int64_t created_at)
{
    static const char sql[] = "INSERT INTO delta_keys(message_id, keys, created_at) VALUES ($1, $2, $3)"
                              " ON CONFLICT (message_id) DO UPDATE SET keys = EXCLUDED.keys,"
                              " created_at = EXCLUDED.created_at";

    return write_rows(TXN(txn), NULL, sql, "ssI", message_id, keys, created_at);
}

static void read_text(struct pg_txn *t, PGresult *res, int r, void *out)
{
    *(const char **)out = col_text(t, res, r, 0);
}

struct delta_keys_out {
    const char **keys;
    int64_t *created_at;
};

static void read_delta_keys(struct pg_txn *t, PGresult *res, int r, void *out)
{
    struct delta_keys_out *row = out;

    *row->keys = col_text(t, res, r, 0);
    *row->created_at = col_int64(res, r, 1);
}

static int pg_delta_keys_get(rl_txn_t *txn, const char *message_id, const char **keys, int64_t *created_at)
{
    static const char *const sql[2] = BY_KEY("SELECT keys, created_at FROM delta_keys WHERE message_id = $1");
    struct delta_keys_out out = {keys, created_at};

    return get_one(TXN(txn), read_delta_keys, &out, LOCKING(TXN(txn), sql), "s", message_id);
}

static int pg_delta_keys_purge(rl_txn_t *txn, int64_t created_before)
{
    static const char sql[] = "DELETE FROM delta_keys WHERE created_at < $1";

    return write_rows(TXN(txn), NULL, sql, "I", created_before);
}

/* ---- idempotency --------------------------------------------------------------------------------- */

#define IDEMPOTENCY_COLUMNS "owner, scope, key, body_hash, response, created_at"

static void read_idempotency(struct pg_txn *t, PGresult *res, int r, void *out)
{
    rl_idempotency_row_t *row = out;

    row->owner = col_text(t, res, r, 0);
    row->scope = col_text(t, res, r, 1);
    row->key = col_text(t, res, r, 2);
    row->body_hash = col_text(t, res, r, 3);
    row->response = col_text(t, res, r, 4);
    row->created_at = col_int64(res, r, 5);
}

static int pg_idempotency_get(rl_txn_t *txn, const char *owner, const char *scope, const char *key,
                              rl_idempotency_row_t *out)
{
    /*
     * FOR UPDATE cannot lock a key that is not recorded yet, and a retried
     * request may run on two nodes at once: the key itself is locked first
     * (until the commit), so that the second waits for the first and finds
     * its record (a replay) rather than meeting it at insert (a conflict).
     * A separate statement: the read after it must take its snapshot once
     * the lock is held.
     */
    static const char lock_sql[] = "SELECT pg_advisory_xact_lock(hashtextextended($1 || chr(31) || $2 || chr(31) || $3,"
                                   " 0))";
    static const char *const sql[2] =
        BY_KEY("SELECT " IDEMPOTENCY_COLUMNS " FROM idempotency WHERE owner = $1 AND scope = $2 AND key = $3");
    int result;

    if (TXN(txn)->base.writing && (result = write_rows(TXN(txn), NULL, lock_sql, "sss", owner, scope, key)) != 0)
        return result;
    return get_one(TXN(txn), read_idempotency, out, LOCKING(TXN(txn), sql), "sss", owner, scope, key);
}

static int pg_idempotency_insert(rl_txn_t *txn, const rl_idempotency_row_t *row)
{
    static const char sql[] =
        "INSERT INTO idempotency(" IDEMPOTENCY_COLUMNS ") VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING";

    return insert_row(TXN(txn), sql, "sssssI", row->owner, row->scope, row->key, row->body_hash, row->response,
                      row->created_at);
}

static int pg_idempotency_delete(rl_txn_t *txn, const char *owner, const char *scope, const char *key)
{
    static const char sql[] = "DELETE FROM idempotency WHERE owner = $1 AND scope = $2 AND key = $3";

    return write_one(TXN(txn), sql, "sss", owner, scope, key);
}

static int pg_idempotency_of_scope(rl_txn_t *txn, const char *owner, const char *scope, rl_idempotency_row_t **rows,
                                   size_t *count)
{
    static const char sql[] = "SELECT " IDEMPOTENCY_COLUMNS " FROM idempotency WHERE owner = $1 AND scope = $2";

    return get_all(TXN(txn), read_idempotency, sizeof(**rows), (void **)rows, count, sql, "ss", owner, scope);
}

static int pg_idempotency_purge(rl_txn_t *txn, int64_t created_before)
{
    static const char sql[] = "DELETE FROM idempotency WHERE created_at < $1";

    return write_rows(TXN(txn), NULL, sql, "I", created_before);
}

/* ---- tasks ------------------------------------------------------------------------------------- */

#define TASK_COLUMNS                                                                                                   \
    "installation_id, task_id, session_id, interaction_id, kind, name, status, status_label, created_at, updated_at,"  \
    " args, partial_result, result, error"

static void read_task(struct pg_txn *t, PGresult *res, int r, void *out)
{
    rl_task_row_t *row = out;

    row->installation_id = col_text(t, res, r, 0);
    row->task_id = col_text(t, res, r, 1);
    row->session_id = col_text(t, res, r, 2);
    row->interaction_id = col_text(t, res, r, 3);
    row->kind = col_text(t, res, r, 4);
    row->name = col_text(t, res, r, 5);
    row->status = col_text(t, res, r, 6);
    row->status_label = col_text(t, res, r, 7);
    row->created_at = col_int64(res, r, 8);
    row->updated_at = col_int64(res, r, 9);
    row->args = col_text(t, res, r, 10);
    row->partial_result = col_text(t, res, r, 11);
    row->result = col_text(t, res, r, 12);
    row->error = col_text(t, res, r, 13);
}

static int pg_task_insert(rl_txn_t *txn, const rl_task_row_t *row)
{
    static const char sql[] = "INSERT INTO tasks(" TASK_COLUMNS ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10,"
                              " $11, $12, $13, $14) ON CONFLICT DO NOTHING";

    return insert_row(TXN(txn), sql, "ssssssssIIssss", row->installation_id, row->task_id, row->session_id,
                      row->interaction_id, row->kind, row->name, row->status, row->status_label, row->created_at,
                      row->updated_at, row->args, row->partial_result, row->result, row->error);
}

static int pg_task_get(rl_txn_t *txn, const char *installation_id, const char *task_id, rl_task_row_t *out)
{
    static const char *const sql[2] =
        BY_KEY("SELECT " TASK_COLUMNS " FROM tasks WHERE installation_id = $1 AND task_id = $2");

    return get_one(TXN(txn), read_task, out, LOCKING(TXN(txn), sql), "ss", installation_id, task_id);
}

static int pg_task_update(rl_txn_t *txn, const rl_task_row_t *row)
{
    static const char sql[] =
        "UPDATE tasks SET status = $1, status_label = $2, name = $3, updated_at = $4,"
        " partial_result = $5, result = $6, error = $7 WHERE installation_id = $8 AND task_id = $9";

    return write_one(TXN(txn), sql, "sssIsssss", row->status, row->status_label, row->name, row->updated_at,
                     row->partial_result, row->result, row->error, row->installation_id, row->task_id);
}

static int pg_tasks_by_time(rl_txn_t *txn, const char *session_id, int64_t before_at, const char *before_id, int limit,
                            rl_task_row_t **rows, size_t *count)
{
    /* Bytewise, as SQLite compares: a NULL before_id makes the comparison NULL, so no task at before_at. */
    static const char sql[] = "SELECT " TASK_COLUMNS " FROM tasks WHERE session_id = $1 AND (created_at < $2"
                              " OR (created_at = $2 AND task_id COLLATE \"C\" < $3))"
                              " ORDER BY created_at DESC, task_id COLLATE \"C\" DESC LIMIT $4";

    return get_all(TXN(txn), read_task, sizeof(**rows), (void **)rows, count, sql, "sIsi", session_id, before_at,
                   before_id, limit);
}

/* ---- approvals and grants ------------------------------------------------------------------------ */

#define APPROVAL_COLUMNS                                                                                               \
    "id, installation_id, user_id, session_id, interaction_id, request, state, decision, scope, scope_value,"          \
    " created_at, expires_at, resolved_at"

static void read_approval(struct pg_txn *t, PGresult *res, int r, void *out)
{
    rl_approval_row_t *row = out;

    row->id = col_text(t, res, r, 0);
    row->installation_id = col_text(t, res, r, 1);
    row->user_id = col_text(t, res, r, 2);
    row->session_id = col_text(t, res, r, 3);
    row->interaction_id = col_text(t, res, r, 4);
    row->request = col_text(t, res, r, 5);
    row->state = col_text(t, res, r, 6);
    row->decision = col_text(t, res, r, 7);
    row->scope = col_text(t, res, r, 8);
    row->scope_value = col_text(t, res, r, 9);
    row->created_at = col_int64(res, r, 10);
    row->expires_at = col_int64(res, r, 11);
    row->resolved_at = col_time(res, r, 12);
}

static int pg_approval_insert(rl_txn_t *txn, const rl_approval_row_t *row)
{
    static const char sql[] = "INSERT INTO approvals(" APPROVAL_COLUMNS ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9,"
                              " $10, $11, $12, $13) ON CONFLICT DO NOTHING";

    return insert_row(TXN(txn), sql, "ssssssssssIIT", row->id, row->installation_id, row->user_id, row->session_id,
                      row->interaction_id, row->request, row->state, row->decision, row->scope, row->scope_value,
                      row->created_at, row->expires_at, row->resolved_at);
}

static int pg_approval_get(rl_txn_t *txn, const char *installation_id, const char *id, rl_approval_row_t *out)
{
    static const char *const sql[2] =
        BY_KEY("SELECT " APPROVAL_COLUMNS " FROM approvals WHERE installation_id = $1 AND id = $2");

    return get_one(TXN(txn), read_approval, out, LOCKING(TXN(txn), sql), "ss", installation_id, id);
}

static int pg_approval_update(rl_txn_t *txn, const rl_approval_row_t *row)
{
    static const char sql[] = "UPDATE approvals SET state = $1, decision = $2, scope = $3, scope_value = $4,"
                              " resolved_at = $5 WHERE installation_id = $6 AND id = $7";

    return write_one(TXN(txn), sql, "ssssTss", row->state, row->decision, row->scope, row->scope_value,
                     row->resolved_at, row->installation_id, row->id);
}

static int pg_approvals_of_user_by_id(rl_txn_t *txn, const char *user_id, const char *id, rl_approval_row_t **rows,
                                      size_t *count)
{
    /* A decision writes the row it finds here: in a writing operation the rows are locked. */
    static const char *const sql[2] = BY_KEY("SELECT " APPROVAL_COLUMNS " FROM approvals WHERE user_id = $1 AND id = $2"
                                             " ORDER BY created_at, installation_id COLLATE \"C\"");

    return get_all(TXN(txn), read_approval, sizeof(**rows), (void **)rows, count, LOCKING(TXN(txn), sql), "ss", user_id,
                   id);
}

static int pg_approvals_pending_of_user(rl_txn_t *txn, const char *user_id, int64_t after, rl_approval_row_t **rows,
                                        size_t *count)
{
    static const char sql[] = "SELECT " APPROVAL_COLUMNS " FROM approvals WHERE user_id = $1 AND state = 'pending'"
                              " AND expires_at > $2 ORDER BY created_at, id COLLATE \"C\"";

    return get_all(TXN(txn), read_approval, sizeof(**rows), (void **)rows, count, sql, "sI", user_id, after);
}

static int pg_approvals_by_time(rl_txn_t *txn, const char *session_id, int64_t before_at, const char *before_id,
                                int limit, rl_approval_row_t **rows, size_t *count)
{
    static const char sql[] = "SELECT " APPROVAL_COLUMNS " FROM approvals WHERE session_id = $1 AND (created_at < $2"
                              " OR (created_at = $2 AND id COLLATE \"C\" < $3))"
                              " ORDER BY created_at DESC, id COLLATE \"C\" DESC LIMIT $4";

    return get_all(TXN(txn), read_approval, sizeof(**rows), (void **)rows, count, sql, "sIsi", session_id, before_at,
                   before_id, limit);
}

static int pg_approvals_due(rl_txn_t *txn, int64_t at, int limit, rl_approval_row_t **rows, size_t *count)
{
    /*
     * The expiry sweep writes these back: in a writing operation it takes the
     * rows that no other node is deciding or expiring right now. A row that
     * another transaction resolved meanwhile no longer matches (PostgreSQL
     * checks the condition again on the locked row).
     */
#define DUE                                                                                                            \
    "SELECT " APPROVAL_COLUMNS " FROM approvals WHERE state = 'pending' AND expires_at <= $1"                          \
    " ORDER BY expires_at, id COLLATE \"C\" LIMIT $2"
    static const char *const sql[2] = {DUE, DUE " FOR UPDATE SKIP LOCKED"};
#undef DUE

    return get_all(TXN(txn), read_approval, sizeof(**rows), (void **)rows, count, LOCKING(TXN(txn), sql), "Ii", at,
                   limit);
}

/* ---- device capability requests ------------------------------------------------------------------ */

#define CAPABILITY_COLUMNS                                                                                             \
    "id, installation_id, user_id, session_id, interaction_id, capability, request, state, answer, created_at,"        \
    " expires_at, answered_at"

static void read_capability(struct pg_txn *t, PGresult *res, int r, void *out)
{
    rl_capability_row_t *row = out;

    row->id = col_text(t, res, r, 0);
    row->installation_id = col_text(t, res, r, 1);
    row->user_id = col_text(t, res, r, 2);
    row->session_id = col_text(t, res, r, 3);
    row->interaction_id = col_text(t, res, r, 4);
    row->capability = col_text(t, res, r, 5);
    row->request = col_text(t, res, r, 6);
    row->state = col_text(t, res, r, 7);
    row->answer = col_text(t, res, r, 8);
    row->created_at = col_int64(res, r, 9);
    row->expires_at = col_int64(res, r, 10);
    row->answered_at = col_time(res, r, 11);
}

static int pg_capability_insert(rl_txn_t *txn, const rl_capability_row_t *row)
{
    static const char sql[] = "INSERT INTO capability_requests(" CAPABILITY_COLUMNS ") VALUES ($1, $2, $3, $4, $5, $6,"
                              " $7, $8, $9, $10, $11, $12) ON CONFLICT DO NOTHING";

    return insert_row(TXN(txn), sql, "sssssssssIIT", row->id, row->installation_id, row->user_id, row->session_id,
                      row->interaction_id, row->capability, row->request, row->state, row->answer, row->created_at,
                      row->expires_at, row->answered_at);
}

static int pg_capability_get(rl_txn_t *txn, const char *id, rl_capability_row_t *out)
{
    /* An answer writes the row it reads: in a writing operation it is locked, so the first answer wins. */
    static const char *const sql[2] = BY_KEY("SELECT " CAPABILITY_COLUMNS " FROM capability_requests WHERE id = $1");

    return get_one(TXN(txn), read_capability, out, LOCKING(TXN(txn), sql), "s", id);
}

static int pg_capability_update(rl_txn_t *txn, const rl_capability_row_t *row)
{
    static const char sql[] = "UPDATE capability_requests SET state = $1, answer = $2, answered_at = $3 WHERE id = $4";

    return write_one(TXN(txn), sql, "ssTs", row->state, row->answer, row->answered_at, row->id);
}

static int pg_capabilities_pending_of_user(rl_txn_t *txn, const char *user_id, int64_t after,
                                           rl_capability_row_t **rows, size_t *count)
{
    static const char sql[] = "SELECT " CAPABILITY_COLUMNS " FROM capability_requests WHERE user_id = $1"
                              " AND state = 'pending' AND expires_at > $2 ORDER BY created_at, id COLLATE \"C\"";

    return get_all(TXN(txn), read_capability, sizeof(**rows), (void **)rows, count, sql, "sI", user_id, after);
}

static int pg_capabilities_due(rl_txn_t *txn, int64_t at, int limit, rl_capability_row_t **rows, size_t *count)
{
    /* As approvals_due: the sweep takes the rows no other node is answering or expiring right now. */
#define DUE                                                                                                            \
    "SELECT " CAPABILITY_COLUMNS " FROM capability_requests WHERE state = 'pending' AND expires_at <= $1"              \
    " ORDER BY expires_at, id COLLATE \"C\" LIMIT $2"
    static const char *const sql[2] = {DUE, DUE " FOR UPDATE SKIP LOCKED"};
#undef DUE

    return get_all(TXN(txn), read_capability, sizeof(**rows), (void **)rows, count, LOCKING(TXN(txn), sql), "Ii", at,
                   limit);
}

static void read_grant(struct pg_txn *t, PGresult *res, int r, void *out)
{
    rl_grant_row_t *row = out;

    row->installation_id = col_text(t, res, r, 0);
    row->action = col_text(t, res, r, 1);
    row->scope = col_text(t, res, r, 2);
    row->scope_value = col_text(t, res, r, 3);
    row->created_at = col_int64(res, r, 4);
}

static int pg_grant_insert_ignore(rl_txn_t *txn, const rl_grant_row_t *row)
{
    static const char sql[] = "INSERT INTO grants(installation_id, action, scope, scope_value, created_at)"
                              " VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING";

    return write_rows(TXN(txn), NULL, sql, "ssssI", row->installation_id, row->action, row->scope, row->scope_value,
                      row->created_at);
}

static int pg_grants_of(rl_txn_t *txn, const char *installation_id, const char *action, rl_grant_row_t **rows,
                        size_t *count)
{
    static const char sql[] = "SELECT installation_id, action, scope, scope_value, created_at FROM grants"
                              " WHERE installation_id = $1 AND action = $2 ORDER BY created_at";

    return get_all(TXN(txn), read_grant, sizeof(**rows), (void **)rows, count, sql, "ss", installation_id, action);
}

static int pg_grants_of_installation(rl_txn_t *txn, const char *installation_id, rl_grant_row_t **rows, size_t *count)
{
    static const char sql[] =
        "SELECT installation_id, action, scope, scope_value, created_at FROM grants"
        " WHERE installation_id = $1"
        " ORDER BY created_at, action COLLATE \"C\", scope COLLATE \"C\", scope_value COLLATE \"C\"";

    return get_all(TXN(txn), read_grant, sizeof(**rows), (void **)rows, count, sql, "s", installation_id);
}

static int pg_grant_delete(rl_txn_t *txn, const rl_grant_row_t *row)
{
    static const char sql[] =
        "DELETE FROM grants WHERE installation_id = $1 AND action = $2 AND scope = $3 AND scope_value = $4";

    return write_one(TXN(txn), sql, "ssss", row->installation_id, row->action, row->scope, row->scope_value);
}

/* ---- the update queue ---------------------------------------------------------------------------- */

static void read_update(struct pg_txn *t, PGresult *res, int r, void *out)
{
    rl_update_row_t *row = out;

    row->installation_id = col_text(t, res, r, 0);
    row->update_id = col_int64(res, r, 1);
    row->type = col_text(t, res, r, 2);
    row->session_id = col_text(t, res, r, 3);
    row->interaction_id = col_text(t, res, r, 4);
    row->payload = col_text(t, res, r, 5);
    row->created_at = col_int64(res, r, 6);
}

static int pg_update_append(rl_txn_t *txn, rl_update_row_t *row)
{
    /* The counter's row stays locked until the commit: two nodes never issue the same id. */
    static const char counter_sql[] =
        "UPDATE installations SET next_update_id = next_update_id + 1 WHERE id = $1 RETURNING next_update_id - 1";
    static const char insert_sql[] = "INSERT INTO updates(installation_id, update_id, type, session_id,"
                                     " interaction_id, payload, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)";
    struct pg_txn *t = TXN(txn);
    int result = get_one(t, read_int, &row->update_id, counter_sql, "s", row->installation_id);

    if (result != 0)
        return result;
    return write_rows(t, NULL, insert_sql, "sIssssI", row->installation_id, row->update_id, row->type, row->session_id,
                      row->interaction_id, row->payload, row->created_at);
}

static int pg_updates_after(rl_txn_t *txn, const char *installation_id, int64_t after_id, int64_t since, int limit,
                            rl_update_row_t **rows, size_t *count)
{
    static const char sql[] =
        "SELECT installation_id, update_id, type, session_id, interaction_id, payload, created_at FROM updates"
        " WHERE installation_id = $1 AND update_id > $2 AND created_at >= $3 ORDER BY update_id LIMIT $4";

    return get_all(TXN(txn), read_update, sizeof(**rows), (void **)rows, count, sql, "sIIi", installation_id, after_id,
                   since, limit);
}

static int pg_updates_ack(rl_txn_t *txn, const char *installation_id, int64_t up_to)
{
    static const char drop_sql[] = "DELETE FROM updates WHERE installation_id = $1 AND update_id <= $2";
    static const char mark_sql[] =
        "UPDATE installations SET acked_update_id = greatest(acked_update_id, $1) WHERE id = $2";
    int result = write_rows(TXN(txn), NULL, drop_sql, "sI", installation_id, up_to);

    return result != 0 ? result : write_rows(TXN(txn), NULL, mark_sql, "Is", up_to, installation_id);
}

static int pg_updates_purge(rl_txn_t *txn, int64_t created_before)
{
    static const char sql[] = "DELETE FROM updates WHERE created_at < $1";

    return write_rows(TXN(txn), NULL, sql, "I", created_before);
}

/* ---- attachments --------------------------------------------------------------------------------- */

#define ATTACHMENT_COLUMNS "key, user_id, mime, size, name, created_at, used_at, doomed_at"

static void read_attachment(struct pg_txn *t, PGresult *res, int r, void *out)
{
    rl_attachment_row_t *row = out;

    row->key = col_text(t, res, r, 0);
    row->user_id = col_text(t, res, r, 1);
    row->mime = col_text(t, res, r, 2);
    row->size = col_int64(res, r, 3);
    row->name = col_text(t, res, r, 4);
    row->created_at = col_int64(res, r, 5);
    row->used_at = col_time(res, r, 6);
    row->doomed_at = col_time(res, r, 7);
}

static int pg_attachment_insert(rl_txn_t *txn, const rl_attachment_row_t *row)
{
    static const char sql[] = "INSERT INTO attachments(" ATTACHMENT_COLUMNS ")"
                              " VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING";

    return insert_row(TXN(txn), sql, "sssIsITT", row->key, row->user_id, row->mime, row->size, row->name,
                      row->created_at, row->used_at, row->doomed_at);
}

static int pg_attachment_get(rl_txn_t *txn, const char *key, rl_attachment_row_t *out)
{
    static const char *const sql[2] = BY_KEY("SELECT " ATTACHMENT_COLUMNS " FROM attachments WHERE key = $1");

    return get_one(TXN(txn), read_attachment, out, LOCKING(TXN(txn), sql), "s", key);
}

static int pg_attachment_use(rl_txn_t *txn, const char *key, const char *session_id, int64_t now)
{
    static const char use[] = "INSERT INTO attachment_uses(key, session_id) VALUES ($1, $2) ON CONFLICT DO NOTHING";
    static const char first[] = "UPDATE attachments SET used_at = $1 WHERE key = $2 AND used_at IS NULL";
    int result = write_rows(TXN(txn), NULL, use, "ss", key, session_id);

    return result != 0 ? result : write_rows(TXN(txn), NULL, first, "Is", now, key);
}

static int pg_attachments_usage(rl_txn_t *txn, const char *user_id, int64_t *bytes)
{
    /* SUM of BIGINT is NUMERIC: cast back, the binary reader takes integers only. */
    static const char sql[] =
        "SELECT COALESCE(SUM(size), 0)::BIGINT FROM attachments WHERE user_id = $1 AND doomed_at IS NULL";

    return get_one(TXN(txn), read_int, bytes, sql, "s", user_id);
}

static int pg_attachments_unreferenced(rl_txn_t *txn, int64_t unused_before, int limit, rl_attachment_row_t **rows,
                                       size_t *count)
{
    static const char sql[] =
        "SELECT " ATTACHMENT_COLUMNS " FROM ("
        " SELECT * FROM attachments a WHERE used_at IS NOT NULL AND doomed_at IS NULL"
        "  AND NOT EXISTS (SELECT 1 FROM attachment_uses u WHERE u.key = a.key)"
        " UNION ALL"
        " SELECT * FROM attachments WHERE used_at IS NULL AND doomed_at IS NULL AND created_at < $1) x"
        " ORDER BY created_at, key COLLATE \"C\" LIMIT $2";

    return get_all(TXN(txn), read_attachment, sizeof(**rows), (void **)rows, count, sql, "Ii", unused_before, limit);
}

static int pg_attachment_doom(rl_txn_t *txn, const char *key, int64_t now)
{
    static const char sql[] = "UPDATE attachments SET doomed_at = $1 WHERE key = $2 AND doomed_at IS NULL";

    return write_one(TXN(txn), sql, "Is", now, key);
}

static int pg_attachments_doomed(rl_txn_t *txn, int limit, rl_attachment_row_t **rows, size_t *count)
{
    static const char sql[] = "SELECT " ATTACHMENT_COLUMNS " FROM attachments WHERE doomed_at IS NOT NULL"
                              " ORDER BY doomed_at, key COLLATE \"C\" LIMIT $1";

    return get_all(TXN(txn), read_attachment, sizeof(**rows), (void **)rows, count, sql, "i", limit);
}

static int pg_attachment_delete(rl_txn_t *txn, const char *key)
{
    static const char uses[] = "DELETE FROM attachment_uses WHERE key = $1";
    static const char row[] = "DELETE FROM attachments WHERE key = $1 AND doomed_at IS NOT NULL";
    int result = write_one(TXN(txn), row, "s", key);

    return result != 0 ? result : write_rows(TXN(txn), NULL, uses, "s", key);
}

/* ---- secrets ------------------------------------------------------------------------------------- */

static int pg_secret_insert_ignore(rl_txn_t *txn, const char *name, const char *value, int64_t created_at)
{
    static const char sql[] = "INSERT INTO secrets(name, value, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING";

    return write_rows(TXN(txn), NULL, sql, "ssI", name, value, created_at);
}

static int pg_secret_get(rl_txn_t *txn, const char *name, const char **value)
{
    static const char *const sql[2] = BY_KEY("SELECT value FROM secrets WHERE name = $1");

    return get_one(TXN(txn), read_text, value, LOCKING(TXN(txn), sql), "s", name);
}

/* ---- the web client: sign-in codes and push subscriptions ---------------------------------------- */

static void read_login_code(struct pg_txn *t, PGresult *res, int r, void *out)
{
    rl_login_code_row_t *row = out;

    row->code_hash = col_text(t, res, r, 0);
    row->user_id = col_text(t, res, r, 1);
    row->created_at = col_int64(res, r, 2);
    row->expires_at = col_int64(res, r, 3);
}

static int pg_login_code_insert(rl_txn_t *txn, const rl_login_code_row_t *row)
{
    static const char sql[] = "INSERT INTO login_codes(code_hash, user_id, created_at, expires_at)"
                              " VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING";

    return insert_row(TXN(txn), sql, "ssII", row->code_hash, row->user_id, row->created_at, row->expires_at);
}

static int pg_login_code_get(rl_txn_t *txn, const char *code_hash, rl_login_code_row_t *out)
{
    static const char *const sql[2] =
        BY_KEY("SELECT code_hash, user_id, created_at, expires_at FROM login_codes WHERE code_hash = $1");

    return get_one(TXN(txn), read_login_code, out, LOCKING(TXN(txn), sql), "s", code_hash);
}

static int pg_login_code_delete(rl_txn_t *txn, const char *code_hash)
{
    static const char sql[] = "DELETE FROM login_codes WHERE code_hash = $1";

    return write_one(TXN(txn), sql, "s", code_hash);
}

static int pg_login_codes_purge(rl_txn_t *txn, int64_t expired_before)
{
    static const char sql[] = "DELETE FROM login_codes WHERE expires_at < $1";

    return write_rows(TXN(txn), NULL, sql, "I", expired_before);
}

static void read_push_subscription(struct pg_txn *t, PGresult *res, int r, void *out)
{
    rl_push_subscription_row_t *row = out;

    row->endpoint = col_text(t, res, r, 0);
    row->user_id = col_text(t, res, r, 1);
    row->p256dh = col_text(t, res, r, 2);
    row->auth = col_text(t, res, r, 3);
    row->created_at = col_int64(res, r, 4);
}

static int pg_push_subscription_insert(rl_txn_t *txn, const rl_push_subscription_row_t *row)
{
    static const char sql[] = "INSERT INTO push_subscriptions(endpoint, user_id, p256dh, auth, created_at)"
                              " VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING";

    return insert_row(TXN(txn), sql, "ssssI", row->endpoint, row->user_id, row->p256dh, row->auth, row->created_at);
}

static int pg_push_subscription_get(rl_txn_t *txn, const char *endpoint, rl_push_subscription_row_t *out)
{
    static const char *const sql[2] =
        BY_KEY("SELECT endpoint, user_id, p256dh, auth, created_at FROM push_subscriptions WHERE endpoint = $1");

    return get_one(TXN(txn), read_push_subscription, out, LOCKING(TXN(txn), sql), "s", endpoint);
}

static int pg_push_subscription_delete(rl_txn_t *txn, const char *endpoint)
{
    static const char sql[] = "DELETE FROM push_subscriptions WHERE endpoint = $1";

    return write_one(TXN(txn), sql, "s", endpoint);
}

static int pg_push_subscriptions_of_user(rl_txn_t *txn, const char *user_id, rl_push_subscription_row_t **rows,
                                         size_t *count)
{
    static const char sql[] = "SELECT endpoint, user_id, p256dh, auth, created_at FROM push_subscriptions"
                              " WHERE user_id = $1 ORDER BY created_at, endpoint COLLATE \"C\"";

    return get_all(TXN(txn), read_push_subscription, sizeof(**rows), (void **)rows, count, sql, "s", user_id);
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

/* ---- end-to-end encryption (issue 26) ---------------------------------------------------------- */

static int pg_pairing_by_code_any(rl_txn_t *txn, const char *code_hash, rl_pairing_row_t *out)
{
    static const char sql[] =
        "SELECT " PAIRING_COLUMNS " FROM pairings WHERE code_hash = $1 ORDER BY created_at DESC LIMIT 1";

    return get_one(TXN(txn), read_pairing, out, sql, "s", code_hash);
}

#define DEVICE_COLUMNS "id, user_id, installation_id, platform, label, pubkey, created_at, revoked_at"

static void read_device(struct pg_txn *t, PGresult *res, int r, void *out)
{
    rl_device_row_t *row = out;

    row->id = col_text(t, res, r, 0);
    row->user_id = col_text(t, res, r, 1);
    row->installation_id = col_text(t, res, r, 2);
    row->platform = col_text(t, res, r, 3);
    row->label = col_text(t, res, r, 4);
    row->pubkey = col_text(t, res, r, 5);
    row->created_at = col_int64(res, r, 6);
    row->revoked_at = col_time(res, r, 7);
}

static int pg_device_insert(rl_txn_t *txn, const rl_device_row_t *row)
{
    static const char sql[] =
        "INSERT INTO devices(" DEVICE_COLUMNS ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING";

    return insert_row(TXN(txn), sql, "ssssssIT", row->id, row->user_id, row->installation_id, row->platform,
                      row->label, row->pubkey, row->created_at, row->revoked_at);
}

static int pg_device_get(rl_txn_t *txn, const char *id, rl_device_row_t *out)
{
    static const char *const sql[2] = BY_KEY("SELECT " DEVICE_COLUMNS " FROM devices WHERE id = $1");

    return get_one(TXN(txn), read_device, out, LOCKING(TXN(txn), sql), "s", id);
}

static int pg_device_update(rl_txn_t *txn, const rl_device_row_t *row)
{
    static const char sql[] = "UPDATE devices SET label = $1, pubkey = $2, revoked_at = $3 WHERE id = $4";

    return write_one(TXN(txn), sql, "ssTs", row->label, row->pubkey, row->revoked_at, row->id);
}

static int pg_devices_of_user(rl_txn_t *txn, const char *user_id, rl_device_row_t **rows, size_t *count)
{
    static const char sql[] = "SELECT " DEVICE_COLUMNS " FROM devices WHERE user_id = $1 AND revoked_at IS NULL"
                              " ORDER BY created_at, id COLLATE \"C\"";

    return get_all(TXN(txn), read_device, sizeof(**rows), (void **)rows, count, sql, "s", user_id);
}

static int pg_confirmation_put(rl_txn_t *txn, const char *device_id, const char *bridge_device_id, int64_t at)
{
    static const char sql[] = "INSERT INTO device_confirmations(device_id, bridge_device_id, at) VALUES ($1, $2, $3)"
                              " ON CONFLICT DO NOTHING";

    return write_rows(TXN(txn), NULL, sql, "ssI", device_id, bridge_device_id, at);
}

static void read_nothing(struct pg_txn *t, PGresult *res, int r, void *out)
{
    (void)t, (void)res, (void)r, (void)out;
}

static int pg_confirmation_get(rl_txn_t *txn, const char *device_id, const char *bridge_device_id)
{
    static const char sql[] = "SELECT 1 FROM device_confirmations WHERE device_id = $1 AND bridge_device_id = $2";

    return get_one(TXN(txn), read_nothing, NULL, sql, "ss", device_id, bridge_device_id);
}

static int pg_confirmations_delete(rl_txn_t *txn, const char *device_id)
{
    static const char sql[] = "DELETE FROM device_confirmations WHERE device_id = $1 OR bridge_device_id = $1";

    return write_rows(TXN(txn), NULL, sql, "s", device_id);
}

#define RECIPIENT_COLUMNS "session_id, device_id, wrapped_session_key, wrapped_by_device_id, created_at"

static void read_recipient(struct pg_txn *t, PGresult *res, int r, void *out)
{
    rl_recipient_row_t *row = out;

    row->session_id = col_text(t, res, r, 0);
    row->device_id = col_text(t, res, r, 1);
    row->wrapped_session_key = col_text(t, res, r, 2);
    row->wrapped_by_device_id = col_text(t, res, r, 3);
    row->created_at = col_int64(res, r, 4);
}

static int pg_recipient_put(rl_txn_t *txn, const rl_recipient_row_t *row)
{
    static const char sql[] =
        "INSERT INTO session_recipients(" RECIPIENT_COLUMNS ") VALUES ($1, $2, $3, $4, $5)"
        " ON CONFLICT (session_id, device_id) DO UPDATE SET wrapped_session_key = EXCLUDED.wrapped_session_key,"
        " wrapped_by_device_id = EXCLUDED.wrapped_by_device_id, created_at = EXCLUDED.created_at";

    return write_rows(TXN(txn), NULL, sql, "ssssI", row->session_id, row->device_id, row->wrapped_session_key,
                      row->wrapped_by_device_id, row->created_at);
}

static int pg_recipients_delete(rl_txn_t *txn, const char *device_id)
{
    static const char sql[] = "DELETE FROM session_recipients WHERE device_id = $1";

    return write_rows(TXN(txn), NULL, sql, "s", device_id);
}

static int pg_recipients_of_device(rl_txn_t *txn, const char *device_id, int64_t since, rl_recipient_row_t **rows,
                                   size_t *count)
{
    static const char sql[] = "SELECT " RECIPIENT_COLUMNS " FROM session_recipients WHERE device_id = $1"
                              " AND created_at >= $2 ORDER BY created_at, session_id COLLATE \"C\"";

    return get_all(TXN(txn), read_recipient, sizeof(**rows), (void **)rows, count, sql, "sI", device_id, since);
}

#define AGENT_FILE_COLUMNS "session_id, path_blind_idx, tool, mime, path_ct, display_name_ct, size_bytes, updated_at"

static void read_agent_file(struct pg_txn *t, PGresult *res, int r, void *out)
{
    rl_agent_file_row_t *row = out;

    row->session_id = col_text(t, res, r, 0);
    row->path_blind_idx = col_text(t, res, r, 1);
    row->tool = col_text(t, res, r, 2);
    row->mime = col_text(t, res, r, 3);
    row->path_ct = col_text(t, res, r, 4);
    row->display_name_ct = col_text(t, res, r, 5);
    row->size_bytes = col_time(res, r, 6);
    row->updated_at = col_int64(res, r, 7);
}

static int pg_agent_file_put(rl_txn_t *txn, const rl_agent_file_row_t *row)
{
    static const char sql[] =
        "INSERT INTO session_agent_files(" AGENT_FILE_COLUMNS ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
        " ON CONFLICT (session_id, path_blind_idx) DO UPDATE SET tool = EXCLUDED.tool, mime = EXCLUDED.mime,"
        " path_ct = EXCLUDED.path_ct, display_name_ct = EXCLUDED.display_name_ct, size_bytes = EXCLUDED.size_bytes,"
        " updated_at = EXCLUDED.updated_at";

    return write_rows(TXN(txn), NULL, sql, "ssssssTI", row->session_id, row->path_blind_idx, row->tool, row->mime,
                      row->path_ct, row->display_name_ct, row->size_bytes, row->updated_at);
}

static int pg_agent_files_of_session(rl_txn_t *txn, const char *session_id, rl_agent_file_row_t **rows, size_t *count)
{
    static const char sql[] = "SELECT " AGENT_FILE_COLUMNS " FROM session_agent_files WHERE session_id = $1"
                              " ORDER BY updated_at DESC, path_blind_idx COLLATE \"C\"";

    return get_all(TXN(txn), read_agent_file, sizeof(**rows), (void **)rows, count, sql, "s", session_id);
}

static const struct rl_txn_ops pg_ops = {
    .name = "postgres",
    .begin = pg_begin,
    .commit = pg_commit,
    .rollback = pg_rollback,
    .savepoint = pg_savepoint,
    .release = pg_release,
    .close = pg_close,
    .user_insert_ignore = pg_user_insert_ignore,
    .user_get = pg_user_get,
    .pairing_insert = pg_pairing_insert,
    .pairing_by_code = pg_pairing_by_code,
    .pairing_by_poll = pg_pairing_by_poll,
    .pairing_update = pg_pairing_update,
    .pairing_delete_lapsed = pg_pairing_delete_lapsed,
    .pairings_purge = pg_pairings_purge,
    .installation_insert = pg_installation_insert,
    .installation_get = pg_installation_get,
    .installation_update = pg_installation_update,
    .installations_of_user = pg_installations_of_user,
    .session_insert = pg_session_insert,
    .session_get = pg_session_get,
    .session_update = pg_session_update,
    .sessions_of_user = pg_sessions_of_user,
    .sessions_deleted_of_user = pg_sessions_deleted_of_user,
    .sessions_purge = pg_sessions_purge,
    .interaction_insert = pg_interaction_insert,
    .interaction_get = pg_interaction_get,
    .message_insert = pg_message_insert,
    .message_get = pg_message_get,
    .message_update = pg_message_update,
    .messages_page = pg_messages_page,
    .messages_by_time = pg_messages_by_time,
    .messages_open_before = pg_messages_open_before,
    .delta_run_insert = pg_delta_run_insert,
    .delta_runs_of = pg_delta_runs_of,
    .delta_next_seq = pg_delta_next_seq,
    .delta_runs_delete = pg_delta_runs_delete,
    .delta_keys_put = pg_delta_keys_put,
    .delta_keys_get = pg_delta_keys_get,
    .delta_keys_purge = pg_delta_keys_purge,
    .idempotency_get = pg_idempotency_get,
    .idempotency_insert = pg_idempotency_insert,
    .idempotency_delete = pg_idempotency_delete,
    .idempotency_of_scope = pg_idempotency_of_scope,
    .idempotency_purge = pg_idempotency_purge,
    .task_insert = pg_task_insert,
    .task_get = pg_task_get,
    .task_update = pg_task_update,
    .tasks_by_time = pg_tasks_by_time,
    .approval_insert = pg_approval_insert,
    .approval_get = pg_approval_get,
    .approval_update = pg_approval_update,
    .approvals_of_user_by_id = pg_approvals_of_user_by_id,
    .approvals_pending_of_user = pg_approvals_pending_of_user,
    .approvals_by_time = pg_approvals_by_time,
    .approvals_due = pg_approvals_due,
    .capability_insert = pg_capability_insert,
    .capability_get = pg_capability_get,
    .capability_update = pg_capability_update,
    .capabilities_pending_of_user = pg_capabilities_pending_of_user,
    .capabilities_due = pg_capabilities_due,
    .grant_insert_ignore = pg_grant_insert_ignore,
    .grants_of = pg_grants_of,
    .grants_of_installation = pg_grants_of_installation,
    .grant_delete = pg_grant_delete,
    .update_append = pg_update_append,
    .updates_after = pg_updates_after,
    .updates_ack = pg_updates_ack,
    .updates_purge = pg_updates_purge,
    .attachment_insert = pg_attachment_insert,
    .attachment_get = pg_attachment_get,
    .attachment_use = pg_attachment_use,
    .attachments_usage = pg_attachments_usage,
    .attachments_unreferenced = pg_attachments_unreferenced,
    .attachment_doom = pg_attachment_doom,
    .attachments_doomed = pg_attachments_doomed,
    .attachment_delete = pg_attachment_delete,
    .secret_insert_ignore = pg_secret_insert_ignore,
    .secret_get = pg_secret_get,
    .pairing_by_code_any = pg_pairing_by_code_any,
    .device_insert = pg_device_insert,
    .device_get = pg_device_get,
    .device_update = pg_device_update,
    .devices_of_user = pg_devices_of_user,
    .confirmation_put = pg_confirmation_put,
    .confirmation_get = pg_confirmation_get,
    .confirmations_delete = pg_confirmations_delete,
    .recipient_put = pg_recipient_put,
    .recipients_delete = pg_recipients_delete,
    .recipients_of_device = pg_recipients_of_device,
    .agent_file_put = pg_agent_file_put,
    .agent_files_of_session = pg_agent_files_of_session,
    .login_code_insert = pg_login_code_insert,
    .login_code_get = pg_login_code_get,
    .login_code_delete = pg_login_code_delete,
    .login_codes_purge = pg_login_codes_purge,
    .push_subscription_insert = pg_push_subscription_insert,
    .push_subscription_get = pg_push_subscription_get,
    .push_subscription_delete = pg_push_subscription_delete,
    .push_subscriptions_of_user = pg_push_subscriptions_of_user,
};

static void read_version(struct pg_txn *t, PGresult *res, int r, void *out)
{
    *(int *)out = (int)col_int64(res, r, 0);
}

/*
 * Brings the schema to the binary's version, one migration per transaction.
 * Each transaction takes an advisory lock first, so nodes that start
 * together wait for each other and migrate once.
 */
static int migrate(struct pg_txn *t)
{
    static const char lock_sql[] = "SELECT pg_advisory_xact_lock($1)";
    static const char version_sql[] = "SELECT coalesce(max(version), 0) FROM schema_version";
    int target = (int)(sizeof(migrations) / sizeof(migrations[0]));
    rl_arena_t arena = {NULL};
    char insert[96];
    int version = 0, result;

    t->base.arena = &arena;
    for (;;) {
        if ((result = control(t, "BEGIN", NULL)) != 0)
            break;
        t->in_txn = 1;
        if ((result = write_rows(t, NULL, lock_sql, "I", (int64_t)MIGRATION_LOCK)) != 0 ||
            (result = control(t, "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)", NULL)) != 0 ||
            (result = get_one(t, read_version, &version, version_sql, "")) != 0)
            break;
        if (version > target) {
            rl_log_error("the store (%s) is at schema version %d, newer than this relayd (%d)", t->where, version,
                         target);
            result = RL_E_INTERNAL;
            break;
        }
        if (version == target) {
            result = pg_commit(&t->base);
            break;
        }
        snprintf(insert, sizeof(insert), "INSERT INTO schema_version VALUES (%d)", version + 1);
        if ((result = control(t, migrations[version], NULL)) != 0 || (result = control(t, insert, NULL)) != 0 ||
            (result = pg_commit(&t->base)) != 0)
            break;
        rl_log_info("store (%s) migrated to PostgreSQL schema version %d", t->where, version + 1);
    }
    if (t->in_txn)
        pg_rollback(&t->base);
    t->base.arena = NULL;
    rl_arena_free(&arena);
    return result == 0 ? 0 : -1;
}

int rl_store__postgres_open(const char *conninfo, rl_txn_t **out)
{
    struct pg_txn *t = calloc(1, sizeof(*t));
    char *error = NULL, why[256];
    PQconninfoOption *parsed;

    if (t == NULL)
        return -1;
    t->base.ops = &pg_ops;
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
    *out = &t->base;
    return 0;
fail:
    pg_close(&t->base);
    return -1;
}

struct pg_conn *rl_store__postgres_conn(rl_txn_t *txn)
{
    return txn->ops == &pg_ops ? TXN(txn)->conn : NULL;
}
