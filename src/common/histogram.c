#include "common/histogram.h"

const uint64_t rl_histogram_bounds_us[RL_HISTOGRAM_BUCKETS] = {
    100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000, 10000000,
};

void rl_histogram_observe_us(rl_histogram_t *histogram, uint64_t us)
{
    size_t i = 0;

    while (i < RL_HISTOGRAM_BUCKETS && us > rl_histogram_bounds_us[i])
        ++i;
    ++histogram->buckets[i];
    ++histogram->count;
    histogram->sum_us += us;
}

void rl_histogram_write(FILE *out, const char *name, const char *labels, const rl_histogram_t *histogram)
{
    const char *comma = labels[0] != '\0' ? "," : "";
    uint64_t cumulative = 0;
    size_t i;

    for (i = 0; i < RL_HISTOGRAM_BUCKETS; ++i) {
        cumulative += histogram->buckets[i];
        fprintf(out, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, comma, (double)rl_histogram_bounds_us[i] / 1e6,
                (unsigned long long)cumulative);
    }
    cumulative += histogram->buckets[RL_HISTOGRAM_BUCKETS];
    fprintf(out, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, comma, (unsigned long long)cumulative);
    /* Prometheus reads NAME{} too, but some tools do not: no braces without labels. */
    fprintf(out, "%s_sum%s%s%s %.6f\n", name, comma[0] ? "{" : "", labels, comma[0] ? "}" : "",
            (double)histogram->sum_us / 1e6);
    fprintf(out, "%s_count%s%s%s %llu\n", name, comma[0] ? "{" : "", labels, comma[0] ? "}" : "",
            (unsigned long long)histogram->count);
}
