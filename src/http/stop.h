/*
 * Stopping a daemon on SIGTERM or SIGINT, reloading on SIGHUP: the handler
 * sets a flag and wakes the h2o loop through a self-pipe, and the daemon's
 * loop ends its turn and checks rl_stop_requested() and rl_reload_requested().
 * One per process; loop thread only, except the signal handler itself.
 */
#ifndef RL_HTTP_STOP_H
#define RL_HTTP_STOP_H

#include <h2o.h>

/* Installs the handlers and the wake-up pipe on loop. 0, or -1 with errno set. */
int rl_stop_install(h2o_loop_t *loop);
/* 1 once SIGTERM or SIGINT has arrived. */
int rl_stop_requested(void);
/* 1 once per SIGHUP received since the last call (several arriving together count once). */
int rl_reload_requested(void);
/* Closes the wake-up pipe; the handlers stay (a second signal only sets the flag again). */
void rl_stop_remove(void);

#endif
