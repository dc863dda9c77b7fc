/* The fuzzers' regression files: every input the libFuzzer harnesses of
 * tests/fuzz/ ever crashed on is kept in tests/fuzz/crashes/<fuzzer>/ and
 * replayed here through the same harness code (fuzz_op_call_one), with the
 * seed corpus, in the ordinary build and under ASan+UBSan (bash run.sh
 * sanitize). A replay fails on a harness finding (a broken error contract)
 * and, in the sanitizer build, aborts on any sanitizer report. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"

int fuzz_op_call_one(const uint8_t *data, size_t size);
int fuzz_file_load_one(const uint8_t *data, size_t size);
int fuzz_onnx_load_one(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Replay every regular file of dir; the number replayed, or -1 when the
 * directory cannot be read. Each file with a finding fails the test. */
static int replay_dir(const char *dir, int (*one)(const uint8_t *, size_t)) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    static bool initialised;
    if (!initialised) LLVMFuzzerInitialize(NULL, NULL), initialised = true;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (e->d_name[0] == '.' || stat(path, &st) || !S_ISREG(st.st_mode)) continue;
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        uint8_t *buf = malloc((size_t)st.st_size + 1);
        size_t len = buf ? fread(buf, 1, (size_t)st.st_size, f) : 0;
        fclose(f);
        int findings = buf ? one(buf, len) : 1;
        free(buf);
        if (findings) harness_fail(__FILE__, __LINE__, "%s: %d finding(s)", path, findings);
        n++;
    }
    closedir(d);
    return n;
}

TEST(op_call_crashers_replay_clean) {
    int n = replay_dir(MUSA_FUZZ_DIR "/crashes/op_call", fuzz_op_call_one);
    CHECK_MSG(n > 0, "no regression files in %s", MUSA_FUZZ_DIR "/crashes/op_call");
}

TEST(op_call_seed_corpus_replays_clean) {
    int n = replay_dir(MUSA_FUZZ_DIR "/corpus/op_call", fuzz_op_call_one);
    CHECK_MSG(n > 0, "no seeds in %s", MUSA_FUZZ_DIR "/corpus/op_call");
}

TEST(file_load_seed_corpus_replays_clean) {
    int n = replay_dir(MUSA_FUZZ_DIR "/corpus/file_load", fuzz_file_load_one);
    CHECK_MSG(n > 0, "no seeds in %s", MUSA_FUZZ_DIR "/corpus/file_load");
}

/* The seeds are made by tests/fuzz/make_file_load_seeds.py; without its saved
 * models the fuzzer never reaches the graph reader (a *.musa ignore rule once
 * kept them out of the repository unnoticed). */
TEST(file_load_seed_corpus_holds_models_and_containers) {
    const char *dir = MUSA_FUZZ_DIR "/corpus/file_load";
    DIR *d = opendir(dir);
    CHECK_MSG(d != NULL, "cannot read %s", dir);
    int models = 0, objects = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        musa_file *f = e->d_name[0] == '.' ? NULL : musa_file_open(path, 0);
        if (!f) continue;
        bool model = !strcmp(musa_file_kind(f), "model");
        objects += !model;
        musa_file_close(f);
        musa_model *m = model ? musa_model_load(path, 0) : NULL;
        models += m != NULL;
        musa_model_free(m);
    }
    if (d) closedir(d);
    musa_clear_error();
    CHECK_MSG(models >= 5, "%d loadable models among the seeds in %s", models, dir);
    CHECK_MSG(objects >= 4, "%d musa.save containers among the seeds in %s", objects, dir);
}

TEST(file_load_crashers_replay_clean) {
    /* each file with a finding fails the test inside replay_dir; the folder
     * is absent while the fuzzer has found nothing */
    (void)replay_dir(MUSA_FUZZ_DIR "/crashes/file_load", fuzz_file_load_one);
}

TEST(onnx_load_seed_corpus_replays_clean) {
    int n = replay_dir(MUSA_FUZZ_DIR "/corpus/onnx_load", fuzz_onnx_load_one);
    CHECK_MSG(n >= 10, "%d seeds in %s", n, MUSA_FUZZ_DIR "/corpus/onnx_load");
}

/* Every seed (tests/fuzz/make_onnx_seeds.py) loads and runs, so that the
 * fuzzer starts from models that reach the ops, not from load errors. */
TEST(onnx_load_seeds_load_and_run) {
    const char *dir = MUSA_FUZZ_DIR "/corpus/onnx_load";
    DIR *d = opendir(dir);
    CHECK_MSG(d != NULL, "cannot read %s", dir);
    int ran = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char path[4096];
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        musa_model *m = musa_model_load(path, 0);
        CHECK_MSG(m != NULL, "%s: %s", path, musa_last_error());
        if (!m) continue;
        int n = musa_model_num_inputs(m), no = musa_model_num_outputs(m);
        musa_tensor *in[4] = {NULL}, *out[4] = {NULL};
        CHECK(n <= 4 && no <= 4);
        for (int i = 0; i < n && i < 4; i++) {
            musa_dtype dt;
            int nd;
            int64_t dims[MUSA_MAX_DIMS];
            musa_model_input(m, i, NULL, &dt, &nd, dims, NULL, NULL);
            for (int k = 0; k < nd; k++) dims[k] = dims[k] < 0 ? 2 : dims[k];
            in[i] = musa_full(nd, dims, 1.0, dt); /* pads of 1 for the reflect seed */
        }
        int rc = n <= 4 && no <= 4 ? musa_model_run(m, n, in, no, out) : -1;
        CHECK_MSG(rc == MUSA_OK, "%s: %s", path, musa_last_error());
        ran += rc == MUSA_OK;
        for (int i = 0; i < 4; i++) musa_tensor_release(in[i]), musa_tensor_release(out[i]);
        musa_model_free(m);
    }
    if (d) closedir(d);
    CHECK_MSG(ran >= 10, "%d seeds ran", ran);
}

TEST(onnx_load_crashers_replay_clean) {
    (void)replay_dir(MUSA_FUZZ_DIR "/crashes/onnx_load", fuzz_onnx_load_one);
}

/* The public API on an ONNX model: its signature (free dims -1), runs at
 * two sizes (two plans), and the errors of bad files and bad inputs. */
TEST(onnx_model_signature_runs_and_errors) {
    const char *path = MUSA_FUZZ_DIR "/corpus/onnx_load/torch_block_dynamic.onnx";
    musa_model *m = musa_model_load(path, 0);
    CHECK_MSG(m != NULL, "%s", musa_last_error());
    if (!m) return;
    const char *name = NULL;
    musa_dtype dt;
    int nd = 0;
    int64_t dims[MUSA_MAX_DIMS];
    CHECK(musa_model_num_inputs(m) == 1 && musa_model_num_outputs(m) == 1);
    CHECK(musa_model_input(m, 0, &name, &dt, &nd, dims, NULL, NULL) == MUSA_OK);
    CHECK(name && !strcmp(name, "x") && dt == MUSA_DTYPE_FLOAT32 && nd == 3);
    CHECK(dims[0] == -1 && dims[1] == -1 && dims[2] == 4);
    CHECK(musa_model_graph(m) == NULL); /* nothing captured before a run */
    int64_t sizes[2][3] = {{2, 5, 4}, {1, 3, 4}};
    for (int k = 0; k < 2; k++) {
        musa_tensor *x = musa_randn(3, sizes[k], MUSA_DTYPE_FLOAT32), *y = NULL;
        CHECK_MSG(musa_model_run(m, 1, &x, 1, &y) == MUSA_OK, "%s", musa_last_error());
        CHECK(y && musa_tensor_ndim(y) == 3 && !memcmp(musa_tensor_shape(y), sizes[k], 24));
        musa_tensor_release(x), musa_tensor_release(y);
    }
    CHECK(musa_model_graph(m) != NULL);
    int64_t bad[3] = {2, 5, 3};
    musa_tensor *x = musa_zeros(3, bad, MUSA_DTYPE_FLOAT32), *y = NULL;
    CHECK(musa_model_run(m, 1, &x, 1, &y) == MUSA_ERR_VALUE && y == NULL);
    CHECK_MSG(strstr(musa_last_error(), "input 'x' has shape (2, 5, 3); dim 2 must be 4"), "%s",
              musa_last_error());
    musa_tensor_release(x);
    musa_model_free(m);
    CHECK(musa_model_load("/nonexistent/m.onnx", 0) == NULL &&
          musa_last_error_code() == MUSA_ERR_IO);
    const uint8_t junk[] = {0x08, 0xff, 0xff, 0xff}; /* a ModelProto tag, then a broken varint */
    CHECK(musa_model_load_memory(junk, sizeof junk) == NULL &&
          musa_last_error_code() == MUSA_ERR_IO);
    CHECK_MSG(!strncmp(musa_last_error(), "[onnx] <bytes>: not an ONNX model", 33), "%s",
              musa_last_error());
    musa_clear_error();
}
