/*
 * format.c - PyTorch-style text of a tensor: tensor([[1., 2.], [3., 4.]]).
 *
 * Floats print as integers with a trailing dot when every finite value is
 * integral, in scientific notation when the range is wide, else with four
 * decimals; all elements share one width. Tensors over 1000 elements show
 * the first and last 3 entries of each dim around "...". Non-default dtypes
 * (other than float32, int64, bool) are named.
 */
#include <math.h>
#include <stdio.h>

#include "tensor.h"

typedef struct {
    char *s;
    size_t len, cap;
    bool oom;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        /* the first call only measures: no pointer arithmetic on a NULL buffer */
        int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if (b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t ncap = (b->cap + (size_t)n + 1) * 2;
        char *p = realloc(b->s, ncap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->s = p;
        b->cap = ncap;
    }
}

typedef struct {
    const musa_tensor *t;
    bool summarize;
    int mode; /* 0 ints/bools, 1 integral floats, 2 fixed, 3 scientific */
    int width;
    int indent;
} fmt_state;

#define EDGE 3

static double elem(const musa_tensor *t, const int64_t *idx) {
    int64_t off = 0;
    for (int i = 0; i < t->ndim; i++) off += idx[i] * t->strides[i];
    const char *p =
        (const char *)musa_tensor_data(t) + off * (int64_t)musa_dtype_info[t->dtype].size;
    return musa_load_f64(p, (musa_dtype)t->dtype);
}

static int64_t elem_i(const musa_tensor *t, const int64_t *idx) {
    int64_t off = 0;
    for (int i = 0; i < t->ndim; i++) off += idx[i] * t->strides[i];
    const char *p =
        (const char *)musa_tensor_data(t) + off * (int64_t)musa_dtype_info[t->dtype].size;
    return musa_load_i64(p, (musa_dtype)t->dtype);
}

static void value_text(const fmt_state *f, const int64_t *idx, char *out, size_t n) {
    const musa_tensor *t = f->t;
    if (t->dtype == MUSA_DTYPE_BOOL) {
        snprintf(out, n, "%s", elem_i(t, idx) ? "True" : "False");
        return;
    }
    if (!musa_is_float((musa_dtype)t->dtype)) {
        snprintf(out, n, "%lld", (long long)elem_i(t, idx));
        return;
    }
    double v = elem(t, idx);
    if (v != v)
        snprintf(out, n, "nan");
    else if (isinf(v))
        snprintf(out, n, v > 0 ? "inf" : "-inf");
    else if (f->mode == 1)
        snprintf(out, n, "%.0f.", v);
    else if (f->mode == 2)
        snprintf(out, n, "%.4f", v);
    else
        snprintf(out, n, "%.4e", v);
}

/* Visit shown elements (respecting summarisation) for the width pass. */
static void scan(fmt_state *f, int dim, int64_t *idx, double *lo, double *hi, bool *integral) {
    const musa_tensor *t = f->t;
    if (dim == t->ndim) {
        if (musa_is_float((musa_dtype)t->dtype)) {
            double v = elem(t, idx);
            if (isfinite(v)) {
                if (v != floor(v)) *integral = false;
                double a = fabs(v);
                if (a != 0) {
                    *lo = a < *lo ? a : *lo;
                    *hi = a > *hi ? a : *hi;
                }
            }
        }
        /* As in PyTorch, nan and inf do not widen the columns. */
        if (musa_is_float((musa_dtype)t->dtype) && !isfinite(elem(t, idx))) return;
        char s[64];
        value_text(f, idx, s, sizeof s);
        int w = (int)strlen(s);
        if (w > f->width) f->width = w;
        return;
    }
    int64_t n = t->shape[dim];
    for (int64_t i = 0; i < n; i++) {
        if (f->summarize && n > 2 * EDGE && i == EDGE) i = n - EDGE;
        idx[dim] = i;
        scan(f, dim + 1, idx, lo, hi, integral);
    }
}

static void emit(fmt_state *f, sbuf *b, int dim, int64_t *idx) {
    const musa_tensor *t = f->t;
    if (dim == t->ndim) {
        char s[64];
        value_text(f, idx, s, sizeof s);
        put(b, "%*s", f->width, s);
        return;
    }
    put(b, "[");
    int64_t n = t->shape[dim];
    for (int64_t i = 0; i < n; i++) {
        if (f->summarize && n > 2 * EDGE && i == EDGE) {
            if (dim == t->ndim - 1)
                put(b, " ..., "); /* PyTorch pads the 1-d ellipsis */
            else {
                put(b, "...,");
                for (int k = 0; k < t->ndim - dim - 1; k++) put(b, "\n");
                put(b, "%*s", f->indent + dim + 1, "");
            }
            i = n - EDGE;
        }
        idx[dim] = i;
        emit(f, b, dim + 1, idx);
        if (i + 1 < n) {
            if (dim == t->ndim - 1)
                put(b, ", ");
            else {
                put(b, ",");
                for (int k = 0; k < t->ndim - dim - 1; k++) put(b, "\n");
                put(b, "%*s", f->indent + dim + 1, "");
            }
        }
    }
    put(b, "]");
}

int musa_tensor_format(const musa_tensor *t, char *buf, size_t buf_size) {
    sbuf b = {0};
    if (musa_tensor_sync(t)) { /* stream work that was to produce it failed */
        if (buf_size) buf[0] = '\0';
        return -1;
    }
    if (!t)
        put(&b, "None");
    else if (!t->storage) {
        char s[160];
        put(&b, "tensor(..., size=%s, dtype=musa.%s, meta)",
            musa_shape_str(t->ndim, t->shape, s, sizeof s), musa_dtype_name((musa_dtype)t->dtype));
    } else {
        fmt_state f = {.t = t, .summarize = t->numel > 1000, .indent = 7};
        int64_t idx[MUSA_MAX_DIMS] = {0};
        put(&b, "tensor(");
        if (t->numel == 0) {
            put(&b, "[]");
            if (t->ndim != 1) {
                char s[160];
                put(&b, ", size=%s", musa_shape_str(t->ndim, t->shape, s, sizeof s));
            }
        } else {
            if (musa_is_float((musa_dtype)t->dtype)) {
                double lo = INFINITY, hi = 0;
                bool integral = true;
                f.mode = 2;
                scan(&f, 0, idx, &lo, &hi, &integral);
                if (integral)
                    f.mode = hi > 1e8 ? 3 : 1;
                else
                    f.mode = (hi / lo > 1000 || hi > 1e8 || lo < 1e-4) ? 3 : 2;
                f.width = 0;
            }
            double lo = INFINITY, hi = 0;
            bool integral = true;
            scan(&f, 0, idx, &lo, &hi, &integral);
            emit(&f, &b, 0, idx);
        }
        musa_dtype d = (musa_dtype)t->dtype;
        if (d != MUSA_DTYPE_FLOAT32 && d != MUSA_DTYPE_INT64 && d != MUSA_DTYPE_BOOL)
            put(&b, ", dtype=musa.%s", musa_dtype_name(d));
        put(&b, ")");
    }
    int n = b.oom ? -1 : (int)b.len;
    if (buf_size) {
        size_t k = b.len < buf_size - 1 ? b.len : buf_size - 1;
        if (b.s) memcpy(buf, b.s, k);
        buf[k] = '\0';
    }
    free(b.s);
    if (n < 0) musa_err_nomem("format", 0);
    return n;
}
