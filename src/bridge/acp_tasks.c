/* The acp adapter: what the agent reports (session/update) as the relay's tasks, text and manifest (acp.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/timerfd.h>

#include "bridge/acp.h"
#include "bridge/agent_state.h"
#include "common/clock.h"
#include "common/log.h"

/* ---- the relay's side: lines of the jsonl protocol -------------------------------------------- */

/* Hands a line (root stolen) to the loop, addressed to p's turn when p is given. */
void rl_acp__emit(struct rl_agent *a, rl_agent_line_type_t type, prompt_t *p, json_t *root)
{
    rl_agent_line_t line = {.type = type, .root = root, .session_id = "", .interaction_id = "", .from = a};

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

json_t *rl_acp__cut_string(const char *text, size_t max)
{
    int cut;
    return rl_acp_string_cut(text != NULL ? text : "", text != NULL ? strlen(text) : 0, max, &cut);
}

/* A string value cut at max bytes, or null when value is not a string. */
static json_t *opt_cut(json_t *value, size_t max)
{
    return json_is_string(value) ? rl_acp__cut_string(json_string_value(value), max) : json_null();
}

void rl_acp__send_manifest(struct rl_agent *a)
{
    const char *name = json_string_value(json_object_get(a->agent_info, "name"));
    const char *version = json_string_value(json_object_get(a->agent_info, "version"));
    json_t *agent = json_pack("{s:o}", "name", rl_acp__cut_string(name != NULL && *name != '\0' ? name : "acp", 128));

    if (version != NULL)
        json_object_set_new(agent, "version", rl_acp__cut_string(version, 64));
    if (a->mode != NULL)
        json_object_set_new(agent, "mode", json_string(a->mode));
    /*
     * No tools: ACP agents declare none up front, and an empty list lets every task through (src/relay/manifest.c),
     * so a tool call's title can be its task's name in a plain session (docs/bridge.md "acp:COMMAND").
     */
    rl_acp__emit(a, RL_LINE_MANIFEST, NULL,
                 json_pack("{s:s, s:[], s:o, s:o}", "type", "manifest", "tools", "agent", agent, "commands",
                           a->commands != NULL ? json_incref(a->commands) : json_array()));
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
    rl_acp__emit(a, RL_LINE_TASK_PROGRESS, p,
                 json_pack("{s:s, s:s, s:{s:o}}", "type", "task_progress", "task_id", id, "partial_result", "text",
                           rl_acp_string_cut(rl_buf_str(&p->thought), p->thought.len, RL_ACP_THOUGHT_MAX, &cut)));
    p->thought_sent_at = rl_clock_mono_ms();
    p->thought_dirty = 0;
}

/* The think task ends at the next update that is not a thought (docs/bridge.md "acp:COMMAND"). */
void rl_acp__thought_close(struct rl_agent *a, prompt_t *p)
{
    char id[128];
    int cut;

    if (!p->thought_open)
        return;
    thought_task_id(p, id, sizeof(id));
    rl_acp__emit(a, RL_LINE_TASK_FINISH, p,
                 json_pack("{s:s, s:s, s:s, s:{s:o}}", "type", "task_finish", "task_id", id, "status", "completed",
                           "result", "text",
                           rl_acp_string_cut(rl_buf_str(&p->thought), p->thought.len, RL_ACP_THOUGHT_MAX, &cut)));
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
        rl_acp__emit(a, RL_LINE_TASK_START, p,
                     json_pack("{s:s, s:s, s:s, s:s}", "type", "task_start", "task_id", id, "kind", "think",
                               "status_label", "Thinking"));
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
                          rl_acp__cut_string(json_string_value(json_object_get(item, "content")), MAX_PLAN_ENTRY),
                          "priority", opt_cut(json_object_get(item, "priority"), 16), "status",
                          opt_cut(json_object_get(item, "status"), 16));
        if (entry != NULL)
            json_array_append_new(clean, entry);
    }
    plan_task_id(p, id, sizeof(id));
    /* Every plan, not just the first, is news after the text before it (docs/bridge.md "acp:COMMAND"). */
    rl_bridge_break(a->bridge, p->turn);
    if (!p->plan_open) {
        rl_acp__emit(a, RL_LINE_TASK_START, p,
                     json_pack("{s:s, s:s, s:s, s:s}", "type", "task_start", "task_id", id, "kind", "plan",
                               "status_label", "Plan"));
        p->plan_open = 1;
    }
    rl_acp__emit(
        a, RL_LINE_TASK_PROGRESS, p,
        json_pack("{s:s, s:s, s:{s:O}}", "type", "task_progress", "task_id", id, "partial_result", "entries", clean));
    json_decref(p->plan_entries);
    p->plan_entries = clean;
}

/* The task's shell output as the relay takes it: {output, exit_status?, truncated?} (docs/api.md "Shell output"). */
static json_t *terminal_json(terminal_t *term)
{
    json_t *out = json_stringn(rl_buf_str(&term->tail), term->tail.len);
    json_t *result = json_pack("{s:o}", "output", out != NULL ? out : json_string(""));

    if (term->exit != NULL)
        json_object_set(result, "exit_status", term->exit);
    if (term->truncated)
        json_object_set_new(result, "truncated", json_true());
    return result;
}

/* The merged tool call's content as our blocks, with its locations (and its shell output, when it ran one). */
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
    if (t->terminal != NULL) {
        json_object_set_new(result, "terminal", terminal_json(t->terminal));
        t->terminal->dirty = 0;
        t->terminal->sent_at = rl_clock_mono_ms();
    }
    if (with_raw_output && json_object_get(t->call, "rawOutput") != NULL &&
        !json_is_null(json_object_get(t->call, "rawOutput")))
        json_object_set_new(
            result, "raw_output",
            rl_acp_bounded(json_object_get(t->call, "rawOutput"), RL_ACP_VALUE_STRING_MAX, RL_ACP_VALUE_MAX));
    return result;
}

const char *rl_acp__tool_title(tool_t *t)
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
        json_object_set_new(line, "name", rl_acp__cut_string(rl_acp__tool_title(t), RL_ACP_NAME_MAX));
}

static void tool_finish(struct rl_agent *a, prompt_t *p, tool_t *t, const char *status, const char *why)
{
    json_t *line;

    if (t->finished)
        return;
    rl_acp__tool_create(a, p, t);
    t->finished = 1;
    line = json_pack("{s:s, s:O, s:s, s:o, s:o}", "type", "task_finish", "task_id",
                     json_object_get(t->call, "toolCallId"), "status", status, "status_label",
                     rl_acp__cut_string(rl_acp__tool_title(t), RL_ACP_LABEL_MAX), "result", tool_result(t, 1));
    tool_name(p, t, line);
    if (strcmp(status, "failed") == 0)
        json_object_set_new(line, "error", json_pack("{s:s}", "message", why != NULL ? why : "the tool call failed"));
    rl_acp__emit(a, RL_LINE_TASK_FINISH, p, line);
}

/* Merges the fields an update carries into what is known of the call (ACP: only changed fields are sent). */
void rl_acp__tool_merge(tool_t *t, json_t *update)
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
void rl_acp__tool_create(struct rl_agent *a, prompt_t *p, tool_t *t)
{
    json_t *line, *args;

    if (t->created)
        return;
    t->created = 1;
    line = json_pack("{s:s, s:O, s:s, s:o}", "type", "task_start", "task_id", json_object_get(t->call, "toolCallId"),
                     "kind", rl_acp_tool_kind(json_string_value(json_object_get(t->call, "kind"))), "status_label",
                     rl_acp__cut_string(rl_acp__tool_title(t), RL_ACP_LABEL_MAX));
    tool_name(p, t, line);
    args = rl_acp_args(json_object_get(t->call, "rawInput"));
    if (args != NULL)
        json_object_set_new(line, "args", args);
    rl_acp__emit(a, RL_LINE_TASK_START, p, line);
}

/* Content blocks other than terminals: a terminal names the command's output to come, not input (Claude Code's Bash).
 */
static size_t input_blocks(json_t *content)
{
    json_t *item;
    size_t i, n = 0;

    json_array_foreach(content, i, item)
    {
        const char *type = json_string_value(json_object_get(item, "type"));
        n += type == NULL || strcmp(type, "terminal") != 0;
    }
    return n;
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
           input_blocks(json_object_get(update, "content")) == 0 && (status == NULL || strcmp(status, "pending") == 0);
}

/* A tool call seen for the first time: its task is created, now or (premature) at its next update. */
tool_t *rl_acp__tool_open(struct rl_agent *a, prompt_t *p, json_t *update, int may_wait)
{
    tool_t *t = calloc(1, sizeof(*t));

    if (t == NULL)
        return NULL;
    t->call = json_pack("{s:O}", "toolCallId", json_object_get(update, "toolCallId"));
    rl_acp__tool_merge(t, update);
    t->next = p->tools;
    p->tools = t;
    rl_bridge_break(a->bridge, p->turn);
    if (!may_wait || !tool_premature(update))
        rl_acp__tool_create(a, p, t);
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

void rl_acp__tool_free(tool_t *t)
{
    if (t->terminal != NULL) {
        rl_buf_free(&t->terminal->tail);
        json_decref(t->terminal->exit);
        free(t->terminal);
    }
    json_decref(t->call);
    free(t);
}

/* The task's updateTask: its title and what it shows so far. */
static void tool_progress(struct rl_agent *a, prompt_t *p, tool_t *t)
{
    rl_acp__emit(a, RL_LINE_TASK_PROGRESS, p,
                 json_pack("{s:s, s:O, s:o, s:o}", "type", "task_progress", "task_id",
                           json_object_get(t->call, "toolCallId"), "status_label",
                           rl_acp__cut_string(rl_acp__tool_title(t), RL_ACP_LABEL_MAX), "partial_result",
                           tool_result(t, 0)));
}

/* Arms the agent's terminal timer to fire in ms (when it is not armed sooner already). */
static void terminal_timer_arm(struct rl_agent *a, long ms)
{
    struct itimerspec when = {.it_value = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L}}, now;

    if (a->terminal_timer < 0)
        return;
    if (timerfd_gettime(a->terminal_timer, &now) == 0 && (now.it_value.tv_sec != 0 || now.it_value.tv_nsec != 0))
        return;
    if (when.it_value.tv_sec == 0 && when.it_value.tv_nsec == 0)
        when.it_value.tv_nsec = 1000000L;
    timerfd_settime(a->terminal_timer, 0, &when, NULL);
}

/* A finished command's rawOutput, when it has its whole output or its exit code (Codex: see
 * rl_acp_terminal_raw_output). */
static void raw_output_terminal(tool_t *t, json_t *update)
{
    const char *whole;
    size_t len;
    json_t *exit;

    rl_acp_terminal_raw_output(json_object_get(update, "rawOutput"), &whole, &len, &exit);
    if (whole != NULL) {
        rl_buf_reset(&t->terminal->tail);
        t->terminal->truncated = rl_acp_terminal_append(&t->terminal->tail, whole, len);
        t->terminal->dirty = 1;
    }
    if (exit != NULL && t->terminal->exit == NULL) {
        t->terminal->exit = json_incref(exit);
        t->terminal->dirty = 1;
    }
}

/*
 * What an update says of a shell command: its output joins the task's tail; 1 when the tail is due to go out now,
 * 0 when nothing new came or it waits (at most TERMINAL_EVERY_MS since the last one: the timer sends it then).
 */
static int tool_terminal(struct rl_agent *a, tool_t *t, json_t *update)
{
    const char *data;
    size_t len;
    json_t *exit;
    long since;

    if (!rl_acp_terminal_meta(update, &data, &len, &exit)) {
        if (t->terminal != NULL)
            raw_output_terminal(t, update);
        return 0;
    }
    if (t->terminal == NULL) {
        t->terminal = calloc(1, sizeof(*t->terminal));
        if (t->terminal == NULL)
            return 0;
        rl_buf_init(&t->terminal->tail, 2 * RL_ACP_TERMINAL_MAX);
        t->terminal->dirty = 1;
    }
    if (len > 0) {
        if (rl_acp_terminal_append(&t->terminal->tail, data, len))
            t->terminal->truncated = 1;
        t->terminal->dirty = 1;
    }
    if (exit != NULL) {
        json_decref(t->terminal->exit);
        t->terminal->exit = json_incref(exit);
        t->terminal->dirty = 1;
    }
    raw_output_terminal(t, update);
    if (!t->terminal->dirty)
        return 0;
    since = rl_clock_mono_ms() - t->terminal->sent_at;
    if (t->terminal->sent_at == 0 || since >= TERMINAL_EVERY_MS)
        return 1;
    terminal_timer_arm(a, TERMINAL_EVERY_MS - since);
    return 0;
}

void rl_acp__terminal_flush(struct rl_agent *a)
{
    session_t *s;
    tool_t *t;
    long now = rl_clock_mono_ms(), wait = -1;

    for (s = a->sessions; s != NULL; s = s->next) {
        prompt_t *p = rl_acp__running_prompt(s);
        for (t = p != NULL ? p->tools : NULL; t != NULL; t = t->next) {
            if (t->terminal == NULL || !t->terminal->dirty || !t->created || t->finished)
                continue;
            if (now - t->terminal->sent_at >= TERMINAL_EVERY_MS)
                tool_progress(a, p, t);
            else if (wait < 0 || TERMINAL_EVERY_MS - (now - t->terminal->sent_at) < wait)
                wait = TERMINAL_EVERY_MS - (now - t->terminal->sent_at);
        }
    }
    if (wait >= 0)
        terminal_timer_arm(a, wait);
}

static void on_tool(struct rl_agent *a, prompt_t *p, json_t *update, int announced)
{
    const char *id = json_string_value(json_object_get(update, "toolCallId"));
    tool_t *t = rl_acp__tool_find(p, id);
    const char *status;
    int created = t == NULL || !t->created, output_due;

    if (id == NULL || *id == '\0')
        return;
    if (t == NULL) {
        /* An update of a call never announced is taken as its announcement. */
        t = rl_acp__tool_open(a, p, update, announced);
        if (t == NULL)
            return;
        output_due = tool_terminal(a, t, update);
        if (!t->created)
            return;
    } else {
        if (t->finished)
            return;
        rl_acp__tool_merge(t, update);
        output_due = tool_terminal(a, t, update);
        rl_acp__tool_create(a, p, t);
    }
    status = json_string_value(json_object_get(t->call, "status"));
    if (status != NULL && (strcmp(status, "completed") == 0 || strcmp(status, "failed") == 0)) {
        /* Its result has the output in full (the tail), whatever the timer still held back. */
        tool_finish(a, p, t, status, content_text(json_object_get(t->call, "content")));
        return;
    }
    if (!tool_progressed(update, created) && !output_due)
        return;
    tool_progress(a, p, t);
}

/* What is still open when the turn ends: thoughts and plans complete, tool calls end as status says. */
void rl_acp__close_items(struct rl_agent *a, prompt_t *p, const char *tool_status, const char *why)
{
    tool_t *t;
    char id[128];

    if (p->thought_open && p->thought_dirty)
        thought_send(a, p);
    rl_acp__thought_close(a, p);
    if (p->plan_open) {
        plan_task_id(p, id, sizeof(id));
        rl_acp__emit(a, RL_LINE_TASK_FINISH, p,
                     json_pack("{s:s, s:s, s:s, s:{s:o}}", "type", "task_finish", "task_id", id, "status", "completed",
                               "result", "entries",
                               p->plan_entries != NULL ? json_incref(p->plan_entries) : json_array()));
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
        command = json_pack("{s:o}", "name", rl_acp__cut_string(name, 64));
        if (description != NULL)
            json_object_set_new(command, "description", rl_acp__cut_string(description, 500));
        if (hint != NULL)
            json_object_set_new(command, "input_hint", rl_acp__cut_string(hint, 200));
        json_array_append_new(list, command);
    }
    json_decref(a->commands);
    a->commands = list;
    rl_acp__send_manifest(a);
}

void rl_acp__set_mode(struct rl_agent *a, const char *mode)
{
    if (mode == NULL || (a->mode != NULL && strcmp(a->mode, mode) == 0))
        return;
    free(a->mode);
    a->mode = strndup(mode, 64);
    rl_acp__send_manifest(a);
}

void rl_acp__on_update(struct rl_agent *a, json_t *params)
{
    session_t *s = rl_acp__session_by_acp(a, json_string_value(json_object_get(params, "sessionId")));
    json_t *update = json_object_get(params, "update");
    rl_acp_update_t kind = rl_acp_update_of(json_string_value(json_object_get(update, "sessionUpdate")));
    prompt_t *p = rl_acp__running_prompt(s);

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
    /* The session's settings (acp_steer.c), and a resumed session's history kept for its timeline (acp_list.c). */
    if (kind == RL_ACP_UPDATE_CONFIG) {
        rl_acp__config_update(a, s, update);
        return;
    }
    if (s != NULL && s->replaying && rl_acp__replay_update(a, s, update))
        return;
    if (kind == RL_ACP_UPDATE_MODE) {
        const char *mode = json_string_value(json_object_get(update, "currentModeId"));
        rl_acp__config_update(a, s, update);
        /* The docs' example says modeId, the schema currentModeId: take either. */
        rl_acp__set_mode(a, mode != NULL ? mode : json_string_value(json_object_get(update, "modeId")));
        return;
    }
    /*
     * The context figures belong to the session: kept for the usage of the turn that ends next (end_prompt), even
     * when they come between turns. A load's replay brings none worth keeping.
     */
    if (kind == RL_ACP_UPDATE_USAGE && s != NULL && !s->loading) {
        json_t *context = rl_acp_context_usage(update);
        if (context != NULL) {
            json_decref(s->context);
            s->context = context;
            /* Every device's meter, between turns too: the session's state carries the latest figures. */
            json_t *fields = json_pack("{s:O}", "usage", context);
            rl_bridge_state(a->bridge, s->relay_id, fields);
            json_decref(fields);
        }
        return;
    }
    /* spec (ACP session/load): the history is replayed as updates; the relay has it already. */
    if (s == NULL || s->loading || kind == RL_ACP_UPDATE_IGNORE)
        return;
    if (p == NULL) {
        /*
         * ACP sends a turn's updates before its session/prompt answer; one that comes after has no turn left to join
         * (the relay closed it: spec, task events come before the message ends). Codex's adapter can: its command's
         * end, exit code and all, when the command's output reached the model before its exit was seen.
         */
        const char *name = json_string_value(json_object_get(update, "sessionUpdate"));
        if (!s->late_logged)
            rl_log(RL_LOG_INFO, "acp agent sent a %.64s update for relay session %s with no turn running: dropped",
                   name != NULL ? name : "?", s->relay_id);
        s->late_logged = 1;
        return;
    }
    if (kind != RL_ACP_UPDATE_THOUGHT)
        rl_acp__thought_close(a, p);
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
    case RL_ACP_UPDATE_USAGE:
        break; /* taken above */
    default:
        break;
    }
}
