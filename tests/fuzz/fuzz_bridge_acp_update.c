/*
 * Fuzz target: what an ACP agent says of a session, one JSON value a line,
 * through the readers of relay-bridge that the JSON-RPC target does not
 * reach (bridge/acp_map.c, bridge/acp_config.c): a tool call update's
 * terminal (_meta.terminal_output, terminal_exit, rawOutput) appended to a
 * task's tail as acp_tasks.c does, usage_update's context figures, a
 * prompt's usage, and a session's configOptions, modes and models
 * (session/new, config_option_update) as the relay's options, with the
 * setter of each and the effort a send asks for. Besides the sanitizers it
 * checks the caps: the tail never passes RL_ACP_TERMINAL_MAX and starts on
 * a character once cut, the options and their values stay within the
 * wire's counts.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bridge/acp_config.h"
#include "bridge/acp_map.h"
#include "common/buf.h"

static const char *const levels[] = {"default", "low", "medium", "high", "max", "unknown"};

static void check_options(json_t *options, json_t *update)
{
    json_t *option, *fields;
    size_t i;

    if (!json_is_array(options) || json_array_size(options) > RL_ACP_OPTIONS_MAX)
        __builtin_trap();
    json_array_foreach(options, i, option)
    {
        const char *id = json_string_value(json_object_get(option, "id"));
        json_t *values = json_object_get(option, "values");
        rl_acp_setter_t setter;

        if (id == NULL || strlen(id) > RL_ACP_OPTION_TEXT_MAX || json_array_size(values) > RL_ACP_VALUES_MAX)
            __builtin_trap();
        setter = rl_acp_setter_of(json_object_get(update, "configOptions"), json_object_get(update, "modes"),
                                  json_object_get(update, "models"), id);
        (void)rl_acp_setter_method(setter);
        if (setter != RL_ACP_SET_NONE && json_array_size(values) > 0) {
            const char *value = json_string_value(json_object_get(json_array_get(values, 0), "value"));
            json_t *params = rl_acp_setter_params(setter, json_object_get(update, "configOptions"), "s1", id,
                                                  value != NULL ? value : "");
            json_decref(params);
            if (value != NULL && !rl_acp_option_allows(option, value))
                __builtin_trap();
        }
        (void)rl_acp_high_risk(json_string_value(json_object_get(option, "value")));
    }
    (void)rl_acp_effort_for(rl_acp_option_find(options, NULL, "effort"), levels[json_array_size(options) % 6]);
    fields = rl_acp_state_fields(options);
    if (!json_is_object(fields))
        __builtin_trap();
    json_decref(fields);
}

static void on_update(json_t *update, rl_buf_t *tail)
{
    const char *data = NULL, *whole = NULL;
    size_t len = 0;
    json_t *exit_status = NULL, *value;

    (void)rl_acp_update_of(json_string_value(json_object_get(update, "sessionUpdate")));
    (void)rl_acp_severity(rl_acp_tool_kind(json_string_value(json_object_get(update, "kind"))));
    if (rl_acp_terminal_meta(update, &data, &len, &exit_status) && data != NULL) {
        int dropped = rl_acp_terminal_append(tail, data, len);
        if (tail->len > RL_ACP_TERMINAL_MAX)
            __builtin_trap();
        if (dropped && tail->len > 0 && ((unsigned char)tail->bytes[0] & 0xC0) == 0x80)
            __builtin_trap();
    }
    rl_acp_terminal_raw_output(json_object_get(update, "rawOutput"), &whole, &len, &exit_status);
    if (whole != NULL) {
        rl_buf_reset(tail);
        (void)rl_acp_terminal_append(tail, whole, len);
        if (tail->len > RL_ACP_TERMINAL_MAX)
            __builtin_trap();
    }
    value = rl_acp_context_usage(update);
    if (value != NULL && !json_is_object(value))
        __builtin_trap();
    json_decref(value);
    json_decref(rl_acp_usage(json_object_get(update, "usage")));
    json_decref(rl_acp_prompt_usage(update));
    value = rl_acp_options(json_object_get(update, "configOptions"), json_object_get(update, "modes"),
                           json_object_get(update, "models"));
    check_options(value, update);
    json_decref(value);
    value = rl_acp_bounded(update, 64, 512);
    json_decref(value);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data, *end = text + size;
    rl_buf_t tail;

    /* The tail is shared by the lines, as a task's is by its updates. */
    rl_buf_init(&tail, 2 * RL_ACP_TERMINAL_MAX);
    while (text < end) {
        const char *newline = memchr(text, '\n', (size_t)(end - text));
        size_t len = newline != NULL ? (size_t)(newline - text) : (size_t)(end - text);
        json_t *line = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
        json_t *update = json_object_get(json_object_get(line, "params"), "update");

        /* A session/update notification, its update alone, or a session/new answer (configOptions, modes). */
        if (update == NULL)
            update = json_object_get(line, "result");
        if (update == NULL)
            update = line;
        if (json_is_object(update))
            on_update(update, &tail);
        json_decref(line);
        text += len + (newline != NULL);
    }
    rl_buf_free(&tail);
    return 0;
}
