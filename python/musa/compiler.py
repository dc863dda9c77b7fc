"""musa.compile and musa.compiler: PyTorch 2's ``torch.compile`` entry
points on musa.jit.

    model = musa.compile(model)          # an OptimizedModule: calls run a plan
    step = musa.compile(train_step)      # a compiled function (musa.jit)

    @musa.compile(fullgraph=True)        # refuse graph breaks and eager fallbacks
    def f(x): ...

What the arguments mean here (docs/jit.md, "musa.compile"):

* backend: "inductor" (PyTorch's default), "aot_eager" and "musa" compile
  with musa.jit; "eager" runs the function as written (PyTorch's "eager"
  backend runs the captured graph op by op: the same results). A callable
  backend receives a torch.fx.GraphModule, which musa does not build: an
  error.
* mode: one of PyTorch's four names; musa has one compiled mode (a plan
  that runs without per-op dispatch, which is what "reduce-overhead" asks
  for), so all four compile alike.
* options: musa.Config's settings as a dict (``{"memory_budget": 1 << 30}``)
  or a musa.Config.
* dynamic: None, False or True. Every value compiles one variant per input
  shape (musa.Config.max_variants of them, then the function runs eagerly,
  with a warning); dims that should vary without recompiling are named with
  ``options={"dynamic": {arg: {dim: (min, max)}}}``.
* fullgraph: True raises where the function is not one graph: a host read
  (``t.item()``, ``if t > 0:``) that musa.jit would cut the graph at, or a
  call that would run eagerly. Found before anything runs when the capture
  is symbolic (the default).
* disable: True returns the model or function unchanged.
"""
from . import _capture
from .jit import _compiled, _module_forward, _training_flag
from .jit._config import Config
from .nn import Module

__all__ = ["compile", "OptimizedModule", "reset", "is_compiling", "list_backends"]

_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
_COMPILED = ("inductor", "aot_eager", "musa")  # backends that compile with musa.jit


def list_backends(exclude_tags=("debug", "experimental")):
    """The backend names musa.compile takes ("eager" and "aot_eager", PyTorch's
    debug backends, only when exclude_tags is empty)."""
    debug = exclude_tags is not None and "debug" in exclude_tags
    return sorted(("inductor", "musa") if debug else ("aot_eager", "eager", "inductor", "musa"))


def is_compiling():
    """True while musa.jit records a capture on this thread."""
    return _capture.capturing()


def reset():
    """Forget every compiled variant of every compiled function and module:
    their next calls capture again (PyTorch's torch.compiler.reset)."""
    for fn in list(_compiled._ALL):
        fn._drop_plans()


def _config_of(options):
    if options is None:
        return Config()
    if isinstance(options, Config):
        return options
    if not isinstance(options, dict):
        raise TypeError(f"[compile] options must be a dict of musa.Config settings or a "
                        f"musa.Config, got {type(options).__name__}")
    import inspect
    known = [p for p in inspect.signature(Config).parameters]
    for k in options:
        if k not in known:
            raise ValueError(f"[compile] unknown option {k!r}; options are musa.Config's "
                             f"settings: {', '.join(known)}")
    return Config(**options)


def _check(fullgraph, dynamic, backend, mode, options):
    if not isinstance(fullgraph, bool):
        raise TypeError(f"[compile] fullgraph must be a bool, got {fullgraph!r}")
    if dynamic not in (None, True, False):
        raise TypeError(f"[compile] dynamic must be None, True or False, got {dynamic!r}")
    if mode is not None and options is not None:
        raise RuntimeError("[compile] either mode or options can be given, not both")
    if mode is not None and mode not in _MODES:
        raise RuntimeError(f"[compile] unrecognized mode={mode!r}, should be one of: "
                           f"{', '.join(_MODES)}")
    if callable(backend) and not isinstance(backend, str):
        raise NotImplementedError(
            f"[compile] backend={getattr(backend, '__name__', backend)!r}: a callable backend "
            f"takes a torch.fx.GraphModule, which musa does not build; backends are "
            f"{', '.join(list_backends(()))}")
    if backend not in list_backends(()):
        raise ValueError(f"[compile] invalid backend {backend!r}; backends are "
                         f"{', '.join(list_backends(()))}")


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None,
            options=None, disable=False):
    """Compile a function or a musa.nn.Module, as torch.compile does (the
    module docstring says what each argument means here). Without a model,
    a decorator."""
    _check(fullgraph, dynamic, backend, mode, options)
    if model is None:
        return lambda m: compile(m, fullgraph=fullgraph, dynamic=dynamic, backend=backend,
                                 mode=mode, options=options, disable=disable)
    if not callable(model):
        raise TypeError(f"[compile] expected a function or a Module, got "
                        f"{type(model).__name__}")
    if disable:
        return model
    config = _config_of(options)
    if isinstance(model, Module):
        return OptimizedModule(model, config if backend in _COMPILED else None, fullgraph)
    if backend not in _COMPILED:
        return model
    return _compiled.CompiledFunction(model, config, fullgraph=fullgraph)


class OptimizedModule(Module):
    """What musa.compile returns for a Module: the module as ``_orig_mod``
    (its parameters, buffers and state_dict keys under that name, as in
    PyTorch), its calls running the compiled forward; train() and eval()
    reach it, and its attributes read through."""

    def __init__(self, mod, config, fullgraph=False):
        super().__init__()
        self._orig_mod = mod
        self._compile(config, fullgraph)

    def _compile(self, config, fullgraph):
        """The compiled forward of _orig_mod (None: the eager backend)."""
        compiled = None
        if config is not None:
            mod = self._orig_mod
            compiled = _compiled.CompiledFunction(_module_forward(mod), config,
                                                  extra_key=_training_flag(mod),
                                                  fullgraph=fullgraph)
        object.__setattr__(self, "_compiled_forward", compiled)

    def __getstate__(self):
        # plans are bound to this module: copies and pickles keep how it was
        # compiled and compile again on their first call
        state = super().__getstate__()
        compiled = state.pop("_compiled_forward", None)
        state["_compile_with"] = (None if compiled is None
                                  else (compiled.config, compiled._fullgraph))
        return state

    def __setstate__(self, state):
        how = state.pop("_compile_with", None)
        super().__setstate__(state)
        self._compile(*(how or (None, False)))

    def forward(self, *args, **kwargs):
        run = self.__dict__["_compiled_forward"]
        return (run or self._orig_mod)(*args, **kwargs)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name.startswith("__") or name == "_orig_mod":
                raise
            return getattr(self._orig_mod, name)

    def __repr__(self):
        return f"OptimizedModule({self._orig_mod!r})"
