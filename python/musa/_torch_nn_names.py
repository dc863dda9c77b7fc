"""torch's top-level spellings of nn.functional (torch.conv2d,
torch.layer_norm, torch.dropout, ...), with the signatures PyTorch gives
them there: some differ from F's (torch.dropout(input, p, train),
torch.embedding(weight, indices), torch.batch_norm's argument order, the
losses' integer reductions 0 none, 1 mean, 2 sum, and none by default, as
PyTorch 1.13's top-level losses return them). musa.nn is imported on the
first call, so `import musa` stays light."""

__all__ = [
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "avg_pool1d", "max_pool1d", "max_pool2d", "max_pool3d", "max_pool1d_with_indices",
    "adaptive_avg_pool1d", "adaptive_max_pool1d", "pixel_shuffle", "pixel_unshuffle",
    "channel_shuffle", "cosine_similarity", "pairwise_distance", "pdist", "selu", "celu", "prelu",
    "rrelu", "threshold", "hardshrink", "bilinear", "dropout", "alpha_dropout",
    "feature_alpha_dropout", "feature_dropout", "layer_norm", "group_norm", "batch_norm",
    "instance_norm", "embedding", "kl_div", "binary_cross_entropy_with_logits",
    "margin_ranking_loss", "hinge_embedding_loss", "cosine_embedding_loss",
    "triplet_margin_loss", "poisson_nll_loss", "ctc_loss", "constant_pad_nd",
]


def _F():
    from .nn import functional
    return functional


def _same(name):
    """F.<name> under its top-level name (the same signature)."""
    def fn(*args, **kwargs):
        return getattr(_F(), name)(*args, **kwargs)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"torch.{name}: musa.nn.functional.{name}."
    return fn


for _name in ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "avg_pool1d", "max_pool1d", "max_pool2d", "max_pool3d",
              "adaptive_avg_pool1d", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle",
              "cosine_similarity", "pairwise_distance", "pdist", "selu", "celu", "prelu", "rrelu",
              "threshold", "hardshrink", "bilinear"):
    globals()[_name] = _same(_name)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False):
    return _F().max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode,
                           return_indices=True)


def adaptive_max_pool1d(input, output_size):
    """(values, indices), as torch's top-level function returns them."""
    return _F().adaptive_max_pool1d(input, output_size, return_indices=True)


def dropout(input, p, train):
    return _F().dropout(input, p, training=train)


def alpha_dropout(input, p, train):
    return _F().alpha_dropout(input, p, training=train)


def feature_alpha_dropout(input, p, train):
    return _F().feature_alpha_dropout(input, p, training=train)


def feature_dropout(input, p, train):
    """Whole channels dropped (dim 1 of a (N, C, ...) input): dropout2d's rule."""
    return _F().dropout2d(input, p, training=train)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):
    return _F().layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    return _F().group_norm(input, num_groups, weight, bias, eps)


def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
               cudnn_enabled=True):
    return _F().batch_norm(input, running_mean, running_var, weight, bias, training, momentum,
                           eps)


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps,
                  cudnn_enabled=True):
    return _F().instance_norm(input, running_mean, running_var, weight, bias, use_input_stats,
                              momentum, eps)


def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """F.embedding(indices, weight): the arguments the other way round, and
    padding_idx -1 for none, as torch's top-level function takes them."""
    if padding_idx is not None:
        from ._functions import _int
        padding_idx = _int(padding_idx, "embedding", "padding_idx")
    return _F().embedding(indices, weight,
                          padding_idx=None if padding_idx is None or padding_idx < 0 else padding_idx,
                          scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _reduction(who, r):
    if isinstance(r, str) and r in _REDUCTIONS.values():
        return r
    if not isinstance(r, int) or isinstance(r, bool) or r not in _REDUCTIONS:
        raise ValueError(f"[{who}] reduction must be 0 (none), 1 (mean) or 2 (sum), got {r!r}")
    return _REDUCTIONS[r]


def kl_div(input, target, reduction=0, log_target=False):
    return _F().kl_div(input, target, reduction=_reduction("kl_div", reduction),
                       log_target=log_target)


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, reduction=0):
    return _F().binary_cross_entropy_with_logits(
        input, target, weight, reduction=_reduction("binary_cross_entropy_with_logits", reduction),
        pos_weight=pos_weight)


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=0):
    return _F().margin_ranking_loss(input1, input2, target, margin,
                                    reduction=_reduction("margin_ranking_loss", reduction))


def hinge_embedding_loss(input, target, margin=1.0, reduction=0):
    return _F().hinge_embedding_loss(input, target, margin,
                                     reduction=_reduction("hinge_embedding_loss", reduction))


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=0):
    return _F().cosine_embedding_loss(input1, input2, target, margin,
                                      reduction=_reduction("cosine_embedding_loss", reduction))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        reduction=0):
    return _F().triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                    reduction=_reduction("triplet_margin_loss", reduction))


def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    return _F().poisson_nll_loss(input, target, log_input, full, eps=eps,
                                 reduction=_reduction("poisson_nll_loss", reduction))


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=0,
             zero_infinity=False):
    return _F().ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
                         reduction=_reduction("ctc_loss", reduction), zero_infinity=zero_infinity)


def constant_pad_nd(input, pad, value=0):
    return _F().pad(input, pad, "constant", value)
