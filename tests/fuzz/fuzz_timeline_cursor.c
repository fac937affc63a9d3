/* Fuzz target: the timeline's cursor parser (relay/timeline.c); an accepted cursor survives a round trip. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "relay/sessions/timeline.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct timeline *op = rl_op_new(&timeline_type, sizeof(*op));
    char *text = malloc(size + 1), again[CURSOR_MAX];
    cursor_t cursor, back;

    memcpy(text, data, size);
    text[size] = '\0';
    if (cursor_decode(op, text, &cursor) == 0) {
        cursor_encode(cursor.kind, cursor.at, cursor.key, again);
        if (cursor_decode(op, again, &back) != 0 || back.kind != cursor.kind || back.at != cursor.at ||
            strcmp(back.key, cursor.key) != 0)
            __builtin_trap();
    }
    free(text);
    rl_store_op_free(&op->op.base);
    return 0;
}
