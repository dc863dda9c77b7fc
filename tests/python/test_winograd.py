"""musa.Config(winograd=True): compiled float32 convolutions of 64 channels
or more, 3x3 and stride 1, run oneDNN's Winograd primitive where its
workspace fits in the plan's arena (pass "winograd" marks them, the planner
keeps those whose workspace finds a gap); results then differ from eager's
in rounding only. The kernel-level checks are in tests/c/ops/nn.c
(conv2d_winograd)."""
import numpy as np
import pytest

import musa
import musa.nn as nn
import musa.nn.functional as F
from test_channels_last import arr, make_step

LAYERS = 8


class Net(nn.Module):
    """A 3-channel stem (not Winograd's), then LAYERS 64-channel conv-bn-relu."""

    def __init__(self, c=64):
        super().__init__()
        self.c0 = nn.Conv2d(3, c, 3, padding=1, bias=False)
        self.cs = nn.ModuleList([nn.Conv2d(c, c, 3, padding=1, bias=False) for _ in range(LAYERS)])
        self.bs = nn.ModuleList([nn.BatchNorm2d(c) for _ in range(LAYERS)])
        self.fc = nn.Linear(c, 10)

    def forward(self, x):
        x = F.relu(self.c0(x))
        for conv, bn in zip(self.cs, self.bs):
            x = F.relu(bn(conv(x)))
        return self.fc(F.adaptive_avg_pool2d(x, 1).reshape(x.shape[0], -1))


def train(config, steps=3):
    musa.manual_seed(0)
    net = Net()
    step = make_step(net)
    if config is not None:
        step = musa.jit(step, config=config)
    musa.manual_seed(1)
    data = [(musa.randn(8, 3, 32, 32), musa.randint(0, 10, (8,))) for _ in range(2)]
    losses = [float(step(*data[i % 2])) for i in range(steps)]
    return losses, net, step


def test_compiled_step_tracks_eager_in_the_same_memory():
    eager_losses, eager_net, _ = train(None)
    losses, net, step = train(musa.Config(winograd=True))
    _, _, direct = train(musa.Config(), steps=1)
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5)
    for (name, a), (_, b) in zip(eager_net.state_dict().items(), net.state_dict().items()):
        if a.dtype.is_floating_point:
            np.testing.assert_allclose(arr(b), arr(a), rtol=1e-3, atol=1e-4, err_msg=name)
    # the 64-channel convolutions and both their backward products are
    # marked; the stem (3 channels in) is not
    assert step.get_graph().count("winograd=true") == 3 * LAYERS
    plan, plain = step.memory_plan(), direct.memory_plan()
    # some run Winograd (those whose workspace fits), and the plan's block
    # is what the direct primitives need
    assert 0 < plan["winograd"] <= 3 * LAYERS
    assert step.plan_text().count("(winograd)") == plan["winograd"]
    assert plan["held_bytes"] == plain["held_bytes"]
    assert plain["winograd"] == 0
    # another algorithm ran: not eager's bits
    assert any(not np.array_equal(arr(a), arr(b))
               for a, b in zip(eager_net.parameters(), net.parameters()))


def test_default_and_disabled_pass_keep_eager_bits():
    eager_losses, _, _ = train(None, steps=2)
    for cfg in (musa.Config(), musa.Config(winograd=True, disable_passes=("winograd",))):
        losses, _, step = train(cfg, steps=2)
        assert losses == eager_losses
        assert "winograd=true" not in step.get_graph()
        assert step.memory_plan()["winograd"] == 0
    assert "winograd=True" in repr(musa.Config(winograd=True))


def test_saved_model_keeps_the_option(tmp_path):
    musa.manual_seed(0)
    net = Net().eval()
    x = musa.randn(2, 3, 16, 16)
    with musa.no_grad():
        traced = musa.jit.trace(net, (x,), config=musa.Config(winograd=True))
        want, eager = traced(x), net(x)
    assert traced.get_graph().count("winograd=true") == LAYERS
    traced.save(tmp_path / "w.musa")
    loaded = musa.jit.load(tmp_path / "w.musa")
    assert loaded.header()["config"]["winograd"] is True
    # the loader plans it the same way: the traced plan's bits
    assert np.array_equal(arr(loaded(x)), arr(want))
    np.testing.assert_allclose(arr(want), arr(eager), rtol=1e-4, atol=1e-5)
    # a model saved without the option has no such key
    with musa.no_grad():
        musa.jit.trace(net, (x,)).save(tmp_path / "d.musa")
    assert "winograd" not in musa.jit.load(tmp_path / "d.musa").header()["config"]


def test_a_memory_budget_gives_winograd_its_room():
    _, _, fit = train(musa.Config(winograd=True), steps=1)
    plan = fit.memory_plan()
    assert plan["winograd_direct"] == 3 * LAYERS - plan["winograd"] > 0
    # a budget at the plan's own peak leaves no room: the same plan
    _, _, same = train(musa.Config(winograd=True, memory_budget=plan["peak_bytes"]), steps=1)
    assert same.memory_plan()["winograd"] == plan["winograd"]
    assert same.memory_plan()["held_bytes"] == plan["held_bytes"]
    # room for every workspace: all run Winograd, and the peak stays within it
    budget = plan["peak_bytes"] + (256 << 20)
    losses, net, roomy = train(musa.Config(winograd=True, memory_budget=budget), steps=2)
    big = roomy.memory_plan()
    assert big["winograd"] == 3 * LAYERS and big["winograd_direct"] == 0
    assert plan["held_bytes"] < big["held_bytes"] and big["peak_bytes"] <= budget
    eager_losses, _, _ = train(None, steps=2)
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5)
