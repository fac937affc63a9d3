/*
 * The exec adapter: for each user message, run COMMAND with /bin/sh -c, the
 * message text on stdin and RELAY_SESSION_ID / RELAY_INTERACTION_ID in the
 * environment; its stdout streams as deltas; exit status 0 finishes with
 * "stop", another status with "error" and the status (and the end of
 * stderr) appended for the user; a cancel sends SIGTERM to its process group
 * and finishes with "cancelled".
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bridge/agent.h"
#include "common/log.h"

#define STDERR_TAIL 512

typedef struct run {
    struct run *next;
    struct rl_agent *agent;
    rl_turn_t *turn;
    pid_t pid;
    int out_fd, err_fd;
    int exited, status, cancelled;
    char err_tail[STDERR_TAIL + 1];
    size_t err_len;
} run_t;

struct rl_agent {
    rl_bridge_t *bridge;
    char *command;
    run_t *runs;
};

static void finish_if_done(run_t *run);

static void remove_run(struct rl_agent *agent, run_t *run)
{
    run_t **p;

    for (p = &agent->runs; *p != NULL; p = &(*p)->next) {
        if (*p == run) {
            *p = run->next;
            break;
        }
    }
    rl_turn_unref(run->turn);
    free(run);
}

static void close_fd(struct rl_agent *agent, int *fd)
{
    if (*fd >= 0) {
        rl_bridge_unwatch(agent->bridge, *fd);
        close(*fd);
        *fd = -1;
    }
}

static void on_stdout(void *user, int fd, short revents)
{
    run_t *run = user;
    char buf[16384];
    ssize_t n;

    (void)revents;
    n = read(fd, buf, sizeof(buf));
    if (n > 0) {
        rl_bridge_text(run->agent->bridge, run->turn, buf, (size_t)n);
        return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    close_fd(run->agent, &run->out_fd);
    finish_if_done(run);
}

static void on_stderr(void *user, int fd, short revents)
{
    run_t *run = user;
    char buf[4096];
    ssize_t n;

    (void)revents;
    n = read(fd, buf, sizeof(buf));
    if (n > 0) {
        /* Keep the last STDERR_TAIL bytes: the end of an error says what went wrong. */
        size_t k = (size_t)n;
        if (k >= STDERR_TAIL) {
            memcpy(run->err_tail, buf + k - STDERR_TAIL, STDERR_TAIL);
            run->err_len = STDERR_TAIL;
        } else {
            size_t keep = run->err_len + k > STDERR_TAIL ? STDERR_TAIL - k : run->err_len;
            memmove(run->err_tail, run->err_tail + run->err_len - keep, keep);
            memcpy(run->err_tail + keep, buf, k);
            run->err_len = keep + k;
        }
        return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    close_fd(run->agent, &run->err_fd);
    finish_if_done(run);
}

static void finish_if_done(run_t *run)
{
    struct rl_agent *agent = run->agent;
    char text[STDERR_TAIL + 128];

    if (!run->exited || run->out_fd >= 0 || run->err_fd >= 0)
        return;
    if (run->cancelled) {
        rl_bridge_end(agent->bridge, run->turn, "cancelled", NULL, NULL);
    } else if (WIFEXITED(run->status) && WEXITSTATUS(run->status) == 0) {
        rl_bridge_end(agent->bridge, run->turn, "stop", NULL, NULL);
    } else {
        size_t len = run->err_len;
        while (len > 0 && (run->err_tail[len - 1] == '\n' || run->err_tail[len - 1] == '\r'))
            len--;
        run->err_tail[len] = '\0';
        if (WIFEXITED(run->status))
            snprintf(text, sizeof(text), "[the agent failed with exit status %d%s%s]", WEXITSTATUS(run->status),
                     len > 0 ? ": " : "", run->err_tail);
        else
            snprintf(text, sizeof(text), "[the agent was killed by signal %d]", WTERMSIG(run->status));
        rl_log(RL_LOG_WARN, "agent for interaction %s: %s", run->turn->interaction_id, text);
        rl_bridge_end(agent->bridge, run->turn, "error", NULL, text);
    }
    remove_run(agent, run);
}

static int exec_create(rl_bridge_t *bridge, const char *arg, rl_agent_t **out)
{
    struct rl_agent *agent = calloc(1, sizeof(*agent));

    if (agent == NULL)
        return -1;
    agent->bridge = bridge;
    agent->command = strdup(arg);
    *out = agent;
    return agent->command != NULL ? 0 : -1;
}

static void exec_message(rl_agent_t *agent, rl_turn_t *turn, json_t *payload)
{
    json_t *text = json_object_get(json_object_get(payload, "message"), "text");
    int in_fd = -1, out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
    run_t *run = NULL;
    pid_t pid;

    /* The text goes through a memory file: the child reads it at its pace and the loop never blocks. */
    in_fd = memfd_create("relay-message", MFD_CLOEXEC);
    if (in_fd < 0 || pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0)
        goto fail;
    if (json_string_length(text) > 0 &&
        write(in_fd, json_string_value(text), json_string_length(text)) != (ssize_t)json_string_length(text))
        goto fail;
    lseek(in_fd, 0, SEEK_SET);
    run = calloc(1, sizeof(*run));
    if (run == NULL)
        goto fail;
    pid = fork();
    if (pid < 0)
        goto fail;
    if (pid == 0) {
        setpgid(0, 0);
        rl_bridge_child_signals();
        dup2(in_fd, 0);
        dup2(out_pipe[1], 1);
        dup2(err_pipe[1], 2);
        setenv("RELAY_SESSION_ID", turn->session_id, 1);
        setenv("RELAY_INTERACTION_ID", turn->interaction_id, 1);
        execl("/bin/sh", "sh", "-c", agent->command, (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid);
    close(in_fd);
    close(out_pipe[1]);
    close(err_pipe[1]);
    fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
    fcntl(err_pipe[0], F_SETFL, O_NONBLOCK);
    run->agent = agent;
    run->turn = turn;
    rl_turn_ref(turn);
    run->pid = pid;
    run->out_fd = out_pipe[0];
    run->err_fd = err_pipe[0];
    run->next = agent->runs;
    agent->runs = run;
    rl_bridge_watch(agent->bridge, run->out_fd, POLLIN, on_stdout, run);
    rl_bridge_watch(agent->bridge, run->err_fd, POLLIN, on_stderr, run);
    rl_log(RL_LOG_INFO, "interaction %s: started the agent (pid %d)", turn->interaction_id, (int)pid);
    return;
fail:
    rl_log(RL_LOG_ERROR, "could not start the agent: %s", strerror(errno));
    free(run);
    if (in_fd >= 0)
        close(in_fd);
    for (int i = 0; i < 2; i++) {
        if (out_pipe[i] >= 0)
            close(out_pipe[i]);
        if (err_pipe[i] >= 0)
            close(err_pipe[i]);
    }
    rl_bridge_end(agent->bridge, turn, "error", NULL, "[the bridge could not start the agent]");
}

static void exec_cancel(rl_agent_t *agent, const char *session_id, const char *interaction_id)
{
    run_t *run;

    for (run = agent->runs; run != NULL; run = run->next) {
        if (strcmp(run->turn->session_id, session_id) != 0 ||
            (interaction_id[0] != '\0' && strcmp(run->turn->interaction_id, interaction_id) != 0))
            continue;
        if (!run->exited) {
            rl_log(RL_LOG_INFO, "interaction %s: cancelled, stopping pid %d", run->turn->interaction_id, (int)run->pid);
            run->cancelled = 1;
            kill(-run->pid, SIGTERM);
        }
    }
}

static void exec_notify(rl_agent_t *agent, json_t *line)
{
    (void)agent;
    (void)line;
}

static int exec_child_exited(rl_agent_t *agent, pid_t pid, int status)
{
    run_t *run;

    for (run = agent->runs; run != NULL; run = run->next) {
        if (run->pid == pid) {
            run->exited = 1;
            run->status = status;
            /* A grandchild may still hold stdout open: the group goes with its leader. */
            kill(-pid, SIGTERM);
            finish_if_done(run);
            return 1;
        }
    }
    return 0;
}

static void exec_destroy(rl_agent_t *agent)
{
    while (agent->runs != NULL) {
        run_t *run = agent->runs;
        if (!run->exited)
            kill(-run->pid, SIGTERM);
        close_fd(agent, &run->out_fd);
        close_fd(agent, &run->err_fd);
        remove_run(agent, run);
    }
    free(agent->command);
    free(agent);
}

const rl_agent_adapter_t rl_agent_exec = {
    .scheme = "exec",
    .create = exec_create,
    .message = exec_message,
    .cancel = exec_cancel,
    .notify = exec_notify,
    .child_exited = exec_child_exited,
    .destroy = exec_destroy,
};
