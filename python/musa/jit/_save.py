"""Saving compiled functions to .musa files and loading them back.

    traced = musa.jit.trace(model, (x,))
    traced.save("model.musa")
    m = musa.jit.load("model.musa")     # no Python code from the model runs
    y = m(x)                            # the same plan as traced: equal bitwise

``save`` captures the function once more, symbolically and under no_grad,
at the signature of its last compiled call (so it computes nothing and the
graph is the inference graph even for a model whose parameters require
grad), probes the declared dynamic dims as a live call does, and writes the
graph through the C library (``musa_model_save``). The loaded model is the C
runtime (``musa_model_load``/``musa_model_run``, as ``musa-run`` uses it)
with the call's structure around it: the arguments are flattened and the
outputs rebuilt as the original function did.

What travels in the file: the graph with its source lines, the parameters'
values, the inputs' dtypes, ranks, fixed dims and dynamic range (checked at
every call, in C), the pass and plan options, and under "python" the call
and result structure and the guards (musa.jit.guard) the capture
registered, with their values: those are fixed at save time, since a
loaded model runs no Python code.
"""
import os

from .. import _C, _capture
from ..autograd import no_grad
from ._args import (CONTAINERS, DICT, LIST, MODULE, TENSOR, TUPLE, VALUE, ArgSpec, CallSpec,
                    flatten_call, leaf_names, new_tuple, unflatten)
from ._dynamic import check_slopes, mark_symbolic, probe
from ._keys import declared_dims
from ._tracing import trace

FORMAT = "musa.jit/1"


def _spec_json(spec, what):
    """An ArgSpec as JSON; raises TypeError for what a file cannot hold."""
    kind, body = spec
    if kind is TENSOR:
        return {"tensor": body}
    if kind in CONTAINERS:
        if kind is DICT:
            return {"dict": [[_key_json(k, what), _spec_json(s, what)] for k, s in body]}
        return {kind.value: [_spec_json(s, what) for s in body]}
    if kind is MODULE:
        raise TypeError(f"[jit.save] {what} holds a Module; a saved model takes tensors")
    if body is None or isinstance(body, (bool, int, str)) or \
            (isinstance(body, float) and body == body and abs(body) != float("inf")):
        return {"value": body}
    raise TypeError(f"[jit.save] {what} holds a {type(body).__name__} ({body!r}), which a "
                    f".musa file cannot hold")


def _key_json(k, what):
    if isinstance(k, (str, int)) and not isinstance(k, bool):
        return k
    raise TypeError(f"[jit.save] {what} has a dict key {k!r}; str and int keys are supported")


def _spec_from(j, path):
    """An ArgSpec from its JSON (checked: a bad file raises ValueError)."""
    if not isinstance(j, dict) or len(j) != 1:
        raise ValueError(f"[jit.load] {path}: bad structure entry {j!r:.80}")
    (kind, body), = j.items()
    if kind == "tensor" and isinstance(body, int) and not isinstance(body, bool):
        return new_tuple(ArgSpec, (TENSOR, body))
    if kind in ("tuple", "list") and isinstance(body, list):
        return new_tuple(ArgSpec, (TUPLE if kind == "tuple" else LIST,
                                   tuple(_spec_from(s, path) for s in body)))
    if kind == "dict" and isinstance(body, list) and \
            all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], (str, int))
                for p in body):
        return new_tuple(ArgSpec, (DICT, tuple((k, _spec_from(s, path)) for k, s in body)))
    if kind == "value" and (body is None or isinstance(body, (bool, int, float, str))):
        return new_tuple(ArgSpec, (VALUE, body))
    raise ValueError(f"[jit.load] {path}: bad structure entry {j!r:.80}")


def save(compiled, path):
    """Save a CompiledFunction's last compiled signature to path (atomic)."""
    call = compiled._saved_call
    if call is None:
        raise RuntimeError(f"[jit.save] {compiled._name} has not been compiled yet; call it "
                           f"once with example inputs first")
    spec, sigs = call
    fn, cfg = compiled._fn, compiled.config
    names = leaf_names(fn, spec)
    leaves = [_C.zeros(list(shape), dtype=dtype) for shape, dtype in sigs]
    shapes = [list(shape) for shape, _ in sigs]
    with no_grad(), _capture.collect() as collected:
        try:
            t = trace(fn, leaves, spec, names, shapes)
        except Exception as e:  # e.g. a host read: meta tensors have no data
            raise RuntimeError(f"[jit.save] {compiled._name} cannot be captured as one graph "
                               f"(a saved model never reads tensor values on the host): "
                               f"{e}") from e
        cap = t.capture
        if cap is None:
            raise RuntimeError(f"[jit.save] {compiled._name} cannot be captured as one graph: "
                               f"{t.reason}")
        if cap.breaks:
            b = cap.breaks[0]
            raise RuntimeError(f"[jit.save] {compiled._name} reads a tensor value on the host "
                               f"at {b.loc}; a saved model is one graph without graph breaks")
        slopes = []
        found = probe(leaves, names, cfg.dynamic) if cfg.dynamic else None
        if found is not None:
            def capture_at(shapes):
                t1 = trace(fn, leaves, spec, names, shapes)
                return (t1.capture.graph if t1.capture else None), t1.reason
            g1, found_slopes, reason = check_slopes(capture_at, cap.graph, found, leaves, names,
                                                    cfg.dynamic)
            if found_slopes is None:
                raise RuntimeError(f"[jit.save] the dynamic dims of {compiled._name} are not "
                                   f"usable: {reason}")
            first = found.dims[0]
            lo, hi = declared_dims(cfg.dynamic, first.leaf, names.get(first.leaf))[first.dim]
            mark_symbolic(cap.graph, g1, found.base, lo, hi)
            slopes = [(s.node, s.field, list(s.values), list(s.slope)) for s in found_slopes]
    extra = compiled._extra_key() if compiled._extra_key else None
    python = {
        "format": FORMAT,
        "function": compiled._name,
        "call": {"args": _spec_json(spec.args, "the call"),
                 "kwargs": _spec_json(spec.kwargs, "the call")},
        "outputs": _spec_json(cap.outputs.spec, "the result"),
        "training": extra if isinstance(extra, bool) else None,
        "guards": [{"what": g.what or f"Python state {k!r}", "value": repr(g.value)}
                   for k, g in collected.guards.items()],
    }
    options = {"fusion_level": cfg.fusion_level, "memory_arena": cfg.memory_arena,
               "num_threads": cfg.num_threads or 0,
               "disabled": cfg.passes_off(),
               "channels_last": cfg.channels_last, "fuse_attention": cfg.fuse_attention,
               "winograd": cfg.winograd}
    import json  # (here, not at import: a compiled step that never saves need not load it)
    _C._model_save(cap.graph, os.fspath(path), options, slopes, json.dumps(python))


class LoadedModel:
    """A model loaded from a .musa file: call it like the saved function."""

    def __init__(self, handle, path):
        self._m = handle
        self._path = str(path)
        header = self.header()
        py = header.get("python")
        graph = header["graph"]
        self.input_names = [i.get("name") or f"input {k}" for k, i in enumerate(graph["inputs"])]
        n_out = len(graph["outputs"])
        self._call = self._out = None
        self.function = None
        self.guards = []
        if isinstance(py, dict) and py.get("format") == FORMAT:
            where = self._path
            call = py.get("call")
            if not isinstance(call, dict):
                raise ValueError(f"[jit.load] {where}: python.call must be an object")
            self._call = new_tuple(CallSpec, (_spec_from(call.get("args"), where),
                                              _spec_from(call.get("kwargs"), where)))
            self._out = _spec_from(py.get("outputs"), where)
            n = _count_leaves(self._out)
            if n != n_out:
                raise ValueError(f"[jit.load] {where}: the result structure has {n} tensors "
                                 f"but the graph has {n_out} outputs")
            self.function = py.get("function")
            self.guards = py.get("guards") or []
            self.training = py.get("training")

    def __call__(self, *args, **kwargs):
        leaves = []
        spec = flatten_call(args, kwargs, leaves)
        if self._call is not None and spec != self._call:
            if kwargs or any(not isinstance(a, _C.Tensor) for a in args):
                raise TypeError(f"[jit.load] {self._path} was saved for a call shaped like "
                                f"{_describe(self._call)}, got {_describe(spec)}")
        outs = _C._model_run(self._m, leaves)
        if self._out is None:
            return outs[0] if len(outs) == 1 else tuple(outs)
        return unflatten(self._out, outs)

    forward = __call__

    def get_graph(self, optimized=False):
        """The loaded graph as text (as saved: before the passes)."""
        return _C._model_graph_text(self._m)

    def header(self):
        """The file's header, parsed."""
        import json
        return json.loads(_C._model_header(self._m))

    def __repr__(self):
        return f"<musa.jit loaded model {self.function or ''} from {self._path}>"


def _count_leaves(spec):
    kind, body = spec
    if kind is TENSOR:
        return 1
    if kind is DICT:
        return sum(_count_leaves(s) for _k, s in body)
    if kind in CONTAINERS:
        return sum(_count_leaves(s) for s in body)
    return 0


def _describe(spec):
    def walk(s):
        kind, body = s
        if kind is TENSOR:
            return "Tensor"
        if kind is TUPLE:
            return "(" + ", ".join(walk(x) for x in body) + ("," if len(body) == 1 else "") + ")"
        if kind is LIST:
            return "[" + ", ".join(walk(x) for x in body) + "]"
        if kind is DICT:
            return "{" + ", ".join(f"{k!r}: {walk(x)}" for k, x in body) + "}"
        return repr(body)
    args = [walk(x) for x in spec.args.body] + [f"{k}={walk(x)}" for k, x in spec.kwargs.body]
    return "(" + ", ".join(args) + ")"


def load(path, *, mmap=False):
    """A callable running the model saved at path (musa_model_load)."""
    return LoadedModel(_C._model_load(os.fspath(path), mmap), path)
