/*
 * Fuzz target: the client's EventSource parser (src/client/sse.c) on
 * arbitrary bytes, fed whole and then in chunks split at the first byte's
 * value, with small caps so that the limits are reached.
 */
#include <stdint.h>
#include <string.h>

#include "client/sse.h"

static void check(void *user, const rl_sse_event_t *event)
{
    size_t *count = user;

    if (event->data == NULL || event->data[event->data_len] != '\0' || strlen(event->id) >= RL_SSE_ID_MAX ||
        event->event[0] == '\0')
        __builtin_trap();
    ++*count;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rl_sse_parser_t whole, split;
    size_t count_whole = 0, count_split = 0, step, at;
    int result_whole, result_split = 0;

    if (rl_sse_parser_init(&whole, 64, 256, check, &count_whole) != 0)
        return 0;
    if (rl_sse_parser_init(&split, 64, 256, check, &count_split) != 0) {
        rl_sse_parser_free(&whole);
        return 0;
    }
    result_whole = rl_sse_parser_feed(&whole, (const char *)data, size);
    step = size > 0 ? (size_t)data[0] % 7 + 1 : 1;
    for (at = 0; at < size && result_split == 0; at += step)
        result_split = rl_sse_parser_feed(&split, (const char *)data + at, size - at < step ? size - at : step);
    /* How the input is cut into chunks must not change what is parsed. */
    if (result_whole != result_split || count_whole != count_split || strcmp(whole.last_id, split.last_id) != 0)
        __builtin_trap();
    rl_sse_parser_free(&whole);
    rl_sse_parser_free(&split);
    return 0;
}
