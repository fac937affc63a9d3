/* The backends' open functions, for store.c only: each returns a migrated connection, or -1 with the cause logged. */
#ifndef RL_STORE_BACKENDS_H
#define RL_STORE_BACKENDS_H

#include "store/store.h"

/* SQLite (sqlite.c): the database file at path. */
int rl_store__sqlite_open(const char *path, rl_txn_t **out);

/* The database file of a SQLite backend connection, or NULL for another backend. */
const char *rl_store__sqlite_path(rl_txn_t *txn);

/*
 * PostgreSQL (postgres.c): conninfo is a libpq connection URI, as given
 * (postgres://user:password@host:port/db?..., or ?host=/dir for a Unix
 * socket). Connects and migrates; blocking (start-up). The password is never
 * logged.
 */
int rl_store__postgres_open(const char *conninfo, rl_txn_t **out);

/*
 * The libpq connection (PGconn) under a PostgreSQL backend connection, for
 * `relayd migrate` (migrate.c); NULL for another backend. It is in
 * non-blocking mode, and stays the backend's: close it with rl_txn_close.
 */
struct pg_conn;
struct pg_conn *rl_store__postgres_conn(rl_txn_t *txn);

#endif
