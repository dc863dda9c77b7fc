/*
 * test_file.c - the .musa container (src/io/file.c): round trips, views
 * and shared storage, mmap, every validation class of the reader from a
 * handcrafted file, every truncation and 1,000 single-byte flips of a small
 * file, and saves killed with SIGKILL at random moments.
 */
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "io/crc32c.h"
#include "io/file.h"
#include "util.h"

/* A scratch path under /tmp, unique to this process. */
static const char *tmp_path(const char *name) {
    static char buf[256];
    snprintf(buf, sizeof buf, "/tmp/musa_test_file_%d_%s", (int)getpid(), name);
    return buf;
}

static unsigned char *read_whole(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)len + 1);
    *n = b ? fread(b, 1, (size_t)len, f) : 0;
    fclose(f);
    return b;
}

TEST(crc32c_known_values) {
    /* RFC 3720's test vectors (iSCSI) */
    unsigned char zeros[32] = {0}, ones[32], inc[32];
    for (int i = 0; i < 32; i++) ones[i] = 0xff, inc[i] = (unsigned char)i;
    CHECK(musa_crc32c(0, zeros, 32) == 0x8a9136aa);
    CHECK(musa_crc32c(0, ones, 32) == 0x62a8ab43);
    CHECK(musa_crc32c(0, inc, 32) == 0x46dd794e);
    CHECK(musa_crc32c(0, "123456789", 9) == 0xe3069283);
    /* incremental == whole, from any split and alignment */
    for (int cut = 0; cut <= 9; cut++)
        CHECK(musa_crc32c(musa_crc32c(0, "123456789", (size_t)cut), &"123456789"[cut],
                          (size_t)(9 - cut)) == 0xe3069283);
}

TEST(json_reader_accepts_and_rejects) {
    musa_arena a;
    musa_arena_init(&a, 0);
    const musa_json *r;
    char why[160];
    const char *good =
        " {\"a\": [1, -2.5e3, true, null, \"x\\u00e9\\ud83d\\ude00\\n\"], \"b\": {}}";
    CHECK_OK(musa_json_parse(&a, good, strlen(good), &r, why, sizeof why));
    const musa_json *arr = musa_json_get(r, "a");
    CHECK(arr && arr->type == MUSA_JSON_ARRAY && arr->n == 5);
    CHECK(arr->kid[0].is_int && arr->kid[0].i == 1);
    CHECK(!arr->kid[1].is_int && arr->kid[1].num == -2500);
    CHECK(!strcmp(arr->kid[4].str, "x\xc3\xa9\xf0\x9f\x98\x80\n"));
    static const struct {
        const char *text, *why;
    } bad[] = {
        {"{\"a\": 1, \"a\": 2}", "duplicate member name"},
        {"[1, 2", "unterminated array"},
        {"[01]", "leading zeros"},
        {"\"\x01\"", "control byte"},
        {"\"\xff\"", "invalid UTF-8"},
        {"\"\xc0\x80\"", "invalid UTF-8"},
        {"\"\\ud800\"", "without its low half"},
        {"\"\\udc00\"", "lone low surrogate"},
        {"\"\\x\"", "unknown escape"},
        {"1e999", "out of range"},
        {"[1] x", "text after the end"},
        {"", "unexpected end"},
        {"tru", "unexpected 't'"},
        {"{\"a\" 1}", "expected ':'"},
        {"{1: 2}", "member name"},
    };
    for (int i = 0; i < MUSA_ARRAY_LEN(bad); i++) {
        int rc = musa_json_parse(&a, bad[i].text, strlen(bad[i].text), &r, why, sizeof why);
        CHECK_MSG(rc == MUSA_ERR_VALUE && strstr(why, bad[i].why), "%s: got rc %d '%s'",
                  bad[i].text, rc, why);
    }
    /* nesting is capped, not a stack overflow */
    char deep[200001];
    memset(deep, '[', 100000), memset(deep + 100000, ']', 100000), deep[200000] = 0;
    CHECK(musa_json_parse(&a, deep, 200000, &r, why, sizeof why) == MUSA_ERR_VALUE);
    CHECK(strstr(why, "nesting deeper"));
    musa_arena_free(&a);
}

/* A small file: a float32 matrix, a non-contiguous view of it, an int64
 * vector, a 0-d double, an empty tensor. */
static int save_small(const char *path, musa_tensor **keep) {
    musa_tensor *m = musa_arange(0, 12, 1, MUSA_DTYPE_FLOAT32);
    musa_tensor *m2 = musa_reshape(m, 2, (int64_t[]){3, 4});
    musa_tensor *t = musa_transpose(m2, 0, 1);
    musa_tensor *iv = musa_arange(-3, 3, 1, MUSA_DTYPE_INT64);
    musa_tensor *s = musa_scalar(2.5, MUSA_DTYPE_FLOAT64);
    musa_tensor *e = musa_empty(2, (int64_t[]){0, 5}, MUSA_DTYPE_FLOAT32);
    musa_file_writer *w = musa_file_writer_new("test");
    int rc = !w || !t || !iv || !s || !e;
    musa_tensor *all[5] = {m2, t, iv, s, e};
    for (int i = 0; !rc && i < 5; i++) rc = musa_file_writer_add_tensor(w, all[i]) != i;
    if (!rc) rc = musa_file_writer_set_json(w, "note", "{\"hello\": [1, 2]}");
    if (!rc) rc = musa_file_writer_save(w, path);
    musa_file_writer_free(w);
    for (int i = 0; i < 5; i++) {
        if (keep)
            keep[i] = all[i];
        else
            musa_tensor_release(all[i]);
    }
    musa_tensor_release(m);
    return rc;
}

static bool check_small(musa_file *f, musa_tensor **orig) {
    if (!f || musa_file_num_tensors(f) != 5 || strcmp(musa_file_kind(f), "test")) return false;
    bool ok = true;
    musa_tensor *got[5];
    for (int i = 0; i < 5; i++) {
        got[i] = musa_file_tensor(f, i);
        ok = ok && got[i] && musa_tensor_dtype(got[i]) == musa_tensor_dtype(orig[i]) &&
             (musa_tensor_numel(got[i]) == 0 || same_values(got[i], orig[i]));
    }
    /* the transposed view comes back as a view of the matrix's storage */
    ok = ok && musa_tensor_shares_storage(got[0], got[1]) && !musa_tensor_is_contiguous(got[1]);
    for (int i = 0; i < 5; i++) musa_tensor_release(got[i]);
    return ok;
}

TEST(file_round_trip_with_views_and_mmap) {
    const char *path = tmp_path("small.musa");
    musa_tensor *orig[5];
    CHECK_OK(save_small(path, orig));
    for (int flags = 0; flags <= MUSA_FILE_MMAP; flags++) {
        musa_file *f = musa_file_open(path, flags);
        CHECK(f);
        CHECK(check_small(f, orig));
        CHECK(strstr(musa_file_header(f), "\"note\": {\"hello\": [1, 2]}"));
        /* tensors outlive the file; writing one never changes the file */
        musa_tensor *x = musa_file_tensor(f, 0);
        musa_file_close(f);
        CHECK_OK(musa_fill_(x, 7));
        musa_tensor_release(x);
        f = musa_file_open(path, flags);
        CHECK(check_small(f, orig));
        musa_file_close(f);
    }
    for (int i = 0; i < 5; i++) musa_tensor_release(orig[i]);
    unlink(path);
}

TEST(file_writer_dedups_and_checks) {
    musa_tensor *a = musa_ones(1, (int64_t[]){4}, MUSA_DTYPE_FLOAT32);
    musa_file_writer *w = musa_file_writer_new("object");
    CHECK(w);
    CHECK(musa_file_writer_add_tensor(w, a) == 0);
    CHECK(musa_file_writer_add_tensor(w, a) == 0);
    CHECK_ERR(musa_file_writer_set_json(w, "object", "{\"a\": }") == MUSA_OK, MUSA_ERR_VALUE,
              "not valid JSON");
    CHECK_ERR(musa_file_writer_set_json(w, "storages", "[]") == MUSA_OK, MUSA_ERR_VALUE,
              "not kind, storages or tensors");
    musa_tensor *meta = musa_empty_meta(MUSA_DTYPE_FLOAT32, 1, (int64_t[]){3});
    CHECK_ERR(musa_file_writer_add_tensor(w, meta) >= 0, MUSA_ERR_VALUE, "meta tensor");
    CHECK_ERR(musa_file_writer_new("Bad Kind") != NULL, MUSA_ERR_VALUE, "kind");
    CHECK_ERR(musa_file_writer_save(w, "/nonexistent_dir/x.musa") == MUSA_OK, MUSA_ERR_IO,
              "temporary file");
    musa_file_writer_free(w);
    musa_tensor_release(meta);
    musa_tensor_release(a);
}

/* The bytes of a file with this header and data section, CRCs correct. */
static unsigned char *craft(const char *header, const void *data, size_t dlen, size_t *n) {
    size_t hlen = strlen(header), off = (64 + hlen + 63) / 64 * 64;
    *n = off + dlen;
    unsigned char *b = calloc(1, *n + 1);
    memcpy(b, "\x89MUSA\r\n\x1a", 8);
    uint32_t v = 1, hcrc = musa_crc32c(0, header, hlen), dcrc = musa_crc32c(0, data, dlen);
    uint64_t hl = hlen, o = off, dl = dlen;
    memcpy(b + 8, &v, 4), memcpy(b + 16, &hl, 8), memcpy(b + 24, &o, 8), memcpy(b + 32, &dl, 8);
    memcpy(b + 40, &hcrc, 4), memcpy(b + 44, &dcrc, 4);
    memcpy(b + 64, header, hlen);
    memcpy(b + off, data, dlen);
    uint32_t pcrc = musa_crc32c(0, b, 48);
    memcpy(b + 48, &pcrc, 4);
    return b;
}

/* Opening must fail with MUSA_ERR_IO and a message holding `why`. */
static bool rejects(const unsigned char *b, size_t n, const char *why) {
    musa_clear_error();
    musa_file *f = musa_file_open_memory(b, n);
    if (f) {
        musa_file_close(f);
        fprintf(stderr, "    accepted a file that should fail with '%s'\n", why);
        return false;
    }
    if (musa_last_error_code() != MUSA_ERR_IO || !strstr(musa_last_error(), why) ||
        !strstr(musa_last_error(), "[musa_file_open] <memory>: ")) {
        fprintf(stderr, "    expected '%s', got %s '%s'\n", why,
                musa_status_name(musa_last_error_code()), musa_last_error());
        return false;
    }
    return true;
}

#define ST(d, n, o) "{\"dtype\": \"" d "\", \"numel\": " #n ", \"offset\": " #o "}"
#define TS(s, o, shape, strides)                                                                   \
    "{\"storage\": " #s ", \"offset\": " #o ", \"shape\": " shape ", \"strides\": " strides "}"

TEST(file_reader_rejects_each_class_by_name) {
    float data[32] = {0};
    ((unsigned char *)data)[65] = 2; /* a bool storage at byte 64: 0, 2, 0, 0 */
    static const struct {
        const char *header, *why;
    } cases[] = {
        {"{\"kind\": \"x\", \"storages\": [" ST("float32", 4, 0) "], \"tensors\": [" TS(0, 0, "[4]",
                                                                                        "[1]") "]}",
         NULL}, /* the valid base case */
        {"[1]", "the header must be an object"},
        {"{\"storages\": [], \"tensors\": []}", "\"kind\""},
        {"{\"kind\": \"UP\", \"storages\": [], \"tensors\": []}", "\"kind\""},
        {"{\"kind\": \"x\", \"tensors\": []}", "has no \"storages\""},
        {"{\"kind\": \"x\", \"storages\": {}, \"tensors\": []}", "must be an array"},
        {"{\"kind\": \"x\", \"storages\": [" ST("float33", 4, 0) "], \"tensors\": []}",
         "unknown dtype \"float33\""},
        {"{\"kind\": \"x\", \"storages\": [" ST("float32", -1, 0) "], \"tensors\": []}",
         "storages[0].numel is -1"},
        {"{\"kind\": \"x\", \"storages\": [" ST("float32", 33, 0) "], \"tensors\": []}",
         "storages[0].numel is 33"},
        {"{\"kind\": \"x\", \"storages\": [" ST("float32", 4, 32) "], \"tensors\": []}",
         "not a multiple of 64"},
        {"{\"kind\": \"x\", \"storages\": [" ST("float32", 20, 64) "], \"tensors\": []}",
         "run past the 128-byte data section"},
        {"{\"kind\": \"x\", \"storages\": [" ST("float32", 4, 0) ", " ST("float32", 20,
                                                                         0) "], \"tensors\": []}",
         "overlaps"},
        {"{\"kind\": \"x\", \"storages\": [" ST("float32", 4,
                                                18446744073709551615) "], \"tensors\": []}",
         "must be an integer"},
        {"{\"kind\": \"x\", \"storages\": [{\"dtype\": \"float32\", \"numel\": 4, \"offset\": 0, "
         "\"x\": 1}], \"tensors\": []}",
         "unknown member \"x\""},
        {"{\"kind\": \"x\", \"storages\": [" ST("float32", 4, 0) "], \"tensors\": [" TS(1, 0, "[4]",
                                                                                        "[1]") "]}",
         "tensors[0].storage is 1"},
        {"{\"kind\": \"x\", \"storages\": [" ST("float32", 4, 0) "], \"tensors\": [" TS(0, 0, "[5]",
                                                                                        "[1]") "]}",
         "reaches element 4 of storages[0], which has 4"},
        {"{\"kind\": \"x\", \"storages\": [" ST("float32", 4,
                                                0) "], \"tensors\": [" TS(0, 0, "[-1]", "[1]") "]}",
         "tensors[0].shape[0] is -1"},
        {"{\"kind\": \"x\", \"storages\": [" ST("float32", 4, 0) "], \"tensors\": [" TS(
             0, 0, "[0, 4294967296, 4294967296]", "[1, 1, 1]") "]}",
         "overflows 64 bits"},
        {"{\"kind\": \"x\", \"storages\": [" ST("float32", 4, 0) "], \"tensors\": [" TS(
             0, 0, "[2, 2]", "[1]") "]}",
         "2 dims but 1 strides"},
        {"{\"kind\": \"x\", \"storages\": [" ST("float32", 4, 0) "], \"tensors\": [" TS(
             0, 0, "[1,1,1,1,1,1,1,1,1]", "[1,1,1,1,1,1,1,1,1]") "]}",
         "at most 8 are supported"},
        {"{\"kind\": \"x\", \"storages\": [" ST("float32", 4, 0) "], \"tensors\": [" TS(
             0, 0, "[2]", "[4611686018427387904]") "]}",
         "reaches element"},
        {"{\"kind\": \"x\", \"storages\": [" ST("float32", 4, 0) "], \"tensors\": [" TS(
             0, 0, "[4]", "[1.5]") "]}",
         "must be an integer"},
        {"{\"kind\": \"x\", \"kind\": \"y\", \"storages\": [], \"tensors\": []}",
         "duplicate member name \"kind\""},
        {"{\"kind\": \"x\", \"storages\": [], \"tensors\": [}", "invalid JSON: byte"},
        {"{\"kind\": \"x\", \"storages\": [" ST("bool", 4, 64) "], \"tensors\": []}",
         "storages[0] is bool but element 1 is the byte 2"},
    };
    for (int i = 0; i < MUSA_ARRAY_LEN(cases); i++) {
        size_t n;
        unsigned char *b = craft(cases[i].header, data, sizeof data, &n);
        if (!cases[i].why) {
            musa_file *f = musa_file_open_memory(b, n);
            CHECK_MSG(f && musa_file_num_tensors(f) == 1, "base case: %s", musa_last_error());
            musa_file_close(f);
        } else {
            CHECK_MSG(rejects(b, n, cases[i].why), "case %d: %s", i, cases[i].header);
        }
        free(b);
    }
    /* the prelude and the sections */
    size_t n;
    const char *ok = cases[0].header;
    unsigned char *b = craft(ok, data, sizeof data, &n);
    CHECK(rejects(b, 10, "shorter than the 64-byte prelude"));
    CHECK(rejects((const unsigned char *)"PK\x03\x04 and more bytes", 20, "a zip file"));
    CHECK(rejects((const unsigned char *)"hello", 5, "magic bytes are wrong"));
    CHECK(rejects(b, n - 1, "truncated"));
    b[8] = 2; /* a newer version, its prelude CRC fixed */
    uint32_t pcrc = musa_crc32c(0, b, 48);
    memcpy(b + 48, &pcrc, 4);
    CHECK(
        rejects(b, n, "format version 2; this build of musa reads version 1 (written by a newer"));
    free(b);
    b = craft(ok, data, sizeof data, &n);
    b[70] ^= 1;
    CHECK(rejects(b, n, "header at byte 64: CRC mismatch"));
    b[70] ^= 1, b[n - 1] ^= 0x80;
    CHECK(rejects(b, n, "data section at byte"));
    b[n - 1] ^= 0x80, b[17] ^= 1;
    CHECK(rejects(b, n, "prelude at byte 48: CRC mismatch"));
    free(b);
}

TEST(file_every_truncation_and_1000_byte_flips_fail_cleanly) {
    const char *path = tmp_path("flips.musa");
    CHECK_OK(save_small(path, NULL));
    size_t n;
    unsigned char *b = read_whole(path, &n);
    CHECK(b && n > 64);
    for (size_t len = 0; len < n; len++) {
        musa_clear_error();
        musa_file *f = musa_file_open_memory(b, len);
        CHECK_MSG(!f && musa_last_error_code() == MUSA_ERR_IO, "length %zu of %zu: %s", len, n,
                  musa_last_error());
    }
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int k = 0; k < 1000; k++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        size_t at = (size_t)(s % n);
        unsigned char flip = (unsigned char)(1 + (s >> 32) % 255);
        b[at] ^= flip;
        musa_clear_error();
        musa_file *f = musa_file_open_memory(b, n);
        b[at] ^= flip;
        /* every byte is under a CRC or must be zero: a flip never loads */
        CHECK_MSG(!f && musa_last_error_code() == MUSA_ERR_IO && strstr(musa_last_error(), "byte"),
                  "flip 0x%02x at byte %zu of %zu: %s", flip, at, n,
                  f ? "loaded" : musa_last_error());
    }
    free(b);
    unlink(path);
}

/* Save model a or b alternately forever (a child killed by the test). */
static void save_forever(const char *path, musa_tensor *a, musa_tensor *b) {
    for (uint64_t i = 0;; i++) {
        musa_file_writer *w = musa_file_writer_new(i % 2 ? "b" : "a");
        musa_file_writer_add_tensor(w, i % 2 ? b : a);
        musa_file_writer_save(w, path);
        musa_file_writer_free(w);
    }
}

TEST(file_save_killed_at_random_moments_leaves_old_or_new) {
    char dir[128];
    snprintf(dir, sizeof dir, "/tmp/musa_kill_%d", (int)getpid());
    CHECK(mkdir(dir, 0700) == 0);
    char path[192];
    snprintf(path, sizeof path, "%s/model.musa", dir);
    /* big enough that a save takes a while, so kills land mid-write */
    musa_tensor *a = musa_full(1, (int64_t[]){1 << 18}, 1.0, MUSA_DTYPE_FLOAT32);
    musa_tensor *b = musa_full(1, (int64_t[]){1 << 17}, 2.0, MUSA_DTYPE_FLOAT32);
    musa_file_writer *w = musa_file_writer_new("a");
    musa_file_writer_add_tensor(w, a);
    CHECK_OK(musa_file_writer_save(w, path));
    musa_file_writer_free(w);
    srand((unsigned)time(NULL));
    int seen[2] = {0, 0};
    for (int k = 0; k < 100; k++) {
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) save_forever(path, a, b);
        usleep((useconds_t)(rand() % 20000));
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        musa_file *f = musa_file_open(path, 0);
        CHECK_MSG(f, "after kill %d: %s", k, musa_last_error());
        bool is_a = !strcmp(musa_file_kind(f), "a");
        musa_tensor *t = musa_file_tensor(f, 0);
        double sum = 0;
        musa_tensor *s = musa_sum(t, 0, NULL, false);
        CHECK(s && !musa_tensor_item(s, &sum));
        CHECK(sum == (is_a ? (1 << 18) : 2.0 * (1 << 17)));
        seen[!is_a]++;
        musa_tensor_release(s), musa_tensor_release(t);
        musa_file_close(f);
    }
    fprintf(stderr, "    100 kills: %d left model a, %d model b\n", seen[0], seen[1]);
    musa_tensor_release(a), musa_tensor_release(b);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

TEST(file_writer_depth_matches_the_reader_and_scales) {
    /* arrays nested 64 deep are the deepest member the reader takes (it
     * counts the header object as level 0): the writer refuses one more */
    char deep[200];
    musa_file_writer *w = musa_file_writer_new("object");
    for (int depth = 64; depth <= 65; depth++) {
        memset(deep, '[', (size_t)depth), memset(deep + depth, ']', (size_t)depth);
        deep[2 * depth] = 0;
        int rc = musa_file_writer_set_json(w, "object", deep);
        CHECK_MSG((rc == MUSA_OK) == (depth == 64), "depth %d: %s", depth, musa_last_error());
    }
    memset(deep, '[', 64), memset(deep + 64, ']', 64), deep[128] = 0;
    CHECK_OK(musa_file_writer_set_json(w, "object", deep));
    /* 20,000 tensors and a 50,000-member object: both linear */
    musa_tensor *base = musa_zeros(1, (int64_t[]){20000}, MUSA_DTYPE_FLOAT32);
    for (int i = 0; i < 20000; i++) {
        musa_tensor *v = musa_slice(base, 0, i, i + 1, 1);
        CHECK(musa_file_writer_add_tensor(w, v) == i);
        musa_tensor_release(v);
    }
    {
        size_t cap = 50000 * 24 + 16, k = 0;
        char *obj = malloc(cap);
        k += (size_t)snprintf(obj + k, cap - k, "{");
        for (int i = 0; i < 50000; i++)
            k += (size_t)snprintf(obj + k, cap - k, "%s\"k%d\": %d", i ? ", " : "", i, i);
        snprintf(obj + k, cap - k, "}");
        CHECK_OK(musa_file_writer_set_json(w, "names", obj));
        free(obj);
    }
    const char *path = tmp_path("many.musa");
    CHECK_OK(musa_file_writer_save(w, path));
    musa_file_writer_free(w);
    musa_tensor_release(base);
    musa_file *f = musa_file_open(path, 0);
    CHECK(f && musa_file_num_tensors(f) == 20000);
    musa_tensor *a = musa_file_tensor(f, 0), *b = musa_file_tensor(f, 19999);
    CHECK(musa_tensor_shares_storage(a, b)); /* the slices are views of one storage again */
    musa_tensor_release(a), musa_tensor_release(b);
    musa_file_close(f);
    unlink(path);
}

TEST(npy_int16_round_trip) {
    int16_t vals[4] = {-32768, -2, 300, 32767};
    musa_tensor *x = musa_from_data(vals, 2, (int64_t[]){2, 2}, MUSA_DTYPE_INT16);
    CHECK(x);
    const char *path = tmp_path("i16.npy");
    CHECK_OK(musa_npy_save(path, x));
    size_t n = 0;
    unsigned char *bytes = read_whole(path, &n);
    CHECK(bytes && n > 10);
    bytes[n] = 0; /* (read_whole leaves a byte spare) the header is text before any NUL */
    CHECK(strstr((char *)bytes + 10, "'descr': '<i2'")); /* NumPy's own name for it */
    musa_tensor *y = musa_npy_read_memory(bytes, n);
    CHECK(y && musa_tensor_dtype(y) == MUSA_DTYPE_INT16 && musa_tensor_ndim(y) == 2);
    CHECK(!memcmp(musa_tensor_data(y), vals, sizeof vals));
    free(bytes);
    musa_tensor_release(x), musa_tensor_release(y);
    unlink(path);
}
