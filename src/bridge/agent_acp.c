/*
 * The acp adapter: one agent process speaking the Agent Client Protocol
 * (JSON-RPC 2.0, one message per line, on its stdin and stdout; the
 * protocol is the public schema of agentclientprotocol/agent-client-protocol,
 * version 1). docs/bridge.md, "acp:COMMAND", says what is served and how it
 * maps; the vocabulary tables are in acp_map.c.
 *
 * One process serves every relay session: each gets its own ACP session,
 * created (session/new) or, after a restart, loaded (session/load) when its
 * first message arrives, and its prompts run one at a time. What the agent
 * reports becomes the same internal lines the jsonl adapter produces
 * (rl_bridge_agent_line), so tasks, approvals and the manifest take one path
 * to the relay; text goes through the loop's delta batching. The process
 * is one of child.h's: writes to the agent are queued and written as the
 * pipe takes them; its stdout is read line by line with a cap; its stderr
 * goes to the log a line at a time. When the process dies, every running
 * reply ends with an error, and it is started again after a back-off (1 s
 * doubling to 30 s).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "bridge/acp_fs.h"
#include "bridge/acp_map.h"
#include "bridge/agent.h"
#include "bridge/child.h"
#include "bridge/jobs.h"
#include "bridge/jsonrpc.h"
#include "client/client.h"
#include "client/credentials.h"
#include "common/clock.h"
#include "common/buf.h"
#include "common/log.h"
#include "rl_version.h"

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
#define RESTART_FIRST_MS 1000L
#define RESTART_CAP_MS   30000L
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

typedef struct tool {
    struct tool *next;
    json_t *call; /* the ACP ToolCall as known so far (every update merged in) */
    int created;  /* its createTask went out */
    int finished;
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
    char *acp_id;
    session_state_t state;
    int loading;     /* a session/load is in flight: the history it replays is not news */
    int running;     /* the first prompt is in session/prompt */
    prompt_t *queue; /* in arrival order */
} session_t;

typedef enum request_kind { REQ_INITIALIZE, REQ_AUTHENTICATE, REQ_NEW, REQ_LOAD, REQ_PROMPT } request_kind_t;

/* authenticate, at most once per agent process (agent_t.auth). */
typedef enum auth_state { AUTH_NONE, AUTH_PENDING, AUTH_DONE, AUTH_FAILED } auth_state_t;

/* A request of ours the agent has not answered yet. */
typedef struct request {
    struct request *next;
    json_int_t id;
    request_kind_t kind;
    session_t *session;
    prompt_t *prompt;
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
    char root[PATH_MAX]; /* the working folder, resolved: fs methods stay inside it */
    rl_child_t *child;   /* its stderr tail: the lines since the last failure or success */
    int initialized;
    int load_session, image, embedded_context;
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
    json_t *state; /* {"agent", "cwd", "sessions": {relay id: ACP id}} */
};

static rl_child_t *new_child(struct rl_agent *a);
static void open_session(struct rl_agent *a, session_t *s);
static void pump(struct rl_agent *a, session_t *s);

/* ---- writing to the agent --------------------------------------------------------------------- */

/* Queues one message (stolen) for the agent; dropped when no agent runs. */
static void send_msg(struct rl_agent *a, json_t *msg)
{
    char *text = msg != NULL ? json_dumps(msg, JSON_COMPACT) : NULL;
    size_t len;

    json_decref(msg);
    if (text == NULL)
        return;
    /* The message goes out with its newline in place of the NUL, in one append that fits whole or not at all. */
    len = strlen(text);
    text[len] = '\n';
    if (rl_child_send(a->child, text, len + 1) == RL_CHILD_E_FULL) {
        rl_log(RL_LOG_ERROR, "the acp agent does not read its input: stopping it");
        rl_child_signal(a->child, SIGKILL);
    }
    free(text);
}

static json_int_t request(struct rl_agent *a, request_kind_t kind, const char *method, json_t *params, session_t *s,
                          prompt_t *p)
{
    request_t *r = calloc(1, sizeof(*r));

    if (r == NULL) {
        json_decref(params);
        return 0;
    }
    r->id = ++a->next_id;
    r->kind = kind;
    r->session = s;
    r->prompt = p;
    r->next = a->requests;
    a->requests = r;
    send_msg(a, rl_jsonrpc_request(r->id, method, params));
    return r->id;
}

static void answer_error(struct rl_agent *a, json_t *id, int code, const char *message)
{
    send_msg(a, rl_jsonrpc_error(id, code, message));
}

/* ---- the relay's side: lines of the jsonl protocol -------------------------------------------- */

/* Hands a line (root stolen) to the loop, addressed to p's turn when p is given. */
static void emit(struct rl_agent *a, rl_agent_line_type_t type, prompt_t *p, json_t *root)
{
    rl_agent_line_t line = {.type = type, .root = root, .session_id = "", .interaction_id = ""};

    if (root == NULL)
        return;
    if (p != NULL) {
        json_object_set_new(root, "session_id", json_string(p->turn->session_id));
        json_object_set_new(root, "interaction_id", json_string(p->turn->interaction_id));
        line.session_id = json_string_value(json_object_get(root, "session_id"));
        line.interaction_id = json_string_value(json_object_get(root, "interaction_id"));
    }
    rl_bridge_agent_line(a->bridge, &line);
}

static json_t *cut_string(const char *text, size_t max)
{
    int cut;
    return rl_acp_string_cut(text != NULL ? text : "", text != NULL ? strlen(text) : 0, max, &cut);
}

/* A string value cut at max bytes, or null when value is not a string. */
static json_t *opt_cut(json_t *value, size_t max)
{
    return json_is_string(value) ? cut_string(json_string_value(value), max) : json_null();
}

static void send_manifest(struct rl_agent *a)
{
    const char *name = json_string_value(json_object_get(a->agent_info, "name"));
    const char *version = json_string_value(json_object_get(a->agent_info, "version"));
    json_t *agent = json_pack("{s:o}", "name", cut_string(name != NULL && *name != '\0' ? name : "acp", 128));

    if (version != NULL)
        json_object_set_new(agent, "version", cut_string(version, 64));
    if (a->mode != NULL)
        json_object_set_new(agent, "mode", json_string(a->mode));
    /*
     * No tools: ACP agents declare none up front, and an empty list lets every task through (src/relay/manifest.c),
     * so a tool call's title can be its task's name in a plain session (docs/bridge.md "acp:COMMAND").
     */
    emit(a, RL_LINE_MANIFEST, NULL,
         json_pack("{s:s, s:[], s:o, s:o}", "type", "manifest", "tools", "agent", agent, "commands",
                   a->commands != NULL ? json_incref(a->commands) : json_array()));
}

/* ---- state: which ACP session continues which relay session ----------------------------------- */

static void state_load(struct rl_agent *a)
{
    json_t *doc = rl_credentials_load(STATE_NAME);
    const char *agent = json_string_value(json_object_get(doc, "agent"));
    const char *cwd = json_string_value(json_object_get(doc, "cwd"));

    /* Another agent, or another folder, has other sessions: start afresh. */
    if (doc == NULL || agent == NULL || cwd == NULL || strcmp(agent, a->command) != 0 || strcmp(cwd, a->root) != 0 ||
        !json_is_object(json_object_get(doc, "sessions"))) {
        json_decref(doc);
        doc = json_pack("{s:s, s:s, s:{}}", "agent", a->command, "cwd", a->root, "sessions");
    }
    a->state = doc;
}

static void state_save(struct rl_agent *a)
{
    if (a->state != NULL && rl_credentials_save(STATE_NAME, a->state) != 0)
        rl_log(RL_LOG_WARN, "could not save the acp sessions (%s): a restarted bridge starts them afresh",
               strerror(errno));
}

static void state_set(struct rl_agent *a, const char *relay_id, const char *acp_id)
{
    json_t *sessions = json_object_get(a->state, "sessions");

    if (acp_id == NULL) {
        json_object_del(sessions, relay_id);
    } else {
        if (json_object_size(sessions) >= STATE_MAX_SESSIONS)
            json_object_clear(sessions);
        json_object_set_new(sessions, relay_id, json_string(acp_id));
    }
    state_save(a);
}

/* ---- sessions and prompts --------------------------------------------------------------------- */

static session_t *session_by_relay(struct rl_agent *a, const char *relay_id)
{
    session_t *s;

    for (s = a->sessions; s != NULL; s = s->next)
        if (strcmp(s->relay_id, relay_id) == 0)
            return s;
    return NULL;
}

static session_t *session_by_acp(struct rl_agent *a, const char *acp_id)
{
    session_t *s;

    for (s = a->sessions; acp_id != NULL && s != NULL; s = s->next)
        if (s->acp_id != NULL && strcmp(s->acp_id, acp_id) == 0)
            return s;
    return NULL;
}

static prompt_t *running_prompt(session_t *s)
{
    return s != NULL && s->running ? s->queue : NULL;
}

static tool_t *tool_find(prompt_t *p, const char *id)
{
    tool_t *t;

    for (t = p->tools; id != NULL && t != NULL; t = t->next)
        if (strcmp(json_string_value(json_object_get(t->call, "toolCallId")), id) == 0)
            return t;
    return NULL;
}

/* Removes p from its session's queue and from every request and permission that names it. */
static void prompt_free(struct rl_agent *a, session_t *s, prompt_t *p)
{
    prompt_t **pp;
    request_t *r;
    permission_t **perm;
    tool_t *t;

    for (pp = &s->queue; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
    for (r = a->requests; r != NULL; r = r->next)
        if (r->prompt == p)
            r->prompt = NULL;
    for (perm = &a->permissions; *perm != NULL;) {
        permission_t *x = *perm;
        if (x->prompt == p) {
            *perm = x->next;
            json_decref(x->rpc_id);
            json_decref(x->options);
            free(x);
        } else {
            perm = &x->next;
        }
    }
    while (p->tools != NULL) {
        t = p->tools;
        p->tools = t->next;
        json_decref(t->call);
        free(t);
    }
    if (p->fetch != NULL)
        p->fetch->prompt = NULL;
    json_decref(p->inline_blocks);
    json_decref(p->plan_entries);
    json_decref(p->message);
    rl_buf_free(&p->thought);
    rl_turn_unref(p->turn);
    free(p);
}

/* ---- thoughts, plans and tool calls as tasks -------------------------------------------------- */

static void thought_task_id(prompt_t *p, char *out, size_t outsz)
{
    snprintf(out, outsz, "think_%s_%d", p->turn->interaction_id, p->thoughts);
}

static void thought_send(struct rl_agent *a, prompt_t *p)
{
    char id[128];
    int cut;

    thought_task_id(p, id, sizeof(id));
    emit(a, RL_LINE_TASK_PROGRESS, p,
         json_pack("{s:s, s:s, s:{s:o}}", "type", "task_progress", "task_id", id, "partial_result", "text",
                   rl_acp_string_cut(rl_buf_str(&p->thought), p->thought.len, RL_ACP_THOUGHT_MAX, &cut)));
    p->thought_sent_at = rl_clock_mono_ms();
    p->thought_dirty = 0;
}

/* The think task ends at the next update that is not a thought (docs/bridge.md "acp:COMMAND"). */
static void thought_close(struct rl_agent *a, prompt_t *p)
{
    char id[128];
    int cut;

    if (!p->thought_open)
        return;
    thought_task_id(p, id, sizeof(id));
    emit(a, RL_LINE_TASK_FINISH, p,
         json_pack("{s:s, s:s, s:s, s:{s:o}}", "type", "task_finish", "task_id", id, "status", "completed", "result",
                   "text", rl_acp_string_cut(rl_buf_str(&p->thought), p->thought.len, RL_ACP_THOUGHT_MAX, &cut)));
    p->thought_open = 0;
    rl_buf_reset(&p->thought);
}

static void on_thought(struct rl_agent *a, prompt_t *p, json_t *update)
{
    json_t *text = json_object_get(json_object_get(update, "content"), "text");
    size_t len = json_string_length(text), keep;
    char id[128];

    if (!json_is_string(text) || len == 0)
        return;
    if (!p->thought_open) {
        rl_bridge_break(a->bridge, p->turn);
        p->thoughts++;
        p->thought_open = 1;
        rl_buf_reset(&p->thought);
        thought_task_id(p, id, sizeof(id));
        emit(a, RL_LINE_TASK_START, p,
             json_pack("{s:s, s:s, s:s, s:s}", "type", "task_start", "task_id", id, "kind", "think", "status_label",
                       "Thinking"));
        p->thought_sent_at = 0;
    }
    /* The start is kept: past the cap a thought's text stops growing (its task says so no more). */
    keep = p->thought.cap - p->thought.len;
    if (keep > len)
        keep = len;
    if (keep > 0) {
        if (rl_buf_append(&p->thought, json_string_value(text), keep) != 0)
            return;
        p->thought_dirty = 1;
    }
    if (p->thought_dirty && rl_clock_mono_ms() - p->thought_sent_at >= THOUGHT_EVERY_MS)
        thought_send(a, p);
}

static void plan_task_id(prompt_t *p, char *out, size_t outsz)
{
    snprintf(out, outsz, "plan_%s", p->turn->interaction_id);
}

static void on_plan(struct rl_agent *a, prompt_t *p, json_t *update)
{
    json_t *entries = json_object_get(update, "entries"), *clean = json_array(), *item;
    char id[128];
    size_t i;

    json_array_foreach(entries, i, item)
    {
        json_t *entry;

        if (i == MAX_PLAN_ENTRIES)
            break;
        entry = json_pack("{s:o, s:o, s:o}", "content",
                          cut_string(json_string_value(json_object_get(item, "content")), MAX_PLAN_ENTRY), "priority",
                          opt_cut(json_object_get(item, "priority"), 16), "status",
                          opt_cut(json_object_get(item, "status"), 16));
        if (entry != NULL)
            json_array_append_new(clean, entry);
    }
    plan_task_id(p, id, sizeof(id));
    /* Every plan, not just the first, is news after the text before it (docs/bridge.md "acp:COMMAND"). */
    rl_bridge_break(a->bridge, p->turn);
    if (!p->plan_open) {
        emit(a, RL_LINE_TASK_START, p,
             json_pack("{s:s, s:s, s:s, s:s}", "type", "task_start", "task_id", id, "kind", "plan", "status_label",
                       "Plan"));
        p->plan_open = 1;
    }
    emit(a, RL_LINE_TASK_PROGRESS, p,
         json_pack("{s:s, s:s, s:{s:O}}", "type", "task_progress", "task_id", id, "partial_result", "entries", clean));
    json_decref(p->plan_entries);
    p->plan_entries = clean;
}

/* The merged tool call's content as our blocks, with its locations. */
static json_t *tool_result(tool_t *t, int with_raw_output)
{
    size_t omitted;
    json_t *locations = json_object_get(t->call, "locations");
    json_t *result = json_pack(
        "{s:o, s:o}", "content", rl_acp_content(json_object_get(t->call, "content"), RL_ACP_FIELD_MAX, &omitted),
        "locations",
        json_is_array(locations) ? rl_acp_bounded(locations, RL_ACP_VALUE_STRING_MAX, RL_ACP_VALUE_MAX) : json_array());
    if (omitted > 0)
        json_object_set_new(result, "omitted", json_integer((json_int_t)omitted));
    if (with_raw_output && json_object_get(t->call, "rawOutput") != NULL &&
        !json_is_null(json_object_get(t->call, "rawOutput")))
        json_object_set_new(
            result, "raw_output",
            rl_acp_bounded(json_object_get(t->call, "rawOutput"), RL_ACP_VALUE_STRING_MAX, RL_ACP_VALUE_MAX));
    return result;
}

static const char *tool_title(tool_t *t)
{
    const char *title = json_string_value(json_object_get(t->call, "title"));
    return title != NULL && *title != '\0' ? title : json_string_value(json_object_get(t->call, "toolCallId"));
}

/*
 * A task's name is plain to relayd even in an encrypted session (docs/api.md "Ciphertext fields"), and a
 * title is content ("Run cat ~/plan.txt"): there the task has none, its sealed status_label carries the
 * title. A plain session names it by its title, which clients show.
 */
static void tool_name(prompt_t *p, tool_t *t, json_t *line)
{
    if (line != NULL && !p->turn->encrypted)
        json_object_set_new(line, "name", cut_string(tool_title(t), RL_ACP_NAME_MAX));
}

static void tool_create(struct rl_agent *a, prompt_t *p, tool_t *t);

static void tool_finish(struct rl_agent *a, prompt_t *p, tool_t *t, const char *status, const char *why)
{
    json_t *line;

    if (t->finished)
        return;
    tool_create(a, p, t);
    t->finished = 1;
    line = json_pack("{s:s, s:O, s:s, s:o, s:o}", "type", "task_finish", "task_id",
                     json_object_get(t->call, "toolCallId"), "status", status, "status_label",
                     cut_string(tool_title(t), RL_ACP_LABEL_MAX), "result", tool_result(t, 1));
    tool_name(p, t, line);
    if (strcmp(status, "failed") == 0)
        json_object_set_new(line, "error", json_pack("{s:s}", "message", why != NULL ? why : "the tool call failed"));
    emit(a, RL_LINE_TASK_FINISH, p, line);
}

/* Merges the fields an update carries into what is known of the call (ACP: only changed fields are sent). */
static void tool_merge(tool_t *t, json_t *update)
{
    static const char *const fields[] = {"title",     "kind",     "status",    "content",
                                         "locations", "rawInput", "rawOutput", NULL};
    const char *const *f;

    for (f = fields; *f != NULL; f++) {
        json_t *v = json_object_get(update, *f);
        if (v != NULL && !json_is_null(v))
            json_object_set(t->call, *f, v);
    }
}

/* The task of a tool call: its createTask, once. */
static void tool_create(struct rl_agent *a, prompt_t *p, tool_t *t)
{
    json_t *line, *args;

    if (t->created)
        return;
    t->created = 1;
    line = json_pack("{s:s, s:O, s:s, s:o}", "type", "task_start", "task_id", json_object_get(t->call, "toolCallId"),
                     "kind", rl_acp_tool_kind(json_string_value(json_object_get(t->call, "kind"))), "status_label",
                     cut_string(tool_title(t), RL_ACP_LABEL_MAX));
    tool_name(p, t, line);
    args = rl_acp_args(json_object_get(t->call, "rawInput"));
    if (args != NULL)
        json_object_set_new(line, "args", args);
    emit(a, RL_LINE_TASK_START, p, line);
}

/*
 * A tool call announced before its input is known (Claude Code announces it
 * as the model starts writing it: rawInput {}, a generic title): its task is
 * created at the call's next update, which brings the input, since a task's
 * args cannot change after createTask.
 */
static int tool_premature(json_t *update)
{
    json_t *raw_input = json_object_get(update, "rawInput");
    const char *status = json_string_value(json_object_get(update, "status"));

    return (raw_input == NULL || json_is_null(raw_input) ||
            (json_is_object(raw_input) && json_object_size(raw_input) == 0)) &&
           json_array_size(json_object_get(update, "content")) == 0 &&
           (status == NULL || strcmp(status, "pending") == 0);
}

/* A tool call seen for the first time: its task is created, now or (premature) at its next update. */
static tool_t *tool_open(struct rl_agent *a, prompt_t *p, json_t *update, int may_wait)
{
    tool_t *t = calloc(1, sizeof(*t));

    if (t == NULL)
        return NULL;
    t->call = json_pack("{s:O}", "toolCallId", json_object_get(update, "toolCallId"));
    tool_merge(t, update);
    t->next = p->tools;
    p->tools = t;
    rl_bridge_break(a->bridge, p->turn);
    if (!may_wait || !tool_premature(update))
        tool_create(a, p, t);
    return t;
}

static const char *content_text(json_t *content)
{
    json_t *item;
    size_t i;

    json_array_foreach(content, i, item)
    {
        const char *text = json_string_value(json_object_get(json_object_get(item, "content"), "text"));
        if (text != NULL)
            return text;
    }
    return NULL;
}

/*
 * Whether an update of a call that goes on is worth an updateTask (a new
 * status, title or content: docs/bridge.md, "acp:COMMAND"). A call just created says it only when
 * it brings content or is already running: its createTask said the rest.
 */
static int tool_progressed(json_t *update, int created)
{
    const char *status = json_string_value(json_object_get(update, "status"));

    if (created)
        return json_array_size(json_object_get(update, "content")) > 0 ||
               json_array_size(json_object_get(update, "locations")) > 0 ||
               (status != NULL && strcmp(status, "in_progress") == 0);
    return status != NULL || json_is_array(json_object_get(update, "content")) ||
           json_is_array(json_object_get(update, "locations")) || json_is_string(json_object_get(update, "title"));
}

static void on_tool(struct rl_agent *a, prompt_t *p, json_t *update, int announced)
{
    const char *id = json_string_value(json_object_get(update, "toolCallId"));
    tool_t *t = tool_find(p, id);
    const char *status;
    int created = t == NULL || !t->created;

    if (id == NULL || *id == '\0')
        return;
    if (t == NULL) {
        /* An update of a call never announced is taken as its announcement. */
        t = tool_open(a, p, update, announced);
        if (t == NULL || !t->created)
            return;
    } else {
        if (t->finished)
            return;
        tool_merge(t, update);
        tool_create(a, p, t);
    }
    status = json_string_value(json_object_get(t->call, "status"));
    if (status != NULL && (strcmp(status, "completed") == 0 || strcmp(status, "failed") == 0)) {
        tool_finish(a, p, t, status, content_text(json_object_get(t->call, "content")));
        return;
    }
    if (!tool_progressed(update, created))
        return;
    emit(a, RL_LINE_TASK_PROGRESS, p,
         json_pack("{s:s, s:O, s:o, s:o}", "type", "task_progress", "task_id", json_object_get(t->call, "toolCallId"),
                   "status_label", cut_string(tool_title(t), RL_ACP_LABEL_MAX), "partial_result", tool_result(t, 0)));
}

/* What is still open when the turn ends: thoughts and plans complete, tool calls end as status says. */
static void close_items(struct rl_agent *a, prompt_t *p, const char *tool_status, const char *why)
{
    tool_t *t;
    char id[128];

    if (p->thought_open && p->thought_dirty)
        thought_send(a, p);
    thought_close(a, p);
    if (p->plan_open) {
        plan_task_id(p, id, sizeof(id));
        emit(a, RL_LINE_TASK_FINISH, p,
             json_pack("{s:s, s:s, s:s, s:{s:o}}", "type", "task_finish", "task_id", id, "status", "completed",
                       "result", "entries", p->plan_entries != NULL ? json_incref(p->plan_entries) : json_array()));
        p->plan_open = 0;
    }
    for (t = p->tools; t != NULL; t = t->next)
        tool_finish(a, p, t, tool_status, why);
}

/* ---- session/update --------------------------------------------------------------------------- */

static void on_commands(struct rl_agent *a, json_t *update)
{
    json_t *list = json_array(), *item;
    size_t i;

    json_array_foreach(json_object_get(update, "availableCommands"), i, item)
    {
        const char *name = json_string_value(json_object_get(item, "name"));
        const char *description = json_string_value(json_object_get(item, "description"));
        const char *hint = json_string_value(json_object_get(json_object_get(item, "input"), "hint"));
        json_t *command;

        if (name != NULL && name[0] == '/')
            name++;
        if (name == NULL || *name == '\0' || json_array_size(list) >= MAX_COMMANDS)
            continue;
        command = json_pack("{s:o}", "name", cut_string(name, 64));
        if (description != NULL)
            json_object_set_new(command, "description", cut_string(description, 500));
        if (hint != NULL)
            json_object_set_new(command, "input_hint", cut_string(hint, 200));
        json_array_append_new(list, command);
    }
    json_decref(a->commands);
    a->commands = list;
    send_manifest(a);
}

static void set_mode(struct rl_agent *a, const char *mode)
{
    if (mode == NULL || (a->mode != NULL && strcmp(a->mode, mode) == 0))
        return;
    free(a->mode);
    a->mode = strndup(mode, 64);
    send_manifest(a);
}

static void on_update(struct rl_agent *a, json_t *params)
{
    session_t *s = session_by_acp(a, json_string_value(json_object_get(params, "sessionId")));
    json_t *update = json_object_get(params, "update");
    rl_acp_update_t kind = rl_acp_update_of(json_string_value(json_object_get(update, "sessionUpdate")));
    prompt_t *p = running_prompt(s);

    if (!json_is_object(update))
        return;
    /*
     * Commands and the mode belong to the agent, not to a turn: they apply whenever they come, even for a session
     * whose session/new answer is still on its way (agents announce their commands as soon as it is created).
     */
    if (kind == RL_ACP_UPDATE_COMMANDS) {
        on_commands(a, update);
        return;
    }
    if (kind == RL_ACP_UPDATE_MODE) {
        const char *mode = json_string_value(json_object_get(update, "currentModeId"));
        /* The docs' example says modeId, the schema currentModeId: take either. */
        set_mode(a, mode != NULL ? mode : json_string_value(json_object_get(update, "modeId")));
        return;
    }
    /* spec (ACP session/load): the history is replayed as updates; the relay has it already. */
    if (s == NULL || s->loading || p == NULL || kind == RL_ACP_UPDATE_IGNORE)
        return;
    if (kind != RL_ACP_UPDATE_THOUGHT)
        thought_close(a, p);
    switch (kind) {
    case RL_ACP_UPDATE_TEXT: {
        json_t *text = json_object_get(json_object_get(update, "content"), "text");
        if (json_is_string(text))
            rl_bridge_text(a->bridge, p->turn, json_string_value(text), json_string_length(text));
        break;
    }
    case RL_ACP_UPDATE_THOUGHT:
        on_thought(a, p, update);
        break;
    case RL_ACP_UPDATE_TOOL_CALL:
    case RL_ACP_UPDATE_TOOL_UPDATE:
        on_tool(a, p, update, kind == RL_ACP_UPDATE_TOOL_CALL);
        break;
    case RL_ACP_UPDATE_PLAN:
        on_plan(a, p, update);
        break;
    default:
        break;
    }
}

/* ---- permissions ------------------------------------------------------------------------------ */

/* The verb of the approval's sentence for each tool kind. */
static const struct {
    const char *kind, *verb;
} verbs[] = {
    {"read", "read"},         {"edit", "edit"},     {"delete", "delete"},
    {"move", "move"},         {"search", "search"}, {"execute", "run"},
    {"think", "think about"}, {"fetch", "fetch"},   {"switch_mode", "switch mode:"},
    {"other", "use a tool:"},
};

static void answer_permission(struct rl_agent *a, permission_t *perm, const char *option_id)
{
    json_t *outcome = option_id != NULL ? json_pack("{s:s, s:s}", "outcome", "selected", "optionId", option_id)
                                        : json_pack("{s:s}", "outcome", "cancelled");

    send_msg(a, rl_jsonrpc_result(perm->rpc_id, json_pack("{s:o}", "outcome", outcome)));
}

static void permission_done(struct rl_agent *a, permission_t *done)
{
    permission_t **pp;

    for (pp = &a->permissions; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == done) {
            *pp = done->next;
            break;
        }
    }
    json_decref(done->rpc_id);
    json_decref(done->options);
    free(done);
}

static void on_permission(struct rl_agent *a, json_t *id, json_t *params)
{
    session_t *s = session_by_acp(a, json_string_value(json_object_get(params, "sessionId")));
    prompt_t *p = running_prompt(s);
    json_t *call = json_object_get(params, "toolCall"), *line, *blocks;
    const char *call_id = json_string_value(json_object_get(call, "toolCallId"));
    const char *kind, *verb = "use a tool:";
    permission_t *perm;
    tool_t *t;
    char *command, key[37], message[8400];
    size_t omitted, i, n;

    if (!json_is_array(json_object_get(params, "options")) || call_id == NULL) {
        answer_error(a, id, RL_JSONRPC_INVALID_PARAMS, "session/request_permission needs toolCall and options");
        return;
    }
    /* Outside a turn (a stale request, or one during session/load) nobody can be asked. */
    if (p == NULL || p->cancelled || s->loading) {
        send_msg(a, rl_jsonrpc_result(id, json_pack("{s:{s:s}}", "outcome", "outcome", "cancelled")));
        return;
    }
    thought_close(a, p);
    t = tool_find(p, call_id);
    if (t == NULL) {
        t = tool_open(a, p, call, 0);
    } else {
        tool_merge(t, call);
        tool_create(a, p, t);
    }
    perm = calloc(1, sizeof(*perm));
    if (t == NULL || perm == NULL) {
        free(perm);
        answer_error(a, id, RL_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    perm->rpc_id = json_incref(id);
    perm->options = json_incref(json_object_get(params, "options"));
    perm->prompt = p;
    /* apr_ and the 32 hex digits of a random UUID (docs/bridge.md "acp:COMMAND", permissions). */
    rl_rest_new_key(key);
    memcpy(perm->approval_id, "apr_", 4);
    for (i = 0, n = 4; key[i] != '\0' && n < sizeof(perm->approval_id) - 1; i++)
        if (key[i] != '-')
            perm->approval_id[n++] = key[i];
    perm->approval_id[n] = '\0';
    perm->next = a->permissions;
    a->permissions = perm;

    kind = rl_acp_tool_kind(json_string_value(json_object_get(t->call, "kind")));
    for (i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
        if (strcmp(verbs[i].kind, kind) == 0)
            verb = verbs[i].verb;
    command = rl_acp_command_of(kind, t->call);
    snprintf(message, sizeof(message), "The agent asks to %s %s", verb, command != NULL ? command : "");
    blocks = rl_acp_content(json_object_get(t->call, "content"), RL_ACP_FIELD_MAX, &omitted);
    while (json_array_size(blocks) > MAX_CONTENT_BLOCKS)
        json_array_remove(blocks, MAX_CONTENT_BLOCKS);
    /* The relay's cap on message is 4000 characters: 4000 bytes, cut between two characters, fit. */
    line = json_pack("{s:s, s:s, s:s, s:o, s:o, s:s, s:s?, s:O, s:o}", "type", "approval_request", "approval_id",
                     perm->approval_id, "action", kind, "title", cut_string(tool_title(t), RL_ACP_LABEL_MAX), "message",
                     cut_string(message, 4000), "severity", rl_acp_severity(kind), "command", command, "tool_call_id",
                     json_object_get(t->call, "toolCallId"), "content", blocks);
    free(command);
    if (line == NULL) {
        /* Nobody can be asked: the agent must not wait for ever. */
        rl_log(RL_LOG_WARN, "acp: a permission request could not be passed on: answered cancelled");
        answer_permission(a, perm, NULL);
        permission_done(a, perm);
        return;
    }
    emit(a, RL_LINE_APPROVAL_REQUEST, p, line);
}

/* The relay's answer (a decision, an expiry, or an auto-resolution) reaches the agent's request. */
static void acp_notify(rl_agent_t *a, json_t *line)
{
    const char *type = json_string_value(json_object_get(line, "type"));
    const char *approval_id = json_string_value(json_object_get(line, "approval_id"));
    rl_acp_decision_t decision;
    permission_t *perm;

    if (type == NULL || approval_id == NULL)
        return;
    if (strcmp(type, "approval") == 0)
        decision = rl_acp_decision_of(json_string_value(json_object_get(line, "decision")));
    else if (strcmp(type, "approval_expired") == 0)
        decision = RL_ACP_EXPIRED;
    else
        return;
    for (perm = a->permissions; perm != NULL; perm = perm->next) {
        if (strcmp(perm->approval_id, approval_id) == 0) {
            answer_permission(a, perm, rl_acp_option_for(perm->options, decision));
            permission_done(a, perm);
            return;
        }
    }
}

/* ---- fs methods: inside the working folder only (acp_fs.c) ------------------------------------ */

/* A file the agent touched, for the session's file list (encrypted sessions only: rl_bridge_tool_file). */
static void tell_file(struct rl_agent *a, json_t *params, const char *tool)
{
    session_t *s = session_by_acp(a, json_string_value(json_object_get(params, "sessionId")));

    if (s != NULL && s->relay_id[0] != '\0')
        rl_bridge_tool_file(a->bridge, s->relay_id, tool, json_string_value(json_object_get(params, "path")));
}

static void on_read(struct rl_agent *a, json_t *id, json_t *params)
{
    const char *why = NULL;
    json_t *content = NULL;
    int code = rl_acp_fs_read(a->root, json_string_value(json_object_get(params, "path")),
                              json_integer_value(json_object_get(params, "line")),
                              json_integer_value(json_object_get(params, "limit")), &content, &why);

    if (code != 0) {
        rl_log(RL_LOG_INFO, "acp agent: fs/read_text_file refused: %s", why);
        answer_error(a, id, code, why);
        return;
    }
    tell_file(a, params, "read");
    send_msg(a, rl_jsonrpc_result(id, json_pack("{s:o}", "content", content)));
}

static void on_write(struct rl_agent *a, json_t *id, json_t *params)
{
    json_t *content = json_object_get(params, "content");
    const char *why = "fs/write_text_file needs path and content";
    int code = json_is_string(content) ? rl_acp_fs_write(a->root, json_string_value(json_object_get(params, "path")),
                                                         json_string_value(content), json_string_length(content), &why)
                                       : RL_JSONRPC_INVALID_PARAMS;

    if (code != 0) {
        rl_log(RL_LOG_INFO, "acp agent: fs/write_text_file refused: %s", why);
        answer_error(a, id, code, why);
        return;
    }
    tell_file(a, params, "write");
    send_msg(a, rl_jsonrpc_result(id, NULL));
}

/* ---- attachments fetched for the prompt ------------------------------------------------------- */

/* What to fetch of an attachment for an agent with these capabilities: "image", "text" or NULL (a link will do). */
static const char *inline_kind(struct rl_agent *a, json_t *attachment, long *max)
{
    const char *mime = json_string_value(json_object_get(attachment, "mime"));
    json_int_t size = json_integer_value(json_object_get(attachment, "size"));

    if (mime == NULL || !json_is_string(json_object_get(attachment, "url")))
        return NULL;
    if (a->image && strncmp(mime, "image/", 6) == 0 && size <= FETCH_IMAGE_MAX) {
        *max = FETCH_IMAGE_MAX;
        return "image";
    }
    if (a->embedded_context && strncmp(mime, "text/", 5) == 0 && size <= FETCH_TEXT_MAX) {
        *max = FETCH_TEXT_MAX;
        return "text";
    }
    return NULL;
}

/* One GET of an absolute URL with the client core: the body, or NULL. */
static char *fetch_url(const char *url, long max, size_t *len, const int *stop)
{
    rl_client_options_t options = {5000, FETCH_TIMEOUT_MS, (size_t)max, "relay-bridge", stop};
    rl_client_response_t response;
    char *body = NULL;

    if (rl_client_get_url(url, &options, &response) == 0 && response.status == 200) {
        body = response.body;
        *len = response.len;
        response.body = NULL;
    } else {
        rl_log(RL_LOG_WARN, "acp: could not fetch an attachment (HTTP %ld %s): sent as a link", response.status,
               response.error);
    }
    rl_client_response_free(&response);
    return body;
}

static const rl_job_kind_t fetch_kind = {"attachment fetch", 0, 0};

static void fetch_run(rl_job_t *job)
{
    fetch_t *f = (fetch_t *)job;
    json_t *want;
    size_t i;

    json_array_foreach(f->wanted, i, want)
    {
        const char *as = json_string_value(json_object_get(want, "as"));
        const char *url = json_string_value(json_object_get(want, "url"));
        json_t *block = NULL;
        size_t len = 0;
        char *body = as != NULL ? fetch_url(url, (long)json_integer_value(json_object_get(want, "max")), &len,
                                            rl_jobs_stop_flag(job->jobs))
                                : NULL;

        if (body != NULL && strcmp(as, "image") == 0) {
            char *data = malloc(4 * ((len + 2) / 3) + 1);
            if (data != NULL) {
                EVP_EncodeBlock((unsigned char *)data, (const unsigned char *)body, (int)len);
                block = json_pack("{s:s, s:s, s:O, s:s}", "type", "image", "data", data, "mimeType",
                                  json_object_get(want, "mime"), "uri", url);
            }
            free(data);
        } else if (body != NULL) {
            json_t *text = json_stringn(body, len);
            /* Not UTF-8 after all: the link will do. */
            if (text != NULL)
                block = json_pack("{s:s, s:{s:s, s:O, s:o}}", "type", "resource", "resource", "uri", url, "mimeType",
                                  json_object_get(want, "mime"), "text", text);
        }
        free(body);
        json_array_append_new(f->blocks, block != NULL ? block : json_null());
    }
}

/* A fetch is back: its blocks go to its prompt, which may now be sent. */
static void fetch_done(rl_job_t *job)
{
    fetch_t *done = (fetch_t *)job, **pp;
    struct rl_agent *a = done->agent;
    session_t *s;
    int stopped = job->stopped;

    for (pp = &a->fetches; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == done) {
            *pp = done->next;
            break;
        }
    }
    if (done->prompt != NULL) {
        done->prompt->fetch = NULL;
        if (!stopped)
            done->prompt->inline_blocks = json_incref(done->blocks);
    }
    json_decref(done->wanted);
    json_decref(done->blocks);
    free(done);
    for (s = a->sessions; !stopped && s != NULL; s = s->next)
        pump(a, s);
}

/* Starts fetching p's attachments that go inline; the prompt waits for them. Nothing to fetch: nothing done. */
static void fetch_start(struct rl_agent *a, prompt_t *p)
{
    json_t *wanted = json_array(), *item;
    fetch_t *f;
    size_t i, count = 0;
    long max = 0;

    json_array_foreach(json_object_get(p->message, "attachments"), i, item)
    {
        const char *as = inline_kind(a, item, &max);
        if (as != NULL) {
            json_array_append_new(wanted,
                                  json_pack("{s:s, s:O, s:O, s:I}", "as", as, "url", json_object_get(item, "url"),
                                            "mime", json_object_get(item, "mime"), "max", (json_int_t)max));
            count++;
        } else {
            json_array_append_new(wanted, json_null());
        }
    }
    f = count > 0 ? calloc(1, sizeof(*f)) : NULL;
    if (f == NULL) {
        json_decref(wanted);
        return;
    }
    f->wanted = wanted;
    f->blocks = json_array();
    f->prompt = p;
    f->agent = a;
    f->job.kind = &fetch_kind;
    f->job.run = fetch_run;
    f->job.done = fetch_done;
    if (rl_bridge_jobs(a->bridge) == NULL || rl_jobs_submit(rl_bridge_jobs(a->bridge), &f->job) != 0) {
        json_decref(f->wanted);
        json_decref(f->blocks);
        free(f);
        return;
    }
    p->fetch = f;
    f->next = a->fetches;
    a->fetches = f;
}

/* ---- the agent's messages --------------------------------------------------------------------- */

/* Requests from the agent this client serves; any other is answered -32601 (JSON-RPC: method not found). */
static const struct {
    const char *method;
    void (*serve)(struct rl_agent *a, json_t *id, json_t *params);
} served[] = {
    {"session/request_permission", on_permission},
    {"fs/read_text_file", on_read},
    {"fs/write_text_file", on_write},
};

/* The prompt a user message becomes: its text, then its attachments as the agent can take them. */
static json_t *prompt_blocks(struct rl_agent *a, json_t *message, json_t *inline_blocks)
{
    json_t *blocks = json_array(), *item;
    const char *text = json_string_value(json_object_get(message, "text"));
    size_t i;

    (void)a;
    if (text != NULL && *text != '\0')
        json_array_append_new(blocks, json_pack("{s:s, s:s}", "type", "text", "text", text));
    /*
     * spec (ACP prompt capabilities): images go inline to an agent that takes them, text files as embedded resources
     * to one that takes embedded context (both fetched beforehand); anything else, and any fetch that failed, as a
     * resource_link, which every agent takes: the file then stays behind its signed link.
     */
    json_array_foreach(json_object_get(message, "attachments"), i, item)
    {
        json_t *fetched = json_array_get(inline_blocks, i), *link;
        if (json_is_object(fetched)) {
            json_array_append(blocks, fetched);
            continue;
        }
        link = json_pack("{s:s, s:O?, s:O?, s:O?, s:O?}", "type", "resource_link", "uri", json_object_get(item, "url"),
                         "name", json_object_get(item, "name"), "mimeType", json_object_get(item, "mime"), "size",
                         json_object_get(item, "size"));
        if (link != NULL && json_is_string(json_object_get(link, "uri"))) {
            if (!json_is_string(json_object_get(link, "name")))
                json_object_set(link, "name", json_object_get(link, "uri"));
            json_array_append_new(blocks, link);
        } else {
            json_decref(link);
        }
    }
    if (json_array_size(blocks) == 0)
        json_array_append_new(blocks, json_pack("{s:s, s:s}", "type", "text", "text", ""));
    return blocks;
}

static void pump(struct rl_agent *a, session_t *s)
{
    prompt_t *p = s->queue;

    if (!a->initialized || s->state != SESSION_READY || s->running || p == NULL || p->fetch != NULL)
        return;
    s->running = 1;
    request(a, REQ_PROMPT, "session/prompt",
            json_pack("{s:s, s:o}", "sessionId", s->acp_id, "prompt", prompt_blocks(a, p->message, p->inline_blocks)),
            s, p);
}

/*
 * Why a request failed, as the agent said: the error's message and its data
 * (an adapter's real reason is there: the ACP SDK answers an exception as
 * "Internal error" with data {"details": its message}), each cut.
 */
static void error_reason(rl_jsonrpc_msg_t *msg, char *out, size_t outsz)
{
    static const char *const detail_keys[] = {"details", "message", "error", NULL};
    json_t *data = json_object_get(msg->error, "data"), *message, *detail = NULL;
    const char *text = NULL;
    char *dumped = NULL;
    size_t i;

    message = cut_string(rl_jsonrpc_error_message(msg), ERROR_MESSAGE_MAX);
    if (json_is_string(data))
        text = json_string_value(data);
    for (i = 0; text == NULL && json_is_object(data) && detail_keys[i] != NULL; i++)
        text = json_string_value(json_object_get(data, detail_keys[i]));
    if (text == NULL && data != NULL && !json_is_null(data)) {
        dumped = json_dumps(data, JSON_COMPACT | JSON_ENCODE_ANY);
        text = dumped;
    }
    if (text != NULL && *text != '\0')
        detail = cut_string(text, ERROR_DATA_MAX);
    snprintf(out, outsz, "%s%s%s%s", json_string_value(message), detail != NULL ? " (" : "",
             detail != NULL ? json_string_value(detail) : "", detail != NULL ? ")" : "");
    json_decref(message);
    json_decref(detail);
    free(dumped);
}

/*
 * head, then what the agent wrote last on stderr (STDERR_TAIL at most), into
 * out: the text the user reads of a failure. It goes as the reply's text, so
 * an encrypted session's is sealed like any other (docs/bridge.md).
 */
static void failure_text(struct rl_agent *a, const char *head, char *out, size_t outsz)
{
    const char *tail = rl_child_stderr_tail(a->child);
    int n;

    n = snprintf(out, outsz, "%s", head);
    if (tail[0] != '\0' && n >= 0 && (size_t)n < outsz)
        snprintf(out + n, outsz - (size_t)n, "\n\nThe agent's last lines on stderr:\n%s", tail);
}

/* The stderr before a success, or already reported, explains no later failure. */
static void tail_reset(struct rl_agent *a)
{
    rl_child_stderr_forget(a->child);
}

static void open_session(struct rl_agent *a, session_t *s)
{
    const char *known;

    if (!a->initialized || s->state != SESSION_CLOSED)
        return;
    known = s->acp_id != NULL ? s->acp_id
                              : json_string_value(json_object_get(json_object_get(a->state, "sessions"), s->relay_id));
    s->state = SESSION_OPENING;
    /* spec (ACP session/load): only when the agent says it can. */
    if (known != NULL && a->load_session) {
        if (s->acp_id == NULL)
            s->acp_id = strdup(known);
        s->loading = 1;
        request(a, REQ_LOAD, "session/load",
                json_pack("{s:s, s:s, s:[]}", "sessionId", known, "cwd", a->root, "mcpServers"), s, NULL);
        return;
    }
    request(a, REQ_NEW, "session/new", json_pack("{s:s, s:[]}", "cwd", a->root, "mcpServers"), s, NULL);
}

/* Ends p's reply and takes it off its session; the next prompt of the session goes. */
static void end_prompt(struct rl_agent *a, session_t *s, prompt_t *p, const char *finish_reason, json_t *usage,
                       const char *error_text)
{
    if (s->queue == p)
        s->running = 0;
    rl_bridge_finish(a->bridge, p->turn, finish_reason, usage, error_text);
    prompt_free(a, s, p);
}

static void fail_queue(struct rl_agent *a, session_t *s, const char *error_text)
{
    while (s->queue != NULL) {
        close_items(a, s->queue, "failed", error_text);
        end_prompt(a, s, s->queue, "error", NULL, error_text);
    }
}

static void log_auth(struct rl_agent *a)
{
    json_t *m;
    size_t i;

    rl_log(RL_LOG_ERROR, "the acp agent needs a login before it can start a session: log in with the agent's own "
                         "command on this machine (as the user relay-bridge runs as), then send the message again");
    json_array_foreach(a->auth_methods, i, m) rl_log(
        RL_LOG_ERROR, "acp agent login method %s: %s%s%s", json_string_value(json_object_get(m, "id")),
        json_string_value(json_object_get(m, "name")) != NULL ? json_string_value(json_object_get(m, "name")) : "",
        json_string_value(json_object_get(m, "description")) != NULL ? " - " : "",
        json_string_value(json_object_get(m, "description")) != NULL
            ? json_string_value(json_object_get(m, "description"))
            : "");
}

static void on_initialized(struct rl_agent *a, rl_jsonrpc_msg_t *msg)
{
    json_t *caps = json_object_get(msg->result, "agentCapabilities");
    json_t *prompt_caps = json_object_get(caps, "promptCapabilities");
    json_int_t version = json_integer_value(json_object_get(msg->result, "protocolVersion"));
    session_t *s;
    char why[160];

    if (msg->error != NULL) {
        snprintf(why, sizeof(why), "the acp agent refused initialize: %.100s", rl_jsonrpc_error_message(msg));
        rl_bridge_fail(a->bridge, why);
        return;
    }
    if (version != ACP_PROTOCOL_VERSION) {
        snprintf(why, sizeof(why), "the acp agent speaks protocol version %lld; relay-bridge speaks %d",
                 (long long)version, ACP_PROTOCOL_VERSION);
        rl_bridge_fail(a->bridge, why);
        return;
    }
    a->initialized = 1;
    a->load_session = json_is_true(json_object_get(caps, "loadSession"));
    a->image = json_is_true(json_object_get(prompt_caps, "image"));
    a->embedded_context = json_is_true(json_object_get(prompt_caps, "embeddedContext"));
    json_decref(a->auth_methods);
    a->auth_methods = json_incref(json_object_get(msg->result, "authMethods"));
    json_decref(a->agent_info);
    a->agent_info = json_incref(json_object_get(msg->result, "agentInfo"));
    rl_log(RL_LOG_INFO, "acp agent %s %s ready (loadSession %s, images %s)",
           json_string_value(json_object_get(a->agent_info, "name")) != NULL
               ? json_string_value(json_object_get(a->agent_info, "name"))
               : "(unnamed)",
           json_string_value(json_object_get(a->agent_info, "version")) != NULL
               ? json_string_value(json_object_get(a->agent_info, "version"))
               : "",
           a->load_session ? "yes" : "no", a->image ? "yes" : "no");
    send_manifest(a);
    for (s = a->sessions; s != NULL; s = s->next) {
        prompt_t *p;
        /* Messages that came while no agent ran: their attachments wait for the capabilities known now. */
        for (p = s->queue; p != NULL; p = p->next)
            if (p->fetch == NULL && p->inline_blocks == NULL)
                fetch_start(a, p);
        if (s->queue != NULL)
            open_session(a, s);
    }
}

/*
 * The login the bridge can give on its own: a method of type "env_var"
 * (Codex's, not yet in the public schema) whose variables are all set in
 * the bridge's environment, so that the agent's key is one the user gave
 * on purpose. Interactive methods ("agent", "terminal") are never tried.
 */
static const char *env_auth_method(struct rl_agent *a)
{
    json_t *method, *var;
    size_t i, k;

    json_array_foreach(a->auth_methods, i, method)
    {
        const char *type = json_string_value(json_object_get(method, "type"));
        json_t *vars = json_object_get(method, "vars");
        int ready = json_array_size(vars) > 0;

        if (type == NULL || strcmp(type, "env_var") != 0 || json_string_value(json_object_get(method, "id")) == NULL)
            continue;
        json_array_foreach(vars, k, var)
        {
            const char *name =
                json_is_string(var) ? json_string_value(var) : json_string_value(json_object_get(var, "name"));
            const char *value = name != NULL ? getenv(name) : NULL;
            if (value == NULL || *value == '\0')
                ready = 0;
        }
        if (ready)
            return json_string_value(json_object_get(method, "id"));
    }
    return NULL;
}

/*
 * A session/new refused for want of a login: authenticate once with an
 * env_var method, then sessions are opened again. 1 when that is under way
 * (the session waits), 0 when the user must log in.
 */
static int authenticate(struct rl_agent *a)
{
    const char *method = env_auth_method(a);

    if (a->auth == AUTH_PENDING)
        return 1;
    if (a->auth != AUTH_NONE || method == NULL)
        return 0;
    a->auth = AUTH_PENDING;
    rl_log(RL_LOG_INFO, "acp agent wants a login: authenticate with %s (its variables are set)", method);
    request(a, REQ_AUTHENTICATE, "authenticate", json_pack("{s:s}", "methodId", method), NULL, NULL);
    return 1;
}

static void on_authenticated(struct rl_agent *a, rl_jsonrpc_msg_t *msg)
{
    session_t *s;

    a->auth = msg->error != NULL ? AUTH_FAILED : AUTH_DONE;
    if (msg->error != NULL) {
        rl_log(RL_LOG_ERROR, "acp agent refused authenticate: %s", rl_jsonrpc_error_message(msg));
        log_auth(a);
    }
    for (s = a->sessions; s != NULL; s = s->next) {
        if (s->state != SESSION_CLOSED || s->queue == NULL)
            continue;
        if (a->auth == AUTH_DONE)
            open_session(a, s);
        else
            fail_queue(a, s, LOGIN_TEXT);
    }
}

static void on_session_opened(struct rl_agent *a, request_t *r, rl_jsonrpc_msg_t *msg)
{
    session_t *s = r->session;
    const char *acp_id;
    char reason[ERROR_MESSAGE_MAX + ERROR_DATA_MAX + 8], head[sizeof(reason) + 64], why[FAILURE_TEXT_MAX];

    if (s == NULL)
        return;
    if (r->kind == REQ_LOAD) {
        s->loading = 0;
        if (msg->error != NULL) {
            rl_log(RL_LOG_WARN, "acp agent could not load session %s (%s): starting a new one", s->acp_id,
                   rl_jsonrpc_error_message(msg));
            free(s->acp_id);
            s->acp_id = NULL;
            state_set(a, s->relay_id, NULL);
            s->state = SESSION_CLOSED;
            open_session(a, s);
            return;
        }
        rl_log(RL_LOG_INFO, "acp session %s loaded for relay session %s", s->acp_id, s->relay_id);
    } else {
        acp_id = json_string_value(json_object_get(msg->result, "sessionId"));
        if (msg->error != NULL || acp_id == NULL) {
            s->state = SESSION_CLOSED;
            if (rl_jsonrpc_error_code(msg) == RL_JSONRPC_AUTH_REQUIRED) {
                if (authenticate(a))
                    return;
                log_auth(a);
                fail_queue(a, s, LOGIN_TEXT);
                return;
            }
            if (msg->error != NULL)
                error_reason(msg, reason, sizeof(reason));
            else
                snprintf(reason, sizeof(reason), "no sessionId");
            rl_log(RL_LOG_WARN, "the acp agent could not start a session for relay session %s: %s", s->relay_id,
                   reason);
            snprintf(head, sizeof(head), "[the agent could not start a session: %s]", reason);
            failure_text(a, head, why, sizeof(why));
            tail_reset(a);
            fail_queue(a, s, why);
            return;
        }
        free(s->acp_id);
        s->acp_id = strdup(acp_id);
        state_set(a, s->relay_id, acp_id);
        set_mode(a, json_string_value(json_object_get(json_object_get(msg->result, "modes"), "currentModeId")));
        rl_log(RL_LOG_INFO, "acp session %s opened for relay session %s", s->acp_id, s->relay_id);
        tail_reset(a);
    }
    s->state = SESSION_READY;
    pump(a, s);
}

static void on_prompted(struct rl_agent *a, request_t *r, rl_jsonrpc_msg_t *msg)
{
    session_t *s = r->session;
    prompt_t *p = r->prompt;
    const char *stop = json_string_value(json_object_get(msg->result, "stopReason"));
    const char *finish;
    json_t *usage;
    char reason[ERROR_MESSAGE_MAX + ERROR_DATA_MAX + 8], head[sizeof(reason) + 64], why[FAILURE_TEXT_MAX];

    if (s == NULL || p == NULL)
        return;
    if (msg->error != NULL && !p->cancelled) {
        /* Claude Code, say, creates sessions without a login and refuses the prompt. */
        if (rl_jsonrpc_error_code(msg) == RL_JSONRPC_AUTH_REQUIRED) {
            log_auth(a);
            snprintf(head, sizeof(head), "%s", LOGIN_TEXT);
            snprintf(why, sizeof(why), "%s", LOGIN_TEXT);
        } else {
            error_reason(msg, reason, sizeof(reason));
            rl_log(RL_LOG_WARN, "the acp agent failed a prompt of relay session %s: %s", s->relay_id, reason);
            snprintf(head, sizeof(head), "[the agent failed: %s]", reason);
            failure_text(a, head, why, sizeof(why));
        }
        tail_reset(a);
        close_items(a, p, "failed", head);
        end_prompt(a, s, p, "error", NULL, why);
        pump(a, s);
        return;
    }
    /* spec (ACP cancellation): an agent may answer an aborted turn with an error; it was still a cancel. */
    finish = p->cancelled && (msg->error != NULL || stop == NULL) ? "cancelled" : rl_acp_finish_reason(stop);
    usage = rl_acp_usage(json_object_get(msg->result, "usage"));
    close_items(a, p, strcmp(finish, "cancelled") == 0 ? "cancelled" : "completed", NULL);
    end_prompt(a, s, p, finish, usage, NULL);
    tail_reset(a);
    json_decref(usage);
    rl_child_backoff_reset(a->child);
    pump(a, s);
}

static void on_response(struct rl_agent *a, rl_jsonrpc_msg_t *msg)
{
    request_t **rp, *r = NULL;

    for (rp = &a->requests; json_is_integer(msg->id) && *rp != NULL; rp = &(*rp)->next) {
        if ((*rp)->id == json_integer_value(msg->id)) {
            r = *rp;
            *rp = r->next;
            break;
        }
    }
    if (r == NULL) {
        rl_log(RL_LOG_DEBUG, "acp agent answered a request we did not send");
        return;
    }
    switch (r->kind) {
    case REQ_INITIALIZE:
        on_initialized(a, msg);
        break;
    case REQ_AUTHENTICATE:
        on_authenticated(a, msg);
        break;
    case REQ_NEW:
    case REQ_LOAD:
        on_session_opened(a, r, msg);
        break;
    case REQ_PROMPT:
        on_prompted(a, r, msg);
        break;
    }
    free(r);
}

static void on_line(void *user, const char *line, size_t len)
{
    struct rl_agent *a = user;
    rl_jsonrpc_msg_t msg;
    json_t *bad_id = NULL;
    char err[160];
    size_t i;
    int code;

    if (len == 0)
        return;
    code = rl_jsonrpc_parse(line, len, &msg, &bad_id, err, sizeof(err));
    if (code != 0) {
        rl_log(RL_LOG_WARN, "acp agent: a message ignored: %s", err);
        /* spec (JSON-RPC 2.0 §5.1): a parse error or an invalid request is answered, with the id when known. */
        answer_error(a, bad_id, code, code == RL_JSONRPC_PARSE_ERROR ? "Parse error" : "Invalid Request");
        json_decref(bad_id);
        return;
    }
    switch (msg.kind) {
    case RL_JSONRPC_RESPONSE:
        on_response(a, &msg);
        break;
    case RL_JSONRPC_NOTIFICATION:
        if (strcmp(msg.method, "session/update") == 0 && json_is_object(msg.params))
            on_update(a, msg.params);
        else
            rl_log(RL_LOG_DEBUG, "acp agent: notification %s ignored", msg.method);
        break;
    case RL_JSONRPC_REQUEST:
        for (i = 0; i < sizeof(served) / sizeof(served[0]); i++) {
            if (strcmp(served[i].method, msg.method) == 0) {
                if (json_is_object(msg.params))
                    served[i].serve(a, msg.id, msg.params);
                else
                    answer_error(a, msg.id, RL_JSONRPC_INVALID_PARAMS, "params must be an object");
                break;
            }
        }
        if (i == sizeof(served) / sizeof(served[0])) {
            rl_log(RL_LOG_INFO, "acp agent asked for %.80s, which relay-bridge does not serve", msg.method);
            answer_error(a, msg.id, RL_JSONRPC_METHOD_NOT_FOUND, "Method not found");
        }
        break;
    }
    rl_jsonrpc_msg_free(&msg);
}

/* ---- the process ------------------------------------------------------------------------------ */

static void on_started(void *user)
{
    struct rl_agent *a = user;

    a->auth = AUTH_NONE;
    rl_log(RL_LOG_INFO, "started the acp agent (pid %d) in %s", (int)rl_child_pid(a->child), a->root);
    request(a, REQ_INITIALIZE, "initialize",
            json_pack("{s:i, s:{s:{s:b, s:b}, s:b}, s:{s:s, s:s, s:s}}", "protocolVersion", ACP_PROTOCOL_VERSION,
                      "clientCapabilities", "fs", "readTextFile", 1, "writeTextFile", 1, "terminal", 0, "clientInfo",
                      "name", "relay-bridge", "title", "Relay", "version", RL_VERSION),
            NULL, NULL);
}

/* The process is gone: what it was doing ends with an error the user sees; what waits for it stays queued. */
static void agent_gone(struct rl_agent *a, const char *why)
{
    session_t *s;
    char head[300], text[FAILURE_TEXT_MAX], early[FAILURE_TEXT_MAX];
    int started;

    snprintf(head, sizeof(head), "[%s; relay-bridge restarts it: send the message again]", why);
    failure_text(a, head, text, sizeof(text));
    snprintf(head, sizeof(head), "[the agent could not start: %s; see relay-bridge's log]", why);
    failure_text(a, head, early, sizeof(early));
    tail_reset(a);
    started = a->initialized;
    a->initialized = 0;
    while (a->requests != NULL) {
        request_t *r = a->requests;
        a->requests = r->next;
        free(r);
    }
    while (a->permissions != NULL)
        permission_done(a, a->permissions);
    for (s = a->sessions; s != NULL; s = s->next) {
        prompt_t *p = running_prompt(s);
        s->state = SESSION_CLOSED;
        s->loading = 0;
        if (p != NULL) {
            close_items(a, p, "failed", why);
            end_prompt(a, s, p, "error", NULL, text);
        }
        /* An agent that dies before it even answers initialize will most likely do so again: nobody waits for it. */
        if (!started)
            fail_queue(a, s, early);
    }
}

/* ---- the adapter ------------------------------------------------------------------------------ */

/*
 * A variable of the bridge's environment (the agent's too) that makes an agent
 * fail in a way it does not explain: Claude Code run as root refuses its
 * session unless IS_SANDBOX is exactly 1, while claude-agent-acp takes any
 * value as leave to skip permissions; the session then fails as "Internal
 * error" (docs/bridge.md "Claude Code").
 */
static void warn_environment(void)
{
    const char *sandbox = getenv("IS_SANDBOX");

    if (geteuid() == 0 && sandbox != NULL && strcmp(sandbox, "1") != 0)
        rl_log(RL_LOG_WARN,
               "IS_SANDBOX=%.16s in the environment of root: Claude Code then refuses to start a session "
               "(it accepts only IS_SANDBOX=1 as root): unset it or set it to 1",
               sandbox);
}

static int acp_create(rl_bridge_t *bridge, const char *arg, rl_agent_t **out)
{
    struct rl_agent *a = calloc(1, sizeof(*a));
    const char *cwd = rl_bridge_cwd(bridge);

    if (a == NULL)
        return -1;
    a->bridge = bridge;
    a->command = strdup(arg);
    if (realpath(cwd != NULL ? cwd : ".", a->root) == NULL) {
        rl_log(RL_LOG_ERROR, "--cwd %s: %s", cwd != NULL ? cwd : ".", strerror(errno));
        goto fail;
    }
    if (a->command == NULL)
        goto fail;
    a->child = new_child(a);
    if (a->child == NULL)
        goto fail;
    state_load(a);
    warn_environment();
    rl_child_start(a->child);
    *out = a;
    return 0;
fail:
    free(a->command);
    free(a);
    return -1;
}

static void acp_message(rl_agent_t *a, rl_turn_t *turn, json_t *payload)
{
    session_t *s = session_by_relay(a, turn->session_id);
    prompt_t *p = calloc(1, sizeof(*p)), **tail;

    if (s == NULL) {
        s = calloc(1, sizeof(*s));
        if (s == NULL) {
            free(p);
            rl_bridge_finish(a->bridge, turn, "error", NULL, "[out of memory]");
            return;
        }
        snprintf(s->relay_id, sizeof(s->relay_id), "%s", turn->session_id);
        s->next = a->sessions;
        a->sessions = s;
    }
    if (p == NULL) {
        rl_bridge_finish(a->bridge, turn, "error", NULL, "[out of memory]");
        return;
    }
    rl_turn_ref(turn);
    p->turn = turn;
    rl_buf_init(&p->thought, RL_ACP_THOUGHT_MAX + 4);
    p->message = json_incref(json_object_get(payload, "message"));
    /* spec (ACP prompt turn): one prompt at a time per session; the next waits for the answer. */
    for (tail = &s->queue; *tail != NULL; tail = &(*tail)->next)
        ;
    *tail = p;
    if (a->initialized)
        fetch_start(a, p);
    open_session(a, s);
    pump(a, s);
}

static void acp_cancel(rl_agent_t *a, const char *session_id, const char *interaction_id)
{
    session_t *s = session_by_relay(a, session_id);
    prompt_t *p, *next;
    permission_t *perm, *perm_next;

    if (s == NULL)
        return;
    for (p = s->queue; p != NULL; p = next) {
        next = p->next;
        if (interaction_id[0] != '\0' && strcmp(p->turn->interaction_id, interaction_id) != 0)
            continue;
        if (p == running_prompt(s)) {
            if (p->cancelled)
                continue;
            p->cancelled = 1;
            /* spec (ACP cancellation): pending permission requests are answered "cancelled". */
            for (perm = a->permissions; perm != NULL; perm = perm_next) {
                perm_next = perm->next;
                if (perm->prompt == p) {
                    answer_permission(a, perm, NULL);
                    permission_done(a, perm);
                }
            }
            send_msg(a, rl_jsonrpc_notification("session/cancel", json_pack("{s:s}", "sessionId", s->acp_id)));
        } else {
            end_prompt(a, s, p, "cancelled", NULL, NULL);
        }
    }
}

/* The process ended (what it started in its group, npx's node say, was killed with it); child.c restarts it. */
static void on_exited(void *user, int status)
{
    struct rl_agent *a = user;
    char why[128];

    if (WIFEXITED(status))
        snprintf(why, sizeof(why), "the agent exited with status %d", WEXITSTATUS(status));
    else
        snprintf(why, sizeof(why), "the agent was killed by signal %d", WTERMSIG(status));
    rl_log(RL_LOG_WARN, "%s", why);
    agent_gone(a, why);
}

static rl_child_t *new_child(struct rl_agent *a)
{
    rl_child_config_t config = {
        .name = "the acp agent",
        .command = a->command,
        .cwd = a->root,
        .stdin_fd = -1,
        .stdin_max = MAX_PENDING_OUT,
        .line_max = LINE_MAX_BYTES,
        .stderr_label = "acp agent stderr",
        .stderr_tail = STDERR_TAIL,
        .exit_signal = SIGKILL,
        .restart_first_ms = RESTART_FIRST_MS,
        .restart_cap_ms = RESTART_CAP_MS,
        .on_out = on_line,
        .on_start = on_started,
        .on_exit = on_exited,
        .user = a,
    };

    return rl_child_new(a->bridge, &config);
}

static void acp_destroy(rl_agent_t *a)
{
    session_t *s;

    rl_child_free(a->child);
    while (a->requests != NULL) {
        request_t *r = a->requests;
        a->requests = r->next;
        free(r);
    }
    /*
     * Turns still open are left as they are, as the other adapters leave them: their updates are not acked, so the
     * relay hands them to the next bridge.
     */
    while (a->sessions != NULL) {
        s = a->sessions;
        a->sessions = s->next;
        while (s->queue != NULL)
            prompt_free(a, s, s->queue);
        free(s->acp_id);
        free(s);
    }
    /* No fetch is left: the bridge stops its jobs (each fetch is done then) before it destroys the agent. */
    json_decref(a->auth_methods);
    json_decref(a->agent_info);
    json_decref(a->commands);
    json_decref(a->state);
    free(a->mode);
    free(a->command);
    free(a);
}

const rl_agent_adapter_t rl_agent_acp = {
    .scheme = "acp",
    .create = acp_create,
    .message = acp_message,
    .cancel = acp_cancel,
    .notify = acp_notify,
    .destroy = acp_destroy,
};
