"""torch.nn.utils.parametrizations: spectral_norm, orthogonal and
weight_norm as parametrizations (parametrize.py), so the constrained weight
is a property recomputed from parametrizations.weight.original (weight_norm:
original0 = g, original1 = v), and state dicts carry torch's keys
(parametrizations.weight.original, .0._u, .0._v, .0.base)."""
from ... import _C
from ...autograd import no_grad
from ..modules.module import Module
from . import parametrize

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


def _normalize(x, eps):  # a vector over its 2-norm (at least eps)
    from ..functional import normalize
    return normalize(x, dim=0, eps=eps)


class _SpectralNorm(Module):
    """weight / sigma, sigma its largest singular value (of the weight as a
    matrix with dim first) estimated by power iteration: n_power_iterations
    steps per call in training, 15 at registration; 1-D weights are
    normalised."""

    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.ndim
        if not -ndim <= dim < max(ndim, 1):
            raise IndexError(f"[spectral_norm] Dimension out of range (expected to be in range of "
                             f"[{-ndim}, {ndim - 1}] but got {dim})")
        if isinstance(n_power_iterations, bool) or not isinstance(n_power_iterations, int) or \
                n_power_iterations <= 0:
            raise ValueError(f"[spectral_norm] Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim + ndim if dim < 0 else dim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            mat = self._matrix(weight)
            h, w = mat.shape
            self.register_buffer("_u", _normalize(_C.randn(h, dtype=weight.dtype), eps))
            self.register_buffer("_v", _normalize(_C.randn(w, dtype=weight.dtype), eps))
            self._power_method(mat, 15)

    def _matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *[d for d in range(weight.ndim) if d != self.dim])
        return weight.flatten(1)

    def _power_method(self, mat, iterations):
        with no_grad():
            mat = mat.detach()
            for _ in range(iterations):
                self._u.copy_(_normalize(mat @ self._v, self.eps))
                self._v.copy_(_normalize(mat.t() @ self._u, self.eps))

    def forward(self, weight):
        if weight.ndim == 1:
            return _normalize(weight, self.eps)
        mat = self._matrix(weight)
        if self.training:
            self._power_method(mat, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        sigma = (u * (mat @ v)).sum()
        return weight / sigma

    def right_inverse(self, value):
        return value  # any weight: sigma rescales it on the way out


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Parametrize module.<name> as itself over its spectral norm. dim: the
    output dim (0; 1 for transposed convolutions)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, _C.Tensor):
        raise ValueError(f"[spectral_norm] Module '{type(module).__name__}' has no parameter or buffer with "
                         f"name '{name}'")
    if dim is None:
        from ..modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module


def _is_orthogonal(q):
    n, k = q.shape[-2], q.shape[-1]
    eye = _C.eye(k, dtype=q.dtype)
    from ... import finfo
    eps = 10.0 * n * float(finfo(q.dtype).eps)
    return bool(_C.le((q.transpose(-1, -2) @ q - eye).abs(), eps).all())


def _make_orthogonal(a):
    """The Q of A's QR with R's diagonal made positive (unique for full rank)."""
    from ... import linalg
    q, r = linalg.qr(a)
    return q * _C.sign(r.diagonal(dim1=-2, dim2=-1)).unsqueeze(-2)


_MAPS = ("matrix_exp", "cayley", "householder")


class _Orthogonal(Module):
    """X to an orthogonal matrix (columns orthonormal for tall ones, rows
    for wide): the exponential or the Cayley transform of X's
    skew-symmetric part (from its lower triangle), or the Householder
    product of its strictly lower triangle; with use_trivialization, times
    a base set by right_inverse."""

    def __init__(self, weight, orthogonal_map, *, use_trivialization=True):
        super().__init__()
        self.shape = tuple(weight.shape)
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X):
        from ... import linalg
        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X = X.transpose(-1, -2)
            n, k = k, n
        if self.orthogonal_map in ("matrix_exp", "cayley"):
            X = X.tril()
            if n != k:
                X = _C.cat([X, _C.zeros(*X.shape[:-2], n, n - k, dtype=X.dtype)], -1)
            A = X - X.transpose(-1, -2)
            if self.orthogonal_map == "matrix_exp":
                Q = linalg.matrix_exp(A)
            else:
                eye = _C.eye(n, dtype=A.dtype)
                Q = linalg.solve(eye - 0.5 * A, eye + 0.5 * A)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(-1)
            tau = 2.0 / (1.0 + (A * A).sum(-2))
            Q = linalg.householder_product(A, tau)
            Q = Q * X.diagonal(dim1=-2, dim2=-1).to(_C.int32).unsqueeze(-2)
        if "base" in self._buffers and self.base is not None:
            Q = self.base @ Q
        return Q.transpose(-1, -2) if transposed else Q

    def right_inverse(self, Q):
        if tuple(Q.shape) != self.shape:
            raise ValueError(f"[orthogonal] Expected a matrix or batch of matrices of shape {self.shape}. "
                             f"Got a tensor of shape {tuple(Q.shape)}.")
        with no_grad():
            q_init = Q
            n, k = Q.shape[-2], Q.shape[-1]
            transposed = n < k
            if transposed:
                Q = Q.transpose(-1, -2)
                n, k = k, n
            if "base" not in self._buffers:
                # (torch solves for the reflectors by geqrf here; registration then keeps
                # the weight as the unconstrained X, which maps to some orthogonal matrix)
                raise NotImplementedError("[orthogonal] assigning to the parametrized weight needs "
                                          "use_trivialization=True")
            if n == k:
                Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
            else:  # complete the columns with random ones, then orthogonalise
                Q = _make_orthogonal(_C.cat([Q, _C.randn(*Q.shape[:-2], n, n - k, dtype=Q.dtype)], -1))
            self.base = Q
            # the X for which forward gives base (for every map: -I, whose skew part is 0)
            eye = _C.eye(q_init.shape[-2], q_init.shape[-1], dtype=q_init.dtype)
            return (-eye).expand(*q_init.shape).clone()


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    """Parametrize module.<name> (a matrix, or a batch of them) to stay
    orthogonal, initialised to the current weight's orthogonalisation.
    orthogonal_map: 'matrix_exp' (default for square), 'cayley' or
    'householder' (default otherwise)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, _C.Tensor):
        raise ValueError(f"[orthogonal] Module '{type(module).__name__}' has no parameter or buffer with "
                         f"name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"[orthogonal] Expected a matrix or batch of matrices. Got a tensor of "
                         f"{weight.ndim} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.shape[-2] == weight.shape[-1] else "householder"
    if orthogonal_map not in _MAPS:
        raise ValueError(f"[orthogonal] orthogonal_map has to be one of \"matrix_exp\", \"cayley\", "
                         f"\"householder\". Got: {orthogonal_map}")
    parametrize.register_parametrization(module, name, _Orthogonal(weight, orthogonal_map,
                                                                   use_trivialization=use_trivialization),
                                         unsafe=True)
    return module


class _WeightNorm(Module):
    """g v / |v|, the norm over every dim but dim (dim None: over all)."""

    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        from .weight_norm import _norm_except
        return weight_v * (weight_g / _norm_except(weight_v, self.dim))

    def right_inverse(self, weight):
        from .weight_norm import _norm_except
        return _norm_except(weight, self.dim), weight


def weight_norm(module, name="weight", dim=0):
    """Reparametrise module.<name> as g v / |v| (PyTorch 2's form of
    nn.utils.weight_norm): g is parametrizations.<name>.original0 and v
    original1."""
    if not isinstance(getattr(module, name, None), _C.Tensor):
        raise ValueError(f"[weight_norm] Module '{type(module).__name__}' has no parameter or "
                         f"buffer with name '{name}'")
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module
