/*
 * padsum.c - sums of zero pads become one cat (pass "padsum").
 *
 * The gradient of a tensor cut into pieces along one dim (q, k and v from
 * one matmul; an LSTM's or GRU's gates from one product) is, eager, a sum
 * of zero pads: each piece's gradient padded to the whole and added up.
 * Where the pads' windows lie side by side, the sum is a cat of the pieces
 * (and a pad where they leave an edge): one copy instead of a zero-filled
 * buffer per piece and an add per piece. A GRU layer's step made 4 pads and
 * 4 adds of its (batch, 3 hidden) gate gradients this way; a sum whose
 * pieces are read by other sums too (the GRU's update gate feeds the input
 * and the hidden projection) keeps them, and each sum takes its own cat.
 *
 * Same bits as the adds: an element of a piece is added to zeros, which
 * turns a -0.0 into +0.0 and changes nothing else (NaN payloads stay), so
 * each piece gets an add of +0.0, placed right after the piece is made so
 * that fusion takes it into its producer's group; without it a piece's
 * -0.0 came out as -0.0. A piece already free of -0.0 (a view of a cat of
 * such pieces: an RNN's step gradient inside the whole sequence's) keeps
 * no add (drop_needless_adds), nor do an attention backward's outputs when
 * all of them are pieces of the sum: the kernel adds the +0.0 as it
 * stores them (absorb_into_attention).
 *
 * The tree: the root add and the adds below it whose only use is their
 * parent (they die), down to pads of one dim with value 0, of the root's
 * shape and dtype. Windows must not overlap and must tile a range of the
 * dim; roots are taken last to first, so a tree is taken whole. The root
 * becomes the cat (or the pad of a new cat); new nodes go in place with
 * musa_graph_place.
 */
#include <string.h>

#include "../graph.h"

/* Pieces of one sum at most: an RNN's input projection, made for every
 * time step at once, takes a piece per step. */
#define MAX_LEAVES 4096

typedef struct leaf {
    int32_t in;    /* the piece: the pad's input */
    int64_t left;  /* its window's start along the dim */
    int64_t width; /* its size along the dim */
} leaf;

typedef struct tree {
    int d; /* the dim */
    int n;
    leaf leaves[MAX_LEAVES];
    int n_adds;
    int32_t adds[MAX_LEAVES]; /* inner adds: they die */
} tree;

/* The dim a zero pad pads (its width before in *left), or -1 when it pads
 * none, several, or with another value. */
static int pad_dim(const musa_gnode *p, int ndim, int64_t *left) {
    const musa_attrs_pad *a = &p->attrs->pad;
    int d = -1;
    if (a->value != 0) return -1;
    for (int k = 0; k < a->pads.n / 2; k++) {
        if (a->pads.v[2 * k] < 0 || a->pads.v[2 * k + 1] < 0) return -1;
        if (!a->pads.v[2 * k] && !a->pads.v[2 * k + 1]) continue;
        if (d >= 0) return -1;
        d = ndim - 1 - k, *left = a->pads.v[2 * k];
    }
    return d;
}

/* Adds value v of the sum (shape and dtype of o) to t: a pad leaf, or an
 * add whose only use is its parent. False when v is neither. */
static bool collect(const musa_graph *g, int32_t v, const musa_gvalue *o, tree *t) {
    const musa_gvalue *x = &g->values.data[v];
    if (x->dtype != o->dtype || !musa_gvalue_same_layout(x, o) ||
        !musa_shape_equal(x->ndim, x->shape, o->ndim, o->shape) || x->root != v)
        return false;
    int32_t p = musa_graph_producer(g, v, MUSA_OP_pad);
    if (p >= 0) {
        const musa_gnode *pn = &g->nodes.data[p];
        int64_t left = 0;
        int d = pad_dim(pn, o->ndim, &left);
        const musa_gvalue *src = &g->values.data[pn->in[0]];
        if (d < 0 || (t->n && d != t->d) || t->n == MAX_LEAVES || src->dtype != o->dtype)
            return false;
        t->d = d;
        t->leaves[t->n++] = (leaf){pn->in[0], left, src->shape[d]};
        return true;
    }
    int32_t a = musa_graph_producer(g, v, MUSA_OP_add);
    if (a < 0 || x->uses != 1 || t->n_adds == MAX_LEAVES || g->nodes.data[a].n_in != 2)
        return false;
    t->adds[t->n_adds++] = a;
    const musa_gnode *an = &g->nodes.data[a];
    return collect(g, an->in[0], o, t) && collect(g, an->in[1], o, t);
}

static int by_left(const void *a, const void *b) {
    const leaf *x = a, *y = b;
    return (x->left > y->left) - (x->left < y->left);
}

typedef struct {
    musa_graph *g;
    MUSA_VEC(int32_t) pos;          /* each new node's place (musa_graph_place) */
    tree *t;                        /* the tree being looked at (large: on the heap) */
    MUSA_VEC(int32_t) plus0;        /* the pieces' adds of +0.0 (nodes) */
    int32_t zero[MUSA_DTYPE_COUNT]; /* the +0.0 constant of each dtype, once made (else -1) */
} rw;

/* Append op(in) to go right before original node `at` (its location that
 * of node `loc_of`). */
static int add_before(rw *R, musa_op_id op, int n_in, const int32_t *in, const void *attrs,
                      int32_t at, int32_t loc_of, int32_t *out) {
    const char *loc = R->g->nodes.data[loc_of].loc;
    int32_t id = musa_graph_add_node(R->g, op, n_in, in, attrs, out);
    if (id < 0) return id;
    R->g->nodes.data[id].loc = loc;
    return musa_vec_push(&R->pos, at) ? MUSA_ERR_NOMEM : MUSA_OK;
}

/* The node whose output v is, through views that only it reads (v itself
 * read once), or -1. */
static int32_t made_through_views(const musa_graph *g, int32_t v) {
    for (int depth = 0; depth < 64; depth++) {
        const musa_gvalue *x = &g->values.data[v];
        if (x->kind != MUSA_V_NODE || x->producer < 0 || x->uses != 1) return -1;
        const musa_gnode *p = &g->nodes.data[x->producer];
        if (p->dead) return -1;
        if (!(musa_ops[p->op].flags & MUSA_OPF_VIEW) || p->n_in != 1) return x->producer;
        v = p->in[0];
    }
    return -1;
}

/* An attention backward whose every used output (dq, dk, dv) is a piece
 * of this sum, through views read by nothing else, adds the +0.0 itself
 * as it stores them (attribute plus_zero): those pieces get no add, and
 * the cat reads the outputs in place. GPT-tiny's q, k and v gradients
 * were three adds over permuted views, a pass each over the block's
 * activations. Marks such leaves in bare[]. */
static int absorb_into_attention(musa_graph *g, const tree *t, bool *bare) {
    for (int k = 0; k < t->n; k++) {
        int32_t p = made_through_views(g, t->leaves[k].in);
        if (bare[k] || p < 0 ||
            g->nodes.data[p].op != MUSA_OP_scaled_dot_product_attention_backward)
            continue;
        const musa_gnode *pn = &g->nodes.data[p];
        int used = 0, pieces = 0, of[3] = {-1, -1, -1}; /* each output's leaf */
        for (int o = 0; o < 3; o++) {                   /* dq, dk, dv: the op's three outputs */
            const musa_gvalue *out = &g->values.data[pn->out[o]];
            used += out->uses > 0;
            for (int q = k; q < t->n && of[o] < 0; q++)
                if (made_through_views(g, t->leaves[q].in) == p &&
                    g->values.data[t->leaves[q].in].root == pn->out[o])
                    of[o] = q, pieces++;
        }
        if (pieces != used) continue;
        musa_attrs_attention at = pn->attrs->attention;
        at.plus_zero = true;
        int rc = musa_graph_set_attrs(g, &g->nodes.data[p], &at);
        if (rc) return rc;
        for (int o = 0; o < 3; o++)
            if (of[o] >= 0) bare[of[o]] = true;
    }
    return MUSA_OK;
}

/* Rewrite root add i when it sums a tree of side-by-side zero pads: 1 when
 * rewritten, 0 when not such a sum, < 0 an error. */
static int rewrite(rw *R, int32_t i) {
    musa_graph *g = R->g;
    const musa_gnode *n = &g->nodes.data[i];
    if (n->dead || n->op != MUSA_OP_add || n->n_in != 2) return 0;
    musa_gvalue o = g->values.data[n->out[0]];
    if (o.dtype == MUSA_DTYPE_BOOL || o.ndim == 0) return 0;
    tree *t = R->t;
    t->n = t->n_adds = t->d = 0;
    if (!collect(g, n->in[0], &o, t) || !collect(g, n->in[1], &o, t) || t->n < 2) return 0;
    qsort(t->leaves, (size_t)t->n, sizeof t->leaves[0], by_left);
    for (int k = 1; k < t->n; k++)
        if (t->leaves[k - 1].left + t->leaves[k - 1].width != t->leaves[k].left) return 0;
    int64_t start = t->leaves[0].left, end = t->leaves[t->n - 1].left + t->leaves[t->n - 1].width;
    if (end > o.shape[t->d]) return 0;
    /* each piece plus +0.0 (what adding it to zeros did), right after the
     * piece is made so that fusion takes it into its producer's group */
    int32_t z = R->zero[o.dtype];
    if (z < 0) {
        musa_tensor *zero = musa_scalar(0.0, (musa_dtype)o.dtype);
        z = R->zero[o.dtype] = zero ? musa_graph_const(g, zero) : -1;
        musa_tensor_release(zero);
        if (z < 0) return MUSA_ERR_NOMEM;
    }
    int32_t *in = MUSA_ARENA_NEW(&g->arena, int32_t, t->n);
    bool *bare = MUSA_ARENA_NEW(&g->arena, bool, t->n);
    if (!in || !bare) return MUSA_ERR_NOMEM;
    memset(bare, 0, (size_t)t->n);
    int rc = absorb_into_attention(g, t, bare);
    for (int k = 0; k < t->n && !rc; k++) {
        if (bare[k]) {
            in[k] = t->leaves[k].in;
            continue;
        }
        int32_t pair[2] = {t->leaves[k].in, z};
        int32_t made = g->values.data[pair[0]].producer;
        int32_t at = g->values.data[pair[0]].kind == MUSA_V_NODE && made >= 0 ? made + 1 : i;
        rc = add_before(R, MUSA_OP_add, 2, pair, NULL, at, i, &in[k]);
        if (!rc && musa_vec_push(&R->plus0, (int32_t)g->nodes.len - 1)) rc = MUSA_ERR_NOMEM;
    }
    if (rc) return rc;
    musa_attrs_dim ca;
    musa_attrs_init(MUSA_ATTRS_dim, &ca);
    ca.dim = t->d;
    bool edges = start > 0 || end < o.shape[t->d];
    int32_t *one = edges ? MUSA_ARENA_NEW(&g->arena, int32_t, 1) : NULL; /* the pad's input */
    if (edges && !one) return MUSA_ERR_NOMEM;
    if (edges && (rc = add_before(R, MUSA_OP_cat, t->n, in, &ca, i, i, one))) return rc;
    /* the root becomes the cat, or the pad of it */
    musa_gnode *root = &g->nodes.data[i];
    musa_gnode saved = *root;
    if (edges) {
        musa_attrs_pad pa;
        musa_attrs_init(MUSA_ATTRS_pad, &pa);
        pa.pads.n = 2 * (o.ndim - t->d);
        pa.pads.v[2 * (o.ndim - 1 - t->d)] = start;
        pa.pads.v[2 * (o.ndim - 1 - t->d) + 1] = o.shape[t->d] - end;
        root->op = MUSA_OP_pad, root->n_in = 1, root->in = one;
        rc = musa_graph_set_attrs(g, root, &pa);
    } else {
        root->op = MUSA_OP_cat, root->n_in = t->n, root->in = in;
        rc = musa_graph_set_attrs(g, root, &ca);
    }
    if (rc) { /* out of memory: the error stands */
        g->nodes.data[i] = saved;
        return rc;
    }
    rc = musa_graph_infer_node(g, i);
    const musa_gvalue *now = &g->values.data[saved.out[0]];
    if (rc || !musa_gvalue_same_layout(now, &o) || now->dtype != o.dtype) {
        /* cannot be (same shape, dtype, contiguous); leave the sum as it was */
        if (rc) musa_clear_error();
        g->nodes.data[i] = saved;
        g->values.data[saved.out[0]] = o;
        return 0;
    }
    for (int k = 0; k < t->n_adds; k++) g->nodes.data[t->adds[k]].dead = true;
    return 1;
}

/* Whether v holds no -0.0 for certain: made by one of the pass's adds of
 * +0.0 (still live), or a view, a cat or a zero pad of such values. */
static bool canonical(const musa_graph *g, const uint8_t *is_plus0, int32_t v, int depth) {
    const musa_gvalue *x = &g->values.data[v];
    if (x->kind != MUSA_V_NODE || x->producer < 0 || depth > 64) return false;
    const musa_gnode *p = &g->nodes.data[x->producer];
    if (p->dead) return false;
    if (is_plus0[x->producer]) return true;
    if (p->op == MUSA_OP_scaled_dot_product_attention_backward && p->attrs->attention.plus_zero)
        return true;
    if (p->op == MUSA_OP_cat) {
        for (int k = 0; k < p->n_in; k++)
            if (!canonical(g, is_plus0, p->in[k], depth + 1)) return false;
        return p->n_in > 0;
    }
    if ((musa_ops[p->op].flags & MUSA_OPF_VIEW) && p->n_in == 1)
        return canonical(g, is_plus0, p->in[0], depth + 1);
    if (p->op == MUSA_OP_pad && p->attrs->pad.value == 0)
        return canonical(g, is_plus0, p->in[0], depth + 1);
    return false;
}

/* A piece that is already canonical (an RNN's step gradient, itself a cat
 * of pieces this pass gave their +0.0, cut out of the whole sequence's
 * sum) needs no add of its own: its add goes, its cat reads the piece. */
static void drop_needless_adds(rw *R) {
    musa_graph *g = R->g;
    uint8_t *is_plus0 = musa_calloc((size_t)g->nodes.len + 1, 1, "padsum");
    if (!is_plus0) {
        musa_clear_error(); /* keep every add: the same bits, one pass more */
        return;
    }
    for (int64_t k = 0; k < R->plus0.len; k++) is_plus0[R->plus0.data[k]] = 1;
    for (int64_t k = 0; k < R->plus0.len; k++) { /* in creation order: outer sums first */
        int32_t a = R->plus0.data[k];
        musa_gnode *n = &g->nodes.data[a];
        is_plus0[a] = 0; /* its own piece must be canonical without it */
        if (!canonical(g, is_plus0, n->in[0], 0)) {
            is_plus0[a] = 1;
            continue;
        }
        musa_graph_replace_uses(g, n->out[0], n->in[0]);
        n->dead = true;
    }
    free(is_plus0);
}

int musa_pass_padsum(musa_graph *g, musa_pass_ctx *ctx) {
    if (!g) return musa_err(MUSA_ERR_VALUE, "[padsum] graph is NULL");
    /* what simplify left unread goes first: absorb_into_attention counts
     * the reads of the attention's outputs */
    int rc = musa_pass_dce(g, NULL);
    if (rc) return rc;
    musa_graph_analyse(g);
    rw R = {.g = g, .t = musa_malloc(sizeof(tree), "padsum")};
    if (!R.t) return MUSA_ERR_NOMEM;
    for (int d = 0; d < MUSA_DTYPE_COUNT; d++) R.zero[d] = -1;
    int64_t nn0 = g->nodes.len;
    /* pos is indexed by node: the original nodes' entries are unused */
    if (musa_vec_reserve(&R.pos, nn0 + 16)) {
        free(R.t);
        return MUSA_ERR_NOMEM;
    }
    R.pos.len = nn0;
    int changed = 0;
    for (int64_t i = nn0 - 1; i >= 0 && !rc; i--) {
        int r = rewrite(&R, (int32_t)i);
        if (r < 0) rc = r;
        changed += r > 0;
    }
    if (!rc && changed) {
        drop_needless_adds(&R);
        rc = musa_graph_place(g, nn0, R.pos.data);
    }
    musa_vec_free(&R.pos);
    musa_vec_free(&R.plus0);
    free(R.t);
    if (rc) return rc;
    musa_graph_analyse(g);
    if (ctx) ctx->changes += changed;
    return MUSA_OK;
}
