"""nn.utils.fusion, stateless.functional_call, skip_init and the
clip_grad_norm alias, against torch 1.13."""
import warnings

import numpy as np
import pytest
import torch

import musa
import musa.nn as nn
from musa.nn.utils import (clip_grad_norm, fuse_conv_bn_eval, fuse_linear_bn_eval, skip_init,
                           stateless)


def copy_into(m, t):
    m.load_state_dict({k: musa.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})


@pytest.mark.parametrize("kind", ["conv", "convT", "linear", "conv_nobias"])
def test_fusion_against_torch(kind):
    torch.manual_seed(0)
    if kind == "linear":
        t, tb = torch.nn.Linear(5, 4).double(), torch.nn.BatchNorm1d(4).double()
        m, mb = nn.Linear(5, 4).double(), nn.BatchNorm1d(4).double()
        x = np.random.default_rng(0).normal(size=(6, 5))
    elif kind == "convT":
        t, tb = torch.nn.ConvTranspose2d(3, 4, 3).double(), torch.nn.BatchNorm2d(4).double()
        m, mb = nn.ConvTranspose2d(3, 4, 3).double(), nn.BatchNorm2d(4).double()
        x = np.random.default_rng(0).normal(size=(2, 3, 5, 5))
    else:
        bias = kind == "conv"
        t, tb = torch.nn.Conv2d(3, 4, 3, bias=bias).double(), torch.nn.BatchNorm2d(4).double()
        m, mb = nn.Conv2d(3, 4, 3, bias=bias).double(), nn.BatchNorm2d(4).double()
        x = np.random.default_rng(0).normal(size=(2, 3, 6, 6))
    with torch.no_grad():  # statistics and affine parameters that are not the defaults
        tb.running_mean.uniform_(-1, 1), tb.running_var.uniform_(0.5, 2)
        tb.weight.uniform_(0.5, 1.5), tb.bias.uniform_(-1, 1)
    copy_into(m, t), copy_into(mb, tb)
    for mod in (t, tb, m, mb):
        mod.eval()
    if kind == "linear":
        fm, ft = fuse_linear_bn_eval(m, mb), torch.nn.utils.fusion.fuse_linear_bn_eval(t, tb)
    else:
        fm = fuse_conv_bn_eval(m, mb, transpose=kind == "convT")
        ft = torch.nn.utils.fusion.fuse_conv_bn_eval(t, tb, transpose=kind == "convT")
    np.testing.assert_allclose(fm.weight.detach().numpy(), ft.weight.detach().numpy(), rtol=1e-13)
    np.testing.assert_allclose(fm.bias.detach().numpy(), ft.bias.detach().numpy(), rtol=1e-13, atol=1e-15)
    # the fused layer computes what the pair did
    np.testing.assert_allclose(fm(musa.tensor(x)).detach().numpy(), mb(m(musa.tensor(x))).detach().numpy(),
                               rtol=1e-10, atol=1e-12)
    m.train()
    with pytest.raises(AssertionError, match=r"Fusion only for eval"):
        fuse_linear_bn_eval(m, mb) if kind == "linear" else fuse_conv_bn_eval(m, mb)


def test_functional_call():
    torch.manual_seed(0)
    t = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2)).double()
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2)).double()
    copy_into(m, t)
    m.eval(), t.eval()
    x = np.random.default_rng(1).normal(size=(5, 3))
    w = np.random.default_rng(2).normal(size=(2, 4))
    mw, tw = musa.tensor(w, requires_grad=True), torch.tensor(w, requires_grad=True)
    rm = np.linspace(-1, 1, 4)
    om = stateless.functional_call(m, {"2.weight": mw, "1.running_mean": musa.tensor(rm)}, (musa.tensor(x),))
    ot = torch.nn.utils.stateless.functional_call(t, {"2.weight": tw, "1.running_mean": torch.tensor(rm)},
                                                  (torch.tensor(x),))
    np.testing.assert_allclose(om.detach().numpy(), ot.detach().numpy(), rtol=1e-12)
    om.sum().backward(), ot.sum().backward()
    np.testing.assert_allclose(mw.grad.numpy(), tw.grad.numpy(), rtol=1e-12)
    assert m[2].weight.grad is None  # the module's own parameter was not used
    # and the module is its own again
    np.testing.assert_allclose(m(musa.tensor(x)).detach().numpy(), t(torch.tensor(x)).detach().numpy(), rtol=1e-12)
    assert isinstance(m[2].weight, nn.Parameter)
    with pytest.raises(AttributeError, match=r"\[functional_call\].*'nope'"):
        stateless.functional_call(m, {"2.nope": mw}, (musa.tensor(x),))
    with pytest.raises(AttributeError, match=r"\[functional_call\].*submodule '7'"):
        stateless.functional_call(m, {"7.weight": mw}, (musa.tensor(x),))
    np.testing.assert_allclose(m(musa.tensor(x)).detach().numpy(), t(torch.tensor(x)).detach().numpy(), rtol=1e-12)


def test_skip_init_and_clip_grad_norm():
    lin = skip_init(nn.Linear, 3, 4, bias=False)
    assert isinstance(lin, nn.Linear) and lin.weight.shape == (4, 3) and lin.bias is None

    class NoDevice(nn.Module):
        def __init__(self, n):
            super().__init__()

    with pytest.raises(RuntimeError, match=r"\[skip_init\] Module must support a 'device' arg"):
        skip_init(NoDevice, 3)
    p = nn.Parameter(musa.tensor([3.0, 4.0]))
    p.grad = musa.tensor([3.0, 4.0])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        total = clip_grad_norm([p], 1.0)
    assert any("deprecated" in str(x.message) for x in w)
    assert abs(total.item() - 5.0) < 1e-6 and abs(p.grad.norm().item() - 1.0) < 1e-5
