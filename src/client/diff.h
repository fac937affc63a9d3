/*
 * Unified diffs of an agent's file edits, for the terminal client: the
 * `diff` content blocks of docs/api.md ("Content blocks"), shown as
 * `--- a/path`, `+++ b/path`, then hunks with three lines of context.
 * Pure functions of their arguments, one thread at a time.
 */
#ifndef RL_CLIENT_DIFF_H
#define RL_CLIENT_DIFF_H

#include <stddef.h>
#include <stdio.h>

#include "client/term.h"

/* Lines of context around each change, as diff -u. */
#define RL_DIFF_CONTEXT 3

/*
 * Writes the diff from old_text (NULL: a new file) to new_text to out, each
 * line indented by indent spaces: removed lines red, added green, hunk
 * headers cyan when term has colour, plain otherwise. At most max_lines
 * lines of hunks are written (0: no limit); a cut diff ends with a line
 * saying how many were left out. Identical texts write "(no changes)".
 * The texts are compared line by line; a long edit whose middle part does
 * not fit the comparison's bound (RL_DIFF_CELLS) is shown as that part
 * removed and then added. 0, or -1 when memory ran out (nothing useful was
 * written).
 */
int rl_diff_print(FILE *out, const rl_term_t *term, const char *path, const char *old_text, const char *new_text,
                  int indent, size_t max_lines);

/* The comparison's bound: lines of the changed middle of old times those of new. */
#define RL_DIFF_CELLS (4u * 1024u * 1024u)

#endif
