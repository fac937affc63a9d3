/*
 * Fuzz target: what an acp agent writes, through the line splitter, the
 * JSON-RPC parser and the ACP readers of relay-bridge (bridge/jsonl_reader.c,
 * bridge/jsonrpc.c, bridge/acp_map.c): every message that parses has its
 * update kind looked up, its tool call content normalised, its input
 * identified and its options matched, as the adapter does.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "bridge/acp_map.h"
#include "bridge/jsonl_reader.h"
#include "bridge/jsonrpc.h"

static void on_line(void *user, const char *line, size_t len)
{
    rl_jsonrpc_msg_t msg;
    json_t *bad_id = NULL, *update, *blocks, *args;
    char err[160], *command;
    size_t omitted;

    (void)user;
    if (rl_jsonrpc_parse(line, len, &msg, &bad_id, err, sizeof(err)) != 0) {
        json_decref(rl_jsonrpc_error(bad_id, RL_JSONRPC_INVALID_REQUEST, "Invalid Request"));
        json_decref(bad_id);
        return;
    }
    if ((msg.kind == RL_JSONRPC_REQUEST) != (msg.id != NULL && msg.method != NULL))
        __builtin_trap();
    update = json_object_get(msg.params, "update");
    (void)rl_acp_update_of(json_string_value(json_object_get(update, "sessionUpdate")));
    blocks = rl_acp_content(json_object_get(update, "content"), 64, &omitted);
    json_decref(blocks);
    args = rl_acp_args(json_object_get(update, "rawInput"));
    json_decref(args);
    command = rl_acp_command_of(json_string_value(json_object_get(update, "kind")), update);
    free(command);
    (void)rl_acp_option_for(json_object_get(msg.params, "options"), RL_ACP_APPROVE_ALWAYS);
    (void)rl_acp_finish_reason(json_string_value(json_object_get(msg.result, "stopReason")));
    (void)rl_jsonrpc_error_code(&msg);
    rl_jsonrpc_msg_free(&msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rl_jsonl_reader_t reader;
    size_t half = size / 2;

    rl_jsonl_reader_init(&reader, 65536);
    /* Two reads, so that lines also cross a read boundary. */
    rl_jsonl_reader_feed(&reader, (const char *)data, half, on_line, NULL);
    rl_jsonl_reader_feed(&reader, (const char *)data + half, size - half, on_line, NULL);
    rl_jsonl_reader_free(&reader);
    return 0;
}
