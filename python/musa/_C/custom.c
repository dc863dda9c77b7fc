/*
 * custom.c - custom ops written in Python (musa.library.custom_op) on the C
 * registry (musa_op_register): the three C callbacks call the Python
 * functions the library module passes, under the GIL, and stash any Python
 * exception so that the call raises it (pm_raise). The normalising of what
 * the user's functions return is Python (python/musa/library.py).
 *
 * Invariants: the registered functions live as long as the process (a
 * registration cannot be undone), so their tuple is never released. Plans
 * run custom ops on the calling thread only (the row is THREADS), so no
 * OpenMP worker ever waits for a GIL the caller holds.
 */
#include <stdio.h>

#include "pymusa.h"

/* (forward, infer, backward) of one op, and its output count */
typedef struct {
    PyObject *fns;
    int n_out;
    char name[MUSA_CUSTOM_NAME_MAX]; /* errors start "[name] " */
} py_custom;

/* infer(inputs) -> [(shape tuple, dtype), ...] of n_out entries */
static int infer_cb(void *user, int n_in, const musa_tensor *const *in, musa_dtype *dt, int *ndim,
                    int64_t (*shape)[MUSA_MAX_DIMS]) {
    py_custom *c = user;
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = MUSA_OK;
    PyObject *ins = pm_tensor_tuple(n_in, (musa_tensor *const *)in);
    PyObject *r = ins ? PyObject_CallOneArg(PyTuple_GET_ITEM(c->fns, 1), ins) : NULL;
    PyObject *seq = r ? PySequence_Fast(r, "infer must return a list") : NULL;
    if (!seq || PySequence_Fast_GET_SIZE(seq) != c->n_out) {
        if (seq)
            PyErr_Format(PyExc_ValueError, "[%s] infer returned %zd outputs, not %d", c->name,
                         PySequence_Fast_GET_SIZE(seq), c->n_out);
        rc = pm_stash_exception();
        goto done;
    }
    for (int j = 0; j < c->n_out && !rc; j++) {
        PyObject *e = PySequence_Fast_GET_ITEM(seq, j), *sh, *d;
        int n = 0, dti;
        if (!PyTuple_Check(e) || PyTuple_GET_SIZE(e) != 2 || !(sh = PyTuple_GET_ITEM(e, 0)) ||
            !(d = PyTuple_GET_ITEM(e, 1)) ||
            pm_int_list(sh, shape[j], MUSA_MAX_DIMS, &n, "custom op infer", "a shape") ||
            (dti = pm_dtype_from(d, -1, "custom op infer")) < 0) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "[%s] infer must give (shape, dtype) per output",
                             c->name);
            rc = pm_stash_exception();
            break;
        }
        ndim[j] = n, dt[j] = (musa_dtype)dti;
    }
done:
    Py_XDECREF(seq), Py_XDECREF(r), Py_XDECREF(ins);
    PyGILState_Release(g);
    return rc;
}

/* forward(inputs, outputs): fills the outputs */
static int forward_cb(void *user, int n_in, musa_tensor *const *in, int n_out,
                      musa_tensor *const *out) {
    py_custom *c = user;
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = MUSA_OK;
    PyObject *ins = pm_tensor_tuple(n_in, in), *outs = pm_tensor_tuple(n_out, out);
    PyObject *r = ins && outs
                      ? PyObject_CallFunctionObjArgs(PyTuple_GET_ITEM(c->fns, 0), ins, outs, NULL)
                      : NULL;
    if (!r) rc = pm_stash_exception();
    Py_XDECREF(r), Py_XDECREF(ins), Py_XDECREF(outs);
    PyGILState_Release(g);
    return rc;
}

/* backward(inputs, outputs, grad_outputs) -> n_in gradients or None */
static int backward_cb(void *user, int n_in, musa_tensor *const *in, int n_out,
                       musa_tensor *const *out, musa_tensor *const *gout, musa_tensor **gin) {
    py_custom *c = user;
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = MUSA_OK;
    PyObject *ins = pm_tensor_tuple(n_in, in), *outs = pm_tensor_tuple(n_out, out),
             *gouts = pm_tensor_tuple(n_out, gout);
    PyObject *r = ins && outs && gouts ? PyObject_CallFunctionObjArgs(PyTuple_GET_ITEM(c->fns, 2),
                                                                      ins, outs, gouts, NULL)
                                       : NULL;
    PyObject *seq = r ? PySequence_Fast(r, "backward must return a sequence") : NULL;
    if (!seq || PySequence_Fast_GET_SIZE(seq) != n_in) {
        if (seq)
            PyErr_Format(PyExc_ValueError, "[%s] backward returned %zd gradients for %d inputs",
                         c->name, PySequence_Fast_GET_SIZE(seq), n_in);
        rc = pm_stash_exception();
    }
    if (!rc) rc = pm_grads_from(seq, n_in, gin, c->name);
    Py_XDECREF(seq), Py_XDECREF(r), Py_XDECREF(ins), Py_XDECREF(outs), Py_XDECREF(gouts);
    PyGILState_Release(g);
    return rc;
}

/* _custom_op_register(name, n_in, n_out, forward, infer, backward) -> index */
DEF(_custom_op_register, PM_FN, "name:O n_in:i n_out:i forward:O infer:O backward:O") {
    const char *name = PyUnicode_Check(a[0].o) ? PyUnicode_AsUTF8(a[0].o) : NULL;
    if (!name) {
        if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "[%s] name must be a str", who);
        return NULL;
    }
    py_custom *c = PyMem_RawMalloc(sizeof *c);
    if (!c) return PyErr_NoMemory();
    c->fns = PyTuple_Pack(3, a[3].o, a[4].o, a[5].o);
    c->n_out = (int)a[2].i;
    snprintf(c->name, sizeof c->name, "%s", name);
    if (!c->fns) {
        PyMem_RawFree(c);
        return NULL;
    }
    musa_custom_op def = {.name = name,
                          .n_in = (int)a[1].i,
                          .n_out = (int)a[2].i,
                          .infer = infer_cb,
                          .forward = forward_cb,
                          .backward = backward_cb,
                          .user = c};
    int index = musa_op_register(&def);
    if (index < 0) {
        Py_DECREF(c->fns);
        PyMem_RawFree(c);
        return pm_raise();
    }
    return PyLong_FromLong(index); /* c lives as long as the registration: the process */
}

/* _custom_op_call(index, inputs, n_out) -> tuple of n_out tensors */
DEF(_custom_op_call, PM_FN, "index:i inputs:L n_out:i") {
    if (a[2].i < 1 || a[2].i > MUSA_CUSTOM_MAX_OUTPUTS)
        return PyErr_Format(PyExc_ValueError, "[%s] n_out %lld out of range", who,
                            (long long)a[2].i);
    musa_tensor *out[MUSA_CUSTOM_MAX_OUTPUTS] = {NULL};
    if (musa_custom_op_call((int)a[0].i, a[1].n, a[1].list, (int)a[2].i, out)) return pm_raise();
    PyObject *r = pm_tensor_tuple((int)a[2].i, out);
    for (int j = 0; j < (int)a[2].i; j++) musa_tensor_release(out[j]);
    return r;
}
