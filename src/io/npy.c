/*
 * npy.c - NumPy's .npy files (format versions 1.0, 2.0 and 3.0): the
 * inputs and outputs of musa-run, and of C programs that trade arrays with
 * Python.
 *
 * The reader trusts nothing: the header must be the dict NumPy writes
 * ('descr', 'fortran_order', 'shape', in any order, nothing else), the
 * dtype one musa has, every dim a non-negative integer whose product (with
 * the element size) does not overflow, and the data exactly as long as the
 * shape says. Errors name the file and what is wrong. Fortran-ordered
 * arrays load as the transposed layout, copied to row-major.
 */
#include <errno.h>
#include <stdio.h>

#include "../base/sbuf.h"
#include "../tensor/tensor.h"

#define NPY_MAX_HEADER (1 << 16)

static const char *READ = "musa_npy_read";

/* descr <-> dtype: little-endian or byte-sized types only */
static const struct {
    const char *descr;
    musa_dtype dtype;
} DESCRS[] = {
    {"<f4", MUSA_DTYPE_FLOAT32}, {"<f8", MUSA_DTYPE_FLOAT64}, {"<f2", MUSA_DTYPE_FLOAT16},
    {"<i8", MUSA_DTYPE_INT64},   {"<i4", MUSA_DTYPE_INT32},   {"|i1", MUSA_DTYPE_INT8},
    {"|u1", MUSA_DTYPE_UINT8},   {"|b1", MUSA_DTYPE_BOOL},    {"<i2", MUSA_DTYPE_INT16},
};

typedef struct cursor {
    const char *p, *end;
} cursor;

static void ws(cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n')) c->p++;
}

static bool eat(cursor *c, char ch) {
    ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

/* A Python string literal ('...' or "...", no escapes) into buf. */
static bool str_lit(cursor *c, char *buf, size_t n) {
    ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return false;
    char q = *c->p++;
    size_t k = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || k + 1 >= n) return false;
        buf[k++] = *c->p++;
    }
    if (c->p >= c->end) return false;
    c->p++;
    buf[k] = 0;
    return true;
}

static bool int_lit(cursor *c, int64_t *v) {
    ws(c);
    const char *s = c->p;
    int64_t x = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        if (!musa_mul_i64(x, 10, &x) || !musa_add_i64(x, *c->p - '0', &x)) return false;
        c->p++;
    }
    if (c->p < c->end && *c->p == 'L') c->p++; /* Python 2's long suffix */
    *v = x;
    return c->p > s;
}

static musa_tensor *bad(const char *name, const char *what) {
    musa_err(MUSA_ERR_IO, "[%s] %s: %s", READ, name, what);
    return NULL;
}

static musa_tensor *parse(const char *name, const unsigned char *b, size_t n) {
    if (n < 10 || memcmp(b, "\x93NUMPY", 6)) return bad(name, "not a .npy file (bad magic)");
    unsigned major = b[6];
    size_t hlen, off;
    if (major == 1) {
        hlen = (size_t)b[8] | (size_t)b[9] << 8, off = 10;
    } else if (major == 2 || major == 3) {
        if (n < 12) return bad(name, "truncated header");
        hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
        off = 12;
    } else {
        char msg[64];
        snprintf(msg, sizeof msg, "format version %u.%u is not supported", major, b[7]);
        return bad(name, msg);
    }
    if (hlen > NPY_MAX_HEADER || hlen > n - off) return bad(name, "header longer than the file");
    cursor c = {(const char *)b + off, (const char *)b + off + hlen};
    char descr[16] = "", key[32];
    int64_t shape[MUSA_MAX_DIMS];
    int ndim = -1, fortran = -1;
    if (!eat(&c, '{')) return bad(name, "the header is not a dict");
    while (!eat(&c, '}')) {
        if (!str_lit(&c, key, sizeof key) || !eat(&c, ':'))
            return bad(name, "the header is not NumPy's dict");
        if (!strcmp(key, "descr") && !descr[0]) {
            if (!str_lit(&c, descr, sizeof descr))
                return bad(name, "'descr' must be a dtype string");
        } else if (!strcmp(key, "fortran_order") && fortran < 0) {
            ws(&c);
            size_t left = (size_t)(c.end - c.p);
            if (left >= 4 && !memcmp(c.p, "True", 4))
                fortran = 1, c.p += 4;
            else if (left >= 5 && !memcmp(c.p, "False", 5))
                fortran = 0, c.p += 5;
            else
                return bad(name, "'fortran_order' must be True or False");
        } else if (!strcmp(key, "shape") && ndim < 0) {
            if (!eat(&c, '(')) return bad(name, "'shape' must be a tuple");
            ndim = 0;
            while (!eat(&c, ')')) {
                if (ndim == MUSA_MAX_DIMS) return bad(name, "more than 8 dims");
                if (!int_lit(&c, &shape[ndim]))
                    return bad(name, "'shape' holds something other than non-negative integers");
                ndim++;
                if (!eat(&c, ',')) {
                    if (!eat(&c, ')')) return bad(name, "'shape' must be a tuple");
                    break;
                }
            }
        } else {
            return bad(name, "the header has an unknown or repeated key");
        }
        if (!eat(&c, ',')) {
            if (!eat(&c, '}')) return bad(name, "the header is not NumPy's dict");
            break;
        }
    }
    if (!descr[0] || fortran < 0 || ndim < 0)
        return bad(name, "the header lacks 'descr', 'fortran_order' or 'shape'");
    int dt = -1;
    for (int i = 0; i < MUSA_ARRAY_LEN(DESCRS); i++)
        if (!strcmp(descr, DESCRS[i].descr)) dt = (int)DESCRS[i].dtype;
    if (dt < 0) {
        char msg[96];
        snprintf(msg, sizeof msg, "dtype '%s' is not supported (little-endian floats, ints, bool)",
                 descr);
        return bad(name, msg);
    }
    int64_t numel;
    size_t bytes, es = musa_dtype_info[dt].size;
    int64_t prod = 1;
    for (int d = 0; d < ndim; d++)
        if (shape[d] && !musa_mul_i64(prod, shape[d], &prod))
            return bad(name, "the shape's element count overflows");
    if (musa_shape_check(READ, ndim, shape, &numel) || !musa_mul_size((size_t)numel, es, &bytes))
        return bad(name, "the shape's element count overflows");
    if (n - off - hlen != bytes) {
        char msg[128];
        snprintf(msg, sizeof msg, "the data is %zu bytes; the shape needs %zu", n - off - hlen,
                 bytes);
        return bad(name, msg);
    }
    const unsigned char *data = b + off + hlen;
    if (!fortran || ndim < 2) return musa_from_data(data, ndim, shape, (musa_dtype)dt);
    /* Fortran order: the reversed shape row-major, transposed back */
    int64_t rev[MUSA_MAX_DIMS];
    for (int d = 0; d < ndim; d++) rev[d] = shape[ndim - 1 - d];
    musa_tensor *t = musa_from_data(data, ndim, rev, (musa_dtype)dt);
    int64_t perm[MUSA_MAX_DIMS];
    for (int d = 0; d < ndim; d++) perm[d] = ndim - 1 - d;
    musa_tensor *p = t ? musa_permute(t, ndim, perm) : NULL;
    musa_tensor *r = p ? musa_contiguous(p) : NULL;
    musa_tensor_release(p), musa_tensor_release(t);
    return r;
}

musa_tensor *musa_npy_read_memory(const void *data, size_t size) {
    if (!data && size) return bad("<memory>", "data is NULL");
    return parse("<memory>", data, size);
}

musa_tensor *musa_npy_load(const char *path) {
    if (!path) return bad("(null)", "path is NULL");
    FILE *f = fopen(path, "rb");
    if (!f) {
        musa_err(MUSA_ERR_IO, "[%s] cannot open %s: %s", READ, path, strerror(errno));
        return NULL;
    }
    musa_sbuf b = {0};
    char chunk[65536];
    size_t k;
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0) musa_sb_put(&b, chunk, k);
    bool err = ferror(f);
    fclose(f);
    size_t len = b.len;
    char *all = musa_sb_finish(&b, READ);
    if (!all) return NULL;
    musa_tensor *t = err ? bad(path, "read error") : parse(path, (const unsigned char *)all, len);
    free(all);
    return t;
}

int musa_npy_save(const char *path, const musa_tensor *t) {
    static const char *who = "musa_npy_save";
    if (!path || !t) return musa_err(MUSA_ERR_VALUE, "[%s] path and tensor must be given", who);
    const char *descr = NULL;
    for (int i = 0; i < MUSA_ARRAY_LEN(DESCRS); i++)
        if ((int)DESCRS[i].dtype == t->dtype) descr = DESCRS[i].descr;
    if (!descr)
        return musa_err(MUSA_ERR_TYPE, "[%s] NumPy has no %s", who,
                        musa_dtype_name((musa_dtype)t->dtype));
    musa_tensor *c = musa_contiguous((musa_tensor *)t);
    if (!c) return musa_last_error_code();
    musa_sbuf h = {0};
    musa_sb_printf(&h, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int d = 0; d < t->ndim; d++)
        musa_sb_printf(&h, "%lld%s", (long long)t->shape[d],
                       t->ndim == 1      ? ","
                       : d + 1 < t->ndim ? ", "
                                         : "");
    musa_sb_printf(&h, "), }");
    while ((10 + h.len + 1) % 64) musa_sb_put(&h, " ", 1);
    musa_sb_put(&h, "\n", 1);
    size_t hl = h.len;
    char *header = musa_sb_finish(&h, who);
    int rc = MUSA_OK;
    FILE *f = header ? fopen(path, "wb") : NULL;
    if (!header)
        rc = MUSA_ERR_NOMEM;
    else if (!f)
        rc = musa_err(MUSA_ERR_IO, "[%s] cannot create %s: %s", who, path, strerror(errno));
    else {
        unsigned char pre[10] = {0x93,
                                 'N',
                                 'U',
                                 'M',
                                 'P',
                                 'Y',
                                 1,
                                 0,
                                 (unsigned char)(hl & 0xff),
                                 (unsigned char)(hl >> 8)};
        size_t bytes = (size_t)c->numel * musa_dtype_info[c->dtype].size;
        if (fwrite(pre, 1, 10, f) != 10 || fwrite(header, 1, hl, f) != hl ||
            (bytes && fwrite(musa_tensor_data(c), 1, bytes, f) != bytes))
            rc = musa_err(MUSA_ERR_IO, "[%s] writing %s: %s", who, path, strerror(errno));
        if (fclose(f) && !rc)
            rc = musa_err(MUSA_ERR_IO, "[%s] writing %s: %s", who, path, strerror(errno));
    }
    free(header);
    musa_tensor_release(c);
    return rc;
}
