/*
 * test_dist.c - the collectives of musa.h, over two ranks.
 *
 * Run directly, `dist_under_mpirun` starts this binary again under
 * `mpirun -np 2` with the rank_* tests selected, and checks that both ranks
 * pass them; `dist_over_tcp` starts it twice with MUSA_TEST_TCP_RANK and
 * MUSA_TEST_TCP_PORT set, and the rank_* tests then form the group with
 * musa_dist_init_tcp. In the parent the rank_* tests do nothing. Each
 * rank's tensors are a function of its rank, so every rank knows the
 * expected results.
 */
#include <math.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "distributed/comm.h"
#include "harness.h"
#include "util.h"

static size_t start_bytes;

static bool under_mpirun(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") != NULL;
}
static bool over_tcp(void) {
    return getenv("MUSA_TEST_TCP_RANK") != NULL;
}
static bool as_rank(void) {
    return under_mpirun() || over_tcp();
}
static int join_group(void) {
    if (!over_tcp()) return musa_dist_init();
    return musa_dist_init_tcp("127.0.0.1", atoi(getenv("MUSA_TEST_TCP_PORT")),
                              atoi(getenv("MUSA_TEST_TCP_RANK")), 2, 60.0);
}

static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = 0;
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof a;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && !bind(fd, (struct sockaddr *)&a, sizeof a) &&
        !getsockname(fd, (struct sockaddr *)&a, &len))
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

/* element i of t in row-major order, as a double */
static double get_f(const musa_tensor *t, int64_t i) {
    double *v = values(t);
    double r = v ? v[i] : NAN;
    free(v);
    return r;
}

static musa_tensor *ramp(int64_t n, musa_dtype dt, double start) {
    musa_tensor *a = musa_arange(start, start + (double)n, 1, MUSA_DTYPE_FLOAT64);
    musa_tensor *c = musa_cast(a, dt);
    musa_tensor_release(a);
    return c;
}

TEST(dist_over_tcp) {
    if (as_rank()) return;
    char self[4096], port[16];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(n > 0);
    self[n] = 0;
    snprintf(port, sizeof port, "%d", free_port());
    CHECK(strcmp(port, "0") != 0);
    pid_t kids[2];
    for (int r = 0; r < 2; r++) {
        kids[r] = fork();
        CHECK(kids[r] >= 0);
        if (kids[r] == 0) {
            char rank[4];
            snprintf(rank, sizeof rank, "%d", r);
            setenv("MUSA_TEST_TCP_RANK", rank, 1);
            setenv("MUSA_TEST_TCP_PORT", port, 1);
            execl(self, self, "rank_collectives", "rank_in_flight", "rank_mismatch", (char *)NULL);
            _exit(127);
        }
    }
    for (int r = 0; r < 2; r++) {
        int status = 0;
        CHECK(waitpid(kids[r], &status, 0) == kids[r]);
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rank %d ended with status %d", r,
                  status);
    }
}

TEST(dist_tcp_arguments) {
    if (as_rank()) return;
    CHECK_ERR(musa_dist_init_tcp("", 1, 0, 1, 1) == MUSA_OK, MUSA_ERR_VALUE, "host name");
    CHECK_ERR(musa_dist_init_tcp("localhost", 0, 0, 1, 1) == MUSA_OK, MUSA_ERR_VALUE,
              "port 0 is not in 1..65535");
    CHECK_ERR(musa_dist_init_tcp("localhost", 5, 2, 2, 1) == MUSA_OK, MUSA_ERR_VALUE,
              "rank 2 of world_size 2");
    CHECK_ERR(musa_dist_init_tcp("localhost", 5, 0, 1, NAN) == MUSA_OK, MUSA_ERR_VALUE,
              "it must be positive");
    /* a group of one needs no sockets, and forms again after finalize */
    for (int k = 0; k < 2; k++) {
        CHECK_OK(musa_dist_init_tcp("localhost", 5, 0, 1, 1));
        CHECK(musa_dist_world_size() == 1 && strcmp(musa_dist_backend(), "tcp") == 0);
        CHECK_ERR(musa_dist_init_tcp("localhost", 5, 0, 1, 1) == MUSA_OK, MUSA_ERR_RUNTIME,
                  "already initialized");
        musa_tensor *x = ramp(3, MUSA_DTYPE_FLOAT32, 1);
        CHECK_OK(musa_dist_all_reduce(x, MUSA_REDUCE_SUM));
        CHECK(get_f(x, 2) == 3);
        musa_tensor_release(x);
        CHECK_OK(musa_dist_finalize());
        CHECK(musa_dist_backend() == NULL);
    }
    /* nobody at the port: the rendezvous gives up after the timeout */
    char port[16];
    snprintf(port, sizeof port, "%d", free_port());
    CHECK_ERR(musa_dist_init_tcp("127.0.0.1", atoi(port), 1, 2, 0.3) == MUSA_OK, MUSA_ERR_RUNTIME,
              "cannot reach rank 0");
    CHECK(!musa_dist_is_initialized());
}

TEST(dist_under_mpirun) {
    if (under_mpirun()) return;
    if (system("command -v mpirun >/dev/null 2>&1") != 0) {
        printf("   (mpirun not found: openmpi-bin is not installed; skipped)\n");
        return;
    }
    char self[4096], cmd[8192];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(n > 0);
    self[n] = 0;
    /* Under AddressSanitizer the ranks run without LeakSanitizer: Open MPI
     * keeps allocations until exit in components MPI_Finalize unloads, whose
     * frames LeakSanitizer can no longer name (so no suppression matches).
     * musa's side is checked instead: rank_mismatch ends with the allocator
     * back at its starting bytes and nothing in flight. */
    snprintf(
        cmd, sizeof cmd,
        "ASAN_OPTIONS=detect_leaks=0 "
        "mpirun -np 2 --oversubscribe %s %s rank_collectives rank_in_flight rank_mismatch 2>&1",
        geteuid() == 0 ? "--allow-run-as-root" : "", self);
    FILE *p = popen(cmd, "r");
    CHECK(p);
    char line[1024];
    int summaries = 0;
    while (fgets(line, sizeof line, p)) {
        printf("   | %s", line);
        if (strstr(line, "3 passed, 0 failed")) summaries++;
    }
    int status = pclose(p);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "mpirun ended with status %d", status);
    CHECK_MSG(summaries == 2, "expected both ranks to pass 3 tests, saw %d summaries", summaries);
}

TEST(rank_collectives) {
    if (!as_rank()) return;
    musa_alloc_stats st;
    musa_alloc_get_stats(&st);
    start_bytes = st.current_bytes;
    CHECK_OK(join_group());
    CHECK_OK(musa_dist_init()); /* a no-op */
    int rank = musa_dist_rank(), size = musa_dist_world_size();
    CHECK(size == 2 && (rank == 0 || rank == 1));
    musa_dtype dts[4] = {MUSA_DTYPE_FLOAT32, MUSA_DTYPE_BFLOAT16, MUSA_DTYPE_INT32,
                         MUSA_DTYPE_FLOAT64};
    for (int k = 0; k < 4; k++) {
        /* rank r holds r*10 + [0..5]: the sum is 10 + 2i, the max 10 + i */
        musa_tensor *x = ramp(6, dts[k], rank * 10);
        CHECK_OK(musa_dist_all_reduce(x, MUSA_REDUCE_SUM));
        for (int i = 0; i < 6; i++) CHECK(get_f(x, i) == 10 + 2 * i);
        musa_tensor *m = ramp(6, dts[k], rank * 10);
        CHECK_OK(musa_dist_all_reduce(m, MUSA_REDUCE_MAX));
        for (int i = 0; i < 6; i++) CHECK(get_f(m, i) == 10 + i);
        musa_tensor *b = ramp(6, dts[k], rank * 10);
        CHECK_OK(musa_dist_broadcast(b, 1));
        for (int i = 0; i < 6; i++) CHECK(get_f(b, i) == 10 + i);
        musa_tensor *g = musa_dist_all_gather(b);
        CHECK(g && musa_tensor_ndim(g) == 2 && musa_tensor_shape(g)[0] == 2);
        musa_tensor *s = ramp(6, dts[k], rank);
        musa_tensor *rs = musa_dist_reduce_scatter(s, MUSA_REDUCE_SUM);
        CHECK(rs && musa_tensor_numel(rs) == 3);
        /* block r of sum_r (r + [0..5]) = 1 + 2j for j in block r */
        for (int i = 0; i < 3; i++) CHECK(get_f(rs, i) == 1 + 2 * (rank * 3 + i));
        musa_tensor_release(x), musa_tensor_release(m), musa_tensor_release(b);
        musa_tensor_release(g), musa_tensor_release(s), musa_tensor_release(rs);
    }
    /* AVG in float32, on a transposed view, in place */
    musa_tensor *a = ramp(6, MUSA_DTYPE_FLOAT32, rank * 10);
    musa_tensor *a2 = musa_reshape(a, 2, (int64_t[]){2, 3}), *at = musa_transpose(a2, 0, 1);
    CHECK_OK(musa_dist_all_reduce(at, MUSA_REDUCE_AVG));
    for (int i = 0; i < 6; i++) CHECK(get_f(a, i) == 5 + i);
    /* an empty tensor still takes part */
    musa_tensor *e = musa_ones(1, (int64_t[]){0}, MUSA_DTYPE_FLOAT32);
    CHECK_OK(musa_dist_all_reduce(e, MUSA_REDUCE_SUM));
    CHECK_OK(musa_dist_barrier());
    musa_tensor_release(a), musa_tensor_release(a2), musa_tensor_release(at);
    musa_tensor_release(e);
}

TEST(rank_in_flight) {
    if (!as_rank()) return;
    int rank = musa_dist_rank();
    musa_tensor *p = ramp(5, MUSA_DTYPE_FLOAT32, rank), *q = ramp(3, MUSA_DTYPE_FLOAT32, 100);
    musa_tensor *parts[2] = {p, q};
    musa_tensor *flat = musa_dist_all_reduce_start(2, parts, MUSA_REDUCE_AVG);
    musa_tensor *flat2 = musa_dist_all_reduce_start(1, &q, MUSA_REDUCE_SUM);
    CHECK(flat && flat2 && musa_tensor_numel(flat) == 8);
    musa_tensor *mid = musa_mul(p, p); /* work while they are in flight */
    CHECK(mid);
    /* waited in the other order */
    musa_tensor *r2 = musa_dist_all_reduce_wait(flat2, MUSA_REDUCE_SUM);
    musa_tensor *r = musa_dist_all_reduce_wait(flat, MUSA_REDUCE_AVG);
    CHECK(r && r2);
    for (int i = 0; i < 5; i++) CHECK(get_f(r, i) == 0.5 + i);
    for (int i = 0; i < 3; i++) CHECK(get_f(r, 5 + i) == 100 + i && get_f(r2, i) == 200 + 2 * i);
    /* a second wait on one buffer is an error, not a hang */
    CHECK_ERR(musa_dist_all_reduce_wait(flat, MUSA_REDUCE_AVG) != NULL, MUSA_ERR_RUNTIME,
              "no all_reduce is in flight on this buffer");
    musa_tensor_release(p), musa_tensor_release(q), musa_tensor_release(flat);
    musa_tensor_release(flat2), musa_tensor_release(mid), musa_tensor_release(r);
    musa_tensor_release(r2);
}

TEST(rank_mismatch) {
    if (!as_rank()) return;
    int rank = musa_dist_rank();
    musa_tensor *x = musa_ones(1, (int64_t[]){2 + rank}, MUSA_DTYPE_FLOAT32);
    CHECK_ERR(musa_dist_all_reduce(x, MUSA_REDUCE_SUM) == MUSA_OK, MUSA_ERR_VALUE,
              "the ranks passed tensors of different shapes");
    musa_tensor *y = musa_ones(1, (int64_t[]){2}, rank ? MUSA_DTYPE_INT32 : MUSA_DTYPE_FLOAT32);
    CHECK_ERR(musa_dist_broadcast(y, 0) == MUSA_OK, MUSA_ERR_VALUE,
              "the ranks passed tensors of different dtypes");
    CHECK_ERR(musa_dist_broadcast(y, 2) == MUSA_OK, MUSA_ERR_VALUE, "src 2 is not a rank");
    musa_tensor_release(x), musa_tensor_release(y);
    CHECK(musa_comm_pending() == 0);
    CHECK_OK(musa_dist_finalize());
    if (under_mpirun()) {
        CHECK_ERR(musa_dist_init() == MUSA_OK, MUSA_ERR_RUNTIME, "cannot start again");
    } else { /* a TCP group forms again */
        CHECK_OK(join_group());
        musa_tensor *z = ramp(4, MUSA_DTYPE_INT64, musa_dist_rank());
        CHECK_OK(musa_dist_all_reduce(z, MUSA_REDUCE_MIN));
        for (int i = 0; i < 4; i++) CHECK(get_f(z, i) == i);
        musa_tensor_release(z);
        CHECK_OK(musa_dist_finalize());
    }
    musa_alloc_stats st;
    musa_alloc_get_stats(&st);
    CHECK_MSG(st.current_bytes == start_bytes, "tensors leaked: %zu bytes live, %zu at the start",
              st.current_bytes, start_bytes);
}
