/*
 * matmul_dnnl.c - GEMMs on oneDNN's matmul primitive. bfloat16: bfloat16
 * operands, float32 accumulation, the product (plus an optional bias row)
 * rounded once to bfloat16; on CPUs with AVX512-BF16 this runs the
 * hardware's bfloat16 dot products (twice float32's rate on the AMD EPYC
 * machines here: bench/bench_bounds.py). float32: the linear op with a
 * bias, added in the kernel's epilogue rather than by a pass of its own
 * (matmul.c says when).
 *
 * Operands are described by strides, so transposed views are read in
 * place, and a batch of products (a matmul over attention's heads, its
 * operands at any strides, broadcast ones included) is one primitive call.
 * Primitives are cached per (shape, strides, bias) like the convolutions
 * (conv_dnnl.c); the scratchpad is in user mode, carved from the op's
 * workspace, so a call allocates nothing and concurrent calls of one
 * primitive do not share memory.
 */
#include "matmul_dnnl.h"

#include "conv_dnnl.h"
#include "kernels.h"
#include "prim_cache.h"

#define CACHE_MAX 512

typedef struct entry {
    musa_prim_node node; /* first: the cache's link */
    musa_gemm_shape s;
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t prim;
    dnnl_memory_desc_t a, b, bias, c;
    size_t scratch;
    bool ok;
} entry;

static void destroy(musa_prim_node *n) {
    entry *e = (entry *)n;
    if (e->prim) dnnl_primitive_destroy(e->prim);
    if (e->pd) dnnl_primitive_desc_destroy(e->pd);
    free(e);
}

static musa_prim_cache cache = MUSA_PRIM_CACHE_INIT(CACHE_MAX, destroy);

/* An M x K (or K x N) matrix read with transpose flag t and leading
 * dimension ld, row-major convention as in BLAS. */
static void mat_md(dnnl_memory_desc_t *d, const musa_gemm_shape *s, const int64_t *bs, int64_t rows,
                   int64_t cols, char t, int64_t ld) {
    dnnl_data_type_t dt = s->f32 ? dnnl_f32 : dnnl_bf16;
    dnnl_dims_t dims, st;
    int nb = s->nb;
    for (int i = 0; i < nb; i++) /* a broadcast operand has that dim of size 1 */
        dims[i] = bs[i] ? s->bd[i] : 1, st[i] = bs[i] ? bs[i] : 1;
    dims[nb] = rows, dims[nb + 1] = cols;
    if (t == 'N')
        st[nb] = ld, st[nb + 1] = 1;
    else
        st[nb] = 1, st[nb + 1] = ld;
    dnnl_memory_desc_init_by_strides(d, nb + 2, dims, dt, st);
}

/* Multiply-adds of the whole (batched) product. */
static double gemm_macs(const musa_gemm_shape *s) {
    double macs = (double)s->M * (double)s->N * (double)s->K;
    for (int i = 0; i < s->nb; i++) macs *= (double)s->bd[i];
    return macs;
}

static bool build(entry *e) {
    const musa_gemm_shape *s = &e->s;
    dnnl_engine_t eng = musa_dnnl_engine();
    mat_md(&e->a, s, s->sa, s->M, s->K, s->ta, s->lda);
    mat_md(&e->b, s, s->sb, s->K, s->N, s->tb, s->ldb);
    mat_md(&e->c, s, s->sc, s->M, s->N, 'N', s->ldc);
    dnnl_dims_t bd, bst;
    for (int i = 0; i < s->nb + 2; i++) bd[i] = 1, bst[i] = s->N;
    bd[s->nb + 1] = s->N, bst[s->nb + 1] = 1;
    dnnl_memory_desc_init_by_strides(&e->bias, s->nb + 2, bd, s->f32 ? dnnl_f32 : dnnl_bf16, bst);
    dnnl_primitive_attr_t attr;
    if (dnnl_primitive_attr_create(&attr) != dnnl_success) return false;
    dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    dnnl_matmul_desc_t md;
    bool ok = dnnl_matmul_desc_init(&md, &e->a, &e->b, s->bias ? &e->bias : NULL, &e->c) ==
                  dnnl_success &&
              dnnl_primitive_desc_create(&e->pd, &md, attr, eng, NULL) == dnnl_success;
    dnnl_primitive_attr_destroy(attr);
    if (!ok) return false;
    const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(e->pd, dnnl_query_scratchpad_md, 0);
    e->scratch = sp ? dnnl_memory_desc_get_size(sp) : 0;
    return dnnl_primitive_create(&e->prim, e->pd) == dnnl_success;
}

static bool match(const musa_prim_node *n, const void *key) {
    return !memcmp(&((const entry *)n)->s, key, sizeof(musa_gemm_shape));
}

static musa_prim_node *make(const void *key) {
    const musa_gemm_shape *s = key;
    entry *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->s = *s;
    int had = musa_cpu_gemm_threads(gemm_macs(s)); /* the count it will run with */
    e->ok = build(e); /* a failed build is cached too: the caller falls back */
    musa_cpu_omp_threads(had);
    return &e->node;
}

/* The held entry for this product (release it), or NULL. */
static entry *lookup(const musa_gemm_shape *s) {
    if (!musa_dnnl_engine()) return NULL;
    entry *e = (entry *)musa_prim_cache_get(&cache, match, make, s);
    if (e && !e->ok) {
        musa_prim_cache_release(&cache, &e->node);
        e = NULL;
    }
    return e;
}

size_t musa_dnnl_gemm_workspace(const musa_gemm_shape *s) {
    if (!s->f32 && getenv("MUSA_BF16_GEMM_F32")) return (size_t)-1; /* force the float32 path */
    entry *e = lookup(s);
    size_t ws = e ? e->scratch : (size_t)-1;
    if (e) musa_prim_cache_release(&cache, &e->node);
    return ws;
}

static int run(entry *e, const void *a, const void *b, const void *bias, void *c, void *scratch,
               size_t scratch_bytes) {
    const musa_gemm_shape *s = &e->s;
    if (scratch_bytes < e->scratch) return MUSA_ERR_NOT_IMPLEMENTED;
    musa_cpu_gemm_threads(gemm_macs(s));
    dnnl_engine_t eng = musa_dnnl_engine();
    dnnl_stream_t stream;
    if (dnnl_stream_create(&stream, eng, dnnl_stream_default_flags) != dnnl_success)
        return MUSA_ERR_RUNTIME;
    dnnl_memory_t m[5] = {NULL};
    dnnl_exec_arg_t args[5];
    int n = 0, rc = MUSA_OK;
    const void *ptr[4] = {a, b, bias, c};
    const dnnl_memory_desc_t *mds[4] = {&e->a, &e->b, &e->bias, &e->c};
    const int which[4] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_BIAS, DNNL_ARG_DST};
    for (int i = 0; i < 4 && !rc; i++) {
        if (i == 2 && !s->bias) continue;
        if (dnnl_memory_create(&m[n], mds[i], eng, (void *)ptr[i]) != dnnl_success)
            rc = MUSA_ERR_RUNTIME;
        else
            args[n] = (dnnl_exec_arg_t){which[i], m[n]}, n++;
    }
    if (!rc && e->scratch) {
        const dnnl_memory_desc_t *sp =
            dnnl_primitive_desc_query_md(e->pd, dnnl_query_scratchpad_md, 0);
        if (dnnl_memory_create(&m[n], sp, eng, scratch) != dnnl_success)
            rc = MUSA_ERR_RUNTIME;
        else
            args[n] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, m[n]}, n++;
    }
    if (!rc && dnnl_primitive_execute(e->prim, stream, n, args) != dnnl_success)
        rc = MUSA_ERR_RUNTIME;
    if (dnnl_stream_wait(stream) != dnnl_success && !rc) rc = MUSA_ERR_RUNTIME;
    for (int i = 0; i < 5; i++)
        if (m[i]) dnnl_memory_destroy(m[i]);
    dnnl_stream_destroy(stream);
    return rc;
}

int musa_dnnl_gemm(const musa_gemm_shape *s, const void *a, const void *b, const void *bias,
                   void *c, void *scratch, size_t scratch_bytes) {
    entry *e = lookup(s);
    if (!e) return MUSA_ERR_NOT_IMPLEMENTED;
    int rc = run(e, a, b, bias, c, scratch, scratch_bytes);
    musa_prim_cache_release(&cache, &e->node);
    return rc;
}
