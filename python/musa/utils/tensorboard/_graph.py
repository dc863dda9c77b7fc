"""SummaryWriter.add_graph: a model's graph as a TensorBoard GraphDef.

The model runs once under musa.jit's tracer (a _C.Graph capture in trace
mode, under no_grad: nothing is compiled and no backward is recorded).
Forward hooks on every submodule note how many nodes had been recorded
when it was entered and left, so each node lands in the scope of the
innermost module running when it was recorded: `Net/Linear[fc1]/linear_0`,
as PyTorch names its scopes (class[attribute]). Then:

- graph inputs are `input/<name>` nodes and the results `output/output.<k>`
  (op "IO Node", as PyTorch writes them);
- parameters and buffers are nodes named by their place in the model
  (`Net/Linear[fc1]/weight`, op "Parameter" or "Buffer"), other tensors
  the model reads (constants) `Constant_<id>` in the scope of their reader;
- every node carries `_output_shapes` (TensorBoard labels edges with them)
  and, as strings, its output dtypes, its attributes and the user's line.

The model's buffers (BatchNorm's running statistics) are put back as they
were: drawing a graph does not train the model.
"""
from ... import _C
from . import _events as E


def _leaves(x, out):
    if isinstance(x, _C.Tensor):
        out.append(x)
    elif isinstance(x, (list, tuple)):
        for y in x:
            _leaves(y, out)
    elif isinstance(x, dict):
        for y in x.values():
            _leaves(y, out)
    return out


def _scopes(model):
    """{id(module): its scope path} and {id(tensor): (path, kind)} for the
    parameters and buffers."""
    root = type(model).__name__
    paths, tensors = {"": root}, {}
    mods = {}
    for name, m in model.named_modules():
        if name:
            parent = name.rpartition(".")[0]
            paths[name] = f"{paths[parent]}/{type(m).__name__}[{name.rpartition('.')[2]}]"
        mods.setdefault(id(m), paths[name])
    for kind, items in (("Parameter", model.named_parameters()), ("Buffer", model.named_buffers())):
        for name, t in items:
            owner, _, leaf = name.rpartition(".")
            tensors.setdefault(id(t), (f"{paths[owner]}/{leaf}", kind))
    return mods, tensors


def _capture(model, args, mods):
    """The captured _C.Graph and marks: (node count, scope) at every module
    entry and exit; mods: each module's scope path (_scopes)."""
    from ...nn import Module
    from ... import no_grad
    stack, marks = [type(model).__name__], [(0, type(model).__name__)]
    g = _C.Graph()

    def enter(m, _inputs):
        stack.append(mods.get(id(m), stack[-1]))
        marks.append((g.nodes_len, stack[-1]))

    def leave(m, _inputs, _output):
        if len(stack) > 1:
            stack.pop()
        marks.append((g.nodes_len, stack[-1]))

    hooks = []
    for m in model.modules():
        if m is not model and isinstance(m, Module):
            hooks += [m.register_forward_pre_hook(enter), m.register_forward_hook(leave)]
    inputs = _leaves(args, [])
    saved = [(b, b.detach().clone()) for b in model.buffers()]
    g.capture_begin("trace")
    try:
        for i, t in enumerate(inputs):
            g.add_input(t, f"input.{i}")
        with no_grad():
            out = model(*args)
        g.set_outputs(_leaves(out, []))
    except BaseException:
        try:
            g.capture_end()
        except Exception:
            pass  # the model's own error is the one to see
        raise
    else:
        g.capture_end()
    finally:
        for h in hooks:
            h.remove()
        with no_grad():
            for b, copy in saved:
                b.copy_(copy)
    return g, marks


def graph_def(model, input_to_model, verbose):
    from ...nn import Module
    if not isinstance(model, Module):
        raise TypeError(f"[add_graph] model must be a musa.nn.Module, got "
                        f"{type(model).__name__}")
    if input_to_model is None:
        args = ()
    elif isinstance(input_to_model, (list, tuple)):
        args = tuple(input_to_model)
    else:
        args = (input_to_model,)
    args = tuple(a.detach() if isinstance(a, _C.Tensor) else a for a in args)
    mods, tensors = _scopes(model)
    try:
        g, marks = _capture(model, args, mods)
    except (RuntimeError, ValueError, NotImplementedError) as e:
        raise RuntimeError(f"[add_graph] the model could not be traced: {e}") from e
    if verbose:
        print(g.text())

    def scope_of(node):  # the last mark at or before the node
        lo, hi = 0, len(marks) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if marks[mid][0] <= node:
                lo = mid
            else:
                hi = mid - 1
        return marks[lo][1]

    nodes, value_name = [], {}

    def shapes_attrs(vals):
        infos = [g.value_info(v) for v in vals]
        return {"_output_shapes": E.attr_shapes([info.shape for info in infos]),
                "dtype": E.attr_string(", ".join(str(i.dtype).replace("musa.", "")
                                                  for i in infos))}

    for v in g.inputs_list():
        value_name[v] = f"input/{g.value_info(v).name or f'input.{v}'}"
        nodes.append(E.node_def(value_name[v], "IO Node", (), shapes_attrs([v])))

    def source(v, reader_scope):
        """The NodeDef name that gives value v (made on first use for
        parameters and constants)."""
        if v in value_name:
            return value_name[v]
        val = g.value(v)
        path, kind = tensors.get(id(val.tensor), (None, None)) if val.tensor is not None \
            else (None, None)
        if path is None:
            path, kind = f"{reader_scope}/Constant_{v}", "Constant"
        value_name[v] = path
        nodes.append(E.node_def(path, kind, (), shapes_attrs([v])))
        return path

    for i in range(g.nodes_len):
        info = g.node_info(i)
        scope = scope_of(i)
        name = f"{scope}/{info.op}_{i}"
        ins = [source(v, scope) for v in info.inputs]
        attrs = shapes_attrs(info.outputs)
        if info.attrs:
            attrs["attr"] = E.attr_string("{" + ", ".join(
                f"{k}: {str(x).replace('musa.', '')}" for k, x in info.attrs.items()) + "}")
        if info.loc:
            attrs["loc"] = E.attr_string(info.loc)
        nodes.append(E.node_def(name, info.op, ins, attrs))
        for k, v in enumerate(info.outputs):
            value_name[v] = name if k == 0 else f"{name}:{k}"
    for k, v in enumerate(g.outputs):
        src = source(v, type(model).__name__)
        nodes.append(E.node_def(f"output/output.{k}", "IO Node", [src], shapes_attrs([v])))
    return E.graph_def(nodes)
