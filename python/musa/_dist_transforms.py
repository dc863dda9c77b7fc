"""musa.distributions.constraints and musa.distributions.transforms (as
torch's), TransformedDistribution, the relaxed (Concrete) distributions
and MixtureSameFamily.

A Transform maps x to y = t(x) with t.inv (y -> x) and
log_abs_det_jacobian(x, y), the log of |dy/dx| summed over its event dims;
TransformedDistribution(base, [t1, t2, ...]) draws base samples through
them and scores a value by walking them backwards: log p(y) =
base.log_prob(x) - sum of the log-Jacobians. A tanh-squashed Normal (SAC's
policy) is TransformedDistribution(Normal(mu, sigma), [TanhTransform()])."""
import math

from . import _C

__all__ = ["Constraint", "Transform", "ComposeTransform", "ExpTransform", "PowerTransform",
           "SigmoidTransform", "TanhTransform", "AbsTransform", "AffineTransform",
           "SoftplusTransform", "SoftmaxTransform", "StickBreakingTransform", "IndependentTransform",
           "identity_transform", "TransformedDistribution", "LogitRelaxedBernoulli",
           "RelaxedBernoulli", "ExpRelaxedCategorical", "RelaxedOneHotCategorical",
           "MixtureSameFamily"]  # (and attach_constraints, for musa.distributions)


def _sum_rightmost(x, n):
    return x.sum(tuple(range(-n, 0))) if n > 0 else x


# ---- constraints ----

class Constraint:
    """A set of values: check(value) is a bool tensor (per event)."""
    is_discrete = False
    event_dim = 0

    def check(self, value):
        raise NotImplementedError(f"[{type(self).__name__}] a constraint defines check(value)")

    def __repr__(self):
        return type(self).__name__.lstrip("_") + "()"


class _Real(Constraint):
    def check(self, value):
        return _C.eq(value, value)  # not NaN


class _GreaterThan(Constraint):
    def __init__(self, lower_bound, strict=True):
        self.lower_bound, self._strict = lower_bound, strict

    def check(self, value):
        return _C.gt(value, self.lower_bound) if self._strict else _C.ge(value, self.lower_bound)

    def __repr__(self):
        return f"GreaterThan{'' if self._strict else 'Eq'}(lower_bound={self.lower_bound})"


class _LessThan(Constraint):
    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, value):
        return _C.lt(value, self.upper_bound)

    def __repr__(self):
        return f"LessThan(upper_bound={self.upper_bound})"


class _Interval(Constraint):
    def __init__(self, lower_bound, upper_bound, half_open=False):
        self.lower_bound, self.upper_bound, self._half_open = lower_bound, upper_bound, half_open

    def check(self, value):
        hi = _C.lt(value, self.upper_bound) if self._half_open else _C.le(value, self.upper_bound)
        return _C.logical_and(_C.ge(value, self.lower_bound), hi)

    def __repr__(self):
        kind = "HalfOpenInterval" if self._half_open else "Interval"
        return f"{kind}(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _IntegerInterval(Constraint):
    is_discrete = True

    def __init__(self, lower_bound, upper_bound=None):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        ok = _C.logical_and(_C.eq(value, _C.floor(value)), _C.ge(value, self.lower_bound))
        return ok if self.upper_bound is None else _C.logical_and(ok, _C.le(value, self.upper_bound))


class _Boolean(Constraint):
    is_discrete = True

    def check(self, value):
        return _C.logical_or(_C.eq(value, 0), _C.eq(value, 1))


class _Simplex(Constraint):
    event_dim = 1

    def check(self, value):
        return _C.logical_and(_C.ge(value, 0).all(-1), _C.lt((value.sum(-1) - 1).abs(), 1e-6))


class _RealVector(Constraint):
    event_dim = 1

    def check(self, value):
        return _C.eq(value, value).all(-1)


class _LowerCholesky(Constraint):
    event_dim = 2

    def check(self, value):
        lower = _C.eq(value.tril(), value).all(-1).all(-1)
        return _C.logical_and(lower, _C.gt(value.diagonal(dim1=-2, dim2=-1), 0).all(-1))


class _PositiveDefinite(Constraint):
    event_dim = 2

    def check(self, value):
        from . import linalg
        sym = _C.lt((value - value.transpose(-1, -2)).abs(), 1e-6).all(-1).all(-1)
        _, info = linalg.cholesky_ex(value)
        return _C.logical_and(sym, _C.eq(info, 0))


class _Dependent(Constraint):
    def check(self, value):
        raise ValueError("[constraints] cannot determine validity of dependent constraint")


class _ConstraintsModule:
    """The namespace musa.distributions.constraints."""
    Constraint = Constraint
    real = _Real()
    real_vector = _RealVector()
    positive = _GreaterThan(0.0)
    nonnegative = _GreaterThan(0.0, strict=False)
    unit_interval = _Interval(0.0, 1.0)
    boolean = _Boolean()
    nonnegative_integer = _IntegerInterval(0)
    positive_integer = _IntegerInterval(1)
    simplex = _Simplex()
    lower_cholesky = _LowerCholesky()
    positive_definite = _PositiveDefinite()
    dependent = _Dependent()

    @staticmethod
    def greater_than(lower_bound):
        return _GreaterThan(lower_bound)

    @staticmethod
    def greater_than_eq(lower_bound):
        return _GreaterThan(lower_bound, strict=False)

    @staticmethod
    def less_than(upper_bound):
        return _LessThan(upper_bound)

    @staticmethod
    def interval(lower_bound, upper_bound):
        return _Interval(lower_bound, upper_bound)

    @staticmethod
    def half_open_interval(lower_bound, upper_bound):
        return _Interval(lower_bound, upper_bound, half_open=True)

    @staticmethod
    def integer_interval(lower_bound, upper_bound):
        return _IntegerInterval(lower_bound, upper_bound)


constraints = _ConstraintsModule()


# ---- transforms ----

class Transform:
    """y = t(x), x = t.inv(y), log|dy/dx| (summed over event_dim dims)."""
    bijective = True
    domain = codomain = constraints.real
    sign = 1
    event_dim = 0

    def __call__(self, x):
        return self._call(x)

    @property
    def inv(self):
        return _Inverse(self)

    def _inverse(self, y):
        raise NotImplementedError(f"[{type(self).__name__}] has no inverse")

    def log_abs_det_jacobian(self, x, y):
        raise NotImplementedError(f"[{type(self).__name__}] has no log_abs_det_jacobian")

    def forward_shape(self, shape):
        return tuple(shape)

    def inverse_shape(self, shape):
        return tuple(shape)

    def __repr__(self):
        return type(self).__name__ + "()"


class _Inverse(Transform):
    def __init__(self, t):
        self._inv = t
        self.event_dim, self.bijective, self.sign = t.event_dim, t.bijective, t.sign
        self.domain, self.codomain = t.codomain, t.domain

    @property
    def inv(self):
        return self._inv

    def _call(self, x):
        return self._inv._inverse(x)

    def _inverse(self, y):
        return self._inv(y)

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)


class _Identity(Transform):
    def _call(self, x):
        return x

    def _inverse(self, y):
        return y

    def log_abs_det_jacobian(self, x, y):
        return _C.zeros_like(x)


identity_transform = _Identity()


class ComposeTransform(Transform):
    """parts applied in order: y = parts[-1](...parts[0](x))."""

    def __init__(self, parts):
        self.parts = list(parts)
        self.event_dim = max([p.event_dim for p in self.parts], default=0)
        self.bijective = all(p.bijective for p in self.parts)
        self.sign = 1
        for p in self.parts:
            self.sign *= p.sign
        if self.parts:
            self.domain, self.codomain = self.parts[0].domain, self.parts[-1].codomain

    @property
    def inv(self):
        return ComposeTransform([p.inv for p in reversed(self.parts)])

    def _call(self, x):
        for p in self.parts:
            x = p(x)
        return x

    def _inverse(self, y):
        for p in reversed(self.parts):
            y = p.inv(y)
        return y

    def log_abs_det_jacobian(self, x, y):
        if not self.parts:
            return _C.zeros_like(x)
        total = 0
        for p in self.parts:
            nxt = p(x)
            total = total + _sum_rightmost(p.log_abs_det_jacobian(x, nxt), self.event_dim - p.event_dim)
            x = nxt
        return total

    def __repr__(self):
        return "ComposeTransform(" + ", ".join(repr(p) for p in self.parts) + ")"


class ExpTransform(Transform):
    codomain = constraints.positive

    def _call(self, x):
        return _C.exp(x)

    def _inverse(self, y):
        return _C.log(y)

    def log_abs_det_jacobian(self, x, y):
        return x


class PowerTransform(Transform):
    """y = x ** exponent, on positive x."""
    domain = codomain = constraints.positive

    def __init__(self, exponent):
        self.exponent = exponent

    def _call(self, x):
        return x ** self.exponent

    def _inverse(self, y):
        return y ** (1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        e = self.exponent if isinstance(self.exponent, _C.Tensor) else _C.tensor(float(self.exponent),
                                                                                   dtype=y.dtype)
        return _C.log((e * y / x).abs())


def _eps(dtype):
    from .distributions import _eps
    return _eps(dtype)


def _clipped_sigmoid(x):
    eps = _eps(x.dtype)
    return _C.clamp(_C.sigmoid(x), min=eps, max=1 - eps)


class SigmoidTransform(Transform):
    codomain = constraints.unit_interval

    def _call(self, x):
        return _clipped_sigmoid(x)

    def _inverse(self, y):
        eps = _eps(y.dtype)
        y = _C.clamp(y, min=eps, max=1 - eps)
        return _C.log(y) - _C.log1p(-y)

    def log_abs_det_jacobian(self, x, y):
        from .nn.functional import softplus
        return -softplus(-x) - softplus(x)


class TanhTransform(Transform):
    """y = tanh(x); log|dy/dx| = 2 (log 2 - x - softplus(-2x)), stable for large |x|."""
    codomain = constraints.interval(-1.0, 1.0)

    def _call(self, x):
        return _C.tanh(x)

    def _inverse(self, y):
        return 0.5 * (_C.log1p(y) - _C.log1p(-y))  # atanh, without clamping (as torch)

    def log_abs_det_jacobian(self, x, y):
        from .nn.functional import softplus
        return 2.0 * (math.log(2.0) - x - softplus(-2.0 * x))


class AbsTransform(Transform):
    bijective = False
    codomain = constraints.nonnegative

    def _call(self, x):
        return x.abs()

    def _inverse(self, y):
        return y


class AffineTransform(Transform):
    """y = loc + scale * x, over event_dim rightmost dims."""

    def __init__(self, loc, scale, event_dim=0):
        self.loc, self.scale, self.event_dim = loc, scale, event_dim

    @property
    def sign(self):
        if isinstance(self.scale, _C.Tensor):
            return _C.sign(self.scale)
        return 1 if self.scale > 0 else -1 if self.scale < 0 else 0

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        if isinstance(self.scale, _C.Tensor):
            r = _C.log(self.scale.abs())
        else:
            r = _C.full_like(x, math.log(abs(self.scale)))
        shape = tuple(x.shape)
        if tuple(r.shape) != shape:
            r = r.expand(*shape) if shape else r
        return _sum_rightmost(r, self.event_dim)

    def forward_shape(self, shape):
        from ._torch_ops import broadcast_shapes
        ls = tuple(getattr(self.loc, "shape", ()))
        ss = tuple(getattr(self.scale, "shape", ()))
        return broadcast_shapes(tuple(shape), ls, ss)


class SoftplusTransform(Transform):
    codomain = constraints.positive

    def _call(self, x):
        from .nn.functional import softplus
        return softplus(x)

    def _inverse(self, y):
        return y + _C.log(-_C.expm1(-y))

    def log_abs_det_jacobian(self, x, y):
        from .nn.functional import softplus
        return -softplus(-x)


class SoftmaxTransform(Transform):
    """exp(x) normalised over the last dim (not bijective: no Jacobian)."""
    bijective = False
    codomain = constraints.simplex
    event_dim = 1

    def _call(self, x):
        return _C.softmax(x, -1)

    def _inverse(self, y):
        return _C.log(y)


class StickBreakingTransform(Transform):
    """R^(K-1) -> the K-simplex by stick breaking (bijective)."""
    codomain = constraints.simplex
    event_dim = 1

    def _call(self, x):
        k = x.shape[-1] + 1
        offset = _C.log(_C.arange(k - 1, 0, -1, dtype=x.dtype))
        z = _clipped_sigmoid(x - offset)
        zc = _C.cumprod(1 - z, -1)
        from .nn.functional import pad
        return pad(z, (0, 1), value=1.0) * pad(zc, (1, 0), value=1.0)

    def _inverse(self, y):
        y_crop = y[..., :-1]
        k = y.shape[-1]
        offset = _C.log(_C.arange(k - 1, 0, -1, dtype=y.dtype))
        sf = _C.clamp(1 - _C.cumsum(y_crop, -1), min=_eps(y.dtype))
        x = _C.log(y_crop) - _C.log(sf) + offset
        return x

    def log_abs_det_jacobian(self, x, y):
        k = x.shape[-1] + 1
        offset = _C.log(_C.arange(k - 1, 0, -1, dtype=x.dtype))
        x = x - offset
        from .nn.functional import logsigmoid
        return (-x + logsigmoid(x) + _C.log(y[..., :-1])).sum(-1)

    def forward_shape(self, shape):
        return tuple(shape[:-1]) + (shape[-1] + 1,)

    def inverse_shape(self, shape):
        return tuple(shape[:-1]) + (shape[-1] - 1,)


class IndependentTransform(Transform):
    """base_transform with reinterpreted_batch_ndims more event dims."""

    def __init__(self, base_transform, reinterpreted_batch_ndims):
        self.base_transform, self.reinterpreted_batch_ndims = base_transform, reinterpreted_batch_ndims
        self.event_dim = base_transform.event_dim + reinterpreted_batch_ndims
        self.bijective, self.sign = base_transform.bijective, base_transform.sign

    def _call(self, x):
        return self.base_transform(x)

    def _inverse(self, y):
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x, y):
        return _sum_rightmost(self.base_transform.log_abs_det_jacobian(x, y), self.reinterpreted_batch_ndims)


class _TransformsModule:
    """The namespace musa.distributions.transforms."""


for _n in ("Transform", "ComposeTransform", "ExpTransform", "PowerTransform", "SigmoidTransform",
           "TanhTransform", "AbsTransform", "AffineTransform", "SoftplusTransform", "SoftmaxTransform",
           "StickBreakingTransform", "IndependentTransform", "identity_transform"):
    setattr(_TransformsModule, _n, globals()[_n])
transforms = _TransformsModule()


# ---- distributions over transforms ----

def _distribution():
    from .distributions import Distribution
    return Distribution


class TransformedDistribution(_distribution()):
    """base_distribution's samples through transforms (one or a list)."""

    def __init__(self, base_distribution, transforms, validate_args=None):
        if isinstance(transforms, Transform):
            transforms = [transforms]
        if not all(isinstance(t, Transform) for t in transforms):
            raise ValueError("[TransformedDistribution] transforms must be a Transform or a list of "
                             "Transforms")
        self.base_dist, self.transforms = base_distribution, list(transforms)
        shape = base_distribution._batch_shape + base_distribution._event_shape
        for t in self.transforms:
            shape = t.forward_shape(shape)
        event = max([len(base_distribution._event_shape)] + [t.event_dim for t in self.transforms])
        cut = len(shape) - event
        super().__init__(shape[:cut], shape[cut:], validate_args)
        self.has_rsample = base_distribution.has_rsample

    def sample(self, sample_shape=()):
        from .autograd import no_grad
        with no_grad():
            x = self.base_dist.sample(sample_shape)
            for t in self.transforms:
                x = t(x)
            return x

    def rsample(self, sample_shape=()):
        x = self.base_dist.rsample(sample_shape)
        for t in self.transforms:
            x = t(x)
        return x

    def log_prob(self, value):
        from .distributions import _as_tensor
        y = _as_tensor(value)
        event_dim = len(self._event_shape)
        lp = 0.0
        for t in reversed(self.transforms):
            x = t.inv(y)  # (these transforms keep the event dims: domain and codomain alike)
            lp = lp - _sum_rightmost(t.log_abs_det_jacobian(x, y), event_dim - t.event_dim)
            y = x
        base = self.base_dist.log_prob(y)
        return lp + _sum_rightmost(base, event_dim - len(self.base_dist._event_shape))

    def _monotone(self):
        sign = 1
        for t in self.transforms:
            s = t.sign
            if isinstance(s, _C.Tensor) or not t.bijective:
                raise NotImplementedError("[TransformedDistribution] cdf needs monotone transforms "
                                          "of known sign")
            sign *= s
        return sign

    def cdf(self, value):
        sign = self._monotone()
        y = value
        for t in reversed(self.transforms):
            y = t.inv(y)
        v = self.base_dist.cdf(y)
        return v if sign == 1 else 1 - v

    @property
    def mean(self):
        raise NotImplementedError("[TransformedDistribution] has no closed-form mean")


class LogitRelaxedBernoulli(_distribution()):
    """The logit of a RelaxedBernoulli sample: (logits + logistic noise) / temperature."""

    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        from .distributions import _as_tensor
        from .distributions import _probs_logits
        _probs_logits(self, probs, logits, type(self).__name__)
        self.temperature = _as_tensor(temperature, self.probs)
        super().__init__(tuple(self.logits.shape), (), validate_args)

    def rsample(self, sample_shape=()):
        from ._distributions_more import _uniform
        shape = self._extended_shape(sample_shape)
        eps = _eps(self.logits.dtype)
        u = _C.clamp(_uniform(shape, self.logits.dtype), min=eps, max=1 - eps)
        return (_C.log(u) - _C.log1p(-u) + self.logits) / self.temperature

    def log_prob(self, value):
        from .distributions import _as_tensor
        from .nn.functional import softplus
        value = _as_tensor(value, self.logits)
        diff = self.logits - value * self.temperature
        return _C.log(self.temperature) + diff - 2 * softplus(diff)


class RelaxedBernoulli(TransformedDistribution):
    """The Concrete relaxation of Bernoulli: sigmoid of a LogitRelaxedBernoulli."""

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base = LogitRelaxedBernoulli(temperature, probs, logits, validate_args)
        super().__init__(base, SigmoidTransform(), validate_args)

    temperature = property(lambda self: self.base_dist.temperature)
    logits = property(lambda self: self.base_dist.logits)
    probs = property(lambda self: self.base_dist.probs)


class ExpRelaxedCategorical(_distribution()):
    """The log of a RelaxedOneHotCategorical sample (Gumbel-softmax in log space)."""

    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        from .distributions import Categorical, _as_tensor
        self._categorical = Categorical(probs, logits, validate_args)
        self.probs, self.logits = self._categorical.probs, self._categorical.logits
        self.temperature = _as_tensor(temperature, self.probs)
        super().__init__(self._categorical._batch_shape, (self._categorical._num_events,), validate_args)

    def rsample(self, sample_shape=()):
        from ._distributions_more import _uniform
        from .distributions import _tiny
        u = _C.clamp(_uniform(self._extended_shape(sample_shape), self.logits.dtype),
                     min=_tiny(self.logits.dtype), max=1 - _eps(self.logits.dtype))
        scores = (self.logits - _C.log(-_C.log(u))) / self.temperature
        return scores - _C.logsumexp(scores, -1, True)

    def log_prob(self, value):
        from ._distributions_more import _lgamma
        from .distributions import _as_tensor
        k = self._categorical._num_events
        t = self.temperature
        log_scale = _lgamma(_C.full_like(t, float(k))) + (k - 1) * _C.log(t)
        score = self.logits - _as_tensor(value, self.logits) * t
        score = (score - _C.logsumexp(score, -1, True)).sum(-1)
        return score + log_scale


class RelaxedOneHotCategorical(TransformedDistribution):
    """The Concrete (Gumbel-softmax) relaxation of OneHotCategorical."""

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base = ExpRelaxedCategorical(temperature, probs, logits, validate_args)
        super().__init__(base, ExpTransform(), validate_args)

    temperature = property(lambda self: self.base_dist.temperature)
    logits = property(lambda self: self.base_dist.logits)
    probs = property(lambda self: self.base_dist.probs)


class MixtureSameFamily(_distribution()):
    """A mixture over the rightmost batch dim of component_distribution,
    weighted by mixture_distribution (a Categorical)."""

    def __init__(self, mixture_distribution, component_distribution, validate_args=None):
        from .distributions import Categorical
        if not isinstance(mixture_distribution, Categorical):
            raise ValueError("[MixtureSameFamily] The Mixture distribution needs to be an instance of "
                             "torch.distributions.Categorical")
        cb = component_distribution._batch_shape
        if not cb or cb[-1] != mixture_distribution._num_events:
            raise ValueError(f"[MixtureSameFamily] the components' last batch dim must be the mixture's "
                             f"{mixture_distribution._num_events} categories, got batch shape {cb}")
        self._mixture_distribution, self._component_distribution = mixture_distribution, component_distribution
        self._event_ndims = len(component_distribution._event_shape)
        super().__init__(cb[:-1], component_distribution._event_shape, validate_args)

    mixture_distribution = property(lambda self: self._mixture_distribution)
    component_distribution = property(lambda self: self._component_distribution)

    def _pad_probs(self):
        p = self._mixture_distribution.probs
        return p.reshape(tuple(p.shape) + (1,) * self._event_ndims)

    @property
    def mean(self):
        return (self._pad_probs() * self._component_distribution.mean).sum(-1 - self._event_ndims)

    @property
    def variance(self):
        p, d = self._pad_probs(), -1 - self._event_ndims
        mean_cond_var = (p * self._component_distribution.variance).sum(d)
        m = self._component_distribution.mean
        var_cond_mean = (p * (m - self.mean.unsqueeze(d)) ** 2).sum(d)
        return mean_cond_var + var_cond_mean

    def log_prob(self, value):
        from .distributions import _as_tensor
        x = _as_tensor(value).unsqueeze(-1 - self._event_ndims)
        lp = self._component_distribution.log_prob(x)
        mix = _C.log_softmax(self._mixture_distribution.logits, -1)
        return _C.logsumexp(lp + mix, -1, False)

    def cdf(self, value):
        from .distributions import _as_tensor
        x = _as_tensor(value).unsqueeze(-1 - self._event_ndims)
        return (self._component_distribution.cdf(x) * self._mixture_distribution.probs).sum(-1)

    def sample(self, sample_shape=()):
        from .autograd import no_grad
        with no_grad():
            idx = self._mixture_distribution.sample(sample_shape)  # sample + batch
            comps = self._component_distribution.sample(sample_shape)  # sample + batch + (k,) + event
            idx = idx.reshape(tuple(idx.shape) + (1,) * (1 + self._event_ndims))
            idx = idx.expand(*(tuple(idx.shape[:len(idx.shape) - 1 - self._event_ndims]) + (1,) +
                               tuple(comps.shape[len(comps.shape) - self._event_ndims:])))
            return comps.gather(-1 - self._event_ndims, idx).squeeze(-1 - self._event_ndims)


# ---- arg_constraints and support, as torch's (set once both modules are loaded) ----

def attach_constraints(ns):
    """Give the distribution classes of namespace ns (musa.distributions)
    their arg_constraints and support."""
    c = constraints
    pos, real = c.positive, c.real
    table = {
        "Normal": ({"loc": real, "scale": pos}, real),
        "Uniform": ({"low": c.dependent, "high": c.dependent},
                    property(lambda self: c.interval(self.low, self.high))),
        "Bernoulli": ({"probs": c.unit_interval, "logits": real}, c.boolean),
        "Categorical": ({"probs": c.simplex, "logits": c.real_vector},
                        property(lambda self: c.integer_interval(0, self._num_events - 1))),
        "OneHotCategorical": ({"probs": c.simplex, "logits": c.real_vector}, c.simplex),
        "Exponential": ({"rate": pos}, c.nonnegative),
        "Laplace": ({"loc": real, "scale": pos}, real),
        "Cauchy": ({"loc": real, "scale": pos}, real),
        "Gumbel": ({"loc": real, "scale": pos}, real),
        "HalfNormal": ({"scale": pos}, c.nonnegative),
        "LogNormal": ({"loc": real, "scale": pos}, pos),
        "StudentT": ({"df": pos, "loc": real, "scale": pos}, real),
        "Gamma": ({"concentration": pos, "rate": pos}, c.nonnegative),
        "Chi2": ({"df": pos}, c.nonnegative),
        "Beta": ({"concentration1": pos, "concentration0": pos}, c.unit_interval),
        "Dirichlet": ({"concentration": pos}, c.simplex),
        "Poisson": ({"rate": c.nonnegative}, c.nonnegative_integer),
        "Binomial": ({"total_count": c.nonnegative_integer, "probs": c.unit_interval, "logits": real},
                     property(lambda self: c.integer_interval(0, self.total_count))),
        "Geometric": ({"probs": c.unit_interval, "logits": real}, c.nonnegative_integer),
        "MultivariateNormal": ({"loc": c.real_vector, "covariance_matrix": c.positive_definite,
                                "precision_matrix": c.positive_definite,
                                "scale_tril": c.lower_cholesky}, c.real_vector),
        "Independent": ({}, property(lambda self: self.base_dist.support)),
        "TransformedDistribution": ({}, property(lambda self: self.transforms[-1].codomain
                                                 if self.transforms else self.base_dist.support)),
        "MixtureSameFamily": ({}, property(lambda self: self._component_distribution.support)),
    }
    for name, (args, support) in table.items():
        cls = getattr(ns, name)
        cls.arg_constraints = args
        cls.support = support
