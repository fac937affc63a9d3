#include <stdio.h>
#include <string.h>

#include "common/duration.h"

static const struct {
    const char *suffix;
    int64_t ms;
} units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000}};

int rl_duration_parse(const char *text, int64_t *ms)
{
    return rl_duration_parse_default(text, 0, ms);
}

int rl_duration_parse_default(const char *text, int64_t bare_unit_ms, int64_t *ms)
{
    int64_t value = 0;
    const char *p = text;
    size_t i;

    if (*p < '0' || *p > '9')
        return -1;
    while (*p >= '0' && *p <= '9') {
        if (value > (INT64_MAX - 9) / 10)
            return -1;
        value = value * 10 + (*p - '0');
        ++p;
    }
    if (*p == '\0' && bare_unit_ms > 0) {
        if (value > INT64_MAX / bare_unit_ms)
            return -1;
        *ms = value * bare_unit_ms;
        return 0;
    }
    for (i = 0; i < sizeof(units) / sizeof(units[0]); ++i) {
        if (strcmp(p, units[i].suffix) == 0) {
            if (value > INT64_MAX / units[i].ms)
                return -1;
            *ms = value * units[i].ms;
            return 0;
        }
    }
    return -1;
}

void rl_duration_format(int64_t ms, char *buf, int bufsz)
{
    int i;

    for (i = (int)(sizeof(units) / sizeof(units[0])) - 1; i > 0; --i) {
        if (ms != 0 && ms % units[i].ms == 0) {
            snprintf(buf, (size_t)bufsz, "%lld%s", (long long)(ms / units[i].ms), units[i].suffix);
            return;
        }
    }
    snprintf(buf, (size_t)bufsz, "%lldms", (long long)ms);
}
