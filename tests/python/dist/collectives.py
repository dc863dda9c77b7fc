"""Worker for test_distributed.py (mpirun -np 2, or 2 and 3 ranks over TCP): every collective and dtype
against NumPy's result from every rank's data, which each rank can rebuild
(rank r's tensor is a function of r). Prints one line per failure and ends
with a summary line; exits 1 on any failure."""
import os
import sys

import numpy as np

import musa
import musa.distributed as dist

DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int8", "uint8", "bool"]
failures = []


def local(r, dtype, shape=(3, 4)):
    """rank r's tensor: values that every dtype holds exactly"""
    n = int(np.prod(shape))
    v = (np.arange(n) * 3 + 7 * r) % 11 - (5 if dtype not in ("uint8", "bool") else 0)
    if dtype == "bool":
        v = (np.arange(n) + r) % 3 == 0
    return v.reshape(shape)


def as_musa(a, dtype):
    return musa.tensor(a.tolist(), dtype=getattr(musa, dtype))


def check(name, got, want):
    g = np.array(got.float().tolist() if got.dtype in (musa.bfloat16, musa.float16) else got.tolist())
    g = g.reshape(tuple(got.shape))
    # 16-bit floats hold AVG's thirds (3 ranks) to within their rounding
    rtol = 1e-2 if got.dtype in (musa.bfloat16, musa.float16) else 1e-5
    if g.shape != want.shape or not np.allclose(g.astype(np.float64), want.astype(np.float64),
                                                rtol=rtol):
        failures.append(f"{name}: got {g.tolist()} want {want.tolist()}")


def main():
    dist.init_process_group(os.environ.get("MUSA_TEST_BACKEND", "mpi"))
    rank, world = dist.get_rank(), dist.get_world_size()
    n_checks = 0
    for dt in DTYPES:
        alls = [local(r, dt) for r in range(world)]
        ops = {"SUM": lambda a: np.sum(a, 0), "MAX": lambda a: np.max(a, 0),
               "MIN": lambda a: np.min(a, 0)}
        if dt.startswith("float") or dt == "bfloat16":
            ops["AVG"] = lambda a: np.mean(a, 0)
        for name, f in ops.items():
            want = f(np.stack(alls))
            if dt == "bool":
                want = (np.stack(alls).any(0) if name != "MIN" else np.stack(alls).all(0))
            # in place, contiguous and as a transposed view
            t = as_musa(alls[rank], dt)
            dist.all_reduce(t, getattr(dist.ReduceOp, name))
            check(f"all_reduce {dt} {name}", t, want)
            base = as_musa(alls[rank].T.copy(), dt)
            v = base.t()
            dist.all_reduce(v, getattr(dist.ReduceOp, name))
            check(f"all_reduce {dt} {name} (view)", v, want)
            # non-blocking
            t = as_musa(alls[rank], dt)
            work = dist.all_reduce(t, getattr(dist.ReduceOp, name), async_op=True)
            work.wait()
            check(f"all_reduce async {dt} {name}", t, want)
            # reduce_scatter: rank r gets block r of the reduction
            big = [np.concatenate([local(r, dt)] * world) for r in range(world)]
            wb = f(np.stack(big)) if dt != "bool" else (
                np.stack(big).any(0) if name != "MIN" else np.stack(big).all(0))
            out = musa.empty((3, 4), dtype=getattr(musa, dt))
            dist.reduce_scatter_tensor(out, as_musa(big[rank], dt), getattr(dist.ReduceOp, name))
            check(f"reduce_scatter {dt} {name}", out, wb[rank * 3:(rank + 1) * 3])
            n_checks += 4
        for src in range(world):
            t = as_musa(alls[rank], dt)
            dist.broadcast(t, src)
            check(f"broadcast {dt} from {src}", t, alls[src])
            n_checks += 1
        lst = [musa.empty((3, 4), dtype=getattr(musa, dt)) for _ in range(world)]
        dist.all_gather(lst, as_musa(alls[rank], dt))
        for r in range(world):
            check(f"all_gather {dt} [{r}]", lst[r], alls[r])
        out = musa.empty((world * 3, 4), dtype=getattr(musa, dt))
        dist.all_gather_into_tensor(out, as_musa(alls[rank], dt))
        check(f"all_gather_into_tensor {dt}", out, np.concatenate(alls))
        n_checks += 2
    # 0-d and empty tensors
    t = musa.tensor(float(rank + 1))
    dist.all_reduce(t)
    check("all_reduce 0-d", t, np.array(sum(range(1, world + 1)), dtype=np.float64))
    e = musa.zeros(0, 3)
    dist.all_reduce(e)
    check("all_reduce empty", e, np.zeros((0, 3)))
    n_checks += 2
    # mismatches between ranks are errors on every rank, not hangs
    for what, t in [("shape", musa.ones(2 + rank)),
                    ("dtype", musa.ones(2, dtype=musa.float32 if rank else musa.float64))]:
        try:
            dist.all_reduce(t)
            failures.append(f"a {what} mismatch between ranks did not raise")
        except ValueError as e:
            if f"different {what}s" not in str(e):
                failures.append(f"{what} mismatch: unexpected message {e}")
        n_checks += 1
    dist.barrier()
    dist.destroy_process_group()
    for f in failures:
        print(f"rank {rank} FAIL {f}")
    print(f"rank {rank}: {n_checks - len(failures)} passed, {len(failures)} failed", flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
