/*
 * ops.c - the op functions and Tensor methods bound from the C API.
 *
 * Each DEF names the Python function, whether it is a module function
 * (PM_FN), a Tensor method (PM_METH, self = argument 0) or both, and its
 * parameters (see bind.c for the spec syntax). Bodies translate the parsed
 * arguments to one C API call. Operators (+, *, [], ...) are in tensor.c
 * and index.c; Python-level conveniences in musa/_tensor.py.
 */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "pymusa.h"

#define FM (PM_FN | PM_METH)

/* dims argument: None (all) -> 0 dims */
#define NDIMS(x) ((x).n < 0 ? 0 : (x).n)

/* ---- creation ---- */

/* The layout objects (musa.strided and its kind), registered by the Python
 * package at import (_register_layout): layout= takes None or strided. */
static PyObject *strided_layout;

DEF(_register_layout, PM_FN, "strided:O") {
    Py_XDECREF(strided_layout);
    strided_layout = Py_NewRef(a[0].o);
    Py_RETURN_NONE;
}

/* layout= and pin_memory= of a creation function: dense (strided) tensors
 * in ordinary memory are all musa makes */
static int check_layout(const char *who, PyObject *layout, bool pin_memory) {
    if (pin_memory) {
        PyErr_Format(PyExc_RuntimeError,
                     "[%s] pin_memory=True pins host memory for a CUDA device; musa has none", who);
        return -1;
    }
    if (layout == Py_None || layout == strided_layout) return 0;
    if (strided_layout && Py_TYPE(layout) == Py_TYPE(strided_layout)) {
        PyErr_Format(PyExc_NotImplementedError,
                     "[%s] layout=%R: musa tensors are strided (no sparse tensors)", who, layout);
        return -1;
    }
    PyErr_Format(PyExc_TypeError, "[%s] layout must be a musa.layout (musa.strided), got %s", who,
                 Py_TYPE(layout)->tp_name);
    return -1;
}

/* device=, layout= and pin_memory= of a creation function: -1 with the
 * error set unless they name what musa makes (dense tensors on the cpu) */
static int check_options(const char *who, PyObject *device, PyObject *layout, bool pin_memory) {
    musa_device dev;
    if (pm_device_from(device, &dev, who) || check_layout(who, layout, pin_memory)) return -1;
    if (musa_device_check(dev)) {
        pm_raise();
        return -1;
    }
    return 0;
}

/* the check for the creation functions written in Python */
DEF(_factory_options, PM_FN, "who:O device:O=None layout:O=None pin_memory:b=False") {
    const char *name = PyUnicode_Check(a[0].o) ? PyUnicode_AsUTF8(a[0].o) : NULL;
    if (!name) {
        PyErr_SetString(PyExc_TypeError, "[_factory_options] who must be a str");
        return NULL;
    }
    if (check_options(name, a[1].o, a[2].o, a[3].b)) return NULL;
    Py_RETURN_NONE;
}

/* The creation functions' options, the end of every creation function's
 * spec (before out), in finish_new's order */
#define FACTORY_OPTS "device:O=None requires_grad:b=False layout:O=None pin_memory:b=False"

/* Finishes a creation function: opt[0] device, opt[1] requires_grad,
 * opt[2] layout, opt[3] pin_memory (FACTORY_OPTS's arguments). who names
 * the caller in errors. */
static PyObject *with_grad(musa_tensor *t, bool requires_grad) {
    if (requires_grad && musa_tensor_set_requires_grad(t, true)) {
        musa_tensor_release(t);
        return pm_raise();
    }
    return pm_wrap(t);
}
static PyObject *finish_new(const char *who, musa_tensor *t, const pm_arg *opt) {
    if (!t) return pm_raise();
    if (check_options(who, opt[0].o, opt[2].o, opt[3].b)) {
        musa_tensor_release(t);
        return NULL;
    }
    return with_grad(t, opt[1].b);
}

static int dtype_or_default(int d) {
    return d < 0 ? (int)pm_default_dtype() : d;
}

DEF(tensor, PM_FN, "data:O * dtype:d=None " FACTORY_OPTS) {
    /* the options first: a bad device is refused before the data is read */
    if (check_options(who, a[2].o, a[4].o, a[5].b)) return NULL;
    musa_tensor *t = pm_tensor_from_data(a[0].o, a[1].dtype, who);
    if (!t) return NULL;
    return with_grad(t, a[3].b);
}

DEF(zeros, PM_FN | PM_OUT | PM_OUT_DTYPE, "size:V * dtype:d=None " FACTORY_OPTS) {
    return finish_new(who, musa_zeros(a[0].n, a[0].v, dtype_or_default(a[1].dtype)), &a[2]);
}
DEF(ones, PM_FN | PM_OUT | PM_OUT_DTYPE, "size:V * dtype:d=None " FACTORY_OPTS) {
    return finish_new(who, musa_ones(a[0].n, a[0].v, dtype_or_default(a[1].dtype)), &a[2]);
}
DEF(empty, PM_FN | PM_OUT | PM_OUT_DTYPE, "size:V * dtype:d=None " FACTORY_OPTS) {
    return finish_new(who, musa_empty(a[0].n, a[0].v, dtype_or_default(a[1].dtype)), &a[2]);
}
DEF(full, PM_FN | PM_OUT | PM_OUT_DTYPE, "size:I fill_value:O * dtype:d=None " FACTORY_OPTS) {
    int d = a[2].dtype;
    if (d < 0) /* from the fill value, as PyTorch */
        d = PyBool_Check(a[1].o)   ? MUSA_DTYPE_BOOL
            : PyLong_Check(a[1].o) ? MUSA_DTYPE_INT64
                                   : (int)pm_default_dtype();
    double v;
    if (pm_double(a[1].o, &v, who, "fill_value")) return NULL;
    return finish_new(who, musa_full(a[0].n, a[0].v, v, d), &a[3]);
}

static musa_tensor *like(musa_tensor *x, int dtype,
                         musa_tensor *(*make)(int, const int64_t *, musa_dtype)) {
    return make(musa_tensor_ndim(x), musa_tensor_shape(x),
                dtype < 0 ? musa_tensor_dtype(x) : (musa_dtype)dtype);
}
/* name(input, dtype=None, ...): make's tensor of input's shape (and dtype) */
#define LIKE_FACTORY(name, make)                                                                   \
    DEF(name, FM, "input:T * dtype:d=None " FACTORY_OPTS) {                                        \
        return finish_new(who, like(a[0].t, a[1].dtype, make), &a[2]);                             \
    }
LIKE_FACTORY(zeros_like, musa_zeros)
LIKE_FACTORY(ones_like, musa_ones)
LIKE_FACTORY(empty_like, musa_empty)
LIKE_FACTORY(rand_like, musa_rand)
LIKE_FACTORY(randn_like, musa_randn)
DEF(full_like, FM, "input:T fill_value:f * dtype:d=None " FACTORY_OPTS) {
    musa_tensor *x = a[0].t;
    musa_dtype d = a[2].dtype < 0 ? musa_tensor_dtype(x) : (musa_dtype)a[2].dtype;
    return finish_new(who, musa_full(musa_tensor_ndim(x), musa_tensor_shape(x), a[1].f, d), &a[3]);
}

DEF(rand, PM_FN, "size:V * dtype:d=None " FACTORY_OPTS) {
    return finish_new(who, musa_rand(a[0].n, a[0].v, dtype_or_default(a[1].dtype)), &a[2]);
}
DEF(randn, PM_FN, "size:V * dtype:d=None " FACTORY_OPTS) {
    return finish_new(who, musa_randn(a[0].n, a[0].v, dtype_or_default(a[1].dtype)), &a[2]);
}
/* randint(high, size) or randint(low, high, size) */
DEF(randint, PM_FN, "low:i high:O=None size:I=None * dtype:d=None " FACTORY_OPTS) {
    int64_t low = 0, high = a[0].i;
    pm_arg *size = &a[2];
    int64_t tmp[MUSA_MAX_DIMS];
    int n = size->n;
    if (a[1].o != Py_None) {
        if (PyIndex_Check(a[1].o)) {
            low = a[0].i;
            if (pm_int64(a[1].o, &high, who, "high")) return NULL;
        } else { /* randint(high, size) */
            if (pm_int_list(a[1].o, tmp, MUSA_MAX_DIMS, &n, who, "size")) return NULL;
            memcpy(size->v, tmp, sizeof(int64_t) * (size_t)n);
        }
    }
    if (n < 0) {
        PyErr_SetString(PyExc_TypeError, "[randint] missing required argument 'size'");
        return NULL;
    }
    int d = a[3].dtype < 0 ? MUSA_DTYPE_INT64 : a[3].dtype;
    return finish_new(who, musa_randint(low, high, n, size->v, d), &a[4]);
}

/* arange(end) / arange(start, end, step=1) */
DEF(arange, PM_FN | PM_OUT | PM_OUT_DTYPE,
    "start:O end:O=None step:O=None * dtype:d=None " FACTORY_OPTS) {
    PyObject *vals[3] = {a[0].o, a[1].o, a[2].o};
    double v[3] = {0, 0, 1};
    bool all_int = true;
    if (vals[0] == Py_None) {
        PyErr_Format(PyExc_TypeError, "[%s] %s must be a number, not None", who,
                     vals[1] == Py_None ? "end" : "start");
        return NULL;
    }
    for (int i = 0; i < 3; i++) {
        if (vals[i] == Py_None) continue;
        if (pm_is_tensor(vals[i])) {
            if (musa_tensor_item(pm_t(vals[i]), &v[i])) return pm_raise();
            all_int = all_int && !musa_dtype_is_floating(musa_tensor_dtype(pm_t(vals[i])));
            continue;
        }
        all_int = all_int && PyIndex_Check(vals[i]);
        static const char *names[] = {"start", "end", "step"};
        if (pm_double(vals[i], &v[i], who, i == 0 && vals[1] == Py_None ? "end" : names[i]))
            return NULL;
    }
    double start = v[0], end = v[1], step = v[2];
    if (vals[1] == Py_None) start = 0, end = v[0];
    int d = a[3].dtype >= 0 ? a[3].dtype : all_int ? MUSA_DTYPE_INT64 : (int)pm_default_dtype();
    return finish_new(who, musa_arange(start, end, step, d), &a[4]);
}
DEF(linspace, PM_FN | PM_OUT | PM_OUT_DTYPE, "start:f end:f steps:i * dtype:d=None " FACTORY_OPTS) {
    return finish_new(who, musa_linspace(a[0].f, a[1].f, a[2].i, dtype_or_default(a[3].dtype)),
                      &a[4]);
}
DEF(eye, PM_FN | PM_OUT | PM_OUT_DTYPE, "n:i m:O=None * dtype:d=None " FACTORY_OPTS) {
    int64_t m = a[0].i;
    if (a[1].o != Py_None && pm_int64(a[1].o, &m, who, "m")) return NULL;
    if (m < 0 || a[0].i < 0) {
        PyErr_Format(PyExc_ValueError, "[%s] n and m must be non-negative, got %lld and %lld", who,
                     (long long)a[0].i, (long long)m);
        return NULL;
    }
    return finish_new(who, musa_eye(a[0].i, m, dtype_or_default(a[2].dtype)), &a[3]);
}

DEF(manual_seed, PM_FN, "seed:i") {
    musa_manual_seed((uint64_t)a[0].i);
    Py_RETURN_NONE;
}
DEF(initial_seed, PM_FN, "") {
    return PyLong_FromUnsignedLongLong(musa_initial_seed());
}
DEF(get_rng_state, PM_FN, "") {
    uint64_t seed, off;
    musa_get_rng_state(&seed, &off);
    return Py_BuildValue("(KK)", (unsigned long long)seed, (unsigned long long)off);
}
DEF(set_rng_state, PM_FN, "state:O") {
    unsigned long long seed, off;
    if (!PyArg_ParseTuple(a[0].o, "KK:set_rng_state", &seed, &off)) return NULL;
    musa_set_rng_state(seed, off);
    Py_RETURN_NONE;
}

/* ---- ops bound by the rows of ops.def whose py column is `gen` ---- */

/* f(..., out=t): the op's result written into t (PyTorch's out=: t has the
 * result's shape and a dtype it casts to; an empty t is resized to it),
 * which is returned. */
static PyObject *into(const char *name, int *op, int n_in, const pm_arg *a, const pm_arg *out) {
    if (*op < 0) *op = musa_op_lookup(name);
    musa_tensor *ins[2] = {a[0].t, n_in > 1 ? a[1].t : NULL}, *outs[1] = {out->t};
    if (musa_tensor_numel(out->t) == 0) { /* maybe resized: through the result */
        musa_tensor *r[1] = {NULL};
        return pm_into_out(name, musa_op_call(*op, n_in, ins, NULL, r) ? pm_raise() : pm_wrap(r[0]),
                           out->o);
    }
    if (musa_op_call(*op, n_in, ins, NULL, outs)) return pm_raise();
    return Py_NewRef(out->o);
}

/* _into_out(who, result, out): pm_into_out for functions written in Python
 * (musa/_functions.py, with_out); out None returns result. */
DEF(_into_out, PM_FN, "who:O result:O out:O") {
    const char *w = PyUnicode_Check(a[0].o) ? PyUnicode_AsUTF8(a[0].o) : NULL;
    if (!w) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "[_into_out] who must be a str");
        return NULL;
    }
    return a[2].o == Py_None ? Py_NewRef(a[1].o) : pm_into_out(w, Py_NewRef(a[1].o), a[2].o);
}

/* The binding follows the row's public function (its fn column), with
 * out=; a row whose Python signature differs (keywords, other names) says
 * py hand and has its DEF below. */
#define PY_GEN_unary(name)                                                                         \
    DEF(name, FM, "input:T * out:T=None") {                                                        \
        static int op = -1;                                                                        \
        return a[1].t ? into(#name, &op, 1, a, &a[1]) : pm_ret(musa_##name(a[0].t));               \
    }
#define PY_GEN_binary(name)                                                                        \
    DEF(name, FM, "input:S other:S * out:T=None") {                                                \
        static int op = -1;                                                                        \
        return a[2].t ? into(#name, &op, 2, a, &a[2]) : pm_ret(musa_##name(a[0].t, a[1].t));       \
    }
#define PY_GEN_ternary(name)  _Static_assert(0, "ops.def: " #name ": write its DEF, mark py hand");
#define PY_GEN_hand(name)     _Static_assert(0, "ops.def: " #name ": write its DEF, mark py hand");
#define PY_GEN_internal(name) _Static_assert(0, "ops.def: " #name " is internal: mark py none");
#define PY_gen(name, fn)      PY_GEN_##fn(name)
#define PY_hand(name, fn)
#define PY_none(name, fn)
#define OP(name, n_in, n_out, attrs, infer, kernel, ws, flags, grad, save, fn, py) PY_##py(name, fn)
#include "../../../src/ops/ops.def"
#undef OP

/* The rows with their fn and py columns, for the test that each op is bound
 * as its row says (tests/python/test_op_table.py): ((name, fn, py), ...). */
DEF(_op_table, PM_FN, "") {
    static const char *const rows[][3] = {
#define OP(name, n_in, n_out, attrs, infer, kernel, ws, flags, grad, save, fn, py)                 \
    {#name, #fn, #py},
#include "../../../src/ops/ops.def"
#undef OP
    };
    int n = (int)(sizeof rows / sizeof rows[0]);
    PyObject *r = PyTuple_New(n);
    for (int i = 0; r && i < n; i++) {
        PyObject *row = Py_BuildValue("(sss)", rows[i][0], rows[i][1], rows[i][2]);
        if (!row)
            Py_CLEAR(r);
        else
            PyTuple_SET_ITEM(r, i, row);
    }
    return r;
}

/* ---- elementwise ---- */

/* composites with the shape of a unary op */
DEF(contiguous, FM, "input:T") {
    return pm_ret(musa_contiguous(a[0].t));
}
DEF(nonzero, FM | PM_OUT, "input:T") {
    return pm_ret(musa_nonzero(a[0].t));
}

/* other * alpha, when alpha is given, computed in the dtype of input +
 * other (as PyTorch: a bfloat16 other does not round the product, an int
 * number times alpha does not wrap). NULL with the musa error set. */
static musa_tensor *scaled(musa_tensor *input, pm_arg *alpha, musa_tensor *other,
                           musa_tensor **tmp) {
    *tmp = NULL;
    /* (no input or other: the op names the missing tensor) */
    if (!alpha->t || !other || !input) return other;
    musa_tensor *both[2] = {input, other};
    musa_dtype d = musa_result_type(2, both);
    if (musa_tensor_dtype(other) == d) return *tmp = musa_mul(other, alpha->t);
    musa_tensor *o = musa_cast(other, d);
    if (!o) return NULL;
    *tmp = musa_mul(o, alpha->t);
    musa_tensor_release(o);
    return *tmp;
}
DEF(add, FM | PM_OUT, "input:S other:S * alpha:S=None") {
    musa_tensor *tmp, *o = scaled(a[0].t, &a[2], a[1].t, &tmp);
    musa_tensor *r = o || !a[1].t ? musa_add(a[0].t, o) : NULL;
    musa_tensor_release(tmp);
    return pm_ret(r);
}
DEF(sub, FM | PM_OUT, "input:S other:S * alpha:S=None") {
    musa_tensor *tmp, *o = scaled(a[0].t, &a[2], a[1].t, &tmp);
    musa_tensor *r = o || !a[1].t ? musa_sub(a[0].t, o) : NULL;
    musa_tensor_release(tmp);
    return pm_ret(r);
}
DEF(div, FM | PM_OUT, "input:S other:S * rounding_mode:O=None") {
    PyObject *m = a[2].o;
    if (m == Py_None) return pm_ret(musa_div(a[0].t, a[1].t));
    const char *s = PyUnicode_Check(m) ? PyUnicode_AsUTF8(m) : NULL;
    if (s && !strcmp(s, "floor")) return pm_ret(musa_floor_divide(a[0].t, a[1].t));
    if (s && !strcmp(s, "trunc")) {
        musa_tensor *q = musa_div(a[0].t, a[1].t);
        if (!q) return pm_raise();
        musa_tensor *z = musa_number(0), *neg = musa_lt(q, z), *fl = musa_floor(q),
                    *ce = musa_ceil(q);
        musa_tensor *r = musa_where(neg, ce, fl);
        bool ints = !musa_dtype_is_floating(musa_tensor_dtype(a[0].t)) &&
                    !musa_dtype_is_floating(musa_tensor_dtype(a[1].t));
        musa_tensor *c = r && ints ? musa_cast(r, musa_promote_types(musa_tensor_dtype(a[0].t),
                                                                     musa_tensor_dtype(a[1].t)))
                                   : musa_tensor_retain(r);
        musa_tensor_release(q), musa_tensor_release(z), musa_tensor_release(neg),
            musa_tensor_release(fl), musa_tensor_release(ce), musa_tensor_release(r);
        return pm_ret(c);
    }
    PyErr_SetString(PyExc_ValueError, "[div] rounding_mode must be None, 'floor' or 'trunc'");
    return NULL;
}
DEF(where, FM | PM_OUT, "condition:T input:S other:S") {
    return pm_ret(musa_where(a[0].t, a[1].t, a[2].t));
}
DEF(clamp, FM | PM_OUT, "input:T min:O=None max:O=None") {
    double lo, hi;
    bool has_lo = a[1].o != Py_None, has_hi = a[2].o != Py_None;
    if (pm_is_tensor(a[1].o) || pm_is_tensor(a[2].o)) { /* tensor bounds: maximum / minimum */
        musa_tensor *r = musa_tensor_retain(a[0].t);
        PyObject *bounds[2] = {a[1].o, a[2].o};
        for (int i = 0; i < 2 && r; i++) {
            if (bounds[i] == Py_None) continue;
            musa_tensor *b = pm_operand(bounds[i], who);
            if (!b) {
                musa_tensor_release(r);
                return NULL;
            }
            musa_tensor *n = i == 0 ? musa_maximum(r, b) : musa_minimum(r, b);
            musa_tensor_release(r);
            musa_tensor_release(b);
            r = n;
        }
        return pm_ret(r);
    }
    if (has_lo && pm_double(a[1].o, &lo, who, "min")) return NULL;
    if (has_hi && pm_double(a[2].o, &hi, who, "max")) return NULL;
    if (!has_lo && !has_hi) {
        PyErr_SetString(PyExc_ValueError,
                        "[clamp] at least one of 'min' or 'max' must not be None");
        return NULL;
    }
    return pm_ret(musa_clamp(a[0].t, has_lo ? &lo : NULL, has_hi ? &hi : NULL));
}
/* Tensor.cast, and _C.cast for musa's Python helpers; there is no musa.cast */
DEF(cast, FM | PM_NOEXPORT, "input:T dtype:d") {
    if (a[1].dtype < 0) {
        PyErr_SetString(PyExc_TypeError, "[cast] dtype must not be None");
        return NULL;
    }
    return pm_ret(musa_cast(a[0].t, a[1].dtype));
}

/* in place */
#define INPLACE(name)                                                                              \
    DEF(name##_, PM_METH, "self:T other:S") {                                                      \
        if (musa_##name##_(a[0].t, a[1].t)) return pm_raise();                                     \
        return Py_NewRef(a[0].o);                                                                  \
    }
INPLACE(mul)
INPLACE(div)
DEF(add_, PM_METH, "self:T other:S * alpha:S=None") {
    musa_tensor *tmp, *o = scaled(a[0].t, &a[2], a[1].t, &tmp);
    int rc = o ? musa_add_(a[0].t, o) : -1;
    musa_tensor_release(tmp);
    if (rc) return pm_raise();
    return Py_NewRef(a[0].o);
}
DEF(sub_, PM_METH, "self:T other:S * alpha:S=None") {
    musa_tensor *tmp, *o = scaled(a[0].t, &a[2], a[1].t, &tmp);
    int rc = o ? musa_sub_(a[0].t, o) : -1;
    musa_tensor_release(tmp);
    if (rc) return pm_raise();
    return Py_NewRef(a[0].o);
}
DEF(copy_, PM_METH, "self:T src:S") {
    if (musa_copy_(a[0].t, a[1].t)) return pm_raise();
    return Py_NewRef(a[0].o);
}
DEF(fill_, PM_METH, "self:T value:f") {
    if (musa_fill_(a[0].t, a[1].f)) return pm_raise();
    return Py_NewRef(a[0].o);
}
DEF(zero_, PM_METH, "self:T") {
    if (musa_zero_(a[0].t)) return pm_raise();
    return Py_NewRef(a[0].o);
}

/* ---- reductions ---- */

/* optional dtype cast before reducing */
static musa_tensor *with_dtype(musa_tensor *x, int dtype) {
    return dtype < 0 || dtype == (int)musa_tensor_dtype(x) ? musa_tensor_retain(x)
                                                           : musa_cast(x, dtype);
}
/* ... and of the result (integer sums accumulate in int64): the dtype asked
 * for is the result's, as in PyTorch. Steals r. */
static musa_tensor *result_as(musa_tensor *r, int dtype) {
    if (!r || dtype < 0 || dtype == (int)musa_tensor_dtype(r)) return r;
    musa_tensor *c = musa_cast(r, dtype);
    musa_tensor_release(r);
    return c;
}
#define REDUCE(name)                                                                               \
    DEF(name, FM | PM_OUT, "input:T dim:I=None keepdim:b=False * dtype:d=None") {                  \
        musa_tensor *x = with_dtype(a[0].t, a[3].dtype);                                           \
        musa_tensor *r = musa_##name(x, NDIMS(a[1]), a[1].v, a[2].b);                              \
        musa_tensor_release(x);                                                                    \
        return pm_ret(result_as(r, a[3].dtype));                                                   \
    }
REDUCE(sum)
REDUCE(mean)
REDUCE(prod)
DEF(amax, FM | PM_OUT, "input:T dim:I=None keepdim:b=False") {
    return pm_ret(musa_amax(a[0].t, NDIMS(a[1]), a[1].v, a[2].b));
}
DEF(amin, FM | PM_OUT, "input:T dim:I=None keepdim:b=False") {
    return pm_ret(musa_amin(a[0].t, NDIMS(a[1]), a[1].v, a[2].b));
}
DEF(logsumexp, FM | PM_OUT, "input:T dim:I keepdim:b=False") {
    return pm_ret(musa_logsumexp(a[0].t, NDIMS(a[1]), a[1].v, a[2].b));
}

static int correction_of(pm_arg *unbiased, pm_arg *correction, int64_t *out, const char *who) {
    *out = 1;
    if (correction->o && correction->o != Py_None)
        return pm_int64(correction->o, out, who, "correction");
    if (unbiased->o && unbiased->o != Py_None) {
        int t = PyObject_IsTrue(unbiased->o); /* -1: no truth value (an empty tensor) */
        if (t < 0) return -1;
        *out = t;
    }
    return 0;
}
/* var(x, False) is PyTorch's var(input, unbiased): a bool in dim's place is
 * unbiased, over every dim (it was dim 0) */
static int bool_dim_is_unbiased(pm_arg *a, const char *who) {
    if (!a[1].given || !PyBool_Check(a[1].o)) return 0;
    if (a[2].given && a[2].o != Py_None) {
        PyErr_Format(PyExc_TypeError,
                     "[%s] a bool in the place of dim is unbiased, which is given too", who);
        return -1;
    }
    a[2].o = a[1].o, a[2].given = true, a[1].n = -1;
    return 0;
}
DEF(var, FM | PM_OUT, "input:T dim:I=None unbiased:O=None keepdim:b=False * correction:O=None") {
    int64_t c;
    if (bool_dim_is_unbiased(a, who) || correction_of(&a[2], &a[4], &c, who)) return NULL;
    return pm_ret(musa_var(a[0].t, NDIMS(a[1]), a[1].v, c, a[3].b));
}
DEF(std, FM | PM_OUT, "input:T dim:I=None unbiased:O=None keepdim:b=False * correction:O=None") {
    int64_t c;
    if (bool_dim_is_unbiased(a, who) || correction_of(&a[2], &a[4], &c, who)) return NULL;
    return pm_ret(musa_std(a[0].t, NDIMS(a[1]), a[1].v, c, a[3].b));
}
/* musa.norm is musa._functions.norm, which wraps norm and norm_list */
DEF(norm, FM | PM_NOEXPORT, "input:T p:O=None dim:I=None keepdim:b=False") {
    double p = 2;
    PyObject *po = a[1].o;
    if (po != Py_None) {
        if (PyUnicode_Check(po)) {
            if (strcmp(PyUnicode_AsUTF8(po), "fro")) {
                PyErr_Format(PyExc_ValueError, "[norm] unsupported norm type '%U'", po);
                return NULL;
            }
        } else if (pm_double(po, &p, who, "p")) {
            return NULL;
        }
    }
    return pm_ret(musa_norm(a[0].t, p, NDIMS(a[2]), a[2].v, a[3].b));
}
DEF(norm_list, PM_FN | PM_NOEXPORT, "tensors:L") {
    return pm_ret(musa_norm_list(a[0].n, a[0].list));
}

/* max(input) / max(input, dim, keepdim) / max(input, other) */
static PyObject *max_min(pm_arg *a, bool is_max, const char *who) {
    if (a[1].o == Py_None)
        return pm_ret(is_max ? musa_amax(a[0].t, 0, NULL, false)
                             : musa_amin(a[0].t, 0, NULL, false));
    if (pm_is_tensor(a[1].o))
        return pm_ret(is_max ? musa_maximum(a[0].t, pm_t(a[1].o))
                             : musa_minimum(a[0].t, pm_t(a[1].o)));
    int64_t dim;
    if (pm_int64(a[1].o, &dim, who, "dim")) return NULL;
    musa_tensor *v = NULL, *i = NULL;
    int rc = is_max ? musa_max_dim(a[0].t, dim, a[2].b, &v, &i)
                    : musa_min_dim(a[0].t, dim, a[2].b, &v, &i);
    return pm_pair(rc, v, i);
}
DEF(max, FM | PM_OUT, "input:T dim:O=None keepdim:b=False") {
    return max_min(a, true, who);
}
DEF(min, FM | PM_OUT, "input:T dim:O=None keepdim:b=False") {
    return max_min(a, false, who);
}
DEF(argmax, FM | PM_OUT, "input:T dim:O=None keepdim:b=False") {
    int64_t dim = MUSA_DIM_ALL;
    if (a[1].o != Py_None && pm_int64(a[1].o, &dim, who, "dim")) return NULL;
    return pm_ret(musa_argmax(a[0].t, dim, a[2].b));
}
DEF(argmin, FM | PM_OUT, "input:T dim:O=None keepdim:b=False") {
    int64_t dim = MUSA_DIM_ALL;
    if (a[1].o != Py_None && pm_int64(a[1].o, &dim, who, "dim")) return NULL;
    return pm_ret(musa_argmin(a[0].t, dim, a[2].b));
}
DEF(cumsum, FM | PM_OUT, "input:T dim:i * dtype:d=None") {
    musa_tensor *x = with_dtype(a[0].t, a[2].dtype);
    musa_tensor *r = musa_cumsum(x, a[1].i);
    musa_tensor_release(x);
    return pm_ret(result_as(r, a[2].dtype));
}
DEF(cumprod, FM | PM_OUT, "input:T dim:i * dtype:d=None") {
    musa_tensor *x = with_dtype(a[0].t, a[2].dtype);
    musa_tensor *r = musa_cumprod(x, a[1].i);
    musa_tensor_release(x);
    return pm_ret(result_as(r, a[2].dtype));
}
DEF(logcumsumexp, FM | PM_OUT, "input:T dim:i") {
    return pm_ret(musa_logcumsumexp(a[0].t, a[1].i));
}
static PyObject *cum_extremum(pm_arg *a, bool is_max) {
    musa_tensor *v = NULL, *i = NULL;
    int rc = is_max ? musa_cummax(a[0].t, a[1].i, &v, &i) : musa_cummin(a[0].t, a[1].i, &v, &i);
    return pm_pair(rc, v, i); /* (rc first: v and i are set by the call) */
}
DEF(cummax, FM | PM_OUT, "input:T dim:i") {
    return cum_extremum(a, true);
}
DEF(cummin, FM | PM_OUT, "input:T dim:i") {
    return cum_extremum(a, false);
}
/* stable: accepted for PyTorch's signature; musa's sort is always stable */
DEF(sort, FM | PM_OUT, "input:T dim:i=-1 descending:b=False * stable:O=None") {
    musa_tensor *v = NULL, *i = NULL;
    int rc = musa_sort(a[0].t, a[1].i, a[2].b, &v, &i);
    return pm_pair(rc, v, i);
}
DEF(topk, FM | PM_OUT, "input:T k:i dim:i=-1 largest:b=True sorted:b=True") {
    musa_tensor *v = NULL, *i = NULL;
    int rc = musa_topk(a[0].t, a[1].i, a[2].i, a[3].b, &v, &i);
    return pm_pair(rc, v, i);
}

/* ---- shape ---- */

DEF(view, PM_METH, "self:T shape:V") {
    if (a[1].n < 0) {
        PyErr_SetString(PyExc_TypeError, "[view] a shape is required");
        return NULL;
    }
    return pm_ret(musa_view(a[0].t, a[1].n, a[1].v));
}
DEF(_view_dtype, PM_FN, "input:T dtype:d") {
    return pm_ret(musa_view_dtype(a[0].t, (musa_dtype)a[1].dtype));
}
DEF(reshape, FM, "input:T shape:V") {
    if (a[1].n < 0) {
        PyErr_SetString(PyExc_TypeError, "[reshape] a shape is required");
        return NULL;
    }
    return pm_ret(musa_reshape(a[0].t, a[1].n, a[1].v));
}
DEF(flatten, FM, "input:T start_dim:i=0 end_dim:i=-1") {
    return pm_ret(musa_flatten(a[0].t, a[1].i, a[2].i));
}
DEF(permute, FM, "input:T dims:V") {
    if (a[1].n < 0) {
        PyErr_SetString(PyExc_TypeError, "[permute] dims are required");
        return NULL;
    }
    return pm_ret(musa_permute(a[0].t, a[1].n, a[1].v));
}
DEF(transpose, FM, "input:T dim0:i dim1:i") {
    return pm_ret(musa_transpose(a[0].t, a[1].i, a[2].i));
}
DEF(t, FM, "input:T") {
    musa_tensor *x = a[0].t;
    if (musa_tensor_ndim(x) > 2) {
        PyErr_Format(PyExc_RuntimeError,
                     "[t] t() expects a tensor with <= 2 dimensions, but self is %dD",
                     musa_tensor_ndim(x));
        return NULL;
    }
    return pm_ret(musa_tensor_ndim(x) < 2 ? musa_tensor_retain(x) : musa_transpose(x, 0, 1));
}
DEF(select, FM, "input:T dim:i index:i") {
    return pm_ret(musa_select(a[0].t, a[1].i, a[2].i));
}
DEF(narrow, FM, "input:T dim:i start:i length:i") {
    if (a[3].i < 0) {
        PyErr_SetString(PyExc_ValueError, "[narrow] length must be non-negative");
        return NULL;
    }
    int nd = musa_tensor_ndim(a[0].t);
    if (nd == 0) {
        PyErr_SetString(PyExc_IndexError, "[narrow] cannot be applied to a 0-d tensor");
        return NULL;
    }
    if (a[1].i < -nd || a[1].i >= nd) {
        PyErr_Format(PyExc_IndexError, "[narrow] dim %lld is out of range for a %d-d tensor",
                     (long long)a[1].i, nd);
        return NULL;
    }
    int64_t size = musa_tensor_size(a[0].t, a[1].i), st = a[2].i, len = a[3].i;
    if (st < -size || st > size) {
        PyErr_Format(PyExc_IndexError, "[narrow] start %lld is out of range for size %lld",
                     (long long)st, (long long)size);
        return NULL;
    }
    if (st < 0) st += size;
    if (len > size - st) { /* no overflow: both sides are in [0, size] or len */
        PyErr_Format(PyExc_ValueError,
                     "[narrow] start (%lld) + length (%lld) exceeds dimension size (%lld)",
                     (long long)st, (long long)len, (long long)size);
        return NULL;
    }
    return pm_ret(musa_slice(a[0].t, a[1].i, st, st + len, 1));
}
DEF(expand, PM_METH, "self:T size:V") {
    if (a[1].n < 0) {
        PyErr_SetString(PyExc_TypeError, "[expand] sizes are required");
        return NULL;
    }
    return pm_ret(musa_expand(a[0].t, a[1].n, a[1].v));
}
DEF(broadcast_to, FM, "input:T size:I") {
    return pm_ret(musa_broadcast_to(a[0].t, a[1].n, a[1].v));
}
DEF(squeeze, FM, "input:T dim:I=None") {
    return pm_ret(musa_squeeze(a[0].t, NDIMS(a[1]), a[1].v));
}
DEF(unsqueeze, FM, "input:T dim:i") {
    return pm_ret(musa_unsqueeze(a[0].t, a[1].i));
}
DEF(as_strided, FM, "input:T size:I stride:I storage_offset:O=None") {
    if (a[1].n != a[2].n) {
        PyErr_SetString(PyExc_ValueError, "[as_strided] size and stride must have the same length");
        return NULL;
    }
    int64_t offset = musa_tensor_offset(a[0].t); /* None: the input's own, as PyTorch */
    if (a[3].o != Py_None && pm_int64(a[3].o, &offset, who, "storage_offset")) return NULL;
    return pm_ret(musa_as_strided(a[0].t, a[1].n, a[1].v, a[2].v, offset));
}

static PyObject *pieces(int (*f)(musa_tensor *, int64_t, int64_t, int, musa_tensor **),
                        const char *who, musa_tensor *x, int64_t n, int64_t dim) {
    int count = f(x, n, dim, 0, NULL);
    if (count < 0) return pm_raise();
    /* each piece is a tensor and its Python object, some 512 bytes: a count
     * past the machine's memory is refused here instead of exhausting it */
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && (double)count * 512.0 > (double)pages * (double)page)
        return PyErr_Format(PyExc_MemoryError,
                            "[%s] %d pieces would need more memory than this machine has", who,
                            count);
    musa_tensor **outs = PyMem_Calloc((size_t)(count ? count : 1), sizeof *outs);
    if (!outs) return PyErr_Format(PyExc_MemoryError, "[%s] no memory for %d pieces", who, count);
    int got = f(x, n, dim, count, outs);
    PyObject *r = got < 0 ? pm_raise() : PyTuple_New(got);
    if (got >= 0 && !r) {
        PyErr_Clear();
        PyErr_Format(PyExc_MemoryError, "[%s] no memory for a tuple of %d pieces", who, got);
    }
    for (int i = 0; i < count; i++) {
        if (r) {
            PyObject *o = pm_wrap(outs[i]);
            if (!o)
                Py_CLEAR(r);
            else
                PyTuple_SET_ITEM(r, i, o);
        } else {
            musa_tensor_release(outs[i]);
        }
    }
    PyMem_Free(outs);
    return r;
}
DEF(_split, FM, "input:T split_size:i dim:i=0") {
    return pieces(musa_split, "split", a[0].t, a[1].i, a[2].i);
}
DEF(chunk, FM, "input:T chunks:i dim:i=0") {
    return pieces(musa_chunk, "chunk", a[0].t, a[1].i, a[2].i);
}
DEF(cat, PM_FN | PM_OUT, "tensors:L dim:i=0") {
    return pm_ret(musa_cat(a[0].n, a[0].list, a[1].i));
}
DEF(stack, PM_FN | PM_OUT, "tensors:L dim:i=0") {
    return pm_ret(musa_stack(a[0].n, a[0].list, a[1].i));
}
DEF(gather, FM | PM_OUT, "input:T dim:i index:T") {
    return pm_ret(musa_gather(a[0].t, a[1].i, a[2].t));
}
DEF(scatter, FM | PM_OUT, "input:T dim:i index:T src:S") {
    musa_tensor *src = a[3].t;
    musa_tensor *tmp = NULL;
    if (musa_tensor_ndim(src) == 0) { /* a scalar value: broadcast to the index */
        musa_tensor *c = musa_cast(src, musa_tensor_dtype(a[0].t));
        tmp = c ? musa_expand(c, musa_tensor_ndim(a[2].t), musa_tensor_shape(a[2].t)) : NULL;
        musa_tensor_release(c);
        if (!tmp) return pm_raise();
        src = tmp;
    }
    musa_tensor *r = musa_scatter(a[0].t, a[1].i, a[2].t, src);
    musa_tensor_release(tmp);
    return pm_ret(r);
}
DEF(scatter_add, FM | PM_OUT, "input:T dim:i index:T src:T") {
    return pm_ret(musa_scatter_add(a[0].t, a[1].i, a[2].t, a[3].t));
}
/* the reductions of scatter_reduce (musa._torch_index), include_self=True */
DEF(scatter_prod, PM_FN | PM_NOEXPORT, "input:T dim:i index:T src:T") {
    return pm_ret(musa_scatter_prod(a[0].t, a[1].i, a[2].t, a[3].t));
}
DEF(scatter_amax, PM_FN | PM_NOEXPORT, "input:T dim:i index:T src:T") {
    return pm_ret(musa_scatter_amax(a[0].t, a[1].i, a[2].t, a[3].t));
}
DEF(scatter_amin, PM_FN | PM_NOEXPORT, "input:T dim:i index:T src:T") {
    return pm_ret(musa_scatter_amin(a[0].t, a[1].i, a[2].t, a[3].t));
}
DEF(index_select, FM | PM_OUT, "input:T dim:i index:T") {
    return pm_ret(musa_index_select(a[0].t, a[1].i, a[2].t));
}
/* weighted taps along dim (interpolate's and ONNX Resize's core; musa.h) */
DEF(resample, PM_FN | PM_NOEXPORT, "input:T dim:i index:T weight:T") {
    return pm_ret(musa_resample(a[0].t, a[1].i, a[2].t, a[3].t));
}
DEF(index_add, FM | PM_OUT, "input:T dim:i index:T source:T * alpha:S=None") {
    musa_tensor *tmp, *src = scaled(a[0].t, &a[4], a[3].t, &tmp);
    musa_tensor *r = src ? musa_index_add(a[0].t, a[1].i, a[2].t, src) : NULL;
    musa_tensor_release(tmp);
    return pm_ret(r);
}
DEF(masked_fill, FM, "input:T mask:T value:f") {
    return pm_ret(musa_masked_fill(a[0].t, a[1].t, a[2].f));
}
DEF(flip, FM, "input:T dims:V") {
    return pm_ret(musa_flip(a[0].t, NDIMS(a[1]), a[1].v));
}
DEF(repeat, PM_METH, "self:T repeats:V") {
    return pm_ret(musa_repeat(a[0].t, NDIMS(a[1]), a[1].v));
}
DEF(tril, FM | PM_OUT, "input:T diagonal:i=0") {
    return pm_ret(musa_tril(a[0].t, a[1].i));
}
DEF(triu, FM | PM_OUT, "input:T diagonal:i=0") {
    return pm_ret(musa_triu(a[0].t, a[1].i));
}
/* musa.nn.functional.one_hot */
DEF(one_hot, PM_FN | PM_NOEXPORT, "input:T num_classes:i=-1") {
    return pm_ret(musa_one_hot(a[0].t, a[1].i));
}
DEF(_pad, PM_FN, "input:T pad:I value:f=0") {
    return pm_ret(musa_pad(a[0].t, NDIMS(a[1]), a[1].v, a[2].f));
}

/* ---- tensor facts ---- */

DEF(size, PM_METH, "self:T dim:O=None") {
    if (a[1].o == Py_None) {
        int nd = musa_tensor_ndim(a[0].t);
        const int64_t *s = musa_tensor_shape(a[0].t);
        PyObject *r = PyTuple_New(nd);
        for (int i = 0; r && i < nd; i++) PyTuple_SET_ITEM(r, i, PyLong_FromLongLong(s[i]));
        return r;
    }
    int64_t d;
    if (pm_int64(a[1].o, &d, who, "dim")) return NULL;
    int64_t v = musa_tensor_size(a[0].t, d);
    return v < 0 ? pm_raise() : PyLong_FromLongLong(v);
}
DEF(stride, PM_METH, "self:T dim:O=None") {
    musa_tensor *x = a[0].t;
    int nd = musa_tensor_ndim(x);
    const int64_t *s = musa_tensor_strides(x);
    if (a[1].o == Py_None) {
        PyObject *r = PyTuple_New(nd);
        for (int i = 0; r && i < nd; i++) PyTuple_SET_ITEM(r, i, PyLong_FromLongLong(s[i]));
        return r;
    }
    int64_t d;
    if (pm_int64(a[1].o, &d, who, "dim")) return NULL;
    if (d < -nd || d >= (nd ? nd : 1) || nd == 0) {
        PyErr_Format(
            PyExc_IndexError,
            "[stride] Dimension out of range (expected to be in range of [%d, %d], but got %lld)",
            -nd, nd - 1, (long long)d);
        return NULL;
    }
    return PyLong_FromLongLong(s[d < 0 ? d + nd : d]);
}
DEF(dim, PM_METH, "self:T") {
    return PyLong_FromLong(musa_tensor_ndim(a[0].t));
}
DEF(numel, FM, "input:T") {
    return PyLong_FromLongLong(musa_tensor_numel(a[0].t));
}
DEF(storage_offset, PM_METH, "self:T") {
    return PyLong_FromLongLong(musa_tensor_offset(a[0].t));
}
DEF(is_contiguous, PM_METH, "self:T") {
    return PyBool_FromLong(musa_tensor_is_contiguous(a[0].t));
}
DEF(data_ptr, PM_METH, "self:T") {
    return PyLong_FromVoidPtr(musa_tensor_data(a[0].t));
}
DEF(element_size, PM_METH, "self:T") {
    return PyLong_FromSize_t(musa_dtype_size(musa_tensor_dtype(a[0].t)));
}
DEF(is_floating_point, FM, "input:T") {
    return PyBool_FromLong(musa_dtype_is_floating(musa_tensor_dtype(a[0].t)));
}
DEF(item, PM_METH, "self:T") {
    return pm_item(a[0].t);
}
DEF(_shares_storage, PM_METH, "self:T other:T") {
    return PyBool_FromLong(musa_tensor_shares_storage(a[0].t, a[1].t));
}

static PyObject *tolist_rec(musa_tensor *t, int dim, const int64_t *shape, int nd,
                            musa_tensor *flat, int64_t *pos, const double *fv, const int64_t *iv,
                            musa_dtype d) {
    if (dim == nd) {
        int64_t p = (*pos)++;
        if (fv) return PyFloat_FromDouble(fv[p]);
        return d == MUSA_DTYPE_BOOL ? PyBool_FromLong(iv[p] != 0) : PyLong_FromLongLong(iv[p]);
    }
    PyObject *l = PyList_New(shape[dim]);
    for (int64_t i = 0; l && i < shape[dim]; i++) {
        PyObject *e = tolist_rec(t, dim + 1, shape, nd, flat, pos, fv, iv, d);
        if (!e)
            Py_CLEAR(l);
        else
            PyList_SET_ITEM(l, i, e);
    }
    return l;
}
DEF(tolist, PM_METH, "self:T") {
    musa_tensor *x = a[0].t;
    pm_host_read(x, MUSA_READ_DATA, 0);
    musa_dtype d = musa_tensor_dtype(x);
    bool fl = musa_dtype_is_floating(d);
    musa_tensor *c = musa_cast(x, fl ? MUSA_DTYPE_FLOAT64 : MUSA_DTYPE_INT64);
    if (!c) return pm_raise();
    int64_t n = musa_tensor_numel(c);
    /* (an expanded view may have more elements than the address space) */
    void *buf = n > PY_SSIZE_T_MAX / 8 ? NULL : PyMem_Malloc(8 * (size_t)(n ? n : 1));
    if (!buf) {
        musa_tensor_release(c);
        return PyErr_Format(PyExc_MemoryError, "[Tensor.tolist] %lld elements do not fit in memory",
                            (long long)n);
    }
    PyObject *r = NULL;
    if (musa_tensor_copy_to(c, buf, 8 * (size_t)n)) {
        pm_raise();
    } else {
        int64_t pos = 0;
        r = tolist_rec(c, 0, musa_tensor_shape(c), musa_tensor_ndim(c), c, &pos, fl ? buf : NULL,
                       fl ? NULL : buf, d);
        if (!r && PyErr_ExceptionMatches(PyExc_MemoryError)) { /* (2**40, 0): 2**40 lists */
            PyErr_Clear();
            PyErr_Format(PyExc_MemoryError,
                         "[Tensor.tolist] the lists of a %d-D tensor of %lld "
                         "elements do not fit in memory",
                         musa_tensor_ndim(c), (long long)n);
        }
    }
    PyMem_Free(buf);
    musa_tensor_release(c);
    return r;
}

/* ---- runtime ---- */

DEF(set_num_threads, PM_FN, "n:i") {
    if (a[0].i < 1 || a[0].i > 4096) {
        PyErr_Format(PyExc_ValueError, "[set_num_threads] n must be in [1, 4096], got %lld",
                     (long long)a[0].i);
        return NULL;
    }
    return pm_none_or_raise(musa_set_num_threads((int)a[0].i));
}
DEF(get_num_threads, PM_FN, "") {
    return PyLong_FromLong(musa_get_num_threads());
}
/* musa.set_printoptions / get_printoptions (musa/_torch_env.py) */
DEF(_set_print_options, PM_FN | PM_NOEXPORT,
    "precision:i threshold:i edgeitems:i linewidth:i sci_mode:i") {
    musa_print_options o = {.precision = (int)a[0].i,
                            .threshold = a[1].i,
                            .edgeitems = (int)a[2].i,
                            .linewidth = (int)a[3].i,
                            .sci_mode = (int)a[4].i};
    if (a[0].i != o.precision || a[2].i != o.edgeitems || a[3].i != o.linewidth ||
        a[4].i != o.sci_mode) { /* an int past C's int: refused by the checks below */
        o.precision = -1;
    }
    return pm_none_or_raise(musa_set_print_options(&o));
}
DEF(_get_print_options, PM_FN | PM_NOEXPORT, "") {
    musa_print_options o;
    musa_get_print_options(&o);
    return Py_BuildValue("(iLiii)", o.precision, (long long)o.threshold, o.edgeitems, o.linewidth,
                         o.sci_mode);
}
/* musa.cuda.is_available */
DEF(cuda_is_available, PM_FN | PM_NOEXPORT, "") {
    return PyBool_FromLong(musa_cuda_is_available());
}
DEF(memory_stats, PM_FN, "") {
    musa_alloc_stats s;
    musa_alloc_get_stats(&s);
    return Py_BuildValue(
        "{s:n,s:n,s:n,s:K,s:K}", "current_bytes", (Py_ssize_t)s.current_bytes, "peak_bytes",
        (Py_ssize_t)s.peak_bytes, "cached_bytes", (Py_ssize_t)s.cached_bytes, "alloc_count",
        (unsigned long long)s.alloc_count, "system_allocs", (unsigned long long)s.system_allocs);
}
DEF(reset_peak_memory_stats, PM_FN, "") {
    musa_alloc_reset_peak();
    Py_RETURN_NONE;
}
/* _alloc_size(bytes): the size class the allocator's statistics count */
DEF(_alloc_size, PM_FN, "bytes:i") {
    if (a[0].i < 0) return PyErr_Format(PyExc_ValueError, "[%s] bytes must be >= 0", who);
    return PyLong_FromSize_t(musa_alloc_size((size_t)a[0].i));
}
DEF(empty_cache, PM_FN, "") {
    musa_alloc_empty_cache();
    Py_RETURN_NONE;
}
DEF(_alloc_trim, PM_FN, "") {
    musa_alloc_trim();
    Py_RETURN_NONE;
}
