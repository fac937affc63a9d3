/*
 * The agent adapters' interface. An adapter is one row of rl_agent_adapters
 * (agent.c), chosen by the scheme of --agent (exec:, jsonl:, openai:). The
 * bridge loop calls the adapter on its thread; the adapter answers through
 * the rl_bridge_* services below, also on the loop thread.
 */
#ifndef RL_BRIDGE_AGENT_H
#define RL_BRIDGE_AGENT_H

#include <jansson.h>
#include <sys/types.h>

#include "bridge/frame.h"
#include "bridge/rest.h"

typedef struct rl_bridge rl_bridge_t;
typedef struct rl_agent rl_agent_t;

/* An agent's name (--agent NAME=SPEC): 1-32 of [a-z0-9_-]. The old form's one agent is "default". */
#define RL_AGENT_NAME_MAX 32
int rl_agent_name_valid(const char *name, size_t len);

typedef struct rl_agent_adapter {
    const char *scheme;
    /*
     * Starts the agent from the text after "scheme:"; name is its name on this
     * bridge (files it keeps in the config folder carry it). 0, or -1 with a
     * reason logged.
     */
    int (*create)(rl_bridge_t *bridge, const char *name, const char *arg, rl_agent_t **out);
    /* A user message opened turn; payload is the update's payload (session, message). */
    void (*message)(rl_agent_t *agent, rl_turn_t *turn, json_t *payload);
    /* The user cancelled: interaction_id "" means every turn of the session. */
    void (*cancel)(rl_agent_t *agent, const char *session_id, const char *interaction_id);
    /* Any other update, as a jsonl protocol line (approval, approval_expired, session_started). */
    void (*notify)(rl_agent_t *agent, json_t *line);
    void (*destroy)(rl_agent_t *agent);
    /*
     * What the agent supports, for the manifest's agents (docs/api.md): a new
     * object of booleans, or NULL (and the member may be NULL) for none.
     */
    json_t *(*supports)(rl_agent_t *agent);
} rl_agent_adapter_t;

/*
 * One --agent value into o->agents: "NAME=SPEC", or a bare SPEC (the old
 * form) named "default". 0, or -1 with err set.
 */
struct rl_bridge_options;
int rl_agent_option(const char *value, struct rl_bridge_options *o, char *err, size_t errsz);
/*
 * The config folder's agents.conf (docs/bridge.md "agents.conf"), parsed in
 * place (text must outlive o): lines "NAME = SPEC", "default = NAME" and
 * "root = DIR"; "#" starts a comment. 0, or -1 with err naming the line.
 */
int rl_agents_conf_parse(char *text, struct rl_bridge_options *o, char *err, size_t errsz);

/* The adapter for spec ("exec:CMD"); *arg points after the colon. NULL when unknown. */
const rl_agent_adapter_t *rl_agent_find(const char *spec, const char **arg);

extern const rl_agent_adapter_t rl_agent_exec, rl_agent_jsonl, rl_agent_openai, rl_agent_acp;

/* Services of the loop to adapters (loop thread only). */
typedef void (*rl_bridge_fd_cb)(void *user, int fd, short revents);
/* Polls fd for events and calls cb; replaces an earlier watch of the same fd. */
void rl_bridge_watch(rl_bridge_t *bridge, int fd, short events, rl_bridge_fd_cb cb, void *user);
void rl_bridge_unwatch(rl_bridge_t *bridge, int fd);
/* Text the agent produced for turn: batched into ~30 ms deltas. */
void rl_bridge_text(rl_bridge_t *bridge, rl_turn_t *turn, const char *bytes, size_t len);
/*
 * The turn is over: flushes its text and sends sendMessageEnd. error_text,
 * when set, is appended to the message for the user. usage may be NULL (not stolen).
 */
void rl_bridge_end(rl_bridge_t *bridge, rl_turn_t *turn, const char *finish_reason, json_t *usage,
                   const char *error_text);
/*
 * Like rl_bridge_end, but finish_reason is already relayd's word (docs/api.md
 * "Finish reasons": stop, length, content_filter, tool_call, error,
 * cancelled; NULL for none) and is sent as it is.
 */
void rl_bridge_finish(rl_bridge_t *bridge, rl_turn_t *turn, const char *finish_reason, json_t *usage,
                      const char *error_text);
/*
 * Something other than text (a tool call, a plan) comes next in turn: when
 * its current agent message has text, that message takes no more, and the
 * next text of the turn opens a new agent message (sendMessage, same session
 * and interaction) after ending this one with finish_reason "tool_call". The
 * last message of the turn ends with the turn's own finish reason; the
 * update is acked once the turn ends. A message without text is left as it
 * is. Text not sent yet goes out first.
 */
void rl_bridge_break(rl_bridge_t *bridge, rl_turn_t *turn);
/*
 * The bridge's background-job queue (jobs.h), or NULL when there is none (a
 * unit test). The bridge stops it before it destroys the agent, so every job
 * of the agent's is done by then.
 */
typedef struct rl_jobs rl_jobs_t;
rl_jobs_t *rl_bridge_jobs(rl_bridge_t *bridge);
/* --cwd, or NULL when not given. */
const char *rl_bridge_cwd(const rl_bridge_t *bridge);
/*
 * The folder session_id runs in (its project or worktree, resolved and
 * checked against the roots: session_setup.h), or NULL when it names none: the
 * agent's own folder then (--cwd).
 */
const char *rl_bridge_session_cwd(rl_bridge_t *bridge, const char *session_id);
/*
 * The folder of project_id (projects.h), checked against the roots: 0 with
 * it in out (PATH_MAX bytes); 1 when the bridge has no --root (the agent's
 * own folder stands for every project); -1 when no project has that id.
 */
int rl_bridge_project_folder(rl_bridge_t *bridge, const char *project_id, char *out);
/* One line of the jsonl protocol from the agent (also used by the openai adapter). Takes the line. */
void rl_bridge_agent_line(rl_bridge_t *bridge, rl_agent_line_t *line);
/*
 * The agent read, edited or wrote path (tool "read", "edit", "write") in
 * session_id: in an encrypted session the relay is told (notifyToolFile, the
 * path sealed, a blind index to ask for it by) so the phone can list and open
 * it; in a session the relay said is plain, in clear (path, display_name);
 * nothing for a session of neither kind, or encrypted without its key.
 */
void rl_bridge_tool_file(rl_bridge_t *bridge, const char *session_id, const char *tool, const char *path);
/*
 * Answers the relay's request req_id with type ("agent_sessions.list.resp"):
 * answer (borrowed) as it is when it holds "error"; otherwise sealed to
 * device_id when that is a device this machine accepted (docs/api.md,
 * "Projects": {sealed, to_device_id, from_device_id}), error
 * device_not_accepted when it is another, and without a device plain only
 * when the bridge runs without encryption (else error device_required).
 */
void rl_bridge_answer(rl_bridge_t *bridge, const char *type, json_t *req_id, const char *device_id, json_t *answer);
/* Stops the bridge: the agent cannot go on. */
void rl_bridge_fail(rl_bridge_t *bridge, const char *why);
/* Blocked signals to restore in a child before exec (child.c). */
void rl_bridge_child_signals(void);

#endif
