/* The acp adapter: sessions, prompts, and which ACP session continues which relay session (acp.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bridge/acp.h"
#include "client/credentials.h"
#include "common/log.h"
#include "common/strmap.h"

/* ---- state: which ACP session continues which relay session ----------------------------------- */

void rl_acp__state_load(struct rl_agent *a)
{
    json_t *doc = rl_credentials_load(a->state_name), *acp_id;
    const char *agent = json_string_value(json_object_get(doc, "agent"));
    const char *cwd = json_string_value(json_object_get(doc, "cwd"));
    const char *relay_id;

    a->known = rl_strmap_new(STATE_MAX_SESSIONS);
    /* Another agent, or another folder, has other sessions: start afresh. */
    if (a->known != NULL && doc != NULL && agent != NULL && cwd != NULL && strcmp(agent, a->command) == 0 &&
        strcmp(cwd, a->root) == 0) {
        json_object_foreach(json_object_get(doc, "sessions"), relay_id, acp_id)
        {
            char *copy = json_is_string(acp_id) ? strdup(json_string_value(acp_id)) : NULL;
            if (copy != NULL && rl_strmap_put(a->known, relay_id, copy) != 0)
                free(copy);
        }
    }
    json_decref(doc);
}

struct known_doc {
    struct rl_agent *a;
    json_t *sessions, *cwds;
};

static int add_known(const char *relay_id, void *acp_id, void *arg)
{
    struct known_doc *k = arg;
    const char *cwd = rl_bridge_session_cwd(k->a->bridge, relay_id);

    json_object_set_new(k->sessions, relay_id, json_string(acp_id));
    /* A session in a project of its own: relay-bridge sessions says where to continue it at the desk. */
    if (cwd != NULL && strcmp(cwd, k->a->root) != 0)
        json_object_set_new(k->cwds, relay_id, json_string(cwd));
    return 0;
}

static void state_save(struct rl_agent *a)
{
    json_t *doc = json_pack("{s:s, s:s, s:{}, s:{}}", "agent", a->command, "cwd", a->root, "sessions", "cwds");
    const char *name = json_string_value(json_object_get(a->agent_info, "name"));
    struct known_doc k = {a, json_object_get(doc, "sessions"), json_object_get(doc, "cwds")};

    /* relay-bridge sessions names the command that continues each session at the desk by the agent's name. */
    if (doc != NULL && name != NULL)
        json_object_set_new(doc, "agent_name", json_string(name));
    if (doc != NULL && a->name[0] != '\0')
        json_object_set_new(doc, "agent_label", json_string(a->name));

    if (doc != NULL)
        rl_strmap_sweep(a->known, add_known, &k, NULL);
    if (doc == NULL || rl_credentials_save(a->state_name, doc) != 0)
        rl_log(RL_LOG_WARN, "could not save the acp sessions (%s): a restarted bridge starts them afresh",
               strerror(errno));
    json_decref(doc);
}

static void state_set(struct rl_agent *a, const char *relay_id, const char *acp_id)
{
    char *copy;

    if (a->known == NULL)
        return;
    free(rl_strmap_remove(a->known, relay_id));
    if (acp_id != NULL) {
        /* Past the cap the oldest mappings are forgotten, all at once (a conversation then starts afresh). */
        if (rl_strmap_size(a->known) >= STATE_MAX_SESSIONS) {
            rl_strmap_free(a->known, free);
            a->known = rl_strmap_new(STATE_MAX_SESSIONS);
        }
        copy = strdup(acp_id);
        if (a->known == NULL || copy == NULL || rl_strmap_put(a->known, relay_id, copy) != 0)
            free(copy);
    }
    state_save(a);
}

void rl_acp__state_forget(struct rl_agent *a, const char *relay_id)
{
    state_set(a, relay_id, NULL);
}

/* ---- sessions and prompts --------------------------------------------------------------------- */

session_t *rl_acp__session_by_relay(struct rl_agent *a, const char *relay_id)
{
    session_t *s;

    for (s = a->sessions; s != NULL; s = s->next)
        if (strcmp(s->relay_id, relay_id) == 0)
            return s;
    return NULL;
}

session_t *rl_acp__session_by_acp(struct rl_agent *a, const char *acp_id)
{
    session_t *s;

    for (s = a->sessions; acp_id != NULL && s != NULL; s = s->next)
        if (s->acp_id != NULL && strcmp(s->acp_id, acp_id) == 0)
            return s;
    return NULL;
}

prompt_t *rl_acp__running_prompt(session_t *s)
{
    return s != NULL && s->running ? s->queue : NULL;
}

tool_t *rl_acp__tool_find(prompt_t *p, const char *id)
{
    tool_t *t;

    for (t = p->tools; id != NULL && t != NULL; t = t->next)
        if (strcmp(json_string_value(json_object_get(t->call, "toolCallId")), id) == 0)
            return t;
    return NULL;
}

/* Removes p from its session's queue and from every request and permission that names it. */
void rl_acp__prompt_free(struct rl_agent *a, session_t *s, prompt_t *p)
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
        rl_acp__tool_free(t);
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

/*
 * An image that does not go inline is not dropped (it goes as a link), but
 * an agent may well not open a link: the user is told so in the reply, before
 * the agent's words, rather than left to wonder why it did not see their
 * screenshot (docs/bridge.md "acp:COMMAND", attachments).
 */
static void note_images_as_links(struct rl_agent *a, prompt_t *p)
{
    json_t *item;
    size_t i;

    json_array_foreach(json_object_get(p->message, "attachments"), i, item)
    {
        const char *mime = json_string_value(json_object_get(item, "mime"));
        const char *name = json_string_value(json_object_get(item, "name"));
        const char *why;
        char note[512];
        int n;

        if (mime == NULL || strncmp(mime, "image/", 6) != 0 || json_is_object(json_array_get(p->inline_blocks, i)))
            continue;
        why = !a->image ? "this agent does not take images"
              : json_integer_value(json_object_get(item, "size")) > FETCH_IMAGE_MAX
                  ? "it is larger than the 5 MB an image may be"
                  : "it could not be fetched";
        n = snprintf(note, sizeof(note), "[%.200s reached the agent as a link only: %s]\n\n",
                     name != NULL ? name : "an image", why);
        if (n > 0)
            rl_bridge_text(a->bridge, p->turn, note, (size_t)n < sizeof(note) ? (size_t)n : sizeof(note) - 1);
    }
}

void rl_acp__pump(struct rl_agent *a, session_t *s)
{
    prompt_t *p = s->queue;

    if (!a->initialized || s->state != SESSION_READY || s->running || p == NULL || p->fetch != NULL)
        return;
    s->running = 1;
    rl_acp__replay_flush(a, s, p);
    rl_acp__thought_level(a, s, p);
    note_images_as_links(a, p);
    rl_acp__request(
        a, REQ_PROMPT, "session/prompt",
        json_pack("{s:s, s:o}", "sessionId", s->acp_id, "prompt", prompt_blocks(a, p->message, p->inline_blocks)), s,
        p);
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

    message = rl_acp__cut_string(rl_jsonrpc_error_message(msg), ERROR_MESSAGE_MAX);
    if (json_is_string(data))
        text = json_string_value(data);
    for (i = 0; text == NULL && json_is_object(data) && detail_keys[i] != NULL; i++)
        text = json_string_value(json_object_get(data, detail_keys[i]));
    if (text == NULL && data != NULL && !json_is_null(data)) {
        dumped = json_dumps(data, JSON_COMPACT | JSON_ENCODE_ANY);
        text = dumped;
    }
    if (text != NULL && *text != '\0')
        detail = rl_acp__cut_string(text, ERROR_DATA_MAX);
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
void rl_acp__failure_text(struct rl_agent *a, const char *head, char *out, size_t outsz)
{
    const char *tail = rl_child_stderr_tail(a->child);
    int n;

    n = snprintf(out, outsz, "%s", head);
    if (tail[0] != '\0' && n >= 0 && (size_t)n < outsz)
        snprintf(out + n, outsz - (size_t)n, "\n\nThe agent's last lines on stderr:\n%s", tail);
}

/* The stderr before a success, or already reported, explains no later failure. */
void rl_acp__tail_reset(struct rl_agent *a)
{
    rl_child_stderr_forget(a->child);
}

void rl_acp__open_session(struct rl_agent *a, session_t *s)
{
    const char *known;

    if (!a->initialized || s->state != SESSION_CLOSED)
        return;
    known = s->acp_id != NULL ? s->acp_id : (a->known != NULL ? rl_strmap_get(a->known, s->relay_id) : NULL);
    s->state = SESSION_OPENING;
    /* A session started to continue one of the agent's own (acp_list.c). */
    if (known == NULL && s->resume_id != NULL) {
        rl_acp__open_resume(a, s);
        return;
    }
    /* spec (ACP session/load): only when the agent says it can. */
    if (known != NULL && a->load_session) {
        if (s->acp_id == NULL)
            s->acp_id = strdup(known);
        s->loading = 1;
        rl_acp__request(a, REQ_LOAD, "session/load",
                        json_pack("{s:s, s:s, s:[]}", "sessionId", known, "cwd", s->root, "mcpServers"), s, NULL);
        return;
    }
    rl_acp__request(a, REQ_NEW, "session/new", json_pack("{s:s, s:[]}", "cwd", s->root, "mcpServers"), s, NULL);
}

/*
 * Ends p's reply and takes it off its session; the next prompt of the session goes. The running prompt's usage
 * takes the context figures of the usage_update that came during it (docs/bridge.md "Usage").
 */
void rl_acp__end_prompt(struct rl_agent *a, session_t *s, prompt_t *p, const char *finish_reason, json_t *usage,
                        const char *error_text)
{
    json_t *all = NULL;

    if (s->queue == p && s->running) {
        if (s->context != NULL) {
            all = usage != NULL ? json_deep_copy(usage) : json_object();
            json_object_update(all, s->context);
            json_decref(s->context);
            s->context = NULL;
        }
        s->running = 0;
    }
    rl_bridge_finish(a->bridge, p->turn, finish_reason, all != NULL ? all : usage, error_text);
    json_decref(all);
    rl_acp__prompt_free(a, s, p);
}

void rl_acp__fail_queue(struct rl_agent *a, session_t *s, const char *error_text)
{
    while (s->queue != NULL) {
        rl_acp__close_items(a, s->queue, "failed", error_text);
        rl_acp__end_prompt(a, s, s->queue, "error", NULL, error_text);
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

void rl_acp__on_initialized(struct rl_agent *a, rl_jsonrpc_msg_t *msg)
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
    /* spec (ACP session capabilities): each is an object when the agent serves it. */
    a->session_list = json_is_object(json_object_get(json_object_get(caps, "sessionCapabilities"), "list"));
    a->session_resume = json_is_object(json_object_get(json_object_get(caps, "sessionCapabilities"), "resume"));
    a->session_close = json_is_object(json_object_get(json_object_get(caps, "sessionCapabilities"), "close"));
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
    rl_acp__send_manifest(a);
    for (s = a->sessions; s != NULL; s = s->next) {
        prompt_t *p;
        /* Messages that came while no agent ran: their attachments wait for the capabilities known now. */
        for (p = s->queue; p != NULL; p = p->next)
            if (p->fetch == NULL && p->inline_blocks == NULL)
                rl_acp__fetch_start(a, p);
        if (s->queue != NULL)
            rl_acp__open_session(a, s);
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
    rl_acp__request(a, REQ_AUTHENTICATE, "authenticate", json_pack("{s:s}", "methodId", method), NULL, NULL);
    return 1;
}

void rl_acp__on_authenticated(struct rl_agent *a, rl_jsonrpc_msg_t *msg)
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
            rl_acp__open_session(a, s);
        else
            rl_acp__fail_queue(a, s, LOGIN_TEXT);
    }
}

void rl_acp__on_session_opened(struct rl_agent *a, request_t *r, rl_jsonrpc_msg_t *msg)
{
    session_t *s = r->session;
    const char *acp_id;
    char reason[ERROR_MESSAGE_MAX + ERROR_DATA_MAX + 8], head[sizeof(reason) + 64], why[FAILURE_TEXT_MAX];

    if (s == NULL)
        return;
    if ((r->kind == REQ_LOAD && s->replaying) || r->kind == REQ_RESUME) {
        s->loading = 0;
        s->replaying = 0;
        if (msg->error != NULL) {
            error_reason(msg, reason, sizeof(reason));
            rl_acp__resume_failed(a, s, reason);
            return;
        }
        rl_log(RL_LOG_INFO, "acp session %s continued for relay session %s", s->acp_id, s->relay_id);
        state_set(a, s->relay_id, s->acp_id);
        free(s->resume_id);
        s->resume_id = NULL;
        rl_acp__config_opened(a, s, msg->result);
        rl_acp__tail_reset(a);
    } else if (r->kind == REQ_LOAD) {
        s->loading = 0;
        if (msg->error != NULL) {
            rl_log(RL_LOG_WARN, "acp agent could not load session %s (%s): starting a new one", s->acp_id,
                   rl_jsonrpc_error_message(msg));
            free(s->acp_id);
            s->acp_id = NULL;
            state_set(a, s->relay_id, NULL);
            s->state = SESSION_CLOSED;
            rl_acp__open_session(a, s);
            return;
        }
        rl_log(RL_LOG_INFO, "acp session %s loaded for relay session %s", s->acp_id, s->relay_id);
        rl_acp__config_opened(a, s, msg->result);
    } else {
        acp_id = json_string_value(json_object_get(msg->result, "sessionId"));
        if (msg->error != NULL || acp_id == NULL) {
            s->state = SESSION_CLOSED;
            if (rl_jsonrpc_error_code(msg) == RL_JSONRPC_AUTH_REQUIRED) {
                if (authenticate(a))
                    return;
                log_auth(a);
                rl_acp__fail_queue(a, s, LOGIN_TEXT);
                return;
            }
            if (msg->error != NULL)
                error_reason(msg, reason, sizeof(reason));
            else
                snprintf(reason, sizeof(reason), "no sessionId");
            rl_log(RL_LOG_WARN, "the acp agent could not start a session for relay session %s: %s", s->relay_id,
                   reason);
            snprintf(head, sizeof(head), "[the agent could not start a session: %s]", reason);
            rl_acp__failure_text(a, head, why, sizeof(why));
            rl_acp__tail_reset(a);
            rl_acp__fail_queue(a, s, why);
            return;
        }
        free(s->acp_id);
        s->acp_id = strdup(acp_id);
        state_set(a, s->relay_id, acp_id);
        rl_acp__set_mode(a, json_string_value(json_object_get(json_object_get(msg->result, "modes"), "currentModeId")));
        rl_acp__config_opened(a, s, msg->result);
        rl_log(RL_LOG_INFO, "acp session %s opened for relay session %s", s->acp_id, s->relay_id);
        rl_acp__tail_reset(a);
    }
    s->state = SESSION_READY;
    rl_acp__config_pending(a, s);
    rl_acp__pump(a, s);
}

void rl_acp__on_prompted(struct rl_agent *a, request_t *r, rl_jsonrpc_msg_t *msg)
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
            rl_acp__failure_text(a, head, why, sizeof(why));
        }
        rl_acp__tail_reset(a);
        rl_acp__close_items(a, p, "failed", head);
        rl_acp__end_prompt(a, s, p, "error", NULL, why);
        rl_acp__pump(a, s);
        return;
    }
    /* spec (ACP cancellation): an agent may answer an aborted turn with an error; it was still a cancel. */
    finish = p->cancelled && (msg->error != NULL || stop == NULL) ? "cancelled" : rl_acp_finish_reason(stop);
    usage = rl_acp_prompt_usage(msg->result);
    rl_acp__close_items(a, p, strcmp(finish, "cancelled") == 0 ? "cancelled" : "completed", NULL);
    rl_acp__end_prompt(a, s, p, finish, usage, NULL);
    rl_acp__tail_reset(a);
    json_decref(usage);
    rl_child_backoff_reset(a->child);
    rl_acp__pump(a, s);
}
