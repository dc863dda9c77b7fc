/*
 * comm.c - the process group: loading the MPI shim, serialising MPI calls,
 * and the collectives in flight (see comm.h).
 *
 * Invariants:
 * - every MPI call happens under `mpi_lock` (MPI_THREAD_SERIALIZED);
 * - a collective in flight is keyed by its buffer, which its caller keeps
 *   alive until musa_comm_finish (a plan's arena, a bucket tensor): the
 *   table never owns memory, and a failed run drains it before the memory
 *   can be reused;
 * - after musa_dist_finalize the group cannot start again (MPI's rule).
 */
#define _GNU_SOURCE
#include "comm.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/base.h"
#include "../base/threadpool.h"
#include "../base/vec.h"

enum { GROUP_NONE, GROUP_UP, GROUP_DONE, GROUP_FORKED };

typedef struct inflight {
    void *buf;
    musa_mpi_req *req;
} inflight;

static pthread_mutex_t mpi_lock = PTHREAD_MUTEX_INITIALIZER;
static const musa_mpi_api *api, *mpi_api; /* the group's backend; the MPI shim once loaded */
static int group_state = GROUP_NONE, group_rank = -1, group_size = 0;
static MUSA_VEC(inflight) flights;
static int n_flights; /* flights.len, for lock-free polling */

/* The backend's failure as a musa error naming who (MUSA_ERR_INTERRUPTED
 * when musa_interrupt stopped it). Called with the lock held. */
static int mpi_failed(const char *who, const char *err) {
    if (musa_interrupt_take())
        return musa_err(MUSA_ERR_INTERRUPTED, "[%s] interrupted: %s (rank %d of %d)", who, err,
                        group_rank, group_size);
    return musa_err(MUSA_ERR_RUNTIME, "[%s] %s (rank %d of %d)", who, err, group_rank, group_size);
}

/* The shim next to the code of this library (libmusa.so, the Python
 * module, a test binary), else wherever the loader finds it. */
static void *load_shim(char *why, size_t n) {
    const char *env = getenv("MUSA_MPI_SHIM");
    if (env && *env) {
        void *h = dlopen(env, RTLD_NOW | RTLD_GLOBAL);
        if (!h) snprintf(why, n, "%s", dlerror());
        return h;
    }
    Dl_info info;
    if (dladdr((void *)load_shim, &info) && info.dli_fname) {
        char path[4096];
        const char *slash = strrchr(info.dli_fname, '/');
        int dir = slash ? (int)(slash - info.dli_fname) : 0;
        snprintf(path, sizeof path, "%.*s%slibmusa_mpi.so", dir, info.dli_fname, slash ? "/" : "");
        /* RTLD_GLOBAL: Open MPI loads its own plugins, which need libmpi's symbols */
        void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
        if (h) return h;
    }
    void *h = dlopen("libmusa_mpi.so", RTLD_NOW | RTLD_GLOBAL);
    if (!h) snprintf(why, n, "%s", dlerror());
    return h;
}

/* A forked child (DataLoader workers) copies the group's state but not
 * MPI's connections: it must never call MPI (nor finalize at exit). */
static void forked_child(void) {
    if (group_state == GROUP_UP) group_state = GROUP_FORKED;
    flights.len = 0, n_flights = 0;
    pthread_mutex_init(&mpi_lock, NULL);
}
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void register_atfork(void) {
    pthread_atfork(NULL, NULL, forked_child);
}

/* Start the group on backend a (the lock held). */
static int start_locked(const musa_mpi_api *a) {
    char err[512];
    int r = -1, s = 0;
    if (a->init(&r, &s, err, sizeof err))
        return musa_err(musa_interrupt_take() ? MUSA_ERR_INTERRUPTED : MUSA_ERR_RUNTIME,
                        "[init_process_group] %s", err);
    api = a;
    group_rank = r, group_size = s;
    __atomic_store_n(&group_state, GROUP_UP, __ATOMIC_RELEASE);
    return MUSA_OK;
}

/* Why a group cannot start now (the lock held), or MUSA_OK. */
static int cannot_start_locked(void) {
    if (group_state == GROUP_FORKED)
        return musa_err(MUSA_ERR_RUNTIME, "[init_process_group] this process was forked from a "
                                          "rank: the process group cannot be used here");
    return MUSA_OK;
}

int musa_dist_init(void) {
    pthread_once(&atfork_once, register_atfork);
    pthread_mutex_lock(&mpi_lock);
    int rc = MUSA_OK;
    if (group_state == GROUP_UP) goto out;
    if ((rc = cannot_start_locked())) goto out;
    if (group_state == GROUP_DONE) {
        rc = musa_err(MUSA_ERR_RUNTIME, "[init_process_group] the MPI process group was "
                                        "destroyed; MPI cannot start again in this process");
        goto out;
    }
    if (!mpi_api) {
        char why[512] = "";
        void *h = load_shim(why, sizeof why);
        musa_mpi_api_fn fn = h ? (musa_mpi_api_fn)dlsym(h, MUSA_MPI_API_SYMBOL) : NULL;
        const musa_mpi_api *a = fn ? fn() : NULL;
        if (!a || a->version != MUSA_MPI_API_VERSION) {
            rc = musa_err(MUSA_ERR_RUNTIME,
                          "[init_process_group] cannot load musa's MPI backend (libmusa_mpi.so): "
                          "%s; musa builds it when Open MPI's libopenmpi-dev is installed",
                          h ? "it is from another version of musa" : why);
            if (h) dlclose(h);
            goto out;
        }
        mpi_api = a;
    }
    rc = start_locked(mpi_api);
out:
    pthread_mutex_unlock(&mpi_lock);
    return rc;
}

int musa_dist_init_tcp(const char *host, int port, int rank, int world_size, double timeout_s) {
    if (!host || !*host || strlen(host) > 255)
        return musa_err(MUSA_ERR_VALUE, "[init_process_group] the address of rank 0 must be a "
                                        "host name or IPv4 address of 1 to 255 characters");
    if (port < 1 || port > 65535)
        return musa_err(MUSA_ERR_VALUE, "[init_process_group] port %d is not in 1..65535", port);
    if (world_size < 1 || rank < 0 || rank >= world_size)
        return musa_err(MUSA_ERR_VALUE,
                        "[init_process_group] rank %d of world_size %d: the rank must be in "
                        "0..world_size-1",
                        rank, world_size);
    if (!(timeout_s > 0) || timeout_s > 1e6)
        return musa_err(MUSA_ERR_VALUE,
                        "[init_process_group] timeout %g s: it must be positive and at most "
                        "1e6 s",
                        timeout_s);
    pthread_once(&atfork_once, register_atfork);
    pthread_mutex_lock(&mpi_lock);
    int rc = cannot_start_locked();
    if (!rc && group_state == GROUP_UP)
        rc = musa_err(MUSA_ERR_RUNTIME,
                      "[init_process_group] the process group is already initialized (backend "
                      "%s, rank %d of %d)",
                      musa_dist_backend(), group_rank, group_size);
    if (!rc)
        rc =
            start_locked(musa_tcp_api(host, port, rank, world_size, (int)(timeout_s * 1000 + 0.5)));
    pthread_mutex_unlock(&mpi_lock);
    return rc;
}

const char *musa_dist_backend(void) {
    if (!musa_dist_is_initialized()) return NULL;
    return api == mpi_api ? "mpi" : "tcp";
}

bool musa_dist_is_initialized(void) {
    return __atomic_load_n(&group_state, __ATOMIC_ACQUIRE) == GROUP_UP;
}
int musa_dist_rank(void) {
    return musa_dist_is_initialized() ? group_rank : -1;
}
int musa_dist_world_size(void) {
    return musa_dist_is_initialized() ? group_size : -1;
}
int musa_comm_rank(void) {
    return group_rank;
}
int musa_comm_size(void) {
    return group_size;
}

int musa_comm_ready(const char *who) {
    if (musa_dist_is_initialized()) return MUSA_OK;
    if (__atomic_load_n(&group_state, __ATOMIC_ACQUIRE) == GROUP_FORKED)
        return musa_err(MUSA_ERR_RUNTIME,
                        "[%s] this process was forked from rank %d (a DataLoader worker?): the "
                        "process group belongs to that rank and cannot be used here",
                        who, group_rank);
    return musa_err(MUSA_ERR_RUNTIME,
                    "[%s] the default process group is not initialized: call "
                    "musa.distributed.init_process_group() (musa_dist_init() in C) first",
                    who);
}

static int drain_locked(void) {
    int rc = MUSA_OK;
    char err[512];
    for (int64_t i = 0; i < flights.len; i++)
        if (flights.data[i].req && api->wait(flights.data[i].req, err, sizeof err) && !rc)
            rc = mpi_failed("process group", err);
    flights.len = 0;
    __atomic_store_n(&n_flights, 0, __ATOMIC_RELAXED);
    return rc;
}

int musa_comm_drain(void) {
    pthread_mutex_lock(&mpi_lock);
    int rc = group_state == GROUP_UP ? drain_locked() : MUSA_OK;
    pthread_mutex_unlock(&mpi_lock);
    return rc;
}

int musa_comm_pending(void) {
    return __atomic_load_n(&n_flights, __ATOMIC_RELAXED);
}

int musa_dist_finalize(void) {
    pthread_mutex_lock(&mpi_lock);
    int rc = MUSA_OK;
    if (group_state == GROUP_UP) {
        rc = drain_locked();
        musa_vec_free(&flights);
        char err[512];
        if (api->finalize(err, sizeof err) && !rc)
            rc = musa_err(MUSA_ERR_RUNTIME, "[destroy_process_group] %s", err);
        /* MPI cannot start again; a TCP group can */
        __atomic_store_n(&group_state, api == mpi_api ? GROUP_DONE : GROUP_NONE, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&mpi_lock);
    return rc;
}

void musa_dist_abort(int code) {
    /* no lock: another thread may hold it inside a collective that will
     * never finish, which is why the job is being aborted */
    if (musa_dist_is_initialized()) api->abort(code);
    _exit(code);
}

int musa_dist_barrier(void) {
    int rc = musa_comm_ready("barrier");
    if (rc) return rc;
    char err[512];
    pthread_mutex_lock(&mpi_lock);
    if (api->barrier(err, sizeof err)) rc = mpi_failed("barrier", err);
    pthread_mutex_unlock(&mpi_lock);
    return rc;
}

/* ---- serialised calls ---- */

#define LOCKED_CALL(who, call)                                                                     \
    do {                                                                                           \
        int rc_ = musa_comm_ready(who);                                                            \
        if (rc_) return rc_;                                                                       \
        char err[512];                                                                             \
        pthread_mutex_lock(&mpi_lock);                                                             \
        if (call) rc_ = mpi_failed(who, err);                                                      \
        pthread_mutex_unlock(&mpi_lock);                                                           \
        return rc_;                                                                                \
    } while (0)

int musa_comm_allreduce(const char *who, const void *send, void *recv, int64_t count, int dtype,
                        int op) {
    LOCKED_CALL(who, api->allreduce(send, recv, count, dtype, op, NULL, err, sizeof err));
}
int musa_comm_broadcast(const char *who, void *buf, int64_t bytes, int root) {
    LOCKED_CALL(who, api->broadcast(buf, bytes, root, err, sizeof err));
}
int musa_comm_allgather(const char *who, const void *send, void *recv, int64_t bytes) {
    LOCKED_CALL(who, api->allgather(send, recv, bytes, err, sizeof err));
}
int musa_comm_reduce_scatter(const char *who, const void *send, void *recv, int64_t count,
                             int dtype, int op) {
    LOCKED_CALL(who, api->reduce_scatter(send, recv, count, dtype, op, err, sizeof err));
}

/* ---- collectives in flight ---- */

/* Let MPI move the ones in flight along; finished ones stay in the table
 * (their test freed the request: mark them NULL) until finished by key. */
static void progress_locked(void) {
    char err[512];
    for (int64_t i = 0; i < flights.len; i++) {
        int done = 0;
        if (flights.data[i].req && !api->test(flights.data[i].req, &done, err, sizeof err) && done)
            flights.data[i].req = NULL;
    }
}

void musa_comm_progress(void) {
    if (pthread_mutex_trylock(&mpi_lock)) return;
    if (group_state == GROUP_UP) progress_locked();
    pthread_mutex_unlock(&mpi_lock);
}

void musa_dist_progress(void) {
    if (musa_comm_pending()) musa_comm_progress();
}

int musa_comm_start(const char *who, void *buf, int64_t count, int dtype, int op) {
    int rc = musa_comm_ready(who);
    if (rc) return rc;
    char err[512];
    pthread_mutex_lock(&mpi_lock);
    for (int64_t i = 0; i < flights.len && !rc; i++)
        if (flights.data[i].buf == buf)
            rc = musa_err(MUSA_ERR_RUNTIME, "[%s] a collective is already in flight on this buffer",
                          who);
    if (!rc) rc = musa_vec_reserve(&flights, flights.len + 1) ? musa_err_nomem(who, 0) : MUSA_OK;
    musa_mpi_req *req = NULL;
    if (!rc && api->allreduce(NULL, buf, count, dtype, op, &req, err, sizeof err))
        rc = mpi_failed(who, err);
    if (!rc) {
        progress_locked();
        flights.data[flights.len++] = (inflight){.buf = buf, .req = req};
        __atomic_store_n(&n_flights, (int)flights.len, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&mpi_lock);
    return rc;
}

int musa_comm_finish(const char *who, void *buf) {
    int rc = musa_comm_ready(who);
    if (rc) return rc;
    char err[512];
    pthread_mutex_lock(&mpi_lock);
    int64_t i = 0;
    while (i < flights.len && flights.data[i].buf != buf) i++;
    if (i == flights.len) {
        rc = musa_err(MUSA_ERR_RUNTIME,
                      "[%s] no all_reduce is in flight on this buffer (it was finished "
                      "already, or started by another process group)",
                      who);
    } else {
        musa_mpi_req *req = flights.data[i].req;
        flights.data[i] = flights.data[--flights.len];
        __atomic_store_n(&n_flights, (int)flights.len, __ATOMIC_RELAXED);
        if (req && api->wait(req, err, sizeof err)) rc = mpi_failed(who, err);
    }
    pthread_mutex_unlock(&mpi_lock);
    return rc;
}
