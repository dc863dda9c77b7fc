"""F.interpolate's linear modes and bicubic: musa against PyTorch, side by side.

    PYTHONPATH=python /usr/bin/python3 bench/bench_interpolate.py

Each case is timed as musa (one `resample` op per spatial dim), musa's
earlier composition (index_select, mul and add per dim, kept here for
comparison) and PyTorch 1.13, in interleaved rounds, 2 threads, float32:
the best of several calls per round, the median over rounds. The bytes a
forward must move (input read once, output written once) over the memcpy
rate measured in the same run give the bound a kernel could reach.
"""
import time

import numpy as np
import torch

import musa
import musa.nn.functional as F
from musa import _C
from musa.nn._functional_more import _linear_taps

torch.set_num_threads(2)
ROUNDS = 3


def old_linear_dim(x, dim, out_size, scale, align_corners):
    """The composition resample replaced: two gathers, two products, a sum."""
    (i0, i1), (w0, w1) = _linear_taps(x.shape[dim], out_size, scale, align_corners)

    def weight(w):
        shape = [1] * x.ndim
        shape[dim] = w.shape[0]
        return _C.reshape(w.to(x.dtype), shape)

    return _C.add(_C.mul(x.index_select(dim, i0), weight(w0)),
                  _C.mul(x.index_select(dim, i1), weight(w1)))


def old_linear(x, size):
    for i, s in enumerate(size):
        x = old_linear_dim(x, 2 + i, s, x.shape[2 + i] / s, False)
    return x


def best(f, n):
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return min(ts) * 1e3


def memcpy_gbs():
    src, dst = musa.ones(8 << 20), musa.zeros(8 << 20)
    ms = min(best(lambda: dst.copy_(src), 20) for _ in range(ROUNDS))
    return 2 * 32 * 2 ** 20 / (ms * 1e-3) / 1e9  # bytes read and written


def case(shape, size, mode, bw, reps):
    xn = np.random.default_rng(0).random(shape, dtype=np.float32)
    xm, xt = musa.tensor(xn), torch.tensor(xn)
    kw = {"size": size, "mode": mode}
    fns = {"musa": lambda: F.interpolate(xm, **kw),
           "torch": lambda: torch.nn.functional.interpolate(xt, **kw)}
    if mode in ("linear", "bilinear", "trilinear"):
        fns["musa before"] = lambda: old_linear(xm, size)
    want = fns["torch"]().numpy()
    for name in fns:  # each side computes the same thing
        assert np.allclose(fns[name]().numpy(), want, rtol=1e-5, atol=1e-5), name
    fwd = {k: [] for k in fns}
    for _ in range(ROUNDS):
        for k, f in fns.items():
            fwd[k].append(best(f, reps))
    g = np.random.default_rng(1).random(want.shape, dtype=np.float32)
    xm.requires_grad_(True), xt.requires_grad_(True)
    gm, gt = musa.tensor(g), torch.tensor(g)

    def fb(f, x, gr):
        def run():
            x.grad = None
            f().backward(gr)
        return run

    both = {"musa": fb(fns["musa"], xm, gm), "torch": fb(fns["torch"], xt, gt)}
    if "musa before" in fns:
        both["musa before"] = fb(fns["musa before"], xm, gm)
    fb_ms = {k: [] for k in both}
    for _ in range(ROUNDS):
        for k, f in both.items():
            fb_ms[k].append(best(f, max(3, reps // 2)))
    moved = 4 * (xn.size + want.size)
    med = {k: sorted(v)[ROUNDS // 2] for k, v in fwd.items()}
    line = ", ".join(f"{k} {v:.2f}" for k, v in med.items())
    fbl = ", ".join(f"{k} {sorted(v)[ROUNDS // 2]:.2f}" for k, v in fb_ms.items())
    print(f"{mode} {tuple(shape)} -> {tuple(size)}")
    print(f"  forward ms: {line}; bytes at memcpy rate {moved / bw / 1e6:.2f}")
    print(f"  forward + backward ms: {fbl}")


def main():
    bw = memcpy_gbs()
    print(f"memcpy: {bw:.1f} GB/s (bytes read + written), 2 threads")
    case((8, 64, 32, 32), (64, 64), "bilinear", bw, 15)
    case((2, 16, 128, 128), (256, 256), "bilinear", bw, 15)
    case((8, 64, 32, 32), (64, 64), "bicubic", bw, 15)
    case((2, 8, 16, 16, 16), (32, 32, 32), "trilinear", bw, 15)
    case((5, 1, 2, 2), (1048576, 2), "bilinear", bw, 5)
    case((1, 64, 8, 8), (16, 16), "bilinear", bw, 300)  # small: the per-call cost


if __name__ == "__main__":
    main()
