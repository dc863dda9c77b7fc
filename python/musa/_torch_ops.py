"""Still more of PyTorch's namespace, written over the C ops (so each is
differentiable through them and captured like any composite): fused
multiply-adds, elementwise math (atan2, hypot, logit, xlogy, fmax, ...),
NaN-aware and order statistics (nansum, median, kthvalue, quantile),
distances, shape utilities (tile, rot90, tensor_split, meshgrid, ...), index
utilities (take_along_dim, index_copy, bucketize, bincount, ...), and
aliases. Each is also a Tensor method where PyTorch has one."""
import collections as _collections
import itertools as _itertools
import math as _math

from . import _C
from . import _functions as _F
from ._functions import _dim, _dims, _int, _number, _tensors, movedim

__all__ = [
    "addmm", "addbmm", "baddbmm", "addmv", "addr", "addcmul", "addcdiv", "atan2", "arctan2", "hypot",
    "clamp_min", "clamp_max", "deg2rad", "rad2deg", "frac", "sgn", "signbit", "positive", "float_power",
    "ldexp", "xlogy", "logit", "heaviside", "fmax", "fmin", "nan_to_num", "isposinf", "isneginf", "isreal",
    "is_complex", "is_nonzero", "is_same_size", "sinc", "absolute", "negative", "greater", "greater_equal",
    "less", "less_equal", "not_equal", "nansum", "nanmean", "aminmax", "median", "nanmedian", "kthvalue",
    "quantile", "nanquantile", "msort", "argwhere", "diff", "cov", "corrcoef", "dist", "cdist", "inner",
    "ger", "kron", "vdot", "tensordot", "chain_matmul", "tile", "ravel", "moveaxis", "swapdims", "fliplr",
    "flipud", "rot90", "tensor_split", "hsplit", "vsplit", "dsplit", "take", "take_along_dim", "index_copy",
    "index_fill", "diagflat", "block_diag", "cartesian_prod", "combinations", "meshgrid",
    "broadcast_tensors", "broadcast_shapes", "tril_indices", "triu_indices", "bucketize", "searchsorted",
    "bincount", "histc", "isin", "unique_consecutive", "trapezoid", "trapz", "cumulative_trapezoid",
    "logspace", "renorm", "select_scatter", "slice_scatter", "diagonal_scatter", "result_type",
    "promote_types", "can_cast", "narrow_copy",
]


def _t(x, like=None):
    """x as a tensor (numbers take like's dtype when given)."""
    if isinstance(x, _C.Tensor):
        return x
    return _C.tensor(x, dtype=like.dtype) if like is not None else _C.tensor(x)


def _scaled(x, s):
    return x if s == 1 else x * s


# ---- fused multiply-adds ----

def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """beta * input + alpha * (mat1 @ mat2)."""
    _tensors("addmm", input=input, mat1=mat1, mat2=mat2)
    if mat1.ndim != 2 or mat2.ndim != 2:
        raise _C.InvalidArgumentError(f"[addmm] mat1 and mat2 must be matrices, got shapes "
                                      f"{tuple(mat1.shape)} and {tuple(mat2.shape)}")
    return _add_scaled(input, _C.matmul(mat1, mat2), beta, alpha)


def _add_scaled(input, product, beta, alpha):
    beta, alpha = _number(beta, "addmm", "beta"), _number(alpha, "addmm", "alpha")
    out = _scaled(product, alpha)
    if beta == 0:  # as in PyTorch: input is ignored (NaNs in it do not propagate)
        return out + _C.zeros_like(input)
    return _scaled(input, beta) + out


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * sum_b (batch1[b] @ batch2[b])."""
    _tensors("addbmm", input=input, batch1=batch1, batch2=batch2)
    return _add_scaled(input, _F.bmm(batch1, batch2).sum(0), beta, alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * (batch1 @ batch2), per batch."""
    _tensors("baddbmm", input=input, batch1=batch1, batch2=batch2)
    return _add_scaled(input, _F.bmm(batch1, batch2), beta, alpha)


def addmv(input, mat, vec, *, beta=1, alpha=1):
    _tensors("addmv", input=input, mat=mat, vec=vec)
    return _add_scaled(input, _F.mv(mat, vec), beta, alpha)


def addr(input, vec1, vec2, *, beta=1, alpha=1):
    _tensors("addr", input=input, vec1=vec1, vec2=vec2)
    return _add_scaled(input, _F.outer(vec1, vec2), beta, alpha)


def addcmul(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 * tensor2."""
    _tensors("addcmul", input=input, tensor1=tensor1, tensor2=tensor2)
    input, tensor1, tensor2 = _common(input, tensor1, tensor2)
    return input + _scaled(tensor1 * tensor2, _number(value, "addcmul", "value"))


def _common(*tensors):
    """The tensors in their common dtype (the product of two float16 factors
    is rounded in float16 otherwise, where PyTorch computes in the result's
    dtype)."""
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = promote_types(dtype, t.dtype)
    return tuple(t.to(dtype) for t in tensors)


def addcdiv(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 / tensor2."""
    _tensors("addcdiv", input=input, tensor1=tensor1, tensor2=tensor2)
    if not tensor1.is_floating_point() and not tensor2.is_floating_point():
        raise TypeError("[addcdiv] integer division with addcdiv is no longer supported; use "
                        "floating tensors")
    input, tensor1, tensor2 = _common(input, tensor1, tensor2)
    return input + _scaled(tensor1 / tensor2, _number(value, "addcdiv", "value"))


# ---- elementwise math ----

def atan2(input, other):
    """The angle of the point (other, input), in (-pi, pi]; d/dy = x/r^2,
    d/dx = -y/r^2 (0 at the origin)."""
    _tensors("atan2", input=input)
    y, x = input, _t(other, input)
    if not y.is_floating_point():
        y = y.float()
    zero_x = _C.eq(x, 0)
    base = _C.atan(y / _C.where(zero_x, 1.0, x))
    half = _C.copysign(_C.full_like(base, _math.pi / 2), y)
    full = _C.copysign(_C.full_like(base, _math.pi), y)
    # on the y axis: +-pi/2; at the origin 0, or +-pi from a negative zero x
    origin = _C.where(signbit(x if x.is_floating_point() else x.float()), full, _C.copysign(_C.zeros_like(base), y))
    at_axis = _C.where(_C.eq(y, 0), origin, half)
    left = base + full  # x < 0: the angle's other half-plane
    return _C.where(zero_x, at_axis, _C.where(_C.lt(x, 0), left, base))


arctan2 = atan2


def hypot(input, other):
    _tensors("hypot", input=input)
    other = _t(other, input)
    return _C.sqrt(input * input + other * other)


def clamp_min(input, min):
    _tensors("clamp_min", input=input)
    return _C.clamp(input, min=min)


def clamp_max(input, max):
    _tensors("clamp_max", input=input)
    return _C.clamp(input, max=max)


def deg2rad(input):
    _tensors("deg2rad", input=input)
    return input * (_math.pi / 180.0)


def rad2deg(input):
    _tensors("rad2deg", input=input)
    return input * (180.0 / _math.pi)


def frac(input):
    """input - trunc(input), with input's sign."""
    _tensors("frac", input=input)
    return input - _C.trunc(input)


def sgn(input):
    _tensors("sgn", input=input)
    return _C.sign(input)


def signbit(input):
    """Whether the sign bit is set (True for -0.0)."""
    _tensors("signbit", input=input)
    if not input.is_floating_point():
        return _C.lt(input, 0)
    return _C.lt(_C.copysign(_C.ones_like(input), input), 0)


def positive(input):
    _tensors("positive", input=input)
    if input.dtype == _C.bool:
        raise TypeError("[positive] the positive operation is not supported on bool tensors")
    return input


def float_power(input, exponent):
    """input ** exponent in float64."""
    if isinstance(input, _C.Tensor):
        input = input.to(_C.float64)
    else:
        input = _C.tensor(_number(input, "float_power", "input"), dtype=_C.float64)
    if isinstance(exponent, _C.Tensor):
        exponent = exponent.to(_C.float64)
    else:
        exponent = _number(exponent, "float_power", "exponent")
    return _C.pow(input, exponent)


def ldexp(input, other):
    """input * 2 ** other."""
    _tensors("ldexp", input=input)
    x = input if input.is_floating_point() else input.float()
    return x * _C.pow(2.0, _t(other, x).to(x.dtype))


def xlogy(input, other):
    """input * log(other), and 0 where input is 0 (unless other is NaN)."""
    x = _t(input)
    y = _t(other, x)
    if not x.is_floating_point() and not y.is_floating_point():
        x = x.float()
    log_y = _C.log(y)
    prod = x * log_y
    masked = _C.logical_and(_C.eq(x, 0), _C.logical_not(_C.isnan(y)))
    out = _C.where(masked, _C.zeros_like(prod), prod)
    if x.requires_grad:  # PyTorch's d/dx is log(y) at x = 0 too: a zero-valued term carries it
        out = out + (x - x.detach()) * _C.where(_C.logical_and(masked, _F.isfinite(log_y)), log_y, 0.0)
    return out


def logit(input, eps=None):
    """log(p / (1 - p)), p clamped to [eps, 1 - eps] when eps is given."""
    _tensors("logit", input=input)
    p = input if input.is_floating_point() else input.float()
    if eps is not None:
        eps = _number(eps, "logit", "eps")
        p = _C.clamp(p, eps, 1.0 - eps)
    return _C.log(p / (1.0 - p))


def heaviside(input, values):
    """0 where input < 0, values where input == 0, 1 where input > 0."""
    _tensors("heaviside", input=input, values=values)
    if input.dtype != values.dtype:
        raise TypeError(f"[heaviside] input ({input.dtype}) and values ({values.dtype}) must have the "
                        f"same dtype")
    one, zero = _C.ones_like(input), _C.zeros_like(input)
    return _C.where(_C.eq(input, 0), values.expand_as(input) if values.ndim else values,
                    _C.where(_C.gt(input, 0), one, zero))


def _nan_ignoring(input, other, pick):
    _tensors(pick.__name__, input=input)
    other = _t(other, input)
    best = pick(input, other)
    if not (input.is_floating_point() or other.is_floating_point()):
        return best
    return _C.where(_C.isnan(input), other, _C.where(_C.isnan(other), input, best))


def fmax(input, other):
    """Elementwise maximum that ignores a NaN when the other value is not."""
    return _nan_ignoring(input, other, _C.maximum)


def fmin(input, other):
    return _nan_ignoring(input, other, _C.minimum)


def _finfo(dtype):
    import numpy as np
    names = {_C.float32: np.float32, _C.float64: np.float64, _C.float16: np.float16}
    if dtype == _C.bfloat16:
        return -3.3895313892515355e38, 3.3895313892515355e38
    info = np.finfo(names[dtype])
    return float(info.min), float(info.max)


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """NaN, +inf and -inf replaced (by 0 and the dtype's largest and
    smallest finite values unless given)."""
    _tensors("nan_to_num", input=input)
    if not input.is_floating_point():
        return input.clone()
    lo, hi = _finfo(input.dtype)
    hi = hi if posinf is None else _number(posinf, "nan_to_num", "posinf")
    lo = lo if neginf is None else _number(neginf, "nan_to_num", "neginf")
    out = _C.where(_C.isnan(input), _number(nan, "nan_to_num", "nan"), input)
    out = _C.where(isposinf(input), hi, out)
    return _C.where(isneginf(input), lo, out)


def isposinf(input):
    _tensors("isposinf", input=input)
    return _C.logical_and(_C.isinf(input), _C.gt(input, 0))


def isneginf(input):
    _tensors("isneginf", input=input)
    return _C.logical_and(_C.isinf(input), _C.lt(input, 0))


def isreal(input):
    """True everywhere: musa has no complex dtypes."""
    _tensors("isreal", input=input)
    return _C.ones_like(input, dtype=_C.bool)


def is_complex(input):
    _tensors("is_complex", input=input)
    return False


def is_nonzero(input):
    _tensors("is_nonzero", input=input)
    if input.numel() != 1:
        raise RuntimeError(f"[is_nonzero] Boolean value of Tensor with {'no values' if not input.numel() else 'more than one value'} is ambiguous")
    return bool(input.reshape(()).item() != 0)


def is_same_size(input, other):
    _tensors("is_same_size", input=input, other=other)
    return tuple(input.shape) == tuple(other.shape)


def sinc(input):
    """sin(pi x) / (pi x), 1 at 0."""
    _tensors("sinc", input=input)
    x = input if input.is_floating_point() else input.float()
    zero = _C.eq(x, 0)
    px = _C.where(zero, 1.0, x) * _math.pi
    return _C.where(zero, _C.ones_like(x), _C.sin(px) / px)


def _alias(name, op, binary):
    """PyTorch's other spelling of an op: the op under name, whose errors
    name it."""
    if binary:
        def fn(input, other):
            _tensors(name, input=input)
            return op(input, other)
    else:
        def fn(input):
            _tensors(name, input=input)
            return op(input)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{name}: the same as {op.__name__}."
    return fn


absolute, negative = _alias("absolute", _C.abs, False), _alias("negative", _C.neg, False)
greater, greater_equal = _alias("greater", _C.gt, True), _alias("greater_equal", _C.ge, True)
less, less_equal = _alias("less", _C.lt, True), _alias("less_equal", _C.le, True)
not_equal = _alias("not_equal", _C.ne, True)


# ---- NaN-aware and order statistics ----

def nansum(input, dim=None, keepdim=False, *, dtype=None):
    _tensors("nansum", input=input)
    x = input if dtype is None else input.to(dtype)
    if x.is_floating_point():
        x = _C.where(_C.isnan(x), _C.zeros_like(x), x)
    return _C.sum(x, dim, keepdim)


def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    _tensors("nanmean", input=input)
    if not input.is_floating_point() and dtype is None:
        raise TypeError(f"[nanmean] needs a floating input, got {input.dtype}")
    x = input if dtype is None else input.to(dtype)
    kept = _C.logical_not(_C.isnan(x))
    return nansum(x, dim, keepdim) / _C.sum(kept, dim, keepdim).to(x.dtype)


_minmax = _collections.namedtuple("aminmax", ["min", "max"])
_values_indices = _collections.namedtuple("values_indices", ["values", "indices"])


def aminmax(input, *, dim=None, keepdim=False):
    _tensors("aminmax", input=input)
    return _minmax(_C.amin(input, dim, keepdim), _C.amax(input, dim, keepdim))


def _sorted_lines(input, dim, who):
    """(values sorted along dim with NaN last, their indices, dim)."""
    _tensors(who, input=input)
    if input.ndim == 0:
        return input.reshape(1), _C.zeros(1, dtype=_C.int64), 0
    d = _dim(dim, input.ndim, who)
    if input.shape[d] == 0:
        raise IndexError(f"[{who}] cannot take an order statistic over dim {d} of size 0")
    values, indices = _C.sort(input, d)
    return values, indices, d


def _pick(values, indices, d, k, keepdim, input):
    v, i = values.narrow(d, k, 1), indices.narrow(d, k, 1)
    if input.ndim == 0:
        return _values_indices(v.reshape(()), i.reshape(()))
    if not keepdim:
        v, i = v.squeeze(d), i.squeeze(d)
    return _values_indices(v, i)


def kthvalue(input, k, dim=-1, keepdim=False):
    """The k-th smallest element along dim (1-based), and its index."""
    values, indices, d = _sorted_lines(input, dim, "kthvalue")
    k = _int(k, "kthvalue", "k")
    n = values.shape[d]
    if not 1 <= k <= n:
        raise IndexError(f"[kthvalue] k ({k}) is out of range for a dim of size {n}")
    return _pick(values, indices, d, k - 1, keepdim, input)


def _median(input, dim, keepdim, ignore_nan, who):
    _tensors(who, input=input)
    if dim is None:
        flat = input.reshape(-1)
        if flat.numel() == 0:
            return _C.full((), float("nan"), dtype=input.dtype)
        values, _, _ = _sorted_lines(flat, 0, who)
        n = flat.numel()
        if ignore_nan and input.is_floating_point():
            n = int(_C.logical_not(_C.isnan(flat)).sum())
            if n == 0:
                return values[0]
        elif input.is_floating_point() and bool(_C.isnan(flat).any()):
            return _C.full((), float("nan"), dtype=input.dtype)
        return values[(n - 1) // 2]
    values, indices, d = _sorted_lines(input, dim, who)
    n = values.shape[d]
    if input.is_floating_point():
        nans = _C.isnan(values).sum(d, keepdim=True)
        if ignore_nan:  # the lower median of the non-NaN values (the first NaN when all are)
            k = _C.clamp((n - nans - 1) // 2, min=0)
        else:  # NaN (sorted last) when any is
            k = _C.where(_C.gt(nans, 0), n - nans, (n - 1) // 2)  # the first NaN (stable sort)
        if input.ndim == 0:
            return _pick(values, indices, d, (n - 1) // 2, keepdim, input)
        v, i = values.gather(d, k), indices.gather(d, k)
        if not keepdim:
            v, i = v.squeeze(d), i.squeeze(d)
        return _values_indices(v, i)
    return _pick(values, indices, d, (n - 1) // 2, keepdim, input)


def median(input, dim=None, keepdim=False):
    """The lower median (of all elements, or along dim with its index); NaN
    if any element is NaN."""
    return _median(input, dim, keepdim, False, "median")


def nanmedian(input, dim=None, keepdim=False):
    return _median(input, dim, keepdim, True, "nanmedian")


def _quantile(input, q, dim, keepdim, interpolation, ignore_nan, who):
    _tensors(who, input=input)
    if not input.is_floating_point():
        raise TypeError(f"[{who}] input tensor must be either float or double dtype, got {input.dtype}")
    modes = ("linear", "lower", "higher", "midpoint", "nearest")
    if interpolation not in modes:
        raise ValueError(f"[{who}] interpolation must be one of {modes}, got {interpolation!r}")
    scalar_q = not isinstance(q, _C.Tensor)
    if scalar_q:
        q = _number(q, who, "q")
    qt = _C.tensor([float(q)] if scalar_q else q.tolist() if q.ndim else [q.item()], dtype=input.dtype)
    if qt.numel() and (bool(_C.lt(qt, 0).any()) or bool(_C.gt(qt, 1).any())):
        raise ValueError(f"[{who}] q values must be in the range [0, 1]")
    x = input.reshape(-1) if dim is None else input
    d = 0 if dim is None else _dim(dim, max(x.ndim, 1), who)
    if x.ndim == 0:
        x = x.reshape(1)
    if x.shape[d] == 0:
        raise IndexError(f"[{who}] input tensor must be non-empty along the reduced dim")
    values = _C.sort(x, d)[0].movedim(d, -1)  # (..., n), NaN last
    n = values.shape[-1]
    nans = _C.isnan(values).sum(-1, keepdim=True).to(values.dtype)
    count = (n - nans) if ignore_nan else _C.full_like(nans, n)
    pos = qt * (count - 1)  # (..., Q)
    pos = _C.clamp(pos, min=0)
    lo, hi = _C.floor(pos), _C.ceil(pos)
    if interpolation == "lower":
        pos = lo
    elif interpolation == "higher":
        pos = hi
    elif interpolation == "nearest":
        pos = _C.round(pos)
    lo, hi = _C.floor(pos), _C.ceil(pos)
    vlo = values.gather(-1, lo.long().clamp(0, n - 1))
    vhi = values.gather(-1, hi.long().clamp(0, n - 1))
    if interpolation == "midpoint":
        out = _C.where(_C.eq(lo, hi), vlo, (vlo + vhi) * 0.5)
    else:
        out = _F.lerp(vlo, vhi, pos - lo)
    nan_line = _C.eq(count, 0) if ignore_nan else _C.gt(nans, 0)
    out = _C.where(nan_line, float("nan"), out)
    out = out.movedim(-1, 0)  # (Q, ...)
    if keepdim:
        out = out.unsqueeze(d + 1) if dim is not None else out.reshape((out.shape[0],) + (1,) * input.ndim)
    return out.squeeze(0) if scalar_q or (isinstance(q, _C.Tensor) and q.ndim == 0) else out


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The q-th quantiles (q a number or a 1-D tensor in [0, 1]) of all
    elements or along dim; NaN if a line has a NaN."""
    return _quantile(input, q, dim, keepdim, interpolation, False, "quantile")


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    return _quantile(input, q, dim, keepdim, interpolation, True, "nanquantile")


def msort(input):
    _tensors("msort", input=input)
    return _C.sort(input, 0)[0]


def argwhere(input):
    _tensors("argwhere", input=input)
    return _C.nonzero(input)


def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The n-th forward difference along dim (after prepend/append)."""
    _tensors("diff", input=input)
    if input.ndim == 0:
        raise RuntimeError("[diff] expects input to be at least one-dimensional")
    d = _dim(dim, input.ndim, "diff")
    parts = [p for p in (prepend, input, append) if p is not None]
    x = _C.cat([_t(p, input) if _t(p, input).ndim else _t(p, input).expand(
        *[1 if i == d else input.shape[i] for i in range(input.ndim)]) for p in parts], d)
    for _ in range(_int(n, "diff", "n")):
        length = x.shape[d]
        if length == 0:
            break
        x = _C.logical_xor(x.narrow(d, 1, length - 1), x.narrow(d, 0, length - 1)) \
            if x.dtype == _C.bool else x.narrow(d, 1, length - 1) - x.narrow(d, 0, length - 1)
    return x


def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance of the rows of input (variables) over its columns
    (observations)."""
    _tensors("cov", input=input)
    if input.ndim > 2:
        raise ValueError(f"[cov] expected input to have two or fewer dimensions, got {input.ndim}")
    correction = _int(correction, "cov", "correction")
    x = input.reshape(1, -1) if input.ndim < 2 else input
    if not x.is_floating_point():
        x = x.float()
    n = x.shape[1]
    w = None
    for what, t in (("fweights", fweights), ("aweights", aweights)):
        if t is not None:
            _tensors("cov", **{what: t})
            if t.ndim > 1 or t.numel() != n:
                raise RuntimeError(f"[cov] expected {what} to have one dimension with {n} elements, got "
                                   f"shape {tuple(t.shape)}")
    if fweights is not None and fweights.is_floating_point():
        raise RuntimeError(f"[cov] expected fweights to have integral dtype, got {fweights.dtype}")
    if fweights is not None:
        w = fweights.to(x.dtype)
    if aweights is not None:
        w = aweights.to(x.dtype) if w is None else w * aweights.to(x.dtype)
    if w is None:
        total = float(n)
        mean = x.mean(1, keepdim=True)
        norm = total - correction
    else:
        total = w.sum()
        mean = (x * w).sum(1, keepdim=True) / total
        if correction == 0:
            norm = total
        elif aweights is None:
            norm = total - correction
        else:
            norm = total - correction * (w * aweights.to(x.dtype)).sum() / total
    xc = x - mean
    xw = xc if w is None else xc * w
    c = _C.matmul(xw, xc.t())
    c = c / _C.clamp(norm, min=0) if isinstance(norm, _C.Tensor) else c / max(norm, 0)
    return c.squeeze()  # as PyTorch: one variable gives a 0-d variance


def corrcoef(input):
    c = cov(input)
    if c.ndim == 0:
        return c / c
    d = _C.sqrt(c.diagonal())
    return _C.clamp(c / d.unsqueeze(1) / d.unsqueeze(0), -1.0, 1.0)


def dist(input, other, p=2):
    _tensors("dist", input=input, other=other)
    return _C.norm(input - other, _number(p, "dist", "p"))


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """The p-norm distance between each row of x1 (..., P, M) and each row of
    x2 (..., R, M)."""
    _tensors("cdist", x1=x1, x2=x2)
    p = _number(p, "cdist", "p")
    if x1.ndim < 2 or x2.ndim < 2 or x1.shape[-1] != x2.shape[-1]:
        raise _C.InvalidArgumentError(f"[cdist] x1 {tuple(x1.shape)} and x2 {tuple(x2.shape)} must be "
                                      f"(..., P, M) and (..., R, M) with the same M")
    if p < 0:
        raise ValueError(f"[cdist] p must be non-negative, got {p}")
    diff_ = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    if p == 0:
        return _C.ne(diff_, 0).sum(-1).to(diff_.dtype)
    return _C.norm(diff_, p, -1)


def inner(input, other):
    """Dot products over the last dims (a product with a scalar)."""
    _tensors("inner", input=input)
    other = _t(other, input)
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise _C.InvalidArgumentError(f"[inner] last dims must match, got shapes {tuple(input.shape)} "
                                      f"and {tuple(other.shape)}")
    return tensordot(input, other, ([-1], [-1]))


def ger(input, vec2):
    _tensors("ger", input=input)
    return _F.outer(input, vec2)


def kron(input, other):
    """The Kronecker product: blocks input[i] * other."""
    _tensors("kron", input=input, other=other)
    nd = max(input.ndim, other.ndim)
    a = input.reshape((1,) * (nd - input.ndim) + tuple(input.shape))
    b = other.reshape((1,) * (nd - other.ndim) + tuple(other.shape))
    shape_a, shape_b = a.shape, b.shape
    a = a.reshape([v for s in shape_a for v in (s, 1)])
    b = b.reshape([v for s in shape_b for v in (1, s)])
    return (a * b).reshape([x * y for x, y in zip(shape_a, shape_b)])


def vdot(input, other):
    _tensors("vdot", input=input, other=other)
    if input.ndim != 1 or other.ndim != 1:
        raise _C.InvalidArgumentError(f"[vdot] expected 1-D tensors, got shapes {tuple(input.shape)} "
                                      f"and {tuple(other.shape)}")
    return _F.dot(input, other)


def tensordot(a, b, dims=2):
    """Contract a's dims_a with b's dims_b (dims an int: a's last and b's
    first that many)."""
    _tensors("tensordot", a=a, b=b)
    if isinstance(dims, _C.Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise ValueError(f"[tensordot] tensordot expects dims >= 0, but got dims={dims}")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        da, db = (_dims(d, "tensordot", "dims") for d in dims)
    if len(da) != len(db):
        raise _C.InvalidArgumentError(f"[tensordot] both dimension lists should have same length, got "
                                      f"{da} and {db}")
    da = [_dim(d, a.ndim, "tensordot") for d in da]
    db = [_dim(d, b.ndim, "tensordot") for d in db]
    for i, j in zip(da, db):
        if a.shape[i] != b.shape[j]:
            raise _C.InvalidArgumentError(f"[tensordot] contracted dims must match: a's dim {i} has "
                                          f"{a.shape[i]}, b's dim {j} has {b.shape[j]}")
    keep_a = [i for i in range(a.ndim) if i not in da]
    keep_b = [j for j in range(b.ndim) if j not in db]
    k = 1
    for i in da:
        k *= a.shape[i]
    am = a.permute(keep_a + da).reshape(-1, k)
    bm = b.permute(db + keep_b).reshape(k, -1)
    return _C.matmul(am, bm).reshape([a.shape[i] for i in keep_a] + [b.shape[j] for j in keep_b])


def chain_matmul(*matrices):
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = matrices[0]
    if not matrices:
        raise ValueError("[chain_matmul] needs at least one matrix")
    out = matrices[0]
    for m in matrices[1:]:
        out = _C.matmul(out, m)
    return out


# ---- shapes ----

def tile(input, dims):
    """input repeated dims times along each dim (dims padded with leading 1s)."""
    _tensors("tile", input=input)
    reps = _dims(dims, "tile", "dims")
    if len(reps) < input.ndim:
        reps = [1] * (input.ndim - len(reps)) + reps
    return input.repeat(*reps)


def ravel(input):
    _tensors("ravel", input=input)
    return _C.reshape(input, [-1])


def moveaxis(input, source, destination):
    _tensors("moveaxis", input=input)
    return movedim(input, source, destination)


def swapdims(input, dim0, dim1):
    _tensors("swapdims", input=input)
    return _C.transpose(input, dim0, dim1)


def fliplr(input):
    _tensors("fliplr", input=input)
    if input.ndim < 2:
        raise RuntimeError(f"[fliplr] input must be >= 2-d, got {input.ndim}-d")
    return input.flip(1)


def flipud(input):
    _tensors("flipud", input=input)
    if input.ndim < 1:
        raise RuntimeError("[flipud] input must be >= 1-d")
    return input.flip(0)


def rot90(input, k=1, dims=(0, 1)):
    """Rotate by 90 degrees k times, from dims[0] towards dims[1]."""
    _tensors("rot90", input=input)
    dims = _dims(dims, "rot90", "dims")
    if len(dims) != 2:
        raise RuntimeError(f"[rot90] expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"[rot90] expected total dims >= 2, but got total dims = {input.ndim}")
    d0, d1 = _dim(dims[0], input.ndim, "rot90"), _dim(dims[1], input.ndim, "rot90")
    if d0 == d1:
        raise RuntimeError(f"[rot90] expected rotation dims to be different, got {dims}")
    k = _int(k, "rot90", "k") % 4
    if k == 1:
        return input.flip(d1).transpose(d0, d1)
    if k == 2:
        return input.flip([d0, d1])
    if k == 3:
        return input.flip(d0).transpose(d0, d1)
    return input.clone()


def tensor_split(input, indices_or_sections, dim=0):
    """Views along dim: n near-equal sections (the first size % n one
    longer), or the pieces between the given indices."""
    _tensors("tensor_split", input=input)
    if input.ndim == 0:
        raise RuntimeError("[tensor_split] expected at least a 1-dimensional tensor")
    d = _dim(dim, input.ndim, "tensor_split")
    size = input.shape[d]
    if isinstance(indices_or_sections, _C.Tensor):
        indices_or_sections = indices_or_sections.tolist()
    if isinstance(indices_or_sections, int):
        n = indices_or_sections
        if n <= 0:
            raise RuntimeError(f"[tensor_split] number of sections must be larger than 0, got {n}")
        if n > max(size, 1 << 20):
            raise MemoryError(f"[tensor_split] {n} sections of a dim of size {size}: too many tensors")
        q, r = divmod(size, n)
        bounds = list(_itertools.accumulate([q + 1] * r + [q] * (n - r)))[:-1]
    else:
        bounds = _dims(indices_or_sections, "tensor_split", "indices")
    out, start = [], 0
    for b in bounds + [size]:
        b = max(min(b if b >= 0 else b + size, size), 0)
        stop = max(b, start)
        out.append(input.narrow(d, start, stop - start))
        start = stop
    return tuple(out)


def _split_n(input, sections, dim, who, min_ndim):
    _tensors(who, input=input)
    if input.ndim < min_ndim:
        raise RuntimeError(f"[{who}] requires a tensor with at least {min_ndim} dimension, but got a "
                           f"tensor with {input.ndim} dimensions!")
    if isinstance(sections, int) and sections <= 0:
        raise RuntimeError(f"[{who}] number of sections must be larger than 0, got {sections}")
    if isinstance(sections, int) and input.shape[dim] % sections:
        raise RuntimeError(f"[{who}] attempted to split along dimension {dim}, but the size of the "
                           f"dimension {input.shape[dim]} is not divisible by the split_size {sections}!")
    return tensor_split(input, sections, dim)


def hsplit(input, sections):
    return _split_n(input, sections, 1 if getattr(input, "ndim", 0) > 1 else 0, "hsplit", 1)


def vsplit(input, sections):
    return _split_n(input, sections, 0, "vsplit", 2)


def dsplit(input, sections):
    return _split_n(input, sections, 2, "dsplit", 3)


def take(input, index):
    """input's elements at flat positions index (as if 1-D)."""
    _tensors("take", input=input, index=index)
    return _C.reshape(input, [-1]).index_select(0, index.reshape(-1)).reshape(index.shape)


def take_along_dim(input, indices, dim=None):
    """gather along dim, indices broadcast against input first (dim None:
    the flattened input)."""
    _tensors("take_along_dim", input=input, indices=indices)
    if dim is None:
        return _C.reshape(input, [-1]).gather(0, indices.reshape(-1))
    d = _dim(dim, input.ndim, "take_along_dim")
    if input.ndim != indices.ndim:
        raise RuntimeError(f"[take_along_dim] input and indices should have the same number of "
                           f"dimensions, but got {input.ndim} and {indices.ndim}")
    shape_i = list(broadcast_shapes(tuple(s for i, s in enumerate(input.shape) if i != d),
                                    tuple(s for i, s in enumerate(indices.shape) if i != d)))
    xs, js = list(shape_i), list(shape_i)
    xs.insert(d, input.shape[d])
    js.insert(d, indices.shape[d])
    return input.expand(*xs).gather(d, indices.expand(*js))


def index_copy(input, dim, index, source):
    """A copy of input with input[index[i]] (along dim) = source[i]."""
    _tensors("index_copy", input=input, index=index, source=source)
    d = _dim(dim, max(input.ndim, 1), "index_copy")
    if index.ndim > 1:
        raise _C.InvalidArgumentError(f"[index_copy] index should have 1 dimension or less, got {index.ndim}")
    idx = index.reshape(-1)
    src = source if source.ndim else source.reshape(1)
    shape = [1] * max(input.ndim, 1)
    shape[d] = idx.numel()
    x = input if input.ndim else input.reshape(1)
    full_idx = idx.reshape(shape).expand(*src.shape) if src.ndim == x.ndim else None
    if full_idx is None:
        raise _C.InvalidArgumentError(f"[index_copy] source {tuple(source.shape)} does not match input "
                                      f"{tuple(input.shape)}")
    out = x.scatter(d, full_idx, src.to(x.dtype))
    return out.reshape(input.shape)


def index_fill(input, dim, index, value):
    """A copy of input with the slices at index (along dim) set to value."""
    _tensors("index_fill", input=input, index=index)
    d = _dim(dim, max(input.ndim, 1), "index_fill")
    x = input if input.ndim else input.reshape(1)
    mask_shape = [1] * x.ndim
    mask_shape[d] = x.shape[d]
    hit = isin(_C.arange(x.shape[d]), index.reshape(-1) % max(x.shape[d], 1))
    v = value if isinstance(value, _C.Tensor) else _C.tensor(value, dtype=x.dtype)
    out = _C.where(hit.reshape(mask_shape), v.to(x.dtype), x)
    return out.reshape(input.shape)


def diagflat(input, offset=0):
    _tensors("diagflat", input=input)
    from ._more_functions import diag_embed
    return diag_embed(input.reshape(-1), offset)


def block_diag(*tensors):
    """The tensors (0-d to 2-d) on the diagonal of one matrix."""
    mats = []
    for i, t in enumerate(tensors):
        _tensors("block_diag", **{f"tensors[{i}]": t})
        if t.ndim > 2:
            raise RuntimeError(f"[block_diag] input {i} must have 2 or fewer dimensions, got {t.ndim}")
        mats.append(t.reshape(1, -1) if t.ndim < 2 else t)
    if not mats:
        return _C.zeros(1, 0)
    dtype = mats[0].dtype
    for m in mats[1:]:
        dtype = promote_types(dtype, m.dtype)
    cols = sum(m.shape[1] for m in mats)
    rows, start = [], 0
    for m in mats:
        left = _C.zeros(m.shape[0], start, dtype=dtype)
        right = _C.zeros(m.shape[0], cols - start - m.shape[1], dtype=dtype)
        rows.append(_C.cat([left, m.to(dtype), right], 1))
        start += m.shape[1]
    return _C.cat(rows, 0)


def cartesian_prod(*tensors):
    grids = meshgrid(*tensors, indexing="ij")
    if len(tensors) == 1:
        return tensors[0]
    return _C.stack([g.reshape(-1) for g in grids], 1)


def combinations(input, r=2, with_replacement=False):
    """The length-r combinations of a 1-D tensor's elements, as rows."""
    _tensors("combinations", input=input)
    if input.ndim != 1:
        raise ValueError(f"[combinations] expect a 1D vector, but got shape {tuple(input.shape)}")
    pick = _itertools.combinations_with_replacement if with_replacement else _itertools.combinations
    rows = list(pick(range(input.shape[0]), _int(r, "combinations", "r")))
    if not rows:
        return _C.zeros(0, r, dtype=input.dtype) if r else _C.zeros(0, dtype=input.dtype)
    idx = _C.tensor(rows, dtype=_C.int64)
    return input.index_select(0, idx.reshape(-1)).reshape(idx.shape)


def meshgrid(*tensors, indexing=None):
    """Coordinate grids: 'ij' (the default) puts tensor k along dim k, 'xy'
    swaps the first two."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise ValueError(f"[meshgrid] indexing must be one of 'xy' or 'ij', got {indexing!r}")
    for i, t in enumerate(tensors):
        _tensors("meshgrid", **{f"tensors[{i}]": t})
        if t.ndim > 1:
            raise RuntimeError(f"[meshgrid] expects all tensors to be 0- or 1-dimensional, tensor {i} has "
                               f"{t.ndim} dims")
    vecs = [t.reshape(-1) for t in tensors]
    swap = indexing == "xy" and len(vecs) >= 2
    if swap:
        vecs[0], vecs[1] = vecs[1], vecs[0]
    shape = [v.shape[0] for v in vecs]
    grids = []
    for k, v in enumerate(vecs):
        view = [1] * len(vecs)
        view[k] = shape[k]
        grids.append(v.reshape(view).expand(*shape))
    if swap:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


def broadcast_shapes(*shapes):
    """The shape that shapes broadcast to (ValueError-compatible error if
    they do not)."""
    out = []
    for shape in shapes:
        shape = (shape,) if isinstance(shape, int) else shape
        try:
            shape = tuple(_int(s, "broadcast_shapes", "a size") for s in shape)
        except TypeError:
            raise TypeError(f"[broadcast_shapes] each shape must be an int or a sequence of ints, got "
                            f"{shape!r}") from None
        for i, s in enumerate(reversed(shape)):
            if i == len(out):
                out.append(s)
            elif out[i] == 1 or s == out[i]:
                out[i] = s
            elif s != 1:
                raise _C.InvalidArgumentError(f"[broadcast_shapes] shape mismatch: objects cannot be "
                                              f"broadcast to a single shape ({shapes})")
    return tuple(reversed(out))


def broadcast_tensors(*tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    for i, t in enumerate(tensors):
        _tensors("broadcast_tensors", **{f"tensors[{i}]": t})
    shape = broadcast_shapes(*[t.shape for t in tensors])
    return tuple(t.expand(shape) for t in tensors)


def _tri_indices(row, col, offset, upper, dtype, who):
    row, col = _int(row, who, "row"), _int(col, who, "col")
    offset = _int(offset, who, "offset")
    if row < 0 or col < 0:
        raise RuntimeError(f"[{who}] row ({row}) and col ({col}) must be non-negative")
    if row * col > 1 << 26:
        raise MemoryError(f"[{who}] a {row} x {col} triangle is too large to list")
    if dtype not in (_C.int64, _C.int32):
        raise RuntimeError(f"[{who}] dtype must be int64 or int32, got {dtype}")
    pairs = [(i, j) for i in range(row) for j in range(col) if (j - i >= offset if upper else j - i <= offset)]
    if not pairs:
        return _C.zeros(2, 0, dtype=dtype)
    return _C.tensor(pairs, dtype=dtype).t().contiguous()


def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """(2, N): the row and column indices of the lower triangle."""
    return _tri_indices(row, col, offset, False, dtype or _C.int64, "tril_indices")


def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    return _tri_indices(row, col, offset, True, dtype or _C.int64, "triu_indices")


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    """For each value, the index where it would be inserted into the sorted
    last dim of sorted_sequence (after equal values when right)."""
    _tensors("searchsorted", sorted_sequence=sorted_sequence)
    if side is not None:
        if side not in ("left", "right"):
            raise ValueError(f"[searchsorted] side can only be 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise ValueError("[searchsorted] side and right can't be set to opposites")
        right = side == "right"
    scalar = not isinstance(input, _C.Tensor)
    values = _t(input, sorted_sequence)
    seq = sorted_sequence
    if sorter is not None:
        seq = seq.gather(-1, sorter)
    if seq.ndim > 1 and tuple(seq.shape[:-1]) != tuple(values.shape[:-1]):
        raise RuntimeError(f"[searchsorted] boundaries {tuple(seq.shape)} and input {tuple(values.shape)} "
                           f"must have the same leading dims")
    v = values.reshape(-1) if scalar else values
    n = seq.shape[-1]
    # PyTorch's binary search, every value at once: ceil(log2(n + 1)) halvings,
    # with its comparisons (so NaN and unsorted rows give what torch gives)
    lo = _C.zeros(v.shape, dtype=_C.int64)
    hi = _C.full(v.shape, n, dtype=_C.int64)
    for _ in range(max(n, 1).bit_length()):
        if n == 0:
            break
        mid = (lo + hi) // 2
        at = _C.clamp(mid, 0, n - 1)
        mid_val = seq.index_select(0, at.reshape(-1)).reshape(at.shape) if seq.ndim == 1 else \
            seq.gather(-1, at)
        active = _C.lt(lo, hi)
        right_half = _C.logical_and(active, _C.logical_not(
            _C.ge(mid_val, v) if not right else _C.gt(mid_val, v)))
        lo = _C.where(right_half, mid + 1, lo)
        hi = _C.where(_C.logical_and(active, _C.logical_not(right_half)), mid, hi)
    out = lo.to(_C.int32 if out_int32 else _C.int64)
    return out.reshape(()) if scalar else out


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """The bucket of each value among 1-D sorted boundaries."""
    _tensors("bucketize", boundaries=boundaries)
    if boundaries.ndim != 1:
        raise RuntimeError(f"[bucketize] boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def bincount(input, weights=None, minlength=0):
    """Counts of each non-negative integer in a 1-D input (sums of weights
    when given)."""
    _tensors("bincount", input=input)
    if input.ndim != 1 or input.is_floating_point() or input.dtype == _C.bool:
        raise RuntimeError(f"[bincount] only supports 1-d non-negative integral inputs, got "
                           f"{input.dtype} of shape {tuple(input.shape)}")
    n = input.numel()
    if n and int(input.min()) < 0:
        raise RuntimeError("[bincount] only supports 1-d non-negative integral inputs")
    length = max(int(input.max()) + 1 if n else 0, _int(minlength, "bincount", "minlength"))
    if weights is None:
        src, dtype = _C.ones(n, dtype=_C.int64), _C.int64
    else:
        if tuple(weights.shape) != (n,):
            raise RuntimeError(f"[bincount] weights {tuple(weights.shape)} must match input ({n},)")
        dtype = weights.dtype if weights.is_floating_point() else _C.float64
        src = weights.to(dtype)
    return _C.zeros(length, dtype=dtype).index_add(0, input.long(), src)


def histc(input, bins=100, min=0, max=0):
    """A histogram of bins equal-width bins over [min, max] (the data's
    range when both are 0); values outside are ignored."""
    _tensors("histc", input=input)
    if not input.is_floating_point():
        raise RuntimeError(f"[histc] not implemented for '{input.dtype}'")
    bins = _int(bins, "histc", "bins")
    if bins <= 0:
        raise RuntimeError(f"[histc] bins must be > 0, got {bins}")
    lo, hi = _number(min, "histc", "min"), _number(max, "histc", "max")
    flat = input.reshape(-1).to(_C.float64)  # bin positions in float64 whatever the dtype
    if lo == hi and flat.numel():
        lo, hi = float(flat.min()), float(flat.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if lo > hi:
        raise RuntimeError(f"[histc] max must be larger than min, got min {lo} and max {hi}")
    inside = _C.logical_and(_C.ge(flat, lo), _C.le(flat, hi))
    idx = _C.clamp(((flat - lo) * (bins / (hi - lo))).floor().long(), 0, bins - 1)
    return _C.zeros(bins, dtype=_C.float64).index_add(0, idx, inside.to(_C.float64)).to(input.dtype)


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each element is among test_elements."""
    e = _t(elements)
    t = _t(test_elements, e).reshape(-1)
    hit = _C.eq(e.unsqueeze(-1), t).any(-1) if t.numel() else _C.zeros_like(e, dtype=_C.bool)
    return _C.logical_not(hit) if invert else hit


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """input with runs of equal consecutive elements (of the flattened input,
    or slices along dim) collapsed to one."""
    _tensors("unique_consecutive", input=input)
    x = input.reshape(-1) if dim is None else movedim(input, _dim(dim, input.ndim, "unique_consecutive"), 0)
    n = x.shape[0] if x.ndim else 1
    if n == 0:
        outs = (x,)
        if return_inverse:
            outs += (_C.zeros(input.shape if dim is None else (0,), dtype=_C.int64),)
        if return_counts:
            outs += (_C.zeros(0, dtype=_C.int64),)
        return outs[0] if len(outs) == 1 else outs
    flat = x.reshape(n, -1)
    change = _C.ne(flat[1:], flat[:-1]).any(1) if flat.shape[1] else _C.zeros(n - 1, dtype=_C.bool)
    starts = _C.cat([_C.ones(1, dtype=_C.bool), change])
    group = _C.cumsum(starts.long(), 0) - 1
    keep = _C.nonzero(starts).reshape(-1)
    out = x.index_select(0, keep)
    if dim is not None:
        out = movedim(out, 0, _dim(dim, input.ndim, "unique_consecutive"))
    result = (out,)
    if return_inverse:
        result += (group.reshape(input.shape) if dim is None else group,)
    if return_counts:
        ends = _C.cat([keep[1:], _C.tensor([n])])
        result += (ends - keep,)
    return result[0] if len(result) == 1 else result


# ---- integration, ranges and norms ----

def _sample_points(x, dx, who):
    """(x, dx): a number passed as x is the spacing (PyTorch's dx overload)."""
    if x is not None and not isinstance(x, _C.Tensor):
        if dx is not None:
            raise TypeError(f"[{who}] x must be a Tensor when dx is given, not {type(x).__name__}")
        return None, _number(x, who, "dx")
    if dx is not None:
        dx = _number(dx, who, "dx")
    return x, dx


def _trapezoid_terms(y, x, dx, dim, who):
    """(the trapezoids' areas along dim, dim): mean neighbour heights times
    the spacing (dx, default 1, or the differences of the sample points x);
    None for the areas when dim is empty."""
    _tensors(who, y=y)
    x, dx = _sample_points(x, dx, who)
    if y.ndim == 0:
        raise IndexError(f"[{who}] y must have at least one dimension")
    d = _dim(dim, y.ndim, who)
    n = y.shape[d]
    if n == 0:
        return None, d
    avg = (y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1)) * 0.5
    if x is None:
        return avg * (1.0 if dx is None else dx), d
    spacing = diff(x).reshape([-1 if i == d else 1 for i in range(y.ndim)]) if x.ndim == 1 else diff(x, dim=d)
    return avg * spacing, d


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoidal rule along dim, at spacing dx (default 1) or sample
    points x."""
    terms, d = _trapezoid_terms(y, x, dx, dim, "trapezoid")
    return y.sum(d) if terms is None else terms.sum(d)


def trapz(y, x=None, *, dx=None, dim=-1):
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running trapezoidal rule along dim (one element shorter)."""
    terms, d = _trapezoid_terms(y, x, dx, dim, "cumulative_trapezoid")
    return y if terms is None else _C.cumsum(terms, d)


def logspace(start, end, steps, base=10.0, *, dtype=None, **kwargs):
    """steps points from base**start to base**end, evenly spaced in the
    exponent."""
    base = _number(base, "logspace", "base")
    exps = _C.linspace(start, end, steps, dtype=_C.float64)
    out = _C.pow(base, exps)
    return out.to(dtype or _C.get_default_dtype())


def renorm(input, p, dim, maxnorm):
    """Each slice along dim rescaled to p-norm at most maxnorm."""
    _tensors("renorm", input=input)
    p, maxnorm = _number(p, "renorm", "p"), _number(maxnorm, "renorm", "maxnorm")
    d = _dim(dim, input.ndim, "renorm")
    others = [i for i in range(input.ndim) if i != d]
    norms = _C.norm(input, p, others, True) if others else _C.abs(input) if p else input
    scale = _C.where(_C.gt(norms, maxnorm), maxnorm / (norms + 1e-7), _C.ones_like(norms))
    return input * scale


def select_scatter(input, src, dim, index):
    """A copy of input with input.select(dim, index) replaced by src."""
    _tensors("select_scatter", input=input, src=src)
    d = _dim(dim, input.ndim, "select_scatter")
    return slice_scatter(input, src.unsqueeze(d), d, index, (index % input.shape[d]) + 1 if index < 0 else index + 1)


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """A copy of input with the slice start:end:step along dim replaced by src."""
    _tensors("slice_scatter", input=input, src=src)
    if input.ndim == 0:
        raise IndexError("[slice_scatter] cannot slice a 0-d tensor")
    d = _dim(dim, input.ndim, "slice_scatter")
    start = None if start is None else _int(start, "slice_scatter", "start")
    end = None if end is None else _int(end, "slice_scatter", "end")
    step = _int(step, "slice_scatter", "step")
    if step <= 0:
        raise RuntimeError(f"[slice_scatter] slice step must be positive, got {step}")
    n = input.shape[d]
    positions = list(range(n))[slice(start, end, step)]
    if src.ndim != input.ndim or src.shape[d] != len(positions):
        raise RuntimeError(f"[slice_scatter] src {tuple(src.shape)} does not match the slice of input "
                           f"{tuple(input.shape)} ({len(positions)} along dim {d})")
    mask = _C.zeros(n, dtype=_C.bool)
    source_row = [0] * n
    for k, pos in enumerate(positions):
        source_row[pos] = k
    if positions:
        mask = isin(_C.arange(n), _C.tensor(positions))
    spread = src.index_select(d, _C.tensor(source_row, dtype=_C.int64)) if positions else input
    view = [1] * input.ndim
    view[d] = n
    return _C.where(mask.reshape(view), spread.to(input.dtype), input)


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """A copy of input with its diagonal (offset, dim1, dim2) replaced by src."""
    _tensors("diagonal_scatter", input=input, src=src)
    from ._more_functions import diagonal
    ones = _C.ones_like(input, dtype=_C.bool)
    where = _C.zeros_like(input, dtype=_C.bool)
    diag = diagonal(where, offset, dim1, dim2)
    if tuple(diag.shape) != tuple(src.shape):
        raise RuntimeError(f"[diagonal_scatter] src {tuple(src.shape)} does not match the diagonal "
                           f"{tuple(diag.shape)}")
    mask = where.clone()
    diagonal(mask, offset, dim1, dim2).copy_(diagonal(ones, offset, dim1, dim2))
    spread = _C.zeros_like(input)
    diagonal(spread, offset, dim1, dim2).copy_(src)
    return _C.where(mask, spread, input)


def narrow_copy(input, dim, start, length):
    _tensors("narrow_copy", input=input)
    return input.narrow(dim, start, length).clone()


# ---- dtypes ----

def promote_types(type1, type2):
    """The dtype two tensors of these dtypes compute in."""
    return (_C.zeros((), dtype=type1) + _C.zeros((), dtype=type2)).dtype


def result_type(tensor1, tensor2):
    """The dtype of tensor1 + tensor2 (numbers take part as PyTorch's weak
    scalars)."""
    def probe(x, what):
        if isinstance(x, _C.Tensor):
            return _C.zeros((), dtype=x.dtype)
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise TypeError(f"[result_type] {what} must be a Tensor or a number, not {type(x).__name__}")
        return x
    a, b = probe(tensor1, "tensor1"), probe(tensor2, "tensor2")
    if not isinstance(a, _C.Tensor) and not isinstance(b, _C.Tensor):
        a = _C.tensor(a)
    return (a + b).dtype


def can_cast(from_, to):
    """Whether PyTorch's type promotion allows from_ to become to (no float
    to integer, no non-bool to bool)."""
    f_float = from_ in (_C.float16, _C.bfloat16, _C.float32, _C.float64)
    t_float = to in (_C.float16, _C.bfloat16, _C.float32, _C.float64)
    if f_float and not t_float:
        return False
    if from_ != _C.bool and to == _C.bool:
        return False
    return True
