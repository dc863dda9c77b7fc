/*
 * linalg.c - the bindings of the linear algebra rows and compositions, for
 * musa/linalg.py (PM_NOEXPORT: musa.linalg.<name> is the public spelling).
 * Several results come back as plain tuples; linalg.py makes them
 * PyTorch's named tuples and parses the string options (UPLO, mode).
 */
#include "pymusa.h"

#define LA (PM_FN | PM_NOEXPORT)

/* The n results of a call that returned rc, as a tuple (they are released). */
static PyObject *results(int rc, int n, musa_tensor **t) {
    PyObject *r = rc ? pm_raise() : pm_tensor_tuple(n, t);
    for (int i = 0; i < n; i++) musa_tensor_release(t[i]);
    return r;
}

DEF(linalg_solve, LA, "A:T B:T") {
    return pm_ret(musa_linalg_solve(a[0].t, a[1].t));
}
DEF(linalg_solve_triangular, LA, "A:T B:T * upper:b left:b=True unitriangular:b=False") {
    return pm_ret(musa_linalg_solve_triangular(a[0].t, a[1].t, a[2].b, a[3].b, a[4].b));
}
DEF(linalg_lu_factor, LA, "A:T") { /* (LU, pivots, info, perm): linalg.py picks */
    musa_tensor *t[4] = {NULL, NULL, NULL, NULL};
    int rc = musa_linalg_lu_factor(a[0].t, &t[0], &t[1], &t[2], &t[3]);
    return results(rc, 4, t);
}
DEF(linalg_lu, LA, "A:T") {
    musa_tensor *t[3] = {NULL, NULL, NULL};
    int rc = musa_linalg_lu(a[0].t, &t[0], &t[1], &t[2]);
    return results(rc, 3, t);
}
DEF(linalg_slogdet, LA, "A:T") {
    musa_tensor *t[2] = {NULL, NULL};
    int rc = musa_linalg_slogdet(a[0].t, &t[0], &t[1]);
    return results(rc, 2, t);
}
DEF(linalg_cholesky, LA, "A:T * upper:b=False") {
    return pm_ret(musa_linalg_cholesky(a[0].t, a[1].b));
}
DEF(linalg_eigh, LA, "A:T upper:b=False") {
    musa_tensor *t[2] = {NULL, NULL};
    int rc = musa_linalg_eigh(a[0].t, a[1].b, &t[0], &t[1]);
    return results(rc, 2, t);
}
DEF(linalg_svd, LA, "A:T full_matrices:b=True") {
    musa_tensor *t[3] = {NULL, NULL, NULL};
    int rc = musa_linalg_svd(a[0].t, a[1].b, &t[0], &t[1], &t[2]);
    return results(rc, 3, t);
}
DEF(linalg_qr, LA, "A:T mode:i=0") {
    musa_tensor *t[2] = {NULL, NULL};
    int rc = musa_linalg_qr(a[0].t, (musa_qr_mode)a[1].i, &t[0], &t[1]);
    return results(rc, 2, t);
}
DEF(linalg_inv, LA, "A:T") {
    return pm_ret(musa_linalg_inv(a[0].t));
}
DEF(linalg_det, LA, "A:T") {
    return pm_ret(musa_linalg_det(a[0].t));
}
