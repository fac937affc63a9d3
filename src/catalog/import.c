#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog/document.h"
#include "catalog/import.h"
#include "common/clock.h"
#include "common/log.h"

static const char schema_sql[] =
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE entity (id INTEGER PRIMARY KEY, type INTEGER NOT NULL, slug TEXT NOT NULL,"
    "  title TEXT NOT NULL, summary TEXT NOT NULL, document TEXT NOT NULL, UNIQUE (type, slug));"
    "CREATE VIRTUAL TABLE entity_fts USING fts5(title, slug, aliases, summary, description, facts,"
    "  tokenize = 'unicode61 remove_diacritics 2', prefix = '2 3');"
    "CREATE TABLE paper_file (slug TEXT NOT NULL, format TEXT NOT NULL, content_type TEXT NOT NULL,"
    "  content BLOB NOT NULL, PRIMARY KEY (slug, format));";

typedef struct fingerprint {
    long long files;
    long long bytes;
    long long newest_ns;
} fingerprint_t;

static void scan(const char *dir, int depth, fingerprint_t *print)
{
    DIR *d = opendir(dir);
    struct dirent *entry;

    if (d == NULL)
        return;
    while ((entry = readdir(d)) != NULL) {
        char path[PATH_MAX];
        struct stat st;
        long long ns;

        if (entry->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, entry->d_name);
        if (stat(path, &st) != 0)
            continue;
        ns = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
        if (ns > print->newest_ns)
            print->newest_ns = ns;
        if (S_ISDIR(st.st_mode) && depth < 8) {
            scan(path, depth + 1, print);
        } else if (S_ISREG(st.st_mode)) {
            ++print->files;
            print->bytes += st.st_size;
        }
    }
    closedir(d);
}

static void fingerprint_text(const char *dir, char *buf, size_t bufsz)
{
    fingerprint_t print = {0, 0, 0};

    scan(dir, 0, &print);
    snprintf(buf, bufsz, "%lld files, %lld bytes, newest %lld", print.files, print.bytes, print.newest_ns);
}

static void absolute(const char *path, char *buf)
{
    if (realpath(path, buf) == NULL)
        snprintf(buf, PATH_MAX, "%s", path);
}

char *rl_catalog_meta_value(sqlite3 *db, const char *key)
{
    sqlite3_stmt *stmt = NULL;
    char *value = NULL;

    if (sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = ?", -1, &stmt, NULL) != SQLITE_OK)
        return NULL;
    sqlite3_bind_text(stmt, 1, key, -1, SQLITE_STATIC);
    if (sqlite3_step(stmt) == SQLITE_ROW)
        value = strdup((const char *)sqlite3_column_text(stmt, 0));
    sqlite3_finalize(stmt);
    return value;
}

int rl_catalog_import_is_stale(const char *source_dir, const char *db_path)
{
    char expected_dir[PATH_MAX], print[128];
    char *version = NULL, *dir = NULL, *stored = NULL;
    sqlite3 *db = NULL;
    int stale = 1;

    if (access(db_path, R_OK) != 0 || sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
        goto out;
    version = rl_catalog_meta_value(db, "schema_version");
    dir = rl_catalog_meta_value(db, "source_dir");
    stored = rl_catalog_meta_value(db, "source_fingerprint");
    absolute(source_dir, expected_dir);
    fingerprint_text(source_dir, print, sizeof(print));
    stale = version == NULL || dir == NULL || stored == NULL || strcmp(version, RL_CATALOG_SCHEMA_VERSION) != 0 ||
            strcmp(dir, expected_dir) != 0 || strcmp(stored, print) != 0;

out:
    free(version);
    free(dir);
    free(stored);
    sqlite3_close(db);
    return stale;
}

typedef struct writer {
    sqlite3 *db;
    sqlite3_stmt *entity, *fts, *file, *meta;
} writer_t;

static int fail_sqlite(sqlite3 *db, const char *what)
{
    rl_log_error("catalog import: %s: %s", what, db != NULL ? sqlite3_errmsg(db) : "cannot open");
    return -1;
}

static int put_meta(writer_t *w, const char *key, const char *value)
{
    sqlite3_reset(w->meta);
    sqlite3_bind_text(w->meta, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(w->meta, 2, value, -1, SQLITE_STATIC);
    return sqlite3_step(w->meta) == SQLITE_DONE ? 0 : fail_sqlite(w->db, "meta");
}

static char *joined_aliases(const json_t *doc)
{
    const json_t *aliases = json_object_get(doc, "aliases"), *alias;
    char *text = NULL;
    size_t len = 0, i;
    FILE *out = open_memstream(&text, &len);

    if (out == NULL)
        return NULL;
    json_array_foreach(aliases, i, alias)
    {
        fprintf(out, "%s\n", json_string_value(alias));
    }
    fclose(out);
    return text;
}

static int put_entity(writer_t *w, rl_catalog_type_t type, const char *slug, const json_t *doc)
{
    char *text = json_dumps(doc, RL_CATALOG_JSON_FLAGS), *facts = rl_catalog_document_search_facts(doc);
    const char *description = json_string_value(json_object_get(doc, "description"));
    char *aliases = joined_aliases(doc);
    sqlite3_int64 id;
    int result = -1;

    if (text == NULL || facts == NULL || aliases == NULL)
        goto out;
    sqlite3_reset(w->entity);
    sqlite3_bind_int(w->entity, 1, type);
    sqlite3_bind_text(w->entity, 2, slug, -1, SQLITE_STATIC);
    sqlite3_bind_text(w->entity, 3, json_string_value(json_object_get(doc, "title")), -1, SQLITE_STATIC);
    sqlite3_bind_text(w->entity, 4, json_string_value(json_object_get(doc, "summary")), -1, SQLITE_STATIC);
    sqlite3_bind_text(w->entity, 5, text, -1, SQLITE_STATIC);
    if (sqlite3_step(w->entity) != SQLITE_DONE) {
        fail_sqlite(w->db, "entity");
        goto out;
    }
    id = sqlite3_last_insert_rowid(w->db);
    sqlite3_reset(w->fts);
    sqlite3_bind_int64(w->fts, 1, id);
    sqlite3_bind_text(w->fts, 2, json_string_value(json_object_get(doc, "title")), -1, SQLITE_STATIC);
    sqlite3_bind_text(w->fts, 3, slug, -1, SQLITE_STATIC);
    sqlite3_bind_text(w->fts, 4, aliases, -1, SQLITE_STATIC);
    sqlite3_bind_text(w->fts, 5, json_string_value(json_object_get(doc, "summary")), -1, SQLITE_STATIC);
    sqlite3_bind_text(w->fts, 6, description != NULL ? description : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(w->fts, 7, facts, -1, SQLITE_STATIC);
    if (sqlite3_step(w->fts) != SQLITE_DONE) {
        fail_sqlite(w->db, "search index");
        goto out;
    }
    result = 0;

out:
    free(text);
    free(facts);
    free(aliases);
    return result;
}

static int put_file(writer_t *w, const char *dir, const char *slug, const char *format, const char *content_type,
                    const char *rel)
{
    const char *why;
    size_t len;
    char *bytes = rl_catalog_dataset_read_file(dir, rel, RL_CATALOG_PAPER_FILE_MAX, &len, &why);
    int result;

    if (bytes == NULL) {
        rl_log_error("catalog import: cannot read %s/%s: %s", dir, rel, why);
        return -1;
    }
    sqlite3_reset(w->file);
    sqlite3_bind_text(w->file, 1, slug, -1, SQLITE_STATIC);
    sqlite3_bind_text(w->file, 2, format, -1, SQLITE_STATIC);
    sqlite3_bind_text(w->file, 3, content_type, -1, SQLITE_STATIC);
    sqlite3_bind_blob(w->file, 4, bytes, (int)len, SQLITE_STATIC);
    result = sqlite3_step(w->file) == SQLITE_DONE ? 0 : fail_sqlite(w->db, "paper file");
    free(bytes);
    return result;
}

static int write_catalog(writer_t *w, const rl_catalog_dataset_t *dataset, json_t *documents[], json_t *summary)
{
    json_t *counts = json_object_get(summary, "entities");
    long long files = 0;
    int type;

    for (type = 0; type < RL_CATALOG_TYPE_COUNT; ++type) {
        const char *slug;
        json_t *doc;
        json_object_foreach(documents[type], slug, doc)
        {
            if (put_entity(w, type, slug, doc) != 0)
                return -1;
            if (type != RL_CATALOG_TYPE_PAPER)
                continue;
            json_t *paper = json_object_get(dataset->entities[type], slug);
            const char *text = json_string_value(json_object_get(paper, "text"));
            const char *pdf = json_string_value(json_object_get(paper, "pdf"));
            if (text != NULL && put_file(w, dataset->dir, slug, "text", "text/plain; charset=utf-8", text) != 0)
                return -1;
            if (pdf != NULL && put_file(w, dataset->dir, slug, "pdf", "application/pdf", pdf) != 0)
                return -1;
            files += (text != NULL) + (pdf != NULL);
        }
        json_object_set_new(counts, rl_catalog_types[type].plural,
                            json_integer((json_int_t)json_object_size(documents[type])));
    }
    json_object_set_new(summary, "files", json_integer(files));
    return 0;
}

static long long count_scores(json_t *documents[])
{
    const char *slug;
    json_t *doc;
    long long n = 0;

    json_object_foreach(documents[RL_CATALOG_TYPE_MODEL], slug, doc)
    {
        n += (long long)json_array_size(json_object_get(doc, "scores"));
    }
    return n;
}

static long long count_hidden(const rl_catalog_dataset_t *dataset, json_t *documents[])
{
    long long n = 0;
    int type;

    for (type = 0; type < RL_CATALOG_TYPE_COUNT; ++type)
        n += (long long)(json_object_size(dataset->entities[type]) - json_object_size(documents[type]));
    return n;
}

int rl_catalog_import(const char *source_dir, const char *db_path, json_t *problems, json_t **summary_out)
{
    rl_catalog_dataset_t dataset;
    json_t *documents[RL_CATALOG_TYPE_COUNT] = {NULL};
    json_t *summary = NULL;
    writer_t w = {NULL, NULL, NULL, NULL, NULL};
    char tmp[PATH_MAX], dir[PATH_MAX], print[128], when[RL_ISO8601_LEN];
    char *text;
    int result, type;

    /* The fingerprint is taken before reading, so that an edit made during the import makes the file stale.
     */
    fingerprint_text(source_dir, print, sizeof(print));
    result = rl_catalog_dataset_load(source_dir, &dataset, problems);
    if (result != 0)
        return result;
    result = -1;
    if (rl_catalog_documents_build(&dataset, documents) != 0)
        goto out;
    summary = json_pack("{s:{}}", "entities");
    snprintf(tmp, sizeof(tmp), "%s.tmp-%ld", db_path, (long)getpid());
    unlink(tmp);
    if (sqlite3_open_v2(tmp, &w.db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
        fail_sqlite(w.db, tmp);
        goto out;
    }
    if (sqlite3_exec(w.db, "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; BEGIN;", NULL, NULL, NULL) !=
            SQLITE_OK ||
        sqlite3_exec(w.db, schema_sql, NULL, NULL, NULL) != SQLITE_OK) {
        fail_sqlite(w.db, "schema");
        goto out;
    }
    if (sqlite3_prepare_v2(w.db, "INSERT INTO entity (type, slug, title, summary, document) VALUES (?, ?, ?, ?, ?)", -1,
                           &w.entity, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(w.db,
                           "INSERT INTO entity_fts (rowid, title, slug, aliases, summary, description, facts)"
                           " VALUES (?, ?, ?, ?, ?, ?, ?)",
                           -1, &w.fts, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(w.db, "INSERT INTO paper_file (slug, format, content_type, content) VALUES (?, ?, ?, ?)", -1,
                           &w.file, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(w.db, "INSERT INTO meta (key, value) VALUES (?, ?)", -1, &w.meta, NULL) != SQLITE_OK) {
        fail_sqlite(w.db, "prepare");
        goto out;
    }
    if (write_catalog(&w, &dataset, documents, summary) != 0)
        goto out;
    json_object_set_new(summary, "scores", json_integer(count_scores(documents)));
    json_object_set_new(summary, "hidden", json_integer(count_hidden(&dataset, documents)));
    absolute(source_dir, dir);
    rl_clock_iso8601(rl_clock_now_ms(), when);
    text = json_dumps(summary, JSON_COMPACT);
    if (text == NULL || put_meta(&w, "schema_version", RL_CATALOG_SCHEMA_VERSION) != 0 ||
        put_meta(&w, "source_dir", dir) != 0 || put_meta(&w, "source_fingerprint", print) != 0 ||
        put_meta(&w, "built_at", when) != 0 || put_meta(&w, "summary", text) != 0) {
        free(text);
        goto out;
    }
    free(text);
    if (sqlite3_exec(w.db, "COMMIT; INSERT INTO entity_fts (entity_fts) VALUES ('optimize');", NULL, NULL, NULL) !=
        SQLITE_OK) {
        fail_sqlite(w.db, "commit");
        goto out;
    }
    result = 0;

out:
    sqlite3_finalize(w.entity);
    sqlite3_finalize(w.fts);
    sqlite3_finalize(w.file);
    sqlite3_finalize(w.meta);
    if (w.db != NULL && sqlite3_close(w.db) != SQLITE_OK)
        result = -1;
    if (result == 0) {
        /* A durable file before the rename, so that a crash leaves either the old catalog or the new one. */
        int fd = open(tmp, O_RDONLY);
        if (fd >= 0) {
            fsync(fd);
            close(fd);
        }
        if (rename(tmp, db_path) != 0) {
            rl_log_error("catalog import: cannot rename %s to %s: %s", tmp, db_path, strerror(errno));
            result = -1;
        }
    }
    if (result != 0 && w.db != NULL)
        unlink(tmp);
    for (type = 0; type < RL_CATALOG_TYPE_COUNT; ++type)
        json_decref(documents[type]);
    rl_catalog_dataset_free(&dataset);
    if (result == 0 && summary_out != NULL)
        *summary_out = summary;
    else
        json_decref(summary);
    return result;
}
