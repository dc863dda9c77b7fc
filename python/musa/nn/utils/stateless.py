"""torch.nn.utils.stateless.functional_call: run a module with some of its
parameters and buffers replaced by the given tensors (by their dotted
names), then put the module's own back. The replacements may require grad
or carry history, so gradients flow to them (meta-learning, ensembling)."""
__all__ = ["functional_call"]


def _owner(module, name):
    *path, leaf = name.split(".")
    for p in path:
        sub = module._modules.get(p)
        if sub is None:
            raise AttributeError(f"[functional_call] {type(module).__name__} has no submodule {p!r} "
                                 f"(in {name!r})")
        module = sub
    return module, leaf


def functional_call(module, parameters_and_buffers, args, kwargs=None):
    """module(*args, **kwargs) with each named parameter or buffer swapped
    for the tensor given (the others unchanged)."""
    from ... import _C
    if not isinstance(args, tuple):
        args = (args,)
    swapped = []
    try:
        for name, value in parameters_and_buffers.items():
            if not isinstance(value, _C.Tensor):
                raise TypeError(f"[functional_call] {name!r} must be a tensor, got {type(value).__name__}")
            owner, leaf = _owner(module, name)
            for store in (owner._parameters, owner._buffers):
                if leaf in store:
                    swapped.append((store, leaf, store[leaf]))
                    store[leaf] = value  # (a plain tensor may stand in for a Parameter here)
                    break
            else:
                raise AttributeError(f"[functional_call] {type(owner).__name__} has no parameter or buffer "
                                     f"{leaf!r} (in {name!r})")
        return module(*args, **(kwargs or {}))
    finally:
        for store, leaf, old in reversed(swapped):
            store[leaf] = old
