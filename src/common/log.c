#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"

static rl_log_level_t threshold = RL_LOG_INFO;
static const char *const level_names[] = {"debug", "info", "warn", "error"};
static const char *text_program; /* NULL: JSON lines */

#define LINE_MAX_TEXT 2048

void rl_log_set_text(const char *program)
{
    text_program = program;
}

void rl_log_set_level(rl_log_level_t level)
{
    threshold = level;
}

int rl_log_enabled(rl_log_level_t level)
{
    return level >= threshold;
}

int rl_log_parse_level(const char *text, rl_log_level_t *level)
{
    int i;

    for (i = 0; i < 4; ++i) {
        if (strcmp(text, level_names[i]) == 0) {
            *level = (rl_log_level_t)i;
            return 0;
        }
    }
    return -1;
}

/* Appends printf-style to line (LINE_MAX_TEXT bytes, n used), keeping room for the newline. */
static size_t append(char *line, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static size_t append(char *line, size_t n, const char *fmt, ...)
{
    va_list ap;
    int wrote;

    if (n >= LINE_MAX_TEXT - 1)
        return n;
    va_start(ap, fmt);
    wrote = vsnprintf(line + n, LINE_MAX_TEXT - 1 - n, fmt, ap);
    va_end(ap);
    if (wrote < 0)
        return n;
    n += (size_t)wrote;
    return n < LINE_MAX_TEXT - 1 ? n : LINE_MAX_TEXT - 2;
}

/* "program: level: msg key=value ...": the message first, then the other fields in their order. */
static void write_text(rl_log_level_t level, const json_t *fields)
{
    char line[LINE_MAX_TEXT];
    const char *key;
    json_t *value;
    size_t n = append(line, 0, "%s: %s: %s", text_program, level_names[level],
                      json_string_value(json_object_get(fields, "msg")) != NULL
                          ? json_string_value(json_object_get(fields, "msg"))
                          : "");

    json_object_foreach((json_t *)fields, key, value)
    {
        char *dumped;
        if (strcmp(key, "msg") == 0)
            continue;
        if (json_is_string(value)) {
            n = append(line, n, " %s=%s", key, json_string_value(value));
            continue;
        }
        dumped = json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY);
        n = append(line, n, " %s=%s", key, dumped != NULL ? dumped : "?");
        free(dumped);
    }
    line[n++] = '\n';
    if (write(STDERR_FILENO, line, n) < 0) {
    }
}

void rl_log_fields(rl_log_level_t level, json_t *fields)
{
    char when[RL_ISO8601_LEN];
    json_t *line;
    char *text;

    if (level < threshold || fields == NULL) {
        json_decref(fields);
        return;
    }
    if (text_program != NULL) {
        write_text(level, fields);
        json_decref(fields);
        return;
    }
    rl_clock_iso8601(rl_clock_now_ms(), when);
    /* Time and level first, so that the lines read well in a terminal too. */
    line = json_pack("{s:s, s:s}", "time", when, "level", level_names[level]);
    json_object_update(line, fields);
    json_decref(fields);
    text = json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(line);
    if (text == NULL)
        return;
    size_t len = strlen(text);
    text[len] = '\n';
    /* A single write keeps concurrent lines whole; a short write to stderr is not worth retrying. */
    if (write(STDERR_FILENO, text, len + 1) < 0) {
    }
    free(text);
}

void rl_log(rl_log_level_t level, const char *fmt, ...)
{
    char msg[LINE_MAX_TEXT];
    va_list ap;

    if (level < threshold)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (text_program != NULL) {
        /* Straight to text: a message that is not UTF-8 would not survive a JSON string. */
        char line[LINE_MAX_TEXT];
        size_t n = append(line, 0, "%s: %s: %s", text_program, level_names[level], msg);
        line[n++] = '\n';
        if (write(STDERR_FILENO, line, n) < 0) {
        }
        return;
    }
    rl_log_fields(level, json_pack("{s:s}", "msg", msg));
}
