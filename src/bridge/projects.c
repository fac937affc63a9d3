/* The folders sessions may run in (projects.h, docs/bridge.md "Projects"). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sodium.h>

extern char **environ;

#include "bridge/projects.h"
#include "client/credentials.h"
#include "common/base64.h"
#include "common/log.h"
#include "common/rand.h"

#define STATE_NAME  "bridge-projects"
#define SECRET_SIZE 32

struct rl_projects {
    char roots[RL_PROJECTS_ROOTS_MAX][PATH_MAX];
    const char *root_ptrs[RL_PROJECTS_ROOTS_MAX];
    size_t nroots;
    unsigned char secret[SECRET_SIZE];
    json_t *folders; /* {realpath: {agents_used: [name]}}: the folders used before */
};

/* ---- checks ------------------------------------------------------------------------------------- */

/* 1 when path has a "." or ".." part: refused before anything is resolved, so that no walk leads out. */
static int has_dot_part(const char *path)
{
    const char *part = path;

    while (*part != '\0') {
        size_t len = strcspn(part, "/");
        if ((len == 1 && part[0] == '.') || (len == 2 && part[0] == '.' && part[1] == '.'))
            return 1;
        part += len;
        part += strspn(part, "/");
    }
    return 0;
}

static int under_root(const char *real, const char *root)
{
    size_t len = strlen(root);

    if (strcmp(root, "/") == 0)
        return 1;
    return strncmp(real, root, len) == 0 && (real[len] == '/' || real[len] == '\0');
}

int rl_projects_check_folder(const char *const *roots, size_t nroots, const char *path, char out[PATH_MAX],
                             const char **code)
{
    struct stat st;
    size_t i;

    *code = "folder_outside_roots";
    if (path == NULL || path[0] != '/' || has_dot_part(path))
        return -1;
    if (realpath(path, out) == NULL) {
        *code = "not_a_folder";
        return -1;
    }
    for (i = 0; i < nroots; i++)
        if (under_root(out, roots[i]))
            break;
    if (i == nroots)
        return -1;
    if (stat(out, &st) != 0 || !S_ISDIR(st.st_mode)) {
        *code = "not_a_folder";
        return -1;
    }
    return 0;
}

int rl_projects_check(const rl_projects_t *p, const char *path, char out[PATH_MAX], const char **code)
{
    return rl_projects_check_folder(p->root_ptrs, p->nroots, path, out, code);
}

/*
 * git-check-ref-format(1) with --branch: no part starting with "." or ending
 * ".lock", no "..", no control byte, space, ~ ^ : ? * [ or backslash, no "@{",
 * not "@", no leading, trailing or doubled "/", no trailing "."; and ours: no
 * leading "-" (it would read as an option to git).
 */
int rl_projects_branch_valid(const char *branch)
{
    size_t len, i;
    const char *part;

    if (branch == NULL)
        return 0;
    len = strlen(branch);
    if (len == 0 || len > RL_PROJECT_BRANCH_MAX || branch[0] == '-' || branch[0] == '/' || branch[len - 1] == '/' ||
        branch[len - 1] == '.' || strcmp(branch, "@") == 0 || strstr(branch, "..") != NULL ||
        strstr(branch, "//") != NULL || strstr(branch, "@{") != NULL)
        return 0;
    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)branch[i];
        if (c < 0x20 || c == 0x7f || strchr(" ~^:?*[\\", c) != NULL)
            return 0;
    }
    for (part = branch; *part != '\0';) {
        size_t n = strcspn(part, "/");
        if (part[0] == '.' || (n >= 5 && memcmp(part + n - 5, ".lock", 5) == 0))
            return 0;
        part += n;
        part += strspn(part, "/");
    }
    return 1;
}

int rl_projects_worktree_path(const char *project, const char *branch, char out[PATH_MAX])
{
    const char *slash = strrchr(project, '/');
    char flat[RL_PROJECT_BRANCH_MAX + 1];
    size_t i;
    int n;

    if (!rl_projects_branch_valid(branch) || slash == NULL || slash[1] == '\0')
        return -1;
    for (i = 0; branch[i] != '\0'; i++)
        flat[i] = branch[i] == '/' ? '-' : branch[i];
    flat[i] = '\0';
    n = snprintf(out, PATH_MAX, "%.*s/%s.worktrees/%s", (int)(slash - project), project, slash + 1, flat);
    return n > 0 && n < PATH_MAX ? 0 : -1;
}

/* ---- git ---------------------------------------------------------------------------------------- */

/* The first line of path into out (outsz), its newline dropped: 0, or -1. */
static int read_line(const char *path, char *out, size_t outsz)
{
    FILE *f = fopen(path, "r");
    int result = -1;

    if (f == NULL)
        return -1;
    if (fgets(out, (int)outsz, f) != NULL) {
        out[strcspn(out, "\r\n")] = '\0';
        result = 0;
    }
    fclose(f);
    return result;
}

void rl_projects_git_branch(const char *folder, char *out, size_t outsz)
{
    char path[PATH_MAX + 16], line[PATH_MAX + 16], head[512];
    struct stat st;

    out[0] = '\0';
    snprintf(path, sizeof(path), "%s/.git", folder);
    if (lstat(path, &st) != 0)
        return;
    if (S_ISREG(st.st_mode)) {
        /* A worktree: ".git" is a file "gitdir: PATH" naming the folder that holds its HEAD. */
        if (read_line(path, line, sizeof(line)) != 0 || strncmp(line, "gitdir: ", 8) != 0)
            return;
        if (line[8] == '/')
            snprintf(path, sizeof(path), "%s/HEAD", line + 8);
        else
            snprintf(path, sizeof(path), "%s/%s/HEAD", folder, line + 8);
    } else {
        snprintf(path, sizeof(path), "%s/.git/HEAD", folder);
    }
    if (read_line(path, head, sizeof(head)) != 0)
        return;
    if (strncmp(head, "ref: refs/heads/", 16) == 0)
        snprintf(out, outsz, "%s", head + 16);
    else if (strspn(head, "0123456789abcdef") >= 12)
        snprintf(out, outsz, "%.12s", head);
}

/*
 * Runs git with argv (never a shell), its output discarded: its exit status, -2 when a stop ended it (or came
 * first), or -1 when it did not run. posix_spawn, not fork: it runs on a job's thread, beside the loop's.
 * *child is the handshake with rl_projects_worktree_stop on the loop's thread: git's pid while it runs, 0 when
 * none does, -1 once a stop has come. Whichever of the two comes second ends git, so that a stop landing
 * between the spawn and the pid's publication is not lost; git is reaped only after the pid is withdrawn, so
 * a stop never signals a pid the system has given to another process.
 */
static int run_git(char *const argv[], int *child)
{
    posix_spawn_file_actions_t files;
    posix_spawnattr_t attr;
    sigset_t none;
    siginfo_t info;
    pid_t pid;
    int status, spawned, expected = 0;

    if (__atomic_load_n(child, __ATOMIC_SEQ_CST) < 0)
        return -2;
    if (posix_spawn_file_actions_init(&files) != 0)
        return -1;
    if (posix_spawnattr_init(&attr) != 0) {
        posix_spawn_file_actions_destroy(&files);
        return -1;
    }
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    posix_spawn_file_actions_addopen(&files, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&files, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&files, 1, 2);
    spawned = posix_spawnp(&pid, argv[0], &files, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&files);
    posix_spawnattr_destroy(&attr);
    if (spawned != 0)
        return -1;
    if (!__atomic_compare_exchange_n(child, &expected, (int)pid, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        kill(pid, SIGTERM); /* the stop came while git was being started */
    /* Wait without reaping, withdraw the pid, then reap. */
    while (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT) < 0)
        if (errno != EINTR)
            break;
    expected = (int)pid;
    __atomic_compare_exchange_n(child, &expected, 0, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    if (__atomic_load_n(child, __ATOMIC_SEQ_CST) < 0)
        return -2;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
}

void rl_projects_worktree_stop(int *child)
{
    int pid = __atomic_exchange_n(child, -1, __ATOMIC_SEQ_CST);

    if (pid > 0)
        kill((pid_t)pid, SIGTERM);
}

int rl_projects_worktree_git(const char *project, const char *branch, const char *dir, int *child)
{
    char *with_new[] = {"git", "-C", (char *)project, "worktree", "add", "-b", (char *)branch, (char *)dir, NULL};
    char *with_old[] = {"git", "-C", (char *)project, "worktree", "add", (char *)dir, (char *)branch, NULL};

    int first = run_git(with_new, child);

    /* A new branch first; a branch that exists already is checked out as it is. A git ended by a stop is not
     * followed by another. */
    if (first == 0)
        return 0;
    return first != -2 && run_git(with_old, child) == 0 ? 0 : -1;
}

int rl_projects_worktree_plan(rl_projects_t *p, const char *project, const char *branch, char dir[PATH_MAX],
                              char out[PATH_MAX], const char **code)
{
    char holder[PATH_MAX], real[PATH_MAX];
    struct stat st;
    int result = -1;

    *code = "worktree_name_invalid";
    if (rl_projects_worktree_path(project, branch, dir) != 0)
        goto out;
    snprintf(holder, sizeof(holder), "%s", dir);
    *strrchr(holder, '/') = '\0';
    *code = "worktree_failed";
    if (mkdir(holder, 0755) != 0 && errno != EEXIST)
        goto out;
    /* The worktrees' folder must itself lie inside a root (a root that is the repository has no room beside it). */
    if (rl_projects_check(p, holder, real, code) != 0) {
        /* Something other than a folder stands where the worktrees go: git could not make one there. */
        if (strcmp(*code, "not_a_folder") == 0)
            *code = "worktree_failed";
        goto out;
    }
    if (lstat(dir, &st) != 0) {
        result = 1;
        goto out;
    }
    result = rl_projects_check(p, dir, out, code);
    if (result != 0 && strcmp(*code, "not_a_folder") == 0)
        *code = "worktree_failed";
out:
    return result;
}

/* ---- the list ----------------------------------------------------------------------------------- */

void rl_projects_id_of(const rl_projects_t *p, const char *folder, char out[RL_PROJECT_ID_SIZE])
{
    unsigned char mac[crypto_auth_hmacsha256_BYTES];
    char text[RL_BASE64URL_ENCODED_SIZE(16)];

    crypto_auth_hmacsha256(mac, (const unsigned char *)folder, strlen(folder), p->secret);
    rl_base64url_encode(mac, 16, text);
    snprintf(out, RL_PROJECT_ID_SIZE, "p_%.22s", text);
}

static void save(rl_projects_t *p)
{
    char secret[RL_BASE64_ENCODED_SIZE(SECRET_SIZE)];
    json_t *doc;

    rl_base64_encode(p->secret, SECRET_SIZE, secret);
    doc = json_pack("{s:s, s:O}", "secret", secret, "folders", p->folders);
    sodium_memzero(secret, sizeof(secret));
    if (doc == NULL || rl_credentials_save(STATE_NAME, doc) != 0)
        rl_log(RL_LOG_WARN, "could not save %s.json: project ids change at the next start", STATE_NAME);
    json_decref(doc);
}

rl_projects_t *rl_projects_open(const char *const *roots, size_t nroots, char *err, size_t errsz)
{
    rl_projects_t *p = calloc(1, sizeof(*p));
    json_t *doc = NULL;
    const char *secret;
    unsigned char raw[SECRET_SIZE + 3];
    struct stat st;
    size_t i;

    if (p == NULL || sodium_init() < 0) {
        snprintf(err, errsz, "out of memory");
        free(p);
        return NULL;
    }
    if (nroots > RL_PROJECTS_ROOTS_MAX) {
        snprintf(err, errsz, "at most %d --root folders", RL_PROJECTS_ROOTS_MAX);
        goto fail;
    }
    for (i = 0; i < nroots; i++) {
        if (realpath(roots[i], p->roots[i]) == NULL || stat(p->roots[i], &st) != 0 || !S_ISDIR(st.st_mode)) {
            snprintf(err, errsz, "--root %s: not a folder", roots[i]);
            goto fail;
        }
        p->root_ptrs[i] = p->roots[i];
    }
    p->nroots = nroots;
    doc = rl_credentials_load(STATE_NAME);
    if (doc == NULL && errno == EPERM) {
        snprintf(err, errsz, "%s.json may be read by others: fix its mode (chmod 600)", STATE_NAME);
        goto fail;
    }
    secret = json_string_value(json_object_get(doc, "secret"));
    if (secret != NULL && strlen(secret) == RL_BASE64_ENCODED_SIZE(SECRET_SIZE) - 1 &&
        rl_base64_decode(secret, strlen(secret), raw) == SECRET_SIZE) {
        memcpy(p->secret, raw, SECRET_SIZE);
        p->folders = json_is_object(json_object_get(doc, "folders")) ? json_incref(json_object_get(doc, "folders"))
                                                                     : json_object();
    } else {
        rl_rand_bytes(p->secret, SECRET_SIZE);
        p->folders = json_object();
        save(p);
    }
    sodium_memzero(raw, sizeof(raw));
    json_decref(doc);
    return p;
fail:
    json_decref(doc);
    free(p);
    return NULL;
}

void rl_projects_free(rl_projects_t *p)
{
    if (p == NULL)
        return;
    sodium_memzero(p->secret, sizeof(p->secret));
    json_decref(p->folders);
    free(p);
}

size_t rl_projects_nroots(const rl_projects_t *p)
{
    return p->nroots;
}

static int is_repository(const char *folder)
{
    char path[PATH_MAX + 8];
    struct stat st;

    snprintf(path, sizeof(path), "%s/.git", folder);
    return lstat(path, &st) == 0 && (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode));
}

/* Adds the repositories at and below folder (depth levels down) to found ({path: true}); links are not followed. */
static void scan(const char *folder, int depth, json_t *found)
{
    DIR *dir;
    struct dirent *e;
    char child[PATH_MAX];
    struct stat st;

    if (json_object_size(found) >= RL_PROJECTS_MAX)
        return;
    if (is_repository(folder)) {
        json_object_set_new(found, folder, json_true());
        return;
    }
    if (depth >= RL_PROJECTS_DEPTH)
        return;
    dir = opendir(folder);
    if (dir == NULL)
        return;
    for (e = readdir(dir); e != NULL && json_object_size(found) < RL_PROJECTS_MAX; e = readdir(dir)) {
        if (e->d_name[0] == '.' || snprintf(child, sizeof(child), "%s/%s", strcmp(folder, "/") == 0 ? "" : folder,
                                            e->d_name) >= (int)sizeof(child))
            continue;
        if (lstat(child, &st) == 0 && S_ISDIR(st.st_mode))
            scan(child, depth + 1, found);
    }
    closedir(dir);
}

static int by_path(const void *a, const void *b)
{
    return strcmp(json_string_value(json_object_get(*(json_t *const *)a, "path")),
                  json_string_value(json_object_get(*(json_t *const *)b, "path")));
}

json_t *rl_projects_list(rl_projects_t *p)
{
    json_t *found = json_object(), *list = json_array(), *item, *rows[RL_PROJECTS_MAX];
    const char *path, *code;
    char real[PATH_MAX], id[RL_PROJECT_ID_SIZE], branch[256];
    size_t i, n = 0;

    if (found == NULL || list == NULL)
        goto out;
    /* The folders used before first, so that the cap never hides one of them. */
    json_object_foreach(p->folders, path, item)
    {
        if (json_object_size(found) < RL_PROJECTS_MAX && rl_projects_check(p, path, real, &code) == 0)
            json_object_set_new(found, real, json_true());
    }
    for (i = 0; i < p->nroots; i++)
        scan(p->roots[i], 0, found);
    json_object_foreach(found, path, item)
    {
        json_t *used = json_object_get(json_object_get(p->folders, path), "agents_used");
        const char *name = strrchr(path, '/');
        rl_projects_id_of(p, path, id);
        rl_projects_git_branch(path, branch, sizeof(branch));
        rows[n] = json_pack("{s:s, s:s, s:s, s:s, s:o}", "id", id, "name",
                            name != NULL && name[1] != '\0' ? name + 1 : path, "path", path, "branch", branch,
                            "agents_used", json_is_array(used) ? json_incref(used) : json_array());
        if (rows[n] != NULL)
            n++;
    }
    qsort(rows, n, sizeof(rows[0]), by_path);
    for (i = 0; i < n; i++)
        json_array_append_new(list, rows[i]);
out:
    json_decref(found);
    return list;
}

int rl_projects_find(rl_projects_t *p, const char *id, char out[PATH_MAX], const char **code)
{
    json_t *list = rl_projects_list(p), *item;
    size_t i;
    int result = -1;

    *code = "unknown_project";
    json_array_foreach(list, i, item)
    {
        if (id != NULL && strcmp(json_string_value(json_object_get(item, "id")), id) == 0) {
            result = rl_projects_check(p, json_string_value(json_object_get(item, "path")), out, code);
            break;
        }
    }
    json_decref(list);
    return result;
}

void rl_projects_used(rl_projects_t *p, const char *folder, const char *agent)
{
    json_t *entry = json_object_get(p->folders, folder), *used, *item;
    size_t i;

    if (entry == NULL) {
        if (json_object_size(p->folders) >= RL_PROJECTS_MAX)
            return;
        entry = json_pack("{s:[]}", "agents_used");
        if (entry == NULL || json_object_set_new(p->folders, folder, entry) != 0)
            return;
    }
    used = json_object_get(entry, "agents_used");
    if (!json_is_array(used)) {
        used = json_array();
        json_object_set_new(entry, "agents_used", used);
    }
    json_array_foreach(used, i, item)
    {
        if (strcmp(json_string_value(item), agent) == 0)
            return;
    }
    json_array_append_new(used, json_string(agent));
    save(p);
}
