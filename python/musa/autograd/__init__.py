"""musa.autograd: gradients of eager computations.

Every op on tensors that require grad records a node (``t.grad_fn``) on
the tape; ``backward`` / ``grad`` run the C engine over it. See
docs/autograd.md.
"""
import functools
import warnings

from .. import _C
from .function import Function, FunctionCtx  # noqa: F401

Tensor = _C.Tensor
Variable = Tensor  # old name, kept for code that still uses it

__all__ = [
    "backward", "grad", "no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "Function",
    "gradcheck", "gradgradcheck", "detect_anomaly", "set_detect_anomaly", "Variable",
    "GradcheckError",
]


def _tensors(x, what, who):
    if isinstance(x, Tensor):
        return (x,)
    if x is None:
        return None
    try:
        return tuple(x)
    except TypeError:
        raise TypeError(f"[{who}] {what} must be a Tensor or a sequence of Tensors, not "
                        f"{type(x).__name__}") from None


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate into .grad the gradients of tensors (weighted by
    grad_tensors) with respect to the graph leaves (or only `inputs`)."""
    tensors = _tensors(tensors, "tensors", "backward")
    grads = _tensors(grad_tensors, "grad_tensors", "backward")
    if retain_graph is None:
        retain_graph = create_graph
    if inputs is not None:
        inputs = _tensors(inputs, "inputs", "backward")
        res = _C._grad(tensors, inputs, grads, bool(retain_graph), bool(create_graph), True)
        for t, g in zip(inputs, res):
            if g is None:
                continue
            if t.grad is None:
                t.grad = g if create_graph else g.detach()
            else:
                t.grad = t.grad + g
        return
    _C._backward(tensors, grads, bool(retain_graph), bool(create_graph))


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=False,
         is_grads_batched=False):
    """The gradients of outputs with respect to inputs, as a tuple (nothing
    is accumulated into .grad)."""
    if is_grads_batched:
        raise NotImplementedError("[grad] is_grads_batched is not supported")
    outputs = _tensors(outputs, "outputs", "grad")
    inputs = _tensors(inputs, "inputs", "grad")
    grad_outputs = _tensors(grad_outputs, "grad_outputs", "grad")
    if retain_graph is None:
        retain_graph = create_graph
    res = _C._grad(outputs, inputs, grad_outputs, bool(retain_graph), bool(create_graph), bool(allow_unused))
    return res


class _GradMode:
    """Base of the grad-mode context managers; also usable as decorators."""

    enabled = None

    def __enter__(self):
        self.prev = _C._set_grad_enabled(self.enabled)

    def __exit__(self, *exc):
        _C._set_grad_enabled(self.prev)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)
        return wrapper

    def clone(self):
        return self.__class__()


class no_grad(_GradMode):
    """Context manager / decorator: ops inside record nothing."""
    enabled = False


class enable_grad(_GradMode):
    """Context manager / decorator: turn recording back on (e.g. inside no_grad)."""
    enabled = True


class inference_mode(_GradMode):
    """Like no_grad (musa has no separate inference tensors); while one with
    mode=True is entered, is_inference_mode_enabled() is true."""
    _depth = 0

    def __init__(self, mode=True):
        self.enabled = not mode
        self.mode = bool(mode)

    def __enter__(self):
        super().__enter__()
        self.prev_depth = inference_mode._depth
        inference_mode._depth = self.prev_depth + 1 if self.mode else 0

    def __exit__(self, *exc):
        inference_mode._depth = self.prev_depth
        super().__exit__(*exc)

    def clone(self):
        return self.__class__(self.mode)


class set_grad_enabled(_GradMode):
    """set_grad_enabled(mode): as a function call it sets the mode at once;
    as a context manager it restores the previous mode on exit."""

    def __init__(self, mode):
        self.enabled = bool(mode)
        self.prev = _C._set_grad_enabled(self.enabled)

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        _C._set_grad_enabled(self.prev)

    def __call__(self, fn):
        _C._set_grad_enabled(self.prev)
        mode = self.enabled

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            prev = _C._set_grad_enabled(mode)
            try:
                return fn(*args, **kwargs)
            finally:
                _C._set_grad_enabled(prev)
        return wrapper


class GradcheckError(RuntimeError):
    """Analytical and numerical gradients disagree."""


def _check(fn, inputs, eps, atol, rtol, raise_exception, second):
    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    tensors = [x for x in inputs if isinstance(x, Tensor)]
    who = "gradgradcheck" if second else "gradcheck"
    if len(tensors) != len(inputs):
        raise TypeError(f"[{who}] every input must be a Tensor")
    for x in tensors:
        if x.requires_grad and x.dtype is not _C.float64:
            warnings.warn("gradcheck: inputs are not float64; the check may fail for precision reasons")
    try:
        (_C._gradgradcheck if second else _C._gradcheck)(fn, tensors, eps, atol, rtol)
    except ValueError as e:
        if raise_exception:
            raise GradcheckError(str(e)) from None
        return False
    return True


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, **unused):
    """Compare autograd's gradients of func at inputs with central finite
    differences (use float64 inputs). True, or GradcheckError naming the
    output, input and element that differ."""
    return _check(func, inputs, eps, atol, rtol, raise_exception, False)


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
                  **unused):
    """The same check for second derivatives."""
    return _check(func, inputs, eps, atol, rtol, raise_exception, True)


class detect_anomaly:
    """Context manager: a backward node that produces NaN raises an error
    naming the node and the forward line that made it; with check_nan,
    forward ops are checked for NaN too."""

    def __init__(self, check_nan=True):
        self.check_nan = check_nan

    def __enter__(self):
        self.prev = _C.is_anomaly_enabled()
        _C._set_anomaly_enabled(True, self.check_nan)
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime "
                      "and should only be enabled for debugging.", stacklevel=2)
        return self

    def __exit__(self, *exc):
        _C._set_anomaly_enabled(self.prev, self.check_nan)


class set_detect_anomaly:
    def __init__(self, mode, check_nan=True):
        self.prev = _C.is_anomaly_enabled()
        _C._set_anomaly_enabled(bool(mode), check_nan)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _C._set_anomaly_enabled(self.prev)



def __getattr__(name):
    # musa.autograd.functional (jacobian, hessian, vjp, ...), grad_mode and
    # profiler (PyTorch's paths to the same objects) on first use
    if name in ("functional", "grad_mode", "profiler"):
        import importlib
        return importlib.import_module("." + name, __name__)
    raise AttributeError(f"module 'musa.autograd' has no attribute '{name}'")
