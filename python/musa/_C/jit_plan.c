/*
 * jit_plan.c - the Plan object of the static graph for Python (jit.c has
 * the Graph): running a compiled plan on a list of tensors, its counters
 * and memory plan, and the compiled call's fast path (Plan.call), which
 * checks in C what musa/jit/_compiled.py's cache key would.
 */
#include "pymusa.h"

typedef struct {
    PyObject_HEAD musa_plan *p;
    PyObject *graph; /* the Graph it was built from (kept alive) */
    musa_graph *g;   /* its graph */
} PyPlan;

static PyTypeObject *Plan_Type;

PyObject *pm_plan_wrap(musa_plan *p, PyObject *graph, musa_graph *g) {
    PyPlan *r = PyObject_New(PyPlan, Plan_Type);
    if (!r) {
        musa_plan_free(p);
        return NULL;
    }
    r->p = p;
    r->graph = Py_NewRef(graph);
    r->g = g;
    return (PyObject *)r;
}

#define P(self) (((PyPlan *)(self))->p)

static void plan_dealloc(PyObject *self) {
    PyTypeObject *tp = Py_TYPE(self);
    musa_plan_free(P(self));
    Py_XDECREF(((PyPlan *)self)->graph);
    PyObject_Free(self);
    Py_DECREF(tp);
}

/* Run the plan on n input tensors (borrowed): the list of its outputs. */
static PyObject *run_inputs(PyObject *self, int n, musa_tensor **ts) {
    musa_graph *g = ((PyPlan *)self)->g;
    int no = musa_graph_num_outputs(g);
    musa_tensor *outs_buf[8], **outs = outs_buf;
    if (no > 8 && !(outs = PyMem_Calloc((size_t)no, sizeof *outs))) return PyErr_NoMemory();
    /* a plan over a MiB or more of intermediates may run long: release the
     * GIL and take Ctrl-C meanwhile (for small plans the hook's system calls
     * would cost more than the run) */
    bool long_run = musa_plan_get_stats(P(self))->naive_bytes >= ((size_t)1 << 20);
    if (long_run) pm_long_op(true);
    int rc = musa_plan_run(P(self), n, ts, no, outs);
    if (long_run) pm_long_op(false);
    PyObject *r = NULL;
    if (rc) {
        r = pm_raise();
    } else {
        r = PyList_New(no);
        for (int i = 0; i < no; i++) {
            PyObject *w = r ? pm_wrap(outs[i]) : NULL;
            if (!r) musa_tensor_release(outs[i]);
            if (r && !w) Py_CLEAR(r);
            if (r) PyList_SET_ITEM(r, i, w);
        }
    }
    if (outs != outs_buf) PyMem_Free(outs);
    return r;
}

static PyObject *plan_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 1) {
        PyErr_SetString(PyExc_TypeError, "[Plan.run] expected one list of tensors");
        return NULL;
    }
    musa_tensor **ts = NULL;
    int n = 0;
    if (pm_tensor_list(args[0], "Plan.run", "inputs", false, -1, &ts, &n)) return NULL;
    PyObject *r = run_inputs(self, n, ts);
    pm_tensor_list_free(ts);
    return r;
}

/* ---- the compiled call's fast path ---- */

#define FAST_MAX_ARGS 16

/* Whether the call's arguments are what the fast state was made for:
 * distinct contiguous musa.Tensor objects (not subclasses), each with the
 * signature's dtype, shape, requires_grad and .grad presence
 * (musa.jit._keys.TensorSig), in this grad and autocast mode, outside a
 * capture. */
static bool fast_args_match(PyObject *args, PyObject *sigs, PyObject *grad_mode, PyObject *autocast,
                            musa_tensor **ts) {
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (n != PyTuple_GET_SIZE(sigs) || n > FAST_MAX_ARGS || musa_graph_recording() ||
        musa_is_grad_enabled() != (grad_mode == Py_True) ||
        (PyTuple_GET_ITEM(autocast, 0) == Py_True) != musa_autocast_enabled() ||
        PyTuple_GET_ITEM(autocast, 1) != pm_dtype_obj(musa_autocast_dtype()))
        return false;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PyTuple_GET_ITEM(args, i), *sig = PyTuple_GET_ITEM(sigs, i);
        if (Py_TYPE(o) != MusaTensor_Type) return false;
        for (Py_ssize_t j = 0; j < i; j++)
            if (PyTuple_GET_ITEM(args, j) == o) return false;
        musa_tensor *t = pm_t(o);
        PyObject *shape = PyTuple_GET_ITEM(sig, 1);
        int nd = musa_tensor_ndim(t);
        if (pm_dtype_obj(musa_tensor_dtype(t)) != PyTuple_GET_ITEM(sig, 0) ||
            PyTuple_GET_SIZE(shape) != nd || !musa_tensor_is_contiguous(t))
            return false;
        const int64_t *dims = musa_tensor_shape(t);
        for (int d = 0; d < nd; d++) {
            PyObject *s = PyTuple_GET_ITEM(shape, d);
            if (!PyLong_CheckExact(s) || PyLong_AsLongLong(s) != dims[d]) return false;
        }
        bool rg = musa_tensor_requires_grad(t);
        if (rg != (PyTuple_GET_ITEM(sig, 2) == Py_True)) return false;
        musa_tensor *gr = rg ? musa_tensor_grad(t) : NULL;
        if (gr) musa_tensor_release(gr);
        if ((gr != NULL) != (PyTuple_GET_ITEM(sig, 3) == Py_True)) return false;
        ts[i] = t;
    }
    return true;
}

/* Whether every Python guard (fn, value) still gives its value; a guard
 * that raises is a mismatch (the full path calls it again and meets the
 * error as it always did). */
static bool fast_guards_hold(PyObject *guards) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(guards); i++) {
        PyObject *gv = PyTuple_GET_ITEM(guards, i);
        PyObject *now = PyObject_CallNoArgs(PyTuple_GET_ITEM(gv, 0));
        int eq = now ? PyObject_RichCompareBool(now, PyTuple_GET_ITEM(gv, 1), Py_EQ) : -1;
        Py_XDECREF(now);
        if (eq != 1) {
            PyErr_Clear();
            return false;
        }
    }
    return true;
}

/* Plan.call(args, state): the whole of a compiled call whose variant is one
 * segment ending in its outputs (musa/jit/_compiled.py builds `state` once
 * per variant and checks what else its full path would): NotImplemented
 * when anything differs from what state was made for, so the full path
 * runs instead. state = (sigs, grad_mode, autocast, guards, drop, sets,
 * single, n_user): the TensorSigs of the arguments, the grad and autocast
 * modes, (guard fn, value) pairs, the parameters whose .grad the run drops
 * first, (parameter or argument index, output index or -1) per gradient
 * the run sets, and the output returned alone (its index) or -1: then the
 * first n_user outputs, as a list. */
static PyObject *plan_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyTuple_Check(args[0]) || !PyTuple_Check(args[1]) ||
        PyTuple_GET_SIZE(args[1]) != 8) {
        PyErr_SetString(PyExc_TypeError, "[Plan.call] expected (args tuple, state tuple)");
        return NULL;
    }
    PyObject *st = args[1];
    musa_tensor *ts[FAST_MAX_ARGS];
    if (!fast_args_match(args[0], PyTuple_GET_ITEM(st, 0), PyTuple_GET_ITEM(st, 1),
                         PyTuple_GET_ITEM(st, 2), ts) ||
        !fast_guards_hold(PyTuple_GET_ITEM(st, 3)))
        Py_RETURN_NOTIMPLEMENTED;
    static PyObject *grad_name;
    if (!grad_name && !(grad_name = PyUnicode_InternFromString("grad"))) return NULL;
    PyObject *drop = PyTuple_GET_ITEM(st, 4), *sets = PyTuple_GET_ITEM(st, 5);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(drop); i++)
        if (PyObject_SetAttr(PyTuple_GET_ITEM(drop, i), grad_name, Py_None)) return NULL;
    PyObject *res = run_inputs(self, (int)PyTuple_GET_SIZE(args[0]), ts);
    if (!res) return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(sets); i++) {
        PyObject *s = PyTuple_GET_ITEM(sets, i), *to = PyTuple_GET_ITEM(s, 0);
        Py_ssize_t k = PyLong_AsSsize_t(PyTuple_GET_ITEM(s, 1));
        PyObject *grad = k >= 0 && k < PyList_GET_SIZE(res) ? PyList_GET_ITEM(res, k) : Py_None;
        if (PyLong_Check(to)) to = PyTuple_GET_ITEM(args[0], PyLong_AsSsize_t(to));
        if (PyObject_SetAttr(to, grad_name, grad)) {
            Py_DECREF(res);
            return NULL;
        }
    }
    Py_ssize_t one = PyLong_AsSsize_t(PyTuple_GET_ITEM(st, 6));
    PyObject *r = one >= 0 ? PyList_GetItem(res, one) : NULL;
    if (r) {
        Py_INCREF(r);
    } else if (one < 0) {
        PyErr_Clear();
        r = PyList_GetSlice(res, 0, PyLong_AsSsize_t(PyTuple_GET_ITEM(st, 7)));
    }
    Py_DECREF(res);
    return r;
}

static PyObject *plan_stats(PyObject *self, PyObject *u) {
    (void)u;
    const musa_plan_stats *s = musa_plan_get_stats(P(self));
    return Py_BuildValue(
        "{s:n,s:n,s:n,s:n,s:n,s:n,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:K,s:K,s:K}",
        "arena_bytes", (Py_ssize_t)s->arena_bytes, "naive_bytes", (Py_ssize_t)s->naive_bytes,
        "live_peak_bytes", (Py_ssize_t)s->live_peak_bytes, "scratch_bytes",
        (Py_ssize_t)s->scratch_bytes, "held_bytes", (Py_ssize_t)s->held_bytes, "loaned_bytes",
        (Py_ssize_t)s->loaned_bytes, "instructions", s->instructions, "kernels", s->kernels,
        "fused_groups", s->fused_groups, "fused_nodes", s->fused_nodes, "chains", s->chains,
        "multi_updates", s->multi_updates, "multi_nodes", s->multi_nodes, "winograd", s->winograd,
        "winograd_direct", s->winograd_direct, "parallel_steps", s->parallel_steps, "views",
        s->views, "inplace", s->inplace, "runs", (unsigned long long)s->runs, "parallel_tasks",
        (unsigned long long)s->parallel_tasks, "arena_renewals",
        (unsigned long long)s->arena_renewals);
}

/* [bool] per graph output: lent from the arena (loaned_outputs). */
static PyObject *plan_loaned(PyObject *self, PyObject *u) {
    (void)u;
    const musa_graph *g = ((PyPlan *)self)->g;
    int n = musa_graph_num_outputs(g);
    PyObject *r = PyList_New(n);
    for (int i = 0; r && i < n; i++)
        PyList_SET_ITEM(r, i, PyBool_FromLong(musa_plan_output_loaned(P(self), i)));
    return r;
}

static PyObject *plan_buffers(PyObject *self, PyObject *u) {
    (void)u;
    const musa_plan_buffer *b;
    int n = musa_plan_buffers(P(self), &b);
    PyObject *r = PyList_New(n);
    for (int i = 0; r && i < n; i++) {
        PyObject *e = Py_BuildValue("(innii)", b[i].value, (Py_ssize_t)b[i].offset,
                                    (Py_ssize_t)b[i].bytes, b[i].first, b[i].last);
        if (!e)
            Py_CLEAR(r);
        else
            PyList_SET_ITEM(r, i, e);
    }
    return r;
}

static PyObject *plan_text(PyObject *self, PyObject *u) {
    (void)u;
    return pm_str_result(musa_plan_text(P(self)));
}

static PyMethodDef plan_methods[] = {
    {"run", (PyCFunction)(void (*)(void))plan_run, METH_FASTCALL, "Run on a list of tensors."},
    {"call", (PyCFunction)(void (*)(void))plan_call, METH_FASTCALL,
     "A compiled call's fast path: (args, state) -> result or NotImplemented."},
    {"stats", plan_stats, METH_NOARGS, "Counters and the memory plan's sizes."},
    {"buffers", plan_buffers, METH_NOARGS, "Arena buffers: (value, offset, bytes, first, last)."},
    {"loaned", plan_loaned, METH_NOARGS, "Per output: lent from the arena (loaned_outputs)."},
    {"text", plan_text, METH_NOARGS, "The steps."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot plan_slots[] = {
    {Py_tp_dealloc, plan_dealloc},
    {Py_tp_methods, plan_methods},
    {Py_tp_doc, "A compiled plan (musa_plan)."},
    {0, NULL},
};
static PyType_Spec plan_spec = {"musa._C.Plan", sizeof(PyPlan), 0, Py_TPFLAGS_DEFAULT, plan_slots};

/* _jit_call_matches(args, state): Plan.call's checks alone (the fast path
 * of a variant run as a training node, whose tape node Python makes). */
DEF(_jit_call_matches, PM_FN, "args:O state:O") {
    PyObject *args = a[0].o, *st = a[1].o;
    if (!PyTuple_Check(args) || !PyTuple_Check(st) || PyTuple_GET_SIZE(st) != 8) {
        PyErr_SetString(PyExc_TypeError, "[_jit_call_matches] expected (args tuple, state tuple)");
        return NULL;
    }
    musa_tensor *ts[FAST_MAX_ARGS];
    return PyBool_FromLong(fast_args_match(args, PyTuple_GET_ITEM(st, 0), PyTuple_GET_ITEM(st, 1),
                                           PyTuple_GET_ITEM(st, 2), ts) &&
                           fast_guards_hold(PyTuple_GET_ITEM(st, 3)));
}

/* Guard values built in C, since Plan.call computes them on every call
 * (the optimizer's guards, musa/optim/optimizer.py: 0.6-0.9 us each in
 * Python, a few percent of a small model's step). */

/* _items_except(d, excluded): tuple((k, v) for k, v in d.items() if k not
 * in excluded), in the dict's order. */
DEF(_items_except, PM_FN, "d:O excluded:O") {
    PyObject *d = a[0].o, *ex = a[1].o;
    if (!PyDict_Check(d) || !PyTuple_Check(ex)) {
        PyErr_Format(PyExc_TypeError, "[%s] expected (dict, tuple), got (%s, %s)", who,
                     Py_TYPE(d)->tp_name, Py_TYPE(ex)->tp_name);
        return NULL;
    }
    PyObject *out = PyTuple_New(PyDict_GET_SIZE(d)), *k, *v;
    Py_ssize_t pos = 0, n = 0;
    while (out && PyDict_Next(d, &pos, &k, &v)) {
        if (n == PyTuple_GET_SIZE(out)) { /* a finalizer the tuples ran grew it */
            PyErr_Format(PyExc_RuntimeError, "[%s] the dict changed size", who);
            Py_CLEAR(out);
            break;
        }
        int skip = PySequence_Contains(ex, k); /* -1: k's comparison raised */
        if (skip > 0) continue;
        PyObject *kv = skip == 0 ? PyTuple_Pack(2, k, v) : NULL;
        if (!kv) {
            Py_CLEAR(out);
            break;
        }
        PyTuple_SET_ITEM(out, n++, kv);
    }
    if (out && n < PyTuple_GET_SIZE(out) && _PyTuple_Resize(&out, n) < 0) return NULL;
    return out;
}

/* _keys_of_each(seq): tuple(tuple(x) for x in seq) (a dict gives its keys,
 * in order). */
DEF(_keys_of_each, PM_FN, "seq:O") {
    PyObject *seq = PySequence_Fast(a[0].o, "[_keys_of_each] expected a sequence of dicts");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *out = PyTuple_New(n);
    for (Py_ssize_t i = 0; out && i < n; i++) {
        PyObject *x = PySequence_Fast_GET_ITEM(seq, i), *t;
        if (PyDict_CheckExact(x)) {
            PyObject *k, *v;
            Py_ssize_t pos = 0, j = 0;
            t = PyTuple_New(PyDict_GET_SIZE(x));
            while (t && PyDict_Next(x, &pos, &k, &v)) {
                if (j == PyTuple_GET_SIZE(t)) {
                    PyErr_Format(PyExc_RuntimeError, "[%s] a dict changed size", who);
                    Py_CLEAR(t);
                    break;
                }
                PyTuple_SET_ITEM(t, j++, Py_NewRef(k));
            }
        } else {
            t = PySequence_Tuple(x);
        }
        if (!t)
            Py_CLEAR(out);
        else
            PyTuple_SET_ITEM(out, i, t);
    }
    Py_DECREF(seq);
    return out;
}

int pm_plan_init(PyObject *module) {
    if (!(Plan_Type = (PyTypeObject *)PyType_FromSpec(&plan_spec))) return -1;
    Py_INCREF(Plan_Type);
    return PyModule_AddObject(module, "Plan", (PyObject *)Plan_Type);
}
