"""Still more of torch.distributions (musa.distributions imports them):
Weibull, Pareto, HalfCauchy, Kumaraswamy and LogisticNormal (as torch,
transformed distributions: their samples and log-probabilities go through
musa.distributions.transforms), FisherSnedecor, NegativeBinomial,
Multinomial, VonMises and LowRankMultivariateNormal."""
import math

from . import _C
from ._dist_transforms import (AbsTransform, AffineTransform, ExpTransform, PowerTransform,
                               TransformedDistribution, constraints)
from ._distributions_more import (Cauchy, Exponential, Gamma, _digamma, _lgamma, _nonnegative_integers,
                                  _positive, _uniform)
from .distributions import (Categorical, Distribution, Uniform, _as_tensor, _broadcast, _probs_logits,
                            _tiny)

__all__ = ["Weibull", "Pareto", "HalfCauchy", "Kumaraswamy", "FisherSnedecor", "NegativeBinomial",
           "Multinomial", "VonMises", "LowRankMultivariateNormal", "LogisticNormal"]

_EULER = 0.57721566490153286061


def _where(cond, a, b):
    return _C.where(cond, a, b)


class Weibull(TransformedDistribution):
    """scale * E^(1 / concentration), E ~ Exponential(1)."""
    arg_constraints = {"scale": constraints.positive, "concentration": constraints.positive}
    support = constraints.positive

    def __init__(self, scale, concentration, validate_args=None):
        self.scale, self.concentration = _broadcast(scale, concentration)
        self.concentration_reciprocal = 1.0 / self.concentration
        base = Exponential(_C.ones_like(self.scale), validate_args=validate_args)
        super().__init__(base, [PowerTransform(self.concentration_reciprocal),
                                AffineTransform(0, self.scale)], validate_args)
        _positive(self, self.scale, "scale")
        _positive(self, self.concentration, "concentration")

    mean = property(lambda self: self.scale * _C.exp(_lgamma(1 + self.concentration_reciprocal)))

    @property
    def mode(self):
        k = self.concentration
        return self.scale * ((k - 1) / k) ** self.concentration_reciprocal

    @property
    def variance(self):
        g1 = _C.exp(_lgamma(1 + self.concentration_reciprocal))
        return self.scale ** 2 * (_C.exp(_lgamma(1 + 2 * self.concentration_reciprocal)) - g1 ** 2)

    def cdf(self, value):
        return 1 - _C.exp(-(_as_tensor(value, self.scale) / self.scale) ** self.concentration)

    def entropy(self):
        return (_EULER * (1 - self.concentration_reciprocal) +
                _C.log(self.scale * self.concentration_reciprocal) + 1)


class Pareto(TransformedDistribution):
    """scale * exp(E), E ~ Exponential(alpha): density alpha scale^alpha / x^(alpha + 1), x >= scale."""
    arg_constraints = {"alpha": constraints.positive, "scale": constraints.positive}

    def __init__(self, scale, alpha, validate_args=None):
        self.scale, self.alpha = _broadcast(scale, alpha)
        base = Exponential(self.alpha, validate_args=validate_args)
        super().__init__(base, [ExpTransform(), AffineTransform(0, self.scale)], validate_args)
        _positive(self, self.scale, "scale")

    support = property(lambda self: constraints.greater_than_eq(self.scale))

    @property
    def mean(self):
        a = _C.clamp(self.alpha, min=1)
        return _where(_C.gt(self.alpha, 1), a * self.scale / (a - 1), float("inf"))

    mode = property(lambda self: self.scale)

    @property
    def variance(self):
        a = _C.clamp(self.alpha, min=2)
        v = self.scale ** 2 * a / ((a - 1) ** 2 * (a - 2))
        return _where(_C.gt(self.alpha, 2), v, float("inf"))

    def cdf(self, value):
        return 1 - (self.scale / _as_tensor(value, self.scale)) ** self.alpha

    def entropy(self):
        return _C.log(self.scale / self.alpha) + 1 / self.alpha + 1


class HalfCauchy(TransformedDistribution):
    """|Cauchy(0, scale)|."""
    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative

    def __init__(self, scale, validate_args=None):
        base = Cauchy(0, scale, validate_args=validate_args)
        super().__init__(base, AbsTransform(), validate_args)

    scale = property(lambda self: self.base_dist.scale)
    mean = property(lambda self: _C.full(tuple(self._batch_shape), float("inf"), dtype=self.scale.dtype))
    mode = property(lambda self: _C.zeros_like(self.scale))
    variance = property(lambda self: self.base_dist.variance)

    def log_prob(self, value):
        value = _as_tensor(value, self.scale)
        self._check_value(value, _C.ge(value, 0), "GreaterThanEq(lower_bound=0.0)")
        lp = self.base_dist.log_prob(value) + math.log(2)
        return _where(_C.ge(value, 0), lp, float("-inf"))

    def cdf(self, value):
        return 2 * self.base_dist.cdf(_as_tensor(value, self.scale)) - 1

    def icdf(self, prob):
        return self.base_dist.icdf((_as_tensor(prob, self.scale) + 1) / 2)

    def entropy(self):
        return self.base_dist.entropy() - math.log(2)


class Kumaraswamy(TransformedDistribution):
    """(1 - U^(1/b))^(1/a), U uniform: density a b x^(a-1) (1 - x^a)^(b-1) on [0, 1]
    (a = concentration1, b = concentration0)."""
    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = _broadcast(concentration1, concentration0)
        base = Uniform(_C.zeros_like(self.concentration0), _C.ones_like(self.concentration0),
                       validate_args=validate_args)
        super().__init__(base, [PowerTransform(1.0 / self.concentration0), AffineTransform(1.0, -1.0),
                                PowerTransform(1.0 / self.concentration1)], validate_args)
        _positive(self, self.concentration1, "concentration1")
        _positive(self, self.concentration0, "concentration0")

    def _moment(self, n):
        a, b = self.concentration1, self.concentration0
        t = 1 + n / a
        return b * _C.exp(_lgamma(t) + _lgamma(b) - _lgamma(t + b))

    mean = property(lambda self: self._moment(1))
    variance = property(lambda self: self._moment(2) - self._moment(1) ** 2)

    def entropy(self):
        a, b = self.concentration1, self.concentration0
        h = _digamma(b + 1) + _EULER  # the harmonic number H_b
        return (1 - 1 / b) + (1 - 1 / a) * h - _C.log(a) - _C.log(b)


class FisherSnedecor(Distribution):
    """(Chi2(df1) / df1) / (Chi2(df2) / df2)."""
    has_rsample = True
    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive

    def __init__(self, df1, df2, validate_args=None):
        self.df1, self.df2 = _broadcast(df1, df2)
        super().__init__(tuple(self.df1.shape), (), validate_args)
        _positive(self, self.df1, "df1")
        _positive(self, self.df2, "df2")
        self._gamma1 = Gamma(self.df1 * 0.5, self.df1, validate_args=False)
        self._gamma2 = Gamma(self.df2 * 0.5, self.df2, validate_args=False)

    @property
    def mean(self):
        d = _C.clamp(self.df2, min=2.5)
        return _where(_C.gt(self.df2, 2), d / (d - 2), float("nan"))

    @property
    def mode(self):
        m = (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)
        return _where(_C.gt(self.df1, 2), m, float("nan"))

    @property
    def variance(self):
        d1, d2 = self.df1, _C.clamp(self.df2, min=4.5)
        v = 2 * d2 ** 2 * (d1 + d2 - 2) / (d1 * (d2 - 2) ** 2 * (d2 - 4))
        return _where(_C.gt(self.df2, 4), v, float("nan"))

    def rsample(self, sample_shape=()):
        x1 = self._gamma1.rsample(sample_shape)
        x2 = _C.clamp(self._gamma2.rsample(sample_shape), min=_tiny(self.df1.dtype))
        return _C.clamp(x1 / x2, min=_tiny(self.df1.dtype))

    def log_prob(self, value):
        value = _as_tensor(value, self.df1)
        self._check_value(value, _C.gt(value, 0), "GreaterThan(lower_bound=0.0)")
        c1, c2 = self.df1 * 0.5, self.df2 * 0.5
        c3 = self.df1 / self.df2
        t1 = _lgamma(c1 + c2) - _lgamma(c1) - _lgamma(c2)
        t2 = c1 * _C.log(c3) + (c1 - 1) * _C.log(value)
        t3 = (c1 + c2) * _C.log1p(c3 * value)
        return t1 + t2 - t3


class NegativeBinomial(Distribution):
    """The successes (each of probability probs) before total_count failures."""
    arg_constraints = {"total_count": constraints.nonnegative,
                       "probs": constraints.half_open_interval(0.0, 1.0), "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
        given = _probs_logits(self, probs, logits, "NegativeBinomial")
        self.total_count, self.probs, self.logits = _broadcast(total_count, self.probs, self.logits)
        self.total_count = self.total_count.to(self.probs.dtype)
        super().__init__(tuple(self.probs.shape), (), validate_args)
        self._check(_C.ge(self.total_count, 0),
                    "total_count to satisfy the constraint GreaterThanEq(lower_bound=0.0)")
        if given is not None:
            self._check(_C.logical_and(_C.ge(self.probs, 0), _C.lt(self.probs, 1)),
                        "probs to satisfy the constraint HalfOpenInterval(lower_bound=0.0, upper_bound=1.0)")

    mean = property(lambda self: self.total_count * _C.exp(self.logits))
    variance = property(lambda self: self.mean / _C.sigmoid(-self.logits))

    @property
    def mode(self):
        return _C.clamp(_C.floor((self.total_count - 1) * _C.exp(self.logits)), min=0.0)

    def _sample(self, sample_shape):
        shape = self._extended_shape(sample_shape)
        r = self.total_count.expand(*shape) if shape else self.total_count
        live = _C.gt(r, 0)
        g = _C.standard_gamma(_where(live, r, 1.0).contiguous())
        rate = _where(live, g * _C.exp(self.logits), 0.0)
        return _C.poisson(rate.contiguous())

    def log_prob(self, value):
        from .nn.functional import logsigmoid
        value = _as_tensor(value, self.probs)
        _nonnegative_integers(self, value)
        r = self.total_count
        unnormalised = r * logsigmoid(-self.logits) + value * logsigmoid(self.logits)
        norm = -_lgamma(r + value) + _lgamma(1.0 + value) + _lgamma(r)
        norm = _where(_C.eq(r + value, 0), 0.0, norm)
        return unnormalised - norm


class Multinomial(Distribution):
    """The counts of total_count draws from a Categorical (event shape (K,))."""
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = property(lambda self: constraints.integer_interval(0, self.total_count))

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        import operator
        try:
            self.total_count = operator.index(total_count)
        except TypeError:
            raise TypeError(f"[Multinomial] inhomogeneous total_count is not supported: expected an "
                            f"int, got {type(total_count).__name__}") from None
        if self.total_count < 0:
            raise ValueError(f"[Multinomial] total_count must be non-negative, got {self.total_count}")
        self._categorical = Categorical(probs, logits, validate_args)
        self.probs, self.logits = self._categorical.probs, self._categorical.logits
        super().__init__(self._categorical._batch_shape, (self._categorical._num_events,), validate_args)

    mean = property(lambda self: self.probs * self.total_count)
    variance = property(lambda self: self.total_count * self.probs * (1 - self.probs))

    def _sample(self, sample_shape):
        from .nn.functional import one_hot
        if self.total_count > 1 << 20:
            raise ValueError(f"[Multinomial] sampling draws total_count categories one by one: "
                             f"{self.total_count} is too many")
        k = self._categorical._num_events
        draws = self._categorical._sample((self.total_count,) + tuple(sample_shape))
        counts = one_hot(draws, k).to(self.probs.dtype).sum(0)
        return counts if self.total_count else _C.zeros(*self._extended_shape(sample_shape),
                                                        dtype=self.probs.dtype)

    def log_prob(self, value):
        value = _as_tensor(value, self.probs)
        ok = _C.logical_and(_C.ge(value, 0).all(-1), _C.eq(value.sum(-1), self.total_count))
        self._check_value(value, ok, f"Multinomial({self.total_count})")
        logits = _where(_C.logical_and(_C.eq(value, 0), _C.eq(self.logits, float("-inf"))), 0.0,
                        self.logits)
        return (math.lgamma(self.total_count + 1) - _lgamma(value + 1).sum(-1) +
                (logits * value).sum(-1))

    def entropy(self):
        n = self.total_count
        if n == 0:
            return _C.zeros(*self._batch_shape, dtype=self.probs.dtype)
        from ._distributions_more import Binomial
        support = _C.arange(1, n + 1, dtype=self.probs.dtype)
        support = support.reshape((-1,) + (1,) * self.probs.ndim)  # (n, ..., K)
        lp = Binomial(n, probs=self.probs, validate_args=False).log_prob(
            support.expand(n, *self.probs.shape))
        cat = self._categorical.entropy()
        return n * cat - math.lgamma(n + 1) + (_C.exp(lp) * _lgamma(support + 1)).sum(0).sum(-1)


class VonMises(Distribution):
    """The circular normal distribution on [-pi, pi): exp(concentration
    cos(x - loc)) / (2 pi I0(concentration))."""
    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real

    def __init__(self, loc, concentration, validate_args=None):
        self.loc, self.concentration = _broadcast(loc, concentration)
        super().__init__(tuple(self.loc.shape), (), validate_args)
        _positive(self, self.concentration, "concentration")

    mean = property(lambda self: self.loc)
    mode = property(lambda self: self.loc)

    @property
    def variance(self):
        k = self.concentration
        return 1 - _C.i1e(k) / _C.i0e(k)

    def log_prob(self, value):
        k = self.concentration
        lp = k * _C.cos(_as_tensor(value, self.loc) - self.loc)
        return lp - math.log(2 * math.pi) - (_C.log(_C.i0e(k)) + k)

    def _sample(self, sample_shape):
        """Best and Fisher's rejection sampler (in float64), redrawing the
        elements not yet accepted."""
        shape = self._extended_shape(sample_shape)
        k = self.concentration.to(_C.float64)
        k = k.expand(*shape) if shape else k
        tau = 1 + _C.sqrt(1 + 4 * k * k)
        rho = (tau - _C.sqrt(2 * tau)) / (2 * k)
        r = _where(_C.lt(k, 1e-5), 1 / k + k, (1 + rho * rho) / (2 * rho))
        x = _C.zeros_like(k)
        done = _C.zeros_like(k).to(_C.bool)
        for _ in range(1000):
            u1, u2, u3 = (_uniform(tuple(k.shape), _C.float64) for _ in range(3))
            z = _C.cos(math.pi * u1)
            f = (1 + r * z) / (r + z)
            c = k * (r - f)
            accept = _C.logical_or(_C.gt(c * (2 - c) - u2, 0),
                                   _C.ge(_C.log(c / _C.clamp(u2, min=1e-300)) + 1 - c, 0))
            theta = _C.sign(u3 - 0.5) * _C.acos(_C.clamp(f, -1.0, 1.0))
            take = _C.logical_and(accept, _C.logical_not(done))
            x = _where(take, theta, x)
            done = _C.logical_or(done, accept)
            if bool(done.all()):
                break
        else:
            raise RuntimeError("[VonMises] the rejection sampler did not accept every element in "
                               "1000 rounds")
        loc = self.loc.to(_C.float64)
        x = _C.remainder(x + loc + math.pi, 2 * math.pi) - math.pi
        return x.to(self.loc.dtype)


class LowRankMultivariateNormal(Distribution):
    """N(loc, cov_factor cov_factor^T + diag(cov_diag)) over the last dim
    (cov_factor (..., k, r), r usually much smaller than k): log_prob and
    entropy by the Woodbury identity and the capacitance I + W^T D^-1 W, an
    r x r matrix."""
    has_rsample = True
    arg_constraints = {"loc": constraints.real_vector, "cov_factor": constraints.real,
                       "cov_diag": constraints.positive}
    support = constraints.real_vector

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None):
        from ._torch_ops import broadcast_shapes
        loc, cov_factor, cov_diag = (_as_tensor(x) for x in (loc, cov_factor, cov_diag))
        if loc.ndim < 1 or cov_factor.ndim < 2 or cov_diag.ndim < 1:
            raise ValueError("[LowRankMultivariateNormal] loc and cov_diag must be at least "
                             "one-dimensional, cov_factor at least two-dimensional")
        k = loc.shape[-1]
        if cov_factor.shape[-2] != k or cov_diag.shape[-1] != k:
            raise ValueError(f"[LowRankMultivariateNormal] cov_factor must be ({k}, r) and cov_diag "
                             f"({k},) for loc's event size {k}, got {tuple(cov_factor.shape[-2:])} and "
                             f"{tuple(cov_diag.shape[-1:])}")
        batch = broadcast_shapes(tuple(loc.shape[:-1]), tuple(cov_factor.shape[:-2]),
                                 tuple(cov_diag.shape[:-1]))
        r = cov_factor.shape[-1]
        self.loc = loc.expand(*batch, k)
        self.cov_factor = cov_factor.expand(*batch, k, r)
        self.cov_diag = cov_diag.expand(*batch, k)
        super().__init__(batch, (k,), validate_args)
        _positive(self, self.cov_diag, "cov_diag")
        from . import linalg
        wt_dinv = self.cov_factor.transpose(-1, -2) / self.cov_diag.unsqueeze(-2)  # (..., r, k)
        cap = wt_dinv.matmul(self.cov_factor) + _C.eye(r, dtype=self.loc.dtype)
        self._capacitance_tril = linalg.cholesky(cap)

    mean = property(lambda self: self.loc)
    mode = property(lambda self: self.loc)
    variance = property(lambda self: (self.cov_factor ** 2).sum(-1) + self.cov_diag)

    @property
    def covariance_matrix(self):
        import musa
        W = self.cov_factor
        return W.matmul(W.transpose(-1, -2)) + musa.diag_embed(self.cov_diag)

    def rsample(self, sample_shape=()):
        from ._distributions_more import _normal
        shape = self._extended_shape(sample_shape)
        r = self.cov_factor.shape[-1]
        eps_w = _normal(shape[:-1] + (r,), self.loc.dtype)
        eps_d = _normal(shape, self.loc.dtype)
        return (self.loc + self.cov_factor.matmul(eps_w.unsqueeze(-1)).squeeze(-1) +
                _C.sqrt(self.cov_diag) * eps_d)

    def _log_det(self):
        L = self._capacitance_tril
        return 2 * _C.log(L.diagonal(dim1=-2, dim2=-1)).sum(-1) + _C.log(self.cov_diag).sum(-1)

    def log_prob(self, value):
        from . import linalg
        diff = _as_tensor(value, self.loc) - self.loc
        k = self._event_shape[0]
        from ._torch_ops import broadcast_shapes
        batch = broadcast_shapes(tuple(diff.shape[:-1]), self._batch_shape)
        diff = diff.expand(*batch, k)
        W = self.cov_factor.expand(*batch, *self.cov_factor.shape[-2:])
        D = self.cov_diag.expand(*batch, k)
        L = self._capacitance_tril.expand(*batch, *self._capacitance_tril.shape[-2:])
        wt_dinv_x = W.transpose(-1, -2).matmul((diff / D).unsqueeze(-1))  # (..., r, 1)
        m = (diff * diff / D).sum(-1) - (linalg.solve_triangular(L, wt_dinv_x, upper=False) ** 2).sum((-2, -1))
        return -0.5 * (k * math.log(2 * math.pi) + self._log_det() + m)

    def entropy(self):
        k = self._event_shape[0]
        return 0.5 * (k * (1.0 + math.log(2 * math.pi)) + self._log_det())


class LogisticNormal(TransformedDistribution):
    """Stick-breaking of N(loc, scale): a distribution on the simplex of one more dim."""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        from .distributions import Independent, Normal
        from ._dist_transforms import StickBreakingTransform
        base = Normal(loc, scale, validate_args=validate_args)
        if not base._batch_shape:
            base = base.expand((1,))
        super().__init__(Independent(base, 1), StickBreakingTransform(), validate_args)

    loc = property(lambda self: self.base_dist.base_dist.loc)
    scale = property(lambda self: self.base_dist.base_dist.scale)
