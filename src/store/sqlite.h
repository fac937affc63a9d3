/*
 * What the SQLite backend offers besides the rl_txn_* operations: the one-shot
 * commands' access to a database file (relayd backup, restore and
 * migrate --check). Each call opens a connection of its own, blocking, on
 * the calling thread; none of them takes relayd's place as the writer.
 */
#ifndef RL_STORE_SQLITE_H
#define RL_STORE_SQLITE_H

#include <stddef.h>
#include <stdint.h>

/*
 * How many times, in this process, a connection found the database locked by another and began to wait
 * (SQLite's busy handler): the event a test waits for to know that a second writer is held, not merely slow.
 */
uint64_t rl_store_sqlite_lock_waits(void);
/* The schema version this relayd migrates a store to (the number of migrations it knows). */
int rl_store_sqlite_target_version(void);
/*
 * Reads the schema version of the database at path without changing it:
 * *version is 0 for a file without the relay's tables. Returns 0, or -1
 * with the reason in why (no such file: ENOENT in *err_no, so that callers
 * can say a start would create it).
 */
int rl_store_sqlite_version(const char *path, int *version, int *err_no, char *why, size_t whysz);
/*
 * Copies the database at src into a new file dest (which must not exist)
 * with SQLite's online backup API: one read transaction over the whole
 * file, so the copy is the state after some commit, with every write
 * committed before the call began and none half done, while relayd goes on
 * writing (WAL readers do not block the writer, nor it them). The copy is
 * checked (PRAGMA quick_check) and flushed to disk. *version receives its
 * schema version. 0, or -1 with the reason in why and no dest left behind.
 */
int rl_store_sqlite_copy(const char *src, const char *dest, int *version, char *why, size_t whysz);

#endif
