#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "catalog/document.h"

void rl_catalog_document_path(rl_catalog_type_t type, const char *slug, char *buf, size_t bufsz)
{
    snprintf(buf, bufsz, "/api/v1/%s/%s", rl_catalog_types[type].plural, slug);
}

static json_t *reference(rl_catalog_type_t type, const char *slug, const json_t *entity)
{
    char path[160];

    rl_catalog_document_path(type, slug, path, sizeof(path));
    return json_pack("{s:s, s:s, s:O, s:s}", "type", rl_catalog_types[type].plural, "slug", slug, "title",
                     json_object_get(entity, "title"), "url", path);
}

/* The visible entity named slug, or NULL when it is missing or hidden. */
static json_t *visible(const rl_catalog_dataset_t *dataset, rl_catalog_type_t type, const char *slug)
{
    json_t *entity = slug != NULL ? json_object_get(dataset->entities[type], slug) : NULL;

    return entity != NULL && !rl_catalog_dataset_is_hidden(dataset, entity) ? entity : NULL;
}

static void copy_if_present(json_t *to, const json_t *from, const char *key)
{
    json_t *value = json_object_get(from, key);

    if (value != NULL)
        json_object_set(to, key, value);
}

static json_t *skeleton(const rl_catalog_dataset_t *dataset, rl_catalog_type_t type, const char *slug,
                        const json_t *entity)
{
    json_t *doc = json_object(), *attributes = json_object(), *links = json_object(), *value;
    char path[160];
    const char *key;

    json_object_set_new(doc, "type", json_string(rl_catalog_types[type].plural));
    json_object_set_new(doc, "slug", json_string(slug));
    copy_if_present(doc, entity, "title");
    copy_if_present(doc, entity, "summary");
    copy_if_present(doc, entity, "description");
    rl_catalog_document_path(type, slug, path, sizeof(path));
    json_object_set_new(doc, "url", json_string(path));
    copy_if_present(doc, entity, "aliases");
    json_object_foreach((json_t *)entity, key, value)
    {
        rl_catalog_role_t role = rl_catalog_dataset_role(type, key);
        if (role == RL_CATALOG_ROLE_ATTRIBUTE)
            json_object_set(attributes, key, value);
        else if (role == RL_CATALOG_ROLE_LINK || (role == RL_CATALOG_ROLE_CORE && strcmp(key, "homepage") == 0))
            json_object_set(links, key, value);
    }
    if (type == RL_CATALOG_TYPE_PAPER) {
        const char *arxiv = json_string_value(json_object_get(entity, "arxiv"));
        json_t *licence = json_object_get(dataset->licences, json_string_value(json_object_get(entity, "licence")));
        json_t *files = json_object();
        if (arxiv != NULL) {
            char url[64];
            snprintf(url, sizeof(url), "https://arxiv.org/abs/%s", arxiv);
            json_object_set_new(links, "arxiv", json_string(url));
        }
        json_object_set_new(doc, "attributes", attributes);
        json_object_set_new(doc, "links", links);
        json_object_set_new(doc, "licence",
                            json_pack("{s:O, s:O, s:O}", "id", json_object_get(licence, "id"), "title",
                                      json_object_get(licence, "title"), "redistributable",
                                      json_object_get(licence, "redistributable")));
        copy_if_present(json_object_get(doc, "licence"), licence, "url");
        if (json_object_get(entity, "text") != NULL) {
            snprintf(path, sizeof(path), "/api/v1/papers/%s/text", slug);
            json_object_set_new(files, "text", json_string(path));
        }
        if (json_object_get(entity, "pdf") != NULL) {
            snprintf(path, sizeof(path), "/api/v1/papers/%s/pdf", slug);
            json_object_set_new(files, "pdf", json_string(path));
        }
        json_object_set_new(doc, "files", files);
    } else {
        json_object_set_new(doc, "attributes", attributes);
        json_object_set_new(doc, "links", links);
    }
    json_object_set_new(doc, "relationships", json_object());
    if (type == RL_CATALOG_TYPE_MODEL || type == RL_CATALOG_TYPE_EVAL || type == RL_CATALOG_TYPE_LEADERBOARD)
        json_object_set_new(doc, "scores", json_array());
    return doc;
}

static void relate(json_t *doc, const char *relation, json_t *ref)
{
    json_t *relationships = json_object_get(doc, "relationships"), *list = json_object_get(relationships, relation);

    if (list == NULL) {
        list = json_array();
        json_object_set_new(relationships, relation, list);
    }
    json_array_append_new(list, ref);
}

static void link_entities(const rl_catalog_dataset_t *dataset, json_t *documents[RL_CATALOG_TYPE_COUNT])
{
    size_t i, j;

    for (i = 0; i < rl_catalog_nlinks; ++i) {
        const rl_catalog_link_t *link = &rl_catalog_links[i];
        const char *slug;
        json_t *doc;

        json_object_foreach(documents[link->from], slug, doc)
        {
            json_t *entity = json_object_get(dataset->entities[link->from], slug);
            json_t *value = json_object_get(entity, link->field), *item;
            json_t *single = json_array();
            if (value != NULL && !link->many)
                json_array_append(single, value);
            json_array_foreach(link->many ? value : single, j, item)
            {
                const char *named = json_string_value(item);
                json_t *target = visible(dataset, link->to, named);
                if (target == NULL)
                    continue;
                relate(doc, link->relation, reference(link->to, named, target));
                relate(json_object_get(documents[link->to], named), link->inverse, reference(link->from, slug, entity));
            }
            json_decref(single);
        }
    }
}

/* ---- sorting ---- */

static const char *text_at(const json_t *object, const char *key, const char *inner)
{
    const json_t *value = json_object_get(object, key);

    if (inner != NULL)
        value = json_object_get(value, inner);
    return json_string_value(value) != NULL ? json_string_value(value) : "";
}

static double value_of(const json_t *row)
{
    return json_number_value(json_object_get(row, "value"));
}

static int by_title(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    int order = strcasecmp(text_at(x, "title", NULL), text_at(y, "title", NULL));

    return order != 0 ? order : strcmp(text_at(x, "slug", NULL), text_at(y, "slug", NULL));
}

/* A model's scores: by eval, then best first. */
static int by_eval_then_value(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    int order = strcasecmp(text_at(x, "eval", "title"), text_at(y, "eval", "title"));

    if (order != 0)
        return order;
    return value_of(x) < value_of(y) ? 1 : value_of(x) > value_of(y) ? -1 : 0;
}

/* An eval's scores: best first (every eval in this catalog counts higher as better), then by model. */
static int by_value_then_model(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;

    if (value_of(x) != value_of(y))
        return value_of(x) < value_of(y) ? 1 : -1;
    return strcmp(text_at(x, "model", "title"), text_at(y, "model", "title"));
}

static int by_eval_value_model(const void *a, const void *b)
{
    int order = by_eval_then_value(a, b);

    return order != 0
               ? order
               : strcmp(text_at(*(json_t *const *)a, "model", "title"), text_at(*(json_t *const *)b, "model", "title"));
}

static void sort_array(json_t *array, int (*compare)(const void *, const void *))
{
    size_t n = json_array_size(array), i;
    json_t **items;

    if (n < 2)
        return;
    items = malloc(n * sizeof(*items));
    if (items == NULL)
        return;
    for (i = 0; i < n; ++i)
        items[i] = json_incref(json_array_get(array, i));
    qsort(items, n, sizeof(*items), compare);
    json_array_clear(array);
    for (i = 0; i < n; ++i)
        json_array_append_new(array, items[i]);
    free(items);
}

/* ---- scores ---- */

/*
 * One score as a document shows it: the eval and/or the model it is about
 * (references, stolen; either may be NULL), then the figure and its source.
 */
static json_t *score_row(const json_t *score, json_t *eval, json_t *model)
{
    const char *unit = json_string_value(json_object_get(score, "unit"));
    json_t *row = json_object();

    if (eval != NULL)
        json_object_set_new(row, "eval", eval);
    if (model != NULL)
        json_object_set_new(row, "model", model);
    copy_if_present(row, score, "value");
    json_object_set_new(row, "unit", json_string(unit != NULL ? unit : "%"));
    copy_if_present(row, score, "setting");
    copy_if_present(row, score, "date");
    copy_if_present(row, score, "source_url");
    copy_if_present(row, score, "note");
    return row;
}

static void attach_scores(const rl_catalog_dataset_t *dataset, json_t *documents[RL_CATALOG_TYPE_COUNT])
{
    json_t *score;
    size_t i;

    json_array_foreach(dataset->scores, i, score)
    {
        const char *model_slug = json_string_value(json_object_get(score, "model"));
        const char *eval_slug = json_string_value(json_object_get(score, "eval"));
        json_t *model = visible(dataset, RL_CATALOG_TYPE_MODEL, model_slug);
        json_t *eval = visible(dataset, RL_CATALOG_TYPE_EVAL, eval_slug);
        json_t *row, *boards, *board;
        size_t j;

        if (model == NULL || eval == NULL || rl_catalog_dataset_is_hidden(dataset, score))
            continue;
        row = score_row(score, reference(RL_CATALOG_TYPE_EVAL, eval_slug, eval), NULL);
        json_array_append_new(json_object_get(json_object_get(documents[RL_CATALOG_TYPE_MODEL], model_slug), "scores"),
                              row);
        row = score_row(score, NULL, reference(RL_CATALOG_TYPE_MODEL, model_slug, model));
        json_array_append_new(json_object_get(json_object_get(documents[RL_CATALOG_TYPE_EVAL], eval_slug), "scores"),
                              row);
        /* A leaderboard's rows are the catalog's scores on the evals it ranks. */
        boards = json_object_get(
            json_object_get(json_object_get(documents[RL_CATALOG_TYPE_EVAL], eval_slug), "relationships"),
            "leaderboards");
        json_array_foreach(boards, j, board)
        {
            json_t *doc = json_object_get(documents[RL_CATALOG_TYPE_LEADERBOARD], text_at(board, "slug", NULL));
            row = score_row(score, reference(RL_CATALOG_TYPE_EVAL, eval_slug, eval),
                            reference(RL_CATALOG_TYPE_MODEL, model_slug, model));
            json_array_append_new(json_object_get(doc, "scores"), row);
        }
    }
}

static int compare_keys(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int rl_catalog_documents_build(const rl_catalog_dataset_t *dataset, json_t *documents[RL_CATALOG_TYPE_COUNT])
{
    int type;

    for (type = 0; type < RL_CATALOG_TYPE_COUNT; ++type) {
        size_t n = json_object_size(dataset->entities[type]), count = 0, i;
        const char **slugs = malloc((n > 0 ? n : 1) * sizeof(*slugs));
        const char *slug;
        json_t *entity;

        documents[type] = json_object();
        if (slugs == NULL || documents[type] == NULL) {
            free(slugs);
            goto fail;
        }
        json_object_foreach(dataset->entities[type], slug, entity)
        {
            if (!rl_catalog_dataset_is_hidden(dataset, entity))
                slugs[count++] = slug;
        }
        qsort(slugs, count, sizeof(*slugs), compare_keys);
        for (i = 0; i < count; ++i)
            json_object_set_new(documents[type], slugs[i],
                                skeleton(dataset, type, slugs[i], json_object_get(dataset->entities[type], slugs[i])));
        free(slugs);
    }
    link_entities(dataset, documents);
    attach_scores(dataset, documents);
    for (type = 0; type < RL_CATALOG_TYPE_COUNT; ++type) {
        const char *slug, *name;
        json_t *doc, *list;
        json_object_foreach(documents[type], slug, doc)
        {
            json_object_foreach(json_object_get(doc, "relationships"), name, list)
            {
                sort_array(list, by_title);
            }
            sort_array(json_object_get(doc, "scores"), type == RL_CATALOG_TYPE_MODEL  ? by_eval_then_value
                                                       : type == RL_CATALOG_TYPE_EVAL ? by_value_then_model
                                                                                      : by_eval_value_model);
        }
    }
    return 0;

fail:
    for (type = 0; type < RL_CATALOG_TYPE_COUNT; ++type) {
        json_decref(documents[type]);
        documents[type] = NULL;
    }
    return -1;
}

static void add_text(FILE *out, const json_t *value)
{
    size_t i;
    json_t *item;

    if (json_is_string(value)) {
        fputs(json_string_value(value), out);
        fputc('\n', out);
    }
    json_array_foreach(value, i, item)
    {
        if (json_is_string(item))
            add_text(out, item);
    }
}

char *rl_catalog_document_search_facts(const json_t *document)
{
    const char *key;
    json_t *value, *list, *ref;
    char *text = NULL;
    size_t len = 0, i;
    FILE *out = open_memstream(&text, &len);

    if (out == NULL)
        return NULL;
    json_object_foreach(json_object_get(document, "attributes"), key, value)
    {
        add_text(out, value);
    }
    json_object_foreach(json_object_get(document, "relationships"), key, list)
    {
        json_array_foreach(list, i, ref)
        {
            add_text(out, json_object_get(ref, "title"));
        }
    }
    fclose(out);
    return text;
}
