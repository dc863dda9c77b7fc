/*
 * bench_cores.c - what it costs one core to use memory another core just
 * used: the figure behind the planner's choice not to run small GEMMs as
 * concurrent tasks (src/jit/graph.c, musa_graph_pairable).
 *
 * Two threads pinned to CPUs 0 and 1 take turns on one 64 KiB buffer (an
 * MLP activation or weight gradient is 32-64 KiB). Per case, the best of
 * REPS rounds of: the other thread reads or writes every cache line of the
 * buffer, then this thread reads it (a memcpy out) or writes it (a float
 * loop, vector stores as a kernel's; memset's string stores skip the
 * read-for-ownership and would hide it) and is timed; beside it the same
 * access after this thread used the buffer itself. Prints microseconds and
 * the ratio. Needs 2 CPUs; says so and exits 0 on one.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "bench_util.h"

#define BYTES (64 * 1024)
#define REPS  2000

enum { IDLE, READ, WRITE, QUIT };

static unsigned char *buf, *out;
static atomic_int job;         /* what the other thread does next */
static volatile unsigned sink; /* keeps the reads */

static int pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    return pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

static void store(float v) {
    float *f = (float *)(void *)buf;
    for (size_t i = 0; i < BYTES / sizeof(float); i++) f[i] = v * (float)i;
}

static void touch_read(void) {
    unsigned s = 0;
    for (size_t i = 0; i < BYTES; i += 64) s += buf[i];
    sink = s;
}

static void *other(void *arg) {
    (void)arg;
    if (pin(1)) return NULL;
    for (;;) {
        int j = atomic_load(&job);
        if (j == QUIT) return NULL;
        if (j == IDLE) continue;
        if (j == READ)
            touch_read();
        else
            store((float)j);
        atomic_store(&job, IDLE);
    }
}

/* The other thread does `before` (READ, WRITE, or IDLE: this thread writes
 * the buffer itself), then this thread's access is timed. */
static double timed(int before, bool write) {
    double best = 1e30;
    for (int r = 0; r < REPS; r++) {
        if (before == IDLE) {
            store((float)r);
        } else {
            atomic_store(&job, before);
            while (atomic_load(&job) != IDLE) {
            }
        }
        double t0 = now();
        if (write)
            store((float)(r + 1));
        else
            memcpy(out, buf, BYTES);
        double t = now() - t0;
        sink += out[r % BYTES];
        if (t < best) best = t;
    }
    return best * 1e6;
}

int main(void) {
    cpu_set_t s;
    CPU_ZERO(&s);
    if (sched_getaffinity(0, sizeof s, &s) || !CPU_ISSET(0, &s) || !CPU_ISSET(1, &s) || pin(0)) {
        printf("bench_cores: needs CPUs 0 and 1; skipped\n");
        return 0;
    }
    buf = aligned_alloc(64, BYTES);
    out = aligned_alloc(64, BYTES);
    if (!buf || !out) return 1;
    memset(buf, 0, BYTES);
    memset(out, 0, BYTES);
    pthread_t t;
    if (pthread_create(&t, NULL, other, NULL)) return 1;
    double local_r = timed(IDLE, false), local_w = timed(IDLE, true);
    double rr = timed(WRITE, false), wr = timed(READ, true), ww = timed(WRITE, true);
    atomic_store(&job, QUIT);
    pthread_join(t, NULL);
    printf("bench_cores: 64 KiB on CPU 0 after CPU 1 used it (best of %d; us)\n", REPS);
    printf("  %-34s %7.2f  (local %5.2f, %4.1fx)\n", "read, after CPU 1 wrote it", rr, local_r,
           rr / local_r);
    printf("  %-34s %7.2f  (local %5.2f, %4.1fx)\n", "write, after CPU 1 read it", wr, local_w,
           wr / local_w);
    printf("  %-34s %7.2f  (local %5.2f, %4.1fx)\n", "write, after CPU 1 wrote it", ww, local_w,
           ww / local_w);
    free(buf), free(out);
    return 0;
}
