/*
 * The jsonl adapter: one long-lived agent process speaking JSON lines on
 * stdin (bridge to agent) and stdout (agent to bridge); the protocol is in
 * docs/bridge.md. Lines from the agent are parsed by rl_agent_line_parse and
 * handed to the loop; lines to the agent are queued and written as the pipe
 * takes them, so a slow agent never blocks the loop. stderr is inherited.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bridge/agent.h"
#include "bridge/jsonl_reader.h"
#include "common/buf.h"
#include "common/log.h"

/* A cap on what waits for the agent to read; past it the agent is stuck. */
#define MAX_PENDING_OUT (16u * 1024u * 1024u)

struct rl_agent {
    rl_bridge_t *bridge;
    pid_t pid;
    int in_fd, out_fd;
    rl_buf_t pending; /* bytes for the agent's stdin not written yet, capped at MAX_PENDING_OUT */
    rl_jsonl_reader_t reader;
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
    rl_bridge_agent_line(agent->bridge, &parsed);
}

static void on_stdout(void *user, int fd, short revents)
{
    struct rl_agent *agent = user;
    char buf[16384];
    ssize_t n;

    (void)revents;
    n = read(fd, buf, sizeof(buf));
    if (n > 0) {
        if (rl_jsonl_reader_feed(&agent->reader, buf, (size_t)n, on_line, agent) != 0)
            rl_log(RL_LOG_WARN, "agent line too long: dropped");
        return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    rl_bridge_unwatch(agent->bridge, fd);
    close(fd);
    agent->out_fd = -1;
}

static void flush_out(struct rl_agent *agent);

static void on_stdin(void *user, int fd, short revents)
{
    (void)fd;
    (void)revents;
    flush_out(user);
}

static void flush_out(struct rl_agent *agent)
{
    int written;

    if (agent->in_fd < 0)
        return;
    written = rl_buf_write(&agent->pending, agent->in_fd);
    if (written == RL_BUF_AGAIN) {
        rl_bridge_watch(agent->bridge, agent->in_fd, POLLOUT, on_stdin, agent);
        return;
    }
    if (written != 0) {
        rl_log(RL_LOG_WARN, "writing to the agent: %s", strerror(errno));
        rl_buf_reset(&agent->pending);
    }
    rl_bridge_unwatch(agent->bridge, agent->in_fd);
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
    queued = rl_buf_append(&agent->pending, text, len + 1);
    free(text);
    if (queued == RL_BUF_E_TOO_LARGE)
        rl_bridge_fail(agent->bridge, "the agent does not read its input");
    else if (queued == 0)
        flush_out(agent);
}

static int jsonl_create(rl_bridge_t *bridge, const char *arg, rl_agent_t **out)
{
    struct rl_agent *agent = calloc(1, sizeof(*agent));
    int in_pipe[2], out_pipe[2];

    if (agent == NULL || pipe2(in_pipe, O_CLOEXEC) != 0)
        return -1;
    if (pipe2(out_pipe, O_CLOEXEC) != 0)
        return -1;
    agent->bridge = bridge;
    rl_buf_init(&agent->pending, MAX_PENDING_OUT);
    rl_jsonl_reader_init(&agent->reader, 1024 * 1024);
    agent->pid = fork();
    if (agent->pid < 0) {
        rl_log(RL_LOG_ERROR, "fork: %s", strerror(errno));
        return -1;
    }
    if (agent->pid == 0) {
        setpgid(0, 0);
        rl_bridge_child_signals();
        dup2(in_pipe[0], 0);
        dup2(out_pipe[1], 1);
        execl("/bin/sh", "sh", "-c", arg, (char *)NULL);
        _exit(127);
    }
    setpgid(agent->pid, agent->pid);
    close(in_pipe[0]);
    close(out_pipe[1]);
    agent->in_fd = in_pipe[1];
    agent->out_fd = out_pipe[0];
    fcntl(agent->in_fd, F_SETFL, O_NONBLOCK);
    fcntl(agent->out_fd, F_SETFL, O_NONBLOCK);
    rl_bridge_watch(bridge, agent->out_fd, POLLIN, on_stdout, agent);
    rl_log(RL_LOG_INFO, "started the jsonl agent (pid %d)", (int)agent->pid);
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

static int jsonl_child_exited(rl_agent_t *agent, pid_t pid, int status)
{
    char why[128];

    if (pid != agent->pid)
        return 0;
    agent->pid = -1;
    if (WIFEXITED(status))
        snprintf(why, sizeof(why), "the jsonl agent exited with status %d", WEXITSTATUS(status));
    else
        snprintf(why, sizeof(why), "the jsonl agent was killed by signal %d", WTERMSIG(status));
    rl_bridge_fail(agent->bridge, why);
    return 1;
}

static void jsonl_destroy(rl_agent_t *agent)
{
    if (agent->in_fd >= 0) {
        rl_bridge_unwatch(agent->bridge, agent->in_fd);
        close(agent->in_fd);
    }
    if (agent->out_fd >= 0) {
        rl_bridge_unwatch(agent->bridge, agent->out_fd);
        close(agent->out_fd);
    }
    if (agent->pid > 0) {
        kill(-agent->pid, SIGTERM);
        waitpid(agent->pid, NULL, 0);
    }
    rl_jsonl_reader_free(&agent->reader);
    rl_buf_free(&agent->pending);
    free(agent);
}

const rl_agent_adapter_t rl_agent_jsonl = {
    .scheme = "jsonl",
    .create = jsonl_create,
    .message = jsonl_message,
    .cancel = jsonl_cancel,
    .notify = jsonl_notify,
    .child_exited = jsonl_child_exited,
    .destroy = jsonl_destroy,
};
