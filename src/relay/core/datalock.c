#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "relay/core/datalock.h"

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

int rl_dataurl_write(const char *data, const char *url)
{
    char path[4096], tmp[4200];
    int fd, result = -1;
    size_t len = strlen(url);

    if ((size_t)snprintf(path, sizeof(path), "%s/%s", data, RL_DATAURL_FILE) >= sizeof(path))
        return -1;
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    /* A reader sees the old address or the new one, never half of one. */
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    if (write(fd, url, len) == (ssize_t)len && write(fd, "\n", 1) == 1)
        result = 0;
    if (close(fd) != 0)
        result = -1;
    if (result == 0)
        result = rename(tmp, path);
    if (result != 0)
        unlink(tmp);
    return result;
}

int rl_dataurl_read(const char *data, char *url, size_t urlsz)
{
    char path[4096];
    ssize_t n;
    int fd;

    if ((size_t)snprintf(path, sizeof(path), "%s/%s", data, RL_DATAURL_FILE) >= sizeof(path) || urlsz < 2)
        return -1;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    n = read(fd, url, urlsz - 1);
    close(fd);
    if (n <= 0)
        return -1;
    /* Longer than the buffer: its line end did not come within it. */
    if ((size_t)n == urlsz - 1 && url[n - 1] != '\n')
        return -1;
    url[n] = '\0';
    while (n > 0 && (url[n - 1] == '\n' || url[n - 1] == '\r'))
        url[--n] = '\0';
    return n == 0 || strchr(url, '\n') != NULL ? -1 : 0;
}
