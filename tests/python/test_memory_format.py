"""memory_format= (contiguous_format, channels_last, channels_last_3d,
preserve_format) against torch 1.13: strides, values, gradients."""
import numpy as np
import pytest
import torch

import musa
import musa.nn as nn

FORMATS = [(musa.channels_last, torch.channels_last, (2, 3, 4, 5)),
           (musa.channels_last_3d, torch.channels_last_3d, (2, 3, 2, 4, 5))]


@pytest.mark.parametrize("mf,tf,shape", FORMATS)
def test_strides_and_values_against_torch(mf, tf, shape):
    x = np.random.default_rng(0).normal(size=shape)
    m, t = musa.tensor(x), torch.tensor(x)
    a, b = m.contiguous(memory_format=mf), t.contiguous(memory_format=tf)
    assert a.stride() == b.stride() and np.array_equal(a.numpy(), x)
    assert a.is_contiguous(memory_format=mf) and not a.is_contiguous()
    assert a.contiguous(memory_format=mf) is a  # already so: itself
    for fn in ("zeros_like", "ones_like", "empty_like", "rand_like", "randn_like"):
        assert getattr(musa, fn)(a).stride() == getattr(torch, fn)(b).stride(), fn
        assert getattr(musa, fn)(m, memory_format=mf).stride() == getattr(torch, fn)(t, memory_format=tf).stride()
    assert musa.full_like(a, 2.0).stride() == torch.full_like(b, 2.0).stride()
    assert musa.randint_like(a, 5).stride() == torch.randint_like(b, 5).stride()
    assert a.clone().stride() == b.clone().stride() and musa.clone(a).stride() == b.stride()
    assert a.clone(memory_format=musa.contiguous_format).is_contiguous()
    assert m.clone(memory_format=mf).stride() == t.clone(memory_format=tf).stride()
    assert m.to(memory_format=mf).stride() == t.to(memory_format=tf).stride()
    assert m.to(musa.float32, memory_format=mf).dtype == musa.float32
    np.testing.assert_array_equal(a.contiguous().numpy(), x)
    # gradients pass through the layout changes
    g = musa.tensor(x, requires_grad=True)
    (g.contiguous(memory_format=mf) * 2).clone().sum().backward()
    np.testing.assert_array_equal(g.grad.numpy(), np.full(shape, 2.0))


def test_modules_and_errors():
    torch.manual_seed(0)
    t = torch.nn.Conv2d(3, 4, 3).double()
    m = nn.Conv2d(3, 4, 3).double()
    m.load_state_dict({k: musa.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
    w = m.weight
    m.to(memory_format=musa.channels_last)
    t.to(memory_format=torch.channels_last)
    assert m.weight is w and m.weight.stride() == t.weight.stride() and m.bias.stride() == (1,)
    x = np.random.default_rng(1).normal(size=(2, 3, 6, 6))
    out = m(musa.tensor(x).contiguous(memory_format=musa.channels_last))
    np.testing.assert_allclose(out.detach().numpy(),
                               t(torch.tensor(x).contiguous(memory_format=torch.channels_last)).detach().numpy(),
                               rtol=1e-12, atol=1e-12)
    with pytest.raises(RuntimeError, match=r"\[Tensor.contiguous\] preserve memory format"):
        musa.zeros(2, 2).contiguous(memory_format=musa.preserve_format)
    with pytest.raises(ValueError, match=r"\[Tensor.contiguous\] required rank 4"):
        musa.zeros(2, 2).contiguous(memory_format=musa.channels_last)
    with pytest.raises(ValueError, match=r"\[Tensor.is_contiguous\] memory_format must be"):
        musa.zeros(2, 2).is_contiguous(memory_format="channels_last")
    assert not musa.zeros(2, 2).is_contiguous(memory_format=musa.channels_last)
    assert repr(musa.channels_last) == "musa.channels_last"
    import pickle
    assert pickle.loads(pickle.dumps(musa.channels_last)) is musa.channels_last


def test_convert_conv2d_weight_memory_format():
    from musa.nn.utils import convert_conv2d_weight_memory_format
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Sequential(nn.ConvTranspose2d(4, 2, 3)), nn.Linear(2, 2))
    tnet = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(),
                               torch.nn.Sequential(torch.nn.ConvTranspose2d(4, 2, 3)), torch.nn.Linear(2, 2))
    assert convert_conv2d_weight_memory_format(net, musa.channels_last) is net
    torch.nn.utils.convert_conv2d_weight_memory_format(tnet, torch.channels_last)
    assert net[0].weight.stride() == tnet[0].weight.stride()
    assert net[2][0].weight.stride() == tnet[2][0].weight.stride()
    assert net[3].weight.stride() == tnet[3].weight.stride() == (2, 1)
