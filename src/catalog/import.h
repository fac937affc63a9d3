/*
 * The importer: checks the source folder (dataset.h), builds every document
 * (document.h) and writes the SQLite file that catalogd serves from.
 *
 * The file is written under a temporary name and renamed over the old one,
 * so a failed import leaves the previous catalog in place. It holds:
 *   meta(key, value)            schema version, source folder and fingerprint, counts
 *   entity(id, type, slug, title, summary, document)
 *   entity_fts                  FTS5 over title, slug, aliases, summary, description, facts;
 *                               rowid = entity.id
 *   paper_file(slug, format, content_type, content)
 * Hidden entities are never written (document.h).
 */
#ifndef RL_CATALOG_IMPORT_H
#define RL_CATALOG_IMPORT_H

#include <jansson.h>

struct sqlite3;

/* Bumped whenever the file layout or the documents change shape: an older file is then rebuilt. */
#define RL_CATALOG_SCHEMA_VERSION "2"

/*
 * Imports source_dir into db_path. Returns 0 and, when summary is not NULL,
 * a new object {"entities": {type: count}, "hidden": n, "scores": n,
 * "files": n}; 1 when the dataset has problems (appended to problems, the
 * old file untouched); -1 on an I/O or SQLite failure (logged).
 */
int rl_catalog_import(const char *source_dir, const char *db_path, json_t *problems, json_t **summary);

/*
 * 1 when db_path must be (re)built: it is missing or unreadable, was built by
 * another schema version or from another folder, or the folder's files
 * changed since (their count, total size or newest modification time).
 */
int rl_catalog_import_is_stale(const char *source_dir, const char *db_path);

/* A value of the meta table of an open catalog file, malloc'd; NULL when absent. */
char *rl_catalog_meta_value(struct sqlite3 *db, const char *key);

#endif
