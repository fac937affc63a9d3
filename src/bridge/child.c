/* The bridge's child processes (child.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bridge/agent.h"
#include "bridge/child.h"
#include "bridge/jsonl_reader.h"
#include "common/buf.h"
#include "common/log.h"

/* Reads of a pipe at the child's end: bounded, since another process of its group may still write. */
#define DRAIN_READS 256

struct rl_child {
    struct rl_child *next; /* in the list of live children */
    rl_bridge_t *bridge;
    rl_child_config_t config; /* its strings point into the copies below */
    char *command, *cwd;
    char **env;
    pid_t pid;
    int in_fd, out_fd, err_fd;
    int timer_fd;
    int exited, status; /* reaped, waiting for its pipes to end (wait_eof) */
    int in_callback, freed;
    long restart_delay_ms;
    rl_buf_t pending; /* bytes for its stdin not written yet */
    rl_jsonl_reader_t reader;
    char err_line[RL_CHILD_STDERR_LINE + 1];
    size_t err_len;
    int err_skipping;
    int err_escape; /* inside a terminal escape sequence: 1 after ESC, 2 inside CSI */
    char *err_tail; /* its last whole stderr lines, each ending \n; stderr_tail + 1 bytes */
    size_t tail_len;
};

static rl_child_t *children; /* started and not yet reaped */

static void list_remove(rl_child_t *child)
{
    rl_child_t **p;

    for (p = &children; *p != NULL; p = &(*p)->next) {
        if (*p == child) {
            *p = child->next;
            return;
        }
    }
}

static void close_fd(rl_child_t *child, int *fd)
{
    if (*fd >= 0) {
        rl_bridge_unwatch(child->bridge, *fd);
        close(*fd);
        *fd = -1;
    }
}

/* ---- stdin ------------------------------------------------------------------------------------- */

static void flush_in(rl_child_t *child);

static void on_stdin(void *user, int fd, short revents)
{
    (void)fd;
    (void)revents;
    flush_in(user);
}

static void flush_in(rl_child_t *child)
{
    int written;

    if (child->in_fd < 0)
        return;
    written = rl_buf_write(&child->pending, child->in_fd);
    if (written == RL_BUF_AGAIN) {
        rl_bridge_watch(child->bridge, child->in_fd, POLLOUT, on_stdin, child);
        return;
    }
    if (written != 0) {
        rl_log(RL_LOG_WARN, "writing to %s: %s", child->config.name, strerror(errno));
        rl_buf_reset(&child->pending);
    }
    rl_bridge_unwatch(child->bridge, child->in_fd);
}

int rl_child_send(rl_child_t *child, const char *bytes, size_t len)
{
    int result;

    if (child->in_fd < 0)
        return RL_CHILD_E_CLOSED;
    result = rl_buf_append(&child->pending, bytes, len);
    if (result == RL_BUF_E_TOO_LARGE)
        return RL_CHILD_E_FULL;
    if (result == 0)
        flush_in(child);
    return result == 0 ? 0 : RL_CHILD_E_FULL;
}

/* ---- stdout ------------------------------------------------------------------------------------ */

static void finish_if_done(rl_child_t *child);

static void on_out_line(void *user, const char *line, size_t len)
{
    rl_child_t *child = user;

    child->config.on_out(child->config.user, line, len);
}

/* One read of stdout: 1 when bytes came, 0 at the end (the pipe is then closed), -1 when none yet. */
static int read_stdout(rl_child_t *child)
{
    char buf[65536];
    ssize_t n = read(child->out_fd, buf, sizeof(buf));

    if (n > 0) {
        if (child->config.line_max == 0)
            child->config.on_out(child->config.user, buf, (size_t)n);
        else if (rl_jsonl_reader_feed(&child->reader, buf, (size_t)n, on_out_line, child) != 0)
            rl_log(RL_LOG_WARN, "%s: a line longer than %zu bytes dropped", child->config.name, child->config.line_max);
        return 1;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return -1;
    close_fd(child, &child->out_fd);
    return 0;
}

static void on_stdout(void *user, int fd, short revents)
{
    rl_child_t *child = user;

    (void)fd;
    (void)revents;
    if (read_stdout(child) == 0)
        finish_if_done(child);
}

/* ---- stderr ------------------------------------------------------------------------------------ */

/* Appends a line to the tail, dropping its oldest whole lines to make room. */
static void tail_add(rl_child_t *child, const char *line, size_t len)
{
    size_t cap = child->config.stderr_tail, drop;

    if (len + 1 > cap)
        return;
    if (child->tail_len + len + 1 > cap) {
        const char *nl;
        drop = child->tail_len + len + 1 - cap;
        nl = memchr(child->err_tail + drop - 1, '\n', child->tail_len - drop + 1);
        drop = nl != NULL ? (size_t)(nl - child->err_tail) + 1 : child->tail_len;
        memmove(child->err_tail, child->err_tail + drop, child->tail_len - drop);
        child->tail_len -= drop;
    }
    memcpy(child->err_tail + child->tail_len, line, len);
    child->tail_len += len;
    child->err_tail[child->tail_len++] = '\n';
    child->err_tail[child->tail_len] = '\0';
}

static void err_flush(rl_child_t *child)
{
    child->err_line[child->err_len] = '\0';
    if (child->err_len > 0) {
        rl_log(RL_LOG_INFO, "%s: %s", child->config.stderr_label, child->err_line);
        tail_add(child, child->err_line, child->err_len);
    }
    child->err_len = 0;
}

/*
 * Agents colour their stderr for a terminal (Codex does even into a pipe):
 * the log gets the text without the escape sequences. 1 when c belongs to
 * one.
 */
static int skip_escape(rl_child_t *child, unsigned char c)
{
    if (child->err_escape == 0 && c != 0x1b)
        return 0;
    if (child->err_escape == 0)
        child->err_escape = 1;
    else if (child->err_escape == 1)
        child->err_escape = c == '[' ? 2 : 0;
    else if (c >= 0x40 && c <= 0x7e)
        child->err_escape = 0; /* a CSI sequence ends with its final byte */
    return 1;
}

/* Like read_stdout: each line goes to the log, its first RL_CHILD_STDERR_LINE bytes. */
static int read_stderr(rl_child_t *child)
{
    char buf[4096];
    ssize_t n = read(child->err_fd, buf, sizeof(buf)), i;

    if (n <= 0) {
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return -1;
        err_flush(child);
        close_fd(child, &child->err_fd);
        return 0;
    }
    for (i = 0; i < n; i++) {
        if (buf[i] == '\n') {
            if (!child->err_skipping)
                err_flush(child);
            child->err_skipping = 0;
            child->err_len = 0;
        } else if (child->err_skipping || skip_escape(child, (unsigned char)buf[i])) {
            continue;
        } else if (child->err_len == RL_CHILD_STDERR_LINE) {
            /* The log gets the start of a long line; the rest up to its newline is dropped. */
            err_flush(child);
            child->err_skipping = 1;
        } else {
            /* Other control characters would garble the log or the terminal showing it. */
            child->err_line[child->err_len++] = (unsigned char)buf[i] < 0x20 || buf[i] == 0x7f ? ' ' : buf[i];
        }
    }
    return 1;
}

static void on_stderr(void *user, int fd, short revents)
{
    rl_child_t *child = user;

    (void)fd;
    (void)revents;
    if (read_stderr(child) == 0)
        finish_if_done(child);
}

const char *rl_child_stderr_tail(rl_child_t *child)
{
    int i;

    /* What it wrote just before answering may still be in the pipe. */
    for (i = 0; i < DRAIN_READS && child->err_fd >= 0 && read_stderr(child) > 0; i++)
        ;
    return child->err_tail != NULL ? child->err_tail : "";
}

void rl_child_stderr_forget(rl_child_t *child)
{
    child->tail_len = 0;
    if (child->err_tail != NULL)
        child->err_tail[0] = '\0';
}

/* ---- start, restart, end ----------------------------------------------------------------------- */

static void on_restart_timer(void *user, int fd, short revents)
{
    rl_child_t *child = user;
    uint64_t expirations;

    (void)revents;
    if (read(fd, &expirations, sizeof(expirations)) < 0 && errno == EAGAIN)
        return;
    rl_bridge_unwatch(child->bridge, fd);
    rl_child_start(child);
}

static void schedule_restart(rl_child_t *child)
{
    long delay = child->restart_delay_ms;
    struct itimerspec when = {{0, 0}, {delay / 1000, (delay % 1000) * 1000000L}};

    if (child->config.restart_first_ms <= 0 || child->timer_fd < 0)
        return;
    rl_log(RL_LOG_WARN, "restarting %s in %ld ms", child->config.name, delay);
    timerfd_settime(child->timer_fd, 0, &when, NULL);
    rl_bridge_watch(child->bridge, child->timer_fd, POLLIN, on_restart_timer, child);
    child->restart_delay_ms = delay * 2 > child->config.restart_cap_ms ? child->config.restart_cap_ms : delay * 2;
}

void rl_child_backoff_reset(rl_child_t *child)
{
    child->restart_delay_ms = child->config.restart_first_ms;
}

static void close_pair(int fds[2])
{
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

/* In the child, after fork: never returns. */
static void exec_child(rl_child_t *child, int in, int out, int err)
{
    char **e;

    setpgid(0, 0);
    rl_bridge_child_signals();
    dup2(in, 0);
    dup2(out, 1);
    if (err >= 0)
        dup2(err, 2);
    for (e = child->env; e != NULL && e[0] != NULL; e += 2)
        setenv(e[0], e[1], 1);
    if (child->cwd != NULL && chdir(child->cwd) != 0)
        _exit(126);
    execl("/bin/sh", "sh", "-c", child->command, (char *)NULL);
    _exit(127);
}

int rl_child_start(rl_child_t *child)
{
    int in_pipe[2] = {-1, -1}, out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
    int in = child->config.stdin_fd;

    if (in < 0 && pipe2(in_pipe, O_CLOEXEC) != 0)
        goto fail;
    if (pipe2(out_pipe, O_CLOEXEC) != 0 || (!child->config.stderr_inherit && pipe2(err_pipe, O_CLOEXEC) != 0))
        goto fail;
    child->pid = fork();
    if (child->pid < 0)
        goto fail;
    if (child->pid == 0)
        exec_child(child, in >= 0 ? in : in_pipe[0], out_pipe[1], err_pipe[1]);
    setpgid(child->pid, child->pid);
    if (in >= 0) {
        close(in);
        child->config.stdin_fd = -1;
    }
    if (in_pipe[0] >= 0)
        close(in_pipe[0]);
    close(out_pipe[1]);
    if (err_pipe[1] >= 0)
        close(err_pipe[1]);
    child->in_fd = in_pipe[1];
    child->out_fd = out_pipe[0];
    child->err_fd = err_pipe[0];
    child->exited = 0;
    child->next = children;
    children = child;
    if (child->in_fd >= 0)
        fcntl(child->in_fd, F_SETFL, O_NONBLOCK);
    fcntl(child->out_fd, F_SETFL, O_NONBLOCK);
    rl_buf_reset(&child->pending);
    if (child->config.line_max > 0) {
        rl_jsonl_reader_free(&child->reader);
        rl_jsonl_reader_init(&child->reader, child->config.line_max);
    }
    child->err_len = 0;
    child->err_skipping = 0;
    child->err_escape = 0;
    rl_child_stderr_forget(child);
    rl_bridge_watch(child->bridge, child->out_fd, POLLIN, on_stdout, child);
    if (child->err_fd >= 0) {
        fcntl(child->err_fd, F_SETFL, O_NONBLOCK);
        rl_bridge_watch(child->bridge, child->err_fd, POLLIN, on_stderr, child);
    }
    if (child->config.on_start != NULL)
        child->config.on_start(child->config.user);
    return 0;
fail:
    rl_log(RL_LOG_ERROR, "cannot start %s: %s", child->config.name, strerror(errno));
    close_pair(in_pipe);
    close_pair(out_pipe);
    close_pair(err_pipe);
    child->pid = -1;
    schedule_restart(child);
    return -1;
}

static void free_now(rl_child_t *child)
{
    char **e;

    close_fd(child, &child->in_fd);
    close_fd(child, &child->out_fd);
    close_fd(child, &child->err_fd);
    if (child->timer_fd >= 0) {
        rl_bridge_unwatch(child->bridge, child->timer_fd);
        close(child->timer_fd);
    }
    if (child->config.stdin_fd >= 0)
        close(child->config.stdin_fd);
    for (e = child->env; e != NULL && e[0] != NULL; e++)
        free(*e);
    free(child->env);
    rl_jsonl_reader_free(&child->reader);
    rl_buf_free(&child->pending);
    free(child->err_tail);
    free(child->command);
    free(child->cwd);
    free(child);
}

/* Reaped, and (wait_eof) its pipes ended, or (not) read as far as they go and closed: on_exit. */
static void finish_if_done(rl_child_t *child)
{
    int i, restart = child->config.restart_first_ms > 0;

    if (!child->exited)
        return;
    if (child->config.wait_eof && (child->out_fd >= 0 || child->err_fd >= 0))
        return;
    /*
     * What a dead child wrote last is still in its pipes when its exit is reported: its last messages, and on
     * stderr most often why it died.
     */
    for (i = 0; i < DRAIN_READS && child->out_fd >= 0 && read_stdout(child) > 0; i++)
        ;
    for (i = 0; i < DRAIN_READS && child->err_fd >= 0 && read_stderr(child) > 0; i++)
        ;
    if (child->err_fd >= 0)
        err_flush(child);
    close_fd(child, &child->in_fd);
    close_fd(child, &child->out_fd);
    close_fd(child, &child->err_fd);
    rl_buf_reset(&child->pending);
    child->exited = 0;
    child->in_callback = 1;
    if (child->config.on_exit != NULL)
        child->config.on_exit(child->config.user, child->status);
    child->in_callback = 0;
    if (child->freed) {
        free_now(child);
        return;
    }
    if (restart)
        schedule_restart(child);
}

static void exited(rl_child_t *child, int status)
{
    list_remove(child);
    /* What it started in its group (npx starts node, say) goes with it. */
    if (child->config.exit_signal != 0)
        kill(-child->pid, child->config.exit_signal);
    child->pid = -1;
    child->exited = 1;
    child->status = status;
    finish_if_done(child);
}

void rl_child_reap(void)
{
    pid_t pid;
    int status;

    for (pid = waitpid(-1, &status, WNOHANG); pid > 0; pid = waitpid(-1, &status, WNOHANG)) {
        rl_child_t *child;
        for (child = children; child != NULL && child->pid != pid; child = child->next)
            ;
        if (child != NULL)
            exited(child, status);
    }
}

rl_child_t *rl_child_new(rl_bridge_t *bridge, const rl_child_config_t *config)
{
    rl_child_t *child = calloc(1, sizeof(*child));
    size_t n = 0, i;

    if (child == NULL)
        return NULL;
    child->bridge = bridge;
    child->config = *config;
    child->pid = -1;
    child->in_fd = child->out_fd = child->err_fd = child->timer_fd = -1;
    child->restart_delay_ms = config->restart_first_ms;
    rl_buf_init(&child->pending, config->stdin_max);
    rl_jsonl_reader_init(&child->reader, config->line_max > 0 ? config->line_max : 1);
    child->command = strdup(config->command);
    child->cwd = config->cwd != NULL ? strdup(config->cwd) : NULL;
    while (config->env != NULL && config->env[n] != NULL)
        n++;
    child->env = calloc(n + 1, sizeof(char *));
    for (i = 0; child->env != NULL && i < n; i++)
        child->env[i] = strdup(config->env[i]);
    if (config->stderr_tail > 0)
        child->err_tail = calloc(1, config->stderr_tail + 1);
    if (config->restart_first_ms > 0)
        child->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (child->command == NULL || (config->cwd != NULL && child->cwd == NULL) || child->env == NULL ||
        (config->stderr_tail > 0 && child->err_tail == NULL) || (config->restart_first_ms > 0 && child->timer_fd < 0)) {
        child->config.stdin_fd = -1; /* still the caller's */
        free_now(child);
        return NULL;
    }
    for (i = 0; i < n; i++) {
        if (child->env[i] == NULL) {
            child->config.stdin_fd = -1;
            free_now(child);
            return NULL;
        }
    }
    child->config.name = config->name != NULL ? config->name : "the agent";
    child->config.stderr_label = config->stderr_label != NULL ? config->stderr_label : "agent stderr";
    return child;
}

int rl_child_signal(rl_child_t *child, int signo)
{
    if (child->pid <= 0)
        return -1;
    return kill(-child->pid, signo);
}

pid_t rl_child_pid(const rl_child_t *child)
{
    return child->pid;
}

void rl_child_free(rl_child_t *child)
{
    int status, waited;

    if (child == NULL)
        return;
    if (child->pid > 0) {
        list_remove(child);
        kill(-child->pid, SIGTERM);
        for (waited = 0; waitpid(child->pid, &status, WNOHANG) == 0; waited += 10) {
            if (waited >= RL_CHILD_KILL_GRACE_MS) {
                rl_log(RL_LOG_WARN, "%s did not stop on SIGTERM: killed", child->config.name);
                kill(-child->pid, SIGKILL);
                waitpid(child->pid, &status, 0);
                break;
            }
            usleep(10000);
        }
        child->pid = -1;
    }
    if (child->in_callback) {
        child->freed = 1;
        return;
    }
    free_now(child);
}
