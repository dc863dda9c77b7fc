/*
 * movement.c - data movement ops: cat, gather, scatter(_add),
 * index_select, index_add, pad, flip, tril/triu, cumsum, sort, topk, and
 * the composites stack, masked_fill, repeat and one_hot.
 */
#include "../util.h"

TEST(op_cat) {
    for (int di = 0; di < 9; di++) {
        musa_dtype dt = ALL_DTYPES[di];
        musa_tensor *a = rnd(dt, 2, (int64_t[]){2, 3}, -5, 5, L_CONTIG);
        musa_tensor *b = rnd(dt, 2, (int64_t[]){4, 3}, -5, 5, L_TRANSPOSED);
        musa_tensor *e = musa_zeros(2, (int64_t[]){0, 3}, dt);
        musa_tensor *list[3] = {a, e, b};
        musa_tensor *y = musa_cat(3, list, 0);
        CHECK_SHAPE(y, 2, 6, 3);
        double *av = values(a), *bv = values(b), *yv = values(y), want[18];
        for (int i = 0; i < 6; i++) want[i] = av[i];
        for (int i = 0; i < 12; i++) want[6 + i] = bv[i];
        CHECK_CLOSE("cat", dt, yv, want, 18);
        free(av), free(bv), free(yv);
        release_all(4, a, b, e, y);
    }
    musa_tensor *a = musa_ones(2, (int64_t[]){2, 2}, MUSA_DTYPE_INT32);
    musa_tensor *b = musa_zeros(2, (int64_t[]){2, 3}, MUSA_DTYPE_FLOAT32);
    musa_tensor *l[2] = {a, b}, *y = musa_cat(2, l, -1);
    CHECK(y && musa_tensor_dtype(y) == MUSA_DTYPE_FLOAT32);
    CHECK_SHAPE(y, 2, 2, 5);
    CHECK_ERR(FAILS(musa_cat(2, l, 0)), MUSA_ERR_VALUE,
              "[cat] tensor 1 has shape (2, 3); expected (2, 2) except in dim 0");
    CHECK_ERR(FAILS(musa_cat(0, l, 0)), MUSA_ERR_VALUE, "non-empty");
    musa_tensor *st = musa_stack(2, (musa_tensor *[]){a, a}, 1);
    CHECK_SHAPE(st, 3, 2, 2, 2);
    release_all(4, a, b, y, st);
}

TEST(op_gather) {
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT32, 2, (int64_t[]){3, 4}, -5, 5, L_TRANSPOSED);
    double iv[6] = {0, 3, 3, 2, 1, 1};
    musa_tensor *i = from_list(MUSA_DTYPE_INT64, 2, (int64_t[]){3, 2}, iv);
    musa_tensor *y = musa_gather(x, 1, i);
    CHECK_SHAPE(y, 2, 3, 2);
    double *xv = values(x), *yv = values(y), want[6];
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 2; c++) want[r * 2 + c] = xv[r * 4 + (int)iv[r * 2 + c]];
    CHECK_CLOSE("gather", MUSA_DTYPE_FLOAT32, yv, want, 6);
    free(xv), free(yv);
    musa_tensor *bad = from_list(MUSA_DTYPE_INT64, 2, (int64_t[]){1, 1}, (double[]){4});
    CHECK_ERR(FAILS(musa_gather(x, 1, bad)), MUSA_ERR_INDEX,
              "[gather] index 4 is out of bounds for a dim of size 4");
    musa_tensor *neg = from_list(MUSA_DTYPE_INT64, 2, (int64_t[]){1, 1}, (double[]){-1});
    CHECK_ERR(FAILS(musa_gather(x, 1, neg)), MUSA_ERR_INDEX, /* as PyTorch: no wrapping */
              "[gather] index -1 is out of bounds for a dim of size 4");
    CHECK_ERR(FAILS(musa_scatter(x, 1, neg, x)), MUSA_ERR_INDEX,
              "[scatter] index -1 is out of bounds for a dim of size 4");
    musa_tensor *fi = musa_zeros(2, (int64_t[]){1, 1}, MUSA_DTYPE_FLOAT32);
    CHECK_ERR(FAILS(musa_gather(x, 1, fi)), MUSA_ERR_TYPE, "index must be an integer tensor");
    musa_tensor *big = musa_zeros(2, (int64_t[]){4, 1}, MUSA_DTYPE_INT64);
    CHECK_ERR(FAILS(musa_gather(x, 1, big)), MUSA_ERR_VALUE, "exceeds input size");
    release_all(7, x, i, y, bad, neg, fi, big);
}

typedef enum { SCAT_SET, SCAT_ADD, SCAT_PROD, SCAT_AMAX, SCAT_AMIN } sckind;
static const char *const SCAT_NAME[] = {"scatter", "scatter_add", "scatter_prod", "scatter_amax",
                                        "scatter_amin"};
static musa_tensor *(*const SCAT_FN[])(musa_tensor *, int64_t, musa_tensor *, musa_tensor *) = {
    musa_scatter, musa_scatter_add, musa_scatter_prod, musa_scatter_amax, musa_scatter_amin};

static void check_scatter(sckind k) {
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT64, 2, (int64_t[]){3, 4}, -5, 5, L_CONTIG);
    double iv[6] = {0, 2, 2, 2, 1, 0}; /* (0, 2) and (2, 0) are hit twice */
    musa_tensor *i = from_list(MUSA_DTYPE_INT64, 2, (int64_t[]){2, 3}, iv);
    musa_tensor *src = rnd(MUSA_DTYPE_FLOAT64, 2, (int64_t[]){2, 3}, -5, 5, L_TRANSPOSED);
    musa_tensor *y = SCAT_FN[k](x, 0, i, src);
    CHECK(y);
    double *xv = values(x), *sv = values(src), *yv = values(y), want[12];
    memcpy(want, xv, sizeof want);
    for (int r = 0; r < 2; r++)
        for (int c = 0; c < 3; c++) {
            double *w = &want[(int)iv[r * 3 + c] * 4 + c], v = sv[r * 3 + c];
            *w = k == SCAT_SET    ? v
                 : k == SCAT_ADD  ? *w + v
                 : k == SCAT_PROD ? *w * v
                 : k == SCAT_AMAX ? fmax(*w, v)
                                  : fmin(*w, v);
        }
    CHECK_CLOSE(SCAT_NAME[k], MUSA_DTYPE_FLOAT64, yv, want, 12);
    /* x itself is untouched */
    double *x2 = values(x);
    CHECK(memcmp(x2, xv, sizeof want) == 0);
    free(xv), free(sv), free(yv), free(x2);
    musa_tensor *bad = from_list(MUSA_DTYPE_INT64, 2, (int64_t[]){1, 1}, (double[]){-4});
    CHECK_ERR(FAILS(SCAT_FN[k](x, 0, bad, src)), MUSA_ERR_INDEX, "index -4 is out of bounds");
    release_all(5, x, i, src, y, bad);
}

TEST(op_scatter) {
    check_scatter(SCAT_SET);
}
TEST(op_scatter_add) {
    check_scatter(SCAT_ADD);
}
TEST(op_scatter_prod) {
    check_scatter(SCAT_PROD);
}
TEST(op_scatter_amax) {
    check_scatter(SCAT_AMAX);
}
TEST(op_scatter_amin) {
    check_scatter(SCAT_AMIN);
}

/* amax/amin: a NaN wins, from either side; integers and bool */
TEST(scatter_extrema_nan_and_integers) {
    musa_tensor *x = from_list(MUSA_DTYPE_FLOAT32, 1, S(3), (double[]){NAN, 1, 2});
    musa_tensor *i = from_list(MUSA_DTYPE_INT64, 1, S(3), (double[]){0, 1, 1});
    musa_tensor *s = from_list(MUSA_DTYPE_FLOAT32, 1, S(3), (double[]){5, NAN, 7});
    musa_tensor *mx = musa_scatter_amax(x, 0, i, s), *mn = musa_scatter_amin(x, 0, i, s);
    double *a = values(mx), *b = values(mn);
    CHECK(isnan(a[0]) && isnan(a[1]) && a[2] == 2 && isnan(b[0]) && isnan(b[1]) && b[2] == 2);
    free(a), free(b);
    musa_tensor *xi = from_list(MUSA_DTYPE_INT8, 1, S(2), (double[]){-100, 3});
    musa_tensor *ii = from_list(MUSA_DTYPE_INT64, 1, S(3), (double[]){0, 0, 1});
    musa_tensor *si = from_list(MUSA_DTYPE_INT8, 1, S(3), (double[]){-120, 90, 50});
    musa_tensor *pi = musa_scatter_prod(xi, 0, ii, si), *ai = musa_scatter_amin(xi, 0, ii, si);
    int64_t *pv = ivalues(pi), *av = ivalues(ai);
    /* -100 * -120 * 90 wraps modulo 256 */
    CHECK(pv[0] == (int8_t)(uint8_t)(uint64_t)(-100LL * -120 * 90) && pv[1] == 150 - 256);
    CHECK(av[0] == -120 && av[1] == 3);
    free(pv), free(av);
    release_all(10, x, i, s, mx, mn, xi, ii, si, pi, ai);
}

/* Regression: the gather/scatter kernels kept the first bad index in an
 * atomic whose "none seen" value was INT64_MIN, so an index equal to
 * INT64_MIN was skipped without an error: gather returned uninitialised
 * memory and scatter silently did nothing. Every op must refuse it. */
TEST(indices_equal_to_int64_min_are_refused) {
    const int64_t lo = INT64_MIN;
    musa_tensor *x = musa_ones(2, (int64_t[]){2, 3}, MUSA_DTYPE_FLOAT32);
    musa_tensor *i = musa_from_data((int64_t[]){0, lo, 1}, 2, (int64_t[]){1, 3}, MUSA_DTYPE_INT64);
    musa_tensor *src = musa_full(2, (int64_t[]){1, 3}, 5, MUSA_DTYPE_FLOAT32);
    CHECK_ERR(FAILS(musa_gather(x, 0, i)), MUSA_ERR_INDEX,
              "[gather] index -9223372036854775808 is out of bounds for a dim of size 2");
    CHECK_ERR(FAILS(musa_scatter(x, 0, i, src)), MUSA_ERR_INDEX,
              "[scatter] index -9223372036854775808 is out of bounds");
    CHECK_ERR(FAILS(musa_scatter_add(x, 0, i, src)), MUSA_ERR_INDEX,
              "[scatter_add] index -9223372036854775808 is out of bounds");
    musa_tensor *i1 = musa_from_data((int64_t[]){1, lo}, 1, (int64_t[]){2}, MUSA_DTYPE_INT64);
    CHECK_ERR(FAILS(musa_index_select(x, 1, i1)), MUSA_ERR_INDEX, "index -9223372036854775808");
    musa_tensor *w = musa_ones(2, (int64_t[]){4, 2}, MUSA_DTYPE_FLOAT32);
    CHECK_ERR(FAILS(musa_embedding(w, i1, -1)), MUSA_ERR_INDEX,
              "[embedding] index out of range: indices must be in [0, 4)");
    /* INT64_MAX too, and a good index after a bad one still fails */
    musa_tensor *i2 =
        musa_from_data((int64_t[]){INT64_MAX, 0, 0}, 2, (int64_t[]){1, 3}, MUSA_DTYPE_INT64);
    CHECK_ERR(FAILS(musa_gather(x, 0, i2)), MUSA_ERR_INDEX, "index 9223372036854775807");
    release_all(6, x, i, src, i1, w, i2);
}

/* Regression (fuzz_op_call, scatter-add-0d-src-1d-index): a 0-d src (or
 * index) next to a 1-d tensor skipped the shape check, and the kernel
 * walked the index's shape through strides the 0-d src does not have
 * (SEGV). A 0-d tensor now counts as one element of size 1. */
TEST(scatter_with_a_0d_operand) {
    musa_tensor *x = musa_zeros(1, (int64_t[]){3}, MUSA_DTYPE_INT8);
    musa_tensor *i3 = musa_from_data((int64_t[]){0, 1, 2}, 1, (int64_t[]){3}, MUSA_DTYPE_INT64);
    musa_tensor *s0 = musa_scalar(5, MUSA_DTYPE_FLOAT32);
    CHECK_ERR(FAILS(musa_scatter_add(x, 0, i3, s0)), MUSA_ERR_VALUE,
              "[scatter_add] index size 3 exceeds src size 1 in dim 0");
    CHECK_ERR(FAILS(musa_scatter(x, 0, i3, s0)), MUSA_ERR_VALUE, "exceeds src size 1");
    /* one index, one src element: fine */
    musa_tensor *i1 = musa_from_data((int64_t[]){2}, 1, (int64_t[]){1}, MUSA_DTYPE_INT64);
    musa_tensor *y = musa_scatter_add(x, 0, i1, s0);
    double *yv = values(y);
    CHECK(yv && yv[0] == 0 && yv[1] == 0 && yv[2] == 5);
    free(yv);
    /* a 0-d index against an empty 1-d src */
    musa_tensor *i0 = musa_from_data((int64_t[]){1}, 0, NULL, MUSA_DTYPE_INT64);
    musa_tensor *e = musa_zeros(1, (int64_t[]){0}, MUSA_DTYPE_INT8);
    CHECK_ERR(FAILS(musa_scatter(x, 0, i0, e)), MUSA_ERR_VALUE, "index size 1 exceeds src size 0");
    release_all(7, x, i3, s0, i1, y, i0, e);
}

TEST(op_index_select) {
    /* strided rows, and contiguous ones (the row-copy path over dim 0) */
    for (int lay = 0; lay < 2; lay++) {
        musa_tensor *x =
            rnd(MUSA_DTYPE_INT32, 2, (int64_t[]){4, 3}, -9, 9, lay ? L_CONTIG : L_TRANSPOSED);
        musa_tensor *i = from_list(MUSA_DTYPE_INT32, 1, (int64_t[]){5}, (double[]){3, 0, 0, -1, 2});
        musa_tensor *y = musa_index_select(x, 0, i);
        CHECK_SHAPE(y, 2, 5, 3);
        double *xv = values(x), *yv = values(y), want[15];
        int rows[5] = {3, 0, 0, 3, 2};
        for (int r = 0; r < 5; r++)
            for (int c = 0; c < 3; c++) want[r * 3 + c] = xv[rows[r] * 3 + c];
        CHECK_CLOSE("index_select", MUSA_DTYPE_INT32, yv, want, 15);
        free(xv), free(yv);
        /* a bad index after good ones fails, whatever the path */
        musa_tensor *bad = from_list(MUSA_DTYPE_INT64, 1, (int64_t[]){3}, (double[]){0, 1, 4});
        CHECK_ERR(FAILS(musa_index_select(x, 0, bad)), MUSA_ERR_INDEX,
                  "[index_select] index 4 is out of bounds");
        musa_tensor *neg = from_list(MUSA_DTYPE_INT64, 1, (int64_t[]){1}, (double[]){-5});
        CHECK_ERR(FAILS(musa_index_select(x, 0, neg)), MUSA_ERR_INDEX, "index -5 is out of bounds");
        musa_tensor *i2 = musa_zeros(2, (int64_t[]){1, 1}, MUSA_DTYPE_INT64);
        CHECK_ERR(FAILS(musa_index_select(x, 0, i2)), MUSA_ERR_VALUE, "0-d or 1-d");
        release_all(6, x, i, y, bad, neg, i2);
    }
    /* 3-d rows of 2 x 3 bfloat16, a 0-d index, an empty index */
    musa_tensor *x = rnd(MUSA_DTYPE_BFLOAT16, 3, (int64_t[]){4, 2, 3}, -9, 9, L_CONTIG);
    musa_tensor *i0 = from_list(MUSA_DTYPE_INT64, 0, NULL, (double[]){-2});
    musa_tensor *y = musa_index_select(x, 0, i0);
    CHECK_SHAPE(y, 3, 1, 2, 3);
    double *xv = values(x), *yv = values(y);
    CHECK(xv && yv);
    for (int k = 0; xv && yv && k < 6; k++) CHECK(yv[k] == xv[2 * 6 + k]);
    free(xv), free(yv);
    musa_tensor *ie = musa_zeros(1, (int64_t[]){0}, MUSA_DTYPE_INT64);
    musa_tensor *ye = musa_index_select(x, 0, ie);
    CHECK_SHAPE(ye, 3, 0, 2, 3);
    release_all(5, x, i0, y, ie, ye);
}

TEST(op_index_add) {
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT32, 2, (int64_t[]){3, 4}, -5, 5, L_CONTIG);
    musa_tensor *i = from_list(MUSA_DTYPE_INT64, 1, (int64_t[]){3}, (double[]){1, 1, 3});
    musa_tensor *src = rnd(MUSA_DTYPE_FLOAT32, 2, (int64_t[]){3, 3}, -5, 5, L_TRANSPOSED);
    musa_tensor *y = musa_index_add(x, 1, i, src);
    double *xv = values(x), *sv = values(src), *yv = values(y), want[12];
    memcpy(want, xv, sizeof want);
    int cols[3] = {1, 1, 3};
    for (int r = 0; r < 3; r++)
        for (int k = 0; k < 3; k++) want[r * 4 + cols[k]] += sv[r * 3 + k];
    CHECK_CLOSE("index_add", MUSA_DTYPE_FLOAT32, yv, want, 12);
    free(xv), free(sv), free(yv);
    musa_tensor *bsrc = musa_zeros(2, (int64_t[]){3, 2}, MUSA_DTYPE_FLOAT32);
    CHECK_ERR(FAILS(musa_index_add(x, 1, i, bsrc)), MUSA_ERR_VALUE,
              "source shape (3, 2) must match");
    musa_tensor *bad = from_list(MUSA_DTYPE_INT64, 1, (int64_t[]){3}, (double[]){0, 9, 1});
    CHECK_ERR(FAILS(musa_index_add(x, 1, bad, src)), MUSA_ERR_INDEX, "index 9");
    release_all(6, x, i, src, y, bsrc, bad);
}

/* index_add over dim 0 of contiguous rows (the fast path: column ranges
 * split over threads, each adding every index's row in index order) gives
 * the bits of the general path, which a transposed source takes, for rows
 * wide enough for several tasks. Repeated indices add in index order:
 * 1 + 1e8 - 1e8 is 0 in float32 (the reverse order gives 1); int8 wraps
 * and bfloat16 rounds after each add. */
TEST(index_add_rows_in_index_order) {
    const int64_t cols = 70001, n = 4;
    musa_tensor *i = from_list(MUSA_DTYPE_INT64, 1, (int64_t[]){n}, (double[]){2, -1, 0, 2});
    musa_dtype dts[3] = {MUSA_DTYPE_FLOAT32, MUSA_DTYPE_BFLOAT16, MUSA_DTYPE_INT8};
    double *sv = malloc(sizeof(double) * (size_t)(n * cols));
    for (int t = 0; t < 3; t++) {
        musa_dtype dt = dts[t];
        double big = dt == MUSA_DTYPE_INT8 ? 100 : 1e8, one = dt == MUSA_DTYPE_INT8 ? 100 : 1;
        for (int64_t c = 0; c < cols; c++) /* stored (cols, n): src[k][c] = sv[c * n + k] */
            sv[c * n + 0] = one + (double)(c % 3), sv[c * n + 1] = big,
                       sv[c * n + 2] = (double)(c % 7), sv[c * n + 3] = -big;
        musa_tensor *x = musa_zeros(2, (int64_t[]){3, cols}, dt);
        musa_tensor *st = from_list(dt, 2, (int64_t[]){cols, n}, sv);
        musa_tensor *sview = musa_transpose(st, 0, 1), *src = musa_contiguous(sview);
        musa_tensor *y = musa_index_add(x, 0, i, src), *yg = musa_index_add(x, 0, i, sview);
        double *yv = values(y), *gv = values(yg);
        CHECK(memcmp(yv, gv, sizeof(double) * (size_t)(3 * cols)) == 0);
        if (dt == MUSA_DTYPE_FLOAT32) CHECK(yv[2 * cols] == 0 && yv[0] == 0);
        if (dt == MUSA_DTYPE_INT8) CHECK(yv[2 * cols] == (double)(int8_t)(100 + 100 - 100));
        free(yv), free(gv);
        release_all(6, x, st, sview, src, y, yg);
    }
    free(sv);
    musa_tensor_release(i);
}

/* Regression (fuzz_op_call, index-add-0d-input-short-src): a 0-d input with
 * a 1-d source skipped the source's length check; the kernel read one
 * source element per index past the end of a shorter source. */
TEST(index_add_into_a_0d_input) {
    musa_tensor *x = musa_scalar(1, MUSA_DTYPE_INT64);
    musa_tensor *i = musa_zeros(1, (int64_t[]){16}, MUSA_DTYPE_INT64);
    musa_tensor *e = musa_zeros(1, (int64_t[]){0}, MUSA_DTYPE_UINT8);
    CHECK_ERR(FAILS(musa_index_add(x, 0, i, e)), MUSA_ERR_VALUE,
              "[index_add] source shape (0,) must match input shape () with 16 rows in dim 0");
    musa_tensor *s = musa_ones(1, (int64_t[]){16}, MUSA_DTYPE_INT64);
    musa_tensor *y = musa_index_add(x, 0, i, s);
    int64_t v = 0;
    CHECK(y);
    CHECK_OK(musa_tensor_item_int(y, &v));
    CHECK(v == 17);
    release_all(5, x, i, e, s, y);
}

TEST(op_pad) {
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT32, 2, (int64_t[]){3, 4}, -5, 5, L_TRANSPOSED);
    musa_tensor *y = musa_pad(x, 4, (int64_t[]){1, 2, -1, 1}, 7); /* last dim (1,2), dim 0 (-1,1) */
    CHECK_SHAPE(y, 2, 3, 7);
    double *xv = values(x), *yv = values(y);
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 7; c++) {
            int sr = r + 1, sc = c - 1;
            double w = (sr < 3 && sc >= 0 && sc < 4) ? xv[sr * 4 + sc] : 7;
            CHECK_MSG(yv[r * 7 + c] == w, "pad (%d,%d) = %g, want %g", r, c, yv[r * 7 + c], w);
        }
    free(xv), free(yv);
    CHECK_ERR(FAILS(musa_pad(x, 3, (int64_t[]){1, 1, 1}, 0)), MUSA_ERR_VALUE, "even number");
    CHECK_ERR(FAILS(musa_pad(x, 2, (int64_t[]){-3, -2}, 0)), MUSA_ERR_VALUE, "negative");
    /* regression (fuzz): pads whose sum overflows int64 */
    CHECK_ERR(FAILS(musa_pad(x, 2, (int64_t[]){INT64_MAX, 1}, 0)), MUSA_ERR_VALUE,
              "[pad] padding (9223372036854775807, 1) overflows dim 1");
    CHECK_ERR(FAILS(musa_pad(x, 2, (int64_t[]){INT64_MIN, -5}, 0)), MUSA_ERR_VALUE, "overflows");
    release_all(2, x, y);
}

TEST(op_flip) {
    musa_tensor *x = rnd(MUSA_DTYPE_INT64, 3, (int64_t[]){2, 3, 4}, -9, 9, L_STRIDED);
    musa_tensor *y = musa_flip(x, 2, (int64_t[]){0, -1});
    double *xv = values(x), *yv = values(y);
    for (int i = 0; i < 24; i++) {
        int64_t idx[3];
        unravel(i, 3, (int64_t[]){2, 3, 4}, idx);
        idx[0] = 1 - idx[0], idx[2] = 3 - idx[2];
        CHECK(yv[i] == xv[ravel(3, (int64_t[]){2, 3, 4}, idx)]);
    }
    free(xv), free(yv);
    CHECK_ERR(FAILS(musa_flip(x, 2, (int64_t[]){1, 1})), MUSA_ERR_VALUE, "more than once");
    release_all(2, x, y);
}

static void check_tri(bool lower) {
    for (int64_t k = -2; k <= 2; k++) {
        musa_tensor *x = rnd(MUSA_DTYPE_FLOAT32, 3, (int64_t[]){2, 3, 4}, 1, 5, L_TRANSPOSED);
        musa_tensor *y = lower ? musa_tril(x, k) : musa_triu(x, k);
        double *xv = values(x), *yv = values(y);
        for (int i = 0; i < 24; i++) {
            int r = (i / 4) % 3, c = i % 4;
            bool keep = lower ? c - r <= k : c - r >= k;
            CHECK(yv[i] == (keep ? xv[i] : 0));
        }
        free(xv), free(yv);
        release_all(2, x, y);
    }
    musa_tensor *v = musa_zeros(1, (int64_t[]){3}, MUSA_DTYPE_FLOAT32);
    CHECK_ERR(FAILS(lower ? musa_tril(v, 0) : musa_triu(v, 0)), MUSA_ERR_VALUE, "at least 2 dims");
    musa_tensor_release(v);
}

TEST(op_tril) {
    check_tri(true);
}
TEST(op_triu) {
    check_tri(false);
}

TEST(op_cumsum) {
    for (int di = 0; di < 8; di++) {
        musa_dtype dt = ALL_DTYPES[di];
        musa_tensor *x = rnd(dt, 2, (int64_t[]){3, 5}, -4, 4, L_TRANSPOSED);
        for (int dim = 0; dim < 2; dim++) {
            musa_tensor *y = musa_cumsum(x, dim);
            musa_dtype od = musa_dtype_is_floating(dt) ? dt : MUSA_DTYPE_INT64;
            CHECK(y && musa_tensor_dtype(y) == od);
            double *xv = values(x), *yv = values(y), want[15];
            for (int r = 0; r < 3; r++)
                for (int c = 0; c < 5; c++) {
                    double prev =
                        dim == 0 ? (r ? want[(r - 1) * 5 + c] : 0) : (c ? want[r * 5 + c - 1] : 0);
                    want[r * 5 + c] = prev + xv[r * 5 + c];
                }
            /* float16/bfloat16 round each prefix once; compare with their tolerance */
            for (int i = 0; i < 15; i++) want[i] = musa_dtype_is_floating(od) ? want[i] : want[i];
            CHECK_CLOSE("cumsum", od, yv, want, 15);
            free(xv), free(yv);
            musa_tensor_release(y);
        }
        musa_tensor_release(x);
    }
}

/* The other scans against a float64 reference along each dim of a
 * transposed (3, 5) input: cumprod, logcumsumexp, cummax/cummin (values and
 * indices), and cumprod's backward op (through autograd) with zeros. */
typedef enum { SC_PROD, SC_LSE, SC_MAX, SC_MIN } scan_kind;

static double scan_step(scan_kind k, double acc, double v, bool first) {
    if (first) return v;
    switch (k) {
    case SC_PROD:
        return acc * v;
    case SC_LSE: {
        double m = fmax(acc, v);
        return m + log(exp(acc - m) + exp(v - m));
    }
    case SC_MAX:
        return v >= acc ? v : acc;
    default:
        return v <= acc ? v : acc;
    }
}

static void scan_case(scan_kind k, musa_dtype dt) {
    musa_tensor *x = rnd(dt, 2, (int64_t[]){3, 5}, k == SC_PROD ? 0.5 : -4, k == SC_PROD ? 1.5 : 4,
                         L_TRANSPOSED);
    for (int dim = 0; dim < 2; dim++) {
        musa_tensor *y = NULL, *ix = NULL;
        if (k == SC_PROD) y = musa_cumprod(x, dim);
        if (k == SC_LSE) y = musa_logcumsumexp(x, dim);
        if (k == SC_MAX) CHECK_OK(musa_cummax(x, dim, &y, &ix));
        if (k == SC_MIN) CHECK_OK(musa_cummin(x, dim, &y, &ix));
        CHECK(y);
        double *xv = values(x), *yv = values(y), want[15], wi[15];
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 5; c++) {
                int i = r * 5 + c, p = dim == 0 ? i - 5 : i - 1;
                bool first = dim == 0 ? r == 0 : c == 0;
                want[i] = scan_step(k, first ? 0 : want[p], xv[i], first);
                wi[i] = first || want[i] != want[p] || xv[i] == want[i] ? (dim ? c : r) : wi[p];
            }
        musa_dtype od = musa_tensor_dtype(y);
        CHECK_CLOSE("scan", od, yv, want, 15);
        if (ix) {
            double *iv = values(ix);
            for (int i = 0; i < 15; i++)
                CHECK_MSG(iv[i] == wi[i], "index %d: %g, want %g", i, iv[i], wi[i]);
            free(iv);
        }
        free(xv), free(yv);
        release_all(2, y, ix);
    }
    musa_tensor_release(x);
}

TEST(op_cumprod) {
    for (int di = 0; di < 8; di++) scan_case(SC_PROD, ALL_DTYPES[di]);
    musa_tensor *three = musa_full(1, (int64_t[]){3}, 3, MUSA_DTYPE_INT32);
    musa_tensor *i = musa_cumprod(three, 0);
    CHECK(i && musa_tensor_dtype(i) == MUSA_DTYPE_INT64);
    release_all(2, three, i);
}
TEST(op_logcumsumexp) {
    scan_case(SC_LSE, MUSA_DTYPE_FLOAT32), scan_case(SC_LSE, MUSA_DTYPE_FLOAT64);
    double v[4] = {-INFINITY, -INFINITY, 1000, INFINITY};
    musa_tensor *x = from_list(MUSA_DTYPE_FLOAT64, 1, (int64_t[]){4}, v);
    musa_tensor *y = musa_logcumsumexp(x, 0);
    double *yv = values(y);
    CHECK(yv && yv[0] == -INFINITY && yv[1] == -INFINITY && yv[2] == 1000 && yv[3] == INFINITY);
    free(yv);
    release_all(2, x, y);
}
TEST(op_cummax) {
    for (int di = 0; di < 8; di++)
        if (ALL_DTYPES[di] != MUSA_DTYPE_BOOL) scan_case(SC_MAX, ALL_DTYPES[di]);
    double v[4] = {1, NAN, 5, 2};
    musa_tensor *x = from_list(MUSA_DTYPE_FLOAT32, 1, (int64_t[]){4}, v), *y = NULL, *ix = NULL;
    CHECK_OK(musa_cummax(x, 0, &y, &ix));
    double *yv = values(y), *iv = values(ix);
    CHECK(yv[0] == 1 && yv[1] != yv[1] && yv[3] != yv[3] && iv[3] == 1); /* NaN stays */
    free(yv), free(iv);
    release_all(3, x, y, ix);
    CHECK_ERR(musa_cummax(x, 0, NULL, NULL) == MUSA_OK, MUSA_ERR_VALUE, "output pointers are NULL");
}
TEST(op_cummin) {
    for (int di = 0; di < 8; di++)
        if (ALL_DTYPES[di] != MUSA_DTYPE_BOOL) scan_case(SC_MIN, ALL_DTYPES[di]);
    musa_tensor *x = musa_ones(1, (int64_t[]){3}, MUSA_DTYPE_FLOAT32), *y = NULL, *ix = NULL;
    CHECK_ERR(musa_cummin(x, 3, &y, &ix) == MUSA_OK, MUSA_ERR_INDEX, "cummin");
    musa_tensor_release(x);
}
TEST(op_cumprod_backward) {
    /* zeros in x: the gradient stays exact (no division) */
    double v[5] = {2, 0, 3, 0, 4}, g[5] = {1, 1, 1, 1, 1};
    musa_tensor *x = from_list(MUSA_DTYPE_FLOAT64, 1, (int64_t[]){5}, v);
    musa_tensor_set_requires_grad(x, true);
    musa_tensor *y = musa_cumprod(x, 0), *s = musa_sum(y, 0, NULL, false);
    CHECK_OK(musa_backward(1, &s, NULL, false, false));
    musa_tensor *gx = musa_tensor_grad(x);
    double *gv = values(gx);
    /* d/dx_i sum_k prod_{j<=k} x_j = sum_{k>=i} prod_{j<=k, j!=i} x_j */
    for (int i = 0; i < 5; i++) {
        double want = 0;
        for (int k = i; k < 5; k++) {
            double p = 1;
            for (int j = 0; j <= k; j++) p *= j == i ? 1 : v[j];
            want += g[k] * p;
        }
        CHECK_MSG(fabs(gv[i] - want) < 1e-12, "grad[%d] = %g, want %g", i, gv[i], want);
    }
    free(gv);
    release_all(4, x, y, s, gx);
}

TEST(op_logcumsumexp_backward) {
    /* through autograd, against sum_{k>=i} g_k exp(x_i - y_k); large values
     * do not overflow */
    double v[4] = {0.3, 1000, -2, 999}, w[4] = {0.5, -1, 2, 0.25};
    musa_tensor *x = from_list(MUSA_DTYPE_FLOAT64, 1, (int64_t[]){4}, v);
    musa_tensor *g = from_list(MUSA_DTYPE_FLOAT64, 1, (int64_t[]){4}, w);
    musa_tensor_set_requires_grad(x, true);
    musa_tensor *y = musa_logcumsumexp(x, 0);
    CHECK_OK(musa_backward(1, &y, (musa_tensor *[]){g}, false, false));
    musa_tensor *gx = musa_tensor_grad(x);
    double *gv = values(gx), *yv = values(y);
    for (int i = 0; i < 4; i++) {
        double want = 0;
        for (int k = i; k < 4; k++) want += w[k] * exp(v[i] - yv[k]);
        CHECK_MSG(fabs(gv[i] - want) < 1e-12 * (1 + fabs(want)), "grad[%d] = %g, want %g", i, gv[i],
                  want);
    }
    free(gv), free(yv);
    release_all(4, x, g, y, gx);
}

static void check_sorted(musa_tensor *x, musa_tensor *v, musa_tensor *ix, int64_t n, int64_t k,
                         bool desc) {
    double *xv = values(x), *vv = values(v);
    int64_t *iv = ivalues(ix);
    for (int64_t i = 0; i < k; i++) {
        CHECK_MSG(vv[i] == xv[iv[i]] || (vv[i] != vv[i] && xv[iv[i]] != xv[iv[i]]), "value/index");
        if (i) {
            double a = vv[i - 1], b = vv[i];
            bool ordered = desc ? (a >= b || a != a) : (a <= b || b != b);
            CHECK_MSG(ordered, "not sorted at %lld: %g, %g", (long long)i, a, b);
            if (a == b) CHECK_MSG(iv[i - 1] < iv[i], "not stable at %lld", (long long)i);
        }
    }
    (void)n;
    free(xv), free(vv), free(iv);
}

TEST(op_sort) {
    double v[8] = {3, 1, NAN, 2, 1, -5, 3, 0};
    musa_tensor *x = from_list(MUSA_DTYPE_FLOAT32, 1, (int64_t[]){8}, v);
    for (int desc = 0; desc < 2; desc++) {
        musa_tensor *s = NULL, *i = NULL;
        CHECK_OK(musa_sort(x, 0, desc, &s, &i));
        check_sorted(x, s, i, 8, 8, desc);
        double last;
        CHECK_OK(musa_tensor_get(s, (int64_t[]){desc ? 0 : 7}, &last));
        CHECK(last != last); /* NaN is the largest */
        release_all(2, s, i);
    }
    musa_tensor *m = rnd(MUSA_DTYPE_INT32, 2, (int64_t[]){4, 6}, -3, 3, L_TRANSPOSED);
    musa_tensor *s = NULL, *i = NULL;
    CHECK_OK(musa_sort(m, 0, false, &s, &i));
    CHECK_SHAPE(s, 2, 4, 6);
    musa_tensor *col = musa_select(m, 1, 2), *scol = musa_select(s, 1, 2),
                *icol = musa_select(i, 1, 2);
    check_sorted(col, scol, icol, 4, 4, false);
    release_all(7, x, m, s, i, col, scol, icol);
}

TEST(op_topk) {
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT64, 2, (int64_t[]){3, 10}, -9, 9, L_CONTIG);
    musa_tensor *v = NULL, *i = NULL;
    CHECK_OK(musa_topk(x, 4, -1, true, &v, &i));
    CHECK_SHAPE(v, 2, 3, 4);
    for (int r = 0; r < 3; r++) {
        musa_tensor *xr = musa_select(x, 0, r), *vr = musa_select(v, 0, r),
                    *ir = musa_select(i, 0, r);
        check_sorted(xr, vr, ir, 10, 4, true);
        double *xv = values(xr), *vv = values(vr);
        int bigger = 0;
        for (int k = 0; k < 10; k++) bigger += xv[k] > vv[3];
        CHECK(bigger <= 3);
        free(xv), free(vv);
        release_all(3, xr, vr, ir);
    }
    musa_tensor *a = NULL, *b = NULL;
    CHECK_ERR(musa_topk(x, 11, 1, true, &a, &b) == MUSA_OK, MUSA_ERR_VALUE,
              "[topk] k = 11 is out of range");
    release_all(3, x, v, i);
}

TEST(composite_masked_fill_repeat_one_hot) {
    musa_tensor *x = musa_arange(0, 6, 1, MUSA_DTYPE_INT32);
    musa_tensor *v = musa_view(x, 2, (int64_t[]){2, 3});
    musa_tensor *three = musa_number_int(3), *mask = musa_ge(v, three);
    musa_tensor *f = musa_masked_fill(v, mask, -1);
    double *fv = values(f);
    CHECK(f && musa_tensor_dtype(f) == MUSA_DTYPE_INT32 && fv[2] == 2 && fv[3] == -1);
    free(fv);
    musa_tensor *r = musa_repeat(v, 3, (int64_t[]){2, 1, 2});
    CHECK_SHAPE(r, 3, 2, 2, 6);
    double *rv = values(r);
    CHECK(rv[0] == 0 && rv[3] == 0 && rv[5] == 2 && rv[12 + 9] == 3);
    free(rv);
    musa_tensor *labels = from_list(MUSA_DTYPE_INT64, 1, (int64_t[]){3}, (double[]){2, 0, 1});
    musa_tensor *oh = musa_one_hot(labels, -1);
    CHECK_SHAPE(oh, 2, 3, 3);
    double *ov = values(oh);
    CHECK(ov[2] == 1 && ov[3] == 1 && ov[7] == 1 && ov[0] == 0);
    free(ov);
    CHECK_ERR(FAILS(musa_one_hot(labels, 2)), MUSA_ERR_VALUE,
              "[one_hot] class values must be in [0, 2)");
    CHECK_ERR(FAILS(musa_masked_fill(v, v, 0)), MUSA_ERR_TYPE, "mask must be bool");
    release_all(8, x, v, three, mask, f, r, labels, oh);
}
