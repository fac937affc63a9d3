#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "client/term.h"

static const char *const sequences[RL_TERM_STYLE_COUNT] = {
    [RL_TERM_RESET] = "\033[0m", [RL_TERM_BOLD] = "\033[1m",   [RL_TERM_DIM] = "\033[2m",
    [RL_TERM_RED] = "\033[31m",  [RL_TERM_GREEN] = "\033[32m", [RL_TERM_YELLOW] = "\033[33m",
    [RL_TERM_CYAN] = "\033[36m",
};

void rl_term_detect(int fd, rl_term_t *term)
{
    const char *no_color = getenv("NO_COLOR"), *kind = getenv("TERM"), *columns = getenv("COLUMNS");
    struct winsize ws;

    term->tty = isatty(fd);
    term->colour =
        term->tty && (no_color == NULL || no_color[0] == '\0') && (kind == NULL || strcmp(kind, "dumb") != 0);
    term->width = 80;
    if (term->tty && ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20)
        term->width = ws.ws_col;
    else if (columns != NULL && atoi(columns) >= 20)
        term->width = atoi(columns);
    if (term->width > 160)
        term->width = 160;
}

const char *rl_term_style(const rl_term_t *term, rl_term_style_t style)
{
    return term->colour && style >= 0 && style < RL_TERM_STYLE_COUNT ? sequences[style] : "";
}

/* Display width of a UTF-8 word: one column per code point, which is right for the text this shows. */
static int columns_of(const char *s, size_t len)
{
    int n = 0;
    size_t i;

    for (i = 0; i < len; ++i) {
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            ++n;
    }
    return n;
}

static void wrap(FILE *out, const rl_term_t *term, const char *text, int indent, int marked, rl_term_style_t style)
{
    int width = term->width - 1, column = 0, in_mark = 0;
    const char *p = text;

    if (width < indent + 20)
        width = indent + 20;
    while (*p != '\0') {
        const char *start;
        size_t len;
        int cols;

        if (*p == '\n') {
            fputc('\n', out);
            column = 0;
            ++p;
            continue;
        }
        if (*p == ' ' || *p == '\t') {
            ++p;
            continue;
        }
        start = p;
        while (*p != '\0' && *p != ' ' && *p != '\t' && *p != '\n')
            ++p;
        len = (size_t)(p - start);
        cols = columns_of(start, len);
        if (marked) {
            const char *m;
            for (m = start; m + 1 < p; ++m) {
                if (m[0] == '*' && m[1] == '*') {
                    cols -= 2;
                    ++m;
                }
            }
        }
        if (column > indent && column + 1 + cols > width) {
            fputc('\n', out);
            column = 0;
        }
        if (column == 0) {
            fprintf(out, "%*s", indent, "");
            column = indent;
        } else {
            fputc(' ', out);
            ++column;
        }
        if (!marked) {
            fwrite(start, 1, len, out);
        } else {
            const char *m;
            for (m = start; m < p; ++m) {
                if (m + 1 < p && m[0] == '*' && m[1] == '*') {
                    in_mark = !in_mark;
                    fputs(rl_term_style(term, in_mark ? style : RL_TERM_RESET), out);
                    ++m;
                    continue;
                }
                fputc(*m, out);
            }
        }
        column += cols;
    }
    if (in_mark)
        fputs(rl_term_style(term, RL_TERM_RESET), out);
    if (column > 0)
        fputc('\n', out);
}

void rl_term_clock(long long ms, char *out, size_t outsz)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;

    if (ms <= 0 || localtime_r(&t, &tm) == NULL) {
        snprintf(out, outsz, "--:--");
        return;
    }
    strftime(out, outsz, "%H:%M:%S", &tm);
}

void rl_term_wrap(FILE *out, const rl_term_t *term, const char *text, int indent)
{
    wrap(out, term, text, indent, 0, RL_TERM_RESET);
}

void rl_term_wrap_marked(FILE *out, const rl_term_t *term, const char *text, int indent, rl_term_style_t style)
{
    wrap(out, term, text, indent, 1, style);
}
