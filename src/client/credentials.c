#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/credentials.h"

static int folder(char *out, size_t outsz)
{
    const char *dir = getenv("RELAY_CONFIG_DIR"), *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    int n;

    if (dir != NULL && dir[0] != '\0')
        n = snprintf(out, outsz, "%s", dir);
    else if (xdg != NULL && xdg[0] != '\0')
        n = snprintf(out, outsz, "%s/relay", xdg);
    else if (home != NULL && home[0] != '\0')
        n = snprintf(out, outsz, "%s/.config/relay", home);
    else
        return -1;
    return n > 0 && (size_t)n < outsz ? 0 : -1;
}

int rl_credentials_path(const char *name, char *out, size_t outsz)
{
    char dir[3072];
    int n;

    if (folder(dir, sizeof(dir)) != 0)
        return -1;
    n = snprintf(out, outsz, "%s/%s.json", dir, name);
    return n > 0 && (size_t)n < outsz ? 0 : -1;
}

/* Creates the folder and its missing parents; the last level gets 0700. */
static int make_folder(const char *dir)
{
    char path[3072];
    size_t i;

    snprintf(path, sizeof(path), "%s", dir);
    for (i = 1; path[i] != '\0'; ++i) {
        if (path[i] != '/')
            continue;
        path[i] = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
            return -1;
        path[i] = '/';
    }
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
        return -1;
    return 0;
}

int rl_credentials_save(const char *name, const json_t *doc)
{
    char dir[3072], path[3200], tmp[3300];
    char *text = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
    size_t len;
    int fd, saved;

    if (text == NULL || folder(dir, sizeof(dir)) != 0 || make_folder(dir) != 0 ||
        rl_credentials_path(name, path, sizeof(path)) != 0) {
        free(text);
        return -1;
    }
    snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", path, (long)getpid());
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    len = strlen(text);
    if (fd < 0 || write(fd, text, len) != (ssize_t)len || write(fd, "\n", 1) != 1 || fsync(fd) != 0 || close(fd) != 0) {
        saved = errno;
        if (fd >= 0)
            close(fd);
        unlink(tmp);
        free(text);
        errno = saved;
        return -1;
    }
    free(text);
    if (rename(tmp, path) != 0) {
        saved = errno;
        unlink(tmp);
        errno = saved;
        return -1;
    }
    return 0;
}

json_t *rl_credentials_load(const char *name)
{
    char path[3200];
    struct stat st;
    json_t *doc;

    if (rl_credentials_path(name, path, sizeof(path)) != 0) {
        errno = ENOENT;
        return NULL;
    }
    if (stat(path, &st) != 0)
        return NULL;
    if ((st.st_mode & 077) != 0) {
        errno = EPERM;
        return NULL;
    }
    doc = json_load_file(path, JSON_REJECT_DUPLICATES, NULL);
    if (doc == NULL)
        errno = EINVAL;
    return doc;
}

int rl_credentials_remove(const char *name)
{
    char path[3200];

    if (rl_credentials_path(name, path, sizeof(path)) != 0)
        return -1;
    return unlink(path) == 0 || errno == ENOENT ? 0 : -1;
}
