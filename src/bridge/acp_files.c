/* The acp adapter: the fs methods the agent calls, inside the working folder only (acp.h, acp_fs.c). */

#include "bridge/acp.h"
#include "bridge/acp_fs.h"
#include "common/log.h"

/* ---- fs methods: inside the session's working folder only (acp_fs.c) -------------------------- */

/*
 * The folder a request of the agent may touch: its session's (a project's
 * folder, or the agent's own); a request naming no session of this agent's
 * stays in the agent's own folder.
 */
static const char *root_of(struct rl_agent *a, json_t *params)
{
    session_t *s = rl_acp__session_by_acp(a, json_string_value(json_object_get(params, "sessionId")));

    return s != NULL && s->root[0] != '\0' ? s->root : a->root;
}

/* A file the agent touched, for the session's file list (rl_bridge_tool_file says in which sessions). */
static void tell_file(struct rl_agent *a, json_t *params, const char *tool)
{
    session_t *s = rl_acp__session_by_acp(a, json_string_value(json_object_get(params, "sessionId")));

    if (s != NULL && s->relay_id[0] != '\0')
        rl_bridge_tool_file(a->bridge, s->relay_id, tool, json_string_value(json_object_get(params, "path")));
}

void rl_acp__on_read(struct rl_agent *a, json_t *id, json_t *params)
{
    const char *why = NULL;
    json_t *content = NULL;
    int code = rl_acp_fs_read(root_of(a, params), json_string_value(json_object_get(params, "path")),
                              json_integer_value(json_object_get(params, "line")),
                              json_integer_value(json_object_get(params, "limit")), &content, &why);

    if (code != 0) {
        rl_log(RL_LOG_INFO, "acp agent: fs/read_text_file refused: %s", why);
        rl_acp__answer_error(a, id, code, why);
        return;
    }
    tell_file(a, params, "read");
    rl_acp__send_msg(a, rl_jsonrpc_result(id, json_pack("{s:o}", "content", content)));
}

void rl_acp__on_write(struct rl_agent *a, json_t *id, json_t *params)
{
    json_t *content = json_object_get(params, "content");
    const char *why = "fs/write_text_file needs path and content";
    int code = json_is_string(content)
                   ? rl_acp_fs_write(root_of(a, params), json_string_value(json_object_get(params, "path")),
                                     json_string_value(content), json_string_length(content), &why)
                   : RL_JSONRPC_INVALID_PARAMS;

    if (code != 0) {
        rl_log(RL_LOG_INFO, "acp agent: fs/write_text_file refused: %s", why);
        rl_acp__answer_error(a, id, code, why);
        return;
    }
    tell_file(a, params, "write");
    rl_acp__send_msg(a, rl_jsonrpc_result(id, NULL));
}
