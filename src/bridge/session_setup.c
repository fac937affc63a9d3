/* A session's agent and folder, chosen when it starts (session_setup.h). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bridge/agent_state.h"
#include "bridge/session_setup.h"
#include "common/jobs.h"
#include "common/log.h"
#include "common/strmap.h"
#include "e2e/e2e.h"

/* Sessions whose setup the bridge remembers (this run): far more than one bridge serves. */
#define SETUPS_MAX 100000
/* The blob path of project_ct, in the session's start and in its state: the same for every session. */
#define PROJECT_BLOB "session_meta/project"
/* What project_ct opens to, at most (the wire: the envelope is <= 8 KiB). */
#define PROJECT_PLAIN_MAX 8192

struct rl_setups {
    rl_strmap_t *setups; /* session id -> rl_session_setup_t */
};

/* git worktree add runs one at a time: two sessions asking for the same worktree at once then find it made. */
static const rl_job_kind_t worktree_kind = {"git worktree", 1, 64};

/* A worktree git makes for a session, off the loop. */
typedef struct worktree_job {
    rl_job_t job;
    rl_bridge_t *bridge;
    char session_id[128];
    char project[PATH_MAX], branch[RL_PROJECT_BRANCH_MAX + 1], dir[PATH_MAX];
    int child; /* git's pid while it runs (atomic) */
    int result;
} worktree_job_t;

static void try_setup(rl_bridge_t *b, const char *session_id, rl_session_setup_t *s, json_t *session);

/* The words of each refusal for the user: never a path (an encrypted session's folder is not the relay's to read). */
static const struct {
    const char *code, *message;
} refusals[] = {
    {"agent_not_configured", "this machine's relay-bridge has no agent of that name"},
    {"unknown_project", "this machine's relay-bridge knows no such project"},
    {"folder_outside_roots", "the project's folder is not inside the folders this relay-bridge serves (--root)"},
    {"not_a_folder", "the project's folder does not exist or is not a folder"},
    {"worktree_name_invalid", "the worktree's branch name is not a valid git branch name"},
    {"worktree_failed", "git could not make the worktree (see relay-bridge's log)"},
    {"resume_failed", "the agent's session could not be resumed"},
};

static void setup_free(void *value)
{
    rl_session_setup_t *s = value;

    json_decref(s->session);
    free(s);
}

rl_setups_t *rl_setups_new(void)
{
    rl_setups_t *setups = calloc(1, sizeof(*setups));

    if (setups == NULL)
        return NULL;
    setups->setups = rl_strmap_new(SETUPS_MAX);
    if (setups->setups == NULL) {
        free(setups);
        return NULL;
    }
    return setups;
}

void rl_setups_free(rl_setups_t *setups)
{
    if (setups == NULL)
        return;
    rl_strmap_free(setups->setups, setup_free);
    free(setups);
}

static rl_session_setup_t *find(rl_bridge_t *b, const char *session_id)
{
    rl_setups_t *setups = rl_bridge_setups(b);

    return setups != NULL && session_id != NULL ? rl_strmap_get(setups->setups, session_id) : NULL;
}

/* The setup of session_id, made (empty, state as given) when it has none yet. */
static rl_session_setup_t *find_or_add(rl_bridge_t *b, const char *session_id, rl_setup_state_t state)
{
    rl_setups_t *setups = rl_bridge_setups(b);
    rl_session_setup_t *s = find(b, session_id);

    if (s != NULL || setups == NULL)
        return s;
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->state = state;
    s->agent = -1;
    if (rl_strmap_put(setups->setups, session_id, s) != 0) {
        free(s);
        return NULL;
    }
    return s;
}

const rl_session_setup_t *rl_session_setup_get(rl_bridge_t *b, const char *session_id)
{
    return find(b, session_id);
}

static void refuse(rl_bridge_t *b, const char *session_id, rl_session_setup_t *s, const char *code)
{
    const char *message = "the session cannot start";
    json_t *fields;
    size_t i;

    for (i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++)
        if (strcmp(refusals[i].code, code) == 0)
            message = refusals[i].message;
    s->state = RL_SETUP_REFUSED;
    snprintf(s->code, sizeof(s->code), "%s", code);
    snprintf(s->message, sizeof(s->message), "%s", message);
    rl_log(RL_LOG_WARN, "session %s refused: %s (%s)", session_id, code, message);
    fields = json_pack("{s:s, s:{s:s, s:s}}", "state", "refused", "error", "code", code, "message", message);
    rl_bridge_state(b, session_id, fields);
    json_decref(fields);
}

/* The project the session names: plain project, or project_ct opened (a new reference); NULL with *code. */
static json_t *session_project(rl_bridge_t *b, const char *session_id, json_t *session, int *waiting, const char **code)
{
    rl_keyring_t *keys = rl_bridge_keys(b);
    json_t *ct = json_object_get(session, "project_ct"), *project;
    char *text = NULL;

    *waiting = 0;
    *code = "unknown_project";
    if (!json_is_string(ct))
        return json_is_object(json_object_get(session, "project")) ? json_incref(json_object_get(session, "project"))
                                                                   : NULL;
    if (keys == NULL || !rl_keyring_has(keys, session_id)) {
        *waiting = 1;
        return NULL;
    }
    /* Sealed before the relay names the session, its blob path names none (docs/api.md, "Agents and projects"). */
    if (rl_keyring_open_path(keys, session_id, PROJECT_BLOB, json_string_value(ct), &text) != 0 ||
        strlen(text) > PROJECT_PLAIN_MAX) {
        rl_log(RL_LOG_WARN, "session %s: project_ct does not open with the session key", session_id);
        free(text);
        return NULL;
    }
    project = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
    rl_e2e_wipe(text, strlen(text));
    free(text);
    if (!json_is_object(project)) {
        json_decref(project);
        return NULL;
    }
    return project;
}

/*
 * The folder of project (id, path?, worktree_branch?): 0 with folder (and the project's own in base), 1 when git
 * must make its worktree first (folder: where; s->git_failed says it could not), or -1.
 */
static int project_folder(rl_bridge_t *b, const rl_session_setup_t *s, json_t *project, char folder[PATH_MAX],
                          char base[PATH_MAX], const char **code)
{
    rl_projects_t *projects = rl_bridge_projects(b);
    const char *id = json_string_value(json_object_get(project, "id"));
    const char *path = json_string_value(json_object_get(project, "path"));
    json_t *branch = json_object_get(project, "worktree_branch");
    char check[RL_PROJECT_ID_SIZE], dir[PATH_MAX];

    *code = "unknown_project";
    if (projects == NULL || id == NULL || strlen(id) > 64)
        return -1;
    if (path != NULL) {
        /* A device that holds the session key may name a folder the scan did not list; its id must match it. */
        if (rl_projects_check(projects, path, base, code) != 0)
            return -1;
        rl_projects_id_of(projects, base, check);
        *code = "unknown_project";
        if (strcmp(check, id) != 0)
            return -1;
    } else if (rl_projects_find(projects, id, base, code) != 0) {
        return -1;
    }
    if (branch == NULL || json_is_null(branch)) {
        snprintf(folder, PATH_MAX, "%s", base);
        return 0;
    }
    *code = "worktree_name_invalid";
    if (!json_is_string(branch))
        return -1;
    switch (rl_projects_worktree_plan(projects, base, json_string_value(branch), dir, folder, code)) {
    case 0:
        return 0;
    case 1:
        *code = "worktree_failed";
        if (s->git_failed)
            return -1;
        snprintf(folder, PATH_MAX, "%s", dir);
        return 1;
    default:
        return -1;
    }
}

static void worktree_run(rl_job_t *job)
{
    worktree_job_t *w = (worktree_job_t *)job;

    w->result = rl_projects_worktree_git(w->project, w->branch, w->dir, &w->child);
}

/* The bridge stops while git works (a git waiting on a lock, say): git is ended, so that the stop does not wait. */
static void worktree_interrupt(rl_job_t *job)
{
    rl_projects_worktree_stop(&((worktree_job_t *)job)->child);
}

/* Git is done (or the bridge stops): the session's setup is tried again, and what it held back goes on. */
static void worktree_done(rl_job_t *job)
{
    worktree_job_t *w = (worktree_job_t *)job;
    rl_bridge_t *b = w->bridge;
    rl_session_setup_t *s = job->stopped ? NULL : find(b, w->session_id);
    json_t *session;

    if (s != NULL && s->state == RL_SETUP_MAKING) {
        if (w->result != 0) {
            rl_log(RL_LOG_WARN, "git worktree add failed for a session's project (see git worktree list)");
            s->git_failed = 1;
        }
        session = json_incref(s->session);
        try_setup(b, w->session_id, s, session);
        if (s->state == RL_SETUP_READY)
            rl_bridge_session_ready(b, w->session_id, session);
        json_decref(session);
        rl_bridge_setup_made(b);
    }
    free(w);
}

/* Hands the worktree at dir to git on a job's thread: 0, or -1 when it cannot be queued. */
static int make_worktree(rl_bridge_t *b, const char *session_id, const char *project, json_t *branch, const char *dir)
{
    worktree_job_t *w = calloc(1, sizeof(*w));

    if (w == NULL)
        return -1;
    w->job.kind = &worktree_kind;
    w->job.run = worktree_run;
    w->job.done = worktree_done;
    w->job.interrupt = worktree_interrupt;
    w->bridge = b;
    snprintf(w->session_id, sizeof(w->session_id), "%s", session_id);
    snprintf(w->project, sizeof(w->project), "%s", project);
    snprintf(w->branch, sizeof(w->branch), "%s", json_string_value(branch));
    snprintf(w->dir, sizeof(w->dir), "%s", dir);
    if (rl_jobs_submit(rl_bridge_jobs(b), &w->job) != 0) {
        free(w);
        return -1;
    }
    return 0;
}

static void try_setup(rl_bridge_t *b, const char *session_id, rl_session_setup_t *s, json_t *session)
{
    json_t *agent = json_object_get(session, "agent"), *project, *fields;
    rl_projects_t *projects = rl_bridge_projects(b);
    const char *code = NULL;
    char base[PATH_MAX], branch[256], id[RL_PROJECT_ID_SIZE];
    int waiting, found_folder;

    s->agent = rl_bridge_agent_index(b, json_string_value(agent));
    if (s->agent < 0 || (agent != NULL && !json_is_null(agent) && !json_is_string(agent))) {
        refuse(b, session_id, s, "agent_not_configured");
        return;
    }
    project = session_project(b, session_id, session, &waiting, &code);
    if (waiting) {
        /* The key comes in its own update, often after session.started: the setup waits for it. */
        s->state = RL_SETUP_WAITING_KEY;
        json_decref(s->session);
        s->session = json_incref(session);
        fields = json_pack("{s:s}", "state", "starting");
        rl_bridge_state(b, session_id, fields);
        json_decref(fields);
        return;
    }
    json_decref(s->session);
    s->session = NULL;
    /* A session without a project says project_ct: null (docs/api.md): only a sealed one that does not open refuses. */
    if (project == NULL && code != NULL && json_is_string(json_object_get(session, "project_ct"))) {
        refuse(b, session_id, s, code);
        return;
    }
    found_folder = project != NULL ? project_folder(b, s, project, s->folder, base, &code) : 0;
    if (found_folder == 1 && s->state != RL_SETUP_MAKING &&
        make_worktree(b, session_id, base, json_object_get(project, "worktree_branch"), s->folder) == 0) {
        s->state = RL_SETUP_MAKING;
        s->session = json_incref(session);
        json_decref(project);
        fields = json_pack("{s:s}", "state", "starting");
        rl_bridge_state(b, session_id, fields);
        json_decref(fields);
        return;
    }
    if (found_folder != 0) {
        /* Refused, or git's worktree not made (nor queued, when the queue is full or stops). */
        json_decref(project);
        refuse(b, session_id, s, found_folder == 1 ? "worktree_failed" : code);
        return;
    }
    s->state = RL_SETUP_READY;
    fields = json_pack("{s:s}", "state", "ready");
    if (project != NULL) {
        rl_projects_used(projects, base, rl_bridge_agent_name(b, s->agent));
        rl_log(RL_LOG_INFO, "session %s runs the agent %s in a project folder", session_id,
               rl_bridge_agent_name(b, s->agent));
        /*
         * The project's own name (not its worktree's folder), the folder the agent runs in and its branch: in
         * clear in a plain session, sealed in an encrypted one.
         */
        const char *name = strrchr(base, '/');
        json_t *found;
        rl_projects_id_of(projects, base, id);
        rl_projects_git_branch(s->folder, branch, sizeof(branch));
        found = json_pack("{s:s, s:s, s:s, s:s}", "id", id, "name", name != NULL ? name + 1 : "", "path", s->folder,
                          "branch", branch);
        if (!rl_bridge_session_encrypted(b, session_id) && !json_is_string(json_object_get(session, "project_ct"))) {
            json_object_set(fields, "project", found);
        } else if (found != NULL && rl_bridge_keys(b) != NULL) {
            char *text = json_dumps(found, JSON_COMPACT), *sealed = NULL;
            if (text != NULL)
                sealed = rl_keyring_seal_path(rl_bridge_keys(b), session_id, PROJECT_BLOB, text, strlen(text));
            if (sealed != NULL)
                json_object_set_new(fields, "project_ct", json_string(sealed));
            free(text);
            free(sealed);
        }
        json_decref(found);
    }
    /* A session that names neither agent nor project is as before: nothing posted. */
    if (project != NULL || json_is_string(agent))
        rl_bridge_state(b, session_id, fields);
    json_decref(fields);
    json_decref(project);
}

const rl_session_setup_t *rl_session_setup(rl_bridge_t *b, const char *session_id, json_t *session)
{
    rl_session_setup_t *s = find(b, session_id);

    /* Made once; only one waiting for its key is tried again (one waiting for git is tried when git is done). */
    if (s != NULL &&
        (s->state == RL_SETUP_REFUSED || s->state == RL_SETUP_MAKING || (s->state == RL_SETUP_READY && s->agent >= 0)))
        return s;
    if (s == NULL) {
        s = find_or_add(b, session_id, RL_SETUP_WAITING_KEY);
        if (s == NULL)
            return NULL;
    }
    try_setup(b, session_id, s, json_is_object(session) ? session : NULL);
    return s;
}

void rl_session_setup_key(rl_bridge_t *b, const char *session_id)
{
    rl_session_setup_t *s = find(b, session_id);
    json_t *session;

    if (s == NULL || s->state != RL_SETUP_WAITING_KEY || s->session == NULL)
        return;
    session = json_incref(s->session);
    try_setup(b, session_id, s, session);
    if (s->state == RL_SETUP_READY)
        rl_bridge_session_ready(b, session_id, session);
    json_decref(session);
}
