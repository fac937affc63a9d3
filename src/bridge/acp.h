/*
 * The acp adapter's parts (agent_acp.c: the process and the adapter;
 * acp_rpc.c: JSON-RPC to and from the agent; acp_session.c: sessions,
 * prompts and the state file; acp_tasks.c: what the agent reports as tasks;
 * acp_perm.c: permissions; acp_files.c: the fs methods; acp_fetch.c:
 * attachments fetched for a prompt), and the state they share: internal to
 * them (docs/internals/relay-bridge.md). Loop thread.
 */
#ifndef RL_BRIDGE_ACP_H
#define RL_BRIDGE_ACP_H

#include <limits.h>

#include <jansson.h>

#include "bridge/acp_map.h"
#include "bridge/agent.h"
#include "bridge/child.h"
#include "common/jobs.h"
#include "bridge/jsonrpc.h"
#include "common/buf.h"
#include "common/strmap.h"

/* The protocol version this bridge speaks (ACP's initialize). */
#define ACP_PROTOCOL_VERSION 1
/* One message from the agent; a longer line is dropped (a whole file in a diff fits). */
#define LINE_MAX_BYTES (8u * 1024u * 1024u)
/* What waits for the agent to read; past it the agent is stuck. */
#define MAX_PENDING_OUT (16u * 1024u * 1024u)
/* The agent's last stderr lines kept for the user's error text when it fails (docs/bridge.md "acp:COMMAND"). */
#define STDERR_TAIL 2048
/* What a failed request's message and data may take of that text. */
#define ERROR_MESSAGE_MAX 300
#define ERROR_DATA_MAX    600
/* A failure's text: its reason, the error's message and data, the stderr tail, and the words around them. */
#define FAILURE_TEXT_MAX (ERROR_MESSAGE_MAX + ERROR_DATA_MAX + STDERR_TAIL + 256)
/* A thought's text is sent at most this often (docs/bridge.md "acp:COMMAND"). */
#define THOUGHT_EVERY_MS 500
/* A command's output is sent at most this often per task (about 4 a second); what comes between waits for a timer. */
#define TERMINAL_EVERY_MS 250
#define RESTART_FIRST_MS  1000L
#define RESTART_CAP_MS    30000L
/* The state file: relay session -> ACP session, in the config folder like bridge-status.json. */
#define STATE_NAME "bridge-acp"
/* Past this many sessions the oldest mappings are forgotten (a conversation then starts afresh). */
#define STATE_MAX_SESSIONS 1000
#define MAX_COMMANDS       200
/* Attachments sent inside the prompt (image and embedded text blocks) are fetched up to these sizes. */
#define FETCH_IMAGE_MAX    (5L * 1024L * 1024L)
#define FETCH_TEXT_MAX     (1024L * 1024L)
#define FETCH_TIMEOUT_MS   20000L
#define MAX_CONTENT_BLOCKS 32
#define MAX_PLAN_ENTRIES   200
#define MAX_PLAN_ENTRY     2048 /* bytes of one entry's text */
/* What the user reads when the agent wants a login the bridge cannot give it. */
#define LOGIN_TEXT "[the agent needs a login first: see relay-bridge's log on the agent's machine]"

/* A shell command's output as it runs (docs/bridge.md "Shell output"): its tail, sent at most every TERMINAL_EVERY_MS.
 */
typedef struct terminal {
    rl_buf_t tail; /* the last RL_ACP_TERMINAL_MAX bytes (cap twice that) */
    int truncated; /* earlier output was dropped */
    json_t *exit;  /* its exit code, once known */
    long sent_at;  /* when the last updateTask with it went out (mono ms), 0 before */
    int dirty;     /* output came since then */
} terminal_t;

typedef struct tool {
    struct tool *next;
    json_t *call; /* the ACP ToolCall as known so far (every update merged in) */
    int created;  /* its createTask went out */
    int finished;
    terminal_t *terminal; /* a shell command's output, or NULL */
} tool_t;

/* One relay turn: waiting for its session, or running as a session/prompt. */
typedef struct prompt {
    struct prompt *next;
    rl_turn_t *turn;       /* a reference */
    json_t *message;       /* the update's message (a reference) */
    struct fetch *fetch;   /* attachments being fetched: the prompt waits for them */
    json_t *inline_blocks; /* per attachment: the image or resource block fetched, or null (then a link) */
    int cancelled;
    tool_t *tools;
    int plan_open;
    json_t *plan_entries;
    int thoughts;     /* think tasks opened so far in the turn */
    int thought_open; /* the current think task is not finished */
    rl_buf_t thought; /* the start of the thought, RL_ACP_THOUGHT_MAX + 4 bytes at most */
    long thought_sent_at;
    int thought_dirty;
} prompt_t;

typedef enum session_state { SESSION_CLOSED, SESSION_OPENING, SESSION_READY } session_state_t;

typedef struct session {
    struct session *next;
    char relay_id[64];
    char root[PATH_MAX]; /* its working folder, resolved: its project's (session_setup.h) or the agent's own */
    char *acp_id;
    session_state_t state;
    int loading;     /* a session/load is in flight: the history it replays is not news */
    json_t *context; /* the latest usage_update as usage fields (rl_acp_context_usage), until a turn ends with it */
    int running;     /* the first prompt is in session/prompt */
    prompt_t *queue; /* in arrival order */
    /* acp_steer.c: the session's settings as the agent last said them, and the relay's view of them. */
    json_t *config_options; /* ACP configOptions, or NULL */
    json_t *modes;          /* ACP modes {currentModeId, availableModes}, or NULL */
    json_t *models;         /* ACP models {currentModelId, availableModels}, or NULL */
    json_t *options;        /* rl_acp_options of the three */
    json_t *pending;        /* settings asked before the session was open: [{id, value}] */
    /* acp_list.c: continuing the agent's own session (a session start's resume). */
    char *resume_id; /* the agent session to continue, until it is open */
    int replaying;   /* a session/load of resume_id is in flight: its history is kept for the timeline */
    rl_buf_t replay; /* that history as text, REPLAY_MAX at most */
    int replay_role; /* the role of the last chunk kept: 0 none, 1 user, 2 agent */
    int late_logged; /* an update of a turn already answered was logged (once a session: rl_acp__on_update) */
} session_t;

typedef enum request_kind {
    REQ_INITIALIZE,
    REQ_AUTHENTICATE,
    REQ_NEW,
    REQ_LOAD,
    REQ_RESUME,
    REQ_PROMPT,
    REQ_SET,   /* a setting: arg {id, value, setter} */
    REQ_LIST,  /* session/list: arg {req_id, device_id} */
    REQ_CLOSE, /* session/close */
} request_kind_t;

/* authenticate, at most once per agent process (agent_t.auth). */
typedef enum auth_state { AUTH_NONE, AUTH_PENDING, AUTH_DONE, AUTH_FAILED } auth_state_t;

/* A request of ours the agent has not answered yet. */
typedef struct request {
    struct request *next;
    json_int_t id;
    request_kind_t kind;
    session_t *session;
    prompt_t *prompt;
    json_t *arg; /* what the answer needs (a reference), or NULL */
} request_t;

/* A session/request_permission of the agent, waiting for the user. */
typedef struct permission {
    struct permission *next;
    json_t *rpc_id;
    char approval_id[48];
    json_t *options;
    prompt_t *prompt;
} permission_t;

/*
 * Attachments of one prompt fetched by a job of the bridge's queue (jobs.h:
 * the loop never waits on HTTP): the job fills blocks; the loop then hands
 * them to the prompt, or drops them when the prompt is gone (prompt is NULL
 * then).
 */
typedef struct fetch {
    rl_job_t job; /* first: the job is the fetch */
    struct fetch *next;
    struct rl_agent *agent;
    struct prompt *prompt;
    json_t *wanted; /* per attachment: {"url", "mime", "max", "as": "image"|"text"} or null */
    json_t *blocks; /* filled by the thread: per attachment a block or null */
} fetch_t;

struct rl_agent {
    rl_bridge_t *bridge;
    char *command;
    char state_name[64]; /* its state file: bridge-acp for the agent "default", bridge-acp-NAME for another */
    char name[40];       /* the agent's name on this bridge (--agent NAME=SPEC; "default" for the old form) */
    char root[PATH_MAX]; /* the working folder (--cwd), resolved: a session without a project runs there */
    rl_child_t *child;   /* its stderr tail: the lines since the last failure or success */
    int initialized;
    int load_session, image, embedded_context;
    int session_list, session_resume, session_close; /* agentCapabilities.sessionCapabilities */
    json_t *auth_methods;
    auth_state_t auth;
    json_t *agent_info;
    char *mode;
    json_t *commands;
    json_int_t next_id;
    request_t *requests;
    session_t *sessions;
    permission_t *permissions;
    fetch_t *fetches;
    rl_strmap_t *known; /* relay session id -> ACP session id (malloc'd): the state file's sessions */
    int terminal_timer; /* timerfd: output held back by TERMINAL_EVERY_MS goes out when it fires; -1 when none */
};

/* acp_rpc.c: messages to the agent (dropped when none runs), and what it sends. */
void rl_acp__send_msg(struct rl_agent *a, json_t *msg);
json_int_t rl_acp__request(struct rl_agent *a, request_kind_t kind, const char *method, json_t *params, session_t *s,
                           prompt_t *p);
void rl_acp__answer_error(struct rl_agent *a, json_t *id, int code, const char *message);
void rl_acp__request_free(request_t *r);
/* The request just sent by rl_acp__request (its id), to attach an arg to. */
request_t *rl_acp__request_by_id(struct rl_agent *a, json_int_t id);
void rl_acp__on_line(void *user, const char *line, size_t len);

/* acp_tasks.c: lines of the jsonl protocol to the loop; session/update as tasks, text, the manifest. */
void rl_acp__emit(struct rl_agent *a, rl_agent_line_type_t type, prompt_t *p, json_t *root);
json_t *rl_acp__cut_string(const char *text, size_t max);
void rl_acp__send_manifest(struct rl_agent *a);
void rl_acp__thought_close(struct rl_agent *a, prompt_t *p);
const char *rl_acp__tool_title(tool_t *t);
void rl_acp__tool_create(struct rl_agent *a, prompt_t *p, tool_t *t);
void rl_acp__tool_merge(tool_t *t, json_t *update);
tool_t *rl_acp__tool_open(struct rl_agent *a, prompt_t *p, json_t *update, int may_wait);
void rl_acp__close_items(struct rl_agent *a, prompt_t *p, const char *tool_status, const char *why);
void rl_acp__set_mode(struct rl_agent *a, const char *mode);
void rl_acp__on_update(struct rl_agent *a, json_t *params);
void rl_acp__terminal_flush(struct rl_agent *a);
void rl_acp__tool_free(tool_t *t);

/* acp_session.c: the state file, sessions and prompts, and the answers to our requests. */
void rl_acp__state_load(struct rl_agent *a);
session_t *rl_acp__session_by_relay(struct rl_agent *a, const char *relay_id);
session_t *rl_acp__session_by_acp(struct rl_agent *a, const char *acp_id);
prompt_t *rl_acp__running_prompt(session_t *s);
tool_t *rl_acp__tool_find(prompt_t *p, const char *id);
void rl_acp__prompt_free(struct rl_agent *a, session_t *s, prompt_t *p);
void rl_acp__pump(struct rl_agent *a, session_t *s);
void rl_acp__failure_text(struct rl_agent *a, const char *head, char *out, size_t outsz);
void rl_acp__tail_reset(struct rl_agent *a);
void rl_acp__open_session(struct rl_agent *a, session_t *s);
void rl_acp__end_prompt(struct rl_agent *a, session_t *s, prompt_t *p, const char *finish_reason, json_t *usage,
                        const char *error_text);
void rl_acp__fail_queue(struct rl_agent *a, session_t *s, const char *error_text);
void rl_acp__on_initialized(struct rl_agent *a, rl_jsonrpc_msg_t *msg);
void rl_acp__on_authenticated(struct rl_agent *a, rl_jsonrpc_msg_t *msg);
void rl_acp__on_session_opened(struct rl_agent *a, request_t *r, rl_jsonrpc_msg_t *msg);
void rl_acp__on_prompted(struct rl_agent *a, request_t *r, rl_jsonrpc_msg_t *msg);

/* acp_steer.c: the session's settings (acp_config.h), and the relay's updates about sessions. */
void rl_acp__config_opened(struct rl_agent *a, session_t *s, json_t *result);
void rl_acp__config_pending(struct rl_agent *a, session_t *s);
int rl_acp__config_update(struct rl_agent *a, session_t *s, json_t *update);
void rl_acp__on_config_set(struct rl_agent *a, request_t *r, rl_jsonrpc_msg_t *msg);
void rl_acp__thought_level(struct rl_agent *a, session_t *s, prompt_t *p);
int rl_acp__notify_session(struct rl_agent *a, json_t *line);
session_t *rl_acp__session_get(struct rl_agent *a, const char *relay_id);
/* Sets s->root: the folder of its session's setup (a project's), else the agent's own (--cwd). */
void rl_acp__session_root(struct rl_agent *a, session_t *s);
void rl_acp__session_free(session_t *s);

/* acp_list.c: the agent's own sessions: list, continue, close, and the history a load replays. */
#define REPLAY_MAX (256u * 1024u)
int rl_acp__open_resume(struct rl_agent *a, session_t *s);
void rl_acp__resume_failed(struct rl_agent *a, session_t *s, const char *why);
int rl_acp__replay_update(struct rl_agent *a, session_t *s, json_t *update);
void rl_acp__replay_flush(struct rl_agent *a, session_t *s, prompt_t *p);
void rl_acp__list(struct rl_agent *a, json_t *line);
void rl_acp__on_listed(struct rl_agent *a, request_t *r, rl_jsonrpc_msg_t *msg);
void rl_acp__close(struct rl_agent *a, const char *relay_id, const char *reason);
void rl_acp__state_forget(struct rl_agent *a, const char *relay_id);

/* acp_perm.c: session/request_permission as an approval, and the relay's answer (the adapter's notify). */
void rl_acp__answer_permission(struct rl_agent *a, permission_t *perm, const char *option_id);
void rl_acp__permission_done(struct rl_agent *a, permission_t *done);
void rl_acp__on_permission(struct rl_agent *a, json_t *id, json_t *params);
void rl_acp__notify(rl_agent_t *a, json_t *line);

/* acp_files.c: fs/read_text_file and fs/write_text_file, inside the session's working folder (acp_fs.c). */
void rl_acp__on_read(struct rl_agent *a, json_t *id, json_t *params);
void rl_acp__on_write(struct rl_agent *a, json_t *id, json_t *params);

/* acp_fetch.c: a prompt's attachments fetched by a job (jobs.h); the prompt waits for them. */
void rl_acp__fetch_start(struct rl_agent *a, prompt_t *p);

#endif
