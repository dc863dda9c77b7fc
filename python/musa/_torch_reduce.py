"""PyTorch's reductions and products written over the C ops: NaN-aware
and order statistics (nansum, median, kthvalue, quantile), differences,
covariance, distances and tensor products. Re-exported by _torch_ops."""
import collections as _collections
import operator

from . import _C
from . import _functions as _F
from ._functions import _dim, _dims, _int, _number, _tensors
from ._torch_math import _t

__all__ = [
    "mode",
    "nansum",
    "nanmean",
    "aminmax",
    "kthvalue",
    "median",
    "nanmedian",
    "quantile",
    "nanquantile",
    "msort",
    "argwhere",
    "diff",
    "cov",
    "corrcoef",
    "dist",
    "cdist",
    "inner",
    "ger",
    "kron",
    "vdot",
    "tensordot",
    "chain_matmul",
]


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


def mode(input, dim=-1, keepdim=False):
    """(values, indices): the most frequent value along dim (the smallest
    of those tied, NaNs counted as equal) and the index of its last
    occurrence, as PyTorch's; values differentiable through the index."""
    values, indices, d = _sorted_lines(input, dim, "mode")
    v = values.movedim(d, -1)
    p = indices.movedim(d, -1)
    n = v.shape[-1]
    same = _C.eq(v[..., 1:], v[..., :-1])
    if v.is_floating_point():
        same = _C.logical_or(same, _C.logical_and(_C.isnan(v[..., 1:]), _C.isnan(v[..., :-1])))
    start = _C.cat([_C.ones_like(v[..., :1], dtype=_C.bool), _C.logical_not(same)], -1)
    run = start.to(_C.int64).cumsum(-1) - 1                 # each sorted position's run
    length = _C.zeros(v.shape, dtype=_C.int64).scatter_add(-1, run, _C.ones_like(run))
    count = length.gather(-1, run)                          # its run's length
    best = count.amax(-1, keepdim=True)
    first = _C.eq(count, best).to(_C.int64).argmax(-1, keepdim=True)  # smallest value of the most
    last = _C.clamp(first + best - 1, max=n - 1)            # the run's last: largest index
    idx = p.gather(-1, last).movedim(-1, d)
    val = input.gather(d, idx) if input.ndim else input.reshape(1).gather(0, idx.reshape(1))
    if input.ndim == 0:
        return _values_indices(val.reshape(()), idx.reshape(()))
    if not keepdim:
        val, idx = val.squeeze(d), idx.squeeze(d)
    return _values_indices(val, idx)


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
    if _int(n, "diff", "n") == 0:  # no difference taken: input as it is (PyTorch ignores
        return input                # prepend and append then too)
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
    if isinstance(dims, _C.Tensor):  # one element: a count, as torch reads it
        dims = dims.tolist() if dims.numel() != 1 else int(dims.item())
    if not isinstance(dims, (list, tuple)):
        try:
            dims = operator.index(dims)
        except TypeError:
            raise TypeError(f"[tensordot] dims must be an int or a pair of dim lists, got "
                            f"{type(dims).__name__}") from None
    elif len(dims) != 2:
        raise ValueError(f"[tensordot] dims must be an int or a pair of dim lists, got {dims!r}")
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
