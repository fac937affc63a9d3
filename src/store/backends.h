/* The backends' open functions, for store.c only: each returns a migrated connection, or -1 with the cause logged. */
#ifndef RL_STORE_BACKENDS_H
#define RL_STORE_BACKENDS_H

#include "store/store.h"

/* SQLite (sqlite.c): the database file at path. */
int rl_store__sqlite_open(const char *path, rl_txn_t **out);

#endif
