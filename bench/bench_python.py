"""Python-level figures of musa beside PyTorch, measured in one run:

  1. eager overhead of `a + b` on 1-element tensors (ns per op);
  2. the same for a multiply of tensors that require grad (records a node);
  3. one training step (forward, cross-entropy, backward, SGD step) of the
     MLP 64-128-128-10 at batch 64.

Ratios are musa / PyTorch (below 1: musa is faster); targets: 1 and 2 at
most 0.5, 3 at most 0.8. Each figure is the best of 7 rounds; the two
frameworks alternate round by round so both see the same machine state.

    PYTHONPATH=python /usr/bin/python3 bench/bench_python.py
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import musa  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

ROUNDS = 7


def per_call(fn, n):
    t0 = time.perf_counter()
    fn(n)
    return (time.perf_counter() - t0) / n


def add_loop(lib):
    a, b = lib.ones(1), lib.ones(1)

    def run(n):
        for _ in range(n):
            a + b
    return run


def mul_grad_loop(lib):
    a = lib.ones(1, requires_grad=True)
    b = lib.ones(1, requires_grad=True)

    def run(n):
        for _ in range(n):
            a * b
    return run


def mlp_step(lib):
    nn, F = lib.nn, lib.nn.functional
    lib.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = lib.randn(64, 64)
    y = lib.randint(0, 10, (64,))

    def run(n):
        for _ in range(n):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return run


def measure(make, n):
    fns = {"musa": make(musa)}
    if torch is not None:
        fns["torch"] = make(torch)
    best = {k: float("inf") for k in fns}
    for fn in fns.values():
        fn(n // 10)  # warm up
    for _ in range(ROUNDS):
        for k, fn in fns.items():
            best[k] = min(best[k], per_call(fn, n))
    return best


def main():
    threads = musa.get_num_threads()
    if torch is not None:
        torch.set_num_threads(threads)
        print(f"PyTorch {torch.__version__}, {threads} threads")
    else:
        print("PyTorch not installed: musa figures only")
    rows = [("a + b, 1 element (us)", add_loop, 20000, 1e6, 0.5),
            ("requires_grad a * b, 1 element (us)", mul_grad_loop, 20000, 1e6, 0.5),
            ("MLP 64-128-128-10 train step, batch 64 (us)", mlp_step, 300, 1e6, 0.8)]
    print(f"{'figure':46s} {'musa':>9s} {'torch':>9s} {'ratio':>6s} {'target':>6s}")
    for name, make, n, scale, target in rows:
        b = measure(make, n)
        t = b.get("torch")
        ratio = f"{b['musa'] / t:.2f}" if t else "-"
        print(f"{name:46s} {b['musa'] * scale:9.2f} {t * scale if t else float('nan'):9.2f} {ratio:>6s} {target:6.1f}")


if __name__ == "__main__":
    main()
