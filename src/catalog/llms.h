/*
 * The two plain-text views of the catalog for language models, following
 * the llms.txt convention (https://llmstxt.org): an H1 title, a one-paragraph
 * summary in a blockquote, a short paragraph of usage notes, then one H2
 * section per type with one "- [title](url): summary" line per entity.
 * llms-full.txt keeps the same frame and inlines, per entity, its
 * description, facts, relationships and top scores.
 */
#ifndef RL_CATALOG_LLMS_H
#define RL_CATALOG_LLMS_H

#include <jansson.h>
#include <stddef.h>

#include "catalog/type.h"

/*
 * Renders llms.txt (full = 0) or llms-full.txt (full = 1). documents[type]
 * is an array of entity documents in the order they should be listed;
 * base_url ("http://127.0.0.1:8090", no trailing slash) prefixes every link.
 * Returns a malloc'd NUL-terminated text and its length, or NULL.
 */
char *rl_catalog_llms_render(json_t *const documents[RL_CATALOG_TYPE_COUNT], const char *base_url, int full,
                             size_t *len);

/* How many score rows llms-full.txt shows for an eval or a leaderboard (a model shows all of its own). */
#define RL_CATALOG_LLMS_TOP_SCORES 5

#endif
