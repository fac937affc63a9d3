/*
 * Unit tests of src/catalog/query.c: URL decoding, the search parameters and
 * the FTS5 expression built from the user's words. Every expression built
 * here is also run against a real FTS5 table, so that "accepted" always means
 * "SQLite can execute it".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include <sqlite3.h>

#include "common/error.h"
#include "catalog/query.h"
#include "catalog/type.h"

static int parse(const char *query, rl_catalog_search_t *out, char *err)
{
    return rl_catalog_query_parse(query, strlen(query), out, err, 200);
}

static void test_decode(void **state)
{
    char out[32];

    assert_int_equal(rl_catalog_query_decode("a+b%20c%2Bd", 11, out, sizeof(out)), 7);
    assert_string_equal(out, "a b c+d");
    assert_int_equal(rl_catalog_query_decode("%e2%80%94", 9, out, sizeof(out)), 3);
    assert_memory_equal(out, "\xe2\x80\x94", 3);
    assert_int_equal(rl_catalog_query_decode("%zz", 3, out, sizeof(out)), RL_CATALOG_DECODE_BAD_ESCAPE);
    assert_int_equal(rl_catalog_query_decode("ab%2", 4, out, sizeof(out)), RL_CATALOG_DECODE_BAD_ESCAPE);
    assert_int_equal(rl_catalog_query_decode("abcdef", 6, out, 4), RL_CATALOG_DECODE_TOO_LONG);
    assert_int_equal(rl_catalog_query_decode("", 0, out, sizeof(out)), 0);
}

static void test_text_validity(void **state)
{
    assert_true(rl_catalog_query_text_is_valid("gpt-4o", 6));
    assert_true(rl_catalog_query_text_is_valid("caf\xc3\xa9", 5));
    assert_false(rl_catalog_query_text_is_valid("a\nb", 3));
    assert_false(rl_catalog_query_text_is_valid("a\x7f", 2));
    assert_false(rl_catalog_query_text_is_valid("\xc3", 1));             /* truncated */
    assert_false(rl_catalog_query_text_is_valid("\xc0\xaf", 2));         /* overlong */
    assert_false(rl_catalog_query_text_is_valid("\xed\xa0\x80", 3));     /* surrogate */
    assert_false(rl_catalog_query_text_is_valid("\xf4\x90\x80\x80", 4)); /* above U+10FFFF */
}

static void test_parse_defaults_and_parameters(void **state)
{
    rl_catalog_search_t search;
    char err[200];

    assert_int_equal(parse("q=swe+bench", &search, err), 0);
    assert_string_equal(search.q, "swe bench");
    assert_int_equal(search.type, -1);
    assert_int_equal(search.per, RL_CATALOG_PER_DEFAULT);

    assert_int_equal(parse("per=30&type=Model&q=llama&utm=x", &search, err), 0);
    assert_int_equal(search.type, RL_CATALOG_TYPE_MODEL);
    assert_int_equal(search.per, 30);
    assert_int_equal(parse("q=x&type=people&per=1", &search, err), 0);
    assert_int_equal(search.type, RL_CATALOG_TYPE_PERSON);
    assert_int_equal(search.per, 1);
}

static void test_parse_refusals(void **state)
{
    rl_catalog_search_t search;
    char err[200], long_q[400];

    assert_int_equal(parse("", &search, err), RL_E_INVALID_QUERY);
    assert_non_null(strstr(err, "required"));
    assert_int_equal(parse("q=", &search, err), RL_E_INVALID_QUERY);
    assert_int_equal(parse("q=%21%21%21", &search, err), RL_E_INVALID_QUERY);
    assert_non_null(strstr(err, "no word"));
    assert_int_equal(parse("q=a&q=b", &search, err), RL_E_INVALID_QUERY);
    assert_int_equal(parse("q=%0a", &search, err), RL_E_INVALID_QUERY);
    assert_int_equal(parse("q=%ff", &search, err), RL_E_INVALID_QUERY);
    assert_int_equal(parse("q=%zz", &search, err), RL_E_INVALID_QUERY);
    assert_int_equal(parse("q=a+b+c+d+e+f+g+h+i+j+k+l+m", &search, err), RL_E_INVALID_QUERY);
    assert_non_null(strstr(err, "12 words"));
    memset(long_q, 'a', sizeof(long_q));
    memcpy(long_q, "q=", 2);
    long_q[sizeof(long_q) - 1] = '\0';
    assert_int_equal(parse(long_q, &search, err), RL_E_INVALID_QUERY);
    assert_non_null(strstr(err, "200"));

    assert_int_equal(parse("q=x&type=modelz", &search, err), RL_E_INVALID_PARAMETER);
    assert_non_null(strstr(err, "type must be"));
    assert_int_equal(parse("q=x&type=", &search, err), RL_E_INVALID_PARAMETER);
    assert_int_equal(parse("q=x&type=evals&type=models", &search, err), RL_E_INVALID_PARAMETER);
    assert_int_equal(parse("q=x&per=0", &search, err), RL_E_INVALID_PARAMETER);
    assert_int_equal(parse("q=x&per=31", &search, err), RL_E_INVALID_PARAMETER);
    assert_int_equal(parse("q=x&per=5x", &search, err), RL_E_INVALID_PARAMETER);
    assert_int_equal(parse("q=x&per=-1", &search, err), RL_E_INVALID_PARAMETER);
    assert_int_equal(parse("q=x&per=", &search, err), RL_E_INVALID_PARAMETER);
    assert_int_equal(parse("q=x&per=0030", &search, err), RL_E_INVALID_PARAMETER);
    assert_int_equal(parse("q=x&per=%3", &search, err), RL_E_INVALID_PARAMETER);
}

static int run_match(const char *expression)
{
    static sqlite3 *db;
    sqlite3_stmt *stmt;
    int rc, rows = 0;

    if (db == NULL) {
        assert_int_equal(sqlite3_open(":memory:", &db), SQLITE_OK);
        assert_int_equal(sqlite3_exec(db,
                                      "CREATE VIRTUAL TABLE t USING fts5(title, body,"
                                      " tokenize = 'unicode61 remove_diacritics 2');"
                                      "INSERT INTO t VALUES ('GPT-4o', 'OpenAI model'),"
                                      " ('SWE-bench Verified', 'human validated'), ('Caf\xc3\xa9', 'na\xc3\xafve');",
                                      NULL, NULL, NULL),
                         SQLITE_OK);
    }
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT title FROM t WHERE t MATCH ?", -1, &stmt, NULL), SQLITE_OK);
    sqlite3_bind_text(stmt, 1, expression, -1, SQLITE_STATIC);
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW)
        ++rows;
    sqlite3_finalize(stmt);
    assert_int_equal(rc, SQLITE_DONE);
    return rows;
}

static void test_match_expression(void **state)
{
    char out[RL_CATALOG_MATCH_MAX];

    assert_int_equal(rl_catalog_query_match("swe bench", 0, out, sizeof(out)), 2);
    assert_string_equal(out, "\"swe\" AND \"bench\"*");
    assert_int_equal(run_match(out), 1);
    /* A trailing space means the last word is complete. */
    assert_int_equal(rl_catalog_query_match("swe ben ", 0, out, sizeof(out)), 2);
    assert_string_equal(out, "\"swe\" AND \"ben\"");
    assert_int_equal(run_match(out), 0);
    assert_int_equal(rl_catalog_query_match("swe ben", 0, out, sizeof(out)), 2);
    assert_int_equal(run_match(out), 1);
    assert_int_equal(rl_catalog_query_match("gpt 4o", 1, out, sizeof(out)), 2);
    assert_string_equal(out, "\"gpt\" OR \"4o\"*");
    /* A closed phrase is taken whole and is not a prefix. */
    assert_int_equal(rl_catalog_query_match("\"human validated\"", 0, out, sizeof(out)), 1);
    assert_string_equal(out, "\"human validated\"");
    assert_int_equal(run_match(out), 1);
    /* An open one is a prefix phrase. */
    assert_int_equal(rl_catalog_query_match("\"human val", 0, out, sizeof(out)), 1);
    assert_string_equal(out, "\"human val\"*");
    assert_int_equal(run_match(out), 1);
    /* FTS5 syntax in the input is only ever text. */
    assert_int_equal(rl_catalog_query_match("title:x NEAR(a b) OR - * ^", 0, out, sizeof(out)), 4);
    assert_string_equal(out, "\"title:x\" AND \"NEAR(a\" AND \"b)\" AND \"OR\"");
    run_match(out);
    assert_int_equal(rl_catalog_query_match("a\"\"b", 0, out, sizeof(out)), 2);
    run_match(out);
    /* Punctuation-only terms, ASCII or not, are dropped. */
    assert_int_equal(rl_catalog_query_match("gpt \xe2\x80\x94 !!", 0, out, sizeof(out)), 1);
    assert_string_equal(out, "\"gpt\"");
    assert_int_equal(rl_catalog_query_match("...", 0, out, sizeof(out)), 0);
    assert_int_equal(rl_catalog_query_match("caf\xc3\xa9", 0, out, sizeof(out)), 1);
    assert_int_equal(run_match(out), 1);
    assert_int_equal(rl_catalog_query_match("cafe", 0, out, sizeof(out)), 1);
    assert_int_equal(run_match(out), 1); /* diacritics removed on both sides */
    assert_int_equal(rl_catalog_query_match("swe bench", 0, out, 8), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode),
        cmocka_unit_test(test_text_validity),
        cmocka_unit_test(test_parse_defaults_and_parameters),
        cmocka_unit_test(test_parse_refusals),
        cmocka_unit_test(test_match_expression),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
