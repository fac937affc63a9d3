#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"

static rl_log_level_t threshold = RL_LOG_INFO;
static const char *const level_names[] = {"debug", "info", "warn", "error"};

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

void rl_log_fields(rl_log_level_t level, json_t *fields)
{
    char when[RL_ISO8601_LEN];
    json_t *line;
    char *text;

    if (level < threshold || fields == NULL) {
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
    char msg[1024];
    va_list ap;

    if (level < threshold)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    rl_log_fields(level, json_pack("{s:s}", "msg", msg));
}
