"""auto_mixed_graph against eager and musa.jit, side by side in one run:
a small fixed-shape CNN (inference) and a one-op function. Prints the
median call time of each form over interleaved rounds, the mode the wrapper
chose, and its explanation.

    PYTHONPATH=python /usr/bin/python3 bench/bench_auto_mixed.py
"""
import statistics
import time

import musa
import musa.nn as nn


def per_call(fn, *args, n=200):
    t0 = time.perf_counter()
    for _ in range(n):
        fn(*args)
    return (time.perf_counter() - t0) / n


def compare(name, make, *args, rounds=5):
    eager = make()
    compiled = musa.jit(make())
    auto = musa.auto_mixed_graph(make())
    for _ in range(20):  # warm all three up (auto decides here)
        eager(*args), compiled(*args), auto(*args)
    times = {"eager": [], "musa.jit": [], "auto_mixed_graph": []}
    for _ in range(rounds):
        for label, fn in (("eager", eager), ("musa.jit", compiled), ("auto_mixed_graph", auto)):
            times[label].append(per_call(fn, *args))
    base = statistics.median(times["eager"])
    print(f"{name}:")
    for label, ts in times.items():
        m = statistics.median(ts)
        print(f"  {label:17s} {m * 1e6:9.1f} us/call  ({base / m:.2f}x eager)")
    print(f"  auto_mixed_graph chose: {auto.mode}")
    print("  " + auto.explain().replace("\n", "\n  "))


def main():
    musa.manual_seed(0)

    def cnn():
        net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                            nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                            nn.Linear(8 * 4 * 4, 10)).eval()
        return lambda x: net(x)
    with musa.no_grad():
        compare("small CNN, batch 2, 3x8x8", cnn, musa.randn(2, 3, 8, 8))
        compare("one add of a 1-element tensor", lambda: (lambda x: x + 1), musa.ones(1))


if __name__ == "__main__":
    main()
