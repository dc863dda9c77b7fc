/*
 * capture.c - recording op calls into a graph: the dispatcher's record hook,
 * capture begin/resume/end, graph inputs and outputs, host reads (breaks)
 * and refusals.
 *
 * Invariants kept here:
 * - a tensor the capture made, or an input, maps to a value through its
 *   trace_tag: the capture id in the high 32 bits and value id + 1 in the
 *   low ones, so tags of finished captures never match (musa_graph_value_of);
 * - a tensor bound by reference (parameter, constant tensor) maps through
 *   the graph's `bound` map instead, its exact aliases through
 *   `bound_storage`: such tensors are shared (a model's weights), and
 *   captures on other threads use them at the same time, so no capture
 *   writes into them (the graph holds them, so their addresses stay valid);
 * - an in-place write renames: the written tensor maps to a fresh value, and
 *   a write into an input or parameter is recorded as a mutation (target,
 *   final value), one per target;
 * - the first thing that cannot be captured voids the capture: the error is
 *   sticky (capture_fail) and capture_end reports it; eager execution goes
 *   on meanwhile;
 * - one capture per thread at a time; tensors made while recording carry the
 *   graph's epoch, so one made outside the recorded ops is caught when used.
 */
#include "graph.h"

#include <stdarg.h>
#include <stdio.h>

#include "../autograd/autograd.h"
#include "../base/threadpool.h"

const char *(*musa_jit_location_hook)(void);

static atomic_uint_fast64_t capture_ids = 1;

static const char *here(musa_graph *g) {
    if (g->loc_override) return g->loc_override;
    return musa_jit_location_hook ? musa_jit_location_hook() : NULL;
}

/* Void the capture with the first error met (later ones are dropped). */
static void capture_fail(musa_graph *g, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void capture_fail(musa_graph *g, int code, const char *fmt, ...) {
    if (g->capture_error) return;
    g->capture_error = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->capture_msg, sizeof g->capture_msg, fmt, ap);
    va_end(ap);
}

/* Map t, a tensor g holds a reference to, to value id. */
static int bind(musa_graph *g, const musa_tensor *t, int32_t id) {
    if (musa_map_put(&g->bound, (uint64_t)(uintptr_t)t, (uint64_t)id)) return MUSA_ERR_NOMEM;
    uint64_t st = (uint64_t)(uintptr_t)t->storage;
    if (t->storage && !musa_map_get(&g->bound_storage, st) &&
        musa_map_put(&g->bound_storage, st, (uint64_t)(uintptr_t)t))
        return MUSA_ERR_NOMEM;
    return MUSA_OK;
}

/* From now on t maps to value id (a new value of t after an in-place write,
 * or a node output): through the bound map if t is bound, else its tag. */
static void map_to(musa_graph *g, musa_tensor *t, int32_t id) {
    uint64_t *v = musa_map_get(&g->bound, (uint64_t)(uintptr_t)t);
    if (v)
        *v = (uint64_t)id;
    else
        t->trace_tag = (g->tag << 32) | (uint64_t)(id + 1);
}

/* The value of a bound tensor or of an exact alias of one (same storage,
 * offset, shape and strides), or -1. */
static int32_t bound_value(const musa_graph *g, const musa_tensor *t) {
    const uint64_t *v = musa_map_get(&g->bound, (uint64_t)(uintptr_t)t);
    if (v) return (int32_t)*v;
    if (!t->storage) return -1;
    const uint64_t *b = musa_map_get(&g->bound_storage, (uint64_t)(uintptr_t)t->storage);
    const musa_tensor *s = b ? (const musa_tensor *)(uintptr_t)*b : NULL;
    if (!s || s->storage != t->storage || s->offset != t->offset ||
        !musa_shape_equal(s->ndim, s->shape, t->ndim, t->shape) ||
        (t->ndim && memcmp(s->strides, t->strides, sizeof(int64_t) * (size_t)t->ndim)))
        return -1;
    v = musa_map_get(&g->bound, *b);
    return v ? (int32_t)*v : -1;
}

/* A tensor from outside the graph: a constant when it is a wrapped Python
 * number, else a parameter bound by reference, keeping the tensor's layout. */
static int32_t external(musa_graph *g, musa_tensor *t) {
    bool number = (t->flags & MUSA_TF_NUMBER) != 0;
    if (!number && t->epoch && t->epoch == g->epoch) {
        /* Made while recording, yet not by a recorded op: binding it would
         * freeze this run's value into every later run. */
        const char *loc = here(g);
        capture_fail(g, MUSA_ERR_NOT_IMPLEMENTED,
                     "[jit] a tensor made during the capture outside the recorded ops (a kernel "
                     "called directly, not through the dispatcher) is used%s%s",
                     loc ? " at " : "", loc ? loc : "");
    }
    int32_t id = musa_graph_new_value(g, number ? MUSA_V_CONST : MUSA_V_PARAM, (musa_dtype)t->dtype,
                                      t->ndim, t->shape);
    if (id < 0) return -1;
    musa_gvalue *v = &g->values.data[id];
    for (int i = 0; i < t->ndim; i++) v->strides[i] = t->strides[i];
    v->tensor = musa_tensor_retain(t);
    v->loc = here(g);
    if (!number && bind(g, t, id)) return -1;
    return id;
}

int musa_graph_value_of(const musa_graph *g, const musa_tensor *t) {
    if (!g || !t || !g->tag) return -1;
    if ((t->trace_tag >> 32) == g->tag) return (int32_t)(t->trace_tag & 0xffffffffu) - 1;
    return bound_value(g, t);
}

static int32_t value_or_external(musa_graph *g, musa_tensor *t) {
    int32_t id = musa_graph_value_of(g, t);
    return id >= 0 ? id : external(g, t);
}

/* ---- the record hook ---- */

/* The output dtypes the graph's inference gives for these inputs (-1 where
 * it cannot say). Returns nonzero only when out of memory. */
static int graph_out_dtypes(const musa_op_info *info, int n_in, musa_tensor *const *in,
                            const void *attrs, int n_out, const int8_t *out_dt, int8_t *dt) {
    bool low = false; /* only an output rounded to float16/bfloat16 can differ */
    for (int j = 0; j < n_out; j++) dt[j] = -1, low |= musa_is_low_float((musa_dtype)out_dt[j]);
    if (!low || (info->flags & MUSA_OPF_VIEW)) return 0;
    int8_t in_buf[8], *in_dt = n_in > 8 ? malloc((size_t)n_in) : in_buf;
    if (!in_dt) return -1;
    musa_attrs_any a;
    if (info->attrs_kind != MUSA_ATTRS_none)
        memcpy(&a, attrs, musa_attrs_desc_of(info->attrs_kind)->size);
    musa_infer r;
    musa_infer_init(&r, info, in_dt, n_in);
    if (!info->infer(info, in, n_in, &a, &r) && r.n_out == n_out)
        for (int j = 0; j < n_out; j++) dt[j] = r.out_dtype[j];
    musa_clear_error();
    if (in_dt != in_buf) free(in_dt);
    return 0;
}

static int record(void *rec, musa_op_id op, int n_in, musa_tensor *const *in, const void *attrs,
                  int n_out, musa_tensor **out, unsigned provided) {
    musa_graph *g = rec;
    const musa_op_info *info = &musa_ops[op];
    if (g->capture_error) return MUSA_OK; /* the capture is void; eager goes on */
    const char *loc = here(g);
    int32_t *ins = n_in ? MUSA_ARENA_NEW(&g->arena, int32_t, n_in) : NULL;
    if (n_in && !ins) goto nomem;
    bool grad_on = !musa_tls.grad_disabled && !(info->flags & MUSA_OPF_NONDIFF);
    for (int i = 0; i < n_in; i++) {
        if ((ins[i] = value_or_external(g, in[i])) < 0) goto nomem;
        if (grad_on && (in[i]->flags & MUSA_TF_REQUIRES_GRAD)) g->requires_grad = true;
    }
    musa_gnode n;
    memset(&n, 0, sizeof n);
    n.op = (int16_t)op;
    n.n_in = n_in;
    n.in = ins;
    n.n_out = (int8_t)n_out;
    n.group = -1;
    n.loc = loc;
    if (musa_graph_set_attrs(g, &n, attrs)) goto nomem;
    int32_t node_id = (int32_t)g->nodes.len;
    /* The graph's own inference sees the cast inputs: a low-precision op
     * computed in float32 gives a float32 output there, where eager rounded
     * it once into its bfloat16/float16 output. Such an output is recorded
     * as the float32 value and a cast after the node (the same rounding). */
    int8_t graph_dt[MUSA_MAX_OUTPUTS], eager_dt[MUSA_MAX_OUTPUTS];
    for (int j = 0; j < n_out; j++) eager_dt[j] = out[j]->dtype;
    if (graph_out_dtypes(info, n_in, in, n.attrs, n_out, eager_dt, graph_dt)) goto nomem;
    int32_t raw[MUSA_MAX_OUTPUTS], cast_to[MUSA_MAX_OUTPUTS];
    int ncast = 0;
    for (int j = 0; j < n_out; j++) {
        musa_tensor *t = out[j];
        int32_t old = -1, orig = -1;
        raw[j] = -1;
        if (graph_dt[j] >= 0 && graph_dt[j] != t->dtype) {
            raw[j] =
                musa_graph_new_value(g, MUSA_V_NODE, (musa_dtype)graph_dt[j], t->ndim, t->shape);
            if (raw[j] < 0) goto nomem;
            g->values.data[raw[j]].producer = node_id;
            g->values.data[raw[j]].out_index = (int8_t)j;
            g->values.data[raw[j]].loc = loc;
        }
        if (provided & (1u << j)) { /* written in place: rename */
            old = value_or_external(g, t);
            if (old < 0) goto nomem;
            if (t->view_base || (t->storage && atomic_load(&t->storage->refcount) > 1)) {
                capture_fail(g, MUSA_ERR_NOT_IMPLEMENTED,
                             "[jit] %s writes in place into a tensor that shares memory with "
                             "another view%s%s; capture does not follow writes through views",
                             info->name, loc ? " at " : "", loc ? loc : "");
                return MUSA_OK;
            }
            uint64_t *o = musa_map_get(&g->origin, (uint64_t)old);
            orig = o ? (int32_t)*o : old;
        }
        int32_t id = musa_graph_new_value(g, MUSA_V_NODE, (musa_dtype)t->dtype, t->ndim, t->shape);
        if (id < 0) goto nomem;
        musa_gvalue *v = &g->values.data[id];
        v->producer = raw[j] >= 0 ? node_id + 1 + ncast : node_id; /* the cast's, see below */
        v->out_index = (int8_t)(raw[j] >= 0 ? 0 : j);
        v->loc = loc;
        if (raw[j] >= 0) ncast++;
        if ((info->flags & MUSA_OPF_VIEW) && !(provided & 1u)) {
            const musa_gvalue *src = &g->values.data[ins[0]];
            v->root = src->root;
            v->offset = src->offset + (t->offset - in[0]->offset);
            for (int d = 0; d < t->ndim; d++) v->strides[d] = t->strides[d];
        }
        n.out[j] = raw[j] >= 0 ? raw[j] : id;
        cast_to[j] = id;
        map_to(g, t, id);
        if (orig >= 0) {
            if (musa_map_put(&g->origin, (uint64_t)id, (uint64_t)orig)) goto nomem;
            musa_vkind k = (musa_vkind)g->values.data[orig].kind;
            if (k == MUSA_V_INPUT || k == MUSA_V_PARAM) {
                int64_t m = 0;
                while (m < g->mutations.len && g->mutations.data[m].target != orig) m++;
                musa_gmutation mu = {orig, id};
                if (m < g->mutations.len)
                    g->mutations.data[m] = mu;
                else if (musa_vec_push(&g->mutations, mu))
                    goto nomem;
            }
        }
    }
    if (musa_vec_push(&g->nodes, n)) goto nomem;
    for (int j = 0; j < n_out; j++) {
        if (raw[j] < 0) continue;
        musa_gnode c;
        memset(&c, 0, sizeof c);
        c.op = (int16_t)MUSA_OP_cast;
        c.rounding = true;
        c.n_in = 1;
        if (!(c.in = MUSA_ARENA_NEW(&g->arena, int32_t, 1))) goto nomem;
        c.in[0] = raw[j];
        c.n_out = 1;
        c.out[0] = cast_to[j];
        c.group = -1;
        c.loc = loc;
        if (musa_graph_set_attrs(g, &c, NULL)) goto nomem;
        musa_attrs_cast *ca = &c.attrs->cast;
        ca->dtype = (musa_dtype)g->values.data[cast_to[j]].dtype;
        if (musa_vec_push(&g->nodes, c)) goto nomem;
    }
    return MUSA_OK;
nomem:
    capture_fail(g, MUSA_ERR_NOMEM, "[jit] out of memory while recording %s", info->name);
    return MUSA_OK;
}

/* ---- begin, resume, end ---- */

/* Keep the .grad a leaf had before a symbolic capture changed it. */
static void note_grad(void *rec, musa_tensor *leaf, musa_tensor *old_grad) {
    musa_graph *g = rec;
    musa_grad_undo u = {musa_tensor_retain(leaf), musa_tensor_retain(old_grad)};
    if (musa_vec_push(&g->grad_undo, u)) {
        musa_tensor_release(u.leaf), musa_tensor_release(u.old);
        capture_fail(g, MUSA_ERR_NOMEM, "[jit] out of memory while recording a gradient");
    }
}

int musa_graph_capture_mode(const musa_graph *g) {
    if (!g) return musa_err(MUSA_ERR_VALUE, "[jit] graph is NULL");
    return g->mode;
}

int musa_graph_restore_grads(musa_graph *g) {
    if (!g) return musa_err(MUSA_ERR_VALUE, "[jit] graph is NULL");
    if (g->capturing) return musa_err(MUSA_ERR_RUNTIME, "[jit] restore_grads: still capturing");
    int rc = MUSA_OK;
    for (int64_t i = g->grad_undo.len - 1; i >= 0; i--) { /* newest first: the oldest wins */
        musa_grad_undo *u = &g->grad_undo.data[i];
        struct musa_autograd_meta *m = u->leaf->autograd;
        if (m) {
            musa_tensor_release(m->grad);
            m->grad = u->old;
            u->old = NULL;
        }
        musa_tensor_release(u->leaf), musa_tensor_release(u->old);
    }
    g->grad_undo.len = 0;
    return rc;
}

static void refuse(void *rec, const char *why) {
    musa_graph_refuse(rec, why);
}

/* The dispatcher's record hooks are set once, at load, not by each capture:
 * captures on other threads read them while one begins. */
__attribute__((constructor)) static void install_record_hooks(void) {
    musa_record_hook = record;
    musa_record_grad_hook = note_grad;
    musa_record_refuse_hook = refuse;
}

int musa_graph_capture_resume(musa_graph *g, int mode) {
    if (!g) return musa_err(MUSA_ERR_VALUE, "[jit] graph is NULL");
    if (mode != MUSA_MODE_TRACE && mode != MUSA_MODE_SYMBOLIC)
        return musa_err(MUSA_ERR_VALUE, "[jit] capture mode must be trace or symbolic, got %d",
                        (int)mode);
    if (musa_tls.recorder)
        return musa_err(MUSA_ERR_RUNTIME,
                        "[jit] a capture is already running on this thread (nested capture)");
    if (g->capturing) return musa_err(MUSA_ERR_RUNTIME, "[jit] this graph is capturing already");
    if (!g->tag) { /* a graph never captured into (built by editing, or a copy) */
        g->tag = atomic_fetch_add(&capture_ids, 1) & 0xffffffffu;
        /* Tensors the graph holds already map to their values. */
        for (int64_t i = 0; i < g->values.len; i++) {
            musa_tensor *t = g->values.data[i].tensor;
            if (t && !(t->flags & MUSA_TF_NUMBER) && bind(g, t, (int32_t)i))
                return musa_err_nomem("jit", 0);
        }
    }
    g->prev_mode = musa_tls.mode;
    g->prev_recorder = musa_tls.recorder;
    musa_tls.mode = (musa_mode)mode;
    g->mode = (musa_mode)mode;
    musa_tls.recorder = g;
    g->capturing = true;
    if (!g->epoch) g->epoch = (uint32_t)(atomic_fetch_add(&capture_ids, 1) | 1u);
    musa_tensor_epoch = g->epoch;
    return MUSA_OK;
}

int musa_graph_capture_begin(musa_graph *g, int mode) {
    if (g && !g->capturing && g->nodes.len)
        return musa_err(MUSA_ERR_RUNTIME, "[jit] this graph was captured already");
    return musa_graph_capture_resume(g, mode);
}

int musa_graph_capture_end(musa_graph *g) {
    if (!g || !g->capturing) return musa_err(MUSA_ERR_RUNTIME, "[jit] no capture is running");
    musa_tls.mode = g->prev_mode;
    musa_tls.recorder = g->prev_recorder;
    g->capturing = false;
    musa_tensor_epoch = 0;
    if (g->capture_error) return musa_err(g->capture_error, "%s", g->capture_msg);
    musa_graph_shrink(g);
    return MUSA_OK;
}

musa_graph *musa_graph_recording(void) {
    return musa_tls.mode != MUSA_MODE_EAGER ? musa_tls.recorder : NULL;
}

/* ---- inputs, outputs, host reads ---- */

int musa_graph_add_input(musa_graph *g, musa_tensor *t, const char *name) {
    if (!g || !t) return musa_err(MUSA_ERR_VALUE, "[jit] add_input: graph or tensor is NULL");
    if (musa_graph_value_of(g, t) >= 0)
        return musa_err(MUSA_ERR_VALUE, "[jit] add_input: the tensor is already in the graph");
    if (!musa_tensor_is_contiguous(t))
        return musa_err(MUSA_ERR_VALUE, "[jit] add_input: graph inputs must be contiguous");
    int32_t id = musa_graph_new_value(g, MUSA_V_INPUT, (musa_dtype)t->dtype, t->ndim, t->shape);
    if (id < 0 || musa_vec_push(&g->inputs, id)) return MUSA_ERR_NOMEM;
    if (name) g->values.data[id].name = musa_arena_strdup(&g->arena, name);
    t->trace_tag = (g->tag << 32) | (uint64_t)(id + 1);
    if (!musa_tls.grad_disabled && (t->flags & MUSA_TF_REQUIRES_GRAD)) g->requires_grad = true;
    return MUSA_OK;
}

int musa_graph_new_input(musa_graph *g, int like, const char *name) {
    if (!g || like < 0 || like >= g->values.len)
        return musa_err(MUSA_ERR_VALUE, "[jit] new_input: %d is not a value", like);
    musa_gvalue v = g->values.data[like];
    int32_t id = musa_graph_new_value(g, MUSA_V_INPUT, (musa_dtype)v.dtype, v.ndim, v.shape);
    if (id < 0 || musa_vec_push(&g->inputs, id)) return MUSA_ERR_NOMEM;
    if (name) g->values.data[id].name = musa_arena_strdup(&g->arena, name);
    return id;
}

int musa_graph_set_outputs(musa_graph *g, int n, musa_tensor *const *t) {
    if (!g || n < 0 || (n && !t))
        return musa_err(MUSA_ERR_VALUE, "[jit] set_outputs: graph or outputs are NULL");
    g->outputs.len = 0;
    for (int i = 0; i < n; i++) {
        if (!t[i]) return musa_err(MUSA_ERR_VALUE, "[jit] output %d is NULL", i);
        int32_t id = value_or_external(g, t[i]);
        if (id < 0 || musa_vec_push(&g->outputs, id)) return MUSA_ERR_NOMEM;
        if (!musa_tls.grad_disabled && (t[i]->flags & MUSA_TF_REQUIRES_GRAD) &&
            g->values.data[id].kind == MUSA_V_NODE)
            g->requires_grad = true;
    }
    return MUSA_OK;
}

int musa_graph_host_read(musa_graph *g, const musa_tensor *t, int kind, double value) {
    if (!g || !g->capturing || g->capture_error) return MUSA_OK;
    const char *loc = here(g);
    if (kind == MUSA_BREAK_DATA) {
        capture_fail(g, MUSA_ERR_NOT_IMPLEMENTED,
                     "[jit] a tensor's data is read on the host (numpy(), tolist(), printing)%s%s; "
                     "a captured function may only read single values (bool(), item())",
                     loc ? " at " : "", loc ? loc : "");
        return MUSA_OK;
    }
    int32_t id = value_or_external(g, (musa_tensor *)t);
    if (id < 0) return MUSA_ERR_NOMEM;
    musa_gbreak b = {.value = id,
                     .at_node = (int32_t)g->nodes.len,
                     .kind = (int8_t)kind,
                     .outcome = kind == MUSA_BREAK_BOOL ? (value != 0) : value,
                     .loc = loc};
    return musa_vec_push(&g->breaks, b);
}

int musa_graph_refuse(musa_graph *g, const char *why) {
    if (!g || !g->capturing) return MUSA_OK;
    const char *loc = here(g);
    capture_fail(g, MUSA_ERR_NOT_IMPLEMENTED, "[jit] %s%s%s cannot be captured", why ? why : "this",
                 loc ? " at " : "", loc ? loc : "");
    return MUSA_OK;
}

void musa_jit_set_location_hook(const char *(*fn)(void)) {
    musa_jit_location_hook = fn;
}
