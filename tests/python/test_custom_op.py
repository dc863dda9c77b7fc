"""musa.library.custom_op: Python ops (their forward may use NumPy) that run
eagerly, under autograd (gradcheck), inside musa.jit as graph nodes (no
graph break), in compiled training, in saved models (and a clear failure
where they are not registered), with their errors."""
import itertools
import os
import subprocess
import sys

import numpy as np
import pytest

import musa
import musa.nn.functional as F

_names = itertools.count()


def fresh(name):
    """A name no earlier test registered (registrations last the process)."""
    return f"test::{name}_{next(_names)}"


def softclip_op():
    op = musa.library.custom_op(fresh("softclip"), lambda x: np.tanh(x.numpy()) * 2)

    @op.register_autograd
    def _(inputs, outputs, grads):
        (y,), (g,) = outputs, grads
        return (g * (1 - (y / 2) ** 2) * 2,)
    return op


def test_eager_forward_with_numpy_and_its_gradient():
    op = softclip_op()
    x = musa.randn(3, 4, requires_grad=True)
    y = op(x)
    assert y.shape == (3, 4) and y.dtype == musa.float32
    assert y.grad_fn.name() == op.name + "Backward"
    np.testing.assert_allclose(y.detach().numpy(), np.tanh(x.detach().numpy()) * 2, rtol=1e-6)
    y.sum().backward()
    want = (1 - np.tanh(x.detach().numpy()) ** 2) * 2
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-5, atol=1e-6)
    # non-contiguous inputs reach the forward contiguous
    xt = musa.randn(4, 3).t()
    np.testing.assert_allclose(op(xt).numpy(), np.tanh(xt.numpy()) * 2, rtol=1e-6)


def test_gradcheck_and_gradgradcheck():
    @musa.library.custom_op(fresh("cube"))
    def cube(x):
        return x.numpy() ** 3

    @cube.register_autograd
    def _(inputs, outputs, grads):
        (x,), (g,) = inputs, grads
        return (g * 3 * x * x,)

    x = musa.randn(5, dtype=musa.float64, requires_grad=True)
    assert musa.autograd.gradcheck(cube, (x,))
    assert musa.autograd.gradgradcheck(cube, (x,))


def test_compiled_function_keeps_it_as_one_node():
    op = softclip_op()

    def f(x):
        return op(x * 3).sum()

    c = musa.jit(f)
    x = musa.randn(6, 5)
    with musa.no_grad():
        assert musa.equal(c(x), f(x))
        assert musa.equal(c(x), f(x))
    text = c.get_graph()
    assert f"custom[{op.name}](" in text and "# segment" not in text  # no graph break
    assert c.plan_stats()["runs"] == 2


def test_compiled_training_step_equals_eager():
    op = softclip_op()
    musa.manual_seed(0)
    lin = musa.nn.Linear(4, 3)
    w0 = [p.detach().clone() for p in lin.parameters()]
    x, y = musa.randn(8, 4), musa.randint(0, 3, (8,))

    def step():
        loss = F.cross_entropy(op(lin(x)), y)
        loss.backward()
        return loss.detach()

    eager_loss = step()
    eager_grads = [p.grad.clone() for p in lin.parameters()]
    for p, w in zip(lin.parameters(), w0):
        p.grad = None
        p.detach().copy_(w)
    c = musa.jit(step)
    got = c()
    assert musa.equal(got, eager_loss)
    for p, g in zip(lin.parameters(), eager_grads):
        assert musa.equal(p.grad, g)


def test_two_outputs_with_a_fake():
    @musa.library.custom_op(fresh("minmax"), n_outputs=2)
    def minmax(x):
        a = x.numpy()
        return a.min(axis=1), a.max(axis=1)

    @minmax.register_fake
    def _(x):
        return [((x.shape[0],), x.dtype), ((x.shape[0],), x.dtype)]

    x = musa.randn(4, 7)
    lo, hi = minmax(x)
    np.testing.assert_array_equal(lo.numpy(), x.numpy().min(axis=1))
    np.testing.assert_array_equal(hi.numpy(), x.numpy().max(axis=1))
    c = musa.jit(lambda x: minmax(x)[1] - minmax(x)[0])
    assert musa.equal(c(x), hi - lo)


def test_saved_model_names_it_and_fails_where_unregistered(tmp_path):
    op = softclip_op()
    x = musa.randn(2, 3)
    with musa.no_grad():
        traced = musa.jit.trace(lambda t: op(t) + 1, (x,))
        traced(x)
    path = tmp_path / "m.musa"
    traced.save(path)
    loaded = musa.jit.load(path)
    with musa.no_grad():
        assert musa.equal(loaded(x), op(x) + 1)
    root = os.path.dirname(os.path.dirname(os.path.abspath(musa.__file__)))
    r = subprocess.run([sys.executable, "-c", f"import musa; musa.jit.load({str(path)!r})"],
                       env=dict(os.environ, PYTHONPATH=root), capture_output=True, text=True)
    assert r.returncode != 0
    assert f'custom op "{op.name}" is not registered in this process' in r.stderr


def test_errors():
    with pytest.raises(ValueError, match=r"letters, digits"):
        musa.library.custom_op("bad name", lambda x: x)
    name = fresh("dup")
    musa.library.custom_op(name, lambda x: x.numpy())
    with pytest.raises(ValueError, match=r"registered already"):
        musa.library.custom_op(name, lambda x: x.numpy())
    with pytest.raises(TypeError, match=r"\[custom_op\] name must be a str"):
        musa.library.custom_op(3, lambda x: x)
    wrong = musa.library.custom_op(fresh("wrong"), lambda x: x.numpy()[:1])
    with pytest.raises(ValueError, match=r"forward gave output 0 as .*\(1, 3\).*says .*\(2, 3\)"):
        wrong(musa.randn(2, 3))

    def boom(x):
        raise KeyError("inside the forward")
    b = musa.library.custom_op(fresh("boom"), boom)
    with pytest.raises(KeyError, match="inside the forward"):  # the user's own exception
        b(musa.randn(2))
    nograd = musa.library.custom_op(fresh("nograd"), lambda x: x.numpy() * 2)
    x = musa.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"has no backward: register_autograd"):
        nograd(x).sum().backward()
    with pytest.raises(TypeError, match=r"takes 1 tensors, got 2"):
        nograd(x, x)
    with pytest.raises(TypeError, match=r"input 0 must be a Tensor"):
        nograd(np.zeros(3))
    fake = musa.library.custom_op(fresh("badfake"), lambda x: x.numpy())
    fake.register_fake(lambda x: "nonsense")
    with pytest.raises(TypeError, match=r"register_fake must give tensors or \(shape, dtype\)"):
        fake(musa.randn(2))


def test_profiler_names_it():
    op = softclip_op()
    x = musa.randn(3, 3)
    c = musa.jit(lambda t: op(t) * 2)
    with musa.no_grad():
        c(x)
        with musa.profiler.profile() as prof:
            op(x)
            c(x)
    kinds = {(e.kind, e.name) for e in prof.events()}
    assert ("op", op.name) in kinds and ("plan", op.name) in kinds
