"""musa.linalg: PyTorch's torch.linalg on OpenBLAS's LAPACK.

The factorizations are rows of the op table (solve, solve_triangular,
lu_factor, slogdet, cholesky, eigh, svd, qr: eager, autograd and musa.jit
alike); everything else here is composed of them and of other ops, so it is
differentiable and compiles too (lu_factor's error check and lu_solve's
pivots read values on the host). float32 and float64 only; inputs batch over leading dims.
See docs/linalg.md.

    import musa
    A = musa.randn(3, 3, dtype=musa.float64)
    x = musa.linalg.solve(A, musa.ones(3, dtype=musa.float64))
    sign, logabsdet = musa.linalg.slogdet(A)
"""
import builtins as _builtins
import collections as _collections
import math as _math

from . import _C
from ._functions import _dim, _int, _tensors
from ._functions import writes_out as _writes_out

LinAlgError = _C.LinAlgError

__all__ = ["LinAlgError", "solve", "solve_triangular", "lu_factor", "lu_factor_ex", "lu",
           "lu_solve", "inv", "inv_ex", "det", "slogdet", "cholesky", "cholesky_ex", "eigh",
           "eigvalsh", "svd", "svdvals", "qr", "lstsq", "pinv", "matrix_rank", "vector_norm",
           "matrix_norm", "norm", "matmul", "diagonal", "vecdot", "multi_dot", "matrix_power",
           "cross", "solve_ex", "cond", "vander", "tensorinv", "tensorsolve", "matrix_exp",
           "householder_product"]


def cross(input, other, *, dim=-1):
    """The cross product of 3-vectors along dim (-1 by default), the inputs
    broadcast against each other."""
    from ._torch_special import cross as _cross
    return _cross(input, other, dim)


def _result_type(name, fields):
    cls = _collections.namedtuple(name, fields)
    cls.__module__ = "musa.return_types"
    return cls


# PyTorch's torch.return_types of these functions, fields by the same names
_slogdet_t = _result_type("linalg_slogdet", ["sign", "logabsdet"])
_eigh_t = _result_type("linalg_eigh", ["eigenvalues", "eigenvectors"])
_svd_t = _result_type("linalg_svd", ["U", "S", "Vh"])
_qr_t = _result_type("linalg_qr", ["Q", "R"])
_lstsq_t = _result_type("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])
_inv_ex_t = _result_type("linalg_inv_ex", ["inverse", "info"])
_cholesky_ex_t = _result_type("linalg_cholesky_ex", ["L", "info"])
_lu_factor_t = _result_type("linalg_lu_factor", ["LU", "pivots"])
_lu_factor_ex_t = _result_type("linalg_lu_factor_ex", ["LU", "pivots", "info"])
_lu_t = _result_type("linalg_lu", ["P", "L", "U"])
_solve_ex_t = _result_type("linalg_solve_ex", ["result", "info"])

_QR_MODES = {"reduced": 0, "complete": 1, "r": 2}


def _matrices(who, A, square=False):
    """A Tensor of float32/float64 matrices (square if asked), else the
    error PyTorch raises, as musa's error classes."""
    _tensors(who, A=A)
    if A.dtype not in (_C.float32, _C.float64):
        raise _C.InvalidTypeError(f"[{who}] expected a float32 or float64 tensor (LAPACK's "
                                  f"types), got {A.dtype}")
    if A.ndim < 2:
        raise _C.InvalidArgumentError(f"[{who}] A must have at least 2 dimensions, got {A.ndim}")
    if square and A.shape[-1] != A.shape[-2]:
        raise _C.InvalidArgumentError(f"[{who}] A must be batches of square matrices, but they are "
                                      f"{A.shape[-2]} by {A.shape[-1]} matrices")


def _mT(x):
    return x.transpose(-2, -1)


def _eps(dtype):
    return 2.0 ** -52 if dtype == _C.float64 else 2.0 ** -23


# ---- the op-table rows ----

@_writes_out("linalg.solve")
def solve(A, B, *, left=True, out=None):
    """X with A X = B (left=False: X A = B). B is (.., n, k), or a vector
    (n,) / (.., n) giving a vector X; batch dims broadcast."""
    _tensors("linalg.solve", A=A, B=B)
    if not left:
        if B.ndim < 2:
            raise _C.InvalidArgumentError(f"[linalg.solve] left=False needs B with at least 2 "
                                          f"dimensions, got {B.ndim}")
        return _mT(_C.linalg_solve(_mT(A), _mT(B)))
    return _C.linalg_solve(A, B)


@_writes_out("linalg.slogdet")
def slogdet(A, *, out=None):
    """(sign, logabsdet) of det A; a singular A gives (0, -inf)."""
    return _slogdet_t(*_C.linalg_slogdet(A))


@_writes_out("linalg.cholesky")
def cholesky(A, *, upper=False, out=None):
    """L lower with A = L L^T (from A's lower triangle), or U = L^T."""
    return _C.linalg_cholesky(A, upper=bool(upper))


@_writes_out("linalg.solve_triangular")
def solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None):
    """X with A X = B (left=False: X A = B) for triangular A: only its upper
    (or lower) triangle is read, and with unitriangular its diagonal is
    taken as ones. B is (.., n, k) (left) or (.., k, n); batch dims
    broadcast. A zero on the diagonal gives infinities or NaNs, unchecked,
    as in PyTorch."""
    return _C.linalg_solve_triangular(A, B, upper=bool(upper), left=bool(left),
                                      unitriangular=bool(unitriangular))


def _pivoting(who, pivot):
    if not pivot:
        raise _C.InvalidArgumentError(f"[{who}] LU without pivoting is not implemented on the "
                                      f"CPU, as in PyTorch; use pivot=True")


@_writes_out("linalg.lu_factor_ex")
def lu_factor_ex(A, *, pivot=True, check_errors=False, out=None):
    """(LU, pivots, info): A = P L U with partial pivoting (LAPACK's getrf),
    A (.., m, n). LU packs L (unit lower, its diagonal not stored) and U;
    pivots (.., min(m, n)) int32 are 1-based, as LAPACK's and torch's; info
    is 0, or i + 1 where U[i, i] is exactly zero (check_errors=True raises
    then). LU is differentiable (U invertible, as in torch)."""
    _pivoting("linalg.lu_factor_ex", pivot)
    LU, pivots, info, _perm = _C.linalg_lu_factor(A)
    if check_errors:
        _check_lu("linalg.lu_factor_ex", info)
    return _lu_factor_ex_t(LU, pivots, info)


def _check_lu(who, info):
    bad = info.reshape(-1).tolist()
    for b, i in enumerate(bad):
        if i > 0:
            at = f" (batch element {b})" if info.ndim else ""
            raise _C.LinAlgError(
                f"[{who}] U[{i},{i}] is zero{at}, and using it on lu_solve would result in a "
                f"division by zero; to factor it anyway call linalg.lu or linalg.lu_factor_ex")


@_writes_out("linalg.lu_factor")
def lu_factor(A, *, pivot=True, out=None):
    """(LU, pivots) of lu_factor_ex; a singular U raises (reading info on
    the host: a graph break under musa.jit; lu_factor_ex does not read it)."""
    _pivoting("linalg.lu_factor", pivot)
    LU, pivots, info = lu_factor_ex(A)
    _check_lu("linalg.lu_factor", info)
    return _lu_factor_t(LU, pivots)


@_writes_out("linalg.lu")
def lu(A, *, pivot=True, out=None):
    """(P, L, U) with A = P L U: P (.., m, m) a permutation matrix, L
    (.., m, k) unit lower, U (.., k, n) upper, k = min(m, n); differentiable
    in L and U."""
    _pivoting("linalg.lu", pivot)
    return _lu_t(*_C.linalg_lu(A))


def _perm_of(who, pivots, m):
    """The row order (.., m) int64 that LAPACK's 1-based pivots (.., k)
    make (A[perm] = L U), read on the host."""
    _tensors(who, pivots=pivots)
    if pivots.dtype not in (_C.int32, _C.int64) or pivots.ndim < 1 or pivots.shape[-1] > m:
        raise _C.InvalidArgumentError(f"[{who}] pivots must be an int32 tensor (.., k) with k <= "
                                      f"{m}, got {pivots.dtype} of shape {tuple(pivots.shape)}")
    rows = pivots.reshape(-1, pivots.shape[-1]).tolist()
    perms = []
    for r in rows:
        p = list(range(m))
        for i, j in enumerate(r):
            if not 1 <= j <= m:
                raise _C.InvalidArgumentError(f"[{who}] pivots must be between 1 and {m}, got {j}")
            p[i], p[j - 1] = p[j - 1], p[i]
        perms.append(p)
    return _C.tensor(perms, dtype=_C.int64).reshape(list(pivots.shape[:-1]) + [m])


def _rows_of(perm, dtype):
    """The one-hot matrix pt with pt @ X = X[perm] (P^T for A = P L U),
    batched like perm (.., m)."""
    return (perm.unsqueeze(-1) == _C.arange(perm.shape[-1], dtype=_C.int64)).to(dtype)


@_writes_out("linalg.lu_solve")
def lu_solve(LU, pivots, B, *, left=True, adjoint=False, out=None):
    """X with A X = B (left=False: X A = B; adjoint: with A^T) from A's
    lu_factor: a permutation and two triangular solves. Differentiable in
    LU and B; the pivots are read on the host."""
    _tensors("linalg.lu_solve", LU=LU, B=B)
    _matrices("linalg.lu_solve", LU, square=True)
    if B.ndim < 2:
        raise _C.InvalidArgumentError(f"[linalg.lu_solve] B must have at least 2 dimensions, "
                                      f"got {B.ndim}")
    n = LU.shape[-1]
    perm = _perm_of("linalg.lu_solve", pivots, n)
    if tuple(perm.shape[:-1]) != tuple(LU.shape[:-2]):
        raise _C.InvalidArgumentError(f"[linalg.lu_solve] pivots of shape {tuple(pivots.shape)} "
                                      f"do not match LU of shape {tuple(LU.shape)}")
    tri = _C.linalg_solve_triangular
    pt = _rows_of(perm, LU.dtype)
    if not adjoint and left:      # X = U^-1 L^-1 P^T B
        return tri(LU, tri(LU, pt @ B, upper=False, unitriangular=True), upper=True)
    if not adjoint:               # X = B U^-1 L^-1 P^T
        y = tri(LU, tri(LU, B, upper=True, left=False), upper=False, left=False, unitriangular=True)
        return y @ pt
    if left:                      # X = P L^-T U^-T B
        y = tri(_mT(LU), tri(_mT(LU), B, upper=False), upper=True, unitriangular=True)
        return _mT(pt) @ y
    # X = B P L^-T U^-T
    y = tri(_mT(LU), B @ _mT(pt), upper=True, left=False, unitriangular=True)
    return tri(_mT(LU), y, upper=False, left=False)


@_writes_out("linalg.cholesky_ex")
def cholesky_ex(A, *, upper=False, check_errors=False, out=None):
    """(L, info): cholesky(A) and, per matrix, 0 or the order of the first
    leading minor that is not positive-definite (that matrix's L is then
    NaN), instead of an error (check_errors=True raises it). The check runs
    the factorization per matrix again after a failure, so under musa.jit,
    which runs no Python then, a matrix that is not positive-definite
    raises."""
    try:
        L = _C.linalg_cholesky(A, upper=bool(upper))
        return _cholesky_ex_t(L, _C.zeros(list(A.shape[:-2]), dtype=_C.int32))
    except _C.LinAlgError as e:
        if check_errors or "not positive-definite" not in str(e):
            raise
    import re
    batch = list(A.shape[:-2])
    flat = A.reshape(-1, A.shape[-2], A.shape[-1])
    Ls, info = [], []
    for i in range(flat.shape[0]):
        try:
            Ls.append(_C.linalg_cholesky(flat[i], upper=bool(upper)))
            info.append(0)
        except _C.LinAlgError as e:
            info.append(int(re.search(r"minor of order (\d+)", str(e)).group(1)))
            Ls.append(_C.full(list(flat.shape[1:]), float("nan"), dtype=A.dtype))
    return _cholesky_ex_t(_C.stack(Ls).reshape(A.shape),
                          _C.tensor(info, dtype=_C.int32).reshape(batch))


@_writes_out("linalg.eigh")
def eigh(A, UPLO="L", *, out=None):
    """(eigenvalues ascending, eigenvectors as columns) of symmetric A, read
    from its lower ('L') or upper ('U') triangle."""
    return _eigh_t(*_C.linalg_eigh(A, _uplo("linalg.eigh", UPLO)))


@_writes_out("linalg.svd")
def svd(A, full_matrices=True, *, driver=None, out=None):
    """(U, S, Vh) with A = U diag(S) Vh, S descending."""
    if driver is not None:
        raise _C.InvalidArgumentError("[linalg.svd] driver= is only supported on CUDA, as in "
                                      "PyTorch")
    return _svd_t(*_C.linalg_svd(A, bool(full_matrices)))


@_writes_out("linalg.qr")
def qr(A, mode="reduced", *, out=None):
    """(Q, R) with A = Q R; mode 'reduced', 'complete' or 'r' (Q empty)."""
    if mode not in _QR_MODES:
        raise _C.InvalidArgumentError(f"[linalg.qr] mode must be 'reduced', 'complete' or 'r', "
                                      f"got {mode!r}")
    return _qr_t(*_C.linalg_qr(A, _QR_MODES[mode]))


# ---- compositions ----

@_writes_out("linalg.inv")
def inv(A, *, out=None):
    """A^{-1} = solve(A, I)."""
    return _C.linalg_inv(A)


@_writes_out("linalg.inv_ex")
def inv_ex(A, *, check_errors=False, out=None):
    """(inverse, info) as PyTorch's; info is 0 (a singular A raises)."""
    r = _C.linalg_inv(A)
    return _inv_ex_t(r, _C.zeros(list(A.shape[:-2]), dtype=_C.int32))


@_writes_out("linalg.det")
def det(A, *, out=None):
    """det A = sign exp(logabsdet); 1 for 0 by 0 matrices."""
    return _C.linalg_det(A)


@_writes_out("linalg.eigvalsh")
def eigvalsh(A, UPLO="L", *, out=None):
    """The eigenvalues of symmetric A, ascending."""
    return _C.linalg_eigh(A, _uplo("linalg.eigvalsh", UPLO))[0]


@_writes_out("linalg.svdvals")
def svdvals(A, *, driver=None, out=None):
    """The singular values of A, descending."""
    if driver is not None:
        raise _C.InvalidArgumentError("[linalg.svdvals] driver= is only supported on CUDA, as in "
                                      "PyTorch")
    return _C.linalg_svd(A, False)[1]


def _tolerance(who, S, A, atol, rtol):
    """PyTorch's cutoff max(atol, rtol * S_max) for singular (or absolute
    eigen) values S (.., k) of A, shaped (.., 1): rtol defaults to
    eps * max(m, n), or 0 when only atol is given."""
    if rtol is None:
        rtol = 0.0 if (atol is not None and not _is_zero(atol)) else \
            _eps(A.dtype) * _builtins.max(A.shape[-2], A.shape[-1])
    smax = S.amax(-1, keepdim=True) if S.shape[-1] else _C.zeros(list(S.shape[:-1]) + [1],
                                                                 dtype=S.dtype)
    tol = smax * _as_tensor(rtol, S)
    if atol is not None:
        tol = _C.maximum(tol, _as_tensor(atol, S))
    return tol


def _is_zero(v):
    return isinstance(v, (int, float)) and v == 0


def _as_tensor(v, like):
    """A number or Tensor v, broadcastable against `like`'s (.., 1) cutoff."""
    if isinstance(v, _C.Tensor):
        return v.unsqueeze(-1).cast(like.dtype) if v.ndim else v.cast(like.dtype)
    return float(v)  # a number, so musa.jit keeps it a constant


@_writes_out("linalg.pinv")
def pinv(A, *, atol=None, rtol=None, hermitian=False, out=None):
    """The Moore-Penrose pseudo-inverse, from the SVD (or, hermitian, from
    eigh), singular values at or under the cutoff taken as zero."""
    _matrices("linalg.pinv", A, square=hermitian)
    if hermitian:
        w, V = _C.linalg_eigh(A, False)
        keep = w.abs() > _tolerance("linalg.pinv", w.abs(), A, atol, rtol)
        winv = _C.where(keep, 1 / _C.where(keep, w, _C.ones_like(w)), _C.zeros_like(w))
        return (V * winv.unsqueeze(-2)) @ _mT(V)
    U, S, Vh = _C.linalg_svd(A, False)
    keep = S > _tolerance("linalg.pinv", S, A, atol, rtol)
    sinv = _C.where(keep, 1 / _C.where(keep, S, _C.ones_like(S)), _C.zeros_like(S))
    return _mT(Vh) @ (sinv.unsqueeze(-1) * _mT(U))


@_writes_out("linalg.matrix_rank")
def matrix_rank(A, *, atol=None, rtol=None, hermitian=False, tol=None, out=None):
    """The number of singular values (hermitian: |eigenvalues|) above
    max(atol, rtol * the largest), int64 shaped like A's batch."""
    _matrices("linalg.matrix_rank", A, square=hermitian)
    if tol is not None:  # the older spelling: an absolute cutoff
        atol, rtol = tol, 0.0
    S = _C.linalg_eigh(A, False)[0].abs() if hermitian else _C.linalg_svd(A, False)[1]
    return (S > _tolerance("linalg.matrix_rank", S, A, atol, rtol)).sum(-1)


def lstsq(A, B, rcond=None, *, driver=None):
    """Least squares: x minimising |A x - B| (m >= n, by QR: R^{-1} Q^T B),
    or the x of least norm with A x = B (m < n, by the QR of A^T). A must
    have full rank. (solution, residuals, rank, singular_values) as
    PyTorch's CPU drivers: gelsy (the default) gives the rank, gelsd and
    gelss also the singular values, and all but gelsy the residuals when
    m > n; what a driver does not compute is an empty tensor."""
    _tensors("linalg.lstsq", A=A, B=B)
    drivers = ("gels", "gelsy", "gelsd", "gelss")
    driver = "gelsy" if driver is None else driver
    if driver not in drivers:
        raise _C.InvalidArgumentError(f"[linalg.lstsq] driver must be one of {drivers}, got "
                                      f"{driver!r}")
    _matrices("linalg.lstsq", A)
    vector = B.ndim == A.ndim - 1
    if B.ndim < 1 or not (vector or B.ndim == A.ndim):
        raise _C.InvalidArgumentError(f"[linalg.lstsq] B must have A's number of dimensions or "
                                      f"one less, got A {tuple(A.shape)} and B {tuple(B.shape)}")
    Bm = B.unsqueeze(-1) if vector else B
    m, n = A.shape[-2], A.shape[-1]
    if Bm.shape[-2] != m:
        raise _C.InvalidArgumentError(f"[linalg.lstsq] A and B must have the same number of rows, "
                                      f"got A {tuple(A.shape)} and B {tuple(B.shape)}")
    if m >= n:
        Q, R = _C.linalg_qr(A, 0)
        x = _C.linalg_solve(R, _mT(Q) @ Bm)
    else:
        Q, R = _C.linalg_qr(_mT(A), 0)
        x = Q @ _C.linalg_solve(_mT(R), Bm)
    empty = _C.zeros([0], dtype=A.dtype)
    residuals = empty
    if driver != "gelsy" and m > n:
        residuals = ((A @ x - Bm) ** 2).sum(-2)
        residuals = residuals.squeeze(-1) if vector else residuals
    rank, sv = _C.zeros([0], dtype=_C.int64), empty
    if driver != "gels":
        S = _C.linalg_svd(A.detach(), False)[1]
        rtol = _eps(A.dtype) * _builtins.max(m, n) if rcond is None else rcond
        rank = (S > _tolerance("linalg.lstsq", S, A, None, rtol)).sum(-1)
        if driver in ("gelsd", "gelss"):
            sv = S
    return _lstsq_t(x.squeeze(-1) if vector else x, residuals, rank, sv)


# ---- norms ----

@_writes_out("linalg.vector_norm")
def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    """sum(|x|^ord)^(1/ord) over dim (None: all), any ord: inf and -inf take
    max and min |x|, 0 counts the nonzero elements."""
    _tensors("linalg.vector_norm", x=x)
    if isinstance(ord, str):
        raise _C.InvalidArgumentError(f"[linalg.vector_norm] ord must be a number, got {ord!r}")
    x = _floating("linalg.vector_norm", x, dtype)
    if isinstance(dim, int):
        dim = [dim]
    return _C.norm(x, float(ord), None if dim is None else list(dim), keepdim)


def _floating(who, x, dtype):
    if dtype is not None:
        x = x.cast(dtype)
    if x.dtype not in (_C.float32, _C.float64, _C.float16, _C.bfloat16):
        raise _C.InvalidTypeError(f"[{who}] expected a floating point tensor, got {x.dtype}")
    return x


@_writes_out("linalg.matrix_norm")
def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None, out=None):
    """A matrix norm over the two dims `dim`: 'fro', 'nuc', inf / -inf
    (max / min row sum of |A|), 1 / -1 (max / min column sum), 2 / -2
    (largest / smallest singular value)."""
    who = "linalg.matrix_norm"
    _tensors(who, A=A)
    A = _floating(who, A, dtype)
    if A.ndim < 2:
        raise _C.InvalidArgumentError(f"[{who}] A must have at least 2 dimensions, got {A.ndim}")
    try:
        d0, d1 = (_dim(d, A.ndim, who) for d in dim)
    except (TypeError, ValueError):
        raise _C.InvalidArgumentError(f"[{who}] dim must be a pair of ints, got {dim!r}") from None
    if d0 == d1:
        raise _C.InvalidArgumentError(f"[{who}] dims must be different, got {dim!r}")
    if ord == "fro":
        return _C.norm(A, 2.0, [d0, d1], keepdim)
    if ord not in ("nuc", _math.inf, -_math.inf, 1, -1, 2, -2):
        raise _C.InvalidArgumentError(f"[{who}] ord must be 'fro', 'nuc', inf, -inf, 1, -1, 2 or "
                                      f"-2, got {ord!r}")
    M = A.movedim((d0, d1), (-2, -1))
    if ord in ("nuc", 2, -2):
        S = svdvals(M)
        r = S.sum(-1) if ord == "nuc" else S.amax(-1) if ord == 2 else S.amin(-1)
    else:  # inf: max over rows of the row sums; 1: max over columns of the column sums
        sums = M.abs().sum(-1 if ord in (_math.inf, -_math.inf) else -2)
        r = sums.amax(-1) if ord in (_math.inf, 1) else sums.amin(-1)
    if keepdim:
        for d in sorted((d0, d1)):
            r = r.unsqueeze(d)
    return r


@_writes_out("linalg.norm")
def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None, out=None):
    """vector_norm for one dim (or all with ord None), matrix_norm for two
    dims, or, with dim None, by A's dims: 1-d vector, 2-d matrix."""
    _tensors("linalg.norm", A=A)
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None and len(dim) == 1:
        return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
    if dim is not None and len(dim) == 2:
        return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
    if dim is not None:
        raise _C.InvalidArgumentError(f"[linalg.norm] dim must have 1 or 2 entries, got {dim!r}")
    if ord is None:
        return vector_norm(A.flatten() if not keepdim else A, 2, None, keepdim, dtype=dtype)
    if A.ndim == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    if A.ndim == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    raise _C.InvalidArgumentError(f"[linalg.norm] A must be 1-D or 2-D when ord is given and dim "
                                  f"is None, got {A.ndim}-D")


# ---- conveniences PyTorch also has under torch.linalg ----

@_writes_out("linalg.matmul")
def matmul(input, other, *, out=None):
    return _C.matmul(input, other)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    return A.diagonal(offset, dim1, dim2)


@_writes_out("linalg.vecdot")
def vecdot(x, y, *, dim=-1, out=None):
    """sum(x * y) over dim (real tensors)."""
    return (x * y).sum(dim)


@_writes_out("linalg.multi_dot")
def multi_dot(tensors, *, out=None):
    """The product of a list of matrices (the first and last may be
    vectors), left to right."""
    tensors = list(tensors)
    if len(tensors) < 2:
        raise _C.InvalidArgumentError(f"[linalg.multi_dot] expected at least 2 tensors, got "
                                      f"{len(tensors)}")
    r = tensors[0]
    for t in tensors[1:]:
        r = _C.matmul(r, t)
    return r


@_writes_out("linalg.matrix_power")
def matrix_power(A, n, *, out=None):
    """A^n for an integer n by repeated squaring (n < 0: of inv(A))."""
    _tensors("linalg.matrix_power", A=A)
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise _C.InvalidArgumentError(f"[linalg.matrix_power] A must be batches of square "
                                      f"matrices, got shape {tuple(A.shape)}")
    n = _int(n, "linalg.matrix_power", "n")
    if n < 0:
        A, n = inv(A), -n
    r = None
    while n:
        if n & 1:
            r = A if r is None else _C.matmul(r, A)
        n >>= 1
        if n:
            A = _C.matmul(A, A)
    if r is None:  # n == 0: identities shaped like A
        r = _C.eye(A.shape[-1], dtype=A.dtype).expand(A.shape).clone()
    return r


def _uplo(who, UPLO):
    if UPLO not in ("L", "U"):
        raise _C.InvalidArgumentError(f"[{who}] UPLO must be 'L' or 'U', got {UPLO!r}")
    return UPLO == "U"




from ._linalg_more import (solve_ex, cond, vander, tensorinv, tensorsolve, matrix_exp,  # noqa: E402
                           householder_product)
