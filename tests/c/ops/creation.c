/*
 * creation.c - creation and random ops: values, dtypes, shapes, errors,
 * seeding, statistics, and independence from the thread count.
 */
#include "../util.h"

TEST(op_empty) {
    musa_tensor *e = musa_empty(3, (int64_t[]){2, 0, 3}, MUSA_DTYPE_FLOAT16);
    CHECK(e && musa_tensor_numel(e) == 0 && musa_tensor_dtype(e) == MUSA_DTYPE_FLOAT16);
    CHECK_ERR(FAILS(musa_empty(1, (int64_t[]){-1}, MUSA_DTYPE_FLOAT32)), MUSA_ERR_VALUE,
              "[empty] negative size -1 in dim 0");
    CHECK_ERR(FAILS(musa_empty(9, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1}, MUSA_DTYPE_FLOAT32)),
              MUSA_ERR_VALUE, "0 to 8 dims");
    CHECK_ERR(FAILS(musa_empty(2, (int64_t[]){1ll << 40, 1ll << 40}, MUSA_DTYPE_FLOAT32)),
              MUSA_ERR_VALUE, "more than 2^63");
    CHECK_ERR(FAILS(musa_empty(1, (int64_t[]){1ll << 61}, MUSA_DTYPE_FLOAT32)), MUSA_ERR_NOMEM,
              "out of memory");
    CHECK_ERR(FAILS(musa_empty(1, (int64_t[]){2}, (musa_dtype)99)), MUSA_ERR_TYPE,
              "invalid dtype 99");
    musa_tensor_release(e);
}

TEST(op_full) {
    for (int di = 0; di < 9; di++) {
        musa_tensor *t = musa_full(2, (int64_t[]){3, 2}, 2.75, ALL_DTYPES[di]);
        double *v = values(t), want = round_to(2.75, ALL_DTYPES[di]);
        for (int i = 0; i < 6; i++) CHECK(v[i] == want);
        free(v);
        musa_tensor_release(t);
    }
    musa_tensor *s = musa_zeros(0, NULL, MUSA_DTYPE_INT8), *o = musa_ones_like(s);
    int64_t v;
    CHECK_OK(musa_tensor_item_int(o, &v));
    CHECK(v == 1 && musa_tensor_ndim(o) == 0);
    release_all(2, s, o);
}

TEST(op_arange) {
    musa_tensor *a = musa_arange(1, 2, 0.25, MUSA_DTYPE_FLOAT64);
    double *v = values(a);
    CHECK_SHAPE(a, 1, 4);
    CHECK(v[0] == 1 && v[3] == 1.75);
    free(v);
    musa_tensor *b = musa_arange(10, 0, -3, MUSA_DTYPE_INT64);
    v = values(b);
    CHECK_SHAPE(b, 1, 4);
    CHECK(v[0] == 10 && v[3] == 1);
    free(v);
    musa_tensor *e = musa_arange(3, 3, 1, MUSA_DTYPE_INT32);
    CHECK_SHAPE(e, 1, 0);
    CHECK_ERR(FAILS(musa_arange(0, 5, 0, MUSA_DTYPE_FLOAT32)), MUSA_ERR_VALUE,
              "[arange] step must be nonzero");
    CHECK_ERR(FAILS(musa_arange(0, 5, -1, MUSA_DTYPE_FLOAT32)), MUSA_ERR_VALUE, "wrong side");
    CHECK_ERR(FAILS(musa_arange(0, INFINITY, 1, MUSA_DTYPE_FLOAT32)), MUSA_ERR_VALUE, "finite");
    release_all(3, a, b, e);
}

TEST(op_linspace) {
    musa_tensor *a = musa_linspace(-1, 1, 5, MUSA_DTYPE_FLOAT32);
    double *v = values(a);
    CHECK(v[0] == -1 && v[2] == 0 && v[4] == 1 && v[1] == -0.5);
    free(v);
    musa_tensor *one = musa_linspace(3, 9, 1, MUSA_DTYPE_FLOAT64),
                *zero = musa_linspace(0, 1, 0, MUSA_DTYPE_FLOAT64);
    double x;
    CHECK_OK(musa_tensor_item(one, &x));
    CHECK(x == 3 && musa_tensor_numel(zero) == 0);
    CHECK_ERR(FAILS(musa_linspace(0, 1, -2, MUSA_DTYPE_FLOAT32)), MUSA_ERR_VALUE,
              "steps must be non-negative");
    release_all(3, a, one, zero);
}

TEST(op_eye) {
    musa_tensor *e = musa_eye(3, 4, MUSA_DTYPE_INT32), *s = musa_eye(2, -1, MUSA_DTYPE_BOOL);
    double *v = values(e);
    CHECK_SHAPE(e, 2, 3, 4);
    CHECK_SHAPE(s, 2, 2, 2);
    for (int i = 0; i < 12; i++) CHECK(v[i] == (i / 4 == i % 4));
    free(v);
    CHECK_ERR(FAILS(musa_eye(-1, 2, MUSA_DTYPE_FLOAT32)), MUSA_ERR_VALUE, "non-negative");
    release_all(2, e, s);
}

static void moments(musa_tensor *t, double *mean, double *var, double *lo, double *hi) {
    double *v = values(t);
    int64_t n = musa_tensor_numel(t);
    double s = 0, ss = 0;
    *lo = INFINITY, *hi = -INFINITY;
    for (int64_t i = 0; i < n; i++) s += v[i], *lo = fmin(*lo, v[i]), *hi = fmax(*hi, v[i]);
    *mean = s / n;
    for (int64_t i = 0; i < n; i++) ss += (v[i] - *mean) * (v[i] - *mean);
    *var = ss / n;
    free(v);
}

TEST(op_rand) {
    for (int di = 0; di < 4; di++) {
        musa_tensor *r = musa_rand(2, (int64_t[]){300, 200}, FLOAT_DTYPES[di]);
        double m, v, lo, hi;
        moments(r, &m, &v, &lo, &hi);
        CHECK_MSG(fabs(m - 0.5) < 0.01 && fabs(v - 1.0 / 12) < 0.005 && lo >= 0 && hi <= 1,
                  "rand %s: mean %g var %g range %g..%g", musa_dtype_name(FLOAT_DTYPES[di]), m, v,
                  lo, hi);
        if (FLOAT_DTYPES[di] == MUSA_DTYPE_FLOAT32 || FLOAT_DTYPES[di] == MUSA_DTYPE_FLOAT64)
            CHECK(hi < 1);
        musa_tensor_release(r);
    }
    CHECK_ERR(FAILS(musa_rand(1, (int64_t[]){3}, MUSA_DTYPE_INT32)), MUSA_ERR_TYPE,
              "[rand] needs a floating dtype");
}

TEST(op_randn) {
    for (int di = 0; di < 4; di++) {
        musa_tensor *r = musa_randn(1, (int64_t[]){100000}, FLOAT_DTYPES[di]);
        double m, v, lo, hi;
        moments(r, &m, &v, &lo, &hi);
        CHECK_MSG(fabs(m) < 0.02 && fabs(v - 1) < 0.03 && lo < -3.5 && hi > 3.5, "randn %s: %g %g",
                  musa_dtype_name(FLOAT_DTYPES[di]), m, v);
        musa_tensor_release(r);
    }
}

TEST(op_randint) {
    musa_tensor *r = musa_randint(-3, 4, 1, (int64_t[]){70000}, MUSA_DTYPE_INT8);
    double *v = values(r);
    int count[7] = {0};
    for (int i = 0; i < 70000; i++) {
        CHECK(v[i] >= -3 && v[i] < 4 && v[i] == floor(v[i]));
        count[(int)v[i] + 3]++;
    }
    for (int k = 0; k < 7; k++)
        CHECK_MSG(abs(count[k] - 10000) < 500, "randint bucket %d: %d", k, count[k]);
    free(v);
    CHECK_ERR(FAILS(musa_randint(5, 5, 1, (int64_t[]){3}, MUSA_DTYPE_INT64)), MUSA_ERR_VALUE,
              "low < high");
    CHECK_ERR(FAILS(musa_randint(0, 5, 1, (int64_t[]){3}, MUSA_DTYPE_BOOL)), MUSA_ERR_TYPE, "bool");
    musa_tensor_release(r);
}

TEST(op_bernoulli) {
    musa_tensor *p = musa_full(1, (int64_t[]){50000}, 0.3, MUSA_DTYPE_FLOAT32);
    musa_tensor *b = musa_bernoulli(p);
    double m, v, lo, hi;
    moments(b, &m, &v, &lo, &hi);
    CHECK(fabs(m - 0.3) < 0.01 && lo == 0 && hi == 1);
    musa_tensor *z = musa_zeros(1, (int64_t[]){100}, MUSA_DTYPE_FLOAT64), *o = musa_ones_like(z);
    musa_tensor *bz = musa_bernoulli(z), *bo = musa_bernoulli(o);
    moments(bz, &m, &v, &lo, &hi);
    CHECK(hi == 0);
    moments(bo, &m, &v, &lo, &hi);
    CHECK(lo == 1);
    musa_tensor *ip = musa_zeros(1, (int64_t[]){2}, MUSA_DTYPE_INT32);
    CHECK_ERR(FAILS(musa_bernoulli(ip)), MUSA_ERR_TYPE, "probabilities must be floating");
    release_all(7, p, b, z, o, bz, bo, ip);
}

TEST(random_reproducible_across_threads) {
    int saved = musa_get_num_threads();
    musa_tensor *r[2][3];
    for (int k = 0; k < 2; k++) {
        CHECK_OK(musa_set_num_threads(k + 1));
        musa_manual_seed(1234);
        r[k][0] = musa_rand(1, (int64_t[]){100003}, MUSA_DTYPE_FLOAT32);
        r[k][1] = musa_randn(2, (int64_t[]){301, 333}, MUSA_DTYPE_FLOAT64);
        r[k][2] = musa_randint(0, 1000, 1, (int64_t[]){50001}, MUSA_DTYPE_INT64);
    }
    CHECK_OK(musa_set_num_threads(saved));
    for (int j = 0; j < 3; j++) {
        double *a = values(r[0][j]), *b = values(r[1][j]);
        CHECK(memcmp(a, b, sizeof(double) * (size_t)musa_tensor_numel(r[0][j])) == 0);
        free(a), free(b);
    }
    /* a new draw differs; reseeding repeats */
    musa_manual_seed(1234);
    musa_tensor *again = musa_rand(1, (int64_t[]){100003}, MUSA_DTYPE_FLOAT32);
    musa_tensor *next = musa_rand(1, (int64_t[]){100003}, MUSA_DTYPE_FLOAT32);
    double *a = values(r[0][0]), *b = values(again), *c = values(next);
    CHECK(memcmp(a, b, 100003 * sizeof(double)) == 0 && memcmp(a, c, 100003 * sizeof(double)) != 0);
    free(a), free(b), free(c);
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 3; j++) musa_tensor_release(r[k][j]);
    release_all(2, again, next);
    CHECK_ERR(musa_set_num_threads(0) == MUSA_OK, MUSA_ERR_VALUE, "n must be in 1..");
}
