/*
 * convert.c - errors, dtype and device objects, and Python data to tensors.
 */
#include <string.h>

#include "pymusa.h"

/* ---- errors ---- */

static PyObject *stash_type, *stash_value, *stash_tb; /* from a callback */

int pm_stash_exception(void) {
    pm_drop_stash();
    PyErr_Fetch(&stash_type, &stash_value, &stash_tb);
    return MUSA_ERR_RUNTIME;
}

void pm_drop_stash(void) {
    Py_CLEAR(stash_type);
    Py_CLEAR(stash_value);
    Py_CLEAR(stash_tb);
}

/* musa's errors for bad values and types are also RuntimeErrors, which is
 * what PyTorch raises for them (shape mismatches, wrong dtypes): code that
 * catches either keeps working. Made in pm_types_init. */
static PyObject *value_error_cls, *type_error_cls, *linalg_error_cls;

PyObject *pm_raise(void) {
    if (stash_type) {
        PyErr_Restore(stash_type, stash_value, stash_tb);
        stash_type = stash_value = stash_tb = NULL;
        return NULL;
    }
    if (PyErr_Occurred()) return NULL;
    PyObject *cls;
    switch (musa_last_error_code()) {
    case MUSA_ERR_VALUE:
        cls = value_error_cls ? value_error_cls : PyExc_ValueError;
        break;
    case MUSA_ERR_TYPE:
        cls = type_error_cls ? type_error_cls : PyExc_TypeError;
        break;
    case MUSA_ERR_INDEX:
        cls = PyExc_IndexError;
        break;
    case MUSA_ERR_NOMEM:
        cls = PyExc_MemoryError;
        break;
    case MUSA_ERR_NOT_IMPLEMENTED:
        cls = PyExc_NotImplementedError;
        break;
    case MUSA_ERR_IO:
        cls = PyExc_OSError;
        break;
    case MUSA_ERR_ZERO_DIVISION:
        cls = PyExc_ZeroDivisionError;
        break;
    case MUSA_ERR_LINALG:
        cls = linalg_error_cls ? linalg_error_cls : PyExc_ValueError;
        break;
    case MUSA_ERR_INTERRUPTED: /* Ctrl-C: Python's handler decides (KeyboardInterrupt) */
        if (PyErr_CheckSignals() < 0) return NULL;
        cls = PyExc_KeyboardInterrupt;
        break;
    default:
        cls = PyExc_RuntimeError;
        break;
    }
    const char *msg = musa_last_error();
    PyErr_SetString(cls, *msg ? msg : "[musa] operation failed without a message");
    /* raised: the next call starts clean (a NULL input keeps a pending
     * error as its cause, so a stale one would name the wrong op) */
    musa_clear_error();
    return NULL;
}

int pm_raise_int(void) {
    pm_raise();
    return -1;
}

/* ---- dtype ---- */

typedef struct {
    PyObject_HEAD int id;
} PyMusaDtype;

PyTypeObject *MusaDtype_Type, *MusaDevice_Type;
static PyObject *dtype_objs[MUSA_DTYPE_COUNT];
static musa_dtype default_dtype = MUSA_DTYPE_FLOAT32;

PyObject *pm_dtype_obj(musa_dtype d) {
    return (unsigned)d < MUSA_DTYPE_COUNT ? dtype_objs[d] : Py_None;
}

int pm_dtype_from(PyObject *o, int dflt, const char *who) {
    if (o == Py_None || !o) return dflt;
    if (PyObject_TypeCheck(o, MusaDtype_Type)) return ((PyMusaDtype *)o)->id;
    if (PyUnicode_Check(o)) {
        int d = musa_dtype_from_name(PyUnicode_AsUTF8(o));
        if (d >= 0) return d;
        PyErr_Format(PyExc_TypeError, "[%s] unknown dtype name '%U'", who, o);
        return -1;
    }
    if (o == (PyObject *)&PyFloat_Type) return MUSA_DTYPE_FLOAT64;
    if (o == (PyObject *)&PyLong_Type) return MUSA_DTYPE_INT64;
    if (o == (PyObject *)&PyBool_Type) return MUSA_DTYPE_BOOL;
    PyErr_Format(PyExc_TypeError, "[%s] expected a musa.dtype (e.g. musa.float32), got %s", who,
                 Py_TYPE(o)->tp_name);
    return -1;
}

musa_dtype pm_default_dtype(void) {
    return default_dtype;
}

static PyObject *dtype_repr(PyObject *self) {
    return PyUnicode_FromFormat("musa.%s", musa_dtype_name(((PyMusaDtype *)self)->id));
}
static PyObject *dtype_is_floating(PyObject *self, void *c) {
    (void)c;
    return PyBool_FromLong(musa_dtype_is_floating(((PyMusaDtype *)self)->id));
}
static PyObject *dtype_itemsize(PyObject *self, void *c) {
    (void)c;
    return PyLong_FromSize_t(musa_dtype_size(((PyMusaDtype *)self)->id));
}
static PyObject *dtype_is_signed(PyObject *self, void *c) {
    (void)c;
    int d = ((PyMusaDtype *)self)->id;
    return PyBool_FromLong(d != MUSA_DTYPE_UINT8 && d != MUSA_DTYPE_BOOL);
}
static PyObject *dtype_reduce(PyObject *self, PyObject *unused) {
    (void)unused;
    return PyUnicode_FromString(musa_dtype_name(((PyMusaDtype *)self)->id));
}

static PyGetSetDef dtype_getset[] = {
    {"is_floating_point", dtype_is_floating, NULL, "whether the dtype is a floating type", NULL},
    {"itemsize", dtype_itemsize, NULL, "bytes per element", NULL},
    {"is_signed", dtype_is_signed, NULL, "whether the dtype can hold negative values", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
static PyMethodDef dtype_methods[] = {
    {"__reduce__", dtype_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot dtype_slots[] = {
    {Py_tp_repr, dtype_repr},
    {Py_tp_getset, dtype_getset},
    {Py_tp_methods, dtype_methods},
    {Py_tp_doc, "A tensor element type: musa.float32, musa.int64, ..."},
    {0, NULL},
};
static PyType_Spec dtype_spec = {"musa.dtype", sizeof(PyMusaDtype), 0, Py_TPFLAGS_DEFAULT,
                                 dtype_slots};

static PyObject *py_set_default_dtype(PyObject *m, PyObject *o) {
    (void)m;
    int d = pm_dtype_from(o, -1, "set_default_dtype");
    if (d < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "[set_default_dtype] expected a musa.dtype");
        return NULL;
    }
    if (d != MUSA_DTYPE_FLOAT32 && d != MUSA_DTYPE_FLOAT64) {
        PyErr_Format(PyExc_TypeError,
                     "[set_default_dtype] only float32 and float64 are supported, got %s",
                     musa_dtype_name(d));
        return NULL;
    }
    default_dtype = d;
    Py_RETURN_NONE;
}
static PyObject *py_get_default_dtype(PyObject *m, PyObject *u) {
    (void)m, (void)u;
    return Py_NewRef(pm_dtype_obj(default_dtype));
}

/* ---- device ---- */

typedef struct {
    PyObject_HEAD musa_device d;
} PyMusaDevice;

PyObject *pm_device_obj(musa_device d) {
    PyMusaDevice *o = PyObject_New(PyMusaDevice, MusaDevice_Type);
    if (o) o->d = d;
    return (PyObject *)o;
}

static int parse_device_str(const char *s, musa_device *out, const char *who) {
    const char *colon = strchr(s, ':');
    size_t n = colon ? (size_t)(colon - s) : strlen(s);
    if (n == 3 && !strncmp(s, "cpu", 3))
        out->type = MUSA_DEVICE_CPU;
    else if (n == 4 && !strncmp(s, "cuda", 4))
        out->type = MUSA_DEVICE_CUDA;
    else {
        PyErr_Format(PyExc_RuntimeError,
                     "[%s] Expected one of cpu, cuda device type at start of device string: %s",
                     who, s);
        return -1;
    }
    out->index = 0;
    if (colon) {
        char *end;
        long v = strtol(colon + 1, &end, 10);
        if (*end || end == colon + 1 || v < 0) {
            PyErr_Format(PyExc_RuntimeError, "[%s] Invalid device string: '%s'", who, s);
            return -1;
        }
        out->index = (int)v;
    }
    return 0;
}

int pm_device_from(PyObject *o, musa_device *out, const char *who) {
    if (!o || o == Py_None) {
        *out = (musa_device){MUSA_DEVICE_CPU, 0};
        return 0;
    }
    if (PyObject_TypeCheck(o, MusaDevice_Type)) {
        *out = ((PyMusaDevice *)o)->d;
        return 0;
    }
    if (PyUnicode_Check(o)) return parse_device_str(PyUnicode_AsUTF8(o), out, who);
    PyErr_Format(PyExc_TypeError,
                 "[%s] expected a device (musa.device or a string like 'cpu'), got %s", who,
                 Py_TYPE(o)->tp_name);
    return -1;
}

static PyObject *device_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    static char *names[] = {"type", "index", NULL};
    PyObject *spec;
    PyObject *index = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:device", names, &spec, &index)) return NULL;
    musa_device d;
    if (pm_device_from(spec, &d, "device")) return NULL;
    if (index != Py_None) {
        long v = PyLong_AsLong(index);
        if (v == -1 && PyErr_Occurred()) return NULL;
        if (v < 0) {
            PyErr_Format(PyExc_RuntimeError, "[device] Device index must not be negative, got %ld",
                         v);
            return NULL;
        }
        d.index = (int)v;
    }
    PyMusaDevice *o = (PyMusaDevice *)type->tp_alloc(type, 0);
    if (o) o->d = d;
    return (PyObject *)o;
}

static const char *dev_type_name(musa_device d) {
    return d.type == MUSA_DEVICE_CUDA ? "cuda" : "cpu";
}

static PyObject *device_repr(PyObject *self) {
    musa_device d = ((PyMusaDevice *)self)->d;
    if (d.type == MUSA_DEVICE_CPU) return PyUnicode_FromString("device(type='cpu')");
    return PyUnicode_FromFormat("device(type='%s', index=%d)", dev_type_name(d), d.index);
}
static PyObject *device_str(PyObject *self) {
    musa_device d = ((PyMusaDevice *)self)->d;
    if (d.type == MUSA_DEVICE_CPU) return PyUnicode_FromString("cpu");
    return PyUnicode_FromFormat("%s:%d", dev_type_name(d), d.index);
}
static PyObject *device_type_get(PyObject *self, void *c) {
    (void)c;
    return PyUnicode_FromString(dev_type_name(((PyMusaDevice *)self)->d));
}
static PyObject *device_index_get(PyObject *self, void *c) {
    (void)c;
    musa_device d = ((PyMusaDevice *)self)->d;
    if (d.type == MUSA_DEVICE_CPU) Py_RETURN_NONE;
    return PyLong_FromLong(d.index);
}
static PyObject *device_richcompare(PyObject *a, PyObject *b, int op) {
    if (!PyObject_TypeCheck(b, MusaDevice_Type) || (op != Py_EQ && op != Py_NE))
        Py_RETURN_NOTIMPLEMENTED;
    musa_device x = ((PyMusaDevice *)a)->d, y = ((PyMusaDevice *)b)->d;
    bool eq = x.type == y.type && x.index == y.index;
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}
static Py_hash_t device_hash(PyObject *self) {
    musa_device d = ((PyMusaDevice *)self)->d;
    return (Py_hash_t)(d.type * 1000003 + d.index + 1);
}

static PyGetSetDef device_getset[] = {
    {"type", device_type_get, NULL, "'cpu' or 'cuda'", NULL},
    {"index", device_index_get, NULL, "device ordinal (None for the CPU)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
static PyType_Slot device_slots[] = {
    {Py_tp_new, device_new},
    {Py_tp_repr, device_repr},
    {Py_tp_str, device_str},
    {Py_tp_getset, device_getset},
    {Py_tp_richcompare, device_richcompare},
    {Py_tp_hash, device_hash},
    {Py_tp_doc, "device(type, index=None): where a tensor lives ('cpu'; 'cuda' is recognised)."},
    {0, NULL},
};
static PyType_Spec device_spec = {"musa.device", sizeof(PyMusaDevice), 0, Py_TPFLAGS_DEFAULT,
                                  device_slots};

static PyMethodDef type_functions[] = {
    {"set_default_dtype", py_set_default_dtype, METH_O,
     "Set the dtype of tensors made from Python floats."},
    {"get_default_dtype", py_get_default_dtype, METH_NOARGS,
     "The dtype of tensors made from Python floats."},
    {NULL, NULL, 0, NULL},
};

/* An exception class deriving from base and RuntimeError, added to module. */
static PyObject *dual_error(PyObject *module, const char *name, PyObject *base, const char *doc) {
    char full[64];
    snprintf(full, sizeof full, "musa.%s", name);
    PyObject *bases = PyTuple_Pack(2, base, PyExc_RuntimeError);
    PyObject *cls = bases ? PyErr_NewExceptionWithDoc(full, doc, bases, NULL) : NULL;
    Py_XDECREF(bases);
    if (cls && PyModule_AddObject(module, name, Py_NewRef(cls))) Py_CLEAR(cls);
    return cls;
}

int pm_types_init(PyObject *module) {
    value_error_cls = dual_error(module, "InvalidArgumentError", PyExc_ValueError,
                                 "A bad value (shape, size, option): a ValueError, and a "
                                 "RuntimeError as PyTorch raises for these.");
    type_error_cls = dual_error(module, "InvalidTypeError", PyExc_TypeError,
                                "A bad dtype or argument type: a TypeError, and a RuntimeError "
                                "as PyTorch raises for dtype mismatches.");
    if (!value_error_cls || !type_error_cls) return -1;
    /* torch.linalg.LinAlgError's place: an InvalidArgumentError, so code
     * catching that (or ValueError, or RuntimeError) still does */
    linalg_error_cls = PyErr_NewExceptionWithDoc(
        "musa.linalg.LinAlgError",
        "A factorization failed on its values: a singular matrix, one that is not "
        "positive-definite, or no convergence.",
        value_error_cls, NULL);
    if (!linalg_error_cls || PyModule_AddObject(module, "LinAlgError", Py_NewRef(linalg_error_cls)))
        return -1;
    MusaDtype_Type = (PyTypeObject *)PyType_FromSpec(&dtype_spec);
    MusaDevice_Type = (PyTypeObject *)PyType_FromSpec(&device_spec);
    if (!MusaDtype_Type || !MusaDevice_Type) return -1;
    Py_INCREF(MusaDtype_Type);
    Py_INCREF(MusaDevice_Type);
    if (PyModule_AddObject(module, "dtype", (PyObject *)MusaDtype_Type) ||
        PyModule_AddObject(module, "device", (PyObject *)MusaDevice_Type))
        return -1;
    for (int d = 0; d < MUSA_DTYPE_COUNT; d++) {
        PyMusaDtype *o = PyObject_New(PyMusaDtype, MusaDtype_Type);
        if (!o) return -1;
        o->id = d;
        dtype_objs[d] = (PyObject *)o;
        Py_INCREF(o);
        if (PyModule_AddObject(module, musa_dtype_name(d), (PyObject *)o)) return -1;
    }
    return PyModule_AddFunctions(module, type_functions);
}

/* ---- numbers ---- */

int pm_int64(PyObject *o, int64_t *out, const char *who, const char *what) {
    if (pm_is_tensor(o)) {
        musa_tensor *t = pm_t(o);
        if (musa_tensor_numel(t) != 1 || musa_dtype_is_floating(musa_tensor_dtype(t))) {
            PyErr_Format(PyExc_TypeError,
                         "[%s] %s must be an int, got a tensor that is not a single integer", who,
                         what);
            return -1;
        }
        return musa_tensor_item_int(t, out) ? pm_raise_int() : 0;
    }
    if (!PyIndex_Check(o)) {
        PyErr_Format(PyExc_TypeError, "[%s] %s must be an int, not %s", who, what,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    PyObject *i = PyNumber_Index(o);
    if (!i) return -1;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(i, &overflow);
    Py_DECREF(i);
    if (overflow) {
        PyErr_Format(PyExc_OverflowError, "[%s] %s does not fit in 64 bits", who, what);
        return -1;
    }
    if (v == -1 && PyErr_Occurred()) return -1;
    *out = v;
    return 0;
}

int pm_double(PyObject *o, double *out, const char *who, const char *what) {
    if (pm_is_tensor(o)) {
        if (musa_tensor_numel(pm_t(o)) != 1) {
            PyErr_Format(PyExc_TypeError, "[%s] %s must be a number, got a tensor of %lld elements",
                         who, what, (long long)musa_tensor_numel(pm_t(o)));
            return -1;
        }
        return musa_tensor_item(pm_t(o), out) ? pm_raise_int() : 0;
    }
    if (PyUnicode_Check(o) || PyBytes_Check(o) || PyComplex_Check(o) ||
        !(PyFloat_Check(o) || PyIndex_Check(o) || PyObject_HasAttrString(o, "__float__"))) {
        PyErr_Format(PyExc_TypeError, "[%s] %s must be a number, not %s", who, what,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    *out = PyFloat_AsDouble(o);
    if (*out == -1.0 && PyErr_Occurred()) {
        /* an int past the float range, or a __float__ that fails: say who */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_Format(PyErr_GivenExceptionMatches(type, PyExc_OverflowError) ? PyExc_OverflowError
                                                                            : PyExc_TypeError,
                     "[%s] %s cannot be converted to a float (%S)", who, what,
                     value ? value : Py_None);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return -1;
    }
    return 0;
}

int pm_int_list(PyObject *o, int64_t *out, int max, int *n, const char *who, const char *what) {
    if (PyIndex_Check(o) || pm_is_tensor(o)) {
        *n = 1;
        return pm_int64(o, out, who, what);
    }
    if (!PySequence_Check(o) || PyUnicode_Check(o)) {
        PyErr_Format(PyExc_TypeError, "[%s] %s must be an int or a sequence of ints, not %s", who,
                     what, Py_TYPE(o)->tp_name);
        return -1;
    }
    char msg[96];
    snprintf(msg, sizeof msg, "[%s] %s must be an int or a sequence of ints", who, what);
    PyObject *seq = PySequence_Fast(o, msg);
    if (!seq) return -1;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
    if (len > max) {
        PyErr_Format(PyExc_ValueError, "[%s] %s has %zd entries; at most %d are allowed", who, what,
                     len, max);
        Py_DECREF(seq);
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++)
        if (pm_int64(PySequence_Fast_GET_ITEM(seq, i), &out[i], who, what)) {
            Py_DECREF(seq);
            return -1;
        }
    Py_DECREF(seq);
    *n = (int)len;
    return 0;
}

musa_tensor *pm_operand(PyObject *o, const char *op) {
    if (pm_is_tensor(o)) return musa_tensor_retain(pm_t(o));
    if (PyBool_Check(o)) return musa_number_bool(o == Py_True);
    if (PyLong_Check(o)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow) {
            PyErr_Format(PyExc_OverflowError, "[%s] Python int too large for int64", op);
            return NULL;
        }
        return musa_number_int(v);
    }
    if (PyFloat_Check(o)) return musa_number(PyFloat_AS_DOUBLE(o));
    /* NumPy scalars and other numbers */
    if (PyIndex_Check(o)) {
        int64_t v;
        return pm_int64(o, &v, op, "the operand") ? NULL : musa_number_int(v);
    }
    if (PyObject_HasAttrString(o, "__float__") && !PySequence_Check(o)) {
        double v = PyFloat_AsDouble(o);
        return v == -1.0 && PyErr_Occurred() ? NULL : musa_number(v);
    }
    PyErr_Format(PyExc_TypeError, "[%s] expected a Tensor or a number, got %s", op,
                 Py_TYPE(o)->tp_name);
    return NULL;
}

PyObject *pm_item(musa_tensor *t) {
    if (musa_tensor_numel(t) != 1) {
        PyErr_Format(PyExc_RuntimeError,
                     "[item] a Tensor with %lld elements cannot be converted to Scalar",
                     (long long)musa_tensor_numel(t));
        return NULL;
    }
    musa_dtype d = musa_tensor_dtype(t);
    if (musa_dtype_is_floating(d)) {
        double v;
        if (musa_tensor_item(t, &v)) return pm_raise();
        pm_host_read(t, MUSA_READ_SCALAR, v);
        return PyFloat_FromDouble(v);
    }
    int64_t v;
    if (musa_tensor_item_int(t, &v)) return pm_raise();
    pm_host_read(t, d == MUSA_DTYPE_BOOL ? MUSA_READ_BOOL : MUSA_READ_SCALAR, (double)v);
    return d == MUSA_DTYPE_BOOL ? PyBool_FromLong(v != 0) : PyLong_FromLongLong(v);
}

/* ---- Python data to tensors ---- */

/* The musa dtype of a buffer format ("f", "<d", "=q", ...), or -1. */
static int format_dtype(const char *f, Py_ssize_t itemsize) {
    if (!f) return MUSA_DTYPE_UINT8;
    if (*f == '<' || *f == '=' || *f == '@' || *f == '!' || *f == '>') {
        if (*f == '>' || *f == '!') return -1; /* big-endian */
        f++;
    }
    if (f[0] && f[1]) return -1;
    switch (f[0]) {
    case 'f':
        return MUSA_DTYPE_FLOAT32;
    case 'd':
        return MUSA_DTYPE_FLOAT64;
    case 'e':
        return MUSA_DTYPE_FLOAT16;
    case 'q':
    case 'l':
        return itemsize == 8 ? MUSA_DTYPE_INT64 : itemsize == 4 ? MUSA_DTYPE_INT32 : -1;
    case 'i':
        return itemsize == 4 ? MUSA_DTYPE_INT32 : -1;
    case 'h':
        return itemsize == 2 ? MUSA_DTYPE_INT16 : -1;
    case 'b':
        return MUSA_DTYPE_INT8;
    case 'B':
        return MUSA_DTYPE_UINT8;
    case '?':
        return MUSA_DTYPE_BOOL;
    default:
        return -1;
    }
}

typedef struct {
    Py_buffer view;
} held_buffer;

static void release_buffer(void *ctx) {
    PyGILState_STATE g = PyGILState_Ensure();
    held_buffer *h = ctx;
    PyBuffer_Release(&h->view);
    PyMem_RawFree(h);
    PyGILState_Release(g);
}

/* Wrap an object's buffer without copying (its memory stays alive as long
 * as the tensor). Memory not aligned to the element size (np.frombuffer
 * with an offset) cannot be wrapped: it is copied to aligned storage, or
 * with `share` (from_numpy, which promises to share) refused. NULL with an
 * exception when it has no usable buffer. */
musa_tensor *pm_tensor_from_buffer(PyObject *o, const char *who, bool share) {
    held_buffer *h = PyMem_RawMalloc(sizeof *h);
    if (!h) {
        PyErr_NoMemory();
        return NULL;
    }
    if (PyObject_GetBuffer(o, &h->view, PyBUF_RECORDS) < 0) {
        PyErr_Clear(); /* read-only buffers are wrapped too (writes are the caller's business) */
        if (PyObject_GetBuffer(o, &h->view, PyBUF_RECORDS_RO) < 0) {
            PyMem_RawFree(h);
            return NULL;
        }
    }
    Py_buffer *v = &h->view;
    int d = format_dtype(v->format, v->itemsize);
    const char *why = NULL;
    if (d < 0)
        why = "has an element type musa does not support";
    else if ((Py_ssize_t)musa_dtype_size(d) != v->itemsize)
        why = "has an unexpected item size";
    else if (v->ndim > MUSA_MAX_DIMS)
        why = "has too many dimensions";
    int64_t shape[MUSA_MAX_DIMS], strides[MUSA_MAX_DIMS];
    for (int i = 0; !why && i < v->ndim; i++) {
        shape[i] = v->shape[i];
        Py_ssize_t st = v->strides ? v->strides[i] : 0;
        if (st < 0)
            why = "has negative strides (make a copy first)";
        else if (st % v->itemsize)
            why = "has strides that are not a multiple of its item size";
        strides[i] = st / v->itemsize;
    }
    if (why) {
        PyErr_Format(PyExc_TypeError,
                     "[%s] can't convert %s to a tensor: the buffer (format '%s') %s", who,
                     Py_TYPE(o)->tp_name, v->format ? v->format : "B", why);
        PyBuffer_Release(v);
        PyMem_RawFree(h);
        return NULL;
    }
    if ((uintptr_t)v->buf % (uintptr_t)v->itemsize && v->len > 0) {
        musa_tensor *t = NULL;
        if (share)
            PyErr_Format(PyExc_ValueError,
                         "[%s] the %s's data is not aligned to its %zd-byte elements, so it "
                         "cannot be shared; pass a copy (a.copy()), or use musa.tensor",
                         who, Py_TYPE(o)->tp_name, v->itemsize);
        else if (!(t = musa_empty(v->ndim, shape, d)))
            pm_raise();
        else if (PyBuffer_ToContiguous(musa_tensor_data(t), v, v->len, 'C') < 0)
            musa_tensor_release(t), t = NULL;
        PyBuffer_Release(v);
        PyMem_RawFree(h);
        return t;
    }
    musa_tensor *t =
        musa_from_blob(v->buf, v->ndim, shape, v->strides ? strides : NULL, d, release_buffer, h);
    if (!t) {
        PyBuffer_Release(v);
        PyMem_RawFree(h);
        return (musa_tensor *)pm_raise();
    }
    return t;
}

/* Nested sequences: find the shape, then the dtype, then fill. */
typedef struct {
    int ndim;
    int64_t shape[MUSA_MAX_DIMS];
    int kind; /* 0 bool, 1 int, 2 float: how values are gathered */
    int dt;   /* the promoted dtype of the elements (-1: none seen) */
    int64_t numel, pos;
    double *f;
    int64_t *i;
    const char *who; /* the prefix of error messages */
} nest;

/* A tensor inside nested data is an element when it holds one value (any
 * number of dims), as in PyTorch; a bigger one is an error (nest_fill). */
static bool is_leaf_scalar(PyObject *o) {
    if (pm_is_tensor(o)) return true;
    return PyBool_Check(o) || PyLong_Check(o) || PyFloat_Check(o) ||
           (!PySequence_Check(o) && (PyIndex_Check(o) || PyObject_HasAttrString(o, "__float__")));
}

static int nest_shape(PyObject *o, nest *n) {
    n->ndim = 0;
    Py_INCREF(o);
    while (!is_leaf_scalar(o)) {
        if (!PySequence_Check(o) || PyUnicode_Check(o) || PyBytes_Check(o)) {
            PyErr_Format(PyExc_TypeError, "[%s] can't convert %s to a tensor element", n->who,
                         Py_TYPE(o)->tp_name);
            Py_DECREF(o);
            return -1;
        }
        if (n->ndim == MUSA_MAX_DIMS) goto too_deep;
        Py_ssize_t len = PySequence_Size(o);
        if (len < 0) {
            Py_DECREF(o);
            return -1;
        }
        n->shape[n->ndim++] = len;
        if (len == 0) break;
        PyObject *first = PySequence_GetItem(o, 0);
        Py_DECREF(o);
        if (!first) return -1;
        o = first;
    }
    Py_DECREF(o);
    return 0;
too_deep:
    Py_DECREF(o);
    PyErr_Format(PyExc_ValueError, "[%s] tensor data nests deeper than %d dimensions", n->who,
                 MUSA_MAX_DIMS);
    return -1;
}

/* The dtype a scalar element stands for: NumPy scalars keep theirs; Python
 * bools, ints and floats give bool, int64 and the default dtype. */
static int scalar_dtype(PyObject *o, int kind) {
    if (!PyBool_Check(o) && !PyLong_CheckExact(o) && !PyFloat_CheckExact(o) &&
        PyObject_CheckBuffer(o)) {
        Py_buffer v;
        if (PyObject_GetBuffer(o, &v, PyBUF_FORMAT) == 0) {
            int d = v.ndim == 0 ? format_dtype(v.format, v.itemsize) : -1;
            PyBuffer_Release(&v);
            if (d >= 0) return d;
        } else {
            PyErr_Clear();
        }
    }
    return kind == 0 ? MUSA_DTYPE_BOOL : kind == 1 ? MUSA_DTYPE_INT64 : (int)pm_default_dtype();
}

/* Walk the nest at depth `dim`, checking lengths and storing values. */
static int nest_fill(PyObject *o, nest *n, int dim, bool store) {
    if (dim == n->ndim) {
        if (pm_is_tensor(o)) {
            musa_tensor *t = pm_t(o);
            if (musa_tensor_numel(t) != 1) {
                PyErr_Format(PyExc_ValueError,
                             "[%s] only one-element tensors can be elements of tensor data; "
                             "got one with %lld elements at dim %d (use musa.stack to join "
                             "tensors)",
                             n->who, (long long)musa_tensor_numel(t), dim);
                return -1;
            }
            musa_dtype dt = musa_tensor_dtype(t);
            int kind = musa_dtype_is_floating(dt) ? 2 : dt == MUSA_DTYPE_BOOL ? 0 : 1;
            if (!store) {
                if (kind > n->kind) n->kind = kind;
                n->dt = n->dt < 0 ? (int)dt : (int)musa_promote_types(n->dt, dt);
                n->pos++;
                return 0;
            }
            int rc;
            if (n->kind == 2) {
                rc = musa_tensor_item(t, &n->f[n->pos]);
            } else {
                rc = musa_tensor_item_int(t, &n->i[n->pos]);
            }
            if (rc) return pm_raise_int();
            n->pos++;
            return 0;
        }
        if (!is_leaf_scalar(o)) {
            PyErr_Format(PyExc_ValueError, "[%s] expected a number at dim %d, got %s", n->who, dim,
                         Py_TYPE(o)->tp_name);
            return -1;
        }
        int kind = PyBool_Check(o) ? 0 : (PyLong_Check(o) || PyIndex_Check(o)) ? 1 : 2;
        if (!store) {
            if (kind > n->kind) n->kind = kind;
            int d = scalar_dtype(o, kind);
            n->dt = n->dt < 0 ? d : (int)musa_promote_types(n->dt, d);
            n->pos++;
            return 0;
        }
        if (n->kind == 2) {
            double v = PyFloat_AsDouble(o);
            if (v == -1.0 && PyErr_Occurred()) return -1;
            n->f[n->pos++] = v;
        } else {
            int64_t v;
            if (PyBool_Check(o) || (!PyLong_Check(o) && scalar_dtype(o, 1) == MUSA_DTYPE_BOOL))
                v = PyObject_IsTrue(o) == 1; /* NumPy bools are not indexes */
            else if (pm_int64(o, &v, n->who, "a tensor element"))
                return -1;
            n->i[n->pos++] = v;
        }
        return 0;
    }
    if (is_leaf_scalar(o) || !PySequence_Check(o)) {
        PyErr_Format(PyExc_ValueError, "[%s] expected a sequence of length %lld at dim %d, got %s",
                     n->who, (long long)n->shape[dim], dim, Py_TYPE(o)->tp_name);
        return -1;
    }
    char msg[64];
    snprintf(msg, sizeof msg, "[%s] expected a sequence", n->who);
    PyObject *seq = PySequence_Fast(o, msg);
    if (!seq) return -1;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
    if (len != n->shape[dim]) {
        PyErr_Format(PyExc_ValueError, "[%s] expected sequence of length %lld at dim %d (got %zd)",
                     n->who, (long long)n->shape[dim], dim, len);
        Py_DECREF(seq);
        return -1;
    }
    for (Py_ssize_t k = 0; k < len; k++)
        if (nest_fill(PySequence_Fast_GET_ITEM(seq, k), n, dim + 1, store)) {
            Py_DECREF(seq);
            return -1;
        }
    Py_DECREF(seq);
    return 0;
}

static musa_tensor *from_nest(PyObject *data, int dtype, const char *who) {
    nest n = {.who = who};
    if (nest_shape(data, &n)) return NULL;
    n.numel = 1;
    for (int i = 0; i < n.ndim; i++) n.numel *= n.shape[i];
    n.kind = 0;
    n.dt = -1;
    if (nest_fill(data, &n, 0, false)) return NULL; /* check, find the kind and dtype */
    if (n.numel == 0) n.kind = 2;
    if (n.kind == 2)
        n.f = PyMem_Malloc(sizeof(double) * (size_t)(n.numel ? n.numel : 1));
    else
        n.i = PyMem_Malloc(sizeof(int64_t) * (size_t)(n.numel ? n.numel : 1));
    if (!n.f && !n.i) return (musa_tensor *)PyErr_NoMemory();
    n.pos = 0;
    musa_tensor *t = NULL;
    if (!nest_fill(data, &n, 0, true)) {
        musa_dtype src = n.kind == 2 ? MUSA_DTYPE_FLOAT64 : MUSA_DTYPE_INT64;
        musa_dtype want = dtype >= 0  ? (musa_dtype)dtype
                          : n.dt >= 0 ? (musa_dtype)n.dt
                                      : pm_default_dtype(); /* empty */
        musa_tensor *raw =
            musa_from_data(n.kind == 2 ? (void *)n.f : (void *)n.i, n.ndim, n.shape, src);
        t = raw && want != src ? musa_cast(raw, want) : musa_tensor_retain(raw);
        musa_tensor_release(raw);
        if (!t) pm_raise();
    }
    PyMem_Free(n.f ? (void *)n.f : (void *)n.i);
    return t;
}

musa_tensor *pm_tensor_from_data(PyObject *data, int dtype, const char *who) {
    musa_tensor *src = NULL;
    if (pm_is_tensor(data)) {
        src = musa_detach(pm_t(data));
    } else if (PyObject_CheckBuffer(data) && !PyBytes_Check(data) && !PyByteArray_Check(data)) {
        if (!(src = pm_tensor_from_buffer(data, who, false))) return NULL;
    } else if (PyBool_Check(data) || PyLong_Check(data) || PyFloat_Check(data)) {
        musa_dtype d = dtype >= 0           ? (musa_dtype)dtype
                       : PyBool_Check(data) ? MUSA_DTYPE_BOOL
                       : PyLong_Check(data) ? MUSA_DTYPE_INT64
                                            : pm_default_dtype();
        if (PyLong_Check(data) && !PyBool_Check(data)) {
            int64_t v;
            if (pm_int64(data, &v, who, "tensor data")) return NULL;
            musa_tensor *r = musa_from_data(&v, 0, NULL, MUSA_DTYPE_INT64);
            musa_tensor *c = r && d != MUSA_DTYPE_INT64 ? musa_cast(r, d) : musa_tensor_retain(r);
            musa_tensor_release(r);
            return c ? c : (musa_tensor *)pm_raise();
        }
        musa_tensor *r = musa_scalar(PyFloat_AsDouble(data), d);
        return r ? r : (musa_tensor *)pm_raise();
    } else {
        return from_nest(data, dtype, who);
    }
    /* a copy, converted */
    musa_tensor *out = dtype >= 0 && dtype != (int)musa_tensor_dtype(src) ? musa_cast(src, dtype)
                                                                          : musa_clone(src);
    musa_tensor_release(src);
    return out ? out : (musa_tensor *)pm_raise();
}

PyObject *pm_tensor_tuple(int n, musa_tensor *const *t) {
    PyObject *r = PyTuple_New(n);
    for (int i = 0; r && i < n; i++) {
        PyObject *o = t[i] ? pm_wrap(musa_tensor_retain(t[i])) : Py_NewRef(Py_None);
        if (!o)
            Py_CLEAR(r);
        else
            PyTuple_SET_ITEM(r, i, o);
    }
    return r;
}

int pm_grads_from(PyObject *seq, int n_in, musa_tensor **gin, const char *who) {
    for (int i = 0; i < n_in; i++) {
        PyObject *e = PySequence_Fast_GET_ITEM(seq, i);
        if (e == Py_None) continue;
        if (!pm_is_tensor(e)) {
            PyErr_Format(PyExc_TypeError,
                         "[%s] backward returned %s for input %d; expected a Tensor or None", who,
                         Py_TYPE(e)->tp_name, i);
            for (int k = 0; k < n_in; k++) musa_tensor_release(gin[k]), gin[k] = NULL;
            return pm_stash_exception();
        }
        gin[i] = musa_tensor_retain(pm_t(e));
    }
    return MUSA_OK;
}
