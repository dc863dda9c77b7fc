/*
 * attention.c - written-out attention to the fused kernel (pass
 * "attention"; two modes, below).
 *
 * Models written before F.scaled_dot_product_attention existed compute
 * attention in four ops:
 *
 *     S = q @ k^T [* scale | / d] [masked_fill(mask, -inf)]; P = softmax(S, -1); O = P @ v
 *
 * and in training their backward saves P, (..., Tq, Tk) per head, for two
 * products and the softmax's backward. This pass replaces the forward by
 * one scaled_dot_product_attention node (attention.c: P is made a block
 * of query rows at a time and never stored; each row's log-sum-exp is kept)
 * and, where the graph holds the backward the eager formulas record for
 * those ops (a whole training step, or compiled training's joint graph),
 * that backward by one scaled_dot_product_attention_backward node, which
 * recomputes P from q, k and the log-sum-exp. dce then removes the old
 * nodes.
 *
 * A match needs, all in one dtype (float32 or float64):
 * - O = matmul(P, v) without transposes, and P = softmax over the last dim
 *   (two dims or more);
 * - optionally between them and the scores: where(mask, -inf, x) or
 *   where(mask, x, -inf) with a bool mask of the scores' shape or one that
 *   broadcasts to it, and mul(x, c), mul(c, x) or div(x, c) with c a
 *   one-element constant (scale c or 1 / c);
 * - S = matmul(q, kt) (kt = k^T, a view: the pass reads k as kt's
 *   transpose) or matmul(q, k, transpose_b) without transpose_a; q, k and v
 *   with the same batch dims;
 * - every value between q k^T and O read only by the next op of the
 *   chain, except P, which the backward may read, as a matmul with dO (dv)
 *   and as softmax_backward's input; then dP = matmul(dO, v^T), its masked
 *   and scaled gradient exactly the inverse chain, and that read only by
 *   the two products giving dq and dk (or dk^T). Anything else (another
 *   reader, a create_graph backward's composed softmax formula) leaves the
 *   graph as it is.
 * Two modes:
 * - By default, eager's bits: the node's attribute `exact` (1: no scale,
 *   2: `* c`, 3: `/ c`, with c in `scale`) makes the kernels compute the
 *   written-out ops' own arithmetic, a head at a time (backend attention.c,
 *   "eager's bits"): the probabilities stay in cache and are not saved for
 *   the backward, which recomputes them. Only where that is exact
 *   (musa_cpu_attention_exact_ok: float32; 16 to 128 queries, keys and
 *   dims, 2 to 128 value columns; the backward's masked gradient a +0): the
 *   written-out products run on dnnl_sgemm, which sums like our kernels
 *   only from 16 rows and 2 columns. Elsewhere the graph stays as it is.
 * - With musa_pass_ctx's fuse_attention (musa.Config(fuse_attention=True)):
 *   every match, in float32 and float64, on the fused formulas (exact 0):
 *   attention's results computed in another order (the kernel scales inside
 *   its product, skips what lies past a causal diagonal, and its backward
 *   uses rowsum(dO * O) where the softmax formula sums dP * P), within
 *   rounding of eager's.
 */
#include <math.h>

#include "../../backend/cpu/kernels.h"
#include "../graph.h"

enum { ATTN_NONE = 1, ATTN_MUL, ATTN_DIV }; /* musa_attrs_attention.exact */

typedef struct {
    /* forward */
    int32_t mm1, scale_node, mask_node, sm, mm2;
    int32_t q, k_in, v, mask; /* k_in: matmul's second operand (kt, or k with transpose_b) */
    bool k_transposed;        /* k_in is kt = k^T */
    bool mask_keeps;          /* where(mask, x, -inf): true attends (else true masks) */
    double scale;
    double c;  /* the scale's constant, as the graph applies it */
    int exact; /* eager's bits: ATTN_NONE, ATTN_MUL or ATTN_DIV (0: the fused formulas) */
    /* backward (-1: absent) */
    int32_t dp_mm, dv_mm, sm_bwd, dq_mm, dk_mm, dout;
} match;

static const musa_gvalue *val(const musa_graph *g, int32_t v) {
    return &g->values.data[v];
}

/* The value of a one-element scalar as the ops reading v see it: a CONST,
 * a 0-d full, or either cast to float32 or float64 (rounded as the cast
 * rounds). */
static bool const_scalar(const musa_graph *g, int32_t v, double *x) {
    int32_t c = musa_graph_producer(g, v, MUSA_OP_cast);
    int to = c >= 0 ? g->nodes.data[c].attrs->cast.dtype : -1;
    if (c >= 0 && to != MUSA_DTYPE_FLOAT32 && to != MUSA_DTYPE_FLOAT64) return false;
    if (c >= 0) v = g->nodes.data[c].in[0];
    int32_t f = musa_graph_producer(g, v, MUSA_OP_full);
    const musa_gvalue *s = val(g, v);
    if (f >= 0 && s->ndim == 0)
        *x = g->nodes.data[f].attrs->full.value;
    else if (s->kind == MUSA_V_CONST && s->tensor && s->tensor->storage && s->tensor->numel == 1) {
        if (musa_tensor_item(s->tensor, x)) {
            musa_clear_error();
            return false;
        }
    } else
        return false;
    if (s->dtype == MUSA_DTYPE_FLOAT32 || to == MUSA_DTYPE_FLOAT32) *x = (float)*x;
    return true;
}

static bool same_shape(const musa_gvalue *a, const musa_gvalue *b) {
    return musa_shape_equal(a->ndim, a->shape, b->ndim, b->shape);
}

/* The dim a softmax (or its backward) node n runs over, of nd. */
static int64_t last_dim(const musa_gnode *n, int nd) {
    return n->attrs->dim.dim < 0 ? n->attrs->dim.dim + nd : n->attrs->dim.dim;
}

/* Node i's matmul attributes are (ta, tb). */
static bool matmul_is(const musa_graph *g, int32_t i, bool ta, bool tb) {
    const musa_gnode *n = &g->nodes.data[i];
    return n->op == MUSA_OP_matmul && n->attrs->matmul.transpose_a == ta &&
           n->attrs->matmul.transpose_b == tb;
}

/* The other operand of a binary node n reading x, or -1. */
static int32_t other(const musa_gnode *n, int32_t x) {
    return n->in[0] == x ? n->in[1] : n->in[1] == x ? n->in[0] : -1;
}

/* Scores x of the chain ending at the softmax's input: peels an optional
 * where (the mask) and an optional scale, recording them in m. */
static int32_t peel_mask_and_scale(const musa_graph *g, int32_t x, match *m) {
    double c;
    int32_t w = musa_graph_producer(g, x, MUSA_OP_where);
    if (w >= 0) {
        const musa_gnode *n = &g->nodes.data[w];
        const musa_gvalue *cond = val(g, n->in[0]);
        bool masks = const_scalar(g, n->in[1], &c) && isinf(c) && c < 0;
        bool keeps = !masks && const_scalar(g, n->in[2], &c) && isinf(c) && c < 0;
        int32_t inner = masks ? n->in[2] : keeps ? n->in[1] : -1;
        if (inner < 0 || cond->dtype != MUSA_DTYPE_BOOL || !same_shape(val(g, inner), val(g, x)) ||
            musa_graph_uses_of(g, inner) != 1)
            return -1;
        m->mask_node = w, m->mask = n->in[0], m->mask_keeps = keeps;
        x = inner;
    }
    int32_t s = musa_graph_producer(g, x, MUSA_OP_mul);
    int32_t d = s < 0 ? musa_graph_producer(g, x, MUSA_OP_div) : -1;
    if (s >= 0 || d >= 0) {
        const musa_gnode *n = &g->nodes.data[s >= 0 ? s : d];
        int32_t inner = s >= 0 ? (const_scalar(g, n->in[1], &c)   ? n->in[0]
                                  : const_scalar(g, n->in[0], &c) ? n->in[1]
                                                                  : -1)
                               : (const_scalar(g, n->in[1], &c) ? n->in[0] : -1);
        if (inner < 0 || !isfinite(c) || (d >= 0 && c == 0) ||
            !same_shape(val(g, inner), val(g, x)) || val(g, inner)->dtype != val(g, x)->dtype ||
            musa_graph_uses_of(g, inner) != 1)
            return -1;
        m->scale_node = s >= 0 ? s : d, m->scale = s >= 0 ? c : 1.0 / c;
        m->c = c, m->exact = s >= 0 ? ATTN_MUL : ATTN_DIV;
        x = inner;
    }
    return x;
}

/* The forward chain ending at matmul node i (O = P v). */
static bool match_forward(const musa_graph *g, int32_t i, match *m) {
    const musa_gnode *mm2 = &g->nodes.data[i];
    if (!matmul_is(g, i, false, false)) return false;
    *m = (match){.mm1 = -1,
                 .scale_node = -1,
                 .mask_node = -1,
                 .sm = -1,
                 .mm2 = i,
                 .mask = -1,
                 .scale = 1.0,
                 .c = 1.0,
                 .exact = ATTN_NONE,
                 .dp_mm = -1,
                 .dv_mm = -1,
                 .sm_bwd = -1,
                 .dq_mm = -1,
                 .dk_mm = -1,
                 .dout = -1};
    int32_t p = mm2->in[0];
    m->v = mm2->in[1];
    m->sm = musa_graph_producer(g, p, MUSA_OP_softmax);
    if (m->sm < 0) return false;
    const musa_gnode *sm = &g->nodes.data[m->sm];
    int nd = val(g, p)->ndim;
    if (nd < 2 || last_dim(sm, nd) != nd - 1) return false;
    int32_t x = sm->in[0];
    if (musa_graph_uses_of(g, x) != 1) return false;
    int32_t s = peel_mask_and_scale(g, x, m);
    if (s < 0) return false;
    m->mm1 = musa_graph_producer(g, s, MUSA_OP_matmul);
    if (m->mm1 < 0 || g->nodes.data[m->mm1].attrs->matmul.transpose_a) return false;
    const musa_gnode *mm1 = &g->nodes.data[m->mm1];
    m->q = mm1->in[0], m->k_in = mm1->in[1];
    m->k_transposed = !mm1->attrs->matmul.transpose_b;
    /* q (..., Tq, E), k (..., Tk, E), v (..., Tk, Ev): equal batch dims, one float dtype */
    const musa_gvalue *q = val(g, m->q), *k = val(g, m->k_in), *v = val(g, m->v);
    int dt = q->dtype;
    if (q->ndim != nd || k->ndim != nd || v->ndim != nd || k->dtype != dt || v->dtype != dt ||
        val(g, p)->dtype != dt || val(g, s)->dtype != dt ||
        (dt != MUSA_DTYPE_FLOAT32 && dt != MUSA_DTYPE_FLOAT64))
        return false;
    for (int d = 0; d < nd - 2; d++)
        if (k->shape[d] != q->shape[d] || v->shape[d] != q->shape[d]) return false;
    int64_t tk = k->shape[nd - (m->k_transposed ? 1 : 2)];
    return v->shape[nd - 2] == tk && val(g, s)->shape[nd - 1] == tk;
}

/* Eager's bits mode: whether the kernel can give them for this match. */
static bool exact_fits(const musa_graph *g, const match *m) {
    const musa_gvalue *q = val(g, m->q), *v = val(g, m->v);
    int nd = q->ndim;
    return musa_cpu_attention_exact_ok(q->dtype, q->shape[nd - 2], v->shape[nd - 2],
                                       q->shape[nd - 1], v->shape[nd - 1]);
}

/* The one live node reading v, or -1 (none, several, or v escapes). */
static int32_t only_reader(const musa_graph *g, int32_t v) {
    if (musa_graph_escapes(g, v)) return -1;
    int32_t found = -1;
    for (int32_t k = 0; k < (int32_t)g->nodes.len; k++) {
        const musa_gnode *n = &g->nodes.data[k];
        for (int q = 0; !n->dead && q < n->n_in; q++)
            if (n->in[q] == v) {
                if (found >= 0 && found != k) return -1;
                found = k;
            }
    }
    return found;
}

/* The gradient chain from softmax_backward's output back through the mask
 * and the scale, as the eager formulas record it; the value that reaches
 * the q k^T product's backward, or -1. */
static int32_t match_grad_chain(const musa_graph *g, const match *m, int32_t d) {
    double c;
    if (m->mask_node >= 0) {
        int32_t w = only_reader(g, d);
        if (w < 0 || g->nodes.data[w].op != MUSA_OP_where) return -1;
        const musa_gnode *n = &g->nodes.data[w];
        int32_t zero = m->mask_keeps ? n->in[2] : n->in[1],
                grad = m->mask_keeps ? n->in[1] : n->in[2];
        if (n->in[0] != m->mask || grad != d || !const_scalar(g, zero, &c) || c != 0 ||
            (m->exact && signbit(c))) /* the kernel writes +0 there */
            return -1;
        d = n->out[0];
    }
    if (m->scale_node >= 0) { /* the same scalar, applied the same way */
        int32_t s = only_reader(g, d);
        if (s < 0) return -1;
        const musa_gnode *n = &g->nodes.data[s], *f = &g->nodes.data[m->scale_node];
        double want;
        int32_t fc = const_scalar(g, f->in[1], &want) ? f->in[1] : f->in[0];
        int32_t nc = n->op == MUSA_OP_div ? (n->in[0] == d ? n->in[1] : -1) : other(n, d);
        if (n->op != f->op || !const_scalar(g, fc, &want) || nc < 0 || !const_scalar(g, nc, &c) ||
            c != want)
            return -1;
        d = n->out[0];
    }
    return d;
}

/* The backward the eager formulas record for the chain, if the graph has
 * it: fills m's backward fields. False when P or the chain's gradients
 * have a reader the pass does not know (the graph is then left alone). */
static bool match_backward(const musa_graph *g, match *m) {
    int32_t p = g->nodes.data[m->sm].out[0];
    for (int32_t k = 0; k < (int32_t)g->nodes.len; k++) {
        const musa_gnode *n = &g->nodes.data[k];
        for (int q = 0; !n->dead && k != m->mm2 && q < n->n_in; q++) {
            if (n->in[q] != p) continue;
            if (q == 0 && m->dv_mm < 0 && matmul_is(g, k, true, false) && n->in[1] != p)
                m->dv_mm = k; /* dv = P^T dO */
            else if (q == 1 && m->sm_bwd < 0 && n->op == MUSA_OP_softmax_backward &&
                     n->in[0] != p && last_dim(n, val(g, p)->ndim) == val(g, p)->ndim - 1)
                m->sm_bwd = k;
            else
                return false;
        }
    }
    if (musa_graph_escapes(g, p)) return false;
    if (m->dv_mm >= 0) m->dout = g->nodes.data[m->dv_mm].in[1];
    if (m->sm_bwd < 0) return true;
    /* dP = dO v^T, read only by the softmax's backward */
    int32_t dp = g->nodes.data[m->sm_bwd].in[0];
    m->dp_mm = musa_graph_producer(g, dp, MUSA_OP_matmul);
    if (m->dp_mm < 0 || !matmul_is(g, m->dp_mm, false, true) ||
        g->nodes.data[m->dp_mm].in[1] != m->v || only_reader(g, dp) != m->sm_bwd)
        return false;
    int32_t dout = g->nodes.data[m->dp_mm].in[0];
    if (m->dout >= 0 && m->dout != dout) return false;
    m->dout = dout;
    int32_t ds = match_grad_chain(g, m, g->nodes.data[m->sm_bwd].out[0]);
    if (ds < 0 || musa_graph_escapes(g, ds)) return false;
    /* dS read by the products giving dq and dk (or dk^T), nothing else */
    for (int32_t k = 0; k < (int32_t)g->nodes.len; k++) {
        const musa_gnode *n = &g->nodes.data[k];
        for (int q = 0; !n->dead && q < n->n_in; q++) {
            if (n->in[q] != ds) continue;
            bool dq = q == 0 && m->dq_mm < 0 && n->in[1] == m->k_in &&
                      matmul_is(g, k, false, m->k_transposed);
            bool dk =
                m->dk_mm < 0 &&
                (m->k_transposed ? q == 1 && n->in[0] == m->q && matmul_is(g, k, true, false)
                                 : q == 0 && n->in[1] == m->q && matmul_is(g, k, true, false));
            if (dq)
                m->dq_mm = k;
            else if (dk)
                m->dk_mm = k;
            else
                return false;
        }
    }
    return true;
}

typedef struct {
    musa_graph *g;
    int64_t nn0;
    MUSA_VEC(int32_t) pos; /* each new node's place (musa_graph_place) */
    int changed;
} rw;

/* Append op(in) to go before original node `at`; its outputs to out. */
static int add(rw *R, musa_op_id op, int n_in, const int32_t *in, const void *attrs, int32_t at,
               const char *loc, int32_t *out) {
    int32_t id = musa_graph_add_node(R->g, op, n_in, in, attrs, out);
    if (id < 0) return id;
    R->g->nodes.data[id].loc = loc;
    return musa_vec_push(&R->pos, at) ? MUSA_ERR_NOMEM : MUSA_OK;
}

/* x with its last two dims swapped (a view), made before node `at`. */
static int swapped(rw *R, int32_t x, int32_t at, const char *loc, int32_t *out) {
    musa_attrs_dims d;
    musa_attrs_init(MUSA_ATTRS_dims, &d);
    int nd = val(R->g, x)->ndim;
    d.dims.n = nd;
    for (int i = 0; i < nd; i++) d.dims.v[i] = i;
    d.dims.v[nd - 2] = nd - 1, d.dims.v[nd - 1] = nd - 2;
    return add(R, MUSA_OP_permute, 1, &x, &d, at, loc, out);
}

static int rewrite(rw *R, const match *m) {
    musa_graph *g = R->g;
    const musa_gnode *mm2 = &g->nodes.data[m->mm2];
    const char *loc = mm2->loc;
    int32_t at = m->mm2, k = m->k_in, mask = m->mask, fw[2], o = mm2->out[0];
    int rc = m->k_transposed ? swapped(R, m->k_in, at, loc, &k) : MUSA_OK;
    if (!rc && mask >= 0 && !m->mask_keeps)
        rc = add(R, MUSA_OP_logical_not, 1, &mask, NULL, at, loc, &mask);
    musa_attrs_attention a = {
        .scale = m->exact ? m->c : m->scale, .causal = false, .exact = m->exact};
    int32_t in[7] = {m->q, k, m->v, mask};
    if (!rc)
        rc = add(R, MUSA_OP_scaled_dot_product_attention, mask >= 0 ? 4 : 3, in, &a, at, loc, fw);
    if (rc) return rc;
    musa_graph_replace_uses(g, o, fw[0]);
    if (m->dout >= 0) {
        int32_t first = m->dv_mm >= 0 ? m->dv_mm : m->dp_mm;
        if (m->dp_mm >= 0 && m->dp_mm < first) first = m->dp_mm;
        const char *bloc = g->nodes.data[first].loc;
        int32_t bw[3], bin[7] = {m->dout, m->q, k, m->v, fw[0], fw[1], mask};
        rc = add(R, MUSA_OP_scaled_dot_product_attention_backward, mask >= 0 ? 7 : 6, bin, &a,
                 first, bloc, bw);
        if (rc) return rc;
        if (m->dv_mm >= 0) musa_graph_replace_uses(g, g->nodes.data[m->dv_mm].out[0], bw[2]);
        if (m->dq_mm >= 0) musa_graph_replace_uses(g, g->nodes.data[m->dq_mm].out[0], bw[0]);
        if (m->dk_mm >= 0) {
            int32_t dk = bw[1];
            if (m->k_transposed) { /* dk^T, as a buffer of its own: its readers may view it */
                int32_t t;
                rc = swapped(R, dk, first, bloc, &t);
                if (!rc) rc = add(R, MUSA_OP_clone, 1, &t, NULL, first, bloc, &dk);
                if (rc) return rc;
            }
            musa_graph_replace_uses(g, g->nodes.data[m->dk_mm].out[0], dk);
        }
    }
    R->changed++;
    return MUSA_OK;
}

int musa_pass_attention(musa_graph *g, musa_pass_ctx *ctx) {
    if (!g) return musa_err(MUSA_ERR_VALUE, "[attention] graph is NULL");
    rw R = {.g = g, .nn0 = g->nodes.len};
    if (musa_vec_reserve(&R.pos, R.nn0 + 16)) return MUSA_ERR_NOMEM;
    R.pos.len = R.nn0; /* indexed by node: the original nodes' entries are unused */
    int rc = MUSA_OK;
    bool fast = ctx && ctx->fuse_attention;
    for (int32_t i = 0; i < (int32_t)R.nn0 && !rc; i++) {
        match m;
        if (g->nodes.data[i].dead || !match_forward(g, i, &m)) continue;
        if (fast)
            m.exact = 0;
        else if (!exact_fits(g, &m))
            continue;
        if (match_backward(g, &m)) rc = rewrite(&R, &m);
    }
    if (!rc && R.changed) rc = musa_graph_place(g, R.nn0, R.pos.data);
    if (!rc && R.changed) musa_graph_analyse(g);
    if (ctx && !rc) ctx->changes += R.changed;
    musa_vec_free(&R.pos);
    return rc;
}
