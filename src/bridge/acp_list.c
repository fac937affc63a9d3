/*
 * The acp adapter: the agent's own sessions (docs/bridge.md, "The agent's
 * sessions"): listed for a client (session/list), continued by a relay
 * session (session/resume, or session/load whose replayed history is put
 * in the timeline as one message marked earlier), closed when the relay
 * session is archived or deleted (session/close). The bindings are the
 * state file's (acp_session.c). acp.h.
 */
#include <stdlib.h>
#include <string.h>

#include "bridge/acp.h"
#include "bridge/agent_state.h"
#include "common/log.h"

/* Sessions one list answer names at most (the first page the agent gives, most recent first as it orders them). */
#define LIST_MAX 100
/* The first line of a continued session's history (docs/api.md, "Continuing an agent's session"). */
#define REPLAY_HEAD "[Earlier in this session, before it was continued here]\n\n"

int rl_acp__open_resume(struct rl_agent *a, session_t *s)
{
    const char *method = a->session_resume ? "session/resume" : "session/load";

    /* spec (ACP session capabilities): resume when the agent serves it, which replays nothing; else load. */
    if (!a->session_resume && !a->load_session) {
        rl_acp__resume_failed(a, s,
                              "the agent cannot continue its sessions (it serves neither session/resume nor "
                              "session/load)");
        return -1;
    }
    free(s->acp_id);
    s->acp_id = strdup(s->resume_id);
    if (!a->session_resume) {
        s->loading = 1;
        s->replaying = 1;
        s->replay_role = 0;
        rl_buf_reset(&s->replay);
    }
    rl_acp__request(a, a->session_resume ? REQ_RESUME : REQ_LOAD, method,
                    json_pack("{s:s, s:s, s:[]}", "sessionId", s->resume_id, "cwd", s->root, "mcpServers"), s, NULL);
    return 0;
}

void rl_acp__resume_failed(struct rl_agent *a, session_t *s, const char *why)
{
    json_t *fields;
    char text[600];

    rl_log(RL_LOG_WARN, "relay session %s: the agent could not continue session %s: %s", s->relay_id, s->resume_id,
           why);
    free(s->acp_id);
    s->acp_id = NULL;
    s->state = SESSION_CLOSED;
    rl_buf_reset(&s->replay);
    /*
     * The state's message is read by the relay: the agent's own words may name a folder, so they go only in the
     * reply, sealed in an encrypted session. The resume stays asked: nothing else runs in this session.
     */
    fields = json_pack("{s:s, s:{s:s, s:s}}", "state", "refused", "error", "code", "resume_failed", "message",
                       "the agent could not continue that session");
    rl_bridge_state(a->bridge, s->relay_id, fields);
    json_decref(fields);
    snprintf(text, sizeof(text), "[the agent could not continue its session: %.500s]", why);
    rl_acp__fail_queue(a, s, text);
}

/* Appends text to the replay, each line of a user's turn quoted ("> "), as much as REPLAY_MAX holds. */
static void replay_add(session_t *s, int role, const char *text)
{
    if (role != s->replay_role) {
        if (s->replay.len > 0)
            rl_buf_append_str(&s->replay, "\n\n");
        if (role == 1)
            rl_buf_append_str(&s->replay, "> ");
        s->replay_role = role;
    }
    for (; *text != '\0'; text++) {
        if (rl_buf_append(&s->replay, text, 1) != 0)
            return;
        if (*text == '\n' && role == 1)
            rl_buf_append_str(&s->replay, "> ");
    }
}

int rl_acp__replay_update(struct rl_agent *a, session_t *s, json_t *update)
{
    const char *kind = json_string_value(json_object_get(update, "sessionUpdate"));
    const char *text = json_string_value(json_object_get(json_object_get(update, "content"), "text"));

    (void)a;
    if (kind != NULL && text != NULL && strcmp(kind, "user_message_chunk") == 0)
        replay_add(s, 1, text);
    else if (kind != NULL && text != NULL && strcmp(kind, "agent_message_chunk") == 0)
        replay_add(s, 2, text);
    /* Tool calls, plans and thoughts of the past are not replayed: their outcome is in the text. */
    return 1;
}

void rl_acp__replay_flush(struct rl_agent *a, session_t *s, prompt_t *p)
{
    if (s->replay.len == 0)
        return;
    rl_bridge_text(a->bridge, p->turn, REPLAY_HEAD, strlen(REPLAY_HEAD));
    rl_bridge_text(a->bridge, p->turn, s->replay.bytes, s->replay.len);
    /* The reply to the user's message opens a message of its own, below the history. */
    rl_bridge_break(a->bridge, p->turn);
    rl_buf_free(&s->replay);
    s->replay_role = 0;
}

static void answer_error(struct rl_agent *a, json_t *line, const char *code, const char *message)
{
    json_t *answer = json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", message);

    rl_bridge_answer(a->bridge, "agent_sessions.list.resp", json_object_get(line, "req_id"), NULL, answer);
    json_decref(answer);
}

void rl_acp__list(struct rl_agent *a, json_t *line)
{
    const char *project_id = json_string_value(json_object_get(line, "project_id"));
    char folder[PATH_MAX];
    json_int_t rid;
    request_t *r;
    int found;

    if (!a->initialized) {
        answer_error(a, line, "agent_unavailable", "the agent is not running yet");
        return;
    }
    if (!a->session_list) {
        answer_error(a, line, "unsupported", "the agent does not list its sessions");
        return;
    }
    /* The project's folder (docs/bridge.md "Projects"); a bridge without --root serves its agent's folder only. */
    found = rl_bridge_project_folder(a->bridge, project_id, folder);
    if (found < 0) {
        answer_error(a, line, "unknown_project", "this machine's relay-bridge knows no such project");
        return;
    }
    rid = rl_acp__request(a, REQ_LIST, "session/list", json_pack("{s:s}", "cwd", found == 0 ? folder : a->root), NULL,
                          NULL);
    r = rl_acp__request_by_id(a, rid);
    if (r != NULL)
        r->arg = json_pack("{s:O, s:O?}", "req_id", json_object_get(line, "req_id"), "device_id",
                           json_object_get(line, "device_id"));
}

typedef struct bound {
    const char *acp_id;
    const char *relay_id;
} bound_t;

static int find_bound(const char *relay_id, void *acp_id, void *arg)
{
    bound_t *b = arg;

    if (b->relay_id == NULL && acp_id != NULL && strcmp(acp_id, b->acp_id) == 0)
        b->relay_id = relay_id;
    return 0;
}

/* The relay session bound to the agent's session acp_id, or NULL (a borrowed key of the bindings). */
static const char *bound_to(struct rl_agent *a, const char *acp_id)
{
    bound_t b = {acp_id, NULL};
    session_t *s;

    for (s = a->sessions; s != NULL; s = s->next)
        if ((s->acp_id != NULL && strcmp(s->acp_id, acp_id) == 0) ||
            (s->resume_id != NULL && strcmp(s->resume_id, acp_id) == 0))
            return s->relay_id;
    if (a->known != NULL)
        rl_strmap_sweep(a->known, find_bound, &b, NULL);
    return b.relay_id;
}

static json_t *cut_or_null(json_t *value, size_t max)
{
    return json_is_string(value) ? rl_acp__cut_string(json_string_value(value), max) : json_null();
}

void rl_acp__on_listed(struct rl_agent *a, request_t *r, rl_jsonrpc_msg_t *msg)
{
    json_t *sessions, *item, *answer;
    const char *device_id = json_string_value(json_object_get(r->arg, "device_id"));
    size_t i;

    if (msg->error != NULL) {
        json_t *line = json_pack("{s:O}", "req_id", json_object_get(r->arg, "req_id"));
        json_t *message = rl_acp__cut_string(rl_jsonrpc_error_message(msg), 128);
        answer_error(a, line, "list_failed", json_string_value(message));
        json_decref(message);
        json_decref(line);
        return;
    }
    sessions = json_array();
    json_array_foreach(json_object_get(msg->result, "sessions"), i, item)
    {
        const char *id = json_string_value(json_object_get(item, "sessionId"));
        const char *bound;
        if (id == NULL || strlen(id) > 256)
            continue;
        if (json_array_size(sessions) >= LIST_MAX)
            break;
        bound = bound_to(a, id);
        json_array_append_new(sessions, json_pack("{s:s, s:o, s:o, s:o, s:s?}", "agent_session_id", id, "title",
                                                  cut_or_null(json_object_get(item, "title"), 128), "cwd",
                                                  cut_or_null(json_object_get(item, "cwd"), 1024), "updated_at",
                                                  cut_or_null(json_object_get(item, "updatedAt"), 64),
                                                  "bound_session_id", bound));
        if (bound == NULL)
            json_object_set_new(json_array_get(sessions, json_array_size(sessions) - 1), "bound_session_id",
                                json_null());
    }
    answer = json_pack("{s:o}", "sessions", sessions);
    rl_bridge_answer(a->bridge, "agent_sessions.list.resp", json_object_get(r->arg, "req_id"), device_id, answer);
    json_decref(answer);
}

void rl_acp__close(struct rl_agent *a, const char *relay_id, const char *reason)
{
    session_t *s = relay_id != NULL ? rl_acp__session_by_relay(a, relay_id) : NULL;
    json_t *fields;

    if (relay_id == NULL)
        return;
    if (s != NULL && s->state == SESSION_READY && s->acp_id != NULL && a->session_close && a->initialized) {
        rl_acp__request(a, REQ_CLOSE, "session/close", json_pack("{s:s}", "sessionId", s->acp_id), NULL, NULL);
        rl_log(RL_LOG_INFO, "acp session %s closed: relay session %s %s", s->acp_id, relay_id,
               reason != NULL ? reason : "closed");
    }
    if (s != NULL) {
        rl_acp__fail_queue(a, s, "[the session was closed]");
        s->state = SESSION_CLOSED;
    }
    /* An archived session may be brought back and continue; a deleted one is gone, and so is its binding. */
    if (reason != NULL && strcmp(reason, "deleted") == 0) {
        rl_acp__state_forget(a, relay_id);
        if (s != NULL) {
            free(s->acp_id);
            s->acp_id = NULL;
        }
    }
    fields = json_pack("{s:s}", "state", "ended");
    rl_bridge_state(a->bridge, relay_id, fields);
    json_decref(fields);
}
