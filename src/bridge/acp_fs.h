/*
 * The file methods relay-bridge serves an acp agent (ACP fs/read_text_file
 * and fs/write_text_file), confined to the session's working folder: a path
 * must be absolute, without "." or ".." parts, and lie inside the folder
 * once symbolic links are resolved (realpath), so a link cannot lead out.
 * Blocking file I/O on small text files, on the caller's thread. The
 * answers are JSON-RPC error codes (bridge/jsonrpc.h) with a reason for the
 * agent, so that the adapter only has to pass them on.
 */
#ifndef RL_BRIDGE_ACP_FS_H
#define RL_BRIDGE_ACP_FS_H

#include <jansson.h>
#include <stddef.h>

/* A file fs/read_text_file returns. */
#define RL_ACP_FS_READ_MAX (8L * 1024L * 1024L)

/*
 * Resolves path for reading (for_write 0: it must exist) or writing (a new
 * file is checked through its folder, which must exist) inside root, itself
 * a resolved absolute path. 0 with out (PATH_MAX bytes) filled, or
 * RL_JSONRPC_INVALID_PARAMS (not absolute, "." or "..", outside root),
 * RL_JSONRPC_RESOURCE_NOT_FOUND or RL_JSONRPC_INTERNAL_ERROR, with *why set
 * (static text).
 */
int rl_acp_fs_resolve(const char *root, const char *path, int for_write, char *out, const char **why);

/*
 * Reads path: lines [line, line + limit) (1-based; line <= 0 from the start,
 * limit <= 0 to the end) as a new JSON string in *content. A file larger
 * than RL_ACP_FS_READ_MAX, or not UTF-8, is refused. 0, or a JSON-RPC error
 * code with *why set.
 */
int rl_acp_fs_read(const char *root, const char *path, json_int_t line, json_int_t limit, json_t **content,
                   const char **why);

/*
 * Writes len bytes of text to path, creating the file (mode 0644 before the
 * umask) or replacing its contents; the last component is opened with
 * O_NOFOLLOW, so a link put there after the check is not followed. 0, or a
 * JSON-RPC error code with *why set.
 */
int rl_acp_fs_write(const char *root, const char *path, const char *text, size_t len, const char **why);

#endif
