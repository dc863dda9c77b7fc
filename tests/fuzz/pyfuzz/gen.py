"""gen.py - the calls: Python source built from (seed, index) alone.

A call is one line per argument ("a0 = musa.tensor(...)"), then the
statement that makes `out`. Every expression is valid with `musa` bound to
musa or to torch (and F to either's functional), so the same source gives
PyTorch's answer. Arguments are mostly of the kind the parameter wants (its
spec letter, or its name), with shapes that fit together within a call;
a few are anything (EVIL).
"""
import ast
import math
import re

from .api import BINARY_OPS, UNARY_OPS

DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8",
          "bool"]
FLOATS = ["float32", "float64", "float16", "bfloat16"]
INT_RANGE = {"int64": (-2**63, 2**63 - 1), "int32": (-2**31, 2**31 - 1),
             "int16": (-2**15, 2**15 - 1), "int8": (-128, 127), "uint8": (0, 255)}
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


def _tuple_parts(expr):
    """The elements' source of a tuple literal ("(2, 3)"), or None for any
    other expression (a parenthesised call is not a tuple)."""
    try:
        node = ast.parse(expr, mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(node, ast.Tuple):
        return None
    return [ast.get_source_segment(expr, e) for e in node.elts]


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
            parts = _tuple_parts(expr) if p.varargs else None
            if parts is not None and rng.random() < 0.6 and not p.kwonly and positional_ok:
                for part in parts:  # a tuple literal spread over *size
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
