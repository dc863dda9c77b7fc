/*
 * linear_regression.c - a least-squares digit classifier with the musa C
 * API, solved in closed form (no gradients):
 *
 *     W = (X^T X + lambda I)^-1 X^T Y      Y: one-hot labels, X with a bias column
 *
 * The Gram matrix X^T X and X^T Y come from musa_matmul on transposed views
 * (no copies); the small 65x65 system is solved by Cholesky in plain C;
 * predictions are argmax(X_test W). Prints the held-out accuracy.
 *
 * Run from the repository root: ./build/linear_regression [data/digits.csv.gz]
 */
#include <math.h>
#include <musa.h>
#include <stdio.h>
#include <stdlib.h>

#include "digits.h"

#define F (DIGITS_FEATURES + 1) /* features + bias */
#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x)) {                                                                                \
            fprintf(stderr, "error: %s\n", musa_last_error());                                     \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

/* Solve A x = b for symmetric positive definite A (n x n), b with m columns. */
static int cholesky_solve(double *A, double *B, int n, int m) {
    for (int j = 0; j < n; j++) {
        double s = A[j * n + j];
        for (int k = 0; k < j; k++) s -= A[j * n + k] * A[j * n + k];
        if (s <= 0) return -1;
        A[j * n + j] = sqrt(s);
        for (int i = j + 1; i < n; i++) {
            double t = A[i * n + j];
            for (int k = 0; k < j; k++) t -= A[i * n + k] * A[j * n + k];
            A[i * n + j] = t / A[j * n + j];
        }
    }
    for (int c = 0; c < m; c++) {
        for (int i = 0; i < n; i++) { /* L y = b */
            double t = B[i * m + c];
            for (int k = 0; k < i; k++) t -= A[i * n + k] * B[k * m + c];
            B[i * m + c] = t / A[i * n + i];
        }
        for (int i = n - 1; i >= 0; i--) { /* L^T x = y */
            double t = B[i * m + c];
            for (int k = i + 1; k < n; k++) t -= A[k * n + i] * B[k * m + c];
            B[i * m + c] = t / A[i * n + i];
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    static digits_data d;
    if (digits_load(argc > 1 ? argv[1] : "data/digits.csv.gz", &d)) return 1;
    digits_shuffle(&d, 42);
    int n_train = d.n * 4 / 5, n_test = d.n - n_train;

    /* Design matrices with a bias column, as float64 tensors. */
    double *xs = malloc(sizeof(double) * (size_t)d.n * F);
    double *ys = calloc((size_t)d.n * 10, sizeof(double));
    for (int i = 0; i < d.n; i++) {
        for (int j = 0; j < DIGITS_FEATURES; j++) xs[i * F + j] = d.x[i][j];
        xs[i * F + DIGITS_FEATURES] = 1.0;
        ys[i * 10 + d.y[i]] = 1.0;
    }
    int64_t sx[2] = {d.n, F}, sy[2] = {d.n, 10};
    musa_tensor *X = musa_from_data(xs, 2, sx, MUSA_DTYPE_FLOAT64);
    musa_tensor *Y = musa_from_data(ys, 2, sy, MUSA_DTYPE_FLOAT64);
    musa_tensor *Xtr = musa_slice(X, 0, 0, n_train, 1), *Ytr = musa_slice(Y, 0, 0, n_train, 1);
    musa_tensor *Xte = musa_slice(X, 0, n_train, d.n, 1);
    musa_tensor *XtrT = musa_transpose(Xtr, 0, 1);
    musa_tensor *G = musa_matmul(XtrT, Xtr); /* (F, F) */
    musa_tensor *R = musa_matmul(XtrT, Ytr); /* (F, 10) */
    CHECK(G && R);

    double *A = malloc(sizeof(double) * F * F), *B = malloc(sizeof(double) * F * 10);
    CHECK(musa_tensor_copy_to(G, A, sizeof(double) * F * F) == MUSA_OK);
    CHECK(musa_tensor_copy_to(R, B, sizeof(double) * F * 10) == MUSA_OK);
    for (int i = 0; i < F; i++) A[i * F + i] += 1e-1; /* ridge */
    if (cholesky_solve(A, B, F, 10)) {
        fprintf(stderr, "the normal equations are not positive definite\n");
        return 1;
    }
    int64_t sw[2] = {F, 10};
    musa_tensor *W = musa_from_data(B, 2, sw, MUSA_DTYPE_FLOAT64);
    musa_tensor *scores = musa_matmul(Xte, W);
    musa_tensor *pred = musa_argmax(scores, 1, false);
    CHECK(pred);
    int64_t *p = malloc(sizeof(int64_t) * (size_t)n_test);
    CHECK(musa_tensor_copy_to(pred, p, sizeof(int64_t) * (size_t)n_test) == MUSA_OK);
    int correct = 0;
    for (int i = 0; i < n_test; i++) correct += p[i] == d.y[n_train + i];
    printf("least-squares digit classifier (closed form, musa C API)\n");
    printf("train %d, test %d samples, %d features + bias\n", n_train, n_test, DIGITS_FEATURES);
    printf("held-out accuracy: %.1f%% (%d/%d)\n", 100.0 * correct / n_test, correct, n_test);

    musa_tensor *all[] = {X, Y, Xtr, Ytr, Xte, XtrT, G, R, W, scores, pred};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) musa_tensor_release(all[i]);
    free(xs), free(ys), free(A), free(B), free(p);
    return 0;
}
