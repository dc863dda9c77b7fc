/*
 * deploy.c - embed a saved model in a C program: load it, describe its
 * inputs, run it on an input, print the result. It needs only libmusa:
 *
 *     cc deploy.c $(pkg-config --cflags --libs musa) -o deploy
 *     ./deploy model.musa [input.npy]
 *
 * Without an input file it runs on an input of the saved shape (dynamic
 * dims at their smallest size) filled with 0.5. The model comes from
 * Python: musa.jit.trace(model, (x,)).save("model.musa").
 */
#include <musa.h>
#include <stdio.h>

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s model.musa [input.npy]\n", argv[0]);
        return 2;
    }
    musa_model *m = musa_model_load(argv[1], MUSA_FILE_MMAP); /* weights mapped, not copied */
    if (!m) {
        fprintf(stderr, "%s\n", musa_last_error());
        return 1;
    }
    if (musa_model_num_inputs(m) != 1) {
        fprintf(stderr, "this example feeds models of one input; %s has %d\n", argv[1],
                musa_model_num_inputs(m));
        musa_model_free(m);
        return 1;
    }
    const char *name;
    musa_dtype dtype;
    int ndim;
    int64_t dims[MUSA_MAX_DIMS], lo, hi;
    musa_model_input(m, 0, &name, &dtype, &ndim, dims, &lo, &hi);
    printf("input \"%s\": %s, %d dims:", name ? name : "?", musa_dtype_name(dtype), ndim);
    for (int d = 0; d < ndim; d++) {
        if (dims[d] < 0) {
            printf(" [%lld..%lld]", (long long)lo, (long long)hi);
            dims[d] = lo;
        } else {
            printf(" %lld", (long long)dims[d]);
        }
    }
    printf("\n");
    musa_tensor *x = argc == 3 ? musa_npy_load(argv[2]) : musa_full(ndim, dims, 0.5, dtype);
    musa_tensor *y = NULL;
    int rc = x ? musa_model_run(m, 1, &x, 1, &y) : musa_last_error_code();
    if (rc == MUSA_OK) {
        musa_tensor *flat = musa_reshape(y, 1, (int64_t[]){-1});
        int64_t n = flat ? musa_tensor_numel(flat) : 0;
        printf("output: %lld values:", (long long)n);
        for (int64_t i = 0; i < n && i < 10; i++) {
            musa_tensor *e = musa_select(flat, 0, i);
            double v = 0;
            musa_tensor_item(e, &v);
            printf(" %.6g", v);
            musa_tensor_release(e);
        }
        printf("%s\n", n > 10 ? " ..." : "");
        musa_tensor_release(flat);
    } else {
        fprintf(stderr, "%s\n", musa_last_error());
    }
    musa_tensor_release(y);
    musa_tensor_release(x);
    musa_model_free(m);
    return rc == MUSA_OK ? 0 : 1;
}
