#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bridge/acp_map.h"
#include "common/buf.h"

#define COMMAND_MAX 8192

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

const rl_acp_update_row_t rl_acp_updates[] = {
    {"agent_message_chunk", RL_ACP_UPDATE_TEXT, "sendMessageDelta"},
    {"agent_thought_chunk", RL_ACP_UPDATE_THOUGHT, "createTask/updateTask kind think"},
    {"tool_call", RL_ACP_UPDATE_TOOL_CALL, "createTask"},
    {"tool_call_update", RL_ACP_UPDATE_TOOL_UPDATE, "updateTask/finishTask"},
    {"plan", RL_ACP_UPDATE_PLAN, "createTask/updateTask kind plan"},
    {"available_commands_update", RL_ACP_UPDATE_COMMANDS, "setManifest commands"},
    {"current_mode_update", RL_ACP_UPDATE_MODE, "setManifest agent.mode"},
    /* Our own prompt, echoed; and on session/load the history, which the relay already has. */
    {"user_message_chunk", RL_ACP_UPDATE_IGNORE, NULL},
    /* How full the context is and what the session cost so far: joins the turn's usage (sendMessageEnd). */
    {"usage_update", RL_ACP_UPDATE_USAGE, "sendMessageEnd usage.context_*"},
    {"config_option_update", RL_ACP_UPDATE_CONFIG, "POST /v1/bridge/sessions/:id/state options"},
    {"session_info_update", RL_ACP_UPDATE_IGNORE, NULL},
};
const size_t rl_acp_updates_count = COUNT(rl_acp_updates);

rl_acp_update_t rl_acp_update_of(const char *kind)
{
    size_t i;

    for (i = 0; kind != NULL && i < COUNT(rl_acp_updates); i++)
        if (strcmp(rl_acp_updates[i].kind, kind) == 0)
            return rl_acp_updates[i].update;
    return RL_ACP_UPDATE_IGNORE;
}

/* Words relayd's sendMessageEnd accepts (src/relay/bridge.c finish_reasons, docs/api.md "Finish reasons"). */
static const struct {
    const char *stop_reason, *finish_reason;
} stop_reasons[] = {
    {"end_turn", "stop"},          {"max_tokens", "length"},   {"max_turn_requests", "length"},
    {"refusal", "content_filter"}, {"cancelled", "cancelled"},
};

const char *rl_acp_finish_reason(const char *stop_reason)
{
    size_t i;

    for (i = 0; stop_reason != NULL && i < COUNT(stop_reasons); i++)
        if (strcmp(stop_reasons[i].stop_reason, stop_reason) == 0)
            return stop_reasons[i].finish_reason;
    return "stop";
}

/* ACP's usage fields and ours (docs/api.md, usage of sendMessageEnd). */
static const struct {
    const char *acp, *relay;
} usage_fields[] = {
    {"inputTokens", "input_tokens"},
    {"outputTokens", "output_tokens"},
    {"cachedReadTokens", "cached_tokens"},
    {"totalTokens", "total_tokens"},
};

json_t *rl_acp_usage(json_t *usage)
{
    json_t *out = NULL;
    size_t i;

    for (i = 0; json_is_object(usage) && i < COUNT(usage_fields); i++) {
        json_t *v = json_object_get(usage, usage_fields[i].acp);
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            continue;
        if (out == NULL)
            out = json_object();
        json_object_set(out, usage_fields[i].relay, v);
    }
    return out;
}

/* Gemini CLI's turn usage: the prompt answer's _meta.quota.token_count, already in our words. */
static const char *const quota_fields[] = {"input_tokens", "output_tokens"};

json_t *rl_acp_prompt_usage(json_t *result)
{
    json_t *usage = rl_acp_usage(json_object_get(result, "usage")), *count, *v;
    size_t i;

    if (usage != NULL)
        return usage;
    count = json_object_get(json_object_get(json_object_get(result, "_meta"), "quota"), "token_count");
    for (i = 0; json_is_object(count) && i < COUNT(quota_fields); i++) {
        v = json_object_get(count, quota_fields[i]);
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            continue;
        if (usage == NULL)
            usage = json_object();
        json_object_set(usage, quota_fields[i], v);
    }
    return usage;
}

/* A currency code as ISO 4217 writes it (three capitals); anything else is not taken (it could be any text). */
static int currency_ok(const char *code)
{
    size_t i;

    if (code == NULL || strlen(code) != 3)
        return 0;
    for (i = 0; i < 3; i++)
        if (code[i] < 'A' || code[i] > 'Z')
            return 0;
    return 1;
}

json_t *rl_acp_context_usage(json_t *update)
{
    json_t *used = json_object_get(update, "used"), *size = json_object_get(update, "size");
    json_t *cost = json_object_get(update, "cost"), *amount = json_object_get(cost, "amount");
    const char *currency = json_string_value(json_object_get(cost, "currency"));
    json_t *out = json_object();

    if (json_is_integer(used) && json_integer_value(used) >= 0)
        json_object_set(out, "context_used", used);
    if (json_is_integer(size) && json_integer_value(size) > 0)
        json_object_set(out, "context_size", size);
    if (json_is_number(amount) && json_number_value(amount) >= 0 && currency_ok(currency))
        json_object_set_new(out, "cost", json_pack("{s:O, s:s}", "amount", amount, "currency", currency));
    if (json_object_size(out) == 0) {
        json_decref(out);
        return NULL;
    }
    return out;
}

/* ---- shell output ------------------------------------------------------------------------------ */

int rl_acp_terminal_meta(json_t *update, const char **data, size_t *len, json_t **exit_status)
{
    json_t *meta = json_object_get(update, "_meta");
    json_t *output = json_object_get(json_object_get(meta, "terminal_output"), "data");
    json_t *exit = json_object_get(meta, "terminal_exit"), *code = json_object_get(exit, "exit_code");
    json_t *item;
    size_t i;
    int terminal = json_is_object(json_object_get(meta, "terminal_info")) || json_is_object(exit);

    *data = NULL;
    *len = 0;
    *exit_status = NULL;
    if (json_is_string(output)) {
        *data = json_string_value(output);
        *len = json_string_length(output);
        terminal = 1;
    }
    if (json_is_integer(code))
        *exit_status = code;
    /* ACP's own terminal content (a terminal the client runs) names one too; its output comes in _meta here. */
    json_array_foreach(json_object_get(update, "content"), i, item)
    {
        const char *type = json_string_value(json_object_get(item, "type"));
        if (type != NULL && strcmp(type, "terminal") == 0)
            terminal = 1;
    }
    return terminal;
}

void rl_acp_terminal_raw_output(json_t *raw_output, const char **whole, size_t *len, json_t **exit_status)
{
    json_t *output = json_object_get(raw_output, "aggregated_output"), *code = json_object_get(raw_output, "exit_code");

    *whole = json_is_string(output) ? json_string_value(output) : NULL;
    *len = json_is_string(output) ? json_string_length(output) : 0;
    *exit_status = json_is_integer(code) ? code : NULL;
}

int rl_acp_terminal_append(rl_buf_t *tail, const char *data, size_t len)
{
    int dropped = 0;
    size_t skip = 0;

    if (len >= RL_ACP_TERMINAL_MAX) {
        /* The chunk alone fills the tail: only its end is kept. */
        dropped = tail->len > 0 || len > RL_ACP_TERMINAL_MAX;
        rl_buf_reset(tail);
        data += len - RL_ACP_TERMINAL_MAX;
        len = RL_ACP_TERMINAL_MAX;
    }
    if (rl_buf_append(tail, data, len) != 0)
        return dropped;
    if (tail->len > RL_ACP_TERMINAL_MAX) {
        rl_buf_consume(tail, tail->len - RL_ACP_TERMINAL_MAX);
        dropped = 1;
    }
    /* The kept part starts on a character: continuation bytes of one cut in two go too. */
    while (dropped && skip < tail->len && ((unsigned char)tail->bytes[skip] & 0xC0) == 0x80)
        skip++;
    if (skip > 0)
        rl_buf_consume(tail, skip);
    return dropped;
}

/* ACP's ToolKind, each with the severity of an approval for it (docs/bridge.md "acp:COMMAND", permissions): what it can
 * change or reach. */
static const struct {
    const char *kind, *severity;
} tool_kinds[] = {
    {"read", "low"},    {"search", "low"},   {"think", "low"},          {"fetch", "low"},    {"edit", "medium"},
    {"move", "medium"}, {"other", "medium"}, {"switch_mode", "medium"}, {"execute", "high"}, {"delete", "high"},
};

const char *rl_acp_tool_kind(const char *kind)
{
    size_t i;

    for (i = 0; kind != NULL && i < COUNT(tool_kinds); i++)
        if (strcmp(tool_kinds[i].kind, kind) == 0)
            return tool_kinds[i].kind;
    return "other";
}

const char *rl_acp_severity(const char *kind)
{
    size_t i;

    kind = rl_acp_tool_kind(kind);
    for (i = 0; i < COUNT(tool_kinds); i++)
        if (strcmp(tool_kinds[i].kind, kind) == 0)
            return tool_kinds[i].severity;
    return "medium";
}

/* The loop's gateway words (bridge.c decision_map). An unknown word is never taken as consent. */
static const struct {
    const char *word;
    rl_acp_decision_t decision;
} gateway_words[] = {
    {"allow-once", RL_ACP_APPROVE},
    {"allow-always", RL_ACP_APPROVE_ALWAYS},
    {"deny", RL_ACP_DENY},
};

rl_acp_decision_t rl_acp_decision_of(const char *word)
{
    size_t i;

    for (i = 0; word != NULL && i < COUNT(gateway_words); i++)
        if (strcmp(gateway_words[i].word, word) == 0)
            return gateway_words[i].decision;
    return RL_ACP_DENY;
}

/*
 * Each decision's option kinds, best first. A plain approval never takes an
 * allow_always option: that would grant the agent more than the user did.
 * Nor, first, does "approve always": an agent's own "always" is its scope,
 * not the relay's (Claude Code's covers every later call of the tool, any
 * file, any command), while the relay's grant covers the same tool on the
 * same input only and answers those later requests itself (issue 22: "and
 * nothing broader"). So allow_once, and allow_always only when the agent
 * offers nothing else that allows. Expiry is a denial (spec: an expired
 * approval denies).
 */
static const char *const option_preferences[][3] = {
    [RL_ACP_APPROVE] = {"allow_once", NULL},
    [RL_ACP_APPROVE_ALWAYS] = {"allow_once", "allow_always", NULL},
    [RL_ACP_DENY] = {"reject_once", "reject_always", NULL},
    [RL_ACP_EXPIRED] = {"reject_once", "reject_always", NULL},
};

const char *rl_acp_option_for(json_t *options, rl_acp_decision_t decision)
{
    size_t k, i;
    json_t *option;

    if ((unsigned)decision >= COUNT(option_preferences))
        return NULL;
    for (k = 0; option_preferences[decision][k] != NULL; k++) {
        json_array_foreach(options, i, option)
        {
            const char *kind = json_string_value(json_object_get(option, "kind"));
            const char *id = json_string_value(json_object_get(option, "optionId"));
            if (kind != NULL && id != NULL && strcmp(kind, option_preferences[decision][k]) == 0)
                return id;
        }
    }
    return NULL;
}

/* ---- content ----------------------------------------------------------------------------------- */

json_t *rl_acp_string_cut(const char *text, size_t len, size_t max, int *cut)
{
    json_t *s;

    *cut = 0;
    if (len > max) {
        len = max;
        /* Back off over continuation bytes so the cut falls between two characters. */
        while (len > 0 && ((unsigned char)text[len] & 0xC0) == 0x80)
            len--;
        *cut = 1;
    }
    s = json_stringn(text, len);
    return s != NULL ? s : json_string("");
}

/* Sets key to the string value cut at max; marks the block truncated when it was cut. */
static void set_cut(json_t *block, const char *key, json_t *value, size_t max)
{
    int cut = 0;

    if (!json_is_string(value)) {
        json_object_set_new(block, key, json_null());
        return;
    }
    json_object_set_new(block, key, rl_acp_string_cut(json_string_value(value), json_string_length(value), max, &cut));
    if (cut)
        json_object_set_new(block, "truncated", json_true());
}

/* An ACP ContentBlock inside tool call content: text and embedded text resources read as text. */
static json_t *block_of_content(json_t *block, size_t max)
{
    const char *type = json_string_value(json_object_get(block, "type"));
    json_t *out;

    if (type == NULL)
        return NULL;
    if (strcmp(type, "text") == 0) {
        out = json_pack("{s:s}", "type", "text");
        set_cut(out, "text", json_object_get(block, "text"), max);
        return out;
    }
    if (strcmp(type, "resource") == 0 && json_is_string(json_object_get(json_object_get(block, "resource"), "text"))) {
        out = json_pack("{s:s}", "type", "text");
        set_cut(out, "text", json_object_get(json_object_get(block, "resource"), "text"), max);
        return out;
    }
    if (strcmp(type, "resource_link") == 0 && json_is_string(json_object_get(block, "uri"))) {
        out = json_pack("{s:s}", "type", "text");
        set_cut(out, "text", json_object_get(block, "uri"), max);
        return out;
    }
    /* image, audio, a binary resource: not forwarded (docs/api.md "Content blocks"). */
    return NULL;
}

/* What a block weighs in a call's body: its JSON, escapes included (a text of quotes or newlines grows). */
static size_t block_size(json_t *block)
{
    char *text = json_dumps(block, JSON_COMPACT);
    size_t size = text != NULL ? strlen(text) : SIZE_MAX / 2;

    free(text);
    return size;
}

json_t *rl_acp_content(json_t *content, size_t max, size_t *omitted)
{
    json_t *blocks = json_array(), *item;
    size_t i, used = 0;

    *omitted = 0;
    json_array_foreach(content, i, item)
    {
        const char *type = json_string_value(json_object_get(item, "type"));
        json_t *out = NULL;
        size_t size;

        if (type != NULL && strcmp(type, "content") == 0) {
            out = block_of_content(json_object_get(item, "content"), max);
        } else if (type != NULL && strcmp(type, "diff") == 0 && json_is_string(json_object_get(item, "path"))) {
            out = json_pack("{s:s, s:O}", "type", "diff", "path", json_object_get(item, "path"));
            /* oldText null or absent: a new file. */
            set_cut(out, "old_text", json_object_get(item, "oldText"), max);
            set_cut(out, "new_text", json_object_get(item, "newText"), max);
            if (json_is_null(json_object_get(out, "new_text")))
                json_object_set_new(out, "new_text", json_string(""));
        }
        /*
         * A terminal block names a terminal, nothing more: its output is the task's "terminal" (from _meta,
         * rl_acp_terminal_meta), so it is neither a block nor counted as omitted.
         */
        if (type != NULL && strcmp(type, "terminal") == 0)
            continue;
        size = out != NULL ? block_size(out) : 0;
        if (out != NULL && used + size <= RL_ACP_CONTENT_BUDGET) {
            used += size;
            json_array_append_new(blocks, out);
        } else {
            /* Past the budget a block would take the call past relayd's body limit: left out, counted. */
            json_decref(out);
            (*omitted)++;
        }
    }
    return blocks;
}

/* A copy of value with each string cut at max bytes; past depth, or past *budget bytes of strings, "…". */
static json_t *bounded_copy(json_t *value, size_t max, int depth, size_t *budget)
{
    json_t *copy, *item;
    const char *key;
    size_t i;
    int cut;

    if (depth > 16 || *budget == 0)
        return json_string("\xe2\x80\xa6"); /* … */
    switch (json_typeof(value)) {
    case JSON_STRING:
        copy =
            rl_acp_string_cut(json_string_value(value), json_string_length(value), max < *budget ? max : *budget, &cut);
        *budget -= json_string_length(copy);
        return copy;
    case JSON_ARRAY:
        copy = json_array();
        json_array_foreach(value, i, item) json_array_append_new(copy, bounded_copy(item, max, depth + 1, budget));
        return copy;
    case JSON_OBJECT:
        copy = json_object();
        json_object_foreach(value, key, item)
        {
            if (*budget < strlen(key))
                break;
            *budget -= strlen(key);
            json_object_set_new(copy, key, bounded_copy(item, max, depth + 1, budget));
        }
        return copy;
    default:
        return json_incref(value);
    }
}

json_t *rl_acp_bounded(json_t *value, size_t max_string, size_t max_total)
{
    size_t budget = max_total;

    return value != NULL ? bounded_copy(value, max_string, 0, &budget) : NULL;
}

json_t *rl_acp_args(json_t *raw_input)
{
    json_t *args;

    if (raw_input == NULL || json_is_null(raw_input))
        return NULL;
    /* A Write's rawInput holds the whole file: the task keeps its start, the diff shows the change. */
    args = rl_acp_bounded(raw_input, RL_ACP_VALUE_STRING_MAX, RL_ACP_VALUE_MAX);
    if (json_is_object(args))
        return args;
    return json_pack("{s:o}", "input", args);
}

/* ---- the input that identifies a tool call ------------------------------------------------------ */

typedef struct text {
    char buf[COMMAND_MAX + 1];
    size_t len;
} text_t;

static void text_add(text_t *t, const char *s)
{
    size_t n;

    if (s == NULL || *s == '\0')
        return;
    if (t->len > 0 && t->len < COMMAND_MAX)
        t->buf[t->len++] = ' ';
    n = strlen(s);
    if (n > COMMAND_MAX - t->len) {
        n = COMMAND_MAX - t->len;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
            n--;
    }
    memcpy(t->buf + t->len, s, n);
    t->len += n;
    t->buf[t->len] = '\0';
}

/* argv of a shell running one command line ("/bin/bash", "-lc", "make test"): the line is what the user reads. */
static const char *shell_line(json_t *argv)
{
    static const char *const shells[] = {"sh", "bash", "zsh", "dash", NULL};
    static const char *const flags[] = {"-c", "-lc", "-ic", NULL};
    const char *shell = json_string_value(json_array_get(argv, 0));
    const char *flag = json_string_value(json_array_get(argv, 1));
    const char *base = shell != NULL ? strrchr(shell, '/') : NULL;
    int known_shell = 0, known_flag = 0;
    size_t i;

    if (json_array_size(argv) != 3 || shell == NULL || flag == NULL)
        return NULL;
    base = base != NULL ? base + 1 : shell;
    for (i = 0; shells[i] != NULL; i++)
        known_shell |= strcmp(base, shells[i]) == 0;
    for (i = 0; flags[i] != NULL; i++)
        known_flag |= strcmp(flag, flags[i]) == 0;
    return known_shell && known_flag ? json_string_value(json_array_get(argv, 2)) : NULL;
}

/* A string, or an array of strings joined by spaces (a command given as argv). */
static int add_words(text_t *t, json_t *v)
{
    size_t i;
    json_t *w;

    if (shell_line(v) != NULL) {
        text_add(t, shell_line(v));
        return 1;
    }
    if (json_is_string(v)) {
        text_add(t, json_string_value(v));
        return 1;
    }
    if (!json_is_array(v) || json_array_size(v) == 0)
        return 0;
    json_array_foreach(v, i, w) text_add(t, json_string_value(w));
    return 1;
}

/* The first of keys that rawInput carries. Agents name their inputs differently (file_path, path, …). */
static int add_first(text_t *t, json_t *raw_input, const char *const *keys)
{
    for (; *keys != NULL; keys++)
        if (add_words(t, json_object_get(raw_input, *keys)))
            return 1;
    return 0;
}

static const char *const command_keys[] = {"command", "cmd", "commandLine", NULL};
static const char *const path_keys[] = {"file_path", "path", "abs_path", "filePath", "notebook_path", NULL};
static const char *const url_keys[] = {"url", "uri", NULL};

/* Which inputs identify a tool of each kind; a kind absent here is identified by its title. */
static const struct {
    const char *kind;
    const char *const *keys;
    int locations; /* the paths in "locations" and in diffs also identify it */
} identities[] = {
    {"execute", command_keys, 0}, {"read", path_keys, 1}, {"edit", path_keys, 1},
    {"delete", path_keys, 1},     {"move", path_keys, 1}, {"fetch", url_keys, 0},
};

char *rl_acp_command_of(const char *kind, json_t *tool_call)
{
    text_t t = {.len = 0};
    json_t *raw_input = json_object_get(tool_call, "rawInput"), *item;
    size_t i, k;

    t.buf[0] = '\0';
    kind = rl_acp_tool_kind(kind);
    for (i = 0; i < COUNT(identities); i++) {
        if (strcmp(identities[i].kind, kind) != 0)
            continue;
        if (!add_first(&t, raw_input, identities[i].keys) && identities[i].locations) {
            json_array_foreach(json_object_get(tool_call, "locations"), k, item)
                text_add(&t, json_string_value(json_object_get(item, "path")));
            if (t.len == 0)
                json_array_foreach(json_object_get(tool_call, "content"), k, item)
                    text_add(&t, json_string_value(json_object_get(item, "path")));
        }
        if (strcmp(kind, "move") == 0)
            add_first(&t, raw_input, (const char *const[]){"new_path", "destination", "to", NULL});
        break;
    }
    if (t.len == 0)
        text_add(&t, json_string_value(json_object_get(tool_call, "title")));
    return strdup(t.buf);
}
