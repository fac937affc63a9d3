/* The folders sessions may run in: checks against the roots, branch names, worktrees (bridge/projects.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "bridge/agent.h"
#include "bridge/bridge.h"
#include "bridge/projects.h"

typedef struct place {
    char top[PATH_MAX];  /* a temporary folder: the config folder, root, and what lies outside root */
    char root[PATH_MAX]; /* the root, resolved */
} place_t;

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* A folder under the place (made with its parents' names given in order). */
static void folder(const place_t *p, const char *rel)
{
    char path[PATH_MAX * 2];

    snprintf(path, sizeof(path), "%s/%s", p->top, rel);
    assert_int_equal(mkdir(path, 0700), 0);
}

/* A repository as the scan knows one: a .git folder with a HEAD. */
static void repository(const place_t *p, const char *rel, const char *head)
{
    char path[PATH_MAX * 2];

    snprintf(path, sizeof(path), "%s/%s/.git", p->top, rel);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof(path), "%s/%s/.git/HEAD", p->top, rel);
    put(path, head);
}

static int setup(void **state)
{
    place_t *p = calloc(1, sizeof(*p));
    char path[PATH_MAX * 2];

    snprintf(p->top, sizeof(p->top), "/tmp/rl-projects-XXXXXX");
    assert_non_null(mkdtemp(p->top));
    folder(p, "config");
    snprintf(path, sizeof(path), "%s/config", p->top);
    setenv("RELAY_CONFIG_DIR", path, 1);
    folder(p, "root");
    folder(p, "outside");
    snprintf(path, sizeof(path), "%s/root", p->top);
    assert_non_null(realpath(path, p->root));
    *state = p;
    return 0;
}

static int teardown(void **state)
{
    place_t *p = *state;
    char command[PATH_MAX + 16];

    snprintf(command, sizeof(command), "rm -rf '%s'", p->top);
    assert_int_equal(system(command), 0);
    free(p);
    return 0;
}

static const char *check(const place_t *p, const char *rel, char out[PATH_MAX])
{
    const char *roots[] = {p->root};
    char path[PATH_MAX * 2];
    const char *code = NULL;

    snprintf(path, sizeof(path), "%s/%s", p->top, rel);
    return rl_projects_check_folder(roots, 1, path, out, &code) == 0 ? "ok" : code;
}

static void test_a_folder_under_the_root_is_taken_resolved(void **state)
{
    place_t *p = *state;
    char out[PATH_MAX], want[PATH_MAX * 2];

    folder(p, "root/app");
    assert_string_equal(check(p, "root/app", out), "ok");
    snprintf(want, sizeof(want), "%s/app", p->root);
    assert_string_equal(out, want);
    assert_string_equal(check(p, "root", out), "ok");
    /* a link inside the root to a folder inside the root is fine, and resolved */
    snprintf(want, sizeof(want), "%s/root/link", p->top);
    assert_int_equal(symlink("app", want), 0);
    assert_string_equal(check(p, "root/link", out), "ok");
    snprintf(want, sizeof(want), "%s/app", p->root);
    assert_string_equal(out, want);
}

static void test_what_leads_out_is_refused(void **state)
{
    place_t *p = *state;
    const char *roots[] = {p->root};
    const char *code = NULL;
    char out[PATH_MAX], path[PATH_MAX * 2];

    folder(p, "root/app");
    /* a link out of the root */
    snprintf(path, sizeof(path), "%s/root/escape", p->top);
    assert_int_equal(symlink("../outside", path), 0);
    assert_string_equal(check(p, "root/escape", out), "folder_outside_roots");
    /* ".." (even one that would land inside) and "." parts, before anything is resolved */
    assert_string_equal(check(p, "root/app/../../outside", out), "folder_outside_roots");
    assert_string_equal(check(p, "root/app/..", out), "folder_outside_roots");
    assert_string_equal(check(p, "root/./app", out), "folder_outside_roots");
    /* outside, and a sibling whose name only begins like the root's */
    assert_string_equal(check(p, "outside", out), "folder_outside_roots");
    folder(p, "rootless");
    assert_string_equal(check(p, "rootless", out), "folder_outside_roots");
    /* relative, empty, NULL */
    assert_int_equal(rl_projects_check_folder(roots, 1, "root/app", out, &code), -1);
    assert_string_equal(code, "folder_outside_roots");
    assert_int_equal(rl_projects_check_folder(roots, 1, "", out, &code), -1);
    assert_int_equal(rl_projects_check_folder(roots, 1, NULL, out, &code), -1);
    /* no roots: nothing is inside */
    snprintf(path, sizeof(path), "%s/app", p->root);
    assert_int_equal(rl_projects_check_folder(roots, 0, path, out, &code), -1);
    assert_string_equal(code, "folder_outside_roots");
}

static void test_a_file_or_nothing_is_not_a_folder(void **state)
{
    place_t *p = *state;
    char out[PATH_MAX], path[PATH_MAX * 2];

    snprintf(path, sizeof(path), "%s/root/notes.txt", p->top);
    put(path, "x\n");
    assert_string_equal(check(p, "root/notes.txt", out), "not_a_folder");
    assert_string_equal(check(p, "root/missing", out), "not_a_folder");
}

static void test_branch_names(void **state)
{
    static const char *const good[] = {"main", "feature/login", "fix-42", "a.b", "user/x_y", "v1.2/rc"};
    static const char *const bad[] = {
        "",   "-x", "../x", "a/../b", "a..b",      "a b",       "a~1",     "a^",   "a:b",
        "a?", "a*", "a[",   "a\\b",   ".hid",      "a/.b",      "x.lock",  "a//b", "/a",
        "a/", "a.", "@",    "a@{b",   "tab\there", "nl\nthere", "del\x7f",
    };
    char longest[RL_PROJECT_BRANCH_MAX + 2];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        assert_true(rl_projects_branch_valid(good[i]));
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (rl_projects_branch_valid(bad[i]))
            fail_msg("branch %s taken", bad[i]);
    }
    assert_false(rl_projects_branch_valid(NULL));
    memset(longest, 'a', sizeof(longest) - 1);
    longest[RL_PROJECT_BRANCH_MAX] = '\0';
    assert_true(rl_projects_branch_valid(longest));
    longest[RL_PROJECT_BRANCH_MAX] = 'a';
    longest[RL_PROJECT_BRANCH_MAX + 1] = '\0';
    assert_false(rl_projects_branch_valid(longest));
}

static void test_worktree_paths_flatten_the_branch(void **state)
{
    char out[PATH_MAX];

    (void)state;
    assert_int_equal(rl_projects_worktree_path("/src/app", "feature/login", out), 0);
    assert_string_equal(out, "/src/app.worktrees/feature-login");
    assert_int_equal(rl_projects_worktree_path("/src/app", "main", out), 0);
    assert_string_equal(out, "/src/app.worktrees/main");
    /* path characters that could lead elsewhere never make a path */
    assert_int_equal(rl_projects_worktree_path("/src/app", "../../etc", out), -1);
    assert_int_equal(rl_projects_worktree_path("/src/app", "a/../../b", out), -1);
    assert_int_equal(rl_projects_worktree_path("/src/app", "/abs", out), -1);
    assert_int_equal(rl_projects_worktree_path("/src/app", "-f", out), -1);
    assert_int_equal(rl_projects_worktree_path("/", "main", out), -1);
}

static void test_branches_are_read_from_head(void **state)
{
    place_t *p = *state;
    char path[PATH_MAX * 2], branch[256];

    folder(p, "root/a");
    repository(p, "root/a", "ref: refs/heads/feature/x\n");
    snprintf(path, sizeof(path), "%s/a", p->root);
    rl_projects_git_branch(path, branch, sizeof(branch));
    assert_string_equal(branch, "feature/x");
    folder(p, "root/b");
    repository(p, "root/b", "0123456789abcdef0123456789abcdef01234567\n");
    snprintf(path, sizeof(path), "%s/b", p->root);
    rl_projects_git_branch(path, branch, sizeof(branch));
    assert_string_equal(branch, "0123456789ab");
    /* a worktree's .git is a file naming the folder of its HEAD */
    folder(p, "root/c");
    folder(p, "outside/wt");
    snprintf(path, sizeof(path), "%s/outside/wt/HEAD", p->top);
    put(path, "ref: refs/heads/side\n");
    snprintf(path, sizeof(path), "%s/root/c/.git", p->top);
    {
        char line[PATH_MAX * 3];
        snprintf(line, sizeof(line), "gitdir: %s/outside/wt\n", p->top);
        put(path, line);
    }
    snprintf(path, sizeof(path), "%s/c", p->root);
    rl_projects_git_branch(path, branch, sizeof(branch));
    assert_string_equal(branch, "side");
    /* not a repository */
    rl_projects_git_branch(p->root, branch, sizeof(branch));
    assert_string_equal(branch, "");
}

static void test_the_scan_lists_repositories_two_levels_down(void **state)
{
    place_t *p = *state;
    const char *roots[] = {p->root};
    char err[256], path[PATH_MAX * 2], out[PATH_MAX], id[RL_PROJECT_ID_SIZE];
    const char *code;
    rl_projects_t *projects;
    json_t *list;
    size_t i;

    folder(p, "root/one");
    repository(p, "root/one", "ref: refs/heads/main\n");
    folder(p, "root/group");
    folder(p, "root/group/two");
    repository(p, "root/group/two", "ref: refs/heads/dev\n");
    folder(p, "root/group/deep");
    folder(p, "root/group/deep/three");
    repository(p, "root/group/deep/three", "ref: refs/heads/main\n");
    folder(p, "outside/repo");
    repository(p, "outside/repo", "ref: refs/heads/main\n");
    snprintf(path, sizeof(path), "%s/root/linked", p->top);
    assert_int_equal(symlink("../outside/repo", path), 0);

    projects = rl_projects_open(roots, 1, err, sizeof(err));
    assert_non_null(projects);
    list = rl_projects_list(projects);
    assert_int_equal(json_array_size(list), 2);
    snprintf(path, sizeof(path), "%s/group/two", p->root);
    assert_string_equal(json_string_value(json_object_get(json_array_get(list, 0), "path")), path);
    assert_string_equal(json_string_value(json_object_get(json_array_get(list, 0), "branch")), "dev");
    assert_string_equal(json_string_value(json_object_get(json_array_get(list, 0), "name")), "two");
    assert_string_equal(json_string_value(json_object_get(json_array_get(list, 1), "name")), "one");
    for (i = 0; i < json_array_size(list); i++) {
        const char *pid = json_string_value(json_object_get(json_array_get(list, i), "id"));
        assert_int_equal(strlen(pid), 24);
        assert_int_equal(strncmp(pid, "p_", 2), 0);
        assert_int_equal(rl_projects_find(projects, pid, out, &code), 0);
        assert_string_equal(out, json_string_value(json_object_get(json_array_get(list, i), "path")));
    }
    assert_int_equal(rl_projects_find(projects, "p_nosuchproject", out, &code), -1);
    assert_string_equal(code, "unknown_project");

    /* a folder used before is listed with its agents, and ids stay the same at the next start */
    snprintf(path, sizeof(path), "%s/group/deep/three", p->root);
    rl_projects_used(projects, path, "claude");
    rl_projects_id_of(projects, path, id);
    json_decref(list);
    rl_projects_free(projects);
    projects = rl_projects_open(roots, 1, err, sizeof(err));
    assert_non_null(projects);
    list = rl_projects_list(projects);
    assert_int_equal(json_array_size(list), 3);
    assert_int_equal(rl_projects_find(projects, id, out, &code), 0);
    assert_string_equal(out, path);
    /* sorted by path: group/deep/three (three levels down: listed only as used before) comes first */
    assert_string_equal(json_string_value(json_object_get(json_array_get(list, 0), "path")), path);
    assert_string_equal(json_string_value(json_array_get(json_object_get(json_array_get(list, 0), "agents_used"), 0)),
                        "claude");
    json_decref(list);
    rl_projects_free(projects);

    /* a root that is not a folder is refused at the start */
    roots[0] = "/nonexistent-root-for-the-test";
    assert_null(rl_projects_open(roots, 1, err, sizeof(err)));
}

/* The plan, git when the plan asks for it, and the plan again: what the bridge does across a job (session_setup.c). */
static int worktree(rl_projects_t *projects, const char *project, const char *branch, char out[PATH_MAX],
                    const char **code)
{
    char dir[PATH_MAX];
    int child = 0, planned = rl_projects_worktree_plan(projects, project, branch, dir, out, code);

    if (planned != 1)
        return planned;
    if (rl_projects_worktree_git(project, branch, dir, &child) != 0)
        return -2;
    /* made: the plan finds it now */
    return rl_projects_worktree_plan(projects, project, branch, dir, out, code);
}

static void test_worktrees_are_made_beside_the_repository(void **state)
{
    place_t *p = *state;
    const char *roots[] = {p->root};
    char err[256], command[PATH_MAX * 3], project[PATH_MAX * 2], out[PATH_MAX], dir[PATH_MAX], want[PATH_MAX * 2];
    int child = 0;
    const char *code = NULL;
    rl_projects_t *projects;

    folder(p, "root/app");
    snprintf(project, sizeof(project), "%s/app", p->root);
    snprintf(command, sizeof(command),
             "cd '%s' && git init -q -b main && git -c user.email=t@t -c user.name=t commit -q --allow-empty -m one",
             project);
    assert_int_equal(system(command), 0);
    projects = rl_projects_open(roots, 1, err, sizeof(err));
    assert_non_null(projects);
    assert_int_equal(worktree(projects, project, "feature/x", out, &code), 0);
    snprintf(want, sizeof(want), "%s/app.worktrees/feature-x", p->root);
    assert_string_equal(out, want);
    rl_projects_git_branch(out, err, sizeof(err));
    assert_string_equal(err, "feature/x");
    /* asked again: the same worktree, and the plan needs no git */
    assert_int_equal(rl_projects_worktree_plan(projects, project, "feature/x", dir, out, &code), 0);
    assert_string_equal(out, want);
    /* a branch that exists already is checked out as it is */
    snprintf(command, sizeof(command), "git -C '%s' branch old", project);
    assert_int_equal(system(command), 0);
    assert_int_equal(worktree(projects, project, "old", out, &code), 0);
    /* a name with path characters makes nothing */
    assert_int_equal(worktree(projects, project, "../../escape", out, &code), -1);
    assert_string_equal(code, "worktree_name_invalid");
    assert_int_equal(worktree(projects, project, "-b", out, &code), -1);
    assert_string_equal(code, "worktree_name_invalid");
    /* git refuses (a branch name git takes but a worktree cannot check out: a repository with no commit) */
    folder(p, "root/empty");
    snprintf(command, sizeof(command), "cd '%s/empty' && git init -q -b main", p->root);
    assert_int_equal(system(command), 0);
    snprintf(command, sizeof(command), "%s/empty", p->root);
    assert_int_equal(rl_projects_worktree_plan(projects, command, "y", dir, out, &code), 1);
    assert_int_equal(rl_projects_worktree_git(command, "y", dir, &child), -1);
    assert_int_equal(child, 0);
    /* the root itself as the repository: its worktrees would lie outside the root */
    assert_int_equal(worktree(projects, p->root, "x", out, &code), -1);
    assert_string_equal(code, "folder_outside_roots");
    rl_projects_free(projects);
}

static void test_agent_options_and_agents_conf(void **state)
{
    rl_bridge_options_t o;
    char err[256];
    char text[] = "# agents\n"
                  "claude = acp:npx -y @zed-industries/claude-agent-acp\n"
                  "\n"
                  "codex=acp:npx -y @zed-industries/codex-acp  # the other one\n"
                  "default = codex\n"
                  "root = /home/me/src\n";
    char bad[] = "claude = acp:x\nBad Name = exec:y\n";
    char unknown[] = "claude = nothing:x\n";

    (void)state;
    memset(&o, 0, sizeof(o));
    assert_int_equal(rl_agent_option("exec:cat", &o, err, sizeof(err)), 0);
    assert_int_equal(rl_agent_option("echo=jsonl:python3 echo.py --x=1", &o, err, sizeof(err)), 0);
    assert_int_equal(o.nagents, 2);
    assert_string_equal(o.agents[0].name, "default");
    assert_string_equal(o.agents[0].spec, "exec:cat");
    assert_string_equal(o.agents[1].name, "echo");
    assert_string_equal(o.agents[1].spec, "jsonl:python3 echo.py --x=1");
    assert_int_equal(rl_agent_option("=exec:x", &o, err, sizeof(err)), -1);
    assert_int_equal(rl_agent_option("Bad=exec:x", &o, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "names are"));

    memset(&o, 0, sizeof(o));
    assert_int_equal(rl_agents_conf_parse(text, &o, err, sizeof(err)), 0);
    assert_int_equal(o.nagents, 2);
    assert_string_equal(o.agents[0].name, "claude");
    assert_string_equal(o.agents[0].spec, "acp:npx -y @zed-industries/claude-agent-acp");
    assert_string_equal(o.agents[1].name, "codex");
    assert_string_equal(o.agents[1].spec, "acp:npx -y @zed-industries/codex-acp");
    assert_string_equal(o.default_agent, "codex");
    assert_int_equal(o.nroots, 1);
    assert_string_equal(o.roots[0], "/home/me/src");
    memset(&o, 0, sizeof(o));
    assert_int_equal(rl_agents_conf_parse(bad, &o, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "line 2"));
    memset(&o, 0, sizeof(o));
    assert_int_equal(rl_agents_conf_parse(unknown, &o, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "line 1"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_a_folder_under_the_root_is_taken_resolved, setup, teardown),
        cmocka_unit_test_setup_teardown(test_what_leads_out_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_file_or_nothing_is_not_a_folder, setup, teardown),
        cmocka_unit_test(test_branch_names),
        cmocka_unit_test(test_worktree_paths_flatten_the_branch),
        cmocka_unit_test_setup_teardown(test_branches_are_read_from_head, setup, teardown),
        cmocka_unit_test_setup_teardown(test_the_scan_lists_repositories_two_levels_down, setup, teardown),
        cmocka_unit_test_setup_teardown(test_worktrees_are_made_beside_the_repository, setup, teardown),
        cmocka_unit_test(test_agent_options_and_agents_conf),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
