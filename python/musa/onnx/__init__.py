"""musa.onnx: export musa functions and modules to ONNX, and run ONNX models.

    musa.onnx.export(model, (x,), "model.onnx", input_names=["x"],
                     output_names=["y"], dynamic_axes={"x": {0: "batch"}})
    m = musa.onnx.load("model.onnx")     # a compiled callable
    y = m(x)

Export captures the call once into musa's IR (see _export.py) and writes
opset 17; every exported model passes onnx.checker (full_check) and ONNX
shape inference; it needs the `onnx` package (Debian: python3-onnx). Import
is musa's C importer (src/io/onnx.c, the one musa-run uses): load needs no
Python package. See docs/onnx.md for the ops each direction covers.
"""
import os

from .. import _C

__all__ = ["export", "load", "load_model", "OnnxModule"]


def _onnx(who):
    try:
        import onnx
        return onnx
    except ImportError:
        raise ImportError(f"[{who}] needs the onnx package (Debian: apt-get install "
                          f"python3-onnx)") from None


def _flatten(out, who):
    if isinstance(out, _C.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        res = []
        for o in out:
            res += _flatten(o, who)
        return res
    raise TypeError(f"[{who}] outputs must be tensors or (nested) tuples of tensors, not "
                    f"{type(out).__name__}")


def export(model, args, f, input_names=None, output_names=None, dynamic_axes=None,
           opset_version=17, export_params=True, do_constant_folding=True, verbose=False,
           training=None, doc_string=""):
    """Export model(*args) to ONNX at path f (or a writable binary file),
    following torch.onnx.export's conventions: args is a tensor or a tuple
    of tensors; inputs and outputs are named input_names/output_names
    (default input_0..., output_0...); dynamic_axes maps an input or output
    name to {dim: name} (or a list of dims), declared as dim_params. Modules
    are exported in eval mode (their mode is restored after). Raises
    NotImplementedError naming the first op with no ONNX form."""
    onnx = _onnx("onnx.export")
    from onnx import checker, helper, numpy_helper, shape_inference
    from .. import jit  # noqa: F401  (its import names recorded nodes' source lines)
    from ..autograd import no_grad
    from ..nn import Module
    from . import _export as E
    if opset_version != 17:
        raise ValueError(f"[onnx.export] musa writes opset 17, not {opset_version}")
    if not export_params:
        raise ValueError("[onnx.export] export_params=False is not supported")
    args = (args,) if isinstance(args, _C.Tensor) else tuple(args)
    for i, t in enumerate(args):
        if not isinstance(t, _C.Tensor):
            raise TypeError(f"[onnx.export] args[{i}] must be a Tensor, not {type(t).__name__}")
    names = list(input_names or [f"input_{i}" for i in range(len(args))])
    if len(names) != len(args):
        raise ValueError(f"[onnx.export] {len(names)} input_names for {len(args)} inputs")
    module = model if isinstance(model, Module) else None
    was_training = module.training if module is not None else False
    pnames = {}
    if module is not None:
        module.eval()
        for n, p in module.named_parameters():
            pnames.setdefault(id(p), n)
        for n, b in module.named_buffers():
            pnames.setdefault(id(b), n)
    ins = [t.detach().clone().contiguous() for t in args]
    g = _C.Graph()
    try:
        g.capture_begin("trace")
        try:
            for t, n in zip(ins, names):
                g.add_input(t, n)
            with no_grad():
                outs = _flatten(model(*ins), "onnx.export")
            g.set_outputs(outs)
        finally:
            g.capture_end()
    finally:
        if module is not None and was_training:
            module.train()
    for p in ("simplify", "cse", "fold", "dce"):
        g.run_pass(p)
    onames = list(output_names or [f"output_{i}" for i in range(len(outs))])
    if len(onames) != len(outs):
        raise ValueError(f"[onnx.export] {len(onames)} output_names for {len(outs)} outputs")
    if g.num_mutations:
        raise NotImplementedError("[onnx.export] the function writes into its inputs or "
                                  "parameters in place, which ONNX cannot express")
    breaks = g.breaks()
    if breaks:  # a value read on the host would bake one branch into the file
        raise NotImplementedError(f"[onnx.export] the function reads a tensor's value on the "
                                  f"host at {breaks[0].loc or 'a line'} ({breaks[0].kind}()), so "
                                  f"its graph depends on the data; ONNX export needs one graph")

    b = E._Builder(helper, numpy_helper)
    value_names = {}
    for v in range(g.num_values):
        info = g.value_info(v)
        if info.kind == "input":
            value_names[v] = info.name
    inits = {}

    def name_of(v):
        if v in value_names:
            return value_names[v]
        vv = g.value(v)
        if vv.kind in ("param", "const"):
            base = pnames.get(id(vv.tensor)) if vv.kind == "param" else None
            name = base or f"{vv.kind}_{v}"
            value_names[v] = name
            inits[name] = numpy_helper.from_array(E.to_numpy(vv.tensor), name)
            return name
        value_names[v] = f"v{v}"
        return value_names[v]

    out_ids = list(g.outputs)
    for i in range(g.nodes_len):
        info = g.node_info(i)
        if info is None:
            continue
        E.convert(b, info, name_of, g.value_info)
    # outputs: their own names (an Identity where a value is an input, a
    # parameter or a second output of the same value)
    graph_outputs, used = [], set()
    for v, oname in zip(out_ids, onames):
        src = name_of(v)
        if src in used or g.value(v).kind != "node" or src != f"v{v}":
            b.node("Identity", [src], [oname])
        else:
            _rename(b.nodes, src, oname)
            value_names[v] = oname
        used.add(oname)
        graph_outputs.append((oname, g.value_info(v)))
    dyn = _dynamic(dynamic_axes, names, onames)

    def vi(name, info):
        shape = [dyn.get(name, {}).get(d, s) for d, s in enumerate(info.shape)]
        return helper.make_tensor_value_info(name, E.onnx_dtype(info.dtype), shape)

    inputs = [vi(names[i], g.value_info(v)) for i, v in
              enumerate(v for v in range(g.num_values) if g.value_info(v).kind == "input")]
    graph = helper.make_graph(b.nodes, "musa", inputs, [vi(n, info) for n, info in graph_outputs],
                              initializer=list(inits.values()) + b.inits)
    graph.doc_string = doc_string
    m = helper.make_model(graph, producer_name="musa", opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    checker.check_model(m, full_check=True)
    m = shape_inference.infer_shapes(m, check_type=True, strict_mode=True)
    if hasattr(f, "write"):
        f.write(m.SerializeToString())
    else:
        onnx.save(m, os.fspath(f))
    if verbose:
        print(helper.printable_graph(m.graph))
    return m


def _rename(nodes, old, new):
    for n in nodes:
        for k, o in enumerate(n.output):
            if o == old:
                n.output[k] = new
        for k, i in enumerate(n.input):
            if i == old:
                n.input[k] = new


def _dynamic(dynamic_axes, in_names, out_names):
    dyn = {}
    for name, axes in (dynamic_axes or {}).items():
        if name not in in_names and name not in out_names:
            raise ValueError(f"[onnx.export] dynamic_axes names {name!r}, which is neither an "
                             f"input nor an output")
        if isinstance(axes, dict):
            dyn[name] = {int(d): str(s) for d, s in axes.items()}
        else:
            dyn[name] = {int(d): f"{name}_dynamic_axes_{k + 1}" for k, d in enumerate(axes)}
    return dyn


class OnnxModule:
    """A loaded ONNX model: call it with tensors (one per graph input, in
    order, or by name) for its outputs (a tensor, or a tuple of several).

    It runs on musa's C importer (the same code as musa_model_load and
    musa-run in C): each new set of input shapes captures the graph into
    musa's IR, folding what is computable from constants and shapes, and
    runs it as an optimised plan; later calls of those shapes reuse the
    plan."""

    def __init__(self, handle, where):
        self._m = handle
        self._where = where
        self._called = False
        self.input_names = _C._model_input_names(handle)

    def __call__(self, *args, **kwargs):
        if kwargs:
            args = args + tuple(kwargs.pop(n) for n in self.input_names[len(args):] if n in kwargs)
            if kwargs:
                raise TypeError(f"[onnx] unknown inputs {sorted(kwargs)}")
        if len(args) != len(self.input_names):
            raise TypeError(f"[onnx] the model takes {len(self.input_names)} inputs "
                            f"{self.input_names}, got {len(args)}")
        for name, t in zip(self.input_names, args):
            if not isinstance(t, _C.Tensor):
                raise TypeError(f"[onnx] input {name!r} must be a Tensor, not {type(t).__name__}")
        outs = _C._model_run(self._m, list(args))
        self._called = True
        return outs[0] if len(outs) == 1 else tuple(outs)

    def get_graph(self):
        """The musa IR captured for the last new input signature (before the
        passes), as text."""
        if not self._called:
            raise RuntimeError("[onnx] call the model once before get_graph()")
        return _C._model_graph_text(self._m)

    def save(self, path):
        """Write the model, as captured for the last new input signature, as
        a .musa file (musa.jit.load, musa_model_load and musa-run read it)."""
        _C._model_save_graph(self._m, path)

    def __repr__(self):
        return f"<musa.onnx model from {self._where}, inputs {self.input_names}>"


def load_model(model):
    """An OnnxModule from an onnx.ModelProto (or its serialized bytes)."""
    data = model if isinstance(model, (bytes, bytearray, memoryview)) else \
        model.SerializeToString()
    return OnnxModule(_C._model_load_bytes(data), "<ModelProto>")


def load(path):
    """Load an ONNX file into a callable (OnnxModule). The C importer checks
    the whole file before anything is allocated (docs/onnx.md); external
    data is read only from files inside the model's folder."""
    p = os.fspath(path)
    if not str(p).lower().endswith(".onnx"):
        with open(p, "rb") as f:
            return OnnxModule(_C._model_load_bytes(f.read()), p)
    return OnnxModule(_C._model_load(p), p)
