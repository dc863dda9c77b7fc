"""The losses, activations and distances of nn/_functional_losses.py and
their layers (issue 17) against torch, values and gradients (float64)."""
import numpy as np
import pytest
import torch

import musa
from test_torch_ops import arr, run

RNG = np.random.default_rng(99)
X = arr(4, 6)
Y = arr(4, 6)
SIGN = np.where(RNG.uniform(size=4) > 0.5, 1.0, -1.0)
CLS = RNG.integers(0, 6, 4)
PROBS = np.exp(X) / np.exp(X).sum(1, keepdims=True)

CASES = {
    "softshrink": (lambda L, a: (L.nn.functional.softshrink(a, 0.7), L.nn.Softshrink()(a)), [X]),
    "hardshrink": (lambda L, a: L.nn.functional.hardshrink(a, 0.3) + L.nn.Hardshrink()(a), [X]),
    "threshold": (lambda L, a: L.nn.functional.threshold(a, 0.1, -2.0) + L.nn.Threshold(0.5, 1.0)(a), [X]),
    "prelu": (lambda L, a, w: (L.nn.functional.prelu(a, w), L.nn.functional.prelu(a, w[:1])), [arr(4, 6, 3), arr(6)]),
    "rrelu_eval": (lambda L, a: L.nn.functional.rrelu(a, 0.1, 0.3), [X]),
    "glu": (lambda L, a: (L.nn.functional.glu(a), L.nn.GLU(0)(a)), [X]),
    "softmax2d": (lambda L, a: L.nn.Softmax2d()(a), [arr(2, 3, 4, 5)]),
    "channel_shuffle": (lambda L, a: L.nn.functional.channel_shuffle(a, 3), [arr(2, 6, 2, 2)], False),
    "kl_div": (lambda L, a, t: (L.nn.functional.kl_div(a, t, reduction="batchmean"),
                                L.nn.functional.kl_div(a, t.log(), reduction="sum", log_target=True),
                                L.nn.KLDivLoss(reduction="none")(a, t)), [np.log(PROBS), PROBS[::-1].copy()]),
    "huber": (lambda L, a, b: (L.nn.functional.huber_loss(a, b, delta=0.5), L.nn.HuberLoss(reduction="sum")(a, b)),
              [X, Y]),
    "margin_ranking": (lambda L, a, b, s: L.nn.MarginRankingLoss(0.2)(a, b, s), [arr(4), arr(4), SIGN]),
    "hinge_embedding": (lambda L, a, s: L.nn.functional.hinge_embedding_loss(a, s.reshape(4, 1).expand(4, 6)),
                        [X, SIGN]),
    "cosine_embedding": (lambda L, a, b, s: L.nn.CosineEmbeddingLoss(0.1)(a, b, s), [X, Y, SIGN]),
    "soft_margin": (lambda L, a, s: L.nn.SoftMarginLoss()(a, s.reshape(4, 1).expand(4, 6)), [X, SIGN], "first"),
    "multilabel_soft_margin": (lambda L, a, t, w: (L.nn.functional.multilabel_soft_margin_loss(a, t),
                                                   L.nn.MultiLabelSoftMarginLoss(w)(a, t)),
                               [X, (PROBS > 0.15).astype(np.float64), arr(6, lo=0.5, hi=1)]),
    "multi_margin": (lambda L, a, w: (L.nn.functional.multi_margin_loss(a, L.tensor(CLS)),
                                      L.nn.MultiMarginLoss(2, 0.7, w)(a, L.tensor(CLS))), [X, arr(6, lo=0.5, hi=1)],
                     "first"),
    "multilabel_margin": (lambda L, a: L.nn.functional.multilabel_margin_loss(
        a, L.tensor([[3, 0, -1, 1, 0, 0], [0, 1, 2, 3, 4, 5], [-1, 0, 0, 0, 0, 0], [5, 5, -1, 2, 2, 2]])), [X]),
    "triplet": (lambda L, a, p, n: (L.nn.functional.triplet_margin_loss(a, p, n),
                                    L.nn.TripletMarginLoss(0.5, 1.0, swap=True)(a, p, n)), [X, Y, arr(4, 6)]),
    "triplet_distance": (lambda L, a, p, n: L.nn.TripletMarginWithDistanceLoss(
        distance_function=lambda x, y: 1 - L.nn.functional.cosine_similarity(x, y), swap=True)(a, p, n),
        [X, Y, arr(4, 6)]),
    "poisson_nll": (lambda L, a, t: (L.nn.functional.poisson_nll_loss(a, t),
                                     L.nn.PoissonNLLLoss(log_input=False, full=True)(a.exp(), t)),
                    [X, RNG.integers(0, 5, (4, 6)).astype(np.float64)]),
    "gaussian_nll": (lambda L, a, t, v: (L.nn.functional.gaussian_nll_loss(a, t, v),
                                         L.nn.GaussianNLLLoss(full=True, reduction="sum")(a, t, v[:, :1]),
                                         L.nn.functional.gaussian_nll_loss(a, t, v[:, 0])),
                     [X, Y, arr(4, 6, lo=0.0, hi=1.0)]),
    "pairwise_distance": (lambda L, a, b: (L.nn.functional.pairwise_distance(a, b),
                                           L.nn.PairwiseDistance(1.0, keepdim=True)(a, b)), [X, Y]),
    "cosine_similarity": (lambda L, a, b: L.nn.CosineSimilarity(0)(a, b), [X, Y]),
    "pdist": (lambda L, a: (L.nn.functional.pdist(a), L.nn.functional.pdist(a, 3)), [X]),
    "inplace_activations": (lambda L, a: tuple(getattr(L.nn.functional, n)(a.clone() * 1.0)
                                               for n in ("relu_", "elu_", "leaky_relu_", "hardtanh_", "selu_",
                                                         "celu_")), [X]),
    "inplace_activations_args": (lambda L, a: (
        L.nn.functional.elu_(a.clone() * 1.0, 3.5, 1.5), L.nn.functional.elu_(a.clone() * 1.0, 0.5, 2.0, 0.7),
        L.nn.functional.leaky_relu_(a.clone() * 1.0, 0.2), L.nn.functional.hardtanh_(a.clone() * 1.0, -0.5, 0.25),
        L.nn.functional.celu_(a.clone() * 1.0, 2.0)), [X]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_torch(name):
    program, arrays, *rest = CASES[name]
    run(program, arrays, grad=rest[0] if rest else True)


def test_hinge_embedding_targets_other_than_plus_minus_one_take_both_terms():
    # (fuzz) as PyTorch: the margin term applies where target != 1, the
    # input term where target != -1
    x, t = np.array([0.5, 2.0, -1.0]), np.array([0.0, 1.0, -1.0])
    m = musa.nn.functional.hinge_embedding_loss(musa.tensor(x), musa.tensor(t), reduction="none")
    np.testing.assert_allclose(m.numpy(), torch.nn.functional.hinge_embedding_loss(
        torch.tensor(x), torch.tensor(t), reduction="none").numpy())


def test_prelu_layer_learns_one_slope_per_channel():
    m = musa.nn.PReLU(3)
    assert m.weight.tolist() == [0.25] * 3 and repr(m) == "PReLU(num_parameters=3)"
    out = m(-musa.ones(2, 3, 4))
    out.sum().backward()
    assert m.weight.grad.tolist() == [-8.0] * 3


def test_random_pieces():
    x = musa.randn(1000)
    slopes = (musa.nn.functional.rrelu(x, 0.1, 0.3, training=True) / x)[x < 0]
    assert float(slopes.min()) >= 0.1 - 1e-6 and float(slopes.max()) <= 0.3 + 1e-6
    assert float(slopes.std()) > 0.01
    logits = musa.randn(5, 4, requires_grad=True)
    soft = musa.nn.functional.gumbel_softmax(logits, tau=0.5)
    np.testing.assert_allclose(soft.sum(1).detach().numpy(), 1.0, rtol=1e-6)
    hard = musa.nn.functional.gumbel_softmax(logits, hard=True)
    assert sorted(set(hard.detach().numpy().ravel().tolist())) == [0.0, 1.0]
    hard.sum().backward()  # the soft sample's gradient flows
    assert logits.grad is not None
    # a 0-d input is one element: 1, soft or hard (as in torch; hard took a
    # remainder by its 0 dims)
    one = musa.tensor(2.26, dtype=musa.float64, requires_grad=True)
    for h in (False, True):
        y = musa.nn.functional.gumbel_softmax(one, tau=0.5, hard=h)
        assert y.shape == () and y.item() == 1.0 and y.dtype == musa.float64
    y.backward()
    assert one.grad.item() == 0.0


def test_errors():
    F = musa.nn.functional
    with pytest.raises(RuntimeError, match="lambda must be greater or equal to 0"):
        F.softshrink(musa.zeros(2), -1)
    with pytest.raises(RuntimeError, match="Halving dimension must be even"):
        F.glu(musa.zeros(3))
    with pytest.raises(RuntimeError, match="channel size"):
        F.prelu(musa.zeros(2, 3), musa.zeros(2))
    with pytest.raises(ValueError, match="only p == 1 and p == 2"):
        F.multi_margin_loss(musa.zeros(2, 3), musa.tensor([0, 1]), p=3)
    with pytest.raises(ValueError, match="negative entry"):
        F.gaussian_nll_loss(musa.zeros(2), musa.zeros(2), -musa.ones(2))
    with pytest.raises(RuntimeError, match="divisible by groups"):
        F.channel_shuffle(musa.zeros(1, 5, 2), 2)
    with pytest.raises(RuntimeError, match="only supports 2D"):
        F.pdist(musa.zeros(3))


def test_trunc_normal_is_the_truncated_distribution():
    import math
    musa.manual_seed(5)
    t = musa.nn.init.trunc_normal_(musa.empty(200000), 1.0, 2.0, -1.0, 2.5)
    assert float(t.min()) >= -1.0 and float(t.max()) <= 2.5
    # the truncated normal's mean and standard deviation, analytically
    pdf = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda z: 0.5 * (1 + math.erf(z / math.sqrt(2)))  # noqa: E731
    al, be = (-1.0 - 1.0) / 2.0, (2.5 - 1.0) / 2.0
    z = cdf(be) - cdf(al)
    mean = 1.0 + 2.0 * (pdf(al) - pdf(be)) / z
    var = 4.0 * (1 + (al * pdf(al) - be * pdf(be)) / z - ((pdf(al) - pdf(be)) / z) ** 2)
    sd = math.sqrt(var)
    assert abs(float(t.mean()) - mean) < 5 * sd / math.sqrt(t.numel())
    assert abs(float(t.std()) - sd) < 0.01
    with pytest.raises(ValueError, match="a < b"):
        musa.nn.init.trunc_normal_(musa.empty(3), a=1, b=0)


@pytest.mark.parametrize("shape,groups", [((4, 2, 3), 1), ((6, 3, 3, 3), 2), ((2, 4, 1, 3, 5), 1)])
def test_dirac_matches_torch(shape, groups):
    np.testing.assert_array_equal(musa.nn.init.dirac_(musa.empty(*shape), groups).numpy(),
                                  torch.nn.init.dirac_(torch.empty(*shape), groups).numpy())
    with pytest.warns(FutureWarning, match="nn.init.eye is now deprecated"):
        assert musa.nn.init.eye(musa.empty(2, 2)).tolist() == [[1.0, 0.0], [0.0, 1.0]]


@pytest.mark.parametrize("name, extra", [("relu_", (True,)), ("selu_", (True,)), ("leaky_relu_", (0.1, True)),
                                         ("hardtanh_", (-1.0, 1.0, True)), ("celu_", (1.0, True)),
                                         ("elu_", (1.0, 1.0, 1.0, True))])
def test_inplace_activations_take_torchs_arguments_only(name, extra):
    # (fuzz-py seed 6981) elu_'s third argument is PyTorch's scale; it was
    # taken as `inplace` and ignored. An argument past PyTorch's is a
    # TypeError in both libraries.
    for lib in (musa, torch):
        with pytest.raises(TypeError):
            getattr(lib.nn.functional, name)(lib.tensor([-1.0, 2.0]), *extra)


def test_elu_inplace_scales_as_torch():
    # the fuzzer's case: a negative scale, 0-d tensors as the numbers
    x = [-2.331, -0.5, 0.0, 0.3, 4.0]
    m = musa.nn.functional.elu_(musa.tensor(x, dtype=musa.float64), musa.tensor(3.591), musa.tensor(-1.443))
    t = torch.nn.functional.elu_(torch.tensor(x, dtype=torch.float64), torch.tensor(3.591), torch.tensor(-1.443))
    np.testing.assert_allclose(m.numpy(), t.numpy(), rtol=1e-6)
