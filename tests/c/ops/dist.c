/*
 * dist.c - the dist_* rows without a process group: every call fails
 * cleanly, naming the op and what to do. The collectives themselves run in
 * test_dist (2 ranks under mpirun) and tests/python/test_distributed.py.
 */
#include "harness.h"
#include "util.h"

#define NOT_UP(expr, op)                                                                           \
    CHECK_ERR((expr), MUSA_ERR_RUNTIME, "[" op "] the default process group is not initialized")

TEST(op_dist_all_reduce) {
    CHECK(!musa_dist_is_initialized() && musa_dist_rank() == -1 && musa_dist_world_size() == -1);
    musa_tensor *x = musa_ones(1, (int64_t[]){3}, MUSA_DTYPE_FLOAT32);
    NOT_UP(musa_dist_all_reduce(x, MUSA_REDUCE_SUM) == MUSA_OK, "dist_all_reduce");
    CHECK_ERR(musa_dist_all_reduce(NULL, MUSA_REDUCE_SUM) == MUSA_OK, MUSA_ERR_VALUE,
              "[dist_all_reduce] tensor is NULL");
    NOT_UP(musa_dist_barrier() == MUSA_OK, "barrier");
    CHECK(musa_dist_finalize() == MUSA_OK); /* nothing to finalize */
    musa_tensor_release(x);
}

TEST(op_dist_broadcast) {
    musa_tensor *x = musa_ones(1, (int64_t[]){3}, MUSA_DTYPE_INT64);
    NOT_UP(musa_dist_broadcast(x, 0) == MUSA_OK, "dist_broadcast");
    musa_tensor_release(x);
}

TEST(op_dist_all_gather) {
    musa_tensor *x = musa_ones(0, NULL, MUSA_DTYPE_BFLOAT16);
    NOT_UP(musa_dist_all_gather(x) != NULL, "dist_all_gather");
    musa_tensor_release(x);
}

TEST(op_dist_reduce_scatter) {
    musa_tensor *x = musa_ones(1, (int64_t[]){4}, MUSA_DTYPE_FLOAT64);
    NOT_UP(musa_dist_reduce_scatter(x, MUSA_REDUCE_MAX) != NULL, "dist_reduce_scatter");
    musa_tensor_release(x);
}

TEST(op_dist_all_reduce_start) {
    musa_tensor *x = musa_ones(1, (int64_t[]){4}, MUSA_DTYPE_FLOAT32);
    NOT_UP(musa_dist_all_reduce_start(1, &x, MUSA_REDUCE_AVG) != NULL, "dist_all_reduce_start");
    CHECK_ERR(musa_dist_all_reduce_start(0, &x, MUSA_REDUCE_AVG) != NULL, MUSA_ERR_VALUE,
              "needs a non-empty list");
    musa_tensor_release(x);
}

TEST(op_dist_all_reduce_wait) {
    musa_tensor *x = musa_ones(1, (int64_t[]){4}, MUSA_DTYPE_FLOAT32);
    NOT_UP(musa_dist_all_reduce_wait(x, MUSA_REDUCE_AVG) != NULL, "dist_all_reduce_wait");
    musa_tensor_release(x);
}
