/*
 * Logging: one line per event on stderr. The daemons write one JSON object
 * per line; the client programs switch to text lines that a person reads
 * ("relay-bridge: warn: ..."). Loop thread and helper threads may both log;
 * each line is written with a single write(2). Secrets must never be passed
 * here: log ids, never tokens.
 */
#ifndef RL_COMMON_LOG_H
#define RL_COMMON_LOG_H

#include <jansson.h>

typedef enum rl_log_level { RL_LOG_DEBUG, RL_LOG_INFO, RL_LOG_WARN, RL_LOG_ERROR } rl_log_level_t;

/*
 * Text lines instead of JSON from now on: "program: level: msg", then the
 * other fields of rl_log_fields as key=value. NULL goes back to JSON (the
 * default). Call it before starting threads.
 */
void rl_log_set_text(const char *program);

/* The daemons' choice (relayd --log-format). */
typedef enum rl_log_format { RL_LOG_FORMAT_JSON, RL_LOG_FORMAT_TEXT } rl_log_format_t;
/*
 * Parses "json", "text" or "auto"; auto is text when fd is a terminal and
 * JSON otherwise (a service manager, a file, a pipe). 0 or -1.
 */
int rl_log_parse_format(const char *text, int fd, rl_log_format_t *format);
/*
 * A daemon's lines from now on: JSON, or text for a person at a terminal
 * ("2025-01-02T03:04:05.678Z info  msg key=value ...", values with spaces
 * quoted). Call it before starting threads.
 */
void rl_log_set_format(rl_log_format_t format);
/* Lines below this level are dropped. Default RL_LOG_INFO. */
void rl_log_set_level(rl_log_level_t level);
/* Whether a line at this level would be written: lets callers skip building it. */
int rl_log_enabled(rl_log_level_t level);
/* Parses "debug", "info", "warn", "error"; returns 0 or -1. */
int rl_log_parse_level(const char *text, rl_log_level_t *level);
/* Logs {"time","level","msg"} with msg formatted printf-style. */
void rl_log(rl_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * Logs the given object after adding "time" and "level" to it. Steals the
 * reference to fields. Real numbers (durations: duration_ms) are written as
 * plain decimals with at most three decimals, never in exponent notation.
 */
void rl_log_fields(rl_log_level_t level, json_t *fields);

#define rl_log_debug(...) rl_log(RL_LOG_DEBUG, __VA_ARGS__)
#define rl_log_info(...)  rl_log(RL_LOG_INFO, __VA_ARGS__)
#define rl_log_warn(...)  rl_log(RL_LOG_WARN, __VA_ARGS__)
#define rl_log_error(...) rl_log(RL_LOG_ERROR, __VA_ARGS__)

#endif
