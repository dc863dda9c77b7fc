/*
 * fuzz_op_call.c - a libFuzzer harness over musa_op_call: every row of the
 * op table (forward ops, the fused *_backward rows, the optimizer updates),
 * with inputs, attributes and outputs decided by the fuzzer's bytes.
 *
 * One input is one call (sometimes two: fresh outputs, then the same call
 * writing into provided ones), optionally followed by a backward pass. The
 * bytes are read front to back (running out reads zeros):
 *
 *   op row (2 bytes, modulo musa_op_count()), a flags byte (autograd,
 *   output mode, backward kind), the input count (the row's, or off by one,
 *   or 0..10 for variadic rows), then per input: its kind (fresh tensor,
 *   an earlier input again, a view of one, a wrapped number, NULL), dtype,
 *   shape (same as input 0, broadcast from it, or new: ndim 0..8, sizes
 *   from 0..16 or huge: 2^31, 2^62, INT64_MAX, products that overflow),
 *   layout (contiguous, transposed, strided with an offset, expanded with
 *   zero strides, overlapping, unaligned external memory) and values (zeros,
 *   small and negative indices, NaN, inf, huge, INT64_MIN/MAX, raw bytes);
 *   then one byte per attribute field of the row's record, set by name
 *   through the public setters (ints including huge and negative, floats
 *   including NaN and inf, bools, int lists of 0..17 values, dtypes
 *   including invalid ids), and the provided outputs.
 *
 * The contract checked: every call returns MUSA_OK with its outputs set,
 * or a negative status equal to musa_last_error_code() whose message starts
 * with "[" and leaves the fresh output slots NULL. Anything else is a
 * finding, as is every sanitizer report, crash, internal assert or leak.
 *
 * Memory: real storage is capped (FUZZ_MAX_STORAGE elements per input);
 * bigger shapes only come as zero-stride expand views or as shapes whose
 * element count is 0 or overflows, which must fail cleanly. Kernels can
 * still be asked for large outputs; run.sh caps single allocations in
 * ASan (max_allocation_size_mb with allocator_may_return_null), so those
 * end as MUSA_ERR_NOMEM, which is a clean error.
 *
 * fuzz_op_call_one() runs one input and returns the number of findings;
 * LLVMFuzzerTestOneInput aborts on any (after cleaning up), and
 * tests/c/test_fuzz.c replays the kept crashers and the seeds through
 * fuzz_op_call_one in the ordinary and sanitizer builds.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "musa.h"
#include "ops/op.h"

#define FUZZ_MAX_STORAGE (1 << 16) /* elements of real storage per created tensor */
#define FUZZ_MAX_NUMEL   (1 << 16) /* logical elements of an input that does not overflow */
#define FUZZ_MAX_INPUTS  10
#define FUZZ_SLOTS       MUSA_MAX_OUTPUTS

int fuzz_op_call_one(const uint8_t *data, size_t size);

/* ---- the byte reader ---- */

typedef struct {
    const uint8_t *p;
    size_t n;
} reader;

static uint8_t u8(reader *r) {
    if (!r->n) return 0;
    r->n--;
    return *r->p++;
}
static uint16_t u16(reader *r) {
    uint16_t lo = u8(r); /* sequenced: the replay build may be GCC's */
    return (uint16_t)(lo | (u8(r) << 8));
}
static uint64_t u64(reader *r) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)u8(r) << (8 * i);
    return v;
}
/* A value below n (n > 0). */
static int pick(reader *r, int n) {
    return u8(r) % n;
}

/* A small generator for the bulk of large fills (seeded from the input). */
static uint64_t xorshift(uint64_t *s) {
    uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ull;
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return *s = x;
}

/* ---- value tables ---- */

/* mostly tiny: big shapes cost time and find little that small ones miss */
static const int64_t small_dims[] = {0, 1, 1, 1, 2, 2, 2, 3, 3, 4, 5, 7, 8, 16, 1, 2};
static const int64_t huge_dims[] = {
    (int64_t)1 << 31,
    ((int64_t)1 << 32) + 1,
    (int64_t)1 << 62,
    ((int64_t)1 << 62) + 1,
    INT64_MAX,
    3037000500,
    -1,
    (int64_t)1 << 40,
};
static const int64_t int_values[] = {
    0,
    1,
    -1,
    2,
    -2,
    3,
    4,
    -3,
    5,
    8,
    16,
    100,
    -100,
    (int64_t)1 << 31,
    -((int64_t)1 << 31),
    ((int64_t)1 << 32) + 1,
    (int64_t)1 << 62,
    ((int64_t)1 << 62) + 1,
    -((int64_t)1 << 62),
    INT64_MAX,
    INT64_MIN,
    INT64_MAX - 1,
    INT64_MIN + 1,
    255,
    -129,
    7,
};
#define N_INT_VALUES ((int)(sizeof int_values / sizeof int_values[0]))
static const double float_values[] = {
    0.0, -0.0,     1.0,       -1.0,    0.5,    2.0,      1e-8,   0.9,     0.999,
    NAN, INFINITY, -INFINITY, 1e308,   -1e308, 4.9e-324, 9.3e18, -9.3e18, 1e-300,
    3.5, -2.5,     65504.0,   70000.0, 1e38,   3.4e39,   0.1,    -0.0001, 255.5,
};
#define N_FLOAT_VALUES ((int)(sizeof float_values / sizeof float_values[0]))

static int64_t attr_int(reader *r) {
    uint8_t b = u8(r);
    if (b < 128) return int_values[b % N_INT_VALUES];
    if (b < 192) return (int8_t)u8(r); /* small, signed */
    if (b < 224) return (int64_t)(b & 7) - 2;
    return (int64_t)u64(r);
}

static double attr_float(reader *r) {
    uint8_t b = u8(r);
    if (b < 192) return float_values[b % N_FLOAT_VALUES];
    if (b < 240) return (double)(int8_t)u8(r) / 8;
    uint64_t bits = u64(r);
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

/* ---- findings ---- */

static int findings;
static const char *cur_op = "?";
static bool verbose; /* FUZZ_VERBOSE=1: describe each call on stderr (replaying a crasher) */

static void describe(const char *what, int k, const musa_tensor *t) {
    if (!verbose) return;
    if (!t) {
        fprintf(stderr, "  %s %d: NULL\n", what, k);
        return;
    }
    char sh[160], st[160];
    musa_shape_str(musa_tensor_ndim(t), musa_tensor_shape(t), sh, sizeof sh);
    musa_shape_str(musa_tensor_ndim(t), musa_tensor_strides(t), st, sizeof st);
    musa_node *fn = musa_tensor_grad_fn(t);
    fprintf(stderr, "  %s %d: %s%s shape %s strides %s offset %lld%s%s%s (storage %p)\n", what, k,
            musa_tensor_is_number(t) ? "number " : "", musa_dtype_name(musa_tensor_dtype(t)), sh,
            st, (long long)musa_tensor_offset(t),
            musa_tensor_requires_grad(t) ? " requires_grad" : "", fn ? " grad_fn " : "",
            fn ? musa_node_name(fn) : "", musa_tensor_is_meta(t) ? NULL : musa_tensor_data(t));
}

#define FINDING(...)                                                                               \
    do {                                                                                           \
        fprintf(stderr, "fuzz_op_call: FINDING in op %s: ", cur_op);                               \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
        findings++;                                                                                \
    } while (0)

/* A failed call's status and message must follow the error contract. */
static void check_error(const char *what, int rc) {
    const char *msg = musa_last_error();
    if (rc >= 0 || (rc < MUSA_ERR_ZERO_DIVISION && rc != MUSA_ERR_LINALG))
        FINDING("%s returned status %d (not a MUSA_ERR_*); message '%s'", what, rc, msg);
    else if (musa_last_error_code() != rc)
        FINDING("%s returned %s but the last error is %s ('%s')", what, musa_status_name(rc),
                musa_status_name(musa_last_error_code()), msg);
    else if (msg[0] != '[' || !strchr(msg, ']'))
        FINDING("%s failed with %s and a message without the [name] prefix: '%s'", what,
                musa_status_name(rc), msg);
}

/* A tensor-returning helper failed: the error must follow the contract. */
static musa_tensor *checked(const char *what, musa_tensor *t) {
    if (!t) check_error(what, musa_last_error_code() ? musa_last_error_code() : 1);
    return t;
}

/* Read every element of t (and format it): a view that reaches outside its
 * storage, or a kernel that wrote garbage shapes, shows up here. */
static void touch(musa_tensor *t) {
    if (!t || musa_tensor_is_meta(t)) return;
    int64_t n = musa_tensor_numel(t);
    if (n < 0) {
        FINDING("an output has %lld elements", (long long)n);
        return;
    }
    if (n > FUZZ_MAX_NUMEL * 4) return;
    size_t bytes = (size_t)n * musa_dtype_size(musa_tensor_dtype(t));
    void *buf = malloc(bytes ? bytes : 1);
    if (!buf) return;
    int rc = musa_tensor_copy_to(t, buf, bytes);
    if (rc) check_error("copy_to", rc);
    free(buf);
    if (n <= 64) {
        char s[256];
        musa_tensor_format(t, s, sizeof s);
    }
}

/* ---- inputs ---- */

typedef struct {
    musa_tensor *owned[128]; /* every tensor the harness made; released at the end */
    int n_owned;
    musa_tensor *in[FUZZ_MAX_INPUTS + 1];
    bool leaf[FUZZ_MAX_INPUTS + 1]; /* made fresh by the harness (may require grad) */
    int n_in;
    uint64_t seed;
} state;

static musa_tensor *keep(state *s, musa_tensor *t) {
    if (!t) return NULL;
    if (s->n_owned == (int)(sizeof s->owned / sizeof s->owned[0])) {
        musa_tensor_release(t);
        return NULL;
    }
    s->owned[s->n_owned++] = t;
    return t;
}

/* Fill n contiguous elements of dtype at p. */
static void fill(reader *r, state *s, void *p, int64_t n, musa_dtype dt) {
    int mode = pick(r, 5);
    if (mode == 0 || n == 0) {
        memset(p, 0, (size_t)n * musa_dtype_size(dt));
        return;
    }
    if (mode == 4) { /* raw bytes: any bit pattern, bools included */
        size_t bytes = (size_t)n * musa_dtype_size(dt);
        for (size_t i = 0; i < bytes; i++) ((uint8_t *)p)[i] = (uint8_t)xorshift(&s->seed);
        for (size_t i = 0; i < bytes && r->n; i++) ((uint8_t *)p)[i] = u8(r);
        if (dt == MUSA_DTYPE_BOOL)
            for (size_t i = 0; i < bytes; i++) ((uint8_t *)p)[i] &= 1;
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        uint8_t b = i < 16 ? u8(r) : (uint8_t)xorshift(&s->seed);
        double f;
        int64_t v;
        if (mode == 1) { /* index-like: mostly in range, some negative */
            v = (int64_t)(b % 8) - 2;
            f = (double)v;
        } else if (mode == 2) { /* specials */
            v = int_values[b % N_INT_VALUES];
            f = float_values[b % N_FLOAT_VALUES];
        } else { /* ordinary */
            v = b % 4;
            f = (double)(int8_t)b / 16;
        }
        switch (dt) {
        case MUSA_DTYPE_FLOAT32:
            ((float *)p)[i] = (float)(fabs(f) > 3e38 && isfinite(f) ? INFINITY : f);
            break;
        case MUSA_DTYPE_FLOAT64:
            ((double *)p)[i] = f;
            break;
        case MUSA_DTYPE_FLOAT16: {
            static const uint16_t h[] = {0x0000, 0x3c00, 0xbc00, 0x7c00, 0xfc00, 0x7e00,
                                         0x7bff, 0x0001, 0x4000, 0x8000, 0x3800, 0xfbff};
            ((uint16_t *)p)[i] = mode == 2 ? h[b % 12] : h[b % 3];
            break;
        }
        case MUSA_DTYPE_BFLOAT16: {
            float g = (float)(fabs(f) > 3e38 && isfinite(f) ? INFINITY : f);
            uint32_t bits;
            memcpy(&bits, &g, sizeof bits);
            ((uint16_t *)p)[i] = (uint16_t)(bits >> 16);
            break;
        }
        case MUSA_DTYPE_INT64:
            ((int64_t *)p)[i] = v;
            break;
        case MUSA_DTYPE_INT32:
            ((int32_t *)p)[i] = (int32_t)v;
            break;
        case MUSA_DTYPE_INT16:
            ((int16_t *)p)[i] = (int16_t)v;
            break;
        case MUSA_DTYPE_INT8:
            ((int8_t *)p)[i] = (int8_t)v;
            break;
        case MUSA_DTYPE_UINT8:
            ((uint8_t *)p)[i] = (uint8_t)v;
            break;
        case MUSA_DTYPE_BOOL:
            ((uint8_t *)p)[i] = (uint8_t)(v & 1);
            break;
        default:
            break;
        }
    }
}

/* The element count of a shape, or -1 when it overflows. A negative size
 * counts as 1 (expand reads -1 as "keep"; creation refuses it). */
static int64_t numel_of(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        if (shape[i] == 0) return 0;
    for (int i = 0; i < ndim; i++) {
        int64_t d = shape[i] < 0 ? 1 : shape[i];
        if (n > INT64_MAX / d) return -1;
        n *= d;
    }
    return n;
}

static void deleter_free(void *ctx) {
    free(ctx);
}

/* A fresh tensor of this shape and dtype in one of several layouts; big
 * shapes come as expand views of a small base. NULL (with the error
 * checked) when creation fails, which the call then sees as a NULL input. */
static musa_tensor *make_tensor(reader *r, state *s, int ndim, int64_t *shape, musa_dtype dt,
                                bool *leaf) {
    int64_t n = numel_of(ndim, shape);
    /* Shapes that fit int64 but are too big to compute on are shrunk. */
    while (n > FUZZ_MAX_NUMEL) {
        int big = 0;
        for (int i = 1; i < ndim; i++)
            if (shape[i] > shape[big]) big = i;
        shape[big] = shape[big] > 16 ? 16 : shape[big] / 2;
        n = numel_of(ndim, shape);
    }
    int layout = pick(r, 8);
    if (n < 0 || layout == 3) { /* expand a base with size-1 dims (overflowing shapes too) */
        int64_t bshape[MUSA_MAX_DIMS];
        int lead = ndim ? pick(r, ndim + 1) : 0; /* new leading dims */
        int bnd = ndim - lead;
        for (int i = 0; i < bnd; i++) {
            int64_t d = shape[lead + i];
            bshape[i] = (d < 0 || d > 16 || (u8(r) & 1)) ? 1 : d;
        }
        musa_tensor *base = keep(s, checked("empty", musa_empty(bnd, bshape, dt)));
        if (!base) return NULL;
        fill(r, s, musa_tensor_data(base), musa_tensor_numel(base), dt);
        *leaf = true; /* the base is the leaf; expand is a view of it */
        musa_tensor *e = keep(s, musa_expand(base, ndim, shape));
        if (!e) check_error("expand", musa_last_error_code());
        return e;
    }
    if (layout == 1 && ndim >= 2) { /* transposed: a permuted base, permuted back */
        int64_t perm[MUSA_MAX_DIMS], inv[MUSA_MAX_DIMS], pshape[MUSA_MAX_DIMS];
        for (int i = 0; i < ndim; i++) perm[i] = i;
        for (int i = ndim - 1; i > 0; i--) {
            int j = pick(r, i + 1);
            int64_t t = perm[i];
            perm[i] = perm[j], perm[j] = t;
        }
        for (int i = 0; i < ndim; i++) pshape[i] = shape[perm[i]], inv[perm[i]] = i;
        musa_tensor *base = keep(s, checked("empty", musa_empty(ndim, pshape, dt)));
        if (!base) return NULL;
        fill(r, s, musa_tensor_data(base), n, dt);
        *leaf = true;
        return keep(s, checked("permute", musa_permute(base, ndim, inv)));
    }
    if ((layout == 2 || layout == 5) && ndim >= 1) { /* strided or overlapping, with an offset */
        int64_t strides[MUSA_MAX_DIMS], span = 0, step = 1, x;
        int k = 1 + pick(r, 3);
        bool big = false; /* strides or span past int64: as_strided must refuse */
        for (int i = ndim - 1; i >= 0; i--) {
            if (layout == 5 && (u8(r) & 1))
                strides[i] = pick(r, 2);
            else if (__builtin_mul_overflow(step, k, &strides[i]))
                strides[i] = INT64_MAX, big = true;
            if (shape[i] && __builtin_mul_overflow(step, shape[i], &step))
                step = INT64_MAX, big = true;
            if (shape[i] && (__builtin_mul_overflow(shape[i] - 1, strides[i], &x) ||
                             __builtin_add_overflow(span, x, &span)))
                span = INT64_MAX, big = true;
        }
        int64_t offset = pick(r, 5);
        int64_t total = big || span > FUZZ_MAX_STORAGE ? FUZZ_MAX_STORAGE : offset + span + 1;
        if (total > FUZZ_MAX_STORAGE) total = FUZZ_MAX_STORAGE; /* as_strided must refuse */
        int64_t one = total;
        musa_tensor *base = keep(s, checked("empty", musa_empty(1, &one, dt)));
        if (!base) return NULL;
        fill(r, s, musa_tensor_data(base), total, dt);
        *leaf = true;
        musa_tensor *v = keep(s, musa_as_strided(base, ndim, shape, strides, offset));
        if (!v) check_error("as_strided", musa_last_error_code());
        return v;
    }
    if (layout == 4) { /* external memory, maybe unaligned */
        size_t esize = musa_dtype_size(dt), bytes = (size_t)n * esize;
        size_t shift = u8(r) & 1 ? (size_t)1 + pick(r, 7) : 0;
        uint8_t *mem = malloc(bytes + shift + 1);
        void *vals = malloc(bytes + 1);
        if (!mem || !vals) {
            free(mem), free(vals);
            return NULL;
        }
        fill(r, s, vals, n, dt); /* typed stores need alignment: fill, then copy */
        memcpy(mem + shift, vals, bytes);
        free(vals);
        musa_tensor *t = musa_from_blob(mem + shift, ndim, shape, NULL, dt, deleter_free, mem);
        if (!t) {
            check_error("from_blob", musa_last_error_code());
            free(mem);
            return NULL;
        }
        *leaf = true;
        return keep(s, t);
    }
    /* contiguous, made through musa_from_data sometimes */
    musa_tensor *t;
    if (layout == 6 && n <= 64) {
        uint8_t buf[64 * 8];
        fill(r, s, buf, n, dt);
        t = checked("from_data", musa_from_data(buf, ndim, shape, dt));
    } else {
        t = checked("empty", musa_empty(ndim, shape, dt));
        if (t) fill(r, s, musa_tensor_data(t), n, dt);
    }
    *leaf = t != NULL;
    return keep(s, t);
}

/* A dtype: mostly valid, biased to float32 and int64. */
static musa_dtype pick_dtype(reader *r) {
    uint8_t b = u8(r);
    if (b < 64) return MUSA_DTYPE_FLOAT32;
    if (b < 96) return MUSA_DTYPE_INT64;
    return (musa_dtype)(b % MUSA_DTYPE_COUNT);
}

static int64_t pick_dim(reader *r) {
    uint8_t b = u8(r);
    if (b < 240) return small_dims[b % (sizeof small_dims / sizeof small_dims[0])];
    return huge_dims[b % (sizeof huge_dims / sizeof huge_dims[0])];
}

/* Input i: see the file comment. */
static musa_tensor *make_input(reader *r, state *s, int i) {
    s->leaf[i] = false;
    int kind = pick(r, 16);
    if (kind == 13 && i > 0) return s->in[pick(r, i)]; /* the same tensor twice */
    if (kind == 14 && i > 0 && s->in[0]) {             /* a view of an earlier input */
        musa_tensor *b = s->in[pick(r, i)];
        if (!b) return NULL;
        int nd = musa_tensor_ndim(b);
        if (nd >= 2) return keep(s, checked("transpose", musa_transpose(b, 0, nd - 1)));
        if (nd == 1) { /* reads sequenced: GCC and clang order arguments differently */
            int64_t start = pick(r, 3);
            int64_t step = 1 + pick(r, 2);
            return keep(s, checked("slice", musa_slice(b, 0, start, INT64_MAX, step)));
        }
        return b;
    }
    if (kind == 15) { /* a wrapped number */
        switch (pick(r, 3)) {
        case 0:
            return keep(s, checked("number", musa_number(attr_float(r))));
        case 1:
            return keep(s, checked("number", musa_number_int(attr_int(r))));
        default:
            return keep(s, checked("number", musa_number_bool(u8(r) & 1)));
        }
    }
    if (kind == 12 && u8(r) == 0) return NULL;
    musa_dtype dt = pick_dtype(r);
    int ndim;
    int64_t shape[MUSA_MAX_DIMS];
    int how = pick(r, 4);
    musa_tensor *t0 = i > 0 ? s->in[0] : NULL;
    if (how <= 1 && t0) { /* input 0's shape, or broadcast from it */
        ndim = musa_tensor_ndim(t0);
        memcpy(shape, musa_tensor_shape(t0), sizeof(int64_t) * (size_t)ndim);
        if (how == 0 && (u8(r) & 1)) dt = musa_tensor_dtype(t0);
        if (how == 1) {
            int drop = ndim ? pick(r, ndim + 1) : 0;
            memmove(shape, shape + drop, sizeof(int64_t) * (size_t)(ndim - drop));
            ndim -= drop;
            for (int d = 0; d < ndim; d++)
                if (u8(r) & 1) shape[d] = 1;
        }
    } else if (how == 2) {
        ndim = 0;
    } else {
        ndim = pick(r, MUSA_MAX_DIMS + 1);
        for (int d = 0; d < ndim; d++) shape[d] = pick_dim(r);
    }
    return make_tensor(r, s, ndim, shape, dt, &s->leaf[i]);
}

/* ---- attributes ---- */

/* Set every field of the op's record (or leave its default), by name. */
static musa_attrs *make_attrs(reader *r, state *s, int op) {
    musa_attrs *a = musa_attrs_new(op);
    if (!a) {
        check_error("attrs_new", musa_last_error_code());
        return NULL;
    }
    const musa_attrs_desc *d = musa_attrs_desc_of(musa_ops[op].attrs_kind);
    bool none = musa_ops[op].attrs_kind == MUSA_ATTRS_none; /* its placeholder field is private */
    for (const musa_attr_field *f = d->fields; f->name; f++) {
        uint8_t how = u8(r);
        if (how < 64) continue; /* default */
        int rc = MUSA_OK;
        bool may_fail = none;
        char val[400] = "";
        switch (f->type) {
        case MUSA_ATTR_BOOL:
            rc = musa_attrs_set_bool(a, f->name, how & 1);
            snprintf(val, sizeof val, "%d", how & 1);
            break;
        case MUSA_ATTR_INT:
            if (how >= 240) { /* a number that may not be integral */
                double v = attr_float(r);
                rc = musa_attrs_set_number(a, f->name, v);
                snprintf(val, sizeof val, "number %.17g", v);
                may_fail = true;
            } else {
                int64_t v = attr_int(r);
                rc = musa_attrs_set_int(a, f->name, v);
                snprintf(val, sizeof val, "%lld", (long long)v);
            }
            break;
        case MUSA_ATTR_FLOAT: {
            double v = attr_float(r);
            snprintf(val, sizeof val, "%.17g", v);
            if (how >= 240) { /* through set_number, which may refuse */
                rc = musa_attrs_set_number(a, f->name, v);
                may_fail = true;
            } else {
                rc = musa_attrs_set_float(a, f->name, v);
            }
            break;
        }
        case MUSA_ATTR_DTYPE: {
            uint8_t b = u8(r);
            int v = b < 200 ? b % MUSA_DTYPE_COUNT : (int)(int8_t)u8(r) * 1000003;
            rc = musa_attrs_set_dtype(a, f->name, (musa_dtype)v);
            snprintf(val, sizeof val, "dtype %d", v);
            may_fail = v < 0 || v >= MUSA_DTYPE_COUNT;
            break;
        }
        case MUSA_ATTR_INTS: {
            int64_t v[MUSA_MAX_ATTR_INTS + 1];
            int n = pick(r, MUSA_MAX_ATTR_INTS + 3) - 1; /* -1..17: the ends must fail */
            int nn = n < 0 ? 0 : n;
            const musa_tensor *t0 = s->in[0];
            int mode = pick(r, 4);
            for (int k = 0; k < nn; k++) {
                if (mode == 0 || !t0)
                    v[k] = attr_int(r);
                else if (mode == 1) /* input 0's shape, with some -1 */
                    v[k] = k < musa_tensor_ndim(t0) && (u8(r) & 3) ? musa_tensor_shape(t0)[k]
                                                                   : (int64_t)pick(r, 5) - 1;
                else if (mode == 2)
                    v[k] = pick(r, 6);
                else /* a permutation-like list of dims */
                    v[k] = (k + pick(r, 2)) % (musa_tensor_ndim(t0) ? musa_tensor_ndim(t0) : 1);
            }
            rc = musa_attrs_set_ints(a, f->name, n, v);
            int len = snprintf(val, sizeof val, "%d: [", n);
            for (int k = 0; k < nn && len < 300; k++)
                len += snprintf(val + len, sizeof val - (size_t)len, "%lld ", (long long)v[k]);
            snprintf(val + len, sizeof val - (size_t)len, "]");
            may_fail = n < 0 || n > MUSA_MAX_ATTR_INTS;
            break;
        }
        }
        if (verbose)
            fprintf(stderr, "  attr %s = %s: %s\n", f->name, val, rc ? musa_last_error() : "ok");
        if (rc) {
            check_error("attrs_set", rc);
            if (!may_fail) FINDING("setting attribute '%s' failed: %s", f->name, musa_last_error());
        } else if (none ||
                   (may_fail && (f->type == MUSA_ATTR_INTS || f->type == MUSA_ATTR_DTYPE))) {
            FINDING("attribute '%s' took an invalid value", f->name);
        }
    }
    /* Fields the row does not have, or of another type, must be refused. */
    if (u8(r) == 255) {
        int rc = musa_attrs_set_int(a, "no_such_field", 1);
        if (!rc) FINDING("attrs_set_int accepted an unknown field");
        check_error("attrs_set_int", rc);
        if (d->fields[0].name && d->fields[0].type != MUSA_ATTR_FLOAT) {
            rc = musa_attrs_set_float(a, d->fields[0].name, 1.0);
            if (!rc) FINDING("attrs_set_float accepted field '%s'", d->fields[0].name);
            check_error("attrs_set_float", rc);
        }
    }
    return a;
}

/* ---- the call ---- */

/* Call op and check the contract; on success the fresh outputs are kept
 * (owned by s) and returned in outs. Returns the call's status. */
static int call(state *s, int op, int n_in, const musa_attrs *a, musa_tensor **outs) {
    bool fresh[FUZZ_SLOTS];
    for (int j = 0; j < FUZZ_SLOTS; j++) fresh[j] = outs[j] == NULL;
    musa_clear_error();
    if (verbose) {
        fprintf(stderr, "call %s, %d inputs\n", cur_op, n_in);
        for (int i = 0; i < n_in; i++) describe("input", i, s->in[i]);
        for (int j = 0; j < FUZZ_SLOTS; j++)
            if (outs[j]) describe("provided output", j, outs[j]);
    }
    int rc = musa_op_call(op, n_in, s->in, a, outs);
    if (verbose) fprintf(stderr, "  -> %s %s\n", musa_status_name(rc), rc ? musa_last_error() : "");
    int n_out = musa_op_num_outputs(op);
    if (rc) {
        check_error("op_call", rc);
        for (int j = 0; j < FUZZ_SLOTS; j++)
            if (fresh[j] && outs[j]) {
                FINDING("output %d was set by a failed call", j);
                musa_tensor_release(outs[j]);
                outs[j] = NULL;
            }
        return rc;
    }
    for (int j = 0; j < FUZZ_SLOTS; j++) {
        if (n_out > 0 && j < n_out && !outs[j]) FINDING("output %d is NULL after success", j);
        if (fresh[j] && outs[j]) keep(s, outs[j]);
        if (outs[j]) touch(outs[j]);
    }
    return rc;
}

/* Backward from the first floating output that has history. */
static void backward(reader *r, state *s, musa_tensor **outs) {
    musa_tensor *y = NULL;
    for (int j = 0; j < FUZZ_SLOTS && !y; j++)
        if (outs[j] && musa_tensor_grad_fn(outs[j])) y = outs[j];
    /* A view output may be huge (expand to 2^32 x 144 elements): summing it
     * is legitimate work, but not work a fuzzer can wait for. */
    if (!y || musa_tensor_numel(y) > FUZZ_MAX_NUMEL * 16) return;
    int kind = pick(r, 3);
    bool create = u8(r) & 1;
    if (verbose) fprintf(stderr, "backward kind %d%s\n", kind, create ? ", create_graph" : "");
    musa_clear_error();
    if (kind == 0) { /* backward of the sum: every output element gets gradient 1 */
        musa_tensor *root = keep(s, musa_sum(y, 0, NULL, false));
        if (!root) {
            check_error("sum", musa_last_error_code());
            return;
        }
        int rc = musa_backward(1, &root, NULL, false, create);
        if (rc) check_error("backward", rc);
    } else { /* grad with a given output gradient (maybe NaN/inf, maybe broadcast) */
        int64_t one = 1;
        musa_tensor *g = kind == 1 ? musa_ones_like(y)
                                   : musa_full(musa_tensor_ndim(y), musa_tensor_shape(y),
                                               attr_float(r), musa_tensor_dtype(y));
        if (kind == 2 && (u8(r) & 1)) { /* a zero-stride gradient */
            musa_tensor *e = g ? musa_full(1, &one, attr_float(r), musa_tensor_dtype(y)) : NULL;
            musa_tensor *x = e ? musa_expand(e, musa_tensor_ndim(y), musa_tensor_shape(y)) : NULL;
            musa_tensor_release(e);
            if (x) musa_tensor_release(g), g = x;
        }
        if (!keep(s, g)) {
            check_error("ones_like", musa_last_error_code());
            return;
        }
        musa_tensor *wrt[FUZZ_MAX_INPUTS + 1], *res[FUZZ_MAX_INPUTS + 1] = {NULL};
        int n = 0;
        for (int i = 0; i < s->n_in; i++)
            if (s->in[i] && musa_tensor_requires_grad(s->in[i])) wrt[n++] = s->in[i];
        if (!n) return;
        int rc = musa_grad(1, &y, &g, n, wrt, false, create, true, res);
        if (rc) check_error("grad", rc);
        for (int i = 0; i < n; i++) {
            touch(res[i]);
            musa_tensor_release(res[i]);
        }
    }
    for (int i = 0; i < s->n_in; i++) {
        if (!s->leaf[i] || !s->in[i]) continue;
        musa_tensor *g = musa_tensor_grad(s->in[i]);
        touch(g);
        musa_tensor_release(g);
    }
}

int fuzz_op_call_one(const uint8_t *data, size_t size) {
    reader rd = {data, size}, *r = &rd;
    state st, *s = &st;
    memset(s, 0, sizeof *s);
    findings = 0;
    musa_alloc_stats as;
    musa_alloc_get_stats(&as);
    size_t held = as.current_bytes; /* storages alive before the call */
    int op = u16(r) % musa_op_count();
    cur_op = musa_op_name(op);
    uint8_t flags = u8(r);
    s->seed = u64(r);
    bool grad = flags & 1, anomaly = (flags & 0xc0) == 0xc0;
    int out_mode = (flags >> 1) & 3;
    bool do_backward = grad && (flags & 8);

    int row_in = musa_op_num_inputs(op), n_in;
    uint8_t nb = u8(r);
    if (row_in < 0)
        n_in = nb % (FUZZ_MAX_INPUTS + 1);
    else if (nb >= 248)
        n_in = row_in + (nb & 1 ? 1 : -1);
    else
        n_in = row_in;
    if (n_in < 0) n_in = 0;
    s->n_in = n_in;
    for (int i = 0; i < n_in; i++) s->in[i] = make_input(r, s, i);

    musa_attrs *a = u8(r) == 255 ? NULL : make_attrs(r, s, op);

    bool prev_grad = musa_set_grad_enabled(grad);
    if (grad) {
        for (int i = 0; i < n_in; i++) {
            if (!s->leaf[i] || !s->in[i] || !(u8(r) & 3)) continue;
            musa_tensor *t = s->in[i];
            int rc = musa_tensor_set_requires_grad(t, true);
            if (rc) check_error("set_requires_grad", rc);
        }
    }
    if (anomaly) musa_set_anomaly_enabled(true, flags & 0x20);

    musa_tensor *outs[FUZZ_SLOTS] = {NULL};
    int n_slots = musa_op_num_outputs(op) < 0 ? FUZZ_SLOTS : musa_op_num_outputs(op);
    if (out_mode == 1) { /* in place: output j is input j */
        for (int j = 0; j < n_slots && j < n_in; j++) outs[j] = s->in[j];
    } else if (out_mode == 3) { /* provided outputs of any shape and dtype */
        for (int j = 0; j < n_slots; j++) {
            if (u8(r) & 1) continue;
            s->in[FUZZ_MAX_INPUTS] = NULL;
            outs[j] = make_input(r, s, FUZZ_MAX_INPUTS);
        }
    }
    int rc = call(s, op, n_in, a, outs);
    if (!rc && out_mode == 2) { /* again, writing into provided outputs */
        musa_tensor *outs2[FUZZ_SLOTS] = {NULL};
        for (int j = 0; j < n_slots; j++) {
            musa_tensor *o = outs[j];
            if (!o) continue;
            switch (pick(r, 4)) {
            case 0:
                outs2[j] = o;
                break;
            case 1: /* same shape, another dtype */
                outs2[j] =
                    keep(s, musa_zeros(musa_tensor_ndim(o), musa_tensor_shape(o), pick_dtype(r)));
                break;
            case 2: { /* a non-contiguous tensor of that shape */
                int nd = musa_tensor_ndim(o);
                if (nd < 2) break;
                int64_t sh[MUSA_MAX_DIMS];
                memcpy(sh, musa_tensor_shape(o), sizeof(int64_t) * (size_t)nd);
                int64_t t = sh[0];
                sh[0] = sh[nd - 1], sh[nd - 1] = t;
                musa_tensor *b = keep(s, musa_zeros(nd, sh, musa_tensor_dtype(o)));
                outs2[j] = b ? keep(s, musa_transpose(b, 0, nd - 1)) : NULL;
                break;
            }
            default:
                break; /* fresh */
            }
        }
        call(s, op, n_in, a, outs2);
    }
    if (do_backward && !rc) backward(r, s, outs);

    if (anomaly) musa_set_anomaly_enabled(false, false);
    musa_set_grad_enabled(prev_grad);
    musa_attrs_free(a);
    /* A create_graph gradient refers back to its leaf (a cycle, as in
     * PyTorch): clearing .grad breaks it. */
    for (int k = 0; k < s->n_owned; k++)
        if (musa_tensor_requires_grad(s->owned[k])) musa_tensor_set_grad(s->owned[k], NULL);
    for (int k = s->n_owned - 1; k >= 0; k--) musa_tensor_release(s->owned[k]);
    /* Every tensor is released: a storage still held belongs to a tensor
     * something leaked (e.g. a reference cycle through autograd). */
    musa_alloc_get_stats(&as);
    if (as.current_bytes != held)
        FINDING("%zu bytes of storage still held after every tensor was released",
                as.current_bytes - held);
    if (as.cached_bytes > ((size_t)64 << 20)) musa_alloc_empty_cache();
    musa_clear_error();
    return findings;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    verbose = getenv("FUZZ_VERBOSE") && atoi(getenv("FUZZ_VERBOSE"));
    musa_set_num_threads(1);
    musa_manual_seed(0);
    return 0;
}

#ifdef MUSA_FUZZ_MAIN /* the fuzzer binary; test_fuzz links the harness without it */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (fuzz_op_call_one(data, size)) abort();
    return 0;
}
#endif
