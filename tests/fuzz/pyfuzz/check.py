"""check.py - the child process: runs calls and judges them.

For each call: run its source with musa; classify an exception (standard
class and "[name]" message, or a finding); touch the result as a user would;
then run the same source with torch and compare (shapes, then values within
the dtype's tolerance), except where the answer is random, unspecified, or
known to differ for a stated reason (the tables below). Results go to the
parent as JSON lines on a pipe (see child()).
"""
import json
import math
import os
import re
import warnings

from .api import api
from .gen import FLOATS, INT_RANGE, generate

PYTHON_SIG_ERRORS = re.compile(
    r"(takes|expected) .*(positional )?arguments?|got an unexpected keyword argument|"
    r"missing \d+ required|got multiple values for|takes no (keyword )?arguments|"
    r"takes exactly one argument|argument after \* must be|must be a mapping")
# Python's own words for an operator or format() no type supports
# (a tuple or list on the left of + or *: Python's sequence concatenation
# and repetition, before any __radd__; PyTorch raises the same)
PYTHON_OP_ERRORS = re.compile(r"unsupported operand type|not supported between instances of|"
                              r"bad operand type for|unsupported format string passed to|"
                              r"Unknown format code|can only concatenate (tuple|list|str)|"
                              r"can't multiply sequence by non-int")
STANDARD = ("TypeError", "ValueError", "IndexError", "RuntimeError", "MemoryError",
            "NotImplementedError", "OverflowError", "ZeroDivisionError", "BufferError")

# Results that are random or unspecified: compared by shape and dtype only.
RANDOM = {"rand", "randn", "randint", "randperm", "rand_like", "randn_like", "bernoulli",
          "bernoulli_", "dropout", "normal_", "uniform_", "exponential_", "empty", "empty_like",
          "new_empty", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
          "feature_alpha_dropout", "gumbel_softmax", "rrelu", "rrelu_", "multinomial", "normal",
          "randint_like", "random_", "cauchy_", "log_normal_", "geometric_", "empty_strided",
          "fractional_max_pool2d", "fractional_max_pool3d", "fractional_max_pool2d_with_indices",
          "fractional_max_pool3d_with_indices", "poisson", "binomial", "standard_gamma",
          "_standard_gamma", "sample_dirichlet", "_sample_dirichlet", "feature_dropout",
          "feature_dropout_", "dropout_", "alpha_dropout_", "feature_alpha_dropout_",
          "new_empty_strided", "new",  # (Tensor.new(sizes) is uninitialised)
          # the elements past the old ones are uninitialised in torch (zeros in musa)
          "resize_", "resize_as_",
          # randomized SVD: a random sketch, and the singular vectors' signs follow it (seed
          # 12887: pca_lowrank's U column of 0.2352 against torch's -0.2352); test_histogramdd
          # compares the singular values and the reconstruction
          "svd_lowrank", "pca_lowrank"}
# Results not compared with torch at all, with the reason.
NO_COMPARE = {
    "data_ptr": "an address", "__hash__": "an id", "__repr__": "text", "__format__": "text",
    "unique": "the order with sorted=False is unspecified (compared in test_breadth)",
    "type": "type names differ (torch.FloatTensor)", "get_rng_state": "different generators",
    "initial_seed": "different generators", "memory_stats": "different allocators",
    "get_num_threads": "machine dependent", "__dlpack__": "a capsule",
    "get_num_interop_threads": "musa's inter-op work shares the intra-op team (docs/pytorch.md)",
    "seed": "a random seed from the OS", "__reduce_ex__": "pickle",
    "element_size": "same", "is_pinned": "same",
    # index results where ties (and NaN) allow several right answers
    "argsort": "ties", "argmax": "ties", "argmin": "ties",
}
# (values, indices) results whose indices may differ on ties: values only.
TIE_INDICES = {"max", "min", "sort", "topk", "max_pool1d", "max_pool2d", "max_pool3d", "median", "nanmedian",
               "kthvalue", "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d",
               "max_pool1d_with_indices", "max_pool2d_with_indices", "max_pool3d_with_indices",
               "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
               "adaptive_max_pool3d_with_indices"}
# PyTorch 1.13 (the reference here) is wrong: not compared, with the reason;
# each function lists (condition, reason) pairs, any of which skips it
TORCH_WRONG = {
    "conv_transpose2d": (("bfloat16", "output shapes of bfloat16 inputs are wrong (mkldnn path)"),),
    "histc": (("bfloat16", "bins bfloat16 values by bfloat16 arithmetic (musa places them exactly)"),
              # seed 6077: [nan, nan, 0.2] with min 0, max 1 counts 3 in the first bin
              ("nan", "counts NaN in the first bin (a NaN cast to an integer bin index)")),
    # seed 4940: [1.871] expanded to 3 gave NaN in bfloat16 and 4.6e-41 in float32
    "median": (("expanded", "the median along a dim of an expanded (stride 0) tensor is garbage"),),
    # seed 6656: [2.072] expanded to 2 gave 0.0 or 1.2e-14 (bfloat16), 0.0 (float32), as median
    "nanmedian": (("expanded", "the median along a dim of an expanded (stride 0) tensor is garbage"),),
    # seed 5834: aminmax(tensor(2), dim=0, keepdim=True) is (1,), amax's is () (and a warning
    # that it resized its output)
    "aminmax": (("0-d", "keepdim on a 0-d input resizes its outputs to (1,)"),),
    # seed 8909: bfloat16 group_norm of a (2, 2, 1) input expanded to (2, 2, 4) gave
    # 2 and 0 (float32 torch and musa: 1.104 and -3.519)
    "group_norm": (("expanded", "group_norm of an expanded (stride 0) input is garbage"),
                   # seed 8977: one group of (-1.557, -1.81), weight 2.209, bias 0.075 gave 2.5
                   # (float32 torch 2.283, musa's bfloat16 2.281)
                   ("bfloat16", "bfloat16 group_norm loses its statistics' precision"),
                   # seed 13393: groups of one element normalize to nonzero in float32
                   # (-1.2e-4 for -3.925 times weight -2.055; float64 gives 0, as musa does)
                   ("one-element groups", "one-element groups normalize to nonzero values")),
    # seed 9022: y of shape (0,) and x of shape (1, 0) gave shape (0, 0), broadcasting the
    # empty x's differences; musa returns the empty y (its result for any empty y)
    "cumulative_trapezoid": (("empty", "an empty y with a higher-rank x takes x's shape"),),
    # seed 13243: pixel_unshuffle of a (1, 0, 2) uint8 tensor by 2 gave (1, 0, 2), where a
    # (1, 2, 2) one gives (4, 1, 1); musa gives (4, 0, 1), the shape rule of any size
    "pixel_unshuffle": (("empty", "an empty input comes back in its own shape"),),
    "pixel_shuffle": (("empty", "an empty input comes back in its own shape"),),
    # seed 13542: narrow_copy of a transposed (4, 2, 5) float64 tensor along dim 1 read the
    # elements in the memory's order (10. where the view holds 20.: arange(40.) reshaped
    # (2, 4, 5) and transposed)
    "narrow_copy": (("non-contiguous", "a non-contiguous input is read in memory order"),),
    # seed 14043: gcd(int8 -5, -128) is -1 (musa and NumPy: 1); |-128| wraps to -128 in int8
    "gcd": (("integer minimum", "|x| of the type's minimum wraps, and the gcd comes out negative"),),
    "gcd_": (("integer minimum", "|x| of the type's minimum wraps, and the gcd comes out negative"),),
    # seed 9314: softsign(int8 127) is -0.992: 1 + |x| computed in int8 wraps to -128
    "softsign": (("int8", "1 + |x| wraps around in 8-bit integers"),),
    # seeds 23522, 23557: softmin(int8 [127, -128], dtype=float64) is softmax([-127, -128]):
    # -x is taken in the input's type, where -(-128) wraps, before the cast to dtype; and
    # in uint8 every nonzero -x wraps (-5 is 251)
    "softmin": (("integer minimum", "-x of the type's least value wraps before the cast"),
                ("uint8", "-x of an unsigned value wraps before the cast")),
    # seed 9359: unique_consecutive(x, True) returns an empty inverse (return_inverse=True
    # spelled out gives the right one)
    "unique_consecutive": (("positional flag", "a positional return_inverse gives an empty inverse"),),
    # seed 11868: training batch_norm of a channel holding -3e38 and 2.459 gave the bias
    # (2.124) in float32 and bfloat16: the variance overflowed to inf (float64 torch and
    # musa in every dtype: x-hat = -1 and 1, 2.487 and 1.761)
    "batch_norm": (("square overflow", "the variance overflows where the values' squares do"),),
    # seed 12423: layer_norm over (1,) of bfloat16 1.524, weight -1.55, gave 0.918 (float32
    # 3e-6, float64 -6e-15); a row of one element is its own mean: musa gives 0
    "layer_norm": (("one-element rows", "a row of one element normalizes to nonzero"),),
    # seed 17949: bfloat16 dot of (3.891, -2.516, -3.375) and (1.547, 3.984, -1.156) gave
    # -0.0625; exact (and float32 torch, and musa) -0.1025: the sum is kept in bfloat16
    "dot": (("bfloat16", "bfloat16 dot products accumulate in bfloat16"),),
    # seed 17952: gradient of int8 (-1, 127) along its dim gave -64 at the ends: 127 - (-1)
    # taken in int8 wraps to -128 (musa: 64, the difference of the values)
    "gradient": (("int8", "integer differences are taken in their own type, which wraps"),
                 ("int16", "integer differences are taken in their own type, which wraps")),
    # seed 15480: bfloat16 dist(x, y, p=0.2) over 60 elements gave 3.070e9 against 2.8286e9
    # exact (float64 from the same bfloat16 inputs; float32 torch 2.8286e9); musa's bfloat16
    # 2.8018e9 is within 2 bfloat16 ulp
    "dist": (("bfloat16", "bfloat16 p-norms lose their sum's precision"),),
}
# seed 7562: 1.13 masks a shift count to the register's width (int32 -6 << 5
# and << -1 differ); musa shifts as NumPy and PyTorch 2 (docs/pytorch.md)
for _n in ("bitwise_left_shift", "bitwise_right_shift", "__lshift__", "__rshift__"):
    for _f in (_n, _n + "_"):
        TORCH_WRONG[_f] = (("shift count", "a count below 0 or past the width is masked"),)

# seed 8248: polygamma(1, -4) is inf (a pole); 1.13 gives 8.1e13 in float32
# and 4.1e31 in float64 at negative integers (n >= 1; 0 is inf as it should be)
for _f in ("polygamma", "polygamma_"):
    TORCH_WRONG[_f] = (("pole", "finite values at the poles, the negative integers"),)

# seed 10327: igamma(1e-40, 0.242) is 0 in float32 (1 - 1.1e-40 is right), and
# igamma(1e-38, x) above 1: subnormal a are mishandled (float64 is right)
for _f in ("igamma", "igamma_", "igammac", "igammac_", "gammainc", "gammaincc"):
    TORCH_WRONG[_f] = (("subnormal", "wrong values at subnormal float32 arguments"),)

# seed 10545: trapezoid(int8 [-6, -128]) is -195 (and cumulative_trapezoid 61):
# neighbouring heights are added in the integer type (musa: -67, float32's)
for _f in ("trapezoid", "trapz", "cumulative_trapezoid"):
    TORCH_WRONG[_f] = (("int8", "integer heights are added in their own type, which wraps"),
                       ("int16", "integer heights are added in their own type, which wraps"))

# i0(inf) and i1(+-inf) are NaN in 1.13 (exp(x) i0e(x) = inf * 0); musa's are +-inf
for _f in ("i0", "i0_", "i1"):
    TORCH_WRONG[_f] = (("inf", "NaN at the infinities, where I0 and I1 are infinite"),)

# bessel_j0/j1/y0/y1(+-inf) and airy_ai(inf) are NaN in 1.13; the limits are 0 (musa's)
for _f in ("bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "airy_ai"):
    TORCH_WRONG[_f] = (("inf", "NaN at the infinities, where J, Y (and Ai at +inf) tend to 0"),)

# seed 8702: celu(x, alpha=1e308) is alpha expm1(x / alpha) ~ x in musa; 1.13
# computes exp(x / alpha) - 1, which is 0 once x / alpha is below 1e-16
for _f in ("celu", "celu_"):
    TORCH_WRONG[_f] = (("huge number", "exp(x / alpha) - 1 loses x / alpha for a huge alpha"),)
# seed 9914: lp_pool1d/2d of a bool input is 0 in 1.13 (the power and the
# sum in bool); musa pools the values as numbers, as float inputs do
# seed 19188: lp_pool1d(int64 [-6, 1], 2, 2) is 6 in 1.13: the mean of the
# squares, 18.5, is taken in int64 (18) before the root; musa gives sqrt(37)
for _f in ("lp_pool1d", "lp_pool2d"):
    TORCH_WRONG[_f] = (("bool", "bool inputs pool to 0 (pow and sum kept in bool)"),
                       ("integer", "integer inputs are averaged in their own type, which truncates"))

# ndtr(x) for x < -5: 1.13 computes 1 + erf(x / sqrt 2) and loses the tail
# (ndtr(-8.2) is 1.11e-16, exactly 1.20e-16); musa's erfc keeps it
TORCH_WRONG["ndtr"] = (("below -5", "digits lost in the lower tail (1 + erf)"),)


def namespaces():
    """Globals for musa's and torch's run of the same source (torch's is None
    when torch is missing)."""
    import copy
    import operator
    import pickle

    import numpy as np

    import musa
    import musa.nn.functional as F
    base = {"math": math, "nan": math.nan, "inf": math.inf, "np": np, "copy": copy,
            "operator": operator, "pickle": pickle}
    ours = dict(base, musa=musa, F=F)
    try:
        import torch
        import torch.nn.functional as TF
        torch.set_num_threads(1)
        theirs = dict(base, musa=torch, F=TF)
    except ImportError:
        theirs = None
    return ours, theirs


def classify(exc, form, target):
    """None for an exception a caller may expect, else why it is a finding."""
    # musa.InvalidArgumentError is a ValueError (and a RuntimeError): the
    # first standard class in its MRO names it
    name = next((c.__name__ for c in type(exc).__mro__
                 if c.__module__ == "builtins" and c.__name__ in STANDARD), None)
    msg = str(exc)
    if name is None:
        return f"{type(exc).__name__} is not a standard exception class"
    if msg.startswith("["):
        return None
    if name == "TypeError" and PYTHON_SIG_ERRORS.search(msg):
        return None  # Python's own argument-count / keyword errors
    if name in ("TypeError", "ValueError") and form in ("binop", "unop", "index") and \
            PYTHON_OP_ERRORS.search(msg):
        return None  # every operand type returned NotImplemented: Python says so
    if name == "BufferError" and target == "musa.from_dlpack":
        return None  # the producer cannot export (the array API's own exception)
    return "message does not start with [name]"


TORCH_LIMITS = re.compile(r"not implemented for|not supported|does not support|only supports|"
                          r"is not implemented|Unsupported|unsupported|NYI")


def torch_target_exists(t, torch_ns):
    """Whether torch has the same function (so a comparison means something)."""
    if torch_ns is None or t.short in NO_COMPARE:
        return False
    if t.form == "fn":
        mod = torch_ns["musa"] if t.name.startswith("musa.") else torch_ns["F"]
        return hasattr(mod, t.short)
    if t.form == "method":
        return hasattr(torch_ns["musa"].Tensor, t.short)
    return t.form != "prop" or hasattr(torch_ns["musa"].Tensor, t.short)


BEFORE = "__args_before_the_call__"  # an in-place call's arguments, as they were


def in_place(name):
    """May the call write into its first argument (add_, __iadd__; some
    dunders that do not, such as __add__, are taken too)?"""
    return name.endswith("_")


def clone_arg(v):
    """A tensor argument's copy (a small one), else the argument."""
    clone = getattr(v, "clone", None)
    if clone is None or not hasattr(v, "shape") or numel(v) > LARGE:
        return v
    try:
        return clone()
    except Exception:  # noqa: BLE001 - the argument as it is
        return v


def run_source(call, ns):
    """Run a call's source in a copy of ns; return (namespace, exception, stage)."""
    env = dict(ns)
    try:
        exec("\n".join(call.lines), env)
    except BaseException as e:  # noqa: BLE001 - reported
        if isinstance(e, KeyboardInterrupt):
            raise
        return env, e, "args"
    if in_place(call.target.short):  # the conditions of TORCH_WRONG read the inputs
        env[BEFORE] = {k: clone_arg(v) for k, v in env.items() if re.fullmatch(r"a\d+", k)}
    try:
        exec(call.call, env)
    except BaseException as e:  # noqa: BLE001 - reported
        if isinstance(e, KeyboardInterrupt):
            raise
        return env, e, "call"
    return env, None, "ok"


LARGE = 1 << 20  # no materialisation of results beyond this many elements


def numel(x):
    try:
        return math.prod(tuple(x.shape))
    except Exception:  # noqa: BLE001
        return 0


def exercise(x, depth=0):
    """Touch a musa result as a user would (repr, conversion), so a result
    with a broken shape, stride or storage shows up now."""
    import musa
    if isinstance(x, musa.Tensor):
        x.shape, x.stride(), x.dtype, x.is_contiguous()
        if math.prod(max(d, 1) for d in x.shape) <= 4096:
            repr(x)
            x.tolist()
    elif isinstance(x, (tuple, list)) and depth < 3:
        for y in list(x)[:16]:
            exercise(y, depth + 1)


def to_array(x, lib):
    """float64 / int64 / bool numpy copy of a tensor of musa or torch."""
    import numpy as np
    d = str(x.dtype).split(".")[-1]
    x = x.detach()
    if d == "bool":
        return np.asarray(x.tolist(), dtype=bool).reshape(tuple(x.shape))
    if d in FLOATS:
        return np.asarray(x.to(lib.float64).tolist(), dtype=np.float64).reshape(tuple(x.shape))
    return np.asarray(x.to(lib.int64).tolist(), dtype=np.int64).reshape(tuple(x.shape))


RTOL = {"float64": 1e-6, "float32": 1e-4, "float16": 1e-2, "bfloat16": 3e-2}


def compare(a, b, musa, torch, path="out", keep=None, floor=0.0):
    """None if musa's a agrees with torch's b, else what differs (only
    where keep is true, when given); floor: the least relative tolerance
    (input_rtol)."""
    import numpy as np
    if isinstance(a, musa.Tensor) and isinstance(b, torch.Tensor):
        if tuple(a.shape) != tuple(b.shape):
            return f"{path}: shape {tuple(a.shape)} vs torch {tuple(b.shape)}"
        if numel(a) > LARGE:
            return None
        da, db = str(a.dtype).split(".")[-1], str(b.dtype).split(".")[-1]
        if da != db:  # another promotion rule: values computed differently (logged)
            return f"dtype: {path}: {da} vs torch {db}"
        x, y = to_array(a, musa), to_array(b, torch)
        if da in FLOATS or db in FLOATS:
            rtol = max(RTOL.get(da, 0), RTOL.get(db, 0), floor, 1e-6)
            x, y = x.astype(np.float64), y.astype(np.float64)
            fin = np.isfinite(y)
            scale = max(1.0, float(np.abs(y[fin]).max()) if fin.any() else 1.0)
            same = np.isclose(x, y, rtol=rtol, atol=rtol * scale, equal_nan=True)
            # a float result cast to int in one of them: compare as floats
        else:
            same = x.astype(np.int64) == y.astype(np.int64)
        if keep is not None:
            same = np.asarray(same) | ~keep
        if not np.all(same):
            k = np.argwhere(~np.asarray(same))[0]
            finite = np.isfinite(x[tuple(k)]) and np.isfinite(y[tuple(k)])
            return (("" if finite else "non-finite: ") + f"{path}: values differ at {tuple(int(v) for v in k)}: {x[tuple(k)]!r} vs "
                    f"torch {y[tuple(k)]!r} (dtypes {da}, {db})")
        return None
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        if len(a) != len(b):
            return f"{path}: length {len(a)} vs torch {len(b)}"
        for k, (x, y) in enumerate(zip(a, b)):
            d = compare(x, y, musa, torch, f"{path}[{k}]", floor=floor)
            if d:
                return d
        return None
    if isinstance(a, (bool, int, float)) and isinstance(b, (bool, int, float)):
        if isinstance(a, float) or isinstance(b, float):
            if math.isnan(a) and math.isnan(b):
                return None
            if math.isclose(a, b, rel_tol=1e-3, abs_tol=1e-4) or a == b:
                return None
        elif a == b:
            return None
        return f"{path}: {a!r} vs torch {b!r}"
    if a is None or b is None:
        return None if a is b else f"{path}: {a!r} vs torch {b!r}"
    if type(a).__name__ in ("dtype", "device") or isinstance(a, str):
        if str(a).split(".")[-1] == str(b).split(".")[-1] or isinstance(a, str):
            return None
        # a dtype musa does not have (complex: seed 6371's int8 with uint8 gave
        # int32 before musa had int16): another promotion rule, logged
        lacks = type(b).__name__ == "dtype" and not hasattr(musa, str(b).split(".")[-1])
        return ("dtype: " if lacks else "") + f"{path}: {a} vs torch {b}"
    return None  # other objects (grad_fn, arrays): not compared


# Conversions: a float out of the integer type's range converts to anything
# (C leaves it undefined; PyTorch wraps, musa saturates)
CASTS = {"byte", "char", "int", "long", "short", "to", "type", "type_as", "__int__",
         "__index__", "copy_", "new_tensor"}


def cast_mask(fn, env, call, out, musa):
    """Where a float-to-integer conversion is defined, or None."""
    import numpy as np
    if fn in ("linspace", "arange", "full") and isinstance(out, musa.Tensor) and \
            str(out.dtype).split(".")[-1] in INT_RANGE:
        # values computed in float64, then converted (out of range: see CASTS)
        lo, hi = INT_RANGE[str(out.dtype).split(".")[-1]]
        x = to_array(out, musa)
        return (x > lo) & (x < hi)
    if fn not in CASTS or not call.lines or not isinstance(out, musa.Tensor):
        return None
    # the converted value: the receiver, or copy_'s source, new_tensor's data
    src = env.get(call.lines[1 if fn in ("copy_", "new_tensor") and len(call.lines) > 1 else 0]
                  .split(" = ")[0])
    d = str(out.dtype).split(".")[-1]
    if d not in INT_RANGE:
        return None
    try:
        x = to_array(src, musa) if isinstance(src, musa.Tensor) else np.asarray(src, dtype=np.float64)
        x = np.broadcast_to(x, tuple(out.shape))
    except (TypeError, ValueError):
        return None
    lo, hi = INT_RANGE[d]
    with np.errstate(invalid="ignore"):
        t = np.trunc(x)
        return np.isfinite(x) & (t >= lo) & (t <= hi)


def random_result(fn):
    return fn in RANDOM


def shape_only(a, b, musa, torch, path="out"):
    if isinstance(a, musa.Tensor) and isinstance(b, torch.Tensor):
        if tuple(a.shape) != tuple(b.shape):
            return f"{path}: shape {tuple(a.shape)} vs torch {tuple(b.shape)}"
    return None


def check_call(call, ours, theirs, mark=lambda: None):
    """Run one call in musa (and torch); return its record for the parent.
    mark() is called before torch runs: a crash after it is torch's."""
    import musa
    t = call.target
    rec = {"fn": t.name}
    musa.manual_seed(0)
    env, exc, stage = run_source(call, ours)
    if exc is not None:
        rec["outcome"] = "argerr" if stage == "args" else "raised"
        rec["exc"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        why = classify(exc, t.form, t.name)
        if why:
            rec["finding"] = {"kind": "error", "detail": f"{why}: {rec['exc']}",
                              "stage": stage}
        elif stage == "call" and theirs is not None and torch_target_exists(t, theirs) and \
                not call.big:
            mark()
            tenv, texc, tstage = run_torch(call, theirs, env)
            if tstage == "ok":
                rec["torch"] = "ok"  # musa stricter (logged in the counts only)
        return rec
    rec["outcome"] = "ok"
    out = env.get("out")
    try:
        exercise(out)
    except Exception as e:  # noqa: BLE001 - reported
        rec["finding"] = {"kind": "error", "stage": "result",
                          "detail": f"using the result raised {type(e).__name__}: {str(e)[:300]}"}
        return rec
    if theirs is None or not torch_target_exists(t, theirs) or call.big or \
            torch_wrong(t.short, env, call.call):
        return rec
    if t.short == "storage_offset" and numel(env.get("a0")) == 0:
        return rec  # an empty view's offset is unspecified (musa: 0)
    mark()
    tenv, texc, tstage = run_torch(call, theirs, env)
    if tstage == "args" or tstage == "skip":
        return rec
    if texc is not None:
        msg = f"{type(texc).__name__}: {str(texc)[:300]}"
        rec["torch"] = msg
        if isinstance(texc, (ValueError, RuntimeError, IndexError, TypeError)) and \
                not TORCH_LIMITS.search(str(texc)):
            rec["finding"] = {"kind": "accepted", "detail": f"torch raises {msg}"}
        return rec
    import torch
    rec["torch"] = "ok"
    a, b = out, tenv.get("out")
    fn = t.short
    if random_result(fn):
        diff = shape_only(a, b, musa, torch)
    else:
        if fn in TIE_INDICES and isinstance(a, tuple) and len(a) == 2 and isinstance(b, tuple):
            a, b = a[0], b[0]
            if fn == "topk":  # sorted=False leaves the order open: compare the values as sets
                a, b = a.reshape(-1).sort()[0], b.reshape(-1).sort()[0]
        try:
            diff = compare(a, b, musa, torch, keep=cast_mask(fn, env, call, out, musa),
                           floor=input_rtol(env, musa))
        except Exception:  # noqa: BLE001 - torch's result cannot be read (meta tensors)
            return rec
        if diff is None and (in_place(fn) or "=" in call.call.split("\n")[0][:-1]) and \
                call.lines and not random_result(fn):
            recv = call.lines[0].split(" = ")[0]
            try:
                diff = compare(env.get(recv), tenv.get(recv), musa, torch, path=recv)
            except Exception:  # noqa: BLE001
                pass
    if diff:
        kind = "mismatch"
        if diff.startswith("dtype: "):
            kind = "dtype"
        elif diff.startswith("non-finite") and extreme_inputs(env, musa) or \
                unsafe_conversion(env, musa) or ill_conditioned(fn, env, musa):
            kind = "numerics"  # inf against nan from inputs at the edges, or casts: logged
        rec["finding"] = {"kind": kind, "detail": diff}
    return rec


def args_of(env):
    return [v for k, v in env.items() if re.fullmatch(r"a\d+", k)]


def input_rtol(env, musa):
    """The loosest tolerance of the call's tensor arguments: a result computed
    in bfloat16 and written to a float32 out= tensor is as precise as bfloat16
    (seed 18027: rsqrt of bfloat16 0.2412 into float32, 2.03125 against
    torch's 2.046875, one bfloat16 ulp; the nearest is 2.03125)."""
    return max((RTOL.get(str(v.dtype).split(".")[-1], 0) for v in args_of(env)
                if isinstance(v, musa.Tensor)), default=0)


def torch_wrong(fn, env, src=""):
    import musa
    env = {**env, **env.get(BEFORE, {})}  # an in-place call's arguments as they were
    tensors = [v for v in args_of(env) if isinstance(v, musa.Tensor)]
    return any(wrong_when(what, tensors, musa, env, src) for what, _ in TORCH_WRONG.get(fn, ()))


def wrong_when(what, tensors, musa, env, src):
    import numpy as np
    if what == "shift count":  # the count: the second argument named (a0 << a1, a1 << a0, f(a0, a1))
        names = re.findall(r"\ba\d+\b", src.split("\n")[0])
        out = env.get("out")
        if len(names) < 2 or not isinstance(out, musa.Tensor):
            return False
        count = env.get(names[1])
        count = to_array(count, musa) if isinstance(count, musa.Tensor) else np.asarray(count)
        width = 8 * out.element_size()
        return bool(count.size) and bool(((count < 0) | (count >= width)).any())
    if what == "positional flag":  # the second argument, positional, is True
        names = re.findall(r"\ba\d+\b", src.split("\n")[0])
        return len(names) >= 2 and env.get(names[1]) is True
    if what == "expanded":  # a dim of more than one element at stride 0
        return any(n > 1 and st == 0 for v in tensors for n, st in zip(v.shape, v.stride()))
    if what == "pole":  # a non-positive integer among the values
        return any(numel(v) <= LARGE and bool(((x <= 0) & (x == np.round(x))).any())
                   for v in tensors for x in [to_array(v, musa).astype(np.float64)])
    if what == "huge number":  # a number argument past 1e15
        return any(isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) > 1e15
                   for v in args_of(env))
    if what == "below -5":
        return any(str(v.dtype).split(".")[-1] in FLOATS and numel(v) <= LARGE and
                   bool((to_array(v, musa).astype(np.float64) < -5).any()) for v in tensors)
    if what == "inf":  # an infinity among the values
        return any(str(v.dtype).split(".")[-1] in FLOATS and numel(v) <= LARGE and
                   bool(np.isinf(to_array(v, musa)).any()) for v in tensors)
    if what == "subnormal":  # a nonzero value below float32's smallest normal
        return any(str(v.dtype).split(".")[-1] in FLOATS and numel(v) <= LARGE and
                   bool(((x != 0) & (np.abs(x) < np.finfo(np.float32).tiny)).any())
                   for v in tensors for x in [to_array(v, musa).astype(np.float64)])
    if what == "integer minimum":  # an integer tensor holding its type's least value
        return any(t in ("int8", "int16", "int32", "int64") and numel(v) <= LARGE and
                   bool((to_array(v, musa) == np.iinfo(t).min).any())
                   for v in tensors for t in [str(v.dtype).split(".")[-1]])
    if what == "integer":  # a tensor of an integer dtype (bool is not one)
        return any(str(v.dtype).split(".")[-1] in ("int8", "int16", "int32", "int64", "uint8")
                   for v in tensors)
    if what == "non-contiguous":
        return any(not v.is_contiguous() for v in tensors)
    if what == "one-element groups":  # (N, C, *) input a0 in groups a1 of one element each
        names = re.findall(r"\ba\d+\b", src.split("\n")[0])
        x, groups = (env.get(names[0]), env.get(names[1])) if len(names) >= 2 else (None, None)
        if not isinstance(x, musa.Tensor) or x.dim() < 2 or not isinstance(groups, int) or groups <= 0:
            return False
        return numel(x) // max(x.shape[0], 1) == groups
    if what == "one-element rows":  # normalized_shape, the second argument, holds one element
        names = re.findall(r"\ba\d+\b", src.split("\n")[0])
        shape = env.get(names[1]) if len(names) >= 2 else None
        if isinstance(shape, int) and not isinstance(shape, bool):
            shape = (shape,)
        return isinstance(shape, (tuple, list)) and all(d == 1 for d in shape)
    if what == "square overflow":  # a value whose square is past float32's range
        return any(str(v.dtype).split(".")[-1] in FLOATS and numel(v) <= LARGE and
                   bool((np.abs(to_array(v, musa).astype(np.float64)) > 1.8e19).any())
                   for v in tensors)
    if what == "0-d":
        return any(v.dim() == 0 for v in tensors)
    if what == "empty":
        return any(numel(v) == 0 for v in tensors)
    if what == "nan":
        return any(str(v.dtype).split(".")[-1] in FLOATS and numel(v) <= LARGE and
                   np.isnan(to_array(v, musa)).any() for v in tensors)
    return any(str(v.dtype).endswith(what) for v in tensors)


def extreme_inputs(env, musa):
    """Whether some argument holds inf, nan, or a float near its type's
    limits (huge, or tiny and nonzero)."""
    import numpy as np
    for v in args_of(env):
        if isinstance(v, float) and (not math.isfinite(v) or abs(v) > 6e4 or 0 < abs(v) < 1e-30):
            return True
        if isinstance(v, musa.Tensor) and str(v.dtype).split(".")[-1] in FLOATS and numel(v) <= LARGE:
            x = np.abs(to_array(v, musa))
            if x.size and (not np.isfinite(x).all() or x.max() > 6e4 or ((x > 0) & (x < 1e-30)).any()):
                return True
    return False


NORMALISING = {"batch_norm", "layer_norm", "group_norm", "instance_norm", "normalize",
               "cosine_similarity"}
# reductions that add their input up: their rounding error grows with sum |x|, not |sum x|
SUMMING = {"sum", "nansum", "mean", "nanmean"}
# functions of a square matrix whose rounding error grows with its condition number
CONDITIONED = {"det", "logdet", "slogdet", "inv", "inverse", "solve", "pinv", "matrix_power",
               "cholesky", "cholesky_inverse", "lu", "lu_factor", "cond", "matrix_rank"}


def ill_conditioned(fn, env, musa):
    """A normalisation with a negative eps (undefined), or with an eps
    below 1e-5 in half precision or below 1e-8 in float32 (a constant
    input's variance is the rounding error of its mean, divided by ~0:
    PyTorch's x * scale + (b - mean * scale) then cancels, where musa's
    (x - mean) * scale + b gives b); or a matrix function of a float32
    matrix whose condition number exceeds 1e5 (1e13 in float64): its
    answer is rounding noise (a rank-2 5x5 matrix's slogdet signs); or a
    sum or mean whose terms cancel past float32's precision (cancelling)."""
    if fn in CONDITIONED:
        return any(numerically_singular(v, musa) for v in args_of(env))
    if fn in SUMMING:
        return any(cancelling(v, musa) for v in args_of(env))
    if fn not in NORMALISING:
        return False
    dts = {str(v.dtype).split(".")[-1] for v in args_of(env) if isinstance(v, musa.Tensor)}
    tiny = 1e-5 if dts & {"float16", "bfloat16"} else 1e-8 if "float32" in dts else 0.0
    floats = [v for v in args_of(env) if isinstance(v, float)]
    return any(v < 0 or abs(v) < tiny for v in floats)


def cancelling(v, musa):
    """A float tensor whose terms cancel past what a float32 accumulator
    (PyTorch's, for every dtype but float64) resolves: eps * mean |x| above
    the comparison's tolerance of max(1, |mean x|) (seed 6910: 3e38 and
    -3e38 among ten small values, whose mean musa's float64 sum gave as
    -0.32 and PyTorch's float32 as 0.10)."""
    import numpy as np
    if not isinstance(v, musa.Tensor) or numel(v) == 0 or numel(v) > LARGE:
        return False
    dt = str(v.dtype).split(".")[-1]
    if dt not in FLOATS:
        return False
    x = to_array(v, musa).astype(np.float64).ravel()
    x = x[np.isfinite(x)]
    if x.size == 0:
        return False
    eps = 2.0 ** -53 if dt == "float64" else 2.0 ** -24
    with np.errstate(all="ignore"):
        spread, mean = float(np.abs(x).mean()), abs(math.fsum(x) / x.size)
    return eps * spread > RTOL[dt] * max(1.0, mean)


def numerically_singular(v, musa):
    """A float tensor of square matrices (..., n, n), one of which has a
    condition number (in float64) past what its dtype resolves."""
    import numpy as np
    if not isinstance(v, musa.Tensor) or v.dim() < 2 or v.shape[-1] != v.shape[-2] or \
            v.shape[-1] == 0 or numel(v) > LARGE:
        return False
    dt = str(v.dtype).split(".")[-1]
    if dt not in FLOATS:
        return False
    x = to_array(v, musa).astype(np.float64).reshape(-1, v.shape[-1], v.shape[-1])
    limit = 1e13 if dt == "float64" else 1e5 if dt == "float32" else 1e2
    with np.errstate(all="ignore"):
        if not np.isfinite(x).all():
            return True
        c = np.linalg.cond(x)
    return bool((~np.isfinite(c) | (c > limit)).any())


def unsafe_conversion(env, musa):
    """Whether a dtype= argument converts float data (a tensor, an array, a
    list) holding values outside that integer dtype's range, or a number
    outside an integer tensor's range goes with it (see CASTS)."""
    import numpy as np
    ints = [str(v).split(".")[-1] for v in args_of(env) if isinstance(v, musa.dtype)]
    ints += [str(v.dtype).split(".")[-1] for v in args_of(env) if isinstance(v, musa.Tensor)]
    ints = [d for d in ints if d in INT_RANGE]
    for v in args_of(env):
        if ints and isinstance(v, (int, float)) and not isinstance(v, bool) and \
                any(not (INT_RANGE[d][0] <= v <= INT_RANGE[d][1]) for d in ints):
            return True  # (nan too: musa's casts give 0, C leaves it undefined)
        x = None
        if isinstance(v, musa.Tensor) and str(v.dtype).split(".")[-1] in FLOATS and numel(v) <= LARGE:
            x = to_array(v, musa)
        elif isinstance(v, (np.ndarray, list)):
            try:
                x = np.asarray(v, dtype=np.float64)
            except (TypeError, ValueError):
                pass
        if ints and x is not None:
            for d in ints:
                lo, hi = INT_RANGE[d]
                with np.errstate(invalid="ignore"):
                    if x.size and not (np.isfinite(x) & (x >= lo) & (x <= hi)).all():
                        return True
    return False


def run_torch(call, theirs, env_musa):
    """Torch's run of the same source; stage 'skip' when an argument is too
    big to hand to torch cheaply."""
    import musa
    for k, v in env_musa.items():
        if k.startswith("a") and isinstance(v, musa.Tensor) and numel(v) > LARGE:
            return None, None, "skip"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run_source(call, theirs)


def child(seed, start, end, report_fd, compare_torch):
    """Run calls start..end-1 of the batch `seed`, reporting on report_fd:
    'B <json call>' before each call, 'T <i>' before torch runs it, 'R <json
    record>' after it."""
    warnings.simplefilter("ignore")
    ours, theirs = namespaces()
    if not compare_torch:
        theirs = None
    targets = api()
    rep = os.fdopen(report_fd, "w", buffering=1)
    for i in range(start, end):
        call = generate(targets, seed, i)
        rep.write("B " + json.dumps({"i": i, "fn": call.target.name, "big": call.big,
                                     "src": call.source()}) + "\n")
        rec = check_call(call, ours, theirs, lambda: rep.write(f"T {i}\n"))
        rec["i"] = i
        rep.write("R " + json.dumps(rec) + "\n")
    rep.write("DONE\n")
    rep.close()
