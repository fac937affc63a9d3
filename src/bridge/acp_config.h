/*
 * An ACP agent's session settings as the relay's options (docs/api.md,
 * "Session state"; docs/bridge.md, "Steering"): configOptions, or the older
 * modes and models, become [{id, name, kind, value, values: [{value, name,
 * description?, risk?}]}]; a change picks the method the agent takes; a
 * send's thought_level picks a value of the agent's effort option. Const
 * tables and pure functions over jansson values; any thread. The unit
 * tests read these tables (tests/unit/bridge/test_acp_config.c).
 */
#ifndef RL_BRIDGE_ACP_CONFIG_H
#define RL_BRIDGE_ACP_CONFIG_H

#include <jansson.h>
#include <stddef.h>

/* The wire's caps (docs/api.md, "Session state"). */
#define RL_ACP_OPTIONS_MAX     32
#define RL_ACP_VALUES_MAX      64
#define RL_ACP_OPTION_TEXT_MAX 128
#define RL_ACP_DESCRIPTION_MAX 1024

/*
 * Mode values that turn the agent's approvals off: a client asks before it
 * sets one, and the relay's options mark it risk "high" (the one table).
 */
extern const char *const rl_acp_high_risk_modes[];
/* 1 when value is one of them. */
int rl_acp_high_risk(const char *value);

/* The relay's kind of an ACP option's category ("mode", "model", "thought_level"); NULL for none or another. */
const char *rl_acp_kind_of_category(const char *category);

/*
 * The relay's options from a session's configOptions (preferred, as ACP
 * says), then its older modes and models objects for what the options do not
 * cover (no option of that kind or id); each may be NULL. Options and values past the caps, and any whose id or value
 * would not fit (a cut value would set something else), are left out; names are cut. A new array (empty when the agent
 * offers nothing).
 */
json_t *rl_acp_options(json_t *config_options, json_t *modes, json_t *models);

/*
 * The state fields of options (docs/api.md): {mode, model, effort, options},
 * each of the first three the value of the first option of its kind, or null
 * when there is none. A new object.
 */
json_t *rl_acp_state_fields(json_t *options);

/* How the agent takes a change of one option. */
typedef enum rl_acp_setter {
    RL_ACP_SET_NONE,   /* the agent offers no such option */
    RL_ACP_SET_CONFIG, /* session/set_config_option {sessionId, configId, value} */
    RL_ACP_SET_MODE,   /* session/set_mode {sessionId, modeId}: an agent with modes only */
    RL_ACP_SET_MODEL,  /* session/set_model {sessionId, modelId}: the older, unstable method */
} rl_acp_setter_t;

/* The method's name for setter, NULL for RL_ACP_SET_NONE. */
const char *rl_acp_setter_method(rl_acp_setter_t setter);
/* Which method sets option id, given what the session was opened with. */
rl_acp_setter_t rl_acp_setter_of(json_t *config_options, json_t *modes, json_t *models, const char *id);
/* The method's params for setting id to value (a boolean option takes "true"/"false" as JSON booleans). A new object.
 */
json_t *rl_acp_setter_params(rl_acp_setter_t setter, json_t *config_options, const char *session_id, const char *id,
                             const char *value);

/* The option of options (the relay's) with this id, or the first of this kind when id is NULL; borrowed or NULL. */
json_t *rl_acp_option_find(json_t *options, const char *id, const char *kind);
/* 1 when value is one of option's values. */
int rl_acp_option_allows(json_t *option, const char *value);

/*
 * The value of the effort option (kind "effort") a send's thought_level
 * asks for (docs/api.md, thought_level table): the first of the level's
 * preferences the option offers; NULL for "default" (the agent's own
 * setting stays), an unknown level, or none offered.
 */
const char *rl_acp_effort_for(json_t *effort_option, const char *thought_level);

#endif
