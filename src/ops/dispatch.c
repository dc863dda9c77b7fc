/*
 * dispatch.c - the op info table and musa_dispatch, the one path from an op
 * call to a kernel: validate and infer, cast inputs, produce outputs (view,
 * meta or allocated), run the kernel, then record, attach autograd history
 * and profile.
 *
 * Invariants: on failure no output is returned and every temporary is
 * released; provided outputs (in place / out=) are only written after all
 * validation has passed, so a failed call never leaves them half written.
 */
#include "op.h"

#include <math.h>
#include <stdio.h>

#include "../backend/cpu/alloc.h"
#include "../base/profile.h"
#include "../base/threadpool.h"
#include "../backend/cpu/kernels.h"
#include "../tensor/stream.h"

const musa_op_info musa_ops[MUSA_OP_COUNT] = {
#define OP(name_, n_in_, n_out_, attrs_, infer_, kernel_, ws_, flags_, grad_, save_, fn_, py_)     \
    [MUSA_OP_##name_] = {.name = #name_,                                                           \
                         .n_in = n_in_,                                                            \
                         .n_out = n_out_,                                                          \
                         .attrs_kind = MUSA_ATTRS_##attrs_,                                        \
                         .infer = infer_,                                                          \
                         .kernel = kernel_,                                                        \
                         .loop = kernel_##_loop,                                                   \
                         .workspace = ws_,                                                         \
                         .flags = flags_,                                                          \
                         .grad = grad_,                                                            \
                         .save = save_},
#include "ops.def"
#undef OP
};

_Thread_local musa_tls_state musa_tls;

/* Grad mode is dispatch state (the dispatcher decides whether autograd
 * records a call), so it lives here, not in the autograd layer above. */
bool musa_set_grad_enabled(bool enabled) {
    bool prev = !musa_tls.grad_disabled;
    musa_tls.grad_disabled = !enabled;
    return prev;
}

bool musa_is_grad_enabled(void) {
    return !musa_tls.grad_disabled;
}

int (*musa_autograd_hook)(musa_op_id op, int n_in, musa_tensor *const *in, const void *attrs,
                          int n_out, musa_tensor **out);
int (*musa_autograd_inplace_hook)(musa_op_id op, musa_tensor *t);
int (*musa_autograd_inplace_view_hook)(musa_op_id op, int n_in, musa_tensor *const *in,
                                       const void *attrs, musa_tensor *view);
int (*musa_record_hook)(void *recorder, musa_op_id op, int n_in, musa_tensor *const *in,
                        const void *attrs, int n_out, musa_tensor **out, unsigned provided);
void (*musa_record_refuse_hook)(void *recorder, const char *why);
void (*musa_record_grad_hook)(void *recorder, musa_tensor *leaf, musa_tensor *old_grad);

/* ---- type promotion ---- */

static musa_dtype combine_categories(int have_hi, musa_dtype hi, int have_lo, musa_dtype lo) {
    if (!have_hi) return lo;
    if (!have_lo) return hi;
    if (musa_is_float(hi)) return hi;
    if (hi == MUSA_DTYPE_BOOL || musa_is_float(lo)) return musa_promote_types(hi, lo);
    return hi;
}

musa_dtype musa_result_type(int n, musa_tensor *const *ts) {
    /* Common case: operands of one dtype and no wrapped numbers. */
    bool same = true;
    for (int i = 0; i < n && same; i++)
        same = ts[i]->dtype == ts[0]->dtype && !(ts[i]->flags & MUSA_TF_NUMBER);
    if (same) return (musa_dtype)ts[0]->dtype;
    int have[3] = {0, 0, 0};
    musa_dtype d[3] = {MUSA_DTYPE_BOOL, MUSA_DTYPE_BOOL, MUSA_DTYPE_BOOL};
    for (int i = 0; i < n; i++) {
        const musa_tensor *t = ts[i];
        int tier = (t->flags & MUSA_TF_NUMBER) ? 2 : t->ndim == 0 ? 1 : 0;
        musa_dtype dt = (musa_dtype)t->dtype;
        /* A wrapped number takes its category's default dtype. */
        if (tier == 2) dt = musa_default_dtype(musa_dtype_info[dt].category);
        d[tier] = have[tier] ? musa_promote_types(d[tier], dt) : dt;
        have[tier] = 1;
    }
    musa_dtype lower = combine_categories(have[1], d[1], have[2], d[2]);
    return combine_categories(have[0], d[0], have[1] || have[2], lower);
}

/* ---- the dispatcher ---- */

static bool can_cast(musa_dtype from, musa_dtype to) {
    return musa_dtype_info[from].category <= musa_dtype_info[to].category;
}

static bool has_internal_overlap(const musa_tensor *t) {
    for (int i = 0; i < t->ndim; i++)
        if (t->strides[i] == 0 && t->shape[i] > 1) return true;
    return false;
}

int musa_check_provided_out(const musa_op_info *info, int j, const musa_tensor *o,
                            const musa_infer *r) {
    char s1[128], s2[128];
    if (!o->storage && musa_tls.mode != MUSA_MODE_SYMBOLIC)
        return musa_err(MUSA_ERR_RUNTIME, "[%s] cannot write into a meta tensor", info->name);
    if (!musa_shape_equal(o->ndim, o->shape, r->out_ndim[j], r->out_shape[j]))
        return musa_err(MUSA_ERR_VALUE, "[%s] output has shape %s but the result has shape %s",
                        info->name, musa_shape_str(o->ndim, o->shape, s1, sizeof s1),
                        musa_shape_str(r->out_ndim[j], r->out_shape[j], s2, sizeof s2));
    if (!can_cast((musa_dtype)r->out_dtype[j], (musa_dtype)o->dtype))
        return musa_err(MUSA_ERR_TYPE, "[%s] result type %s can't be cast to the output type %s",
                        info->name, musa_dtype_name((musa_dtype)r->out_dtype[j]),
                        musa_dtype_name((musa_dtype)o->dtype));
    if (has_internal_overlap(o))
        return musa_err(MUSA_ERR_VALUE,
                        "[%s] cannot write into a tensor whose elements overlap (an expanded "
                        "view); clone it first",
                        info->name);
    return MUSA_OK;
}

/* Kernels over at least this many elements (inputs and outputs) call the
 * long-op hook around them; below it the hook would cost more than it saves. */
#define MUSA_LONG_OP_ELEMS ((int64_t)1 << 18)

static void (*long_op_hook)(bool begin);

void musa_set_long_op_hook(void (*hook)(bool begin)) {
    long_op_hook = hook;
}

bool musa_long_op_begin(int64_t elems) {
    if (MUSA_LIKELY(long_op_hook == NULL) || elems < MUSA_LONG_OP_ELEMS || musa_on_stream_worker)
        return false;
    long_op_hook(true);
    return true;
}

void musa_long_op_end(bool began) {
    if (began) long_op_hook(false);
}

/* Run the op's kernel on prepared views (a stream's worker runs it too). */
static int run_kernel(const musa_op_info *info, int n_in, const musa_kview *kin, const void *attrs,
                      int n_out, musa_kview *kout) {
    musa_kctx ctx = {.op_name = info->name};
    size_t block = 0;
    int rc = MUSA_OK;
    /* nothing to write; a collective still takes part (its peers wait for it) */
    if (musa_kviews_all_empty(kout, n_out) && !(info->flags & MUSA_OPF_EFFECT)) return MUSA_OK;
    if (info->workspace) {
        ctx.scratch_bytes = info->workspace(kout, n_out, kin, n_in, attrs);
        if (ctx.scratch_bytes) {
            ctx.scratch = musa_cpu_alloc(ctx.scratch_bytes, &block);
            if (!ctx.scratch) /* the op's name, not the allocator's */
                rc = musa_err(MUSA_ERR_NOMEM,
                              "[%s] out of memory allocating a workspace of %zu bytes", info->name,
                              ctx.scratch_bytes);
        }
    }
    if (!rc) {
        bool long_op = false;
        if (MUSA_UNLIKELY(long_op_hook != NULL)) {
            int64_t work = 0; /* saturating: expanded inputs reach 2^62 elements each */
            for (int i = 0; i < n_in + n_out; i++) {
                int64_t n = musa_kview_numel(i < n_in ? &kin[i] : &kout[i - n_in]);
                if (!musa_add_i64(work, n, &work)) work = INT64_MAX;
            }
            /* a collective waits for other processes, however small it is */
            if (info->flags & MUSA_OPF_EFFECT) work = INT64_MAX;
            long_op = musa_long_op_begin(work);
        }
        rc = info->kernel(&ctx, kout, kin, n_in, attrs);
        musa_long_op_end(long_op);
        if (rc) musa_err_prefix(info->name);
        if (MUSA_UNLIKELY(musa_interrupt_pending()) && musa_interrupt_take() && !rc)
            rc = musa_err(MUSA_ERR_INTERRUPTED, "[%s] interrupted", info->name);
    }
    if (ctx.scratch) musa_cpu_free(ctx.scratch, block);
    return rc;
}

/* An op's kernel run, as a stream queues it: the views, with the copies
 * into provided outputs the kernel could not write directly. */
typedef struct op_work {
    const musa_op_info *info;
    musa_attrs_any attrs;
    int n_in, n_out;
    musa_kview kout[MUSA_MAX_OUTPUTS];
    musa_kview kcopy[MUSA_MAX_OUTPUTS]; /* where kout[j] is copied to (data NULL: nowhere) */
    musa_kview kin[];
} op_work;

static int op_work_run(void *ctx) {
    op_work *w = ctx;
    int rc = run_kernel(w->info, w->n_in, w->kin, &w->attrs, w->n_out, w->kout);
    for (int j = 0; j < w->n_out && !rc; j++)
        if (w->kcopy[j].data) rc = musa_cpu_copy(&w->kcopy[j], &w->kout[j]);
    return rc;
}

/* The op's views: inputs cin, outputs dst, and the provided outputs that
 * get a copy of dst (copy_to[j] non-NULL). NULL without memory. */
static op_work *op_work_new(const musa_op_info *info, int n_in, musa_tensor *const *cin,
                            const void *attrs, int n_out, musa_tensor *const *dst,
                            musa_tensor *const *copy_to) {
    op_work *w = musa_malloc(sizeof *w + sizeof(musa_kview) * (size_t)n_in, info->name);
    if (!w) return NULL;
    w->info = info;
    if (info->attrs_kind != MUSA_ATTRS_none)
        memcpy(&w->attrs, attrs, musa_attrs_desc_of(info->attrs_kind)->size);
    w->n_in = n_in, w->n_out = n_out;
    for (int i = 0; i < n_in; i++) musa_tensor_kview(cin[i], &w->kin[i]);
    for (int j = 0; j < n_out; j++) {
        musa_tensor_kview(dst[j], &w->kout[j]);
        w->kcopy[j].data = NULL;
        if (copy_to[j]) musa_tensor_kview(copy_to[j], &w->kcopy[j]);
    }
    return w;
}

/* Run the op now, on this thread. */
static int run_now(const musa_op_info *info, int n_in, musa_tensor *const *cin, const void *attrs,
                   int n_out, musa_tensor *const *dst, musa_tensor *const *copy_to) {
    musa_kview kin_buf[8], *kin = kin_buf;
    musa_kview kout[MUSA_MAX_OUTPUTS];
    if (n_in > 8 && !(kin = musa_malloc(sizeof(musa_kview) * (size_t)n_in, info->name)))
        return MUSA_ERR_NOMEM;
    for (int i = 0; i < n_in; i++) musa_tensor_kview(cin[i], &kin[i]);
    for (int j = 0; j < n_out; j++) musa_tensor_kview(dst[j], &kout[j]);
    int rc = run_kernel(info, n_in, kin, attrs, n_out, kout);
    for (int j = 0; j < n_out && !rc; j++) {
        if (!copy_to[j]) continue;
        musa_kview kd;
        musa_tensor_kview(copy_to[j], &kd);
        rc = musa_cpu_copy(&kd, &kout[j]);
    }
    if (kin != kin_buf) free(kin);
    return rc;
}

/* With streams alive: queue the op on the current stream, or run it here
 * once the stream work on its storages is done. Ops whose results depend
 * on when they run (random draws) or that may call Python (custom ops), and
 * recording modes, run here. */
static int run_with_streams(musa_op_id op, const musa_op_info *info, int n_in,
                            musa_tensor *const *cin, const void *attrs, int n_out,
                            musa_tensor *const *dst, musa_tensor *const *copy_to) {
    musa_storage *rd_buf[8], **rd = rd_buf, *wr[2 * MUSA_MAX_OUTPUTS];
    if (n_in > 8 && !(rd = musa_malloc(sizeof *rd * (size_t)n_in, info->name)))
        return MUSA_ERR_NOMEM;
    for (int i = 0; i < n_in; i++) rd[i] = cin[i]->storage;
    for (int j = 0; j < n_out; j++) {
        wr[2 * j] = dst[j]->storage;
        wr[2 * j + 1] = copy_to[j] ? copy_to[j]->storage : NULL;
    }
    musa_stream *s = musa_stream_current();
    int rc;
    if (s && musa_tls.mode == MUSA_MODE_EAGER && !(info->flags & MUSA_OPF_ORDERED) &&
        op != MUSA_OP_custom) {
        op_work *w = op_work_new(info, n_in, cin, attrs, n_out, dst, copy_to);
        musa_stream_work sw = {.name = info->name, .fn = op_work_run, .free_ctx = free, .ctx = w};
        rc = w ? musa_stream_submit(s, &sw, n_in, rd, 2 * n_out, wr, NULL) : MUSA_ERR_NOMEM;
    } else {
        rc = musa_storages_wait(n_in, rd, false);
        if (!rc) rc = musa_storages_wait(2 * n_out, wr, true);
        if (!rc) rc = run_now(info, n_in, cin, attrs, n_out, dst, copy_to);
    }
    if (rd != rd_buf) free(rd);
    return rc;
}

/* t requires grad, or is a view of a tensor that does (its history is
 * regenerated when recorded). */
static inline bool tracks_grad(const musa_tensor *t) {
    return (t->flags & MUSA_TF_REQUIRES_GRAD) ||
           (t->view_base && (t->view_base->flags & MUSA_TF_REQUIRES_GRAD));
}

/* Anomaly mode with forward checks: an op that produces NaN fails, naming
 * itself (and the user's line when the Python layer set it). */
static int check_forward_nan(const musa_op_info *info, musa_tensor *t) {
    if (!musa_is_float((musa_dtype)t->dtype) || t->numel == 0) return MUSA_OK;
    musa_tls_state saved = musa_tls;
    musa_tls.anomaly_forward = false;
    musa_tls.grad_disabled = true;
    musa_tensor *n = musa_isnan(t), *i = musa_cast(n, MUSA_DTYPE_INT32);
    musa_tensor *m = musa_amax(i, 0, NULL, false);
    int64_t any = 0;
    int rc = m ? musa_tensor_item_int(m, &any) : musa_last_error_code();
    musa_tls = saved;
    musa_tensor_release(n), musa_tensor_release(i), musa_tensor_release(m);
    if (rc || !any) return rc;
    return musa_err(MUSA_ERR_RUNTIME, "[anomaly] %s produced NaN in its output", info->name);
}

/* ---- autocast ----
 *
 * With autocast on (musa_autocast_set), an op flagged AMPLOW gets its
 * floating inputs cast to the autocast dtype, one flagged AMPF32 gets them
 * cast to float32; the casts are dispatched ops, so autograd and captures
 * record them (a float32 parameter gets a float32 gradient through its
 * cast). A leaf that requires grad (a parameter) is cast once per dtype
 * and version while the cache lives (musa_autocast_clear_cache; eager
 * only: a capture records its own casts); a newer version replaces the
 * entry, so the cache holds one cast per parameter and dtype. Calls writing into provided
 * outputs are left alone. The backward engine turns autocast off: backward
 * ops run in the dtypes the forward recorded. */

typedef struct {
    musa_tensor *src, *cast;
    uint64_t version;
    int8_t dtype;
} autocast_entry;

static _Thread_local autocast_entry *ac_cache;
static _Thread_local int ac_len, ac_cap;
static _Thread_local bool ac_nocache;

bool musa_autocast_set_cache_enabled(bool enabled) {
    bool prev = !ac_nocache;
    ac_nocache = !enabled;
    return prev;
}

int musa_autocast_set(bool enabled, musa_dtype dtype) {
    if (enabled && dtype != MUSA_DTYPE_BFLOAT16 && dtype != MUSA_DTYPE_FLOAT16)
        return musa_err(MUSA_ERR_VALUE,
                        "[autocast] dtype must be bfloat16 or float16 on the CPU, got %s",
                        musa_dtype_name(dtype));
    musa_tls.autocast = enabled ? (int8_t)(dtype + 1) : 0;
    return MUSA_OK;
}

bool musa_autocast_enabled(void) {
    return musa_tls.autocast != 0;
}

musa_dtype musa_autocast_dtype(void) {
    return musa_tls.autocast ? (musa_dtype)(musa_tls.autocast - 1) : MUSA_DTYPE_BFLOAT16;
}

void musa_autocast_clear_cache(void) {
    for (int i = 0; i < ac_len; i++) {
        musa_tensor_release(ac_cache[i].src);
        musa_tensor_release(ac_cache[i].cast);
    }
    free(ac_cache);
    ac_cache = NULL;
    ac_len = ac_cap = 0;
}

/* t in dtype `to`, through the cache for parameters. NULL on failure. */
static musa_tensor *autocast_input(musa_tensor *t, musa_dtype to) {
    bool cacheable = !ac_nocache && musa_tls.mode == MUSA_MODE_EAGER && !musa_tls.grad_disabled &&
                     (t->flags & MUSA_TF_REQUIRES_GRAD) && musa_tensor_is_leaf(t);
    uint64_t ver = cacheable ? musa_tensor_version(t) : 0;
    int stale = -1; /* this parameter's entry for an older version: replaced */
    for (int i = 0; cacheable && i < ac_len; i++) {
        if (ac_cache[i].src != t || ac_cache[i].dtype != (int8_t)to) continue;
        if (ac_cache[i].version == ver) return musa_tensor_retain(ac_cache[i].cast);
        stale = i;
    }
    musa_tensor *c = musa_cast(t, to);
    if (c && cacheable && stale >= 0) {
        musa_tensor_release(ac_cache[stale].cast);
        ac_cache[stale].cast = musa_tensor_retain(c);
        ac_cache[stale].version = ver;
    } else if (c && cacheable) {
        if (ac_len == ac_cap) {
            int cap = ac_cap ? 2 * ac_cap : 16;
            autocast_entry *n = realloc(ac_cache, sizeof *n * (size_t)cap);
            if (!n) return c; /* no cache entry; the cast stands */
            ac_cache = n, ac_cap = cap;
        }
        ac_cache[ac_len++] =
            (autocast_entry){musa_tensor_retain(t), musa_tensor_retain(c), ver, (int8_t)to};
    }
    return c;
}

static int dispatch_now(musa_op_id op, int n_in, musa_tensor *const *in, const void *attrs,
                        musa_tensor **out);

/* The call with its floating inputs in the policy's dtype. */
static int autocast_dispatch(musa_op_id op, int n_in, musa_tensor *const *in, const void *attrs,
                             musa_tensor **out) {
    const musa_op_info *info = &musa_ops[op];
    musa_dtype to = (info->flags & MUSA_OPF_AMP_LOW) ? musa_autocast_dtype() : MUSA_DTYPE_FLOAT32;
    musa_tensor *buf[8], **cin = n_in > 8 ? calloc((size_t)n_in, sizeof *cin) : buf;
    if (!cin) return musa_err_nomem(info->name, 0);
    int rc = MUSA_OK, made = 0;
    for (; made < n_in && !rc; made++) {
        musa_tensor *t = in[made];
        if (!musa_is_float((musa_dtype)t->dtype) || t->dtype == (int8_t)to ||
            t->dtype == MUSA_DTYPE_FLOAT64) {
            /* float64 stays, for AMPF32 ops too (as PyTorch's autocast never
             * touches double tensors): autocast only moves float32 and the
             * low dtypes */
            cin[made] = musa_tensor_retain(t);
            continue;
        }
        if (!(cin[made] = autocast_input(t, to))) rc = musa_last_error_code(), cin[made] = NULL;
    }
    if (!rc) rc = dispatch_now(op, n_in, cin, attrs, out);
    for (int i = 0; i < made; i++) musa_tensor_release(cin[i]);
    if (cin != buf) free(cin);
    return rc;
}

static int dispatch_entry(musa_op_id op, int n_in, musa_tensor *const *in, const void *attrs,
                          musa_tensor **out);

/* "float32[64, 128], int64[64]": the inputs an op event records with
 * MUSA_PROFILE_SHAPES (cut short, with "...", past the buffer). */
static void shapes_str(int n_in, musa_tensor *const *in, char *buf, size_t size) {
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < n_in; i++) {
        const musa_tensor *t = in[i];
        if (!musa_prof_shape_append(buf, size, &len, t ? (musa_dtype)t->dtype : (musa_dtype)-1,
                                    t ? t->ndim : 0, t ? t->shape : NULL))
            return;
    }
}

int musa_dispatch(musa_op_id op, int n_in, musa_tensor *const *in, const void *attrs,
                  musa_tensor **out) {
    int prof = musa_prof_on();
    if (MUSA_LIKELY(!prof)) return dispatch_entry(op, n_in, in, attrs, out);
    int64_t t0 = musa_prof_now();
    int rc = dispatch_entry(op, n_in, in, attrs, out);
    char shapes[512];
    if (prof & MUSA_PROFILE_SHAPES) shapes_str(n_in, in, shapes, sizeof shapes);
    const char *name = op == MUSA_OP_custom
                           ? musa_custom_op_name((int)((const musa_attrs_custom *)attrs)->index)
                           : NULL;
    musa_prof_complete(MUSA_PROFILE_OP, name ? name : musa_ops[op].name, t0,
                       prof & MUSA_PROFILE_SHAPES ? shapes : NULL);
    return rc;
}

static int dispatch_entry(musa_op_id op, int n_in, musa_tensor *const *in, const void *attrs,
                          musa_tensor **out) {
    const musa_op_info *info = &musa_ops[op];
    if (MUSA_UNLIKELY(musa_tls.autocast) && (info->flags & (MUSA_OPF_AMP_LOW | MUSA_OPF_AMP_F32))) {
        bool provided = false, bad = false;
        int n_out = info->n_out > 0 ? info->n_out : 0;
        for (int j = 0; j < n_out; j++) provided |= out[j] != NULL;
        for (int i = 0; i < n_in; i++) bad |= in[i] == NULL;
        if (!provided && !bad && (info->n_in < 0 || n_in == info->n_in))
            return autocast_dispatch(op, n_in, in, attrs, out);
    }
    return dispatch_now(op, n_in, in, attrs, out);
}

static int dispatch_now(musa_op_id op, int n_in, musa_tensor *const *in, const void *attrs,
                        musa_tensor **out) {
    const musa_op_info *info = &musa_ops[op];
    int rc = MUSA_OK;
    for (int i = 0; i < n_in; i++) {
        if (MUSA_UNLIKELY(!in[i])) {
            if (musa_last_error_code() == MUSA_OK)
                musa_err(MUSA_ERR_VALUE, "[%s] input %d is NULL", info->name, i);
            return musa_last_error_code();
        }
    }
    if (info->n_in >= 0 && n_in != info->n_in)
        return musa_err(MUSA_ERR_VALUE, "[%s] takes %d tensor inputs, got %d", info->name,
                        info->n_in, n_in);

    musa_attrs_any a;
    if (info->attrs_kind != MUSA_ATTRS_none) {
        if (attrs)
            memcpy(&a, attrs, musa_attrs_desc_of(info->attrs_kind)->size);
        else
            musa_attrs_init(info->attrs_kind, &a);
    }

    int8_t in_dt_buf[8], *in_dt = in_dt_buf;
    musa_tensor *cin_buf[8], **cin = cin_buf;
    if (n_in > 8) {
        in_dt = musa_malloc((size_t)n_in, info->name);
        cin = musa_calloc((size_t)n_in, sizeof *cin, info->name);
        if (!in_dt || !cin) {
            free(in_dt);
            free(cin);
            return MUSA_ERR_NOMEM;
        }
    }
    musa_infer r;
    musa_infer_init(&r, info, in_dt, n_in);
    musa_tensor *fresh[MUSA_MAX_OUTPUTS] = {NULL}; /* outputs we created */
    musa_tensor *temp[MUSA_MAX_OUTPUTS] = {NULL};  /* staging for provided outputs */
    int n_cin = 0;
    bool symbolic = musa_tls.mode == MUSA_MODE_SYMBOLIC;

    rc = info->infer(info, in, n_in, &a, &r);
    if (!rc) rc = musa_infer_check_outputs(info, &r);
    if (rc) {
        musa_err_prefix(info->name);
        goto done;
    }
    const int n_out = r.n_out;
    for (int i = 0; i < n_in; i++) {
        if (!in[i]->storage && !symbolic) {
            rc = musa_err(MUSA_ERR_RUNTIME,
                          "[%s] input %d is a meta tensor (from symbolic mode) in eager mode",
                          info->name, i);
            goto done;
        }
    }

    /* Cast inputs the kernel wants in another dtype. */
    for (int i = 0; i < n_in; i++, n_cin++) {
        cin[i] = in[i];
        if (in_dt[i] < 0 || in_dt[i] == in[i]->dtype) continue;
        musa_attrs_cast ca;
        musa_attrs_init(MUSA_ATTRS_cast, &ca);
        ca.dtype = in_dt[i];
        musa_tensor *c = NULL;
        rc = musa_dispatch(MUSA_OP_cast, 1, &in[i], &ca, &c);
        if (rc) goto done;
        cin[i] = c;
    }

    /* Kernels that want contiguous inputs get them (as recorded clones). */
    if (info->flags & MUSA_OPF_CONTIG) {
        for (int i = 0; i < n_in; i++) {
            if (musa_tensor_is_contiguous(cin[i])) continue;
            musa_tensor *c = musa_clone(cin[i]);
            if (!c) {
                rc = musa_last_error_code();
                goto done;
            }
            if (cin[i] != in[i]) musa_tensor_release(cin[i]);
            cin[i] = c;
        }
    }

    /* Autograd will record this call: in-place writes must not clobber a
     * leaf that requires grad, nor an input the formula needs (clone it). */
    bool grad_path =
        musa_autograd_hook && !musa_tls.grad_disabled && !(info->flags & MUSA_OPF_NONDIFF);
    if (grad_path) {
        bool need = false;
        for (int i = 0; i < n_in && !need; i++) need = tracks_grad(cin[i]);
        for (int j = 0; j < n_out && !need; j++) need = out[j] && tracks_grad(out[j]);
        grad_path = need;
    }
    for (int j = 0; grad_path && j < n_out; j++) {
        if (!out[j]) continue;
        if ((out[j]->flags & MUSA_TF_REQUIRES_GRAD) &&
            (rc = musa_autograd_inplace_hook(op, out[j])))
            goto done;
        for (int i = 0; i < n_in; i++) {
            /* Shared storage, not just overlap: an empty output overlaps
             * nothing, but saving the very tensor that takes this node as
             * its grad_fn would make a reference cycle. */
            if (!musa_op_saves_input(info, i) || !musa_tensor_shares_storage(cin[i], out[j]))
                continue;
            musa_tensor *c = musa_clone(cin[i]);
            if (!c) {
                rc = musa_last_error_code();
                goto done;
            }
            if (cin[i] != in[i]) musa_tensor_release(cin[i]);
            cin[i] = c;
        }
    }

    for (int j = 0; j < n_out; j++) {
        if (out[j]) {
            if (info->flags & MUSA_OPF_VIEW) {
                rc = musa_err(MUSA_ERR_VALUE, "[%s] a view op cannot write into an output",
                              info->name);
                goto done;
            }
            if ((rc = musa_check_provided_out(info, j, out[j], &r))) goto done;
        }
    }

    /* Writing into a view while recording: done out of place on its base. */
    if (grad_path && n_out == 1 && out[0] && out[0]->view_base && musa_autograd_inplace_view_hook) {
        rc = musa_autograd_inplace_view_hook(op, n_in, cin, &a, out[0]);
        goto done;
    }

    if (info->flags & MUSA_OPF_VIEW) {
        fresh[0] = musa_tensor_view_of(cin[0], r.out_ndim[0], r.out_shape[0], r.view_strides,
                                       r.view_offset);
        if (!fresh[0]) {
            rc = musa_last_error_code();
            musa_err_prefix(info->name);
            goto done;
        }
        if (!(info->flags & MUSA_OPF_NONDIFF)) /* detach makes a new root */
            fresh[0]->view_base =
                musa_tensor_retain(cin[0]->view_base ? cin[0]->view_base : cin[0]);
    } else {
        musa_tensor *dst[MUSA_MAX_OUTPUTS];
        for (int j = 0; j < n_out; j++) {
            musa_dtype dt = (musa_dtype)r.out_dtype[j];
            bool direct = out[j] && (symbolic || out[j]->dtype == (int8_t)dt);
            if (direct && (info->flags & MUSA_OPF_CONTIG) && !musa_tensor_is_contiguous(out[j]))
                direct = false;
            /* Writing straight into a provided output is safe when it does not
             * alias an input, or when it is an input with the same layout and
             * the op is elementwise (each element is read before written), or
             * when it is the input an update op declares it the new value of,
             * or for a collective (its kernels work in place: MPI_IN_PLACE). */
            for (int i = 0; direct && !symbolic && i < n_in; i++) {
                if (!musa_tensor_may_overlap(out[j], cin[i])) continue;
                bool same = musa_tensor_same_layout(out[j], cin[i]);
                if (!(same && ((info->flags & (MUSA_OPF_ELEMENTWISE | MUSA_OPF_EFFECT)) ||
                               ((info->flags & MUSA_OPF_INPLACE) && i == j))))
                    direct = false;
            }
            if (direct) {
                dst[j] = out[j];
                continue;
            }
            musa_tensor *t = symbolic ? musa_tensor_meta(dt, r.out_ndim[j], r.out_shape[j])
                                      : musa_tensor_alloc(dt, r.out_ndim[j], r.out_shape[j]);
            if (!t) {
                rc = musa_last_error_code();
                goto done;
            }
            if (out[j])
                temp[j] = t;
            else
                fresh[j] = t;
            dst[j] = t;
        }
        if (!symbolic) {
            musa_tensor *copy_to[MUSA_MAX_OUTPUTS];
            for (int j = 0; j < n_out; j++) copy_to[j] = temp[j] ? out[j] : NULL;
            rc = MUSA_UNLIKELY(musa_streams_live())
                     ? run_with_streams(op, info, n_in, cin, &a, n_out, dst, copy_to)
                     : run_now(info, n_in, cin, &a, n_out, dst, copy_to);
            if (rc) goto done;
        }
        for (int j = 0; j < n_out; j++)
            if (out[j]) musa_tensor_bump_version(out[j]);
    }

    musa_tensor *res[MUSA_MAX_OUTPUTS];
    unsigned provided = 0;
    for (int j = 0; j < n_out; j++) {
        res[j] = out[j] ? out[j] : fresh[j];
        if (out[j]) provided |= 1u << j;
    }
    if (musa_tls.mode != MUSA_MODE_EAGER && musa_record_hook && musa_tls.recorder) {
        if ((rc = musa_record_hook(musa_tls.recorder, op, n_in, cin, &a, n_out, res, provided)))
            goto done;
    }
    if (MUSA_UNLIKELY(musa_tls.anomaly_forward) && !symbolic) {
        for (int j = 0; j < n_out && !rc; j++) rc = check_forward_nan(info, res[j]);
        if (rc) goto done;
    }
    if (grad_path && (rc = musa_autograd_hook(op, n_in, cin, &a, n_out, res))) goto done;
    for (int j = 0; j < n_out; j++)
        if (!out[j]) {
            out[j] = fresh[j];
            fresh[j] = NULL;
        }

done:
    for (int j = 0; j < MUSA_MAX_OUTPUTS; j++) {
        musa_tensor_release(fresh[j]);
        musa_tensor_release(temp[j]);
    }
    for (int i = 0; i < n_cin; i++)
        if (cin[i] != in[i]) musa_tensor_release(cin[i]);
    if (in_dt != in_dt_buf) free(in_dt);
    if (cin != cin_buf) free(cin);
    return rc;
}

musa_tensor *musa_call(musa_op_id op, int n_in, musa_tensor *const *in, const void *attrs) {
    musa_tensor *out[MUSA_MAX_OUTPUTS] = {NULL};
    if (musa_dispatch(op, n_in, in, attrs, out)) return NULL;
    for (int j = 1; j < MUSA_MAX_OUTPUTS; j++) musa_tensor_release(out[j]);
    return out[0];
}

/* ---- generic op access (public) ---- */

int musa_op_count(void) {
    return MUSA_OP_COUNT;
}

int musa_op_lookup(const char *name) {
    if (!name) return -1;
    for (int i = 0; i < MUSA_OP_COUNT; i++)
        if (!strcmp(musa_ops[i].name, name)) return i;
    return -1;
}

const char *musa_op_name(int op) {
    return op >= 0 && op < MUSA_OP_COUNT ? musa_ops[op].name : "?";
}
int musa_op_num_inputs(int op) {
    return op >= 0 && op < MUSA_OP_COUNT ? musa_ops[op].n_in : 0;
}
int musa_op_num_outputs(int op) {
    return op >= 0 && op < MUSA_OP_COUNT ? musa_ops[op].n_out : 0;
}

musa_attrs *musa_attrs_new(int op) {
    if (op < 0 || op >= MUSA_OP_COUNT) {
        musa_err(MUSA_ERR_VALUE, "[attrs_new] unknown op id %d", op);
        return NULL;
    }
    musa_attrs *a = musa_malloc(sizeof *a, "attrs_new");
    if (!a) return NULL;
    a->op = op;
    musa_attrs_init(musa_ops[op].attrs_kind, &a->rec);
    return a;
}

void musa_attrs_free(musa_attrs *a) {
    free(a);
}

static void *attr_slot(musa_attrs *a, const char *field, musa_attr_type type, int *rc) {
    if (!a || !field) {
        *rc = musa_err(MUSA_ERR_VALUE, "[attrs] attrs or field name is NULL");
        return NULL;
    }
    const musa_op_info *info = &musa_ops[a->op];
    const musa_attr_field *f = musa_attrs_field(info->attrs_kind, field);
    if (!f || info->attrs_kind == MUSA_ATTRS_none) {
        *rc = musa_err(MUSA_ERR_VALUE, "[attrs] op %s has no attribute '%s'", info->name, field);
        return NULL;
    }
    if (f->type != type) {
        *rc = musa_err(MUSA_ERR_TYPE, "[attrs] attribute '%s' of op %s is %s, not %s", field,
                       info->name, musa_attr_type_name(f->type), musa_attr_type_name(type));
        return NULL;
    }
    *rc = MUSA_OK;
    return (char *)&a->rec + f->offset;
}

int musa_attrs_set_int(musa_attrs *a, const char *field, int64_t v) {
    int rc;
    int64_t *p = attr_slot(a, field, MUSA_ATTR_INT, &rc);
    if (p) *p = v;
    return rc;
}

int musa_attrs_set_float(musa_attrs *a, const char *field, double v) {
    int rc;
    double *p = attr_slot(a, field, MUSA_ATTR_FLOAT, &rc);
    if (p) *p = v;
    return rc;
}

int musa_attrs_set_bool(musa_attrs *a, const char *field, bool v) {
    int rc;
    bool *p = attr_slot(a, field, MUSA_ATTR_BOOL, &rc);
    if (p) *p = v;
    return rc;
}

int musa_attrs_set_dtype(musa_attrs *a, const char *field, musa_dtype v) {
    int rc;
    int32_t *p = attr_slot(a, field, MUSA_ATTR_DTYPE, &rc);
    if (!p) return rc;
    if (!musa_dtype_valid((int)v))
        return musa_err(MUSA_ERR_TYPE, "[attrs] invalid dtype %d for '%s'", (int)v, field);
    *p = (int32_t)v;
    return rc;
}

int musa_attrs_set_number(musa_attrs *a, const char *field, double v) {
    if (!a || !field) return musa_err(MUSA_ERR_VALUE, "[attrs] attrs or field name is NULL");
    const musa_attr_field *f = musa_attrs_field(musa_ops[a->op].attrs_kind, field);
    if (!f || musa_ops[a->op].attrs_kind == MUSA_ATTRS_none)
        return musa_err(MUSA_ERR_VALUE, "[attrs] op %s has no attribute '%s'", musa_ops[a->op].name,
                        field);
    switch (f->type) {
    case MUSA_ATTR_BOOL:
        return musa_attrs_set_bool(a, field, v != 0);
    case MUSA_ATTR_FLOAT:
        return musa_attrs_set_float(a, field, v);
    case MUSA_ATTR_INT:
        if (!(v == floor(v) && fabs(v) < 9.2e18))
            return musa_err(MUSA_ERR_VALUE,
                            "[attrs] attribute '%s' of op %s takes an integer, got %g", field,
                            musa_ops[a->op].name, v);
        return musa_attrs_set_int(a, field, (int64_t)v);
    default:
        return musa_err(MUSA_ERR_TYPE, "[attrs] attribute '%s' of op %s is not a number", field,
                        musa_ops[a->op].name);
    }
}

int musa_attrs_set_ints(musa_attrs *a, const char *field, int n, const int64_t *v) {
    int rc;
    musa_ints *p = attr_slot(a, field, MUSA_ATTR_INTS, &rc);
    if (!p) return rc;
    if (n < 0 || n > MUSA_MAX_ATTR_INTS || (n && !v))
        return musa_err(MUSA_ERR_VALUE, "[attrs] '%s' takes 0 to %d values, got %d", field,
                        MUSA_MAX_ATTR_INTS, n);
    memset(p, 0, sizeof *p);
    p->n = n;
    if (n) memcpy(p->v, v, sizeof(int64_t) * (size_t)n);
    return rc;
}

int musa_op_call(int op, int n_in, musa_tensor *const *inputs, const musa_attrs *attrs,
                 musa_tensor **outs) {
    if (op < 0 || op >= MUSA_OP_COUNT)
        return musa_err(MUSA_ERR_VALUE, "[op_call] unknown op id %d", op);
    if (attrs && attrs->op != op)
        return musa_err(MUSA_ERR_VALUE, "[op_call] attrs were made for op %s, not %s",
                        musa_ops[attrs->op].name, musa_ops[op].name);
    if (n_in < 0 || (n_in > 0 && !inputs) || !outs)
        return musa_err(MUSA_ERR_VALUE, "[op_call] bad input or output arrays");
    return musa_dispatch((musa_op_id)op, n_in, inputs, attrs ? &attrs->rec : NULL, outs);
}
