/*
 * index.c - data movement kernels: cat, gather, scatter(_add),
 * index_select, index_add, pad, flip, tril/triu and the scans (cumsum,
 * cumprod, cummax, cummin, logcumsumexp, and cumprod's backward).
 *
 * Most are expressed as strided copies of sub-views (musa_cpu_copy), so
 * they inherit its layout handling and dtype-agnostic speed. Index values
 * are bounds-checked in the loops; a bad index fails the call with an
 * IndexError naming the value and the bound. Scatters run serially so
 * duplicate indices accumulate deterministically.
 */
#include <math.h>
#include <string.h>

#include "../../base/threadpool.h"
#include "elem.h"
#include "iter.h"
#include "kernels.h"

static inline size_t esize(const musa_kview *v) {
    return musa_dtype_info[v->dtype].size;
}

/* v restricted to [start, start+len) along dim. */
static musa_kview narrow(const musa_kview *v, int dim, int64_t start, int64_t len) {
    musa_kview r = *v;
    r.data += start * v->strides[dim] * (int64_t)esize(v);
    r.shape[dim] = len;
    return r;
}

/* v with dim removed at index i. */
static musa_kview select_dim(const musa_kview *v, int dim, int64_t i) {
    musa_kview r = *v;
    r.data += i * v->strides[dim] * (int64_t)esize(v);
    for (int d = dim; d + 1 < v->ndim; d++) {
        r.shape[d] = v->shape[d + 1];
        r.strides[d] = v->strides[d + 1];
    }
    r.ndim = v->ndim - 1;
    return r;
}

int cpu_cat(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
            const void *attrs) {
    MUSA_UNUSED(ctx);
    int dim = (int)((const musa_attrs_dim *)attrs)->dim;
    int64_t at = 0;
    for (int i = 0; i < n_in; i++) {
        musa_kview dst = narrow(&out[0], dim, at, in[i].shape[dim]);
        musa_cpu_copy(&dst, &in[i]);
        at += in[i].shape[dim];
    }
    return MUSA_OK;
}

/* ---- gather / scatter: iterate over the index tensor ---- */

typedef struct {
    int64_t dim_stride; /* bytes along dim in the gathered/scattered tensor */
    int64_t size;       /* its size along dim */
    size_t es;
    musa_bad_index bad;
} idx_ctx;

static inline bool check_index(idx_ctx *c, int64_t *i) {
    if (*i < 0 || *i >= c->size) {
        musa_bad_index_note(&c->bad, *i);
        return false;
    }
    return true;
}

/* ops: [0] out, [1] index, [2] x restrided with stride 0 along dim */
static void gather_loop(void *arg, int64_t n, char **p, const int64_t *s) {
    idx_ctx *c = arg;
    for (int64_t k = 0; k < n; k++) {
        int64_t i = *(const int64_t *)(p[1] + k * s[1]);
        if (!check_index(c, &i)) continue;
        memcpy(p[0] + k * s[0], p[2] + k * s[2] + i * c->dim_stride, c->es);
    }
}

/* ops: [0] out restrided (stride 0 along dim), [1] index, [2] src */
static void scatter_loop(void *arg, int64_t n, char **p, const int64_t *s) {
    idx_ctx *c = arg;
    for (int64_t k = 0; k < n; k++) {
        int64_t i = *(const int64_t *)(p[1] + k * s[1]);
        if (!check_index(c, &i)) continue;
        memcpy(p[0] + k * s[0] + i * c->dim_stride, p[2] + k * s[2], c->es);
    }
}

/* A view of t with index's shape and t's strides, stride 0 along dim. */
static musa_kview restride(const musa_kview *t, const musa_kview *index, int dim) {
    musa_kview r = *t;
    r.ndim = index->ndim;
    for (int d = 0; d < index->ndim; d++) {
        r.shape[d] = index->shape[d];
        r.strides[d] = d == dim ? 0 : (d < t->ndim ? t->strides[d] : 0);
    }
    return r;
}

static int index_error(const musa_kctx *ctx, idx_ctx *c) {
    if (!atomic_load(&c->bad.seen)) return MUSA_OK;
    return musa_err(MUSA_ERR_INDEX, "[%s] index %lld is out of bounds for a dim of size %lld",
                    ctx->op_name, (long long)atomic_load(&c->bad.value), (long long)c->size);
}

int cpu_gather(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
               const void *attrs) {
    MUSA_UNUSED(n_in);
    int dim = (int)((const musa_attrs_dim *)attrs)->dim;
    const musa_kview *x = &in[0], *index = &in[1];
    idx_ctx c = {.size = x->ndim ? x->shape[dim] : 1, .es = esize(x)};
    c.dim_stride = x->ndim ? x->strides[dim] * (int64_t)c.es : 0;
    musa_bad_index_init(&c.bad);
    musa_kview xr = restride(x, index, dim);
    const musa_kview *ops[3] = {&out[0], index, &xr};
    musa_iter it;
    musa_iter_init(&it, ops, 3);
    musa_iter_run(&it, MUSA_GRAIN_CHEAP, gather_loop, &c);
    return index_error(ctx, &c);
}

/* The reducing scatters need typed arithmetic: one loop per dtype and
 * reduction, d the value there and v the incoming one (C-typed). */
#define DEF_SCATTER_RED(NAME, SN, T, C, EXPR)                                                      \
    static void NAME##_##SN(void *arg, int64_t n, char **p, const int64_t *s) {                    \
        idx_ctx *c = arg;                                                                          \
        for (int64_t k = 0; k < n; k++) {                                                          \
            int64_t i = *(const int64_t *)(p[1] + k * s[1]);                                       \
            if (!check_index(c, &i)) continue;                                                     \
            T *dp = (T *)(p[0] + k * s[0] + i * c->dim_stride);                                    \
            C d = LD_##SN(*dp), v = LD_##SN(*(const T *)(p[2] + k * s[2]));                        \
            *dp = ST_##SN(EXPR);                                                                   \
        }                                                                                          \
    }
/* integers wrap (through uint64); a NaN wins amax and amin, as in PyTorch */
#define IWRAP(op)   (int64_t)((uint64_t)(int64_t)d op(uint64_t)(int64_t) v)
#define FMAXN(d, v) ((v) != (v) || (v) > (d) ? (v) : (d))
#define FMINN(d, v) ((v) != (v) || (v) < (d) ? (v) : (d))
#define DEF_RED_F(SN, T, C, E)                                                                     \
    DEF_SCATTER_RED(scatter_add, SN, T, C, d + v)                                                  \
    DEF_SCATTER_RED(scatter_prod, SN, T, C, d *v)                                                  \
    DEF_SCATTER_RED(scatter_amax, SN, T, C, FMAXN(d, v))                                           \
    DEF_SCATTER_RED(scatter_amin, SN, T, C, FMINN(d, v))
#define DEF_RED_I(SN, T, C, E)                                                                     \
    DEF_SCATTER_RED(scatter_add, SN, T, C, IWRAP(+))                                               \
    DEF_SCATTER_RED(scatter_prod, SN, T, C, IWRAP(*))                                              \
    DEF_SCATTER_RED(scatter_amax, SN, T, C, v > d ? v : d)                                         \
    DEF_SCATTER_RED(scatter_amin, SN, T, C, v < d ? v : d)
MUSA_FOR_FLOATS(DEF_RED_F)
MUSA_FOR_INTS(DEF_RED_I)
DEF_SCATTER_RED(scatter_add, b, uint8_t, uint8_t, d | v)
DEF_SCATTER_RED(scatter_prod, b, uint8_t, uint8_t, d &v)
DEF_SCATTER_RED(scatter_amax, b, uint8_t, uint8_t, d | v)
DEF_SCATTER_RED(scatter_amin, b, uint8_t, uint8_t, d &v)

static int scatter_common(const musa_kctx *ctx, musa_kview *out, const musa_kview *in,
                          const void *attrs, musa_loop_fn fn) {
    int dim = (int)((const musa_attrs_dim *)attrs)->dim;
    const musa_kview *x = &in[0], *index = &in[1], *src = &in[2];
    musa_cpu_copy(&out[0], x);
    idx_ctx c = {.size = x->ndim ? x->shape[dim] : 1, .es = esize(x)};
    c.dim_stride = x->ndim ? out[0].strides[dim] * (int64_t)c.es : 0;
    musa_bad_index_init(&c.bad);
    musa_kview srcv = *src; /* src restricted to index's shape */
    srcv.ndim = index->ndim;
    for (int d = 0; d < index->ndim; d++) {
        srcv.shape[d] = index->shape[d];
        if (d >= src->ndim) srcv.strides[d] = 0; /* a 0-d src (inference allows one element) */
    }
    musa_kview outr = restride(&out[0], index, dim);
    const musa_kview *ops[3] = {&outr, index, &srcv};
    musa_iter it;
    musa_iter_init(&it, ops, 3);
    musa_iter_run(&it, INT64_MAX, fn, &c); /* serial: duplicates must not race */
    return index_error(ctx, &c);
}

int cpu_scatter(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                const void *attrs) {
    MUSA_UNUSED(n_in);
    return scatter_common(ctx, out, in, attrs, scatter_loop);
}

#define DEF_SCATTER_KERNEL(NAME)                                                                   \
    int cpu_##NAME(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,          \
                   const void *attrs) {                                                            \
        MUSA_UNUSED(n_in);                                                                         \
        static const musa_loop_fn loops[MUSA_DTYPE_COUNT] = {                                      \
            [MUSA_DTYPE_FLOAT32] = NAME##_f32, [MUSA_DTYPE_FLOAT64] = NAME##_f64,                  \
            [MUSA_DTYPE_FLOAT16] = NAME##_f16, [MUSA_DTYPE_BFLOAT16] = NAME##_bf16,                \
            [MUSA_DTYPE_INT64] = NAME##_i64,   [MUSA_DTYPE_INT32] = NAME##_i32,                    \
            [MUSA_DTYPE_INT8] = NAME##_i8,     [MUSA_DTYPE_UINT8] = NAME##_u8,                     \
            [MUSA_DTYPE_INT16] = NAME##_i16,   [MUSA_DTYPE_BOOL] = NAME##_b};                      \
        return scatter_common(ctx, out, in, attrs, loops[in[0].dtype]);                            \
    }
DEF_SCATTER_KERNEL(scatter_add)
DEF_SCATTER_KERNEL(scatter_prod)
DEF_SCATTER_KERNEL(scatter_amax)
DEF_SCATTER_KERNEL(scatter_amin)

/* ---- index_select / index_add: whole slices per index ---- */

static int read_index(const musa_kctx *ctx, const musa_kview *index, int64_t k, int64_t size,
                      int64_t *out) {
    int64_t i = *(const int64_t *)(index->data + (index->ndim ? k * index->strides[0] : 0) * 8);
    if (i < -size || i >= size)
        return musa_err(MUSA_ERR_INDEX, "[%s] index %lld is out of bounds for a dim of size %lld",
                        ctx->op_name, (long long)i, (long long)size);
    *out = i < 0 ? i + size : i;
    return MUSA_OK;
}

/* index_select over dim 0 of contiguous rows (an embedding lookup): the
 * indices checked first, then a memcpy per row, rows split over threads.
 * Through a strided copy per row, 512 rows of 128 floats took 57 us. */
typedef struct {
    const musa_kview *x, *index;
    char *out;
    size_t row_bytes;
} rows_sel;

static void select_rows(void *arg, int64_t k0, int64_t k1) {
    const rows_sel *j = arg;
    int64_t size = j->x->shape[0];
    for (int64_t k = k0; k < k1; k++) {
        int64_t i = *(const int64_t *)(j->index->data +
                                       (j->index->ndim ? k * j->index->strides[0] : 0) * 8);
        i += i < 0 ? size : 0; /* (checked in range before) */
        memcpy(j->out + (size_t)k * j->row_bytes, j->x->data + (size_t)i * j->row_bytes,
               j->row_bytes);
    }
}

int cpu_index_select(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                     const void *attrs) {
    MUSA_UNUSED(n_in);
    int dim = (int)((const musa_attrs_dim *)attrs)->dim;
    const musa_kview *x = &in[0], *index = &in[1];
    int64_t n = musa_kview_numel(index);
    if (dim == 0 && x->ndim > 0 && musa_kview_contiguous(x) && musa_kview_contiguous(&out[0])) {
        for (int64_t k = 0; k < n; k++) {
            int64_t i = 0;
            int rc = read_index(ctx, index, k, x->shape[0], &i);
            if (rc) return rc;
        }
        int64_t row = x->shape[0] ? musa_kview_numel(x) / x->shape[0] : 0;
        rows_sel j = {x, index, out[0].data, (size_t)row * esize(x)};
        if (n && j.row_bytes)
            musa_parallel_for(n, MUSA_MAX(1, MUSA_GRAIN_CHEAP / MUSA_MAX(row, 1)), select_rows, &j);
        return MUSA_OK;
    }
    if (x->ndim == 0) {
        int64_t i = 0;
        int rc = read_index(ctx, index, 0, 1, &i);
        if (!rc) musa_cpu_copy(&out[0], x);
        return rc;
    }
    for (int64_t k = 0; k < n; k++) {
        int64_t i = 0;
        int rc = read_index(ctx, index, k, x->shape[dim], &i);
        if (rc) return rc;
        musa_kview d = select_dim(&out[0], dim, k), s = select_dim(x, dim, i);
        musa_cpu_copy(&d, &s);
    }
    return MUSA_OK;
}

/* index_add over dim 0 of contiguous rows (an embedding's gradient): each
 * task takes a range of columns, copies the input's part of them (when the
 * input is contiguous and not the output) and adds every index's row into
 * them, in index order, with add's own loop: the sums and their order of a
 * call of musa_cpu_add_into per row, which built an iterator per row (512
 * rows of 128 floats took 22 us). The copy is the task's own so that each
 * core adds into lines it wrote: after a copy split by rows, the adds
 * waited on the other core's lines. */
typedef struct {
    char *out;
    const char *x, *src; /* x NULL: out holds the input already */
    const musa_kview *index;
    int64_t size, row, n;
    musa_dtype dt;
} rows_add;

/* Column c of rows of one element each (bincount's counts, a 1-D
 * index_add): each index's element added in index order, as add's loop
 * adds it (int64 wrapping), without a call per element; float32, float64
 * and int64, false for the other dtypes. 4M indices into 100 counts took
 * 86 ms a call at a time (PyTorch's bincount 3 ms). */
#define ADD_ELEMENTS(T, U)                                                                         \
    for (int64_t k = 0; k < j->n; k++) {                                                           \
        int64_t i = *(const int64_t *)(j->index->data + k * is);                                   \
        i += i < 0 ? j->size : 0;                                                                  \
        T *o = (T *)j->out + i * j->row + c;                                                       \
        *o = (T)((U)*o + (U)((const T *)j->src)[k * j->row + c]);                                  \
    }
static bool add_elements(const rows_add *j, int64_t c) {
    int64_t is = (j->index->ndim ? j->index->strides[0] : 0) * 8;
    switch (j->dt) {
    case MUSA_DTYPE_FLOAT32:
        ADD_ELEMENTS(float, float)
        return true;
    case MUSA_DTYPE_FLOAT64:
        ADD_ELEMENTS(double, double)
        return true;
    case MUSA_DTYPE_INT64:
        ADD_ELEMENTS(int64_t, uint64_t)
        return true;
    default:
        return false;
    }
}

static void add_rows(void *arg, int64_t c0, int64_t c1) {
    const rows_add *j = arg;
    size_t es = musa_dtype_info[j->dt].size;
    if (j->x)
        for (int64_t r = 0; r < j->size; r++)
            memcpy(j->out + (size_t)(r * j->row + c0) * es, j->x + (size_t)(r * j->row + c0) * es,
                   (size_t)(c1 - c0) * es);
    if (c1 - c0 == 1 && add_elements(j, c0)) return;
    for (int64_t k = 0; k < j->n; k++) {
        int64_t i = *(const int64_t *)(j->index->data +
                                       (j->index->ndim ? k * j->index->strides[0] : 0) * 8);
        i += i < 0 ? j->size : 0; /* (checked in range before) */
        musa_cpu_add_run(j->dt, j->out + (size_t)(i * j->row + c0) * es,
                         j->src + (size_t)(k * j->row + c0) * es, c1 - c0);
    }
}

int cpu_index_add(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                  const void *attrs) {
    MUSA_UNUSED(n_in);
    int dim = (int)((const musa_attrs_dim *)attrs)->dim;
    const musa_kview *x = &in[0], *index = &in[1], *src = &in[2];
    int64_t n = musa_kview_numel(index);
    /* Check every index before writing anything. */
    for (int64_t k = 0; k < n; k++) {
        int64_t i = 0;
        int rc = read_index(ctx, index, k, x->ndim ? x->shape[dim] : 1, &i);
        if (rc) return rc;
    }
    bool rows = dim == 0 && x->ndim > 0 && src->dtype == out[0].dtype &&
                musa_kview_contiguous(&out[0]) && musa_kview_contiguous(src);
    bool own_copy = rows && x->dtype == out[0].dtype && musa_kview_contiguous(x);
    if (!own_copy) musa_cpu_copy(&out[0], x);
    if (rows) {
        int64_t size = x->shape[0], row = size ? musa_kview_numel(&out[0]) / size : 0;
        rows_add j = {out[0].data, own_copy && x->data != out[0].data ? x->data : NULL,
                      src->data,   index,
                      size,        row,
                      n,           (musa_dtype)src->dtype};
        if (row && (n || j.x))
            musa_parallel_for(row, MUSA_MAX(1, MUSA_GRAIN_CHEAP / (n + size)), add_rows, &j);
        return MUSA_OK;
    }
    for (int64_t k = 0; k < n; k++) {
        int64_t i = 0;
        read_index(ctx, index, k, x->ndim ? x->shape[dim] : 1, &i);
        if (x->ndim == 0) {
            musa_kview s = *src;
            s.ndim = 0;
            s.data += (src->ndim ? k * src->strides[0] : 0) * (int64_t)esize(src);
            musa_cpu_add_into(&out[0], &s);
            continue;
        }
        musa_kview d = select_dim(&out[0], dim, i), s = select_dim(src, dim, k);
        musa_cpu_add_into(&d, &s);
    }
    return MUSA_OK;
}

/* ---- pad, flip, tril/triu ---- */

int cpu_pad(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
            const void *attrs) {
    MUSA_UNUSED(ctx), MUSA_UNUSED(n_in);
    const musa_attrs_pad *a = attrs;
    musa_kview src = in[0], dst = out[0];
    musa_cpu_fill(&out[0], a->value);
    for (int k = 0; k < a->pads.n / 2; k++) {
        int d = in[0].ndim - 1 - k;
        int64_t before = a->pads.v[2 * k], after = a->pads.v[2 * k + 1];
        int64_t skip = before < 0 ? -before : 0;
        int64_t len = in[0].shape[d] - skip - (after < 0 ? -after : 0);
        if (len <= 0) return MUSA_OK; /* everything cropped away */
        src = narrow(&src, d, skip, len);
        dst = narrow(&dst, d, before > 0 ? before : 0, len);
    }
    musa_cpu_copy(&dst, &src);
    return MUSA_OK;
}

int cpu_flip(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
             const void *attrs) {
    MUSA_UNUSED(ctx), MUSA_UNUSED(n_in);
    const musa_attrs_dims *a = attrs;
    musa_kview src = in[0];
    for (int i = 0; i < a->dims.n && src.ndim; i++) {
        int d = (int)a->dims.v[i];
        if (src.shape[d] == 0) return MUSA_OK;
        src.data += (src.shape[d] - 1) * src.strides[d] * (int64_t)esize(&src);
        src.strides[d] = -src.strides[d];
    }
    return musa_cpu_copy(&out[0], &src);
}

static int tri(musa_kview *out, const musa_kview *x, int64_t k, bool lower) {
    musa_cpu_copy(&out[0], x);
    const musa_kview *o = &out[0];
    size_t es = esize(o);
    int64_t rows = o->shape[o->ndim - 2], cols = o->shape[o->ndim - 1];
    int64_t rs = o->strides[o->ndim - 2], cs = o->strides[o->ndim - 1];
    int64_t batch = rows && cols ? musa_kview_numel(o) / (rows * cols) : 0;
    musa_kview b = *o; /* batch dims only */
    b.ndim = o->ndim - 2;
    for (int64_t bi = 0; bi < batch; bi++) {
        char *m = b.ndim ? musa_kview_elem(&b, bi, es) : o->data;
        for (int64_t i = 0; i < rows; i++) {
            /* row i's zeros: columns j > i + k (lower) or j < i + k, one
             * run (a memset where the row is contiguous: element by element,
             * tril of 4096 x 1024 float32 took 3.2x PyTorch's time) */
            int64_t lo = lower ? MUSA_MAX(0, MUSA_MIN(cols, i + k + 1)) : 0;
            int64_t hi = lower ? cols : MUSA_MAX(0, MUSA_MIN(cols, i + k));
            if (lo >= hi) continue;
            if (cs == 1) {
                memset(m + (i * rs + lo) * (int64_t)es, 0, (size_t)(hi - lo) * es);
                continue;
            }
            for (int64_t j = lo; j < hi; j++) memset(m + (i * rs + j * cs) * (int64_t)es, 0, es);
        }
    }
    return MUSA_OK;
}

int cpu_tril(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
             const void *attrs) {
    MUSA_UNUSED(ctx), MUSA_UNUSED(n_in);
    return tri(out, &in[0], ((const musa_attrs_tri *)attrs)->k, true);
}

int cpu_triu(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
             const void *attrs) {
    MUSA_UNUSED(ctx), MUSA_UNUSED(n_in);
    return tri(out, &in[0], ((const musa_attrs_tri *)attrs)->k, false);
}

/* ---- the scans: one pass along each line of dim ----
 *
 * A scan reads line l of in[0] (and of in[1], for cumprod's backward) and
 * writes line l of each output; lines are the positions of every other
 * dim. Floating values are carried in double, integers in int64. */

typedef struct scan_line {
    const char *x, *y, *z;          /* input lines (y, z: the second and third inputs, or NULL) */
    char *o, *o2;                   /* output lines (o2: the indices of cummax/cummin, or NULL) */
    int64_t n, xs, ys, zs, os, o2s; /* length and byte strides */
    musa_dtype xd, yd, zd, od;
} scan_line;

typedef void (*scan_fn)(const scan_line *l);

typedef struct {
    const musa_kview *xl, *yl, *zl, *ol, *il; /* the lines of each operand */
    scan_line l;                              /* strides, length and dtypes */
    scan_fn fn;
    int n_in, n_out;
} scan_job;

static void scan_lines(void *arg, int64_t k0, int64_t k1) {
    const scan_job *j = arg;
    scan_line l = j->l;
    for (int64_t k = k0; k < k1; k++) {
        l.x = j->xl->ndim ? musa_kview_elem(j->xl, k, esize(j->xl)) : j->xl->data;
        l.o = j->ol->ndim ? musa_kview_elem(j->ol, k, esize(j->ol)) : j->ol->data;
        l.y = j->n_in > 1 ? (j->yl->ndim ? musa_kview_elem(j->yl, k, esize(j->yl)) : j->yl->data)
                          : NULL;
        l.z = j->n_in > 2 ? (j->zl->ndim ? musa_kview_elem(j->zl, k, esize(j->zl)) : j->zl->data)
                          : NULL;
        l.o2 = j->n_out > 1 ? (j->il->ndim ? musa_kview_elem(j->il, k, esize(j->il)) : j->il->data)
                            : NULL;
        j->fn(&l);
    }
}

static int scan(const musa_kview *in, int n_in, musa_kview *out, int n_out, const void *attrs,
                scan_fn fn) {
    const musa_kview *x = &in[0], *o = &out[0];
    int dim = x->ndim ? (int)((const musa_attrs_dim *)attrs)->dim : 0;
    musa_kview xl = *x, yl = n_in > 1 ? in[1] : *x, zl = n_in > 2 ? in[2] : *x, ol = *o;
    musa_kview il = n_out > 1 ? out[1] : *o;
    if (x->ndim) {
        xl = select_dim(x, dim, 0), ol = select_dim(o, dim, 0);
        if (n_in > 1) yl = select_dim(&in[1], dim, 0);
        if (n_in > 2) zl = select_dim(&in[2], dim, 0);
        if (n_out > 1) il = select_dim(&out[1], dim, 0);
    }
    scan_line l = {.n = x->ndim ? x->shape[dim] : 1,
                   .xs = x->ndim ? x->strides[dim] * (int64_t)esize(x) : 0,
                   .ys = n_in > 1 && x->ndim ? in[1].strides[dim] * (int64_t)esize(&in[1]) : 0,
                   .zs = n_in > 2 && x->ndim ? in[2].strides[dim] * (int64_t)esize(&in[2]) : 0,
                   .os = x->ndim ? o->strides[dim] * (int64_t)esize(o) : 0,
                   .o2s = n_out > 1 && x->ndim ? out[1].strides[dim] * (int64_t)esize(&out[1]) : 0,
                   .xd = (musa_dtype)x->dtype,
                   .yd = (musa_dtype)yl.dtype,
                   .zd = (musa_dtype)zl.dtype,
                   .od = (musa_dtype)o->dtype};
    int64_t lines = musa_kview_numel(&xl);
    if (lines == 0 || l.n == 0) return MUSA_OK;
    scan_job j = {&xl, &yl, &zl, &ol, &il, l, fn, n_in, n_out};
    /* lines are independent: each thread takes a run of them (about 16K
     * elements of work at least per task); one after another, a cumsum
     * along the rows of 4096 x 1024 float32 took 13.4 ms (PyTorch 4.1) */
    musa_parallel_for(lines, MUSA_MAX(1, 16384 / l.n), scan_lines, &j);
    return MUSA_OK;
}

static void cumsum_line(const scan_line *l) {
    if (l->xd == MUSA_DTYPE_FLOAT32 && l->od == MUSA_DTYPE_FLOAT32 && l->xs == 4 && l->os == 4) {
        const float *x = (const float *)l->x; /* the same sums, without a dtype switch each */
        float *o = (float *)l->o;
        double a = 0;
        for (int64_t i = 0; i < l->n; i++) o[i] = (float)(a += (double)x[i]);
        return;
    }
    if (musa_is_float(l->xd)) {
        double a = 0;
        for (int64_t i = 0; i < l->n; i++) {
            a += musa_load_f64(l->x + i * l->xs, l->xd);
            musa_store_f64(l->o + i * l->os, l->od, a);
        }
        return;
    }
    uint64_t a = 0; /* integers wrap */
    for (int64_t i = 0; i < l->n; i++) {
        a += (uint64_t)musa_load_i64(l->x + i * l->xs, l->xd);
        musa_store_i64(l->o + i * l->os, l->od, (int64_t)a);
    }
}

static void cumprod_line(const scan_line *l) {
    if (musa_is_float(l->xd)) {
        double a = 1;
        for (int64_t i = 0; i < l->n; i++) {
            a *= musa_load_f64(l->x + i * l->xs, l->xd);
            musa_store_f64(l->o + i * l->os, l->od, a);
        }
        return;
    }
    uint64_t a = 1; /* integers wrap, as integer arithmetic does */
    for (int64_t i = 0; i < l->n; i++) {
        a *= (uint64_t)musa_load_i64(l->x + i * l->xs, l->xd);
        musa_store_i64(l->o + i * l->os, l->od, (int64_t)a);
    }
}

/* The running extremum and where it was (a later equal value takes over;
 * NaN, once seen, stays). */
static void cumext_line(const scan_line *l, bool is_max) {
    int64_t at = 0;
    if (musa_is_float(l->xd)) {
        double best = 0;
        for (int64_t i = 0; i < l->n; i++) {
            double v = musa_load_f64(l->x + i * l->xs, l->xd);
            if (i == 0 || v != v || (best == best && (is_max ? v >= best : v <= best)))
                best = v, at = i;
            musa_store_f64(l->o + i * l->os, l->od, best);
            *(int64_t *)(l->o2 + i * l->o2s) = at;
        }
        return;
    }
    int64_t best = 0;
    for (int64_t i = 0; i < l->n; i++) {
        int64_t v = musa_load_i64(l->x + i * l->xs, l->xd);
        if (i == 0 || (is_max ? v >= best : v <= best)) best = v, at = i;
        musa_store_i64(l->o + i * l->os, l->od, best);
        *(int64_t *)(l->o2 + i * l->o2s) = at;
    }
}

static void cummax_line(const scan_line *l) {
    cumext_line(l, true);
}

static void cummin_line(const scan_line *l) {
    cumext_line(l, false);
}

/* log(exp(a) + exp(b)) without overflow; equal infinities stay. */
static double log_add_exp(double a, double b) {
    if (a == b && isinf(a)) return a;
    double m = a > b ? a : b;
    if (m != m) return m;
    return m + log1p(exp(-fabs(a - b)));
}

static void logcumsumexp_line(const scan_line *l) {
    double a = -INFINITY;
    for (int64_t i = 0; i < l->n; i++) {
        a = log_add_exp(a, musa_load_f64(l->x + i * l->xs, l->xd));
        musa_store_f64(l->o + i * l->os, l->od, a);
    }
}

/* d/dx_i of sum_k g_k prod_{j<=k} x_j = E_i S_i, where E_i is the product of
 * x before i and S_i = g_i + x_{i+1} S_{i+1}: exact with zeros in x. */
static void cumprod_backward_line(const scan_line *l) {
    double s = 0;
    for (int64_t i = l->n - 1; i >= 0; i--) { /* S, right to left, into the output */
        double g = musa_load_f64(l->y + i * l->ys, l->yd);
        s = i == l->n - 1 ? g : g + musa_load_f64(l->x + (i + 1) * l->xs, l->xd) * s;
        musa_store_f64(l->o + i * l->os, l->od, s);
    }
    double e = 1;
    for (int64_t i = 0; i < l->n; i++) { /* times E, left to right */
        char *w = l->o + i * l->os;
        musa_store_f64(w, l->od, musa_load_f64(w, l->od) * e);
        e *= musa_load_f64(l->x + i * l->xs, l->xd);
    }
}

/* d/dx_i of sum_k g_k y_k, y = logcumsumexp(x): sum_{k>=i} g_k exp(x_i - y_k)
 * = exp(x_i - y_i) S_i with S_i = g_i + exp(y_i - y_{i+1}) S_{i+1}; every
 * factor is at most 1 (y never decreases, x_i <= y_i), so nothing
 * overflows. Inputs (x, y, g). */
static void logcumsumexp_backward_line(const scan_line *l) {
    double s = 0, y_next = 0;
    for (int64_t i = l->n - 1; i >= 0; i--) {
        double g = musa_load_f64(l->z + i * l->zs, l->zd);
        double y = musa_load_f64(l->y + i * l->ys, l->yd);
        s = i == l->n - 1 ? g : g + (y == y_next ? 1 : exp(y - y_next)) * s;
        y_next = y;
        double x = musa_load_f64(l->x + i * l->xs, l->xd);
        musa_store_f64(l->o + i * l->os, l->od, x == -INFINITY ? 0 : exp(x - y) * s);
    }
}

#define SCAN_KERNEL(NAME, N_IN, N_OUT)                                                             \
    int cpu_##NAME(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,          \
                   const void *attrs) {                                                            \
        MUSA_UNUSED(ctx), MUSA_UNUSED(n_in);                                                       \
        return scan(in, N_IN, out, N_OUT, attrs, NAME##_line);                                     \
    }
SCAN_KERNEL(cumsum, 1, 1)
SCAN_KERNEL(cumprod, 1, 1)
SCAN_KERNEL(cummax, 1, 2)
SCAN_KERNEL(cummin, 1, 2)
SCAN_KERNEL(logcumsumexp, 1, 1)
SCAN_KERNEL(cumprod_backward, 2, 1)
SCAN_KERNEL(logcumsumexp_backward, 3, 1)
