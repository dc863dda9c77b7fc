"""Parameter initialisations (PyTorch's torch.nn.init).

Every function fills its tensor in place under no_grad and returns it, so it
works on parameters that require grad. Random ones draw from the musa
generator (musa.manual_seed).
"""
import math
import warnings

from .. import _C
from ..autograd import no_grad


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (PyTorch's values)."""
    return _gain(nonlinearity, param, "calculate_gain")


def _gain(nonlinearity, param, who):
    """calculate_gain, with errors naming who (the function the user called)."""
    if nonlinearity in ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                        "conv_transpose3d", "sigmoid"):
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"[{who}] negative_slope {param!r} is not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"[{who}] unsupported nonlinearity {nonlinearity!r}")


def _calculate_fan_in_and_fan_out(tensor, who="_calculate_fan_in_and_fan_out"):
    """(fan_in, fan_out) of a weight shaped (out, in, *kernel); errors name who."""
    if tensor.ndim < 2:
        raise ValueError(f"[{who}] Fan in and fan out can not be computed for tensor with fewer than "
                         f"2 dimensions (got shape {tuple(tensor.shape)})")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor, mode, who):
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"[{who}] Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor, who)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor, a=0.0, b=1.0):
    """Fill with values drawn from U(a, b)."""
    with no_grad():
        return tensor.uniform_(a, b)


def normal_(tensor, mean=0.0, std=1.0):
    """Fill with values drawn from N(mean, std^2)."""
    with no_grad():
        return tensor.normal_(mean, std)


def constant_(tensor, val):
    with no_grad():
        return tensor.fill_(val)


def ones_(tensor):
    return constant_(tensor, 1.0)


def zeros_(tensor):
    return constant_(tensor, 0.0)


def eye_(tensor):
    """Fill a 2-D tensor with the identity (ones on the main diagonal)."""
    if tensor.ndim != 2:
        raise ValueError(f"[eye_] only tensors with 2 dimensions are supported, "
                         f"got shape {tuple(tensor.shape)}")
    with no_grad():
        return tensor.copy_(_C.eye(*tensor.shape, dtype=tensor.dtype))


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0):
    """Fill with values drawn from N(mean, std^2) restricted to [a, b]: the
    draws outside are drawn again until none is (exactly the truncated
    distribution; each round keeps P(a <= x <= b) of what is left)."""
    mean, std = float(mean), float(std)
    a, b = float(a), float(b)
    if not a < b:
        raise ValueError(f"[trunc_normal_] expected a < b, got a={a} and b={b}")
    if std < 0:
        raise ValueError(f"[trunc_normal_] std must be non-negative, got {std}")
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution of "
                      "values may be incorrect.", stacklevel=2)
    with no_grad():
        if tensor.numel() == 0:
            return tensor
        draw = _C.randn(*tensor.shape, dtype=_C.float64) * std + mean
        inside = draw.ge(a).logical_and(draw.le(b))
        for _ in range(1000):
            if bool(inside.all()):
                break
            fresh = _C.randn(*tensor.shape, dtype=_C.float64) * std + mean
            draw = _C.where(inside, draw, fresh)
            inside = draw.ge(a).logical_and(draw.le(b))
        else:  # [a, b] holds almost none of the distribution: the nearest bound
            draw = _C.where(inside, draw, _C.clamp(draw, a, b))
        return tensor.copy_(draw)


def dirac_(tensor, groups=1):
    """Fill a 3-, 4- or 5-D convolution weight with the identity: each of the
    first out_channels/groups outputs of a group copies its input channel."""
    if tensor.ndim not in (3, 4, 5):
        raise ValueError(f"[dirac_] only tensors with 3, 4, or 5 dimensions are supported, got shape "
                         f"{tuple(tensor.shape)}")
    if isinstance(groups, bool) or not isinstance(groups, int) or groups <= 0 or tensor.shape[0] % groups:
        raise ValueError(f"[dirac_] dim 0 ({tensor.shape[0]}) must be divisible by groups ({groups})")
    out_per_group = tensor.shape[0] // groups
    n = min(out_per_group, tensor.shape[1])
    centre = tuple(k // 2 for k in tensor.shape[2:])
    with no_grad():
        tensor.zero_()
        for g in range(groups):
            for d in range(n):
                tensor[(g * out_per_group + d, d) + centre] = 1
    return tensor


def xavier_uniform_(tensor, gain=1.0):
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor, "xavier_uniform_")
    a = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a)


def xavier_normal_(tensor, gain=1.0):
    """N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out)) (Glorot)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor, "xavier_normal_")
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)))


def _kaiming_std(tensor, a, mode, nonlinearity, who):
    return _gain(nonlinearity, a, who) / math.sqrt(_calculate_correct_fan(tensor, mode, who))


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    """U(-b, b) with b = gain * sqrt(3 / fan) (He)."""
    if tensor.numel() == 0:
        return tensor
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity, "kaiming_uniform_")
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    """N(0, std^2) with std = gain / sqrt(fan) (He)."""
    if tensor.numel() == 0:
        return tensor
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity, "kaiming_normal_"))


def orthogonal_(tensor, gain=1.0):
    """Fill with a (semi-)orthogonal matrix: the Q of the QR decomposition of
    a normal matrix, signs fixed so the result is uniformly distributed."""
    import numpy as np
    if tensor.ndim < 2:
        raise ValueError(f"[orthogonal_] only tensors with 2 or more dimensions are supported, "
                         f"got shape {tuple(tensor.shape)}")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = _C.randn(rows, cols, dtype=_C.float64).numpy()
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    with no_grad():
        return tensor.copy_(_C.tensor(q * gain).reshape(tensor.shape))


def _deprecated(fn):
    """PyTorch's old spellings without the underscore, which warn."""
    name = fn.__name__[:-1]

    def old(*args, **kwargs):
        warnings.warn(f"nn.init.{name} is now deprecated in favor of nn.init.{fn.__name__}.",
                      FutureWarning, stacklevel=2)
        return fn(*args, **kwargs)
    old.__name__ = old.__qualname__ = name
    old.__doc__ = f"Deprecated: {fn.__name__}."
    return old


uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
eye = _deprecated(eye_)
dirac = _deprecated(dirac_)
