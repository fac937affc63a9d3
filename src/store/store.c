#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "store/store.h"

/* The relay's store: the backend on a thread of its own (store_worker.c). */
static int open_on_worker(const char *path, rl_store_t **out)
{
    rl_store_t *inner;

    if (rl_store__sqlite_open(path, &inner) != 0)
        return -1;
    return rl_store__worker_open(inner, out);
}

int rl_store_open(const char *location, rl_store_t **out)
{
    char path[4096];

    if (strncmp(location, "sqlite:", 7) == 0)
        return open_on_worker(location + 7, out);
    if (strstr(location, "://") != NULL) {
        rl_log_error("unsupported store '%s': only the embedded SQLite store is available", location);
        return -1;
    }
    if ((size_t)snprintf(path, sizeof(path), "%s/relay.db", location) >= sizeof(path)) {
        rl_log_error("data folder path too long");
        return -1;
    }
    return open_on_worker(path, out);
}

void rl_store_drain(rl_store_t *store)
{
    while (rl_store_pending(store)) {
        int fd = rl_store_wake_fd(store);
        if (fd >= 0) {
            struct pollfd wait = {.fd = fd, .events = POLLIN};
            if (poll(&wait, 1, -1) < 0 && errno != EINTR)
                break;
        }
        rl_store_flush(store);
    }
}
