/* Base layer: errors, arenas, containers, the thread pool, and dtypes. */
#include <pthread.h>
#include <stdatomic.h>

#include "base/arena.h"
#include "base/dtype.h"
#include "base/threadpool.h"
#include "base/vec.h"
#include "harness.h"

TEST(errors_are_thread_local_and_prefixed) {
    musa_clear_error();
    CHECK(musa_last_error_code() == MUSA_OK && musa_last_error()[0] == '\0');
    CHECK(musa_err(MUSA_ERR_INDEX, "[thing] bad %d", 3) == MUSA_ERR_INDEX);
    CHECK(!strcmp(musa_last_error(), "[thing] bad 3"));
    musa_err(MUSA_ERR_VALUE, "no prefix");
    musa_err_prefix("outer");
    CHECK(!strcmp(musa_last_error(), "[outer] no prefix"));
    musa_err_prefix("again"); /* already prefixed: unchanged */
    CHECK(!strcmp(musa_last_error(), "[outer] no prefix"));
    musa_set_error_location("model.py", 12);
    const char *f;
    int line;
    musa_last_error_location(&f, &line);
    CHECK(f && !strcmp(f, "model.py") && line == 12);
    CHECK(!strcmp(musa_status_name(MUSA_ERR_ZERO_DIVISION), "MUSA_ERR_ZERO_DIVISION"));
    /* a very long message is truncated, never overflowed */
    char big[3000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    musa_err(MUSA_ERR_VALUE, "%s", big);
    musa_err_prefix("p");
    CHECK(strlen(musa_last_error()) < 1024);
    musa_clear_error();
}

static void *other_thread(void *arg) {
    (void)arg;
    musa_err(MUSA_ERR_RUNTIME, "[other] thread");
    return NULL;
}

TEST(error_state_per_thread) {
    musa_err(MUSA_ERR_VALUE, "[main] mine");
    pthread_t t;
    pthread_create(&t, NULL, other_thread, NULL);
    pthread_join(t, NULL);
    CHECK(!strcmp(musa_last_error(), "[main] mine"));
    musa_clear_error();
}

TEST(arena_alloc_and_free) {
    musa_arena a;
    musa_arena_init(&a, 128);
    char *p = musa_arena_alloc(&a, 10, 1);
    int64_t *q = musa_arena_alloc(&a, 64, 8);
    char *big = musa_arena_alloc(&a, 10000, 64);
    char *s = musa_arena_strdup(&a, "hello");
    CHECK(p && q && big && s && !strcmp(s, "hello"));
    CHECK(((uintptr_t)q % 8) == 0 && ((uintptr_t)big % 64) == 0);
    for (int i = 0; i < 10000; i++) CHECK(big[i] == 0);
    for (int i = 0; i < 1000; i++) CHECK(musa_arena_alloc(&a, 24, 8));
    musa_arena_free(&a);
}

TEST(vec_and_map) {
    MUSA_VEC(int64_t) v = {0};
    for (int64_t i = 0; i < 1000; i++) CHECK(musa_vec_push(&v, i * i) == 0);
    CHECK(v.len == 1000 && v.data[999] == 999 * 999);
    musa_vec_free(&v);
    CHECK(v.data == NULL && v.len == 0);
    musa_map m = {0};
    for (uint64_t k = 0; k < 5000; k++) CHECK(musa_map_put(&m, k * 7919, k) == 0);
    CHECK(musa_map_put(&m, 7919, 42) == 0 && m.len == 5000);
    CHECK(*musa_map_get(&m, 7919) == 42 && *musa_map_get(&m, 4999 * 7919ull) == 4999);
    CHECK(musa_map_get(&m, 3) == NULL);
    musa_map_free(&m);
    CHECK(musa_hash_bytes("ab", 2, 0) != musa_hash_bytes("ba", 2, 0));
}

typedef struct {
    atomic_int *hits;
    int64_t n;
} pf_ctx;

static void mark(void *arg, int64_t b, int64_t e) {
    pf_ctx *c = arg;
    for (int64_t i = b; i < e; i++) atomic_fetch_add(&c->hits[i], 1);
}

TEST(parallel_for_covers_each_index_once) {
    int saved = musa_get_num_threads();
    for (int threads = 1; threads <= 3; threads++) {
        CHECK_OK(musa_set_num_threads(threads));
        CHECK(musa_get_num_threads() == threads);
        for (int64_t n = 0; n < 3000; n = n * 3 + 1) {
            atomic_int *hits = calloc((size_t)n + 1, sizeof *hits);
            pf_ctx c = {hits, n};
            musa_parallel_for(n, 7, mark, &c);
            for (int64_t i = 0; i < n; i++)
                CHECK_MSG(hits[i] == 1, "index %lld hit %d times", (long long)i, hits[i]);
            free(hits);
        }
    }
    CHECK_OK(musa_set_num_threads(saved));
}

static void nested(void *arg, int64_t b, int64_t e) {
    pf_ctx *c = arg;
    for (int64_t i = b; i < e; i++) {
        /* a parallel_for inside a body runs serially: no deadlock */
        CHECK(musa_pool_intra_threads() == 1);
        pf_ctx inner = {c->hits + i * 10, 10};
        musa_parallel_for(10, 1, mark, &inner);
    }
}

TEST(nested_parallel_for_runs_serially) {
    atomic_int hits[1000] = {0};
    pf_ctx c = {hits, 100};
    musa_parallel_for(100, 1, nested, &c);
    for (int i = 0; i < 1000; i++) CHECK(hits[i] == 1);
}

typedef struct {
    atomic_int *counter;
    int id;
    int *order;
} task_ctx;

static void bump(void *arg) {
    task_ctx *t = arg;
    atomic_fetch_add(t->counter, 1);
    /* kernels inside tasks run serially */
    t->order[t->id] = musa_pool_intra_threads();
}

TEST(task_groups) {
    CHECK_OK(musa_set_num_threads(2));
    atomic_int counter = 0;
    musa_task tasks[64];
    task_ctx ctx[64];
    int order[64];
    musa_task_group g;
    musa_task_group_init(&g);
    uint64_t w0, c0, w1, c1;
    musa_pool_counters(&w0, &c0);
    for (int i = 0; i < 64; i++) {
        ctx[i] = (task_ctx){&counter, i, order};
        tasks[i].fn = bump;
        tasks[i].ctx = &ctx[i];
        musa_task_submit(&g, &tasks[i]);
    }
    musa_task_group_wait(&g);
    musa_pool_counters(&w1, &c1);
    CHECK(counter == 64);
    CHECK((w1 - w0) + (c1 - c0) >= 64);
    for (int i = 0; i < 64; i++) CHECK(order[i] == 1);
}

TEST(half_conversions) {
    /* every float16 bit pattern round-trips through float32 */
    for (uint32_t b = 0; b < 65536; b++) {
        uint16_t h = (uint16_t)b, back;
        musa_f16 f16;
        memcpy(&f16, &h, 2);
        float f = (float)f16;
        musa_f16 r = (musa_f16)f;
        memcpy(&back, &r, 2);
        if (f == f) CHECK_MSG(back == h, "f16 %04x", b);
    }
    /* from double: one rounding (a double just above a tie rounds up, where
     * rounding through a float first would make it a tie and round down),
     * overflow to inf, underflow to a signed zero */
    struct {
        double v;
        uint16_t bits;
    } cases[] = {
        {0.1, 0x2e66},
        {1.0 + 0x1p-11 + 0x1p-40, 0x3c01},
        {1.0 + 0x1p-11, 0x3c00},
        {-(1.0 + 0x1p-11 + 0x1p-40), 0xbc01},
        {65520.0, 0x7c00},
        {1e300, 0x7c00},
        {-1e-300, 0x8000},
        {0x1p-24, 0x0001},
        {0x1p-25 + 0x1p-60, 0x0001},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        musa_f16 h = MUSA_TO_F16(cases[i].v);
        uint16_t bits;
        memcpy(&bits, &h, 2);
        CHECK_MSG(bits == cases[i].bits, "float16 of %a is %04x, want %04x", cases[i].v, bits,
                  cases[i].bits);
    }
    /* bfloat16: ties to even, NaN stays NaN, overflow to inf */
    CHECK(musa_f32_to_bf16(1.0f + 1.0f / 256) == 0x3f80); /* tie -> even (down) */
    CHECK(musa_f32_to_bf16(1.0f + 3.0f / 256) == 0x3f82); /* tie -> even (up) */
    CHECK(musa_bf16_to_f32(musa_f32_to_bf16(NAN)) != musa_bf16_to_f32(musa_f32_to_bf16(NAN)));
    CHECK(isinf(musa_bf16_to_f32(musa_f32_to_bf16(3.4e38f))));
    for (uint32_t b = 0; b < 65536; b++) {
        float f = musa_bf16_to_f32((musa_bf16)b);
        if (f == f) CHECK(musa_f32_to_bf16(f) == b);
    }
    CHECK(musa_sat_i64(1e300) == INT64_MAX && musa_sat_i32(-1e300) == INT32_MIN &&
          musa_sat_u8(NAN) == 0);
}

TEST(dtype_names_and_promotion) {
    CHECK(musa_dtype_from_name("float") == MUSA_DTYPE_FLOAT32);
    CHECK(musa_dtype_from_name("bfloat16") == MUSA_DTYPE_BFLOAT16);
    CHECK(musa_dtype_from_name("nope") == -1 && musa_dtype_from_name(NULL) == -1);
    CHECK(!strcmp(musa_dtype_name((musa_dtype)77), "?") && musa_dtype_size((musa_dtype)-1) == 0);
    CHECK(musa_promote_types(MUSA_DTYPE_INT8, MUSA_DTYPE_UINT8) == MUSA_DTYPE_INT16);
    CHECK(musa_promote_types(MUSA_DTYPE_INT16, MUSA_DTYPE_INT8) == MUSA_DTYPE_INT16);
    CHECK(musa_promote_types(MUSA_DTYPE_INT16, MUSA_DTYPE_INT32) == MUSA_DTYPE_INT32);
    CHECK(musa_dtype_from_name("short") == MUSA_DTYPE_INT16 &&
          musa_dtype_size(MUSA_DTYPE_INT16) == 2);
    CHECK(musa_promote_types(MUSA_DTYPE_BOOL, MUSA_DTYPE_UINT8) == MUSA_DTYPE_UINT8);
    CHECK(musa_promote_types(MUSA_DTYPE_INT64, MUSA_DTYPE_FLOAT16) == MUSA_DTYPE_FLOAT16);
    CHECK(musa_promote_types(MUSA_DTYPE_FLOAT16, MUSA_DTYPE_BFLOAT16) == MUSA_DTYPE_FLOAT32);
    CHECK(musa_promote_types(MUSA_DTYPE_FLOAT32, MUSA_DTYPE_FLOAT64) == MUSA_DTYPE_FLOAT64);
}
