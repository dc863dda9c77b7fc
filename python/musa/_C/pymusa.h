/*
 * pymusa.h - shared declarations of the musa._C extension.
 *
 * The extension is a thin layer over the public C API (include/musa.h):
 * a Tensor type wrapping musa_tensor *, argument conversion, and the
 * mapping of musa status codes to Python exceptions. Functions bound to
 * Python are declared with DEF() (bind.c), which registers them in one
 * list from which both the module's functions and the Tensor methods are
 * built.
 *
 * Conventions: functions returning PyObject * return a new reference or
 * NULL with a Python exception set; int functions return 0 or -1 with an
 * exception set. The GIL is held throughout.
 */
#ifndef PYMUSA_H
#define PYMUSA_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <musa.h>
#include <stdbool.h>

/* ---- the Tensor object ---- */

typedef struct {
    PyObject_HEAD musa_tensor *t; /* owned reference; never NULL once built */
    PyObject *weakrefs;
} PyMusaTensor;

extern PyTypeObject *MusaTensor_Type; /* musa.Tensor (a heap type) */
extern PyTypeObject *MusaDtype_Type;  /* musa.dtype */
extern PyTypeObject *MusaDevice_Type; /* musa.device */
extern PyTypeObject *MusaNode_Type;   /* grad_fn objects */

static inline bool pm_is_tensor(PyObject *o) {
    return PyObject_TypeCheck(o, MusaTensor_Type);
}
static inline musa_tensor *pm_t(PyObject *o) {
    return ((PyMusaTensor *)o)->t;
}

/* The Python object of a C tensor. Steals the reference `t`; returns the
 * existing wrapper when t already has one. NULL t: raises the last musa
 * error. */
PyObject *pm_wrap(musa_tensor *t);
/* Same, but a new wrapper of `type` (a Tensor subclass) is made for a
 * tensor without one. */
PyObject *pm_wrap_as(PyTypeObject *type, musa_tensor *t);
int pm_tensor_type_init(PyObject *module);

/* ---- errors ---- */

/* Raise the Python exception for the last musa error (its class from the
 * status code, its text the message, which already starts with "[op]").
 * Returns NULL. If a Python exception was stashed by a callback (hook,
 * custom backward), that one is raised.
 *
 * Every other message the extension raises starts with "[who]", the Python
 * name the user called (a function, "Tensor.__bool__", "Graph.autodiff"),
 * so helpers that raise for many callers take `who`. */
PyObject *pm_raise(void);
int pm_raise_int(void);
/* Callbacks run from C (hooks, custom backward) stash the Python
 * exception they hit, and return this status to C. */
int pm_stash_exception(void);
void pm_drop_stash(void);

/* ---- conversions ---- */

/* musa.dtype object for a dtype (borrowed), and back (-1 and TypeError
 * naming `who` if o is not a dtype; None gives `dflt`). */
PyObject *pm_dtype_obj(musa_dtype d);
int pm_dtype_from(PyObject *o, int dflt, const char *who);
musa_dtype pm_default_dtype(void);
/* musa.device for a device (new ref); parse a device spec (None, "cpu",
 * "cuda:0", musa.device) into *out; -1 with an exception naming `who` on
 * bad input. */
PyObject *pm_device_obj(musa_device d);
int pm_device_from(PyObject *o, musa_device *out, const char *who);
int pm_types_init(PyObject *module);

/* A tensor from any Python data (tensor, buffer, scalar, nested
 * sequence), always a copy. dtype < 0: inferred. New reference, or NULL
 * with an exception naming `who`. */
musa_tensor *pm_tensor_from_data(PyObject *data, int dtype, const char *who);
/* Wrap an object's buffer (NumPy array, memoryview, ...) without a copy;
 * unaligned memory is copied, or with `share` refused (ValueError). */
musa_tensor *pm_tensor_from_buffer(PyObject *o, const char *who, bool share);
/* An operand: a Tensor (new reference to its tensor) or a Python number
 * (a wrapped number). NULL with TypeError naming `op` otherwise. */
musa_tensor *pm_operand(PyObject *o, const char *op);
/* Python value of a one-element tensor (float, int or bool). */
PyObject *pm_item(musa_tensor *t);
/* Python int from an object supporting __index__, with a range check;
 * errors read "[who] what must be an int ...". */
int pm_int64(PyObject *o, int64_t *out, const char *who, const char *what);
/* A double from a Python number or a one-element tensor; errors read
 * "[who] what must be a number ...". */
int pm_double(PyObject *o, double *out, const char *who, const char *what);
/* A tuple of n tensors (None where t[i] is NULL; new reference), or NULL
 * with an exception: the arguments of Python callbacks from C. */
PyObject *pm_tensor_tuple(int n, musa_tensor *const *t);
/* The first n_in items of seq (a PySequence_Fast of at least n_in), each a
 * Tensor or None, into gin (new references, NULL for None): the gradients a
 * Python backward returned. On another item, gin is released and the
 * TypeError naming `who` stashed (pm_stash_exception's status returned). */
int pm_grads_from(PyObject *seq, int n_in, musa_tensor **gin, const char *who);
/* Ints from an int or a sequence of ints; *n gets the count. */
int pm_int_list(PyObject *o, int64_t *out, int max, int *n, const char *who, const char *what);

/* The innermost frame outside the musa package as an interned "file:line"
 * (jit.c), or NULL without the GIL or a frame: recorded graph nodes and
 * the profiler's MUSA_PROFILE_STACK use it. */
const char *pm_user_location(void);

/* ---- argument parsing and bindings (bind.c) ---- */

/* One parsed argument. */
typedef struct {
    musa_tensor *t; /* T, S (borrowed from the object or owned temp) */
    int64_t i;      /* i */
    double f;       /* f */
    bool b;         /* b */
    int dtype;      /* d: -1 for None */
    int n;          /* I, V: count (-1: None) */
    int64_t v[MUSA_MAX_DIMS];
    PyObject *o;        /* O, L, and the raw object of every argument (borrowed) */
    musa_tensor **list; /* L: n tensors (owned array, borrowed tensors) */
    bool given;         /* passed by the caller (else the default) */
    bool owned;         /* t is a temporary to release */
} pm_arg;

#define PM_MAX_ARGS 16

typedef PyObject *(*pm_body)(pm_arg *a, const char *who);

typedef struct pm_binding {
    const char *name; /* Python name */
    const char *spec; /* "name:K[=default] ..." (see bind.c) */
    int flags;        /* PM_FN, PM_METH, PM_NOEXPORT */
    pm_body body;
    PyObject *(*fn)(PyObject *, PyObject *const *, Py_ssize_t, PyObject *);   /* module function */
    PyObject *(*meth)(PyObject *, PyObject *const *, Py_ssize_t, PyObject *); /* Tensor method */
    /* parsed spec */
    int nargs, kwonly_from;
    char kind[PM_MAX_ARGS];
    char argname[PM_MAX_ARGS][24];
    char dflt[PM_MAX_ARGS][24];
    bool has_dflt[PM_MAX_ARGS];
    struct pm_binding *next;
} pm_binding;

/* PM_FN: a function of musa._C, which the musa package re-exports as
 * musa.<name> (the names listed in _C._exports) unless the name starts with
 * '_' or the binding says PM_NOEXPORT (musa.nn.functional's functions and
 * helpers that other modules wrap). PM_METH: a Tensor method. PM_OUT: the
 * function (not the method) also takes PyTorch's keyword out=, a tensor (a
 * tuple of them for tuple results) that the result is written into and
 * that is returned (bind.c); PM_OUT_DTYPE: a factory whose dtype, when not
 * given, is out's. */
enum { PM_FN = 1, PM_METH = 2, PM_NOEXPORT = 4, PM_OUT = 8, PM_OUT_DTYPE = 16 };

void pm_register(pm_binding *b);
/* out= (PM_OUT's, and an empty out of the generated ops): write the result
 * res (stolen; a tensor, or a tuple of them) into out and return out (for
 * a tuple, a tuple of res's type). */
PyObject *pm_into_out(const char *who, PyObject *res, PyObject *out);
PyObject *pm_call(pm_binding *b, PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                  PyObject *kwnames);
/* Add the registered functions to the module, and their registry
 * _C._exports; the method table of the Tensor type (NULL-terminated, built
 * once). */
int pm_bindings_add_functions(PyObject *module);
PyMethodDef *pm_bindings_methods(void);

/* DEF(pyname, flags, spec) { body using a[i] }: a bound function; with
 * PM_METH, a Tensor method too (self is argument 0). In the body, `who` is
 * the Python name, the prefix of the body's error messages. */
#define DEF(pyname, flags_, spec_)                                                                 \
    static PyObject *body_##pyname(pm_arg *a, const char *who);                                    \
    static pm_binding binding_##pyname;                                                            \
    static PyObject *fn_##pyname(PyObject *m, PyObject *const *args, Py_ssize_t n, PyObject *kw) { \
        (void)m;                                                                                   \
        return pm_call(&binding_##pyname, NULL, args, n, kw);                                      \
    }                                                                                              \
    static PyObject *meth_##pyname(PyObject *s, PyObject *const *args, Py_ssize_t n,               \
                                   PyObject *kw) {                                                 \
        return pm_call(&binding_##pyname, s, args, n, kw);                                         \
    }                                                                                              \
    static pm_binding binding_##pyname = {.name = #pyname,                                         \
                                          .spec = spec_,                                           \
                                          .flags = flags_,                                         \
                                          .body = body_##pyname,                                   \
                                          .fn = fn_##pyname,                                       \
                                          .meth = meth_##pyname};                                  \
    __attribute__((constructor)) static void pm_reg_##pyname(void) {                               \
        pm_register(&binding_##pyname);                                                            \
    }                                                                                              \
    static PyObject *body_##pyname(pm_arg *a, const char *who)

/* A Tensor or a sequence of Tensors (None entries allowed with allow_none,
 * giving NULL) -> an array of retained tensors (free with pm_tensor_list_free);
 * None gives NULL and n = 0. expect >= 0 checks the length. Errors read
 * "[who] what must be ...". */
int pm_tensor_list(PyObject *o, const char *who, const char *what, bool allow_none, int expect,
                   musa_tensor ***out, int *n);
/* Release the tensors of such an array and free it (NULL is a no-op). */
void pm_tensor_list_free(musa_tensor **arr);

/* Results: a new tensor (NULL raises), an int status (None or raise). */
static inline PyObject *pm_ret(musa_tensor *t) {
    return pm_wrap(t);
}
static inline PyObject *pm_none_or_raise(int rc) {
    if (rc) return pm_raise();
    Py_RETURN_NONE;
}
/* (values, indices) pairs such as max(dim) */
PyObject *pm_pair(int rc, musa_tensor *a, musa_tensor *b);
int pm_pair_init(PyObject *module);

/* ---- autograd (autograd.c) ---- */
int pm_autograd_init(PyObject *module);
PyObject *pm_node_obj(musa_node *n); /* new ref; None for NULL */

/* ---- interop (interop.c) ---- */
int pm_interop_init(PyObject *module);
extern PyBufferProcs pm_tensor_buffer_procs;

/* ---- long kernels (interrupt.c) ---- */
int pm_interrupt_init(void);
/* Around a long call into musa made with the GIL held (begin true, then
 * false): releases the GIL and routes Ctrl-C to musa_interrupt meanwhile. */
void pm_long_op(bool begin);

/* ---- static graphs (jit.c) ---- */
int pm_jit_init(PyObject *module);
/* The graph of a musa._C.Graph object (borrowed), or NULL with TypeError. */
musa_graph *pm_graph(PyObject *o, const char *who);
/* A str from a malloc'd C string, which it frees; NULL raises the last error. */
PyObject *pm_str_result(char *s);

/* ---- compiled plans (jit_plan.c) ---- */
int pm_plan_init(PyObject *module);
/* A musa._C.Plan owning p (freed on failure), built from the Graph object
 * graph (kept alive) whose graph is g. */
PyObject *pm_plan_wrap(musa_plan *p, PyObject *graph, musa_graph *g);

/* Tell a running capture that Python reads t's value on the host
 * (MUSA_READ_BOOL / SCALAR with the value; MUSA_READ_DATA for whole tensors). */
void pm_host_read(musa_tensor *t, int kind, double value);

/* ---- indexing (index.c) ---- */
PyObject *pm_getitem(PyObject *self, PyObject *key);
int pm_setitem(PyObject *self, PyObject *key, PyObject *value);

#endif
