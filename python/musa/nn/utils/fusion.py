"""torch.nn.utils.fusion: fold an eval-mode BatchNorm into the convolution
or linear layer before it (w' = w * gamma / sqrt(var + eps), b' = (b -
mean) * gamma / sqrt(var + eps) + beta), for inference."""
import copy

from ... import _C
from ..parameter import Parameter

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights"]


def _bn_defaults(bn_rm, bn_w, bn_b):
    return (_C.ones_like(bn_rm) if bn_w is None else bn_w, _C.zeros_like(bn_rm) if bn_b is None else bn_b)


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """The fused convolution's (weight, bias) Parameters; transpose: the
    weight's output channels are dim 1 (transposed convolutions)."""
    conv_b = _C.zeros_like(bn_rm) if conv_b is None else conv_b
    bn_w, bn_b = _bn_defaults(bn_rm, bn_w, bn_b)
    scale = bn_w * _C.rsqrt(bn_rv + bn_eps)
    shape = ([1, -1] if transpose else [-1, 1]) + [1] * (conv_w.ndim - 2)
    return (Parameter(conv_w * scale.reshape(shape)), Parameter((conv_b - bn_rm) * scale + bn_b))


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    linear_b = _C.zeros_like(bn_rm) if linear_b is None else linear_b
    bn_w, bn_b = _bn_defaults(bn_rm, bn_w, bn_b)
    scale = bn_w * _C.rsqrt(bn_rv + bn_eps)
    return Parameter(linear_w * scale.unsqueeze(-1)), Parameter((linear_b - bn_rm) * scale + bn_b)


def _eval_pair(who, layer, bn):
    if layer.training or bn.training:
        raise AssertionError(f"[{who}] Fusion only for eval!")
    if bn.running_mean is None:
        raise ValueError(f"[{who}] the batch norm must track running statistics")


def fuse_conv_bn_eval(conv, bn, transpose=False):
    """A copy of conv with bn folded in (both in eval mode)."""
    _eval_pair("fuse_conv_bn_eval", conv, bn)
    fused = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(fused.weight.detach(), None if fused.bias is None
                                                    else fused.bias.detach(), bn.running_mean, bn.running_var,
                                                    bn.eps, bn.weight, bn.bias, transpose)
    return fused


def fuse_linear_bn_eval(linear, bn):
    """A copy of linear with bn (over its outputs) folded in."""
    _eval_pair("fuse_linear_bn_eval", linear, bn)
    if linear.out_features != bn.num_features:
        raise AssertionError("[fuse_linear_bn_eval] To fuse, linear.out_features must equal bn.num_features")
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(fused.weight.detach(), None if fused.bias is None
                                                      else fused.bias.detach(), bn.running_mean,
                                                      bn.running_var, bn.eps, bn.weight, bn.bias)
    return fused
