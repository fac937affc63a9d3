/*
 * A session's timeline for people (the terminal client's `relay history`,
 * and the task lines of `relay chat` and `relay send`): tool calls
 * with their status, arguments and results, unified diffs of the agent's
 * edits, plans as checklists, command output, and approvals with their
 * content and decision (messages are chat.h's rl_chat_print_message). The
 * shapes are docs/api.md's ("Timeline", "Content
 * blocks"); an unknown block type is named, never dropped silently.
 *
 * Text that comes from the agent is written with its control characters
 * replaced, so that it cannot drive the terminal. Colour follows term.
 * Pure functions of their arguments; one thread at a time.
 */
#ifndef RL_CLIENT_TIMELINE_H
#define RL_CLIENT_TIMELINE_H

#include <jansson.h>
#include <stdio.h>

#include "client/term.h"

/* How many lines of one block are shown before "… N more lines". */
#define RL_TIMELINE_TEXT_LINES     20
#define RL_TIMELINE_TERMINAL_LINES 40
#define RL_TIMELINE_DIFF_LINES     400

/* A task (the timeline's Task view): its line with status, then args, plan, result blocks and error. */
void rl_timeline_print_task(FILE *out, const rl_term_t *term, const json_t *task);
/* An approval of the timeline: its line with the decision, message, command, content. */
void rl_timeline_print_approval(FILE *out, const rl_term_t *term, const json_t *approval);
/* Content blocks (an array), each indented by indent spaces. */
void rl_timeline_print_blocks(FILE *out, const rl_term_t *term, const json_t *blocks, int indent);
/* A plan's entries ({content, priority, status}) as a checklist: [x] done, [~] in progress, [ ] pending. */
void rl_timeline_print_plan(FILE *out, const rl_term_t *term, const json_t *entries, int indent);
/*
 * What a task's result (or partial result) holds, shown under its line: a
 * plan's checklist, content blocks, a thought's text, or else the value as
 * compact JSON. Nothing for null.
 */
void rl_timeline_print_outcome(FILE *out, const rl_term_t *term, const json_t *value, int indent);
/* A task's arguments on one line, cut to the terminal's width. Nothing for null or {}. */
void rl_timeline_print_args(FILE *out, const rl_term_t *term, const json_t *args, int indent);

#endif
