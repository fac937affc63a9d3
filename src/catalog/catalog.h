/*
 * The served catalog: an imported SQLite file loaded whole into memory, with
 * every answer that does not depend on the request built in advance.
 *
 * rl_catalog_open copies the file into an in-memory SQLite database (search
 * runs there, so the event loop never waits on the disk), then keeps every
 * entity document, type listing, paper file, the index and both llms files
 * as ready bodies with their ETags. Only search runs SQL per request.
 *
 * A catalog is used from the event-loop thread only.
 */
#ifndef RL_CATALOG_CATALOG_H
#define RL_CATALOG_CATALOG_H

#include <jansson.h>
#include <stddef.h>

#include "catalog/cache.h"
#include "catalog/query.h"
#include "catalog/type.h"

typedef struct rl_catalog rl_catalog_t;

/* A ready answer: bytes, their type and ETag. Owned by the catalog. */
typedef struct rl_catalog_body {
    const char *content_type;
    char *bytes;
    size_t len;
    char etag[RL_CATALOG_ETAG_LEN];
} rl_catalog_body_t;

/* What the paper routes need to know about a paper's licence. */
typedef struct rl_catalog_paper {
    int redistributable;
    char *licence_id;
    char *licence_title;
    char *read_at;                       /* where to read it instead: arXiv or the paper's own URL; may be NULL */
    const rl_catalog_body_t *text, *pdf; /* NULL when the catalog holds no such file */
} rl_catalog_paper_t;

typedef struct rl_catalog_entity {
    rl_catalog_type_t type;
    char *slug;
    char *title;
    char *summary;
    char *description; /* "" when the entity has none; search snippets read it */
    rl_catalog_body_t document;
    rl_catalog_paper_t *paper; /* papers only */
} rl_catalog_entity_t;

/* One row of the endpoint list that GET /api/v1 and llms.txt show. */
typedef struct rl_catalog_endpoint {
    const char *path; /* URL template, "/api/v1/{type}/{slug}" */
    const char *description;
} rl_catalog_endpoint_t;

/*
 * Loads db_path (built by rl_catalog_import). base_url ("http://127.0.0.1:8090")
 * makes the absolute links of the llms files; endpoints (nendpoints rows)
 * fill the index. Returns 0, or -1 with the reason logged.
 */
int rl_catalog_open(const char *db_path, const char *base_url, const rl_catalog_endpoint_t *endpoints,
                    size_t nendpoints, rl_catalog_t **out);
void rl_catalog_close(rl_catalog_t *catalog);

/* The entity of type with slug, or NULL. slug needs no validation beforehand. */
const rl_catalog_entity_t *rl_catalog_find(const rl_catalog_t *catalog, rl_catalog_type_t type, const char *slug);
/* GET /api/v1 */
const rl_catalog_body_t *rl_catalog_index(const rl_catalog_t *catalog);
/* GET /api/v1/<type>: every entity of a type with its summary. */
const rl_catalog_body_t *rl_catalog_listing(const rl_catalog_t *catalog, rl_catalog_type_t type);
/* GET /llms.txt (full = 0) and /llms-full.txt (full = 1). */
const rl_catalog_body_t *rl_catalog_llms(const rl_catalog_t *catalog, int full);
/* Number of entities of a type. */
size_t rl_catalog_count(const rl_catalog_t *catalog, rl_catalog_type_t type);

/*
 * Runs a parsed search and writes its JSON answer into *body (malloc'd; the
 * caller frees it) and *len:
 *   {"query", "type", "per", "match": "all"|"any", "total",
 *    "results": {"<type>": {"total", "hits": [{"type", "slug", "title",
 *                "summary", "url", "snippet", "score"}]}}}
 * Every word must match ("all"); when nothing does, any word may ("any").
 * Groups follow the type order and only types with hits appear; each group
 * holds its best `per` hits, best first; snippets mark matches with **
 * (catalog/snippet.h).
 * Returns 0 or RL_E_INTERNAL.
 */
int rl_catalog_search(rl_catalog_t *catalog, const rl_catalog_search_t *search, char **body, size_t *len);

#endif
