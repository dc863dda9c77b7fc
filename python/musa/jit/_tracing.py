"""One capture of a function: run it once with the dispatcher recording into
a graph, and say what the graph's outputs mean.

Invariants:
* In trace mode the function computes eagerly, so the caller gets the eager
  result of the call that captured; in symbolic mode it runs on meta tensors
  of the given shapes and computes nothing.
* Graph inputs are the call's tensor leaves, contiguous, in leaf order;
  writes into a non-contiguous argument's copy are copied back.
* ``Capture.outputs`` says how the last segment's plan outputs map back to
  the user's result: the first ``n_user`` rebuild it, and a whole training
  step has further outputs, the new gradients of the parameters and of the
  arguments that require grad (GradSlot).
"""
from typing import Any, NamedTuple, Optional

from .. import _C
from ._args import ArgSpec, contiguous, copy_back, flatten, unflatten

TRACE, SYMBOLIC = "trace", "symbolic"  # capture modes of _C.Graph.capture_begin


class Unsupported(Exception):
    """The capture cannot be compiled; the function runs eagerly."""


class GradSlot(NamedTuple):
    """A parameter, or an argument, whose .grad a whole training step sets
    after each run."""
    param: Any             # the parameter tensor (None for an argument)
    index: Optional[int]   # the plan output holding its new .grad, or None: .grad = None
    arg: Optional[int] = None  # the argument: its index among the call's tensor leaves


class Outputs(NamedTuple):
    """What a last segment's plan outputs mean."""
    spec: ArgSpec   # the structure of the user's result
    n_user: int     # the first n_user outputs rebuild it
    grads: tuple    # GradSlots: .grad of parameters, as the traced call left them


class Capture:
    """One trace of the function: the graph, its breaks and its outputs.

    breaks are the graph's host reads (_C.GraphBreak), in order; bounds cut
    the nodes into segments: segment i is nodes [bounds[i], bounds[i + 1]),
    ending in break i, and the last one ends in the outputs."""

    def __init__(self, graph, out_spec, out_leaves):
        self.graph = graph
        # arguments that require grad whose .grad the call changed: (leaf
        # index, the .grad it left or None); read once, by needs_tape_node
        self.arg_grads = ()
        self.adds_to_arg_grad = False   # the call read an argument's earlier .grad
        self.writes_args = False        # the call wrote into an argument
        self.out_leaves = out_leaves    # the result's tensors, as traced
        self.out_ids = graph.outputs    # their value ids (more for a whole step)
        self.outputs = Outputs(out_spec, len(self.out_ids), ())
        self.breaks = graph.breaks()
        self.bounds = [0] + [b.at_node for b in self.breaks] + [graph.nodes_len]

    def segment_of(self, v):
        """The segment whose nodes compute value v, or -1 (an input, a
        parameter or a constant)."""
        p = self.graph.value(v).producer
        if p < 0:
            return -1
        for i in range(len(self.bounds) - 1):
            if self.bounds[i] <= p < self.bounds[i + 1]:
                return i
        return -1


class Trace(NamedTuple):
    """The result of tracing one call."""
    capture: Optional[Capture]  # None when the capture failed
    out: Any                    # the function's result
    reason: Optional[str]       # why the capture failed, or None


def trace(fn, leaves, spec, names, symbolic_shapes=None):
    """Capture fn called with spec's structure and these tensor leaves (named
    by `names`, {leaf index: name}). With symbolic_shapes the capture is
    symbolic, on meta tensors of those shapes. Returns a Trace; an exception
    the function raises propagates, with the capture ended. A symbolic
    capture that fails (or raises) gives every leaf back the .grad it had,
    so the function can run again as if it never had."""
    mode = TRACE if symbolic_shapes is None else SYMBOLIC
    if mode == TRACE:
        inputs = contiguous(leaves)
    else:
        inputs = [_C._empty_meta(t.dtype, s).requires_grad_(t.requires_grad)
                  for t, s in zip(leaves, symbolic_shapes)]
        for x, t in zip(inputs, leaves):  # a stand-in for an argument's .grad
            if t.requires_grad and t.grad is not None:
                x.grad = _C._empty_meta(t.grad.dtype, tuple(x.shape))
    had = [t.grad if t.requires_grad else None for t in inputs]
    args = unflatten(spec.args, inputs)
    kwargs = unflatten(spec.kwargs, inputs)
    g = _C.Graph()
    g.capture_begin(mode)
    out = None
    try:
        for i, t in enumerate(inputs):
            g.add_input(t, names.get(i))
        out = fn(*args, **kwargs)
        out_leaves = []
        out_spec = flatten(out, out_leaves)
        g.set_outputs(out_leaves)
    except BaseException:
        try:
            g.capture_end()
        except Exception:
            pass
        if mode == SYMBOLIC:
            g.restore_grads()
        raise
    try:
        g.capture_end()
    except (NotImplementedError, RuntimeError, ValueError) as e:
        if mode == TRACE:
            copy_back(leaves, inputs)
        else:
            g.restore_grads()
        return Trace(None, out, str(e))
    if mode == TRACE:
        copy_back(leaves, inputs)
    elif _reads_argument_directly(g, leaves):
        g.restore_grads()
        return Trace(None, out, "an argument is also read without going through the arguments "
                                "(a parameter or closure tensor that shares its memory)")
    cap = Capture(g, out_spec, out_leaves)
    cap.arg_grads = [(i, t.grad) for i, t in enumerate(inputs)
                     if t.requires_grad and t.grad is not had[i]]
    cap.adds_to_arg_grad = any(old is not None and g.value_of(old) >= 0 for old in had)
    cap.writes_args = g.writes_inputs
    return Trace(cap, out, None)


def _reads_argument_directly(g, leaves):
    """Whether a symbolic capture read a tensor that shares memory with an
    argument other than through the argument's stand-in (a module's weight
    also passed in): the graph then holds two values for one memory, and
    writes through one (an optimizer step) would not reach the other. A
    traced capture sees the same tensor both ways and records one value."""
    for _, t in g.params():
        for leaf in leaves:
            if t is leaf or t._shares_storage(leaf):
                return True
    return False


# Names whose use in a function's own code means it reads tensor values on
# the host, so a symbolic capture would fail at that read (Config.capture).
_HOST_READS = frozenset({"item", "tolist", "numpy", "print", "float", "int", "bool", "len",
                         "__bool__", "__float__", "__int__", "__index__", "all", "any",
                         "allclose", "equal", "isnan", "breakpoint"})


def reads_host(fn):
    """Whether fn's own bytecode (nested functions included, callees not)
    names something that reads tensor values on the host. A cheap guess:
    a symbolic capture that still meets a read falls back to tracing."""
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if code is None:  # a builtin or a callable object: no bytecode to read
        fwd = getattr(fn, "forward", None) or getattr(type(fn), "__call__", None)
        code = getattr(getattr(fwd, "__func__", fwd), "__code__", None)
        if code is None:
            return True
    todo = [code]
    while todo:
        c = todo.pop()
        if _HOST_READS.intersection(c.co_names):
            return True
        todo.extend(k for k in c.co_consts if hasattr(k, "co_names"))
    return False


def needs_tape_node(cap):
    """Whether the capture compiles as a forward and a backward joined to the
    eager tape as one node (its outputs need autograd: _training).

    False for inference, and for a whole training step (its backward and
    optimizer update ran inside): the step's new gradients then become extra
    outputs, and cap.outputs says which parameter's .grad each one sets.
    Raises Unsupported for outputs that need autograd in a capture with
    graph breaks."""
    g = cap.graph
    args, cap.arg_grads = cap.arg_grads, ()  # (the capture keeps no gradient of a call)
    if cap.adds_to_arg_grad:
        # (a symbolic capture's stand-in for it: never bound into a plan)
        raise Unsupported("it adds to an argument's existing .grad")
    if not g.requires_grad:
        return False

    def made_here(t):  # a tensor the graph computed (not one bound by reference)
        v = g.value_of(t) if t is not None else -1
        return v >= 0 and g.value(v).kind == "node"

    params = [(v, t) for v, t in g.params() if t.requires_grad]
    grads = [(t, t.grad) for _v, t in params]
    # args: the arguments whose .grad the call set (new gradients, or None),
    # each run setting the call's own tensors'; the key says whether they had one
    backward_ran = any(made_here(gr) for _t, gr in grads) or any(made_here(gr) for _i, gr in args)
    updated = any(g.value_of(t) != v for v, t in params)  # renamed: written in place
    if backward_ran or updated:
        # A whole step: each run leaves .grad as the traced call did
        # (None, the pre-existing tensor written in place, or new values).
        n = len(cap.out_leaves)
        new = [(t, gr) for t, gr in grads if made_here(gr)]
        made = [(i, gr) for i, gr in args if made_here(gr)]
        g.set_outputs(list(cap.out_leaves) + [gr for _t, gr in new] + [gr for _i, gr in made])
        cap.out_ids = g.outputs
        slots = [GradSlot(t, None) for t, gr in grads if gr is None]
        slots += [GradSlot(t, n + k) for k, (t, _gr) in enumerate(new)]
        slots += [GradSlot(None, n + len(new) + k, i) for k, (i, _gr) in enumerate(made)]
        slots += [GradSlot(None, None, i) for i, gr in args if gr is None]
        cap.outputs = Outputs(cap.outputs.spec, n, tuple(slots))
        return False
    if _C.is_grad_enabled() and any(t.requires_grad for t in cap.out_leaves):
        if cap.breaks:
            raise Unsupported("it needs autograd and reads tensor values on the host "
                              "(graph breaks are compiled for inference and whole steps)")
        return True
    return False
