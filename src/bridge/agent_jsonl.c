/*
 * The jsonl adapter: one long-lived agent process speaking JSON lines on
 * stdin (bridge to agent) and stdout (agent to bridge); the protocol is in
 * docs/bridge.md. Lines from the agent are parsed by rl_agent_line_parse and
 * handed to the loop; lines to the agent are queued and written as the pipe
 * takes them, so a slow agent never blocks the loop (child.h). stderr is
 * inherited.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "bridge/agent.h"
#include "bridge/child.h"
#include "common/log.h"

/* A cap on what waits for the agent to read; past it the agent is stuck. */
#define MAX_PENDING_OUT (16u * 1024u * 1024u)

struct rl_agent {
    rl_bridge_t *bridge;
    rl_child_t *child;
};

static void on_line(void *user, const char *line, size_t len)
{
    struct rl_agent *agent = user;
    rl_agent_line_t parsed;
    char err[160];

    if (len == 0)
        return;
    if (rl_agent_line_parse(line, len, &parsed, err, sizeof(err)) != 0) {
        rl_log(RL_LOG_WARN, "agent line ignored: %s", err);
        return;
    }
    parsed.from = agent;
    rl_bridge_agent_line(agent->bridge, &parsed);
}

static void send_line(struct rl_agent *agent, json_t *line)
{
    char *text = json_dumps(line, JSON_COMPACT);
    size_t len;
    int queued;

    if (text == NULL)
        return;
    /* The line goes out with its newline in place of the NUL, in one append that fits whole or not at all. */
    len = strlen(text);
    text[len] = '\n';
    queued = rl_child_send(agent->child, text, len + 1);
    free(text);
    if (queued == RL_CHILD_E_FULL)
        rl_bridge_fail(agent->bridge, "the agent does not read its input");
}

static void on_exit_agent(void *user, int status)
{
    struct rl_agent *agent = user;
    char why[128];

    if (WIFEXITED(status))
        snprintf(why, sizeof(why), "the jsonl agent exited with status %d", WEXITSTATUS(status));
    else
        snprintf(why, sizeof(why), "the jsonl agent was killed by signal %d", WTERMSIG(status));
    rl_bridge_fail(agent->bridge, why);
}

static int jsonl_create(rl_bridge_t *bridge, const char *name, const char *arg, rl_agent_t **out)
{
    struct rl_agent *agent = calloc(1, sizeof(*agent));
    rl_child_config_t config = {
        .name = "the jsonl agent",
        .command = arg,
        .stdin_fd = -1,
        .stdin_max = MAX_PENDING_OUT,
        .line_max = 1024 * 1024,
        .stderr_inherit = 1,
        .on_out = on_line,
        .on_exit = on_exit_agent,
        .user = agent,
    };

    if (agent == NULL)
        return -1;
    agent->bridge = bridge;
    agent->child = rl_child_new(bridge, &config);
    if (agent->child == NULL || rl_child_start(agent->child) != 0) {
        rl_child_free(agent->child);
        free(agent);
        return -1;
    }
    rl_log(RL_LOG_INFO, "started the jsonl agent (pid %d)", (int)rl_child_pid(agent->child));
    *out = agent;
    return 0;
}

static void jsonl_message(rl_agent_t *agent, rl_turn_t *turn, json_t *payload)
{
    json_t *message = json_object_get(payload, "message");
    json_t *line = json_pack("{s:s, s:s, s:s, s:O?, s:O?, s:O?, s:O?, s:O?}", "type", "message", "session_id",
                             turn->session_id, "interaction_id", turn->interaction_id, "message_id",
                             json_object_get(message, "message_id"), "text", json_object_get(message, "text"),
                             "attachments", json_object_get(message, "attachments"), "thought_level",
                             json_object_get(message, "thought_level"), "session", json_object_get(payload, "session"));

    /* The session's project folder (docs/bridge.md "jsonl:COMMAND"): the agent's own when it names none. */
    const char *cwd = rl_bridge_session_cwd(agent->bridge, turn->session_id);

    if (line != NULL && cwd != NULL)
        json_object_set_new(line, "cwd", json_string(cwd));
    if (line != NULL)
        send_line(agent, line);
    json_decref(line);
}

static void jsonl_cancel(rl_agent_t *agent, const char *session_id, const char *interaction_id)
{
    json_t *line =
        json_pack("{s:s, s:s, s:s}", "type", "cancel", "session_id", session_id, "interaction_id", interaction_id);

    if (line != NULL)
        send_line(agent, line);
    json_decref(line);
}

static void jsonl_notify(rl_agent_t *agent, json_t *line)
{
    send_line(agent, line);
}

static void jsonl_destroy(rl_agent_t *agent)
{
    rl_child_free(agent->child);
    free(agent);
}

const rl_agent_adapter_t rl_agent_jsonl = {
    .scheme = "jsonl",
    .create = jsonl_create,
    .message = jsonl_message,
    .cancel = jsonl_cancel,
    .notify = jsonl_notify,
    .destroy = jsonl_destroy,
};
