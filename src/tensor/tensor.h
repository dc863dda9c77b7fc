/*
 * tensor.h - the tensor and storage structs and the helpers every op uses.
 *
 * Invariants:
 * - a tensor holds one reference to its storage (NULL for a meta tensor);
 * - shape[i] >= 0 and numel = prod(shape) fits in int64 (checked on creation);
 * - every element a tensor can address lies inside its storage (views are
 *   checked when made);
 * - the version counter lives in the storage, so all views share it;
 * - strides are in elements and may be 0 (expand) but never negative.
 */
#ifndef MUSA_TENSOR_H
#define MUSA_TENSOR_H

#include <stdatomic.h>

#include "../backend/kernel.h"
#include "../base/dtype.h"

typedef struct musa_storage {
    atomic_int_fast64_t refcount;
    void *data;         /* 64-byte aligned allocator block, or external memory */
    size_t nbytes;      /* usable bytes */
    size_t block_bytes; /* allocator class size; 0 for external memory */
    atomic_uint_fast64_t version;
    void (*deleter)(void *ctx); /* external memory: called on the last release */
    void *deleter_ctx;
    musa_device device;
    _Atomic(struct musa_storage_sync *) sync; /* streams' use of it (stream.c); NULL: none */
} musa_storage;

/* A storage of at least nbytes from musa_cpu_alloc_exact (no size class:
 * for large blocks kept for long, like a plan's arena); NULL on failure. */
musa_storage *musa_storage_exact(size_t nbytes);
/* Drop a reference to a storage (freeing it with the last). */
void musa_storage_release(musa_storage *s);

enum {
    MUSA_TF_NUMBER = 1, /* wrapped number: lowest promotion priority */
};

struct musa_autograd_meta;

struct musa_tensor {
    atomic_int_fast32_t refcount;
    int8_t dtype; /* musa_dtype */
    int8_t ndim;
    uint8_t flags; /* MUSA_TF_* */
    int64_t numel;
    int64_t offset; /* elements from storage->data */
    int64_t shape[MUSA_MAX_DIMS];
    int64_t strides[MUSA_MAX_DIMS];
    musa_storage *storage;               /* NULL: meta tensor */
    struct musa_autograd_meta *autograd; /* owned; NULL unless autograd touched it */
    void *pyobj;                         /* borrowed back-pointer of the Python wrapper */
    musa_tensor *view_base;              /* views made by differentiable view ops: the root
                                            tensor they look into (strong); else NULL */
    uint64_t trace_tag;                  /* graph capture: which value this tensor is */
    uint32_t epoch;                      /* the capture running when it was made (0: none, or
                                            data from outside: musa_from_data/from_blob) */
};

/* This thread's capture epoch, stamped on new tensors (src/jit sets it). */
extern _Thread_local uint32_t musa_tensor_epoch;

/* Check a shape and compute its element count. Fails (MUSA_ERR_VALUE) for
 * ndim outside 0..MUSA_MAX_DIMS, negative sizes, or an overflowing product. */
int musa_shape_check(const char *where, int ndim, const int64_t *shape, int64_t *numel);
/* Row-major strides for a shape. */
void musa_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides);
/* Wrap a possibly negative dim into [0, ndim) (ndim 0 accepts -1 and 0 when
 * allow_scalar). MUSA_ERR_INDEX naming `where` if out of range. */
int musa_wrap_dim(const char *where, int64_t dim, int ndim, int64_t *out);
/* Whether two shapes are the same. */
static inline bool musa_shape_equal(int na, const int64_t *a, int nb, const int64_t *b) {
    if (na != nb) return false;
    for (int i = 0; i < na; i++)
        if (a[i] != b[i]) return false;
    return true;
}
/* Broadcast two shapes; MUSA_ERR_VALUE naming `where` and both shapes. */
int musa_broadcast_shape(const char *where, int na, const int64_t *a, int nb, const int64_t *b,
                         int *nout, int64_t *out);

/* A new contiguous tensor with uninitialised data (NULL on failure). */
musa_tensor *musa_tensor_alloc(musa_dtype dtype, int ndim, const int64_t *shape);
/* A meta tensor (no storage) with contiguous strides. */
musa_tensor *musa_tensor_meta(musa_dtype dtype, int ndim, const int64_t *shape);
/* A view of base's storage (or a meta view of a meta base). Checks that
 * every addressable element lies inside the storage. */
musa_tensor *musa_tensor_view_of(const musa_tensor *base, int ndim, const int64_t *shape,
                                 const int64_t *strides, int64_t offset);

/* A tensor over s (a new reference to it) whose layout the caller
 * guarantees lies inside s: no bound check. */
musa_tensor *musa_tensor_on_storage(musa_storage *s, musa_dtype dtype, int ndim,
                                    const int64_t *shape, const int64_t *strides, int64_t offset);

/* Describe a tensor to a kernel. */
void musa_tensor_kview(const musa_tensor *t, musa_kview *kv);

/* Called when a tensor with autograd meta dies; set by the autograd layer. */
extern void (*musa_tensor_autograd_free_hook)(musa_tensor *t);

/* Whether two tensors may share memory (same storage, overlapping byte
 * ranges); conservative. */
bool musa_tensor_may_overlap(const musa_tensor *a, const musa_tensor *b);
/* Same storage, offset, shape and strides. */
bool musa_tensor_same_layout(const musa_tensor *a, const musa_tensor *b);

#endif
