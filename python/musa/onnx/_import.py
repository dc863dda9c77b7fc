"""ONNX -> musa: musa.onnx.load.

Each ONNX node becomes calls of musa's ops, in a function that musa.jit
compiles (so a loaded model runs as one plan, and its graph is musa IR).
The model is checked first (onnx.checker), and every node's domain, opset,
op and attributes are checked before anything runs; an op musa does not
import fails with NotImplementedError naming the node, its op, domain and
opset.
"""
import numpy as np

import musa

from .. import _C
from ._export import _ONNX_DTYPE

_BINARY = {"Add": musa.add, "Sub": musa.sub, "Mul": musa.mul, "Div": None, "Pow": musa.pow,
           "Equal": musa.eq, "Less": musa.lt, "LessOrEqual": musa.le, "Greater": musa.gt,
           "GreaterOrEqual": musa.ge, "And": musa.logical_and, "Or": musa.logical_or,
           "Xor": musa.logical_xor}
_UNARY = {"Neg": musa.neg, "Abs": musa.abs, "Sign": musa.sign, "Exp": musa.exp, "Log": musa.log,
          "Sqrt": musa.sqrt, "Reciprocal": musa.reciprocal, "Sin": musa.sin, "Cos": musa.cos,
          "Tanh": musa.tanh, "Sigmoid": musa.sigmoid, "Erf": musa.erf, "Relu": musa.relu,
          "Floor": musa.floor, "Ceil": musa.ceil, "Round": musa.round, "Not": musa.logical_not,
          "IsNaN": musa.isnan, "IsInf": musa.isinf, "Asin": musa.asin, "Acos": musa.acos,
          "Atan": musa.atan, "Asinh": musa.asinh, "Acosh": musa.acosh, "Atanh": musa.atanh,
          "Identity": lambda x: x}
# ONNX's TensorProto codes -> musa dtypes: the exporter's table, inverted
_FROM_ONNX = {code: getattr(musa, name) for name, code in _ONNX_DTYPE.items()}


# every op run_node handles (load checks each node against it first)
SUPPORTED = frozenset(_BINARY) | frozenset(_UNARY) | frozenset({
    "Max", "Min", "Where", "Clip", "Cast", "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin",
    "ReduceProd", "ArgMax", "ArgMin", "MatMul", "Gemm", "Transpose", "Reshape", "Flatten",
    "Squeeze", "Unsqueeze", "Expand", "Slice", "Gather", "GatherElements", "Concat", "Trilu",
    "CumSum", "TopK", "Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "Softmax",
    "LogSoftmax", "LayerNormalization", "BatchNormalization", "LeakyRelu", "Dropout", "Shape",
    "ConstantOfShape", "Constant", "Split", "Tile", "Pad", "Range", "Elu", "Selu", "Softplus",
    "HardSigmoid", "PRelu", "Einsum", "InstanceNormalization", "ConvTranspose",
    "ScatterElements", "Sum", "Mean", "Size", "Resize", "LSTM", "GRU", "Mod", "ReduceL1",
    "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "HardSwish", "Softsign",
    "Sinh", "Cosh", "Tan", "ThresholdedRelu", "Shrink", "Celu", "GlobalMaxPool", "DepthToSpace",
    "SpaceToDepth", "OneHot", "CastLike", "Hardmax", "NegativeLogLikelihoodLoss",
    "SoftmaxCrossEntropyLoss", "MeanVarianceNormalization"})


# inputs that ops read as integers or scalars: given as NumPy arrays when
# they are constants (folded before capture), so the compiled function never
# reads a tensor on the host
SHAPE_ARGS = {"Reshape": {1}, "Expand": {1}, "Slice": {1, 2, 3, 4}, "Squeeze": {1},
              "Unsqueeze": {1}, "ReduceSum": {1}, "TopK": {1}, "Trilu": {1}, "CumSum": {1},
              "ConstantOfShape": {0}, "Clip": {1, 2}, "Gather": {1}, "Split": {1}, "Tile": {1},
              "Pad": {1, 2, 3}, "Range": {0, 1, 2}, "OneHot": {1},
              "ReduceL1": {1}, "ReduceL2": {1}, "ReduceLogSum": {1}, "ReduceLogSumExp": {1},
              "ReduceSumSquare": {1}}


class _Node:
    """An ONNX node's fields, its attributes as Python values."""

    def __init__(self, node, helper):
        self.op, self.name = node.op_type, node.name or node.output[0]
        self.inputs, self.outputs = list(node.input), list(node.output)
        from onnx import numpy_helper
        self.attrs = {}
        for a in node.attribute:
            v = helper.get_attribute_value(a)
            if hasattr(v, "data_type") and hasattr(v, "dims"):  # a TensorProto
                v = numpy_helper.to_array(v)
            self.attrs[a.name] = v.decode() if isinstance(v, bytes) else v

    def where(self):
        return f"node {self.name!r} ({self.op})"


def _tensor(array):
    a = np.array(array, order="C")  # (ascontiguousarray makes 0-d arrays 1-d)
    return musa.tensor(a) if a.dtype != np.bool_ else musa.tensor(a.tolist(), dtype=musa.bool)


def _ints(t):
    return [int(v) for v in (t.tolist() if isinstance(t, _C.Tensor) else t)]


def _axes(ndim, axes):
    return [a + ndim if a < 0 else a for a in axes]


def _spatial_pads(n, x, kernel, strides, dilations):
    """ONNX's pads (begins then ends) for x's spatial dims, from pads or
    auto_pad (SAME_UPPER, SAME_LOWER: output = ceil(input / stride))."""
    k = len(kernel)
    auto = n.attrs.get("auto_pad", "NOTSET")
    if auto in ("NOTSET", "VALID"):
        pads = list(n.attrs.get("pads") or [0] * (2 * k))
        return pads if auto == "NOTSET" else [0] * (2 * k)
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise NotImplementedError(f"[onnx.load] {n.where()}: auto_pad {auto}")
    begins, ends = [], []
    for i in range(k):
        size = x.shape[2 + i]
        out = -(-size // strides[i])
        total = max((out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - size, 0)
        small = total // 2
        begins.append(small if auto == "SAME_UPPER" else total - small)
        ends.append(total - begins[-1])
    return begins + ends


def _pad_explicit(x, pads, value):
    """x padded on its spatial dims by ONNX pads (begins then ends)."""
    k = len(pads) // 2
    tp = []
    for i in reversed(range(k)):
        tp += [pads[i], pads[i + k]]
    return musa.nn.functional.pad(x, tp, value=value)


def _pool(n, x, op):
    """MaxPool and AveragePool in 1 to 3 dims; asymmetric or large pads are
    applied explicitly (-inf for max; for average, the count of real
    elements divides unless count_include_pad)."""
    F = musa.nn.functional
    a = n.attrs
    k = list(a["kernel_shape"])
    nd = len(k)
    if x.dim() != nd + 2 or nd > 3:
        raise NotImplementedError(f"[onnx.load] {n.where()}: {nd}-d pooling of a "
                                  f"{x.dim()}-d input")
    st = list(a.get("strides") or [1] * nd)
    dl = list(a.get("dilations") or [1] * nd)
    pads = _spatial_pads(n, x, k, st, dl)
    ceil = bool(a.get("ceil_mode", 0))
    sym = pads[:nd] == pads[nd:] and all(2 * p <= kk for p, kk in zip(pads[:nd], k))
    fns = {"MaxPool": (F.max_pool1d, F.max_pool2d, F.max_pool3d),
           "AveragePool": (F.avg_pool1d, F.avg_pool2d, F.avg_pool3d)}[op]
    fn = fns[nd - 1]
    dtype = x.dtype
    if not x.dtype.is_floating_point:
        x = x.float()
    if op == "MaxPool":
        if sym:
            y = fn(x, k, st, pads[:nd], dilation=dl, ceil_mode=ceil)
        else:
            y = fn(_pad_explicit(x, pads, float("-inf")), k, st, 0, dilation=dl, ceil_mode=ceil)
        return y.to(dtype)
    if any(d != 1 for d in dl):
        raise NotImplementedError(f"[onnx.load] {n.where()}: dilated AveragePool")
    include = bool(a.get("count_include_pad", 0))
    if sym:
        return fn(x, k, st, pads[:nd], ceil_mode=ceil, count_include_pad=include).to(dtype)
    xp = _pad_explicit(x, pads, 0.0)
    total = fn(xp, k, st, 0, ceil_mode=ceil, count_include_pad=True)
    if include:
        return total.to(dtype)
    ones = _pad_explicit(musa.ones_like(x), pads, 0.0)
    return (total / fn(ones, k, st, 0, ceil_mode=ceil, count_include_pad=True)).to(dtype)


def _reduce(n, x, fn, axes):
    keep = bool(n.attrs.get("keepdims", 1))
    if axes is None or len(axes) == 0:
        if n.attrs.get("noop_with_empty_axes", 0):
            return x
        axes = list(range(x.dim()))
    return fn(x, _axes(x.dim(), axes), keep)


def run_node(n, args):
    """The musa computation of one ONNX node on its inputs (None: absent)."""
    F = musa.nn.functional
    op, a = n.op, n.attrs
    x = args[0] if args else None
    if op in _BINARY:
        if op == "Div":
            if not x.dtype.is_floating_point:  # ONNX's integer division truncates
                return musa.div(x, args[1], rounding_mode="trunc")
            return musa.div(x, args[1])
        y = _BINARY[op](x, args[1])
        return y.to(x.dtype) if op == "Pow" and y.dtype != x.dtype else y
    if op == "IsInf":
        pos, neg = a.get("detect_positive", 1), a.get("detect_negative", 1)
        return musa.logical_and(musa.isinf(x), (x > 0) if pos and not neg else
                                (x < 0) if neg and not pos else musa.isinf(x)) \
            if pos or neg else musa.zeros_like(x, dtype=musa.bool)
    if op in _UNARY:
        return _UNARY[op](x)
    if op in ("Max", "Min"):
        out = args[0]
        for y in args[1:]:
            out = (musa.maximum if op == "Max" else musa.minimum)(out, y)
        return out
    if op == "Where":
        return musa.where(*args)
    if op == "Clip":
        lo = args[1] if len(args) > 1 and args[1] is not None else None
        hi = args[2] if len(args) > 2 and args[2] is not None else None
        if lo is None and hi is None:
            return x
        return musa.clamp(x, None if lo is None else lo.item(), None if hi is None else hi.item())
    if op == "Cast":
        if a["to"] not in _FROM_ONNX:
            raise NotImplementedError(f"[onnx.load] {n.where()}: Cast to ONNX type {a['to']}, "
                                      f"which musa does not have")
        return x.to(_FROM_ONNX[a["to"]])
    if op == "ReduceSum":
        return _reduce(n, x, lambda t, d, k: musa.sum(t, d, keepdim=k),
                       _ints(args[1]) if len(args) > 1 and args[1] is not None else None)
    if op in ("ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"):
        fn = {"ReduceMean": lambda t, d, k: musa.mean(t, d, keepdim=k),
              "ReduceMax": lambda t, d, k: musa.amax(t, d, keepdim=k),
              "ReduceMin": lambda t, d, k: musa.amin(t, d, keepdim=k),
              "ReduceProd": lambda t, d, k: _prod(t, d, k)}[op]
        return _reduce(n, x, fn, a.get("axes"))
    if op in ("ArgMax", "ArgMin"):
        fn = musa.argmax if op == "ArgMax" else musa.argmin
        ax = a.get("axis", 0)
        ax = ax + x.dim() if ax < 0 else ax
        keep = bool(a.get("keepdims", 1))
        if a.get("select_last_index", 0):  # the first of the flipped order
            return x.shape[ax] - 1 - fn(x.flip(ax), ax, keepdim=keep)
        return fn(x, ax, keepdim=keep)
    if op == "MatMul":
        return musa.matmul(x, args[1])
    if op == "Gemm":
        A = x.t() if a.get("transA", 0) else x
        B = args[1].t() if a.get("transB", 0) else args[1]
        y = musa.matmul(A, B)
        if a.get("alpha", 1.0) != 1.0:
            y = y * a["alpha"]
        if len(args) > 2 and args[2] is not None:
            c = args[2] if a.get("beta", 1.0) == 1.0 else args[2] * a["beta"]
            y = y + c
        return y
    if op == "Transpose":
        perm = a.get("perm") or list(range(x.dim()))[::-1]
        return x.permute(*perm)
    if op == "Reshape":
        shape = _ints(args[1])
        if a.get("allowzero", 0) and 0 in shape:
            return x.reshape(shape)
        return x.reshape([x.shape[i] if d == 0 else d for i, d in enumerate(shape)])
    if op == "Flatten":
        ax = a.get("axis", 1)
        ax = ax + x.dim() if ax < 0 else ax
        lead = 1
        for d in x.shape[:ax]:
            lead *= d
        return x.reshape(lead, -1)
    if op == "Squeeze":
        axes = _ints(args[1]) if len(args) > 1 and args[1] is not None else None
        if axes is None:
            return x.squeeze()
        for d in sorted(_axes(x.dim(), axes), reverse=True):
            x = x.squeeze(d)
        return x
    if op == "Unsqueeze":
        out_dim = x.dim() + len(_ints(args[1]))
        for d in sorted(_axes(out_dim, _ints(args[1]))):
            x = x.unsqueeze(d)
        return x
    if op == "Expand":
        shape = _ints(args[1])
        n_out = max(len(shape), x.dim())
        xs = [1] * (n_out - x.dim()) + list(x.shape)
        ss = [1] * (n_out - len(shape)) + shape
        target = [xd if sd == 1 else sd for xd, sd in zip(xs, ss)]
        return x.reshape(xs).expand(*target)
    if op == "Slice":
        starts, ends = _ints(args[1]), _ints(args[2])
        axes = _ints(args[3]) if len(args) > 3 and args[3] is not None else list(range(len(starts)))
        steps = _ints(args[4]) if len(args) > 4 and args[4] is not None else [1] * len(starts)
        for s, e, ax, st in zip(starts, ends, _axes(x.dim(), axes), steps):
            size = x.shape[ax]
            if st > 0:
                s = max(0, min(size, s + size if s < 0 else s))
                e = max(0, min(size, e + size if e < 0 else e))
                x = x.narrow(ax, s, max(0, e - s))[(slice(None),) * ax + (slice(None, None, st),)] \
                    if st > 1 else x.narrow(ax, s, max(0, e - s))
            else:
                s = max(-1, min(size - 1, s + size if s < 0 else s))
                e = max(-1, min(size - 1, e + size if e < 0 else e))
                x = x.flip(ax).narrow(ax, size - 1 - s, max(0, s - e))
                if st < -1:
                    x = x[(slice(None),) * ax + (slice(None, None, -st),)]
        return x
    if op == "Gather":
        ax = a.get("axis", 0)
        idx = args[1]
        if isinstance(idx, np.ndarray):
            idx = _tensor(idx.astype(np.int64)) if idx.ndim else int(idx)
        if isinstance(idx, int):
            return x.select(ax, idx % x.shape[ax if ax >= 0 else ax + x.dim()])
        if idx.dim() == 0:
            return x.select(ax, int(idx.item()) % x.shape[ax if ax >= 0 else ax + x.dim()])
        return musa.index_select(x, ax, idx.reshape(-1)).reshape(
            list(x.shape[:ax]) + list(idx.shape) + list(x.shape[ax + 1 if ax >= 0 else x.dim() + ax + 1:]))
    if op == "GatherElements":
        return musa.gather(x, a.get("axis", 0), args[1])
    if op == "Concat":
        return musa.cat([t for t in args if t is not None], a["axis"])
    if op == "Trilu":
        k = int(args[1].item()) if len(args) > 1 and args[1] is not None else 0
        return musa.triu(x, k) if a.get("upper", 1) else musa.tril(x, k)
    if op == "CumSum":
        ax = int(np.asarray(args[1]).reshape(-1)[0]) if isinstance(args[1], np.ndarray) \
            else int(args[1].item())
        rev = bool(a.get("reverse", 0))
        y = musa.cumsum(x.flip(ax) if rev else x, ax)
        if a.get("exclusive", 0):
            y = y - (x.flip(ax) if rev else x)
        return y.flip(ax) if rev else y
    if op == "TopK":
        v, i = musa.topk(x, int(_ints(args[1])[0]), a.get("axis", -1),
                         largest=bool(a.get("largest", 1)))
        return v, i
    if op == "Conv":
        nd = x.dim() - 2
        if nd not in (1, 2, 3):
            raise NotImplementedError(f"[onnx.load] {n.where()}: {nd}-d convolution")
        k = list(a.get("kernel_shape") or args[1].shape[2:])
        st = list(a.get("strides") or [1] * nd)
        dl = list(a.get("dilations") or [1] * nd)
        pads = _spatial_pads(n, x, k, st, dl)
        if pads[:nd] != pads[nd:]:
            x, pads = _pad_explicit(x, pads, 0.0), [0] * (2 * nd)
        b = args[2] if len(args) > 2 else None
        conv = (F.conv1d, F.conv2d, F.conv3d)[nd - 1]
        return conv(x, args[1], b, stride=st, padding=pads[:nd], dilation=dl,
                    groups=a.get("group", 1))
    if op in ("MaxPool", "AveragePool"):
        y = _pool(n, x, op)
        if op == "MaxPool" and len(n.outputs) > 1 and n.outputs[1]:
            return y, _pool_indices(n, x, y)
        return y
    if op == "GlobalAveragePool":
        return musa.mean(x, list(range(2, x.dim())), keepdim=True)
    if op in ("Softmax", "LogSoftmax"):
        return (F.softmax if op == "Softmax" else F.log_softmax)(x, a.get("axis", -1))
    if op == "LayerNormalization":
        ax = a.get("axis", -1)
        ax = ax + x.dim() if ax < 0 else ax
        b = args[2] if len(args) > 2 else None
        eps = a.get("epsilon", 1e-5)
        y = F.layer_norm(x, list(x.shape[ax:]), args[1], b, eps)
        if len(n.outputs) == 1:
            return y
        dims = list(range(ax, x.dim()))  # Mean and InvStdDev, kept dims
        mean = musa.mean(x, dims, keepdim=True)
        var = musa.mean((x - mean) * (x - mean), dims, keepdim=True)
        return y, mean, musa.rsqrt(var + eps)
    if op == "BatchNormalization":
        if a.get("training_mode", 0):
            raise NotImplementedError(f"[onnx.load] {n.where()}: training_mode=1")
        return F.batch_norm(x, args[3], args[4], args[1], args[2], False, 0.0,
                            a.get("epsilon", 1e-5))
    if op == "LeakyRelu":
        return F.leaky_relu(x, a.get("alpha", 0.01))
    if op == "Dropout":  # inference: identity (training_mode is refused at load)
        return (x, musa.ones_like(x, dtype=musa.bool)) if len(n.outputs) > 1 else x
    if op == "Shape":  # a constant: folded before capture
        return np.asarray(list(x.shape)[a.get("start", 0):a.get("end", x.dim())], dtype=np.int64)
    if op == "ConstantOfShape":
        v = a.get("value")
        fill = np.asarray(v).reshape(-1)[0] if v is not None else np.float32(0)
        return musa.full(_ints(x), fill.item(), dtype=_tensor(np.asarray(fill)).dtype)
    if op == "Split":
        ax = a.get("axis", 0)
        ax = ax + x.dim() if ax < 0 else ax
        if len(args) > 1 and args[1] is not None:
            sizes = _ints(args[1])
        else:
            k = len(n.outputs)
            sizes = [(x.shape[ax] + k - 1) // k] * (k - 1)
            sizes.append(x.shape[ax] - sum(sizes))
        return tuple(musa.split(x, sizes, ax))
    if op == "Tile":
        return musa.tile(x, _ints(args[1]))
    if op == "Pad":
        mode = {"edge": "replicate"}.get(a.get("mode", "constant"), a.get("mode", "constant"))
        pads = _ints(args[1])
        axes = _axes(x.dim(), _ints(args[3])) if len(args) > 3 and args[3] is not None \
            else list(range(x.dim()))
        k = len(axes)
        torch_pads = []
        for i in reversed(range(k)):  # F.pad lists the last dim first
            if axes[i] != x.dim() - k + i and (pads[i] or pads[i + k]):
                raise NotImplementedError(f"[onnx.load] {n.where()}: Pad of leading dims")
            torch_pads += [pads[i], pads[i + k]]
        value = float(np.asarray(args[2]).reshape(-1)[0]) if len(args) > 2 and args[2] is not None \
            else 0.0
        return F.pad(x, torch_pads, mode=mode, value=value) if mode == "constant" else \
            F.pad(x, torch_pads, mode=mode)
    if op == "Range":
        start, limit, delta = (np.asarray(t).reshape(-1)[0] for t in args)
        return _tensor(np.arange(start, limit, delta, dtype=np.asarray(args[0]).dtype))
    if op == "Elu":
        return F.elu(x, a.get("alpha", 1.0))
    if op == "Selu":
        if "alpha" in a or "gamma" in a:
            al, ga = a.get("alpha", 1.67326319217681884765625), a.get("gamma", 1.05070102214813232421875)
            return ga * musa.where(x > 0, x, al * (musa.exp(x) - 1))
        return F.selu(x)
    if op == "Softplus":
        return F.softplus(x)
    if op == "HardSigmoid":
        return musa.clamp(x * a.get("alpha", 0.2) + a.get("beta", 0.5), 0.0, 1.0)
    if op == "PRelu":
        return musa.where(x >= 0, x, x * args[1])
    if op == "Einsum":
        return musa.einsum(a["equation"], *args)
    if op == "InstanceNormalization":
        return F.instance_norm(x, weight=args[1], bias=args[2], eps=a.get("epsilon", 1e-5))
    if op == "ConvTranspose":
        return _conv_transpose(n, x, args)
    if op == "ScatterElements":
        red = a.get("reduction", "none")
        ax = a.get("axis", 0)
        idx = musa.where(args[1] < 0, args[1] + x.shape[ax], args[1])
        if red == "add":
            return musa.scatter_add(x, ax, idx, args[2])
        if red != "none":
            raise NotImplementedError(f"[onnx.load] {n.where()}: reduction {red}")
        return musa.scatter(x, ax, idx, args[2])
    if op in ("Sum", "Mean"):
        out = args[0]
        for y in args[1:]:
            out = out + y
        return out / len(args) if op == "Mean" else out
    if op == "Size":
        return np.asarray(x.numel(), dtype=np.int64)
    if op == "Resize":
        return _resize(n, x, args)
    if op in _MORE:
        return _MORE[op](n, x, args)
    if op in ("LSTM", "GRU"):
        return _recurrent(n, op, args)
    raise NotImplementedError(f"[onnx.load] {n.where()}: op {op} (domain '', opset) is not "
                              f"supported by musa's importer")


def _prod(t, dims, keep):
    for d in sorted(dims, reverse=True):
        t = musa.prod(t, d, keepdim=keep)
    return t


def _pool_indices(n, x, y):
    """MaxPool's Indices output: the flat index into x (row-major over the
    whole tensor, storage_order 0) of each maximum."""
    a = n.attrs
    if x.dim() != 4 or a.get("storage_order", 0) or any(p for p in (a.get("pads") or [])):
        raise NotImplementedError(f"[onnx.load] {n.where()}: this MaxPool Indices form")
    _, idx = musa.nn.functional.max_pool2d(x.float(), list(a["kernel_shape"]),
                                           list(a.get("strides") or [1, 1]), 0,
                                           dilation=list(a.get("dilations") or [1, 1]),
                                           ceil_mode=bool(a.get("ceil_mode", 0)),
                                           return_indices=True)
    N, C, H, W = x.shape
    base = (musa.arange(N * C, dtype=musa.int64) * (H * W)).reshape(N, C, 1, 1)
    return idx + base


def _resize(n, x, args):
    """Resize, nearest and linear, in any number of dims: per resized dim the
    source coordinate of each output index by the node's
    coordinate_transformation_mode, then index_select (nearest, by
    nearest_mode) or a blend of the two neighbours (linear), dim by dim."""
    a = n.attrs
    mode = a.get("mode", "nearest")
    if mode not in ("nearest", "linear", "cubic"):
        raise NotImplementedError(f"[onnx.load] {n.where()}: Resize mode {mode}")
    ctm = a.get("coordinate_transformation_mode", "half_pixel")
    if ctm == "tf_crop_and_resize" or a.get("antialias", 0):
        raise NotImplementedError(f"[onnx.load] {n.where()}: Resize with {ctm}")
    nd = x.dim()
    sizes = _ints(args[3]) if len(args) > 3 and args[3] is not None and np.asarray(args[3]).size \
        else None
    scales = [float(v) for v in np.asarray(args[2]).reshape(-1)] \
        if sizes is None and len(args) > 2 and args[2] is not None else None
    axes = _axes(nd, a["axes"]) if a.get("axes") else list(range(nd))
    if sizes is not None:
        full = list(x.shape)
        for d, v in zip(axes, sizes):
            full[d] = v
        policy = a.get("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            raise NotImplementedError(f"[onnx.load] {n.where()}: keep_aspect_ratio_policy {policy}")
        scale = [full[d] / x.shape[d] for d in range(nd)]
    else:
        full, scale = list(x.shape), [1.0] * nd
        for d, v in zip(axes, scales):
            full[d], scale[d] = int(np.floor(x.shape[d] * v)), v
    nearest = a.get("nearest_mode", "round_prefer_floor")
    for d in range(nd):
        if full[d] == x.shape[d] and scale[d] == 1.0:
            continue
        size_in, size_out, s = x.shape[d], full[d], scale[d]
        o = np.arange(size_out, dtype=np.float64)
        if ctm == "half_pixel":
            c = (o + 0.5) / s - 0.5
        elif ctm == "pytorch_half_pixel":
            c = (o + 0.5) / s - 0.5 if size_out > 1 else np.zeros_like(o)
        elif ctm == "align_corners":  # the unrounded resized length, as ONNX defines it
            c = o * (size_in - 1) / (size_in * s - 1) if size_out > 1 else np.zeros_like(o)
        elif ctm == "asymmetric":
            c = o / s
        elif ctm == "tf_half_pixel_for_nn":
            c = (o + 0.5) / s
        else:
            raise NotImplementedError(f"[onnx.load] {n.where()}: coordinate_transformation_mode {ctm}")
        if mode == "nearest":
            if nearest == "round_prefer_floor":
                i = np.where(c == np.floor(c) + 0.5, np.floor(c), np.round(c))
            elif nearest == "round_prefer_ceil":
                i = np.where(c == np.floor(c) + 0.5, np.ceil(c), np.round(c))
            elif nearest == "floor":
                i = np.floor(c)
            else:
                i = np.ceil(c)
            idx = _tensor(np.clip(i, 0, size_in - 1).astype(np.int64))
            x = musa.index_select(x, d, idx)
        elif mode == "cubic":  # 4 taps, Keys' kernel with cubic_coeff_a
            A = a.get("cubic_coeff_a", -0.75)
            base = np.floor(c)
            t = c - base
            taps = [base + k for k in (-1, 0, 1, 2)]
            dist = [1 + t, t, 1 - t, 2 - t]

            def kern(dd):
                dd = np.abs(dd)
                return np.where(dd <= 1, (A + 2) * dd ** 3 - (A + 3) * dd ** 2 + 1,
                                np.where(dd < 2, A * dd ** 3 - 5 * A * dd ** 2 + 8 * A * dd - 4 * A,
                                         0.0))
            ws = [kern(dd) for dd in dist]
            if a.get("exclude_outside", 0):
                ws = [np.where((tp < 0) | (tp > size_in - 1), 0.0, w) for tp, w in zip(taps, ws)]
                total = sum(ws)
                ws = [w / total for w in ws]
            shape = [1] * nd
            shape[d] = size_out
            acc = None
            for tp, w in zip(taps, ws):
                idx = _tensor(np.clip(tp, 0, size_in - 1).astype(np.int64))
                term = musa.index_select(x, d, idx) * _tensor(w.astype(np.float32)).reshape(
                    shape).to(x.dtype)
                acc = term if acc is None else acc + term
            x = acc
        else:
            c = np.clip(c, 0, size_in - 1)
            lo = np.floor(c).astype(np.int64)
            hi = np.minimum(lo + 1, size_in - 1)
            shape = [1] * nd
            shape[d] = size_out
            w = _tensor((c - lo).astype(np.float32)).reshape(shape).to(x.dtype)
            x0 = musa.index_select(x, d, _tensor(lo))
            x1 = musa.index_select(x, d, _tensor(hi))
            x = x0 + (x1 - x0) * w
    return x


def _recurrent(n, op, args):
    """ONNX's LSTM (gates i, o, f, c; peepholes) and GRU (gates z, r, h;
    linear_before_reset), forward, reverse or bidirectional, with the default
    activations, unrolled over time with musa ops."""
    a = n.attrs
    if a.get("activations") or a.get("clip") is not None or a.get("input_forget", 0):
        raise NotImplementedError(f"[onnx.load] {n.where()}: {op} with custom activations, clip "
                                  f"or input_forget")
    if len(args) > 4 and args[4] is not None:
        raise NotImplementedError(f"[onnx.load] {n.where()}: {op} with sequence_lens")
    x, W, R = args[0], args[1], args[2]
    B = args[3] if len(args) > 3 else None
    layout = a.get("layout", 0)
    if layout:
        x = x.transpose(0, 1)
    seq, batch = x.shape[0], x.shape[1]
    H = a["hidden_size"]
    dirs = {"forward": [False], "reverse": [True], "bidirectional": [False, True]}[
        a.get("direction", "forward")]
    g = 4 if op == "LSTM" else 3
    h0 = args[5] if len(args) > 5 and args[5] is not None else None
    c0 = args[6] if op == "LSTM" and len(args) > 6 and args[6] is not None else None
    P = args[7] if op == "LSTM" and len(args) > 7 and args[7] is not None else None
    if layout and h0 is not None:
        h0 = h0.transpose(0, 1)
    if layout and c0 is not None:
        c0 = c0.transpose(0, 1)
    ys, hs, cs = [], [], []
    for d, rev in enumerate(dirs):
        w, r = W[d], R[d]
        wb = B[d][:g * H] if B is not None else musa.zeros(g * H, dtype=x.dtype)
        rb = B[d][g * H:] if B is not None else musa.zeros(g * H, dtype=x.dtype)
        h = h0[d] if h0 is not None else musa.zeros(batch, H, dtype=x.dtype)
        c = c0[d] if c0 is not None else musa.zeros(batch, H, dtype=x.dtype)
        xw = musa.matmul(x, w.t()) + wb  # all steps' input projections at once
        outs = [None] * seq
        for t in (reversed(range(seq)) if rev else range(seq)):
            if op == "LSTM":
                z = xw[t] + musa.matmul(h, r.t()) + rb
                i, o, f, cc = z[:, :H], z[:, H:2 * H], z[:, 2 * H:3 * H], z[:, 3 * H:]
                if P is not None:
                    i = i + P[d][:H] * c
                    f = f + P[d][2 * H:] * c
                i, f, cc = musa.sigmoid(i), musa.sigmoid(f), musa.tanh(cc)
                c = f * c + i * cc
                if P is not None:
                    o = o + P[d][H:2 * H] * c
                h = musa.sigmoid(o) * musa.tanh(c)
            else:
                xz, xr, xh = xw[t][:, :H], xw[t][:, H:2 * H], xw[t][:, 2 * H:]
                rz, rr, rh = r[:H], r[H:2 * H], r[2 * H:]
                zt = musa.sigmoid(xz + musa.matmul(h, rz.t()) + rb[:H])
                rt = musa.sigmoid(xr + musa.matmul(h, rr.t()) + rb[H:2 * H])
                if a.get("linear_before_reset", 0):
                    ht = musa.tanh(xh + rt * (musa.matmul(h, rh.t()) + rb[2 * H:]))
                else:
                    ht = musa.tanh(xh + musa.matmul(rt * h, rh.t()) + rb[2 * H:])
                h = (1 - zt) * ht + zt * h
            outs[t] = h
        ys.append(musa.stack(outs))
        hs.append(h)
        cs.append(c)
    Y = musa.stack(ys, 1)  # (seq, dirs, batch, H)
    Yh, Yc = musa.stack(hs), musa.stack(cs)
    if layout:
        Y, Yh, Yc = Y.permute(2, 0, 1, 3), Yh.transpose(0, 1), Yc.transpose(0, 1)
    return (Y, Yh, Yc) if op == "LSTM" else (Y, Yh)


def _reduce_op(fn):
    def run(n, x, args):
        axes = _ints(args[1]) if len(args) > 1 and args[1] is not None else n.attrs.get("axes")
        return _reduce(n, x, fn, axes)
    return run


def _nll(n, x, args, logp=None):
    """NegativeLogLikelihoodLoss on log-probabilities (N, C, d...), with
    weight, ignore_index and reduction, by ONNX's definition."""
    a = n.attrs
    logp = x if logp is None else logp
    target = args[1]
    weight = args[2] if len(args) > 2 and args[2] is not None else None
    ign = a.get("ignore_index")
    red = a.get("reduction", "mean")
    safe = target if ign is None else musa.where(target == ign, musa.zeros_like(target), target)
    picked = -musa.gather(logp, 1, safe.unsqueeze(1)).squeeze(1)
    w = musa.ones_like(picked) if weight is None else musa.index_select(weight, 0, safe.reshape(-1)).reshape(safe.shape)
    if ign is not None:
        w = musa.where(target == ign, musa.zeros_like(w), w)
    loss = picked * w
    if red == "none":
        return loss
    if red == "sum":
        return loss.sum()
    return loss.sum() / w.sum()


def _sce(n, x, args):
    """SoftmaxCrossEntropyLoss: log_softmax over dim 1, then the NLL; its
    optional second output is the log-probabilities."""
    logp = musa.nn.functional.log_softmax(x, 1)
    loss = _nll(n, x, args, logp)
    return (loss, logp) if len(n.outputs) > 1 and n.outputs[1] else loss


def _one_hot(n, x, args):
    depth = int(np.asarray(args[1]).reshape(-1)[0])
    values = args[2]
    ax = n.attrs.get("axis", -1)
    idx = musa.where(x < 0, x + depth, x).to(musa.int64)
    oh = musa.nn.functional.one_hot(idx, depth)
    ax = ax + oh.dim() if ax < 0 else ax
    oh = oh.movedim(-1, ax)
    off, on = values[0], values[1]
    return musa.where(oh == 1, on, off)


def _depth_space(n, x, args):
    b = n.attrs["blocksize"]
    N, C, H, W = x.shape
    if n.op == "SpaceToDepth":
        t = x.reshape(N, C, H // b, b, W // b, b).permute(0, 3, 5, 1, 2, 4)
        return t.reshape(N, C * b * b, H // b, W // b)
    if n.attrs.get("mode", "DCR") == "DCR":
        t = x.reshape(N, b, b, C // (b * b), H, W).permute(0, 3, 4, 1, 5, 2)
    else:
        t = x.reshape(N, C // (b * b), b, b, H, W).permute(0, 1, 4, 2, 5, 3)
    return t.reshape(N, C // (b * b), H * b, W * b)


def _hardmax(n, x, args):
    ax = n.attrs.get("axis", -1)
    i = musa.argmax(x, ax, keepdim=True)
    return musa.zeros_like(x).scatter(ax if ax >= 0 else ax + x.dim(), i, 1.0)


def _mvn(n, x, args):
    axes = n.attrs.get("axes", [0, 2, 3])
    mean = musa.mean(x, axes, keepdim=True)
    var = musa.mean((x - mean) * (x - mean), axes, keepdim=True)
    return (x - mean) / musa.sqrt(var + 1e-9)


def _mod(n, x, args):
    if n.attrs.get("fmod", 0) or x.dtype.is_floating_point:
        return musa.fmod(x, args[1])
    return musa.remainder(x, args[1])


_MORE = {
    "Mod": _mod,
    "ReduceL1": _reduce_op(lambda t, d, k: musa.sum(musa.abs(t), d, keepdim=k)),
    "ReduceL2": _reduce_op(lambda t, d, k: musa.sqrt(musa.sum(t * t, d, keepdim=k))),
    "ReduceLogSum": _reduce_op(lambda t, d, k: musa.log(musa.sum(t, d, keepdim=k))),
    "ReduceLogSumExp": _reduce_op(lambda t, d, k: musa.logsumexp(t, d, keepdim=k)),
    "ReduceSumSquare": _reduce_op(lambda t, d, k: musa.sum(t * t, d, keepdim=k)),
    "HardSwish": lambda n, x, a: x * musa.clamp(x / 6 + 0.5, 0.0, 1.0),
    "Softsign": lambda n, x, a: x / (1 + musa.abs(x)),
    "Sinh": lambda n, x, a: musa.sinh(x),
    "Cosh": lambda n, x, a: musa.cosh(x),
    "Tan": lambda n, x, a: musa.tan(x),
    "ThresholdedRelu": lambda n, x, a: musa.where(x > n.attrs.get("alpha", 1.0), x,
                                                  musa.zeros_like(x)),
    "Shrink": lambda n, x, a: musa.where(
        x < -n.attrs.get("lambd", 0.5), x + n.attrs.get("bias", 0.0),
        musa.where(x > n.attrs.get("lambd", 0.5), x - n.attrs.get("bias", 0.0),
                   musa.zeros_like(x))),
    "Celu": lambda n, x, a: musa.nn.functional.celu(x, n.attrs.get("alpha", 1.0)),
    "GlobalMaxPool": lambda n, x, a: musa.amax(x, list(range(2, x.dim())), keepdim=True),
    "DepthToSpace": _depth_space,
    "SpaceToDepth": _depth_space,
    "OneHot": _one_hot,
    "CastLike": lambda n, x, a: x.to(a[1].dtype),
    "Hardmax": _hardmax,
    "NegativeLogLikelihoodLoss": _nll,
    "SoftmaxCrossEntropyLoss": _sce,
    "MeanVarianceNormalization": _mvn,
}


def _conv_transpose(n, x, args):
    """ConvTranspose in 1 to 3 dims by ONNX's rules for pads, output_padding,
    output_shape and auto_pad: the full transposed convolution, then its
    begin/end padding cropped off (or zeros added where the output asks
    for more), then the bias."""
    F = musa.nn.functional
    a = n.attrs
    nd = x.dim() - 2
    if nd not in (1, 2, 3):
        raise NotImplementedError(f"[onnx.load] {n.where()}: {nd}-d ConvTranspose")
    w = args[1]
    b = args[2] if len(args) > 2 else None
    k = list(a.get("kernel_shape") or w.shape[2:])
    st = list(a.get("strides") or [1] * nd)
    dl = list(a.get("dilations") or [1] * nd)
    op_ = list(a.get("output_padding") or [0] * nd)
    auto = a.get("auto_pad", "NOTSET")
    natural = [st[i] * (x.shape[2 + i] - 1) + (k[i] - 1) * dl[i] + 1 for i in range(nd)]
    if a.get("output_shape") or auto in ("SAME_UPPER", "SAME_LOWER"):
        shape = list(a.get("output_shape") or [x.shape[2 + i] * st[i] for i in range(nd)])[-nd:]
        begins, ends = [], []
        for i in range(nd):
            total = natural[i] + op_[i] - shape[i]
            half = total // 2
            begins.append(half if auto == "SAME_UPPER" else total - half)
            ends.append(total - begins[-1])
    else:
        pads = list(a.get("pads") or [0] * (2 * nd))
        begins, ends = pads[:nd], pads[nd:]
    conv = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[nd - 1]
    y = conv(x, w, None, stride=st, padding=0, output_padding=0, groups=a.get("group", 1),
             dilation=dl)
    for i in range(nd):
        end = natural[i] + op_[i] - ends[i]  # exclusive, in the full output
        if end > natural[i]:
            pad = [0] * (2 * nd)
            pad[2 * (nd - 1 - i) + 1] = end - natural[i]
            y = F.pad(y, pad)
        y = y.narrow(2 + i, begins[i], end - begins[i])
    return y if b is None else y + b.reshape([1, -1] + [1] * nd)
