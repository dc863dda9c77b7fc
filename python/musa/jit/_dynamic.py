"""Dynamic dims: one capture serves every size of the dims declared dynamic
(``Config.dynamic``), re-specialised and planned once per size.

After the first capture, a second, symbolic one at every dynamic dim one
larger (or smaller) shows which integer attributes follow the size
(``view(x.shape[0], -1)``); they are taken as affine in it (AttrSlope). A
new size copies the captured graph with those attributes moved, re-infers
every node, and plans the copy for exactly that size.

Invariants:
* Every dynamic dim of a variant has the same size at each call; a call
  where they differ runs eagerly.
* Only int attributes may move with the size. If anything else differs
  between the two captures (structure, float or bool attributes, such as
  arange's end), the dims are not usable and the caller compiles per size.
* The captured graph records the symbol (``s0``) on each dim that follows
  it; the specialised graphs have concrete shapes.
"""
import math
from typing import NamedTuple

from ._keys import declared_dims
from ._segments import whole


class DynDim(NamedTuple):
    """A dim declared dynamic, within its range at the capture."""
    leaf: int  # the tensor leaf
    dim: int


class Probe(NamedTuple):
    """Where the symbolic capture looks: every dynamic dim moved one step."""
    dims: list    # DynDims, in leaf order
    shapes: list  # the leaves' shapes with those dims moved (lists of ints)
    base: int     # the dims' size at the capture


class AttrSlope(NamedTuple):
    """An int attribute that follows the dynamic size."""
    node: int
    field: str
    values: list  # its values at the traced size
    slope: list   # their change per unit of the size


def probe(leaves, names, dynamic):
    """The Probe for these leaves, or None when the declared dims cannot be
    dynamic here: a dim outside its range, none within the leaves' ranks, or
    dims that would not all move by the same step."""
    shapes0 = [list(t.shape) for t in leaves]
    shapes1 = [list(s) for s in shapes0]
    dims = []
    for i in range(len(leaves)):
        declared = declared_dims(dynamic, i, names.get(i))
        for d, (lo, hi) in (declared or {}).items():
            if d < len(shapes0[i]):
                s = shapes0[i][d]
                if not lo <= s <= hi:  # this variant is outside the range: static
                    return None
                shapes1[i][d] = s + 1 if s + 1 <= hi else s - 1
                dims.append(DynDim(i, d))
    if not dims or any(shapes1[i][d] < 0 for i, d in dims):
        return None
    if len({shapes1[i][d] - shapes0[i][d] for i, d in dims}) != 1:
        return None
    first = dims[0]
    return Probe(dims, shapes1, shapes0[first.leaf][first.dim])


def attr_slopes(g0, g1):
    """[AttrSlope] for int attributes that differ between two captures at
    sizes one apart, or None if the graphs differ otherwise. Attributes of
    other types (floats included) must not move."""
    n0 = [(i, g0.node_info(i)) for i in range(g0.nodes_len)]
    n0 = [(i, a) for i, a in n0 if a is not None]  # None: removed by a pass
    n1 = [b for b in map(g1.node_info, range(g1.nodes_len)) if b is not None]
    if len(n0) != len(n1) or not same_constants(g0, g1):
        return None
    slopes = []
    for (idx, a), b in zip(n0, n1):
        if a.op != b.op or a.inputs != b.inputs or a.outputs != b.outputs:
            return None
        for f, v0 in a.attrs.items():
            v1 = b.attrs.get(f)
            if v0 == v1 or (v0 != v0 and v1 != v1):  # NaN: the same float attribute
                continue
            if isinstance(v0, bool) or isinstance(v1, bool):
                return None
            if isinstance(v0, int) and isinstance(v1, int):
                slopes.append(AttrSlope(idx, f, [v0], [v1 - v0]))
            elif isinstance(v0, list) and isinstance(v1, list) and len(v0) == len(v1) and \
                    all(isinstance(x, int) for x in v0 + v1):
                slopes.append(AttrSlope(idx, f, v0, [y - x for x, y in zip(v0, v1)]))
            else:
                return None
    return slopes


def far_probe(found, leaves, names, dynamic):
    """(shapes, size): the leaves' shapes with every dynamic dim at a size
    well away from the traced one (up to twice it and 7 more, or down to
    its half, within every dim's range), or None when no size two or more
    away is in them all."""
    lo, hi = 0, 1 << 62
    for i, d in found.dims:
        a, b = declared_dims(dynamic, i, names.get(i))[d]
        lo, hi = max(lo, a), min(hi, b)
    base = found.base
    size = min(hi, 2 * base + 7)
    if size - base < 2:
        size = max(lo, base // 2 - 3)
    if abs(size - base) < 2:
        return None
    shapes = [list(t.shape) for t in leaves]
    for i, d in found.dims:
        shapes[i][d] = size
    return shapes, size


def follows_linearly(g0, g1, g2, s0, s1, s2):
    """Whether the capture at size s2 is what the captures at s0 and s1
    predict: the same nodes and constants, and every int attribute and
    every dim a linear function of the size. A dim such as ceil(n / 2) (a
    strided slice of the dynamic dim) can be equal at two sizes one apart
    and then fails here, as does the mean over it, whose divisor follows."""
    if attr_slopes(g0, g2) is None:
        return False

    def fits(a, b, c):
        return (c - a) * (s1 - s0) == (b - a) * (s2 - s0)
    for i in range(g0.nodes_len):
        a, b, c = g0.node_info(i), g1.node_info(i), g2.node_info(i)
        if a is None:
            continue
        for f, x in a.attrs.items():
            y, z = b.attrs.get(f), c.attrs.get(f)
            if isinstance(x, int) and not isinstance(x, bool) and not fits(x, y, z):
                return False
            if isinstance(x, list) and all(isinstance(e, int) for e in x) and \
                    not all(fits(*t) for t in zip(x, y, z)):
                return False
    for v in range(g0.num_values):
        a, b, c = (g.value_info(v).shape for g in (g0, g1, g2))
        if not len(a) == len(b) == len(c) or not all(fits(*t) for t in zip(a, b, c)):
            return False
    return True


def check_slopes(capture_at, g0, found, leaves, names, dynamic):
    """Capture again at found.shapes (one apart) and at a size far off:
    (g1, slopes, reason), slopes None (and why) unless every int attribute
    and dim follows the size linearly. capture_at(shapes) returns (graph or
    None, reason); what it raises (the function cannot run at that size)
    makes the dims unusable. A live call and jit.save decide alike."""
    def at(shapes):
        try:
            return capture_at(shapes)
        except Exception as e:  # noqa: BLE001  (any failure at another size: not dynamic)
            return None, str(e)
    g1, reason = at(found.shapes)
    slopes = attr_slopes(g0, g1) if g1 is not None else None
    far = far_probe(found, leaves, names, dynamic) if slopes is not None else None
    if far is not None:
        g2, reason = at(far[0])
        s1 = found.shapes[found.dims[0].leaf][found.dims[0].dim]
        if g2 is None or not follows_linearly(g0, g1, g2, found.base, s1, far[1]):
            slopes, reason = None, reason or "a size or constant follows the size unevenly"
    return g1, slopes, reason or "the graph changes with the size"


def same_constants(g0, g1):
    """Whether the two captures' constants hold the same values. A constant
    that follows the size (a mean over the dynamic dim divides by it) would
    keep the first capture's value in every size's plan."""
    if g0.num_values != g1.num_values:
        return False
    for v in range(g0.num_values):
        a, b = g0.value(v), g1.value(v)
        if a.kind != b.kind:
            return False
        if a.kind == "const" and not same_bits(a.tensor, b.tensor):
            return False
    return True


def same_bits(a, b):
    """Equal dtypes, shapes and values (NaN equal to NaN, -0 not to +0)."""
    if a.dtype != b.dtype or tuple(a.shape) != tuple(b.shape):
        return False
    xs, ys = a.reshape(-1).tolist(), b.reshape(-1).tolist()
    return all(x == y and math.copysign(1, x) == math.copysign(1, y) or x != x and y != y
               for x, y in zip(xs, ys))


def mark_symbolic(g0, g1, base, lo, hi):
    """Record in g0's IR which dims follow the dynamic size (they differ
    between the captures at base and base +- 1)."""
    sym = g0.add_symbol("s0", lo, hi, base)
    for v in range(min(g0.num_values, g1.num_values)):
        a, b = g0.value_info(v).shape, g1.value_info(v).shape
        if len(a) != len(b):
            continue
        for d, (x, y) in enumerate(zip(a, b)):
            if x != y:
                g0.set_symbolic(v, d, sym)


class DynamicVariant:
    """A capture that serves every size of its dynamic dims, with a plan
    (a Segment) per size seen."""
    __slots__ = ("capture", "dims", "base", "slopes", "plans", "range", "shapes")

    def __init__(self, capture, symbolic, found, slopes, dynamic, names):
        """capture: the Capture at the call's sizes; symbolic: the graph
        captured at found.shapes; slopes: attr_slopes of the two."""
        self.capture, self.dims, self.base, self.slopes = capture, found.dims, found.base, slopes
        self.plans = {}  # the inputs' shapes (tuple of tuples) -> Segment
        first = found.dims[0]
        lo, hi = declared_dims(dynamic, first.leaf, names.get(first.leaf))[first.dim]
        self.range = (lo, hi)
        g = capture.graph
        self.shapes = [tuple(g.value_info(v).shape) for v in g.inputs_list()]  # as captured
        mark_symbolic(capture.graph, symbolic, found.base, lo, hi)

    def size(self, shapes):
        """The dynamic size of a call with these input shapes, or None when
        its dynamic dims differ in size."""
        first = self.dims[0]
        size = shapes[first.leaf][first.dim]
        if any(shapes[i][d] != size for i, d in self.dims):
            return None
        return size

    def shapes_at(self, size):
        """The inputs' shapes (a tuple of tuples) with every dynamic dim at size."""
        dims = set(self.dims)
        return tuple(tuple(size if (i, d) in dims else s for d, s in enumerate(sh))
                     for i, sh in enumerate(self.shapes))

    def respecialize(self, shapes, size):
        """The captured graph copied for these shapes, its size-following
        attributes moved. Raises ValueError, TypeError or RuntimeError when
        the graph does not hold at that size."""
        delta = size - self.base
        overrides = [(s.node, s.field, [v0 + k * delta for v0, k in zip(s.values, s.slope)])
                     for s in self.slopes]
        return self.capture.graph.respecialize([list(s) for s in shapes], overrides)

    def add_plan(self, shapes, graph, cfg):
        """Optimise and plan a respecialised graph; it serves these shapes."""
        seg = whole(graph, cfg, self.capture.outputs)
        self.plans[shapes] = seg
        return seg


class _SizedCapture:
    """A capture's graph re-specialised to one size, with the capture's
    outputs (what TrainingNode reads of a Capture)."""
    __slots__ = ("graph", "out_ids", "out_leaves", "outputs")

    def __init__(self, graph, cap):
        self.graph, self.out_ids = graph, graph.outputs
        self.out_leaves, self.outputs = cap.out_leaves, cap.outputs


class DynamicTraining:
    """Compiled training over dynamic dims: one capture (a DynamicVariant
    without plans), and per size seen a TrainingNode (forward and backward
    plans) built from the graph re-specialised to that size."""
    __slots__ = ("variant", "cfg", "name", "nodes")

    def __init__(self, variant, leaves, cfg, name):
        self.variant, self.cfg, self.name = variant, cfg, name
        self.nodes = {}  # the inputs' shapes -> TrainingNode

    def node_for(self, leaves, shapes):
        """The TrainingNode for these input shapes (built on first use), or
        None when the call's dynamic dims differ in size."""
        node = self.nodes.get(shapes)
        if node is None:
            from ._training import TrainingNode
            size = self.variant.size(shapes)
            if size is None:
                return None
            g = self.variant.respecialize(shapes, size)
            node = TrainingNode(_SizedCapture(g, self.variant.capture), leaves, self.cfg,
                                self.name)
            self.nodes[shapes] = node
        return node
