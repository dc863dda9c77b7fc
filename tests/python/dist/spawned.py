"""Functions test_dist_tcp.py starts with musa.multiprocessing.spawn: each
runs as fn(rank, ...) in a fresh interpreter and reports through a queue."""
import datetime
import os
import time

import musa
import musa.distributed as dist


def _join(rank, world, port, seconds=60):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=seconds))


def collect(rank, world, port, q):
    """Large and odd-sized collectives (ring segments of unequal length,
    broadcast in several chunks), against values every rank can rebuild."""
    _join(rank, world, port)
    out = {"rank": dist.get_rank(), "world": dist.get_world_size(), "backend": dist.get_backend()}
    n = 1_000_003
    x = musa.arange(n, dtype=musa.float64) * (rank + 1)
    dist.all_reduce(x)
    want = musa.arange(n, dtype=musa.float64) * (world * (world + 1) // 2)
    out["all_reduce"] = bool(musa.equal(x, want))
    m = musa.full((7,), float(rank))
    dist.all_reduce(m, op=dist.ReduceOp.MAX)
    out["max"] = m.tolist()
    b = musa.arange(300_001, dtype=musa.float32) + 10 * rank  # 1.2 MB: 5 chunks
    dist.broadcast(b, src=world - 1)
    out["broadcast"] = bool(musa.equal(b, musa.arange(300_001, dtype=musa.float32)
                                       + 10 * (world - 1)))
    g = [musa.zeros(3, dtype=musa.int64) for _ in range(world)]
    dist.all_gather(g, musa.full((3,), rank, dtype=musa.int64))
    out["all_gather"] = [t.tolist() for t in g]
    rs = musa.zeros(2)
    dist.reduce_scatter_tensor(rs, musa.arange(2 * world, dtype=musa.float32))
    out["reduce_scatter"] = rs.tolist()
    dist.barrier()
    dist.destroy_process_group()
    out["after"] = dist.is_initialized()
    q.put(out)


def diverge(rank, world, port, q):
    """Rank 0 all-reduces where rank 1 broadcasts."""
    _join(rank, world, port)
    t = musa.ones(4)
    try:
        dist.all_reduce(t) if rank == 0 else dist.broadcast(t, src=0)
        q.put((rank, "no error"))
    except RuntimeError as e:
        msg = str(e)
        try:
            dist.barrier()
            later = "no error"
        except RuntimeError as e2:
            later = str(e2)
        q.put((rank, msg, later))


def late(rank, world, port, q):
    """Rank 1 arrives 3 s late at a collective; the group's timeout is 1 s."""
    _join(rank, world, port, seconds=1)
    if rank == 1:
        time.sleep(3)
    try:
        dist.all_reduce(musa.ones(2))
        q.put((rank, "no error"))
    except RuntimeError as e:
        q.put((rank, str(e)))


def sizes(rank, world, port, q):
    """The ranks disagree on the world size."""
    try:
        _join(rank, world + rank, port, seconds=20)
        q.put((rank, "no error"))
    except RuntimeError as e:
        q.put((rank, str(e)))


def twice(rank, world, port, q):
    """Processes 1 and 2 both join as rank 1 of 2."""
    try:
        _join(min(rank, 1), world, port, seconds=20)
        q.put((rank, "no error"))
    except RuntimeError as e:
        q.put((rank, str(e)))


def raises(rank):
    if rank == 1:
        raise ValueError("rank one gave up on purpose")
    time.sleep(30)  # stopped by the parent


def exits(rank):
    if rank == 0:
        os._exit(3)
    time.sleep(30)


def quiet(rank, path):
    with open(os.path.join(path, f"rank{rank}"), "w") as f:
        f.write(str(os.getpid()))


# ---- tensors through multiprocessing (test_shared_memory.py) ----

def add_in_place(rank, tensors, done):
    """Writes into the tensors it was given (spawn pickles them)."""
    for t in tensors:
        t.add_(100 * (rank + 1))
    done.put(rank)


def echo(q_in, q_out, go, done):
    """Gets a tensor, writes into it, sends back a new one and writes into
    that after the parent has it."""
    t = q_in.get()
    with musa.no_grad():
        t.mul_(-1)
    mine = musa.arange(4.0)
    q_out.put((mine, type(t).__name__, t.requires_grad, t.is_shared()))
    go.wait(30)
    mine.add_(1000)
    done.set()


def hogwild(rank, model, steps):
    musa.manual_seed(rank)
    opt = musa.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        x = musa.randn(16, 3)
        loss = ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
