"""musa: a deep learning framework with a C core.

Tensors, ops and autograd live in the C extension ``musa._C``; this package
adds the PyTorch-style API on top: ``musa.nn``, ``musa.optim``,
``musa.autograd``, ``musa.utils.data``.

    import musa
    x = musa.tensor([1.0], requires_grad=True)
    y = musa.tensor([2.0], requires_grad=True)
    z = x * y
    z.backward()
    print(x.grad, y.grad, z.grad_fn)   # tensor([2.]) tensor([1.]) <MulBackward ...>
"""
import builtins as _builtins
from sys import modules as _sys_modules

from . import _C
from ._C import (  # noqa: F401  (types, dtypes and the functions not bound by DEF)
    Tensor, dtype, device, float32, float64, float16, bfloat16, int64, int32, int16, int8, uint8,
    set_default_dtype, get_default_dtype, is_grad_enabled, InvalidArgumentError, InvalidTypeError,
)
from ._C import bool as _bool_dtype

# The functions: every binding of musa._C made for this namespace (see
# _C._exports: a DEF in python/musa/_C without PM_NOEXPORT), so a new op
# needs no line here.
globals().update({_name: getattr(_C, _name) for _name in _C._exports})

# dtype aliases (PyTorch's names)
float = float32
double = float64
half = float16
long = int64
int = int32
short = int16
bool = _bool_dtype
cfloat = None

from . import _tensor  # noqa: E402,F401  (Tensor methods written in Python)
from .autograd import no_grad, enable_grad, set_grad_enabled, inference_mode  # noqa: E402
from . import autograd  # noqa: E402,F401
from ._functions import *  # noqa: E402,F401,F403
from ._functions import norm, split, unbind  # noqa: E402,F401
from ._more_functions import *  # noqa: E402,F401,F403
from ._torch_ops import *  # noqa: E402,F401,F403
from ._legacy import *  # noqa: E402,F401,F403
from ._torch_env import *  # noqa: E402,F401,F403
from ._torch_random import *  # noqa: E402,F401,F403
from ._torch_nn_names import *  # noqa: E402,F401,F403
from ._torch_compat import *  # noqa: E402,F401,F403
from ._torch_names_more import *  # noqa: E402,F401,F403
from ._torch_methods_more import *  # noqa: E402,F401,F403
from . import _shared_memory  # noqa: E402,F401  (Tensor.share_memory_, is_shared)
from . import storage  # noqa: E402,F401  (Tensor.untyped_storage, storage, is_set_to)
from .storage import TypedStorage, UntypedStorage, is_storage  # noqa: E402,F401
from ._memory_format import *  # noqa: E402,F401,F403
from ._layout import *  # noqa: E402,F401,F403
from ._memory_format import wrap_factories as _wrap_factories  # noqa: E402
from ._generator import Generator, default_generator  # noqa: E402,F401
from ._generator import with_generator as _with_generator  # noqa: E402
from ._functions import with_out as _with_out  # noqa: E402

# the random functions take generator= (a musa.Generator) as in PyTorch
for _n in ("rand", "randn", "randint", "randperm", "bernoulli", "multinomial", "normal",
           "randint_like", "poisson", "binomial", "standard_gamma", "sample_dirichlet"):
    globals()[_n] = _with_generator(globals()[_n], _n)
# PyTorch's private spellings, which torch.distributions-style code calls
_standard_gamma, _standard_gamma_grad = standard_gamma, standard_gamma_grad  # noqa: F821
_sample_dirichlet = sample_dirichlet  # noqa: F821
# PyTorch's out= on the functions written in Python (the C bindings, and mm,
# bmm, mv and dot, take it themselves): the result is written into out
for _n in ("absolute", "addbmm", "addcdiv", "addcmul", "addmm", "addmv", "addr", "arctan2", "atan2",
           "baddbmm", "deg2rad", "float_power", "fmax", "fmin", "frac", "greater", "greater_equal",
           "heaviside", "hypot", "isneginf", "isposinf", "ldexp", "less", "less_equal", "logit",
           "nan_to_num", "negative", "not_equal", "rad2deg", "sgn", "signbit", "sinc", "xlogy",
           "aminmax", "ger", "inner", "kron", "kthvalue", "mode", "msort", "nanmean", "nanquantile",
           "quantile", "vdot", "median", "nansum", "diff", "norm", "all", "any", "angle", "cross",
           "digamma", "erfinv", "frexp", "lgamma", "polygamma", "cosh", "sinh", "tan", "diag",
           "exp2", "lerp", "log10", "log2", "masked_select", "outer", "square", "bucketize",
           "histc", "index_copy", "narrow_copy", "renorm", "searchsorted", "take_along_dim",
           "cholesky", "cholesky_inverse", "cholesky_solve", "column_stack", "dstack", "hstack",
           "vstack", "row_stack", "inverse", "logaddexp", "logaddexp2", "lu_solve", "lu_unpack",
           "mvlgamma", "triangular_solve", "conj_physical", "nextafter", "matrix_power",
           "bernoulli", "multinomial"):
    globals()[_n] = _with_out(globals()[_n], _n)
for _n in ("rand", "randn", "randint", "randperm", "normal", "logspace"):  # in out's dtype
    globals()[_n] = _with_out(globals()[_n], _n, factory=True)
# the *_like factories and clone take memory_format= (after generator= is bound)
_wrap_factories(_sys_modules[__name__])
from . import cuda  # noqa: E402,F401

__version__ = _C.__version__


def is_tensor(obj):
    """True if obj is a musa Tensor."""
    return isinstance(obj, Tensor)


def _lazy(name):
    import importlib
    return importlib.import_module("musa." + name)


def __getattr__(name):
    # subpackages imported on first use, so `import musa` stays fast
    if name in ("nn", "optim", "utils", "amp", "jit", "profiler", "viz", "library", "backends",
                "accelerator", "linalg", "distributions", "distributed", "onnx", "special",
                "compiler", "func", "random", "testing", "multiprocessing"):
        return _lazy(name)
    if name == "compile":  # torch.compile's place (musa.compiler)
        return _lazy("compiler").compile
    if name == "make_dot":
        return _lazy("viz").make_dot
    if name == "Profiler":  # the seed's spelling of musa.profiler.profile
        return _lazy("profiler").profile
    if name in ("save", "load"):  # musa.serialization (json, zipfile) on first use
        fn = globals()[name] = getattr(_lazy("serialization"), name)
        return fn
    if name == "Config":
        return _lazy("jit").Config
    if name in ("Stream", "Event", "stream", "current_stream", "default_stream", "set_stream",
                "synchronize", "StreamContext", "streams"):
        return getattr(_lazy("streams"), name) if name != "streams" else _lazy("streams")
    if name in ("auto_mixed_graph", "AutoMixedGraph"):
        return getattr(_lazy("_auto_mixed"), name)
    if name == "autocast":  # torch.autocast's place
        return _lazy("amp").autocast
    raise AttributeError(f"module 'musa' has no attribute '{name}'")


del _builtins
