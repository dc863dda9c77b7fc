"""Worker for test_distributed.py (run under mpirun -np 2): DDP training with
a global batch of 64 split over the ranks matches one process training on
the whole batch; eager, compiled, and with no_sync accumulation."""
import os
import copy
import sys

import musa
import musa.distributed as dist
import musa.nn as nn
from musa.nn.parallel import DistributedDataParallel as DDP


def make_model():
    musa.manual_seed(0)
    return nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.Tanh(),
                         nn.Linear(64, 5))


def data(step):
    g = musa.Generator()
    g.manual_seed(1000 + step)
    x = musa.randn(64, 20, generator=g)
    y = musa.randint(0, 5, (64,), generator=g)
    return x, y


def max_diff(a, b):
    return max(float((p - q).abs().max()) for p, q in zip(a.parameters(), b.parameters()))


def train(mode, steps=20, bucket_cap_mb=0.004):
    rank, world = dist.get_rank(), dist.get_world_size()
    ref = make_model()
    model = copy.deepcopy(ref)
    ddp = DDP(model, bucket_cap_mb=bucket_cap_mb)
    opt = musa.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    ref_opt = musa.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    per = 64 // world
    lo, hi = rank * per, (rank + 1) * per

    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(ddp(x), y)
        loss.backward()
        opt.step()
        return loss

    if mode == "compiled":
        step = musa.jit(step)
    for s in range(steps):
        x, y = data(s)
        if mode == "no_sync":  # two micro-batches of half the share each
            opt.zero_grad()
            q = per // 2
            with ddp.no_sync():
                (loss_fn(ddp(x[lo:lo + q]), y[lo:lo + q]) / 2).backward()
            (loss_fn(ddp(x[lo + q:hi]), y[lo + q:hi]) / 2).backward()
            opt.step()
        else:
            step(x[lo:hi], y[lo:hi])
        ref_opt.zero_grad()
        loss_fn(ref(x), y).backward()
        ref_opt.step()
    d = max_diff(model, ref)
    print(f"rank {rank} {mode}: max |param - single process| = {d:.3g}", flush=True)
    if mode == "compiled":  # the buckets' collectives are nodes of the step's plan
        text = step.plan_text()
        n_start, n_wait = text.count("dist_all_reduce_start"), text.count("dist_all_reduce_wait")
        if rank == 0 and "-v" in sys.argv:
            print(text)
        print(f"rank {rank} compiled: {len(ddp._buckets)} buckets, plan has {n_start} starts "
              f"and {n_wait} waits", flush=True)
        if not n_start or n_start != n_wait or n_start != len(ddp._buckets):
            return 1.0
    return d


def main():
    dist.init_process_group(os.environ.get("MUSA_TEST_BACKEND", "mpi"))
    worst = 0.0
    for mode in [a for a in sys.argv[1:] if a != "-v"] or ["eager", "compiled", "no_sync"]:
        worst = max(worst, train(mode))
    dist.destroy_process_group()
    sys.exit(0 if worst < 1e-5 else 1)


if __name__ == "__main__":
    main()
