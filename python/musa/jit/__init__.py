"""musa.jit: capture Python functions and modules into static graphs.

    @musa.jit
    def model(x, y):
        return x * y

    compiled = model.compile()              # builds nothing yet, runs nothing
    compiled(musa.tensor([1.0]), musa.tensor([2.0]))
    print(compiled.get_graph())

    traced = musa.jit.trace(module, (example,))   # capture now, from an example
    model.compile(config=musa.Config(fusion_level=2))   # a Module, compiled in place

How a call runs (see docs/jit.md):

* The call's signature (tensor dtypes, shapes and devices, the other
  arguments' values, grad mode, the module's training flag) picks a cache
  entry. A miss captures the function once in trace mode: it runs eagerly (so
  the first call's result is the eager result) while the dispatcher records
  every op into a graph, which the passes optimise and the planner lowers.
* A host read of a tensor value while capturing (``bool(t)``, ``t.item()``,
  ``if t > 0:``) is a graph break: the graph is cut there into segments. A
  run executes a segment, reads the value, and continues with the segment
  captured for that outcome. An outcome never seen triggers a new capture
  (logged), so a branch is never silently baked in.
* Recompiles are logged on the ``musa.jit`` logger, one line each, naming the
  function, the argument, the dimension and the values. Past
  ``Config.max_variants`` variants the function runs eagerly, with one
  warning.

This module holds the entry points (jit, trace, compile_module); the
machinery is split by idea:

    _config.py    Config
    _args.py      flattening argument structures (ArgSpec), leaf names
    _keys.py      the cache key (CacheKey, TensorSig), recompile reasons
    _tracing.py   one capture of the function (Capture, Outputs)
    _segments.py  graph breaks: segments, their tree, running a path
    _dynamic.py   dynamic dims: the symbolic probe, re-specialising per size
    _training.py  compiled training: forward and backward plans as one tape node
    _compiled.py  CompiledFunction: the cache, captures, recompiles

Invariant: ``musa.jit`` is both this module and the decorator (_JitModule).
"""
# functools, warnings and log are no longer used here; they stay so that
# the names musa.jit offers are those it offered before the split (not
# logging: musa.jit imports it only for its first message, _compiled.log).
import copy as _copy
import functools  # noqa: F401
import os
import sys
import types
import warnings  # noqa: F401

from .. import _C, _capture
from . import _args
from ._compiled import CompiledFunction, log  # noqa: F401  (log: the musa.jit logger)
from ._config import Config
from ._save import LoadedModel, load

# the package folder as its modules' code objects name it (the import path as
# given: not normalised, or a relative sys.path entry would never match)
_C._jit_location(os.path.dirname(os.path.dirname(__file__)) + os.sep)

__all__ = ["Config", "jit", "trace", "CompiledFunction", "TracedModule", "guard",
           "outside_capture", "load", "save", "LoadedModel"]

guard = _capture.guard
outside_capture = _capture.outside_capture


def jit(fn=None, *, fusion_level=None, dynamic=None, config=None):
    """Compile a function: ``@musa.jit`` or ``@musa.jit(fusion_level=2, dynamic=...)``."""
    cfg = config or Config()
    if fusion_level is not None or dynamic is not None:
        base, cfg = cfg, _copy.copy(cfg)  # every other setting kept
        cfg.dynamic = {k: dict(v) for k, v in base.dynamic.items()}
        if fusion_level is not None:
            cfg.set_fusion_level(fusion_level)
        for arg, dims in (dynamic or {}).items():
            extra = Config(dynamic={arg: dims}).dynamic[arg]  # validated as Config does
            cfg.dynamic.setdefault(arg, {}).update(extra)

    def wrap(f):
        if not callable(f):
            raise TypeError(f"[jit] expected a function, got {type(f).__name__}")
        if hasattr(f, "training") and hasattr(f, "_modules"):  # a musa.nn.Module
            # its forward reads self.training (dropout, batch norm): a variant
            # per mode, as Module.compile keys it (eval() after training ran
            # the training plan before)
            return CompiledFunction(f, cfg, extra_key=_training_flag(f))
        return CompiledFunction(f, cfg)

    return wrap(fn) if fn is not None else wrap


class TracedModule:
    """A module (or function) captured from example inputs by musa.jit.trace."""

    def __init__(self, target, compiled, example_out):
        self._target = target
        self._compiled = compiled
        self._example_out = example_out

    def __call__(self, *args, **kwargs):
        return self._compiled(*args, **kwargs)

    def forward(self, *args, **kwargs):
        return self._compiled(*args, **kwargs)

    def get_graph(self, optimized=True):
        return self._compiled.get_graph(optimized)

    def graph_json(self):
        return self._compiled.graph_json()

    def memory_plan(self):
        return self._compiled.memory_plan()

    def save(self, path):
        """Save as a .musa model (musa.jit.load, musa_model_load, musa-run)."""
        self._compiled.save(path)

    @property
    def recompile_log(self):
        return self._compiled.recompile_log

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._target, name)

    def __repr__(self):
        return f"TracedModule({self._target!r})"


def _module_forward(module):
    """The module's __call__ (hooks included) as a function to capture,
    named and signed like its forward."""
    from ..nn import Module
    fwd = Module._call_impl

    def forward(*args, **kwargs):
        return fwd(module, *args, **kwargs)

    forward.__qualname__ = f"{type(module).__name__}.forward"
    forward.__wrapped__ = module.forward  # its signature, for inspect and _args.param_names
    return forward


def _compare(a, b, path="output"):
    """Raise unless the compiled result b matches the eager result a."""
    la, lb = [], []
    _args.flatten(a, la)
    _args.flatten(b, lb)
    if len(la) != len(lb):
        raise RuntimeError(f"[jit.trace] check_trace: {path} structure differs")
    for i, (x, y) in enumerate(zip(la, lb)):
        if tuple(x.shape) != tuple(y.shape) or x.dtype != y.dtype:
            raise RuntimeError(f"[jit.trace] check_trace: {path} {i} is {y.dtype}"
                               f"{tuple(y.shape)} compiled but {x.dtype}{tuple(x.shape)} eager")
        if x.numel() and x.dtype.is_floating_point:
            d = float((x.double() - y.double()).abs().max())
            tol = 1e-5 * (1 + float(x.double().abs().max()))
            if not d <= tol:
                raise RuntimeError(f"[jit.trace] check_trace: {path} {i} differs from the "
                                   f"eager result by {d:.3g}")
        elif x.numel() and not bool((x == y).all()):
            raise RuntimeError(f"[jit.trace] check_trace: {path} {i} differs from eager")


def trace(module_or_fn, example_inputs, check_trace=True, config=None):
    """Capture a module or function now, from example inputs.

    Every host read while tracing becomes a guard checked at each call; a
    failed guard retraces (logged). With check_trace, the compiled graph is
    run on the example inputs and compared with the eager result."""
    from ..nn import Module
    if not isinstance(example_inputs, (tuple, list)):
        example_inputs = (example_inputs,)
    if isinstance(module_or_fn, Module):
        fn = _module_forward(module_or_fn)
        extra = _training_flag(module_or_fn)
    elif callable(module_or_fn):
        fn, extra = module_or_fn, None
    else:
        raise TypeError(f"[jit.trace] expected a Module or a function, got "
                        f"{type(module_or_fn).__name__}")
    cfg = config or Config()
    if cfg.capture == "auto":  # trace means trace: the example call runs eagerly
        cfg = _copy.copy(cfg)
        cfg.capture = "trace"
    compiled = CompiledFunction(fn, cfg, extra_key=extra)
    out = compiled(*example_inputs)
    if check_trace and compiled._last is not None:
        again = compiled(*example_inputs)
        _compare(out, again)
    return TracedModule(module_or_fn, compiled, out)


def save(obj, path):
    """Save a compiled function, a traced module or a compiled Module."""
    from ..nn import Module
    compiled = getattr(obj, "_compiled", None) or (
        obj.__dict__.get("_compiled_call") if isinstance(obj, Module) else obj)
    if not isinstance(compiled, CompiledFunction):
        raise TypeError(f"[jit.save] expected what musa.jit, musa.jit.trace or Module.compile "
                        f"returned, got {type(obj).__name__}")
    compiled.save(path)


def _training_flag(module):
    """The extra key of a compiled module: its training flag."""
    return lambda: module.training


def compile_module(module, config=None):
    """Compile a Module in place: its calls run a compiled forward."""
    fn = _module_forward(module)
    object.__setattr__(module, "_compiled_call",
                       CompiledFunction(fn, config or Config(), extra_key=_training_flag(module)))
    return module


class _JitModule(types.ModuleType):
    """``musa.jit`` is both this module and the decorator."""

    def __call__(self, fn=None, **kwargs):
        return jit(fn, **kwargs)


sys.modules[__name__].__class__ = _JitModule
