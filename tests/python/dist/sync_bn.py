"""Worker for test_distributed.py (mpirun -np 2): SyncBatchNorm on half a
batch per rank trains as BatchNorm on the whole batch: the outputs, the
input's gradient, the summed weight and bias gradients and the running
statistics match one process's, over three steps; data far from zero
(mean 1000) keeps its variance (the statistics are combined centred)."""
import os
import sys

import musa
import musa.distributed as dist
import musa.nn as nn


def main():
    dist.init_process_group(os.environ.get("MUSA_TEST_BACKEND", "mpi"))
    rank, ok = dist.get_rank(), True
    musa.manual_seed(0)
    ref = nn.BatchNorm2d(3).double()
    sync = nn.SyncBatchNorm.convert_sync_batchnorm(nn.BatchNorm2d(3).double())
    assert isinstance(sync, nn.SyncBatchNorm)
    worst = 0.0
    for step in range(3):
        x = (musa.randn(8, 3, 4, 5, dtype=musa.float64) * (step + 1) + 1000.0 * (step == 2))
        g = musa.randn(8, 3, 4, 5, dtype=musa.float64)
        xr = x.clone().requires_grad_()
        (ref(xr) * g).sum().backward()
        lo, hi = rank * 4, rank * 4 + 4
        xs = x[lo:hi].clone().requires_grad_()
        y = sync(xs)
        (y * g[lo:hi]).sum().backward()
        wg, bg = sync.weight.grad.clone(), sync.bias.grad.clone()
        dist.all_reduce(wg), dist.all_reduce(bg)
        diffs = [(xs.grad - xr.grad[lo:hi]).abs().max(), (wg - ref.weight.grad).abs().max(),
                 (bg - ref.bias.grad).abs().max(),
                 (sync.running_mean - ref.running_mean).abs().max(),
                 (sync.running_var - ref.running_var).abs().max()]
        worst = max([worst] + [float(d) for d in diffs])
        ref.zero_grad(), sync.zero_grad()
    # the forward values, in training mode, against the whole batch's
    ref.train(), sync.train()
    x = musa.randn(8, 3, 4, 5, dtype=musa.float64)
    lo, hi = rank * 4, rank * 4 + 4
    with musa.no_grad():
        worst = max(worst, float((sync(x[lo:hi]) - ref(x)[lo:hi]).abs().max()))
    ok = worst < 1e-9
    print(f"rank {rank}: SyncBatchNorm max |difference from one process| {worst:.2e}"
          + ("" if ok else " FAILED"))
    dist.destroy_process_group()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
