"""Probability distributions, as torch.distributions: Normal, Uniform,
Bernoulli, Categorical and OneHotCategorical, Independent, and
kl_divergence between them; the rest (Gamma, Beta, Dirichlet, Poisson,
MultivariateNormal, ...) come from musa._distributions_more. Samples draw from musa's generator; rsample
(Normal, Uniform) is reparametrised, so gradients flow to the parameters;
log_prob and entropy are differentiable.

Parameters are checked as PyTorch checks them (validate_args, on by
default): a scale must be positive, probabilities in [0, 1], and so on;
log_prob checks that values lie in the support."""
import math

from . import _C
from . import _functions as _F

__all__ = ["Distribution", "Normal", "Uniform", "Bernoulli", "Categorical", "OneHotCategorical", "Independent",
           "kl_divergence", "register_kl"]

_validate_default = True


def _as_tensor(x, like=None):
    if isinstance(x, _C.Tensor):
        return x
    dtype = like.dtype if isinstance(like, _C.Tensor) and like.is_floating_point() else _C.get_default_dtype()
    return _C.tensor(float(x), dtype=dtype)


def _broadcast(*values):
    tensors = [v for v in values if isinstance(v, _C.Tensor)]
    like = tensors[0] if tensors else None
    values = [_as_tensor(v, like) for v in values]
    from ._torch_ops import broadcast_tensors
    return broadcast_tensors(*values)


class Distribution:
    """batch_shape: the independent draws' shape; event_shape: one draw's."""

    has_rsample = False

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape, self._event_shape = tuple(batch_shape), tuple(event_shape)
        self._validate_args = _validate_default if validate_args is None else validate_args

    @staticmethod
    def set_default_validate_args(value):
        global _validate_default
        _validate_default = bool(value)

    @property
    def batch_shape(self):
        from . import Size
        return Size(self._batch_shape)

    @property
    def event_shape(self):
        from . import Size
        return Size(self._event_shape)

    def _extended_shape(self, sample_shape=()):
        return tuple(sample_shape) + self._batch_shape + self._event_shape

    @property
    def stddev(self):
        return self.variance.sqrt()

    def sample(self, sample_shape=()):
        from .autograd import no_grad
        with no_grad():
            return self.rsample(sample_shape) if self.has_rsample else self._sample(tuple(sample_shape))

    def sample_n(self, n):
        return self.sample((n,))

    def rsample(self, sample_shape=()):
        raise NotImplementedError(f"[{type(self).__name__}] has no reparametrised sample (rsample)")

    def perplexity(self):
        return _C.exp(self.entropy())

    has_enumerate_support = False

    def expand(self, batch_shape, _instance=None):
        """The same distribution over a larger batch: parameters broadcast
        to batch_shape (no copy), as torch's expand."""
        import copy
        batch_shape = tuple(batch_shape)
        old = self._batch_shape
        from ._torch_ops import broadcast_shapes
        try:
            ok = broadcast_shapes(old, batch_shape) == batch_shape
        except (ValueError, TypeError):
            ok = False
        if not ok:
            raise ValueError(f"[{type(self).__name__}.expand] batch shape {old} cannot be expanded to "
                             f"{batch_shape}")
        new = copy.copy(self)
        for k, v in vars(self).items():
            if isinstance(v, _C.Tensor) and v.ndim >= len(old) and tuple(v.shape[:len(old)]) == old:
                rest = tuple(v.shape[len(old):])
                # (right-aligned: the old batch dims against the new batch's last ones)
                setattr(new, k, v.reshape((1,) * (len(batch_shape) - len(old)) + tuple(v.shape))
                        .expand(*batch_shape, *rest))
            elif isinstance(v, Distribution) and v._batch_shape == old:
                setattr(new, k, v.expand(batch_shape))
        new._batch_shape = batch_shape
        return new

    def _check(self, ok, what):
        if self._validate_args and not bool(ok.all()):
            raise ValueError(f"[{type(self).__name__}] Expected parameter {what}")

    def _check_value(self, value, ok, support):
        if self._validate_args and not bool(ok.all()):
            raise ValueError(f"[{type(self).__name__}] Expected value argument to be within the support "
                             f"({support}) of the distribution, but found invalid values")

    def __repr__(self):
        return f"{type(self).__name__}()"


class Normal(Distribution):
    """N(loc, scale^2)."""

    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = _broadcast(loc, scale)
        super().__init__(tuple(self.loc.shape), (), validate_args)
        self._check(_C.gt(self.scale, 0), f"scale of shape {tuple(self.scale.shape)} to satisfy the "
                    f"constraint GreaterThan(lower_bound=0.0), but found invalid values")

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self.scale ** 2

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = _C.randn(*shape, dtype=self.loc.dtype) if shape else _C.randn(1, dtype=self.loc.dtype).reshape(())
        return self.loc + eps * self.scale

    def log_prob(self, value):
        value = _as_tensor(value, self.loc)
        var = self.scale ** 2
        return -((value - self.loc) ** 2) / (2 * var) - _C.log(self.scale) - math.log(math.sqrt(2 * math.pi))

    def cdf(self, value):
        value = _as_tensor(value, self.loc)
        return 0.5 * (1 + _C.erf((value - self.loc) / (self.scale * math.sqrt(2))))

    def icdf(self, value):
        from ._torch_special import erfinv
        return self.loc + self.scale * erfinv(2 * _as_tensor(value, self.loc) - 1) * math.sqrt(2)

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + _C.log(self.scale)

    def __repr__(self):
        return f"Normal(loc: {self.loc.shape if self.loc.ndim else self.loc}, scale: " \
               f"{self.scale.shape if self.scale.ndim else self.scale})"


class Uniform(Distribution):
    """U[low, high)."""

    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = _broadcast(low, high)
        super().__init__(tuple(self.low.shape), (), validate_args)
        self._check(_C.lt(self.low, self.high), "low to be less than high")

    @property
    def mean(self):
        return (self.high + self.low) / 2

    @property
    def variance(self):
        return (self.high - self.low) ** 2 / 12

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        u = _C.rand(*shape, dtype=self.low.dtype) if shape else _C.rand(1, dtype=self.low.dtype).reshape(())
        return self.low + u * (self.high - self.low)

    def log_prob(self, value):
        value = _as_tensor(value, self.low)
        self._check_value(value, _C.logical_and(_C.ge(value, self.low), _C.lt(value, self.high)),
                          "Interval(low, high)")
        lb = _C.le(self.low, value).to(self.low.dtype)
        ub = _C.gt(self.high, value).to(self.low.dtype)
        return _C.log(lb * ub) - _C.log(self.high - self.low)

    def cdf(self, value):
        value = _as_tensor(value, self.low)
        return _C.clamp((value - self.low) / (self.high - self.low), 0, 1)

    def icdf(self, value):
        return self.low + _as_tensor(value, self.low) * (self.high - self.low)

    @property
    def mode(self):
        return _C.full(tuple(self.low.shape), float("nan"), dtype=self.low.dtype)

    def entropy(self):
        return _C.log(self.high - self.low)


def _logits_probs(probs, logits, who, binary):
    if (probs is None) == (logits is None):
        raise ValueError(f"[{who}] Either `probs` or `logits` must be specified, but not both.")
    if probs is not None:
        probs = _as_tensor(probs)
        return probs, None
    return None, _as_tensor(logits)


def _probs_logits(d, probs, logits, who):
    """Set d.probs and d.logits from the one given (a binary event's
    probability, or its log-odds); returns the probs given, or None."""
    probs, logits = _logits_probs(probs, logits, who, True)
    if probs is not None:
        d.probs = probs
        d.logits = _C.log(probs) - _C.log1p(-probs)
        return probs
    d.logits = logits
    d.probs = _C.sigmoid(logits)
    return None


class Bernoulli(Distribution):
    """1 with probability probs (or sigmoid(logits)), else 0."""

    def __init__(self, probs=None, logits=None, validate_args=None):
        probs = _probs_logits(self, probs, logits, "Bernoulli")
        self._given_probs = probs is not None
        super().__init__(tuple(self.probs.shape), (), validate_args)
        if probs is not None:
            self._check(_C.logical_and(_C.ge(probs, 0), _C.le(probs, 1)),
                        "probs to satisfy the constraint Interval(lower_bound=0.0, upper_bound=1.0)")

    @property
    def mean(self):
        return self.probs

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    @property
    def mode(self):
        m = _C.ge(self.probs, 0.5).to(self.probs.dtype)
        return _C.where(_C.eq(self.probs, 0.5), float("nan"), m)

    has_enumerate_support = True

    def enumerate_support(self, expand=True):
        values = _C.arange(2, dtype=self.probs.dtype).reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand(2, *self._batch_shape) if expand else values

    def _sample(self, sample_shape):
        shape = self._extended_shape(sample_shape)
        p = self.probs.expand(*shape) if shape else self.probs
        return _C.bernoulli(p.contiguous())

    def log_prob(self, value):
        value = _as_tensor(value, self.probs)
        self._check_value(value, _C.logical_or(_C.eq(value, 0), _C.eq(value, 1)), "Boolean()")
        from .nn.functional import binary_cross_entropy_with_logits
        logits, value = _broadcast(self.logits, value)
        return -binary_cross_entropy_with_logits(logits, value.to(logits.dtype), reduction="none")

    def entropy(self):
        from .nn.functional import binary_cross_entropy_with_logits
        return binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")


class Categorical(Distribution):
    """One of K categories, with probabilities probs (normalised) or
    softmax(logits), along the last dim."""

    def __init__(self, probs=None, logits=None, validate_args=None):
        probs, logits = _logits_probs(probs, logits, type(self).__name__, False)
        if (probs if probs is not None else logits).ndim < 1:
            raise ValueError(f"[{type(self).__name__}] `probs` or `logits` parameter must be at least one-dimensional.")
        if probs is not None:
            if _validate_default if validate_args is None else validate_args:
                if not bool(_C.ge(probs, 0).all()):
                    raise ValueError(f"[{type(self).__name__}] Expected parameter probs to be non-negative")
            self.probs = probs / probs.sum(-1, keepdim=True)
            self.logits = _C.log(_C.clamp(self.probs, min=_tiny(self.probs.dtype)))
        else:
            self.logits = logits - _C.logsumexp(logits, -1, True)
            self.probs = _C.softmax(logits, -1)
        self._num_events = self.probs.shape[-1]
        super().__init__(tuple(self.probs.shape[:-1]), (), validate_args)

    @property
    def param_shape(self):
        return tuple(self.probs.shape)

    @property
    def mean(self):
        return _C.full(self._extended_shape(), float("nan"), dtype=self.probs.dtype)

    @property
    def variance(self):
        return _C.full(self._extended_shape(), float("nan"), dtype=self.probs.dtype)

    @property
    def mode(self):
        return self.probs.argmax(-1)

    def _sample(self, sample_shape):
        n = 1
        for s in sample_shape:
            n *= s
        flat = self.probs.reshape(-1, self._num_events)
        return _draw(flat, n).t().reshape(tuple(sample_shape) + self._batch_shape)

    def log_prob(self, value):
        value = _as_tensor(value).long()
        self._check_value(value, _C.logical_and(_C.ge(value, 0), _C.lt(value, self._num_events)),
                          f"IntegerInterval(lower_bound=0, upper_bound={self._num_events - 1})")
        value = value.unsqueeze(-1)
        value, log_pmf = _broadcast_last(value, self.logits)
        return log_pmf.gather(-1, value[..., :1]).squeeze(-1)

    def entropy(self):
        lo = _tiny_log(self.logits.dtype)
        logits = _C.clamp(self.logits, min=lo)
        return -(logits * self.probs).sum(-1)

    has_enumerate_support = True

    def enumerate_support(self, expand=True):
        values = _C.arange(self._num_events).reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand(self._num_events, *self._batch_shape) if expand else values


def _broadcast_last(value, log_pmf):
    """value (..., 1) and log_pmf (..., K) broadcast over their batch dims."""
    from ._torch_ops import broadcast_shapes
    batch = broadcast_shapes(tuple(value.shape[:-1]), tuple(log_pmf.shape[:-1]))
    return value.expand(*batch, 1), log_pmf.expand(*batch, log_pmf.shape[-1])


def _draw(probs, n):
    """n categorical draws per row of probs (rows sum to 1): inverse CDF."""
    u = _C.rand(probs.shape[0], n, dtype=_C.float64)
    cdf = _C.cumsum(probs.to(_C.float64), -1)
    cdf = cdf / cdf[:, -1:]
    return _C.clamp(_C.lt(cdf.unsqueeze(1), u.unsqueeze(-1)).sum(-1), max=probs.shape[-1] - 1)


def _tiny(dtype):
    return {_C.float64: 2.2250738585072014e-308, _C.float16: 6.103515625e-05}.get(dtype, 1.1754943508222875e-38)


def _tiny_log(dtype):
    return math.log(_tiny(dtype))


def _eps(dtype):
    """The dtype's machine epsilon (torch.finfo(dtype).eps)."""
    return {_C.float64: 2.220446049250313e-16, _C.float16: 0.0009765625,
            _C.bfloat16: 0.0078125}.get(dtype, 1.1920928955078125e-07)


class OneHotCategorical(Distribution):
    """Categorical with one-hot samples (event shape (K,))."""

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits, validate_args)
        self.probs, self.logits = self._categorical.probs, self._categorical.logits
        super().__init__(self._categorical._batch_shape, (self._categorical._num_events,), validate_args)

    @property
    def mean(self):
        return self.probs

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def _sample(self, sample_shape):
        from .nn.functional import one_hot
        idx = self._categorical._sample(sample_shape)
        return one_hot(idx, self._categorical._num_events).to(self.probs.dtype)

    def log_prob(self, value):
        return self._categorical.log_prob(value.argmax(-1))

    def entropy(self):
        return self._categorical.entropy()


class Independent(Distribution):
    """base_distribution with its last reinterpreted_batch_ndims batch dims
    taken as event dims: log_prob and entropy sum over them."""

    def __init__(self, base_distribution, reinterpreted_batch_ndims, validate_args=None):
        n = reinterpreted_batch_ndims
        batch = base_distribution._batch_shape
        if n > len(batch):
            raise ValueError(f"[Independent] Expected reinterpreted_batch_ndims <= len(base_distribution."
                             f"batch_shape), actual {n} vs {len(batch)}")
        self.base_dist, self.reinterpreted_batch_ndims = base_distribution, n
        cut = len(batch) - n
        super().__init__(batch[:cut], batch[cut:] + base_distribution._event_shape, validate_args)
        self.has_rsample = base_distribution.has_rsample

    @property
    def mean(self):
        return self.base_dist.mean

    @property
    def variance(self):
        return self.base_dist.variance

    @property
    def mode(self):
        return self.base_dist.mode

    def sample(self, sample_shape=()):
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=()):
        return self.base_dist.rsample(sample_shape)

    def _sum_right(self, x):
        n = self.reinterpreted_batch_ndims
        return x.sum(tuple(range(-n, 0))) if n else x

    def log_prob(self, value):
        return self._sum_right(self.base_dist.log_prob(value))

    def entropy(self):
        return self._sum_right(self.base_dist.entropy())


# ---- KL divergence ----

_KL = {}


def register_kl(type_p, type_q):
    """Decorator: fn(p, q) computes KL(p || q) for these types."""
    def wrap(fn):
        _KL[(type_p, type_q)] = fn
        return fn
    return wrap


def kl_divergence(p, q):
    """KL(p || q), batched."""
    for tp in type(p).__mro__:
        for tq in type(q).__mro__:
            fn = _KL.get((tp, tq))
            if fn is not None:
                return fn(p, q)
    raise NotImplementedError(f"[kl_divergence] No KL(p || q) is implemented for p={type(p).__name__}, "
                              f"q={type(q).__name__}")


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale) ** 2
    t1 = ((p.loc - q.loc) / q.scale) ** 2
    return 0.5 * (var_ratio + t1 - 1 - _C.log(var_ratio))


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    from .nn.functional import softplus
    t1 = p.probs * (softplus(-q.logits) - softplus(-p.logits))
    t1 = _C.where(_C.eq(q.probs, 0), float("inf"), t1)
    t1 = _C.where(_C.eq(p.probs, 0), 0.0, t1)
    t2 = (1 - p.probs) * (softplus(q.logits) - softplus(p.logits))
    t2 = _C.where(_C.eq(q.probs, 1), float("inf"), t2)
    t2 = _C.where(_C.eq(p.probs, 1), 0.0, t2)
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = _C.where(_C.eq(q.probs, 0), float("inf"), t)
    t = _C.where(_C.eq(p.probs, 0), 0.0, t)
    return t.sum(-1)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = _C.log((q.high - q.low) / (p.high - p.low))
    outside = _C.logical_or(_C.gt(q.low, p.low), _C.lt(q.high, p.high))
    return _C.where(outside, float("inf"), result)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError("[kl_divergence] Independent distributions with different event dims")
    return p._sum_right(kl_divergence(p.base_dist, q.base_dist))


from ._distributions_more import *  # noqa: E402,F401,F403
from ._distributions_more import __all__ as _more  # noqa: E402
from ._dist_transforms import *  # noqa: E402,F401,F403
from ._dist_transforms import __all__ as _transformed  # noqa: E402
from ._dist_transforms import constraints, transforms, attach_constraints  # noqa: E402

from ._distributions_extra import *  # noqa: E402,F401,F403
from ._distributions_extra import __all__ as _extra  # noqa: E402

from ._distributions_rest import *  # noqa: E402,F401,F403
from ._distributions_rest import __all__ as _rest  # noqa: E402
from . import _dist_constraints  # noqa: E402,F401  (the rest of constraints)

__all__ += _more + _transformed + _extra + _rest + ["constraints", "transforms"]

# `import musa.distributions.transforms` and `from musa.distributions.constraints
# import ...`, as with torch's submodules
import sys as _sys  # noqa: E402
_sys.modules[__name__ + ".constraints"] = constraints
_sys.modules[__name__ + ".transforms"] = transforms
attach_constraints(_sys.modules[__name__])
from ._distributions_rest import alias_submodules as _alias  # noqa: E402
_alias(_sys.modules[__name__])
