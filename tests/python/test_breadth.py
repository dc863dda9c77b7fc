"""PyTorch breadth (issue 17): each new function and layer against torch
(values; gradients by gradcheck in float64, and against torch's), the
compatibility names, and their errors."""
import math

import numpy as np
import pytest
import torch

import musa
import musa.nn as nn
import musa.nn.functional as F

RNG = np.random.default_rng(17)


def arr(*shape, lo=-2.0, hi=2.0, dtype=np.float64):
    return RNG.uniform(lo, hi, shape).astype(dtype)


def close(m, t, tol=1e-6):
    m = m.detach().numpy() if isinstance(m, musa.Tensor) else np.asarray(m)
    t = t.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
    assert m.shape == t.shape, (m.shape, t.shape)
    np.testing.assert_allclose(m, t, rtol=tol, atol=tol)


def same_fn(mfn, tfn, *arrays, tol=1e-6, grad=True):
    """mfn(musa tensors) against tfn(torch tensors): values, then the
    gradients of sum(out * w) for a fixed random w, then gradcheck."""
    ms = [musa.tensor(a, requires_grad=grad) for a in arrays]
    ts = [torch.tensor(a, requires_grad=grad) for a in arrays]
    mo, to = mfn(*ms), tfn(*ts)
    close(mo, to, tol)
    if not grad:
        return
    w = arr(*to.shape)
    (mo * musa.tensor(w)).sum().backward()
    (to * torch.tensor(w)).sum().backward()
    for m, t in zip(ms, ts):
        close(m.grad, t.grad, tol)
    ins = [musa.tensor(a, requires_grad=True) for a in arrays]
    assert musa.autograd.gradcheck(mfn, tuple(ins))


# ---- elementwise ops ----

@pytest.mark.parametrize("name,lo,hi", [
    ("asin", -0.9, 0.9), ("acos", -0.9, 0.9), ("atan", -3, 3), ("asinh", -3, 3),
    ("acosh", 1.2, 4), ("atanh", -0.9, 0.9)])
def test_inverse_trig(name, lo, hi):
    same_fn(getattr(musa, name), getattr(torch, name), arr(4, 5, lo=lo, hi=hi))
    alias = {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh",
             "acosh": "arccosh", "atanh": "arctanh"}[name]
    x = arr(6, lo=lo, hi=hi)
    close(getattr(musa, alias)(musa.tensor(x)), getattr(torch, alias)(torch.tensor(x)))
    t = musa.tensor(x)
    getattr(t, name + "_")()
    close(t, getattr(torch, name)(torch.tensor(x)))
    # integers become floats; out of the domain gives NaN as in torch
    close(getattr(musa, name)(musa.tensor([1, 2])), getattr(torch, name)(torch.tensor([1, 2])))


def test_trunc_and_copysign():
    x = np.array([-2.7, -0.5, -0.0, 0.0, 0.5, 2.7, np.inf, -np.inf])
    close(musa.trunc(musa.tensor(x)), torch.trunc(torch.tensor(x)))
    close(musa.fix(musa.tensor(x)), torch.fix(torch.tensor(x)))
    assert musa.trunc(musa.tensor([3, -3])).tolist() == [3, -3]
    b = np.array([1.0, -1.0, 2.0, -0.0, 3.0, -3.0, 1.0, 1.0])
    close(musa.copysign(musa.tensor(x), musa.tensor(b)), torch.copysign(torch.tensor(x), torch.tensor(b)))
    same_fn(musa.copysign, torch.copysign, arr(3, 4), arr(4))
    assert musa.copysign(musa.tensor([1, 2]), musa.tensor([-1, 1])).dtype == musa.float32


def test_logaddexp():
    same_fn(musa.logaddexp, torch.logaddexp, arr(3, 4, lo=-30, hi=30), arr(4, lo=-30, hi=30))
    same_fn(musa.logaddexp2, torch.logaddexp2, arr(5), arr(5))
    big = np.array([1000.0, -1000.0, -np.inf, np.inf, -np.inf])
    oth = np.array([999.0, -1001.0, -np.inf, np.inf, 3.0])
    close(musa.logaddexp(musa.tensor(big), musa.tensor(oth)),
          torch.logaddexp(torch.tensor(big), torch.tensor(oth)))


# ---- shapes ----

@pytest.mark.parametrize("shifts,dims", [(2, 0), (-1, 1), ((1, 2), (0, 1)), (7, None), (0, 0),
                                          (13, -1)])
def test_roll(shifts, dims):
    same_fn(lambda x: musa.roll(x, shifts, dims), lambda x: torch.roll(x, shifts, dims), arr(3, 4))
    assert musa.roll(musa.zeros(0, 3), 1, 0).shape == (0, 3)


@pytest.mark.parametrize("offset,d1,d2", [(0, 0, 1), (1, 0, 1), (-2, 0, 1), (0, 1, 2), (2, 2, 0),
                                           (-1, -1, -2), (9, 0, 1)])
def test_diagonal(offset, d1, d2):
    same_fn(lambda x: musa.diagonal(x, offset, d1, d2), lambda x: torch.diagonal(x, offset, d1, d2),
            arr(3, 4, 5))
    t = musa.tensor(arr(3, 4, 5))
    v = musa.diagonal(t, 0, 0, 1)  # a view: writes show in t
    v.fill_(7)
    assert float(t[1, 1, 0]) == 7


def test_diagonal_errors():
    with pytest.raises(RuntimeError, match=r"\[diagonal\] needs at least 2 dims"):
        musa.diagonal(musa.ones(3))
    with pytest.raises(RuntimeError, match="cannot be the same"):
        musa.diagonal(musa.ones(3, 3), 0, 1, 1)
    with pytest.raises(IndexError, match="dimension out of range"):
        musa.diagonal(musa.ones(3, 3), 0, 0, 2)


@pytest.mark.parametrize("offset,d1,d2", [(0, -2, -1), (1, -2, -1), (-1, 0, 2)])
def test_diag_embed(offset, d1, d2):
    same_fn(lambda x: musa.diag_embed(x, offset, d1, d2), lambda x: torch.diag_embed(x, offset, d1, d2),
            arr(2, 3))


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_diag_embed_and_diagflat_hold_exact_zeros_off_the_diagonal(dtype):
    # (fuzz-py seed 7150s) the diagonal was placed by a product with a 0/1
    # matrix: a NaN or inf filled its whole plane with NaN, -0.0 lost its
    # sign, and the matrix took m * n * n elements (a 2000-vector: 32 GB)
    vals = {"float32": [float("nan"), -2.5, float("inf"), -0.0], "int64": [1, -2, 3], "bool": [True, False]}[dtype]
    for off in (0, 1, -2):
        m = musa.diag_embed(musa.tensor(vals, dtype=getattr(musa, dtype)), off).numpy()
        t = torch.diag_embed(torch.tensor(vals, dtype=getattr(torch, dtype)), off).numpy()
        assert m.dtype == t.dtype
        np.testing.assert_array_equal(m, t)
        np.testing.assert_array_equal(np.signbit(m), np.signbit(t))
        np.testing.assert_array_equal(musa.tensor(vals, dtype=getattr(musa, dtype)).diagflat(off).numpy(),
                                      torch.tensor(vals, dtype=getattr(torch, dtype)).diagflat(off).numpy())
    assert musa.diag_embed(musa.zeros(3000)).shape == (3000, 3000)


def test_unflatten_and_stacks():
    same_fn(lambda x: musa.unflatten(x, 1, (2, -1)), lambda x: torch.unflatten(x, 1, (2, -1)),
            arr(3, 6))
    a, b = arr(3), arr(3)
    for name in ("hstack", "vstack", "dstack", "column_stack", "row_stack"):
        same_fn(lambda x, y: getattr(musa, name)([x, y]), lambda x, y: getattr(torch, name)([x, y]),
                a, b)
        same_fn(lambda x, y: getattr(musa, name)([x, y]), lambda x, y: getattr(torch, name)([x, y]),
                arr(2, 3), arr(2, 3))
    for n in (0, 1, 2, 3):
        x = arr(*([2] * n))
        for f in ("atleast_2d", "atleast_3d"):
            assert getattr(musa, f)(musa.tensor(x)).shape == tuple(getattr(torch, f)(torch.tensor(x)).shape)
    with pytest.raises(ValueError, match=r"\[hstack\] expected a non-empty sequence"):
        musa.hstack([])
    with pytest.raises(TypeError, match=r"\[vstack\] expected a sequence of tensors"):
        musa.vstack(musa.ones(3))


def test_std_var_mean():
    x = arr(4, 5)
    for fm, ft in ((musa.std_mean, torch.std_mean), (musa.var_mean, torch.var_mean)):
        for kw in ({}, {"dim": 1}, {"dim": (0, 1), "keepdim": True}, {"dim": 0, "unbiased": False},
                   {"dim": 1, "correction": 0}):
            m, t = fm(musa.tensor(x), **kw), ft(torch.tensor(x), **kw)
            close(m[0], t[0])
            close(m[1], t[1])
    s, mu = musa.tensor(x).std_mean(1)
    close(s, torch.tensor(x).std(1))


@pytest.mark.parametrize("eq,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ii->i", [(4, 4)]), ("ii", [(4, 4)]), ("ij->ji", [(3, 4)]), ("i,i->", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]), ("...ij,...jk", [(2, 3, 4), (4, 5)]), ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
    ("ijk->", [(2, 3, 4)]), ("ij,ij->i", [(3, 4), (3, 4)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("iij->j", [(3, 3, 2)]), ("i,i", [(3,), (1,)])])
def test_einsum(eq, shapes):
    arrays = [arr(*s) for s in shapes]
    same_fn(lambda *xs: musa.einsum(eq, *xs), lambda *xs: torch.einsum(eq, *xs), *arrays)
    # the list form
    close(musa.einsum(eq, [musa.tensor(a) for a in arrays]),
          torch.einsum(eq, [torch.tensor(a) for a in arrays]))


def test_einsum_errors():
    with pytest.raises(ValueError, match=r"\[einsum\] the equation has 2 operands, got 1"):
        musa.einsum("ij,jk", musa.ones(2, 2))
    with pytest.raises(ValueError, match="do not match its 2 dims"):
        musa.einsum("ijk", musa.ones(2, 2))
    with pytest.raises(ValueError, match="does not appear"):
        musa.einsum("ij->k", musa.ones(2, 2))
    with pytest.raises(TypeError, match="must be a str"):
        musa.einsum(3, musa.ones(2))


def test_unique():
    x = np.array([3, 1, 2, 3, 1, 5])
    mu = musa.unique(musa.tensor(x), return_inverse=True, return_counts=True)
    tu = torch.unique(torch.tensor(x), return_inverse=True, return_counts=True)
    for m, t in zip(mu, tu):
        assert m.tolist() == t.tolist()
    m2 = np.array([[1, 2], [1, 2], [0, 1]])
    assert musa.unique(musa.tensor(m2), dim=0).tolist() == torch.unique(torch.tensor(m2), dim=0).tolist()
    assert musa.tensor(x).unique().tolist() == [1, 2, 3, 5]


@pytest.mark.parametrize("shape,dim", [((1, 0), 1), ((0, 3), 0), ((2, 0, 3), 1), ((2, 0, 3), -2),
                                       ((0,), None), ((2, 3), 1)])
def test_unique_consecutive_empty_dims_keep_the_input_shape(shape, dim):
    # fuzz-py seed 16216: along an empty dim 1 of a (1, 0) tensor musa gave (0, 1)
    x = np.arange(int(np.prod(shape))).reshape(shape) % 2
    kw = dict(return_inverse=True, return_counts=True, dim=dim)
    mu = musa.unique_consecutive(musa.tensor(x), **kw)
    tu = torch.unique_consecutive(torch.tensor(x), **kw)
    for m, t in zip(mu, tu):
        assert tuple(m.shape) == tuple(t.shape) and m.tolist() == t.tolist()


# ---- activations ----

@pytest.mark.parametrize("name,kw", [
    ("celu", {}), ("celu", {"alpha": 0.5}), ("selu", {}), ("mish", {}), ("hardswish", {}),
    ("hardsigmoid", {}), ("logsigmoid", {}), ("softsign", {}), ("tanhshrink", {}),
    ("softmin", {"dim": 1})])
def test_activation_functions(name, kw):
    x = arr(4, 6, lo=-5, hi=5)
    x[0, :3] = [-3.0 + 1e-3, 3.0 - 1e-3, 0.25]  # near the kinks, not on them
    same_fn(lambda t: getattr(F, name)(t, **kw), lambda t: getattr(torch.nn.functional, name)(t, **kw), x)


@pytest.mark.parametrize("cls,args", [
    ("CELU", (0.7,)), ("SELU", ()), ("Mish", ()), ("Hardswish", ()), ("Hardsigmoid", ()),
    ("LogSigmoid", ()), ("Softsign", ()), ("Tanhshrink", ()), ("Softmin", (1,))])
def test_activation_modules(cls, args):
    x = arr(3, 5, lo=-4, hi=4)
    m, t = getattr(nn, cls)(*args), getattr(torch.nn, cls)(*args)
    close(m(musa.tensor(x)), t(torch.tensor(x)))
    assert repr(m).startswith(cls)
    if cls in ("SELU", "Mish", "Hardswish", "Hardsigmoid", "CELU"):
        inplace = getattr(nn, cls)(*args, inplace=True)
        y = musa.tensor(x)
        inplace(y)
        close(y, t(torch.tensor(x)))


def test_celu_and_scaled_elu_compute_bfloat16_in_float32():
    # fuzz-py seed 19274: celu(bfloat16 -3.484, alpha=-0.05) was -7.64e28, x / alpha
    # rounded to bfloat16 (69.5 for 69.69) before the exp; exactly -9.20e28
    vals = [-3.477, -1.2, 0.5, -0.001, 2.0, 65504.0]
    x = musa.tensor(vals, dtype=musa.bfloat16)
    tx = torch.tensor(vals, dtype=torch.bfloat16)
    got = F.celu(x, alpha=-0.05).float().tolist()
    assert got == torch.nn.functional.celu(tx, alpha=-0.05).float().tolist()
    assert got[0] == float(torch.tensor(-0.05 * math.expm1(-3.484375 / -0.05)).bfloat16())
    y, ty = x.clone(), tx.clone()
    F.elu_(y, alpha=1.5, scale=2.0, input_scale=20.0)
    torch.ops.aten.elu_(ty, 1.5, 2.0, 20.0)
    assert y.float().tolist() == ty.float().tolist()
    g = musa.tensor([-1.0, 0.5], dtype=musa.bfloat16, requires_grad=True)
    F.celu(g, alpha=0.5).sum().backward()
    assert g.grad.dtype == musa.bfloat16 and g.grad.float().tolist() == [0.1357421875, 1.0]


def test_celu_rejects_zero_alpha():
    with pytest.raises(ValueError, match=r"\[celu\] alpha must not be 0"):
        F.celu(musa.ones(2), 0.0)


# ---- layers ----

@pytest.mark.parametrize("cls,pad,shape", [
    ("ReflectionPad1d", 2, (2, 3, 5)), ("ReflectionPad2d", (1, 2, 2, 1), (2, 3, 4, 5)),
    ("ReplicationPad1d", (3, 1), (3, 5)), ("ReplicationPad2d", 2, (1, 2, 3, 3)),
    ("ZeroPad2d", (1, 0, 2, 3), (2, 3, 3)), ("ConstantPad1d", 2, (2, 4)),
    ("ConstantPad2d", (1, 1, 0, 2), (1, 2, 3, 3)), ("ReflectionPad3d", 1, (1, 2, 3, 3, 3)),
    ("ReplicationPad3d", 1, (1, 1, 2, 3, 3))])
def test_padding_layers(cls, pad, shape):
    extra = (1.5,) if cls.startswith("Constant") else ()
    m, t = getattr(nn, cls)(pad, *extra), getattr(torch.nn, cls)(pad, *extra)
    same_fn(m, t, arr(*shape))
    with pytest.raises(ValueError, match=rf"\[{cls}\] expected"):
        m(musa.ones(*([2] * (len(shape) + 2))))


@pytest.mark.parametrize("r,shape", [(2, (1, 8, 3, 3)), (3, (2, 9, 2, 4)), (2, (4, 2, 2))])
def test_pixel_shuffle(r, shape):
    same_fn(nn.PixelShuffle(r), torch.nn.PixelShuffle(r), arr(*shape))
    up = tuple(shape[:-3]) + (shape[-3] // (r * r), shape[-2] * r, shape[-1] * r)
    same_fn(nn.PixelUnshuffle(r), torch.nn.PixelUnshuffle(r), arr(*up))
    x = musa.tensor(arr(*shape))
    assert musa.equal(F.pixel_unshuffle(F.pixel_shuffle(x, r), r), x)
    with pytest.raises(RuntimeError, match=r"\[pixel_shuffle\]"):
        F.pixel_shuffle(musa.ones(1, 3, 2, 2), 2)


def test_pixel_shuffle_of_empty_inputs_follows_the_shape_rule():
    # PyTorch 1.13 returns an empty input in its own shape ((1, 0, 2) by 2 stays
    # (1, 0, 2), where (1, 2, 2) gives (4, 1, 1)); the rule holds at any size here
    assert F.pixel_unshuffle(musa.zeros(1, 0, 2, dtype=musa.uint8), 2).shape == (4, 0, 1)
    assert F.pixel_shuffle(musa.zeros(4, 0, 1), 2).shape == (1, 0, 2)
    assert F.pixel_shuffle(musa.zeros(0, 8, 1, 3), 2).shape == (0, 2, 2, 6)
    with pytest.raises(RuntimeError, match=r"\[pixel_unshuffle\]"):
        F.pixel_unshuffle(musa.zeros(1, 0, 3), 2)


@pytest.mark.parametrize("kw,shape", [
    ({"scale_factor": 2, "mode": "nearest"}, (1, 2, 3, 4)),
    ({"size": (5, 7), "mode": "nearest"}, (2, 1, 3, 4)),
    ({"size": 7, "mode": "nearest-exact"}, (1, 2, 5)),
    ({"scale_factor": 1.7, "mode": "nearest"}, (1, 1, 4, 4)),
    ({"scale_factor": 2, "mode": "bilinear", "align_corners": False}, (1, 2, 3, 4)),
    ({"size": (5, 3), "mode": "bilinear", "align_corners": True}, (2, 1, 4, 4)),
    ({"size": 9, "mode": "linear"}, (1, 2, 4)),
    ({"scale_factor": 0.5, "mode": "bilinear"}, (1, 1, 6, 6)),
    ({"scale_factor": 2, "mode": "bicubic", "align_corners": False}, (1, 2, 4, 4)),
    ({"size": (7, 5), "mode": "bicubic", "align_corners": True}, (1, 1, 4, 3)),
    ({"size": (3, 4, 5), "mode": "trilinear"}, (1, 1, 2, 3, 2)),
    ({"size": (2, 3), "mode": "area"}, (1, 2, 4, 6)),
    ({"scale_factor": 1.5, "mode": "bilinear", "recompute_scale_factor": True}, (1, 1, 4, 4))])
def test_interpolate(kw, shape):
    same_fn(lambda x: F.interpolate(x, **kw), lambda x: torch.nn.functional.interpolate(x, **kw),
            arr(*shape), tol=1e-5)


def test_interpolate_is_one_resample_per_dim_compiled_saved_and_trained(tmp_path):
    # linear modes and bicubic run as one resample op per spatial dim: the
    # graph holds them, a saved model reloads them bit for bit, and a
    # compiled training step gives eager's gradients
    musa.manual_seed(0)
    m = musa.nn.Sequential(musa.nn.Conv2d(2, 3, 3, padding=1),
                           musa.nn.Upsample(scale_factor=2, mode="bilinear"),
                           musa.nn.Upsample(size=(11, 13), mode="bicubic", align_corners=True)).eval()
    x = musa.randn(2, 2, 5, 6)
    traced = musa.jit.trace(m, (x,))
    assert str(traced.get_graph()).count("resample(") == 4
    traced.save(str(tmp_path / "up.musa"))
    with musa.no_grad():
        want = m(x).numpy()
    np.testing.assert_array_equal(musa.jit.load(str(tmp_path / "up.musa"))(x).detach().numpy(), want)

    def step(x, w):
        y = F.interpolate(x * w, size=(7, 9), mode="bicubic")
        return (y * y).sum()

    xs, w0 = musa.randn(2, 3, 4, 5), arr(1, 3, 1, 1)
    grads = []
    for f in (step, musa.jit(step)):
        w = musa.tensor(w0, requires_grad=True)
        f(xs, w).backward()
        grads.append(w.grad.numpy())
    np.testing.assert_array_equal(*grads)


def test_resample_names_bad_indices_and_shapes():
    x, w = musa.randn(2, 4), musa.ones(3, 2)
    with pytest.raises(IndexError, match=r"^\[resample\] index 4 is out of bounds for a dim of size 4"):
        musa._C.resample(x, 1, musa.tensor([[0, 1], [2, 3], [3, 4]]), w)
    with pytest.raises(ValueError, match=r"^\[resample\] index and weight must both be \(outputs, "
                                         r"taps\)"):
        musa._C.resample(x, 1, musa.tensor([0, 1]), w)
    with pytest.raises(TypeError, match=r"^\[resample\] input and weight must be floating point"):
        musa._C.resample(musa.arange(8).reshape(2, 4), 1, musa.zeros(3, 2, dtype=musa.int64), w)


def test_interpolate_linear_keeps_an_inf_at_a_whole_tap():
    # (beside fuzz-py's non-finite findings) a + (b - a) w made inf + nan of
    # an inf at a tap of weight 1; PyTorch's a w0 + b w1 keeps it, and its
    # blends with the neighbours are inf, not NaN
    inf = float("inf")
    x = [[[1.0, inf, 3.0, -inf, 5.0]]]
    m = F.interpolate(musa.tensor(x), size=9, mode="linear", align_corners=True).numpy()
    t = torch.nn.functional.interpolate(torch.tensor(x), size=9, mode="linear", align_corners=True).numpy()
    np.testing.assert_array_equal(m, t)
    x = [[[[1.0, inf], [3.0, 4.0]]]]
    m = F.interpolate(musa.tensor(x), size=(3, 3), mode="bilinear", align_corners=True).numpy()
    t = torch.nn.functional.interpolate(torch.tensor(x), size=(3, 3), mode="bilinear", align_corners=True).numpy()
    np.testing.assert_array_equal(m, t)


def test_upsample_modules_and_errors():
    x = arr(1, 2, 3, 3)
    for m, t in ((nn.Upsample(scale_factor=2), torch.nn.Upsample(scale_factor=2)),
                 (nn.Upsample(size=(4, 5), mode="bilinear"), torch.nn.Upsample(size=(4, 5), mode="bilinear")),
                 (nn.UpsamplingNearest2d(scale_factor=3), torch.nn.UpsamplingNearest2d(scale_factor=3)),
                 (nn.UpsamplingBilinear2d(size=5), torch.nn.UpsamplingBilinear2d(size=5))):
        close(m(musa.tensor(x)), t(torch.tensor(x)), 1e-6)
    with pytest.raises(ValueError, match="exactly one of size and scale_factor"):
        F.interpolate(musa.ones(1, 1, 2, 2))
    with pytest.raises(ValueError, match="unknown mode 'cubic'"):
        F.interpolate(musa.ones(1, 1, 2, 2), scale_factor=2, mode="cubic")
    with pytest.raises(ValueError, match="needs a 4D input"):
        F.interpolate(musa.ones(1, 1, 2), scale_factor=2, mode="bilinear")
    with pytest.raises(ValueError, match="align_corners only applies"):
        F.interpolate(musa.ones(1, 1, 2, 2), scale_factor=2, align_corners=True)


@pytest.mark.parametrize("cls,shape,kw", [
    ("InstanceNorm1d", (2, 3, 5), {}), ("InstanceNorm2d", (2, 3, 4, 4), {"affine": True}),
    ("InstanceNorm2d", (3, 4, 4), {}), ("InstanceNorm1d", (2, 3, 6), {"track_running_stats": True}),
    ("InstanceNorm3d", (1, 2, 2, 3, 3), {"affine": True})])
def test_instance_norm(cls, shape, kw):
    spatial = {"InstanceNorm1d": 1, "InstanceNorm2d": 2, "InstanceNorm3d": 3}[cls]
    channels = shape[0] if len(shape) == spatial + 1 else shape[1]
    m = getattr(nn, cls)(channels, **kw).double()
    t = getattr(torch.nn, cls)(channels, **kw).double()
    x = arr(*shape)
    for _ in range(2):
        close(m(musa.tensor(x)), t(torch.tensor(x)), 1e-6)
    if kw.get("track_running_stats"):
        close(m.running_mean, t.running_mean)
        close(m.running_var, t.running_var)
        m.eval(), t.eval()
        close(m(musa.tensor(x)), t(torch.tensor(x)), 1e-6)
    same_fn(lambda v: F.instance_norm(v), lambda v: torch.nn.functional.instance_norm(v), arr(2, 3, 4))
    with pytest.raises(ValueError, match=rf"\[{cls}\] expected"):
        m(musa.ones(*([2] * (spatial + 3))))


def test_local_response_norm():
    for size in (1, 2, 3, 5):
        same_fn(lambda v: F.local_response_norm(v, size),
                lambda v: torch.nn.functional.local_response_norm(v, size), arr(2, 6, 3, 3))
    x = arr(1, 4, 2)
    close(nn.LocalResponseNorm(3)(musa.tensor(x)), torch.nn.LocalResponseNorm(3)(torch.tensor(x)))


def test_bilinear():
    m = nn.Bilinear(3, 4, 5).double()
    t = torch.nn.Bilinear(3, 4, 5).double()
    with torch.no_grad():
        t.weight.copy_(torch.tensor(m.weight.detach().numpy()))
        t.bias.copy_(torch.tensor(m.bias.detach().numpy()))
    a, b = arr(2, 3), arr(2, 4)
    close(m(musa.tensor(a), musa.tensor(b)), t(torch.tensor(a), torch.tensor(b)))
    w = arr(5, 3, 4)
    same_fn(lambda x, y, ww: F.bilinear(x, y, ww), lambda x, y, ww: torch.nn.functional.bilinear(x, y, ww),
            a, b, w)


@pytest.mark.parametrize("cls,shape", [("Dropout1d", (4, 8, 5)), ("Dropout2d", (4, 8, 3, 3)),
                                       ("Dropout3d", (2, 8, 2, 2, 2)), ("Dropout2d", (8, 3, 3))])
def test_channel_dropout(cls, shape):
    m = getattr(nn, cls)(0.5)
    y = m(musa.ones(*shape)).numpy()
    lead = y.shape[:len(shape) - {"Dropout1d": 1, "Dropout2d": 2, "Dropout3d": 3}[cls]]
    flat = y.reshape(int(np.prod(lead)), -1)
    # each channel all zero or all 2
    assert all(set(np.unique(r)) <= {0.0} or set(np.unique(r)) <= {2.0} for r in flat)
    assert 0 < (flat[:, 0] == 0).sum() < flat.shape[0]
    m.eval()
    assert musa.equal(m(musa.ones(*shape)), musa.ones(*shape))
    with pytest.raises(ValueError, match="dropout probability"):
        getattr(nn, cls)(1.5)


def test_alpha_dropout_keeps_moments():
    musa.manual_seed(0)
    x = musa.randn(200000)
    y = F.alpha_dropout(x, 0.2, training=True)
    assert abs(float(y.mean())) < 0.02 and abs(float(y.std()) - 1) < 0.02
    assert musa.equal(nn.AlphaDropout(0.3).eval()(x), x)
    z = F.feature_alpha_dropout(musa.randn(4, 16, 3), 0.5, training=True)
    assert z.shape == (4, 16, 3)


# ---- compatibility names ----

def test_compat_names():
    assert musa.accelerator.is_available() is False
    assert musa.accelerator.current_accelerator() is None
    musa.backends.cudnn.benchmark = True
    musa.backends.cudnn.deterministic = True
    assert musa.backends.cudnn.is_available() is False and musa.backends.mps.is_available() is False
    assert musa.backends.openmp.is_available()
    x = musa.ones(2)
    assert x.is_cpu and not x.is_xpu and not x.is_mps and not x.is_cuda
    assert hasattr(musa, "amp") and not hasattr(musa, "no_such_name")
    lstm = nn.LSTM(3, 4)
    lstm.flatten_parameters()
    dp = nn.parallel.DataParallel(nn.Linear(3, 2))
    assert isinstance(dp.module, nn.Linear) and dp(musa.ones(1, 3)).shape == (1, 2)
    assert "module.weight" in dp.state_dict()
    f = musa.FloatTensor(2, 3)
    assert f.shape == (2, 3) and f.dtype == musa.float32
    assert musa.LongTensor([1, 2]).tolist() == [1, 2] and musa.LongTensor([1, 2]).dtype == musa.int64
    assert isinstance(musa.ones(2), musa.FloatTensor) and not isinstance(musa.ones(2), musa.LongTensor)
    assert musa.DoubleTensor(musa.ones(2)).dtype == musa.float64
    assert musa.FloatTensor(musa.Size([2, 2])).shape == (2, 2)
    s = musa.Size([2, 3])
    assert s == (2, 3) and s.numel() == 6 and repr(s) == "musa.Size([2, 3])"
    with pytest.raises(TypeError, match=r"\[FloatTensor\] expected sizes"):
        musa.FloatTensor(2, "a")


# ---- error classes: what torch raises is what musa raises (a subclass) ----

@pytest.mark.filterwarnings("ignore:.*target size:UserWarning")
@pytest.mark.parametrize("case", [
    "a.reshape(4, 2)", "a @ a", "a.permute(0)", "a.flip(5)", "a.view(5)", "a.expand(4, 4)",
    "lib.cat([a, a.t()], 0)", "F.cross_entropy(a, lib.tensor([0, 7]))",
    "F.conv2d(lib.ones(1, 2, 4, 4), lib.ones(3, 5, 3, 3))", "F.linear(a, lib.ones(5, 4))",
    "a + lib.ones(4)", "F.mse_loss(a, lib.ones(3, 2))", "lib.stack([a, lib.ones(3)])",
    "a.sum(4)", "a[5]", "a.squeeze(7)", "F.softmax(a, 9)",
])
def test_error_classes_match_torch(case):
    def run(lib, Fn):
        a = lib.ones(2, 3)
        try:
            eval(case, {"lib": lib, "F": Fn, "a": a})
        except Exception as e:  # noqa: BLE001 (the class is what is compared)
            return e
        return None

    te, me = run(torch, torch.nn.functional), run(musa, F)
    assert te is not None and me is not None, (case, te, me)
    assert isinstance(me, type(te)), f"{case}: torch raises {type(te).__name__}, musa " \
                                     f"{type(me).__mro__}: {me}"
    assert str(me).startswith("["), str(me)


def test_musa_error_classes():
    assert issubclass(musa.InvalidArgumentError, ValueError)
    assert issubclass(musa.InvalidArgumentError, RuntimeError)
    assert issubclass(musa.InvalidTypeError, TypeError)
    assert issubclass(musa.InvalidTypeError, RuntimeError)
    with pytest.raises(ValueError):  # code written for musa keeps working
        musa.ones(2, 3).reshape(4, 2)


@pytest.mark.parametrize("p", [0, -1, -0.5, 0.5, 1, 2, 3, float("inf"), -float("inf")])
def test_norm_and_normalize_every_p(p):
    x = arr(3, 4, lo=0.2, hi=2) * np.sign(arr(3, 4))
    x[0, 1] = 0.0
    close(musa.norm(musa.tensor(x), p, 1), torch.norm(torch.tensor(x), p, 1))
    close(F.normalize(musa.tensor(x), p), torch.nn.functional.normalize(torch.tensor(x), p))
    if p not in (0,) and np.isfinite(p) and p > 0:
        same_fn(lambda t: F.normalize(t, p, 0), lambda t: torch.nn.functional.normalize(t, p, 0),
                np.abs(arr(3, 4, lo=0.2, hi=2)))
    with pytest.raises(ValueError, match=r"\[norm\] p must be a number"):
        musa.norm(musa.ones(2), float("nan"))


@pytest.mark.parametrize("kw,shape", [
    (dict(kernel_size=2), (2, 3, 6, 5)), (dict(kernel_size=(2, 3), dilation=(2, 1), padding=1, stride=(2, 1)), (1, 2, 6, 5)),
    (dict(kernel_size=3, padding=1), (2, 5, 5)), (dict(kernel_size=1, stride=2), (1, 1, 4, 4))])
def test_fold_unfold(kw, shape):
    same_fn(lambda x: F.unfold(x, **kw), lambda x: torch.nn.functional.unfold(x, **kw), arr(*shape))
    cols = torch.nn.functional.unfold(torch.tensor(arr(*shape)), **kw)
    size = shape[-2:]
    same_fn(lambda c: F.fold(c, size, **kw), lambda c: torch.nn.functional.fold(c, size, **kw),
            cols.numpy())
    assert nn.Unfold(**kw)(musa.ones(*shape)).shape == tuple(cols.shape)
    assert nn.Fold(size, **kw)(musa.tensor(cols.numpy())).shape == tuple(shape)
    with pytest.raises(RuntimeError, match=r"\[fold\] expected"):
        F.fold(musa.ones(1, 7, 3), size, **kw)
    with pytest.raises(RuntimeError, match=r"\[unfold\] the sliding blocks do not fit"):
        F.unfold(musa.ones(1, 1, 1, 1), 5)


def test_max_unpool():
    x = arr(2, 3, 6, 4)
    tp, ti = torch.nn.functional.max_pool2d(torch.tensor(x), 2, return_indices=True)
    mp, mi = F.max_pool2d(musa.tensor(x), 2, return_indices=True)
    assert mi.tolist() == ti.tolist()
    same_fn(lambda v: F.max_unpool2d(v, mi, 2), lambda v: torch.nn.functional.max_unpool2d(v, ti, 2),
            tp.detach().numpy())
    close(nn.MaxUnpool2d(2)(mp, mi, output_size=(7, 5)),
          torch.nn.MaxUnpool2d(2)(tp, ti, output_size=(7, 5)))
    with pytest.raises(ValueError, match=r"\[max_unpool2d\] invalid output_size"):
        F.max_unpool2d(mp, mi, 2, output_size=(20, 20))
    with pytest.raises(IndexError, match=r"\[max_unpool2d\] an index is out of range"):
        F.max_unpool2d(mp, mi + 100, 2)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag(mode):
    w = arr(10, 4)
    inp, off = np.array([1, 2, 4, 5, 4, 3, 2, 9]), np.array([0, 4, 4])  # an empty bag
    same_fn(lambda ww: F.embedding_bag(musa.tensor(inp), ww, musa.tensor(off), mode=mode),
            lambda ww: torch.nn.functional.embedding_bag(torch.tensor(inp), ww, torch.tensor(off), mode=mode),
            w)
    two = np.array([[1, 2, 3], [4, 0, 6]])
    close(F.embedding_bag(musa.tensor(two), musa.tensor(w), mode=mode, padding_idx=0),
          torch.nn.functional.embedding_bag(torch.tensor(two), torch.tensor(w), mode=mode, padding_idx=0))
    close(F.embedding_bag(musa.tensor(inp), musa.tensor(w), musa.tensor(np.array([0, 3, 8])), mode=mode,
                          include_last_offset=True),
          torch.nn.functional.embedding_bag(torch.tensor(inp), torch.tensor(w), torch.tensor([0, 3, 8]),
                                            mode=mode, include_last_offset=True))
    m = nn.EmbeddingBag(10, 4, mode=mode, padding_idx=2)
    assert float(m.weight[2].abs().sum()) == 0 and m(musa.tensor(two)).shape == (2, 4)


def test_embedding_bag_weights_and_errors():
    w, inp, off = arr(10, 4), np.array([1, 2, 4, 5]), np.array([0, 2])
    psw = arr(4)
    close(F.embedding_bag(musa.tensor(inp), musa.tensor(w), musa.tensor(off), mode="sum",
                          per_sample_weights=musa.tensor(psw)),
          torch.nn.functional.embedding_bag(torch.tensor(inp), torch.tensor(w), torch.tensor(off), mode="sum",
                                            per_sample_weights=torch.tensor(psw)))
    with pytest.raises(NotImplementedError, match="only supported for mode='sum'"):
        F.embedding_bag(musa.tensor(inp), musa.tensor(w), musa.tensor(off), per_sample_weights=musa.tensor(psw))
    with pytest.raises(ValueError, match="offsets has to be None if input is 2-D"):
        F.embedding_bag(musa.tensor([[1, 2]]), musa.tensor(w), musa.tensor([0]))
    with pytest.raises(ValueError, match="mode has to be one of"):
        F.embedding_bag(musa.tensor([[1, 2]]), musa.tensor(w), mode="median")


@pytest.mark.parametrize("kw", [dict(stride=2, padding=1, output_padding=1), dict(dilation=2, groups=2), {}])
def test_conv_transpose1d(kw):
    t = torch.nn.ConvTranspose1d(4, 6, 3, **kw).double()
    m = nn.ConvTranspose1d(4, 6, 3, **kw).double()
    m.load_state_dict({k: musa.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
    same_fn(m, t, arr(2, 4, 7))
    close(m(musa.ones(4, 7, dtype=musa.float64)), t(torch.ones(4, 7, dtype=torch.float64)))  # unbatched
    w = t.weight.detach().numpy()
    same_fn(lambda x, ww: F.conv_transpose1d(x, ww, None, **kw),
            lambda x, ww: torch.nn.functional.conv_transpose1d(x, ww, None, **kw), arr(1, 4, 5), w)
    assert nn.ConvTranspose1d(4, 6, 3, stride=2)(musa.ones(1, 4, 5), output_size=[12]).shape == (1, 6, 12)


@pytest.mark.parametrize("name", ["cumprod", "logcumsumexp", "cummax", "cummin"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scans(name, dim):
    x = arr(4, 5, lo=0.5, hi=1.5) if name == "cumprod" else arr(4, 5, lo=-3, hi=3)
    if name in ("cummax", "cummin"):
        m = getattr(musa, name)(musa.tensor(x), dim)
        t = getattr(torch, name)(torch.tensor(x), dim)
        close(m.values, t.values)
        assert m.indices.tolist() == t.indices.tolist()
        same_fn(lambda v: getattr(musa, name)(v, dim).values,
                lambda v: getattr(torch, name)(v, dim).values, x)
        return
    same_fn(lambda v: getattr(musa, name)(v, dim), lambda v: getattr(torch, name)(v, dim), x)
    t = musa.tensor(x)
    close(getattr(t, name)(dim), getattr(torch.tensor(x), name)(dim))


def test_scan_edges():
    z = np.array([2.0, 0.0, 3.0, 0.0, 4.0])
    same_fn(lambda v: musa.cumprod(v, 0), lambda v: torch.cumprod(v, 0), z)  # zeros: exact gradient
    assert musa.cumprod(musa.tensor([1, 2, 3]), 0).tolist() == [1, 2, 6]
    assert musa.cumprod(musa.tensor([1.0, 2.0]), 0, dtype=musa.float64).dtype == musa.float64
    big = np.array([1000.0, -1000.0, 999.0, -np.inf])
    close(musa.logcumsumexp(musa.tensor(big), 0), torch.logcumsumexp(torch.tensor(big), 0))
    nan = np.array([1.0, np.nan, 3.0])
    m, t = musa.cummax(musa.tensor(nan), 0), torch.cummax(torch.tensor(nan), 0)
    assert m.indices.tolist() == t.indices.tolist() and np.isnan(m.values.numpy()[1:]).all()
    ints = np.array([[3, 1, 4], [1, 5, 9]])
    for n in ("cummax", "cummin"):
        m, t = getattr(musa, n)(musa.tensor(ints), 1), getattr(torch, n)(torch.tensor(ints), 1)
        assert m.values.tolist() == t.values.tolist() and m.indices.tolist() == t.indices.tolist()



@pytest.mark.parametrize("name,a", [
    ("cumprod", RNG.uniform(-1.5, 1.5, (3, 4))),
    ("cumprod", np.array([[0.5, 0.0, 2.0, -1.0], [0.0, 0.0, 3.0, 1.5]])),  # zeros: still exact
    ("logcumsumexp", RNG.uniform(-3, 3, (3, 4))),
    ("logcumsumexp", np.array([[1000.0, -1000.0, 999.0, 5.0]])),  # no overflow in the pairs
])
@pytest.mark.parametrize("dim", [0, -1])
def test_scan_second_derivatives_match_torch(name, a, dim):
    out = []
    for lib in (musa, torch):
        x = lib.tensor(a, requires_grad=True)
        w = lib.tensor(np.linspace(-1, 1, a.size).reshape(a.shape))
        g, = lib.autograd.grad((getattr(lib, name)(x, dim) * w).sum(), x, create_graph=True)
        h, = lib.autograd.grad((g * g).sum(), x)
        out.append((g, h))
    close(out[0][0], out[1][0], 1e-12)
    close(out[0][1], out[1][1], 1e-12)


# ---- generators ----

def test_generator_streams_are_independent_and_reproducible():
    g = musa.Generator().manual_seed(3)
    a = [musa.rand(4, generator=g), musa.randn(2, 3, generator=g), musa.randint(0, 9, (5,), generator=g),
         musa.randperm(6, generator=g), musa.bernoulli(musa.full((4,), 0.5), generator=g)]
    musa.manual_seed(0)
    x = musa.rand(3)  # the global generator in between changes nothing for g
    g2 = musa.Generator().manual_seed(3)
    b = [musa.rand(4, generator=g2), musa.randn(2, 3, generator=g2), musa.randint(0, 9, (5,), generator=g2),
         musa.randperm(6, generator=g2), musa.bernoulli(musa.full((4,), 0.5), generator=g2)]
    for u, v in zip(a, b):
        assert musa.equal(u, v)
    musa.manual_seed(0)
    assert musa.equal(musa.rand(3), x)  # and g changed nothing for the global one
    s = g.get_state()
    c = musa.empty(5).normal_(generator=g)
    g.set_state(s)
    assert musa.equal(musa.empty(5).normal_(generator=g), c)
    for m in ("uniform_", "bernoulli_", "exponential_"):
        t1 = getattr(musa.empty(4), m)(generator=musa.Generator().manual_seed(7))
        t2 = getattr(musa.empty(4), m)(generator=musa.Generator().manual_seed(7))
        assert musa.equal(t1, t2)
    assert g.initial_seed() == 3 and musa.Generator().initial_seed() == torch.Generator().initial_seed()
    assert isinstance(g.seed(), int)
    musa.default_generator.manual_seed(5)
    assert musa.initial_seed() == 5 and musa.default_generator.initial_seed() == 5
    with pytest.raises(TypeError, match=r"\[rand\] generator must be a musa.Generator"):
        musa.rand(2, generator=torch.Generator())
    with pytest.raises(ValueError, match=r"\[Generator.set_state\] expected a uint8 tensor"):
        g.set_state(musa.zeros(3))


def test_generators_drive_data_order():
    from musa.utils.data import DataLoader, RandomSampler, SubsetRandomSampler, TensorDataset, random_split
    ds = TensorDataset(musa.arange(20))

    def order(seed, **kw):
        return [int(v) for b in DataLoader(ds, batch_size=4, shuffle=True,
                                           generator=musa.Generator().manual_seed(seed), **kw)
                for v in b[0]]

    assert order(1) == order(1) and order(1) != order(2) and sorted(order(1)) == list(range(20))
    r1 = list(RandomSampler(ds, replacement=True, num_samples=7, generator=musa.Generator().manual_seed(4)))
    r2 = list(RandomSampler(ds, replacement=True, num_samples=7, generator=musa.Generator().manual_seed(4)))
    assert r1 == r2 and len(r1) == 7
    s1 = list(SubsetRandomSampler([5, 6, 7, 8], generator=musa.Generator().manual_seed(2)))
    assert s1 == list(SubsetRandomSampler([5, 6, 7, 8], generator=musa.Generator().manual_seed(2)))
    p1 = [list(s.indices) for s in random_split(ds, [5, 15], generator=musa.Generator().manual_seed(9))]
    p2 = [list(s.indices) for s in random_split(ds, [5, 15], generator=musa.Generator().manual_seed(9))]
    assert p1 == p2


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_of_many_bags_matches_torch(mode):
    # bags from offsets with empty ones, a padding index inside bags, and
    # include_last_offset; max mode took each bag's rows by a scan of every
    # entry (10,000 bags of 20: 174 s, now 0.1 s)
    rng = np.random.default_rng(7)
    w = rng.standard_normal((40, 6)).astype(np.float32)
    x = rng.integers(0, 40, 3000)
    offs = np.sort(np.concatenate([[0], rng.integers(0, 3000, 400), [3000, 3000]]))
    args = dict(mode=mode, padding_idx=5, include_last_offset=True)
    mw, tw = musa.tensor(w, requires_grad=True), torch.tensor(w, requires_grad=True)
    got = musa.nn.functional.embedding_bag(musa.tensor(x), mw, musa.tensor(offs), **args)
    want = torch.nn.functional.embedding_bag(torch.tensor(x), tw, torch.tensor(offs), **args)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6, atol=1e-6)
    got.sum().backward()
    want.sum().backward()
    np.testing.assert_allclose(mw.grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-5)
