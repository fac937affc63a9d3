/*
 * The SQL backends' generic statements: bind a row by its description, read
 * rows into structs, and say what an empty result means. Every engine's
 * difference is behind its driver (sql.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "store/sql.h"

/* ---- dialects ------------------------------------------------------------------------------------ */

static size_t put(char *out, size_t used, const char *text, size_t len)
{
    if (out != NULL)
        memcpy(out + used, text, len);
    return used + len;
}

/* Writes the rewritten text into out (NULL: only measures); its length. */
static size_t rewrite_into(const rl_sql_dialect_t *d, const char *text, const char *tail, char *out)
{
    static const char bytewise[] = "@bytewise", inserted[] = "@inserted";
    size_t used = 0;
    int next = 0;
    char quote = 0, number[16];

    for (const char *p = text; *p != '\0'; ++p) {
        if (quote != 0) {
            if (*p == quote)
                quote = 0;
            used = put(out, used, p, 1);
        } else if (*p == '\'' || *p == '"') {
            quote = *p;
            used = put(out, used, p, 1);
        } else if (*p == '?' && d->numbered) {
            const char *digits = p + 1;
            int n = 0, len;
            while (*digits >= '0' && *digits <= '9')
                n = n * 10 + (*digits++ - '0');
            if (digits == p + 1)
                n = ++next;
            else if (n > next)
                next = n;
            len = snprintf(number, sizeof(number), "$%d", n);
            used = put(out, used, number, (size_t)len);
            p = digits - 1;
        } else if (strncmp(p, bytewise, sizeof(bytewise) - 1) == 0) {
            used = put(out, used, d->bytewise, strlen(d->bytewise));
            p += sizeof(bytewise) - 2;
        } else if (strncmp(p, inserted, sizeof(inserted) - 1) == 0) {
            used = put(out, used, d->inserted, strlen(d->inserted));
            p += sizeof(inserted) - 2;
        } else {
            used = put(out, used, p, 1);
        }
    }
    if (tail != NULL)
        used = put(out, used, tail, strlen(tail));
    return used;
}

char *rl_sql__rewrite(const rl_sql_dialect_t *d, const rl_sql_t *stmt, int locked)
{
    const char *tail = locked ? stmt->locked : NULL;
    size_t len = rewrite_into(d, stmt->text, tail, NULL);
    char *out = malloc(len + 1);

    if (out == NULL)
        return NULL;
    rewrite_into(d, stmt->text, tail, out);
    out[len] = '\0';
    return out;
}

/* ---- running statements ------------------------------------------------------------------------- */

static int run(rl_txn_t *txn, const rl_sql_t *stmt, const rl_sql_param_t *params, int n, rl_sql_cursor_t *cur)
{
    const rl_sql_driver_t *driver = RL_SQL_TXN(txn)->driver;
    int locked = stmt->locked != NULL && txn->writing && driver->dialect.row_locks;

    cur->txn = txn;
    cur->handle = NULL;
    cur->row = -1;
    cur->on_row = 0;
    return driver->run(txn, stmt, locked, params, n, cur);
}

/* Steps to the end of a statement and ends it: 0 or an error; *changes when asked. */
static int run_to_end(rl_txn_t *txn, rl_sql_cursor_t *cur, int64_t *changes)
{
    const rl_sql_driver_t *driver = RL_SQL_TXN(txn)->driver;
    int rc;

    while ((rc = driver->next(cur)) == 1)
        ;
    if (rc < 0) {
        driver->finish(cur, NULL);
        return rc;
    }
    return driver->finish(cur, changes);
}

int rl_sql__write(rl_txn_t *txn, const rl_sql_t *stmt, int64_t *changes, const rl_sql_param_t *params, int n)
{
    rl_sql_cursor_t cur;
    int result = run(txn, stmt, params, n, &cur);

    return result != 0 ? result : run_to_end(txn, &cur, changes);
}

int rl_sql__write_one(rl_txn_t *txn, const rl_sql_t *stmt, const rl_sql_param_t *params, int n)
{
    int64_t changes = 0;
    int result = rl_sql__write(txn, stmt, &changes, params, n);

    return result == 0 && changes == 0 ? RL_E_NOT_FOUND : result;
}

/* The row's columns as parameters, in its description's order. */
static int bind_row(const rl_sql_row_t *row, const void *values, rl_sql_param_t *params)
{
    const char *base = values;
    int i;

    for (i = 0; i < row->count; ++i) {
        const rl_sql_column_t *c = &row->columns[i];
        rl_sql_param_t *p = &params[i];
        p->type = c->type;
        p->text = NULL;
        p->len = 0;
        p->value = 0;
        switch (c->type) {
        case RL_SQL_TEXT:
            p->text = *(const char *const *)(base + c->offset);
            break;
        case RL_SQL_BYTES:
            p->text = *(const char *const *)(base + c->offset);
            p->len = *(const size_t *)(base + c->len_offset);
            break;
        case RL_SQL_INT32:
            p->value = *(const int *)(base + c->offset);
            break;
        case RL_SQL_BOOL:
            p->value = *(const int *)(base + c->offset) != 0;
            break;
        default:
            p->value = *(const int64_t *)(base + c->offset);
            break;
        }
    }
    return row->count;
}

int rl_sql__insert_ignore(rl_txn_t *txn, const rl_sql_t *stmt, const rl_sql_row_t *row, const void *values)
{
    rl_sql_param_t params[RL_SQL_MAX_PARAMS];

    return rl_sql__write(txn, stmt, NULL, params, bind_row(row, values, params));
}

int rl_sql__insert(rl_txn_t *txn, const rl_sql_t *stmt, const rl_sql_row_t *row, const void *values)
{
    rl_sql_param_t params[RL_SQL_MAX_PARAMS];
    int64_t changes = 0;
    int result = rl_sql__write(txn, stmt, &changes, params, bind_row(row, values, params));

    return result == 0 && changes == 0 ? RL_E_CONFLICT : result;
}

/* ---- reading rows -------------------------------------------------------------------------------- */

/* The cursor's row into out: strings copied into the operation's arena. */
static void read_row(const rl_sql_driver_t *driver, const rl_sql_cursor_t *cur, const rl_sql_row_t *row, void *out)
{
    char *base = out;
    int i;

    for (i = 0; i < row->count; ++i) {
        const rl_sql_column_t *c = &row->columns[i];
        switch (c->type) {
        case RL_SQL_TEXT:
        case RL_SQL_BYTES: {
            size_t len = 0;
            const char *bytes = driver->bytes(cur, i, &len);
            *(const char **)(base + c->offset) = bytes != NULL ? rl_arena_strndup(cur->txn->arena, bytes, len) : NULL;
            if (c->type == RL_SQL_BYTES)
                *(size_t *)(base + c->len_offset) = len;
            break;
        }
        case RL_SQL_TIME:
            *(int64_t *)(base + c->offset) = driver->is_null(cur, i) ? RL_NO_TIME : driver->integer(cur, i);
            break;
        case RL_SQL_INT32:
            *(int *)(base + c->offset) = (int)driver->integer(cur, i);
            break;
        case RL_SQL_BOOL:
            *(int *)(base + c->offset) = driver->integer(cur, i) != 0;
            break;
        default:
            *(int64_t *)(base + c->offset) = driver->integer(cur, i);
            break;
        }
    }
}

int rl_sql__get(rl_txn_t *txn, const rl_sql_t *stmt, const rl_sql_row_t *row, void *out, const rl_sql_param_t *params,
                int n)
{
    const rl_sql_driver_t *driver = RL_SQL_TXN(txn)->driver;
    rl_sql_cursor_t cur;
    int result = run(txn, stmt, params, n, &cur), rc;

    if (result != 0)
        return result;
    rc = driver->next(&cur);
    if (rc == 1)
        read_row(driver, &cur, row, out);
    result = driver->finish(&cur, NULL);
    if (rc < 0)
        return rc;
    if (result != 0)
        return result;
    return rc == 1 ? 0 : RL_E_NOT_FOUND;
}

int rl_sql__list(rl_txn_t *txn, const rl_sql_t *stmt, const rl_sql_row_t *row, void *rows, size_t *count,
                 const rl_sql_param_t *params, int n)
{
    const rl_sql_driver_t *driver = RL_SQL_TXN(txn)->driver;
    rl_sql_cursor_t cur;
    size_t capacity = 0;
    char *items = NULL;
    int result, rc;

    *(void **)rows = NULL;
    *count = 0;
    if ((result = run(txn, stmt, params, n, &cur)) != 0)
        return result;
    while ((rc = driver->next(&cur)) == 1) {
        /* read_row writes every field a description names: a row type's other fields are zeroed. */
        items = rl_arena_grow(txn->arena, items, *count, &capacity, row->size);
        memset(items + *count * row->size, 0, row->size);
        read_row(driver, &cur, row, items + *count * row->size);
        ++*count;
    }
    result = driver->finish(&cur, NULL);
    *(void **)rows = items;
    return rc < 0 ? rc : result;
}
