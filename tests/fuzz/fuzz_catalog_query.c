/*
 * Fuzz target: the search request of catalogd (src/catalog/query.c) and its
 * snippets (src/catalog/snippet.c). Any URL query string either is refused
 * with one of the two documented errors, or gives a search whose FTS5
 * expressions (every word, and any word) SQLite accepts, so that a user's
 * text never becomes FTS5 syntax, and whose snippets are valid UTF-8.
 */
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "catalog/query.h"
#include "catalog/snippet.h"

static sqlite3 *db;
static sqlite3_stmt *stmt;

static void open_index(void)
{
    if (db != NULL)
        return;
    if (sqlite3_open(":memory:", &db) != SQLITE_OK ||
        sqlite3_exec(db,
                     "CREATE VIRTUAL TABLE t USING fts5(title, slug, body, tokenize = 'unicode61 remove_diacritics 2',"
                     " prefix = '2 3');"
                     "INSERT INTO t VALUES ('SWE-bench Verified', 'swe-bench-verified', 'human validated subset'),"
                     " ('GPT-4o', 'gpt-4o', 'OpenAI model'), ('Caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac', 'cafe', "
                     "'na\xc3\xafve');",
                     NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db,
                           "SELECT rowid, snippet(t, -1, '**', '**', '...', 8) FROM t WHERE t MATCH ? ORDER BY rank",
                           -1, &stmt, NULL) != SQLITE_OK)
        abort();
}

static void run(const char *expression)
{
    int rc;

    sqlite3_reset(stmt);
    sqlite3_bind_text(stmt, 1, expression, -1, SQLITE_STATIC);
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    }
    if (rc != SQLITE_DONE)
        __builtin_trap();
}

static const char sample[] = "SWE-bench Verified: a human-validated subset of 500 GitHub issues, caf\xc3\xa9 "
                             "na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac, with **stars** and \"quotes\" - the end.";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rl_catalog_search_t search;
    char err[200], match[RL_CATALOG_MATCH_MAX], snippet[160];
    int result, any, terms;

    open_index();
    result = rl_catalog_query_parse((const char *)data, size, &search, err, sizeof(err));
    if (result != 0) {
        if (result != RL_E_INVALID_QUERY && result != RL_E_INVALID_PARAMETER)
            __builtin_trap();
        return 0;
    }
    if (search.per < 1 || search.per > RL_CATALOG_PER_MAX || search.type < -1 || search.type >= 8 ||
        strlen(search.q) > RL_CATALOG_QUERY_MAX || !rl_catalog_query_text_is_valid(search.q, strlen(search.q)))
        __builtin_trap();
    for (any = 0; any <= 1; ++any) {
        terms = rl_catalog_query_match(search.q, any, match, sizeof(match));
        if (terms < 1 || terms > RL_CATALOG_QUERY_TERMS_MAX)
            __builtin_trap();
        run(match);
    }
    /* A small buffer on purpose: the cut must still land between characters. */
    rl_catalog_snippet(search.q, sample, snippet, sizeof(snippet));
    if (!rl_catalog_query_text_is_valid(snippet, strlen(snippet)))
        __builtin_trap();
    return 0;
}
