/*
 * onnx_ops_conv.c - ONNX ops: Conv, ConvTranspose and the pools in 1 to 3
 * dims, with their geometry (kernel, strides, dilations, pads, auto_pad);
 * 1-d runs on a height-1 view, 3-d as 2-d kernels over depth slabs
 * (onnx_ops.h says how the files of ops are written).
 */
#include "onnx_ops.h"

#ifdef MUSA_HAVE_ONNX

/* The spatial pads (begins, then ends) of a convolution or pool over x's
 * last nd dims: from pads, or by auto_pad (SAME_*: output = ceil(in / stride)). */
static int spatial_pads(onnx_build *b, const onnx_node *n, const musa_tensor *x, int nd,
                        const int64_t *k, const int64_t *st, const int64_t *dl, int64_t *pads) {
    const char *auto_pad = onnx_attr_str(n, "auto_pad", "NOTSET");
    for (int i = 0; i < 2 * nd; i++) pads[i] = 0;
    if (!strcmp(auto_pad, "NOTSET")) {
        int np = onnx_attr_ints(n, "pads", pads, 2 * nd);
        if (np && np != 2 * nd)
            return FAIL(MUSA_ERR_VALUE, "pads has %d values; %d spatial dims need %d", np, nd,
                        2 * nd);
        for (int i = 0; i < 2 * nd; i++)
            if (pads[i] < 0 || pads[i] > GEOM_MAX)
                return FAIL(MUSA_ERR_VALUE, "pads must be in [0, 2^16]");
        return MUSA_OK;
    }
    if (!strcmp(auto_pad, "VALID")) return MUSA_OK;
    bool upper = !strcmp(auto_pad, "SAME_UPPER");
    if (!upper && strcmp(auto_pad, "SAME_LOWER"))
        return FAIL(MUSA_ERR_VALUE,
                    "auto_pad '%.40s' is not NOTSET, VALID, SAME_UPPER or SAME_LOWER", auto_pad);
    for (int i = 0; i < nd; i++) {
        int64_t size = x->shape[x->ndim - nd + i], o = (size + st[i] - 1) / st[i];
        int64_t total = (o - 1) * st[i] + (k[i] - 1) * dl[i] + 1 - size;
        if (total < 0) total = 0;
        pads[i] = upper ? total / 2 : total - total / 2;
        pads[i + nd] = total - pads[i];
    }
    return MUSA_OK;
}

/* x padded by ONNX-order pads (begins, then ends) on its last nd dims */
musa_tensor *onnx_pad_spatial(onnx_build *b, musa_tensor *x, int nd, const int64_t *pads,
                              double value) {
    int64_t tp[2 * MUSA_MAX_DIMS];
    for (int i = 0; i < nd; i++) { /* musa_pad lists the last dim first */
        tp[2 * i] = pads[nd - 1 - i];
        tp[2 * i + 1] = pads[2 * nd - 1 - i];
    }
    return T(musa_pad(x, 2 * nd, tp, value));
}

/* The geometry attributes of Conv, ConvTranspose and the pools: nd
 * spatial dims, kernel, strides and dilations (defaults 1) and pads. For 1
 * or 2 dims also as 2-d (1-d runs as 2-d on a height-1 view); 3-d runs as
 * 2-d ops over depth slabs (conv3d and friends below) from the raw fields. */
typedef struct geom {
    int nd;
    int64_t k[2], st[2], dl[2], pads[4];     /* 2-d; pads: top, left, bottom, right */
    int64_t rk[3], rst[3], rdl[3], rpads[6]; /* as given: pads begins, then ends */
} geom;

static int read_geom(onnx_build *b, const onnx_node *n, const musa_tensor *x, const int64_t *wk,
                     geom *g) {
    int nd = x->ndim - 2;
    if (nd < 1 || nd > 3)
        return FAIL(MUSA_ERR_VALUE, "a %d-d input: 1 to 3 spatial dims are read", x->ndim);
    int64_t k[MUSA_MAX_DIMS], st[MUSA_MAX_DIMS], dl[MUSA_MAX_DIMS], pads[2 * MUSA_MAX_DIMS];
    int nk = onnx_attr_ints(n, "kernel_shape", k, MUSA_MAX_DIMS);
    if (!nk && wk) memcpy(k, wk, sizeof(int64_t) * (size_t)nd), nk = nd;
    int ns = onnx_attr_ints(n, "strides", st, MUSA_MAX_DIMS);
    int ndl = onnx_attr_ints(n, "dilations", dl, MUSA_MAX_DIMS);
    if (nk != nd || (ns && ns != nd) || (ndl && ndl != nd))
        return FAIL(MUSA_ERR_VALUE,
                    "kernel_shape, strides and dilations must have %d values (the input's spatial "
                    "dims); they have %d, %d and %d",
                    nd, nk, ns, ndl);
    for (int i = 0; i < nd; i++) {
        if (!ns) st[i] = 1;
        if (!ndl) dl[i] = 1;
        if (k[i] < 1 || st[i] < 1 || dl[i] < 1 || k[i] > GEOM_MAX || st[i] > GEOM_MAX ||
            dl[i] > GEOM_MAX)
            return FAIL(MUSA_ERR_VALUE, "kernel_shape, strides and dilations must be in [1, 2^16]");
    }
    int rc = spatial_pads(b, n, x, nd, k, st, dl, pads);
    if (rc) return rc;
    g->nd = nd;
    for (int i = 0; i < nd; i++) {
        g->rk[i] = k[i], g->rst[i] = st[i], g->rdl[i] = dl[i];
        g->rpads[i] = pads[i], g->rpads[3 + i] = pads[nd + i];
    }
    if (nd == 3) return MUSA_OK;
    int off = 2 - nd; /* 1-d: height 1, no padding */
    for (int i = 0; i < 2; i++)
        g->k[i] = 1, g->st[i] = 1, g->dl[i] = 1, g->pads[i] = g->pads[i + 2] = 0;
    for (int i = 0; i < nd; i++) {
        g->k[off + i] = k[i], g->st[off + i] = st[i], g->dl[off + i] = dl[i];
        g->pads[off + i] = pads[i], g->pads[2 + off + i] = pads[nd + i];
    }
    return MUSA_OK;
}

static musa_tensor *as_2d(onnx_build *b, musa_tensor *x, int nd) {
    return nd == 1 ? T(musa_unsqueeze(x, 2)) : x;
}

static int from_2d(onnx_build *b, musa_tensor **out, musa_tensor *y, int nd) {
    if (!y) return ERR;
    return put(out, nd == 1 ? T(musa_squeeze(y, 1, (int64_t[]){2})) : y);
}

static bool symmetric(const geom *g) {
    return g->pads[0] == g->pads[2] && g->pads[1] == g->pads[3];
}

/* ---- 3-d: 2-d ops over depth slabs ---- */

/* (N, C, D, H, W) -> (N*D, C, H, W) and back */
static musa_tensor *planes_of(onnx_build *b, musa_tensor *x) {
    static const int64_t perm[5] = {0, 2, 1, 3, 4};
    int64_t s4[4] = {x->shape[0] * x->shape[2], x->shape[1], x->shape[3], x->shape[4]};
    return T(musa_reshape(T(musa_permute(x, 5, perm)), 4, s4));
}
static musa_tensor *volume_of(onnx_build *b, musa_tensor *y, int64_t N, int64_t D) {
    static const int64_t perm[5] = {0, 2, 1, 3, 4};
    int64_t s5[5] = {N, D, y->shape[1], y->shape[2], y->shape[3]};
    return T(musa_permute(T(musa_reshape(y, 5, s5)), 5, perm));
}

static musa_tensor *add_bias3(onnx_build *b, musa_tensor *y, musa_tensor *bias) {
    if (!y || !bias) return y;
    int64_t shape[4] = {bias->shape[0], 1, 1, 1};
    return T(musa_add(y, T(musa_reshape(bias, 4, shape))));
}

/* depth tap t's slab of xp: xp[:, :, t*dl :: st][:count] */
static musa_tensor *depth_slab(onnx_build *b, musa_tensor *xp, const geom *g, int64_t t,
                               int64_t count) {
    return T(
        musa_slice(xp, 2, t * g->rdl[0], t * g->rdl[0] + g->rst[0] * (count - 1) + 1, g->rst[0]));
}

/* Conv over (N, C, D, H, W): the sum over depth taps of 2-d convolutions */
static int conv3d(onnx_build *b, const onnx_node *n, musa_tensor *x, musa_tensor *w,
                  musa_tensor *bias, const geom *g, musa_tensor **out) {
    musa_tensor *xp = onnx_pad_spatial(b, x, 3, g->rpads, 0.0);
    if (!xp) return ERR;
    int64_t reach = g->rdl[0] * (g->rk[0] - 1) + 1, D = xp->shape[2];
    if (D < reach)
        return FAIL(MUSA_ERR_VALUE, "the kernel depth reaches %lld; the padded input has %lld",
                    (long long)reach, (long long)D);
    int64_t od = (D - reach) / g->rst[0] + 1, zero[2] = {0, 0};
    musa_tensor *acc = NULL;
    for (int64_t t = 0; t < g->rk[0]; t++) {
        musa_tensor *slab = depth_slab(b, xp, g, t, od), *p = slab ? planes_of(b, slab) : NULL;
        musa_tensor *wt = T(musa_select(w, 2, t));
        musa_tensor *y = p && wt ? T(musa_conv2d(p, wt, NULL, g->rst + 1, zero, g->rdl + 1,
                                                 onnx_attr_int(n, "group", 1)))
                                 : NULL;
        if (!y || !(acc = acc ? T(musa_add(acc, y)) : y)) return ERR;
    }
    return put(out, add_bias3(b, volume_of(b, acc, x->shape[0], od), bias));
}

/* ConvTranspose over (N, C, D, H, W): each depth tap's 2-d transposed
 * convolution of every input plane, added at depths d*stride + t*dilation;
 * then ONNX's begin/end pads (negative: zeros added) and the bias. */
static int conv_transpose3d(onnx_build *b, const onnx_node *n, musa_tensor *x, musa_tensor *w,
                            musa_tensor *bias, const geom *g, const int64_t *begin,
                            const int64_t *end, musa_tensor **out) {
    int64_t N = x->shape[0], D = x->shape[2];
    int64_t full = (D - 1) * g->rst[0] + (g->rk[0] - 1) * g->rdl[0] + 1, zero[2] = {0, 0};
    HAVE(p, planes_of(b, x));
    musa_tensor *acc = NULL;
    int64_t *ix = malloc(sizeof(int64_t) * (size_t)(D + 1));
    if (!ix) return musa_err_nomem("onnx ConvTranspose", 8 * (size_t)D);
    for (int64_t t = 0; t < g->rk[0]; t++) {
        musa_tensor *wt = T(musa_select(w, 2, t));
        musa_tensor *y = wt ? T(musa_conv_transpose2d(p, wt, NULL, g->rst + 1, zero, zero,
                                                      g->rdl + 1, onnx_attr_int(n, "group", 1)))
                            : NULL;
        musa_tensor *v = y ? volume_of(b, y, N, D) : NULL;
        if (v && !acc) {
            int64_t shape[5] = {N, v->shape[1], full, v->shape[3], v->shape[4]};
            acc = T(musa_zeros(5, shape, (musa_dtype)v->dtype));
        }
        for (int64_t d = 0; d < D; d++) ix[d] = d * g->rst[0] + t * g->rdl[0];
        musa_tensor *it = v && acc ? T(onnx_const(ix, 1, &D, MUSA_DTYPE_INT64)) : NULL;
        if (!it || !(acc = T(musa_index_add(acc, 2, it, v)))) {
            free(ix);
            return ERR;
        }
    }
    free(ix);
    int64_t pads[6];
    for (int i = 0; i < 3; i++) pads[i] = -begin[i], pads[3 + i] = -end[i]; /* negative pads crop */
    return put(out, add_bias3(b, onnx_pad_spatial(b, acc, 3, pads, 0.0), bias));
}

/* The output length of a pool over `size` with pads pb, pe (ceil_mode: no
 * window may start in the end padding), and the end padding it needs. */
static int64_t pool_len(int64_t size, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe,
                        bool ceil_mode, int64_t *end_pad) {
    int64_t reach = d * (k - 1) + 1, span = size + pb + pe - reach;
    if (span < 0) return -1;
    int64_t o = (span + (ceil_mode ? s - 1 : 0)) / s + 1;
    if (ceil_mode && (o - 1) * s >= size + pb) o--;
    int64_t need = (o - 1) * s + reach - size - pb;
    *end_pad = need > pe ? need : pe;
    return o;
}

/* MaxPool / AveragePool over (N, C, D, H, W) */
static int pool3d(onnx_build *b, const onnx_node *n, musa_tensor *x, const geom *g, bool max,
                  bool ceil_mode, musa_tensor **out) {
    int64_t outs[3], pads[6], N = x->shape[0], C = x->shape[1];
    for (int i = 0; i < 3; i++) {
        pads[i] = g->rpads[i];
        outs[i] = pool_len(x->shape[2 + i], g->rk[i], g->rst[i], g->rdl[i], g->rpads[i],
                           g->rpads[3 + i], ceil_mode, &pads[3 + i]);
        if (outs[i] < 1) return FAIL(MUSA_ERR_VALUE, "the window is larger than the padded input");
    }
    if (!max && (g->rdl[0] != 1 || g->rdl[1] != 1 || g->rdl[2] != 1))
        return FAIL(MUSA_ERR_NOT_IMPLEMENTED, "a dilated AveragePool");
    bool include = onnx_attr_int(n, "count_include_pad", 0);
    int64_t zero[2] = {0, 0};
    /* the pooled planes of each depth tap, combined: max, or sums */
    musa_tensor *srcs[2] = {onnx_pad_spatial(b, x, 3, pads, max ? -INFINITY : 0.0), NULL};
    if (!srcs[0]) return ERR;
    if (!max) { /* the count of cells each window averages: ones where they count */
        int64_t shape[5] = {1, 1, x->shape[2], x->shape[3], x->shape[4]}, inner[6], outer[6];
        for (int i = 0; i < 6; i++)
            inner[i] = include ? g->rpads[i] : 0, outer[i] = pads[i] - inner[i];
        musa_tensor *ones = T(musa_ones(5, shape, (musa_dtype)x->dtype));
        musa_tensor *m = ones ? onnx_pad_spatial(b, ones, 3, inner, 1.0) : NULL;
        if (!m || !(srcs[1] = onnx_pad_spatial(b, m, 3, outer, 0.0))) return ERR;
    }
    musa_tensor *res[2] = {NULL, NULL};
    for (int j = 0; j < (max ? 1 : 2); j++)
        for (int64_t t = 0; t < g->rk[0]; t++) {
            musa_tensor *slab = depth_slab(b, srcs[j], g, t, outs[0]);
            int64_t s4[4] = {slab ? slab->shape[0] : 0, (slab ? slab->shape[1] : 0) * outs[0],
                             slab ? slab->shape[3] : 0, slab ? slab->shape[4] : 0};
            musa_tensor *p = slab ? T(musa_reshape(slab, 4, s4)) : NULL, *y = NULL;
            if (p && max) {
                int rc =
                    musa_max_pool2d(p, g->rk + 1, g->rst + 1, zero, g->rdl + 1, false, &y, NULL);
                if (rc) return rc;
                y = T(y);
            } else if (p) { /* window sums: averages over the full window, times its area */
                y = T(musa_mul(T(musa_avg_pool2d(p, g->rk + 1, g->rst + 1, zero, false, true)),
                               NUM((double)(g->rk[1] * g->rk[2]))));
            }
            if (!y ||
                !(res[j] = !res[j] ? y : T(max ? musa_maximum(res[j], y) : musa_add(res[j], y))))
                return ERR;
        }
    int64_t s5[5] = {N, C, outs[0], outs[1], outs[2]}, c5[5] = {1, 1, outs[0], outs[1], outs[2]};
    LET(y, musa_reshape(res[0], 5, s5));
    if (max) return put(out, y);
    return put(out, T(musa_div(y, T(musa_reshape(res[1], 5, c5)))));
}

static int op_Conv(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0], *w = in[1], *bias = n->n_in > 2 ? in[2] : NULL;
    if (w->ndim != x->ndim)
        return FAIL(MUSA_ERR_VALUE, "the weight has %d dims; a %d-d input needs %d", w->ndim,
                    x->ndim, x->ndim);
    geom g;
    int rc = read_geom(b, n, x, w->shape + 2, &g);
    if (rc) return rc;
    if (g.nd == 3) return conv3d(b, n, x, w, bias, &g, out);
    musa_tensor *x2 = as_2d(b, x, g.nd), *w2 = as_2d(b, w, g.nd);
    if (!x2 || !w2) return ERR;
    int64_t pad[2] = {g.pads[0], g.pads[1]};
    if (!symmetric(&g)) { /* asymmetric: pad explicitly first */
        if (!(x2 = onnx_pad_spatial(b, x2, 2, g.pads, 0.0))) return ERR;
        pad[0] = pad[1] = 0;
    }
    return from_2d(
        b, out, T(musa_conv2d(x2, w2, bias, g.st, pad, g.dl, onnx_attr_int(n, "group", 1))), g.nd);
}

static int op_ConvTranspose(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0], *w = in[1], *bias = n->n_in > 2 ? in[2] : NULL;
    if (w->ndim != x->ndim)
        return FAIL(MUSA_ERR_VALUE, "the weight has %d dims; a %d-d input needs %d", w->ndim,
                    x->ndim, x->ndim);
    const char *auto_pad = onnx_attr_str(n, "auto_pad", "NOTSET");
    bool same = !strncmp(auto_pad, "SAME_", 5), upper = !strcmp(auto_pad, "SAME_UPPER");
    geom g;
    int rc = read_geom(b, n, x, w->shape + 2, &g);
    if (rc) return rc;
    int nd = g.nd, off = 2 - nd;
    int64_t op[MUSA_MAX_DIMS] = {0}, os[MUSA_MAX_DIMS];
    int nop = onnx_attr_ints(n, "output_padding", op, MUSA_MAX_DIMS);
    int nos = onnx_attr_ints(n, "output_shape", os, MUSA_MAX_DIMS);
    if ((nop && nop != nd) || (nos && nos > nd + 2) || (nos && nos < nd))
        return FAIL(MUSA_ERR_VALUE, "output_padding and output_shape need %d values", nd);
    for (int i = 0; i < nd; i++)
        if (op[i] < 0 || op[i] > GEOM_MAX ||
            (nos && (os[nos - nd + i] < 0 || os[nos - nd + i] > ((int64_t)1 << 40))))
            return FAIL(MUSA_ERR_VALUE, "output_padding or output_shape out of range");
    /* the full result (no padding) is (in - 1) stride + (k - 1) dilation + 1
     * long; ONNX's pads crop it at both ends (begin, end: negative adds
     * zeros), output_padding extends the end */
    int64_t begin[3], end[3];
    bool plain = true; /* musa's own padding does it: symmetric, small output_padding */
    for (int i = 0; i < nd; i++) {
        int64_t size = x->shape[2 + i];
        int64_t full = (size - 1) * g.rst[i] + (g.rk[i] - 1) * g.rdl[i] + 1;
        begin[i] = same ? 0 : g.rpads[i], end[i] = (same ? 0 : g.rpads[3 + i]) - op[i];
        if (nos || same) { /* pads from the asked size */
            int64_t want = nos ? os[nos - nd + i] : size * g.rst[i];
            int64_t total = full + op[i] - want;
            begin[i] = total < 0 ? 0 : (same && upper) ? total / 2 : total - total / 2;
            end[i] = total - begin[i] - op[i];
        }
        plain &=
            begin[i] == end[i] + op[i] && begin[i] >= 0 && (op[i] < g.rst[i] || op[i] < g.rdl[i]);
    }
    if (nd == 3) return conv_transpose3d(b, n, x, w, bias, &g, begin, end, out);
    for (int i = 1; i >= 0; i--) { /* to 2-d: 1-d is height 1 */
        begin[i] = i < off ? 0 : begin[i - off], end[i] = i < off ? 0 : end[i - off];
        op[i] = i < off ? 0 : op[i - off];
    }
    musa_tensor *x2 = as_2d(b, x, nd), *w2 = as_2d(b, w, nd);
    if (!x2 || !w2) return ERR;
    int64_t groups = onnx_attr_int(n, "group", 1);
    if (plain) { /* symmetric pads: musa's own */
        int64_t pad[2] = {begin[0], begin[1]}, outpad[2] = {op[0], op[1]};
        return from_2d(b, out,
                       T(musa_conv_transpose2d(x2, w2, bias, g.st, pad, outpad, g.dl, groups)), nd);
    }
    /* else the full result without bias, cropped or extended with zeros, then the bias */
    int64_t zero[2] = {0, 0};
    LET(y, musa_conv_transpose2d(x2, w2, NULL, g.st, zero, zero, g.dl, groups));
    int64_t pads[4] = {-begin[0], -begin[1], -end[0], -end[1]}; /* negative pads crop */
    musa_tensor *c = onnx_pad_spatial(b, y, 2, pads, 0.0);
    if (c && bias) {
        int64_t shape[3] = {bias->shape[0], 1, 1};
        c = T(musa_add(c, T(musa_reshape(bias, 3, shape))));
    }
    return from_2d(b, out, c, nd);
}

static int pool(onnx_build *b, const onnx_node *n, musa_tensor **in, musa_tensor **out, bool max) {
    musa_tensor *x = in[0];
    geom g;
    int rc = read_geom(b, n, x, NULL, &g);
    if (rc) return rc;
    bool ceil_mode = onnx_attr_int(n, "ceil_mode", 0);
    if (g.nd == 3) {
        if (max && n->n_out > 1 && n->out[1] >= 0)
            return FAIL(MUSA_ERR_NOT_IMPLEMENTED, "the Indices output of a 3-d MaxPool");
        if (!musa_is_float((musa_dtype)x->dtype))
            return FAIL(MUSA_ERR_TYPE, "a 3-d pool of %s", musa_dtype_name((musa_dtype)x->dtype));
        return pool3d(b, n, x, &g, max, ceil_mode, out);
    }
    musa_dtype dt = (musa_dtype)x->dtype;
    musa_tensor *x2 = as_2d(b, x, g.nd);
    if (x2 && !musa_is_float(dt)) x2 = T(musa_cast(x2, MUSA_DTYPE_FLOAT32));
    if (!x2) return ERR;
    bool sym = symmetric(&g) && 2 * g.pads[0] <= g.k[0] && 2 * g.pads[1] <= g.k[1];
    int64_t pad[2] = {sym ? g.pads[0] : 0, sym ? g.pads[1] : 0};
    musa_tensor *y;
    bool want_idx = max && n->n_out > 1 && n->out[1] >= 0;
    if (want_idx && (g.nd != 2 || g.pads[0] || g.pads[1] || g.pads[2] || g.pads[3]))
        return FAIL(MUSA_ERR_NOT_IMPLEMENTED, "the Indices output of a padded or 1-d MaxPool");
    /* uneven pads: padded explicitly, the end also over ceil_mode's overhang
     * (pool_len: no window starts in the end padding), then pooled without */
    int64_t full[4] = {g.pads[0], g.pads[1], g.pads[2], g.pads[3]};
    for (int i = 0; !sym && i < 2; i++)
        if (pool_len(x2->shape[2 + i], g.k[i], g.st[i], g.dl[i], g.pads[i], g.pads[2 + i],
                     ceil_mode, &full[2 + i]) < 1)
            return FAIL(MUSA_ERR_VALUE, "the window is larger than the padded input");
    bool ceil2 = sym && ceil_mode;
    if (max) {
        if (!sym && !(x2 = onnx_pad_spatial(b, x2, 2, full, -INFINITY))) return ERR;
        musa_tensor *v = NULL, *idx = NULL;
        if ((rc = musa_max_pool2d(x2, g.k, g.st, pad, g.dl, ceil2, &v, want_idx ? &idx : NULL)))
            return rc;
        y = T(v);
        if (want_idx) { /* ONNX's: flat over the whole tensor, row- or column-major planes */
            int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
            musa_tensor *i = T(idx);
            if (i && onnx_attr_int(n, "storage_order", 0)) { /* h*W + w -> w*H + h */
                musa_tensor *h = T(musa_floor_divide(i, T(musa_number_int(W))));
                musa_tensor *w = T(musa_remainder(i, T(musa_number_int(W))));
                i = h && w ? T(musa_add(T(musa_mul(w, T(musa_number_int(H)))), h)) : NULL;
            }
            int64_t nc = N * C, base_shape[4] = {N, C, 1, 1};
            musa_tensor *base =
                T(musa_reshape(T(musa_mul(T(musa_arange(0, (double)nc, 1, MUSA_DTYPE_INT64)),
                                          T(musa_number_int(H * W)))),
                               4, base_shape));
            if (!i || !base || (rc = put(out + 1, T(musa_add(i, base))))) return rc ? rc : ERR;
        }
    } else {
        if (g.dl[0] != 1 || g.dl[1] != 1)
            return FAIL(MUSA_ERR_NOT_IMPLEMENTED, "a dilated AveragePool");
        bool include = onnx_attr_int(n, "count_include_pad", 0);
        if (sym) {
            y = T(musa_avg_pool2d(x2, g.k, g.st, pad, ceil_mode, include));
        } else { /* window means over zeros, over the means of a mask of the cells that count */
            int64_t inner[4], outer[4];
            for (int i = 0; i < 4; i++)
                inner[i] = include ? g.pads[i] : 0, outer[i] = full[i] - inner[i];
            HAVE(xp, onnx_pad_spatial(b, x2, 2, full, 0.0));
            musa_tensor *ones = T(musa_ones_like(x2)),
                        *m = ones ? onnx_pad_spatial(b, ones, 2, inner, 1.0) : NULL;
            musa_tensor *mask = m ? onnx_pad_spatial(b, m, 2, outer, 0.0) : NULL;
            musa_tensor *sums = T(musa_avg_pool2d(xp, g.k, g.st, pad, false, true));
            musa_tensor *cnt = mask ? T(musa_avg_pool2d(mask, g.k, g.st, pad, false, true)) : NULL;
            y = sums && cnt ? T(musa_div(sums, cnt)) : NULL;
        }
    }
    if (y && !musa_is_float(dt)) y = T(musa_cast(y, dt));
    return from_2d(b, out, y, g.nd);
}
static int op_MaxPool(ARGS) {
    UNUSED_ARGS;
    return pool(b, n, in, out, true);
}
static int op_AveragePool(ARGS) {
    UNUSED_ARGS;
    return pool(b, n, in, out, false);
}

static int global_pool(onnx_build *b, const onnx_node *n, musa_tensor **in, musa_tensor **out,
                       bool max) {
    musa_tensor *x = in[0];
    if (x->ndim < 3)
        return FAIL(MUSA_ERR_VALUE, "the input has %d dims; at least 3 are needed", x->ndim);
    int64_t dims[MUSA_MAX_DIMS];
    for (int d = 2; d < x->ndim; d++) dims[d - 2] = d;
    return put(out, T(max ? musa_amax(x, x->ndim - 2, dims, true)
                          : musa_mean(x, x->ndim - 2, dims, true)));
}
static int op_GlobalAveragePool(ARGS) {
    UNUSED_ARGS;
    return global_pool(b, n, in, out, false);
}
static int op_GlobalMaxPool(ARGS) {
    UNUSED_ARGS;
    return global_pool(b, n, in, out, true);
}

/* ---- this file's rows of the op table ---- */

const onnx_op onnx_ops_conv[] = {
    {"Conv", 2, 3, 1, 1, GEOM ",group:i", false, 0, op_Conv},
    {"ConvTranspose", 2, 3, 1, 1, GEOM ",group:i,output_padding:ints,output_shape:ints", false, 0,
     op_ConvTranspose},
    {"MaxPool", 1, 1, 1, 2, GEOM ",ceil_mode:i,storage_order:i", false, 0, op_MaxPool},
    {"AveragePool", 1, 1, 1, 1, GEOM ",ceil_mode:i,count_include_pad:i", false, 0, op_AveragePool},
    U(GlobalAveragePool),
    U(GlobalMaxPool),
};
const int onnx_ops_conv_n = (int)(sizeof onnx_ops_conv / sizeof *onnx_ops_conv);

#endif
