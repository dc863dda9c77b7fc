/*
 * stream.h - streams inside musa: how the dispatcher and the plan runner
 * hand work to a stream, and how host access waits for it (stream.c).
 *
 * A stream is a worker thread running tasks in the order they were
 * submitted. A task names the storages it reads and writes; stream.c keeps,
 * per storage, the last writing task and the reading tasks since, and from
 * them makes each task wait for the work on other streams it depends on
 * (read after write, write after read or write). Same-stream order needs
 * nothing. Synchronous code (the default stream: the calling thread) waits
 * for the pending tasks on the storages it touches, so results equal a
 * synchronous run whatever the streams do.
 *
 * Work is named by (stream id, sequence number); ids are never reused and
 * a stream is only destroyed after its work is done, so a record naming a
 * stream that is gone names finished work.
 *
 * Tasks hold references to their storages; the references are dropped on a
 * user thread (at the next submit, wait or synchronisation), never on a
 * worker, so a storage's deleter (which may take the GIL) never runs there.
 */
#ifndef MUSA_STREAM_INTERNAL_H
#define MUSA_STREAM_INTERNAL_H

#include <stdatomic.h>

#include "tensor.h"

/* Streams alive; 0 means no storage has pending work and nothing waits. */
extern atomic_int musa_streams_live_;
/* Whether the calling thread is a stream's worker (no Python hooks there). */
extern _Thread_local bool musa_on_stream_worker;

static inline bool musa_streams_live(void) {
    return atomic_load_explicit(&musa_streams_live_, memory_order_relaxed) > 0;
}

/* A task: fn(ctx) runs on the stream's worker once the work it depends on
 * is done; a non-zero return (with musa_err set) fails the stream.
 * free_ctx(ctx), if set, follows on the worker (it must not release tensors
 * or storages). If dep_stream is set, the task also waits for that
 * stream's work up to dep_seq (events, wait_stream). */
typedef struct musa_stream_work {
    const char *name; /* for the profiler; must outlive the task */
    int (*fn)(void *ctx);
    void (*free_ctx)(void *ctx);
    void *ctx;
    uint64_t dep_stream, dep_seq;
} musa_stream_work;

/* Queue work on stream s. reads/writes are the storages it touches (NULL
 * entries skipped; one in both counts as written). The task holds a
 * reference to each. *seq (if not NULL) gets the task's sequence number. On
 * failure (no memory) nothing is queued, free_ctx has run, and the error
 * is set. */
int musa_stream_submit(musa_stream *s, const musa_stream_work *w, int n_reads,
                       musa_storage *const *reads, int n_writes, musa_storage *const *writes,
                       uint64_t *seq);

/* Wait for the stream work on st that synchronous code must not overlap:
 * the last write, and with `write` also the reads since. Returns the error
 * of failed work it depended on (MUSA_OK otherwise). */
int musa_storage_wait(musa_storage *st, bool write);
/* The same for every storage of a list (NULL entries skipped). */
int musa_storages_wait(int n, musa_storage *const *st, bool write);
/* Free a storage's stream records (its last reference is gone). */
void musa_storage_sync_free(musa_storage *st);

#endif
