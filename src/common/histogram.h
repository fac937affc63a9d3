/*
 * Latency histograms with fixed buckets, for the Prometheus metrics
 * (docs/operations.md, "Monitoring"). An observation is a bucket search
 * over a dozen integers and three increments: cheap enough for every
 * request. Not thread-safe: each histogram has one writer (the loop
 * thread, or the store's worker under the store's lock), and readers take
 * the same care.
 */
#ifndef RL_COMMON_HISTOGRAM_H
#define RL_COMMON_HISTOGRAM_H

#include <stdint.h>
#include <stdio.h>

/* Upper bounds in microseconds: 100 us to 10 s, roughly 1-2.5-5 per decade. */
#define RL_HISTOGRAM_BUCKETS 15
extern const uint64_t rl_histogram_bounds_us[RL_HISTOGRAM_BUCKETS];

typedef struct rl_histogram {
    uint64_t buckets[RL_HISTOGRAM_BUCKETS + 1]; /* per bucket, not cumulative; the last is +Inf */
    uint64_t count;
    uint64_t sum_us;
} rl_histogram_t;

void rl_histogram_observe_us(rl_histogram_t *histogram, uint64_t us);
/*
 * Writes the histogram in the Prometheus text format: NAME_bucket{LABELS,le="..."}
 * (cumulative, in seconds), NAME_sum and NAME_count. labels is "" or
 * 'key="value",...' without braces.
 */
void rl_histogram_write(FILE *out, const char *name, const char *labels, const rl_histogram_t *histogram);

#endif
