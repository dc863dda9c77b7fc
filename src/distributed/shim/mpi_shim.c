/*
 * mpi_shim.c - libmusa_mpi.so: the MPI calls of musa's collectives, on raw
 * buffers (see ../comm.h). The only file of musa that includes <mpi.h>.
 *
 * libmusa loads this library with dlopen when a process group starts, so
 * processes that never communicate never load MPI, and libmusa itself has no
 * link-time dependency on it.
 *
 * - MPI runs at MPI_THREAD_SERIALIZED: libmusa holds a lock around every
 *   call, so any thread may communicate.
 * - Errors return (MPI_ERRORS_RETURN on MPI_COMM_WORLD) with MPI's text.
 * - Counts above INT_MAX are sent in pieces; a non-blocking call then holds
 *   one request per piece.
 * - float16 and bfloat16 have no MPI type: they travel as 16-bit words with
 *   user-defined reductions that compute in float32 and round once.
 * - bool reduces with logical or (sum, max) and logical and (min).
 */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../base/dtype.h"
#include "../comm.h"

#define PIECE ((int64_t)1 << 30) /* elements per MPI call */

struct musa_mpi_req {
    int n;
    MPI_Request r[];
};

static MPI_Op half_ops[2][3]; /* [float16, bfloat16][sum, max, min] */

static int fail(int rc, const char *what, char *err, size_t n) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0, cls = rc;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "error %d", rc);
    MPI_Error_class(rc, &cls);
    snprintf(err, n, "%s: %s", what, msg);
    return cls ? cls : 1;
}

/* ---- 16-bit floats (the conversions of base/dtype.h, header only) ---- */

static float bf16_f(uint16_t b) {
    return musa_bf16_to_f32(b);
}
static uint16_t f_bf16(float f) {
    return musa_f32_to_bf16(f);
}
static float f16_f(uint16_t h) {
    return musa_f16_bits_to_f32(h);
}
static uint16_t f_f16(float f) {
    return musa_f32_to_f16_bits(f);
}

#define HALF_OP(name, to, from, expr)                                                              \
    static void name(void *in, void *inout, int *len, MPI_Datatype *dt) {                          \
        (void)dt;                                                                                  \
        const uint16_t *a = in;                                                                    \
        uint16_t *b = inout;                                                                       \
        for (int i = 0; i < *len; i++) {                                                           \
            float x = to(a[i]), y = to(b[i]);                                                      \
            b[i] = from(expr);                                                                     \
        }                                                                                          \
    }
/* max/min keep NaN, as musa's reductions do */
HALF_OP(f16_sum, f16_f, f_f16, x + y)
HALF_OP(f16_max, f16_f, f_f16, (x != x || x > y) ? x : y)
HALF_OP(f16_min, f16_f, f_f16, (x != x || x < y) ? x : y)
HALF_OP(bf16_sum, bf16_f, f_bf16, x + y)
HALF_OP(bf16_max, bf16_f, f_bf16, (x != x || x > y) ? x : y)
HALF_OP(bf16_min, bf16_f, f_bf16, (x != x || x < y) ? x : y)

static int mpi_type(int dtype, MPI_Datatype *t) {
    switch (dtype) {
    case MUSA_DTYPE_FLOAT32:
        *t = MPI_FLOAT;
        return 0;
    case MUSA_DTYPE_FLOAT64:
        *t = MPI_DOUBLE;
        return 0;
    case MUSA_DTYPE_FLOAT16:
    case MUSA_DTYPE_BFLOAT16:
        *t = MPI_UINT16_T;
        return 0;
    case MUSA_DTYPE_INT64:
        *t = MPI_INT64_T;
        return 0;
    case MUSA_DTYPE_INT32:
        *t = MPI_INT32_T;
        return 0;
    case MUSA_DTYPE_INT16:
        *t = MPI_INT16_T;
        return 0;
    case MUSA_DTYPE_INT8:
        *t = MPI_INT8_T;
        return 0;
    case MUSA_DTYPE_UINT8:
        *t = MPI_UINT8_T;
        return 0;
    case MUSA_DTYPE_BOOL:
        *t = MPI_C_BOOL;
        return 0;
    default:
        return -1;
    }
}

static int mpi_op(int dtype, int op, MPI_Op *o) {
    int k = op == MUSA_REDUCE_MAX ? 1 : op == MUSA_REDUCE_MIN ? 2 : 0;
    if (dtype == MUSA_DTYPE_FLOAT16 || dtype == MUSA_DTYPE_BFLOAT16)
        *o = half_ops[dtype == MUSA_DTYPE_BFLOAT16][k];
    else if (dtype == MUSA_DTYPE_BOOL)
        *o = k == 2 ? MPI_LAND : MPI_LOR;
    else
        *o = k == 1 ? MPI_MAX : k == 2 ? MPI_MIN : MPI_SUM;
    return 0;
}

static int s_init(int *rank, int *size, char *err, size_t n) {
    int flag = 0, provided = 0, rc;
    MPI_Initialized(&flag);
    if (!flag) {
        rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
        if (rc != MPI_SUCCESS) return fail(rc, "MPI_Init_thread", err, n);
    } else {
        MPI_Query_thread(&provided);
    }
    if (provided < MPI_THREAD_SERIALIZED) {
        snprintf(err, n, "MPI provides thread level %d; musa needs MPI_THREAD_SERIALIZED",
                 provided);
        return 1;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_User_function *fns[2][3] = {{f16_sum, f16_max, f16_min}, {bf16_sum, bf16_max, bf16_min}};
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 3; k++)
            if (half_ops[i][k] == MPI_OP_NULL || !half_ops[i][k])
                MPI_Op_create(fns[i][k], 1, &half_ops[i][k]);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    return 0;
}

static int s_finalize(char *err, size_t n) {
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 3; k++)
            if (half_ops[i][k] && half_ops[i][k] != MPI_OP_NULL) MPI_Op_free(&half_ops[i][k]);
    memset(half_ops, 0, sizeof half_ops);
    int rc = MPI_Finalize();
    return rc == MPI_SUCCESS ? 0 : fail(rc, "MPI_Finalize", err, n);
}

static void s_abort(int code) {
    MPI_Abort(MPI_COMM_WORLD, code);
}

static int s_allreduce(const void *send, void *recv, int64_t count, int dtype, int op,
                       musa_mpi_req **req, char *err, size_t n) {
    MPI_Datatype t;
    MPI_Op o;
    if (mpi_type(dtype, &t) || mpi_op(dtype, op, &o)) {
        snprintf(err, n, "no MPI type for dtype %d", dtype);
        return 1;
    }
    int tsize = 0;
    MPI_Type_size(t, &tsize);
    size_t es = (size_t)tsize;
    int pieces = (int)((count + PIECE - 1) / PIECE);
    musa_mpi_req *q = NULL;
    if (req) {
        q = malloc(sizeof *q + sizeof(MPI_Request) * (size_t)(pieces ? pieces : 1));
        if (!q) {
            snprintf(err, n, "out of memory for an MPI request");
            return 1;
        }
        q->n = 0;
        *req = q;
    }
    for (int64_t at = 0; at < count; at += PIECE) {
        int c = (int)(count - at < PIECE ? count - at : PIECE);
        const void *s = send ? (const char *)send + (size_t)at * es : MPI_IN_PLACE;
        void *r = (char *)recv + (size_t)at * es;
        int rc = q ? MPI_Iallreduce(s, r, c, t, o, MPI_COMM_WORLD, &q->r[q->n])
                   : MPI_Allreduce(s, r, c, t, o, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) {
            if (q) {
                MPI_Waitall(q->n, q->r, MPI_STATUSES_IGNORE);
                free(q);
                *req = NULL;
            }
            return fail(rc, q ? "MPI_Iallreduce" : "MPI_Allreduce", err, n);
        }
        if (q) q->n++;
    }
    return 0;
}

static int s_broadcast(void *buf, int64_t bytes, int root, char *err, size_t n) {
    for (int64_t at = 0; at < bytes; at += PIECE) {
        int c = (int)(bytes - at < PIECE ? bytes - at : PIECE);
        int rc = MPI_Bcast((char *)buf + at, c, MPI_BYTE, root, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return fail(rc, "MPI_Bcast", err, n);
    }
    return 0;
}

static int s_allgather(const void *send, void *recv, int64_t bytes, char *err, size_t n) {
    if (bytes > INT_MAX) { /* a contiguous type of the whole block */
        snprintf(err, n, "MPI_Allgather: %lld bytes per rank is over MPI's int count",
                 (long long)bytes);
        return 1;
    }
    int rc = MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : fail(rc, "MPI_Allgather", err, n);
}

static int s_reduce_scatter(const void *send, void *recv, int64_t count, int dtype, int op,
                            char *err, size_t n) {
    MPI_Datatype t;
    MPI_Op o;
    if (mpi_type(dtype, &t) || mpi_op(dtype, op, &o)) {
        snprintf(err, n, "no MPI type for dtype %d", dtype);
        return 1;
    }
    if (count > INT_MAX) {
        snprintf(err, n, "MPI_Reduce_scatter_block: %lld elements per rank is over MPI's int count",
                 (long long)count);
        return 1;
    }
    int rc = MPI_Reduce_scatter_block(send, recv, (int)count, t, o, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : fail(rc, "MPI_Reduce_scatter_block", err, n);
}

static int s_barrier(char *err, size_t n) {
    int rc = MPI_Barrier(MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : fail(rc, "MPI_Barrier", err, n);
}

static int s_test(musa_mpi_req *q, int *done, char *err, size_t n) {
    int flag = 0;
    int rc = MPI_Testall(q->n, q->r, &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return fail(rc, "MPI_Testall", err, n);
    *done = flag;
    if (flag) free(q);
    return 0;
}

static int s_wait(musa_mpi_req *q, char *err, size_t n) {
    int rc = MPI_Waitall(q->n, q->r, MPI_STATUSES_IGNORE);
    free(q);
    return rc == MPI_SUCCESS ? 0 : fail(rc, "MPI_Waitall", err, n);
}

static const musa_mpi_api api = {
    .version = MUSA_MPI_API_VERSION,
    .init = s_init,
    .finalize = s_finalize,
    .abort = s_abort,
    .allreduce = s_allreduce,
    .broadcast = s_broadcast,
    .allgather = s_allgather,
    .reduce_scatter = s_reduce_scatter,
    .barrier = s_barrier,
    .test = s_test,
    .wait = s_wait,
};

__attribute__((visibility("default"))) const musa_mpi_api *musa_mpi_api_v1(void) {
    return &api;
}
