#include <dirent.h>
#include <stdarg.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "catalog/dataset.h"
#include "catalog/query.h"
#include "http/validate.h"

#define DIR_DEPTH_MAX 8
#define FILES_MAX     100000

/* ---- field checks: each returns nonzero when the string is invalid ---- */

static int check_slug(const char *s, size_t len)
{
    return !rl_catalog_slug_is_valid(s, len);
}

/* One line of text: no control characters, no line breaks. */
static int check_line(const char *s, size_t len)
{
    return !rl_catalog_query_text_is_valid(s, len);
}

static int check_url(const char *s, size_t len)
{
    size_t i, scheme = len >= 8 && memcmp(s, "https://", 8) == 0 ? 8 : len >= 7 && memcmp(s, "http://", 7) == 0 ? 7 : 0;

    if (scheme == 0 || len == scheme || s[scheme] == '/')
        return 1;
    for (i = 0; i < len; ++i) {
        unsigned char c = (unsigned char)s[i];
        if (c <= 0x20 || c >= 0x7F || c == '"' || c == '<' || c == '>' || c == '\\')
            return 1;
    }
    return 0;
}

static int digits(const char *s, size_t n)
{
    size_t i;

    for (i = 0; i < n; ++i) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
    }
    return 1;
}

/* YYYY, YYYY-MM or YYYY-MM-DD. */
static int check_date(const char *s, size_t len)
{
    int month, day;

    if ((len != 4 && len != 7 && len != 10) || !digits(s, 4))
        return 1;
    if (len == 4)
        return 0;
    if (s[4] != '-' || !digits(s + 5, 2))
        return 1;
    month = (s[5] - '0') * 10 + (s[6] - '0');
    if (month < 1 || month > 12)
        return 1;
    if (len == 7)
        return 0;
    if (s[7] != '-' || !digits(s + 8, 2))
        return 1;
    day = (s[8] - '0') * 10 + (s[9] - '0');
    return day < 1 || day > 31;
}

/* A modern arXiv identifier: YYMM.NNNN or YYMM.NNNNN, optionally with a version. */
static int check_arxiv(const char *s, size_t len)
{
    size_t n;

    if (len < 9 || !digits(s, 4) || s[4] != '.')
        return 1;
    for (n = 5; n < len && s[n] >= '0' && s[n] <= '9'; ++n) {
    }
    if (n - 5 < 4 || n - 5 > 5)
        return 1;
    return n < len && (s[n] != 'v' || n + 1 == len || !digits(s + n + 1, len - n - 1));
}

/* A path inside the dataset folder: relative, no "..", no hidden parts. */
static int check_path(const char *s, size_t len)
{
    size_t i;

    if (len == 0 || s[0] == '/' || s[0] == '.')
        return 1;
    for (i = 0; i < len; ++i) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
              c == '.' || c == '/'))
            return 1;
        if (c == '/' && (i + 1 == len || s[i + 1] == '.' || s[i + 1] == '/'))
            return 1;
    }
    return 0;
}

/* ---- field tables ---- */

#define SLUG_MESSAGE "must be lowercase letters, digits, '-' and '.', such as llama-3.1-405b"
#define URL_MESSAGE  "must be an http:// or https:// URL without spaces"
#define LINE_MESSAGE "must be one line of UTF-8 text without control characters"
#define DATE_MESSAGE "must be a date written YYYY, YYYY-MM or YYYY-MM-DD"

/* clang-format off */
static const rl_field_t slug_item = RL_FIELD_STRING_CHECK(NULL, RL_F_REQUIRED, 1, RL_CATALOG_SLUG_MAX, check_slug, SLUG_MESSAGE);
static const rl_field_t line_item = RL_FIELD_STRING_CHECK(NULL, RL_F_REQUIRED, 1, 120, check_line, LINE_MESSAGE);

#define SLUG_FIELD(name_, flags_) RL_FIELD_STRING_CHECK(name_, flags_, 1, RL_CATALOG_SLUG_MAX, check_slug, SLUG_MESSAGE)
#define SLUGS_FIELD(name_) RL_FIELD_ARRAY(name_, 0, 0, 200, &slug_item)
#define URL_FIELD(name_, flags_) RL_FIELD_STRING_CHECK(name_, flags_, 1, 500, check_url, URL_MESSAGE)
#define LINE_FIELD(name_, flags_, max_) RL_FIELD_STRING_CHECK(name_, flags_, 1, max_, check_line, LINE_MESSAGE)
#define DATE_FIELD(name_, flags_) RL_FIELD_STRING_CHECK(name_, flags_, 4, 10, check_date, DATE_MESSAGE)

/* Every entity starts with these; rl_catalog_dataset_role() calls them CORE. */
#define CORE_FIELDS \
    SLUG_FIELD("slug", RL_F_REQUIRED), \
    LINE_FIELD("title", RL_F_REQUIRED, 120), \
    LINE_FIELD("summary", RL_F_REQUIRED, 240), \
    RL_FIELD_STRING("description", 0, 1, 4000), \
    RL_FIELD_ARRAY("aliases", 0, 0, 10, &line_item), \
    SLUG_FIELD("source", 0), \
    URL_FIELD("homepage", 0)

static const char *const tool_kinds[] = {"harness", "library", "framework", "platform", "service", NULL};
static const char *const organization_kinds[] = {"company", "lab", "university", "nonprofit", "government",
                                                 "community", NULL};
static const char *const score_units[] = {"%", "points", "rating", NULL};

static const rl_field_t eval_fields[] = {
    CORE_FIELDS,
    LINE_FIELD("metric", 0, 80),
    RL_FIELD_INTEGER_MIN("items", 0, 1),
    DATE_FIELD("released", 0),
    SLUGS_FIELD("papers"),
    SLUGS_FIELD("capabilities"),
    SLUG_FIELD("organization", 0),
    URL_FIELD("repository", 0),
    URL_FIELD("dataset", 0),
    RL_FIELD_END,
};
static const rl_field_t model_fields[] = {
    CORE_FIELDS,
    SLUG_FIELD("organization", RL_F_REQUIRED),
    DATE_FIELD("released", RL_F_REQUIRED),
    LINE_FIELD("parameters", 0, 60),
    RL_FIELD_BOOLEAN("open_weights", RL_F_REQUIRED),
    LINE_FIELD("weights_licence", 0, 80),
    RL_FIELD_INTEGER_MIN("context_window", 0, 1),
    SLUGS_FIELD("papers"),
    SLUG_FIELD("base_model", 0),
    RL_FIELD_END,
};
static const rl_field_t tool_fields[] = {
    CORE_FIELDS,
    RL_FIELD_ENUM("kind", RL_F_REQUIRED, tool_kinds),
    SLUG_FIELD("organization", 0),
    URL_FIELD("repository", 0),
    LINE_FIELD("code_licence", 0, 80),
    SLUGS_FIELD("evals"),
    SLUGS_FIELD("papers"),
    RL_FIELD_END,
};
static const rl_field_t leaderboard_fields[] = {
    CORE_FIELDS,
    SLUG_FIELD("organization", 0),
    SLUGS_FIELD("evals"),
    LINE_FIELD("method", 0, 200),
    RL_FIELD_END,
};
static const rl_field_t organization_fields[] = {
    CORE_FIELDS,
    RL_FIELD_ENUM("kind", RL_F_REQUIRED, organization_kinds),
    LINE_FIELD("country", 0, 60),
    RL_FIELD_INTEGER_RANGE("founded", 0, 1000, 2100),
    RL_FIELD_END,
};
static const rl_field_t person_fields[] = {
    CORE_FIELDS,
    SLUGS_FIELD("organizations"),
    RL_FIELD_END,
};
static const rl_field_t capability_fields[] = {
    CORE_FIELDS,
    RL_FIELD_END,
};
static const rl_field_t paper_fields[] = {
    CORE_FIELDS,
    RL_FIELD_STRING_CHECK("arxiv", 0, 9, 16, check_arxiv, "must be an arXiv identifier such as 2310.06770"),
    RL_FIELD_INTEGER_RANGE("year", RL_F_REQUIRED, 1900, 2100),
    LINE_FIELD("venue", 0, 120),
    RL_FIELD_ARRAY("authors", RL_F_REQUIRED, 1, 100, &line_item),
    SLUGS_FIELD("people"),
    SLUGS_FIELD("organizations"),
    SLUG_FIELD("licence", RL_F_REQUIRED),
    RL_FIELD_STRING_CHECK("text", 0, 1, 200, check_path, "must be a path inside the catalog folder"),
    RL_FIELD_STRING_CHECK("pdf", 0, 1, 200, check_path, "must be a path inside the catalog folder"),
    URL_FIELD("url", 0),
    RL_FIELD_END,
};
static const rl_field_t score_fields[] = {
    SLUG_FIELD("model", RL_F_REQUIRED),
    SLUG_FIELD("eval", RL_F_REQUIRED),
    RL_FIELD_NUMBER("value", RL_F_REQUIRED),
    RL_FIELD_ENUM("unit", 0, score_units),
    LINE_FIELD("setting", 0, 120),
    URL_FIELD("source_url", RL_F_REQUIRED),
    DATE_FIELD("date", 0),
    SLUG_FIELD("source", 0),
    LINE_FIELD("note", 0, 300),
    RL_FIELD_END,
};
static const rl_field_t source_fields[] = {
    SLUG_FIELD("id", RL_F_REQUIRED),
    LINE_FIELD("title", RL_F_REQUIRED, 120),
    RL_FIELD_BOOLEAN("hidden", RL_F_REQUIRED),
    RL_FIELD_STRING("description", 0, 1, 2000),
    URL_FIELD("url", 0),
    RL_FIELD_END,
};
static const rl_field_t licence_fields[] = {
    SLUG_FIELD("id", RL_F_REQUIRED),
    LINE_FIELD("title", RL_F_REQUIRED, 120),
    URL_FIELD("url", 0),
    RL_FIELD_BOOLEAN("redistributable", RL_F_REQUIRED),
    RL_FIELD_END,
};
/* clang-format on */

static const rl_schema_t entity_schemas[RL_CATALOG_TYPE_COUNT] = {
    [RL_CATALOG_TYPE_EVAL] = RL_SCHEMA(eval_fields),
    [RL_CATALOG_TYPE_MODEL] = RL_SCHEMA(model_fields),
    [RL_CATALOG_TYPE_TOOL] = RL_SCHEMA(tool_fields),
    [RL_CATALOG_TYPE_LEADERBOARD] = RL_SCHEMA(leaderboard_fields),
    [RL_CATALOG_TYPE_ORGANIZATION] = RL_SCHEMA(organization_fields),
    [RL_CATALOG_TYPE_PERSON] = RL_SCHEMA(person_fields),
    [RL_CATALOG_TYPE_CAPABILITY] = RL_SCHEMA(capability_fields),
    [RL_CATALOG_TYPE_PAPER] = RL_SCHEMA(paper_fields),
};
static const rl_schema_t score_schema = RL_SCHEMA(score_fields);
static const rl_schema_t source_schema = RL_SCHEMA(source_fields);
static const rl_schema_t licence_schema = RL_SCHEMA(licence_fields);

const rl_catalog_link_t rl_catalog_links[] = {
    {RL_CATALOG_TYPE_EVAL, "papers", 1, RL_CATALOG_TYPE_PAPER, "papers", "evals"},
    {RL_CATALOG_TYPE_EVAL, "capabilities", 1, RL_CATALOG_TYPE_CAPABILITY, "capabilities", "evals"},
    {RL_CATALOG_TYPE_EVAL, "organization", 0, RL_CATALOG_TYPE_ORGANIZATION, "organization", "evals"},
    {RL_CATALOG_TYPE_MODEL, "organization", 0, RL_CATALOG_TYPE_ORGANIZATION, "organization", "models"},
    {RL_CATALOG_TYPE_MODEL, "papers", 1, RL_CATALOG_TYPE_PAPER, "papers", "models"},
    {RL_CATALOG_TYPE_MODEL, "base_model", 0, RL_CATALOG_TYPE_MODEL, "base_model", "derived_models"},
    {RL_CATALOG_TYPE_TOOL, "organization", 0, RL_CATALOG_TYPE_ORGANIZATION, "organization", "tools"},
    {RL_CATALOG_TYPE_TOOL, "evals", 1, RL_CATALOG_TYPE_EVAL, "evals", "tools"},
    {RL_CATALOG_TYPE_TOOL, "papers", 1, RL_CATALOG_TYPE_PAPER, "papers", "tools"},
    {RL_CATALOG_TYPE_LEADERBOARD, "organization", 0, RL_CATALOG_TYPE_ORGANIZATION, "organization", "leaderboards"},
    {RL_CATALOG_TYPE_LEADERBOARD, "evals", 1, RL_CATALOG_TYPE_EVAL, "evals", "leaderboards"},
    {RL_CATALOG_TYPE_PERSON, "organizations", 1, RL_CATALOG_TYPE_ORGANIZATION, "organizations", "people"},
    {RL_CATALOG_TYPE_PAPER, "people", 1, RL_CATALOG_TYPE_PERSON, "authors", "papers"},
    {RL_CATALOG_TYPE_PAPER, "organizations", 1, RL_CATALOG_TYPE_ORGANIZATION, "organizations", "papers"},
};
const size_t rl_catalog_nlinks = sizeof(rl_catalog_links) / sizeof(rl_catalog_links[0]);

static const char *const core_names[] = {"slug", "title", "summary", "description", "aliases", "source", NULL};
static const char *const paper_names[] = {"licence", "text", "pdf", NULL};

static const rl_field_t *find_field(const rl_schema_t *schema, const char *name)
{
    const rl_field_t *field;

    for (field = schema->fields; field->name != NULL; ++field) {
        if (strcmp(field->name, name) == 0)
            return field;
    }
    return NULL;
}

static int in_list(const char *const *list, const char *name)
{
    for (; *list != NULL; ++list) {
        if (strcmp(*list, name) == 0)
            return 1;
    }
    return 0;
}

static const rl_catalog_link_t *find_link(rl_catalog_type_t type, const char *field)
{
    size_t i;

    for (i = 0; i < rl_catalog_nlinks; ++i) {
        if (rl_catalog_links[i].from == type && strcmp(rl_catalog_links[i].field, field) == 0)
            return &rl_catalog_links[i];
    }
    return NULL;
}

rl_catalog_role_t rl_catalog_dataset_role(rl_catalog_type_t type, const char *name)
{
    const rl_field_t *field = find_field(&entity_schemas[type], name);

    if (field == NULL)
        return RL_CATALOG_ROLE_UNKNOWN;
    if (in_list(core_names, name))
        return RL_CATALOG_ROLE_CORE;
    if (type == RL_CATALOG_TYPE_PAPER && in_list(paper_names, name))
        return RL_CATALOG_ROLE_PAPER;
    if (find_link(type, name) != NULL)
        return RL_CATALOG_ROLE_RELATION;
    if (field->check == check_url)
        return RL_CATALOG_ROLE_LINK;
    return RL_CATALOG_ROLE_ATTRIBUTE;
}

/* ---- loading ---- */

typedef struct loader {
    rl_catalog_dataset_t *dataset;
    json_t *problems;
    json_t *origins;       /* "type/slug" -> {"file", "field"}; also "source/id", "licence/id" */
    json_t *score_origins; /* parallel to dataset->scores */
    size_t count;
} loader_t;

static void problem(loader_t *loader, const char *file, const char *field, const char *slug, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void problem(loader_t *loader, const char *file, const char *field, const char *slug, const char *fmt, ...)
{
    char message[512];
    va_list ap;
    json_t *item;

    if (++loader->count > RL_CATALOG_PROBLEMS_MAX + 1)
        return;
    va_start(ap, fmt);
    vsnprintf(message, sizeof(message), fmt, ap);
    va_end(ap);
    if (loader->count == RL_CATALOG_PROBLEMS_MAX + 1)
        snprintf(message, sizeof(message), "and more problems; reporting stopped after %d", RL_CATALOG_PROBLEMS_MAX);
    item = json_pack("{s:s, s:s, s:s}", "file", file, "field", field, "message", message);
    if (item != NULL && slug != NULL)
        json_object_set_new(item, "slug", json_string(slug));
    json_array_append_new(loader->problems, item);
}

void rl_catalog_problem_format(const json_t *item, char *buf, size_t bufsz)
{
    const char *file = json_string_value(json_object_get(item, "file"));
    const char *field = json_string_value(json_object_get(item, "field"));
    const char *slug = json_string_value(json_object_get(item, "slug"));
    const char *message = json_string_value(json_object_get(item, "message"));

    snprintf(buf, bufsz, "%s: %s%s%s%s%s%s", file != NULL ? file : "?", field != NULL ? field : "",
             slug != NULL ? " (" : "", slug != NULL ? slug : "", slug != NULL ? ")" : "",
             field != NULL && field[0] != '\0' ? ": " : "", message != NULL ? message : "");
}

static int compare_paths(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Collects the relative paths of every *.json file under root/rel. */
static int collect(loader_t *loader, const char *root, const char *rel, int depth, char ***paths, size_t *npaths,
                   size_t *cap)
{
    char dirpath[4096], child[4096];
    struct dirent *entry;
    DIR *dir;

    snprintf(dirpath, sizeof(dirpath), "%s%s%s", root, rel[0] != '\0' ? "/" : "", rel);
    dir = opendir(dirpath);
    if (dir == NULL) {
        problem(loader, rel[0] != '\0' ? rel : ".", "", NULL, "cannot read the folder %s: %s", dirpath,
                strerror(errno));
        return -1;
    }
    while ((entry = readdir(dir)) != NULL) {
        struct stat st;
        size_t len = strlen(entry->d_name);
        char full[8192];

        if (entry->d_name[0] == '.')
            continue;
        snprintf(child, sizeof(child), "%s%s%s", rel, rel[0] != '\0' ? "/" : "", entry->d_name);
        snprintf(full, sizeof(full), "%s/%s", root, child);
        if (stat(full, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode) && depth < DIR_DEPTH_MAX) {
            collect(loader, root, child, depth + 1, paths, npaths, cap);
            continue;
        }
        if (!S_ISREG(st.st_mode) || len < 6 || strcmp(entry->d_name + len - 5, ".json") != 0)
            continue;
        if (*npaths == FILES_MAX)
            break;
        if (*npaths == *cap) {
            size_t next = *cap != 0 ? *cap * 2 : 32;
            char **grown = realloc(*paths, next * sizeof(**paths));
            if (grown == NULL)
                break;
            *paths = grown;
            *cap = next;
        }
        (*paths)[(*npaths)++] = strdup(child);
    }
    closedir(dir);
    return 0;
}

char *rl_catalog_dataset_read_file(const char *dir, const char *rel, size_t cap, size_t *len, const char **why)
{
    char path[8192];
    FILE *fp;

    struct stat st;
    char *bytes;

    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    fp = fopen(path, "rb");
    *why = NULL;
    if (fp == NULL) {
        *why = strerror(errno);
        return NULL;
    }
    if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode)) {
        *why = "not a regular file";
        fclose(fp);
        return NULL;
    }
    if ((size_t)st.st_size > cap) {
        *why = "too large";
        fclose(fp);
        return NULL;
    }
    bytes = malloc((size_t)st.st_size + 1);
    if (bytes == NULL || fread(bytes, 1, (size_t)st.st_size, fp) != (size_t)st.st_size) {
        *why = bytes == NULL ? "out of memory" : "short read";
        free(bytes);
        fclose(fp);
        return NULL;
    }
    fclose(fp);
    bytes[st.st_size] = '\0';
    *len = (size_t)st.st_size;
    return bytes;
}

/* The schema of a section name, and where its items go: type index, or -1 scores, -2 sources, -3 licences. */
static const rl_schema_t *section_schema(const char *name, int *kind)
{
    int type = rl_catalog_type_parse(name, strlen(name));

    if (type >= 0 && strcmp(rl_catalog_types[type].plural, name) == 0) {
        *kind = type;
        return &entity_schemas[type];
    }
    *kind = strcmp(name, "scores") == 0     ? -1
            : strcmp(name, "sources") == 0  ? -2
            : strcmp(name, "licences") == 0 ? -3
                                            : -4;
    return *kind == -1 ? &score_schema : *kind == -2 ? &source_schema : *kind == -3 ? &licence_schema : NULL;
}

/* Registers an item under its key, refusing duplicates. */
static void remember(loader_t *loader, json_t *map, const char *what, const char *key, json_t *item, const char *file,
                     const char *field)
{
    char origin_key[160];
    json_t *earlier;

    snprintf(origin_key, sizeof(origin_key), "%s/%s", what, key);
    earlier = json_object_get(loader->origins, origin_key);
    if (earlier != NULL) {
        problem(loader, file, field, key, "'%s' is used twice: also by %s %s", key,
                json_string_value(json_object_get(earlier, "file")),
                json_string_value(json_object_get(earlier, "field")));
        return;
    }
    json_object_set(map, key, item);
    json_object_set_new(loader->origins, origin_key, json_pack("{s:s, s:s}", "file", file, "field", field));
}

static void load_item(loader_t *loader, const char *file, const char *section, size_t index, int kind,
                      const rl_schema_t *schema, json_t *item)
{
    rl_catalog_dataset_t *dataset = loader->dataset;
    char field[160], path[400];
    json_t *errors = json_array(), *error, *value;
    const char *key, *slug;
    size_t i, before = loader->count;

    snprintf(field, sizeof(field), "%s[%zu]", section, index);
    slug = kind == -1 ? NULL : json_string_value(json_object_get(item, kind >= 0 ? "slug" : "id"));
    rl_validate_json(schema, item, errors);
    json_array_foreach(errors, i, error)
    {
        const char *at = json_string_value(json_object_get(error, "path"));
        snprintf(path, sizeof(path), "%s%s%s", field, at != NULL && at[0] != '\0' ? "." : "", at != NULL ? at : "");
        problem(loader, file, path, slug, "%s", json_string_value(json_object_get(error, "message")));
    }
    json_decref(errors);
    if (json_is_object(item)) {
        json_object_foreach(item, key, value)
        {
            if (find_field(schema, key) == NULL) {
                snprintf(path, sizeof(path), "%s.%s", field, key);
                problem(loader, file, path, slug, "unknown field (a typo?)");
            }
        }
    }
    if (loader->count != before)
        return;
    if (kind >= 0)
        remember(loader, dataset->entities[kind], rl_catalog_types[kind].plural, slug, item, file, field);
    else if (kind == -2)
        remember(loader, dataset->sources, "source", json_string_value(json_object_get(item, "id")), item, file, field);
    else if (kind == -3)
        remember(loader, dataset->licences, "licence", json_string_value(json_object_get(item, "id")), item, file,
                 field);
    else {
        json_array_append(dataset->scores, item);
        json_array_append_new(loader->score_origins, json_pack("{s:s, s:s}", "file", file, "field", field));
    }
}

static void load_file(loader_t *loader, const char *rel)
{
    const char *why, *section;
    json_error_t jerr;
    json_t *root, *items, *item;
    size_t len, index;
    char *bytes;

    bytes = rl_catalog_dataset_read_file(loader->dataset->dir, rel, RL_CATALOG_SOURCE_FILE_MAX, &len, &why);
    if (bytes == NULL) {
        problem(loader, rel, "", NULL, "cannot read: %s", why);
        return;
    }
    root = json_loadb(bytes, len, JSON_REJECT_DUPLICATES, &jerr);
    free(bytes);
    if (root == NULL) {
        problem(loader, rel, "", NULL, "not valid JSON at line %d, column %d: %s", jerr.line, jerr.column, jerr.text);
        return;
    }
    if (!json_is_object(root)) {
        problem(loader, rel, "", NULL,
                "must hold one JSON object whose keys are sections, such as {\"models\": [...]}");
        json_decref(root);
        return;
    }
    json_object_foreach(root, section, items)
    {
        int kind;
        const rl_schema_t *schema = section_schema(section, &kind);
        if (schema == NULL) {
            problem(loader, rel, section, NULL,
                    "unknown section; sections are the type names (evals, models, tools, leaderboards, "
                    "organizations, people, capabilities, papers), scores, sources and licences");
            continue;
        }
        if (!json_is_array(items)) {
            problem(loader, rel, section, NULL, "must be an array of objects");
            continue;
        }
        json_array_foreach(items, index, item)
        {
            load_item(loader, rel, section, index, kind, schema, item);
        }
    }
    json_decref(root);
}

/* ---- cross references ---- */

static json_t *origin_of(loader_t *loader, rl_catalog_type_t type, const char *slug)
{
    char key[160];

    snprintf(key, sizeof(key), "%s/%s", rl_catalog_types[type].plural, slug);
    return json_object_get(loader->origins, key);
}

static void check_reference(loader_t *loader, json_t *origin, const char *slug, const char *field, int target,
                            const char *named)
{
    char path[300];

    if (json_object_get(loader->dataset->entities[target], named) != NULL)
        return;
    snprintf(path, sizeof(path), "%s.%s", json_string_value(json_object_get(origin, "field")), field);
    problem(loader, json_string_value(json_object_get(origin, "file")), path, slug, "no %s has the slug '%s'",
            rl_catalog_types[target].singular, named);
}

static void check_source(loader_t *loader, json_t *origin, const char *slug, json_t *object)
{
    const char *source = json_string_value(json_object_get(object, "source"));
    char path[300];

    if (source == NULL || json_object_get(loader->dataset->sources, source) != NULL)
        return;
    snprintf(path, sizeof(path), "%s.source", json_string_value(json_object_get(origin, "field")));
    problem(loader, json_string_value(json_object_get(origin, "file")), path, slug,
            "no source has the id '%s' (sources are declared in a \"sources\" section)", source);
}

static int is_text(const char *bytes, size_t len)
{
    /* jansson refuses invalid UTF-8 when it makes a string. */
    json_t *probe = memchr(bytes, '\0', len) == NULL ? json_stringn(bytes, len) : NULL;
    int valid = probe != NULL;

    json_decref(probe);
    return valid;
}

static int is_pdf(const char *bytes, size_t len)
{
    return len >= 5 && memcmp(bytes, "%PDF-", 5) == 0;
}

static void check_paper_files(loader_t *loader, json_t *origin, const char *slug, json_t *paper)
{
    static const char *const kinds[] = {"text", "pdf"};
    const char *licence_id = json_string_value(json_object_get(paper, "licence"));
    json_t *licence = json_object_get(loader->dataset->licences, licence_id);
    const char *file = json_string_value(json_object_get(origin, "file"));
    char path[300];
    size_t k;

    if (licence == NULL) {
        snprintf(path, sizeof(path), "%s.licence", json_string_value(json_object_get(origin, "field")));
        problem(loader, file, path, slug,
                "no licence has the id '%s' (licences are declared in a \"licences\" section)", licence_id);
        return;
    }
    for (k = 0; k < 2; ++k) {
        const char *rel = json_string_value(json_object_get(paper, kinds[k])), *why;
        size_t len;
        char *bytes;

        if (rel == NULL)
            continue;
        snprintf(path, sizeof(path), "%s.%s", json_string_value(json_object_get(origin, "field")), kinds[k]);
        if (!json_is_true(json_object_get(licence, "redistributable"))) {
            problem(loader, file, path, slug,
                    "licence '%s' does not permit redistribution, so the catalog must not hold this file", licence_id);
            continue;
        }
        bytes = rl_catalog_dataset_read_file(loader->dataset->dir, rel, RL_CATALOG_PAPER_FILE_MAX, &len, &why);
        if (bytes == NULL) {
            problem(loader, file, path, slug, "cannot read %s: %s", rel, why);
            continue;
        }
        if (k == 0 && !is_text(bytes, len))
            problem(loader, file, path, slug, "%s is not UTF-8 text", rel);
        if (k == 1 && !is_pdf(bytes, len))
            problem(loader, file, path, slug, "%s does not start like a PDF file (%%PDF-)", rel);
        free(bytes);
    }
}

static void check_references(loader_t *loader)
{
    rl_catalog_dataset_t *dataset = loader->dataset;
    const char *slug;
    json_t *entity, *score;
    size_t i, j;
    int type;

    for (type = 0; type < RL_CATALOG_TYPE_COUNT; ++type) {
        json_object_foreach(dataset->entities[type], slug, entity)
        {
            json_t *origin = origin_of(loader, type, slug);
            for (i = 0; i < rl_catalog_nlinks; ++i) {
                const rl_catalog_link_t *link = &rl_catalog_links[i];
                json_t *value = json_object_get(entity, link->field), *item;
                if ((int)link->from != type || value == NULL)
                    continue;
                if (!link->many) {
                    check_reference(loader, origin, slug, link->field, link->to, json_string_value(value));
                    continue;
                }
                json_array_foreach(value, j, item)
                {
                    char field[120];
                    size_t k;
                    snprintf(field, sizeof(field), "%s.%zu", link->field, j);
                    check_reference(loader, origin, slug, field, link->to, json_string_value(item));
                    for (k = 0; k < j; ++k) {
                        char path[300];
                        if (!json_equal(json_array_get(value, k), item))
                            continue;
                        snprintf(path, sizeof(path), "%s.%s", json_string_value(json_object_get(origin, "field")),
                                 field);
                        problem(loader, json_string_value(json_object_get(origin, "file")), path, slug,
                                "'%s' is listed twice", json_string_value(item));
                    }
                }
            }
            check_source(loader, origin, slug, entity);
            if (type == RL_CATALOG_TYPE_PAPER)
                check_paper_files(loader, origin, slug, entity);
        }
    }
    json_array_foreach(dataset->scores, i, score)
    {
        json_t *origin = json_array_get(loader->score_origins, i);
        check_reference(loader, origin, NULL, "model", RL_CATALOG_TYPE_MODEL,
                        json_string_value(json_object_get(score, "model")));
        check_reference(loader, origin, NULL, "eval", RL_CATALOG_TYPE_EVAL,
                        json_string_value(json_object_get(score, "eval")));
        check_source(loader, origin, NULL, score);
    }
}

int rl_catalog_dataset_load(const char *dir, rl_catalog_dataset_t *out, json_t *problems)
{
    loader_t loader = {out, problems, json_object(), json_array(), 0};
    char **paths = NULL;
    size_t npaths = 0, cap = 0, i;
    int type, result = 0;

    memset(out, 0, sizeof(*out));
    snprintf(out->dir, sizeof(out->dir), "%s", dir);
    out->sources = json_object();
    out->licences = json_object();
    out->scores = json_array();
    for (type = 0; type < RL_CATALOG_TYPE_COUNT; ++type)
        out->entities[type] = json_object();

    if (collect(&loader, dir, "", 0, &paths, &npaths, &cap) != 0) {
        result = -1;
        goto out;
    }
    if (npaths == 0)
        problem(&loader, ".", "", NULL, "no .json source file in %s", dir);
    if (npaths > 1)
        qsort(paths, npaths, sizeof(*paths), compare_paths);
    for (i = 0; i < npaths; ++i)
        load_file(&loader, paths[i]);
    if (loader.count == 0)
        check_references(&loader);
    result = loader.count == 0 ? 0 : 1;

out:
    for (i = 0; i < npaths; ++i)
        free(paths[i]);
    free(paths);
    json_decref(loader.origins);
    json_decref(loader.score_origins);
    if (result != 0)
        rl_catalog_dataset_free(out);
    return result;
}

void rl_catalog_dataset_free(rl_catalog_dataset_t *dataset)
{
    int type;

    json_decref(dataset->sources);
    json_decref(dataset->licences);
    json_decref(dataset->scores);
    for (type = 0; type < RL_CATALOG_TYPE_COUNT; ++type)
        json_decref(dataset->entities[type]);
    memset(dataset->entities, 0, sizeof(dataset->entities));
    dataset->sources = dataset->licences = dataset->scores = NULL;
}

int rl_catalog_dataset_is_hidden(const rl_catalog_dataset_t *dataset, const json_t *object)
{
    const char *source = json_string_value(json_object_get(object, "source"));

    return source != NULL && json_is_true(json_object_get(json_object_get(dataset->sources, source), "hidden"));
}
