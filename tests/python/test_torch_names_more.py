"""musa/_torch_names_more.py against torch 1.13: the function forms of the
in-place methods, the *_copy views, rsub, fill, index_put, masked_scatter,
split_with_sizes, range, gradient, the complex-API identities and the state
queries."""
import numpy as np
import pytest
import torch

import musa
import musa._torch_names_more as N

RNG = np.random.default_rng(3)


def m(a, dtype=musa.float64):
    return musa.tensor(np.asarray(a), dtype=dtype)


def t(a, dtype=torch.float64):
    return torch.tensor(np.asarray(a), dtype=dtype)


def test_inplace_function_forms_write_their_input():
    forms = [n for n in N.__all__ if n.endswith("_") and not n.endswith("dropout_")
             and n not in ("zero_", "index_put_", "detach_", "as_strided_", "resize_as_", "rrelu_",
                           "addmv_", "clamp_", "clip_", "clamp_max_", "clamp_min_", "gcd_", "lcm_",
                           "ldexp_", "xlogy_", "threshold_", "celu_", "selu_")]
    assert len(forms) > 30
    x0 = RNG.uniform(0.1, 0.9, (3, 4))
    for name in forms:
        if not hasattr(torch, name):
            continue
        a, b = m(x0), t(x0)
        ra, rb = getattr(musa, name)(a), getattr(torch, name)(b)
        assert ra is a, name
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-14, err_msg=name)
    a, b = m(x0), t(x0)
    musa.clamp_(a, min=0.3, max=0.6), torch.clamp_(b, min=0.3, max=0.6)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    a, b = m(x0 - 0.5), t(x0 - 0.5)
    musa.selu_(a), torch.selu_(b)
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)
    with pytest.raises(TypeError, match=r"\[exp_\] argument 'input' must be Tensor"):
        musa.exp_([1.0])
    z = musa.ones(3)
    assert musa.zero_(z) is z and z.tolist() == [0.0, 0.0, 0.0]


def test_view_copies_are_fresh_and_equal():
    x0 = RNG.standard_normal((2, 3, 4))
    for name, args in (("permute_copy", ((2, 0, 1),)), ("transpose_copy", (0, 2)), ("t_copy", ()),
                       ("diagonal_copy", ()), ("select_copy", (1, 2)), ("unsqueeze_copy", (1,)),
                       ("squeeze_copy", ()), ("view_copy", ((6, 4),)), ("expand_copy", ((2, 2, 3, 4),)),
                       ("unfold_copy", (2, 2, 1)), ("detach_copy", ()), ("alias_copy", ()),
                       ("split_copy", (2, 2)), ("unbind_copy", (1,)), ("split_with_sizes_copy", ([1, 3], 2))):
        src = x0[0] if name == "t_copy" else x0
        a, b = getattr(musa, name)(m(src), *args), getattr(torch, name)(t(src), *args)
        for u, v in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
            assert u.is_contiguous(), name
            np.testing.assert_array_equal(u.numpy(), v.numpy(), err_msg=name)
    x = musa.zeros(2, 3)
    musa.permute_copy(x, (1, 0)).fill_(1)
    assert float(x.sum()) == 0


def test_small_functions_as_torch():
    a0, b0 = RNG.standard_normal((2, 3)), RNG.standard_normal((3,))
    np.testing.assert_allclose(musa.rsub(m(a0), m(b0), alpha=2.5).numpy(),
                               torch.rsub(t(a0), t(b0), alpha=2.5).numpy())
    np.testing.assert_array_equal(musa.rsub(m(a0), 3).numpy(), torch.rsub(t(a0), 3).numpy())
    # fuzz-py seed 11420: alpha * input in the promoted dtype, not in float16 first
    h, o = np.array([2.873, -3.039], np.float16), np.array([-0.741, 2.794])
    np.testing.assert_array_equal(musa.rsub(musa.tensor(h), musa.tensor(o), alpha=1.5).numpy(),
                                  torch.rsub(torch.tensor(h), torch.tensor(o), alpha=1.5).numpy())
    r = musa.rsub(musa.tensor([1, 2]), 3, alpha=2)  # an int alpha keeps integers integers
    assert r.dtype == musa.int64 and r.tolist() == torch.rsub(torch.tensor([1, 2]), 3, alpha=2).tolist()
    f = musa.fill(musa.ones(2, 2, dtype=musa.int32), 7)
    assert f.dtype == musa.int32 and f.tolist() == [[7, 7], [7, 7]]
    with pytest.raises(ValueError, match=r"\[fill\] value must be a number or a 0-d tensor"):
        musa.fill(musa.ones(2), musa.ones(2))
    idx = ([0, 1, 1], [2, 0, 0])
    for acc in (False, True):
        got = musa.index_put(m(a0), tuple(musa.tensor(i) for i in idx), m([1.0, 2.0, 3.0]), acc)
        want = torch.index_put(t(a0), tuple(torch.tensor(i) for i in idx), t([1.0, 2.0, 3.0]), acc)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    mask = a0 > 0
    src = np.arange(6.0)
    np.testing.assert_array_equal(musa.masked_scatter(m(a0), musa.tensor(mask), m(src)).numpy(),
                                  torch.masked_scatter(t(a0), torch.tensor(mask), t(src)).numpy())
    parts = musa.split_with_sizes(musa.arange(10), [3, 7])
    assert [p.tolist() for p in parts] == [[0, 1, 2], [3, 4, 5, 6, 7, 8, 9]]
    with pytest.raises(ValueError, match=r"\[split_with_sizes\] split_sizes \[3, 3\] must"):
        musa.split_with_sizes(musa.arange(10), [3, 3])
    assert [p.tolist() for p in musa.unsafe_chunk(musa.arange(5), 2)] == [[0, 1, 2], [3, 4]]
    with pytest.warns(UserWarning, match="deprecated"):
        want = torch.range(1, 2, 0.25)
    np.testing.assert_allclose(musa.range(1, 2, 0.25).numpy(), want.numpy())
    assert musa.range(1, 4).dtype == musa.float32 and musa.range(1, 4).tolist() == [1, 2, 3, 4]
    with pytest.raises(ValueError, match=r"\[range\] step must be nonzero"):
        musa.range(0, 1, 0)
    with pytest.raises(ValueError, match=r"\[range\] start, end and step must be finite"):
        musa.range(0, float("nan"))


@pytest.mark.parametrize("edge_order", [1, 2])
def test_gradient_as_torch(edge_order):
    y = RNG.standard_normal((5, 6))
    for kw in ({}, {"spacing": 0.5}, {"dim": 1}, {"spacing": [2.0], "dim": [0]},
               {"spacing": [musa.tensor([0.0, 1.0, 3.0, 3.5, 5.0], dtype=musa.float64)], "dim": 0}):
        tkw = dict(kw)
        if "spacing" in kw and isinstance(kw["spacing"], list) and isinstance(kw["spacing"][0], musa.Tensor):
            tkw["spacing"] = [torch.tensor(kw["spacing"][0].numpy())]
        got = musa.gradient(m(y), edge_order=edge_order, **kw)
        want = torch.gradient(t(y), edge_order=edge_order, **tkw)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match=r"\[gradient\] each dim needs at least edge_order \+ 1"):
        musa.gradient(musa.ones(2), edge_order=2)
    with pytest.raises(ValueError, match=r"\[gradient\] input must have at least one dimension"):
        musa.gradient(musa.tensor(1.0))


def test_complex_identities_and_state_queries():
    x = musa.tensor([1.0, -2.0])
    for name in ("conj", "resolve_conj", "resolve_neg", "real"):
        assert getattr(musa, name)(x) is x
    assert musa.conj_physical(x) is not x and musa.conj_physical(x).tolist() == [1.0, -2.0]
    assert not musa.is_conj(x) and not musa.is_neg(x) and not musa.is_inference(x)
    with pytest.raises(RuntimeError, match=r"\[imag\] imag is not implemented for tensors with non-complex"):
        musa.imag(x)
    assert musa.is_anomaly_enabled() is False
    musa.set_anomaly_enabled(True)
    try:
        assert musa.is_anomaly_enabled() is True
    finally:
        musa.set_anomaly_enabled(False)
    assert not musa.is_autocast_enabled() and not musa.is_autocast_cpu_enabled()
    with musa.amp.autocast():
        assert musa.is_autocast_cpu_enabled() and musa.get_autocast_cpu_dtype() == musa.bfloat16
    musa.set_warn_always(True)
    assert musa.is_warn_always_enabled()
    musa.set_warn_always(False)
    assert musa.set_flush_denormal(True) is False
    assert musa.typename(musa.ones(1)) == "musa.FloatTensor" and musa.typename(3) == "int"
