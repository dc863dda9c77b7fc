"""F.ctc_loss and nn.CTCLoss against torch: padded and concatenated
targets, unequal lengths, repeated labels, every reduction, zero_infinity,
unbatched input, the gradient of the logits under log_softmax, and the
errors.

PyTorch's gradient with respect to log_probs is the logits' gradient
(softmax - posterior): it adds exp(log_probs), which log_softmax's backward
removes. musa's is the derivative of the loss (- posterior); through
log_softmax both give the same gradient, which is what the tests compare."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import musa
import musa.nn as nn
import musa.nn.functional as F

RNG = np.random.default_rng(71)


def case(T=12, N=4, C=6, S=5, repeat=True):
    x = RNG.standard_normal((T, N, C))
    lp = x - np.log(np.exp(x).sum(-1, keepdims=True))
    il = RNG.integers(T // 2, T + 1, N)
    il[0] = T
    tl = RNG.integers(1, S + 1, N)
    tl[-1] = 0 if N > 2 else tl[-1]  # an empty target
    tg = RNG.integers(1, C, (N, S))
    if repeat:
        tg[0, :2] = tg[0, 0]  # a repeated label needs a blank between
    return lp, tg, il, tl


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("concat", [False, True])
def test_values_and_gradient_against_torch(reduction, concat):
    lp, tg, il, tl = case()
    tgt = np.concatenate([tg[i, :tl[i]] for i in range(len(tl))]) if concat else tg
    m_lp, t_lp = musa.tensor(lp, requires_grad=True), torch.tensor(lp, requires_grad=True)
    m = F.ctc_loss(F.log_softmax(m_lp, -1), musa.tensor(tgt), musa.tensor(il), musa.tensor(tl),
                   reduction=reduction)
    t = TF.ctc_loss(TF.log_softmax(t_lp, -1), torch.tensor(tgt), torch.tensor(il),
                    torch.tensor(tl), reduction=reduction)
    np.testing.assert_allclose(m.detach().numpy(), t.detach().numpy(), rtol=1e-10, atol=1e-10)
    w = RNG.standard_normal(tuple(t.shape))
    (m * musa.tensor(w)).sum().backward()
    (t * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(m_lp.grad.numpy(), t_lp.grad.numpy(), rtol=1e-8, atol=1e-8)


def test_impossible_alignments_and_zero_infinity():
    lp, tg, il, tl = case(T=4, N=2, S=4)
    tl = np.array([4, 1])
    tg[0] = [2, 2, 2, 2]  # needs 7 frames, has 4
    for zi in (False, True):
        m_lp, t_lp = musa.tensor(lp, requires_grad=True), torch.tensor(lp, requires_grad=True)
        m = F.ctc_loss(F.log_softmax(m_lp, -1), musa.tensor(tg), [4, 4], musa.tensor(tl),
                       reduction="none", zero_infinity=zi)
        t = TF.ctc_loss(TF.log_softmax(t_lp, -1), torch.tensor(tg), torch.tensor([4, 4]),
                        torch.tensor(tl),
                        reduction="none", zero_infinity=zi)
        np.testing.assert_allclose(m.detach().numpy(), t.detach().numpy(), rtol=1e-10)
        m.sum().backward() if zi else m[1].backward()
        t.sum().backward() if zi else t[1].backward()
        assert np.isfinite(m_lp.grad.numpy()).all()
        # without zero_infinity PyTorch's gradient of the impossible sequence
        # is NaN even where its loss is not differentiated; musa's is 0
        k = slice(None) if zi else slice(1, 2)
        np.testing.assert_allclose(m_lp.grad.numpy()[:, k], t_lp.grad.numpy()[:, k], rtol=1e-8,
                                   atol=1e-8)


def test_float32_unbatched_blank_and_module():
    lp, tg, il, tl = case(N=1)
    lp32 = lp[:, 0].astype(np.float32)
    m = nn.CTCLoss(blank=2)(musa.tensor(lp32), musa.tensor(tg[0, :3]), [12], [3])
    t = torch.nn.CTCLoss(blank=2)(torch.tensor(lp32), torch.tensor(tg[0, :3]), [12], [3])
    assert m.dtype == musa.float32
    np.testing.assert_allclose(m.item(), t.item(), rtol=1e-5)
    m = F.ctc_loss(musa.tensor(lp32), musa.tensor(tg[0, :3]), [12], [3], reduction="none")
    assert m.shape == ()


def test_gradcheck():
    lp, tg, il, tl = case(T=5, N=2, C=4, S=2)
    x = musa.tensor(lp, requires_grad=True)
    assert musa.autograd.gradcheck(
        lambda a: F.ctc_loss(F.log_softmax(a, -1), musa.tensor(tg), [5, 4], [2, 1]), (x,))


def test_errors_name_the_function():
    lp = musa.zeros(5, 2, 4)
    tg = musa.tensor([[1, 2], [1, 1]])
    with pytest.raises(ValueError, match=r"\[ctc_loss\] input_lengths must be at most T = 5"):
        F.ctc_loss(lp, tg, [6, 5], [2, 2])
    with pytest.raises(ValueError, match=r"\[ctc_loss\] target_lengths must have one entry per "
                                         r"sequence \(2\), got 3"):
        F.ctc_loss(lp, tg, [5, 5], [2, 2, 2])
    with pytest.raises(ValueError, match=r"\[ctc_loss\] targets must be class indices in \[0, 4\)"):
        F.ctc_loss(lp, musa.tensor([[1, 9], [1, 1]]), [5, 5], [2, 2])
    with pytest.raises(ValueError, match=r"\[ctc_loss\] reduction must be"):
        F.ctc_loss(lp, tg, [5, 5], [2, 2], reduction="avg")
    with pytest.raises(TypeError, match=r"\[ctc_loss\] targets must be integer class indices"):
        F.ctc_loss(lp, tg.float(), [5, 5], [2, 2])
    with pytest.raises(ValueError, match=r"\[ctc_loss\] blank must be in \[0, 4\)"):
        F.ctc_loss(lp, tg, [5, 5], [2, 2], blank=4)
    for bad in (object(), 1.5, "0"):  # fuzz seed 9756: '<=' between int and object
        with pytest.raises(TypeError, match=r"\[ctc_loss\] blank must be an int"):
            F.ctc_loss(lp, tg, [5, 5], [2, 2], blank=bad)
