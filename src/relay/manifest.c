/*
 * POST /v1/bridge/setManifest (brief): the agent's name, version and the
 * tools it declares. Once a manifest lists tools, task calls naming another
 * tool get 422 tool_not_declared (the task routes check it).
 */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "http/validate.h"
#include "relay/manifest.h"
#include "relay/ops.h"
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

int rl_manifest_declares(const char *manifest, const char *tool)
{
    json_t *parsed = manifest != NULL ? json_loads(manifest, 0, NULL) : NULL;
    json_t *tools = json_object_get(parsed, "tools"), *item;
    int declared = json_array_size(tools) == 0;
    size_t i;

    json_array_foreach(tools, i, item)
    {
        const char *name = json_string_value(json_object_get(item, "name"));
        if (name != NULL && strcmp(name, tool) == 0)
            declared = 1;
    }
    json_decref(parsed);
    return declared;
}

struct manifest_set {
    rl_op_t op;
    const char *installation_id, *manifest;
};

static int manifest_set_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct manifest_set *op = (void *)base;
    rl_installation_row_t installation;
    int result = RL_TXN(txn, installation_get, op->installation_id, &installation);

    if (result != 0)
        return result == RL_E_NOT_FOUND ? RL_E_INSTALLATION_NOT_FOUND : result;
    /* Revoked on another node whose word has not reached this one's cache yet (target.h). */
    if (strcmp(installation.state, "revoked") == 0)
        return RL_E_INSTALLATION_GONE;
    installation.manifest = op->manifest;
    return RL_TXN(txn, installation_update, &installation);
}

static const rl_store_op_type_t manifest_set_type = RL_OP_TYPE(manifest_set, 1, manifest_set_run);

static void on_manifest_stored(rl_store_op_t *base)
{
    rl_call_t *call = base->arg;

    if (base->result != 0)
        rl_call_fail(call, base->result == RL_E_INSTALLATION_NOT_FOUND ? RL_E_INVALID_TOKEN : base->result, NULL);
    else
        rl_call_reply(call,
                      json_pack("{s:I}", "tools", (json_int_t)json_array_size(json_object_get(call->body, "tools"))));
    rl_call_release(call);
}

int rl_manifest_set(rl_call_t *call)
{
    struct manifest_set *op;
    char *text = json_dumps(call->body, JSON_COMPACT | JSON_SORT_KEYS);

    if (text == NULL)
        return RL_E_INTERNAL;
    op = rl_op_new(&manifest_set_type, sizeof(*op));
    op->installation_id = rl_op_str(op, call->principal);
    op->manifest = rl_op_str(op, text);
    free(text);
    rl_op_submit_for(call, op, on_manifest_stored);
    return 0;
}
