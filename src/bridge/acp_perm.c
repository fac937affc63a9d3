/* The acp adapter: the agent's permission requests as the relay's approvals (acp.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bridge/acp.h"
#include "bridge/rest.h"
#include "common/log.h"

/* ---- permissions ------------------------------------------------------------------------------ */

/* The verb of the approval's sentence for each tool kind. */
static const struct {
    const char *kind, *verb;
} verbs[] = {
    {"read", "read"},         {"edit", "edit"},     {"delete", "delete"},
    {"move", "move"},         {"search", "search"}, {"execute", "run"},
    {"think", "think about"}, {"fetch", "fetch"},   {"switch_mode", "switch mode:"},
    {"other", "use a tool:"},
};

void rl_acp__answer_permission(struct rl_agent *a, permission_t *perm, const char *option_id)
{
    json_t *outcome = option_id != NULL ? json_pack("{s:s, s:s}", "outcome", "selected", "optionId", option_id)
                                        : json_pack("{s:s}", "outcome", "cancelled");

    rl_acp__send_msg(a, rl_jsonrpc_result(perm->rpc_id, json_pack("{s:o}", "outcome", outcome)));
}

void rl_acp__permission_done(struct rl_agent *a, permission_t *done)
{
    permission_t **pp;

    for (pp = &a->permissions; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == done) {
            *pp = done->next;
            break;
        }
    }
    json_decref(done->rpc_id);
    json_decref(done->options);
    free(done);
}

void rl_acp__on_permission(struct rl_agent *a, json_t *id, json_t *params)
{
    session_t *s = rl_acp__session_by_acp(a, json_string_value(json_object_get(params, "sessionId")));
    prompt_t *p = rl_acp__running_prompt(s);
    json_t *call = json_object_get(params, "toolCall"), *line, *blocks;
    const char *call_id = json_string_value(json_object_get(call, "toolCallId"));
    const char *kind, *verb = "use a tool:";
    permission_t *perm;
    tool_t *t;
    char *command, key[37], message[8400];
    size_t omitted, i, n;

    if (!json_is_array(json_object_get(params, "options")) || call_id == NULL) {
        rl_acp__answer_error(a, id, RL_JSONRPC_INVALID_PARAMS, "session/request_permission needs toolCall and options");
        return;
    }
    /* Outside a turn (a stale request, or one during session/load) nobody can be asked. */
    if (p == NULL || p->cancelled || s->loading) {
        rl_acp__send_msg(a, rl_jsonrpc_result(id, json_pack("{s:{s:s}}", "outcome", "outcome", "cancelled")));
        return;
    }
    rl_acp__thought_close(a, p);
    t = rl_acp__tool_find(p, call_id);
    if (t == NULL) {
        t = rl_acp__tool_open(a, p, call, 0);
    } else {
        rl_acp__tool_merge(t, call);
        rl_acp__tool_create(a, p, t);
    }
    perm = calloc(1, sizeof(*perm));
    if (t == NULL || perm == NULL) {
        free(perm);
        rl_acp__answer_error(a, id, RL_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    perm->rpc_id = json_incref(id);
    perm->options = json_incref(json_object_get(params, "options"));
    perm->prompt = p;
    /* apr_ and the 32 hex digits of a random UUID (docs/bridge.md "acp:COMMAND", permissions). */
    rl_rest_new_key(key);
    memcpy(perm->approval_id, "apr_", 4);
    for (i = 0, n = 4; key[i] != '\0' && n < sizeof(perm->approval_id) - 1; i++)
        if (key[i] != '-')
            perm->approval_id[n++] = key[i];
    perm->approval_id[n] = '\0';
    perm->next = a->permissions;
    a->permissions = perm;

    kind = rl_acp_tool_kind(json_string_value(json_object_get(t->call, "kind")));
    for (i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
        if (strcmp(verbs[i].kind, kind) == 0)
            verb = verbs[i].verb;
    command = rl_acp_command_of(kind, t->call);
    snprintf(message, sizeof(message), "The agent asks to %s %s", verb, command != NULL ? command : "");
    blocks = rl_acp_content(json_object_get(t->call, "content"), RL_ACP_FIELD_MAX, &omitted);
    while (json_array_size(blocks) > MAX_CONTENT_BLOCKS)
        json_array_remove(blocks, MAX_CONTENT_BLOCKS);
    /* The relay's cap on message is 4000 characters: 4000 bytes, cut between two characters, fit. */
    line = json_pack("{s:s, s:s, s:s, s:o, s:o, s:s, s:s?, s:O, s:o}", "type", "approval_request", "approval_id",
                     perm->approval_id, "action", kind, "title",
                     rl_acp__cut_string(rl_acp__tool_title(t), RL_ACP_LABEL_MAX), "message",
                     rl_acp__cut_string(message, 4000), "severity", rl_acp_severity(kind), "command", command,
                     "tool_call_id", json_object_get(t->call, "toolCallId"), "content", blocks);
    free(command);
    if (line == NULL) {
        /* Nobody can be asked: the agent must not wait for ever. */
        rl_log(RL_LOG_WARN, "acp: a permission request could not be passed on: answered cancelled");
        rl_acp__answer_permission(a, perm, NULL);
        rl_acp__permission_done(a, perm);
        return;
    }
    rl_acp__emit(a, RL_LINE_APPROVAL_REQUEST, p, line);
}

/* The relay's answer (a decision, an expiry, or an auto-resolution) reaches the agent's request. */
void rl_acp__notify(rl_agent_t *a, json_t *line)
{
    const char *type = json_string_value(json_object_get(line, "type"));
    const char *approval_id = json_string_value(json_object_get(line, "approval_id"));
    rl_acp_decision_t decision;
    permission_t *perm;

    if (rl_acp__notify_session(a, line))
        return;
    if (type == NULL || approval_id == NULL)
        return;
    if (strcmp(type, "approval") == 0)
        decision = rl_acp_decision_of(json_string_value(json_object_get(line, "decision")));
    else if (strcmp(type, "approval_expired") == 0)
        decision = RL_ACP_EXPIRED;
    else
        return;
    for (perm = a->permissions; perm != NULL; perm = perm->next) {
        if (strcmp(perm->approval_id, approval_id) == 0) {
            rl_acp__answer_permission(a, perm, rl_acp_option_for(perm->options, decision));
            rl_acp__permission_done(a, perm);
            return;
        }
    }
}
