/*
 * conv_dnnl.c - oneDNN convolution primitives with a cache.
 *
 * Primitives are created once per (kind, shape, bias) and kept (JIT
 * compilation costs milliseconds). Memory layouts are left to oneDNN
 * ("any"), so it can pick its blocked formats; user buffers (plain
 * NCHW/OIHW) are reordered in and out through buffers carved from the op's
 * workspace (channels-last activations, NHWC, go in as they are), and the
 * scratchpad is in user mode, so the kernel allocates nothing per call.
 * bfloat16 activations with whole blocks of 16 channels move to and from
 * nChw16c by our own transposition (blocked16): oneDNN 2.6's reorder moved
 * them at 16-24 GB/s in a ResNet-18 step here. Execution uses the threads
 * this thread may use.
 */
#include "conv_dnnl.h"

#include <dnnl.h>
#include <immintrin.h>
#include <omp.h>
#include <pthread.h>

#include "../../base/threadpool.h"
#include "kernels.h"
#include "prim_cache.h"

#define MAX_ARGS  4
#define CACHE_MAX 256

typedef struct {
    int arg;                       /* DNNL_ARG_* */
    dnnl_memory_desc_t user, prim; /* the caller's plain layout, the primitive's */
    bool reorder;
    bool output;         /* reorder prim -> user after execution */
    dnnl_primitive_t rp; /* the reorder */
    bool blk;            /* a bfloat16 NCHW <-> nChw16c move: blocked16() instead of rp */
    int64_t n, c, hw;    /* ... its dims */
    size_t bytes;        /* of the primitive-layout buffer */
} arg_plan;

typedef struct entry {
    musa_prim_node node; /* first: the cache's link */
    int kind;
    bool bias;
    musa_conv_shape s;
    dnnl_primitive_desc_t fwd_pd, pd;
    dnnl_primitive_t prim;
    arg_plan args[MAX_ARGS];
    int n_args;
    size_t scratch; /* scratchpad bytes */
    size_t total;   /* workspace bytes in all */
    bool ok;
} entry;

static void destroy(musa_prim_node *n) {
    entry *e = (entry *)n;
    for (int i = 0; i < MAX_ARGS; i++)
        if (e->args[i].rp) dnnl_primitive_destroy(e->args[i].rp);
    if (e->prim) dnnl_primitive_destroy(e->prim);
    if (e->pd && e->pd != e->fwd_pd) dnnl_primitive_desc_destroy(e->pd);
    if (e->fwd_pd) dnnl_primitive_desc_destroy(e->fwd_pd);
    free(e);
}

static musa_prim_cache cache = MUSA_PRIM_CACHE_INIT(CACHE_MAX, destroy);
static dnnl_engine_t engine;
static bool engine_ok;

static void engine_init(void) {
    engine_ok = dnnl_engine_create(&engine, dnnl_cpu, 0) == dnnl_success;
}

dnnl_engine_t musa_dnnl_engine(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, engine_init);
    return engine_ok ? engine : NULL;
}

static size_t align64(size_t n) {
    return (n + 63) & ~(size_t)63;
}

static void md(dnnl_memory_desc_t *d, int nd, const int64_t *dims, dnnl_format_tag_t tag,
               dnnl_data_type_t dt) {
    dnnl_dims_t dd;
    for (int i = 0; i < nd; i++) dd[i] = dims[i];
    dnnl_memory_desc_init_by_tag(d, nd, dd, dt, tag);
}

/* The weight's descriptor: (O, I, kh, kw), or (G, O/G, I/G, kh, kw) grouped. */
static void weight_md(dnnl_memory_desc_t *d, const musa_conv_shape *s, dnnl_format_tag_t plain,
                      dnnl_data_type_t dt) {
    if (s->groups == 1) {
        md(d, 4, (int64_t[]){s->Co, s->C, s->kh, s->kw},
           plain == dnnl_format_tag_any ? plain : dnnl_oihw, dt);
    } else {
        md(d, 5, (int64_t[]){s->groups, s->Co / s->groups, s->C / s->groups, s->kh, s->kw},
           plain == dnnl_format_tag_any ? plain : dnnl_goihw, dt);
    }
}

/* Whether user is a plain NCHW bfloat16 tensor and p its nChw16c form
 * with whole blocks (the moves blocked16() makes). */
static bool blocked16_of(const dnnl_memory_desc_t *user, const dnnl_memory_desc_t *p, int64_t *n,
                         int64_t *c, int64_t *hw) {
    if (user->ndims != 4 || user->dims[1] % 16 || user->data_type != dnnl_bf16) return false;
    dnnl_memory_desc_t nchw, blk;
    if (dnnl_memory_desc_init_by_tag(&nchw, 4, user->dims, user->data_type, dnnl_nchw) !=
            dnnl_success ||
        dnnl_memory_desc_init_by_tag(&blk, 4, user->dims, user->data_type, dnnl_aBcd16b) !=
            dnnl_success ||
        !dnnl_memory_desc_equal(user, &nchw) || !dnnl_memory_desc_equal(p, &blk))
        return false;
    *n = user->dims[0], *c = user->dims[1], *hw = user->dims[2] * user->dims[3];
    return true;
}

typedef struct {
    const arg_plan *a;
    const char *src;
    char *dst;
} blk_job;

#ifdef __AVX2__
/* dst rows q (16 elements each, ds apart) = column q of the 16 x 16 block of
 * 16-bit elements at src (rows ss apart): interleaving pairs, quads,
 * octets, then halves. */
static inline void transpose16(const uint16_t *src, int64_t ss, uint16_t *dst, int64_t ds) {
    __m256i r[16], a[16], b[16], c[16];
    for (int k = 0; k < 16; k++) r[k] = _mm256_loadu_si256((const __m256i *)(src + k * ss));
    for (int i = 0; i < 8; i++) { /* a[2i], a[2i+1]: rows 2i, 2i+1 at columns 0-3, 4-7 (+8) */
        a[2 * i] = _mm256_unpacklo_epi16(r[2 * i], r[2 * i + 1]);
        a[2 * i + 1] = _mm256_unpackhi_epi16(r[2 * i], r[2 * i + 1]);
    }
    for (int g = 0; g < 4; g++) { /* b[4g+m]: rows 4g..4g+3 at columns 2m, 2m+1 (+8) */
        b[4 * g] = _mm256_unpacklo_epi32(a[4 * g], a[4 * g + 2]);
        b[4 * g + 1] = _mm256_unpackhi_epi32(a[4 * g], a[4 * g + 2]);
        b[4 * g + 2] = _mm256_unpacklo_epi32(a[4 * g + 1], a[4 * g + 3]);
        b[4 * g + 3] = _mm256_unpackhi_epi32(a[4 * g + 1], a[4 * g + 3]);
    }
    for (int h = 0; h < 2; h++) /* c[8h+q]: rows 8h..8h+7 at column q (+8) */
        for (int m = 0; m < 4; m++) {
            c[8 * h + 2 * m] = _mm256_unpacklo_epi64(b[8 * h + m], b[8 * h + 4 + m]);
            c[8 * h + 2 * m + 1] = _mm256_unpackhi_epi64(b[8 * h + m], b[8 * h + 4 + m]);
        }
    for (int q = 0; q < 8; q++) {
        _mm256_storeu_si256((__m256i *)(dst + q * ds),
                            _mm256_permute2x128_si256(c[q], c[8 + q], 0x20));
        _mm256_storeu_si256((__m256i *)(dst + (8 + q) * ds),
                            _mm256_permute2x128_si256(c[q], c[8 + q], 0x31));
    }
}
#endif

/* Blocks b0..b1 (16 channels of one image each) between NCHW and nChw16c. */
static void blocked16_range(void *arg, int64_t b0, int64_t b1) {
    const blk_job *j = arg;
    int64_t hw = j->a->hw;
    bool to_blk = !j->a->output;
    for (int64_t b = b0; b < b1; b++) {
        const uint16_t *s = (const uint16_t *)j->src + b * 16 * hw;
        uint16_t *d = (uint16_t *)j->dst + b * 16 * hw;
        int64_t p = 0;
#ifdef __AVX2__
        for (; p + 16 <= hw; p += 16)
            if (to_blk)
                transpose16(s + p, hw, d + p * 16, 16);
            else
                transpose16(s + p * 16, 16, d + p, hw);
#endif
        for (; p < hw; p++)
            for (int k = 0; k < 16; k++)
                if (to_blk)
                    d[p * 16 + k] = s[k * hw + p];
                else
                    d[k * hw + p] = s[p * 16 + k];
    }
}

/* NCHW -> nChw16c (an input), or back (an output), in place of the reorder
 * primitive: oneDNN 2.6's moved bfloat16 activations at 16-24 GB/s here. */
static void blocked16(const arg_plan *a, const void *src, void *dst) {
    blk_job j = {a, src, dst};
    musa_parallel_for(a->n * (a->c / 16), 1, blocked16_range, &j);
}

static bool plan_arg(entry *e, int arg, const dnnl_memory_desc_t *user, dnnl_query_t q, int index,
                     bool output) {
    const dnnl_memory_desc_t *p = dnnl_primitive_desc_query_md(e->pd, q, index);
    if (!p) return false;
    arg_plan *a = &e->args[e->n_args++];
    a->arg = arg;
    a->user = *user;
    a->prim = *p;
    a->output = output;
    a->reorder = !dnnl_memory_desc_equal(user, p);
    a->bytes = a->reorder ? align64(dnnl_memory_desc_get_size(p)) : 0;
    if (!a->reorder) return true;
    a->blk = blocked16_of(user, p, &a->n, &a->c, &a->hw);
    dnnl_primitive_desc_t rpd;
    const dnnl_memory_desc_t *from = output ? p : user, *to = output ? user : p;
    if (dnnl_reorder_primitive_desc_create(&rpd, from, engine, to, engine, NULL) != dnnl_success)
        return false;
    bool ok = dnnl_primitive_create(&a->rp, rpd) == dnnl_success;
    dnnl_primitive_desc_destroy(rpd);
    return ok;
}

static bool build(entry *e) {
    const musa_conv_shape *s = &e->s;
    /* PyTorch pads symmetrically and floors; oneDNN wants the right padding
     * that gives the same output size. It is negative where the floor drops
     * the input's last rows or columns (a 1x1 stride-2 shortcut of an even
     * size): oneDNN takes that as those elements unused, PyTorch's meaning. */
    int64_t pr_h = (s->Ho - 1) * s->sh + (s->kh - 1) * s->dh + 1 - s->H - s->ph;
    int64_t pr_w = (s->Wo - 1) * s->sw + (s->kw - 1) * s->dw + 1 - s->W - s->pw;
    dnnl_dims_t strides = {s->sh, s->sw}, dil = {s->dh - 1, s->dw - 1}, pl = {s->ph, s->pw},
                pr = {pr_h, pr_w};
    int64_t xs[4] = {s->N, s->C, s->H, s->W}, ys[4] = {s->N, s->Co, s->Ho, s->Wo}, bs[1] = {s->Co};
    dnnl_data_type_t dt = s->bf16 ? dnnl_bf16 : dnnl_f32;
    dnnl_memory_desc_t x_any, y_any, w_any, b_md, x_user, y_user, w_user;
    /* channels-last activations are given to the primitive as they are: its
     * NHWC kernels run as fast as the blocked ones here, and the reorders in
     * and out (a fifth of a ResNet step's oneDNN time) disappear */
    dnnl_format_tag_t act = s->nhwc ? dnnl_nhwc : dnnl_format_tag_any;
    md(&x_any, 4, xs, act, dt), md(&y_any, 4, ys, act, dt);
    weight_md(&w_any, s, dnnl_format_tag_any, dt);
    act = s->nhwc ? dnnl_nhwc : dnnl_nchw;
    md(&x_user, 4, xs, act, dt), md(&y_user, 4, ys, act, dt);
    weight_md(&w_user, s, dnnl_oihw, dt);
    md(&b_md, 1, bs, dnnl_x, dt);

    dnnl_primitive_attr_t attr;
    if (dnnl_primitive_attr_create(&attr) != dnnl_success) return false;
    dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    dnnl_convolution_desc_t fd;
    dnnl_alg_kind_t alg = s->wino ? dnnl_convolution_winograd : dnnl_convolution_direct;
    bool ok = dnnl_dilated_convolution_forward_desc_init(
                  &fd, dnnl_forward_training, alg, &x_any, &w_any,
                  e->kind == MUSA_CONV_FWD && e->bias ? &b_md : NULL, &y_any, strides, dil, pl,
                  pr) == dnnl_success &&
              dnnl_primitive_desc_create(&e->fwd_pd, &fd, attr, engine, NULL) == dnnl_success;
    if (ok && e->kind == MUSA_CONV_FWD) {
        e->pd = e->fwd_pd;
        ok = plan_arg(e, DNNL_ARG_SRC, &x_user, dnnl_query_src_md, 0, false) &&
             plan_arg(e, DNNL_ARG_WEIGHTS, &w_user, dnnl_query_weights_md, 0, false) &&
             (!e->bias || plan_arg(e, DNNL_ARG_BIAS, &b_md, dnnl_query_weights_md, 1, false)) &&
             plan_arg(e, DNNL_ARG_DST, &y_user, dnnl_query_dst_md, 0, true);
    } else if (ok && e->kind == MUSA_CONV_BWD_DATA) {
        dnnl_convolution_desc_t bd;
        ok = dnnl_dilated_convolution_backward_data_desc_init(
                 &bd, alg, &x_any, &w_any, &y_any, strides, dil, pl, pr) == dnnl_success &&
             dnnl_primitive_desc_create(&e->pd, &bd, attr, engine, e->fwd_pd) == dnnl_success &&
             plan_arg(e, DNNL_ARG_DIFF_DST, &y_user, dnnl_query_diff_dst_md, 0, false) &&
             plan_arg(e, DNNL_ARG_WEIGHTS, &w_user, dnnl_query_weights_md, 0, false) &&
             plan_arg(e, DNNL_ARG_DIFF_SRC, &x_user, dnnl_query_diff_src_md, 0, true);
    } else if (ok) {
        dnnl_convolution_desc_t bd;
        ok = dnnl_dilated_convolution_backward_weights_desc_init(
                 &bd, alg, &x_any, &w_any, NULL, &y_any, strides, dil, pl, pr) == dnnl_success &&
             dnnl_primitive_desc_create(&e->pd, &bd, attr, engine, e->fwd_pd) == dnnl_success &&
             plan_arg(e, DNNL_ARG_SRC, &x_user, dnnl_query_src_md, 0, false) &&
             plan_arg(e, DNNL_ARG_DIFF_DST, &y_user, dnnl_query_diff_dst_md, 0, false) &&
             plan_arg(e, DNNL_ARG_DIFF_WEIGHTS, &w_user, dnnl_query_diff_weights_md, 0, true);
    }
    dnnl_primitive_attr_destroy(attr);
    if (!ok) return false;
    const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(e->pd, dnnl_query_scratchpad_md, 0);
    e->scratch = sp ? align64(dnnl_memory_desc_get_size(sp)) : 0;
    e->total = e->scratch;
    for (int i = 0; i < e->n_args; i++) e->total += e->args[i].bytes;
    return dnnl_primitive_create(&e->prim, e->pd) == dnnl_success;
}

typedef struct {
    int kind;
    bool bias;
    const musa_conv_shape *s;
} conv_key;

static bool match(const musa_prim_node *n, const void *key) {
    const entry *e = (const entry *)n;
    const conv_key *k = key;
    return e->kind == k->kind && e->bias == k->bias && !memcmp(&e->s, k->s, sizeof *k->s);
}

static musa_prim_node *make(const void *key) {
    const conv_key *k = key;
    entry *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->kind = k->kind, e->bias = k->bias, e->s = *k->s;
    int had = musa_cpu_omp_threads(musa_pool_intra_threads()); /* what it will run with */
    e->ok = build(e); /* a failed build is cached too: fall back without retrying */
    musa_cpu_omp_threads(had);
    return &e->node;
}

/* The held entry for this convolution (release it), or NULL. */
static entry *lookup(int kind, const musa_conv_shape *s, bool bias) {
    if (!musa_dnnl_engine()) return NULL;
    conv_key k = {kind, bias, s};
    entry *e = (entry *)musa_prim_cache_get(&cache, match, make, &k);
    if (e && !e->ok) {
        musa_prim_cache_release(&cache, &e->node);
        e = NULL;
    }
    return e;
}

size_t musa_dnnl_conv_workspace(int kind, const musa_conv_shape *s, bool bias) {
    if (getenv("MUSA_CONV_IM2COL")) return (size_t)-1; /* force the reference path */
    entry *e = lookup(kind, s, bias);
    size_t ws = e ? e->total : (size_t)-1;
    if (e) musa_prim_cache_release(&cache, &e->node);
    return ws;
}

static int run(entry *e, const void *a, const void *b, const void *c, void *out, void *scratch,
               size_t scratch_bytes) {
    if (scratch_bytes < e->total) return MUSA_ERR_NOT_IMPLEMENTED;
    musa_cpu_omp_threads(musa_pool_intra_threads());
    /* user pointers in the order build() planned the arguments */
    const void *user[MAX_ARGS] = {a, b, c ? c : out, out};
    dnnl_stream_t stream;
    if (dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) != dnnl_success)
        return MUSA_ERR_RUNTIME;
    dnnl_memory_t um[MAX_ARGS] = {NULL}, pm[MAX_ARGS] = {NULL}, spm = NULL;
    dnnl_exec_arg_t args[MAX_ARGS + 1];
    int rc = MUSA_OK;
    /* reorder buffers follow oneDNN's scratchpad; no workspace at all when
     * neither is needed (scratch is NULL then: no arithmetic on it) */
    char *buf = scratch ? (char *)scratch + e->scratch : NULL, *prim_buf[MAX_ARGS] = {NULL};
    for (int i = 0; i < e->n_args && !rc; i++) {
        arg_plan *p = &e->args[i];
        if (dnnl_memory_create(&um[i], &p->user, engine, (void *)user[i]) != dnnl_success)
            rc = MUSA_ERR_RUNTIME;
        if (rc) break;
        if (p->reorder) {
            if (dnnl_memory_create(&pm[i], &p->prim, engine, buf) != dnnl_success)
                rc = MUSA_ERR_RUNTIME;
            prim_buf[i] = buf;
            buf += p->bytes;
            if (!rc && !p->output && p->blk) {
                blocked16(p, user[i], prim_buf[i]);
            } else if (!rc && !p->output) {
                dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, um[i]}, {DNNL_ARG_TO, pm[i]}};
                if (dnnl_primitive_execute(p->rp, stream, 2, ra) != dnnl_success)
                    rc = MUSA_ERR_RUNTIME;
            }
        }
        args[i] = (dnnl_exec_arg_t){p->arg, p->reorder ? pm[i] : um[i]};
    }
    int n = e->n_args;
    if (!rc && e->scratch) {
        const dnnl_memory_desc_t *sp =
            dnnl_primitive_desc_query_md(e->pd, dnnl_query_scratchpad_md, 0);
        if (dnnl_memory_create(&spm, sp, engine, scratch) != dnnl_success)
            rc = MUSA_ERR_RUNTIME;
        else
            args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, spm};
    }
    if (!rc && dnnl_primitive_execute(e->prim, stream, n, args) != dnnl_success)
        rc = MUSA_ERR_RUNTIME;
    for (int i = 0; i < e->n_args && !rc; i++) {
        arg_plan *p = &e->args[i];
        if (!p->reorder || !p->output) continue;
        if (p->blk) {
            blocked16(p, prim_buf[i], (void *)user[i]);
            continue;
        }
        dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, pm[i]}, {DNNL_ARG_TO, um[i]}};
        if (dnnl_primitive_execute(p->rp, stream, 2, ra) != dnnl_success) rc = MUSA_ERR_RUNTIME;
    }
    if (dnnl_stream_wait(stream) != dnnl_success && !rc) rc = MUSA_ERR_RUNTIME;
    for (int i = 0; i < MAX_ARGS; i++) {
        if (um[i]) dnnl_memory_destroy(um[i]);
        if (pm[i]) dnnl_memory_destroy(pm[i]);
    }
    if (spm) dnnl_memory_destroy(spm);
    dnnl_stream_destroy(stream);
    return rc;
}

int musa_dnnl_conv(int kind, const musa_conv_shape *s, const void *a, const void *b, const void *c,
                   void *out, void *scratch, size_t scratch_bytes) {
    entry *e = lookup(kind, s, c != NULL);
    if (!e) return MUSA_ERR_NOT_IMPLEMENTED;
    int rc = run(e, a, b, c, out, scratch, scratch_bytes);
    musa_prim_cache_release(&cache, &e->node);
    return rc;
}
