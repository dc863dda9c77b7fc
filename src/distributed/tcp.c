/*
 * tcp.c - the process group over TCP (musa_dist_init_tcp; Python's backend
 * "gloo"), for processes started by anything: musa.multiprocessing.spawn,
 * a shell loop, a cluster's launcher. It fills the same table as the MPI
 * shim (comm.h), so the collectives above it do not know which runs.
 *
 * Rendezvous. Every rank opens a listening socket on a free port for the
 * ring. Rank 0 listens at the given address and port; every other rank
 * connects there (retrying until rank 0 is up) and says who it is (magic,
 * protocol, rank, world size, its ring port). Rank 0 checks the group
 * (sizes agree, each rank once), then sends every rank the table of ring
 * addresses (a rank's address is the one rank 0 saw it connect from) or
 * the reason the group cannot form. Then rank r connects to rank r + 1 and
 * accepts rank r - 1: data flows one way round the ring.
 *
 * Collectives. Each starts with a header passed to the next rank (kind,
 * dtype, op or root, byte count, sequence number); a rank whose
 * predecessor called something else fails naming both calls instead of
 * exchanging garbage. All-reduce is a ring reduce-scatter and a ring
 * all-gather (2 (P - 1) / P of the data sent per rank, the bandwidth
 * optimum); reduce-scatter, all-gather and broadcast (chunked, pipelined)
 * use the same ring. The reduction runs in the receiving rank in a fixed
 * order, so every rank ends with the same bits. float16 and bfloat16 add in
 * float32 and round once per step, as the MPI shim does; max and min keep
 * NaN; bool reduces with or (sum, max) and and (min).
 *
 * Failures. Every wait is bounded by the group's timeout (time without
 * progress) and stops at musa_interrupt (Ctrl-C: the dispatcher runs
 * collectives inside the long-op hook). A peer that exits closes its sockets, and its neighbours
 * fail at once naming it. After any failure the ring's state is unknown: this rank closes its
 * sockets (so its neighbours fail too, rather than wait out the timeout) and every later call fails
 * with the first error.
 *
 * Non-blocking all-reduces (musa_comm_start) complete before they return:
 * DistributedDataParallel's buckets are correct, without overlap.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../base/base.h"
#include "../base/dtype.h"
#include "../base/threadpool.h"
#include "comm.h"

#define MAGIC   0x4d555341u /* "MUSA" */
#define PROTO   1u
#define CHUNK   (256 << 10) /* broadcast's pipeline unit */
#define SPIN_NS 50000       /* how long a waiting transfer spins before it sleeps */

enum { K_ALLREDUCE = 1, K_BROADCAST, K_ALLGATHER, K_REDUCE_SCATTER, K_BARRIER };
static const char *kind_name[] = {"?",          "all_reduce",     "broadcast",
                                  "all_gather", "reduce_scatter", "barrier"};

static struct {
    char host[256];
    int port, rank, size, timeout_ms;
    int next, prev;   /* ring: send to rank + 1, receive from rank - 1 */
    uint32_t seq;     /* collectives so far */
    char broken[400]; /* the first failure, once the ring is unusable */
} T = {.next = -1, .prev = -1};

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
static int64_t now_ms(void) {
    return now_ns() / 1000000;
}

static void close_fd(int *fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

/* After a failure: close the ring (the neighbours fail at once) and keep
 * the message for every later call. Returns -1. */
static int fail(const char *err) {
    if (!T.broken[0]) snprintf(T.broken, sizeof T.broken, "%s", err);
    close_fd(&T.next), close_fd(&T.prev);
    return -1;
}

/* A socket error talking to rank peer (errno set): a peer that went away
 * is named as such. Returns -1. */
static int gone(int peer, const char *doing, char *err, size_t n) {
    if (errno == EPIPE || errno == ECONNRESET)
        snprintf(err, n, "rank %d closed its connection (it exited or failed)", peer);
    else
        snprintf(err, n, "%s rank %d: %s", doing, peer, strerror(errno));
    return -1;
}

/* Send s[0..sn) on sfd and receive r[0..rn) from rfd at once (either may be
 * empty), each side failing after timeout_ms without progress. srank and
 * rrank name the peers in messages. Returns 0, or -1 with err set.
 * Non-blocking calls first; when neither side moves, spin for SPIN_NS
 * before sleeping in poll: a peer's answer usually comes within
 * microseconds, and waking from poll costs tens of them. */
static int xfer(int sfd, const void *s, size_t sn, int srank, int rfd, void *r, size_t rn,
                int rrank, int timeout_ms, char *err, size_t n) {
    size_t so = 0, ro = 0;
    int64_t last = now_ms(), idle = -1;
    for (;;) {
        bool moved = false;
        if (so < sn) {
            ssize_t w = send(sfd, (const char *)s + so, sn - so, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w > 0)
                so += (size_t)w, moved = true;
            else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                return gone(srank, "sending to", err, n);
        }
        if (ro < rn) {
            ssize_t g = recv(rfd, (char *)r + ro, rn - ro, MSG_DONTWAIT);
            if (g > 0) {
                ro += (size_t)g, moved = true;
            } else if (g == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                if (g == 0) errno = ECONNRESET;
                return gone(rrank, "receiving from", err, n);
            }
        }
        if (so == sn && ro == rn) return 0;
        if (moved) {
            last = now_ms(), idle = -1;
            continue;
        }
        if (musa_interrupt_pending()) { /* Ctrl-C (the dispatcher reports it) */
            snprintf(err, n, "interrupted while waiting for rank %d", ro < rn ? rrank : srank);
            return -1;
        }
        int64_t left = timeout_ms - (now_ms() - last);
        if (left <= 0) {
            snprintf(err, n, "timed out after %.1f s waiting for rank %d", timeout_ms / 1000.0,
                     ro < rn ? rrank : srank);
            return -1;
        }
        if (idle < 0) idle = now_ns();
        if (now_ns() - idle < SPIN_NS) continue;
        struct pollfd p[2];
        int np = 0;
        if (so < sn) p[np++] = (struct pollfd){.fd = sfd, .events = POLLOUT};
        if (ro < rn) p[np++] = (struct pollfd){.fd = rfd, .events = POLLIN};
        if (poll(p, (nfds_t)np, (int)(left > 100 ? 100 : left)) < 0 && errno != EINTR) {
            snprintf(err, n, "poll: %s", strerror(errno));
            return -1;
        }
    }
}

static int ring(const void *s, size_t sn, void *r, size_t rn, char *err, size_t n) {
    int P = T.size;
    return xfer(T.next, s, sn, (T.rank + 1) % P, T.prev, r, rn, (T.rank + P - 1) % P, T.timeout_ms,
                err, n);
}

/* ---- reductions (dst = dst op src, elementwise) ---- */

#define RED_LOOP(type, expr)                                                                       \
    do {                                                                                           \
        type *d_ = dst;                                                                            \
        const type *s_ = src;                                                                      \
        for (int64_t i = 0; i < count; i++) {                                                      \
            type x = s_[i], y = d_[i];                                                             \
            d_[i] = (expr);                                                                        \
        }                                                                                          \
    } while (0)
#define RED_TYPE(type)                                                                             \
    do {                                                                                           \
        if (op == MUSA_REDUCE_MAX)                                                                 \
            RED_LOOP(type, (x != x || x > y) ? x : y);                                             \
        else if (op == MUSA_REDUCE_MIN)                                                            \
            RED_LOOP(type, (x != x || x < y) ? x : y);                                             \
        else                                                                                       \
            RED_LOOP(type, (type)(x + y));                                                         \
    } while (0)
#define RED_HALF(to, from)                                                                         \
    do {                                                                                           \
        uint16_t *d_ = dst;                                                                        \
        const uint16_t *s_ = src;                                                                  \
        for (int64_t i = 0; i < count; i++) {                                                      \
            float x = to(s_[i]), y = to(d_[i]);                                                    \
            float v = op == MUSA_REDUCE_MAX   ? ((x != x || x > y) ? x : y)                        \
                      : op == MUSA_REDUCE_MIN ? ((x != x || x < y) ? x : y)                        \
                                              : x + y;                                             \
            d_[i] = from(v);                                                                       \
        }                                                                                          \
    } while (0)

static void reduce(void *dst, const void *src, int64_t count, int dtype, int op) {
    switch (dtype) {
    case MUSA_DTYPE_FLOAT32:
        RED_TYPE(float);
        break;
    case MUSA_DTYPE_FLOAT64:
        RED_TYPE(double);
        break;
    case MUSA_DTYPE_INT64:
        RED_TYPE(int64_t);
        break;
    case MUSA_DTYPE_INT32:
        RED_TYPE(int32_t);
        break;
    case MUSA_DTYPE_INT16:
        RED_TYPE(int16_t);
        break;
    case MUSA_DTYPE_INT8:
        RED_TYPE(int8_t);
        break;
    case MUSA_DTYPE_UINT8:
        RED_TYPE(uint8_t);
        break;
    case MUSA_DTYPE_BFLOAT16:
        RED_HALF(musa_bf16_to_f32, musa_f32_to_bf16);
        break;
    case MUSA_DTYPE_FLOAT16:
        RED_HALF(musa_f16_bits_to_f32, musa_f32_to_f16_bits);
        break;
    case MUSA_DTYPE_BOOL:
        if (op == MUSA_REDUCE_MIN)
            RED_LOOP(uint8_t, (uint8_t)(x && y));
        else
            RED_LOOP(uint8_t, (uint8_t)(x || y));
        break;
    default:
        break; /* checked by the caller */
    }
}

/* ---- the header every collective starts with ---- */

/* A header (host order) in words: "all_reduce (float32, op 0) of 16 bytes" */
static void describe(char *buf, size_t n, const uint32_t *h) {
    int k = h[2] >= 1 && h[2] <= K_BARRIER ? (int)h[2] : 0;
    unsigned long long bytes = h[5] | (unsigned long long)h[6] << 32;
    if (k == K_ALLREDUCE || k == K_REDUCE_SCATTER)
        snprintf(buf, n, "%s (%s, op %u) of %llu bytes", kind_name[k],
                 musa_dtype_name((musa_dtype)h[3]), h[4], bytes);
    else if (k == K_BROADCAST)
        snprintf(buf, n, "%s (src %u) of %llu bytes", kind_name[k], h[4], bytes);
    else
        snprintf(buf, n, "%s of %llu bytes", kind_name[k], bytes);
}

/* Pass this rank's call to the next rank and check the previous one's. */
static int agree(int kind, int dtype, int64_t arg, uint64_t bytes, char *err, size_t n) {
    if (T.broken[0]) {
        snprintf(err, n, "the process group failed earlier and cannot be used: %s", T.broken);
        return -1;
    }
    T.seq++;
    if (T.size == 1) return 0;
    uint32_t mine[7] = {MAGIC,         T.seq,           (uint32_t)kind,         (uint32_t)dtype,
                        (uint32_t)arg, (uint32_t)bytes, (uint32_t)(bytes >> 32)};
    uint32_t theirs[7];
    for (int i = 0; i < 7; i++) mine[i] = htonl(mine[i]);
    if (ring(mine, sizeof mine, theirs, sizeof theirs, err, n)) return fail(err);
    for (int i = 0; i < 7; i++) theirs[i] = ntohl(theirs[i]), mine[i] = ntohl(mine[i]);
    int prev = (T.rank + T.size - 1) % T.size;
    if (theirs[0] != MAGIC || theirs[1] != T.seq) {
        snprintf(err, n, "rank %d sent a malformed message (collective %u)", prev, T.seq);
        return fail(err);
    }
    if (memcmp(theirs, mine, sizeof mine)) {
        char a[160], b[160];
        describe(a, sizeof a, theirs);
        describe(b, sizeof b, mine);
        snprintf(err, n, "the ranks disagree at collective %u: rank %d called %s, this rank %s",
                 T.seq, prev, a, b);
        return fail(err);
    }
    return 0;
}

static int dtype_size(int dtype, char *err, size_t n) {
    if (dtype < 0 || dtype >= MUSA_DTYPE_COUNT) {
        snprintf(err, n, "unknown dtype %d", dtype);
        return -1;
    }
    return (int)musa_dtype_size((musa_dtype)dtype);
}

/* Ring reduce-scatter in place over blocks of work (block b: count[b]
 * elements at off[b]); afterwards block `owner(r)` = (r + shift) mod P of
 * this rank holds the full reduction. shift 1: all-reduce's layout (each
 * rank ends owning the block after its own); shift 0: reduce_scatter's. */
static int ring_reduce_scatter(char *work, const int64_t *off, const int64_t *cnt, int es,
                               int dtype, int op, int shift, char *err, size_t n) {
    int P = T.size, r = T.rank;
    int64_t most = 0;
    for (int b = 0; b < P; b++) most = cnt[b] > most ? cnt[b] : most;
    char *tmp = malloc((size_t)(most ? most : 1) * (size_t)es);
    if (!tmp) {
        snprintf(err, n, "out of memory for a %lld-byte buffer", (long long)most * es);
        return fail(err);
    }
    int rc = 0;
    for (int s = 0; s < P - 1 && !rc; s++) {
        int sb = ((r - s - 1 + shift) % P + P) % P, rb = ((r - s - 2 + shift) % P + P) % P;
        rc = ring(work + off[sb] * es, (size_t)(cnt[sb] * es), tmp, (size_t)(cnt[rb] * es), err, n);
        if (!rc) reduce(work + off[rb] * es, tmp, cnt[rb], dtype, op);
    }
    free(tmp);
    return rc ? fail(err) : 0;
}

/* Ring all-gather in place: rank r starts with block (r + shift) mod P
 * (bytes[b] at off[b]). */
static int ring_all_gather(char *buf, const int64_t *off, const int64_t *bytes, int shift,
                           char *err, size_t n) {
    int P = T.size, r = T.rank;
    for (int s = 0; s < P - 1; s++) {
        int sb = ((r + shift - s) % P + P) % P, rb = ((r + shift - s - 1) % P + P) % P;
        if (ring(buf + off[sb], (size_t)bytes[sb], buf + off[rb], (size_t)bytes[rb], err, n))
            return fail(err);
    }
    return 0;
}

/* P nearly equal blocks of count elements */
static int split(int64_t count, int64_t **off, int64_t **cnt, char *err, size_t n) {
    int P = T.size;
    *off = malloc(sizeof(int64_t) * 2 * (size_t)P);
    if (!*off) {
        snprintf(err, n, "out of memory");
        return fail(err);
    }
    *cnt = *off + P;
    for (int b = 0; b < P; b++) {
        int64_t lo = count / P * b + (b < count % P ? b : count % P);
        (*off)[b] = lo, (*cnt)[b] = count / P + (b < count % P);
    }
    return 0;
}

static int t_allreduce(const void *send, void *recv, int64_t count, int dtype, int op,
                       musa_mpi_req **req, char *err, size_t n) {
    if (req) *req = NULL; /* complete on return */
    int es = dtype_size(dtype, err, n);
    if (es < 0) return -1;
    if (agree(K_ALLREDUCE, dtype, op, (uint64_t)count * (uint64_t)es, err, n)) return -1;
    if (send && send != recv) memcpy(recv, send, (size_t)(count * es));
    if (T.size == 1 || count == 0) return 0;
    int64_t *off, *cnt;
    if (split(count, &off, &cnt, err, n)) return -1;
    int rc = ring_reduce_scatter(recv, off, cnt, es, dtype, op, 1, err, n);
    for (int b = 0; b < T.size; b++) off[b] *= es, cnt[b] *= es;
    if (!rc) rc = ring_all_gather(recv, off, cnt, 1, err, n);
    free(off);
    return rc;
}

static int t_reduce_scatter(const void *send, void *recv, int64_t count, int dtype, int op,
                            char *err, size_t n) {
    int es = dtype_size(dtype, err, n);
    if (es < 0) return -1;
    if (agree(K_REDUCE_SCATTER, dtype, op, (uint64_t)count * (uint64_t)es, err, n)) return -1;
    int P = T.size;
    size_t total = (size_t)P * (size_t)count * (size_t)es;
    if (P == 1 || count == 0) {
        memcpy(recv, send, (size_t)(count * es));
        return 0;
    }
    char *work = malloc(total);
    int64_t *off = NULL, *cnt = NULL;
    if (!work || split((int64_t)P * count, &off, &cnt, err, n)) {
        free(work);
        snprintf(err, n, "out of memory for a %zu-byte buffer", total);
        return fail(err);
    }
    memcpy(work, send, total);
    int rc = ring_reduce_scatter(work, off, cnt, es, dtype, op, 0, err, n);
    if (!rc) memcpy(recv, work + off[T.rank] * es, (size_t)(count * es));
    free(work), free(off);
    return rc;
}

static int t_allgather(const void *send, void *recv, int64_t bytes, char *err, size_t n) {
    if (agree(K_ALLGATHER, 0, 0, (uint64_t)bytes, err, n)) return -1;
    int P = T.size;
    memmove((char *)recv + (int64_t)T.rank * bytes, send, (size_t)bytes);
    if (P == 1 || bytes == 0) return 0;
    int64_t *off, *cnt;
    if (split((int64_t)P, &off, &cnt, err, n)) return -1;
    for (int b = 0; b < P; b++) off[b] = (int64_t)b * bytes, cnt[b] = bytes;
    int rc = ring_all_gather(recv, off, cnt, 0, err, n);
    free(off);
    return rc;
}

static int t_broadcast(void *buf, int64_t bytes, int root, char *err, size_t n) {
    if (agree(K_BROADCAST, 0, root, (uint64_t)bytes, err, n)) return -1;
    int P = T.size, d = ((T.rank - root) % P + P) % P; /* hops from the root */
    for (int64_t at = 0; at < bytes && P > 1; at += CHUNK) {
        size_t c = (size_t)(bytes - at < CHUNK ? bytes - at : CHUNK);
        if (d > 0 && ring(NULL, 0, (char *)buf + at, c, err, n)) return fail(err);
        if (d < P - 1 && ring((char *)buf + at, c, NULL, 0, err, n)) return fail(err);
    }
    return 0;
}

/* P - 1 tokens round the ring: the token a rank gets at step s left its
 * predecessor after that one's step s - 1, so the last one proves that
 * every rank has entered the barrier. */
static int t_barrier(char *err, size_t n) {
    if (agree(K_BARRIER, 0, 0, 0, err, n)) return -1;
    char out = 1, in = 0;
    for (int s = 0; s < T.size - 1; s++)
        if (ring(&out, 1, &in, 1, err, n)) return fail(err);
    return 0;
}

static int t_test(musa_mpi_req *req, int *done, char *err, size_t n) {
    (void)req, (void)err, (void)n;
    *done = 1;
    return 0;
}
static int t_wait(musa_mpi_req *req, char *err, size_t n) {
    (void)req, (void)err, (void)n;
    return 0;
}

/* ---- rendezvous ---- */

static int listen_on(int port, int *fd_out, int *port_out, char *err, size_t n) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (fd < 0) {
        snprintf(err, n, "socket: %s", strerror(errno));
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t len = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 128) ||
        getsockname(fd, (struct sockaddr *)&a, &len)) {
        snprintf(err, n, "cannot listen on port %d: %s", port, strerror(errno));
        close(fd);
        return -1;
    }
    *fd_out = fd, *port_out = ntohs(a.sin_port);
    return 0;
}

/* Accept one connection before the deadline (its peer's IPv4 in *ip). */
static int accept_by(int lfd, int64_t deadline, uint32_t *ip, const char *what, char *err,
                     size_t n) {
    for (;;) {
        if (musa_interrupt_pending()) {
            snprintf(err, n, "interrupted while waiting for %s", what);
            return -1;
        }
        int64_t left = deadline - now_ms();
        struct pollfd p = {.fd = lfd, .events = POLLIN};
        int k = left > 0 ? poll(&p, 1, (int)(left > 100 ? 100 : left)) : 0;
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0 && left <= 100) {
            snprintf(err, n, "timed out after %.1f s waiting for %s", T.timeout_ms / 1000.0, what);
            return -1;
        }
        if (k <= 0) continue;
        struct sockaddr_in a;
        socklen_t len = sizeof a;
        int fd = accept4(lfd, (struct sockaddr *)&a, &len, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN) continue;
            snprintf(err, n, "accept: %s", strerror(errno));
            return -1;
        }
        *ip = a.sin_addr.s_addr;
        return fd;
    }
}

/* Connect to ip:port, retrying until the deadline (the peer may not be up). */
static int connect_by(uint32_t ip, int port, int64_t deadline, const char *what, char *err,
                      size_t n) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = ip;
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            snprintf(err, n, "socket: %s", strerror(errno));
            return -1;
        }
        if (!connect(fd, (struct sockaddr *)&a, sizeof a)) return fd;
        int e = errno;
        close(fd);
        char addr[INET_ADDRSTRLEN] = "?";
        inet_ntop(AF_INET, &a.sin_addr, addr, sizeof addr);
        if (now_ms() >= deadline || (e != ECONNREFUSED && e != ETIMEDOUT && e != EINTR &&
                                     e != ENETUNREACH && e != EHOSTUNREACH && e != ECONNRESET)) {
            snprintf(err, n, "cannot reach %s at %s:%d: %s", what, addr, port, strerror(e));
            return -1;
        }
        if (musa_interrupt_pending()) {
            snprintf(err, n, "interrupted while trying to reach %s at %s:%d", what, addr, port);
            return -1;
        }
        usleep(20000);
    }
}

static int send_u32(int fd, const uint32_t *v, int k, int peer, char *err, size_t n) {
    uint32_t b[8];
    for (int i = 0; i < k; i++) b[i] = htonl(v[i]);
    return xfer(fd, b, sizeof(uint32_t) * (size_t)k, peer, -1, NULL, 0, peer, T.timeout_ms, err, n);
}
static int recv_u32(int fd, uint32_t *v, int k, int peer, char *err, size_t n) {
    if (xfer(-1, NULL, 0, peer, fd, v, sizeof(uint32_t) * (size_t)k, peer, T.timeout_ms, err, n))
        return -1;
    for (int i = 0; i < k; i++) v[i] = ntohl(v[i]);
    return 0;
}

/* Rank 0: take every other rank's hello; fill ips/ports (rank 0's ip stays
 * 0: the others know its address). On failure every connected rank is told
 * why. */
static int gather_hellos(int lfd, int64_t deadline, uint32_t *ips, uint32_t *ports, char *err,
                         size_t n) {
    int P = T.size, got = 1, rc = 0;
    int *conn = malloc(sizeof(int) * (size_t)P);
    if (!conn) return snprintf(err, n, "out of memory"), -1;
    for (int i = 0; i < P; i++) conn[i] = -1;
    while (got < P && !rc) {
        uint32_t ip = 0, h[5];
        int fd = accept_by(lfd, deadline, &ip, "the other ranks to connect", err, n);
        if (fd < 0) {
            snprintf(err + strlen(err), n - strlen(err), " (%d of %d ranks arrived)", got, P);
            rc = -1;
            break;
        }
        char why[256];
        if (recv_u32(fd, h, 5, -1, why, sizeof why) || h[0] != MAGIC || h[1] != PROTO) {
            close(fd); /* not one of ours (or another version's): ignore it */
            continue;
        }
        int r = (int)h[2];
        if ((int)h[3] != P) {
            snprintf(err, n, "rank %d was given world_size %d, rank 0 world_size %d", r, (int)h[3],
                     P);
            rc = -1;
        } else if (r <= 0 || r >= P) {
            snprintf(err, n, "a process joined as rank %d, outside 1..%d (world_size %d)", r, P - 1,
                     P);
            rc = -1;
        } else if (conn[r] >= 0) {
            snprintf(err, n, "two processes joined as rank %d (world_size %d)", r, P);
            rc = -1;
        } else {
            conn[r] = fd, ips[r] = ip, ports[r] = h[4], got++;
            continue;
        }
        conn[0] = fd; /* tell this one too */
    }
    for (int i = 0; i < P; i++) {
        if (conn[i] < 0) continue;
        char why[256];
        uint32_t head[3] = {MAGIC, rc ? 1u : 0u, (uint32_t)P};
        if (!send_u32(conn[i], head, 3, i, why, sizeof why)) {
            if (rc) {
                uint32_t len = (uint32_t)strlen(err);
                send_u32(conn[i], &len, 1, i, why, sizeof why);
                xfer(conn[i], err, len, i, -1, NULL, 0, i, T.timeout_ms, why, sizeof why);
            } else {
                for (int j = 0; j < P; j++) {
                    uint32_t e[2] = {ips[j], ports[j]};
                    e[0] = ntohl(e[0]); /* (sent in network order by send_u32) */
                    send_u32(conn[i], e, 2, i, why, sizeof why);
                }
            }
        }
        close(conn[i]);
    }
    free(conn);
    return rc;
}

/* Ranks 1..P-1: say hello to rank 0, get the ring's addresses. */
static int hello(uint32_t ip0, int ring_port, int64_t deadline, uint32_t *ips, uint32_t *ports,
                 char *err, size_t n) {
    int P = T.size, fd = connect_by(ip0, T.port, deadline, "rank 0", err, n);
    if (fd < 0) return -1;
    uint32_t h[5] = {MAGIC, PROTO, (uint32_t)T.rank, (uint32_t)P, (uint32_t)ring_port}, head[3];
    int rc = send_u32(fd, h, 5, 0, err, n) || recv_u32(fd, head, 3, 0, err, n) ? -1 : 0;
    if (!rc && (head[0] != MAGIC || (head[1] == 0 && (int)head[2] != P))) {
        snprintf(err, n, "rank 0 answered with a malformed message");
        rc = -1;
    } else if (!rc && head[1]) {
        uint32_t len = 0;
        char why[300] = "";
        if (!recv_u32(fd, &len, 1, 0, err, n) && len < sizeof why)
            xfer(-1, NULL, 0, 0, fd, why, len, 0, T.timeout_ms, err, n);
        snprintf(err, n, "rank 0 refused the group: %s", why);
        rc = -1;
    }
    for (int j = 0; j < P && !rc; j++) {
        uint32_t e[2];
        rc = recv_u32(fd, e, 2, 0, err, n);
        ips[j] = htonl(e[0]), ports[j] = e[1];
        if (!rc && (ports[j] == 0 || ports[j] > 65535)) {
            snprintf(err, n, "rank 0 sent port %u for rank %d", ports[j], j);
            rc = -1;
        }
    }
    close(fd);
    if (!rc) ips[0] = ip0;
    return rc;
}

static int resolve(const char *host, uint32_t *ip, char *err, size_t n) {
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int e = getaddrinfo(host, NULL, &hints, &res);
    if (e || !res) {
        snprintf(err, n, "cannot resolve the address '%s' of rank 0: %s", host, gai_strerror(e));
        return -1;
    }
    *ip = ((struct sockaddr_in *)res->ai_addr)->sin_addr.s_addr;
    freeaddrinfo(res);
    return 0;
}

static int t_init(int *rank, int *size, char *err, size_t n) {
    int P = T.size, r = T.rank, rc = 0, lfd = -1, rfd = -1, ring_port = 0;
    int64_t deadline = now_ms() + T.timeout_ms;
    uint32_t ip0 = 0, *ips = calloc((size_t)P * 2, sizeof(uint32_t)), *ports = ips + P;
    T.seq = 0, T.broken[0] = 0;
    if (!ips) return snprintf(err, n, "out of memory"), -1;
    if (P > 1) {
        rc = resolve(T.host, &ip0, err, n);
        if (!rc) rc = listen_on(0, &rfd, &ring_port, err, n);
        if (!rc && r == 0) {
            rc = listen_on(T.port, &lfd, &(int){0}, err, n);
            ports[0] = (uint32_t)ring_port;
            if (!rc) rc = gather_hellos(lfd, deadline, ips, ports, err, n);
            if (!rc) ips[0] = ip0; /* (only rank P - 1 connects to it) */
        } else if (!rc) {
            rc = hello(ip0, ring_port, deadline, ips, ports, err, n);
        }
        close_fd(&lfd);
        int nx = (r + 1) % P, pv = (r + P - 1) % P;
        if (!rc) {
            T.next = connect_by(ips[nx], (int)ports[nx], deadline, "the next rank", err, n);
            uint32_t me[2] = {MAGIC, (uint32_t)r};
            rc = T.next < 0 || send_u32(T.next, me, 2, nx, err, n) ? -1 : 0;
        }
        while (!rc && T.prev < 0) {
            uint32_t ip, who[2];
            char what[64];
            snprintf(what, sizeof what, "rank %d to connect", pv);
            int fd = accept_by(rfd, deadline, &ip, what, err, n);
            if (fd < 0)
                rc = -1;
            else if (!recv_u32(fd, who, 2, pv, err, n) && who[0] == MAGIC && (int)who[1] == pv)
                T.prev = fd;
            else
                close(fd); /* a stray connection */
        }
        close_fd(&rfd);
        int one = 1;
        if (!rc) {
            setsockopt(T.next, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            setsockopt(T.prev, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        } else {
            close_fd(&T.next), close_fd(&T.prev);
        }
    }
    free(ips);
    if (rc) {
        char why[400];
        snprintf(why, sizeof why, "%s", err);
        snprintf(err, n, "rank %d of %d, rendezvous at %s:%d: %s", r, P, T.host, T.port, why);
        return -1;
    }
    *rank = r, *size = P;
    return 0;
}

static int t_finalize(char *err, size_t n) {
    (void)err, (void)n;
    close_fd(&T.next), close_fd(&T.prev);
    return 0;
}

static void t_abort(int code) {
    (void)code;
    close_fd(&T.next), close_fd(&T.prev); /* the neighbours fail at once */
}

static const musa_mpi_api tcp_api = {
    .version = MUSA_MPI_API_VERSION,
    .init = t_init,
    .finalize = t_finalize,
    .abort = t_abort,
    .allreduce = t_allreduce,
    .broadcast = t_broadcast,
    .allgather = t_allgather,
    .reduce_scatter = t_reduce_scatter,
    .barrier = t_barrier,
    .test = t_test,
    .wait = t_wait,
};

const musa_mpi_api *musa_tcp_api(const char *host, int port, int rank, int size, int timeout_ms) {
    snprintf(T.host, sizeof T.host, "%s", host);
    T.port = port, T.rank = rank, T.size = size, T.timeout_ms = timeout_ms;
    return &tcp_api;
}
