/*
 * interop.c - zero-copy exchange with NumPy and other frameworks: the
 * buffer protocol (so numpy.asarray(t) shares memory), numpy(),
 * from_numpy(), DLPack (__dlpack__, __dlpack_device__, from_dlpack), and
 * a tensor's whole storage as bytes (musa.storage's UntypedStorage).
 */
#include <string.h>

#include "pymusa.h"

/* ---- buffer protocol ---- */

static const char *buffer_format(musa_dtype d) {
    switch (d) {
    case MUSA_DTYPE_FLOAT32:
        return "f";
    case MUSA_DTYPE_FLOAT64:
        return "d";
    case MUSA_DTYPE_FLOAT16:
        return "e";
    case MUSA_DTYPE_INT64:
        return "q";
    case MUSA_DTYPE_INT32:
        return "i";
    case MUSA_DTYPE_INT16:
        return "h";
    case MUSA_DTYPE_INT8:
        return "b";
    case MUSA_DTYPE_UINT8:
        return "B";
    case MUSA_DTYPE_BOOL:
        return "?";
    default:
        return NULL;
    }
}

typedef struct buffer_hold {
    musa_tensor *t;   /* a reference: the exported memory stays alive */
    Py_ssize_t arr[]; /* shape[ndim], then strides[ndim] in bytes */
} buffer_hold;

static int tensor_getbuffer(PyObject *self, Py_buffer *view, int flags) {
    musa_tensor *t = pm_t(self);
    pm_host_read(t, MUSA_READ_DATA, 0);
    if (musa_tensor_sync(t)) { /* the stream work that was to produce it failed */
        pm_raise();
        return -1;
    }
    const char *fmt = buffer_format(musa_tensor_dtype(t));
    if (!fmt) {
        PyErr_Format(PyExc_TypeError,
                     "[Tensor.__buffer__] %s tensors have no buffer format (NumPy has no %s); "
                     "cast first",
                     musa_dtype_name(musa_tensor_dtype(t)), musa_dtype_name(musa_tensor_dtype(t)));
        return -1;
    }
    if (musa_tensor_is_meta(t)) {
        PyErr_SetString(PyExc_RuntimeError, "[Tensor.__buffer__] a meta tensor has no data");
        return -1;
    }
    int nd = musa_tensor_ndim(t);
    /* view->internal: the tensor, retained so its storage outlives any
     * change of the Python object (x.data = ...), then shape and strides */
    buffer_hold *hold =
        PyMem_Malloc(sizeof(buffer_hold) + sizeof(Py_ssize_t) * 2 * (size_t)(nd ? nd : 1));
    if (!hold) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t *arr = hold->arr;
    size_t es = musa_dtype_size(musa_tensor_dtype(t));
    int64_t len;
    bool fits = !__builtin_mul_overflow(musa_tensor_numel(t), (int64_t)es, &len);
    for (int i = 0; i < nd; i++) {
        arr[i] = (Py_ssize_t)musa_tensor_shape(t)[i];
        /* a stride in bytes; one that overflows steps nowhere (a size-1 dim,
         * or an empty tensor), else the tensor is past the address space */
        int64_t st;
        if (__builtin_mul_overflow(musa_tensor_strides(t)[i], (int64_t)es, &st)) {
            st = 0;
            fits = fits && (musa_tensor_numel(t) == 0 || musa_tensor_shape(t)[i] <= 1);
        }
        arr[nd + i] = (Py_ssize_t)st;
    }
    if (!fits) { /* (an expanded view of 2**62 elements) */
        PyMem_Free(hold);
        PyErr_Format(PyExc_BufferError,
                     "[Tensor.__buffer__] a tensor of %lld elements is larger than memory",
                     (long long)musa_tensor_numel(t));
        return -1;
    }
    bool contig = musa_tensor_is_contiguous(t);
    if ((flags & PyBUF_STRIDES) != PyBUF_STRIDES && !contig) {
        PyMem_Free(hold);
        PyErr_SetString(PyExc_BufferError,
                        "[Tensor.__buffer__] tensor is not contiguous; the consumer needs strides");
        return -1;
    }
    view->buf = musa_tensor_data(t);
    view->obj = Py_NewRef(self);
    view->len = (Py_ssize_t)len;
    view->itemsize = (Py_ssize_t)es;
    view->readonly = 0;
    view->ndim = nd;
    view->format = (flags & PyBUF_FORMAT) ? (char *)fmt : NULL;
    view->shape = (flags & PyBUF_ND) ? arr : NULL;
    view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? arr + nd : NULL;
    view->suboffsets = NULL;
    hold->t = musa_tensor_retain(t);
    view->internal = hold;
    return 0;
}

static void tensor_releasebuffer(PyObject *self, Py_buffer *view) {
    (void)self;
    buffer_hold *hold = view->internal;
    musa_tensor_release(hold->t);
    PyMem_Free(hold);
}

PyBufferProcs pm_tensor_buffer_procs = {tensor_getbuffer, tensor_releasebuffer};

static PyObject *numpy_module(void) {
    static PyObject *np;
    if (!np) np = PyImport_ImportModule("numpy");
    return np;
}

/* numpy(): an ndarray sharing memory */
DEF(numpy, PM_METH, "self:T * force:b=False") {
    musa_tensor *t = a[0].t;
    pm_host_read(t, MUSA_READ_DATA, 0);
    if (musa_tensor_sync(t)) return pm_raise();
    if (musa_tensor_requires_grad(t) && !a[1].b) {
        PyErr_SetString(PyExc_RuntimeError, "[numpy] Can't call numpy() on Tensor that requires "
                                            "grad. Use tensor.detach().numpy() instead.");
        return NULL;
    }
    if (musa_tensor_dtype(t) == MUSA_DTYPE_BFLOAT16) {
        PyErr_SetString(PyExc_TypeError,
                        "[numpy] NumPy has no bfloat16; convert first, e.g. t.float().numpy()");
        return NULL;
    }
    PyObject *np = numpy_module();
    if (!np) return NULL;
    if (a[1].b) { /* force: a copy, detached */
        musa_tensor *c = musa_clone(t);
        musa_tensor *d = c ? musa_detach(c) : NULL;
        musa_tensor_release(c);
        PyObject *o = pm_wrap(d);
        if (!o) return NULL;
        PyObject *r = PyObject_CallMethod(np, "asarray", "O", o);
        Py_DECREF(o);
        return r;
    }
    return PyObject_CallMethod(np, "asarray", "O", a[0].o);
}

DEF(__array__, PM_METH, "self:T dtype:O=None") {
    pm_host_read(a[0].t, MUSA_READ_DATA, 0);
    PyObject *np = numpy_module();
    if (!np) return NULL;
    PyObject *src = a[0].o, *tmp = NULL;
    if (musa_tensor_dtype(a[0].t) == MUSA_DTYPE_BFLOAT16) { /* NumPy has no bfloat16: float32 */
        if (!(tmp = pm_wrap(musa_cast(a[0].t, MUSA_DTYPE_FLOAT32)))) return NULL;
        src = tmp;
    }
    /* NumPy reads the buffer through a memoryview: given the tensor, it
     * would come back here when the buffer fails (endless recursion) */
    PyObject *mv = PyMemoryView_FromObject(src);
    Py_XDECREF(tmp); /* (the memoryview holds it) */
    if (!mv) return NULL;
    PyObject *r = a[1].o == Py_None ? PyObject_CallMethod(np, "asarray", "O", mv)
                                    : PyObject_CallMethod(np, "asarray", "OO", mv, a[1].o);
    Py_DECREF(mv);
    return r;
}

DEF(from_numpy, PM_FN, "ndarray:O") {
    PyObject *np = numpy_module();
    if (!np) return NULL;
    PyObject *ndarray = PyObject_GetAttrString(np, "ndarray");
    int is = ndarray ? PyObject_IsInstance(a[0].o, ndarray) : -1;
    Py_XDECREF(ndarray);
    if (is < 0) return NULL;
    if (!is) {
        PyErr_Format(PyExc_TypeError, "[%s] expected np.ndarray (got %s)", who,
                     Py_TYPE(a[0].o)->tp_name);
        return NULL;
    }
    musa_tensor *t = pm_tensor_from_buffer(a[0].o, who, true);
    return t ? pm_wrap(t) : NULL;
}

/* as_tensor(data, dtype=None): shares memory with buffers when it can */
DEF(as_tensor, PM_FN, "data:O dtype:d=None device:O=None") {
    musa_device dev;
    if (pm_device_from(a[2].o, &dev, who)) return NULL;
    if (musa_device_check(dev)) return pm_raise();
    if (pm_is_tensor(a[0].o)) {
        if (a[1].dtype < 0 || a[1].dtype == (int)musa_tensor_dtype(a[0].t))
            return Py_NewRef(a[0].o);
        return pm_wrap(musa_cast(a[0].t, a[1].dtype));
    }
    if (PyObject_CheckBuffer(a[0].o) && !PyBytes_Check(a[0].o)) {
        musa_tensor *t = pm_tensor_from_buffer(a[0].o, who, false);
        if (!t) return NULL;
        if (a[1].dtype >= 0 && a[1].dtype != (int)musa_tensor_dtype(t)) {
            musa_tensor *c = musa_cast(t, a[1].dtype);
            musa_tensor_release(t);
            t = c;
        }
        return pm_wrap(t);
    }
    musa_tensor *t = pm_tensor_from_data(a[0].o, a[1].dtype, who);
    return t ? pm_wrap(t) : NULL;
}

/* ---- DLPack (ABI of dlpack.h v0.x, which NumPy and PyTorch speak) ---- */

typedef struct {
    int32_t device_type; /* kDLCPU = 1 */
    int32_t device_id;
} DLDevice;
typedef struct {
    uint8_t code; /* kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLBool 6 */
    uint8_t bits;
    uint16_t lanes;
} DLDataType;
typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides;
    uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

enum { kDLCPU = 1, kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLBool = 6 };

typedef struct {
    DLManagedTensor m;
    int64_t shape[MUSA_MAX_DIMS], strides[MUSA_MAX_DIMS];
} export_block;

static void export_deleter(DLManagedTensor *m) {
    musa_tensor_release((musa_tensor *)m->manager_ctx);
    PyMem_RawFree(m);
}

static void capsule_destructor(PyObject *cap) {
    /* not consumed: still named "dltensor", so free it here */
    if (!PyCapsule_IsValid(cap, "dltensor")) return;
    DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
    if (m && m->deleter) m->deleter(m);
}

static bool dl_dtype(musa_dtype d, DLDataType *o) {
    o->lanes = 1;
    o->bits = (uint8_t)(8 * musa_dtype_size(d));
    switch (d) {
    case MUSA_DTYPE_FLOAT32:
    case MUSA_DTYPE_FLOAT64:
    case MUSA_DTYPE_FLOAT16:
        o->code = kDLFloat;
        return true;
    case MUSA_DTYPE_BFLOAT16:
        o->code = kDLBfloat;
        return true;
    case MUSA_DTYPE_INT64:
    case MUSA_DTYPE_INT32:
    case MUSA_DTYPE_INT16:
    case MUSA_DTYPE_INT8:
        o->code = kDLInt;
        return true;
    case MUSA_DTYPE_UINT8:
        o->code = kDLUInt;
        return true;
    case MUSA_DTYPE_BOOL:
        o->code = kDLBool;
        return true;
    default:
        return false;
    }
}

DEF(__dlpack__, PM_METH, "self:T stream:O=None") {
    musa_tensor *t = a[0].t;
    if (a[1].o != Py_None) {
        PyErr_SetString(PyExc_ValueError, "[__dlpack__] stream must be None for CPU tensors");
        return NULL;
    }
    if (musa_tensor_requires_grad(t)) {
        PyErr_SetString(
            PyExc_RuntimeError,
            "[__dlpack__] Can't export tensors that require gradient, use tensor.detach()");
        return NULL;
    }
    export_block *b = PyMem_RawCalloc(1, sizeof *b);
    if (!b) return PyErr_NoMemory();
    DLTensor *dl = &b->m.dl_tensor;
    if (!dl_dtype(musa_tensor_dtype(t), &dl->dtype)) {
        PyMem_RawFree(b);
        PyErr_SetString(PyExc_TypeError, "[__dlpack__] unsupported dtype");
        return NULL;
    }
    dl->data = musa_tensor_data(t);
    dl->device = (DLDevice){kDLCPU, 0};
    dl->ndim = musa_tensor_ndim(t);
    for (int i = 0; i < dl->ndim; i++) {
        b->shape[i] = musa_tensor_shape(t)[i];
        b->strides[i] = musa_tensor_strides(t)[i];
    }
    dl->shape = b->shape;
    dl->strides = b->strides;
    dl->byte_offset = 0;
    b->m.manager_ctx = musa_tensor_retain(t);
    b->m.deleter = export_deleter;
    PyObject *cap = PyCapsule_New(&b->m, "dltensor", capsule_destructor);
    if (!cap) export_deleter(&b->m);
    return cap;
}

DEF(__dlpack_device__, PM_METH, "self:T") {
    return Py_BuildValue("(ii)", kDLCPU, 0);
}

static void import_deleter(void *ctx) {
    PyGILState_STATE g = PyGILState_Ensure(); /* producers' deleters may touch Python objects */
    DLManagedTensor *m = ctx;
    if (m->deleter) m->deleter(m);
    PyGILState_Release(g);
}

DEF(from_dlpack, PM_FN, "ext_tensor:O") {
    PyObject *cap;
    if (PyCapsule_CheckExact(a[0].o)) {
        cap = Py_NewRef(a[0].o);
    } else {
        if (!PyObject_HasAttrString(a[0].o, "__dlpack__") ||
            !PyObject_HasAttrString(a[0].o, "__dlpack_device__")) {
            PyErr_Format(
                PyExc_TypeError,
                "[from_dlpack] expected an object with __dlpack__ or a DLPack capsule, got %s",
                Py_TYPE(a[0].o)->tp_name);
            return NULL;
        }
        PyObject *dev = PyObject_CallMethod(a[0].o, "__dlpack_device__", NULL);
        if (!dev) return NULL;
        int dt = -1;
        if (!PyArg_ParseTuple(dev, "i|i", &dt, &(int){0})) {
            Py_DECREF(dev);
            return NULL;
        }
        Py_DECREF(dev);
        if (dt != kDLCPU) {
            PyErr_Format(PyExc_RuntimeError,
                         "[from_dlpack] only CPU tensors can be imported (device type %d)", dt);
            return NULL;
        }
        cap = PyObject_CallMethod(a[0].o, "__dlpack__", NULL);
        if (!cap) return NULL;
    }
    DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
    if (!m) {
        Py_DECREF(cap);
        return NULL; /* already consumed, or not a DLPack capsule */
    }
    DLTensor *dl = &m->dl_tensor;
    int d = -1;
    if (dl->dtype.lanes == 1) {
        uint8_t c = dl->dtype.code, bits = dl->dtype.bits;
        if (c == kDLFloat)
            d = bits == 32   ? MUSA_DTYPE_FLOAT32
                : bits == 64 ? MUSA_DTYPE_FLOAT64
                : bits == 16 ? MUSA_DTYPE_FLOAT16
                             : -1;
        else if (c == kDLBfloat && bits == 16)
            d = MUSA_DTYPE_BFLOAT16;
        else if (c == kDLInt)
            d = bits == 64   ? MUSA_DTYPE_INT64
                : bits == 32 ? MUSA_DTYPE_INT32
                : bits == 16 ? MUSA_DTYPE_INT16
                : bits == 8  ? MUSA_DTYPE_INT8
                             : -1;
        else if (c == kDLUInt && bits == 8)
            d = MUSA_DTYPE_UINT8;
        else if (c == kDLBool && bits == 8)
            d = MUSA_DTYPE_BOOL;
    }
    const char *why = d < 0                                      ? "its dtype is not supported"
                      : dl->device.device_type != kDLCPU         ? "it is not on the CPU"
                      : dl->ndim > MUSA_MAX_DIMS || dl->ndim < 0 ? "it has too many dimensions"
                                                                 : NULL;
    if (why) {
        PyErr_Format(PyExc_RuntimeError, "[from_dlpack] cannot import the tensor: %s", why);
        Py_DECREF(cap);
        return NULL;
    }
    musa_tensor *t = musa_from_blob((char *)dl->data + dl->byte_offset, dl->ndim, dl->shape,
                                    dl->strides, d, import_deleter, m);
    if (!t) {
        Py_DECREF(cap);
        return pm_raise();
    }
    PyCapsule_SetName(cap, "used_dltensor"); /* ours now: the deleter runs when the tensor dies */
    Py_DECREF(cap);
    return pm_wrap(t);
}

/* ---- storages ---- */

/* The whole storage a tensor looks into, as a uint8 tensor sharing it. */
DEF(_storage_bytes, PM_FN, "tensor:T") {
    return pm_ret(musa_tensor_storage_bytes(a[0].t));
}
