#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/diff.h"

typedef struct line {
    const char *text;
    size_t len;
} line_t;

/* One line of the edit script: kept (' '), removed ('-') or added ('+'), with where it sits in each text. */
typedef struct edit {
    char op;
    size_t old_at, new_at; /* 0-based: the line's own, or for the other side the next line to come */
} edit_t;

/* The lines of text (NULL: none), without their newlines; a last line without one counts. */
static line_t *split(const char *text, size_t *count)
{
    size_t n = 0, cap = 16;
    line_t *lines = malloc(cap * sizeof(*lines));

    *count = 0;
    if (lines == NULL)
        return NULL;
    while (text != NULL && *text != '\0') {
        const char *end = strchr(text, '\n');
        size_t len = end != NULL ? (size_t)(end - text) : strlen(text);
        if (n == cap) {
            line_t *grown = realloc(lines, 2 * cap * sizeof(*lines));
            if (grown == NULL) {
                free(lines);
                return NULL;
            }
            lines = grown;
            cap *= 2;
        }
        lines[n++] = (line_t){text, len};
        text += len + (end != NULL);
    }
    *count = n;
    return lines;
}

static int same(const line_t *a, const line_t *b)
{
    return a->len == b->len && memcmp(a->text, b->text, a->len) == 0;
}

/*
 * The edit script from a (n lines) to b (m lines): the common head and tail
 * kept, and the middle by a longest common subsequence when it fits
 * RL_DIFF_CELLS, otherwise removed whole and then added whole.
 */
static edit_t *script(const line_t *a, size_t n, const line_t *b, size_t m, size_t *count)
{
    edit_t *edits = malloc((n + m + 1) * sizeof(*edits));
    size_t head = 0, tail = 0, rows, cols, i, j, k = 0;
    uint32_t *lcs = NULL;

    if (edits == NULL)
        return NULL;
    while (head < n && head < m && same(&a[head], &b[head]))
        ++head;
    while (tail < n - head && tail < m - head && same(&a[n - 1 - tail], &b[m - 1 - tail]))
        ++tail;
    rows = n - head - tail;
    cols = m - head - tail;
    for (i = 0; i < head; ++i)
        edits[k++] = (edit_t){' ', i, i};
    if (rows > 0 && cols > 0 && rows <= RL_DIFF_CELLS / cols)
        lcs = calloc((rows + 1) * (cols + 1), sizeof(*lcs));
    i = j = 0;
    if (lcs != NULL) {
        /* lcs[r][c]: the longest common subsequence of the middles from line r of a and line c of b on. */
#define LCS(r, c) lcs[(r) * (cols + 1) + (c)]
        size_t r, c;
        for (r = rows; r-- > 0;)
            for (c = cols; c-- > 0;)
                LCS(r, c) = same(&a[head + r], &b[head + c])
                                ? LCS(r + 1, c + 1) + 1
                                : (LCS(r + 1, c) >= LCS(r, c + 1) ? LCS(r + 1, c) : LCS(r, c + 1));
        while (i < rows && j < cols) {
            if (same(&a[head + i], &b[head + j])) {
                edits[k++] = (edit_t){' ', head + i, head + j};
                ++i, ++j;
            } else if (LCS(i + 1, j) >= LCS(i, j + 1)) {
                edits[k++] = (edit_t){'-', head + i, head + j};
                ++i;
            } else {
                edits[k++] = (edit_t){'+', head + i, head + j};
                ++j;
            }
        }
#undef LCS
        free(lcs);
    }
    for (; i < rows; ++i)
        edits[k++] = (edit_t){'-', head + i, head + j};
    for (; j < cols; ++j)
        edits[k++] = (edit_t){'+', head + rows, head + j};
    for (i = 0; i < tail; ++i)
        edits[k++] = (edit_t){' ', n - tail + i, m - tail + i};
    *count = k;
    return edits;
}

/* A line of the agent's text: control characters (an escape sequence would drive the terminal) become '?'. */
static void put_text(FILE *out, const char *text, size_t len)
{
    size_t i;

    for (i = 0; i < len; ++i) {
        unsigned char ch = (unsigned char)text[i];
        fputc(ch == '\t' || (ch >= 0x20 && ch != 0x7f) ? ch : '?', out);
    }
}

static void put_line(FILE *out, const rl_term_t *term, int indent, rl_term_style_t style, char mark, const char *text,
                     size_t len)
{
    fprintf(out, "%*s%s%c", indent, "", rl_term_style(term, style), mark);
    put_text(out, text, len);
    fprintf(out, "%s\n", rl_term_style(term, RL_TERM_RESET));
}

int rl_diff_print(FILE *out, const rl_term_t *term, const char *path, const char *old_text, const char *new_text,
                  int indent, size_t max_lines)
{
    size_t n, m, count, k, written = 0, left = 0;
    line_t *a = split(old_text, &n), *b = split(new_text, &m);
    edit_t *edits = a != NULL && b != NULL ? script(a, n, b, m, &count) : NULL;
    const char *where = path != NULL ? path : "";

    if (edits == NULL) {
        free(a);
        free(b);
        return -1;
    }
    /* As git names them: a/ and b/ before the path (an absolute one loses its first slash). */
    where += where[0] == '/';
    fprintf(out, "%*s%s--- %s%s%s\n", indent, "", rl_term_style(term, RL_TERM_BOLD), old_text != NULL ? "a/" : "",
            old_text != NULL ? where : "/dev/null", rl_term_style(term, RL_TERM_RESET));
    fprintf(out, "%*s%s+++ b/%s%s\n", indent, "", rl_term_style(term, RL_TERM_BOLD), where,
            rl_term_style(term, RL_TERM_RESET));
    for (k = 0; k < count && edits[k].op == ' '; ++k)
        ;
    if (k == count)
        fprintf(out, "%*s%s(no changes)%s\n", indent, "", rl_term_style(term, RL_TERM_DIM),
                rl_term_style(term, RL_TERM_RESET));
    while (k < count) {
        /*
         * A hunk: context before the change, and changes until a run of kept
         * lines longer than twice the context (a shorter run joins two hunks, as diff -u does).
         */
        size_t start = k > RL_DIFF_CONTEXT ? k - RL_DIFF_CONTEXT : 0, end = k, last = k, i;
        size_t old_lines = 0, new_lines = 0;
        while (end < count && end <= last + 2 * RL_DIFF_CONTEXT + 1) {
            if (edits[end].op != ' ')
                last = end;
            ++end;
        }
        end = last + RL_DIFF_CONTEXT + 1 < count ? last + RL_DIFF_CONTEXT + 1 : count;
        for (i = start; i < end; ++i) {
            old_lines += edits[i].op != '+';
            new_lines += edits[i].op != '-';
        }
        if (max_lines == 0 || written < max_lines) {
            fprintf(out, "%*s%s@@ -%zu,%zu +%zu,%zu @@%s\n", indent, "", rl_term_style(term, RL_TERM_CYAN),
                    edits[start].old_at + (old_lines > 0), old_lines, edits[start].new_at + (new_lines > 0), new_lines,
                    rl_term_style(term, RL_TERM_RESET));
            ++written;
        } else {
            ++left;
        }
        for (i = start; i < end; ++i) {
            const line_t *line = edits[i].op == '+' ? &b[edits[i].new_at] : &a[edits[i].old_at];
            if (max_lines != 0 && written >= max_lines) {
                ++left;
                continue;
            }
            put_line(out, term, indent,
                     edits[i].op == '-'   ? RL_TERM_RED
                     : edits[i].op == '+' ? RL_TERM_GREEN
                                          : RL_TERM_RESET,
                     edits[i].op, line->text, line->len);
            ++written;
        }
        for (k = end; k < count && edits[k].op == ' '; ++k)
            ;
    }
    if (left > 0)
        fprintf(out, "%*s%s… %zu more line%s of this diff%s\n", indent, "", rl_term_style(term, RL_TERM_DIM), left,
                left == 1 ? "" : "s", rl_term_style(term, RL_TERM_RESET));
    free(edits);
    free(a);
    free(b);
    return 0;
}
