/*
 * POST /v1/bridge/setManifest (brief): the agent's name, version and the
 * tools it declares. Once a manifest lists tools, task calls naming another
 * tool get 422 tool_not_declared (the task routes check it).
 *
 * ours (issue 22): the agent's mode and the commands it offers (ACP's
 * available commands, offered when the user types "/"). Each of agent, tools
 * and commands that a call carries replaces the stored one, and one it
 * leaves out is kept, so that a bridge can send the commands alone whenever
 * the agent's list changes. A change of agent or commands is told to the
 * user as installation_updated, since the Installation view shows both.
 *
 * ours (issue 36): the agents the bridge runs ({name, kind, default?,
 * supports}), kept like commands and shown as the Installation view's
 * agents; a session names one of them (422 agent_not_declared otherwise).
 */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "http/validate.h"
#include "relay/core/hub.h"
#include "relay/core/feature.h"
#include "relay/installations/context.h"
#include "relay/installations/manifest.h"
#include "relay/core/ops.h"
#include "relay/core/views.h"

#define COMMANDS_MAX 200
#define AGENTS_MAX   16

static const rl_field_t agent_fields[] = {
    RL_FIELD_STRING("name", RL_F_REQUIRED, 1, 128),
    RL_FIELD_STRING("version", 0, 0, 64),
    RL_FIELD_STRING("mode", RL_F_NULLABLE, 0, 128),
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

static const rl_field_t command_fields[] = {
    RL_FIELD_STRING("name", RL_F_REQUIRED, 1, 64),
    RL_FIELD_STRING("description", RL_F_NULLABLE, 0, 500),
    RL_FIELD_STRING("input_hint", RL_F_NULLABLE, 0, 200),
    RL_FIELD_END,
};
static const rl_schema_t command_schema = RL_SCHEMA(command_fields);
static const rl_field_t command_item = RL_FIELD_OBJECT(NULL, RL_F_REQUIRED, &command_schema);

/* An agent's name: 1-32 of [a-z0-9_-], a word a client shows and sends back. */
static int agent_name_check(const char *s, size_t len)
{
    size_t i;

    for (i = 0; i < len; ++i)
        if (strchr("abcdefghijklmnopqrstuvwxyz0123456789_-", s[i]) == NULL || s[i] == '\0')
            return -1;
    return 0;
}

static const char *const agent_kinds[] = {"acp", "jsonl", "exec", "openai", NULL};

/* What an agent supports: booleans; keys this relay does not know are kept as sent (a newer bridge's). */
static const rl_field_t supports_fields[] = {
    RL_FIELD_BOOLEAN("modes", 0),           RL_FIELD_BOOLEAN("config", 0),
    RL_FIELD_BOOLEAN("session_list", 0),    RL_FIELD_BOOLEAN("session_resume", 0),
    RL_FIELD_BOOLEAN("session_load", 0),    RL_FIELD_BOOLEAN("session_close", 0),
    RL_FIELD_BOOLEAN("terminal_output", 0), RL_FIELD_END,
};
static const rl_schema_t supports_schema = RL_SCHEMA(supports_fields);

static const rl_field_t agents_item_fields[] = {
    RL_FIELD_STRING_CHECK("name", RL_F_REQUIRED, 1, 32, agent_name_check, "Expected 1-32 of a-z, 0-9, _ and -"),
    RL_FIELD_ENUM("kind", RL_F_REQUIRED, agent_kinds),
    RL_FIELD_BOOLEAN("default", 0),
    RL_FIELD_OBJECT("supports", RL_F_REQUIRED, &supports_schema),
    RL_FIELD_END,
};
static const rl_schema_t agents_item_schema = RL_SCHEMA(agents_item_fields);
static const rl_field_t agents_item = RL_FIELD_OBJECT(NULL, RL_F_REQUIRED, &agents_item_schema);

static const rl_field_t manifest_fields[] = {
    RL_FIELD_OBJECT("agent", 0, &agent_schema),
    RL_FIELD_ARRAY("agents", 0, 0, AGENTS_MAX, &agents_item),
    RL_FIELD_ARRAY("tools", 0, 0, 512, &tool_item),
    RL_FIELD_ARRAY("commands", 0, 0, COMMANDS_MAX, &command_item),
    RL_FIELD_END,
};
const rl_schema_t rl_manifest_schema = RL_SCHEMA(manifest_fields);

int rl_manifest_agent_declared(const char *manifest, const char *agent)
{
    json_t *parsed = manifest != NULL ? json_loads(manifest, 0, NULL) : NULL;
    json_t *agents = json_object_get(parsed, "agents"), *item;
    int declared = 0;
    size_t i;

    json_array_foreach(agents, i, item)
    {
        const char *name = json_string_value(json_object_get(item, "name"));
        if (name != NULL && strcmp(name, agent) == 0)
            declared = 1;
    }
    json_decref(parsed);
    return declared;
}

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

/* The parts of a manifest, in the order the view shows them. */
static const char *const parts[] = {"agent", "agents", "tools", "commands"};
/* The parts the Installation view shows: a change of one is news to the user. */
static const char *const shown[] = {"agent", "agents", "commands"};

struct manifest_set {
    rl_op_t op;
    const char *installation_id;
    json_t *body; /* the call's body (a reference: never changed once submitted) */
    /* results */
    rl_installation_row_t installation;
    int changed; /* agent or commands changed */
    json_int_t tools;
};

static void manifest_set_dispose(rl_store_op_t *base)
{
    json_decref(((struct manifest_set *)base)->body);
    rl_op_dispose(base);
}

static int manifest_set_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct manifest_set *op = (void *)base;
    rl_installation_row_t *installation = &op->installation;
    json_t *stored, *manifest;
    char *text;
    size_t i;
    int result = RL_TXN(txn, installation_get, op->installation_id, installation);

    if (result != 0)
        return result == RL_E_NOT_FOUND ? RL_E_INSTALLATION_NOT_FOUND : result;
    /* Revoked on another node whose word has not reached this one's cache yet (target.h). */
    if (strcmp(installation->state, "revoked") == 0)
        return RL_E_INSTALLATION_GONE;
    stored = rl_view_json(installation->manifest, json_object());
    manifest = json_object();
    for (i = 0; i < sizeof(parts) / sizeof(parts[0]); ++i) {
        json_t *part = json_object_get(op->body, parts[i]);
        if (part == NULL)
            part = json_object_get(stored, parts[i]);
        if (part != NULL)
            json_object_set(manifest, parts[i], part);
    }
    for (i = 0; i < sizeof(shown) / sizeof(shown[0]); ++i) {
        json_t *before = json_object_get(stored, shown[i]), *after = json_object_get(manifest, shown[i]);
        /* json_equal says two absent parts differ: neither is news. */
        if ((before != NULL || after != NULL) && !json_equal(before, after))
            op->changed = 1;
    }
    op->tools = (json_int_t)json_array_size(json_object_get(manifest, "tools"));
    text = json_dumps(manifest, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(stored);
    json_decref(manifest);
    if (text == NULL)
        return RL_E_INTERNAL;
    installation->manifest = rl_arena_strdup(txn->arena, text);
    free(text);
    return RL_TXN(txn, installation_update, installation);
}

static const rl_store_op_type_t manifest_set_type = {"manifest_set", 1, manifest_set_run, manifest_set_dispose};

static void on_manifest_stored(rl_store_op_t *base)
{
    struct manifest_set *op = (void *)base;
    rl_call_t *call = base->arg;
    rl_installations_ctx_t *ctx = &rl_installations_of(call)->ctx;

    if (base->result != 0) {
        rl_call_fail(call, base->result == RL_E_INSTALLATION_NOT_FOUND ? RL_E_INVALID_TOKEN : base->result, NULL);
    } else {
        if (op->changed) {
            json_t *view = rl_view_installation(&op->installation, rl_bus_presence_get(ctx->bus, op->installation.id));
            rl_hub_publish(ctx->hub, op->installation.user_id, RL_EV_INSTALLATION_UPDATED,
                           json_pack("{s:s, s:o}", "installation_id", op->installation.id, "installation", view));
        }
        rl_call_reply(call, json_pack("{s:I}", "tools", op->tools));
    }
    rl_call_release(call);
}

/*
 * What the schema cannot say of agents: names are unique, and at most one is
 * the default (the bridge's choice when a session names none). The path of
 * the first problem, or NULL.
 */
static const char *agents_problem(const json_t *agents, const char **message)
{
    json_t *item, *other;
    size_t i, j, defaults = 0;

    json_array_foreach(agents, i, item)
    {
        if (json_is_true(json_object_get(item, "default")) && ++defaults > 1) {
            *message = "At most one agent is the default";
            return "agents";
        }
        for (j = 0; j < i; ++j) {
            other = json_array_get(agents, j);
            if (json_equal(json_object_get(item, "name"), json_object_get(other, "name"))) {
                *message = "Each agent's name is said once";
                return "agents";
            }
        }
    }
    return NULL;
}

int rl_manifest_set(rl_call_t *call)
{
    struct manifest_set *op;
    const char *message = NULL, *path = agents_problem(json_object_get(call->body, "agents"), &message);

    if (path != NULL) {
        rl_call_fail_full(call, RL_E_INVALID_REQUEST, NULL,
                          json_pack("[{s:s, s:s, s:s}]", "path", path, "code", "custom", "message", message), NULL);
        return 0;
    }
    op = rl_op_new(&manifest_set_type, sizeof(*op));

    op->installation_id = rl_op_str(op, call->principal);
    /* The validated body is never changed once a handler runs: the worker reads it alongside. */
    op->body = json_incref(call->body);
    rl_op_submit_for(call, op, on_manifest_stored);
    return 0;
}
