"""Module: the base class of every layer, with PyTorch's bookkeeping.

A module keeps its state in three ordered dicts: _parameters (Parameter or
None), _buffers (Tensor or None; names in _non_persistent_buffers_set stay out
of state_dict) and _modules (Module or None). Attribute assignment routes
values into them (a Parameter registers a parameter, a Module a child), and
attribute lookup falls back to them, so `self.weight` and `self.fc` work.
Qualified names join the path of child names with dots ("0.fc.weight").
"""
import itertools
from collections import OrderedDict, namedtuple
from collections.abc import Mapping

from ... import _C, _capture
from ..._tensor import RemovableHandle
from ...autograd import no_grad
from ..parameter import Parameter

Tensor = _C.Tensor


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What load_state_dict returns: the keys it missed and did not expect."""

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _addindent(s, num_spaces):
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    return lines[0] + "\n" + "\n".join(num_spaces * " " + line for line in lines[1:])


def _typename(obj):
    return "musa.Tensor" if isinstance(obj, Tensor) else type(obj).__name__


def _check_name(kind, name, who):
    """Raise unless name is a valid name for a new `kind` (parameter, buffer,
    module); errors name who (the method the user called)."""
    if not isinstance(name, str):
        raise TypeError(f"[{who}] {kind} name should be a string. Got {type(name).__name__}")
    if "." in name:
        raise KeyError(f"[{who}] {kind} name can't contain \".\", got: {name}")
    if name == "":
        raise KeyError(f"[{who}] {kind} name can't be empty string \"\"")


class Module:
    """Base class of all layers: subclass it, build children and parameters
    in __init__ (after super().__init__()), and define forward()."""

    def __init__(self):
        set_ = object.__setattr__
        set_(self, "training", True)
        set_(self, "_parameters", OrderedDict())
        set_(self, "_buffers", OrderedDict())
        set_(self, "_non_persistent_buffers_set", set())
        set_(self, "_forward_hooks", OrderedDict())
        set_(self, "_forward_pre_hooks", OrderedDict())
        set_(self, "_backward_hooks", OrderedDict())
        set_(self, "_backward_pre_hooks", OrderedDict())
        set_(self, "_modules", OrderedDict())

    @property
    def training(self):
        """Training mode (train(), eval()). Read while musa.jit captures (a
        dropout or batch norm deciding what to record), it becomes a guard:
        the compiled variant runs only in the mode it was captured in, and
        the other mode compiles its own (a step closing over the model, then
        model.eval(), ran the training plan before)."""
        try:
            mode = self.__dict__["training"]
        except KeyError:
            raise AttributeError(f"[Module.training] {type(self).__name__} has no training flag: "
                                 f"its __init__ did not call Module.__init__()") from None
        if _C._jit_capturing():
            _capture.guard(("module.training", id(self)), lambda m=self: m.__dict__["training"],
                           mode, f"{type(self).__name__}.training")
        return mode

    @training.setter
    def training(self, mode):
        self.__dict__["training"] = mode

    def forward(self, *input):
        name = type(self).__name__
        raise NotImplementedError(f'[{name}.forward] Module [{name}] is missing the required "forward" '
                                  'function')

    # ---- registration ----

    def register_parameter(self, name, param):
        """Add a parameter (a Parameter, or None for an absent one)."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("[Module.register_parameter] cannot assign parameter before "
                                 "Module.__init__() call")
        _check_name("parameter", name, "Module.register_parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"[Module.register_parameter] attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"[Module.register_parameter] cannot assign '{_typename(param)}' object to "
                            f"parameter '{name}' "
                            "(musa.nn.Parameter or None required)")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """Add a buffer: state that is not a parameter (like running means).
        Non-persistent buffers are left out of state_dict."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("[Module.register_buffer] cannot assign buffer before "
                                 "Module.__init__() call")
        _check_name("buffer", name, "Module.register_buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"[Module.register_buffer] attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"[Module.register_buffer] cannot assign '{_typename(tensor)}' object to "
                            f"buffer '{name}' "
                            "(musa.Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        """Add a child module (or None), reachable as an attribute."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"[Module.add_module] {_typename(module)} is not a Module subclass")
        if "_modules" not in self.__dict__:
            raise AttributeError("[Module.add_module] cannot assign module before Module.__init__() call")
        _check_name("module", name, "Module.add_module")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"[Module.add_module] attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target):
        """The descendant named by a dotted path ("" is self)."""
        mod = self
        for item in target.split(".") if target else ():
            if not hasattr(mod, item):
                raise AttributeError(f"[Module.get_submodule] {mod._get_name()} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"[Module.get_submodule] `{item}` is not an nn.Module")
        return mod

    def __getattr__(self, name):
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if store in d and name in d[store]:
                return d[store][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("[Module.__setattr__] cannot assign parameters before "
                                     "Module.__init__() call")
            self._discard(name, d, self._buffers, self._modules)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"[Module.__setattr__] cannot assign '{_typename(value)}' as parameter "
                                f"'{name}' (musa.nn.Parameter or None expected)")
            params[name] = None
        elif isinstance(value, Module):
            if d.get("_modules") is None:
                raise AttributeError("[Module.__setattr__] cannot assign module before "
                                     "Module.__init__() call")
            self._discard(name, d, params, self._buffers)
            self._modules[name] = value
        elif "_modules" in d and name in self._modules:
            if value is not None:
                raise TypeError(f"[Module.__setattr__] cannot assign '{_typename(value)}' as child module "
                                f"'{name}' (musa.nn.Module or None expected)")
            self._modules[name] = None
        elif "_buffers" in d and name in self._buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"[Module.__setattr__] cannot assign '{_typename(value)}' as buffer '{name}' "
                                "(musa.Tensor or None expected)")
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def _discard(self, name, *stores):
        for store in stores:
            store.pop(name, None)
        self._non_persistent_buffers_set.discard(name)

    def __delattr__(self, name):
        for store in (self._parameters, self._buffers, self._modules):
            if name in store:
                del store[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        keys = itertools.chain(dir(type(self)), self.__dict__, self._parameters, self._modules, self._buffers)
        return sorted(k for k in set(keys) if not k[0].isdigit())

    # ---- iteration ----

    def _named_members(self, get_members, prefix="", recurse=True, remove_duplicate=True):
        seen = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else [(prefix, self)]
        for mod_prefix, mod in modules:
            for name, value in get_members(mod):
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                if remove_duplicate:
                    seen.add(id(value))
                yield (mod_prefix + "." if mod_prefix else "") + name, value

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(qualified name, Parameter) pairs, each shared parameter once."""
        return self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        return self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_children(self):
        """(name, module) for the direct children, each module once."""
        seen = set()
        for name, mod in self._modules.items():
            if mod is not None and id(mod) not in seen:
                seen.add(id(mod))
                yield name, mod

    def children(self):
        for _, mod in self.named_children():
            yield mod

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """(qualified name, module) for self and every descendant, pre-order."""
        if memo is None:
            memo = set()
        if id(self) in memo:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, mod in self._modules.items():
            if mod is not None:
                yield from mod.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self):
        for _, mod in self.named_modules():
            yield mod

    # ---- modes and conversions ----

    def train(self, mode=True):
        """Set training mode on self and all descendants; returns self."""
        if not isinstance(mode, bool):
            raise ValueError("[Module.train] training mode is expected to be boolean, got "
                             f"{type(mode).__name__}")
        self.training = mode
        for mod in self.children():
            mod.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Reset the gradients of all parameters: to None, or to zeros in place."""
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                if p.grad.grad_fn is not None:
                    p.grad = p.grad.detach()
                with no_grad():
                    p.grad.zero_()

    def apply(self, fn):
        """Call fn on every descendant (children first), then on self."""
        for mod in self.children():
            mod.apply(fn)
        fn(self)
        return self

    def _apply(self, fn):
        """Replace every parameter's data (keeping the Parameter objects),
        gradient and buffer by fn of it."""
        for mod in self.children():
            mod._apply(fn)
        with no_grad():
            for p in self._parameters.values():
                if p is None:
                    continue
                grad = p.grad
                p.data = fn(p.detach())
                if grad is not None:
                    p.grad = fn(grad)
            for name, buf in self._buffers.items():
                if buf is not None:
                    self._buffers[name] = fn(buf)
        return self

    def to(self, *args, **kwargs):
        """to(dtype), to(device), to(device, dtype), to(tensor): cast the
        floating point parameters and buffers in place; returns self."""
        from ..._tensor import _parse_to
        fmt = kwargs.pop("memory_format", None)
        dtype, _, _ = _parse_to("Module.to", args, dict(kwargs))
        if fmt is not None:  # 4-D (5-D) parameters and buffers laid out as fmt, as torch
            from ..._memory_format import _ORDERS, to_format
            rank = _ORDERS.get(fmt, (None,))[0]
            self._apply(lambda t: to_format("Module.to", t, fmt) if t.ndim == rank else t)
        if dtype is None:
            return self
        if not dtype.is_floating_point:
            raise TypeError(f"[Module.to] only accepts floating point dtypes, but got desired dtype={dtype}")
        return self._apply(lambda t: t.to(dtype) if t.is_floating_point() else t)

    def type(self, dst_type):
        """Cast all parameters and buffers (floating or not) to dst_type."""
        return self._apply(lambda t: t.to(dst_type))

    def float(self):
        return self.to(_C.float32)

    def double(self):
        return self.to(_C.float64)

    def half(self):
        return self.to(_C.float16)

    def bfloat16(self):
        return self.to(_C.bfloat16)

    def cpu(self):
        return self

    def cuda(self, device=None):
        return self.to("cuda" if device is None else device)

    def share_memory(self):
        """Move every parameter's and buffer's data to shared memory
        (Tensor.share_memory_), for processes forked after the call."""
        for t in list(self.parameters()) + list(self.buffers()):
            t.share_memory_()
        return self

    # ---- state ----

    def state_dict(self, destination=None, prefix="", keep_vars=False):
        """OrderedDict of qualified name -> parameter or persistent buffer
        (detached unless keep_vars)."""
        if destination is None:
            destination = OrderedDict()
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        for name, mod in self._modules.items():
            if mod is not None:
                mod.state_dict(destination, prefix + name + ".", keep_vars)
        return destination

    def _load_from_state_dict(self, state_dict, prefix, missing_keys, unexpected_keys, error_msgs):
        """Copy this module's own entries of state_dict (keys under prefix)."""
        local = {k: v for k, v in itertools.chain(self._parameters.items(), self._buffers.items())
                 if v is not None and k not in self._non_persistent_buffers_set}
        for name, param in local.items():
            key = prefix + name
            if key not in state_dict:
                missing_keys.append(key)
                continue
            value = state_dict[key]
            if not isinstance(value, Tensor):
                error_msgs.append(f'While copying the parameter named "{key}", expected musa.Tensor from '
                                  f"checkpoint but received {type(value)}")
                continue
            if param.ndim == 0 and value.ndim == 1 and value.shape[0] == 1:
                value = value[0]
            if tuple(value.shape) != tuple(param.shape):
                error_msgs.append(f"size mismatch for {key}: copying a param with shape {tuple(value.shape)} "
                                  f"from checkpoint, the shape in current model is {tuple(param.shape)}.")
                continue
            try:
                with no_grad():
                    param.copy_(value)
            except Exception as ex:
                error_msgs.append(f'While copying the parameter named "{key}", an exception occurred: {ex}.')
        for key in state_dict:
            if key.startswith(prefix):
                head = key[len(prefix):].split(".", 1)[0]
                if head not in self._modules and head not in local:
                    unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict=True):
        """Copy parameters and buffers from state_dict into self and its
        descendants. Returns (missing_keys, unexpected_keys); raises
        RuntimeError on a shape mismatch, or on any key mismatch if strict."""
        if not isinstance(state_dict, Mapping):
            raise TypeError("[Module.load_state_dict] Expected state_dict to be dict-like, got "
                            f"{type(state_dict)}.")
        missing, unexpected, error_msgs = [], [], []

        def load(mod, local_state, prefix):
            mod._load_from_state_dict(local_state, prefix, missing, unexpected, error_msgs)
            for name, child in mod._modules.items():
                if child is not None:
                    child_prefix = prefix + name + "."
                    child_state = {k: v for k, v in local_state.items() if k.startswith(child_prefix)}
                    load(child, child_state, child_prefix)

        load(self, dict(state_dict), "")
        if strict:
            if unexpected:
                error_msgs.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                error_msgs.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing)))
        if error_msgs:
            raise RuntimeError("[Module.load_state_dict] Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(error_msgs)))
        return _IncompatibleKeys(missing, unexpected)

    # ---- calling ----

    def register_forward_pre_hook(self, hook):
        """hook(module, args) runs before forward; a non-None result
        replaces args (a non-tuple is wrapped in a 1-tuple)."""
        return self._add_hook(self._forward_pre_hooks, hook)

    def register_forward_hook(self, hook):
        """hook(module, args, output) runs after forward; a non-None result
        replaces the output."""
        return self._add_hook(self._forward_hooks, hook)

    def register_full_backward_hook(self, hook):
        """hook(module, grad_input, grad_output) runs in the backward pass
        once the gradients with respect to the module's inputs are known:
        grad_input has one entry per positional argument (None for
        non-tensors and inputs without a gradient), grad_output one per
        tensor output. A non-None result replaces grad_input."""
        return self._add_hook(self._backward_hooks, hook)

    def register_full_backward_pre_hook(self, hook):
        """hook(module, grad_output) runs in the backward pass when the
        gradients with respect to the module's outputs are known, before
        the module's own backward; a non-None result replaces grad_output."""
        return self._add_hook(self._backward_pre_hooks, hook)

    @staticmethod
    def _add_hook(hooks, hook):
        key = object()
        hooks[key] = hook
        return RemovableHandle(lambda: hooks.pop(key, None))

    def __call__(self, *args, **kwargs):
        compiled = self.__dict__.get("_compiled_call")
        if compiled is not None:
            return compiled(*args, **kwargs)
        return self._call_impl(*args, **kwargs)

    def __getstate__(self):
        # A compiled forward holds plans bound to this module: copies and
        # pickles keep only its config and compile again on their first call.
        state = dict(self.__dict__)
        compiled = state.pop("_compiled_call", None)
        if compiled is not None:
            state["_compiled_config"] = compiled.config
        return state

    def __setstate__(self, state):
        config = state.pop("_compiled_config", None)
        self.__dict__.update(state)
        for name in ("_backward_hooks", "_backward_pre_hooks"):  # pickled before they existed
            self.__dict__.setdefault(name, OrderedDict())
        if config is not None:
            self.compile(config)

    def compile(self, config=None):
        """Compile this module in place (musa.jit): later calls run a static
        graph captured on the first call of each input signature. Returns
        the module. ``config`` is a musa.Config."""
        from ... import jit
        return jit.compile_module(self, config)

    def get_graph(self, optimized=True):
        """The IR of a compiled module's last compiled forward, as text
        (see musa.jit's get_graph)."""
        compiled = self.__dict__.get("_compiled_call")
        if compiled is None:
            raise RuntimeError(f"[Module.get_graph] {type(self).__name__} is not compiled: call "
                               f".compile() and run it once first")
        return compiled.get_graph(optimized)

    def save(self, path):
        """Save a compiled module (Module.compile, then one call) as a .musa
        model that musa.jit.load and the C runtime run."""
        from ... import jit
        if "_compiled_call" not in self.__dict__:
            raise RuntimeError(f"[Module.save] {type(self).__name__} is not compiled: call "
                               f".compile() and run it once first (musa.save saves its "
                               f"state_dict)")
        jit.save(self, path)

    def _call_impl(self, *args, **kwargs):
        if not (self._forward_pre_hooks or self._forward_hooks or self._backward_hooks
                or self._backward_pre_hooks):
            return self.forward(*args, **kwargs)
        back, back_pre = self._backward_hooks, self._backward_pre_hooks
        for hook in list(self._forward_pre_hooks.values()):
            result = hook(self, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
        call = None
        if (back or back_pre) and _C.is_grad_enabled():
            from ._backward_hooks import hook_inputs
            args, call = hook_inputs(self, args, back.values(), back_pre.values())
        out = self.forward(*args, **kwargs)
        for hook in list(self._forward_hooks.values()):
            result = hook(self, args, out)
            if result is not None:
                out = result
        if call is not None:
            from ._backward_hooks import hook_outputs
            out = hook_outputs(call, out)
        return out

    # ---- printing ----

    def _get_name(self):
        return type(self).__name__

    def extra_repr(self):
        """The module's own settings, shown inside its repr's parentheses."""
        return ""

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({name}): " + _addindent(repr(mod), 2) for name, mod in self._modules.items()]
        lines = extra_lines + child_lines
        body = ""
        if len(extra_lines) == 1 and not child_lines:
            body = extra_lines[0]
        elif lines:
            body = "\n  " + "\n  ".join(lines) + "\n"
        return self._get_name() + "(" + body + ")"
