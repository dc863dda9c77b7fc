"""How far a static step, and a static step under autocast, can get ahead of
musa's float32 dynamic step on this machine: the bounds that the GEMMs set
(issues 13 and 15), measured in one run.

    PYTHONPATH=python /usr/bin/python3 bench/bench_bounds.py [--rounds 3]
                                                            [--models mlp,gpt,resnet18]

Both issues' speed targets divide musa's float32 dynamic step by a static
one: float32 static (>= 1.5x MLP, >= 1.3x GPT-tiny, >= 1.15x ResNet-18) and
static under bfloat16 autocast (>= 2x GPT-tiny, >= 2.5x ResNet-18). The
dynamic step already runs oneDNN's GEMMs and convolutions, and the static
plan runs the same kernels (it keeps eager's bits), so no plan can be faster
than its GEMMs; under autocast the gain is bounded by how much faster the
same kernels are in bfloat16 on this CPU. This script prints:

1. the kernels' rates in each dtype (bench_bf16's 1024 matmul, 4096x1024
   linear and 3x3 convolution, forward and both backward products) and their
   ratio: the hardware's bfloat16 gain over float32;
2. per model, in one process, rows alternating over rounds (medians):
   - the float32 dynamic step, the float32 static step and the static AMP
     step (wall time, median of the steps, no profiler), and each static
     step's ratio to the dynamic one;
   - each plan's GEMM and convolution instructions (profiled separately:
     the sum of their times per step);
   - the bound: float32 dynamic step / the plan's GEMM time, the ratio a
     step would reach if everything but its GEMMs took no time; and, where
     the bound is above the target, the time left for everything else at
     the target.

A bound under the target means no change outside the GEMM kernels can reach
the target on this machine. The options that change rounding
(Config(channels_last=True) for ResNet-18, Config(fuse_attention=True) for
GPT-tiny) run the same way, as rows beside the targets' rows; their GEMM
time is their own (channels-last convolutions do no reorders; the fused
attention kernel is not counted as a GEMM). BENCH_THREADS sets the thread count (default 2).
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
import musa.amp  # noqa: E402
from bench_bf16 import kernels  # noqa: E402
from bench_models import MODELS  # noqa: E402
from bench_train import make_step  # noqa: E402
from musa.profiler import profile  # noqa: E402

THREADS = int(os.environ.get("BENCH_THREADS", "2"))
# (plan, target, Config options) per model: float32 static (issue 13), AMP
# static (issue 15), and the options that change rounding (not the targets'
# rows: shown beside them, against the same target)
CL, FA = {"channels_last": True}, {"fuse_attention": True}
TARGETS = {
    "mlp": (("static", 1.5, {}),),
    "gpt": (("static", 1.3, {}), ("static AMP", 2.0, {}), ("fused attn", 1.3, FA)),
    "resnet18": (("static", 1.15, {}), ("static AMP", 2.5, {}), ("NHWC", 1.15, CL),
                 ("NHWC AMP", 2.5, CL)),
}
STEPS = {"mlp": 200, "gpt": 30, "resnet18": 5}
GEMM_OPS = ("conv", "matmul", "linear", "addmm", "baddbmm", "bmm", "mm")


def build(name, jit, amp, options):
    """A training step (eager or compiled, float32 or AMP) and its two batches."""
    spec = MODELS[name]
    musa.manual_seed(0)
    net = spec.build(musa)
    data = [spec.make_batch(musa) for _ in range(2)]
    opt = musa.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    step = make_step(net, opt, musa.nn.functional, musa.amp.autocast if amp else None)
    fn = musa.jit(step, config=musa.Config(**options)) if jit else step
    for i in range(3):  # capture (static) and warm-up
        fn(*data[i % 2])
    return fn, data


def step_ms(fn, data, steps):
    times = []
    for i in range(steps):
        t0 = time.perf_counter()
        fn(*data[i % 2])
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def gemm_ms(fn, data, steps):
    """Per step: the plan's GEMM and convolution instructions, profiled."""
    with profile() as p:
        for i in range(steps):
            fn(*data[i % 2])
    us = sum(e.duration_us for e in p.events() if e.kind == "plan" and e.name.startswith(GEMM_OPS))
    return us / steps / 1e3


def kernel_table(rounds):
    rates = {}
    for _ in range(rounds):
        for dt in (musa.float32, musa.bfloat16):
            for k, (flops, secs) in kernels(dt).items():
                rates.setdefault(k, {}).setdefault(str(dt), []).append(flops / secs / 1e9)
    print("kernel                                   float32 GFLOP/s  bfloat16  ratio")
    for k, r in rates.items():
        f, b = statistics.median(r["musa.float32"]), statistics.median(r["musa.bfloat16"])
        print("%-40s %15.1f %9.1f %6.2f" % (k, f, b, b / f))


def verdict(dyn, step, gemm, target):
    if dyn / gemm < target:
        return "unreachable: its GEMMs alone take %.3g ms > %.3g" % (gemm, dyn / target)
    return "needs the rest <= %.3g ms (now %.3g)" % (dyn / target - gemm, step - gemm)


def model_rows(name, rounds):
    steps = STEPS[name]
    dyn = build(name, False, False, {})
    plans = [(mode, target, build(name, True, "AMP" in mode, opts))
             for mode, target, opts in TARGETS[name]]
    d_ms, s_ms, g_ms = [], {}, {}
    for _ in range(rounds):
        d_ms.append(step_ms(*dyn, steps))
        for mode, _, run in plans:
            s_ms.setdefault(mode, []).append(step_ms(*run, steps))
            g_ms.setdefault(mode, []).append(gemm_ms(*run, steps))
    d = statistics.median(d_ms)
    for mode, target, _ in plans:
        s, g = statistics.median(s_ms[mode]), statistics.median(g_ms[mode])
        print("%-9s %-10s %9.3g %9.3g %6.2f %9.3g %6.2f  %4.2f %s"
              % (name, mode, d, s, d / s, g, d / g, target, verdict(d, s, g, target)))


def main(argv):
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--models", default="mlp,gpt,resnet18")
    args = p.parse_args(argv)
    names = args.models.split(",")
    for n in names:
        if n not in TARGETS:
            p.error("--models: %r is not one of %s" % (n, ", ".join(TARGETS)))
    musa.set_num_threads(THREADS)
    print("%d threads, %d rounds" % (THREADS, args.rounds))
    kernel_table(args.rounds)
    print()
    print("model     plan        dyn ms   plan ms  ratio   GEMM ms  bound  target")
    for n in names:
        model_rows(n, args.rounds)


if __name__ == "__main__":
    main(sys.argv[1:])
