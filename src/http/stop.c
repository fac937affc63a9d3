#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "http/stop.h"

static int wake_pipe[2] = {-1, -1};
static volatile sig_atomic_t requested, reload;
static h2o_socket_t *wake_sock;

static void on_signal(int signo)
{
    int saved = errno;
    char byte = (char)signo;

    if (signo == SIGHUP)
        reload = 1;
    else
        requested = 1;
    /* Async-signal-safe: a lost byte only means the loop is already awake. */
    if (wake_pipe[1] >= 0 && write(wake_pipe[1], &byte, 1) < 0) {
    }
    errno = saved;
}

static void on_wake(h2o_socket_t *sock, const char *err)
{
    /* The daemon's loop condition does the work; this only ends the loop's wait. */
    h2o_buffer_consume(&sock->input, sock->input->size);
}

int rl_stop_install(h2o_loop_t *loop)
{
    struct sigaction sa;

    if (pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
        return -1;
    wake_sock = h2o_evloop_socket_create(loop, wake_pipe[0], 0);
    h2o_socket_read_start(wake_sock, on_wake);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    return 0;
}

int rl_stop_requested(void)
{
    return requested;
}

int rl_reload_requested(void)
{
    if (!reload)
        return 0;
    reload = 0;
    return 1;
}

void rl_stop_remove(void)
{
    int write_end = wake_pipe[1];

    if (wake_sock != NULL) {
        h2o_socket_read_stop(wake_sock);
        h2o_socket_close(wake_sock); /* closes wake_pipe[0] */
        wake_sock = NULL;
    }
    wake_pipe[1] = -1;
    if (write_end >= 0)
        close(write_end);
}
