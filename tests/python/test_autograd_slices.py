"""Gradients of slices (split, chunk, narrow, basic indexing): the engine
writes a slice's gradient into its input's gradient buffer instead of
padding it and adding (src/autograd/engine.c, slice_into). Every case
against PyTorch, including the ones that must take the formula's way (a
shared buffer, create_graph, steps)."""
import numpy as np
import pytest

import musa

torch = pytest.importorskip("torch")


def both(fn, *shapes, dtype="float32", seed=0):
    """fn(lib, *leaves) -> a scalar; returns musa's and torch's leaf grads."""
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(np.float64) for s in shapes]
    m = [musa.tensor(a, dtype=getattr(musa, dtype)).requires_grad_() for a in arrays]
    t = [torch.tensor(a, dtype=getattr(torch, dtype)).requires_grad_() for a in arrays]
    fn(musa, *m).backward()
    fn(torch, *t).backward()
    return [x.grad.float().numpy() for x in m], [x.grad.float().numpy() for x in t]


def check(fn, *shapes, dtype="float32", tol=1e-5):
    got, want = both(fn, *shapes, dtype=dtype)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


def weights(lib, *shape):
    return lib.tensor(np.linspace(-1, 1, int(np.prod(shape))).reshape(shape).astype(np.float32))


def test_split_all_pieces():
    def f(lib, x):
        h = x * 1.5  # a non-leaf: its gradient buffer is the engine's
        q, k, v = h.split(4, dim=-1)
        return (q * weights(lib, 2, 3, 4)).sum() + (k * k).sum() + (v.exp()).sum()
    check(f, (2, 3, 12))


def test_some_pieces_unused():
    def f(lib, x):
        q, k, v = (x * 2).chunk(3, dim=1)
        return (k * weights(lib, 4, 2, 5)).sum()
    check(f, (4, 6, 5))


def test_overlapping_slices_and_a_direct_use():
    def f(lib, x):
        h = x + 0.5
        a, b = h[:, 0:5], h[:, 3:8]
        return (a * weights(lib, 3, 5)).sum() + (b * b).sum() + (h * 3).sum()
    check(f, (3, 8))


def test_slice_gradient_after_and_before_another_path():
    def f(lib, x):
        h = x * 2
        first = (h[:, :, 1:3] * weights(lib, 2, 4, 2)).sum()
        return first + (h.tanh() * weights(lib, 2, 4, 6)).sum() + h[:, :, 4:].sum()
    check(f, (2, 4, 6))


@pytest.mark.parametrize("slice_first", [True, False])
def test_gradient_shared_with_another_input(slice_first):
    # add's backward gives its gradient to both inputs; the slice's gradient
    # must land in h's buffer only, whichever backward runs first
    def f(lib, x, y):
        v, h = y * 1.0, x * 1.0
        s = h[:, 2:4]
        b = (s * 5).sum() if slice_first else None
        a = ((h + v) * weights(lib, 4, 6)).sum()
        return (b + a) if slice_first else a + (s * 5).sum()
    check(f, (4, 6), (4, 6))


def test_leaf_slices_accumulate_over_two_backwards():
    x = musa.randn(3, 9, requires_grad=True)
    tx = torch.tensor(x.detach().numpy(), requires_grad=True)
    for lib, t in ((musa, x), (torch, tx)):
        for _ in range(2):
            a, b, c = t.split(3, dim=1)
            (a * 2 + b * b).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_steps_negative_dims_and_empty_slices():
    def f(lib, x):
        h = x * 1.0
        return (h[:, ::2] * 3).sum() + h[..., -2:].sum() + h[:, 4:4].sum() + h.narrow(-1, 1, 2).sum()
    check(f, (3, 6))


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-12), ("bfloat16", 2e-2)])
def test_dtypes(dtype, tol):
    def f(lib, x):
        q, k = (x * 1.0).split(3, dim=0)
        return (q * 2).sum() + (k * k).sum()
    check(f, (6, 4), dtype=dtype, tol=tol)


def test_hooks_see_the_summed_gradient():
    seen = []
    x = musa.randn(2, 6, requires_grad=True)
    h = x * 1.0
    h.register_hook(lambda g: seen.append(g.numpy().copy()))
    a, b = h.split(3, dim=1)
    (a * 2 + b * 3).sum().backward()
    want = np.concatenate([np.full((2, 3), 2.0), np.full((2, 3), 3.0)], axis=1)
    np.testing.assert_array_equal(seen[0], want)
    np.testing.assert_array_equal(x.grad.numpy(), want)


def test_create_graph_and_retain_graph():
    x = musa.randn(3, 4, requires_grad=True)
    tx = torch.tensor(x.detach().numpy(), requires_grad=True)
    out = []
    for lib, t in ((musa, x), (torch, tx)):
        h = t * t
        a, b = h.split(2, dim=1)
        loss = (a * a).sum() + b.sum()
        (g,) = lib.autograd.grad(loss, [t], create_graph=True, retain_graph=True)
        (gg,) = lib.autograd.grad(g.sum(), [t], retain_graph=True)
        loss.backward(retain_graph=True)
        loss.backward()
        out.append((g.detach().numpy(), gg.numpy(), t.grad.numpy()))
    for m, w in zip(*out):
        np.testing.assert_allclose(m, w, rtol=1e-5, atol=1e-6)


def test_compiled_step_with_split_equals_eager():
    def run(compiled):
        musa.manual_seed(0)
        x, w = musa.randn(5, 6), musa.randn(6, 12, requires_grad=True)

        def step(x):
            q, k, v = (x @ w).split(4, dim=-1)
            loss = (q * k).sum() + v.tanh().sum()
            loss.backward()
            return loss.detach()

        f = musa.jit(step) if compiled else step
        losses, grads = [], []
        for _ in range(3):
            w.grad = None
            losses.append(float(f(x)))
            grads.append(w.grad.numpy().copy())
        return losses, grads

    (l1, g1), (l2, g2) = run(False), run(True)
    assert l1 == l2
    for a, b in zip(g1, g2):
        np.testing.assert_array_equal(a, b)
