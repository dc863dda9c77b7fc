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
        it->esize[k] = (int64_t)musa_dtype_info[v->dtype].size;
        it->strides[0][k] = n == 1 ? 0 : it->esize[k];
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
        for (int k = 0; k < nops; k++) {
            it->data[k] = ops[k]->data, it->strides[0][k] = 0;
            it->esize[k] = (int64_t)musa_dtype_info[ops[k]->dtype].size;
        }
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
    for (int k = 0; k < nops; k++)
        it->data[k] = ops[k]->data, it->esize[k] = (int64_t)musa_dtype_info[ops[k]->dtype].size;
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

/* ---- tiles, for inputs transposed against the output ---- */

/* An input contiguous along dim d1 > 0 while the output is contiguous along
 * dim 0 (`a + b.t()`, or attention's gradient of k read through a
 * permute): run element by element, each of its reads lands on another
 * cache line and goes through the loops' padded copies (a 512 x 512
 * float32 `m.t() + 0` took 201 us, its contiguous copy 29). In tiles of
 * TILE x TILE over dims 0 and d1, such inputs are first gathered into a
 * local tile, row-major in the output's order, reading their lines in
 * order; fn then runs row by row, each row contiguous in every operand it
 * gathered. Every element is computed by the same loop on the same values,
 * so results equal the untiled run's. */
#define TILE 32

typedef struct {
    const musa_iter *it;
    musa_loop_fn fn;
    void *ctx;
    int d1;                         /* the dim the gathered inputs are contiguous along */
    bool gather[MUSA_ITER_MAX_OPS]; /* inputs gathered into a tile */
    int64_t nt0, nt1;               /* tiles along dims 0 and d1 */
} tile_job;

#define DEF_TILE_COPY(BITS)                                                                        \
    static void tile_copy_##BITS(char *d, const char *s, int64_t n0, int64_t n1, int64_t ds1,      \
                                 int64_t ss0) {                                                    \
        typedef uint##BITS##_t T;                                                                  \
        for (int64_t a = 0; a < n1; a++) {                                                         \
            T *o = (T *)(d + a * ds1);                                                             \
            const char *in = s + a * (int64_t)sizeof(T);                                           \
            for (int64_t b = 0; b < n0; b++) o[b] = *(const T *)(in + b * ss0);                    \
        }                                                                                          \
    }
DEF_TILE_COPY(8)
DEF_TILE_COPY(16)
DEF_TILE_COPY(32)
DEF_TILE_COPY(64)

void musa_tile_transpose(char *d, int64_t ds1, const char *s, int64_t ss0, int64_t n0, int64_t n1,
                         int64_t es) {
    switch (es) {
    case 1:
        tile_copy_8(d, s, n0, n1, ds1, ss0);
        break;
    case 2:
        tile_copy_16(d, s, n0, n1, ds1, ss0);
        break;
    case 4:
        tile_copy_32(d, s, n0, n1, ds1, ss0);
        break;
    default:
        tile_copy_64(d, s, n0, n1, ds1, ss0);
        break;
    }
}

static void run_tiles(void *arg, int64_t t0, int64_t t1) {
    const tile_job *j = arg;
    const musa_iter *it = j->it;
    int nops = it->nops, d1 = j->d1;
    _Alignas(64) char buf[MUSA_ITER_MAX_OPS][TILE * TILE * 8];
    int64_t per = j->nt0 * j->nt1;
    for (int64_t t = t0; t < t1; t++) {
        int64_t o = t / per, i1 = t % per / j->nt0, i0 = t % j->nt0;
        int64_t b0 = i0 * TILE, a0 = i1 * TILE;
        int64_t n0 = MUSA_MIN(TILE, it->shape[0] - b0), n1 = MUSA_MIN(TILE, it->shape[d1] - a0);
        char *p[MUSA_ITER_MAX_OPS];
        int64_t s[MUSA_ITER_MAX_OPS];
        for (int k = 0; k < nops; k++)
            p[k] = it->data[k] + b0 * it->strides[0][k] + a0 * it->strides[d1][k];
        for (int d = 1; d < it->ndim; d++) { /* the other dims, from the task's outer index */
            if (d == d1) continue;
            int64_t x = o % it->shape[d];
            o /= it->shape[d];
            for (int k = 0; k < nops; k++) p[k] += x * it->strides[d][k];
        }
        for (int k = 0; k < nops; k++) {
            s[k] = it->strides[0][k];
            if (!j->gather[k]) continue;
            musa_tile_transpose(buf[k], n0 * it->esize[k], p[k], s[k], n0, n1, it->esize[k]);
            p[k] = buf[k], s[k] = it->esize[k];
        }
        for (int64_t a = 0; a < n1; a++) {
            char *q[MUSA_ITER_MAX_OPS];
            for (int k = 0; k < nops; k++)
                q[k] = p[k] + a * (j->gather[k] ? n0 * it->esize[k] : it->strides[d1][k]);
            j->fn(j->ctx, n0, q, s);
        }
    }
}

/* The bytes operand k spans: [*lo, *hi). */
static void extent(const musa_iter *it, int k, uintptr_t *lo, uintptr_t *hi) {
    int64_t a = 0, b = 0;
    for (int d = 0; d < it->ndim; d++) {
        int64_t span = (it->shape[d] - 1) * it->strides[d][k];
        if (span < 0)
            a += span;
        else
            b += span;
    }
    *lo = (uintptr_t)(it->data[k] + a), *hi = (uintptr_t)(it->data[k] + b + it->esize[k]);
}

/* The tiled run's plan, where one applies: the output contiguous along
 * dim 0, an input (not a broadcast) strided there and contiguous along a
 * dim d1 of at least TILE / 2 elements, every such input along the same
 * d1, and no input within the output's bytes (an in-place op reading its
 * own output transposed would see other elements already written). */
static bool plan_tiles(const musa_iter *it, tile_job *j) {
    if (it->ndim < 2 || it->strides[0][0] != it->esize[0] || it->shape[0] < TILE / 2) return false;
    uintptr_t olo, ohi;
    extent(it, 0, &olo, &ohi);
    int d1 = -1;
    for (int k = 1; k < it->nops; k++) {
        j->gather[k] = false;
        uintptr_t lo, hi;
        extent(it, k, &lo, &hi);
        if (lo < ohi && olo < hi) return false;
        int64_t s0 = it->strides[0][k];
        if (s0 == 0 || s0 == it->esize[k]) continue;
        int dk = -1;
        for (int d = 1; d < it->ndim && dk < 0; d++)
            if (it->strides[d][k] == it->esize[k]) dk = d;
        if (dk < 0) continue; /* strided everywhere: no order reads it better */
        if (d1 >= 0 && dk != d1) return false;
        d1 = dk, j->gather[k] = true;
    }
    if (d1 < 0 || it->shape[d1] < TILE / 2) return false;
    j->gather[0] = false;
    j->d1 = d1;
    j->nt0 = (it->shape[0] + TILE - 1) / TILE, j->nt1 = (it->shape[d1] + TILE - 1) / TILE;
    return true;
}

static void run(const musa_iter *it, int64_t grain, musa_loop_fn fn, void *ctx, bool tiles) {
    if (it->numel == 0) return;
    tile_job tj = {it, fn, ctx, 0, {false}, 0, 0};
    if (tiles && plan_tiles(it, &tj)) {
        int64_t tasks = it->numel / (it->shape[0] * it->shape[tj.d1]) * tj.nt0 * tj.nt1;
        int64_t g = MUSA_MAX(1, grain / (TILE * TILE));
        if (it->numel <= grain)
            run_tiles(&tj, 0, tasks);
        else
            musa_parallel_for(tasks, g, run_tiles, &tj);
        return;
    }
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

void musa_iter_run(const musa_iter *it, int64_t grain, musa_loop_fn fn, void *ctx) {
    run(it, grain, fn, ctx, false);
}

void musa_iter_run_elementwise(const musa_iter *it, int64_t grain, musa_loop_fn fn, void *ctx) {
    run(it, grain, fn, ctx, true);
}
