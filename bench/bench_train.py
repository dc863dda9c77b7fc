"""The dynamic-versus-static table (SPEC.md section 6), in one command:

    PYTHONPATH=python /usr/bin/python3 bench/bench_train.py [--steps N]

Trains a CIFAR-style ResNet-18 (3x32x32 inputs, batch 32, synthetic data) and
the digits MLP (64-128-128-10, batch 64) with SGD (momentum 0.9):
- musa dynamic: eager ops and the tape;
- musa static: the whole step (forward, loss, backward, optimizer step,
  zero_grad) under @musa.jit, one plan;
- PyTorch eager, and TorchScript (torch.jit.trace of the model), when
  python3-torch is installed.

Each row runs in a fresh process (so its resident-memory growth is its own)
and prints: throughput (samples/s, median step time after warm-up), peak
memory (the musa allocator's peak bytes, above what the model and data hold
before training, during the steps after the first; and the process's peak
RSS growth over the whole run), and the first step's latency, which for
musa static includes capture and compilation.

Targets: static/dynamic throughput >= 1.3 on the MLP and >= 1.2 on ResNet-18;
static peak memory <= 0.75x dynamic on ResNet-18; static first step < 1 s;
musa static >= 1.2x PyTorch eager throughput on both.
"""
import json
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

MODELS = {"resnet18": (32, (3, 32, 32), 10), "mlp": (64, (64,), 10)}


def rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# ---- musa ----

def model(name, nn, F):
    """The benchmark's models from an nn namespace (musa.nn or torch.nn)."""
    if name == "mlp":
        return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                             nn.Linear(128, 10))
    sys.path.insert(0, HERE)
    from bench_jit import resnet18
    return resnet18(nn, F)


def make_step(net, opt, F):
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    return step


def run_musa(name, static, steps):
    import musa
    import musa.nn as nn
    import musa.nn.functional as F
    musa.manual_seed(0)
    batch, shape, classes = MODELS[name]
    net = model(name, nn, F)
    step = make_step(net, musa.optim.SGD(net.parameters(), lr=0.01, momentum=0.9), F)
    fn = musa.jit(step) if static else step
    data = [(musa.randn(batch, *shape), musa.randint(0, classes, (batch,))) for _ in range(4)]
    base_rss = rss_bytes()
    base = musa.memory_stats()["current_bytes"]
    t0 = time.perf_counter()
    float(fn(*data[0]))
    first = time.perf_counter() - t0
    musa.reset_peak_memory_stats()  # steady state: the peak of the steps after the first
    times = []
    for i in range(steps):
        t0 = time.perf_counter()
        float(fn(*data[(i + 1) % len(data)]))
        times.append(time.perf_counter() - t0)
    warm = times[min(2, len(times) - 1):]
    stats = musa.memory_stats()
    extra = {}
    if static:
        extra["compiles"] = fn.compiles
        extra["arena_bytes"] = fn.plan_stats()["arena_bytes"]
    return dict(step=statistics.median(warm), first=first, batch=batch,
                alloc_peak=stats["peak_bytes"] - base, rss=rss_bytes() - base_rss, **extra)


# ---- torch ----

def run_torch(name, script, steps):
    import torch
    import torch.nn as tnn
    import torch.nn.functional as tF
    torch.manual_seed(0)
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
    batch, shape, classes = MODELS[name]
    net = model(name, tnn, tF)
    data = [(torch.randn(batch, *shape), torch.randint(0, classes, (batch,))) for _ in range(4)]
    base_rss = rss_bytes()
    t0 = time.perf_counter()
    if script:
        net = torch.jit.trace(net, (data[0][0],))
    step = make_step(net, torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9), tF)
    float(step(*data[0]))
    first = time.perf_counter() - t0
    times = []
    for i in range(steps):
        t0 = time.perf_counter()
        float(step(*data[(i + 1) % len(data)]))
        times.append(time.perf_counter() - t0)
    warm = times[min(2, len(times) - 1):]
    return dict(step=statistics.median(warm), first=first, batch=batch, alloc_peak=None,
                rss=rss_bytes() - base_rss)


def child(row, name, steps):
    if row.startswith("musa"):
        import musa
        musa.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
        res = run_musa(name, row == "musa-static", steps)
    else:
        res = run_torch(name, row == "torchscript", steps)
    print("RESULT " + json.dumps(res))


def main():
    steps = {"resnet18": 14, "mlp": 300}
    if "--steps" in sys.argv:
        n = int(sys.argv[sys.argv.index("--steps") + 1])
        steps = {k: n for k in steps}
    try:
        import torch  # noqa: F401
        rows = ["musa-dynamic", "musa-static", "pytorch-eager", "torchscript"]
    except ImportError:
        rows = ["musa-dynamic", "musa-static"]
    print(f"threads: {os.environ.get('BENCH_THREADS', '2')}; SGD momentum; throughput is the "
          f"median step after 2 warm-up steps")
    results = {}
    for name in ("mlp", "resnet18"):
        for row in rows:
            out = subprocess.run([sys.executable, __file__, "--child", row, name,
                                  str(steps[name])], capture_output=True, text=True,
                                 env=dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "python")))
            line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
            if out.returncode or not line:
                print(f"{name} {row}: failed\n{out.stderr[-2000:]}")
                continue
            results[(name, row)] = json.loads(line[0][7:])
    mib = 2 ** 20
    for name in ("mlp", "resnet18"):
        print(f"\n{name} (batch {MODELS[name][0]})")
        print(f"  {'mode':15s} {'samples/s':>10s} {'step ms':>9s} {'alloc peak MiB':>15s} "
              f"{'RSS growth MiB':>15s} {'first step ms':>14s}")
        for row in rows:
            r = results.get((name, row))
            if not r:
                continue
            ap = "-" if r["alloc_peak"] is None else f"{r['alloc_peak'] / mib:.1f}"
            print(f"  {row:15s} {r['batch'] / r['step']:10.0f} {r['step'] * 1e3:9.2f} {ap:>15s} "
                  f"{r['rss'] / mib:15.1f} {r['first'] * 1e3:14.0f}")
        d, s = results.get((name, "musa-dynamic")), results.get((name, "musa-static"))
        t = results.get((name, "pytorch-eager"))
        if d and s:
            want = 1.3 if name == "mlp" else 1.2
            print(f"  static/dynamic throughput {d['step'] / s['step']:.2f} (>= {want} wanted); "
                  f"static/dynamic allocator peak {s['alloc_peak'] / max(d['alloc_peak'], 1):.2f}"
                  + (" (<= 0.75 wanted)" if name == "resnet18" else "")
                  + f"; static first step {s['first'] * 1e3:.0f} ms (< 1000 wanted)")
        if s and t:
            print(f"  musa static / PyTorch eager throughput {t['step'] / s['step']:.2f} "
                  f"(>= 1.2 wanted)")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        main()
