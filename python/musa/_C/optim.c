/*
 * optim.c - bindings of the fused optimizer updates (src/ops/optim.c).
 * musa.optim keeps the state; one call per step updates every parameter.
 */
#include "pymusa.h"

/* A list of state tensors (None entries: state not used), one per parameter. */
static int opt_list(PyObject *o, int n, musa_tensor ***out, const char *what) {
    int got;
    return pm_tensor_list(o, what, true, n, out, &got);
}

DEF(_optim_sgd, PM_FN,
    "params:L grads:L bufs:O fresh:O lr:f momentum:f dampening:f weight_decay:f nesterov:b "
    "maximize:b") {
    int n = a[0].n;
    if (a[1].n != n) {
        PyErr_Format(PyExc_ValueError, "_optim_sgd: %d params but %d grads", n, a[1].n);
        return NULL;
    }
    musa_tensor **bufs;
    if (opt_list(a[2].o, n, &bufs, "bufs")) return NULL;
    bool *fresh = PyMem_Calloc((size_t)(n ? n : 1), sizeof(bool));
    if (!fresh) {
        pm_tensor_list_free(bufs);
        return PyErr_NoMemory();
    }
    if (a[3].o != Py_None) {
        PyObject *seq = PySequence_Fast(a[3].o, "fresh must be a list of bools");
        if (!seq || PySequence_Fast_GET_SIZE(seq) != n) {
            if (seq) PyErr_SetString(PyExc_ValueError, "fresh must have one entry per parameter");
            Py_XDECREF(seq);
            pm_tensor_list_free(bufs), PyMem_Free(fresh);
            return NULL;
        }
        for (int i = 0; i < n; i++)
            fresh[i] = PyObject_IsTrue(PySequence_Fast_GET_ITEM(seq, i)) == 1;
        Py_DECREF(seq);
    }
    musa_sgd_options o = {a[4].f, a[5].f, a[6].f, a[7].f, a[8].b, a[9].b};
    int rc = musa_optim_sgd(n, a[0].list, a[1].list, bufs, fresh, &o);
    pm_tensor_list_free(bufs), PyMem_Free(fresh);
    return pm_none_or_raise(rc);
}

DEF(_optim_adam, PM_FN,
    "params:L grads:L exp_avg:L exp_avg_sq:L max_exp_avg_sq:O steps:O lr:f beta1:f beta2:f eps:f "
    "weight_decay:f "
    "amsgrad:b maximize:b decoupled:b") {
    int n = a[0].n;
    if (a[1].n != n || a[2].n != n || a[3].n != n) {
        PyErr_SetString(PyExc_ValueError,
                        "_optim_adam: params, grads and state lists differ in length");
        return NULL;
    }
    musa_tensor **vmax;
    if (opt_list(a[4].o, n, &vmax, "max_exp_avg_sq")) return NULL;
    /* steps: a list of ints (the I kind holds at most MUSA_MAX_DIMS, so read it here) */
    int64_t *steps = PyMem_Calloc((size_t)(n ? n : 1), sizeof(int64_t));
    PyObject *seq = steps ? PySequence_Fast(a[5].o, "steps must be a list of ints") : NULL;
    int rc = MUSA_OK;
    if (!seq || PySequence_Fast_GET_SIZE(seq) != n) {
        if (seq)
            PyErr_SetString(PyExc_ValueError, "steps must have one entry per parameter");
        else if (!steps)
            PyErr_NoMemory();
        Py_XDECREF(seq);
        pm_tensor_list_free(vmax), PyMem_Free(steps);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (pm_int64(PySequence_Fast_GET_ITEM(seq, i), &steps[i], "step")) {
            Py_DECREF(seq);
            pm_tensor_list_free(vmax), PyMem_Free(steps);
            return NULL;
        }
    Py_DECREF(seq);
    musa_adam_options o = {a[6].f, a[7].f, a[8].f, a[9].f, a[10].f, a[11].b, a[12].b, a[13].b};
    rc = musa_optim_adam(n, a[0].list, a[1].list, a[2].list, a[3].list, vmax, steps, &o);
    pm_tensor_list_free(vmax), PyMem_Free(steps);
    return pm_none_or_raise(rc);
}

DEF(_optim_rmsprop, PM_FN,
    "params:L grads:L square_avg:L momentum_buf:O grad_avg:O lr:f alpha:f eps:f weight_decay:f "
    "momentum:f "
    "centered:b maximize:b") {
    int n = a[0].n;
    if (a[1].n != n || a[2].n != n) {
        PyErr_SetString(PyExc_ValueError,
                        "_optim_rmsprop: params, grads and square_avg differ in length");
        return NULL;
    }
    musa_tensor **buf, **gavg;
    if (opt_list(a[3].o, n, &buf, "momentum_buf")) return NULL;
    if (opt_list(a[4].o, n, &gavg, "grad_avg")) {
        pm_tensor_list_free(buf);
        return NULL;
    }
    musa_rmsprop_options o = {a[5].f, a[6].f, a[7].f, a[8].f, a[9].f, a[10].b, a[11].b};
    int rc = musa_optim_rmsprop(n, a[0].list, a[1].list, a[2].list, buf, gavg, &o);
    pm_tensor_list_free(buf), pm_tensor_list_free(gavg);
    return pm_none_or_raise(rc);
}
