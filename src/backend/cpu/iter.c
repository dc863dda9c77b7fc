/*
 * iter.c - the elementwise iterator (see iter.h).
 */
#include "iter.h"

#include "../../base/dtype.h"
#include "../../base/threadpool.h"

/* Fast path: every operand contiguous with the output's shape (or a single
 * element): one flat dim. */
static bool init_flat(musa_iter *it, const musa_kview *const *ops, int nops) {
    const musa_kview *o = ops[0];
    int64_t n = musa_kview_numel(o);
    for (int k = 0; k < nops; k++) {
        const musa_kview *v = ops[k];
        if (n != 1) {
            if (v->ndim != o->ndim || !musa_kview_contiguous(v)) return false;
            for (int d = 0; d < o->ndim; d++)
                if (v->shape[d] != o->shape[d]) return false;
        }
        it->data[k] = v->data;
        it->strides[0][k] = n == 1 ? 0 : (int64_t)musa_dtype_info[v->dtype].size;
    }
    it->nops = nops;
    it->ndim = 1;
    it->shape[0] = n;
    it->numel = n;
    return true;
}

void musa_iter_init(musa_iter *it, const musa_kview *const *ops, int nops) {
    if (musa_kview_empty(ops[0])) { /* nothing to visit; its other dims may be huge */
        it->nops = nops;
        it->ndim = 1;
        it->shape[0] = 0;
        it->numel = 0;
        for (int k = 0; k < nops; k++) it->data[k] = ops[k]->data, it->strides[0][k] = 0;
        return;
    }
    if (init_flat(it, ops, nops)) return;
    const musa_kview *o = ops[0];
    int nd = o->ndim;
    int64_t shape[MUSA_MAX_DIMS], st[MUSA_MAX_DIMS][MUSA_ITER_MAX_OPS];
    /* Gather byte strides per dim in output order, broadcasting inputs. */
    for (int d = 0; d < nd; d++) {
        shape[d] = o->shape[d];
        for (int k = 0; k < nops; k++) {
            const musa_kview *v = ops[k];
            int vd = d - (nd - v->ndim);
            int64_t es = (int64_t)musa_dtype_info[v->dtype].size;
            st[d][k] = (vd < 0 || v->shape[vd] == 1) ? 0 : v->strides[vd] * es;
        }
    }
    /* Drop size-1 dims, then order dims innermost-first by output stride
     * (insertion sort; ties keep C order). */
    int order[MUSA_MAX_DIMS], n = 0;
    for (int d = nd - 1; d >= 0; d--)
        if (shape[d] != 1) order[n++] = d;
    for (int i = 1; i < n; i++) {
        int cur = order[i], j = i;
        while (j > 0) {
            int prev = order[j - 1];
            int64_t a = st[cur][0] < 0 ? -st[cur][0] : st[cur][0];
            int64_t b = st[prev][0] < 0 ? -st[prev][0] : st[prev][0];
            if (a >= b) break;
            order[j] = prev;
            j--;
        }
        order[j] = cur;
    }
    it->nops = nops;
    it->numel = 1;
    for (int k = 0; k < nops; k++) it->data[k] = ops[k]->data;
    it->ndim = 0;
    for (int i = 0; i < n; i++) {
        int d = order[i];
        it->numel *= shape[d];
        if (it->ndim > 0) { /* merge into the previous dim if contiguous for all */
            int p = it->ndim - 1;
            bool merge = true;
            for (int k = 0; k < nops && merge; k++)
                merge = st[d][k] == it->strides[p][k] * it->shape[p];
            if (merge) {
                it->shape[p] *= shape[d];
                continue;
            }
        }
        it->shape[it->ndim] = shape[d];
        for (int k = 0; k < nops; k++) it->strides[it->ndim][k] = st[d][k];
        it->ndim++;
    }
    if (it->ndim == 0) { /* scalar, or only size-1 dims */
        it->ndim = 1;
        it->shape[0] = 1;
        for (int k = 0; k < nops; k++) it->strides[0][k] = 0;
    }
    for (int d = 0; d < MUSA_MAX_DIMS; d++)
        if (d < nd && shape[d] == 0) it->numel = 0;
}

typedef struct {
    const musa_iter *it;
    musa_loop_fn fn;
    void *ctx;
} iter_job;

static void run_range(void *arg, int64_t begin, int64_t end) {
    const iter_job *j = arg;
    const musa_iter *it = j->it;
    int nd = it->ndim, nops = it->nops;
    int64_t idx[MUSA_MAX_DIMS];
    char *p[MUSA_ITER_MAX_OPS];
    int64_t rem = begin;
    for (int k = 0; k < nops; k++) p[k] = it->data[k];
    for (int d = 0; d < nd; d++) {
        idx[d] = rem % it->shape[d];
        rem /= it->shape[d];
        for (int k = 0; k < nops; k++) p[k] += idx[d] * it->strides[d][k];
    }
    int64_t left = end - begin;
    while (left > 0) {
        int64_t n = it->shape[0] - idx[0];
        if (n > left) n = left;
        j->fn(j->ctx, n, p, it->strides[0]);
        left -= n;
        if (!left) break;
        idx[0] += n;
        for (int k = 0; k < nops; k++) p[k] += n * it->strides[0][k];
        for (int d = 0; d + 1 < nd && idx[d] == it->shape[d]; d++) {
            idx[d] = 0;
            idx[d + 1]++;
            for (int k = 0; k < nops; k++)
                p[k] += it->strides[d + 1][k] - it->shape[d] * it->strides[d][k];
        }
    }
}

void musa_iter_run(const musa_iter *it, int64_t grain, musa_loop_fn fn, void *ctx) {
    if (it->numel == 0) return;
    if (it->ndim == 1 && it->numel <= grain) { /* one run, no bookkeeping */
        char *p[MUSA_ITER_MAX_OPS];
        memcpy(p, it->data, sizeof(char *) * (size_t)it->nops);
        fn(ctx, it->numel, p, it->strides[0]);
        return;
    }
    iter_job j = {it, fn, ctx};
    if (it->numel <= grain)
        run_range(&j, 0, it->numel);
    else
        musa_parallel_for(it->numel, grain, run_range, &j);
}
