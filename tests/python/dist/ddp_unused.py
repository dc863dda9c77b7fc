"""Worker for test_distributed.py (mpirun -np 2): parameters without a
gradient are an error at the next forward, naming them, unless
find_unused_parameters=True; then training matches one process."""
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
    dist.init_process_group("mpi")
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
    dist.destroy_process_group()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
