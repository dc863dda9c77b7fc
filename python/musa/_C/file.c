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
                PyErr_Format(PyExc_TypeError, "[%s] sections must map str to JSON text (str)", who);
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

/* ---- saved models ---- */

static const char *MODEL = "musa.model";

static void model_free(PyObject *cap) {
    musa_model_free(PyCapsule_GetPointer(cap, MODEL));
}

static musa_model *model_of(PyObject *o, const char *who) {
    musa_model *m = PyCapsule_IsValid(o, MODEL) ? PyCapsule_GetPointer(o, MODEL) : NULL;
    if (!m) PyErr_Format(PyExc_TypeError, "[%s] expected a loaded model", who);
    return m;
}

static PyObject *model_wrap(musa_model *m) {
    if (!m) return pm_raise();
    PyObject *cap = PyCapsule_New(m, MODEL, model_free);
    if (!cap) musa_model_free(m);
    return cap;
}

/* _model_save(graph, path, options, slopes, python_json): options a dict
 * (fusion_level, disabled, memory_arena, num_threads, channels_last, fuse_attention, winograd),
 * slopes a list
 * of (node, field, values, slope). */
DEF(_model_save, PM_FN, "graph:O path:O options:O slopes:O python:O") {
    musa_graph *g = pm_graph(a[0].o, who);
    if (!g) return NULL;
    musa_model_save_options o = {.fusion_level = 2, .memory_arena = true};
    PyObject *opts = a[2].o, *v;
    if (!PyDict_Check(opts))
        return PyErr_Format(PyExc_TypeError, "[%s] options must be a dict", who);
    if ((v = PyDict_GetItemString(opts, "fusion_level"))) o.fusion_level = (int)PyLong_AsLong(v);
    if ((v = PyDict_GetItemString(opts, "num_threads"))) o.num_threads = (int)PyLong_AsLong(v);
    if ((v = PyDict_GetItemString(opts, "memory_arena"))) o.memory_arena = PyObject_IsTrue(v) == 1;
    if ((v = PyDict_GetItemString(opts, "channels_last")))
        o.channels_last = PyObject_IsTrue(v) == 1;
    if ((v = PyDict_GetItemString(opts, "fuse_attention")))
        o.fuse_attention = PyObject_IsTrue(v) == 1;
    if ((v = PyDict_GetItemString(opts, "winograd"))) o.winograd = PyObject_IsTrue(v) == 1;
    if ((v = PyDict_GetItemString(opts, "disabled")) && v != Py_None &&
        !(o.disabled = PyUnicode_AsUTF8(v)))
        return NULL;
    if (PyErr_Occurred()) return NULL;
    PyObject *sl = PySequence_Fast(a[3].o, "slopes must be a list");
    if (!sl) return NULL;
    Py_ssize_t ns = PySequence_Fast_GET_SIZE(sl);
    musa_attr_slope *slopes = PyMem_Calloc((size_t)ns + 1, sizeof *slopes);
    if (!slopes) {
        Py_DECREF(sl);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < ns; i++) {
        PyObject *vals, *dv;
        int n1 = 0, n2 = 0;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(sl, i), "isOO", &slopes[i].node,
                              &slopes[i].field, &vals, &dv) ||
            pm_int_list(vals, slopes[i].values, MUSA_MAX_ATTR_INTS, &n1, who, "slope values") ||
            pm_int_list(dv, slopes[i].slope, MUSA_MAX_ATTR_INTS, &n2, who, "slope")) {
            PyMem_Free(slopes);
            Py_DECREF(sl);
            return NULL;
        }
        slopes[i].n = n1 < n2 ? n1 : n2;
    }
    o.n_slopes = (int)ns, o.slopes = slopes;
    o.extra_key = "python";
    o.extra_json = PyUnicode_Check(a[4].o) ? PyUnicode_AsUTF8(a[4].o) : "null";
    PyObject *path = o.extra_json ? fs_path(a[1].o) : NULL;
    int rc = path ? musa_model_save(g, PyBytes_AS_STRING(path), &o) : -1;
    Py_XDECREF(path);
    PyMem_Free(slopes);
    Py_DECREF(sl);
    if (!path) return NULL;
    return pm_none_or_raise(rc);
}

DEF(_model_load, PM_FN, "path:O mmap:b=False") {
    PyObject *path = fs_path(a[0].o);
    if (!path) return NULL;
    musa_model *m;
    Py_BEGIN_ALLOW_THREADS m =
        musa_model_load(PyBytes_AS_STRING(path), a[1].b ? MUSA_FILE_MMAP : 0);
    Py_END_ALLOW_THREADS Py_DECREF(path);
    return model_wrap(m);
}

DEF(_model_load_bytes, PM_FN, "data:O") {
    Py_buffer view;
    if (PyObject_GetBuffer(a[0].o, &view, PyBUF_SIMPLE)) return NULL;
    musa_model *m = musa_model_load_memory(view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return model_wrap(m);
}

DEF(_model_run, PM_FN, "model:O inputs:O") {
    musa_model *m = model_of(a[0].o, who);
    if (!m) return NULL;
    musa_tensor **ts = NULL;
    int n = 0;
    if (pm_tensor_list(a[1].o, who, "inputs", false, -1, &ts, &n)) return NULL;
    int no = musa_model_num_outputs(m);
    musa_tensor **outs = PyMem_Calloc((size_t)no + 1, sizeof *outs);
    if (!outs) {
        pm_tensor_list_free(ts);
        return PyErr_NoMemory();
    }
    int rc;
    pm_long_op(true);
    rc = musa_model_run(m, n, ts, no, outs);
    pm_long_op(false);
    pm_tensor_list_free(ts);
    PyObject *r = rc ? pm_raise() : PyList_New(no);
    for (int i = 0; i < no; i++) {
        PyObject *w = r ? pm_wrap(outs[i]) : NULL;
        if (!r) musa_tensor_release(outs[i]);
        if (r && !w) Py_CLEAR(r);
        if (r) PyList_SET_ITEM(r, i, w);
    }
    PyMem_Free(outs);
    return r;
}

DEF(_onnx_ops, PM_FN, "") {
    (void)a, (void)who;
    PyObject *r = PyList_New(0);
    for (int i = 0; r && musa_onnx_op(i); i++) {
        PyObject *s = PyUnicode_FromString(musa_onnx_op(i));
        if (!s || PyList_Append(r, s)) Py_CLEAR(r);
        Py_XDECREF(s);
    }
    return r;
}

DEF(_model_header, PM_FN, "model:O") {
    musa_model *m = model_of(a[0].o, who);
    return m ? PyUnicode_FromString(musa_model_header(m)) : NULL;
}

DEF(_model_input_names, PM_FN, "model:O") {
    musa_model *m = model_of(a[0].o, who);
    if (!m) return NULL;
    int n = musa_model_num_inputs(m);
    PyObject *r = PyList_New(n);
    for (int i = 0; r && i < n; i++) {
        const char *name = NULL;
        musa_model_input(m, i, &name, NULL, NULL, NULL, NULL, NULL);
        PyObject *s = name ? PyUnicode_FromString(name) : Py_NewRef(Py_None);
        if (!s)
            Py_CLEAR(r);
        else
            PyList_SET_ITEM(r, i, s);
    }
    return r;
}

/* _model_save_graph(model, path): the model's graph (an ONNX model's, as
 * captured for its last new input signature) saved as a .musa model */
DEF(_model_save_graph, PM_FN, "model:O path:O") {
    musa_model *m = model_of(a[0].o, who);
    if (!m) return NULL;
    if (!musa_model_graph(m))
        return PyErr_Format(PyExc_RuntimeError,
                            "[onnx] call the model once (with inputs of the shapes to deploy) "
                            "before save()");
    PyObject *path = fs_path(a[1].o);
    if (!path) return NULL;
    int rc = musa_model_save(musa_model_graph(m), PyBytes_AS_STRING(path), NULL);
    Py_DECREF(path);
    return pm_none_or_raise(rc);
}

DEF(_model_graph_text, PM_FN, "model:O") {
    musa_model *m = model_of(a[0].o, who);
    if (!m) return NULL;
    char *s = musa_graph_text(musa_model_graph(m));
    if (!s) return pm_raise();
    PyObject *r = PyUnicode_FromString(s);
    free(s);
    return r;
}
