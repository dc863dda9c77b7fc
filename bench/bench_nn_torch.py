"""PyTorch side of bench_nn: times the cases bench_nn hands over.

Usage: /usr/bin/python3 bench_nn_torch.py CASES_FILE THREADS
CASES_FILE has lines "index kind a0 a1 a2 a3 a4" (see bench_nn.c). Prints
"index fwd_ms bwd_ms" per case, measured as bench_nn measures musa: forward
under no_grad, then backward of one forward with retain_graph, best of reps.
"""
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # bench_nn prints this line and shows no ratios
    print(f"PyTorch not available ({e})")
    sys.exit(0)


def best_of(fn, after=None):
    t0 = time.perf_counter()
    fn()
    once = time.perf_counter() - t0
    reps = max(5, min(200, int(0.25 / once) if once > 0 else 200))
    best = float("inf")
    for r in range(reps + 2):
        t = time.perf_counter()
        fn()
        t = time.perf_counter() - t
        if after:
            after()
        if r >= 2:
            best = min(best, t)
    return best * 1e3


def make(kind, a):
    """Inputs (the first n_grad get gradients) and the forward function."""
    r = torch.randn
    if kind == "conv":
        n, cin, cout, hw, s = a
        ins = [r(n, cin, hw, hw), r(cout, cin, 3, 3)]
        return ins, 2, lambda x, w: F.conv2d(x, w, None, s, 1)
    if kind == "linear":
        n, k, m = a[:3]
        return [r(n, k), r(m, k), r(m)], 3, F.linear
    if kind == "softmax":
        return [r(a[0], a[1])], 1, lambda x: torch.softmax(x, 1)
    if kind == "layer_norm":
        n, c = a[:2]
        return [r(n, c), r(c), r(c)], 3, lambda x, w, b: F.layer_norm(x, (c,), w, b, 1e-5)
    if kind == "batch_norm":
        n, c, hw = a[:3]
        return [r(n, c, hw, hw), r(c), r(c)], 3, lambda x, w, b: F.batch_norm(x, None, None, w, b, True, 0.1, 1e-5)
    if kind == "cross_entropy":
        n, c = a[:2]
        return [r(n, c), torch.randint(0, c, (n,))], 1, F.cross_entropy
    raise ValueError(f"unknown case kind {kind!r}")


def main():
    torch.set_num_threads(int(sys.argv[2]))
    print(f"PyTorch {torch.__version__}, {torch.get_num_threads()} threads")
    for line in open(sys.argv[1]):
        f = line.split()
        index, kind, a = int(f[0]), f[1], [int(v) for v in f[2:]]
        ins, n_grad, fwd = make(kind, a)
        with torch.no_grad():
            t_fwd = best_of(lambda: fwd(*ins))
        for t in ins[:n_grad]:
            t.requires_grad_(True)
        y = fwd(*ins)
        g = torch.ones_like(y)

        def clear():
            for t in ins[:n_grad]:
                t.grad = None

        t_bwd = best_of(lambda: y.backward(g, retain_graph=True), clear)
        print(index, t_fwd, t_bwd, flush=True)


main()
