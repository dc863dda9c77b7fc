"""torch's top-level spellings of nn.functional (musa/_torch_nn_names.py)
against torch's, called with torch's signatures."""
import numpy as np
import pytest
import torch

import musa

RNG = np.random.default_rng(11)


def both(*shapes, lo=-1.0, hi=1.0):
    arrs = [RNG.uniform(lo, hi, s) for s in shapes]
    return [musa.tensor(a) for a in arrs], [torch.tensor(a) for a in arrs]


def close(m, t, tol=1e-10):
    if isinstance(t, tuple):
        for a, b in zip(m, t):
            close(a, b, tol)
        return
    np.testing.assert_allclose(np.asarray(m.tolist()), t.detach().numpy(), rtol=tol, atol=tol)


CASES = {
    "conv1d": ([(2, 3, 9), (4, 3, 3), (4,)], (1, 1)),
    "conv2d": ([(2, 3, 6, 6), (4, 3, 3, 3), (4,)], (2, 1)),
    "conv3d": ([(1, 2, 4, 4, 4), (3, 2, 2, 2, 2)], ()),
    "conv_transpose1d": ([(2, 3, 5), (3, 4, 3)], ()),
    "conv_transpose2d": ([(1, 3, 4, 4), (3, 2, 3, 3)], (None, 2)),
    "avg_pool1d": ([(2, 3, 8)], (2,)),
    "max_pool1d": ([(2, 3, 8)], (3, 2)),
    "max_pool2d": ([(2, 3, 6, 6)], (2,)),
    "max_pool3d": ([(1, 2, 4, 4, 4)], (2,)),
    "max_pool1d_with_indices": ([(2, 3, 8)], (2,)),
    "adaptive_avg_pool1d": ([(2, 3, 8)], (3,)),
    "adaptive_max_pool1d": ([(2, 3, 8)], (3,)),
    "pixel_shuffle": ([(1, 8, 2, 2)], (2,)),
    "pixel_unshuffle": ([(1, 2, 4, 4)], (2,)),
    "channel_shuffle": ([(1, 6, 2, 2)], (3,)),
    "cosine_similarity": ([(4, 5), (4, 5)], (1,)),
    "pairwise_distance": ([(4, 5), (4, 5)], ()),
    "pdist": ([(5, 3)], ()),
    "selu": ([(3, 4)], ()),
    "celu": ([(3, 4)], (0.7,)),
    "prelu": ([(2, 3, 4), (3,)], ()),
    "threshold": ([(3, 4)], (0.1, 20.0)),
    "hardshrink": ([(3, 4)], (0.3,)),
    "bilinear": ([(4, 3), (4, 5), (2, 3, 5), (2,)], ()),
    "dropout": ([(3, 4)], (0.5, False)),
    "alpha_dropout": ([(3, 4)], (0.5, False)),
    "feature_alpha_dropout": ([(2, 3, 4)], (0.5, False)),
    "feature_dropout": ([(2, 3, 4)], (0.5, False)),
    "layer_norm": ([(2, 3, 4)], ((4,),)),
    "group_norm": ([(2, 4, 3), (4,), (4,)], ()),
    "kl_div": ([(3, 4), (3, 4)], (2,)),
    "binary_cross_entropy_with_logits": ([(3, 4), (3, 4)], (None, None, 0)),
    "margin_ranking_loss": ([(5,), (5,), (5,)], (0.1, 2)),
    "hinge_embedding_loss": ([(5,), (5,)], (1.0, 1)),
    "cosine_embedding_loss": ([(3, 4), (3, 4), (3,)], (0.0, 1)),
    "triplet_margin_loss": ([(3, 4), (3, 4), (3, 4)], (1.0, 2, 1e-6, False, 2)),
    "poisson_nll_loss": ([(3, 4), (3, 4)], (True, False, 1e-8, 1)),
    "constant_pad_nd": ([(2, 3)], ((1, 2), 0.5)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_top_level_name_equals_torchs(name):
    shapes, extra = CASES[name]
    if name == "group_norm":
        (x, w, b), (tx, tw, tb) = both(*shapes)
        m, t = musa.group_norm(x, 2, w, b), torch.group_norm(tx, 2, tw, tb)
    else:
        margs, targs = both(*shapes)
        if name in ("margin_ranking_loss", "hinge_embedding_loss", "cosine_embedding_loss"):
            sign = RNG.choice([-1.0, 1.0], size=shapes[-1])
            margs[-1], targs[-1] = musa.tensor(sign), torch.tensor(sign)
        m = getattr(musa, name)(*margs, *extra)
        t = getattr(torch, name)(*targs, *extra)
    if name in ("max_pool1d_with_indices", "adaptive_max_pool1d"):
        close(m[0], t[0])
        assert m[1].tolist() == t[1].tolist()
    else:
        close(m, t)


def test_norms_embedding_and_ctc_with_torchs_argument_orders():
    (x, w, b, rm, rv), (tx, tw, tb, trm, trv) = both((4, 3, 5), (3,), (3,), (3,), (3,))
    rv, trv = rv.abs() + 0.5, trv.abs() + 0.5
    close(musa.batch_norm(x, w, b, rm, rv, False, 0.1, 1e-5, True),
          torch.batch_norm(tx, tw, tb, trm, trv, False, 0.1, 1e-5, True))
    close(musa.instance_norm(x, w, b, None, None, True, 0.1, 1e-5, True),
          torch.instance_norm(tx, tw, tb, None, None, True, 0.1, 1e-5, True))
    (wt,), (twt,) = both((10, 4))
    idx = [[1, 3], [0, 9]]
    close(musa.embedding(wt, musa.tensor(idx)), torch.embedding(twt, torch.tensor(idx)))
    close(musa.embedding(wt, musa.tensor(idx), 3), torch.embedding(twt, torch.tensor(idx), 3))
    lp = RNG.normal(size=(6, 2, 4))
    lp = lp - np.log(np.exp(lp).sum(-1, keepdims=True))
    tg, il, tl = [[1, 2], [3, 3]], [6, 5], [2, 2]
    for red in (0, 1, 2):
        close(musa.ctc_loss(musa.tensor(lp), musa.tensor(tg), il, tl, 0, red),
              torch.ctc_loss(torch.tensor(lp), torch.tensor(tg), il, tl, 0, red), 1e-8)
    with pytest.raises(ValueError, match=r"\[kl_div\] reduction must be 0 \(none\), 1 \(mean\) "
                                         r"or 2 \(sum\), got 3"):
        musa.kl_div(x, x, 3)


def test_dropout_in_training_drops_and_rescales():
    x = musa.ones(1000)
    y = musa.dropout(x, 0.25, True)
    kept = y[y != 0]
    assert 650 < kept.numel() < 850 and musa.allclose(kept, musa.full_like(kept, 4 / 3))
    assert musa.equal(musa.dropout(x, 0.25, False), x)


def test_top_level_losses_default_to_no_reduction_as_torch():
    x, t = [1.0, 2.0, 3.0], [1.0, -1.0, 1.0]
    for name, m_args, t_args in (
            ("hinge_embedding_loss", (musa.tensor(x), musa.tensor(t)),
             (torch.tensor(x), torch.tensor(t))),
            ("kl_div", (musa.tensor(x), musa.tensor(t)), (torch.tensor(x), torch.tensor(t))),
            ("margin_ranking_loss", (musa.tensor(x), musa.tensor(x) * 0.5, musa.tensor(t)),
             (torch.tensor(x), torch.tensor(x) * 0.5, torch.tensor(t))),
            ("binary_cross_entropy_with_logits", (musa.tensor(x), musa.tensor([1.0, 0.0, 1.0])),
             (torch.tensor(x), torch.tensor([1.0, 0.0, 1.0])))):
        got, want = getattr(musa, name)(*m_args), getattr(torch, name)(*t_args)
        assert got.shape == tuple(want.shape), name
        close(got, want, 1e-6)
