/* Opening the store by its location: which backend, where. */
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "store/backends.h"

/*
 * Where each kind of location goes; a location without a scheme is a data
 * folder holding relay.db, which relayd opens as its own (RL_STORE_OWN). A
 * backend whose location is a URL gets it whole (PostgreSQL: a libpq
 * connection URI), the others what follows the scheme.
 */
static const struct {
    const char *scheme;
    int (*open)(const char *location, rl_store_use_t use, rl_txn_t **out);
    int whole;
} backends[] = {
    {"sqlite:", rl_store__sqlite_open, 0},
    {"postgres://", rl_store__postgres_open, 1},
    {"postgresql://", rl_store__postgres_open, 1},
};

/* relayd's stores are RL_STORE_OWN or RL_STORE_SHARED by their location; one-shot ones RL_STORE_ONE_SHOT. */
static int backend_open(const char *location, int relayd, rl_txn_t **out)
{
    char path[4096];
    size_t i;

    for (i = 0; i < sizeof(backends) / sizeof(backends[0]); ++i) {
        size_t len = strlen(backends[i].scheme);
        if (strncmp(location, backends[i].scheme, len) == 0)
            return backends[i].open(backends[i].whole ? location : location + len,
                                    relayd ? RL_STORE_SHARED : RL_STORE_ONE_SHOT, out);
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
    return rl_store__sqlite_open(path, relayd ? RL_STORE_OWN : RL_STORE_ONE_SHOT, out);
}

int rl_store__backend_open(const char *location, rl_txn_t **out)
{
    return backend_open(location, 0, out);
}

int rl_store_open(const char *location, rl_store_t **out)
{
    rl_txn_t *txn;

    return backend_open(location, 1, &txn) == 0 ? rl_store__wrap(txn, 1, out) : -1;
}

int rl_store_open_inline(const char *location, rl_store_t **out)
{
    rl_txn_t *txn;

    return backend_open(location, 0, &txn) == 0 ? rl_store__wrap(txn, 0, out) : -1;
}
