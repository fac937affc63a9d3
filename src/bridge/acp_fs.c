#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bridge/acp_fs.h"
#include "bridge/jsonrpc.h"

static int inside(const char *root, const char *resolved)
{
    size_t n = strlen(root);

    if (strcmp(root, "/") == 0)
        return 1;
    return strncmp(resolved, root, n) == 0 && (resolved[n] == '/' || resolved[n] == '\0');
}

/* A path with "." or ".." parts, or not absolute, is refused before anything is resolved. */
static int plain_absolute(const char *path)
{
    const char *p = path;

    if (path == NULL || path[0] != '/')
        return 0;
    while (*p != '\0') {
        const char *end;
        size_t n;
        while (*p == '/')
            p++;
        end = strchr(p, '/');
        n = end != NULL ? (size_t)(end - p) : strlen(p);
        if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return 0;
        p += n;
    }
    return 1;
}

int rl_acp_fs_resolve(const char *root, const char *path, int for_write, char *out, const char **why)
{
    char dir[PATH_MAX], parent[PATH_MAX];
    const char *slash;

    if (!plain_absolute(path) || strlen(path) >= PATH_MAX) {
        *why = "the path must be absolute, without . or .. parts";
        return RL_JSONRPC_INVALID_PARAMS;
    }
    if (realpath(path, out) != NULL) {
        if (!inside(root, out)) {
            *why = "the path is outside the session's working folder";
            return RL_JSONRPC_INVALID_PARAMS;
        }
        return 0;
    }
    if (errno != ENOENT) {
        *why = "the path cannot be resolved";
        return RL_JSONRPC_INTERNAL_ERROR;
    }
    if (!for_write) {
        *why = "no such file";
        return RL_JSONRPC_RESOURCE_NOT_FOUND;
    }
    slash = strrchr(path, '/');
    if (slash[1] == '\0') {
        *why = "the path names a folder";
        return RL_JSONRPC_INVALID_PARAMS;
    }
    snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
    if (realpath(dir[0] != '\0' ? dir : "/", parent) == NULL) {
        *why = "the file's folder does not exist";
        return RL_JSONRPC_RESOURCE_NOT_FOUND;
    }
    if (!inside(root, parent)) {
        *why = "the path is outside the session's working folder";
        return RL_JSONRPC_INVALID_PARAMS;
    }
    if (snprintf(out, PATH_MAX, "%s/%s", strcmp(parent, "/") == 0 ? "" : parent, slash + 1) >= PATH_MAX) {
        *why = "the path is too long";
        return RL_JSONRPC_INVALID_PARAMS;
    }
    return 0;
}

/* Lines [line, line + limit) of text (1-based; 0 or negative: from the start / to the end). NULL if not UTF-8. */
static json_t *slice_lines(const char *text, size_t len, json_int_t line, json_int_t limit)
{
    const char *start = text, *end = text + len;
    json_int_t n;

    for (n = 1; n < line && start < end; n++) {
        const char *nl = memchr(start, '\n', (size_t)(end - start));
        start = nl != NULL ? nl + 1 : end;
    }
    if (limit > 0) {
        const char *stop = start;
        for (n = 0; n < limit && stop < end; n++) {
            const char *nl = memchr(stop, '\n', (size_t)(end - stop));
            stop = nl != NULL ? nl + 1 : end;
        }
        end = stop;
    }
    return json_stringn(start, (size_t)(end - start));
}

int rl_acp_fs_read(const char *root, const char *path, json_int_t line, json_int_t limit, json_t **content,
                   const char **why)
{
    char resolved[PATH_MAX], *buf = NULL;
    struct stat st;
    ssize_t got = 0;
    int fd = -1, result = rl_acp_fs_resolve(root, path, 0, resolved, why);

    *content = NULL;
    if (result != 0)
        goto out;
    fd = open(resolved, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        result = RL_JSONRPC_RESOURCE_NOT_FOUND;
        *why = "not a readable file";
        goto out;
    }
    if (st.st_size > RL_ACP_FS_READ_MAX) {
        result = RL_JSONRPC_INVALID_PARAMS;
        *why = "the file is larger than 8 MiB";
        goto out;
    }
    buf = malloc((size_t)st.st_size + 1);
    if (buf == NULL) {
        result = RL_JSONRPC_INTERNAL_ERROR;
        *why = "out of memory";
        goto out;
    }
    while (got < st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)(st.st_size - got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += n;
    }
    *content = slice_lines(buf, (size_t)got, line, limit);
    if (*content == NULL) {
        result = RL_JSONRPC_INVALID_PARAMS;
        *why = "not a UTF-8 text file";
    }
out:
    if (fd >= 0)
        close(fd);
    free(buf);
    return result;
}

int rl_acp_fs_write(const char *root, const char *path, const char *text, size_t len, const char **why)
{
    char resolved[PATH_MAX];
    size_t done = 0;
    int fd = -1, result = rl_acp_fs_resolve(root, path, 1, resolved, why);

    if (result != 0)
        goto out;
    fd = open(resolved, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        result = RL_JSONRPC_INTERNAL_ERROR;
        *why = errno == ELOOP ? "the file is a symbolic link" : "the file cannot be opened for writing";
        goto out;
    }
    while (done < len) {
        ssize_t n = write(fd, text + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            result = RL_JSONRPC_INTERNAL_ERROR;
            *why = "the file could not be written whole";
            goto out;
        }
        done += (size_t)n;
    }
out:
    if (fd >= 0 && close(fd) != 0 && result == 0) {
        result = RL_JSONRPC_INTERNAL_ERROR;
        *why = "the file could not be written whole";
    }
    return result;
}
