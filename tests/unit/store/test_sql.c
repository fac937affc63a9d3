/*
 * The SQL backends' shared half (src/store/sql.c, rows.h): a statement
 * written once becomes each dialect's text, and a row description gives
 * its statements' column lists and a descriptor that agrees with them. The
 * operations themselves run in the contract suite on both engines.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "store/rows.h"
#include "store/sql.h"

static const rl_sql_dialect_t sqlite_like = {.numbered = 0, .bytewise = "", .inserted = "rowid", .row_locks = 0};
static const rl_sql_dialect_t postgres_like = {
    .numbered = 1, .bytewise = " COLLATE \"C\"", .inserted = "seq", .row_locks = 1};

static void check_rewrite(const rl_sql_dialect_t *d, const rl_sql_t *stmt, int locked, const char *want)
{
    char *text = rl_sql__rewrite(d, stmt, locked);

    assert_non_null(text);
    assert_string_equal(text, want);
    free(text);
}

static void test_placeholders_are_numbered_in_order_for_postgres_and_kept_for_sqlite(void **state)
{
    static const rl_sql_t stmt = {"UPDATE t SET a = ?, b = ? WHERE c = ?"};

    (void)state;
    check_rewrite(&postgres_like, &stmt, 0, "UPDATE t SET a = $1, b = $2 WHERE c = $3");
    check_rewrite(&sqlite_like, &stmt, 0, "UPDATE t SET a = ?, b = ? WHERE c = ?");
}

static void test_a_numbered_placeholder_names_its_parameter_again(void **state)
{
    static const rl_sql_t stmt = {"SELECT x FROM t WHERE s = ?1 AND (at < ?2 OR (at = ?2 AND id < ?3)) LIMIT ?4"};
    static const rl_sql_t mixed = {"SELECT ?2, ?, ?1"};

    (void)state;
    check_rewrite(&postgres_like, &stmt, 0,
                  "SELECT x FROM t WHERE s = $1 AND (at < $2 OR (at = $2 AND id < $3)) LIMIT $4");
    check_rewrite(&sqlite_like, &stmt, 0, stmt.text);
    /* As SQLite numbers them: a bare ? takes the number after the largest so far. */
    check_rewrite(&postgres_like, &mixed, 0, "SELECT $2, $3, $1");
}

static void test_quoted_text_is_left_alone(void **state)
{
    static const rl_sql_t stmt = {"SELECT '?', \"@bytewise\" FROM t WHERE a = 'it''s ?' AND b = ?"};

    (void)state;
    check_rewrite(&postgres_like, &stmt, 0, "SELECT '?', \"@bytewise\" FROM t WHERE a = 'it''s ?' AND b = $1");
}

static void test_dialect_words_and_the_locked_suffix(void **state)
{
    static const rl_sql_t stmt = {"SELECT id FROM m WHERE s = ? ORDER BY at, m.@inserted, id @bytewise DESC",
                                  " FOR UPDATE SKIP LOCKED"};

    (void)state;
    check_rewrite(&postgres_like, &stmt, 0, "SELECT id FROM m WHERE s = $1 ORDER BY at, m.seq, id  COLLATE \"C\" DESC");
    check_rewrite(&postgres_like, &stmt, 1,
                  "SELECT id FROM m WHERE s = $1 ORDER BY at, m.seq, id  COLLATE \"C\" DESC FOR UPDATE SKIP LOCKED");
    check_rewrite(&sqlite_like, &stmt, 0, "SELECT id FROM m WHERE s = ? ORDER BY at, m.rowid, id  DESC");
}

RL_ROW_DESCRIBE(delta_run_row, rl_delta_run_row_t, RL_ROW_DELTA_RUN);
RL_ROW_DESCRIBE(message_row, rl_message_row_t, RL_ROW_MESSAGE);

static void test_a_row_description_gives_its_statements_and_descriptor(void **state)
{
    static const char insert[] = RL_ROW_INSERT("message_deltas", RL_ROW_DELTA_RUN);
    static const char qualified[] = RL_ROW_COLUMNS_OF("m.", RL_ROW_MESSAGE);
    char columns[512] = "";
    int i;

    (void)state;
    assert_string_equal(insert, "INSERT INTO message_deltas(message_id, seq, seq_last, delta, keys)"
                                " VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING");
    assert_string_equal(RL_ROW_MARKS(RL_ROW_USER), "?, ?");
    assert_int_equal(strncmp(qualified, "m.id, m.session_id, ", 20), 0);
    /* The descriptor lists the same columns in the same order as the statements. */
    for (i = 0; i < message_row.count; ++i) {
        strcat(columns, i == 0 ? "" : ", ");
        strcat(columns, message_row.columns[i].name);
    }
    assert_string_equal(columns, RL_ROW_COLUMNS(RL_ROW_MESSAGE));
    assert_int_equal(message_row.size, sizeof(rl_message_row_t));
    assert_int_equal(message_row.columns[12].type, RL_SQL_INT32);
    assert_int_equal(message_row.columns[12].offset, offsetof(rl_message_row_t, placeholder));
    /* A run's text is the column delta, with its length beside it. */
    assert_string_equal(delta_run_row.columns[3].name, "delta");
    assert_int_equal(delta_run_row.columns[3].type, RL_SQL_BYTES);
    assert_int_equal(delta_run_row.columns[3].offset, offsetof(rl_delta_run_row_t, text));
    assert_int_equal(delta_run_row.columns[3].len_offset, offsetof(rl_delta_run_row_t, text_len));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_placeholders_are_numbered_in_order_for_postgres_and_kept_for_sqlite),
        cmocka_unit_test(test_a_numbered_placeholder_names_its_parameter_again),
        cmocka_unit_test(test_quoted_text_is_left_alone),
        cmocka_unit_test(test_dialect_words_and_the_locked_suffix),
        cmocka_unit_test(test_a_row_description_gives_its_statements_and_descriptor),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
