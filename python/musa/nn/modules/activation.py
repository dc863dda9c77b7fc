"""Activation layers, Softmax/LogSoftmax, and MultiheadAttention."""
import math

from ... import _C
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .linear import NonDynamicallyQuantizableLinear
from .module import Module


def _inplace_str(inplace, first=False):
    if not inplace:
        return ""
    return "inplace=True" if first else ", inplace=True"


class _InplaceActivation(Module):
    """An activation whose only setting is inplace."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def extra_repr(self):
        return _inplace_str(self.inplace, True)


class ReLU(_InplaceActivation):
    def forward(self, input):
        return F.relu(input, self.inplace)


class SiLU(_InplaceActivation):
    """x * sigmoid(x)."""

    def forward(self, input):
        return F.silu(input, self.inplace)


class LeakyReLU(Module):
    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + _inplace_str(self.inplace)


class ELU(Module):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}" + _inplace_str(self.inplace)


class GELU(Module):
    """x * Phi(x); approximate='tanh' uses the tanh approximation."""

    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class Softplus(Module):
    """log(1 + exp(beta x)) / beta, linear above threshold."""

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class Hardtanh(Module):
    """clamp(x, min_val, max_val)."""

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        if min_val > max_val:
            raise ValueError(f"[Hardtanh] min_val ({min_val}) cannot be greater than max_val ({max_val})")
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}" + _inplace_str(self.inplace)


class ReLU6(Hardtanh):
    """clamp(x, 0, 6)."""

    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self):
        return _inplace_str(self.inplace, True)


class Sigmoid(Module):
    def forward(self, input):
        return _C.sigmoid(input)


class Tanh(Module):
    def forward(self, input):
        return _C.tanh(input)


class CELU(Module):
    """max(0, x) + min(0, alpha (exp(x / alpha) - 1))."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):
        return F.celu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}" + _inplace_str(self.inplace)


class SELU(_InplaceActivation):
    def forward(self, input):
        return F.selu(input, self.inplace)


class Mish(_InplaceActivation):
    """x tanh(softplus(x))."""

    def forward(self, input):
        return F.mish(input, self.inplace)


class Hardswish(_InplaceActivation):
    def forward(self, input):
        return F.hardswish(input, self.inplace)


class Hardsigmoid(_InplaceActivation):
    def forward(self, input):
        return F.hardsigmoid(input, self.inplace)


class LogSigmoid(Module):
    def forward(self, input):
        return F.logsigmoid(input)


class Softsign(Module):
    def forward(self, input):
        return F.softsign(input)


class Tanhshrink(Module):
    def forward(self, input):
        return F.tanhshrink(input)


class _DimActivation(Module):
    """An activation along one dim."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmax(_DimActivation):
    def forward(self, input):
        return F.softmax(input, self.dim)


class Softmin(_DimActivation):
    """softmax(-x) along dim."""

    def forward(self, input):
        return F.softmin(input, self.dim)


class LogSoftmax(_DimActivation):
    """log(softmax(x)) along dim, computed stably."""

    def forward(self, input):
        return F.log_softmax(input, self.dim)


def _pad_mask(mask):
    """mask (..., S) with a zero (allowed) column appended: (..., S + 1)."""
    if mask is None:
        return None
    return _C.cat([mask, _C.zeros(tuple(mask.shape[:-1]) + (1,), dtype=mask.dtype)], -1)


class MultiheadAttention(Module):
    """Attention with num_heads heads over embed_dim features (PyTorch's
    parameters: in_proj_weight (3E, E) or q/k/v_proj_weight when kdim or
    vdim differ, in_proj_bias (3E), out_proj). Inputs are (L, N, E), or
    (N, L, E) when batch_first, or unbatched (L, E). In the masks, True or
    -inf forbids attention."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        super().__init__()
        if num_heads <= 0 or embed_dim % num_heads:
            raise ValueError(f"[MultiheadAttention] embed_dim ({embed_dim}) must be divisible by num_heads "
                             f"({num_heads})")
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads

        def param(*shape):
            return Parameter(_C.empty(shape, device=device, dtype=dtype))

        if self._qkv_same_embed_dim:
            self.in_proj_weight = param(3 * embed_dim, embed_dim)
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = param(embed_dim, embed_dim)
            self.k_proj_weight = param(embed_dim, self.kdim)
            self.v_proj_weight = param(embed_dim, self.vdim)
            self.register_parameter("in_proj_weight", None)
        self.register_parameter("in_proj_bias", param(3 * embed_dim) if bias else None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, device=device,
                                                        dtype=dtype)
        if add_bias_kv:
            self.bias_k, self.bias_v = param(1, 1, embed_dim), param(1, 1, embed_dim)
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        """xavier_uniform_ projections, zero biases, xavier_normal_ bias_k/v."""
        for w in (self.in_proj_weight, self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
            if w is not None:
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        for b in (self.bias_k, self.bias_v):
            if b is not None:
                init.xavier_normal_(b)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True):
        """(output like query, weights (N, L, S) -- or (N, H, L, S) unless
        average_attn_weights -- or None unless need_weights)."""
        batched = query.ndim == 3
        self_attention = query is key and key is value
        if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
            raise ValueError(f"[MultiheadAttention] query, key and value must all be 2-D (unbatched) or 3-D, "
                             f"got shapes {tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
        if not batched:
            query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif not self.batch_first:
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        if self_attention:  # lets _projections use one GEMM
            key = value = query
        out, weights = self._attend(query, key, value, key_padding_mask, attn_mask)
        if need_weights:
            weights = weights.mean(1) if average_attn_weights else weights
            weights = weights if batched else weights.squeeze(0)
        else:
            weights = None
        if not batched:
            out = out.squeeze(0)
        elif not self.batch_first:
            out = out.transpose(0, 1)
        return out, weights

    def _projections(self, query, key, value):
        e = self.embed_dim
        b_q, b_k, b_v = self.in_proj_bias.chunk(3) if self.in_proj_bias is not None else (None,) * 3
        if not self._qkv_same_embed_dim:
            return (F.linear(query, self.q_proj_weight, b_q), F.linear(key, self.k_proj_weight, b_k),
                    F.linear(value, self.v_proj_weight, b_v))
        if query is key and key is value:  # self-attention: one GEMM
            return F.linear(query, self.in_proj_weight, self.in_proj_bias).chunk(3, -1)
        w_q, w_k, w_v = self.in_proj_weight[:e], self.in_proj_weight[e:2 * e], self.in_proj_weight[2 * e:]
        return F.linear(query, w_q, b_q), F.linear(key, w_k, b_k), F.linear(value, w_v, b_v)

    def _check(self, query, key, value, key_padding_mask, attn_mask):
        (n, length, e), (kn, s, _), (vn, vs, _) = query.shape, key.shape, value.shape
        if e != self.embed_dim:
            raise ValueError(f"[MultiheadAttention] query has {e} features, "
                             f"expected embed_dim={self.embed_dim}")
        if (kn, s) != (vn, vs) or kn != n or key.shape[2] != self.kdim or value.shape[2] != self.vdim:
            raise ValueError(f"[MultiheadAttention] key {tuple(key.shape)} and value {tuple(value.shape)} "
                             f"do not match query {tuple(query.shape)} (kdim={self.kdim}, vdim={self.vdim})")
        if key_padding_mask is not None and tuple(key_padding_mask.shape) != (n, s):
            raise ValueError(f"[MultiheadAttention] key_padding_mask of shape "
                             f"{tuple(key_padding_mask.shape)}, expected {(n, s)}")
        allowed = ((length, s), (n * self.num_heads, length, s))
        if attn_mask is not None and tuple(attn_mask.shape) not in allowed:
            raise ValueError(f"[MultiheadAttention] attn_mask of shape {tuple(attn_mask.shape)}, expected "
                             f"{(length, s)} or {(n * self.num_heads, length, s)}")

    def _attend(self, query, key, value, key_padding_mask, attn_mask):
        """Batch-first attention: (output (N, L, E), weights (N, H, L, S))."""
        self._check(query, key, value, key_padding_mask, attn_mask)
        n, length, e = query.shape
        h, d = self.num_heads, self.head_dim
        q, k, v = self._projections(query, key, value)
        if self.bias_k is not None:
            k = _C.cat([k, self.bias_k.expand(n, 1, e)], 1)
            v = _C.cat([v, self.bias_v.expand(n, 1, e)], 1)
            attn_mask, key_padding_mask = _pad_mask(attn_mask), _pad_mask(key_padding_mask)
        q, k, v = (t.reshape(n, t.shape[1], h, d).transpose(1, 2) for t in (q, k, v))  # (N, H, *, D)
        if self.add_zero_attn:
            zeros = _C.zeros((n, h, 1, d), dtype=k.dtype)
            k, v = _C.cat([k, zeros], 2), _C.cat([v, zeros], 2)
            attn_mask, key_padding_mask = _pad_mask(attn_mask), _pad_mask(key_padding_mask)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))  # (N, H, L, S)
        if attn_mask is not None:
            if attn_mask.ndim == 3:
                attn_mask = attn_mask.reshape(n, h, length, attn_mask.shape[-1])
            scores = F._mask_scores(scores, attn_mask, False, "MultiheadAttention")
        if key_padding_mask is not None:
            padding = key_padding_mask.reshape(n, 1, 1, key_padding_mask.shape[-1])
            scores = F._mask_scores(scores, padding, False, "MultiheadAttention")
        attn = F.dropout(_C.softmax(scores, -1), self.dropout, self.training and self.dropout > 0)
        out = (attn @ v).transpose(1, 2).reshape(n, length, e)
        return F.linear(out, self.out_proj.weight, self.out_proj.bias), attn


class Softshrink(Module):
    """x - lambd above lambd, x + lambd below -lambd, 0 between."""

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return F.softshrink(input, self.lambd)

    def extra_repr(self):
        return str(self.lambd)


class Hardshrink(Softshrink):
    """x where |x| > lambd, else 0."""

    def forward(self, input):
        return F.hardshrink(input, self.lambd)


class Threshold(Module):
    """x where x > threshold, else value."""

    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        return f"threshold={self.threshold}, value={self.value}" + _inplace_str(self.inplace)


class PReLU(Module):
    """max(0, x) + a * min(0, x) with a learnt slope a (one, or one per
    channel)."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(_C.full((num_parameters,), float(init), dtype=dtype or _C.get_default_dtype()))

    def reset_parameters(self):
        init.constant_(self.weight, self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class RReLU(Module):
    """Leaky ReLU with a random slope in [lower, upper] when training."""

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}" + _inplace_str(self.inplace)


class GLU(Module):
    """a * sigmoid(b) for the halves of the input along dim."""

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmax2d(Module):
    """Softmax over the channels of (N, C, H, W) or (C, H, W)."""

    def forward(self, input):
        if input.ndim not in (3, 4):
            raise ValueError(f"[Softmax2d] Softmax2d: expected input to be 3D or 4D, got {input.ndim}D instead")
        return F.softmax(input, -3)


class ChannelShuffle(Module):
    """Regroup (N, g*c, *) channels as (c, g)."""

    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"
