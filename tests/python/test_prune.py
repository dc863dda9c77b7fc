"""musa.nn.utils.prune against torch 1.13's torch.nn.utils.prune: the masks
of every deterministic method (L1, Ln structured for several norms,
importance scores, global pruning, custom masks) and of methods applied one
after another, the parametrisation (weight_orig, weight_mask, the hook),
gradients through the mask, remove(), the random methods' counts, a pruned
model compiled, and the errors."""
import numpy as np
import pytest

import musa
import musa.nn as nn
import musa.nn.utils.prune as prune

torch = pytest.importorskip("torch")
tprune = pytest.importorskip("torch.nn.utils.prune")

W = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
W2 = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)


def pair(w=W):
    m = nn.Linear(w.shape[1], w.shape[0])
    t = torch.nn.Linear(w.shape[1], w.shape[0])
    with musa.no_grad():
        m.weight.copy_(musa.tensor(w))
        m.bias.zero_()
    with torch.no_grad():
        t.weight.copy_(torch.tensor(w))
        t.bias.zero_()
    return m, t


def same_mask(m, t, name="weight"):
    a = getattr(m, name + "_mask").numpy()
    b = getattr(t, name + "_mask").numpy()
    assert a.tolist() == b.tolist(), (a, b)
    np.testing.assert_array_equal(getattr(m, name).detach().numpy(),
                                  getattr(t, name).detach().numpy())


STEPS = [
    [("l1_unstructured", dict(amount=0.3))],
    [("l1_unstructured", dict(amount=7))],
    [("ln_structured", dict(amount=1, n=2, dim=0))],
    [("ln_structured", dict(amount=0.5, n=float("inf"), dim=1))],
    [("ln_structured", dict(amount=2, n=1, dim=-1))],
    [("ln_structured", dict(amount=2, n="fro", dim=0))],
    [("ln_structured", dict(amount=1, n=-float("inf"), dim=0))],
    [("l1_unstructured", dict(amount=0.0))],
    [("identity", {}), ("l1_unstructured", dict(amount=5))],
    [("l1_unstructured", dict(amount=0.3)), ("ln_structured", dict(amount=1, n=2, dim=0)),
     ("l1_unstructured", dict(amount=2))],
    [("ln_structured", dict(amount=2, n=1, dim=1)), ("ln_structured", dict(amount=1, n=2, dim=1))],
    [("l1_unstructured", dict(amount=4)), ("custom_from_mask", dict(mask=None))],
]


@pytest.mark.parametrize("steps", range(len(STEPS)))
def test_masks_against_torch(steps):
    m, t = pair()
    custom = (np.arange(24).reshape(4, 6) % 3 != 0).astype(np.float32)
    for fn, kw in STEPS[steps]:
        kw_m, kw_t = dict(kw), dict(kw)
        if "mask" in kw:
            kw_m["mask"], kw_t["mask"] = musa.tensor(custom), torch.tensor(custom)
        getattr(prune, fn)(m, "weight", **kw_m)
        getattr(tprune, fn)(t, "weight", **kw_t)
        same_mask(m, t)
    assert sorted(n for n, _ in m.named_parameters()) == ["bias", "weight_orig"]
    assert sorted(n for n, _ in m.named_buffers()) == ["weight_mask"]
    hooks = list(m._forward_pre_hooks.values())
    assert len(hooks) == 1
    kind = type(hooks[0]).__name__
    assert kind == type(list(t._forward_pre_hooks.values())[0]).__name__


def test_importance_scores_and_global_pruning():
    m, t = pair()
    scores = np.arange(24, dtype=np.float32).reshape(4, 6)[::-1].copy()
    prune.l1_unstructured(m, "weight", amount=5, importance_scores=musa.tensor(scores))
    tprune.l1_unstructured(t, "weight", amount=5, importance_scores=torch.tensor(scores))
    same_mask(m, t)
    m, t = pair()
    m2, t2 = pair(W2)
    prune.l1_unstructured(m2, "weight", amount=3)  # an earlier mask is kept and counted
    tprune.l1_unstructured(t2, "weight", amount=3)
    prune.global_unstructured([(m, "weight"), (m2, "weight"), (m, "bias")],
                              pruning_method=prune.L1Unstructured, amount=0.4)
    tprune.global_unstructured([(t, "weight"), (t2, "weight"), (t, "bias")],
                               pruning_method=tprune.L1Unstructured, amount=0.4)
    same_mask(m, t)
    same_mask(m2, t2)
    same_mask(m, t, "bias")


def test_gradients_remove_and_state_dict():
    m, t = pair()
    prune.l1_unstructured(m, "weight", amount=10)
    tprune.l1_unstructured(t, "weight", amount=10)
    x = np.random.default_rng(2).standard_normal((3, 6)).astype(np.float32)
    (m(musa.tensor(x)) ** 2).sum().backward()
    (t(torch.tensor(x)) ** 2).sum().backward()
    np.testing.assert_allclose(m.weight_orig.grad.numpy(), t.weight_orig.grad.numpy(),
                               rtol=1e-5, atol=1e-6)
    assert bool((m.weight_orig.grad.numpy()[m.weight_mask.numpy() == 0] == 0).all())
    assert list(m.state_dict()) == list(t.state_dict())
    assert prune.is_pruned(nn.Sequential(m))
    prune.remove(m, "weight")
    tprune.remove(t, "weight")
    assert sorted(n for n, _ in m.named_parameters()) == ["bias", "weight"]
    assert isinstance(m.weight, nn.Parameter) and not m._forward_pre_hooks
    np.testing.assert_array_equal(m.weight.detach().numpy(), t.weight.detach().numpy())
    assert not prune.is_pruned(m)


def test_random_methods():
    musa.manual_seed(0)
    m, _ = pair()
    prune.random_unstructured(m, "weight", amount=5)
    assert int((m.weight_mask == 0).sum()) == 5
    prune.random_structured(m, "weight", amount=2, dim=1)
    assert int((m.weight_mask.sum(0) == 0).sum()) >= 2
    prune.random_unstructured(m, "weight", amount=0.5)
    kept = int(m.weight_mask.sum())
    assert kept == round(kept)  # a further half of what was left
    lin = nn.Linear(4, 4)
    prune.random_structured(lin, "weight", amount=4, dim=0)
    assert float(lin.weight_mask.sum()) == 0


def test_a_pruned_model_compiles_and_trains_like_eager():
    def make():
        musa.manual_seed(0)
        net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 2))
        prune.l1_unstructured(net[0], "weight", amount=0.5)
        prune.ln_structured(net[2], "weight", amount=1, n=2, dim=1)
        return net

    eager, comp = make(), make()
    compiled = musa.compile(comp)
    opts = [musa.optim.SGD(n.parameters(), lr=0.1) for n in (eager, compiled)]
    x, y = musa.randn(5, 6), musa.randn(5, 2)
    for _ in range(3):
        losses = []
        for net, opt in zip((eager, compiled), opts):
            loss = ((net(x) - y) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss))
        assert losses[0] == losses[1]
    assert bool((comp[0].weight_orig.grad.numpy()[comp[0].weight_mask.numpy() == 0] == 0).all())


@pytest.mark.parametrize("call, err, match", [
    (lambda m: prune.l1_unstructured(m, "weight", amount=1.5), ValueError, "amount=1.5"),
    (lambda m: prune.l1_unstructured(m, "weight", amount=-1), ValueError, "non-negative"),
    (lambda m: prune.l1_unstructured(m, "weight", amount=True), ValueError, "amount=True"),
    (lambda m: prune.l1_unstructured(m, "weight", amount=100), ValueError, "smaller than"),
    (lambda m: prune.ln_structured(m, "bias", amount=1, n=2, dim=0), ValueError,
     "multidimensional"),
    (lambda m: prune.ln_structured(m, "weight", amount=1, n=2, dim=2), IndexError,
     "out of range"),
    (lambda m: prune.ln_structured(m, "weight", amount=1, n="l2", dim=0), ValueError, "n='l2'"),
    (lambda m: prune.remove(m, "weight"), ValueError, "has to be pruned"),
    (lambda m: prune.l1_unstructured(m, "nothing", amount=1), AttributeError, "'nothing'"),
    (lambda m: prune.l1_unstructured(m, "weight", amount=1,
                                     importance_scores=musa.ones(2)), ValueError, "shape"),
    (lambda m: prune.custom_from_mask(m, "weight", mask=musa.ones(3)), ValueError, "mask"),
    (lambda m: prune.global_unstructured([(m, "weight")], pruning_method=prune.RandomStructured,
                                         amount=1), TypeError, "unstructured"),
    (lambda m: prune.global_unstructured(5, pruning_method=prune.L1Unstructured, amount=1),
     TypeError, "iterable"),
])
def test_errors(call, err, match):
    m, _ = pair()
    with pytest.raises(err, match=match):
        call(m)
    # a refused pruning leaves the module as it was
    assert sorted(n for n, _ in m.named_parameters()) == ["bias", "weight"]
    assert not prune.is_pruned(m) and not list(m.named_buffers())
