"""all_reduce over TCP ("gloo") and over MPI, side by side, against this
machine's memcpy bandwidth measured in the same run.

    PYTHONPATH=python /usr/bin/python3 bench/bench_allreduce.py [--np 2] [--rounds 7]

For float32 messages from 4 KiB to 64 MiB, each backend's ranks (started by
python3 -m musa.distributed.run, and by mpirun when it is installed) time
dist.all_reduce in place (median over rounds, barriers between), one thread
per rank. Printed per size: microseconds per call, the algorithm bandwidth
(bytes / time) and the bus bandwidth (2 (P - 1) / P bytes / time: what each
rank moves, which a ring all-reduce cannot go below). memcpy is a copy_ of
the same size in rank 0 before the timings: a ring over loopback TCP
copies each byte several times (user to kernel, kernel to user, the
reduction), so its bus bandwidth is a fraction of it.
"""
import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time

SIZES = [4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]


def worker(rounds):
    import musa
    import musa.distributed as dist
    musa.set_num_threads(1)
    dist.init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    for nbytes in SIZES:
        n = nbytes // 4
        t = musa.ones(n)
        src, dst = musa.ones(n), musa.empty(n)
        iters = max(2, min(200, (64 << 20) // nbytes // 4))
        copy = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            for _ in range(iters):
                dst.copy_(src)
            copy.append((time.perf_counter() - t0) / iters)
        times = []
        for _ in range(rounds):
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(t)
            times.append((time.perf_counter() - t0) / iters)
        if rank == 0:
            print(f"RESULT {dist.get_backend()} {world} {nbytes} {statistics.median(times)} "
                  f"{statistics.median(copy)}", flush=True)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(backend, np_, rounds):
    me = [os.path.abspath(__file__), "--worker", "--rounds", str(rounds)]
    if backend == "gloo":
        cmd = [sys.executable, "-m", "musa.distributed.run", "--nproc-per-node", str(np_),
               "--master-port", str(free_port())] + me
    else:
        cmd = [shutil.which("mpirun"), "-np", str(np_), "--oversubscribe", "--bind-to", "none"]
        cmd += (["--allow-run-as-root"] if os.geteuid() == 0 else []) + [sys.executable] + me
    env = dict(os.environ, MUSA_NUM_THREADS="1", OMP_NUM_THREADS="1")
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    rows = {}
    for line in out.stdout.splitlines():
        if line.startswith("RESULT"):
            _, _, _, nbytes, t, c = line.split()
            rows[int(nbytes)] = (float(t), float(c))
    if len(rows) != len(SIZES):
        raise RuntimeError(f"no results from {cmd}:\n{out.stdout}\n{out.stderr}")
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    if a.worker:
        return worker(a.rounds)
    backends = ["gloo"] + (["mpi"] if shutil.which("mpirun") else [])
    res = {b: launch(b, a.np, a.rounds) for b in backends}
    P = a.np
    print(f"all_reduce (sum, float32, in place), {P} ranks, 1 thread each, median of {a.rounds} "
          f"rounds; GB/s: algorithm (bytes / time) and bus (2 (P-1)/P bytes / time)")
    head = f"{'bytes':>10} {'memcpy GB/s':>12}"
    for b in backends:
        head += f" {b + ' us':>11} {b + ' alg':>9} {b + ' bus':>9} {'bus/memcpy':>10}"
    print(head)
    for nbytes in SIZES:
        copy = min(res[b][nbytes][1] for b in backends)
        line = f"{nbytes:>10} {2 * nbytes / copy / 1e9:12.2f}"
        for b in backends:
            t = res[b][nbytes][0]
            bus = 2 * (P - 1) / P * nbytes / t / 1e9
            line += (f" {t * 1e6:11.1f} {nbytes / t / 1e9:9.2f} {bus:9.2f} "
                     f"{bus / (2 * nbytes / copy / 1e9):10.2f}")
        print(line, flush=True)


if __name__ == "__main__":
    main()
