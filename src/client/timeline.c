#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "client/diff.h"
#include "client/timeline.h"

static const char *str(const json_t *object, const char *key)
{
    const char *value = json_string_value(json_object_get(object, key));

    return value != NULL ? value : "";
}

static const char *on(const rl_term_t *term, rl_term_style_t style)
{
    return rl_term_style(term, style);
}

/* Agent text with its control characters replaced: an escape sequence would drive the terminal. */
static void put_text(FILE *out, const char *text, size_t len)
{
    size_t i;

    for (i = 0; i < len; ++i) {
        unsigned char ch = (unsigned char)text[i];
        fputc(ch == '\t' || (ch >= 0x20 && ch != 0x7f) ? ch : '?', out);
    }
}

/* Lines of text, indented, in style, at most max of them and then how many were left out. */
static void put_lines(FILE *out, const rl_term_t *term, const char *text, int indent, rl_term_style_t style, size_t max)
{
    size_t shown = 0, left = 0;

    while (*text != '\0') {
        const char *end = strchr(text, '\n');
        size_t len = end != NULL ? (size_t)(end - text) : strlen(text);
        if (shown < max) {
            fprintf(out, "%*s%s", indent, "", on(term, style));
            put_text(out, text, len);
            fprintf(out, "%s\n", on(term, RL_TERM_RESET));
            ++shown;
        } else {
            ++left;
        }
        text += len + (end != NULL);
    }
    if (left > 0)
        fprintf(out, "%*s%s… %zu more line%s%s\n", indent, "", on(term, RL_TERM_DIM), left, left == 1 ? "" : "s",
                on(term, RL_TERM_RESET));
}

/* ---- content blocks ---- */

static void block_text(FILE *out, const rl_term_t *term, const json_t *block, int indent)
{
    put_lines(out, term, str(block, "text"), indent, RL_TERM_RESET, RL_TIMELINE_TEXT_LINES);
}

static void block_diff(FILE *out, const rl_term_t *term, const json_t *block, int indent)
{
    const json_t *old_text = json_object_get(block, "old_text");

    if (rl_diff_print(out, term, str(block, "path"), json_is_string(old_text) ? json_string_value(old_text) : NULL,
                      str(block, "new_text"), indent, RL_TIMELINE_DIFF_LINES) != 0)
        fprintf(out, "%*s(the diff of %s is too large to show)\n", indent, "", str(block, "path"));
}

static void block_terminal(FILE *out, const rl_term_t *term, const json_t *block, int indent)
{
    const json_t *code = json_object_get(block, "exit_code");

    put_lines(out, term, str(block, "output"), indent + 2, RL_TERM_RESET, RL_TIMELINE_TERMINAL_LINES);
    if (json_is_integer(code))
        fprintf(out, "%*s%sexit status %lld%s\n", indent, "",
                on(term, json_integer_value(code) == 0 ? RL_TERM_DIM : RL_TERM_RED),
                (long long)json_integer_value(code), on(term, RL_TERM_RESET));
}

/* docs/api.md "Content blocks": one row per type. */
static const struct block_kind {
    const char *type;
    void (*print)(FILE *out, const rl_term_t *term, const json_t *block, int indent);
} block_kinds[] = {
    {"text", block_text},
    {"diff", block_diff},
    {"terminal", block_terminal},
};

void rl_timeline_print_blocks(FILE *out, const rl_term_t *term, const json_t *blocks, int indent)
{
    const json_t *block;
    size_t i, k;

    json_array_foreach(blocks, i, block)
    {
        for (k = 0; k < sizeof(block_kinds) / sizeof(block_kinds[0]); ++k) {
            if (strcmp(str(block, "type"), block_kinds[k].type) == 0)
                break;
        }
        if (k < sizeof(block_kinds) / sizeof(block_kinds[0]))
            block_kinds[k].print(out, term, block, indent);
        else
            fprintf(out, "%*s%s(a block of type %s, which this client does not show)%s\n", indent, "",
                    on(term, RL_TERM_DIM), str(block, "type"), on(term, RL_TERM_RESET));
        if (json_is_true(json_object_get(block, "truncated")))
            fprintf(out, "%*s%s(cut by the bridge)%s\n", indent, "", on(term, RL_TERM_DIM), on(term, RL_TERM_RESET));
    }
}

/* ---- plans ---- */

static const struct plan_status {
    const char *status;
    const char *box;
    rl_term_style_t style;
} plan_statuses[] = {
    {"completed", "[x]", RL_TERM_GREEN},
    {"in_progress", "[~]", RL_TERM_YELLOW},
    {"pending", "[ ]", RL_TERM_RESET},
};

void rl_timeline_print_plan(FILE *out, const rl_term_t *term, const json_t *entries, int indent)
{
    const json_t *entry;
    size_t i, k;

    json_array_foreach(entries, i, entry)
    {
        const char *content = str(entry, "content");
        for (k = 0; k + 1 < sizeof(plan_statuses) / sizeof(plan_statuses[0]); ++k) {
            if (strcmp(str(entry, "status"), plan_statuses[k].status) == 0)
                break;
        }
        fprintf(out, "%*s%s%s%s ", indent, "", on(term, plan_statuses[k].style), plan_statuses[k].box,
                on(term, RL_TERM_RESET));
        put_text(out, content, strcspn(content, "\n"));
        if (strcmp(str(entry, "priority"), "high") == 0)
            fprintf(out, " %s(high)%s", on(term, RL_TERM_DIM), on(term, RL_TERM_RESET));
        fputc('\n', out);
    }
}

/* ---- tasks ---- */

void rl_timeline_print_args(FILE *out, const rl_term_t *term, const json_t *args, int indent)
{
    char *text;
    size_t len, room = term->width > indent + 26 ? (size_t)(term->width - indent - 8) : 20;

    if (args == NULL || json_is_null(args) || (json_is_object(args) && json_object_size(args) == 0))
        return;
    text = json_dumps(args, JSON_COMPACT | JSON_ENCODE_ANY);
    if (text == NULL)
        return;
    len = strlen(text);
    fprintf(out, "%*s%sargs%s ", indent, "", on(term, RL_TERM_DIM), on(term, RL_TERM_RESET));
    put_text(out, text, len > room ? room : len);
    fprintf(out, "%s\n", len > room ? "…" : "");
    free(text);
}

void rl_timeline_print_outcome(FILE *out, const rl_term_t *term, const json_t *value, int indent)
{
    const json_t *entries = json_object_get(value, "entries"), *content = json_object_get(value, "content");
    char *text;

    if (value == NULL || json_is_null(value))
        return;
    if (json_is_array(entries)) {
        rl_timeline_print_plan(out, term, entries, indent);
    } else if (json_is_array(content)) {
        rl_timeline_print_blocks(out, term, content, indent);
    } else if (json_is_string(json_object_get(value, "text"))) {
        /* A thought. */
        put_lines(out, term, str(value, "text"), indent, RL_TERM_DIM, RL_TIMELINE_TEXT_LINES);
    } else if (json_is_string(value)) {
        put_lines(out, term, json_string_value(value), indent, RL_TERM_RESET, RL_TIMELINE_TEXT_LINES);
    } else if ((text = json_dumps(value, JSON_INDENT(2) | JSON_ENCODE_ANY)) != NULL) {
        put_lines(out, term, text, indent, RL_TERM_RESET, RL_TIMELINE_TEXT_LINES);
        free(text);
    }
}

/* A task's status as its line shows it: one row each. */
static const struct task_status {
    const char *status;
    const char *mark;
    rl_term_style_t style;
    const char *word;
} task_statuses[] = {
    {"created", "▶", RL_TERM_CYAN, "started"},       {"progressing", "▶", RL_TERM_CYAN, "running"},
    {"completed", "✓", RL_TERM_GREEN, "completed"},  {"failed", "✗", RL_TERM_RED, "failed"},
    {"cancelled", "■", RL_TERM_YELLOW, "cancelled"},
};

/* Labels that only name a state: the line says the task's own state after its title. */
static const char *const state_words[] = {"pending", "in progress", "in_progress", "done", "finished", NULL};

/*
 * Whether a status_label is only a state ("running"): the relay keeps a task's last label, so an ended
 * task would read "task running completed". Such a label is no title; the task's name is.
 */
static int names_a_state(const char *label)
{
    size_t k;

    for (k = 0; k < sizeof(task_statuses) / sizeof(task_statuses[0]); ++k) {
        if (strcasecmp(label, task_statuses[k].status) == 0 || strcasecmp(label, task_statuses[k].word) == 0)
            return 1;
    }
    for (k = 0; state_words[k] != NULL; ++k) {
        if (strcasecmp(label, state_words[k]) == 0)
            return 1;
    }
    return 0;
}

void rl_timeline_print_task(FILE *out, const rl_term_t *term, const json_t *task)
{
    const char *name = str(task, "name"), *label = str(task, "status_label"), *kind = str(task, "kind");
    const json_t *result = json_object_get(task, "result"), *error = json_object_get(task, "error");
    size_t k;
    char when[32];

    if (names_a_state(label))
        label = "";
    for (k = 0; k + 1 < sizeof(task_statuses) / sizeof(task_statuses[0]); ++k) {
        if (strcmp(str(task, "status"), task_statuses[k].status) == 0)
            break;
    }
    rl_term_clock(json_integer_value(json_object_get(task, "created_at")), when, sizeof(when));
    fprintf(out, "%s%s%s %s%s %s%s ", on(term, RL_TERM_DIM), when, on(term, RL_TERM_RESET),
            on(term, task_statuses[k].style), task_statuses[k].mark, strcmp(kind, "plan") == 0 ? "plan" : "task",
            on(term, RL_TERM_RESET));
    put_text(out,
             label[0] != '\0'  ? label
             : name[0] != '\0' ? name
                               : kind,
             strcspn(label[0] != '\0'  ? label
                     : name[0] != '\0' ? name
                                       : kind,
                     "\n"));
    fprintf(out, " %s%s", on(term, RL_TERM_DIM), task_statuses[k].word);
    if (kind[0] != '\0' && strcmp(kind, "plan") != 0)
        fprintf(out, ", %s", kind);
    fprintf(out, "%s\n", on(term, RL_TERM_RESET));
    rl_timeline_print_args(out, term, json_object_get(task, "args"), 2);
    /* The result when the task ended with one, else what it showed last. */
    rl_timeline_print_outcome(
        out, term, result != NULL && !json_is_null(result) ? result : json_object_get(task, "partial_result"), 2);
    if (error != NULL && !json_is_null(error)) {
        const char *message = json_is_string(error) ? json_string_value(error) : str(error, "message");
        fprintf(out, "  %serror:%s ", on(term, RL_TERM_RED), on(term, RL_TERM_RESET));
        if (message[0] != '\0') {
            put_text(out, message, strcspn(message, "\n"));
            fputc('\n', out);
        } else {
            char *text = json_dumps(error, JSON_COMPACT | JSON_ENCODE_ANY);
            if (text != NULL)
                put_text(out, text, strlen(text));
            fputc('\n', out);
            free(text);
        }
    }
}

/* ---- approvals ---- */

/* What became of an approval, by its state and decision. */
static const struct approval_outcome {
    const char *state, *decision;
    const char *word;
    rl_term_style_t style;
} approval_outcomes[] = {
    {"resolved", "approve", "approved", RL_TERM_GREEN},
    {"resolved", "approve_always", "approved always", RL_TERM_GREEN},
    {"resolved", "deny", "denied", RL_TERM_RED},
    {"expired", NULL, "expired unanswered", RL_TERM_YELLOW},
    {"pending", NULL, "waiting for an answer", RL_TERM_YELLOW},
};

void rl_timeline_print_approval(FILE *out, const rl_term_t *term, const json_t *approval)
{
    const struct approval_outcome *outcome = NULL;
    const json_t *content = json_object_get(approval, "content");
    char when[32];
    size_t k;

    for (k = 0; k < sizeof(approval_outcomes) / sizeof(approval_outcomes[0]); ++k) {
        const struct approval_outcome *row = &approval_outcomes[k];
        if (strcmp(str(approval, "state"), row->state) == 0 &&
            (row->decision == NULL || strcmp(str(approval, "decision"), row->decision) == 0)) {
            outcome = row;
            break;
        }
    }
    rl_term_clock(json_integer_value(json_object_get(approval, "created_at")), when, sizeof(when));
    fprintf(out, "%s%s%s %s? approval%s ", on(term, RL_TERM_DIM), when, on(term, RL_TERM_RESET),
            on(term, RL_TERM_YELLOW), on(term, RL_TERM_RESET));
    put_text(out, str(approval, "title"), strcspn(str(approval, "title"), "\n"));
    fprintf(out, " %s%s%s", on(term, RL_TERM_DIM), str(approval, "severity"), on(term, RL_TERM_RESET));
    if (outcome != NULL)
        fprintf(out, " %s→ %s%s", on(term, outcome->style), outcome->word, on(term, RL_TERM_RESET));
    else
        fprintf(out, " → %s %s", str(approval, "state"), str(approval, "decision"));
    if (str(approval, "scope")[0] != '\0')
        fprintf(out, " %s(%s)%s", on(term, RL_TERM_DIM), str(approval, "scope"), on(term, RL_TERM_RESET));
    fputc('\n', out);
    if (str(approval, "message")[0] != '\0')
        put_lines(out, term, str(approval, "message"), 2, RL_TERM_RESET, RL_TIMELINE_TEXT_LINES);
    if (str(approval, "command")[0] != '\0') {
        fprintf(out, "  %scommand:%s ", on(term, RL_TERM_DIM), on(term, RL_TERM_RESET));
        put_text(out, str(approval, "command"), strlen(str(approval, "command")));
        fputc('\n', out);
    }
    if (json_is_array(content))
        rl_timeline_print_blocks(out, term, content, 2);
}
