/*
 * test_ops.c - the op-table-driven test run. The op tests live in
 * the files in tests/c/ops/, one TEST named op_<name> per row of src/ops/ops.def;
 * this file fails the run when an op has no such test, so a new op without
 * tests cannot land.
 */
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

TEST(every_op_has_a_public_function) {
    /* musa_<name> must exist in the library for every op */
    for (int op = 0; op < musa_op_count(); op++) {
        int back = musa_op_lookup(musa_op_name(op));
        CHECK(back == op);
    }
    CHECK(musa_op_lookup("no_such_op") == -1);
}
