/*
 * mlp_train.h - a 2-layer MLP trained on the digits data with the musa C
 * API and its autograd: relu(x W1 + b1) W2 + b2, softmax cross-entropy
 * written from primitives, minibatch SGD. Shared by examples/train_mlp.c
 * and the autograd tests.
 */
#ifndef MUSA_EXAMPLES_MLP_TRAIN_H
#define MUSA_EXAMPLES_MLP_TRAIN_H

#include <musa.h>
#include <stdio.h>

#include "digits.h"

typedef struct {
    double train_loss;    /* mean loss of the last epoch */
    double test_accuracy; /* held-out accuracy after training */
} mlp_result;

/* Cross-entropy of logits (n, C) against int64 labels (n): the mean of
 * logsumexp(logits) - logits[label]. New reference or NULL. */
static inline musa_tensor *mlp_cross_entropy(musa_tensor *logits, musa_tensor *labels) {
    int64_t one = 1;
    musa_tensor *lse = musa_logsumexp(logits, 1, &one, false);
    musa_tensor *idx = musa_unsqueeze(labels, 1);
    musa_tensor *g = musa_gather(logits, 1, idx);   /* (n, 1) */
    musa_tensor *picked = musa_squeeze(g, 1, &one); /* (n) */
    musa_tensor *diff = musa_sub(lse, picked);
    musa_tensor *loss = musa_mean(diff, 0, NULL, false);
    musa_tensor_release(lse), musa_tensor_release(idx), musa_tensor_release(g);
    musa_tensor_release(picked), musa_tensor_release(diff);
    return loss;
}

/* Forward: returns logits (new reference). */
static inline musa_tensor *mlp_forward(musa_tensor *x, musa_tensor *const *p) {
    musa_tensor *h1 = musa_matmul(x, p[0]);
    musa_tensor *h2 = musa_add(h1, p[1]);
    musa_tensor *h3 = musa_relu(h2);
    musa_tensor *o1 = musa_matmul(h3, p[2]);
    musa_tensor *o2 = musa_add(o1, p[3]);
    musa_tensor_release(h1), musa_tensor_release(h2), musa_tensor_release(h3),
        musa_tensor_release(o1);
    return o2;
}

/* Train for `epochs` on the first 80% of the shuffled data, evaluate on the
 * rest. Returns 0 on success (prints a line per epoch when verbose). */
static inline int mlp_train(digits_data *d, int epochs, int verbose, mlp_result *res) {
    enum { H = 64, C = 10, B = 64 };
    const double lr = 0.1;
    digits_shuffle(d, 7);
    int n_train = d->n * 4 / 5, n_test = d->n - n_train;
    int64_t sx[2] = {d->n, DIGITS_FEATURES}, sy[1] = {d->n};
    musa_tensor *X = musa_from_data(d->x, 2, sx, MUSA_DTYPE_FLOAT32);
    musa_tensor *Y = musa_from_data(d->y, 1, sy, MUSA_DTYPE_INT64);
    musa_manual_seed(0);
    int64_t s1[2] = {DIGITS_FEATURES, H}, s2[2] = {H, C}, sb1[1] = {H}, sb2[1] = {C};
    musa_tensor *w1 = musa_randn(2, s1, MUSA_DTYPE_FLOAT32),
                *w2 = musa_randn(2, s2, MUSA_DTYPE_FLOAT32);
    musa_tensor *k1 = musa_number(0.125), *k2 = musa_number(0.125); /* ~1/sqrt(fan_in) */
    musa_tensor *p[4] = {musa_mul(w1, k1), musa_zeros(1, sb1, MUSA_DTYPE_FLOAT32), musa_mul(w2, k2),
                         musa_zeros(1, sb2, MUSA_DTYPE_FLOAT32)};
    musa_tensor_release(w1), musa_tensor_release(w2), musa_tensor_release(k1),
        musa_tensor_release(k2);
    musa_tensor *lrn = musa_number(lr);
    int rc = 0;
    for (int i = 0; i < 4; i++)
        if (!p[i] || musa_tensor_set_requires_grad(p[i], true)) rc = -1;
    for (int e = 0; e < epochs && !rc; e++) {
        double total = 0;
        int batches = 0;
        for (int b0 = 0; b0 < n_train && !rc; b0 += B) {
            int b1 = b0 + B < n_train ? b0 + B : n_train;
            musa_tensor *xb = musa_slice(X, 0, b0, b1, 1), *yb = musa_slice(Y, 0, b0, b1, 1);
            musa_tensor *logits = mlp_forward(xb, p);
            musa_tensor *loss = mlp_cross_entropy(logits, yb);
            double lv = 0;
            if (!loss || musa_tensor_item(loss, &lv) || musa_backward(1, &loss, NULL, false, false))
                rc = -1;
            bool prev = musa_set_grad_enabled(false); /* SGD step */
            for (int i = 0; i < 4 && !rc; i++) {
                musa_tensor *g = musa_tensor_grad(p[i]);
                musa_tensor *step = musa_mul(g, lrn);
                if (!step || musa_sub_(p[i], step) || musa_tensor_set_grad(p[i], NULL)) rc = -1;
                musa_tensor_release(g), musa_tensor_release(step);
            }
            musa_set_grad_enabled(prev);
            total += lv;
            batches++;
            musa_tensor_release(xb), musa_tensor_release(yb), musa_tensor_release(logits),
                musa_tensor_release(loss);
        }
        res->train_loss = total / batches;
        if (verbose && !rc) printf("epoch %2d  train loss %.4f\n", e + 1, res->train_loss);
    }
    if (!rc) { /* held-out accuracy */
        bool prev = musa_set_grad_enabled(false);
        musa_tensor *xt = musa_slice(X, 0, n_train, d->n, 1);
        musa_tensor *logits = mlp_forward(xt, p);
        musa_tensor *pred = musa_argmax(logits, 1, false);
        int64_t *pv = malloc(sizeof(int64_t) * (size_t)n_test);
        if (!pred || musa_tensor_copy_to(pred, pv, sizeof(int64_t) * (size_t)n_test)) rc = -1;
        int correct = 0;
        for (int i = 0; !rc && i < n_test; i++) correct += pv[i] == d->y[n_train + i];
        res->test_accuracy = (double)correct / n_test;
        free(pv);
        musa_tensor_release(xt), musa_tensor_release(logits), musa_tensor_release(pred);
        musa_set_grad_enabled(prev);
    }
    if (rc) fprintf(stderr, "training failed: %s\n", musa_last_error());
    for (int i = 0; i < 4; i++) musa_tensor_release(p[i]);
    musa_tensor_release(X), musa_tensor_release(Y), musa_tensor_release(lrn);
    return rc;
}

#endif
