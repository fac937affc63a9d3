/*
 * The bridge's child processes (docs/internals/relay-bridge.md): every agent
 * kind that runs a program (exec:, jsonl:, acp:) starts it here and adds
 * only its protocol. A child is COMMAND run by /bin/sh -c in a process group
 * of its own, with its signals unblocked; its stdin is a queue the loop
 * writes as the pipe takes it (capped), or a descriptor the caller gives;
 * its stdout comes to the caller in lines (capped) or in chunks; its stderr
 * goes to the log a line at a time (terminal escapes dropped, each line cut
 * at RL_CHILD_STDERR_LINE bytes) and its last whole lines are kept for the
 * user's error text, or is inherited. When it ends, rl_child_reap (the
 * loop's SIGCHLD) reaps it, signals what is left of its group, reads what
 * its pipes still hold, closes them and calls on_exit; a child with a
 * restart back-off is then started again after it (first_ms doubling to
 * cap_ms, back to first_ms at rl_child_backoff_reset) by a timerfd the loop
 * polls. rl_child_free stops it: SIGTERM to its group, then SIGKILL when it
 * has not ended within RL_CHILD_KILL_GRACE_MS.
 *
 * Loop thread only. The module keeps the live children in one list of the
 * process (waitpid is the process's), so rl_child_reap finds each by pid.
 */
#ifndef RL_BRIDGE_CHILD_H
#define RL_BRIDGE_CHILD_H

#include <stddef.h>
#include <sys/types.h>

typedef struct rl_bridge rl_bridge_t;
typedef struct rl_child rl_child_t;

/* One line of stderr in the log; the rest of a longer line is cut. */
#define RL_CHILD_STDERR_LINE 1024
/* How long a child has to end on SIGTERM at rl_child_free before SIGKILL. */
#define RL_CHILD_KILL_GRACE_MS 2000

enum rl_child_error {
    RL_CHILD_E_CLOSED = -1, /* no stdin to write to (not running, or given a descriptor): dropped */
    RL_CHILD_E_FULL = -2    /* the queue for stdin would pass its cap: the child does not read */
};

typedef struct rl_child_config {
    const char *name;    /* for the log: "the acp agent" */
    const char *command; /* run by /bin/sh -c (copied) */
    const char *cwd;     /* the child's folder (copied; a chdir that fails exits 126), or NULL */
    /* NAME, value pairs set in the child's environment, then NULL; or NULL. Copied. */
    const char *const *env;
    int stdin_fd;       /* >= 0: the child's stdin (the module closes it once started); -1: a queue */
    size_t stdin_max;   /* the queue's cap */
    size_t line_max;    /* > 0: stdout comes in lines of at most this many bytes (longer ones dropped); 0: chunks */
    int stderr_inherit; /* 1: the child writes to the bridge's own stderr; 0: lines to the log */
    const char *stderr_label; /* the log lines' prefix: "acp agent stderr" */
    size_t stderr_tail;       /* bytes of last whole lines kept (0: none) */
    int exit_signal;          /* sent to what is left of the group when the child ends; 0: none */
    /* 1: on_exit waits for stdout and stderr to end; 0: what they hold is read (bounded) and they are closed. */
    int wait_eof;
    long restart_first_ms, restart_cap_ms; /* 0: never started again */
    /* A line or a chunk of stdout. */
    void (*on_out)(void *user, const char *bytes, size_t len);
    /* Started (at rl_child_start and at each restart). May send. */
    void (*on_start)(void *user);
    /* Ended (status as from waitpid), pipes closed; the tail is still there. May call rl_child_free. */
    void (*on_exit)(void *user, int status);
    void *user;
} rl_child_config_t;

/*
 * A child not yet started, polled through bridge's watches. NULL when out of
 * memory or the timerfd cannot be made.
 */
rl_child_t *rl_child_new(rl_bridge_t *bridge, const rl_child_config_t *config);
/*
 * Starts it: 0, or -1 with the reason logged (pipes, fork); a child with a
 * restart back-off is then tried again after it. on_start is called before
 * 0 is returned.
 */
int rl_child_start(rl_child_t *child);
/* Stops it (see above: no on_exit then) and frees it. NULL is a no-op. */
void rl_child_free(rl_child_t *child);
/* Queues bytes for its stdin, whole or not at all: 0, RL_CHILD_E_CLOSED or RL_CHILD_E_FULL. */
int rl_child_send(rl_child_t *child, const char *bytes, size_t len);
/* Signals its process group (SIGTERM on a cancel): 0, or -1 when it is not running. */
int rl_child_signal(rl_child_t *child, int signo);
/* Its pid, or -1 when it is not running. */
pid_t rl_child_pid(const rl_child_t *child);
/* Its last whole stderr lines, each ending with "\n", after reading what the pipe holds (bounded); "" when none. */
const char *rl_child_stderr_tail(rl_child_t *child);
/* Forgets them: they explain no later failure. */
void rl_child_stderr_forget(rl_child_t *child);
/* The next restart waits restart_first_ms again (the child did useful work). */
void rl_child_backoff_reset(rl_child_t *child);
/*
 * Reaps every child of the process that ended (waitpid(-1)), and hands each
 * of ours to its rl_child_t. On SIGCHLD.
 */
void rl_child_reap(void);

#endif
