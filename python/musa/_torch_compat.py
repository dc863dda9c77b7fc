"""torch's older or smaller names over musa's ops: svd and qr with their
older return conventions, pinverse, nuclear_norm, frobenius_norm, put,
index_reduce, histogram, histogramdd, nextafter, scalar_tensor,
empty_strided, asarray (and the Tensor methods of the same names,
musa/_tensor.py)."""
import builtins
import collections as _collections

from . import _C
from ._functions import _dims, _int, _number, _output_fits, _tensors, writes_out

__all__ = ["svd", "qr", "pinverse", "nuclear_norm", "frobenius_norm", "put", "index_reduce",
           "histogram", "histogramdd", "nextafter", "scalar_tensor", "empty_strided", "asarray",
           "svd_lowrank", "pca_lowrank"]


def _result(name, fields):
    cls = _collections.namedtuple(name, fields)
    cls.__module__ = "musa.return_types"
    return cls


_svd_t = _result("svd", ["U", "S", "V"])
_qr_t = _result("qr", ["Q", "R"])
_histogram_t = _result("histogram", ["hist", "bin_edges"])
_histogramdd_t = _result("histogramdd", ["hist", "bin_edges"])


def _LA():
    from . import linalg
    return linalg


@writes_out("svd")
def svd(input, some=True, compute_uv=True):
    """torch.svd: (U, S, V) with A = U diag(S) V^T (V, not Vh); some=False
    gives the full U and V; without compute_uv, U and V are zeros of shape
    (m, m) and (n, n), as torch's."""
    LA = _LA()
    LA._matrices("svd", input)
    if not compute_uv:
        m, n = input.shape[-2], input.shape[-1]
        S = LA.svdvals(input)
        return _svd_t(_C.zeros(*input.shape[:-2], m, m, dtype=input.dtype), S,
                      _C.zeros(*input.shape[:-2], n, n, dtype=input.dtype))
    U, S, Vh = LA.svd(input, full_matrices=not some)
    return _svd_t(U, S, Vh.transpose(-2, -1))


@writes_out("qr")
def qr(input, some=True):
    """torch.qr: linalg.qr in mode 'reduced' (some) or 'complete'."""
    return _qr_t(*_LA().qr(input, mode="reduced" if some else "complete"))


def pinverse(input, rcond=1e-15):
    """The pseudo-inverse, singular values below rcond times the largest
    dropped: linalg.pinv(input, rtol=rcond)."""
    return _LA().pinv(input, rtol=_number(rcond, "pinverse", "rcond"))


def nuclear_norm(input, dim=None, keepdim=False, *, out=None):
    """The sum of the singular values of the matrices over dims dim (the
    last two of a 2-D input by default)."""
    _tensors("nuclear_norm", input=input)
    if isinstance(dim, bool):
        dim, keepdim = None, dim  # nuclear_norm(input, keepdim)
    dims = (-2, -1) if dim is None else tuple(_dims(dim, "nuclear_norm", "dim"))
    if len(dims) != 2:
        raise _C.InvalidArgumentError(f"[nuclear_norm] dim must name 2 dims, got {dim!r}")
    return _LA().matrix_norm(input, "nuc", dim=dims, keepdim=keepdim)


def frobenius_norm(input, dim=None, keepdim=False, *, out=None):
    """sqrt of the sum of squares over dim (all dims by default)."""
    _tensors("frobenius_norm", input=input)
    dims = tuple(range(input.ndim)) if dim is None else tuple(_dims(dim, "frobenius_norm",
                                                                     "dim"))
    return (input * input).sum(dims, keepdim=keepdim).sqrt()


def put(input, index, source, accumulate=False):
    """input with source written at index into its flattened elements
    (accumulate: added, duplicates summed)."""
    _tensors("put", input=input, index=index, source=source)
    if index.numel() != source.numel():
        raise _C.InvalidArgumentError(f"[put] index and source need the same number of "
                                      f"elements, got {index.numel()} and {source.numel()}")
    n = input.numel()
    idx = index.reshape(-1).to(_C.int64)
    if idx.numel() and (bool((idx >= n).any()) or bool((idx < -n).any())):
        raise IndexError(f"[put] index out of range for a tensor of {n} elements")
    idx = _C.where(_C.lt(idx, 0), idx + n, idx)
    flat = input.reshape(-1)
    src = source.reshape(-1).to(input.dtype)
    out = flat.index_add(0, idx, src) if accumulate else flat.index_copy(0, idx, src)
    return out.reshape(input.shape)


def index_reduce(input, dim, index, source, reduce, *, include_self=True, out=None):
    """input with source's slices along dim reduced into the slices index
    names ('prod', 'mean', 'amax', 'amin'), as scatter_reduce with the
    index spread over the slices."""
    _tensors("index_reduce", input=input, index=index, source=source)
    dim = _int(dim, "index_reduce", "dim")
    if not -source.ndim <= dim < max(source.ndim, 1) or input.ndim != source.ndim:
        raise IndexError(f"[index_reduce] dim {dim} is out of range for source of shape "
                         f"{tuple(source.shape)} (input {tuple(input.shape)})")
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise _C.InvalidArgumentError(f"[index_reduce] reduce must be 'prod', 'mean', 'amax' or "
                                      f"'amin', got {reduce!r}")
    if index.ndim != 1 or index.numel() != source.shape[dim]:
        raise _C.InvalidArgumentError(f"[index_reduce] index must be 1-D with source.shape[dim] "
                                      f"= {source.shape[dim]} elements, got shape "
                                      f"{tuple(index.shape)}")
    d = dim % input.ndim
    shape = [1] * source.ndim
    shape[d] = index.numel()
    full = index.reshape(shape).expand(source.shape)
    return input.scatter_reduce(d, full, source, reduce, include_self=include_self)


def _bin_edges(x, bins, range, who, dtype):
    """A histogram's edges for the values x: the given 1-D tensor of edges,
    or bins equal-width bins over range (x's min and max by default; a
    constant input widens by 1/2 each side)."""
    if isinstance(bins, _C.Tensor):
        edges = bins.to(dtype)
        if edges.ndim != 1 or edges.numel() < 2:
            raise _C.InvalidArgumentError(f"[{who}] bins must be a 1-D tensor of at least 2 edges")
        if not bool((edges[1:] >= edges[:-1]).all()):
            raise _C.InvalidArgumentError(f"[{who}] bin edges must increase monotonically")
        return edges
    if not isinstance(bins, int) or isinstance(bins, bool) or bins < 1:
        raise _C.InvalidArgumentError(f"[{who}] bins must be a positive int or a tensor of edges, "
                                      f"got {bins!r}")
    if range is not None:
        if not isinstance(range, (tuple, list)) or len(range) != 2:
            raise TypeError(f"[{who}] range must be a (min, max) pair, got {range!r}")
        lo, hi = _number(range[0], who, "range"), _number(range[1], who, "range")
    elif x.numel():
        lo, hi = float(x.amin()), float(x.amax())
    else:
        lo, hi = 0.0, 1.0
    if lo != lo or hi != hi or abs(lo) == float("inf") or abs(hi) == float("inf"):
        raise _C.InvalidArgumentError(f"[{who}] range [{lo}, {hi}] is not finite")
    if lo > hi:
        raise _C.InvalidArgumentError(f"[{who}] range must have min <= max, got [{lo}, {hi}]")
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return _C.linspace(lo, hi, bins + 1, dtype=dtype)


def _bin_index(x, edges):
    """Each value's bin (the last bin closed) and whether it falls in one."""
    from ._torch_index import searchsorted
    nb = edges.numel() - 1
    idx = searchsorted(edges, x.contiguous(), right=True) - 1
    idx = _C.where(_C.eq(x, edges[-1]), nb - 1, idx)
    return idx, _C.logical_and(_C.ge(x, edges[0]), _C.le(x, edges[-1]))


def _histogram_input(who, input, weight, n):
    """input (checked a tensor by the caller) floating, weight n values."""
    if not input.is_floating_point():
        raise _C.InvalidTypeError(f"[{who}] expected a floating point tensor, got {input.dtype}")
    if weight is not None:
        _tensors(who, weight=weight)
        if weight.numel() != n:
            raise _C.InvalidArgumentError(f"[{who}] weight must have {n} elements (one per sample), got "
                                          f"{weight.numel()}")


def histogram(input, bins, *, range=None, weight=None, density=False, out=None):
    """(hist, bin_edges): bins equal-width bins over range (the input's
    min and max by default; a constant input widens by 1/2 each side), or
    the given edges; the last bin includes its right edge, values outside
    are left out. weight: each value's count; density: hist / (total *
    width)."""
    _tensors("histogram", input=input)
    _histogram_input("histogram", input, weight, input.numel())
    x = input.reshape(-1)
    edges = _bin_edges(x, bins, range, "histogram", input.dtype)
    idx, inside = _bin_index(x, edges)
    w = _C.ones_like(x) if weight is None else weight.reshape(-1).to(input.dtype)
    hist = _C.zeros(edges.numel() - 1, dtype=input.dtype).index_add(
        0, _C.where(inside, idx, 0), _C.where(inside, w, 0.0))
    if density:
        hist = hist / (hist.sum() * (edges[1:] - edges[:-1]))
    return _histogram_t(hist, edges)


def histogramdd(input, bins=10, *, range=None, weight=None, density=False):
    """(hist, bin_edges) of the samples input (..., D) in D dimensions:
    bins an int, D ints or D tensors of edges; range D (min, max) pairs
    flattened ([min0, max0, min1, max1, ...]); each dim binned as
    histogram's, a sample counted where it falls inside every dim."""
    _tensors("histogramdd", input=input)
    if input.ndim < 1:
        raise _C.InvalidArgumentError("[histogramdd] input must be (..., D) samples, got a 0-d tensor")
    d = input.shape[-1]
    flat = input.reshape(-1, d)
    _histogram_input("histogramdd", input, weight, flat.shape[0])
    # D pairs of edges at least, each dim its own pass (an expanded input can claim 2^41 dims)
    _output_fits((2 * d,), input.dtype, "histogramdd", f"D = {d} (two edges a dim at least)")
    per_dim = list(bins) if isinstance(bins, (list, tuple)) else [bins] * d
    if len(per_dim) != d:
        raise _C.InvalidArgumentError(f"[histogramdd] bins must give one entry per dimension ({d}), "
                                      f"got {len(per_dim)}")
    if range is not None and (not isinstance(range, (list, tuple)) or len(range) != 2 * d):
        raise _C.InvalidArgumentError(f"[histogramdd] range must hold 2 * D = {2 * d} numbers, got {range!r}")
    edges, index, inside, shape = [], None, None, []
    for k in builtins.range(d):  # (range is the argument here)
        col = flat[:, k]
        e = _bin_edges(col, per_dim[k], None if range is None else range[2 * k:2 * k + 2], "histogramdd",
                       input.dtype)
        idx, ok = _bin_index(col, e)
        nb = e.numel() - 1
        index = idx if index is None else index * nb + idx
        inside = ok if inside is None else _C.logical_and(inside, ok)
        edges.append(e)
        shape.append(nb)
    total = 1
    for nb in shape:
        total *= nb
    w = _C.ones(flat.shape[0], dtype=input.dtype) if weight is None else weight.reshape(-1).to(input.dtype)
    if index is None:  # D = 0
        return _histogramdd_t(w.sum(), [])
    hist = _C.zeros(total, dtype=input.dtype).index_add(0, _C.where(inside, index, 0),
                                                         _C.where(inside, w, 0.0)).reshape(shape)
    if density:
        volume = None
        for k, e in enumerate(edges):
            width = (e[1:] - e[:-1]).reshape([-1 if i == k else 1 for i in builtins.range(d)])
            volume = width if volume is None else volume * width
        hist = hist / (hist.sum() * volume)
    return _histogramdd_t(hist, edges)


def nextafter(input, other):
    """The next float after input towards other, elementwise (the bits of
    input stepped by one; other where they are equal, NaN with a NaN)."""
    _tensors("nextafter", input=input, other=other)
    if input.dtype not in (_C.float32, _C.float64) or other.dtype != input.dtype:
        raise _C.InvalidTypeError(f"[nextafter] expected float32 or float64 tensors of one "
                                  f"dtype, got {input.dtype} and {other.dtype}")
    x, y = _C.broadcast_to(input, _shape(input, other)), _C.broadcast_to(other,
                                                                         _shape(input, other))
    it = _C.int32 if input.dtype == _C.float32 else _C.int64
    bits = x.contiguous().view(it)
    up = _C.eq(_C.gt(y, x), _C.ge(x, 0))  # away from 0 when moving up from a positive
    stepped = _C.where(up, bits + 1, bits - 1).view(input.dtype)
    tiny = _C.ones_like(bits).view(input.dtype)  # the smallest subnormal
    stepped = _C.where(_C.eq(x, 0), _C.where(_C.gt(y, x), tiny, -tiny), stepped)
    out = _C.where(_C.eq(x, y), y, stepped)
    return _C.where(_C.logical_or(_C.ne(x, x), _C.ne(y, y)), float("nan"), out)


def _shape(a, b):
    from ._torch_index import broadcast_shapes
    return broadcast_shapes(a.shape, b.shape)


def scalar_tensor(s, *, dtype=None, layout=None, device=None, requires_grad=False,
                  pin_memory=False):
    """A 0-d tensor of s (the default float dtype unless dtype says)."""
    _C._factory_options("scalar_tensor", device, layout, pin_memory)
    value = s if isinstance(s, bool) else _number(s, "scalar_tensor", "s")
    return _C.tensor(value, dtype=dtype or _C.get_default_dtype(), requires_grad=requires_grad)


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False,
                  pin_memory=False):
    """An uninitialised tensor of size laid out by stride (in elements)."""
    _C._factory_options("empty_strided", device, layout, pin_memory)
    size = tuple(_dims(size, "empty_strided", "size"))
    stride = tuple(_dims(stride, "empty_strided", "stride"))
    if len(size) != len(stride):
        raise _C.InvalidArgumentError(f"[empty_strided] size {size} and stride {stride} have "
                                      f"different lengths")
    if any(s < 0 for s in size) or any(s < 0 for s in stride):
        raise _C.InvalidArgumentError(f"[empty_strided] sizes and strides must be "
                                      f"non-negative, got {size} and {stride}")
    extent = 1 + sum((n - 1) * st for n, st in zip(size, stride)) if all(size) else 0
    base = _C.empty(extent, dtype=dtype or _C.get_default_dtype())
    t = base.as_strided(size, stride)
    return t.requires_grad_() if requires_grad else t


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    """obj as a tensor: a tensor itself (converted to dtype; copied only
    when copy=True or a conversion needs it), or a number, list or array
    (copied)."""
    if isinstance(obj, _C.Tensor):
        t = obj if dtype is None or obj.dtype == dtype else obj.to(dtype)
        if copy and t is obj:
            t = obj.clone()
        if copy is False and t is not obj:
            raise ValueError(f"[asarray] copy=False, but converting {obj.dtype} to {dtype} "
                             f"needs a copy")
    else:
        if copy is False:
            raise ValueError("[asarray] copy=False needs a tensor to share memory with")
        t = _C.tensor(obj, dtype=dtype) if dtype is not None else _C.tensor(obj)
    return t.requires_grad_() if requires_grad else t


def _approximate_basis(A, q, niter, M):
    """Q (*, m, q) with orthonormal columns whose span nearly holds A - M's
    range: a Gaussian sketch, then niter power iterations re-orthonormalised
    by QR each half step (Halko, Martinsson and Tropp, 2011, algorithm 4.4)."""
    from . import linalg
    At = A.transpose(-1, -2)
    Mt = None if M is None else M.transpose(-1, -2)
    R = _C.randn(*A.shape[:-2], A.shape[-1], q, dtype=A.dtype)
    X = A @ R if M is None else A @ R - M @ R
    Q = linalg.qr(X).Q
    for _ in builtins.range(niter):
        X = At @ Q if M is None else At @ Q - Mt @ Q
        Q = linalg.qr(X).Q
        X = A @ Q if M is None else A @ Q - M @ Q
        Q = linalg.qr(X).Q
    return Q


def svd_lowrank(A, q=6, niter=2, M=None):
    """(U, S, V) of a rank-q approximation of A - M by randomized SVD:
    U (*, m, q), S (*, q), V (*, n, q), A - M ~ U diag(S) V^T (exact when
    its rank is at most q, up to rounding)."""
    _tensors("svd_lowrank", A=A)
    if A.ndim < 2 or not A.is_floating_point():
        raise _C.InvalidArgumentError(f"[svd_lowrank] A must be a floating matrix (or a batch), got "
                                      f"{A.dtype} {tuple(A.shape)}")
    m, n = A.shape[-2], A.shape[-1]
    q = _int(q, "svd_lowrank", "q")
    niter = _int(niter, "svd_lowrank", "niter")
    if not 0 < q <= min(m, n):
        raise _C.InvalidArgumentError(f"[svd_lowrank] q must be in [1, min(m, n) = {min(m, n)}], got {q}")
    if niter < 0:
        raise _C.InvalidArgumentError(f"[svd_lowrank] niter must be non-negative, got {niter}")
    if M is not None:
        _tensors("svd_lowrank", M=M)
        M = M.expand(*A.shape).to(A.dtype)
    from . import linalg
    if m < n:  # sketch the taller side
        V, S, U = svd_lowrank(A.transpose(-1, -2), q, niter, None if M is None else M.transpose(-1, -2))
        return U, S, V
    Q = _approximate_basis(A, q, niter, M)
    B = Q.transpose(-1, -2) @ (A if M is None else A - M)  # (*, q, n)
    U, S, Vh = linalg.svd(B, full_matrices=False)
    return Q @ U, S, Vh.transpose(-1, -2)


def pca_lowrank(A, q=None, center=True, niter=2):
    """(U, S, V) of A's principal components: svd_lowrank of A with its
    column means removed (center), q = min(6, m, n) by default."""
    _tensors("pca_lowrank", A=A)
    if A.ndim < 2:
        raise _C.InvalidArgumentError(f"[pca_lowrank] A must be a matrix (or a batch), got {tuple(A.shape)}")
    m, n = A.shape[-2], A.shape[-1]
    q = min(6, m, n) if q is None else _int(q, "pca_lowrank", "q")
    if not 0 <= q <= min(m, n):
        raise _C.InvalidArgumentError(f"[pca_lowrank] q must be in [0, min(m, n) = {min(m, n)}], got {q}")
    if center:
        return svd_lowrank(A - A.mean(-2, keepdim=True), q, niter)
    return svd_lowrank(A, q, niter)
