#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "relay/datalock.h"

static int lock_path(const char *data, char *path, size_t pathsz)
{
    return (size_t)snprintf(path, pathsz, "%s/%s", data, RL_DATALOCK_FILE) < pathsz ? 0 : -1;
}

/* The pid the holder wrote, or 0 when the file does not say. */
static long holder_pid(int fd)
{
    char text[32];
    ssize_t n = pread(fd, text, sizeof(text) - 1, 0);

    if (n <= 0)
        return 0;
    text[n] = '\0';
    return strtol(text, NULL, 10);
}

int rl_datalock_take(const char *data, char *why, size_t whysz)
{
    char path[4096], pid[32];
    int fd, len;
    long holder;

    if (lock_path(data, path, sizeof(path)) != 0) {
        snprintf(why, whysz, "the data folder's path is too long");
        return -1;
    }
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(why, whysz, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK) {
            holder = holder_pid(fd);
            if (holder > 0)
                snprintf(why, whysz,
                         "another relayd (pid %ld) is running on the data folder %s; stop it first, or give this one a "
                         "data folder of its own (--data)",
                         holder, data);
            else
                snprintf(why, whysz,
                         "another relayd is running on the data folder %s; stop it first, or give this one a data "
                         "folder of its own (--data)",
                         data);
        } else {
            snprintf(why, whysz, "cannot lock %s: %s", path, strerror(errno));
        }
        close(fd);
        return -1;
    }
    /* Only for the message a second relayd prints: the lock itself is the flock. */
    len = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
        /* The lock holds all the same; a second relayd just cannot name us. */
    }
    return fd;
}

int rl_datalock_held(const char *data)
{
    char path[4096];
    int fd, held;

    if (lock_path(data, path, sizeof(path)) != 0)
        return -1;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    held = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd);
    return held;
}
