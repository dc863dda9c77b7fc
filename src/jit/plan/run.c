/*
 * plan/run.c - running a plan (musa_plan_run), and what a built plan
 * answers: its stats, buffers, text, and its release.
 *
 * A run binds the slots (the arena, the inputs, the parameters' current
 * data, output buffers allocated as the step that first writes each comes
 * up), patches each kernel view's data pointer from its kref, and calls the
 * kernels step by step; a parallel step runs its instructions as tasks on
 * the OpenMP team. Then write-backs copy final values into mutated inputs
 * and parameters (unless computed there in place), and outputs are handed
 * out as new references.
 *
 * Invariants: a run changes nothing in the plan but the kernel views' data
 * pointers (under the plan's lock, so one run at a time), its stats, and
 * its arena block, allocated on the first run and kept. A failed run
 * releases every output it made and names the failing op and the user's
 * line where it was recorded.
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>
#ifdef __AVX512F__
#include <immintrin.h>
#endif

#include "../../backend/cpu/alloc.h"
#include "../../backend/cpu/iter.h"
#include "../../backend/cpu/kernels.h"
#include "../../base/profile.h"
#include "../../base/threadpool.h"
#include "../../distributed/comm.h"
#include "../../tensor/stream.h"

void musa_plan_free(musa_plan *p) {
    if (!p) return;
    if (atomic_load(&p->queued)) (void)musa_synchronize(); /* its runs on streams finish first */
    musa_storage_release(p->mem);                          /* loaned outputs still held keep it */
    pthread_mutex_destroy(&p->lock);
    musa_arena_free(&p->arena);
    free(p);
}

const musa_plan_stats *musa_plan_get_stats(const musa_plan *p) {
    static const musa_plan_stats none;
    return p ? &p->stats : &none;
}

bool musa_plan_output_loaned(const musa_plan *p, int i) {
    if (!p || i < 0 || i >= (int)p->g->outputs.len) return false;
    int32_t r = p->g->values.data[p->g->outputs.data[i]].root;
    for (int k = 0; k < p->n_loans; k++)
        if (p->loan_roots[k] == r) return true;
    return false;
}

int musa_plan_buffers(const musa_plan *p, const musa_plan_buffer **out) {
    if (!out) return 0;
    *out = p ? p->bufs : NULL;
    return p ? p->n_bufs : 0;
}

/* ---- execution ---- */

typedef struct run_ctx {
    musa_plan *p;
    char **base;
    char *scratch;
    int rc;
    const char *fail_loc;
    const char *fail_name;
} run_ctx;

/* A slot's base plus a byte offset; NULL for a slot without memory (an
 * empty tensor's data, an empty arena), where arithmetic on NULL would be
 * undefined (nothing is read or written through it: the view is empty). */
static inline char *at(char *base, int64_t off) {
    return base ? base + off : NULL;
}

static int call_kernel(const kcall *k, musa_kview *kv, char *scratch) {
    musa_kctx ctx = {
        .scratch = k->scratch ? scratch : NULL, .scratch_bytes = k->scratch, .op_name = k->name};
    /* nothing to write; a collective still takes part (its peers wait for it) */
    if (musa_kviews_all_empty(kv, k->n_out) && !(musa_ops[k->op].flags & MUSA_OPF_EFFECT))
        return MUSA_OK;
    return k->kernel(&ctx, kv, kv + k->n_out, k->n_in, k->attrs);
}

static int run_kernel_instr(run_ctx *r, instr *in) {
    kcall *k = &in->k;
    int nk = k->n_out + k->n_in;
    musa_kview stack[MUSA_PLAN_KV_STACK];
    musa_kview *kv = musa_plan_kv_shared(nk) ? stack : k->kv; /* a shared list is read-only */
    for (int q = 0; q < nk; q++) {
        if (kv == stack) kv[q] = k->kv[q];
        kv[q].data = at(r->base[k->ref[q].slot], k->ref[q].off);
    }
    int rc = call_kernel(k, kv, at(r->scratch, (int64_t)in->scratch_off));
    if (rc) r->fail_loc = k->loc, r->fail_name = k->name;
    return rc;
}

typedef struct fused_ctx {
    run_ctx *r;
    instr *in;
    int chunks;
    atomic_int rc;
    const kcall *failed;
} fused_ctx;

/* n bytes from src to dst with non-temporal stores where dst is 64-byte
 * aligned; the caller fences (stream_fence) before another thread reads. */
static void stream_copy(char *dst, const char *src, size_t n) {
#ifdef __AVX512F__
    size_t head = MUSA_MIN(n, (size_t)(-(uintptr_t)dst & 63));
    memcpy(dst, src, head);
    size_t i = head;
    for (; i + 64 <= n; i += 64)
        _mm512_stream_si512((void *)(dst + i), _mm512_loadu_si512((const void *)(src + i)));
    memcpy(dst + i, src + i, n - i);
#else
    memcpy(dst, src, n);
#endif
}

static void stream_fence(void) {
#ifdef __AVX512F__
    _mm_sfence();
#endif
}

/* A lean member on rows r0.. of a tile: its loop over the runs, output
 * first (streamed ones through the staging tile). */
static void run_lean(run_ctx *r, const fused *f, const kcall *k, musa_loop_fn loop, char *chunk,
                     int64_t r0, int64_t rows) {
    char *p[MUSA_ITER_MAX_OPS];
    for (int q = 0; q < k->n_out + k->n_in; q++) {
        if (k->ref[q].slot == MUSA_SLOT_TILE) {
            p[q] = at(chunk, k->ref[q].off);
            continue;
        }
        p[q] = at(r->base[k->ref[q].slot], k->ref[q].off);
        if (k->cut[q] && k->lean[q] && p[q]) p[q] += r0 * k->lean[q];
    }
    char *dest = NULL;
    if (k->cut[0] == MUSA_CUT_STREAM) dest = p[0], p[0] = at(chunk, (int64_t)f->stage_off);
    loop(NULL, rows, p, k->lean);
    if (dest) stream_copy(dest, p[0], (size_t)(rows * k->lean[0]));
}

/* Each lean member's loop for this run: its resolver sees the single
 * elements it reads (the data of inputs from outside the group). */
static void resolve_lean(run_ctx *r, fused *f) {
    for (int i = 0; i < f->n; i++) {
        const kcall *k = &f->m[i];
        f->loop[i] = NULL;
        if (!k->lean) continue;
        musa_kview kv[MUSA_ITER_MAX_OPS];
        for (int q = 0; q < k->n_out + k->n_in; q++) {
            kv[q] = k->kv[q];
            kv[q].data = k->ref[q].slot == MUSA_SLOT_TILE
                             ? NULL
                             : at(r->base[k->ref[q].slot], k->ref[q].off);
        }
        f->loop[i] = musa_ops[k->op].loop(kv, kv + k->n_out, k->attrs);
    }
}

/* Whether this run's member loops are all ones the group's chain knows:
 * sets each instruction's operation and reads the single elements. */
static bool resolve_chain(run_ctx *r, fused *f) {
    musa_chain *c = f->chain;
    for (int k = 0; k < c->n_ins; k++) {
        musa_chain_ins *in = &c->ins[k];
        if (in->code != MUSA_CH_BIN && in->code != MUSA_CH_BINR && in->code != MUSA_CH_UNARY)
            continue;
        musa_loop_fn fn = f->loop[in->member];
        if (!fn) return false;
        bool known =
            in->code == MUSA_CH_UNARY ? cpu_unary_chain_op(fn, in) : cpu_binary_chain_op(fn, in);
        if (!known ||
            (in->code == MUSA_CH_BINR && (in->op == MUSA_CHOP_POW2 || in->op == MUSA_CHOP_POW3)))
            return false;
    }
    for (int k = 0; k < c->n_scal; k++) {
        const char *x = at(r->base[f->chain_scal[k].slot], f->chain_scal[k].off);
        if (!x) return false;
        memcpy(&c->scal[k], x, sizeof(float));
    }
    return true;
}

/* Rows of tile t, which starts at row r0: the last one takes the rest. */
static int64_t tile_rows(const fused *f, int64_t t, int64_t r0) {
    return t + 1 < f->tiles ? f->tile_rows : f->rows - r0;
}

/* Tiles t0.. of a group run as its chain. */
static void run_chain_tiles(run_ctx *r, const fused *f, int64_t t0, int64_t t1) {
    const musa_chain *c = f->chain;
    char *base[MUSA_CHAIN_EXT], *p[MUSA_CHAIN_EXT];
    for (int k = 0; k < c->n_ext; k++)
        base[k] = at(r->base[f->chain_ext[k].slot], f->chain_ext[k].off);
    for (int64_t t = t0; t < t1; t++) {
        int64_t r0 = t * f->tile_rows, rows = tile_rows(f, t, r0);
        for (int k = 0; k < c->n_ext; k++) p[k] = base[k] + r0 * (int64_t)sizeof(float);
        musa_chain_run(c, rows, p);
    }
}

static int run_tiles(fused_ctx *fc, int64_t t0, int64_t t1, char *chunk) {
    fused *f = fc->in->f;
    run_ctx *r = fc->r;
    musa_kview kv[MUSA_PLAN_KV_STACK];
    char *dest[MUSA_MAX_OUTPUTS];
    int rc = MUSA_OK;
    if (f->chain_on) {
        run_chain_tiles(r, f, t0, t1);
        return MUSA_OK;
    }
    for (int64_t t = t0; t < t1 && !rc; t++) {
        int64_t r0 = t * f->tile_rows, rows = tile_rows(f, t, r0);
        for (int i = 0; i < f->n; i++) {
            const kcall *k = &f->m[i];
            int nk = k->n_out + k->n_in;
            if (f->loop && f->loop[i]) {
                run_lean(r, f, k, f->loop[i], chunk, r0, rows);
                continue;
            }
            for (int q = 0; q < nk; q++) {
                kv[q] = k->kv[q];
                if (k->ref[q].slot == MUSA_SLOT_TILE) {
                    kv[q].data = at(chunk, k->ref[q].off);
                    if (kv[q].ndim > 0) kv[q].shape[0] = rows;
                    continue;
                }
                kv[q].data = at(r->base[k->ref[q].slot], k->ref[q].off);
                if (k->cut[q] && kv[q].ndim > 0 && kv[q].data) { /* (NULL: an empty buffer) */
                    kv[q].data +=
                        r0 * kv[q].strides[0] * (int64_t)musa_dtype_info[kv[q].dtype].size;
                    kv[q].shape[0] = rows;
                }
            }
            bool streamed = false;
            for (int q = 0; q < k->n_out; q++) {
                dest[q] = NULL;
                if (k->cut[q] != MUSA_CUT_STREAM) continue;
                dest[q] = kv[q].data, kv[q].data = at(chunk, (int64_t)f->stage_off);
                streamed = true;
            }
            rc = call_kernel(k, kv, at(chunk, (int64_t)f->tile_bytes));
            if (rc) {
                fc->failed = k;
                break;
            }
            for (int q = 0; streamed && q < k->n_out; q++)
                if (dest[q])
                    stream_copy(dest[q], kv[q].data,
                                (size_t)rows * musa_dtype_info[kv[q].dtype].size);
        }
    }
    stream_fence();
    return rc;
}

static void fused_chunk(void *ctx, int64_t c0, int64_t c1) {
    fused_ctx *fc = ctx;
    for (int64_t c = c0; c < c1; c++) {
        int64_t tiles = fc->in->f->tiles;
        int64_t t0 = c * tiles / fc->chunks, t1 = (c + 1) * tiles / fc->chunks;
        char *chunk =
            at(fc->r->scratch, (int64_t)(fc->in->scratch_off + (size_t)c * fc->in->f->chunk_bytes));
        int rc = run_tiles(fc, t0, t1, chunk);
        if (rc) {
            int expected = 0;
            atomic_compare_exchange_strong(&fc->rc, &expected, rc);
            return;
        }
    }
}

static int run_fused_instr(run_ctx *r, instr *in) {
    fused *f = in->f;
    fused_ctx fc = {.r = r, .in = in};
    atomic_init(&fc.rc, 0);
    if (f->tiles == 0) return MUSA_OK;
    if (f->loop) resolve_lean(r, f);
    f->chain_on = f->chain && resolve_chain(r, f);
    int chunks = f->serial ? 1 : musa_pool_intra_threads();
    if (chunks > f->max_chunks) chunks = f->max_chunks;
    if (chunks > f->tiles) chunks = (int)f->tiles;
    if (chunks < 1) chunks = 1;
    fc.chunks = chunks;
    if (chunks == 1)
        fused_chunk(&fc, 0, 1);
    else
        musa_parallel_for(chunks, 1, fused_chunk, &fc);
    int rc = atomic_load(&fc.rc);
    if (rc && fc.failed) r->fail_loc = fc.failed->loc, r->fail_name = fc.failed->name;
    return rc;
}

/* Update rows as one multi-tensor kernel: one parallel loop over them all,
 * one profiler event; a failure names the first row's op and line. */
static int run_multi_instr(run_ctx *r, instr *in) {
    multi *u = in->u;
    for (int i = 0; i < u->n; i++) {
        kcall *k = &u->m[i];
        for (int q = 0; q < k->n_out + k->n_in; q++)
            k->kv[q].data = r->base[k->ref[q].slot] + k->ref[q].off;
    }
    const kcall *k0 = &u->m[0];
    musa_kctx ctx = {
        .scratch = r->scratch + in->scratch_off, .scratch_bytes = u->scratch, .op_name = k0->name};
    int rc = cpu_update_multi(&ctx, k0->kernel, u->n, u->rows, k0->n_in, k0->attrs);
    if (rc) r->fail_loc = k0->loc, r->fail_name = k0->name;
    return rc;
}

static int run_instr_(run_ctx *r, instr *in) {
    switch ((musa_instr_kind)in->kind) {
    case MUSA_INSTR_KERNEL:
        return run_kernel_instr(r, in);
    case MUSA_INSTR_FUSED:
        return run_fused_instr(r, in);
    case MUSA_INSTR_MULTI:
        return run_multi_instr(r, in);
    }
    return musa_err(MUSA_ERR_RUNTIME, "[jit] unknown instruction kind %d", in->kind);
}

/* One profiler event per instruction: a kernel by its op, a fused group as
 * "fused(add, mul, relu)", a multi-tensor update by its op with the number
 * of parameters as the detail. Under MUSA_PROFILE_SHAPES a kernel's or
 * group's detail is its (last) node's inputs, and under MUSA_PROFILE_STACK
 * its location that node's line. The event copies its name and location:
 * a group's name lives in the plan, a line in the graph, and either may be
 * freed before the events are read. */
static int run_instr(run_ctx *r, instr *in) {
    int prof = musa_prof_on();
    if (MUSA_LIKELY(!prof)) return run_instr_(r, in);
    int64_t t0 = musa_prof_now();
    int rc = run_instr_(r, in);
    const musa_graph *g = r->p->g;
    const musa_gnode *n = &g->nodes.data[in->node];
    char detail[512] = "";
    if (in->kind == MUSA_INSTR_MULTI) {
        snprintf(detail, sizeof detail, "%d parameters", in->u->n);
    } else if (prof & MUSA_PROFILE_SHAPES) {
        size_t len = 0;
        for (int i = 0; i < n->n_in; i++) {
            const musa_gvalue *v = &g->values.data[n->in[i]];
            if (!musa_prof_shape_append(detail, sizeof detail, &len, (musa_dtype)v->dtype, v->ndim,
                                        v->shape))
                break;
        }
    }
    const char *name = in->pname ? in->pname : in->k.name;
    musa_prof_complete_at(MUSA_PROFILE_PLAN, name ? name : "instruction", t0, detail, n->loc);
    return rc;
}

/* The instructions' profiler names, made once, before any of them runs
 * (parallel steps must not share the arena). Without memory a fused group
 * keeps its last member's name. */
static void name_instrs(musa_plan *p) {
    for (int i = 0; i < p->n_instrs; i++) {
        instr *in = &p->instrs[i];
        if (in->kind == MUSA_INSTR_KERNEL) { /* a custom op by its registered name */
            const char *c =
                in->k.op == MUSA_OP_custom
                    ? musa_custom_op_name((int)((const musa_attrs_custom *)in->k.attrs)->index)
                    : NULL;
            in->pname = c ? c : in->k.name;
        }
        if (in->kind == MUSA_INSTR_MULTI) in->pname = in->u->m[0].name;
        if (in->kind != MUSA_INSTR_FUSED) continue;
        size_t len = sizeof "fused()";
        for (int m = 0; m < in->f->n; m++) len += strlen(in->f->m[m].name) + 2;
        char *s = musa_arena_alloc(&p->arena, len, 1);
        if (!s) {
            in->pname = in->f->m[in->f->n - 1].name;
            continue;
        }
        size_t at_ = (size_t)snprintf(s, len, "fused(");
        for (int m = 0; m < in->f->n; m++)
            at_ += (size_t)snprintf(s + at_, len - at_, "%s%s", m ? ", " : "", in->f->m[m].name);
        snprintf(s + at_, len - at_, ")");
        in->pname = s;
    }
    p->pnames = true;
}

typedef struct par_ctx {
    run_ctx *r;
    step *s;
    atomic_int rc;
} par_ctx;

static void par_body(void *ctx, int64_t b, int64_t e) {
    par_ctx *pc = ctx;
    for (int64_t c = b; c < e; c++) {
        int rc = run_instr(pc->r, &pc->r->p->instrs[pc->s->first + c]);
        if (rc) {
            int expected = 0;
            atomic_compare_exchange_strong(&pc->rc, &expected, rc);
        }
    }
}

/* The instructions of a parallel step on the OpenMP team that kernels use
 * (its threads are awake right after a kernel; a separate pool would wait
 * for them to stop spinning); kernels inside run on one thread each. */
static int run_parallel(run_ctx *r, step *s) {
    par_ctx pc = {.r = r, .s = s};
    atomic_init(&pc.rc, 0);
    musa_parallel_for(s->count, 1, par_body, &pc);
    r->p->stats.parallel_tasks += (uint64_t)s->count;
    return atomic_load(&pc.rc);
}

static int check_input(const musa_plan *p, int i, const musa_tensor *t) {
    const musa_gvalue *v = &p->g->values.data[p->g->inputs.data[i]];
    char s1[128], s2[128];
    const char *nm = v->name ? v->name : "";
    if (!t) return musa_err(MUSA_ERR_VALUE, "[jit] input %d%s%s is NULL", i, *nm ? " " : "", nm);
    if (!t->storage)
        return musa_err(MUSA_ERR_VALUE, "[jit] input %d%s%s is a meta tensor", i, *nm ? " " : "",
                        nm);
    if (t->dtype != v->dtype || !musa_shape_equal(t->ndim, t->shape, v->ndim, v->shape))
        return musa_err(
            MUSA_ERR_VALUE, "[jit] input %d%s%s is %s%s but the plan was compiled for %s%s", i,
            *nm ? " " : "", nm, musa_dtype_name((musa_dtype)t->dtype),
            musa_shape_str(t->ndim, t->shape, s1, sizeof s1), musa_dtype_name((musa_dtype)v->dtype),
            musa_shape_str(v->ndim, v->shape, s2, sizeof s2));
    if (!musa_tensor_is_contiguous(t))
        return musa_err(MUSA_ERR_VALUE, "[jit] input %d%s%s must be contiguous", i, *nm ? " " : "",
                        nm);
    return MUSA_OK;
}

static char *tensor_data(const musa_tensor *t) {
    return t->storage
               ? (char *)t->storage->data + (size_t)t->offset * musa_dtype_info[t->dtype].size
               : NULL;
}

/* A run's bindings: the slots' base pointers (inputs, parameters, output
 * buffers; the arena's are set under the lock), the output buffers (NULL
 * until allocated, unless `eager_roots`), and each mutation's target view
 * (data NULL: no target in this run). */
typedef struct run_args {
    musa_plan *p;
    char **base;
    musa_storage *arena; /* the run's arena, a reference, when the plan loans outputs */
    musa_tensor **roots;
    musa_kview *targets;
    int n_targets;
    bool eager_roots; /* every output buffer is allocated already */
} run_args;

/* The steps, then the write-backs, under the plan's lock. */
static int run_steps(run_args *a) {
    musa_plan *p = a->p;
    const musa_graph *g = p->g;
    char **base = a->base;
    int rc = MUSA_OK;
    size_t total = p->arena_bytes; /* data and the steps' scratch */
    pthread_mutex_lock(&p->lock);
    if (p->n_loans && p->mem && atomic_load(&p->mem->refcount) > 1) {
        /* an earlier run's loaned outputs are still held: they keep that block */
        musa_storage_release(p->mem);
        p->mem = NULL;
        p->stats.arena_renewals++;
    }
    if (total && !p->mem && !(p->mem = musa_storage_exact(total))) {
        pthread_mutex_unlock(&p->lock);
        return MUSA_ERR_NOMEM;
    }
    if (p->n_loans && p->mem) atomic_fetch_add(&(a->arena = p->mem)->refcount, 1);
    if (MUSA_UNLIKELY(musa_prof_on()) && !p->pnames) name_instrs(p);
    char *mem = p->mem ? p->mem->data : NULL;
    base[MUSA_SLOT_ARENA] = mem;
    base[MUSA_SLOT_SCRATCH] = mem; /* scratch offsets are arena offsets */
    base[MUSA_SLOT_TILE] = NULL;
    int out_slot0 = MUSA_SLOT_IO + p->n_inputs + p->n_params, next_out = 0;
    run_ctx r = {.p = p, .base = base, .scratch = base[MUSA_SLOT_SCRATCH]};
    for (int s = 0; s < p->n_steps && !rc; s++) {
        /* Output buffers appear when first written, as eager allocates them. */
        for (; !a->eager_roots && next_out < p->n_out_roots && !rc; next_out++) {
            int k = p->out_order[next_out];
            if (p->out_first[k] != s) break;
            const musa_gvalue *v = &g->values.data[p->out_roots[k]];
            if (!(a->roots[k] = musa_tensor_alloc((musa_dtype)v->dtype, v->ndim, v->shape)))
                rc = musa_last_error_code();
            else
                base[out_slot0 + k] = tensor_data(a->roots[k]);
        }
        if (rc) break;
        step *st = &p->steps[s];
        rc = st->parallel ? run_parallel(&r, st) : run_instr(&r, &p->instrs[st->first]);
        if (MUSA_UNLIKELY(musa_comm_pending())) musa_comm_progress(); /* overlap collectives */
        if (!rc && MUSA_UNLIKELY(musa_interrupt_pending()) && musa_interrupt_take())
            rc = musa_err(MUSA_ERR_INTERRUPTED,
                          "[jit] compiled run interrupted after step %d of %d", s + 1, p->n_steps);
        if (p->opt.poison && !rc)
            for (int k = 0; k < p->n_bufs; k++)
                if (p->bufs[k].last == s) memset(mem + p->bufs[k].offset, 0xff, p->bufs[k].bytes);
    }
    if (rc) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", musa_last_error());
        /* a collective in flight on the arena would write into it later */
        if (musa_comm_pending()) musa_comm_drain();
        if (r.fail_loc)
            rc = musa_err(rc, "%s (compiled %s, recorded at %s)", msg, r.fail_name, r.fail_loc);
    }
    /* Mutations: write final values back into inputs and parameters. */
    for (int i = 0; i < a->n_targets && !rc; i++) {
        if (!a->targets[i].data) continue;
        const musa_gmutation *m = &g->mutations.data[i];
        musa_kview ks;
        musa_plan_kview_of(&g->values.data[m->value], &ks);
        kref lr = p->vloc[m->value];
        ks.data = base[lr.slot] + lr.off;
        if (ks.data != a->targets[i].data) rc = musa_cpu_copy(&a->targets[i], &ks);
    }
    if (!rc) p->stats.runs++;
    pthread_mutex_unlock(&p->lock);
    return rc;
}

/* A run queued on a stream: its bindings, owned. */
typedef struct queued_run {
    run_args a;
    char *mem; /* base, then targets */
} queued_run;

static int queued_run_go(void *ctx) {
    return run_steps(&((queued_run *)ctx)->a);
}

static void queued_run_free(void *ctx) {
    queued_run *q = ctx;
    atomic_fetch_sub(&q->a.p->queued, 1);
    free(q->mem);
    free(q);
}

/* With a stream current: queue the steps on it (the output buffers are
 * allocated now), reading the inputs and parameters and writing the outputs
 * and the mutated tensors. */
static int run_on_stream(musa_stream *s, run_args *a, musa_tensor *const *inputs,
                         musa_tensor *const *mut_targets) {
    musa_plan *p = a->p;
    size_t nb = sizeof(char *) * (size_t)p->n_slots, nt = sizeof(musa_kview) * (size_t)a->n_targets;
    int n_rd = p->n_inputs + p->n_params, n_wr = p->n_out_roots + a->n_targets;
    queued_run *q = musa_calloc(1, sizeof *q, "plan_run");
    char *mem = q ? musa_malloc(nb + nt + 1, "plan_run") : NULL;
    musa_storage **st = mem ? musa_calloc((size_t)(n_rd + n_wr) + 1, sizeof *st, "plan_run") : NULL;
    if (!st) {
        free(mem), free(q);
        return MUSA_ERR_NOMEM;
    }
    q->mem = mem;
    q->a = *a;
    q->a.base = (char **)mem;
    memcpy(q->a.base, a->base, nb);
    q->a.targets = (musa_kview *)(mem + nb);
    if (nt) memcpy(q->a.targets, a->targets, nt);
    const musa_graph *g = p->g;
    for (int i = 0; i < p->n_inputs; i++) st[i] = inputs[i]->storage;
    for (int k = 0; k < p->n_params; k++)
        st[p->n_inputs + k] = g->values.data[p->param_vals[k]].tensor->storage;
    for (int k = 0; k < p->n_out_roots; k++) st[n_rd + k] = a->roots[k]->storage;
    for (int i = 0; i < a->n_targets; i++)
        st[n_rd + p->n_out_roots + i] = mut_targets[i] ? mut_targets[i]->storage : NULL;
    atomic_fetch_add(&p->queued, 1);
    musa_stream_work w = {
        .name = "compiled run", .fn = queued_run_go, .free_ctx = queued_run_free, .ctx = q};
    int rc = musa_stream_submit(s, &w, n_rd, st, n_wr, st + n_rd, NULL);
    free(st);
    return rc;
}

/* Whether a plan's runs stay on the calling thread even under a stream: it
 * draws random numbers (in program order, as eager does) or calls custom
 * ops (whose forward may call Python). Found once, on the first run. */
static bool runs_here(musa_plan *p) {
    int v = atomic_load_explicit(&p->runs_here, memory_order_relaxed);
    if (v) return v > 0;
    bool here = p->n_loans > 0; /* the arena is chosen and lent under the lock, in the run */
    const musa_graph *g = p->g;
    for (int64_t i = 0; i < g->nodes.len && !here; i++) {
        const musa_gnode *n = &g->nodes.data[i];
        here = !n->dead && (n->op == MUSA_OP_custom || (musa_ops[n->op].flags & MUSA_OPF_ORDERED));
    }
    atomic_store_explicit(&p->runs_here, here ? 1 : -1, memory_order_relaxed);
    return here;
}

int musa_plan_run(musa_plan *p, int n_in, musa_tensor *const *inputs, int n_out,
                  musa_tensor **outputs) {
    if (!p) return musa_err(MUSA_ERR_VALUE, "[jit] plan is NULL");
    if ((n_in && !inputs) || (n_out && !outputs))
        return musa_err(MUSA_ERR_VALUE, "[jit] plan_run: NULL input or output array");
    const musa_graph *g = p->g;
    if (n_in != p->n_inputs)
        return musa_err(MUSA_ERR_VALUE, "[jit] the plan takes %d inputs, got %d", p->n_inputs,
                        n_in);
    if (n_out != (int)g->outputs.len)
        return musa_err(MUSA_ERR_VALUE, "[jit] the plan has %lld outputs, got room for %d",
                        (long long)g->outputs.len, n_out);
    for (int i = 0; i < n_out; i++) outputs[i] = NULL;
    for (int i = 0; i < n_in; i++) {
        int rc = check_input(p, i, inputs[i]);
        if (rc) return rc;
    }
    /* a parameter bound by reference that has no data (a meta tensor, as a
     * symbolic capture makes them): kernels would read through NULL */
    for (int k = 0; k < p->n_params; k++) {
        const musa_gvalue *v = &g->values.data[p->param_vals[k]];
        if (!v->tensor->storage && v->tensor->numel > 0)
            return musa_err(MUSA_ERR_VALUE,
                            "[jit] parameter %d%s%s (a tensor the function reads, recorded at %s) "
                            "is a meta tensor, without data",
                            k, v->name ? " " : "", v->name ? v->name : "",
                            v->loc ? v->loc : "an unknown line");
    }
    int n_mut = (int)g->mutations.len;
    run_args a = {.p = p};
    char *base_buf[64], **base = base_buf;
    musa_tensor *roots_buf[16], **roots = roots_buf;
    musa_kview targets_buf[8], *targets = targets_buf;
    musa_tensor *mt_buf[8], **mut_targets = mt_buf;
    if (p->n_slots > 64 && !(base = musa_calloc((size_t)p->n_slots, sizeof *base, "plan_run")))
        return MUSA_ERR_NOMEM;
    int rc = MUSA_OK;
    if (p->n_out_roots > 16 &&
        !(roots = musa_calloc((size_t)p->n_out_roots, sizeof *roots, "plan_run")))
        rc = MUSA_ERR_NOMEM;
    if (!rc && n_mut > 8 &&
        (!(targets = musa_calloc((size_t)n_mut, sizeof *targets, "plan_run")) ||
         !(mut_targets = musa_calloc((size_t)n_mut, sizeof *mut_targets, "plan_run"))))
        rc = MUSA_ERR_NOMEM;
    if (rc) goto done;
    for (int k = 0; k < p->n_out_roots; k++) roots[k] = NULL;
    int slot = MUSA_SLOT_IO;
    for (int i = 0; i < n_in; i++) base[slot++] = tensor_data(inputs[i]);
    for (int k = 0; k < p->n_params; k++)
        base[slot++] = tensor_data(g->values.data[p->param_vals[k]].tensor);
    /* the tensors mutations write back into */
    for (int i = 0; i < n_mut; i++) {
        const musa_gmutation *m = &g->mutations.data[i];
        const musa_gvalue *tv = &g->values.data[m->target];
        musa_tensor *target = tv->kind == MUSA_V_PARAM ? tv->tensor : NULL;
        for (int k = 0; k < n_in && !target; k++)
            if (g->inputs.data[k] == m->target) target = inputs[k];
        mut_targets[i] = target;
        targets[i].data = NULL;
        if (target) musa_tensor_kview(target, &targets[i]);
    }
    a.base = base, a.roots = roots, a.targets = targets, a.n_targets = n_mut;
    musa_stream *stream = musa_streams_live() ? musa_stream_current() : NULL;
    if (stream && runs_here(p)) stream = NULL;
    if (stream) {
        a.eager_roots = true;
        for (int k = 0; k < p->n_out_roots && !rc; k++) {
            const musa_gvalue *v = &g->values.data[p->out_roots[k]];
            if (!(roots[k] = musa_tensor_alloc((musa_dtype)v->dtype, v->ndim, v->shape)))
                rc = musa_last_error_code();
            else
                base[MUSA_SLOT_IO + n_in + p->n_params + k] = tensor_data(roots[k]);
        }
        if (!rc) rc = run_on_stream(stream, &a, inputs, mut_targets);
    } else {
        if (musa_streams_live()) { /* stream work on what the run touches finishes first */
            for (int i = 0; i < n_in && !rc; i++) rc = musa_storage_wait(inputs[i]->storage, false);
            for (int k = 0; k < p->n_params && !rc; k++)
                rc = musa_storage_wait(g->values.data[p->param_vals[k]].tensor->storage, false);
            for (int i = 0; i < n_mut && !rc; i++)
                if (mut_targets[i]) rc = musa_storage_wait(mut_targets[i]->storage, true);
        }
        if (!rc) rc = run_steps(&a);
    }
    for (int k = 0; k < p->n_out_roots && !rc; k++) { /* outputs no step writes */
        if (roots[k]) continue;
        const musa_gvalue *v = &g->values.data[p->out_roots[k]];
        if (!(roots[k] = musa_tensor_alloc((musa_dtype)v->dtype, v->ndim, v->shape)))
            rc = musa_last_error_code();
    }
    if (rc) goto done;
    /* Every tensor written into has a new version, as after eager's in-place
     * ops, whether the plan wrote it in place or copied the value back: a
     * caller's contiguous copy of a strided argument is copied back into it
     * on that sign (jit/_args.py, copy_back). */
    for (int i = 0; i < n_mut; i++)
        if (mut_targets[i]) musa_tensor_bump_version(mut_targets[i]);
    /* Outputs. */
    for (int i = 0; i < n_out; i++) {
        int32_t v = g->outputs.data[i];
        const musa_gvalue *x = &g->values.data[v];
        const musa_gvalue *root = &g->values.data[x->root];
        musa_tensor *src = NULL;
        if (root->kind == MUSA_V_NODE) {
            for (int k = 0; k < p->n_out_roots; k++)
                if (p->out_roots[k] == x->root) src = roots[k];
            bool loan = false;
            for (int k = 0; !src && k < p->n_loans; k++) loan = loan || p->loan_roots[k] == x->root;
            if (loan) { /* a view of the arena (empty loans have none: a tensor of their own) */
                int64_t off = p->vloc[v].off / (int64_t)musa_dtype_info[x->dtype].size;
                if (!(outputs[i] =
                          a.arena ? musa_tensor_on_storage(a.arena, (musa_dtype)x->dtype, x->ndim,
                                                           x->shape, x->strides, off)
                                  : musa_tensor_alloc((musa_dtype)x->dtype, x->ndim, x->shape))) {
                    rc = musa_last_error_code();
                    goto done;
                }
                continue;
            }
        } else if (root->kind == MUSA_V_INPUT) {
            for (int k = 0; k < n_in; k++)
                if (g->inputs.data[k] == x->root) src = inputs[k];
        } else {
            src = root->tensor;
        }
        if (!src) {
            rc = musa_err(MUSA_ERR_RUNTIME, "[jit] output %d has no buffer", i);
            goto done;
        }
        musa_tensor *o;
        if (x->root == v && root->kind != MUSA_V_CONST)
            o = musa_tensor_retain(src);
        else if (root->kind == MUSA_V_CONST && x->root == v)
            o = musa_clone(src);
        else
            o = musa_tensor_view_of(src, x->ndim, x->shape, x->strides, src->offset + x->offset);
        if (!o) {
            rc = musa_last_error_code();
            goto done;
        }
        outputs[i] = o;
    }
done:
    if (rc)
        for (int i = 0; i < n_out; i++)
            if (outputs[i]) musa_tensor_release(outputs[i]), outputs[i] = NULL;
    for (int k = 0; roots && k < p->n_out_roots; k++) musa_tensor_release(roots[k]);
    musa_storage_release(a.arena);
    if (base != base_buf) free(base);
    if (roots != roots_buf) free(roots);
    if (targets != targets_buf) free(targets);
    if (mut_targets != mt_buf) free(mut_targets);
    return rc;
}

char *musa_plan_text(const musa_plan *p) {
    if (!p) {
        musa_err(MUSA_ERR_VALUE, "[jit] plan is NULL");
        return NULL;
    }
    size_t cap = 4096, len = 0;
    char *s = malloc(cap);
    if (!s) {
        musa_err_nomem("plan_text", cap);
        return NULL;
    }
    s[0] = 0;
#define APPEND(...)                                                                                \
    do {                                                                                           \
        int n_ = snprintf(NULL, 0, __VA_ARGS__);                                                   \
        if (len + (size_t)n_ + 1 > cap) {                                                          \
            cap = (len + (size_t)n_ + 1) * 2;                                                      \
            char *q_ = realloc(s, cap);                                                            \
            if (!q_) {                                                                             \
                free(s);                                                                           \
                musa_err_nomem("plan_text", cap);                                                  \
                return NULL;                                                                       \
            }                                                                                      \
            s = q_;                                                                                \
        }                                                                                          \
        len += (size_t)snprintf(s + len, cap - len, __VA_ARGS__);                                  \
    } while (0)
    APPEND("plan: %d steps, %d instructions, arena %zu bytes with scratch (data %zu, naive %zu), "
           "scratch %zu\n",
           p->n_steps, p->n_instrs, p->arena_bytes, p->stats.arena_bytes, p->stats.naive_bytes,
           p->scratch_bytes);
    for (int st = 0; st < p->n_steps; st++) {
        const step *sp = &p->steps[st];
        APPEND("  %d%s:", st, sp->parallel ? " (parallel)" : "");
        for (int c = 0; c < sp->count; c++) {
            const instr *in = &p->instrs[sp->first + c];
            if (in->kind == MUSA_INSTR_KERNEL) {
                APPEND(" %s%s", in->k.name, musa_plan_kcall_winograd(&in->k) ? " (winograd)" : "");
            } else if (in->kind == MUSA_INSTR_MULTI) {
                int64_t elems = 0; /* the rows' parameters: input 0 of each */
                for (int i = 0; i < in->u->n; i++)
                    elems += musa_kview_numel(&in->u->m[i].kv[in->u->m[i].n_out]);
                APPEND(" multi[%s x%d, %lld elements]", in->u->m[0].name, in->u->n,
                       (long long)elems);
            } else {
                APPEND(" fused[");
                for (int i = 0; i < in->f->n; i++) APPEND("%s%s", i ? "," : "", in->f->m[i].name);
                APPEND("] tiles of %lld rows", (long long)in->f->tile_rows);
                int streamed = 0;
                for (int i = 0; i < in->f->n; i++)
                    for (int q = 0; q < in->f->m[i].n_out; q++)
                        streamed += in->f->m[i].cut[q] == MUSA_CUT_STREAM;
                if (streamed) APPEND(", %d streamed", streamed);
                int lean = 0;
                for (int i = 0; i < in->f->n; i++) lean += in->f->m[i].lean != NULL;
                if (lean) APPEND(", %d lean", lean);
                if (in->f->chain) APPEND(", in registers (%d instructions)", in->f->chain->n_ins);
            }
        }
        APPEND("\n");
    }
#undef APPEND
    return s;
}
