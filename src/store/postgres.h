/*
 * What the PostgreSQL backend offers besides the rl_txn_* operations: the one-shot
 * commands' access to a store (relayd migrate --check). Each call opens a
 * connection of its own, blocking, on the calling thread, and only reads.
 */
#ifndef RL_STORE_POSTGRES_H
#define RL_STORE_POSTGRES_H

#include <stddef.h>

/* The PostgreSQL schema version this relayd migrates a store to (the number of migrations it knows). */
int rl_store_postgres_target_version(void);
/*
 * Reads the schema version of the store at conninfo (a libpq connection URI)
 * without changing it: *version is 0 for a database without the relay's
 * tables. where receives the store's description without its password
 * (user@host:port/db). Returns 0, or -1 with the reason in why.
 */
int rl_store_postgres_version(const char *conninfo, int *version, char *where, size_t wheresz, char *why, size_t whysz);

#endif
