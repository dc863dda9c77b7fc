/* Gradients of a custom op (musa_op_register, ops/custom.c): its registered
 * backward checked against finite differences, and twice. */
#include "../harness.h"
#include "../util.h"

static int cube3_fn(void *ctx, int n_in, musa_tensor *const *in, int *n_out, musa_tensor **out) {
    (void)ctx, (void)n_in;
    *n_out = 1;
    out[0] = custom_cube3(in[0]);
    return out[0] ? MUSA_OK : musa_last_error_code();
}

TEST(grad_custom) {
    int64_t shape[2] = {3, 2};
    musa_tensor *x = rnd(MUSA_DTYPE_FLOAT64, 2, shape, -1, 1, L_CONTIG);
    musa_tensor_set_requires_grad(x, true);
    CHECK_OK(musa_gradcheck(cube3_fn, NULL, 1, &x, 1e-6, 1e-5, 1e-3));
    CHECK_OK(musa_gradgradcheck(cube3_fn, NULL, 1, &x, 1e-6, 1e-5, 1e-3));
    musa_tensor *y = custom_cube3(x);
    CHECK(y && musa_tensor_grad_fn(y));
    CHECK(!strcmp(musa_node_name(musa_tensor_grad_fn(y)), "test::cube3Backward"));
    musa_tensor_release(x), musa_tensor_release(y);
}
