"""Worker for test_distributed.py (mpirun -np 2): parameters without a
gradient are an error at the next forward, naming them, unless
find_unused_parameters=True; then training matches one process."""
import os
import copy
import sys

import musa
import musa.distributed as dist
import musa.nn as nn
from musa.nn.parallel import DistributedDataParallel as DDP


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(8, 16)
        self.used = nn.Linear(16, 3)
        self.unused = nn.Linear(16, 3)

    def forward(self, x):
        return self.used(self.body(x).relu())


def main():
    dist.init_process_group(os.environ.get("MUSA_TEST_BACKEND", "mpi"))
    rank = dist.get_rank()
    ok = True
    musa.manual_seed(0)
    x, y = musa.randn(16, 8), musa.randint(0, 3, (16,))
    lo, hi = rank * 8, rank * 8 + 8
    ddp = DDP(TwoHeads())
    nn.functional.cross_entropy(ddp(x[lo:hi]), y[lo:hi]).backward()
    try:
        ddp(x[lo:hi])
        ok = False
        print(f"rank {rank}: no error for a parameter without gradient")
    except RuntimeError as e:
        if "unused.weight" not in str(e) or "find_unused_parameters=True" not in str(e):
            ok = False
            print(f"rank {rank}: unexpected message: {e}")
    # with find_unused_parameters: equal to one process on the whole batch
    musa.manual_seed(1)
    ref = TwoHeads()
    ddp = DDP(copy.deepcopy(ref), find_unused_parameters=True)
    opt = musa.optim.SGD(ddp.parameters(), lr=0.1)
    ref_opt = musa.optim.SGD(ref.parameters(), lr=0.1)
    for _ in range(5):
        opt.zero_grad()
        nn.functional.cross_entropy(ddp(x[lo:hi]), y[lo:hi]).backward()
        opt.step()
        ref_opt.zero_grad()
        nn.functional.cross_entropy(ref(x), y).backward()
        ref_opt.step()
    d = max(float((p - q).abs().max()) for p, q in zip(ddp.module.parameters(), ref.parameters()))
    print(f"rank {rank}: find_unused_parameters max diff {d:.3g}")
    ok = ok and d < 1e-5
    # buffers: each forward starts from rank 0's (BatchNorm's statistics);
    # parameters of two dtypes go into separate buckets and both reduce
    net = nn.Sequential(nn.Conv2d(2, 3, 1), nn.BatchNorm2d(3), nn.Flatten(), nn.Linear(12, 2))
    net[3].double()
    ddp = DDP(net)
    with musa.no_grad():
        net[1].running_mean.fill_(float(rank + 1))
    net.eval()
    ddp(musa.randn(1, 2, 2, 2))
    if net[1].running_mean.tolist() != [1.0, 1.0, 1.0]:
        ok = False
        print(f"rank {rank}: buffers not broadcast: {net[1].running_mean.tolist()}")
    net.train()
    dtypes = sorted({str(p.dtype) for p in ddp.parameters()})
    if len(ddp._buckets) < 2 or dtypes != ["musa.float32", "musa.float64"]:
        ok = False
        print(f"rank {rank}: expected a bucket per dtype, got {len(ddp._buckets)}")
    xb = musa.randn(4, 2, 2, 2) * (rank + 1)
    out = ddp(xb)
    (out.double().sum() if out.dtype != musa.float64 else out.sum()).backward()
    grads = musa.cat([p.grad.double().reshape(-1) for p in ddp.parameters()])
    ref = grads.clone()
    dist.broadcast(ref, 0)
    if float((grads - ref).abs().max()) != 0:
        ok = False
        print(f"rank {rank}: averaged gradients differ between ranks")
    dist.destroy_process_group()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
