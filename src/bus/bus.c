/* Opening a bus by its location, and the event record every backend shares. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus/bus.h"
#include "common/log.h"

int rl_bus_open(const char *location, h2o_loop_t *loop, const rl_bus_config_t *config, rl_bus_t **out)
{
    if (location == NULL || location[0] == '\0' || strcmp(location, "local") == 0)
        return rl_bus__local_open(loop, config, out);
    rl_log_error("unsupported bus '%s': only the in-process bus (local) is available", location);
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
