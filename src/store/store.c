#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "store/store.h"

int rl_store_open(const char *location, rl_store_t **out)
{
    char path[4096];

    if (strncmp(location, "sqlite:", 7) == 0)
        return rl_store__sqlite_open(location + 7, out);
    if (strstr(location, "://") != NULL) {
        rl_log_error("unsupported store '%s': only the embedded SQLite store is available", location);
        return -1;
    }
    if ((size_t)snprintf(path, sizeof(path), "%s/relay.db", location) >= sizeof(path)) {
        rl_log_error("data folder path too long");
        return -1;
    }
    return rl_store__sqlite_open(path, out);
}
