#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"

static rl_log_level_t threshold = RL_LOG_INFO;
static const char *const level_names[] = {"debug", "info", "warn", "error"};
static const char *text_program; /* the client programs' text lines: "program: level: msg" */
static int text_stamped;         /* a daemon's text lines: "time level msg" */

#define LINE_MAX_TEXT 2048

void rl_log_set_text(const char *program)
{
    text_program = program;
    text_stamped = 0;
}

void rl_log_set_format(rl_log_format_t format)
{
    text_program = NULL;
    text_stamped = format == RL_LOG_FORMAT_TEXT;
}

int rl_log_parse_format(const char *text, int fd, rl_log_format_t *format)
{
    if (strcmp(text, "json") == 0)
        *format = RL_LOG_FORMAT_JSON;
    else if (strcmp(text, "text") == 0)
        *format = RL_LOG_FORMAT_TEXT;
    else if (strcmp(text, "auto") == 0)
        *format = isatty(fd) ? RL_LOG_FORMAT_TEXT : RL_LOG_FORMAT_JSON;
    else
        return -1;
    return 0;
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

/*
 * A real as a plain decimal: "0.123", "12", "1500.5". Durations are the only
 * reals logged, and a reader (or a log pipeline) should not meet
 * "1.2300000000000001e-05" for them.
 */
static size_t append_real(char *line, size_t n, double value)
{
    char number[64];
    int len;

    if (value != value || value > 1e15 || value < -1e15)
        return append(line, n, "null");
    len = snprintf(number, sizeof(number), "%.3f", value);
    while (len > 0 && number[len - 1] == '0')
        number[--len] = '\0';
    if (len > 0 && number[len - 1] == '.')
        number[--len] = '\0';
    if (strcmp(number, "-0") == 0)
        return append(line, n, "0");
    return append(line, n, "%s", number);
}

/* Whether a text value must be quoted to be read back: empty, or with spaces, quotes, '=' or controls. */
static int needs_quotes(const char *value)
{
    if (*value == '\0')
        return 1;
    for (; *value != '\0'; ++value) {
        if ((unsigned char)*value <= ' ' || *value == '"' || *value == '=' || *value == '\\')
            return 1;
    }
    return 0;
}

/*
 * Text: "program: level: msg key=value ..." for the client programs, or
 * "time level msg key=value ..." for a daemon on a terminal; the message
 * first, then the other fields in their order.
 */
static void write_text(rl_log_level_t level, const json_t *fields)
{
    char line[LINE_MAX_TEXT], when[RL_ISO8601_LEN];
    const char *key, *msg = json_string_value(json_object_get(fields, "msg"));
    json_t *value;
    size_t n;

    if (text_stamped) {
        rl_clock_iso8601(rl_clock_now_ms(), when);
        n = append(line, 0, "%s %-5s %s", when, level_names[level], msg != NULL ? msg : "");
    } else {
        n = append(line, 0, "%s: %s: %s", text_program, level_names[level], msg != NULL ? msg : "");
    }
    json_object_foreach((json_t *)fields, key, value)
    {
        char *dumped;
        if (strcmp(key, "msg") == 0)
            continue;
        if (json_is_string(value)) {
            if (text_stamped && needs_quotes(json_string_value(value))) {
                dumped = json_dumps(value, JSON_ENCODE_ANY);
                n = append(line, n, " %s=%s", key, dumped != NULL ? dumped : "?");
                free(dumped);
            } else {
                n = append(line, n, " %s=%s", key, json_string_value(value));
            }
            continue;
        }
        if (json_is_real(value)) {
            n = append(line, n, " %s=", key);
            n = append_real(line, n, json_real_value(value));
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

/*
 * One JSON object: time and level first, so that the lines read well in a
 * terminal too, then the fields in their order. Written by hand around
 * jansson so that reals come out as plain decimals (append_real).
 */
static void write_json(rl_log_level_t level, json_t *fields)
{
    char when[RL_ISO8601_LEN];
    const char *key;
    json_t *value;
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);

    if (out == NULL)
        return;
    rl_clock_iso8601(rl_clock_now_ms(), when);
    fprintf(out, "{\"time\":\"%s\",\"level\":\"%s\"", when, level_names[level]);
    json_object_foreach(fields, key, value)
    {
        json_t *name;
        char *dumped;
        if (strcmp(key, "time") == 0 || strcmp(key, "level") == 0)
            continue;
        if (key[strspn(key, "abcdefghijklmnopqrstuvwxyz0123456789_")] == '\0') {
            fprintf(out, ",\"%s\":", key);
        } else {
            name = json_string(key);
            dumped = name != NULL ? json_dumps(name, JSON_ENCODE_ANY) : NULL;
            json_decref(name);
            if (dumped == NULL)
                continue;
            fprintf(out, ",%s:", dumped);
            free(dumped);
        }
        if (json_is_real(value)) {
            char number[LINE_MAX_TEXT];
            fwrite(number, 1, append_real(number, 0, json_real_value(value)), out);
            continue;
        }
        dumped = json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY);
        fputs(dumped != NULL ? dumped : "null", out);
        free(dumped);
    }
    fputs("}\n", out);
    if (fclose(out) != 0 || text == NULL) {
        free(text);
        return;
    }
    /* A single write keeps concurrent lines whole; a short write to stderr is not worth retrying. */
    if (write(STDERR_FILENO, text, len) < 0) {
    }
    free(text);
}

void rl_log_fields(rl_log_level_t level, json_t *fields)
{
    if (level < threshold || fields == NULL) {
        json_decref(fields);
        return;
    }
    if (text_program != NULL || text_stamped)
        write_text(level, fields);
    else
        write_json(level, fields);
    json_decref(fields);
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
    if (text_program != NULL || text_stamped) {
        /* Straight to text: a message that is not UTF-8 would not survive a JSON string. */
        char line[LINE_MAX_TEXT], when[RL_ISO8601_LEN];
        size_t n;
        if (text_stamped) {
            rl_clock_iso8601(rl_clock_now_ms(), when);
            n = append(line, 0, "%s %-5s %s", when, level_names[level], msg);
        } else {
            n = append(line, 0, "%s: %s: %s", text_program, level_names[level], msg);
        }
        line[n++] = '\n';
        if (write(STDERR_FILENO, line, n) < 0) {
        }
        return;
    }
    rl_log_fields(level, json_pack("{s:s}", "msg", msg));
}
