/*
 * The Agent Client Protocol's vocabulary mapped onto the relay's, as const
 * tables (docs/bridge.md, "acp:COMMAND"; the shapes are those of
 * docs/bridge.md, "acp:COMMAND"): session/update kinds to bridge calls, a
 * decision to the permission option that answers it, stop reasons to finish
 * reasons, tool kinds to approval severities, and the normalisation of tool
 * call content into the relay's content blocks. Pure functions over jansson
 * values; any thread. The unit tests read these tables
 * (tests/unit/bridge/test_acp_map.c).
 */
#ifndef RL_BRIDGE_ACP_MAP_H
#define RL_BRIDGE_ACP_MAP_H

#include <jansson.h>
#include <stddef.h>

/* What the adapter does with one session/update kind. */
typedef enum rl_acp_update {
    RL_ACP_UPDATE_IGNORE,      /* user_message_chunk (our own prompt echoed), and kinds we do not know */
    RL_ACP_UPDATE_TEXT,        /* agent_message_chunk: reply deltas */
    RL_ACP_UPDATE_THOUGHT,     /* agent_thought_chunk: the turn's "think" task */
    RL_ACP_UPDATE_TOOL_CALL,   /* tool_call: createTask (and finishTask when it arrives finished) */
    RL_ACP_UPDATE_TOOL_UPDATE, /* tool_call_update: updateTask, or finishTask on completed/failed */
    RL_ACP_UPDATE_PLAN,        /* plan: the turn's "plan" task */
    RL_ACP_UPDATE_COMMANDS,    /* available_commands_update: setManifest commands */
    RL_ACP_UPDATE_MODE,        /* current_mode_update: setManifest agent.mode, and the session's state */
    RL_ACP_UPDATE_USAGE,       /* usage_update: the context figures of the turn's usage (sendMessageEnd) */
    RL_ACP_UPDATE_CONFIG,      /* config_option_update: the session's state (acp_steer.c) */
    RL_ACP_UPDATE_COUNT
} rl_acp_update_t;

typedef struct rl_acp_update_row {
    const char *kind;       /* the sessionUpdate discriminator */
    rl_acp_update_t update; /* what the adapter does */
    const char *call;       /* the bridge call it becomes, for the docs and the tests */
} rl_acp_update_row_t;

extern const rl_acp_update_row_t rl_acp_updates[];
extern const size_t rl_acp_updates_count;

/* The row's action for kind; RL_ACP_UPDATE_IGNORE for NULL or an unknown kind. */
rl_acp_update_t rl_acp_update_of(const char *kind);

/* A stop reason of session/prompt to relayd's finish_reason (docs/api.md); anything else is "stop". */
const char *rl_acp_finish_reason(const char *stop_reason);

/*
 * The turn's usage as sendMessageEnd takes it ({input_tokens, output_tokens,
 * cached_tokens, total_tokens}) from a PromptResponse's "usage" (unstable in
 * ACP v1: {inputTokens, outputTokens, cachedReadTokens, totalTokens, ...}):
 * a new object, or NULL when the agent reported none. Only non-negative
 * integers are taken; anything else the agent puts there (a model's name) is not.
 */
json_t *rl_acp_usage(json_t *usage);

/*
 * The turn's usage from a session/prompt answer: its "usage" (rl_acp_usage), else Gemini CLI's
 * _meta.quota.token_count {input_tokens, output_tokens}. A new object, or NULL when none.
 */
json_t *rl_acp_prompt_usage(json_t *result);

/*
 * A usage_update ({used, size, cost: {amount, currency}}) as the context
 * figures of a message's usage: {context_used?, context_size?, cost?:
 * {amount, currency}}; a new object, or NULL when it carries none that
 * holds (a negative count, a size of 0, a currency not of three capitals).
 */
json_t *rl_acp_context_usage(json_t *update);

/* A task's shell output: the last this many bytes are kept and sent (docs/api.md "Shell output"). */
#define RL_ACP_TERMINAL_MAX (16 * 1024)

/*
 * What a tool call update says of a shell command (Claude Code's and Codex's
 * adapters: _meta.terminal_info, _meta.terminal_output {data},
 * _meta.terminal_exit {exit_code}; or ACP terminal content): 1 when it
 * names a terminal, with *data and *len the new output (borrowed; NULL when
 * none) and *exit_status its exit code (borrowed; NULL when not ended or
 * unknown). 0 when it says nothing of one.
 */
int rl_acp_terminal_meta(json_t *update, const char **data, size_t *len, json_t **exit_status);

/*
 * What a finished command's rawOutput says of it, for agents that say it only there (Codex: no
 * terminal_exit, and output written before its first tool_call update is never streamed):
 * *whole its whole output ("aggregated_output", borrowed; NULL when absent) and *exit_status its
 * "exit_code" (borrowed; NULL when absent).
 */
void rl_acp_terminal_raw_output(json_t *raw_output, const char **whole, size_t *len, json_t **exit_status);

/*
 * Appends output to tail and keeps its last RL_ACP_TERMINAL_MAX bytes at
 * most, starting on a UTF-8 character (tail's cap must be at least twice
 * RL_ACP_TERMINAL_MAX). 1 when earlier output was dropped.
 */
struct rl_buf;
int rl_acp_terminal_append(struct rl_buf *tail, const char *data, size_t len);

/* A tool kind as the relay gets it: one of ACP's ToolKind values, "other" for NULL or an unknown one. */
const char *rl_acp_tool_kind(const char *kind);
/* The approval severity of a tool kind (docs/bridge.md "acp:COMMAND", permissions): low, medium or high. */
const char *rl_acp_severity(const char *kind);

/* The user's decision as the bridge loop hands it to an adapter (its "approval" lines), plus expiry. */
typedef enum rl_acp_decision {
    RL_ACP_APPROVE,
    RL_ACP_APPROVE_ALWAYS,
    RL_ACP_DENY,
    RL_ACP_EXPIRED,
} rl_acp_decision_t;

/* The loop's gateway word ("allow-once", "allow-always", "deny") to a decision; anything else is a denial. */
rl_acp_decision_t rl_acp_decision_of(const char *gateway_word);
/*
 * The optionId (borrowed from options) of the permission option that
 * answers decision: the first offered option of the first kind in the
 * decision's preference list (approve: allow_once; approve_always:
 * allow_once, else allow_always, since the relay's grant, not the agent's
 * own rule, answers later requests; deny and expiry: reject_once, else
 * reject_always). NULL when none is offered: answer "cancelled" then.
 */
const char *rl_acp_option_for(json_t *options, rl_acp_decision_t decision);

/* Each text or diff field of a content block is cut to this many bytes (docs/api.md "Content blocks"). */
#define RL_ACP_FIELD_MAX (256 * 1024)
/*
 * One call's content blocks together, as JSON; later blocks are left out.
 * relayd takes bodies up to 1 MB: this, a bounded raw output and locations
 * (below, at most twice their size once escaped) and the rest fit.
 */
#define RL_ACP_CONTENT_BUDGET (640 * 1024)
/* A raw input or output (task args, result.raw_output): each string, and all of them together. */
#define RL_ACP_VALUE_STRING_MAX (16 * 1024)
#define RL_ACP_VALUE_MAX        (64 * 1024)
/* A thought's text in its task: the start is kept (docs/bridge.md "acp:COMMAND"). */
#define RL_ACP_THOUGHT_MAX (64 * 1024)
/* The relay's cap on status_label and approval title (docs/api.md). */
#define RL_ACP_LABEL_MAX 200
/* The relay's cap on a task's name. */
#define RL_ACP_NAME_MAX 128

/*
 * ACP tool call content (ToolCallContent[]) as the relay's blocks
 * (docs/api.md "Content blocks"): text, diff {path, old_text, new_text}; images and audio
 * are left out and counted in *omitted; terminal blocks are skipped (the
 * task's "terminal" carries their output). Each field is cut at max bytes on a UTF-8 boundary with
 * "truncated": true; blocks past RL_ACP_CONTENT_BUDGET bytes of JSON in all
 * are left out and counted too. A new array (empty for NULL or a non-array).
 */
json_t *rl_acp_content(json_t *content, size_t max, size_t *omitted);

/*
 * A copy of value (any JSON) fit for a call's body: each string cut at
 * max_string bytes, the strings and keys together at most max_total bytes
 * (what does not fit, and anything nested deeper than 16 levels, becomes
 * "…"). relayd refuses bodies over 1 MB, and an agent's raw input or output
 * can be a whole file. A new reference, or NULL for NULL.
 */
json_t *rl_acp_bounded(json_t *value, size_t max_string, size_t max_total);

/*
 * rawInput as task args: an object (bounded as above with
 * RL_ACP_VALUE_STRING_MAX, RL_ACP_VALUE_MAX), anything else wrapped as
 * {"input": …}; NULL for none. A new reference.
 */
json_t *rl_acp_args(json_t *raw_input);

/*
 * The input that identifies a tool call for the relay's "tool" grants
 * (docs/bridge.md "acp:COMMAND", permissions): execute: the command line; read, edit, delete, move: the
 * path(s); fetch: the URL; otherwise, or when the input says nothing, the
 * title. tool_call is the ACP ToolCall(Update) as known so far. A malloc'd
 * string (at most 8192 bytes), or NULL when out of memory.
 */
char *rl_acp_command_of(const char *kind, json_t *tool_call);

/* A new string of text cut to at most max bytes without splitting a UTF-8 sequence. */
json_t *rl_acp_string_cut(const char *text, size_t len, size_t max, int *cut);

#endif
