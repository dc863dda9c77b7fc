/*
 * index.c - data movement kernels: cat, gather, scatter(_add),
 * index_select, index_add, pad, flip, tril/triu and cumsum.
 *
 * Most are expressed as strided copies of sub-views (musa_cpu_copy), so
 * they inherit its layout handling and dtype-agnostic speed. Index values
 * are bounds-checked in the loops; a bad index fails the call with an
 * IndexError naming the value and the bound. Scatters run serially so
 * duplicate indices accumulate deterministically.
 */
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
    if (*i < -c->size || *i >= c->size) {
        musa_bad_index_note(&c->bad, *i);
        return false;
    }
    if (*i < 0) *i += c->size;
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

/* scatter_add needs typed adds: one loop per dtype. */
#define DEF_SCATTER_ADD(SN, T, C, E)                                                               \
    static void scatter_add_##SN(void *arg, int64_t n, char **p, const int64_t *s) {               \
        idx_ctx *c = arg;                                                                          \
        for (int64_t k = 0; k < n; k++) {                                                          \
            int64_t i = *(const int64_t *)(p[1] + k * s[1]);                                       \
            if (!check_index(c, &i)) continue;                                                     \
            T *d = (T *)(p[0] + k * s[0] + i * c->dim_stride);                                     \
            *d = ST_##SN(LD_##SN(*d) + LD_##SN(*(const T *)(p[2] + k * s[2])));                    \
        }                                                                                          \
    }
MUSA_FOR_FLOATS(DEF_SCATTER_ADD)
#define DEF_SCATTER_ADD_I(SN, T, C, E)                                                             \
    static void scatter_add_##SN(void *arg, int64_t n, char **p, const int64_t *s) {               \
        idx_ctx *c = arg;                                                                          \
        for (int64_t k = 0; k < n; k++) {                                                          \
            int64_t i = *(const int64_t *)(p[1] + k * s[1]);                                       \
            if (!check_index(c, &i)) continue;                                                     \
            T *d = (T *)(p[0] + k * s[0] + i * c->dim_stride);                                     \
            *d = ST_##SN((int64_t)((uint64_t)(int64_t)*d +                                         \
                                   (uint64_t)(int64_t) * (const T *)(p[2] + k * s[2])));           \
        }                                                                                          \
    }
MUSA_FOR_INTS(DEF_SCATTER_ADD_I)
static void scatter_add_b(void *arg, int64_t n, char **p, const int64_t *s) {
    idx_ctx *c = arg;
    for (int64_t k = 0; k < n; k++) {
        int64_t i = *(const int64_t *)(p[1] + k * s[1]);
        if (!check_index(c, &i)) continue;
        uint8_t *d = (uint8_t *)(p[0] + k * s[0] + i * c->dim_stride);
        *d = *d | *(const uint8_t *)(p[2] + k * s[2]);
    }
}

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

int cpu_scatter_add(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                    const void *attrs) {
    MUSA_UNUSED(n_in);
    static const musa_loop_fn loops[MUSA_DTYPE_COUNT] = {
        [MUSA_DTYPE_FLOAT32] = scatter_add_f32, [MUSA_DTYPE_FLOAT64] = scatter_add_f64,
        [MUSA_DTYPE_FLOAT16] = scatter_add_f16, [MUSA_DTYPE_BFLOAT16] = scatter_add_bf16,
        [MUSA_DTYPE_INT64] = scatter_add_i64,   [MUSA_DTYPE_INT32] = scatter_add_i32,
        [MUSA_DTYPE_INT8] = scatter_add_i8,     [MUSA_DTYPE_UINT8] = scatter_add_u8,
        [MUSA_DTYPE_BOOL] = scatter_add_b};
    return scatter_common(ctx, out, in, attrs, loops[in[0].dtype]);
}

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

int cpu_index_select(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                     const void *attrs) {
    MUSA_UNUSED(n_in);
    int dim = (int)((const musa_attrs_dim *)attrs)->dim;
    const musa_kview *x = &in[0], *index = &in[1];
    int64_t n = musa_kview_numel(index);
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
    musa_cpu_copy(&out[0], x);
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

/* ---- pad, flip, tril/triu, cumsum ---- */

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
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++)
                if (lower ? j - i > k : j - i < k)
                    memset(m + (i * rs + j * cs) * (int64_t)es, 0, es);
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

int cpu_cumsum(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
               const void *attrs) {
    MUSA_UNUSED(ctx), MUSA_UNUSED(n_in);
    const musa_kview *x = &in[0], *o = &out[0];
    if (x->ndim == 0) return musa_cpu_copy(o, x);
    int dim = (int)((const musa_attrs_dim *)attrs)->dim;
    musa_dtype xd = (musa_dtype)x->dtype, od = (musa_dtype)o->dtype;
    size_t xes = esize(x), oes = esize(o);
    int64_t n = x->shape[dim];
    musa_kview xl = select_dim(x, dim, 0), ol = select_dim(o, dim, 0);
    int64_t lines = musa_kview_numel(&xl);
    bool fl = musa_is_float(xd);
    for (int64_t l = 0; l < lines && n > 0; l++) {
        const char *px = xl.ndim ? musa_kview_elem(&xl, l, xes) : xl.data;
        char *po = ol.ndim ? musa_kview_elem(&ol, l, oes) : ol.data;
        double fa = 0;
        uint64_t ia = 0;
        for (int64_t i = 0; i < n; i++) {
            const char *e = px + i * x->strides[dim] * (int64_t)xes;
            char *w = po + i * o->strides[dim] * (int64_t)oes;
            if (fl) {
                fa += musa_load_f64(e, xd);
                musa_store_f64(w, od, fa);
            } else {
                ia += (uint64_t)musa_load_i64(e, xd);
                musa_store_i64(w, od, (int64_t)ia);
            }
        }
    }
    return MUSA_OK;
}
