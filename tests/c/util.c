/*
 * util.c - see util.h. The reference values are computed here in float64
 * with code independent of the kernels under test.
 */
#include "util.h"

#include "base/dtype.h"
#include "jit/graph.h"
#include "jit/plan.h"

#include <stdarg.h>

const musa_dtype ALL_DTYPES[9] = {MUSA_DTYPE_FLOAT32,  MUSA_DTYPE_FLOAT64, MUSA_DTYPE_FLOAT16,
                                  MUSA_DTYPE_BFLOAT16, MUSA_DTYPE_INT64,   MUSA_DTYPE_INT32,
                                  MUSA_DTYPE_INT8,     MUSA_DTYPE_UINT8,   MUSA_DTYPE_BOOL};
const musa_dtype FLOAT_DTYPES[4] = {MUSA_DTYPE_FLOAT32, MUSA_DTYPE_FLOAT64, MUSA_DTYPE_FLOAT16,
                                    MUSA_DTYPE_BFLOAT16};

static uint64_t state = 0x9e3779b97f4a7c15ull;

void useed(uint64_t seed) {
    state = seed ? seed : 1;
}

double urand(void) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return (double)(state >> 11) * (1.0 / 9007199254740992.0);
}

double round_to(double v, musa_dtype d) {
    switch (d) {
    case MUSA_DTYPE_FLOAT64:
        return v;
    case MUSA_DTYPE_FLOAT32:
        return (float)v;
    case MUSA_DTYPE_FLOAT16: {
        musa_f16 h = MUSA_TO_F16(v);
        return (double)h;
    }
    case MUSA_DTYPE_BFLOAT16: {
        /* nearest bfloat16, ties to even, computed on the double itself */
        if (v != v || isinf(v) || v == 0) return v;
        int e;
        double m = frexp(fabs(v), &e); /* |v| = m 2^e, m in [0.5, 1) */
        double scaled = ldexp(m, 8);   /* 8 significant bits */
        double fl = floor(scaled), r = scaled - fl;
        if (r > 0.5 || (r == 0.5 && fmod(fl, 2) == 1)) fl += 1;
        double out = ldexp(fl, e - 8);
        if (out > 3.3895313892515355e38) out = INFINITY; /* beyond bf16 max */
        return v < 0 ? -out : out;
    }
    case MUSA_DTYPE_BOOL:
        return v != 0;
    case MUSA_DTYPE_INT64:
        if (v != v) return 0;
        if (v >= 9223372036854775807.0) return 9223372036854775807.0;
        if (v <= -9223372036854775808.0) return -9223372036854775808.0;
        return trunc(v);
    case MUSA_DTYPE_INT32:
        return v != v ? 0 : fmax(fmin(trunc(v), 2147483647.0), -2147483648.0);
    case MUSA_DTYPE_INT8:
        return v != v ? 0 : fmax(fmin(trunc(v), 127.0), -128.0);
    case MUSA_DTYPE_UINT8:
        return v != v ? 0 : fmax(fmin(trunc(v), 255.0), 0.0);
    default:
        return v;
    }
}

int64_t wrap_int(int64_t i, musa_dtype d) {
    switch (d) {
    case MUSA_DTYPE_INT32:
        return (int32_t)(uint32_t)(uint64_t)i;
    case MUSA_DTYPE_INT8:
        return (int8_t)(uint8_t)(uint64_t)i;
    case MUSA_DTYPE_UINT8:
        return (uint8_t)(uint64_t)i;
    case MUSA_DTYPE_BOOL:
        return i != 0;
    default:
        return i;
    }
}

double wrap_to(double v, musa_dtype d) {
    if (musa_dtype_is_floating(d) || d == MUSA_DTYPE_BOOL || v != v) return round_to(v, d);
    int64_t i = v >= 9.2233720368547758e18    ? INT64_MAX
                : v <= -9.2233720368547758e18 ? INT64_MIN
                                              : (int64_t)v;
    return (double)wrap_int(i, d);
}

int64_t numel_of(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

void unravel(int64_t i, int ndim, const int64_t *shape, int64_t *idx) {
    for (int d = ndim - 1; d >= 0; d--) {
        idx[d] = shape[d] ? i % shape[d] : 0;
        i = shape[d] ? i / shape[d] : 0;
    }
}

int64_t ravel(int ndim, const int64_t *shape, const int64_t *idx) {
    int64_t i = 0;
    for (int d = 0; d < ndim; d++) i = i * shape[d] + idx[d];
    return i;
}

musa_tensor *from_list(musa_dtype dtype, int ndim, const int64_t *shape, const double *v) {
    musa_tensor *t64 = musa_from_data(v, ndim, shape, MUSA_DTYPE_FLOAT64);
    musa_tensor *t = musa_cast(t64, dtype);
    musa_tensor_release(t64);
    return t;
}

musa_tensor *rnd(musa_dtype dtype, int ndim, const int64_t *shape, double lo, double hi,
                 layout lay) {
    int64_t phys[MUSA_MAX_DIMS];
    for (int i = 0; i < ndim; i++) phys[i] = shape[i];
    if (lay == L_TRANSPOSED && ndim >= 2) {
        phys[ndim - 2] = shape[ndim - 1];
        phys[ndim - 1] = shape[ndim - 2];
    } else if (lay == L_STRIDED && ndim >= 1) {
        phys[ndim - 1] = shape[ndim - 1] * 2;
    }
    int64_t n = numel_of(ndim, phys);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) {
        double x = lo + (hi - lo) * urand();
        if (dtype == MUSA_DTYPE_BOOL)
            x = urand() < 0.5;
        else if (!musa_dtype_is_floating(dtype))
            x = floor(x);
        v[i] = x;
    }
    musa_tensor *base = from_list(dtype, ndim, phys, v);
    free(v);
    musa_tensor *r = NULL;
    if (lay == L_TRANSPOSED && ndim >= 2)
        r = musa_transpose(base, ndim - 2, ndim - 1);
    else if (lay == L_STRIDED && ndim >= 1)
        r = musa_slice(base, ndim - 1, 0, phys[ndim - 1], 2);
    else
        r = musa_tensor_retain(base);
    musa_tensor_release(base);
    return r;
}

double *values(const musa_tensor *t) {
    if (!t) return NULL;
    musa_tensor *d = musa_cast((musa_tensor *)t, MUSA_DTYPE_FLOAT64);
    int64_t n = musa_tensor_numel(t);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!d || musa_tensor_copy_to(d, v, sizeof(double) * (size_t)(n ? n : 1))) {
        free(v);
        v = NULL;
    }
    musa_tensor_release(d);
    return v;
}

int64_t *ivalues(const musa_tensor *t) {
    if (!t) return NULL;
    musa_tensor *d = musa_cast((musa_tensor *)t, MUSA_DTYPE_INT64);
    int64_t n = musa_tensor_numel(t);
    int64_t *v = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!d || musa_tensor_copy_to(d, v, sizeof(int64_t) * (size_t)(n ? n : 1))) {
        free(v);
        v = NULL;
    }
    musa_tensor_release(d);
    return v;
}

double tol_rel(musa_dtype d) {
    switch (d) {
    case MUSA_DTYPE_FLOAT64:
        return 1e-7;
    case MUSA_DTYPE_FLOAT32:
        return 1.3e-6;
    case MUSA_DTYPE_FLOAT16:
        return 1e-3;
    case MUSA_DTYPE_BFLOAT16:
        return 1.6e-2;
    default:
        return 0;
    }
}

double tol_abs(musa_dtype d) {
    switch (d) {
    case MUSA_DTYPE_FLOAT64:
        return 1e-7;
    case MUSA_DTYPE_FLOAT32:
        return 1e-5;
    case MUSA_DTYPE_FLOAT16:
        return 1e-3;
    case MUSA_DTYPE_BFLOAT16:
        return 1.6e-2;
    default:
        return 0;
    }
}

bool close_to(const char *what, musa_dtype d, const double *got, const double *want, int64_t n,
              const char *file, int line) {
    if (!got || !want) {
        harness_fail(file, line, "%s: missing values (%s)", what, musa_last_error());
        return false;
    }
    double rt = tol_rel(d), at = tol_abs(d);
    for (int64_t i = 0; i < n; i++) {
        double g = got[i], w = want[i];
        if (g != g && w != w) continue;
        if (isinf(w) && g == w) continue;
        if (!(fabs(g - w) <= at + rt * fabs(w))) {
            harness_fail(file, line, "%s [%s]: element %lld is %.17g, expected %.17g", what,
                         musa_dtype_name(d), (long long)i, g, w);
            return false;
        }
    }
    return true;
}

bool same_shape(const musa_tensor *t, int ndim, const int64_t *shape) {
    if (!t || musa_tensor_ndim(t) != ndim) return false;
    for (int i = 0; i < ndim; i++)
        if (musa_tensor_shape(t)[i] != shape[i]) return false;
    return true;
}

void release_all(int n, ...) {
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) musa_tensor_release(va_arg(ap, musa_tensor *));
    va_end(ap);
}

/* compare t with want (n values) using dtype tolerance scaled by `scale` */
bool near(const char *what, musa_tensor *t, const double *want, int64_t n, double scale) {
    if (!t) {
        harness_fail(__FILE__, __LINE__, "%s: %s", what, musa_last_error());
        return false;
    }
    musa_dtype d = musa_tensor_dtype(t);
    double *v = values(t);
    bool ok = true;
    for (int64_t i = 0; i < n && ok; i++) {
        double tol = (tol_abs(d) + tol_rel(d) * fabs(want[i])) * scale;
        if (!(fabs(v[i] - want[i]) <= tol) && !(v[i] != v[i] && want[i] != want[i])) {
            harness_fail(__FILE__, __LINE__, "%s [%s]: [%lld] = %.10g, want %.10g", what,
                         musa_dtype_name(d), (long long)i, v[i], want[i]);
            ok = false;
        }
    }
    free(v);
    return ok;
}

double dot(musa_tensor *a, musa_tensor *b) {
    musa_tensor *m = musa_mul(a, b), *s = musa_sum(m, 0, NULL, false);
    double v = NAN;
    musa_tensor_item(s, &v);
    release_all(2, m, s);
    return v;
}

bool same_values(const musa_tensor *a, const musa_tensor *b) {
    if (!a || !b || musa_tensor_dtype(a) != musa_tensor_dtype(b) ||
        !same_shape(a, musa_tensor_ndim(b), musa_tensor_shape(b)))
        return false;
    double *x = values(a), *y = values(b);
    bool ok = x && y;
    for (int64_t i = 0; ok && i < musa_tensor_numel(a); i++)
        ok = (x[i] == y[i]) || (isnan(x[i]) && isnan(y[i]));
    free(x), free(y);
    return ok;
}

/* ---- a custom op for the tests: y = 3 x^2 ---- */

/* y = x * x * 3 elementwise (float32 or float64), written on the raw data */
int custom_same_as_input(void *u, int n_in, const musa_tensor *const *in, musa_dtype *dt, int *ndim,
                         int64_t (*shape)[MUSA_MAX_DIMS]) {
    (void)u, (void)n_in;
    musa_dtype d = musa_tensor_dtype(in[0]);
    if (d != MUSA_DTYPE_FLOAT32 && d != MUSA_DTYPE_FLOAT64)
        return musa_set_error(MUSA_ERR_TYPE, "expects float32 or float64, got %s",
                              musa_dtype_name(d));
    dt[0] = d;
    ndim[0] = musa_tensor_ndim(in[0]);
    memcpy(shape[0], musa_tensor_shape(in[0]), sizeof(int64_t) * (size_t)ndim[0]);
    return MUSA_OK;
}

int custom_cube3_forward(void *u, int n_in, musa_tensor *const *in, int n_out,
                         musa_tensor *const *out) {
    (void)u, (void)n_in, (void)n_out;
    int64_t n = musa_tensor_numel(in[0]);
    if (musa_tensor_dtype(in[0]) == MUSA_DTYPE_FLOAT64) {
        const double *x = musa_tensor_data(in[0]);
        double *y = musa_tensor_data(out[0]);
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * x[i] * 3;
    } else {
        const float *x = musa_tensor_data(in[0]);
        float *y = musa_tensor_data(out[0]);
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * x[i] * 3;
    }
    return MUSA_OK;
}

/* d/dx 3 x^2 = 6 x, with musa ops (so it is differentiable too) */
static int cube3_backward(void *u, int n_in, musa_tensor *const *in, int n_out,
                          musa_tensor *const *out, musa_tensor *const *gout, musa_tensor **gin) {
    (void)u, (void)n_in, (void)n_out, (void)out;
    if (!gout[0]) return MUSA_OK;
    musa_tensor *six = musa_number(6);
    musa_tensor *d = musa_mul(in[0], six);
    gin[0] = musa_mul(gout[0], d);
    musa_tensor_release(six), musa_tensor_release(d);
    return gin[0] ? MUSA_OK : musa_last_error_code();
}

int custom_cube3_op(void) {
    static int op = -1;
    if (op >= 0) return op;
    musa_custom_op def = {.name = "test::cube3",
                          .n_in = 1,
                          .n_out = 1,
                          .infer = custom_same_as_input,
                          .forward = custom_cube3_forward,
                          .backward = cube3_backward};
    return op = musa_op_register(&def);
}

musa_tensor *custom_cube3(musa_tensor *x) {
    musa_tensor *y = NULL;
    return musa_custom_op_call(custom_cube3_op(), 1, &x, 1, &y) ? NULL : y;
}

musa_plan *jit_compile_unary(musa_tensor *(*f)(musa_tensor *), musa_tensor *x, int level,
                             const musa_plan_options *opt, musa_graph **gout) {
    musa_graph *g = musa_graph_new();
    musa_tensor *m = musa_empty_meta((musa_dtype)x->dtype, x->ndim, x->shape);
    musa_graph_capture_begin(g, MUSA_CAPTURE_SYMBOLIC);
    musa_graph_add_input(g, m, "x");
    musa_tensor *y = f(m);
    if (y) musa_graph_set_outputs(g, 1, &y);
    int rc = musa_graph_capture_end(g);
    musa_tensor_release(y), musa_tensor_release(m);
    musa_pass_ctx ctx = {.fusion_level = level, .verify = true};
    if (rc || !y || musa_graph_optimize(g, &ctx)) {
        musa_graph_free(g);
        return NULL;
    }
    *gout = g;
    return musa_plan_build(g, opt);
}
