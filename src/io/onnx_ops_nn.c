/*
 * onnx_ops_nn.c - ONNX ops: Gemm, normalisations, softmax, losses, Resize,
 * LSTM and GRU (onnx_ops.h says how the files of ops are written).
 */
#include "onnx_ops.h"

#ifdef MUSA_HAVE_ONNX

/* ---- linear algebra and nn ---- */

static int op_Gemm(ARGS) {
    UNUSED_ARGS;
    musa_tensor *A = in[0], *B = in[1], *C = n->n_in > 2 ? in[2] : NULL;
    if (A->ndim != 2 || B->ndim != 2)
        return FAIL(MUSA_ERR_VALUE, "A and B must be matrices; they have %d and %d dims", A->ndim,
                    B->ndim);
    double alpha = onnx_attr_float(n, "alpha", 1.0), beta = onnx_attr_float(n, "beta", 1.0);
    bool ta = onnx_attr_int(n, "transA", 0), tb = onnx_attr_int(n, "transB", 0);
    if (ta && !(A = T(musa_transpose(A, 0, 1)))) return ERR;
    /* the usual layer: x W^T + b in one GEMM */
    if (tb && alpha == 1.0 && beta == 1.0 && (!C || (C->ndim == 1 && C->shape[0] == B->shape[0])))
        return put(out, T(musa_linear(A, B, C)));
    if (tb && !(B = T(musa_transpose(B, 0, 1)))) return ERR;
    LET(y, musa_matmul(A, B));
    if (alpha != 1.0 && !(y = T(musa_mul(y, NUM(alpha))))) return ERR;
    if (C && beta != 0.0) {
        musa_tensor *c = beta == 1.0 ? C : T(musa_mul(C, NUM(beta)));
        if (!c || !(y = T(musa_add(y, c)))) return ERR;
    }
    return put(out, y);
}

static int op_BatchNormalization(ARGS) {
    UNUSED_ARGS;
    if (onnx_attr_int(n, "training_mode", 0))
        return FAIL(MUSA_ERR_NOT_IMPLEMENTED, "training_mode=1 (the importer runs inference)");
    if (in[0]->ndim < 2)
        return FAIL(MUSA_ERR_VALUE, "the input has %d dims; at least 2 are needed", in[0]->ndim);
    return put(out, T(musa_batch_norm(in[0], in[3], in[4], in[1], in[2], false, 0.0,
                                      onnx_attr_float(n, "epsilon", 1e-5))));
}

static int op_InstanceNormalization(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0];
    if (x->ndim < 3)
        return FAIL(MUSA_ERR_VALUE, "the input has %d dims; at least 3 are needed", x->ndim);
    return put(
        out, T(musa_group_norm(x, x->shape[1], in[1], in[2], onnx_attr_float(n, "epsilon", 1e-5))));
}

static int op_LayerNormalization(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0], *w = in[1], *bias = n->n_in > 2 ? in[2] : NULL;
    int64_t ax = 0;
    int rc = axis_of(b, n, onnx_attr_int(n, "axis", -1), x->ndim, &ax);
    if (rc) return rc;
    double eps = onnx_attr_float(n, "epsilon", 1e-5);
    int k = x->ndim - (int)ax;
    const int64_t *tail = x->shape + ax;
    /* scale and bias broadcast to the normalised shape */
    if (!musa_shape_equal(w->ndim, w->shape, k, tail) && !(w = T(musa_expand(w, k, tail))))
        return ERR;
    if (bias && !musa_shape_equal(bias->ndim, bias->shape, k, tail) &&
        !(bias = T(musa_expand(bias, k, tail))))
        return ERR;
    if ((rc = put(out, T(musa_layer_norm(x, k, w, bias, eps))))) return rc;
    if (n_out < 2) return MUSA_OK;
    int64_t dims[MUSA_MAX_DIMS];
    for (int i = 0; i < k; i++) dims[i] = ax + i;
    LET(mean, musa_mean(x, k, dims, true));
    LET(dev, musa_sub(x, mean));
    LET(var, musa_mean(T(musa_mul(dev, dev)), k, dims, true));
    if ((rc = put(out + 1, mean))) return rc;
    return n_out > 2 ? put(out + 2, T(musa_rsqrt(T(musa_add(var, NUM(eps)))))) : MUSA_OK;
}

static int softmax(onnx_build *b, const onnx_node *n, musa_tensor **in, musa_tensor **out,
                   bool log) {
    musa_tensor *x = in[0];
    bool old = onnx_opset(b) < 13; /* before 13: over the 2-d view [:axis] x [axis:] */
    int64_t ax = 0;
    int rc = axis_of(b, n, onnx_attr_int(n, "axis", old ? 1 : -1), x->ndim, &ax);
    if (rc) return rc;
    if (!x->ndim) ax = 0;
    if (!old || ax == x->ndim - 1 || !x->ndim)
        return put(out, T(log ? musa_log_softmax(x, ax) : musa_softmax(x, ax)));
    int64_t lead = 1, shape2[2];
    for (int d = 0; d < ax; d++) lead *= x->shape[d];
    shape2[0] = lead, shape2[1] = lead ? musa_tensor_numel(x) / lead : 0;
    LET(x2, musa_reshape(x, 2, shape2));
    LET(y, log ? musa_log_softmax(x2, 1) : musa_softmax(x2, 1));
    return put(out, T(musa_reshape(y, x->ndim, x->shape)));
}
static int op_Softmax(ARGS) {
    UNUSED_ARGS;
    return softmax(b, n, in, out, false);
}
static int op_LogSoftmax(ARGS) {
    UNUSED_ARGS;
    return softmax(b, n, in, out, true);
}

static int op_Dropout(ARGS) {
    UNUSED_ARGS;
    if (n->n_in > 2 && in[2]) { /* training_mode: only a ratio of 0 keeps it deterministic */
        double t, ratio = onnx_attr_float(n, "ratio", 0.5);
        int cnt, rc = onnx_doubles(b, n, 2, in[2], &t, 1, &cnt);
        if (!rc && in[1]) rc = onnx_doubles(b, n, 1, in[1], &ratio, 1, &cnt);
        if (rc) return rc;
        if (t != 0 && ratio != 0)
            return FAIL(MUSA_ERR_NOT_IMPLEMENTED, "training_mode true with ratio %g (random masks)",
                        ratio);
    }
    int rc = put(out, T(musa_tensor_retain(in[0])));
    if (rc || n_out < 2) return rc;
    return put(out + 1, T(musa_full(in[0]->ndim, in[0]->shape, 1.0, MUSA_DTYPE_BOOL)));
}

static int op_Hardmax(ARGS) { /* 1 at the first maximum along axis */
    UNUSED_ARGS;
    musa_tensor *x = in[0];
    bool old = onnx_opset(b) < 13; /* before 13: over the 2-d view [:axis] x [axis:] */
    int64_t ax = 0;
    int rc = axis_of(b, n, onnx_attr_int(n, "axis", old ? 1 : -1), x->ndim, &ax);
    if (rc) return rc;
    musa_tensor *v = x;
    if (old && x->ndim) {
        int64_t lead = 1, shape2[2];
        for (int d = 0; d < ax; d++) lead *= x->shape[d]; /* dims were bounded by build_node */
        shape2[0] = lead, shape2[1] = lead ? musa_tensor_numel(x) / lead : 0;
        if (!(v = T(musa_reshape(x, 2, shape2)))) return ERR;
        ax = 1;
    }
    LET(i, musa_argmax(v, ax, true));
    LET(y, musa_scatter(T(musa_zeros_like(v)), ax, i, T(musa_ones_like(i))));
    return put(out, v == x ? y : T(musa_reshape(y, x->ndim, x->shape)));
}

static int op_MeanVarianceNormalization(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0];
    int64_t axes[MUSA_MAX_DIMS] = {0, 2, 3};
    int k = onnx_has_attr(n, "axes") ? onnx_attr_ints(n, "axes", axes, MUSA_MAX_DIMS) : 3, rc;
    if (k > MUSA_MAX_DIMS) return FAIL(MUSA_ERR_VALUE, "%d axes", k);
    for (int i = 0; i < k; i++)
        if ((rc = axis_of(b, n, axes[i], x->ndim, &axes[i]))) return rc;
    LET(mean, musa_mean(x, k, axes, true));
    LET(dev, musa_sub(x, mean));
    LET(var, musa_mean(T(musa_mul(dev, dev)), k, axes, true));
    return put(out, T(musa_div(dev, T(musa_sqrt(T(musa_add(var, NUM(1e-9))))))));
}

/* NegativeLogLikelihoodLoss of log-probabilities logp (N, C, d...) and
 * class indices (N, d...), with weight, ignore_index and reduction */
static int nll(onnx_build *b, const onnx_node *n, musa_tensor *logp, musa_tensor **in,
               musa_tensor **out) {
    musa_tensor *target = in[1], *weight = n->n_in > 2 ? in[2] : NULL;
    if (logp->ndim < 2 || target->ndim != logp->ndim - 1)
        return FAIL(MUSA_ERR_VALUE, "the input must be (N, C, ...) and the target (N, ...)");
    const char *red = onnx_attr_str(n, "reduction", "mean");
    if (strcmp(red, "mean") && strcmp(red, "sum") && strcmp(red, "none"))
        return FAIL(MUSA_ERR_VALUE, "reduction '%.20s' is not none, sum or mean", red);
    bool has_ign = onnx_has_attr(n, "ignore_index");
    musa_tensor *ign =
        has_ign ? T(musa_eq(target, T(musa_number_int(onnx_attr_int(n, "ignore_index", 0)))))
                : NULL;
    musa_tensor *safe = target;
    if (has_ign && (!ign || !(safe = T(musa_where(ign, T(musa_zeros_like(target)), target)))))
        return ERR;
    LET(safe64, musa_cast(safe, MUSA_DTYPE_INT64));
    LET(picked, musa_neg(T(musa_squeeze(T(musa_gather(logp, 1, T(musa_unsqueeze(safe64, 1)))), 1,
                                        (int64_t[]){1}))));
    musa_tensor *w;
    if (weight) {
        int64_t flat = musa_tensor_numel(safe64);
        w = T(musa_reshape(T(musa_index_select(weight, 0, T(musa_reshape(safe64, 1, &flat)))),
                           safe64->ndim, safe64->shape));
    } else {
        w = T(musa_ones_like(picked));
    }
    if (w && has_ign) w = T(musa_where(ign, T(musa_zeros_like(w)), w));
    if (!w) return ERR;
    LET(loss, musa_mul(picked, w));
    if (red[0] == 'n') return put(out, loss);
    LET(total, musa_sum(loss, 0, NULL, false));
    return put(out, red[0] == 's' ? total : T(musa_div(total, T(musa_sum(w, 0, NULL, false)))));
}
static int op_NegativeLogLikelihoodLoss(ARGS) {
    UNUSED_ARGS;
    return nll(b, n, in[0], in, out);
}
static int op_SoftmaxCrossEntropyLoss(ARGS) {
    UNUSED_ARGS;
    if (in[0]->ndim < 2) return FAIL(MUSA_ERR_VALUE, "the scores must be (N, C, ...)");
    LET(logp, musa_log_softmax(in[0], 1));
    int rc = nll(b, n, logp, in, out);
    return rc || n_out < 2 ? rc : put(out + 1, logp);
}

static int op_OneHot(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0], *values = in[2];
    double depth, vals[2];
    int cnt, rc = onnx_doubles(b, n, 1, in[1], &depth, 1, &cnt);
    if (rc) return rc;
    if (!(depth >= 1) || depth > (double)(1 << 24))
        return FAIL(MUSA_ERR_VALUE, "depth %g must be in [1, 2^16]", depth);
    if (musa_tensor_numel(values) != 2) return FAIL(MUSA_ERR_VALUE, "values must hold (off, on)");
    if (x->ndim + 1 > MUSA_MAX_DIMS) return FAIL(MUSA_ERR_VALUE, "too many dims");
    int64_t d = (int64_t)depth, ax = 0;
    if ((rc = axis_of(b, n, onnx_attr_int(n, "axis", -1), x->ndim + 1, &ax))) return rc;
    (void)vals;
    LET(x64, musa_cast(x, MUSA_DTYPE_INT64));
    LET(idx, musa_where(T(musa_lt(x64, NUM(0.0))), T(musa_add(x64, T(musa_number_int(d)))), x64));
    /* out-of-range indices give all "off" (ONNX): a row of one_hot(depth + 1), the extra dropped */
    LET(okay, musa_logical_and(T(musa_ge(idx, NUM(0.0))), T(musa_lt(idx, T(musa_number_int(d))))));
    LET(cls, musa_where(okay, idx, T(musa_full_like(idx, (double)d))));
    LET(oh, musa_slice(T(musa_one_hot(cls, d + 1)), x->ndim, 0, d, 1));
    int64_t perm[MUSA_MAX_DIMS];
    for (int i = 0, k = 0; i <= x->ndim; i++) perm[i] = i == ax ? x->ndim : k++;
    LET(moved, musa_permute(oh, x->ndim + 1, perm));
    LET(off, musa_select(values, 0, 0));
    LET(on, musa_select(values, 0, 1));
    return put(out, T(musa_where(T(musa_eq(moved, NUM(1.0))), on, off)));
}

static int depth_space(onnx_build *b, const onnx_node *n, musa_tensor **in, musa_tensor **out,
                       bool to_depth) {
    musa_tensor *x = in[0];
    int64_t bs = onnx_attr_int(n, "blocksize", 0);
    if (x->ndim != 4 || bs < 1 || bs > GEOM_MAX)
        return FAIL(MUSA_ERR_VALUE, "a 4-d input and a blocksize in [1, 2^16] are needed");
    int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3], big;
    if (!musa_mul_i64(C, bs * bs, &big) || !musa_mul_i64(H, bs, &big) || !musa_mul_i64(W, bs, &big))
        return FAIL(MUSA_ERR_VALUE, "blocksize %lld overflows the dims", (long long)bs);
    if (to_depth) {
        if (H % bs || W % bs) return FAIL(MUSA_ERR_VALUE, "H and W must divide by blocksize");
        int64_t s6[6] = {N, C, H / bs, bs, W / bs, bs}, p[6] = {0, 3, 5, 1, 2, 4};
        int64_t s4[4] = {N, C * bs * bs, H / bs, W / bs};
        return put(out, T(musa_reshape(T(musa_permute(T(musa_reshape(x, 6, s6)), 6, p)), 4, s4)));
    }
    if (C % (bs * bs)) return FAIL(MUSA_ERR_VALUE, "C must divide by blocksize^2");
    bool dcr = !strcmp(onnx_attr_str(n, "mode", "DCR"), "DCR");
    int64_t c = C / (bs * bs), s4[4] = {N, c, H * bs, W * bs};
    int64_t dcr6[6] = {N, bs, bs, c, H, W}, crd6[6] = {N, c, bs, bs, H, W};
    int64_t dcrp[6] = {0, 3, 4, 1, 5, 2}, crdp[6] = {0, 1, 4, 2, 5, 3};
    LET(r, musa_reshape(x, 6, dcr ? dcr6 : crd6));
    return put(out, T(musa_reshape(T(musa_permute(r, 6, dcr ? dcrp : crdp)), 4, s4)));
}
static int op_DepthToSpace(ARGS) {
    UNUSED_ARGS;
    return depth_space(b, n, in, out, false);
}
static int op_SpaceToDepth(ARGS) {
    UNUSED_ARGS;
    return depth_space(b, n, in, out, true);
}

/* ---- Resize (nearest, linear, cubic) ---- */

static int op_Resize(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0];
    int nd = x->ndim, rc, cnt = 0;
    const char *mode = onnx_attr_str(n, "mode", "nearest");
    bool v10 = onnx_opset(b) < 11; /* Resize-10 is Upsample's: asymmetric, nearest by floor */
    const char *ctm =
        onnx_attr_str(n, "coordinate_transformation_mode", v10 ? "asymmetric" : "half_pixel");
    const char *nearest = onnx_attr_str(n, "nearest_mode", v10 ? "floor" : "round_prefer_floor");
    if (strcmp(mode, "nearest") && strcmp(mode, "linear") && strcmp(mode, "cubic"))
        return FAIL(MUSA_ERR_VALUE, "mode '%.20s' is not nearest, linear or cubic", mode);
    if (onnx_attr_int(n, "antialias", 0) || !strcmp(ctm, "tf_crop_and_resize"))
        return FAIL(MUSA_ERR_NOT_IMPLEMENTED, "antialias or tf_crop_and_resize");
    static const char *const cmodes[] = {"half_pixel", "pytorch_half_pixel", "align_corners",
                                         "asymmetric", "tf_half_pixel_for_nn"};
    int cmode = 0; /* the coordinate transformation, by its index in cmodes */
    while (cmode < 5 && strcmp(ctm, cmodes[cmode])) cmode++;
    if (cmode == 5)
        return FAIL(MUSA_ERR_NOT_IMPLEMENTED, "coordinate_transformation_mode '%.30s'", ctm);
    if (strcmp(onnx_attr_str(n, "keep_aspect_ratio_policy", "stretch"), "stretch"))
        return FAIL(MUSA_ERR_NOT_IMPLEMENTED, "keep_aspect_ratio_policy other than stretch");
    double scale[MUSA_MAX_DIMS];
    int64_t size[MUSA_MAX_DIMS], axes[MUSA_MAX_DIMS];
    int na = onnx_attr_ints(n, "axes", axes, MUSA_MAX_DIMS);
    if (na > nd) return FAIL(MUSA_ERR_VALUE, "%d axes for %d dims", na, nd);
    if (!na)
        for (int d = 0; d < nd; d++) axes[na++] = d;
    for (int i = 0; i < na; i++)
        if ((rc = axis_of(b, n, axes[i], nd, &axes[i]))) return rc;
    for (int d = 0; d < nd; d++) scale[d] = 1, size[d] = x->shape[d];
    int si = onnx_opset(b) < 11 ? 1 : 2; /* scales' input */
    double sv[MUSA_MAX_DIMS];
    int64_t zv[MUSA_MAX_DIMS];
    if (n->n_in > 3 && in[3] && musa_tensor_numel(in[3])) {
        if ((rc = onnx_ints(b, n, 3, in[3], zv, MUSA_MAX_DIMS, &cnt))) return rc;
        if (cnt != na) return FAIL(MUSA_ERR_VALUE, "sizes has %d values for %d axes", cnt, na);
        for (int i = 0; i < na; i++) {
            if (zv[i] < 0) return FAIL(MUSA_ERR_VALUE, "sizes[%d] is %lld", i, (long long)zv[i]);
            size[axes[i]] = zv[i];
            scale[axes[i]] = x->shape[axes[i]] ? (double)zv[i] / (double)x->shape[axes[i]] : 1;
        }
    } else if (n->n_in > si && in[si]) {
        if ((rc = onnx_doubles(b, n, si, in[si], sv, MUSA_MAX_DIMS, &cnt))) return rc;
        if (cnt != na) return FAIL(MUSA_ERR_VALUE, "scales has %d values for %d axes", cnt, na);
        for (int i = 0; i < na; i++) {
            if (!(sv[i] > 0) || sv[i] > 1e6)
                return FAIL(MUSA_ERR_VALUE, "scales[%d] is %g", i, sv[i]);
            scale[axes[i]] = sv[i];
            size[axes[i]] = (int64_t)floor((double)x->shape[axes[i]] * sv[i]);
        }
    } else {
        return FAIL(MUSA_ERR_VALUE, "neither scales nor sizes is given");
    }
    int64_t total = (int64_t)musa_dtype_size((musa_dtype)x->dtype); /* the result's bytes */
    for (int d = 0; d < nd; d++)
        if (!musa_mul_i64(total, size[d], &total) || total > ((int64_t)1 << 46))
            return FAIL(MUSA_ERR_VALUE, "the output dims ask for more than 2^46 bytes");
    for (int d = 0; d < nd; d++) {
        if (size[d] == x->shape[d] && scale[d] == 1.0) continue;
        int64_t in_size = x->shape[d], out_size = size[d];
        if (!in_size) return FAIL(MUSA_ERR_VALUE, "resizing an empty dim");
        if (out_size > ((int64_t)1 << 40))
            return FAIL(MUSA_ERR_VALUE, "an output dim of %lld", (long long)out_size);
        /* each output reads `taps` inputs (nearest 1, linear 2, cubic 4) with weights */
        int taps = mode[0] == 'n' ? 1 : mode[0] == 'l' ? 2 : 4;
        size_t cnt = (size_t)out_size * (size_t)taps + 1;
        int64_t *ix = malloc(sizeof(int64_t) * cnt);
        float *w = malloc(sizeof(float) * cnt);
        if (!ix || !w) {
            free(ix), free(w);
            return musa_err_nomem("onnx Resize", cnt * 12);
        }
        double A = onnx_attr_float(n, "cubic_coeff_a", -0.75);
        bool exclude = onnx_attr_int(n, "exclude_outside", 0);
        for (int64_t o = 0; o < out_size; o++) { /* the source coordinate of output o */
            double s = scale[d], c;
            switch (cmode) {
            case 0:
                c = ((double)o + 0.5) / s - 0.5;
                break;
            case 1:
                c = out_size > 1 ? ((double)o + 0.5) / s - 0.5 : 0;
                break;
            case 2:
                c = out_size > 1 ? (double)o * (double)(in_size - 1) / ((double)in_size * s - 1)
                                 : 0;
                break;
            case 3:
                c = (double)o / s;
                break;
            default:
                c = ((double)o + 0.5) / s;
                break;
            }
            int64_t *oi = ix + o * taps;
            float *ow = w + o * taps;
            if (taps == 1) {
                double f = floor(c), r;
                if (!strcmp(nearest, "floor"))
                    r = f;
                else if (!strcmp(nearest, "ceil"))
                    r = ceil(c);
                else if (c == f + 0.5)
                    r = !strcmp(nearest, "round_prefer_ceil") ? f + 1 : f;
                else
                    r = round(c);
                oi[0] = r < 0 ? 0 : r > (double)(in_size - 1) ? in_size - 1 : (int64_t)r;
                ow[0] = 1;
            } else if (taps == 2) {
                c = c < 0 ? 0 : c > (double)(in_size - 1) ? (double)(in_size - 1) : c;
                oi[0] = (int64_t)floor(c);
                oi[1] = oi[0] + 1 < in_size ? oi[0] + 1 : in_size - 1;
                ow[1] = (float)(c - (double)oi[0]);
                ow[0] = 1 - ow[1];
            } else { /* Keys' cubic with coefficient A over taps floor(c) - 1 .. + 2 */
                double base = floor(c), t = c - base, ws[4], total = 0;
                for (int j = 0; j < 4; j++) {
                    double dd = fabs(t - (double)(j - 1)), tap = base + (double)(j - 1);
                    ws[j] = dd <= 1  ? ((A + 2) * dd - (A + 3)) * dd * dd + 1
                            : dd < 2 ? ((A * dd - 5 * A) * dd + 8 * A) * dd - 4 * A
                                     : 0;
                    if (exclude && (tap < 0 || tap > (double)(in_size - 1))) ws[j] = 0;
                    total += ws[j];
                    oi[j] = tap < 0 ? 0 : tap > (double)(in_size - 1) ? in_size - 1 : (int64_t)tap;
                }
                for (int j = 0; j < 4; j++)
                    ow[j] = (float)(exclude && total != 0 ? ws[j] / total : ws[j]);
            }
        }
        int64_t ishape[2] = {out_size, taps};
        musa_tensor *it = T(onnx_const(ix, 2, ishape, MUSA_DTYPE_INT64));
        musa_tensor *wt = T(onnx_const(w, 2, ishape, MUSA_DTYPE_FLOAT32));
        free(ix), free(w);
        if (!it || !wt) return ERR;
        musa_tensor *acc; /* nearest: the rows; else the sum over taps of rows times weights */
        if (taps == 1)
            acc = T(musa_index_select(x, d, T(musa_reshape(it, 1, &out_size))));
        else
            acc = T(musa_resample(x, d, it, wt));
        if (!acc) return ERR;
        x = acc;
    }
    return put(out, x == in[0] ? T(musa_tensor_retain(x)) : x);
}

/* ---- recurrent layers: LSTM and GRU ---- */

/* Check the recurrent attributes this importer reads: default activations,
 * no clipping, sequence_lens only of full length. */
static int check_recurrent(onnx_build *b, const onnx_node *n, musa_tensor **in, int64_t *dirs,
                           int64_t hidden) {
    const char *dir = onnx_attr_str(n, "direction", "forward");
    *dirs = !strcmp(dir, "bidirectional") ? 2 : 1;
    if (*dirs == 1 && strcmp(dir, "forward") && strcmp(dir, "reverse"))
        return FAIL(MUSA_ERR_VALUE, "direction '%.20s'", dir);
    if (onnx_has_attr(n, "activations") || onnx_has_attr(n, "clip") ||
        onnx_attr_int(n, "input_forget", 0))
        return FAIL(MUSA_ERR_NOT_IMPLEMENTED,
                    "activations, clip or input_forget (the C importer reads the defaults)");
    musa_tensor *x = in[0], *w = in[1];
    if (n->n_in > 4 && in[4]) { /* sequence_lens: read, and only full lengths run */
        int64_t lens[64];
        int cnt, rc = onnx_ints(b, n, 4, in[4], lens, 64, &cnt);
        int64_t seq = x->ndim == 3 ? x->shape[onnx_attr_int(n, "layout", 0) ? 1 : 0] : -1;
        for (int i = 0; !rc && i < cnt; i++)
            if (lens[i] != seq)
                return FAIL(MUSA_ERR_NOT_IMPLEMENTED,
                            "sequence_lens %lld shorter than the sequence (%lld): every sequence "
                            "runs to the end",
                            (long long)lens[i], (long long)seq);
        if (rc) return rc;
    }
    if (onnx_attr_int(n, "layout", 0) & ~1) return FAIL(MUSA_ERR_VALUE, "layout must be 0 or 1");
    if (x->ndim != 3 || w->ndim != 3 || w->shape[0] != *dirs || in[2]->ndim != 3)
        return FAIL(MUSA_ERR_VALUE,
                    "X must be (seq, batch, input), W and R (%lld, gates*hidden, ...)",
                    (long long)*dirs);
    if (onnx_attr_int(n, "hidden_size", hidden) != hidden)
        return FAIL(MUSA_ERR_VALUE, "hidden_size %lld does not match R's %lld",
                    (long long)onnx_attr_int(n, "hidden_size", hidden), (long long)hidden);
    return MUSA_OK;
}

/* slice i of the direction-first tensor t (dirs, ...) or NULL */
static musa_tensor *dir_of(onnx_build *b, musa_tensor *t, int64_t d) {
    return t ? T(musa_select(t, 0, d)) : NULL;
}

static int recurrent(onnx_build *b, const onnx_node *n, musa_tensor **in, int n_out,
                     musa_tensor **out, bool lstm) {
    int64_t gates = lstm ? 4 : 3, hidden = in[2]->ndim == 3 ? in[2]->shape[2] : 0, dirs;
    int rc = check_recurrent(b, n, in, &dirs, hidden);
    if (rc) return rc;
    /* layout 1 (batch first): the same on transposed views */
    bool bf = onnx_attr_int(n, "layout", 0);
    musa_tensor *x = bf ? T(musa_transpose(in[0], 0, 1)) : in[0];
    for (int i = 5; bf && i < 7 && i < n->n_in; i++)
        if (in[i] && !(in[i] = T(musa_transpose(in[i], 0, 1)))) return ERR;
    if (!x) return ERR;
    int64_t seq = x->shape[0], batch = x->shape[1];
    bool reverse = !strcmp(onnx_attr_str(n, "direction", "forward"), "reverse");
    bool lbr = onnx_attr_int(n, "linear_before_reset", 0);
    musa_tensor *ys[2] = {NULL, NULL}, *hs[2], *cs[2];
    for (int64_t d = 0; d < dirs; d++) {
        musa_tensor *W = dir_of(b, in[1], d), *R = dir_of(b, in[2], d);
        musa_tensor *B = n->n_in > 3 ? dir_of(b, in[3], d) : NULL;
        musa_tensor *h = n->n_in > 5 ? dir_of(b, in[5], d) : NULL;
        musa_tensor *c = lstm && n->n_in > 6 ? dir_of(b, in[6], d) : NULL;
        musa_tensor *P = lstm && n->n_in > 7 ? dir_of(b, in[7], d) : NULL; /* peepholes i, o, f */
        musa_tensor *pi = P ? T(musa_slice(P, 0, 0, hidden, 1)) : NULL;
        musa_tensor *po = P ? T(musa_slice(P, 0, hidden, 2 * hidden, 1)) : NULL;
        musa_tensor *pf = P ? T(musa_slice(P, 0, 2 * hidden, 3 * hidden, 1)) : NULL;
        if (P && (!pi || !po || !pf)) return ERR;
        if (!W || !R) return ERR;
        int64_t hb[2] = {batch, hidden};
        if (!h && !(h = T(musa_full(2, hb, 0.0, (musa_dtype)x->dtype)))) return ERR;
        if (lstm && !c && !(c = T(musa_full(2, hb, 0.0, (musa_dtype)x->dtype)))) return ERR;
        /* x W^T + Wb for all steps at once; R b added per step */
        musa_tensor *Wb = B ? T(musa_slice(B, 0, 0, gates * hidden, 1)) : NULL;
        musa_tensor *Rb = B ? T(musa_slice(B, 0, gates * hidden, 2 * gates * hidden, 1)) : NULL;
        LET(xw, musa_linear(x, W, Wb)); /* (seq, batch, gates*hidden) */
        musa_tensor **steps = calloc((size_t)seq + 1, sizeof *steps);
        if (!steps) return musa_err_nomem("onnx recurrent", 8 * (size_t)seq);
        rc = MUSA_OK;
        bool back = reverse || d == 1;
        for (int64_t s = 0; s < seq && !rc; s++) {
            int64_t t = back ? seq - 1 - s : s;
            musa_tensor *xt = T(musa_select(xw, 0, t));
            if (!xt) {
                rc = ERR;
                break;
            }
            if (lstm) { /* gates i, o, f, c */
                musa_tensor *g = T(musa_add(xt, T(musa_linear(h, R, Rb))));
                musa_tensor *ai = g ? T(musa_slice(g, 1, 0, hidden, 1)) : NULL;
                musa_tensor *ao = g ? T(musa_slice(g, 1, hidden, 2 * hidden, 1)) : NULL;
                musa_tensor *af = g ? T(musa_slice(g, 1, 2 * hidden, 3 * hidden, 1)) : NULL;
                musa_tensor *gc =
                    g ? T(musa_tanh(T(musa_slice(g, 1, 3 * hidden, 4 * hidden, 1)))) : NULL;
                if (P && ai && af) { /* the input and forget gates see the old cell */
                    ai = T(musa_add(ai, T(musa_mul(pi, c))));
                    af = T(musa_add(af, T(musa_mul(pf, c))));
                }
                musa_tensor *gi = ai ? T(musa_sigmoid(ai)) : NULL;
                musa_tensor *gf = af ? T(musa_sigmoid(af)) : NULL;
                if (!gi || !ao || !gf || !gc) {
                    rc = ERR;
                    break;
                }
                c = T(musa_add(T(musa_mul(gf, c)), T(musa_mul(gi, gc))));
                if (P && c) ao = T(musa_add(ao, T(musa_mul(po, c)))); /* the output gate, the new */
                musa_tensor *go = ao ? T(musa_sigmoid(ao)) : NULL;
                h = c && go ? T(musa_mul(go, T(musa_tanh(c)))) : NULL;
            } else { /* gates z, r, h */
                musa_tensor *hr = T(musa_linear(h, R, lbr ? Rb : NULL));
                if (!hr) {
                    rc = ERR;
                    break;
                }
                musa_tensor *xz = T(musa_slice(xt, 1, 0, hidden, 1)),
                            *xr = T(musa_slice(xt, 1, hidden, 2 * hidden, 1));
                musa_tensor *xh = T(musa_slice(xt, 1, 2 * hidden, 3 * hidden, 1));
                musa_tensor *hz = T(musa_slice(hr, 1, 0, hidden, 1)),
                            *hrr = T(musa_slice(hr, 1, hidden, 2 * hidden, 1));
                musa_tensor *hh = T(musa_slice(hr, 1, 2 * hidden, 3 * hidden, 1));
                if (!lbr && Rb && hz && hrr) { /* R b on z and r; on h inside the reset */
                    hz = T(musa_add(hz, T(musa_slice(Rb, 0, 0, hidden, 1))));
                    hrr = T(musa_add(hrr, T(musa_slice(Rb, 0, hidden, 2 * hidden, 1))));
                }
                musa_tensor *z = T(musa_sigmoid(T(musa_add(xz, hz))));
                musa_tensor *r = T(musa_sigmoid(T(musa_add(xr, hrr))));
                if (!z || !r || !xh || !hh) {
                    rc = ERR;
                    break;
                }
                musa_tensor *cand;
                if (lbr) {
                    cand = T(musa_tanh(T(musa_add(xh, T(musa_mul(r, hh))))));
                } else { /* (r * h) R_h^T + Rb_h */
                    musa_tensor *Rh = T(musa_slice(R, 0, 2 * hidden, 3 * hidden, 1));
                    musa_tensor *Rbh = Rb ? T(musa_slice(Rb, 0, 2 * hidden, 3 * hidden, 1)) : NULL;
                    cand = Rh ? T(musa_tanh(
                                    T(musa_add(xh, T(musa_linear(T(musa_mul(r, h)), Rh, Rbh))))))
                              : NULL;
                }
                if (!cand) {
                    rc = ERR;
                    break;
                }
                /* h = (1 - z) * cand + z * h */
                h = T(musa_add(T(musa_mul(T(musa_sub(NUM(1.0), z)), cand)), T(musa_mul(z, h))));
            }
            if (!h) {
                rc = ERR;
                break;
            }
            steps[t] = h;
        }
        musa_tensor *y = rc ? NULL : T(musa_stack((int)seq, steps, 0)); /* (seq, batch, hidden) */
        free(steps);
        if (rc || !y) return rc ? rc : ERR;
        ys[d] = y, hs[d] = h, cs[d] = c;
    }
    /* Y (seq, dirs, batch, hidden), Y_h and Y_c (dirs, batch, hidden); batch
     * first with layout 1: (batch, seq, dirs, hidden), (batch, dirs, hidden) */
    static const int64_t bf_y[4] = {2, 0, 1, 3};
    musa_tensor *y = n_out > 0 && n->out[0] >= 0 ? T(musa_stack((int)dirs, ys, 1)) : NULL;
    if (y && (rc = put(out, bf ? T(musa_permute(y, 4, bf_y)) : y))) return rc;
    musa_tensor **last[2] = {hs, cs};
    for (int j = 1; j < (lstm ? 3 : 2); j++)
        if (n_out > j && n->out[j] >= 0 &&
            (rc = put(out + j, T(musa_stack((int)dirs, last[j - 1], bf ? 1 : 0)))))
            return rc;
    return MUSA_OK;
}
static int op_LSTM(ARGS) {
    UNUSED_ARGS;
    return recurrent(b, n, in, n_out, out, true);
}
static int op_GRU(ARGS) {
    UNUSED_ARGS;
    return recurrent(b, n, in, n_out, out, false);
}

/* ---- this file's rows of the op table ---- */

const onnx_op onnx_ops_nn[] = {
    {"Hardmax", 1, 1, 1, 1, "axis:i", false, 0, op_Hardmax},
    {"MeanVarianceNormalization", 1, 1, 1, 1, "axes:ints", false, 0, op_MeanVarianceNormalization},
    {"NegativeLogLikelihoodLoss", 2, 3, 1, 1, "ignore_index:i,reduction:s", false, 0,
     op_NegativeLogLikelihoodLoss},
    {"SoftmaxCrossEntropyLoss", 2, 3, 1, 2, "ignore_index:i,reduction:s", false, 0,
     op_SoftmaxCrossEntropyLoss},
    {"OneHot", 3, 3, 1, 1, "axis:i", false, 2, op_OneHot},
    {"DepthToSpace", 1, 1, 1, 1, "blocksize:i,mode:s", false, 0, op_DepthToSpace},
    {"SpaceToDepth", 1, 1, 1, 1, "blocksize:i", false, 0, op_SpaceToDepth},
    {"Gemm", 2, 3, 1, 1, "alpha:f,beta:f,transA:i,transB:i", false, 0, op_Gemm},
    {"BatchNormalization", 5, 5, 1, 5, "epsilon:f,momentum:f,training_mode:i,spatial:i", false, 0,
     op_BatchNormalization},
    {"InstanceNormalization", 3, 3, 1, 1, "epsilon:f", false, 0, op_InstanceNormalization},
    {"LayerNormalization", 2, 3, 1, 3, "axis:i,epsilon:f,stash_type:i", false, 0,
     op_LayerNormalization},
    {"Softmax", 1, 1, 1, 1, "axis:i", false, 0, op_Softmax},
    {"LogSoftmax", 1, 1, 1, 1, "axis:i", false, 0, op_LogSoftmax},
    {"Dropout", 1, 3, 1, 2, "ratio:f,seed:i", false, 6, op_Dropout},
    {"Resize", 1, 4, 1, 1,
     "antialias:i,axes:ints,coordinate_transformation_mode:s,cubic_coeff_a:f,exclude_outside:i,"
     "extrapolation_value:f,keep_aspect_ratio_policy:s,mode:s,nearest_mode:s",
     false, 14, op_Resize},
    {"LSTM", 3, 8, 0, 3, RNN ",input_forget:i", false, 16, op_LSTM},
    {"GRU", 3, 6, 0, 2, RNN ",linear_before_reset:i", false, 16, op_GRU},
};
const int onnx_ops_nn_n = (int)(sizeof onnx_ops_nn / sizeof *onnx_ops_nn);

#endif
