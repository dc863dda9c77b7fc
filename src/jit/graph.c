/*
 * graph.c - the IR: values and nodes, capture through the dispatcher's record
 * hook, editing helpers for passes, the verifier and the printers.
 */
#include "graph.h"

#include <stdarg.h>
#include <stdio.h>

#include "../base/threadpool.h"

const char *(*musa_jit_location_hook)(void);

static atomic_uint_fast64_t capture_ids = 1;

musa_graph *musa_graph_new(void) {
    musa_graph *g = musa_calloc(1, sizeof *g, "graph_new");
    if (!g) return NULL;
    musa_arena_init(&g->arena, 0);
    return g;
}

void musa_graph_free(musa_graph *g) {
    if (!g) return;
    if (g->capturing) musa_graph_capture_end(g);
    for (int64_t i = 0; i < g->values.len; i++) musa_tensor_release(g->values.data[i].tensor);
    musa_vec_free(&g->values);
    musa_vec_free(&g->nodes);
    musa_vec_free(&g->inputs);
    musa_vec_free(&g->outputs);
    musa_vec_free(&g->mutations);
    musa_vec_free(&g->breaks);
    musa_vec_free(&g->syms);
    musa_map_free(&g->origin);
    musa_arena_free(&g->arena);
    free(g);
}

/* ---- values ---- */

static void set_contiguous(musa_gvalue *v) {
    musa_contiguous_strides(v->ndim, v->shape, v->strides);
    v->offset = 0;
}

int32_t musa_graph_new_value(musa_graph *g, musa_vkind kind, musa_dtype dtype, int ndim,
                             const int64_t *shape) {
    musa_gvalue v;
    memset(&v, 0, sizeof v);
    v.kind = (int8_t)kind;
    v.dtype = (int8_t)dtype;
    v.ndim = (int8_t)ndim;
    v.producer = -1;
    memset(v.sym, -1, sizeof v.sym);
    for (int i = 0; i < ndim; i++) v.shape[i] = shape[i];
    set_contiguous(&v);
    v.root = (int32_t)g->values.len;
    if (musa_vec_push(&g->values, v)) return -1;
    return v.root;
}

static const char *here(musa_graph *g) {
    if (g->loc_override) return g->loc_override;
    return musa_jit_location_hook ? musa_jit_location_hook() : NULL;
}

/* A tensor from outside the graph: a constant when it is a wrapped Python
 * number, else a parameter bound by reference, keeping the tensor's layout. */
static void capture_fail(musa_graph *g, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

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
    int32_t id = musa_graph_new_value(g, number ? MUSA_V_CONST : MUSA_V_PARAM,
                                      (musa_dtype)t->dtype, t->ndim, t->shape);
    if (id < 0) return -1;
    musa_gvalue *v = &g->values.data[id];
    for (int i = 0; i < t->ndim; i++) v->strides[i] = t->strides[i];
    v->tensor = musa_tensor_retain(t);
    v->loc = here(g);
    if (!number) t->trace_tag = (g->tag << 32) | (uint64_t)(id + 1);
    return id;
}

int32_t musa_graph_const(musa_graph *g, musa_tensor *t) {
    int32_t id = musa_graph_new_value(g, MUSA_V_CONST, (musa_dtype)t->dtype, t->ndim, t->shape);
    if (id < 0) return -1;
    musa_gvalue *v = &g->values.data[id];
    for (int i = 0; i < t->ndim; i++) v->strides[i] = t->strides[i];
    v->tensor = musa_tensor_retain(t);
    return id;
}

int musa_graph_value_of(const musa_graph *g, const musa_tensor *t) {
    if (!g || !t || (t->trace_tag >> 32) != g->tag || !g->tag) return -1;
    return (int32_t)(t->trace_tag & 0xffffffffu) - 1;
}

static int32_t value_or_external(musa_graph *g, musa_tensor *t) {
    int32_t id = musa_graph_value_of(g, t);
    return id >= 0 ? id : external(g, t);
}

/* ---- capture ---- */

static void capture_fail(musa_graph *g, int code, const char *fmt, ...) {
    if (g->capture_error) return;
    g->capture_error = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->capture_msg, sizeof g->capture_msg, fmt, ap);
    va_end(ap);
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
    if (info->attrs_kind != MUSA_ATTRS_none)
        memcpy(&n.attrs, attrs, musa_attrs_desc_of(info->attrs_kind)->size);
    int32_t node_id = (int32_t)g->nodes.len;
    for (int j = 0; j < n_out; j++) {
        musa_tensor *t = out[j];
        int32_t old = -1, orig = -1;
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
        v->producer = node_id;
        v->out_index = (int8_t)j;
        v->loc = loc;
        if ((info->flags & MUSA_OPF_VIEW) && !(provided & 1u)) {
            const musa_gvalue *src = &g->values.data[ins[0]];
            v->root = src->root;
            v->offset = src->offset + (t->offset - in[0]->offset);
            for (int d = 0; d < t->ndim; d++) v->strides[d] = t->strides[d];
        }
        n.out[j] = id;
        t->trace_tag = (g->tag << 32) | (uint64_t)(id + 1);
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
    return MUSA_OK;
nomem:
    capture_fail(g, MUSA_ERR_NOMEM, "[jit] out of memory while recording %s", info->name);
    return MUSA_OK;
}

static void refuse(void *rec, const char *why) {
    musa_graph_refuse(rec, why);
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
    musa_record_hook = record;
    musa_record_refuse_hook = refuse;
    g->prev_mode = musa_tls.mode;
    g->prev_recorder = musa_tls.recorder;
    musa_tls.mode = (musa_mode)mode;
    musa_tls.recorder = g;
    g->capturing = true;
    if (!g->epoch) g->epoch = (uint32_t)(atomic_fetch_add(&capture_ids, 1) | 1u);
    musa_tensor_epoch = g->epoch;
    return MUSA_OK;
}

int musa_graph_capture_begin(musa_graph *g, int mode) {
    if (g && !g->capturing && g->nodes.len)
        return musa_err(MUSA_ERR_RUNTIME, "[jit] this graph was captured already");
    if (g && !musa_tls.recorder && !g->capturing && !g->tag) {
        g->tag = atomic_fetch_add(&capture_ids, 1) & 0xffffffffu;
        /* Tensors of earlier captures must never match: values get fresh tags. */
        for (int64_t i = 0; i < g->values.len; i++) {
            musa_tensor *t = g->values.data[i].tensor;
            if (t && !(t->flags & MUSA_TF_NUMBER))
                t->trace_tag = (g->tag << 32) | (uint64_t)(i + 1);
        }
    }
    return musa_graph_capture_resume(g, mode);
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

int musa_graph_capture_end(musa_graph *g) {
    if (!g || !g->capturing) return musa_err(MUSA_ERR_RUNTIME, "[jit] no capture is running");
    musa_tls.mode = g->prev_mode;
    musa_tls.recorder = g->prev_recorder;
    g->capturing = false;
    musa_tensor_epoch = 0;
    if (g->capture_error) return musa_err(g->capture_error, "%s", g->capture_msg);
    return MUSA_OK;
}

musa_graph *musa_graph_recording(void) {
    return musa_tls.mode != MUSA_MODE_EAGER ? musa_tls.recorder : NULL;
}

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

/* ---- editing ---- */

musa_tensor *musa_graph_meta(const musa_graph *g, int32_t id, bool tagged) {
    const musa_gvalue *v = &g->values.data[id];
    musa_tensor *t = musa_tensor_meta((musa_dtype)v->dtype, v->ndim, v->shape);
    if (!t) return NULL;
    for (int i = 0; i < v->ndim; i++) t->strides[i] = v->strides[i];
    t->offset = v->offset;
    if (v->kind == MUSA_V_CONST && v->tensor) t->flags |= v->tensor->flags & MUSA_TF_NUMBER;
    if (tagged) t->trace_tag = (g->tag << 32) | (uint64_t)(id + 1);
    return t;
}

static int infer_into(musa_graph *g, musa_gnode *n, int32_t *fresh_out) {
    const musa_op_info *info = &musa_ops[n->op];
    musa_tensor *tin_buf[8], **tin = tin_buf;
    int8_t dt_buf[8], *dt = dt_buf;
    int rc = MUSA_OK;
    if (n->n_in > 8) {
        tin = musa_calloc((size_t)n->n_in, sizeof *tin, info->name);
        dt = musa_malloc((size_t)n->n_in, info->name);
        if (!tin || !dt) {
            free(tin), free(dt);
            return MUSA_ERR_NOMEM;
        }
    }
    int made = 0;
    for (; made < n->n_in; made++)
        if (!(tin[made] = musa_graph_meta(g, n->in[made], false))) {
            rc = musa_last_error_code();
            goto done;
        }
    musa_infer r;
    musa_infer_init(&r, info, dt, n->n_in);
    if ((rc = info->infer(info, tin, n->n_in, &n->attrs, &r)) ||
        (rc = musa_infer_check_outputs(info, &r))) {
        musa_err_prefix(info->name);
        goto done;
    }
    if (fresh_out) {
        n->n_out = r.n_out;
    } else if (n->n_out != r.n_out) {
        rc = musa_err(MUSA_ERR_VALUE, "[%s] node has %d outputs but its inputs give %d",
                      info->name, n->n_out, r.n_out);
        goto done;
    }
    for (int i = 0; i < n->n_in; i++)
        if (dt[i] >= 0 && dt[i] != tin[i]->dtype) {
            rc = musa_err(MUSA_ERR_TYPE, "[%s] input %d (%%%d) is %s but the op wants %s",
                          info->name, i, n->in[i], musa_dtype_name((musa_dtype)tin[i]->dtype),
                          musa_dtype_name((musa_dtype)dt[i]));
            goto done;
        }
    for (int j = 0; j < r.n_out; j++) {
        int32_t id = n->out[j];
        if (fresh_out) {
            id = musa_graph_new_value(g, MUSA_V_NODE, (musa_dtype)r.out_dtype[j], r.out_ndim[j],
                                      r.out_shape[j]);
            if (id < 0) {
                rc = MUSA_ERR_NOMEM;
                goto done;
            }
            fresh_out[j] = id;
        }
        musa_gvalue *v = &g->values.data[id];
        v->dtype = r.out_dtype[j];
        v->ndim = r.out_ndim[j];
        for (int d = 0; d < v->ndim; d++) v->shape[d] = r.out_shape[j][d];
        set_contiguous(v);
        v->root = id;
        if (info->flags & MUSA_OPF_VIEW) {
            const musa_gvalue *src = &g->values.data[n->in[0]];
            v->root = src->root;
            v->offset = r.view_offset;
            for (int d = 0; d < v->ndim; d++) v->strides[d] = r.view_strides[d];
        }
    }
done:
    for (int i = 0; i < made; i++) musa_tensor_release(tin[i]);
    if (tin != tin_buf) free(tin);
    if (dt != dt_buf) free(dt);
    return rc;
}

int32_t musa_graph_add_node(musa_graph *g, musa_op_id op, int n_in, const int32_t *in,
                            const void *attrs, int32_t *out) {
    const musa_op_info *info = &musa_ops[op];
    if (info->n_in >= 0 && n_in != info->n_in)
        return musa_err(MUSA_ERR_VALUE, "[%s] takes %d tensor inputs, got %d", info->name,
                        info->n_in, n_in);
    for (int i = 0; i < n_in; i++)
        if (in[i] < 0 || in[i] >= g->values.len)
            return musa_err(MUSA_ERR_VALUE, "[%s] input %d is not a value of the graph",
                            info->name, i);
    musa_gnode n;
    memset(&n, 0, sizeof n);
    n.op = (int16_t)op;
    n.n_in = n_in;
    n.group = -1;
    n.in = n_in ? MUSA_ARENA_NEW(&g->arena, int32_t, n_in) : NULL;
    if (n_in && !n.in) return MUSA_ERR_NOMEM;
    memcpy(n.in, in, sizeof(int32_t) * (size_t)n_in);
    if (info->attrs_kind != MUSA_ATTRS_none) {
        if (attrs)
            memcpy(&n.attrs, attrs, musa_attrs_desc_of(info->attrs_kind)->size);
        else
            musa_attrs_init(info->attrs_kind, &n.attrs);
    }
    int32_t fresh[MUSA_MAX_OUTPUTS];
    int rc = infer_into(g, &n, fresh);
    if (rc) return rc;
    int32_t id = (int32_t)g->nodes.len;
    for (int j = 0; j < n.n_out; j++) {
        n.out[j] = fresh[j];
        g->values.data[fresh[j]].producer = id;
        g->values.data[fresh[j]].out_index = (int8_t)j;
        if (out) out[j] = fresh[j];
    }
    if (musa_vec_push(&g->nodes, n)) return MUSA_ERR_NOMEM;
    return id;
}

int musa_graph_infer_node(musa_graph *g, int32_t n) {
    return infer_into(g, &g->nodes.data[n], NULL);
}

int musa_graph_refresh_view(musa_graph *g, int32_t i) {
    const musa_gnode *n = &g->nodes.data[i];
    if (!(musa_ops[n->op].flags & MUSA_OPF_VIEW)) return MUSA_OK;
    if (g->values.data[n->out[0]].root == g->values.data[n->in[0]].root) return MUSA_OK;
    return musa_graph_infer_node(g, i);
}

bool musa_gvalue_same_layout(const musa_gvalue *a, const musa_gvalue *b) {
    if (a->dtype != b->dtype || a->offset != b->offset ||
        !musa_shape_equal(a->ndim, a->shape, b->ndim, b->shape))
        return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->strides[d] != b->strides[d]) return false;
    return true;
}

void musa_graph_replace_uses(musa_graph *g, int32_t from, int32_t to) {
    for (int64_t i = 0; i < g->nodes.len; i++) {
        musa_gnode *n = &g->nodes.data[i];
        if (n->dead) continue;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] == from) n->in[k] = to;
    }
    for (int64_t i = 0; i < g->outputs.len; i++)
        if (g->outputs.data[i] == from) g->outputs.data[i] = to;
    for (int64_t i = 0; i < g->mutations.len; i++)
        if (g->mutations.data[i].value == from) g->mutations.data[i].value = to;
    for (int64_t i = 0; i < g->breaks.len; i++)
        if (g->breaks.data[i].value == from) g->breaks.data[i].value = to;
}

void musa_graph_analyse(musa_graph *g) {
    for (int64_t i = 0; i < g->values.len; i++) g->values.data[i].uses = 0;
    for (int64_t i = 0; i < g->nodes.len; i++) {
        musa_gnode *n = &g->nodes.data[i];
        if (n->dead) continue;
        for (int k = 0; k < n->n_in; k++) g->values.data[n->in[k]].uses++;
    }
    for (int64_t i = 0; i < g->outputs.len; i++) g->values.data[g->outputs.data[i]].uses++;
    for (int64_t i = 0; i < g->mutations.len; i++)
        g->values.data[g->mutations.data[i].value].uses++;
    for (int64_t i = 0; i < g->breaks.len; i++) g->values.data[g->breaks.data[i].value].uses++;
}

void musa_graph_compact(musa_graph *g) {
    int64_t w = 0;
    for (int64_t i = 0; i < g->nodes.len; i++) {
        if (g->nodes.data[i].dead) continue;
        musa_gnode *n = &g->nodes.data[i];
        for (int j = 0; j < n->n_out; j++) g->values.data[n->out[j]].producer = (int32_t)w;
        for (int64_t b = 0; b < g->breaks.len; b++)
            if (g->breaks.data[b].at_node == (int32_t)i) g->breaks.data[b].at_node = (int32_t)w;
        g->nodes.data[w++] = *n;
    }
    for (int64_t b = 0; b < g->breaks.len; b++)
        if (g->breaks.data[b].at_node > (int32_t)w) g->breaks.data[b].at_node = (int32_t)w;
    g->nodes.len = w;
}

int musa_graph_node_count(const musa_graph *g) {
    int c = 0;
    if (!g) return 0;
    for (int64_t i = 0; i < g->nodes.len; i++) c += !g->nodes.data[i].dead;
    return c;
}

/* ---- verifier ---- */

int musa_graph_verify(const musa_graph *g) {
    if (!g) return musa_err(MUSA_ERR_VALUE, "[jit verify] graph is NULL");
    int64_t nv = g->values.len;
    char *defined = musa_calloc((size_t)(nv ? nv : 1), 1, "verify");
    if (!defined) return MUSA_ERR_NOMEM;
    int rc = MUSA_OK;
    for (int64_t i = 0; i < nv; i++) {
        const musa_gvalue *v = &g->values.data[i];
        if (v->kind != MUSA_V_NODE) defined[i] = 1;
        if ((v->kind == MUSA_V_PARAM || v->kind == MUSA_V_CONST) && !v->tensor) {
            rc = musa_err(MUSA_ERR_RUNTIME, "[jit verify] %%%lld is a %s without a tensor",
                          (long long)i, v->kind == MUSA_V_PARAM ? "param" : "const");
            goto done;
        }
        if (v->root < 0 || v->root >= nv || g->values.data[v->root].root != v->root) {
            rc = musa_err(MUSA_ERR_RUNTIME, "[jit verify] %%%lld has a bad root %d", (long long)i,
                          v->root);
            goto done;
        }
    }
    for (int64_t i = 0; i < g->inputs.len; i++)
        if (g->values.data[g->inputs.data[i]].kind != MUSA_V_INPUT) {
            rc = musa_err(MUSA_ERR_RUNTIME, "[jit verify] input %lld is not an input value",
                          (long long)i);
            goto done;
        }
    for (int64_t i = 0; i < g->nodes.len; i++) {
        const musa_gnode *n = &g->nodes.data[i];
        if (n->dead) continue;
        const musa_op_info *info = &musa_ops[n->op];
        if (n->op < 0 || n->op >= MUSA_OP_COUNT || n->n_out != info->n_out ||
            (info->n_in >= 0 && n->n_in != info->n_in)) {
            rc = musa_err(MUSA_ERR_RUNTIME, "[jit verify] node %lld (%s) has a bad arity",
                          (long long)i, info->name);
            goto done;
        }
        for (int k = 0; k < n->n_in; k++) {
            if (n->in[k] < 0 || n->in[k] >= nv || !defined[n->in[k]]) {
                rc = musa_err(MUSA_ERR_RUNTIME,
                              "[jit verify] node %lld (%s) reads %%%d before it is defined",
                              (long long)i, info->name, n->in[k]);
                goto done;
            }
        }
        /* The op's own inference must agree with the recorded outputs. */
        musa_gvalue saved[MUSA_MAX_OUTPUTS];
        for (int j = 0; j < n->n_out; j++) saved[j] = g->values.data[n->out[j]];
        musa_gnode copy = *n;
        int r2 = infer_into((musa_graph *)g, &copy, NULL);
        bool same = r2 == MUSA_OK;
        for (int j = 0; j < n->n_out; j++) {
            musa_gvalue *v = &g->values.data[n->out[j]];
            if (same && (v->dtype != saved[j].dtype ||
                         !musa_shape_equal(v->ndim, v->shape, saved[j].ndim, saved[j].shape)))
                same = false;
            *v = saved[j];
        }
        if (!same) {
            if (r2 == MUSA_OK)
                rc = musa_err(MUSA_ERR_RUNTIME,
                              "[jit verify] node %lld (%s): outputs disagree with the op's "
                              "inference",
                              (long long)i, info->name);
            else
                rc = musa_err(r2, "[jit verify] node %lld (%s): %s", (long long)i, info->name,
                              musa_last_error());
            goto done;
        }
        for (int j = 0; j < n->n_out; j++) {
            int32_t o = n->out[j];
            if (o < 0 || o >= nv || defined[o] || g->values.data[o].producer != (int32_t)i) {
                rc = musa_err(MUSA_ERR_RUNTIME,
                              "[jit verify] node %lld (%s) output %d is defined twice or has "
                              "another producer",
                              (long long)i, info->name, j);
                goto done;
            }
            defined[o] = 1;
        }
    }
    for (int64_t i = 0; i < g->outputs.len; i++)
        if (!defined[g->outputs.data[i]]) {
            rc = musa_err(MUSA_ERR_RUNTIME, "[jit verify] output %lld (%%%d) is never defined",
                          (long long)i, g->outputs.data[i]);
            goto done;
        }
    for (int64_t i = 0; i < g->mutations.len; i++) {
        const musa_gmutation *m = &g->mutations.data[i];
        if (!defined[m->value] || m->target < 0 || m->target >= nv ||
            (g->values.data[m->target].kind != MUSA_V_INPUT &&
             g->values.data[m->target].kind != MUSA_V_PARAM)) {
            rc = musa_err(MUSA_ERR_RUNTIME, "[jit verify] mutation %lld is malformed",
                          (long long)i);
            goto done;
        }
    }
done:
    free(defined);
    return rc;
}

/* ---- printing ---- */

typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap ? b->cap * 2 : 1024) + (size_t)n;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q, b->cap = cap;
    }
}

static char *sb_finish(sbuf *b) {
    if (b->oom) {
        free(b->p);
        musa_err_nomem("graph_text", b->cap);
        return NULL;
    }
    if (!b->p) sb_printf(b, "%s", "");
    return b->p;
}

/* A dim that follows a dynamic dim prints as its symbol when it equals it,
 * else as ~N (N at the traced size, affine in the symbol). */
static void sb_dim(sbuf *b, const musa_graph *g, const musa_gvalue *v, int d) {
    int s = v->sym[d];
    if (s >= 0 && s < g->syms.len) {
        const musa_gsym *y = &g->syms.data[s];
        if (v->shape[d] == y->traced)
            sb_printf(b, "%s", y->name);
        else
            sb_printf(b, "~%lld", (long long)v->shape[d]);
        return;
    }
    sb_printf(b, "%lld", (long long)v->shape[d]);
}

static void sb_type(sbuf *b, const musa_graph *g, const musa_gvalue *v) {
    sb_printf(b, "%s[", musa_dtype_name((musa_dtype)v->dtype));
    for (int d = 0; d < v->ndim; d++) {
        if (d) sb_printf(b, ", ");
        sb_dim(b, g, v, d);
    }
    sb_printf(b, "]");
}

static const char *kind_name(int k) {
    static const char *names[] = {"node", "input", "param", "const"};
    return names[k];
}

static void sb_const(sbuf *b, const musa_graph *g, const musa_gvalue *v) {
    if (v->tensor && v->tensor->numel == 1 && v->tensor->storage) {
        double x = 0;
        if (!musa_tensor_item(v->tensor, &x)) {
            sb_printf(b, "%.17g", x);
            return;
        }
    }
    sb_type(b, g, v);
}

/* Values the live graph refers to (printing skips the rest: consts a pass
 * folded away, values of dead nodes). NULL on OOM means "all". */
static uint8_t *referenced(const musa_graph *g) {
    uint8_t *r = calloc((size_t)(g->values.len ? g->values.len : 1), 1);
    if (!r) return NULL;
    for (int64_t i = 0; i < g->inputs.len; i++) r[g->inputs.data[i]] = 1;
    for (int64_t i = 0; i < g->outputs.len; i++) r[g->outputs.data[i]] = 1;
    for (int64_t i = 0; i < g->mutations.len; i++)
        r[g->mutations.data[i].target] = r[g->mutations.data[i].value] = 1;
    for (int64_t i = 0; i < g->nodes.len; i++) {
        const musa_gnode *n = &g->nodes.data[i];
        if (n->dead) continue;
        for (int k = 0; k < n->n_in; k++) r[n->in[k]] = 1;
        for (int j = 0; j < n->n_out; j++) r[n->out[j]] = 1;
    }
    return r;
}

char *musa_graph_text(const musa_graph *g) {
    if (!g) {
        musa_err(MUSA_ERR_VALUE, "[jit] graph is NULL");
        return NULL;
    }
    sbuf b = {0};
    char attrs[1024];
    uint8_t *ref = referenced(g);
    sb_printf(&b, "graph(");
    for (int64_t i = 0; i < g->inputs.len; i++) {
        const musa_gvalue *v = &g->values.data[g->inputs.data[i]];
        sb_printf(&b, "%s%%%d", i ? ", " : "", g->inputs.data[i]);
        if (v->name) sb_printf(&b, " \"%s\"", v->name);
        sb_printf(&b, ": ");
        sb_type(&b, g, v);
    }
    sb_printf(&b, ") {\n");
    for (int64_t i = 0; i < g->syms.len; i++) {
        const musa_gsym *y = &g->syms.data[i];
        sb_printf(&b, "  # %s in [%lld, %lld] (traced at %lld)\n", y->name, (long long)y->lo,
                  (long long)y->hi, (long long)y->traced);
    }
    for (int64_t i = 0; i < g->values.len; i++) {
        const musa_gvalue *v = &g->values.data[i];
        if ((v->kind != MUSA_V_PARAM && v->kind != MUSA_V_CONST) || (ref && !ref[i])) continue;
        sb_printf(&b, "  %%%lld = %s ", (long long)i, kind_name(v->kind));
        if (v->kind == MUSA_V_CONST)
            sb_const(&b, g, v);
        else
            sb_type(&b, g, v);
        sb_printf(&b, "\n");
    }
    for (int64_t i = 0; i < g->nodes.len; i++) {
        const musa_gnode *n = &g->nodes.data[i];
        if (n->dead) continue;
        const musa_op_info *info = &musa_ops[n->op];
        sb_printf(&b, "  ");
        for (int j = 0; j < n->n_out; j++) sb_printf(&b, "%s%%%d", j ? ", " : "", n->out[j]);
        sb_printf(&b, " = %s(", info->name);
        for (int k = 0; k < n->n_in; k++) sb_printf(&b, "%s%%%d", k ? ", " : "", n->in[k]);
        if (info->attrs_kind != MUSA_ATTRS_none) {
            musa_attrs_format(info->attrs_kind, &n->attrs, false, attrs, sizeof attrs);
            if (attrs[0]) sb_printf(&b, "%s%s", n->n_in ? ", " : "", attrs);
        }
        sb_printf(&b, ")  # ");
        for (int j = 0; j < n->n_out; j++) {
            if (j) sb_printf(&b, ", ");
            sb_type(&b, g, &g->values.data[n->out[j]]);
        }
        if (n->group >= 0) sb_printf(&b, " fused:%d", n->group);
        if (n->loc) sb_printf(&b, "  %s", n->loc);
        sb_printf(&b, "\n");
    }
    for (int64_t i = 0; i < g->mutations.len; i++)
        sb_printf(&b, "  write %%%d <- %%%d\n", g->mutations.data[i].target,
                  g->mutations.data[i].value);
    sb_printf(&b, "  return (");
    for (int64_t i = 0; i < g->outputs.len; i++)
        sb_printf(&b, "%s%%%d", i ? ", " : "", g->outputs.data[i]);
    sb_printf(&b, ")\n}\n");
    free(ref);
    return sb_finish(&b);
}

static void sb_value_list(sbuf *b, const int32_t *ids, int64_t n) {
    sb_printf(b, "[");
    for (int64_t i = 0; i < n; i++) sb_printf(b, "%s\"%%%d\"", i ? ", " : "", ids[i]);
    sb_printf(b, "]");
}

static void sb_json_type(sbuf *b, const musa_graph *g, const musa_gvalue *v) {
    sb_printf(b, "\"dtype\": \"%s\", \"shape\": [", musa_dtype_name((musa_dtype)v->dtype));
    bool sym = false;
    for (int d = 0; d < v->ndim; d++) {
        sb_printf(b, "%s%lld", d ? ", " : "", (long long)v->shape[d]);
        sym |= v->sym[d] >= 0 && v->sym[d] < g->syms.len;
    }
    sb_printf(b, "]");
    if (!sym) return;
    sb_printf(b, ", \"symbolic\": [");
    for (int d = 0; d < v->ndim; d++)
        sb_printf(b, "%s%s%s%s", d ? ", " : "", v->sym[d] >= 0 ? "\"" : "",
                  v->sym[d] >= 0 && v->sym[d] < g->syms.len ? g->syms.data[v->sym[d]].name : "null",
                  v->sym[d] >= 0 ? "\"" : "");
    sb_printf(b, "]");
}

char *musa_graph_json(const musa_graph *g) {
    if (!g) {
        musa_err(MUSA_ERR_VALUE, "[jit] graph is NULL");
        return NULL;
    }
    sbuf b = {0};
    char attrs[1024];
    uint8_t *ref = referenced(g);
    sb_printf(&b, "{\"inputs\": ");
    sb_value_list(&b, g->inputs.data, g->inputs.len);
    sb_printf(&b, ", \"values\": {");
    bool first_value = true;
    for (int64_t i = 0; i < g->values.len; i++) {
        const musa_gvalue *v = &g->values.data[i];
        if (ref && !ref[i]) continue;
        sb_printf(&b, "%s\"%%%lld\": {\"kind\": \"%s\", ", first_value ? "" : ", ",
                  (long long)i, kind_name(v->kind));
        first_value = false;
        sb_json_type(&b, g, v);
        if (v->kind == MUSA_V_CONST && v->tensor && v->tensor->numel == 1) {
            double x = 0;
            if (!musa_tensor_item(v->tensor, &x) && x == x && x - x == 0)
                sb_printf(&b, ", \"value\": %.17g", x);
        }
        sb_printf(&b, "}");
    }
    sb_printf(&b, "}, \"nodes\": [");
    bool first = true;
    for (int64_t i = 0; i < g->nodes.len; i++) {
        const musa_gnode *n = &g->nodes.data[i];
        if (n->dead) continue;
        const musa_op_info *info = &musa_ops[n->op];
        sb_printf(&b, "%s{\"op\": \"%s\", \"inputs\": ", first ? "" : ", ", info->name);
        first = false;
        sb_value_list(&b, n->in, n->n_in);
        sb_printf(&b, ", \"outputs\": ");
        sb_value_list(&b, n->out, n->n_out);
        if (info->attrs_kind != MUSA_ATTRS_none)
            musa_attrs_format(info->attrs_kind, &n->attrs, true, attrs, sizeof attrs);
        else
            snprintf(attrs, sizeof attrs, "{}");
        sb_printf(&b, ", \"attrs\": %s", attrs);
        if (n->loc) {
            sb_printf(&b, ", \"loc\": \"");
            for (const char *c = n->loc; *c; c++)
                sb_printf(&b, (*c == '"' || *c == '\\') ? "\\%c" : "%c", *c);
            sb_printf(&b, "\"");
        }
        sb_printf(&b, "}");
    }
    sb_printf(&b, "], \"outputs\": ");
    sb_value_list(&b, g->outputs.data, g->outputs.len);
    sb_printf(&b, ", \"mutations\": [");
    for (int64_t i = 0; i < g->mutations.len; i++)
        sb_printf(&b, "%s{\"target\": \"%%%d\", \"value\": \"%%%d\"}", i ? ", " : "",
                  g->mutations.data[i].target, g->mutations.data[i].value);
    sb_printf(&b, "]}");
    free(ref);
    return sb_finish(&b);
}

/* ---- split along dim 0 ---- */

bool musa_graph_split0_ok(const musa_graph *g, int32_t ni) {
    const musa_gnode *n = &g->nodes.data[ni];
    const musa_op_info *info = &musa_ops[n->op];
    if (info->flags & (MUSA_OPF_VIEW | MUSA_OPF_RANDOM | MUSA_OPF_CREATION)) return false;
    if (n->n_in < 1 || info->n_out != 1) return false;
    const musa_gvalue *x = &g->values.data[n->in[0]];
    const musa_gvalue *y = &g->values.data[n->out[0]];
    if (x->ndim < 2 || y->ndim < 1 || x->shape[0] != y->shape[0] || x->shape[0] < 2) return false;
    /* Ask the op: with input 0 cut to one row, is the output one row of it? */
    musa_graph *tmp = (musa_graph *)g;
    int64_t saved = x->shape[0];
    tmp->values.data[n->in[0]].shape[0] = 1;
    musa_gnode copy = *n;
    musa_gvalue out_saved = *y;
    int rc = infer_into(tmp, &copy, NULL);
    const musa_gvalue *r = &g->values.data[n->out[0]];
    bool ok = rc == MUSA_OK && r->ndim == out_saved.ndim && r->shape[0] == 1;
    for (int d = 1; ok && d < r->ndim; d++) ok = r->shape[d] == out_saved.shape[d];
    tmp->values.data[n->out[0]] = out_saved;
    tmp->values.data[n->in[0]].shape[0] = saved;
    if (rc) musa_clear_error(); /* the probe's error is not the caller's */
    return ok;
}

/* ---- public accessors ---- */

musa_tensor *musa_empty_meta(musa_dtype dtype, int ndim, const int64_t *shape) {
    if (!musa_dtype_valid((int)dtype)) {
        musa_err(MUSA_ERR_TYPE, "[meta] invalid dtype %d", (int)dtype);
        return NULL;
    }
    if (ndim < 0 || ndim > MUSA_MAX_DIMS || (ndim && !shape)) {
        musa_err(MUSA_ERR_VALUE, "[meta] ndim must be in 0..%d, got %d", MUSA_MAX_DIMS, ndim);
        return NULL;
    }
    return musa_tensor_meta(dtype, ndim, shape);
}

void musa_jit_set_location_hook(const char *(*fn)(void)) {
    musa_jit_location_hook = fn;
}

int musa_graph_num_nodes(const musa_graph *g) {
    return g ? (int)g->nodes.len : 0;
}
const char *musa_graph_node_op(const musa_graph *g, int node) {
    if (!g || node < 0 || node >= g->nodes.len || g->nodes.data[node].dead) return NULL;
    return musa_ops[g->nodes.data[node].op].name;
}
int musa_graph_node_group(const musa_graph *g, int node) {
    return g && node >= 0 && node < g->nodes.len ? g->nodes.data[node].group : -1;
}
int musa_graph_num_values(const musa_graph *g) {
    return g ? (int)g->values.len : 0;
}
static const musa_gvalue *value_at(const musa_graph *g, int v) {
    return g && v >= 0 && v < g->values.len ? &g->values.data[v] : NULL;
}
int musa_graph_value_kind(const musa_graph *g, int value) {
    const musa_gvalue *v = value_at(g, value);
    return v ? v->kind : -1;
}
int musa_graph_value_ndim(const musa_graph *g, int value) {
    const musa_gvalue *v = value_at(g, value);
    return v ? v->ndim : -1;
}
int musa_graph_value_producer(const musa_graph *g, int value) {
    const musa_gvalue *v = value_at(g, value);
    return v ? v->producer : -1;
}
musa_tensor *musa_graph_value_tensor(const musa_graph *g, int value) {
    const musa_gvalue *v = value_at(g, value);
    return v ? v->tensor : NULL;
}
int musa_graph_input(const musa_graph *g, int i) {
    return g && i >= 0 && i < g->inputs.len ? g->inputs.data[i] : -1;
}
bool musa_graph_has_random(const musa_graph *g) {
    if (!g) return false;
    for (int64_t i = 0; i < g->nodes.len; i++)
        if (!g->nodes.data[i].dead && (musa_ops[g->nodes.data[i].op].flags & MUSA_OPF_RANDOM))
            return true;
    return false;
}
int musa_graph_num_inputs(const musa_graph *g) {
    return g ? (int)g->inputs.len : 0;
}
int musa_graph_num_outputs(const musa_graph *g) {
    return g ? (int)g->outputs.len : 0;
}
int musa_graph_output(const musa_graph *g, int i) {
    return g && i >= 0 && i < g->outputs.len ? g->outputs.data[i] : -1;
}
int musa_graph_num_mutations(const musa_graph *g) {
    return g ? (int)g->mutations.len : 0;
}
bool musa_graph_requires_grad(const musa_graph *g) {
    return g && g->requires_grad;
}
int musa_graph_num_breaks(const musa_graph *g) {
    return g ? (int)g->breaks.len : 0;
}
int musa_graph_break(const musa_graph *g, int i, int *value, int *at_node, int *kind,
                     double *outcome, const char **loc) {
    if (!g || i < 0 || i >= g->breaks.len)
        return musa_err(MUSA_ERR_INDEX, "[jit] break %d of %lld", i, g ? (long long)g->breaks.len : 0LL);
    const musa_gbreak *b = &g->breaks.data[i];
    if (value) *value = b->value;
    if (at_node) *at_node = b->at_node;
    if (kind) *kind = b->kind;
    if (outcome) *outcome = b->outcome;
    if (loc) *loc = b->loc;
    return MUSA_OK;
}

int musa_graph_add_symbol(musa_graph *g, const char *name, int64_t lo, int64_t hi, int64_t traced) {
    if (!g || !name || lo > hi || traced < lo || traced > hi)
        return musa_err(MUSA_ERR_VALUE, "[jit] add_symbol: bad symbol or range [%lld, %lld]",
                        (long long)lo, (long long)hi);
    if (g->syms.len >= 100) return musa_err(MUSA_ERR_VALUE, "[jit] add_symbol: too many symbols");
    musa_gsym y = {.lo = lo, .hi = hi, .traced = traced};
    snprintf(y.name, sizeof y.name, "%s", name);
    if (musa_vec_push(&g->syms, y)) return MUSA_ERR_NOMEM;
    return (int)g->syms.len - 1;
}

int musa_graph_set_symbolic(musa_graph *g, int value, int dim, int sym) {
    if (!g || value < 0 || value >= g->values.len || sym < 0 || sym >= g->syms.len)
        return musa_err(MUSA_ERR_VALUE, "[jit] set_symbolic: bad value or symbol");
    musa_gvalue *v = &g->values.data[value];
    if (dim < 0 || dim >= v->ndim)
        return musa_err(MUSA_ERR_INDEX, "[jit] set_symbolic: %%%d has no dim %d", value, dim);
    v->sym[dim] = (int8_t)sym;
    return MUSA_OK;
}
