/*
 * gradcheck_linalg.c - the LAPACK rows pass gradcheck and gradgradcheck in
 * float64 on batched and transposed inputs. Inputs are made well posed
 * inside the checked function: a shifted diagonal (solve, slogdet), X X^T
 * + n I (cholesky), X + X^T (eigh, whose formula assumes symmetry), and
 * the eigen/singular vectors enter through sign-invariant functions (v^2).
 */
#include "gradcheck.h"

#define GC(name, n, gg, ...)                                                                       \
    do {                                                                                           \
        musa_tensor *ins_[] = {__VA_ARGS__};                                                       \
        if (!check_grads(#name, f_##name, n, ins_, gg)) return;                                    \
    } while (0)

/* x + s I (x square, batched) */
static musa_tensor *shifted(musa_tensor *x, double s) {
    int64_t n = musa_tensor_shape(x)[musa_tensor_ndim(x) - 1];
    musa_tensor *i = musa_eye(n, n, MUSA_DTYPE_FLOAT64), *c = musa_scalar(s, MUSA_DTYPE_FLOAT64);
    musa_tensor *si = musa_mul(i, c), *r = musa_add(x, si);
    release_all(3, i, c, si);
    return r;
}

/* x x^T + n I: symmetric positive-definite */
static musa_tensor *spd(musa_tensor *x) {
    musa_tensor *xt = musa_transpose(x, -2, -1), *p = musa_matmul(x, xt);
    int64_t n = musa_tensor_shape(x)[musa_tensor_ndim(x) - 1];
    musa_tensor *r = shifted(p, (double)n);
    release_all(2, xt, p);
    return r;
}

static musa_tensor *sym(musa_tensor *x) {
    musa_tensor *xt = musa_transpose(x, -2, -1), *r = musa_add(x, xt);
    musa_tensor_release(xt);
    return r;
}

static musa_tensor *square(musa_tensor *x) {
    musa_tensor *r = x ? musa_mul(x, x) : NULL;
    musa_tensor_release(x);
    return r;
}

/* ---- solve ---- */

static musa_tensor *f_linalg_solve(musa_tensor *const *in) {
    musa_tensor *a = shifted(in[0], 3), *r = musa_linalg_solve(a, in[1]);
    musa_tensor_release(a);
    return r;
}
TEST(grad_linalg_solve) {
    GC(linalg_solve, 2, true, in64(3, S(2, 3, 3), -1, 1, L_TRANSPOSED),
       in64(3, S(2, 3, 2), -1, 1, L_CONTIG));
    /* B broadcast over A's batch, and a vector B */
    GC(linalg_solve, 2, true, in64(3, S(2, 3, 3), -1, 1, L_CONTIG),
       in64(2, S(3, 2), -1, 1, L_STRIDED));
    GC(linalg_solve, 2, false, in64(2, S(3, 3), -1, 1, L_CONTIG), in64(1, S(3), -1, 1, L_CONTIG));
}

static musa_tensor *f_linalg_inv(musa_tensor *const *in) {
    musa_tensor *a = shifted(in[0], 3), *r = musa_linalg_inv(a);
    musa_tensor_release(a);
    return r;
}
static musa_tensor *f_linalg_det(musa_tensor *const *in) {
    musa_tensor *a = shifted(in[0], 2), *r = musa_linalg_det(a);
    musa_tensor_release(a);
    return r;
}
TEST(grad_linalg_inv_and_det) {
    GC(linalg_inv, 1, true, in64(3, S(2, 3, 3), -1, 1, L_TRANSPOSED));
    GC(linalg_det, 1, true, in64(3, S(2, 3, 3), -1, 1, L_STRIDED));
}

/* ---- slogdet ---- */

static musa_tensor *f_linalg_slogdet(musa_tensor *const *in) {
    musa_tensor *a = shifted(in[0], 0.5), *s = NULL, *l = NULL;
    musa_linalg_slogdet(a, &s, &l);
    release_all(2, a, s);
    return l;
}
TEST(grad_linalg_slogdet) { /* some of these determinants are negative */
    GC(linalg_slogdet, 1, true, in64(3, S(3, 3, 3), -1, 1, L_TRANSPOSED));
}

/* ---- cholesky ---- */

static musa_tensor *f_linalg_cholesky(musa_tensor *const *in) {
    musa_tensor *a = spd(in[0]), *r = musa_linalg_cholesky(a, false);
    musa_tensor_release(a);
    return r;
}
static musa_tensor *f_cholesky_upper(musa_tensor *const *in) {
    musa_tensor *a = spd(in[0]), *r = musa_linalg_cholesky(a, true);
    musa_tensor_release(a);
    return r;
}
TEST(grad_linalg_cholesky) {
    GC(linalg_cholesky, 1, true, in64(3, S(2, 3, 3), -1, 1, L_TRANSPOSED));
    GC(cholesky_upper, 1, true, in64(2, S(4, 4), -1, 1, L_STRIDED));
}

/* ---- lu_factor: square (shifted, so U is invertible), wide, tall ---- */

static musa_tensor *f_linalg_lu_factor(musa_tensor *const *in) {
    musa_tensor *lu = NULL, *piv = NULL, *info = NULL;
    musa_linalg_lu_factor(in[0], &lu, &piv, &info, NULL);
    release_all(2, piv, info);
    return lu;
}
static musa_tensor *f_lu_square(musa_tensor *const *in) {
    musa_tensor *a = shifted(in[0], 2), *r = f_linalg_lu_factor(&a);
    musa_tensor_release(a);
    return r;
}
TEST(grad_linalg_lu_factor) {
    GC(lu_square, 1, true, in64(3, S(2, 3, 3), -1, 1, L_TRANSPOSED));
    GC(linalg_lu_factor, 1, true, in64(2, S(3, 5), -1, 1, L_CONTIG));
    GC(linalg_lu_factor, 1, true, in64(3, S(2, 5, 3), -1, 1, L_STRIDED));
}

/* ---- solve_triangular: every side, triangle and diagonal ---- */

static musa_tensor *f_trsolve_left_lower(musa_tensor *const *in) {
    musa_tensor *a = shifted(in[0], 3),
                *r = musa_linalg_solve_triangular(a, in[1], false, true, false);
    musa_tensor_release(a);
    return r;
}
static musa_tensor *f_trsolve_right_upper_unit(musa_tensor *const *in) {
    return musa_linalg_solve_triangular(in[0], in[1], true, false, true);
}
TEST(grad_linalg_solve_triangular) {
    GC(trsolve_left_lower, 2, true, in64(3, S(2, 3, 3), -1, 1, L_TRANSPOSED),
       in64(3, S(2, 3, 2), -1, 1, L_CONTIG));
    /* B broadcast over A's batch */
    GC(trsolve_right_upper_unit, 2, true, in64(3, S(2, 3, 3), -1, 1, L_CONTIG),
       in64(2, S(4, 3), -1, 1, L_STRIDED));
}

/* ---- eigh ---- */

static musa_tensor *f_linalg_eigh(musa_tensor *const *in) {
    musa_tensor *a = sym(in[0]), *w = NULL, *v = NULL;
    musa_linalg_eigh(a, false, &w, &v);
    release_all(2, a, v);
    return w;
}
static musa_tensor *f_eigh_vectors(musa_tensor *const *in) {
    musa_tensor *a = sym(in[0]), *w = NULL, *v = NULL;
    musa_linalg_eigh(a, true, &w, &v);
    release_all(2, a, w);
    return square(v);
}
TEST(grad_linalg_eigh) {
    GC(linalg_eigh, 1, true, in64(3, S(2, 4, 4), -1, 1, L_TRANSPOSED));
    GC(eigh_vectors, 1, true, in64(2, S(4, 4), -1, 1, L_CONTIG));
}

/* ---- svd: singular values alone, and U, Vh (squared), tall and wide ---- */

static musa_tensor *svd_part(musa_tensor *x, bool full, int which) {
    musa_tensor *o[3] = {NULL, NULL, NULL};
    musa_linalg_svd(x, full, &o[0], &o[1], &o[2]);
    musa_tensor *r = o[which];
    o[which] = NULL;
    release_all(3, o[0], o[1], o[2]);
    if (which == 1) return r;
    if (full && r) { /* the first k columns of U (rows of Vh) are the unique ones */
        const int64_t *s = musa_tensor_shape(x);
        int nd = musa_tensor_ndim(x);
        int64_t k = s[nd - 2] < s[nd - 1] ? s[nd - 2] : s[nd - 1];
        musa_tensor *c = musa_slice(r, which == 0 ? -1 : -2, 0, k, 1);
        musa_tensor_release(r);
        r = c;
    }
    return square(r);
}
static musa_tensor *f_linalg_svd(musa_tensor *const *in) {
    return svd_part(in[0], false, 1);
}
static musa_tensor *f_svd_u(musa_tensor *const *in) {
    return svd_part(in[0], false, 0);
}
static musa_tensor *f_svd_vh(musa_tensor *const *in) {
    return svd_part(in[0], false, 2);
}
static musa_tensor *f_svd_full_u(musa_tensor *const *in) {
    return svd_part(in[0], true, 0);
}
static musa_tensor *f_svd_full_vh(musa_tensor *const *in) {
    return svd_part(in[0], true, 2);
}
TEST(grad_linalg_svd) {
    GC(linalg_svd, 1, true, in64(3, S(2, 4, 3), -1, 1, L_TRANSPOSED));
    GC(svd_u, 1, true, in64(2, S(4, 3), -1, 1, L_CONTIG));
    GC(svd_u, 1, false, in64(2, S(3, 4), -1, 1, L_STRIDED));
    GC(svd_vh, 1, true, in64(2, S(3, 4), -1, 1, L_TRANSPOSED));
    GC(svd_vh, 1, false, in64(3, S(2, 4, 3), -1, 1, L_CONTIG));
    GC(svd_full_u, 1, false, in64(2, S(4, 3), -1, 1, L_CONTIG));
    GC(svd_full_vh, 1, false, in64(2, S(3, 4), -1, 1, L_CONTIG));
}

/* ---- qr: Q and R, tall and wide ---- */

static musa_tensor *qr_part(musa_tensor *x, musa_qr_mode mode, int which) {
    musa_tensor *q = NULL, *r = NULL;
    musa_linalg_qr(x, mode, &q, &r);
    musa_tensor_release(which ? q : r);
    return which ? r : q;
}
static musa_tensor *f_linalg_qr(musa_tensor *const *in) {
    return qr_part(in[0], MUSA_QR_REDUCED, 0);
}
static musa_tensor *f_qr_r(musa_tensor *const *in) {
    return qr_part(in[0], MUSA_QR_REDUCED, 1);
}
static musa_tensor *f_qr_complete_q(musa_tensor *const *in) {
    return qr_part(in[0], MUSA_QR_COMPLETE, 0);
}
TEST(grad_linalg_qr) {
    GC(linalg_qr, 1, true, in64(3, S(2, 4, 3), -1, 1, L_TRANSPOSED));
    GC(qr_r, 1, true, in64(2, S(4, 3), -1, 1, L_STRIDED));
    GC(linalg_qr, 1, true, in64(2, S(3, 5), -1, 1, L_CONTIG));
    GC(qr_r, 1, false, in64(3, S(2, 3, 5), -1, 1, L_TRANSPOSED));
    GC(qr_complete_q, 1, false, in64(2, S(3, 4), -1, 1, L_CONTIG)); /* m <= n: Q is unique */
}

TEST(grad_linalg_qr_refuses_what_is_not_differentiable) {
    musa_tensor *x = in64(2, S(4, 3), -1, 1, L_CONTIG), *q = NULL, *r = NULL;
    CHECK_OK(musa_linalg_qr(x, MUSA_QR_R, &q, &r));
    musa_tensor *s = musa_sum(r, 0, NULL, false);
    CHECK_ERR(musa_backward(1, &s, NULL, false, false) == MUSA_OK, MUSA_ERR_NOT_IMPLEMENTED,
              "mode 'r' does not compute");
    musa_tensor *q2 = NULL, *r2 = NULL;
    CHECK_OK(musa_linalg_qr(x, MUSA_QR_COMPLETE, &q2, &r2));
    musa_tensor *s2 = musa_sum(q2, 0, NULL, false);
    CHECK_ERR(musa_backward(1, &s2, NULL, false, false) == MUSA_OK, MUSA_ERR_NOT_IMPLEMENTED,
              "not differentiable when mode is 'complete' and m > n (4 > 3)");
    release_all(7, x, q, r, s, q2, r2, s2);
}

TEST(grad_linalg_singular_fails_by_name) {
    /* logabsdet's gradient needs A^{-1}: a singular A fails, naming the op */
    musa_tensor *x = in64(2, S(3, 3), 1, 1 + 1e-300, L_CONTIG), *s = NULL, *l = NULL;
    CHECK_OK(musa_linalg_slogdet(x, &s, &l));
    CHECK_ERR(musa_backward(1, &l, NULL, false, false) == MUSA_OK, MUSA_ERR_LINALG, "singular");
    release_all(3, x, s, l);
}
