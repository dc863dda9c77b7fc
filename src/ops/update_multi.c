/*
 * update_multi.c - musa_update_multi, the multi-tensor form of the update
 * rows (sgd_update, adam_update, rmsprop_update): one optimizer update over
 * many parameters, with the results of dispatching the row on each in turn.
 *
 * Phases: check every row as musa_dispatch checks a call (the op's
 * inference, then the checks of provided outputs: the row's first inputs
 * are its outputs), naming the row in the error; look for rows that share
 * memory one of them writes; then run. Rows the dispatcher would run
 * straight into their own tensors ("plain": contiguous, no cast, no operand
 * sharing memory with another of the row) run as one cpu_update_multi call,
 * one parallel loop over all their elements; other rows are dispatched one
 * by one.
 *
 * Invariants: nothing is written unless every row passed its checks; rows
 * run together only when none writes memory that another row reads or
 * writes, so the order of rows cannot matter; when it could (shared
 * memory), or when the dispatcher does more than run the kernel (a capture
 * records each row as a node, anomaly mode checks each row's outputs), every
 * row is dispatched in order.
 */
#include "op.h"

#include <stdio.h>

#include "../backend/cpu/kernels.h"
#include "../base/profile.h"
#include "../base/threadpool.h"
#include "../base/vec.h"
#include "../tensor/stream.h"

#define MAX_IN (MUSA_MAX_OUTPUTS + 2) /* an update row: param, state..., grad, lr */

/* Rewrite the last error "[op] message" as "[op] row r: message". */
static int row_error(const musa_op_info *info, int r) {
    const char *m = musa_last_error();
    size_t k = strlen(info->name);
    if (m[0] == '[' && !strncmp(m + 1, info->name, k) && m[k + 1] == ']' && m[k + 2] == ' ')
        m += k + 3;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", m);
    return musa_err(musa_last_error_code(), "[%s] row %d: %s", info->name, r, msg);
}

/* Check one row (no NULL tensor) as musa_dispatch checks a call with the
 * row's first n_out inputs as provided outputs, and say whether the
 * dispatcher would run the kernel straight on the row's tensors (*plain).
 * Sets *n_out; returns the dispatcher's error for this call. */
static int check_row(const musa_op_info *info, musa_tensor *const *in, int n_in, void *attrs,
                     int *n_out, bool *plain) {
    bool symbolic = musa_tls.mode == MUSA_MODE_SYMBOLIC;
    int8_t in_dt[MAX_IN];
    musa_infer r;
    musa_infer_init(&r, info, in_dt, n_in);
    int rc = info->infer(info, in, n_in, attrs, &r);
    if (!rc) rc = musa_infer_check_outputs(info, &r);
    if (rc) {
        musa_err_prefix(info->name);
        return rc;
    }
    for (int i = 0; i < n_in; i++)
        if (!in[i]->storage && !symbolic)
            return musa_err(MUSA_ERR_RUNTIME,
                            "[%s] input %d is a meta tensor (from symbolic mode) in eager mode",
                            info->name, i);
    for (int j = 0; j < r.n_out; j++)
        if ((rc = musa_check_provided_out(info, j, in[j], &r))) return rc;
    *n_out = r.n_out;
    *plain = true;
    for (int i = 0; i < n_in; i++)
        if ((in_dt[i] >= 0 && in_dt[i] != in[i]->dtype) || !musa_tensor_is_contiguous(in[i]))
            *plain = false;
    for (int j = 0; j < r.n_out; j++) {
        if (in[j]->dtype != r.out_dtype[j]) *plain = false;
        for (int i = 0; i < n_in; i++)
            if (i != j && musa_tensor_may_overlap(in[j], in[i])) *plain = false;
    }
    return MUSA_OK;
}

/* The bytes of a tensor's storage its elements span, and whose they are. */
typedef struct span {
    uintptr_t lo, hi; /* byte addresses: [lo, hi) */
    int row;
    bool written; /* the row updates it */
} span;

static int span_cmp(const void *a, const void *b) {
    const span *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

static span span_of(const musa_tensor *t, int row, bool written) {
    size_t es = musa_dtype_info[t->dtype].size;
    int64_t end = t->offset;
    for (int d = 0; d < t->ndim; d++) end += (t->shape[d] - 1) * t->strides[d];
    uintptr_t base = (uintptr_t)t->storage->data;
    return (span){base + (uintptr_t)t->offset * es, base + (uintptr_t)(end + 1) * es, row, written};
}

/* The two largest ends seen, from different rows: row1's, and the largest
 * of any other row. */
typedef struct ends {
    uintptr_t hi1, hi2;
    int row1;
} ends;

static void ends_add(ends *e, uintptr_t hi, int row) {
    if (row == e->row1) {
        if (hi > e->hi1) e->hi1 = hi;
    } else if (hi > e->hi1) {
        e->hi2 = e->hi1, e->hi1 = hi, e->row1 = row;
    } else if (hi > e->hi2) {
        e->hi2 = hi;
    }
}

/* Whether a span seen so far from a row other than `row` ends after lo. */
static bool ends_after(const ends *e, uintptr_t lo, int row) {
    return (row == e->row1 ? e->hi2 : e->hi1) > lo;
}

/* Whether two of the spans (n of them, sorted here), from different rows
 * and one of them written, overlap: swept by start, keeping the furthest
 * ends of the earlier spans, written and all. */
static bool spans_conflict(span *s, int n) {
    qsort(s, (size_t)n, sizeof *s, span_cmp);
    ends all = {0, 0, -1}, written = {0, 0, -1};
    for (int k = 0; k < n; k++) {
        if (ends_after(&written, s[k].lo, s[k].row)) return true;
        if (s[k].written && ends_after(&all, s[k].lo, s[k].row)) return true;
        ends_add(&all, s[k].hi, s[k].row);
        if (s[k].written) ends_add(&written, s[k].hi, s[k].row);
    }
    return false;
}

/* A storage the rows touch (a slot of an open-addressing table). */
typedef struct touch {
    const musa_storage *storage; /* NULL: a free slot */
    int row;                     /* the first row that touches it */
    bool shared;                 /* several rows do */
    bool written;                /* a row updates it */
} touch;

static touch *touch_of(touch *tab, int cap, const musa_storage *st) {
    size_t j = (size_t)musa_hash_u64((uint64_t)(uintptr_t)st) & (size_t)(cap - 1);
    while (tab[j].storage && tab[j].storage != st) j = (j + 1) & (size_t)(cap - 1);
    return &tab[j];
}

/* Whether a row writes memory that another row reads or writes. Tensors
 * overlap only within one storage, so storages go in a table first (tab:
 * cap zeroed slots, cap a power of two above twice the tensors): only the
 * tensors of storages that several rows touch, one writing, are compared by
 * the bytes they span (spans: room for every tensor). Usually none are (the
 * shared lr is only read), and the check is one pass. */
static bool rows_conflict(musa_tensor *const *tensors, int n_rows, int n_in, int n_out, touch *tab,
                          int cap, span *spans) {
    bool suspect = false;
    for (int pass = 0; pass < 2; pass++) {
        int n = 0;
        for (int r = 0; r < n_rows; r++)
            for (int i = 0; i < n_in; i++) {
                const musa_tensor *t = tensors[(size_t)r * (size_t)n_in + (size_t)i];
                if (!t->numel) continue;
                touch *e = touch_of(tab, cap, t->storage);
                if (pass == 1) {
                    if (e->shared && e->written) spans[n++] = span_of(t, r, i < n_out);
                    continue;
                }
                if (!e->storage) *e = (touch){t->storage, r, false, false};
                e->shared |= e->row != r;
                e->written |= i < n_out;
                suspect |= e->shared && e->written;
            }
        if (pass == 1) return spans_conflict(spans, n);
        if (!suspect) return false;
    }
    return false;
}

/* Dispatch row `in` in place (its first n_out inputs as outputs). */
static int dispatch_row(musa_op_id op, musa_tensor *const *in, int n_in, int n_out,
                        const void *attrs) {
    musa_tensor *out[MUSA_MAX_OUTPUTS] = {NULL};
    for (int j = 0; j < n_out; j++) out[j] = in[j];
    return musa_dispatch(op, n_in, in, attrs, out);
}

/* The plain rows as one multi-tensor kernel call. mem holds their prepared
 * rows (the kernel's scratch: cpu_update_multi_workspace(n_plain) bytes),
 * then n_plain * (n_out + n_in) views and n_plain pointers to them. Bumps
 * the versions of what it updated. */
static int run_plain(const musa_op_info *info, musa_tensor *const *tensors, int n_rows, int n_in,
                     int n_out, const bool *plain, int n_plain, const void *attrs, char *mem) {
    size_t ws = cpu_update_multi_workspace(n_plain);
    musa_kview *kv = (musa_kview *)(mem + ws);
    musa_kview **rows = (musa_kview **)(kv + (size_t)n_plain * (size_t)(n_out + n_in));
    int64_t work = 0; /* elements of inputs and outputs, as the dispatcher counts them */
    for (int r = 0, q = 0; r < n_rows; r++) {
        if (!plain[r]) continue;
        musa_tensor *const *in = tensors + (size_t)r * (size_t)n_in;
        rows[q] = kv + (size_t)q * (size_t)(n_out + n_in);
        for (int i = 0; i < n_in; i++) {
            musa_tensor_kview(in[i], &rows[q][n_out + i]);
            work += in[i]->numel * (i < n_out ? 2 : 1);
        }
        for (int j = 0; j < n_out; j++) rows[q][j] = rows[q][n_out + j]; /* in place */
        q++;
    }
    musa_kctx ctx = {.scratch = mem, .scratch_bytes = ws, .op_name = info->name};
    bool long_op = musa_long_op_begin(work);
    int64_t t0 = MUSA_UNLIKELY(musa_prof_on()) ? musa_prof_now() : 0;
    int rc = cpu_update_multi(&ctx, info->kernel, n_plain, rows, n_in, attrs);
    if (MUSA_UNLIKELY(t0)) {
        char rows_str[32];
        snprintf(rows_str, sizeof rows_str, "%d parameters", n_plain);
        musa_prof_complete(MUSA_PROFILE_OP, info->name, t0, rows_str);
    }
    musa_long_op_end(long_op);
    if (rc) musa_err_prefix(info->name);
    if (MUSA_UNLIKELY(musa_interrupt_pending()) && musa_interrupt_take() && !rc)
        rc = musa_err(MUSA_ERR_INTERRUPTED, "[%s] interrupted", info->name);
    if (rc) return rc;
    for (int r = 0; r < n_rows; r++)
        for (int j = 0; plain[r] && j < n_out; j++)
            musa_tensor_bump_version(tensors[(size_t)r * (size_t)n_in + (size_t)j]);
    return MUSA_OK;
}

int musa_update_multi(int op_, const musa_attrs *attrs, int n_rows, int n_in,
                      musa_tensor *const *tensors) {
    if (op_ < 0 || op_ >= MUSA_OP_COUNT)
        return musa_err(MUSA_ERR_VALUE, "[update_multi] unknown op id %d", op_);
    musa_op_id op = (musa_op_id)op_;
    const musa_op_info *info = &musa_ops[op];
    if (!(info->flags & MUSA_OPF_INPLACE) || !cpu_update_has_multi(info->kernel))
        return musa_err(MUSA_ERR_VALUE, "[update_multi] %s is not an update op", info->name);
    if (attrs && attrs->op != op_)
        return musa_err(MUSA_ERR_VALUE, "[update_multi] attrs were made for op %s, not %s",
                        musa_ops[attrs->op].name, info->name);
    if (n_rows < 0 || (n_rows > 0 && !tensors))
        return musa_err(MUSA_ERR_VALUE, "[update_multi] bad row array (%d rows)", n_rows);
    if (n_in < 3 || n_in > MAX_IN)
        return musa_err(MUSA_ERR_VALUE, "[%s] an update row has 3 to %d tensors, got %d",
                        info->name, MAX_IN, n_in);
    if (n_rows == 0) return MUSA_OK;
    musa_attrs_any a;
    if (attrs)
        memcpy(&a, &attrs->rec, musa_attrs_desc_of(info->attrs_kind)->size);
    else
        musa_attrs_init(info->attrs_kind, &a);

    /* check every row, noting which are plain (past 64 rows, in a malloc'd array) */
    bool plain_buf[64], *plain = plain_buf;
    if (n_rows > 64 && !(plain = musa_malloc((size_t)n_rows, "update_multi")))
        return MUSA_ERR_NOMEM;
    int rc = MUSA_OK, n_out = 0, n_plain = 0;
    for (int r = 0; r < n_rows && !rc; r++) {
        musa_tensor *const *in = tensors + (size_t)r * (size_t)n_in;
        for (int i = 0; i < n_in && !rc; i++) {
            if (in[i]) continue;
            /* as the dispatcher: an error from the call that gave NULL stands */
            rc = musa_last_error_code();
            if (!rc)
                rc = musa_err(MUSA_ERR_VALUE, "[%s] row %d: input %d is NULL", info->name, r, i);
        }
        if (!rc && (rc = check_row(info, in, n_in, &a, &n_out, &plain[r]))) row_error(info, r);
        n_plain += !rc && plain[r];
    }
    char *mem = NULL;
    if (rc) goto done;

    /* together only in plain eager mode, when no row writes what another
     * touches, and with no streams (row by row, the dispatcher orders each
     * row with the streams' work) */
    bool together = musa_tls.mode == MUSA_MODE_EAGER && !musa_tls.anomaly_forward && n_plain > 1 &&
                    !musa_streams_live();
    if (together) {
        /* one block: the kernel's (prepared rows, views, row pointers), then
         * the conflict check's (storage table, spans) */
        size_t n_t = (size_t)n_rows * (size_t)n_in, cap = 16;
        while (cap < 2 * n_t) cap *= 2;
        size_t run =
            cpu_update_multi_workspace(n_plain) +
            (size_t)n_plain * ((size_t)(n_out + n_in) * sizeof(musa_kview) + sizeof(void *));
        if (!(mem = musa_malloc(run + cap * sizeof(touch) + n_t * sizeof(span), "update_multi"))) {
            rc = MUSA_ERR_NOMEM;
            goto done;
        }
        touch *tab = (touch *)(mem + run);
        memset(tab, 0, cap * sizeof(touch));
        together = !rows_conflict(tensors, n_rows, n_in, n_out, tab, (int)cap, (span *)(tab + cap));
    }
    if (together && (rc = run_plain(info, tensors, n_rows, n_in, n_out, plain, n_plain, &a, mem)))
        goto done;
    for (int r = 0; r < n_rows && !rc; r++) {
        if (together && plain[r]) continue;
        if ((rc = dispatch_row(op, tensors + (size_t)r * (size_t)n_in, n_in, n_out, &a)))
            row_error(info, r);
    }
done:
    free(mem);
    if (plain != plain_buf) free(plain);
    return rc;
}
