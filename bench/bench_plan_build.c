/*
 * bench_plan_build.c - how musa_plan_build (lowering: grouping, schedule,
 * liveness, memory plan, kernel calls) scales with the size of the graph.
 *
 * Two synthetic graphs, captured symbolically through the public API and
 * optimised before timing (only musa_plan_build is timed):
 * - chain: elementwise ops on a float32[256] value, one after the other,
 *   without fusion (one kernel instruction per node, reused in place);
 * - mix: blocks of two independent 64x64 matmuls (paired into parallel
 *   steps), their activations and sum, a transposed view, a row reduction
 *   added back and a residual from four blocks back, with fusion on
 *   (headed, elementwise and reduction groups).
 * For each size it prints the live nodes, the median build time over a few
 * runs, the time per node, and the time per node relative to the smallest
 * size: a flat ratio means linear growth (at 100k nodes the builder's
 * tables outgrow the caches, which costs every phase alike: figures in
 * docs/benchmarks.md).
 * Run: ./build/bench_plan_build
 */
#include <musa.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"

#define MAX_RUNS 5
#define BUDGET_S 20.0 /* stop repeating a size once its runs took this long */

typedef musa_graph *(*make_fn)(int nodes, musa_tensor **keep, int n_keep);

static bool check(const void *p) {
    if (!p) fprintf(stderr, "bench_plan_build: %s\n", musa_last_error());
    return p != NULL;
}

/* Replace *y by r (a new reference) and release the old one. */
static musa_tensor *step(musa_tensor **y, musa_tensor *r) {
    musa_tensor_release(*y);
    *y = r;
    return r;
}

static musa_graph *finish(musa_graph *g, int n_out, musa_tensor **outs, int fusion_level) {
    musa_graph_set_outputs(g, n_out, outs);
    for (int i = 0; i < n_out; i++) musa_tensor_release(outs[i]);
    musa_pass_ctx ctx = {.fusion_level = fusion_level};
    if (musa_graph_capture_end(g) || musa_graph_optimize(g, &ctx)) {
        fprintf(stderr, "bench_plan_build: %s\n", musa_last_error());
        musa_graph_free(g);
        return NULL;
    }
    return g;
}

/* x -> add c -> tanh -> mul c -> relu -> ..., `nodes` ops in all. */
static musa_graph *make_chain(int nodes, musa_tensor **keep, int n_keep) {
    (void)n_keep;
    int64_t n = 256;
    musa_graph *g = musa_graph_new();
    musa_tensor *x = musa_empty_meta(MUSA_DTYPE_FLOAT32, 1, &n);
    if (!check(g) || !check(x) || musa_graph_capture_begin(g, MUSA_CAPTURE_SYMBOLIC) ||
        musa_graph_add_input(g, x, "x"))
        return NULL;
    musa_tensor *c = keep[0], *y = x;
    for (int i = 0; i < nodes; i++) {
        switch (i % 4) {
        case 0:
            step(&y, musa_add(y, c));
            break;
        case 1:
            step(&y, musa_tanh(y));
            break;
        case 2:
            step(&y, musa_mul(y, c));
            break;
        default:
            step(&y, musa_relu(y));
            break;
        }
        if (!check(y)) return NULL;
    }
    return finish(g, 1, &y, 0);
}

/* Blocks of 10 ops: h1 = x@W1, h2 = x@W2, c = relu(h1) + sigmoid(h2),
 * d = c + c^T, r = sum(d, 1), x = (d + r) + x from four blocks back. Every
 * value dies within a few blocks, as activations of inference do. */
static musa_graph *make_mix(int nodes, musa_tensor **keep, int n_keep) {
    (void)n_keep;
    int64_t sh[2] = {64, 64}, one = 1;
    musa_graph *g = musa_graph_new();
    musa_tensor *x = musa_empty_meta(MUSA_DTYPE_FLOAT32, 2, sh);
    if (!check(g) || !check(x) || musa_graph_capture_begin(g, MUSA_CAPTURE_SYMBOLIC) ||
        musa_graph_add_input(g, x, "x"))
        return NULL;
    musa_tensor *w1 = keep[0], *w2 = keep[1], *back[4];
    for (int k = 0; k < 4; k++) back[k] = musa_tensor_retain(x);
    for (int b = 0; b < nodes / 10; b++) {
        musa_tensor *h1 = musa_matmul(x, w1), *h2 = musa_matmul(x, w2);
        musa_tensor *a = musa_relu(h1), *s = musa_sigmoid(h2);
        musa_tensor *c = musa_add(a, s);
        musa_tensor *t = musa_transpose(c, 0, 1);
        musa_tensor *d = musa_add(c, t);
        musa_tensor *r = musa_sum(d, 1, &one, false);
        musa_tensor *e = musa_add(d, r);
        musa_tensor *nx = musa_add(e, back[b % 4]);
        if (!check(nx)) return NULL;
        musa_tensor *drop[] = {h1, h2, a, s, c, t, d, r, e, back[b % 4], x};
        for (size_t k = 0; k < sizeof drop / sizeof drop[0]; k++) musa_tensor_release(drop[k]);
        back[b % 4] = musa_tensor_retain(nx);
        x = nx;
    }
    for (int k = 0; k < 4; k++) musa_tensor_release(back[k]);
    return finish(g, 1, &x, 1);
}

/* Median build time of g in seconds (runs: how many were timed). */
static double time_build(const musa_graph *g, int *runs) {
    musa_plan_options opt = {.num_threads = 2, .memory_arena = true};
    double t[MAX_RUNS], spent = 0;
    int n = 0;
    while (n < MAX_RUNS && (n < 1 || spent < BUDGET_S)) {
        double t0 = now();
        musa_plan *p = musa_plan_build(g, &opt);
        t[n] = now() - t0;
        if (!check(p)) return -1;
        musa_plan_free(p);
        spent += t[n++];
    }
    *runs = n;
    return median(t, n);
}

static int bench(const char *name, make_fn make, musa_tensor **keep, int n_keep) {
    static const int sizes[] = {1000, 10000, 100000};
    double base = 0;
    printf("%-6s %8s %10s %10s %8s %5s\n", name, "nodes", "build ms", "ns/node", "vs 1k", "runs");
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        musa_graph *g = make(sizes[i], keep, n_keep);
        if (!g) return 1;
        int nodes = musa_graph_node_count(g), runs = 0;
        double t = time_build(g, &runs);
        musa_graph_free(g);
        if (t < 0) return 1;
        double per = t * 1e9 / nodes;
        if (i == 0) base = per;
        printf("%-6s %8d %10.2f %10.1f %8.2f %5d\n", "", nodes, t * 1e3, per, per / base, runs);
        fflush(stdout);
    }
    return 0;
}

int main(void) {
    int64_t n = 256, sh[2] = {64, 64};
    musa_tensor *c = musa_full(1, &n, 0.5, MUSA_DTYPE_FLOAT32);
    musa_tensor *w[2] = {musa_full(2, sh, 0.01, MUSA_DTYPE_FLOAT32),
                         musa_full(2, sh, 0.02, MUSA_DTYPE_FLOAT32)};
    if (!check(c) || !check(w[0]) || !check(w[1])) return 1;
    printf("musa_plan_build: median of up to %d builds (2 threads, memory arena)\n", MAX_RUNS);
    int rc = bench("chain", make_chain, &c, 1) || bench("mix", make_mix, w, 2);
    musa_tensor_release(c), musa_tensor_release(w[0]), musa_tensor_release(w[1]);
    return rc;
}
