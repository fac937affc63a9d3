/* Opening the store by its location: which backend, where. */
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "store/backends.h"
#include "store/deltalog.h"
#include "store/sql.h"

/*
 * Where each kind of location goes; a location without a scheme is a data
 * folder holding relay.db. A backend whose location is a URL gets it whole
 * (PostgreSQL: a libpq connection URI), the others what follows the scheme.
 */
static const struct {
    const char *scheme;
    int (*open)(const char *location, rl_txn_t **out);
    int whole;
} backends[] = {
    {"sqlite:", rl_store__sqlite_open, 0},
    {"postgres://", rl_store__postgres_open, 1},
    {"postgresql://", rl_store__postgres_open, 1},
};

int rl_store__backend_open(const char *location, rl_txn_t **out)
{
    char path[4096];
    size_t i;

    for (i = 0; i < sizeof(backends) / sizeof(backends[0]); ++i) {
        size_t len = strlen(backends[i].scheme);
        if (strncmp(location, backends[i].scheme, len) == 0)
            return backends[i].open(backends[i].whole ? location : location + len, out);
    }
    if (strstr(location, "://") != NULL) {
        /* Only the scheme: the rest of a URL may carry a password. */
        rl_log_error("unsupported store '%.*s://...': the store is sqlite:PATH or postgres://...",
                     (int)(strstr(location, "://") - location), location);
        return -1;
    }
    if ((size_t)snprintf(path, sizeof(path), "%s/relay.db", location) >= sizeof(path)) {
        rl_log_error("data folder path too long");
        return -1;
    }
    return rl_store__sqlite_open(path, out);
}

int rl_store_open(const char *location, rl_store_t **out)
{
    rl_txn_t *txn;
    const char *db;
    char path[4200];
    int own;

    if (rl_store__backend_open(location, &txn) != 0)
        return -1;
    /*
     * relayd's SQLite store streams deltas through a log beside the database
     * (deltalog.h), and its open-message records are the truth, only when
     * the store is the data folder's own: relayd holds that folder's lock, so
     * no other relayd writes to it. Its log is locked exclusively; a relayd
     * given the same file as sqlite:PATH (nodes sharing a file, which check
     * every delta against the store) takes that lock shared, so the two can
     * never meet. One-shot commands (rl_store_open_inline) take neither: they
     * must not fold or cut the log of a relayd that runs meanwhile.
     */
    if ((db = rl_store__sqlite_path(txn)) != NULL) {
        own = strncmp(location, "sqlite:", 7) != 0;
        snprintf(path, sizeof(path), "%s-deltas.log", db);
        if ((txn->log = rl_deltalog_open(path, own)) == NULL) {
            rl_txn_close(txn);
            return -1;
        }
        if (!own) {
            /* Held for its shared lock as long as relayd runs; nothing is written to it. */
            txn->log_lock = txn->log;
            txn->log = NULL;
        }
    }
    return rl_store__wrap(txn, 1, out);
}

int rl_store_open_inline(const char *location, rl_store_t **out)
{
    rl_txn_t *txn;

    return rl_store__backend_open(location, &txn) == 0 ? rl_store__wrap(txn, 0, out) : -1;
}
