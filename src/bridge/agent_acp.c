/*
 * The acp adapter: one agent process speaking the Agent Client Protocol
 * (JSON-RPC 2.0, one message per line, on its stdin and stdout; the
 * protocol is the public schema of agentclientprotocol/agent-client-protocol,
 * version 1). docs/bridge.md, "acp:COMMAND", says what is served and how it
 * maps; the vocabulary tables are in acp_map.c.
 *
 * One process serves every relay session: each gets its own ACP session,
 * created (session/new) or, after a restart, loaded (session/load) when its
 * first message arrives, and its prompts run one at a time. What the agent
 * reports becomes the same internal lines the jsonl adapter produces
 * (rl_bridge_agent_line), so tasks, approvals and the manifest take one path
 * to the relay; text goes through the loop's delta batching. The process
 * is one of child.h's: writes to the agent are queued and written as the
 * pipe takes them; its stdout is read line by line with a cap; its stderr
 * goes to the log a line at a time. When the process dies, every running
 * reply ends with an error, and it is started again after a back-off (1 s
 * doubling to 30 s).
 *
 * This file is the process and the adapter's entry points; the protocol's
 * parts are the acp_*.c files acp.h lists.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bridge/acp.h"
#include "common/log.h"
#include "rl_version.h"

static rl_child_t *new_child(struct rl_agent *a);

/* ---- the process ------------------------------------------------------------------------------ */

static void on_started(void *user)
{
    struct rl_agent *a = user;

    a->auth = AUTH_NONE;
    rl_log(RL_LOG_INFO, "started the acp agent (pid %d) in %s", (int)rl_child_pid(a->child), a->root);
    rl_acp__request(a, REQ_INITIALIZE, "initialize",
                    /*
                     * _meta.terminal_output: Claude Code's and Codex's adapters then send a command's output in
                     * their tool call updates' _meta as it runs (docs/bridge.md "Shell output").
                     */
                    json_pack("{s:i, s:{s:{s:b, s:b}, s:b, s:{s:b}}, s:{s:s, s:s, s:s}}", "protocolVersion",
                              ACP_PROTOCOL_VERSION, "clientCapabilities", "fs", "readTextFile", 1, "writeTextFile", 1,
                              "terminal", 0, "_meta", "terminal_output", 1, "clientInfo", "name", "relay-bridge",
                              "title", "Relay", "version", RL_VERSION),
                    NULL, NULL);
}

/* The process is gone: what it was doing ends with an error the user sees; what waits for it stays queued. */
static void agent_gone(struct rl_agent *a, const char *why)
{
    session_t *s;
    char head[300], text[FAILURE_TEXT_MAX], early[FAILURE_TEXT_MAX];
    int started;

    snprintf(head, sizeof(head), "[%s; relay-bridge restarts it: send the message again]", why);
    rl_acp__failure_text(a, head, text, sizeof(text));
    snprintf(head, sizeof(head), "[the agent could not start: %s; see relay-bridge's log]", why);
    rl_acp__failure_text(a, head, early, sizeof(early));
    rl_acp__tail_reset(a);
    started = a->initialized;
    a->initialized = 0;
    while (a->requests != NULL) {
        request_t *r = a->requests;
        a->requests = r->next;
        rl_acp__request_free(r);
    }
    while (a->permissions != NULL)
        rl_acp__permission_done(a, a->permissions);
    for (s = a->sessions; s != NULL; s = s->next) {
        prompt_t *p = rl_acp__running_prompt(s);
        s->state = SESSION_CLOSED;
        s->loading = 0;
        s->replaying = 0;
        if (p != NULL) {
            rl_acp__close_items(a, p, "failed", why);
            rl_acp__end_prompt(a, s, p, "error", NULL, text);
        }
        /* An agent that dies before it even answers initialize will most likely do so again: nobody waits for it. */
        if (!started)
            rl_acp__fail_queue(a, s, early);
    }
}

/* ---- the adapter ------------------------------------------------------------------------------ */

/*
 * A variable of the bridge's environment (the agent's too) that makes an agent
 * fail in a way it does not explain: Claude Code run as root refuses its
 * session unless IS_SANDBOX is exactly 1, while claude-agent-acp takes any
 * value as leave to skip permissions; the session then fails as "Internal
 * error" (docs/bridge.md "Claude Code").
 */
static void warn_environment(void)
{
    const char *sandbox = getenv("IS_SANDBOX");

    if (geteuid() == 0 && sandbox != NULL && strcmp(sandbox, "1") != 0)
        rl_log(RL_LOG_WARN,
               "IS_SANDBOX=%.16s in the environment of root: Claude Code then refuses to start a session "
               "(it accepts only IS_SANDBOX=1 as root): unset it or set it to 1",
               sandbox);
}

/* The terminal timer fired: the output it held back goes out. */
static void on_terminal_timer(void *user, int fd, short revents)
{
    uint64_t expirations;

    (void)revents;
    if (read(fd, &expirations, sizeof(expirations)) < 0 && errno != EAGAIN)
        rl_log(RL_LOG_WARN, "acp terminal timer: %s", strerror(errno));
    rl_acp__terminal_flush(user);
}

static int acp_create(rl_bridge_t *bridge, const char *name, const char *arg, rl_agent_t **out)
{
    struct rl_agent *a = calloc(1, sizeof(*a));
    const char *cwd = rl_bridge_cwd(bridge);

    if (a == NULL)
        return -1;
    a->bridge = bridge;
    a->terminal_timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (a->terminal_timer < 0) {
        rl_log(RL_LOG_ERROR, "timerfd_create: %s", strerror(errno));
        goto fail;
    }
    rl_bridge_watch(bridge, a->terminal_timer, POLLIN, on_terminal_timer, a);
    a->command = strdup(arg);
    snprintf(a->name, sizeof(a->name), "%s", name);
    /* The old form's one agent keeps the state file it always had; each other agent has its own. */
    if (strcmp(name, "default") == 0)
        snprintf(a->state_name, sizeof(a->state_name), "%s", STATE_NAME);
    else
        snprintf(a->state_name, sizeof(a->state_name), "%s-%s", STATE_NAME, name);
    if (realpath(cwd != NULL ? cwd : ".", a->root) == NULL) {
        rl_log(RL_LOG_ERROR, "--cwd %s: %s", cwd != NULL ? cwd : ".", strerror(errno));
        goto fail;
    }
    if (a->command == NULL)
        goto fail;
    a->child = new_child(a);
    if (a->child == NULL)
        goto fail;
    rl_acp__state_load(a);
    warn_environment();
    rl_child_start(a->child);
    *out = a;
    return 0;
fail:
    if (a->terminal_timer >= 0) {
        rl_bridge_unwatch(bridge, a->terminal_timer);
        close(a->terminal_timer);
    }
    free(a->command);
    free(a);
    return -1;
}

static void acp_message(rl_agent_t *a, rl_turn_t *turn, json_t *payload)
{
    session_t *s = rl_acp__session_get(a, turn->session_id);
    prompt_t *p = calloc(1, sizeof(*p)), **tail;
    json_t *resume =
        json_object_get(json_object_get(json_object_get(payload, "session"), "resume"), "agent_session_id");

    if (s == NULL || p == NULL) {
        free(p);
        rl_bridge_finish(a->bridge, turn, "error", NULL, "[out of memory]");
        return;
    }
    rl_turn_ref(turn);
    p->turn = turn;
    rl_buf_init(&p->thought, RL_ACP_THOUGHT_MAX + 4);
    p->message = json_incref(json_object_get(payload, "message"));
    /* spec (docs/api.md "Starting a session"): the session's first message carries the resume too. */
    if (json_is_string(resume) && s->acp_id == NULL && s->resume_id == NULL)
        s->resume_id = strdup(json_string_value(resume));
    /* Until its agent session opens, the folder follows the session's setup (session_setup.h), checked already. */
    if (s->state == SESSION_CLOSED && s->acp_id == NULL)
        rl_acp__session_root(a, s);
    /* spec (ACP prompt turn): one prompt at a time per session; the next waits for the answer. */
    for (tail = &s->queue; *tail != NULL; tail = &(*tail)->next)
        ;
    *tail = p;
    if (a->initialized)
        rl_acp__fetch_start(a, p);
    rl_acp__open_session(a, s);
    rl_acp__pump(a, s);
}

/*
 * A cancel names a turn, or none for all of them. Cancelling the running
 * turn also drops the messages queued behind it (docs/bridge.md "A message
 * sent while a turn runs"): each ends cancelled, and none reaches the agent.
 * A queued turn named alone goes alone.
 */
static void acp_cancel(rl_agent_t *a, const char *session_id, const char *interaction_id)
{
    session_t *s = rl_acp__session_by_relay(a, session_id);
    prompt_t *p, *next;
    permission_t *perm, *perm_next;
    int all = interaction_id[0] == '\0';

    if (s == NULL)
        return;
    for (p = s->queue; p != NULL; p = next) {
        next = p->next;
        if (!all && strcmp(p->turn->interaction_id, interaction_id) != 0)
            continue;
        if (p == rl_acp__running_prompt(s))
            all = 1;
        if (p == rl_acp__running_prompt(s)) {
            if (p->cancelled)
                continue;
            p->cancelled = 1;
            /* spec (ACP cancellation): pending permission requests are answered "cancelled". */
            for (perm = a->permissions; perm != NULL; perm = perm_next) {
                perm_next = perm->next;
                if (perm->prompt == p) {
                    rl_acp__answer_permission(a, perm, NULL);
                    rl_acp__permission_done(a, perm);
                }
            }
            rl_acp__send_msg(a, rl_jsonrpc_notification("session/cancel", json_pack("{s:s}", "sessionId", s->acp_id)));
        } else {
            rl_acp__end_prompt(a, s, p, "cancelled", NULL, NULL);
        }
    }
}

/* The process ended (what it started in its group, npx's node say, was killed with it); child.c restarts it. */
static void on_exited(void *user, int status)
{
    struct rl_agent *a = user;
    char why[128];

    if (WIFEXITED(status))
        snprintf(why, sizeof(why), "the agent exited with status %d", WEXITSTATUS(status));
    else
        snprintf(why, sizeof(why), "the agent was killed by signal %d", WTERMSIG(status));
    rl_log(RL_LOG_WARN, "%s", why);
    agent_gone(a, why);
}

static rl_child_t *new_child(struct rl_agent *a)
{
    rl_child_config_t config = {
        .name = "the acp agent",
        .command = a->command,
        .cwd = a->root,
        .stdin_fd = -1,
        .stdin_max = MAX_PENDING_OUT,
        .line_max = LINE_MAX_BYTES,
        .stderr_label = "acp agent stderr",
        .stderr_tail = STDERR_TAIL,
        .exit_signal = SIGKILL,
        .restart_first_ms = RESTART_FIRST_MS,
        .restart_cap_ms = RESTART_CAP_MS,
        .on_out = rl_acp__on_line,
        .on_start = on_started,
        .on_exit = on_exited,
        .user = a,
    };

    return rl_child_new(a->bridge, &config);
}

static void acp_destroy(rl_agent_t *a)
{
    session_t *s;

    rl_child_free(a->child);
    rl_bridge_unwatch(a->bridge, a->terminal_timer);
    close(a->terminal_timer);
    while (a->requests != NULL) {
        request_t *r = a->requests;
        a->requests = r->next;
        rl_acp__request_free(r);
    }
    /*
     * Turns still open are left as they are, as the other adapters leave them: their updates are not acked, so the
     * relay hands them to the next bridge.
     */
    while (a->sessions != NULL) {
        s = a->sessions;
        a->sessions = s->next;
        while (s->queue != NULL)
            rl_acp__prompt_free(a, s, s->queue);
        rl_acp__session_free(s);
    }
    /* No fetch is left: the bridge stops its jobs (each fetch is done then) before it destroys the agent. */
    json_decref(a->auth_methods);
    json_decref(a->agent_info);
    json_decref(a->commands);
    rl_strmap_free(a->known, free);
    free(a->mode);
    free(a->command);
    free(a);
}

/* What the manifest says this agent supports (docs/api.md): known once it answered initialize. */
static json_t *acp_supports(rl_agent_t *a)
{
    /* Modes and config options are per session in ACP: every acp agent's are shown as the session's state. */
    return json_pack("{s:b, s:b, s:b, s:b, s:b, s:b, s:b}", "modes", 1, "config", 1, "session_list", a->session_list,
                     "session_resume", a->session_resume, "session_load", a->load_session, "session_close",
                     a->session_close, "terminal_output", 0);
}

const rl_agent_adapter_t rl_agent_acp = {
    .scheme = "acp",
    .create = acp_create,
    .message = acp_message,
    .cancel = acp_cancel,
    .notify = rl_acp__notify,
    .destroy = acp_destroy,
    .supports = acp_supports,
};
