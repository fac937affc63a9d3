/*
 * What the PostgreSQL backend does beyond the store's contract (which
 * test_store_contract.c checks against it as store/contract_postgres): it
 * comes back by itself after losing its connection, backs off while the
 * server is down, never waits for ever on a server that hangs or a lock
 * that is held, keeps commits durable, refuses a schema newer than itself,
 * and never logs the password of its URL.
 *
 * It needs a server: started without RL_TEST_PG, it runs itself again under
 * tests/support/pg.sh, which starts one in a temporary folder and removes it
 * at the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "store/backends.h"

static const char *url, *folder;
static rl_arena_t arena;
static char log_path[64];
static int saved_stderr = -1;

/* ---- helpers ------------------------------------------------------------------------------------- */

static void run(const char *fmt, ...)
{
    char cmd[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    assert_int_equal(system(cmd), 0);
}

/* A statement on a connection of the test's own; the result's first value, or "" */
static void admin(const char *sql, char *out, size_t outsz)
{
    PGconn *conn = PQconnectdb(url);
    PGresult *res;

    assert_int_equal(PQstatus(conn), CONNECTION_OK);
    res = PQexec(conn, sql);
    if (PQresultStatus(res) != PGRES_TUPLES_OK && PQresultStatus(res) != PGRES_COMMAND_OK)
        fail_msg("%s: %s", sql, PQerrorMessage(conn));
    if (out != NULL)
        snprintf(out, outsz, "%s", PQntuples(res) > 0 ? PQgetvalue(res, 0, 0) : "");
    PQclear(res);
    PQfinish(conn);
}

/* The pid of the server process behind the backend's connection (application_name relayd). */
static int relayd_backend(void)
{
    char pid[32];

    admin("SELECT pid FROM pg_stat_activity WHERE application_name = 'relayd'", pid, sizeof(pid));
    assert_true(pid[0] != '\0');
    return atoi(pid);
}

/* Ends the backend's connection from the server side, as an administrator or a restart would. */
static void terminate_relayd(void)
{
    char done[8];

    admin("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'relayd'", done,
          sizeof(done));
    assert_string_equal(done, "t");
    /* pg_terminate_backend only signals: wait until the process has gone. */
    for (int i = 0; i < 100; ++i) {
        admin("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'relayd'", done, sizeof(done));
        if (strcmp(done, "0") == 0)
            return;
        usleep(20 * 1000);
    }
    fail_msg("the terminated backend did not go");
}

/* The log lines written meanwhile go to a file (rl_log writes to stderr). */
static void capture_log(void)
{
    int fd;

    strcpy(log_path, "/tmp/rl-pg-log-XXXXXX");
    fd = mkstemp(log_path);
    assert_true(fd >= 0);
    saved_stderr = dup(STDERR_FILENO);
    assert_true(dup2(fd, STDERR_FILENO) >= 0);
    close(fd);
}

/* Stops capturing; the captured text, to free. */
static char *captured_log(void)
{
    FILE *f;
    char *text;
    long size;

    assert_true(dup2(saved_stderr, STDERR_FILENO) >= 0);
    close(saved_stderr);
    saved_stderr = -1;
    f = fopen(log_path, "r");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fseek(f, 0, SEEK_SET);
    text = calloc(1, (size_t)size + 1);
    assert_int_equal(fread(text, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    unlink(log_path);
    return text;
}

static int occurrences(const char *text, const char *what)
{
    int n = 0;

    for (const char *at = strstr(text, what); at != NULL; at = strstr(at + 1, what))
        ++n;
    return n;
}

static rl_txn_t *open_at(const char *location)
{
    rl_txn_t *txn = NULL;

    assert_int_equal(rl_store__backend_open(location, &txn), 0);
    txn->arena = &arena;
    txn->writing = 1;
    return txn;
}

static int64_t mono_ms(void)
{
    return rl_clock_mono_us() / 1000;
}

static int setup(void **state)
{
    run("%s %s", getenv("RL_TEST_STORE_RESET"), "");
    memset(&arena, 0, sizeof(arena));
    rl_log_set_level(RL_LOG_INFO);
    return 0;
}

static int teardown(void **state)
{
    rl_arena_free(&arena);
    if (saved_stderr >= 0)
        free(captured_log());
    return 0;
}

/* ---- connection loss ----------------------------------------------------------------------------- */

/* A connection the server closed while idle is replaced at the next begin: the batch does not fail. */
static void test_an_idle_connection_lost_is_replaced_at_begin(void **state)
{
    rl_txn_t *txn = open_at(url);
    rl_user_row_t alice = {"alice", 1}, out;
    char *log;

    capture_log();
    terminate_relayd();
    assert_int_equal(rl_txn_begin(txn), 0);
    assert_int_equal(RL_TXN(txn, user_insert_ignore, &alice), 0);
    assert_int_equal(rl_txn_commit(txn), 0);
    assert_int_equal(rl_txn_begin(txn), 0);
    assert_int_equal(RL_TXN(txn, user_get, "alice", &out), 0);
    assert_int_equal(rl_txn_commit(txn), 0);
    rl_txn_close(txn);
    log = captured_log();
    /* Logged once when lost and once when back. */
    assert_int_equal(occurrences(log, "lost its PostgreSQL connection"), 1);
    assert_int_equal(occurrences(log, "is back"), 1);
    free(log);
}

/* Lost in the middle of a transaction: every call answers RL_E_UNAVAILABLE, nothing is kept, the next begin works. */
static void test_a_connection_lost_in_a_transaction_is_unavailable(void **state)
{
    rl_txn_t *txn = open_at(url);
    rl_user_row_t alice = {"alice", 1}, bob = {"bob", 1}, out;

    capture_log();
    assert_int_equal(rl_txn_begin(txn), 0);
    assert_int_equal(RL_TXN(txn, user_insert_ignore, &alice), 0);
    terminate_relayd();
    assert_int_equal(RL_TXN(txn, user_insert_ignore, &bob), RL_E_UNAVAILABLE);
    assert_int_equal(RL_TXN(txn, user_get, "alice", &out), RL_E_UNAVAILABLE);
    assert_int_equal(rl_txn_savepoint(txn), RL_E_UNAVAILABLE);
    rl_txn_release(txn, 0);
    assert_int_equal(rl_txn_commit(txn), RL_E_UNAVAILABLE);
    rl_txn_rollback(txn);
    assert_int_equal(rl_txn_begin(txn), 0);
    assert_int_equal(RL_TXN(txn, user_get, "alice", &out), RL_E_NOT_FOUND);
    assert_int_equal(rl_txn_commit(txn), 0);
    rl_txn_close(txn);
    free(captured_log());
}

/*
 * A server that is down: begin tries to connect, then fails at once while it
 * backs off (100 ms, doubling), and the connection comes back by itself
 * when the server does.
 */
static void test_a_server_down_is_retried_with_back_off(void **state)
{
    rl_txn_t *txn = open_at(url);
    int64_t started, deadline;
    int result;
    char *log;

    rl_log_set_level(RL_LOG_DEBUG);
    capture_log();
    run("%s/tests/support/pg.sh down %s", RL_SOURCE_DIR, folder);
    assert_int_equal(rl_txn_begin(txn), RL_E_UNAVAILABLE);
    /* Within the back-off, no attempt: an answer at once. */
    started = mono_ms();
    assert_int_equal(rl_txn_begin(txn), RL_E_UNAVAILABLE);
    assert_int_equal(rl_txn_begin(txn), RL_E_UNAVAILABLE);
    assert_true(mono_ms() - started < 50);
    usleep(150 * 1000);
    assert_int_equal(rl_txn_begin(txn), RL_E_UNAVAILABLE);
    run("%s/tests/support/pg.sh up %s", RL_SOURCE_DIR, folder);
    deadline = mono_ms() + 10000;
    while ((result = rl_txn_begin(txn)) != 0 && mono_ms() < deadline)
        usleep(50 * 1000);
    assert_int_equal(result, 0);
    assert_int_equal(rl_txn_commit(txn), 0);
    rl_txn_close(txn);
    log = captured_log();
    /* Attempts: the first begin, the one after 150 ms, then the polls each back-off let through. */
    assert_true(occurrences(log, "store reconnect failed") >= 2);
    assert_int_equal(occurrences(log, "next try in 100 ms"), 1);
    assert_int_equal(occurrences(log, "next try in 200 ms"), 1);
    assert_int_equal(occurrences(log, "lost its PostgreSQL connection"), 1);
    assert_int_equal(occurrences(log, "is back"), 1);
    free(log);
}

/* ---- never waiting for ever ---------------------------------------------------------------------- */

/* URL with a statement timeout of ms milliseconds for relayd's connection. */
static const char *with_statement_timeout(int ms)
{
    static char with[1024];

    snprintf(with, sizeof(with), "%s&options=-c%%20statement_timeout%%3D%d", url, ms);
    return with;
}

/* A row another transaction holds: the locking read gives up with the statement timeout, as RL_E_UNAVAILABLE. */
static void test_a_lock_held_elsewhere_ends_in_unavailable(void **state)
{
    rl_txn_t *holder = open_at(url), *waiter;
    rl_user_row_t alice = {"alice", 1}, out;
    int64_t started;

    assert_int_equal(rl_txn_begin(holder), 0);
    assert_int_equal(RL_TXN(holder, user_insert_ignore, &alice), 0);
    assert_int_equal(rl_txn_commit(holder), 0);
    assert_int_equal(rl_txn_begin(holder), 0);
    assert_int_equal(RL_TXN(holder, user_get, "alice", &out), 0);
    capture_log();
    waiter = open_at(with_statement_timeout(300));
    assert_int_equal(rl_txn_begin(waiter), 0);
    started = mono_ms();
    assert_int_equal(RL_TXN(waiter, user_get, "alice", &out), RL_E_UNAVAILABLE);
    assert_true(mono_ms() - started >= 250);
    assert_int_equal(rl_txn_commit(waiter), RL_E_UNAVAILABLE);
    /* The connection itself is fine: the next transaction works. */
    assert_int_equal(rl_txn_commit(holder), 0);
    assert_int_equal(rl_txn_begin(waiter), 0);
    assert_int_equal(RL_TXN(waiter, user_get, "alice", &out), 0);
    assert_int_equal(rl_txn_commit(waiter), 0);
    rl_txn_close(waiter);
    rl_txn_close(holder);
    free(captured_log());
}

/*
 * A server process that stops answering (SIGSTOP stands for a hung server):
 * the backend gives up after twice the statement timeout and a second,
 * drops the connection and answers RL_E_UNAVAILABLE; the next begin
 * connects again.
 */
static void test_a_hung_server_is_unavailable_not_forever(void **state)
{
    rl_txn_t *txn = open_at(with_statement_timeout(300));
    rl_user_row_t out;
    int64_t started, took;
    int pid = relayd_backend();
    char *log;

    capture_log();
    assert_int_equal(kill(pid, SIGSTOP), 0);
    started = mono_ms();
    assert_int_equal(rl_txn_begin(txn), RL_E_UNAVAILABLE);
    took = mono_ms() - started;
    assert_int_equal(kill(pid, SIGCONT), 0);
    assert_true(took >= 1500 && took < 5000);
    assert_int_equal(rl_txn_begin(txn), 0);
    assert_int_equal(RL_TXN(txn, user_get, "nobody", &out), RL_E_NOT_FOUND);
    assert_int_equal(rl_txn_commit(txn), 0);
    rl_txn_close(txn);
    log = captured_log();
    assert_int_equal(occurrences(log, "did not answer within 1600 ms"), 1);
    free(log);
}

/* ---- settings, schema, secrets ------------------------------------------------------------------- */

static void show(rl_txn_t *txn, const char *setting, char *out, size_t outsz)
{
    PGconn *conn = (PGconn *)rl_store__postgres_conn(txn);
    char sql[128];
    PGresult *res;

    snprintf(sql, sizeof(sql), "SHOW %s", setting);
    res = PQexec(conn, sql);
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    snprintf(out, outsz, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
}

static void test_commits_are_durable_and_timeouts_set(void **state)
{
    char with[1024], value[64];
    rl_txn_t *txn;

    /* An operator's URL that turns synchronous_commit off does not make relayd's commits lossy. */
    snprintf(with, sizeof(with), "%s&options=-c%%20synchronous_commit%%3Doff", url);
    capture_log();
    txn = open_at(with);
    show(txn, "synchronous_commit", value, sizeof(value));
    assert_string_equal(value, "on");
    show(txn, "statement_timeout", value, sizeof(value));
    assert_string_equal(value, "10s");
    show(txn, "idle_in_transaction_session_timeout", value, sizeof(value));
    assert_string_equal(value, "1min");
    rl_txn_close(txn);
    /* A statement timeout the operator chose is kept. */
    txn = open_at(with_statement_timeout(2500));
    show(txn, "statement_timeout", value, sizeof(value));
    assert_string_equal(value, "2500ms");
    rl_txn_close(txn);
    free(captured_log());
}

static void test_a_newer_schema_is_refused(void **state)
{
    rl_txn_t *txn = open_at(url);
    char *log;

    rl_txn_close(txn);
    admin("INSERT INTO schema_version VALUES (99)", NULL, 0);
    capture_log();
    txn = NULL;
    assert_int_equal(rl_store__backend_open(url, &txn), -1);
    log = captured_log();
    assert_non_null(strstr(log, "schema version 99, newer than this relayd"));
    free(log);
}

/* Nodes that start together migrate once. */
static void test_nodes_starting_together_migrate_once(void **state)
{
    pid_t children[4];
    char count[16];
    int i, status;

    for (i = 0; i < 4; ++i) {
        children[i] = fork();
        assert_true(children[i] >= 0);
        if (children[i] == 0) {
            rl_txn_t *txn = NULL;
            _exit(rl_store__backend_open(url, &txn) == 0 ? 0 : 1);
        }
    }
    for (i = 0; i < 4; ++i) {
        assert_int_equal(waitpid(children[i], &status, 0), children[i]);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    /* Each version recorded once, however many nodes raced for it. */
    admin("SELECT count(*) - count(DISTINCT version) FROM schema_version", count, sizeof(count));
    assert_string_equal(count, "0");
    admin("SELECT count(*) = max(version) FROM schema_version", count, sizeof(count));
    assert_string_equal(count, "t");
}

static void test_the_password_is_never_logged(void **state)
{
    char with[1024], *log;
    const char *host = strstr(url, "?host=");
    rl_txn_t *txn = NULL;

    capture_log();
    /* Unreachable, malformed, and reachable then lost: no log line may quote the password. */
    assert_int_equal(rl_store__backend_open("postgres://relay:s3cr3t-pw@/relay?host=/nonexistent", &txn), -1);
    assert_int_equal(rl_store__backend_open("postgres://relay:s3cr3t-pw@/relay?host=/tmp&bogus=%zz", &txn), -1);
    assert_int_equal(rl_store__backend_open("mysql://relay:s3cr3t-pw@db/relay", &txn), -1);
    assert_non_null(host);
    snprintf(with, sizeof(with), "postgresql://relay:s3cr3t-pw@/relay%s", host);
    txn = open_at(with);
    terminate_relayd();
    assert_int_equal(rl_txn_begin(txn), 0);
    assert_int_equal(rl_txn_commit(txn), 0);
    rl_txn_close(txn);
    log = captured_log();
    assert_null(strstr(log, "s3cr3t-pw"));
    /* What is logged names the database and where it is. */
    assert_non_null(strstr(log, "database relay on /nonexistent"));
    assert_non_null(strstr(log, "not a valid PostgreSQL connection URI"));
    free(log);
}

#define TEST(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        TEST(test_an_idle_connection_lost_is_replaced_at_begin),
        TEST(test_a_connection_lost_in_a_transaction_is_unavailable),
        TEST(test_a_server_down_is_retried_with_back_off),
        TEST(test_a_lock_held_elsewhere_ends_in_unavailable),
        TEST(test_a_hung_server_is_unavailable_not_forever),
        TEST(test_commits_are_durable_and_timeouts_set),
        TEST(test_a_newer_schema_is_refused),
        TEST(test_nodes_starting_together_migrate_once),
        TEST(test_the_password_is_never_logged),
    };

    url = getenv("RL_TEST_STORE");
    folder = getenv("RL_TEST_PG");
    if (folder == NULL || url == NULL || strncmp(url, "postgres", 8) != 0) {
        /* A server of our own, for as long as this runs. */
        char script[1024];
        snprintf(script, sizeof(script), "%s/tests/support/pg.sh", RL_SOURCE_DIR);
        execl(script, script, "run", argv[0], (char *)NULL);
        fprintf(stderr, "cannot run %s: %s\n", script, strerror(errno));
        return 1;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
