/*
 * Entity documents: what GET /api/v1/<type>/<slug> answers, built once at
 * import from a checked dataset.
 *
 * {
 *   "type": "models", "slug", "title", "summary", "description"?, "url",
 *   "aliases"?: [..],
 *   "attributes": {plain facts}, "links": {name: external URL},
 *   "licence"?: {...}, "files"?: {"text"?: url, "pdf"?: url},      papers only
 *   "relationships": {name: [{"type", "slug", "title", "url"}, ...]},
 *   "scores"?: [...]                                       models, evals, leaderboards
 * }
 *
 * Every relationship is resolved both ways (rl_catalog_links) and every list
 * is sorted, so that the same dataset always gives the same bytes.
 *
 * spec: hidden sources never appear. An entity from a hidden source gets no
 * document, references to it are dropped from every other document, and a
 * score whose model, eval or own source is hidden is dropped.
 */
#ifndef RL_CATALOG_DOCUMENT_H
#define RL_CATALOG_DOCUMENT_H

#include <jansson.h>

#include "catalog/dataset.h"

/* How the catalog writes JSON: compact, and reals with 12 significant digits so that 88.7 stays 88.7. */
#define RL_CATALOG_JSON_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(12))

/*
 * Fills documents[type] with a new object slug -> document for every visible
 * entity, in slug order. Returns 0, or -1 when memory ran out (documents are
 * then all NULL).
 */
int rl_catalog_documents_build(const rl_catalog_dataset_t *dataset, json_t *documents[RL_CATALOG_TYPE_COUNT]);

/*
 * The facts that search reads besides the title, slug, aliases, summary and
 * description: every string attribute and the title of every related entity,
 * one per line. Returns a malloc'd string.
 */
char *rl_catalog_document_search_facts(const json_t *document);

/* The API path of an entity, "/api/v1/<plural>/<slug>", into buf. */
void rl_catalog_document_path(rl_catalog_type_t type, const char *slug, char *buf, size_t bufsz);

#endif
