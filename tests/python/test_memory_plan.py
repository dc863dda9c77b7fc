"""memory_plan(): the peak a compiled step needs, predicted from its plan
and compared with the allocator's measured peak; max_batch(): the largest
dynamic size whose predicted peak fits a budget."""
import pytest

import musa
import musa.nn as nn
import musa.nn.functional as F


def make_step(net, dynamic=None):
    opt = musa.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    return musa.jit(step, dynamic=dynamic)


def measured_peak(step, x, y):
    for _ in range(2):
        step(x, y)  # capture, then a first planned run (the plan's block is made)
    musa.reset_peak_memory_stats()
    loss = step(x, y)
    del loss
    return musa.memory_stats()["peak_bytes"]


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.c2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 4 * 4, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.b1(self.c1(x))), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.fc(x.flatten(1))


MEASURE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import musa, musa.nn as nn
from test_memory_plan import Cnn, make_step, measured_peak
musa.manual_seed(0)
if sys.argv[2] == "mlp":
    net = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                        nn.Linear(256, 10))
    x = musa.randn(128, 64)
else:
    net = Cnn()
    x = musa.randn(16, 3, 16, 16)
y = musa.randint(0, 10, (x.shape[0],))
step = make_step(net)
peak = measured_peak(step, x, y)
mp = step.memory_plan()
print(json.dumps({"peak": peak, "predicted": mp["peak_bytes"], "parts": mp["parts"],
                  "param": any(k == "parameter" for k, _w, _b in mp["tensors"]),
                  "largest": mp["largest_intermediates"][0]}))
"""


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_predicted_peak_within_5_percent_of_measured(kind):
    # in a process of its own: the allocator's peak counts every live tensor
    import json
    import os
    import subprocess
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.path.join(here, "..", "..", "python"))
    out = subprocess.run([sys.executable, "-c", MEASURE, here, kind], capture_output=True,
                         text=True, env=env)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["predicted"] == sum(r["parts"].values())
    assert abs(r["predicted"] - r["peak"]) <= 0.05 * r["peak"], r
    # it names what makes it up: the parameters, and the largest intermediate's op and line
    assert r["param"] and r["largest"]["op"]
    assert "test_memory_plan.py" in (r["largest"]["loc"] or "")


def test_max_batch_fits_the_budget_and_one_more_does_not():
    net = nn.Sequential(nn.Linear(32, 512), nn.ReLU(), nn.Linear(512, 10))
    step = make_step(net, dynamic={"x": {0: (1, 512)}, "y": {0: (1, 512)}})
    step(musa.randn(16, 32), musa.randint(0, 10, (16,)))
    step(musa.randn(16, 32), musa.randint(0, 10, (16,)))

    def predicted(b):
        s = make_step(net)
        s(musa.randn(b, 32), musa.randint(0, 10, (b,)))
        return s.memory_plan()["peak_bytes"]

    budget = (predicted(100) + predicted(101)) // 2
    best = step.max_batch(budget)
    assert best is not None and predicted(best) <= budget < predicted(best + 1)
    assert step.max_batch(10) is None                 # not even one sample
    assert step.max_batch(1 << 40) == 512             # the whole declared range fits
    with pytest.raises(RuntimeError, match="no variant with dynamic dims"):
        s = make_step(net)
        s(musa.randn(4, 32), musa.randint(0, 10, (4,)))
        s.max_batch(1 << 30)
