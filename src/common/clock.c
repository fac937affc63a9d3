#include <errno.h>
#include <stdio.h>
#include <time.h>

#include "common/clock.h"

/* How far rl_clock_advance_ms moved this process's wall clock; 0 outside the tests' builds. */
static int64_t advanced_ms;

int64_t rl_clock_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + __atomic_load_n(&advanced_ms, __ATOMIC_RELAXED);
}

void rl_clock_advance_ms(int64_t ms)
{
    if (ms > 0)
        __atomic_add_fetch(&advanced_ms, ms, __ATOMIC_RELAXED);
}

int64_t rl_clock_mono_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t rl_clock_mono_ms(void)
{
    return rl_clock_mono_us() / 1000;
}

void rl_clock_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    if (ms <= 0)
        return;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void rl_clock_iso8601(int64_t ms, char *buf)
{
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;

    size_t len;

    gmtime_r(&secs, &tm);
    len = strftime(buf, RL_ISO8601_LEN, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + len, RL_ISO8601_LEN - len, ".%03uZ", (unsigned)(ms % 1000) % 1000u);
}
