"""nn.AdaptiveLogSoftmaxWithLoss against torch 1.13: outputs, loss,
log_prob, predict and gradients with the same weights."""
import numpy as np
import pytest
import torch

import musa
import musa.nn as nn


def pair(head_bias):
    torch.manual_seed(0)
    t = torch.nn.AdaptiveLogSoftmaxWithLoss(16, 20, [4, 9, 15], div_value=2.0, head_bias=head_bias).double()
    m = nn.AdaptiveLogSoftmaxWithLoss(16, 20, [4, 9, 15], div_value=2.0, head_bias=head_bias).double()
    assert list(m.state_dict()) == list(t.state_dict())
    m.load_state_dict({k: musa.tensor(v.numpy()) for k, v in t.state_dict().items()})
    return m, t


@pytest.mark.parametrize("head_bias", [False, True])
def test_against_torch(head_bias):
    m, t = pair(head_bias)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(12, 16))
    y = np.array([0, 3, 4, 8, 9, 14, 15, 19, 2, 10, 16, 5])
    xm, xt = musa.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    om, ot = m(xm, musa.tensor(y)), t(xt, torch.tensor(y))
    np.testing.assert_allclose(om.output.detach().numpy(), ot.output.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(om.loss.item(), ot.loss.item(), rtol=1e-12)
    om.loss.backward()
    ot.loss.backward()
    np.testing.assert_allclose(xm.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-14)
    for (k, p), (_, q) in zip(m.named_parameters(), t.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-10, atol=1e-14, err_msg=k)
    lp = m.log_prob(musa.tensor(x)).detach().numpy()
    np.testing.assert_allclose(lp, t.log_prob(torch.tensor(x)).detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(np.exp(lp).sum(1), 1, rtol=1e-12)
    np.testing.assert_array_equal(m.predict(musa.tensor(x)).numpy(), t.predict(torch.tensor(x)).numpy())
    # unbatched: a 1-D input with a 0-d target
    o1 = m(musa.tensor(x[3]), musa.tensor(y[3]))
    assert o1.output.ndim == 0
    np.testing.assert_allclose(o1.output.item(), om.output[3].item(), rtol=1e-12)
    assert m.log_prob(musa.tensor(x[3])).shape == (20,) and m.predict(musa.tensor(x[3])).ndim == 0


def test_errors_and_nllloss2d():
    with pytest.raises(ValueError, match=r"\[AdaptiveLogSoftmaxWithLoss\] cutoffs"):
        nn.AdaptiveLogSoftmaxWithLoss(8, 10, [5, 3])
    with pytest.raises(ValueError, match=r"\[AdaptiveLogSoftmaxWithLoss\] cutoffs"):
        nn.AdaptiveLogSoftmaxWithLoss(8, 10, [2, 10])
    m = nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3])
    with pytest.raises(RuntimeError, match=r"Target values should be in \[0, 9\]"):
        m(musa.zeros(2, 8), musa.tensor([1, 10]))
    with pytest.raises(RuntimeError, match=r"same size in the batch"):
        m(musa.zeros(3, 8), musa.tensor([1, 2]))
    with pytest.raises(RuntimeError, match=r"multi-target not supported"):
        m(musa.zeros(2, 8), musa.zeros(2, 2, dtype=musa.int64))
    x, y = np.random.default_rng(0).normal(size=(4, 3, 2, 2)), np.array([[[0, 1], [2, 1]]] * 4)
    with pytest.warns(UserWarning, match="NLLLoss2d has been deprecated"):  # torch's
        tloss = torch.nn.NLLLoss2d()
    np.testing.assert_allclose(nn.NLLLoss2d()(musa.tensor(x), musa.tensor(y)).item(),
                               tloss(torch.tensor(x), torch.tensor(y)).item(), rtol=1e-12)
