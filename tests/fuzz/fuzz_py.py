"""fuzz_py.py - random calls of musa's whole Python API, compared with PyTorch.

    PYTHONPATH=python /usr/bin/python3 tests/fuzz/fuzz_py.py --seconds 60
    bash run.sh fuzz-py [seconds]        the same against the ASan build
    fuzz_py.py --replay tests/fuzz/crashes/py   every reproducer runs cleanly

Every public function of musa and musa.nn.functional, every Tensor method,
operator and property is called with random arguments: tensors of every
dtype (0-d, empty, non-contiguous views, expanded views of 2**40 and more
elements that nothing materialises), sizes that overflow, Python scalars at
the edges (2**63, 2**70, nan, inf, True), None, lists, strings, dtypes and
devices. Arguments are mostly of the kind the parameter wants (its binding
spec, or its name), so calls get past argument checks; a few are anything.

A call is Python source (one line per argument, then the call), built from
the seed alone, so a call is reproduced by its seed and index, and the same
source evaluated with `musa` bound to torch gives PyTorch's answer.

Batches of calls run in a child process (--child); the parent watches it:
  crash      the child died by a signal, or a sanitizer reported (ASan,
             UBSan), or a small call ran past its time limit. The call is
             re-run alone (then, if that passes, the batch up to it, one call
             after another and minimised) and its reproducer is written to
             tests/fuzz/crashes/py/<function>_<kind>_<hash>.py
  error      an exception other than TypeError, ValueError, IndexError,
             RuntimeError, MemoryError, NotImplementedError, OverflowError,
             or one whose message does not start with "[name]" (Python's own
             argument-count errors aside): SystemError, AttributeError, ...
             Reproducers are written as for crashes.
  mismatch   musa and torch both succeed on the same arguments and disagree
             (shape, or values beyond the dtype's tolerance).
  accepted   musa succeeds where torch rejects the input (logged only: musa
             may legitimately be more permissive).
  slow       a call with huge arguments ran past its time limit (logged only:
             summing 2**40 elements takes that long anywhere).
The first three fail the run (exit status 1). Everything goes to
<out>/findings.jsonl and a summary on stdout.
"""
import argparse
import hashlib
import inspect
import json
import math
import os
import re
import selectors
import signal
import subprocess
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
CRASH_DIR = os.path.join(HERE, "crashes", "py")

# ---------------------------------------------------------------- the API

# Not called, with the reason.
SKIP = {
    # change process-wide state that later calls of the batch would see
    "musa.manual_seed": "seeds the global generator (the child seeds it per call)",
    "musa.set_default_dtype": "changes the dtype of every later tensor",
    "musa.set_num_threads": "changes the thread pool",
    "musa.set_rng_state": "replaces the global generator's state",
    "musa.set_grad_enabled": "switches grad mode globally when called as a function",
    "musa.empty_cache": "frees the allocator's caches (global state)",
    "musa.reset_peak_memory_stats": "resets global counters",
    # take callables (a random one proves nothing)
    "Tensor.register_hook": "takes a callable",
    # classes and modules (constructors of dtypes, devices, context managers)
    "musa.Tensor": "a class", "musa.dtype": "a class", "musa.device": "a class",
    "musa.no_grad": "a class", "musa.enable_grad": "a class", "musa.inference_mode": "a class",
    "F.Tensor": "a class", "F.no_grad": "a class", "F.math": "a module", "F.warnings": "a module",
}

# Results that are random or unspecified: compared by shape and dtype only.
RANDOM = {"rand", "randn", "randint", "randperm", "rand_like", "randn_like", "bernoulli",
          "bernoulli_", "dropout", "normal_", "uniform_", "exponential_", "empty", "empty_like",
          "new_empty"}
# Results not compared with torch at all, with the reason.
NO_COMPARE = {
    "data_ptr": "an address", "__hash__": "an id", "__repr__": "text", "__format__": "text",
    "type": "type names differ (torch.FloatTensor)", "get_rng_state": "different generators",
    "initial_seed": "different generators", "memory_stats": "different allocators",
    "get_num_threads": "machine dependent", "__dlpack__": "a capsule", "__reduce_ex__": "pickle",
    "element_size": "same", "is_pinned": "same",
    # index results where ties (and NaN) allow several right answers
    "argsort": "ties", "argmax": "ties", "argmin": "ties",
}
# (values, indices) results whose indices may differ on ties: values only.
TIE_INDICES = {"max", "min", "sort", "topk", "max_pool2d"}
# PyTorch 1.13 (the reference here) is wrong: not compared, with the reason.
TORCH_WRONG = {
    "conv_transpose2d": ("bfloat16", "output shapes of bfloat16 inputs are wrong (mkldnn path)"),
}

# Tensor operators, called through Python's syntax (so reflected and
# in-place forms run as a user's code would).
BINARY_OPS = {"__add__": "+", "__sub__": "-", "__mul__": "*", "__truediv__": "/",
              "__floordiv__": "//", "__mod__": "%", "__pow__": "**", "__matmul__": "@",
              "__and__": "&", "__or__": "|", "__xor__": "^", "__eq__": "==", "__ne__": "!=",
              "__lt__": "<", "__le__": "<=", "__gt__": ">", "__ge__": ">="}
UNARY_OPS = {"__neg__": "-{}", "__pos__": "+{}", "__abs__": "abs({})", "__invert__": "~{}",
             "__bool__": "bool({})", "__float__": "float({})", "__int__": "int({})",
             "__index__": "operator.index({})", "__len__": "len({})", "__iter__": "list(iter({}))",
             "__reversed__": "list(reversed({}))", "__repr__": "repr({})", "__hash__": "hash({})",
             "__array__": "np.asarray({})", "__dlpack__": "musa.from_dlpack({})",
             "__deepcopy__": "copy.deepcopy({})",
             "__reduce_ex__": "pickle.loads(pickle.dumps({}))"}
PROPERTIES = ["T", "mT", "data", "device", "dtype", "grad", "grad_fn", "is_cuda", "is_leaf",
              "is_meta", "itemsize", "nbytes", "ndim", "requires_grad", "shape"]
SETTABLE = ["data", "grad", "requires_grad"]
INDEXING = ["__getitem__", "__setitem__", "__delitem__", "__contains__", "__format__"]

SPEC_RE = re.compile(r"^\s*(\S+:[TSifbdIVLO](=\S+)?\s*|\*\s*)+$")


class Param:
    """One parameter: its name, its kind (a binding spec letter, or '?' when
    only the name is known), whether it is required and keyword-only."""

    def __init__(self, name, kind, required, kwonly, varargs=False):
        self.name, self.kind, self.required, self.kwonly = name, kind, required, kwonly
        self.varargs = varargs


def spec_params(doc):
    """Parameters of a C binding from its spec ("input:T dim:I=None * dtype:d=None")."""
    params, kwonly = [], False
    for tok in doc.split():
        if tok == "*":
            kwonly = True
            continue
        name, rest = tok.split(":", 1)
        params.append(Param(name, rest[0], "=" not in rest, kwonly, varargs=rest[0] == "V"))
    return params


def sig_params(fn):
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    params = []
    for p in sig.parameters.values():
        if p.name.startswith("_"):
            continue
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            if p.kind == p.VAR_POSITIONAL and p.name == "size":
                params.append(Param("size", "V", True, False, varargs=True))
                continue
            return None  # (*args, **kwargs): unknown
        params.append(Param(p.name, "?", p.default is p.empty, p.kind == p.KEYWORD_ONLY))
    return params


def params_of(fn):
    doc = getattr(fn, "__doc__", None) or ""
    if SPEC_RE.match(doc):
        return spec_params(doc)
    return sig_params(fn)


class Target:
    """A callable of the API: name ("musa.add", "F.conv2d", "Tensor.add"),
    form ("fn", "method", "binop", "unop", "prop", "set", "index") and its
    parameters (for methods, without the receiver)."""

    def __init__(self, name, form, params):
        self.name, self.form, self.params = name, form, params
        self.short = name.split(".")[-1]


def api():
    """Every target, in a fixed order (the seed alone decides the calls)."""
    import musa
    import musa.nn.functional as F
    targets = []
    for prefix, mod in (("musa", musa), ("F", F)):
        for name in sorted(dir(mod)):
            full = f"{prefix}.{name}"
            fn = getattr(mod, name)
            if name.startswith("_") or full in SKIP or not callable(fn) or isinstance(fn, type):
                continue
            targets.append(Target(full, "fn", params_of(fn)))
    for name in sorted(dir(musa.Tensor)):
        full = f"Tensor.{name}"
        if name.startswith("_") or full in SKIP or name in PROPERTIES:
            continue
        fn = getattr(musa.Tensor, name)
        if not callable(fn):
            continue
        params = params_of(fn)
        if params is None:  # a Python wrapper taking *args: use the function it wraps
            base = name[:-1] if name.endswith("_") else name
            for cand in (getattr(musa, base, None), getattr(musa.Tensor, base, None)):
                if cand is not None and cand is not fn:
                    params = params_of(cand)
                    if params is not None:
                        break
        if params is not None and params and params[0].name in ("self", "input", "tensor"):
            params = params[1:]
        targets.append(Target(full, "method", params))
    targets += [Target(f"Tensor.{n}", "binop", None) for n in BINARY_OPS]
    targets += [Target(f"Tensor.{n}", "unop", None) for n in UNARY_OPS]
    targets += [Target(f"Tensor.{n}", "prop", None) for n in PROPERTIES]
    targets += [Target(f"Tensor.{n}=", "set", None) for n in SETTABLE]
    targets += [Target(f"Tensor.{n}", "index", None) for n in INDEXING]
    return targets


# ---------------------------------------------------------------- arguments

DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int8", "uint8", "bool"]
FLOATS = ["float32", "float64", "float16", "bfloat16"]
INT_RANGE = {"int64": (-2**63, 2**63 - 1), "int32": (-2**31, 2**31 - 1), "int8": (-128, 127),
             "uint8": (0, 255)}
EDGE_FLOATS = ["0.0", "-0.0", "nan", "inf", "-inf", "3e38", "-3e38", "1e-40", "65504.0", "1e300"]
EDGE_SCALARS = ["0", "-1", "1", "2", "True", "False", "2**31", "-2**31", "2**63", "-2**63 - 1",
                "2**62", "2**70", "-2**70", "0.5", "-0.0", "nan", "inf", "-inf", "1e308", "1e-45"]
EVIL = ["None", "'x'", "''", "[]", "[1, 2]", "[[1], [2, 3]]", "[None]", "()", "(2**31, 2**31)",
        "(2**62, 4)", "(-1,)", "(-5, 2)", "(0,)", "(2**63,)", "((),)", "{}", "object()",
        "musa.float16", "musa.bool", "musa.int8", "musa.device('cpu')", "...", "slice(None)",
        "b'ab'", "1j"] + EDGE_SCALARS
HUGE_SHAPES = [(2**20, 2**20), (2**41,), (2, 2**40), (2**31, 2**31), (2**62,), (2**21, 1, 2**21),
               (2**32, 2**32), (2**40, 0)]
# huge shapes for size arguments (zeros(...), view(...), expand(...))
BIG_SIZES = ["(2**31, 2**31)", "(2**62, 2**62)", "(2**63,)", "(2**40,)", "(2**20, 2**20, 2**20)",
             "(-1,)", "(-2, 3)", "(2**31,)", "(0, 2**62)", "(2**62, 0)", "(2**64,)", "(-2**63,)"]

PYTHON_SIG_ERRORS = re.compile(
    r"(takes|expected) .*(positional )?arguments?|got an unexpected keyword argument|"
    r"missing \d+ required|got multiple values for|takes no (keyword )?arguments|"
    r"takes exactly one argument|argument after \* must be|must be a mapping")
# Python's own words for an operator or format() no type supports
PYTHON_OP_ERRORS = re.compile(r"unsupported operand type|not supported between instances of|"
                              r"bad operand type for|unsupported format string passed to|Unknown format code")
STANDARD = ("TypeError", "ValueError", "IndexError", "RuntimeError", "MemoryError",
            "NotImplementedError", "OverflowError", "ZeroDivisionError")


class Gen:
    """Random argument sources for one call. Every expression is valid with
    `musa` bound to musa or to torch (and F to either's functional)."""

    def __init__(self, rng):
        self.rng = rng
        self.big = False  # some argument is huge: a timeout is slowness, not a hang
        r = rng.random()
        rank = 0 if r < 0.1 else 1 if r < 0.35 else 2 if r < 0.7 else 3 if r < 0.9 else 4
        self.shape = tuple(self.dim_size() for _ in range(rank))
        self.dtype = rng.choice(FLOATS * 3 + DTYPES)

    def dim_size(self):
        return self.rng.choice([1, 2, 2, 3, 3, 4, 5, 0, 1, 6])

    # -- tensors

    def tensor(self, shape=None, dtype=None, role=None):
        """Source of a tensor: mostly the call's shape and dtype (so
        arguments fit together), sometimes a broadcast, a new shape, an
        empty, a 0-d or a huge view."""
        rng = self.rng
        if dtype is None:
            dtype = self.dtype if rng.random() < 0.75 else rng.choice(DTYPES)
        if shape is None:
            r = rng.random()
            if r < 0.55:
                shape = self.shape
            elif r < 0.7:  # broadcast against the call's shape
                shape = tuple(1 if rng.random() < 0.4 else d for d in self.shape)
                shape = shape[rng.randint(0, len(shape)):] if shape and rng.random() < 0.3 else shape
            elif r < 0.86:
                shape = tuple(self.dim_size() for _ in range(rng.randint(0, 4)))
            elif r < 0.92:
                shape = ()
            elif r < 0.97:
                shape = tuple(0 if i == 0 else self.dim_size() for i in range(rng.randint(1, 3)))
            else:
                return self.huge(dtype)
        src = self.data(shape, dtype, role)
        if dtype in FLOATS and rng.random() < 0.08:
            src += ".requires_grad_()"
        return src

    def huge(self, dtype):
        """An expanded view of 2**40 and more elements (never materialised)."""
        self.big = True
        shape = self.rng.choice(HUGE_SHAPES)
        base = "(" + ", ".join("1" for _ in shape) + ("," if len(shape) == 1 else "") + ")"
        fill = "1" if dtype == "bool" else self.rng.choice(["0", "1", "2"])
        return f"musa.full({base}, {fill}, dtype=musa.{dtype}).expand{shape}"

    def values(self, n, dtype, role):
        rng = self.rng
        if dtype == "bool":
            return [rng.choice(["True", "False"]) for _ in range(n)]
        if dtype in INT_RANGE:
            lo, hi = INT_RANGE[dtype]
            if role == "index":
                return [str(rng.randint(-1, max(1, max(self.shape, default=2)))) for _ in range(n)]
            edgy = rng.random() < 0.15
            out = []
            for _ in range(n):
                if edgy and rng.random() < 0.3:
                    out.append(str(rng.choice([lo, hi, 0, -1 if lo < 0 else 1])))
                else:
                    out.append(str(rng.randint(max(lo, -6), min(hi, 6))))
            return out
        edgy = rng.random() < 0.25
        out = []
        for _ in range(n):
            if edgy and rng.random() < 0.25:
                out.append(rng.choice(EDGE_FLOATS))
            else:
                out.append(repr(round(rng.uniform(-4, 4), 3)))
        return out

    def data(self, shape, dtype, role=None):
        """A tensor of `shape`, possibly as a view (transposed, strided,
        offset or expanded) of a bigger or other-shaped base."""
        rng = self.rng
        base, views = list(shape), []
        if shape and rng.random() < 0.3:
            kind = rng.choice(["transpose", "step", "offset", "expand"])
            if kind == "transpose" and len(shape) >= 2:
                i, j = sorted(rng.sample(range(len(shape)), 2))
                base[i], base[j] = base[j], base[i]
                views.append(f".transpose({i}, {j})")
            elif kind == "step":
                i = rng.randrange(len(shape))
                base[i] = 2 * shape[i]
                views.append("[" + ":, " * i + "::2]")
            elif kind == "offset":
                base[0] = shape[0] + 1
                views.append("[1:]")
            elif kind == "expand" and any(d != 1 for d in shape):
                i = rng.choice([k for k, d in enumerate(shape) if d != 1])
                base[i] = 1
                views.append(f".expand{tuple(shape)}")
        n = math.prod(base)
        if n == 0:
            src = f"musa.zeros({tuple(base)}, dtype=musa.{dtype})"
        elif n <= 64:
            flat = self.values(n, dtype, role)
            src = f"musa.tensor({nest(flat, base)}, dtype=musa.{dtype})"
        else:  # bigger: a pattern, not a literal
            if dtype in FLOATS:  # (exact steps: linspace differs by an ulp between libraries)
                src = f"(musa.arange({n}, dtype=musa.float64) * {6 / n!r} - 3).to(musa.{dtype})"
            elif dtype == "bool":
                src = f"(musa.arange({n}) % 3 == 0)"
            else:
                src = f"(musa.arange({n}) % 7).to(musa.{dtype})"
            src += f".reshape({tuple(base)})"
        return src + "".join(views)

    def index_tensor(self, size=None):
        rng = self.rng
        if rng.random() < 0.5:  # a bool mask of the call's shape
            return self.data(self.shape, "bool")
        n = rng.randint(0, 4)
        hi = size if size is not None else max(self.shape, default=1)
        vals = [str(rng.randint(-hi, max(hi - 1, 0))) if rng.random() < 0.9 else
                str(rng.choice([hi, -hi - 1, 2**62, -2**63])) for _ in range(n)]
        return f"musa.tensor([{', '.join(vals)}], dtype=musa.int64)"

    # -- other values

    def scalar(self):
        rng = self.rng
        if rng.random() < 0.4:
            return rng.choice(EDGE_SCALARS)
        return rng.choice(["0", "1", "2", "-1", "3", "0.5", "-2.5", "1.5", "True", "0.0"])

    def dim(self):
        rng = self.rng
        r = len(self.shape)
        if rng.random() < 0.9:
            return str(rng.randint(-r - 1, r))
        return rng.choice(["2**31", "2**63", "-2**63 - 1", "-2**62", "None", "1.0", "(0, 0)"])

    def dims(self):
        rng = self.rng
        r = len(self.shape)
        if rng.random() < 0.5:
            return self.dim()
        k = rng.randint(0, max(r, 1))
        return "(" + "".join(f"{rng.randint(-r - 1, r)}, " for _ in range(k)) + ")"

    def size(self):
        """A size: mostly small, sometimes overflowing or negative."""
        rng = self.rng
        if rng.random() < 0.15:
            self.big = True
            return rng.choice(BIG_SIZES)
        shape = self.shape if rng.random() < 0.5 else tuple(self.dim_size() for _ in range(rng.randint(0, 3)))
        if shape and rng.random() < 0.15:
            shape = shape[:-1] + (-1,)
        return repr(tuple(shape))

    def small_int(self, lo=-1, hi=4):
        rng = self.rng
        if rng.random() < 0.9:
            return str(rng.randint(lo, hi))
        self.big = True
        return rng.choice(["2**31", "2**62", "2**63", "-2**63", "2**70", "-2**31"])

    def evil(self):
        rng = self.rng
        if rng.random() < 0.3:
            return self.tensor()
        v = rng.choice(EVIL)
        if v in ("(2**31, 2**31)", "(2**62, 4)", "(2**63,)", "2**31", "2**63", "2**62", "2**70",
                 "-2**70", "-2**63 - 1", "1e308"):
            self.big = True
        return v

    def for_param(self, fn, p):
        """Source of a value for parameter p of function fn (by kind, then
        by name; sometimes anything)."""
        rng = self.rng
        if rng.random() < 0.07:
            return self.evil()
        name, kind = p.name, p.kind
        by_name = self.by_name(fn, name)
        if by_name is not None:
            return by_name
        if kind == "T":
            return self.tensor()
        if kind == "S":
            return self.tensor() if rng.random() < 0.7 else self.scalar()
        if kind == "i":
            return self.small_int()
        if kind == "f":
            return self.scalar() if rng.random() < 0.3 else repr(round(rng.uniform(-2, 2), 2))
        if kind == "b":
            return rng.choice(["True", "False"])
        if kind == "d":
            return self.dtype_value()
        if kind in "IV":
            return self.size()
        if kind == "L":
            return self.tensor_list()
        r = rng.random()
        return self.tensor() if r < 0.5 else self.scalar() if r < 0.75 else self.evil()

    def dtype_value(self):
        return "None" if self.rng.random() < 0.2 else f"musa.{self.rng.choice(DTYPES)}"

    def tensor_list(self):
        n = self.rng.choice([0, 1, 2, 2, 3])
        return "[" + ", ".join(self.tensor() for _ in range(n)) + "]"

    def by_name(self, fn, name):
        """Values for well-known parameter names, or None."""
        rng = self.rng
        ch = rng.choice
        if name in ("dim", "axis0", "axis1", "dim0", "dim1", "start_dim", "end_dim"):
            return self.dims() if name == "dim" and fn not in ("cat", "stack", "select") else self.dim()
        if name in ("source", "destination"):
            return self.dims()
        if name in ("keepdim", "descending", "largest", "sorted", "equal_nan", "training",
                    "inplace", "ceil_mode", "count_include_pad", "return_indices", "is_causal",
                    "scale_grad_by_freq", "sparse", "create_graph", "retain_graph",
                    "requires_grad", "force", "copy"):
            return ch(["True", "False"]) if rng.random() < 0.95 else ch(["None", "2", "'yes'"])
        if name in ("dtype",):
            return self.dtype_value()
        if name == "device":
            return ch(["None", "'cpu'", "'cpu'", "musa.device('cpu')", "'cuda'", "'cuda:0'",
                       "'meta'", "'cpu:1'", "'xpu'", "0", "-1", "'cpu:-1'", "'c'"])
        if name in ("size", "shape") or (name == "output_size" and fn != "adaptive_avg_pool2d"):
            return self.size()
        if name in ("reduction",):
            return ch(["'mean'", "'sum'", "'none'", "'mean'", "'x'"])
        if name == "rounding_mode":
            return ch(["None", "'trunc'", "'floor'", "'x'"])
        if name == "approximate":
            return ch(["'none'", "'tanh'", "'x'"])
        if name == "mode":
            return ch(["'constant'", "'reflect'", "'replicate'", "'x'"])
        if name == "p":
            if fn == "norm":
                return ch(["'fro'", "1", "2", "0", "-1", "inf", "-inf", "nan", "0.5", "'nuc'", "3"])
            return ch(["0.0", "0.5", "1.0", "0.2", "-0.5", "1.5", "nan", "2"])
        if name in ("kernel_size", "stride", "padding", "dilation", "output_padding"):
            if name == "stride" and fn in ("as_strided",):
                return self.size()
            lo = 1 if name in ("kernel_size", "stride", "dilation") else 0
            if rng.random() < 0.85:
                v = [str(rng.randint(lo, lo + 2)) for _ in range(rng.choice([1, 2]))]
                return v[0] if len(v) == 1 and rng.random() < 0.5 else "(" + ", ".join(v) + ",)"
            return self.small_int(-2, 0) if rng.random() < 0.5 else ch(["(1, 2, 3)", "()", "(2**40, 1)"])
        if name in ("groups", "num_groups"):
            return ch(["1", "1", "2", "3", "0", "-1"])
        if name == "num_classes":
            return ch(["-1", "3", "5", "0", "-2", "2**40"])
        if name in ("eps",):
            return ch(["1e-5", "1e-12", "0.0", "-1.0", "nan"])
        if name in ("momentum",):
            return ch(["0.1", "None", "1.0"])
        if name in ("alpha", "beta", "lambd", "threshold", "negative_slope", "min_val",
                    "max_val", "mean", "std", "label_smoothing", "dropout_p", "value",
                    "fill_value", "a", "b", "rtol", "atol", "scale", "norm_type", "max_norm"):
            if fn == "scaled_dot_product_attention" and name == "value":
                return self.tensor()
            if fn in ("lerp", "lerp_") and name not in ("alpha",):
                pass
            elif name in ("scale", "max_norm") and rng.random() < 0.5:
                return "None"
            else:
                return self.scalar() if rng.random() < 0.5 else repr(round(rng.uniform(-1, 2), 2))
        if name in ("index", "indices") or (name == "input" and fn == "embedding") or \
                (name == "target" and fn in ("cross_entropy", "nll_loss")):
            if fn in ("narrow", "select") and name == "index":
                return self.small_int(-3, 4)
            size = self.shape[-1] if fn in ("cross_entropy", "nll_loss") and self.shape else None
            if fn in ("cross_entropy", "nll_loss") and len(self.shape) >= 2:
                size = self.shape[1]
            if name == "target" and rng.random() < 0.3:
                return self.tensor()
            return self.index_tensor(size)
        if name in ("mask", "condition"):
            return self.data(self.shape, "bool") if rng.random() < 0.8 else self.tensor(dtype="bool")
        if name in ("tensors", "inputs"):
            return self.tensor_list()
        if name in ("k", "n", "m", "steps", "chunks", "length", "diagonal", "low", "high",
                    "seed", "storage_offset", "start", "end", "step", "ignore_index",
                    "padding_idx", "divisor_override", "split_size", "split_size_or_sections",
                    "repeats", "num_samples"):
            if name in ("start", "end", "step") and rng.random() < 0.3:
                return self.scalar()
            if name in ("split_size_or_sections", "repeats") and rng.random() < 0.3:
                return "[" + ", ".join(self.small_int(0, 3) for _ in range(rng.randint(0, 3))) + "]"
            if name in ("padding_idx", "divisor_override") and rng.random() < 0.5:
                return "None"
            if name == "ignore_index" and rng.random() < 0.5:
                return "-100"
            return self.small_int(-2, 6)
        if name in ("correction", "unbiased"):
            return ch(["None", "0", "1", "2", "True", "False", "-1", "1.5"])
        if name in ("min", "max"):
            r = rng.random()
            return "None" if r < 0.2 else self.scalar() if r < 0.7 else self.tensor()
        if name in ("data", "obj", "ndarray", "ext_tensor", "state"):
            r = rng.random()
            if r < 0.3:
                return self.tensor() + ".numpy()" if name != "state" else self.tensor()
            if r < 0.6:
                return rng.choice(["[1, 2, 3]", "[[1.5, 2], [3, 4]]", "[]", "[[]]", "3.5", "True",
                                   "[True, False]", "[[1], [2, 3]]", "[2**63]", "[2**70]",
                                   "[nan, inf]", "[[[]]]", "[1, 'a']", "'abc'", "None"])
            return self.tensor()
        if name == "normalized_shape":
            if self.shape and rng.random() < 0.8:
                return repr(tuple(self.shape[-rng.randint(1, len(self.shape)):]))
            return self.size()
        if name == "pad":
            k = ch([2, 4, 2, 6, 1])
            return "(" + ", ".join(str(rng.randint(-2, 2)) for _ in range(k)) + ",)"
        if name == "hook":
            return "None"
        return None

    def tensor_for(self, fn, params):
        """Shapes that fit together for the families that need them
        (convolutions, pooling, normalisation, matrix products)."""
        rng = self.rng
        n, c, h = rng.randint(1, 2), rng.randint(1, 3), rng.randint(1, 5)
        if fn in ("conv1d", "conv2d", "conv_transpose2d"):
            g = 1 if rng.random() < 0.7 else c
            k = rng.randint(1, 3)
            o = ch_mult(rng, g)
            sp = (h,) if fn == "conv1d" else (h, rng.randint(1, 5))
            ks = (k,) if fn == "conv1d" else (k, rng.randint(1, 3))
            w = (c, o // g) + ks if fn == "conv_transpose2d" else (o, c // g) + ks
            return {"input": (n, c) + sp, "weight": w, "bias": (o if fn != "conv_transpose2d" else o,)}
        if fn in ("max_pool2d", "avg_pool2d", "adaptive_avg_pool2d"):
            return {"input": (n, c, h, rng.randint(1, 5))[rng.choice([0, 1]):]}
        if fn in ("batch_norm", "group_norm", "layer_norm"):
            x = (n, c, h)
            return {"input": x, "weight": (c,), "bias": (c,), "running_mean": (c,),
                    "running_var": (c,)}
        if fn in ("linear",):
            i, o = rng.randint(1, 4), rng.randint(1, 4)
            return {"input": (n, i), "weight": (o, i), "bias": (o,)}
        if fn in ("mm", "matmul", "addmm", "bmm", "mv", "dot", "outer", "__matmul__"):
            a, b, d = rng.randint(0, 3), rng.randint(0, 3), rng.randint(0, 3)
            shapes = {"mm": [(a, b), (b, d)], "addmm": [(a, d), (a, b), (b, d)],
                      "bmm": [(2, a, b), (2, b, d)], "mv": [(a, b), (b,)], "dot": [(a,), (a,)],
                      "outer": [(a,), (b,)]}.get(fn, [(a, b), (b, d)])
            return {"_positional": shapes}
        if fn == "scaled_dot_product_attention":
            s, e = rng.randint(1, 4), rng.randint(1, 4)
            return {"query": (n, s, e), "key": (n, s, e), "value": (n, s, e), "attn_mask": (s, s)}
        if fn == "embedding":
            return {"weight": (rng.randint(1, 5), rng.randint(1, 3))}
        if fn in ("cross_entropy", "nll_loss"):
            return {"input": (n, c)}
        return {}


def ch_mult(rng, g):
    return g * rng.randint(1, 2)


def nest(flat, shape):
    """Nested list source of flat values in `shape` (a scalar for ())."""
    if not shape:
        return flat[0]
    if len(shape) == 1:
        return "[" + ", ".join(flat) + "]"
    step = len(flat) // shape[0]
    return "[" + ", ".join(nest(flat[i * step:(i + 1) * step], shape[1:])
                           for i in range(shape[0])) + "]"


BIG_INT = re.compile(r"2\*\*([2-9]\d)|\d{7,}")


class Call:
    """One generated call: argument assignments and the statement that makes
    `out`, as Python source; `receiver` is the tensor a method mutates."""

    def __init__(self, target, lines, call, big):
        self.target, self.lines, self.call = target, lines, call
        # huge tensors, or ints of 2**20 and more anywhere in the source
        self.big = big or bool(BIG_INT.search(self.source()))

    def source(self):
        return "\n".join(self.lines + [self.call])


def generate(targets, seed, i):
    """Call number i of the batch with this seed (a pure function of both)."""
    import random
    rng = random.Random(f"{seed}:{i}")
    t = targets[rng.randrange(len(targets))]
    g = Gen(rng)
    fn = t.short
    lines = []

    def bind(expr):
        name = f"a{len(lines)}"
        lines.append(f"{name} = {expr}")
        return name

    if t.form == "binop":
        fitted = g.tensor_for(fn, None).get("_positional")
        x = bind(g.data(fitted[0], g.dtype) if fitted else g.tensor())
        y = bind(g.data(fitted[1], g.dtype) if fitted and rng.random() < 0.9 else
                 g.tensor() if rng.random() < 0.6 else g.scalar() if rng.random() < 0.9 else g.evil())
        op = BINARY_OPS[fn]
        form = rng.random()
        if form < 0.55:
            call = f"out = {x} {op} {y}"
        elif form < 0.75 and fn not in ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__",
                                        "__matmul__"):  # (x @= y writes into x; torch 1.13 rebinds)
            call = f"{x} {op}= {y}\nout = {x}"
        else:
            call = f"out = {y} {op} {x}"
        return Call(t, lines, call, g.big)
    if t.form == "unop":
        x = bind(g.tensor())
        return Call(t, lines, "out = " + UNARY_OPS[fn].format(x), g.big)
    if t.form == "prop":
        x = bind(g.tensor())
        return Call(t, lines, f"out = {x}.{fn}", g.big)
    if t.form == "set":
        attr = fn.rstrip("=")
        x = bind(g.tensor())
        if attr == "requires_grad":
            v = bind(rng.choice(["True", "False", "None", "1", "'x'"]))
        else:
            v = bind(g.tensor() if rng.random() < 0.85 else g.evil())
        return Call(t, lines, f"{x}.{attr} = {v}\nout = {x}", g.big)
    if t.form == "index":
        x = bind(g.tensor())
        if fn == "__contains__":
            v = bind(g.scalar() if rng.random() < 0.5 else g.tensor())
            return Call(t, lines, f"out = {v} in {x}", g.big)
        if fn == "__format__":
            v = bind(rng.choice(["''", "'.2f'", "'>10'", "'x'", "'d'", "'.3e'"]))
            return Call(t, lines, f"out = format({x}, {v})", g.big)
        key = index_key(g)  # inline: slices have no value syntax of their own
        if fn == "__getitem__":
            return Call(t, lines, f"out = {x}[{key}]", g.big)
        if fn == "__delitem__":
            return Call(t, lines, f"del {x}[{key}]\nout = {x}", g.big)
        v = bind(g.scalar() if rng.random() < 0.4 else g.tensor() if rng.random() < 0.9 else g.evil())
        return Call(t, lines, f"{x}[{key}] = {v}\nout = {x}", g.big)

    # functions and methods
    fitted = g.tensor_for(fn, t.params)
    positional = list(fitted.pop("_positional", []))
    params = t.params
    recv = None
    if t.form == "method":
        recv = bind(g.data(positional.pop(0), g.dtype) if positional else
                    g.data(fitted["input"], g.dtype) if "input" in fitted else g.tensor())
    args, kwargs = [], []
    if params is None:  # unknown signature: a few values of any kind
        for _ in range(rng.choice([0, 0, 1, 1, 2, 3])):
            r = rng.random()
            args.append(bind(g.tensor() if r < 0.4 else g.scalar() if r < 0.7 else g.evil()))
    else:
        positional_ok = True
        for p in params:
            if positional and p.name not in ("dtype",) and (p.kind in "TS?" or p.kind == "") \
                    and p.name not in fitted:
                expr = g.data(positional.pop(0), g.dtype)
            elif p.name in fitted and (p.kind in "TS?"):
                dt = g.dtype if g.dtype in FLOATS or rng.random() < 0.3 else "float32"
                expr = g.data(fitted[p.name], dt, None) if rng.random() < 0.93 else g.for_param(fn, p)
                if p.name == "bias" and rng.random() < 0.3:
                    expr = "None"
            elif not p.required and rng.random() < 0.55:
                positional_ok = False  # a later optional one must go by keyword
                continue
            elif p.required and rng.random() < 0.02:
                positional_ok = False  # leave a required one out
                continue
            else:
                expr = g.for_param(fn, p)
            if p.varargs and rng.random() < 0.6 and expr.startswith("(") and expr.endswith(")") \
                    and not p.kwonly and positional_ok:
                inner = expr[1:-1].rstrip(",").strip()
                for part in [s for s in inner.split(", ") if s] if inner else []:
                    args.append(bind(part))
                continue
            v = bind(expr)
            if p.kwonly or not positional_ok or (not p.required and rng.random() < 0.5):
                kwargs.append((p.name, v))
                positional_ok = positional_ok and p.kwonly
            else:
                args.append(v)
        if rng.random() < 0.03:  # one too many
            args.append(bind(g.evil()))
    argtext = ", ".join(args + [f"{k}={v}" for k, v in kwargs])
    if t.form == "method":
        call = f"out = {recv}.{fn}({argtext})"
    else:
        call = f"out = {t.name}({argtext})"
    return Call(t, lines, call, g.big)


def index_key(g):
    """An index expression: ints, slices, None, Ellipsis, tensors, lists."""
    rng = g.rng
    r = len(g.shape)

    def one():
        x = rng.random()
        if x < 0.3:
            return str(rng.randint(-r - 2, r + 2)) if rng.random() < 0.9 else rng.choice(
                ["2**63", "-2**63", "2**62", "2**31"])
        if x < 0.55:
            parts = [rng.choice(["", "", "0", "1", "-1", "2", "-3", "2**62", "-2**63"]) for _ in range(2)]
            step = rng.choice(["", "", "1", "2", "3", "-1", "0", "2**62"])
            return f"{parts[0]}:{parts[1]}" + (f":{step}" if step else "")
        if x < 0.65:
            return "None"
        if x < 0.72:
            return "..."
        if x < 0.87:
            return g.index_tensor(g.shape[0] if g.shape else None)
        if x < 0.95:
            return "[" + ", ".join(str(rng.randint(-2, 2)) for _ in range(rng.randint(0, 3))) + "]"
        return rng.choice(["True", "False", "1.5", "'a'", "(1, [0])", "[[0, 1], [1, 0]]"])
    n = rng.choice([1, 1, 1, 2, 2, 3])
    parts = [one() for _ in range(n)]
    return ", ".join(parts)  # (a tuple in brackets: slices allowed)


# ---------------------------------------------------------------- the child

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
    name = type(exc).__name__
    msg = str(exc)
    if name not in STANDARD and name != "BufferError":
        return f"{name} is not a standard exception class"
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


def run_source(call, ns):
    """Run a call's source in a copy of ns; return (namespace, exception, stage)."""
    env = dict(ns)
    try:
        exec("\n".join(call.lines), env)
    except BaseException as e:  # noqa: BLE001 - reported
        if isinstance(e, KeyboardInterrupt):
            raise
        return env, e, "args"
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


def compare(a, b, musa, torch, path="out", keep=None):
    """None if musa's a agrees with torch's b, else what differs (only
    where keep is true, when given)."""
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
            rtol = max(RTOL.get(da, 0), RTOL.get(db, 0), 1e-6)
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
            d = compare(x, y, musa, torch, f"{path}[{k}]")
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
        return None if str(a).split(".")[-1] == str(b).split(".")[-1] or isinstance(a, str) else \
            f"{path}: {a} vs torch {b}"
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
    if theirs is None or not torch_target_exists(t, theirs) or call.big or torch_wrong(t.short, env):
        return rec
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
            diff = compare(a, b, musa, torch, keep=cast_mask(fn, env, call, out, musa))
        except Exception:  # noqa: BLE001 - torch's result cannot be read (meta tensors)
            return rec
        if diff is None and (fn.endswith("_") or "=" in call.call.split("\n")[0][:-1]) and \
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


def torch_wrong(fn, env):
    import musa
    if fn not in TORCH_WRONG:
        return False
    dtype = TORCH_WRONG[fn][0]
    return any(isinstance(v, musa.Tensor) and str(v.dtype).endswith(dtype) for v in args_of(env))


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


NORMALISING = {"batch_norm", "layer_norm", "group_norm", "normalize", "cosine_similarity"}


def ill_conditioned(fn, env, musa):
    """A normalisation in half precision with an eps below 1e-5: a constant
    input's variance is the rounding error of its mean, divided by ~0."""
    low = any(isinstance(v, musa.Tensor) and str(v.dtype).split(".")[-1] in ("float16", "bfloat16")
              for v in args_of(env))
    tiny = any(isinstance(v, float) and abs(v) < 1e-5 for v in args_of(env))
    return fn in NORMALISING and low and tiny


def unsafe_conversion(env, musa):
    """Whether a dtype= argument converts a float tensor argument holding
    values outside that integer dtype's range, or a number outside an integer
    tensor's range goes with it (see CASTS)."""
    import numpy as np
    ints = [str(v).split(".")[-1] for v in args_of(env) if isinstance(v, musa.dtype)]
    ints += [str(v.dtype).split(".")[-1] for v in args_of(env) if isinstance(v, musa.Tensor)]
    ints = [d for d in ints if d in INT_RANGE]
    for v in args_of(env):
        if ints and isinstance(v, (int, float)) and not isinstance(v, bool) and \
                any(not (INT_RANGE[d][0] <= v <= INT_RANGE[d][1]) for d in ints if v == v):
            return True
        if ints and isinstance(v, musa.Tensor) and str(v.dtype).split(".")[-1] in FLOATS and \
                numel(v) <= LARGE:
            x = to_array(v, musa)
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


# ---------------------------------------------------------------- the parent

SANITIZER = re.compile(r"ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer)[^\n]*|"
                       r"runtime error: [^\n]*|Fatal Python error: [^\n]*")


class Runner:
    """Runs children, collects records, names and reproduces crashes."""

    def __init__(self, args):
        self.args = args
        self.out = args.out
        os.makedirs(self.out, exist_ok=True)
        self.log = open(os.path.join(self.out, "findings.jsonl"), "w")
        self.calls = 0
        self.reached, self.succeeded, self.functions = set(), set(), set()
        self.counts = {}
        self.findings = {}  # dedupe key -> finding
        self.failures = 0
        self.children = 0

    def spawn(self, seed, start, end, compare_torch=True, capture=None):
        r, w = os.pipe()
        cmd = [sys.executable, os.path.abspath(__file__), "--child", str(seed), str(start),
               str(end), str(w)]
        if not compare_torch:
            cmd.append("--no-torch")
        err = open(capture or os.path.join(self.out, "child.stderr"), "w+")
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                             pass_fds=(w,), start_new_session=True,
                             preexec_fn=limit_memory)
        os.close(w)
        return p, os.fdopen(r, "r"), err

    def run_batch(self, seed, start, end, deadline):
        """Run the calls of one batch, restarting after a crash or timeout
        from the next call. Returns the calls run."""
        i = start
        while i < end and time.time() < deadline:
            self.children += 1
            p, rep, err = self.spawn(seed, i, end)
            last, ok, booting = None, False, True
            sel = selectors.DefaultSelector()
            sel.register(rep, selectors.EVENT_READ)
            limit = self.args.call_timeout
            t0 = time.time()
            buf = ""
            timed_out = False
            while True:
                events = sel.select(timeout=0.5)
                if events:
                    chunk = os.read(rep.fileno(), 1 << 16).decode(errors="replace")
                    if not chunk:
                        break
                    buf += chunk
                    while "\n" in buf:
                        line, buf = buf.split("\n", 1)
                        if line.startswith("B "):
                            last = json.loads(line[2:])
                            t0, booting = time.time(), False
                            limit = self.args.big_timeout if last["big"] else self.args.call_timeout
                        elif line.startswith("T ") and last:
                            last["torch"] = True
                        elif line.startswith("R "):
                            self.record(json.loads(line[2:]), last)
                            i = last["i"] + 1
                            last = None
                        elif line == "DONE":
                            ok = True
                if time.time() - t0 > (self.args.startup if booting else limit):
                    timed_out = True
                    os.killpg(p.pid, signal.SIGKILL)
                    break
            sel.close()
            rep.close()
            rc = p.wait()
            err.seek(0)
            stderr = err.read()
            err.close()
            if ok and rc == 0:
                return
            if last is None:  # died between calls (at start-up, or at exit)
                self.failure("crash", {"fn": "<child>", "src": "", "i": i},
                             f"child exited with {rc} outside a call\n{stderr[-2000:]}", seed)
                return
            self.calls += 1
            self.reached.add(last["fn"])
            if last.get("torch"):  # PyTorch's own crash (or hang): not ours
                self.note("torch-crash", last, stderr[-2000:] or "timeout", seed)
            elif timed_out:
                if last["big"]:
                    self.note("slow", last, f"ran past {limit} s", seed)
                else:
                    self.failure("timeout", last, f"ran past {limit} s", seed, start)
            else:
                m = SANITIZER.search(stderr)
                what = m.group(0) if m else f"exit status {rc} ({signame(rc)})"
                self.failure(crash_kind(stderr, rc), last, what + "\n" + stderr[-3000:], seed, start)
            i = last["i"] + 1

    def record(self, rec, started):
        self.calls += 1
        fn = rec["fn"]
        self.functions.add(fn)
        self.counts[rec["outcome"]] = self.counts.get(rec["outcome"], 0) + 1
        if rec["outcome"] != "argerr":
            self.reached.add(fn)
        if rec["outcome"] == "ok":
            self.succeeded.add(fn)
        if rec.get("torch") == "ok" and rec["outcome"] == "raised":
            self.counts["stricter"] = self.counts.get("stricter", 0) + 1
        f = rec.get("finding")
        if not f:
            return
        started = dict(started, i=rec["i"])
        if f["kind"] == "error":
            self.failure("error", started, f["detail"], self.args.seed_now)
        elif f["kind"] == "mismatch":
            self.failure("mismatch", started, f["detail"], self.args.seed_now)
        else:
            self.note(f["kind"], started, f["detail"], self.args.seed_now)

    def key(self, kind, fn, detail):
        """Findings alike up to numbers and quoted names count once."""
        sig = re.sub(r"'[^']*'|0x[0-9a-f]+|\d+", "N", detail.split("\n")[0])[:120]
        return (kind, fn, sig)

    def note(self, kind, call, detail, seed):
        k = self.key(kind, call["fn"], detail)
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if k in self.findings:
            return
        self.findings[k] = True
        self.write_log(kind, call, detail, seed)

    def write_log(self, kind, call, detail, seed, repro=None):
        self.log.write(json.dumps({"kind": kind, "fn": call["fn"], "seed": seed, "i": call["i"],
                                   "detail": detail[:4000], "src": call.get("src"),
                                   "reproducer": repro}) + "\n")
        self.log.flush()

    def failure(self, kind, call, detail, seed, start=None):
        k = self.key(kind, call["fn"], detail)
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if k in self.findings:
            return
        self.findings[k] = True
        self.failures += 1
        repro = None
        if kind not in ("mismatch",) and call.get("src"):
            repro = self.reproduce(kind, call, detail, seed, start)
        first = detail.split("\n")[0]
        print(f"  {kind.upper()}: {call['fn']} (seed {seed}, call {call['i']}): {first}"
              + (f"\n    reproducer: {os.path.relpath(repro)}" if repro else ""), flush=True)
        if kind == "mismatch":
            print("    " + call["src"].replace("\n", "\n    "), flush=True)
        self.write_log(kind, call, detail, seed, repro)

    def reproduce(self, kind, call, detail, seed, start):
        """Write the reproducer: the call alone if it fails alone, else the
        calls of its batch up to it, minimised."""
        calls = [call["src"]]
        if kind != "error" and not self.fails(calls):
            targets = api_cached()
            calls = [generate(targets, seed, j).source() for j in range(start or 0, call["i"] + 1)]
            if self.fails(calls):
                calls = minimise(calls, self.fails)
            else:
                calls = [call["src"]]  # not reproducible: keep the call for the record
        name = re.sub(r"[^\w]+", "_", call["fn"]).strip("_")
        where = re.search(r"[\w/]+\.c:\d+", detail)  # the sanitizer's source line, if any
        key = detail.split("\n")[0] + (where.group(0) if where else "")
        h = hashlib.sha1(key.encode()).hexdigest()[:6]
        os.makedirs(self.args.crash_dir, exist_ok=True)
        path = os.path.join(self.args.crash_dir, f"{name}_{kind}_{h}.py")
        n = 2
        while os.path.exists(path):  # never overwrite an earlier finding
            path = os.path.join(self.args.crash_dir, f"{name}_{kind}_{h}_{n}.py")
            n += 1
        with open(path, "w") as f:
            f.write(reproducer_text(call["fn"], kind, detail, seed, call["i"], calls))
        return path

    def fails(self, calls):
        src = reproducer_text("?", "?", "?", 0, 0, calls)
        path = os.path.join(self.out, "candidate.py")
        with open(path, "w") as f:
            f.write(src)
        return not run_reproducer(path, self.args.call_timeout * max(1, len(calls)))[0]

    def summary(self, seconds):
        c = self.counts
        lines = [
            f"fuzz-py: {self.calls} calls in {seconds:.0f} s ({self.children} children); "
            f"{len(self.reached)} of {len(api_cached())} functions reached, "
            f"{len(self.succeeded)} succeeded at least once",
            f"  outcomes: {c.get('ok', 0)} ok, {c.get('raised', 0)} raised "
            f"({c.get('stricter', 0)} where torch accepts), {c.get('argerr', 0)} bad arguments",
            f"  findings: {c.get('crash', 0) + c.get('asan', 0) + c.get('ubsan', 0) + c.get('timeout', 0)} "
            f"crashes, {c.get('error', 0)} non-standard errors, {c.get('mismatch', 0)} wrong values; "
            f"logged: {c.get('accepted', 0)} accepted where torch rejects, {c.get('dtype', 0)} other "
            f"result dtypes, {c.get('numerics', 0)} inf/nan differences from inputs at the edges, "
            f"{c.get('slow', 0)} slow, {c.get('torch-crash', 0)} torch crashes",
            f"  log: {os.path.relpath(self.log.name)}",
        ]
        return "\n".join(lines)


_API = None


def api_cached():
    global _API
    if _API is None:
        _API = api()
    return _API


def minimise(calls, fails):
    """Drop calls while the rest still fails (delta debugging, coarse to fine)."""
    n = 2
    while len(calls) > 1:
        chunk = max(1, len(calls) // n)
        for k in range(0, len(calls), chunk):
            rest = calls[:k] + calls[k + chunk:]
            if rest and fails(rest):
                calls = rest
                n = max(n - 1, 2)
                break
        else:
            if chunk == 1:
                break
            n = min(n * 2, len(calls))
    return calls


def crash_kind(stderr, rc):
    if "runtime error:" in stderr or "UndefinedBehaviorSanitizer" in stderr:
        return "ubsan"  # (first: ASan's allocation warnings may precede it)
    if "ERROR: AddressSanitizer" in stderr:
        return "asan"
    return "crash"


def signame(rc):
    if rc < 0:
        try:
            return signal.Signals(-rc).name
        except ValueError:
            return f"signal {-rc}"
    return "no signal"


def limit_memory():
    """Child processes: a cap on memory, so a huge allocation fails instead
    of swapping the machine (ASan has its own: max_allocation_size_mb)."""
    import resource
    if "libasan" not in os.environ.get("LD_PRELOAD", ""):
        cap = 16 << 30
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


REPRO_HEAD = '''"""{title}

{detail}

Found by tests/fuzz/fuzz_py.py (batch seed {seed}, call {i}); replayed by
`bash run.sh sanitize` (fuzz_py.py --replay), which requires it to run without
a crash and to raise, if anything, a standard exception whose message starts
with "[name]".
"""
import copy
import math
import operator
import pickle
import re
from math import inf, nan

import numpy as np

import musa
import musa.nn.functional as F

STANDARD = (TypeError, ValueError, IndexError, RuntimeError, MemoryError, NotImplementedError,
            OverflowError, ZeroDivisionError)
PYTHON_OWN = re.compile({python_own!r})  # Python's own argument and operator errors


def check(call):
    try:
        call()
    except STANDARD as e:
        print(f"{{type(e).__name__}}: {{e}}")
        if not str(e).startswith("[") and not PYTHON_OWN.search(str(e)):
            raise
'''


def reproducer_text(fn, kind, detail, seed, i, calls):
    body = []
    for k, src in enumerate(calls):
        body.append(f"\n\ndef call_{k}():\n" + "\n".join("    " + s for s in src.split("\n")))
    body.append("\n\n" + "\n".join(f"check(call_{k})" for k in range(len(calls))) + "\n")
    detail = "\n".join(line[:100] for line in detail.split("\n")[:6]).replace('"""', "'''")
    return REPRO_HEAD.format(title=f"{fn}: {kind}", detail=detail, seed=seed, i=i,
                             python_own=PYTHON_SIG_ERRORS.pattern + "|" + PYTHON_OP_ERRORS.pattern) + \
        "".join(body)


def run_reproducer(path, timeout):
    """Run one reproducer file; (passed, what happened)."""
    try:
        p = subprocess.run([sys.executable, path], capture_output=True, text=True,
                           timeout=timeout, preexec_fn=limit_memory)
    except subprocess.TimeoutExpired:
        return False, f"ran past {timeout} s"
    if p.returncode == 0 and not SANITIZER.search(p.stderr):
        return True, (p.stdout.strip().split("\n") or [""])[-1]
    m = SANITIZER.search(p.stderr)
    return False, (m.group(0) if m else p.stderr.strip().split("\n")[-1] if p.stderr.strip()
                   else f"exit status {p.returncode}")


def replay(directory, timeout):
    """Run every reproducer in directory; print 'N passed, M failed'."""
    files = sorted(f for f in os.listdir(directory) if f.endswith(".py")) if os.path.isdir(directory) else []
    passed = failed = 0
    for f in files:
        ok, what = run_reproducer(os.path.join(directory, f), timeout)
        print(f"{'ok  ' if ok else 'FAIL'} {f}: {what}")
        passed += ok
        failed += not ok
    print(f"{passed} passed, {failed} failed")
    return failed == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=60, help="time budget of the run")
    ap.add_argument("--batches", type=int, default=0,
                    help="stop after this many batches (0: when the time is up)")
    ap.add_argument("--seed", type=int, default=1, help="first batch seed (batches use seed, seed+1, ...)")
    ap.add_argument("--calls", type=int, default=200, help="calls per child process")
    ap.add_argument("--call-timeout", type=float, default=20.0, help="seconds a small call may take")
    ap.add_argument("--big-timeout", type=float, default=3.0, help="seconds a call with huge arguments may take")
    ap.add_argument("--startup", type=float, default=30.0, help="seconds a child may take to start")
    ap.add_argument("--out", default="build/fuzz-py", help="directory of the log")
    ap.add_argument("--crash-dir", default=CRASH_DIR, help="where reproducers are written")
    ap.add_argument("--replay", metavar="DIR", help="run every reproducer in DIR and exit")
    ap.add_argument("--show", nargs=2, type=int, metavar=("SEED", "I"), help="print call I of batch SEED")
    ap.add_argument("--child", nargs=4, type=int, help=argparse.SUPPRESS)
    ap.add_argument("--no-torch", action="store_true", help="do not compare with PyTorch")
    args = ap.parse_args()
    if args.child:
        seed, start, end, fd = args.child
        child(seed, start, end, fd, not args.no_torch)
        return 0
    if args.show:
        print(generate(api(), *args.show).source())
        return 0
    if args.replay:
        return 0 if replay(args.replay, 60) else 1
    runner = Runner(args)
    t0 = time.time()
    deadline = t0 + args.seconds
    seed = args.seed
    print(f"fuzz-py: batches of {args.calls} calls from seed {seed}, {args.seconds:.0f} s", flush=True)
    while time.time() < deadline and (not args.batches or seed < args.seed + args.batches):
        args.seed_now = seed
        runner.run_batch(seed, 0, args.calls, deadline)
        seed += 1
    print(f"  last batch seed {seed - 1}")
    print(runner.summary(time.time() - t0))
    return 1 if runner.failures else 0


if __name__ == "__main__":
    sys.exit(main())
