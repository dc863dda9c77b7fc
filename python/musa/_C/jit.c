/*
 * jit.c - the static graph for Python: the Graph object over the C API
 * (musa_graph_*; its compiled Plan is jit_plan.c), the host-read
 * notifications the Tensor type sends while a capture runs, and the hook
 * giving recorded nodes the user's file:line. The capture logic (guards,
 * segments, caches) is Python: musa/jit/.
 */
#include "pymusa.h"

#include <string.h>

/* ---- the user's line ---- */

static PyObject *loc_cache;   /* str -> str: interned "file:line" strings */
static char pkg_prefix[1024]; /* frames under this directory are musa's own */
static size_t pkg_prefix_len;

const char *pm_user_location(void) {
    if (!PyGILState_Check()) return NULL;
    PyFrameObject *f = PyEval_GetFrame();
    if (!f) return NULL;
    Py_INCREF(f);
    const char *res = NULL;
    while (f) {
        PyCodeObject *co = PyFrame_GetCode(f);
        const char *file = co ? PyUnicode_AsUTF8(co->co_filename) : NULL;
        if (file && !(pkg_prefix_len && !strncmp(file, pkg_prefix, pkg_prefix_len))) {
            const char *base = strrchr(file, '/');
            PyObject *key =
                PyUnicode_FromFormat("%s:%d", base ? base + 1 : file, PyFrame_GetLineNumber(f));
            Py_XDECREF(co);
            if (!key) break;
            PyObject *have = PyDict_GetItemWithError(loc_cache, key);
            if (!have && !PyErr_Occurred() && !PyDict_SetItem(loc_cache, key, key)) have = key;
            if (have) res = PyUnicode_AsUTF8(have);
            Py_DECREF(key);
            break;
        }
        Py_XDECREF(co);
        PyFrameObject *back = PyFrame_GetBack(f);
        Py_DECREF(f);
        f = back;
    }
    Py_XDECREF(f);
    if (PyErr_Occurred()) PyErr_Clear();
    return res;
}

/* Called by the Tensor type before it hands a value to Python. */
void pm_host_read(musa_tensor *t, int kind, double value) {
    musa_graph *g = musa_graph_recording();
    if (g) musa_graph_host_read(g, t, kind, value);
}

/* ---- Graph ---- */

/* Named results (struct sequences: tuples with field names), defined below. */
static PyTypeObject *ValueInfo_Type, *NodeInfo_Type, *GraphValue_Type, *GraphBreak_Type;

typedef struct {
    PyObject_HEAD musa_graph *g;
} PyGraph;

static PyTypeObject *Graph_Type;

static PyObject *graph_wrap(musa_graph *g) {
    if (!g) return pm_raise();
    PyGraph *o = PyObject_New(PyGraph, Graph_Type);
    if (!o) {
        musa_graph_free(g);
        return NULL;
    }
    o->g = g;
    return (PyObject *)o;
}

static PyObject *graph_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    (void)type, (void)args, (void)kw;
    return graph_wrap(musa_graph_new());
}

static void graph_dealloc(PyObject *self) {
    PyTypeObject *tp = Py_TYPE(self);
    musa_graph *g = ((PyGraph *)self)->g;
    if (g && musa_graph_recording() == g) musa_graph_capture_end(g);
    musa_graph_free(g);
    PyObject_Free(self);
    Py_DECREF(tp);
}

#define G(self) (((PyGraph *)(self))->g)

musa_graph *pm_graph(PyObject *o, const char *who) {
    if (!PyObject_TypeCheck(o, Graph_Type)) {
        PyErr_Format(PyExc_TypeError, "[%s] expected a musa._C.Graph, got %s", who,
                     Py_TYPE(o)->tp_name);
        return NULL;
    }
    return G(o);
}

static PyObject *graph_capture_begin(PyObject *self, PyObject *arg) {
    const char *mode = PyUnicode_AsUTF8(arg);
    if (!mode) return NULL;
    int m = !strcmp(mode, "trace")      ? MUSA_CAPTURE_TRACE
            : !strcmp(mode, "symbolic") ? MUSA_CAPTURE_SYMBOLIC
                                        : 0;
    if (!m) {
        PyErr_Format(PyExc_ValueError,
                     "[Graph.capture_begin] capture mode must be 'trace' or 'symbolic', got '%s'",
                     mode);
        return NULL;
    }
    return pm_none_or_raise(musa_graph_capture_begin(G(self), m));
}

static PyObject *graph_capture_end(PyObject *self, PyObject *u) {
    (void)u;
    return pm_none_or_raise(musa_graph_capture_end(G(self)));
}

static PyObject *graph_restore_grads(PyObject *self, PyObject *u) {
    (void)u;
    return pm_none_or_raise(musa_graph_restore_grads(G(self)));
}

static PyObject *graph_add_input(PyObject *self, PyObject *args) {
    PyObject *t;
    const char *name = NULL;
    if (!PyArg_ParseTuple(args, "O|z", &t, &name)) return NULL;
    if (!pm_is_tensor(t)) {
        PyErr_SetString(PyExc_TypeError, "[Graph.add_input] expected a Tensor");
        return NULL;
    }
    return pm_none_or_raise(musa_graph_add_input(G(self), pm_t(t), name));
}

static PyObject *graph_set_outputs(PyObject *self, PyObject *arg) {
    musa_tensor **ts = NULL;
    int n = 0;
    if (pm_tensor_list(arg, "Graph.set_outputs", "outputs", false, -1, &ts, &n)) return NULL;
    int rc = musa_graph_set_outputs(G(self), n, ts);
    pm_tensor_list_free(ts);
    return pm_none_or_raise(rc);
}

static PyObject *graph_value_of(PyObject *self, PyObject *arg) {
    if (!pm_is_tensor(arg)) {
        PyErr_SetString(PyExc_TypeError, "[Graph.value_of] expected a Tensor");
        return NULL;
    }
    return PyLong_FromLong(musa_graph_value_of(G(self), pm_t(arg)));
}

PyObject *pm_str_result(char *s) {
    if (!s) return pm_raise();
    PyObject *r = PyUnicode_FromString(s);
    free(s);
    return r;
}

static PyObject *graph_text(PyObject *self, PyObject *u) {
    (void)u;
    return pm_str_result(musa_graph_text(G(self)));
}

static PyObject *graph_json(PyObject *self, PyObject *u) {
    (void)u;
    return pm_str_result(musa_graph_json(G(self)));
}

static PyObject *graph_verify(PyObject *self, PyObject *u) {
    (void)u;
    return pm_none_or_raise(musa_graph_verify(G(self)));
}

static int pass_ctx(PyObject *args, PyObject *kw, musa_pass_ctx *ctx, const char **name) {
    static char *kwlist_opt[] = {"fusion_level",  "disabled",       "verify",   "remat_budget",
                                 "channels_last", "fuse_attention", "winograd", NULL};
    static char *kwlist_pass[] = {"name", "fusion_level", "verify", "fuse_attention", NULL};
    int verify = 0, fuse = 0;
    memset(ctx, 0, sizeof *ctx);
    ctx->fusion_level = 2;
    if (name)
        return PyArg_ParseTupleAndKeywords(args, kw, "s|ipp", kwlist_pass, name, &ctx->fusion_level,
                                           &verify, &fuse)
                   ? (ctx->verify = verify, ctx->fuse_attention = fuse, 0)
                   : -1;
    long long budget = 0;
    int channels_last = 0, fuse_attention = 0, winograd = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|izpLppp", kwlist_opt, &ctx->fusion_level,
                                     &ctx->disabled, &verify, &budget, &channels_last,
                                     &fuse_attention, &winograd))
        return -1;
    ctx->channels_last = channels_last;
    ctx->fuse_attention = fuse_attention;
    ctx->winograd = winograd;
    if (budget < 0) {
        PyErr_Format(PyExc_ValueError, "[jit] optimize: remat_budget must be >= 0, got %lld",
                     budget);
        return -1;
    }
    ctx->remat_budget = budget;
    ctx->verify = verify;
    return 0;
}

static PyObject *graph_optimize(PyObject *self, PyObject *args, PyObject *kw) {
    musa_pass_ctx ctx;
    if (pass_ctx(args, kw, &ctx, NULL)) return NULL;
    if (musa_graph_optimize(G(self), &ctx)) return pm_raise();
    return PyLong_FromLong(ctx.changes);
}

static PyObject *graph_run_pass(PyObject *self, PyObject *args, PyObject *kw) {
    musa_pass_ctx ctx;
    const char *name;
    if (pass_ctx(args, kw, &ctx, &name)) return NULL;
    if (musa_graph_run_pass(G(self), name, &ctx)) return pm_raise();
    return PyLong_FromLong(ctx.changes);
}

static PyObject *graph_compile(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"num_threads",    "memory_arena",  "poison",
                             "loaned_outputs", "winograd_room", NULL};
    musa_plan_options o = {.num_threads = 0, .memory_arena = true, .poison = false};
    int arena = 1, poison = 0;
    Py_ssize_t room = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|ippin", kwlist, &o.num_threads, &arena, &poison,
                                     &o.loaned_outputs, &room))
        return NULL;
    if (room < 0)
        return PyErr_Format(PyExc_ValueError, "[jit] compile: winograd_room must be >= 0, got %zd",
                            room);
    o.memory_arena = arena, o.poison = poison, o.winograd_room = (size_t)room;
    musa_plan *p = musa_plan_build(G(self), &o);
    return p ? pm_plan_wrap(p, self, G(self)) : pm_raise();
}

/* [GraphBreak] of the host reads, in order; a new list. */
static PyObject *graph_breaks(PyObject *self, PyObject *u) {
    (void)u;
    musa_graph *g = G(self);
    int n = musa_graph_num_breaks(g);
    PyObject *r = PyList_New(n);
    for (int i = 0; r && i < n; i++) {
        int v, at, kind;
        double outcome;
        const char *loc;
        musa_graph_break(g, i, &v, &at, &kind, &outcome, &loc);
        PyObject *e = PyStructSequence_New(GraphBreak_Type);
        PyObject *f[5] = {PyLong_FromLong(v), PyLong_FromLong(at),
                          PyUnicode_FromString(kind == MUSA_READ_BOOL ? "bool" : "scalar"),
                          PyFloat_FromDouble(outcome),
                          loc ? PyUnicode_FromString(loc) : Py_NewRef(Py_None)};
        int ok = e != NULL;
        for (int k = 0; k < 5; k++) {
            if (!f[k]) ok = 0;
            if (ok)
                PyStructSequence_SET_ITEM(e, k, f[k]);
            else
                Py_XDECREF(f[k]);
        }
        if (!ok) {
            Py_XDECREF(e);
            Py_CLEAR(r);
        } else {
            PyList_SET_ITEM(r, i, e);
        }
    }
    return r;
}

static PyObject *graph_ops(PyObject *self, PyObject *u) {
    (void)u;
    musa_graph *g = G(self);
    PyObject *r = PyList_New(0);
    for (int i = 0; r && i < musa_graph_num_nodes(g); i++) {
        const char *op = musa_graph_node_op(g, i);
        if (!op) continue;
        PyObject *e = Py_BuildValue("(si)", op, musa_graph_node_group(g, i));
        if (!e || PyList_Append(r, e)) Py_CLEAR(r);
        Py_XDECREF(e);
    }
    return r;
}

/* Value ids from a sequence into a new PyMem array; errors read "[who] what ...". */
static int int_list(PyObject *o, int **out, Py_ssize_t *n, const char *who, const char *what) {
    char msg[96];
    snprintf(msg, sizeof msg, "[%s] %s must be a sequence of value ids", who, what);
    PyObject *seq = PySequence_Fast(o, msg);
    if (!seq) return -1;
    *n = PySequence_Fast_GET_SIZE(seq);
    *out = PyMem_Malloc(sizeof(int) * (size_t)(*n ? *n : 1));
    if (!*out) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < *n; i++) {
        (*out)[i] = (int)PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
        if (PyErr_Occurred()) {
            PyMem_Free(*out), Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);
    return 0;
}

static PyObject *graph_autodiff(PyObject *self, PyObject *args) {
    PyObject *po, *pg, *pw;
    if (!PyArg_ParseTuple(args, "OOO", &po, &pg, &pw)) return NULL;
    int *outs = NULL, *gouts = NULL, *wrt = NULL, *grads = NULL;
    Py_ssize_t no = 0, ng = 0, nw = 0;
    PyObject *r = NULL;
    if (int_list(po, &outs, &no, "Graph.autodiff", "outputs") ||
        int_list(pg, &gouts, &ng, "Graph.autodiff", "gradients") ||
        int_list(pw, &wrt, &nw, "Graph.autodiff", "wrt"))
        goto done;
    if (no != ng) {
        PyErr_SetString(PyExc_ValueError, "[Graph.autodiff] one gradient per output");
        goto done;
    }
    if (!(grads = PyMem_Malloc(sizeof(int) * (size_t)(nw ? nw : 1)))) {
        PyErr_NoMemory();
        goto done;
    }
    if (musa_graph_autodiff(G(self), (int)no, outs, gouts, (int)nw, wrt, grads)) {
        pm_raise();
        goto done;
    }
    r = PyList_New(nw);
    for (Py_ssize_t i = 0; r && i < nw; i++) PyList_SET_ITEM(r, i, PyLong_FromLong(grads[i]));
done:
    PyMem_Free(outs), PyMem_Free(gouts), PyMem_Free(wrt), PyMem_Free(grads);
    return r;
}

static PyObject *graph_run_eager(PyObject *self, PyObject *args) {
    PyObject *pin, *pv;
    if (!PyArg_ParseTuple(args, "OO", &pin, &pv)) return NULL;
    musa_tensor **ts = NULL;
    int n = 0, *vals = NULL;
    Py_ssize_t nv = 0;
    if (pm_tensor_list(pin, "Graph.run_eager", "inputs", false, -1, &ts, &n)) return NULL;
    if (int_list(pv, &vals, &nv, "Graph.run_eager", "values")) {
        pm_tensor_list_free(ts);
        return NULL;
    }
    musa_tensor **outs = PyMem_Calloc((size_t)(nv ? nv : 1), sizeof *outs);
    PyObject *r = NULL;
    if (!outs) {
        PyErr_NoMemory();
    } else if (musa_graph_run_eager(G(self), n, ts, (int)nv, vals, outs)) {
        pm_raise();
    } else {
        r = PyList_New(nv);
        for (Py_ssize_t i = 0; i < nv; i++) {
            PyObject *w = r ? pm_wrap(outs[i]) : NULL;
            if (!r) musa_tensor_release(outs[i]);
            if (r && !w) Py_CLEAR(r);
            if (r) PyList_SET_ITEM(r, i, w);
        }
    }
    PyMem_Free(outs), PyMem_Free(vals);
    pm_tensor_list_free(ts);
    return r;
}

static PyObject *graph_add_symbol(PyObject *self, PyObject *args) {
    const char *name;
    long long lo, hi, traced;
    if (!PyArg_ParseTuple(args, "sLLL", &name, &lo, &hi, &traced)) return NULL;
    int r = musa_graph_add_symbol(G(self), name, lo, hi, traced);
    return r < 0 ? pm_raise() : PyLong_FromLong(r);
}

static PyObject *graph_set_symbolic(PyObject *self, PyObject *args) {
    int v, d, sym;
    if (!PyArg_ParseTuple(args, "iii", &v, &d, &sym)) return NULL;
    return pm_none_or_raise(musa_graph_set_symbolic(G(self), v, d, sym));
}

static PyObject *graph_new_input(PyObject *self, PyObject *args) {
    int like;
    const char *name = NULL;
    if (!PyArg_ParseTuple(args, "i|z", &like, &name)) return NULL;
    int id = musa_graph_new_input(G(self), like, name);
    return id < 0 ? pm_raise() : PyLong_FromLong(id);
}

static PyObject *graph_segment(PyObject *self, PyObject *args) {
    int begin, end, mutations = -1, n_inputs = -1, remat = 0;
    PyObject *outs;
    if (!PyArg_ParseTuple(args, "iiO|pip", &begin, &end, &outs, &mutations, &n_inputs, &remat))
        return NULL;
    if (mutations < 0) mutations = end == musa_graph_num_nodes(G(self));
    musa_segment_options opt = {.mutations = mutations, .n_inputs = n_inputs, .remat = remat};
    int *ids = NULL;
    Py_ssize_t n = 0;
    if (int_list(outs, &ids, &n, "Graph.segment", "outputs")) return NULL;
    int *carried = NULL, nc = 0;
    musa_graph *s = musa_graph_segment(G(self), begin, end, (int)n, ids, &opt, &carried, &nc);
    PyMem_Free(ids);
    if (!s) return pm_raise();
    PyObject *gs = graph_wrap(s), *cl = PyList_New(nc);
    for (int i = 0; cl && i < nc; i++) PyList_SET_ITEM(cl, i, PyLong_FromLong(carried[i]));
    free(carried);
    if (!gs || !cl) {
        Py_XDECREF(gs), Py_XDECREF(cl);
        return NULL;
    }
    return Py_BuildValue("(NN)", gs, cl);
}

static PyObject *graph_fingerprint(PyObject *self, PyObject *args) {
    int begin, end;
    if (!PyArg_ParseTuple(args, "ii", &begin, &end)) return NULL;
    return PyLong_FromUnsignedLongLong(musa_graph_fingerprint(G(self), begin, end));
}

static PyObject *graph_value(PyObject *self, PyObject *arg) {
    int v = (int)PyLong_AsLong(arg);
    if (PyErr_Occurred()) return NULL;
    musa_graph *g = G(self);
    int kind = musa_graph_value_kind(g, v);
    if (kind < 0) {
        PyErr_Format(PyExc_IndexError, "[Graph.value] graph has no value %%%d", v);
        return NULL;
    }
    musa_tensor *t = musa_graph_value_tensor(g, v);
    PyObject *to = t ? pm_wrap(musa_tensor_retain(t)) : Py_NewRef(Py_None);
    if (!to) return NULL;
    static const char *kinds[] = {"node", "input", "param", "const"};
    PyObject *k = PyUnicode_FromString(kinds[kind]);
    PyObject *prod = PyLong_FromLong(musa_graph_value_producer(g, v));
    PyObject *r = k && prod ? PyStructSequence_New(GraphValue_Type) : NULL;
    if (!r) {
        Py_XDECREF(k), Py_XDECREF(prod), Py_DECREF(to);
        return NULL;
    }
    PyStructSequence_SET_ITEM(r, 0, k);
    PyStructSequence_SET_ITEM(r, 1, prod);
    PyStructSequence_SET_ITEM(r, 2, to);
    return r;
}

/* The fields of value_info, node_info, value and breaks. */
static PyStructSequence_Field value_info_fields[] = {
    {"kind", "'node', 'input', 'param' or 'const'"},
    {"dtype", "a musa.dtype"},
    {"shape", "tuple of ints"},
    {"symbols", "per dim: the name of the dynamic dim it follows, or None"},
    {"name", "an input's name, or None"},
    {NULL, NULL},
};
static PyStructSequence_Desc value_info_desc = {
    "musa._C.ValueInfo", "A graph value: kind, dtype, shape, symbols, name.", value_info_fields, 5};

static PyStructSequence_Field node_info_fields[] = {
    {"op", "the op's name"},
    {"inputs", "tuple of input value ids"},
    {"outputs", "tuple of output value ids"},
    {"loc", "the user's 'file:line' where it was recorded, or None"},
    {"attrs", "dict: attribute name -> bool, int, float, list of ints or musa.dtype"},
    {"group", "fusion group, or -1"},
    {NULL, NULL},
};
static PyStructSequence_Desc node_info_desc = {
    "musa._C.NodeInfo", "A live graph node: op, inputs, outputs, loc, attrs, group.",
    node_info_fields, 6};

static PyStructSequence_Field graph_value_fields[] = {
    {"kind", "'node', 'input', 'param' or 'const'"},
    {"producer", "the node that computes it, or -1"},
    {"tensor", "a parameter's or constant's tensor (bound by reference), or None"},
    {NULL, NULL},
};
static PyStructSequence_Desc graph_value_desc = {
    "musa._C.GraphValue", "Where a graph value comes from: kind, producer, tensor.",
    graph_value_fields, 3};

static PyStructSequence_Field graph_break_fields[] = {
    {"value", "the value id read on the host"},
    {"at_node", "nodes recorded before the read: the graph is cut there"},
    {"kind", "'bool' (bool(t), if t: two outcomes) or 'scalar' (item(), float(): the value)"},
    {"outcome", "the value read while capturing, as a float (0.0 or 1.0 for 'bool')"},
    {"loc", "the user's 'file:line' of the read, or None"},
    {NULL, NULL},
};
static PyStructSequence_Desc graph_break_desc = {
    "musa._C.GraphBreak", "A host read that cut the capture: value, at_node, kind, outcome, loc.",
    graph_break_fields, 5};

static PyObject *graph_value_info(PyObject *self, PyObject *arg) {
    int v;
    if (!PyArg_Parse(arg, "i", &v)) return NULL;
    musa_graph *g = G(self);
    int64_t dims[MUSA_MAX_DIMS];
    int syms[MUSA_MAX_DIMS];
    int dtype = musa_graph_value_dtype(g, v);
    int ndim = dtype < 0 ? dtype : musa_graph_value_shape(g, v, dims, syms);
    if (ndim < 0) return pm_raise();
    static const char *kinds[] = {"node", "input", "param", "const"};
    const char *name = musa_graph_value_name(g, v);
    PyObject *r = PyStructSequence_New(ValueInfo_Type);
    PyObject *shape = PyTuple_New(ndim), *symbols = PyTuple_New(ndim);
    if (!r || !shape || !symbols) goto fail;
    for (int d = 0; d < ndim; d++) {
        PyObject *n = PyLong_FromLongLong(dims[d]), *y = NULL;
        if (!n) goto fail;
        PyTuple_SET_ITEM(shape, d, n);
        if (syms[d] < 0) {
            y = Py_NewRef(Py_None);
        } else {
            const char *sname = NULL;
            musa_graph_symbol(g, syms[d], &sname, NULL, NULL, NULL);
            if (!(y = PyUnicode_FromString(sname))) goto fail;
        }
        PyTuple_SET_ITEM(symbols, d, y);
    }
    PyObject *k = PyUnicode_FromString(kinds[musa_graph_value_kind(g, v)]);
    PyObject *nm = name ? PyUnicode_FromString(name) : Py_NewRef(Py_None);
    if (!k || !nm) {
        Py_XDECREF(k), Py_XDECREF(nm);
        goto fail;
    }
    PyStructSequence_SET_ITEM(r, 0, k);
    PyStructSequence_SET_ITEM(r, 1, Py_NewRef(pm_dtype_obj((musa_dtype)dtype)));
    PyStructSequence_SET_ITEM(r, 2, shape);
    PyStructSequence_SET_ITEM(r, 3, symbols);
    PyStructSequence_SET_ITEM(r, 4, nm);
    return r;
fail:
    Py_XDECREF(r), Py_XDECREF(shape), Py_XDECREF(symbols);
    return NULL;
}

/* Attribute i of node n as a Python object (new reference), or NULL. */
static PyObject *attr_value(musa_graph *g, int n, const char *name, int type) {
    switch (type) {
    case MUSA_ATTR_TYPE_BOOL: {
        bool b;
        return musa_graph_node_attr_bool(g, n, name, &b) ? pm_raise() : PyBool_FromLong(b);
    }
    case MUSA_ATTR_TYPE_INT: {
        int64_t x;
        return musa_graph_node_attr_int(g, n, name, &x) ? pm_raise() : PyLong_FromLongLong(x);
    }
    case MUSA_ATTR_TYPE_FLOAT: {
        double x;
        return musa_graph_node_attr_float(g, n, name, &x) ? pm_raise() : PyFloat_FromDouble(x);
    }
    case MUSA_ATTR_TYPE_DTYPE: {
        musa_dtype d;
        return musa_graph_node_attr_dtype(g, n, name, &d) ? pm_raise() : Py_NewRef(pm_dtype_obj(d));
    }
    case MUSA_ATTR_TYPE_INTS: {
        int64_t v[MUSA_MAX_ATTR_INTS];
        int k = 0;
        if (musa_graph_node_attr_ints(g, n, name, v, &k)) return pm_raise();
        PyObject *l = PyList_New(k);
        for (int i = 0; l && i < k; i++) {
            PyObject *x = PyLong_FromLongLong(v[i]);
            if (!x)
                Py_CLEAR(l);
            else
                PyList_SET_ITEM(l, i, x);
        }
        return l;
    }
    }
    PyErr_Format(PyExc_RuntimeError, "[Graph.node_info] attribute '%s' has an unknown type %d",
                 name, type);
    return NULL;
}

/* Value ids k in [0, count) of node n, got by `at`, as a tuple. */
static PyObject *id_tuple(musa_graph *g, int n, int count,
                          int (*at)(const musa_graph *, int, int)) {
    if (count < 0) return pm_raise();
    PyObject *t = PyTuple_New(count);
    for (int k = 0; t && k < count; k++) {
        int id = at(g, n, k);
        PyObject *x = id < 0 ? pm_raise() : PyLong_FromLong(id);
        if (!x)
            Py_CLEAR(t);
        else
            PyTuple_SET_ITEM(t, k, x);
    }
    return t;
}

static PyObject *graph_node_info(PyObject *self, PyObject *arg) {
    int n;
    if (!PyArg_Parse(arg, "i", &n)) return NULL;
    musa_graph *g = G(self);
    if (n >= 0 && n < musa_graph_num_nodes(g) && !musa_graph_node_op(g, n))
        Py_RETURN_NONE; /* removed by a pass */
    int na = musa_graph_node_attr_count(g, n);
    if (na < 0) return pm_raise();
    const char *loc = musa_graph_node_loc(g, n);
    PyObject *r = PyStructSequence_New(NodeInfo_Type);
    PyObject *op = PyUnicode_FromString(musa_graph_node_op(g, n));
    PyObject *ins = id_tuple(g, n, musa_graph_node_num_inputs(g, n), musa_graph_node_input);
    PyObject *outs = id_tuple(g, n, musa_graph_node_num_outputs(g, n), musa_graph_node_output);
    PyObject *lo = loc ? PyUnicode_FromString(loc) : Py_NewRef(Py_None);
    PyObject *attrs = PyDict_New();
    PyObject *group = PyLong_FromLong(musa_graph_node_group(g, n));
    if (!r || !op || !ins || !outs || !lo || !attrs || !group) goto fail;
    for (int i = 0; i < na; i++) {
        const char *name;
        int type;
        if (musa_graph_node_attr(g, n, i, &name, &type)) {
            pm_raise();
            goto fail;
        }
        PyObject *x = attr_value(g, n, name, type);
        int bad = !x || PyDict_SetItemString(attrs, name, x);
        Py_XDECREF(x);
        if (bad) goto fail;
    }
    PyStructSequence_SET_ITEM(r, 0, op);
    PyStructSequence_SET_ITEM(r, 1, ins);
    PyStructSequence_SET_ITEM(r, 2, outs);
    PyStructSequence_SET_ITEM(r, 3, lo);
    PyStructSequence_SET_ITEM(r, 4, attrs);
    PyStructSequence_SET_ITEM(r, 5, group);
    return r;
fail:
    Py_XDECREF(r), Py_XDECREF(op), Py_XDECREF(ins), Py_XDECREF(outs), Py_XDECREF(lo);
    Py_XDECREF(attrs), Py_XDECREF(group);
    return NULL;
}

static PyObject *graph_respecialize(PyObject *self, PyObject *args) {
    PyObject *shapes, *over;
    if (!PyArg_ParseTuple(args, "OO", &shapes, &over)) return NULL;
    musa_graph *g = G(self);
    int ni = musa_graph_num_inputs(g);
    if (!PyList_Check(shapes) || PyList_GET_SIZE(shapes) != ni || !PyList_Check(over)) {
        PyErr_Format(PyExc_ValueError,
                     "[Graph.respecialize] expected a list of %d shapes and a list of "
                     "(node, field, values) overrides",
                     ni);
        return NULL;
    }
    int64_t(*sh)[MUSA_MAX_DIMS] = PyMem_Calloc((size_t)(ni ? ni : 1), sizeof *sh);
    Py_ssize_t no = PyList_GET_SIZE(over);
    musa_attr_override *ov = PyMem_Calloc((size_t)(no ? no : 1), sizeof *ov);
    PyObject *res = NULL;
    if (!sh || !ov) {
        PyErr_NoMemory();
        goto done;
    }
    for (int i = 0; i < ni; i++) {
        int n = 0;
        if (pm_int_list(PyList_GET_ITEM(shapes, i), sh[i], MUSA_MAX_DIMS, &n, "Graph.respecialize",
                        "shape"))
            goto done;
        int rank = musa_graph_value_ndim(g, musa_graph_input(g, i));
        if (n != rank) {
            PyErr_Format(PyExc_ValueError,
                         "[Graph.respecialize] input %d has %d dims, got a shape of %d", i, rank,
                         n);
            goto done;
        }
    }
    for (Py_ssize_t k = 0; k < no; k++) {
        PyObject *vals;
        const char *field;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(over, k), "isO", &ov[k].node, &field, &vals))
            goto done;
        ov[k].field = field;
        if (pm_int_list(vals, ov[k].v, MUSA_MAX_ATTR_INTS, &ov[k].n, "Graph.respecialize",
                        "override"))
            goto done;
    }
    res = graph_wrap(musa_graph_respecialize(g, (const int64_t(*)[MUSA_MAX_DIMS])sh, (int)no, ov));
done:
    PyMem_Free(sh);
    PyMem_Free(ov);
    return res;
}

/* [(value id, tensor)] of the parameters (tensors bound by reference). */
static PyObject *graph_params(PyObject *self, PyObject *u) {
    (void)u;
    musa_graph *g = G(self);
    PyObject *r = PyList_New(0);
    for (int v = 0; r && v < musa_graph_num_values(g); v++) {
        if (musa_graph_value_kind(g, v) != MUSA_VALUE_PARAM) continue;
        PyObject *e =
            Py_BuildValue("(iN)", v, pm_wrap(musa_tensor_retain(musa_graph_value_tensor(g, v))));
        if (!e || PyList_Append(r, e)) Py_CLEAR(r);
        Py_XDECREF(e);
    }
    return r;
}

static PyObject *graph_inputs_list(PyObject *self, PyObject *u) {
    (void)u;
    musa_graph *g = G(self);
    int n = musa_graph_num_inputs(g);
    PyObject *r = PyList_New(n);
    for (int i = 0; r && i < n; i++) PyList_SET_ITEM(r, i, PyLong_FromLong(musa_graph_input(g, i)));
    return r;
}

static PyObject *graph_get_int(PyObject *self, void *which) {
    musa_graph *g = G(self);
    switch ((int)(intptr_t)which) {
    case 0:
        return PyLong_FromLong(musa_graph_node_count(g));
    case 1:
        return PyLong_FromLong(musa_graph_num_nodes(g));
    case 2:
        return PyBool_FromLong(musa_graph_requires_grad(g));
    case 3:
        return PyLong_FromLong(musa_graph_num_inputs(g));
    case 4:
        return PyLong_FromLong(musa_graph_num_mutations(g));
    case 6:
        return PyBool_FromLong(musa_graph_has_random(g));
    case 8: { /* whether a mutation writes into an input */
        bool any = false;
        for (int i = 0; i < musa_graph_num_mutations(g) && !any; i++)
            any = musa_graph_value_kind(g, musa_graph_mutation_target(g, i)) == MUSA_VALUE_INPUT;
        return PyBool_FromLong(any);
    }
    case 7:
        return PyLong_FromLong(musa_graph_num_values(g));
    default: {
        int n = musa_graph_num_outputs(g);
        PyObject *r = PyList_New(n);
        for (int i = 0; r && i < n; i++)
            PyList_SET_ITEM(r, i, PyLong_FromLong(musa_graph_output(g, i)));
        return r;
    }
    }
}

static PyMethodDef graph_methods[] = {
    {"capture_begin", graph_capture_begin, METH_O, "Start recording ('trace' or 'symbolic')."},
    {"capture_end", graph_capture_end, METH_NOARGS, "Stop recording."},
    {"restore_grads", graph_restore_grads, METH_NOARGS,
     "Give leaves back the .grad they had before a symbolic capture changed it."},
    {"add_input", graph_add_input, METH_VARARGS, "Declare a tensor a graph input."},
    {"set_outputs", graph_set_outputs, METH_O, "Set the output tensors."},
    {"value_of", graph_value_of, METH_O, "Value id of a tensor, or -1."},
    {"text", graph_text, METH_NOARGS, "Readable text."},
    {"json", graph_json, METH_NOARGS, "JSON form."},
    {"verify", graph_verify, METH_NOARGS, "Check the graph."},
    {"optimize", (PyCFunction)(void (*)(void))graph_optimize, METH_VARARGS | METH_KEYWORDS,
     "Run the pass pipeline."},
    {"run_pass", (PyCFunction)(void (*)(void))graph_run_pass, METH_VARARGS | METH_KEYWORDS,
     "Run one pass."},
    {"compile", (PyCFunction)(void (*)(void))graph_compile, METH_VARARGS | METH_KEYWORDS,
     "Lower to a Plan."},
    {"breaks", graph_breaks, METH_NOARGS,
     "Host reads: GraphBreak(value, at_node, kind, outcome, loc)."},
    {"ops", graph_ops, METH_NOARGS, "Live nodes: (op, fusion group)."},
    {"segment", graph_segment, METH_VARARGS, "Nodes [begin, end) as a Graph, and carried ids."},
    {"params", graph_params, METH_NOARGS, "Parameters: (value id, tensor)."},
    {"inputs_list", graph_inputs_list, METH_NOARGS, "Input value ids, in order."},
    {"autodiff", graph_autodiff, METH_VARARGS, "Append the backward graph; gradient value ids."},
    {"new_input", graph_new_input, METH_VARARGS, "A new input shaped like a value."},
    {"add_symbol", graph_add_symbol, METH_VARARGS, "A dynamic dim (name, lo, hi, traced)."},
    {"set_symbolic", graph_set_symbolic, METH_VARARGS, "Mark dim d of a value as a symbol's."},
    {"run_eager", graph_run_eager, METH_VARARGS, "Run through the dispatcher; asked values."},
    {"fingerprint", graph_fingerprint, METH_VARARGS, "Hash of nodes [begin, end)."},
    {"value", graph_value, METH_O, "GraphValue(kind, producer, tensor or None) of a value."},
    {"value_info", graph_value_info, METH_O, "ValueInfo(kind, dtype, shape, symbols, name)."},
    {"node_info", graph_node_info, METH_O,
     "NodeInfo(op, inputs, outputs, loc, attrs, group) of a node; None if a pass removed it."},
    {"respecialize", graph_respecialize, METH_VARARGS, "Copy for other input shapes."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef graph_getset[] = {
    {"num_nodes", graph_get_int, NULL, "live nodes", (void *)0},
    {"nodes_len", graph_get_int, NULL, "nodes, dead ones included", (void *)1},
    {"requires_grad", graph_get_int, NULL, "an input or param required grad", (void *)2},
    {"num_inputs", graph_get_int, NULL, "graph inputs", (void *)3},
    {"num_mutations", graph_get_int, NULL, "in-place writes into inputs/params", (void *)4},
    {"outputs", graph_get_int, NULL, "output value ids", (void *)5},
    {"has_random", graph_get_int, NULL, "a live node draws random numbers", (void *)6},
    {"num_values", graph_get_int, NULL, "values, ids 0 to num_values - 1", (void *)7},
    {"writes_inputs", graph_get_int, NULL, "a mutation writes into an input", (void *)8},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot graph_slots[] = {
    {Py_tp_new, graph_new},
    {Py_tp_dealloc, graph_dealloc},
    {Py_tp_methods, graph_methods},
    {Py_tp_getset, graph_getset},
    {Py_tp_doc, "A captured static graph (musa_graph)."},
    {0, NULL},
};
static PyType_Spec graph_spec = {"musa._C.Graph", sizeof(PyGraph), 0, Py_TPFLAGS_DEFAULT,
                                 graph_slots};

/* _jit_location(package_dir): recorded nodes name the first frame outside
 * package_dir; None turns it off. */
DEF(_jit_location, PM_FN, "package_dir:O") {
    PyObject *d = a[0].o;
    if (d == Py_None) {
        musa_jit_set_location_hook(NULL);
        musa_profiler_set_location_fn(NULL);
        Py_RETURN_NONE;
    }
    const char *s = PyUnicode_AsUTF8(d);
    if (!s) return NULL;
    snprintf(pkg_prefix, sizeof pkg_prefix, "%s", s);
    pkg_prefix_len = strlen(pkg_prefix);
    musa_jit_set_location_hook(pm_user_location);
    musa_profiler_set_location_fn(pm_user_location);
    Py_RETURN_NONE;
}

int pm_jit_init(PyObject *module) {
    if (!(loc_cache = PyDict_New())) return -1;
    Graph_Type = (PyTypeObject *)PyType_FromSpec(&graph_spec);
    ValueInfo_Type = PyStructSequence_NewType(&value_info_desc);
    NodeInfo_Type = PyStructSequence_NewType(&node_info_desc);
    GraphValue_Type = PyStructSequence_NewType(&graph_value_desc);
    GraphBreak_Type = PyStructSequence_NewType(&graph_break_desc);
    if (!Graph_Type || !ValueInfo_Type || !NodeInfo_Type || !GraphValue_Type || !GraphBreak_Type)
        return -1;
    Py_INCREF(Graph_Type), Py_INCREF(ValueInfo_Type), Py_INCREF(NodeInfo_Type),
        Py_INCREF(GraphValue_Type), Py_INCREF(GraphBreak_Type);
    if (PyModule_AddObject(module, "Graph", (PyObject *)Graph_Type) ||
        PyModule_AddObject(module, "ValueInfo", (PyObject *)ValueInfo_Type) ||
        PyModule_AddObject(module, "NodeInfo", (PyObject *)NodeInfo_Type) ||
        PyModule_AddObject(module, "GraphValue", (PyObject *)GraphValue_Type) ||
        PyModule_AddObject(module, "GraphBreak", (PyObject *)GraphBreak_Type))
        return -1;
    return pm_plan_init(module);
}
