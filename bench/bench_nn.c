/*
 * bench_nn.c - neural network ops against PyTorch, in one run.
 *
 * Cases: the 3x3 convolutions of a CIFAR-style ResNet-18 (batch 32, 32x32
 * input, widths 64/128/256/512), matmul-bound linear layers, softmax,
 * layer_norm, batch_norm and cross_entropy. Each case is timed twice:
 *   fwd  the forward op alone, grad mode off;
 *   bwd  the backward pass alone (the graph of one forward, kept with
 *        retain_graph; every input gets its gradient).
 * Figures are the best of several reps after warm-up, over two rounds
 * (musa, PyTorch, musa, PyTorch: a noisy moment hits both). When /usr/bin/python3
 * can import torch, bench_nn_torch.py times the same cases (the list is
 * handed to it from here, so both sides run the same shapes) with the same
 * thread count, and the table shows musa / PyTorch ratios (below 1: musa
 * is faster). Targets: conv forward <= 1.0, conv backward <= 1.2, softmax,
 * layer_norm and cross_entropy <= 1.0.
 *
 * Run: ./build/bench_nn [path/to/bench_nn_torch.py [only]]  (run.sh bench does
 * this); `only` keeps the cases whose name contains it.
 */
#include <musa.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include <unistd.h>

enum { CONV, LINEAR, SOFTMAX, LAYER_NORM, BATCH_NORM, CROSS_ENTROPY };
static const char *kind_names[] = {"conv",       "linear",     "softmax",
                                   "layer_norm", "batch_norm", "cross_entropy"};

typedef struct {
    int kind;
    int64_t a[5];          /* conv: N Cin Cout HW stride | linear: N in out | others: N C [HW] */
    double fwd_ms, bwd_ms; /* musa */
    double t_fwd_ms, t_bwd_ms; /* PyTorch, 0 when not measured */
    bool skip;
} bcase;

static bcase cases[] = {
    {CONV, {32, 3, 64, 32, 1}},    {CONV, {32, 64, 64, 32, 1}},   {CONV, {32, 64, 128, 32, 2}},
    {CONV, {32, 128, 128, 16, 1}}, {CONV, {32, 128, 256, 16, 2}}, {CONV, {32, 256, 256, 8, 1}},
    {CONV, {32, 256, 512, 8, 2}},  {CONV, {32, 512, 512, 4, 1}},  {LINEAR, {256, 1024, 1024}},
    {LINEAR, {512, 4096, 1024}},   {LINEAR, {32, 512, 10}},       {SOFTMAX, {64, 1000}},
    {SOFTMAX, {256, 32000}},       {LAYER_NORM, {64, 1024}},      {LAYER_NORM, {4096, 768}},
    {BATCH_NORM, {32, 64, 32}},    {CROSS_ENTROPY, {256, 1000}},  {CROSS_ENTROPY, {64, 32000}},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static void describe(const bcase *c, char *buf, size_t n) {
    const int64_t *a = c->a;
    switch (c->kind) {
    case CONV:
        snprintf(buf, n, "conv %ld->%ld %ldx%ld s%ld", (long)a[1], (long)a[2], (long)a[3],
                 (long)a[3], (long)a[4]);
        break;
    case LINEAR:
        snprintf(buf, n, "linear %ldx%ld->%ld", (long)a[0], (long)a[1], (long)a[2]);
        break;
    case BATCH_NORM:
        snprintf(buf, n, "batch_norm %ldx%ldx%ldx%ld", (long)a[0], (long)a[1], (long)a[2],
                 (long)a[2]);
        break;
    default:
        snprintf(buf, n, "%s %ldx%ld", kind_names[c->kind], (long)a[0], (long)a[1]);
        break;
    }
}

/* The inputs of a case; in[0..n_grad) get gradients in the backward figure. */
typedef struct {
    musa_tensor *in[4];
    int n_in, n_grad;
} inputs;

static musa_tensor *randn(int nd, const int64_t *s) {
    return musa_randn(nd, s, MUSA_DTYPE_FLOAT32);
}

static inputs make_inputs(const bcase *c) {
    const int64_t *a = c->a;
    inputs r = {0};
    switch (c->kind) {
    case CONV:
        r.in[0] = randn(4, (int64_t[]){a[0], a[1], a[3], a[3]});
        r.in[1] = randn(4, (int64_t[]){a[2], a[1], 3, 3});
        r.n_in = r.n_grad = 2;
        break;
    case LINEAR:
        r.in[0] = randn(2, (int64_t[]){a[0], a[1]});
        r.in[1] = randn(2, (int64_t[]){a[2], a[1]});
        r.in[2] = randn(1, (int64_t[]){a[2]});
        r.n_in = r.n_grad = 3;
        break;
    case SOFTMAX:
        r.in[0] = randn(2, a), r.n_in = r.n_grad = 1;
        break;
    case LAYER_NORM:
        r.in[0] = randn(2, a);
        r.in[1] = randn(1, &a[1]);
        r.in[2] = randn(1, &a[1]);
        r.n_in = r.n_grad = 3;
        break;
    case BATCH_NORM:
        r.in[0] = randn(4, (int64_t[]){a[0], a[1], a[2], a[2]});
        r.in[1] = randn(1, &a[1]);
        r.in[2] = randn(1, &a[1]);
        r.n_in = r.n_grad = 3;
        break;
    case CROSS_ENTROPY:
        r.in[0] = randn(2, a);
        r.in[1] = musa_randint(0, a[1], 1, a, MUSA_DTYPE_INT64);
        r.n_in = 2, r.n_grad = 1;
        break;
    }
    return r;
}

static musa_tensor *forward(const bcase *c, musa_tensor *const *in) {
    static const int64_t one[2] = {1, 1};
    switch (c->kind) {
    case CONV:
        return musa_conv2d(in[0], in[1], NULL, (int64_t[]){c->a[4], c->a[4]}, one, NULL, 1);
    case LINEAR:
        return musa_linear(in[0], in[1], in[2]);
    case SOFTMAX:
        return musa_softmax(in[0], 1);
    case LAYER_NORM:
        return musa_layer_norm(in[0], 1, in[1], in[2], 1e-5);
    case BATCH_NORM:
        return musa_batch_norm(in[0], NULL, NULL, in[1], in[2], true, 0.1, 1e-5);
    default:
        return musa_cross_entropy(in[0], in[1], -100, 0.0, MUSA_REDUCTION_MEAN);
    }
}

/* Reps so that a case takes about a quarter second, within [5, 200]. */
static int reps_for(double once) {
    int r = once > 0 ? (int)(0.25 / once) : 200;
    return r < 5 ? 5 : r > 200 ? 200 : r;
}

static int measure(bcase *c) {
    inputs in = make_inputs(c);
    for (int i = 0; i < in.n_in; i++)
        if (!in.in[i]) return -1;
    /* forward, grad mode off */
    bool prev = musa_set_grad_enabled(false);
    double t0 = now();
    musa_tensor_release(forward(c, in.in));
    int reps = reps_for(now() - t0);
    double best = 1e30;
    for (int r = 0; r < reps + 2; r++) {
        double t = now();
        musa_tensor *y = forward(c, in.in);
        t = now() - t;
        if (!y) return -1;
        musa_tensor_release(y);
        if (r >= 2 && t < best) best = t;
    }
    if (!c->fwd_ms || best * 1e3 < c->fwd_ms) c->fwd_ms = best * 1e3;
    musa_set_grad_enabled(true);
    /* backward of one recorded forward, graph retained */
    for (int i = 0; i < in.n_grad; i++) musa_tensor_set_requires_grad(in.in[i], true);
    musa_tensor *y = forward(c, in.in);
    if (!y) return -1;
    musa_tensor *g = musa_tensor_ndim(y) ? musa_ones_like(y) : NULL;
    best = 1e30;
    for (int r = 0; r < reps + 2; r++) {
        double t = now();
        int rc = musa_backward(1, &y, &g, true, false);
        t = now() - t;
        if (rc) return -1;
        for (int i = 0; i < in.n_grad; i++) musa_tensor_set_grad(in.in[i], NULL);
        if (r >= 2 && t < best) best = t;
    }
    if (!c->bwd_ms || best * 1e3 < c->bwd_ms) c->bwd_ms = best * 1e3;
    musa_set_grad_enabled(prev);
    musa_tensor_release(y);
    musa_tensor_release(g);
    for (int i = 0; i < in.n_in; i++) musa_tensor_release(in.in[i]);
    return 0;
}

/* Run the PyTorch side: write the case list, read "index fwd_ms bwd_ms". */
static void measure_torch(const char *script, bool quiet) {
    if (access(script, R_OK) != 0 || access("/usr/bin/python3", X_OK) != 0) {
        if (!quiet) printf("(PyTorch side skipped: %s or /usr/bin/python3 not found)\n", script);
        return;
    }
    char path[] = "/tmp/musa_bench_nn_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return;
    FILE *f = fdopen(fd, "w");
    for (int i = 0; i < N_CASES; i++)
        if (!cases[i].skip)
            fprintf(f, "%d %s %ld %ld %ld %ld %ld\n", i, kind_names[cases[i].kind],
                    (long)cases[i].a[0], (long)cases[i].a[1], (long)cases[i].a[2],
                    (long)cases[i].a[3], (long)cases[i].a[4]);
    fclose(f);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s %s %d 2>&1", script, path,
             musa_get_num_threads());
    FILE *p = popen(cmd, "r");
    char line[512];
    while (p && fgets(line, sizeof line, p)) {
        int i;
        double fw, bw;
        if (sscanf(line, "%d %lf %lf", &i, &fw, &bw) == 3 && i >= 0 && i < N_CASES) {
            bcase *c = &cases[i];
            if (!c->t_fwd_ms || fw < c->t_fwd_ms) c->t_fwd_ms = fw;
            if (!c->t_bwd_ms || bw < c->t_bwd_ms) c->t_bwd_ms = bw;
        } else if (!quiet) {
            printf("  torch: %s", line); /* version line, or why it could not run */
        }
    }
    if (p) pclose(p);
    unlink(path);
}

int main(int argc, char **argv) {
    const char *script = argc > 1 ? argv[1] : "bench/bench_nn_torch.py";
    printf("neural network ops, float32, %d threads; times in ms (best of reps)\n",
           musa_get_num_threads());
    for (int i = 0; i < N_CASES; i++) {
        char name[64];
        describe(&cases[i], name, sizeof name);
        cases[i].skip = argc > 2 && !strstr(name, argv[2]);
    }
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N_CASES; i++)
            if (!cases[i].skip && measure(&cases[i])) {
                printf("case %d failed: %s\n", i, musa_last_error());
                return 1;
            }
        measure_torch(script, round > 0);
    }
    printf("%-28s %9s %9s %7s | %9s %9s %7s\n", "case", "fwd musa", "torch", "ratio", "bwd musa",
           "torch", "ratio");
    for (int i = 0; i < N_CASES; i++) {
        bcase *c = &cases[i];
        if (c->skip) continue;
        char name[64], rf[16] = "-", rb[16] = "-";
        describe(c, name, sizeof name);
        if (c->t_fwd_ms > 0) snprintf(rf, sizeof rf, "%.2f", c->fwd_ms / c->t_fwd_ms);
        if (c->t_bwd_ms > 0) snprintf(rb, sizeof rb, "%.2f", c->bwd_ms / c->t_bwd_ms);
        printf("%-28s %9.3f %9.3f %7s | %9.3f %9.3f %7s\n", name, c->fwd_ms, c->t_fwd_ms, rf,
               c->bwd_ms, c->t_bwd_ms, rb);
    }
    return 0;
}
