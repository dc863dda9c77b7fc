/*
 * bitwise.c - op tests for bitwise_and/or/xor/not, the shifts, gcd and lcm:
 * every
 * integer dtype and bool against int64 loops written here (wrapped to the
 * dtype), contiguous / transposed / strided / broadcast / 0-d / empty /
 * large inputs, shift counts outside the dtype's width, promotion, and the
 * errors.
 */
#include "../util.h"

typedef musa_tensor *(*binop)(musa_tensor *, musa_tensor *);

static const musa_dtype INTS[4] = {MUSA_DTYPE_INT64, MUSA_DTYPE_INT32, MUSA_DTYPE_INT8,
                                   MUSA_DTYPE_UINT8};

static int bits_of(musa_dtype d) {
    return d == MUSA_DTYPE_INT64 ? 64 : d == MUSA_DTYPE_INT32 ? 32 : 8;
}

typedef enum { OP_AND, OP_OR, OP_XOR, OP_SHL, OP_SHR, OP_GCD, OP_LCM } bop;

static uint64_t mag(int64_t v) {
    return v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
}
static uint64_t gcd_ref(uint64_t a, uint64_t b) {
    return b ? gcd_ref(b, a % b) : a;
}

static int64_t ref(bop k, int64_t a, int64_t b, musa_dtype d) {
    int w = bits_of(d);
    bool out = b < 0 || b >= w;
    switch (k) {
    case OP_AND:
        return a & b;
    case OP_OR:
        return a | b;
    case OP_XOR:
        return a ^ b;
    case OP_GCD:
        return wrap_int((int64_t)gcd_ref(mag(a), mag(b)), d);
    case OP_LCM: {
        uint64_t g = gcd_ref(mag(a), mag(b));
        return g ? wrap_int((int64_t)(mag(a) / g * mag(b)), d) : 0;
    }
    case OP_SHL:
        return out ? 0 : wrap_int((int64_t)((uint64_t)a << b), d);
    default:
        return out ? (a < 0 ? -1 : 0) : a >> b;
    }
}

static const struct {
    const char *name;
    binop fn;
    bop k;
} OPS[7] = {{"bitwise_and", musa_bitwise_and, OP_AND},
            {"bitwise_or", musa_bitwise_or, OP_OR},
            {"bitwise_xor", musa_bitwise_xor, OP_XOR},
            {"bitwise_left_shift", musa_bitwise_left_shift, OP_SHL},
            {"bitwise_right_shift", musa_bitwise_right_shift, OP_SHR},
            {"gcd", musa_gcd, OP_GCD},
            {"lcm", musa_lcm, OP_LCM}};

/* a (shape sa, layout la) op b (shape sb) against the reference, both
 * read back exactly; the output shape is so. */
static bool check_case(int oi, musa_dtype d, int na, const int64_t *sa, layout la, int nb,
                       const int64_t *sb, int no, const int64_t *so) {
    bool shift = OPS[oi].k >= OP_SHL;
    double lo = d == MUSA_DTYPE_UINT8 ? 0 : d == MUSA_DTYPE_INT8 ? -128 : -1e6;
    double hi = d == MUSA_DTYPE_UINT8 ? 256 : d == MUSA_DTYPE_INT8 ? 128 : 1e6;
    musa_tensor *a = rnd(d, na, sa, lo, hi, la);
    musa_tensor *b = shift
                         ? rnd(d, nb, sb, d == MUSA_DTYPE_UINT8 ? 0 : -3, bits_of(d) + 3, L_CONTIG)
                         : rnd(d, nb, sb, lo, hi, L_CONTIG);
    musa_tensor *y = OPS[oi].fn(a, b);
    bool ok = y != NULL;
    if (!ok)
        harness_fail(__FILE__, __LINE__, "%s(%s): %s", OPS[oi].name, musa_dtype_name(d),
                     musa_last_error());
    if (ok) {
        ok = musa_tensor_dtype(y) == d && same_shape(y, no, so);
        if (!ok)
            harness_fail(__FILE__, __LINE__, "%s(%s) gave %s", OPS[oi].name, musa_dtype_name(d),
                         musa_dtype_name(musa_tensor_dtype(y)));
    }
    if (ok) {
        int64_t *av = ivalues(a), *bv = ivalues(b), *yv = ivalues(y), idx[3], ia[3], ib[3];
        for (int64_t i = 0; ok && i < musa_tensor_numel(y); i++) {
            unravel(i, no, so, idx);
            for (int k = 0; k < na; k++) ia[k] = sa[k] == 1 ? 0 : idx[k + no - na];
            for (int k = 0; k < nb; k++) ib[k] = sb[k] == 1 ? 0 : idx[k + no - nb];
            int64_t x = av[ravel(na, sa, ia)], s = bv[ravel(nb, sb, ib)];
            int64_t want = ref(OPS[oi].k, x, s, d);
            ok = yv[i] == want;
            if (!ok)
                harness_fail(__FILE__, __LINE__,
                             "%s(%s) at %lld: %lld op %lld gave %lld, want %lld", OPS[oi].name,
                             musa_dtype_name(d), (long long)i, (long long)x, (long long)s,
                             (long long)yv[i], (long long)want);
        }
        free(av), free(bv), free(yv);
    }
    release_all(3, a, b, y);
    return ok;
}

static void run_bits(int oi) {
    static const struct {
        int na, nb;
        int64_t sa[3], sb[3];
        layout la;
        int no;
        int64_t so[3];
    } cases[] = {
        {2, 2, {4, 5}, {4, 5}, L_CONTIG, 2, {4, 5}},
        {2, 2, {4, 1}, {1, 5}, L_CONTIG, 2, {4, 5}},
        {1, 3, {4}, {2, 3, 4}, L_CONTIG, 3, {2, 3, 4}},
        {2, 1, {3, 4}, {4}, L_TRANSPOSED, 2, {3, 4}},
        {3, 1, {2, 3, 4}, {4}, L_STRIDED, 3, {2, 3, 4}},
        {0, 2, {0}, {2, 3}, L_CONTIG, 2, {2, 3}},
        {2, 1, {0, 3}, {3}, L_CONTIG, 2, {0, 3}},
        {2, 2, {200, 300}, {200, 300}, L_CONTIG, 2, {200, 300}},
        {2, 0, {200, 300}, {0}, L_CONTIG, 2, {200, 300}},
    };
    for (int di = 0; di < 4; di++)
        for (int ci = 0; ci < (int)(sizeof cases / sizeof cases[0]); ci++)
            if (!check_case(oi, INTS[di], cases[ci].na, cases[ci].sa, cases[ci].la, cases[ci].nb,
                            cases[ci].sb, cases[ci].no, cases[ci].so))
                return;
}
TEST(op_bitwise_and) {
    run_bits(0);
}
TEST(op_bitwise_or) {
    run_bits(1);
}
TEST(op_bitwise_xor) {
    run_bits(2);
}
TEST(op_bitwise_left_shift) {
    run_bits(3);
}
TEST(op_bitwise_right_shift) {
    run_bits(4);
}
TEST(op_gcd) {
    run_bits(5);
}
TEST(op_lcm) {
    run_bits(6);
}

TEST(bitwise_shift_edges) {
    /* counts at and past the width, and negative ones, on both signs */
    int64_t av[6] = {1, -8, 5, -1, INT64_MIN, 3}, bv[6] = {63, 64, -1, 70, 1, 0};
    musa_tensor *a = musa_from_data(av, 1, S(6), MUSA_DTYPE_INT64);
    musa_tensor *b = musa_from_data(bv, 1, S(6), MUSA_DTYPE_INT64);
    musa_tensor *l = musa_bitwise_left_shift(a, b), *r = musa_bitwise_right_shift(a, b);
    int64_t *lv = ivalues(l), *rv = ivalues(r);
    int64_t wl[6] = {INT64_MIN, 0, 0, 0, 0, 3}, wr[6] = {0, -1, 0, -1, INT64_MIN / 2, 3};
    for (int i = 0; i < 6; i++) {
        CHECK_MSG(lv[i] == wl[i], "%lld << %lld gave %lld", (long long)av[i], (long long)bv[i],
                  (long long)lv[i]);
        CHECK_MSG(rv[i] == wr[i], "%lld >> %lld gave %lld", (long long)av[i], (long long)bv[i],
                  (long long)rv[i]);
    }
    free(lv), free(rv);
    /* int8: a shift wraps to the dtype; 9 is past its width */
    musa_tensor *c = from_list(MUSA_DTYPE_INT8, 1, S(3), (double[]){-8, 1, -128});
    musa_tensor *s = from_list(MUSA_DTYPE_INT8, 1, S(3), (double[]){4, 9, 9});
    musa_tensor *cl = musa_bitwise_left_shift(c, s), *cr = musa_bitwise_right_shift(c, s);
    int64_t *clv = ivalues(cl), *crv = ivalues(cr);
    CHECK(clv[0] == -128 && clv[1] == 0 && clv[2] == 0);
    CHECK(crv[0] == -1 && crv[1] == 0 && crv[2] == -1);
    free(clv), free(crv);
    release_all(8, a, b, l, r, c, s, cl, cr);
}

TEST(bitwise_bool_and_promotion) {
    musa_tensor *p = from_list(MUSA_DTYPE_BOOL, 1, S(4), (double[]){1, 1, 0, 0});
    musa_tensor *q = from_list(MUSA_DTYPE_BOOL, 1, S(4), (double[]){1, 0, 1, 0});
    musa_tensor *r[3] = {musa_bitwise_and(p, q), musa_bitwise_or(p, q), musa_bitwise_xor(p, q)};
    const int64_t want[3][4] = {{1, 0, 0, 0}, {1, 1, 1, 0}, {0, 1, 1, 0}};
    for (int k = 0; k < 3; k++) {
        CHECK(r[k] && musa_tensor_dtype(r[k]) == MUSA_DTYPE_BOOL);
        int64_t *v = ivalues(r[k]);
        for (int i = 0; i < 4; i++) CHECK(v[i] == want[k][i]);
        free(v);
    }
    /* int8 with int64 promotes to int64; an int tensor with bool stays int */
    musa_tensor *i8 = from_list(MUSA_DTYPE_INT8, 1, S(2), (double[]){-1, 6});
    musa_tensor *i64 = from_list(MUSA_DTYPE_INT64, 1, S(2), (double[]){256, 3});
    musa_tensor *t = from_list(MUSA_DTYPE_BOOL, 1, S(2), (double[]){1, 0});
    musa_tensor *pr = musa_bitwise_and(i8, i64), *ib = musa_bitwise_or(i8, t);
    int64_t *prv = ivalues(pr), *ibv = ivalues(ib);
    CHECK(musa_tensor_dtype(pr) == MUSA_DTYPE_INT64 && prv[0] == 256 && prv[1] == 2);
    CHECK(musa_tensor_dtype(ib) == MUSA_DTYPE_INT8 && ibv[0] == -1 && ibv[1] == 6);
    free(prv), free(ibv);
    release_all(10, p, q, r[0], r[1], r[2], i8, i64, t, pr, ib);
}

TEST(op_bitwise_not) {
    musa_tensor *p = from_list(MUSA_DTYPE_BOOL, 1, S(4), (double[]){1, 1, 0, 0});
    musa_tensor *np = musa_bitwise_not(p);
    int64_t *npv = ivalues(np);
    CHECK(musa_tensor_dtype(np) == MUSA_DTYPE_BOOL && npv[0] == 0 && npv[2] == 1);
    free(npv);
    /* ~x on each integer dtype, strided and transposed, and an empty tensor */
    for (int di = 0; di < 4; di++)
        for (int lay = 0; lay < L_COUNT; lay++) {
            musa_tensor *x = rnd(INTS[di], 2, S(6, 5), -100, 100, (layout)lay);
            musa_tensor *y = musa_bitwise_not(x);
            int64_t *xv = ivalues(x), *yv = ivalues(y);
            for (int i = 0; i < 30; i++) CHECK(yv[i] == wrap_int(~xv[i], INTS[di]));
            free(xv), free(yv);
            release_all(2, x, y);
        }
    musa_tensor *e = musa_zeros(2, S(0, 3), MUSA_DTYPE_INT32), *ne = musa_bitwise_not(e);
    CHECK(ne && same_shape(ne, 2, S(0, 3)));
    release_all(4, p, np, e, ne);
}

TEST(op_bitwise_errors) {
    musa_tensor *f = musa_zeros(1, S(3), MUSA_DTYPE_FLOAT32);
    musa_tensor *i = musa_zeros(1, S(3), MUSA_DTYPE_INT64);
    musa_tensor *b = musa_zeros(1, S(3), MUSA_DTYPE_BOOL);
    musa_tensor *j = musa_zeros(1, S(4), MUSA_DTYPE_INT64);
    CHECK_ERR(FAILS(musa_bitwise_and(f, i)), MUSA_ERR_TYPE,
              "[bitwise_and] integer or bool tensors only (got float32 and int64)");
    CHECK_ERR(FAILS(musa_bitwise_xor(i, f)), MUSA_ERR_TYPE, "[bitwise_xor]");
    CHECK_ERR(FAILS(musa_bitwise_not(f)), MUSA_ERR_TYPE,
              "[bitwise_not] integer or bool tensors only (got float32)");
    CHECK_ERR(FAILS(musa_bitwise_left_shift(b, b)), MUSA_ERR_TYPE, "[bitwise_left_shift] bool");
    CHECK_ERR(FAILS(musa_bitwise_right_shift(f, i)), MUSA_ERR_TYPE, "[bitwise_right_shift]");
    CHECK_ERR(FAILS(musa_bitwise_or(i, j)), MUSA_ERR_VALUE,
              "[bitwise_or] shapes (3,) and (4,) cannot be broadcast");
    CHECK_ERR(FAILS(musa_bitwise_and(i, NULL)), MUSA_ERR_VALUE, "input 1 is NULL");
    CHECK_ERR(FAILS(musa_bitwise_not(NULL)), MUSA_ERR_VALUE, "NULL");
    CHECK_ERR(FAILS(musa_gcd(f, i)), MUSA_ERR_TYPE, "[gcd] integer tensors only (got float32");
    CHECK_ERR(FAILS(musa_lcm(b, b)), MUSA_ERR_TYPE, "[lcm] bool tensors are not supported");
    release_all(4, f, i, b, j);
}
