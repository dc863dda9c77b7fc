/*
 * fill.c - creation kernels (full, arange, linspace, eye) and the random
 * ones (rand, randn, randint, bernoulli; the samplers with rejection loops
 * are in sample.c).
 *
 * Random element i of a call is a pure function of (seed, the first block
 * reserved for the call, i): float32-class uniforms use one 32-bit lane of
 * Philox block i/4, float64 uniforms two lanes of block i/2; normals use
 * Box-Muller on a pair of uniforms from block i/2 (i for float64). So the
 * values never depend on how the work is split between threads.
 */
#include <math.h>

#include "../../base/threadpool.h"
#include "elem.h"
#include "kernels.h"
#include "random.h"
#include "vmath.h"

typedef musa_value_fn value_fn;

typedef struct {
    const musa_kview *v;
    value_fn fn;
    const void *ctx;
    size_t es;
    bool contig;
} fill_job;

static void fill_range(void *arg, int64_t b, int64_t e) {
    const fill_job *j = arg;
    musa_dtype dt = (musa_dtype)j->v->dtype;
    for (int64_t i = b; i < e; i++) {
        char *p = j->contig ? j->v->data + i * (int64_t)j->es : musa_kview_elem(j->v, i, j->es);
        musa_store_f64(p, dt, j->fn(j->ctx, i));
    }
}

void musa_cpu_generate(const musa_kview *v, value_fn fn, const void *ctx, int64_t grain) {
    fill_job j = {v, fn, ctx, musa_dtype_info[v->dtype].size, musa_kview_contiguous(v)};
    musa_parallel_for(musa_kview_numel(v), grain, fill_range, &j);
}

/* (a contiguous run as its own loop, which vectorises: with the stride
 * left variable, zeros of 768 KB took 38 us, one scalar store a cycle) */
#define DEF_FILL(SN, T, C, E)                                                                      \
    static void fill_##SN(void *ctx, int64_t n, char **p, const int64_t *s) {                      \
        T v = *(const T *)ctx;                                                                     \
        if (s[0] == (int64_t)sizeof(T)) {                                                          \
            T *o = (T *)p[0];                                                                      \
            for (int64_t i = 0; i < n; i++) o[i] = v;                                              \
            return;                                                                                \
        }                                                                                          \
        for (int64_t i = 0; i < n; i++) *(T *)(p[0] + i * s[0]) = v;                               \
    }
MUSA_FOR_DTYPES(DEF_FILL)

#include "iter.h"

void musa_cpu_fill(const musa_kview *v, double value) {
    static const musa_loop_fn loops[MUSA_DTYPE_COUNT] = {
        [MUSA_DTYPE_FLOAT32] = fill_f32, [MUSA_DTYPE_FLOAT64] = fill_f64,
        [MUSA_DTYPE_FLOAT16] = fill_f16, [MUSA_DTYPE_BFLOAT16] = fill_bf16,
        [MUSA_DTYPE_INT64] = fill_i64,   [MUSA_DTYPE_INT32] = fill_i32,
        [MUSA_DTYPE_INT8] = fill_i8,     [MUSA_DTYPE_UINT8] = fill_u8,
        [MUSA_DTYPE_INT16] = fill_i16,   [MUSA_DTYPE_BOOL] = fill_b};
    _Alignas(8) char scalar[8];
    musa_store_f64(scalar, (musa_dtype)v->dtype, value);
    musa_iter it;
    musa_iter_init(&it, &v, 1);
    musa_iter_run(&it, MUSA_GRAIN_CHEAP, loops[v->dtype], scalar);
}

int cpu_empty(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
              const void *attrs) {
    MUSA_UNUSED(ctx), MUSA_UNUSED(out), MUSA_UNUSED(in), MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    return MUSA_OK;
}

int cpu_full(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
             const void *attrs) {
    MUSA_UNUSED(ctx), MUSA_UNUSED(in), MUSA_UNUSED(n_in);
    musa_cpu_fill(&out[0], ((const musa_attrs_full *)attrs)->value);
    return MUSA_OK;
}

static double arange_value(const void *ctx, int64_t i) {
    const musa_attrs_arange *a = ctx;
    return a->start + (double)i * a->step;
}

int cpu_arange(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
               const void *attrs) {
    MUSA_UNUSED(ctx), MUSA_UNUSED(in), MUSA_UNUSED(n_in);
    musa_cpu_generate(&out[0], arange_value, attrs, MUSA_GRAIN_CHEAP);
    return MUSA_OK;
}

/* Symmetric from both ends, so the last value is exactly `end`. For an
 * integer dtype the ends are first converted to it (toward zero), as
 * PyTorch does: linspace(-2, 0.5, 5) in int32 steps from -2 to 0 by 0.5,
 * giving -2, -1, -1, 0, 0 (fuzz-py seed 4973: -2, -1, 0, 0, 0 before). */
static double linspace_value(const void *ctx, int64_t i) {
    const musa_attrs_linspace *a = ctx;
    bool integral = !musa_is_float((musa_dtype)a->dtype) && a->dtype != MUSA_DTYPE_BOOL;
    double start = integral ? trunc(a->start) : a->start;
    double end = integral ? trunc(a->end) : a->end;
    if (a->steps == 1) return start;
    double step = (end - start) / (double)(a->steps - 1);
    return i < a->steps / 2 ? start + step * (double)i : end - step * (double)(a->steps - 1 - i);
}

int cpu_linspace(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                 const void *attrs) {
    MUSA_UNUSED(ctx), MUSA_UNUSED(in), MUSA_UNUSED(n_in);
    musa_cpu_generate(&out[0], linspace_value, attrs, MUSA_GRAIN_CHEAP);
    return MUSA_OK;
}

static double eye_value(const void *ctx, int64_t i) {
    int64_t m = *(const int64_t *)ctx;
    return i / m == i % m;
}

int cpu_eye(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
            const void *attrs) {
    MUSA_UNUSED(ctx), MUSA_UNUSED(in), MUSA_UNUSED(n_in);
    int64_t m = ((const musa_attrs_eye *)attrs)->m;
    if (m > 0) musa_cpu_generate(&out[0], eye_value, &m, MUSA_GRAIN_CHEAP);
    return MUSA_OK;
}

/* ---- random ---- */

typedef struct {
    uint64_t seed, first;
    double low, range;   /* randint */
    const musa_kview *p; /* bernoulli probabilities */
} rng_ctx;

static inline double u32_unit(uint32_t u) {
    return (double)(u >> 8) * (1.0 / 16777216.0);
}
static inline double u64_unit(uint32_t hi, uint32_t lo) {
    return (double)((((uint64_t)hi << 32) | lo) >> 11) * (1.0 / 9007199254740992.0);
}

static double rand_f32(const void *ctx, int64_t i) {
    const rng_ctx *c = ctx;
    uint32_t r[4];
    musa_philox(c->seed, c->first + (uint64_t)i / 4, r);
    return u32_unit(r[i % 4]);
}

static double rand_f64(const void *ctx, int64_t i) {
    const rng_ctx *c = ctx;
    uint32_t r[4];
    musa_philox(c->seed, c->first + (uint64_t)i / 2, r);
    int l = (int)(i % 2) * 2;
    return u64_unit(r[l], r[l + 1]);
}

static double randn_f32(const void *ctx, int64_t i) {
    const rng_ctx *c = ctx;
    uint32_t r[4];
    musa_philox(c->seed, c->first + (uint64_t)i / 2, r);
    int l = (int)(i % 2) * 2;
    double u1 = 1.0 - u32_unit(r[l]), u2 = u32_unit(r[l + 1]);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

static double randn_f64(const void *ctx, int64_t i) {
    const rng_ctx *c = ctx;
    uint32_t r[4];
    musa_philox(c->seed, c->first + (uint64_t)i, r);
    double u1 = 1.0 - u64_unit(r[0], r[1]), u2 = u64_unit(r[2], r[3]);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

static double randint_value(const void *ctx, int64_t i) {
    const rng_ctx *c = ctx;
    uint32_t r[4];
    musa_philox(c->seed, c->first + (uint64_t)i / 2, r);
    int l = (int)(i % 2) * 2;
    uint64_t v = ((uint64_t)r[l] << 32) | r[l + 1];
    return c->low + (double)(v % (uint64_t)c->range);
}

static double bernoulli_value(const void *ctx, int64_t i) {
    const rng_ctx *c = ctx;
    size_t es = musa_dtype_info[c->p->dtype].size;
    double p = musa_load_f64(musa_kview_elem(c->p, i, es), (musa_dtype)c->p->dtype);
    return rand_f64(ctx, i) < p ? 1.0 : 0.0;
}

/* ---- rand and randn into contiguous float32 and float64 ----
 *
 * The same values as rand_f32 ... randn_f64 above, element by element, but
 * each Philox block computed once for the elements it serves (4 float32
 * uniforms, 2 float32 normals...), BLOCKS blocks at a time in a loop that
 * vectorises, and Box-Muller's log and cos through the vector math
 * functions for float32. Element by element through the value functions, a
 * 4096 x 1024 float32 randn took 88.9 ms (PyTorch 13.2) and rand 24.6
 * (10.5). */
#define BLOCKS 64

typedef struct {
    char *out;
    uint64_t seed, first;
    bool f64, normal;
} rand_job;

/* Philox blocks first .. first + BLOCKS - 1 under seed, lane j of block k at
 * r[j][k]. */
static void philox_blocks(uint64_t seed, uint64_t first, uint32_t r[4][BLOCKS]) {
    _Pragma("omp simd") for (int k = 0; k < BLOCKS; k++) {
        uint64_t block = first + (uint64_t)k;
        uint32_t c0 = (uint32_t)block, c1 = (uint32_t)(block >> 32), c2 = 0, c3 = 0;
        uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
        MUSA_PHILOX_ROUNDS(c0, c1, c2, c3, k0, k1)
        r[0][k] = c0, r[1][k] = c1, r[2][k] = c2, r[3][k] = c3;
    }
}

/* one float64 normal through the scalar log and cos: not inlined, so no
 * compiler turns a loop of it into calls of the vector functions */
__attribute__((noinline)) static double box_muller_one(double u1, double u2) {
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* Box-Muller of the uniform pairs (u1 in (0, 1], u2), n at most BLOCKS * 4:
 * through the vector log and cos for float32 outputs, the scalar ones for
 * float64. The vector functions' doubles differ from the scalar ones' in
 * the last place for about half the inputs, so a float32 normal differs
 * from the element-by-element value where that double lies within a place
 * of a float32 rounding boundary (about 2^-29 of them: none of the 8.4M
 * float32 normals compared did); float64 normals would change in their
 * last bits, so they keep the scalar functions. */
static void box_muller(double *z, const double *u1, const double *u2, int n, bool f64) {
    if (f64) {
        for (int k = 0; k < n; k++) z[k] = box_muller_one(u1[k], u2[k]);
        return;
    }
    MUSA_SIMD_MATH(double)
    for (int k = 0; k < n; k++) z[k] = sqrt(-2.0 * log(u1[k])) * cos(2.0 * M_PI * u2[k]);
}

/* Elements [b, e) of the output. Element i's block and lanes are those of
 * the value functions: float32 uniforms lane i % 4 of block i / 4; float64
 * uniforms lanes 2 (i % 2), +1 of block i / 2; float32 normals the same
 * lane pair; float64 normals all four lanes of block i. */
static void rand_range(void *arg, int64_t b, int64_t e) {
    const rand_job *j = arg;
    int per = j->normal ? (j->f64 ? 1 : 2) : (j->f64 ? 2 : 4); /* elements a block serves */
    uint32_t r[4][BLOCKS];
    double u1[BLOCKS * 4], u2[BLOCKS * 4], z[BLOCKS * 4];
    for (int64_t i0 = b - b % per; i0 < e; i0 += (int64_t)per * BLOCKS) {
        philox_blocks(j->seed, j->first + (uint64_t)(i0 / per), r);
        int n = per * BLOCKS;
        for (int k = 0; k < n; k++) {
            int blk = k / per, l = k % per;
            if (!j->normal && !j->f64)
                u1[k] = u32_unit(r[l][blk]);
            else if (!j->f64 || !j->normal) /* float64 uniforms, float32 normals: lanes 2l, 2l+1 */
                u1[k] = j->f64 ? u64_unit(r[2 * l][blk], r[2 * l + 1][blk])
                               : 1.0 - u32_unit(r[2 * l][blk]),
                u2[k] = u32_unit(r[2 * l + 1][blk]);
            else
                u1[k] = 1.0 - u64_unit(r[0][blk], r[1][blk]),
                u2[k] = u64_unit(r[2][blk], r[3][blk]);
        }
        const double *v = u1;
        if (j->normal) box_muller(z, u1, u2, n, j->f64), v = z;
        int64_t lo = i0 < b ? b : i0, hi = i0 + n < e ? i0 + n : e;
        if (j->f64)
            for (int64_t i = lo; i < hi; i++) ((double *)j->out)[i] = v[i - i0];
        else
            for (int64_t i = lo; i < hi; i++) ((float *)j->out)[i] = (float)v[i - i0];
    }
}

/* rand or randn into a contiguous float32 or float64 output; false where
 * the output is something else (the value functions then fill it) */
static bool rand_fast(const musa_kview *out, bool normal) {
    bool f64 = out->dtype == MUSA_DTYPE_FLOAT64;
    if ((!f64 && out->dtype != MUSA_DTYPE_FLOAT32) || !musa_kview_contiguous(out)) return false;
    uint64_t n = (uint64_t)musa_kview_numel(out), per = normal ? (f64 ? 1 : 2) : (f64 ? 2 : 4);
    rand_job j = {.out = out->data, .f64 = f64, .normal = normal};
    musa_rng_reserve((n + per - 1) / per, &j.seed, &j.first);
    /* chunks of whole block runs, so no block is computed twice */
    musa_parallel_for((int64_t)n, (int64_t)per * BLOCKS, rand_range, &j);
    return true;
}

static void run_random(const musa_kview *out, value_fn fn, uint64_t blocks_per_elem_num,
                       uint64_t blocks_per_elem_den, rng_ctx *c) {
    uint64_t n = (uint64_t)musa_kview_numel(out);
    musa_rng_reserve((n * blocks_per_elem_num + blocks_per_elem_den - 1) / blocks_per_elem_den,
                     &c->seed, &c->first);
    musa_cpu_generate(out, fn, c, MUSA_GRAIN_MATH);
}

int cpu_rand(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
             const void *attrs) {
    MUSA_UNUSED(ctx), MUSA_UNUSED(in), MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    rng_ctx c = {0};
    if (rand_fast(&out[0], false)) return MUSA_OK;
    if (out[0].dtype == MUSA_DTYPE_FLOAT64)
        run_random(&out[0], rand_f64, 1, 2, &c);
    else
        run_random(&out[0], rand_f32, 1, 4, &c);
    return MUSA_OK;
}

int cpu_randn(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
              const void *attrs) {
    MUSA_UNUSED(ctx), MUSA_UNUSED(in), MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    rng_ctx c = {0};
    if (rand_fast(&out[0], true)) return MUSA_OK;
    if (out[0].dtype == MUSA_DTYPE_FLOAT64)
        run_random(&out[0], randn_f64, 1, 1, &c);
    else
        run_random(&out[0], randn_f32, 1, 2, &c);
    return MUSA_OK;
}

int cpu_randint(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                const void *attrs) {
    MUSA_UNUSED(ctx), MUSA_UNUSED(in), MUSA_UNUSED(n_in);
    const musa_attrs_random *a = attrs;
    rng_ctx c = {.low = a->low, .range = a->high - a->low};
    run_random(&out[0], randint_value, 1, 2, &c);
    return MUSA_OK;
}

int cpu_bernoulli(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                  const void *attrs) {
    MUSA_UNUSED(ctx), MUSA_UNUSED(n_in), MUSA_UNUSED(attrs);
    rng_ctx c = {.p = &in[0]};
    run_random(&out[0], bernoulli_value, 1, 2, &c);
    return MUSA_OK;
}
