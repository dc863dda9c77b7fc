/*
 * capture.c - what Python code calls to steer a running capture on this
 * thread (musa/_capture.py, musa/jit/): meta tensors for symbolic capture,
 * pausing and resuming the recording, voiding it, and asking whether one
 * runs. The Graph and Plan types are in jit.c.
 */
#include "pymusa.h"

/* A meta tensor (no storage) of a dtype and shape, for symbolic capture. */
DEF(_empty_meta, PM_FN, "dtype:d shape:I") {
    if (a[0].dtype < 0) {
        PyErr_SetString(PyExc_TypeError, "[_empty_meta] a dtype is required");
        return NULL;
    }
    return pm_ret(musa_empty_meta((musa_dtype)a[0].dtype, a[1].n, a[1].v));
}

/* Pause and resume this thread's capture: tensors made while paused are
 * outside the graph (bound by reference when used), e.g. optimizer state
 * that must outlive one run. */
static _Thread_local musa_graph *paused;

DEF(_jit_pause, PM_FN, "") {
    (void)a;
    musa_graph *g = musa_graph_recording();
    if (!g || paused) Py_RETURN_FALSE;
    musa_graph_capture_end(g); /* a void capture stays void; its error shows at the end */
    musa_clear_error();
    paused = g;
    Py_RETURN_TRUE;
}

DEF(_jit_resume, PM_FN, "") {
    (void)a;
    musa_graph *g = paused;
    paused = NULL;
    if (g && musa_graph_capture_resume(g, musa_graph_capture_mode(g))) return pm_raise();
    Py_RETURN_NONE;
}

/* Void the running capture (something that cannot be recorded ran). */
DEF(_jit_refuse, PM_FN, "why:O") {
    musa_graph *g = musa_graph_recording();
    const char *why = PyUnicode_AsUTF8(a[0].o);
    if (!why) return NULL;
    if (g) musa_graph_refuse(g, why);
    Py_RETURN_NONE;
}

/* Whether this thread is capturing (ops are recorded). */
DEF(_jit_capturing, PM_FN, "") {
    (void)a;
    return PyBool_FromLong(musa_graph_recording() != NULL);
}
