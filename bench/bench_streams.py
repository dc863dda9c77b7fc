"""Streams: two independent matmul chains, side by side in one run (figures,
no asserts).

Each chain is CHAIN matmuls of N x N float32 matrices (y = y @ w, scaled to
stay finite). Rows, alternating over rounds:

  - one stream, one thread: chain A then chain B on a single 1-thread
    stream (the work of one core, one after the other);
  - two streams, one thread each: A on one stream, B on another, at once;
  - default stream, all threads: A then B synchronously, each matmul using
    every thread (intra-op parallelism, for reference);
  - issue only: the time the two-stream row takes to return to Python
    before synchronising (the caller is free meanwhile).

Each figure is the median over rounds of the best of REPS runs, with the
achieved GFLOP/s against this machine's single-thread matmul rate, measured
in the same run. On a machine with two free cores, two streams approach 2x
one stream.

    PYTHONPATH=python /usr/bin/python3 bench/bench_streams.py [--rounds 5] [--n 384]
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

import musa  # noqa: E402

CHAIN = 8
REPS = 3


def chain(x, w):
    y = x
    for _ in range(CHAIN):
        y = (y @ w) * 0.05
    return y


def timed(fn):
    best = float("inf")
    for _ in range(REPS):
        musa.synchronize()
        t0 = time.perf_counter()
        fn()
        musa.synchronize()
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--n", type=int, default=384)
    a = p.parse_args()
    n = a.n
    musa.manual_seed(0)
    xa, wa, xb, wb = (musa.randn(n, n) for _ in range(4))
    one = musa.Stream(threads=1)
    s1, s2 = musa.Stream(threads=1), musa.Stream(threads=1)
    flops = 2 * 2 * CHAIN * n ** 3  # two chains

    def one_stream():
        with musa.stream(one):
            ya, yb = chain(xa, wa), chain(xb, wb)
        return ya, yb

    def two_streams():
        with musa.stream(s1):
            ya = chain(xa, wa)
        with musa.stream(s2):
            yb = chain(xb, wb)
        return ya, yb

    def default_all_threads():
        return chain(xa, wa), chain(xb, wb)

    issue = []

    def two_streams_issue():
        t0 = time.perf_counter()
        r = two_streams()
        issue.append(time.perf_counter() - t0)
        return r

    # results agree before anything is timed
    ref = default_all_threads()
    for got in (one_stream(), two_streams()):
        for g, r in zip(got, ref):
            assert musa.allclose(g, r, rtol=1e-4, atol=1e-5)

    # this machine's single-thread GEMM rate, from the same matrices
    def gemm_one_thread():
        with musa.stream(one):
            for _ in range(4):
                xa @ wa

    rows = {"one stream, one thread": one_stream, "two streams, one thread each": two_streams,
            f"default stream, {musa.get_num_threads()} threads": default_all_threads}
    res = {k: [] for k in rows}
    gemm = []
    for r in range(a.rounds):
        order = list(rows.items()) if r % 2 == 0 else list(rows.items())[::-1]
        for k, fn in order:
            res[k].append(timed(fn))
        gemm.append(4 * 2 * n ** 3 / timed(gemm_one_thread) / 1e9)
        issue.clear()
        timed(two_streams_issue)
        res.setdefault("issue only (two streams)", []).append(min(issue))
    g1 = statistics.median(gemm)
    print(f"two matmul chains of {CHAIN} x ({n} x {n}) float32, median of {a.rounds} rounds; "
          f"{os.cpu_count()} CPUs, {musa.get_num_threads()} musa threads")
    print(f"single-thread matmul rate here: {g1:.1f} GFLOP/s\n")
    base = statistics.median(res["one stream, one thread"])
    print(f"{'row':36s} {'ms':>9s} {'GFLOP/s':>9s} {'x 1 thread':>11s} {'speedup':>8s}")
    for k, ts in res.items():
        t = statistics.median(ts)
        if k.startswith("issue"):
            print(f"{k:36s} {t * 1e3:9.3f}")
            continue
        gf = flops / t / 1e9
        print(f"{k:36s} {t * 1e3:9.2f} {gf:9.1f} {gf / g1:11.2f} {base / t:8.2f}")


if __name__ == "__main__":
    main()
