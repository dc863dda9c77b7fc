/*
 * file.c - the .musa container (docs/format.md): the writer, with its
 * atomic save, and the reader that validates everything before it
 * allocates a tensor.
 *
 * Layout: a 64-byte prelude (magic, version, section lengths, CRCs), the
 * header (UTF-8 JSON: the storages, the tensors that view them, and what
 * the file's kind keeps), zero padding to 64 bytes, then the data section:
 * each storage's bytes at a 64-byte aligned offset, zero padding between.
 * Three CRC-32C: of the prelude, of the header, of the data section.
 *
 * Invariants of a musa_file: every storage lies inside the data section
 * without overlap; every tensor's addressable elements lie inside its
 * storage; all CRCs matched. The tensors are made once, at open, as views
 * of their storages (so views and shared storages come back shared); with
 * MUSA_FILE_MMAP the storages are the mapped file itself (copy-on-write:
 * writing a loaded tensor never changes the file), else copies.
 */
#include "file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/sbuf.h"
#include "../base/vec.h"
#include "../tensor/tensor.h"
#include "crc32c.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the .musa reader and writer assume a little-endian host"
#endif

static const unsigned char MAGIC[8] = {0x89, 'M', 'U', 'S', 'A', '\r', '\n', 0x1a};
#define FORMAT_VERSION 1
#define ALIGN          64

enum { /* prelude fields: byte offsets */
       P_VERSION = 8,
       P_FLAGS = 12,
       P_HEADER_LEN = 16,
       P_DATA_OFF = 24,
       P_DATA_LEN = 32,
       P_HEADER_CRC = 40,
       P_DATA_CRC = 44,
       P_PRELUDE_CRC = 48, /* of bytes [0, 48) */
       P_RESERVED = 52,    /* 12 zero bytes */
};

static uint64_t align_up(uint64_t x) {
    return (x + ALIGN - 1) & ~(uint64_t)(ALIGN - 1);
}

static uint32_t rd32(const unsigned char *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static uint64_t rd64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Whether every dim of a shape, zeros left out, multiplies within int64 (a
 * zero does not excuse an overflowing product of the other dims). */
static bool shape_ok(int ndim, const int64_t *shape, int64_t *numel) {
    int64_t prod = 1;
    bool zero = false;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return false;
        if (shape[i] == 0)
            zero = true;
        else if (!musa_mul_i64(prod, shape[i], &prod))
            return false;
    }
    *numel = zero ? 0 : prod;
    return true;
}

/* The one past the last element a layout addresses (offset when empty), or
 * -1 when the arithmetic overflows. */
static int64_t layout_end(int ndim, const int64_t *shape, const int64_t *strides, int64_t offset,
                          int64_t numel) {
    if (numel == 0) return offset;
    int64_t last = offset, step;
    for (int i = 0; i < ndim; i++)
        if (strides[i] < 0 || !musa_mul_i64(shape[i] - 1, strides[i], &step) ||
            !musa_add_i64(last, step, &last))
            return -1;
    return last == INT64_MAX ? -1 : last + 1;
}

/* ======================================================================== */
/* Writing                                                                  */
/* ======================================================================== */

typedef struct wstorage {
    const musa_storage *s; /* identity */
    int dtype;
    int64_t lo, hi; /* elements [lo, hi) of it that the file keeps */
    uint64_t off;   /* bytes from the data section's start */
} wstorage;

typedef struct wtensor {
    musa_tensor *t; /* retained */
    int32_t storage;
} wtensor;

typedef struct wsection {
    char *key, *json;
} wsection;

struct musa_file_writer {
    char kind[33];
    MUSA_VEC(wstorage) storages;
    MUSA_VEC(wtensor) tensors;
    MUSA_VEC(wsection) sections;
    musa_map by_storage;               /* storage address -> its index in storages */
    musa_map by_tensor;                /* tensor address -> its index in tensors */
    MUSA_VEC(int64_t) next_on_storage; /* per tensor: the previous tensor on its storage, or -1 */
    MUSA_VEC(int64_t) last_on_storage; /* per storage: its last tensor */
};

static bool kind_ok(const char *kind) {
    size_t n = kind ? strlen(kind) : 0;
    if (n == 0 || n > 32) return false;
    for (size_t i = 0; i < n; i++)
        if (!((kind[i] >= 'a' && kind[i] <= 'z') || kind[i] == '_')) return false;
    return true;
}

musa_file_writer *musa_file_writer_new(const char *kind) {
    if (!kind_ok(kind)) {
        musa_err(MUSA_ERR_VALUE,
                 "[musa_file_writer_new] kind \"%.40s\" is not 1 to 32 of a-z and _",
                 kind ? kind : "(null)");
        return NULL;
    }
    musa_file_writer *w = musa_calloc(1, sizeof *w, "musa_file_writer_new");
    if (w) snprintf(w->kind, sizeof w->kind, "%s", kind);
    return w;
}

void musa_file_writer_free(musa_file_writer *w) {
    if (!w) return;
    for (int64_t i = 0; i < w->tensors.len; i++) musa_tensor_release(w->tensors.data[i].t);
    for (int64_t i = 0; i < w->sections.len; i++)
        free(w->sections.data[i].key), free(w->sections.data[i].json);
    musa_vec_free(&w->storages);
    musa_vec_free(&w->tensors);
    musa_vec_free(&w->sections);
    musa_map_free(&w->by_storage);
    musa_map_free(&w->by_tensor);
    musa_vec_free(&w->next_on_storage);
    musa_vec_free(&w->last_on_storage);
    free(w);
}

int64_t musa_file_writer_add_tensor(musa_file_writer *w, const musa_tensor *t) {
    static const char *who = "musa_file_writer_add_tensor";
    if (!w || !t) return musa_err(MUSA_ERR_VALUE, "[%s] %s is NULL", who, w ? "tensor" : "writer");
    if (!t->storage) return musa_err(MUSA_ERR_VALUE, "[%s] a meta tensor has no data to save", who);
    if (w->tensors.len >= MUSA_FILE_MAX_TENSORS)
        return musa_err(MUSA_ERR_VALUE, "[%s] a file holds at most %d tensors", who,
                        MUSA_FILE_MAX_TENSORS);
    /* The same tensor, or one of the same layout on the same storage, is
     * one entry (maps: a writer of many tensors stays linear). */
    uint64_t *known = musa_map_get(&w->by_tensor, (uint64_t)(uintptr_t)t);
    if (known) return (int64_t)*known;
    uint64_t *sp = musa_map_get(&w->by_storage, (uint64_t)(uintptr_t)t->storage);
    int32_t s = sp ? (int32_t)*sp : -1;
    if (s >= 0) {
        for (int64_t i = w->last_on_storage.data[s]; i >= 0; i = w->next_on_storage.data[i]) {
            const musa_tensor *u = w->tensors.data[i].t;
            if (u->dtype == t->dtype && musa_tensor_same_layout(u, t)) return i;
        }
        if (w->storages.data[s].dtype != t->dtype)
            return musa_err(MUSA_ERR_TYPE,
                            "[%s] a %s tensor shares storage with a %s tensor added before; a "
                            "file keeps one dtype per storage",
                            who, musa_dtype_name((musa_dtype)t->dtype),
                            musa_dtype_name((musa_dtype)w->storages.data[s].dtype));
    }
    int64_t end = layout_end(t->ndim, t->shape, t->strides, t->offset, t->numel);
    if (s < 0) {
        wstorage ws = {.s = t->storage, .dtype = t->dtype, .lo = INT64_MAX, .hi = 0};
        if (musa_vec_push(&w->storages, ws) || musa_vec_push(&w->last_on_storage, (int64_t)-1) ||
            musa_map_put(&w->by_storage, (uint64_t)(uintptr_t)t->storage,
                         (uint64_t)(w->storages.len - 1)))
            return musa_err_nomem(who, sizeof ws);
        s = (int32_t)(w->storages.len - 1);
    }
    wstorage *ws = &w->storages.data[s];
    if (t->numel > 0) {
        ws->lo = MUSA_MIN(ws->lo, t->offset);
        ws->hi = MUSA_MAX(ws->hi, end);
    }
    if (musa_vec_reserve(&w->tensors, w->tensors.len + 1) ||
        musa_vec_push(&w->next_on_storage, w->last_on_storage.data[s]) ||
        musa_map_put(&w->by_tensor, (uint64_t)(uintptr_t)t, (uint64_t)w->tensors.len))
        return musa_err_nomem(who, sizeof(wtensor));
    w->last_on_storage.data[s] = w->tensors.len;
    wtensor wt = {.t = (musa_tensor *)t, .storage = s};
    w->tensors.data[w->tensors.len++] = wt; /* room reserved above */
    musa_tensor_retain((musa_tensor *)t);
    return w->tensors.len - 1;
}

int musa_file_writer_set_json(musa_file_writer *w, const char *key, const char *json) {
    static const char *who = "musa_file_writer_set_json";
    if (!w || !key || !json)
        return musa_err(MUSA_ERR_VALUE, "[%s] writer, key and json must not be NULL", who);
    if (!kind_ok(key) || !strcmp(key, "kind") || !strcmp(key, "storages") ||
        !strcmp(key, "tensors"))
        return musa_err(MUSA_ERR_VALUE,
                        "[%s] key \"%.40s\" must be 1 to 32 of a-z and _, and not kind, storages "
                        "or tensors",
                        who, key);
    /* Only what the reader accepts may be written. */
    /* as the reader will see it: one level down, inside the header object */
    size_t n = strlen(json);
    char *wrapped = musa_malloc(n + 3, who);
    if (!wrapped) return MUSA_ERR_NOMEM;
    wrapped[0] = '[';
    memcpy(wrapped + 1, json, n);
    wrapped[n + 1] = ']', wrapped[n + 2] = 0;
    musa_arena a;
    musa_arena_init(&a, 0);
    const musa_json *root;
    char why[160];
    int rc = musa_json_parse(&a, wrapped, n + 2, &root, why, sizeof why);
    musa_arena_free(&a);
    free(wrapped);
    if (rc) return musa_err(MUSA_ERR_VALUE, "[%s] \"%s\" is not valid JSON: %s", who, key, why);
    for (int64_t i = 0; i < w->sections.len; i++)
        if (!strcmp(w->sections.data[i].key, key)) {
            char *j = strdup(json);
            if (!j) return musa_err_nomem(who, strlen(json));
            free(w->sections.data[i].json);
            w->sections.data[i].json = j;
            return MUSA_OK;
        }
    wsection sec = {strdup(key), strdup(json)};
    if (!sec.key || !sec.json || musa_vec_push(&w->sections, sec)) {
        free(sec.key), free(sec.json);
        return musa_err_nomem(who, strlen(json));
    }
    return MUSA_OK;
}

static char *header_json(musa_file_writer *w) {
    musa_sbuf b = {0};
    musa_sb_printf(&b, "{\"kind\": \"%s\", \"storages\": [", w->kind);
    uint64_t off = 0;
    for (int64_t i = 0; i < w->storages.len; i++) {
        wstorage *s = &w->storages.data[i];
        if (s->lo > s->hi) s->lo = s->hi = 0; /* only empty tensors view it */
        s->off = off;
        off = align_up(off + (uint64_t)(s->hi - s->lo) * musa_dtype_info[s->dtype].size);
        musa_sb_printf(&b, "%s{\"dtype\": \"%s\", \"numel\": %lld, \"offset\": %llu}",
                       i ? ", " : "", musa_dtype_name((musa_dtype)s->dtype),
                       (long long)(s->hi - s->lo), (unsigned long long)s->off);
    }
    musa_sb_printf(&b, "], \"tensors\": [");
    for (int64_t i = 0; i < w->tensors.len; i++) {
        const musa_tensor *t = w->tensors.data[i].t;
        const wstorage *s = &w->storages.data[w->tensors.data[i].storage];
        int64_t off_el = t->numel ? t->offset - s->lo : 0;
        musa_sb_printf(&b, "%s{\"storage\": %d, \"offset\": %lld, \"shape\": [", i ? ", " : "",
                       w->tensors.data[i].storage, (long long)off_el);
        for (int d = 0; d < t->ndim; d++)
            musa_sb_printf(&b, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
        musa_sb_printf(&b, "], \"strides\": [");
        for (int d = 0; d < t->ndim; d++)
            musa_sb_printf(&b, "%s%lld", d ? ", " : "", (long long)t->strides[d]);
        musa_sb_printf(&b, "]}");
    }
    musa_sb_printf(&b, "]");
    for (int64_t i = 0; i < w->sections.len; i++)
        musa_sb_printf(&b, ", \"%s\": %s", w->sections.data[i].key, w->sections.data[i].json);
    musa_sb_printf(&b, "}");
    return musa_sb_finish(&b, "musa_file_writer_save");
}

static int write_all(int fd, const void *p, size_t n, const char *tmp) {
    const char *c = p;
    while (n) {
        ssize_t k = write(fd, c, n > (1u << 30) ? (1u << 30) : n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0)
            return musa_err(MUSA_ERR_IO, "[musa_file_writer_save] writing %s: %s", tmp,
                            k < 0 ? strerror(errno) : "no progress");
        c += k, n -= (size_t)k;
    }
    return MUSA_OK;
}

static const unsigned char ZEROS[ALIGN];

/* Write the file's bytes to fd; the prelude last (it holds the CRCs). */
static int write_file(musa_file_writer *w, int fd, const char *tmp) {
    char *header = header_json(w);
    if (!header) return MUSA_ERR_NOMEM;
    size_t hlen = strlen(header);
    int rc = MUSA_OK;
    if (hlen > MUSA_FILE_MAX_HEADER) {
        rc =
            musa_err(MUSA_ERR_VALUE,
                     "[musa_file_writer_save] the header is %zu bytes; a reader accepts at most %u",
                     hlen, MUSA_FILE_MAX_HEADER);
        goto done;
    }
    uint64_t data_off = align_up(MUSA_FILE_PRELUDE + hlen), data_len = 0;
    unsigned char pre[MUSA_FILE_PRELUDE] = {0};
    if ((rc = write_all(fd, pre, sizeof pre, tmp)) || (rc = write_all(fd, header, hlen, tmp)) ||
        (rc = write_all(fd, ZEROS, data_off - MUSA_FILE_PRELUDE - hlen, tmp)))
        goto done;
    uint32_t dcrc = 0;
    for (int64_t i = 0; i < w->storages.len; i++) {
        const wstorage *s = &w->storages.data[i];
        size_t es = musa_dtype_info[s->dtype].size, n = (size_t)(s->hi - s->lo) * es;
        if (s->off > data_len) { /* padding up to this storage */
            size_t pad = (size_t)(s->off - data_len);
            dcrc = musa_crc32c(dcrc, ZEROS, pad);
            if ((rc = write_all(fd, ZEROS, pad, tmp))) goto done;
            data_len = s->off;
        }
        const char *src = (const char *)s->s->data + (size_t)s->lo * es;
        dcrc = musa_crc32c(dcrc, src, n);
        if ((rc = write_all(fd, src, n, tmp))) goto done;
        data_len += n;
    }
    memcpy(pre, MAGIC, 8);
    uint32_t v32 = FORMAT_VERSION, hcrc = musa_crc32c(0, header, hlen);
    uint64_t hl = hlen;
    memcpy(pre + P_VERSION, &v32, 4);
    memcpy(pre + P_HEADER_LEN, &hl, 8);
    memcpy(pre + P_DATA_OFF, &data_off, 8);
    memcpy(pre + P_DATA_LEN, &data_len, 8);
    memcpy(pre + P_HEADER_CRC, &hcrc, 4);
    memcpy(pre + P_DATA_CRC, &dcrc, 4);
    uint32_t pcrc = musa_crc32c(0, pre, P_PRELUDE_CRC);
    memcpy(pre + P_PRELUDE_CRC, &pcrc, 4);
    if (lseek(fd, 0, SEEK_SET) != 0) {
        rc = musa_err(MUSA_ERR_IO, "[musa_file_writer_save] seeking in %s: %s", tmp,
                      strerror(errno));
        goto done;
    }
    rc = write_all(fd, pre, sizeof pre, tmp);
done:
    free(header);
    return rc;
}

int musa_file_writer_save(musa_file_writer *w, const char *path) {
    static const char *who = "musa_file_writer_save";
    if (!w || !path || !*path)
        return musa_err(MUSA_ERR_VALUE, "[%s] writer and path must be given", who);
    /* A temporary file in the target's folder, so the rename stays within
     * one file system and is atomic. */
    size_t n = strlen(path);
    char *tmp = musa_malloc(n + 16, who), *dir = musa_malloc(n + 2, who);
    if (!tmp || !dir) {
        free(tmp), free(dir);
        return MUSA_ERR_NOMEM;
    }
    snprintf(tmp, n + 16, "%s.tmp.XXXXXX", path);
    const char *slash = strrchr(path, '/');
    if (slash)
        snprintf(dir, n + 2, "%.*s", (int)(slash - path + 1), path);
    else
        snprintf(dir, n + 2, ".");
    int rc = MUSA_OK, fd = mkstemp(tmp);
    if (fd < 0) {
        rc = musa_err(MUSA_ERR_IO, "[%s] cannot create a temporary file next to %s: %s", who, path,
                      strerror(errno));
        goto out;
    }
    mode_t mask = umask(0);
    umask(mask);
    if (fchmod(fd, 0666 & ~mask) || (rc = write_file(w, fd, tmp)) || fsync(fd)) {
        if (!rc) rc = musa_err(MUSA_ERR_IO, "[%s] writing %s: %s", who, tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        goto out;
    }
    if (close(fd) || rename(tmp, path)) {
        rc = musa_err(MUSA_ERR_IO, "[%s] cannot put %s in place: %s", who, path, strerror(errno));
        unlink(tmp);
        goto out;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) { /* make the rename durable; a folder that cannot be synced is no error */
        (void)fsync(dfd);
        close(dfd);
    }
out:
    free(tmp), free(dir);
    return rc;
}

/* ======================================================================== */
/* Reading                                                                  */
/* ======================================================================== */

/* The bytes of an open file: a mapping shared by the file and every storage
 * made from it, freed with the last. */
typedef struct mapping {
    atomic_int refs;
    void *addr;
    size_t len;
    bool mapped; /* munmap, else free */
} mapping;

static void mapping_release(void *ctx) {
    mapping *m = ctx;
    if (!m || atomic_fetch_sub(&m->refs, 1) != 1) return;
    if (m->mapped)
        munmap(m->addr, m->len);
    else
        free(m->addr);
    free(m);
}

typedef struct rstorage {
    int dtype;
    int64_t numel;
    uint64_t off;
    const musa_json *at;
} rstorage;

struct musa_file {
    char name[256]; /* for messages: the path (shortened) or "<memory>" */
    musa_arena arena;
    const musa_json *root;
    char *header; /* NUL-terminated copy of the header text */
    const char *kind;
    int64_t n_tensors;
    musa_tensor **tensors;
};

static int bad_at(const char *name, const char *who, size_t off, const char *what, const char *fmt,
                  va_list ap) {
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    return musa_err(MUSA_ERR_IO, "[%s] %s: %s at byte %zu: %s", who, name, what, off, msg);
}

static int bad_file(const char *name, const char *who, size_t off, const char *what,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int bad_file(const char *name, const char *who, size_t off, const char *what,
                    const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = bad_at(name, who, off, what, fmt, ap);
    va_end(ap);
    return rc;
}

int musa_file_bad(const musa_file *f, const char *who, const musa_json *at, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = bad_at(f->name, who, MUSA_FILE_PRELUDE + (at ? at->off : 0), "header", fmt, ap);
    va_end(ap);
    return rc;
}

int musa_file_int(const musa_file *f, const char *who, const musa_json *v, const char *what,
                  int64_t lo, int64_t hi, int64_t *out) {
    if (!v) return musa_file_bad(f, who, NULL, "%s is missing", what);
    if (v->type != MUSA_JSON_NUMBER || !v->is_int)
        return musa_file_bad(f, who, v, "%s must be an integer, not a%s %s", what,
                             v->type == MUSA_JSON_ARRAY || v->type == MUSA_JSON_OBJECT ? "n" : "",
                             v->type == MUSA_JSON_NUMBER ? "fraction or huge number"
                                                         : musa_json_type_name(v->type));
    if (v->i < lo || v->i > hi)
        return musa_file_bad(f, who, v, "%s is %lld, outside [%lld, %lld]", what, (long long)v->i,
                             (long long)lo, (long long)hi);
    *out = v->i;
    return MUSA_OK;
}

static const char *WHO = "musa_file_open";

/* An array member of the header (may be empty), or an error. */
static int array_member(const musa_file *f, const char *key, const musa_json **out) {
    const musa_json *v = musa_json_get(f->root, key);
    if (!v) return musa_file_bad(f, WHO, f->root, "the header has no \"%s\"", key);
    if (v->type != MUSA_JSON_ARRAY)
        return musa_file_bad(f, WHO, v, "\"%s\" must be an array, not %s", key,
                             musa_json_type_name(v->type));
    if (v->n > MUSA_FILE_MAX_TENSORS)
        return musa_file_bad(f, WHO, v, "%d %s is more than the %d a file may hold", v->n, key,
                             MUSA_FILE_MAX_TENSORS);
    *out = v;
    return MUSA_OK;
}

int musa_file_check_keys(const musa_file *f, const char *who, const musa_json *o, const char *what,
                         const char *const *keys, int n) {
    for (int32_t i = 0; i < o->n; i++) {
        bool known = false;
        for (int k = 0; k < n; k++) known |= !strcmp(o->key[i], keys[k]);
        if (!known)
            return musa_file_bad(f, who, &o->kid[i], "%s has an unknown member \"%.40s\"", what,
                                 o->key[i]);
    }
    return MUSA_OK;
}

static int cmp_storage_off(const void *a, const void *b) {
    const rstorage *x = *(rstorage *const *)a, *y = *(rstorage *const *)b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* The storages: dtype, numel and offset each; inside the data section, 64-byte aligned,
 * not overlapping. */
static int read_storages(const musa_file *f, const unsigned char *data, uint64_t data_len,
                         rstorage **out, int32_t *n_out) {
    const musa_json *arr;
    int rc = array_member(f, "storages", &arr);
    if (rc) return rc;
    rstorage *st = MUSA_ARENA_NEW((musa_arena *)&f->arena, rstorage, arr->n + 1);
    rstorage **order = malloc(sizeof(rstorage *) * (size_t)(arr->n + 1));
    if (!st || !order) {
        free(order);
        return musa_err_nomem(WHO, sizeof(rstorage) * (size_t)arr->n);
    }
    static const char *const keys[] = {"dtype", "numel", "offset"};
    for (int32_t i = 0; i < arr->n && !rc; i++) {
        const musa_json *s = &arr->kid[i], *dt = musa_json_get(s, "dtype");
        char what[64];
        snprintf(what, sizeof what, "storages[%d]", i);
        if (s->type != MUSA_JSON_OBJECT) {
            rc = musa_file_bad(f, WHO, s, "%s must be an object", what);
            break;
        }
        if ((rc = musa_file_check_keys(f, WHO, s, what, keys, 3))) break;
        if (!dt || dt->type != MUSA_JSON_STRING) {
            rc = musa_file_bad(f, WHO, dt ? dt : s, "%s.dtype must be a string", what);
            break;
        }
        int d = musa_dtype_from_name(dt->str);
        if (d < 0) {
            rc = musa_file_bad(f, WHO, dt, "%s has unknown dtype \"%.40s\"", what, dt->str);
            break;
        }
        size_t es = musa_dtype_info[d].size;
        int64_t numel, off;
        snprintf(what, sizeof what, "storages[%d].numel", i);
        if ((rc = musa_file_int(f, WHO, musa_json_get(s, "numel"), what, 0,
                                (int64_t)(data_len / es), &numel)))
            break;
        snprintf(what, sizeof what, "storages[%d].offset", i);
        if ((rc = musa_file_int(f, WHO, musa_json_get(s, "offset"), what, 0, (int64_t)data_len,
                                &off)))
            break;
        if (off % ALIGN) {
            rc = musa_file_bad(f, WHO, musa_json_get(s, "offset"),
                               "%s is %lld, not a multiple of %d", what, (long long)off, ALIGN);
            break;
        }
        if ((uint64_t)numel * es > data_len - (uint64_t)off) {
            rc = musa_file_bad(f, WHO, s,
                               "storages[%d]: %lld bytes at offset %lld run past the %llu-byte "
                               "data section",
                               i, (long long)((uint64_t)numel * es), (long long)off,
                               (unsigned long long)data_len);
            break;
        }
        int64_t k = 0; /* a bool is one byte, 0 or 1: kernels rely on it */
        while (d == MUSA_DTYPE_BOOL && k < numel && data[off + k] <= 1) k++;
        if (d == MUSA_DTYPE_BOOL && k < numel) {
            rc = musa_file_bad(f, WHO, s, "storages[%d] is bool but element %lld is the byte %u", i,
                               (long long)k, data[off + k]);
            break;
        }
        st[i] = (rstorage){.dtype = d, .numel = numel, .off = (uint64_t)off, .at = s};
        order[i] = &st[i];
    }
    if (!rc && arr->n > 1) {
        qsort(order, (size_t)arr->n, sizeof *order, cmp_storage_off);
        for (int32_t i = 1; i < arr->n && !rc; i++) {
            const rstorage *a = order[i - 1], *b = order[i];
            uint64_t a_end = a->off + (uint64_t)a->numel * musa_dtype_info[a->dtype].size;
            if (b->numel && a_end > b->off)
                rc = musa_file_bad(f, WHO, b->at,
                                   "storages[%d] at byte %llu of the data section overlaps "
                                   "storages[%d] (bytes %llu to %llu)",
                                   (int)(b - st), (unsigned long long)b->off, (int)(a - st),
                                   (unsigned long long)a->off, (unsigned long long)a_end);
        }
    }
    free(order);
    *out = st, *n_out = arr->n;
    return rc;
}

typedef struct rtensor {
    int32_t storage;
    int8_t ndim;
    int64_t offset;
    int64_t shape[MUSA_MAX_DIMS], strides[MUSA_MAX_DIMS];
} rtensor;

static int read_dims(const musa_file *f, const musa_json *v, const char *what, int64_t *dims,
                     int *ndim) {
    if (!v || v->type != MUSA_JSON_ARRAY)
        return musa_file_bad(f, WHO, v, "%s must be an array of integers", what);
    if (v->n > MUSA_MAX_DIMS)
        return musa_file_bad(f, WHO, v, "%s has %d dims; at most %d are supported", what, v->n,
                             MUSA_MAX_DIMS);
    char w[80];
    for (int32_t d = 0; d < v->n; d++) {
        snprintf(w, sizeof w, "%s[%d]", what, d);
        int rc = musa_file_int(f, WHO, &v->kid[d], w, 0, INT64_MAX, &dims[d]);
        if (rc) return rc;
    }
    *ndim = v->n;
    return MUSA_OK;
}

static int read_tensors(const musa_file *f, const rstorage *st, int32_t n_st, rtensor **out,
                        int32_t *n_out) {
    const musa_json *arr;
    int rc = array_member(f, "tensors", &arr);
    if (rc) return rc;
    rtensor *ts = MUSA_ARENA_NEW((musa_arena *)&f->arena, rtensor, arr->n + 1);
    if (!ts) return musa_err_nomem(WHO, sizeof(rtensor) * (size_t)arr->n);
    static const char *const keys[] = {"storage", "offset", "shape", "strides"};
    for (int32_t i = 0; i < arr->n; i++) {
        const musa_json *t = &arr->kid[i];
        rtensor *r = &ts[i];
        char what[64];
        snprintf(what, sizeof what, "tensors[%d]", i);
        if (t->type != MUSA_JSON_OBJECT)
            return musa_file_bad(f, WHO, t, "%s must be an object", what);
        if ((rc = musa_file_check_keys(f, WHO, t, what, keys, 4))) return rc;
        int64_t s, off;
        snprintf(what, sizeof what, "tensors[%d].storage", i);
        if ((rc = musa_file_int(f, WHO, musa_json_get(t, "storage"), what, 0, n_st - 1, &s)))
            return rc;
        snprintf(what, sizeof what, "tensors[%d].offset", i);
        if ((rc = musa_file_int(f, WHO, musa_json_get(t, "offset"), what, 0, INT64_MAX, &off)))
            return rc;
        int nd, nd2;
        snprintf(what, sizeof what, "tensors[%d].shape", i);
        if ((rc = read_dims(f, musa_json_get(t, "shape"), what, r->shape, &nd))) return rc;
        snprintf(what, sizeof what, "tensors[%d].strides", i);
        if ((rc = read_dims(f, musa_json_get(t, "strides"), what, r->strides, &nd2))) return rc;
        if (nd != nd2)
            return musa_file_bad(f, WHO, t, "tensors[%d] has %d dims but %d strides", i, nd, nd2);
        int64_t numel;
        if (!shape_ok(nd, r->shape, &numel))
            return musa_file_bad(f, WHO, musa_json_get(t, "shape"),
                                 "tensors[%d]: the shape's element count overflows 64 bits", i);
        int64_t end = layout_end(nd, r->shape, r->strides, off, numel);
        if (end < 0 || end > st[s].numel)
            return musa_file_bad(f, WHO, t,
                                 "tensors[%d] reaches element %lld of storages[%lld], which has "
                                 "%lld",
                                 i, end < 0 ? (long long)INT64_MAX : (long long)end - 1,
                                 (long long)s, (long long)st[s].numel);
        r->storage = (int32_t)s, r->ndim = (int8_t)nd, r->offset = off;
    }
    *out = ts, *n_out = arr->n;
    return MUSA_OK;
}

/* Check the prelude of buf[0..size). */
static int read_prelude(const char *name, const unsigned char *buf, size_t size,
                        uint64_t *header_len, uint64_t *data_off, uint64_t *data_len) {
    if (size < MUSA_FILE_PRELUDE || memcmp(buf, MAGIC, 8))
        return bad_file(name, WHO, 0, "prelude", "%s",
                        size >= 8 && !memcmp(buf, MAGIC, 8)
                            ? "the file is shorter than the 64-byte prelude"
                        : size >= 4 && !memcmp(buf, "PK\x03\x04", 4)
                            ? "not a .musa file (a zip file: a PyTorch checkpoint loads with "
                              "musa.load)"
                            : "not a .musa file (the magic bytes are wrong)");
    uint32_t version = rd32(buf + P_VERSION);
    if (musa_crc32c(0, buf, P_PRELUDE_CRC) != rd32(buf + P_PRELUDE_CRC))
        return bad_file(name, WHO, P_PRELUDE_CRC, "prelude", "CRC mismatch (the file is damaged)");
    if (version != FORMAT_VERSION)
        return bad_file(name, WHO, P_VERSION, "prelude",
                        "format version %u; this build of musa reads version %d%s", version,
                        FORMAT_VERSION,
                        version > FORMAT_VERSION ? " (written by a newer musa)" : "");
    if (rd32(buf + P_FLAGS)) return bad_file(name, WHO, P_FLAGS, "prelude", "unknown flags");
    for (int i = P_RESERVED; i < MUSA_FILE_PRELUDE; i++)
        if (buf[i]) return bad_file(name, WHO, (size_t)i, "prelude", "reserved byte is not zero");
    *header_len = rd64(buf + P_HEADER_LEN);
    *data_off = rd64(buf + P_DATA_OFF);
    *data_len = rd64(buf + P_DATA_LEN);
    if (*header_len == 0 || *header_len > MUSA_FILE_MAX_HEADER)
        return bad_file(name, WHO, P_HEADER_LEN, "prelude",
                        "header length %llu is not in 1 to %u bytes",
                        (unsigned long long)*header_len, MUSA_FILE_MAX_HEADER);
    if (*data_off != align_up(MUSA_FILE_PRELUDE + *header_len))
        return bad_file(name, WHO, P_DATA_OFF, "prelude",
                        "the data section starts at %llu, not at %llu after the header",
                        (unsigned long long)*data_off,
                        (unsigned long long)align_up(MUSA_FILE_PRELUDE + *header_len));
    if (*data_off > size || *data_len != size - *data_off)
        return bad_file(name, WHO, P_DATA_LEN, "prelude",
                        "the file is %zu bytes, but its sections end at byte %llu%s", size,
                        (unsigned long long)(*data_off + *data_len),
                        *data_off + *data_len > size ? " (truncated?)" : "");
    return MUSA_OK;
}

/* Validate buf[0..size) into f; nothing is allocated for tensors. */
static int validate(musa_file *f, const unsigned char *buf, size_t size, rstorage **st,
                    int32_t *n_st, rtensor **ts, int32_t *n_ts, uint64_t *data_off) {
    uint64_t hlen = 0, dlen = 0;
    int rc = read_prelude(f->name, buf, size, &hlen, data_off, &dlen);
    if (rc) return rc;
    const char *htext = (const char *)buf + MUSA_FILE_PRELUDE;
    if (musa_crc32c(0, htext, hlen) != rd32(buf + P_HEADER_CRC))
        return bad_file(f->name, WHO, MUSA_FILE_PRELUDE, "header",
                        "CRC mismatch (the file is damaged)");
    for (uint64_t i = MUSA_FILE_PRELUDE + hlen; i < *data_off; i++)
        if (buf[i]) return bad_file(f->name, WHO, i, "padding", "a padding byte is not zero");
    if (musa_crc32c(0, buf + *data_off, dlen) != rd32(buf + P_DATA_CRC))
        return bad_file(f->name, WHO, *data_off, "data section",
                        "CRC mismatch (the file is damaged)");
    char why[200];
    if (musa_json_parse(&f->arena, htext, hlen, &f->root, why, sizeof why))
        return bad_file(f->name, WHO, MUSA_FILE_PRELUDE, "header", "invalid JSON: %s", why);
    if (f->root->type != MUSA_JSON_OBJECT)
        return musa_file_bad(f, WHO, f->root, "the header must be an object");
    const musa_json *kind = musa_json_get(f->root, "kind");
    if (!kind || kind->type != MUSA_JSON_STRING || !kind_ok(kind->str))
        return musa_file_bad(f, WHO, kind ? kind : f->root,
                             "\"kind\" must be a string of 1 to 32 of a-z and _");
    f->kind = kind->str;
    if ((rc = read_storages(f, buf + *data_off, dlen, st, n_st))) return rc;
    return read_tensors(f, *st, *n_st, ts, n_ts);
}

/* Make the tensors of a validated file. */
static int materialise(musa_file *f, mapping *m, bool zero_copy, uint64_t data_off,
                       const rstorage *st, int32_t n_st, const rtensor *ts, int32_t n_ts) {
    musa_tensor **base = calloc((size_t)n_st + 1, sizeof *base);
    f->tensors = calloc((size_t)n_ts + 1, sizeof *f->tensors);
    int rc = MUSA_OK;
    if (!base || !f->tensors) {
        rc = musa_err_nomem(WHO, sizeof(void *) * (size_t)(n_st + n_ts));
        goto done;
    }
    for (int32_t i = 0; i < n_st; i++) {
        const unsigned char *src = (const unsigned char *)m->addr + data_off + st[i].off;
        int64_t shape[1] = {st[i].numel};
        if (zero_copy && st[i].numel) {
            atomic_fetch_add(&m->refs, 1);
            base[i] = musa_from_blob((void *)src, 1, shape, NULL, (musa_dtype)st[i].dtype,
                                     mapping_release, m);
            if (!base[i]) mapping_release(m);
        } else {
            base[i] = musa_tensor_alloc((musa_dtype)st[i].dtype, 1, shape);
            if (base[i])
                memcpy(base[i]->storage->data, src,
                       (size_t)st[i].numel * musa_dtype_info[st[i].dtype].size);
        }
        if (!base[i]) {
            rc = MUSA_ERR_NOMEM;
            goto done;
        }
    }
    for (int32_t i = 0; i < n_ts; i++) {
        const rtensor *r = &ts[i];
        f->tensors[i] =
            musa_tensor_view_of(base[r->storage], r->ndim, r->shape, r->strides, r->offset);
        if (!f->tensors[i]) {
            rc = MUSA_ERR_NOMEM;
            goto done;
        }
        f->n_tensors = i + 1;
    }
done:
    for (int32_t i = 0; base && i < n_st; i++) musa_tensor_release(base[i]);
    free(base);
    return rc;
}

static musa_file *open_buffer(const char *name, mapping *m, bool zero_copy) {
    musa_file *f = calloc(1, sizeof *f);
    if (!f) {
        musa_err_nomem(WHO, sizeof *f);
        mapping_release(m);
        return NULL;
    }
    snprintf(f->name, sizeof f->name, "%s", name);
    musa_arena_init(&f->arena, 0);
    rstorage *st = NULL;
    rtensor *ts = NULL;
    int32_t n_st = 0, n_ts = 0;
    uint64_t data_off = 0;
    int rc = validate(f, m->addr, m->len, &st, &n_st, &ts, &n_ts, &data_off);
    if (!rc) {
        uint64_t hlen = rd64((const unsigned char *)m->addr + P_HEADER_LEN);
        f->header = musa_arena_alloc(&f->arena, hlen + 1, 1);
        if (!f->header)
            rc = MUSA_ERR_NOMEM;
        else
            memcpy(f->header, (const char *)m->addr + MUSA_FILE_PRELUDE, hlen);
    }
    if (!rc) rc = materialise(f, m, zero_copy, data_off, st, n_st, ts, n_ts);
    mapping_release(m); /* storages made from it hold their own references */
    if (rc) {
        musa_file_close(f);
        return NULL;
    }
    return f;
}

musa_file *musa_file_open(const char *path, int flags) {
    if (!path) {
        musa_err(MUSA_ERR_VALUE, "[%s] path is NULL", WHO);
        return NULL;
    }
    if (flags & ~MUSA_FILE_MMAP) {
        musa_err(MUSA_ERR_VALUE, "[%s] unknown flags 0x%x", WHO, (unsigned)flags);
        return NULL;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb)) {
        musa_err(MUSA_ERR_IO, "[%s] cannot open %s: %s", WHO, path, strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    if (!S_ISREG(sb.st_mode)) {
        musa_err(MUSA_ERR_IO, "[%s] %s is not a regular file", WHO, path);
        close(fd);
        return NULL;
    }
    mapping *m = calloc(1, sizeof *m);
    if (!m) {
        close(fd);
        musa_err_nomem(WHO, sizeof *m);
        return NULL;
    }
    atomic_init(&m->refs, 1);
    m->len = (size_t)sb.st_size;
    if (m->len) {
        /* Private and writable: pages are copied when a loaded tensor is
         * written, never written back to the file. */
        m->addr = mmap(NULL, m->len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
        m->mapped = m->addr != MAP_FAILED;
        if (!m->mapped) {
            musa_err(MUSA_ERR_IO, "[%s] cannot map %s: %s", WHO, path, strerror(errno));
            close(fd);
            free(m);
            return NULL;
        }
    }
    close(fd);
    char name[256];
    size_t n = strlen(path);
    snprintf(name, sizeof name, "%s%s", n > 200 ? "..." : "", n > 200 ? path + n - 200 : path);
    return open_buffer(name, m, (flags & MUSA_FILE_MMAP) != 0);
}

musa_file *musa_file_open_memory(const void *data, size_t size) {
    if (!data && size) {
        musa_err(MUSA_ERR_VALUE, "[%s] data is NULL", WHO);
        return NULL;
    }
    mapping *m = calloc(1, sizeof *m);
    void *copy = malloc(size ? size : 1);
    if (!m || !copy) {
        free(m), free(copy);
        musa_err_nomem(WHO, size);
        return NULL;
    }
    if (size) memcpy(copy, data, size);
    atomic_init(&m->refs, 1);
    m->addr = copy, m->len = size;
    return open_buffer("<memory>", m, false);
}

void musa_file_close(musa_file *f) {
    if (!f) return;
    for (int64_t i = 0; i < f->n_tensors; i++) musa_tensor_release(f->tensors[i]);
    free(f->tensors);
    musa_arena_free(&f->arena);
    free(f);
}

const char *musa_file_kind(const musa_file *f) {
    return f ? f->kind : NULL;
}

const char *musa_file_header(const musa_file *f) {
    return f ? f->header : NULL;
}

const musa_json *musa_file_json(const musa_file *f) {
    return f ? f->root : NULL;
}

int64_t musa_file_num_tensors(const musa_file *f) {
    return f ? f->n_tensors : 0;
}

musa_tensor *musa_file_tensor(const musa_file *f, int64_t i) {
    if (!f || i < 0 || i >= f->n_tensors) {
        musa_err(MUSA_ERR_INDEX, "[musa_file_tensor] index %lld is out of range for %lld tensors",
                 (long long)i, (long long)(f ? f->n_tensors : 0));
        return NULL;
    }
    musa_tensor_retain(f->tensors[i]);
    return f->tensors[i];
}
