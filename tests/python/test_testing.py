"""musa.testing (assert_close, make_tensor) against torch.testing, and the
small modules under PyTorch's paths: musa.random.fork_rng,
musa.autograd.grad_mode, musa.autograd.profiler, musa.utils.hooks."""
import math

import pytest

import musa
import musa.testing as mt

torch = pytest.importorskip("torch")


def cases(lib):
    t = lib.tensor
    nan, inf = float("nan"), float("inf")
    return [
        (t([1.0, 2.0, 3.0]), t([1.0, 2.5, 3.0]), {}),
        (t([1, 2, 3]), t([1, 3, 3]), {}),
        (t([1, 2, 3]), t([1, 2, 3]), {}),
        (t([1.0, nan]), t([1.0, nan]), {}),
        (t([1.0, nan]), t([1.0, nan]), {"equal_nan": True}),
        (t([1.0, inf]), t([1.0, inf]), {}),
        (t([1.0, inf]), t([1.0, -inf]), {}),
        (t([1.0, inf]), t([1.0, 1e30]), {"rtol": 1.0, "atol": 1.0}),
        (t(1.0), t(1.5), {}),
        (1.0, 1.5, {}),
        (1.0, 1.0 + 1e-9, {}),
        (1, 1.0, {}),
        (1, 1.0, {"check_dtype": False}),
        (t([1.0]), t([1.0], dtype=lib.float64), {}),
        (t([1.0]), t([1.0 + 1e-7], dtype=lib.float64), {"check_dtype": False}),
        (lib.ones(2), lib.ones(3), {}),
        (lib.ones(2, 3), lib.ones(3, 2).t(), {}),
        (lib.ones(2, 3), lib.ones(3, 2).t(), {"check_stride": True}),
        ([lib.ones(2), {"a": lib.zeros(2)}], [lib.ones(2), {"a": lib.ones(2)}], {}),
        ((lib.ones(2),), [lib.ones(2)], {}),
        ([1, 2], [1, 2, 3], {}),
        ({"a": 1}, {"b": 1}, {}),
        (lib.ones(2), 1.0, {}),
        (t([[0.0, 1e-6], [2.0, 0.0]]), t([[0.0, 0.0], [2.0, 1e-6]]), {}),
        (t([[0.0, 1e-4], [2.0, 0.0]]), t([[0.0, 0.0], [2.0, 1e-6]]), {}),
        (t([1.0, 2.0]), t([1.1, 2.0]), {"rtol": 0.2, "atol": 0.0}),
        (t([1.0, 2.0], dtype=lib.float16), t([1.0005, 2.0], dtype=lib.float16), {}),
        (t([1.0, 2.0], dtype=lib.bfloat16), t([1.01, 2.0], dtype=lib.bfloat16), {}),
        (lib.zeros(0, 3), lib.zeros(0, 3), {}),
        (t([True, False]), t([True, True]), {}),
    ]


def outcome(lib, a, e, kw):
    mod = __import__(lib.__name__ + ".testing", fromlist=["x"])
    try:
        mod.assert_close(a, e, **kw)
        return "ok", ""
    except (AssertionError, TypeError, ValueError) as ex:
        return type(ex).__name__, str(ex)


@pytest.mark.parametrize("i", range(len(cases(musa))))
def test_assert_close_against_torch(i):
    a, e, kw = cases(musa)[i]
    at, et, kwt = cases(torch)[i]
    mine, theirs = outcome(musa, a, e, kw), outcome(torch, at, et, kwt)
    assert mine[0] == theirs[0], (mine, theirs)
    if mine[0] == "ok":
        return
    assert mine[1].startswith("[assert_close] ")
    # the lines that carry the verdict and the counts read as PyTorch's
    # (the relative differences of integers are float32 in torch: not compared)
    keep = ("are not", "Mismatched", "The failure", "The length", "Missing", "Additional",
            "attribute 'shape'", "(d)types")
    strip = mine[1][len("[assert_close] "):]
    for line in theirs[1].replace("torch.Size([", "(").replace("])", ",)").splitlines():
        if line.startswith(keep):
            if "(" in line and "attribute 'shape'" in line:
                continue  # torch.Size([2]) against (2,)
            assert line in strip.splitlines(), (line, strip)


def test_assert_close_messages_and_options():
    with pytest.raises(AssertionError, match=r"Greatest absolute difference: 0.5 at index \(1,\) "
                                             r"\(up to 1e-05 allowed\)"):
        mt.assert_close(musa.tensor([1.0, 2.0]), musa.tensor([1.0, 2.5]))
    with pytest.raises(AssertionError, match="^custom$"):
        mt.assert_close(musa.ones(1), musa.zeros(1), msg="custom")
    with pytest.raises(AssertionError, match="^wrapped: .*not close"):
        mt.assert_close(musa.ones(1), musa.zeros(1), msg=lambda m: "wrapped: " + m)
    with pytest.raises(ValueError, match="but got no atol"):
        mt.assert_close(1.0, 1.0, rtol=0.1)
    with pytest.raises(ValueError, match="non-negative"):
        mt.assert_close(1.0, 1.0, rtol=-1.0, atol=0.0)
    np = pytest.importorskip("numpy")
    mt.assert_close(musa.tensor([1.0, 2.0], dtype=musa.float64), np.array([1.0, 2.0]))
    x = musa.ones(3, requires_grad=True)
    mt.assert_close(x * 1, musa.ones(3))  # history does not matter


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "uint8", "bool",
                                   "bfloat16"])
def test_make_tensor(dtype):
    dt = getattr(musa, dtype)
    musa.manual_seed(0)
    t = mt.make_tensor(64, 8, dtype=dt)
    assert tuple(t.shape) == (64, 8) and t.dtype == dt and t.is_contiguous()
    if dt is musa.bool:
        assert 0 < int(t.sum()) < 512
        return
    v = t.double()
    lo = 0 if dt is musa.uint8 else -9
    assert float(v.min()) >= lo and float(v.max()) <= 10
    if dt.is_floating_point:
        assert float(v.max()) <= 9 and len(set(v.reshape(-1).tolist())) > 100
    nz = mt.make_tensor((3, 4), dtype=dt, low=0, high=1, exclude_zero=True)
    assert bool((nz != 0).all())
    nc = mt.make_tensor(5, 6, dtype=dt, noncontiguous=True)
    assert tuple(nc.shape) == (5, 6) and not nc.is_contiguous()
    s = mt.make_tensor((), dtype=dt, low=3, high=3)
    assert s.dim() == 0 and float(s) == 3
    if dt.is_floating_point:
        assert mt.make_tensor(2, dtype=dt, requires_grad=True).requires_grad
    else:
        with pytest.raises(ValueError, match="requires_grad"):
            mt.make_tensor(2, dtype=dt, requires_grad=True)
    with pytest.raises(ValueError, match="greater than high"):
        mt.make_tensor(2, dtype=dt, low=2, high=1)


def test_fork_rng():
    musa.manual_seed(3)
    before = musa.rand(3)
    musa.manual_seed(3)
    with musa.random.fork_rng():
        musa.rand(100)
    assert bool((musa.rand(3) == before).all())
    with musa.random.fork_rng(enabled=False):
        musa.rand(1)
    with pytest.raises(ValueError, match=r"\[fork_rng\] devices=\[0\]"):
        with musa.random.fork_rng(devices=[0]):
            pass
    assert musa.random.manual_seed is musa.manual_seed
    assert musa.random.initial_seed() == musa.initial_seed()


def test_pytorch_paths_to_the_same_objects():
    from musa.autograd import grad_mode, profiler
    from musa.utils.hooks import RemovableHandle
    assert grad_mode.no_grad is musa.no_grad and grad_mode.inference_mode is musa.inference_mode
    assert grad_mode.set_grad_enabled is musa.set_grad_enabled
    assert profiler.profile is musa.profiler.profile
    assert profiler.record_function is musa.profiler.record_function
    x = musa.ones(2, requires_grad=True)
    h = x.register_hook(lambda g: g * 2)
    assert isinstance(h, RemovableHandle)
    h.remove()
    assert math.isfinite(1.0)
