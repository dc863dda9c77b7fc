/*
 * bench_util.h - the timing helpers the C benchmarks share: a monotonic
 * clock in seconds and the median of a sample (which it sorts).
 */
#ifndef MUSA_BENCH_UTIL_H
#define MUSA_BENCH_UTIL_H

#include <stdlib.h>
#include <time.h>

static inline double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static inline double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

#endif
