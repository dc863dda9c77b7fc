"""musa.amp.GradScaler: the documented algorithm step by step (skips exactly
the steps with an inf, the scale sequence of backoff and growth), the
unscale_ + clip recipe, errors, state_dict, and a compiled step (the skip
a select inside the plan) equal to the eager one."""
import math

import numpy as np
import pytest

import musa
import musa.nn as nn
import musa.nn.functional as F


def reference_scales(init, growth, backoff, interval, bad_steps, n):
    """PyTorch's documented update rule, in plain Python."""
    scale, tracker, out = init, 0, []
    for i in range(n):
        if i in bad_steps:
            scale, tracker = scale * backoff, 0
        else:
            tracker += 1
            if tracker == interval:
                scale, tracker = scale * growth, 0
        out.append(scale)
    return out


def model_and_data():
    musa.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    x, y = musa.randn(16, 6), musa.randint(0, 3, (16,))
    return model, x, y


def make_step(model, opt, scaler, x, y):
    def step(poison):
        opt.zero_grad()
        with musa.amp.autocast():
            loss = F.cross_entropy(model(x), y) * poison
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss.detach()
    return step


BAD = {2, 3, 7}


@pytest.mark.parametrize("opt_name", ["sgd", "adam"])
def test_skips_exactly_the_bad_steps_and_follows_the_scale_rule(opt_name):
    model, x, y = model_and_data()
    opt = (musa.optim.SGD(model.parameters(), lr=0.1, momentum=0.9) if opt_name == "sgd"
           else musa.optim.Adam(model.parameters(), lr=0.01))
    scaler = musa.amp.GradScaler(init_scale=1024.0, growth_factor=2.0, backoff_factor=0.5,
                                 growth_interval=3)
    step = make_step(model, opt, scaler, x, y)
    scales = []
    for i in range(10):
        before = [p.detach().clone() for p in model.parameters()]
        step(musa.tensor(math.inf if i in BAD else 1.0))
        after = list(model.parameters())
        unchanged = all(musa.equal(a, b) for a, b in zip(before, after))
        assert unchanged == (i in BAD), i
        scales.append(scaler.get_scale())
    assert scales == reference_scales(1024.0, 2.0, 0.5, 3, BAD, 10)
    assert scaler.state_dict()["_growth_tracker"] == 2  # steps 8, 9 were clean


def test_unscaled_gradients_equal_the_plain_ones_and_clipping_works():
    model, x, y = model_and_data()
    F.cross_entropy(model(x), y).backward()
    plain = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    opt = musa.optim.SGD(model.parameters(), lr=0.1)
    scaler = musa.amp.GradScaler(init_scale=256.0)
    scaler.scale(F.cross_entropy(model(x), y)).backward()
    scaler.unscale_(opt)
    for p, g in zip(model.parameters(), plain):
        assert np.allclose(p.grad.numpy(), g.numpy(), rtol=1e-6, atol=1e-9)
    total = nn.utils.clip_grad_norm_(model.parameters(), 0.01)  # the AMP recipe
    assert float(total) > 0.01
    assert nn.utils.clip_grad_norm_(model.parameters(), 1e9) <= 0.0101
    scaler.step(opt)  # does not unscale again
    scaler.update()
    assert scaler.get_scale() == 256.0


def test_misuse_is_refused():
    model, x, y = model_and_data()
    opt = musa.optim.SGD(model.parameters(), lr=0.1)
    scaler = musa.amp.GradScaler()
    with pytest.raises(RuntimeError, match="No inf checks were recorded"):
        scaler.update()
    scaler.scale(F.cross_entropy(model(x), y)).backward()
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match=r"unscale_\(\) has already been called"):
        scaler.unscale_(opt)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match=r"step\(\) has already been called"):
        scaler.step(opt)
    with pytest.raises(RuntimeError, match=r"unscale_\(\) is being called after step\(\)"):
        scaler.unscale_(opt)
    scaler.update()
    with pytest.raises(ValueError, match="takes tensors"):
        scaler.scale(3.0)
    for kw, msg in [({"init_scale": 0}, "init_scale must be > 0"),
                    ({"growth_factor": 1.0}, "growth_factor should be > 1"),
                    ({"backoff_factor": 1.5}, "backoff_factor should be < 1"),
                    ({"growth_interval": 0}, "growth_interval should be a positive integer")]:
        with pytest.raises(ValueError, match=msg):
            musa.amp.GradScaler(**kw)
    half = nn.Linear(2, 2).to(musa.float16)
    h_opt = musa.optim.SGD(half.parameters(), lr=0.1)
    half(musa.randn(3, 2).to(musa.float16)).float().sum().backward()
    with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients"):
        musa.amp.GradScaler().unscale_(h_opt)


def test_state_dict_round_trip_and_disabled_scaler():
    a = musa.amp.GradScaler(init_scale=8.0, growth_interval=5)
    a._growth_tracker.fill_(3)
    sd = a.state_dict()
    assert sd == {"scale": 8.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                  "growth_interval": 5, "_growth_tracker": 3}
    b = musa.amp.GradScaler()
    b.load_state_dict(sd)
    assert b.state_dict() == sd
    off = musa.amp.GradScaler(enabled=False)
    t = musa.ones(2)
    assert off.scale(t) is t and off.get_scale() == 1.0 and off.state_dict() == {}
    with pytest.raises(RuntimeError, match="state dict is empty"):
        b.load_state_dict({})


@pytest.mark.parametrize("opt_name", ["sgd", "adam"])
def test_compiled_step_with_skips_equals_eager(opt_name):
    def run(compiled):
        model, x, y = model_and_data()
        opt = (musa.optim.SGD(model.parameters(), lr=0.1, momentum=0.9) if opt_name == "sgd"
               else musa.optim.Adam(model.parameters(), lr=0.01))
        scaler = musa.amp.GradScaler(init_scale=1024.0, growth_interval=3)
        step = make_step(model, opt, scaler, x, y)
        if compiled:
            step = musa.jit(step)
        losses, scales = [], []
        for i in range(10):
            losses.append(float(step(musa.tensor(math.inf if i in BAD else 1.0))))
            scales.append(scaler.get_scale())
        return losses, scales, [p.detach().numpy() for p in model.parameters()], step

    l0, s0, p0, _ = run(False)
    l1, s1, p1, compiled = run(True)
    assert s0 == s1 == reference_scales(1024.0, 2.0, 0.5, 3, BAD, 10)
    assert l0 == l1
    for a, b in zip(p0, p1):
        assert np.array_equal(a, b)
    assert compiled.compiles <= 2  # one plan (two if state appeared after the first call)
    assert "on the host" not in compiled.get_graph()  # the skip is a select: no host read
