/*
 * A session's agent and folder, chosen when the session starts
 * (docs/bridge.md "Several agents and projects"); what comes of it is told
 * as the session state (agent_state.h: rl_bridge_state, POST
 * /v1/bridge/sessions/:id/state, docs/api.md). The session object of session.started and session.message
 * names its agent and project (project in a plain session, project_ct sealed
 * with the session key in an encrypted one); the bridge checks the folder
 * against its roots, makes the git worktree asked for, and either runs the
 * session there or refuses it (state "refused", error {code, message}, and
 * nothing runs). An encrypted session whose key has not come yet waits for
 * it: its setup is tried again when the key arrives. A worktree is made by
 * git on a job's thread (the loop goes on serving every other session); the
 * session's updates wait for it (bridge.c parks them) and its setup is
 * tried again when git is done. Loop thread.
 */
#ifndef RL_BRIDGE_SESSION_SETUP_H
#define RL_BRIDGE_SESSION_SETUP_H

#include <limits.h>

#include <jansson.h>

#include "bridge/agent.h"
#include "bridge/keyring.h"
#include "bridge/projects.h"

typedef enum rl_setup_state {
    RL_SETUP_WAITING_KEY, /* project_ct, and no session key yet */
    RL_SETUP_MAKING,      /* git makes its worktree, on a job's thread; its messages wait (parked) */
    RL_SETUP_READY,
    RL_SETUP_REFUSED,
} rl_setup_state_t;

typedef struct rl_session_setup {
    rl_setup_state_t state;
    int agent;             /* the bridge's agent index; -1 until chosen */
    char folder[PATH_MAX]; /* "" : the agent's own folder (--cwd) */
    char code[32];         /* refused: the error code */
    char message[256];     /* refused: for the user; no path in an encrypted session */
    json_t *session;       /* waiting or making: the session object, to try again with the key or the worktree */
    int git_failed;        /* git could not make the worktree asked for (asked once per session) */
} rl_session_setup_t;

typedef struct rl_setups rl_setups_t;

rl_setups_t *rl_setups_new(void);
void rl_setups_free(rl_setups_t *setups);

/*
 * The setup of session_id from its session object (session.started or
 * session.message): made on the first call, the same afterwards (a waiting
 * one is tried again). NULL when out of memory.
 */
const rl_session_setup_t *rl_session_setup(rl_bridge_t *bridge, const char *session_id, json_t *session);
/* The setup made already, or NULL. */
const rl_session_setup_t *rl_session_setup_get(rl_bridge_t *bridge, const char *session_id);
/* The session key of session_id arrived: a setup waiting for it is made now. */
void rl_session_setup_key(rl_bridge_t *bridge, const char *session_id);

/* Services of the bridge to this module (bridge.c). */
rl_setups_t *rl_bridge_setups(rl_bridge_t *bridge);
rl_keyring_t *rl_bridge_keys(rl_bridge_t *bridge);
rl_projects_t *rl_bridge_projects(rl_bridge_t *bridge);
/* The index of agent name (NULL: the default agent), or -1 when no agent has that name. */
int rl_bridge_agent_index(rl_bridge_t *bridge, const char *name);
const char *rl_bridge_agent_name(rl_bridge_t *bridge, int index);
/* 1 when the relay said session_id is encrypted. */
int rl_bridge_session_encrypted(rl_bridge_t *bridge, const char *session_id);
/* The setup is ready: the agent is told of the session (jsonl session_started). */
void rl_bridge_session_ready(rl_bridge_t *bridge, const char *session_id, json_t *session);
/* A setup left RL_SETUP_MAKING: the updates of its session parked meanwhile are processed now. */
void rl_bridge_setup_made(rl_bridge_t *bridge);

#endif
