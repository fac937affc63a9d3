/*
 * The SQLite store's delta log (docs/internals/store.md, "The delta log"):
 * an append-only file beside the database where a batch of streamed deltas
 * from any number of messages is one write(2), answered when the write
 * returns, and later folded into message_deltas in one transaction.
 *
 * Its durability is the database's under synchronous=NORMAL: a write that
 * returned is in the kernel's page cache and survives kill -9 of relayd
 * (not a power cut), like a commit to the WAL.
 *
 * A record: u32 length of the payload, u32 CRC-32 of the payload, then the
 * payload: u8 version (1), i64 seq, u16 length + message id, u16 length +
 * idempotency key, u16 length + body hash, u32 length + delta bytes. All
 * integers little-endian. A record that is cut short or fails its checksum
 * ends the log: it is the tail of a write that a kill -9 interrupted, which
 * was never answered.
 *
 * Two files that take turns, PATH and PATH.b: appends go to the active
 * one; a fold makes the other one (empty) active, reads the one appends
 * left, folds it in the transaction of its begin and empties it after that
 * commit. So the loop appends while the worker folds, and neither waits for
 * the other but for the moment the files change roles. Records of the two
 * files are folded as one set, sorted, wherever both hold some (a relayd
 * killed during a fold): which was written last need not be known.
 *
 * Owned by the SQLite backend (sqlite.c), which opens it beside relayd's
 * own database, appends trusted deltas to it (rl_txn_write_now on the
 * loop, rl_txn_run_batch on the worker), folds it in its begin and empties
 * it after that commit; the worker and the relay see only store.h
 * (rl_store_op_type_t.deltas, rl_store_write_now, rl_txn_run_batch,
 * rl_txn_due_ms). rl_deltalog_append and rl_deltalog_pending may be called
 * from any thread; the fold and the truncation from the worker only; and
 * rl_deltalog_read_files and rl_deltalog_fold_files on a connection of
 * their own (relayd backup, migrate).
 */
#ifndef RL_STORE_DELTALOG_H
#define RL_STORE_DELTALOG_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/* Records are encoded here before their one write: the sink of store.h's rl_store_deltas_put. */
struct rl_store_deltas {
    char *data;
    size_t len, cap;
};
typedef struct rl_store_deltas rl_deltalog_buf_t;

typedef struct rl_deltalog_record {
    int64_t seq;
    const char *message_id, *key, *body_hash, *delta; /* into the decoded bytes: not NUL-terminated */
    size_t message_id_len, key_len, body_hash_len, delta_len;
} rl_deltalog_record_t;

/* Appends one record to buf. 0, or -1 (out of memory, or a field too long for its length). */
int rl_deltalog_encode(rl_deltalog_buf_t *buf, const char *message_id, int64_t seq, const char *key,
                       const char *body_hash, const char *delta, size_t delta_len);
void rl_deltalog_buf_free(rl_deltalog_buf_t *buf);
/*
 * Decodes the record at data[0..len): its size in bytes, filling *out; 0
 * when the bytes hold no whole record with a good checksum (a torn tail).
 */
size_t rl_deltalog_decode(const char *data, size_t len, rl_deltalog_record_t *out);

typedef struct rl_deltalog rl_deltalog_t;

/*
 * Opens (creating) the log's files at path and path.b, and locks the first
 * (flock): exclusively for the relayd that writes it, shared for one that
 * only shares the database (and must never meet the former; it opens the
 * first file alone). NULL with the cause logged, when another relayd holds
 * a lock that excludes this one.
 */
rl_deltalog_t *rl_deltalog_open(const char *path, int exclusive);
void rl_deltalog_close(rl_deltalog_t *log);
/* The second file's path, beside the first's. */
void rl_deltalog_second_path(const char *path, char *out, size_t outsz);
/*
 * The bytes of whole records not yet folded, in both files; *since_ms
 * (when asked): when the oldest of them was written (rl_clock_mono_ms);
 * *left_over: whether some were left by the last run, which the first fold
 * must take before anything else runs.
 */
size_t rl_deltalog_pending(rl_deltalog_t *log, int64_t *since_ms, int *left_over);
size_t rl_deltalog_size(rl_deltalog_t *log);
/* rl_deltalog_append's answer when the log already holds max bytes not yet folded: nothing was written. */
#define RL_DELTALOG_FULL 1
/*
 * Writes buf at the active file's end with one write(2), from any thread:
 * 0 once it returned, or RL_E_INTERNAL (RL_E_STORAGE_FULL for a full disk)
 * with nothing of it left in the log; RL_DELTALOG_FULL, writing nothing,
 * when max is not 0 and the files already hold that much not yet folded
 * (checked under the same lock as the write). *was_empty (when asked): the
 * log held nothing before, so a fold now has a time to be due at.
 */
int rl_deltalog_append(rl_deltalog_t *log, const rl_deltalog_buf_t *buf, size_t max, int *was_empty);
/*
 * In a transaction, on the worker: the records of the file appends leave
 * (appends move to the other, empty, file first), of a file a failed fold
 * left, or of both files left by the last run, into message_deltas, one
 * run per message. They are emptied only by rl_deltalog_truncate, once that
 * transaction has committed. While every record read is this process's own
 * (the file was empty at open, or has been emptied since), checksums and
 * stored seqs are not read again: the records are whole and follow what is
 * stored (deltalog.c, own_records).
 */
int rl_deltalog_fold(rl_deltalog_t *log, rl_txn_t *txn);
/* After the fold's commit: the files it read start over. */
void rl_deltalog_truncate(rl_deltalog_t *log);

/* What relayd backup and migrate read of a log's two files (rl_deltalog_read_files). */
typedef struct rl_deltalog_files {
    char path[2][4200];
    char *data[2];
    size_t len[2];
} rl_deltalog_files_t;

/*
 * Reads both files of the log at path (a missing one is empty). 0, or -1
 * with the cause in errno.
 */
int rl_deltalog_read_files(const char *path, rl_deltalog_files_t *out);
void rl_deltalog_files_free(rl_deltalog_files_t *files);
/*
 * In a transaction: the records of both files, as one set, into
 * message_deltas. Of a message that is not streaming (ended, or gone)
 * nothing is written, and a record whose seq is below the message's next
 * stored seq is already there (a crash between a fold's commit and the
 * file's truncation): each is written once. A torn tail ends its file's
 * records, with a log line naming the file. *records (when asked): how many
 * were whole.
 */
int rl_deltalog_fold_files(rl_txn_t *txn, const rl_deltalog_files_t *files, size_t *records);
/*
 * Reads the whole file at path (none: *len 0) into a malloc'd *data.
 * 0 or -1 with the cause in errno.
 */
int rl_deltalog_read_file(const char *path, char **data, size_t *len);

#endif
