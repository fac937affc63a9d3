/*
 * The store's contract: what every backend must do (each rl_txn_*
 * operation, transactions, savepoints, durability against a killed
 * process) and what the worker guarantees over any backend (order,
 * deferred completions, isolation of a failing operation, group commit,
 * wake-ups, close). docs/internals/store.md is the prose of this file.
 *
 * The backend under test is SQLite in a fresh temporary folder per test;
 * RL_TEST_STORE names another backend's location, which must be empty at
 * the start of each test (RL_TEST_STORE_RESET, a shell command, is run
 * before each test to make it so). ctest runs it against PostgreSQL as
 * store/contract_postgres, with a server of its own (tests/support/pg.sh).
 */
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"
#include "common/error.h"
#include "store/rows.h"
#include "store/sql.h"
#include "store/sqlite.h"
#include "store/store.h"

static char folder[64];
static char location[512];
static rl_arena_t arena;

static int setup(void **state)
{
    const char *other = getenv("RL_TEST_STORE"), *reset = getenv("RL_TEST_STORE_RESET");

    strcpy(folder, "/tmp/rl-store-contract-XXXXXX");
    assert_non_null(mkdtemp(folder));
    if (other != NULL && other[0] != '\0') {
        snprintf(location, sizeof(location), "%s", other);
        if (reset != NULL && reset[0] != '\0')
            assert_int_equal(system(reset), 0);
    } else {
        snprintf(location, sizeof(location), "sqlite:%s/relay.db", folder);
    }
    memset(&arena, 0, sizeof(arena));
    return 0;
}

static int teardown(void **state)
{
    char cmd[128];

    rl_arena_free(&arena);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", folder);
    assert_int_equal(system(cmd), 0);
    return 0;
}

/* A backend connection with an open transaction, as the worker gives it to an operation. */
static rl_txn_t *open_txn(void)
{
    rl_txn_t *txn = NULL;

    assert_int_equal(rl_store__backend_open(location, &txn), 0);
    txn->arena = &arena;
    txn->writing = 1;
    assert_int_equal(rl_txn_begin(txn), 0);
    return txn;
}

static void commit_close(rl_txn_t *txn)
{
    assert_int_equal(rl_txn_commit(txn), 0);
    rl_txn_close(txn);
}

/* ---- rows --------------------------------------------------------------------------------------- */

static void test_users(void **state)
{
    rl_txn_t *txn = open_txn();
    rl_user_row_t alice = {"alice", 1000}, again = {"alice", 2000}, out;

    assert_int_equal(RL_TXN(txn, user_insert_ignore, &alice), 0);
    assert_int_equal(RL_TXN(txn, user_insert_ignore, &again), 0);
    assert_int_equal(RL_TXN(txn, user_get, "alice", &out), 0);
    assert_string_equal(out.id, "alice");
    /* insert_ignore keeps the row there was. */
    assert_int_equal(out.created_at, 1000);
    assert_int_equal(RL_TXN(txn, user_get, "bob", &out), RL_E_NOT_FOUND);
    commit_close(txn);
}

static const rl_pairing_row_t pairing = {
    "poll-1", "code-1", "inst_0123456789abcdef", "exec", "laptop", "pending", NULL, 1000, 121000, RL_NO_TIME};

static void test_pairings(void **state)
{
    rl_txn_t *txn = open_txn();
    rl_pairing_row_t second = pairing, out;

    assert_int_equal(RL_TXN(txn, pairing_insert, &pairing), 0);
    assert_int_equal(RL_TXN(txn, pairing_by_code, "code-1", &out), 0);
    assert_string_equal(out.poll_hash, "poll-1");
    assert_null(out.user_id);
    assert_int_equal(out.claimed_at, RL_NO_TIME);
    assert_int_equal(out.expires_at, 121000);
    /* At most one pending pairing per code. */
    second.poll_hash = "poll-2";
    assert_int_equal(RL_TXN(txn, pairing_insert, &second), RL_E_CONFLICT);
    /* A lapsed pending code goes; an unexpired one stays. */
    assert_int_equal(RL_TXN(txn, pairing_delete_lapsed, "code-1", 120999), 0);
    assert_int_equal(RL_TXN(txn, pairing_by_poll, "poll-1", &out), 0);
    out.state = "claimed";
    out.user_id = "alice";
    out.claimed_at = 3000;
    assert_int_equal(RL_TXN(txn, pairing_update, &out), 0);
    /* by_code finds only the pending one. */
    assert_int_equal(RL_TXN(txn, pairing_by_code, "code-1", &out), RL_E_NOT_FOUND);
    assert_int_equal(RL_TXN(txn, pairing_by_poll, "poll-1", &out), 0);
    assert_string_equal(out.state, "claimed");
    assert_string_equal(out.user_id, "alice");
    assert_int_equal(out.claimed_at, 3000);
    /* Once claimed, the code may be pending again for another pairing. */
    assert_int_equal(RL_TXN(txn, pairing_insert, &second), 0);
    assert_int_equal(RL_TXN(txn, pairing_delete_lapsed, "code-1", 121000), 0);
    assert_int_equal(RL_TXN(txn, pairing_by_poll, "poll-2", &out), RL_E_NOT_FOUND);
    assert_int_equal(RL_TXN(txn, pairing_by_poll, "poll-1", &out), 0);
    out.poll_hash = "poll-none";
    assert_int_equal(RL_TXN(txn, pairing_update, &out), RL_E_NOT_FOUND);
    assert_int_equal(RL_TXN(txn, pairings_purge, 121001), 0);
    assert_int_equal(RL_TXN(txn, pairing_by_poll, "poll-1", &out), RL_E_NOT_FOUND);
    commit_close(txn);
}

static rl_installation_row_t installation(const char *id, const char *user, int64_t created_at)
{
    return (rl_installation_row_t){id,   user, NULL,   "live", "exec",     "laptop",
                                   NULL, NULL, "live", NULL,   created_at, RL_NO_TIME};
}

/* Rows reference their parents (installations and sessions a user): a backend may check it. */
static void users(rl_txn_t *txn)
{
    rl_user_row_t alice = {"alice", 1}, bob = {"bob", 1};

    assert_int_equal(RL_TXN(txn, user_insert_ignore, &alice), 0);
    assert_int_equal(RL_TXN(txn, user_insert_ignore, &bob), 0);
}

static void test_installations(void **state)
{
    rl_txn_t *txn = open_txn();
    rl_installation_row_t a = installation("inst_b", "alice", 2000), b = installation("inst_a", "alice", 2000);
    rl_installation_row_t c = installation("inst_c", "alice", 1000), d = installation("inst_d", "bob", 500), out, *rows;
    size_t count;

    users(txn);
    assert_int_equal(RL_TXN(txn, installation_insert, &a), 0);
    assert_int_equal(RL_TXN(txn, installation_insert, &a), RL_E_CONFLICT);
    assert_int_equal(RL_TXN(txn, installation_insert, &b), 0);
    assert_int_equal(RL_TXN(txn, installation_insert, &c), 0);
    assert_int_equal(RL_TXN(txn, installation_insert, &d), 0);
    assert_int_equal(RL_TXN(txn, installation_get, "inst_b", &out), 0);
    assert_null(out.token_hash);
    assert_null(out.custom_display_name);
    assert_null(out.manifest);
    assert_int_equal(out.revoked_at, RL_NO_TIME);
    out.token_hash = "hash";
    out.token_env = "test";
    out.custom_display_name = "Laptop";
    out.custom_emoji = "x";
    out.state = "revoked";
    out.manifest = "{\"tools\":[]}";
    out.revoked_at = 9000;
    assert_int_equal(RL_TXN(txn, installation_update, &out), 0);
    assert_int_equal(RL_TXN(txn, installation_get, "inst_b", &out), 0);
    assert_string_equal(out.token_hash, "hash");
    assert_string_equal(out.token_env, "test");
    assert_string_equal(out.custom_display_name, "Laptop");
    assert_string_equal(out.custom_emoji, "x");
    assert_string_equal(out.state, "revoked");
    assert_string_equal(out.manifest, "{\"tools\":[]}");
    assert_int_equal(out.revoked_at, 9000);
    out.id = "inst_none";
    assert_int_equal(RL_TXN(txn, installation_update, &out), RL_E_NOT_FOUND);
    /* The user's installations by created_at, then id. */
    assert_int_equal(RL_TXN(txn, installations_of_user, "alice", &rows, &count), 0);
    assert_int_equal(count, 3);
    assert_string_equal(rows[0].id, "inst_c");
    assert_string_equal(rows[1].id, "inst_a");
    assert_string_equal(rows[2].id, "inst_b");
    assert_int_equal(RL_TXN(txn, installations_of_user, "carol", &rows, &count), 0);
    assert_int_equal(count, 0);
    commit_close(txn);
}

static rl_session_row_t session(const char *id, const char *user, int64_t updated_at)
{
    return (rl_session_row_t){id, user, "inst_a", NULL, "active", 1000, updated_at, RL_NO_TIME};
}

static rl_message_row_t message(const char *id, const char *session_id, const char *text)
{
    return (rl_message_row_t){id, session_id, "int_1", "agent", text, "[]", NULL, NULL, NULL, "final", 1000, 2000, 0};
}

static void test_sessions_and_their_purge(void **state)
{
    rl_txn_t *txn = open_txn();
    rl_installation_row_t inst = installation("inst_a", "alice", 1000);
    rl_user_row_t alice = {"alice", 1};
    rl_session_row_t s1 = session("ses_1", "alice", 3000), s2 = session("ses_2", "alice", 4000),
                     s3 = session("ses_3", "alice", 5000), out, *rows;
    rl_interaction_row_t interaction = {"int_1", "ses_3", 1000};
    rl_message_row_t m = message("msg_1", "ses_3", "hi");
    rl_task_row_t t3 = {"inst_a", "call_3", "ses_3", "int_1", "read", NULL, "created", NULL, 1000, 1000};
    rl_task_row_t t1 = {"inst_a", "call_1", "ses_1", "int_9", "read", NULL, "created", NULL, 1000, 1000}, task;
    rl_approval_row_t a3 = {"apr_3", "inst_a", "alice", "ses_3", "int_1", "{}",      "pending",
                            NULL,    NULL,     NULL,    1000,    9000,    RL_NO_TIME};
    rl_approval_row_t a1 = a3, approval;
    rl_capability_row_t k3 = {"cap_3", "inst_a",  "alice", "ses_3", "int_1", "camera",
                              "{}",    "pending", NULL,    1000,    9000,    RL_NO_TIME};
    rl_capability_row_t k1 = k3, capability_out;
    int64_t purged = 0;
    size_t count;

    assert_int_equal(RL_TXN(txn, user_insert_ignore, &alice), 0);
    assert_int_equal(RL_TXN(txn, installation_insert, &inst), 0);
    assert_int_equal(RL_TXN(txn, session_insert, &s1), 0);
    assert_int_equal(RL_TXN(txn, session_insert, &s2), 0);
    assert_int_equal(RL_TXN(txn, session_insert, &s3), 0);
    assert_int_equal(RL_TXN(txn, session_insert, &s3), RL_E_CONFLICT);
    assert_int_equal(RL_TXN(txn, interaction_insert, &interaction), 0);
    assert_int_equal(RL_TXN(txn, message_insert, &m), 0);
    a1.id = "apr_1";
    a1.session_id = "ses_1";
    assert_int_equal(RL_TXN(txn, task_insert, &t3), 0);
    assert_int_equal(RL_TXN(txn, task_insert, &t1), 0);
    assert_int_equal(RL_TXN(txn, approval_insert, &a3), 0);
    assert_int_equal(RL_TXN(txn, approval_insert, &a1), 0);
    k1.id = "cap_1";
    k1.session_id = "ses_1";
    assert_int_equal(RL_TXN(txn, capability_insert, &k3), 0);
    assert_int_equal(RL_TXN(txn, capability_insert, &k1), 0);
    assert_int_equal(RL_TXN(txn, session_get, "ses_1", &out), 0);
    assert_null(out.title);
    assert_int_equal(out.deleted_at, RL_NO_TIME);
    out.title = "renamed";
    out.state = "archived";
    out.updated_at = 6000;
    assert_int_equal(RL_TXN(txn, session_update, &out), 0);
    s3.deleted_at = 7000;
    assert_int_equal(RL_TXN(txn, session_update, &s3), 0);
    /* Live sessions only, most recently updated first. */
    assert_int_equal(RL_TXN(txn, sessions_of_user, "alice", &rows, &count), 0);
    assert_int_equal(count, 2);
    assert_string_equal(rows[0].id, "ses_1");
    assert_string_equal(rows[0].title, "renamed");
    assert_string_equal(rows[0].state, "archived");
    assert_string_equal(rows[1].id, "ses_2");
    /* The deleted ones, most recently deleted first, after a time (the restore grace). */
    s2.deleted_at = 6500;
    assert_int_equal(RL_TXN(txn, session_update, &s2), 0);
    assert_int_equal(RL_TXN(txn, sessions_deleted_of_user, "alice", 0, &rows, &count), 0);
    assert_int_equal(count, 2);
    assert_string_equal(rows[0].id, "ses_3");
    assert_string_equal(rows[1].id, "ses_2");
    assert_int_equal(RL_TXN(txn, sessions_deleted_of_user, "alice", 6500, &rows, &count), 0);
    assert_int_equal(count, 1);
    assert_int_equal(RL_TXN(txn, sessions_deleted_of_user, "bob", 0, &rows, &count), 0);
    assert_int_equal(count, 0);
    s2.deleted_at = RL_NO_TIME;
    assert_int_equal(RL_TXN(txn, session_update, &s2), 0);
    /* A deleted session stays readable by id until it is purged, with what hangs off it. */
    assert_int_equal(RL_TXN(txn, session_get, "ses_3", &out), 0);
    assert_int_equal(out.deleted_at, 7000);
    assert_int_equal(RL_TXN(txn, sessions_purge, 6999, &purged), 0);
    assert_int_equal(purged, 0);
    assert_int_equal(RL_TXN(txn, sessions_purge, 7000, &purged), 0);
    assert_int_equal(purged, 1);
    assert_int_equal(RL_TXN(txn, session_get, "ses_3", &out), RL_E_NOT_FOUND);
    assert_int_equal(RL_TXN(txn, interaction_get, "int_1", &interaction), RL_E_NOT_FOUND);
    assert_int_equal(RL_TXN(txn, message_get, "msg_1", &m), RL_E_NOT_FOUND);
    /* Tasks and approvals live as long as their session; other sessions keep theirs. */
    assert_int_equal(RL_TXN(txn, task_get, "inst_a", "call_3", &task), RL_E_NOT_FOUND);
    assert_int_equal(RL_TXN(txn, approval_get, "inst_a", "apr_3", &approval), RL_E_NOT_FOUND);
    assert_int_equal(RL_TXN(txn, task_get, "inst_a", "call_1", &task), 0);
    assert_int_equal(RL_TXN(txn, approval_get, "inst_a", "apr_1", &approval), 0);
    assert_int_equal(RL_TXN(txn, capability_get, "cap_3", &capability_out), RL_E_NOT_FOUND);
    assert_int_equal(RL_TXN(txn, capability_get, "cap_1", &capability_out), 0);
    out.id = "ses_none";
    assert_int_equal(RL_TXN(txn, session_update, &out), RL_E_NOT_FOUND);
    commit_close(txn);
}

/* Rows that messages and their deltas hang off. */
static void parents(rl_txn_t *txn)
{
    rl_user_row_t alice = {"alice", 1};
    rl_installation_row_t inst = installation("inst_a", "alice", 1000);
    rl_session_row_t s1 = session("ses_1", "alice", 1000), s2 = session("ses_2", "alice", 1000);
    rl_interaction_row_t interaction = {"int_1", "ses_1", 1500};

    assert_int_equal(RL_TXN(txn, user_insert_ignore, &alice), 0);
    assert_int_equal(RL_TXN(txn, installation_insert, &inst), 0);
    assert_int_equal(RL_TXN(txn, session_insert, &s1), 0);
    assert_int_equal(RL_TXN(txn, session_insert, &s2), 0);
    assert_int_equal(RL_TXN(txn, interaction_insert, &interaction), 0);
}

static void test_interactions_and_messages(void **state)
{
    rl_txn_t *txn = open_txn();
    rl_interaction_row_t interaction;
    rl_message_row_t out, *rows, m;
    char id[16], text[16];
    size_t count;
    int i;

    parents(txn);
    assert_int_equal(RL_TXN(txn, interaction_get, "int_1", &interaction), 0);
    assert_string_equal(interaction.session_id, "ses_1");
    assert_int_equal(interaction.created_at, 1500);
    assert_int_equal(RL_TXN(txn, interaction_get, "int_none", &interaction), RL_E_NOT_FOUND);
    for (i = 1; i <= 5; ++i) {
        snprintf(id, sizeof(id), "msg_%d", i);
        snprintf(text, sizeof(text), "text %d", i);
        m = message(rl_arena_strdup(&arena, id), "ses_1", rl_arena_strdup(&arena, text));
        assert_int_equal(RL_TXN(txn, message_insert, &m), 0);
    }
    m = message("msg_other", "ses_2", "elsewhere");
    m.state = "streaming";
    m.finalized_at = RL_NO_TIME;
    m.placeholder = 1;
    m.interaction_id = NULL;
    m.usage = "{\"input_tokens\":3}";
    assert_int_equal(RL_TXN(txn, message_insert, &m), 0);
    assert_int_equal(RL_TXN(txn, message_insert, &m), RL_E_CONFLICT);
    assert_int_equal(RL_TXN(txn, message_get, "msg_other", &out), 0);
    assert_null(out.interaction_id);
    assert_int_equal(out.finalized_at, RL_NO_TIME);
    assert_int_equal(out.placeholder, 1);
    assert_string_equal(out.usage, "{\"input_tokens\":3}");
    /* Still streaming: by its interaction's start, or its own without one. */
    m = message("msg_open", "ses_1", "");
    m.state = "streaming";
    m.created_at = 1600;
    assert_int_equal(RL_TXN(txn, message_insert, &m), 0);
    assert_int_equal(RL_TXN(txn, messages_open_before, 999, 10, &rows, &count), 0);
    assert_int_equal(count, 0);
    assert_int_equal(RL_TXN(txn, messages_open_before, 1000, 10, &rows, &count), 0);
    assert_int_equal(count, 1);
    assert_string_equal(rows[0].id, "msg_other");
    assert_int_equal(RL_TXN(txn, messages_open_before, 1500, 10, &rows, &count), 0);
    assert_int_equal(count, 2);
    assert_int_equal(RL_TXN(txn, messages_open_before, 1500, 1, &rows, &count), 0);
    assert_int_equal(count, 1);
    m.state = "final";
    assert_int_equal(RL_TXN(txn, message_update, &m), 0);
    out.text = "final words";
    out.finish_reason = "stop";
    out.state = "final";
    out.finalized_at = 8000;
    out.placeholder = 0;
    out.usage = NULL;
    assert_int_equal(RL_TXN(txn, message_update, &out), 0);
    assert_int_equal(RL_TXN(txn, message_get, "msg_other", &out), 0);
    assert_string_equal(out.text, "final words");
    assert_string_equal(out.finish_reason, "stop");
    assert_int_equal(out.finalized_at, 8000);
    assert_int_equal(out.placeholder, 0);
    assert_null(out.usage);
    assert_int_equal(RL_TXN(txn, messages_open_before, 9000, 10, &rows, &count), 0);
    assert_int_equal(count, 0);
    /* Newest first, in insertion order, a page at a time. */
    assert_int_equal(RL_TXN(txn, messages_page, "ses_1", NULL, 3, &rows, &count), 0);
    assert_int_equal(count, 3);
    assert_string_equal(rows[0].id, "msg_open");
    assert_string_equal(rows[1].id, "msg_5");
    assert_string_equal(rows[2].id, "msg_4");
    assert_int_equal(RL_TXN(txn, messages_page, "ses_1", "msg_4", 10, &rows, &count), 0);
    assert_int_equal(count, 3);
    assert_string_equal(rows[0].id, "msg_3");
    assert_string_equal(rows[2].id, "msg_1");
    assert_int_equal(RL_TXN(txn, messages_page, "ses_1", "msg_1", 10, &rows, &count), 0);
    assert_int_equal(count, 0);
    /* A cursor of another session is not a cursor here. */
    assert_int_equal(RL_TXN(txn, messages_page, "ses_1", "msg_other", 10, &rows, &count), RL_E_NOT_FOUND);
    out.id = "msg_none";
    assert_int_equal(RL_TXN(txn, message_update, &out), RL_E_NOT_FOUND);
    commit_close(txn);
}

static void test_delta_runs_and_their_keys(void **state)
{
    rl_txn_t *txn = open_txn();
    rl_delta_run_row_t r1 = {"msg_a", 1, 3, "one two three", 13, "[[\"k1\",\"h1\"],[\"k2\",\"h2\"],[\"k3\",\"h3\"]]"};
    rl_delta_run_row_t r2 = {"msg_a", 4, 4, "a\0b", 3, "[[\"k4\",\"h4\"]]"};
    rl_delta_run_row_t again = {"msg_a", 1, 1, "other", 5, "[]"}, *rows;
    const char *keys;
    int64_t keys_at;
    int64_t next = 0;
    size_t count;

    assert_int_equal(RL_TXN(txn, delta_next_seq, "msg_a", &next), 0);
    assert_int_equal(next, 1);
    assert_int_equal(RL_TXN(txn, delta_run_insert, &r2), 0);
    assert_int_equal(RL_TXN(txn, delta_run_insert, &r1), 0);
    /* A run whose (message, seq) is stored already is ignored: a retried batch is harmless. */
    assert_int_equal(RL_TXN(txn, delta_run_insert, &again), 0);
    assert_int_equal(RL_TXN(txn, delta_next_seq, "msg_a", &next), 0);
    assert_int_equal(next, 5);
    assert_int_equal(RL_TXN(txn, delta_runs_of, "msg_a", &rows, &count), 0);
    assert_int_equal(count, 2);
    assert_int_equal(rows[0].seq, 1);
    assert_int_equal(rows[0].seq_last, 3);
    assert_int_equal(rows[0].text_len, 13);
    assert_memory_equal(rows[0].text, "one two three", 13);
    assert_string_equal(rows[0].keys, r1.keys);
    /* Text is bytes with a length. */
    assert_int_equal(rows[1].text_len, 3);
    assert_memory_equal(rows[1].text, "a\0b", 3);
    assert_int_equal(RL_TXN(txn, delta_runs_delete, "msg_a"), 0);
    assert_int_equal(RL_TXN(txn, delta_runs_of, "msg_a", &rows, &count), 0);
    assert_int_equal(count, 0);
    assert_int_equal(RL_TXN(txn, delta_keys_get, "msg_a", &keys, &keys_at), RL_E_NOT_FOUND);
    assert_int_equal(RL_TXN(txn, delta_keys_put, "msg_a", "{\"k1\":\"h1\"}", 5000), 0);
    assert_int_equal(RL_TXN(txn, delta_keys_put, "msg_a", "{\"k2\":\"h2\"}", 6000), 0);
    assert_int_equal(RL_TXN(txn, delta_keys_get, "msg_a", &keys, &keys_at), 0);
    assert_string_equal(keys, "{\"k2\":\"h2\"}");
    assert_int_equal(keys_at, 6000);
    assert_int_equal(RL_TXN(txn, delta_keys_purge, 6000), 0);
    assert_int_equal(RL_TXN(txn, delta_keys_get, "msg_a", &keys, &keys_at), 0);
    assert_int_equal(RL_TXN(txn, delta_keys_purge, 6001), 0);
    assert_int_equal(RL_TXN(txn, delta_keys_get, "msg_a", &keys, &keys_at), RL_E_NOT_FOUND);
    commit_close(txn);
}

static void test_idempotency_records(void **state)
{
    rl_txn_t *txn = open_txn();
    rl_idempotency_row_t a = {"inst_a", "message:msg_1", "key-1", "hash-1", "{\"message_id\":\"msg_1\"}", 1000};
    rl_idempotency_row_t b = {"inst_a", "message:msg_1", "key-2", "hash-2", "{}", 3000};
    rl_idempotency_row_t c = {"inst_a", "message:msg_1", "key-3", "hash-3", "{}", 4000};
    rl_idempotency_row_t other = {"inst_b", "message:msg_1", "key-1", "hash-9", "{}", 1000}, out, *rows;
    size_t count;

    assert_int_equal(RL_TXN(txn, idempotency_insert, &a), 0);
    assert_int_equal(RL_TXN(txn, idempotency_insert, &a), RL_E_CONFLICT);
    assert_int_equal(RL_TXN(txn, idempotency_insert, &b), 0);
    /* Keys are per (owner, scope): another installation's same key is another record. */
    assert_int_equal(RL_TXN(txn, idempotency_insert, &other), 0);
    assert_int_equal(RL_TXN(txn, idempotency_get, "inst_a", "message:msg_1", "key-1", &out), 0);
    assert_string_equal(out.body_hash, "hash-1");
    assert_string_equal(out.response, "{\"message_id\":\"msg_1\"}");
    assert_int_equal(out.created_at, 1000);
    assert_int_equal(RL_TXN(txn, idempotency_get, "inst_a", "message:msg_2", "key-1", &out), RL_E_NOT_FOUND);
    assert_int_equal(RL_TXN(txn, idempotency_of_scope, "inst_a", "message:msg_1", &rows, &count), 0);
    assert_int_equal(count, 2);
    assert_int_equal(RL_TXN(txn, idempotency_purge, 2000), 0);
    assert_int_equal(RL_TXN(txn, idempotency_get, "inst_a", "message:msg_1", "key-1", &out), RL_E_NOT_FOUND);
    assert_int_equal(RL_TXN(txn, idempotency_get, "inst_a", "message:msg_1", "key-2", &out), 0);
    /* One record goes by its key (a lapsed one makes way for a new write), and only that one. */
    assert_int_equal(RL_TXN(txn, idempotency_insert, &c), 0);
    assert_int_equal(RL_TXN(txn, idempotency_delete, "inst_a", "message:msg_1", "key-2"), 0);
    assert_int_equal(RL_TXN(txn, idempotency_delete, "inst_a", "message:msg_1", "key-2"), RL_E_NOT_FOUND);
    assert_int_equal(RL_TXN(txn, idempotency_get, "inst_a", "message:msg_1", "key-2", &out), RL_E_NOT_FOUND);
    assert_int_equal(RL_TXN(txn, idempotency_get, "inst_a", "message:msg_1", "key-3", &out), 0);
    assert_int_equal(RL_TXN(txn, idempotency_insert, &b), 0);
    commit_close(txn);
}

/*
 * A session's timeline reads each kind newest first, from a bound (before_at,
 * before_id): created before before_at, or at before_at and before the key.
 */
static void test_timeline_reads_by_time(void **state)
{
    rl_txn_t *txn = open_txn();
    rl_message_row_t m, *messages;
    rl_task_row_t t = {"inst_a", NULL, "ses_1", "int_1", "read", NULL, "created", NULL, 0, 0}, *tasks;
    rl_approval_row_t a = {NULL, "inst_a", "alice", "ses_1", "int_1", "{}",      "pending",
                           NULL, NULL,     NULL,    0,       9000,    RL_NO_TIME},
                      *approvals;
    /* Inserted in this order; two at 2000 (insertion decides), one in another session. */
    static const struct {
        const char *id, *session;
        int64_t at;
    } ms[] = {{"msg_z", "ses_1", 1000},
              {"msg_b", "ses_1", 2000},
              {"msg_a", "ses_1", 2000},
              {"msg_o", "ses_2", 2000},
              {"msg_c", "ses_1", 3000}};
    /* Keys compare bytewise: "B" before "a", whatever the database's collation says. */
    static const char *const keys[] = {"a", "B", "c"};
    size_t count, i;

    parents(txn);
    for (i = 0; i < sizeof(ms) / sizeof(ms[0]); ++i) {
        m = message(ms[i].id, ms[i].session, "x");
        m.created_at = ms[i].at;
        assert_int_equal(RL_TXN(txn, message_insert, &m), 0);
    }
    for (i = 0; i < 3; ++i) {
        t.task_id = keys[i];
        t.created_at = t.updated_at = i < 2 ? 2000 : 1000;
        assert_int_equal(RL_TXN(txn, task_insert, &t), 0);
        a.id = keys[i];
        a.created_at = i < 2 ? 2000 : 1000;
        assert_int_equal(RL_TXN(txn, approval_insert, &a), 0);
    }
    t.task_id = "other";
    t.session_id = "ses_2";
    assert_int_equal(RL_TXN(txn, task_insert, &t), 0);

    assert_int_equal(RL_TXN(txn, messages_by_time, "ses_1", INT64_MAX, NULL, 10, &messages, &count), 0);
    assert_int_equal(count, 4);
    assert_string_equal(messages[0].id, "msg_c");
    assert_string_equal(messages[1].id, "msg_a");
    assert_string_equal(messages[2].id, "msg_b");
    assert_string_equal(messages[3].id, "msg_z");
    assert_string_equal(messages[0].text, "x");
    /* From msg_a on: msg_b (same instant, inserted before), then msg_z. */
    assert_int_equal(RL_TXN(txn, messages_by_time, "ses_1", 2000, "msg_a", 10, &messages, &count), 0);
    assert_int_equal(count, 2);
    assert_string_equal(messages[0].id, "msg_b");
    assert_string_equal(messages[1].id, "msg_z");
    /* No key: nothing at the instant itself. */
    assert_int_equal(RL_TXN(txn, messages_by_time, "ses_1", 2000, NULL, 10, &messages, &count), 0);
    assert_int_equal(count, 1);
    assert_string_equal(messages[0].id, "msg_z");
    assert_int_equal(RL_TXN(txn, messages_by_time, "ses_1", 2001, NULL, 1, &messages, &count), 0);
    assert_int_equal(count, 1);
    assert_string_equal(messages[0].id, "msg_a");

    assert_int_equal(RL_TXN(txn, tasks_by_time, "ses_1", INT64_MAX, NULL, 10, &tasks, &count), 0);
    assert_int_equal(count, 3);
    assert_string_equal(tasks[0].task_id, "a");
    assert_string_equal(tasks[1].task_id, "B");
    assert_string_equal(tasks[2].task_id, "c");
    assert_int_equal(RL_TXN(txn, tasks_by_time, "ses_1", 2000, "a", 10, &tasks, &count), 0);
    assert_int_equal(count, 2);
    assert_string_equal(tasks[0].task_id, "B");
    assert_int_equal(RL_TXN(txn, tasks_by_time, "ses_1", 2000, "B", 10, &tasks, &count), 0);
    assert_int_equal(count, 1);
    assert_string_equal(tasks[0].task_id, "c");
    assert_int_equal(RL_TXN(txn, tasks_by_time, "ses_1", 1000, NULL, 10, &tasks, &count), 0);
    assert_int_equal(count, 0);
    assert_int_equal(RL_TXN(txn, tasks_by_time, "ses_2", INT64_MAX, NULL, 10, &tasks, &count), 0);
    assert_int_equal(count, 1);

    assert_int_equal(RL_TXN(txn, approvals_by_time, "ses_1", INT64_MAX, NULL, 2, &approvals, &count), 0);
    assert_int_equal(count, 2);
    assert_string_equal(approvals[0].id, "a");
    assert_string_equal(approvals[1].id, "B");
    assert_int_equal(RL_TXN(txn, approvals_by_time, "ses_1", 2000, "B", 10, &approvals, &count), 0);
    assert_int_equal(count, 1);
    assert_string_equal(approvals[0].id, "c");
    assert_int_equal(RL_TXN(txn, approvals_by_time, "ses_2", INT64_MAX, NULL, 10, &approvals, &count), 0);
    assert_int_equal(count, 0);
    commit_close(txn);
}

static void test_tasks(void **state)
{
    rl_txn_t *txn = open_txn();
    rl_task_row_t task = {"inst_a", "call_1", "ses_1", "int_1", "exec", NULL, "created", "starting", 1000, 1000};
    rl_task_row_t out;

    task.args = "{\"cmd\":\"ls\"}";
    assert_int_equal(RL_TXN(txn, task_insert, &task), 0);
    assert_int_equal(RL_TXN(txn, task_insert, &task), RL_E_CONFLICT);
    /* Task ids are the installation's: another one may reuse it. */
    task.installation_id = "inst_b";
    task.args = NULL;
    assert_int_equal(RL_TXN(txn, task_insert, &task), 0);
    assert_int_equal(RL_TXN(txn, task_get, "inst_a", "call_1", &out), 0);
    assert_null(out.name);
    assert_string_equal(out.status_label, "starting");
    assert_string_equal(out.args, "{\"cmd\":\"ls\"}");
    assert_null(out.partial_result);
    assert_null(out.result);
    assert_null(out.error);
    out.status = "progressing";
    out.partial_result = "{\"lines\":1}";
    out.updated_at = 1500;
    assert_int_equal(RL_TXN(txn, task_update, &out), 0);
    assert_int_equal(RL_TXN(txn, task_get, "inst_a", "call_1", &out), 0);
    assert_string_equal(out.partial_result, "{\"lines\":1}");
    out.status = "failed";
    out.name = "shell";
    out.status_label = NULL;
    out.result = "\"half\"";
    out.error = "{\"message\":\"exit 2\"}";
    out.updated_at = 2000;
    assert_int_equal(RL_TXN(txn, task_update, &out), 0);
    assert_int_equal(RL_TXN(txn, task_get, "inst_a", "call_1", &out), 0);
    assert_string_equal(out.status, "failed");
    assert_string_equal(out.name, "shell");
    assert_null(out.status_label);
    /* Every JSON column is kept as written, the arguments of the create included. */
    assert_string_equal(out.args, "{\"cmd\":\"ls\"}");
    assert_string_equal(out.partial_result, "{\"lines\":1}");
    assert_string_equal(out.result, "\"half\"");
    assert_string_equal(out.error, "{\"message\":\"exit 2\"}");
    assert_int_equal(out.created_at, 1000);
    assert_int_equal(out.updated_at, 2000);
    assert_int_equal(RL_TXN(txn, task_get, "inst_a", "call_2", &out), RL_E_NOT_FOUND);
    assert_int_equal(RL_TXN(txn, task_get, "inst_b", "call_1", &out), 0);
    assert_null(out.args);
    out.task_id = "call_2";
    assert_int_equal(RL_TXN(txn, task_update, &out), RL_E_NOT_FOUND);
    commit_close(txn);
}

static rl_approval_row_t approval(const char *id, const char *user, int64_t created_at, int64_t expires_at)
{
    return (rl_approval_row_t){id,        "inst_a", user, "ses_1", "int_1",    "{\"action\":\"run\"}",
                               "pending", NULL,     NULL, NULL,    created_at, expires_at,
                               RL_NO_TIME};
}

static rl_capability_row_t capability(const char *id, const char *user, const char *session_id, int64_t created_at,
                                      int64_t expires_at)
{
    return (rl_capability_row_t){
        id,        "inst_a", user,       session_id, "int_1",   "location", "{\"reason\":\"r\"}",
        "pending", NULL,     created_at, expires_at, RL_NO_TIME};
}

/* ours (issue 28): capability requests are kept as approvals are, by the relay's id. */
static void test_capability_requests(void **state)
{
    rl_txn_t *txn = open_txn();
    rl_capability_row_t a = capability("cap_a", "alice", "ses_1", 1000, 9000);
    rl_capability_row_t b = capability("cap_b", "alice", "ses_1", 2000, 5000);
    rl_capability_row_t c = capability("cap_c", "bob", "ses_2", 3000, 4000), out, *rows;
    size_t count;

    (void)state;
    assert_int_equal(RL_TXN(txn, capability_insert, &a), 0);
    assert_int_equal(RL_TXN(txn, capability_insert, &a), RL_E_CONFLICT);
    assert_int_equal(RL_TXN(txn, capability_insert, &b), 0);
    assert_int_equal(RL_TXN(txn, capability_insert, &c), 0);
    assert_int_equal(RL_TXN(txn, capability_get, "cap_a", &out), 0);
    assert_string_equal(out.capability, "location");
    assert_string_equal(out.request, "{\"reason\":\"r\"}");
    assert_string_equal(out.user_id, "alice");
    assert_null(out.answer);
    assert_int_equal(out.answered_at, RL_NO_TIME);
    assert_int_equal(RL_TXN(txn, capability_get, "cap_none", &out), RL_E_NOT_FOUND);
    /* The user's pending ones that expire after `after`, oldest first; never another user's. */
    assert_int_equal(RL_TXN(txn, capabilities_pending_of_user, "alice", 4999, &rows, &count), 0);
    assert_int_equal(count, 2);
    assert_string_equal(rows[0].id, "cap_a");
    assert_string_equal(rows[1].id, "cap_b");
    assert_int_equal(RL_TXN(txn, capabilities_pending_of_user, "alice", 5000, &rows, &count), 0);
    assert_int_equal(count, 1);
    /* Anyone's due ones, soonest first, at most limit. */
    assert_int_equal(RL_TXN(txn, capabilities_due, 5000, 10, &rows, &count), 0);
    assert_int_equal(count, 2);
    assert_string_equal(rows[0].id, "cap_c");
    assert_string_equal(rows[1].id, "cap_b");
    assert_int_equal(RL_TXN(txn, capabilities_due, 5000, 1, &rows, &count), 0);
    assert_int_equal(count, 1);
    out = b;
    out.state = "answered";
    out.answer = "{\"location\":{\"latitude\":1.5}}";
    out.answered_at = 4500;
    assert_int_equal(RL_TXN(txn, capability_update, &out), 0);
    assert_int_equal(RL_TXN(txn, capability_get, "cap_b", &out), 0);
    assert_string_equal(out.state, "answered");
    assert_string_equal(out.answer, "{\"location\":{\"latitude\":1.5}}");
    assert_int_equal(out.answered_at, 4500);
    assert_int_equal(RL_TXN(txn, capabilities_due, 5000, 10, &rows, &count), 0);
    assert_int_equal(count, 1);
    out.id = "cap_none";
    assert_int_equal(RL_TXN(txn, capability_update, &out), RL_E_NOT_FOUND);
    commit_close(txn);
}

static void test_approvals_and_grants(void **state)
{
    rl_txn_t *txn = open_txn();
    rl_approval_row_t a = approval("apr_a", "alice", 1000, 9000), b = approval("apr_b", "alice", 2000, 5000);
    rl_approval_row_t c = approval("apr_c", "bob", 3000, 4000), out, other, *rows;
    rl_grant_row_t g1 = {"inst_a", "run", "tool", "ls", 1000}, g2 = {"inst_a", "run", "all", "", 2000},
                   g3 = {"inst_a", "fetch", "domain", "example.org", 3000}, *grants;
    size_t count;

    assert_int_equal(RL_TXN(txn, approval_insert, &a), 0);
    assert_int_equal(RL_TXN(txn, approval_insert, &a), RL_E_CONFLICT);
    assert_int_equal(RL_TXN(txn, approval_insert, &b), 0);
    assert_int_equal(RL_TXN(txn, approval_insert, &c), 0);
    assert_int_equal(RL_TXN(txn, approval_get, "inst_a", "apr_a", &out), 0);
    assert_string_equal(out.request, "{\"action\":\"run\"}");
    assert_null(out.decision);
    assert_int_equal(out.resolved_at, RL_NO_TIME);
    /* The user's pending approvals that expire after `after`, oldest first. */
    assert_int_equal(RL_TXN(txn, approvals_pending_of_user, "alice", 4999, &rows, &count), 0);
    assert_int_equal(count, 2);
    assert_string_equal(rows[0].id, "apr_a");
    assert_string_equal(rows[1].id, "apr_b");
    assert_int_equal(RL_TXN(txn, approvals_pending_of_user, "alice", 5000, &rows, &count), 0);
    assert_int_equal(count, 1);
    /* Anyone's due ones, soonest first, at most limit. */
    assert_int_equal(RL_TXN(txn, approvals_due, 5000, 10, &rows, &count), 0);
    assert_int_equal(count, 2);
    assert_string_equal(rows[0].id, "apr_c");
    assert_string_equal(rows[1].id, "apr_b");
    assert_int_equal(RL_TXN(txn, approvals_due, 5000, 1, &rows, &count), 0);
    assert_int_equal(count, 1);
    out = b;
    out.state = "resolved";
    out.decision = "approve_always";
    out.scope = "tool";
    out.scope_value = "ls";
    out.resolved_at = 4500;
    assert_int_equal(RL_TXN(txn, approval_update, &out), 0);
    assert_int_equal(RL_TXN(txn, approval_get, "inst_a", "apr_b", &out), 0);
    assert_string_equal(out.decision, "approve_always");
    assert_string_equal(out.scope_value, "ls");
    assert_int_equal(out.resolved_at, 4500);
    assert_int_equal(RL_TXN(txn, approvals_due, 5000, 10, &rows, &count), 0);
    assert_int_equal(count, 1);
    out.id = "apr_none";
    assert_int_equal(RL_TXN(txn, approval_update, &out), RL_E_NOT_FOUND);
    /* An id is unique per installation only: another installation's apr_a is another approval. */
    other = approval("apr_a", "alice", 6000, 9000);
    other.installation_id = "inst_b";
    assert_int_equal(RL_TXN(txn, approval_insert, &other), 0);
    assert_int_equal(RL_TXN(txn, approval_get, "inst_b", "apr_a", &out), 0);
    assert_int_equal(out.created_at, 6000);
    assert_int_equal(RL_TXN(txn, approval_get, "inst_c", "apr_a", &out), RL_E_NOT_FOUND);
    out = other;
    out.state = "resolved";
    out.decision = "deny";
    out.resolved_at = 6500;
    assert_int_equal(RL_TXN(txn, approval_update, &out), 0);
    assert_int_equal(RL_TXN(txn, approval_get, "inst_a", "apr_a", &out), 0);
    assert_string_equal(out.state, "pending");
    assert_int_equal(RL_TXN(txn, approvals_of_user_by_id, "alice", "apr_a", &rows, &count), 0);
    assert_int_equal(count, 2);
    assert_string_equal(rows[0].installation_id, "inst_a");
    assert_string_equal(rows[1].installation_id, "inst_b");
    assert_string_equal(rows[1].state, "resolved");
    assert_int_equal(RL_TXN(txn, approvals_of_user_by_id, "bob", "apr_a", &rows, &count), 0);
    assert_int_equal(count, 0);
    assert_int_equal(RL_TXN(txn, grant_insert_ignore, &g1), 0);
    assert_int_equal(RL_TXN(txn, grant_insert_ignore, &g1), 0);
    assert_int_equal(RL_TXN(txn, grant_insert_ignore, &g2), 0);
    assert_int_equal(RL_TXN(txn, grant_insert_ignore, &g3), 0);
    assert_int_equal(RL_TXN(txn, grants_of, "inst_a", "run", &grants, &count), 0);
    assert_int_equal(count, 2);
    assert_string_equal(grants[0].scope, "tool");
    assert_string_equal(grants[1].scope, "all");
    assert_int_equal(RL_TXN(txn, grants_of, "inst_b", "run", &grants, &count), 0);
    assert_int_equal(count, 0);
    /* Every grant of an installation, by created_at; a delete by the four keys. */
    assert_int_equal(RL_TXN(txn, grants_of_installation, "inst_a", &grants, &count), 0);
    assert_int_equal(count, 3);
    assert_string_equal(grants[0].scope_value, "ls");
    assert_string_equal(grants[2].action, "fetch");
    assert_int_equal(grants[2].created_at, 3000);
    assert_int_equal(RL_TXN(txn, grant_delete, &g2), 0);
    assert_int_equal(RL_TXN(txn, grant_delete, &g2), RL_E_NOT_FOUND);
    assert_int_equal(RL_TXN(txn, grants_of_installation, "inst_a", &grants, &count), 0);
    assert_int_equal(count, 2);
    assert_int_equal(RL_TXN(txn, grants_of_installation, "inst_b", &grants, &count), 0);
    assert_int_equal(count, 0);
    commit_close(txn);
}

/* issue 26: devices, confirmations, wrapped keys and agent files; a session's encrypted flag and model. */
static void test_end_to_end_encryption(void **state)
{
    rl_txn_t *txn = open_txn();
    rl_user_row_t alice = {"alice", 1};
    rl_installation_row_t inst = installation("inst_a", "alice", 1000), inst_out;
    rl_session_row_t s = session("ses_e", "alice", 2000), s_out;
    rl_device_row_t bridge = {"dev_b", "alice", "inst_a", "bridge", "laptop", "aa", 1000, RL_NO_TIME};
    rl_device_row_t phone = {"dev_p", "alice", NULL, "web", "phone", "bb", 2000, RL_NO_TIME}, out, *devices;
    rl_recipient_row_t wrap = {"ses_e", "dev_p", "wrap1", "dev_b", 3000}, *wraps;
    rl_agent_file_row_t file = {"ses_e", "idx1", "read", "text/plain", "pct", "dct", 12, 4000}, *files;
    rl_pairing_row_t pairing = {"poll_e",  "code_e", "inst_z", "openclaw", "host",
                                "pending", NULL,     1000,     9000,       RL_NO_TIME},
                     pairing_out;
    size_t count;

    (void)state;
    assert_int_equal(RL_TXN(txn, user_insert_ignore, &alice), 0);
    inst.bridge_version = "0.13.7";
    assert_int_equal(RL_TXN(txn, installation_insert, &inst), 0);
    assert_int_equal(RL_TXN(txn, installation_get, "inst_a", &inst_out), 0);
    assert_string_equal(inst_out.bridge_version, "0.13.7");
    inst_out.bridge_version = "0.14.0";
    assert_int_equal(RL_TXN(txn, installation_update, &inst_out), 0);
    assert_int_equal(RL_TXN(txn, installation_get, "inst_a", &inst_out), 0);
    assert_string_equal(inst_out.bridge_version, "0.14.0");

    s.encrypted = 1;
    assert_int_equal(RL_TXN(txn, session_insert, &s), 0);
    assert_int_equal(RL_TXN(txn, session_get, "ses_e", &s_out), 0);
    assert_int_equal(s_out.encrypted, 1);
    assert_null(s_out.model);
    s_out.model = "gpt-5";
    assert_int_equal(RL_TXN(txn, session_update, &s_out), 0);
    assert_int_equal(RL_TXN(txn, session_get, "ses_e", &s_out), 0);
    assert_string_equal(s_out.model, "gpt-5");
    assert_int_equal(s_out.encrypted, 1);
    /* issue 36: agent, project and resume are kept from the start; agent_state is what updates change. */
    assert_null(s_out.agent);
    assert_null(s_out.agent_state);
    s.id = "ses_a";
    s.agent = "codex";
    s.project = "{\"id\":\"p_1\"}";
    s.resume = "0199-a";
    assert_int_equal(RL_TXN(txn, session_insert, &s), 0);
    assert_int_equal(RL_TXN(txn, session_get, "ses_a", &s_out), 0);
    assert_string_equal(s_out.agent, "codex");
    assert_string_equal(s_out.project, "{\"id\":\"p_1\"}");
    assert_string_equal(s_out.resume, "0199-a");
    s_out.agent_state = "{\"state\":\"ready\"}";
    s_out.agent = "claude"; /* not written by an update */
    assert_int_equal(RL_TXN(txn, session_update, &s_out), 0);
    assert_int_equal(RL_TXN(txn, session_get, "ses_a", &s_out), 0);
    assert_string_equal(s_out.agent_state, "{\"state\":\"ready\"}");
    assert_string_equal(s_out.agent, "codex");
    assert_string_equal(s_out.resume, "0199-a");

    assert_int_equal(RL_TXN(txn, device_insert, &bridge), 0);
    assert_int_equal(RL_TXN(txn, device_insert, &phone), 0);
    assert_int_equal(RL_TXN(txn, device_insert, &phone), RL_E_CONFLICT);
    assert_int_equal(RL_TXN(txn, devices_of_user, "alice", &devices, &count), 0);
    assert_int_equal(count, 2);
    assert_string_equal(devices[0].id, "dev_b");
    assert_string_equal(devices[0].installation_id, "inst_a");
    assert_null(devices[1].installation_id);
    assert_int_equal(devices[1].revoked_at, RL_NO_TIME);

    assert_int_equal(RL_TXN(txn, confirmation_get, "dev_p", "dev_b"), RL_E_NOT_FOUND);
    assert_int_equal(RL_TXN(txn, confirmation_put, "dev_p", "dev_b", 2500), 0);
    assert_int_equal(RL_TXN(txn, confirmation_put, "dev_p", "dev_b", 2600), 0);
    assert_int_equal(RL_TXN(txn, confirmation_get, "dev_p", "dev_b"), 0);

    assert_int_equal(RL_TXN(txn, recipient_get, wrap.session_id, "dev_p"), RL_E_NOT_FOUND);
    assert_int_equal(RL_TXN(txn, recipient_put, &wrap), 0);
    assert_int_equal(RL_TXN(txn, recipient_get, wrap.session_id, "dev_p"), 0);
    assert_int_equal(RL_TXN(txn, recipient_get, wrap.session_id, "dev_b"), RL_E_NOT_FOUND);
    wrap.wrapped_session_key = "wrap2";
    wrap.created_at = 3500;
    assert_int_equal(RL_TXN(txn, recipient_put, &wrap), 0);
    assert_int_equal(RL_TXN(txn, recipients_of_device, "dev_p", 0, &wraps, &count), 0);
    assert_int_equal(count, 1);
    assert_string_equal(wraps[0].wrapped_session_key, "wrap2");
    assert_string_equal(wraps[0].wrapped_by_device_id, "dev_b");
    assert_null(wraps[0].grant_sig);
    /* A signed grant keeps its signature for the keys route; a later unsigned one does not inherit it. */
    wrap.grant_sig = "c2lnbmVk";
    wrap.created_at = 3600;
    assert_int_equal(RL_TXN(txn, recipient_put, &wrap), 0);
    assert_int_equal(RL_TXN(txn, recipients_of_device, "dev_p", 0, &wraps, &count), 0);
    assert_int_equal(count, 1);
    assert_string_equal(wraps[0].grant_sig, "c2lnbmVk");
    wrap.grant_sig = NULL;
    wrap.created_at = 3500;
    assert_int_equal(RL_TXN(txn, recipient_put, &wrap), 0);
    assert_int_equal(RL_TXN(txn, recipients_of_device, "dev_p", 0, &wraps, &count), 0);
    assert_null(wraps[0].grant_sig);
    assert_int_equal(RL_TXN(txn, recipients_of_device, "dev_p", 3501, &wraps, &count), 0);
    assert_int_equal(count, 0);

    assert_int_equal(RL_TXN(txn, agent_file_put, &file), 0);
    file.tool = "edit";
    file.size_bytes = RL_NO_TIME;
    assert_int_equal(RL_TXN(txn, agent_file_put, &file), 0);
    assert_int_equal(RL_TXN(txn, agent_files_of_session, "ses_e", &files, &count), 0);
    assert_int_equal(count, 1);
    assert_string_equal(files[0].tool, "edit");
    assert_string_equal(files[0].path_ct, "pct");
    assert_int_equal(files[0].size_bytes, RL_NO_TIME);

    /* Revoking leaves no confirmation and no wrap behind. */
    phone.revoked_at = 5000;
    assert_int_equal(RL_TXN(txn, device_update, &phone), 0);
    assert_int_equal(RL_TXN(txn, confirmations_delete, "dev_p"), 0);
    assert_int_equal(RL_TXN(txn, recipients_delete, "dev_p"), 0);
    assert_int_equal(RL_TXN(txn, confirmation_get, "dev_p", "dev_b"), RL_E_NOT_FOUND);
    assert_int_equal(RL_TXN(txn, recipients_of_device, "dev_p", 0, &wraps, &count), 0);
    assert_int_equal(count, 0);
    assert_int_equal(RL_TXN(txn, devices_of_user, "alice", &devices, &count), 0);
    assert_int_equal(count, 1);
    assert_int_equal(RL_TXN(txn, device_get, "dev_p", &out), 0);
    assert_int_equal(out.revoked_at, 5000);
    assert_int_equal(RL_TXN(txn, device_get, "dev_none", &out), RL_E_NOT_FOUND);

    /* A pairing is found by its code whatever its state. */
    assert_int_equal(RL_TXN(txn, pairing_insert, &pairing), 0);
    pairing.state = "delivered";
    assert_int_equal(RL_TXN(txn, pairing_update, &pairing), 0);
    assert_int_equal(RL_TXN(txn, pairing_by_code, "code_e", &pairing_out), RL_E_NOT_FOUND);
    assert_int_equal(RL_TXN(txn, pairing_by_code_any, "code_e", &pairing_out), 0);
    assert_string_equal(pairing_out.state, "delivered");
    assert_int_equal(RL_TXN(txn, pairing_by_code_any, "code_none", &pairing_out), RL_E_NOT_FOUND);
    commit_close(txn);
}

static void test_login_codes(void **state)
{
    rl_txn_t *txn = open_txn();
    rl_login_code_row_t a = {"hash_a", "alice", 1000, 5000}, b = {"hash_b", "bob", 1000, 9000}, out;

    assert_int_equal(RL_TXN(txn, login_code_insert, &a), 0);
    assert_int_equal(RL_TXN(txn, login_code_insert, &a), RL_E_CONFLICT);
    assert_int_equal(RL_TXN(txn, login_code_insert, &b), 0);
    assert_int_equal(RL_TXN(txn, login_code_get, "hash_a", &out), 0);
    assert_string_equal(out.user_id, "alice");
    assert_int_equal(out.created_at, 1000);
    assert_int_equal(out.expires_at, 5000);
    assert_int_equal(RL_TXN(txn, login_code_get, "hash_none", &out), RL_E_NOT_FOUND);
    assert_int_equal(RL_TXN(txn, login_code_delete, "hash_a"), 0);
    assert_int_equal(RL_TXN(txn, login_code_delete, "hash_a"), RL_E_NOT_FOUND);
    /* The purge drops codes that expired before the given time. */
    assert_int_equal(RL_TXN(txn, login_code_insert, &a), 0);
    assert_int_equal(RL_TXN(txn, login_codes_purge, 6000), 0);
    assert_int_equal(RL_TXN(txn, login_code_get, "hash_a", &out), RL_E_NOT_FOUND);
    assert_int_equal(RL_TXN(txn, login_code_get, "hash_b", &out), 0);
    commit_close(txn);
}

static void test_push_subscriptions(void **state)
{
    rl_txn_t *txn = open_txn();
    rl_push_subscription_row_t a = {"https://push.example/a", "alice", "key_a", "auth_a", 2000};
    rl_push_subscription_row_t b = {"https://push.example/b", "alice", "key_b", "auth_b", 1000};
    rl_push_subscription_row_t c = {"https://push.example/c", "bob", "key_c", "auth_c", 500}, out, *rows;
    size_t count;

    users(txn);
    assert_int_equal(RL_TXN(txn, push_subscription_insert, &a), 0);
    assert_int_equal(RL_TXN(txn, push_subscription_insert, &a), RL_E_CONFLICT);
    assert_int_equal(RL_TXN(txn, push_subscription_insert, &b), 0);
    assert_int_equal(RL_TXN(txn, push_subscription_insert, &c), 0);
    assert_int_equal(RL_TXN(txn, push_subscription_get, "https://push.example/a", &out), 0);
    assert_string_equal(out.user_id, "alice");
    assert_string_equal(out.p256dh, "key_a");
    assert_string_equal(out.auth, "auth_a");
    assert_int_equal(out.created_at, 2000);
    assert_int_equal(RL_TXN(txn, push_subscription_get, "https://push.example/none", &out), RL_E_NOT_FOUND);
    /* The user's subscriptions, oldest first. */
    assert_int_equal(RL_TXN(txn, push_subscriptions_of_user, "alice", &rows, &count), 0);
    assert_int_equal(count, 2);
    assert_string_equal(rows[0].endpoint, "https://push.example/b");
    assert_string_equal(rows[1].endpoint, "https://push.example/a");
    assert_int_equal(RL_TXN(txn, push_subscription_delete, "https://push.example/b"), 0);
    assert_int_equal(RL_TXN(txn, push_subscription_delete, "https://push.example/b"), RL_E_NOT_FOUND);
    assert_int_equal(RL_TXN(txn, push_subscriptions_of_user, "alice", &rows, &count), 0);
    assert_int_equal(count, 1);
    assert_int_equal(RL_TXN(txn, push_subscriptions_of_user, "carol", &rows, &count), 0);
    assert_int_equal(count, 0);
    commit_close(txn);
}

static void test_the_update_queue(void **state)
{
    rl_txn_t *txn = open_txn();
    rl_installation_row_t a = installation("inst_a", "alice", 1), b = installation("inst_b", "alice", 1);
    rl_update_row_t row = {"inst_a", 0, "session.message", "ses_1", "int_1", "{\"n\":1}", 1000}, *rows;
    size_t count;
    int i;

    users(txn);
    assert_int_equal(RL_TXN(txn, installation_insert, &a), 0);
    assert_int_equal(RL_TXN(txn, installation_insert, &b), 0);
    /* Ids count up per installation, from 1. */
    for (i = 1; i <= 3; ++i) {
        row.created_at = 1000 * i;
        assert_int_equal(RL_TXN(txn, update_append, &row), 0);
        assert_int_equal(row.update_id, i);
    }
    row.installation_id = "inst_b";
    row.session_id = NULL;
    row.interaction_id = NULL;
    assert_int_equal(RL_TXN(txn, update_append, &row), 0);
    assert_int_equal(row.update_id, 1);
    row.installation_id = "inst_none";
    assert_int_equal(RL_TXN(txn, update_append, &row), RL_E_NOT_FOUND);
    assert_int_equal(RL_TXN(txn, updates_after, "inst_a", 1, 0, 10, &rows, &count), 0);
    assert_int_equal(count, 2);
    assert_int_equal(rows[0].update_id, 2);
    assert_string_equal(rows[0].payload, "{\"n\":1}");
    assert_string_equal(rows[0].interaction_id, "int_1");
    assert_int_equal(RL_TXN(txn, updates_after, "inst_a", 0, 2000, 10, &rows, &count), 0);
    assert_int_equal(count, 2);
    assert_int_equal(RL_TXN(txn, updates_after, "inst_a", 0, 0, 1, &rows, &count), 0);
    assert_int_equal(count, 1);
    assert_int_equal(RL_TXN(txn, updates_after, "inst_b", 0, 0, 10, &rows, &count), 0);
    assert_int_equal(count, 1);
    assert_null(rows[0].session_id);
    assert_int_equal(RL_TXN(txn, updates_ack, "inst_a", 2), 0);
    assert_int_equal(RL_TXN(txn, updates_after, "inst_a", 0, 0, 10, &rows, &count), 0);
    assert_int_equal(count, 1);
    assert_int_equal(rows[0].update_id, 3);
    /* Acknowledged ids are never issued again. */
    row.installation_id = "inst_a";
    assert_int_equal(RL_TXN(txn, update_append, &row), 0);
    assert_int_equal(row.update_id, 4);
    assert_int_equal(RL_TXN(txn, updates_purge, 3001), 0);
    assert_int_equal(RL_TXN(txn, updates_after, "inst_a", 0, 0, 10, &rows, &count), 0);
    assert_int_equal(count, 0);
    commit_close(txn);
}

static rl_attachment_row_t attachment(const char *key, const char *user, int64_t size, int64_t created_at)
{
    return (rl_attachment_row_t){key, user, "image/png", NULL, size, created_at, RL_NO_TIME, RL_NO_TIME};
}

static void test_attachments(void **state)
{
    rl_txn_t *txn = open_txn();
    rl_attachment_row_t a = attachment("att_1", "alice", 1234, 1000), out;

    assert_int_equal(RL_TXN(txn, attachment_insert, &a), 0);
    assert_int_equal(RL_TXN(txn, attachment_insert, &a), RL_E_CONFLICT);
    assert_int_equal(RL_TXN(txn, attachment_get, "att_1", &out), 0);
    assert_string_equal(out.user_id, "alice");
    assert_string_equal(out.mime, "image/png");
    assert_null(out.name);
    assert_int_equal(out.size, 1234);
    assert_int_equal(out.used_at, RL_NO_TIME);
    assert_int_equal(out.doomed_at, RL_NO_TIME);
    assert_int_equal(RL_TXN(txn, attachment_get, "att_2", &out), RL_E_NOT_FOUND);
    commit_close(txn);
}

static void test_attachment_lifetimes(void **state)
{
    rl_txn_t *txn = open_txn();
    rl_installation_row_t inst = installation("inst_a", "alice", 1000);
    rl_session_row_t s1 = session("ses_1", "alice", 1000), s2 = session("ses_2", "alice", 1000);
    rl_attachment_row_t used = attachment("att_used", "alice", 100, 1000),
                        twice = attachment("att_twice", "alice", 200, 1100),
                        fresh = attachment("att_fresh", "alice", 400, 5000),
                        old = attachment("att_old", "alice", 800, 1200), theirs = attachment("att_bob", "bob", 7, 1000),
                        *rows, out;
    int64_t bytes = -1, purged = 0;
    size_t count;

    users(txn);
    assert_int_equal(RL_TXN(txn, installation_insert, &inst), 0);
    assert_int_equal(RL_TXN(txn, session_insert, &s1), 0);
    assert_int_equal(RL_TXN(txn, session_insert, &s2), 0);
    assert_int_equal(RL_TXN(txn, attachment_insert, &used), 0);
    assert_int_equal(RL_TXN(txn, attachment_insert, &twice), 0);
    assert_int_equal(RL_TXN(txn, attachment_insert, &fresh), 0);
    assert_int_equal(RL_TXN(txn, attachment_insert, &old), 0);
    assert_int_equal(RL_TXN(txn, attachment_insert, &theirs), 0);
    /* A use is kept once, and the first one dates the attachment's use. */
    assert_int_equal(RL_TXN(txn, attachment_use, "att_used", "ses_1", 2000), 0);
    assert_int_equal(RL_TXN(txn, attachment_use, "att_used", "ses_1", 2500), 0);
    assert_int_equal(RL_TXN(txn, attachment_use, "att_twice", "ses_1", 2100), 0);
    assert_int_equal(RL_TXN(txn, attachment_use, "att_twice", "ses_2", 2200), 0);
    assert_int_equal(RL_TXN(txn, attachment_get, "att_used", &out), 0);
    assert_int_equal(out.used_at, 2000);
    assert_int_equal(RL_TXN(txn, attachment_get, "att_twice", &out), 0);
    assert_int_equal(out.used_at, 2100);
    assert_int_equal(RL_TXN(txn, attachments_usage, "alice", &bytes), 0);
    assert_int_equal(bytes, 1500);
    assert_int_equal(RL_TXN(txn, attachments_usage, "carol", &bytes), 0);
    assert_int_equal(bytes, 0);
    /* Nothing used is unreferenced while its sessions live; unused ones count from their creation. */
    assert_int_equal(RL_TXN(txn, attachments_unreferenced, 1000, 10, &rows, &count), 0);
    assert_int_equal(count, 0);
    assert_int_equal(RL_TXN(txn, attachments_unreferenced, 5001, 10, &rows, &count), 0);
    assert_int_equal(count, 3);
    assert_string_equal(rows[0].key, "att_bob");
    assert_string_equal(rows[1].key, "att_old");
    assert_string_equal(rows[2].key, "att_fresh");
    /* A purged session takes its uses: what only it used is unreferenced now, however young. */
    s1.deleted_at = 3000;
    assert_int_equal(RL_TXN(txn, session_update, &s1), 0);
    assert_int_equal(RL_TXN(txn, sessions_purge, 3000, &purged), 0);
    assert_int_equal(purged, 1);
    assert_int_equal(RL_TXN(txn, attachments_unreferenced, 0, 10, &rows, &count), 0);
    assert_int_equal(count, 1);
    assert_string_equal(rows[0].key, "att_used");
    assert_int_equal(RL_TXN(txn, attachments_unreferenced, 1201, 1, &rows, &count), 0);
    assert_int_equal(count, 1);
    /* Doomed: out of the usage and of the unreferenced, listed until deleted. */
    assert_int_equal(RL_TXN(txn, attachment_doom, "att_used", 6000), 0);
    assert_int_equal(RL_TXN(txn, attachment_doom, "att_used", 6001), RL_E_NOT_FOUND);
    assert_int_equal(RL_TXN(txn, attachment_doom, "att_old", 6002), 0);
    assert_int_equal(RL_TXN(txn, attachment_doom, "att_none", 6002), RL_E_NOT_FOUND);
    assert_int_equal(RL_TXN(txn, attachments_usage, "alice", &bytes), 0);
    assert_int_equal(bytes, 600);
    assert_int_equal(RL_TXN(txn, attachments_unreferenced, 5001, 10, &rows, &count), 0);
    assert_int_equal(count, 2);
    assert_int_equal(RL_TXN(txn, attachments_doomed, 10, &rows, &count), 0);
    assert_int_equal(count, 2);
    assert_string_equal(rows[0].key, "att_used");
    assert_int_equal(rows[0].doomed_at, 6000);
    assert_string_equal(rows[1].key, "att_old");
    assert_int_equal(RL_TXN(txn, attachments_doomed, 1, &rows, &count), 0);
    assert_int_equal(count, 1);
    /* Only a doomed attachment is deleted. */
    assert_int_equal(RL_TXN(txn, attachment_delete, "att_twice"), RL_E_NOT_FOUND);
    assert_int_equal(RL_TXN(txn, attachment_delete, "att_used"), 0);
    assert_int_equal(RL_TXN(txn, attachment_delete, "att_used"), RL_E_NOT_FOUND);
    assert_int_equal(RL_TXN(txn, attachment_get, "att_used", &out), RL_E_NOT_FOUND);
    assert_int_equal(RL_TXN(txn, attachment_get, "att_twice", &out), 0);
    assert_int_equal(RL_TXN(txn, attachments_doomed, 10, &rows, &count), 0);
    assert_int_equal(count, 1);
    commit_close(txn);
}

static void test_secrets(void **state)
{
    rl_txn_t *txn = open_txn();
    const char *value = NULL;

    assert_int_equal(RL_TXN(txn, secret_get, "issuer.key", &value), RL_E_NOT_FOUND);
    assert_int_equal(RL_TXN(txn, secret_insert_ignore, "issuer.key", "first", 1000), 0);
    /* The first value stays: every node ends up with the one that won. */
    assert_int_equal(RL_TXN(txn, secret_insert_ignore, "issuer.key", "second", 2000), 0);
    assert_int_equal(RL_TXN(txn, secret_get, "issuer.key", &value), 0);
    assert_string_equal(value, "first");
    commit_close(txn);
}

/* ---- transactions -------------------------------------------------------------------------------- */

static void test_a_savepoint_undoes_only_its_own_writes(void **state)
{
    rl_txn_t *txn = open_txn();
    rl_user_row_t a = {"a", 1}, b = {"b", 2}, out;

    assert_int_equal(rl_txn_savepoint(txn), 0);
    assert_int_equal(RL_TXN(txn, user_insert_ignore, &a), 0);
    rl_txn_release(txn, 1);
    assert_int_equal(rl_txn_savepoint(txn), 0);
    assert_int_equal(RL_TXN(txn, user_insert_ignore, &b), 0);
    assert_int_equal(RL_TXN(txn, user_get, "b", &out), 0);
    rl_txn_release(txn, 0);
    assert_int_equal(RL_TXN(txn, user_get, "b", &out), RL_E_NOT_FOUND);
    commit_close(txn);
    txn = open_txn();
    assert_int_equal(RL_TXN(txn, user_get, "a", &out), 0);
    assert_int_equal(RL_TXN(txn, user_get, "b", &out), RL_E_NOT_FOUND);
    commit_close(txn);
}

static void test_a_rollback_undoes_the_transaction(void **state)
{
    rl_txn_t *txn = open_txn();
    rl_user_row_t a = {"a", 1}, out;

    assert_int_equal(RL_TXN(txn, user_insert_ignore, &a), 0);
    rl_txn_rollback(txn);
    rl_txn_close(txn);
    txn = open_txn();
    assert_int_equal(RL_TXN(txn, user_get, "a", &out), RL_E_NOT_FOUND);
    commit_close(txn);
}

/* What a killed process committed is there after it; what it had not committed is not. */
static void test_a_commit_survives_kill_9(void **state)
{
    rl_txn_t *txn;
    rl_user_row_t out;
    pid_t child = fork();
    int status;

    assert_true(child >= 0);
    if (child == 0) {
        rl_user_row_t kept = {"kept", 1}, lost = {"lost", 2};
        txn = open_txn();
        if (RL_TXN(txn, user_insert_ignore, &kept) != 0 || rl_txn_commit(txn) != 0 || rl_txn_begin(txn) != 0 ||
            RL_TXN(txn, user_insert_ignore, &lost) != 0)
            _exit(1);
        raise(SIGKILL);
        _exit(2);
    }
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    txn = open_txn();
    assert_int_equal(RL_TXN(txn, user_get, "kept", &out), 0);
    assert_int_equal(RL_TXN(txn, user_get, "lost", &out), RL_E_NOT_FOUND);
    commit_close(txn);
}

static void test_rows_read_stay_valid_in_the_arena(void **state)
{
    rl_txn_t *txn = open_txn();
    rl_user_row_t a = {"first", 1}, b = {"second", 2}, out_a, out_b;

    assert_int_equal(RL_TXN(txn, user_insert_ignore, &a), 0);
    assert_int_equal(RL_TXN(txn, user_insert_ignore, &b), 0);
    assert_int_equal(RL_TXN(txn, user_get, "first", &out_a), 0);
    assert_int_equal(RL_TXN(txn, user_get, "second", &out_b), 0);
    assert_string_equal(out_a.id, "first");
    assert_string_equal(out_b.id, "second");
    commit_close(txn);
    /* And reopening runs no migration twice: the rows are still there. */
    txn = open_txn();
    assert_int_equal(RL_TXN(txn, user_get, "second", &out_b), 0);
    commit_close(txn);
}

/* A statement that fails (a row whose parent is missing) is undone with its savepoint; the transaction goes on. */
static void test_a_failed_statement_is_undone_by_its_savepoint(void **state)
{
    rl_txn_t *txn = open_txn();
    rl_session_row_t orphan = session("ses_x", "nobody", 1000), out_session;
    rl_user_row_t a = {"a", 1}, b = {"b", 2}, out;

    assert_int_equal(RL_TXN(txn, user_insert_ignore, &a), 0);
    assert_int_equal(rl_txn_savepoint(txn), 0);
    assert_int_equal(RL_TXN(txn, user_insert_ignore, &b), 0);
    assert_int_equal(RL_TXN(txn, session_insert, &orphan), RL_E_CONFLICT);
    rl_txn_release(txn, 0);
    assert_int_equal(RL_TXN(txn, user_get, "a", &out), 0);
    assert_int_equal(RL_TXN(txn, user_get, "b", &out), RL_E_NOT_FOUND);
    commit_close(txn);
    txn = open_txn();
    assert_int_equal(RL_TXN(txn, user_get, "a", &out), 0);
    assert_int_equal(RL_TXN(txn, session_get, "ses_x", &out_session), RL_E_NOT_FOUND);
    commit_close(txn);
}

/*
 * Two connections on one store, as two relayd nodes on one database: a
 * writing operation of the second, on a row the first has written and not
 * yet committed, waits for that commit and then sees it (SQLite: its begin
 * waits for the write lock; a concurrent backend: its locking read waits
 * for the row).
 */
struct racer {
    pthread_t thread;
    int (*act)(rl_txn_t *txn, struct racer *r);
    int result;
    int finished; /* atomic */
    char seen[64];
    int64_t update_id;
};

static void *racer_main(void *p)
{
    struct racer *r = p;
    rl_arena_t own = {NULL};
    rl_txn_t *txn = NULL;

    r->result = rl_store__backend_open(location, &txn);
    if (r->result == 0) {
        txn->arena = &own;
        txn->writing = 1;
        r->result = rl_txn_begin(txn);
        if (r->result == 0)
            r->result = r->act(txn, r);
        if (r->result == 0)
            r->result = rl_txn_commit(txn);
        else
            rl_txn_rollback(txn);
        rl_txn_close(txn);
    }
    rl_arena_free(&own);
    __atomic_store_n(&r->finished, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

static int read_state(rl_txn_t *txn, struct racer *r)
{
    rl_installation_row_t row;
    int result = RL_TXN(txn, installation_get, "inst_a", &row);

    if (result == 0)
        snprintf(r->seen, sizeof(r->seen), "%s", row.state);
    return result;
}

static int check_key(rl_txn_t *txn, struct racer *r)
{
    rl_idempotency_row_t row;
    int result = RL_TXN(txn, idempotency_get, "inst_a", "message:msg_1", "key-1", &row);

    if (result == 0)
        snprintf(r->seen, sizeof(r->seen), "%s", row.response);
    return result;
}

static int append_update(rl_txn_t *txn, struct racer *r)
{
    rl_update_row_t row = {"inst_a", 0, "session.message", NULL, NULL, "{}", 1000};
    int result = RL_TXN(txn, update_append, &row);

    r->update_id = row.update_id;
    return result;
}

/* Backends that run transactions side by side (PostgreSQL): how many sessions of the database wait for a lock now. */
typedef struct {
    int64_t value;
} count_t;
#define COUNT_ROW(F, N, T) F(T, value, value, INT)
RL_ROW_DESCRIBE(count_row, count_t, COUNT_ROW);

static int64_t lock_waiters(rl_txn_t *holder)
{
    static const rl_sql_t sql = {"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                                 "AND datname = current_database()"};
    /* The statistics views are read once per transaction unless told to read again. */
    static const rl_sql_t fresh = {"SELECT count(*) FROM (SELECT pg_stat_clear_snapshot()) AS cleared"};
    count_t out = {0};

    assert_int_equal(rl_sql__get(holder, &fresh, &count_row, &out, NULL, 0), 0);
    assert_int_equal(rl_sql__get(holder, &sql, &count_row, &out, NULL, 0), 0);
    return out.value;
}

/*
 * Starts r on a second connection and waits until it is held by the lock of holder's open transaction (the
 * event: SQLite's busy handler called, or a PostgreSQL session waiting on a lock), then checks that it has
 * not gone on. No fixed wait: a slow machine waits longer for the event, a fast one does not wait at all.
 */
static void race(struct racer *r, rl_txn_t *holder)
{
    int sqlite = strncmp(location, "sqlite:", 7) == 0;
    uint64_t before = rl_store_sqlite_lock_waits();
    int64_t deadline = rl_clock_mono_ms() + 30000;

    assert_int_equal(pthread_create(&r->thread, NULL, racer_main, r), 0);
    while (sqlite ? rl_store_sqlite_lock_waits() == before : lock_waiters(holder) == 0) {
        assert_false(__atomic_load_n(&r->finished, __ATOMIC_SEQ_CST));
        assert_true(rl_clock_mono_ms() < deadline);
        poll(NULL, 0, 2);
    }
    assert_false(__atomic_load_n(&r->finished, __ATOMIC_SEQ_CST));
}

static rl_txn_t *one_installation(void)
{
    rl_txn_t *txn = open_txn();
    rl_installation_row_t inst = installation("inst_a", "alice", 1000);

    users(txn);
    assert_int_equal(RL_TXN(txn, installation_insert, &inst), 0);
    assert_int_equal(rl_txn_commit(txn), 0);
    assert_int_equal(rl_txn_begin(txn), 0);
    return txn;
}

static void test_a_written_row_waits_for_the_writers_commit(void **state)
{
    rl_txn_t *txn = one_installation();
    struct racer r = {.act = read_state};
    rl_installation_row_t row;

    assert_int_equal(RL_TXN(txn, installation_get, "inst_a", &row), 0);
    row.state = "revoked";
    row.revoked_at = 2000;
    assert_int_equal(RL_TXN(txn, installation_update, &row), 0);
    race(&r, txn);
    commit_close(txn);
    assert_int_equal(pthread_join(r.thread, NULL), 0);
    assert_int_equal(r.result, 0);
    assert_string_equal(r.seen, "revoked");
}

/*
 * A retried request on two nodes: each checks its key, then records it. A
 * key checked in a writing operation, recorded or not, holds until the
 * commit: the second waits for the first's record and replays it.
 */
static void test_a_key_being_recorded_waits_for_its_commit(void **state)
{
    rl_txn_t *txn = open_txn();
    rl_idempotency_row_t record = {"inst_a", "message:msg_1", "key-1", "hash-1", "{\"message_id\":\"msg_1\"}", 1000};
    rl_idempotency_row_t out;
    struct racer r = {.act = check_key};

    assert_int_equal(RL_TXN(txn, idempotency_get, "inst_a", "message:msg_1", "key-1", &out), RL_E_NOT_FOUND);
    assert_int_equal(RL_TXN(txn, idempotency_insert, &record), 0);
    race(&r, txn);
    commit_close(txn);
    assert_int_equal(pthread_join(r.thread, NULL), 0);
    assert_int_equal(r.result, 0);
    assert_string_equal(r.seen, record.response);
}

static void test_update_ids_count_up_across_connections(void **state)
{
    rl_txn_t *txn = one_installation();
    struct racer r = {.act = append_update};
    rl_update_row_t row = {"inst_a", 0, "session.message", NULL, NULL, "{}", 1000};

    assert_int_equal(RL_TXN(txn, update_append, &row), 0);
    assert_int_equal(row.update_id, 1);
    race(&r, txn);
    commit_close(txn);
    assert_int_equal(pthread_join(r.thread, NULL), 0);
    assert_int_equal(r.result, 0);
    assert_int_equal(r.update_id, 2);
}

/* ---- the worker ---------------------------------------------------------------------------------- */

struct log {
    int seen[256];
    int results[256];
    int found[256];
    int count;
    pthread_t thread;
    int wrong_thread;
};

struct test_op {
    rl_store_op_t base;
    const char *user;  /* inserts this user... */
    const char *check; /* ...or reads this one */
    int fail;          /* then fails */
    int found;
    int index;
    struct log *log;
};

static int test_op_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct test_op *op = (void *)base;
    rl_user_row_t row = {op->user, op->index};
    int result = 0;

    if (op->user != NULL)
        result = RL_TXN(txn, user_insert_ignore, &row);
    if (op->check != NULL) {
        result = RL_TXN(txn, user_get, op->check, &row);
        op->found = result == 0;
        result = result == RL_E_NOT_FOUND ? 0 : result;
    }
    return op->fail ? RL_E_INTERNAL : result;
}

static const rl_store_op_type_t write_type = {"test_write", 1, test_op_run, NULL};
static const rl_store_op_type_t read_type = {"test_read", 0, test_op_run, NULL};

static void test_op_done(rl_store_op_t *base)
{
    struct test_op *op = (void *)base;
    struct log *log = op->log;

    log->seen[log->count] = op->index;
    log->results[log->count] = base->result;
    log->found[log->count] = op->found;
    ++log->count;
    if (!pthread_equal(pthread_self(), log->thread))
        log->wrong_thread = 1;
}

static void submit(rl_store_t *store, struct log *log, int index, const char *user, const char *check, int fail)
{
    struct test_op *op = rl_store_op_new(user != NULL ? &write_type : &read_type, sizeof(*op));

    /* The operation owns its arguments: copies in its arena. */
    op->user = rl_arena_strdup(&op->base.arena, user);
    op->check = rl_arena_strdup(&op->base.arena, check);
    op->fail = fail;
    op->index = index;
    op->log = log;
    rl_store_submit(store, &op->base, test_op_done, NULL);
}

static rl_store_t *open_store(int threaded)
{
    rl_store_t *store = NULL;
    rl_txn_t *txn = NULL;

    assert_int_equal(rl_store__backend_open(location, &txn), 0);
    assert_int_equal(rl_store__wrap(txn, threaded, &store), 0);
    return store;
}

static void worker_order_and_deferral(int threaded)
{
    rl_store_t *store = open_store(threaded);
    struct log log = {.thread = pthread_self()};
    int i;

    for (i = 0; i < 64; ++i) {
        /* Reads and writes interleaved: a read sees every write submitted before it. */
        if (i % 2 == 0)
            submit(store, &log, i, i == 0 ? "alice" : "bob", NULL, 0);
        else
            submit(store, &log, i, NULL, "alice", 0);
    }
    /* Never inside the call: only a flush runs the done callbacks. */
    assert_int_equal(log.count, 0);
    assert_true(rl_store_pending(store));
    rl_store_drain(store);
    assert_false(rl_store_pending(store));
    assert_int_equal(log.count, 64);
    assert_false(log.wrong_thread);
    for (i = 0; i < 64; ++i) {
        assert_int_equal(log.seen[i], i);
        assert_int_equal(log.results[i], 0);
        if (i % 2 == 1)
            assert_true(log.found[i]);
    }
    rl_store_close(store);
}

static void test_worker_order_inline(void **state)
{
    worker_order_and_deferral(0);
}

static void test_worker_order_threaded(void **state)
{
    worker_order_and_deferral(1);
}

static void failing_operation_is_isolated(int threaded)
{
    rl_store_t *store = open_store(threaded);
    struct log log = {.thread = pthread_self()};

    submit(store, &log, 0, "a", NULL, 0);
    submit(store, &log, 1, "b", NULL, 1);
    submit(store, &log, 2, "c", NULL, 0);
    submit(store, &log, 3, NULL, "b", 0);
    submit(store, &log, 4, NULL, "c", 0);
    rl_store_drain(store);
    assert_int_equal(log.count, 5);
    assert_int_equal(log.results[0], 0);
    assert_int_equal(log.results[1], RL_E_INTERNAL);
    assert_int_equal(log.results[2], 0);
    /* The failed one left no trace; its neighbours in the batch were kept. */
    assert_false(log.found[3]);
    assert_true(log.found[4]);
    rl_store_close(store);
}

static void test_failing_operation_inline(void **state)
{
    failing_operation_is_isolated(0);
}

static void test_failing_operation_threaded(void **state)
{
    failing_operation_is_isolated(1);
}

static void test_worker_wakes_the_loop_through_its_fd(void **state)
{
    rl_store_t *store = open_store(1);
    struct log log = {.thread = pthread_self()};
    struct pollfd wait = {.fd = rl_store_wake_fd(store), .events = POLLIN};

    assert_true(wait.fd >= 0);
    submit(store, &log, 0, "alice", NULL, 0);
    assert_int_equal(poll(&wait, 1, 10000), 1);
    assert_int_equal(log.count, 0);
    rl_store_flush(store);
    assert_int_equal(log.count, 1);
    assert_false(rl_store_pending(store));
    /* Nothing left: the flush emptied the fd. */
    wait.revents = 0;
    assert_int_equal(poll(&wait, 1, 0), 0);
    rl_store_close(store);
}

static void test_close_finishes_queued_work(void **state)
{
    rl_store_t *store = open_store(1);
    struct log log = {.thread = pthread_self()};

    submit(store, &log, 0, "alice", NULL, 0);
    rl_store_close(store);
    /* Closing ran the callback after committing. */
    assert_int_equal(log.count, 1);
    assert_int_equal(log.results[0], 0);
    store = open_store(1);
    submit(store, &log, 1, NULL, "alice", 0);
    rl_store_drain(store);
    assert_true(log.found[1]);
    rl_store_close(store);
}

/* A done callback that queues more work: drain waits for that too. */
static void chain_done(rl_store_op_t *base)
{
    struct test_op *op = (void *)base;
    struct test_op *next;

    test_op_done(base);
    if (op->index >= 10)
        return;
    next = rl_store_op_new(&read_type, sizeof(*next));
    next->check = "nobody";
    next->index = op->index + 1;
    next->log = op->log;
    rl_store_submit(base->arg, &next->base, chain_done, base->arg);
}

static void test_done_callbacks_may_submit(void **state)
{
    rl_store_t *store = open_store(1);
    struct log log = {.thread = pthread_self()};
    struct test_op *op = rl_store_op_new(&read_type, sizeof(*op));

    op->check = "nobody";
    op->log = &log;
    rl_store_submit(store, &op->base, chain_done, store);
    rl_store_drain(store);
    assert_int_equal(log.count, 11);
    assert_int_equal(log.seen[10], 10);
    rl_store_close(store);
}

/* The real backend whose driver's commit fails: no write of the batch may be answered as done. */
static const rl_sql_driver_t *real_driver;
static rl_sql_driver_t failing_driver;

static int failing_commit(rl_txn_t *txn)
{
    real_driver->rollback(txn);
    return RL_E_INTERNAL;
}

static void test_a_failed_commit_fails_every_write_of_its_batch(void **state)
{
    rl_store_t *store = NULL;
    rl_txn_t *txn = NULL;
    struct log log = {.thread = pthread_self()};

    assert_int_equal(rl_store__backend_open(location, &txn), 0);
    real_driver = RL_SQL_TXN(txn)->driver;
    failing_driver = *real_driver;
    failing_driver.commit = failing_commit;
    RL_SQL_TXN(txn)->driver = &failing_driver;
    assert_int_equal(rl_store__wrap(txn, 0, &store), 0);
    submit(store, &log, 0, "alice", NULL, 0);
    submit(store, &log, 1, NULL, "alice", 0);
    rl_store_drain(store);
    assert_int_equal(log.results[0], RL_E_INTERNAL);
    /* A read answers what it saw. */
    assert_int_equal(log.results[1], 0);
    rl_store_close(store);
    store = open_store(0);
    submit(store, &log, 2, NULL, "alice", 0);
    rl_store_drain(store);
    assert_false(log.found[2]);
    rl_store_close(store);
}

/* Many operations from the loop while the worker runs batches: every one completes, in order. */
static void test_worker_under_a_stream_of_operations(void **state)
{
    rl_store_t *store = open_store(1);
    static struct log log;
    char name[16];
    int i;

    memset(&log, 0, sizeof(log));
    log.thread = pthread_self();
    for (i = 0; i < 256; ++i) {
        snprintf(name, sizeof(name), "u%d", i % 7);
        submit(store, &log, i, i % 3 == 0 ? name : NULL, i % 3 == 0 ? NULL : "u0", 0);
        if (i % 16 == 0)
            rl_store_flush(store);
    }
    rl_store_drain(store);
    assert_int_equal(log.count, 256);
    for (i = 0; i < 256; ++i) {
        assert_int_equal(log.seen[i], i);
        assert_int_equal(log.results[i], 0);
    }
    rl_store_close(store);
}

#define TEST(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        TEST(test_users),
        TEST(test_pairings),
        TEST(test_installations),
        TEST(test_sessions_and_their_purge),
        TEST(test_interactions_and_messages),
        TEST(test_delta_runs_and_their_keys),
        TEST(test_idempotency_records),
        TEST(test_tasks),
        TEST(test_timeline_reads_by_time),
        TEST(test_approvals_and_grants),
        TEST(test_capability_requests),
        TEST(test_the_update_queue),
        TEST(test_attachments),
        TEST(test_attachment_lifetimes),
        TEST(test_secrets),
        TEST(test_login_codes),
        TEST(test_end_to_end_encryption),
        TEST(test_push_subscriptions),
        TEST(test_a_savepoint_undoes_only_its_own_writes),
        TEST(test_a_rollback_undoes_the_transaction),
        TEST(test_a_commit_survives_kill_9),
        TEST(test_rows_read_stay_valid_in_the_arena),
        TEST(test_a_failed_statement_is_undone_by_its_savepoint),
        TEST(test_a_written_row_waits_for_the_writers_commit),
        TEST(test_a_key_being_recorded_waits_for_its_commit),
        TEST(test_update_ids_count_up_across_connections),
        TEST(test_worker_order_inline),
        TEST(test_worker_order_threaded),
        TEST(test_failing_operation_inline),
        TEST(test_failing_operation_threaded),
        TEST(test_worker_wakes_the_loop_through_its_fd),
        TEST(test_close_finishes_queued_work),
        TEST(test_done_callbacks_may_submit),
        TEST(test_a_failed_commit_fails_every_write_of_its_batch),
        TEST(test_worker_under_a_stream_of_operations),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
