"""More functions of the musa namespace, written over the C ops (each
differentiable through them): rolls and diagonals, stacking, einsum,
logaddexp, the (std|var)_mean pairs, unique, NumPy-style aliases, and
torch's top-level spellings of musa.linalg functions (det, inverse, ...)."""
import collections as _collections
import math as _math

from . import _C
from ._functions import _dim, _dims, _int, _tensors, movedim
from .autograd import no_grad

__all__ = [
    "roll", "diagonal", "unflatten", "atleast_2d", "atleast_3d", "hstack", "vstack", "dstack",
    "column_stack", "row_stack", "logaddexp", "logaddexp2", "std_mean", "var_mean", "einsum",
    "unique", "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "fix", "diag_embed",
    "det", "inverse", "slogdet", "logdet", "cholesky", "cholesky_solve", "cholesky_inverse",
    "triangular_solve", "lu", "lu_solve", "lu_unpack", "matrix_exp", "vander", "mvlgamma",
]


def roll(input, shifts, dims=None):
    """Shift elements along dims cyclically (the flattened tensor when dims
    is None)."""
    _tensors("roll", input=input)
    shifts = (shifts,) if isinstance(shifts, int) else _dims(shifts, "roll", "shifts")
    if dims is None:
        if len(shifts) != 1:
            raise ValueError(f"[roll] without dims, shifts must be one int, got {shifts}")
        return _C.reshape(roll(_C.reshape(input, [-1]), shifts, 0), list(input.shape))
    dims = (dims,) if isinstance(dims, int) else _dims(dims, "roll", "dims")
    if len(shifts) != len(dims):
        raise ValueError(f"[roll] shifts and dims must have the same length, got {len(shifts)} "
                         f"and {len(dims)}")
    for s, d in zip(shifts, dims):
        d = _dim(d, input.ndim, "roll")
        n = input.shape[d] if input.ndim else 1
        if n == 0:
            continue
        s %= n
        if s:
            input = _C.cat([input.narrow(d, n - s, s), input.narrow(d, 0, n - s)], d)
    return input


def diagonal(input, offset=0, dim1=0, dim2=1):
    """A view of the diagonal of the (dim1, dim2) planes, as the last dim;
    offset > 0 above the main diagonal, < 0 below."""
    _tensors("diagonal", input=input)
    if input.ndim < 2:
        raise RuntimeError(f"[diagonal] needs at least 2 dims, got {input.ndim}")
    offset = _int(offset, "diagonal", "offset")
    d1, d2 = _dim(dim1, input.ndim, "diagonal"), _dim(dim2, input.ndim, "diagonal")
    if d1 == d2:
        raise RuntimeError(f"[diagonal] dim1 and dim2 cannot be the same dim ({dim1}, {dim2})")
    shape, stride = list(input.shape), list(input.stride())
    if offset >= 0:
        n = max(min(shape[d1], shape[d2] - offset), 0)
        start = offset * stride[d2]
    else:
        n = max(min(shape[d1] + offset, shape[d2]), 0)
        start = -offset * stride[d1]
    if n == 0:
        start = 0
    keep = [i for i in range(input.ndim) if i not in (d1, d2)]
    size = [shape[i] for i in keep] + [n]
    st = [stride[i] for i in keep] + [stride[d1] + stride[d2]]
    return _C.as_strided(input, size, st, input.storage_offset() + start)


def _unfold(input, dimension, size, step):
    """Tensor.unfold: a view of every size-long slice along dimension,
    step apart, as a new last dim."""
    _tensors("Tensor.unfold", input=input)
    size, step = _int(size, "Tensor.unfold", "size"), _int(step, "Tensor.unfold", "step")
    d = _dim(dimension, max(input.ndim, 1), "Tensor.unfold")
    n = input.shape[d] if input.ndim else 1
    if size < 0 or size > n:
        raise RuntimeError(f"[Tensor.unfold] size {size} must be in [0, {n}] (the size of dim {d})")
    if step <= 0:
        raise RuntimeError(f"[Tensor.unfold] step must be > 0, got {step}")
    if input.requires_grad and not input.is_contiguous():
        input = input.contiguous()  # as_strided has gradients over contiguous memory
    shape, stride = list(input.shape), list(input.stride())
    if input.ndim == 0:
        return _C.as_strided(input, [size], [1], input.storage_offset())
    shape[d], inner = (n - size) // step + 1, stride[d]
    stride[d] *= step
    return _C.as_strided(input, shape + [size], stride + [inner], input.storage_offset())


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """Tensors whose (dim1, dim2) planes hold input's last dim on their
    diagonal (offset as in diagonal), zeros elsewhere."""
    _tensors("diag_embed", input=input)
    offset = _int(offset, "diag_embed", "offset")
    x = _C.reshape(input, [1]) if input.ndim == 0 else input
    m = x.shape[-1]
    n = m + abs(offset)
    nd = x.ndim + 1
    d1, d2 = _dim(dim1, nd, "diag_embed"), _dim(dim2, nd, "diag_embed")
    if d1 == d2:
        raise RuntimeError(f"[diag_embed] dim1 and dim2 cannot be the same dim ({dim1}, {dim2})")
    # x's k-th element goes to place (rows[k], cols[k]) of its n x n plane
    # (planes last), by a scatter: every other element is an exact zero,
    # whatever x holds (NaN, inf, -0.0), in O(n * n) memory per plane
    k = _C.arange(m, dtype=_C.int64)
    rows, cols = (k, k + offset) if offset >= 0 else (k - offset, k)
    batch = list(x.shape[:-1])
    place = (rows * n + cols).expand(batch + [m]).contiguous()
    out = _C.scatter(_C.zeros(batch + [n * n], dtype=x.dtype), -1, place, x)
    return movedim(_C.reshape(out, batch + [n, n]), [nd - 2, nd - 1], [d1, d2])


def unflatten(input, dim, sizes):
    """Split dim into sizes (one entry may be -1)."""
    _tensors("unflatten", input=input)
    d = _dim(dim, input.ndim, "unflatten")
    sizes = _dims(sizes, "unflatten", "sizes")
    if not sizes:
        raise ValueError("[unflatten] sizes must be non-empty")
    shape = list(input.shape)
    return _C.reshape(input, shape[:d] + list(sizes) + shape[d + 1:])


def atleast_2d(input):
    _tensors("atleast_2d", input=input)
    return _C.reshape(input, [1] * (2 - input.ndim) + list(input.shape)) if input.ndim < 2 else input


def atleast_3d(input):
    _tensors("atleast_3d", input=input)
    if input.ndim == 0:
        return _C.reshape(input, [1, 1, 1])
    if input.ndim == 1:
        return _C.reshape(input, [1, input.shape[0], 1])
    if input.ndim == 2:
        return input.unsqueeze(-1)
    return input


def _seq(tensors, who):
    if isinstance(tensors, _C.Tensor) or not hasattr(tensors, "__iter__"):
        raise TypeError(f"[{who}] expected a sequence of tensors, got {type(tensors).__name__}")
    tensors = list(tensors)
    if not tensors:
        raise ValueError(f"[{who}] expected a non-empty sequence of tensors")
    for i, t in enumerate(tensors):
        if not isinstance(t, _C.Tensor):
            raise TypeError(f"[{who}] tensors[{i}] must be a Tensor, got {type(t).__name__}")
    return tensors


def hstack(tensors):
    """Concatenate along dim 1 (dim 0 for 1-D tensors)."""
    ts = [_C.reshape(t, [1]) if t.ndim == 0 else t for t in _seq(tensors, "hstack")]
    return _C.cat(ts, 0 if all(t.ndim == 1 for t in ts) else 1)


def vstack(tensors):
    """Concatenate along dim 0 after making each at least 2-D."""
    return _C.cat([atleast_2d(t) for t in _seq(tensors, "vstack")], 0)


row_stack = vstack


def dstack(tensors):
    """Concatenate along dim 2 after making each at least 3-D."""
    return _C.cat([atleast_3d(t) for t in _seq(tensors, "dstack")], 2)


def column_stack(tensors):
    """1-D (and 0-d) tensors as columns, then hstack."""
    ts = _seq(tensors, "column_stack")
    return hstack([_C.reshape(t, [-1, 1]) if t.ndim <= 1 else t for t in ts])


def logaddexp(input, other):
    """log(exp(a) + exp(b)) without overflow."""
    _tensors("logaddexp", input=input, other=other)
    m = _C.maximum(input, other)
    d = _C.neg(_C.abs(_C.sub(input, other)))
    r = _C.add(m, _C.log1p(_C.exp(d)))
    # equal infinities: a - b is NaN, the answer is the infinity itself
    same_inf = _C.logical_and(_C.isinf(m), _C.eq(input, other))
    return _C.where(same_inf, m, r)


def logaddexp2(input, other):
    """log2(2^a + 2^b) without overflow; float16 and bfloat16 operands are
    computed in float32 and rounded once."""
    _tensors("logaddexp2", input=input, other=other)
    with no_grad():
        out_dtype = _C.add(input.detach(), other.detach()).dtype  # the promoted result's dtype
    if not out_dtype.is_floating_point:
        out_dtype = _C.get_default_dtype()
    work = _C.float64 if out_dtype == _C.float64 else _C.float32
    ln2 = _math.log(2.0)
    r = _C.div(logaddexp(_C.mul(input.to(work), ln2), _C.mul(other.to(work), ln2)), ln2)
    return r.to(out_dtype)


def _moments(input, dim, unbiased, keepdim, correction, who):
    if isinstance(dim, bool):  # var_mean(x, False): PyTorch's (input, unbiased) form
        if unbiased is not None:
            raise TypeError(f"[{who}] a bool in the place of dim is unbiased, which is given too")
        dim, unbiased = None, dim
    if correction is not None and unbiased is not None:
        raise ValueError(f"[{who}] give either unbiased or correction, not both")
    corr = correction if correction is not None else (1 if unbiased in (None, True) else 0)
    var = input.var(dim, correction=corr, keepdim=keepdim) if dim is not None else \
        input.var(correction=corr, keepdim=keepdim)
    mean = input.mean(dim, keepdim=keepdim) if dim is not None else input.mean()
    if dim is None and keepdim:
        mean = _C.reshape(mean, [1] * input.ndim)
    return var, mean


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(var, mean) over dim, as PyTorch's var_mean."""
    _tensors("var_mean", input=input)
    return _moments(input, dim, unbiased, keepdim, correction, "var_mean")


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(std, mean) over dim, as PyTorch's std_mean."""
    _tensors("std_mean", input=input)
    var, mean = _moments(input, dim, unbiased, keepdim, correction, "std_mean")
    return _C.sqrt(var), mean


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct values (sorted), with the inverse indices and counts
    when asked; with dim, the distinct slices along dim. Reads the values on
    the host (not differentiable)."""
    _tensors("unique", input=input)
    import numpy as np
    if dim is not None and input.ndim == 0:
        raise IndexError(f"[unique] dim {dim} is out of range for a 0-d tensor")
    d = None if dim is None else _dim(dim, input.ndim, "unique")
    try:
        a = input.detach().numpy()
        vals, inv, cnt = np.unique(a, axis=d, return_inverse=True, return_counts=True)
    except MemoryError:  # (an expanded view can have more elements than memory holds)
        raise MemoryError(f"[unique] no memory for the {input.numel()} elements of "
                          f"{tuple(input.shape)} on the host") from None
    if d is None:
        inv = inv.reshape(a.shape)
    out = [_C.tensor(vals, dtype=input.dtype)]
    if return_inverse:
        out.append(_C.tensor(np.asarray(inv, dtype=np.int64)))
    if return_counts:
        out.append(_C.tensor(np.asarray(cnt, dtype=np.int64)))
    return out[0] if len(out) == 1 else tuple(out)


# ---- einsum ----

def _einsum_parse(equation, operands):
    eq = equation.replace(" ", "")
    if "->" in eq:
        lhs, rhs = eq.split("->")
    else:
        lhs, rhs = eq, None
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ValueError(f"[einsum] the equation has {len(terms)} operands, got {len(operands)}")
    # ellipses: the broadcast dims, named by characters no letter uses
    ell_n = 0
    for t, x in zip(terms, operands):
        if "..." in t:
            ell_n = max(ell_n, x.ndim - (len(t) - 3))
    ell = "".join(chr(0x100 + i) for i in range(ell_n))
    out_terms = []
    for t, x in zip(terms, operands):
        if "..." in t:
            k = x.ndim - (len(t) - 3)
            t = t.replace("...", ell[ell_n - k:])
        if len(t) != x.ndim or not all(c.isalpha() or ord(c) >= 0x100 for c in t):
            raise ValueError(f"[einsum] the subscripts of an operand ({t!r}) do not match its "
                             f"{x.ndim} dims")
        out_terms.append(t)
    if rhs is None:
        counts = {}
        for t in out_terms:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        rhs = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and ord(c) < 0x100))
    else:
        rhs = rhs.replace("...", ell)
        for c in rhs:
            if not any(c in t for t in out_terms):
                raise ValueError(f"[einsum] output subscript {c!r} does not appear in the input")
        if len(set(rhs)) != len(rhs):
            raise ValueError(f"[einsum] output subscripts repeat in {rhs!r}")
    return out_terms, rhs


def _einsum_single(x, t, keep):
    """x with subscripts t: repeated subscripts become diagonals, and those
    not in keep are summed. Returns (tensor, its subscripts)."""
    while True:
        rep = next((c for c in t if t.count(c) > 1), None)
        if rep is None:
            break
        i = t.index(rep)
        j = t.index(rep, i + 1)
        x = diagonal(x, 0, i, j)
        t = t[:i] + t[i + 1:j] + t[j + 1:] + rep
    drop = [i for i, c in enumerate(t) if c not in keep]
    if drop:
        x = x.sum(drop)
        t = "".join(c for c in t if c in keep)
    return x, t


def _einsum_pair(a, ta, b, tb, keep):
    """Contract a and b over the subscripts both have and keep does not;
    the rest (batch: in both; free: in one) stay."""
    # a dim of size 1 broadcasting against a larger one: expand first
    sizes = {}
    for x, t in ((a, ta), (b, tb)):
        for c, n in zip(t, x.shape):
            sizes[c] = max(sizes.get(c, 1), n)
    a = a.expand([sizes[c] for c in ta]) if any(sizes[c] != n for c, n in zip(ta, a.shape)) else a
    b = b.expand([sizes[c] for c in tb]) if any(sizes[c] != n for c, n in zip(tb, b.shape)) else b
    batch = [c for c in ta if c in tb and c in keep]
    contract = [c for c in ta if c in tb and c not in keep]
    fa = [c for c in ta if c not in tb]
    fb = [c for c in tb if c not in ta]
    pa = _C.permute(a, [ta.index(c) for c in batch + fa + contract])
    pb = _C.permute(b, [tb.index(c) for c in batch + contract + fb])

    def prod(cs):
        p = 1
        for c in cs:
            p *= sizes[c]
        return p

    nb, nfa, nk, nfb = prod(batch), prod(fa), prod(contract), prod(fb)
    r = _C.matmul(_C.reshape(pa, [nb, nfa, nk]), _C.reshape(pb, [nb, nk, nfb]))
    t = "".join(batch + fa + fb)
    return _C.reshape(r, [sizes[c] for c in t]), t


def einsum(equation, *operands):
    """Einstein summation: einsum("ij,jk->ik", a, b). Operands may also be
    given as one list. Implicit output (no "->"), ellipses, repeated
    subscripts (diagonals) and broadcasting of size-1 dims follow PyTorch.
    Pairs contract left to right through batched matmuls."""
    if not isinstance(equation, str):
        raise TypeError(f"[einsum] equation must be a str, got {type(equation).__name__}")
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise ValueError("[einsum] needs at least one operand")
    for i, x in enumerate(operands):
        if not isinstance(x, _C.Tensor):
            raise TypeError(f"[einsum] operand {i} must be a Tensor, got {type(x).__name__}")
    terms, out = _einsum_parse(equation, operands)
    # reduce each operand alone first (diagonals, subscripts only it has)
    xs = []
    for k, (x, t) in enumerate(zip(operands, terms)):
        later = set(out).union(*[set(u) for j, u in enumerate(terms) if j != k])
        xs.append(_einsum_single(x, t, later))
    x, t = xs[0]
    for k in range(1, len(xs)):
        y, u = xs[k]
        keep = set(out).union(*[set(v) for _, v in xs[k + 1:]])
        x, t = _einsum_pair(x, t, y, u, keep)
    x, t = _einsum_single(x, t, set(out))
    return _C.permute(x, [t.index(c) for c in out]) if t != out else x


# ---- NumPy-style aliases ----

arcsin = _C.asin
arccos = _C.acos
arctan = _C.atan
arcsinh = _C.asinh
arccosh = _C.acosh
arctanh = _C.atanh
fix = _C.trunc


# ---- torch.det, torch.inverse, ...: the musa.linalg functions (linalg.py) ----

def det(input):
    """The determinant of square matrices (musa.linalg.det)."""
    return _C.linalg_det(input)


def inverse(input):
    """The inverse of square matrices (musa.linalg.inv)."""
    return _C.linalg_inv(input)


def slogdet(input):
    """(sign, logabsdet) of the determinant (musa.linalg.slogdet)."""
    from .linalg import slogdet as _slogdet
    return _slogdet(input)


def logdet(input):
    """log det: NaN where det < 0, -inf where A is singular, as in PyTorch."""
    sign, logabsdet = _C.linalg_slogdet(input)
    return logabsdet + sign.log()  # log(sign): 0, NaN or -inf


def cholesky(input, upper=False):
    """The Cholesky factor (musa.linalg.cholesky; torch.cholesky's upper
    is positional)."""
    return _C.linalg_cholesky(input, upper=bool(upper))


def cholesky_solve(input, input2, upper=False):
    """X with A X = B for B = input and A = L L^T, L = input2 lower (or
    A = U^T U, U = input2 upper): two triangular solves. Batch dims
    broadcast."""
    _tensors("cholesky_solve", input=input, input2=input2)
    tri = _C.linalg_solve_triangular
    if upper:
        return tri(input2, tri(input2.transpose(-2, -1), input, upper=False), upper=True)
    return tri(input2.transpose(-2, -1), tri(input2, input, upper=False), upper=True)


def cholesky_inverse(input, upper=False):
    """A^{-1} for A = L L^T, L = input lower (or A = U^T U, U upper)."""
    _tensors("cholesky_inverse", input=input)
    n = input.shape[-1] if input.ndim >= 2 else 0
    return cholesky_solve(_C.eye(n, dtype=input.dtype), input, upper)


_TriangularSolve = _collections.namedtuple("triangular_solve", ["solution", "cloned_coefficient"])
_TriangularSolve.__module__ = "musa.return_types"


def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False):
    """(X, A.clone()) with A X = b, or A^T X = b with transpose (torch's
    older spelling of musa.linalg.solve_triangular)."""
    _tensors("triangular_solve", b=b, A=A)
    coef = A.transpose(-2, -1) if transpose else A
    x = _C.linalg_solve_triangular(coef, b, upper=bool(upper) != bool(transpose),
                                   unitriangular=bool(unitriangular))
    return _TriangularSolve(x, A.clone())


def lu(A, pivot=True, get_infos=False):
    """torch.lu: (LU, pivots), or (LU, pivots, infos) with get_infos (a
    singular U then does not raise), as musa.linalg.lu_factor(_ex)."""
    from .linalg import lu_factor, lu_factor_ex
    if get_infos:
        return tuple(lu_factor_ex(A, pivot=pivot))
    return tuple(lu_factor(A, pivot=pivot))


def lu_solve(b, LU_data, LU_pivots):
    """torch.lu_solve: musa.linalg.lu_solve(LU_data, LU_pivots, b)."""
    from .linalg import lu_solve as _lu_solve
    return _lu_solve(LU_data, LU_pivots, b)


_LuUnpack = _collections.namedtuple("lu_unpack", ["P", "L", "U"])
_LuUnpack.__module__ = "musa.return_types"


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    """(P, L, U) from lu_factor's (LU, pivots): L (.., m, k) unit lower and U
    (.., k, n) upper from LU, P (.., m, m) from the pivots (read on the
    host); what is not unpacked is an empty tensor, as in torch."""
    from .linalg import _perm_of, _rows_of
    _tensors("lu_unpack", LU_data=LU_data)
    if LU_data.ndim < 2:
        raise _C.InvalidArgumentError(f"[lu_unpack] LU_data must have at least 2 dimensions, "
                                      f"got {LU_data.ndim}")
    m, n = LU_data.shape[-2], LU_data.shape[-1]
    k = min(m, n)
    empty = _C.empty(0, dtype=LU_data.dtype)
    L = U = P = empty
    if unpack_data:
        L = LU_data[..., :k].tril(-1) + _C.eye(m, k, dtype=LU_data.dtype)
        U = LU_data[..., :k, :].triu()
    if unpack_pivots:
        _tensors("lu_unpack", LU_pivots=LU_pivots)
        batch = tuple(LU_data.shape[:-2])
        if tuple(LU_pivots.shape[:-1]) != batch:  # (torch reads past its pivots here)
            raise _C.InvalidArgumentError(
                f"[lu_unpack] LU_pivots must have LU_data's batch shape {batch} before its last "
                f"dim, got shape {tuple(LU_pivots.shape)} for LU_data of shape "
                f"{tuple(LU_data.shape)}")
        perm = _perm_of("lu_unpack", LU_pivots, m)
        P = _rows_of(perm, LU_data.dtype).transpose(-2, -1)
    return _LuUnpack(P, L, U)


def matrix_exp(A):
    """torch.matrix_exp: musa.linalg.matrix_exp."""
    from ._linalg_more import matrix_exp as _me
    return _me(A)


def vander(x, N=None, increasing=False):
    """torch.vander: 1-D x, columns x^(N-1) ... x^0 (or increasing)."""
    from ._linalg_more import torch_vander
    return torch_vander(x, N, increasing)


def mvlgamma(input, p):
    """torch.mvlgamma: musa.special.multigammaln."""
    from ._special_more import multigammaln
    return multigammaln(input, p)
