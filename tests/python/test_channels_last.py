"""musa.Config(channels_last=True): compiled convolution chains keep their
activations NHWC inside the plan (pass "channels_last"); the batch norm
kernels' rows form it relies on (also BatchNorm1d's); and the small-GEMM
and negative-padding changes that came with it."""
import numpy as np
import pytest

import musa
import musa.nn as nn
import musa.nn.functional as F


class Block(nn.Module):
    """conv-bn-relu, a strided 1x1 shortcut (oneDNN with negative right
    padding), a residual add, pooling and a linear head."""

    def __init__(self, c=16):
        super().__init__()
        self.c0, self.b0 = nn.Conv2d(3, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.c1, self.b1 = nn.Conv2d(c, 2 * c, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(2 * c)
        self.c2, self.b2 = nn.Conv2d(2 * c, 2 * c, 3, padding=1, bias=False), nn.BatchNorm2d(2 * c)
        self.sc, self.bs = nn.Conv2d(c, 2 * c, 1, stride=2, bias=False), nn.BatchNorm2d(2 * c)
        self.fc = nn.Linear(2 * c, 10)

    def forward(self, x):
        x = F.relu(self.b0(self.c0(x)))
        y = F.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y)) + self.bs(self.sc(x))
        y = F.adaptive_avg_pool2d(F.relu(y), 1).reshape(x.shape[0], -1)
        return self.fc(y)


def make_step(net, amp=False):
    opt = musa.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        if amp:
            with musa.amp.autocast():
                loss = F.cross_entropy(net(x), y)
        else:
            loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    return step


def arr(t):
    return np.asarray(t.detach().to(musa.float64).numpy())


def train(config, amp=False, steps=4):
    musa.manual_seed(0)
    net = Block()
    step = make_step(net, amp)
    if config is not None:
        step = musa.jit(step, config=config)
    musa.manual_seed(1)
    data = [(musa.randn(8, 3, 12, 12), musa.randint(0, 10, (8,))) for _ in range(2)]
    losses = [float(step(*data[i % 2])) for i in range(steps)]
    return losses, net, step


@pytest.mark.parametrize("amp", [False, True], ids=["float32", "bfloat16_autocast"])
def test_compiled_step_tracks_eager(amp):
    eager_losses, eager_net, _ = train(None, amp)
    cl_losses, cl_net, step = train(musa.Config(channels_last=True), amp)
    tol = 3e-2 if amp else 1e-4
    np.testing.assert_allclose(cl_losses, eager_losses, rtol=tol)
    for (name, a), (_, b) in zip(eager_net.state_dict().items(), cl_net.state_dict().items()):
        if a.dtype.is_floating_point:
            np.testing.assert_allclose(arr(b), arr(a), rtol=tol, atol=tol, err_msg=name)
    g = step.get_graph()
    # every convolution and its two backward products went NHWC: 4 + 4 + 3
    # (the first convolution's input needs no gradient)
    assert g.count("channels_last=true") == 11
    # NHWC only at the edges: the input (under autocast its cast is recomputed
    # for the weight gradient, and permuted again), the pooling, its gradient
    assert g.count("permute(") == (4 if amp else 3)


def test_default_stays_bitwise_and_nchw():
    eager_losses, _, _ = train(None)
    losses, _, step = train(musa.Config())
    assert losses == eager_losses
    assert "channels_last=true" not in step.get_graph()


def test_disabled_by_name_and_repr():
    cfg = musa.Config(channels_last=True, disable_passes=("channels_last",))
    _, _, step = train(cfg, steps=1)
    assert "channels_last=true" not in step.get_graph()
    assert "channels_last=True" in repr(musa.Config(channels_last=True))


def test_graph_outputs_and_non_conv_readers_see_nchw():
    """A conv's output returned and read by a non-elementwise op (a sum over
    channels) keeps NCHW meaning."""
    conv = nn.Conv2d(4, 6, 3, padding=1)
    x = musa.randn(2, 4, 5, 7)

    def f(x):
        y = F.relu(conv(x))
        return y, y.sum(1), y[:, 2]

    want = f(x)
    got = musa.jit(f, config=musa.Config(channels_last=True))(x)
    for a, b in zip(want, got):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(arr(b), arr(a), rtol=1e-5, atol=1e-5)


def test_saved_model_keeps_the_option(tmp_path):
    musa.manual_seed(0)
    net = Block().eval()
    x = musa.randn(2, 3, 12, 12)
    with musa.no_grad():
        traced = musa.jit.trace(net, (x,), config=musa.Config(channels_last=True))
        want, eager = traced(x), net(x)
    assert traced.get_graph().count("channels_last=true") == 4
    traced.save(tmp_path / "cl.musa")
    loaded = musa.jit.load(tmp_path / "cl.musa")
    assert loaded.header()["config"]["channels_last"] is True
    # the loader plans it the same way: the traced plan's bits
    assert np.array_equal(arr(loaded(x)), arr(want))
    np.testing.assert_allclose(arr(want), arr(eager), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype,tol", [(musa.float32, 1e-4), (musa.float64, 1e-10),
                                       (musa.bfloat16, 5e-2)], ids=["float32", "float64", "bf16"])
@pytest.mark.parametrize("m,c", [(300, 7), (1, 5), (0, 3), (4096, 64)])
def test_batchnorm_over_rows_matches_float64(dtype, tol, m, c):
    """BatchNorm1d's (M, C) input runs the rows form: forward, running
    statistics and backward against a float64 computation."""
    musa.manual_seed(3)
    x64 = musa.randn(m, c, dtype=musa.float64) * 3 + 1
    w64, b64 = musa.rand(c, dtype=musa.float64) + 0.5, musa.randn(c, dtype=musa.float64)
    gy64 = musa.randn(m, c, dtype=musa.float64)
    xs = x64.to(dtype).requires_grad_()
    w, b = w64.to(dtype).requires_grad_(), b64.to(dtype).requires_grad_()
    rm, rv = musa.zeros(c, dtype=dtype), musa.ones(c, dtype=dtype)
    if m == 1:
        with pytest.raises(ValueError):
            F.batch_norm(xs, rm, rv, w, b, training=True)
        return
    y = F.batch_norm(xs, rm, rv, w, b, training=True, momentum=0.1, eps=1e-5)
    y.backward(gy64.to(dtype))
    X, G = arr(x64), arr(gy64)
    if m == 0:
        assert tuple(y.shape) == (0, c) and tuple(xs.grad.shape) == (0, c)
        return
    mean, var = X.mean(0), X.var(0)
    xhat = (X - mean) / np.sqrt(var + 1e-5)
    np.testing.assert_allclose(arr(y), xhat * arr(w64) + arr(b64), rtol=tol, atol=tol)
    np.testing.assert_allclose(arr(rm), 0.1 * mean, rtol=tol, atol=tol)
    np.testing.assert_allclose(arr(rv), 0.9 + 0.1 * X.var(0, ddof=1), rtol=tol, atol=tol)
    gb, gw = G.sum(0), (G * xhat).sum(0)
    gx = arr(w64) / np.sqrt(var + 1e-5) * (G - gb / m - xhat * gw / m)
    np.testing.assert_allclose(arr(b.grad), gb, rtol=tol, atol=tol * max(1, m ** 0.5))
    np.testing.assert_allclose(arr(w.grad), gw, rtol=tol, atol=tol * max(1, m ** 0.5))
    np.testing.assert_allclose(arr(xs.grad), gx, rtol=tol, atol=tol)


def test_batchnorm_rows_do_not_depend_on_threads():
    x = musa.randn(5000, 48)
    w, b = musa.ones(48), musa.zeros(48)
    outs = []
    old = musa.get_num_threads()
    try:
        for n in (1, 2):
            musa.set_num_threads(n)
            outs.append(arr(F.batch_norm(x, None, None, w, b, training=True)))
    finally:
        musa.set_num_threads(old)
    assert np.array_equal(outs[0], outs[1])


def test_batched_small_matmuls_spread_over_threads_match_one_thread():
    """A batch of small matrices runs one matrix per thread: same bits as
    one thread doing them all, transposed operands included."""
    a = musa.randn(6, 5, 33, 17)
    b = musa.randn(6, 5, 40, 17).transpose(-1, -2)
    old = musa.get_num_threads()
    try:
        musa.set_num_threads(1)
        one = arr(a @ b)
        musa.set_num_threads(2)
        two = arr(a @ b)
    finally:
        musa.set_num_threads(old)
    assert np.array_equal(one, two)
    ref = np.einsum("bhik,bhkj->bhij", arr(a), arr(b))
    np.testing.assert_allclose(two, ref, rtol=1e-4, atol=1e-4)
