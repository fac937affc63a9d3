/* Fuzz target: the traceparent parser, and the response it derives from a valid input. */
#include <stdint.h>
#include <string.h>

#include "http/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rl_traceparent_t parsed, again;
    char header[RL_TRACEPARENT_LEN + 1], trace_id[33];

    if (rl_traceparent_parse((const char *)data, size, &parsed) != 0)
        return 0;
    rl_traceparent_respond(&parsed, header, trace_id);
    /* Whatever was accepted must produce a header that parses again with the same trace. */
    if (rl_traceparent_parse(header, strlen(header), &again) != 0 || strcmp(again.trace_id, parsed.trace_id) != 0)
        __builtin_trap();
    return 0;
}
