"""musa.autograd.Function: differentiable functions written in Python.

    class Exp(Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

    y = Exp.apply(x)

forward runs without recording; apply attaches one node (named
"<Class>Backward") to the outputs, whose backward calls the class's
backward with one gradient per output and expects one per forward
argument (None for arguments that need none).
"""
from .. import _C

Tensor = _C.Tensor


class FunctionCtx:
    """The ctx object handed to forward and backward."""

    def __init__(self):
        self._saved = ()
        self.needs_input_grad = ()
        self.materialize_grads = True
        self._non_differentiable = ()

    def save_for_backward(self, *tensors):
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError("[FunctionCtx.save_for_backward] can only save tensors, but got "
                                f"{type(t).__name__}")
        self._saved = tensors
        self._saved_versions = tuple(None if t is None else t._version for t in tensors)

    @property
    def saved_tensors(self):
        """The saved tensors; an error if one was modified in place since it
        was saved (its gradient would be computed from the new values)."""
        for t, v in zip(self._saved, getattr(self, "_saved_versions", ())):
            if t is not None and t._version != v:
                raise RuntimeError(
                    "[FunctionCtx.saved_tensors] one of the variables needed for gradient "
                    f"computation has been modified by an inplace operation: [{t.dtype} "
                    f"{tuple(t.shape)}] is at version {t._version}; expected version {v} instead")
        return self._saved

    def mark_non_differentiable(self, *tensors):
        self._non_differentiable = tensors

    def set_materialize_grads(self, value):
        self.materialize_grads = bool(value)

    def mark_dirty(self, *tensors):
        pass


class _FunctionMeta(type):
    def __init__(cls, name, bases, ns):
        super().__init__(name, bases, ns)
        cls._backward_name = name + "Backward"


class Function(metaclass=_FunctionMeta):
    """Subclass with static forward(ctx, *args) and backward(ctx, *grads)."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("[Function.forward] Function subclasses must implement forward")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("[Function.backward] Function subclasses must implement backward")

    @classmethod
    def apply(cls, *args):
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        prev = _C._set_grad_enabled(False)
        try:
            out = cls.forward(ctx, *args)
        finally:
            _C._set_grad_enabled(prev)
        single = not isinstance(out, tuple)
        outs = (out,) if single else out
        tensor_args = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        if not (prev and any(ctx.needs_input_grad)):
            return out
        # outputs that are inputs, or marked non-differentiable, get fresh aliases
        input_ids = {id(args[i]) for i in tensor_args}
        outs = tuple(o.detach() if isinstance(o, Tensor) and id(o) in input_ids else o for o in outs)
        diff = [o for o in outs if isinstance(o, Tensor)
                and not any(o is n for n in ctx._non_differentiable)]
        # saved outputs are kept as detached aliases: a saved output would
        # otherwise hold its own node alive (a cycle Python cannot see)
        out_ids = {id(o) for o in diff}
        ctx._saved = tuple(s.detach() if isinstance(s, Tensor) and id(s) in out_ids else s for s in ctx._saved)
        # backward takes a gradient per output, as forward returned them:
        # None for non-tensor outputs; for non-differentiable ones (and
        # differentiable ones no gradient reached), zeros with
        # materialize_grads, else None
        pos = [k for k, o in enumerate(outs) if any(o is d for d in diff)]
        # (the closure holds no output: an output holds its node, which holds it)
        metas = [(tuple(o.shape), o.dtype) if isinstance(o, Tensor) else None for o in outs]
        backward = cls.backward
        nargs = len(args)

        def node_backward(*grads):
            full = [None] * len(metas)
            for k, g in zip(pos, grads):
                full[k] = g
            if ctx.materialize_grads:
                full = [_C.zeros(m[0], dtype=m[1]) if g is None and m is not None else g
                        for g, m in zip(full, metas)]
            res = backward(ctx, *full)
            if not isinstance(res, tuple):
                res = (res,)
            if len(res) < nargs:
                raise RuntimeError(f"[{cls.__name__}.backward] returned an incorrect number of "
                                   f"gradients (expected {nargs}, got {len(res)})")
            return tuple(res[i] for i in tensor_args)

        if diff:
            _C._custom_node(cls._backward_name, [args[i] for i in tensor_args], diff, node_backward)
        return outs[0] if single else outs
