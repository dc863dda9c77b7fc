/*
 * onnx_ops_shape.c - ONNX ops: shapes, indexing, padding and constants
 * (onnx_ops.h says how the files of ops are written).
 */
#include "onnx_ops.h"

#ifdef MUSA_HAVE_ONNX

/* ---- shapes ---- */

static int op_Shape(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0];
    int64_t start = onnx_attr_int(n, "start", 0), end = onnx_attr_int(n, "end", x->ndim);
    if (start < 0) start += x->ndim;
    if (end < 0) end += x->ndim;
    start = start < 0 ? 0 : start > x->ndim ? x->ndim : start;
    end = end < start ? start : end > x->ndim ? x->ndim : end;
    int64_t len = end - start;
    return put(out, T(onnx_const(x->shape + start, 1, &len, MUSA_DTYPE_INT64)));
}

static int op_Size(ARGS) {
    UNUSED_ARGS;
    int64_t numel = musa_tensor_numel(in[0]);
    return put(out, T(onnx_const(&numel, 0, NULL, MUSA_DTYPE_INT64)));
}

static int op_Reshape(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0];
    int64_t shape[MUSA_MAX_DIMS];
    int k, rc;
    if (onnx_opset(b) < 5) return FAIL(MUSA_ERR_NOT_IMPLEMENTED, "Reshape before opset 5");
    if ((rc = onnx_ints(b, n, 1, in[1], shape, MUSA_MAX_DIMS, &k))) return rc;
    bool allowzero = onnx_attr_int(n, "allowzero", 0);
    for (int i = 0; i < k; i++)
        if (shape[i] == 0 && !allowzero) {
            if (i >= x->ndim)
                return FAIL(MUSA_ERR_VALUE,
                            "shape[%d] is 0 (copy the input's dim) but the input has %d dims", i,
                            x->ndim);
            shape[i] = x->shape[i];
        }
    return put(out, T(musa_reshape(x, k, shape)));
}

static int op_Flatten(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0];
    int64_t ax = onnx_attr_int(n, "axis", 1);
    if (ax < 0) ax += x->ndim;
    if (ax < 0 || ax > x->ndim)
        return FAIL(MUSA_ERR_INDEX, "axis %lld is out of range for %d dims",
                    (long long)onnx_attr_int(n, "axis", 1), x->ndim);
    int64_t shape[2] = {1, 1};
    for (int d = 0; d < x->ndim; d++) shape[d >= ax] *= x->shape[d];
    return put(out, T(musa_reshape(x, 2, shape)));
}

/* axes from the attribute (older opsets) or input 1 */
static int axes_of(onnx_build *b, const onnx_node *n, musa_tensor **in, int64_t *axes, int *k) {
    *k = 0;
    if (onnx_has_attr(n, "axes")) {
        *k = onnx_attr_ints(n, "axes", axes, MUSA_MAX_DIMS);
        return *k > MUSA_MAX_DIMS ? FAIL(MUSA_ERR_VALUE, "%d axes", *k) : MUSA_OK;
    }
    return n->n_in > 1 && in[1] ? onnx_ints(b, n, 1, in[1], axes, MUSA_MAX_DIMS, k) : MUSA_OK;
}

static int op_Squeeze(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0];
    int64_t axes[MUSA_MAX_DIMS];
    int k, rc = axes_of(b, n, in, axes, &k);
    if (rc) return rc;
    for (int i = 0; i < k; i++) {
        if ((rc = axis_of(b, n, axes[i], x->ndim, &axes[i]))) return rc;
        if (x->shape[axes[i]] != 1)
            return FAIL(MUSA_ERR_VALUE, "dim %lld has size %lld, not 1", (long long)axes[i],
                        (long long)x->shape[axes[i]]);
    }
    return put(out, T(musa_squeeze(x, k, axes)));
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int op_Unsqueeze(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0];
    int64_t axes[MUSA_MAX_DIMS];
    int k, rc = axes_of(b, n, in, axes, &k);
    if (rc) return rc;
    if (x->ndim + k > MUSA_MAX_DIMS)
        return FAIL(MUSA_ERR_VALUE, "%d dims and %d more exceed musa's %d", x->ndim, k,
                    MUSA_MAX_DIMS);
    for (int i = 0; i < k; i++)
        if ((rc = axis_of(b, n, axes[i], x->ndim + k, &axes[i]))) return rc;
    qsort(axes, (size_t)k, sizeof *axes, cmp_i64);
    for (int i = 0; i < k; i++) {
        if (i && axes[i] == axes[i - 1])
            return FAIL(MUSA_ERR_VALUE, "axis %lld is repeated", (long long)axes[i]);
        if (!(x = T(musa_unsqueeze(x, axes[i])))) return ERR;
    }
    return put(out, k ? x : T(musa_tensor_retain(x)));
}

static int op_Transpose(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0];
    int64_t perm[MUSA_MAX_DIMS];
    int k = onnx_attr_ints(n, "perm", perm, MUSA_MAX_DIMS);
    if (!k)
        for (int d = 0; d < x->ndim; d++) perm[d] = x->ndim - 1 - d;
    else if (k != x->ndim)
        return FAIL(MUSA_ERR_VALUE, "perm has %d entries for %d dims", k, x->ndim);
    return put(out, T(musa_permute(x, x->ndim, perm)));
}

static int op_Expand(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0];
    int64_t shape[MUSA_MAX_DIMS], xs[MUSA_MAX_DIMS], target[MUSA_MAX_DIMS];
    int k, rc = onnx_ints(b, n, 1, in[1], shape, MUSA_MAX_DIMS, &k);
    if (rc) return rc;
    int nd = k > x->ndim ? k : x->ndim;
    for (int d = 0; d < nd; d++) { /* numpy broadcasting of x's shape and `shape` */
        int64_t a = d < nd - x->ndim ? 1 : x->shape[d - (nd - x->ndim)];
        int64_t s = d < nd - k ? 1 : shape[d - (nd - k)];
        if (a != s && a != 1 && s != 1)
            return FAIL(MUSA_ERR_VALUE, "the input's dim of size %lld does not broadcast to %lld",
                        (long long)a, (long long)s);
        xs[d] = a, target[d] = s == 1 ? a : s;
    }
    LET(r, musa_reshape(x, nd, xs));
    return put(out, T(musa_expand(r, nd, target)));
}

static int op_Slice(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0];
    int64_t st[MUSA_MAX_DIMS], en[MUSA_MAX_DIMS], ax[MUSA_MAX_DIMS], sp[MUSA_MAX_DIMS];
    int ns, ne, na = 0, nsp = 0, rc;
    if (onnx_opset(b) < 10) {
        ns = onnx_attr_ints(n, "starts", st, MUSA_MAX_DIMS);
        ne = onnx_attr_ints(n, "ends", en, MUSA_MAX_DIMS);
        na = onnx_attr_ints(n, "axes", ax, MUSA_MAX_DIMS);
    } else if ((rc = onnx_ints(b, n, 1, in[1], st, MUSA_MAX_DIMS, &ns)) ||
               (rc = onnx_ints(b, n, 2, in[2], en, MUSA_MAX_DIMS, &ne)) ||
               (n->n_in > 3 && in[3] && (rc = onnx_ints(b, n, 3, in[3], ax, MUSA_MAX_DIMS, &na))) ||
               (n->n_in > 4 && in[4] &&
                (rc = onnx_ints(b, n, 4, in[4], sp, MUSA_MAX_DIMS, &nsp)))) {
        return rc;
    }
    if (ns != ne || ns > MUSA_MAX_DIMS || (na && na != ns) || (nsp && nsp != ns))
        return FAIL(MUSA_ERR_VALUE, "starts, ends, axes and steps have %d, %d, %d and %d values",
                    ns, ne, na, nsp);
    for (int i = 0; i < ns; i++) {
        int64_t a = na ? ax[i] : i, step = nsp ? sp[i] : 1;
        if ((rc = axis_of(b, n, a, x->ndim, &a))) return rc;
        if (!step) return FAIL(MUSA_ERR_VALUE, "step 0 on axis %lld", (long long)a);
        int64_t size = x->shape[a], s = st[i], e = en[i];
        if (step > 0) {
            if (!(x = T(musa_slice(x, a, s, e, step)))) return ERR;
            continue;
        }
        /* negative step: clamp as ONNX does, then slice the flipped dim */
        s = s < 0 ? (s < -size ? 0 : s + size) : (s > size - 1 ? size - 1 : s); /* [0, size-1] */
        e = e < 0 ? (e < -size ? -1 : e + size) : (e > size - 1 ? size - 1 : e);
        int64_t len = s > e ? s - e : 0;
        LET(f, musa_flip(x, 1, &a));
        if (!(x = T(musa_slice(f, a, size - 1 - s, size - 1 - s + len,
                               step == INT64_MIN ? INT64_MAX : -step))))
            return ERR;
    }
    return put(out, ns ? x : T(musa_tensor_retain(x)));
}

static int op_Gather(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0], *idx = in[1];
    int64_t ax = 0;
    int rc = axis_of(b, n, onnx_attr_int(n, "axis", 0), x->ndim, &ax);
    if (rc) return rc;
    if (musa_is_float((musa_dtype)idx->dtype) || idx->dtype == MUSA_DTYPE_BOOL)
        return FAIL(MUSA_ERR_TYPE, "indices are %s; integers are needed",
                    musa_dtype_name((musa_dtype)idx->dtype));
    if (!idx->ndim && onnx_known(b, 1)) { /* one index: a view */
        int64_t i;
        int cnt;
        if ((rc = onnx_ints(b, n, 1, idx, &i, 1, &cnt))) return rc;
        if (i < -x->shape[ax] || i >= x->shape[ax])
            return FAIL(MUSA_ERR_INDEX, "index %lld is out of range for a dim of size %lld",
                        (long long)i, (long long)x->shape[ax]);
        return put(out, T(musa_select(x, ax, i)));
    }
    if (x->ndim - 1 + idx->ndim > MUSA_MAX_DIMS)
        return FAIL(MUSA_ERR_VALUE, "the result would have more than %d dims", MUSA_MAX_DIMS);
    int64_t flat = musa_tensor_numel(idx), shape[MUSA_MAX_DIMS];
    LET(i64, idx->dtype == MUSA_DTYPE_INT64 ? musa_tensor_retain(idx)
                                            : musa_cast(idx, MUSA_DTYPE_INT64));
    LET(i1, musa_reshape(i64, 1, &flat));
    LET(sel, musa_index_select(x, ax, i1));
    int k = 0;
    for (int d = 0; d < ax; d++) shape[k++] = x->shape[d];
    for (int d = 0; d < idx->ndim; d++) shape[k++] = idx->shape[d];
    for (int d = (int)ax + 1; d < x->ndim; d++) shape[k++] = x->shape[d];
    return put(out, T(musa_reshape(sel, k, shape)));
}

/* index with negatives counted from the end of x's dim ax, as int64 */
static musa_tensor *wrap_index(onnx_build *b, musa_tensor *idx, int64_t size) {
    musa_tensor *i = idx->dtype == MUSA_DTYPE_INT64 ? idx : T(musa_cast(idx, MUSA_DTYPE_INT64));
    if (!i) return NULL;
    musa_tensor *neg = T(musa_lt(i, NUM(0.0)));
    return neg ? T(musa_where(neg, T(musa_add(i, T(musa_number_int(size)))), i)) : NULL;
}

static int op_GatherElements(ARGS) {
    UNUSED_ARGS;
    int64_t ax = 0;
    int rc = axis_of(b, n, onnx_attr_int(n, "axis", 0), in[0]->ndim, &ax);
    if (rc) return rc;
    HAVE(i, wrap_index(b, in[1], in[0]->shape[ax]));
    return put(out, T(musa_gather(in[0], ax, i)));
}

static int op_ScatterElements(ARGS) {
    UNUSED_ARGS;
    int64_t ax = 0;
    int rc = axis_of(b, n, onnx_attr_int(n, "axis", 0), in[0]->ndim, &ax);
    if (rc) return rc;
    const char *red = onnx_attr_str(n, "reduction", "none");
    if (strcmp(red, "none") && strcmp(red, "add"))
        return FAIL(MUSA_ERR_NOT_IMPLEMENTED, "reduction '%.20s'", red);
    HAVE(i, wrap_index(b, in[1], in[0]->shape[ax]));
    return put(out, T(red[0] == 'a' ? musa_scatter_add(in[0], ax, i, in[2])
                                    : musa_scatter(in[0], ax, i, in[2])));
}

static int op_Concat(ARGS) {
    UNUSED_ARGS;
    int64_t ax = 0; /* before opset 4 the axis could be left out: 1 */
    int rc = axis_of(b, n, onnx_attr_int(n, "axis", onnx_opset(b) < 4 ? 1 : 0), in[0]->ndim, &ax);
    if (rc) return rc;
    return put(out, T(musa_cat(n->n_in, in, ax)));
}

static int op_Split(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0];
    int64_t ax = 0, sizes[64];
    int k = 0, rc = axis_of(b, n, onnx_attr_int(n, "axis", 0), x->ndim, &ax);
    if (rc) return rc;
    if (onnx_has_attr(n, "split"))
        k = onnx_attr_ints(n, "split", sizes, 64);
    else if (n->n_in > 1 && in[1] && (rc = onnx_ints(b, n, 1, in[1], sizes, 64, &k)))
        return rc;
    if (!k) { /* equal pieces, the last smaller */
        int64_t parts = onnx_attr_int(n, "num_outputs", n_out), dim = x->shape[ax];
        if (parts != n_out)
            return FAIL(MUSA_ERR_VALUE, "num_outputs %lld for %d outputs", (long long)parts, n_out);
        int64_t each = (dim + parts - 1) / parts;
        for (k = 0; k < n_out; k++)
            sizes[k] = each * (k + 1) <= dim ? each : (dim > each * k ? dim - each * k : 0);
    }
    if (k != n_out) return FAIL(MUSA_ERR_VALUE, "%d split sizes for %d outputs", k, n_out);
    int64_t total = 0;
    for (int i = 0; i < k; i++) {
        if (sizes[i] < 0 || sizes[i] > x->shape[ax])
            return FAIL(MUSA_ERR_VALUE, "split size %lld for a dim of %lld", (long long)sizes[i],
                        (long long)x->shape[ax]);
        total += sizes[i];
    }
    if (total != x->shape[ax])
        return FAIL(MUSA_ERR_VALUE, "split sizes sum to %lld for a dim of %lld", (long long)total,
                    (long long)x->shape[ax]);
    for (int64_t i = 0, at = 0; i < k; at += sizes[i], i++)
        if ((rc = put(out + i, T(musa_slice(x, ax, at, at + sizes[i], 1))))) return rc;
    return MUSA_OK;
}

static int op_Tile(ARGS) {
    UNUSED_ARGS;
    int64_t reps[MUSA_MAX_DIMS];
    int k, rc = onnx_ints(b, n, 1, in[1], reps, MUSA_MAX_DIMS, &k);
    if (rc) return rc;
    if (k != in[0]->ndim)
        return FAIL(MUSA_ERR_VALUE, "repeats has %d values for %d dims", k, in[0]->ndim);
    return put(out, T(musa_repeat(in[0], k, reps)));
}

static int op_Pad(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0];
    int nd = x->ndim, k, rc;
    int64_t pads[2 * MUSA_MAX_DIMS], axes[MUSA_MAX_DIMS];
    double value = 0;
    if (onnx_opset(b) < 11) {
        k = onnx_attr_ints(n, "pads", pads, 2 * MUSA_MAX_DIMS);
        value = onnx_attr_float(n, "value", 0.0);
    } else {
        if ((rc = onnx_ints(b, n, 1, in[1], pads, 2 * MUSA_MAX_DIMS, &k))) return rc;
        int cnt = 0;
        if (n->n_in > 2 && in[2] && (rc = onnx_doubles(b, n, 2, in[2], &value, 1, &cnt))) return rc;
    }
    int na = 0;
    if (n->n_in > 3 && in[3] && (rc = onnx_ints(b, n, 3, in[3], axes, MUSA_MAX_DIMS, &na)))
        return rc;
    if (!na)
        for (int d = 0; d < nd; d++) axes[na++] = d;
    if (k != 2 * na) return FAIL(MUSA_ERR_VALUE, "pads has %d values for %d axes", k, na);
    int64_t full[2 * MUSA_MAX_DIMS] = {0}; /* begins then ends, per dim */
    for (int i = 0; i < na; i++) {
        int64_t a = 0;
        if ((rc = axis_of(b, n, axes[i], nd, &a))) return rc;
        full[a] = pads[i], full[nd + a] = pads[na + i];
    }
    const char *mode = onnx_attr_str(n, "mode", "constant");
    if (!strcmp(mode, "constant")) return put(out, onnx_pad_spatial(b, x, nd, full, value));
    bool reflect = !strcmp(mode, "reflect");
    if (!reflect && strcmp(mode, "edge"))
        return FAIL(MUSA_ERR_NOT_IMPLEMENTED, "mode '%.20s' (constant, reflect and edge are read)",
                    mode);
    for (int d = 0; d < nd; d++) { /* rows picked by index: reflected or repeated edges */
        int64_t lo = full[d], hi = full[nd + d], size = x->shape[d], len;
        if (!lo && !hi) continue;
        if (lo < 0 || hi < 0)
            return FAIL(MUSA_ERR_NOT_IMPLEMENTED, "negative pads with mode %s", mode);
        if (!musa_add_i64(size, lo, &len) || !musa_add_i64(len, hi, &len) ||
            len > ((int64_t)1 << 40))
            return FAIL(MUSA_ERR_VALUE, "pads %lld, %lld make a dim of more than 2^40",
                        (long long)lo, (long long)hi);
        if (!size || (reflect && (lo >= size || hi >= size)))
            return FAIL(MUSA_ERR_VALUE, "pads %lld, %lld on a dim of size %lld with mode %s",
                        (long long)lo, (long long)hi, (long long)size, mode);
        int64_t *ix = malloc(sizeof(int64_t) * (size_t)len);
        if (!ix) return musa_err_nomem("onnx Pad", (size_t)len * 8);
        for (int64_t i = 0; i < len; i++) {
            int64_t j = i - lo;
            if (reflect)
                j = j < 0 ? -j : j >= size ? 2 * (size - 1) - j : j;
            else
                j = j < 0 ? 0 : j >= size ? size - 1 : j;
            ix[i] = j;
        }
        musa_tensor *it = T(onnx_const(ix, 1, &len, MUSA_DTYPE_INT64));
        free(ix);
        if (!it || !(x = T(musa_index_select(x, d, it)))) return ERR;
    }
    return put(out, x == in[0] ? T(musa_tensor_retain(x)) : x);
}

static int op_Constant(ARGS) {
    UNUSED_ARGS;
    bool absent;
    musa_tensor *t = T(onnx_attr_tensor(b, n, "value", &absent));
    if (!absent) return put(out, t);
    if (onnx_has_attr(n, "value_float")) {
        float v = (float)onnx_attr_float(n, "value_float", 0);
        return put(out, T(onnx_const(&v, 0, NULL, MUSA_DTYPE_FLOAT32)));
    }
    if (onnx_has_attr(n, "value_int")) {
        int64_t v = onnx_attr_int(n, "value_int", 0);
        return put(out, T(onnx_const(&v, 0, NULL, MUSA_DTYPE_INT64)));
    }
    if (onnx_has_attr(n, "value_ints")) {
        int64_t cnt = onnx_attr_ints(n, "value_ints", NULL, 0);
        int64_t *v = malloc(sizeof(int64_t) * (size_t)(cnt + 1));
        if (!v) return musa_err_nomem("onnx Constant", 8 * (size_t)cnt);
        onnx_attr_ints(n, "value_ints", v, (int)cnt);
        int rc = put(out, T(onnx_const(v, 1, &cnt, MUSA_DTYPE_INT64)));
        free(v);
        return rc;
    }
    if (onnx_has_attr(n, "value_floats")) {
        int64_t cnt = onnx_attr_floats(n, "value_floats", NULL, 0);
        float *v = malloc(sizeof(float) * (size_t)(cnt + 1));
        if (!v) return musa_err_nomem("onnx Constant", 4 * (size_t)cnt);
        onnx_attr_floats(n, "value_floats", v, (int)cnt);
        int rc = put(out, T(onnx_const(v, 1, &cnt, MUSA_DTYPE_FLOAT32)));
        free(v);
        return rc;
    }
    return FAIL(MUSA_ERR_VALUE, "no value (value, value_float(s) or value_int(s)) is given");
}

static int op_ConstantOfShape(ARGS) {
    UNUSED_ARGS;
    int64_t shape[MUSA_MAX_DIMS];
    int k, rc = onnx_ints(b, n, 0, in[0], shape, MUSA_MAX_DIMS, &k);
    if (rc) return rc;
    for (int i = 0; i < k; i++)
        if (shape[i] < 0) return FAIL(MUSA_ERR_VALUE, "shape[%d] is %lld", i, (long long)shape[i]);
    bool absent;
    musa_tensor *v = T(onnx_attr_tensor(b, n, "value", &absent));
    if (!absent && !v) return ERR;
    if (v && musa_tensor_numel(v) != 1)
        return FAIL(MUSA_ERR_VALUE, "value holds %lld elements; one is needed",
                    (long long)musa_tensor_numel(v));
    double fill = 0;
    if (v) {
        LET(f, musa_cast(v, MUSA_DTYPE_FLOAT64));
        fill = *(const double *)musa_tensor_data(f);
    }
    return put(out, T(musa_full(k, shape, fill, v ? (musa_dtype)v->dtype : MUSA_DTYPE_FLOAT32)));
}

static int op_Range(ARGS) {
    UNUSED_ARGS;
    double v[3];
    for (int i = 0; i < 3; i++) {
        int cnt, rc = onnx_doubles(b, n, i, in[i], &v[i], 1, &cnt);
        if (rc) return rc;
        if (cnt != 1) return FAIL(MUSA_ERR_VALUE, "input %d must be a scalar", i);
    }
    if (v[2] == 0) return FAIL(MUSA_ERR_VALUE, "delta is 0");
    double count = ceil((v[1] - v[0]) / v[2]);
    if (count <= 0) {
        int64_t zero = 0;
        return put(out, T(musa_empty(1, &zero, (musa_dtype)in[0]->dtype)));
    }
    return put(out, T(musa_arange(v[0], v[1], v[2], (musa_dtype)in[0]->dtype)));
}

static int op_Trilu(ARGS) {
    UNUSED_ARGS;
    int64_t k = 0;
    int cnt, rc;
    if (n->n_in > 1 && in[1] && (rc = onnx_ints(b, n, 1, in[1], &k, 1, &cnt))) return rc;
    return put(out, T(onnx_attr_int(n, "upper", 1) ? musa_triu(in[0], k) : musa_tril(in[0], k)));
}

static int op_CumSum(ARGS) {
    UNUSED_ARGS;
    musa_tensor *x = in[0];
    int64_t ax = 0;
    int cnt, rc = onnx_ints(b, n, 1, in[1], &ax, 1, &cnt);
    if (rc || (rc = axis_of(b, n, ax, x->ndim, &ax))) return rc;
    bool rev = onnx_attr_int(n, "reverse", 0), excl = onnx_attr_int(n, "exclusive", 0);
    musa_tensor *s = rev ? T(musa_flip(x, 1, &ax)) : x;
    if (!s) return ERR;
    LET(y, musa_cumsum(s, ax));
    musa_tensor *r = excl ? T(musa_sub(y, s)) : y;
    if (r && rev) r = T(musa_flip(r, 1, &ax));
    if (r && r->dtype != x->dtype) r = T(musa_cast(r, (musa_dtype)x->dtype));
    return put(out, r);
}

static int op_TopK(ARGS) {
    UNUSED_ARGS;
    int64_t k = 0, ax = 0;
    int cnt, rc = onnx_ints(b, n, 1, in[1], &k, 1, &cnt);
    if (rc || (rc = axis_of(b, n, onnx_attr_int(n, "axis", -1), in[0]->ndim, &ax))) return rc;
    musa_tensor *v = NULL, *i = NULL;
    if ((rc = musa_topk(in[0], k, ax, onnx_attr_int(n, "largest", 1), &v, &i))) return rc;
    v = T(v), i = T(i);
    if (!v || !i) return ERR;
    if ((rc = put(out, v))) return rc;
    return n_out > 1 ? put(out + 1, i) : MUSA_OK;
}

/* ---- this file's rows of the op table ---- */

const onnx_op onnx_ops_shape[] = {
    {"Shape", 1, 1, 1, 1, "end:i,start:i", true, 0, op_Shape},
    {"Size", 1, 1, 1, 1, "", true, 0, op_Size},
    {"Reshape", 2, 2, 1, 1, "allowzero:i", false, 2, op_Reshape},
    {"Flatten", 1, 1, 1, 1, "axis:i", false, 0, op_Flatten},
    {"Squeeze", 1, 2, 1, 1, "axes:ints", false, 2, op_Squeeze},
    {"Unsqueeze", 1, 2, 1, 1, "axes:ints", false, 2, op_Unsqueeze},
    {"Transpose", 1, 1, 1, 1, "perm:ints", false, 0, op_Transpose},
    {"Expand", 2, 2, 1, 1, "", false, 2, op_Expand},
    {"Slice", 1, 5, 1, 1, "axes:ints,ends:ints,starts:ints", false, 30, op_Slice},
    {"Gather", 2, 2, 1, 1, "axis:i", false, 0, op_Gather},
    {"GatherElements", 2, 2, 1, 1, "axis:i", false, 0, op_GatherElements},
    {"ScatterElements", 3, 3, 1, 1, "axis:i,reduction:s", false, 0, op_ScatterElements},
    {"Concat", 1, -1, 1, 1, "axis:i", false, 0, op_Concat},
    {"Split", 1, 2, 1, 64, "axis:i,num_outputs:i,split:ints", false, 2, op_Split},
    {"Tile", 2, 2, 1, 1, "", false, 2, op_Tile},
    {"Pad", 1, 4, 1, 1, "mode:s,pads:ints,value:f", false, 14, op_Pad},
    {"Constant", 0, 0, 1, 1,
     "value:t,value_float:f,value_floats:floats,value_int:i,value_ints:ints", false, 0,
     op_Constant},
    {"ConstantOfShape", 1, 1, 1, 1, "value:t", false, 1, op_ConstantOfShape},
    {"Range", 3, 3, 1, 1, "", false, 7, op_Range},
    {"Trilu", 1, 2, 1, 1, "upper:i", false, 2, op_Trilu},
    {"CumSum", 2, 2, 1, 1, "exclusive:i,reverse:i", false, 2, op_CumSum},
    {"TopK", 2, 2, 1, 2, "axis:i,largest:i,sorted:i", false, 2, op_TopK},
};
const int onnx_ops_shape_n = (int)(sizeof onnx_ops_shape / sizeof *onnx_ops_shape);

#endif
