/*
 * test_ops.c - the op-table-driven test run. The op tests live in
 * the files in tests/c/ops/, one TEST named op_<name> per row of src/ops/ops.def;
 * this file fails the run when an op has no such test, so a new op without
 * tests cannot land, and when a row's public function is not what its `fn`
 * column says.
 */
#include <dlfcn.h>

#include "harness.h"

bool harness_has_test(const char *name);

TEST(every_op_has_a_test) {
    int missing = 0;
    for (int op = 0; op < musa_op_count(); op++) {
        char name[96];
        snprintf(name, sizeof name, "op_%s", musa_op_name(op));
        if (!harness_has_test(name)) {
            fprintf(stderr, "  op %s has no test (expected TEST(%s))\n", musa_op_name(op), name);
            missing++;
        }
    }
    CHECK_MSG(missing == 0, "%d ops without tests", missing);
}

/* Each row's name and whether its fn column promises a public function. */
#define PUBLIC_unary    true
#define PUBLIC_binary   true
#define PUBLIC_ternary  true
#define PUBLIC_hand     true
#define PUBLIC_internal false
static const struct {
    const char *name;
    bool public_fn;
} rows[] = {
#define OP(name, n_in, n_out, attrs, infer, kernel, ws, flags, grad, save, fn, py)                 \
    {#name, PUBLIC_##fn},
#include "ops/ops.def"
#undef OP
};

/* The shared library's exported symbols are the public C API (MUSA_API in
 * musa.h; everything else is hidden): a row that is not internal must have
 * musa_<name> there, and an internal row must not. The test looks the names
 * up at run time, so a row marked hand whose function was never written
 * (or never declared in musa.h) fails here rather than passing unnoticed. */
TEST(every_op_has_a_public_function) {
    CHECK_MSG((int)(sizeof rows / sizeof rows[0]) == musa_op_count(), "%d rows but %d ops",
              (int)(sizeof rows / sizeof rows[0]), musa_op_count());
    void *lib = dlopen(MUSA_SHARED_LIBRARY, RTLD_LAZY | RTLD_LOCAL);
    CHECK_MSG(lib, "cannot open %s: %s", MUSA_SHARED_LIBRARY, dlerror());
    int wrong = 0;
    for (int op = 0; op < musa_op_count(); op++) {
        char sym[96];
        snprintf(sym, sizeof sym, "musa_%s", rows[op].name);
        bool exported = dlsym(lib, sym) != NULL;
        if (strcmp(rows[op].name, musa_op_name(op)) || exported != rows[op].public_fn) {
            fprintf(stderr, "  op %s: %s\n", musa_op_name(op),
                    rows[op].public_fn ? "libmusa exports no such function (write it, declare it "
                                         "in musa.h, or mark the row fn internal)"
                                       : "marked fn internal, but libmusa exports it");
            wrong++;
        }
    }
    dlclose(lib);
    CHECK_MSG(wrong == 0, "%d ops whose public function is not as ops.def says", wrong);
    CHECK(musa_op_lookup("no_such_op") == -1);
}

/* musa_interrupt stops a long op at its next poll: it fails with
 * MUSA_ERR_INTERRUPTED naming the op, and the next op runs normally. */
TEST(interrupt_stops_a_long_op) {
    musa_tensor *one = musa_ones(1, (int64_t[]){1}, MUSA_DTYPE_FLOAT32);
    musa_tensor *x = musa_expand(one, 1, (int64_t[]){(int64_t)1 << 40});
    CHECK(x != NULL);
    musa_interrupt();
    CHECK_ERR(musa_sum(x, 0, NULL, false) != NULL, MUSA_ERR_INTERRUPTED, "[sum] interrupted");
    musa_tensor *s = musa_sum(one, 0, NULL, false);
    double v = 0;
    CHECK_OK(musa_tensor_item(s, &v));
    CHECK_NEAR(v, 1, 0);
    musa_tensor_release(one), musa_tensor_release(x), musa_tensor_release(s);
}
