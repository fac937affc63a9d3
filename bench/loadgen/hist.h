/*
 * A log-linear latency histogram in the manner of HdrHistogram: values below
 * 256 ns are exact, above that each power of two is split into 128 buckets,
 * so any recorded value is known to within 0.8 %. Values are nanoseconds;
 * reports are in microseconds. One histogram is about 36 KiB.
 */
#ifndef BENCH_HIST_H
#define BENCH_HIST_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define HIST_SUB_BITS 8
#define HIST_LINEAR (1u << HIST_SUB_BITS)
#define HIST_HALF (HIST_LINEAR / 2)
#define HIST_OCTAVES 34 /* up to 2^42 ns, about 73 minutes */
#define HIST_BUCKETS (HIST_LINEAR + HIST_OCTAVES * HIST_HALF)

typedef struct {
    uint64_t counts[HIST_BUCKETS];
    uint64_t total;
    uint64_t min, max;
    double sum;
} hist_t;

void hist_init(hist_t *h);
void hist_record(hist_t *h, uint64_t value_ns);
/* The smallest bucket upper bound under which at least `percent` of the values lie (ns). */
uint64_t hist_percentile(const hist_t *h, double percent);
/* Writes "p50_us":…, "p90_us":…, "p99_us":…, "p999_us":…, "max_us":…, "mean_us":… (no braces). */
void hist_json(const hist_t *h, const char *prefix, FILE *out);

#endif
