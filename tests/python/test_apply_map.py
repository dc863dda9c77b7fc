"""Tensor.apply_, map_ and map2_ (a Python function per element, in place)
and nn.utils.rnn.invert_permutation, against torch 1.13."""
import pytest

import musa
from musa.nn.utils.rnn import invert_permutation

torch = pytest.importorskip("torch")


def both(fn):
    return fn(musa).tolist(), fn(torch).tolist()


@pytest.mark.parametrize("case", [
    lambda L: L.arange(6.).reshape(2, 3).t().apply_(lambda v: v * 10),
    lambda L: L.arange(3).apply_(lambda v: v * 1.5),
    lambda L: L.tensor([True, False]).apply_(lambda v: not v),
    lambda L: L.ones(2, 3).map_(L.arange(3.), lambda p, q: p + q),
    lambda L: L.ones(2, 3).map2_(L.arange(3.), L.ones(2, 1) * 2, lambda p, q, r: p * q + r),
    lambda L: L.zeros(0, 3).apply_(lambda v: v + 1),
    lambda L: L.ones(2, 2)[:, 0].apply_(lambda v: 5),
])
def test_against_torch(case):
    mine, theirs = both(case)
    assert mine == theirs


def test_writes_through_views_and_errors():
    base = musa.ones(2, 2)
    base[:, 1].apply_(lambda v: 7)
    assert base.tolist() == [[1.0, 7.0], [1.0, 7.0]]
    with pytest.raises(RuntimeError, match=r"\[Tensor.apply_\] .*requires grad"):
        musa.ones(2, requires_grad=True).apply_(lambda v: v)
    with pytest.raises(TypeError, match="must return a number, got str"):
        musa.ones(2).apply_(lambda v: "x")
    with pytest.raises(TypeError, match="expected a callable"):
        musa.ones(2).apply_(3)
    with pytest.raises(TypeError, match="argument 0 must be a tensor"):
        musa.ones(2).map_([1, 2], lambda a, b: a)
    with pytest.raises(Exception, match="expand"):
        musa.ones(2, 3).map_(musa.ones(2), lambda a, b: a)


def test_invert_permutation():
    p = musa.tensor([2, 0, 3, 1])
    inv = invert_permutation(p)
    assert inv.tolist() == torch.nn.utils.rnn.invert_permutation(torch.tensor([2, 0, 3, 1])).tolist()
    assert p[inv].tolist() == [0, 1, 2, 3]
    assert invert_permutation(None) is None
