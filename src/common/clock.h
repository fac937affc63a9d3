#ifndef RL_COMMON_CLOCK_H
#define RL_COMMON_CLOCK_H

#include <stddef.h>
#include <stdint.h>

/*
 * Wall clock in milliseconds since the epoch: every rule of relayd that waits
 * (an idempotency key's lifetime, the replay window, an approval's expiry,
 * the delete grace) reads this one.
 */
int64_t rl_clock_now_ms(void);
/*
 * Moves this process's wall clock (rl_clock_now_ms) ms forward, for good; any
 * thread. Only the tests' relayd-testclock calls it (POST /test/clock on its
 * metrics listener), so that a test advances time instead of sleeping
 * through it; no shipped program can reach it.
 */
void rl_clock_advance_ms(int64_t ms);
/* Monotonic clock in microseconds, for durations only. */
int64_t rl_clock_mono_us(void);
/* Monotonic clock in milliseconds: deadlines and timers of the client programs. */
int64_t rl_clock_mono_ms(void);
/*
 * Sleeps ms milliseconds, resuming after a signal interrupts it. For the
 * blocking client programs only: the event loops of relayd and relay-bridge
 * never sleep.
 */
void rl_clock_sleep_ms(long ms);
/*
 * Formats epoch milliseconds as ISO 8601 UTC with millisecond precision
 * ("2026-11-21T05:56:20.123Z") into buf, which needs RL_ISO8601_LEN bytes.
 */
#define RL_ISO8601_LEN 25
void rl_clock_iso8601(int64_t ms, char *buf);

#endif
