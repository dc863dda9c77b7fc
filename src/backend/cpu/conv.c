/*
 * conv.c - 2-d convolution by im2col + GEMM: forward, and the two backward
 * ops (input and weight gradients).
 *
 * Per image and group, the receptive fields are unfolded into a
 * (C/groups * kh * kw) x (Ho * Wo) matrix ("cols") and multiplied with the
 * weight. cols is bounded by one image: images are spread over threads,
 * each with its own slot of the workspace (single-threaded GEMMs inside), or
 * run one after another with multi-threaded GEMMs when there are fewer
 * images than threads. 1x1 stride-1 unpadded convolutions use the input as
 * cols directly. float32 GEMMs run on oneDNN, float64 on BLAS (float64 runs
 * its images serially: BLAS threads do not nest).
 *
 * float32 convolutions go to oneDNN's convolution primitives instead
 * (conv_dnnl.c) whenever oneDNN can build one; im2col stays as the float64
 * path, the fallback, and the reference (MUSA_CONV_IM2COL=1 forces it).
 */
#include "conv_dnnl.h"
#include "matmul_dnnl.h"
#include "nnutil.h"

typedef struct {
    int64_t N, C, H, W; /* input */
    int64_t Co, kh, kw; /* weight (Co, C/groups, kh, kw) */
    int64_t Ho, Wo;     /* output spatial */
    int64_t sh, sw, ph, pw, dh, dw, groups;
    int64_t Cg, Cog, K, P; /* per group: channels in/out, K = Cg kh kw, P = Ho Wo */
    bool direct;           /* 1x1, stride 1, no padding: cols = input */
    bool cl;               /* channels_last: x, y and their gradients are NHWC */
    bool wino;             /* winograd: oneDNN's Winograd primitive where it has one */
    int cdt;
    size_t es;
} conv_geom;

static void geom(conv_geom *g, const int64_t *xs, const int64_t *ws, const musa_attrs_conv *a,
                 int cdt) {
    g->cl = a->channels_last;
    g->wino = a->winograd;
    g->N = xs[0], g->C = xs[g->cl ? 3 : 1], g->H = xs[g->cl ? 1 : 2], g->W = xs[g->cl ? 2 : 3];
    g->Co = ws[0], g->kh = ws[2], g->kw = ws[3];
    g->sh = a->stride.v[0], g->sw = a->stride.v[1];
    g->ph = a->padding.v[0], g->pw = a->padding.v[1];
    g->dh = a->dilation.v[0], g->dw = a->dilation.v[1];
    g->groups = a->groups;
    g->Ho = (g->H + 2 * g->ph - g->dh * (g->kh - 1) - 1) / g->sh + 1;
    g->Wo = (g->W + 2 * g->pw - g->dw * (g->kw - 1) - 1) / g->sw + 1;
    g->Cg = g->C / g->groups, g->Cog = g->Co / g->groups;
    /* saturating: a weight of no output channels has no elements, whatever
     * kh and kw are, so K could be 2^62 (and overflow past it): its column
     * buffer then wrapped to 0 bytes (nnutil.h) */
    g->K = musa_sat_mul_i64(musa_sat_mul_i64(g->Cg, g->kh), g->kw);
    g->P = musa_sat_mul_i64(g->Ho, g->Wo);
    g->direct = g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;
    g->cdt = cdt;
    g->es = nn_es(cdt);
}

/* oneDNN's workspace for this convolution, or (size_t)-1 to use im2col.
 * With winograd, float32, the Winograd primitive where oneDNN builds one
 * for the shape (s->wino says whether), else the direct one. */
static size_t dnnl_ws_as(const conv_geom *g, int kind, bool bias, musa_conv_shape *s, bool bf16) {
    if ((!bf16 && g->cdt != MUSA_DTYPE_FLOAT32) || !g->N || !g->C || !g->Co || !g->P)
        return (size_t)-1;
    /* Winograd only where it is faster here: 64 channels or more in and out,
     * in whole blocks of 16 (3x3, N 8 or 32: 1.0-2.2x faster from 64
     * channels, 0.7-1.3x at 32, 0.4-0.9x at 16, 0.2x with a network's 3
     * input channels; docs/benchmarks.md) */
    bool wino = g->wino && !bf16 && g->groups == 1 && g->kh == 3 && g->kw == 3 && g->sh == 1 &&
                g->sw == 1 && g->dh == 1 && g->dw == 1 && g->C >= 64 && g->Co >= 64 &&
                g->C % 16 == 0 && g->Co % 16 == 0;
    *s = (musa_conv_shape){g->N,  g->C,  g->H,  g->W,  g->Co, g->kh,     g->kw, g->Ho, g->Wo, g->sh,
                           g->sw, g->ph, g->pw, g->dh, g->dw, g->groups, bf16,  g->cl, wino};
    size_t ws = musa_dnnl_conv_workspace(kind, s, bias);
    if (ws != (size_t)-1 || !s->wino) return ws;
    s->wino = 0;
    return musa_dnnl_conv_workspace(kind, s, bias);
}

static size_t dnnl_ws(const conv_geom *g, int kind, bool bias, musa_conv_shape *s) {
    return dnnl_ws_as(g, kind, bias, s, false);
}

/* Run on oneDNN if dnnl_ws() said so; false means "use im2col". im2col has
 * no channels-last form: such a convolution fails cleanly instead (the
 * layout pass only makes those oneDNN runs, so this takes a switch such as
 * MUSA_CONV_IM2COL flipped after planning, or a hand-built call). */
static bool try_dnnl(const conv_geom *g, int kind, const void *a, const void *b, const void *c,
                     void *out, char *ws, const musa_kctx *ctx, int *rc) {
    musa_conv_shape s;
    size_t need = dnnl_ws(g, kind, c != NULL, &s);
    size_t have = ctx->scratch_bytes - (size_t)(ws - (char *)ctx->scratch);
    /* with no images the reference path touches no activation (it only
     * zeroes a weight gradient), so it serves channels-last too */
    if ((need == (size_t)-1 || need > have) && g->cl && g->N) {
        *rc = musa_err(MUSA_ERR_NOT_IMPLEMENTED,
                       "[%s] channels_last runs only on oneDNN's primitives, and oneDNN has none "
                       "for this convolution (%s, N %lld, C %lld, H %lld, W %lld, groups %lld)",
                       ctx->op_name, musa_dtype_name((musa_dtype)g->cdt), (long long)g->N,
                       (long long)g->C, (long long)g->H, (long long)g->W, (long long)g->groups);
        return true;
    }
    if (need == (size_t)-1 || need > have) return false;
    *rc = musa_dnnl_conv(kind, &s, a, b, c, out, ws, have);
    if (*rc) *rc = musa_err(*rc, "[%s] oneDNN convolution primitive failed", ctx->op_name);
    return true;
}

/* How many workspace slots run concurrently (one per image in flight). */
static int64_t conv_slots(const conv_geom *g) {
    if (g->cdt == MUSA_DTYPE_FLOAT64) return 1;
    int64_t t = musa_pool_intra_threads();
    return g->N < t ? 1 : t;
}

#define DEF_IM2COL(SUF, T)                                                                         \
    static void im2col_##SUF(const conv_geom *g, const T *x, T *cols) {                            \
        for (int64_t c = 0; c < g->Cg; c++)                                                        \
            for (int64_t ky = 0; ky < g->kh; ky++)                                                 \
                for (int64_t kx = 0; kx < g->kw; kx++) {                                           \
                    T *row = cols + ((c * g->kh + ky) * g->kw + kx) * g->P;                        \
                    int64_t xo = kx * g->dw - g->pw;                                               \
                    for (int64_t oy = 0; oy < g->Ho; oy++) {                                       \
                        int64_t iy = oy * g->sh - g->ph + ky * g->dh;                              \
                        T *r = row + oy * g->Wo;                                                   \
                        if (iy < 0 || iy >= g->H) {                                                \
                            memset(r, 0, sizeof(T) * (size_t)g->Wo);                               \
                            continue;                                                              \
                        }                                                                          \
                        const T *xr = x + (c * g->H + iy) * g->W;                                  \
                        if (g->sw == 1) { /* valid columns form one contiguous run */              \
                            int64_t a = xo < 0 ? -xo : 0, b = g->W - xo;                           \
                            if (b > g->Wo) b = g->Wo;                                              \
                            if (a > g->Wo) a = g->Wo;                                              \
                            for (int64_t ox = 0; ox < a; ox++) r[ox] = 0;                          \
                            if (b > a) memcpy(r + a, xr + a + xo, sizeof(T) * (size_t)(b - a));    \
                            for (int64_t ox = b > a ? b : a; ox < g->Wo; ox++) r[ox] = 0;          \
                        } else {                                                                   \
                            for (int64_t ox = 0; ox < g->Wo; ox++) {                               \
                                int64_t ix = ox * g->sw + xo;                                      \
                                r[ox] = (ix >= 0 && ix < g->W) ? xr[ix] : (T)0;                    \
                            }                                                                      \
                        }                                                                          \
                    }                                                                              \
                }                                                                                  \
    }                                                                                              \
    static void col2im_##SUF(const conv_geom *g, const T *cols, T *x) {                            \
        for (int64_t c = 0; c < g->Cg; c++)                                                        \
            for (int64_t ky = 0; ky < g->kh; ky++)                                                 \
                for (int64_t kx = 0; kx < g->kw; kx++) {                                           \
                    const T *row = cols + ((c * g->kh + ky) * g->kw + kx) * g->P;                  \
                    int64_t xo = kx * g->dw - g->pw;                                               \
                    for (int64_t oy = 0; oy < g->Ho; oy++) {                                       \
                        int64_t iy = oy * g->sh - g->ph + ky * g->dh;                              \
                        if (iy < 0 || iy >= g->H) continue;                                        \
                        const T *r = row + oy * g->Wo;                                             \
                        T *xr = x + (c * g->H + iy) * g->W;                                        \
                        for (int64_t ox = 0; ox < g->Wo; ox++) {                                   \
                            int64_t ix = ox * g->sw + xo;                                          \
                            if (ix >= 0 && ix < g->W) xr[ix] += r[ox];                             \
                        }                                                                          \
                    }                                                                              \
                }                                                                                  \
    }
DEF_IM2COL(f32, float)
DEF_IM2COL(f64, double)

static void im2col(const conv_geom *g, const char *x, char *cols) {
    if (g->cdt == MUSA_DTYPE_FLOAT32)
        im2col_f32(g, (const float *)x, (float *)cols);
    else
        im2col_f64(g, (const double *)x, (double *)cols);
}
static void col2im(const conv_geom *g, const char *cols, char *x) {
    if (g->cdt == MUSA_DTYPE_FLOAT32)
        col2im_f32(g, (const float *)cols, (float *)x);
    else
        col2im_f64(g, (const double *)cols, (double *)x);
}

/* Work over a range of images with one scratch slot. */
typedef struct {
    const conv_geom *g;
    const char *x, *w, *b; /* forward: input, weight, bias | bwd-input: gy, w | bwd-weight: x, gy */
    char *y;               /* output */
    char *scratch;         /* slots of slot_bytes */
    size_t slot_bytes;
    int64_t per_slot; /* images per slot */
    int rc;
} conv_job;

/* Slot s of the scratch; NULL when slots are empty (direct 1x1 convolutions
 * ask for no scratch, and then ctx->scratch is NULL too). */
static char *slot_at(const conv_job *j, int64_t s) {
    return j->slot_bytes ? j->scratch + (size_t)s * j->slot_bytes : NULL;
}

static int add_bias(const conv_geom *g, char *y, const char *b) {
    for (int64_t c = 0; c < g->Co; c++)
        for (int64_t p = 0; p < g->P; p++) {
            if (g->cdt == MUSA_DTYPE_FLOAT32)
                ((float *)y)[c * g->P + p] += ((const float *)b)[c];
            else
                ((double *)y)[c * g->P + p] += ((const double *)b)[c];
        }
    return MUSA_OK;
}

static void fwd_range(void *arg, int64_t s0, int64_t s1) {
    conv_job *j = arg;
    const conv_geom *g = j->g;
    for (int64_t s = s0; s < s1; s++) {
        char *cols = slot_at(j, s);
        int64_t n0 = s * j->per_slot, n1 = n0 + j->per_slot < g->N ? n0 + j->per_slot : g->N;
        for (int64_t n = n0; n < n1; n++)
            for (int64_t grp = 0; grp < g->groups; grp++) {
                const char *xg = j->x + (size_t)((n * g->C + grp * g->Cg) * g->H * g->W) * g->es;
                const char *wg = j->w + (size_t)(grp * g->Cog * g->K) * g->es;
                char *yg = j->y + (size_t)((n * g->Co + grp * g->Cog) * g->P) * g->es;
                if (!g->direct) im2col(g, xg, cols);
                int rc = musa_cpu_gemm(g->cdt, 'N', 'N', g->Cog, g->P, g->K, 1.0, wg, g->K,
                                       g->direct ? xg : cols, g->P, 0.0, yg, g->P);
                if (rc) j->rc = rc;
                if (j->b && grp == g->groups - 1)
                    add_bias(g, j->y + (size_t)(n * g->Co * g->P) * g->es, j->b);
            }
    }
}

static void run_slots(conv_job *j, int64_t slots, musa_range_fn fn) {
    j->per_slot = (j->g->N + slots - 1) / slots;
    int64_t used = j->per_slot ? (j->g->N + j->per_slot - 1) / j->per_slot : 0;
    if (slots == 1)
        fn(j, 0, used);
    else
        musa_parallel_for(used, 1, fn, j);
}

static size_t slot_cols(const conv_geom *g) {
    return g->direct ? 0 : nn_align(nn_bytes2(g->K, g->P, g->es));
}

/* ---- forward ---- */

static MUSA_WS(ws_conv2d_f32) {
    MUSA_UNUSED(n_in);
    conv_geom g;
    geom(&g, in[0].shape, in[1].shape, attrs, nn_cdt(out[0].dtype));
    musa_conv_shape s;
    size_t d = dnnl_ws(&g, MUSA_CONV_FWD, n_in == 3, &s);
    return nn_ws_outputs(out, n_out, d != (size_t)-1 ? d : nn_bytes(conv_slots(&g), slot_cols(&g)));
}

static int conv2d_f32(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                      const void *attrs) {
    conv_geom g;
    geom(&g, in[0].shape, in[1].shape, attrs, nn_cdt(out[0].dtype));
    char *ws = ctx->scratch;
    nn_out y = nn_out_begin(&out[0], &ws);
    conv_job j = {.g = &g,
                  .x = in[0].data,
                  .w = in[1].data,
                  .b = n_in == 3 ? in[2].data : NULL,
                  .y = y.data,
                  .scratch = ws,
                  .slot_bytes = slot_cols(&g)};
    if (try_dnnl(&g, MUSA_CONV_FWD, j.x, j.w, j.b, y.data, ws, ctx, &j.rc)) {
        /* done */
    } else if (g.N && g.Co && g.P) {
        run_slots(&j, conv_slots(&g), fwd_range);
    }
    nn_out_end(&y);
    return j.rc;
}

/* ---- gradient of the input: gx = col2im(W^T gy) ---- */

static void bwd_input_range(void *arg, int64_t s0, int64_t s1) {
    conv_job *j = arg;
    const conv_geom *g = j->g;
    for (int64_t s = s0; s < s1; s++) {
        char *cols = slot_at(j, s);
        int64_t n0 = s * j->per_slot, n1 = n0 + j->per_slot < g->N ? n0 + j->per_slot : g->N;
        for (int64_t n = n0; n < n1; n++) {
            char *gxn = j->y + (size_t)(n * g->C * g->H * g->W) * g->es;
            if (!g->direct) memset(gxn, 0, (size_t)(g->C * g->H * g->W) * g->es);
            for (int64_t grp = 0; grp < g->groups; grp++) {
                const char *gyg = j->x + (size_t)((n * g->Co + grp * g->Cog) * g->P) * g->es;
                const char *wg = j->w + (size_t)(grp * g->Cog * g->K) * g->es;
                char *gxg = gxn + (size_t)(grp * g->Cg * g->H * g->W) * g->es;
                int rc = musa_cpu_gemm(g->cdt, 'T', 'N', g->K, g->P, g->Cog, 1.0, wg, g->K, gyg,
                                       g->P, 0.0, g->direct ? gxg : cols, g->P);
                if (rc) j->rc = rc;
                if (!g->direct) col2im(g, cols, gxg);
            }
        }
    }
}

static MUSA_WS(ws_bwd_input_f32) {
    MUSA_UNUSED(n_in);
    conv_geom g;
    geom(&g, ((const musa_attrs_conv *)attrs)->shape.v, in[1].shape, attrs, nn_cdt(out[0].dtype));
    musa_conv_shape s;
    size_t d = dnnl_ws(&g, MUSA_CONV_BWD_DATA, false, &s);
    return nn_ws_outputs(out, n_out, d != (size_t)-1 ? d : nn_bytes(conv_slots(&g), slot_cols(&g)));
}

static int bwd_input_f32(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                         const void *attrs) {
    MUSA_UNUSED(n_in);
    conv_geom g;
    geom(&g, ((const musa_attrs_conv *)attrs)->shape.v, in[1].shape, attrs, nn_cdt(out[0].dtype));
    char *ws = ctx->scratch;
    nn_out gx = nn_out_begin(&out[0], &ws);
    conv_job j = {.g = &g,
                  .x = in[0].data,
                  .w = in[1].data,
                  .y = gx.data,
                  .scratch = ws,
                  .slot_bytes = slot_cols(&g)};
    if (try_dnnl(&g, MUSA_CONV_BWD_DATA, j.x, j.w, NULL, gx.data, ws, ctx, &j.rc)) {
        /* done */
    } else if (g.N) {
        run_slots(&j, conv_slots(&g), bwd_input_range);
    }
    nn_out_end(&gx);
    return j.rc;
}

/* ---- gradient of the weight: gw = sum over images of gy cols^T ---- */

static void bwd_weight_range(void *arg, int64_t s0, int64_t s1) {
    conv_job *j = arg;
    const conv_geom *g = j->g;
    size_t cols_bytes = slot_cols(g);
    for (int64_t s = s0; s < s1; s++) {
        char *slot = slot_at(j, s);
        char *cols = slot, *acc = j->y ? j->y : slot + cols_bytes;
        if (!j->y) memset(acc, 0, (size_t)(g->Co * g->K) * g->es);
        int64_t n0 = s * j->per_slot, n1 = n0 + j->per_slot < g->N ? n0 + j->per_slot : g->N;
        for (int64_t n = n0; n < n1; n++)
            for (int64_t grp = 0; grp < g->groups; grp++) {
                const char *xg = j->x + (size_t)((n * g->C + grp * g->Cg) * g->H * g->W) * g->es;
                const char *gyg = j->w + (size_t)((n * g->Co + grp * g->Cog) * g->P) * g->es;
                char *ag = acc + (size_t)(grp * g->Cog * g->K) * g->es;
                if (!g->direct) im2col(g, xg, cols);
                int rc = musa_cpu_gemm(g->cdt, 'N', 'T', g->Cog, g->K, g->P, 1.0, gyg, g->P,
                                       g->direct ? xg : cols, g->P, 1.0, ag, g->K);
                if (rc) j->rc = rc;
            }
    }
}

static size_t slot_wgrad(const conv_geom *g, int64_t slots) {
    return musa_sat_add_size(slot_cols(g), slots > 1 ? nn_align(nn_bytes2(g->Co, g->K, g->es)) : 0);
}

static MUSA_WS(ws_bwd_weight_f32) {
    MUSA_UNUSED(n_in);
    conv_geom g;
    geom(&g, in[0].shape, ((const musa_attrs_conv *)attrs)->shape.v, attrs, nn_cdt(out[0].dtype));
    int64_t slots = conv_slots(&g);
    musa_conv_shape s;
    size_t d = dnnl_ws(&g, MUSA_CONV_BWD_WEIGHTS, false, &s);
    return nn_ws_outputs(out, n_out, d != (size_t)-1 ? d : nn_bytes(slots, slot_wgrad(&g, slots)));
}

static int bwd_weight_f32(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                          const void *attrs) {
    MUSA_UNUSED(n_in);
    conv_geom g;
    geom(&g, in[0].shape, ((const musa_attrs_conv *)attrs)->shape.v, attrs, nn_cdt(out[0].dtype));
    char *ws = ctx->scratch;
    nn_out gw = nn_out_begin(&out[0], &ws);
    int64_t slots = conv_slots(&g);
    size_t total = (size_t)(g.Co * g.K);
    int rc = MUSA_OK;
    if (try_dnnl(&g, MUSA_CONV_BWD_WEIGHTS, in[0].data, in[1].data, NULL, gw.data, ws, ctx, &rc)) {
        nn_out_end(&gw);
        return rc;
    }
    memset(gw.data, 0, total * g.es);
    /* one slot accumulates straight into gw; several keep partial sums */
    conv_job j = {.g = &g,
                  .x = in[0].data,
                  .w = in[1].data,
                  .y = slots > 1 ? NULL : gw.data,
                  .scratch = ws,
                  .slot_bytes = slot_wgrad(&g, slots)};
    if (g.N && total) {
        run_slots(&j, slots, bwd_weight_range);
        int64_t used = j.per_slot ? (g.N + j.per_slot - 1) / j.per_slot : 0;
        for (int64_t s = 0; slots > 1 && s < used; s++) {
            const char *part = ws + (size_t)s * j.slot_bytes + slot_cols(&g);
            for (size_t i = 0; i < total; i++) {
                if (g.cdt == MUSA_DTYPE_FLOAT32)
                    ((float *)gw.data)[i] += ((const float *)part)[i];
                else
                    ((double *)gw.data)[i] += ((const double *)part)[i];
            }
        }
    }
    nn_out_end(&gw);
    return j.rc;
}

/* ---- bfloat16: oneDNN's bfloat16 primitives (float32 accumulation), or
 * float32 copies through the kernels above where oneDNN cannot ---- */

typedef int (*conv_fn)(const musa_kctx *, musa_kview *, const musa_kview *, int, const void *);
typedef size_t (*conv_ws_fn)(const musa_kview *, int, const musa_kview *, int, const void *);

/* The geometry of a convolution op of this kind from its views. */
static void geom_of(int kind, const musa_kview *in, const void *attrs, conv_geom *g) {
    const musa_attrs_conv *a = attrs;
    if (kind == MUSA_CONV_FWD)
        geom(g, in[0].shape, in[1].shape, a, MUSA_DTYPE_FLOAT32);
    else if (kind == MUSA_CONV_BWD_DATA)
        geom(g, a->shape.v, in[1].shape, a, MUSA_DTYPE_FLOAT32);
    else
        geom(g, in[0].shape, a->shape.v, a, MUSA_DTYPE_FLOAT32);
}

/* ---- bfloat16 weight gradient as one GEMM over the batch ----
 * gw (Co x K) = gy (Co x N P) cols^T (N P x K), cols holding every image's
 * receptive fields side by side. Where the output planes are small,
 * oneDNN 2.6's bfloat16 backward-weights kernel runs far below its
 * bfloat16 matmul on the same product (ResNet-18's 4x4 layers, 512
 * channels, batch 32: 390 against 750 GFLOP/s here). The GEMM won at batch
 * 2 to 128 for output planes of up to 16 elements, and of up to 64 for
 * strided convolutions; a 3x3 stride-1 layer with 8x8 outputs lost at
 * batch 128 (docs/benchmarks.md). Channels-last activations take gy as it
 * is, (N P x Co), transposed in the GEMM, and cols as (N P x K), one output
 * pixel's receptive field per row (its channels strided by the taps, in
 * gw's OIHW order). */
#define WGRAD_PLANE 1024      /* most elements of a zero-bordered input plane */
#define WGRAD_TAPS  4096      /* most taps x output elements of a plane */
#define WGRAD_COLS  (1 << 24) /* most elements of cols (32 MiB) */

typedef struct {
    const conv_geom *g;
    const musa_bf16 *x, *gy;
    musa_bf16 *cols, *gyt;      /* K x N P, Co x N P */
    int32_t plane[WGRAD_PLANE]; /* where input element i goes in the bordered plane */
    int32_t tap[WGRAD_TAPS];    /* where (tap, output element) reads it */
} wgrad_job;

/* The workspace of the batched GEMM for this weight gradient (s: its
 * shape), or (size_t)-1 where oneDNN's kernel is the one to run. */
static size_t wgrad_gemm(const conv_geom *g, musa_gemm_shape *s) {
    bool strided = g->sh > 1 || g->sw > 1;
    if (getenv("MUSA_CONV_IM2COL")) return (size_t)-1; /* the reference path, forced */
    if (g->groups != 1 || g->direct || !g->N || !g->Co || !g->K || !g->P ||
        g->P > (strided ? 64 : 16) || g->H + g->W + g->ph + g->pw > WGRAD_PLANE ||
        (g->H + 2 * g->ph) * (g->W + 2 * g->pw) > WGRAD_PLANE ||
        g->kh * g->kw * g->P > WGRAD_TAPS || g->N > WGRAD_COLS / g->P ||
        g->K > WGRAD_COLS / (g->N * g->P)) /* (each bound before a product that could overflow) */
        return (size_t)-1;
    memset(s, 0, sizeof *s); /* compared as bytes */
    int64_t np = g->N * g->P;
    s->M = g->Co, s->N = g->K, s->K = np, s->ldc = g->K;
    if (g->cl)
        s->ta = 'T', s->tb = 'N', s->lda = g->Co, s->ldb = g->K;
    else
        s->ta = 'N', s->tb = 'T', s->lda = np, s->ldb = np;
    size_t gemm = musa_dnnl_gemm_workspace(s);
    if (gemm == (size_t)-1) return gemm;
    return nn_align((size_t)(g->K * np) * 2) + (g->cl ? 0 : nn_align((size_t)(g->Co * np) * 2)) +
           gemm;
}

/* Rows of cols (channels c0..c1) and of gyt (output channels in
 * proportion), image by image (reading along n would jump a whole image
 * each time). Each input plane is scattered once into a zero-bordered one,
 * from which the taps gather through the job's tables: element moves
 * without branches, and no copy loop that the compiler would turn into a
 * memcpy call per 4-element row. */
static void wgrad_unfold(void *arg, int64_t c0, int64_t c1) {
    wgrad_job *j = arg;
    const conv_geom *g = j->g;
    int64_t np = g->N * g->P, hw = g->H * g->W, taps = g->kh * g->kw;
    int64_t o0 = c0 * g->Co / g->C, o1 = c1 * g->Co / g->C;
    musa_bf16 pad[WGRAD_PLANE];
    memset(pad, 0, sizeof pad);
    for (int64_t n = 0; n < g->N; n++) {
        for (int64_t c = c0; c < c1; c++) {
            const musa_bf16 *xp = j->x + (n * g->C + c) * hw;
            for (int64_t i = 0; i < hw; i++) pad[j->plane[i]] = xp[i];
            musa_bf16 *col = j->cols + c * taps * np + n * g->P;
            for (int64_t t = 0; t < taps; t++, col += np)
                for (int64_t p = 0; p < g->P; p++) col[p] = pad[j->tap[t * g->P + p]];
        }
        for (int64_t o = o0; o < o1; o++)
            memcpy(j->gyt + o * np + n * g->P, j->gy + (n * g->Co + o) * g->P,
                   (size_t)g->P * sizeof(musa_bf16));
    }
}

/* Channels-last rows of cols (output pixels r0..r1 over the batch): for
 * each tap, the pixel's C input channels (contiguous in x) go to columns
 * c * taps + tap, the OIHW order of gw's columns; taps in the padding are
 * zeros. */
static void wgrad_unfold_cl(void *arg, int64_t r0, int64_t r1) {
    wgrad_job *j = arg;
    const conv_geom *g = j->g;
    int64_t taps = g->kh * g->kw;
    for (int64_t r = r0; r < r1; r++) {
        int64_t n = r / g->P, py = r % g->P / g->Wo, px = r % g->Wo;
        musa_bf16 *row = j->cols + r * g->K;
        for (int64_t ky = 0, t = 0; ky < g->kh; ky++)
            for (int64_t kx = 0; kx < g->kw; kx++, t++) {
                int64_t iy = py * g->sh + ky * g->dh - g->ph, ix = px * g->sw + kx * g->dw - g->pw;
                musa_bf16 *col = row + t;
                if (iy < 0 || iy >= g->H || ix < 0 || ix >= g->W) {
                    for (int64_t c = 0; c < g->C; c++) col[c * taps] = (musa_bf16){0};
                    continue;
                }
                const musa_bf16 *xp = j->x + ((n * g->H + iy) * g->W + ix) * g->C;
                for (int64_t c = 0; c < g->C; c++) col[c * taps] = xp[c];
            }
    }
}

static int wgrad_run(const musa_kctx *ctx, const conv_geom *g, const musa_gemm_shape *s,
                     const musa_kview *in, musa_kview *out) {
    int64_t np = g->N * g->P, wp = g->W + 2 * g->pw;
    wgrad_job j = {.g = g, .x = (const musa_bf16 *)in[0].data, .gy = (const musa_bf16 *)in[1].data};
    char *ws = ctx->scratch;
    j.cols = (musa_bf16 *)ws;
    ws += nn_align((size_t)(g->K * np) * 2);
    const musa_bf16 *a = j.gy; /* channels-last: gy as it is */
    if (g->cl) {
        musa_parallel_for(np, 8, wgrad_unfold_cl, &j);
    } else {
        for (int64_t i = 0; i < g->H * g->W; i++)
            j.plane[i] = (int32_t)((i / g->W + g->ph) * wp + i % g->W + g->pw);
        for (int64_t ky = 0, t = 0; ky < g->kh; ky++)
            for (int64_t kx = 0; kx < g->kw; kx++, t++)
                for (int64_t p = 0; p < g->P; p++)
                    j.tap[t * g->P + p] = (int32_t)((p / g->Wo * g->sh + ky * g->dh) * wp +
                                                    p % g->Wo * g->sw + kx * g->dw);
        j.gyt = (musa_bf16 *)ws;
        ws += nn_align((size_t)(g->Co * np) * 2);
        musa_parallel_for(g->C, 1, wgrad_unfold, &j);
        a = j.gyt;
    }
    int rc = musa_dnnl_gemm(s, a, j.cols, NULL, out[0].data, ws,
                            ctx->scratch_bytes - (size_t)(ws - (char *)ctx->scratch));
    if (rc) rc = musa_err(rc, "[%s] oneDNN bfloat16 matmul primitive failed", ctx->op_name);
    return rc;
}

/* oneDNN's bfloat16 workspace for this op, or (size_t)-1. */
static size_t bf16_ws(int kind, const musa_kview *in, int n_in, const void *attrs,
                      musa_conv_shape *s) {
    conv_geom g;
    geom_of(kind, in, attrs, &g);
    return dnnl_ws_as(&g, kind, kind == MUSA_CONV_FWD && n_in == 3, s, true);
}

/* Float32 views of n bfloat16 views, contiguous, laid out from *ws (NULL:
 * only count); returns the bytes. */
static size_t f32_views(const musa_kview *v, int n, musa_kview *o, char *ws) {
    size_t b = 0;
    for (int i = 0; i < n; i++) {
        o[i] = v[i];
        o[i].dtype = MUSA_DTYPE_FLOAT32;
        o[i].data = ws ? ws + b : NULL;
        musa_contiguous_strides_k(&o[i]);
        b += nn_align((size_t)musa_kview_numel(&v[i]) * 4);
    }
    return b;
}

static size_t lowp_ws(int kind, conv_ws_fn f32, const musa_kview *out, int n_out,
                      const musa_kview *in, int n_in, const void *attrs) {
    musa_conv_shape s;
    if (in[0].dtype != MUSA_DTYPE_BFLOAT16) return f32(out, n_out, in, n_in, attrs);
    conv_geom g;
    musa_gemm_shape gs;
    geom_of(kind, in, attrs, &g);
    size_t wg = kind == MUSA_CONV_BWD_WEIGHTS && musa_kview_contiguous(&out[0])
                    ? wgrad_gemm(&g, &gs)
                    : (size_t)-1;
    if (wg != (size_t)-1) return wg;
    size_t d = bf16_ws(kind, in, n_in, attrs, &s);
    if (d != (size_t)-1 && musa_kview_contiguous(&out[0])) return d;
    musa_kview i32[3], o32[1];
    size_t b = f32_views(in, n_in, i32, NULL) + f32_views(out, 1, o32, NULL);
    return b + f32(o32, n_out, i32, n_in, attrs);
}

static int lowp_run(int kind, conv_fn f32, conv_ws_fn f32_ws, const musa_kctx *ctx, musa_kview *out,
                    const musa_kview *in, int n_in, const void *attrs) {
    if (in[0].dtype != MUSA_DTYPE_BFLOAT16) return f32(ctx, out, in, n_in, attrs);
    conv_geom g;
    musa_gemm_shape gs;
    geom_of(kind, in, attrs, &g);
    size_t wg = kind == MUSA_CONV_BWD_WEIGHTS && musa_kview_contiguous(&out[0])
                    ? wgrad_gemm(&g, &gs)
                    : (size_t)-1;
    if (wg != (size_t)-1) {
        if (ctx->scratch_bytes < wg)
            return musa_err(MUSA_ERR_RUNTIME, "[%s] internal: workspace of %zu bytes is short",
                            ctx->op_name, ctx->scratch_bytes);
        return wgrad_run(ctx, &g, &gs, in, out);
    }
    musa_conv_shape s;
    size_t d = bf16_ws(kind, in, n_in, attrs, &s);
    if (d != (size_t)-1 && musa_kview_contiguous(&out[0])) {
        int rc = musa_dnnl_conv(kind, &s, in[0].data, in[1].data,
                                kind == MUSA_CONV_FWD && n_in == 3 ? in[2].data : NULL, out[0].data,
                                ctx->scratch, ctx->scratch_bytes);
        return rc ? musa_err(rc, "[%s] oneDNN bfloat16 convolution primitive failed", ctx->op_name)
                  : MUSA_OK;
    }
    musa_kview i32[3], o32[1];
    size_t b = f32_views(in, n_in, i32, NULL) + f32_views(out, 1, o32, NULL);
    size_t need = b + f32_ws(o32, 1, i32, n_in, attrs);
    if (need > ctx->scratch_bytes) /* planned for the primitive (a switch flipped since) */
        return musa_err(MUSA_ERR_RUNTIME, "[%s] internal: workspace of %zu bytes is short (%zu)",
                        ctx->op_name, ctx->scratch_bytes, need);
    char *ws = ctx->scratch;
    b = f32_views(in, n_in, i32, ws);
    b += f32_views(out, 1, o32, ws + b);
    for (int i = 0; i < n_in; i++) musa_cpu_copy(&i32[i], &in[i]);
    musa_kctx sub = *ctx;
    sub.scratch = ws + b;
    sub.scratch_bytes = ctx->scratch_bytes - b;
    int rc = f32(&sub, o32, i32, n_in, attrs);
    if (!rc) musa_cpu_copy(&out[0], &o32[0]);
    return rc;
}

MUSA_WS(ws_conv2d) {
    return lowp_ws(MUSA_CONV_FWD, ws_conv2d_f32, out, n_out, in, n_in, attrs);
}
int cpu_conv2d(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
               const void *attrs) {
    return lowp_run(MUSA_CONV_FWD, conv2d_f32, ws_conv2d_f32, ctx, out, in, n_in, attrs);
}
MUSA_WS(ws_conv2d_bwd_input) {
    return lowp_ws(MUSA_CONV_BWD_DATA, ws_bwd_input_f32, out, n_out, in, n_in, attrs);
}
int cpu_conv2d_backward_input(const musa_kctx *ctx, musa_kview *out, const musa_kview *in, int n_in,
                              const void *attrs) {
    return lowp_run(MUSA_CONV_BWD_DATA, bwd_input_f32, ws_bwd_input_f32, ctx, out, in, n_in, attrs);
}
MUSA_WS(ws_conv2d_bwd_weight) {
    return lowp_ws(MUSA_CONV_BWD_WEIGHTS, ws_bwd_weight_f32, out, n_out, in, n_in, attrs);
}
int cpu_conv2d_backward_weight(const musa_kctx *ctx, musa_kview *out, const musa_kview *in,
                               int n_in, const void *attrs) {
    return lowp_run(MUSA_CONV_BWD_WEIGHTS, bwd_weight_f32, ws_bwd_weight_f32, ctx, out, in, n_in,
                    attrs);
}

size_t musa_cpu_conv_dnnl_workspace(int kind, const int64_t *xs, const int64_t *ws,
                                    const void *attrs, int dtype, bool bias, bool *wino) {
    conv_geom g;
    geom(&g, xs, ws, attrs, MUSA_DTYPE_FLOAT32);
    musa_conv_shape s = {0};
    size_t need = dtype == MUSA_DTYPE_FLOAT32 || dtype == MUSA_DTYPE_BFLOAT16
                      ? dnnl_ws_as(&g, kind, bias, &s, dtype == MUSA_DTYPE_BFLOAT16)
                      : (size_t)-1;
    if (wino) *wino = need != (size_t)-1 && s.wino;
    return need;
}

bool musa_cpu_conv_channels_last_ok(int kind, const int64_t *xs, const int64_t *ws,
                                    const void *attrs, int dtype, bool bias) {
    musa_attrs_conv a = *(const musa_attrs_conv *)attrs;
    a.channels_last = true;
    return musa_cpu_conv_dnnl_workspace(kind, xs, ws, &a, dtype, bias, NULL) != (size_t)-1;
}
