/*
 * fuzz_onnx_load.c - a libFuzzer harness over the C importer of ONNX files
 * (src/io/onnx*.c): musa_model_load_memory on the bytes as a
 * serialized ModelProto, then, when the model loads, runs on inputs of
 * zeros and of small integers (free dims at 1, then 2), as musa-run would.
 *
 * Inputs whose first byte is not a ModelProto field tag would be read as
 * .musa files (fuzz_file_load covers those): they are skipped.
 *
 * The contract checked: loading returns a model, or NULL with
 * musa_last_error_code() MUSA_ERR_IO, MUSA_ERR_NOT_IMPLEMENTED or
 * MUSA_ERR_NOMEM and a message starting with "[onnx] "; a run returns
 * MUSA_OK with every output set, or a status equal to
 * musa_last_error_code() with a message starting with "[". Anything else is
 * a finding, as is every sanitizer report, crash, leak or hang. The seeds
 * (tests/fuzz/corpus/onnx_load, written by make_onnx_seeds.py) are real
 * models: exported by PyTorch and by musa, and ONNX's own node-test models;
 * tests/c/test_fuzz.c replays them and every kept crasher.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "musa.h"

int fuzz_onnx_load_one(const uint8_t *data, size_t size);

static int findings;

#define FINDING(...)                                                                               \
    do {                                                                                           \
        fprintf(stderr, "FINDING: " __VA_ARGS__);                                                  \
        fprintf(stderr, "\n");                                                                     \
        findings++;                                                                                \
    } while (0)

#define MAX_IO 16

/* Run m once on inputs filled with `fill`, free dims at `free_dim`. */
static void run_once(musa_model *m, double fill, int64_t free_dim) {
    int n = musa_model_num_inputs(m), no = musa_model_num_outputs(m);
    if (n > MAX_IO || no > MAX_IO) return;
    musa_tensor *in[MAX_IO] = {NULL}, *out[MAX_IO] = {NULL};
    bool ok = true;
    for (int i = 0; ok && i < n; i++) {
        musa_dtype dt;
        int nd;
        int64_t dims[MUSA_MAX_DIMS], numel = 1;
        if (musa_model_input(m, i, NULL, &dt, &nd, dims, NULL, NULL)) {
            FINDING("musa_model_input(%d) failed: %s", i, musa_last_error());
            ok = false;
            break;
        }
        for (int d = 0; d < nd; d++) {
            if (dims[d] < 0) dims[d] = free_dim;
            if (dims[d] > (1 << 16) || (numel *= dims[d]) > (1 << 16)) ok = false;
        }
        if (ok && !(in[i] = musa_full(nd, dims, fill, dt))) ok = false;
    }
    if (ok) {
        musa_clear_error();
        int rc = musa_model_run(m, n, in, no, out);
        if (rc && (rc != musa_last_error_code() || musa_last_error()[0] != '['))
            FINDING("model run failed with %s '%s'", musa_status_name(rc), musa_last_error());
        for (int j = 0; !rc && j < no; j++)
            if (!out[j]) FINDING("model run succeeded without output %d", j);
    }
    for (int i = 0; i < MAX_IO; i++) musa_tensor_release(in[i]), musa_tensor_release(out[i]);
}

int fuzz_onnx_load_one(const uint8_t *data, size_t size) {
    static const uint8_t tags[] = {0x08, 0x12, 0x1a, 0x22, 0x28, 0x32, 0x3a, 0x42};
    findings = 0;
    if (!size || !memchr(tags, data[0], sizeof tags)) return 0;
    musa_clear_error();
    musa_model *m = musa_model_load_memory(data, size);
    if (!m) {
        int code = musa_last_error_code();
        const char *msg = musa_last_error();
        if ((code != MUSA_ERR_IO && code != MUSA_ERR_NOT_IMPLEMENTED && code != MUSA_ERR_NOMEM) ||
            (strncmp(msg, "[onnx] ", 7) && code != MUSA_ERR_NOMEM))
            FINDING("load failed with %s '%s'", musa_status_name(code), msg);
        return findings;
    }
    run_once(m, 0.0, 1);
    run_once(m, 1.0, 2); /* a second signature: another plan, by-value inputs at 1 */
    run_once(m, 1.0, 2); /* the cached plan */
    musa_model_free(m);
    musa_clear_error();
    return findings;
}

#ifdef MUSA_FUZZ_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (fuzz_onnx_load_one(data, size)) abort();
    return 0;
}
#endif
