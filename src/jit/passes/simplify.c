/*
 * simplify.c - algebraic simplification (pass "simplify").
 *
 * Rules, one small function each, tried in the order of the rule table:
 * - unit operands: x*1, 1*x, x+(-0), (-0)+x, x-(+0), x/1, x**1 -> x (signed zeros:
 *   x + +0 turns -0 into +0, so it stays), where the unit is
 *   a one-element CONST, possibly behind one cast node (a Python number cast
 *   to the op's dtype; casts keep 0 and 1 exact);
 * - x@I, I@x -> x for a CONST square identity matrix, without transposes;
 * - neg(neg(x)) -> x; cast(x) -> x when x has that dtype already;
 * - chains: permute(permute(x, p1), p2) -> permute(x, p1[p2]) and
 *   view(view(x, s1), s2) -> view(x, s2), by rewiring the outer node;
 * - a view whose output has its input's layout -> its input (identity
 *   permutes, whole slices, same-shape view/expand/squeeze); detach stays;
 * - cat(cat(a, b), c) -> cat(a, b, c), and a pad of nothing -> its input
 *   (sums of zero pads, a split's gradient, become cats in pass "padsum");
 * - clone(permute(matmul(a, b))) -> the matmul writing the permuted layout
 *   (its output's strides change; the one exception to the layout
 *   invariant below, safe because only the permute reads that output).
 *
 * Invariants:
 * - a node output is replaced by a value x only when x has the same dtype,
 *   shape, strides and offset, so promotion, broadcasting and layout never
 *   change, and x is not a wrapped number (it would promote differently);
 * - a value that leaves the graph (output, mutation, break) never becomes
 *   an alias of a buffer a mutation writes back (the caller would see the
 *   new contents), of a constant's storage (through a view), of an
 *   argument's or captured tensor's memory it did not view already, or of
 *   another graph output's buffer (eager returns separate tensors);
 * - a rewired node keeps its output value and that value's layout (else the
 *   rewrite is undone), so later nodes and views stay valid;
 * - a view whose input was replaced by a value in another buffer re-derives
 *   its root and offset before it is visited;
 * - replaced nodes are marked dead, never removed (dce compacts).
 * Sweeps run to a fixed point; ctx->changes counts rewrites.
 */
#include "../graph.h"

#define MAX_SWEEPS         32
#define MAX_IDENTITY_ELEMS 4096

/* 1: the node was rewritten, 0: no match, < 0: an error status. */
typedef int (*rule_fn)(musa_graph *g, int32_t node);

/* ---- helpers ---- */

static bool written_back(const musa_graph *g, int32_t root) {
    for (int64_t i = 0; i < g->mutations.len; i++)
        if (g->mutations.data[i].target == root) return true;
    return false;
}

/* Whether a graph output other than v lives in buffer `root`. */
static bool other_output_in(const musa_graph *g, int32_t v, int32_t root) {
    for (int64_t i = 0; i < g->outputs.len; i++) {
        int32_t o = g->outputs.data[i];
        if (o != v && g->values.data[o].root == root) return true;
    }
    return false;
}

static bool can_replace(const musa_graph *g, int32_t from, int32_t to) {
    const musa_gvalue *a = &g->values.data[from], *b = &g->values.data[to];
    if (from == to || a->kind != MUSA_V_NODE || !musa_gvalue_same_layout(a, b)) return false;
    if (b->kind == MUSA_V_CONST && b->tensor && (b->tensor->flags & MUSA_TF_NUMBER)) return false;
    if (!musa_graph_escapes(g, from)) return true;
    const musa_gvalue *root = &g->values.data[b->root];
    if (written_back(g, b->root) || (root->kind == MUSA_V_CONST && b->root != to)) return false;
    /* x * 1 is a new tensor in eager, not x: an output computed from an
     * argument or a captured tensor stays out of its memory (a write into
     * it would reach the argument; test_jit_fuzz seed 21868 returned x1 as
     * x0's gradient) unless it was a view of it already. */
    if ((root->kind == MUSA_V_INPUT || root->kind == MUSA_V_PARAM) && a->root != b->root)
        return false;
    /* Two outputs that eager returns as separate tensors stay separate. */
    return a->root == b->root || !other_output_in(g, from, b->root);
}

/* Uses of node i's single output read `to` instead, and the node dies.
 * Returns 1, or 0 when the guards above refuse. */
static int replace_by(musa_graph *g, int32_t i, int32_t to) {
    musa_gnode *n = &g->nodes.data[i];
    if (n->n_out != 1 || !can_replace(g, n->out[0], to)) return 0;
    musa_graph_replace_uses(g, n->out[0], to);
    n->dead = true;
    return 1;
}

/* The element of a one-element CONST, looking through one cast node. The
 * value returned is the constant's own, so callers may only compare it with
 * values every cast keeps exactly (0 and 1). */
static bool scalar_of(const musa_graph *g, int32_t v, double *x) {
    int32_t p = musa_graph_producer(g, v, MUSA_OP_cast);
    const musa_gvalue *c = &g->values.data[p >= 0 ? g->nodes.data[p].in[0] : v];
    const musa_tensor *t = c->tensor;
    if (c->kind != MUSA_V_CONST || !t || !t->storage || t->numel != 1) return false;
    if (musa_tensor_item(t, x)) {
        musa_clear_error();
        return false;
    }
    return true;
}

/* Whether v is a CONST n x n identity matrix (small enough to check). */
static bool is_identity(const musa_graph *g, int32_t v) {
    const musa_gvalue *c = &g->values.data[v];
    const musa_tensor *t = c->tensor;
    if (c->kind != MUSA_V_CONST || !t || !t->storage || t->ndim != 2 ||
        t->shape[0] != t->shape[1] || t->numel > MAX_IDENTITY_ELEMS)
        return false;
    for (int64_t r = 0; r < t->shape[0]; r++)
        for (int64_t k = 0; k < t->shape[1]; k++) {
            int64_t ix[2] = {r, k};
            double x;
            if (musa_tensor_get(t, ix, &x)) {
                musa_clear_error();
                return false;
            }
            if (x != (r == k ? 1.0 : 0.0)) return false;
        }
    return true;
}

/* Point node i's input 0 at src, with attrs (NULL: keep), and re-infer.
 * Kept (1) only when the output's root and layout come out unchanged;
 * otherwise the node and its output are restored (0). */
static int rewire(musa_graph *g, int32_t i, int32_t src, const musa_attrs_any *attrs) {
    musa_gnode *n = &g->nodes.data[i];
    int32_t out = n->out[0], old_in = n->in[0];
    size_t size = musa_gnode_attrs_size(n);
    musa_attrs_any old_attrs;
    if (size) memcpy(&old_attrs, n->attrs, size);
    musa_gvalue saved = g->values.data[out];
    n->in[0] = src;
    if (attrs && size) memcpy(n->attrs, attrs, size);
    int rc = musa_graph_infer_node(g, i);
    const musa_gvalue *v = &g->values.data[out];
    if (rc == MUSA_OK && v->root == saved.root && musa_gvalue_same_layout(v, &saved)) return 1;
    if (rc) musa_clear_error();
    n->in[0] = old_in;
    if (size) memcpy(n->attrs, &old_attrs, size);
    g->values.data[out] = saved;
    return 0;
}

/* ---- rules ---- */

/* The op's unit u: x op u == x, bit for bit (and u op x when the op
 * commutes). The zeros are signed: -0.0 + +0.0 is +0.0, so x + 0 is x
 * only for the unit -0.0, and x - 0 only for +0.0 (x - -0.0 is x + 0). */
static const struct {
    int op;
    double unit;
} units[] = {
    {MUSA_OP_mul, 1.0}, {MUSA_OP_add, -0.0}, {MUSA_OP_sub, 0.0},
    {MUSA_OP_div, 1.0}, {MUSA_OP_pow, 1.0},
};

static bool is_unit(double c, double unit) {
    return c == unit && signbit(c) == signbit(unit);
}

static int rule_unit(musa_graph *g, int32_t i) {
    const musa_gnode *n = &g->nodes.data[i];
    for (int r = 0; r < MUSA_ARRAY_LEN(units); r++) {
        if (n->op != units[r].op) continue;
        double c;
        if (scalar_of(g, n->in[1], &c) && is_unit(c, units[r].unit) && replace_by(g, i, n->in[0]))
            return 1;
        if ((musa_ops[n->op].flags & MUSA_OPF_COMMUTATIVE) && scalar_of(g, n->in[0], &c) &&
            is_unit(c, units[r].unit))
            return replace_by(g, i, n->in[1]);
        return 0;
    }
    return 0;
}

static int rule_matmul_identity(musa_graph *g, int32_t i) {
    const musa_gnode *n = &g->nodes.data[i];
    if (n->op != MUSA_OP_matmul || n->attrs->matmul.transpose_a || n->attrs->matmul.transpose_b)
        return 0;
    if (is_identity(g, n->in[1]) && replace_by(g, i, n->in[0])) return 1;
    return is_identity(g, n->in[0]) ? replace_by(g, i, n->in[1]) : 0;
}

static int rule_double_neg(musa_graph *g, int32_t i) {
    const musa_gnode *n = &g->nodes.data[i];
    if (n->op != MUSA_OP_neg) return 0;
    int32_t p = musa_graph_producer(g, n->in[0], MUSA_OP_neg);
    return p >= 0 ? replace_by(g, i, g->nodes.data[p].in[0]) : 0;
}

/* The dtype test is can_replace's: a cast to another dtype never matches. */
static int rule_noop_cast(musa_graph *g, int32_t i) {
    const musa_gnode *n = &g->nodes.data[i];
    return n->op == MUSA_OP_cast ? replace_by(g, i, n->in[0]) : 0;
}

/* permute(permute(x, p1), p2) == permute(x, c) with c[d] = p1[p2[d]]. */
static int rule_permute_chain(musa_graph *g, int32_t i) {
    const musa_gnode *n = &g->nodes.data[i];
    if (n->op != MUSA_OP_permute) return 0;
    int32_t p = musa_graph_producer(g, n->in[0], MUSA_OP_permute);
    if (p < 0) return 0;
    const musa_ints *inner = &g->nodes.data[p].attrs->dims.dims, *outer = &n->attrs->dims.dims;
    if (inner->n != outer->n) return 0;
    musa_attrs_any a;
    memcpy(&a, n->attrs, musa_gnode_attrs_size(n));
    for (int d = 0; d < outer->n; d++) {
        int64_t k = outer->v[d];
        if (k < 0 || k >= inner->n) return 0;
        a.dims.dims.v[d] = inner->v[k];
    }
    return rewire(g, i, g->nodes.data[p].in[0], &a);
}

static int rule_view_chain(musa_graph *g, int32_t i) {
    const musa_gnode *n = &g->nodes.data[i];
    if (n->op != MUSA_OP_view) return 0;
    int32_t p = musa_graph_producer(g, n->in[0], MUSA_OP_view);
    return p >= 0 ? rewire(g, i, g->nodes.data[p].in[0], NULL) : 0;
}

/* Any view op (detach aside: it marks where gradients stop) whose output
 * addresses exactly the elements of its input. */
static int rule_noop_view(musa_graph *g, int32_t i) {
    const musa_gnode *n = &g->nodes.data[i];
    uint32_t f = musa_ops[n->op].flags;
    if (!(f & MUSA_OPF_VIEW) || (f & MUSA_OPF_NONDIFF)) return 0;
    if (g->values.data[n->out[0]].root != g->values.data[n->in[0]].root) return 0;
    return replace_by(g, i, n->in[0]);
}

/* cat(cat(a, b), c) along one dim -> cat(a, b, c) when the inner cat has no
 * other use: one copy of each part instead of two. */
static int rule_cat_chain(musa_graph *g, int32_t i) {
    musa_gnode *n = &g->nodes.data[i];
    if (n->op != MUSA_OP_cat) return 0;
    for (int q = 0; q < n->n_in; q++) {
        int32_t p = musa_graph_producer(g, n->in[q], MUSA_OP_cat);
        if (p < 0 || g->nodes.data[p].attrs->dim.dim != n->attrs->dim.dim ||
            musa_graph_uses_of(g, n->in[q]) != 1)
            continue;
        const musa_gnode *in = &g->nodes.data[p];
        int nn = n->n_in - 1 + in->n_in;
        int32_t *v = MUSA_ARENA_NEW(&g->arena, int32_t, nn);
        if (!v) return MUSA_ERR_NOMEM;
        int w = 0;
        for (int k = 0; k < n->n_in; k++)
            if (k == q)
                for (int m = 0; m < in->n_in; m++) v[w++] = in->in[m];
            else
                v[w++] = n->in[k];
        int32_t *old_in = n->in, old_n = n->n_in;
        musa_gvalue saved = g->values.data[n->out[0]];
        n->in = v, n->n_in = nn;
        int rc = musa_graph_infer_node(g, i);
        n = &g->nodes.data[i];
        if (rc || !musa_gvalue_same_layout(&g->values.data[n->out[0]], &saved)) {
            if (rc) musa_clear_error();
            n->in = old_in, n->n_in = old_n, g->values.data[n->out[0]] = saved;
            return 0;
        }
        g->nodes.data[p].dead = true;
        return 1;
    }
    return 0;
}

/* pad with no padding -> its input (same layout only: a pad's output is a
 * fresh contiguous buffer). */
static int rule_noop_pad(musa_graph *g, int32_t i) {
    const musa_gnode *n = &g->nodes.data[i];
    if (n->op != MUSA_OP_pad) return 0;
    for (int k = 0; k < n->attrs->pad.pads.n; k++)
        if (n->attrs->pad.pads.v[k]) return 0;
    return replace_by(g, i, n->in[0]);
}

/* clone(permute(matmul(a, b))) where nothing else reads the product or the
 * permute (attention's y.transpose(1, 2).reshape(B, T, C), forward and
 * backward): the matmul writes its product in the permuted order, which
 * makes the permute contiguous, and the clone goes. The GEMMs take the new
 * row stride as their ldc, so every element keeps its value; what goes is
 * a copy and its buffer. Only for a product that is its own contiguous
 * buffer; the permute is re-inferred from the new strides. The fused
 * attention kernels write any output with unit-stride rows the same way
 * (its result, and the backward's dq, dk and dv: the heads' gradients
 * then arrive in the projection's (B, T, H, E) order); the attention's
 * backward, which reads the result again, reads any layout too. */
static bool writes_strided(const musa_graph *g, int32_t v) {
    return musa_graph_producer(g, v, MUSA_OP_matmul) >= 0 ||
           (musa_graph_producer(g, v, MUSA_OP_scaled_dot_product_attention) >= 0 &&
            g->values.data[v].out_index == 0) ||
           musa_graph_producer(g, v, MUSA_OP_scaled_dot_product_attention_backward) >= 0;
}

static int rule_matmul_writes_permuted(musa_graph *g, int32_t i) {
    const musa_gnode *n = &g->nodes.data[i];
    if (n->op != MUSA_OP_clone) return 0;
    int32_t pp = musa_graph_producer(g, n->in[0], MUSA_OP_permute);
    if (pp < 0) return 0;
    const musa_gnode *perm = &g->nodes.data[pp];
    int32_t v = perm->in[0], pv = perm->out[0], cv = n->out[0];
    if (!writes_strided(g, v) || musa_graph_escapes(g, cv) ||
        musa_graph_uses(g, v, MUSA_OP_scaled_dot_product_attention_backward) != 1 ||
        musa_graph_uses_of(g, pv) != 1)
        return 0;
    musa_gvalue *x = &g->values.data[v], *y = &g->values.data[pv];
    const musa_gvalue *c = &g->values.data[cv];
    int64_t want[MUSA_MAX_DIMS];
    musa_contiguous_strides(c->ndim, c->shape, want);
    const musa_ints *dims = &perm->attrs->dims.dims;
    if (x->root != v || x->offset != 0 || dims->n != x->ndim || y->ndim != x->ndim ||
        c->dtype != x->dtype)
        return 0;
    int64_t own[MUSA_MAX_DIMS], perm_of[MUSA_MAX_DIMS];
    musa_contiguous_strides(x->ndim, x->shape, own);
    for (int d = 0; d < x->ndim; d++) {
        if (x->shape[d] != 1 && x->strides[d] != own[d]) return 0;
        perm_of[d] = dims->v[d] < 0 ? dims->v[d] + x->ndim : dims->v[d];
        if (perm_of[d] < 0 || perm_of[d] >= x->ndim) return 0;
    }
    musa_gvalue saved_x = *x, saved_y = *y;
    for (int d = 0; d < x->ndim; d++) x->strides[perm_of[d]] = want[d];
    int rc = musa_graph_infer_node(g, pp);
    if (rc == MUSA_OK && replace_by(g, i, pv)) return 1;
    if (rc) musa_clear_error();
    g->values.data[v] = saved_x, g->values.data[pv] = saved_y;
    return 0;
}

/* Chain rules come before rule_noop_view, which then removes a chain that
 * composed to the identity. */
static const rule_fn rules[] = {
    rule_unit,          rule_matmul_identity,
    rule_double_neg,    rule_noop_cast,
    rule_permute_chain, rule_view_chain,
    rule_noop_view,     rule_cat_chain,
    rule_noop_pad,      rule_matmul_writes_permuted,
};

/* One pass over the nodes in order; adds the rewrites to *changes. */
static int sweep(musa_graph *g, int *changes) {
    for (int64_t i = 0; i < g->nodes.len; i++) {
        if (g->nodes.data[i].dead) continue;
        int rc = musa_graph_refresh_view(g, (int32_t)i);
        if (rc) return rc;
        for (int r = 0; r < MUSA_ARRAY_LEN(rules) && !g->nodes.data[i].dead; r++) {
            if ((rc = rules[r](g, (int32_t)i)) < 0) return rc;
            *changes += rc;
        }
    }
    return MUSA_OK;
}

int musa_pass_simplify(musa_graph *g, musa_pass_ctx *ctx) {
    if (!g) return musa_err(MUSA_ERR_VALUE, "[simplify] graph is NULL");
    int total = 0;
    for (int s = 0; s < MAX_SWEEPS; s++) {
        int changes = 0;
        int rc = sweep(g, &changes);
        total += changes;
        if (rc) return rc;
        if (!changes) break;
    }
    musa_graph_analyse(g);
    if (ctx) ctx->changes += total;
    return MUSA_OK;
}
