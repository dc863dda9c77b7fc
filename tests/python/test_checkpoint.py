"""musa.utils.checkpoint: activation checkpointing, as torch.utils.checkpoint."""
import warnings

import numpy as np
import pytest

import musa
import musa.nn as nn
import musa.nn.functional as F
from musa.utils.checkpoint import checkpoint, checkpoint_sequential


def grads(params, x, fn, ck, reentrant):
    for p in params:
        p.grad = None
    musa.manual_seed(3)
    xi = x.clone().requires_grad_(True)
    h = checkpoint(fn, xi, use_reentrant=reentrant) if ck else fn(xi)
    h.pow(2).sum().backward()
    return [p.grad.numpy().copy() for p in params] + [xi.grad.numpy().copy()]


@pytest.mark.parametrize("reentrant", [True, False])
def test_gradients_are_the_plain_blocks_bit_for_bit_dropout_included(reentrant):
    musa.manual_seed(0)
    lin, drop = nn.Linear(16, 16), nn.Dropout(0.5)
    x = musa.randn(6, 16)

    def block(t):
        return drop(F.gelu(lin(t))) * 2

    params = list(lin.parameters())
    want = grads(params, x, block, False, reentrant)
    got = grads(params, x, block, True, reentrant)
    assert all(np.array_equal(a, b) for a, b in zip(want, got))


def test_the_recompute_keeps_no_intermediates_of_the_block():
    musa.manual_seed(0)
    layers = [nn.Linear(256, 256) for _ in range(8)]

    def deep(t):
        for m in layers:
            t = F.gelu(m(t))
        return t

    x = musa.randn(512, 256, requires_grad=True)
    held = []
    for ck in (False, True):
        base = musa.memory_stats()["current_bytes"]
        y = checkpoint(deep, x, use_reentrant=False) if ck else deep(x)
        held.append(musa.memory_stats()["current_bytes"] - base)
        y.sum().backward()
        del y
    # 8 layers x (linear out, gelu out) of 512 KiB against the output alone
    assert held[1] * 8 < held[0], held


def test_without_reentrancy_parameters_get_gradients_whatever_the_inputs():
    musa.manual_seed(0)
    lin = nn.Linear(4, 4)
    x = musa.randn(3, 4)  # needs no gradient
    checkpoint(lin, x, use_reentrant=False).sum().backward()
    assert lin.weight.grad is not None and lin.bias.grad is not None
    lin.weight.grad = None
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad"):
        y = checkpoint(lin, x, use_reentrant=True)
    assert not y.requires_grad  # as PyTorch's reentrant checkpoint


def test_keyword_arguments_tuples_and_non_tensor_arguments_pass_through():
    musa.manual_seed(0)
    lin = nn.Linear(4, 4)

    def fn(a, scale, b=None):
        return lin(a) * scale, b.sum(), "tag"

    a, b = musa.randn(2, 4, requires_grad=True), musa.randn(3, requires_grad=True)
    y, s, tag = checkpoint(fn, a, 3.0, b=b, use_reentrant=False)
    assert tag == "tag"
    (y.sum() + s).backward()
    ref_a = a.detach().clone().requires_grad_(True)
    (lin(ref_a) * 3.0).sum().backward()
    assert np.array_equal(a.grad.numpy(), ref_a.grad.numpy())


def test_no_grad_mode_just_runs_the_function():
    lin = nn.Linear(4, 4)
    with musa.no_grad():
        y = checkpoint(lin, musa.randn(2, 4), use_reentrant=False)
    assert not y.requires_grad


def test_checkpoint_sequential_matches_the_plain_sequential():
    musa.manual_seed(0)
    seq = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 2))
    x = musa.randn(5, 8)
    a, b = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    checkpoint_sequential(seq, 2, a, use_reentrant=False).sum().backward()
    seq(b).sum().backward()
    assert np.array_equal(a.grad.numpy(), b.grad.numpy())


def test_a_compiled_step_with_a_checkpoint_matches_eager():
    def losses(compiled):
        musa.manual_seed(0)
        l1, l2 = nn.Linear(8, 8), nn.Linear(8, 4)
        opt = musa.optim.SGD(list(l1.parameters()) + list(l2.parameters()), lr=0.1)

        def step(x):
            opt.zero_grad()
            h = checkpoint(lambda t: F.gelu(l1(t)), x, use_reentrant=False)
            loss = l2(h).pow(2).sum()
            loss.backward()
            opt.step()
            return loss.detach()

        step = musa.jit(step) if compiled else step
        x = musa.randn(5, 8)
        return [float(step(x)) for _ in range(4)]

    assert losses(True) == losses(False)


def test_bad_arguments_and_the_missing_use_reentrant_warning():
    with pytest.raises(TypeError, match=r"\[checkpoint\] function must be callable"):
        checkpoint(3, musa.randn(2), use_reentrant=False)
    with pytest.warns(UserWarning, match="pass use_reentrant explicitly"):
        checkpoint(lambda t: t * 2, musa.randn(2, requires_grad=True))
    seq = nn.Sequential(nn.Linear(2, 2))
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="segments must be a positive int"):
            checkpoint_sequential(seq, bad, musa.randn(1, 2), use_reentrant=False)
    with pytest.raises(TypeError, match="must be a Sequential or a list"):
        checkpoint_sequential(musa.randn(2), 1, musa.randn(1, 2), use_reentrant=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        checkpoint(lambda t: t * 2, musa.randn(2, requires_grad=True), use_reentrant=False)
