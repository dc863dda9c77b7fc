"""DataLoader throughput with 0, 1 and 2 worker processes on the digits set
with a per-sample transform (figures, no asserts).

Each sample is an 8x8 digit put through a transform typical of image
augmentation, done per sample in Python: a random shift (a 10x10 zero pad,
then an 8x8 crop), a random brightness scale, and normalisation; then the
same with the shift and scale applied 20 times (a heavier pipeline).
Batches of 64, one epoch per run, workers started per epoch or persistent,
rows alternating over rounds, medians; samples/s and the speedup over
num_workers=0.

    PYTHONPATH=python /usr/bin/python3 bench/bench_loader.py [--rounds 3]
"""
import argparse
import gzip
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

import musa  # noqa: E402
import musa.nn.functional as F  # noqa: E402
from musa.utils.data import DataLoader, Dataset  # noqa: E402

DATA = os.path.join(HERE, "..", "data", "digits.csv.gz")


class Digits(Dataset):
    def __init__(self, repeat=1):
        self.repeat = repeat  # times the transform runs per sample (a heavier pipeline)
        with gzip.open(DATA, "rt") as f:
            raw = np.loadtxt(f, delimiter=",", dtype=np.float32)
        self.x = musa.tensor(raw[:, :64].reshape(-1, 1, 8, 8) / 16.0)
        self.y = musa.tensor(raw[:, 64].astype(np.int64))

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        img = self.x[i]
        for _ in range(self.repeat):
            img = F.pad(img, (1, 1, 1, 1))  # (1, 10, 10)
            dy, dx = (int(v) for v in musa.randint(0, 3, (2,)))
            img = img[:, dy:dy + 8, dx:dx + 8] * (0.8 + 0.4 * float(musa.rand(1)))
        return (img - 0.5) / 0.5, self.y[i]


def epoch(ds, workers, loader=None):
    """Samples/s of one epoch (a new loader, workers started in it, unless
    a persistent loader is given)."""
    loader = loader or DataLoader(ds, batch_size=64, shuffle=True, num_workers=workers)
    t0 = time.perf_counter()
    n = 0
    for x, _ in loader:
        n += x.shape[0]
    return n / (time.perf_counter() - t0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    for repeat in (1, 20):
        table(Digits(repeat), a.rounds, repeat)


def table(ds, rounds, repeat):
    rows = [(0, False), (1, False), (2, False), (1, True), (2, True)]
    persistent = {w: DataLoader(ds, batch_size=64, shuffle=True, num_workers=w,
                                persistent_workers=True) for w in (1, 2)}
    for w in (1, 2):
        epoch(ds, w, persistent[w])  # start them
    res = {r: [] for r in rows}
    for r in range(rounds):
        for w, keep in rows if r % 2 == 0 else rows[::-1]:
            res[(w, keep)].append(epoch(ds, w, persistent[w] if keep else None))
    print(f"\nDataLoader on the digits ({len(ds)} samples, per-sample shift/scale/normalise "
          f"x{repeat}), batch 64, median of {rounds} epochs; {os.cpu_count()} CPUs")
    base = statistics.median(res[(0, False)])
    print(f"{'num_workers':>12s} {'workers':>22s} {'samples/s':>10s} {'speedup':>8s}")
    for w, keep in rows:
        m = statistics.median(res[(w, keep)])
        how = "-" if w == 0 else "persistent" if keep else "started per epoch"
        print(f"{w:12d} {how:>22s} {m:10.0f} {m / base:8.2f}")


if __name__ == "__main__":
    main()
