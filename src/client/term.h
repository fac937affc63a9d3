/*
 * Terminal output for the command-line programs: whether a stream is a
 * terminal, whether to colour it, its width, and text wrapped to it.
 *
 * Colour follows https://no-color.org: NO_COLOR set to anything but the empty
 * string turns it off, and so do TERM=dumb and a stream that is not a
 * terminal.
 */
#ifndef RL_CLIENT_TERM_H
#define RL_CLIENT_TERM_H

#include <stdio.h>

typedef struct rl_term {
    int tty;    /* the stream is a terminal */
    int colour; /* escape sequences may be written */
    int width;  /* columns; 80 when unknown */
} rl_term_t;

typedef enum rl_term_style {
    RL_TERM_RESET,
    RL_TERM_BOLD,
    RL_TERM_DIM,
    RL_TERM_RED,
    RL_TERM_GREEN,
    RL_TERM_YELLOW,
    RL_TERM_CYAN,
    RL_TERM_STYLE_COUNT
} rl_term_style_t;

/* Looks at file descriptor fd and the environment (NO_COLOR, TERM, COLUMNS). */
void rl_term_detect(int fd, rl_term_t *term);
/* The escape sequence of a style, or "" when colour is off. */
const char *rl_term_style(const rl_term_t *term, rl_term_style_t style);
/* A time in milliseconds since the epoch as local HH:MM:SS ("--:--" for none), for event lines. */
void rl_term_clock(long long ms, char *out, size_t outsz);
/*
 * Writes text to out wrapped at term->width, every line indented by indent
 * spaces (the first too). Words longer than a line are not broken. Existing
 * line breaks are kept.
 */
void rl_term_wrap(FILE *out, const rl_term_t *term, const char *text, int indent);
/*
 * As rl_term_wrap, and text marked **like this** is written in `style`
 * (bold when colour is off means plain text, the markers dropped).
 */
void rl_term_wrap_marked(FILE *out, const rl_term_t *term, const char *text, int indent, rl_term_style_t style);

#endif
