/*
 * optim.c - the one binding musa.optim needs: run an optimizer's update row
 * (sgd_update, adam_update, ...) over every parameter of a group in one
 * Python call. Each row is dispatched like any op (so captures record it);
 * the parameter and its state are passed as provided outputs, so they are
 * updated in place. musa.optim keeps the state; the arithmetic is the row's
 * kernel.
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
    if (!at) {
        Py_DECREF(rows);
        return NULL;
    }
    int rc = MUSA_OK;
    for (Py_ssize_t r = 0; r < PySequence_Fast_GET_SIZE(rows) && !rc; r++) {
        musa_tensor **in;
        int n;
        if (pm_tensor_list(PySequence_Fast_GET_ITEM(rows, r), name, "a row", false, -1, &in, &n)) {
            rc = -1;
            break;
        }
        musa_tensor *out[8] = {NULL};
        if (n < 3 || n - 2 > 6) {
            PyErr_Format(PyExc_ValueError, "[%s] an update row has 3 to 8 tensors, got %d", name,
                         n);
            rc = -1;
        } else {
            for (int j = 0; j < n - 2; j++) out[j] = in[j];
            if ((rc = musa_op_call(op, n, in, at, out))) pm_raise();
        }
        pm_tensor_list_free(in);
    }
    musa_attrs_free(at);
    Py_DECREF(rows);
    if (rc) return NULL;
    Py_RETURN_NONE;
}
