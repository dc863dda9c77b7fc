"""musa IR -> ONNX (opset 17): musa.onnx.export.

The function or module is captured once (trace mode, on the example
arguments, under no_grad and, for a module, in eval mode) into musa's IR,
the cleanup passes run (simplify, CSE, constant folding, dead code; never
fusion, so every node is one primitive op), and each node becomes one or a
few ONNX nodes. Parameters, buffers and captured constants become
initializers (parameters under their module names). An op with no ONNX
form here fails with NotImplementedError naming it.
"""
import numpy as np

from .. import _C

_ONNX_DTYPE = {  # musa dtype name -> TensorProto enum value
    "float32": 1, "uint8": 2, "int8": 3, "int16": 5, "int32": 6, "int64": 7, "bool": 9, "float16": 10,
    "float64": 11, "bfloat16": 16,
}

_BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "pow": "Pow",
           "maximum": "Max", "minimum": "Min", "eq": "Equal", "lt": "Less",
           "le": "LessOrEqual", "gt": "Greater", "ge": "GreaterOrEqual",
           "logical_and": "And", "logical_or": "Or", "logical_xor": "Xor"}
_UNARY = {"neg": "Neg", "abs": "Abs", "sign": "Sign", "exp": "Exp", "log": "Log", "sqrt": "Sqrt",
          "reciprocal": "Reciprocal", "sin": "Sin", "cos": "Cos", "tanh": "Tanh",
          "sigmoid": "Sigmoid", "erf": "Erf", "relu": "Relu", "floor": "Floor", "ceil": "Ceil",
          "round": "Round", "logical_not": "Not", "isnan": "IsNaN", "isinf": "IsInf",
          "asin": "Asin", "acos": "Acos", "atan": "Atan", "asinh": "Asinh", "acosh": "Acosh",
          "atanh": "Atanh", "clone": "Identity", "detach": "Identity"}
_REDUCE = {"prod": "ReduceProd", "amax": "ReduceMax", "amin": "ReduceMin"}


def onnx_dtype(dtype):
    name = str(dtype).replace("musa.", "")
    if name not in _ONNX_DTYPE:
        raise NotImplementedError(f"[onnx.export] dtype {name} has no ONNX type")
    return _ONNX_DTYPE[name]


def to_numpy(t):
    """A tensor's values as NumPy (bfloat16 has no NumPy type: float32)."""
    t = t.detach()
    if str(t.dtype) == "musa.bfloat16":
        raise NotImplementedError("[onnx.export] bfloat16 initializers are not supported")
    return t.contiguous().numpy().copy()


class _Builder:
    def __init__(self, helper, numpy_helper):
        self.h, self.nh = helper, numpy_helper
        self.nodes, self.inits, self.n = [], [], 0

    def tmp(self, hint="t"):
        self.n += 1
        return f"{hint}_{self.n}"

    def const(self, array, hint="c"):
        name = self.tmp(hint)
        self.inits.append(self.nh.from_array(np.asarray(array), name))
        return name

    def ints(self, values):
        return self.const(np.asarray(list(values), dtype=np.int64), "ints")

    def node(self, op, inputs, outputs=None, doc=None, **attrs):
        outputs = outputs or [self.tmp(op.lower())]
        n = self.h.make_node(op, list(inputs), list(outputs), **attrs)
        if doc:
            n.doc_string = doc
        self.nodes.append(n)
        return outputs[0] if len(outputs) == 1 else outputs


def convert(b, info, name_of, value_info):
    """Emit the ONNX nodes of one musa node; name_of(v) names value v."""
    op, a = info.op, info.attrs
    ins = [name_of(v) for v in info.inputs]
    out = name_of(info.outputs[0])
    doc = info.loc
    x_info = value_info(info.inputs[0]) if info.inputs else None
    y_info = value_info(info.outputs[0])

    def emit(onnx_op, inputs, **kw):
        return b.node(onnx_op, inputs, [out], doc=doc, **kw)

    if op in _BINARY:
        return emit(_BINARY[op], ins)
    if op in _UNARY:
        return emit(_UNARY[op], ins)
    if op == "ne":
        return emit("Not", [b.node("Equal", ins, doc=doc)])
    if op == "rsqrt":
        return emit("Reciprocal", [b.node("Sqrt", ins, doc=doc)])
    if op == "expm1":
        one = b.const(np.ones((), dtype=to_np_dtype(x_info.dtype)))
        return emit("Sub", [b.node("Exp", ins, doc=doc), one])
    if op == "log1p":
        one = b.const(np.ones((), dtype=to_np_dtype(x_info.dtype)))
        return emit("Log", [b.node("Add", [ins[0], one], doc=doc)])
    if op == "gelu":
        dt = to_np_dtype(x_info.dtype)
        x = ins[0]
        half, one = b.const(np.array(0.5, dt)), b.const(np.array(1.0, dt))
        if a["tanh"]:  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
            x3 = b.node("Mul", [x, b.node("Mul", [x, x])])
            inner = b.node("Add", [x, b.node("Mul", [x3, b.const(np.array(0.044715, dt))])])
            t = b.node("Tanh", [b.node("Mul", [inner, b.const(np.array(0.7978845608028654, dt))])])
        else:  # 0.5 x (1 + erf(x / sqrt(2)))
            t = b.node("Erf", [b.node("Mul", [x, b.const(np.array(0.7071067811865476, dt))])])
        return emit("Mul", [b.node("Mul", [x, half]), b.node("Add", [t, one])])
    if op == "where":
        return emit("Where", ins)
    if op == "clamp":
        dt = to_np_dtype(x_info.dtype)
        lo = b.const(np.array(a["min"], dt)) if a["has_min"] else ""
        hi = b.const(np.array(a["max"], dt)) if a["has_max"] else ""
        return emit("Clip", [ins[0], lo, hi])
    if op == "cast":
        return emit("Cast", ins, to=onnx_dtype(y_info.dtype))
    if op == "sum":
        x = ins[0]
        if x_info.dtype != y_info.dtype:  # small integers and bool sum in int64, as musa's do
            x = b.node("Cast", [x], doc=doc, to=onnx_dtype(y_info.dtype))
        if a["dims"]:
            return emit("ReduceSum", [x, b.ints(a["dims"])], keepdims=int(a["keepdim"]))
        return emit("ReduceSum", [x], keepdims=int(a["keepdim"]))
    if op in _REDUCE:
        kw = {"axes": list(a["dims"])} if a["dims"] else {}
        return emit(_REDUCE[op], ins, keepdims=int(a["keepdim"]), **kw)
    if op in ("argmax", "argmin"):
        return emit("ArgMax" if op == "argmax" else "ArgMin", ins, axis=a["dim"],
                    keepdims=int(a["keepdim"]))
    if op == "matmul":
        x, w = ins
        if a["transpose_a"]:
            x = b.node("Transpose", [x], perm=_swap_last(len(value_info(info.inputs[0]).shape)))
        if a["transpose_b"]:
            w = b.node("Transpose", [w], perm=_swap_last(len(value_info(info.inputs[1]).shape)))
        return emit("MatMul", [x, w])
    if op == "linear":
        if len(x_info.shape) == 2:
            return emit("Gemm", ins, transB=1)
        w_t = b.node("Transpose", [ins[1]], perm=[1, 0], doc=doc)
        if len(ins) == 2:
            return emit("MatMul", [ins[0], w_t])
        return emit("Add", [b.node("MatMul", [ins[0], w_t], doc=doc), ins[2]])
    if op in ("view", "squeeze", "unsqueeze"):
        # leading dims equal to the input's are 0 ("copy that dim"), so a
        # dynamic batch passes through flatten-style reshapes
        shape, same = list(y_info.shape), True
        for i, d in enumerate(shape):
            same = same and i < len(x_info.shape) and x_info.shape[i] == d
            if same:
                shape[i] = 0
        return emit("Reshape", [ins[0], b.ints(shape)])
    if op == "permute":
        return emit("Transpose", ins, perm=list(a["dims"]))
    if op == "expand":  # dims the input already has stay 1 (broadcast keeps them)
        xs = [1] * (len(y_info.shape) - len(x_info.shape)) + list(x_info.shape)
        return emit("Expand", [ins[0], b.ints([1 if xd == yd else yd for xd, yd in
                                               zip(xs, y_info.shape)])])
    if op == "slice":
        end = min(a["end"], 2 ** 62)
        return emit("Slice", [ins[0], b.ints([a["start"]]), b.ints([end]), b.ints([a["dim"]]),
                              b.ints([a["step"]])])
    if op == "select":
        return emit("Gather", [ins[0], b.const(np.array(a["index"], np.int64))], axis=a["dim"])
    if op == "cat":
        return emit("Concat", ins, axis=a["dim"])
    if op == "gather":
        return emit("GatherElements", ins, axis=a["dim"])
    if op == "index_select":
        return emit("Gather", ins, axis=a["dim"])
    if op == "resample":  # the taps' rows Gathered, times their weights, added in order
        d, taps = a["dim"], value_info(info.inputs[1]).shape[1]
        shape = [1] * len(x_info.shape)
        shape[d] = -1
        terms = []
        for k in range(taps):
            kk = b.const(np.array(k, np.int64))
            rows = b.node("Gather", [ins[0], b.node("Gather", [ins[1], kk], axis=1)], axis=d)
            w = b.node("Gather", [ins[2], kk], axis=1)
            w = b.node("Cast", [w], to=onnx_dtype(x_info.dtype))
            terms.append((rows, b.node("Reshape", [w, b.ints(shape)])))
        if taps == 1:
            return emit("Mul", list(terms[0]))
        acc = b.node("Mul", list(terms[0]), doc=doc)
        for k, (rows, w) in enumerate(terms[1:], 1):
            term = b.node("Mul", [rows, w], doc=doc)
            acc = emit("Add", [acc, term]) if k == taps - 1 else b.node("Add", [acc, term], doc=doc)
        return acc
    if op in ("tril", "triu"):
        return emit("Trilu", [ins[0], b.const(np.array(a["k"], np.int64))], upper=int(op == "triu"))
    if op == "cumsum":
        return emit("CumSum", [ins[0], b.const(np.array(a["dim"], np.int64))])
    if op == "flip":
        dims = list(a["dims"])
        return emit("Slice", [ins[0], b.ints([-1] * len(dims)), b.ints([-(2 ** 62)] * len(dims)),
                              b.ints(dims), b.ints([-1] * len(dims))])
    if op == "topk":
        outs = [out, name_of(info.outputs[1])]
        return b.node("TopK", [ins[0], b.ints([a["k"]])], outs, doc=doc, axis=a["dim"],
                      largest=int(a["largest"]), sorted=1)
    if op == "conv2d":
        p = list(a["padding"])
        return emit("Conv", ins, strides=list(a["stride"]), pads=p + p,
                    dilations=list(a["dilation"]), group=a["groups"],
                    kernel_shape=list(value_info(info.inputs[1]).shape[2:]))
    if op in ("max_pool2d", "avg_pool2d"):
        p = list(a["padding"])
        kw = dict(kernel_shape=list(a["kernel"]), strides=list(a["stride"]), pads=p + p,
                  ceil_mode=int(a["ceil_mode"]))
        if op == "max_pool2d":
            if any(d != 1 for d in a["dilation"]):
                kw["dilations"] = list(a["dilation"])
            return emit("MaxPool", [ins[0]], **kw)
        return emit("AveragePool", [ins[0]], count_include_pad=int(a["count_include_pad"]), **kw)
    if op == "adaptive_avg_pool2d":
        h, w = x_info.shape[2:]
        oh, ow = y_info.shape[2:]
        if (oh, ow) == (1, 1):
            return emit("GlobalAveragePool", ins)
        if h % oh or w % ow:
            raise NotImplementedError(f"[onnx.export] adaptive_avg_pool2d from {h}x{w} to "
                                      f"{oh}x{ow} (not a whole stride) has no ONNX form")
        return emit("AveragePool", ins, kernel_shape=[h // oh, w // ow], strides=[h // oh, w // ow])
    if op in ("softmax", "log_softmax"):
        return emit("Softmax" if op == "softmax" else "LogSoftmax", ins, axis=a["dim"])
    if op == "layer_norm":
        axis = len(x_info.shape) - a["ndims"]
        return emit("LayerNormalization", ins, axis=axis, epsilon=a["eps"])
    raise NotImplementedError(f"[onnx.export] op {op} has no ONNX form in musa's exporter"
                              + (f" (recorded at {info.loc})" if info.loc else ""))


def _swap_last(ndim):
    perm = list(range(ndim))
    perm[-2], perm[-1] = perm[-1], perm[-2]
    return perm


def to_np_dtype(dtype):
    return {"float32": np.float32, "float64": np.float64, "float16": np.float16,
            "int64": np.int64, "int32": np.int32, "int16": np.int16, "int8": np.int8,
            "uint8": np.uint8,
            "bool": np.bool_}[str(dtype).replace("musa.", "")]
