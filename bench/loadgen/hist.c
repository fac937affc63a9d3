#include "hist.h"

#include <string.h>

void hist_init(hist_t *h)
{
    memset(h, 0, sizeof(*h));
    h->min = UINT64_MAX;
}

static size_t bucket_of(uint64_t v)
{
    int msb, shift;
    size_t idx;

    if (v < HIST_LINEAR)
        return (size_t)v;
    msb = 63 - __builtin_clzll(v);
    shift = msb - HIST_SUB_BITS + 1;
    idx = HIST_LINEAR + (size_t)(msb - HIST_SUB_BITS) * HIST_HALF + (size_t)((v >> shift) - HIST_HALF);
    return idx < HIST_BUCKETS ? idx : HIST_BUCKETS - 1;
}

/* The largest value that falls in bucket idx. */
static uint64_t bucket_top(size_t idx)
{
    size_t octave, sub;
    int shift;

    if (idx < HIST_LINEAR)
        return idx;
    octave = (idx - HIST_LINEAR) / HIST_HALF;
    sub = (idx - HIST_LINEAR) % HIST_HALF + HIST_HALF;
    shift = (int)octave + 1;
    return (((uint64_t)sub + 1) << shift) - 1;
}

void hist_record(hist_t *h, uint64_t v)
{
    h->counts[bucket_of(v)]++;
    h->total++;
    h->sum += (double)v;
    if (v < h->min)
        h->min = v;
    if (v > h->max)
        h->max = v;
}

uint64_t hist_percentile(const hist_t *h, double percent)
{
    uint64_t want, seen = 0;
    size_t i;

    if (h->total == 0)
        return 0;
    want = (uint64_t)((percent / 100.0) * (double)h->total + 0.999999);
    if (want < 1)
        want = 1;
    for (i = 0; i < HIST_BUCKETS; ++i) {
        seen += h->counts[i];
        if (seen >= want) {
            uint64_t top = bucket_top(i);
            return top < h->max ? top : h->max;
        }
    }
    return h->max;
}

void hist_json(const hist_t *h, const char *prefix, FILE *out)
{
    static const struct {
        const char *name;
        double p;
    } points[] = {{"p50", 50}, {"p90", 90}, {"p99", 99}, {"p999", 99.9}};
    size_t i;

    for (i = 0; i < sizeof(points) / sizeof(points[0]); ++i)
        fprintf(out, "\"%s%s_us\":%.1f,", prefix, points[i].name, hist_percentile(h, points[i].p) / 1000.0);
    fprintf(out, "\"%smax_us\":%.1f,\"%smean_us\":%.1f,\"%scount\":%llu", prefix, h->total ? h->max / 1000.0 : 0.0,
            prefix, h->total ? h->sum / (double)h->total / 1000.0 : 0.0, prefix, (unsigned long long)h->total);
}
