/*
 * bench_jit.c - per-op overhead of the plan executor.
 *
 * A chain of N adds on 1-element float32 tensors is captured symbolically
 * and lowered without fusion (N kernel instructions). The executor's cost
 * per instruction is the plan's time per instruction minus the time of the
 * same kernel called directly on the same views; eager musa_add on the same
 * tensors is printed beside it. Target: overhead under 50 ns per op.
 * Run: ./build/bench_jit
 */
#include <musa.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_util.h"

#include "backend/cpu/kernels.h"

#define N 1000

int main(void) {
    int64_t one = 1;
    musa_tensor *x = musa_full(1, &one, 1.0, MUSA_DTYPE_FLOAT32);
    musa_tensor *c = musa_full(1, &one, 1e-3, MUSA_DTYPE_FLOAT32);
    musa_graph *g = musa_graph_new();
    musa_tensor *m = musa_empty_meta(MUSA_DTYPE_FLOAT32, 1, &one);
    if (!g || !m || musa_graph_capture_begin(g, MUSA_CAPTURE_SYMBOLIC) ||
        musa_graph_add_input(g, m, "x")) {
        fprintf(stderr, "capture failed: %s\n", musa_last_error());
        return 1;
    }
    musa_tensor *y = musa_tensor_retain(m);
    for (int i = 0; i < N; i++) {
        musa_tensor *n = musa_add(y, c);
        musa_tensor_release(y);
        y = n;
    }
    musa_graph_set_outputs(g, 1, &y);
    musa_tensor_release(y);
    musa_pass_ctx ctx = {.fusion_level = 0};
    musa_plan_options opt = {.num_threads = 1, .memory_arena = true};
    musa_plan *p = NULL;
    if (musa_graph_capture_end(g) || musa_graph_optimize(g, &ctx) ||
        !(p = musa_plan_build(g, &opt))) {
        fprintf(stderr, "compile failed: %s\n", musa_last_error());
        return 1;
    }
    const musa_plan_stats *st = musa_plan_get_stats(p);
    double tp[15], tk[15], te[15];
    musa_kview kv[3];
    musa_tensor *out = musa_empty(1, &one, MUSA_DTYPE_FLOAT32);
    for (int k = 0; k < 3; k++) {
        kv[k] = (musa_kview){.data = musa_tensor_data(k == 0   ? out
                                                      : k == 1 ? x
                                                               : c),
                             .dtype = MUSA_DTYPE_FLOAT32,
                             .ndim = 1,
                             .shape = {1},
                             .strides = {1}};
    }
    musa_kctx kc = {.op_name = "add"};
    for (int r = 0; r < 15; r++) {
        double t0 = now();
        for (int it = 0; it < 20; it++) {
            musa_tensor *o = NULL;
            if (musa_plan_run(p, 1, &x, 1, &o)) {
                fprintf(stderr, "run failed: %s\n", musa_last_error());
                return 1;
            }
            musa_tensor_release(o);
        }
        tp[r] = (now() - t0) / (20.0 * st->kernels) * 1e9;
        t0 = now();
        for (int it = 0; it < 20 * N; it++) cpu_add(&kc, kv, kv + 1, 2, NULL);
        tk[r] = (now() - t0) / (20.0 * N) * 1e9;
        t0 = now();
        for (int it = 0; it < 20 * N; it++) musa_tensor_release(musa_add(x, c));
        te[r] = (now() - t0) / (20.0 * N) * 1e9;
    }
    double mp = median(tp, 15), mk = median(tk, 15), me = median(te, 15);
    printf("plan executor, a chain of %d adds on 1-element float32 tensors (%d instructions)\n", N,
           st->kernels);
    printf("  plan: %.1f ns per instruction; the kernel called directly: %.1f ns\n", mp, mk);
    printf("  executor overhead: %.1f ns per op (< 50 wanted); eager musa_add: %.1f ns per op "
           "(%.1fx the plan)\n",
           mp - mk, me, me / mp);
    musa_plan_free(p);
    musa_graph_free(g);
    musa_tensor_release(out), musa_tensor_release(m), musa_tensor_release(x),
        musa_tensor_release(c);
    return 0;
}
