/*
 * The data folder's lock: one relayd per data folder. A second relayd on the
 * same folder (two units, a forgotten terminal) would share its keys and its
 * SQLite file with the first and answer for the same bridges, so it is
 * refused at start. One-shot commands (relayd token, login-link, backup,
 * migrate --check) do not take it: they run beside a relayd by design.
 */
#ifndef RL_RELAY_DATALOCK_H
#define RL_RELAY_DATALOCK_H

#include <stddef.h>

#define RL_DATALOCK_FILE "relayd.lock"

/*
 * Takes the lock of the data folder (an flock on DATA/relayd.lock, which
 * then holds this process's id). Returns the descriptor to keep open for
 * the life of the process (the kernel drops the lock when the process
 * ends, kill -9 included), or -1 with the reason in why: the folder is
 * held by another process (its pid named), or the file cannot be opened.
 */
int rl_datalock_take(const char *data, char *why, size_t whysz);
/* Whether a process holds the lock of the data folder now: 1, 0, or -1 (cannot tell). */
int rl_datalock_held(const char *data);

/*
 * The address the relay serves, as clients reach it (--public-url, else
 * http(s)://the address it listens on, the port it was given when it asked
 * for 0), written to DATA/relayd.url once it listens, so that the one-shot
 * commands beside it (relayd login-link) name the relay's real address
 * without being told it again.
 */
#define RL_DATAURL_FILE "relayd.url"
#define RL_DATAURL_MAX  512

/* Writes url (and a newline) to DATA/relayd.url, replacing it whole. 0, or -1 with errno. */
int rl_dataurl_write(const char *data, const char *url);
/* Reads DATA/relayd.url into url (at most urlsz - 1 bytes, no newline). 0, or -1 when absent, empty or too long. */
int rl_dataurl_read(const char *data, char *url, size_t urlsz);

#endif
