#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "bridge/log.h"

static rl_blog_level_t threshold = RL_BLOG_INFO;

void rl_bridge_log_level(rl_blog_level_t level)
{
    threshold = level;
}

void rl_bridge_log(rl_blog_level_t level, const char *fmt, ...)
{
    static const char *const names[] = {"debug", "info", "warn", "error"};
    char line[2048];
    va_list ap;
    int n;

    if (level < threshold)
        return;
    n = snprintf(line, sizeof(line), "relay-bridge: %s: ", names[level]);
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof(line) - 2)
        n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    if (write(STDERR_FILENO, line, (size_t)n) < 0)
        return;
}
