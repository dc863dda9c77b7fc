"""api.py - what the Python fuzzer calls.

Every public function of musa and musa.nn.functional, every Tensor method,
operator, property and settable attribute, in a fixed order (the seed alone
decides the calls), each with its parameters: from the C binding's spec
("input:T dim:I=None * dtype:d=None", see python/musa/_C/bind.c) or the
Python signature. SKIP lists what is not called, and why.
"""
import inspect
import re

# Not called, with the reason.
SKIP = {
    # change process-wide state that later calls of the batch would see
    "musa.manual_seed": "seeds the global generator (the child seeds it per call)",
    "musa.set_default_dtype": "changes the dtype of every later tensor",
    "musa.set_default_tensor_type": "changes the dtype of every later tensor",
    "musa.set_num_threads": "changes the thread pool",
    "musa.set_rng_state": "replaces the global generator's state",
    "musa.set_grad_enabled": "switches grad mode globally when called as a function",
    "musa.empty_cache": "frees the allocator's caches (global state)",
    "musa.reset_peak_memory_stats": "resets global counters",
    "musa.set_anomaly_enabled": "switches anomaly mode (NaN checks) globally",
    "musa.set_warn_always": "a global flag",
    # read and write files at paths made of random strings
    "musa.save": "writes files", "musa.load": "reads files",
    # take callables (a random one proves nothing)
    "Tensor.register_hook": "takes a callable",
    "Tensor.register_post_accumulate_grad_hook": "takes a callable",
    # classes and modules (constructors of dtypes, devices, context managers)
    "musa.Tensor": "a class", "musa.dtype": "a class", "musa.device": "a class",
    "musa.no_grad": "a class", "musa.enable_grad": "a class", "musa.inference_mode": "a class",
    "F.Tensor": "a class", "F.no_grad": "a class", "F.math": "a module", "F.warnings": "a module",
}

# Tensor operators, called through Python's syntax (so reflected and
# in-place forms run as a user's code would).
BINARY_OPS = {"__add__": "+", "__sub__": "-", "__mul__": "*", "__truediv__": "/",
              "__floordiv__": "//", "__mod__": "%", "__pow__": "**", "__matmul__": "@",
              "__and__": "&", "__or__": "|", "__xor__": "^", "__lshift__": "<<", "__rshift__": ">>",
              "__eq__": "==", "__ne__": "!=",
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
