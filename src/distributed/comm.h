/*
 * comm.h - the communication layer under musa's collectives.
 *
 * Two halves:
 * - a backend: a table of collectives on raw buffers (musa_mpi_api). The
 *   MPI shim (shim/mpi_shim.c, built as libmusa_mpi.so and linked with
 *   Open MPI) fills it with MPI calls, knowing nothing of musa but this
 *   header and the dtype numbering; tcp.c (in libmusa) fills it with a ring
 *   of TCP connections (musa_dist_init_tcp);
 * - comm.c, in libmusa: picks the backend (loading the shim on first use,
 *   with dlopen, so a process that never uses MPI never loads it), holds
 *   the process group's state, serialises the backend's calls (MPI's
 *   MPI_THREAD_SERIALIZED), and keeps the table of collectives in flight,
 *   keyed by their buffer.
 *
 * Buffers are contiguous arrays of `count` elements of a musa dtype. The
 * reduction `op` is a musa_reduce_op; MUSA_REDUCE_AVG is done as a sum
 * here and divided by the caller (the kernels), where the dtype is known.
 */
#ifndef MUSA_COMM_H
#define MUSA_COMM_H

#include <stddef.h>
#include <stdint.h>

#define MUSA_MPI_API_VERSION 1

/* One MPI request, or several when a message was cut into pieces of at most
 * INT_MAX elements (MPI counts are int). Opaque to libmusa. */
typedef struct musa_mpi_req musa_mpi_req;

/* Every function returns 0 or an MPI error class, with a message in
 * err[0..n) (MPI's own text plus what was being done). */
typedef struct musa_mpi_api {
    int version;
    int (*init)(int *rank, int *size, char *err, size_t n);
    int (*finalize)(char *err, size_t n);
    void (*abort)(int code);
    /* send == NULL: in place in recv. req != NULL: non-blocking, *req set */
    int (*allreduce)(const void *send, void *recv, int64_t count, int dtype, int op,
                     musa_mpi_req **req, char *err, size_t n);
    int (*broadcast)(void *buf, int64_t bytes, int root, char *err, size_t n);
    /* recv holds size * bytes, rank r's block at r * bytes */
    int (*allgather)(const void *send, void *recv, int64_t bytes, char *err, size_t n);
    /* send holds size * count elements; recv gets this rank's reduced block */
    int (*reduce_scatter)(const void *send, void *recv, int64_t count, int dtype, int op, char *err,
                          size_t n);
    int (*barrier)(char *err, size_t n);
    /* *done = 1 once complete (the request is then freed) */
    int (*test)(musa_mpi_req *req, int *done, char *err, size_t n);
    int (*wait)(musa_mpi_req *req, char *err, size_t n); /* frees the request */
} musa_mpi_api;

/* The shim's one exported symbol. */
typedef const musa_mpi_api *(*musa_mpi_api_fn)(void);
#define MUSA_MPI_API_SYMBOL "musa_mpi_api_v1"

/* The same table over TCP (tcp.c, in libmusa), set up for one group: rank
 * 0 at host:port, waits bounded by timeout_ms. */
const musa_mpi_api *musa_tcp_api(const char *host, int port, int rank, int size, int timeout_ms);

/* ---- libmusa's side (comm.c) ---- */

/* Whether a process group is up, and this process's place in it. */
int musa_comm_ready(const char *who); /* MUSA_OK, or an error naming who */
int musa_comm_rank(void);
int musa_comm_size(void);

/* Serialised MPI calls (each returns a musa status with the error set,
 * naming who). */
int musa_comm_allreduce(const char *who, const void *send, void *recv, int64_t count, int dtype,
                        int op);
int musa_comm_broadcast(const char *who, void *buf, int64_t bytes, int root);
int musa_comm_allgather(const char *who, const void *send, void *recv, int64_t bytes);
int musa_comm_reduce_scatter(const char *who, const void *send, void *recv, int64_t count,
                             int dtype, int op);

/* Collectives in flight, keyed by their buffer: start one in place on buf
 * (count elements), finish the one started on buf. Starting advances the
 * others (MPI progresses non-blocking collectives only inside MPI calls). */
int musa_comm_start(const char *who, void *buf, int64_t count, int dtype, int op);
int musa_comm_finish(const char *who, void *buf);
/* Finish every collective in flight (errors, process group teardown). */
int musa_comm_drain(void);
/* How many are in flight (a relaxed atomic load: for polling). */
int musa_comm_pending(void);
/* Let MPI move the collectives in flight along, unless another thread is
 * in MPI right now. Executors call it between steps while any are in
 * flight: MPI progresses non-blocking collectives only inside MPI calls. */
void musa_comm_progress(void);

#endif
