/*
 * bind.c - the registry of bound functions and their argument parser.
 *
 * A binding's spec lists its parameters as space-separated tokens
 * "name:K" or "name:K=default"; a lone "*" starts the keyword-only ones.
 * Kinds K:
 *   T  Tensor (None, a[i].t = NULL, only where the default is None)
 *   S  Tensor or Python number (a number becomes a wrapped number)
 *   i  int          f  float        b  bool        d  dtype (None: -1)
 *   I  int or sequence of ints (None: n = -1)
 *   V  the remaining positional ints, or one sequence of them ("view(2, 3)")
 *   L  sequence of Tensors       O  any object
 * Defaults are literals: None, True, False, integers, floats.
 * Errors are TypeErrors naming the function and the argument, as Python's
 * own functions do.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pymusa.h"

static pm_binding *bindings;
static int n_bindings;

void pm_register(pm_binding *b) {
    b->next = bindings;
    bindings = b;
    n_bindings++;
}

/* Parse the spec once (at module init; a bad spec is a bug: raise). */
static int parse_spec(pm_binding *b) {
    const char *p = b->spec;
    b->nargs = 0;
    b->kwonly_from = -1;
    while (*p) {
        while (*p == ' ') p++;
        if (!*p) break;
        if (*p == '*') {
            b->kwonly_from = b->nargs;
            p++;
            continue;
        }
        if (b->nargs == PM_MAX_ARGS) goto bad;
        int k = b->nargs++;
        const char *colon = strchr(p, ':');
        if (!colon || colon - p >= (long)sizeof b->argname[0]) goto bad;
        memcpy(b->argname[k], p, (size_t)(colon - p));
        b->argname[k][colon - p] = 0;
        b->kind[k] = colon[1];
        if (!strchr("TSifbdIVLO", b->kind[k])) goto bad;
        p = colon + 2;
        if (*p == '=') {
            const char *e = strchr(p, ' ');
            size_t len = e ? (size_t)(e - p - 1) : strlen(p + 1);
            if (len >= sizeof b->dflt[0]) goto bad;
            memcpy(b->dflt[k], p + 1, len);
            b->dflt[k][len] = 0;
            b->has_dflt[k] = true;
            p += 1 + len;
        }
    }
    if (b->kwonly_from < 0) b->kwonly_from = b->nargs;
    return 0;
bad:
    PyErr_Format(PyExc_SystemError, "[%s] bad binding spec '%s'", b->name, b->spec);
    return -1;
}

static const char *kind_name(char k) {
    switch (k) {
    case 'T':
        return "Tensor";
    case 'S':
        return "Tensor or number";
    case 'i':
        return "int";
    case 'f':
        return "float";
    case 'b':
        return "bool";
    case 'd':
        return "musa.dtype";
    case 'I':
    case 'V':
        return "int or tuple of ints";
    case 'L':
        return "sequence of Tensors";
    default:
        return "object";
    }
}

static int bad_type(pm_binding *b, int k, PyObject *o) {
    PyErr_Format(PyExc_TypeError, "[%s] argument '%s' must be %s, not %s", b->name, b->argname[k],
                 kind_name(b->kind[k]), Py_TYPE(o)->tp_name);
    return -1;
}

/* Convert object o for parameter k into a[k]. */
static int convert(pm_binding *b, int k, PyObject *o, pm_arg *a) {
    pm_arg *x = &a[k];
    x->o = o;
    switch (b->kind[k]) {
    case 'T':
        if (o == Py_None && b->has_dflt[k]) return 0; /* (a required tensor is no optional one) */
        if (!pm_is_tensor(o)) return bad_type(b, k, o);
        x->t = pm_t(o);
        return 0;
    case 'S':
        if (pm_is_tensor(o)) {
            x->t = pm_t(o);
            return 0;
        }
        if (o == Py_None) return 0;
        if (!(x->t = pm_operand(o, b->name))) return -1;
        x->owned = true;
        return 0;
    case 'i':
        if (PyBool_Check(o) || !PyIndex_Check(o)) {
            if (pm_is_tensor(o) && musa_tensor_numel(pm_t(o)) == 1 &&
                !musa_dtype_is_floating(musa_tensor_dtype(pm_t(o))))
                return musa_tensor_item_int(pm_t(o), &x->i) ? pm_raise_int() : 0;
            return bad_type(b, k, o);
        }
        return pm_int64(o, &x->i, b->name, b->argname[k]);
    case 'f':
        if (pm_is_tensor(o) && musa_tensor_numel(pm_t(o)) == 1)
            return musa_tensor_item(pm_t(o), &x->f) ? pm_raise_int() : 0;
        if (!PyFloat_Check(o) && !PyLong_Check(o) && !PyIndex_Check(o) &&
            !PyObject_HasAttrString(o, "__float__"))
            return bad_type(b, k, o);
        return pm_double(o, &x->f, b->name, b->argname[k]);
    case 'b':
        if (!PyBool_Check(o) && !PyLong_Check(o)) return bad_type(b, k, o);
        x->b = PyObject_IsTrue(o);
        return 0;
    case 'd':
        x->dtype = pm_dtype_from(o, -1, b->name);
        return x->dtype == -1 && PyErr_Occurred() ? -1 : 0;
    case 'I':
    case 'V':
        if (o == Py_None) {
            x->n = -1;
            return 0;
        }
        return pm_int_list(o, x->v, MUSA_MAX_DIMS, &x->n, b->name, b->argname[k]);
    case 'L': {
        if (pm_is_tensor(o) || !PySequence_Check(o)) return bad_type(b, k, o);
        char msg[64];
        snprintf(msg, sizeof msg, "[%s] expected a sequence", b->name);
        PyObject *seq = PySequence_Fast(o, msg);
        if (!seq) return -1;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        x->list = PyMem_Calloc((size_t)(n ? n : 1), sizeof(musa_tensor *));
        if (!x->list) {
            Py_DECREF(seq);
            PyErr_NoMemory();
            return -1;
        }
        x->n = (int)n;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *e = PySequence_Fast_GET_ITEM(seq, i);
            if (!pm_is_tensor(e)) {
                PyErr_Format(PyExc_TypeError,
                             "[%s] argument '%s' must contain Tensors, but item %zd is %s", b->name,
                             b->argname[k], i, Py_TYPE(e)->tp_name);
                Py_DECREF(seq);
                return -1;
            }
            x->list[i] = musa_tensor_retain(pm_t(e)); /* seq may be a temporary */
        }
        Py_DECREF(seq);
        return 0;
    }
    default:
        return 0;
    }
}

/* Fill a[k] from its default literal. */
static int apply_default(pm_binding *b, int k, pm_arg *a) {
    const char *d = b->dflt[k];
    pm_arg *x = &a[k];
    if (!strcmp(d, "None")) {
        x->n = -1;
        x->dtype = -1;
        x->o = Py_None;
        return 0;
    }
    switch (b->kind[k]) {
    case 'i':
        x->i = strtoll(d, NULL, 10);
        break;
    case 'f':
        x->f = strtod(d, NULL);
        break;
    case 'b':
        x->b = !strcmp(d, "True");
        break;
    case 'I':
        x->n = 1;
        x->v[0] = strtoll(d, NULL, 10);
        break;
    default:
        break;
    }
    return 0;
}

static void cleanup(pm_binding *b, pm_arg *a) {
    for (int k = 0; k < b->nargs; k++) {
        if (a[k].owned) musa_tensor_release(a[k].t);
        for (int i = 0; a[k].list && i < a[k].n; i++) musa_tensor_release(a[k].list[i]);
        if (a[k].list) PyMem_Free(a[k].list);
    }
}

/* The NumPy spellings PyTorch accepts for some keywords (its python_arg_parser
 * does the same): sum(x, axis=0, keepdims=True) means sum(x, dim=0, keepdim=True). */
static const char *numpy_alias(const char *kn) {
    static const char *const alias[][2] = {{"axis", "dim"}, {"keepdims", "keepdim"},
                                           {"x", "input"},  {"a", "input"},
                                           {"x1", "input"}, {"x2", "other"}};
    for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++)
        if (!strcmp(kn, alias[i][0])) return alias[i][1];
    return NULL;
}

/* ---- out= (PM_OUT) ---- */

/* Write result r into out as PyTorch's out= does. The write is the op
 * table's `clone` into a provided output, so the dispatcher's checks of a
 * provided output (musa_check_provided_out: r's shape, a dtype r casts to,
 * no overlapping elements) are the generated ops' own, and the write
 * records autograd history as theirs does (PyTorch refuses out= under
 * autograd); its errors are renamed to `who`. An empty out (PyTorch's idiom
 * torch.empty(0)) is first resized to r's shape; one of another shape is
 * an error (PyTorch warns and resizes). */
static int write_out(const char *who, PyObject *res, PyObject *out) {
    static int clone_op = -1;
    musa_tensor *r = pm_t(res), *o = pm_t(out), *n = NULL;
    if (musa_is_grad_enabled() && musa_tensor_requires_grad(o) && musa_tensor_is_leaf(o))
        return musa_set_error(MUSA_ERR_RUNTIME,
                              "[%s] out is a leaf tensor that requires grad: it cannot be "
                              "written (wrap the call in no_grad, or pass a clone)",
                              who);
    int nd = musa_tensor_ndim(o), rn = musa_tensor_ndim(r);
    if (musa_tensor_numel(o) == 0 && (nd != rn || memcmp(musa_tensor_shape(o), musa_tensor_shape(r),
                                                         sizeof(int64_t) * (size_t)nd)))
        if (!(n = musa_empty(rn, musa_tensor_shape(r), musa_tensor_dtype(o)))) return -1;
    if (clone_op < 0) clone_op = musa_op_lookup("clone");
    musa_tensor *ins[1] = {r}, *outs[1] = {n ? n : o};
    int rc = musa_op_call(clone_op, 1, ins, NULL, outs);
    if (rc) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", musa_last_error());
        if (!strncmp(msg, "[clone]", 7)) musa_set_error(rc, "[%s]%s", who, msg + 7);
    } else if (n) {
        PyObject *w = pm_wrap(musa_tensor_retain(n)), *x = NULL;
        if (w) x = PyObject_CallMethod(out, "_rebind_", "O", w);
        Py_XDECREF(w);
        Py_XDECREF(x);
        rc = x ? 0 : -1;
    }
    musa_tensor_release(n);
    return rc;
}

/* A function's result res (a new reference, or NULL) written into out:
 * out itself, or for a tuple result (values and indices) a tuple of the
 * same type holding out's tensors. Steals res. */
PyObject *pm_into_out(const char *who, PyObject *res, PyObject *out) {
    if (!res) return NULL;
    PyObject *ret = NULL, *outs = NULL;
    if (pm_is_tensor(res)) {
        if (!pm_is_tensor(out))
            PyErr_Format(PyExc_TypeError, "[%s] out must be a Tensor, got %s", who,
                         Py_TYPE(out)->tp_name);
        else if (write_out(who, res, out))
            pm_raise();
        else
            ret = Py_NewRef(out);
    } else if (PyTuple_Check(res)) {
        Py_ssize_t n = PyTuple_GET_SIZE(res);
        outs = PyTuple_Check(out) || PyList_Check(out) ? PySequence_Tuple(out) : NULL;
        if (!outs || PyTuple_GET_SIZE(outs) != n) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "[%s] out must be a tuple of %zd tensors, got %s", who, n,
                         Py_TYPE(out)->tp_name);
            goto done;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *ri = PyTuple_GET_ITEM(res, i), *oi = PyTuple_GET_ITEM(outs, i);
            if (!pm_is_tensor(oi)) {
                PyErr_Format(PyExc_TypeError, "[%s] out[%zd] must be a Tensor, got %s", who, i,
                             Py_TYPE(oi)->tp_name);
                goto done;
            }
            if (!pm_is_tensor(ri)) {
                PyErr_Format(PyExc_TypeError,
                             "[%s] out= needs tensor results, but result %zd is a %s", who, i,
                             Py_TYPE(ri)->tp_name);
                goto done;
            }
            if (write_out(who, ri, oi)) {
                pm_raise();
                goto done;
            }
        }
        /* a named result type (values, indices) keeps its names: a struct
         * sequence is made from one sequence, a namedtuple by its _make */
        PyObject *type = (PyObject *)Py_TYPE(res), *make = NULL;
        if (Py_IS_TYPE(res, &PyTuple_Type))
            ret = Py_NewRef(outs);
        else if (PyObject_HasAttrString(type, "_make") &&
                 (make = PyObject_GetAttrString(type, "_make")))
            ret = PyObject_CallOneArg(make, outs);
        else if (!PyErr_Occurred())
            ret = PyObject_CallOneArg(type, outs);
        Py_XDECREF(make);
    } else {
        PyErr_Format(PyExc_TypeError, "[%s] got an unexpected keyword argument 'out'", who);
    }
done:
    Py_XDECREF(outs);
    Py_DECREF(res);
    return ret;
}

static int arg_index(const pm_binding *b, int from, const char *kn) {
    int m = from;
    while (m < b->nargs && strcmp(b->argname[m], kn)) m++;
    return m;
}

PyObject *pm_call(pm_binding *b, PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                  PyObject *kwnames) {
    pm_arg a[PM_MAX_ARGS];
    memset(a, 0, sizeof(pm_arg) * (size_t)b->nargs);
    int k = 0;
    if (self) {
        a[0].t = pm_t(self);
        a[0].o = self;
        a[0].given = true;
        k = 1;
    }
    PyObject *res = NULL, *out = NULL; /* out: PM_OUT's out= (borrowed) */
    /* positional */
    for (Py_ssize_t i = 0; i < nargs; i++) {
        if (k < b->kwonly_from && b->kind[k] == 'V') {
            /* V: one sequence, or all the remaining positional ints */
            pm_arg *x = &a[k];
            x->given = true;
            if (nargs - i == 1 && !PyIndex_Check(args[i])) {
                if (convert(b, k, args[i], a)) goto done;
            } else {
                if (nargs - i > MUSA_MAX_DIMS) {
                    PyErr_Format(PyExc_ValueError, "[%s] at most %d sizes, got %zd", b->name,
                                 MUSA_MAX_DIMS, nargs - i);
                    goto done;
                }
                x->n = (int)(nargs - i);
                for (int j = 0; i < nargs; i++, j++)
                    if (pm_int64(args[i], &x->v[j], b->name, b->argname[k])) goto done;
            }
            k++;
            break;
        }
        if (k >= b->kwonly_from) {
            PyErr_Format(PyExc_TypeError, "[%s] takes %d positional argument%s but %zd were given",
                         b->name, b->kwonly_from - (self != NULL),
                         b->kwonly_from - (self != NULL) == 1 ? "" : "s", nargs);
            goto done;
        }
        a[k].given = true;
        if (convert(b, k, args[i], a)) goto done;
        k++;
    }
    /* keywords */
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t j = 0; j < nkw; j++) {
        const char *kn = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, j));
        if (!kn) goto done;
        int m = arg_index(b, self ? 1 : 0, kn);
        const char *alias = m == b->nargs ? numpy_alias(kn) : NULL;
        if (alias) m = arg_index(b, self ? 1 : 0, alias);
        if (m == b->nargs && !self && (b->flags & PM_OUT) && !strcmp(kn, "out")) {
            out = args[nargs + j] == Py_None ? NULL : args[nargs + j];
            continue;
        }
        if (m == b->nargs) {
            PyErr_Format(PyExc_TypeError, "[%s] got an unexpected keyword argument '%s'", b->name,
                         kn);
            goto done;
        }
        if (a[m].given) {
            PyErr_Format(PyExc_TypeError, "[%s] got multiple values for argument '%s'", b->name,
                         kn);
            goto done;
        }
        a[m].given = true;
        if (convert(b, m, args[nargs + j], a)) goto done;
    }
    if (out && (b->flags & PM_OUT_DTYPE) && pm_is_tensor(out)) { /* made in out's dtype */
        int m = arg_index(b, 0, "dtype");
        if (m < b->nargs && !a[m].given)
            a[m].given = true, a[m].dtype = musa_tensor_dtype(pm_t(out));
    }
    /* defaults and missing arguments */
    for (int m = 0; m < b->nargs; m++) {
        if (a[m].given) continue;
        if (!b->has_dflt[m]) {
            PyErr_Format(PyExc_TypeError, "[%s] missing required argument '%s' (pos %d)", b->name,
                         b->argname[m], m + 1);
            goto done;
        }
        apply_default(b, m, a);
    }
    res = b->body(a, b->name);
    if (out) res = pm_into_out(b->name, res, out);
done:
    cleanup(b, a);
    return res;
}

static PyMethodDef *methods;

int pm_bindings_add_functions(PyObject *module) {
    PyMethodDef *defs = PyMem_Calloc((size_t)n_bindings + 1, sizeof(PyMethodDef));
    methods = PyMem_Calloc((size_t)n_bindings + 1, sizeof(PyMethodDef));
    if (!defs || !methods) {
        PyErr_NoMemory();
        return -1;
    }
    PyObject *exports = PyList_New(0);
    if (!exports) return -1;
    int nf = 0, nm = 0;
    for (pm_binding *b = bindings; b; b = b->next) {
        if (parse_spec(b)) goto fail;
        if (b->flags & PM_FN) {
            /* the function's doc is its spec, with PM_OUT's out= (not the method's) */
            const char *doc = b->spec;
            if (b->flags & PM_OUT) {
                size_t n = strlen(b->spec) + 16;
                char *d = PyMem_Malloc(n); /* kept for the module's life, as defs */
                if (!d) {
                    PyErr_NoMemory();
                    goto fail;
                }
                snprintf(d, n, "%s%s out:T=None", b->spec, strchr(b->spec, '*') ? "" : " *");
                doc = d;
            }
            defs[nf] = (PyMethodDef){b->name, (PyCFunction)(void (*)(void))b->fn,
                                     METH_FASTCALL | METH_KEYWORDS, doc};
            PyObject *f = PyCFunction_NewEx(&defs[nf], NULL, NULL);
            if (!f || PyModule_AddObject(module, b->name, f)) {
                Py_XDECREF(f);
                goto fail;
            }
            nf++;
            if (b->name[0] != '_' && !(b->flags & PM_NOEXPORT)) {
                PyObject *name = PyUnicode_FromString(b->name);
                int rc = name ? PyList_Append(exports, name) : -1;
                Py_XDECREF(name);
                if (rc) goto fail;
            }
        }
        if (b->flags & PM_METH)
            methods[nm++] = (PyMethodDef){b->name, (PyCFunction)(void (*)(void))b->meth,
                                          METH_FASTCALL | METH_KEYWORDS, b->spec};
    }
    /* musa/__init__.py re-exports these: a new binding needs no line there */
    if (PyList_Sort(exports)) goto fail;
    PyObject *t = PyList_AsTuple(exports);
    Py_DECREF(exports);
    if (!t || PyModule_AddObject(module, "_exports", t)) {
        Py_XDECREF(t);
        return -1;
    }
    return 0;
fail:
    Py_DECREF(exports);
    return -1;
}

PyMethodDef *pm_bindings_methods(void) {
    return methods;
}

/* (values, indices) results, as a named tuple like PyTorch's return_types */
static PyStructSequence_Field pair_fields[] = {{"values", NULL}, {"indices", NULL}, {NULL, NULL}};
static PyStructSequence_Desc pair_desc = {"musa.return_types.values_indices", NULL, pair_fields, 2};
static PyTypeObject *pair_type;

int pm_pair_init(PyObject *module) {
    pair_type = PyStructSequence_NewType(&pair_desc);
    if (!pair_type) return -1;
    Py_INCREF(pair_type);
    return PyModule_AddObject(module, "values_indices", (PyObject *)pair_type);
}

PyObject *pm_pair(int rc, musa_tensor *x, musa_tensor *y) {
    if (rc) {
        musa_tensor_release(x);
        musa_tensor_release(y);
        return pm_raise();
    }
    PyObject *r = PyStructSequence_New(pair_type);
    if (!r) {
        musa_tensor_release(x);
        musa_tensor_release(y);
        return NULL;
    }
    PyObject *a = pm_wrap(x), *b = pm_wrap(y);
    if (!a || !b) {
        Py_XDECREF(a);
        Py_XDECREF(b);
        Py_DECREF(r);
        return NULL;
    }
    PyStructSequence_SetItem(r, 0, a);
    PyStructSequence_SetItem(r, 1, b);
    return r;
}

int pm_tensor_list(PyObject *o, const char *who, const char *what, bool allow_none, int expect,
                   musa_tensor ***out, int *n) {
    *out = NULL;
    *n = 0;
    if (o == Py_None) return 0;
    PyObject *seq = pm_is_tensor(o) ? PyTuple_Pack(1, o) : PySequence_Fast(o, "");
    if (!seq) {
        PyErr_Format(PyExc_TypeError, "[%s] %s must be a Tensor or a sequence of Tensors, not %s",
                     who, what, Py_TYPE(o)->tp_name);
        return -1;
    }
    Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
    if (expect >= 0 && len != expect) {
        PyErr_Format(PyExc_ValueError, "[%s] %s has %zd entries, expected %d", who, what, len,
                     expect);
        Py_DECREF(seq);
        return -1;
    }
    /* slot 0 holds the count; the tensors are retained, so the sequence
     * (maybe a temporary, maybe changed by Python code run meanwhile) may go */
    musa_tensor **arr = PyMem_Calloc((size_t)len + 1, sizeof *arr);
    if (!arr) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    arr[0] = (musa_tensor *)(intptr_t)len;
    arr++;
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *e = PySequence_Fast_GET_ITEM(seq, i);
        if (e == Py_None && allow_none) continue;
        if (!pm_is_tensor(e)) {
            PyErr_Format(PyExc_TypeError, "[%s] %s[%zd] must be a Tensor%s, not %s", who, what, i,
                         allow_none ? " or None" : "", Py_TYPE(e)->tp_name);
            pm_tensor_list_free(arr);
            Py_DECREF(seq);
            return -1;
        }
        arr[i] = musa_tensor_retain(pm_t(e));
    }
    Py_DECREF(seq);
    *out = arr;
    *n = (int)len;
    return 0;
}

void pm_tensor_list_free(musa_tensor **arr) {
    if (!arr) return;
    intptr_t n = (intptr_t)arr[-1];
    for (intptr_t i = 0; i < n; i++) musa_tensor_release(arr[i]);
    PyMem_Free(arr - 1);
}
