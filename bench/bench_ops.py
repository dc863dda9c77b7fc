"""Eager ops against PyTorch, side by side in one run: what a PyTorch program
pays for each op when it moves to musa.

Each case runs the same call on the same data in both libraries (float32
4096 x 1024 unless the case says otherwise, 2 threads) and prints the best of
REPS calls of each and musa's time over PyTorch's; "<-- slow" marks musa at
1.5x PyTorch's time or more (over 100 us). PyTorch is Debian's python3-torch;
without it the musa column alone is printed. It prints figures; it never
fails. docs/benchmarks.md ("bench_ops") has a run and what it found.

    /usr/bin/python3 bench/bench_ops.py [--threads 2] [--only NAME,...] [--python DIR]
"""
import argparse
import os
import sys
import time

import numpy as np

# --python DIR: another build's python/ folder (a before-and-after run)
_py = sys.argv[sys.argv.index("--python") + 1] if "--python" in sys.argv[:-1] else None
sys.path.insert(0, _py or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import musa  # noqa: E402

try:
    import torch
except ImportError:  # the musa column alone
    torch = None

REPS = 10


def best(fn):
    fn()
    t = float("inf")
    for _ in range(REPS):
        t0 = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - t0)
    return t * 1e6


def F(lib):
    return lib.nn.functional


# name: fn(lib, x, y, mask, ints) on x, y float32 (4096, 1024), mask bool, ints int64 in [0, 100)
CASES = {
    "add": lambda L, x, y, b, i: x + y,
    "mul by a scalar": lambda L, x, y, b, i: x * 2.5,
    "add a row": lambda L, x, y, b, i: x + y[0],
    "add a column": lambda L, x, y, b, i: x + y[:, :1],
    "add, both transposed": lambda L, x, y, b, i: x.t() + y.t(),
    "copy transposed": lambda L, x, y, b, i: x.t().contiguous(),
    "where": lambda L, x, y, b, i: L.where(b, x, y),
    "gt": lambda L, x, y, b, i: x > y,
    "exp": lambda L, x, y, b, i: x.exp(),
    "tanh": lambda L, x, y, b, i: x.tanh(),
    "sigmoid": lambda L, x, y, b, i: x.sigmoid(),
    "gelu": lambda L, x, y, b, i: F(L).gelu(x),
    "floor": lambda L, x, y, b, i: x.floor(),
    "clamp": lambda L, x, y, b, i: x.clamp(-1, 1),
    "atan2": lambda L, x, y, b, i: L.atan2(x, y),
    "fmod": lambda L, x, y, b, i: L.fmod(x, 1.5),
    "leaky_relu": lambda L, x, y, b, i: F(L).leaky_relu(x, 0.1),
    "hardswish": lambda L, x, y, b, i: F(L).hardswish(x),
    "smooth_l1_loss": lambda L, x, y, b, i: F(L).smooth_l1_loss(x, y),
    "mse_loss": lambda L, x, y, b, i: F(L).mse_loss(x, y),
    "to float16": lambda L, x, y, b, i: x.half(),
    "sum(1)": lambda L, x, y, b, i: x.sum(1),
    "sum(0)": lambda L, x, y, b, i: x.sum(0),
    "amax(1)": lambda L, x, y, b, i: x.amax(1),
    "amax(0)": lambda L, x, y, b, i: x.amax(0),
    "max(1) with indices": lambda L, x, y, b, i: x.max(1),
    "argmax(1)": lambda L, x, y, b, i: x.argmax(1),
    "prod(1)": lambda L, x, y, b, i: x.prod(1),
    "var(1)": lambda L, x, y, b, i: x.var(1),
    "logsumexp(1)": lambda L, x, y, b, i: x.logsumexp(1),
    "softmax(1)": lambda L, x, y, b, i: x.softmax(1),
    "softmax(0)": lambda L, x, y, b, i: x.softmax(0),
    "cumsum(1)": lambda L, x, y, b, i: x.cumsum(1),
    "cumsum(0)": lambda L, x, y, b, i: x.cumsum(0),
    "topk(8) along rows": lambda L, x, y, b, i: x.topk(8, 1),
    "topk(8) along columns": lambda L, x, y, b, i: x.topk(8, 0),
    "sort(1)": lambda L, x, y, b, i: x.sort(1),
    "median(1)": lambda L, x, y, b, i: x.median(1),
    "rand": lambda L, x, y, b, i: L.rand(4096, 1024),
    "randn": lambda L, x, y, b, i: L.randn(4096, 1024),
    "dropout": lambda L, x, y, b, i: F(L).dropout(x, 0.1, True),
    "masked_fill": lambda L, x, y, b, i: x.masked_fill(b, 0.0),
    "gather(1)": lambda L, x, y, b, i: x.gather(1, i[:, :8]),
    "index_select(0)": lambda L, x, y, b, i: x.index_select(0, i[0]),
    "scatter_add(1)": lambda L, x, y, b, i: L.zeros(4096, 100).scatter_add(1, i, x),
    "bincount": lambda L, x, y, b, i: L.bincount(i.reshape(-1)),
    "nonzero": lambda L, x, y, b, i: b.nonzero(),
    "cat(0)": lambda L, x, y, b, i: L.cat([x, y], 0),
    "flip(1)": lambda L, x, y, b, i: x.flip(1),
    "tril": lambda L, x, y, b, i: x.tril(),
    "layer_norm": lambda L, x, y, b, i: F(L).layer_norm(x, (1024,)),
    "cross_entropy, 1024 classes": lambda L, x, y, b, i: F(L).cross_entropy(x, i[:, 0]),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--python", help="the python/ folder of the musa to time (default: this tree's)")
    args = ap.parse_args()
    musa.set_num_threads(args.threads)
    rng = np.random.RandomState(0)
    xn, yn = rng.randn(4096, 1024).astype(np.float32), rng.randn(4096, 1024).astype(np.float32)
    bn, inn = rng.rand(4096, 1024) < 0.5, rng.randint(0, 100, (4096, 1024))
    m = (musa, musa.tensor(xn), musa.tensor(yn), musa.tensor(bn), musa.tensor(inn))
    t = None
    if torch is not None:
        torch.set_num_threads(args.threads)
        t = (torch, torch.tensor(xn), torch.tensor(yn), torch.tensor(bn), torch.tensor(inn))
    only = set(filter(None, args.only.split(",")))
    print(f"eager ops, float32 4096 x 1024 unless named, {args.threads} threads, best of {REPS} "
          f"(us){'' if t else '; PyTorch not available'}")
    for name, fn in CASES.items():
        if only and name not in only:
            continue
        a = best(lambda: fn(*m))
        if t is None:
            print(f"  {name:28s} musa {a:10.1f}")
            continue
        b = best(lambda: fn(*t))
        flag = "  <-- slow" if a > 1.5 * b and a > 100 else ""
        print(f"  {name:28s} musa {a:10.1f}  torch {b:10.1f}  musa/torch {a / b:6.2f}{flag}",
              flush=True)


if __name__ == "__main__":
    main()
