"""The rest of torch.distributions (musa.distributions imports them):
ExponentialFamily, ContinuousBernoulli, OneHotCategoricalStraightThrough,
Wishart and LKJCholesky; the transforms LowerCholeskyTransform,
CorrCholeskyTransform, ReshapeTransform, CatTransform, StackTransform and
CumulativeDistributionTransform; the constraints independent and
corr_cholesky; biject_to and transform_to (constraint_registry); and the
helpers of torch.distributions.utils."""
import math

from . import _C
from ._dist_transforms import (AffineTransform, ComposeTransform, Constraint, ExpTransform,
                               IndependentTransform, SigmoidTransform, SoftmaxTransform,
                               StickBreakingTransform, Transform, _GreaterThan, _Interval, _LessThan,
                               _sum_rightmost, constraints, identity_transform, transforms)
from ._distributions_more import (Beta, _ScaleTrilMatrices, _digamma, _fn, _gamma_draw, _normal, _tril_from,
                                  _uniform)
from .distributions import (Distribution, OneHotCategorical, _as_tensor, _broadcast, _eps,
                            _probs_logits, _tiny, register_kl)

__all__ = ["ExponentialFamily", "ContinuousBernoulli", "OneHotCategoricalStraightThrough", "Wishart",
           "LKJCholesky", "LowerCholeskyTransform", "CorrCholeskyTransform", "ReshapeTransform",
           "CatTransform", "StackTransform", "CumulativeDistributionTransform", "biject_to",
           "transform_to", "constraint_registry"]


# ---- torch.distributions.utils ----

def broadcast_all(*values):
    """The values (tensors or numbers) as tensors of one broadcast shape."""
    return tuple(_broadcast(*values))


def clamp_probs(probs):
    """probs kept eps (the dtype's) away from 0 and 1."""
    eps = _eps(probs.dtype)
    return _C.clamp(probs, min=eps, max=1 - eps)


def probs_to_logits(probs, is_binary=False):
    ps = clamp_probs(probs)
    return _C.log(ps) - _C.log1p(-ps) if is_binary else _C.log(ps)


def logits_to_probs(logits, is_binary=False):
    return _C.sigmoid(logits) if is_binary else _C.softmax(logits, -1)


class lazy_property:
    """A property computed on first use and then stored on the instance."""

    def __init__(self, fn):
        self.wrapped = fn
        self.__doc__ = fn.__doc__

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


def _tril_positions(n, diag):
    """Flat positions (row-major) of the n x n lower triangle at and below
    diagonal `diag` (0: with the diagonal, -1: below it)."""
    return [i * n + j for i in range(n) for j in range(n) if j - i <= diag]


def tril_matrix_to_vec(mat, diag=0):
    """The lower triangle (from diagonal `diag` down) of the last two dims,
    row by row, as the last dim."""
    n = mat.shape[-1]
    if mat.shape[-2] != n:
        raise ValueError(f"[tril_matrix_to_vec] expected square matrices, got {tuple(mat.shape[-2:])}")
    idx = _C.tensor(_tril_positions(n, diag), dtype=_C.int64)
    return mat.reshape(tuple(mat.shape[:-2]) + (n * n,)).index_select(-1, idx)


def vec_to_tril_matrix(vec, diag=0):
    """The inverse: the last dim's elements as the lower triangle (from
    diagonal `diag` down) of a square matrix, zeros elsewhere
    (differentiably: one index_select)."""
    m, n = vec.shape[-1], 1
    while len(_tril_positions(n, diag)) < m:
        n += 1
    if len(_tril_positions(n, diag)) != m:
        raise ValueError(f"[vec_to_tril_matrix] {m} elements fill no triangle at diagonal {diag}")
    where = [m] * (n * n)  # each matrix position's element; m: the appended zero
    for k, pos in enumerate(_tril_positions(n, diag)):
        where[pos] = k
    padded = _C.cat([vec, _C.zeros(*vec.shape[:-1], 1, dtype=vec.dtype)], -1)
    return padded.index_select(-1, _C.tensor(where, dtype=_C.int64)).reshape(tuple(vec.shape[:-1]) + (n, n))


# ---- constraints ----

class _Independent(Constraint):
    """base_constraint over reinterpreted_batch_ndims more event dims."""

    def __init__(self, base_constraint, reinterpreted_batch_ndims):
        self.base_constraint, self.reinterpreted_batch_ndims = base_constraint, reinterpreted_batch_ndims
        self.event_dim = base_constraint.event_dim + reinterpreted_batch_ndims
        self.is_discrete = base_constraint.is_discrete

    def check(self, value):
        ok = self.base_constraint.check(value)
        for _ in range(self.reinterpreted_batch_ndims):
            ok = ok.all(-1)
        return ok

    def __repr__(self):
        return f"IndependentConstraint({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


class _CorrCholesky(Constraint):
    """Lower Cholesky factors of correlation matrices: lower triangular,
    a positive diagonal, rows of unit norm."""
    event_dim = 2

    def check(self, value):
        tol = 10 * _eps(value.dtype) * value.shape[-1]
        unit = _C.le(((value * value).sum(-1) - 1).abs(), tol).all(-1)
        return _C.logical_and(constraints.lower_cholesky.check(value), unit)


type(constraints).independent = staticmethod(_Independent)
type(constraints).corr_cholesky = _CorrCholesky()


# ---- transforms ----

class LowerCholeskyTransform(Transform):
    """Square matrices to lower triangular ones with a positive diagonal:
    the strictly lower part kept, the diagonal exponentiated."""
    event_dim = 2
    domain = _Independent(constraints.real, 2)
    codomain = constraints.lower_cholesky

    def _call(self, x):
        return x.tril(-1) + _fn("diag_embed")(_C.exp(x.diagonal(dim1=-2, dim2=-1)))

    def _inverse(self, y):
        return y.tril(-1) + _fn("diag_embed")(_C.log(y.diagonal(dim1=-2, dim2=-1)))

    def log_abs_det_jacobian(self, x, y):
        return x.diagonal(dim1=-2, dim2=-1).sum(-1)  # only the diagonal moves: d exp(x) = exp(x) dx


class CorrCholeskyTransform(Transform):
    """Vectors of D (D - 1) / 2 reals to Cholesky factors of D x D
    correlation matrices: tanh maps each to (-1, 1), and row i's partial
    correlations are stick-broken into a row of unit norm."""
    event_dim = 1
    domain = constraints.real_vector
    codomain = constraints.corr_cholesky

    def _call(self, x):
        eps = _eps(x.dtype)
        r = vec_to_tril_matrix(_C.clamp(_C.tanh(x), min=-1 + eps, max=1 - eps), diag=-1)
        # row i: y_ij = r_ij sqrt(prod_(k < j) (1 - r_ik^2)), y_ii = the rest of the unit norm
        left = _C.cumprod(_C.sqrt(1 - r * r), -1)
        from .nn.functional import pad
        n = r.shape[-1]
        return (r + _C.eye(n, dtype=x.dtype)) * pad(left[..., :-1], (1, 0), value=1.0)

    def _inverse(self, y):
        from .nn.functional import pad
        rest = 1 - _C.cumsum(y * y, -1)
        before = pad(rest[..., :-1], (1, 0), value=1.0)  # the norm left before each element
        t = tril_matrix_to_vec(y, -1) / _C.sqrt(tril_matrix_to_vec(before, -1))
        return 0.5 * (_C.log1p(t) - _C.log1p(-t))  # atanh

    def log_abs_det_jacobian(self, x, y):
        from .nn.functional import softplus
        rest = tril_matrix_to_vec(1 - _C.cumsum(y * y, -1), diag=-2)
        stick = 0.5 * _C.log(rest).sum(-1)
        tanh = -2 * (x + softplus(-2 * x) - math.log(2.0)).sum(-1)  # log(1 - tanh(x)^2)
        return stick + tanh

    def forward_shape(self, shape):
        m = shape[-1]
        n = round((1 + math.sqrt(1 + 8 * m)) / 2)
        if n * (n - 1) // 2 != m:
            raise ValueError(f"[CorrCholeskyTransform] a vector of {m} elements is not D (D - 1) / 2")
        return tuple(shape[:-1]) + (n, n)

    def inverse_shape(self, shape):
        n = shape[-1]
        if shape[-2] != n:
            raise ValueError(f"[CorrCholeskyTransform] expected square matrices, got {tuple(shape[-2:])}")
        return tuple(shape[:-2]) + (n * (n - 1) // 2,)


class ReshapeTransform(Transform):
    """The rightmost dims reshaped from in_shape to out_shape (same numel)."""

    def __init__(self, in_shape, out_shape):
        self.in_shape, self.out_shape = tuple(in_shape), tuple(out_shape)
        if math.prod(self.in_shape) != math.prod(self.out_shape):
            raise ValueError(f"[ReshapeTransform] in_shape {self.in_shape} and out_shape {self.out_shape} "
                             "have different numbers of elements")
        self.event_dim = len(self.in_shape)
        self.domain = _Independent(constraints.real, len(self.in_shape))
        self.codomain = _Independent(constraints.real, len(self.out_shape))

    def _call(self, x):
        return x.reshape(tuple(x.shape[:x.ndim - len(self.in_shape)]) + self.out_shape)

    def _inverse(self, y):
        return y.reshape(tuple(y.shape[:y.ndim - len(self.out_shape)]) + self.in_shape)

    def log_abs_det_jacobian(self, x, y):
        return _C.zeros(*x.shape[:x.ndim - len(self.in_shape)], dtype=x.dtype)

    def forward_shape(self, shape):
        return self._shape(shape, self.in_shape, self.out_shape)

    def inverse_shape(self, shape):
        return self._shape(shape, self.out_shape, self.in_shape)

    @staticmethod
    def _shape(shape, src, dst):
        shape = tuple(shape)
        if len(shape) < len(src) or shape[len(shape) - len(src):] != src:
            raise ValueError(f"[ReshapeTransform] shape {shape} does not end in {src}")
        return shape[:len(shape) - len(src)] + dst


def _parts_check(who, tseq):
    tseq = list(tseq)
    if not tseq or not all(isinstance(t, Transform) for t in tseq):
        raise ValueError(f"[{who}] expected a non-empty sequence of transforms")
    return tseq


class CatTransform(Transform):
    """tseq[i] on the i-th piece (of lengths[i], default 1) along dim, the
    results concatenated."""

    def __init__(self, tseq, dim=0, lengths=None):
        self.transforms = _parts_check("CatTransform", tseq)
        self.lengths = [1] * len(self.transforms) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.transforms):
            raise ValueError(f"[CatTransform] {len(self.lengths)} lengths for {len(self.transforms)} "
                             "transforms")
        self.dim = dim
        self.event_dim = max(t.event_dim for t in self.transforms)
        self.bijective = all(t.bijective for t in self.transforms)

    def _pieces(self, x):
        if x.shape[self.dim] != sum(self.lengths):
            raise ValueError(f"[CatTransform] dim {self.dim} has {x.shape[self.dim]} elements, the "
                             f"lengths add to {sum(self.lengths)}")
        start = 0
        for t, n in zip(self.transforms, self.lengths):
            yield t, start, n
            start += n

    def _call(self, x):
        return _C.cat([t(x.narrow(self.dim, s, n)) for t, s, n in self._pieces(x)], self.dim)

    def _inverse(self, y):
        return _C.cat([t.inv(y.narrow(self.dim, s, n)) for t, s, n in self._pieces(y)], self.dim)

    def log_abs_det_jacobian(self, x, y):
        parts = []
        for t, s, n in self._pieces(x):
            j = t.log_abs_det_jacobian(x.narrow(self.dim, s, n), y.narrow(self.dim, s, n))
            parts.append(_sum_rightmost(j, self.event_dim - t.event_dim))
        dim = (self.dim - x.ndim if self.dim >= 0 else self.dim) + self.event_dim
        # dim inside the event: summed over; in the batch: concatenated there
        return _C.cat(parts, dim) if dim < 0 else sum(parts)


class StackTransform(Transform):
    """tseq[i] on x.select(dim, i), the results stacked along dim."""

    def __init__(self, tseq, dim=0):
        self.transforms = _parts_check("StackTransform", tseq)
        self.dim = dim
        self.bijective = all(t.bijective for t in self.transforms)

    def _slices(self, x):
        if x.shape[self.dim] != len(self.transforms):
            raise ValueError(f"[StackTransform] dim {self.dim} has {x.shape[self.dim]} elements for "
                             f"{len(self.transforms)} transforms")
        return [x.select(self.dim, i) for i in range(x.shape[self.dim])]

    def _call(self, x):
        return _C.stack([t(v) for t, v in zip(self.transforms, self._slices(x))], self.dim)

    def _inverse(self, y):
        return _C.stack([t.inv(v) for t, v in zip(self.transforms, self._slices(y))], self.dim)

    def log_abs_det_jacobian(self, x, y):
        return _C.stack([t.log_abs_det_jacobian(a, b) for t, a, b in
                         zip(self.transforms, self._slices(x), self._slices(y))], self.dim)


class CumulativeDistributionTransform(Transform):
    """x to distribution.cdf(x) in [0, 1] (its inverse: icdf); the
    Jacobian is the density."""
    codomain = constraints.unit_interval

    def __init__(self, distribution):
        self.distribution = distribution
        self.domain = distribution.support

    def _call(self, x):
        return self.distribution.cdf(x)

    def _inverse(self, y):
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x, y):
        return self.distribution.log_prob(x)


for _n in ("LowerCholeskyTransform", "CorrCholeskyTransform", "ReshapeTransform", "CatTransform",
           "StackTransform", "CumulativeDistributionTransform"):
    setattr(type(transforms), _n, globals()[_n])


# ---- biject_to and transform_to ----

class ConstraintRegistry:
    """Constraint types to factories of transforms onto them:
    registry(constraint) builds the transform for that constraint."""

    def __init__(self):
        self._registry = {}

    def register(self, constraint, factory=None):
        if factory is None:
            return lambda f: self.register(constraint, f)
        key = constraint if isinstance(constraint, type) else type(constraint)
        self._registry[key] = factory
        return factory

    def __call__(self, constraint):
        for key in type(constraint).__mro__:
            if key in self._registry:
                return self._registry[key](constraint)
        raise NotImplementedError(f"[{self.name}] cannot transform {type(constraint).__name__.lstrip('_')} "
                                  "constraints")


biject_to, transform_to = ConstraintRegistry(), ConstraintRegistry()
biject_to.name, transform_to.name = "biject_to", "transform_to"


def _above(c):  # (lower_bound, inf): exp, shifted
    return ComposeTransform([ExpTransform(), AffineTransform(c.lower_bound, 1)])


def _below(c):  # (-inf, upper_bound): exp, reflected
    return ComposeTransform([ExpTransform(), AffineTransform(c.upper_bound, -1)])


def _between(c):
    lo, hi = c.lower_bound, c.upper_bound
    if isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and lo == 0 and hi == 1:
        return SigmoidTransform()
    return ComposeTransform([SigmoidTransform(), AffineTransform(lo, hi - lo)])


def _independent(registry):
    return lambda c: IndependentTransform(registry(c.base_constraint), c.reinterpreted_batch_ndims)


for _reg in (biject_to, transform_to):
    _reg.register(type(constraints.real), lambda c: identity_transform)
    _reg.register(type(constraints.real_vector), lambda c: IndependentTransform(identity_transform, 1))
    _reg.register(_GreaterThan, _above)
    _reg.register(_LessThan, _below)
    _reg.register(_Interval, _between)
    _reg.register(_Independent, _independent(_reg))
    _reg.register(_CorrCholesky, lambda c: CorrCholeskyTransform())
# (not a bijection of all square matrices: it ignores the upper triangle)
transform_to.register(type(constraints.lower_cholesky), lambda c: LowerCholeskyTransform())
biject_to.register(type(constraints.simplex), lambda c: StickBreakingTransform())
transform_to.register(type(constraints.simplex), lambda c: SoftmaxTransform())


class _ConstraintRegistryModule:
    """The namespace musa.distributions.constraint_registry."""
    ConstraintRegistry = ConstraintRegistry
    biject_to = biject_to
    transform_to = transform_to


constraint_registry = _ConstraintRegistryModule()


# ---- distributions ----

class ExponentialFamily(Distribution):
    """p(x) = exp(<t(x), theta> - F(theta) + k(x)). A subclass gives its
    natural parameters theta (_natural_params), the log-normaliser F
    (_log_normalizer) and E[k(x)] (_mean_carrier_measure); entropy is then
    F(theta) - <theta, grad F(theta)> - E[k(x)], the gradient by autograd,
    and the KL divergence between two of one family the Bregman divergence
    of F."""

    @property
    def _natural_params(self):
        raise NotImplementedError(f"[{type(self).__name__}] has no _natural_params")

    def _log_normalizer(self, *natural_params):
        raise NotImplementedError(f"[{type(self).__name__}] has no _log_normalizer")

    @property
    def _mean_carrier_measure(self):
        raise NotImplementedError(f"[{type(self).__name__}] has no _mean_carrier_measure")

    def _normalizer_and_grads(self, create_graph):
        from . import autograd, enable_grad
        params = [p.detach().requires_grad_() for p in self._natural_params]
        with enable_grad():
            f = self._log_normalizer(*params)
            grads = autograd.grad(f.sum(), params, create_graph=create_graph)
        return params, f, grads

    def entropy(self):
        params, f, grads = self._normalizer_and_grads(True)
        result = f - self._mean_carrier_measure
        for p, g in zip(params, grads):
            result = result - (p * g).reshape(self._batch_shape + (-1,)).sum(-1)
        return result


@register_kl(ExponentialFamily, ExponentialFamily)
def _kl_expfamily_expfamily(p, q):
    if type(p) is not type(q):
        raise NotImplementedError(f"[kl_divergence] the Bregman form needs one family, got "
                                  f"{type(p).__name__} and {type(q).__name__}")
    p_params, p_f, p_grads = p._normalizer_and_grads(False)
    result = q._log_normalizer(*q._natural_params) - p_f.detach()
    for pp, qp, g in zip(p_params, q._natural_params, p_grads):
        result = result - ((qp - pp.detach()) * g).reshape(p._batch_shape + (-1,)).sum(-1)
    return result


def _eta_band(eta, width):
    """Where |eta| < width (a Taylor band), and eta with 1 there (so the
    closed forms, evaluated everywhere, stay finite)."""
    small = _C.lt(eta.abs(), width)
    return small, _C.where(small, _C.ones_like(eta), eta)


def _expm1_ratio(a, b):
    return _C.expm1(a) / _C.expm1(b)


class ContinuousBernoulli(ExponentialFamily):
    """Density C(lambda) lambda^x (1 - lambda)^(1 - x) on [0, 1], i.e.
    exp(eta x) / Z(eta) with eta = logit(lambda), Z = (e^eta - 1) / eta
    (Loaiza-Ganem and Cunningham, 2019). Everything is computed from eta:
    log Z, the mean dlogZ/deta and the variance by their Taylor series near
    eta = 0 (where the closed forms cancel), the cdf (e^(eta x) - 1) /
    (e^eta - 1) and its inverse with expm1 and log1p. lims is accepted for
    torch's signature; no band around 1/2 needs it here."""
    has_rsample = True
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    _mean_carrier_measure = 0
    _TAYLOR = 0.05

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args=None):
        if probs is not None and not isinstance(probs, _C.Tensor):
            probs = _as_tensor(probs)
        given = _probs_logits(self, probs, logits, "ContinuousBernoulli")
        if given is not None:
            self.probs = clamp_probs(given)
            self.logits = probs_to_logits(self.probs, is_binary=True)
        self._lims = lims
        super().__init__(tuple(self.logits.shape), (), validate_args)
        if given is not None:
            self._check(_C.logical_and(_C.ge(given, 0), _C.le(given, 1)),
                        "probs to satisfy the constraint Interval(lower_bound=0.0, upper_bound=1.0)")

    def _band(self, width):
        return _eta_band(self.logits, width)

    def _log_normalizer(self, eta):
        """log((e^eta - 1) / eta), as log1p(-e^(-|eta|)) + max(eta, 0) - log|eta|."""
        small, e = _eta_band(eta, self._TAYLOR)
        closed = _C.log(-_C.expm1(-e.abs())) + _C.clamp(e, min=0) - _C.log(e.abs())
        e2 = eta * eta
        taylor = eta / 2 + e2 / 24 - e2 * e2 / 2880 + e2 * e2 * e2 / 181440
        return _C.where(small, taylor, closed)

    @property
    def _natural_params(self):
        return (self.logits,)

    @property
    def mean(self):
        small, e = self._band(self._TAYLOR)
        closed = 1 / (-_C.expm1(-e)) - 1 / e  # e^eta / (e^eta - 1) - 1 / eta
        x = self.logits
        taylor = 0.5 + x / 12 - x ** 3 / 720 + x ** 5 / 30240
        return _C.where(small, taylor, closed)

    @property
    def variance(self):
        # 1 / eta^2 - e^eta / (e^eta - 1)^2: the terms cancel 1 / (12 eta^2)-fold, so the
        # series runs to |eta| = 0.5 (seven terms: the next is below 1e-16 there)
        small, e = self._band(0.5)
        closed = 1 / (e * e) - _C.exp(-e.abs()) / _C.expm1(-e.abs()) ** 2
        x2 = self.logits ** 2
        taylor = 1 / 12 + x2 * (-1 / 240 + x2 * (1 / 6048 + x2 * (-1 / 172800 + x2 * (
            1 / 5322240 + x2 * (-1 / 172039780.02894356 + x2 / 5748019200)))))
        return _C.where(small, taylor, closed)

    def log_prob(self, value):
        value = _as_tensor(value, self.logits)
        self._check_value(value, _C.logical_and(_C.ge(value, 0), _C.le(value, 1)),
                          "Interval(lower_bound=0.0, upper_bound=1.0)")
        return self.logits * value - self._log_normalizer(self.logits)

    # cdf and icdf in closed forms (no cancellation for any eta but 0); below
    # |eta| = 1e-8 their first-order terms, which keep the eta-gradient there
    def cdf(self, value):
        value = _as_tensor(value, self.logits)
        small, e = self._band(1e-8)
        # eta > 0: e^(eta (x - 1)) (1 - e^(-eta x)) / (1 - e^(-eta)), no overflow
        up = _C.exp(e * (value - 1)) * _expm1_ratio(-e * value, -e)
        closed = _C.where(_C.gt(e, 0), up, _expm1_ratio(e * value, e))
        c = _C.where(small, value + self.logits * value * (value - 1) / 2, closed)
        return _C.clamp(c, 0, 1)

    def icdf(self, value):
        value = _as_tensor(value, self.logits)
        small, e = self._band(1e-8)
        down = _C.log1p(value * _C.expm1(e)) / e
        up = 1 + _C.log(value + (1 - value) * _C.exp(-e)) / e
        closed = _C.where(_C.gt(e, 0), up, down)
        return _C.where(small, value + self.logits * value * (1 - value) / 2, closed)

    def rsample(self, sample_shape=()):
        return self.icdf(_uniform(self._extended_shape(sample_shape), self.logits.dtype))

    def entropy(self):
        return self._log_normalizer(self.logits) - self.logits * self.mean


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """OneHotCategorical whose rsample is the one-hot sample in value and
    the probabilities in gradient (the straight-through estimator)."""
    has_rsample = True

    def sample(self, sample_shape=()):
        from .autograd import no_grad
        with no_grad():
            return self._sample(tuple(sample_shape))

    def rsample(self, sample_shape=()):
        return self.sample(sample_shape) + (self.probs - self.probs.detach())


def _mvdigamma(a, p):
    return sum(_digamma(a - 0.5 * i) for i in range(p))


class Wishart(_ScaleTrilMatrices, ExponentialFamily):
    """Wishart(df, Sigma) over p x p positive definite matrices, given one
    of covariance_matrix (Sigma), precision_matrix or scale_tril (Sigma's
    lower Cholesky factor L); df > p - 1. Samples by Bartlett's
    decomposition, L A A^T L^T with A lower triangular, A_ii^2 ~ chi2(df -
    i) and N(0, 1) below (reparametrised through the chi2 draws)."""
    has_rsample = True
    support = constraints.positive_definite
    _mean_carrier_measure = 0

    def __init__(self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        from ._torch_ops import broadcast_shapes
        given = [m for m in (covariance_matrix, precision_matrix, scale_tril) if m is not None]
        if len(given) != 1:
            raise ValueError("[Wishart] Exactly one of covariance_matrix or precision_matrix or "
                             "scale_tril may be specified.")
        m = given[0]
        if not isinstance(m, _C.Tensor) or m.ndim < 2 or m.shape[-1] != m.shape[-2]:
            raise ValueError("[Wishart] the matrix must be square, with optional leading batch dimensions, "
                             f"got shape {tuple(m.shape) if isinstance(m, _C.Tensor) else type(m).__name__}")
        p = m.shape[-1]
        df = _as_tensor(df, m)
        batch = broadcast_shapes(tuple(m.shape[:-2]), tuple(df.shape))
        if bool(_C.le(df, p - 1).any()):
            raise ValueError(f"[Wishart] Value of df={df.tolist()} expected to be greater than ndim - 1 = {p - 1}.")
        self.df = df.expand(*batch) if batch else df
        tril = _tril_from(covariance_matrix, precision_matrix, scale_tril)
        self._unbroadcasted_scale_tril = tril
        self.scale_tril = tril.expand(*batch, p, p)
        self.arg_constraints = {"covariance_matrix": constraints.positive_definite,
                                "precision_matrix": constraints.positive_definite,
                                "scale_tril": constraints.lower_cholesky, "df": constraints.greater_than(p - 1)}
        super().__init__(batch, (p, p), validate_args)

    def _df(self):  # df against each matrix element
        return self.df.reshape(tuple(self.df.shape) + (1, 1))

    @property
    def mean(self):
        return self._df() * self.covariance_matrix

    @property
    def mode(self):
        f = self._df() - self._event_shape[-1] - 1
        f = _C.where(_C.gt(f, 0), f, _C.full_like(f, math.nan))
        return f * self.covariance_matrix

    @property
    def variance(self):
        s = self.covariance_matrix
        d = s.diagonal(dim1=-2, dim2=-1)
        return self._df() * (s * s + d.unsqueeze(-1) * d.unsqueeze(-2))

    def rsample(self, sample_shape=()):
        p = self._event_shape[-1]
        shape = tuple(sample_shape) + self._batch_shape
        dt = self._unbroadcasted_scale_tril.dtype
        dof = self.df.unsqueeze(-1) - _C.arange(p, dtype=dt)  # df - i for row i
        chi2 = 2 * _gamma_draw(0.5 * dof, shape + (p,))
        a = _normal(shape + (p, p), dt).tril(-1) + _fn("diag_embed")(_C.sqrt(chi2))
        la = self._unbroadcasted_scale_tril.matmul(a)
        return la.matmul(la.transpose(-1, -2))

    def _log_det_sigma(self):
        return 2 * _C.log(self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1)).sum(-1)

    def log_prob(self, value):
        from . import linalg, mvlgamma
        from ._torch_ops import broadcast_shapes
        value = _as_tensor(value, self.df)
        p = self._event_shape[-1]
        L = self._unbroadcasted_scale_tril
        batch = broadcast_shapes(tuple(value.shape[:-2]), tuple(L.shape[:-2]))
        chol, info = linalg.cholesky_ex(value)
        if self._validate_args and not bool(_C.eq(info, 0).all()):
            raise ValueError("[Wishart] Expected value argument to be within the support (PositiveDefinite()) "
                             "of the distribution, but found invalid values")
        log_det_x = 2 * _C.log(chol.diagonal(dim1=-2, dim2=-1)).sum(-1)
        m = linalg.solve_triangular(L.expand(*batch, p, p), chol.expand(*batch, p, p), upper=False)
        trace = (m * m).sum((-2, -1))  # tr(Sigma^-1 X) = |L^-1 chol(X)|^2
        df = self.df
        return (0.5 * (df - p - 1) * log_det_x - 0.5 * trace - 0.5 * df * p * math.log(2)
                - 0.5 * df * self._log_det_sigma() - mvlgamma(0.5 * df, p))

    def entropy(self):
        from . import mvlgamma
        p, df = self._event_shape[-1], self.df
        return (0.5 * (p + 1) * self._log_det_sigma() + 0.5 * p * (p + 1) * math.log(2)
                + mvlgamma(0.5 * df, p) - 0.5 * (df - p - 1) * _mvdigamma(0.5 * df, p) + 0.5 * df * p)

    @property
    def _natural_params(self):
        return (-0.5 * self.precision_matrix, 0.5 * (self.df - self._event_shape[-1] - 1))

    def _log_normalizer(self, x, y):
        from . import linalg, mvlgamma
        p = self._event_shape[-1]
        a = y + 0.5 * (p + 1)  # df / 2
        return a * (p * math.log(2) - linalg.slogdet(-2 * x)[1]) + mvlgamma(a, p)


class LKJCholesky(Distribution):
    """LKJ(concentration) over correlation matrices, as their lower Cholesky
    factors (dim x dim): density proportional to det(C)^(concentration - 1).
    Samples by the onion method: row i (from 1) holds sqrt(y) u with
    y ~ Beta(i / 2, concentration + (dim - 1 - i) / 2) and u uniform on the
    unit sphere in R^i, and sqrt(1 - y) on the diagonal, so every
    correlation's marginal is Beta(c + dim/2 - 1, c + dim/2 - 1) on (-1, 1).
    (torch 1.13 draws y ~ Beta(i - 1/2, ...): its later rows' correlations
    come out wider than that.)"""
    support = constraints.corr_cholesky
    arg_constraints = {"concentration": constraints.positive}

    def __init__(self, dim, concentration=1.0, validate_args=None):
        if int(dim) != dim or dim < 2:
            raise ValueError(f"[LKJCholesky] Expected dim to be an integer greater than or equal to 2. "
                             f"Found dim={dim}.")
        self.dim = int(dim)
        self.concentration = _as_tensor(concentration)
        super().__init__(tuple(self.concentration.shape), (self.dim, self.dim), validate_args)
        self._check(_C.gt(self.concentration, 0), "concentration to satisfy the constraint "
                    "GreaterThan(lower_bound=0.0), but found invalid values")

    def _sample(self, sample_shape):
        d, dt = self.dim, self.concentration.dtype
        shape = tuple(sample_shape) + self._batch_shape
        i = _C.arange(d, dtype=dt)
        conc1 = _C.where(_C.eq(i, 0), _C.full_like(i, 0.5), 0.5 * i)  # (row 0 draws nothing)
        conc0 = self.concentration.unsqueeze(-1) + 0.5 * (d - 1 - i)
        y = Beta(*_broadcast(conc1, conc0)).sample(sample_shape).unsqueeze(-1)
        y = y.expand(*shape, d, 1) if shape else y
        u = _normal(shape + (d, d), dt).tril(-1)
        norm = _C.sqrt((u * u).sum(-1, keepdim=True))
        u = u / _C.where(_C.eq(norm, 0), _C.ones_like(norm), norm)  # row 0 stays 0
        w = _C.sqrt(y) * u
        diag = _C.sqrt(_C.clamp(1 - (w * w).sum(-1), min=_tiny(dt)))
        return w + _fn("diag_embed")(diag)

    def log_prob(self, value):
        from . import mvlgamma
        value = _as_tensor(value, self.concentration)
        self._check_value(value, self.support.check(value), "CorrCholesky()")
        d, c = self.dim, self.concentration
        # |J| det(L L^T)^(c - 1) = prod over rows k = 2..d of L_kk^(2(c - 1) + d - k)
        order = 2 * (c.unsqueeze(-1) - 1) + d - _C.arange(2, d + 1, dtype=c.dtype)
        unnormalized = (order * _C.log(value.diagonal(dim1=-2, dim2=-1)[..., 1:])).sum(-1)
        alpha = c + 0.5 * (d - 1)
        from ._distributions_more import _lgamma
        normalizer = 0.5 * (d - 1) * math.log(math.pi) + mvlgamma(alpha - 0.5, d - 1) - (d - 1) * _lgamma(alpha)
        return unnormalized - normalizer


# ---- torch.distributions' submodules ----

_SUBMODULES = ("bernoulli", "beta", "binomial", "categorical", "cauchy", "chi2", "continuous_bernoulli",
               "dirichlet", "distribution", "exp_family", "exponential", "fishersnedecor", "gamma",
               "geometric", "gumbel", "half_cauchy", "half_normal", "independent", "kl", "kumaraswamy",
               "laplace", "lkj_cholesky", "log_normal", "logistic_normal", "lowrank_multivariate_normal",
               "mixture_same_family", "multinomial", "multivariate_normal", "negative_binomial", "normal",
               "one_hot_categorical", "pareto", "poisson", "relaxed_bernoulli", "relaxed_categorical",
               "studentT", "transformed_distribution", "uniform", "von_mises", "weibull", "wishart")
_UTILS = ("broadcast_all", "clamp_probs", "probs_to_logits", "logits_to_probs", "lazy_property",
          "tril_matrix_to_vec", "vec_to_tril_matrix")


def alias_submodules(package):
    """`from musa.distributions.normal import Normal` and the like, as
    with torch's submodules: each of those names is a module holding the
    package's public names; `utils` holds torch.distributions.utils'
    helpers and `constraint_registry` biject_to and transform_to."""
    import sys
    import types
    for name in _SUBMODULES + ("utils", "constraint_registry"):
        mod = types.ModuleType(f"{package.__name__}.{name}")
        if name == "utils":
            mod.__dict__.update({n: globals()[n] for n in _UTILS})
        elif name == "constraint_registry":
            mod.__dict__.update(ConstraintRegistry=ConstraintRegistry, biject_to=biject_to,
                                transform_to=transform_to)
        else:
            mod.__dict__.update({n: getattr(package, n) for n in package.__all__ if hasattr(package, n)})
            mod.__dict__.update(register_kl=package.register_kl, kl_divergence=package.kl_divergence)
        sys.modules[mod.__name__] = mod
        setattr(package, name, mod)
