/*
 * lower.c - the plan builder's last phase: each instruction becomes kernel
 * calls with their views and places (slots and offsets from the arena
 * phase), a fused group its tiles and tile buffers, an update run its rows;
 * each step's scratch goes in a gap of the arena (build.c runs the phases).
 */
#include "builder.h"

#include "../../backend/cpu/iter.h"
#include "../../backend/cpu/kernels.h"
#include "../../base/threadpool.h"

/* Elements per fused tile: the least, and that of row groups; the most of
 * an elementwise group; the tile bytes such a group aims for. A lean group
 * (each member's loop called directly) starts lower and aims for half of
 * L1, counting the inputs it reads from memory. */
#define TILE_ELEMS       2048
#define TILE_MAX_ELEMS   65536
#define TILE_BUDGET      ((size_t)192 << 10)
#define LEAN_TILE_ELEMS  1024
#define LEAN_TILE_BUDGET ((size_t)24 << 10)
#define STREAM_MIN_BYTES ((size_t)8 << 20) /* a streamed output: larger than a core's L2 */

/* Lists a run copies onto its stack (musa_plan_kv_shared) are built in the
 * builder's scratch and interned at the end of lowering; longer lists, and
 * update rows (patched in place: own), are the plan's own. */
static int fill_kcall(builder *b, kcall *k, const musa_gnode *n, bool own) {
    const musa_graph *g = b->g;
    const musa_op_info *info = &musa_ops[n->op];
    k->kernel = info->kernel;
    k->op = (musa_op_id)n->op;
    k->attrs = n->attrs;
    k->name = info->name;
    k->loc = n->loc;
    k->n_in = n->n_in;
    k->n_out = n->n_out;
    int nk = n->n_in + n->n_out;
    k->kv =
        own || !musa_plan_kv_shared(nk) ? PLAN_NEW(b, musa_kview, nk) : TMP_NEW(b, musa_kview, nk);
    k->ref = PLAN_NEW(b, kref, nk);
    k->cut = PLAN_NEW(b, uint8_t, nk);
    if (!k->kv || !k->ref || !k->cut) return MUSA_ERR_NOMEM;
    for (int j = 0; j < n->n_out; j++) musa_plan_kview_of(&g->values.data[n->out[j]], &k->kv[j]);
    for (int i = 0; i < n->n_in; i++)
        musa_plan_kview_of(&g->values.data[n->in[i]], &k->kv[n->n_out + i]);
    if (info->workspace)
        k->scratch = info->workspace(k->kv, n->n_out, k->kv + n->n_out, n->n_in, k->attrs);
    return MUSA_OK;
}

/* A tile buffer of a fused group, and the last member that reads its
 * current value. */
typedef struct {
    size_t off, size;
    int busy_until;
} tile_slot;

/* Whether input q of member i of the group mem[] is read by an earlier
 * member, or is an earlier input of the same member. */
static bool read_before(const musa_graph *g, const int32_t *mem, int i, int q) {
    int32_t v = g->nodes.data[mem[i]].in[q];
    for (int i2 = 0; i2 <= i; i2++) {
        const musa_gnode *n2 = &g->nodes.data[mem[i2]];
        for (int q2 = 0; q2 < (i2 < i ? n2->n_in : q); q2++)
            if (n2->in[q2] == v) return true;
    }
    return false;
}

/* Elements per tile of a pure elementwise group of nodes mem[0..cnt) over
 * total elements: the largest power of two that keeps the group's tiles
 * (its members' outputs, a bound on the tile buffers) within `budget`
 * bytes and leaves four tiles to each of its `chunks` (the threads it will
 * use: one for a group too small to split), from `least` up. Each tile costs
 * a kernel call per member and restarts the members' input streams: with
 * kernel calls, ResNet-18's relu backward, where(x > 0, a + b, 0) over 2M
 * floats, took 564-604 us in tiles of 2048 against 436-447 in tiles of
 * 16384 (2 threads, A/B), and the gelu-tanh chain 3-8% less in tiles of
 * 4096; tiles of 64K were slower again (505-527 us), as were tiles not a
 * power of two (page-straddling). A lean group's calls cost little, so its
 * tiles aim for L1 (LEAN_TILE_BUDGET): the gelu chain (8 lean members,
 * tiles of 1024) over 4M floats took 2.7 ms of CPU on one thread against
 * 3.3 in tiles of 2048 and 4.9 in tiles of 65536; the where group above
 * (tiles of 4096) is memory-bound and took the same time in tiles of 1024
 * to 16384. The tiling does not change the numbers: each member is
 * elementwise. A lean group's budget counts the full-size inputs it reads
 * from outside (`inputs`) as well. Counting outputs only against 48 KiB,
 * (x + 1) * x over 32M floats took tiles of 4096, whose input,
 * intermediate and staging tiles filled this machine's 48 KiB L1: 14.3 ms
 * of CPU on one thread, against 13.1 in tiles of 2048 and 11.4 in tiles of
 * 1024 (medians of six alternating processes). ((x * x + 1) * x - 2) took
 * 16.5-16.9 ms in tiles of 2048 against 13.2-13.4 in tiles of 1024, and
 * over 4M floats, which stay in the LLC, 1.50 against 1.25 ms. */
static int64_t elementwise_tile(const builder *b, const int32_t *mem, int cnt, int64_t total,
                                int chunks, int64_t least, size_t budget, bool inputs) {
    const musa_graph *g = b->g;
    size_t per_elem = 1;
    for (int i = 0; i < cnt; i++) {
        const musa_gnode *n = &g->nodes.data[mem[i]];
        for (int j = 0; j < n->n_out; j++)
            per_elem += musa_dtype_info[g->values.data[n->out[j]].dtype].size;
        for (int q = 0; inputs && q < n->n_in; q++) {
            const musa_gvalue *x = &g->values.data[n->in[q]];
            if (!b->internal[n->in[q]] && numel(x) == total && !read_before(g, mem, i, q))
                per_elem += musa_dtype_info[x->dtype].size;
        }
    }
    int64_t per = MUSA_MIN((int64_t)(budget / per_elem), total / (4 * chunks));
    int64_t tile = least;
    while (tile * 2 <= MUSA_MIN(per, TILE_MAX_ELEMS)) tile *= 2;
    return tile;
}

/* Whether member n of a flat group (group shape gs) runs lean: its kernel's
 * loop called on each tile's runs directly. Its single-element inputs come
 * from outside the group, since a resolver may read them (once per run,
 * before the group computes anything): in a group of one element every
 * input is one, and pow's exponent made inside such a group was read as
 * unknown where eager's kernel saw 2 and squared (seed 17906 of
 * test_jit_fuzz: 1 ulp apart). "Inside" is where the value is made, not
 * whether it stays there: an exponent the group also writes out for a
 * later instruction was read from its arena buffer before this run wrote
 * it, i.e. whatever the buffer held (seed 349700: a float16 pow gave
 * 128.25 instead of inf from the plan's second run on). */
static bool lean_member(const builder *b, const musa_gnode *n, const musa_gvalue *gs) {
    const musa_op_info *info = &musa_ops[n->op];
    if (!info->loop || info->workspace || n->n_out != 1 || n->n_in + 1 > MUSA_ITER_MAX_OPS)
        return false;
    musa_kview kv[MUSA_ITER_MAX_OPS];
    for (int q = 0; q <= n->n_in; q++) {
        int32_t v = q == 0 ? n->out[0] : n->in[q - 1];
        const musa_gvalue *x = &b->g->values.data[v];
        bool full = musa_shape_equal(x->ndim, x->shape, gs->ndim, gs->shape);
        if (q && (!full || numel(gs) == 1) && (b->internal[v] || b->vgroup[v] == n->group))
            return false;
        kv[q] = (musa_kview){.dtype = x->dtype, .ndim = full, .shape = {numel(gs)}, .strides = {1}};
    }
    return info->loop(kv, kv + 1, n->attrs) != NULL;
}

/* A chain's operand index for the place r of a full operand (ext) or a
 * single element (scal): the same place, the same index. -1: too many. */
static int chain_place(kref *refs, int *n, int max, kref r) {
    for (int k = 0; k < *n; k++)
        if (refs[k].slot == r.slot && refs[k].off == r.off) return k;
    if (*n == max) return -1;
    refs[*n] = r;
    return (*n)++;
}

/* The program of a flat lean group of float32 members of one output and
 * one or two inputs, run in registers (chain.h): f->chain, or NULL where the
 * group is not such a group (it then runs tile by tile). Each member's
 * result stays in the accumulator for the next member; one read again later
 * is spilled, one read after the group is stored (streamed where the tiles
 * would stream it). Which operation a member is comes from its loop, at
 * each run (run.c). */
static int build_chain(builder *b, fused *f, const int32_t *mem, int cnt) {
    const musa_graph *g = b->g;
    f->chain = NULL;
    musa_chain *c =
        musa_arena_alloc(&b->tmp, MUSA_CHAIN_BYTES(MUSA_CHAIN_INS), _Alignof(musa_chain));
    kref *ext = TMP_NEW(b, kref, MUSA_CHAIN_EXT), *scal = TMP_NEW(b, kref, MUSA_CHAIN_SCAL);
    int32_t *spilled = TMP_NEW(b, int32_t, MUSA_CHAIN_SPILL);
    int *spill_last = TMP_NEW(b, int, MUSA_CHAIN_SPILL);
    if (!c || !ext || !scal || !spilled || !spill_last) return MUSA_ERR_NOMEM;
    memset(c, 0, MUSA_CHAIN_BYTES(MUSA_CHAIN_INS));
    int32_t acc = -1;
#define EMIT(...)                                                                                  \
    do {                                                                                           \
        if (c->n_ins == MUSA_CHAIN_INS) return MUSA_OK;                                            \
        c->ins[c->n_ins++] = (musa_chain_ins){__VA_ARGS__};                                        \
    } while (0)
    for (int i = 0; i < cnt; i++) {
        const musa_gnode *n = &g->nodes.data[mem[i]];
        const kcall *k = &f->m[i];
        if (!k->lean || n->n_out != 1 || n->n_in < 1 || n->n_in > 2) return MUSA_OK;
        for (int q = 0; q < n->n_out + n->n_in; q++)
            if (k->kv[q].dtype != MUSA_DTYPE_FLOAT32) return MUSA_OK;
        uint8_t src[2], idx[2];
        for (int q = 0; q < n->n_in; q++) {
            int32_t v = n->in[q];
            bool made = false; /* by an earlier member */
            for (int i2 = 0; i2 < i && !made; i2++) made = g->nodes.data[mem[i2]].out[0] == v;
            int x = 0;
            if (made && v == acc) {
                src[q] = MUSA_CH_ACC;
            } else if (made) {
                while (x < c->n_spill && spilled[x] != v) x++;
                if (x == c->n_spill)
                    return MUSA_OK; /* (cannot be: a value read later is spilled) */
                src[q] = MUSA_CH_SLOT;
            } else if (!k->lean[n->n_out + q]) {
                x = chain_place(scal, &c->n_scal, MUSA_CHAIN_SCAL, k->ref[n->n_out + q]);
                src[q] = MUSA_CH_SCALAR;
            } else {
                x = chain_place(ext, &c->n_ext, MUSA_CHAIN_EXT, k->ref[n->n_out + q]);
                if (x >= 0) c->ext_in |= 1u << x;
                src[q] = MUSA_CH_EXT;
            }
            if (x < 0) return MUSA_OK;
            idx[q] = (uint8_t)x;
        }
        int16_t mi = (int16_t)i;
        if (n->n_in == 1) {
            if (src[0] != MUSA_CH_ACC) EMIT(.code = MUSA_CH_LOAD, .src = src[0], .idx = idx[0]);
            EMIT(.code = MUSA_CH_UNARY, .member = mi);
        } else if (src[0] == MUSA_CH_ACC) {
            EMIT(.code = MUSA_CH_BIN, .src = src[1], .idx = idx[1], .member = mi);
        } else if (src[1] == MUSA_CH_ACC) {
            EMIT(.code = MUSA_CH_BINR, .src = src[0], .idx = idx[0], .member = mi);
        } else {
            EMIT(.code = MUSA_CH_LOAD, .src = src[0], .idx = idx[0]);
            EMIT(.code = MUSA_CH_BIN, .src = src[1], .idx = idx[1], .member = mi);
        }
        int32_t v = n->out[0];
        acc = v;
        if (!b->internal[v]) {
            int x = c->n_ext < MUSA_CHAIN_EXT ? c->n_ext++ : -1;
            if (x < 0) return MUSA_OK;
            ext[x] = k->ref[0];
            /* plain stores, also for an output the tiles stream: a chain's
             * non-temporal stores, block by block or in runs staged in L1,
             * measured 1.3x slower (the gelu-tanh chain over 32M floats, 2
             * threads: 10.9-11.2 ms against 8.4-8.6 with plain stores) */
            EMIT(.code = MUSA_CH_STORE, .idx = (uint8_t)x);
        }
        int last = i; /* the last member to read it, if after the next one */
        for (int i2 = i + 2; i2 < cnt; i2++) {
            const musa_gnode *n2 = &g->nodes.data[mem[i2]];
            for (int q = 0; q < n2->n_in; q++)
                if (n2->in[q] == v) last = i2;
        }
        if (last > i) { /* spilled, to a slot whose value nothing reads any more */
            int x = 0;
            while (x < c->n_spill && spill_last[x] > i) x++;
            if (x == MUSA_CHAIN_SPILL) return MUSA_OK;
            if (x == c->n_spill) c->n_spill++;
            spilled[x] = v, spill_last[x] = last;
            EMIT(.code = MUSA_CH_SPILL, .idx = (uint8_t)x);
        }
    }
#undef EMIT
    /* the plan keeps the instructions and operands the chain has (a builder's
     * chain holds room for MUSA_CHAIN_INS: 2.3 KB, a recurrent model has dozens) */
    f->chain = musa_arena_alloc(&b->p->arena, MUSA_CHAIN_BYTES(c->n_ins), _Alignof(musa_chain));
    f->chain_ext = PLAN_NEW(b, kref, c->n_ext + 1);
    f->chain_scal = PLAN_NEW(b, kref, c->n_scal + 1);
    if (!f->chain || !f->chain_ext || !f->chain_scal) return MUSA_ERR_NOMEM;
    memcpy(f->chain, c, MUSA_CHAIN_BYTES(c->n_ins));
    memcpy(f->chain_ext, ext, sizeof(kref) * (size_t)c->n_ext);
    memcpy(f->chain_scal, scal, sizeof(kref) * (size_t)c->n_scal);
    b->p->stats.chains++;
    return MUSA_OK;
}

/* The fewest rows a tile may have so that a member reading an input whose
 * dim 0 is its unit stride (a transposed matrix, copied or added) reads
 * whole cache lines of it: each tile reads tile_rows consecutive elements
 * from every one of the input's rows. 1 when no member reads such an input.
 * Copying a transposed 2048 x 2048 float32 matrix (times 2) in the tiles of
 * 8 rows the budget gave took 14.3-20.1 ms, against 2.3-2.7 eagerly and
 * 2.2-2.3 in tiles of 16 to 256 rows; 4096 x 256 in tiles of 4 rows 931 us,
 * against 237-268 (2 threads). ACROSS_TILE_MAX_ELEMS bounds what this adds
 * to the tile buffers: 1 MiB of float32 per tile. */
#define ACROSS_TILE_MAX_ELEMS ((int64_t)1 << 18)
static int64_t rows_for_whole_lines(const musa_graph *g, const int32_t *mem, int cnt,
                                    const musa_gvalue *gs) {
    int64_t least = 1;
    for (int i = 0; i < cnt; i++) {
        const musa_gnode *n = &g->nodes.data[mem[i]];
        for (int k = 0; k < n->n_in; k++) {
            const musa_gvalue *x = &g->values.data[n->in[k]];
            if (x->ndim < 2 || x->ndim != gs->ndim || x->shape[0] != gs->shape[0]) continue;
            musa_kview kv;
            musa_plan_kview_of(x, &kv);
            int64_t es = (int64_t)musa_dtype_info[x->dtype].size;
            if (kv.strides[0] == 1 && 64 / es > least) least = 64 / es;
        }
    }
    return least;
}

/* Fused group made of nodes mem[0..cnt). */
static int build_fused(builder *b, fused *f, const int32_t *mem, int cnt) {
    const musa_graph *g = b->g;
    f->n = cnt;
    f->m = PLAN_NEW(b, kcall, cnt);
    if (!f->m) return MUSA_ERR_NOMEM;
    const musa_gnode *first = &g->nodes.data[mem[0]];
    const musa_op_info *finfo = &musa_ops[first->op];
    f->serial = !(finfo->flags & MUSA_OPF_ELEMENTWISE);
    /* The group's shape: the output of its first member (every elementwise
     * member has it; a tail reduction cuts the same dim 0). */
    const musa_gvalue *gs = &g->values.data[first->out[0]];
    bool rows = false; /* a reduction or a row-wise member: tiles are whole rows */
    for (int i = 0; i < cnt; i++)
        rows |= !(musa_ops[g->nodes.data[mem[i]].op].flags & MUSA_OPF_ELEMENTWISE);
    int64_t total = numel(gs);
    /* Flatten pure elementwise groups whose operands are all full and
     * contiguous, or single elements: tiles are then plain runs. */
    bool flat = !f->serial && !rows;
    for (int i = 0; flat && i < cnt; i++) {
        const musa_gnode *n = &g->nodes.data[mem[i]];
        for (int k = 0; flat && k < n->n_in + n->n_out; k++) {
            int32_t v = k < n->n_out ? n->out[k] : n->in[k - n->n_out];
            const musa_gvalue *x = &g->values.data[v];
            musa_kview kv;
            musa_plan_kview_of(x, &kv);
            bool full = musa_shape_equal(x->ndim, x->shape, gs->ndim, gs->shape) &&
                        musa_kview_contiguous(&kv);
            flat = full || numel(x) == 1;
        }
    }
    int64_t inner = 1;
    for (int d = 1; d < gs->ndim; d++) inner *= gs->shape[d];
    f->rows = flat ? total : gs->shape[0];
    if (flat) inner = 1;
    /* a chunk of fewer elements than an eager cheap elementwise op's grain
     * (shared by the members' work) would cost a parallel region more than
     * it saves: the MLP's gt and where over 64 x 128 took 7.9 us as two
     * chunks, 2.1 us as one */
    int64_t min_chunk = MUSA_MAX(MUSA_GRAIN_MATH, MUSA_GRAIN_CHEAP / cnt);
    f->max_chunks =
        f->serial ? 1 : (int)MUSA_MAX(1, MUSA_MIN(musa_pool_threads(), total / min_chunk));
    bool lean = flat;
    for (int i = 0; lean && i < cnt; i++) lean = lean_member(b, &g->nodes.data[mem[i]], gs);
    int64_t per = f->serial ? MUSA_HEAD_TILE_ELEMS
                  : rows    ? TILE_ELEMS
                  : lean    ? elementwise_tile(b, mem, cnt, total, f->max_chunks, LEAN_TILE_ELEMS,
                                               LEAN_TILE_BUDGET, true)
                            : elementwise_tile(b, mem, cnt, total, f->max_chunks, TILE_ELEMS,
                                               TILE_BUDGET, false);
    f->tile_rows = inner > 0 ? MUSA_MAX(1, per / inner) : f->rows;
    if (!flat && !f->serial) {
        int64_t least = rows_for_whole_lines(g, mem, cnt, gs);
        if (f->tile_rows < least && least * inner <= ACROSS_TILE_MAX_ELEMS) f->tile_rows = least;
    }
    if (f->tile_rows > f->rows) f->tile_rows = f->rows ? f->rows : 1;
    /* The last tile takes the rows left; a head's takes them all, however
     * many, so that no product runs on fewer than MUSA_GEMM_MIN_ROWS rows
     * (a head tile has at least that many, passes/fuse.c): a 130 x 40 x 512
     * linear cut 128 + 2 was not bitwise eager's. */
    f->tiles = !f->tile_rows ? 0 /* no rows, no inner elements */
               : f->serial   ? f->rows / f->tile_rows
                             : (f->rows + f->tile_rows - 1) / f->tile_rows;
    int64_t tile_max =
        f->serial && f->tiles ? f->rows - (f->tiles - 1) * f->tile_rows : f->tile_rows;
    size_t tile_off = 0, member_scratch = 0;
    kref *vloc = b->p->vloc;
    tile_slot *slots = TMP_NEW(b, tile_slot, (size_t)cnt * MUSA_MAX_OUTPUTS);
    int nslots = 0;
    if (!slots) return MUSA_ERR_NOMEM;
    for (int i = 0; i < cnt; i++) {
        const musa_gnode *n = &g->nodes.data[mem[i]];
        const musa_op_info *info = &musa_ops[n->op];
        kcall *k = &f->m[i];
        int rc = fill_kcall(b, k, n, false);
        if (rc) return rc;
        bool ew = (info->flags & MUSA_OPF_ELEMENTWISE) != 0;
        for (int q = 0; q < k->n_out + k->n_in; q++) {
            int32_t v = q < k->n_out ? n->out[q] : n->in[q - k->n_out];
            const musa_gvalue *x = &g->values.data[v];
            musa_kview *kv = &k->kv[q];
            if (flat) {
                if (musa_shape_equal(x->ndim, x->shape, gs->ndim, gs->shape))
                    kv->ndim = 1, kv->shape[0] = total, kv->strides[0] = 1;
                else
                    kv->ndim = 0;
            }
            if (b->internal[v]) {
                vloc[v].slot = MUSA_SLOT_TILE;
                k->ref[q] = vloc[v];
                k->cut[q] = 1;
                continue;
            }
            k->ref[q] = vloc[v]; /* patched after memory planning */
            if (q < k->n_out)
                k->cut[q] = 1;
            else if (ew)
                k->cut[q] = kv->ndim == (flat ? 1 : gs->ndim) && kv->ndim > 0 &&
                            kv->shape[0] == f->rows && kv->strides[0] != 0;
            else
                k->cut[q] = q == k->n_out; /* head / reduction: input 0 only */
        }
        /* Tile buffers for internal outputs: tile_rows rows of the value, in
         * a buffer whose last reader came before this member (so the tiles
         * a group keeps live stay few, and in L1). */
        for (int j = 0; j < k->n_out; j++) {
            int32_t v = n->out[j];
            if (!b->internal[v]) continue;
            const musa_gvalue *x = &g->values.data[v];
            size_t row_bytes = musa_dtype_info[x->dtype].size * (size_t)(flat ? 1 : inner);
            size_t need = musa_plan_align(row_bytes * (size_t)tile_max);
            int last = i;
            for (int i2 = i + 1; i2 < cnt; i2++) {
                const musa_gnode *n2 = &g->nodes.data[mem[i2]];
                for (int q = 0; q < n2->n_in; q++)
                    if (n2->in[q] == v) last = i2;
            }
            int s = 0;
            while (s < nslots && (slots[s].busy_until >= i || slots[s].size < need)) s++;
            if (s == nslots) {
                slots[nslots++] = (tile_slot){.off = tile_off, .size = need};
                tile_off += need;
            }
            slots[s].busy_until = last;
            vloc[v].off = (int64_t)slots[s].off;
            k->ref[j].off = (int64_t)slots[s].off;
        }
        if (flat && lean_member(b, n, gs)) {
            int nk = k->n_out + k->n_in;
            if (!(k->lean = PLAN_NEW(b, int64_t, nk))) return MUSA_ERR_NOMEM;
            for (int q = 0; q < nk; q++)
                k->lean[q] = k->kv[q].ndim ? (int64_t)musa_dtype_info[k->kv[q].dtype].size : 0;
            if (!f->loop && !(f->loop = PLAN_NEW(b, musa_loop_fn, cnt))) return MUSA_ERR_NOMEM;
        }
        if (info->workspace) {
            /* scratch for a full tile */
            musa_kview kvs[8 + MUSA_MAX_OUTPUTS];
            int nk = k->n_out + k->n_in;
            if (nk <= (int)(sizeof kvs / sizeof kvs[0])) {
                for (int q = 0; q < nk; q++) {
                    kvs[q] = k->kv[q];
                    if (k->cut[q] && kvs[q].ndim > 0) kvs[q].shape[0] = tile_max;
                }
                size_t s = info->workspace(kvs, k->n_out, kvs + k->n_out, k->n_in, k->attrs);
                k->scratch = MUSA_MAX(k->scratch, s);
            }
        }
        member_scratch = MUSA_MAX(member_scratch, k->scratch);
    }
    /* Inputs that read an internal value take its tile reference. */
    for (int i = 0; i < cnt; i++) {
        const musa_gnode *n = &g->nodes.data[mem[i]];
        kcall *k = &f->m[i];
        for (int q = k->n_out; q < k->n_out + k->n_in; q++) {
            int32_t v = n->in[q - k->n_out];
            if (b->internal[v]) k->ref[q] = vloc[v], k->cut[q] = 1;
        }
    }
    /* Outputs of a flat group larger than a core's cache that no later member
     * reads are streamed through one staging tile. */
    size_t stage = 0;
    for (int i = 0; flat && i < cnt; i++) {
        const musa_gnode *n = &g->nodes.data[mem[i]];
        for (int j = 0; j < n->n_out; j++) {
            int32_t v = n->out[j];
            size_t es = musa_dtype_info[g->values.data[v].dtype].size;
            if (b->internal[v] || f->m[i].kv[j].ndim != 1 || (size_t)total * es < STREAM_MIN_BYTES)
                continue;
            bool read_later = false;
            for (int i2 = i + 1; i2 < cnt && !read_later; i2++) {
                const musa_gnode *n2 = &g->nodes.data[mem[i2]];
                for (int q = 0; q < n2->n_in; q++) read_later |= n2->in[q] == v;
            }
            if (read_later) continue;
            f->m[i].cut[j] = MUSA_CUT_STREAM;
            stage = MUSA_MAX(stage, musa_plan_align(es * (size_t)f->tile_rows));
        }
    }
    f->stage_off = tile_off;
    tile_off += stage;
    f->tile_bytes = tile_off;
    f->chunk_bytes = musa_sat_add_size(tile_off, musa_plan_align(member_scratch));
    return flat && lean && !getenv("MUSA_NO_CHAIN") ? build_chain(b, f, mem, cnt) : MUSA_OK;
}

/* A kernel call of node n with its views and their places. */
static int lower_kcall(builder *b, kcall *k, const musa_gnode *n, bool own) {
    int rc = fill_kcall(b, k, n, own);
    if (rc) return rc;
    for (int j = 0; j < n->n_out; j++) k->ref[j] = b->p->vloc[n->out[j]];
    for (int i = 0; i < n->n_in; i++) k->ref[n->n_out + i] = b->p->vloc[n->in[i]];
    return MUSA_OK;
}

/* Multi-tensor update of the update nodes mem[0..cnt): a kernel call per
 * row, run together by cpu_update_multi. */
static int build_multi(builder *b, multi *u, const int32_t *mem, int cnt) {
    u->n = cnt;
    u->m = PLAN_NEW(b, kcall, cnt);
    u->rows = PLAN_NEW(b, musa_kview *, cnt);
    if (!u->m || !u->rows) return MUSA_ERR_NOMEM;
    for (int r = 0; r < cnt; r++) {
        int rc = lower_kcall(b, &u->m[r], &b->g->nodes.data[mem[r]], true);
        if (rc) return rc;
        u->rows[r] = u->m[r].kv;
    }
    u->scratch = cpu_update_multi_workspace(cnt);
    return MUSA_OK;
}

/* ---- shared views ---- */

/* Kernel calls of one op on the same shapes (a recurrent model's every time
 * step) have equal view lists: the plan keeps one copy of each list, which
 * runs only read (run.c copies it onto the stack and sets the data
 * pointers). A view is 144 bytes, so this was most of a small recurrent
 * model's plan. */
typedef struct {
    const musa_kview *kv; /* NULL: an empty entry */
    uint64_t h;
    int n;
} kv_entry;

typedef struct {
    kv_entry *e;
    size_t cap; /* a power of two, at least twice the lists */
} kv_table;

static uint64_t kv_hash(const musa_kview *kv, int n) {
    const unsigned char *p = (const unsigned char *)kv;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)n;
    for (size_t i = 0; i + 8 <= sizeof(musa_kview) * (size_t)n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001B3ull;
        h ^= h >> 29;
    }
    return h;
}

/* k's views become the plan's copy of an equal list (made on first sight). */
static int intern_kv(builder *b, kv_table *t, kcall *k) {
    int n = k->n_out + k->n_in;
    if (!musa_plan_kv_shared(n)) return MUSA_OK;
    size_t bytes = sizeof(musa_kview) * (size_t)n;
    uint64_t h = kv_hash(k->kv, n);
    for (size_t i = h & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
        kv_entry *e = &t->e[i];
        if (!e->kv) {
            musa_kview *copy = PLAN_NEW(b, musa_kview, n);
            if (!copy) return nomem();
            memcpy(copy, k->kv, bytes);
            *e = (kv_entry){.kv = copy, .h = h, .n = n};
            k->kv = copy;
            return MUSA_OK;
        }
        if (e->h == h && e->n == n && !memcmp(e->kv, k->kv, bytes)) {
            k->kv = (musa_kview *)e->kv; /* shared: runs only read it */
            return MUSA_OK;
        }
    }
}

static int intern_views(builder *b) {
    musa_plan *p = b->p;
    size_t lists = 0;
    for (int i = 0; i < p->n_instrs; i++)
        lists += p->instrs[i].kind == MUSA_INSTR_KERNEL  ? 1
                 : p->instrs[i].kind == MUSA_INSTR_FUSED ? (size_t)p->instrs[i].f->n
                                                         : 0;
    kv_table t = {.cap = 16};
    while (t.cap < 2 * lists) t.cap *= 2;
    if (!(t.e = TMP_NEW(b, kv_entry, t.cap))) return nomem();
    memset(t.e, 0, sizeof(kv_entry) * t.cap);
    for (int i = 0; i < p->n_instrs; i++) {
        instr *in = &p->instrs[i];
        int rc = MUSA_OK;
        if (in->kind == MUSA_INSTR_KERNEL) rc = intern_kv(b, &t, &in->k);
        for (int m = 0; in->kind == MUSA_INSTR_FUSED && !rc && m < in->f->n; m++)
            rc = intern_kv(b, &t, &in->f->m[m]);
        if (rc) return rc;
    }
    return MUSA_OK;
}

/* Bytes of instruction in's workspace: its kernel's, its update run's, or
 * its fused group's chunks. */
static size_t instr_scratch(const instr *in) {
    if (in->kind == MUSA_INSTR_KERNEL) return in->k.scratch;
    if (in->kind == MUSA_INSTR_MULTI) return in->u->scratch;
    return musa_sat_mul_size(in->f->chunk_bytes, (size_t)in->f->max_chunks);
}

/* Workspace of step s, its instructions' side by side; with set, each
 * instruction's offset in it. */
static size_t step_scratch(musa_plan *p, int s, bool set) {
    size_t bytes = 0;
    for (int c = 0; c < p->steps[s].count; c++) {
        instr *in = &p->instrs[p->steps[s].first + c];
        if (set) in->scratch_off = bytes;
        bytes = musa_sat_add_size(bytes, musa_plan_align(instr_scratch(in)));
    }
    return bytes;
}

bool musa_plan_kcall_winograd(const kcall *k) {
    return (k->op == MUSA_OP_conv2d || k->op == MUSA_OP_conv2d_backward_input ||
            k->op == MUSA_OP_conv2d_backward_weight) &&
           ((const musa_attrs_conv *)k->attrs)->winograd;
}

/* A convolution call asked to run Winograd, with its workspace on the
 * direct primitive in *direct. */
static bool winograd_call(const kcall *k, size_t *direct) {
    if (!musa_plan_kcall_winograd(k)) return false;
    musa_attrs_conv a = *(const musa_attrs_conv *)k->attrs;
    a.winograd = false;
    *direct = musa_ops[k->op].workspace(k->kv, k->n_out, k->kv + k->n_out, k->n_in, &a);
    return *direct != (size_t)-1;
}

/* Winograd convolutions whose workspace fits in the arena: a step's
 * workspace goes in a gap of the buffers live at it, and a Winograd one
 * (the transformed tiles: several times the activations of a small late
 * layer) may find none and grow the arena. Such a step's convolutions run
 * direct (their calls get a copy of their attributes without winograd)
 * unless its workspace ends within the arena the plan needs with the
 * direct primitives plus the options' winograd_room. */
static int fit_winograd(builder *b, size_t *bytes, size_t *off) {
    musa_plan *p = b->p;
    int ns = p->n_steps;
    size_t *direct = TMP_NEW(b, size_t, ns + 1), d;
    if (!direct) return nomem();
    bool any = false;
    for (int s = 0; s < ns; s++) {
        direct[s] = 0;
        for (int c = 0; c < p->steps[s].count; c++) {
            instr *in = &p->instrs[p->steps[s].first + c];
            bool wino = in->kind == MUSA_INSTR_KERNEL && winograd_call(&in->k, &d);
            any |= wino;
            direct[s] = musa_sat_add_size(direct[s], musa_plan_align(wino ? d : instr_scratch(in)));
        }
    }
    if (!any) return MUSA_OK;
    size_t limit = p->arena_bytes, reach = p->arena_bytes;
    musa_plan_place_scratch(p->bufs, p->n_bufs, ns, direct, off, &limit);
    limit = musa_sat_add_size(limit, p->opt.winograd_room);
    musa_plan_place_scratch(p->bufs, p->n_bufs, ns, bytes, off, &reach);
    for (int s = 0; s < ns; s++) {
        bool fits = musa_sat_add_size(off[s], musa_plan_align(bytes[s])) <= limit;
        for (int c = 0; c < p->steps[s].count; c++) {
            instr *in = &p->instrs[p->steps[s].first + c];
            if (in->kind != MUSA_INSTR_KERNEL || !winograd_call(&in->k, &d)) continue;
            if (fits) {
                p->stats.winograd++;
                continue;
            }
            p->stats.winograd_direct++;
            musa_attrs_conv *a = PLAN_NEW(b, musa_attrs_conv, 1);
            if (!a) return nomem();
            *a = *(const musa_attrs_conv *)in->k.attrs;
            a->winograd = false;
            in->k.attrs = a;
            in->k.scratch = d;
        }
        if (!fits) bytes[s] = step_scratch(p, s, false);
    }
    return MUSA_OK;
}

/* Kernel calls with their views and places, fused groups with their tiles;
 * each step's scratch (its instructions' side by side) goes in a gap of the
 * arena buffers live at that step, so workspaces reuse memory activations
 * left. */
int musa_plan_lower(builder *b) {
    const musa_graph *g = b->g;
    musa_plan *p = b->p;
    int ns = p->n_steps;
    size_t *bytes = TMP_NEW(b, size_t, ns + 1), *off = TMP_NEW(b, size_t, ns + 1);
    if (!bytes || !off) return nomem();
    for (int s = 0; s < ns; s++) {
        for (int c = 0; c < p->steps[s].count; c++) {
            int i = p->steps[s].first + c;
            instr *in = &p->instrs[i];
            int rc;
            int32_t first = b->mstart[i], cnt = b->mstart[i + 1] - first;
            if (in->kind == MUSA_INSTR_KERNEL) {
                rc = lower_kcall(b, &in->k, &g->nodes.data[in->node], false);
            } else if (in->kind == MUSA_INSTR_MULTI) {
                rc = (in->u = PLAN_NEW(b, multi, 1))
                         ? build_multi(b, in->u, b->members + first, cnt)
                         : nomem();
            } else {
                rc = build_fused(b, in->f, b->members + first, cnt);
            }
            if (rc) return rc;
        }
        bytes[s] = step_scratch(p, s, false);
    }
    int rc = fit_winograd(b, bytes, off);
    if (rc) return rc;
    size_t scratch = 0;
    for (int s = 0; s < ns; s++) scratch = MUSA_MAX(scratch, step_scratch(p, s, true));
    musa_plan_place_scratch(p->bufs, p->n_bufs, ns, bytes, off, &p->arena_bytes);
    for (int s = 0; s < ns; s++)
        for (int c = 0; c < p->steps[s].count; c++)
            p->instrs[p->steps[s].first + c].scratch_off += off[s];
    p->scratch_bytes = scratch;
    p->stats.scratch_bytes = scratch;
    p->stats.held_bytes = p->arena_bytes;
    p->stats.instructions = b->ni;
    return intern_views(b);
}
