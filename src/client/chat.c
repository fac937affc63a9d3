#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/chat.h"
#include "client/timeline.h"
#include "common/clock.h"
#include "common/event_names.h"

#define MAX_SEEN 256
/* Tasks of the turns shown whose last label is remembered; older ones are forgotten first. */
#define MAX_TASKS 64

/* How an approval is answered from a terminal: the spec's decision mapping. */
typedef struct answer {
    const char *key;
    const char *label;
    const char *decision;
    const char *scope;
    int remember_session; /* answer later approvals of this session the same way */
    const char *said;     /* the line once the relay took the answer: a denial reads as one */
} answer_t;

static const answer_t answers[] = {
    {"o", "approve once", "approve", NULL, 0, "✓ approved once"},
    /*
     * spec, decision mapping: the client-only approveForSession is stored as approve (allow-once), so the
     * relay keeps no grant for it: this client answers the session's later requests itself, and only while
     * it runs. The label says so (docs/api.md, Approvals).
     */
    {"s", "approve for this session while this chat is open", "approve", NULL, 1, "✓ approved for this session"},
    /* spec: client-only approveCommandAlways is approve_always with scope tool. */
    {"a", "always approve this command", "approve_always", "tool", 0, "✓ always approved: a grant for this command"},
    {"d", "deny", "deny", NULL, 0, "✗ denied"},
};
#define NANSWERS (sizeof(answers) / sizeof(answers[0]))

typedef struct turn {
    int active;
    char session_id[128];
    char interaction_id[128];
    char message_id[128]; /* the agent's reply, once seen */
    size_t printed;       /* bytes of its text shown so far */
    int finished;         /* a final reply was seen */
    int complete;         /* and it finished (stop or tool_call) */
    const char *source;   /* "stream" or "poll" */
    int64_t poll_until;   /* spec: poll every 3 s for up to 24 s */
    int64_t next_poll;
    int64_t cancel_until; /* cancelled from chat: its reply is followed until final, up to this time */
    int64_t next_by;      /* its message ended as a tool call: the turn ends unless another opens by then */
} turn_t;

struct rl_chat {
    rl_chat_mode_t mode;
    char *session_id; /* of send and chat; NULL for watch */
    int json;
    int interactive;
    int max_count, count;
    int single_key;
    FILE *out, *err;
    rl_term_t out_term, err_term;
    rl_chat_ops_t ops;

    int midline;  /* the cursor is after streamed text */
    int in_reply; /* the reply's text is the last thing shown: its next line goes on without "agent>" */
    int hello;    /* the stream said hello at least once */
    turn_t turn;
    int cancelled;
    char seen[MAX_SEEN][64]; /* approval ids handled, spec: de-duplicated by approval_id */
    int nseen;
    json_t *queue;            /* approvals waiting for an answer on the terminal */
    json_t *paused;           /* the turn's message that ended as a tool call, while next_by runs */
    int prompting;            /* the first of queue is on screen */
    int session_approved;     /* "approve for this session" was chosen */
    int defer_approvals;      /* chat's cold start: the snapshot is read again once the history is shown */
    char installation_id[64]; /* of the session */
    const char *gone;         /* why the session can no longer answer (deleted, revoked), or NULL */
    struct task_label {
        char task_id[128];
        char label[200];
    } tasks[MAX_TASKS]; /* the last status_label each task showed, so that its end shows its own */
    int ntasks;
};

/* ---- output ---- */

static const char *style(const rl_chat_t *chat, rl_term_style_t s)
{
    return rl_term_style(&chat->out_term, s);
}

static const char *str(const json_t *object, const char *key)
{
    const char *value = json_string_value(json_object_get(object, key));

    return value != NULL ? value : "";
}

static void print_json(rl_chat_t *chat, const json_t *value)
{
    json_dumpf(value, chat->out, JSON_COMPACT | JSON_REAL_PRECISION(12));
    fputc('\n', chat->out);
    fflush(chat->out);
}

static void emit(rl_chat_t *chat, const char *event, const char *id, json_t *data)
{
    json_t *line = json_pack("{s:s, s:O}", "event", event, "data", data != NULL ? data : json_null());

    if (id != NULL && id[0] != '\0')
        json_object_set_new(line, "id", json_string(id));
    print_json(chat, line);
    json_decref(line);
}

/* A note for people (never in the JSON lines of out). */
static void note(rl_chat_t *chat, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(rl_chat_t *chat, const char *fmt, ...)
{
    va_list ap;

    fputs(rl_term_style(&chat->err_term, RL_TERM_DIM), chat->err);
    va_start(ap, fmt);
    vfprintf(chat->err, fmt, ap);
    va_end(ap);
    fprintf(chat->err, "%s\n", rl_term_style(&chat->err_term, RL_TERM_RESET));
    fflush(chat->err);
}

int rl_chat_message_is_hidden(const json_t *message)
{
    const char *text = str(message, "text");

    if (strcmp(str(message, "role"), "agent") != 0 || strcmp(str(message, "finish_reason"), "tool_call") != 0)
        return 0;
    return text[strspn(text, " \t\r\n")] == '\0';
}

void rl_chat_print_message(FILE *out, const rl_term_t *term, const json_t *message)
{
    char when[32];
    int agent = strcmp(str(message, "role"), "agent") == 0;

    if (rl_chat_message_is_hidden(message))
        return;
    rl_term_clock(json_integer_value(json_object_get(message, "created_at")), when, sizeof(when));
    fprintf(out, "%s%s%s %s%s%s%s\n", rl_term_style(term, RL_TERM_DIM), when, rl_term_style(term, RL_TERM_RESET),
            rl_term_style(term, agent ? RL_TERM_CYAN : RL_TERM_GREEN), agent ? "agent>" : "you>",
            rl_term_style(term, RL_TERM_RESET), strcmp(str(message, "state"), "streaming") == 0 ? " (streaming)" : "");
    rl_term_wrap(out, term, str(message, "text"), 2);
}

void rl_chat_print_approval(FILE *out, const rl_term_t *term, const json_t *approval)
{
    fprintf(out, "%s%s%s  %s%s%s  %s\n", rl_term_style(term, RL_TERM_BOLD), str(approval, "approval_id"),
            rl_term_style(term, RL_TERM_RESET), rl_term_style(term, RL_TERM_YELLOW), str(approval, "severity"),
            rl_term_style(term, RL_TERM_RESET), str(approval, "title"));
    if (str(approval, "message")[0] != '\0')
        rl_term_wrap(out, term, str(approval, "message"), 2);
    if (str(approval, "command")[0] != '\0')
        fprintf(out, "  %scommand:%s %s\n", rl_term_style(term, RL_TERM_DIM), rl_term_style(term, RL_TERM_RESET),
                str(approval, "command"));
    if (str(approval, "host")[0] != '\0')
        fprintf(out, "  %shost:%s %s\n", rl_term_style(term, RL_TERM_DIM), rl_term_style(term, RL_TERM_RESET),
                str(approval, "host"));
    /* What the agent shows with its request (the diff of the edit it asks to make): read before answering. */
    if (json_is_array(json_object_get(approval, "content")))
        rl_timeline_print_blocks(out, term, json_object_get(approval, "content"), 2);
    fprintf(out, "  %ssession %s, action %s%s\n", rl_term_style(term, RL_TERM_DIM), str(approval, "session_id"),
            str(approval, "action"), rl_term_style(term, RL_TERM_RESET));
}

/* ---- life cycle ---- */

rl_chat_t *rl_chat_new(const rl_chat_options_t *options)
{
    rl_chat_t *chat = calloc(1, sizeof(*chat));

    if (chat == NULL)
        return NULL;
    chat->mode = options->mode;
    chat->json = options->json;
    chat->interactive = options->interactive;
    chat->max_count = options->max_count;
    chat->single_key = options->single_key;
    chat->out = options->out != NULL ? options->out : stdout;
    chat->err = options->err != NULL ? options->err : stderr;
    chat->out_term = options->out_term;
    chat->err_term = options->err_term;
    chat->ops = options->ops;
    chat->queue = json_array();
    chat->session_id = options->session_id != NULL ? strdup(options->session_id) : NULL;
    if (chat->queue == NULL || (options->session_id != NULL && chat->session_id == NULL)) {
        rl_chat_free(chat);
        return NULL;
    }
    return chat;
}

void rl_chat_free(rl_chat_t *chat)
{
    if (chat == NULL)
        return;
    json_decref(chat->queue);
    json_decref(chat->paused);
    free(chat->session_id);
    free(chat);
}

void rl_chat_set_installation(rl_chat_t *chat, const char *installation_id)
{
    snprintf(chat->installation_id, sizeof(chat->installation_id), "%s", installation_id);
}

void rl_chat_defer_approvals(rl_chat_t *chat, int defer)
{
    chat->defer_approvals = defer;
}

void rl_chat_set_single_key(rl_chat_t *chat, int single_key)
{
    chat->single_key = single_key;
}

void rl_chat_set_interactive(rl_chat_t *chat, int interactive)
{
    chat->interactive = interactive;
}

/* ---- the screen ---- */

void rl_chat_end_line(rl_chat_t *chat)
{
    if (chat->midline) {
        fputc('\n', chat->out);
        chat->midline = 0;
    }
    /* Whatever is shown next comes between the reply's lines: the reply's next text is labelled again. */
    chat->in_reply = 0;
}

static void show_prompt(rl_chat_t *chat)
{
    const json_t *approval = json_array_get(chat->queue, 0);
    size_t i;

    if (approval == NULL || chat->prompting)
        return;
    rl_chat_end_line(chat);
    fprintf(chat->out, "%s? approval needed%s ", style(chat, RL_TERM_YELLOW), style(chat, RL_TERM_RESET));
    rl_chat_print_approval(chat->out, &chat->out_term, approval);
    for (i = 0; i < NANSWERS; ++i)
        fprintf(chat->out, "  %s[%s]%s %s", style(chat, RL_TERM_BOLD), answers[i].key, style(chat, RL_TERM_RESET),
                answers[i].label);
    fprintf(chat->out, "\n%s%s%s\nanswer> ", style(chat, RL_TERM_DIM),
            chat->single_key ? "one key answers, no Enter needed" : "type the letter, then Enter",
            style(chat, RL_TERM_RESET));
    fflush(chat->out);
    chat->prompting = 1;
}

void rl_chat_prompt(rl_chat_t *chat)
{
    if (chat->mode == RL_CHAT_CHAT && !chat->json && !chat->turn.active && json_array_size(chat->queue) == 0) {
        rl_chat_end_line(chat);
        fprintf(chat->out, "%syou>%s ", style(chat, RL_TERM_GREEN), style(chat, RL_TERM_RESET));
        fflush(chat->out);
    }
}

/* ---- approvals ---- */

static int seen_approval(rl_chat_t *chat, const char *id)
{
    int i;

    for (i = 0; i < chat->nseen; ++i) {
        if (strcmp(chat->seen[i], id) == 0)
            return 1;
    }
    snprintf(chat->seen[chat->nseen % MAX_SEEN], sizeof(chat->seen[0]), "%s", id);
    if (chat->nseen < MAX_SEEN)
        chat->nseen++;
    return 0;
}

static void answer_approval(rl_chat_t *chat, const json_t *approval, const answer_t *answer)
{
    rl_api_error_t error;
    json_t *result;

    if (chat->ops.decide(chat->ops.user, str(approval, "approval_id"), answer->decision, answer->scope, &result,
                         &error) != 0) {
        rl_chat_end_line(chat);
        if (error.status == 410)
            note(chat, "relay: approval %s expired before the answer", str(approval, "approval_id"));
        else
            note(chat, "relay: could not answer approval %s: %s (HTTP %ld, request %s)", str(approval, "approval_id"),
                 error.message, error.status, error.request_id);
        return;
    }
    if (answer->remember_session)
        chat->session_approved = 1;
    fprintf(chat->out, "%s%s%s\n", style(chat, answer->decision[0] == 'd' ? RL_TERM_RED : RL_TERM_GREEN), answer->said,
            style(chat, RL_TERM_RESET));
    fflush(chat->out);
    json_decref(result);
}

/* A pending approval, from the stream or the snapshot (spec: handled alike, de-duplicated by approval_id). */
static void on_approval(rl_chat_t *chat, const char *event_id, json_t *approval)
{
    if (chat->defer_approvals)
        return;
    if (seen_approval(chat, str(approval, "approval_id")))
        return;
    if (chat->mode == RL_CHAT_WATCH)
        return;
    if (chat->session_id != NULL && strcmp(str(approval, "session_id"), chat->session_id) != 0)
        return;
    if (chat->json) {
        emit(chat, "approval_requested", event_id, approval);
        return;
    }
    if (chat->interactive && chat->session_approved) {
        rl_chat_end_line(chat);
        fprintf(chat->out, "%sapproved for this session:%s %s\n", style(chat, RL_TERM_DIM), style(chat, RL_TERM_RESET),
                str(approval, "title"));
        answer_approval(chat, approval, &answers[1]);
        return;
    }
    if (!chat->interactive) {
        rl_chat_end_line(chat);
        fprintf(chat->out, "%s? approval needed%s ", style(chat, RL_TERM_YELLOW), style(chat, RL_TERM_RESET));
        rl_chat_print_approval(chat->out, &chat->out_term, approval);
        fprintf(chat->out, "  answer with: relay approve %s   or   relay deny %s\n", str(approval, "approval_id"),
                str(approval, "approval_id"));
        fflush(chat->out);
        return;
    }
    json_array_append(chat->queue, approval);
    show_prompt(chat);
}

static void approval_gone(rl_chat_t *chat, const char *approval_id, const char *how)
{
    size_t i;

    for (i = 0; i < json_array_size(chat->queue); ++i) {
        if (strcmp(str(json_array_get(chat->queue, i), "approval_id"), approval_id) == 0) {
            json_array_remove(chat->queue, i);
            if (i == 0 && chat->prompting) {
                chat->prompting = 0;
                fprintf(chat->out, "\n%sapproval %s %s elsewhere%s\n", style(chat, RL_TERM_DIM), approval_id, how,
                        style(chat, RL_TERM_RESET));
                show_prompt(chat);
                rl_chat_prompt(chat);
            }
            return;
        }
    }
}

int rl_chat_answer(rl_chat_t *chat, const char *line)
{
    json_t *approval;
    size_t i;

    if (!chat->prompting)
        return 0;
    /* The terminal echoed the key, and no Enter ended its line. */
    if (chat->single_key)
        fputc('\n', chat->out);
    for (i = 0; i < NANSWERS; ++i) {
        if (strcmp(line, answers[i].key) == 0 || strcmp(line, answers[i].label) == 0)
            break;
    }
    if (i == NANSWERS) {
        fprintf(chat->out, "answer o, s, a or d> ");
        fflush(chat->out);
        return 1;
    }
    approval = json_incref(json_array_get(chat->queue, 0));
    json_array_remove(chat->queue, 0);
    chat->prompting = 0;
    answer_approval(chat, approval, &answers[i]);
    json_decref(approval);
    show_prompt(chat);
    rl_chat_prompt(chat);
    return 1;
}

int rl_chat_snapshot(rl_chat_t *chat)
{
    rl_api_error_t error;
    json_t *snapshot, *approval;
    size_t i;

    if (chat->ops.snapshot(chat->ops.user, &snapshot, &error) != 0) {
        chat->ops.failed(chat->ops.user, &error);
        return -1;
    }
    if (chat->mode == RL_CHAT_WATCH) {
        chat->count++;
        if (chat->json)
            emit(chat, "snapshot", NULL, snapshot);
        else
            fprintf(chat->out, "%ssnapshot%s  %zu pending approval(s)\n", style(chat, RL_TERM_CYAN),
                    style(chat, RL_TERM_RESET), json_array_size(json_object_get(snapshot, "pending_approvals")));
    }
    json_array_foreach(json_object_get(snapshot, "pending_approvals"), i, approval) on_approval(chat, NULL, approval);
    json_decref(snapshot);
    return 0;
}

/* ---- the turn ---- */

static void start_polling(rl_chat_t *chat)
{
    if (!chat->turn.active)
        return;
    chat->turn.poll_until = rl_clock_mono_ms() + RL_CHAT_POLL_WINDOW_MS;
    chat->turn.next_poll = rl_clock_mono_ms();
}

static void begin_turn(rl_chat_t *chat, const char *interaction_id)
{
    memset(&chat->turn, 0, sizeof(chat->turn));
    json_decref(chat->paused);
    chat->paused = NULL;
    chat->cancelled = 0;
    chat->turn.active = 1;
    snprintf(chat->turn.session_id, sizeof(chat->turn.session_id), "%s", chat->session_id);
    snprintf(chat->turn.interaction_id, sizeof(chat->turn.interaction_id), "%s", interaction_id);
}

void rl_chat_sent(rl_chat_t *chat, const json_t *result)
{
    begin_turn(chat, str(result, "interaction_id"));
    if (chat->json)
        emit(chat, "sent", NULL, (json_t *)result);
}

/* Shows what of the reply's text was not shown yet. */
static void show_reply_text(rl_chat_t *chat, const char *text)
{
    size_t len = strlen(text);

    if (strcmp(text, " ") == 0)
        return; /* spec: a placeholder's text is a single space */
    if (len > chat->turn.printed) {
        if (!chat->json) {
            if (!chat->midline && !chat->in_reply)
                fprintf(chat->out, "%sagent>%s ", style(chat, RL_TERM_CYAN), style(chat, RL_TERM_RESET));
            fputs(text + chat->turn.printed, chat->out);
            chat->midline = text[len - 1] != '\n';
            chat->in_reply = 1;
            fflush(chat->out);
        }
        chat->turn.printed = len;
    }
}

/* A final reply that finished: stop, or a stop to call a tool. Anything else is incomplete. */
static int finished_whole(const json_t *message)
{
    const char *reason = str(message, "finish_reason");

    return strcmp(reason, "stop") == 0 || strcmp(reason, "tool_call") == 0;
}

static void show_cancelled(rl_chat_t *chat, const char *why)
{
    fprintf(chat->out, "%s■ turn cancelled%s%s\n", style(chat, RL_TERM_YELLOW), style(chat, RL_TERM_RESET), why);
    fflush(chat->out);
}

/*
 * How a reply that did not simply stop ended, in words. relayd stores an end without a reason as
 * "stop" (docs/api.md, "Finish reasons"): no reason at all is a reply from before that rule.
 */
static const struct {
    const char *reason, *words;
} endings[] = {
    {"", "(the reply did not finish: the agent failed or stopped before its end)"},
    {"error", "(the reply did not finish: the agent failed)"},
    {"cancelled", "(the reply was cancelled)"},
    {"incomplete", "(the reply did not finish: the agent stopped writing it and the relay ended it)"},
};

static void note_ending(rl_chat_t *chat, const char *reason)
{
    size_t i;

    if (strcmp(reason, "stop") == 0)
        return;
    for (i = 0; i < sizeof(endings) / sizeof(endings[0]); ++i) {
        if (strcmp(reason, endings[i].reason) == 0) {
            note(chat, "%s", endings[i].words);
            return;
        }
    }
    note(chat, "(finished: %s)", reason);
}

/*
 * The turn's message now is message_id. Another one than before is the text after a tool call, an
 * approval or a request (docs/api.md, "One turn, several agent messages"): its text is shown from its start,
 * and the turn goes on.
 */
static void follow_message(rl_chat_t *chat, const char *message_id)
{
    if (message_id[0] == '\0' || strcmp(message_id, chat->turn.message_id) == 0)
        return;
    /* A reply followed from chat's start (rl_chat_intro) has its text shown, its id not known yet. */
    if (chat->turn.message_id[0] != '\0')
        chat->turn.printed = 0;
    snprintf(chat->turn.message_id, sizeof(chat->turn.message_id), "%s", message_id);
    chat->turn.next_by = 0;
    json_decref(chat->paused);
    chat->paused = NULL;
}

static void finish_turn(rl_chat_t *chat, const json_t *message, const char *source)
{
    chat->turn.finished = 1;
    chat->turn.complete = finished_whole(message);
    chat->turn.active = 0;
    chat->turn.source = source;
    if (chat->json) {
        json_t *done = json_pack(
            "{s:s, s:s, s:s, s:s, s:O, s:s}", "status", "final", "interaction_id", chat->turn.interaction_id,
            "message_id", str(message, "message_id"), "text", str(message, "text"), "finish_reason",
            json_object_get(message, "finish_reason") != NULL ? json_object_get(message, "finish_reason") : json_null(),
            "source", source);
        emit(chat, "done", NULL, done);
        json_decref(done);
    } else {
        show_reply_text(chat, str(message, "text"));
        rl_chat_end_line(chat);
        if (chat->cancelled)
            show_cancelled(chat, "");
        else
            note_ending(chat, str(message, "finish_reason"));
    }
    rl_chat_prompt(chat);
}

/*
 * A message of the turn ended as a tool call. relay-bridge then opens the
 * next message at once (the text after the call), but another bridge may end
 * a whole turn so: the turn ends with this message unless the next one opens
 * within RL_CHAT_NEXT_MESSAGE_MS.
 */
static void pause_turn(rl_chat_t *chat, json_t *message, const char *id, const char *source)
{
    follow_message(chat, str(message, "message_id"));
    if (chat->paused != NULL)
        return;
    if (chat->json)
        emit(chat, "message_finalized", id, message);
    else
        show_reply_text(chat, str(message, "text"));
    rl_chat_end_line(chat);
    chat->paused = json_incref(message);
    chat->turn.source = source;
    chat->turn.next_by = rl_clock_mono_ms() + RL_CHAT_NEXT_MESSAGE_MS;
}

static int ends_as_tool_call(const json_t *message)
{
    return strcmp(str(message, "finish_reason"), "tool_call") == 0;
}

/* spec: client-side resume, rule 2: look for the reply of the turn in flight in the history. */
static void poll_turn(rl_chat_t *chat)
{
    rl_api_error_t error;
    json_t *history;
    const json_t *message;
    size_t i;

    if (chat->ops.history(chat->ops.user, chat->turn.session_id, 20, &history, &error) != 0) {
        /* A failed poll is not the end of the turn: the next one, or the stream, may still bring it. */
        note(chat, "relay: polling for the reply failed: %s (HTTP %ld, request %s)", error.message, error.status,
             error.request_id[0] != '\0' ? error.request_id : "-");
        chat->turn.next_poll = rl_clock_mono_ms() + RL_CHAT_POLL_EVERY_MS;
        return;
    }
    chat->turn.next_poll = rl_clock_mono_ms() + RL_CHAT_POLL_EVERY_MS;
    json_array_foreach(json_object_get(history, "messages"), i, message)
    {
        if (strcmp(str(message, "role"), "agent") != 0 ||
            strcmp(str(message, "interaction_id"), chat->turn.interaction_id) != 0)
            continue;
        follow_message(chat, str(message, "message_id"));
        if (chat->json && chat->paused == NULL)
            emit(chat, "polled", NULL, (json_t *)message);
        if (strcmp(str(message, "state"), "final") == 0 && ends_as_tool_call(message))
            pause_turn(chat, (json_t *)message, NULL, "poll");
        else if (strcmp(str(message, "state"), "final") == 0)
            finish_turn(chat, message, "poll");
        else
            show_reply_text(chat, str(message, "text"));
        break;
    }
    json_decref(history);
}

void rl_chat_tick(rl_chat_t *chat, int64_t now_ms)
{
    if (chat->turn.active && chat->turn.next_by != 0 && now_ms >= chat->turn.next_by) {
        json_t *last = chat->paused;
        chat->paused = NULL;
        finish_turn(chat, last, chat->turn.source);
        json_decref(last);
        return;
    }
    if (chat->turn.active && chat->turn.cancel_until != 0 && now_ms >= chat->turn.cancel_until) {
        rl_chat_end_line(chat);
        chat->turn.active = 0;
        show_cancelled(chat, " (the agent has not stopped yet: what it sends from now on is stored, not shown)");
        rl_chat_prompt(chat);
        return;
    }
    if (!chat->turn.active || chat->turn.poll_until == 0 || now_ms < chat->turn.next_poll)
        return;
    if (now_ms > chat->turn.poll_until)
        chat->turn.poll_until = 0;
    else
        poll_turn(chat);
}

void rl_chat_cancelled(rl_chat_t *chat)
{
    chat->cancelled = 1;
    /*
     * What the agent streamed before it stopped, and the bridge's "[cancelled]", are stored with the reply:
     * a chat shows them too, following the reply until it is final, so that the screen and the history
     * match. A second Ctrl-C, or a reply that does not end in time, stops following. send ends at once:
     * its exit status says the turn was cancelled.
     */
    if (chat->mode == RL_CHAT_CHAT && !chat->json && chat->turn.active && chat->turn.cancel_until == 0) {
        chat->turn.cancel_until = rl_clock_mono_ms() + RL_CHAT_CANCEL_FOLLOW_MS;
        start_polling(chat);
        return;
    }
    chat->turn.active = 0;
    rl_chat_end_line(chat);
    if (chat->json) {
        json_t *done = json_pack("{s:s, s:s}", "status", "cancelled", "interaction_id", chat->turn.interaction_id);
        emit(chat, "done", NULL, done);
        json_decref(done);
    } else {
        show_cancelled(chat, "");
    }
}

void rl_chat_intro(rl_chat_t *chat, const json_t *history)
{
    const json_t *messages = json_object_get(history, "messages"), *newest = json_array_get(messages, 0);
    size_t i, n = json_array_size(messages);

    if (!chat->json) {
        fprintf(chat->out,
                "%schat in %s — type a message; Ctrl-C cancels a reply, Ctrl-C when idle or Ctrl-D quits%s\n",
                style(chat, RL_TERM_DIM), chat->session_id, style(chat, RL_TERM_RESET));
        for (i = n > 10 ? 10 : n; i > 0; --i)
            rl_chat_print_message(chat->out, &chat->out_term, json_array_get(messages, i - 1));
    }
    /* A reply still streaming at start is a turn in flight: follow it (spec: client-side resume). */
    if (newest != NULL && strcmp(str(newest, "role"), "agent") == 0 && strcmp(str(newest, "state"), "streaming") == 0) {
        begin_turn(chat, str(newest, "interaction_id"));
        chat->turn.printed = strlen(str(newest, "text"));
        start_polling(chat);
    }
}

/* ---- event handlers, one row per event ---- */

typedef void (*event_handler_t)(rl_chat_t *chat, const char *id, json_t *data);

static int ours(const rl_chat_t *chat, const json_t *data)
{
    return chat->turn.active && strcmp(str(data, "interaction_id"), chat->turn.interaction_id) == 0;
}

static void on_hello(rl_chat_t *chat, const char *id, json_t *data)
{
    chat->hello = 1;
    if (chat->ops.hello != NULL)
        chat->ops.hello(chat->ops.user, (long)json_integer_value(json_object_get(data, "heartbeat_ms")));
}

static void on_resync(rl_chat_t *chat, const char *id, json_t *data)
{
    if (!chat->json && chat->mode != RL_CHAT_WATCH)
        note(chat, "relay: events were missed (%s); reloading the snapshot", str(data, "reason"));
    if (chat->json && chat->mode != RL_CHAT_WATCH)
        emit(chat, rl_event_name(RL_EV_RESYNC), id, data);
    /* spec: on resync the client reloads the snapshot; a turn in flight is looked for by polling. */
    rl_chat_snapshot(chat);
    start_polling(chat);
}

static void on_message_added(rl_chat_t *chat, const char *id, json_t *data)
{
    if (!ours(chat, data) || strcmp(str(data, "role"), "agent") != 0)
        return;
    follow_message(chat, str(data, "message_id"));
    if (chat->json)
        emit(chat, "message_added", id, data);
    show_reply_text(chat, str(data, "text"));
}

static void on_message_delta(rl_chat_t *chat, const char *id, json_t *data)
{
    const char *delta = str(data, "delta");

    if (!ours(chat, data))
        return;
    follow_message(chat, str(data, "message_id"));
    if (chat->json) {
        emit(chat, "message_delta", id, data);
        chat->turn.printed += strlen(delta);
        return;
    }
    if (delta[0] == '\0')
        return;
    if (!chat->midline && !chat->in_reply)
        fprintf(chat->out, "%sagent>%s ", style(chat, RL_TERM_CYAN), style(chat, RL_TERM_RESET));
    fputs(delta, chat->out);
    chat->midline = delta[strlen(delta) - 1] != '\n';
    chat->in_reply = 1;
    chat->turn.printed += strlen(delta);
    fflush(chat->out);
}

static void on_message_finalized(rl_chat_t *chat, const char *id, json_t *data)
{
    if (!ours(chat, data) || strcmp(str(data, "role"), "agent") != 0)
        return;
    if (ends_as_tool_call(data))
        pause_turn(chat, data, id, "stream");
    else
        finish_turn(chat, data, "stream");
}

/* The remembered label of a task, or a free slot for it (the oldest is reused when all are taken). */
static struct task_label *task_slot(rl_chat_t *chat, const char *task_id)
{
    struct task_label *slot;
    int i;

    for (i = 0; i < chat->ntasks && i < MAX_TASKS; ++i) {
        if (strcmp(chat->tasks[i].task_id, task_id) == 0)
            return &chat->tasks[i];
    }
    slot = &chat->tasks[chat->ntasks++ % MAX_TASKS];
    snprintf(slot->task_id, sizeof(slot->task_id), "%s", task_id);
    slot->label[0] = '\0';
    return slot;
}

/*
 * The label to show with a task line. The relay keeps a task's last label, so an end event repeats the
 * label of the last progress ("completed: halfway") unless the end brought its own: an end shows a label
 * only when it is not the one the task already showed.
 */
static const char *task_label(rl_chat_t *chat, const json_t *data, int ended)
{
    struct task_label *slot = task_slot(chat, str(data, "task_id"));
    const char *label = str(data, "status_label");

    if (ended && strcmp(label, slot->label) == 0)
        return "";
    snprintf(slot->label, sizeof(slot->label), "%s", label);
    return label;
}

static void show_task(rl_chat_t *chat, json_t *data, const char *mark, rl_term_style_t colour, const char *what,
                      int ended)
{
    const char *name = str(data, "name"), *label = task_label(chat, data, ended);

    rl_chat_end_line(chat);
    fprintf(chat->out, "  %s%s task %s%s %s%s%s\n", style(chat, colour), mark,
            name[0] != '\0' ? name : str(data, "kind"), style(chat, RL_TERM_RESET), what, label[0] != '\0' ? ": " : "",
            label);
    fflush(chat->out);
}

/*
 * Under a task's line: its arguments when it starts; when it ends, what it
 * produced (diffs, command output, a plan's last state, text) and its error.
 * A thought's text is left out: the reply says what came of it.
 */
static void show_task_details(rl_chat_t *chat, json_t *data, int started)
{
    const json_t *error = json_object_get(data, "error");

    if (started) {
        rl_timeline_print_args(chat->out, &chat->out_term, json_object_get(data, "args"), 4);
    } else if (strcmp(str(data, "kind"), "think") != 0) {
        rl_timeline_print_outcome(chat->out, &chat->out_term, json_object_get(data, "result"), 4);
        if (error != NULL && !json_is_null(error)) {
            char *text = json_is_string(error) || json_is_string(json_object_get(error, "message"))
                             ? NULL
                             : json_dumps(error, JSON_COMPACT | JSON_ENCODE_ANY);
            fprintf(chat->out, "    %serror:%s %s\n", style(chat, RL_TERM_RED), style(chat, RL_TERM_RESET),
                    json_is_string(error) ? json_string_value(error)
                    : text != NULL        ? text
                                          : str(error, "message"));
            free(text);
        }
    }
    fflush(chat->out);
}

/* The task events: one row each, with how the screen shows them. */
static const struct task_event {
    const char *event;
    const char *mark;
    rl_term_style_t colour;
    const char *what;
} task_events[] = {
    {"task_created", "▶", RL_TERM_CYAN, "started"},
    {"task_progress", NULL, RL_TERM_RESET, NULL}, /* not shown: its label is remembered for the end */
    {"task_completed", "✓", RL_TERM_GREEN, "completed"},
    {"task_failed", "✗", RL_TERM_RED, "failed"},
    {"task_cancelled", "■", RL_TERM_YELLOW, "cancelled"},
};

static void on_task(rl_chat_t *chat, const char *event, const char *id, json_t *data)
{
    size_t i;

    if (!ours(chat, data))
        return;
    for (i = 0; i < sizeof(task_events) / sizeof(task_events[0]); ++i) {
        if (strcmp(task_events[i].event, event) != 0)
            continue;
        if (task_events[i].mark == NULL) {
            if (json_object_get(data, "status_label") != NULL)
                task_label(chat, data, 0);
            /* A plan is shown whole each time it changes, as a checklist (docs/api.md "Content blocks"). */
            if (!chat->json && json_is_array(json_object_get(json_object_get(data, "partial_result"), "entries"))) {
                rl_chat_end_line(chat);
                fprintf(chat->out, "  %splan%s\n", style(chat, RL_TERM_CYAN), style(chat, RL_TERM_RESET));
                rl_timeline_print_plan(chat->out, &chat->out_term,
                                       json_object_get(json_object_get(data, "partial_result"), "entries"), 4);
                fflush(chat->out);
            }
        } else if (chat->json) {
            emit(chat, event, id, data);
        } else {
            show_task(chat, data, task_events[i].mark, task_events[i].colour, task_events[i].what, i > 1);
            show_task_details(chat, data, i == 0);
        }
    }
}

static void on_approval_requested(rl_chat_t *chat, const char *id, json_t *data)
{
    on_approval(chat, id, data);
}

static void on_approval_resolved(rl_chat_t *chat, const char *id, json_t *data)
{
    if (chat->session_id == NULL || strcmp(str(data, "session_id"), chat->session_id) != 0)
        return;
    if (chat->json) {
        emit(chat, "approval_resolved", id, data);
    } else if (json_is_true(json_object_get(data, "auto_resolved"))) {
        /* Nothing was asked here: a grant answered it (ours, docs/api.md), so one line says what it let through. */
        rl_chat_end_line(chat);
        fprintf(chat->out, "%s✓ approved by your \"always approve\" grant:%s %s\n", style(chat, RL_TERM_GREEN),
                style(chat, RL_TERM_RESET),
                str(data, "command")[0] != '\0' ? str(data, "command") : str(data, "title"));
        fflush(chat->out);
    }
    approval_gone(chat, str(data, "approval_id"), "answered");
}

static void on_approval_expired(rl_chat_t *chat, const char *id, json_t *data)
{
    if (chat->session_id == NULL || strcmp(str(data, "session_id"), chat->session_id) != 0)
        return;
    if (chat->json)
        emit(chat, "approval_expired", id, data);
    else
        note(chat, "approval %s expired", str(data, "approval_id"));
    approval_gone(chat, str(data, "approval_id"), "expired");
}

/*
 * ours (docs/api.md "Device capabilities"): the agent asks this phone-less
 * client for a location or a photo. A terminal has neither, so it shows the
 * request and how to answer it from a command (relay capability), which
 * can refuse it or give a location typed by hand.
 */
static void on_capability_request(rl_chat_t *chat, const char *id, json_t *data)
{
    int location = strcmp(str(data, "capability"), "location") == 0;
    const char *what = location ? "your location" : "a photo from your camera";

    if (chat->session_id == NULL || strcmp(str(data, "session_id"), chat->session_id) != 0)
        return;
    if (chat->json) {
        emit(chat, "device_capability_request", id, data);
        return;
    }
    rl_chat_end_line(chat);
    fprintf(chat->out, "%sthe agent asks for %s:%s %s\n", style(chat, RL_TERM_YELLOW), what, style(chat, RL_TERM_RESET),
            str(data, "reason"));
    /* A location can be typed; a photo cannot be taken here. */
    fprintf(chat->out, "  %srefuse: relay capability refuse %s%s%s%s\n", style(chat, RL_TERM_DIM),
            str(data, "request_id"), location ? "; answer: relay capability location " : "",
            location ? str(data, "request_id") : "", location ? " LAT,LON" : "");
    fprintf(chat->out, "%s", style(chat, RL_TERM_RESET));
    fflush(chat->out);
}

static void on_capability_resolved(rl_chat_t *chat, const char *id, json_t *data)
{
    if (chat->session_id == NULL || strcmp(str(data, "session_id"), chat->session_id) != 0)
        return;
    if (chat->json)
        emit(chat, "device_capability_resolved", id, data);
    else
        note(chat, "capability request %s %s", str(data, "request_id"), str(data, "status"));
}

/* spec: client handling rule 4: the target is gone, so the turn in flight is dropped. */
static void target_gone(rl_chat_t *chat, const char *why)
{
    rl_chat_end_line(chat);
    chat->gone = why;
    chat->turn.active = 0;
    if (chat->json) {
        json_t *done =
            json_pack("{s:s, s:s, s:s}", "status", "gone", "reason", why, "interaction_id", chat->turn.interaction_id);
        emit(chat, "done", NULL, done);
        json_decref(done);
    }
}

static void on_session_deleted(rl_chat_t *chat, const char *id, json_t *data)
{
    if (chat->session_id != NULL && strcmp(str(data, "session_id"), chat->session_id) == 0)
        target_gone(chat, "the session was deleted");
}

static void on_installation_revoked(rl_chat_t *chat, const char *id, json_t *data)
{
    if (chat->installation_id[0] != '\0' && strcmp(str(data, "installation_id"), chat->installation_id) == 0)
        target_gone(chat, "the installation was revoked");
}

static const struct {
    rl_event_t event;
    event_handler_t handler;
    int in_watch; /* watch shows every event itself and runs only these */
} event_handlers[] = {
    {RL_EV_SESSION_DELETED, on_session_deleted, 0},
    {RL_EV_INSTALLATION_REVOKED, on_installation_revoked, 0},
    {RL_EV_HELLO, on_hello, 1},
    {RL_EV_RESYNC, on_resync, 1},
    {RL_EV_MESSAGE_ADDED, on_message_added, 0},
    {RL_EV_MESSAGE_DELTA, on_message_delta, 0},
    {RL_EV_MESSAGE_FINALIZED, on_message_finalized, 0},
    {RL_EV_APPROVAL_REQUESTED, on_approval_requested, 0},
    {RL_EV_APPROVAL_RESOLVED, on_approval_resolved, 0},
    {RL_EV_APPROVAL_EXPIRED, on_approval_expired, 0},
    {RL_EV_DEVICE_CAPABILITY_REQUEST, on_capability_request, 0},
    {RL_EV_DEVICE_CAPABILITY_RESOLVED, on_capability_resolved, 0},
};

/* watch: every event, one per line. */
static void show_watched(rl_chat_t *chat, const char *event, const char *id, json_t *data, const char *raw)
{
    char when[32];
    char *compact;

    chat->count++;
    if (chat->json) {
        json_t *line = json_pack("{s:s, s:O}", "event", event, "data", data != NULL ? data : json_null());
        if (id != NULL)
            json_object_set_new(line, "id", json_string(id));
        print_json(chat, line);
        json_decref(line);
        return;
    }
    rl_term_clock((json_int_t)time(NULL) * 1000, when, sizeof(when));
    compact = data != NULL ? json_dumps(data, JSON_COMPACT) : NULL;
    fprintf(chat->out, "%s%s%s %s%-20s%s %s\n", style(chat, RL_TERM_DIM), when, style(chat, RL_TERM_RESET),
            style(chat, RL_TERM_CYAN), event, style(chat, RL_TERM_RESET), compact != NULL ? compact : raw);
    free(compact);
    fflush(chat->out);
}

/* A task's events, which one handler follows whatever their step. */
static int is_task_event(int event)
{
    switch (event) {
    case RL_EV_TASK_CREATED:
    case RL_EV_TASK_PROGRESS:
    case RL_EV_TASK_COMPLETED:
    case RL_EV_TASK_FAILED:
    case RL_EV_TASK_CANCELLED:
        return 1;
    default:
        return 0;
    }
}

void rl_chat_event(rl_chat_t *chat, const char *event, const char *id, const char *data, size_t len)
{
    json_t *value = json_loadb(data, len, 0, NULL);
    int known = rl_event_find(event);
    size_t i;

    if (chat->mode == RL_CHAT_WATCH && (chat->max_count == 0 || chat->count < chat->max_count))
        show_watched(chat, event, id, value, data);
    if (value != NULL && chat->mode != RL_CHAT_WATCH && is_task_event(known))
        on_task(chat, event, id, value);
    for (i = 0; value != NULL && i < sizeof(event_handlers) / sizeof(event_handlers[0]); ++i) {
        if ((int)event_handlers[i].event == known && (chat->mode != RL_CHAT_WATCH || event_handlers[i].in_watch))
            event_handlers[i].handler(chat, id, value);
    }
    json_decref(value);
}

void rl_chat_stream_lost(rl_chat_t *chat, const char *why, long reconnect_in_ms)
{
    rl_chat_end_line(chat);
    if (reconnect_in_ms >= 0)
        note(chat, "relay: stream lost (%s); reconnecting in %.1f s", why, (double)reconnect_in_ms / 1000.0);
}

/* ---- what the program asks ---- */

int rl_chat_turn_active(const rl_chat_t *chat)
{
    return chat->turn.active;
}

rl_chat_outcome_t rl_chat_outcome(const rl_chat_t *chat)
{
    if (chat->gone != NULL)
        return RL_CHAT_GONE;
    if (chat->cancelled)
        return RL_CHAT_CANCELLED;
    if (!chat->turn.finished)
        return RL_CHAT_PENDING;
    return chat->turn.complete ? RL_CHAT_COMPLETE : RL_CHAT_INCOMPLETE;
}

const char *rl_chat_gone(const rl_chat_t *chat)
{
    return chat->gone;
}

int rl_chat_prompting(const rl_chat_t *chat)
{
    return chat->prompting;
}

size_t rl_chat_waiting(const rl_chat_t *chat)
{
    return json_array_size(chat->queue);
}

int rl_chat_hello_seen(const rl_chat_t *chat)
{
    return chat->hello;
}

int rl_chat_count(const rl_chat_t *chat)
{
    return chat->count;
}

const char *rl_chat_interaction(const rl_chat_t *chat)
{
    return chat->turn.interaction_id;
}
