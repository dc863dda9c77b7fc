"""PyTorch's process-level names (musa/_torch_env.py) against torch:
finfo/iinfo, the constants, the determinism and precision switches,
seed(), the windows; and small Tensor methods (fill_diagonal_, sum_to_size,
mH, the added in-place forms, retains_grad)."""
import math

import numpy as np
import pytest
import torch

import musa

FLOATS = [(musa.float32, torch.float32), (musa.float64, torch.float64),
          (musa.float16, torch.float16), (musa.bfloat16, torch.bfloat16)]
INTS = [(musa.int8, torch.int8), (musa.uint8, torch.uint8), (musa.int32, torch.int32),
        (musa.int64, torch.int64)]


@pytest.mark.parametrize("md, td", FLOATS)
def test_finfo_equals_torchs(md, td):
    f, t = musa.finfo(md), torch.finfo(td)
    for field in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"):
        assert getattr(f, field) == getattr(t, field), field
    assert repr(f) == repr(t)
    # the limits are what the dtype holds: max stays finite, twice it does not
    x = musa.tensor([f.max, f.tiny, 1 + f.eps], dtype=md)
    assert x.tolist() == [f.max, f.tiny, 1 + f.eps]
    assert math.isinf(float(musa.tensor(f.max, dtype=md) * 2))


@pytest.mark.parametrize("md, td", INTS)
def test_iinfo_equals_torchs(md, td):
    i, t = musa.iinfo(md), torch.iinfo(td)
    assert (i.bits, i.min, i.max, i.dtype, repr(i)) == (t.bits, t.min, t.max, t.dtype, repr(t))
    assert musa.tensor([i.min, i.max], dtype=md).tolist() == [i.min, i.max]


def test_finfo_iinfo_defaults_and_errors():
    assert musa.finfo().dtype == "float32"
    musa.set_default_dtype(musa.float64)
    try:
        assert musa.finfo().eps == 2.0 ** -52
    finally:
        musa.set_default_dtype(musa.float32)
    with pytest.raises(TypeError, match=r"\[finfo\] requires a floating point dtype, got "
                                        r"musa.int32"):
        musa.finfo(musa.int32)
    with pytest.raises(TypeError, match=r"\[iinfo\] requires an integer dtype, got musa.float32"):
        musa.iinfo(musa.float32)
    with pytest.raises(TypeError, match=r"\[iinfo\] requires an integer dtype, got musa.bool"):
        musa.iinfo(musa.bool)
    with pytest.raises(TypeError, match=r"\[finfo\] expected a musa.dtype, got str"):
        musa.finfo("float32")


def test_constants_and_switches():
    assert (musa.pi, musa.e) == (torch.pi, torch.e)
    assert math.isinf(musa.inf) and math.isnan(musa.nan)
    assert not musa.are_deterministic_algorithms_enabled()
    musa.use_deterministic_algorithms(True, warn_only=True)
    try:
        assert musa.are_deterministic_algorithms_enabled()
        assert musa.is_deterministic_algorithms_warn_only_enabled()
    finally:
        musa.use_deterministic_algorithms(False)
    with pytest.raises(TypeError, match=r"\[use_deterministic_algorithms\]"):
        musa.use_deterministic_algorithms(1)
    assert musa.get_float32_matmul_precision() == "highest"
    musa.set_float32_matmul_precision("medium")
    try:
        assert musa.get_float32_matmul_precision() == "medium"
    finally:
        musa.set_float32_matmul_precision("highest")
    with pytest.raises(ValueError, match=r"\[set_float32_matmul_precision\] precision must be"):
        musa.set_float32_matmul_precision("low")
    assert musa.get_num_interop_threads() == musa.get_num_threads()
    musa.set_num_interop_threads(2)
    with pytest.raises(ValueError, match=r"\[set_num_interop_threads\]"):
        musa.set_num_interop_threads(0)


def test_seed_reseeds_from_the_os_and_returns_the_seed():
    s = musa.seed()
    assert 0 <= s < 2 ** 63 and musa.initial_seed() == s
    a = musa.rand(4)
    musa.manual_seed(s)
    assert musa.equal(musa.rand(4), a)
    assert musa.seed() != s  # 2^-63 to fail


@pytest.mark.parametrize("name", ["hann_window", "hamming_window", "blackman_window",
                                  "bartlett_window", "kaiser_window"])
def test_windows_equal_torchs(name):
    for n in (0, 1, 2, 5, 16, 101):
        for periodic in (True, False):
            for md, td in FLOATS[:2]:
                m = getattr(musa, name)(n, periodic, dtype=md)
                t = getattr(torch, name)(n, periodic, dtype=td)
                assert m.dtype == md and m.shape == tuple(t.shape)
                np.testing.assert_allclose(m.numpy(), t.numpy(), rtol=0,
                                           atol=1e-6 if md == musa.float32 else 1e-13)
    extra = {"hamming_window": (0.5, 0.4), "kaiser_window": (5.0,)}.get(name, ())
    np.testing.assert_allclose(getattr(musa, name)(9, False, *extra, dtype=musa.float64).numpy(),
                               getattr(torch, name)(9, False, *extra, dtype=torch.float64).numpy(),
                               atol=1e-13)
    w = getattr(musa, name)(8, requires_grad=True)
    assert w.requires_grad and w.dtype == musa.float32
    with pytest.raises(ValueError, match=rf"\[{name}\] window_length must be a non-negative int"):
        getattr(musa, name)(-1)
    with pytest.raises(ValueError, match=rf"\[{name}\] expects a floating point dtype"):
        getattr(musa, name)(4, dtype=musa.int64)


def test_small_tensor_methods_equal_torchs():
    for shape in [(3, 3), (5, 3), (3, 5), (7, 2), (4, 4, 4), (2, 2, 2, 2), (1, 1), (0, 0)]:
        for wrap in (False, True):
            assert (musa.zeros(*shape).fill_diagonal_(2.5, wrap).tolist() ==
                    torch.zeros(*shape).fill_diagonal_(2.5, wrap).tolist()), (shape, wrap)
    with pytest.raises(musa.InvalidArgumentError, match=r"\[Tensor.fill_diagonal_\] all "
                                                        r"dimensions of input must be"):
        musa.zeros(2, 3, 3).fill_diagonal_(1)
    x, t = musa.arange(24.0).reshape(2, 3, 4), torch.arange(24.0).reshape(2, 3, 4)
    for size in [(3, 4), (1, 4), (2, 1, 4), (1, 1, 1), (4,), (2, 3, 4)]:
        assert x.sum_to_size(size).tolist() == t.sum_to_size(size).tolist()
    assert x.sum_to_size(1, 4).shape == (1, 4)
    with pytest.raises(musa.InvalidArgumentError, match=r"\[Tensor.sum_to_size\] size \[2, 4\] "
                                                        r"is not expandable"):
        x.sum_to_size(2, 4)
    assert x.get_device() == t.get_device() == -1
    assert x.is_signed() and not musa.ones(2, dtype=musa.uint8).is_signed()
    assert x.mH.tolist() == t.mH.tolist() and x.adjoint().tolist() == t.adjoint().tolist()
    assert musa.ones(2, 3).H.shape == (3, 2)
    for name, arg in (("eq_", 2.0), ("ge_", 3.0), ("divide_", 2.0), ("multiply_", 3.0),
                      ("subtract_", 1.5), ("floor_divide_", 4.0), ("true_divide_", 4.0),
                      ("log2_", None), ("log10_", None), ("sinh_", None), ("tan_", None),
                      ("exp2_", None), ("cumsum_", 0), ("cumprod_", 0)):
        m, tt = musa.tensor([1.0, 2.0, 3.5]), torch.tensor([1.0, 2.0, 3.5])
        args = () if arg is None else (arg,)
        assert getattr(m, name)(*args) is m
        np.testing.assert_allclose(m.tolist(), getattr(tt, name)(*args).tolist(), rtol=1e-6)
    y = musa.ones(2, requires_grad=True)
    z = y * 2
    assert not y.retains_grad and not z.retains_grad
    z.retain_grad()
    assert z.retains_grad


def _reprs(lib):
    L = lib
    yield L.arange(30.0) / 7                      # a row wrapped at 80 columns
    yield (L.arange(60.0) / 7).reshape(2, 30)     # rows wrapped under their indent
    yield L.arange(25)
    yield L.arange(2000.0)                        # summarised; whole numbers over 1000x: sci
    yield L.arange(2000.0).reshape(40, 50)
    yield L.tensor([1e-5, 1.0, 3.5])
    yield L.tensor([[1.0, 2.0], [3.0, 1e9]])
    yield L.arange(12.0).reshape(2, 2, 3) / 3
    yield L.arange(1001)


@pytest.mark.parametrize("opts", [{}, {"precision": 2, "linewidth": 40}, {"sci_mode": True},
                                  {"sci_mode": False, "precision": 6},
                                  {"threshold": 5, "edgeitems": 1}, {"profile": "short"},
                                  {"profile": "full", "linewidth": 120}])
def test_printing_and_printoptions_equal_torchs(opts):
    try:
        musa.set_printoptions(**opts)
        torch.set_printoptions(**opts)
        for m, t in zip(_reprs(musa), _reprs(torch)):
            assert str(m).replace("musa.", "torch.") == str(t)
    finally:
        musa.set_printoptions(profile="default")
        torch.set_printoptions(profile="default")
    assert musa.get_printoptions() == {"precision": 4, "threshold": 1000, "edgeitems": 3,
                                       "linewidth": 80, "sci_mode": None}


def test_printoptions_are_validated_and_unchanged_on_error():
    with pytest.raises(ValueError, match=r"\[set_printoptions\] profile must be"):
        musa.set_printoptions(profile="long")
    with pytest.raises(TypeError, match=r"\[set_printoptions\] precision must be an int"):
        musa.set_printoptions(precision=2.5)
    with pytest.raises(musa.InvalidArgumentError, match=r"\[set_printoptions\] precision must be "
                                                        r"in \[0, 30\]"):
        musa.set_printoptions(precision=-1)
    with pytest.raises(musa.InvalidArgumentError, match=r"linewidth >= 1"):
        musa.set_printoptions(linewidth=0)
    assert musa.get_printoptions()["precision"] == 4
    try:
        musa.set_printoptions(threshold=math.inf)
        assert musa.get_printoptions()["threshold"] == math.inf
        assert "..." not in str(musa.arange(5000))
    finally:
        musa.set_printoptions(profile="default")


def test_inplace_view_ops_change_the_tensor_itself():
    for name, args in (("unsqueeze_", (0,)), ("unsqueeze_", (-1,)), ("squeeze_", ()),
                       ("squeeze_", (0,)), ("t_", ()), ("transpose_", (0, 1)),
                       ("swapaxes_", (1, 0)), ("swapdims_", (0, 1)),
                       ("as_strided_", ((3,), (2,)))):
        base = np.arange(6.0).reshape(1, 2, 3) if name == "squeeze_" else \
            np.arange(6.0).reshape(2, 3)
        m, t = musa.tensor(base), torch.tensor(base)
        alias = m
        r = getattr(m, name)(*args)
        getattr(t, name)(*args)
        assert r is m and alias.shape == tuple(t.shape) and m.tolist() == t.tolist(), name
    # a tensor with history records the view; a leaf that requires grad refuses, as torch
    leaf = musa.ones(2, requires_grad=True)
    y = leaf * 3
    y.unsqueeze_(1)
    assert y.shape == (2, 1) and y.grad_fn is not None
    y.sum().backward()
    assert leaf.grad.tolist() == [3.0, 3.0]
    with pytest.raises(RuntimeError, match=r"\[Tensor.unsqueeze_\] a leaf Variable that requires "
                                           r"grad is being used in an in-place operation"):
        musa.ones(2, requires_grad=True).unsqueeze_(0)
    # compiled: the captured graph follows the rebinding
    def f(x):
        z = x * 2
        z.unsqueeze_(0)
        z.t_()
        return z + 1
    x = musa.randn(3)
    assert musa.equal(musa.jit(f)(x), f(x)) and f(x).shape == (3, 1)


def test_resize_and_set():
    c = musa.arange(6.0)
    assert c.resize_(2, 3) is c and c.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    c.resize_(4)
    assert c.tolist() == [0.0, 1.0, 2.0, 3.0]
    c.resize_(5)
    assert c.shape == (5,) and c.tolist()[:4] == [0.0, 1.0, 2.0, 3.0]
    c.resize_as_(musa.zeros(2, 2))
    assert c.shape == (2, 2)
    with pytest.raises(RuntimeError, match=r"\[Tensor.resize_\] cannot resize tensors that "
                                           r"require grad"):
        musa.ones(2, requires_grad=True).resize_(3)
    with pytest.raises(musa.InvalidArgumentError, match=r"\[Tensor.resize_\] sizes must be"):
        musa.ones(2).resize_(-1)
    src = musa.arange(6.0)
    d = musa.zeros(1)
    d.set_(src, 1, (2, 2), (3, 1))
    assert d.tolist() == [[1.0, 2.0], [4.0, 5.0]]
    src[1] = 100.0  # shares src's memory, as torch's set_
    assert d.tolist()[0][0] == 100.0
    e = musa.zeros(3).set_(src)
    assert e.shape == (6,) and e.data_ptr() == src.data_ptr()
    assert musa.ones(3).set_().shape == (0,)
