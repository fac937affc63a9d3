/* Fuzz target: the update-frame parser of relay-bridge (bridge/frame.c, rl_frame_parse). */
#include <stddef.h>
#include <stdint.h>

#include "bridge/frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rl_frame_t frame;
    char err[128];

    if (rl_frame_parse((const char *)data, size, &frame, err, sizeof(err)) == 0) {
        if (frame.type == RL_FRAME_UPDATE && (frame.update_id == NULL || frame.payload == NULL))
            __builtin_trap();
        rl_frame_free(&frame);
    }
    return 0;
}
