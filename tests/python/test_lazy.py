"""Lazy layers against torch's: the sizes read from the first input, the
class they become, parameters initialised as the regular layer's (same
seed, same values), identity kept for an optimizer made before, loading a
state_dict into a lazy layer, a compiled step after the first call, and the
errors."""
import numpy as np
import pytest
import torch

import musa
import musa.nn as nn

RNG = np.random.default_rng(61)

LAYERS = [
    ("LazyLinear", (5,), (3, 7), "Linear"),
    ("LazyConv1d", (4, 3), (2, 6, 9), "Conv1d"),
    ("LazyConv2d", (4, 3), (2, 6, 8, 8), "Conv2d"),
    ("LazyConv3d", (4, 2), (2, 3, 4, 4, 4), "Conv3d"),
    ("LazyConvTranspose1d", (4, 3), (2, 6, 9), "ConvTranspose1d"),
    ("LazyConvTranspose2d", (4, 3), (2, 6, 5, 5), "ConvTranspose2d"),
    ("LazyConvTranspose3d", (2, 2), (1, 3, 3, 3, 3), "ConvTranspose3d"),
    ("LazyBatchNorm1d", (), (4, 6), "BatchNorm1d"),
    ("LazyBatchNorm2d", (), (4, 6, 3, 3), "BatchNorm2d"),
    ("LazyBatchNorm3d", (), (2, 3, 2, 2, 2), "BatchNorm3d"),
    ("LazyInstanceNorm1d", (), (2, 5, 7), "InstanceNorm1d"),
    ("LazyInstanceNorm2d", (), (2, 5, 4, 4), "InstanceNorm2d"),
    ("LazyInstanceNorm3d", (), (2, 3, 2, 3, 3), "InstanceNorm3d"),
]


@pytest.mark.parametrize("name,args,shape,becomes", LAYERS)
def test_first_call_sizes_initialises_and_becomes_the_layer(name, args, shape, becomes):
    x = RNG.standard_normal(shape).astype(np.float32)
    m = getattr(nn, name)(*args)
    assert m.has_uninitialized_params() == (not name.startswith("LazyInstanceNorm"))
    y = m(musa.tensor(x))
    assert type(m) is getattr(nn, becomes) and not hasattr(m, "has_uninitialized_params")
    n_in = shape[-1] if becomes == "Linear" else shape[1]
    t = getattr(torch.nn, becomes)(n_in, *args)
    assert [k for k in m.state_dict()] == [k for k in t.state_dict()]
    for k, v in t.state_dict().items():
        assert tuple(m.state_dict()[k].shape) == tuple(v.shape), k
    # the regular layer's values: copy torch's parameters in and compare outputs
    m.load_state_dict({k: musa.tensor(v.numpy()) for k, v in t.state_dict().items()})
    t.train()
    np.testing.assert_allclose(m(musa.tensor(x)).detach().numpy(), t(torch.tensor(x)).detach().numpy(),
                               rtol=1e-4, atol=1e-5)
    assert y.shape == tuple(t(torch.tensor(x)).shape)


def test_initialisation_matches_the_regular_layer_under_one_seed():
    musa.manual_seed(3)
    lazy = nn.LazyLinear(4)
    lazy(musa.zeros(2, 6))
    musa.manual_seed(3)
    eager = nn.Linear(6, 4)
    assert np.array_equal(lazy.weight.detach().numpy(), eager.weight.detach().numpy())
    assert np.array_equal(lazy.bias.detach().numpy(), eager.bias.detach().numpy())


def test_an_optimizer_made_before_the_first_call_trains_the_real_parameters():
    m = nn.Sequential(nn.LazyLinear(8), nn.ReLU(), nn.LazyLinear(1))
    params = list(m.parameters())
    opt = musa.optim.SGD(params, lr=0.1)
    x, y = musa.randn(16, 3), musa.randn(16, 1)
    m(x)  # the dry run
    assert [p is q for p, q in zip(params, m.parameters())] == [True] * 4
    before = m[0].weight.detach().numpy().copy()
    loss = ((m(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    assert not np.array_equal(before, m[0].weight.detach().numpy())
    assert m[0].weight.shape == (8, 3)


def test_loading_a_state_dict_sizes_a_lazy_layer():
    src = nn.Conv2d(3, 4, 3)
    lazy = nn.LazyConv2d(4, 3)
    lazy.load_state_dict(src.state_dict())
    assert not lazy.has_uninitialized_params() and lazy.in_channels == 3
    x = musa.randn(1, 3, 6, 6)
    np.testing.assert_array_equal(lazy(x).detach().numpy(), src(x).detach().numpy())
    assert type(lazy) is nn.Conv2d
    bn = nn.LazyBatchNorm2d()
    bn.load_state_dict(nn.BatchNorm2d(5).state_dict())
    assert bn.num_features == 5 and bn.running_mean.shape == (5,)


def test_unbatched_inputs_and_groups():
    c = nn.LazyConv1d(6, 3, groups=2)
    c(musa.randn(4, 10))  # unbatched: channels are dim 0
    assert c.in_channels == 4 and c.weight.shape == (6, 2, 3)
    inorm = nn.LazyInstanceNorm2d(affine=True)
    inorm(musa.randn(3, 4, 4))
    assert inorm.num_features == 3 and inorm.weight.shape == (3,)


def test_compiled_after_the_first_call():
    m = nn.Sequential(nn.LazyConv2d(4, 3), nn.LazyBatchNorm2d(), nn.ReLU())
    x = musa.randn(2, 3, 6, 6)
    m.eval()
    m(x)
    np.testing.assert_array_equal(musa.jit(m)(x).detach().numpy(), m(x).detach().numpy())


def test_errors_name_the_layer():
    with pytest.raises(ValueError, match=r"\[LazyConv2d\] expected a 3D \(unbatched\) or 4D "
                                         r"\(batched\) input, got shape \(2, 3\)"):
        nn.LazyConv2d(4, 3)(musa.zeros(2, 3))
    with pytest.raises(ValueError, match=r"\[LazyConv1d\] in_channels \(3\) must be divisible by "
                                         r"groups \(2\)"):
        nn.LazyConv1d(4, 3, groups=2)(musa.zeros(1, 3, 8))
    with pytest.raises(ValueError, match=r"\[LazyLinear\] expected an input of at least 1 dim"):
        nn.LazyLinear(3)(musa.tensor(1.0))
    lazy = nn.LazyLinear(3)
    assert repr(lazy.weight) == "<UninitializedParameter>"
    with pytest.raises(Exception, match=r"linear"):  # an uninitialized weight is no weight
        musa.nn.functional.linear(musa.zeros(2, 4), lazy.weight)
