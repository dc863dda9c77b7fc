/*
 * composite.c - ops built from primitives, with no row in the op table and
 * no backward of their own: autograd and graph capture see the primitives
 * they are made of. A composite becomes a primitive only when a benchmark
 * shows a fused kernel pays.
 *
 * Every composite accepts NULL inputs (and returns NULL), and releases its
 * temporaries on every path through musa_temps.
 */
#include <math.h>

#include "op.h"

musa_tensor *musa_reshape(musa_tensor *x, int ndim, const int64_t *shape) {
    if (!x) return NULL;
    if (ndim < 0 || ndim > MUSA_MAX_DIMS || (ndim && !shape)) {
        musa_err(MUSA_ERR_VALUE, "[reshape] a tensor has 0 to %d dims, got %d", MUSA_MAX_DIMS,
                 ndim);
        return NULL;
    }
    /* Resolve -1 first so the view test sees the real shape. */
    int64_t s[MUSA_MAX_DIMS], known = 1;
    int infer_at = -1;
    for (int i = 0; i < ndim; i++) {
        s[i] = shape[i];
        if (s[i] == -1 && infer_at < 0)
            infer_at = i;
        else if (s[i] >= 0 && !musa_mul_i64(known, s[i], &known))
            known = -1;
    }
    if (infer_at >= 0 && known > 0 && x->numel % known == 0) s[infer_at] = x->numel / known;
    int64_t total = 1;
    bool valid = true;
    for (int i = 0; i < ndim && valid; i++) valid = s[i] >= 0 && musa_mul_i64(total, s[i], &total);
    /* An invalid shape goes to view, which reports it. */
    if (!valid || total != x->numel || musa_view_possible(x, ndim, s))
        return musa_view(x, ndim, shape);
    musa_tensor *c = musa_clone(x);
    musa_tensor *r = musa_view(c, ndim, s);
    musa_tensor_release(c);
    return r;
}

musa_tensor *musa_flatten(musa_tensor *x, int64_t start_dim, int64_t end_dim) {
    if (!x) return NULL;
    int64_t s, e;
    if (x->ndim == 0) {
        int64_t one = 1;
        return musa_reshape(x, 1, &one);
    }
    if (musa_wrap_dim("flatten", start_dim, x->ndim, &s) ||
        musa_wrap_dim("flatten", end_dim, x->ndim, &e))
        return NULL;
    if (s > e) {
        musa_err(MUSA_ERR_VALUE, "[flatten] start_dim %lld comes after end_dim %lld",
                 (long long)start_dim, (long long)end_dim);
        return NULL;
    }
    int64_t shape[MUSA_MAX_DIMS];
    int n = 0;
    for (int64_t d = 0; d < x->ndim; d++) {
        if (d <= s || d > e)
            shape[n++] = x->shape[d];
        else
            shape[n - 1] *= x->shape[d];
    }
    return musa_reshape(x, n, shape);
}

musa_tensor *musa_transpose(musa_tensor *x, int64_t dim0, int64_t dim1) {
    if (!x) return NULL;
    int64_t a, b;
    if (musa_wrap_dim("transpose", dim0, x->ndim, &a) ||
        musa_wrap_dim("transpose", dim1, x->ndim, &b))
        return NULL;
    if (x->ndim < 2) return musa_tensor_retain(x);
    int64_t perm[MUSA_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) perm[i] = i;
    perm[a] = b, perm[b] = a;
    return musa_permute(x, x->ndim, perm);
}

musa_tensor *musa_broadcast_to(musa_tensor *x, int ndim, const int64_t *shape) {
    return musa_expand(x, ndim, shape);
}

musa_tensor *musa_contiguous(musa_tensor *x) {
    if (!x) return NULL;
    if (musa_tensor_is_contiguous(x)) return musa_tensor_retain(x);
    return musa_clone(x);
}

/* ---- reductions ---- */

static int need_float(const char *op, const musa_tensor *x) {
    if (!musa_is_float((musa_dtype)x->dtype))
        return musa_err(MUSA_ERR_TYPE, "[%s] needs a floating dtype, got %s", op,
                        musa_dtype_name((musa_dtype)x->dtype));
    return MUSA_OK;
}

/* Number of elements each output of a reduction over dims combines, or -1
 * with the error set (a bad or repeated dim). Only an empty x can make the
 * product overflow, and then no output divides by it: it saturates. */
static int64_t reduced_count(const char *op, const musa_tensor *x, int ndims, const int64_t *dims) {
    if (ndims == 0) return x->numel;
    int64_t n = 1;
    bool seen[MUSA_MAX_DIMS] = {false};
    for (int i = 0; i < ndims; i++) {
        int64_t d;
        if (musa_wrap_dim(op, dims[i], x->ndim, &d)) return -1;
        if (x->ndim && seen[d]) {
            musa_err(MUSA_ERR_VALUE, "[%s] dim %lld appears more than once", op, (long long)d);
            return -1;
        }
        if (x->ndim) seen[d] = true;
        if (!musa_mul_i64(n, x->ndim ? x->shape[d] : 1, &n)) n = INT64_MAX;
    }
    return n;
}

musa_tensor *musa_mean(musa_tensor *x, int ndims, const int64_t *dims, bool keepdim) {
    if (!x || need_float("mean", x)) return NULL;
    int64_t n = reduced_count("mean", x, ndims, dims);
    if (n < 0) return NULL;
    musa_temps t = {0};
    musa_tensor *s = musa_tmp(&t, musa_sum(x, ndims, dims, keepdim));
    musa_tensor *r = musa_div(s, musa_tmp(&t, musa_number((double)n)));
    musa_temps_release(&t);
    return r;
}

musa_tensor *musa_var(musa_tensor *x, int ndims, const int64_t *dims, int64_t correction,
                      bool keepdim) {
    if (!x || need_float("var", x)) return NULL;
    int64_t n = reduced_count("var", x, ndims, dims);
    if (n < 0) return NULL;
    musa_temps t = {0};
    musa_tensor *m = musa_tmp(&t, musa_mean(x, ndims, dims, true));
    musa_tensor *d = musa_tmp(&t, musa_sub(x, m));
    musa_tensor *s = musa_tmp(&t, musa_sum(musa_tmp(&t, musa_mul(d, d)), ndims, dims, keepdim));
    /* over nothing the variance is NaN (0 / 0) whatever the correction, as
     * in PyTorch; a correction of n or more divides by 0 */
    double denom = n > 0 && (double)(n - correction) > 0 ? (double)(n - correction) : 0.0;
    musa_tensor *r = musa_div(s, musa_tmp(&t, musa_number(denom)));
    musa_temps_release(&t);
    return r;
}

musa_tensor *musa_std(musa_tensor *x, int ndims, const int64_t *dims, int64_t correction,
                      bool keepdim) {
    musa_tensor *v = musa_var(x, ndims, dims, correction, keepdim);
    musa_tensor *r = musa_sqrt(v);
    musa_tensor_release(v);
    return r;
}

musa_tensor *musa_logsumexp(musa_tensor *x, int ndims, const int64_t *dims, bool keepdim) {
    if (!x || need_float("logsumexp", x)) return NULL;
    musa_temps t = {0};
    /* Shift by the max, treating infinite maxima as 0 so all -inf rows give
     * -inf and +inf rows give +inf instead of NaN. */
    musa_tensor *m = musa_tmp(&t, musa_amax(x, ndims, dims, true));
    musa_tensor *zero = musa_tmp(&t, musa_number(0));
    musa_tensor *ms = musa_tmp(&t, musa_where(musa_tmp(&t, musa_isinf(m)), zero, m));
    musa_tensor *e = musa_tmp(&t, musa_exp(musa_tmp(&t, musa_sub(x, ms))));
    musa_tensor *l = musa_tmp(&t, musa_log(musa_tmp(&t, musa_sum(e, ndims, dims, keepdim))));
    /* The shift's own gradient cancels (d/dm of log-sum-exp(x - m) + m is 0). */
    musa_tensor *shift = keepdim ? ms : musa_tmp(&t, musa_squeeze(ms, ndims, dims));
    musa_tensor *r = musa_add(l, shift);
    musa_temps_release(&t);
    return r;
}

/* Does reducing x over dims (none: all of them) take no element? */
static bool empty_reduction(const musa_tensor *x, int ndims, const int64_t *dims) {
    if (ndims == 0 || !dims) return musa_tensor_numel(x) == 0;
    for (int i = 0; i < ndims; i++) {
        int64_t d = dims[i] < 0 ? dims[i] + x->ndim : dims[i];
        if (d >= 0 && d < x->ndim && x->shape[d] == 0) return true;
    }
    return false;
}

/* s^e where s != 0, and 0 where s == 0 (s >= 0, e > 0: s^e is 0 there
 * too), with the power taken of 1 there instead: the value is the power's,
 * and the gradient at s = 0 is 0, not e s^(e-1) * 0 = inf * 0 = NaN. So the
 * norm of a zero vector, and the zero elements of any vector under
 * 0 < p < 1, differentiate to 0, as in PyTorch. e = 0.5 takes sqrt. */
static musa_tensor *zero_safe_pow(musa_temps *t, musa_tensor *s, double e) {
    musa_tensor *zero = musa_tmp(t, musa_number(0));
    musa_tensor *z = musa_tmp(t, musa_eq(s, zero));
    musa_tensor *safe = musa_tmp(t, musa_where(z, musa_tmp(t, musa_number(1)), s));
    musa_tensor *f =
        musa_tmp(t, e == 0.5 ? musa_sqrt(safe) : musa_pow(safe, musa_tmp(t, musa_number(e))));
    return musa_where(z, zero, f);
}

musa_tensor *musa_norm(musa_tensor *x, double p, int ndims, const int64_t *dims, bool keepdim) {
    if (!x || need_float("norm", x)) return NULL;
    /* max |x| and the negative powers (min-like as p -> -inf) have no value
     * over nothing: PyTorch's vector_norm refuses them too */
    if ((p < 0 || (isinf(p) && p > 0)) && empty_reduction(x, ndims, dims)) {
        musa_err(MUSA_ERR_VALUE,
                 "[norm] cannot compute the %g norm over an empty reduction: it has "
                 "no identity",
                 p);
        return NULL;
    }
    /* p is taken as a float, as PyTorch takes it (float64 too): past float's
     * range (from FLT_MAX's rounding midpoint) it is infinite, and the norm
     * is the max (or min) |x|, not 0 or inf from |x|^p out of range (not over
     * nothing, where a positive p gives 0 as above) */
    if (!isinf(p) && fabs(p) >= 0x1.ffffffp+127 && !empty_reduction(x, ndims, dims))
        p = p > 0 ? INFINITY : -INFINITY;
    musa_temps t = {0};
    musa_tensor *r = NULL;
    if (p == 2) {
        r = zero_safe_pow(
            &t, musa_tmp(&t, musa_sum(musa_tmp(&t, musa_mul(x, x)), ndims, dims, keepdim)), 0.5);
    } else if (p == 1) {
        r = musa_sum(musa_tmp(&t, musa_abs(x)), ndims, dims, keepdim);
    } else if (isinf(p)) {
        musa_tensor *a = musa_tmp(&t, musa_abs(x));
        r = p > 0 ? musa_amax(a, ndims, dims, keepdim) : musa_amin(a, ndims, dims, keepdim);
    } else if (p == 0) { /* the count of nonzero elements (no gradient, as in PyTorch) */
        musa_tensor *nz = musa_tmp(&t, musa_ne(x, musa_tmp(&t, musa_number(0))));
        r = musa_sum(musa_tmp(&t, musa_cast(nz, (musa_dtype)x->dtype)), ndims, dims, keepdim);
    } else if (p > 0) { /* (sum |x|^p)^(1/p). A sum of 0 (over nothing too) gives 0, also
                         * where 1/p rounds to 0 in x's dtype (float16, p = 1e308: 0^0 = 1) */
        musa_tensor *a = zero_safe_pow(&t, musa_tmp(&t, musa_abs(x)), p);
        r = zero_safe_pow(&t, musa_tmp(&t, musa_sum(musa_tmp(&t, a), ndims, dims, keepdim)),
                          1.0 / p);
    } else if (p == p) { /* p < 0: a zero element gives 0 */
        musa_tensor *a =
            musa_tmp(&t, musa_pow(musa_tmp(&t, musa_abs(x)), musa_tmp(&t, musa_number(p))));
        musa_tensor *s = musa_tmp(&t, musa_sum(a, ndims, dims, keepdim));
        r = musa_pow(s, musa_tmp(&t, musa_number(1.0 / p)));
    } else {
        musa_err(MUSA_ERR_VALUE, "[norm] p must be a number, got %g", p);
    }
    musa_temps_release(&t);
    return r;
}

/* ---- joining and splitting ---- */

musa_tensor *musa_stack(int n, musa_tensor *const *tensors, int64_t dim) {
    if (n < 1 || !tensors) {
        musa_err(MUSA_ERR_VALUE, "[stack] needs a non-empty list of tensors");
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (!tensors[i]) return NULL;
    int64_t d;
    if (musa_wrap_dim("stack", dim, tensors[0]->ndim + 1, &d)) return NULL;
    musa_tensor **u = musa_calloc((size_t)n, sizeof *u, "stack");
    if (!u) return NULL;
    musa_tensor *r = NULL;
    int i = 0;
    for (; i < n; i++)
        if (!(u[i] = musa_unsqueeze(tensors[i], d))) break;
    if (i == n) r = musa_cat(n, u, d);
    for (int k = 0; k < i; k++) musa_tensor_release(u[k]);
    free(u);
    return r;
}

int musa_split(musa_tensor *x, int64_t split_size, int64_t dim, int max_out, musa_tensor **outs) {
    if (!x)
        return musa_last_error_code() ? musa_last_error_code()
                                      : musa_err(MUSA_ERR_VALUE, "[split] tensor is NULL");
    int64_t d;
    int rc = musa_wrap_dim("split", dim, x->ndim, &d);
    if (rc) return rc;
    if (x->ndim == 0) return musa_err(MUSA_ERR_VALUE, "[split] cannot split a 0-d tensor");
    int64_t size = x->shape[d];
    if (split_size <= 0 && !(split_size == 0 && size == 0))
        return musa_err(MUSA_ERR_VALUE, "[split] split_size must be positive, got %lld",
                        (long long)split_size);
    /* (no size + split_size - 1: that overflows for a split_size near 2^63) */
    int64_t count = size == 0 ? 1 : size / split_size + (size % split_size != 0);
    if (count > INT32_MAX) return musa_err(MUSA_ERR_VALUE, "[split] too many pieces");
    for (int64_t i = 0; i < count && i < max_out; i++) {
        int64_t start = i * split_size;
        int64_t end = split_size > size - start ? size : start + split_size;
        outs[i] = musa_slice(x, d, start, end, 1);
        if (!outs[i]) {
            for (int64_t k = 0; k < i; k++) musa_tensor_release(outs[k]);
            return musa_last_error_code();
        }
    }
    return (int)count;
}

int musa_chunk(musa_tensor *x, int64_t chunks, int64_t dim, int max_out, musa_tensor **outs) {
    if (!x)
        return musa_last_error_code() ? musa_last_error_code()
                                      : musa_err(MUSA_ERR_VALUE, "[chunk] tensor is NULL");
    if (chunks <= 0)
        return musa_err(MUSA_ERR_VALUE, "[chunk] chunks must be positive, got %lld",
                        (long long)chunks);
    int64_t d;
    int rc = musa_wrap_dim("chunk", dim, x->ndim, &d);
    if (rc) return rc;
    if (x->ndim == 0) return musa_err(MUSA_ERR_VALUE, "[chunk] cannot chunk a 0-d tensor");
    int64_t size = x->shape[d];
    if (size == 0) { /* as PyTorch: `chunks` empty pieces */
        if (chunks > INT32_MAX) return musa_err(MUSA_ERR_VALUE, "[chunk] too many pieces");
        for (int64_t i = 0; i < chunks && i < max_out; i++) {
            outs[i] = musa_slice(x, d, 0, 0, 1);
            if (!outs[i]) {
                for (int64_t k = 0; k < i; k++) musa_tensor_release(outs[k]);
                return musa_last_error_code();
            }
        }
        return (int)chunks;
    }
    return musa_split(x, size / chunks + (size % chunks != 0), d, max_out, outs);
}

musa_tensor *musa_masked_fill(musa_tensor *x, musa_tensor *mask, double value) {
    if (!x || !mask) return NULL;
    int nd;
    int64_t shape[MUSA_MAX_DIMS];
    if (musa_broadcast_shape("masked_fill", x->ndim, x->shape, mask->ndim, mask->shape, &nd, shape))
        return NULL;
    bool same = nd == x->ndim;
    for (int i = 0; same && i < nd; i++) same = shape[i] == x->shape[i];
    if (!same) {
        musa_err(MUSA_ERR_VALUE, "[masked_fill] the mask must broadcast to the input's shape");
        return NULL;
    }
    if (mask->dtype != MUSA_DTYPE_BOOL) {
        musa_err(MUSA_ERR_TYPE, "[masked_fill] the mask must be bool, got %s",
                 musa_dtype_name((musa_dtype)mask->dtype));
        return NULL;
    }
    musa_temps t = {0};
    /* the fill value through the dispatcher (a 0-d full), so a capture records it */
    musa_tensor *v = musa_tmp(&t, musa_full(0, NULL, value, (musa_dtype)x->dtype));
    musa_tensor *r = musa_where(mask, v, x);
    musa_temps_release(&t);
    return r;
}

musa_tensor *musa_repeat(musa_tensor *x, int ndim, const int64_t *repeats) {
    if (!x) return NULL;
    if (ndim < x->ndim || ndim > MUSA_MAX_DIMS || (ndim && !repeats)) {
        musa_err(MUSA_ERR_VALUE,
                 "[repeat] needs at least %d repeat counts (and at most %d), got %d", x->ndim,
                 MUSA_MAX_DIMS, ndim);
        return NULL;
    }
    int64_t shape[MUSA_MAX_DIMS] = {0};
    for (int i = 0; i < ndim; i++) {
        if (repeats[i] < 0) {
            musa_err(MUSA_ERR_VALUE, "[repeat] negative repeat count %lld", (long long)repeats[i]);
            return NULL;
        }
        int xi = i - (ndim - x->ndim);
        shape[i] = xi < 0 ? 1 : x->shape[xi];
    }
    musa_tensor *cur = musa_reshape(x, ndim, shape);
    for (int i = 0; cur && i < ndim; i++) {
        if (repeats[i] == 1) continue;
        if (repeats[i] > INT32_MAX) {
            musa_err(MUSA_ERR_VALUE, "[repeat] repeat count too large");
            musa_tensor_release(cur);
            return NULL;
        }
        int n = (int)repeats[i];
        musa_tensor **copies = musa_malloc(sizeof *copies * (size_t)(n ? n : 1), "repeat");
        musa_tensor *next = NULL;
        if (copies) {
            for (int k = 0; k < n; k++) copies[k] = cur;
            if (n)
                next = musa_cat(n, copies, i);
            else
                next = musa_slice(cur, i, 0, 0, 1);
            free(copies);
        }
        musa_tensor_release(cur);
        cur = next;
    }
    return cur;
}

musa_tensor *musa_one_hot(musa_tensor *x, int64_t num_classes) {
    if (!x) return NULL;
    if (musa_is_float((musa_dtype)x->dtype) || x->dtype == MUSA_DTYPE_BOOL) {
        musa_err(MUSA_ERR_TYPE, "[one_hot] needs an integer tensor, got %s",
                 musa_dtype_name((musa_dtype)x->dtype));
        return NULL;
    }
    if (num_classes < -1) {
        musa_err(MUSA_ERR_VALUE, "[one_hot] num_classes must be -1 (infer) or >= 0, got %lld",
                 (long long)num_classes);
        return NULL;
    }
    musa_temps t = {0};
    musa_tensor *r = NULL;
    /* check the classes where values are at hand (not in symbolic mode) */
    if (x->storage && x->numel && musa_tls.mode != MUSA_MODE_SYMBOLIC) {
        double lo, hi;
        musa_tensor *mn = musa_tmp(&t, musa_amin(x, 0, NULL, false));
        musa_tensor *mx = musa_tmp(&t, musa_amax(x, 0, NULL, false));
        if (musa_tensor_item(mn, &lo) || musa_tensor_item(mx, &hi)) goto done;
        if (num_classes < 0) num_classes = (int64_t)hi + 1;
        if (lo < 0 || hi >= (double)num_classes) {
            musa_err(MUSA_ERR_VALUE, "[one_hot] class values must be in [0, %lld), got %g..%g",
                     (long long)num_classes, lo, hi);
            goto done;
        }
    } else if (num_classes < 0) {
        if (x->storage)
            num_classes = 0;
        else {
            musa_err(MUSA_ERR_VALUE, "[one_hot] num_classes must be given in symbolic mode");
            goto done;
        }
    }
    musa_tensor *classes = musa_tmp(&t, musa_arange(0, (double)num_classes, 1, MUSA_DTYPE_INT64));
    musa_tensor *xi = x;
    if (musa_tls.mode != MUSA_MODE_EAGER) {
        /* Recorded into a graph, the check above is not: there each value
         * goes through a gather from the classes, which the plan refuses
         * for one outside [0, C). */
        musa_tensor *flat = musa_tmp(&t, musa_flatten(x, 0, -1));
        musa_tensor *got = musa_tmp(&t, musa_gather(classes, 0, flat));
        if (!(xi = musa_tmp(&t, musa_reshape(got, x->ndim, x->shape)))) goto done;
    }
    musa_tensor *eq = musa_tmp(&t, musa_eq(musa_tmp(&t, musa_unsqueeze(xi, -1)), classes));
    r = musa_cast(eq, MUSA_DTYPE_INT64);
done:
    musa_temps_release(&t);
    return r;
}

musa_tensor *musa_sum_to_size(musa_tensor *x, int ndim, const int64_t *shape) {
    if (!x) return NULL;
    char s1[128], s2[128];
    if (ndim < 0 || ndim > x->ndim || (ndim && !shape)) {
        musa_err(MUSA_ERR_VALUE, "[sum_to_size] cannot sum shape %s to %d dims",
                 musa_shape_str(x->ndim, x->shape, s1, sizeof s1), ndim);
        return NULL;
    }
    int lead = x->ndim - ndim, n = 0;
    int64_t dims[MUSA_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) {
        if (i < lead) {
            dims[n++] = i;
            continue;
        }
        int64_t want = shape[i - lead];
        if (want == x->shape[i]) continue;
        if (want != 1) {
            musa_err(MUSA_ERR_VALUE, "[sum_to_size] cannot sum shape %s to %s",
                     musa_shape_str(x->ndim, x->shape, s1, sizeof s1),
                     musa_shape_str(ndim, shape, s2, sizeof s2));
            return NULL;
        }
        dims[n++] = i;
    }
    if (n == 0) return musa_tensor_retain(x);
    musa_tensor *s = musa_sum(x, n, dims, true);
    musa_tensor *r = musa_reshape(s, ndim, shape);
    musa_tensor_release(s);
    return r;
}
