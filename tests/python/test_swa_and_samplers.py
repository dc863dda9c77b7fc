"""torch.optim.swa_utils (AveragedModel, SWALR, update_bn),
WeightedRandomSampler and ChainDataset, against torch 1.13."""
import collections

import numpy as np
import pytest
import torch

import musa
import musa.nn as nn
from musa.optim.swa_utils import SWALR, AveragedModel, update_bn
from musa.utils.data import ChainDataset, DataLoader, IterableDataset, TensorDataset, WeightedRandomSampler


def pair_models():
    torch.manual_seed(0)
    t = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.BatchNorm1d(6), torch.nn.ReLU(),
                            torch.nn.Linear(6, 2)).double()
    m = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 2)).double()
    m.load_state_dict({k: musa.tensor(v.numpy()) for k, v in t.state_dict().items()})
    return m, t


def perturb(m, t, step):
    rng = np.random.default_rng(step)
    with torch.no_grad(), musa.no_grad():
        for (_, pm), (_, pt) in zip(m.named_parameters(), t.named_parameters()):
            d = rng.normal(size=tuple(pt.shape))
            pm += musa.tensor(d)
            pt += torch.tensor(d)


@pytest.mark.parametrize("ema", [False, True])
def test_averaged_model_against_torch(ema):
    m, t = pair_models()
    avg = (lambda a, p, n: 0.9 * a + 0.1 * p) if ema else None
    am, at = AveragedModel(m, avg_fn=avg), torch.optim.swa_utils.AveragedModel(t, avg_fn=avg)
    for step in range(4):
        perturb(m, t, step)
        am.update_parameters(m)
        at.update_parameters(t)
    assert am.n_averaged.item() == at.n_averaged.item() == 4
    for (k, a), (_, b) in zip(am.module.state_dict().items(), at.module.state_dict().items()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-13, atol=1e-15, err_msg=k)
    x = np.random.default_rng(9).normal(size=(5, 4))
    am.eval(), at.eval()
    np.testing.assert_allclose(am(musa.tensor(x)).detach().numpy(), at(torch.tensor(x)).detach().numpy(),
                               rtol=1e-12)
    with pytest.raises(ValueError, match=r"\[AveragedModel\]"):
        am.update_parameters(nn.Linear(4, 6).double())
    with pytest.raises(TypeError, match=r"\[AveragedModel\] model must be a Module"):
        AveragedModel(3)


@pytest.mark.parametrize("strategy,epochs", [("cos", 5), ("linear", 3), ("cos", 0)])
def test_swalr_against_torch(strategy, epochs):
    pm, pt = musa.zeros(2, requires_grad=True), torch.zeros(2, requires_grad=True)
    om = musa.optim.SGD([{"params": [pm]}, {"params": [musa.zeros(1, requires_grad=True)], "lr": 0.3}], lr=0.1)
    ot = torch.optim.SGD([{"params": [pt]}, {"params": [torch.zeros(1, requires_grad=True)], "lr": 0.3}], lr=0.1)
    sm = SWALR(om, swa_lr=[0.05, 0.01], anneal_epochs=epochs, anneal_strategy=strategy)
    st = torch.optim.swa_utils.SWALR(ot, swa_lr=[0.05, 0.01], anneal_epochs=epochs,
                                     anneal_strategy=strategy)
    for _ in range(8):
        om.step(), ot.step()
        sm.step(), st.step()
        np.testing.assert_allclose(sm.get_last_lr(), st.get_last_lr(), rtol=1e-15)
    with pytest.raises(ValueError, match=r"\[SWALR\] anneal_strategy"):
        SWALR(om, 0.1, anneal_strategy="step")
    with pytest.raises(ValueError, match=r"\[SWALR\] anneal_epochs"):
        SWALR(om, 0.1, anneal_epochs=-1)
    with pytest.raises(ValueError, match=r"\[SWALR\] swa_lr must have the same length"):
        SWALR(om, [0.1])


def test_update_bn_against_torch():
    m, t = pair_models()
    x = np.random.default_rng(4).normal(size=(40, 4))
    dm = DataLoader(TensorDataset(musa.tensor(x), musa.zeros(40)), batch_size=8)
    dt = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.tensor(x), torch.zeros(40)),
                                     batch_size=8)
    m.eval(), t.eval()
    update_bn(dm, m)
    torch.optim.swa_utils.update_bn(dt, t)
    assert not m.training and m[1].momentum == 0.1
    for k in ("running_mean", "running_var", "num_batches_tracked"):
        np.testing.assert_allclose(getattr(m[1], k).numpy(), getattr(t[1], k).numpy(), rtol=1e-12)
    update_bn([musa.tensor(x)], nn.Linear(4, 2))  # no batch norm: nothing to do


def test_weighted_random_sampler():
    musa.manual_seed(0)
    w = [0.1, 0.0, 0.9, 2.0]
    counts = collections.Counter(WeightedRandomSampler(w, 30000))
    assert counts[1] == 0
    for i, p in ((0, 0.1 / 3), (2, 0.3), (3, 2 / 3)):
        assert abs(counts[i] / 30000 - p) < 4 * (p * (1 - p) / 30000) ** 0.5 + 1e-3
    s = list(WeightedRandomSampler(musa.tensor([1.0, 1.0, 5.0, 0.0]), 3, replacement=False))
    assert sorted(s) == [0, 1, 2]
    g = musa.Generator().manual_seed(5)
    a = list(WeightedRandomSampler(w, 10, generator=g))
    g.manual_seed(5)
    assert a == list(WeightedRandomSampler(w, 10, generator=g)) and len(WeightedRandomSampler(w, 10)) == 10
    batches = list(DataLoader(TensorDataset(musa.arange(4)), batch_size=5, sampler=WeightedRandomSampler(w, 5)))
    assert batches[0][0].shape == (5,) and 1 not in batches[0][0].tolist()
    with pytest.raises(ValueError, match=r"\[WeightedRandomSampler\] num_samples"):
        WeightedRandomSampler(w, 0)
    with pytest.raises(ValueError, match=r"\[WeightedRandomSampler\] replacement"):
        WeightedRandomSampler(w, 2, replacement=1)
    with pytest.raises(ValueError, match=r"\[WeightedRandomSampler\] cannot draw 4"):
        WeightedRandomSampler(w, 4, replacement=False)
    with pytest.raises(ValueError, match=r"\[WeightedRandomSampler\] weights should be a 1-D"):
        WeightedRandomSampler([[1.0, 2.0]], 2)


def test_chain_dataset():
    class Count(IterableDataset):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return iter(range(self.n))

        def __len__(self):
            return self.n

    c = ChainDataset([Count(2), Count(3)])
    assert list(c) == [0, 1, 0, 1, 2] and len(c) == 5
    assert [b.tolist() for b in DataLoader(c, batch_size=2)] == [[0, 1], [0, 1], [2]]
    with pytest.raises(TypeError, match=r"\[ChainDataset\] only supports IterableDataset"):
        list(ChainDataset([Count(1), TensorDataset(musa.zeros(2))]))
