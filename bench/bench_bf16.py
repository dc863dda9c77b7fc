"""bfloat16 against float32, side by side in one run (figures, no asserts):

  1. the GEMM-shaped kernels: a 1024 x 1024 matmul, a linear layer
     (4096 x 1024 by 1024 x 1024 with bias) and a 3x3 convolution (batch 32,
     128 channels, 16 x 16, padding 1), forward, and the convolution's two
     backward products: GFLOP/s in each dtype and their ratio;
  2. forward + backward of the bench_models models (MLP, GPT-tiny,
     ResNet-18) with every parameter and input in bfloat16 against float32
     (forward and backward only, no optimizer step), eager and compiled:
     milliseconds and the speedup.

Rows alternate dtypes over rounds; each figure is the best of its round
(kernels) or the median of its steps (models), then the median over
rounds. BENCH_THREADS sets the thread count (default 2).

    PYTHONPATH=python /usr/bin/python3 bench/bench_bf16.py [--rounds 3]
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, HERE)

import musa  # noqa: E402
import musa.nn.functional as F  # noqa: E402
from bench_jit import best as best_of  # noqa: E402
from bench_models import MODELS  # noqa: E402

THREADS = int(os.environ.get("BENCH_THREADS", "2"))
DTYPES = (musa.float32, musa.bfloat16)


def best(fn, reps):
    """The best of reps timed calls, after one untimed call."""
    fn()
    return best_of(fn, reps)


def kernels(dt):
    """{name: (flops, seconds)} for one dtype."""
    musa.manual_seed(0)
    a, b = musa.randn(1024, 1024).to(dt), musa.randn(1024, 1024).to(dt)
    x, w, bias = musa.randn(4096, 1024).to(dt), musa.randn(1024, 1024).to(dt), musa.randn(1024).to(dt)
    cx = musa.randn(32, 128, 16, 16).to(dt)
    cw = (musa.randn(128, 128, 3, 3) * 0.05).to(dt)
    cxg = cx.detach().requires_grad_()
    cwg = cw.detach().requires_grad_()
    cy = F.conv2d(cxg, cwg, padding=1)
    gy = musa.randn(*cy.shape).to(dt)
    conv_flops = 2 * 32 * 128 * 128 * 9 * 16 * 16

    def conv_backward():
        musa.autograd.grad(cy, (cxg, cwg), gy, retain_graph=True)

    return {
        "matmul 1024": (2 * 1024 ** 3, best(lambda: a @ b, 10)),
        "linear 4096x1024x1024": (2 * 4096 * 1024 * 1024, best(lambda: F.linear(x, w, bias), 10)),
        "conv 3x3 forward": (conv_flops, best(lambda: F.conv2d(cx, cw, padding=1), 10)),
        "conv 3x3 both backward products": (2 * conv_flops, best(conv_backward, 5)),
    }


def model_step(name, dt, compiled, steps):
    spec = MODELS[name]
    musa.manual_seed(0)
    net = spec.build(musa).to(dt)
    x, y = spec.make_batch(musa)
    if x.dtype.is_floating_point:
        x = x.to(dt)

    def step():
        for p in net.parameters():
            p.grad = None
        out = net(x)
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]).float(), y.reshape(-1))
        loss.backward()
        return loss.detach()

    if compiled:
        step = musa.jit(step)
    step()
    step()
    ts = []
    for _ in range(steps):
        t0 = time.perf_counter()
        float(step())
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    musa.set_num_threads(THREADS)
    print(f"bfloat16 against float32, {THREADS} threads, median of {a.rounds} rounds")
    kr = {}
    for r in range(a.rounds):
        for dt in DTYPES if r % 2 == 0 else DTYPES[::-1]:
            for k, (fl, t) in kernels(dt).items():
                kr.setdefault((k, dt), []).append(fl / t / 1e9)
    print(f"\n{'kernel':34s} {'float32 GFLOP/s':>16s} {'bfloat16':>10s} {'ratio':>7s}")
    for k in dict.fromkeys(k for k, _ in kr):
        f, b = (statistics.median(kr[(k, dt)]) for dt in DTYPES)
        print(f"{k:34s} {f:16.1f} {b:10.1f} {b / f:7.2f}")
    mr = {}
    steps = {"mlp": 50, "gpt": 10, "resnet18": 3}
    for r in range(a.rounds):
        for name in steps:
            for compiled in (False, True):
                for dt in DTYPES if r % 2 == 0 else DTYPES[::-1]:
                    t = model_step(name, dt, compiled, steps[name])
                    mr.setdefault((name, compiled, dt), []).append(t)
    print(f"\n{'forward + backward':34s} {'float32 ms':>16s} {'bfloat16':>10s} {'speedup':>7s}")
    for name in steps:
        for compiled in (False, True):
            f, b = (statistics.median(mr[(name, compiled, dt)]) * 1e3 for dt in DTYPES)
            label = f"{name} {'compiled' if compiled else 'eager'}"
            print(f"{label:34s} {f:16.2f} {b:10.2f} {f / b:7.2f}")


if __name__ == "__main__":
    main()
