/*
 * bench_optim.c - an optimizer step's updates, row by row against the
 * multi-tensor form, on the parameters of two models:
 * - ResNet-18 (CIFAR): 62 parameters, 11,173,962 elements;
 * - the MLP 64-128-128-10: 6 parameters, 26,122 elements.
 * For SGD with momentum 0.9 (the training table's optimizer) and Adam, on 1
 * and 2 threads: one step as one musa_op_call per parameter (what
 * musa.optim did before), and as one musa_update_multi call. The two are
 * timed alternately in one run, so both see the same load; figures are the
 * median time per step. Run: ./build/bench_optim
 */
#include <musa.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"

#define MAX_PARAMS 64
#define MAX_IN     7 /* Adam: param, exp_avg, exp_avg_sq, step, grad, lr */

typedef struct model {
    const char *name;
    int n;                        /* parameters */
    int64_t shape[MAX_PARAMS][4]; /* each parameter's shape, ndim dims */
    int ndim[MAX_PARAMS];
} model;

static void add(model *m, int ndim, int64_t a, int64_t b, int64_t c, int64_t d) {
    int64_t s[4] = {a, b, c, d};
    for (int k = 0; k < 4; k++) m->shape[m->n][k] = s[k];
    m->ndim[m->n++] = ndim;
}

/* conv (bias-free) then BatchNorm weight and bias */
static void conv_bn(model *m, int64_t cout, int64_t cin, int64_t k) {
    add(m, 4, cout, cin, k, k);
    add(m, 1, cout, 0, 0, 0);
    add(m, 1, cout, 0, 0, 0);
}

static model resnet18(void) {
    model m = {.name = "ResNet-18 (CIFAR), 62 params"};
    conv_bn(&m, 64, 3, 3);
    int64_t cin = 64;
    for (int stage = 0; stage < 4; stage++) {
        int64_t cout = 64 << stage;
        for (int block = 0; block < 2; block++) {
            conv_bn(&m, cout, block ? cout : cin, 3);
            conv_bn(&m, cout, cout, 3);
            if (block == 0 && cin != cout) conv_bn(&m, cout, cin, 1);
        }
        cin = cout;
    }
    add(&m, 2, 10, 512, 0, 0);
    add(&m, 1, 10, 0, 0, 0);
    return m;
}

static model mlp(void) {
    model m = {.name = "MLP 64-128-128-10, 6 params"};
    const int64_t w[4] = {64, 128, 128, 10};
    for (int l = 0; l < 3; l++) {
        add(&m, 2, w[l + 1], w[l], 0, 0);
        add(&m, 1, w[l + 1], 0, 0, 0);
    }
    return m;
}

/* One optimizer's rows over a model's parameters: n rows of n_in tensors. */
typedef struct rows {
    int op, n, n_in;
    musa_attrs *attrs;
    musa_tensor *t[MAX_PARAMS * MAX_IN];
    int64_t elems;
} rows;

static musa_tensor *random_like(int ndim, const int64_t *shape, double scale) {
    musa_tensor *r = musa_randn(ndim, shape, MUSA_DTYPE_FLOAT32);
    musa_tensor *s = musa_number(scale), *y = musa_mul(r, s);
    musa_tensor_release(r), musa_tensor_release(s);
    return y;
}

static rows make_rows(const model *m, bool adam, musa_tensor *lr) {
    rows r = {.op = musa_op_lookup(adam ? "adam_update" : "sgd_update"), .n = m->n};
    r.attrs = musa_attrs_new(r.op);
    if (!adam) musa_attrs_set_float(r.attrs, "momentum", 0.9);
    r.n_in = adam ? 6 : 4;
    for (int p = 0; p < m->n; p++) {
        musa_tensor **row = r.t + p * r.n_in;
        int k = 0;
        row[k++] = random_like(m->ndim[p], m->shape[p], 0.1);
        row[k++] = musa_zeros(m->ndim[p], m->shape[p], MUSA_DTYPE_FLOAT32);
        if (adam) {
            row[k++] = musa_zeros(m->ndim[p], m->shape[p], MUSA_DTYPE_FLOAT32);
            row[k++] = musa_zeros(0, NULL, MUSA_DTYPE_FLOAT64);
        }
        row[k++] = random_like(m->ndim[p], m->shape[p], 0.01);
        row[k++] = musa_tensor_retain(lr);
        r.elems += musa_tensor_numel(row[0]);
    }
    return r;
}

static void free_rows(rows *r) {
    for (int k = 0; k < r->n * r->n_in; k++) musa_tensor_release(r->t[k]);
    musa_attrs_free(r->attrs);
}

static int step_row_by_row(rows *r) {
    for (int p = 0; p < r->n; p++) {
        musa_tensor **row = r->t + p * r->n_in, *outs[6] = {NULL};
        for (int j = 0; j < r->n_in - 2; j++) outs[j] = row[j];
        int rc = musa_op_call(r->op, r->n_in, row, r->attrs, outs);
        if (rc) return rc;
    }
    return MUSA_OK;
}

static int step_multi(rows *r) {
    return musa_update_multi(r->op, r->attrs, r->n, r->n_in, r->t);
}

/* Median microseconds per step of each form, timed alternately: samples of
 * `steps` steps each. */
static int time_both(rows *r, int samples, int steps, double *row_us, double *multi_us) {
    double a[64], b[64];
    for (int s = -1; s < samples; s++) { /* s = -1: warm-up */
        double t0 = now();
        for (int i = 0; i < steps; i++)
            if (step_row_by_row(r)) return 1;
        double t1 = now();
        for (int i = 0; i < steps; i++)
            if (step_multi(r)) return 1;
        double t2 = now();
        if (s >= 0) a[s] = (t1 - t0) / steps * 1e6, b[s] = (t2 - t1) / steps * 1e6;
    }
    *row_us = median(a, samples);
    *multi_us = median(b, samples);
    return 0;
}

int main(void) {
    musa_manual_seed(0);
    model models[2] = {resnet18(), mlp()};
    musa_tensor *lr = musa_full(0, NULL, 1e-4, MUSA_DTYPE_FLOAT64);
    int threads0 = musa_get_num_threads();
    printf("bench_optim: one optimizer step's updates, median per step\n");
    printf("%-30s %-13s %7s %14s %14s %8s\n", "parameters", "optimizer", "threads", "row by row us",
           "multi us", "ratio");
    for (int mi = 0; mi < 2; mi++) {
        for (int adam = 0; adam < 2; adam++) {
            rows r = make_rows(&models[mi], adam, lr);
            for (int t = 1; t <= 2; t++) {
                musa_set_num_threads(t);
                double row_us, multi_us;
                bool big = r.elems > 1000000;
                if (time_both(&r, big ? 15 : 31, big ? 3 : 500, &row_us, &multi_us)) {
                    fprintf(stderr, "step failed: %s\n", musa_last_error());
                    return 1;
                }
                printf("%-30s %-13s %7d %14.1f %14.1f %8.2f\n", models[mi].name,
                       adam ? "Adam" : "SGD mom 0.9", t, row_us, multi_us, row_us / multi_us);
                fflush(stdout);
            }
            free_rows(&r);
        }
    }
    musa_set_num_threads(threads0);
    musa_tensor_release(lr);
    return 0;
}
