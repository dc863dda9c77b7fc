"""The samplers of musa/_torch_random.py: multinomial, normal, randint_like
and Tensor.random_/cauchy_/log_normal_/geometric_/multinomial. Each test
seeds the generator, so its statistics are fixed numbers that a broken
sampler moves far outside the bounds (which are several standard errors
wide)."""
import collections
import math

import numpy as np
import pytest

import musa


@pytest.fixture(autouse=True)
def seeded():
    musa.manual_seed(1234)


def freq(t, k):
    c = collections.Counter(t.reshape(-1).tolist())
    n = t.numel()
    return [c.get(i, 0) / n for i in range(k)]


def test_multinomial_with_replacement_follows_the_weights_and_skips_zeros():
    w = musa.tensor([0.0, 2.0, 0.0, 6.0, 2.0, 0.0])  # unnormalised; zeros at both ends
    s = musa.multinomial(w, 40000, replacement=True)
    assert s.dtype == musa.int64 and s.shape == (40000,)
    f = freq(s, 6)
    assert f[0] == f[2] == f[5] == 0
    for got, want in zip(f, [0, 0.2, 0, 0.6, 0.2, 0]):
        assert abs(got - want) < 0.01
    rows = musa.multinomial(musa.stack([w, w.flip(0)]), 5, True)
    assert rows.shape == (2, 5) and set(rows[1].tolist()) <= {1, 2, 4}
    assert musa.multinomial(w.double(), 3, True).dtype == musa.int64
    assert w.multinomial(2, True).shape == (2,)


def test_multinomial_without_replacement_draws_distinct_categories_in_order():
    w = musa.tensor([1.0, 0.0, 6.0, 3.0])
    draws = [musa.multinomial(w, 3).tolist() for _ in range(4000)]
    assert all(sorted(d) == [0, 2, 3] for d in draws)  # the only 3 of weight > 0
    first = collections.Counter(d[0] for d in draws)
    for cat, p in ((0, 0.1), (2, 0.6), (3, 0.3)):  # a draw one at a time: the first follows w
        assert abs(first[cat] / 4000 - p) < 0.025
    # the second given the first = 2: proportional to the rest (0.25, 0.75)
    after2 = collections.Counter(d[1] for d in draws if d[0] == 2)
    assert abs(after2[3] / sum(after2.values()) - 0.75) < 0.035
    with pytest.raises(musa.InvalidArgumentError, match=r"\[multinomial\] cannot draw 4 samples "
                                                        r"without replacement from 3 categories"):
        musa.multinomial(w, 4)


def test_multinomial_errors_and_generator():
    with pytest.raises(musa.InvalidArgumentError, match=r"\[multinomial\] probability tensor "
                                                        r"contains either inf, nan or element < 0"):
        musa.multinomial(musa.tensor([0.5, -0.1]), 1)
    with pytest.raises(musa.InvalidArgumentError, match=r"sum of probabilities <= 0"):
        musa.multinomial(musa.zeros(2, 3), 1, True)
    with pytest.raises(musa.InvalidArgumentError, match=r"prob_dist must be 1 or 2 dim, got 3"):
        musa.multinomial(musa.ones(2, 2, 2), 1)
    with pytest.raises(musa.InvalidArgumentError, match=r"num_samples must be a positive int"):
        musa.multinomial(musa.ones(3), 0)
    with pytest.raises(musa.InvalidTypeError, match=r"\[multinomial\] expected a floating point"):
        musa.multinomial(musa.ones(3, dtype=musa.int64), 1)
    g = musa.Generator().manual_seed(7)
    a = musa.multinomial(musa.ones(10), 5, generator=g)
    g.manual_seed(7)
    assert musa.equal(a, musa.multinomial(musa.ones(10), 5, generator=g))


def test_normal_signatures_shapes_and_moments():
    x = musa.normal(2.0, 3.0, (200000,))
    assert x.dtype == musa.float32 and abs(float(x.mean()) - 2) < 0.03
    assert abs(float(x.std()) - 3) < 0.03
    m = musa.normal(musa.tensor([0.0, 100.0]), 0.5)
    assert m.shape == (2,) and abs(float(m[1]) - 100) < 5
    b = musa.normal(musa.zeros(3, 1, dtype=musa.float64), musa.ones(4, dtype=musa.float64))
    assert b.shape == (3, 4) and b.dtype == musa.float64
    s = musa.normal(1.0, musa.zeros(5))
    assert s.tolist() == [1.0] * 5
    mean = musa.zeros(3, requires_grad=True)
    assert not musa.normal(mean, 1.0).requires_grad  # as PyTorch: no gradient through a draw
    assert musa.normal(0.0, 1.0, (2,), requires_grad=True).requires_grad
    with pytest.raises(musa.InvalidArgumentError, match=r"\[normal\] std must be >= 0"):
        musa.normal(musa.zeros(2), musa.tensor([1.0, -1.0]))
    with pytest.raises(TypeError, match=r"\[normal\] with a number mean and std, size is "
                                        r"required"):
        musa.normal(0.0, 1.0)


def test_randint_like_and_random_():
    r = musa.randint_like(musa.zeros(3, 4, dtype=musa.float64), 3, 7)
    assert r.shape == (3, 4) and r.dtype == musa.float64
    assert set(r.reshape(-1).tolist()) <= {3, 4, 5, 6}
    assert set(musa.randint_like(musa.zeros(50, dtype=musa.int32), 2).tolist()) == {0, 1}
    x = musa.empty(20000)
    x.random_(5, 9)
    assert set(x.tolist()) == {5, 6, 7, 8}
    x.random_(3)
    assert set(x.tolist()) == {0, 1, 2}
    x.random_()
    assert 0 <= float(x.min()) and float(x.max()) < 2 ** 24 and float(x.max()) > 2 ** 23
    i = musa.empty(20000, dtype=musa.int64).random_()
    assert float(i.min()) >= 0 and float(i.double().max()) > 2 ** 62  # all 63 bits
    u = musa.empty(20000, dtype=musa.uint8).random_()
    assert set(u.tolist()) == set(range(256))
    assert set(musa.empty(100, dtype=musa.bool).random_().tolist()) == {False, True}
    y = musa.empty(5, dtype=musa.int64)
    y.random_(**{"from": -3, "to": 0})
    assert set(y.tolist()) <= {-3, -2, -1}
    with pytest.raises(musa.InvalidArgumentError, match=r"\[Tensor.random_\] expects from < to"):
        y.random_(4, 2)


def test_cauchy_log_normal_geometric():
    c = musa.empty(100001, dtype=musa.float64).cauchy_(5.0, 2.0)
    assert abs(float(c.median()) - 5.0) < 0.05
    q = c.sort().values
    assert abs(float(q[75000]) - 7.0) < 0.1  # the upper quartile: median + sigma
    ln = musa.empty(100000, dtype=musa.float64).log_normal_(1.0, 0.5)
    assert float(ln.min()) > 0 and abs(float(ln.log().mean()) - 1.0) < 0.01
    g = musa.empty(100000).geometric_(0.25)
    assert float(g.min()) == 1 and g.eq(g.round()).all()
    assert abs(float(g.mean()) - 4.0) < 0.05  # 1 / p
    assert abs(float((g == 1).float().mean()) - 0.25) < 0.01
    with pytest.raises(musa.InvalidArgumentError, match=r"\[Tensor.geometric_\] p must be in"):
        g.geometric_(1.5)
    with pytest.raises(musa.InvalidArgumentError, match=r"\[Tensor.log_normal_\] std must be"):
        ln.log_normal_(0.0, 0.0)
    gen = musa.Generator().manual_seed(5)
    a = musa.empty(4).cauchy_(generator=gen)
    gen.manual_seed(5)
    assert musa.equal(a, musa.empty(4).cauchy_(generator=gen))


@pytest.mark.parametrize("n", [1, 7, 1000, 100003])
def test_rand_and_randn_blocks_map_to_elements_as_the_value_functions_do(n):
    """float32 and float64 rand and randn into contiguous outputs compute each
    Philox block once for the elements it serves (src/backend/cpu/fill.c);
    float16 and bfloat16 still go element by element. Both must give element
    i the same lanes of the same block, on any thread count."""
    def draw(fn, dtype, threads):
        old = musa.get_num_threads()
        musa.set_num_threads(threads)
        try:
            musa.manual_seed(1234)
            musa.rand(3)  # an offset into the stream
            return getattr(musa, fn)(n, dtype=dtype)
        finally:
            musa.set_num_threads(old)

    u32, ubf = draw("rand", musa.float32, 2), draw("rand", musa.bfloat16, 2)
    assert musa.equal(u32.to(musa.bfloat16), ubf)  # 24-bit uniforms: exact in float32
    z32, z16 = draw("randn", musa.float32, 2), draw("randn", musa.float16, 2)
    np.testing.assert_allclose(z32.numpy(), z16.float().numpy(), rtol=1e-3, atol=1e-3)
    for fn in ("rand", "randn"):
        for dt in (musa.float32, musa.float64):
            assert musa.equal(draw(fn, dt, 1), draw(fn, dt, 2)), (fn, dt)
    assert 0 <= u32.min().item() and u32.max().item() < 1
