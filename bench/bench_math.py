"""Transcendental elementwise math, eager and fused, in nanoseconds per element:

  1. eager exp, expm1, log, log1p, sin, cos, tanh, erf, sigmoid, gelu (erf
     and tanh forms, which are several ops each) and softmax (along rows and
     along columns of a 1024 x 1024 matrix) on 1M elements, float32 and
     float64, with a multiply as the memory-bound reference;
     plus the memory-bound kernels around them in models: softmax and
     log-softmax over causally masked rows (half of each row -inf), the
     masked fill that makes them, a column sum (a bias gradient), a
     transposed copy, zeros, and an embedding-style row gather; and a
     linear with a bias, cross-entropy and layer norm (forward and
     backward, the gradients through musa.autograd.grad);
  2. the gelu-tanh chain of bench_jit.py compiled (one fused group), and the
     same chain with tanh replaced by neg (what the chain costs without any
     transcendental math), at 4M and 32M float32, as fractions of a copy of
     the same size.

Times are process CPU time (time.process_time), best of several rounds: on a
shared machine CPU time is far steadier than wall time, so run it with
MUSA_NUM_THREADS=1 for per-core figures. With --compare DIR the script runs
itself alternately on this tree's python/ and on DIR (another build's python/
folder, e.g. a copy of the old python/musa), round by round, and prints both
sides and their ratio:

    MUSA_NUM_THREADS=1 PYTHONPATH=python /usr/bin/python3 bench/bench_math.py
    MUSA_NUM_THREADS=1 /usr/bin/python3 bench/bench_math.py --compare /tmp/old/python
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
OWN_PYTHON = os.path.join(HERE, "..", "python")
N_EAGER = 1 << 20
CHAIN_SIZES = (1 << 22, 1 << 25)


def cpu_best(fn, reps, rounds):
    t = float("inf")
    for _ in range(rounds):
        t0 = time.process_time()
        for _ in range(reps):
            fn()
        t = min(t, (time.process_time() - t0) / reps)
    return t


def measure(rounds):
    """One side's figures: {name: ns per element}."""
    import musa

    def gelu_tanh(x):
        return x * 0.5 * (1 + musa.tanh(0.79788456 * (x + 0.044715 * x ** 3)))

    def gelu_neg(x):
        return x * 0.5 * (1 + musa.neg(0.79788456 * (x + 0.044715 * x ** 3)))

    F = musa.nn.functional
    side = int(N_EAGER ** 0.5)
    future = musa.tril(musa.ones(side, side)) == 0  # True above the diagonal
    rows = musa.randint(0, side, (side,))
    w128, b128, ones128, zeros128 = {}, {}, {}, {}  # per dtype, filled below
    target = musa.randint(0, 256, (N_EAGER // 256,))

    def xent_grad(x):  # the gradient only: no .grad to accumulate into
        x = x.detach().requires_grad_()
        return musa.autograd.grad(F.cross_entropy(x, target), [x])

    def ln_grad(x):
        ts = [x.detach().requires_grad_(), ones128[x.dtype], zeros128[x.dtype]]
        return musa.autograd.grad(F.layer_norm(ts[0], (128,), ts[1], ts[2]).sum(), ts)

    eager = {
        "exp": (musa.exp, -10, 10), "expm1": (musa.expm1, -2, 2), "log": (musa.log, 0.01, 100),
        "log1p": (musa.log1p, -0.5, 100), "sin": (musa.sin, -10, 10), "cos": (musa.cos, -10, 10),
        "tanh": (musa.tanh, -5, 5), "erf": (musa.erf, -4, 4), "sigmoid": (musa.sigmoid, -10, 10),
        "gelu": (F.gelu, -5, 5), "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), -5, 5),
        "softmax rows": (lambda x: F.softmax(x.reshape(1024, -1), dim=1), -5, 5),
        "softmax cols": (lambda x: F.softmax(x.reshape(1024, -1), dim=0), -5, 5),
        "log_softmax rows": (lambda x: F.log_softmax(x.reshape(1024, -1), dim=1), -5, 5),
        "softmax masked rows": (
            lambda x: F.softmax(x.reshape(side, -1).masked_fill(future, float("-inf")), dim=1),
            -5, 5),
        "log_softmax masked rows": (
            lambda x: F.log_softmax(x.reshape(side, -1).masked_fill(future, float("-inf")), dim=1),
            -5, 5),
        "masked_fill": (lambda x: x.reshape(side, -1).masked_fill(future, float("-inf")), -5, 5),
        "sum columns": (lambda x: x.reshape(side, -1).sum(0), -5, 5),
        "transpose copy": (lambda x: x.reshape(side, -1).t().contiguous(), -5, 5),
        "zeros": (lambda x: musa.zeros(x.shape, dtype=x.dtype), -5, 5),
        "index_select rows": (lambda x: musa.index_select(x.reshape(side, -1), 0, rows), -5, 5),
        "mul": (lambda x: x * x, -5, 5),
        "linear+bias (8192, 128) -> 128": (
            lambda x: F.linear(x.reshape(-1, 128), w128[x.dtype], b128[x.dtype]), -5, 5),
        "cross_entropy fwd+bwd rows of 256": (lambda x: xent_grad(x.reshape(-1, 256)), -5, 5),
        "layer_norm fwd+bwd rows of 128": (lambda x: ln_grad(x.reshape(-1, 128)), -5, 5),
    }
    out = {}
    musa.manual_seed(0)
    for dt in (musa.float32, musa.float64):
        w128[dt], b128[dt] = musa.randn(128, 128, dtype=dt) * 0.1, musa.randn(128, dtype=dt)
        ones128[dt] = musa.ones(128, dtype=dt).requires_grad_()
        zeros128[dt] = musa.zeros(128, dtype=dt).requires_grad_()
        for name, (fn, lo, hi) in eager.items():
            x = (musa.rand(N_EAGER, dtype=dt) * (hi - lo) + lo)
            fn(x)
            t = cpu_best(lambda: fn(x), 5, rounds)
            out[f"eager {name} {str(dt).split('.')[-1]}"] = t * 1e9 / N_EAGER
    for n in CHAIN_SIZES:
        x = musa.randn(n)
        d = musa.empty(n)
        copy = cpu_best(lambda: d.copy_(x), 3, rounds) * 1e9 / n
        out[f"copy {n}"] = copy
        for f in (gelu_tanh, gelu_neg):
            c = musa.jit(f)
            c(x)
            t = cpu_best(lambda: c(x), 3, rounds) * 1e9 / n
            out[f"compiled {f.__name__} {n}"] = t
    return out


def with_fractions(res):
    """Add each compiled chain's fraction of copy bandwidth (copy time / its time)."""
    out = dict(res)
    for k, v in res.items():
        if k.startswith("compiled "):
            out[k + " (fraction of copy)"] = res["copy " + k.split()[-1]] / v
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--compare", metavar="DIR", help="another build's python/ folder")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--python", help=argparse.SUPPRESS)  # the side a child measures
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if not a.compare:
        sys.path.insert(0, a.python or OWN_PYTHON)
        res = measure(a.rounds)
        if a.json:
            print(json.dumps(res))
        else:
            for k, v in with_fractions(res).items():
                print(f"{k:48s} {v:8.3f}")
        return
    sides = {"this tree": OWN_PYTHON, "compare": a.compare}
    best = {s: {} for s in sides}
    for _ in range(3):  # alternate the two sides so both see the same machine state
        for s, path in sides.items():
            r = subprocess.run([sys.executable, __file__, "--python", path, "--json",
                                "--rounds", str(a.rounds)], check=True, capture_output=True,
                               text=True)
            for k, v in json.loads(r.stdout).items():
                best[s][k] = min(best[s].get(k, v), v)
    best = {s: with_fractions(r) for s, r in best.items()}
    print(f"{'figure (ns per element)':48s} {'compare':>8s} {'this':>8s} "
          f"{'this/compare':>12s}")
    for k in best["this tree"]:
        old, new = best["compare"].get(k, float("nan")), best["this tree"][k]
        print(f"{k:48s} {old:8.3f} {new:8.3f} {new / old:12.2f}")


if __name__ == "__main__":
    main()
