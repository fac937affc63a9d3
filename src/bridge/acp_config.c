/* An ACP agent's session settings as the relay's options (acp_config.h). */
#include <string.h>

#include "bridge/acp_config.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/*
 * Claude Code's bypassPermissions (claude-agent-acp), Codex's full-access
 * (codex-acp; danger-full-access is its sandbox's own word), Gemini CLI's
 * yolo: each runs every tool without asking anyone.
 */
const char *const rl_acp_high_risk_modes[] = {"bypassPermissions", "full-access", "danger-full-access", "yolo", NULL};

int rl_acp_high_risk(const char *value)
{
    size_t i;

    for (i = 0; value != NULL && rl_acp_high_risk_modes[i] != NULL; i++)
        if (strcmp(rl_acp_high_risk_modes[i], value) == 0)
            return 1;
    return 0;
}

/* ACP's SessionConfigOptionCategory and the relay's kind; "other" and unknown ones are kind select or toggle. */
static const struct {
    const char *category, *kind;
} categories[] = {
    {"mode", "mode"},
    {"model", "model"},
    {"thought_level", "effort"},
};

const char *rl_acp_kind_of_category(const char *category)
{
    size_t i;

    for (i = 0; category != NULL && i < COUNT(categories); i++)
        if (strcmp(categories[i].category, category) == 0)
            return categories[i].kind;
    return NULL;
}

/* A string of at most max bytes, cut between two characters. */
static json_t *cut(const char *text, size_t max)
{
    size_t len = strlen(text);

    if (len > max) {
        len = max;
        while (len > 0 && ((unsigned char)text[len] & 0xC0) == 0x80)
            len--;
    }
    return json_stringn(text, len);
}

static int fits(const char *text)
{
    return text != NULL && *text != '\0' && strlen(text) <= RL_ACP_OPTION_TEXT_MAX;
}

/* One value of an option; NULL when its value would not fit. */
static json_t *value_of(const char *kind, const char *value, const char *name, const char *description)
{
    json_t *out;

    if (!fits(value))
        return NULL;
    out = json_pack("{s:s, s:o}", "value", value, "name",
                    cut(name != NULL && *name != '\0' ? name : value, RL_ACP_OPTION_TEXT_MAX));
    if (out != NULL && description != NULL && *description != '\0')
        json_object_set_new(out, "description", cut(description, RL_ACP_DESCRIPTION_MAX));
    if (out != NULL && strcmp(kind, "mode") == 0 && rl_acp_high_risk(value))
        json_object_set_new(out, "risk", json_string("high"));
    return out;
}

static void add_value(json_t *values, json_t *value)
{
    if (value != NULL && json_array_size(values) < RL_ACP_VALUES_MAX)
        json_array_append_new(values, value);
    else
        json_decref(value);
}

/* The values of a select option: plain ones, and the values of groups ({group, name, options}) in their order. */
static void add_select_values(json_t *values, const char *kind, json_t *choices)
{
    json_t *choice, *inner;
    size_t i, k;

    json_array_foreach(choices, i, choice)
    {
        if (json_is_array(json_object_get(choice, "options"))) {
            json_array_foreach(json_object_get(choice, "options"), k, inner)
                add_value(values, value_of(kind, json_string_value(json_object_get(inner, "value")),
                                           json_string_value(json_object_get(inner, "name")),
                                           json_string_value(json_object_get(inner, "description"))));
            continue;
        }
        add_value(values, value_of(kind, json_string_value(json_object_get(choice, "value")),
                                   json_string_value(json_object_get(choice, "name")),
                                   json_string_value(json_object_get(choice, "description"))));
    }
}

static json_t *option_of(const char *id, const char *name, const char *kind, const char *value, json_t *values)
{
    if (!fits(id) || value == NULL || strlen(value) > RL_ACP_OPTION_TEXT_MAX) {
        json_decref(values);
        return NULL;
    }
    return json_pack("{s:s, s:o, s:s, s:s, s:o}", "id", id, "name",
                     cut(name != NULL && *name != '\0' ? name : id, RL_ACP_OPTION_TEXT_MAX), "kind", kind, "value",
                     value, "values", values);
}

/* One ACP SessionConfigOption: a select, or a boolean as a toggle whose values are "true" and "false". */
static json_t *config_option(json_t *acp)
{
    const char *type = json_string_value(json_object_get(acp, "type"));
    const char *kind = rl_acp_kind_of_category(json_string_value(json_object_get(acp, "category")));
    json_t *current = json_object_get(acp, "currentValue"), *values = json_array();

    if (type != NULL && strcmp(type, "boolean") == 0) {
        add_value(values, value_of("toggle", "true", "On", NULL));
        add_value(values, value_of("toggle", "false", "Off", NULL));
        return option_of(json_string_value(json_object_get(acp, "id")), json_string_value(json_object_get(acp, "name")),
                         kind != NULL ? kind : "toggle", json_is_true(current) ? "true" : "false", values);
    }
    kind = kind != NULL ? kind : "select";
    add_select_values(values, kind, json_object_get(acp, "options"));
    return option_of(json_string_value(json_object_get(acp, "id")), json_string_value(json_object_get(acp, "name")),
                     kind, json_string_value(current), values);
}

/*
 * ACP's older SessionModeState {currentModeId, availableModes: [{id, name, description}]} and its unstable
 * SessionModelState {currentModelId, availableModels: [{modelId, name, description}]}: one shape, other names.
 */
typedef struct {
    const char *id, *name;             /* the option they become (its id is also its kind) */
    const char *current, *list, *item; /* the state's members: current value, the list, an entry's id */
} state_shape_t;

static const state_shape_t MODES = {"mode", "Mode", "currentModeId", "availableModes", "id"};
static const state_shape_t MODELS = {"model", "Model", "currentModelId", "availableModels", "modelId"};

static json_t *state_option(json_t *state, const state_shape_t *shape)
{
    json_t *values = json_array(), *entry;
    size_t i;

    json_array_foreach(json_object_get(state, shape->list), i, entry)
        add_value(values, value_of(shape->id, json_string_value(json_object_get(entry, shape->item)),
                                   json_string_value(json_object_get(entry, "name")),
                                   json_string_value(json_object_get(entry, "description"))));
    return option_of(shape->id, shape->name, shape->id, json_string_value(json_object_get(state, shape->current)),
                     values);
}

static void add_option(json_t *options, json_t *option)
{
    if (option != NULL && json_array_size(options) < RL_ACP_OPTIONS_MAX)
        json_array_append_new(options, option);
    else
        json_decref(option);
}

/* 1 when options already hold one of this kind, or one of this id. */
static int has_option(json_t *options, const char *kind, const char *id);

json_t *rl_acp_options(json_t *config_options, json_t *modes, json_t *models)
{
    json_t *options = json_array(), *item;
    size_t i;

    /*
     * spec (ACP session config options): an agent that sends configOptions means them instead of modes; but one
     * that says its mode (or model) only the older way (codex-acp 0.16: model and effort as options, the mode
     * in modes) still has it, so the older object fills what the options leave out.
     */
    json_array_foreach(config_options, i, item) add_option(options, config_option(item));
    if (json_is_object(modes) && !has_option(options, "mode", "mode"))
        add_option(options, state_option(modes, &MODES));
    if (json_is_object(models) && !has_option(options, "model", "model"))
        add_option(options, state_option(models, &MODELS));
    return options;
}

json_t *rl_acp_option_find(json_t *options, const char *id, const char *kind)
{
    json_t *option;
    size_t i;

    json_array_foreach(options, i, option)
    {
        const char *want = id != NULL ? id : kind,
                   *have = json_string_value(json_object_get(option, id != NULL ? "id" : "kind"));
        if (want != NULL && have != NULL && strcmp(want, have) == 0)
            return option;
    }
    return NULL;
}

static int has_option(json_t *options, const char *kind, const char *id)
{
    return rl_acp_option_find(options, NULL, kind) != NULL || rl_acp_option_find(options, id, NULL) != NULL;
}

int rl_acp_option_allows(json_t *option, const char *value)
{
    json_t *item;
    size_t i;

    json_array_foreach(json_object_get(option, "values"), i,
                       item) if (value != NULL && json_string_value(json_object_get(item, "value")) != NULL &&
                                 strcmp(json_string_value(json_object_get(item, "value")), value) == 0) return 1;
    return 0;
}

json_t *rl_acp_state_fields(json_t *options)
{
    static const char *const kinds[] = {"mode", "model", "effort"};
    json_t *fields = json_pack("{s:O}", "options", options);
    size_t i;

    for (i = 0; fields != NULL && i < COUNT(kinds); i++) {
        json_t *option = rl_acp_option_find(options, NULL, kinds[i]);
        json_object_set(fields, kinds[i], option != NULL ? json_object_get(option, "value") : json_null());
    }
    return fields;
}

static const char *const setter_methods[] = {
    [RL_ACP_SET_NONE] = NULL,
    [RL_ACP_SET_CONFIG] = "session/set_config_option",
    [RL_ACP_SET_MODE] = "session/set_mode",
    [RL_ACP_SET_MODEL] = "session/set_model",
};

const char *rl_acp_setter_method(rl_acp_setter_t setter)
{
    return (unsigned)setter < COUNT(setter_methods) ? setter_methods[setter] : NULL;
}

static json_t *config_by_id(json_t *config_options, const char *id)
{
    json_t *item;
    size_t i;

    json_array_foreach(config_options, i,
                       item) if (id != NULL && json_string_value(json_object_get(item, "id")) != NULL &&
                                 strcmp(json_string_value(json_object_get(item, "id")), id) == 0) return item;
    return NULL;
}

rl_acp_setter_t rl_acp_setter_of(json_t *config_options, json_t *modes, json_t *models, const char *id)
{
    if (id == NULL)
        return RL_ACP_SET_NONE;
    if (config_by_id(config_options, id) != NULL)
        return RL_ACP_SET_CONFIG;
    /* The options made from the older objects (rl_acp_options) are the ones with these ids. */
    if (strcmp(id, "mode") == 0 && json_is_object(modes))
        return RL_ACP_SET_MODE;
    if (strcmp(id, "model") == 0 && json_is_object(models))
        return RL_ACP_SET_MODEL;
    return RL_ACP_SET_NONE;
}

json_t *rl_acp_setter_params(rl_acp_setter_t setter, json_t *config_options, const char *session_id, const char *id,
                             const char *value)
{
    const char *type;

    switch (setter) {
    case RL_ACP_SET_CONFIG:
        type = json_string_value(json_object_get(config_by_id(config_options, id), "type"));
        if (type != NULL && strcmp(type, "boolean") == 0)
            return json_pack("{s:s, s:s, s:b}", "sessionId", session_id, "configId", id, "value",
                             strcmp(value, "true") == 0);
        return json_pack("{s:s, s:s, s:s}", "sessionId", session_id, "configId", id, "value", value);
    case RL_ACP_SET_MODE:
        return json_pack("{s:s, s:s}", "sessionId", session_id, "modeId", value);
    case RL_ACP_SET_MODEL:
        return json_pack("{s:s, s:s}", "sessionId", session_id, "modelId", value);
    default:
        return NULL;
    }
}

/*
 * spec (send's thought_level: default, extended, max): the values each level
 * takes, best first, among those agents name their reasoning effort with
 * (Codex: minimal, low, medium, high, xhigh; others low/medium/high or a
 * thinking toggle). "default" changes nothing.
 */
static const struct {
    const char *level;
    const char *const values[5];
} effort_levels[] = {
    {"extended", {"high", "true", "on", "medium", NULL}},
    {"max", {"xhigh", "max", "high", "true", "on"}},
};

const char *rl_acp_effort_for(json_t *effort_option, const char *thought_level)
{
    size_t i, k;

    for (i = 0; thought_level != NULL && i < COUNT(effort_levels); i++) {
        if (strcmp(effort_levels[i].level, thought_level) != 0)
            continue;
        for (k = 0; k < COUNT(effort_levels[i].values) && effort_levels[i].values[k] != NULL; k++)
            if (rl_acp_option_allows(effort_option, effort_levels[i].values[k]))
                return effort_levels[i].values[k];
    }
    return NULL;
}
