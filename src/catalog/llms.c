#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog/llms.h"

static size_t total_entities(json_t *const documents[])
{
    size_t n = 0;
    int type;

    for (type = 0; type < RL_CATALOG_TYPE_COUNT; ++type)
        n += json_array_size(documents[type]);
    return n;
}

static const char *text(const json_t *object, const char *key)
{
    const char *value = json_string_value(json_object_get(object, key));

    return value != NULL ? value : "";
}

/* Markdown link text must not close its own brackets. */
static void put_link_text(FILE *out, const char *s)
{
    for (; *s != '\0'; ++s) {
        if (*s == '[' || *s == ']')
            fputc('\\', out);
        fputc(*s, out);
    }
}

static void put_value(FILE *out, const json_t *value)
{
    size_t i;
    json_t *item;

    if (json_is_string(value))
        fputs(json_string_value(value), out);
    else if (json_is_integer(value))
        fprintf(out, "%lld", (long long)json_integer_value(value));
    else if (json_is_real(value))
        fprintf(out, "%g", json_real_value(value));
    else if (json_is_boolean(value))
        fputs(json_is_true(value) ? "yes" : "no", out);
    json_array_foreach(value, i, item)
    {
        if (i > 0)
            fputs(", ", out);
        put_value(out, item);
    }
}

/* "open_weights" reads as "Open weights". */
static void put_label(FILE *out, const char *key)
{
    fputc(key[0] >= 'a' && key[0] <= 'z' ? key[0] - 'a' + 'A' : key[0], out);
    for (++key; *key != '\0'; ++key)
        fputc(*key == '_' ? ' ' : *key, out);
}

static void put_score(FILE *out, const json_t *row)
{
    const json_t *model = json_object_get(row, "model"), *eval = json_object_get(row, "eval");
    const char *unit = text(row, "unit");

    fputs("  - ", out);
    if (model != NULL)
        fprintf(out, "%s", text(model, "title"));
    if (model != NULL && eval != NULL)
        fputs(" on ", out);
    if (eval != NULL)
        fprintf(out, "%s", text(eval, "title"));
    fprintf(out, ": %g%s%s", json_number_value(json_object_get(row, "value")), strcmp(unit, "%") == 0 ? "" : " ", unit);
    if (json_object_get(row, "setting") != NULL)
        fprintf(out, " (%s)", text(row, "setting"));
    fprintf(out, ", reported at %s\n", text(row, "source_url"));
}

static void put_full_entity(FILE *out, const json_t *doc, const char *base_url)
{
    const char *key;
    json_t *value, *list, *ref, *scores = json_object_get(doc, "scores");
    size_t i;

    fprintf(out, "### %s\n\n", text(doc, "title"));
    fprintf(out, "%s%s (%s/%s)\n\n", base_url, text(doc, "url"), text(doc, "type"), text(doc, "slug"));
    fprintf(out, "%s\n\n", text(doc, "summary"));
    if (json_object_get(doc, "description") != NULL)
        fprintf(out, "%s\n\n", text(doc, "description"));
    if (json_array_size(json_object_get(doc, "aliases")) > 0) {
        fputs("- Also known as: ", out);
        put_value(out, json_object_get(doc, "aliases"));
        fputc('\n', out);
    }
    json_object_foreach(json_object_get(doc, "attributes"), key, value)
    {
        fputs("- ", out);
        put_label(out, key);
        fputs(": ", out);
        put_value(out, value);
        fputc('\n', out);
    }
    if (json_object_get(doc, "licence") != NULL)
        fprintf(out, "- Licence: %s%s\n", text(json_object_get(doc, "licence"), "title"),
                json_is_true(json_object_get(json_object_get(doc, "licence"), "redistributable"))
                    ? " (the catalog serves its text)"
                    : "");
    json_object_foreach(json_object_get(doc, "files"), key, value)
    {
        fprintf(out, "- Full %s: %s%s\n", key, base_url, json_string_value(value));
    }
    json_object_foreach(json_object_get(doc, "links"), key, value)
    {
        fputs("- ", out);
        put_label(out, key);
        fprintf(out, ": %s\n", json_string_value(value));
    }
    json_object_foreach(json_object_get(doc, "relationships"), key, list)
    {
        fputs("- ", out);
        put_label(out, key);
        fputs(": ", out);
        json_array_foreach(list, i, ref)
        {
            fprintf(out, "%s%s (%s/%s)", i > 0 ? "; " : "", text(ref, "title"), text(ref, "type"), text(ref, "slug"));
        }
        fputc('\n', out);
    }
    if (json_array_size(scores) > 0) {
        /* A model has a handful of scores, all shown by eval; an eval or a leaderboard shows its best. */
        int model = strcmp(text(doc, "type"), "models") == 0;
        size_t n = json_array_size(scores),
               shown = model || n < RL_CATALOG_LLMS_TOP_SCORES ? n : RL_CATALOG_LLMS_TOP_SCORES;
        if (model)
            fputs("- Scores:\n", out);
        else
            fprintf(out, "- Top scores (%zu in the catalog):\n", n);
        for (i = 0; i < shown; ++i)
            put_score(out, json_array_get(scores, i));
    }
    fputc('\n', out);
}

char *rl_catalog_llms_render(json_t *const documents[RL_CATALOG_TYPE_COUNT], const char *base_url, int full,
                             size_t *len)
{
    char *bytes = NULL;
    size_t size = 0, i;
    FILE *out = open_memstream(&bytes, &size);
    json_t *doc;
    int type;

    if (out == NULL)
        return NULL;
    fprintf(out, "# Relay catalog%s\n\n", full ? " (full text)" : "");
    fprintf(out,
            "> A read-only catalog of AI evaluations and of the models, tools, leaderboards, organizations, "
            "people, "
            "capabilities and papers around them: %zu entities, with scores as their makers or authors "
            "reported them "
            "and a source URL for each.\n\n",
            total_entities(documents));
    fprintf(out,
            "Every link is a JSON document of the catalog API (%s/api/v1 lists every endpoint). "
            "Search with %s/api/v1/search?q=words&type=models&per=5. %s\n\n",
            base_url, base_url,
            full ? "This file inlines each entity's description, facts, relationships and top scores; "
                   "the short map is /llms.txt."
                 : "The same map with descriptions, relationships and top scores inlined is /llms-full.txt.");
    for (type = 0; type < RL_CATALOG_TYPE_COUNT; ++type) {
        if (json_array_size(documents[type]) == 0)
            continue;
        fprintf(out, "## %s\n\n", rl_catalog_types[type].heading);
        json_array_foreach(documents[type], i, doc)
        {
            if (full) {
                put_full_entity(out, doc, base_url);
                continue;
            }
            fputs("- [", out);
            put_link_text(out, text(doc, "title"));
            fprintf(out, "](%s%s): %s\n", base_url, text(doc, "url"), text(doc, "summary"));
        }
        if (!full)
            fputc('\n', out);
    }
    if (fclose(out) != 0) {
        free(bytes);
        return NULL;
    }
    *len = size;
    return bytes;
}
