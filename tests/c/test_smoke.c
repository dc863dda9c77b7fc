/* Quick end-to-end checks of the core path (creation, ops, views, errors). */
#include "harness.h"

TEST(smoke_add) {
    int64_t shape[2] = {2, 3};
    musa_tensor *x = musa_arange(0, 6, 1, MUSA_DTYPE_FLOAT32);
    musa_tensor *a = musa_reshape(x, 2, shape);
    musa_tensor *b = musa_mul(a, a);
    musa_tensor *s = musa_sum(b, 0, NULL, false);
    double v;
    CHECK_OK(musa_tensor_item(s, &v));
    CHECK_NEAR(v, 55, 0);
    char buf[256];
    musa_tensor_format(a, buf, sizeof buf);
    printf("%s\n", buf);
    musa_tensor_release(s), musa_tensor_release(b), musa_tensor_release(a), musa_tensor_release(x);
}
