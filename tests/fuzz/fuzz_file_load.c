/*
 * fuzz_file_load.c - a libFuzzer harness over the file readers: the .musa
 * container (musa_file_open_memory), saved models (musa_model_load_memory
 * on the same bytes once a file opens as a model, then one run on inputs
 * of zeros), and .npy files (musa_npy_read_memory, for inputs starting
 * with NumPy's magic).
 *
 * Each input is tried twice: as it is, and repaired - the prelude's
 * lengths made consistent with the input's size and all three CRCs
 * recomputed - so that mutations reach the JSON and the validation behind
 * the checksums instead of stopping at a CRC mismatch. A file that opens
 * has every element of every tensor read (a sum), so a view reaching
 * outside its storage shows up under ASan.
 *
 * The contract checked: opening returns a file, or NULL with
 * musa_last_error_code() MUSA_ERR_IO (or MUSA_ERR_NOMEM) and a message
 * starting with "[musa_file_open] "; anything else is a finding, as is
 * every sanitizer report, crash, leak or hang. The seeds
 * (tests/fuzz/corpus/file_load) are real saved files; tests/c/test_fuzz.c
 * replays them and every kept crasher (tests/fuzz/crashes/file_load).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/crc32c.h"
#include "musa.h"

int fuzz_file_load_one(const uint8_t *data, size_t size);

static int findings;

#define FINDING(...)                                                                               \
    do {                                                                                           \
        fprintf(stderr, "FINDING: " __VA_ARGS__);                                                  \
        fprintf(stderr, "\n");                                                                     \
        findings++;                                                                                \
    } while (0)

static uint64_t rd64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Make the prelude's lengths agree with n and recompute the CRCs. */
static void repair(uint8_t *b, size_t n) {
    if (n < 64) return;
    uint64_t hlen = rd64(b + 16) % (n - 63);
    uint64_t doff = (64 + hlen + 63) / 64 * 64, dlen = doff <= n ? n - doff : 0;
    if (doff > n) doff = n;
    uint32_t hcrc = musa_crc32c(0, b + 64, hlen), dcrc = musa_crc32c(0, b + doff, dlen);
    memcpy(b + 16, &hlen, 8), memcpy(b + 24, &doff, 8), memcpy(b + 32, &dlen, 8);
    memcpy(b + 40, &hcrc, 4), memcpy(b + 44, &dcrc, 4);
    uint32_t pcrc = musa_crc32c(0, b, 48);
    memcpy(b + 48, &pcrc, 4);
}

/* A loaded model runs once on zeros of its input shapes (dynamic dims at
 * their smallest), when those are small. Any failure must be a clean error. */
static void try_model(const uint8_t *data, size_t size) {
    musa_clear_error();
    musa_model *m = musa_model_load_memory(data, size);
    if (!m) {
        int code = musa_last_error_code();
        if (code == MUSA_OK || musa_last_error()[0] != '[')
            FINDING("model load failed with %s '%s'", musa_status_name(code), musa_last_error());
        return;
    }
    int n = musa_model_num_inputs(m), no = musa_model_num_outputs(m);
    musa_tensor *in[16] = {NULL}, *out[16] = {NULL};
    bool ok = n <= 16 && no <= 16;
    for (int i = 0; ok && i < n; i++) {
        musa_dtype dt;
        int nd;
        int64_t dims[MUSA_MAX_DIMS], lo, hi, numel = 1;
        musa_model_input(m, i, NULL, &dt, &nd, dims, &lo, &hi);
        for (int d = 0; d < nd; d++) {
            if (dims[d] < 0) dims[d] = lo;
            if (dims[d] > (1 << 16) || (numel *= dims[d]) > (1 << 16)) ok = false;
        }
        if (ok && !(in[i] = musa_zeros(nd, dims, dt))) ok = false;
    }
    if (ok) {
        musa_clear_error();
        int rc = musa_model_run(m, n, in, no, out);
        if (rc && (rc != musa_last_error_code() || musa_last_error()[0] != '['))
            FINDING("model run failed with %s '%s'", musa_status_name(rc), musa_last_error());
    }
    for (int i = 0; i < 16; i++) musa_tensor_release(in[i]), musa_tensor_release(out[i]);
    musa_model_free(m);
}

static void try_open(const uint8_t *data, size_t size) {
    musa_clear_error();
    musa_file *f = musa_file_open_memory(data, size);
    if (!f) {
        int code = musa_last_error_code();
        const char *msg = musa_last_error();
        if ((code != MUSA_ERR_IO && code != MUSA_ERR_NOMEM) ||
            strncmp(msg, "[musa_file_open] ", 17))
            FINDING("open failed with %s '%s'", musa_status_name(code), msg);
        return;
    }
    if (!musa_file_kind(f) || !musa_file_header(f)) FINDING("an open file without kind or header");
    for (int64_t i = 0; i < musa_file_num_tensors(f); i++) {
        musa_tensor *t = musa_file_tensor(f, i);
        if (!t) {
            FINDING("tensor %lld of %lld is NULL: %s", (long long)i,
                    (long long)musa_file_num_tensors(f), musa_last_error());
            continue;
        }
        /* read every element (the sum of a bool or integer tensor is fine too) */
        musa_tensor *s = musa_sum(t, 0, NULL, false);
        musa_tensor_release(s);
        musa_tensor_release(t);
    }
    bool model = !strcmp(musa_file_kind(f), "model");
    musa_file_close(f);
    if (model) try_model(data, size);
}

int fuzz_file_load_one(const uint8_t *data, size_t size) {
    findings = 0;
    if (size >= 6 && !memcmp(data, "\x93NUMPY", 6)) {
        musa_clear_error();
        musa_tensor *t = musa_npy_read_memory(data, size);
        if (!t && (musa_last_error_code() == MUSA_OK ||
                   strncmp(musa_last_error(), "[musa_npy_read] ", 16)))
            FINDING("npy read failed with %s '%s'", musa_status_name(musa_last_error_code()),
                    musa_last_error());
        musa_tensor_release(t);
        return findings;
    }
    try_open(data, size);
    uint8_t *copy = malloc(size ? size : 1);
    if (copy) {
        memcpy(copy, data, size);
        repair(copy, size);
        try_open(copy, size);
        free(copy);
    }
    musa_clear_error();
    return findings;
}

#ifdef MUSA_FUZZ_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (fuzz_file_load_one(data, size)) abort();
    return 0;
}
#endif
