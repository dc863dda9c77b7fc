/*
 * profiler.c - the C profiler (musa_profiler_* in musa.h) for musa.profiler:
 * start and stop, the last session's events as tuples, the Chrome trace
 * writer, and user ranges. The tables and the context managers are
 * Python (python/musa/profiler.py).
 */
#include "pymusa.h"

DEF(_profiler_start, PM_FN, "flags:i") {
    return pm_none_or_raise(musa_profiler_start((int)a[0].i));
}

DEF(_profiler_stop, PM_FN, "") {
    return pm_none_or_raise(musa_profiler_stop());
}

DEF(_profiler_enabled, PM_FN, "") {
    return PyBool_FromLong(musa_profiler_enabled());
}

/* [(name, detail, kind, tid, start_ns, dur_ns, bytes, total_bytes, location)] */
DEF(_profiler_events, PM_FN, "") {
    int64_t n = musa_profiler_num_events();
    if (n < 0) {
        PyErr_Format(PyExc_RuntimeError, "[%s] stop the profiler before reading its events", who);
        return NULL;
    }
    PyObject *list = PyList_New((Py_ssize_t)n);
    if (!list) return NULL;
    for (int64_t i = 0; i < n; i++) {
        musa_profile_event e;
        if (musa_profiler_get_event(i, &e)) {
            Py_DECREF(list);
            return pm_raise();
        }
        PyObject *t = Py_BuildValue("(ssiiLLLLs)", e.name, e.detail, e.kind, e.tid,
                                    (long long)e.start_ns, (long long)e.dur_ns, (long long)e.bytes,
                                    (long long)e.total_bytes, e.location);
        if (!t) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    return list;
}

DEF(_profiler_write_chrome_trace, PM_FN, "path:O") {
    PyObject *path = NULL;
    if (!PyUnicode_FSConverter(a[0].o, &path)) return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = musa_profiler_write_chrome_trace(PyBytes_AS_STRING(path));
    Py_END_ALLOW_THREADS Py_DECREF(path);
    return pm_none_or_raise(rc);
}

DEF(_range_begin, PM_FN, "") {
    return PyLong_FromLongLong((long long)musa_profiler_range_begin());
}

DEF(_range_end, PM_FN, "name:O begin:i") {
    const char *name = PyUnicode_Check(a[0].o) ? PyUnicode_AsUTF8(a[0].o) : NULL;
    if (!name) {
        if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "[%s] name must be a str", who);
        return NULL;
    }
    musa_profiler_range_end(name, a[1].i);
    Py_RETURN_NONE;
}
