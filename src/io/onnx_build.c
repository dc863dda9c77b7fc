/*
 * onnx_build.c - a loaded ONNX model (onnx.c) as musa graphs: its signature
 * and input checks, the plan key of a call, and capturing the model for
 * one set of input shapes, with the attribute and input readers the ops
 * (onnx_ops_*.c) use.
 *
 * Building a graph: the inputs are meta tensors of the call's shapes under
 * symbolic capture. A node whose inputs are all known while building
 * (initializers, constants, Shape of anything, and what is computed from
 * those) runs eagerly with the capture paused, so shape arithmetic (the
 * Shape -> Gather -> Concat -> Reshape chains exporters write) folds into
 * plain integers and constants; every other node is recorded. Ops that
 * need integers (Reshape's shape, Slice's starts) read them from known
 * inputs, and say so, naming the node and the input, when an input is
 * computed from the model's inputs instead.
 */
#include "onnx.h"

#include <stdarg.h>
#include <stdio.h>

#include "../jit/graph.h"
#include "../ops/op.h"
#include "../tensor/tensor.h"

#ifdef MUSA_HAVE_ONNX
#include "onnx_model.h"

int64_t onnx_opset(const onnx_build *b) {
    return b->o->opset;
}

int onnx_fail(const onnx_build *b, const onnx_node *n, int code, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ((onnx_build *)b)->formatted = true;
    return musa_err(code, "%s: node '%.100s' (%s): %s", b->o->where, onnx_node_name(n),
                    onnx_node_op(n), msg);
}
/* ---- attributes ---- */

static const Onnx__AttributeProto *find_attr(const onnx_node *n, const char *name) {
    for (size_t i = 0; i < n->p->n_attribute; i++)
        if (n->p->attribute[i]->name && !strcmp(n->p->attribute[i]->name, name))
            return n->p->attribute[i];
    return NULL;
}

bool onnx_has_attr(const onnx_node *n, const char *name) {
    return find_attr(n, name) != NULL;
}

int64_t onnx_attr_int(const onnx_node *n, const char *name, int64_t def) {
    const Onnx__AttributeProto *a = find_attr(n, name);
    return a ? a->i : def;
}

double onnx_attr_float(const onnx_node *n, const char *name, double def) {
    const Onnx__AttributeProto *a = find_attr(n, name);
    return a ? (double)a->f : def;
}

const char *onnx_attr_str(const onnx_node *n, const char *name, const char *def) {
    const Onnx__AttributeProto *a = find_attr(n, name);
    if (!a) return def;
    /* checked at load to hold no NUL, and given one at the end (validate) */
    return a->has_s && a->s.data ? (const char *)a->s.data : "";
}

int onnx_attr_ints(const onnx_node *n, const char *name, int64_t *v, int max) {
    const Onnx__AttributeProto *a = find_attr(n, name);
    if (!a) return 0;
    for (size_t i = 0; i < a->n_ints && i < (size_t)max; i++) v[i] = a->ints[i];
    return a->n_ints > (size_t)INT_MAX ? INT_MAX : (int)a->n_ints;
}

int onnx_attr_floats(const onnx_node *n, const char *name, float *v, int max) {
    const Onnx__AttributeProto *a = find_attr(n, name);
    if (!a) return 0;
    for (size_t i = 0; i < a->n_floats && i < (size_t)max; i++) v[i] = a->floats[i];
    return a->n_floats > (size_t)INT_MAX ? INT_MAX : (int)a->n_floats;
}

musa_tensor *onnx_attr_tensor(onnx_build *b, const onnx_node *n, const char *name, bool *absent) {
    const Onnx__AttributeProto *a = find_attr(n, name);
    *absent = !a;
    if (!a) return NULL;
    char what[160];
    snprintf(what, sizeof what, "node '%.80s' attribute '%.40s'", onnx_node_name(n), name);
    musa_tensor *t = onnx_make_tensor(b->o, a->t, what);
    if (!t && musa_last_error_code() == MUSA_ERR_IO) b->formatted = true; /* bad() named it */
    return t;
}

/* ---- the signature ---- */

int musa_onnx_num_inputs(const musa_onnx *o) {
    return o->n_inputs;
}

int musa_onnx_num_outputs(const musa_onnx *o) {
    return o->n_outputs;
}

int musa_onnx_input(const musa_onnx *o, int i, const char **name, musa_dtype *dtype, int *ndim,
                    int64_t *dims, const char **dim_params) {
    const onnx_input *in = &o->inputs[i];
    if (name) *name = in->name;
    if (dtype) *dtype = in->dtype;
    if (ndim) *ndim = in->ndim;
    for (int d = 0; d < in->ndim; d++) {
        if (dims) dims[d] = in->dims[d];
        if (dim_params) dim_params[d] = in->params[d];
    }
    return MUSA_OK;
}

int musa_onnx_check_inputs(const musa_onnx *o, int n_in, musa_tensor *const *in) {
    static const char *who = "musa_model_run";
    if (n_in != o->n_inputs)
        return musa_err(MUSA_ERR_VALUE, "[%s] the model takes %d inputs, got %d", who, o->n_inputs,
                        n_in);
    char s1[128], s2[128];
    for (int i = 0; i < n_in; i++) {
        const onnx_input *v = &o->inputs[i];
        const musa_tensor *t = in[i];
        if (!t) return musa_err(MUSA_ERR_VALUE, "[%s] input '%s' is NULL", who, v->name);
        if ((musa_dtype)t->dtype != v->dtype)
            return musa_err(MUSA_ERR_TYPE, "[%s] input '%s' is %s; the model takes %s", who,
                            v->name, musa_dtype_name((musa_dtype)t->dtype),
                            musa_dtype_name(v->dtype));
        if (t->ndim != v->ndim)
            return musa_err(MUSA_ERR_VALUE, "[%s] input '%s' has %d dims %s; the model takes %d",
                            who, v->name, t->ndim, musa_shape_str(t->ndim, t->shape, s1, sizeof s1),
                            v->ndim);
        for (int d = 0; d < v->ndim; d++) {
            if (v->dims[d] >= 0 && t->shape[d] != v->dims[d])
                return musa_err(MUSA_ERR_VALUE, "[%s] input '%s' has shape %s; dim %d must be %lld",
                                who, v->name, musa_shape_str(t->ndim, t->shape, s1, sizeof s1), d,
                                (long long)v->dims[d]);
            if (!v->params[d]) continue;
            for (int j = 0; j <= i; j++) /* equal names, equal sizes */
                for (int e = 0; e < o->inputs[j].ndim; e++) {
                    const char *p = o->inputs[j].params[e];
                    if ((j == i && e >= d) || !p || strcmp(p, v->params[d])) continue;
                    if (in[j]->shape[e] != t->shape[d])
                        return musa_err(MUSA_ERR_VALUE,
                                        "[%s] dim '%s' is %lld in input '%s' %s but %lld in "
                                        "input '%s' %s",
                                        who, v->params[d], (long long)in[j]->shape[e],
                                        o->inputs[j].name,
                                        musa_shape_str(in[j]->ndim, in[j]->shape, s2, sizeof s2),
                                        (long long)t->shape[d], v->name,
                                        musa_shape_str(t->ndim, t->shape, s1, sizeof s1));
                }
        }
    }
    return MUSA_OK;
}

int musa_onnx_key(const musa_onnx *o, int n_in, musa_tensor *const *in, int64_t *key, int max) {
    int k = 0;
    for (int i = 0; i < n_in; i++) {
        musa_tensor *t = in[i];
        int64_t numel = musa_tensor_numel(t);
        if (k + t->ndim + (o->inputs[i].by_value ? numel : 0) > max)
            return musa_err(MUSA_ERR_VALUE,
                            "[musa_model_run] input '%s' holds %lld values that ops read as "
                            "numbers (shapes, axes); at most %d are taken",
                            o->inputs[i].name, (long long)numel, max / 2);
        for (int d = 0; d < t->ndim; d++) key[k++] = t->shape[d];
        if (!o->inputs[i].by_value || !numel) continue;
        musa_tensor *c = musa_cast(t, MUSA_DTYPE_FLOAT64), *cc = c ? musa_contiguous(c) : NULL;
        musa_tensor_release(c);
        if (!cc) return musa_last_error_code();
        memcpy(key + k, musa_tensor_data(cc), sizeof(int64_t) * (size_t)numel); /* the bits */
        musa_tensor_release(cc);
        if (t->dtype == MUSA_DTYPE_INT64) {
            musa_tensor *ci = musa_contiguous(t); /* exact beyond 2^53 */
            if (!ci) return musa_last_error_code();
            memcpy(key + k, musa_tensor_data(ci), sizeof(int64_t) * (size_t)numel);
            musa_tensor_release(ci);
        }
        k += (int)numel;
    }
    return k;
}

/* ---- building ---- */

typedef struct paused {
    musa_mode mode;
    void *recorder;
    uint32_t epoch;
} paused;

/* Run eagerly from here (known values) until resume. */
static paused pause_capture(void) {
    paused p = {musa_tls.mode, musa_tls.recorder, musa_tensor_epoch};
    musa_tls.mode = MUSA_MODE_EAGER;
    musa_tls.recorder = NULL;
    musa_tensor_epoch = 0;
    return p;
}

static void resume_capture(paused p) {
    musa_tls.mode = p.mode;
    musa_tls.recorder = p.recorder;
    musa_tensor_epoch = p.epoch;
}

musa_tensor *onnx_const(const void *data, int ndim, const int64_t *shape, musa_dtype dtype) {
    paused p = pause_capture();
    musa_tensor *t = musa_from_data(data, ndim, shape, dtype);
    resume_capture(p);
    return t;
}

musa_tensor *onnx_tmp(onnx_build *b, musa_tensor *t) {
    if (!t) return NULL;
    if (b->n_temps == b->cap_temps) {
        int cap = b->cap_temps ? 2 * b->cap_temps : 64;
        musa_tensor **nt = realloc(b->temps, sizeof *nt * (size_t)cap);
        if (!nt) {
            musa_tensor_release(t);
            musa_err_nomem("onnx", sizeof *nt * (size_t)cap);
            return NULL;
        }
        b->temps = nt, b->cap_temps = cap;
    }
    return b->temps[b->n_temps++] = t;
}

bool onnx_known(const onnx_build *b, int i) {
    return i < b->node->n_in && b->in_known[i];
}

/* Input i (tensor t) as numbers: copied as float64 (always exact for the
 * integers shapes use) from a known tensor. */
static int read_numbers(onnx_build *b, const onnx_node *n, int i, musa_tensor *t, double *v,
                        int max, int *count) {
    if (!t) return onnx_fail(b, n, MUSA_ERR_VALUE, "input %d is absent but needed", i);
    if (!onnx_known(b, i))
        return onnx_fail(b, n, MUSA_ERR_NOT_IMPLEMENTED,
                         "input %d ('%.100s') is computed from the model's inputs; musa needs it "
                         "known when the model is built (a constant, an initializer, or computed "
                         "from shapes)",
                         i, n->p->input[i]);
    int64_t numel = musa_tensor_numel(t);
    if (numel > max)
        return onnx_fail(b, n, MUSA_ERR_VALUE, "input %d has %lld values; at most %d are read", i,
                         (long long)numel, max);
    paused p = pause_capture();
    musa_tensor *c = musa_cast(t, MUSA_DTYPE_FLOAT64), *cc = c ? musa_contiguous(c) : NULL;
    resume_capture(p);
    musa_tensor_release(c);
    if (!cc) return musa_last_error_code();
    memcpy(v, musa_tensor_data(cc), sizeof(double) * (size_t)numel);
    musa_tensor_release(cc);
    *count = (int)numel;
    return MUSA_OK;
}

int onnx_doubles(onnx_build *b, const onnx_node *n, int i, musa_tensor *t, double *v, int max,
                 int *count) {
    return read_numbers(b, n, i, t, v, max, count);
}

int onnx_ints(onnx_build *b, const onnx_node *n, int i, musa_tensor *t, int64_t *v, int max,
              int *count) {
    double d[64];
    if (max > 64) max = 64;
    if (t && musa_is_float((musa_dtype)t->dtype))
        return onnx_fail(b, n, MUSA_ERR_TYPE, "input %d is %s; integers are needed", i,
                         musa_dtype_name((musa_dtype)t->dtype));
    int rc = read_numbers(b, n, i, t, d, max, count);
    for (int k = 0; !rc && k < *count; k++) {
        if (d[k] >= 9.2e18 || d[k] <= -9.2e18) { /* INT64_MAX/MIN as "to the end" */
            v[k] = d[k] > 0 ? INT64_MAX : INT64_MIN;
            continue;
        }
        v[k] = (int64_t)d[k];
    }
    if (!rc && t->dtype == MUSA_DTYPE_INT64) { /* exact for large values too */
        paused p = pause_capture();
        musa_tensor *cc = musa_contiguous(t);
        resume_capture(p);
        if (!cc) return musa_last_error_code();
        memcpy(v, musa_tensor_data(cc), sizeof(int64_t) * (size_t)*count);
        musa_tensor_release(cc);
    }
    return rc;
}

static int build_node(onnx_build *b, const onnx_node *n, musa_tensor **vals, bool *known) {
    /* inputs past the node's count read as absent (NULL) up to 16, so a
     * handler asking for input i of a node that has fewer gets NULL */
    musa_tensor *in_buf[16] = {NULL}, *out_buf[16] = {NULL};
    bool kn_buf[16] = {false};
    musa_tensor **in = n->n_in <= 16 ? in_buf : calloc((size_t)n->n_in, sizeof *in);
    musa_tensor **out = n->n_out <= 16 ? out_buf : calloc((size_t)n->n_out, sizeof *out);
    bool *kn = n->n_in <= 16 ? kn_buf : calloc((size_t)n->n_in, sizeof *kn);
    int rc = in && out && kn ? MUSA_OK : musa_err_nomem("onnx", 64);
    bool all = true;
    for (int i = 0; !rc && i < n->n_in; i++) {
        in[i] = n->in[i] >= 0 ? vals[n->in[i]] : NULL;
        kn[i] = n->in[i] < 0 || known[n->in[i]];
        all &= kn[i];
    }
    for (int j = 0; !rc && j < n->n_out; j++) out[j] = NULL;
    for (int i = 0; !rc && i < n->n_in; i++) { /* dims a handler may multiply freely */
        int64_t span = 1;
        for (int d = 0; in[i] && d < in[i]->ndim; d++)
            if (in[i]->shape[d] > 1 && !musa_mul_i64(span, in[i]->shape[d], &span))
                span = INT64_MAX;
        b->node = n, b->formatted = false;
        if (span > MAX_SPAN) /* only an empty tensor can be that large */
            rc = onnx_fail(b, n, MUSA_ERR_VALUE,
                           "input %d has dims whose product passes 2^40 (an empty tensor of "
                           "absurd dims); the importer refuses them",
                           i);
    }
    if (!rc) {
        all |= n->op->meta;
        b->node = n, b->in_known = kn, b->formatted = false;
        paused p;
        if (all) p = pause_capture(); /* known inputs: computed now, a constant */
        rc = n->op->run(b, n, in, n->n_out, out);
        if (all) resume_capture(p);
        if (rc && !b->formatted) {
            char msg[768];
            snprintf(msg, sizeof msg, "%s", musa_last_error());
            onnx_fail(b, n, rc, "%s", msg);
        }
    }
    for (int j = 0; out && j < n->n_out; j++) {
        if (!rc && n->out[j] >= 0 && !out[j])
            rc = onnx_fail(b, n, MUSA_ERR_NOT_IMPLEMENTED,
                           "output %d ('%.100s') is not made by musa's importer", j,
                           n->p->output[j]);
        if (!rc && n->out[j] >= 0) {
            vals[n->out[j]] = out[j];
            known[n->out[j]] = all;
        } else {
            musa_tensor_release(out[j]);
        }
    }
    for (int i = 0; i < b->n_temps; i++) musa_tensor_release(b->temps[i]);
    b->n_temps = 0;
    if (in != in_buf) free(in);
    if (out != out_buf) free(out);
    if (kn != kn_buf) free(kn);
    return rc;
}

musa_graph *musa_onnx_capture(musa_onnx *o, int n_in, musa_tensor *const *in) {
    musa_graph *g = musa_graph_new();
    musa_tensor **vals = calloc((size_t)o->n_values + 1, sizeof *vals);
    bool *known = calloc((size_t)o->n_values + 1, sizeof *known);
    int rc = g && vals && known ? MUSA_OK : musa_err_nomem("onnx", 64);
    for (int v = 0; !rc && v < o->n_values; v++)
        if (o->consts[v]) vals[v] = musa_tensor_retain(o->consts[v]), known[v] = true;
    bool grad = musa_set_grad_enabled(false);
    if (!rc) rc = musa_graph_capture_begin(g, MUSA_CAPTURE_SYMBOLIC);
    bool capturing = !rc;
    for (int i = 0; !rc && i < n_in; i++) {
        musa_tensor *meta = musa_empty_meta((musa_dtype)in[i]->dtype, in[i]->ndim, in[i]->shape);
        rc = meta ? musa_graph_add_input(g, meta, o->inputs[i].name) : musa_last_error_code();
        vals[o->inputs[i].value] = meta;
        if (rc || !o->inputs[i].by_value) continue;
        /* read as numbers: built for its values (a copy; the plan's key holds them) */
        paused p = pause_capture();
        musa_tensor *copy = musa_clone(in[i]);
        resume_capture(p);
        if (!copy) rc = musa_last_error_code();
        musa_tensor_release(meta);
        vals[o->inputs[i].value] = copy;
        known[o->inputs[i].value] = true;
    }
    onnx_build b = {.o = o};
    for (int k = 0; !rc && k < o->n_nodes; k++) rc = build_node(&b, &o->nodes[k], vals, known);
    musa_tensor **outs = rc ? NULL : calloc((size_t)o->n_outputs + 1, sizeof *outs);
    if (!rc && !outs) rc = musa_err_nomem("onnx", 64);
    for (int j = 0; !rc && j < o->n_outputs; j++) outs[j] = vals[o->outputs[j]];
    if (!rc) rc = musa_graph_set_outputs(g, o->n_outputs, outs);
    free(outs);
    if (capturing) {
        char msg[768];
        snprintf(msg, sizeof msg, "%s", rc ? musa_last_error() : "");
        int rc2 = musa_graph_capture_end(g);
        if (rc)
            musa_err(rc, "%s", msg); /* the first error, not capture_end's echo */
        else
            rc = rc2;
    }
    musa_set_grad_enabled(grad);
    for (int v = 0; vals && v < o->n_values; v++) musa_tensor_release(vals[v]);
    free(vals), free(known), free(b.temps);
    if (rc) {
        musa_graph_free(g);
        return NULL;
    }
    return g;
}

#endif
