#include <malloc.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog/catalog.h"
#include "catalog/document.h"
#include "common/error.h"
#include "catalog/import.h"
#include "catalog/llms.h"
#include "catalog/snippet.h"
#include "common/log.h"
#include "common/strmap.h"

struct rl_catalog {
    sqlite3 *db; /* the in-memory copy */
    sqlite3_stmt *rank_stmt;
    rl_catalog_entity_t *entities; /* indexed by entity id - 1 */
    size_t nentities;
    rl_strmap_t *by_key; /* "<type>/<slug>" -> entity */
    size_t counts[RL_CATALOG_TYPE_COUNT];
    rl_catalog_body_t index, listings[RL_CATALOG_TYPE_COUNT], llms, llms_full;
};

static const char json_mime[] = "application/json; charset=utf-8";
static const char text_mime[] = "text/plain; charset=utf-8";

/* Takes ownership of bytes. */
static void set_body(rl_catalog_body_t *body, const char *content_type, char *bytes, size_t len)
{
    body->content_type = content_type;
    body->bytes = bytes;
    body->len = len;
    rl_catalog_etag(bytes, len, body->etag);
}

static int set_json_body(rl_catalog_body_t *body, json_t *value)
{
    char *text = json_dumps(value, RL_CATALOG_JSON_FLAGS);

    json_decref(value);
    if (text == NULL)
        return -1;
    set_body(body, json_mime, text, strlen(text));
    return 0;
}

static int copy_to_memory(const char *db_path, sqlite3 **out)
{
    sqlite3 *file = NULL, *memory = NULL;
    sqlite3_backup *backup;
    int rc;

    if (sqlite3_open_v2(db_path, &file, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
        sqlite3_open_v2(":memory:", &memory, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        rl_log_error("cannot open the catalog %s: %s", db_path, sqlite3_errmsg(file != NULL ? file : memory));
        sqlite3_close(file);
        sqlite3_close(memory);
        return -1;
    }
    backup = sqlite3_backup_init(memory, "main", file, "main");
    rc = backup != NULL ? sqlite3_backup_step(backup, -1) : SQLITE_ERROR;
    sqlite3_backup_finish(backup);
    sqlite3_close(file);
    if (rc != SQLITE_DONE) {
        rl_log_error("cannot load the catalog %s into memory: %s", db_path, sqlite3_errmsg(memory));
        sqlite3_close(memory);
        return -1;
    }
    *out = memory;
    return 0;
}

static char *dup_column(sqlite3_stmt *stmt, int column)
{
    const char *text = (const char *)sqlite3_column_text(stmt, column);

    return strdup(text != NULL ? text : "");
}

static rl_catalog_paper_t *paper_facts(const json_t *doc)
{
    rl_catalog_paper_t *paper = calloc(1, sizeof(*paper));
    const json_t *licence = json_object_get(doc, "licence"), *links = json_object_get(doc, "links");
    const char *read_at = json_string_value(json_object_get(links, "arxiv"));

    if (paper == NULL)
        return NULL;
    if (read_at == NULL)
        read_at = json_string_value(json_object_get(links, "url"));
    paper->redistributable = json_is_true(json_object_get(licence, "redistributable"));
    paper->licence_id = strdup(json_string_value(json_object_get(licence, "id")));
    paper->licence_title = strdup(json_string_value(json_object_get(licence, "title")));
    paper->read_at = read_at != NULL ? strdup(read_at) : NULL;
    return paper;
}

/*
 * Loads every entity, in id order (the importer writes them by type, then
 * slug), and hands the parsed documents to the caller for the views built
 * from them.
 */
static int load_entities(rl_catalog_t *catalog, json_t *parsed[RL_CATALOG_TYPE_COUNT])
{
    sqlite3_stmt *stmt = NULL;
    sqlite3_int64 max_id = 0;
    int result = -1;

    if (sqlite3_prepare_v2(catalog->db, "SELECT max(id), count(*) FROM entity", -1, &stmt, NULL) != SQLITE_OK ||
        sqlite3_step(stmt) != SQLITE_ROW)
        goto out;
    max_id = sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
    stmt = NULL;
    catalog->nentities = (size_t)max_id;
    catalog->entities = calloc(catalog->nentities > 0 ? catalog->nentities : 1, sizeof(*catalog->entities));
    catalog->by_key = rl_strmap_new(catalog->nentities + 1);
    if (catalog->entities == NULL || catalog->by_key == NULL)
        goto out;
    if (sqlite3_prepare_v2(
            catalog->db,
            "SELECT id, type, slug, title, summary, document FROM entity ORDER BY title COLLATE NOCASE, slug", -1,
            &stmt, NULL) != SQLITE_OK)
        goto out;
    while (sqlite3_step(stmt) == SQLITE_ROW) {
        sqlite3_int64 id = sqlite3_column_int64(stmt, 0);
        int type = sqlite3_column_int(stmt, 1);
        rl_catalog_entity_t *entity;
        char key[RL_CATALOG_SLUG_MAX + 32];
        json_t *doc;

        if (id < 1 || id > max_id || type < 0 || type >= RL_CATALOG_TYPE_COUNT)
            goto out;
        entity = &catalog->entities[id - 1];
        entity->type = type;
        entity->slug = dup_column(stmt, 2);
        entity->title = dup_column(stmt, 3);
        entity->summary = dup_column(stmt, 4);
        entity->document.bytes = dup_column(stmt, 5);
        set_body(&entity->document, json_mime, entity->document.bytes, strlen(entity->document.bytes));
        doc = json_loads(entity->document.bytes, 0, NULL);
        if (doc == NULL)
            goto out;
        entity->description = strdup(json_string_value(json_object_get(doc, "description")) != NULL
                                         ? json_string_value(json_object_get(doc, "description"))
                                         : "");
        if (type == RL_CATALOG_TYPE_PAPER && (entity->paper = paper_facts(doc)) == NULL) {
            json_decref(doc);
            goto out;
        }
        json_array_append_new(parsed[type], doc);
        snprintf(key, sizeof(key), "%d/%s", type, entity->slug);
        if (rl_strmap_put(catalog->by_key, key, entity) != 0)
            goto out;
        ++catalog->counts[type];
    }
    result = 0;

out:
    sqlite3_finalize(stmt);
    if (result != 0)
        rl_log_error("cannot read the catalog's entities: %s", sqlite3_errmsg(catalog->db));
    return result;
}

static int load_paper_files(rl_catalog_t *catalog)
{
    sqlite3_stmt *stmt = NULL;
    int result = -1;

    if (sqlite3_prepare_v2(catalog->db, "SELECT slug, format, content_type, content FROM paper_file", -1, &stmt,
                           NULL) != SQLITE_OK)
        goto out;
    while (sqlite3_step(stmt) == SQLITE_ROW) {
        const rl_catalog_entity_t *entity =
            rl_catalog_find(catalog, RL_CATALOG_TYPE_PAPER, (const char *)sqlite3_column_text(stmt, 0));
        const char *format = (const char *)sqlite3_column_text(stmt, 1);
        size_t len = (size_t)sqlite3_column_bytes(stmt, 3);
        rl_catalog_body_t *body;
        char *bytes;

        if (entity == NULL || entity->paper == NULL)
            continue;
        body = calloc(1, sizeof(*body));
        bytes = malloc(len > 0 ? len : 1);
        if (body == NULL || bytes == NULL) {
            free(body);
            free(bytes);
            goto out;
        }
        memcpy(bytes, sqlite3_column_blob(stmt, 3), len);
        set_body(body, strcmp(format, "pdf") == 0 ? "application/pdf" : text_mime, bytes, len);
        if (strcmp(format, "pdf") == 0)
            entity->paper->pdf = body;
        else
            entity->paper->text = body;
    }
    result = 0;

out:
    sqlite3_finalize(stmt);
    return result;
}

static int build_listings(rl_catalog_t *catalog, json_t *parsed[RL_CATALOG_TYPE_COUNT])
{
    int type;

    for (type = 0; type < RL_CATALOG_TYPE_COUNT; ++type) {
        json_t *items = json_array(), *doc;
        size_t i;
        json_array_foreach(parsed[type], i, doc)
        {
            json_array_append_new(items,
                                  json_pack("{s:O, s:O, s:O, s:O}", "slug", json_object_get(doc, "slug"), "title",
                                            json_object_get(doc, "title"), "summary", json_object_get(doc, "summary"),
                                            "url", json_object_get(doc, "url")));
        }
        if (set_json_body(&catalog->listings[type],
                          json_pack("{s:s, s:I, s:o}", "type", rl_catalog_types[type].plural, "count",
                                    (json_int_t)json_array_size(items), "items", items)) != 0)
            return -1;
    }
    return 0;
}

static int build_index(rl_catalog_t *catalog, const rl_catalog_endpoint_t *endpoints, size_t nendpoints)
{
    json_t *list = json_array(), *types = json_array(), *dataset;
    char *built_at = rl_catalog_meta_value(catalog->db, "built_at"),
         *summary = rl_catalog_meta_value(catalog->db, "summary");
    size_t i, total = 0;
    int type;

    for (i = 0; i < nendpoints; ++i)
        json_array_append_new(list, json_pack("{s:s, s:s, s:s}", "method", "GET", "path", endpoints[i].path,
                                              "description", endpoints[i].description));
    for (type = 0; type < RL_CATALOG_TYPE_COUNT; ++type) {
        char url[64];
        snprintf(url, sizeof(url), "/api/v1/%s/{slug}", rl_catalog_types[type].plural);
        json_array_append_new(types, json_pack("{s:s, s:s, s:I, s:s}", "type", rl_catalog_types[type].plural,
                                               "singular", rl_catalog_types[type].singular, "count",
                                               (json_int_t)catalog->counts[type], "url", url));
        total += catalog->counts[type];
    }
    dataset = json_pack("{s:I, s:s}", "entities", (json_int_t)total, "built_at", built_at != NULL ? built_at : "");
    if (summary != NULL) {
        json_t *parsed = json_loads(summary, 0, NULL);
        json_object_set(dataset, "scores", json_object_get(parsed, "scores"));
        json_decref(parsed);
    }
    free(built_at);
    free(summary);
    return set_json_body(&catalog->index,
                         json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:s, s:s}", "name", "Relay catalog", "description",
                                   "A read-only catalog of AI evaluations, models, tools, leaderboards, "
                                   "organizations, people, capabilities and papers.",
                                   "api_version", "v1", "endpoints", list, "types", types, "dataset", dataset,
                                   "llms_txt", "/llms.txt", "llms_full_txt", "/llms-full.txt"));
}

static int build_llms(rl_catalog_t *catalog, json_t *parsed[RL_CATALOG_TYPE_COUNT], const char *base_url)
{
    int full;

    for (full = 0; full <= 1; ++full) {
        size_t len = 0;
        char *text = rl_catalog_llms_render(parsed, base_url, full, &len);
        if (text == NULL)
            return -1;
        set_body(full ? &catalog->llms_full : &catalog->llms, text_mime, text, len);
    }
    return 0;
}

int rl_catalog_open(const char *db_path, const char *base_url, const rl_catalog_endpoint_t *endpoints,
                    size_t nendpoints, rl_catalog_t **out)
{
    rl_catalog_t *catalog = calloc(1, sizeof(*catalog));
    json_t *parsed[RL_CATALOG_TYPE_COUNT] = {NULL};
    char *version = NULL;
    int result = -1, type;

    if (catalog == NULL)
        return -1;
    for (type = 0; type < RL_CATALOG_TYPE_COUNT; ++type)
        parsed[type] = json_array();
    if (copy_to_memory(db_path, &catalog->db) != 0)
        goto out;
    version = rl_catalog_meta_value(catalog->db, "schema_version");
    if (version == NULL || strcmp(version, RL_CATALOG_SCHEMA_VERSION) != 0) {
        rl_log_error("the catalog %s was built by another version; import it again", db_path);
        goto out;
    }
    if (load_entities(catalog, parsed) != 0 || load_paper_files(catalog) != 0 || build_listings(catalog, parsed) != 0 ||
        build_index(catalog, endpoints, nendpoints) != 0 || build_llms(catalog, parsed, base_url) != 0)
        goto out;
    /* Documents and files now live in their bodies; the in-memory database keeps only what search reads. */
    if (sqlite3_exec(catalog->db, "DROP TABLE entity; DROP TABLE paper_file; VACUUM;", NULL, NULL, NULL) != SQLITE_OK) {
        rl_log_error("cannot trim the in-memory catalog: %s", sqlite3_errmsg(catalog->db));
        goto out;
    }
    /* Names and slugs weigh more than aliases, aliases more than summaries, summaries more than the rest. */
    if (sqlite3_prepare_v2(catalog->db,
                           "SELECT rowid, bm25(entity_fts, 10.0, 8.0, 6.0, 2.0, 1.0, 1.0) FROM entity_fts"
                           " WHERE entity_fts MATCH ?1",
                           -1, &catalog->rank_stmt, NULL) != SQLITE_OK) {
        rl_log_error("cannot prepare the search: %s", sqlite3_errmsg(catalog->db));
        goto out;
    }
    result = 0;

out:
    free(version);
    for (type = 0; type < RL_CATALOG_TYPE_COUNT; ++type)
        json_decref(parsed[type]);
    /* Parsing every document left the heap much larger than what is kept; give the rest back. */
    malloc_trim(0);
    if (result != 0) {
        rl_catalog_close(catalog);
        return -1;
    }
    *out = catalog;
    return 0;
}

static void free_body(rl_catalog_body_t *body)
{
    free(body->bytes);
    body->bytes = NULL;
}

void rl_catalog_close(rl_catalog_t *catalog)
{
    size_t i;
    int type;

    if (catalog == NULL)
        return;
    sqlite3_finalize(catalog->rank_stmt);
    sqlite3_close(catalog->db);
    for (i = 0; i < catalog->nentities; ++i) {
        rl_catalog_entity_t *entity = &catalog->entities[i];
        free(entity->slug);
        free(entity->title);
        free(entity->summary);
        free(entity->description);
        free_body(&entity->document);
        if (entity->paper != NULL) {
            free(entity->paper->licence_id);
            free(entity->paper->licence_title);
            free(entity->paper->read_at);
            if (entity->paper->text != NULL)
                free(entity->paper->text->bytes);
            if (entity->paper->pdf != NULL)
                free(entity->paper->pdf->bytes);
            free((void *)entity->paper->text);
            free((void *)entity->paper->pdf);
            free(entity->paper);
        }
    }
    free(catalog->entities);
    rl_strmap_free(catalog->by_key, NULL);
    free_body(&catalog->index);
    for (type = 0; type < RL_CATALOG_TYPE_COUNT; ++type)
        free_body(&catalog->listings[type]);
    free_body(&catalog->llms);
    free_body(&catalog->llms_full);
    free(catalog);
}

const rl_catalog_entity_t *rl_catalog_find(const rl_catalog_t *catalog, rl_catalog_type_t type, const char *slug)
{
    char key[RL_CATALOG_SLUG_MAX + 32];

    if (slug == NULL || strlen(slug) > RL_CATALOG_SLUG_MAX)
        return NULL;
    snprintf(key, sizeof(key), "%d/%s", (int)type, slug);
    return rl_strmap_get(catalog->by_key, key);
}

const rl_catalog_body_t *rl_catalog_index(const rl_catalog_t *catalog)
{
    return &catalog->index;
}

const rl_catalog_body_t *rl_catalog_listing(const rl_catalog_t *catalog, rl_catalog_type_t type)
{
    return &catalog->listings[type];
}

const rl_catalog_body_t *rl_catalog_llms(const rl_catalog_t *catalog, int full)
{
    return full ? &catalog->llms_full : &catalog->llms;
}

size_t rl_catalog_count(const rl_catalog_t *catalog, rl_catalog_type_t type)
{
    return catalog->counts[type];
}

/* ---- search ---- */

typedef struct hit {
    sqlite3_int64 id;
    double rank;
} hit_t;

typedef struct ranking {
    hit_t hits[RL_CATALOG_TYPE_COUNT][RL_CATALOG_PER_MAX];
    size_t kept[RL_CATALOG_TYPE_COUNT];
    size_t total[RL_CATALOG_TYPE_COUNT];
    size_t all;
} ranking_t;

/* The query written as a slug ("SWE bench" -> "swe-bench"); "" when it cannot be one. */
static void query_as_slug(const char *q, char *out, size_t outsz)
{
    size_t used = 0;
    int dash = 0;

    for (; *q != '\0'; ++q) {
        char c = *q >= 'A' && *q <= 'Z' ? (char)(*q - 'A' + 'a') : *q;
        if ((unsigned char)c >= 0x80) {
            used = 0;
            break;
        }
        if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.') {
            if (dash && used > 0 && used + 1 < outsz)
                out[used++] = '-';
            dash = 0;
            if (used + 1 < outsz)
                out[used++] = c;
        } else {
            dash = 1;
        }
    }
    out[used] = '\0';
    if (!rl_catalog_slug_is_valid(out, used))
        out[0] = '\0';
}

/* Moves the hit with id to the front of its group, adding it when ranking left it out. */
static void promote(ranking_t *ranking, int type, sqlite3_int64 id, double rank, size_t per)
{
    hit_t *hits = ranking->hits[type];
    size_t at = 0;

    while (at < ranking->kept[type] && hits[at].id != id)
        ++at;
    if (at == ranking->kept[type]) {
        if (ranking->kept[type] < per)
            ++ranking->kept[type];
        at = ranking->kept[type] - 1;
    }
    memmove(&hits[1], &hits[0], at * sizeof(*hits));
    hits[0].id = id;
    hits[0].rank = rank;
}

/* Keeps hit among the best `per` of its group, which stays sorted best (lowest bm25) first. */
static void keep(ranking_t *ranking, int type, sqlite3_int64 id, double rank, size_t per)
{
    hit_t *hits = ranking->hits[type];
    size_t n = ranking->kept[type], at = n;

    while (at > 0 && hits[at - 1].rank > rank)
        --at;
    if (at == per)
        return;
    if (n == per)
        --n;
    memmove(&hits[at + 1], &hits[at], (n - at) * sizeof(*hits));
    hits[at].id = id;
    hits[at].rank = rank;
    ranking->kept[type] = n + 1;
}

/*
 * Phase one: rank every match once, keeping the best `per` of each type and
 * counting the rest. The type comes from the loaded entities, and the best
 * are picked here rather than by sorting every match in SQLite, which costs
 * three times as much on broad queries. An entity whose slug is the query
 * itself ("swe bench" names swe-bench) comes first in its group whatever
 * bm25 says: people who type a name mean that thing.
 */
static int rank_matches(rl_catalog_t *catalog, const char *match, const rl_catalog_search_t *search, ranking_t *ranking)
{
    sqlite3_stmt *stmt = catalog->rank_stmt;
    sqlite3_int64 exact[RL_CATALOG_TYPE_COUNT] = {0};
    double exact_rank[RL_CATALOG_TYPE_COUNT] = {0};
    int exact_seen[RL_CATALOG_TYPE_COUNT] = {0};
    char slug[RL_CATALOG_QUERY_MAX + 1];
    int rc, type;

    memset(ranking, 0, sizeof(*ranking));
    query_as_slug(search->q, slug, sizeof(slug));
    for (type = 0; type < RL_CATALOG_TYPE_COUNT && slug[0] != '\0'; ++type) {
        const rl_catalog_entity_t *entity = rl_catalog_find(catalog, type, slug);
        if (entity != NULL)
            exact[type] = (sqlite3_int64)(entity - catalog->entities) + 1;
    }
    sqlite3_reset(stmt);
    sqlite3_bind_text(stmt, 1, match, -1, SQLITE_STATIC);
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        sqlite3_int64 id = sqlite3_column_int64(stmt, 0);
        double rank = sqlite3_column_double(stmt, 1);
        if (id < 1 || (size_t)id > catalog->nentities || catalog->entities[id - 1].slug == NULL)
            continue;
        type = catalog->entities[id - 1].type;
        if (search->type >= 0 && type != search->type)
            continue;
        ++ranking->total[type];
        ++ranking->all;
        if (id == exact[type]) {
            exact_seen[type] = 1;
            exact_rank[type] = rank;
        }
        keep(ranking, type, id, rank, (size_t)search->per);
    }
    sqlite3_reset(stmt);
    if (rc != SQLITE_DONE) {
        rl_log_error("search failed: %s", sqlite3_errmsg(catalog->db));
        return -1;
    }
    for (type = 0; type < RL_CATALOG_TYPE_COUNT; ++type) {
        if (exact_seen[type])
            promote(ranking, type, exact[type], exact_rank[type], (size_t)search->per);
    }
    return 0;
}

/* The summary's snippet when the query's words are there, else the description's, else the summary itself. */
static json_t *snippet(const char *q, const rl_catalog_entity_t *entity)
{
    char text[1024];

    if (rl_catalog_snippet(q, entity->summary, text, sizeof(text)) ||
        rl_catalog_snippet(q, entity->description, text, sizeof(text)))
        return json_string(text);
    return json_string(entity->summary);
}

int rl_catalog_search(rl_catalog_t *catalog, const rl_catalog_search_t *search, char **body, size_t *len)
{
    char match[RL_CATALOG_MATCH_MAX];
    ranking_t *ranking = malloc(sizeof(*ranking));
    json_t *results, *answer;
    int any, type;
    size_t i;

    if (ranking == NULL)
        return RL_E_INTERNAL;
    /* Every word first; when that finds nothing and there are several words, any of them. */
    for (any = 0;; any = 1) {
        int terms = rl_catalog_query_match(search->q, any, match, sizeof(match));
        if (terms <= 0 || rank_matches(catalog, match, search, ranking) != 0) {
            free(ranking);
            return RL_E_INTERNAL;
        }
        if (ranking->all > 0 || terms == 1 || any)
            break;
    }
    results = json_object();
    for (type = 0; type < RL_CATALOG_TYPE_COUNT; ++type) {
        json_t *hits = json_array();
        if (ranking->kept[type] == 0) {
            json_decref(hits);
            continue;
        }
        for (i = 0; i < ranking->kept[type]; ++i) {
            const hit_t *hit = &ranking->hits[type][i];
            const rl_catalog_entity_t *entity =
                hit->id >= 1 && (size_t)hit->id <= catalog->nentities ? &catalog->entities[hit->id - 1] : NULL;
            char url[160];
            if (entity == NULL || entity->slug == NULL)
                continue;
            snprintf(url, sizeof(url), "/api/v1/%s/%s", rl_catalog_types[type].plural, entity->slug);
            json_array_append_new(hits, json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:f}", "type",
                                                  rl_catalog_types[type].plural, "slug", entity->slug, "title",
                                                  entity->title, "summary", entity->summary, "url", url, "snippet",
                                                  snippet(search->q, entity), "score", round(-hit->rank * 1e6) / 1e6));
        }
        json_object_set_new(results, rl_catalog_types[type].plural,
                            json_pack("{s:I, s:o}", "total", (json_int_t)ranking->total[type], "hits", hits));
    }
    answer = json_pack("{s:s, s:s?, s:i, s:s, s:I, s:o}", "query", search->q, "type",
                       search->type >= 0 ? rl_catalog_types[search->type].plural : NULL, "per", search->per, "match",
                       any ? "any" : "all", "total", (json_int_t)ranking->all, "results", results);
    free(ranking);
    *body = answer != NULL ? json_dumps(answer, RL_CATALOG_JSON_FLAGS) : NULL;
    json_decref(answer);
    if (*body == NULL)
        return RL_E_INTERNAL;
    *len = strlen(*body);
    return 0;
}
