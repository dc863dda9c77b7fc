"""python3 -m musa.distributed.run: torchrun's launcher for the "gloo"
backend. Starts --nproc-per-node copies of a script (or of `-m module`) with
MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK and
LOCAL_WORLD_SIZE set, so that `dist.init_process_group("gloo")` (or with
no backend) joins them over TCP:

    python3 -m musa.distributed.run --nproc-per-node 2 train.py --epochs 3

Across machines, run it on each with --nnodes, --node-rank and the first
machine's --master-addr. When a process fails the others are stopped
(SIGTERM, then SIGKILL after 10 s) and the launcher exits with the failed
process's code."""
import argparse
import os
import signal
import subprocess
import sys
import time


def _parser():
    p = argparse.ArgumentParser(prog="python3 -m musa.distributed.run",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--nproc-per-node", "--nproc_per_node", type=int, default=1,
                   help="processes on this machine (default 1)")
    p.add_argument("--nnodes", type=int, default=1, help="machines (default 1)")
    p.add_argument("--node-rank", "--node_rank", type=int, default=0,
                   help="this machine's index, 0..nnodes-1 (default 0)")
    p.add_argument("--master-addr", "--master_addr", default="127.0.0.1",
                   help="the address of the machine of rank 0 (default 127.0.0.1)")
    p.add_argument("--master-port", "--master_port", type=int, default=29500,
                   help="the port rank 0 listens on (default 29500)")
    p.add_argument("-m", "--module", action="store_true",
                   help="run the target as a module (python3 -m TARGET)")
    p.add_argument("target", help="the script (or module, with -m) to run")
    p.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    return p


def _stop(procs):
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    end = time.monotonic() + 10
    for p in procs:
        try:
            p.wait(max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def main(argv=None):
    a = _parser().parse_args(argv)
    who = "musa.distributed.run"
    if a.nproc_per_node < 1 or a.nnodes < 1 or not 0 <= a.node_rank < a.nnodes:
        sys.exit(f"[{who}] need --nproc-per-node >= 1, --nnodes >= 1 and 0 <= --node-rank < "
                 f"--nnodes (got {a.nproc_per_node}, {a.nnodes}, {a.node_rank})")
    if not 1 <= a.master_port <= 65535:
        sys.exit(f"[{who}] --master-port {a.master_port} is not in 1..65535")
    world = a.nnodes * a.nproc_per_node
    cmd = [sys.executable] + (["-m", a.target] if a.module else [a.target]) + a.args
    procs = []
    for local in range(a.nproc_per_node):
        env = dict(os.environ, MASTER_ADDR=a.master_addr, MASTER_PORT=str(a.master_port),
                   WORLD_SIZE=str(world), RANK=str(a.node_rank * a.nproc_per_node + local),
                   LOCAL_RANK=str(local), LOCAL_WORLD_SIZE=str(a.nproc_per_node))
        procs.append(subprocess.Popen(cmd, env=env))
    try:
        while True:
            codes = [p.poll() for p in procs]
            bad = [(i, c) for i, c in enumerate(codes) if c not in (None, 0)]
            if bad:
                i, code = bad[0]
                rank = a.node_rank * a.nproc_per_node + i
                sys.stderr.write(f"[{who}] rank {rank} (pid {procs[i].pid}) exited with code "
                                 f"{code}; stopping the others\n")
                _stop(procs)
                return code if code > 0 else 128 - code
            if all(c == 0 for c in codes):
                return 0
            time.sleep(0.05)
    except KeyboardInterrupt:
        _stop(procs)
        return 130


if __name__ == "__main__":
    sys.exit(main())
