/*
 * POST /v1/bridge/setManifest (brief): the agent's name, version and the
 * tools it declares. Once a manifest lists tools, task calls naming another
 * tool get 422 tool_not_declared (the task routes check it).
 */
#include <stdlib.h>

#include "common/error.h"
#include "http/validate.h"
#include "relay/relay.h"

static const rl_field_t agent_fields[] = {
    RL_FIELD_STRING("name", RL_F_REQUIRED, 1, 128),
    RL_FIELD_STRING("version", 0, 0, 64),
    RL_FIELD_END,
};
static const rl_schema_t agent_schema = RL_SCHEMA(agent_fields);

static const rl_field_t tool_fields[] = {
    RL_FIELD_STRING("name", RL_F_REQUIRED, 1, 128),
    RL_FIELD_STRING("description", 0, 0, 2000),
    RL_FIELD_END,
};
static const rl_schema_t tool_schema = RL_SCHEMA(tool_fields);
static const rl_field_t tool_item = RL_FIELD_OBJECT(NULL, RL_F_REQUIRED, &tool_schema);

static const rl_field_t manifest_fields[] = {
    RL_FIELD_OBJECT("agent", 0, &agent_schema),
    RL_FIELD_ARRAY("tools", RL_F_REQUIRED, 0, 512, &tool_item),
    RL_FIELD_END,
};
const rl_schema_t rl_manifest_schema = RL_SCHEMA(manifest_fields);

static void on_manifest_stored(int result, json_t *value, void *arg)
{
    rl_call_t *call = arg;

    json_decref(value);
    if (result != 0)
        rl_call_fail(call, result == RL_E_INSTALLATION_NOT_FOUND ? RL_E_INVALID_TOKEN : result, NULL);
    else
        rl_call_reply(call,
                      json_pack("{s:I}", "tools", (json_int_t)json_array_size(json_object_get(call->body, "tools"))));
    rl_call_release(call);
}

int rl_manifest_set(rl_call_t *call)
{
    rl_relay_t *relay = call->app;
    char *text = json_dumps(call->body, JSON_COMPACT | JSON_SORT_KEYS);

    if (text == NULL)
        return RL_E_INTERNAL;
    rl_call_hold(call);
    rl_store_installation_set_manifest(relay->store, call->principal, text, on_manifest_stored, call);
    free(text);
    return 0;
}
