/* Tensors: creation from memory, allocator statistics, layout queries,
 * printing, devices and the generic op interface. */
#include "harness.h"
#include "util.h"

#include <unistd.h>

TEST(allocator_caches_and_counts) {
    musa_alloc_empty_cache();
    musa_alloc_stats s0, s1, s2;
    musa_alloc_get_stats(&s0);
    musa_tensor *t = musa_empty(1, (int64_t[]){1000}, MUSA_DTYPE_FLOAT32);
    CHECK(((uintptr_t)musa_tensor_data(t) % 64) == 0);
    musa_alloc_get_stats(&s1);
    CHECK(s1.current_bytes >= s0.current_bytes + 4000 && s1.alloc_count == s0.alloc_count + 1);
    CHECK(s1.peak_bytes >= s1.current_bytes);
    musa_tensor_release(t);
    musa_alloc_get_stats(&s2);
    CHECK(s2.current_bytes == s0.current_bytes && s2.cached_bytes >= 4000);
    /* the same size class is served from the cache */
    musa_tensor *u = musa_empty(1, (int64_t[]){990}, MUSA_DTYPE_FLOAT32);
    musa_alloc_stats s3;
    musa_alloc_get_stats(&s3);
    CHECK(s3.system_allocs == s2.system_allocs);
    musa_alloc_reset_peak();
    musa_alloc_get_stats(&s3);
    CHECK(s3.peak_bytes == s3.current_bytes);
    musa_tensor_release(u);
    musa_alloc_empty_cache();
    musa_alloc_get_stats(&s3);
    CHECK(s3.cached_bytes == 0);
}

/* The cache is bounded by what the process needed: a block of each of 20
 * classes between 2 and 64 MiB, one at a time, kept 403 MiB cached before
 * (every block freed stayed, none could serve another class); now at most
 * twice the most ever in use plus 16 MiB. */
TEST(allocator_cache_is_bounded_by_the_peak_in_use) {
    musa_alloc_empty_cache();
    size_t big = (size_t)64 << 20;
    musa_tensor *t = musa_empty(1, (int64_t[]){(int64_t)big}, MUSA_DTYPE_UINT8);
    CHECK(t != NULL);
    musa_tensor_release(t);
    size_t total = 0;
    for (int k = 21; k <= 25; k++)
        for (int q = 1; q <= 4; q++) {
            size_t bytes = ((size_t)1 << k) + (size_t)q * ((size_t)1 << k) / 4;
            musa_tensor *u = musa_empty(1, (int64_t[]){(int64_t)bytes}, MUSA_DTYPE_UINT8);
            CHECK(u != NULL);
            total += bytes;
            musa_tensor_release(u);
        }
    musa_alloc_stats s;
    musa_alloc_get_stats(&s);
    CHECK(total > ((size_t)400 << 20));
    /* (the bound follows this binary's high-water mark: its other tests stay far below 64 MiB) */
    CHECK_MSG(s.cached_bytes <= 2 * big + ((size_t)16 << 20), "cached %zu bytes", s.cached_bytes);
    /* a fixed size served again comes from the cache */
    musa_tensor *v = musa_empty(1, (int64_t[]){(int64_t)big}, MUSA_DTYPE_UINT8);
    musa_alloc_stats s2;
    musa_alloc_get_stats(&s2);
    CHECK(s2.system_allocs == s.system_allocs);
    musa_tensor_release(v);
    musa_alloc_empty_cache();
}

/* Resident bytes now (Linux), or -1. */
static long long resident_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long long pages = -1, rss = -1;
    if (!f) return -1;
    if (fscanf(f, "%lld %lld", &pages, &rss) != 2) rss = -1;
    fclose(f);
    return rss < 0 ? -1 : rss * (long long)sysconf(_SC_PAGESIZE);
}

/* A sanitizer's runtime brings its own malloc, which keeps its pages. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                         \
    __has_feature(memory_sanitizer)
#define SANITIZER_MALLOC 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZER_MALLOC 1
#endif

/* musa_alloc_trim gives back heap pages freed below a live block (where
 * free() alone keeps them: only the heap's top is returned), and keeps the
 * allocator's cache. */
TEST(allocator_trim_returns_freed_heap_pages_and_keeps_the_cache) {
    musa_tensor *t = musa_empty(1, (int64_t[]){1000}, MUSA_DTYPE_FLOAT32);
    musa_tensor_release(t);
    musa_alloc_stats s0, s1;
    musa_alloc_get_stats(&s0);
    CHECK(s0.cached_bytes >= 4000);
    enum { N = 16384, SIZE = 2000 }; /* 32.8 MB in blocks below the mmap threshold */
    char **blocks = malloc(sizeof(char *) * N);
    CHECK(blocks != NULL);
    for (int i = 0; i < N; i++) {
        blocks[i] = malloc(SIZE);
        CHECK(blocks[i] != NULL);
        memset(blocks[i], i & 0xff, SIZE);
    }
    for (int i = 0; i < N - 1; i++) free(blocks[i]); /* the last one pins the heap's top */
    long long before = resident_bytes();
    musa_alloc_trim();
    long long after = resident_bytes();
    musa_alloc_get_stats(&s1);
    CHECK(s1.cached_bytes == s0.cached_bytes);
#if defined(__GLIBC__) && !defined(SANITIZER_MALLOC)
    if (before > 0 && after > 0)
        CHECK_MSG(before - after >= (16LL << 20), "resident %lld -> %lld bytes", before, after);
#else
    (void)before, (void)after;
#endif
    free(blocks[N - 1]);
    free(blocks);
}

static int deleted;
static void on_delete(void *ctx) {
    deleted += *(int *)ctx;
}

TEST(from_blob_shares_memory) {
    float data[6] = {1, 2, 3, 4, 5, 6};
    int one = 1;
    deleted = 0;
    musa_tensor *t = musa_from_blob(data, 2, (int64_t[]){3, 2}, (int64_t[]){1, 3},
                                    MUSA_DTYPE_FLOAT32, on_delete, &one);
    CHECK(t && !musa_tensor_is_contiguous(t));
    double v;
    CHECK_OK(musa_tensor_get(t, (int64_t[]){2, 1}, &v));
    CHECK(v == 6);
    musa_tensor *s = musa_select(t, 1, 0);
    musa_tensor_release(t);
    CHECK(deleted == 0); /* the view keeps the memory alive */
    CHECK_OK(musa_fill_(s, 9));
    CHECK(data[0] == 9 && data[2] == 9 && data[3] == 4);
    musa_tensor_release(s);
    CHECK(deleted == 1);
    CHECK_ERR(FAILS(musa_from_blob(NULL, 1, (int64_t[]){2}, NULL, MUSA_DTYPE_FLOAT32, NULL, NULL)),
              MUSA_ERR_VALUE, "data is NULL");
    CHECK_ERR(FAILS(musa_from_blob(data, 1, (int64_t[]){2}, (int64_t[]){-1}, MUSA_DTYPE_FLOAT32,
                                   NULL, NULL)),
              MUSA_ERR_VALUE, "negative strides");
}

TEST(storage_bytes_are_the_whole_storage) {
    musa_tensor *t = musa_arange(0, 6, 1, MUSA_DTYPE_FLOAT32);
    musa_tensor *v = musa_select(t, 0, 4); /* a 0-d view at offset 4 */
    musa_tensor *b = musa_tensor_storage_bytes(v);
    CHECK(b && musa_tensor_ndim(b) == 1 && musa_tensor_shape(b)[0] == 24);
    CHECK(musa_tensor_dtype(b) == MUSA_DTYPE_UINT8 && musa_tensor_offset(b) == 0);
    CHECK(musa_tensor_data(b) == musa_tensor_data(t) && musa_tensor_shares_storage(b, t));
    CHECK_OK(musa_fill_(b, 0)); /* writes reach the tensor */
    double x;
    CHECK_OK(musa_tensor_item(v, &x));
    CHECK(x == 0);
    musa_tensor *m = musa_empty_meta(MUSA_DTYPE_FLOAT32, 1, (int64_t[]){2});
    CHECK_ERR(FAILS(musa_tensor_storage_bytes(m)), MUSA_ERR_VALUE,
              "[untyped_storage] a meta tensor has no storage");
    CHECK_ERR(FAILS(musa_tensor_storage_bytes(NULL)), MUSA_ERR_VALUE, "the tensor is NULL");
    musa_tensor_release(t), musa_tensor_release(v), musa_tensor_release(b), musa_tensor_release(m);
}

/* Regression (fuzz_op_call, unaligned-from-blob): kernels load elements as
 * their C types, so wrapping memory at an odd address must be refused, not
 * read with misaligned loads (UBSan reported them in the cast kernel). */
TEST(from_blob_refuses_unaligned_memory) {
    _Alignas(8) unsigned char mem[40] = {0};
    CHECK_ERR(FAILS(musa_from_blob(mem + 1, 1, (int64_t[]){4}, NULL, MUSA_DTYPE_INT32, NULL, NULL)),
              MUSA_ERR_VALUE, "[from_blob] data at");
    CHECK(strstr(musa_last_error(), "is not aligned to its 4-byte elements"));
    CHECK_ERR(
        FAILS(musa_from_blob(mem + 4, 1, (int64_t[]){2}, NULL, MUSA_DTYPE_FLOAT64, NULL, NULL)),
        MUSA_ERR_VALUE, "8-byte elements");
    /* one-byte elements take any address; empty tensors any pointer */
    musa_tensor *u8 =
        musa_from_blob(mem + 3, 1, (int64_t[]){5}, NULL, MUSA_DTYPE_UINT8, NULL, NULL);
    musa_tensor *e =
        musa_from_blob(mem + 1, 1, (int64_t[]){0}, NULL, MUSA_DTYPE_FLOAT32, NULL, NULL);
    CHECK(u8 && e);
    /* musa_from_data copies, so an unaligned source is fine */
    int32_t v = 7;
    memcpy(mem + 1, &v, sizeof v);
    musa_tensor *c = musa_from_data(mem + 1, 1, (int64_t[]){1}, MUSA_DTYPE_INT32);
    int64_t got = 0;
    CHECK(c);
    CHECK_OK(musa_tensor_item_int(c, &got));
    CHECK(got == 7);
    /* strides whose reach overflows are refused, not wrapped */
    CHECK_ERR(FAILS(musa_from_blob(mem, 2, (int64_t[]){3, 2}, (int64_t[]){(int64_t)1 << 62, 1},
                                   MUSA_DTYPE_UINT8, NULL, NULL)),
              MUSA_ERR_VALUE, "[from_blob] the strides reach past");
    release_all(3, u8, e, c);
}

/* Regression (fuzz_op_call, empty-tensor-contiguous-strides-overflow): an
 * empty tensor may have other dims as large as 2^62; its strides, views
 * and element loops must not overflow (UBSan: signed overflow in
 * musa_contiguous_strides, the iterator and the view inferences). */
TEST(empty_tensors_with_huge_dims) {
    const int64_t big = ((int64_t)1 << 62) + 1;
    musa_tensor *x = musa_empty(3, (int64_t[]){0, big, 2}, MUSA_DTYPE_FLOAT32);
    CHECK(x && musa_tensor_numel(x) == 0 && musa_tensor_is_contiguous(x));
    CHECK(musa_tensor_strides(x)[2] == 1 && musa_tensor_strides(x)[1] == 2);
    musa_tensor *y = musa_neg(x);
    musa_tensor *z = musa_add(x, y);
    CHECK(z && musa_tensor_numel(z) == 0 && musa_tensor_shape(z)[1] == big);
    musa_tensor *t = musa_transpose(x, 0, 1);
    musa_tensor *c = musa_contiguous(t);
    CHECK(c && musa_tensor_shape(c)[0] == big);
    musa_tensor *sl = musa_slice(x, 1, 1, INT64_MAX, (int64_t)1 << 61);
    musa_tensor *se = musa_select(x, 1, big - 1);
    musa_tensor *un = musa_unsqueeze(x, 1);
    CHECK(sl && musa_tensor_shape(sl)[1] == 2 && se && musa_tensor_ndim(se) == 2 && un);
    musa_tensor *cast = musa_cast(t, MUSA_DTYPE_INT64);
    CHECK(cast && musa_tensor_numel(cast) == 0);
    release_all(9, x, y, z, t, c, sl, se, un, cast);
}

TEST(item_copy_get_and_errors) {
    musa_tensor *t = musa_arange(0, 6, 1, MUSA_DTYPE_INT64);
    double d;
    int64_t i;
    CHECK_ERR(musa_tensor_item(t, &d) == MUSA_OK, MUSA_ERR_VALUE,
              "[item] a tensor with 6 elements cannot be converted to a scalar");
    int64_t buf[6];
    CHECK_ERR(musa_tensor_copy_to(t, buf, 8) == MUSA_OK, MUSA_ERR_VALUE, "holds 8 bytes, need 48");
    CHECK_OK(musa_tensor_copy_to(t, buf, sizeof buf));
    CHECK(buf[5] == 5);
    CHECK_ERR(musa_tensor_get(t, (int64_t[]){6}, &d) == MUSA_OK, MUSA_ERR_INDEX, "out of range");
    musa_tensor *s = musa_select(t, 0, -1);
    CHECK_OK(musa_tensor_item_int(s, &i));
    CHECK(i == 5 && musa_tensor_size(t, -1) == 6);
    CHECK_ERR(musa_tensor_size(t, 1) >= 0, MUSA_ERR_INDEX, "dim 1 out of range");
    CHECK(musa_tensor_ndim(NULL) == -1 && musa_tensor_data(NULL) == NULL);
    musa_tensor_release(NULL);
    release_all(2, t, s);
}

TEST(format_like_pytorch) {
    struct {
        musa_dtype dt;
        int nd;
        int64_t shape[3];
        double vals[8];
        const char *want;
    } cases[] = {
        {MUSA_DTYPE_FLOAT32, 1, {2}, {1, 2}, "tensor([1., 2.])"},
        {MUSA_DTYPE_FLOAT32, 1, {3}, {1.5, -2.25, 3}, "tensor([ 1.5000, -2.2500,  3.0000])"},
        {MUSA_DTYPE_FLOAT64, 0, {0}, {3}, "tensor(3., dtype=musa.float64)"},
        {MUSA_DTYPE_INT64, 2, {2, 2}, {1, 20, 3, 4}, "tensor([[ 1, 20],\n        [ 3,  4]])"},
        {MUSA_DTYPE_BOOL, 1, {2}, {1, 0}, "tensor([ True, False])"},
        {MUSA_DTYPE_FLOAT32, 1, {2}, {1e-5, 1}, "tensor([1.0000e-05, 1.0000e+00])"},
        {MUSA_DTYPE_INT8, 1, {2}, {-1, 2}, "tensor([-1,  2], dtype=musa.int8)"},
        {MUSA_DTYPE_FLOAT32, 2, {0, 3}, {0}, "tensor([], size=(0, 3))"},
        {MUSA_DTYPE_FLOAT32, 1, {3}, {NAN, INFINITY, 1}, "tensor([nan, inf, 1.])"},
    };
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
        musa_tensor *t = from_list(cases[i].dt, cases[i].nd, cases[i].shape, cases[i].vals);
        char buf[256];
        int n = musa_tensor_format(t, buf, sizeof buf);
        CHECK_MSG(n > 0 && !strcmp(buf, cases[i].want), "format case %d: got\n%s\nwant\n%s", i, buf,
                  cases[i].want);
        musa_tensor_release(t);
    }
    musa_tensor *big = musa_arange(0, 2000, 1, MUSA_DTYPE_INT32);
    char buf[256];
    musa_tensor_format(big, buf, sizeof buf);
    CHECK_MSG(!strcmp(buf, "tensor([   0,    1,    2,  ..., 1997, 1998, 1999], dtype=musa.int32)"),
              "%s", buf);
    char tiny[8];
    int need = musa_tensor_format(big, tiny, sizeof tiny);
    CHECK(need > 8 && strlen(tiny) == 7); /* snprintf semantics */
    musa_tensor_release(big);
}

TEST(format_wraps_rows_and_follows_the_print_options) {
    musa_print_options def, o;
    musa_get_print_options(&def);
    CHECK(def.precision == 4 && def.threshold == 1000 && def.edgeitems == 3 &&
          def.linewidth == 80 && def.sci_mode == -1);
    musa_tensor *r = musa_arange(0, 12, 1, MUSA_DTYPE_INT64);
    char buf[512];
    o = def;
    o.linewidth = 20; /* (20 - 7) / (2 + 2): 3 a line, under the row's indent */
    CHECK_OK(musa_set_print_options(&o));
    musa_tensor_format(r, buf, sizeof buf);
    CHECK_MSG(!strcmp(buf, "tensor([ 0,  1,  2,\n         3,  4,  5,\n         6,  7,  8,\n"
                           "         9, 10, 11])"),
              "%s", buf);
    o = def;
    o.precision = 2, o.threshold = 4, o.edgeitems = 1, o.sci_mode = 1;
    CHECK_OK(musa_set_print_options(&o));
    musa_tensor *f = musa_arange(0, 6, 1, MUSA_DTYPE_FLOAT32);
    musa_tensor_format(f, buf, sizeof buf);
    CHECK_MSG(!strcmp(buf, "tensor([0.00e+00,  ..., 5.00e+00])"), "%s", buf);
    /* refused, and nothing changes */
    musa_print_options bad = def;
    bad.linewidth = 0;
    CHECK_ERR(musa_set_print_options(&bad) == MUSA_OK, MUSA_ERR_VALUE, "linewidth >= 1");
    CHECK_ERR(musa_set_print_options(NULL) == MUSA_OK, MUSA_ERR_VALUE, "NULL");
    musa_get_print_options(&o);
    CHECK(o.precision == 2 && o.linewidth == 80);
    CHECK_OK(musa_set_print_options(&def));
    release_all(2, r, f);
}

TEST(devices) {
    CHECK_OK(musa_device_check((musa_device){MUSA_DEVICE_CPU, 0}));
    CHECK_ERR(musa_device_check((musa_device){MUSA_DEVICE_CUDA, 0}) == MUSA_OK, MUSA_ERR_DEVICE,
              "cuda:0 is not available in this build");
    CHECK(!musa_cuda_is_available());
    musa_tensor *t = musa_zeros(1, (int64_t[]){2}, MUSA_DTYPE_FLOAT32);
    CHECK(musa_tensor_device(t).type == MUSA_DEVICE_CPU);
    musa_tensor_release(t);
}

TEST(generic_op_call) {
    int op = musa_op_lookup("sum");
    CHECK(op >= 0 && musa_op_num_inputs(op) == 1 && musa_op_num_outputs(op) == 1);
    CHECK(musa_op_num_inputs(musa_op_lookup("cat")) == -1);
    musa_attrs *a = musa_attrs_new(op);
    CHECK_OK(musa_attrs_set_ints(a, "dims", 1, (int64_t[]){0}));
    CHECK_OK(musa_attrs_set_bool(a, "keepdim", true));
    CHECK_ERR(musa_attrs_set_ints(a, "dims", 20, (int64_t[20]){0}) == MUSA_OK, MUSA_ERR_VALUE,
              "0 to 16 values");
    musa_tensor *x = musa_ones(2, (int64_t[]){3, 2}, MUSA_DTYPE_FLOAT32), *out[1] = {NULL};
    CHECK_OK(musa_op_call(op, 1, &x, a, out));
    CHECK_SHAPE(out[0], 2, 1, 2);
    musa_tensor *out2[1] = {NULL};
    CHECK_ERR(musa_op_call(op, 2, (musa_tensor *[]){x, x}, a, out2) == MUSA_OK, MUSA_ERR_VALUE,
              "[sum] takes 1 tensor inputs, got 2");
    CHECK_ERR(musa_op_call(musa_op_lookup("add"), 2, (musa_tensor *[]){x, x}, a, out2) == MUSA_OK,
              MUSA_ERR_VALUE, "attrs were made for op sum");
    CHECK_ERR(musa_op_call(999, 0, NULL, NULL, out2) == MUSA_OK, MUSA_ERR_VALUE,
              "unknown op id 999");
    musa_attrs_free(a);
    release_all(2, x, out[0]);
}

TEST(null_inputs_propagate_the_first_error) {
    musa_clear_error();
    musa_tensor *bad = musa_empty(1, (int64_t[]){-5}, MUSA_DTYPE_FLOAT32);
    musa_tensor *r = musa_exp(musa_add(bad, bad));
    CHECK(r == NULL);
    CHECK(strstr(musa_last_error(), "[empty] negative size -5") != NULL);
}
