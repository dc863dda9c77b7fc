"""Autograd from Python: the SPEC's first snippet, backward/grad options,
grad modes, hooks, custom Functions, gradcheck, anomaly mode, writes into
views, and errors."""
import subprocess
import sys
import os

import numpy as np
import pytest

import musa
from musa.autograd import Function

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def test_spec_snippet_runs_as_written():
    code = (
        "import musa\n"
        "x = musa.tensor([1.0], requires_grad=True)\n"
        "y = musa.tensor([2.0], requires_grad=True)\n"
        "z = x * y\n"
        "z.backward()\n"
        "print(x.grad, y.grad, z.grad_fn)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.startswith("tensor([2.]) tensor([1.]) <MulBackward object at ")


def test_grad_fn_graph():
    x = musa.tensor([1.0, 2.0], requires_grad=True)
    y = (x * 2).sum()
    assert y.grad_fn.name() == "SumBackward"
    (mul, _), = y.grad_fn.next_functions
    assert mul.name() == "MulBackward"
    acc = mul.next_functions[0][0]
    assert acc.name() == "AccumulateGrad" and acc.variable is x
    assert x.grad_fn is None and x.is_leaf and not y.is_leaf


def test_retain_graph_and_accumulation():
    x = musa.tensor([3.0], requires_grad=True)
    y = x * x
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.item() == 12
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()
    w = musa.randn(3, requires_grad=True)
    w.sum().backward()
    w.sum().backward()  # the first gradient was a broadcast: .grad must still accumulate
    assert w.grad.tolist() == [2.0, 2.0, 2.0]
    w.grad.zero_()


def test_create_graph_higher_order():
    x = musa.tensor([2.0], requires_grad=True)
    y = x ** 3
    (g,) = musa.autograd.grad(y, x, create_graph=True)
    assert g.item() == 12
    (g2,) = musa.autograd.grad(g, x)
    assert g2.item() == 12


def test_grad_options():
    x = musa.randn(3, requires_grad=True)
    u = musa.randn(3, requires_grad=True)
    y = (x * 2).sum()
    with pytest.raises(RuntimeError):
        musa.autograd.grad(y, [x, u], retain_graph=True)
    gx, gu = musa.autograd.grad(y, [x, u], allow_unused=True)
    assert gu is None and gx.tolist() == [2.0, 2.0, 2.0]
    assert x.grad is None  # grad() accumulates nothing
    z = x * u
    z.backward(musa.ones(3), inputs=[x])
    assert u.grad is None and musa.equal(x.grad, u)


def test_no_grad_enable_grad_set_grad_enabled():
    x = musa.ones(2, requires_grad=True)
    with musa.no_grad():
        assert not (x * 2).requires_grad
        with musa.enable_grad():
            assert (x * 2).requires_grad

    @musa.no_grad()
    def f(t):
        return t * 2
    assert not f(x).requires_grad
    musa.set_grad_enabled(False)
    assert not musa.is_grad_enabled()
    musa.set_grad_enabled(True)
    with musa.set_grad_enabled(False):
        assert not (x + 1).requires_grad
    assert musa.is_grad_enabled()


def test_detach_and_data():
    x = musa.ones(2, requires_grad=True)
    d = x.detach()
    assert not d.requires_grad and d._shares_storage(x)
    y = x * 2
    assert not y.data.requires_grad


def test_hooks_modify_gradients_and_exceptions_propagate():
    x = musa.ones(3, requires_grad=True)
    seen = []
    h = x.register_hook(lambda g: seen.append(g.tolist()) or g * 10)
    (x * 2).sum().backward()
    assert seen == [[2.0, 2.0, 2.0]] and x.grad.tolist() == [20.0] * 3
    h.remove()
    x.grad = None
    y = x * 3
    y.register_hook(lambda g: (_ for _ in ()).throw(KeyError("from the hook")))
    with pytest.raises(KeyError, match="from the hook"):
        y.sum().backward()
    y2 = x * 1
    y2.retain_grad()
    y2.sum().backward()
    assert y2.grad.tolist() == [1.0] * 3


def test_custom_function():
    class Square(Function):
        @staticmethod
        def forward(ctx, a, k):
            ctx.save_for_backward(a)
            ctx.k = k
            return a * a * k

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return g * 2 * a * ctx.k, None

    x = musa.tensor([1.0, 3.0], dtype=musa.float64, requires_grad=True)
    y = Square.apply(x, 2.0)
    assert y.grad_fn.name() == "SquareBackward"
    y.sum().backward()
    assert x.grad.tolist() == [4.0, 12.0]
    assert musa.autograd.gradcheck(lambda t: Square.apply(t, 3.0), [x])

    class Bad(Function):
        @staticmethod
        def forward(ctx, a):
            return a * 1

        @staticmethod
        def backward(ctx, g):
            raise ValueError("bad backward")
    with pytest.raises(ValueError, match="bad backward"):
        Bad.apply(x).sum().backward()


def test_gradcheck_catches_a_wrong_gradient():
    class Wrong(Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g * 3
    x = musa.randn(3, dtype=musa.float64, requires_grad=True)
    with pytest.raises(musa.autograd.GradcheckError):
        musa.autograd.gradcheck(Wrong.apply, [x])
    assert musa.autograd.gradcheck(Wrong.apply, [x], raise_exception=False) is False
    assert musa.autograd.gradgradcheck(lambda t: (t * t).tanh(), [x])


def test_anomaly_mode_names_the_forward_op():
    x = musa.tensor([0.0], requires_grad=True)
    with pytest.warns(UserWarning):
        with musa.autograd.detect_anomaly():
            y = x.sqrt() * 0  # d sqrt at 0 is inf: inf * 0 = nan
            with pytest.raises(RuntimeError, match="sqrt"):
                y.backward()


def test_modified_saved_tensor_is_detected():
    x = musa.ones(2, requires_grad=True)
    a = x * 2
    b = a * a
    a += 1
    with pytest.raises(RuntimeError, match="modified in place"):
        b.sum().backward()


def test_writes_into_views_are_differentiated():
    x = musa.ones(3, requires_grad=True)
    y = x * 1
    y[0] = 5
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 1.0]
    h = musa.randn(4, requires_grad=True)
    out = musa.zeros(3, 4)
    for t in range(3):
        out[t] = h * (t + 1)
    out.sum().backward()
    assert h.grad.tolist() == [6.0] * 4
    with pytest.raises(RuntimeError, match="view of a leaf"):
        x[0:1].mul_(2)
    z = musa.randn(5, requires_grad=True)
    a = z.relu() * 1
    a[a > 0.5] = 0
    a.sum().backward()
    want = ((z.detach().numpy() > 0) & (z.detach().numpy() <= 0.5)).astype(np.float32)
    np.testing.assert_array_equal(z.grad.numpy(), want)


def test_fill_and_zero_are_recorded():
    x = musa.ones(3, requires_grad=True)
    y = x * 2
    y[0:1].fill_(0)
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 2.0, 2.0]
    x.grad = None
    z = x * 2
    z.zero_()
    (z + x).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(RuntimeError, match="leaf"):
        x.fill_(1)
    with musa.no_grad():
        x.fill_(5)
    assert x.tolist() == [5.0] * 3


def test_requires_grad_rules():
    with pytest.raises(RuntimeError):
        musa.ones(2, dtype=musa.int64).requires_grad_()
    x = musa.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError):
        (x * 2).requires_grad = False
    with pytest.raises(RuntimeError, match="leaf"):
        x += 1
    with musa.no_grad():
        x += 1
    assert x.tolist() == [2.0, 2.0]


def test_post_accumulate_grad_hook():
    w = musa.tensor([1.0, 2.0], requires_grad=True)
    seen = []

    def hook(p):
        assert p is w
        seen.append(p.grad.tolist())

    h = w.register_post_accumulate_grad_hook(hook)
    (w * 3).sum().backward()
    (w * w).sum().backward()  # accumulates: the hook sees the sum
    assert seen == [[3.0, 3.0], [5.0, 7.0]]
    h.remove()
    (w * 3).sum().backward()
    assert len(seen) == 2
    # a hook may read and replace .grad; it must return None
    w.register_post_accumulate_grad_hook(lambda p: setattr(p, "grad", p.grad * 0))
    (w * 3).sum().backward()
    assert w.grad.tolist() == [0.0, 0.0]
    v = musa.ones(2, requires_grad=True)
    v.register_post_accumulate_grad_hook(lambda p: p.grad)
    with pytest.raises(RuntimeError, match="must return None"):
        (v * 2).sum().backward()
    with pytest.raises(RuntimeError, match="non-leaf"):
        (v * 2).register_post_accumulate_grad_hook(lambda p: None)
    with pytest.raises(TypeError, match="must be callable"):
        v.register_post_accumulate_grad_hook(3)


def test_function_backward_takes_a_gradient_per_output():
    # as PyTorch: one gradient per output forward returned: zeros for an
    # output marked non-differentiable (materialize_grads), None for a
    # non-tensor one; they took only the differentiable outputs' before
    seen = []

    class Split(musa.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            idx = (x > 0).float()
            ctx.mark_non_differentiable(idx)
            return idx, x * 2, 3

        @staticmethod
        def backward(ctx, g_idx, g_y, g_n):
            seen.append((g_idx, g_n))
            return g_y * 2
    x = musa.ones(4, requires_grad=True)
    idx, y, n = Split.apply(x)
    assert not idx.requires_grad and n == 3
    y.sum().backward()
    (g_idx, g_n), = seen
    assert g_n is None and np.array_equal(g_idx.numpy(), np.zeros(4, np.float32))
    assert np.array_equal(x.grad.numpy(), np.full(4, 2, np.float32))
