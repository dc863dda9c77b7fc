"""musa.amp.autocast: the seed snippet, the policy per op family, float32
gradients for float32 parameters, the parameter cache, nesting, threads,
backward inside a region, compiled regions, and training that tracks
float32."""
import re
import threading

import numpy as np
import pytest

import musa
import musa.nn as nn
import musa.nn.functional as F


def small_cnn():
    musa.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Flatten(), nn.Linear(8 * 8 * 8, 10))


def test_seed_snippet_as_written():
    model, loss_fn = small_cnn(), nn.CrossEntropyLoss()
    input, target = musa.randn(4, 1, 8, 8), musa.randint(0, 10, (4,))
    with musa.amp.autocast():
        output = model(input)
        loss = loss_fn(output, target)
    loss.backward()
    assert output.dtype == musa.bfloat16 and loss.dtype == musa.float32
    assert all(p.grad is not None and p.grad.dtype == musa.float32 for p in model.parameters())
    assert not musa.amp.is_autocast_enabled()
    assert hasattr(musa, "amp") and musa.autocast is musa.amp.autocast


@pytest.mark.parametrize("low", [musa.bfloat16, musa.float16])
def test_policy_per_op_family(low):
    a, b = musa.randn(3, 4), musa.randn(4, 5)
    x, w = musa.randn(2, 3, 6, 6), musa.randn(4, 3, 3, 3)
    lin_w = musa.randn(5, 4)
    with musa.amp.autocast(dtype=low):
        assert musa.amp.get_autocast_dtype() == low
        c = a @ b
        lowp = {"matmul": c, "linear": F.linear(a, lin_w), "conv2d": F.conv2d(x, w)}
        for name, t in lowp.items():
            assert t.dtype == low, name
        f32 = {"softmax": F.softmax(c, -1), "log_softmax": F.log_softmax(c, -1),
               "cross_entropy": F.cross_entropy(c, musa.tensor([0, 1, 2])),
               "exp": musa.exp(c), "log": musa.log(c.abs() + 1), "pow": c ** 2,
               "sum": c.sum(), "mean": c.mean(), "cumsum": c.cumsum(0)}
        for name, t in f32.items():
            assert t.dtype == musa.float32, name
        assert (c + a.sum(1, keepdim=True)).dtype == musa.float32  # mixed: promotes
        assert F.relu(c).dtype == low                              # as it comes
        assert (a.double() @ b.double()).dtype == musa.float64     # float64 stays
        for name, t in {"exp": musa.exp(a.double()), "sum": a.double().sum(),  # float32 ops too
                        "softmax": F.softmax(a.double(), -1)}.items():
            assert t.dtype == musa.float64, name
        assert (musa.ones(2, 2, dtype=musa.int64) @ musa.ones(2, 2, dtype=musa.int64)).dtype \
            == musa.int64
    assert (a @ b).dtype == musa.float32


def test_float32_gradients_match_float32_training_closely():
    x, y = musa.randn(8, 1, 8, 8), musa.randint(0, 10, (8,))
    m32, m16 = small_cnn(), small_cnn()
    F.cross_entropy(m32(x), y).backward()
    with musa.amp.autocast():
        loss = F.cross_entropy(m16(x), y)
    loss.backward()
    # against the gradients' overall scale: the conv bias before BatchNorm has
    # a float32 gradient of ~1e-8 (it cancels) that bfloat16 rounding cannot keep
    scale = max(np.abs(p.grad.numpy()).max() for p in m32.parameters())
    for p, q in zip(m32.parameters(), m16.parameters()):
        assert q.grad.dtype == musa.float32
        assert np.abs(p.grad.numpy() - q.grad.numpy()).max() <= 0.05 * scale


def test_backward_inside_the_region_equals_backward_outside():
    x, y = musa.randn(4, 1, 8, 8), musa.randint(0, 10, (4,))
    a, b = small_cnn(), small_cnn()
    with musa.amp.autocast():
        F.cross_entropy(a(x), y).backward()
    with musa.amp.autocast():
        loss = F.cross_entropy(b(x), y)
    loss.backward()
    for p, q in zip(a.parameters(), b.parameters()):
        assert np.array_equal(p.grad.numpy(), q.grad.numpy())


def test_a_parameter_is_cast_once_and_again_after_it_changes():
    lin = nn.Linear(4, 3)
    x = musa.randn(2, 4)
    with musa.amp.autocast():
        y1 = lin(x) + lin(x)       # one cast of the weight serves both calls
        (y1.float().sum()).backward()
        g_once = lin.weight.grad.clone()
        with musa.no_grad():
            lin.weight.mul_(2)     # a new version: the cache must not serve the old cast
        y2 = lin(x)
    with musa.no_grad():
        want = F.linear(x.to(musa.bfloat16), lin.weight.to(musa.bfloat16),
                        lin.bias.to(musa.bfloat16))
    assert np.array_equal(y2.detach().float().numpy(), want.float().numpy())
    xs = x.to(musa.bfloat16).float().numpy().sum(0)
    assert np.allclose(g_once.numpy(), 2 * np.tile(xs, (3, 1)), rtol=1e-2)


def test_regions_nest_restore_and_survive_exceptions():
    a = musa.randn(2, 2)
    with musa.amp.autocast():
        with musa.amp.autocast(enabled=False):
            assert (a @ a).dtype == musa.float32
        with musa.amp.autocast(dtype=musa.float16):
            assert (a @ a).dtype == musa.float16
        assert (a @ a).dtype == musa.bfloat16
        with pytest.raises(ZeroDivisionError):
            with musa.amp.autocast(enabled=False):
                1 / 0
        assert musa.amp.is_autocast_enabled()
    assert not musa.amp.is_autocast_enabled()

    @musa.amp.autocast()
    def f(t):
        return t @ t

    assert f(a).dtype == musa.bfloat16 and (a @ a).dtype == musa.float32


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match=r"\[autocast\] dtype must be musa.bfloat16 or "
                                         r"musa.float16"):
        musa.amp.autocast(dtype=musa.float64)
    with pytest.raises(TypeError, match=r"\[autocast\] enabled must be a bool"):
        musa.amp.autocast(enabled="yes")
    with pytest.warns(UserWarning, match="device_type 'cuda' is not available"):
        region = musa.amp.autocast("cuda")
    with region:
        assert not musa.amp.is_autocast_enabled()


def test_autocast_is_per_thread():
    seen = []
    with musa.amp.autocast():
        t = threading.Thread(target=lambda: seen.append(
            (musa.amp.is_autocast_enabled(), (musa.ones(2, 2) @ musa.ones(2, 2)).dtype)))
        t.start()
        t.join()
    assert seen == [(False, musa.float32)]


def test_compiled_regions_equal_eager_and_recompile_on_toggle():
    model = small_cnn()
    model.eval()
    x = musa.randn(2, 1, 8, 8)

    def f(x):
        with musa.amp.autocast():
            return F.softmax(model(x), -1)

    def g(x):
        return model(x)

    with musa.no_grad():
        want = f(x)
        got = musa.jit(f)(x)
        assert got.dtype == want.dtype == musa.float32
        assert np.array_equal(got.numpy(), want.numpy())
        cg = musa.jit(g)
        plain = cg(x)
        with musa.amp.autocast():
            mixed = cg(x)
        assert plain.dtype == musa.float32 and mixed.dtype == musa.bfloat16
        assert any("autocast changed" in line for line in cg.recompile_log)


def amp_step(model, opt):
    """A training step with the forward and loss under autocast."""
    def step(x, y):
        opt.zero_grad()
        with musa.amp.autocast():
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    return step


def test_compiled_training_step_under_autocast_equals_eager():
    def run(compiled):
        model = small_cnn()
        opt = musa.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        x, y = musa.randn(8, 1, 8, 8), musa.randint(0, 10, (8,))
        step = amp_step(model, opt)
        if compiled:
            step = musa.jit(step)
        musa.manual_seed(1)
        return [float(step(x, y)) for _ in range(4)]

    assert run(False) == run(True)


def test_compiled_step_casts_each_weight_once():
    # the backward reads the bfloat16 weights the forward cast (as eager's
    # autocast cache does); recomputing them there would cast twice a step
    layers = []
    for _ in range(6):
        layers += [nn.Linear(32, 32), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(32, 10))
    opt = musa.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = musa.randn(16, 32), musa.randint(0, 10, (16,))
    step = musa.jit(amp_step(model, opt))
    step(x, y)
    text = str(step.get_graph())
    params = set(re.findall(r"^\s*(%\d+) = param", text, re.M))
    casts = [v for v in re.findall(r"= cast\((%\d+), dtype=bfloat16\)", text) if v in params]
    counts = {p: casts.count(p) for p in set(casts)}
    assert len(counts) == 14 and set(counts.values()) == {1}, counts  # 7 weights, 7 biases


def test_fifty_steps_under_autocast_track_float32():
    rng = np.random.default_rng(0)
    xs = musa.tensor(rng.standard_normal((64, 1, 8, 8)).astype(np.float32))
    ys = musa.tensor(rng.integers(0, 10, 64))

    def train(amp):
        model = small_cnn()
        opt = musa.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        losses = []
        for _ in range(50):
            opt.zero_grad()
            with musa.amp.autocast(enabled=amp):
                loss = F.cross_entropy(model(xs), ys)
            loss.backward()
            opt.step()
            losses.append(float(loss))
        return np.array(losses)

    l32, l16 = train(False), train(True)
    assert l16[-1] < 0.5 * l16[0]                      # it trains
    assert np.abs(l16 - l32).max() <= 0.05 * l32[0]    # along the float32 curve


def test_digits_demo_under_amp_is_within_one_point_of_float32():
    import os
    import subprocess
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    demo = os.path.join(here, "..", "..", "examples", "train_digits.py")
    out = subprocess.run([sys.executable, demo, "--amp"], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=os.path.join(here, "..", "..", "python")))
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    gaps = [line for line in out.stdout.splitlines() if "points below the float32 cnn" in line]
    assert len(gaps) == 2 and all(line.endswith("(ok)") for line in gaps), gaps


def test_cuda_amp_names_run_disabled_without_cuda():
    """torch.cuda.amp code (GradScaler + autocast) trains on the CPU in
    float32, as PyTorch does where CUDA is unavailable."""
    import warnings
    lin = musa.nn.Linear(2, 1)
    opt = musa.optim.SGD(lin.parameters(), lr=0.1)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        scaler = musa.cuda.amp.GradScaler()
        with musa.cuda.amp.autocast():
            loss = lin(musa.ones(3, 2)).sum()
    assert [str(x.message).split(",")[0] for x in w] == [
        "musa.cuda.amp.GradScaler is enabled", "musa.amp.autocast: device_type 'cuda' is not "
        "available; autocast is off in this region"]
    assert loss.dtype is musa.float32 and not scaler.is_enabled() and scaler.get_scale() == 1.0
    w0 = lin.weight.detach().clone()
    scaled = scaler.scale(loss)
    assert scaled is loss
    scaled.backward()
    scaler.step(opt)
    scaler.update()
    assert musa.allclose(lin.weight, w0 - 0.1 * 3)  # d(sum)/dw = 3 per weight
    fwd = musa.cuda.amp.custom_fwd(cast_inputs=musa.float32)(lambda ctx, x: x)
    assert fwd(None, 5) == 5 and musa.cuda.amp.custom_bwd(fwd) is fwd
