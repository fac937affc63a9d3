/*
 * The folders a session may run in (docs/bridge.md "Projects"): git
 * repositories found under the --root folders, plus folders used before
 * (kept in the config folder, bridge-projects.json). A project is named to
 * the relay by an opaque id only: p_ + base64url of the first 16 bytes of
 * HMAC-SHA256(a random secret of this bridge, the folder's realpath).
 *
 * Every folder a session is given is checked here: resolved (realpath), it
 * must be a directory inside one of the roots; a path with a ".." part, a
 * relative path, or a link leading out is refused. Worktrees are made with
 * git run from an argv (execvp, never a shell), after the branch name is
 * checked. Loop thread; the git run blocks it (a worktree add is a checkout).
 */
#ifndef RL_BRIDGE_PROJECTS_H
#define RL_BRIDGE_PROJECTS_H

#include <limits.h>
#include <stddef.h>

#include <jansson.h>

/* Projects listed at most, and the depth of the scan under each root (the root itself is depth 0). */
#define RL_PROJECTS_MAX       200
#define RL_PROJECTS_DEPTH     2
#define RL_PROJECTS_ROOTS_MAX 16
/* "p_" + 22 base64url characters and the NUL (and room the compiler can count). */
#define RL_PROJECT_ID_SIZE 28
/* A worktree branch name (the wire: 1-100). */
#define RL_PROJECT_BRANCH_MAX 100

typedef struct rl_projects rl_projects_t;

/*
 * Resolves each root (it must be a directory) and loads the state file (its
 * secret made on the first run). NULL with err set.
 */
rl_projects_t *rl_projects_open(const char *const *roots, size_t nroots, char *err, size_t errsz);
void rl_projects_free(rl_projects_t *p);
size_t rl_projects_nroots(const rl_projects_t *p);

/* [{id, name, path, branch, agents_used}]: the repositories under the roots and the folders used before. */
json_t *rl_projects_list(rl_projects_t *p);

/* The folder of project id (as rl_projects_list names it), checked: 0, or -1 with *code (unknown_project...). */
int rl_projects_find(rl_projects_t *p, const char *id, char out[PATH_MAX], const char **code);

/* The id of a resolved folder. */
void rl_projects_id_of(const rl_projects_t *p, const char *folder, char out[RL_PROJECT_ID_SIZE]);

/*
 * A session of agent ran in folder: remembered (and saved) as a project with
 * that agent among its agents_used. Up to RL_PROJECTS_MAX folders.
 */
void rl_projects_used(rl_projects_t *p, const char *folder, const char *agent);

/*
 * Checks path against the resolved roots: absolute, no "." or ".." part,
 * resolved inside a root, a directory. 0 with the resolved path in out, or
 * -1 with *code "folder_outside_roots" or "not_a_folder".
 */
int rl_projects_check_folder(const char *const *roots, size_t nroots, const char *path, char out[PATH_MAX],
                             const char **code);
int rl_projects_check(const rl_projects_t *p, const char *path, char out[PATH_MAX], const char **code);

/*
 * 1 when branch is a name git check-ref-format --branch takes and has no
 * "/..", no control byte, no leading "-", at most RL_PROJECT_BRANCH_MAX bytes.
 */
int rl_projects_branch_valid(const char *branch);

/*
 * Where the worktree of branch for project (a resolved folder) goes:
 * <parent>/<name>.worktrees/<branch with each "/" as "-">. 0, or -1 when the
 * branch is not valid or the path too long.
 */
int rl_projects_worktree_path(const char *project, const char *branch, char out[PATH_MAX]);

/*
 * The worktree of branch for project (a resolved folder), in two steps so
 * that the loop never waits for git. rl_projects_worktree_plan (loop): 0
 * when the worktree exists already, with its resolved path in out (checked
 * against the roots); 1 when git must make it first, at dir (the folder
 * that holds it is made and checked); -1 with *code "worktree_name_invalid",
 * "worktree_failed" or "folder_outside_roots". rl_projects_worktree_git
 * (blocking: a job's thread) then runs git worktree add from an argv, never
 * a shell: a new branch, or the branch as it is when it exists. 0, or -1;
 * the plan, asked again, says what came of it. *child starts at 0 and is
 * shared with rl_projects_worktree_stop (any thread), which ends the git
 * running or about to run: no git is started after it.
 */
int rl_projects_worktree_plan(rl_projects_t *p, const char *project, const char *branch, char dir[PATH_MAX],
                              char out[PATH_MAX], const char **code);
int rl_projects_worktree_git(const char *project, const char *branch, const char *dir, int *child);
void rl_projects_worktree_stop(int *child);

/*
 * The branch checked out in folder, read from its .git/HEAD (or the HEAD a
 * .git file points to, in a worktree): the branch name, the first 12 hex
 * digits of a detached HEAD, or "" when it is not a repository.
 */
void rl_projects_git_branch(const char *folder, char *out, size_t outsz);

#endif
