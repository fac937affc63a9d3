/*
 * The exec adapter: for each user message, run COMMAND with /bin/sh -c, the
 * message text on stdin and RELAY_SESSION_ID / RELAY_INTERACTION_ID in the
 * environment; its stdout streams as deltas; exit status 0 finishes with
 * "stop", another status with "error" and the status (and the end of
 * stderr) appended for the user; a cancel sends SIGTERM to its process group
 * and finishes with "cancelled". The process is one of child.h's.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bridge/agent.h"
#include "bridge/child.h"
#include "common/log.h"

/* The end of stderr the user reads when the agent fails. */
#define STDERR_TAIL 512

typedef struct run {
    struct run *next;
    struct rl_agent *agent;
    rl_turn_t *turn;
    rl_child_t *child;
    int cancelled;
} run_t;

struct rl_agent {
    rl_bridge_t *bridge;
    char *command;
    run_t *runs;
};

static void remove_run(struct rl_agent *agent, run_t *run)
{
    run_t **p;

    for (p = &agent->runs; *p != NULL; p = &(*p)->next) {
        if (*p == run) {
            *p = run->next;
            break;
        }
    }
    rl_child_free(run->child);
    rl_turn_unref(run->turn);
    free(run);
}

static void on_stdout(void *user, const char *bytes, size_t len)
{
    run_t *run = user;

    rl_bridge_text(run->agent->bridge, run->turn, bytes, len);
}

/* The process ended and its output with it. */
static void on_exit_run(void *user, int status)
{
    run_t *run = user;
    struct rl_agent *agent = run->agent;
    char text[STDERR_TAIL + 128], tail[STDERR_TAIL + 1];
    size_t len;

    if (run->cancelled) {
        rl_bridge_end(agent->bridge, run->turn, "cancelled", NULL, NULL);
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        rl_bridge_end(agent->bridge, run->turn, "stop", NULL, NULL);
    } else {
        snprintf(tail, sizeof(tail), "%s", rl_child_stderr_tail(run->child));
        len = strlen(tail);
        while (len > 0 && (tail[len - 1] == '\n' || tail[len - 1] == '\r'))
            len--;
        tail[len] = '\0';
        if (WIFEXITED(status))
            snprintf(text, sizeof(text), "[the agent failed with exit status %d%s%s]", WEXITSTATUS(status),
                     len > 0 ? ": " : "", tail);
        else
            snprintf(text, sizeof(text), "[the agent was killed by signal %d]", WTERMSIG(status));
        rl_log(RL_LOG_WARN, "agent for interaction %s: %s", run->turn->interaction_id, text);
        rl_bridge_end(agent->bridge, run->turn, "error", NULL, text);
    }
    remove_run(agent, run);
}

static int exec_create(rl_bridge_t *bridge, const char *name, const char *arg, rl_agent_t **out)
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
    const char *env[] = {"RELAY_SESSION_ID", turn->session_id, "RELAY_INTERACTION_ID", turn->interaction_id, NULL};
    rl_child_config_t config = {
        .name = "the agent",
        .command = agent->command,
        .env = env,
        .stderr_label = "agent stderr",
        .stderr_tail = STDERR_TAIL,
        /* A grandchild may still hold stdout open: the group goes with its leader. */
        .exit_signal = SIGTERM,
        .wait_eof = 1,
        .on_out = on_stdout,
        .on_exit = on_exit_run,
        /* The session's project folder (session_setup.h); NULL: the bridge's own, as always. */
        .cwd = rl_bridge_session_cwd(agent->bridge, turn->session_id),
    };
    run_t *run = calloc(1, sizeof(*run));
    int in_fd;

    /* The text goes through a memory file: the child reads it at its pace and the loop never blocks. */
    in_fd = memfd_create("relay-message", MFD_CLOEXEC);
    config.stdin_fd = in_fd;
    config.user = run;
    if (run == NULL || in_fd < 0)
        goto fail;
    if (json_string_length(text) > 0 &&
        write(in_fd, json_string_value(text), json_string_length(text)) != (ssize_t)json_string_length(text))
        goto fail;
    lseek(in_fd, 0, SEEK_SET);
    run->child = rl_child_new(agent->bridge, &config);
    if (run->child == NULL)
        goto fail;
    /* The child owns the memory file now, started or not. */
    in_fd = -1;
    if (rl_child_start(run->child) != 0) {
        rl_child_free(run->child);
        free(run);
        rl_bridge_end(agent->bridge, turn, "error", NULL, "[the bridge could not start the agent]");
        return;
    }
    run->agent = agent;
    run->turn = turn;
    rl_turn_ref(turn);
    run->next = agent->runs;
    agent->runs = run;
    rl_log(RL_LOG_INFO, "interaction %s: started the agent (pid %d)", turn->interaction_id,
           (int)rl_child_pid(run->child));
    return;
fail:
    rl_log(RL_LOG_ERROR, "could not start the agent: %s", strerror(errno));
    free(run);
    if (in_fd >= 0)
        close(in_fd);
    rl_bridge_end(agent->bridge, turn, "error", NULL, "[the bridge could not start the agent]");
}

static void exec_cancel(rl_agent_t *agent, const char *session_id, const char *interaction_id)
{
    run_t *run;

    for (run = agent->runs; run != NULL; run = run->next) {
        if (strcmp(run->turn->session_id, session_id) != 0 ||
            (interaction_id[0] != '\0' && strcmp(run->turn->interaction_id, interaction_id) != 0))
            continue;
        if (rl_child_pid(run->child) > 0) {
            rl_log(RL_LOG_INFO, "interaction %s: cancelled, stopping pid %d", run->turn->interaction_id,
                   (int)rl_child_pid(run->child));
            run->cancelled = 1;
            rl_child_signal(run->child, SIGTERM);
        }
    }
}

static void exec_notify(rl_agent_t *agent, json_t *line)
{
    (void)agent;
    (void)line;
}

static void exec_destroy(rl_agent_t *agent)
{
    while (agent->runs != NULL)
        remove_run(agent, agent->runs);
    free(agent->command);
    free(agent);
}

const rl_agent_adapter_t rl_agent_exec = {
    .scheme = "exec",
    .create = exec_create,
    .message = exec_message,
    .cancel = exec_cancel,
    .notify = exec_notify,
    .destroy = exec_destroy,
};
