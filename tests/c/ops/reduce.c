/*
 * reduce.c - op tests for reductions (and the reduction composites mean,
 * var, std, logsumexp, norm), against float64 loops written here.
 */
#include "../util.h"

typedef enum { R_SUM, R_PROD, R_AMAX, R_AMIN } rkind;

/* Reference: reduce row-major values `x` of shape over mask into out. */
static void ref_reduce(rkind k, const double *x, int nd, const int64_t *shape, const bool *mask,
                       double *out, int64_t nout) {
    for (int64_t o = 0; o < nout; o++)
        out[o] = k == R_SUM ? 0 : k == R_PROD ? 1 : k == R_AMAX ? -INFINITY : INFINITY;
    int64_t n = numel_of(nd, shape), idx[8], kidx[8], kshape[8];
    int kn = 0;
    for (int d = 0; d < nd; d++)
        if (!mask[d]) kshape[kn++] = shape[d];
    for (int64_t i = 0; i < n; i++) {
        unravel(i, nd, shape, idx);
        int m = 0;
        for (int d = 0; d < nd; d++)
            if (!mask[d]) kidx[m++] = idx[d];
        int64_t o = ravel(kn, kshape, kidx);
        double v = x[i];
        switch (k) {
        case R_SUM:
            out[o] += v;
            break;
        case R_PROD:
            out[o] *= v;
            break;
        case R_AMAX:
            out[o] = (v != v || v > out[o]) ? v : out[o];
            break;
        case R_AMIN:
            out[o] = (v != v || v < out[o]) ? v : out[o];
            break;
        }
    }
}

typedef musa_tensor *(*reduce_fn)(musa_tensor *, int, const int64_t *, bool);

static void run_reduce(const char *name, reduce_fn fn, rkind k, double lo, double hi) {
    static const struct {
        int nd;
        int64_t shape[3];
        int ndims;
        int64_t dims[3];
        layout lay;
    } cases[] = {
        {3, {4, 5, 6}, 0, {0}, L_CONTIG},   {3, {4, 5, 6}, 1, {0}, L_CONTIG},
        {3, {4, 5, 6}, 1, {-1}, L_CONTIG},  {3, {4, 5, 6}, 2, {0, 2}, L_TRANSPOSED},
        {3, {4, 5, 6}, 1, {1}, L_STRIDED},  {2, {7, 9}, 2, {1, 0}, L_TRANSPOSED},
        {0, {0}, 0, {0}, L_CONTIG},         {2, {0, 3}, 1, {1}, L_CONTIG},
        {2, {1000, 300}, 1, {0}, L_CONTIG}, {1, {1 << 20}, 0, {0}, L_CONTIG},
        {2, {3, 100000}, 1, {1}, L_CONTIG}, {2, {5, 1}, 1, {1}, L_CONTIG},
    };
    for (int di = 0; di < 8; di++) {
        musa_dtype dt = ALL_DTYPES[di];
        for (int ci = 0; ci < (int)(sizeof cases / sizeof cases[0]); ci++) {
            if (ci >= 8 && ci <= 10 && dt != MUSA_DTYPE_FLOAT32 && dt != MUSA_DTYPE_INT64) continue;
            if (k == R_PROD && ci >= 8 && ci <= 10) continue; /* would overflow */
            for (int keep = 0; keep < 2; keep++) {
                musa_tensor *x = rnd(dt, cases[ci].nd, cases[ci].shape, lo, hi, cases[ci].lay);
                musa_tensor *y = fn(x, cases[ci].ndims, cases[ci].dims, keep);
                CHECK_MSG(y, "%s %s case %d: %s", name, musa_dtype_name(dt), ci, musa_last_error());
                bool mask[8] = {false};
                int nd = cases[ci].nd;
                for (int d = 0; d < nd; d++) mask[d] = cases[ci].ndims == 0;
                for (int i = 0; i < cases[ci].ndims; i++)
                    mask[(cases[ci].dims[i] + nd) % nd] = true;
                int64_t oshape[8];
                int on = 0;
                for (int d = 0; d < nd; d++) {
                    if (!mask[d])
                        oshape[on++] = cases[ci].shape[d];
                    else if (keep)
                        oshape[on++] = 1;
                }
                CHECK_MSG(same_shape(y, on, oshape), "%s case %d keepdim %d shape", name, ci, keep);
                musa_dtype od =
                    (k <= R_PROD && !musa_dtype_is_floating(dt)) ? MUSA_DTYPE_INT64 : dt;
                CHECK_MSG(musa_tensor_dtype(y) == od, "%s dtype", name);
                int64_t nout = musa_tensor_numel(y);
                double *xv = values(x), *yv = values(y),
                       *want = malloc(sizeof(double) * (size_t)(nout + 1));
                ref_reduce(k, xv, nd, cases[ci].shape, mask, want, nout);
                for (int64_t i = 0; i < nout; i++)
                    if (!musa_dtype_is_floating(od)) want[i] = round_to(want[i], od);
                /* The reference accumulates exactly in double; the result is
                 * rounded once to the output dtype, and long float32 sums may
                 * differ by the summation error bound. */
                double scale = 1;
                if (k == R_SUM && musa_dtype_is_floating(od)) {
                    int64_t per = musa_tensor_numel(x) / (nout ? nout : 1);
                    scale = 1 + log2((double)per + 1);
                }
                bool ok = true;
                for (int64_t i = 0; i < nout && ok; i++) {
                    double tol = (tol_abs(od) + tol_rel(od) * fabs(want[i])) * scale;
                    if (!(fabs(yv[i] - want[i]) <= tol) &&
                        !(yv[i] != yv[i] && want[i] != want[i])) {
                        harness_fail(__FILE__, __LINE__,
                                     "%s %s case %d keep %d: out[%lld] = %.17g, want %.17g", name,
                                     musa_dtype_name(dt), ci, keep, (long long)i, yv[i], want[i]);
                        ok = false;
                    }
                }
                free(xv), free(yv), free(want);
                release_all(2, x, y);
                if (!ok) return;
            }
        }
    }
    musa_tensor *x = musa_zeros(2, (int64_t[]){2, 3}, MUSA_DTYPE_FLOAT32);
    char msg[64];
    snprintf(msg, sizeof msg, "[%s] dim 2 out of range", name);
    CHECK_ERR(FAILS(fn(x, 1, (int64_t[]){2}, false)), MUSA_ERR_INDEX, msg);
    CHECK_ERR(FAILS(fn(x, 2, (int64_t[]){1, -1}, false)), MUSA_ERR_VALUE, "appears more than once");
    musa_tensor_release(x);
}

TEST(op_sum) {
    run_reduce("sum", musa_sum, R_SUM, -3, 3);
}
TEST(op_prod) {
    run_reduce("prod", musa_prod, R_PROD, 0.7, 1.4);
}
TEST(op_amax) {
    run_reduce("amax", musa_amax, R_AMAX, -9, 9);
}
TEST(op_amin) {
    run_reduce("amin", musa_amin, R_AMIN, -9, 9);
}

TEST(reduce_empty_and_bool) {
    musa_tensor *e = musa_zeros(2, (int64_t[]){0, 3}, MUSA_DTYPE_FLOAT32);
    musa_tensor *s = musa_sum(e, 1, (int64_t[]){0}, false),
                *p = musa_prod(e, 1, (int64_t[]){0}, false);
    double *sv = values(s), *pv = values(p);
    CHECK(sv && pv && sv[0] == 0 && sv[2] == 0 && pv[1] == 1);
    CHECK_ERR(FAILS(musa_amax(e, 1, (int64_t[]){0}, false)), MUSA_ERR_VALUE,
              "[amax] cannot reduce over dim 0 of size 0");
    musa_tensor *b = from_list(MUSA_DTYPE_BOOL, 1, (int64_t[]){4}, (double[]){1, 0, 1, 1});
    musa_tensor *bs = musa_sum(b, 0, NULL, false);
    int64_t n;
    CHECK_OK(musa_tensor_item_int(bs, &n));
    CHECK(n == 3 && musa_tensor_dtype(bs) == MUSA_DTYPE_INT64);
    /* bool extrema are any/all, in bool */
    musa_tensor *bmax = musa_amax(b, 0, NULL, false), *bmin = musa_amin(b, 0, NULL, false);
    int64_t hi = -1, lo = -1;
    CHECK(bmax && bmin && musa_tensor_dtype(bmax) == MUSA_DTYPE_BOOL);
    CHECK_OK(musa_tensor_item_int(bmax, &hi));
    CHECK_OK(musa_tensor_item_int(bmin, &lo));
    CHECK(hi == 1 && lo == 0);
    release_all(2, bmax, bmin);
    /* NaN propagates through amax */
    musa_tensor *nan = from_list(MUSA_DTYPE_FLOAT32, 1, (int64_t[]){3}, (double[]){1, NAN, 3});
    musa_tensor *m = musa_amax(nan, 0, NULL, false);
    double mv;
    CHECK_OK(musa_tensor_item(m, &mv));
    CHECK(mv != mv);
    free(sv), free(pv);
    release_all(7, e, s, p, b, bs, nan, m);
}

/* Regression (fuzz_op_call, reduce-empty-huge-dim): reducing an empty
 * tensor whose other dim is 2^62 multiplied its strides by the element
 * size (signed overflow, UBSan) before noticing there was nothing to do. */
TEST(reduce_empty_with_huge_dims) {
    const int64_t big = (int64_t)1 << 62;
    musa_tensor *x = musa_zeros(2, (int64_t[]){0, big}, MUSA_DTYPE_FLOAT32);
    musa_tensor *s = musa_sum(x, 0, NULL, false), *p = musa_prod(x, 0, NULL, true);
    double sv = -1, pv = -1;
    CHECK(s && p);
    CHECK_OK(musa_tensor_item(s, &sv));
    CHECK_OK(musa_tensor_item(p, &pv));
    CHECK(sv == 0 && pv == 1 && musa_tensor_ndim(p) == 2);
    musa_tensor *r = musa_sum(x, 1, (int64_t[]){1}, false);
    CHECK(r && musa_tensor_ndim(r) == 1 && musa_tensor_numel(r) == 0);
    musa_tensor *m = musa_amax(x, 1, (int64_t[]){1}, true);
    CHECK(m && musa_tensor_shape(m)[0] == 0 && musa_tensor_shape(m)[1] == 1);
    musa_tensor *a = musa_argmax(x, 1, false);
    CHECK(a && musa_tensor_numel(a) == 0);
    /* a sum that would need a (2^62,) output fails cleanly */
    CHECK_ERR(FAILS(musa_sum(x, 1, (int64_t[]){0}, false)), MUSA_ERR_NOMEM, "out of memory");
    musa_tensor *l = musa_log_softmax(x, 1);
    CHECK(l && musa_tensor_numel(l) == 0);
    release_all(7, x, s, p, r, m, a, l);
}

TEST(reduce_sum_accuracy) {
    /* 2^24 + many ones: a float32 accumulator stalls at 2^24 (off by 4M);
     * the documented bound is (log2(n) + 12) * 2^-53 * sum|x| before the
     * final rounding to float32 (half an ulp: 1 at this magnitude). */
    int64_t n = 1 << 22;
    musa_tensor *x = musa_full(1, &n, 1.0, MUSA_DTYPE_FLOAT32);
    musa_tensor *first = musa_slice(x, 0, 0, 1, 1);
    double big = 16777216.0;
    musa_tensor *bn = musa_number(big);
    CHECK_OK(musa_copy_(first, bn));
    musa_tensor *s = musa_sum(x, 0, NULL, false);
    double v;
    CHECK_OK(musa_tensor_item(s, &v));
    CHECK_NEAR(v, big + (double)(n - 1), 1);
    release_all(4, x, first, bn, s);
}

typedef int (*arg2_fn)(musa_tensor *, int64_t, bool, musa_tensor **, musa_tensor **);

static void run_arg(const char *name, bool is_max, arg2_fn two,
                    musa_tensor *(*one)(musa_tensor *, int64_t, bool)) {
    for (int di = 0; di < 8; di++) {
        musa_dtype dt = ALL_DTYPES[di];
        for (int dim = -3; dim < 3; dim++) {
            for (int keep = 0; keep < 2; keep++) {
                int64_t shape[3] = {3, 4, 5};
                musa_tensor *x = rnd(dt, 3, shape, -3, 3, dim == 1 ? L_TRANSPOSED : L_CONTIG);
                musa_tensor *v = NULL, *ix = NULL;
                if (two)
                    CHECK_OK(two(x, dim, keep, &v, &ix));
                else
                    ix = one(x, dim, keep);
                CHECK_MSG(ix && musa_tensor_dtype(ix) == MUSA_DTYPE_INT64, "%s index", name);
                int d = (dim + 3) % 3;
                double *xv = values(x), *vv = v ? values(v) : NULL;
                int64_t *iv = ivalues(ix);
                int64_t osh[3], idx[3];
                int on = 0;
                for (int k = 0; k < 3; k++)
                    if (k != d) osh[on++] = shape[k];
                for (int64_t o = 0; o < numel_of(2, osh); o++) {
                    int64_t oi[2];
                    unravel(o, 2, osh, oi);
                    int m = 0;
                    for (int k = 0; k < 3; k++) idx[k] = k == d ? 0 : oi[m++];
                    double best = 0;
                    int64_t bi = 0;
                    for (int64_t j = 0; j < shape[d]; j++) {
                        idx[d] = j;
                        double e = xv[ravel(3, shape, idx)];
                        if (j == 0 || (is_max ? e > best : e < best)) best = e, bi = j;
                    }
                    CHECK_MSG(iv[o] == bi, "%s %s dim %d: index %lld, want %lld", name,
                              musa_dtype_name(dt), dim, (long long)iv[o], (long long)bi);
                    if (vv) CHECK_MSG(vv[o] == best, "%s value", name);
                }
                free(xv), free(vv), free(iv);
                release_all(3, x, v, ix);
            }
        }
    }
    musa_tensor *e = musa_zeros(2, (int64_t[]){3, 0}, MUSA_DTYPE_FLOAT32);
    musa_tensor *v = NULL, *ix = NULL;
    if (two)
        CHECK_ERR(two(e, 1, false, &v, &ix) == MUSA_OK, MUSA_ERR_VALUE, "size 0");
    else
        CHECK_ERR(FAILS(one(e, 1, false)), MUSA_ERR_VALUE, "size 0");
    musa_tensor_release(e);
}

TEST(op_max_dim) {
    run_arg("max_dim", true, musa_max_dim, NULL);
}
TEST(op_min_dim) {
    run_arg("min_dim", false, musa_min_dim, NULL);
}
TEST(op_argmax) {
    run_arg("argmax", true, NULL, musa_argmax);
}
TEST(op_argmin) {
    run_arg("argmin", false, NULL, musa_argmin);
}

TEST(argmax_flat_ties_nan) {
    musa_tensor *x =
        from_list(MUSA_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, (double[]){1, 5, 5, 0, 5, 2});
    musa_tensor *a = musa_argmax(x, MUSA_DIM_ALL, false), *k = musa_argmax(x, MUSA_DIM_ALL, true);
    int64_t i;
    CHECK_OK(musa_tensor_item_int(a, &i));
    CHECK(i == 1); /* first among ties */
    CHECK_SHAPE(k, 2, 1, 1);
    musa_tensor *n = from_list(MUSA_DTYPE_FLOAT32, 1, (int64_t[]){4}, (double[]){1, NAN, 9, NAN});
    musa_tensor *an = musa_argmax(n, 0, false), *mn = musa_argmin(n, 0, false);
    int64_t i1, i2;
    CHECK_OK(musa_tensor_item_int(an, &i1));
    CHECK_OK(musa_tensor_item_int(mn, &i2));
    CHECK(i1 == 1 && i2 == 1); /* NaN wins both, first one */
    release_all(6, x, a, k, n, an, mn);
}

/* Rows longer than the vectorised float32 fast path's blocks (reduce.c,
 * f32_extreme_run and arg_range): the first of tied extremes, a -0.0 that
 * comes before +0.0, a NaN after the largest value, a row of -inf. */
static void extreme_row(double *v, int64_t n, int kind) {
    for (int64_t i = 0; i < n; i++) v[i] = (double)((i * 37) % 101) / 10 - 3;
    if (kind == 0) v[70] = v[200] = 50; /* ties: the first */
    if (kind == 1)                      /* zeros, -0.0 first */
        for (int64_t i = 0; i < n; i++) v[i] = i < 100 ? -1 : i == 100 ? -0.0 : 0.0;
    if (kind == 2) v[10] = 50, v[250] = NAN, v[260] = NAN; /* NaN wins: the first */
    if (kind == 3)
        for (int64_t i = 0; i < n; i++) v[i] = -INFINITY;
}

TEST(extremes_of_long_float32_rows) {
    enum { N = 300 };
    static const int64_t want_arg[4] = {70, 100, 250, 0};
    for (int kind = 0; kind < 4; kind++) {
        double v[N];
        extreme_row(v, N, kind);
        musa_tensor *x = from_list(MUSA_DTYPE_FLOAT32, 1, (int64_t[]){N}, v);
        musa_tensor *am = musa_amax(x, 0, NULL, false), *ag = musa_argmax(x, 0, false);
        musa_tensor *mv = NULL, *mi = NULL;
        CHECK_OK(musa_max_dim(x, 0, false, &mv, &mi));
        double a, m;
        int64_t g, i;
        CHECK_OK(musa_tensor_item(am, &a));
        CHECK_OK(musa_tensor_item(mv, &m));
        CHECK_OK(musa_tensor_item_int(ag, &g));
        CHECK_OK(musa_tensor_item_int(mi, &i));
        CHECK_MSG(g == want_arg[kind] && i == want_arg[kind],
                  "kind %d: argmax %lld, max index %lld", kind, (long long)g, (long long)i);
        if (kind == 2) {
            CHECK(a != a && m != m);
        } else {
            double want = v[want_arg[kind]];
            CHECK_MSG(a == want && m == want && signbit(a) == signbit(want) &&
                          signbit(m) == signbit(want),
                      "kind %d: amax %g, max %g, want %g", kind, a, m, want);
        }
        release_all(5, x, am, ag, mv, mi);
    }
}

TEST(op_norm_list) {
    musa_tensor *ts[4] = {
        rnd(MUSA_DTYPE_FLOAT32, 2, (int64_t[]){30, 40}, -2, 2, L_CONTIG),
        rnd(MUSA_DTYPE_FLOAT64, 2, (int64_t[]){7, 9}, -2, 2, L_TRANSPOSED),
        rnd(MUSA_DTYPE_FLOAT16, 1, (int64_t[]){300000}, -1, 1, L_CONTIG),
        rnd(MUSA_DTYPE_BFLOAT16, 2, (int64_t[]){5, 8}, -1, 1, L_STRIDED),
    };
    double acc = 0;
    for (int i = 0; i < 4; i++) {
        double *v = values(ts[i]);
        for (int64_t k = 0; k < musa_tensor_numel(ts[i]); k++) acc += v[k] * v[k];
        free(v);
    }
    musa_tensor *n = musa_norm_list(4, ts);
    CHECK(n && musa_tensor_dtype(n) == MUSA_DTYPE_FLOAT64 && musa_tensor_ndim(n) == 0);
    double got;
    CHECK_OK(musa_tensor_item(n, &got));
    CHECK_NEAR(got, sqrt(acc), 1e-9 * sqrt(acc));
    musa_tensor *n32 = musa_norm_list(1, ts + 2);
    CHECK(n32 && musa_tensor_dtype(n32) == MUSA_DTYPE_FLOAT32);
    musa_tensor *i = musa_zeros(1, (int64_t[]){3}, MUSA_DTYPE_INT64);
    CHECK_ERR(FAILS(musa_norm_list(1, &i)), MUSA_ERR_TYPE, "[norm_list] tensor 0 has dtype int64");
    CHECK_ERR(FAILS(musa_norm_list(0, ts)), MUSA_ERR_VALUE, "at least one");
    release_all(7, ts[0], ts[1], ts[2], ts[3], n, n32, i);
}

TEST(reduction_composites) {
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT64, 2, (int64_t[]){6, 8}, -3, 3, L_TRANSPOSED);
    double *xv = values(x);
    musa_tensor *m = musa_mean(x, 1, (int64_t[]){1}, false);
    musa_tensor *v = musa_var(x, 1, (int64_t[]){1}, 1, false);
    musa_tensor *s = musa_std(x, 1, (int64_t[]){1}, 0, true);
    musa_tensor *l = musa_logsumexp(x, 1, (int64_t[]){1}, false);
    musa_tensor *n1 = musa_norm(x, 1, 1, (int64_t[]){1}, false);
    musa_tensor *n2 = musa_norm(x, 2, 0, NULL, false);
    musa_tensor *ni = musa_norm(x, INFINITY, 1, (int64_t[]){1}, false);
    musa_tensor *n3 = musa_norm(x, 3, 1, (int64_t[]){1}, false);
    CHECK(m && v && s && l && n1 && n2 && ni && n3);
    CHECK_SHAPE(s, 2, 6, 1);
    double *mv = values(m), *vv = values(v), *sv = values(s), *lv = values(l), *n1v = values(n1),
           *niv = values(ni), *n3v = values(n3), n2v;
    CHECK_OK(musa_tensor_item(n2, &n2v));
    double tot = 0;
    for (int r = 0; r < 6; r++) {
        double mu = 0, ss = 0, mx = -INFINITY, se = 0, a1 = 0, ai = 0, a3 = 0;
        for (int c = 0; c < 8; c++) mu += xv[r * 8 + c] / 8, mx = fmax(mx, xv[r * 8 + c]);
        for (int c = 0; c < 8; c++) {
            double e = xv[r * 8 + c];
            ss += (e - mu) * (e - mu), se += exp(e - mx), a1 += fabs(e), ai = fmax(ai, fabs(e));
            a3 += pow(fabs(e), 3), tot += e * e;
        }
        CHECK_NEAR(mv[r], mu, 1e-12);
        CHECK_NEAR(vv[r], ss / 7, 1e-12);
        CHECK_NEAR(sv[r], sqrt(ss / 8), 1e-12);
        CHECK_NEAR(lv[r], mx + log(se), 1e-12);
        CHECK_NEAR(n1v[r], a1, 1e-12);
        CHECK_NEAR(niv[r], ai, 1e-12);
        CHECK_NEAR(n3v[r], cbrt(a3), 1e-10);
    }
    CHECK_NEAR(n2v, sqrt(tot), 1e-12);
    free(xv), free(mv), free(vv), free(sv), free(lv), free(n1v), free(niv), free(n3v);
    /* logsumexp of all -inf is -inf, of large values stays finite */
    musa_tensor *big = from_list(MUSA_DTYPE_FLOAT32, 1, (int64_t[]){2}, (double[]){1000, 1000});
    musa_tensor *lb = musa_logsumexp(big, 0, NULL, false);
    double lbv;
    CHECK_OK(musa_tensor_item(lb, &lbv));
    CHECK_NEAR(lbv, 1000 + log(2), 1e-3);
    musa_tensor *xi = musa_zeros(1, (int64_t[]){3}, MUSA_DTYPE_INT32);
    CHECK_ERR(FAILS(musa_mean(xi, 0, NULL, false)), MUSA_ERR_TYPE, "[mean] needs a floating dtype");
    release_all(12, x, m, v, s, l, n1, n2, ni, n3, big, lb, xi);
}
