/*
 * api.c - the public functions of the primitive ops: each packs its
 * arguments into the op's attrs record and calls the dispatcher. Nothing
 * here validates or computes; inference does that.
 *
 * The `fn` column of ops.def decides where an op's function comes from:
 * - unary, binary, ternary: generated here from the row (the first block),
 *   one function of that many tensors and default attributes;
 * - hand: written by hand below (nn ops in nn.c), because the C signature
 *   takes attributes or a list of tensors, or returns several outputs;
 * - internal: no public function.
 * musa.h declares them all, by hand, with their contracts; test_ops checks
 * that libmusa exports musa_<name> for exactly the rows that are not
 * internal.
 */
#include "op.h"

/* ---- generated: the rows whose fn column names a tensor-only form ---- */

#define FN_unary(name, n_in, n_out)                                                                \
    _Static_assert(n_in == 1 && n_out == 1, "ops.def: " #name " is not unary");                    \
    musa_tensor *musa_##name(musa_tensor *x) {                                                     \
        return musa_call1(MUSA_OP_##name, x, NULL);                                                \
    }
#define FN_binary(name, n_in, n_out)                                                               \
    _Static_assert(n_in == 2 && n_out == 1, "ops.def: " #name " is not binary");                   \
    musa_tensor *musa_##name(musa_tensor *a, musa_tensor *b) {                                     \
        return musa_call2(MUSA_OP_##name, a, b, NULL);                                             \
    }
#define FN_ternary(name, n_in, n_out)                                                              \
    _Static_assert(n_in == 3 && n_out == 1, "ops.def: " #name " is not ternary");                  \
    musa_tensor *musa_##name(musa_tensor *a, musa_tensor *b, musa_tensor *c) {                     \
        musa_tensor *in[3] = {a, b, c};                                                            \
        return musa_call(MUSA_OP_##name, 3, in, NULL);                                             \
    }
#define FN_hand(name, n_in, n_out)
#define FN_internal(name, n_in, n_out)
#define OP(name, n_in, n_out, attrs, infer, kernel, ws, flags, grad, save, fn, py)                 \
    FN_##fn(name, n_in, n_out)
#include "ops.def"
#undef OP

/* ---- written by hand: the rows marked fn hand, by family (with the creation
 * composites zeros, ones, *_like next to full) ---- */

musa_tensor *musa_clamp(musa_tensor *x, const double *min, const double *max) {
    musa_attrs_clamp a;
    musa_attrs_init(MUSA_ATTRS_clamp, &a);
    a.has_min = min != NULL, a.has_max = max != NULL;
    if (min) a.min = *min;
    if (max) a.max = *max;
    return musa_call1(MUSA_OP_clamp, x, &a);
}

musa_tensor *musa_cast(musa_tensor *x, musa_dtype dtype) {
    if (x && x->dtype == (int8_t)dtype) return musa_tensor_retain(x);
    musa_attrs_cast a;
    musa_attrs_init(MUSA_ATTRS_cast, &a);
    a.dtype = (int32_t)dtype;
    return musa_call1(MUSA_OP_cast, x, &a);
}

/* ---- attrs helpers ---- */

static int set_ints(musa_ints *dst, int n, const int64_t *v, const char *where) {
    if (n < 0 || n > MUSA_MAX_ATTR_INTS || (n > 0 && !v))
        return musa_err(MUSA_ERR_VALUE, "[%s] expected 0 to %d values, got %d", where,
                        MUSA_MAX_ATTR_INTS, n);
    memset(dst, 0, sizeof *dst);
    dst->n = n;
    if (n) memcpy(dst->v, v, sizeof(int64_t) * (size_t)n);
    return MUSA_OK;
}

static musa_tensor *reduce(musa_op_id op, musa_tensor *x, int ndims, const int64_t *dims,
                           bool keepdim) {
    musa_attrs_reduce a;
    musa_attrs_init(MUSA_ATTRS_reduce, &a);
    if (set_ints(&a.dims, ndims, dims, musa_ops[op].name)) return NULL;
    a.keepdim = keepdim;
    return musa_call1(op, x, &a);
}

musa_tensor *musa_sum(musa_tensor *x, int ndims, const int64_t *dims, bool keepdim) {
    return reduce(MUSA_OP_sum, x, ndims, dims, keepdim);
}
musa_tensor *musa_prod(musa_tensor *x, int ndims, const int64_t *dims, bool keepdim) {
    return reduce(MUSA_OP_prod, x, ndims, dims, keepdim);
}

/* Extrema of bool tensors (as PyTorch has them: max is any, min is all) are
 * taken on uint8 and the values cast back; other dtypes go straight on. */
static bool is_bool(const musa_tensor *x) {
    return x && x->dtype == MUSA_DTYPE_BOOL;
}
static musa_tensor *as_bool(musa_tensor *r) { /* steals r */
    if (!r) return NULL;
    musa_tensor *b = musa_cast(r, MUSA_DTYPE_BOOL);
    musa_tensor_release(r);
    return b;
}
static musa_tensor *extremum(musa_op_id op, musa_tensor *x, int ndims, const int64_t *dims,
                             bool keepdim) {
    if (!is_bool(x)) return reduce(op, x, ndims, dims, keepdim);
    musa_tensor *u = musa_cast(x, MUSA_DTYPE_UINT8);
    musa_tensor *r = u ? reduce(op, u, ndims, dims, keepdim) : NULL;
    musa_tensor_release(u);
    return as_bool(r);
}
musa_tensor *musa_amax(musa_tensor *x, int ndims, const int64_t *dims, bool keepdim) {
    return extremum(MUSA_OP_amax, x, ndims, dims, keepdim);
}
musa_tensor *musa_amin(musa_tensor *x, int ndims, const int64_t *dims, bool keepdim) {
    return extremum(MUSA_OP_amin, x, ndims, dims, keepdim);
}

static int dim_reduce2(musa_op_id op, musa_tensor *x, int64_t dim, bool keepdim,
                       musa_tensor **values, musa_tensor **indices) {
    if (!values || !indices)
        return musa_err(MUSA_ERR_VALUE, "[%s] output pointers are NULL", musa_ops[op].name);
    musa_attrs_dim a;
    musa_attrs_init(MUSA_ATTRS_dim, &a);
    a.dim = dim, a.keepdim = keepdim;
    musa_tensor *out[2] = {NULL, NULL};
    *values = *indices = NULL;
    musa_tensor *u = is_bool(x) ? musa_cast(x, MUSA_DTYPE_UINT8) : x;
    if (!u && x) return musa_last_error_code(); /* the cast failed (a NULL x: dispatch says so) */
    int rc = musa_dispatch(op, 1, &u, &a, out);
    if (u != x) {
        musa_tensor_release(u);
        if (!rc && !(out[0] = as_bool(out[0]))) {
            musa_tensor_release(out[1]);
            return musa_last_error_code();
        }
    }
    if (!rc) *values = out[0], *indices = out[1];
    return rc;
}

int musa_max_dim(musa_tensor *x, int64_t dim, bool keepdim, musa_tensor **values,
                 musa_tensor **indices) {
    return dim_reduce2(MUSA_OP_max_dim, x, dim, keepdim, values, indices);
}
int musa_min_dim(musa_tensor *x, int64_t dim, bool keepdim, musa_tensor **values,
                 musa_tensor **indices) {
    return dim_reduce2(MUSA_OP_min_dim, x, dim, keepdim, values, indices);
}

static musa_tensor *arg_reduce_of(musa_op_id op, musa_tensor *x, int64_t dim, bool keepdim) {
    musa_attrs_dim a;
    musa_attrs_init(MUSA_ATTRS_dim, &a);
    a.keepdim = keepdim;
    if (dim != MUSA_DIM_ALL) {
        a.dim = dim;
        return musa_call1(op, x, &a);
    }
    int64_t flat = -1;
    musa_tensor *f = musa_reshape(x, 1, &flat);
    a.dim = 0, a.keepdim = false;
    musa_tensor *r = musa_call1(op, f, &a);
    musa_tensor_release(f);
    if (!r || !keepdim) return r;
    int64_t ones[MUSA_MAX_DIMS] = {1, 1, 1, 1, 1, 1, 1, 1};
    musa_tensor *k = musa_reshape(r, x->ndim, ones);
    musa_tensor_release(r);
    return k;
}
static musa_tensor *arg_reduce(musa_op_id op, musa_tensor *x, int64_t dim, bool keepdim) {
    if (!x) return NULL;
    if (!is_bool(x)) return arg_reduce_of(op, x, dim, keepdim);
    musa_tensor *u = musa_cast(x, MUSA_DTYPE_UINT8);
    musa_tensor *r = u ? arg_reduce_of(op, u, dim, keepdim) : NULL;
    musa_tensor_release(u);
    return r;
}

musa_tensor *musa_argmax(musa_tensor *x, int64_t dim, bool keepdim) {
    return arg_reduce(MUSA_OP_argmax, x, dim, keepdim);
}
musa_tensor *musa_argmin(musa_tensor *x, int64_t dim, bool keepdim) {
    return arg_reduce(MUSA_OP_argmin, x, dim, keepdim);
}

musa_tensor *musa_norm_list(int n, musa_tensor *const *tensors) {
    if (n < 0 || (n > 0 && !tensors)) {
        musa_err(MUSA_ERR_VALUE, "[norm_list] bad tensor list");
        return NULL;
    }
    return musa_call(MUSA_OP_norm_list, n, tensors, NULL);
}

/* ---- views ---- */

static musa_tensor *shape_op(musa_op_id op, musa_tensor *x, int ndim, const int64_t *shape) {
    musa_attrs_shape a;
    musa_attrs_init(MUSA_ATTRS_shape, &a);
    if (set_ints(&a.shape, ndim, shape, musa_ops[op].name)) return NULL;
    return musa_call1(op, x, &a);
}

musa_tensor *musa_view(musa_tensor *x, int ndim, const int64_t *shape) {
    return shape_op(MUSA_OP_view, x, ndim, shape);
}
musa_tensor *musa_expand(musa_tensor *x, int ndim, const int64_t *shape) {
    return shape_op(MUSA_OP_expand, x, ndim, shape);
}

static musa_tensor *dims_op(musa_op_id op, musa_tensor *x, int ndims, const int64_t *dims) {
    musa_attrs_dims a;
    musa_attrs_init(MUSA_ATTRS_dims, &a);
    if (set_ints(&a.dims, ndims, dims, musa_ops[op].name)) return NULL;
    return musa_call1(op, x, &a);
}

musa_tensor *musa_permute(musa_tensor *x, int ndim, const int64_t *dims) {
    return dims_op(MUSA_OP_permute, x, ndim, dims);
}
musa_tensor *musa_squeeze(musa_tensor *x, int ndims, const int64_t *dims) {
    return dims_op(MUSA_OP_squeeze, x, ndims, dims);
}
musa_tensor *musa_flip(musa_tensor *x, int ndims, const int64_t *dims) {
    return dims_op(MUSA_OP_flip, x, ndims, dims);
}

musa_tensor *musa_slice(musa_tensor *x, int64_t dim, int64_t start, int64_t end, int64_t step) {
    musa_attrs_slice a = {.dim = dim, .start = start, .end = end, .step = step};
    return musa_call1(MUSA_OP_slice, x, &a);
}

musa_tensor *musa_select(musa_tensor *x, int64_t dim, int64_t index) {
    musa_attrs_select a = {.dim = dim, .index = index};
    return musa_call1(MUSA_OP_select, x, &a);
}

static musa_tensor *dim_op(musa_op_id op, musa_tensor *x, int64_t dim) {
    musa_attrs_dim a;
    musa_attrs_init(MUSA_ATTRS_dim, &a);
    a.dim = dim;
    return musa_call1(op, x, &a);
}

musa_tensor *musa_unsqueeze(musa_tensor *x, int64_t dim) {
    return dim_op(MUSA_OP_unsqueeze, x, dim);
}
musa_tensor *musa_cumsum(musa_tensor *x, int64_t dim) {
    return dim_op(MUSA_OP_cumsum, x, dim);
}
musa_tensor *musa_cumprod(musa_tensor *x, int64_t dim) {
    return dim_op(MUSA_OP_cumprod, x, dim);
}
musa_tensor *musa_logcumsumexp(musa_tensor *x, int64_t dim) {
    return dim_op(MUSA_OP_logcumsumexp, x, dim);
}
int musa_cummax(musa_tensor *x, int64_t dim, musa_tensor **values, musa_tensor **indices) {
    return dim_reduce2(MUSA_OP_cummax, x, dim, false, values, indices);
}
int musa_cummin(musa_tensor *x, int64_t dim, musa_tensor **values, musa_tensor **indices) {
    return dim_reduce2(MUSA_OP_cummin, x, dim, false, values, indices);
}

musa_tensor *musa_as_strided(musa_tensor *x, int ndim, const int64_t *shape, const int64_t *strides,
                             int64_t offset) {
    musa_attrs_strided a;
    musa_attrs_init(MUSA_ATTRS_strided, &a);
    if (set_ints(&a.shape, ndim, shape, "as_strided") ||
        set_ints(&a.strides, ndim, strides, "as_strided"))
        return NULL;
    a.offset = offset;
    return musa_call1(MUSA_OP_as_strided, x, &a);
}

musa_tensor *musa_as_strided_scatter(musa_tensor *x, musa_tensor *src, int ndim,
                                     const int64_t *shape, const int64_t *strides, int64_t offset) {
    musa_attrs_strided a;
    musa_attrs_init(MUSA_ATTRS_strided, &a);
    if (set_ints(&a.shape, ndim, shape, "as_strided_scatter") ||
        set_ints(&a.strides, ndim, strides, "as_strided_scatter"))
        return NULL;
    a.offset = offset;
    musa_tensor *in[2] = {x, src};
    return x && src ? musa_call(MUSA_OP_as_strided_scatter, 2, in, &a) : NULL;
}

/* The same memory read as another dtype. With a different element size
 * the last dim (stride 1) is rescaled; the other strides and the offset
 * must then stay whole elements of the new dtype. A bit reinterpretation
 * has no gradient and no graph node: a capture that meets one falls back to
 * eager (the values are needed). */
musa_tensor *musa_view_dtype(musa_tensor *x, musa_dtype dtype) {
    if (!x) return NULL;
    if (!musa_dtype_valid(dtype)) {
        musa_err(MUSA_ERR_VALUE, "[view] invalid dtype %d", (int)dtype);
        return NULL;
    }
    if (dtype == (musa_dtype)x->dtype) return musa_view(x, x->ndim, x->shape);
    if (!x->storage) {
        musa_err(MUSA_ERR_NOT_IMPLEMENTED,
                 "[view] reinterpreting %s as %s needs values: not traceable",
                 musa_dtype_name((musa_dtype)x->dtype), musa_dtype_name(dtype));
        return NULL;
    }
    if (musa_tls.recorder && musa_tls.mode != MUSA_MODE_EAGER && musa_record_refuse_hook)
        musa_record_refuse_hook(musa_tls.recorder, "view(dtype), which reinterprets memory,");
    int64_t from = (int64_t)musa_dtype_info[x->dtype].size,
            to = (int64_t)musa_dtype_info[dtype].size;
    int64_t shape[MUSA_MAX_DIMS], strides[MUSA_MAX_DIMS], offset = x->offset;
    int nd = x->ndim;
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)nd);
    memcpy(strides, x->strides, sizeof(int64_t) * (size_t)nd);
    if (from != to) {
        const char *a = musa_dtype_name((musa_dtype)x->dtype), *b = musa_dtype_name(dtype);
        if (nd == 0 || (x->strides[nd - 1] != 1 && x->shape[nd - 1] != 1)) {
            musa_err(MUSA_ERR_VALUE,
                     "[view] %s to %s changes the element size, which needs the last dim to "
                     "have stride 1 (a %d-d tensor%s)",
                     a, b, nd, nd ? " whose last stride is not 1" : "");
            return NULL;
        }
        if (to < from) {
            int64_t k = from / to;
            for (int i = 0; i < nd - 1; i++) strides[i] *= k;
            shape[nd - 1] *= k;
            strides[nd - 1] = 1;
            offset *= k;
        } else {
            int64_t k = to / from;
            if (shape[nd - 1] % k) {
                musa_err(
                    MUSA_ERR_VALUE,
                    "[view] %s to %s needs the last dim's size (%lld) to be a multiple of %lld", a,
                    b, (long long)shape[nd - 1], (long long)k);
                return NULL;
            }
            bool whole = offset % k == 0;
            for (int i = 0; i < nd - 1; i++)
                whole = whole && (strides[i] % k == 0 || shape[i] == 1);
            if (!whole) {
                musa_err(MUSA_ERR_VALUE,
                         "[view] %s to %s needs the storage offset (%lld) and the strides of all "
                         "dims but the last to be multiples of %lld",
                         a, b, (long long)offset, (long long)k);
                return NULL;
            }
            for (int i = 0; i < nd - 1; i++) strides[i] /= k;
            shape[nd - 1] /= k;
            strides[nd - 1] = 1;
            offset /= k;
        }
    }
    /* the view is made on a same-size alias so that its bounds are checked
     * in the new dtype's elements */
    musa_tensor *base = musa_tensor_view_of(x, nd, x->shape, x->strides, x->offset);
    if (!base) return NULL;
    base->dtype = (int8_t)dtype;
    base->trace_tag = 0;
    musa_tensor *t = musa_tensor_view_of(base, nd, shape, strides, offset);
    musa_tensor_release(base);
    if (t) t->trace_tag = 0;
    return t;
}

/* ---- data movement ---- */

musa_tensor *musa_cat(int n, musa_tensor *const *tensors, int64_t dim) {
    if (n < 0 || (n > 0 && !tensors)) {
        musa_err(MUSA_ERR_VALUE, "[cat] bad tensor list");
        return NULL;
    }
    musa_attrs_dim a;
    musa_attrs_init(MUSA_ATTRS_dim, &a);
    a.dim = dim;
    return musa_call(MUSA_OP_cat, n, tensors, &a);
}

static musa_tensor *dim_op3(musa_op_id op, musa_tensor *x, int64_t dim, musa_tensor *i,
                            musa_tensor *src, int n_in) {
    musa_attrs_dim a;
    musa_attrs_init(MUSA_ATTRS_dim, &a);
    a.dim = dim;
    musa_tensor *in[3] = {x, i, src};
    return musa_call(op, n_in, in, &a);
}

musa_tensor *musa_gather(musa_tensor *x, int64_t dim, musa_tensor *index) {
    return dim_op3(MUSA_OP_gather, x, dim, index, NULL, 2);
}
musa_tensor *musa_scatter(musa_tensor *x, int64_t dim, musa_tensor *index, musa_tensor *src) {
    return dim_op3(MUSA_OP_scatter, x, dim, index, src, 3);
}
musa_tensor *musa_scatter_add(musa_tensor *x, int64_t dim, musa_tensor *index, musa_tensor *src) {
    return dim_op3(MUSA_OP_scatter_add, x, dim, index, src, 3);
}
musa_tensor *musa_scatter_prod(musa_tensor *x, int64_t dim, musa_tensor *index, musa_tensor *src) {
    return dim_op3(MUSA_OP_scatter_prod, x, dim, index, src, 3);
}
musa_tensor *musa_scatter_amax(musa_tensor *x, int64_t dim, musa_tensor *index, musa_tensor *src) {
    return dim_op3(MUSA_OP_scatter_amax, x, dim, index, src, 3);
}
musa_tensor *musa_scatter_amin(musa_tensor *x, int64_t dim, musa_tensor *index, musa_tensor *src) {
    return dim_op3(MUSA_OP_scatter_amin, x, dim, index, src, 3);
}
musa_tensor *musa_index_select(musa_tensor *x, int64_t dim, musa_tensor *index) {
    return dim_op3(MUSA_OP_index_select, x, dim, index, NULL, 2);
}
musa_tensor *musa_index_add(musa_tensor *x, int64_t dim, musa_tensor *index, musa_tensor *src) {
    return dim_op3(MUSA_OP_index_add, x, dim, index, src, 3);
}

musa_tensor *musa_resample(musa_tensor *x, int64_t dim, musa_tensor *index, musa_tensor *weight) {
    musa_attrs_resample a;
    musa_attrs_init(MUSA_ATTRS_resample, &a);
    a.dim = dim;
    musa_tensor *in[3] = {x, index, weight};
    return musa_call(MUSA_OP_resample, 3, in, &a);
}

musa_tensor *musa_pad(musa_tensor *x, int npads, const int64_t *pads, double value) {
    musa_attrs_pad a;
    musa_attrs_init(MUSA_ATTRS_pad, &a);
    if (set_ints(&a.pads, npads, pads, "pad")) return NULL;
    a.value = value;
    return musa_call1(MUSA_OP_pad, x, &a);
}

musa_tensor *musa_tril(musa_tensor *x, int64_t k) {
    musa_attrs_tri a = {.k = k};
    return musa_call1(MUSA_OP_tril, x, &a);
}
musa_tensor *musa_triu(musa_tensor *x, int64_t k) {
    musa_attrs_tri a = {.k = k};
    return musa_call1(MUSA_OP_triu, x, &a);
}

static int two_out(musa_op_id op, musa_tensor *x, const void *a, musa_tensor **values,
                   musa_tensor **indices) {
    if (!values || !indices)
        return musa_err(MUSA_ERR_VALUE, "[%s] output pointers are NULL", musa_ops[op].name);
    musa_tensor *out[2] = {NULL, NULL};
    *values = *indices = NULL;
    int rc = musa_dispatch(op, 1, &x, a, out);
    if (!rc) *values = out[0], *indices = out[1];
    return rc;
}

int musa_sort(musa_tensor *x, int64_t dim, bool descending, musa_tensor **values,
              musa_tensor **indices) {
    musa_attrs_sort a;
    musa_attrs_init(MUSA_ATTRS_sort, &a);
    a.dim = dim, a.descending = descending;
    return two_out(MUSA_OP_sort, x, &a, values, indices);
}

int musa_topk(musa_tensor *x, int64_t k, int64_t dim, bool largest, musa_tensor **values,
              musa_tensor **indices) {
    musa_attrs_topk a;
    musa_attrs_init(MUSA_ATTRS_topk, &a);
    a.k = k, a.dim = dim, a.largest = largest;
    return two_out(MUSA_OP_topk, x, &a, values, indices);
}

/* ---- creation ---- */

static musa_tensor *full_op(musa_op_id op, int ndim, const int64_t *shape, double value,
                            musa_dtype dtype) {
    musa_attrs_full a;
    musa_attrs_init(MUSA_ATTRS_full, &a);
    if (ndim < 0 || ndim > MUSA_MAX_DIMS) {
        musa_err(MUSA_ERR_VALUE, "[%s] a tensor has 0 to %d dims, got %d", musa_ops[op].name,
                 MUSA_MAX_DIMS, ndim);
        return NULL;
    }
    if (set_ints(&a.shape, ndim, shape, musa_ops[op].name)) return NULL;
    a.value = value;
    a.dtype = (int32_t)dtype;
    return musa_call(op, 0, NULL, &a);
}

musa_tensor *musa_empty(int ndim, const int64_t *shape, musa_dtype dtype) {
    return full_op(MUSA_OP_empty, ndim, shape, 0, dtype);
}
musa_tensor *musa_full(int ndim, const int64_t *shape, double value, musa_dtype dtype) {
    return full_op(MUSA_OP_full, ndim, shape, value, dtype);
}
musa_tensor *musa_zeros(int ndim, const int64_t *shape, musa_dtype dtype) {
    return musa_full(ndim, shape, 0, dtype);
}
musa_tensor *musa_ones(int ndim, const int64_t *shape, musa_dtype dtype) {
    return musa_full(ndim, shape, 1, dtype);
}

musa_tensor *musa_full_like(const musa_tensor *like, double value) {
    if (!like) return NULL;
    return musa_full(like->ndim, like->shape, value, (musa_dtype)like->dtype);
}
musa_tensor *musa_zeros_like(const musa_tensor *like) {
    return musa_full_like(like, 0);
}
musa_tensor *musa_ones_like(const musa_tensor *like) {
    return musa_full_like(like, 1);
}

musa_tensor *musa_arange(double start, double end, double step, musa_dtype dtype) {
    musa_attrs_arange a = {.start = start, .end = end, .step = step, .dtype = (int32_t)dtype};
    return musa_call(MUSA_OP_arange, 0, NULL, &a);
}

musa_tensor *musa_linspace(double start, double end, int64_t steps, musa_dtype dtype) {
    musa_attrs_linspace a = {.start = start, .end = end, .steps = steps, .dtype = (int32_t)dtype};
    return musa_call(MUSA_OP_linspace, 0, NULL, &a);
}

musa_tensor *musa_eye(int64_t n, int64_t m, musa_dtype dtype) {
    musa_attrs_eye a = {.n = n, .m = m, .dtype = (int32_t)dtype};
    return musa_call(MUSA_OP_eye, 0, NULL, &a);
}

static musa_tensor *random_op(musa_op_id op, int ndim, const int64_t *shape, double low,
                              double high, musa_dtype dtype) {
    musa_attrs_random a;
    musa_attrs_init(MUSA_ATTRS_random, &a);
    if (set_ints(&a.shape, ndim, shape, musa_ops[op].name)) return NULL;
    a.low = low, a.high = high, a.dtype = (int32_t)dtype;
    return musa_call(op, 0, NULL, &a);
}

musa_tensor *musa_rand(int ndim, const int64_t *shape, musa_dtype dtype) {
    return random_op(MUSA_OP_rand, ndim, shape, 0, 1, dtype);
}
musa_tensor *musa_randn(int ndim, const int64_t *shape, musa_dtype dtype) {
    return random_op(MUSA_OP_randn, ndim, shape, 0, 1, dtype);
}
musa_tensor *musa_randint(int64_t low, int64_t high, int ndim, const int64_t *shape,
                          musa_dtype dtype) {
    return random_op(MUSA_OP_randint, ndim, shape, (double)low, (double)high, dtype);
}

/* ---- in place (not rows: the provided-output path of add, sub, mul, div, cast, full) ---- */

static int inplace(musa_op_id op, musa_tensor *self, musa_tensor *other) {
    if (!self)
        return musa_last_error_code()
                   ? musa_last_error_code()
                   : musa_err(MUSA_ERR_VALUE, "[%s_] self is NULL", musa_ops[op].name);
    musa_tensor *in[2] = {self, other};
    musa_tensor *out[1] = {self};
    return musa_dispatch(op, 2, in, NULL, out);
}

int musa_add_(musa_tensor *self, musa_tensor *other) {
    return inplace(MUSA_OP_add, self, other);
}
int musa_sub_(musa_tensor *self, musa_tensor *other) {
    return inplace(MUSA_OP_sub, self, other);
}
int musa_mul_(musa_tensor *self, musa_tensor *other) {
    return inplace(MUSA_OP_mul, self, other);
}
int musa_div_(musa_tensor *self, musa_tensor *other) {
    return inplace(MUSA_OP_div, self, other);
}

int musa_copy_(musa_tensor *dst, musa_tensor *src) {
    if (!dst || !src)
        return musa_last_error_code() ? musa_last_error_code()
                                      : musa_err(MUSA_ERR_VALUE, "[copy_] tensor is NULL");
    musa_tensor *e = musa_expand(src, dst->ndim, dst->shape);
    if (!e) return musa_last_error_code();
    musa_attrs_cast a;
    musa_attrs_init(MUSA_ATTRS_cast, &a);
    a.dtype = dst->dtype;
    musa_tensor *out[1] = {dst};
    int rc = musa_dispatch(MUSA_OP_cast, 1, &e, &a, out);
    musa_tensor_release(e);
    return rc;
}

int musa_fill_(musa_tensor *self, double value) {
    if (!self) return musa_err(MUSA_ERR_VALUE, "[fill_] self is NULL");
    bool tracked = (self->flags & MUSA_TF_REQUIRES_GRAD) ||
                   (self->view_base && (self->view_base->flags & MUSA_TF_REQUIRES_GRAD));
    if (tracked && musa_is_grad_enabled()) { /* recorded: the old values get no gradient */
        musa_tensor *v = musa_full(0, NULL, value, (musa_dtype)self->dtype); /* recorded */
        int rc = v ? musa_copy_(self, v) : musa_last_error_code();
        musa_tensor_release(v);
        return rc;
    }
    musa_attrs_full a;
    musa_attrs_init(MUSA_ATTRS_full, &a);
    a.shape.n = self->ndim;
    memcpy(a.shape.v, self->shape, sizeof(int64_t) * (size_t)self->ndim);
    a.value = value;
    a.dtype = self->dtype;
    musa_tensor *out[1] = {self};
    return musa_dispatch(MUSA_OP_full, 0, NULL, &a, out);
}

int musa_zero_(musa_tensor *self) {
    return musa_fill_(self, 0);
}
