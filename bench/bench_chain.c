/*
 * bench_chain.c - the ceiling for issue 13's gelu-chain target: how close to
 * memcpy bandwidth the gelu-tanh chain x * 0.5 * (1 + tanh(0.79788456 *
 * (x + 0.044715 * x^3))) can get on this machine, whatever runs it.
 *
 * Over 32M float32 elements (128 MiB in, 128 MiB out: DRAM, not cache), on
 * every OpenMP thread, each loop a parallel pass in blocks of 1024:
 *   copy       the block copied (memcpy): the bandwidth the target is a fraction of;
 *   fused      the whole chain in registers, one pass, 16 lanes at a time,
 *              tanh from libmvec's AVX-512 function (what the kernels call):
 *              what a compiler generating one loop for the chain would run;
 *   fused-neg  the same with neg for tanh: the memory traffic and arithmetic
 *              without the transcendental function;
 *   tanh       tanh alone, one pass (the kernel musa.tanh runs).
 * Each figure is the best of 7 runs (wall time); "fraction" is copy time over
 * the loop's time, the measure of bench/bench_jit.py. A plan runs the chain
 * as 8 lean members over L1 tiles (docs/jit.md), which costs more than
 * `fused`; this program says what no executor of the chain can beat with
 * libmvec's tanh. It prints figures; it never fails.
 *
 *     ./build/bench_chain
 */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

#pragma omp declare simd notinbranch simdlen(16)
extern float tanhf(float);

#define N     ((int64_t)32 << 20)
#define BLOCK 1024
#define RUNS  7

typedef void (*block_fn)(float *restrict o, const float *restrict x);

static void copy_block(float *restrict o, const float *restrict x) {
    memcpy(o, x, BLOCK * sizeof(float));
}

static void fused_block(float *restrict o, const float *restrict x) {
#pragma omp simd simdlen(16)
    for (int k = 0; k < BLOCK; k++) {
        float v = x[k], u = 0.79788456f * (v + 0.044715f * (v * v * v));
        o[k] = v * 0.5f * (1.0f + tanhf(u));
    }
}

static void fused_neg_block(float *restrict o, const float *restrict x) {
#pragma omp simd simdlen(16)
    for (int k = 0; k < BLOCK; k++) {
        float v = x[k], u = 0.79788456f * (v + 0.044715f * (v * v * v));
        o[k] = v * 0.5f * (1.0f - u);
    }
}

static void tanh_block(float *restrict o, const float *restrict x) {
#pragma omp simd simdlen(16)
    for (int k = 0; k < BLOCK; k++) o[k] = tanhf(x[k]);
}

static double best(block_fn f, float *o, const float *x) {
    double b = 1e30;
    for (int r = 0; r < RUNS; r++) {
        double t0 = now();
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < N; i += BLOCK) f(o + i, x + i);
        double t = now() - t0;
        if (t < b) b = t;
    }
    return b;
}

int main(void) {
    float *x = aligned_alloc(64, (size_t)N * sizeof(float));
    float *o = aligned_alloc(64, (size_t)N * sizeof(float));
    if (!x || !o) {
        fprintf(stderr, "bench_chain: out of memory\n");
        return 0;
    }
    /* roughly normal inputs, as bench_jit.py's randn: the sum of 4 uniforms */
    uint64_t s = 88172645463325252u;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < N; i++) o[i] = 0.0f; /* both buffers touched before timing */
    for (int64_t i = 0; i < N; i++) {
        float v = 0;
        for (int k = 0; k < 4; k++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            v += (float)(s >> 40) / (float)(1u << 24) - 0.5f;
        }
        x[i] = v * 1.7320508f;
    }
    static const struct {
        const char *name;
        block_fn f;
    } loops[] = {{"copy", copy_block},
                 {"fused", fused_block},
                 {"fused-neg", fused_neg_block},
                 {"tanh", tanh_block}};
    printf("gelu-tanh chain over %lld float32 elements, %d threads, best of %d (wall)\n",
           (long long)N, omp_get_max_threads(), RUNS);
    double copy = 0;
    for (size_t i = 0; i < sizeof loops / sizeof loops[0]; i++) {
        double t = best(loops[i].f, o, x);
        if (i == 0) copy = t;
        printf("  %-10s %7.2f ms  %6.1f GB/s moved  fraction of copy %.2f\n", loops[i].name,
               t * 1e3, 2.0 * (double)N * sizeof(float) / t / 1e9, copy / t);
    }
    free(x);
    free(o);
    return 0;
}
