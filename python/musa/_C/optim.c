/*
 * optim.c - the one binding musa.optim needs: run an optimizer's update row
 * (sgd_update, adam_update, ...) over every parameter of a group in one
 * Python call, musa_update_multi: eager, the rows run as one multi-tensor
 * kernel (one parallel loop); under a capture each row is dispatched like
 * any op, so the graph records a node per parameter. The parameter and its
 * state are updated in place. musa.optim keeps the state; the arithmetic is
 * the row's kernel.
 */
#include "pymusa.h"

/* Attributes of `op` from a dict of numbers. Returns NULL with an exception set. */
static musa_attrs *attrs_from(int op, PyObject *d) {
    musa_attrs *at = musa_attrs_new(op);
    if (!at) {
        pm_raise();
        return NULL;
    }
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(d, &pos, &k, &v)) {
        const char *name = PyUnicode_AsUTF8(k);
        double x = PyFloat_AsDouble(v);
        if (!name || (x == -1.0 && PyErr_Occurred())) goto fail;
        if (musa_attrs_set_number(at, name, x)) {
            pm_raise();
            goto fail;
        }
    }
    return at;
fail:
    musa_attrs_free(at);
    return NULL;
}

DEF(_update, PM_FN, "op:O rows:O attrs:O") {
    const char *name = PyUnicode_Check(a[0].o) ? PyUnicode_AsUTF8(a[0].o) : NULL;
    int op = name ? musa_op_lookup(name) : -1;
    if (op < 0 || musa_op_num_outputs(op) >= 0) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "[_update] %R is not an update op", a[0].o);
        return NULL;
    }
    if (!PyDict_Check(a[2].o)) {
        PyErr_SetString(PyExc_TypeError, "[_update] attrs must be a dict");
        return NULL;
    }
    PyObject *rows = PySequence_Fast(a[1].o, "[_update] rows must be a sequence");
    if (!rows) return NULL;
    musa_attrs *at = attrs_from(op, a[2].o);
    musa_tensor **ts = NULL; /* rows laid end to end, retained (Python may run meanwhile) */
    Py_ssize_t n_rows = PySequence_Fast_GET_SIZE(rows), n_in = -1, n = 0;
    PyObject *r = NULL;
    if (!at) goto done;
    for (Py_ssize_t i = 0; i < n_rows; i++) {
        PyObject *row = PySequence_Fast(PySequence_Fast_GET_ITEM(rows, i), "");
        if (!row) {
            PyErr_Format(PyExc_TypeError, "[%s] rows[%zd] must be a sequence of Tensors", name, i);
            goto done;
        }
        Py_ssize_t len = PySequence_Fast_GET_SIZE(row);
        if (n_in < 0) {
            n_in = len;
            if (!(ts = PyMem_Calloc((size_t)(n_rows * n_in + 1), sizeof *ts))) {
                Py_DECREF(row);
                PyErr_NoMemory();
                goto done;
            }
        }
        if (len != n_in) {
            PyErr_Format(PyExc_ValueError, "[%s] rows[%zd] has %zd tensors, rows[0] has %zd", name,
                         i, len, n_in);
            Py_DECREF(row);
            goto done;
        }
        for (Py_ssize_t k = 0; k < len; k++) {
            PyObject *e = PySequence_Fast_GET_ITEM(row, k);
            if (!pm_is_tensor(e)) {
                PyErr_Format(PyExc_TypeError, "[%s] rows[%zd][%zd] must be a Tensor, not %s", name,
                             i, k, Py_TYPE(e)->tp_name);
                Py_DECREF(row);
                goto done;
            }
            ts[n++] = musa_tensor_retain(pm_t(e));
        }
        Py_DECREF(row);
    }
    if (n_rows && musa_update_multi(op, at, (int)n_rows, (int)n_in, ts)) {
        pm_raise();
        goto done;
    }
    r = Py_None;
    Py_INCREF(r);
done:
    for (Py_ssize_t k = 0; k < n; k++) musa_tensor_release(ts[k]);
    PyMem_Free(ts);
    musa_attrs_free(at);
    Py_DECREF(rows);
    return r;
}
