/*
 * optim.c - CPU kernels of the optimizer update rows: one pass over a
 * parameter and its state, no temporaries. The formulas and their order of
 * operations are PyTorch's (torch.optim, single-tensor path), computed in
 * the parameter's dtype, so results agree with it to rounding; eager and
 * compiled steps run this same code, so they agree bitwise.
 *
 * Operands (see ops/infer_optim.c): in = (param, state..., grad, lr), out =
 * the new (param, state...). The dispatcher hands contiguous views (CONTIG);
 * out[j] may be in[j]'s memory (INPLACE), so each element of an input is
 * read before that element of the output is written. lr is a 0-d float64;
 * step counters are 0-d float64 and count this step.
 *
 * Each row is first prepared (an update_job: its element loop, its element
 * count and the pointers and scalars the loop reads), then run. The kernels
 * of the op table run one prepared row as one parallel loop; the
 * multi-tensor form (cpu_update_multi) runs many rows of one op and one set
 * of attributes as one parallel loop over their elements laid end to end,
 * each chunk calling each row's loop on the part of the row it covers. The
 * element loops are the same in both, and an element's result depends on
 * nothing but that element's operands, so both forms agree bitwise.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "../../base/threadpool.h"
#include "optim.h"

/* ---- SGD: in (p, [buf], g, lr) ---- */

#define DEF_SGD(SUF, T, CT, LD, ST)                                                                \
    static void sgd_##SUF(void *arg, int64_t i0, int64_t i1) {                                     \
        const sgd_job *j = arg;                                                                    \
        const musa_attrs_sgd *o = j->o;                                                            \
        const T *p = j->p, *g = j->g, *buf = j->buf;                                               \
        T *p_out = j->p_out, *buf_out = j->buf_out;                                                \
        CT lr = (CT)j->lr, wd = (CT)o->weight_decay, mom = (CT)o->momentum,                        \
           damp = (CT)(1 - o->dampening);                                                          \
        const bool maximize = o->maximize, fresh = o->fresh, nesterov = o->nesterov;               \
        if (!buf) {                                                                                \
            _Pragma("omp simd") for (int64_t i = i0; i < i1; i++) {                                \
                CT pi = LD(p[i]);                                                                  \
                CT d = maximize ? -LD(g[i]) : LD(g[i]);                                            \
                if (wd != 0) d = d + pi * wd;                                                      \
                p_out[i] = ST(pi + d * -lr);                                                       \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        _Pragma("omp simd") for (int64_t i = i0; i < i1; i++) {                                    \
            CT pi = LD(p[i]);                                                                      \
            CT d = maximize ? -LD(g[i]) : LD(g[i]);                                                \
            if (wd != 0) d = d + pi * wd;                                                          \
            CT b = fresh ? d : LD(buf[i]) * mom + d * damp;                                        \
            buf_out[i] = ST(b);                                                                    \
            d = nesterov ? d + b * mom : b;                                                        \
            p_out[i] = ST(pi + d * -lr);                                                           \
        }                                                                                          \
    }
DEF_SGD(f32, float, float, LD_f32, ST_f32)
DEF_SGD(f64, double, double, LD_f64, ST_f64)
DEF_SGD(bf16, musa_bf16, float, LD_bf16, ST_bf16)
DEF_SGD(f16, musa_f16, float, LD_f16, ST_f16)

/* ---- Adam / AdamW: in (p, m, v, [vmax], step, g, lr) ---- */

/* The element loop with the row's options as constants: adam_SUF picks
 * the instance for its flags, so that each loop vectorises (with the
 * weight-decay and amsgrad branches inside, GCC 12 vectorised none). */
#define DEF_ADAM(SUF, T, CT, LD, ST, SQRT)                                                         \
    static inline __attribute__((always_inline)) void adam_loop_##SUF(                             \
        const adam_job *j, int64_t i0, int64_t i1, const bool decay_p, const bool decay_g,         \
        const bool ams) {                                                                          \
        const musa_attrs_adam *o = j->o;                                                           \
        const T *p = j->p, *g = j->g, *m = j->m, *v = j->v, *vmax = j->vmax;                       \
        T *p_out = j->p_out, *m_out = j->m_out, *v_out = j->v_out, *vmax_out = j->vmax_out;        \
        CT a1 = (CT)o->beta1, b1 = (CT)(1 - o->beta1), b2 = (CT)o->beta2, c2 = (CT)(1 - o->beta2), \
           wd = (CT)o->weight_decay;                                                               \
        CT decay = (CT)(1 - j->lr * o->weight_decay), ss = (CT)-j->step_size,                      \
           bc = (CT)j->bc2_sqrt, eps = (CT)o->eps;                                                 \
        const bool maximize = o->maximize;                                                         \
        _Pragma("omp simd") for (int64_t i = i0; i < i1; i++) {                                    \
            CT pi = LD(p[i]);                                                                      \
            CT gi = maximize ? -LD(g[i]) : LD(g[i]);                                               \
            if (decay_p) pi = pi * decay;                                                          \
            if (decay_g) gi = gi + pi * wd;                                                        \
            CT mi = LD(m[i]) * a1 + gi * b1;                                                       \
            CT vi = LD(v[i]) * b2 + c2 * gi * gi;                                                  \
            m_out[i] = ST(mi);                                                                     \
            v_out[i] = ST(vi);                                                                     \
            CT vv = vi;                                                                            \
            if (ams) {                                                                             \
                vv = LD(vmax[i]) > vv ? LD(vmax[i]) : vv;                                          \
                vmax_out[i] = ST(vv);                                                              \
            }                                                                                      \
            CT denom = SQRT(vv) / bc + eps;                                                        \
            p_out[i] = ST(pi + ss * mi / denom);                                                   \
        }                                                                                          \
    }                                                                                              \
    static void adam_##SUF(void *arg, int64_t i0, int64_t i1) {                                    \
        const adam_job *j = arg;                                                                   \
        bool wd = (CT)j->o->weight_decay != 0, dec = j->o->decoupled;                              \
        switch ((dec && wd) | (!dec && wd) << 1 | (j->vmax != NULL) << 2) {                        \
        case 0:                                                                                    \
            adam_loop_##SUF(j, i0, i1, false, false, false);                                       \
            break;                                                                                 \
        case 1:                                                                                    \
            adam_loop_##SUF(j, i0, i1, true, false, false);                                        \
            break;                                                                                 \
        case 2:                                                                                    \
            adam_loop_##SUF(j, i0, i1, false, true, false);                                        \
            break;                                                                                 \
        case 4:                                                                                    \
            adam_loop_##SUF(j, i0, i1, false, false, true);                                        \
            break;                                                                                 \
        case 5:                                                                                    \
            adam_loop_##SUF(j, i0, i1, true, false, true);                                         \
            break;                                                                                 \
        default:                                                                                   \
            adam_loop_##SUF(j, i0, i1, false, true, true);                                         \
            break;                                                                                 \
        }                                                                                          \
    }
/* sqrtf(x) is (float)sqrt((double)x) bit for bit (a double holds more than
 * twice float's precision, so the second rounding never changes it) */
DEF_ADAM(f32, float, float, LD_f32, ST_f32, sqrtf)
DEF_ADAM(f64, double, double, LD_f64, ST_f64, sqrt)
DEF_ADAM(bf16, musa_bf16, float, LD_bf16, ST_bf16, sqrtf)
DEF_ADAM(f16, musa_f16, float, LD_f16, ST_f16, sqrtf)

/* ---- RMSprop: in (p, square_avg, [buf], [grad_avg], step, g, lr) ---- */

/* As for Adam: one loop instance per combination of the options. */
#define DEF_RMS(SUF, T, CT, LD, ST, SQRT)                                                          \
    static inline __attribute__((always_inline)) void rms_loop_##SUF(                              \
        const rms_job *j, int64_t i0, int64_t i1, const bool decay_g, const bool centered,         \
        const bool momentum) {                                                                     \
        const musa_attrs_rmsprop *o = j->o;                                                        \
        const T *p = j->p, *g = j->g, *sq = j->sq, *buf = j->buf, *ga = j->gavg;                   \
        T *p_out = j->p_out, *sq_out = j->sq_out, *buf_out = j->buf_out, *ga_out = j->gavg_out;    \
        CT al = (CT)o->alpha, c = (CT)(1 - o->alpha), wd = (CT)o->weight_decay, eps = (CT)o->eps;  \
        CT lr = (CT)j->lr, mom = (CT)o->momentum;                                                  \
        const bool maximize = o->maximize;                                                         \
        _Pragma("omp simd") for (int64_t i = i0; i < i1; i++) {                                    \
            CT pi = LD(p[i]);                                                                      \
            CT gi = maximize ? -LD(g[i]) : LD(g[i]);                                               \
            if (decay_g) gi = gi + pi * wd;                                                        \
            CT si = LD(sq[i]) * al + c * gi * gi;                                                  \
            sq_out[i] = ST(si);                                                                    \
            CT avg;                                                                                \
            if (centered) {                                                                        \
                CT ai = LD(ga[i]) * al + gi * c;                                                   \
                ga_out[i] = ST(ai);                                                                \
                avg = SQRT(si + -1 * ai * ai);                                                     \
            } else {                                                                               \
                avg = SQRT(si);                                                                    \
            }                                                                                      \
            avg = avg + eps;                                                                       \
            if (momentum) {                                                                        \
                CT bi = LD(buf[i]) * mom + gi / avg;                                               \
                buf_out[i] = ST(bi);                                                               \
                p_out[i] = ST(pi + bi * -lr);                                                      \
            } else {                                                                               \
                p_out[i] = ST(pi + -lr * gi / avg);                                                \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    static void rms_##SUF(void *arg, int64_t i0, int64_t i1) {                                     \
        const rms_job *j = arg;                                                                    \
        switch (((CT)j->o->weight_decay != 0) | (j->gavg != NULL) << 1 | (j->buf != NULL) << 2) {  \
        case 0:                                                                                    \
            rms_loop_##SUF(j, i0, i1, false, false, false);                                        \
            break;                                                                                 \
        case 1:                                                                                    \
            rms_loop_##SUF(j, i0, i1, true, false, false);                                         \
            break;                                                                                 \
        case 2:                                                                                    \
            rms_loop_##SUF(j, i0, i1, false, true, false);                                         \
            break;                                                                                 \
        case 3:                                                                                    \
            rms_loop_##SUF(j, i0, i1, true, true, false);                                          \
            break;                                                                                 \
        case 4:                                                                                    \
            rms_loop_##SUF(j, i0, i1, false, false, true);                                         \
            break;                                                                                 \
        case 5:                                                                                    \
            rms_loop_##SUF(j, i0, i1, true, false, true);                                          \
            break;                                                                                 \
        case 6:                                                                                    \
            rms_loop_##SUF(j, i0, i1, false, true, true);                                          \
            break;                                                                                 \
        default:                                                                                   \
            rms_loop_##SUF(j, i0, i1, true, true, true);                                           \
            break;                                                                                 \
        }                                                                                          \
    }
DEF_RMS(f32, float, float, LD_f32, ST_f32, sqrtf)
DEF_RMS(f64, double, double, LD_f64, ST_f64, sqrt)
DEF_RMS(bf16, musa_bf16, float, LD_bf16, ST_bf16, sqrtf)
DEF_RMS(f16, musa_f16, float, LD_f16, ST_f16, sqrtf)

/* ---- prepared rows ---- */

static void sgd_prepare(update_job *j, musa_kview *out, const musa_kview *in, int n_in,
                        const void *attrs) {
    const musa_attrs_sgd *o = attrs;
    bool mom = o->momentum != 0;
    j->u.sgd = (sgd_job){in[0].data,
                         in[n_in - 2].data,
                         mom ? in[1].data : NULL,
                         out[0].data,
                         mom ? out[1].data : NULL,
                         scalar(&in[n_in - 1]),
                         o};
    j->fn = PICK(sgd, in[0].dtype);
    j->n_scal = 0;
    update_arrays(j, SGD_ARRS, SGD_OUT, in[0].dtype);
}

static void adam_prepare(update_job *j, musa_kview *out, const musa_kview *in, int n_in,
                         const void *attrs) {
    const musa_attrs_adam *o = attrs;
    int s = o->amsgrad ? 4 : 3; /* the step counter's position */
    double step = scalar(&in[s]) + 1, lr = scalar(&in[n_in - 1]);
    double bc1 = 1 - pow(o->beta1, step), bc2 = 1 - pow(o->beta2, step);
    j->u.adam = (adam_job){in[0].data,
                           in[n_in - 2].data,
                           in[1].data,
                           in[2].data,
                           o->amsgrad ? in[3].data : NULL,
                           out[0].data,
                           out[1].data,
                           out[2].data,
                           o->amsgrad ? out[3].data : NULL,
                           lr,
                           lr / bc1,
                           sqrt(bc2),
                           o};
    j->fn = PICK(adam, in[0].dtype);
    j->n_scal = 1;
    update_arrays(j, ARRS, OUT_ARR, in[0].dtype);
    j->scal_out[0] = (double *)out[s].data;
    j->scal[0] = step;
}

static void rms_prepare(update_job *j, musa_kview *out, const musa_kview *in, int n_in,
                        const void *attrs) {
    const musa_attrs_rmsprop *o = attrs;
    bool mom = o->momentum > 0;
    int b = mom ? 2 : -1, a = o->centered ? 2 + mom : -1, s = 2 + mom + o->centered;
    j->u.rms = (rms_job){in[0].data,
                         in[n_in - 2].data,
                         in[1].data,
                         b >= 0 ? in[b].data : NULL,
                         a >= 0 ? in[a].data : NULL,
                         out[0].data,
                         out[1].data,
                         b >= 0 ? out[b].data : NULL,
                         a >= 0 ? out[a].data : NULL,
                         scalar(&in[n_in - 1]),
                         o};
    j->fn = PICK(rms, in[0].dtype);
    j->n_scal = 1;
    update_arrays(j, ARRS, OUT_ARR, in[0].dtype);
    j->scal_out[0] = (double *)out[s].data;
    j->scal[0] = scalar(&in[s]) + 1;
}

/* ---- the kernels of the op table: one row ---- */

/* Write a row's scalar state (step counters and the like) once its
 * elements are done. */
static void store_scalars(const update_job *j) {
    for (int k = 0; k < j->n_scal; k++) *j->scal_out[k] = j->scal[k];
}

/* ---- streamed parameters ---- */

/* An update writing at least this many bytes of parameters, on more than
 * one thread, writes them with non-temporal stores. The GEMMs of the step
 * read a weight on every thread, so each core holds lines of it; storing
 * into a line the other core holds costs this 2-core machine several times
 * a store into its own (bench_cores). Measured there on 2 MiB, with an
 * SGD-like loop: 379 us with plain stores after the other core read the
 * parameter, 189 us with non-temporal ones; but 72 against 100 us when the
 * core itself had read it last, and 83 against 120 after it was evicted
 * (so small updates, and single-threaded runs, keep plain stores). In
 * GPT-tiny's compiled step (1.8 MiB of parameters) SGD took 219-234 us,
 * now 122-137 (profiled; blocks of 1 KiB ran as fast, of 16 KiB slower). */
#define STREAM_MIN_BYTES (1 << 20)
#define STAGE_BYTES      2048

static bool streamed(double bytes) {
    return bytes >= STREAM_MIN_BYTES && musa_pool_intra_threads() > 1 &&
           !getenv("MUSA_UPDATE_NO_STREAM"); /* the plain path, forced (tests compare them) */
}

/* n bytes from src to dst (64-byte aligned) by non-temporal stores. */
static void stream_copy(char *dst, const char *src, size_t n) {
    size_t i = 0;
#if defined(__AVX512F__)
    for (; i + 64 <= n; i += 64)
        _mm512_stream_si512((void *)(dst + i), _mm512_load_si512((const void *)(src + i)));
#endif
#if defined(__SSE2__)
    for (; i + 16 <= n; i += 16)
        _mm_stream_si128((__m128i *)(void *)(dst + i),
                         _mm_load_si128((const __m128i *)(const void *)(src + i)));
#endif
    memcpy(dst + i, src + i, n - i);
}

/* Elements [b, e) of a row. Streamed, the element loop runs a block at a
 * time with the row's arrays moved to the block and the new parameter
 * written to a buffer in cache, which then goes to memory by non-temporal
 * stores: the same loop on the same values, so the same bits. */
static void update_part(update_job *j, int64_t b, int64_t e) {
    if (!j->stream) {
        j->fn(&j->u, b, e);
        return;
    }
    char *out;
    memcpy(&out, (char *)&j->u + (size_t)j->out_arr * sizeof(void *), sizeof out);
    size_t es = j->es, gap = (64 - ((uintptr_t)(out + (size_t)b * es) & 63)) & 63;
    if (gap % es) { /* elements that straddle lines: no line is the row's alone */
        j->fn(&j->u, b, e);
        return;
    }
    int64_t h = MUSA_MIN(e, b + (int64_t)(gap / es)); /* up to the first whole line */
    if (h > b) j->fn(&j->u, b, h);
    _Alignas(64) char stage[STAGE_BYTES];
    int64_t blk = (int64_t)(STAGE_BYTES / es);
    for (int64_t s = h; s < e; s += blk) {
        int64_t n = MUSA_MIN(blk, e - s);
        __typeof__(j->u) c = j->u;
        for (int k = 0; k < j->n_arr; k++) {
            char *p, *slot = (char *)&c + (size_t)k * sizeof(void *);
            memcpy(&p, slot, sizeof p);
            if (!p) continue;
            p = k == j->out_arr ? stage : p + (size_t)s * es;
            memcpy(slot, &p, sizeof p);
        }
        j->fn(&c, 0, n);
        stream_copy(out + (size_t)s * es, stage, (size_t)n * es);
    }
#if defined(__SSE2__)
    _mm_sfence(); /* the streamed stores are visible before the loop's join */
#endif
}

static void row_range(void *arg, int64_t i0, int64_t i1) {
    update_part(arg, i0, i1);
}

int cpu_update_row(prepare_fn prepare, musa_kview *out, const musa_kview *in, int n_in,
                   const void *attrs) {
    update_job j;
    prepare(&j, out, in, n_in, attrs);
    j.numel = musa_kview_numel(&in[0]);
    j.stream = streamed((double)j.numel * (double)j.es);
    musa_parallel_for(j.numel, OPTIM_GRAIN, row_range, &j);
    store_scalars(&j);
    return MUSA_OK;
}

int cpu_sgd_update(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                   const void *attrs) {
    (void)ctx;
    return cpu_update_row(sgd_prepare, out, in, n_in, attrs);
}

int cpu_adam_update(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                    const void *attrs) {
    (void)ctx;
    return cpu_update_row(adam_prepare, out, in, n_in, attrs);
}

int cpu_rmsprop_update(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                       const void *attrs) {
    (void)ctx;
    return cpu_update_row(rms_prepare, out, in, n_in, attrs);
}

/* ---- the multi-tensor form: many rows, one parallel loop ---- */

/* The kernels that have a multi-tensor form, and how each prepares a row. */
static prepare_fn prepare_of(musa_kernel_fn kernel) {
    if (kernel == cpu_sgd_update) return sgd_prepare;
    if (kernel == cpu_adam_update) return adam_prepare;
    if (kernel == cpu_rmsprop_update) return rms_prepare;
    return cpu_update_more_prepare(kernel);
}

bool cpu_update_has_multi(musa_kernel_fn kernel) {
    return prepare_of(kernel) != NULL;
}

size_t cpu_update_multi_workspace(int n_rows) {
    return n_rows > 0 ? sizeof(update_job) * (size_t)n_rows : 0;
}

typedef struct multi_job {
    update_job *rows; /* [n], their starts ascending */
    int n;
} multi_job;

/* Elements [i0, i1) of the rows laid end to end: each row's loop on the
 * part of it the range covers. */
static void multi_range(void *arg, int64_t i0, int64_t i1) {
    const multi_job *m = arg;
    int lo = 0, hi = m->n - 1; /* the last row starting at or before i0 */
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (m->rows[mid].start <= i0)
            lo = mid;
        else
            hi = mid - 1;
    }
    for (int r = lo; r < m->n && m->rows[r].start < i1; r++) {
        update_job *j = &m->rows[r];
        int64_t b = MUSA_MAX(i0, j->start) - j->start;
        int64_t e = MUSA_MIN(i1, j->start + j->numel) - j->start;
        if (b < e) update_part(j, b, e);
    }
}

int cpu_update_multi(const musa_kctx *ctx, musa_kernel_fn kernel, int n_rows,
                     musa_kview *const *rows, int n_in, const void *attrs) {
    prepare_fn prepare = prepare_of(kernel);
    if (!prepare) return musa_err(MUSA_ERR_RUNTIME, "[%s] has no multi-tensor form", ctx->op_name);
    if (n_rows <= 0) return MUSA_OK;
    if (!ctx->scratch || ctx->scratch_bytes < cpu_update_multi_workspace(n_rows))
        return musa_err(MUSA_ERR_RUNTIME, "[%s] multi-tensor update without its workspace",
                        ctx->op_name);
    int n_out = n_in - 2;
    multi_job m = {ctx->scratch, n_rows};
    int64_t total = 0;
    double bytes = 0; /* of new parameters */
    for (int r = 0; r < n_rows; r++) {
        update_job *j = &m.rows[r];
        prepare(j, rows[r], rows[r] + n_out, n_in, attrs);
        j->numel = musa_kview_numel(&rows[r][n_out]);
        j->start = total;
        total += j->numel;
        bytes += (double)j->numel * (double)j->es;
    }
    bool stream = streamed(bytes);
    for (int r = 0; r < n_rows; r++) m.rows[r].stream = stream;
    musa_parallel_for(total, OPTIM_GRAIN, multi_range, &m);
    for (int r = 0; r < n_rows; r++) store_scalars(&m.rows[r]);
    return MUSA_OK;
}
