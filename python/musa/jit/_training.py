"""Compiled training: a captured function whose outputs need autograd runs
as a forward plan and a backward plan from static autodiff, joined to the
eager tape as one node.

The joint graph is the captured forward plus the backward that
musa_graph_autodiff appends (the op table's formulas, run symbolically). It
is cut after the forward. The forward plan returns the outputs and the
values the backward reads (saved activations); the backward plan takes the
inputs, the output gradients and those values, and returns the gradients of
the inputs and parameters that require grad.

Invariants:
* Parameters are bound by reference: the tape node takes them as inputs
  after the call's tensors, so their gradients accumulate as eager ones do.
* Only floating outputs that require grad are differentiable; the others
  are marked non-differentiable.
* A create_graph backward replays the joint graph through the dispatcher,
  refused for graphs that draw random numbers or update state in place.
"""
from .. import _C
from ._args import contiguous, unflatten
from ._segments import Segment
from ._tracing import Outputs, Unsupported


class TrainingNode:
    """A forward and a backward plan for one variant, run as one tape node."""

    def __init__(self, cap, leaves, cfg, name):
        g = cap.graph
        if "attention" not in cfg.disable_passes:
            # before autodiff, which then builds the fused node's backward; the
            # forward segment's pipeline finds nothing left to fuse (without
            # fuse_attention, only where the fused kernels give eager's bits)
            g.run_pass("attention", fuse_attention=cfg.fuse_attention)
            cap.out_ids = g.outputs
        self.name = name
        n_in = g.num_inputs
        n_fwd = g.nodes_len
        outs = list(cap.out_ids)
        self.n_out = len(outs)
        self.out_spec = cap.outputs.spec
        # outputs that are inputs, unchanged (output k is argument i): the
        # call returns the argument itself, as eager does, so the gradient
        # that output gets reaches the argument directly, summed where
        # eager's engine sums it, and not through this node
        ins = g.inputs_list()
        mutated = g.writes_inputs
        self.passthrough = {k: ins.index(v) for k, v in enumerate(outs)
                            if v in ins and not mutated}
        # differentiable outputs, by position
        self.diff = [k for k, t in enumerate(cap.out_leaves)
                     if t.requires_grad and t.dtype.is_floating_point and
                     k not in self.passthrough]
        in_wrt = [i for i, t in enumerate(leaves) if t.requires_grad]
        params = [(v, t) for v, t in g.params() if t.requires_grad]
        self.params = [t for _v, t in params]
        self.n_in = n_in
        # the tape node's input position of each gradient the backward returns
        self.wrt_pos = in_wrt + [n_in + j for j in range(len(params))]
        gouts = [g.new_input(outs[k], f"grad_output{k}") for k in self.diff]
        try:
            grads = g.autodiff([outs[k] for k in self.diff], gouts,
                               [g.inputs_list()[i] for i in in_wrt] + [v for v, _t in params])
        except (RuntimeError, ValueError, TypeError, NotImplementedError) as e:
            raise Unsupported(f"static autodiff failed: {e}") from None
        self.grads = grads  # value id per wrt_pos entry, or -1: no gradient reaches it
        self.joint = g
        self.has_random = g.has_random
        self.has_mutation = g.num_mutations > 0
        self.bwd = Segment(g, n_fwd, g.nodes_len, 0)
        self.bwd.build([x for x in grads if x >= 0], cfg, mutations=False, remat=cfg.remat)
        self.fwd = Segment(g, 0, n_fwd, 0)
        self.fwd.build(outs + list(self.bwd.carried), cfg, mutations=True, n_inputs=n_in)
        self.fwd.outputs = Outputs(self.out_spec, self.n_out, ())
        self.n_saved = len(self.bwd.carried)

    def call(self, leaves):
        """Run the forward; with grad mode on, as one node on the tape."""
        tensors = contiguous(leaves)
        if not _C.is_grad_enabled():
            outs = self.fwd.plan.run(tensors)[:self.n_out]
        else:
            outs = self._forward_node(tensors)
        for k, i in self.passthrough.items():
            outs[k] = leaves[i]
        return unflatten(self.out_spec, outs)

    def _forward_node(self, tensors):
        """The forward plan's outputs, the differentiable ones (self.diff)
        made the outputs of one tape node whose inputs are the call's
        tensors and the parameters: musa.autograd.Function.apply's work for
        this one case (every input a tensor, the outputs known), without its
        general bookkeeping, which cost a small module's compiled training
        step more than eager's whole forward."""
        args = tensors + self.params
        res = self.fwd.plan.run(tensors)
        n = self.n_out
        if not any([t.requires_grad for t in args]):
            return res[:n]
        # an output that is an input object gets a fresh alias (passthrough
        # outputs are replaced by call()); saved values that are outputs are
        # kept as aliases too: an output holds its node, which would hold it
        ids = {id(t) for t in args}
        outs = [o.detach() if id(o) in ids else o for o in res[:n]]
        diff = [outs[k] for k in self.diff]
        if not diff:
            return outs
        dids = {id(o) for o in diff}
        saved = [s.detach() if id(s) in dids else s for s in res[n:]]
        metas = [(tuple(o.shape), o.dtype) for o in diff]
        node = self

        def backward(*grads):
            # a gradient per differentiable output, None where none reached it
            gouts = [None] * n
            for k, g, (shape, dtype) in zip(node.diff, grads, metas):
                gouts[k] = g if g is not None else _C.zeros(shape, dtype=dtype)
            if _C.is_grad_enabled():
                got = _double_backward(node, args, gouts)
            else:
                # saved values may be views the forward plan returns as they are
                it = iter(node.bwd.plan.run(tensors + [gouts[k].contiguous() for k in node.diff] +
                                            contiguous(saved)))
                got = [next(it) if x >= 0 else None for x in node.grads]
            out = [None] * len(args)
            for j, pos in enumerate(node.wrt_pos):
                out[pos] = got[j]
            return tuple(out)

        _C._custom_node("CompiledFunctionBackward", args, diff, backward)
        return outs

    def memory(self):
        return self.fwd.plan.stats(), self.bwd.plan.stats()


def _double_backward(node, tensors, gouts):
    """create_graph through a compiled function: the joint forward and
    backward graph runs again through the dispatcher on the same tensors
    (the same backward formulas, now recorded on the tape), so the gradients
    have history and second derivatives equal eager ones."""
    if node.has_random or node.has_mutation:
        raise RuntimeError(
            f"[jit] a gradient with create_graph=True through compiled {node.name}, "
            f"which draws random numbers or updates state in place, would not match eager; "
            f"run it eagerly for higher-order gradients")
    want = [x for x in node.grads if x >= 0]
    ins = list(tensors[:node.n_in]) + [gouts[k] for k in node.diff]
    res = iter(node.joint.run_eager(ins, want))
    return [next(res) if x >= 0 else None for x in node.grads]
