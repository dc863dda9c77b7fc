"""Connectionist temporal classification: F.ctc_loss, as the forward
(alpha) recursion over time written with differentiable ops, in log space,
all sequences of the batch at once. Its gradient is autograd's through the
recursion (the backward recursion of the textbook algorithm, computed by
the chain rule). Re-exported by musa.nn.functional."""
import math
import operator

from .. import _C
from .._functions import _tensors

__all__ = ["ctc_loss"]

_NEG = -math.inf


def _lengths(v, n, what):
    """Per-sequence lengths as Python ints (a tensor is read on the host)."""
    if isinstance(v, _C.Tensor):
        if v.is_floating_point() or v.dtype == _C.bool:
            raise TypeError(f"[ctc_loss] {what} must be integers, got {v.dtype}")
        v = v.reshape(-1).tolist()
    elif isinstance(v, int):
        v = [v]
    try:
        v = [operator.index(x) for x in v]
    except TypeError:
        raise TypeError(f"[ctc_loss] {what} must be a tensor or a sequence of ints, got "
                        f"{v!r}") from None
    if len(v) != n:
        raise ValueError(f"[ctc_loss] {what} must have one entry per sequence ({n}), got {len(v)}")
    if any(x < 0 for x in v):
        raise ValueError(f"[ctc_loss] {what} must not be negative, got {v}")
    return v


def _lse(*xs):
    """log(sum(exp(x))) of tensors of one shape, -inf where all are -inf,
    with finite gradients there (0)."""
    m = xs[0]
    for x in xs[1:]:
        m = _C.maximum(m, x)
    m = _C.where(_C.eq(m, _NEG), 0.0, m).detach()
    s = None
    for x in xs:
        e = _C.exp(_C.sub(x, m))
        s = e if s is None else _C.add(s, e)
    pos = _C.gt(s, 0.0)
    return _C.where(pos, _C.add(_C.log(_C.where(pos, s, 1.0)), m), _NEG)


def _padded_targets(targets, tl, n, unbatched):
    """(N, S) int64 targets, blank-free padding replaced by 0."""
    if targets.is_floating_point() or targets.dtype == _C.bool:
        raise TypeError(f"[ctc_loss] targets must be integer class indices, got {targets.dtype}")
    smax = max(tl) if tl else 0
    if unbatched:
        targets = targets.reshape(1, -1)
    if targets.ndim == 1:  # the targets of all sequences, concatenated
        if targets.shape[0] < sum(tl):
            raise ValueError(f"[ctc_loss] concatenated targets hold {targets.shape[0]} labels, the "
                             f"target lengths {tl} need {sum(tl)}")
        rows, at = [], 0
        for k in tl:
            row = targets[at:at + k].to(_C.int64)
            rows.append(_C.cat([row, _C.zeros(smax - k, dtype=_C.int64)]))
            at += k
        return _C.stack(rows) if rows else _C.zeros((0, smax), dtype=_C.int64)
    if targets.ndim != 2 or targets.shape[0] != n:
        raise ValueError(f"[ctc_loss] targets must be (N, S) or 1-D, got shape "
                         f"{tuple(targets.shape)} for {n} sequences")
    if targets.shape[1] < smax:
        raise ValueError(f"[ctc_loss] targets have {targets.shape[1]} labels per sequence, a target "
                         f"length is {smax}")
    t = targets[:, :smax].to(_C.int64)
    keep = _C.lt(_C.arange(smax).reshape(1, -1), _C.tensor(tl).reshape(-1, 1))
    return _C.where(keep, t, 0)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """The CTC loss of log-probabilities (T, N, C) (or (T, C) unbatched)
    against label sequences: targets (N, S) padded, or 1-D concatenated, with
    their input and target lengths. reduction 'mean' divides each loss by
    its target length, then averages over the batch; zero_infinity makes an
    impossible alignment's loss (inf) and its gradient 0."""
    _tensors("ctc_loss", log_probs=log_probs, targets=targets)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"[ctc_loss] reduction must be 'none', 'mean' or 'sum', got {reduction!r}")
    if log_probs.ndim not in (2, 3) or not log_probs.is_floating_point():
        raise ValueError(f"[ctc_loss] log_probs must be floating (T, N, C) or (T, C), got "
                         f"{log_probs.dtype} {tuple(log_probs.shape)}")
    unbatched = log_probs.ndim == 2
    lp = log_probs.unsqueeze(1) if unbatched else log_probs
    T, n, c = lp.shape
    try:
        blank = operator.index(blank)
    except TypeError:
        raise TypeError(f"[ctc_loss] blank must be an int, got {type(blank).__name__}") from None
    if not 0 <= blank < c:
        raise ValueError(f"[ctc_loss] blank must be in [0, {c}), got {blank}")
    il = _lengths(input_lengths, n, "input_lengths")
    tl = _lengths(target_lengths, n, "target_lengths")
    if any(x > T for x in il):
        raise ValueError(f"[ctc_loss] input_lengths must be at most T = {T}, got {il}")
    tg = _padded_targets(targets, tl, n, unbatched)
    smax = tg.shape[1]
    if smax and (bool(_C.lt(tg, 0).any()) or bool(_C.ge(tg, c).any())):
        raise ValueError(f"[ctc_loss] targets must be class indices in [0, {c})")
    # the extended labels: blank, l1, blank, l2, ..., blank (L = 2 S + 1)
    L = 2 * smax + 1
    ext = _C.cat([_C.stack([_C.full((n, smax), blank, dtype=_C.int64), tg], -1).reshape(n, 2 * smax),
                  _C.full((n, 1), blank, dtype=_C.int64)], 1)
    skip = _C.zeros((n, min(L, 2)), dtype=_C.bool)
    if L > 2:  # s - 2 -> s is allowed between different labels
        differs = _C.logical_and(_C.ne(ext[:, 2:], blank), _C.ne(ext[:, 2:], ext[:, :-2]))
        skip = _C.cat([skip, differs], 1)
    emit = lp.gather(2, ext.unsqueeze(0).expand(T, n, L))  # (T, N, L)
    neg1 = _C.full((n, 1), _NEG, dtype=lp.dtype)
    neg2 = _C.full((n, min(L, 2)), _NEG, dtype=lp.dtype)
    start = _C.lt(_C.arange(L), 2).reshape(1, L)
    if T == 0:
        alpha = _C.full((n, L), _NEG, dtype=lp.dtype)
    else:
        alpha = _C.where(start, emit[0], _NEG)
    live = _C.tensor(il).reshape(n, 1)
    for t in range(1, max(il) if il else 0):
        a1 = _C.cat([neg1, alpha[:, :-1]], 1)
        a2 = _C.where(skip, _C.cat([neg2, alpha[:, :-2]], 1), _NEG)
        step = _C.add(_lse(alpha, a1, a2), emit[t])
        alpha = _C.where(_C.gt(live, t), step, alpha)
    # a sequence of no frames has no alignment (unless its target is empty too)
    empty = _C.where(_C.eq(_C.arange(L), 0).reshape(1, L), 0.0, _NEG)
    alpha = _C.where(_C.gt(live, 0), alpha, empty)
    last = _C.tensor([2 * k for k in tl]).reshape(n, 1)
    end = alpha.gather(1, last).reshape(n)
    before = alpha.gather(1, _C.clamp(last - 1, min=0)).reshape(n)
    before = _C.where(_C.tensor([k > 0 for k in tl]), before, _NEG)
    loss = _C.neg(_lse(end, before))
    if zero_infinity:
        loss = _C.where(_C.isinf(loss), 0.0, loss)
    if reduction == "none":
        return loss.reshape(()) if unbatched else loss
    if reduction == "sum":
        return loss.sum()
    return _C.div(loss, _C.clamp(_C.tensor(tl, dtype=loss.dtype), min=1.0)).mean()
