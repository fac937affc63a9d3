/*
 * The acp adapter: a session's settings (modes, models, effort, the agent's
 * config options) as the relay's session state, changed from a client
 * (session.config, session.model.changed, a send's thought_level); and the
 * relay's other updates about sessions (acp.h; the tables are acp_config.c;
 * docs/bridge.md, "Steering").
 */
#include <stdlib.h>
#include <string.h>

#include "bridge/acp.h"
#include "bridge/acp_config.h"
#include "bridge/agent_state.h"
#include "common/log.h"

/* Settings asked of a session not open yet, kept until it is: a client does not send more than a few. */
#define PENDING_MAX 16

session_t *rl_acp__session_get(struct rl_agent *a, const char *relay_id)
{
    session_t *s = rl_acp__session_by_relay(a, relay_id);

    if (s != NULL || relay_id == NULL || *relay_id == '\0' || strlen(relay_id) >= sizeof(s->relay_id))
        return s;
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    snprintf(s->relay_id, sizeof(s->relay_id), "%s", relay_id);
    rl_acp__session_root(a, s);
    rl_buf_init(&s->replay, REPLAY_MAX);
    s->next = a->sessions;
    a->sessions = s;
    return s;
}

void rl_acp__session_root(struct rl_agent *a, session_t *s)
{
    const char *cwd = rl_bridge_session_cwd(a->bridge, s->relay_id);

    snprintf(s->root, sizeof(s->root), "%s", cwd != NULL ? cwd : a->root);
}

void rl_acp__session_free(session_t *s)
{
    json_decref(s->config_options);
    json_decref(s->modes);
    json_decref(s->models);
    json_decref(s->options);
    json_decref(s->pending);
    json_decref(s->context);
    rl_buf_free(&s->replay);
    free(s->resume_id);
    free(s->acp_id);
    free(s);
}

/* The session's options from what the agent said last, posted with extra (stolen; may be NULL) merged in. */
static void post_state(struct rl_agent *a, session_t *s, json_t *extra)
{
    json_t *fields;
    const char *key;
    json_t *value;

    json_decref(s->options);
    s->options = rl_acp_options(s->config_options, s->modes, s->models);
    fields = rl_acp_state_fields(s->options);
    if (fields != NULL) {
        json_object_set_new(fields, "state", json_string("ready"));
        json_object_foreach(extra, key, value) json_object_set(fields, key, value);
        rl_bridge_state(a->bridge, s->relay_id, fields);
    }
    json_decref(fields);
    json_decref(extra);
}

/* The change is not made: the state keeps the old value and says why (docs/api.md, "Steering"). */
static void refuse(struct rl_agent *a, session_t *s, const char *code, const char *message)
{
    json_t *fields = json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", message);

    rl_log(RL_LOG_INFO, "relay session %s: a setting not made: %s (%s)", s->relay_id, code, message);
    rl_bridge_state(a->bridge, s->relay_id, fields);
    json_decref(fields);
}

static void keep(json_t **slot, json_t *value)
{
    json_decref(*slot);
    /* A copy: what the agent said is changed in place as later updates come. */
    *slot = value != NULL && !json_is_null(value) ? json_deep_copy(value) : NULL;
}

void rl_acp__config_opened(struct rl_agent *a, session_t *s, json_t *result)
{
    /* A load or resume that says nothing of them leaves what the session had. */
    if (json_object_get(result, "configOptions") != NULL || s->config_options == NULL)
        keep(&s->config_options, json_object_get(result, "configOptions"));
    if (json_object_get(result, "modes") != NULL || s->modes == NULL)
        keep(&s->modes, json_object_get(result, "modes"));
    if (json_object_get(result, "models") != NULL || s->models == NULL)
        keep(&s->models, json_object_get(result, "models"));
    post_state(a, s, json_pack("{s:n}", "error"));
}

/* Sends the change of option (by id, or the first of kind) to value; the answer posts the new state. */
static void set_now(struct rl_agent *a, session_t *s, const char *id, const char *kind, const char *value)
{
    json_t *option = rl_acp_option_find(s->options, id, id == NULL ? kind : NULL);
    const char *current = json_string_value(json_object_get(option, "value"));
    rl_acp_setter_t setter;
    json_int_t rid;
    request_t *r;

    if (option == NULL || !rl_acp_option_allows(option, value)) {
        refuse(a, s, "config_invalid", option == NULL ? "the agent offers no such option" : "not one of its values");
        return;
    }
    id = json_string_value(json_object_get(option, "id"));
    if (current != NULL && strcmp(current, value) == 0) {
        post_state(a, s, json_pack("{s:n}", "error"));
        return;
    }
    setter = rl_acp_setter_of(s->config_options, s->modes, s->models, id);
    if (setter == RL_ACP_SET_NONE) {
        refuse(a, s, "config_invalid", "the agent offers no way to change it");
        return;
    }
    rid = rl_acp__request(a, REQ_SET, rl_acp_setter_method(setter),
                          rl_acp_setter_params(setter, s->config_options, s->acp_id, id, value), s, NULL);
    r = rl_acp__request_by_id(a, rid);
    if (r != NULL)
        r->arg = json_pack("{s:s, s:s, s:i}", "id", id, "value", value, "setter", (int)setter);
}

void rl_acp__config_pending(struct rl_agent *a, session_t *s)
{
    json_t *pending = s->pending, *item;
    size_t i;

    s->pending = NULL;
    json_array_foreach(pending, i, item)
        set_now(a, s, json_string_value(json_object_get(item, "id")), json_string_value(json_object_get(item, "kind")),
                json_string_value(json_object_get(item, "value")));
    json_decref(pending);
}

/* A change asked by the relay: now when the session is open, else when it opens (it is opened for it). */
static void config_set(struct rl_agent *a, session_t *s, const char *id, const char *kind, const char *value)
{
    if (a->initialized && s->state == SESSION_READY) {
        set_now(a, s, id, kind, value);
        return;
    }
    if (s->pending == NULL)
        s->pending = json_array();
    if (json_array_size(s->pending) >= PENDING_MAX) {
        refuse(a, s, "config_invalid", "too many settings wait for the agent");
        return;
    }
    json_array_append_new(s->pending, json_pack("{s:s?, s:s?, s:s}", "id", id, "kind", kind, "value", value));
    rl_acp__open_session(a, s);
}

/* What the agent's answer does not restate is set here as it was asked. */
static void apply_locally(session_t *s, rl_acp_setter_t setter, const char *id, const char *value)
{
    json_t *item;
    size_t i;

    switch (setter) {
    case RL_ACP_SET_MODE:
        json_object_set_new(s->modes, "currentModeId", json_string(value));
        break;
    case RL_ACP_SET_MODEL:
        json_object_set_new(s->models, "currentModelId", json_string(value));
        break;
    case RL_ACP_SET_CONFIG:
        json_array_foreach(s->config_options, i, item)
        {
            const char *type = json_string_value(json_object_get(item, "type"));
            if (strcmp(json_string_value(json_object_get(item, "id")) != NULL
                           ? json_string_value(json_object_get(item, "id"))
                           : "",
                       id) != 0)
                continue;
            json_object_set_new(item, "currentValue",
                                type != NULL && strcmp(type, "boolean") == 0 ? json_boolean(strcmp(value, "true") == 0)
                                                                             : json_string(value));
        }
        break;
    default:
        break;
    }
}

void rl_acp__on_config_set(struct rl_agent *a, request_t *r, rl_jsonrpc_msg_t *msg)
{
    session_t *s = r->session;
    const char *id = json_string_value(json_object_get(r->arg, "id"));
    const char *value = json_string_value(json_object_get(r->arg, "value"));
    json_t *message;

    if (s == NULL || id == NULL || value == NULL)
        return;
    if (msg->error != NULL) {
        message = rl_acp__cut_string(rl_jsonrpc_error_message(msg), 128);
        refuse(a, s, "config_failed", json_string_value(message));
        json_decref(message);
        return;
    }
    if (json_is_array(json_object_get(msg->result, "configOptions")))
        keep(&s->config_options, json_object_get(msg->result, "configOptions"));
    else
        apply_locally(s, (rl_acp_setter_t)json_integer_value(json_object_get(r->arg, "setter")), id, value);
    rl_log(RL_LOG_INFO, "relay session %s: %s is now %s", s->relay_id, id, value);
    post_state(a, s, json_pack("{s:n}", "error"));
    if (json_string_value(json_object_get(rl_acp_option_find(s->options, id, NULL), "kind")) != NULL &&
        strcmp(json_string_value(json_object_get(rl_acp_option_find(s->options, id, NULL), "kind")), "mode") == 0)
        rl_acp__set_mode(a, value);
}

int rl_acp__config_update(struct rl_agent *a, session_t *s, json_t *update)
{
    const char *kind = json_string_value(json_object_get(update, "sessionUpdate"));
    const char *mode;
    json_t *item;
    size_t i;

    if (s == NULL || kind == NULL)
        return 0;
    if (strcmp(kind, "config_option_update") == 0) {
        if (json_is_array(json_object_get(update, "configOptions")))
            keep(&s->config_options, json_object_get(update, "configOptions"));
        post_state(a, s, NULL);
        return 1;
    }
    if (strcmp(kind, "current_mode_update") != 0)
        return 0;
    /* The docs' example says modeId, the schema currentModeId: take either. */
    mode = json_string_value(json_object_get(update, "currentModeId"));
    mode = mode != NULL ? mode : json_string_value(json_object_get(update, "modeId"));
    if (mode == NULL)
        return 1;
    if (json_is_object(s->modes))
        json_object_set_new(s->modes, "currentModeId", json_string(mode));
    json_array_foreach(s->config_options, i, item)
    {
        const char *category = json_string_value(json_object_get(item, "category"));
        if (category != NULL && strcmp(category, "mode") == 0)
            json_object_set_new(item, "currentValue", json_string(mode));
    }
    post_state(a, s, NULL);
    return 1;
}

void rl_acp__thought_level(struct rl_agent *a, session_t *s, prompt_t *p)
{
    json_t *effort = rl_acp_option_find(s->options, NULL, "effort");
    const char *value = rl_acp_effort_for(effort, json_string_value(json_object_get(p->message, "thought_level")));
    const char *current = json_string_value(json_object_get(effort, "value"));

    /* spec (ACP prompt turn): the setting goes before the prompt, and the agent answers them in order. */
    if (value != NULL && (current == NULL || strcmp(current, value) != 0))
        set_now(a, s, json_string_value(json_object_get(effort, "id")), NULL, value);
}

int rl_acp__notify_session(struct rl_agent *a, json_t *line)
{
    const char *type = json_string_value(json_object_get(line, "type"));
    const char *sid = json_string_value(json_object_get(line, "session_id"));
    json_t *option = json_object_get(line, "option"), *resume;
    session_t *s;

    if (type == NULL)
        return 0;
    if (strcmp(type, "agent_sessions_list") == 0) {
        rl_acp__list(a, line);
        return 1;
    }
    if (strcmp(type, "session_closed") == 0) {
        rl_acp__close(a, sid, json_string_value(json_object_get(line, "reason")));
        return 1;
    }
    if (strcmp(type, "session_config") != 0 && strcmp(type, "session_model") != 0 &&
        strcmp(type, "session_started") != 0)
        return 0;
    s = rl_acp__session_get(a, sid);
    if (s == NULL)
        return 1;
    if (strcmp(type, "session_config") == 0) {
        config_set(a, s, json_string_value(json_object_get(option, "id")), NULL,
                   json_string_value(json_object_get(option, "value")));
    } else if (strcmp(type, "session_model") == 0) {
        /* The older PATCH {model} is the session's model option (docs/api.md, "Steering"). */
        json_t *model = rl_acp_option_find(s->options, NULL, "model");
        config_set(a, s, model != NULL ? json_string_value(json_object_get(model, "id")) : NULL, "model",
                   json_string_value(json_object_get(line, "model")));
    } else {
        resume = json_object_get(json_object_get(json_object_get(line, "session"), "resume"), "agent_session_id");
        if (json_is_string(resume) && s->acp_id == NULL && s->resume_id == NULL)
            s->resume_id = strdup(json_string_value(resume));
    }
    return 1;
}
