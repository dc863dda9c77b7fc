/*
 * file.c - the .musa container for Python: save a list of tensors with
 * JSON header members, open a file into (kind, header text, tensors). The
 * container, its validation and its atomic save are the C library's
 * (musa_file_*); musa.save/musa.load and the compiled models' save build
 * their header members in Python on top of these two calls.
 */
#include "pymusa.h"

/* A path (str, bytes or os.PathLike) as bytes (new reference), or NULL. */
static PyObject *fs_path(PyObject *o) {
    PyObject *b = NULL;
    if (!PyUnicode_FSConverter(o, &b)) return NULL;
    return b;
}

DEF(_file_save, PM_FN, "path:O kind:O tensors:O sections:O") {
    const char *kind = PyUnicode_Check(a[1].o) ? PyUnicode_AsUTF8(a[1].o) : NULL;
    if (!kind) {
        if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "[%s] kind must be a str", who);
        return NULL;
    }
    if (!PyDict_Check(a[3].o)) {
        PyErr_Format(PyExc_TypeError, "[%s] sections must be a dict of str to JSON text", who);
        return NULL;
    }
    PyObject *path = fs_path(a[0].o);
    if (!path) return NULL;
    musa_tensor **ts = NULL;
    int n = 0, rc = 0;
    musa_file_writer *w = NULL;
    if (pm_tensor_list(a[2].o, who, "tensors", false, -1, &ts, &n)) goto fail;
    if (!(w = musa_file_writer_new(kind))) goto raise;
    for (int i = 0; i < n; i++)
        if (musa_file_writer_add_tensor(w, ts[i]) != i) {
            if (musa_last_error_code() == MUSA_OK)
                PyErr_Format(PyExc_ValueError, "[%s] tensor %d is listed twice", who, i);
            else
                pm_raise();
            goto fail;
        }
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(a[3].o, &pos, &k, &v)) {
        const char *key = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : NULL;
        const char *json = PyUnicode_Check(v) ? PyUnicode_AsUTF8(v) : NULL;
        if (!key || !json) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "[%s] sections must map str to JSON text (str)",
                             who);
            goto fail;
        }
        if (musa_file_writer_set_json(w, key, json)) goto raise;
    }
    Py_BEGIN_ALLOW_THREADS rc = musa_file_writer_save(w, PyBytes_AS_STRING(path));
    Py_END_ALLOW_THREADS if (rc) goto raise;
    musa_file_writer_free(w);
    pm_tensor_list_free(ts);
    Py_DECREF(path);
    Py_RETURN_NONE;
raise:
    pm_raise();
fail:
    musa_file_writer_free(w);
    pm_tensor_list_free(ts);
    Py_DECREF(path);
    return NULL;
}

/* (kind, header text, tuple of tensors) of an open file, which is closed. */
static PyObject *contents(musa_file *f) {
    if (!f) return pm_raise();
    int64_t n = musa_file_num_tensors(f);
    PyObject *ts = PyTuple_New((Py_ssize_t)n);
    for (int64_t i = 0; ts && i < n; i++) {
        PyObject *t = pm_wrap(musa_file_tensor(f, i));
        if (!t) Py_CLEAR(ts);
        if (ts) PyTuple_SET_ITEM(ts, (Py_ssize_t)i, t);
    }
    PyObject *r = ts ? Py_BuildValue("(ssN)", musa_file_kind(f), musa_file_header(f), ts) : NULL;
    musa_file_close(f);
    return r;
}

DEF(_file_load, PM_FN, "path:O mmap:b=False") {
    PyObject *path = fs_path(a[0].o);
    if (!path) return NULL;
    musa_file *f;
    Py_BEGIN_ALLOW_THREADS f = musa_file_open(PyBytes_AS_STRING(path), a[1].b ? MUSA_FILE_MMAP : 0);
    Py_END_ALLOW_THREADS Py_DECREF(path);
    return contents(f);
}

DEF(_file_load_bytes, PM_FN, "data:O") {
    Py_buffer view;
    if (PyObject_GetBuffer(a[0].o, &view, PyBUF_SIMPLE)) return NULL;
    musa_file *f = musa_file_open_memory(view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return contents(f);
}
