/*
 * Search snippets: the words of a text around the first place where the
 * query's words occur, with every occurrence marked **like this**.
 *
 * Words are runs of ASCII letters and digits and of non-ASCII characters;
 * ASCII case is ignored. The query's last word also matches as a prefix
 * unless the query ends with white space or a closing quote, as in search.
 * Built in C from the entity's own text rather than with FTS5's snippet(),
 * which for a broad query costs a seek through every matching document list
 * per hit. Pure, any thread.
 */
#ifndef RL_CATALOG_SNIPPET_H
#define RL_CATALOG_SNIPPET_H

#include <stddef.h>

/* Words shown around the match. */
#define RL_CATALOG_SNIPPET_WORDS 18

/*
 * Writes the snippet of text for query q into out (outsz bytes, NUL added;
 * cut at a character boundary if it does not fit). "…" marks text left out
 * at either end. Returns 1 when a word matched, 0 when none did (out is then
 * empty).
 */
int rl_catalog_snippet(const char *q, const char *text, char *out, size_t outsz);

#endif
