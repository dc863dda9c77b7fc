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
