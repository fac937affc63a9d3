/*
 * The SQL backends' shared half (sql.c, ops.c): every rl_txn_* operation of
 * store.h written once, as statements and row descriptions, over a small
 * driver that each SQL engine implements (sqlite.c, postgres.c).
 *
 * A driver runs one statement at a time with typed parameters and hands out
 * its rows column by column; it owns its connection, its transactions and
 * savepoints, its locking, its errors and its migrations. Everything else
 * (which SQL, which parameters, how a row becomes a struct, what an empty
 * result means) lives in ops.c once. docs/internals/store.md says why.
 *
 * Internal to src/store: the relay sees only store.h.
 */
#ifndef RL_STORE_SQL_H
#define RL_STORE_SQL_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/* The types a column or a parameter can have. */
typedef enum rl_sql_type {
    RL_SQL_TEXT,  /* const char *, NULL is NULL */
    RL_SQL_INT,   /* int64_t, never NULL (a NULL reads as 0) */
    RL_SQL_TIME,  /* int64_t, RL_NO_TIME is NULL */
    RL_SQL_INT32, /* int */
    RL_SQL_BYTES, /* const char * and a size_t length: text that may hold NUL (SQLite TEXT, PostgreSQL BYTEA) */
    RL_SQL_BOOL,  /* int, 0 or 1 (SQLite INTEGER, PostgreSQL BOOLEAN, which takes no integer) */
} rl_sql_type_t;

typedef struct rl_sql_param {
    rl_sql_type_t type;
    const char *text; /* TEXT, BYTES */
    size_t len;       /* BYTES */
    int64_t value;    /* INT, TIME, INT32, BOOL */
} rl_sql_param_t;

/* Parameters in a statement's order: rl_sql__write(txn, &sql, NULL, RL_SQL_PARAMS(P_TEXT(id), P_INT(at))). */
#define P_TEXT(v)                                                                                                      \
    {                                                                                                                  \
        .type = RL_SQL_TEXT, .text = (v)                                                                               \
    }
#define P_INT(v)                                                                                                       \
    {                                                                                                                  \
        .type = RL_SQL_INT, .value = (v)                                                                               \
    }
#define P_TIME(v)                                                                                                      \
    {                                                                                                                  \
        .type = RL_SQL_TIME, .value = (v)                                                                              \
    }
#define P_INT32(v)                                                                                                     \
    {                                                                                                                  \
        .type = RL_SQL_INT32, .value = (v)                                                                             \
    }
#define P_BOOL(v)                                                                                                      \
    {                                                                                                                  \
        .type = RL_SQL_BOOL, .value = (v) != 0                                                                         \
    }
#define P_BYTES(v, n)                                                                                                  \
    {                                                                                                                  \
        .type = RL_SQL_BYTES, .text = (v), .len = (n)                                                                  \
    }
#define RL_SQL_PARAMS(...) (const rl_sql_param_t[]){__VA_ARGS__}, RL_SQL_COUNT_(__VA_ARGS__)
#define RL_SQL_COUNT_(...) ((int)(sizeof((const rl_sql_param_t[]){__VA_ARGS__}) / sizeof(rl_sql_param_t)))
#define RL_SQL_MAX_PARAMS  16

/* One column of a row type: where its value goes in the row's struct (rows.h describes each row type). */
typedef struct rl_sql_column {
    const char *name;
    rl_sql_type_t type;
    size_t offset;
    size_t len_offset; /* BYTES: where its length goes */
} rl_sql_column_t;

typedef struct rl_sql_row {
    const rl_sql_column_t *columns;
    int count;
    size_t size; /* of the struct */
} rl_sql_row_t;

/*
 * A statement, written once for every dialect: `?` placeholders (`?N` for
 * the Nth parameter again), `@bytewise` after a text that an ORDER BY or a
 * comparison must take byte by byte, `@inserted` for the column that orders
 * a table's rows by insertion (messages only). Each driver rewrites the text
 * once, when it first prepares it (rl_sql__rewrite). `locked` is what a
 * dialect that locks rows (rl_sql_dialect_t.row_locks) appends inside a
 * writing operation, so that what the operation read still holds when it
 * writes (" FOR UPDATE"); NULL for a statement that never locks.
 */
typedef struct rl_sql {
    const char *text;
    const char *locked;
} rl_sql_t;

typedef struct rl_sql_dialect {
    int numbered;         /* placeholders are $1, $2... rather than ? */
    const char *bytewise; /* what @bytewise becomes */
    const char *inserted; /* what @inserted becomes */
    int row_locks;        /* appends rl_sql_t.locked inside writing operations */
} rl_sql_dialect_t;

/* A statement running: the driver's handle on it and where it stands. */
typedef struct rl_sql_cursor {
    rl_txn_t *txn;
    void *handle; /* the driver's: a sqlite3_stmt, a PGresult */
    int row;      /* the driver's: the current row, for a driver that holds every row at once */
    int on_row;   /* 1 after next() found a row, 0 at the end */
} rl_sql_cursor_t;

/*
 * What an SQL engine implements. Every function runs on the transaction's
 * thread and returns 0 or a negative RL_E_* error as store.h's rl_txn_* functions say
 * (RL_E_CONFLICT for a unique or foreign key violation, RL_E_UNAVAILABLE
 * for "try again", RL_E_INTERNAL logged by the driver).
 */
typedef struct rl_sql_driver {
    const char *name;
    rl_sql_dialect_t dialect;
    /* Transaction control, as rl_txn_begin... of store.h. */
    int (*begin)(rl_txn_t *txn);
    int (*commit)(rl_txn_t *txn);
    void (*rollback)(rl_txn_t *txn);
    int (*savepoint)(rl_txn_t *txn);
    void (*release)(rl_txn_t *txn, int keep);
    void (*close)(rl_txn_t *txn);
    /* Optional: as rl_txn_run_batch (NULL: every batch in a transaction). */
    int (*run_batch)(rl_txn_t *txn, rl_store_op_t *batch);
    /* Optional: as rl_txn_write_now (NULL: every batch goes to the worker). */
    int (*write_now)(rl_txn_t *txn, rl_store_op_t *batch, int *was_empty);
    /* Optional: as rl_txn_due_ms (NULL: never any work of its own). */
    int64_t (*due_ms)(rl_txn_t *txn);
    /*
     * Runs stmt (with its locked suffix when locked) with n parameters,
     * preparing it on first use (its address is the key of the driver's
     * cache). On 0, *cur is open: rows come from next, and finish ends it.
     * On an error nothing is open.
     */
    int (*run)(rl_txn_t *txn, const rl_sql_t *stmt, int locked, const rl_sql_param_t *params, int n,
               rl_sql_cursor_t *cur);
    /* Moves to the next row: 1, 0 at the end, or an error. */
    int (*next)(rl_sql_cursor_t *cur);
    int (*is_null)(const rl_sql_cursor_t *cur, int col);
    int64_t (*integer)(const rl_sql_cursor_t *cur, int col);
    /* The column's bytes, valid until next or finish, *len their length; NULL for a NULL column. */
    const char *(*bytes)(const rl_sql_cursor_t *cur, int col, size_t *len);
    /*
     * Ends the statement (a write that returns rows runs to its end first);
     * *changes (when asked) the rows it inserted, updated or deleted. 0 or an
     * error.
     */
    int (*finish)(rl_sql_cursor_t *cur, int64_t *changes);
    /*
     * Holds a lock on (owner, scope, key) until the commit, so that a second
     * transaction checking the same idempotency key waits for the first's
     * record; NULL for an engine where writers never run side by side.
     */
    int (*lock_key)(rl_txn_t *txn, const char *owner, const char *scope, const char *key);
} rl_sql_driver_t;

/* A connection of an SQL backend starts with this. */
typedef struct rl_sql_txn {
    rl_txn_t base;
    const rl_sql_driver_t *driver;
} rl_sql_txn_t;

#define RL_SQL_TXN(txn) ((rl_sql_txn_t *)(txn))

/*
 * stmt's text in dialect d, with the locked suffix when locked: a malloc'd
 * string the caller frees, or NULL (out of memory).
 */
char *rl_sql__rewrite(const rl_sql_dialect_t *d, const rl_sql_t *stmt, int locked);

/* ---- the generic statements (sql.c), used by ops.c ------------------------------------------------ */

/* A write; *changes (when asked) the rows it changed. */
int rl_sql__write(rl_txn_t *txn, const rl_sql_t *stmt, int64_t *changes, const rl_sql_param_t *params, int n);
/* A write by key: RL_E_NOT_FOUND when it changed no row. */
int rl_sql__write_one(rl_txn_t *txn, const rl_sql_t *stmt, const rl_sql_param_t *params, int n);
/* An INSERT ... ON CONFLICT DO NOTHING of a row: RL_E_CONFLICT when its key was taken (no failed statement). */
int rl_sql__insert(rl_txn_t *txn, const rl_sql_t *stmt, const rl_sql_row_t *row, const void *values);
/* The same, a row already there being no error (insert_ignore). */
int rl_sql__insert_ignore(rl_txn_t *txn, const rl_sql_t *stmt, const rl_sql_row_t *row, const void *values);
/* The first row into *out (a struct described by row): RL_E_NOT_FOUND when none. */
int rl_sql__get(rl_txn_t *txn, const rl_sql_t *stmt, const rl_sql_row_t *row, void *out, const rl_sql_param_t *params,
                int n);
/* Every row, into an array of row->size structs in the operation's arena. */
int rl_sql__list(rl_txn_t *txn, const rl_sql_t *stmt, const rl_sql_row_t *row, void *rows, size_t *count,
                 const rl_sql_param_t *params, int n);

#endif
