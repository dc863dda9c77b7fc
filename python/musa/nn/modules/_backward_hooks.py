"""Module backward hooks (Module.register_full_backward_hook and
register_full_backward_pre_hook), as PyTorch's.

A call of a module with such hooks, under grad mode, passes its tensor
inputs and its tensor outputs through two identity autograd Functions.
The backward of the outputs' one sees the gradients with respect to the
outputs (grad_output): the pre-hooks run there and may replace them. The
backward of the inputs' one sees the gradients with respect to the inputs
(grad_input): the hooks run there and may replace them. When no input
needs a gradient the hooks run at the outputs' one, with grad_input all
None, as in PyTorch.
"""
from ... import _C
from ...autograd.function import Function

Tensor = _C.Tensor


def _replaced(who, old, new):
    """A hook's result: None keeps old; else a tuple of old's length."""
    if new is None:
        return old
    if isinstance(new, Tensor):
        new = (new,)
    if not isinstance(new, (tuple, list)) or len(new) != len(old):
        raise RuntimeError(f"[{who}] a backward hook must return None or a tuple of "
                           f"{len(old)} gradients (one per tensor), got "
                           + (f"{len(new)}" if isinstance(new, (tuple, list))
                              else type(new).__name__))
    for i, (a, b) in enumerate(zip(old, new)):
        if b is not None and not isinstance(b, Tensor):
            raise RuntimeError(f"[{who}] a backward hook returned a {type(b).__name__} for "
                               f"gradient {i}; expected a Tensor or None")
        if b is not None and a is not None and tuple(a.shape) != tuple(b.shape):
            raise RuntimeError(f"[{who}] a backward hook returned gradient {i} of shape "
                               f"{tuple(b.shape)}; expected {tuple(a.shape)}")
    return tuple(new)


class _Call:
    """One call of a hooked module: where its tensor inputs sit among its
    positional arguments, and the gradients seen so far."""

    def __init__(self, module, nargs, positions, hooks, pre_hooks):
        self.module, self.nargs, self.positions = module, nargs, positions
        self.hooks, self.pre_hooks = hooks, pre_hooks
        self.grad_output = None
        self.inputs_hooked = False

    def run_pre_hooks(self, grads):
        for hook in self.pre_hooks:
            grads = _replaced("Module.register_full_backward_pre_hook", grads,
                              hook(self.module, grads))
        self.grad_output = grads
        return grads

    def run_hooks(self, tensor_grads):
        """The hooks on grad_input (one entry per positional argument, None
        where no tensor or no gradient); the tensors' gradients back."""
        full = [None] * self.nargs
        for p, g in zip(self.positions, tensor_grads):
            full[p] = g
        full = tuple(full)
        for hook in self.hooks:
            full = _replaced("Module.register_full_backward_hook", full,
                             hook(self.module, full, self.grad_output))
        return tuple(full[p] for p in self.positions)


class _Identity(Function):
    """The tensors again (new aliases), with the call on ctx; unused
    outputs' gradients stay None."""

    @staticmethod
    def forward(ctx, call, *xs):
        ctx.call = call
        ctx.set_materialize_grads(False)
        return tuple(x.view_as(x) for x in xs)


class _Inputs(_Identity):
    @staticmethod
    def backward(ctx, *grads):
        return (None,) + ctx.call.run_hooks(grads)


class _Outputs(_Identity):
    @staticmethod
    def backward(ctx, *grads):
        call = ctx.call
        grads = call.run_pre_hooks(grads)
        if not call.inputs_hooked:  # no gradient will reach the inputs: the hooks run now
            call.run_hooks((None,) * len(call.positions))
        return (None,) + grads


def hook_inputs(module, args, hooks, pre_hooks):
    """(args with their tensors behind the inputs' identity, the call)."""
    positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
    call = _Call(module, len(args), positions, list(hooks), list(pre_hooks))
    if any(args[p].requires_grad for p in positions):
        call.inputs_hooked = True
        outs = _Inputs.apply(call, *(args[p] for p in positions))
        args = list(args)
        for p, t in zip(positions, outs):
            args[p] = t
        args = tuple(args)
    return args, call


def hook_outputs(call, out):
    """out (a tensor, or a tuple or list of them and other values) with its
    tensors behind the outputs' identity; other outputs are left alone."""
    single = isinstance(out, Tensor)
    items = (out,) if single else tuple(out) if isinstance(out, (tuple, list)) else ()
    pos = [i for i, o in enumerate(items) if isinstance(o, Tensor) and o.requires_grad]
    if not pos:
        return out
    hooked = _Outputs.apply(call, *(items[i] for i in pos))
    items = list(items)
    for i, t in zip(pos, hooked):
        items[i] = t
    if single:
        return items[0]
    if isinstance(out, list) or type(out) is tuple:
        return type(out)(items)
    return type(out)._make(items) if hasattr(out, "_make") else type(out)(items)
