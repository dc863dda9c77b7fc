"""Static graph (musa.jit) against eager musa, measured side by side in one run:

  1. the gelu-tanh chain x*0.5*(1+tanh(0.79788456*(x+0.044715*x**3))) on 4M
     floats (and 32M, beyond the last-level cache): static/eager time (target
     <= 0.2) and the compiled run's traffic (one read, one write) as a
     fraction of memcpy bandwidth at that size (target >= 0.7 at 32M), beside
     the same group run tile by tile instead of in registers (MUSA_NO_CHAIN);
  2. inference of the MLP 64-128-128-10 at batch 64 and of a CIFAR ResNet-18
     at batch 32: static/eager time, and peak memory (the allocator's peak
     bytes during one call, plus, for static, the arena and scratch its plan
     holds between calls; and the arena against the naive sum);
  3. compile time of ResNet-18: the first call (capture, passes, planning and
     the run) minus an eager call (target < 300 ms).

The per-op executor overhead is measured in C (build/bench_jit). Each figure
is the best of several rounds; eager and static alternate round by round.

    PYTHONPATH=python /usr/bin/python3 bench/bench_jit.py
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import musa  # noqa: E402
import musa.nn as nn  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_models import resnet18  # noqa: E402  (the model bench_train trains, too)

ROUNDS = 5


def best(fn, reps):
    t = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - t0)
    return t


def side_by_side(eager, static, reps):
    te = ts = float("inf")
    for _ in range(ROUNDS):
        te = min(te, best(eager, reps))
        ts = min(ts, best(static, reps))
    return te, ts


def peak_during(fn):
    musa.reset_peak_memory_stats()
    base = musa.memory_stats()["current_bytes"]
    out = fn()
    peak = musa.memory_stats()["peak_bytes"] - base
    del out
    return peak


def gelu(x):
    return x * 0.5 * (1 + musa.tanh(0.79788456 * (x + 0.044715 * x ** 3)))


def memcpy_bandwidth(n):
    src = musa.randn(n)
    dst = musa.empty(n)
    t = float("inf")
    for _ in range(ROUNDS):
        t = min(t, best(lambda: dst.copy_(src), 5))
    return 2 * 4 * n / t


def bench_gelu(n):
    x = musa.randn(n)
    compiled = musa.jit(gelu)
    compiled(x)
    # the same group run tile by tile (MUSA_NO_CHAIN, read when the plan is built)
    tiled = musa.jit(gelu)
    os.environ["MUSA_NO_CHAIN"] = "1"
    tiled(x)
    del os.environ["MUSA_NO_CHAIN"]
    te, ts = side_by_side(lambda: gelu(x), lambda: compiled(x), 3)
    _, tt = side_by_side(lambda: None, lambda: tiled(x), 3)
    bw = memcpy_bandwidth(n)
    frac = 2 * 4 * n / ts / bw
    st = compiled.plan_stats()
    print(f"gelu-tanh chain, {n} floats ({st['fused_nodes']} nodes in {st['fused_groups']} "
          f"fused group, {st['chains']} in registers)")
    print(f"  eager {te * 1e3:8.2f} ms   static {ts * 1e3:8.2f} ms   static/eager "
          f"{ts / te:.3f} (<= 0.2 wanted)")
    print(f"  static moves {2 * 4 * n / ts / 1e9:.1f} GB/s = {frac:.2f} of memcpy bandwidth "
          f"({bw / 1e9:.1f} GB/s; >= 0.7 wanted at 32M)")
    print(f"  the group tile by tile (MUSA_NO_CHAIN): {tt * 1e3:8.2f} ms = "
          f"{2 * 4 * n / tt / bw:.2f} of memcpy bandwidth")


def bench_model(name, model, x, reps):
    model.eval()
    with musa.no_grad():
        eager_first = best(lambda: model(x), 1)
        compiled = musa.jit(lambda inp: model(inp))
        t0 = time.perf_counter()
        compiled(x)
        first = time.perf_counter() - t0
        te, ts = side_by_side(lambda: model(x), lambda: compiled(x), reps)
        pe = peak_during(lambda: model(x))
        mp = compiled.memory_plan()
        ops = compiled.plan_stats()
        # the plan holds its arena (scratch included) between calls: count it
        ps = peak_during(lambda: compiled(x)) + ops["held_bytes"]
    print(f"{name} inference, input {tuple(x.shape)}")
    print(f"  eager {te * 1e3:8.3f} ms   static {ts * 1e3:8.3f} ms   static/eager {ts / te:.3f}")
    print(f"  peak memory of a call: eager {pe / 2**20:.2f} MiB, static {ps / 2**20:.2f} MiB "
          f"({ps / pe if pe else 0:.2f}x); plan arena {mp['arena_bytes'] / 2**20:.2f} MiB vs "
          f"naive sum {mp['naive_bytes'] / 2**20:.2f} MiB "
          f"({mp['arena_bytes'] / max(mp['naive_bytes'], 1):.2f})")
    print(f"  plan: {ops['instructions']} instructions ({ops['kernels']} kernels, "
          f"{ops['fused_groups']} fused groups holding {ops['fused_nodes']} nodes, "
          f"{ops['views']} views as aliases, {ops['inplace']} in-place)")
    return first, eager_first, te


def main():
    musa.manual_seed(0)
    print(f"threads: {musa.get_num_threads()}")
    bench_gelu(4 * 1024 * 1024)   # the size: 16 MB tensors stay in the LLC
    bench_gelu(32 * 1024 * 1024)  # 128 MB tensors: eager goes to DRAM for every op
    mlp = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                        nn.Linear(128, 10))
    bench_model("MLP 64-128-128-10", mlp, musa.randn(64, 64), 200)
    net = resnet18(musa)
    first, eager_first, te = bench_model("ResNet-18 (CIFAR)", net, musa.randn(32, 3, 32, 32), 2)
    print(f"ResNet-18 compile: first call {first * 1e3:.0f} ms, an eager call {te * 1e3:.0f} ms: "
          f"capture + passes + planning = {(first - te) * 1e3:.0f} ms (< 300 wanted)")


if __name__ == "__main__":
    main()
