/*
 * The search request: parsing the URL query string of /api/v1/search and
 * turning the user's words into an SQLite FTS5 MATCH expression. Both take
 * untrusted input and are fuzzed (tests/fuzz/fuzz_catalog_query.c). Pure
 * functions, no allocation, any thread.
 */
#ifndef RL_CATALOG_QUERY_H
#define RL_CATALOG_QUERY_H

#include <stddef.h>

#define RL_CATALOG_QUERY_MAX       200 /* bytes of q once percent-decoded */
#define RL_CATALOG_QUERY_TERMS_MAX 12  /* words and quoted phrases in q */
#define RL_CATALOG_PER_DEFAULT     5
#define RL_CATALOG_PER_MAX         30
/* Room for the MATCH expression of any q that rl_catalog_query_parse accepts. */
#define RL_CATALOG_MATCH_MAX 2048

typedef struct rl_catalog_search {
    char q[RL_CATALOG_QUERY_MAX + 1]; /* decoded, valid UTF-8, NUL-terminated */
    int type;                         /* an rl_catalog_type_t, or -1 for every type */
    int per;                          /* results per type, 1 to RL_CATALOG_PER_MAX */
} rl_catalog_search_t;

/*
 * Parses a URL query string without its '?' ("q=swe+bench&type=eval&per=3"):
 * '+' is a space, %XX escapes are decoded. q is required, must be valid
 * UTF-8 without control characters, at most RL_CATALOG_QUERY_MAX bytes and
 * hold 1 to RL_CATALOG_QUERY_TERMS_MAX searchable terms. type takes a type
 * name, singular or plural; per an integer from 1 to RL_CATALOG_PER_MAX
 * (default RL_CATALOG_PER_DEFAULT). Other parameters are ignored; q, type or
 * per given twice is refused.
 *
 * Returns 0, or RL_E_INVALID_QUERY (q) / RL_E_INVALID_PARAMETER
 * (type, per, a broken escape) with a human message in err (errsz bytes).
 */
int rl_catalog_query_parse(const char *query, size_t len, rl_catalog_search_t *out, char *err, size_t errsz);

/*
 * Writes the FTS5 MATCH expression for the words of q into out. Each word,
 * or "quoted phrase", becomes one FTS5 string (inner quotes doubled, so that
 * no FTS5 operator or column filter can be smuggled in); the strings are
 * joined with AND (any == 0) or OR (any == 1). The last term is a prefix
 * query ("wor"*) unless it is a closed quoted phrase or q ends with white
 * space: the user is probably still typing it. Terms without a letter or
 * digit are dropped.
 *
 * Returns the number of terms written (0: nothing searchable), or -1 when out
 * is too small. RL_CATALOG_MATCH_MAX bytes always suffice for a q of at most
 * RL_CATALOG_QUERY_MAX bytes.
 */
int rl_catalog_query_match(const char *q, int any, char *out, size_t outsz);

/*
 * Decodes a URL component ('+' is a space) from src into dst (dstsz bytes,
 * NUL added). Returns the decoded length, RL_CATALOG_DECODE_BAD_ESCAPE for a
 * broken %XX escape, or RL_CATALOG_DECODE_TOO_LONG when the result does not
 * fit.
 */
#define RL_CATALOG_DECODE_BAD_ESCAPE (-1)
#define RL_CATALOG_DECODE_TOO_LONG   (-2)
int rl_catalog_query_decode(const char *src, size_t len, char *dst, size_t dstsz);

/* 1 when s is valid UTF-8 (no overlong forms or surrogates) without C0 control characters or DEL. */
int rl_catalog_query_text_is_valid(const char *s, size_t len);

#endif
