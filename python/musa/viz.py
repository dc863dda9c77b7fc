"""Pictures of graphs, drawn by Graphviz.

    musa.make_dot(loss, params=dict(model.named_parameters())).render("graph", format="png")
    compiled.get_graph().to_dot().render("static", format="svg")

``make_dot`` draws the autograd graph behind a tensor: its backward nodes
(``MulBackward``; with ``show_attrs`` the forward op's attributes), the
leaves they accumulate into (labelled by parameter name and shape), what
each node saved for its backward (``show_saved``), and the outputs.
``GraphText.to_dot`` draws a compiled function's optimised IR, each fusion
group a cluster. Both return a :class:`Digraph`: ``.source`` is the DOT
text, ``.render`` runs Graphviz's ``dot`` (Debian package ``graphviz``).
"""
import os
import shutil
import subprocess

__all__ = ["Digraph", "make_dot", "GraphText"]

_FORMATS = ("pdf", "png", "svg", "dot", "json", "ps")


def _quote(s):
    """A DOT string literal (double-quoted, with \\n for line breaks)."""
    return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _dot_binary(who):
    dot = shutil.which("dot")
    if dot is None:
        raise RuntimeError(f"[{who}] Graphviz's dot is not installed; install the Debian package "
                           f"graphviz (apt-get install graphviz), or use .source")
    return dot


class Digraph:
    """DOT source and the calls that turn it into a picture (the part of
    the graphviz package's Digraph that torchviz users call)."""

    def __init__(self, source):
        self.source = source

    def __str__(self):
        return self.source

    def save(self, filename="graph"):
        """Write the DOT source to filename; returns the path."""
        with open(filename, "w") as f:
            f.write(self.source)
        return str(filename)

    def pipe(self, format="svg"):
        """The picture as bytes."""
        self._check_format(format)
        r = subprocess.run([_dot_binary("Digraph.pipe"), f"-T{format}"], input=self.source.encode(),
                           capture_output=True)
        if r.returncode:
            raise RuntimeError(f"[Digraph.pipe] dot failed: {r.stderr.decode(errors='replace')}")
        return r.stdout

    def render(self, filename="graph", format="pdf", cleanup=False):
        """Write the DOT source to ``filename`` and the picture to
        ``filename.format``; returns the picture's path. cleanup removes the
        source afterwards."""
        self._check_format(format)
        dot = _dot_binary("Digraph.render")
        src = self.save(os.fspath(filename))
        out = f"{src}.{format}"
        r = subprocess.run([dot, f"-T{format}", src, "-o", out], capture_output=True)
        if cleanup:
            os.remove(src)
        if r.returncode:
            raise RuntimeError(f"[Digraph.render] dot failed: {r.stderr.decode(errors='replace')}")
        return out

    def _repr_svg_(self):  # notebooks
        return self.pipe("svg").decode()

    @staticmethod
    def _check_format(format):
        if format not in _FORMATS:
            raise ValueError(f"[Digraph] format must be one of {', '.join(_FORMATS)}, got "
                             f"{format!r}")


_HEAD = ('digraph {\n'
         '  graph [size="12,12" fontname=monospace]\n'
         '  node [style=filled shape=box align=left fontsize=10 height=0.2 fontname=monospace]\n'
         '  edge [fontname=monospace fontsize=9]\n')


def _shape(t):
    return "(" + ", ".join(str(d) for d in t.shape) + ")"


def make_dot(var, params=None, show_attrs=False, show_saved=False, max_attr_chars=50):
    """The autograd graph that produced ``var`` (a tensor, or a sequence or
    dict of tensors) as a Digraph. ``params`` maps names to the leaves
    (``dict(model.named_parameters())``) to label them; ``show_attrs`` adds
    each forward op's attributes (cut to ``max_attr_chars``); ``show_saved``
    draws the tensors each node keeps for its backward."""
    from . import Tensor
    if isinstance(var, Tensor):
        outs = [("", var)]
    elif isinstance(var, dict):
        outs = list(var.items())
    elif isinstance(var, (list, tuple)):
        outs = [("", v) for v in var]
    else:
        raise TypeError(f"[make_dot] expected a Tensor, or a sequence or dict of them, got "
                        f"{type(var).__name__}")
    for name, v in outs:
        if not isinstance(v, Tensor):
            raise TypeError(f"[make_dot] outputs must be Tensors, got {type(v).__name__}")
    if params is not None and not isinstance(params, dict):
        raise TypeError(f"[make_dot] params must be a dict of name -> Tensor (for example "
                        f"dict(model.named_parameters())), got {type(params).__name__}")
    names = {id(t): n for n, t in (params or {}).items()}
    lines, ids, seen = [_HEAD], {}, set()

    def node_id(n):
        if n not in ids:
            ids[n] = f"n{len(ids)}"
        return ids[n]

    def attrs_label(n):
        a = n.attrs() if show_attrs else ""
        if len(a) > max_attr_chars:
            a = a[:max(max_attr_chars - 3, 0)] + "..."
        return n.name() + ("\n" + a if a else "")

    stack = []
    for k, (name, v) in enumerate(outs):
        oid = f"out{k}"
        label = (f"{name}\n" if name else "") + _shape(v)
        lines.append(f"  {oid} [label={_quote(label)} fillcolor=darkolivegreen1]\n")
        if v.grad_fn is not None:
            lines.append(f"  {node_id(v.grad_fn)} -> {oid}\n")
            stack.append(v.grad_fn)
        elif v.requires_grad:  # a leaf drawn as itself
            lines[-1] = (f"  {oid} [label={_quote((names.get(id(v), name) or '') + chr(10) + _shape(v))}"
                         f" fillcolor=lightblue]\n")
    saved_k = 0
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        nid = node_id(n)
        if n.name() == "AccumulateGrad":
            leaf = n.variable
            lines.append(f"  {nid} [label={_quote(names.get(id(leaf), '') + chr(10) + _shape(leaf))}"
                         f" fillcolor=lightblue]\n")
        else:
            lines.append(f"  {nid} [label={_quote(attrs_label(n))} fillcolor=lightgray]\n")
        if show_saved:
            for side, i, t in n.saved_tensors:
                sid = f"s{saved_k}"
                saved_k += 1
                lines.append(f"  {sid} [label={_quote(f'{side} {i}' + chr(10) + _shape(t))} "
                             f"fillcolor=orange]\n  {sid} -> {nid} [style=dashed arrowhead=none]\n")
        for nxt, _ in n.next_functions:
            if nxt is None:
                continue
            lines.append(f"  {node_id(nxt)} -> {nid}\n")
            stack.append(nxt)
    lines.append("}\n")
    return Digraph("".join(lines))


class GraphText(str):
    """What get_graph() returns: the IR as text (print it), and the graphs
    behind it for ``to_dot()`` and ``to_json()``."""

    def __new__(cls, text, graphs=()):
        self = super().__new__(cls, text)
        self._graphs = list(graphs)  # [(title, musa._C graph)]
        return self

    def _need_graphs(self, who):
        if not self._graphs:
            raise RuntimeError(f"[{who}] only the optimised IR (get_graph(optimized=True)) "
                               f"carries its graphs")
        return self._graphs

    def to_json(self):
        """The JSON form of each graph: a dict (one graph) or a list of
        {"title", "graph"} (forward and backward, or segments)."""
        import json
        graphs = self._need_graphs("GraphText.to_json")
        forms = [(t, json.loads(g.json())) for t, g in graphs]
        return forms[0][1] if len(forms) == 1 else [{"title": t, "graph": j} for t, j in forms]

    def to_dot(self):
        """A Digraph of the graphs: values as edges between their producer
        and consumers, inputs and parameters as ellipses, each fusion group
        a cluster; forward and backward (or segments) side by side."""
        graphs = self._need_graphs("GraphText.to_dot")
        lines = [_HEAD]
        for gi, (title, g) in enumerate(graphs):
            lines.append(f"  subgraph cluster_g{gi} {{\n    label={_quote(title or 'graph')}\n"
                         f"    style=dashed\n")
            _ir_dot(g, f"g{gi}_", lines)
            lines.append("  }\n")
        lines.append("}\n")
        return Digraph("".join(lines))


def _ir_dot(g, p, lines):
    def vtype(info):
        return f"{info.dtype}[{', '.join(str(d) for d in info.shape)}]".replace("musa.", "")

    groups, producers = {}, {}
    live = [(i, g.node_info(i)) for i in range(g.nodes_len)]
    used = {k for _, info in live if info is not None for k in info.inputs} | set(g.outputs)
    for v in range(g.num_values):
        gv = g.value(v)
        if gv is None or gv.kind == "node" or (gv.kind != "input" and v not in used):
            continue  # (unused constants and parameters are not drawn)
        info = g.value_info(v)
        label = (f"%{v}" + (f' "{info.name}"' if info.name else "") + f"\n{gv.kind} {vtype(info)}")
        color = "lightblue" if gv.kind == "param" else "white" if gv.kind == "const" else "khaki"
        lines.append(f"    {p}v{v} [label={_quote(label)} shape=ellipse fillcolor={color}]\n")
        producers[v] = f"{p}v{v}"
    nodes = []
    for i, info in live:
        if info is None:
            continue
        nodes.append((i, info))
        for o in info.outputs:
            producers[o] = f"{p}n{i}"
    for i, info in nodes:
        outs = ", ".join(f"%{o} {vtype(g.value_info(o))}" for o in info.outputs)
        attrs = ", ".join(f"{k}={v}" for k, v in info.attrs.items())
        label = info.op + (f"({attrs})" if attrs else "") + "\n" + outs
        stmt = f"{p}n{i} [label={_quote(label)} fillcolor=lightgray]\n"
        if info.group >= 0:
            groups.setdefault(info.group, []).append(stmt)
        else:
            lines.append("    " + stmt)
    for grp, stmts in sorted(groups.items()):
        lines.append(f"    subgraph cluster_{p}fused{grp} {{\n      label={_quote(f'fused {grp}')}\n"
                     f"      style=filled fillcolor=lightyellow\n")
        lines.extend("      " + s for s in stmts)
        lines.append("    }\n")
    for i, info in nodes:
        for k in info.inputs:
            if k in producers:
                lines.append(f"    {producers[k]} -> {p}n{i}\n")
    for k, o in enumerate(g.outputs):
        lines.append(f"    {p}out{k} [label={_quote(f'output {k}')} shape=ellipse "
                     f"fillcolor=darkolivegreen1]\n")
        if o in producers:
            lines.append(f"    {producers[o]} -> {p}out{k}\n")
