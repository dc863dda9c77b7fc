/*
 * dist.c - the process group and collectives (musa.h, "Distributed") for
 * musa.distributed, which adds PyTorch's interface on top.
 */
#include "pymusa.h"

DEF(_dist_init, PM_FN, "") {
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = musa_dist_init();
    Py_END_ALLOW_THREADS return pm_none_or_raise(rc);
}
DEF(_dist_init_tcp, PM_FN, "host:O port:i rank:i world_size:i timeout:f") {
    const char *host = PyUnicode_Check(a[0].o) ? PyUnicode_AsUTF8(a[0].o) : NULL;
    if (!host) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "[init_process_group] the address must be a str, not %s",
                         Py_TYPE(a[0].o)->tp_name);
        return NULL;
    }
    for (int k = 1; k < 4; k++)
        if (a[k].i < INT32_MIN || a[k].i > INT32_MAX) {
            PyErr_Format(PyExc_ValueError, "[init_process_group] %s %lld is out of range",
                         k == 1   ? "port"
                         : k == 2 ? "rank"
                                  : "world_size",
                         (long long)a[k].i);
            return NULL;
        }
    /* the rendezvous may wait long: other threads run, and Ctrl-C stops it */
    pm_long_op(true);
    int rc = musa_dist_init_tcp(host, (int)a[1].i, (int)a[2].i, (int)a[3].i, a[4].f);
    pm_long_op(false);
    return pm_none_or_raise(rc);
}
DEF(_dist_backend, PM_FN, "") {
    const char *b = musa_dist_backend();
    if (!b) Py_RETURN_NONE;
    return PyUnicode_FromString(b);
}
DEF(_dist_finalize, PM_FN, "") {
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = musa_dist_finalize();
    Py_END_ALLOW_THREADS return pm_none_or_raise(rc);
}
DEF(_dist_abort, PM_FN, "code:i=1") {
    fflush(stdout);
    fflush(stderr);
    musa_dist_abort((int)a[0].i);
    Py_RETURN_NONE; /* not reached */
}
DEF(_dist_is_initialized, PM_FN, "") {
    return PyBool_FromLong(musa_dist_is_initialized());
}
DEF(_dist_rank, PM_FN, "") {
    return PyLong_FromLong(musa_dist_rank());
}
DEF(_dist_world_size, PM_FN, "") {
    return PyLong_FromLong(musa_dist_world_size());
}
DEF(_dist_barrier, PM_FN, "") {
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = musa_dist_barrier();
    Py_END_ALLOW_THREADS return pm_none_or_raise(rc);
}
DEF(_dist_all_reduce, PM_FN, "tensor:T op:i=0") {
    return pm_none_or_raise(musa_dist_all_reduce(a[0].t, (musa_reduce_op)a[1].i));
}
DEF(_dist_broadcast, PM_FN, "tensor:T src:i=0") {
    if (a[1].i < INT32_MIN || a[1].i > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "[broadcast] src %lld is not a rank", (long long)a[1].i);
        return NULL;
    }
    return pm_none_or_raise(musa_dist_broadcast(a[0].t, (int)a[1].i));
}
DEF(_dist_all_gather, PM_FN, "tensor:T") {
    return pm_ret(musa_dist_all_gather(a[0].t));
}
DEF(_dist_reduce_scatter, PM_FN, "tensor:T op:i=0") {
    return pm_ret(musa_dist_reduce_scatter(a[0].t, (musa_reduce_op)a[1].i));
}
DEF(_dist_all_reduce_start, PM_FN, "tensors:L op:i=0") {
    return pm_ret(musa_dist_all_reduce_start(a[0].n, a[0].list, (musa_reduce_op)a[1].i));
}
DEF(_dist_all_reduce_wait, PM_FN, "flat:T op:i=0") {
    return pm_ret(musa_dist_all_reduce_wait(a[0].t, (musa_reduce_op)a[1].i));
}
DEF(_dist_progress, PM_FN, "") {
    musa_dist_progress();
    Py_RETURN_NONE;
}
