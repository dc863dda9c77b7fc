/*
 * tensor.c - creation, reference counting, views and accessors of tensors
 * and storages (see tensor.h for the invariants).
 */
#include "tensor.h"

#include <stdio.h>

#include "../backend/cpu/alloc.h"
#include "../backend/cpu/kernels.h"
#include "../base/tlcache.h"
#include "stream.h"

void (*musa_tensor_autograd_free_hook)(musa_tensor *t);

/* ---- shapes ---- */

int musa_shape_check(const char *where, int ndim, const int64_t *shape, int64_t *numel) {
    if (ndim < 0 || ndim > MUSA_MAX_DIMS)
        return musa_err(MUSA_ERR_VALUE, "[%s] a tensor has 0 to %d dims, got %d", where,
                        MUSA_MAX_DIMS, ndim);
    if (ndim > 0 && !shape)
        return musa_err(MUSA_ERR_VALUE, "[%s] shape is NULL for %d dims", where, ndim);
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return musa_err(MUSA_ERR_VALUE, "[%s] negative size %lld in dim %d", where,
                            (long long)shape[i], i);
        if (!musa_mul_i64(n, shape[i], &n))
            return musa_err(MUSA_ERR_VALUE, "[%s] shape has more than 2^63 elements", where);
    }
    if (numel) *numel = n;
    return MUSA_OK;
}

void musa_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        /* Only an empty tensor's product can overflow (e.g. (0, 2^62, 4)); it
         * addresses no element, so the strides past that point stay as is. */
        if (!musa_mul_i64(s, shape[i] ? shape[i] : 1, &s)) s = strides[i];
    }
}

int musa_wrap_dim(const char *where, int64_t dim, int ndim, int64_t *out) {
    int64_t n = ndim ? ndim : 1; /* a 0-d tensor accepts dim 0 and -1 */
    if (dim < -n || dim >= n)
        return musa_err(MUSA_ERR_INDEX, "[%s] dim %lld out of range for a %d-d tensor", where,
                        (long long)dim, ndim);
    *out = dim < 0 ? dim + n : dim;
    return MUSA_OK;
}

int musa_broadcast_shape(const char *where, int na, const int64_t *a, int nb, const int64_t *b,
                         int *nout, int64_t *out) {
    if (na == nb && (na == 0 || !memcmp(a, b, sizeof(int64_t) * (size_t)na))) { /* equal shapes */
        if (out != a) memmove(out, a, sizeof(int64_t) * (size_t)na);
        *nout = na;
        return MUSA_OK;
    }
    int n = na > nb ? na : nb;
    int64_t res[MUSA_MAX_DIMS]; /* out may alias a or b */
    for (int i = 0; i < n; i++) {
        int64_t da = i < n - na ? 1 : a[i - (n - na)];
        int64_t db = i < n - nb ? 1 : b[i - (n - nb)];
        if (da != db && da != 1 && db != 1) {
            char sa[128], sb[128];
            return musa_err(MUSA_ERR_VALUE, "[%s] shapes %s and %s cannot be broadcast", where,
                            musa_shape_str(na, a, sa, sizeof sa),
                            musa_shape_str(nb, b, sb, sizeof sb));
        }
        res[i] = da == 1 ? db : da;
    }
    memcpy(out, res, sizeof(int64_t) * (size_t)n);
    *nout = n;
    return MUSA_OK;
}

/* ---- storage ---- */

static musa_storage *storage_new(size_t nbytes) {
    musa_storage *s = musa_tl_alloc(MUSA_TL_STORAGE, sizeof *s, "tensor");
    if (!s) return NULL;
    size_t block;
    s->data = musa_cpu_alloc(nbytes, &block);
    if (!s->data) {
        musa_tl_free(MUSA_TL_STORAGE, s);
        return NULL;
    }
    atomic_init(&s->refcount, 1);
    atomic_init(&s->version, 0);
    s->nbytes = nbytes;
    s->block_bytes = block;
    s->deleter = NULL;
    s->deleter_ctx = NULL;
    s->device = (musa_device){MUSA_DEVICE_CPU, 0};
    atomic_init(&s->sync, NULL);
    return s;
}

static void free_exact(void *ctx) {
    musa_storage *s = ctx;
    musa_cpu_free_exact(s->data, s->nbytes);
}

musa_storage *musa_storage_exact(size_t nbytes) {
    musa_storage *s = musa_tl_alloc(MUSA_TL_STORAGE, sizeof *s, "storage");
    if (!s) return NULL;
    size_t block;
    if (!(s->data = musa_cpu_alloc_exact(nbytes, &block))) {
        musa_tl_free(MUSA_TL_STORAGE, s);
        return NULL;
    }
    atomic_init(&s->refcount, 1);
    atomic_init(&s->version, 0);
    s->nbytes = block; /* the whole block, which free_exact returns */
    s->block_bytes = 0;
    s->deleter = free_exact;
    s->deleter_ctx = s;
    s->device = (musa_device){MUSA_DEVICE_CPU, 0};
    atomic_init(&s->sync, NULL);
    return s;
}

void musa_storage_release(musa_storage *s) {
    if (!s || atomic_fetch_sub(&s->refcount, 1) != 1) return;
    musa_storage_sync_free(s);
    if (s->block_bytes)
        musa_cpu_free(s->data, s->block_bytes);
    else if (s->deleter)
        s->deleter(s->deleter_ctx);
    musa_tl_free(MUSA_TL_STORAGE, s);
}

/* ---- tensors ---- */

_Thread_local uint32_t musa_tensor_epoch;

static musa_tensor *tensor_struct(musa_dtype dtype, int ndim, const int64_t *shape, int64_t numel) {
    musa_tensor *t = musa_tl_alloc(MUSA_TL_TENSOR, sizeof *t, "tensor");
    if (!t) return NULL;
    memset(t, 0, offsetof(musa_tensor, shape)); /* dims past ndim are never read */
    t->storage = NULL, t->autograd = NULL, t->pyobj = NULL, t->view_base = NULL, t->trace_tag = 0;
    t->epoch = musa_tensor_epoch;
    atomic_init(&t->refcount, 1);
    t->dtype = (int8_t)dtype;
    t->ndim = (int8_t)ndim;
    t->numel = numel;
    if (ndim) memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    musa_contiguous_strides(ndim, t->shape, t->strides);
    return t;
}

musa_tensor *musa_tensor_alloc(musa_dtype dtype, int ndim, const int64_t *shape) {
    int64_t numel;
    if (!musa_dtype_valid((int)dtype)) {
        musa_err(MUSA_ERR_TYPE, "[empty] invalid dtype %d", (int)dtype);
        return NULL;
    }
    if (musa_shape_check("empty", ndim, shape, &numel)) return NULL;
    size_t bytes;
    if (!musa_mul_size((size_t)numel, musa_dtype_info[dtype].size, &bytes)) {
        musa_err_nomem("empty", SIZE_MAX);
        return NULL;
    }
    musa_tensor *t = tensor_struct(dtype, ndim, shape, numel);
    if (!t) return NULL;
    t->storage = storage_new(bytes);
    if (!t->storage) {
        musa_tl_free(MUSA_TL_TENSOR, t);
        return NULL;
    }
    return t;
}

musa_tensor *musa_tensor_meta(musa_dtype dtype, int ndim, const int64_t *shape) {
    int64_t numel;
    if (musa_shape_check("meta", ndim, shape, &numel)) return NULL;
    return tensor_struct(dtype, ndim, shape, numel);
}

musa_tensor *musa_tensor_on_storage(musa_storage *s, musa_dtype dtype, int ndim,
                                    const int64_t *shape, const int64_t *strides, int64_t offset) {
    int64_t numel;
    if (musa_shape_check("view", ndim, shape, &numel)) return NULL;
    musa_tensor *t = tensor_struct(dtype, ndim, shape, numel);
    if (!t) return NULL;
    if (ndim) memcpy(t->strides, strides, sizeof(int64_t) * (size_t)ndim);
    t->offset = offset;
    t->storage = s;
    atomic_fetch_add(&s->refcount, 1);
    return t;
}

musa_tensor *musa_tensor_view_of(const musa_tensor *base, int ndim, const int64_t *shape,
                                 const int64_t *strides, int64_t offset) {
    int64_t numel;
    if (musa_shape_check("view", ndim, shape, &numel)) return NULL;
    if (offset < 0) {
        musa_err(MUSA_ERR_VALUE, "[view] negative storage offset %lld", (long long)offset);
        return NULL;
    }
    /* An empty view addresses no element, so its offset may be anything
     * (selecting index 1 of a (0, 3) tensor gives offset 1 into an empty
     * storage); it is clamped to the storage's end, because the data
     * pointer is computed from it (and an offset of 2^62 overflowed it). */
    size_t nelem = base->storage ? base->storage->nbytes / musa_dtype_info[base->dtype].size : 0;
    if (base->storage && numel == 0 && (uint64_t)offset > nelem) offset = (int64_t)nelem;
    /* Bound check: the last addressable element must lie inside the storage. */
    if (base->storage && numel > 0) {
        int64_t last = offset, step;
        for (int i = 0; i < ndim; i++) {
            if (strides[i] < 0 || !musa_mul_i64(shape[i] - 1, strides[i], &step) ||
                !musa_add_i64(last, step, &last)) {
                musa_err(MUSA_ERR_VALUE, "[view] invalid strides for this shape");
                return NULL;
            }
        }
        if ((uint64_t)last >= nelem) {
            musa_err(MUSA_ERR_VALUE,
                     "[view] view reaches element %lld of a storage with %zu elements",
                     (long long)last, nelem);
            return NULL;
        }
    }
    musa_tensor *t = tensor_struct((musa_dtype)base->dtype, ndim, shape, numel);
    if (!t) return NULL;
    if (ndim) memcpy(t->strides, strides, sizeof(int64_t) * (size_t)ndim);
    /* A size-1 dim's stride addresses nothing and may be anything (slicing
     * with step 2^63 - 1 keeps one element); kernels still scale strides to
     * bytes, so one larger than the storage is clamped to its length. */
    for (int i = 0; base->storage && numel > 0 && i < ndim; i++)
        if (shape[i] == 1 && (uint64_t)t->strides[i] > nelem) t->strides[i] = (int64_t)nelem;
    t->offset = offset;
    t->storage = base->storage;
    if (t->storage) atomic_fetch_add(&t->storage->refcount, 1);
    /* An exact alias (e.g. a tensor autograd saves) is the same graph value
     * while a capture runs. */
    if (offset == base->offset && musa_shape_equal(ndim, shape, base->ndim, base->shape) &&
        (!ndim || !memcmp(t->strides, base->strides, sizeof(int64_t) * (size_t)ndim)))
        t->trace_tag = base->trace_tag;
    return t;
}

musa_tensor *musa_tensor_retain(musa_tensor *t) {
    if (t) atomic_fetch_add_explicit(&t->refcount, 1, memory_order_relaxed);
    return t;
}

void musa_tensor_release(musa_tensor *t) {
    if (!t || atomic_fetch_sub_explicit(&t->refcount, 1, memory_order_acq_rel) != 1) return;
    if (t->autograd && musa_tensor_autograd_free_hook) musa_tensor_autograd_free_hook(t);
    musa_storage_release(t->storage);
    musa_tensor *base = t->view_base; /* a root: releasing it does not recurse further */
    musa_tl_free(MUSA_TL_TENSOR, t);
    musa_tensor_release(base);
}

void musa_tensor_kview(const musa_tensor *t, musa_kview *kv) {
    kv->data = t->storage
                   ? (char *)t->storage->data + (size_t)t->offset * musa_dtype_info[t->dtype].size
                   : NULL;
    kv->dtype = t->dtype;
    kv->ndim = t->ndim;
    for (int i = 0; i < t->ndim; i++) { /* entries past ndim are never read */
        kv->shape[i] = t->shape[i];
        kv->strides[i] = t->strides[i];
    }
}

bool musa_tensor_may_overlap(const musa_tensor *a, const musa_tensor *b) {
    if (!a->storage || a->storage != b->storage) return false;
    if (a->numel == 0 || b->numel == 0) return false;
    int64_t a_end = a->offset, b_end = b->offset;
    for (int i = 0; i < a->ndim; i++) a_end += (a->shape[i] - 1) * a->strides[i];
    for (int i = 0; i < b->ndim; i++) b_end += (b->shape[i] - 1) * b->strides[i];
    return a->offset <= b_end && b->offset <= a_end;
}

bool musa_tensor_same_layout(const musa_tensor *a, const musa_tensor *b) {
    if (a->storage != b->storage || a->offset != b->offset || a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i] || (a->shape[i] > 1 && a->strides[i] != b->strides[i]))
            return false;
    return true;
}

/* ---- public accessors ---- */

int musa_tensor_ndim(const musa_tensor *t) {
    return t ? t->ndim : -1;
}
const int64_t *musa_tensor_shape(const musa_tensor *t) {
    return t ? t->shape : NULL;
}
const int64_t *musa_tensor_strides(const musa_tensor *t) {
    return t ? t->strides : NULL;
}
int64_t musa_tensor_numel(const musa_tensor *t) {
    return t ? t->numel : -1;
}
int64_t musa_tensor_offset(const musa_tensor *t) {
    return t ? t->offset : -1;
}
musa_dtype musa_tensor_dtype(const musa_tensor *t) {
    return t ? (musa_dtype)t->dtype : MUSA_DTYPE_FLOAT32;
}
bool musa_tensor_is_meta(const musa_tensor *t) {
    return t && !t->storage;
}
bool musa_tensor_is_number(const musa_tensor *t) {
    return t && (t->flags & MUSA_TF_NUMBER);
}

musa_device musa_tensor_device(const musa_tensor *t) {
    return t && t->storage ? t->storage->device : (musa_device){MUSA_DEVICE_CPU, 0};
}

int64_t musa_tensor_size(const musa_tensor *t, int64_t dim) {
    int64_t d = 0;
    if (!t) {
        musa_err(MUSA_ERR_VALUE, "[size] tensor is NULL");
        return -1;
    }
    if (musa_wrap_dim("size", dim, t->ndim, &d)) return -1;
    return t->ndim ? t->shape[d] : 1;
}

bool musa_tensor_is_contiguous(const musa_tensor *t) {
    if (!t) return false;
    musa_kview kv;
    musa_tensor_kview(t, &kv);
    return musa_kview_contiguous(&kv);
}

void *musa_tensor_data(const musa_tensor *t) {
    if (!t || !t->storage) return NULL;
    /* the caller may read or write: stream work on it finishes first (a
     * failure is reported by musa_tensor_sync and the readers below) */
    if (MUSA_UNLIKELY(musa_streams_live())) (void)musa_storage_wait(t->storage, true);
    return (char *)t->storage->data + (size_t)t->offset * musa_dtype_info[t->dtype].size;
}

void *musa_tensor_handle(const musa_tensor *t) {
    return t ? t->pyobj : NULL;
}
void musa_tensor_set_handle(musa_tensor *t, void *handle) {
    if (t) t->pyobj = handle;
}

bool musa_tensor_shares_storage(const musa_tensor *a, const musa_tensor *b) {
    return a && b && a->storage && a->storage == b->storage;
}

musa_tensor *musa_tensor_storage_bytes(const musa_tensor *t) {
    if (!t || !t->storage) {
        musa_err(MUSA_ERR_VALUE, "[untyped_storage] %s",
                 t ? "a meta tensor has no storage" : "the tensor is NULL");
        return NULL;
    }
    int64_t n = (int64_t)t->storage->nbytes, one = 1;
    return musa_tensor_on_storage(t->storage, MUSA_DTYPE_UINT8, 1, &n, &one, 0);
}

uint64_t musa_tensor_version(const musa_tensor *t) {
    return t && t->storage ? atomic_load(&t->storage->version) : 0;
}

void musa_tensor_bump_version(musa_tensor *t) {
    if (t && t->storage) atomic_fetch_add(&t->storage->version, 1);
}

int musa_tensor_sync(const musa_tensor *t) {
    if (!t || !t->storage || MUSA_LIKELY(!musa_streams_live())) return MUSA_OK;
    return musa_storage_wait(t->storage, true);
}

static int need_data(const musa_tensor *t, const char *where) {
    if (!t) return musa_err(MUSA_ERR_VALUE, "[%s] tensor is NULL", where);
    if (!t->storage)
        return musa_err(MUSA_ERR_RUNTIME, "[%s] a meta tensor has no data (symbolic mode)", where);
    return musa_tensor_sync(t);
}

int musa_tensor_copy_to(const musa_tensor *t, void *dst, size_t dst_bytes) {
    int rc = need_data(t, "copy_to");
    if (rc) return rc;
    size_t need;
    if (!musa_mul_size((size_t)t->numel, musa_dtype_info[t->dtype].size, &need))
        return musa_err(MUSA_ERR_VALUE, "[copy_to] %lld elements are more bytes than memory has",
                        (long long)t->numel);
    if (dst_bytes < need)
        return musa_err(MUSA_ERR_VALUE, "[copy_to] destination holds %zu bytes, need %zu",
                        dst_bytes, need);
    musa_kview src, out;
    musa_tensor_kview(t, &src);
    out = src;
    out.data = dst;
    musa_contiguous_strides(t->ndim, t->shape, out.strides);
    return musa_cpu_copy(&out, &src);
}

int musa_tensor_item(const musa_tensor *t, double *out) {
    int rc = need_data(t, "item");
    if (rc) return rc;
    if (t->numel != 1)
        return musa_err(MUSA_ERR_VALUE,
                        "[item] a tensor with %lld elements cannot be converted to a scalar",
                        (long long)t->numel);
    *out = musa_load_f64(musa_tensor_data(t), (musa_dtype)t->dtype);
    return MUSA_OK;
}

int musa_tensor_item_int(const musa_tensor *t, int64_t *out) {
    int rc = need_data(t, "item");
    if (rc) return rc;
    if (t->numel != 1)
        return musa_err(MUSA_ERR_VALUE,
                        "[item] a tensor with %lld elements cannot be converted to a scalar",
                        (long long)t->numel);
    *out = musa_load_i64(musa_tensor_data(t), (musa_dtype)t->dtype);
    return MUSA_OK;
}

int musa_tensor_get(const musa_tensor *t, const int64_t *index, double *out) {
    int rc = need_data(t, "get");
    if (rc) return rc;
    int64_t off = 0;
    for (int i = 0; i < t->ndim; i++) {
        int64_t ix = index[i] < 0 ? index[i] + t->shape[i] : index[i];
        if (ix < 0 || ix >= t->shape[i])
            return musa_err(MUSA_ERR_INDEX, "[get] index %lld out of range for dim %d of size %lld",
                            (long long)index[i], i, (long long)t->shape[i]);
        off += ix * t->strides[i];
    }
    *out = musa_load_f64((const char *)musa_tensor_data(t) +
                             off * (int64_t)musa_dtype_info[t->dtype].size,
                         (musa_dtype)t->dtype);
    return MUSA_OK;
}

/* ---- creation from memory ---- */

musa_tensor *musa_from_data(const void *data, int ndim, const int64_t *shape, musa_dtype dtype) {
    musa_tensor *t = musa_tensor_alloc(dtype, ndim, shape);
    if (!t) return NULL;
    size_t bytes = (size_t)t->numel * musa_dtype_info[dtype].size;
    if (bytes && !data) {
        musa_tensor_release(t);
        musa_err(MUSA_ERR_VALUE, "[from_data] data is NULL");
        return NULL;
    }
    if (bytes) memcpy(t->storage->data, data, bytes);
    t->epoch = 0; /* data from outside: a capture may bind it as a parameter */
    return t;
}

musa_tensor *musa_from_blob(void *data, int ndim, const int64_t *shape, const int64_t *strides,
                            musa_dtype dtype, void (*deleter)(void *ctx), void *ctx) {
    int64_t numel;
    if (!musa_dtype_valid((int)dtype)) {
        musa_err(MUSA_ERR_TYPE, "[from_blob] invalid dtype %d", (int)dtype);
        return NULL;
    }
    if (musa_shape_check("from_blob", ndim, shape, &numel)) return NULL;
    if (!data && numel) {
        musa_err(MUSA_ERR_VALUE, "[from_blob] data is NULL");
        return NULL;
    }
    /* Kernels load elements as their C types, which needs natural alignment
     * (an odd address is undefined behaviour, and a fault on some CPUs). */
    size_t esize = musa_dtype_info[dtype].size;
    if (numel && (uintptr_t)data % esize) {
        musa_err(MUSA_ERR_VALUE,
                 "[from_blob] data at %p is not aligned to its %zu-byte elements; copy it to "
                 "aligned memory first",
                 data, esize);
        return NULL;
    }
    int64_t st[MUSA_MAX_DIMS];
    if (strides)
        memcpy(st, strides, sizeof(int64_t) * (size_t)ndim);
    else
        musa_contiguous_strides(ndim, shape, st);
    int64_t last = 0, step;
    size_t span = 0;
    for (int i = 0; i < ndim; i++) {
        if (st[i] < 0) {
            musa_err(MUSA_ERR_VALUE, "[from_blob] negative strides are not supported");
            return NULL;
        }
        if (numel &&
            (!musa_mul_i64(shape[i] - 1, st[i], &step) || !musa_add_i64(last, step, &last))) {
            musa_err(MUSA_ERR_VALUE, "[from_blob] the strides reach past 2^63 elements");
            return NULL;
        }
    }
    if (numel && !musa_mul_size((size_t)last + 1, esize, &span)) {
        musa_err(MUSA_ERR_VALUE, "[from_blob] the strides reach past 2^64 bytes");
        return NULL;
    }
    musa_storage *s = musa_tl_alloc(MUSA_TL_STORAGE, sizeof *s, "from_blob");
    if (!s) return NULL;
    atomic_init(&s->refcount, 1);
    atomic_init(&s->version, 0);
    s->data = data;
    s->nbytes = numel ? span : 0;
    s->block_bytes = 0;
    s->deleter = deleter;
    s->deleter_ctx = ctx;
    s->device = (musa_device){MUSA_DEVICE_CPU, 0};
    atomic_init(&s->sync, NULL);
    musa_tensor *t = tensor_struct(dtype, ndim, shape, numel);
    if (!t) {
        musa_tl_free(MUSA_TL_STORAGE, s); /* the caller keeps ownership of data when we fail */
        return NULL;
    }
    /* as in musa_tensor_view_of: no size-1 stride past the memory's length */
    for (int i = 0; numel && i < ndim; i++)
        if (shape[i] == 1 && st[i] > last + 1) st[i] = last + 1;
    memcpy(t->strides, st, sizeof(int64_t) * (size_t)ndim);
    t->storage = s;
    t->epoch = 0; /* memory from outside: a capture may bind it as a parameter */
    return t;
}

musa_tensor *musa_scalar(double value, musa_dtype dtype) {
    musa_tensor *t = musa_tensor_alloc(dtype, 0, NULL);
    if (t) musa_store_f64(t->storage->data, dtype, value);
    return t;
}

musa_tensor *musa_number(double value) {
    musa_tensor *t = musa_scalar(value, MUSA_DTYPE_FLOAT64);
    if (t) t->flags |= MUSA_TF_NUMBER;
    return t;
}

musa_tensor *musa_number_int(int64_t value) {
    musa_tensor *t = musa_tensor_alloc(MUSA_DTYPE_INT64, 0, NULL);
    if (!t) return NULL;
    *(int64_t *)t->storage->data = value;
    t->flags |= MUSA_TF_NUMBER;
    return t;
}

musa_tensor *musa_number_bool(bool value) {
    musa_tensor *t = musa_scalar(value, MUSA_DTYPE_BOOL);
    if (t) t->flags |= MUSA_TF_NUMBER;
    return t;
}

/* ---- devices ---- */

int musa_device_check(musa_device device) {
    if (device.type == MUSA_DEVICE_CPU) return MUSA_OK;
    if (device.type == MUSA_DEVICE_CUDA)
        return musa_err(MUSA_ERR_DEVICE,
                        "[device] cuda:%d is not available in this build (musa was built "
                        "without a CUDA backend)",
                        device.index);
    return musa_err(MUSA_ERR_VALUE, "[device] unknown device type %d", (int)device.type);
}

bool musa_cuda_is_available(void) {
    return false;
}
