/* An ACP agent's session settings as the relay's options (bridge/acp_config.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bridge/acp_config.h"

static json_t *parse(const char *text)
{
    json_error_t error;
    json_t *value = json_loads(text, 0, &error);

    assert_non_null(value);
    return value;
}

static const char *str(json_t *object, const char *key)
{
    return json_string_value(json_object_get(object, key));
}

/* claude-agent-acp's answer to session/new, trimmed: configOptions with a mode and a model. */
static const char claude_config[] =
    "[{\"id\":\"mode\",\"name\":\"Mode\",\"category\":\"mode\",\"type\":\"select\",\"currentValue\":\"default\","
    "\"options\":[{\"value\":\"default\",\"name\":\"Default\",\"description\":\"Standard behavior\"},"
    "{\"value\":\"plan\",\"name\":\"Plan Mode\"},{\"value\":\"bypassPermissions\",\"name\":\"Bypass Permissions\"}]},"
    "{\"id\":\"model\",\"name\":\"Model\",\"category\":\"model\",\"type\":\"select\",\"currentValue\":\"sonnet\","
    "\"options\":[{\"group\":\"g\",\"name\":\"Claude\",\"options\":[{\"value\":\"sonnet\",\"name\":\"Sonnet\"},"
    "{\"value\":\"opus\",\"name\":\"Opus\"}]}]},"
    "{\"id\":\"reasoning\",\"name\":\"Effort\",\"category\":\"thought_level\",\"type\":\"select\","
    "\"currentValue\":\"medium\",\"options\":[{\"value\":\"low\",\"name\":\"Low\"},{\"value\":\"medium\",\"name\":"
    "\"Medium\"},{\"value\":\"high\",\"name\":\"High\"},{\"value\":\"xhigh\",\"name\":\"Extra high\"}]},"
    "{\"id\":\"web\",\"name\":\"Web search\",\"type\":\"boolean\",\"currentValue\":true}]";

static void test_config_options_become_the_relays_options(void **state)
{
    json_t *config = parse(claude_config), *options = rl_acp_options(config, NULL, NULL), *mode, *model, *web;

    (void)state;
    assert_int_equal(json_array_size(options), 4);
    mode = json_array_get(options, 0);
    assert_string_equal(str(mode, "id"), "mode");
    assert_string_equal(str(mode, "kind"), "mode");
    assert_string_equal(str(mode, "value"), "default");
    assert_int_equal(json_array_size(json_object_get(mode, "values")), 3);
    assert_string_equal(str(json_array_get(json_object_get(mode, "values"), 0), "description"), "Standard behavior");
    /* Only the mode that turns approvals off is high risk. */
    assert_null(json_object_get(json_array_get(json_object_get(mode, "values"), 1), "risk"));
    assert_string_equal(str(json_array_get(json_object_get(mode, "values"), 2), "risk"), "high");
    /* Grouped values are flattened in their order. */
    model = json_array_get(options, 1);
    assert_string_equal(str(model, "kind"), "model");
    assert_int_equal(json_array_size(json_object_get(model, "values")), 2);
    assert_string_equal(str(json_array_get(json_object_get(model, "values"), 1), "value"), "opus");
    assert_string_equal(str(json_array_get(options, 2), "kind"), "effort");
    web = json_array_get(options, 3);
    assert_string_equal(str(web, "kind"), "toggle");
    assert_string_equal(str(web, "value"), "true");
    json_decref(options);
    json_decref(config);
}

static void test_modes_and_models_when_the_agent_has_no_config_options(void **state)
{
    json_t *modes = parse("{\"currentModeId\":\"auto\",\"availableModes\":[{\"id\":\"read-only\",\"name\":\"Read "
                          "Only\"},{\"id\":\"auto\",\"name\":\"Default\"},{\"id\":\"full-access\",\"name\":\"Full "
                          "Access\"}]}");
    json_t *models = parse("{\"currentModelId\":\"m1\",\"availableModels\":[{\"modelId\":\"m1\",\"name\":\"One\"}]}");
    json_t *options = rl_acp_options(NULL, modes, models), *fields;

    (void)state;
    assert_int_equal(json_array_size(options), 2);
    assert_string_equal(str(json_array_get(options, 0), "id"), "mode");
    assert_string_equal(str(json_array_get(json_object_get(json_array_get(options, 0), "values"), 2), "risk"), "high");
    assert_string_equal(str(json_array_get(options, 1), "value"), "m1");
    fields = rl_acp_state_fields(options);
    assert_string_equal(str(fields, "mode"), "auto");
    assert_string_equal(str(fields, "model"), "m1");
    assert_true(json_is_null(json_object_get(fields, "effort")));
    /* The older methods set them. */
    assert_int_equal(rl_acp_setter_of(NULL, modes, models, "mode"), RL_ACP_SET_MODE);
    assert_int_equal(rl_acp_setter_of(NULL, modes, models, "model"), RL_ACP_SET_MODEL);
    assert_int_equal(rl_acp_setter_of(NULL, modes, NULL, "model"), RL_ACP_SET_NONE);
    assert_string_equal(rl_acp_setter_method(RL_ACP_SET_MODE), "session/set_mode");
    assert_string_equal(rl_acp_setter_method(RL_ACP_SET_MODEL), "session/set_model");
    json_decref(fields);
    json_decref(options);
    json_decref(models);
    json_decref(modes);
}

static void test_config_options_win_over_modes(void **state)
{
    json_t *config = parse(claude_config);
    json_t *modes = parse("{\"currentModeId\":\"x\",\"availableModes\":[{\"id\":\"x\",\"name\":\"X\"}]}");
    json_t *options = rl_acp_options(config, modes, NULL), *params;

    (void)state;
    assert_int_equal(json_array_size(options), 4);
    assert_int_equal(rl_acp_setter_of(config, modes, NULL, "mode"), RL_ACP_SET_CONFIG);
    assert_int_equal(rl_acp_setter_of(config, modes, NULL, "nothing"), RL_ACP_SET_NONE);
    json_decref(options);
    /* codex-acp: model and effort as options, the mode only in modes: the mode is still offered, and set so. */
    json_array_remove(config, 0);
    options = rl_acp_options(config, modes, NULL);
    assert_int_equal(json_array_size(options), 4);
    assert_string_equal(str(json_array_get(options, 3), "kind"), "mode");
    assert_int_equal(rl_acp_setter_of(config, modes, NULL, "mode"), RL_ACP_SET_MODE);
    assert_int_equal(rl_acp_setter_of(config, modes, NULL, "model"), RL_ACP_SET_CONFIG);
    params = rl_acp_setter_params(RL_ACP_SET_CONFIG, config, "s1", "mode", "plan");
    assert_string_equal(str(params, "configId"), "mode");
    assert_string_equal(str(params, "value"), "plan");
    json_decref(params);
    /* A boolean option takes a JSON boolean. */
    params = rl_acp_setter_params(RL_ACP_SET_CONFIG, config, "s1", "web", "false");
    assert_true(json_is_false(json_object_get(params, "value")));
    json_decref(params);
    json_decref(options);
    json_decref(modes);
    json_decref(config);
}

static void test_values_that_would_not_fit_are_left_out_and_the_caps_hold(void **state)
{
    json_t *config = json_array(), *values = json_array(), *options;
    char long_value[200];
    int i;

    (void)state;
    memset(long_value, 'v', sizeof(long_value) - 1);
    long_value[sizeof(long_value) - 1] = '\0';
    json_array_append_new(values, json_pack("{s:s, s:s}", "value", long_value, "name", "long"));
    for (i = 0; i < 100; i++)
        json_array_append_new(values, json_pack("{s:s+, s:s}", "value", "v", i % 2 ? "a" : "b", "name", "n"));
    for (i = 0; i < 40; i++)
        json_array_append_new(config, json_pack("{s:s, s:s, s:s, s:s, s:O}", "id", "opt", "name", "Opt", "type",
                                                "select", "currentValue", "va", "options", values));
    options = rl_acp_options(config, NULL, NULL);
    assert_int_equal(json_array_size(options), RL_ACP_OPTIONS_MAX);
    assert_int_equal(json_array_size(json_object_get(json_array_get(options, 0), "values")), RL_ACP_VALUES_MAX);
    assert_string_equal(str(json_array_get(json_object_get(json_array_get(options, 0), "values"), 0), "value"), "vb");
    json_decref(options);
    json_decref(values);
    json_decref(config);
}

static void test_the_high_risk_table(void **state)
{
    (void)state;
    assert_true(rl_acp_high_risk("bypassPermissions"));
    assert_true(rl_acp_high_risk("full-access"));
    assert_false(rl_acp_high_risk("plan"));
    assert_false(rl_acp_high_risk("acceptEdits"));
    assert_false(rl_acp_high_risk(NULL));
    assert_string_equal(rl_acp_kind_of_category("thought_level"), "effort");
    assert_null(rl_acp_kind_of_category("other"));
}

static void test_thought_level_picks_the_effort_value(void **state)
{
    json_t *config = parse(claude_config), *options = rl_acp_options(config, NULL, NULL);
    json_t *effort = rl_acp_option_find(options, NULL, "effort");
    json_t *toggle = parse("{\"values\":[{\"value\":\"true\"},{\"value\":\"false\"}]}");

    (void)state;
    assert_non_null(effort);
    assert_null(rl_acp_effort_for(effort, "default"));
    assert_string_equal(rl_acp_effort_for(effort, "extended"), "high");
    assert_string_equal(rl_acp_effort_for(effort, "max"), "xhigh");
    assert_null(rl_acp_effort_for(effort, "bogus"));
    assert_null(rl_acp_effort_for(NULL, "max"));
    assert_string_equal(rl_acp_effort_for(toggle, "extended"), "true");
    assert_true(rl_acp_option_allows(effort, "low"));
    assert_false(rl_acp_option_allows(effort, "none"));
    json_decref(toggle);
    json_decref(options);
    json_decref(config);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_options_become_the_relays_options),
        cmocka_unit_test(test_modes_and_models_when_the_agent_has_no_config_options),
        cmocka_unit_test(test_config_options_win_over_modes),
        cmocka_unit_test(test_values_that_would_not_fit_are_left_out_and_the_caps_hold),
        cmocka_unit_test(test_the_high_risk_table),
        cmocka_unit_test(test_thought_level_picks_the_effort_value),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
