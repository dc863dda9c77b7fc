/*
 * fuzz_file_load.c - a libFuzzer harness over the .musa reader
 * (musa_file_open_memory, and musa_model_load_memory on the same bytes
 * once a file opens as a model).
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
    musa_file_close(f);
}

int fuzz_file_load_one(const uint8_t *data, size_t size) {
    findings = 0;
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
