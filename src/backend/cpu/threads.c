/*
 * threads.c - one thread budget for musa's pool, oneDNN's OpenMP threads
 * and OpenBLAS.
 */
#include "../../base/threadpool.h"
#include "kernels.h"

int musa_set_num_threads(int n) {
    if (n < 1 || n > MUSA_MAX_THREADS)
        return musa_err(MUSA_ERR_VALUE, "[set_num_threads] n must be in 1..%d, got %d",
                        MUSA_MAX_THREADS, n);
    musa_pool_resize(n);
    musa_cpu_set_library_threads(n);
    return MUSA_OK;
}

int musa_get_num_threads(void) {
    return musa_pool_threads();
}
