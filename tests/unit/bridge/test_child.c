/*
 * The bridge's child processes (bridge/child.c) with real ones (/bin/sh):
 * start with pipes, the environment and the folder; stdin from the queue or
 * a given descriptor; stdout in lines or chunks; stderr to the log and its
 * tail; reaping; the restart back-off; the stop at rl_child_free. The loop's
 * watches are a small poll loop here.
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "bridge/agent.h"
#include "bridge/child.h"
#include "common/clock.h"

/* ---- the loop's watches ------------------------------------------------------------------------- */

#define WATCHES 16

static struct {
    int fd;
    short events;
    rl_bridge_fd_cb cb;
    void *user;
} watches[WATCHES];
static int nwatches;

void rl_bridge_watch(rl_bridge_t *bridge, int fd, short events, rl_bridge_fd_cb cb, void *user)
{
    int i;

    (void)bridge;
    for (i = 0; i < nwatches && watches[i].fd != fd; i++)
        ;
    assert_true(i < WATCHES);
    watches[i].fd = fd;
    watches[i].events = events;
    watches[i].cb = cb;
    watches[i].user = user;
    if (i == nwatches)
        nwatches++;
}

void rl_bridge_unwatch(rl_bridge_t *bridge, int fd)
{
    int i;

    (void)bridge;
    for (i = 0; i < nwatches; i++) {
        if (watches[i].fd == fd) {
            watches[i] = watches[--nwatches];
            return;
        }
    }
}

void rl_bridge_child_signals(void)
{
}

/* One turn of the loop: the watches that are ready, then the reaping SIGCHLD would bring. */
static void turn(int timeout_ms)
{
    struct pollfd fds[WATCHES];
    int i, n = nwatches;

    for (i = 0; i < n; i++)
        fds[i] = (struct pollfd){.fd = watches[i].fd, .events = watches[i].events};
    poll(fds, (nfds_t)n, timeout_ms);
    for (i = 0; i < n; i++) {
        int k;
        if (fds[i].revents == 0)
            continue;
        for (k = 0; k < nwatches && watches[k].fd != fds[i].fd; k++)
            ;
        if (k < nwatches)
            watches[k].cb(watches[k].user, fds[i].fd, fds[i].revents);
    }
    rl_child_reap();
}

/* ---- what a child reports ------------------------------------------------------------------------ */

typedef struct seen {
    char out[4096];
    size_t outlen;
    int lines, starts, exits, status;
    long started_at[8], exited_at[8];
    rl_child_t *child;
} seen_t;

static void on_out(void *user, const char *bytes, size_t len)
{
    seen_t *seen = user;

    assert_true(seen->outlen + len + 1 < sizeof(seen->out));
    memcpy(seen->out + seen->outlen, bytes, len);
    seen->outlen += len;
    seen->out[seen->outlen++] = '|';
    seen->out[seen->outlen] = '\0';
    seen->lines++;
}

static void on_start(void *user)
{
    seen_t *seen = user;

    if (seen->starts < 8)
        seen->started_at[seen->starts] = rl_clock_mono_ms();
    seen->starts++;
}

static void on_exit_child(void *user, int status)
{
    seen_t *seen = user;

    if (seen->exits < 8)
        seen->exited_at[seen->exits] = rl_clock_mono_ms();
    seen->exits++;
    seen->status = status;
}

/* Turns the loop until cond holds (or 5 s pass: then the test fails). */
#define UNTIL(cond)                                                                                                    \
    do {                                                                                                               \
        long deadline_ = rl_clock_mono_ms() + 5000;                                                                    \
        while (!(cond)) {                                                                                              \
            assert_true(rl_clock_mono_ms() < deadline_);                                                               \
            turn(20);                                                                                                  \
        }                                                                                                              \
    } while (0)

static rl_child_config_t config_for(seen_t *seen, const char *command)
{
    rl_child_config_t config = {
        .name = "the test child",
        .command = command,
        .stdin_fd = -1,
        .stdin_max = 1024,
        .line_max = 256,
        .stderr_label = "test stderr",
        .stderr_tail = 64,
        .on_out = on_out,
        .on_start = on_start,
        .on_exit = on_exit_child,
        .user = seen,
    };

    return config;
}

/* ---- the tests ----------------------------------------------------------------------------------- */

static void test_start_with_pipes_environment_and_folder(void **state)
{
    seen_t seen = {0};
    const char *env[] = {"RL_CHILD_TEST", "okapi", NULL};
    rl_child_config_t config = config_for(&seen, "read line; echo \"got $line\"; echo \"$RL_CHILD_TEST\"; pwd");
    rl_child_t *child;

    (void)state;
    config.env = env;
    config.cwd = "/";
    child = rl_child_new(NULL, &config);
    assert_non_null(child);
    assert_int_equal(rl_child_pid(child), -1);
    assert_int_equal(rl_child_send(child, "x", 1), RL_CHILD_E_CLOSED);
    assert_int_equal(rl_child_start(child), 0);
    assert_int_equal(seen.starts, 1);
    assert_true(rl_child_pid(child) > 0);
    /* The queue's cap: a write passing it is refused whole. */
    assert_int_equal(rl_child_send(child, "hello\n", 6), 0);
    {
        char big[1100];
        memset(big, 'a', sizeof(big));
        assert_int_equal(rl_child_send(child, big, sizeof(big)), RL_CHILD_E_FULL);
    }
    UNTIL(seen.exits == 1);
    assert_string_equal(seen.out, "got hello|okapi|/|");
    assert_true(WIFEXITED(seen.status) && WEXITSTATUS(seen.status) == 0);
    assert_int_equal(rl_child_pid(child), -1);
    /* Without a back-off it is not started again. */
    turn(100);
    assert_int_equal(seen.starts, 1);
    rl_child_free(child);
    assert_int_equal(nwatches, 0);
}

static void test_a_given_stdin_and_chunks_of_stdout(void **state)
{
    seen_t seen = {0};
    rl_child_config_t config = config_for(&seen, "cat; exit 4");
    int fd = memfd_create("test", MFD_CLOEXEC);
    rl_child_t *child;

    (void)state;
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "no newline", 10), 10);
    lseek(fd, 0, SEEK_SET);
    config.stdin_fd = fd;
    config.line_max = 0;
    config.wait_eof = 1;
    child = rl_child_new(NULL, &config);
    assert_int_equal(rl_child_start(child), 0);
    /* The child has its stdin: nothing is queued for it. */
    assert_int_equal(rl_child_send(child, "x", 1), RL_CHILD_E_CLOSED);
    UNTIL(seen.exits == 1);
    assert_string_equal(seen.out, "no newline|");
    assert_int_equal(WEXITSTATUS(seen.status), 4);
    rl_child_free(child);
}

static char *read_all(FILE *file)
{
    static char text[8192];
    size_t n;

    fflush(file);
    rewind(file);
    n = fread(text, 1, sizeof(text) - 1, file);
    text[n] = '\0';
    return text;
}

static void test_stderr_goes_to_the_log_and_its_tail(void **state)
{
    seen_t seen = {0};
    rl_child_config_t config = config_for(&seen, "echo first >&2; printf '\\033[31mred\\033[0m and\\tmore\\n' >&2; "
                                                 "printf 'a%.0s' $(seq 1 1100) >&2; echo >&2; echo last >&2; exit 3");
    FILE *log = tmpfile();
    int saved = dup(2);
    rl_child_t *child;
    char *text;

    (void)state;
    child = rl_child_new(NULL, &config);
    dup2(fileno(log), 2);
    assert_int_equal(rl_child_start(child), 0);
    UNTIL(seen.exits == 1);
    dup2(saved, 2);
    close(saved);
    text = read_all(log);
    /* Each line in the log, without its colours or control characters, a long one cut. */
    assert_non_null(strstr(text, "test stderr: first"));
    assert_non_null(strstr(text, "test stderr: red and more"));
    assert_non_null(strstr(text, "test stderr: last"));
    assert_null(strstr(text, "\033"));
    assert_non_null(strstr(text, "test stderr: aaaa"));
    assert_int_equal(strspn(strstr(text, "test stderr: aaaa") + strlen("test stderr: "), "a"), RL_CHILD_STDERR_LINE);
    /* The tail (64 bytes) holds whole lines: the long one did not fit and took nothing out. */
    assert_string_equal(rl_child_stderr_tail(child), "first\nred and more\nlast\n");
    assert_int_equal(WEXITSTATUS(seen.status), 3);
    rl_child_stderr_forget(child);
    assert_string_equal(rl_child_stderr_tail(child), "");
    rl_child_free(child);
    fclose(log);
}

static void test_an_ended_child_is_reaped_with_its_group(void **state)
{
    seen_t seen = {0};
    rl_child_config_t config = config_for(&seen, "sleep 30 & echo $!; exit 0");
    rl_child_t *child;
    pid_t pid, grandchild;

    (void)state;
    config.exit_signal = SIGTERM;
    config.wait_eof = 1;
    child = rl_child_new(NULL, &config);
    assert_int_equal(rl_child_start(child), 0);
    pid = rl_child_pid(child);
    /* The sleep holds stdout open: the end comes once the group is signalled (SIGTERM) and it dies. */
    UNTIL(seen.exits == 1);
    grandchild = (pid_t)atoi(seen.out);
    assert_true(grandchild > 0);
    assert_int_equal(waitpid(pid, NULL, WNOHANG), -1);
    assert_int_equal(errno, ECHILD);
    rl_child_free(child);
}

/* The restart delays the log announced ("restarting the test child in N ms"), in order: how many. */
static int announced_delays(const char *text, long *delays, int max)
{
    const char *at = text;
    int n = 0;

    while (n < max && (at = strstr(at, "restarting the test child in ")) != NULL) {
        at += strlen("restarting the test child in ");
        delays[n++] = strtol(at, NULL, 10);
    }
    return n;
}

static void test_a_dying_child_restarts_after_a_doubling_back_off(void **state)
{
    seen_t seen = {0};
    rl_child_config_t config = config_for(&seen, "exit 1");
    rl_child_t *child;
    FILE *log = tmpfile();
    int saved = dup(2), i;
    long delays[8];

    (void)state;
    config.restart_first_ms = 100;
    config.restart_cap_ms = 250;
    child = rl_child_new(NULL, &config);
    dup2(fileno(log), 2);
    assert_int_equal(rl_child_start(child), 0);
    UNTIL(seen.starts == 4);
    /* Useful work: the wait after the next end is the first again (the one after this end is set already). */
    UNTIL(seen.exits == 4);
    rl_child_backoff_reset(child);
    UNTIL(seen.starts == 6);
    rl_child_free(child);
    dup2(saved, 2);
    close(saved);
    /* The schedule, exactly: 100 ms doubling to the 250 ms cap (doubled again: 400), then 100 after the reset. */
    assert_int_equal(announced_delays(read_all(log), delays, 8), 5);
    assert_int_equal(delays[0], 100);
    assert_int_equal(delays[1], 200);
    assert_int_equal(delays[2], 250);
    assert_int_equal(delays[3], 250);
    assert_int_equal(delays[4], 100);
    /*
     * Each wait, from the end the loop saw to the next start: never shorter than announced. A loaded
     * machine (a sanitised build beside other suites) makes the loop late by any amount, so the only
     * bound above is that the restart came at all.
     */
    for (i = 0; i < 5; i++) {
        long gap = seen.started_at[i + 1] - seen.exited_at[i];
        assert_true(gap >= delays[i]);
        assert_true(gap < delays[i] + 10000);
    }
    fclose(log);
    assert_int_equal(nwatches, 0);
}

static void test_free_stops_a_running_child(void **state)
{
    seen_t seen = {0};
    rl_child_config_t ignoring = config_for(&seen, "trap '' TERM; echo ready; while :; do sleep 1; done");
    rl_child_config_t plain = config_for(&seen, "sleep 30");
    rl_child_t *child;
    pid_t pid;
    long started;

    (void)state;
    child = rl_child_new(NULL, &plain);
    assert_int_equal(rl_child_start(child), 0);
    pid = rl_child_pid(child);
    started = rl_clock_mono_ms();
    rl_child_free(child);
    assert_true(rl_clock_mono_ms() - started < 1000);
    assert_int_equal(kill(pid, 0), -1);
    /* No on_exit for a child stopped so. */
    assert_int_equal(seen.exits, 0);

    /* One that ignores SIGTERM is killed after the grace. */
    child = rl_child_new(NULL, &ignoring);
    assert_int_equal(rl_child_start(child), 0);
    pid = rl_child_pid(child);
    UNTIL(seen.lines == 1);
    started = rl_clock_mono_ms();
    rl_child_free(child);
    assert_true(rl_clock_mono_ms() - started >= RL_CHILD_KILL_GRACE_MS);
    assert_int_equal(kill(pid, 0), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_start_with_pipes_environment_and_folder),
        cmocka_unit_test(test_a_given_stdin_and_chunks_of_stdout),
        cmocka_unit_test(test_stderr_goes_to_the_log_and_its_tail),
        cmocka_unit_test(test_an_ended_child_is_reaped_with_its_group),
        cmocka_unit_test(test_a_dying_child_restarts_after_a_doubling_back_off),
        cmocka_unit_test(test_free_stops_a_running_child),
    };

    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
