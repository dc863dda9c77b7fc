/*
 * layout.c - channels-last layout for convolution chains (pass
 * "channels_last"; the pipeline runs it only with musa_pass_ctx's
 * channels_last, set by musa.Config(channels_last=True)).
 *
 * oneDNN's convolutions take NCHW tensors only through reorders into their
 * blocked layouts and back: in a ResNet-18 training step, a fifth of the
 * time spent in oneDNN. Its NHWC kernels run as fast as the blocked ones
 * and need no activation reorders. This pass keeps the activations of
 * convolution chains in NHWC inside the plan:
 * - conv2d and its two backward ops become their channels_last forms
 *   (activations are (N, H, W, C) tensors; the weight stays (O, I, kh, kw));
 * - batch_norm, batch_norm_apply and batch_norm_backward of an NHWC value
 *   run on its (N H W, C) view, the kernels' rows form;
 * - elementwise ops whose tensor operands all have the output's shape (or
 *   one element) run on the NHWC values as they are;
 * - anything else reads an NCHW copy (a permute and a clone, made once per
 *   value, right before its first such reader), and graph outputs and
 *   mutations are NCHW again at the end.
 * So the graph computes the same function; only where its values live and
 * the order of float32 sums change (the convolution kernels, the
 * statistics), which is why it is an option and not the default: by
 * default a plan is bitwise equal to eager.
 *
 * A convolution becomes channels-last only where oneDNN builds its NHWC
 * primitive (float32 and bfloat16); graphs with host reads (breaks) are left
 * as they are.
 */
#include "../../backend/cpu/conv_dnnl.h"
#include "../../backend/cpu/kernels.h"
#include "../graph.h"

typedef struct {
    musa_graph *g;
    int64_t nn0;           /* original node count: new nodes are placed among these */
    int32_t nv0;           /* original value count: the maps below cover these */
    int32_t *cl;           /* [nv0] the NHWC value holding value v, or -1 */
    int32_t *std;          /* [nv0] an NCHW copy of a value whose producer became NHWC, or -1 */
    bool *gone;            /* [nv0] v's producer was replaced: only cl[v] (or std[v]) hold it */
    MUSA_VEC(int32_t) pos; /* position of each new node (graph.c, musa_graph_place) */
    int changed;
} lay;

static const musa_gvalue *val(const lay *L, int32_t v) {
    return &L->g->values.data[v];
}

static bool has_cl(const lay *L, int32_t v) {
    return v < L->nv0 && (L->gone[v] || L->cl[v] >= 0);
}

/* Append op(in) before original node `at`; outputs to out. */
static int add(lay *L, musa_op_id op, int n_in, const int32_t *in, const void *attrs, int32_t at,
               const char *loc, int32_t *out) {
    int32_t id = musa_graph_add_node(L->g, op, n_in, in, attrs, out);
    if (id < 0) return id;
    L->g->nodes.data[id].loc = loc;
    if (musa_vec_push(&L->pos, at)) return MUSA_ERR_NOMEM;
    return MUSA_OK;
}

/* v with its dims permuted, as a contiguous copy. */
static int permuted(lay *L, int32_t v, const int64_t *dims, int32_t at, int32_t *out) {
    musa_attrs_dims d;
    musa_attrs_init(MUSA_ATTRS_dims, &d);
    d.dims.n = 4;
    memcpy(d.dims.v, dims, 4 * sizeof(int64_t));
    int32_t view;
    const char *loc = v < L->g->values.len ? val(L, v)->loc : NULL;
    int rc = add(L, MUSA_OP_permute, 1, &v, &d, at, loc, &view);
    return rc ? rc : add(L, MUSA_OP_clone, 1, &view, NULL, at, loc, out);
}

/* The NHWC value of original value v, made before node `at` if need be. */
static int to_cl(lay *L, int32_t v, int32_t at, int32_t *out) {
    if (L->cl[v] < 0) {
        int rc = permuted(L, v, (const int64_t[]){0, 2, 3, 1}, at, &L->cl[v]);
        if (rc) return rc;
    }
    *out = L->cl[v];
    return MUSA_OK;
}

/* The NCHW value of v (itself unless its producer became NHWC). */
static int to_std(lay *L, int32_t v, int32_t at, int32_t *out) {
    *out = v;
    if (v >= L->nv0 || !L->gone[v]) return MUSA_OK;
    if (L->std[v] < 0) {
        int rc = permuted(L, L->cl[v], (const int64_t[]){0, 3, 1, 2}, at, &L->std[v]);
        if (rc) return rc;
    }
    *out = L->std[v];
    return MUSA_OK;
}

/* x (N, H, W, C) viewed as rows (N H W, C), or back to shape s. */
static int reshaped(lay *L, int32_t x, int nd, const int64_t *s, int32_t at, const char *loc,
                    int32_t *out) {
    musa_attrs_shape a;
    musa_attrs_init(MUSA_ATTRS_shape, &a);
    a.shape.n = nd;
    memcpy(a.shape.v, s, (size_t)nd * sizeof(int64_t));
    return add(L, MUSA_OP_view, 1, &x, &a, at, loc, out);
}

static int rows_of(lay *L, int32_t v, int32_t at, const char *loc, int32_t *out) {
    int32_t c;
    int rc = to_cl(L, v, at, &c);
    if (rc) return rc;
    const int64_t *s = val(L, c)->shape;
    return reshaped(L, c, 2, (const int64_t[]){s[0] * s[1] * s[2], s[3]}, at, loc, out);
}

/* Original output v of the node being replaced is now NHWC value c. */
static void became(lay *L, int32_t v, int32_t c) {
    L->cl[v] = c;
    L->gone[v] = true;
}

static bool is4(const lay *L, int32_t v) {
    return val(L, v)->ndim == 4;
}

static int64_t numel(const lay *L, int32_t v) {
    int64_t n = 1;
    for (int d = 0; d < val(L, v)->ndim; d++) n *= val(L, v)->shape[d];
    return n;
}

/* An activation the maps cover (values made by this pass are not). */
static bool act(const lay *L, int32_t v) {
    return v < L->nv0 && is4(L, v);
}

int musa_pass_conv_dims(const musa_graph *g, const musa_gnode *n, const int64_t **x,
                        const int64_t **w) {
    int kind = n->op == MUSA_OP_conv2d                   ? MUSA_CONV_FWD
               : n->op == MUSA_OP_conv2d_backward_input  ? MUSA_CONV_BWD_DATA
               : n->op == MUSA_OP_conv2d_backward_weight ? MUSA_CONV_BWD_WEIGHTS
                                                         : -1;
    if (kind < 0 || n->dead) return -1;
    const musa_attrs_conv *a = &n->attrs->conv;
    const musa_gvalue *in0 = &g->values.data[n->in[0]], *in1 = &g->values.data[n->in[1]];
    if (in0->ndim != 4 || in1->ndim != 4 || (kind != MUSA_CONV_FWD && a->shape.n != 4)) return -1;
    *x = kind == MUSA_CONV_BWD_DATA ? a->shape.v : in0->shape;
    *w = kind == MUSA_CONV_BWD_WEIGHTS ? a->shape.v : in1->shape;
    return kind;
}

/* A convolution that can go channels-last (false for other nodes). */
static bool conv_ok(const lay *L, const musa_gnode *n) {
    const int64_t *x, *w;
    int kind = musa_pass_conv_dims(L->g, n, &x, &w);
    if (kind < 0 || n->attrs->conv.channels_last || !act(L, n->in[0]) ||
        (kind == MUSA_CONV_BWD_WEIGHTS && !act(L, n->in[1])))
        return false;
    int64_t xs[4] = {x[0], x[2], x[3], x[1]};
    return musa_cpu_conv_channels_last_ok(kind, xs, w, n->attrs, val(L, n->in[0])->dtype,
                                          kind == MUSA_CONV_FWD && n->n_in == 3);
}

/* A convolution: its activations in and out NHWC. */
static int conv(lay *L, const musa_gnode *n, int32_t at) {
    int32_t in[3] = {n->in[0], n->in[1], n->n_in > 2 ? n->in[2] : -1}, out;
    musa_attrs_conv a = n->attrs->conv;
    a.channels_last = true;
    int rc = MUSA_OK;
    if (n->op == MUSA_OP_conv2d_backward_input) { /* gy, w -> gx */
        int64_t *s = a.shape.v, c = s[1];
        s[1] = s[2], s[2] = s[3], s[3] = c;
        rc = to_cl(L, in[0], at, &in[0]);
    } else if (n->op == MUSA_OP_conv2d_backward_weight) { /* x, gy -> gw */
        rc = to_cl(L, in[0], at, &in[0]);
        if (!rc) rc = to_cl(L, in[1], at, &in[1]);
    } else {
        rc = to_cl(L, in[0], at, &in[0]);
    }
    if (!rc) rc = add(L, (musa_op_id)n->op, n->n_in, in, &a, at, n->loc, &out);
    if (rc) return rc;
    if (n->op == MUSA_OP_conv2d_backward_weight)
        musa_graph_replace_uses(L->g, n->out[0], out);
    else
        became(L, n->out[0], out);
    return MUSA_OK;
}

/* batch_norm (x, w, b), batch_norm_apply (x, mean, invstd, w, b) and
 * batch_norm_backward (gy, x, w, mean, invstd) on rows views. */
static int norm(lay *L, const musa_gnode *n, int32_t at) {
    int32_t in[5], out[3];
    int rows = n->op == MUSA_OP_batch_norm_backward ? 2 : 1, rc = MUSA_OK;
    for (int k = 0; k < n->n_in; k++) in[k] = n->in[k];
    for (int k = 0; k < rows && !rc; k++) rc = rows_of(L, in[k], at, n->loc, &in[k]);
    if (!rc) rc = add(L, (musa_op_id)n->op, n->n_in, in, n->attrs, at, n->loc, out);
    int32_t y;
    if (rc || (rc = reshaped(L, out[0], 4, val(L, L->cl[n->in[rows - 1]])->shape, at, n->loc, &y)))
        return rc;
    became(L, n->out[0], y);
    for (int j = 1; j < n->n_out; j++) musa_graph_replace_uses(L->g, n->out[j], out[j]);
    return MUSA_OK;
}

/* An elementwise node that can run on NHWC values as they are: 4-d output,
 * every operand the output's shape or one element, one of them NHWC. */
static bool ew_ok(const lay *L, const musa_gnode *n) {
    const musa_op_info *info = &musa_ops[n->op];
    if (!(info->flags & MUSA_OPF_ELEMENTWISE) || (info->flags & MUSA_OPF_INPLACE) ||
        n->n_out != 1 || !is4(L, n->out[0]))
        return false;
    const musa_gvalue *o = val(L, n->out[0]);
    bool any = false;
    for (int k = 0; k < n->n_in; k++) {
        int32_t v = n->in[k];
        if (numel(L, v) == 1) continue;
        if (!act(L, v) || memcmp(val(L, v)->shape, o->shape, 4 * sizeof(int64_t))) return false;
        any = any || has_cl(L, v);
    }
    return any;
}

static int elementwise(lay *L, const musa_gnode *n, int32_t at) {
    int32_t stack[8], *in = n->n_in <= 8 ? stack : musa_malloc(sizeof(int32_t) * n->n_in, "jit");
    if (!in) return MUSA_ERR_NOMEM;
    int rc = MUSA_OK;
    for (int k = 0; k < n->n_in && !rc; k++) {
        in[k] = n->in[k];
        if (numel(L, in[k]) != 1) rc = to_cl(L, in[k], at, &in[k]);
    }
    int32_t out;
    if (!rc) rc = add(L, (musa_op_id)n->op, n->n_in, in, n->attrs, at, n->loc, &out);
    if (!rc) became(L, n->out[0], out);
    if (in != stack) free(in);
    return rc;
}

/* Node i stays: its inputs that became NHWC are read through NCHW copies. */
static int keep(lay *L, int32_t i) {
    bool touched = false;
    for (int k = 0; k < L->g->nodes.data[i].n_in; k++) {
        int32_t v = L->g->nodes.data[i].in[k], s;
        int rc = to_std(L, v, i, &s);
        if (rc) return rc;
        touched = touched || s != v;
        L->g->nodes.data[i].in[k] = s;
    }
    return touched ? musa_graph_refresh_view(L->g, i) : MUSA_OK;
}

static int rewrite(lay *L) {
    musa_graph *g = L->g;
    for (int32_t i = 0; i < L->nn0; i++) {
        musa_gnode n = g->nodes.data[i]; /* a copy: adding nodes moves the array */
        if (n.dead) continue;
        int rc;
        bool bn_bwd = n.op == MUSA_OP_batch_norm_backward;
        bool norm_op = (n.op == MUSA_OP_batch_norm || n.op == MUSA_OP_batch_norm_apply || bn_bwd) &&
                       act(L, n.in[0]) && (!bn_bwd || act(L, n.in[1])) &&
                       (has_cl(L, n.in[0]) || (bn_bwd && has_cl(L, n.in[1])));
        if (conv_ok(L, &n))
            rc = conv(L, &n, i);
        else if (norm_op)
            rc = norm(L, &n, i);
        else if (ew_ok(L, &n))
            rc = elementwise(L, &n, i);
        else {
            rc = keep(L, i);
            if (rc) return rc;
            continue;
        }
        if (rc) return rc;
        g->nodes.data[i].dead = true;
        L->changed++;
    }
    int rc = MUSA_OK;
    for (int64_t k = 0; k < g->outputs.len && !rc; k++)
        rc = to_std(L, g->outputs.data[k], (int32_t)L->nn0, &g->outputs.data[k]);
    for (int64_t k = 0; k < g->mutations.len && !rc; k++)
        rc = to_std(L, g->mutations.data[k].value, (int32_t)L->nn0, &g->mutations.data[k].value);
    return rc;
}

int musa_pass_channels_last(musa_graph *g, musa_pass_ctx *ctx) {
    if (!g) return musa_err(MUSA_ERR_VALUE, "[channels_last] graph is NULL");
    if (g->breaks.len) return MUSA_OK;
    bool any = false;
    for (int64_t i = 0; i < g->nodes.len && !any; i++)
        any = !g->nodes.data[i].dead && g->nodes.data[i].op == MUSA_OP_conv2d;
    if (!any) return MUSA_OK;
    lay L = {.g = g, .nn0 = g->nodes.len, .nv0 = (int32_t)g->values.len};
    size_t nv = (size_t)L.nv0 + 1;
    L.cl = musa_malloc(sizeof(int32_t) * nv, "channels_last");
    L.std = musa_malloc(sizeof(int32_t) * nv, "channels_last");
    L.gone = musa_calloc(nv, sizeof(bool), "channels_last");
    int rc = MUSA_ERR_NOMEM;
    /* pos is indexed by node: the original nodes' entries are unused */
    if (L.cl && L.std && L.gone && !musa_vec_reserve(&L.pos, L.nn0 + 64)) {
        for (int32_t v = 0; v < L.nv0; v++) L.cl[v] = L.std[v] = -1;
        L.pos.len = L.nn0;
        rc = rewrite(&L);
        if (!rc) rc = musa_graph_place(g, L.nn0, L.pos.data);
        if (!rc) {
            musa_graph_compact(g);
            musa_graph_analyse(g);
        }
    }
    if (ctx && !rc) ctx->changes += L.changed;
    free(L.cl), free(L.std), free(L.gone);
    musa_vec_free(&L.pos);
    return rc;
}
