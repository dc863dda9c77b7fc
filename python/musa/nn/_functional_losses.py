"""The rest of PyTorch's losses, activations and distances in
musa.nn.functional, as composites of differentiable ops. Re-exported by
musa.nn.functional."""
import math

from .. import _C
from .._functions import _int, _int_range, _number, _tensors

__all__ = ["softshrink", "hardshrink", "threshold", "threshold_", "prelu", "rrelu", "rrelu_", "glu",
           "relu_", "elu_", "leaky_relu_", "hardtanh_", "selu_", "celu_", "kl_div", "huber_loss",
           "margin_ranking_loss", "hinge_embedding_loss", "cosine_embedding_loss", "soft_margin_loss",
           "multilabel_soft_margin_loss", "multi_margin_loss", "multilabel_margin_loss", "triplet_margin_loss",
           "triplet_margin_with_distance_loss", "poisson_nll_loss", "gaussian_nll_loss", "pairwise_distance",
           "pdist", "gumbel_softmax", "channel_shuffle", "native_channel_shuffle"]


def _f():
    from . import functional
    return functional


# ---- activations ----

def softshrink(input, lambd=0.5):
    """x - lambd above lambd, x + lambd below -lambd, 0 between."""
    _tensors("softshrink", input=input)
    lambd = _number(lambd, "softshrink", "lambd")
    if lambd < 0:
        raise _C.InvalidArgumentError(f"[softshrink] lambda must be greater or equal to 0, but found to be {lambd}.")
    zero = _C.zeros_like(input)
    return _C.where(_C.gt(input, lambd), input - lambd, _C.where(_C.lt(input, -lambd), input + lambd, zero))


def hardshrink(input, lambd=0.5):
    """0 where -lambd <= x <= lambd, else x (so NaN, in x or lambd, keeps x,
    as in PyTorch)."""
    _tensors("hardshrink", input=input)
    lambd = _number(lambd, "hardshrink", "lambd")
    inside = _C.logical_and(_C.ge(input, -lambd), _C.le(input, lambd))
    return _C.where(inside, _C.zeros_like(input), input)


def threshold(input, threshold, value, inplace=False):
    """value where x <= threshold, else x: a NaN in x stays NaN, as in
    PyTorch (and relu). On integer tensors the threshold is first converted
    to the tensor's dtype (toward zero), as PyTorch does: int32 0 is not
    above -0.35, since that is 0 there."""
    _tensors("threshold", input=input)
    t, v = _number(threshold, "threshold", "threshold"), _number(value, "threshold", "value")
    if input.dtype == _C.bool:
        raise TypeError("[threshold] input of dtype bool is not supported (a number type is)")
    if not input.dtype.is_floating_point:
        lo, hi = _int_range(input.dtype)
        for what, x in (("threshold", t), ("value", v)):
            if not lo <= x <= hi:  # NaN too
                raise RuntimeError(f"[threshold] {what} {x} cannot be converted to {input.dtype} "
                                   f"without overflow")
        t = math.trunc(t)
    out = _C.where(_C.le(input, t), _C.full_like(input, v), input)
    return input.copy_(out) if inplace else out


def threshold_(input, threshold, value):
    return globals()["threshold"](input, threshold, value, True)


def prelu(input, weight):
    """max(0, x) + weight * min(0, x), weight per channel (dim 1) or one."""
    _tensors("prelu", input=input, weight=weight)
    if weight.numel() != 1:
        c = input.shape[1] if input.ndim >= 2 else input.shape[0] if input.ndim == 1 else 1
        if weight.ndim != 1 or weight.shape[0] != c:
            raise _C.InvalidArgumentError(f"[prelu] mismatch of parameter numbers and input channel size: "
                                          f"weight {tuple(weight.shape)}, input {tuple(input.shape)}")
        shape = [1] * input.ndim
        shape[1 if input.ndim >= 2 else 0] = c
        weight = weight.reshape(shape)
    else:
        weight = weight.reshape(())
    return _C.where(_C.gt(input, 0), input, weight * input)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Leaky ReLU with a slope drawn uniformly from [lower, upper] per
    element when training, their mean otherwise."""
    _tensors("rrelu", input=input)
    lower, upper = _number(lower, "rrelu", "lower"), _number(upper, "rrelu", "upper")
    if training:
        slope = _C.rand_like(input) * (upper - lower) + lower
    else:
        slope = (lower + upper) / 2
    out = _C.where(_C.ge(input, 0), input, input * slope)
    return input.copy_(out) if inplace else out


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, True)


def glu(input, dim=-1):
    """a * sigmoid(b) for the halves a, b of input along dim."""
    _tensors("glu", input=input)
    if input.ndim == 0:
        raise RuntimeError("[glu] glu does not support scalars because halving size must be even")
    from .._functions import _dim
    dim = _dim(dim, input.ndim, "glu")
    n = input.shape[dim]
    if n % 2:
        raise RuntimeError(f"[glu] Halving dimension must be even, but dimension {dim % input.ndim} is size {n}")
    a, b = input.narrow(dim, 0, n // 2), input.narrow(dim, n // 2, n // 2)
    return a * _C.sigmoid(b)


def _inplace(name, input, *args):
    """input overwritten by activation `name` of it. The public in-place
    forms below take PyTorch's signatures for them: the activation's own
    parameters and no `inplace`, so an extra positional argument is a
    TypeError rather than a flag."""
    _tensors(name + "_", input=input)
    return input.copy_(getattr(_f(), name)(input, *args))


def relu_(input):
    """In-place relu."""
    return _inplace("relu", input)


def leaky_relu_(input, negative_slope=0.01):
    """In-place leaky_relu."""
    return _inplace("leaky_relu", input, negative_slope)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    """In-place hardtanh."""
    return _inplace("hardtanh", input, min_val, max_val)


def selu_(input):
    """In-place selu."""
    return _inplace("selu", input)


def celu_(input, alpha=1.0):
    """In-place celu."""
    return _inplace("celu", input, alpha)


def elu_(input, alpha=1.0, scale=1.0, input_scale=1.0):
    """elu_(input, alpha=1., scale=1., input_scale=1.) -> Tensor

    In-place elu. As PyTorch's elu_ does, it also takes the scale of the
    output and of the negative branch's input (SELU's form): input for
    input > 0 times scale, else scale * alpha * (exp(input * input_scale) - 1)."""
    s, t = _number(scale, "elu_", "scale"), _number(input_scale, "elu_", "input_scale")
    if s == 1.0 and t == 1.0:
        return _inplace("elu", input, alpha)
    _tensors("elu_", input=input)
    a = _number(alpha, "elu_", "alpha")
    x = input.clone()  # what backward reads, kept from the overwrite
    return input.copy_(_f()._wide(lambda y: _C.where(y > 0, y * s, _C.expm1(y * t) * (a * s)), x))


# ---- losses ----

def _reduce(loss, reduction, name, size_average=None, reduce=None):
    F = _f()
    return F._reduce(loss, F._reduction(size_average, reduce, reduction), name)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """target * (log target - input), input holding log-probabilities
    (target too with log_target); 'batchmean' divides the sum by the batch."""
    _tensors("kl_div", input=input, target=target)
    if log_target:
        terms = _C.exp(target) * (target - input)
    else:
        from .._torch_ops import xlogy
        terms = xlogy(target, target) - target * input
    reduction = _f()._reduction(size_average, reduce, reduction)
    if reduction == "batchmean":
        return terms.sum() / (input.shape[0] if input.ndim else 1)
    return _reduce(terms, reduction, "kl_div")


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta)."""
    _tensors("huber_loss", input=input, target=target)
    if weight is not None:
        _tensors("huber_loss", weight=weight)
    delta = _number(delta, "huber_loss", "delta")
    if delta <= 0:
        raise _C.InvalidArgumentError(f"[huber_loss] delta must be positive, got {delta}")
    _f()._warn_size(input, target, "huber_loss")
    d = _C.abs(input - target)
    terms = _C.where(_C.lt(d, delta), 0.5 * d * d, delta * (d - 0.5 * delta))
    if weight is not None:
        terms = terms * weight
    return _reduce(terms, reduction, "huber_loss")


def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    """max(0, -target * (input1 - input2) + margin)."""
    _tensors("margin_ranking_loss", input1=input1, input2=input2, target=target)
    if input1.ndim != input2.ndim or input1.ndim != target.ndim:
        raise _C.InvalidArgumentError(f"[margin_ranking_loss] all input tensors should have the same number "
                                      f"of dims, got {tuple(input1.shape)}, {tuple(input2.shape)} and "
                                      f"{tuple(target.shape)}")
    terms = _C.relu(-target * (input1 - input2) + _number(margin, "margin_ranking_loss", "margin"))
    return _reduce(terms, reduction, "margin_ranking_loss", size_average, reduce)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """x where target is 1, max(0, margin - x) where it is -1."""
    _tensors("hinge_embedding_loss", input=input, target=target)
    margin = _number(margin, "hinge_embedding_loss", "margin")
    zero = _C.zeros_like(input)  # as PyTorch: a target that is neither 1 nor -1 takes both terms
    pos = _C.where(_C.ne(target, -1), input, zero)
    neg = _C.where(_C.ne(target, 1), _C.relu(margin - input), zero)
    return _reduce(pos + neg, reduction, "hinge_embedding_loss", size_average, reduce)


def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                          reduction="mean"):
    """1 - cos(x1, x2) for target 1, max(0, cos(x1, x2) - margin) for -1."""
    _tensors("cosine_embedding_loss", input1=input1, input2=input2, target=target)
    if input1.shape != input2.shape or input1.ndim not in (1, 2):
        raise _C.InvalidArgumentError(f"[cosine_embedding_loss] expected 1-D or 2-D inputs of one shape, got "
                                      f"{tuple(input1.shape)} and {tuple(input2.shape)}")
    eps = 1e-12
    dot = (input1 * input2).sum(-1)
    cos = dot / _C.sqrt(((input1 * input1).sum(-1) + eps) * ((input2 * input2).sum(-1) + eps))
    zero = _C.zeros_like(cos)
    margin = _number(margin, "cosine_embedding_loss", "margin")
    terms = _C.where(_C.eq(target, 1), 1 - cos, zero) + _C.where(_C.eq(target, -1), _C.relu(cos - margin), zero)
    return _reduce(terms, reduction, "cosine_embedding_loss", size_average, reduce)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-input * target)): the input is negated, not the target,
    which may be unsigned (uint8 2 negated is 254)."""
    _tensors("soft_margin_loss", input=input, target=target)
    return _reduce(_C.softplus(-input * target), reduction, "soft_margin_loss", size_average,
                   reduce)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction="mean"):
    """The mean over classes of the binary cross-entropy of sigmoid(input)."""
    _tensors("multilabel_soft_margin_loss", input=input, target=target)
    if weight is not None:
        _tensors("multilabel_soft_margin_loss", weight=weight)
    logsig = _f().logsigmoid
    terms = -(target * logsig(input) + (1 - target) * logsig(-input))
    if weight is not None:
        terms = terms * weight
    # the sum over input's last dim, counted from the front (PyTorch's
    # class_dim = input.dim() - 1), over input's class count: a target that
    # broadcasts input wider still sums input's classes (fuzz-py seed 4168:
    # a (2,) input with a (0, 1) target summed the empty dim, and its mean
    # was NaN where torch's is 0)
    terms = terms.sum(input.ndim - 1) / input.shape[-1] if input.ndim else terms
    return _reduce(terms, reduction, "multilabel_soft_margin_loss", size_average, reduce)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    """sum_{i != y} max(0, margin - x[y] + x[i])^p / C, per sample."""
    _tensors("multi_margin_loss", input=input, target=target)
    if weight is not None:
        _tensors("multi_margin_loss", weight=weight)
    p = _int(p, "multi_margin_loss", "p")
    if p not in (1, 2):
        raise ValueError(f"[multi_margin_loss] only p == 1 and p == 2 supported, got {p}")
    x = input.unsqueeze(0) if input.ndim == 1 else input
    y = target.reshape(-1)
    if x.ndim != 2 or y.shape[0] != x.shape[0]:
        raise _C.InvalidArgumentError(f"[multi_margin_loss] expected input (N, C) and target (N,), got "
                                      f"{tuple(input.shape)} and {tuple(target.shape)}")
    c = x.shape[1]
    picked = x.gather(1, y.unsqueeze(1))
    terms = _C.relu(_number(margin, "multi_margin_loss", "margin") - picked + x)
    if p == 2:
        terms = terms * terms
    if weight is not None:
        terms = terms * weight.index_select(0, y).unsqueeze(1)
    own = _C.eq(_C.arange(c).unsqueeze(0), y.unsqueeze(1))
    terms = _C.where(own, _C.zeros_like(terms), terms).sum(1) / c
    if input.ndim == 1:
        terms = terms.squeeze(0)
    return _reduce(terms, reduction, "multi_margin_loss", size_average, reduce)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """sum over target classes j (those before the first -1 in target) and
    non-target classes i of max(0, 1 - (x[j] - x[i])), over C."""
    _tensors("multilabel_margin_loss", input=input, target=target)
    x = input.unsqueeze(0) if input.ndim == 1 else input
    t = target.unsqueeze(0) if target.ndim == 1 else target
    if x.shape != t.shape or x.ndim != 2:
        raise _C.InvalidArgumentError(f"[multilabel_margin_loss] expected input and target of one shape "
                                      f"(C) or (N, C), got {tuple(input.shape)} and {tuple(target.shape)}")
    n, c = x.shape
    # the targets are the entries before the first -1
    valid = _C.eq(_C.cumsum(_C.eq(t, -1).long(), 1), 0)
    safe = _C.where(valid, t, _C.zeros_like(t))
    is_target = _C.zeros(n, c, dtype=x.dtype).scatter_add(1, safe, valid.to(x.dtype)).gt(0)
    xj = x.gather(1, safe)  # (N, C): the target classes' scores (masked by valid)
    margins = _C.relu(1 - (xj.unsqueeze(2) - x.unsqueeze(1)))  # (N, j, i)
    keep = _C.logical_and(valid.unsqueeze(2), _C.logical_not(is_target).unsqueeze(1))
    terms = _C.where(keep, margins, _C.zeros_like(margins)).sum((1, 2)) / c
    if input.ndim == 1:
        terms = terms.squeeze(0)
    return _reduce(terms, reduction, "multilabel_margin_loss", size_average, reduce)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """The p-norm of x1 - x2 + eps along the last dim."""
    _tensors("pairwise_distance", x1=x1, x2=x2)
    p = _number(p, "pairwise_distance", "p")
    d = x1 - x2 + _number(eps, "pairwise_distance", "eps")
    if d.ndim == 0:
        return _C.abs(d) if p else (d != 0).to(d.dtype)
    return _C.norm(d, p, -1, keepdim)


def pdist(input, p=2):
    """The p-norm distances between the rows of a 2-D input, for i < j."""
    _tensors("pdist", input=input)
    if input.ndim != 2:
        raise RuntimeError(f"[pdist] only supports 2D tensors, got: {input.ndim}D")
    n = input.shape[0]
    if n < 2:
        return _C.zeros(0, dtype=input.dtype)
    from .._torch_ops import triu_indices
    i, j = triu_indices(n, n, 1)
    diff = input.index_select(0, i) - input.index_select(0, j)
    return _C.norm(diff, _number(p, "pdist", "p"), -1)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    """max(0, d(a, p) - d(a, n) + margin), d the pairwise p-distance (with
    swap, d(a, n) is the smaller of d(a, n) and d(p, n))."""
    _tensors("triplet_margin_loss", anchor=anchor, positive=positive, negative=negative)
    if not (anchor.ndim == positive.ndim == negative.ndim) or anchor.ndim not in (1, 2):
        raise _C.InvalidArgumentError(f"[triplet_margin_loss] expected 1-D or 2-D inputs of one rank, got "
                                      f"{tuple(anchor.shape)}, {tuple(positive.shape)}, {tuple(negative.shape)}")
    pos = pairwise_distance(anchor, positive, p, eps)
    neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        neg = _C.minimum(neg, pairwise_distance(positive, negative, p, eps))
    terms = _C.relu(pos - neg + _number(margin, "triplet_margin_loss", "margin"))
    return _reduce(terms, reduction, "triplet_margin_loss", size_average, reduce)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0,
                                      swap=False, reduction="mean"):
    _tensors("triplet_margin_with_distance_loss", anchor=anchor, positive=positive, negative=negative)
    dist = distance_function or pairwise_distance
    if not callable(dist):
        raise TypeError(f"[triplet_margin_with_distance_loss] distance_function must be callable, got "
                        f"{type(dist).__name__}")
    pos, neg = dist(anchor, positive), dist(anchor, negative)
    if swap:
        neg = _C.minimum(neg, dist(positive, negative))
    margin = _number(margin, "triplet_margin_with_distance_loss", "margin")
    if margin <= 0:
        raise ValueError(f"[triplet_margin_with_distance_loss] margin must be greater than 0, got {margin}")
    return _reduce(_C.relu(pos - neg + margin), reduction, "triplet_margin_with_distance_loss")


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    """exp(input) - target * input (log_input), or input - target *
    log(input + eps); full adds Stirling's term for target > 1."""
    _tensors("poisson_nll_loss", input=input, target=target)
    if log_input:
        terms = _C.exp(input) - target * input
    else:
        terms = input - target * _C.log(input + _number(eps, "poisson_nll_loss", "eps"))
    if full:
        stirling = target * _C.log(target) - target + 0.5 * _C.log(2 * math.pi * target)
        terms = terms + _C.where(_C.gt(target, 1), stirling, _C.zeros_like(stirling))
    return _reduce(terms, reduction, "poisson_nll_loss", size_average, reduce)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 (log var + (input - target)^2 / var) (+ 0.5 log 2 pi with full),
    var clamped to at least eps (without a gradient through the clamp)."""
    _tensors("gaussian_nll_loss", input=input, target=target)
    if not isinstance(var, _C.Tensor):
        var = _C.full_like(input, _number(var, "gaussian_nll_loss", "var"))
    if var.ndim == input.ndim - 1 and tuple(var.shape) == tuple(input.shape[:-1]):
        var = var.unsqueeze(-1)
    elif var.shape != input.shape and not (var.ndim == input.ndim and var.shape[-1] == 1
                                           and tuple(var.shape[:-1]) == tuple(input.shape[:-1])):
        raise ValueError(f"[gaussian_nll_loss] var is of incorrect size {tuple(var.shape)} for input "
                         f"{tuple(input.shape)}")
    if bool(_C.lt(var, 0).any()):
        raise ValueError("[gaussian_nll_loss] var has negative entry/entries")
    eps = _number(eps, "gaussian_nll_loss", "eps")
    from ..autograd import no_grad
    with no_grad():
        floor = _C.clamp(var, min=eps) - var  # the clamp's offset, constant for the gradient
    v = var + floor
    terms = 0.5 * (_C.log(v) + (input - target) ** 2 / v)
    if full:
        terms = terms + 0.5 * math.log(2 * math.pi)
    return _reduce(terms, reduction, "gaussian_nll_loss")


# ---- sampling and shuffles ----

def gumbel_softmax(logits, tau=1.0, hard=False, eps=1e-10, dim=-1):
    """softmax((logits + Gumbel noise) / tau); with hard, the one-hot argmax
    in the forward pass and the soft sample's gradient."""
    _tensors("gumbel_softmax", logits=logits)
    tau = _number(tau, "gumbel_softmax", "tau")
    u = _C.rand_like(logits)
    gumbels = -_C.log(-_C.log(u + 1e-20) + 1e-20)
    y = _C.softmax((logits + gumbels) / tau, dim)
    if not hard:
        return y
    if y.ndim == 0:  # one element: its one-hot is 1
        return _C.ones_like(y) - y.detach() + y
    index = y.argmax(dim, keepdim=True)
    one_hot = _C.zeros_like(y).scatter(dim % y.ndim, index, _C.ones_like(index, dtype=y.dtype))
    return one_hot - y.detach() + y


def channel_shuffle(input, groups):
    """(N, g*c, *) -> channels regrouped as (c, g)."""
    _tensors("channel_shuffle", input=input)
    g = _int(groups, "channel_shuffle", "groups")
    if input.ndim < 3:
        raise RuntimeError(f"[channel_shuffle] expects input to have at least 3 dimensions, but got input with "
                           f"{input.ndim} dimension(s)")
    c = input.shape[1]
    if g <= 0 or c % g:
        raise RuntimeError(f"[channel_shuffle] number of channels ({c}) must be divisible by groups ({g})")
    n, rest = input.shape[0], list(input.shape[2:])
    return input.reshape([n, g, c // g] + rest).transpose(1, 2).reshape([n, c] + rest)


native_channel_shuffle = channel_shuffle
