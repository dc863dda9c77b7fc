/*
 * tensor.c - the musa.Tensor type: lifetime, operators, properties.
 *
 * A Tensor object owns one reference to a musa_tensor and registers itself
 * as that tensor's handle, so the same C tensor always comes back as the
 * same Python object while the object lives (x.grad is x.grad). Operators
 * call the C API directly (no argument parsing): they are the hot path of
 * eager Python code. Named methods come from the DEF bindings (ops.c) and
 * from musa/_tensor.py (Python-level conveniences added to this heap type).
 */
#include <math.h>
#include <string.h>

#include "pymusa.h"

#include <structmember.h>

PyTypeObject *MusaTensor_Type;

static PyObject *alloc_wrapper(PyTypeObject *type, musa_tensor *t) {
    PyMusaTensor *o;
    if (type == MusaTensor_Type) {
        o = PyObject_Malloc(sizeof *o);
        if (!o) {
            musa_tensor_release(t);
            return PyErr_NoMemory();
        }
        PyObject_Init((PyObject *)o, type);
        o->weakrefs = NULL;
    } else {
        o = (PyMusaTensor *)type->tp_alloc(type, 0);
        if (!o) {
            musa_tensor_release(t);
            return NULL;
        }
    }
    o->t = t;
    musa_tensor_set_handle(t, o);
    return (PyObject *)o;
}

PyObject *pm_wrap_as(PyTypeObject *type, musa_tensor *t) {
    if (!t) return pm_raise();
    PyObject *h = musa_tensor_handle(t);
    if (h) {
        Py_INCREF(h);
        musa_tensor_release(t);
        return h;
    }
    return alloc_wrapper(type, t);
}

PyObject *pm_wrap(musa_tensor *t) {
    return pm_wrap_as(MusaTensor_Type, t);
}

static void tensor_dealloc(PyObject *self) {
    PyTypeObject *tp = Py_TYPE(self);
    PyMusaTensor *o = (PyMusaTensor *)self;
    if (o->weakrefs) PyObject_ClearWeakRefs(self);
    if (o->t) {
        if (musa_tensor_handle(o->t) == self) musa_tensor_set_handle(o->t, NULL);
        musa_tensor_release(o->t);
        o->t = NULL;
    }
    if (tp == MusaTensor_Type)
        PyObject_Free(self);
    else
        tp->tp_free(self);
    Py_DECREF(tp);
}

/* Tensor(*sizes) -> uninitialised float tensor; Tensor(data) -> float copy */
static PyObject *tensor_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    if (kw && PyDict_Size(kw)) {
        PyErr_SetString(
            PyExc_TypeError,
            "[Tensor] Tensor() takes no keyword arguments; use musa.tensor(data, dtype=...)");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    musa_tensor *t;
    if (n == 1 && !PyIndex_Check(PyTuple_GET_ITEM(args, 0))) {
        t = pm_tensor_from_data(PyTuple_GET_ITEM(args, 0), pm_default_dtype(), "Tensor");
        if (!t) return NULL;
    } else {
        int64_t shape[MUSA_MAX_DIMS];
        if (n > MUSA_MAX_DIMS) {
            PyErr_Format(PyExc_ValueError, "[Tensor] at most %d sizes", MUSA_MAX_DIMS);
            return NULL;
        }
        for (Py_ssize_t i = 0; i < n; i++)
            if (pm_int64(PyTuple_GET_ITEM(args, i), &shape[i], "Tensor", "a size")) return NULL;
        if (!(t = musa_zeros((int)n, shape, pm_default_dtype()))) return pm_raise();
    }
    return alloc_wrapper(type, t);
}

/* ---- operators ---- */

typedef musa_tensor *(*binop)(musa_tensor *, musa_tensor *);

/* The other operand of an operator: a tensor (borrowed), or a new tensor
 * for a number (wrapped number) or an array-like with a shape (NumPy
 * arrays). NULL without an exception: not ours (NotImplemented). */
static musa_tensor *operand(PyObject *o, const char *name, musa_tensor **owned) {
    *owned = NULL;
    if (pm_is_tensor(o)) return pm_t(o);
    if (PyFloat_Check(o) || PyLong_Check(o)) return *owned = pm_operand(o, name);
    if (PyList_Check(o) || PyTuple_Check(o) || PyUnicode_Check(o) || PyBytes_Check(o)) return NULL;
    PyNumberMethods *nm = Py_TYPE(o)->tp_as_number;
    bool numeric = nm && (nm->nb_float || nm->nb_index);
    PyObject *shape = PyObject_GetAttrString(o, "shape");
    if (!shape) {
        PyErr_Clear();
        return numeric ? (*owned = pm_operand(o, name)) : NULL;
    }
    bool scalar = PyTuple_Check(shape) && PyTuple_GET_SIZE(shape) == 0;
    Py_DECREF(shape);
    if (scalar && numeric) return *owned = pm_operand(o, name); /* NumPy scalar or 0-d array */
    return *owned = pm_tensor_from_data(o, -1, name);           /* an array: as a tensor */
}

static PyObject *binary(PyObject *a, PyObject *b, binop f, const char *name) {
    musa_tensor *ta, *tb;
    musa_tensor *x = operand(a, name, &ta);
    if (!x) return PyErr_Occurred() ? NULL : Py_NewRef(Py_NotImplemented);
    musa_tensor *y = operand(b, name, &tb);
    if (!y) {
        musa_tensor_release(ta);
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_NotImplemented);
    }
    musa_tensor *r = f(x, y);
    musa_tensor_release(ta);
    musa_tensor_release(tb);
    return pm_wrap(r);
}

typedef int (*inplace_op)(musa_tensor *, musa_tensor *);

static PyObject *inplace(PyObject *a, PyObject *b, inplace_op f, const char *name) {
    if (!pm_is_tensor(a)) Py_RETURN_NOTIMPLEMENTED;
    musa_tensor *owned, *y = operand(b, name, &owned);
    if (!y) return PyErr_Occurred() ? NULL : Py_NewRef(Py_NotImplemented);
    int rc = f(pm_t(a), y);
    musa_tensor_release(owned);
    if (rc) return pm_raise();
    return Py_NewRef(a);
}

/* The result of op(a, b), written into a (the general in-place form). */
static int assign_result(musa_tensor *a, musa_tensor *b, binop f) {
    musa_tensor *r = f(a, b);
    if (!r) return musa_last_error_code();
    int rc = musa_copy_(a, r);
    musa_tensor_release(r);
    return rc;
}
static int floordiv_(musa_tensor *a, musa_tensor *b) {
    return assign_result(a, b, musa_floor_divide);
}
static int rem_(musa_tensor *a, musa_tensor *b) {
    return assign_result(a, b, musa_remainder);
}
static int pow_(musa_tensor *a, musa_tensor *b) {
    return assign_result(a, b, musa_pow);
}
static int matmul_(musa_tensor *a, musa_tensor *b) {
    return assign_result(a, b, musa_matmul);
}

static int and_(musa_tensor *a, musa_tensor *b) {
    return assign_result(a, b, musa_bitwise_and);
}
static int or_(musa_tensor *a, musa_tensor *b) {
    return assign_result(a, b, musa_bitwise_or);
}
static int xor_(musa_tensor *a, musa_tensor *b) {
    return assign_result(a, b, musa_bitwise_xor);
}
static int lshift_(musa_tensor *a, musa_tensor *b) {
    return assign_result(a, b, musa_bitwise_left_shift);
}
static int rshift_(musa_tensor *a, musa_tensor *b) {
    return assign_result(a, b, musa_bitwise_right_shift);
}

static PyObject *nb_add(PyObject *a, PyObject *b) {
    return binary(a, b, musa_add, "add");
}
static PyObject *nb_sub(PyObject *a, PyObject *b) {
    return binary(a, b, musa_sub, "sub");
}
static PyObject *nb_mul(PyObject *a, PyObject *b) {
    return binary(a, b, musa_mul, "mul");
}
static PyObject *nb_div(PyObject *a, PyObject *b) {
    return binary(a, b, musa_div, "div");
}
static PyObject *nb_floordiv(PyObject *a, PyObject *b) {
    return binary(a, b, musa_floor_divide, "floor_divide");
}
static PyObject *nb_rem(PyObject *a, PyObject *b) {
    return binary(a, b, musa_remainder, "remainder");
}
static PyObject *nb_matmul(PyObject *a, PyObject *b) {
    return binary(a, b, musa_matmul, "matmul");
}
static PyObject *nb_and(PyObject *a, PyObject *b) {
    return binary(a, b, musa_bitwise_and, "bitwise_and");
}
static PyObject *nb_or(PyObject *a, PyObject *b) {
    return binary(a, b, musa_bitwise_or, "bitwise_or");
}
static PyObject *nb_xor(PyObject *a, PyObject *b) {
    return binary(a, b, musa_bitwise_xor, "bitwise_xor");
}
static PyObject *nb_lshift(PyObject *a, PyObject *b) {
    return binary(a, b, musa_bitwise_left_shift, "bitwise_left_shift");
}
static PyObject *nb_rshift(PyObject *a, PyObject *b) {
    return binary(a, b, musa_bitwise_right_shift, "bitwise_right_shift");
}
static PyObject *nb_pow(PyObject *a, PyObject *b, PyObject *mod) {
    if (mod != Py_None) {
        PyErr_SetString(PyExc_TypeError,
                        "[Tensor.__pow__] pow() with a modulus is not supported for tensors");
        return NULL;
    }
    return binary(a, b, musa_pow, "pow");
}
static PyObject *nb_iadd(PyObject *a, PyObject *b) {
    return inplace(a, b, musa_add_, "add_");
}
static PyObject *nb_isub(PyObject *a, PyObject *b) {
    return inplace(a, b, musa_sub_, "sub_");
}
static PyObject *nb_imul(PyObject *a, PyObject *b) {
    return inplace(a, b, musa_mul_, "mul_");
}
static PyObject *nb_idiv(PyObject *a, PyObject *b) {
    return inplace(a, b, musa_div_, "div_");
}
static PyObject *nb_ifloordiv(PyObject *a, PyObject *b) {
    return inplace(a, b, floordiv_, "floor_divide_");
}
static PyObject *nb_irem(PyObject *a, PyObject *b) {
    return inplace(a, b, rem_, "remainder_");
}
static PyObject *nb_imatmul(PyObject *a, PyObject *b) {
    return inplace(a, b, matmul_, "matmul_");
}
static PyObject *nb_iand(PyObject *a, PyObject *b) {
    return inplace(a, b, and_, "bitwise_and_");
}
static PyObject *nb_ior(PyObject *a, PyObject *b) {
    return inplace(a, b, or_, "bitwise_or_");
}
static PyObject *nb_ixor(PyObject *a, PyObject *b) {
    return inplace(a, b, xor_, "bitwise_xor_");
}
static PyObject *nb_ilshift(PyObject *a, PyObject *b) {
    return inplace(a, b, lshift_, "bitwise_left_shift_");
}
static PyObject *nb_irshift(PyObject *a, PyObject *b) {
    return inplace(a, b, rshift_, "bitwise_right_shift_");
}
static PyObject *nb_ipow(PyObject *a, PyObject *b, PyObject *mod) {
    (void)mod;
    return inplace(a, b, pow_, "pow_");
}

static PyObject *nb_neg(PyObject *a) {
    return pm_wrap(musa_neg(pm_t(a)));
}
static PyObject *nb_pos(PyObject *a) {
    return Py_NewRef(a);
}
static PyObject *nb_abs(PyObject *a) {
    return pm_wrap(musa_abs(pm_t(a)));
}
static PyObject *nb_invert(PyObject *a) {
    return pm_wrap(musa_bitwise_not(pm_t(a)));
}

static int nb_bool(PyObject *a) {
    musa_tensor *t = pm_t(a);
    if (musa_tensor_numel(t) != 1) {
        PyErr_Format(PyExc_RuntimeError,
                     "[Tensor.__bool__] Boolean value of Tensor with %s is ambiguous",
                     musa_tensor_numel(t) ? "more than one value" : "no values");
        return -1;
    }
    double v;
    if (musa_tensor_item(t, &v)) return pm_raise_int();
    pm_host_read(t, MUSA_READ_BOOL, v);
    return v != 0;
}
static PyObject *nb_float(PyObject *a) {
    musa_tensor *t = pm_t(a);
    if (musa_tensor_numel(t) != 1) {
        PyErr_SetString(PyExc_TypeError, "[Tensor.__float__] only one element tensors can be "
                                         "converted to Python scalars");
        return NULL;
    }
    double v;
    if (musa_tensor_item(t, &v)) return pm_raise();
    pm_host_read(t, MUSA_READ_SCALAR, v);
    return PyFloat_FromDouble(v);
}
static PyObject *nb_int(PyObject *a) {
    musa_tensor *t = pm_t(a);
    if (musa_tensor_numel(t) != 1) {
        PyErr_SetString(PyExc_TypeError, "[Tensor.__int__] only one element tensors can be "
                                         "converted to Python scalars");
        return NULL;
    }
    if (musa_dtype_is_floating(musa_tensor_dtype(t))) {
        double v;
        if (musa_tensor_item(t, &v)) return pm_raise();
        pm_host_read(t, MUSA_READ_SCALAR, v);
        if (v != v) { /* Python's own errors, named (fuzz-py seed 3912) */
            PyErr_SetString(PyExc_ValueError,
                            "[Tensor.__int__] cannot convert float NaN to integer");
            return NULL;
        }
        if (isinf(v)) {
            PyErr_SetString(PyExc_OverflowError,
                            "[Tensor.__int__] cannot convert float infinity to integer");
            return NULL;
        }
        return PyLong_FromDouble(v);
    }
    int64_t v;
    if (musa_tensor_item_int(t, &v)) return pm_raise();
    pm_host_read(t, MUSA_READ_SCALAR, (double)v);
    return PyLong_FromLongLong(v);
}
static PyObject *nb_index(PyObject *a) {
    musa_tensor *t = pm_t(a);
    if (musa_tensor_numel(t) != 1 || musa_dtype_is_floating(musa_tensor_dtype(t)) ||
        musa_tensor_dtype(t) == MUSA_DTYPE_BOOL) {
        PyErr_SetString(
            PyExc_TypeError,
            "[Tensor.__index__] only integer tensors of a single element can be converted "
            "to an index");
        return NULL;
    }
    return nb_int(a);
}

static PyObject *richcompare(PyObject *a, PyObject *b, int op) {
    static const binop fns[6] = {musa_lt, musa_le, musa_eq, musa_ne, musa_gt, musa_ge};
    static const char *names[6] = {"lt", "le", "eq", "ne", "gt", "ge"};
    if (b == Py_None) Py_RETURN_NOTIMPLEMENTED;
    return binary(a, b, fns[op], names[op]);
}

static Py_hash_t tensor_hash(PyObject *self) {
    uintptr_t p = (uintptr_t)self;
    Py_hash_t h = (Py_hash_t)((p >> 4) | (p << (8 * sizeof(void *) - 4)));
    return h == -1 ? -2 : h;
}

static Py_ssize_t tensor_len(PyObject *self) {
    musa_tensor *t = pm_t(self);
    if (musa_tensor_ndim(t) == 0) {
        PyErr_SetString(PyExc_TypeError, "[Tensor.__len__] len() of a 0-d tensor");
        return -1;
    }
    return (Py_ssize_t)musa_tensor_shape(t)[0];
}

/* ---- repr ---- */

static PyObject *tensor_repr(PyObject *self) {
    musa_tensor *t = pm_t(self);
    char small[1024];
    int need = musa_tensor_format(t, small, sizeof small);
    if (need < 0) return pm_raise();
    char *buf = small;
    if ((size_t)need >= sizeof small) {
        if (!(buf = PyMem_Malloc((size_t)need + 1))) return PyErr_NoMemory();
        musa_tensor_format(t, buf, (size_t)need + 1);
    }
    size_t len = strlen(buf);
    if (len && buf[len - 1] == ')') buf[--len] = 0;
    PyObject *s;
    musa_node *fn = musa_tensor_grad_fn(t);
    if (fn)
        s = PyUnicode_FromFormat("%s, grad_fn=<%s>)", buf, musa_node_name(fn));
    else if (musa_tensor_requires_grad(t))
        s = PyUnicode_FromFormat("%s, requires_grad=True)", buf);
    else
        s = PyUnicode_FromFormat("%s)", buf);
    if (buf != small) PyMem_Free(buf);
    return s;
}

/* ---- properties ---- */

static PyObject *shape_tuple(musa_tensor *t) {
    int nd = musa_tensor_ndim(t);
    const int64_t *s = musa_tensor_shape(t);
    PyObject *r = PyTuple_New(nd);
    for (int i = 0; r && i < nd; i++) PyTuple_SET_ITEM(r, i, PyLong_FromLongLong(s[i]));
    return r;
}

#define GETTER(name) static PyObject *get_##name(PyObject *self, void *c)
#define UNUSED_C     (void)c

GETTER(shape) {
    UNUSED_C;
    return shape_tuple(pm_t(self));
}
GETTER(dtype) {
    UNUSED_C;
    return Py_NewRef(pm_dtype_obj(musa_tensor_dtype(pm_t(self))));
}
GETTER(device) {
    UNUSED_C;
    return pm_device_obj(musa_tensor_device(pm_t(self)));
}
GETTER(ndim) {
    UNUSED_C;
    return PyLong_FromLong(musa_tensor_ndim(pm_t(self)));
}
GETTER(requires_grad) {
    UNUSED_C;
    return PyBool_FromLong(musa_tensor_requires_grad(pm_t(self)));
}
static int set_requires_grad(PyObject *self, PyObject *v, void *c) {
    UNUSED_C;
    if (!v || !PyBool_Check(v)) {
        PyErr_SetString(PyExc_TypeError, "[Tensor.requires_grad] requires_grad must be a bool");
        return -1;
    }
    return musa_tensor_set_requires_grad(pm_t(self), v == Py_True) ? pm_raise_int() : 0;
}
GETTER(grad) {
    UNUSED_C;
    musa_tensor *g = musa_tensor_grad(pm_t(self));
    if (!g) Py_RETURN_NONE;
    return pm_wrap(g);
}
static int set_grad(PyObject *self, PyObject *v, void *c) {
    UNUSED_C;
    if (v && v != Py_None && !pm_is_tensor(v)) {
        PyErr_Format(PyExc_TypeError,
                     "[Tensor.grad] assigned grad must be a Tensor or None, not %s",
                     Py_TYPE(v)->tp_name);
        return -1;
    }
    musa_tensor *g = v && v != Py_None ? pm_t(v) : NULL;
    return musa_tensor_set_grad(pm_t(self), g) ? pm_raise_int() : 0;
}
GETTER(grad_fn) {
    UNUSED_C;
    return pm_node_obj(musa_tensor_grad_fn(pm_t(self)));
}
GETTER(is_leaf) {
    UNUSED_C;
    return PyBool_FromLong(musa_tensor_is_leaf(pm_t(self)));
}
GETTER(retains_grad) {
    UNUSED_C;
    return PyBool_FromLong(musa_tensor_retains_grad(pm_t(self)));
}
GETTER(data) {
    UNUSED_C;
    return pm_wrap(musa_detach(pm_t(self)));
}
static int set_data(PyObject *self, PyObject *v, void *c) {
    UNUSED_C;
    if (!v || !pm_is_tensor(v)) {
        PyErr_SetString(PyExc_TypeError, "[Tensor.data] data must be set to a Tensor");
        return -1;
    }
    /* rebind this object to v's storage, keeping requires_grad and .grad */
    musa_tensor *old = pm_t(self), *nt = musa_detach(pm_t(v));
    if (!nt) return pm_raise_int();
    bool rg = musa_tensor_requires_grad(old) && musa_tensor_is_leaf(old);
    musa_tensor *g = musa_tensor_grad(old);
    if (rg && musa_tensor_set_requires_grad(nt, true)) {
        musa_tensor_release(nt);
        musa_tensor_release(g);
        return pm_raise_int();
    }
    if (g && musa_tensor_shape(g) && musa_tensor_ndim(g) == musa_tensor_ndim(nt))
        musa_tensor_set_grad(nt, g);
    musa_clear_error();
    musa_tensor_release(g);
    if (musa_tensor_handle(old) == self) musa_tensor_set_handle(old, NULL);
    musa_tensor_release(old);
    ((PyMusaTensor *)self)->t = nt;
    musa_tensor_set_handle(nt, self);
    return 0;
}
/* Tensor._rebind_(view): this object now stands for `view` (a tensor made
 * from it: unsqueeze_, t_, resize_ ... in musa/_tensor.py), as PyTorch's
 * in-place view ops change the tensor's shape in place. */
static PyObject *tensor_rebind(PyObject *self, PyObject *v) {
    if (!pm_is_tensor(v)) {
        PyErr_SetString(PyExc_TypeError, "[Tensor._rebind_] expected a Tensor");
        return NULL;
    }
    musa_tensor *old = pm_t(self), *nt = musa_tensor_retain(pm_t(v));
    if (musa_tensor_handle(old) == self) musa_tensor_set_handle(old, NULL);
    musa_tensor_release(old);
    ((PyMusaTensor *)self)->t = nt;
    musa_tensor_set_handle(nt, self);
    Py_RETURN_NONE;
}
GETTER(T) {
    UNUSED_C;
    musa_tensor *t = pm_t(self);
    int nd = musa_tensor_ndim(t);
    int64_t dims[MUSA_MAX_DIMS];
    for (int i = 0; i < nd; i++) dims[i] = nd - 1 - i;
    return pm_wrap(musa_permute(t, nd, dims));
}
GETTER(mT) {
    UNUSED_C;
    return pm_wrap(musa_transpose(pm_t(self), -2, -1));
}
GETTER(is_cuda) {
    UNUSED_C;
    return PyBool_FromLong(musa_tensor_device(pm_t(self)).type == MUSA_DEVICE_CUDA);
}
GETTER(version) {
    UNUSED_C;
    return PyLong_FromUnsignedLongLong(musa_tensor_version(pm_t(self)));
}
GETTER(itemsize) {
    UNUSED_C;
    return PyLong_FromSize_t(musa_dtype_size(musa_tensor_dtype(pm_t(self))));
}
GETTER(nbytes) {
    UNUSED_C;
    musa_tensor *t = pm_t(self);
    return PyLong_FromSize_t(musa_dtype_size(musa_tensor_dtype(t)) * (size_t)musa_tensor_numel(t));
}
GETTER(is_meta) {
    UNUSED_C;
    return PyBool_FromLong(musa_tensor_is_meta(pm_t(self)));
}

static PyGetSetDef tensor_getset[] = {
    {"shape", get_shape, NULL, "sizes of the dimensions (a tuple)", NULL},
    {"dtype", get_dtype, NULL, "element type", NULL},
    {"device", get_device, NULL, "where the data lives", NULL},
    {"ndim", get_ndim, NULL, "number of dimensions", NULL},
    {"requires_grad", get_requires_grad, set_requires_grad,
     "whether autograd records ops on this tensor", NULL},
    {"grad", get_grad, set_grad, "accumulated gradient (None until backward reaches it)", NULL},
    {"grad_fn", get_grad_fn, NULL, "the autograd node that made this tensor (None for leaves)",
     NULL},
    {"is_leaf", get_is_leaf, NULL, "True for tensors not made by a recorded op", NULL},
    {"retains_grad", get_retains_grad, NULL, "True for a non-leaf after retain_grad()", NULL},
    {"data", get_data, set_data, "the tensor without autograd history (shares storage)", NULL},
    {"T", get_T, NULL, "dims reversed", NULL},
    {"mT", get_mT, NULL, "last two dims swapped", NULL},
    {"is_cuda", get_is_cuda, NULL, "whether the tensor is on a CUDA device", NULL},
    {"_version", get_version, NULL, "in-place modification counter", NULL},
    {"itemsize", get_itemsize, NULL, "bytes per element", NULL},
    {"nbytes", get_nbytes, NULL, "bytes of the elements", NULL},
    {"is_meta", get_is_meta, NULL, "shape and dtype only, no storage", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyObject *make_subclass(PyObject *cls, PyObject *args, PyObject *kw) {
    (void)cls;
    static char *names[] = {"cls", "data", "requires_grad", NULL};
    PyObject *type, *data;
    int rg = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|p:_make_subclass", names, &type, &data, &rg))
        return NULL;
    if (!PyType_Check(type) || !PyType_IsSubtype((PyTypeObject *)type, MusaTensor_Type)) {
        PyErr_SetString(PyExc_TypeError,
                        "[Tensor._make_subclass] cls must be a subclass of musa.Tensor");
        return NULL;
    }
    if (!pm_is_tensor(data)) {
        PyErr_Format(PyExc_TypeError, "[Tensor._make_subclass] expected a Tensor as data, got %s",
                     Py_TYPE(data)->tp_name);
        return NULL;
    }
    musa_tensor *t = musa_detach(pm_t(data));
    if (!t) return pm_raise();
    if (rg && musa_tensor_set_requires_grad(t, true)) {
        musa_tensor_release(t);
        return pm_raise();
    }
    return alloc_wrapper((PyTypeObject *)type, t);
}

static PyMethodDef extra_methods[] = {
    {"_make_subclass", (PyCFunction)(void (*)(void))make_subclass,
     METH_VARARGS | METH_KEYWORDS | METH_STATIC,
     "_make_subclass(cls, data, requires_grad=False): data (detached, sharing storage) as an "
     "instance of cls"},
    {"_rebind_", (PyCFunction)tensor_rebind, METH_O,
     "_rebind_(view): this tensor object now stands for view (in-place view ops)"},
    {NULL, NULL, 0, NULL},
};

/* ---- the type ---- */

static PyMemberDef tensor_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(PyMusaTensor, weakrefs), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

int pm_tensor_type_init(PyObject *module) {
    PyMethodDef *bound = pm_bindings_methods();
    int nb = 0, ne = 0;
    while (bound && bound[nb].ml_name) nb++;
    while (extra_methods[ne].ml_name) ne++;
    PyMethodDef *all = PyMem_Calloc((size_t)(nb + ne + 1), sizeof(PyMethodDef));
    if (!all) {
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < nb; i++) all[i] = bound[i];
    for (int i = 0; i < ne; i++) all[nb + i] = extra_methods[i];
    PyType_Slot slots[] = {
        {Py_tp_new, tensor_new},
        {Py_tp_dealloc, tensor_dealloc},
        {Py_tp_repr, tensor_repr},
        {Py_tp_hash, tensor_hash},
        {Py_tp_richcompare, richcompare},
        {Py_tp_getset, tensor_getset},
        {Py_tp_methods, all},
        {Py_tp_members, tensor_members},
        {Py_tp_doc, "A multi-dimensional array with autograd; see musa.tensor()."},
        {Py_nb_add, nb_add},
        {Py_nb_subtract, nb_sub},
        {Py_nb_multiply, nb_mul},
        {Py_nb_true_divide, nb_div},
        {Py_nb_floor_divide, nb_floordiv},
        {Py_nb_remainder, nb_rem},
        {Py_nb_power, nb_pow},
        {Py_nb_matrix_multiply, nb_matmul},
        {Py_nb_and, nb_and},
        {Py_nb_or, nb_or},
        {Py_nb_xor, nb_xor},
        {Py_nb_lshift, nb_lshift},
        {Py_nb_rshift, nb_rshift},
        {Py_nb_inplace_and, nb_iand},
        {Py_nb_inplace_or, nb_ior},
        {Py_nb_inplace_xor, nb_ixor},
        {Py_nb_inplace_lshift, nb_ilshift},
        {Py_nb_inplace_rshift, nb_irshift},
        {Py_nb_inplace_add, nb_iadd},
        {Py_nb_inplace_subtract, nb_isub},
        {Py_nb_inplace_multiply, nb_imul},
        {Py_nb_inplace_true_divide, nb_idiv},
        {Py_nb_inplace_floor_divide, nb_ifloordiv},
        {Py_nb_inplace_remainder, nb_irem},
        {Py_nb_inplace_power, nb_ipow},
        {Py_nb_inplace_matrix_multiply, nb_imatmul},
        {Py_nb_negative, nb_neg},
        {Py_nb_positive, nb_pos},
        {Py_nb_absolute, nb_abs},
        {Py_nb_invert, nb_invert},
        {Py_nb_bool, nb_bool},
        {Py_nb_float, nb_float},
        {Py_nb_int, nb_int},
        {Py_nb_index, nb_index},
        {Py_mp_length, tensor_len},
        {Py_mp_subscript, pm_getitem},
        {Py_mp_ass_subscript, pm_setitem},
        {Py_bf_getbuffer, pm_tensor_buffer_procs.bf_getbuffer},
        {Py_bf_releasebuffer, pm_tensor_buffer_procs.bf_releasebuffer},
        {0, NULL},
    };
    PyType_Spec spec = {"musa.Tensor", sizeof(PyMusaTensor), 0,
                        Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, slots};
    MusaTensor_Type = (PyTypeObject *)PyType_FromSpec(&spec);
    if (!MusaTensor_Type) return -1;
    Py_INCREF(MusaTensor_Type);
    return PyModule_AddObject(module, "Tensor", (PyObject *)MusaTensor_Type);
}
