"""Static against dynamic on models beyond the training table: recurrent
nets, transformers, convolutional nets, a mixer, a VAE.

    PYTHONPATH=python /usr/bin/python3 bench/bench_zoo.py [--rounds R] [--models a,b]

Each row (model x mode) runs in a fresh process, the rows of a round in a
rotated order; figures are medians over rounds. Per row: ms per training
step (Adam, lr 1e-3; median after 2 warm-up steps), peak RSS growth
(ru_maxrss after the steps minus before the first, as bench_train.py
measures it), and the losses, which static must match bit for bit.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PYPATH = os.path.join(os.path.dirname(HERE), "python")
STEPS, WARMUP = 12, 2


def models(musa):
    """name -> (build, description): build() gives (model, inputs, target)."""
    nn, F = musa.nn, musa.nn.functional

    def lstm_lm():
        class M(nn.Module):
            def __init__(s):
                super().__init__()
                s.emb, s.out = nn.Embedding(1000, 128), nn.Linear(256, 1000)
                s.rnn = nn.LSTM(128, 256, num_layers=2, batch_first=True)

            def forward(s, x):
                return s.out(s.rnn(s.emb(x))[0])
        return M(), (musa.randint(0, 1000, (16, 32)),), musa.randint(0, 1000, (16, 32))

    def gru():
        class M(nn.Module):
            def __init__(s):
                super().__init__()
                s.rnn, s.out = nn.GRU(32, 128, num_layers=2, batch_first=True), nn.Linear(128, 10)

            def forward(s, x):
                return s.out(s.rnn(x)[0][:, -1])
        return M(), (musa.randn(16, 40, 32),), musa.randint(0, 10, (16,))

    def bilstm():
        class M(nn.Module):
            def __init__(s):
                super().__init__()
                s.emb, s.out = nn.Embedding(500, 64), nn.Linear(128, 9)
                s.rnn = nn.LSTM(64, 64, bidirectional=True, batch_first=True)

            def forward(s, x):
                return s.out(s.rnn(s.emb(x))[0])
        return M(), (musa.randint(0, 500, (16, 30)),), musa.randint(0, 9, (16, 30))

    def transformer():
        class M(nn.Module):
            def __init__(s):
                super().__init__()
                s.emb, s.out = nn.Embedding(200, 64), nn.Linear(64, 200)
                s.t = nn.Transformer(64, 4, 2, 2, 128, dropout=0.1, batch_first=True)

            def forward(s, x):
                mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
                return s.out(s.t(s.emb(x), s.emb(x), tgt_mask=mask))
        return M(), (musa.randint(0, 200, (8, 24)),), musa.randint(0, 200, (8, 24))

    def encoder():
        class M(nn.Module):
            def __init__(s):
                super().__init__()
                s.emb, s.out = nn.Embedding(1000, 128), nn.Linear(128, 1000)
                s.enc = nn.TransformerEncoder(
                    nn.TransformerEncoderLayer(128, 4, 512, dropout=0.0, batch_first=True), 2)

            def forward(s, x):
                return s.out(s.enc(s.emb(x)))
        return M(), (musa.randint(0, 1000, (8, 64)),), musa.randint(0, 1000, (8, 64))

    def vit():
        class M(nn.Module):
            def __init__(s):
                super().__init__()
                s.patch, s.head = nn.Conv2d(3, 96, 4, stride=4), nn.Linear(96, 10)
                s.pos = nn.Parameter(musa.zeros(1, 64, 96))
                s.blocks = nn.ModuleList([nn.TransformerEncoderLayer(
                    96, 3, 384, dropout=0.0, batch_first=True, norm_first=True,
                    activation="gelu") for _ in range(2)])

            def forward(s, x):
                h = s.patch(x).flatten(2).transpose(1, 2) + s.pos
                for b in s.blocks:
                    h = b(h)
                return s.head(h.mean(1))
        return M(), (musa.randn(16, 3, 32, 32),), musa.randint(0, 10, (16,))

    def mobilenet():
        def blk(i, o, st):
            return nn.Sequential(nn.Conv2d(i, i, 3, st, 1, groups=i, bias=False), nn.BatchNorm2d(i),
                                 nn.ReLU6(), nn.Conv2d(i, o, 1, bias=False), nn.BatchNorm2d(o),
                                 nn.ReLU6())
        net = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1), nn.BatchNorm2d(32), nn.ReLU6(),
                            blk(32, 64, 1), blk(64, 128, 2), blk(128, 128, 1), blk(128, 256, 2),
                            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 10))
        return net, (musa.randn(32, 3, 64, 64),), musa.randint(0, 10, (32,))

    def conv1d():
        net = nn.Sequential(nn.Conv1d(1, 32, 9, padding=4), nn.ReLU(), nn.MaxPool1d(4),
                            nn.Conv1d(32, 64, 9, padding=4), nn.ReLU(), nn.MaxPool1d(4),
                            nn.Conv1d(64, 64, 9, padding=4), nn.ReLU(), nn.AdaptiveMaxPool1d(1),
                            nn.Flatten(), nn.Linear(64, 12))
        return net, (musa.randn(32, 1, 4000),), musa.randint(0, 12, (32,))

    def mixer():
        class Block(nn.Module):
            def __init__(s, t, c):
                super().__init__()
                s.n1, s.n2 = nn.LayerNorm(c), nn.LayerNorm(c)
                s.t = nn.Sequential(nn.Linear(t, 2 * t), nn.GELU(), nn.Linear(2 * t, t))
                s.c = nn.Sequential(nn.Linear(c, 4 * c), nn.GELU(), nn.Linear(4 * c, c))

            def forward(s, x):
                x = x + s.t(s.n1(x).transpose(1, 2)).transpose(1, 2)
                return x + s.c(s.n2(x))

        class M(nn.Module):
            def __init__(s):
                super().__init__()
                s.p, s.h = nn.Conv2d(3, 128, 4, 4), nn.Linear(128, 10)
                s.b = nn.Sequential(*[Block(64, 128) for _ in range(4)])

            def forward(s, x):
                return s.h(s.b(s.p(x).flatten(2).transpose(1, 2)).mean(1))
        return M(), (musa.randn(32, 3, 32, 32),), musa.randint(0, 10, (32,))

    def vae():
        class M(nn.Module):
            def __init__(s):
                super().__init__()
                s.e, s.mu, s.lv = nn.Linear(784, 256), nn.Linear(256, 20), nn.Linear(256, 20)
                s.d1, s.d2 = nn.Linear(20, 256), nn.Linear(256, 784)

            def forward(s, x):
                h = F.relu(s.e(x))
                mu, lv = s.mu(h), s.lv(h)
                z = mu + musa.exp(0.5 * lv) * 0.5
                return musa.sigmoid(s.d2(F.relu(s.d1(z)))), mu, lv
        return M(), (musa.rand(64, 784),), None

    return {
        "lstm-lm": (lstm_lm, "LSTM LM (2 layers, hidden 256, 32 steps, batch 16, vocab 1000)"),
        "gru": (gru, "GRU classifier (2 layers, hidden 128, 40 steps, batch 16)"),
        "bilstm": (bilstm, "bidirectional LSTM tagger (hidden 64, 30 steps, batch 16)"),
        "transformer": (transformer, "nn.Transformer (d 64, 2+2 layers, T 24, batch 8)"),
        "encoder": (encoder, "transformer encoder LM (2 layers, d 128, T 64, batch 8)"),
        "vit": (vit, "ViT (2 blocks, d 96, 16 images 32x32)"),
        "mobilenet": (mobilenet, "MobileNet-style (4 depthwise blocks, 32 images 64x64)"),
        "conv1d": (conv1d, "Conv1d audio net (32 clips of 4000 samples)"),
        "mixer": (mixer, "MLP-Mixer (4 blocks, 32 images 32x32)"),
        "vae": (vae, "VAE (784-256-20, batch 64)"),
    }


def child(name, mode):
    import musa
    musa.set_num_threads(2)
    F = musa.nn.functional
    musa.manual_seed(0)
    net, args, y = models(musa)[name][0]()
    opt = musa.optim.Adam(net.parameters(), lr=1e-3)

    def step(*a):
        opt.zero_grad()
        out = net(*a)
        if y is None:  # the VAE: reconstruction and KL terms
            rec, mu, lv = out
            loss = (F.binary_cross_entropy(rec, a[0], reduction="sum")
                    - 0.5 * musa.sum(1 + lv - mu * mu - lv.exp()))
        else:
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        return loss.detach()

    if mode == "static":
        step = musa.jit(step)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    losses, times = [], []
    for _ in range(STEPS):
        t0 = time.perf_counter()
        losses.append(float(step(*args)))
        times.append(time.perf_counter() - t0)
    rss = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) * 1024
    print("RESULT " + json.dumps(dict(step=statistics.median(times[WARMUP:]), rss=rss,
                                      losses=losses)))


def spawn(name, mode):
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name, mode],
                         capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=PYPATH))
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    if not line:
        return None, (out.stderr.strip().splitlines() or ["no output"])[-1]
    return json.loads(line[0][7:]), None


def main(argv):
    sys.path.insert(0, PYPATH)
    import musa
    table = models(musa)
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--models", default=",".join(table))
    a = p.parse_args(argv)
    names = [n for n in a.models.split(",") if n]
    bad = [n for n in names if n not in table]
    if bad or a.rounds < 1:
        p.error(f"unknown models {bad} (known: {', '.join(table)})" if bad else "--rounds >= 1")
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} "
          f"cores; 2 threads; Adam; {STEPS} steps, median after {WARMUP}; {a.rounds} rounds")
    res = {(n, m): [] for n in names for m in ("dynamic", "static")}
    for r in range(a.rounds):
        rows = list(res)
        rows = rows[r % len(rows):] + rows[:r % len(rows)]
        for n, m in rows:
            got, why = spawn(n, m)
            if got is None:
                print(f"round {r + 1}: {n} {m} failed: {why}")
            else:
                res[(n, m)].append(got)
    print(f"\n{'model':<66} {'dynamic ms':>10} {'static ms':>10} {'speed':>6} "
          f"{'dyn RSS MiB':>11} {'st RSS MiB':>10} {'RSS':>5}  losses")
    for n in names:
        d, s = res[(n, "dynamic")], res[(n, "static")]
        if not d or not s:
            print(f"{table[n][1]:<66} (failed)")
            continue
        dt, st = (statistics.median(x["step"] for x in v) * 1e3 for v in (d, s))
        dr, sr = (statistics.median(x["rss"] for x in v) / 2 ** 20 for v in (d, s))
        same = all(x["losses"] == d[0]["losses"] for x in d + s)
        print(f"{table[n][1]:<66} {dt:10.2f} {st:10.2f} {dt / st:6.2f} {dr:11.1f} {sr:10.1f} "
              f"{sr / dr:5.2f}  {'equal' if same else 'DIFFER'}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
    else:
        main(sys.argv[1:])
