"""nn.utils.weight_norm and spectral_norm against torch from the same
parameters (and, for spectral_norm, the same power-iteration vectors):
outputs and gradients over several training steps, eval mode, removal."""
import numpy as np
import pytest
import torch

import musa
import musa.nn as nn


def copy_into(m, t):
    m.load_state_dict({k: musa.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})


@pytest.mark.parametrize("make,dim", [(lambda L: L.nn.Linear(5, 3), 0), (lambda L: L.nn.Linear(5, 3), None),
                                      (lambda L: L.nn.Conv2d(2, 4, 3), 1), (lambda L: L.nn.Linear(5, 3), -1)])
def test_weight_norm_matches_torch(make, dim):
    torch.manual_seed(0)
    t = torch.nn.utils.weight_norm(make(torch).double(), dim=dim)
    m = nn.utils.weight_norm(make(musa).double(), dim=dim)
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in t.named_parameters()]
    copy_into(m, t)
    shape = (2, 5) if isinstance(t, torch.nn.Linear) else (1, 2, 5, 5)
    x = np.random.default_rng(0).standard_normal(shape)
    mo, to = m(musa.tensor(x)), t(torch.tensor(x))
    np.testing.assert_allclose(mo.detach().numpy(), to.detach().numpy(), rtol=1e-12)
    (mo ** 2).sum().backward()
    (to ** 2).sum().backward()
    for (n, p), q in zip(m.named_parameters(), t.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=n)
    nn.utils.remove_weight_norm(m)
    torch.nn.utils.remove_weight_norm(t)
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in t.named_parameters()]
    np.testing.assert_allclose(m.weight.detach().numpy(), t.weight.detach().numpy(), rtol=1e-12)


@pytest.mark.parametrize("make,shape", [(lambda L: L.nn.Linear(6, 4), (3, 6)),
                                        (lambda L: L.nn.Conv2d(2, 3, 3), (2, 2, 5, 5)),
                                        (lambda L: L.nn.ConvTranspose2d(3, 2, 3), (2, 3, 4, 4))])
def test_spectral_norm_matches_torch_over_training_steps(make, shape):
    torch.manual_seed(1)
    t = torch.nn.utils.spectral_norm(make(torch).double(), n_power_iterations=2)
    m = nn.utils.spectral_norm(make(musa).double(), n_power_iterations=2)
    assert sorted(m.state_dict()) == sorted(t.state_dict())
    copy_into(m, t)  # weight_orig, bias and the power-iteration vectors u, v
    mopt = musa.optim.SGD(m.parameters(), lr=0.1)
    topt = torch.optim.SGD(t.parameters(), lr=0.1)
    x = np.random.default_rng(2).standard_normal(shape)
    for _ in range(3):
        mopt.zero_grad()
        topt.zero_grad()
        mo, to = m(musa.tensor(x)), t(torch.tensor(x))
        np.testing.assert_allclose(mo.detach().numpy(), to.detach().numpy(), rtol=1e-10, atol=1e-12)
        (mo ** 2).sum().backward()
        (to ** 2).sum().backward()
        mopt.step()
        topt.step()
    np.testing.assert_allclose(m.weight_u.numpy(), t.weight_u.numpy(), rtol=1e-10)
    m.eval(), t.eval()
    u = m.weight_u.numpy().copy()
    np.testing.assert_allclose(m(musa.tensor(x)).detach().numpy(), t(torch.tensor(x)).detach().numpy(), rtol=1e-10)
    np.testing.assert_array_equal(m.weight_u.numpy(), u)  # eval: no power iteration
    nn.utils.remove_spectral_norm(m)
    torch.nn.utils.remove_spectral_norm(t)
    np.testing.assert_allclose(m.weight.detach().numpy(), t.weight.detach().numpy(), rtol=1e-10)


def test_spectral_norm_bounds_the_largest_singular_value():
    lin = nn.utils.spectral_norm(nn.Linear(8, 8))
    for _ in range(20):
        lin(musa.randn(1, 8))
    assert abs(float(musa.linalg.svdvals(lin.weight.detach()).max()) - 1.0) < 1e-3


def test_errors():
    lin = nn.utils.weight_norm(nn.Linear(2, 2))
    with pytest.raises(RuntimeError, match="two weight_norm hooks"):
        nn.utils.weight_norm(lin)
    with pytest.raises(ValueError, match="no parameter named 'bias2'"):
        nn.utils.weight_norm(nn.Linear(2, 2), name="bias2")
    with pytest.raises(ValueError, match="not found"):
        nn.utils.remove_spectral_norm(nn.Linear(2, 2))
    with pytest.raises(ValueError, match="n_power_iterations to be positive"):
        nn.utils.spectral_norm(nn.Linear(2, 2), n_power_iterations=0)
