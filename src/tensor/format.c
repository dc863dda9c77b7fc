/*
 * format.c - PyTorch-style text of a tensor: tensor([[1., 2.], [3., 4.]]).
 *
 * Floats print as integers with a trailing dot when every finite value is
 * integral, in scientific notation when the range is wide, else with four
 * decimals; all elements share one width. Tensors over 1000 elements show
 * the first and last 3 entries of each dim around "...". Rows wrap at 80
 * columns as PyTorch's do (as many elements a line as fit past the row's
 * indent). Non-default dtypes (other than float32, int64, bool) are named.
 * The numbers (decimals, 1000, 3, 80) and the choice of scientific notation
 * are the process's print options (musa_set_print_options).
 */
#include <math.h>
#include <stdatomic.h>
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
    int precision, edge, linewidth; /* the print options when the call began */
} fmt_state;

/* the print options, set rarely (atomics: a print on another thread reads
 * either the old or the new value of each) */
static _Atomic int opt_precision = 4, opt_edgeitems = 3, opt_linewidth = 80, opt_sci_mode = -1;
static _Atomic int64_t opt_threshold = 1000;

int musa_set_print_options(const musa_print_options *o) {
    if (!o) return musa_err(MUSA_ERR_VALUE, "[set_printoptions] options are NULL");
    if (o->precision < 0 || o->precision > 30 || o->threshold < 0 || o->edgeitems < 0 ||
        o->linewidth < 1 || o->sci_mode < -1 || o->sci_mode > 1)
        return musa_err(MUSA_ERR_VALUE,
                        "[set_printoptions] precision must be in [0, 30], threshold and edgeitems "
                        ">= 0, linewidth >= 1 and sci_mode -1, 0 or 1; got %d, %lld, %d, %d, %d",
                        o->precision, (long long)o->threshold, o->edgeitems, o->linewidth,
                        o->sci_mode);
    opt_precision = o->precision;
    opt_threshold = o->threshold;
    opt_edgeitems = o->edgeitems;
    opt_linewidth = o->linewidth;
    opt_sci_mode = o->sci_mode;
    return MUSA_OK;
}

void musa_get_print_options(musa_print_options *o) {
    if (!o) return;
    o->precision = opt_precision;
    o->threshold = opt_threshold;
    o->edgeitems = opt_edgeitems;
    o->linewidth = opt_linewidth;
    o->sci_mode = opt_sci_mode;
}

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
        snprintf(out, n, "%.*f", f->precision, v);
    else
        snprintf(out, n, "%.*e", f->precision, v);
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
        char s[400];
        value_text(f, idx, s, sizeof s);
        int w = (int)strlen(s);
        if (w > f->width) f->width = w;
        return;
    }
    int64_t n = t->shape[dim];
    for (int64_t i = 0; i < n; i++) {
        if (f->summarize && n > 2 * f->edge && i == f->edge) i = n - f->edge;
        idx[dim] = i;
        scan(f, dim + 1, idx, lo, hi, integral);
    }
}

/* A row (the last dim): PyTorch's vector layout, as many elements a line
 * as fit in linewidth past the row's indent, the ellipsis counting as one. */
static void emit_row(fmt_state *f, sbuf *b, int dim, int64_t *idx) {
    int64_t n = f->t->shape[dim];
    int indent = f->indent + dim, per_line = (f->linewidth - indent) / (f->width + 2);
    if (per_line < 1) per_line = 1;
    put(b, "[");
    int64_t item = 0;
    for (int64_t i = 0; i < n; i++, item++) {
        if (item) {
            if (item % per_line)
                put(b, ", ");
            else
                put(b, ",\n%*s", indent + 1, "");
        }
        if (f->summarize && n > 2 * f->edge && i == f->edge) {
            if (!f->edge) { /* no edge items: the ellipsis alone */
                put(b, "...");
                break;
            }
            put(b, " ..."); /* PyTorch pads the row's ellipsis */
            i = n - f->edge - 1;
            continue;
        }
        idx[dim] = i;
        char s[400];
        value_text(f, idx, s, sizeof s);
        put(b, "%*s", f->width, s);
    }
    put(b, "]");
}

static void emit(fmt_state *f, sbuf *b, int dim, int64_t *idx) {
    const musa_tensor *t = f->t;
    if (dim == t->ndim) { /* a 0-d tensor */
        char s[400];
        value_text(f, idx, s, sizeof s);
        put(b, "%*s", f->width, s);
        return;
    }
    if (dim == t->ndim - 1) {
        emit_row(f, b, dim, idx);
        return;
    }
    put(b, "[");
    int64_t n = t->shape[dim];
    for (int64_t i = 0; i < n; i++) {
        if (f->summarize && n > 2 * f->edge && i == f->edge) {
            if (!f->edge) {
                put(b, "...");
                break;
            }
            put(b, "...,");
            for (int k = 0; k < t->ndim - dim - 1; k++) put(b, "\n");
            put(b, "%*s", f->indent + dim + 1, "");
            i = n - f->edge;
        }
        idx[dim] = i;
        emit(f, b, dim + 1, idx);
        if (i + 1 < n) {
            put(b, ",");
            for (int k = 0; k < t->ndim - dim - 1; k++) put(b, "\n");
            put(b, "%*s", f->indent + dim + 1, "");
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
        fmt_state f = {.t = t,
                       .summarize = t->numel > opt_threshold,
                       .indent = 7,
                       .precision = opt_precision,
                       .edge = opt_edgeitems,
                       .linewidth = opt_linewidth};
        int sci = opt_sci_mode, forced = -1;
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
                if (integral) /* as PyTorch: whole numbers too go scientific past 1000x */
                    f.mode = (hi / lo > 1000 || hi > 1e8) ? 3 : 1;
                else
                    f.mode = (hi / lo > 1000 || hi > 1e8 || lo < 1e-4) ? 3 : 2;
                f.width = 0;
                forced = sci == 1 ? 3 : (sci == 0 && f.mode == 3) ? (integral ? 1 : 2) : -1;
            }
            double lo = INFINITY, hi = 0;
            bool integral = true;
            scan(&f, 0, idx, &lo, &hi, &integral);
            /* a forced notation prints in the width the automatic one
             * measured, as PyTorch's formatter does (so rows wrap alike) */
            if (forced >= 0) f.mode = forced;
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
