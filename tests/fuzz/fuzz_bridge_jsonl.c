/*
 * Fuzz target: what a jsonl agent writes, through the line splitter and the
 * line parser of relay-bridge (bridge/jsonl_reader.c, bridge/frame.c).
 */
#include <stddef.h>
#include <stdint.h>

#include "bridge/frame.h"
#include "bridge/jsonl_reader.h"

static void on_line(void *user, const char *line, size_t len)
{
    rl_agent_line_t parsed;
    char err[160];

    (void)user;
    if (rl_agent_line_parse(line, len, &parsed, err, sizeof(err)) == 0) {
        if (parsed.session_id == NULL || parsed.interaction_id == NULL)
            __builtin_trap();
        rl_agent_line_free(&parsed);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rl_jsonl_reader_t reader;
    size_t half = size / 2;

    rl_jsonl_reader_init(&reader, 4096);
    /* Two reads, so that lines also cross a read boundary. */
    rl_jsonl_reader_feed(&reader, (const char *)data, half, on_line, NULL);
    rl_jsonl_reader_feed(&reader, (const char *)data + half, size - half, on_line, NULL);
    rl_jsonl_reader_free(&reader);
    return 0;
}
