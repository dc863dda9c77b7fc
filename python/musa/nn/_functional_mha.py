"""F.multi_head_attention_forward, as torch's: the attention of
nn.MultiheadAttention given its weights as arguments (inputs (L, N, E) or
unbatched (L, E)); it runs MultiheadAttention's own code on a holder of
those weights, so the two cannot drift apart."""
import operator

__all__ = ["multi_head_attention_forward"]


class _Weights:
    """What MultiheadAttention's forward reads from self, given as values."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    @property
    def out_proj(self):
        return self


def _bind():  # on first use: nn.modules imports this package's functional
    if not hasattr(_Weights, "forward"):
        from .modules.activation import MultiheadAttention as M
        for name in ("forward", "_attend", "_check", "_projections"):
            setattr(_Weights, name, getattr(M, name))


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight,
                                 in_proj_bias, bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight,
                                 out_proj_bias, training=True, key_padding_mask=None, need_weights=True,
                                 attn_mask=None, use_separate_proj_weight=False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None, static_v=None,
                                 average_attn_weights=True):
    """(output, weights or None): multi-head attention of query over
    key/value (sequence-first) with the given projections."""
    if static_k is not None or static_v is not None:
        raise NotImplementedError("[multi_head_attention_forward] static_k and static_v are not supported")
    from .. import Tensor
    given = dict(query=query, key=key, value=value, in_proj_weight=in_proj_weight,
                 in_proj_bias=in_proj_bias, bias_k=bias_k, bias_v=bias_v, out_proj_weight=out_proj_weight,
                 out_proj_bias=out_proj_bias, key_padding_mask=key_padding_mask, attn_mask=attn_mask,
                 q_proj_weight=q_proj_weight, k_proj_weight=k_proj_weight, v_proj_weight=v_proj_weight)
    for name, t in given.items():  # fuzz seed 17041: a float query failed on .ndim
        if not (isinstance(t, Tensor) or (t is None and name not in ("query", "key", "value"))):
            raise TypeError(f"[multi_head_attention_forward] {name} must be a Tensor"
                            f"{'' if name in ('query', 'key', 'value') else ' or None'}, "
                            f"got {type(t).__name__}")
    try:
        embed_dim_to_check, num_heads = operator.index(embed_dim_to_check), operator.index(num_heads)
    except TypeError:
        raise TypeError(f"[multi_head_attention_forward] embed_dim_to_check and num_heads must be "
                        f"ints, got {type(embed_dim_to_check).__name__} and "
                        f"{type(num_heads).__name__}") from None
    if num_heads <= 0 or embed_dim_to_check % num_heads:
        raise ValueError(f"[multi_head_attention_forward] embed_dim ({embed_dim_to_check}) must be divisible "
                         f"by num_heads ({num_heads})")
    if (bias_k is None) != (bias_v is None):
        raise ValueError("[multi_head_attention_forward] bias_k and bias_v must be given together")
    if use_separate_proj_weight:
        if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
            raise ValueError("[multi_head_attention_forward] use_separate_proj_weight needs q_proj_weight, "
                             "k_proj_weight and v_proj_weight")
        kdim, vdim = k_proj_weight.shape[-1], v_proj_weight.shape[-1]
        in_proj_weight = None
    else:
        if in_proj_weight is None:
            raise ValueError("[multi_head_attention_forward] in_proj_weight is None with "
                             "use_separate_proj_weight=False")
        kdim = vdim = embed_dim_to_check
    _bind()
    w = _Weights(embed_dim=embed_dim_to_check, kdim=kdim, vdim=vdim, num_heads=num_heads,
                 _qkv_same_embed_dim=not use_separate_proj_weight, head_dim=embed_dim_to_check // num_heads,
                 in_proj_weight=in_proj_weight, in_proj_bias=in_proj_bias, q_proj_weight=q_proj_weight,
                 k_proj_weight=k_proj_weight, v_proj_weight=v_proj_weight, bias_k=bias_k, bias_v=bias_v,
                 add_zero_attn=add_zero_attn, dropout=dropout_p, training=training, batch_first=False,
                 weight=out_proj_weight, bias=out_proj_bias)
    return w.forward(query, key, value, key_padding_mask=key_padding_mask, need_weights=need_weights,
                     attn_mask=attn_mask, average_attn_weights=average_attn_weights)
