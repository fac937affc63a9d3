/* Opening a bus by its location, and the event record every backend shares. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus/bus.h"
#include "common/log.h"
#include "http/sse.h"

int rl_bus_open(const char *location, h2o_loop_t *loop, const rl_bus_config_t *config, rl_bus_t **out)
{
    if (location == NULL || location[0] == '\0' || strcmp(location, "local") == 0)
        return rl_bus__local_open(loop, config, out);
    rl_log_error("unsupported bus '%s': only the in-process bus (local) is available", location);
    return -1;
}

rl_blob_t *rl_bus_frame(int64_t id, const char *name, json_t *data)
{
    /* One encoder builds every SSE record (src/http/sse.c): escaped JSON, never a truncated record. */
    return rl_sse_frame_new(id, name, data);
}
