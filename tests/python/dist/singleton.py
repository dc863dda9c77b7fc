"""Worker for test_distributed.py, run without mpirun (a group of one): the
errors of a process group used wrongly."""
import sys

import musa
import musa.distributed as dist
from musa.nn.parallel import DistributedDataParallel as DDP

failures = []


def expect(exc, text, fn, *args, **kw):
    try:
        fn(*args, **kw)
    except exc as e:
        if text not in str(e):
            failures.append(f"{fn.__name__}: message {e!r} lacks {text!r}")
        return
    failures.append(f"{fn.__name__}{args}: no {exc.__name__}")


expect(RuntimeError, "init_process_group", dist.all_reduce, musa.ones(2))
expect(RuntimeError, "init_process_group", dist.get_rank)
expect(RuntimeError, "init_process_group", DDP, musa.nn.Linear(2, 2))
expect(ValueError, "backend 'nccl'", dist.init_process_group, "nccl")
expect(ValueError, "world_size=3", dist.init_process_group, "mpi", world_size=3)
expect(ValueError, "rank=1", dist.init_process_group, "mpi", rank=1)
assert not dist.is_initialized()  # checked before MPI started
dist.init_process_group("mpi")
expect(RuntimeError, "twice", dist.init_process_group, "mpi")
assert dist.get_rank() == 0 and dist.get_world_size() == 1 and dist.get_backend() == "mpi"
t = musa.arange(6.0).reshape(2, 3)
dist.all_reduce(t, dist.ReduceOp.AVG)
if t.tolist() != [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]:
    failures.append(f"all_reduce AVG of one rank changed the values: {t.tolist()}")
expect(TypeError, "AVG needs a floating dtype", dist.all_reduce, musa.ones(2, dtype=musa.int64),
       dist.ReduceOp.AVG)
expect(ValueError, "unsupported reduce op", dist.all_reduce, t, 7)
expect(ValueError, "src 1 is not a rank", dist.broadcast, t, 1)
expect(ValueError, "split into 1 equal", dist.reduce_scatter_tensor, musa.empty(()), musa.tensor(1.0))
expect(TypeError, "must be a Tensor", dist.all_reduce, [1.0])
expect(ValueError, "one process group", dist.all_reduce, t, group="other")
expect(RuntimeError, "tensor that doesn't require gradient",
       musa.ones(2).register_post_accumulate_grad_hook, lambda p: None)
w = musa.ones(2, requires_grad=True)
expect(RuntimeError, "non-leaf", (w * 2).register_post_accumulate_grad_hook, lambda p: None)
# a forked child (a DataLoader worker) cannot use the parent's group
import os  # noqa: E402
pid = os.fork()
if pid == 0:
    try:
        dist.all_reduce(musa.ones(2))
        os._exit(3)
    except RuntimeError as e:
        os._exit(0 if "forked from rank 0" in str(e) else 4)
_, status = os.waitpid(pid, 0)
if os.WEXITSTATUS(status) != 0:
    failures.append(f"a collective in a forked child: exit status {os.WEXITSTATUS(status)}")
# the C functions, captured: a compiled function records the collective
f = musa.jit(lambda x: (dist.all_reduce(x.clone()), x * 2)[1])
f(musa.ones(3))
f(musa.ones(3))
dist.destroy_process_group()
expect(RuntimeError, "cannot start again", dist.init_process_group, "mpi")
expect(RuntimeError, "init_process_group", dist.barrier)
for f_ in failures:
    print("FAIL", f_)
print(f"{len(failures)} failed")
sys.exit(1 if failures else 0)
