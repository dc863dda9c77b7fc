/*
 * attention.c - op tests for the fused scaled dot-product attention and its
 * backward op against float64 references computed here with plain loops:
 * every dtype, strided operands, a causal or a broadcast bool mask, more
 * query rows than one kernel block, float32's small-product kernels at and
 * past their limits, a causal mask as a tensor, and malformed operands.
 */
#include <math.h>
#include <string.h>

#include "../util.h"

typedef struct {
    int64_t B, Tq, Tk, E, Ev;
    double scale;
    bool causal;
    const bool *mask; /* (Tq, Tk) shared by the batch, true: attend; or NULL */
} att_case;

static bool allowed(const att_case *c, int64_t i, int64_t j) {
    if (c->causal) return j <= i;
    return !c->mask || c->mask[i * c->Tk + j];
}

/* out (B, Tq, Ev) and, with g, the gradients of sum(out * g). */
static void att_ref(const att_case *c, const double *q, const double *k, const double *v,
                    const double *g, double *out, double *lse, double *dq, double *dk, double *dv) {
    int64_t Tq = c->Tq, Tk = c->Tk, E = c->E, Ev = c->Ev;
    double *p = malloc(sizeof(double) * (size_t)(Tk ? Tk : 1));
    if (dq) memset(dq, 0, sizeof(double) * (size_t)(c->B * Tq * E));
    if (dk) memset(dk, 0, sizeof(double) * (size_t)(c->B * Tk * E));
    if (dv) memset(dv, 0, sizeof(double) * (size_t)(c->B * Tk * Ev));
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t i = 0; i < Tq; i++) {
            const double *qi = q + (b * Tq + i) * E;
            double m = -INFINITY, s = 0;
            for (int64_t j = 0; j < Tk; j++) {
                double d = 0;
                for (int64_t e = 0; e < E; e++) d += qi[e] * k[(b * Tk + j) * E + e];
                p[j] = allowed(c, i, j) ? d * c->scale : -INFINITY;
                m = p[j] > m ? p[j] : m;
            }
            for (int64_t j = 0; j < Tk; j++) s += (p[j] = exp(p[j] - m));
            for (int64_t j = 0; j < Tk; j++) p[j] /= s;
            lse[b * Tq + i] = m + log(s);
            double *oi = out + (b * Tq + i) * Ev;
            for (int64_t e = 0; e < Ev; e++) {
                oi[e] = 0;
                for (int64_t j = 0; j < Tk; j++) oi[e] += p[j] * v[(b * Tk + j) * Ev + e];
            }
            if (!g) continue;
            const double *gi = g + (b * Tq + i) * Ev;
            double D = 0;
            for (int64_t e = 0; e < Ev; e++) D += gi[e] * oi[e];
            for (int64_t j = 0; j < Tk; j++) {
                double dp = 0;
                for (int64_t e = 0; e < Ev; e++) {
                    dp += gi[e] * v[(b * Tk + j) * Ev + e];
                    dv[(b * Tk + j) * Ev + e] += p[j] * gi[e];
                }
                double ds = p[j] * (dp - D) * c->scale;
                for (int64_t e = 0; e < E; e++) {
                    dq[(b * Tq + i) * E + e] += ds * k[(b * Tk + j) * E + e];
                    dk[(b * Tk + j) * E + e] += ds * qi[e];
                }
            }
        }
    free(p);
}

static musa_tensor *mask_of(const att_case *c) {
    if (!c->mask) return NULL;
    double m[256];
    for (int64_t i = 0; i < c->Tq * c->Tk; i++) m[i] = c->mask[i];
    return from_list(MUSA_DTYPE_BOOL, 2, S(c->Tq, c->Tk), m);
}

/* One forward case: out and lse against the reference; with bwd, also the
 * backward op's three gradients. */
static void att_check(const att_case *c, musa_dtype dt, layout lay, bool bwd) {
    musa_tensor *q = rnd(dt, 3, S(c->B, c->Tq, c->E), -2, 2, lay);
    musa_tensor *k = rnd(dt, 3, S(c->B, c->Tk, c->E), -2, 2, lay);
    musa_tensor *v = rnd(dt, 3, S(c->B, c->Tk, c->Ev), -1, 1, lay);
    musa_tensor *g = rnd(dt, 3, S(c->B, c->Tq, c->Ev), -1, 1, L_CONTIG);
    musa_tensor *mask = mask_of(c);
    int id = musa_op_lookup("scaled_dot_product_attention");
    musa_attrs *a = musa_attrs_new(id);
    musa_attrs_set_float(a, "scale", c->scale);
    musa_attrs_set_bool(a, "causal", c->causal);
    musa_tensor *out[3] = {NULL, NULL, NULL}, *grads[3] = {NULL, NULL, NULL};
    CHECK_OK(musa_op_call(id, mask ? 4 : 3, (musa_tensor *[]){q, k, v, mask}, a, out));
    int64_t no = c->B * c->Tq * c->Ev, nq = c->B * c->Tq * c->E;
    int64_t nk = c->B * c->Tk * c->E, nv = c->B * c->Tk * c->Ev;
    double *qv = values(q), *kv = values(k), *vv = values(v), *gv = values(g);
    double *want = malloc(sizeof(double) * (size_t)(no + c->B * c->Tq + nq + nk + nv));
    double *lse = want + no, *dq = lse + c->B * c->Tq, *dk = dq + nq, *dvw = dk + nk;
    att_ref(c, qv, kv, vv, gv, want, lse, dq, dk, dvw);
    /* the products round in the dtype: scale the tolerance by the sums' length */
    double sc = dt == MUSA_DTYPE_FLOAT64 ? 10 : 4;
    CHECK(musa_tensor_dtype(out[0]) == dt);
    CHECK(musa_tensor_dtype(out[1]) == (dt == MUSA_DTYPE_FLOAT64 ? dt : MUSA_DTYPE_FLOAT32));
    near("out", out[0], want, no, sc);
    near("lse", out[1], lse, c->B * c->Tq, sc);
    if (bwd) {
        int bid = musa_op_lookup("scaled_dot_product_attention_backward");
        musa_attrs *ba = musa_attrs_new(bid);
        musa_attrs_set_float(ba, "scale", c->scale);
        musa_attrs_set_bool(ba, "causal", c->causal);
        musa_tensor *in[7] = {g, q, k, v, out[0], out[1], mask};
        int rc = musa_op_call(bid, mask ? 7 : 6, in, ba, grads);
        musa_attrs_free(ba);
        CHECK_OK(rc);
        double gs = sc * 2;
        near("dq", grads[0], dq, nq, gs);
        near("dk", grads[1], dk, nk, gs);
        near("dv", grads[2], dvw, nv, gs);
    }
    musa_attrs_free(a);
    free(qv), free(kv), free(vv), free(gv), free(want);
    release_all(11, q, k, v, g, mask, out[0], out[1], out[2], grads[0], grads[1], grads[2]);
}

/* Every case in every float dtype and layout. */
static void att_all(const att_case *cases, size_t n, bool bwd) {
    for (size_t i = 0; i < n; i++)
        for (int d = 0; d < 4; d++)
            for (int lay = 0; lay < L_COUNT; lay++)
                att_check(&cases[i], FLOAT_DTYPES[d], (layout)lay, bwd);
}

static const bool MASK_3x4[] = {1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1};
static bool TRIL_16[256]; /* keep keys up to the query's position: causal, as a mask */
static const bool *tril_16(void) {
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) TRIL_16[i * 16 + j] = j <= i;
    return TRIL_16;
}

TEST(op_scaled_dot_product_attention) {
    const att_case cases[] = {
        {.B = 2, .Tq = 3, .Tk = 4, .E = 5, .Ev = 2, .scale = 0.4},
        {.B = 2, .Tq = 3, .Tk = 4, .E = 5, .Ev = 2, .scale = 0.4, .mask = MASK_3x4},
        {.B = 1, .Tq = 70, .Tk = 66, .E = 4, .Ev = 3, .scale = 0.5, .causal = true},
        {.B = 3, .Tq = 1, .Tk = 1, .E = 1, .Ev = 1, .scale = 2},
        /* float32's small-product kernels: rows past a block of 8, more
         * columns than one 64-wide pass, products at and past their 128
         * limit, and a causal mask given as a bool tensor */
        {.B = 1, .Tq = 130, .Tk = 130, .E = 40, .Ev = 72, .scale = 0.2, .causal = true},
        {.B = 1, .Tq = 67, .Tk = 67, .E = 128, .Ev = 130, .scale = 0.1, .causal = true},
        {.B = 2, .Tq = 16, .Tk = 16, .E = 17, .Ev = 33, .scale = 0.3, .mask = tril_16()},
    };
    att_all(cases, sizeof cases / sizeof cases[0], false);
}

TEST(op_scaled_dot_product_attention_backward) {
    const att_case cases[] = {
        {.B = 2, .Tq = 3, .Tk = 4, .E = 5, .Ev = 2, .scale = 0.4, .mask = MASK_3x4},
        {.B = 1, .Tq = 70, .Tk = 66, .E = 4, .Ev = 3, .scale = 0.5, .causal = true},
        {.B = 2, .Tq = 5, .Tk = 3, .E = 2, .Ev = 4, .scale = 1},
        {.B = 1, .Tq = 130, .Tk = 130, .E = 40, .Ev = 72, .scale = 0.2, .causal = true},
        {.B = 1, .Tq = 67, .Tk = 67, .E = 128, .Ev = 130, .scale = 0.1, .causal = true},
        {.B = 2, .Tq = 16, .Tk = 16, .E = 17, .Ev = 33, .scale = 0.3, .mask = tril_16()},
    };
    att_all(cases, sizeof cases / sizeof cases[0], true);
}

/* A bool mask that keeps exactly the causal triangle takes the causal
 * kernels (the kernel recognises it): the same bits as causal = true,
 * forward and backward; one key more and it is an ordinary mask again. */
TEST(scaled_dot_product_attention_tril_mask_is_causal) {
    musa_tensor *q = rnd(MUSA_DTYPE_FLOAT32, 3, S(2, 16, 24), -2, 2, L_CONTIG);
    musa_tensor *g = rnd(MUSA_DTYPE_FLOAT32, 3, S(2, 16, 24), -1, 1, L_CONTIG);
    double m[256];
    for (int i = 0; i < 256; i++) m[i] = tril_16()[i];
    musa_tensor *tril = from_list(MUSA_DTYPE_BOOL, 2, S(16, 16), m);
    m[1] = 1; /* row 0 sees key 1 too */
    musa_tensor *other = from_list(MUSA_DTYPE_BOOL, 2, S(16, 16), m);
    int id = musa_op_lookup("scaled_dot_product_attention");
    int bid = musa_op_lookup("scaled_dot_product_attention_backward");
    musa_tensor *res[3][5] = {{NULL}};
    musa_tensor *masks[3] = {NULL, tril, other};
    for (int c = 0; c < 3; c++) {
        musa_attrs *a = musa_attrs_new(id), *ba = musa_attrs_new(bid);
        musa_attrs_set_float(a, "scale", 0.3), musa_attrs_set_float(ba, "scale", 0.3);
        musa_attrs_set_bool(a, "causal", c == 0), musa_attrs_set_bool(ba, "causal", c == 0);
        CHECK_OK(musa_op_call(id, c ? 4 : 3, (musa_tensor *[]){q, q, q, masks[c]}, a, res[c]));
        musa_tensor *in[7] = {g, q, q, q, res[c][0], res[c][1], masks[c]};
        CHECK_OK(musa_op_call(bid, c ? 7 : 6, in, ba, res[c] + 2));
        musa_attrs_free(a), musa_attrs_free(ba);
    }
    for (int t = 0; t < 5; t++) {
        double *want = values(res[0][t]), *got = values(res[1][t]), *far = values(res[2][t]);
        int64_t n = musa_tensor_numel(res[0][t]);
        CHECK(memcmp(want, got, sizeof(double) * (size_t)n) == 0);
        CHECK(memcmp(want, far, sizeof(double) * (size_t)n) != 0);
        free(want), free(got), free(far);
    }
    for (int c = 0; c < 3; c++)
        for (int t = 0; t < 5; t++) musa_tensor_release(res[c][t]);
    release_all(4, q, g, tril, other);
}

/* A query row that may attend no key is NaN, as softmax over -inf makes it. */
TEST(scaled_dot_product_attention_masked_row_is_nan) {
    const double mv[] = {0, 0, 1, 1};
    musa_tensor *m = from_list(MUSA_DTYPE_BOOL, 2, S(2, 2), mv);
    musa_tensor *q = musa_ones(2, S(2, 3), MUSA_DTYPE_FLOAT32);
    musa_tensor *y = musa_scaled_dot_product_attention(q, q, q, m, 1, false);
    CHECK(y != NULL);
    double *v = values(y);
    CHECK(isnan(v[0]) && isnan(v[2]) && v[3] == 1 && v[5] == 1);
    free(v);
    release_all(3, m, q, y);
}

TEST(scaled_dot_product_attention_rejects_bad_operands) {
    musa_tensor *q = musa_ones(3, S(2, 3, 4), MUSA_DTYPE_FLOAT32);
    musa_tensor *k5 = musa_ones(3, S(2, 3, 5), MUSA_DTYPE_FLOAT32);
    musa_tensor *kb = musa_ones(3, S(3, 3, 4), MUSA_DTYPE_FLOAT32);
    musa_tensor *qi = musa_ones(3, S(2, 3, 4), MUSA_DTYPE_INT64);
    musa_tensor *mf = musa_ones(2, S(3, 3), MUSA_DTYPE_FLOAT32);
    musa_tensor *mb = musa_ones(2, S(2, 3), MUSA_DTYPE_BOOL);
    musa_tensor *m = musa_ones(2, S(3, 3), MUSA_DTYPE_BOOL);
    musa_tensor *v2 = musa_ones(1, S(4), MUSA_DTYPE_FLOAT32);
    CHECK_ERR(musa_scaled_dot_product_attention(q, k5, q, NULL, 1, false) != NULL, MUSA_ERR_VALUE,
              "[scaled_dot_product_attention] query (2, 3, 4), key (2, 3, 5)");
    CHECK_ERR(musa_scaled_dot_product_attention(q, kb, kb, NULL, 1, false) != NULL, MUSA_ERR_VALUE,
              "do not fit");
    CHECK_ERR(musa_scaled_dot_product_attention(v2, v2, v2, NULL, 1, false) != NULL, MUSA_ERR_VALUE,
              "do not fit");
    CHECK_ERR(musa_scaled_dot_product_attention(qi, qi, qi, NULL, 1, false) != NULL, MUSA_ERR_TYPE,
              "must be floating point, got int64");
    CHECK_ERR(musa_scaled_dot_product_attention(q, q, q, mf, 1, false) != NULL, MUSA_ERR_VALUE,
              "the mask must be bool and broadcast to the scores' shape (2, 3, 3), got float32");
    CHECK_ERR(musa_scaled_dot_product_attention(q, q, q, mb, 1, false) != NULL, MUSA_ERR_VALUE,
              "got bool (2, 3)");
    CHECK_ERR(musa_scaled_dot_product_attention(q, q, q, m, 1, true) != NULL, MUSA_ERR_VALUE,
              "either a mask or causal");
    CHECK_ERR(musa_scaled_dot_product_attention(q, q, q, NULL, NAN, false) != NULL, MUSA_ERR_VALUE,
              "scale is NaN");
    /* the backward op through the generic API: operands that do not fit */
    int bid = musa_op_lookup("scaled_dot_product_attention_backward");
    musa_attrs *a = musa_attrs_new(bid);
    musa_tensor *lse = musa_ones(2, S(2, 3), MUSA_DTYPE_FLOAT32), *out[3] = {NULL};
    CHECK_ERR(musa_op_call(bid, 6, (musa_tensor *[]){q, q, q, q, q, k5}, a, out) == MUSA_OK,
              MUSA_ERR_VALUE, "do not fit");
    CHECK_ERR(musa_op_call(bid, 6, (musa_tensor *[]){k5, q, q, q, q, lse}, a, out) == MUSA_OK,
              MUSA_ERR_VALUE, "the gradient, output or log-sum-exp do not fit");
    CHECK_ERR(musa_op_call(bid, 5, (musa_tensor *[]){q, q, q, q, q}, a, out) == MUSA_OK,
              MUSA_ERR_VALUE, "takes 6 or 7 tensors, got 5");
    musa_attrs_free(a);
    release_all(9, q, k5, kb, qi, mf, mb, m, v2, lse);
}

/* The eager-bits mode (attribute exact 1-3, set by the attention pass) is
 * the written-out ops bit for bit: q k^T, the scale as `* c`, `/ c` or
 * none, masked_fill(-inf), softmax, @ v. Float64 runs the fused formulas;
 * a mode past 3 is an error. */
static bool bits_equal(const musa_tensor *a, const musa_tensor *b) {
    return a && b && musa_tensor_numel(a) == musa_tensor_numel(b) &&
           !memcmp(musa_tensor_data(a), musa_tensor_data(b),
                   (size_t)musa_tensor_numel(a) * sizeof(float));
}

TEST(scaled_dot_product_attention_exact_is_the_written_out_ops) {
    const double c = 0.17677669529663687; /* 1 / sqrt(32): rounds in float32 */
    int id = musa_op_lookup("scaled_dot_product_attention");
    musa_tensor *q = rnd(MUSA_DTYPE_FLOAT32, 3, S(2, 32, 16), -2, 2, L_CONTIG);
    musa_tensor *k = rnd(MUSA_DTYPE_FLOAT32, 3, S(2, 40, 16), -2, 2, L_STRIDED);
    musa_tensor *v = rnd(MUSA_DTYPE_FLOAT32, 3, S(2, 40, 8), -1, 1, L_CONTIG);
    double keep[32 * 40];
    for (int i = 0; i < 32 * 40; i++) keep[i] = (i * 7 + i / 40) % 5 != 0;
    musa_tensor *m = from_list(MUSA_DTYPE_BOOL, 2, S(32, 40), keep);
    musa_tensor *masked = musa_logical_not(m), *num = musa_number(c);
    musa_tensor *kt = musa_transpose(k, 1, 2), *s = musa_matmul(q, kt);
    for (int mode = 1; mode <= 3; mode++) {
        musa_tensor *scaled = mode == 2 ? musa_mul(s, num) : mode == 3 ? musa_div(s, num) : NULL;
        musa_tensor *f = musa_masked_fill(scaled ? scaled : s, masked, -INFINITY);
        musa_tensor *p = musa_softmax(f, -1), *want = musa_matmul(p, v);
        musa_attrs *a = musa_attrs_new(id);
        musa_attrs_set_float(a, "scale", mode == 1 ? 1 : c);
        musa_attrs_set_int(a, "exact", mode);
        musa_tensor *out[2] = {NULL, NULL};
        CHECK_OK(musa_op_call(id, 4, (musa_tensor *[]){q, k, v, m}, a, out));
        CHECK(bits_equal(out[0], want));
        musa_attrs_free(a);
        release_all(6, scaled, f, p, want, out[0], out[1]);
    }
    /* float64 data take the fused formulas (eager's bits are float32's) */
    musa_tensor *q64 = rnd(MUSA_DTYPE_FLOAT64, 3, S(1, 16, 16), -1, 1, L_CONTIG);
    musa_attrs *a = musa_attrs_new(id);
    musa_attrs_set_int(a, "exact", 2);
    musa_tensor *out[2] = {NULL, NULL};
    CHECK_OK(musa_op_call(id, 3, (musa_tensor *[]){q64, q64, q64}, a, out));
    release_all(2, out[0], out[1]);
    musa_attrs_set_int(a, "exact", 7);
    CHECK_ERR(musa_op_call(id, 3, (musa_tensor *[]){q64, q64, q64}, a, out) == MUSA_OK,
              MUSA_ERR_VALUE, "[scaled_dot_product_attention] exact must be 0, 1, 2 or 3, got 7");
    int bid = musa_op_lookup("scaled_dot_product_attention_backward");
    musa_attrs *ba = musa_attrs_new(bid);
    musa_attrs_set_int(ba, "exact", -1);
    musa_tensor *lse = musa_ones(2, S(1, 16), MUSA_DTYPE_FLOAT64), *g3[3] = {NULL};
    CHECK_ERR(musa_op_call(bid, 6, (musa_tensor *[]){q64, q64, q64, q64, q64, lse}, ba, g3) ==
                  MUSA_OK,
              MUSA_ERR_VALUE, "exact must be 0, 1, 2 or 3, got -1");
    musa_attrs_free(a), musa_attrs_free(ba);
    release_all(9, q, k, v, m, masked, num, kt, s, q64);
    musa_tensor_release(lse);
}

/* The attribute plus_zero (the padsum pass's) adds +0.0 to what the
 * backward stores: a key's gradient that underflows to -0.0 (one product,
 * the last key of a causal head, q the smallest subnormal) comes out
 * +0.0, and every other element keeps its bits. */
TEST(scaled_dot_product_attention_backward_plus_zero) {
    int id = musa_op_lookup("scaled_dot_product_attention");
    int bid = musa_op_lookup("scaled_dot_product_attention_backward");
    double qv[16 * 16];
    for (int i = 0; i < 16 * 16; i++) qv[i] = (i % 2 ? -1 : 1) * 1.401298464324817e-45;
    musa_tensor *q = from_list(MUSA_DTYPE_FLOAT32, 3, S(1, 16, 16), qv);
    musa_tensor *k = rnd(MUSA_DTYPE_FLOAT32, 3, S(1, 16, 16), -2, 2, L_CONTIG);
    musa_tensor *v = rnd(MUSA_DTYPE_FLOAT32, 3, S(1, 16, 16), -2, 2, L_CONTIG);
    musa_tensor *g = rnd(MUSA_DTYPE_FLOAT32, 3, S(1, 16, 16), -1, 1, L_CONTIG);
    for (int exact = 0; exact <= 1; exact++) {
        musa_attrs *a = musa_attrs_new(id), *ba = musa_attrs_new(bid);
        for (int w = 0; w < 2; w++) {
            musa_attrs_set_bool(w ? ba : a, "causal", true);
            musa_attrs_set_int(w ? ba : a, "exact", exact);
        }
        musa_tensor *o[2] = {NULL, NULL}, *plain[3] = {NULL}, *plus[3] = {NULL};
        CHECK_OK(musa_op_call(id, 3, (musa_tensor *[]){q, k, v}, a, o));
        musa_tensor *in[6] = {g, q, k, v, o[0], o[1]};
        CHECK_OK(musa_op_call(bid, 6, in, ba, plain));
        musa_attrs_set_bool(ba, "plus_zero", true);
        CHECK_OK(musa_op_call(bid, 6, in, ba, plus));
        int neg = 0, bad = 0;
        for (int t = 0; t < 3; t++) {
            const float *x = musa_tensor_data(plain[t]), *y = musa_tensor_data(plus[t]);
            for (int i = 0; i < 16 * 16; i++) {
                neg += x[i] == 0 && signbit(x[i]);
                float want = x[i] + 0.0f;
                bad += memcmp(&want, &y[i], sizeof want) != 0;
            }
        }
        CHECK(neg > 0 || !exact); /* the fused formulas sum from +0 into dK: no -0 */
        CHECK(bad == 0);
        musa_attrs_free(a), musa_attrs_free(ba);
        release_all(8, o[0], o[1], plain[0], plain[1], plain[2], plus[0], plus[1], plus[2]);
    }
    release_all(4, q, k, v, g);
}
