/*
 * Fuzz target: the project a phone names for a session (session.started's
 * session.project, or project_ct once opened: {id, path, worktree_branch};
 * docs/bridge.md "Several agents and projects"), through the checks
 * relay-bridge makes before anything runs (bridge/projects.c): the
 * worktree branch name and the folder it would make, and the folder
 * checked against a root. The input is that JSON object; a root with a
 * folder inside and a link leading out of it is made once in a temporary
 * folder. Besides the sanitizers it checks the rules: a branch taken is
 * one git takes (no "..", no part starting with ".", no leading "-"), its
 * worktree goes beside the project and nowhere else, and a folder taken
 * lies inside the root. Nothing is written and git is never run.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "bridge/projects.h"

static char root[PATH_MAX];

/* The root goes when the process ends: libFuzzer's merges and ctest's replays start many. */
static void remove_root(void)
{
    static const char *const parts[] = {"/out", "/app/src", "/app", ""};
    char path[PATH_MAX + 32];
    size_t i;

    for (i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
        snprintf(path, sizeof(path), "%s%s", root, parts[i]);
        if (unlink(path) != 0)
            rmdir(path);
    }
}

static void make_root(void)
{
    char path[PATH_MAX + 32], tmp[] = "/tmp/relay-fuzz-project.XXXXXX";

    if (mkdtemp(tmp) == NULL || realpath(tmp, root) == NULL)
        abort();
    atexit(remove_root);
    snprintf(path, sizeof(path), "%s/app", root);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/app/src", root);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/out", root);
    if (symlink("/", path) != 0)
        abort();
}

static void check_branch(const char *branch)
{
    static const char project[] = "/srv/code/app";
    static const char holder[] = "/srv/code/app.worktrees/";
    char dir[PATH_MAX];
    int valid = rl_projects_branch_valid(branch);
    int made = rl_projects_worktree_path(project, branch, dir);

    if (valid != (made == 0))
        __builtin_trap();
    if (!valid)
        return;
    if (branch[0] == '-' || strstr(branch, "..") != NULL || strlen(branch) > RL_PROJECT_BRANCH_MAX)
        __builtin_trap();
    /* One folder beside the project's own: no "/" past the holder, never "." or "..". */
    if (strncmp(dir, holder, sizeof(holder) - 1) != 0 || strchr(dir + sizeof(holder) - 1, '/') != NULL ||
        dir[sizeof(holder) - 1] == '.' || dir[sizeof(holder) - 1] == '\0')
        __builtin_trap();
}

static void check_folder(const char *path)
{
    const char *roots[1] = {root};
    const char *code = NULL;
    char out[PATH_MAX];
    size_t len = strlen(root);

    if (rl_projects_check_folder(roots, 1, path, out, &code) != 0) {
        if (code == NULL || (strcmp(code, "folder_outside_roots") != 0 && strcmp(code, "not_a_folder") != 0))
            __builtin_trap();
        return;
    }
    if (strncmp(out, root, len) != 0 || (out[len] != '/' && out[len] != '\0'))
        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *project = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    const char *path;
    char joined[PATH_MAX + 256];

    if (root[0] == '\0')
        make_root();
    if (!json_is_object(project)) {
        json_decref(project);
        return 0;
    }
    if (json_is_string(json_object_get(project, "worktree_branch")))
        check_branch(json_string_value(json_object_get(project, "worktree_branch")));
    path = json_string_value(json_object_get(project, "path"));
    if (path != NULL) {
        check_folder(path);
        /* The same path under the root, so that the checks past the first ones are reached. */
        snprintf(joined, sizeof(joined), "%s/%s", root, path);
        check_folder(joined);
    }
    json_decref(project);
    return 0;
}
