"""musa.utils.checkpoint: activation checkpointing, as torch.utils.checkpoint.

``checkpoint(fn, *args)`` runs ``fn`` without keeping what its backward
needs, and runs it again (with the random state it had, so dropout draws
the same masks) when the backward reaches it: memory for time.

    from musa.utils.checkpoint import checkpoint
    h = checkpoint(block, h, use_reentrant=False)

Both settings of ``use_reentrant`` recompute through one autograd Function
whose backward runs ``fn`` again and then a backward of its own. With
``use_reentrant=True`` (PyTorch's reentrant variant) only inputs that need
gradients make the call differentiable: if none does, the parameters inside
``fn`` get no gradient (PyTorch's warning says so, and so does ours). With
``use_reentrant=False`` the call is always differentiable, so parameters
inside get their gradients whatever the inputs, as PyTorch's non-reentrant
variant gives them. Keyword arguments are passed to ``fn`` (both
variants). Outputs may be a tensor or a tuple of them (and other values).
"""
import warnings

from .. import _C
from ..autograd import Function, backward as _backward, enable_grad, no_grad

__all__ = ["checkpoint", "checkpoint_sequential"]


class _Recompute(Function):
    @staticmethod
    def forward(ctx, fn, preserve, kwargs, _anchor, *args):
        ctx.fn, ctx.kwargs, ctx.preserve = fn, kwargs, preserve
        ctx.rng = _C.get_rng_state() if preserve else None
        ctx.tensor_pos = [i for i, a in enumerate(args) if isinstance(a, _C.Tensor)]
        ctx.others = [None if isinstance(a, _C.Tensor) else a for a in args]
        ctx.save_for_backward(*(args[i] for i in ctx.tensor_pos))
        with no_grad():
            return fn(*args, **kwargs)

    @staticmethod
    def backward(ctx, *grads):
        args = list(ctx.others)
        for i, t in zip(ctx.tensor_pos, ctx.saved_tensors):
            x = t.detach()
            x.requires_grad_(t.requires_grad)
            args[i] = x
        now = _C.get_rng_state()
        if ctx.preserve:
            _C.set_rng_state(ctx.rng)  # the forward's draws again
        try:
            with enable_grad():
                out = ctx.fn(*args, **ctx.kwargs)
        finally:
            if ctx.preserve:
                _C.set_rng_state(now)
        outs = out if isinstance(out, tuple) else (out,)
        pairs = [(o, g) for o, g in zip(outs, grads)
                 if isinstance(o, _C.Tensor) and o.requires_grad and g is not None]
        if pairs:
            _backward([o for o, _ in pairs], [g for _, g in pairs])
        inputs = [args[i].grad if isinstance(args[i], _C.Tensor) and args[i].requires_grad
                  else None for i in range(len(args))]
        return (None, None, None, None, *inputs)


def checkpoint(function, *args, use_reentrant=None, preserve_rng_state=True, **kwargs):
    """function(*args, **kwargs), its intermediates recomputed in the
    backward instead of kept (see the module doc)."""
    if not callable(function):
        raise TypeError(f"[checkpoint] function must be callable, got {type(function).__name__}")
    if use_reentrant is None:
        warnings.warn("[checkpoint] pass use_reentrant explicitly (as PyTorch asks); "
                      "defaulting to True", stacklevel=2)
        use_reentrant = True
    if not _C.is_grad_enabled():
        return function(*args, **kwargs)
    anchor = None
    if not use_reentrant:
        anchor = _C.empty(0).requires_grad_(True)  # the call is always differentiable
    elif not any(isinstance(a, _C.Tensor) and a.requires_grad for a in args):
        warnings.warn("[checkpoint] None of the inputs have requires_grad=True: the outputs, "
                      "and the parameters inside, will get no gradients (use_reentrant=False "
                      "gives them theirs)", stacklevel=2)
    return _Recompute.apply(function, bool(preserve_rng_state), kwargs, anchor, *args)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, preserve_rng_state=True):
    """Run a Sequential (or a list of modules or functions) in `segments`
    checkpointed pieces, the last one kept (as PyTorch's)."""
    if isinstance(functions, _C.Tensor) or not hasattr(functions, "__iter__"):
        raise TypeError("[checkpoint_sequential] functions must be a Sequential or a list")
    fns = list(functions.children()) if hasattr(functions, "children") else list(functions)
    if not isinstance(segments, int) or isinstance(segments, bool) or segments < 1:
        raise ValueError(f"[checkpoint_sequential] segments must be a positive int, got {segments!r}")
    if use_reentrant is None:
        warnings.warn("[checkpoint_sequential] pass use_reentrant explicitly (as PyTorch asks); "
                      "defaulting to True", stacklevel=2)
        use_reentrant = True
    size = max(len(fns) // segments, 1)

    def run(lo, hi):
        def f(x):
            for m in fns[lo:hi]:
                x = m(x)
            return x
        return f

    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end + 1), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve_rng_state)
    return run(end + 1, len(fns))(input)
