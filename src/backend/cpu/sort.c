/*
 * sort.c - stable sort and top-k along one dim.
 *
 * Each line along the dim is loaded into a key array in the workspace
 * (double for floats, int64 for integers, so comparisons are exact), and an
 * index array is merge-sorted by key: stable, O(n log n), and NaN sorts as
 * the largest value. Lines are sorted one after another.
 */
#include <math.h>

#include "elem.h"
#include "kernels.h"

typedef struct {
    const double *fk;
    const int64_t *ik;
    bool desc;
} sort_keys;

/* a before b? (strict, so equal keys keep input order) */
static inline bool before(const sort_keys *k, int64_t a, int64_t b) {
    if (k->fk) {
        double x = k->fk[a], y = k->fk[b];
        bool xn = x != x, yn = y != y;
        if (k->desc) return (xn && !yn) || x > y;
        return (!xn && yn) || x < y;
    }
    return k->desc ? k->ik[a] > k->ik[b] : k->ik[a] < k->ik[b];
}

static void merge_sort(const sort_keys *k, int64_t *idx, int64_t *tmp, int64_t n) {
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi) tmp[o++] = before(k, idx[j], idx[i]) ? idx[j++] : idx[i++];
            while (i < mid) tmp[o++] = idx[i++];
            while (j < hi) tmp[o++] = idx[j++];
        }
        memcpy(idx, tmp, sizeof(int64_t) * (size_t)n);
    }
}

MUSA_WS(ws_sort) {
    MUSA_UNUSED(out), MUSA_UNUSED(n_out), MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    int64_t n = 1; /* the longest dim bounds the line length for sort and topk alike */
    for (int d = 0; d < in[0].ndim; d++) n = in[0].shape[d] > n ? in[0].shape[d] : n;
    /* an expanded line of 2^62 elements: 24 bytes each wrapped to 0 bytes
     * (fuzz-py seed 5049, a store through NULL); too many is unallocatable */
    return musa_sat_mul_size((size_t)n, 3 * 8);
}

static int sort_lines(const musa_kctx *ctx, musa_kview *out, const musa_kview *x, int dim,
                      bool desc, int64_t k) {
    musa_dtype dt = (musa_dtype)x->dtype;
    size_t es = musa_dtype_info[dt].size;
    int64_t n = x->ndim ? x->shape[dim] : 1;
    int64_t xs = x->ndim ? x->strides[dim] : 0;
    int64_t vs = out[0].ndim ? out[0].strides[dim] : 0, is = out[1].ndim ? out[1].strides[dim] : 0;
    int64_t *idx = ctx->scratch, *tmp = idx + n;
    void *keys = tmp + n;
    bool fl = musa_is_float(dt);
    sort_keys sk = {fl ? keys : NULL, fl ? NULL : keys, desc};
    /* Lines: all dims but `dim`. */
    musa_kview xl = *x, vl = out[0], il = out[1];
    if (x->ndim) {
        for (int d = dim; d + 1 < x->ndim; d++) {
            xl.shape[d] = x->shape[d + 1], xl.strides[d] = x->strides[d + 1];
            vl.shape[d] = out[0].shape[d + 1], vl.strides[d] = out[0].strides[d + 1];
            il.shape[d] = out[1].shape[d + 1], il.strides[d] = out[1].strides[d + 1];
        }
        xl.ndim = vl.ndim = il.ndim = x->ndim - 1;
    }
    int64_t lines = musa_kview_numel(&xl);
    if (n == 0) return MUSA_OK;
    for (int64_t l = 0; l < lines; l++) {
        const char *px = xl.ndim ? musa_kview_elem(&xl, l, es) : xl.data;
        char *pv = vl.ndim ? musa_kview_elem(&vl, l, es) : vl.data;
        char *pi = il.ndim ? musa_kview_elem(&il, l, 8) : il.data;
        for (int64_t i = 0; i < n; i++) {
            const char *e = px + i * xs * (int64_t)es;
            if (fl)
                ((double *)keys)[i] = musa_load_f64(e, dt);
            else
                ((int64_t *)keys)[i] = musa_load_i64(e, dt);
            idx[i] = i;
        }
        merge_sort(&sk, idx, tmp, n);
        for (int64_t i = 0; i < k; i++) {
            memcpy(pv + i * vs * (int64_t)es, px + idx[i] * xs * (int64_t)es, es);
            *(int64_t *)(pi + i * is * 8) = idx[i];
        }
    }
    return MUSA_OK;
}

int cpu_sort(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
             const void *attrs) {
    MUSA_UNUSED(n_in);
    const musa_attrs_sort *a = attrs;
    int64_t n = in[0].ndim ? in[0].shape[a->dim] : 1;
    return sort_lines(ctx, out, &in[0], (int)a->dim, a->descending, n);
}

int cpu_topk(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
             const void *attrs) {
    MUSA_UNUSED(n_in);
    const musa_attrs_topk *a = attrs;
    return sort_lines(ctx, out, &in[0], (int)a->dim, a->largest, a->k);
}
