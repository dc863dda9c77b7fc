/*
 * views.c - view ops: shapes, strides, storage sharing, values, writes
 * through views, and errors.
 */
#include "../util.h"

/* Values of `v` must equal base values at offset + sum(idx * strides). */
static bool view_matches(musa_tensor *base, musa_tensor *v) {
    double *bv = values(base), *vv = values(v);
    int nd = musa_tensor_ndim(v);
    const int64_t *sh = musa_tensor_shape(v), *st = musa_tensor_strides(v);
    int64_t off0 = musa_tensor_offset(v) - musa_tensor_offset(base), idx[8];
    bool ok = bv && vv;
    for (int64_t i = 0; ok && i < musa_tensor_numel(v); i++) {
        unravel(i, nd, sh, idx);
        int64_t off = off0;
        for (int d = 0; d < nd; d++) off += idx[d] * st[d];
        ok = vv[i] == bv[off];
    }
    free(bv), free(vv);
    return ok;
}

TEST(op_view) {
    musa_tensor *x = musa_arange(0, 24, 1, MUSA_DTYPE_FLOAT32);
    musa_tensor *v = musa_view(x, 3, (int64_t[]){2, -1, 4});
    CHECK_SHAPE(v, 3, 2, 3, 4);
    CHECK(musa_tensor_shares_storage(x, v) && view_matches(x, v));
    musa_tensor *t = musa_transpose(v, 1, 2);
    CHECK_ERR(FAILS(musa_view(t, 1, (int64_t[]){24})), MUSA_ERR_RUNTIME, "use reshape");
    musa_tensor *ok = musa_view(t, 4, (int64_t[]){2, 2, 2, 3}); /* splits dim 1 only */
    CHECK(ok && view_matches(x, ok));
    musa_tensor *r = musa_reshape(t, 1, (int64_t[]){24}); /* copies */
    CHECK(r && !musa_tensor_shares_storage(r, x));
    CHECK_ERR(FAILS(musa_view(x, 2, (int64_t[]){5, 5})), MUSA_ERR_VALUE,
              "[view] shape (5, 5) is invalid for input of size 24");
    CHECK_ERR(FAILS(musa_view(x, 2, (int64_t[]){-1, -1})), MUSA_ERR_VALUE,
              "only one dim can be -1");
    musa_tensor *s = musa_scalar(3, MUSA_DTYPE_FLOAT32);
    musa_tensor *s1 = musa_view(s, 2, (int64_t[]){1, 1});
    CHECK(s1);
    musa_tensor *e = musa_zeros(2, (int64_t[]){0, 4}, MUSA_DTYPE_FLOAT32);
    musa_tensor *e2 = musa_view(e, 3, (int64_t[]){2, 0, 7});
    CHECK_ERR(FAILS(musa_view(e, 2, (int64_t[]){-1, 0})), MUSA_ERR_VALUE, "could be any value");
    CHECK(e2);
    release_all(9, x, v, t, ok, r, s, s1, e, e2);
}

TEST(op_permute) {
    musa_tensor *x = musa_arange(0, 24, 1, MUSA_DTYPE_INT64);
    musa_tensor *v = musa_view(x, 3, (int64_t[]){2, 3, 4});
    musa_tensor *p = musa_permute(v, 3, (int64_t[]){2, 0, -2});
    CHECK_SHAPE(p, 3, 4, 2, 3);
    CHECK(view_matches(x, p) && !musa_tensor_is_contiguous(p));
    CHECK_ERR(FAILS(musa_permute(v, 3, (int64_t[]){0, 0, 1})), MUSA_ERR_VALUE, "repeats");
    CHECK_ERR(FAILS(musa_permute(v, 2, (int64_t[]){0, 1})), MUSA_ERR_VALUE,
              "got 2 dims for a 3-d tensor");
    CHECK_ERR(FAILS(musa_permute(v, 3, (int64_t[]){0, 1, 3})), MUSA_ERR_INDEX,
              "dim 3 out of range");
    release_all(3, x, v, p);
}

TEST(op_slice) {
    musa_tensor *x = musa_arange(0, 20, 1, MUSA_DTYPE_FLOAT64);
    musa_tensor *v = musa_view(x, 2, (int64_t[]){4, 5});
    musa_tensor *s = musa_slice(v, 1, 1, 100, 2), *n = musa_slice(v, 0, -3, -1, 1);
    musa_tensor *e = musa_slice(v, 1, 4, 2, 1);
    CHECK_SHAPE(s, 2, 4, 2);
    CHECK_SHAPE(n, 2, 2, 5);
    CHECK_SHAPE(e, 2, 4, 0);
    CHECK(view_matches(x, s) && view_matches(x, n));
    /* writing through a view writes the base and bumps the shared version */
    uint64_t ver = musa_tensor_version(x);
    CHECK_OK(musa_fill_(s, -1));
    CHECK(musa_tensor_version(x) == ver + 1);
    double g;
    CHECK_OK(musa_tensor_get(v, (int64_t[]){2, 3}, &g));
    CHECK(g == -1);
    CHECK_ERR(FAILS(musa_slice(v, 1, 0, 3, 0)), MUSA_ERR_VALUE, "step must be positive");
    musa_tensor *z = musa_scalar(1, MUSA_DTYPE_FLOAT32);
    CHECK_ERR(FAILS(musa_slice(z, 0, 0, 1, 1)), MUSA_ERR_INDEX, "0-d");
    release_all(6, x, v, s, n, e, z);
}

TEST(op_select) {
    musa_tensor *x = musa_arange(0, 12, 1, MUSA_DTYPE_INT32);
    musa_tensor *v = musa_view(x, 2, (int64_t[]){3, 4});
    musa_tensor *r = musa_select(v, 0, -1), *c = musa_select(v, 1, 2);
    CHECK_SHAPE(r, 1, 4);
    CHECK_SHAPE(c, 1, 3);
    CHECK(view_matches(x, r) && view_matches(x, c));
    musa_tensor *e = musa_select(r, 0, 1);
    CHECK(e && musa_tensor_ndim(e) == 0);
    CHECK_ERR(FAILS(musa_select(v, 0, 3)), MUSA_ERR_INDEX,
              "[select] index 3 is out of bounds for dim 0 with size 3");
    CHECK_ERR(FAILS(musa_select(e, 0, 0)), MUSA_ERR_INDEX, "0-d");
    release_all(5, x, v, r, c, e);
}

TEST(op_expand) {
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT32, 2, (int64_t[]){3, 1}, -1, 1, L_CONTIG);
    musa_tensor *e = musa_expand(x, 3, (int64_t[]){2, -1, 4});
    CHECK_SHAPE(e, 3, 2, 3, 4);
    CHECK(musa_tensor_strides(e)[0] == 0 && musa_tensor_strides(e)[2] == 0);
    CHECK(view_matches(x, e));
    musa_tensor *b = musa_broadcast_to(x, 2, (int64_t[]){3, 0});
    CHECK_SHAPE(b, 2, 3, 0);
    CHECK_ERR(FAILS(musa_expand(x, 2, (int64_t[]){4, 4})), MUSA_ERR_VALUE,
              "[expand] the expanded size 4 must match the existing size 3 at dim 0");
    CHECK_ERR(FAILS(musa_expand(x, 1, (int64_t[]){3})), MUSA_ERR_VALUE,
              "cannot expand a 2-d tensor to 1 dims");
    CHECK_ERR(FAILS(musa_expand(x, 3, (int64_t[]){-1, 3, 1})), MUSA_ERR_VALUE, "new leading dim");
    release_all(3, x, e, b);
}

TEST(op_squeeze) {
    musa_tensor *x = musa_zeros(4, (int64_t[]){1, 3, 1, 2}, MUSA_DTYPE_FLOAT32);
    musa_tensor *a = musa_squeeze(x, 0, NULL), *b = musa_squeeze(x, 2, (int64_t[]){-2, 1});
    CHECK_SHAPE(a, 2, 3, 2);
    CHECK_SHAPE(b, 3, 1, 3, 2); /* dim 1 has size 3: left alone */
    CHECK_ERR(FAILS(musa_squeeze(x, 1, (int64_t[]){4})), MUSA_ERR_INDEX, "out of range");
    release_all(3, x, a, b);
}

TEST(op_unsqueeze) {
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT32, 2, (int64_t[]){3, 4}, -1, 1, L_CONTIG);
    musa_tensor *a = musa_unsqueeze(x, 0), *b = musa_unsqueeze(x, -1), *c = musa_unsqueeze(x, 1);
    CHECK_SHAPE(a, 3, 1, 3, 4);
    CHECK_SHAPE(b, 3, 3, 4, 1);
    CHECK_SHAPE(c, 3, 3, 1, 4);
    CHECK(view_matches(x, a) && view_matches(x, b) && view_matches(x, c));
    CHECK_ERR(FAILS(musa_unsqueeze(x, 3)), MUSA_ERR_INDEX, "out of range");
    musa_tensor *big = musa_zeros(8, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1}, MUSA_DTYPE_FLOAT32);
    CHECK_ERR(FAILS(musa_unsqueeze(big, 0)), MUSA_ERR_VALUE, "at most 8 dims");
    release_all(5, x, a, b, c, big);
}

TEST(op_as_strided) {
    musa_tensor *x = musa_arange(0, 10, 1, MUSA_DTYPE_FLOAT32);
    musa_tensor *w = musa_as_strided(x, 2, (int64_t[]){4, 3}, (int64_t[]){2, 1}, 1); /* windows */
    CHECK_SHAPE(w, 2, 4, 3);
    double *v = values(w);
    CHECK(v[0] == 1 && v[2] == 3 && v[3] == 3 && v[11] == 9);
    free(v);
    CHECK_ERR(FAILS(musa_as_strided(x, 2, (int64_t[]){4, 3}, (int64_t[]){3, 1}, 1)), MUSA_ERR_VALUE,
              "reaches element 12 of a storage with 10 elements");
    CHECK_ERR(FAILS(musa_as_strided(x, 1, (int64_t[]){2}, (int64_t[]){-1}, 5)), MUSA_ERR_VALUE,
              "negative stride");
    release_all(2, x, w);
}

TEST(view_dtype_reinterprets_memory) {
    musa_tensor *x = musa_arange(0, 8, 1, MUSA_DTYPE_FLOAT32);
    musa_tensor *bits = musa_view_dtype(x, MUSA_DTYPE_INT32);
    CHECK_SHAPE(bits, 1, 8);
    int64_t one;
    musa_tensor *e1 = musa_select(bits, 0, 1);
    CHECK_OK(musa_tensor_item_int(e1, &one));
    CHECK(one == 0x3f800000); /* 1.0f */
    musa_tensor *bytes = musa_view_dtype(x, MUSA_DTYPE_UINT8),
                *wide = musa_view_dtype(x, MUSA_DTYPE_FLOAT64);
    CHECK_SHAPE(bytes, 1, 32);
    CHECK_SHAPE(wide, 1, 4);
    /* a column slice of a matrix keeps whole float64 elements only at even offsets */
    musa_tensor *m = musa_reshape(x, 2, (int64_t[]){2, 4});
    musa_tensor *even = musa_slice(m, 1, 2, 4, 1), *odd = musa_slice(m, 1, 1, 3, 1);
    musa_tensor *ew = musa_view_dtype(even, MUSA_DTYPE_FLOAT64);
    CHECK_SHAPE(ew, 2, 2, 1);
    CHECK(musa_tensor_offset(ew) == 1);
    CHECK_ERR(FAILS(musa_view_dtype(odd, MUSA_DTYPE_FLOAT64)), MUSA_ERR_VALUE,
              "storage offset (1) and the strides");
    musa_tensor *t = musa_transpose(m, 0, 1);
    CHECK_ERR(FAILS(musa_view_dtype(t, MUSA_DTYPE_INT8)), MUSA_ERR_VALUE,
              "last dim to have stride 1");
    musa_tensor *s = musa_scalar(1, MUSA_DTYPE_FLOAT32);
    CHECK_ERR(FAILS(musa_view_dtype(s, MUSA_DTYPE_FLOAT64)), MUSA_ERR_VALUE, "0-d");
    musa_tensor *three = musa_arange(0, 3, 1, MUSA_DTYPE_FLOAT32);
    CHECK_ERR(FAILS(musa_view_dtype(three, MUSA_DTYPE_FLOAT64)), MUSA_ERR_VALUE, "multiple of 2");
    CHECK_ERR(FAILS(musa_view_dtype(x, (musa_dtype)99)), MUSA_ERR_VALUE, "invalid dtype");
    release_all(11, x, bits, e1, bytes, wide, m, even, odd, ew, t, s);
    musa_tensor_release(three);
}

/* Regression (fuzz_op_call, as-strided-empty-view-offset-past-storage): an
 * empty view took any offset and its data pointer was computed from it,
 * overflowing (UBSan). An empty view's offset is now clamped to its
 * storage's end; one that addresses elements is still bounds-checked. */
TEST(empty_views_stay_inside_their_storage) {
    musa_tensor *x = musa_arange(0, 4, 1, MUSA_DTYPE_INT32);
    musa_tensor *e =
        musa_as_strided(x, 3, (int64_t[]){0, 0, 0}, (int64_t[]){0, 0, 0}, INT64_MAX - 1);
    CHECK(e && musa_tensor_numel(e) == 0 && musa_tensor_offset(e) == 4);
    musa_tensor *c = musa_contiguous(e), *s = musa_sum(e, 0, NULL, false);
    double v = -1;
    CHECK(c && s);
    CHECK_OK(musa_tensor_item(s, &v));
    CHECK(v == 0);
    CHECK_ERR(FAILS(musa_as_strided(x, 1, (int64_t[]){1}, (int64_t[]){1}, 4)), MUSA_ERR_VALUE,
              "[view] view reaches element 4 of a storage with 4 elements");
    /* index 1 of a (0, 3) tensor: an empty view at offset 1 of an empty storage */
    musa_tensor *z = musa_zeros(2, (int64_t[]){0, 3}, MUSA_DTYPE_FLOAT32);
    musa_tensor *col = musa_select(z, 1, 1);
    CHECK(col && musa_tensor_numel(col) == 0 && musa_tensor_offset(col) == 0);
    /* a step past the end of the dim: one element */
    musa_tensor *sl = musa_slice(x, 0, 1, INT64_MAX, INT64_MAX);
    CHECK(sl && musa_tensor_numel(sl) == 1);
    release_all(6, x, e, c, s, z, col);
    musa_tensor_release(sl);
    /* (as-strided-scatter-empty-region-offset) an empty region with any
     * offset writes nothing; the backward of such a view made one */
    musa_tensor *f = musa_ones(1, (int64_t[]){3}, MUSA_DTYPE_FLOAT32);
    musa_tensor *none = musa_zeros(1, (int64_t[]){0}, MUSA_DTYPE_FLOAT32);
    musa_tensor *y = musa_as_strided_scatter(f, none, 1, (int64_t[]){0}, (int64_t[]){1}, INT64_MAX);
    double *yv = values(y);
    CHECK(yv && yv[0] == 1 && yv[2] == 1);
    free(yv);
    CHECK_OK(musa_tensor_set_requires_grad(f, true));
    musa_tensor *ev = musa_as_strided(f, 1, (int64_t[]){0}, (int64_t[]){1}, INT64_MAX - 1);
    musa_tensor *es = musa_sum(ev, 0, NULL, false);
    CHECK_OK(musa_backward(1, &es, NULL, false, false));
    musa_tensor *g = musa_tensor_grad(f);
    double *gv = values(g);
    CHECK(gv && gv[0] == 0 && gv[1] == 0 && gv[2] == 0);
    free(gv);
    release_all(6, f, none, y, ev, es, g);
}

/* Regression (fuzz_op_call, size-one-dim-huge-stride): a size-1 dim may
 * have any stride (slicing with step 2^63 - 1 keeps one element), and the
 * kernels scaled it to bytes: signed overflow in the reductions. Such
 * strides are clamped to the storage's length. */
TEST(size_one_dims_with_huge_strides) {
    musa_tensor *x = musa_arange(0, 16, 1, MUSA_DTYPE_FLOAT64);
    musa_tensor *a = musa_slice(x, 0, -1, INT64_MAX, INT64_MAX);
    musa_tensor *b = musa_as_strided(x, 2, (int64_t[]){1, 2}, (int64_t[]){INT64_MAX, 3}, 1);
    CHECK(a && b && musa_tensor_strides(a)[0] <= 16 && musa_tensor_strides(b)[0] <= 16);
    musa_tensor *sa = musa_sum(a, 0, NULL, false), *sb = musa_sum(b, 1, (int64_t[]){1}, false);
    double va = 0, vb = 0;
    CHECK(sa && sb);
    CHECK_OK(musa_tensor_item(sa, &va));
    CHECK_OK(musa_tensor_item(sb, &vb));
    CHECK(va == 15 && vb == 1 + 4);
    double mem[3] = {1, 2, 3};
    musa_tensor *c = musa_from_blob(mem, 2, (int64_t[]){1, 3}, (int64_t[]){INT64_MAX, 1},
                                    MUSA_DTYPE_FLOAT64, NULL, NULL);
    musa_tensor *sc = c ? musa_sum(c, 0, NULL, false) : NULL;
    double vc = 0;
    CHECK(sc);
    CHECK_OK(musa_tensor_item(sc, &vc));
    CHECK(vc == 6 && musa_tensor_strides(c)[0] <= 3);
    release_all(7, x, a, b, sa, sb, c, sc);
}

TEST(op_as_strided_scatter) {
    musa_dtype dts[3] = {MUSA_DTYPE_FLOAT32, MUSA_DTYPE_INT64, MUSA_DTYPE_FLOAT16};
    for (int k = 0; k < 3; k++) {
        musa_tensor *r = musa_arange(0, 12, 1, MUSA_DTYPE_FLOAT64), *x = musa_cast(r, dts[k]);
        musa_tensor *x2 = musa_reshape(x, 2, (int64_t[]){3, 4});
        musa_tensor *xt = musa_transpose(x2, 0, 1); /* (4, 3), strided */
        release_all(2, r, x2);
        musa_tensor *src =
            from_list(MUSA_DTYPE_FLOAT64, 2, (int64_t[]){2, 2}, (double[]){-1, -2, -3, -4});
        /* region: rows 1..2, cols 0..1 of xt's row-major copy (4 x 3) */
        musa_tensor *y =
            musa_as_strided_scatter(xt, src, 2, (int64_t[]){2, 2}, (int64_t[]){3, 1}, 3);
        CHECK_MSG(y, "%s", musa_last_error());
        CHECK_SHAPE(y, 2, 4, 3);
        CHECK(musa_tensor_dtype(y) == dts[k]);
        double *v = values(y), *xv = values(xt);
        for (int i = 0; i < 12; i++) {
            bool in = (i >= 3 && i <= 4) || (i >= 6 && i <= 7);
            double want = in ? -1 - ((i >= 6) * 2 + (i % 3)) : xv[i];
            CHECK_MSG(v[i] == want, "dtype %d element %d = %g, want %g", k, i, v[i], want);
        }
        free(v), free(xv);
        release_all(4, x, xt, src, y);
    }
    musa_tensor *x = musa_zeros(1, (int64_t[]){4}, MUSA_DTYPE_FLOAT32),
                *s = musa_ones(1, (int64_t[]){3}, MUSA_DTYPE_FLOAT32);
    CHECK_ERR(FAILS(musa_as_strided_scatter(x, s, 1, (int64_t[]){3}, (int64_t[]){2}, 0)),
              MUSA_ERR_VALUE, "reaches element 4 of an input with 4 elements");
    CHECK_ERR(FAILS(musa_as_strided_scatter(x, s, 1, (int64_t[]){2}, (int64_t[]){1}, 0)),
              MUSA_ERR_VALUE, "does not match the region shape");
    /* regression (fuzz, as-strided-scatter-region-overflow): a region whose
     * last element is past 2^63 is refused, not computed with overflow */
    CHECK_ERR(
        FAILS(musa_as_strided_scatter(x, s, 1, (int64_t[]){3}, (int64_t[]){INT64_MAX / 2 + 2}, 0)),
        MUSA_ERR_VALUE, "[as_strided_scatter] the region reaches past element 2^63");
    release_all(2, x, s);
}

TEST(composite_shape_helpers) {
    musa_tensor *x = musa_arange(0, 24, 1, MUSA_DTYPE_FLOAT32);
    musa_tensor *v = musa_view(x, 4, (int64_t[]){2, 3, 2, 2});
    musa_tensor *f = musa_flatten(v, 1, -2);
    CHECK_SHAPE(f, 3, 2, 6, 2);
    musa_tensor *t = musa_transpose(v, 0, 3), *c = musa_contiguous(t), *c2 = musa_contiguous(v);
    CHECK(musa_tensor_is_contiguous(c) && !musa_tensor_is_contiguous(t) && c2 == v);
    double *tv = values(t), *cv = values(c);
    CHECK_CLOSE("contiguous", MUSA_DTYPE_FLOAT32, cv, tv, 24);
    free(tv), free(cv);
    musa_tensor *pieces[8];
    int n = musa_split(x, 7, 0, 8, pieces);
    CHECK(n == 4 && musa_tensor_numel(pieces[3]) == 3);
    for (int i = 0; i < n; i++) musa_tensor_release(pieces[i]);
    n = musa_chunk(x, 5, 0, 8, pieces);
    CHECK(n == 5 && musa_tensor_numel(pieces[0]) == 5 && musa_tensor_numel(pieces[4]) == 4);
    for (int i = 0; i < n; i++) musa_tensor_release(pieces[i]);
    CHECK_ERR(musa_split(x, 0, 0, 8, pieces) >= 0, MUSA_ERR_VALUE, "split_size must be positive");
    release_all(6, x, v, f, t, c, c2);
}

TEST(op_detach) {
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT32, 2, (int64_t[]){3, 4}, -1, 1, L_TRANSPOSED);
    CHECK_OK(musa_tensor_set_requires_grad(x, true));
    musa_tensor *y = musa_exp(x), *d = musa_detach(y);
    CHECK(d && musa_tensor_shares_storage(d, y) && !musa_tensor_requires_grad(d));
    CHECK(view_matches(y, d) && musa_tensor_offset(d) == musa_tensor_offset(y));
    CHECK(musa_tensor_strides(d)[0] == musa_tensor_strides(y)[0]);
    CHECK_ERR(FAILS(musa_detach(NULL)), MUSA_ERR_VALUE, "[detach] input 0 is NULL");
    release_all(3, x, y, d);
}
