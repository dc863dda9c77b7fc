"""More of torch.linalg, composed of musa.linalg's rows: solve_ex, cond,
vander, tensorinv, tensorsolve, matrix_exp (exported by musa/linalg.py;
torch.matrix_exp, torch.vander and Tensor.matrix_exp too)."""
import math as _math

from . import _C
from ._functions import _tensors
from ._functions import writes_out as _writes_out


def _linalg():
    from . import linalg
    return linalg


@_writes_out("linalg.solve_ex")
def solve_ex(A, B, *, left=True, check_errors=False, out=None):
    """(result, info): solve(A, B); where A is singular, info holds LU's
    i + 1 for a zero U[i, i] per matrix (0 elsewhere) and the result is what
    the LU factors give (infinities or NaNs there), instead of an error
    (check_errors=True raises it). A failure is found by the solve, then the
    factors are read again per matrix, so under musa.jit a singular A
    raises."""
    LA = _linalg()
    try:
        X = LA.solve(A, B, left=left)
        return LA._solve_ex_t(X, _C.zeros(list(A.shape[:-2]), dtype=_C.int32))
    except _C.LinAlgError:
        if check_errors:
            raise
    LU, piv, info = LA.lu_factor_ex(A)
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    Bm = B.unsqueeze(-1) if vector and left else B
    X = LA.lu_solve(LU, piv, Bm, left=left)
    return LA._solve_ex_t(X.squeeze(-1) if vector and left else X, info)


@_writes_out("linalg.cond")
def cond(A, p=None, *, out=None):
    """The condition number of A in norm p: sigma_max / sigma_min for p None
    or 2 (-2: the inverse), from the singular values, any shape; else
    norm(A, p) norm(inv(A), p) for square A ('fro', 'nuc', +-inf, +-1),
    inf where A is singular, as torch."""
    LA = _linalg()
    _tensors("linalg.cond", A=A)
    LA._matrices("linalg.cond", A)
    if p is None or p in (2, -2):
        s = LA.svdvals(A)
        big, small = s[..., 0], s[..., -1]
        return small / big if p == -2 else big / small
    if p not in ("fro", "nuc", _math.inf, -_math.inf, 1, -1):
        raise _C.InvalidArgumentError(f"[linalg.cond] p must be None, 2, -2, 'fro', 'nuc', inf, "
                                      f"-inf, 1 or -1, got {p!r}")
    LA._matrices("linalg.cond", A, square=True)
    inv, info = solve_ex(A, _C.eye(A.shape[-1], dtype=A.dtype).expand(A.shape))
    bad = (info > 0).unsqueeze(-1).unsqueeze(-1)
    inv = _C.where(bad, 0.0, inv)  # no infinities into the nuclear norm's SVD
    c = LA.matrix_norm(A, p) * LA.matrix_norm(inv, p)
    return _C.where(info > 0, float("inf"), c)  # singular: inf, as torch


def vander(x, *, N=None):
    """(.., n, N) with columns x^0, x^1, ..., x^(N - 1) (N defaults to n)."""
    _tensors("linalg.vander", x=x)
    if x.ndim < 1:
        raise _C.InvalidArgumentError("[linalg.vander] x must have at least 1 dimension")
    N = x.shape[-1] if N is None else N
    if not isinstance(N, int) or isinstance(N, bool) or N < 0:
        raise _C.InvalidArgumentError(f"[linalg.vander] N must be a non-negative int, got {N!r}")
    if N == 0:
        return _C.empty(*x.shape, 0, dtype=x.dtype)
    ones = _C.ones_like(x).unsqueeze(-1)
    if N == 1:
        return ones
    # the columns 1, x, x, ... as an expanded view, multiplied up
    return _C.cat([ones, x.unsqueeze(-1).expand(*x.shape, N - 1)], -1).cumprod(-1)


def torch_vander(x, N=None, increasing=False):
    """torch.vander: 1-D x, columns x^(N-1) ... x^0 (or increasing)."""
    _tensors("vander", x=x)
    if x.ndim != 1:
        raise _C.InvalidArgumentError(f"[vander] x must be a one-dimensional tensor, got "
                                      f"{x.ndim} dimensions")
    v = vander(x, N=N)
    return v if increasing else v.flip(-1)


@_writes_out("linalg.tensorinv")
def tensorinv(A, ind=2, *, out=None):
    """The inverse of A taken as a matrix of its first ind dims by the rest:
    the result has shape A.shape[ind:] + A.shape[:ind]."""
    LA = _linalg()
    _tensors("linalg.tensorinv", A=A)
    if not isinstance(ind, int) or isinstance(ind, bool) or ind <= 0 or ind > A.ndim:
        raise _C.InvalidArgumentError(f"[linalg.tensorinv] ind must be a positive int at most "
                                      f"{A.ndim}, got {ind!r}")
    rows, cols = _math.prod(A.shape[:ind]), _math.prod(A.shape[ind:])
    if rows != cols:
        raise _C.InvalidArgumentError(f"[linalg.tensorinv] the product of the first {ind} dims "
                                      f"({rows}) must equal that of the rest ({cols})")
    return LA.inv(A.reshape(rows, cols)).reshape(*A.shape[ind:], *A.shape[:ind])


@_writes_out("linalg.tensorsolve")
def tensorsolve(A, B, dims=None, *, out=None):
    """X with tensordot(A, X, X.ndim) = B: A's dims past B.ndim are X's
    (dims: A's dims moved to the end first)."""
    LA = _linalg()
    _tensors("linalg.tensorsolve", A=A, B=B)
    if dims is not None:
        from ._functions import _dims
        dims = [d % max(A.ndim, 1) for d in _dims(dims, "linalg.tensorsolve", "dims")]
        A = A.permute(*[d for d in range(A.ndim) if d not in dims], *dims)
    rest = tuple(A.shape[B.ndim:])
    if tuple(A.shape[:B.ndim]) != tuple(B.shape) or _math.prod(rest) != B.numel():
        raise _C.InvalidArgumentError(f"[linalg.tensorsolve] A of shape {tuple(A.shape)} does "
                                      f"not match B of shape {tuple(B.shape)}: A's leading dims "
                                      f"must be B's and the rest must hold as many elements")
    n = B.numel()
    return LA.solve(A.reshape(n, n), B.reshape(n)).reshape(*rest)


# ---- matrix_exp: scaling and squaring with the [13/13] Pade approximant ----

_M = 13
# the approximant's coefficients c_j = (2m - j)! m! / ((2m)! j! (m - j)!)
_PADE = [_math.factorial(2 * _M - j) * _math.factorial(_M) /
         (_math.factorial(2 * _M) * _math.factorial(j) * _math.factorial(_M - j))
         for j in range(_M + 1)]
_THETA = 5.371920351148152  # Higham (2005): the 1-norm up to which [13/13] is exact in float64


def matrix_exp(A):
    """exp(A) = (r(A / 2^s))^(2^s), r the [13/13] Pade approximant, s from
    A's 1-norm (read on the host; the largest in a batch) so that
    ||A / 2^s|| <= 5.37 (Higham, SIAM J. Matrix Anal. Appl. 26, 2005).
    Differentiable through its matmuls and solve."""
    LA = _linalg()
    _tensors("matrix_exp", A=A)
    LA._matrices("matrix_exp", A, square=True)
    n = A.shape[-1]
    if A.numel() == 0:
        return A.clone()
    if A.dtype == _C.float32:
        # in float64, rounded once: float32's squarings compound the approximant's rounding
        # (a 1-norm of 65,000 takes 14 of them; fuzz seed 17272 came out 30% low)
        return matrix_exp(A.double()).float()
    norm = float(A.detach().abs().sum(-2).amax()) if A.numel() else 0.0
    if not _math.isfinite(norm):
        return A + _C.full_like(A, float("nan"))  # NaN where the input is not finite, as torch
    s = max(0, _math.ceil(_math.log2(norm / _THETA))) if norm > _THETA else 0
    X = A / (2.0 ** s) if s else A
    eye = _C.eye(n, dtype=A.dtype).expand(A.shape)
    X2 = X @ X
    X4 = X2 @ X2
    X6 = X4 @ X2
    c = _PADE
    # U = X (c13 X12 + c11 X10 + ... + c1 I), V = c12 X12 + ... + c0 I, with
    # X12, X10, X8 from X6 (Higham's evaluation: 6 products in all)
    u_hi = X6 * c[13] + X4 * c[11] + X2 * c[9]
    u = X @ (X6 @ u_hi + X6 * c[7] + X4 * c[5] + X2 * c[3] + eye * c[1])
    v_hi = X6 * c[12] + X4 * c[10] + X2 * c[8]
    v = X6 @ v_hi + X6 * c[6] + X4 * c[4] + X2 * c[2] + eye * c[0]
    R = LA.solve(v - u, v + u)
    for _ in range(s):
        R = R @ R
    return R


@_writes_out("householder_product")
def householder_product(A, tau, *, out=None):
    """The first n columns of H_1 H_2 ... H_k for A (*, m, n), m >= n, and
    tau (*, k), k <= n: H_i = I - tau_i v_i v_i^T with v_i = (0, ..., 0, 1,
    A[i+1:, i]) (LAPACK's orgqr; torch.linalg.householder_product),
    applied right to left to the identity's first n columns, differentiably."""
    LA = _linalg()
    _tensors("householder_product", A=A, tau=tau)
    LA._matrices("householder_product", A)
    m, n = A.shape[-2], A.shape[-1]
    if m < n:
        raise _C.InvalidArgumentError(f"[householder_product] A must have at least as many rows as columns, "
                                      f"got {m} by {n}")
    if tau.ndim != A.ndim - 1 or tuple(tau.shape[:-1]) != tuple(A.shape[:-2]) or tau.shape[-1] > n:
        raise _C.InvalidArgumentError(f"[householder_product] tau must be (*, k) with A's batch dims "
                                      f"{tuple(A.shape[:-2])} and k <= {n}, got {tuple(tau.shape)}")
    if tau.dtype != A.dtype:
        raise _C.InvalidArgumentError(f"[householder_product] tau's dtype {tau.dtype} differs from A's {A.dtype}")
    rows = _C.arange(m).reshape(m, 1)
    q = _C.eye(m, n, dtype=A.dtype).expand(*A.shape[:-2], m, n)
    for i in reversed(range(tau.shape[-1])):
        v = _C.where(_C.lt(rows, i), 0.0, _C.where(_C.eq(rows, i), 1.0, A[..., :, i:i + 1]))  # (*, m, 1)
        t = tau[..., i:i + 1].unsqueeze(-1)
        q = q - (t * v) @ (v.transpose(-1, -2) @ q)
    return q
