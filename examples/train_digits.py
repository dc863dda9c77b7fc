"""Train an MLP and a small CNN on the handwritten digits (data/digits.csv.gz)
with musa's eager mode (nn modules, autograd, Adam/SGD, a DataLoader), then
the same CNN in static mode: each training step one plan compiled by musa.jit.

    PYTHONPATH=python /usr/bin/python3 examples/train_digits.py [--amp]

Prints one progress line per epoch and the held-out accuracy of each model
(each reaches at least 95 %); exits non-zero if one does not. With --amp the
CNN is also trained under musa.amp.autocast (bfloat16 convolutions and
linear layers, float32 parameters and loss), eagerly and compiled, and each
must come within 1 point of the float32 CNN's accuracy.
"""
import gzip
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import musa  # noqa: E402
import musa.nn as nn  # noqa: E402
import musa.nn.functional as F  # noqa: E402
from musa.utils.data import DataLoader, TensorDataset  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "digits.csv.gz")


def load_digits():
    """Pixels scaled to [0, 1] (N, 64) float32, labels (N,) int64; a fixed
    80/20 train/test split."""
    with gzip.open(DATA, "rt") as f:
        raw = np.loadtxt(f, delimiter=",", dtype=np.float32)
    x, y = raw[:, :64] / 16.0, raw[:, 64].astype(np.int64)
    order = np.random.RandomState(0).permutation(len(x))
    cut = int(0.8 * len(x))
    tr, te = order[:cut], order[cut:]
    return musa.tensor(x[tr]), musa.tensor(y[tr]), musa.tensor(x[te]), musa.tensor(y[te])


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))

    def forward(self, x):
        return self.net(x)


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(32)
        self.fc = nn.Linear(32 * 2 * 2, 10)

    def forward(self, x):
        x = x.reshape(-1, 1, 8, 8)
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)  # 4x4
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)  # 2x2
        return self.fc(x.flatten(1))


def accuracy(model, x, y):
    model.eval()
    with musa.no_grad():
        pred = model(x).argmax(1)
    model.train()
    return (pred == y).float().mean().item()


def train(name, model, opt, xtr, ytr, xte, yte, epochs, static=False, amp=False):
    """Train with the DataLoader; static: the whole step (forward, loss,
    backward, optimizer step) compiled by musa.jit into one plan; amp: the
    forward and loss under musa.amp.autocast (bfloat16)."""
    loader = DataLoader(TensorDataset(xtr, ytr), batch_size=64, shuffle=True)

    def step(xb, yb):
        opt.zero_grad()
        with musa.amp.autocast(enabled=amp):
            loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        return loss.detach()

    if static:
        step = musa.jit(step)
    t0 = time.perf_counter()
    for epoch in range(1, epochs + 1):
        total, n = 0.0, 0
        for xb, yb in loader:
            loss = step(xb, yb)
            total += loss.item() * len(xb)
            n += len(xb)
        print(f"{name} epoch {epoch:2d}  loss {total / n:.4f}  held-out accuracy {accuracy(model, xte, yte):.3f}"
              f"  ({time.perf_counter() - t0:.1f} s)")
    return accuracy(model, xte, yte)


def main():
    amp = "--amp" in sys.argv[1:]
    musa.manual_seed(0)
    xtr, ytr, xte, yte = load_digits()
    print(f"digits: {len(xtr)} training and {len(xte)} held-out samples")
    results = {
        "mlp": train("mlp", m := MLP(), musa.optim.Adam(m.parameters(), lr=1e-3), xtr, ytr, xte, yte, 15),
        "cnn": train("cnn", c := SmallCNN(), musa.optim.SGD(c.parameters(), lr=0.05, momentum=0.9), xtr, ytr, xte,
                     yte, 10),
    }
    # the same CNN, trained in static mode: each step one compiled plan
    musa.manual_seed(0)
    s = SmallCNN()
    results["cnn (static)"] = train("cnn (static)", s, musa.optim.SGD(s.parameters(), lr=0.05, momentum=0.9),
                                    xtr, ytr, xte, yte, 10, static=True)
    if amp:  # the same CNN under autocast, eager and compiled
        for static in (False, True):
            musa.manual_seed(0)
            a = SmallCNN()
            name = f"cnn (amp{', static' if static else ''})"
            results[name] = train(name, a, musa.optim.SGD(a.parameters(), lr=0.05, momentum=0.9),
                                  xtr, ytr, xte, yte, 10, static=static, amp=True)
    ok = True
    for name, acc in results.items():
        print(f"{name}: held-out accuracy {acc:.3f} ({'ok' if acc >= 0.95 else 'below 0.95'})")
        ok = ok and acc >= 0.95
        if "amp" in name:
            gap = results["cnn"] - acc
            print(f"{name}: {100 * gap:+.1f} points below the float32 cnn "
                  f"({'ok' if gap <= 0.01 else 'more than 1 point'})")
            ok = ok and gap <= 0.01
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
