/* Opening a bus by its location, and the event record every backend shares. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus/bus.h"
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

rl_blob_t *rl_bus_frame(int64_t id, const char *name, json_t *data)
{
    char head[128], *text = data != NULL ? json_dumps(data, JSON_COMPACT) : strdup("{}");
    int head_len = snprintf(head, sizeof(head), "id: %lld\nevent: %s\ndata: ", (long long)id, name);
    size_t text_len;
    rl_blob_t *frame;

    /* Event names are the relay's own short identifiers; a longer one is a bug, not data. */
    if (text == NULL || head_len < 0 || (size_t)head_len >= sizeof(head)) {
        free(text);
        return NULL;
    }
    text_len = strlen(text);
    frame = malloc(sizeof(*frame) + (size_t)head_len + text_len + 3);
    if (frame != NULL) {
        frame->refs = 1;
        frame->len = (size_t)head_len + text_len + 2;
        memcpy(frame->bytes, head, (size_t)head_len);
        memcpy(frame->bytes + head_len, text, text_len);
        memcpy(frame->bytes + head_len + text_len, "\n\n", 3);
    }
    free(text);
    return frame;
}
