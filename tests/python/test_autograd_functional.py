"""musa.autograd.functional (vjp, jvp, jacobian, hessian, vhp, hvp) against
torch.autograd.functional, and its errors."""
import numpy as np
import pytest
import torch
import torch.autograd.functional as TF

import musa
import musa.autograd.functional as MF

X = [[0.5, -1.0, 0.3], [2.0, 0.25, -0.7]]
Y = [[1.0, 0.5, 0.2], [-0.5, 2.0, 1.5]]


def pair(v):
    return musa.tensor(v, dtype=musa.float64), torch.tensor(v, dtype=torch.float64)


def same(a, b):
    """a (musa) and b (torch) have the same nesting, shapes and values."""
    if isinstance(b, (tuple, list)):  # (torch 1.13's forward-mode jacobian: lists)
        assert isinstance(a, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
        return
    assert isinstance(a, musa.Tensor) and tuple(a.shape) == tuple(b.shape)
    np.testing.assert_allclose(np.array(a.tolist()), b.detach().numpy(), rtol=1e-12, atol=1e-12)


def cubic(x):
    return (x ** 3).sum()


def mixed(x, y):
    return (x.sin() * y.exp()).sum()


def two_out(x, y):
    return x * y.tanh(), x.exp().sum(1)


def one_out(x):
    return x.exp() * 2


# (name, call with (module, x, y))
CASES = [
    ("vjp", lambda M, x, y: M.vjp(two_out, (x, y), (x, y[:, 0] * 0 + 1))),
    ("vjp, scalar output without v", lambda M, x, y: M.vjp(cubic, x)),
    ("jvp", lambda M, x, y: M.jvp(two_out, (x, y), (y, x))),
    ("jvp, one tensor", lambda M, x, y: M.jvp(one_out, x, y)),
    ("jacobian", lambda M, x, y: M.jacobian(one_out, x)),
    ("jacobian, tuples", lambda M, x, y: M.jacobian(two_out, (x, y))),
    ("jacobian, forward-mode", lambda M, x, y: M.jacobian(two_out, (x, y), vectorize=True,
                                                         strategy="forward-mode")),
    ("hessian", lambda M, x, y: M.hessian(cubic, x)),
    ("hessian, tuple", lambda M, x, y: M.hessian(mixed, (x, y))),
    ("vhp", lambda M, x, y: M.vhp(mixed, (x, y), (y, x))),
    ("hvp", lambda M, x, y: M.hvp(mixed, (x, y), (y, x))),
    ("jacobian, output independent of an input", lambda M, x, y: M.jacobian(
        lambda a, b: a * 2, (x, y))),
    ("vjp, create_graph", lambda M, x, y: M.vjp(cubic, x, create_graph=True)),
]


@pytest.mark.parametrize("name,call", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(name, call):
    (mx, tx), (my, ty) = pair(X), pair(Y)
    same(call(MF, mx, my), call(TF, tx, ty))


def test_reachable_from_musa_autograd():
    assert musa.autograd.functional.jacobian is MF.jacobian


def test_create_graph_results_differentiate_again():
    x = musa.tensor([0.5, -1.0, 2.0], dtype=musa.float64, requires_grad=True)
    jac = MF.jacobian(lambda t: t ** 3, x, create_graph=True)  # diag(3 x^2)
    assert jac.requires_grad
    (g,) = musa.autograd.grad(jac.sum(), x)  # 6 x
    assert g.tolist() == [3.0, -6.0, 12.0]
    # without create_graph: detached
    assert not MF.jacobian(lambda t: t ** 3, x).requires_grad


def test_strict_and_zero_gradients():
    x, y = musa.ones(2, dtype=musa.float64), musa.ones(3, dtype=musa.float64)
    _, (gx, gy) = MF.vjp(lambda a, b: (a * 2).sum(), (x, y))
    assert gx.tolist() == [2.0, 2.0] and gy.tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(RuntimeError, match=r"\[vjp\] the output does not depend on input 1"):
        MF.vjp(lambda a, b: (a * 2).sum(), (x, y), strict=True)
    with pytest.raises(RuntimeError, match=r"\[jacobian\] output 0 of the function does not "
                                           r"depend on the inputs"):
        MF.jacobian(lambda a: musa.ones(2), x, strict=True)
    assert MF.jacobian(lambda a: musa.ones(2), x).tolist() == [[0.0, 0.0], [0.0, 0.0]]


def test_empty_output_and_input():
    e = musa.ones(0, dtype=musa.float64)
    assert MF.jacobian(lambda a: a * 2, e).shape == (0, 0)
    x = musa.ones(2, dtype=musa.float64)
    assert MF.jacobian(lambda a: a[:0], x).shape == (0, 2)


def test_errors_name_the_function_and_the_values():
    x = musa.ones(2, dtype=musa.float64)
    with pytest.raises(ValueError, match=r"\[vjp\] v can be None only when there is one "
                                         r"output with one element; there are 1, the first of "
                                         r"shape \(2,\)"):
        MF.vjp(lambda a: a * 2, x)
    with pytest.raises(ValueError, match=r"\[jvp\] v\[0\] has shape \(3,\) but input 0 has "
                                         r"shape \(2,\)"):
        MF.jvp(lambda a: a * 2, x, musa.ones(3, dtype=musa.float64))
    with pytest.raises(ValueError, match=r"\[hvp\] v has 2 tensor\(s\) for 1 input\(s\)"):
        MF.hvp(lambda a: a.sum(), x, (x, x))
    with pytest.raises(RuntimeError, match=r"\[hessian\] the function must return a single "
                                           r"Tensor with one element, got shape \(2,\)"):
        MF.hessian(lambda a: a * 2, x)
    with pytest.raises(TypeError, match=r"\[jacobian\] input 0 has dtype musa.int64"):
        MF.jacobian(lambda a: a * 2, musa.tensor([1, 2]))
    with pytest.raises(TypeError, match=r"\[vjp\] the function's output must be a Tensor or a "
                                        r"tuple of Tensors, not float"):
        MF.vjp(lambda a: 1.0, x)
    with pytest.raises(TypeError, match=r"\[jacobian\] inputs must be a Tensor or a tuple of "
                                        r"Tensors, but element 1 is a int"):
        MF.jacobian(lambda a, b: a, (x, 1))
    with pytest.raises(ValueError, match=r"\[jacobian\] strategy must be"):
        MF.jacobian(lambda a: a, x, strategy="sideways")
