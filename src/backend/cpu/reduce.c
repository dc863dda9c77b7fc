/*
 * reduce.c - reductions: sum, prod, amax, amin over any set of dims;
 * max/min with indices and argmax/argmin along one dim; and the one-pass
 * total 2-norm of a list of tensors.
 *
 * Layout: reduced dims are sorted by stride and merged, so each output is a
 * fold over "runs" of the innermost reduced dim. Two paths:
 *   A. runs: each output folds its runs; contiguous float runs use blocked
 *      pairwise summation in double (16 lanes, 256-element leaves,
 *      pairwise above): error <= about (log2(n) + 12) * 2^-53 * sum|x|
 *      before the one rounding to the output dtype;
 *   B. columns: when the input's stride-1 dim is kept (e.g. a bias
 *      gradient, sum over dim 0 of (N, C)), 64-wide blocks of outputs
 *      accumulate rows in double, vectorised across the block (`omp simd`:
 *      without it GCC kept the loop scalar for fear the accumulators alias
 *      the row, and a (512, 512) column sum took 160 us against 33 us for
 *      its row sum). Float sums, maxima and minima keep 64 outputs in
 *      registers over all the rows of a run (the cols folds: each output
 *      still folds its rows in order):
 *      (512, 384) 26.9 -> 10.5 us with 16 outputs, PyTorch's float32 sum
 *      11.5 us; bfloat16 (512, 384) 19.7 -> 12.6 us from 16 to 64.
 * A full reduction of one long contiguous run splits it into chunks whose
 * size depends only on the length, so results do not depend on the number
 * of threads.
 */
#include <math.h>

#include "../../base/threadpool.h"
#include "elem.h"
#include "kernels.h"

typedef union {
    double f;
    int64_t i;
} racc;

typedef void (*run_fn)(racc *acc, const char *p, int64_t n, int64_t s);
typedef void (*col_fn)(racc *acc, const char *p, int64_t n);
typedef void (*cols_fn)(racc *acc, const char *p, int64_t n, int64_t rows, int64_t rs);
typedef void (*combine_fn)(racc *a, const racc *b);

typedef struct {
    racc init;
    run_fn run;
    col_fn col;
    combine_fn combine;
    bool int_acc;
    cols_fn cols; /* col over several rows at once, where there is one (float sums) */
} reduce_ops;

/* Long runs poll for an interrupt (musa_interrupt) every POLL_EVERY
 * elements; an interrupted fold's value is garbage, and the op fails. */
#define POLL_EVERY ((int64_t)1 << 20)
/* for (i = 0; i < n; i++), in blocks with a poll between them: the same
 * order of operations, and the inner loop stays vectorisable */
#define POLLED_LOOP(i, n)                                                                          \
    for (int64_t i##_b = 0; i##_b < (n) && !(i##_b && musa_interrupt_pending());                   \
         i##_b += POLL_EVERY)                                                                      \
        for (int64_t i = i##_b, i##_e = (n)-i##_b < POLL_EVERY ? (n) : i##_b + POLL_EVERY;         \
             i < i##_e; i++)

/* ---- pairwise sums of contiguous runs ---- */

/* Every float sum accumulates in double: a float32 sum is memory-bound, so
 * the wider lanes cost nothing measurable and the error bound shrinks from
 * float32's eps to float64's. */
#define DEF_PAIRWISE(SN, T, C_, E)                                                                 \
    static double pairwise_##SN(const T *x, int64_t n) {                                           \
        if (n <= 256) {                                                                            \
            double acc[16] = {0}, tail = 0;                                                        \
            int64_t i = 0;                                                                         \
            for (; i + 16 <= n; i += 16)                                                           \
                for (int j = 0; j < 16; j++) acc[j] += LD_##SN(x[i + j]);                          \
            for (; i < n; i++) tail += LD_##SN(x[i]);                                              \
            for (int w = 8; w >= 1; w /= 2)                                                        \
                for (int j = 0; j < w; j++) acc[j] += acc[j + w];                                  \
            return acc[0] + tail;                                                                  \
        }                                                                                          \
        if (n >= POLL_EVERY && musa_interrupt_pending()) return 0; /* the op reports it */         \
        int64_t h = (n / 2 + 15) & ~(int64_t)15;                                                   \
        return pairwise_##SN(x, h) + pairwise_##SN(x + h, n - h);                                  \
    }
MUSA_FOR_FLOATS(DEF_PAIRWISE)

/* ---- per-dtype folds ---- */

/* cols' blocks of W outputs, accumulated in W doubles (8 AVX-512
 * registers at W = 64: four times the independent additions of W = 16,
 * whose chains of dependent adds bounded it; a bfloat16 (512, 128) bias
 * gradient 10.2 -> 5.4 us, float32 (512, 512) 17.7-18.0 -> 14.4-14.9 us) */
#define COLS_BLOCK(SN, T, W, UPD)                                                                  \
    for (; j0 + (W) <= n; j0 += (W)) {                                                             \
        double a[W];                                                                               \
        for (int k = 0; k < (W); k++) a[k] = acc[j0 + k].f;                                        \
        for (int64_t r = 0; r < rows; r++) {                                                       \
            const T *x = (const T *)(p + r * rs) + j0;                                             \
            _Pragma("omp simd") for (int k = 0; k < (W); k++) a[k] =                               \
                UPD(a[k], (double)LD_##SN(x[k]));                                                  \
        }                                                                                          \
        for (int k = 0; k < (W); k++) acc[j0 + k].f = a[k];                                        \
    }
/* one element's step of each float fold (NaN wins a max or min, the last
 * one; ties keep the first value) */
#define SUM_UPD(a, v) ((a) + (v))
#define MAX_UPD(a, v) (((v) != (v) || (v) > (a)) ? (v) : (a))
#define MIN_UPD(a, v) (((v) != (v) || (v) < (a)) ? (v) : (a))
/* FOLD's col over rows of n, rs bytes apart, 64 (then 16) outputs at a
 * time held in registers over every row: each output folds its rows in
 * order, as FOLD's col row by row (column sums, maxima and minima of
 * 4096 x 1024 float32 took 1.9-2.2x PyTorch's time one row at a time) */
#define DEF_COLS(FOLD, SN, T, UPD)                                                                 \
    static void FOLD##_cols_##SN(racc *acc, const char *p, int64_t n, int64_t rows, int64_t rs) {  \
        int64_t j0 = 0;                                                                            \
        COLS_BLOCK(SN, T, 64, UPD)                                                                 \
        COLS_BLOCK(SN, T, 16, UPD)                                                                 \
        for (int64_t r = 0; j0 < n && r < rows; r++)                                               \
            FOLD##_col_##SN(acc + j0, p + r * rs + j0 * (int64_t)sizeof(T), n - j0);               \
    }

/* ---- float32 extremes of contiguous runs, vectorised ----
 *
 * The scalar folds below walk a run with one comparison chain (about 1.2 ns
 * an element: amax along rows of 4096 x 1024 took 10x PyTorch's time). A
 * maximum is exact, so its value does not depend on the order: one
 * vectorised pass finds it (and whether the run holds a NaN), and a second
 * finds the first element equal to it, the one the scalar fold keeps (ties
 * keep the first: -0.0 before +0.0 gives -0.0). A run with a NaN is left
 * to the scalar fold, whose NaN rules stay as they are. */
#define F32_BLOCK 64
#define F32_LANES 32 /* two AVX-512 vectors of independent maxima */
/* The run's largest (is_max) or smallest element; *nan set when it holds a
 * NaN (the value is then meaningless). Lanes of its own rather than an
 * OpenMP max reduction: clang starts those at the lowest finite float, not
 * -inf, and a row of -inf came out as -FLT_MAX. */
static float f32_extreme(const float *x, int64_t n, bool is_max, bool *nan) {
    float m[F32_LANES];
    int bad[F32_LANES];
    for (int k = 0; k < F32_LANES; k++) m[k] = is_max ? -INFINITY : INFINITY, bad[k] = 0;
    int64_t i = 0;
    for (; i + F32_LANES <= n; i += F32_LANES) {
        if (is_max) {
            _Pragma("omp simd") for (int k = 0; k < F32_LANES; k++) {
                float v = x[i + k];
                m[k] = v > m[k] ? v : m[k];
                bad[k] |= v != v;
            }
        } else {
            _Pragma("omp simd") for (int k = 0; k < F32_LANES; k++) {
                float v = x[i + k];
                m[k] = v < m[k] ? v : m[k];
                bad[k] |= v != v;
            }
        }
    }
    for (int k = 0; i < n; i++, k++) { /* the tail, one element to each lane */
        float v = x[i];
        m[k] = (is_max ? v > m[k] : v < m[k]) ? v : m[k];
        bad[k] |= v != v;
    }
    float r = m[0];
    int any = bad[0];
    for (int k = 1; k < F32_LANES; k++)
        r = (is_max ? m[k] > r : m[k] < r) ? m[k] : r, any |= bad[k];
    *nan = any != 0;
    return r;
}

/* The index of the first element of x[0..n) that compares equal to m (n if
 * none). */
static int64_t f32_first_equal(const float *x, int64_t n, float m) {
    for (int64_t b = 0; b < n; b += F32_BLOCK) {
        int64_t e = n - b < F32_BLOCK ? n : b + F32_BLOCK;
        int hit = 0;
        _Pragma("omp simd reduction(| : hit)") for (int64_t i = b; i < e; i++) hit |= x[i] == m;
        if (!hit) continue;
        for (int64_t i = b; i < e; i++)
            if (x[i] == m) return i;
    }
    return n;
}

/* The fold of amax (is_max) or amin over a contiguous float32 run into *a,
 * as the scalar fold gives it; false (and *a untouched) when the run holds
 * a NaN or the fold is interrupted: the caller then folds it the scalar
 * way. */
static bool f32_extreme_run(double *a, const float *x, int64_t n, bool is_max) {
    double acc = *a;
    for (int64_t b = 0; b < n; b += POLL_EVERY) {
        if (b && musa_interrupt_pending()) return false;
        int64_t len = n - b < POLL_EVERY ? n - b : POLL_EVERY;
        bool nan;
        float m = f32_extreme(x + b, len, is_max, &nan);
        if (nan) return false;
        if (acc != acc || !(is_max ? (double)m > acc : (double)m < acc)) continue;
        acc = m == 0 ? (double)x[b + f32_first_equal(x + b, len, m)] : (double)m;
    }
    *a = acc;
    return true;
}

#define DEF_FLOAT_FOLDS(SN, T, C, E)                                                               \
    static void sum_run_##SN(racc *acc, const char *p, int64_t n, int64_t s) {                     \
        if (s == (int64_t)sizeof(T)) {                                                             \
            acc->f += (double)pairwise_##SN((const T *)p, n);                                      \
            return;                                                                                \
        }                                                                                          \
        double a = 0;                                                                              \
        POLLED_LOOP(i, n) a += (double)LD_##SN(*(const T *)(p + i * s));                           \
        acc->f += a;                                                                               \
    }                                                                                              \
    static void sum_col_##SN(racc *acc, const char *p, int64_t n) {                                \
        const T *x = (const T *)p;                                                                 \
        _Pragma("omp simd") for (int64_t j = 0; j < n; j++) acc[j].f += (double)LD_##SN(x[j]);     \
    }                                                                                              \
    DEF_COLS(sum, SN, T, SUM_UPD)                                                                  \
    static void prod_run_##SN(racc *acc, const char *p, int64_t n, int64_t s) {                    \
        double a = acc->f;                                                                         \
        POLLED_LOOP(i, n) a *= (double)LD_##SN(*(const T *)(p + i * s));                           \
        acc->f = a;                                                                                \
    }                                                                                              \
    static void prod_col_##SN(racc *acc, const char *p, int64_t n) {                               \
        const T *x = (const T *)p;                                                                 \
        _Pragma("omp simd") for (int64_t j = 0; j < n; j++) acc[j].f *= (double)LD_##SN(x[j]);     \
    }                                                                                              \
    static void amax_run_##SN(racc *acc, const char *p, int64_t n, int64_t s) {                    \
        if (E == MUSA_DTYPE_FLOAT32 && s == 4 &&                                                   \
            f32_extreme_run(&acc->f, (const float *)p, n, true))                                   \
            return;                                                                                \
        double a = acc->f;                                                                         \
        POLLED_LOOP(i, n) {                                                                        \
            double v = (double)LD_##SN(*(const T *)(p + i * s));                                   \
            a = (v != v || v > a) ? v : a;                                                         \
        }                                                                                          \
        acc->f = a;                                                                                \
    }                                                                                              \
    static void amax_col_##SN(racc *acc, const char *p, int64_t n) {                               \
        const T *x = (const T *)p;                                                                 \
        _Pragma("omp simd") for (int64_t j = 0; j < n; j++) acc[j].f =                             \
            MAX_UPD(acc[j].f, (double)LD_##SN(x[j]));                                              \
    }                                                                                              \
    DEF_COLS(amax, SN, T, MAX_UPD)                                                                 \
    static void amin_run_##SN(racc *acc, const char *p, int64_t n, int64_t s) {                    \
        if (E == MUSA_DTYPE_FLOAT32 && s == 4 &&                                                   \
            f32_extreme_run(&acc->f, (const float *)p, n, false))                                  \
            return;                                                                                \
        double a = acc->f;                                                                         \
        POLLED_LOOP(i, n) {                                                                        \
            double v = (double)LD_##SN(*(const T *)(p + i * s));                                   \
            a = (v != v || v < a) ? v : a;                                                         \
        }                                                                                          \
        acc->f = a;                                                                                \
    }                                                                                              \
    static void amin_col_##SN(racc *acc, const char *p, int64_t n) {                               \
        const T *x = (const T *)p;                                                                 \
        _Pragma("omp simd") for (int64_t j = 0; j < n; j++) acc[j].f =                             \
            MIN_UPD(acc[j].f, (double)LD_##SN(x[j]));                                              \
    }                                                                                              \
    DEF_COLS(amin, SN, T, MIN_UPD)
MUSA_FOR_FLOATS(DEF_FLOAT_FOLDS)

#define U64(x) ((uint64_t)(int64_t)(x))
#define DEF_INT_FOLDS(SN, T, C, E)                                                                 \
    static void sum_run_##SN(racc *acc, const char *p, int64_t n, int64_t s) {                     \
        uint64_t a = (uint64_t)acc->i;                                                             \
        POLLED_LOOP(i, n) a += U64(*(const T *)(p + i * s));                                       \
        acc->i = (int64_t)a;                                                                       \
    }                                                                                              \
    static void sum_col_##SN(racc *acc, const char *p, int64_t n) {                                \
        const T *x = (const T *)p;                                                                 \
        _Pragma("omp simd") for (int64_t j = 0; j < n; j++) acc[j].i =                             \
            (int64_t)(U64(acc[j].i) + U64(x[j]));                                                  \
    }                                                                                              \
    static void prod_run_##SN(racc *acc, const char *p, int64_t n, int64_t s) {                    \
        uint64_t a = (uint64_t)acc->i;                                                             \
        POLLED_LOOP(i, n) a *= U64(*(const T *)(p + i * s));                                       \
        acc->i = (int64_t)a;                                                                       \
    }                                                                                              \
    static void prod_col_##SN(racc *acc, const char *p, int64_t n) {                               \
        const T *x = (const T *)p;                                                                 \
        _Pragma("omp simd") for (int64_t j = 0; j < n; j++) acc[j].i =                             \
            (int64_t)(U64(acc[j].i) * U64(x[j]));                                                  \
    }                                                                                              \
    static void amax_run_##SN(racc *acc, const char *p, int64_t n, int64_t s) {                    \
        POLLED_LOOP(i, n) {                                                                        \
            int64_t v = *(const T *)(p + i * s);                                                   \
            if (v > acc->i) acc->i = v;                                                            \
        }                                                                                          \
    }                                                                                              \
    static void amax_col_##SN(racc *acc, const char *p, int64_t n) {                               \
        const T *x = (const T *)p;                                                                 \
        _Pragma("omp simd") for (int64_t j = 0; j < n; j++) if (x[j] > acc[j].i) acc[j].i = x[j];  \
    }                                                                                              \
    static void amin_run_##SN(racc *acc, const char *p, int64_t n, int64_t s) {                    \
        POLLED_LOOP(i, n) {                                                                        \
            int64_t v = *(const T *)(p + i * s);                                                   \
            if (v < acc->i) acc->i = v;                                                            \
        }                                                                                          \
    }                                                                                              \
    static void amin_col_##SN(racc *acc, const char *p, int64_t n) {                               \
        const T *x = (const T *)p;                                                                 \
        _Pragma("omp simd") for (int64_t j = 0; j < n; j++) if (x[j] < acc[j].i) acc[j].i = x[j];  \
    }
MUSA_FOR_INTS(DEF_INT_FOLDS)
DEF_INT_FOLDS(b, uint8_t, uint8_t, MUSA_DTYPE_BOOL)

static void comb_sum_f(racc *a, const racc *b) {
    a->f += b->f;
}
static void comb_sum_i(racc *a, const racc *b) {
    a->i = (int64_t)(U64(a->i) + U64(b->i));
}
static void comb_prod_f(racc *a, const racc *b) {
    a->f *= b->f;
}
static void comb_prod_i(racc *a, const racc *b) {
    a->i = (int64_t)(U64(a->i) * U64(b->i));
}
static void comb_amax_f(racc *a, const racc *b) {
    a->f = (b->f != b->f || b->f > a->f) ? b->f : a->f;
}
static void comb_amax_i(racc *a, const racc *b) {
    a->i = b->i > a->i ? b->i : a->i;
}
static void comb_amin_f(racc *a, const racc *b) {
    a->f = (b->f != b->f || b->f < a->f) ? b->f : a->f;
}
static void comb_amin_i(racc *a, const racc *b) {
    a->i = b->i < a->i ? b->i : a->i;
}

typedef enum { R_SUM, R_PROD, R_AMAX, R_AMIN } reduce_kind;

#define OPS_ROW(SN, T, C, E)                                                                       \
    [E] = {{{.f = 0}, sum_run_##SN, sum_col_##SN, comb_sum_f, false, sum_cols_##SN},               \
           {{.f = 1}, prod_run_##SN, prod_col_##SN, comb_prod_f, false},                           \
           {{.f = -INFINITY}, amax_run_##SN, amax_col_##SN, comb_amax_f, false, amax_cols_##SN},   \
           {{.f = INFINITY}, amin_run_##SN, amin_col_##SN, comb_amin_f, false, amin_cols_##SN}},
#define OPS_ROW_I(SN, T, C, E)                                                                     \
    [E] = {{{.i = 0}, sum_run_##SN, sum_col_##SN, comb_sum_i, true},                               \
           {{.i = 1}, prod_run_##SN, prod_col_##SN, comb_prod_i, true},                            \
           {{.i = INT64_MIN}, amax_run_##SN, amax_col_##SN, comb_amax_i, true},                    \
           {{.i = INT64_MAX}, amin_run_##SN, amin_col_##SN, comb_amin_i, true}},

static const reduce_ops ops_table[MUSA_DTYPE_COUNT][4] = {MUSA_FOR_FLOATS(OPS_ROW) MUSA_FOR_INTS(
    OPS_ROW_I) OPS_ROW_I(b, uint8_t, uint8_t, MUSA_DTYPE_BOOL)};

static const reduce_ops *get_ops(musa_dtype dt, reduce_kind k) {
    return &ops_table[dt][k];
}

static inline void store_acc(char *p, musa_dtype dt, const reduce_ops *ops, racc a) {
    if (ops->int_acc)
        musa_store_i64(p, dt, a.i);
    else
        musa_store_f64(p, dt, a.f);
}

/* n accumulators to outputs os bytes apart. Float32 and float64 outputs
 * take a loop of their own, the same conversion as musa_store_f64's
 * ((float)a): through it, a call and a switch per output, a (8, 8192)
 * column sum (few rows, many outputs) took 19 us, now 7. */
static void store_accs(char *p, int64_t os, musa_dtype dt, const reduce_ops *ops, const racc *acc,
                       int64_t n) {
    if (!ops->int_acc && dt == MUSA_DTYPE_FLOAT32 && os == (int64_t)sizeof(float)) {
        float *o = (float *)p; /* vectorised: the common case, a contiguous output */
        for (int64_t c = 0; c < n; c++) o[c] = (float)acc[c].f;
    } else if (!ops->int_acc && dt == MUSA_DTYPE_FLOAT32)
        for (int64_t c = 0; c < n; c++) *(float *)(p + c * os) = (float)acc[c].f;
    else if (!ops->int_acc && dt == MUSA_DTYPE_FLOAT64)
        for (int64_t c = 0; c < n; c++) *(double *)(p + c * os) = acc[c].f;
    else
        for (int64_t c = 0; c < n; c++) store_acc(p + c * os, dt, ops, acc[c]);
}

/* ---- the driver ---- */

typedef struct {
    int64_t size, xs, os; /* size, input stride (bytes), output stride (bytes) */
} rdim;

static int cmp_xs(const void *a, const void *b) {
    int64_t x = llabs(((const rdim *)a)->xs), y = llabs(((const rdim *)b)->xs);
    return (x > y) - (x < y);
}

/* Sort by input stride and merge dims contiguous in input (and output). */
static int coalesce(rdim *d, int n, bool with_out) {
    qsort(d, (size_t)n, sizeof *d, cmp_xs);
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m && d[i].xs == d[m - 1].xs * d[m - 1].size &&
            (!with_out || d[i].os == d[m - 1].os * d[m - 1].size)) {
            d[m - 1].size *= d[i].size;
            continue;
        }
        d[m++] = d[i];
    }
    return m;
}

/* Offsets of linear index `li` over dims d[0..n) (d[0] fastest). */
static inline void offsets(const rdim *d, int n, int64_t li, int64_t *xo, int64_t *oo) {
    int64_t x = 0, o = 0;
    for (int i = 0; i < n; i++) {
        int64_t k = li % d[i].size;
        li /= d[i].size;
        x += k * d[i].xs;
        o += k * d[i].os;
    }
    *xo = x;
    if (oo) *oo = o;
}

typedef struct {
    const reduce_ops *ops;
    const char *x;
    char *out;
    musa_dtype odt;
    const rdim *K, *R;
    int nK, nR;
    int64_t nouter_r;   /* product of R[1..] sizes */
    int64_t col_blocks; /* path B: 64-wide blocks in K[0] */
} rjob;

static racc fold_output(const rjob *j, const char *xb) {
    racc acc = j->ops->init;
    int64_t n0 = j->nR ? j->R[0].size : 1, s0 = j->nR ? j->R[0].xs : 0;
    for (int64_t r = 0; r < j->nouter_r; r++) {
        int64_t xo = 0;
        if (j->nR > 1) offsets(j->R + 1, j->nR - 1, r, &xo, NULL);
        j->ops->run(&acc, xb + xo, n0, s0);
    }
    return acc;
}

static void path_a(void *arg, int64_t b, int64_t e) {
    const rjob *j = arg;
    for (int64_t o = b; o < e; o++) {
        int64_t xo, oo;
        offsets(j->K, j->nK, o, &xo, &oo);
        store_acc(j->out + oo, j->odt, j->ops, fold_output(j, j->x + xo));
    }
}

#define COL_BLOCK 64

static void path_b(void *arg, int64_t b, int64_t e) {
    const rjob *j = arg;
    racc acc[COL_BLOCK];
    int64_t k0 = j->K[0].size, es = j->K[0].xs, os0 = j->K[0].os;
    const racc init = j->ops->init;
    for (int64_t w = b; w < e; w++) {
        int64_t blk = w % j->col_blocks, outer = w / j->col_blocks;
        int64_t c0 = blk * COL_BLOCK, bw = k0 - c0 < COL_BLOCK ? k0 - c0 : COL_BLOCK;
        int64_t xo, oo;
        offsets(j->K + 1, j->nK - 1, outer, &xo, &oo);
        const char *xb = j->x + xo + c0 * es;
        for (int64_t c = 0; c < bw; c++) acc[c] = init;
        if (j->ops->cols && j->nR) { /* R[0]'s rows at once, in the same order */
            for (int64_t r = 0; r < j->nouter_r; r++) {
                int64_t ro = 0;
                offsets(j->R + 1, j->nR - 1, r, &ro, NULL);
                j->ops->cols(acc, xb + ro, bw, j->R[0].size, j->R[0].xs);
            }
        } else {
            int64_t nr = j->nouter_r * (j->nR ? j->R[0].size : 1);
            for (int64_t r = 0; r < nr; r++) {
                int64_t ro = 0;
                offsets(j->R, j->nR, r, &ro, NULL);
                j->ops->col(acc, xb + ro, bw);
            }
        }
        store_accs(j->out + oo + c0 * os0, os0, j->odt, j->ops, acc, bw);
    }
}

/* One output folded over a long contiguous run, split into fixed chunks. */
typedef struct {
    const reduce_ops *ops;
    const char *x;
    int64_t chunk, n, es;
    racc *partial;
} chunk_job;

static void chunk_fold(void *arg, int64_t b, int64_t e) {
    const chunk_job *c = arg;
    for (int64_t k = b; k < e; k++) {
        int64_t lo = k * c->chunk, len = c->n - lo < c->chunk ? c->n - lo : c->chunk;
        racc a = c->ops->init;
        c->ops->run(&a, c->x + lo * c->es, len, c->es);
        c->partial[k] = a;
    }
}

#define MAX_PARTIALS 1024

static int reduce_run(const musa_kview *out, const musa_kview *x, const musa_ints *dims,
                      reduce_kind kind) {
    const reduce_ops *ops = get_ops((musa_dtype)x->dtype, kind);
    int64_t xes = (int64_t)musa_dtype_info[x->dtype].size;
    int64_t oes = (int64_t)musa_dtype_info[out->dtype].size;
    if (musa_kview_empty(out)) return MUSA_OK;
    if (musa_kview_empty(x)) {
        /* An empty reduction: the identity everywhere. x's other dims and
         * strides may be huge (shape (0, 2^62)), so only out's are used. */
        rdim O[MUSA_MAX_DIMS];
        int nO = 0;
        int64_t nout = musa_kview_numel(out);
        for (int d = 0; d < out->ndim; d++)
            if (out->shape[d] != 1) O[nO++] = (rdim){out->shape[d], 0, out->strides[d] * oes};
        for (int64_t o = 0; o < nout; o++) {
            int64_t xo, oo;
            offsets(O, nO, o, &xo, &oo);
            store_acc(out->data + oo, (musa_dtype)out->dtype, ops, ops->init);
        }
        return MUSA_OK;
    }
    /* Both are non-empty from here, so every product below is bounded by
     * their storages. */
    bool mask[MUSA_MAX_DIMS] = {false};
    for (int i = 0; i < dims->n; i++) mask[dims->v[i]] = true;
    bool keepdim = out->ndim == x->ndim;
    rdim K[MUSA_MAX_DIMS], R[MUSA_MAX_DIMS];
    int nK = 0, nR = 0, od = 0;
    int64_t nout = 1, nred = 1;
    for (int d = 0; d < x->ndim; d++) {
        int64_t size = x->shape[d], xs = x->strides[d] * xes;
        if (mask[d]) {
            nred *= size;
            if (size != 1) R[nR++] = (rdim){size, xs, 0};
            if (keepdim) od++;
        } else {
            nout *= size;
            if (size != 1) K[nK++] = (rdim){size, xs, out->strides[od] * oes};
            od++;
        }
    }
    nK = coalesce(K, nK, true);
    nR = coalesce(R, nR, false);
    rjob j = {.ops = ops,
              .x = x->data,
              .out = out->data,
              .odt = (musa_dtype)out->dtype,
              .K = K,
              .R = R,
              .nK = nK,
              .nR = nR,
              .nouter_r = 1};
    for (int i = 1; i < nR; i++) j.nouter_r *= R[i].size;
    int64_t work = nout * nred;
    int threads = musa_pool_intra_threads();

    if (nK >= 1 && K[0].xs == xes && (nR == 0 || R[0].xs != xes)) {
        j.col_blocks = (K[0].size + COL_BLOCK - 1) / COL_BLOCK;
        int64_t tasks = nout / K[0].size * j.col_blocks;
        int64_t per_task = work / tasks + 1;
        /* a thread's share of a column sum under 64K elements costs less
         * than splitting it (measured: (512, 128) 4.4 us on one thread,
         * 5.9 on two) */
        int64_t grain = per_task >= 65536 ? 1 : (65536 + per_task - 1) / per_task;
        musa_parallel_for(tasks, grain, path_b, &j);
        return MUSA_OK;
    }
    if (nout < threads && nR == 1 && R[0].xs == xes && nred >= 4 * 65536) {
        int64_t chunk = 65536;
        if ((nred + chunk - 1) / chunk > MAX_PARTIALS)
            chunk = (nred + MAX_PARTIALS - 1) / MAX_PARTIALS;
        int64_t nchunks = (nred + chunk - 1) / chunk;
        racc partial[MAX_PARTIALS];
        for (int64_t o = 0; o < nout; o++) {
            int64_t xo, oo;
            offsets(K, nK, o, &xo, &oo);
            chunk_job c = {ops, j.x + xo, chunk, nred, xes, partial};
            musa_parallel_for(nchunks, 1, chunk_fold, &c);
            racc acc = ops->init;
            for (int64_t k = 0; k < nchunks; k++) ops->combine(&acc, &partial[k]);
            store_acc(j.out + oo, j.odt, ops, acc);
        }
        return MUSA_OK;
    }
    int64_t grain = nred >= 32768 ? 1 : 32768 / nred;
    musa_parallel_for(nout, grain, path_a, &j);
    return MUSA_OK;
}

#define DEF_REDUCE_KERNEL(NAME, KIND)                                                              \
    int cpu_##NAME(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,          \
                   const void *attrs) {                                                            \
        MUSA_UNUSED(ctx), MUSA_UNUSED(n_in);                                                       \
        return reduce_run(&out[0], &in[0], &((const musa_attrs_reduce *)attrs)->dims, KIND);       \
    }
DEF_REDUCE_KERNEL(sum, R_SUM)
DEF_REDUCE_KERNEL(prod, R_PROD)
DEF_REDUCE_KERNEL(amax, R_AMAX)
DEF_REDUCE_KERNEL(amin, R_AMIN)

/* ---- max/min with indices, argmax/argmin ---- */

typedef struct {
    const musa_kview *x;
    char *vals, *idx; /* outputs (either may be NULL) */
    musa_dtype vdt;
    rdim K[MUSA_MAX_DIMS];      /* kept dims with value (os) strides */
    int64_t ios[MUSA_MAX_DIMS]; /* index output strides (bytes) per kept dim */
    int nK;
    int64_t n, s; /* reduced dim size and input stride (bytes) */
    bool is_max;
} arg_job;

static void arg_range(void *arg, int64_t b, int64_t e) {
    const arg_job *j = arg;
    bool fl = musa_is_float((musa_dtype)j->x->dtype);
    for (int64_t o = b; o < e; o++) {
        int64_t li = o, xo = 0, vo = 0, io = 0;
        for (int i = 0; i < j->nK; i++) {
            int64_t k = li % j->K[i].size;
            li /= j->K[i].size;
            xo += k * j->K[i].xs;
            vo += k * j->K[i].os;
            io += k * j->ios[i];
        }
        const char *p = j->x->data + xo;
        int64_t best_i = 0;
        if (j->x->dtype == MUSA_DTYPE_FLOAT32 && j->s == 4 && j->n > 1) {
            /* the scalar loop below keeps the first NaN, or else the first
             * extreme element: a run without NaN has that one at the first
             * element equal to its extreme */
            const float *x = (const float *)p;
            bool nan;
            float m = f32_extreme(x, j->n, j->is_max, &nan);
            best_i = f32_first_equal(x, j->n, m);
            if (!nan && best_i < j->n) {
                if (j->vals) musa_store_f64(j->vals + vo, j->vdt, x[best_i]);
                if (j->idx) *(int64_t *)(j->idx + io) = best_i;
                continue;
            }
            best_i = 0;
        }
        if (fl) {
            double best = musa_load_f64(p, (musa_dtype)j->x->dtype);
            for (int64_t i = 1; i < j->n && best == best; i++) {
                double v = musa_load_f64(p + i * j->s, (musa_dtype)j->x->dtype);
                if (v != v || (j->is_max ? v > best : v < best)) best = v, best_i = i;
            }
            if (j->vals) musa_store_f64(j->vals + vo, j->vdt, best);
        } else {
            int64_t best = musa_load_i64(p, (musa_dtype)j->x->dtype);
            for (int64_t i = 1; i < j->n; i++) {
                int64_t v = musa_load_i64(p + i * j->s, (musa_dtype)j->x->dtype);
                if (j->is_max ? v > best : v < best) best = v, best_i = i;
            }
            if (j->vals) musa_store_i64(j->vals + vo, j->vdt, best);
        }
        if (j->idx) *(int64_t *)(j->idx + io) = best_i;
    }
}

static int arg_reduce(const musa_kview *x, int64_t dim, const musa_kview *vals,
                      const musa_kview *idx, bool is_max) {
    const musa_kview *shape_ref = vals ? vals : idx;
    /* Inference refuses an empty reduced dim, so an empty x has an empty
     * output (and may have huge other dims: no products over them). */
    if (musa_kview_empty(x)) return MUSA_OK;
    bool keepdim = shape_ref->ndim == x->ndim;
    int64_t xes = (int64_t)musa_dtype_info[x->dtype].size;
    arg_job j = {.x = x,
                 .vals = vals ? vals->data : NULL,
                 .idx = idx ? idx->data : NULL,
                 .vdt = vals ? (musa_dtype)vals->dtype : MUSA_DTYPE_INT64,
                 .is_max = is_max,
                 .n = 1,
                 .s = 0};
    int64_t nout = 1;
    int od = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (d == dim) {
            j.n = x->shape[d];
            j.s = x->strides[d] * xes;
            if (keepdim) od++;
            continue;
        }
        int64_t vs = vals ? vals->strides[od] * (int64_t)musa_dtype_info[vals->dtype].size : 0;
        int64_t is = idx ? idx->strides[od] * 8 : 0;
        j.K[j.nK] = (rdim){x->shape[d], x->strides[d] * xes, vs};
        j.ios[j.nK++] = is;
        nout *= x->shape[d];
        od++;
    }
    if (nout == 0) return MUSA_OK;
    int64_t grain = j.n >= 32768 ? 1 : 32768 / j.n;
    musa_parallel_for(nout, grain, arg_range, &j);
    return MUSA_OK;
}

int cpu_max_dim(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                const void *attrs) {
    MUSA_UNUSED(ctx), MUSA_UNUSED(n_in);
    return arg_reduce(&in[0], ((const musa_attrs_dim *)attrs)->dim, &out[0], &out[1], true);
}
int cpu_min_dim(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                const void *attrs) {
    MUSA_UNUSED(ctx), MUSA_UNUSED(n_in);
    return arg_reduce(&in[0], ((const musa_attrs_dim *)attrs)->dim, &out[0], &out[1], false);
}
int cpu_argmax(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
               const void *attrs) {
    MUSA_UNUSED(ctx), MUSA_UNUSED(n_in);
    return arg_reduce(&in[0], ((const musa_attrs_dim *)attrs)->dim, NULL, &out[0], true);
}
int cpu_argmin(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
               const void *attrs) {
    MUSA_UNUSED(ctx), MUSA_UNUSED(n_in);
    return arg_reduce(&in[0], ((const musa_attrs_dim *)attrs)->dim, NULL, &out[0], false);
}

/* ---- total 2-norm of a list of tensors, one pass ---- */

#define DEF_SUMSQ(SN, T, C, E)                                                                     \
    static double sumsq_##SN(const char *p, int64_t n, int64_t s) {                                \
        double acc[8] = {0};                                                                       \
        int64_t i = 0;                                                                             \
        if (s == (int64_t)sizeof(T)) {                                                             \
            const T *x = (const T *)p;                                                             \
            for (; i + 8 <= n; i += 8)                                                             \
                for (int k = 0; k < 8; k++) {                                                      \
                    double v = (double)LD_##SN(x[i + k]);                                          \
                    acc[k] += v * v;                                                               \
                }                                                                                  \
        }                                                                                          \
        for (; i < n; i++) {                                                                       \
            double v = (double)LD_##SN(*(const T *)(p + i * s));                                   \
            acc[0] += v * v;                                                                       \
        }                                                                                          \
        return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));  \
    }
MUSA_FOR_FLOATS(DEF_SUMSQ)

typedef double (*sumsq_fn)(const char *p, int64_t n, int64_t s);

typedef struct {
    sumsq_fn fn;
    const char *x;
    int64_t n, es, chunk;
    double *partial;
} sq_job;

static void sq_chunks(void *arg, int64_t b, int64_t e) {
    const sq_job *j = arg;
    for (int64_t k = b; k < e; k++) {
        int64_t lo = k * j->chunk, len = j->n - lo < j->chunk ? j->n - lo : j->chunk;
        j->partial[k] = j->fn(j->x + lo * j->es, len, j->es);
    }
}

/* Sum of squares of one tensor of any layout: contiguous tensors split into
 * fixed chunks (in parallel), others walk their dims. */
static double tensor_sumsq(const musa_kview *v) {
    static const sumsq_fn fns[MUSA_DTYPE_COUNT] = {[MUSA_DTYPE_FLOAT32] = sumsq_f32,
                                                   [MUSA_DTYPE_FLOAT64] = sumsq_f64,
                                                   [MUSA_DTYPE_FLOAT16] = sumsq_f16,
                                                   [MUSA_DTYPE_BFLOAT16] = sumsq_bf16};
    sumsq_fn fn = fns[v->dtype];
    int64_t es = (int64_t)musa_dtype_info[v->dtype].size, n = musa_kview_numel(v);
    if (n == 0) return 0;
    if (musa_kview_contiguous(v)) {
        double partial[MAX_PARTIALS];
        int64_t chunk = 65536;
        if ((n + chunk - 1) / chunk > MAX_PARTIALS) chunk = (n + MAX_PARTIALS - 1) / MAX_PARTIALS;
        sq_job j = {fn, v->data, n, es, chunk, partial};
        int64_t nchunks = (n + chunk - 1) / chunk;
        musa_parallel_for(nchunks, 1, sq_chunks, &j);
        double acc = 0;
        for (int64_t k = 0; k < nchunks; k++) acc += partial[k];
        return acc;
    }
    rdim d[MUSA_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < v->ndim; i++)
        if (v->shape[i] != 1) d[nd++] = (rdim){v->shape[i], v->strides[i] * es, 0};
    nd = coalesce(d, nd, false);
    int64_t rows = n / d[0].size;
    double acc = 0;
    for (int64_t r = 0; r < rows; r++) {
        int64_t xo = 0;
        offsets(d + 1, nd - 1, r, &xo, NULL);
        acc += fn(v->data + xo, d[0].size, d[0].xs);
    }
    return acc;
}

int cpu_norm_list(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                  const void *attrs) {
    MUSA_UNUSED(ctx), MUSA_UNUSED(attrs);
    double total = 0;
    for (int i = 0; i < n_in; i++) total += tensor_sumsq(&in[i]);
    musa_store_f64(out[0].data, (musa_dtype)out[0].dtype, sqrt(total));
    return MUSA_OK;
}
