/* Opening a bus by its location. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus/bus.h"
#include "bus/redis.h"
#include "common/log.h"

static int open_local(const char *location, h2o_loop_t *loop, const rl_bus_config_t *config, rl_bus_t **out)
{
    return rl_bus__local_open(loop, config, out);
}

/* The backends by location: an exact name, or a URL scheme. */
static const struct {
    const char *prefix;
    int exact;
    int (*open)(const char *location, h2o_loop_t *loop, const rl_bus_config_t *config, rl_bus_t **out);
} locations[] = {
    {"", 1, open_local},
    {"local", 1, open_local},
    {"redis://", 0, rl_bus__redis_open},
    {"unix://", 0, rl_bus__redis_open},
};

int rl_bus_open(const char *location, h2o_loop_t *loop, const rl_bus_config_t *config, rl_bus_t **out)
{
    size_t i;

    if (location == NULL)
        location = "";
    for (i = 0; i < sizeof(locations) / sizeof(locations[0]); ++i) {
        const char *prefix = locations[i].prefix;
        if (locations[i].exact ? strcmp(location, prefix) == 0 : strncmp(location, prefix, strlen(prefix)) == 0)
            return locations[i].open(location, loop, config, out);
    }
    /* Not repeated: a mistyped URL may still hold a password. */
    rl_log_error("unsupported bus location: use local, redis://HOST:PORT/N or unix:///PATH?db=N");
    return -1;
}

void rl_bus_publish(rl_bus_t *bus, const char *user_id, const char *name, json_t *data)
{
    char *text = data != NULL ? json_dumps(data, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;

    json_decref(data);
    if (data != NULL && text == NULL) {
        rl_log_warn("could not encode %s", name);
        return;
    }
    rl_bus_publish_text(bus, user_id, name, text != NULL ? text : "{}", text != NULL ? strlen(text) : 2);
    free(text);
}

uint64_t rl_bus_calls_total(void)
{
    return rl_redis_calls();
}
