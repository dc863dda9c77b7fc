"""DataLoader worker processes (num_workers > 0).

Workers are forked (the dataset, collate_fn and worker_init_fn need not be
picklable). Each gets batches of indices on its own queue, loads and
collates them with one thread, and returns each batch through shared
memory: every tensor's bytes go into a POSIX shared-memory block and only
its name, shape and dtype travel through the result queue; the main
process copies the block into a tensor and unlinks it. Batches come back
in sampler order; a failing sample raises in the main process with the
worker's traceback; a worker that dies is reported with its exit code.
"""
import multiprocessing as mp
import os
import queue
import random
import time
import traceback
from multiprocessing import resource_tracker, shared_memory

import numpy as np

from ... import _C
from ..._generator import using

_SHM = "__musa_shm__"
_info = None  # this process's WorkerInfo (None in the main process)


class WorkerInfo:
    """What get_worker_info() returns inside a worker."""

    def __init__(self, id, num_workers, seed, dataset):
        self.id, self.num_workers, self.seed, self.dataset = id, num_workers, seed, dataset

    def __repr__(self):
        return f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed})"


def get_worker_info():
    """The WorkerInfo of the worker this runs in, or None in the main process."""
    return _info


class _Failure:
    """An exception raised in a worker, as text (the object may not pickle)."""

    def __init__(self, worker_id, exc):
        self.worker_id = worker_id
        self.kind = type(exc).__name__
        self.text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


def _to_shared(obj, blocks):
    """obj with every tensor moved into a shared-memory block (its name in
    blocks, so a failure can clean up)."""
    if isinstance(obj, _C.Tensor):
        t = obj.detach()
        # NumPy has no bfloat16: it travels as float32 and is cast back
        a = np.ascontiguousarray((t.float() if t.dtype == _C.bfloat16 else t).numpy())
        shm = shared_memory.SharedMemory(create=True, size=max(a.nbytes, 1))
        blocks.append(shm.name)
        np.ndarray(a.shape, a.dtype, buffer=shm.buf)[...] = a
        shm.close()
        return (_SHM, shm.name, a.shape, a.dtype.str, str(obj.dtype).rsplit(".", 1)[-1])
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_to_shared(v, blocks) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_shared(v, blocks) for v in obj)
    if isinstance(obj, dict):
        return {k: _to_shared(v, blocks) for k, v in obj.items()}
    return obj


def _from_shared(obj):
    if isinstance(obj, tuple) and len(obj) == 5 and obj[0] == _SHM:
        _, name, shape, dtype, musa_dtype = obj
        shm = shared_memory.SharedMemory(name=name)
        try:
            a = np.ndarray(shape, np.dtype(dtype), buffer=shm.buf)
            t = _C.tensor(a.copy(), dtype=getattr(_C, musa_dtype))
        finally:
            shm.close()
            shm.unlink()
        return t
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_from_shared(v) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_from_shared(v) for v in obj)
    if isinstance(obj, dict):
        return {k: _from_shared(v) for k, v in obj.items()}
    return obj


def _worker_loop(wid, n, seed, dataset, fetch, index_q, result_q, init_fn, iterable):
    global _info
    _info = WorkerInfo(wid, n, seed, dataset)
    try:
        _C.set_num_threads(1)  # one thread per worker; the workers share the cores
        _C.manual_seed(seed % (1 << 63))
        random.seed(seed)
        if init_fn is not None:
            init_fn(wid)
        it = iter(fetch(None)) if iterable else None
    except BaseException as e:  # noqa: BLE001 (reported to the main process)
        result_q.put((-1, _Failure(wid, e)))
        return
    while True:
        try:
            job = index_q.get()
        except (EOFError, OSError):
            return
        if job is None:
            return
        seq, indices = job
        blocks = []
        try:
            batch = next(it, StopIteration) if iterable else fetch(indices)
            out = (seq, _to_shared(batch, blocks) if batch is not StopIteration else StopIteration)
        except BaseException as e:  # noqa: BLE001
            for name in blocks:
                try:
                    shared_memory.SharedMemory(name=name).unlink()
                except OSError:
                    pass
            out = (seq, _Failure(wid, e))
        result_q.put(out)


def _wait_gone(tids, limit=2.0):
    """Wait (at most limit seconds) until the threads of these native ids
    have ended. A joined thread's Python part has finished, but its OS thread
    may still be tearing down: under ASan that returns the thread's allocator
    cache under the size-class locks (pools made in a loop under load hung
    at the 70th, 130th and 530th: the worker's new threads waited on an
    inherited lock).
    Linux names live threads in /proc/self/task."""
    deadline = time.monotonic() + limit
    for tid in tids:
        while os.path.exists(f"/proc/self/task/{tid}") and time.monotonic() < deadline:
            time.sleep(1e-4)


class WorkerPool:
    """num_workers forked workers; run() yields batches in order."""

    def __init__(self, loader, fetch, iterable):
        self.loader, self.iterable = loader, iterable
        self.n = loader.num_workers
        ctx = mp.get_context("fork")
        resource_tracker.ensure_running()  # one tracker, shared with the forked workers
        with using(loader.generator, "DataLoader"):  # the workers' seeds: base + id
            base = int(_C.randint(0, (1 << 31) - 1, (1,)).item())
        self.result_q = ctx.Queue()
        self.index_qs = [ctx.Queue() for _ in range(self.n)]
        self.procs = []
        for w in range(self.n):
            p = ctx.Process(target=_worker_loop, daemon=True,
                            args=(w, self.n, base + w, loader.dataset, fetch, self.index_qs[w],
                                  self.result_q, loader.worker_init_fn, iterable))
            p.start()
            self.procs.append(p)
        self.alive = True

    def _get(self, timeout):
        """The next result, watching for dead workers and the timeout."""
        waited = 0.0
        while True:
            try:
                return self.result_q.get(timeout=0.1)
            except queue.Empty:
                waited += 0.1
                for w, p in enumerate(self.procs):
                    if p.exitcode is not None and p.exitcode != 0:
                        self.shutdown()
                        raise RuntimeError(f"[DataLoader] worker {w} (pid {p.pid}) exited "
                                           f"unexpectedly with exit code {p.exitcode}")
                if timeout and waited >= timeout:
                    self.shutdown()
                    raise RuntimeError(f"[DataLoader] timed out after {timeout} s waiting for a "
                                       f"batch from the workers")

    def run(self, batches):
        """Yield the collated batch of each index list in batches, in order
        (for an iterable dataset, batches is None: the workers' own batches,
        one from each in turn, until all are exhausted)."""
        prefetch = (self.loader.prefetch_factor or 2) * self.n
        pending, ready, sent, nxt = {}, {}, 0, 0
        it = iter(batches) if batches is not None else None
        done_workers = set()

        def send():
            nonlocal sent
            if it is not None:
                indices = next(it, None)
                if indices is None:
                    return False
                w = sent % self.n
            else:
                live = [w for w in range(self.n) if w not in done_workers]
                if not live:
                    return False
                w, indices = live[sent % len(live)], None
            self.index_qs[w].put((sent, indices))
            pending[sent] = w
            sent += 1
            return True

        while len(pending) < prefetch and send():
            pass
        while pending or ready:
            while nxt not in ready:
                if not pending:
                    return
                seq, payload = self._get(self.loader.timeout)
                if isinstance(payload, _Failure):
                    self.shutdown()
                    raise RuntimeError(f"[DataLoader] worker {payload.worker_id} raised "
                                       f"{payload.kind}:\n{payload.text}")
                w = pending.pop(seq)
                if payload is StopIteration:
                    done_workers.add(w)
                    ready[seq] = StopIteration
                else:
                    ready[seq] = _from_shared(payload)
                send()
            batch = ready.pop(nxt)
            nxt += 1
            if batch is not StopIteration:
                yield batch

    def shutdown(self):
        if not self.alive:
            return
        self.alive = False
        for q in self.index_qs:
            try:
                q.put(None)
            except (OSError, ValueError):
                pass
        for p in self.procs:
            p.join(timeout=5)
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)
        # Each index queue's feeder thread (it pickles what put() queued and
        # writes it to the pipe) ends here, OS thread included, not in the
        # background: a thread allocating while the next pool forks leaves
        # the child a lock that no one will release. glibc's malloc takes its
        # locks across fork; the ASan runtime of GCC 12 does not, and the
        # sanitize job's worker tests hung in 2 of 12 runs. A queue whose
        # worker did not exit cleanly may hold data no one will read: it is
        # not waited for.
        joined = []
        for q, p in zip(self.index_qs, self.procs):
            try:
                if p.exitcode != 0:
                    q.cancel_join_thread()
                q.close()
                q.join_thread()
                if p.exitcode == 0 and q._thread is not None:
                    joined.append(q._thread.native_id)
            except (OSError, ValueError, AssertionError):
                pass
        _wait_gone(joined)
        # batches still queued: free their blocks
        try:
            while True:
                _, payload = self.result_q.get_nowait()
                if not isinstance(payload, _Failure) and payload is not StopIteration:
                    _from_shared(payload)
        except (queue.Empty, OSError, ValueError, EOFError):
            pass

    def __del__(self):
        try:
            self.shutdown()
        except Exception:  # noqa: BLE001 (interpreter shutdown)
            pass

