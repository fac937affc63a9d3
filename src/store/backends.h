/* The backends' open functions, for store.c only: each returns a migrated connection, or -1 with the cause logged. */
#ifndef RL_STORE_BACKENDS_H
#define RL_STORE_BACKENDS_H

#include "store/store.h"

/* Who opens a store, which decides what a backend keeps beside it (the SQLite delta log). */
typedef enum rl_store_use {
    RL_STORE_ONE_SHOT, /* a one-shot command or a test (rl_store_open_inline, rl_store__backend_open) */
    RL_STORE_OWN,      /* relayd, its own data folder: the store's only writer */
    RL_STORE_SHARED,   /* relayd, a location other relayds may share (sqlite:PATH, PostgreSQL) */
} rl_store_use_t;

/*
 * SQLite (sqlite.c): the database file at path. RL_STORE_OWN also opens its
 * delta log (locked exclusively) and sets txn->exclusive; RL_STORE_SHARED
 * takes that log's lock shared, so that an own relayd and a sharing one
 * never meet.
 */
int rl_store__sqlite_open(const char *path, rl_store_use_t use, rl_txn_t **out);

/*
 * PostgreSQL (postgres.c): conninfo is a libpq connection URI, as given
 * (postgres://user:password@host:port/db?..., or ?host=/dir for a Unix
 * socket). Connects and migrates; blocking (start-up). The password is never
 * logged.
 */
int rl_store__postgres_open(const char *conninfo, rl_store_use_t use, rl_txn_t **out);

/*
 * The libpq connection (PGconn) under a PostgreSQL backend connection, for
 * `relayd migrate` (migrate.c); NULL for another backend. It is in
 * non-blocking mode, and stays the backend's: close it with rl_txn_close.
 */
struct pg_conn;
struct pg_conn *rl_store__postgres_conn(rl_txn_t *txn);

#endif
