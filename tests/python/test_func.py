"""musa.func against functorch (torch 1.13's torch.func) in float64: grad,
grad_and_value, vjp, jvp, jacrev, jacfwd, hessian and vmap, their
compositions (per-sample gradients, Hessians, grad of grad), trees,
randomness modes, functional_call and model ensembling with
stack_module_state, and the argument errors."""
import numpy as np
import pytest

import musa
import musa.func as mf
import musa.nn as nn

torch = pytest.importorskip("torch")
functorch = pytest.importorskip("functorch")


def T(x):
    """musa -> torch (float64)"""
    return torch.tensor(np.asarray(x.detach().numpy()), dtype=torch.float64)


def M(x):
    return musa.tensor(x.detach().numpy(), dtype=musa.float64)


def close(a, b, tol=1e-10):
    """a musa tree against a torch tree"""
    if isinstance(a, (tuple, list)):
        assert isinstance(b, (tuple, list)) and len(a) == len(b)
        for x, y in zip(a, b):
            close(x, y, tol)
        return
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            close(a[k], b[k], tol)
        return
    assert tuple(a.shape) == tuple(b.shape), (tuple(a.shape), tuple(b.shape))
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


def data(*shape, seed=0):
    g = np.random.default_rng(seed)
    x = g.standard_normal(shape)
    return musa.tensor(x, dtype=musa.float64), torch.tensor(x, dtype=torch.float64)


def f_scalar(lib):
    return lambda x, y: (lib.sin(x) * y).sum() + (x ** 3).sum() * 0.5


def f_vec(lib):
    return lambda x, y: lib.stack([(x * y).sum(), (x.exp() * y ** 2).sum()]) * x[:2]


def test_grad_and_grad_and_value():
    xm, xt = data(5)
    ym, yt = data(5, seed=1)
    close(mf.grad(f_scalar(musa))(xm, ym), functorch.grad(f_scalar(torch))(xt, yt))
    close(mf.grad(f_scalar(musa), argnums=(0, 1))(xm, ym),
          functorch.grad(f_scalar(torch), argnums=(0, 1))(xt, yt))
    close(mf.grad(f_scalar(musa), argnums=-1)(xm, ym),
          functorch.grad(f_scalar(torch), argnums=1)(xt, yt))
    g, v = mf.grad_and_value(f_scalar(musa))(xm, ym)
    gt, vt = functorch.grad_and_value(f_scalar(torch))(xt, yt)
    close(g, gt)
    close(v, vt)
    assert not g.requires_grad and not v.requires_grad

    def with_aux(lib):
        return lambda x: ((x ** 2).sum(), x.mean())

    (g, aux) = mf.grad(with_aux(musa), has_aux=True)(xm)
    (gt, auxt) = functorch.grad(with_aux(torch), has_aux=True)(xt)
    close(g, gt)
    close(aux, auxt)


def test_grad_of_a_tree():
    xm, xt = data(2, 2)
    ym, yt = data(2, 2, seed=1)

    def f(lib):
        return lambda p: (p["w"] * p["b"][0]).sum() + lib.tanh(p["b"][1]).sum()

    gm = mf.grad(f(musa))({"w": xm, "b": (ym, ym)})
    gt = functorch.grad(f(torch))({"w": xt, "b": (yt, yt)})
    assert isinstance(gm, dict) and isinstance(gm["b"], tuple)
    close(gm, gt)


def test_grad_of_grad_and_unused_input():
    xm, xt = data(1)
    x0m, x0t = xm.reshape(()), xt.reshape(())
    f = lambda x: x ** 3 + x.sin()  # noqa: E731
    close(mf.grad(mf.grad(f))(x0m), functorch.grad(functorch.grad(f))(x0t))
    close(mf.grad(mf.grad(mf.grad(f)))(x0m),
          functorch.grad(functorch.grad(functorch.grad(f)))(x0t))
    g = mf.grad(lambda x, y: (x * 2).sum(), argnums=1)(xm, xm)
    assert bool((g == 0).all())


def test_grad_composes_with_autograd():
    x = musa.tensor([0.3, -1.2], dtype=musa.float64, requires_grad=True)
    g = mf.grad(lambda z: (z ** 3).sum())(x)  # 3 x^2, differentiable in x
    assert g.requires_grad
    g.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 6 * x.detach().numpy(), rtol=1e-12)


def test_vjp_and_jvp():
    xm, xt = data(4)
    ym, yt = data(4, seed=1)

    def f(lib):
        return lambda x, y: (x * y, (x.exp() + y).sum())

    out, fn = mf.vjp(f(musa), xm, ym)
    outt, fnt = functorch.vjp(f(torch), xt, yt)
    close(out, outt)
    cm, ct = data(4, seed=2)
    sm, st = data(1, seed=3)
    close(fn((cm, sm.reshape(()))), fnt((ct, st.reshape(()))))
    out, jv = mf.jvp(f(musa), (xm, ym), (cm, ym))
    outt, jvt = functorch.jvp(f(torch), (xt, yt), (ct, yt))
    close(out, outt)
    close(jv, jvt)
    out, jv, aux = mf.jvp(lambda x: (x.sin(), 7), (xm,), (cm,), has_aux=True)
    close(jv, functorch.jvp(torch.sin, (xt,), (ct,))[1])
    assert aux == 7


@pytest.mark.parametrize("which", ["jacrev", "jacfwd"])
def test_jacobians(which):
    xm, xt = data(3)
    ym, yt = data(3, seed=1)
    mine, theirs = getattr(mf, which), getattr(functorch, which)
    close(mine(f_vec(musa))(xm, ym), theirs(f_vec(torch))(xt, yt))
    close(mine(f_vec(musa), argnums=(0, 1))(xm, ym), theirs(f_vec(torch), argnums=(0, 1))(xt, yt))
    # a tuple output and a matrix input
    am, at = data(2, 3, seed=4)
    g = lambda lib: (lambda a: (a.sum(0), (a ** 2).t()))  # noqa: E731
    close(mine(g(musa))(am), theirs(g(torch))(at))


def test_hessian():
    xm, xt = data(4)
    f = lambda lib: (lambda x: (x.sin() * x ** 2).sum() + x.prod())  # noqa: E731
    close(mf.hessian(f(musa))(xm), functorch.hessian(f(torch))(xt), 1e-9)


def test_vmap_dims_and_nesting():
    am, at = data(3, 4, 5)
    bm, bt = data(5, 3, seed=1)
    f = lambda x, y: (x * 2).sum(0) + y  # noqa: E731
    close(mf.vmap(f, in_dims=(0, 1))(am, bm), functorch.vmap(f, in_dims=(0, 1))(at, bt))
    em, et = data(5, 4, seed=3)
    close(mf.vmap(f, in_dims=(2, 0), out_dims=1)(am, em),
          functorch.vmap(f, in_dims=(2, 0), out_dims=1)(at, et))
    cm, ct = data(5, seed=2)
    close(mf.vmap(f, in_dims=(0, None))(am, cm), functorch.vmap(f, in_dims=(0, None))(at, ct))
    close(mf.vmap(mf.vmap(lambda x: x.sum() * x))(am),
          functorch.vmap(functorch.vmap(lambda x: x.sum() * x))(at))
    # trees in and out, a negative dim
    g = lambda p: {"s": p[0] + p[1], "d": (p[0] - p[1],)}  # noqa: E731
    close(mf.vmap(g, in_dims=((0, -1),))((am, am.transpose(0, 2).transpose(0, 1))),
          functorch.vmap(g, in_dims=((0, -1),))((at, at.transpose(0, 2).transpose(0, 1))))


def test_per_sample_gradients():
    musa.manual_seed(0)
    w = musa.randn(3, 4, dtype=musa.float64)
    xm, xt = data(6, 4)
    ym, yt = data(6, 3, seed=1)

    def loss(lib):
        return lambda w, x, y: ((lib.tanh(x @ w.t()) - y) ** 2).mean()

    mine = mf.vmap(mf.grad(loss(musa)), in_dims=(None, 0, 0))(w, xm, ym)
    theirs = functorch.vmap(functorch.grad(loss(torch)), in_dims=(None, 0, 0))(T(w), xt, yt)
    close(mine, theirs)
    assert tuple(mine.shape) == (6, 3, 4)


def test_vmap_randomness():
    x = musa.zeros(4)
    with pytest.raises(RuntimeError, match=r"\[vmap\] .*random operation"):
        mf.vmap(lambda z: z + musa.rand(()))(x)
    musa.manual_seed(0)
    same = mf.vmap(lambda z: z + musa.rand(()), randomness="same")(x)
    assert bool((same == same[0]).all())
    different = mf.vmap(lambda z: z + musa.rand(()), randomness="different")(x)
    assert len(set(different.tolist())) == 4
    with pytest.raises(RuntimeError, match="randomness must be"):
        mf.vmap(lambda z: z, randomness="sometimes")


def test_functional_call_and_ensembles():
    musa.manual_seed(0)
    models = [nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2)) for _ in range(4)]
    params, buffers = mf.stack_module_state(models)
    assert tuple(params["0.weight"].shape) == (4, 5, 3) and params["0.weight"].requires_grad
    assert params["0.weight"].is_leaf
    x = musa.randn(7, 3)
    base = models[0]

    def one(p, b, x):
        return mf.functional_call(base, (p, b), (x,))

    out = mf.vmap(one, in_dims=(0, 0, None))(params, buffers, x)
    for i, m in enumerate(models):
        np.testing.assert_allclose(out[i].detach().numpy(), m(x).detach().numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError, match=r"\[functional_call\] strict=True: missing"):
        mf.functional_call(base, {"0.weight": params["0.weight"][0]}, (x,), strict=True)
    with pytest.raises(ValueError, match="more than one dict"):
        mf.functional_call(base, ({"0.bias": x}, {"0.bias": x}), (x,))


def test_functional_call_ties_weights():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(2, 2, bias=False)
            self.b = nn.Linear(2, 2, bias=False)
            self.b.weight = self.a.weight

        def forward(self, x):
            return self.b(self.a(x))

    m = Tied()
    w = musa.eye(2) * 2
    x = musa.ones(1, 2)
    assert mf.functional_call(m, {"a.weight": w}, (x,)).tolist() == [[4.0, 4.0]]
    untied = mf.functional_call(m, {"a.weight": w}, (x,), tie_weights=False)
    assert untied.tolist() != [[4.0, 4.0]]


@pytest.mark.parametrize("call, err, match", [
    (lambda: mf.grad(lambda x: x * 2)(musa.ones(3)), RuntimeError, "0-dim tensor"),
    (lambda: mf.grad(lambda x: x.sum())(musa.ones(3, dtype=musa.int64)), TypeError,
     "only floating point"),
    (lambda: mf.grad(lambda x: x.sum(), argnums=2)(musa.ones(3)), ValueError, "out of range"),
    (lambda: mf.grad(lambda x: x.sum(), argnums=(0, 0))(musa.ones(3)), ValueError, "repeats"),
    (lambda: mf.grad(lambda x: x.sum(), has_aux=True)(musa.ones(3)), RuntimeError, "pair"),
    (lambda: mf.vjp(lambda x: x, musa.ones(2))[1](musa.ones(3)), RuntimeError, "shape"),
    (lambda: mf.jvp(lambda x: x, [musa.ones(2)], [musa.ones(2)]), RuntimeError, "tuples"),
    (lambda: mf.jvp(lambda x: x, (musa.ones(2),), (musa.ones(3),)), RuntimeError, "shape"),
    (lambda: mf.vmap(lambda x, y: x)(musa.ones(2), musa.ones(3)), ValueError, "differ in size"),
    (lambda: mf.vmap(lambda x: x, in_dims=3)(musa.ones(2)), ValueError, "out of range"),
    (lambda: mf.vmap(lambda x: x, in_dims=None)(musa.ones(2)), ValueError, "no argument"),
    (lambda: mf.vmap(lambda x: x, in_dims=(0, 0))(musa.ones(2)), ValueError, "entries"),
    (lambda: mf.vmap(lambda x: x)(musa.ones(0)), ValueError, "size 0"),
    (lambda: mf.vmap(lambda x: 3)(musa.ones(2)), RuntimeError, "must return tensors"),
    (lambda: mf.vmap(lambda x: x, out_dims=2)(musa.ones(2, 2)), ValueError, "out_dims 2"),
    (lambda: mf.vmap(lambda x: x, chunk_size=0), ValueError, "chunk_size"),
    (lambda: mf.stack_module_state([nn.Linear(1, 1), nn.Tanh()]), RuntimeError, "one class"),
])
def test_errors(call, err, match):
    with pytest.raises(err, match=match):
        call()
