/*
 * Parsers of what crosses the bridge's two boundaries:
 *   - frames the relay sends on the socket (ready, update, ping);
 *   - lines a jsonl agent writes on its stdout (docs/bridge.md, "The jsonl
 *     protocol").
 * Both take untrusted bytes and are fuzzed (tests/fuzz/fuzz_bridge_*.c).
 * Pure; any thread.
 */
#ifndef RL_BRIDGE_FRAME_H
#define RL_BRIDGE_FRAME_H

#include <jansson.h>
#include <stddef.h>

typedef enum rl_frame_type {
    RL_FRAME_READY,
    RL_FRAME_UPDATE,
    RL_FRAME_PING,
    RL_FRAME_OTHER, /* a type this bridge does not know: ignored (forward compatibility) */
} rl_frame_type_t;

typedef struct rl_frame {
    rl_frame_type_t type;
    json_t *root;                /* owns everything below */
    const char *installation_id; /* ready */
    /* update */
    const char *update_id, *update_type, *session_id, *interaction_id;
    json_t *payload; /* an object; borrowed from root */
} rl_frame_t;

/*
 * Parses one text frame. 0 with *frame filled (free with rl_frame_free), or
 * -1 with err set when it is not a JSON object with a string "type", or an
 * update lacks update_id (a string of 1-63 bytes), type or an object payload.
 * session_id and interaction_id are "" when absent or null.
 */
int rl_frame_parse(const char *text, size_t len, rl_frame_t *frame, char *err, size_t errsz);
void rl_frame_free(rl_frame_t *frame);

typedef enum rl_agent_line_type {
    RL_LINE_MANIFEST,
    RL_LINE_DELTA,
    RL_LINE_END,
    RL_LINE_TASK_START,
    RL_LINE_TASK_PROGRESS,
    RL_LINE_TASK_FINISH,
    RL_LINE_APPROVAL_REQUEST,
    RL_LINE_CAPABILITY_REQUEST,
    RL_LINE_LOG,
} rl_agent_line_type_t;

typedef struct rl_agent_line {
    rl_agent_line_type_t type;
    json_t *root;                            /* the whole line, an object; owns the strings below */
    const char *session_id, *interaction_id; /* "" for manifest and log */
    const struct rl_agent *from;             /* the agent that wrote it (a manifest is per agent); NULL: the default */
} rl_agent_line_t;

/*
 * Parses one line an agent wrote (without its newline). Required fields per
 * type are checked from one table; other fields are passed through to the
 * relay as they are and validated there. 0, or -1 with err set.
 */
int rl_agent_line_parse(const char *line, size_t len, rl_agent_line_t *out, char *err, size_t errsz);
void rl_agent_line_free(rl_agent_line_t *line);

#endif
