/* `relayd migrate`: a single node's SQLite store copied into PostgreSQL. */
#ifndef RL_STORE_MIGRATE_H
#define RL_STORE_MIGRATE_H

/*
 * Copies every table of the SQLite store at sqlite_path into the PostgreSQL
 * database at postgres_url (a libpq connection URI), in one transaction.
 * Both are migrated to this relayd's schema first; the target must be
 * empty, and its tables are locked against writers while the copy runs.
 * When stdout is a terminal it prints each table's row count as the table
 * is copied; otherwise one JSON object at the end ({"ok", "tables", ...}).
 * Returns the exit status: 0 when everything was copied and committed, 1
 * when nothing was (the reason on stderr, and in the JSON as "error").
 * Blocking, for the command line; the URL's password is never printed.
 */
int rl_store_migrate(const char *sqlite_path, const char *postgres_url);

#endif
