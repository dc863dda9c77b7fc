/*
 * index.c - x[key] and x[key] = value: the Python key becomes the entry
 * list of musa_index / musa_index_put_ (src/ops/indexing.c).
 */
#include "pymusa.h"

#define MAX_ENTRIES 32

typedef struct {
    int n;
    musa_index_entry e[MAX_ENTRIES];
    musa_tensor *owned[MAX_ENTRIES]; /* index tensors made from lists / arrays */
} key_entries;

static void key_free(key_entries *k) {
    for (int i = 0; i < k->n; i++) musa_tensor_release(k->owned[i]);
}

static bool is_scalar_shape(PyObject *o) {
    PyObject *shape = PyObject_GetAttrString(o, "shape");
    bool r = shape && PyTuple_Check(shape) && PyTuple_GET_SIZE(shape) == 0;
    Py_XDECREF(shape);
    PyErr_Clear();
    return r;
}

/* A uint8 tensor index is a mask, as PyTorch reads it (deprecated there in
 * favour of bool, with a warning): a new bool tensor, or NULL with a Python
 * error set. */
static musa_tensor *uint8_mask(musa_tensor *t, const char *who) {
    if (PyErr_WarnFormat(PyExc_UserWarning, 1,
                         "[%s] a uint8 index is a mask (nonzero: taken), as in PyTorch, which "
                         "deprecates it; index with a bool tensor",
                         who) < 0)
        return NULL;
    musa_tensor *m = musa_cast(t, MUSA_DTYPE_BOOL);
    if (!m) pm_raise_int();
    return m;
}

static int add_entry(key_entries *k, PyObject *o, const char *who) {
    if (k->n == MAX_ENTRIES) {
        PyErr_Format(PyExc_IndexError, "[%s] too many index entries (at most %d)", who,
                     MAX_ENTRIES);
        return -1;
    }
    musa_index_entry *e = &k->e[k->n];
    k->owned[k->n] = NULL;
    *e = (musa_index_entry){.kind = MUSA_INDEX_NONE};
    if (o == Py_None) {
        e->kind = MUSA_INDEX_NONE;
    } else if (o == Py_Ellipsis) {
        e->kind = MUSA_INDEX_ELLIPSIS;
    } else if (PySlice_Check(o)) {
        Py_ssize_t start, stop, step;
        if (PySlice_Unpack(o, &start, &stop, &step) < 0) {
            /* Python's check, in our words: a zero step, or bounds that are not ints */
            bool zero = PyErr_ExceptionMatches(PyExc_ValueError);
            PyErr_Clear();
            if (zero)
                PyErr_Format(PyExc_ValueError, "[%s] step must be greater than zero", who);
            else
                PyErr_Format(PyExc_TypeError,
                             "[%s] slice indices must be integers or None or have an __index__ "
                             "method",
                             who);
            return -1;
        }
        if (step <= 0) {
            PyErr_Format(PyExc_ValueError, "[%s] step must be greater than zero", who);
            return -1;
        }
        e->kind = MUSA_INDEX_SLICE;
        e->start = start;
        e->stop = stop == PY_SSIZE_T_MAX ? INT64_MAX : stop;
        e->step = step;
    } else if (PyBool_Check(o)) {
        e->kind = MUSA_INDEX_BOOL;
        e->start = o == Py_True;
    } else if (PyLong_Check(o)) {
        int64_t v;
        if (pm_int64(o, &v, who, "an index")) return -1;
        e->kind = MUSA_INDEX_INT;
        e->start = v;
    } else if (!pm_is_tensor(o) && PyObject_HasAttrString(o, "shape") && !is_scalar_shape(o)) {
        musa_tensor *t = pm_tensor_from_data(o, -1, who); /* a NumPy array of indices or a mask */
        if (!t) return -1;
        if (musa_tensor_dtype(t) == MUSA_DTYPE_UINT8) {
            musa_tensor *m = uint8_mask(t, who);
            musa_tensor_release(t);
            if (!(t = m)) return -1;
        }
        e->kind = MUSA_INDEX_TENSOR;
        e->tensor = k->owned[k->n] = t;
    } else if (PyIndex_Check(o) && !pm_is_tensor(o)) {
        int64_t v;
        if (pm_int64(o, &v, who, "an index")) return -1;
        e->kind = MUSA_INDEX_INT;
        e->start = v;
    } else if (pm_is_tensor(o)) {
        musa_tensor *t = pm_t(o);
        musa_dtype d = musa_tensor_dtype(t);
        if (d == MUSA_DTYPE_UINT8) {
            if (!(t = uint8_mask(t, who))) return -1;
            e->kind = MUSA_INDEX_TENSOR;
            e->tensor = k->owned[k->n] = t;
        } else if (musa_tensor_ndim(t) == 0 && d != MUSA_DTYPE_BOOL && !musa_dtype_is_floating(d)) {
            int64_t v; /* a 0-d integer tensor indexes like an int */
            if (musa_tensor_item_int(t, &v)) return pm_raise_int();
            e->kind = MUSA_INDEX_INT;
            e->start = v;
        } else {
            e->kind = MUSA_INDEX_TENSOR;
            e->tensor = t;
        }
    } else if (PySequence_Check(o) && !PyUnicode_Check(o) && !PyBytes_Check(o)) {
        musa_tensor *t = pm_tensor_from_data(o, -1, who);
        if (!t) return -1;
        musa_dtype d = musa_tensor_dtype(t);
        if (musa_dtype_is_floating(d) && musa_tensor_numel(t) == 0) { /* x[[]] */
            musa_tensor *c = musa_cast(t, MUSA_DTYPE_INT64);
            musa_tensor_release(t);
            if (!(t = c)) return pm_raise_int();
        }
        e->kind = MUSA_INDEX_TENSOR;
        e->tensor = k->owned[k->n] = t;
    } else {
        PyErr_Format(PyExc_IndexError,
                     "[%s] only integers, slices (`:`), ellipsis (`...`), None and integer or bool "
                     "tensors are valid indices (got %s)",
                     who, Py_TYPE(o)->tp_name);
        return -1;
    }
    k->n++;
    return 0;
}

/* PyTorch's (and old NumPy's) rule: a list of fewer than 32 entries holding
 * a sequence, slice, tensor, None or Ellipsis is a tuple of indices, so
 * x[[[0, 1], [1, 0]]] is x[[0, 1], [1, 0]]. */
static bool list_as_tuple(PyObject *key) {
    if (!PyList_Check(key) || PyList_GET_SIZE(key) >= 32) return false;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(key); i++) {
        PyObject *o = PyList_GET_ITEM(key, i);
        if (pm_is_tensor(o) || PySequence_Check(o) || PySlice_Check(o) || o == Py_None ||
            o == Py_Ellipsis)
            return true;
    }
    return false;
}

static int parse_key(PyObject *key, key_entries *k, const char *who) {
    k->n = 0;
    if (PyTuple_Check(key) || list_as_tuple(key)) {
        PyObject *seq = PySequence_Fast(key, who); /* a new reference to the tuple or list */
        if (!seq) return -1;
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++)
            if (add_entry(k, PySequence_Fast_GET_ITEM(seq, i), who)) {
                key_free(k);
                Py_DECREF(seq);
                return -1;
            }
        Py_DECREF(seq);
        return 0;
    }
    if (add_entry(k, key, who)) {
        key_free(k);
        return -1;
    }
    return 0;
}

PyObject *pm_getitem(PyObject *self, PyObject *key) {
    musa_tensor *x = pm_t(self);
    /* fast path: one int on a tensor with dims */
    if (PyLong_CheckExact(key) && musa_tensor_ndim(x) > 0) {
        int overflow = 0;
        long long i = PyLong_AsLongLongAndOverflow(key, &overflow);
        int64_t size = musa_tensor_shape(x)[0];
        if (!overflow && (i < -size || i >= size)) {
            PyErr_Format(PyExc_IndexError,
                         "[index] index %lld is out of bounds for dimension 0 with size %lld", i,
                         (long long)size);
            return NULL;
        }
        if (!overflow) return pm_wrap(musa_select(x, 0, i));
    }
    key_entries k;
    if (parse_key(key, &k, "index")) return NULL;
    musa_tensor *r = musa_index(x, k.n, k.e);
    key_free(&k);
    return pm_wrap(r);
}

int pm_setitem(PyObject *self, PyObject *key, PyObject *value) {
    if (!value) {
        PyErr_SetString(PyExc_TypeError, "[Tensor.__delitem__] tensor elements cannot be deleted");
        return -1;
    }
    musa_tensor *v;
    if (pm_is_tensor(value))
        v = musa_tensor_retain(pm_t(value));
    else if (PyNumber_Check(value) && !PySequence_Check(value))
        v = pm_operand(value, "index_put_");
    else
        v = pm_tensor_from_data(value, musa_tensor_dtype(pm_t(self)), "index_put_");
    if (!v) return -1;
    key_entries k;
    if (parse_key(key, &k, "index_put_")) {
        musa_tensor_release(v);
        return -1;
    }
    int rc = musa_index_put_(pm_t(self), k.n, k.e, v);
    key_free(&k);
    musa_tensor_release(v);
    return rc ? pm_raise_int() : 0;
}
