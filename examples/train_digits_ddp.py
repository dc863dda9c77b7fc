"""Train the digits CNN data-parallel: one process per replica, started by
musa's launcher (over TCP) or MPI's, each training on its share of every
batch (DistributedSampler), gradients averaged by DistributedDataParallel.

    PYTHONPATH=python /usr/bin/python3 -m musa.distributed.run --nproc-per-node 2 \
        examples/train_digits_ddp.py [--static]
    mpirun -np 2 /usr/bin/python3 examples/train_digits_ddp.py [--static]

(for mpirun: as root add --allow-run-as-root; on a machine with fewer cores than
processes add --oversubscribe; across machines add --hostfile FILE, see
docs/distributed.md). The global batch is 64 whatever the number of
processes, so the training is the one a single process would do with batch
64. --static compiles each whole step with musa.jit: the all-reduces are
then nodes of the step's plan. Rank 0 prints one line per epoch and the
held-out accuracy; every rank checks that its parameters equal rank 0's, and
the run fails unless the accuracy reaches 95 % and the replicas agree.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import musa  # noqa: E402
import musa.distributed as dist  # noqa: E402
import musa.nn.functional as F  # noqa: E402
from musa.nn.parallel import DistributedDataParallel as DDP  # noqa: E402
from musa.utils.data import DataLoader, TensorDataset  # noqa: E402
from musa.utils.data.distributed import DistributedSampler  # noqa: E402
from train_digits import SmallCNN, accuracy, load_digits  # noqa: E402

GLOBAL_BATCH = 64


def main():
    static = "--static" in sys.argv[1:]
    dist.init_process_group()  # "mpi" under mpirun, "gloo" under musa.distributed.run
    rank, world = dist.get_rank(), dist.get_world_size()
    if GLOBAL_BATCH % world:
        raise SystemExit(f"the global batch {GLOBAL_BATCH} does not split over {world} processes")
    musa.manual_seed(0)
    xtr, ytr, xte, yte = load_digits()
    train_set = TensorDataset(xtr, ytr)
    sampler = DistributedSampler(train_set, shuffle=True, seed=0)
    loader = DataLoader(train_set, batch_size=GLOBAL_BATCH // world, sampler=sampler)
    model = DDP(SmallCNN())  # rank 0's initial weights are broadcast to all
    opt = musa.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def step(xb, yb):
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        return loss.detach()

    if static:
        step = musa.jit(step)
    if rank == 0:
        print(f"digits: {len(xtr)} training samples over {world} processes, "
              f"{GLOBAL_BATCH // world} per process per step{' (compiled steps)' if static else ''}")
    t0 = time.perf_counter()
    for epoch in range(1, 11):
        sampler.set_epoch(epoch)
        total = musa.zeros(())
        n = 0
        for xb, yb in loader:
            total += step(xb, yb) * len(xb)
            n += len(xb)
        stats = musa.stack([total, musa.tensor(float(n))])
        dist.all_reduce(stats)  # the epoch's loss over every process's samples
        if rank == 0:
            print(f"epoch {epoch:2d}  loss {(stats[0] / stats[1]).item():.4f}  held-out accuracy "
                  f"{accuracy(model.module, xte, yte):.3f}  ({time.perf_counter() - t0:.1f} s)",
                  flush=True)
    acc = accuracy(model.module, xte, yte)
    # every replica must hold rank 0's parameters
    flat = musa.cat([p.detach().reshape(-1) for p in model.parameters()])
    mine = flat.clone()
    dist.broadcast(flat, 0)
    same = musa.tensor(float((flat - mine).abs().max().item() == 0))
    dist.all_reduce(same, dist.ReduceOp.MIN)
    ok = acc >= 0.95 and same.item() == 1
    if rank == 0:
        print(f"held-out accuracy {acc:.3f} ({'ok' if acc >= 0.95 else 'below 0.95'}); replicas "
              f"{'identical' if same.item() == 1 else 'DIFFER'}")
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
