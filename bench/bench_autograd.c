/*
 * bench_autograd.c - autograd overhead per op on 1-element tensors:
 *   forward recording = time of an op with requires_grad minus without;
 *   backward per node = time of musa_backward over a chain / its length.
 * Targets: under 300 ns each. Run: ./build/bench_autograd
 */
#include <musa.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_util.h"

typedef musa_tensor *(*binop)(musa_tensor *, musa_tensor *);

/* median ns per op of `iters` calls of f(a, b) */
static double per_op(binop f, musa_tensor *a, musa_tensor *b, int iters) {
    double t[9];
    for (int r = 0; r < 9; r++) {
        double t0 = now();
        for (int i = 0; i < iters; i++) musa_tensor_release(f(a, b));
        t[r] = (now() - t0) / iters * 1e9;
    }
    qsort(t, 9, sizeof t[0], cmp_double);
    return t[4];
}

/* a chain y = f(y, c) of n nodes: ns per node for forward and backward */
static void chain(binop f, int n, double *fwd, double *bwd) {
    int64_t one = 1;
    double tf[5], tb[5];
    for (int r = 0; r < 5; r++) {
        musa_tensor *x = musa_ones(1, &one, MUSA_DTYPE_FLOAT32),
                    *c = musa_full(1, &one, 1.0001, MUSA_DTYPE_FLOAT32);
        musa_tensor_set_requires_grad(x, true);
        musa_tensor *y = musa_tensor_retain(x);
        double t0 = now();
        for (int i = 0; i < n; i++) {
            musa_tensor *next = f(y, c);
            musa_tensor_release(y);
            y = next;
        }
        double t1 = now();
        musa_backward(1, &y, NULL, false, false);
        double t2 = now();
        tf[r] = (t1 - t0) / n * 1e9;
        tb[r] = (t2 - t1) / n * 1e9;
        musa_tensor_release(y), musa_tensor_release(x), musa_tensor_release(c);
    }
    qsort(tf, 5, sizeof tf[0], cmp_double);
    qsort(tb, 5, sizeof tb[0], cmp_double);
    *fwd = tf[2], *bwd = tb[2];
}

int main(void) {
    int64_t one = 1;
    musa_tensor *a = musa_ones(1, &one, MUSA_DTYPE_FLOAT32),
                *b = musa_ones(1, &one, MUSA_DTYPE_FLOAT32);
    musa_tensor *ga = musa_ones(1, &one, MUSA_DTYPE_FLOAT32),
                *gb = musa_ones(1, &one, MUSA_DTYPE_FLOAT32);
    musa_tensor_set_requires_grad(ga, true);
    musa_tensor_set_requires_grad(gb, true);
    printf("autograd overhead on 1-element float32 tensors (median of runs)\n");
    const char *names[2] = {"add", "mul"};
    binop fs[2] = {musa_add, musa_mul};
    for (int k = 0; k < 2; k++) {
        per_op(fs[k], a, b, 20000); /* warm up */
        double plain = per_op(fs[k], a, b, 200000), rec = per_op(fs[k], ga, gb, 200000);
        double cf, cb;
        chain(fs[k], 100000, &cf, &cb);
        printf("  %s: op %.0f ns, op recording a node %.0f ns -> recording overhead %.0f ns/node "
               "(< 300 "
               "wanted)\n",
               names[k], plain, rec, rec - plain);
        printf("  %s: chain of 100000: forward %.0f ns/op, backward %.0f ns/node (< 300 wanted)\n",
               names[k], cf, cb);
    }
    musa_tensor_release(a), musa_tensor_release(b), musa_tensor_release(ga),
        musa_tensor_release(gb);
    return 0;
}
