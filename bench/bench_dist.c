/*
 * bench_dist.c - all_reduce bandwidth, musa against MPI itself, in one run.
 *
 *     mpirun -np 2 build/bench_dist        (bash run.sh bench does this)
 *
 * For message sizes from 1 KiB to 64 MiB (float32), rank 0 prints the time
 * per all-reduce and the algorithm bandwidth (bytes / time) of:
 *   mpi      MPI_Allreduce(MPI_IN_PLACE) on a plain buffer;
 *   musa     musa_dist_all_reduce on a tensor (in place; includes the
 *            between-ranks shape check, one small all-reduce);
 *   bucket   musa_dist_all_reduce_start + _wait (DDP's path: packs the
 *            tensor into the message and copies the result out);
 * and the musa/mpi ratios. Rows alternate the three, medians of rounds.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "musa.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void) {
    if (musa_dist_init()) {
        fprintf(stderr, "%s\n", musa_last_error());
        return 1;
    }
    int rank = musa_dist_rank(), size = musa_dist_world_size();
    if (rank == 0)
        printf("all_reduce (sum, float32, %d ranks): median of 7 rounds\n"
               "%10s %11s %11s %11s %9s %9s %9s %10s %10s\n",
               size, "bytes", "mpi us", "musa us", "bucket us", "mpi GB/s", "musa GB/s", "bkt GB/s",
               "musa/mpi", "bucket/mpi");
    for (int64_t bytes = 1024; bytes <= (64 << 20); bytes *= 4) {
        int64_t n = bytes / 4;
        musa_tensor *t = musa_ones(1, &n, MUSA_DTYPE_FLOAT32);
        float *raw = malloc((size_t)bytes);
        for (int64_t i = 0; i < n; i++) raw[i] = 1;
        int iters = bytes < (1 << 20) ? 200 : bytes < (16 << 20) ? 20 : 4;
        enum { ROUNDS = 7 };
        double tm[3][ROUNDS];
        for (int r = 0; r < ROUNDS; r++) {
            for (int k = 0; k < 3; k++) {
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = now();
                for (int i = 0; i < iters; i++) {
                    if (k == 0) {
                        MPI_Allreduce(MPI_IN_PLACE, raw, (int)n, MPI_FLOAT, MPI_SUM,
                                      MPI_COMM_WORLD);
                    } else if (k == 1) {
                        musa_dist_all_reduce(t, MUSA_REDUCE_SUM);
                    } else {
                        musa_tensor *f = musa_dist_all_reduce_start(1, &t, MUSA_REDUCE_SUM);
                        musa_tensor *res = musa_dist_all_reduce_wait(f, MUSA_REDUCE_SUM);
                        musa_tensor_release(f);
                        musa_tensor_release(res);
                    }
                }
                tm[k][r] = (now() - t0) / iters;
            }
            /* keep the values small: the sums grow by `size` each call */
            musa_tensor_release(t);
            t = musa_ones(1, &n, MUSA_DTYPE_FLOAT32);
            for (int64_t i = 0; i < n; i++) raw[i] = 1;
        }
        double med[3];
        for (int k = 0; k < 3; k++) {
            qsort(tm[k], ROUNDS, sizeof(double), cmp);
            med[k] = tm[k][ROUNDS / 2];
        }
        if (musa_last_error_code()) {
            fprintf(stderr, "rank %d: %s\n", rank, musa_last_error());
            return 1;
        }
        if (rank == 0)
            printf("%10lld %11.1f %11.1f %11.1f %9.2f %9.2f %9.2f %10.2f %10.2f\n",
                   (long long)bytes, med[0] * 1e6, med[1] * 1e6, med[2] * 1e6, bytes / med[0] / 1e9,
                   bytes / med[1] / 1e9, bytes / med[2] / 1e9, med[0] / med[1], med[0] / med[2]);
        musa_tensor_release(t);
        free(raw);
    }
    return musa_dist_finalize() ? 1 : 0;
}
