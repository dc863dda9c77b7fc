"""More of torch.distributions (musa.distributions imports them):
Exponential, Laplace, Cauchy, Gumbel, HalfNormal, LogNormal, StudentT,
Gamma, Chi2, Beta, Dirichlet, Poisson, Binomial, Geometric and
MultivariateNormal, with KL divergences between like pairs.

Continuous ones are reparametrised (rsample): Gamma, Chi2, Beta, Dirichlet
and StudentT through standard_gamma's implicit gradient (dx/dalpha along
the sample's quantile), the rest through their location-scale or
inverse-CDF forms. Poisson, Binomial and Geometric sample without
gradients. log_prob, cdf, entropy, mean and variance are differentiable
ops, as PyTorch's are."""
import math

from . import _C
from .distributions import (Distribution, Normal, _as_tensor, _broadcast, _eps, _probs_logits,
                            _tiny, register_kl)

__all__ = ["Exponential", "Laplace", "Cauchy", "Gumbel", "HalfNormal", "LogNormal", "StudentT",
           "Gamma", "Chi2", "Beta", "Dirichlet", "Poisson", "Binomial", "Geometric",
           "MultivariateNormal"]

_EULER = 0.57721566490153286061


def _fn(name):
    import musa
    return getattr(musa, name)


def _lgamma(x):
    return _fn("lgamma")(x)


def _digamma(x):
    return _fn("digamma")(x)


def _xlogy(x, y):
    return _fn("xlogy")(x, y)


def _uniform(shape, dtype):
    """U[low, 1) of shape (a 0-d tensor for shape ())."""
    u = _C.rand(*shape, dtype=dtype) if shape else _C.rand(1, dtype=dtype).reshape(())
    return u


def _normal(shape, dtype):
    return _C.randn(*shape, dtype=dtype) if shape else _C.randn(1, dtype=dtype).reshape(())


def _positive(d, x, name):
    d._check(_C.gt(x, 0), f"{name} of shape {tuple(x.shape)} to satisfy the constraint "
             f"GreaterThan(lower_bound=0.0), but found invalid values")


class _LocScale(Distribution):
    """A location-scale family: loc + scale * (a standard draw)."""

    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = _broadcast(loc, scale)
        super().__init__(tuple(self.loc.shape), (), validate_args)
        _positive(self, self.scale, "scale")

    def rsample(self, sample_shape=()):
        eps = self._standard(self._extended_shape(sample_shape), self.loc.dtype)
        return self.loc + eps * self.scale

    def _z(self, value):
        return (_as_tensor(value, self.loc) - self.loc) / self.scale


class Exponential(Distribution):
    """rate * exp(-rate x) for x >= 0."""

    has_rsample = True

    def __init__(self, rate, validate_args=None):
        (self.rate,) = _broadcast(rate)
        super().__init__(tuple(self.rate.shape), (), validate_args)
        _positive(self, self.rate, "rate")

    mean = property(lambda self: 1 / self.rate)
    mode = property(lambda self: _C.zeros_like(self.rate))
    variance = property(lambda self: self.rate ** -2)

    def rsample(self, sample_shape=()):
        u = _uniform(self._extended_shape(sample_shape), self.rate.dtype)
        return -_C.log1p(-u) / self.rate

    def log_prob(self, value):
        value = _as_tensor(value, self.rate)
        self._check_value(value, _C.ge(value, 0), "GreaterThanEq(lower_bound=0.0)")
        return _C.log(self.rate) - self.rate * value

    def cdf(self, value):
        return 1 - _C.exp(-self.rate * _as_tensor(value, self.rate))

    def icdf(self, value):
        return -_C.log1p(-_as_tensor(value, self.rate)) / self.rate

    def entropy(self):
        return 1.0 - _C.log(self.rate)


class Laplace(_LocScale):
    """exp(-|x - loc| / scale) / (2 scale)."""

    mean = property(lambda self: self.loc)
    mode = property(lambda self: self.loc)
    variance = property(lambda self: 2 * self.scale ** 2)

    @staticmethod
    def _standard(shape, dtype):
        eps = 1e-6 if dtype in (_C.float32, _C.float16, _C.bfloat16) else 1e-15
        u = _uniform(shape, dtype) * (2 - eps) - (1 - eps)  # in (-1, 1)
        return -_C.sign(u) * _C.log1p(-u.abs())

    def log_prob(self, value):
        return -_C.log(2 * self.scale) - self._z(value).abs()

    def cdf(self, value):
        z = self._z(value)
        return 0.5 - 0.5 * _C.sign(z) * _C.expm1(-z.abs())

    def icdf(self, value):
        t = _as_tensor(value, self.loc) - 0.5
        return self.loc - self.scale * _C.sign(t) * _C.log1p(-2 * t.abs())

    def entropy(self):
        return 1 + _C.log(2 * self.scale)


class Cauchy(_LocScale):
    """scale / (pi (scale^2 + (x - loc)^2)): no mean (NaN), infinite variance."""

    mean = property(lambda self: _C.full(tuple(self.loc.shape), float("nan"), dtype=self.loc.dtype))
    mode = property(lambda self: self.loc)
    variance = property(lambda self: _C.full(tuple(self.loc.shape), float("inf"), dtype=self.loc.dtype))

    @staticmethod
    def _standard(shape, dtype):
        return _fn("tan")(math.pi * (_uniform(shape, dtype) - 0.5))

    def log_prob(self, value):
        return -math.log(math.pi) - _C.log(self.scale) - _C.log1p(self._z(value) ** 2)

    def cdf(self, value):
        return _C.atan(self._z(value)) / math.pi + 0.5

    def icdf(self, value):
        return self.loc + self.scale * _fn("tan")(math.pi * (_as_tensor(value, self.loc) - 0.5))

    def entropy(self):
        return math.log(4 * math.pi) + _C.log(self.scale)


class Gumbel(_LocScale):
    """exp(-(z + exp(-z))) / scale, z = (x - loc) / scale."""

    mean = property(lambda self: self.loc + self.scale * _EULER)
    mode = property(lambda self: self.loc)
    variance = property(lambda self: (math.pi ** 2 / 6) * self.scale ** 2)

    @staticmethod
    def _standard(shape, dtype):
        u = _C.clamp(_uniform(shape, dtype), min=_tiny(dtype))
        return -_C.log(-_C.log(u))

    def log_prob(self, value):
        z = self._z(value)
        return -(z + _C.exp(-z)) - _C.log(self.scale)

    def cdf(self, value):
        return _C.exp(-_C.exp(-self._z(value)))

    def entropy(self):
        return _C.log(self.scale) + 1 + _EULER


class HalfNormal(Distribution):
    """|N(0, scale^2)|."""

    has_rsample = True

    def __init__(self, scale, validate_args=None):
        (self.scale,) = _broadcast(scale)
        super().__init__(tuple(self.scale.shape), (), validate_args)
        _positive(self, self.scale, "scale")

    mean = property(lambda self: self.scale * math.sqrt(2 / math.pi))
    mode = property(lambda self: _C.zeros_like(self.scale))
    variance = property(lambda self: self.scale ** 2 * (1 - 2 / math.pi))

    def rsample(self, sample_shape=()):
        return (_normal(self._extended_shape(sample_shape), self.scale.dtype) * self.scale).abs()

    def log_prob(self, value):
        value = _as_tensor(value, self.scale)
        self._check_value(value, _C.ge(value, 0), "GreaterThanEq(lower_bound=0.0)")
        lp = Normal(0.0, self.scale, validate_args=False).log_prob(value) + math.log(2)
        return _C.where(_C.ge(value, 0), lp, float("-inf"))

    def cdf(self, value):
        return _C.erf(_as_tensor(value, self.scale) / (self.scale * math.sqrt(2)))

    def entropy(self):
        return 0.5 * _C.log(math.pi * self.scale ** 2 / 2) + 0.5


class LogNormal(Distribution):
    """exp(N(loc, scale^2))."""

    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.base_dist = Normal(loc, scale, validate_args)
        self.loc, self.scale = self.base_dist.loc, self.base_dist.scale
        super().__init__(tuple(self.loc.shape), (), validate_args)

    mean = property(lambda self: _C.exp(self.loc + self.scale ** 2 / 2))
    mode = property(lambda self: _C.exp(self.loc - self.scale ** 2))
    variance = property(lambda self: _C.expm1(self.scale ** 2) * _C.exp(2 * self.loc + self.scale ** 2))

    def rsample(self, sample_shape=()):
        return _C.exp(self.base_dist.rsample(sample_shape))

    def log_prob(self, value):
        value = _as_tensor(value, self.loc)
        self._check_value(value, _C.gt(value, 0), "GreaterThan(lower_bound=0.0)")
        return self.base_dist.log_prob(_C.log(value)) - _C.log(value)

    def cdf(self, value):
        return self.base_dist.cdf(_C.log(_as_tensor(value, self.loc)))

    def entropy(self):
        return self.base_dist.entropy() + self.loc


# ---- the Gamma family ----

def _gamma_draw(concentration, shape):
    """standard_gamma of concentration broadcast to shape, at least the
    dtype's smallest normal number (PyTorch's clamp)."""
    c = concentration.expand(*shape) if shape else concentration
    return _C.standard_gamma(c.contiguous())


class Gamma(Distribution):
    """rate^c x^(c-1) exp(-rate x) / Gamma(c), c the concentration."""

    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = _broadcast(concentration, rate)
        super().__init__(tuple(self.rate.shape), (), validate_args)
        _positive(self, self.concentration, "concentration")
        _positive(self, self.rate, "rate")

    mean = property(lambda self: self.concentration / self.rate)
    mode = property(lambda self: _C.clamp((self.concentration - 1) / self.rate, min=0))
    variance = property(lambda self: self.concentration / self.rate ** 2)

    def rsample(self, sample_shape=()):
        x = _gamma_draw(self.concentration, self._extended_shape(sample_shape)) / self.rate
        return _C.clamp(x, min=_tiny(x.dtype))

    def log_prob(self, value):
        value = _as_tensor(value, self.rate)
        self._check_value(value, _C.gt(value, 0), "GreaterThan(lower_bound=0.0)")
        c, r = self.concentration, self.rate
        return _xlogy(c, r) + _xlogy(c - 1, value) - r * value - _lgamma(c)

    def cdf(self, value):
        return _C.igamma(self.concentration, self.rate * _as_tensor(value, self.rate))

    def entropy(self):
        c = self.concentration
        return c - _C.log(self.rate) + _lgamma(c) + (1.0 - c) * _digamma(c)


class Chi2(Gamma):
    """Gamma(df / 2, 1 / 2)."""

    def __init__(self, df, validate_args=None):
        (df,) = _broadcast(df)
        super().__init__(0.5 * df, _C.full_like(df, 0.5), validate_args)

    df = property(lambda self: self.concentration * 2)


class Dirichlet(Distribution):
    """Over the simplex of the last dim: prod x_i^(c_i - 1) / B(c)."""

    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        concentration = _as_tensor(concentration)
        if concentration.ndim < 1:
            raise ValueError("[Dirichlet] `concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        super().__init__(tuple(concentration.shape[:-1]), tuple(concentration.shape[-1:]), validate_args)
        _positive(self, concentration, "concentration")

    mean = property(lambda self: self.concentration / self.concentration.sum(-1, keepdim=True))

    @property
    def mode(self):
        """max(c - 1, 0) normalised; where every c is at most 1, the vertex
        of the largest (as torch)."""
        c = self.concentration
        inner = _C.clamp(c - 1, min=0.0)
        inner = inner / inner.sum(-1, keepdim=True)
        from .nn.functional import one_hot
        vertex = one_hot(c.argmax(-1), c.shape[-1]).to(c.dtype)
        return _C.where(_C.le(c, 1).all(-1, keepdim=True), vertex, inner)

    @property
    def variance(self):
        c0 = self.concentration.sum(-1, keepdim=True)
        return self.concentration * (c0 - self.concentration) / (c0 ** 2 * (c0 + 1))

    def rsample(self, sample_shape=()):
        g = _gamma_draw(self.concentration, self._extended_shape(sample_shape))
        x = g / g.sum(-1, keepdim=True)
        return _C.clamp(x, min=_tiny(x.dtype), max=1 - _eps(x.dtype))

    def log_prob(self, value):
        value = _as_tensor(value, self.concentration)
        ok = _C.logical_and(_C.ge(value, 0).all(-1), _C.lt((value.sum(-1) - 1).abs(), 1e-6))
        self._check_value(value, ok, "Simplex()")
        c = self.concentration
        return (_xlogy(c - 1.0, value).sum(-1) + _lgamma(c.sum(-1)) - _lgamma(c).sum(-1))

    def entropy(self):
        c = self.concentration
        k = c.shape[-1]
        c0 = c.sum(-1)
        return (_lgamma(c).sum(-1) - _lgamma(c0) - (k - c0) * _digamma(c0) -
                ((c - 1.0) * _digamma(c)).sum(-1))


class Beta(Distribution):
    """x^(c1 - 1) (1 - x)^(c0 - 1) / B(c1, c0) on [0, 1]."""

    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        c1, c0 = _broadcast(concentration1, concentration0)
        self._dirichlet = Dirichlet(_C.stack([c1, c0], -1), validate_args)
        super().__init__(tuple(c1.shape), (), validate_args)

    concentration1 = property(lambda self: self._dirichlet.concentration[..., 0])
    concentration0 = property(lambda self: self._dirichlet.concentration[..., 1])

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        return self._dirichlet.mode[..., 0]

    @property
    def variance(self):
        t = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (t ** 2 * (t + 1))

    def rsample(self, sample_shape=()):
        return self._dirichlet.rsample(sample_shape)[..., 0]

    def log_prob(self, value):
        value = _as_tensor(value, self.concentration1)
        self._check_value(value, _C.logical_and(_C.ge(value, 0), _C.le(value, 1)),
                          "Interval(lower_bound=0.0, upper_bound=1.0)")
        return self._dirichlet.log_prob(_C.stack([value, 1.0 - value], -1))

    def entropy(self):
        return self._dirichlet.entropy()


class StudentT(Distribution):
    """Student's t with df degrees of freedom, shifted by loc, scaled by scale."""

    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = _broadcast(df, loc, scale)
        super().__init__(tuple(self.df.shape), (), validate_args)
        _positive(self, self.df, "df")
        _positive(self, self.scale, "scale")

    @property
    def mean(self):
        return _C.where(_C.gt(self.df, 1), self.loc, float("nan"))

    mode = property(lambda self: self.loc)

    @property
    def variance(self):
        v = self.scale ** 2 * self.df / (self.df - 2)
        v = _C.where(_C.gt(self.df, 2), v, float("inf"))
        return _C.where(_C.gt(self.df, 1), v, float("nan"))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        x = _normal(shape, self.df.dtype)
        z = _gamma_draw(0.5 * self.df, shape) * 2  # Chi2(df)
        return self.loc + self.scale * x * _C.rsqrt(z / self.df)

    def log_prob(self, value):
        y = (_as_tensor(value, self.loc) - self.loc) / self.scale
        df = self.df
        z = (_C.log(self.scale) + 0.5 * _C.log(df) + 0.5 * math.log(math.pi) + _lgamma(0.5 * df) -
             _lgamma(0.5 * (df + 1.0)))
        return -0.5 * (df + 1.0) * _C.log1p(y ** 2 / df) - z

    def entropy(self):
        df = self.df
        lbeta = _lgamma(0.5 * df) + math.lgamma(0.5) - _lgamma(0.5 * (df + 1))
        return (_C.log(self.scale) + 0.5 * (df + 1) * (_digamma(0.5 * (df + 1)) - _digamma(0.5 * df)) +
                0.5 * _C.log(df) + lbeta)


# ---- counts ----

def _nonnegative_integers(d, value):
    ok = _C.logical_and(_C.ge(value, 0), _C.eq(value, _C.floor(value)))
    d._check_value(value, ok, "IntegerGreaterThan(lower_bound=0)")


class Poisson(Distribution):
    """rate^k exp(-rate) / k! for k = 0, 1, ..."""

    def __init__(self, rate, validate_args=None):
        (self.rate,) = _broadcast(rate)
        super().__init__(tuple(self.rate.shape), (), validate_args)
        self._check(_C.ge(self.rate, 0), f"rate of shape {tuple(self.rate.shape)} to satisfy the "
                    f"constraint GreaterThanEq(lower_bound=0.0), but found invalid values")

    mean = property(lambda self: self.rate)
    mode = property(lambda self: _C.floor(self.rate))
    variance = property(lambda self: self.rate)

    def _sample(self, sample_shape):
        shape = self._extended_shape(sample_shape)
        r = self.rate.expand(*shape) if shape else self.rate
        return _C.poisson(r.contiguous())

    def log_prob(self, value):
        value = _as_tensor(value, self.rate)
        _nonnegative_integers(self, value)
        return _xlogy(value, self.rate) - self.rate - _lgamma(value + 1)


class Binomial(Distribution):
    """The successes in total_count trials of probability probs (or
    sigmoid(logits))."""

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        given = _probs_logits(self, probs, logits, "Binomial")
        self.total_count, self.probs, self.logits = _broadcast(total_count, self.probs, self.logits)
        self.total_count = self.total_count.to(self.probs.dtype)
        super().__init__(tuple(self.probs.shape), (), validate_args)
        n = self.total_count
        self._check(_C.logical_and(_C.ge(n, 0), _C.eq(n, _C.floor(n))),
                    "total_count to satisfy the constraint IntegerGreaterThan(lower_bound=0)")
        if given is not None:
            self._check(_C.logical_and(_C.ge(self.probs, 0), _C.le(self.probs, 1)),
                        "probs to satisfy the constraint Interval(lower_bound=0.0, upper_bound=1.0)")

    mean = property(lambda self: self.total_count * self.probs)
    mode = property(lambda self: _C.minimum(_C.floor((self.total_count + 1) * self.probs),
                                            self.total_count))
    variance = property(lambda self: self.total_count * self.probs * (1 - self.probs))

    has_enumerate_support = True

    def _sample(self, sample_shape):
        shape = self._extended_shape(sample_shape)
        n, p = (self.total_count.expand(*shape), self.probs.expand(*shape)) if shape else \
            (self.total_count, self.probs)
        return _C.binomial(n.contiguous(), p.contiguous())

    def log_prob(self, value):
        value = _as_tensor(value, self.probs)
        _nonnegative_integers(self, value)
        self._check_value(value, _C.le(value, self.total_count), "IntegerInterval(0, total_count)")
        n = self.total_count
        comb = _lgamma(n + 1) - _lgamma(value + 1) - _lgamma(n - value + 1)
        return comb + _xlogy(value, self.probs) + _xlogy(n - value, 1 - self.probs)

    def entropy(self):
        """Summed over the support 0..total_count (one total_count for the batch, as PyTorch)."""
        n = self.total_count
        top = float(n.max()) if n.numel() else 0.0
        if n.numel() and float(n.min()) != top:
            raise NotImplementedError("[Binomial] entropy needs one total_count for the whole batch")
        k = _C.arange(int(top) + 1, dtype=self.probs.dtype).reshape((-1,) + (1,) * self.probs.ndim)
        lp = self.log_prob(k.expand(int(top) + 1, *self.probs.shape))
        return -(_C.exp(lp) * lp).sum(0)

    def enumerate_support(self, expand=True):
        top = int(float(self.total_count.max())) if self.total_count.numel() else 0
        values = _C.arange(top + 1, dtype=self.probs.dtype).reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand(top + 1, *self._batch_shape) if expand else values


class Geometric(Distribution):
    """The failures before the first success, each trial succeeding with
    probability probs (or sigmoid(logits)): (1 - p)^k p."""

    def __init__(self, probs=None, logits=None, validate_args=None):
        given = _probs_logits(self, probs, logits, "Geometric")
        self.probs, self.logits = _broadcast(self.probs, self.logits)
        super().__init__(tuple(self.probs.shape), (), validate_args)
        if given is not None:
            self._check(_C.logical_and(_C.gt(self.probs, 0), _C.le(self.probs, 1)),
                        "probs to satisfy the constraint HalfOpenInterval(lower_bound=0.0, upper_bound=1.0)")

    mean = property(lambda self: 1.0 / self.probs - 1.0)
    mode = property(lambda self: _C.zeros_like(self.probs))
    variance = property(lambda self: (1.0 / self.probs - 1.0) / self.probs)

    def _sample(self, sample_shape):
        u = _C.clamp(_uniform(self._extended_shape(sample_shape), self.probs.dtype),
                     min=_tiny(self.probs.dtype))
        return _C.floor(_C.log(u) / _C.log1p(-self.probs))

    def log_prob(self, value):
        value = _as_tensor(value, self.probs)
        _nonnegative_integers(self, value)
        p = self.probs
        lp = value * _C.log1p(-p) + _C.log(p)
        return _C.where(_C.logical_and(_C.eq(p, 1), _C.eq(value, 0)), 0.0, lp)

    def entropy(self):
        from .nn.functional import binary_cross_entropy_with_logits
        return binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none") / self.probs


# ---- the multivariate normal ----

def _tril_from(covariance_matrix, precision_matrix, scale_tril):
    """The lower Cholesky factor of the covariance, from whichever is given."""
    from . import linalg
    if scale_tril is not None:
        return scale_tril
    if covariance_matrix is not None:
        return linalg.cholesky(covariance_matrix)
    return linalg.cholesky(linalg.inv(precision_matrix))


class _ScaleTrilMatrices:
    """covariance_matrix and precision_matrix from self.scale_tril
    (MultivariateNormal's, Wishart's)."""

    @property
    def covariance_matrix(self):
        L = self.scale_tril
        return L.matmul(L.transpose(-1, -2))

    @property
    def precision_matrix(self):
        from . import linalg
        return linalg.inv(self.covariance_matrix)


class MultivariateNormal(_ScaleTrilMatrices, Distribution):
    """N(loc, covariance) over the last dim, given one of covariance_matrix,
    precision_matrix or scale_tril (its lower Cholesky factor)."""

    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        from ._torch_ops import broadcast_shapes
        loc = _as_tensor(loc)
        if loc.ndim < 1:
            raise ValueError("[MultivariateNormal] loc must be at least one-dimensional.")
        given = [m is not None for m in (covariance_matrix, precision_matrix, scale_tril)]
        if sum(given) != 1:
            raise ValueError("[MultivariateNormal] Exactly one of covariance_matrix or "
                             "precision_matrix or scale_tril may be specified.")
        m = next(x for x in (covariance_matrix, precision_matrix, scale_tril) if x is not None)
        if not isinstance(m, _C.Tensor) or m.ndim < 2:
            raise ValueError("[MultivariateNormal] the matrix must be at least two-dimensional, "
                             "with optional leading batch dimensions")
        k = loc.shape[-1]
        if tuple(m.shape[-2:]) != (k, k):
            raise ValueError(f"[MultivariateNormal] the matrix must be {k} x {k} (loc's event size), "
                             f"got {tuple(m.shape[-2:])}")
        batch = broadcast_shapes(tuple(loc.shape[:-1]), tuple(m.shape[:-2]))
        self.loc = loc.expand(*batch, k)
        tril = _tril_from(covariance_matrix, precision_matrix, scale_tril)
        self._unbroadcasted_scale_tril = tril
        self.scale_tril = tril.expand(*batch, k, k)
        super().__init__(batch, (k,), validate_args)

    mean = property(lambda self: self.loc)
    mode = property(lambda self: self.loc)

    @property
    def variance(self):
        return (self.scale_tril ** 2).sum(-1)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = _normal(shape, self.loc.dtype)
        return self.loc + self._unbroadcasted_scale_tril.matmul(eps.unsqueeze(-1)).squeeze(-1)

    def _half_log_det(self):
        return _C.log(self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1)).sum(-1)

    def log_prob(self, value):
        from . import linalg
        from ._torch_ops import broadcast_shapes
        diff = _as_tensor(value, self.loc) - self.loc
        L = self._unbroadcasted_scale_tril
        batch = broadcast_shapes(tuple(diff.shape[:-1]), tuple(L.shape[:-2]))
        k = self._event_shape[0]
        sol = linalg.solve_triangular(L.expand(*batch, k, k), diff.expand(*batch, k).unsqueeze(-1),
                                      upper=False)
        m = (sol.squeeze(-1) ** 2).sum(-1)
        return -0.5 * (k * math.log(2 * math.pi) + m) - self._half_log_det()

    def entropy(self):
        k = self._event_shape[0]
        h = 0.5 * k * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        return h.expand(*self._batch_shape) if self._batch_shape else h


# ---- KL divergences ----

@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    ratio = q.rate / p.rate
    return ratio - 1 - _C.log(ratio)


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    t1 = q.concentration * _C.log(p.rate / q.rate)
    t2 = _lgamma(q.concentration) - _lgamma(p.concentration)
    t3 = (p.concentration - q.concentration) * _digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (_C.log(p.rate) - _C.log(q.rate)) - (p.rate - q.rate)


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    ratio = p.scale / q.scale
    d = (p.loc - q.loc).abs()
    return -_C.log(ratio) + d / q.scale + ratio * _C.exp(-d / p.scale) - 1


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    a, b = p.concentration, q.concentration
    a0 = a.sum(-1)
    t1 = _lgamma(a0) - _lgamma(b.sum(-1))
    t2 = (_lgamma(b) - _lgamma(a)).sum(-1)
    t3 = ((a - b) * (_digamma(a) - _digamma(a0).unsqueeze(-1))).sum(-1)
    return t1 + t2 + t3


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    return _kl_dirichlet_dirichlet(p._dirichlet, q._dirichlet)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p, q):
    from . import linalg
    from ._torch_ops import broadcast_shapes
    if p._event_shape != q._event_shape:
        raise ValueError("[kl_divergence] MultivariateNormals of different event shapes "
                         f"{p._event_shape} and {q._event_shape}")
    k = p._event_shape[0]
    batch = broadcast_shapes(p._batch_shape, q._batch_shape)
    Lq = q._unbroadcasted_scale_tril.expand(*batch, k, k)
    Lp = p._unbroadcasted_scale_tril.expand(*batch, k, k)
    diff = (q.loc - p.loc).expand(*batch, k).unsqueeze(-1)
    m = (linalg.solve_triangular(Lq, diff, upper=False) ** 2).sum((-2, -1))
    tr = (linalg.solve_triangular(Lq, Lp, upper=False) ** 2).sum((-2, -1))
    return q._half_log_det() - p._half_log_det() + 0.5 * (tr + m - k)
