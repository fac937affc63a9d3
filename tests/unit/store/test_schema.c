/*
 * The schema's one list of steps (src/store/schema.c): each engine's
 * versions are counted as schema.c says, the two engines keep step with
 * each other from SQLite's step 10 on, and a SQLite store left at any
 * earlier version, empty included, is brought to this relayd's version by
 * opening it, with a row it held before kept. (PostgreSQL's upgrades: the
 * PostgreSQL contract and tests/e2e/test_70_service_basics.py.)
 */
#include <setjmp.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "store/postgres.h"
#include "store/schema.h"
#include "store/sqlite.h"
#include "store/store.h"

/* PostgreSQL's version 1 is SQLite's step 10 (schema.c). */
#define PG_FIRST_STEP 10

static void test_each_engine_counts_its_own_steps(void **state)
{
    int sqlite = rl_schema_target(RL_SCHEMA_SQLITE), postgres = rl_schema_target(RL_SCHEMA_POSTGRES), v;

    (void)state;
    assert_int_equal(sqlite, rl_store_sqlite_target_version());
    assert_int_equal(postgres, rl_store_postgres_target_version());
    assert_int_equal(postgres, sqlite - (PG_FIRST_STEP - 1));
    for (v = 0; v < sqlite; ++v)
        assert_non_null(rl_schema_step(RL_SCHEMA_SQLITE, v));
    for (v = 0; v < postgres; ++v)
        assert_non_null(rl_schema_step(RL_SCHEMA_POSTGRES, v));
    assert_null(rl_schema_step(RL_SCHEMA_SQLITE, sqlite));
    assert_null(rl_schema_step(RL_SCHEMA_POSTGRES, postgres));
    /* PostgreSQL began at SQLite 10 in one step of its own; the last steps are the same SQL on both. */
    assert_true(strstr(rl_schema_step(RL_SCHEMA_POSTGRES, 0), "BIGINT") != NULL);
    assert_string_equal(rl_schema_step(RL_SCHEMA_SQLITE, sqlite - 1), rl_schema_step(RL_SCHEMA_POSTGRES, postgres - 1));
}

static int exec(sqlite3 *db, const char *sql)
{
    char *error = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &error);

    if (rc != SQLITE_OK)
        print_error("%s: %s\n", sql, error != NULL ? error : "?");
    sqlite3_free(error);
    return rc;
}

static void test_a_store_at_any_earlier_version_is_upgraded(void **state)
{
    int target = rl_schema_target(RL_SCHEMA_SQLITE), from, v;

    (void)state;
    for (from = 0; from < target; ++from) {
        char folder[] = "/tmp/rl-schema-XXXXXX", path[96], location[112], cmd[128], sql[96];
        rl_txn_t *txn = NULL;
        sqlite3 *db = NULL;
        sqlite3_stmt *stmt = NULL;
        rl_arena_t arena = {0};
        rl_user_row_t user;

        assert_non_null(mkdtemp(folder));
        snprintf(path, sizeof(path), "%s/relay.db", folder);
        snprintf(location, sizeof(location), "sqlite:%s", path);
        /* The store as a relayd of version `from` left it, with a user when it has the table. */
        assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
        assert_int_equal(exec(db, "CREATE TABLE schema_version (version INTEGER NOT NULL)"), SQLITE_OK);
        for (v = 0; v < from; ++v) {
            snprintf(sql, sizeof(sql), "INSERT INTO schema_version VALUES (%d)", v + 1);
            assert_int_equal(exec(db, rl_schema_step(RL_SCHEMA_SQLITE, v)), SQLITE_OK);
            assert_int_equal(exec(db, sql), SQLITE_OK);
        }
        if (from > 0)
            assert_int_equal(exec(db, "INSERT INTO users(id, created_at) VALUES ('u_old', 7)"), SQLITE_OK);
        sqlite3_close(db);

        assert_int_equal(rl_store__backend_open(location, &txn), 0);
        txn->arena = &arena;
        if (from > 0) {
            assert_int_equal(rl_txn_begin(txn), 0);
            assert_int_equal(RL_TXN(txn, user_get, "u_old", &user), 0);
            assert_int_equal(user.created_at, 7);
            rl_txn_rollback(txn);
        }
        txn->arena = NULL;
        rl_arena_free(&arena);
        rl_txn_close(txn);

        assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
        assert_int_equal(sqlite3_prepare_v2(db, "SELECT max(version) FROM schema_version", -1, &stmt, NULL), SQLITE_OK);
        assert_int_equal(sqlite3_step(stmt), SQLITE_ROW);
        assert_int_equal(sqlite3_column_int(stmt, 0), target);
        sqlite3_finalize(stmt);
        sqlite3_close(db);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", folder);
        assert_int_equal(system(cmd), 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_engine_counts_its_own_steps),
        cmocka_unit_test(test_a_store_at_any_earlier_version_is_upgraded),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
