"""musa.library: ops written in Python that musa treats as its own.

    @musa.library.custom_op("mylib::softclip")
    def softclip(x):
        return np.tanh(x.numpy()) * 2          # any code: NumPy, SciPy, ...

    @softclip.register_autograd
    def _(inputs, outputs, grads):
        (x,), (y,), (g,) = inputs, outputs, grads
        return (g * (1 - (y / 2) ** 2) * 2,)

    y = softclip(x)          # eager, recorded by autograd
    f = musa.jit(lambda x: softclip(x * 3).sum())   # one graph node, no graph break

A custom op is registered with musa's op table (``musa_op_register`` in
C): it runs eagerly, autograd records it, ``musa.jit`` captures it as a
graph node (its output shapes come from ``register_fake``, or are those
of input 0), and a saved model names it; loading that model in a process
that has not registered the name fails naming it. The forward must be a
pure function of its tensor inputs (compiled graphs may merge identical
calls or drop unused ones); plans run it on the calling thread.
"""
from . import _C

__all__ = ["custom_op", "CustomOp"]


def _as_tensor(value, like, who, j):
    from . import Tensor, as_tensor
    t = value if isinstance(value, Tensor) else as_tensor(value)
    if tuple(t.shape) != tuple(like.shape) or t.dtype != like.dtype:
        raise ValueError(f"[{who}] forward gave output {j} as {t.dtype} {tuple(t.shape)}; its "
                         f"fake (register_fake) says {like.dtype} {tuple(like.shape)}")
    return t


class CustomOp:
    """A registered op: call it with tensors. Made by custom_op."""

    def __init__(self, name, fn, n_inputs, n_outputs):
        self.name, self._fn, self.n_outputs = name, fn, n_outputs
        self._fake = None
        self._backward = None
        self._index = _C._custom_op_register(name, n_inputs, n_outputs, self._forward_cb,
                                             self._infer_cb, self._backward_cb)
        self.n_inputs = n_inputs
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__wrapped__ = fn

    def register_fake(self, fn):
        """fn(*inputs) gives each output's (shape, dtype), as a pair or a list
        of pairs, or tensors of that shape and dtype; the inputs may hold no
        data (a symbolic capture), so read only their shape and dtype.
        Without it, each output is shaped like input 0."""
        self._fake = fn
        return fn

    def register_autograd(self, fn):
        """fn(inputs, outputs, grad_outputs) gives one gradient (or None) per
        input; write it with musa ops and it is differentiable itself."""
        self._backward = fn
        return fn

    def __call__(self, *inputs):
        from . import Tensor
        if len(inputs) != self.n_inputs:
            raise TypeError(f"[{self.name}] takes {self.n_inputs} tensors, got {len(inputs)}")
        for i, t in enumerate(inputs):
            if not isinstance(t, Tensor):
                raise TypeError(f"[{self.name}] input {i} must be a Tensor, not "
                                f"{type(t).__name__}")
        out = _C._custom_op_call(self._index, list(inputs), self.n_outputs)
        return out[0] if self.n_outputs == 1 else out

    def __repr__(self):
        return f"<musa custom op {self.name}>"

    # -- the callbacks musa's dispatcher makes (python/musa/_C/custom.c) --

    def _infer_cb(self, inputs):
        from . import Tensor, dtype
        if self._fake is None:
            if not inputs:
                raise TypeError(f"[{self.name}] an op without inputs needs register_fake")
            return [(tuple(inputs[0].shape), inputs[0].dtype)] * self.n_outputs
        r = self._fake(*inputs)
        one = isinstance(r, Tensor) or (isinstance(r, tuple) and len(r) == 2 and
                                        isinstance(r[1], dtype))
        out = []
        for e in ([r] if one else r):
            if isinstance(e, Tensor):
                out.append((tuple(e.shape), e.dtype))
            elif isinstance(e, tuple) and len(e) == 2 and isinstance(e[1], dtype):
                out.append((tuple(e[0]), e[1]))
            else:
                raise TypeError(f"[{self.name}] register_fake must give tensors or (shape, "
                                f"dtype) pairs, got {type(e).__name__}")
        return out

    def _forward_cb(self, inputs, outputs):
        r = self._fn(*inputs)
        if self.n_outputs == 1 and not isinstance(r, (tuple, list)):
            r = (r,)
        if len(r) != self.n_outputs:
            raise ValueError(f"[{self.name}] forward returned {len(r)} outputs, not "
                             f"{self.n_outputs}")
        for j, (value, out) in enumerate(zip(r, outputs)):
            out.copy_(_as_tensor(value, out, self.name, j))

    def _backward_cb(self, inputs, outputs, grads):
        if self._backward is None:
            raise RuntimeError(f"[{self.name}] has no backward: register_autograd one to "
                               f"differentiate it")
        r = self._backward(inputs, outputs, grads)
        if self.n_inputs == 1 and not isinstance(r, (tuple, list)):
            r = (r,)
        return tuple(r)


def custom_op(name, fn=None, *, mutates_args=(), n_inputs=None, n_outputs=1,
              device_types=None):
    """Register ``fn`` as the op ``name`` ("mylib::op": letters, digits,
    '_', ':' and '.'). The forward takes tensors (contiguous; ``.numpy()``
    views them) and returns a tensor, a NumPy array or anything
    musa.as_tensor takes (a tuple of them for several outputs) of the shape
    and dtype its fake says. Usable as a decorator. n_inputs defaults to
    the function's positional parameters. ``mutates_args`` (as in
    torch.library.custom_op) must name nothing: custom ops return new
    tensors. ``device_types`` may be None or "cpu"."""
    if not isinstance(name, str):
        raise TypeError(f"[custom_op] name must be a str, got {type(name).__name__}")
    if mutates_args not in ((), [], None) and not (
            isinstance(mutates_args, (tuple, list, set)) and not mutates_args):
        raise ValueError(f"[custom_op] {name}: custom ops that mutate their inputs are not "
                         f"supported (mutates_args={mutates_args!r}); return new tensors")
    if device_types not in (None, "cpu", ("cpu",), ["cpu"]):
        raise ValueError(f"[custom_op] {name}: device_types must be None or 'cpu', got "
                         f"{device_types!r}")

    def register(f):
        import inspect
        n = n_inputs
        if n is None:
            params = inspect.signature(f).parameters.values()
            if any(p.kind == p.VAR_POSITIONAL for p in params):
                raise TypeError(f"[custom_op] {name}: give n_inputs for a function taking *args")
            n = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
        return CustomOp(name, f, n, n_outputs)

    return register if fn is None else register(fn)
