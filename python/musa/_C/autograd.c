/*
 * autograd.c - the autograd API for Python: grad_fn nodes, backward and
 * grad, grad mode, hooks, custom Python functions, anomaly mode and
 * gradcheck. The engine is the C one (src/autograd); Python callables
 * (hooks, Function.backward, the function under gradcheck) are called back
 * from it with the GIL taken, and an exception they raise travels back to
 * the user's line unchanged.
 */
#include "pymusa.h"

/* ---- nodes ---- */

typedef struct {
    PyObject_HEAD musa_node *n; /* owned reference */
} PyMusaNode;

PyTypeObject *MusaNode_Type;

PyObject *pm_node_obj(musa_node *n) {
    if (!n) Py_RETURN_NONE;
    PyMusaNode *o = PyObject_New(PyMusaNode, MusaNode_Type);
    if (o) o->n = musa_node_retain(n);
    return (PyObject *)o;
}

static void node_dealloc(PyObject *self) {
    PyTypeObject *tp = Py_TYPE(self);
    musa_node_release(((PyMusaNode *)self)->n);
    PyObject_Free(self);
    Py_DECREF(tp);
}
static PyObject *node_repr(PyObject *self) {
    return PyUnicode_FromFormat("<%s object at %p>", musa_node_name(((PyMusaNode *)self)->n), self);
}
static PyObject *node_name(PyObject *self, PyObject *u) {
    (void)u;
    return PyUnicode_FromString(musa_node_name(((PyMusaNode *)self)->n));
}
static PyObject *node_next(PyObject *self, void *c) {
    (void)c;
    musa_node *n = ((PyMusaNode *)self)->n;
    int k = musa_node_num_next(n);
    PyObject *r = PyTuple_New(k);
    for (int i = 0; r && i < k; i++) {
        int nr = 0;
        musa_node *m = musa_node_next(n, i, &nr);
        PyObject *e = Py_BuildValue("(Ni)", pm_node_obj(m), nr);
        if (!e)
            Py_CLEAR(r);
        else
            PyTuple_SET_ITEM(r, i, e);
    }
    return r;
}
static PyObject *node_variable(PyObject *self, void *c) {
    (void)c;
    musa_tensor *v = musa_node_variable(((PyMusaNode *)self)->n);
    if (!v) {
        PyErr_SetString(PyExc_AttributeError,
                        "[Node.variable] only AccumulateGrad nodes have a variable");
        return NULL;
    }
    return pm_wrap(musa_tensor_retain(v));
}
static PyObject *node_attrs(PyObject *self, PyObject *u) {
    (void)u;
    char buf[1024];
    int n = musa_node_attrs(((PyMusaNode *)self)->n, buf, sizeof buf);
    if (n < (int)sizeof buf) return PyUnicode_FromString(buf);
    char *big = PyMem_Malloc((size_t)n + 1);
    if (!big) return PyErr_NoMemory();
    musa_node_attrs(((PyMusaNode *)self)->n, big, (size_t)n + 1);
    PyObject *r = PyUnicode_FromString(big);
    PyMem_Free(big);
    return r;
}
/* (("input" or "output", index, tensor), ...) for what the node keeps */
static PyObject *node_saved(PyObject *self, void *c) {
    (void)c;
    musa_node *n = ((PyMusaNode *)self)->n;
    PyObject *r = PyList_New(0);
    for (int out = 0; r && out < 2; out++) {
        int k = out ? musa_node_num_outputs(n) : musa_node_num_next(n);
        for (int i = 0; r && i < k; i++) {
            musa_tensor *t = musa_node_saved(n, out, i);
            if (!t) continue;
            PyObject *e = Py_BuildValue("(siN)", out ? "output" : "input", i, pm_wrap(t));
            if (!e || PyList_Append(r, e)) Py_CLEAR(r);
            Py_XDECREF(e);
        }
    }
    if (!r) return NULL;
    PyObject *t = PyList_AsTuple(r);
    Py_DECREF(r);
    return t;
}
static PyObject *node_richcompare(PyObject *a, PyObject *b, int op) {
    if (!PyObject_TypeCheck(b, MusaNode_Type) || (op != Py_EQ && op != Py_NE))
        Py_RETURN_NOTIMPLEMENTED;
    bool eq = ((PyMusaNode *)a)->n == ((PyMusaNode *)b)->n;
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}
static Py_hash_t node_hash(PyObject *self) {
    Py_hash_t h = (Py_hash_t)((uintptr_t)((PyMusaNode *)self)->n >> 4);
    return h == -1 ? -2 : h;
}

static PyMethodDef node_methods[] = {
    {"name", node_name, METH_NOARGS, "the node's name, e.g. 'MulBackward'"},
    {"attrs", node_attrs, METH_NOARGS, "the forward op's attributes as text, e.g. 'dim=1'"},
    {NULL, NULL, 0, NULL},
};
static PyGetSetDef node_getset[] = {
    {"next_functions", node_next, NULL, "((node or None, input_nr), ...) for the forward inputs",
     NULL},
    {"variable", node_variable, NULL, "the leaf an AccumulateGrad node writes to", NULL},
    {"saved_tensors", node_saved, NULL,
     "((\"input\" or \"output\", index, tensor), ...): what the node keeps for backward", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
static PyType_Slot node_slots[] = {
    {Py_tp_dealloc, node_dealloc},
    {Py_tp_repr, node_repr},
    {Py_tp_methods, node_methods},
    {Py_tp_getset, node_getset},
    {Py_tp_richcompare, node_richcompare},
    {Py_tp_hash, node_hash},
    {Py_tp_doc, "A node of the autograd graph (a tensor's grad_fn)."},
    {0, NULL},
};
static PyType_Spec node_spec = {"musa.autograd.Node", sizeof(PyMusaNode), 0, Py_TPFLAGS_DEFAULT,
                                node_slots};

/* ---- helpers ---- */

#define tensor_seq(o, who, what, allow_none, out, n)                                               \
    pm_tensor_list(o, who, what, allow_none, -1, out, n)

/* _backward(tensors, grad_tensors, retain_graph, create_graph) */
static PyObject *py_backward(PyObject *m, PyObject *args) {
    (void)m;
    PyObject *tensors, *grads;
    int retain, create;
    if (!PyArg_ParseTuple(args, "OOpp:_backward", &tensors, &grads, &retain, &create)) return NULL;
    musa_tensor **ts, **gs;
    int nt, ng;
    if (tensor_seq(tensors, "backward", "tensors", false, &ts, &nt)) return NULL;
    if (tensor_seq(grads, "backward", "grad_tensors", true, &gs, &ng)) {
        pm_tensor_list_free(ts);
        return NULL;
    }
    if (gs && ng != nt) {
        PyErr_Format(PyExc_RuntimeError, "[backward] got %d tensors but %d gradients", nt, ng);
        pm_tensor_list_free(ts), pm_tensor_list_free(gs);
        return NULL;
    }
    int rc = musa_backward(nt, ts, gs, retain, create);
    pm_tensor_list_free(ts), pm_tensor_list_free(gs);
    return pm_none_or_raise(rc);
}

/* _grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused) */
static PyObject *py_grad(PyObject *m, PyObject *args) {
    (void)m;
    PyObject *outputs, *inputs, *gouts;
    int retain, create, unused;
    if (!PyArg_ParseTuple(args, "OOOppp:_grad", &outputs, &inputs, &gouts, &retain, &create,
                          &unused))
        return NULL;
    musa_tensor **os = NULL, **is = NULL, **gs = NULL, **res = NULL;
    int no, ni, ng;
    PyObject *r = NULL;
    if (tensor_seq(outputs, "grad", "outputs", false, &os, &no) ||
        tensor_seq(inputs, "grad", "inputs", false, &is, &ni) ||
        tensor_seq(gouts, "grad", "grad_outputs", true, &gs, &ng))
        goto done;
    if (gs && ng != no) {
        PyErr_Format(PyExc_RuntimeError, "[grad] got %d outputs but %d grad_outputs", no, ng);
        goto done;
    }
    res = PyMem_Calloc((size_t)(ni ? ni : 1), sizeof *res);
    if (!res) {
        PyErr_NoMemory();
        goto done;
    }
    if (musa_grad(no, os, gs, ni, is, retain, create, unused, res)) {
        pm_raise();
        goto done;
    }
    r = PyTuple_New(ni);
    for (int i = 0; i < ni; i++) {
        PyObject *e = res[i] ? pm_wrap(res[i]) : Py_NewRef(Py_None);
        res[i] = NULL;
        if (!e || !r) {
            Py_XDECREF(e);
            continue;
        }
        PyTuple_SET_ITEM(r, i, e);
    }
done:
    for (int i = 0; res && i < ni; i++) musa_tensor_release(res[i]);
    pm_tensor_list_free(os), pm_tensor_list_free(is), pm_tensor_list_free(gs), PyMem_Free(res);
    return r;
}

static PyObject *py_set_grad_enabled(PyObject *m, PyObject *o) {
    (void)m;
    return PyBool_FromLong(musa_set_grad_enabled(PyObject_IsTrue(o) == 1));
}
static PyObject *py_is_grad_enabled(PyObject *m, PyObject *u) {
    (void)m, (void)u;
    return PyBool_FromLong(musa_is_grad_enabled());
}
/* _autocast_set(enabled, dtype) -> the previous (enabled, dtype) */
static PyObject *py_autocast_set(PyObject *m, PyObject *args) {
    (void)m;
    int en;
    PyObject *dt;
    if (!PyArg_ParseTuple(args, "pO:_autocast_set", &en, &dt)) return NULL;
    int d = pm_dtype_from(dt, MUSA_DTYPE_BFLOAT16, "autocast");
    if (d < 0) return NULL;
    PyObject *prev = Py_BuildValue("(OO)", musa_autocast_enabled() ? Py_True : Py_False,
                                   pm_dtype_obj(musa_autocast_dtype())); /* borrowed: O */
    if (!prev) return NULL;
    if (musa_autocast_set(en, (musa_dtype)d)) {
        Py_DECREF(prev);
        return pm_raise();
    }
    return prev;
}
static PyObject *py_autocast_state(PyObject *m, PyObject *u) {
    (void)m, (void)u;
    return Py_BuildValue("(OO)", musa_autocast_enabled() ? Py_True : Py_False,
                         pm_dtype_obj(musa_autocast_dtype()));
}
static PyObject *py_autocast_set_cache_enabled(PyObject *m, PyObject *o) {
    (void)m;
    return PyBool_FromLong(musa_autocast_set_cache_enabled(PyObject_IsTrue(o) == 1));
}
static PyObject *py_autocast_clear_cache(PyObject *m, PyObject *u) {
    (void)m, (void)u;
    musa_autocast_clear_cache();
    Py_RETURN_NONE;
}
static PyObject *py_set_anomaly_enabled(PyObject *m, PyObject *args) {
    (void)m;
    int en, check = 1;
    if (!PyArg_ParseTuple(args, "p|p:_set_anomaly_enabled", &en, &check)) return NULL;
    musa_set_anomaly_enabled(en, check);
    Py_RETURN_NONE;
}
static PyObject *py_is_anomaly_enabled(PyObject *m, PyObject *u) {
    (void)m, (void)u;
    return PyBool_FromLong(musa_is_anomaly_enabled());
}

/* ---- hooks ---- */

static int hook_cb(void *ctx, musa_tensor *grad, musa_tensor **replace) {
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = MUSA_OK;
    PyObject *gobj = pm_wrap(musa_tensor_retain(grad));
    PyObject *r = gobj ? PyObject_CallOneArg((PyObject *)ctx, gobj) : NULL;
    if (!r) {
        rc = pm_stash_exception();
    } else if (r != Py_None) {
        if (!replace) { /* a post-accumulate hook: called with the leaf itself */
            PyErr_Format(PyExc_RuntimeError,
                         "[Tensor.register_post_accumulate_grad_hook] the hook must return None, "
                         "not %s",
                         Py_TYPE(r)->tp_name);
            rc = pm_stash_exception();
        } else if (!pm_is_tensor(r)) {
            PyErr_Format(
                PyExc_TypeError,
                "[Tensor.register_hook] a gradient hook must return a Tensor or None, not %s",
                Py_TYPE(r)->tp_name);
            rc = pm_stash_exception();
        } else {
            *replace = musa_tensor_retain(pm_t(r));
        }
    }
    Py_XDECREF(r);
    Py_XDECREF(gobj);
    PyGILState_Release(g);
    return rc;
}

static void hook_free(void *ctx) {
    PyGILState_STATE g = PyGILState_Ensure();
    Py_DECREF((PyObject *)ctx);
    PyGILState_Release(g);
}

static PyObject *register_hook(musa_tensor *t, PyObject *hook, bool post) {
    if (!PyCallable_Check(hook)) {
        PyErr_Format(PyExc_TypeError, "[Tensor.%s] the hook must be callable, not %s",
                     post ? "register_post_accumulate_grad_hook" : "register_hook",
                     Py_TYPE(hook)->tp_name);
        return NULL;
    }
    Py_INCREF(hook);
    int id = post ? musa_tensor_register_post_accumulate_hook(t, hook_cb, hook, hook_free)
                  : musa_tensor_register_hook(t, hook_cb, hook, hook_free);
    if (id < 0) return pm_raise(); /* free_ctx already ran */
    return PyLong_FromLong(id);
}
DEF(_register_hook, PM_METH, "self:T hook:O") {
    return register_hook(a[0].t, a[1].o, false);
}
DEF(_register_post_hook, PM_METH, "self:T hook:O") {
    return register_hook(a[0].t, a[1].o, true);
}
DEF(_remove_hook, PM_METH, "self:T id:i") {
    return pm_none_or_raise(musa_tensor_remove_hook(a[0].t, (int)a[1].i));
}
DEF(retain_grad, PM_METH, "self:T") {
    return pm_none_or_raise(musa_tensor_retain_grad(a[0].t));
}
DEF(requires_grad_, PM_METH, "self:T requires_grad:b=True") {
    if (musa_tensor_set_requires_grad(a[0].t, a[1].b)) return pm_raise();
    return Py_NewRef(a[0].o);
}
DEF(detach_, PM_METH, "self:T") {
    if (!musa_tensor_is_leaf(a[0].t)) {
        PyErr_SetString(PyExc_RuntimeError,
                        "[detach_] detach_() on a non-leaf tensor is not supported; use detach()");
        return NULL;
    }
    if (musa_tensor_set_requires_grad(a[0].t, false)) return pm_raise();
    return Py_NewRef(a[0].o);
}

/* ---- custom functions (musa.autograd.Function) ---- */

/* The ctx of a custom node: the Python callable taking the output
 * gradients (None for zero) and returning one gradient (or None) per
 * input, and the node's name, which prefixes the errors about its result. */
typedef struct {
    PyObject *fn;  /* owned */
    char name[64]; /* "MyFnBackward" */
} custom_ctx;

static void custom_free(void *ctx) {
    PyGILState_STATE g = PyGILState_Ensure();
    Py_DECREF(((custom_ctx *)ctx)->fn);
    PyMem_RawFree(ctx);
    PyGILState_Release(g);
}

static int custom_cb(void *ctx, int n_out, musa_tensor *const *gout, int n_in, musa_tensor **gin) {
    const char *who = ((custom_ctx *)ctx)->name;
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = MUSA_OK;
    PyObject *args = pm_tensor_tuple(n_out, gout), *r = NULL;
    if (args) r = PyObject_Call(((custom_ctx *)ctx)->fn, args, NULL);
    if (!r) {
        rc = pm_stash_exception();
        goto done;
    }
    PyObject *seq = pm_is_tensor(r) || r == Py_None ? PyTuple_Pack(1, r) : PySequence_Fast(r, "");
    if (!seq) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "[%s] backward must return a Tensor, None or a tuple of them, not %s", who,
                     Py_TYPE(r)->tp_name);
        rc = pm_stash_exception();
        goto done;
    }
    Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
    if (len < n_in) {
        PyErr_Format(
            PyExc_RuntimeError,
            "[%s] backward returned an incorrect number of gradients (expected %d, got %zd)", who,
            n_in, len);
        rc = pm_stash_exception();
    }
    if (!rc) rc = pm_grads_from(seq, n_in, gin, who);
    Py_DECREF(seq);
done:
    Py_XDECREF(r);
    Py_XDECREF(args);
    PyGILState_Release(g);
    return rc;
}

/* _custom_node(name, inputs, outputs, backward_fn) */
static PyObject *py_custom_node(PyObject *m, PyObject *args) {
    (void)m;
    const char *name;
    PyObject *inputs, *outputs, *fn;
    if (!PyArg_ParseTuple(args, "sOOO:_custom_node", &name, &inputs, &outputs, &fn)) return NULL;
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "[_custom_node] backward must be callable");
        return NULL;
    }
    musa_tensor **is, **os;
    int ni, no;
    if (tensor_seq(inputs, "_custom_node", "inputs", false, &is, &ni)) return NULL;
    if (tensor_seq(outputs, "_custom_node", "outputs", false, &os, &no)) {
        pm_tensor_list_free(is);
        return NULL;
    }
    custom_ctx *c = PyMem_RawMalloc(sizeof *c);
    if (!c) {
        pm_tensor_list_free(is), pm_tensor_list_free(os);
        return PyErr_NoMemory();
    }
    c->fn = Py_NewRef(fn);
    snprintf(c->name, sizeof c->name, "%s", name);
    int rc = musa_custom_node(name, ni, is, no, os, custom_cb, c, custom_free);
    pm_tensor_list_free(is), pm_tensor_list_free(os);
    return pm_none_or_raise(rc);
}

/* ---- gradcheck ---- */

static int gc_fn(void *ctx, int n_in, musa_tensor *const *inputs, int *n_out,
                 musa_tensor **outputs) {
    PyObject *args = PyTuple_New(n_in), *r = NULL;
    int rc = MUSA_OK;
    for (int i = 0; args && i < n_in; i++) {
        PyObject *e = pm_wrap(musa_tensor_retain(inputs[i]));
        if (!e)
            Py_CLEAR(args);
        else
            PyTuple_SET_ITEM(args, i, e);
    }
    if (args) r = PyObject_Call((PyObject *)ctx, args, NULL);
    Py_XDECREF(args);
    if (!r) return pm_stash_exception();
    PyObject *seq = pm_is_tensor(r) ? PyTuple_Pack(1, r) : PySequence_Fast(r, "");
    if (!seq) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError,
                        "[gradcheck] the function must return a Tensor or a tuple of Tensors");
        Py_DECREF(r);
        return pm_stash_exception();
    }
    Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
    if (len > 8) {
        PyErr_SetString(PyExc_ValueError, "[gradcheck] at most 8 outputs");
        rc = pm_stash_exception();
    }
    int k = 0;
    for (Py_ssize_t i = 0; !rc && i < len; i++) {
        PyObject *e = PySequence_Fast_GET_ITEM(seq, i);
        if (!pm_is_tensor(e)) continue; /* non-tensor outputs are ignored, as in PyTorch */
        outputs[k++] = musa_tensor_retain(pm_t(e));
    }
    *n_out = k;
    Py_DECREF(seq);
    Py_DECREF(r);
    return rc;
}

static PyObject *gradcheck_common(PyObject *args, bool second) {
    PyObject *fn, *inputs;
    double eps, atol, rtol;
    if (!PyArg_ParseTuple(args, "OOddd", &fn, &inputs, &eps, &atol, &rtol)) return NULL;
    musa_tensor **is;
    int ni;
    if (tensor_seq(inputs, second ? "gradgradcheck" : "gradcheck", "inputs", false, &is, &ni))
        return NULL;
    int rc = second ? musa_gradgradcheck(gc_fn, fn, ni, is, eps, atol, rtol)
                    : musa_gradcheck(gc_fn, fn, ni, is, eps, atol, rtol);
    pm_tensor_list_free(is);
    return pm_none_or_raise(rc);
}
static PyObject *py_gradcheck(PyObject *m, PyObject *args) {
    (void)m;
    return gradcheck_common(args, false);
}
static PyObject *py_gradgradcheck(PyObject *m, PyObject *args) {
    (void)m;
    return gradcheck_common(args, true);
}

static PyMethodDef autograd_functions[] = {
    {"_backward", py_backward, METH_VARARGS,
     "_backward(tensors, grad_tensors, retain_graph, create_graph)"},
    {"_grad", py_grad, METH_VARARGS,
     "_grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused)"},
    {"_set_grad_enabled", py_set_grad_enabled, METH_O, "set grad mode; returns the previous one"},
    {"_autocast_set", py_autocast_set, METH_VARARGS,
     "set autocast (enabled, dtype); returns the previous (enabled, dtype)"},
    {"_autocast_state", py_autocast_state, METH_NOARGS, "autocast's (enabled, dtype)"},
    {"_autocast_set_cache_enabled", py_autocast_set_cache_enabled, METH_O,
     "cache parameters' casts; returns the previous setting"},
    {"_autocast_clear_cache", py_autocast_clear_cache, METH_NOARGS,
     "drop autocast's casts of parameters"},
    {"is_grad_enabled", py_is_grad_enabled, METH_NOARGS, "whether grad mode is on (this thread)"},
    {"_set_anomaly_enabled", py_set_anomaly_enabled, METH_VARARGS,
     "_set_anomaly_enabled(enabled, check_nan=True)"},
    {"is_anomaly_enabled", py_is_anomaly_enabled, METH_NOARGS, "whether anomaly mode is on"},
    {"_custom_node", py_custom_node, METH_VARARGS, "_custom_node(name, inputs, outputs, backward)"},
    {"_gradcheck", py_gradcheck, METH_VARARGS, "_gradcheck(fn, inputs, eps, atol, rtol)"},
    {"_gradgradcheck", py_gradgradcheck, METH_VARARGS,
     "_gradgradcheck(fn, inputs, eps, atol, rtol)"},
    {NULL, NULL, 0, NULL},
};

int pm_autograd_init(PyObject *module) {
    MusaNode_Type = (PyTypeObject *)PyType_FromSpec(&node_spec);
    if (!MusaNode_Type) return -1;
    Py_INCREF(MusaNode_Type);
    if (PyModule_AddObject(module, "Node", (PyObject *)MusaNode_Type)) return -1;
    return PyModule_AddFunctions(module, autograd_functions);
}
