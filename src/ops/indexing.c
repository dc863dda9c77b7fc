/*
 * indexing.c - NumPy/PyTorch indexing (x[...] and x[...] = v) as
 * compositions of primitives, plus nonzero.
 *
 * Basic entries (integers, slices, None, Ellipsis) become views: select,
 * slice, unsqueeze. Tensor entries are "advanced" indices: integer tensors
 * (broadcast together) or bool masks (expanded to one integer index per
 * masked dim by nonzero). The advanced dims are gathered in one
 * index_select on a linearised index:
 *
 *   permute the advanced dims to the front, reshape them into one dim,
 *   index_select with L = sum_j wrap(I_j) * (product of later sizes),
 *   reshape to (broadcast shape, other dims)
 *
 * and, as in NumPy, the broadcast dims stay where the advanced indices were
 * when those are adjacent, and go first otherwise. Everything is made of
 * differentiable primitives, so indexing has gradients and is captured by
 * the static graph like any composite. Assignment writes through the basic
 * view (copy_), or for advanced indices scatters into a copy of the view
 * and copies that back.
 */
#include "op.h"

typedef struct {
    musa_tensor *v; /* the basic view so far (owned) */
    int nadv;
    int adv_dim[MUSA_MAX_DIMS];      /* positions in v */
    musa_tensor *adv[MUSA_MAX_DIMS]; /* integer index tensors (owned) */
} ix_state;

static void ix_free(ix_state *s) {
    musa_tensor_release(s->v);
    for (int i = 0; i < s->nadv; i++) musa_tensor_release(s->adv[i]);
}

static int consumed(const musa_index_entry *e) {
    switch (e->kind) {
    case MUSA_INDEX_INT:
    case MUSA_INDEX_SLICE:
        return 1;
    case MUSA_INDEX_TENSOR:
        return e->tensor && e->tensor->dtype == MUSA_DTYPE_BOOL
                   ? (e->tensor->ndim ? e->tensor->ndim : 0)
                   : 1;
    default:
        return 0;
    }
}

musa_tensor *musa_nonzero(musa_tensor *x) {
    if (!x) return NULL;
    if (!x->storage) {
        musa_err(MUSA_ERR_NOT_IMPLEMENTED,
                 "[nonzero] the output shape depends on the values: not traceable");
        return NULL;
    }
    if (musa_tls.recorder && musa_tls.mode != MUSA_MODE_EAGER && musa_record_refuse_hook)
        musa_record_refuse_hook(musa_tls.recorder,
                                "nonzero (or boolean-mask indexing), whose output shape depends "
                                "on the values,");
    musa_tensor *b;
    if (x->dtype == MUSA_DTYPE_BOOL) {
        b = musa_contiguous(x);
    } else {
        musa_tensor *z = musa_scalar(0, (musa_dtype)x->dtype), *ne = z ? musa_ne(x, z) : NULL;
        b = ne ? musa_contiguous(ne) : NULL;
        musa_tensor_release(z);
        musa_tensor_release(ne);
    }
    if (!b) return NULL;
    const uint8_t *m = musa_tensor_data(b);
    int64_t count = 0;
    for (int64_t i = 0; i < b->numel; i++) count += m[i] != 0;
    int nd = x->ndim;
    musa_tensor *r = musa_tensor_alloc(MUSA_DTYPE_INT64, 2, (int64_t[]){count, nd});
    if (r) {
        int64_t *o = musa_tensor_data(r), idx[MUSA_MAX_DIMS] = {0};
        for (int64_t i = 0; i < b->numel; i++) {
            if (m[i])
                for (int d = 0; d < nd; d++) *o++ = idx[d];
            for (int d = nd - 1; d >= 0; d--) { /* next multi-index */
                if (++idx[d] < x->shape[d]) break;
                idx[d] = 0;
            }
        }
    }
    musa_tensor_release(b);
    return r;
}

/* Apply the entries: basic ones to s->v, advanced ones recorded. */
static int ix_apply(const char *who, musa_tensor *x, int n, const musa_index_entry *idx,
                    ix_state *s) {
    int want = 0, ellipses = 0;
    for (int i = 0; i < n; i++) {
        want += consumed(&idx[i]);
        ellipses += idx[i].kind == MUSA_INDEX_ELLIPSIS;
    }
    if (ellipses > 1)
        return musa_err(MUSA_ERR_INDEX, "[%s] an index can only have a single ellipsis ('...')",
                        who);
    if (want > x->ndim)
        return musa_err(MUSA_ERR_INDEX, "[%s] too many indices for tensor of dimension %d (got %d)",
                        who, x->ndim, want);
    bool any_adv = false; /* then a bool scalar is an advanced index too, as in NumPy */
    for (int i = 0; i < n; i++)
        any_adv |= idx[i].kind == MUSA_INDEX_TENSOR && idx[i].tensor &&
                   (idx[i].tensor->ndim > 0 || idx[i].tensor->dtype != MUSA_DTYPE_BOOL);
    s->v = musa_tensor_retain(x);
    int d = 0;
    for (int i = 0; i < n; i++) {
        const musa_index_entry *e = &idx[i];
        musa_tensor *nv = NULL;
        bool flag = e->start != 0;
        if (e->kind == MUSA_INDEX_TENSOR && e->tensor && e->tensor->dtype == MUSA_DTYPE_BOOL &&
            e->tensor->ndim == 0) {
            /* a 0-d bool tensor indexes as the Python bool it holds */
            int64_t b;
            if (!e->tensor->storage)
                return musa_err(MUSA_ERR_NOT_IMPLEMENTED,
                                "[%s] a 0-d bool index needs its value: not traceable", who);
            if (musa_tls.recorder && musa_tls.mode != MUSA_MODE_EAGER && musa_record_refuse_hook)
                musa_record_refuse_hook(musa_tls.recorder, "a 0-d bool tensor used as an index");
            if (musa_tensor_item_int(e->tensor, &b)) return musa_last_error_code();
            flag = b != 0;
        } else if (e->kind != MUSA_INDEX_BOOL) {
            flag = false;
        }
        if (e->kind == MUSA_INDEX_BOOL ||
            (e->kind == MUSA_INDEX_TENSOR && e->tensor && e->tensor->dtype == MUSA_DTYPE_BOOL &&
             e->tensor->ndim == 0)) {
            /* a new dim of size 1 (true) or 0 (false); beside tensor indices
             * it is the advanced index [0] or [] on that new dim instead, so
             * it broadcasts with them (a[[0], False] is empty, a[True, mask]
             * has the mask's count) */
            musa_tensor *u = musa_unsqueeze(s->v, d);
            if (!u) return musa_last_error_code();
            if (any_adv) {
                s->adv_dim[s->nadv] = d++;
                s->adv[s->nadv++] = musa_zeros(1, (int64_t[]){flag ? 1 : 0}, MUSA_DTYPE_INT64);
                musa_tensor_release(s->v);
                s->v = u;
                if (!s->adv[s->nadv - 1]) return musa_last_error_code();
                continue;
            }
            nv = flag ? musa_tensor_retain(u) : musa_slice(u, d, 0, 0, 1);
            musa_tensor_release(u);
            d++;
            if (!nv) return musa_last_error_code();
            musa_tensor_release(s->v);
            s->v = nv;
            continue;
        }
        switch (e->kind) {
        case MUSA_INDEX_NONE:
            nv = musa_unsqueeze(s->v, d++);
            break;
        case MUSA_INDEX_ELLIPSIS:
            d += x->ndim - want;
            continue;
        case MUSA_INDEX_INT: {
            int64_t size = s->v->shape[d], k = e->start;
            if (k < -size || k >= size)
                return musa_err(MUSA_ERR_INDEX,
                                "[%s] index %lld is out of bounds for dimension %d with size %lld",
                                who, (long long)k, d, (long long)size);
            nv = musa_select(s->v, d, k);
            break;
        }
        case MUSA_INDEX_SLICE:
            if (e->step <= 0)
                return musa_err(MUSA_ERR_VALUE, "[%s] slice step must be greater than zero", who);
            nv = musa_slice(s->v, d++, e->start, e->stop, e->step);
            break;
        case MUSA_INDEX_TENSOR: {
            musa_tensor *t = e->tensor;
            if (!t) return musa_err(MUSA_ERR_VALUE, "[%s] index tensor %d is NULL", who, i);
            if (t->dtype == MUSA_DTYPE_BOOL) {
                for (int k = 0; k < t->ndim; k++)
                    if (t->shape[k] != s->v->shape[d + k])
                        return musa_err(
                            MUSA_ERR_INDEX,
                            "[%s] the mask's size %lld at its dim %d does not match the indexed "
                            "tensor's size %lld at dim %d",
                            who, (long long)t->shape[k], k, (long long)s->v->shape[d + k], d + k);
                musa_tensor *nz = musa_nonzero(t);
                if (!nz) return musa_last_error_code();
                for (int k = 0; k < t->ndim; k++) {
                    s->adv_dim[s->nadv] = d + k;
                    s->adv[s->nadv++] = musa_select(nz, 1, k);
                    if (!s->adv[s->nadv - 1]) {
                        musa_tensor_release(nz);
                        return musa_last_error_code();
                    }
                }
                musa_tensor_release(nz);
                d += t->ndim;
                continue;
            }
            if (musa_is_float((musa_dtype)t->dtype))
                return musa_err(MUSA_ERR_INDEX,
                                "[%s] tensors used as indices must be integer or bool, got %s", who,
                                musa_dtype_name((musa_dtype)t->dtype));
            s->adv_dim[s->nadv] = d++;
            s->adv[s->nadv++] = musa_cast(t, MUSA_DTYPE_INT64);
            if (!s->adv[s->nadv - 1]) return musa_last_error_code();
            continue;
        }
        default:
            return musa_err(MUSA_ERR_VALUE, "[%s] bad index entry kind %d", who, e->kind);
        }
        if (!nv) return musa_last_error_code();
        musa_tensor_release(s->v);
        s->v = nv;
    }
    return MUSA_OK;
}

/* The advanced part: the view permuted and flattened ((P, rest...)), and
 * the linear index L of the broadcast shape B. */
typedef struct {
    musa_tensor *p;    /* v with the advanced dims first (a view) */
    musa_tensor *flat; /* p reshaped to (P, rest...) */
    musa_tensor *lin;  /* (numel(B)) int64 */
    int nb;
    int64_t bshape[MUSA_MAX_DIMS];
    int nrest;
    int64_t rest[MUSA_MAX_DIMS];
    int front; /* where the B dims go in the result (0: first) */
} adv_plan;

static int adv_prepare(const char *who, ix_state *s, adv_plan *a, musa_temps *t) {
    musa_tensor *v = s->v;
    /* broadcast the index shapes */
    a->nb = 0;
    for (int j = 0; j < s->nadv; j++)
        if (musa_broadcast_shape(who, a->nb, a->bshape, s->adv[j]->ndim, s->adv[j]->shape, &a->nb,
                                 a->bshape)) {
            char s1[128], s2[128];
            return musa_err(MUSA_ERR_INDEX,
                            "[%s] shape mismatch: indexing tensors could not be broadcast together "
                            "with shapes %s and %s",
                            who, musa_shape_str(a->nb, a->bshape, s1, sizeof s1),
                            musa_shape_str(s->adv[j]->ndim, s->adv[j]->shape, s2, sizeof s2));
        }
    /* check bounds and wrap negatives, then combine into L */
    musa_tensor *lin = NULL;
    for (int j = 0; j < s->nadv; j++) {
        int64_t size = v->shape[s->adv_dim[j]];
        musa_tensor *ij = s->adv[j];
        if (ij->numel) {
            musa_tensor *mn = musa_tmp(t, musa_amin(ij, 0, NULL, false));
            musa_tensor *mx = musa_tmp(t, musa_amax(ij, 0, NULL, false));
            int64_t lo, hi;
            if (musa_tensor_item_int(mn, &lo) || musa_tensor_item_int(mx, &hi))
                return musa_last_error_code();
            if (lo < -size || hi >= size)
                return musa_err(MUSA_ERR_INDEX,
                                "[%s] index %lld is out of bounds for dimension %d with size %lld",
                                who, (long long)(lo < -size ? lo : hi), s->adv_dim[j],
                                (long long)size);
        }
        musa_tensor *w =
            musa_tmp(t, musa_remainder(ij, musa_tmp(t, musa_number_int(size ? size : 1))));
        if (lin) {
            lin = musa_tmp(t, musa_mul(lin, musa_tmp(t, musa_number_int(size))));
            lin = musa_tmp(t, musa_add(lin, w));
        } else {
            lin = w;
        }
        if (!lin) return musa_last_error_code();
    }
    musa_tensor *lb = musa_tmp(t, musa_broadcast_to(lin, a->nb, a->bshape));
    a->lin = musa_tmp(t, musa_reshape(lb, 1, (int64_t[]){-1}));
    /* permute the advanced dims first */
    int64_t order[MUSA_MAX_DIMS], P = 1;
    bool is_adv[MUSA_MAX_DIMS] = {false};
    for (int j = 0; j < s->nadv; j++) {
        order[j] = s->adv_dim[j];
        is_adv[s->adv_dim[j]] = true;
        P *= v->shape[s->adv_dim[j]];
    }
    int k = s->nadv;
    a->nrest = 0;
    for (int dd = 0; dd < v->ndim; dd++)
        if (!is_adv[dd]) {
            order[k++] = dd;
            a->rest[a->nrest++] = v->shape[dd];
        }
    a->p = musa_tmp(t, musa_permute(v, v->ndim, order));
    int64_t fs[MUSA_MAX_DIMS + 1];
    fs[0] = P;
    for (int i = 0; i < a->nrest; i++) fs[1 + i] = a->rest[i];
    a->flat = musa_tmp(t, musa_reshape(a->p, 1 + a->nrest, fs));
    /* adjacent advanced dims keep their place */
    bool adjacent = true;
    for (int j = 1; j < s->nadv; j++) adjacent = adjacent && s->adv_dim[j] == s->adv_dim[j - 1] + 1;
    a->front = adjacent ? s->adv_dim[0] : 0;
    return a->flat && a->lin ? MUSA_OK : musa_last_error_code();
}

/* Order of the result dims: (B, rest) -> rest[:front] B rest[front:]. */
static void result_order(const adv_plan *a, int64_t *order, bool inverse) {
    int nd = a->nb + a->nrest, k = 0;
    int64_t fwd[2 * MUSA_MAX_DIMS];
    for (int i = 0; i < a->front; i++) fwd[k++] = a->nb + i;
    for (int i = 0; i < a->nb; i++) fwd[k++] = i;
    for (int i = a->front; i < a->nrest; i++) fwd[k++] = a->nb + i;
    for (int i = 0; i < nd; i++) {
        if (inverse)
            order[fwd[i]] = i;
        else
            order[i] = fwd[i];
    }
}

musa_tensor *musa_index(musa_tensor *x, int n, const musa_index_entry *idx) {
    if (!x) return NULL;
    if (n < 0 || (n && !idx)) {
        musa_err(MUSA_ERR_VALUE, "[index] bad entry count %d", n);
        return NULL;
    }
    ix_state s = {0};
    musa_tensor *r = NULL;
    if (ix_apply("index", x, n, idx, &s)) goto done;
    if (!s.nadv) {
        r = musa_tensor_retain(s.v);
        goto done;
    }
    musa_temps t = {0};
    adv_plan a;
    if (!adv_prepare("index", &s, &a, &t)) {
        musa_tensor *g = musa_tmp(&t, musa_index_select(a.flat, 0, a.lin));
        int64_t shape[2 * MUSA_MAX_DIMS];
        int nd = a.nb + a.nrest;
        if (nd > MUSA_MAX_DIMS) {
            musa_err(MUSA_ERR_VALUE, "[index] the result would have %d dims (at most %d)", nd,
                     MUSA_MAX_DIMS);
        } else {
            for (int i = 0; i < a.nb; i++) shape[i] = a.bshape[i];
            for (int i = 0; i < a.nrest; i++) shape[a.nb + i] = a.rest[i];
            musa_tensor *g2 = musa_tmp(&t, musa_reshape(g, nd, shape));
            if (a.front) {
                int64_t order[MUSA_MAX_DIMS];
                result_order(&a, order, false);
                r = musa_permute(g2, nd, order);
            } else {
                r = musa_tensor_retain(g2);
            }
        }
    }
    musa_temps_release(&t);
done:
    ix_free(&s);
    return r;
}

int musa_index_put_(musa_tensor *x, int n, const musa_index_entry *idx, musa_tensor *value) {
    if (!x || !value) return x ? musa_last_error_code() : MUSA_ERR_VALUE;
    if (n < 0 || (n && !idx)) return musa_err(MUSA_ERR_VALUE, "[index_put_] bad entry count %d", n);
    ix_state s = {0};
    int rc = ix_apply("index_put_", x, n, idx, &s);
    if (!rc && !s.nadv) rc = musa_copy_(s.v, value);
    if (rc || !s.nadv) {
        ix_free(&s);
        return rc;
    }
    musa_temps t = {0};
    adv_plan a;
    rc = adv_prepare("index_put_", &s, &a, &t);
    if (!rc) {
        /* value in the result's layout -> (numel(B), rest...) rows */
        int nd = a.nb + a.nrest;
        int64_t shape[2 * MUSA_MAX_DIMS], order[MUSA_MAX_DIMS];
        result_order(&a, order, false);
        for (int i = 0; i < a.nb; i++) shape[i] = a.bshape[i];
        for (int i = 0; i < a.nrest; i++) shape[a.nb + i] = a.rest[i];
        int64_t res_shape[MUSA_MAX_DIMS];
        for (int i = 0; i < nd; i++) res_shape[i] = shape[order[i]];
        musa_tensor *vc = musa_tmp(&t, musa_cast(value, (musa_dtype)x->dtype));
        musa_tensor *vb = musa_tmp(&t, musa_broadcast_to(vc, nd, res_shape));
        int64_t inv[MUSA_MAX_DIMS];
        result_order(&a, inv, true);
        musa_tensor *vp = a.front ? musa_tmp(&t, musa_permute(vb, nd, inv)) : vb;
        int64_t rows[MUSA_MAX_DIMS + 1];
        rows[0] = a.lin ? a.lin->numel : 0;
        for (int i = 0; i < a.nrest; i++) rows[1 + i] = a.rest[i];
        musa_tensor *src = musa_tmp(&t, musa_reshape(vp, 1 + a.nrest, rows));
        /* the row index, expanded over the other dims */
        int64_t ls[MUSA_MAX_DIMS + 1];
        ls[0] = rows[0];
        for (int i = 0; i < a.nrest; i++) ls[1 + i] = 1;
        musa_tensor *li = musa_tmp(&t, musa_reshape(a.lin, 1 + a.nrest, ls));
        musa_tensor *le = musa_tmp(&t, musa_expand(li, 1 + a.nrest, rows));
        musa_tensor *upd = musa_tmp(&t, musa_scatter(a.flat, 0, le, src));
        musa_tensor *back = musa_tmp(&t, musa_reshape(upd, a.p->ndim, a.p->shape));
        rc = back ? musa_copy_(a.p, back) : musa_last_error_code();
    }
    musa_temps_release(&t);
    ix_free(&s);
    return rc;
}
