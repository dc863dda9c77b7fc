"""Graph breaks: a capture cut at its host reads into segments, each its own
plan, joined in a tree by the value each read gave.

A run executes a segment, reads the value on the host, and continues with
the child segment captured for that outcome; an outcome with no child is a
Miss, and the caller captures the function again and merges the new capture
into the tree (Python cannot resume a function mid-way, so a re-capture runs
it from the start).

Invariants:
* Segment i of a capture is nodes [bounds[i], bounds[i + 1]); it takes the
  graph inputs plus the values it reads from earlier segments (``carried``,
  in order) and returns ``outs``. A segment that ends in a read has a
  HostRead and children; the last one has Outputs and no read.
* A segment's outs include every value a later segment of any path through
  it reads: merging a capture rebuilds ancestors that must hand on more.
* Mutations are written back by the last segment only, so a run that ends
  in a Miss has changed nothing.
* Equal prefixes are recognised by node range and fingerprint and shared.
"""
from typing import Any, NamedTuple, Optional

from ._args import unflatten

READ_BOOL = "bool"  # GraphBreak.kind of bool(t) and `if t:` (two outcomes); else "scalar"


class HostRead(NamedTuple):
    """The host read that ends a segment: the value, and where its tensor is
    when no segment computed it."""
    value: int            # the value id read
    kind: str             # READ_BOOL, or "scalar": guard on the exact value
    loc: Optional[str]    # the user's file:line of the read
    input_index: int      # the graph input holding it, or -1
    tensor: Any           # the parameter or constant holding it, or None

    def outcome(self, env, inputs):
        """The value read, as a float (the children's key); env maps value
        ids to the tensors the run's segments returned."""
        t = env.get(self.value)
        if t is None:
            t = inputs[self.input_index] if self.input_index >= 0 else self.tensor
        x = t.item()
        return float(x != 0) if self.kind == READ_BOOL else float(x)


class Segment:
    """Nodes [begin, end) of a capture, compiled; ends in a host read or the outputs."""
    __slots__ = ("src", "begin", "end", "fingerprint", "outs", "carried", "graph", "plan",
                 "remat_budget", "cut", "read", "children", "outputs")

    def __init__(self, src, begin, end, fingerprint):
        self.src, self.begin, self.end, self.fingerprint = src, begin, end, fingerprint
        self.children = {}    # outcome (float) -> the next Segment
        self.read = None      # HostRead that ends it; None for the last segment
        self.outputs = None   # Outputs, for the last segment

    def build(self, outs, cfg, mutations=None, n_inputs=-1, remat=False, loaned=0):
        """Cut the nodes out of the source graph, optimise and plan them.
        mutations defaults to: this segment ends the capture. The last
        `loaned` outputs may live in the plan's arena (loaned_outputs)."""
        if mutations is None:
            mutations = self.end == self.src.nodes_len
        budget = cfg.memory_budget
        target = 0  # remat_budget: the remat pass's estimate of live intermediate bytes
        room = 0  # winograd_room: what Winograd workspaces may add to the plan's block
        tries = []
        while True:
            self.cut = (list(outs), mutations, n_inputs, remat)
            graph, carried = self.src.segment(self.begin, self.end, *self.cut)
            graph.optimize(fusion_level=cfg.fusion_level,
                           disabled=cfg.passes_off(), verify=cfg.verify,
                           remat_budget=target, channels_last=cfg.channels_last,
                           fuse_attention=cfg.fuse_attention, winograd=cfg.winograd)
            self.plan = graph.compile(num_threads=cfg.num_threads or 0,
                                      memory_arena=cfg.memory_arena, poison=cfg.poison,
                                      loaned_outputs=loaned, winograd_room=room)
            self.graph, self.outs, self.carried = graph, list(outs), carried
            self.remat_budget = target
            if budget is None:
                return
            from ._memory import next_remat_budget, winograd_room
            nxt = next_remat_budget(self, budget, tries, cfg.remat)
            if nxt is None:
                # within budget: once more with the room it leaves for the
                # Winograd convolutions that ran direct (same remat target)
                room = 0 if room else winograd_room(self, budget)
                if not room:
                    return
                continue
            target = nxt

    @property
    def raw_text(self):
        """The IR as cut from the capture, before the passes: cut again on
        demand (the source graph is kept, unchanged) rather than printed at
        every build, which cost the first call time and code pages."""
        return self.src.segment(self.begin, self.end, *self.cut)[0].text()


def loaned(outputs):
    """How many of a last segment's outputs its plan may lend from its
    arena: the new .grad of each parameter (the last outputs), which a run
    drops before the next (drop_grads)."""
    return sum(slot.index is not None for slot in outputs.grads)


def drop_grads(outputs):
    """Before a whole step's run: drop the .grad the last run set, as its
    zero_grad would (captured, it ran at capture), instead of holding two
    sets; a plan then reuses the arena they live in."""
    for slot in outputs.grads:
        if slot.index is not None and slot.param is not None:
            slot.param.grad = None


def whole(graph, cfg, outputs):
    """A graph with no breaks as one built Segment ending in `outputs`."""
    seg = Segment(graph, 0, graph.nodes_len, 0)
    seg.build(graph.outputs, cfg, loaned=loaned(outputs))
    seg.outputs = outputs
    return seg


def chain(seg):
    """seg and its first descendants, down to a last segment."""
    out = []
    while seg is not None:
        out.append(seg)
        seg = next(iter(seg.children.values()), None)
    return out


def build_segments(cap, first, cfg, needed_from_prefix):
    """Segments first..k of a capture, built last to first and linked by the
    outcomes the capture saw. Returns them and adds to needed_from_prefix
    the values they read from segments before `first`."""
    k = len(cap.breaks)
    segs = [None] * (k + 1)
    needed = set()
    for i in range(k, first - 1, -1):
        b, e = cap.bounds[i], cap.bounds[i + 1]
        seg = Segment(cap.graph, b, e, cap.graph.fingerprint(b, e))
        if i == k:
            outs = list(cap.out_ids)
            seg.outputs = cap.outputs
            lend = loaned(cap.outputs) if k == 0 else 0  # runs with breaks keep the old .grad
        else:
            brk = cap.breaks[i]
            v = brk.value
            src = cap.graph.value(v)
            outs = [x for x in sorted(needed) if cap.segment_of(x) == i]
            if src.kind == "node":
                if cap.segment_of(v) == i:
                    outs = [v] + [x for x in outs if x != v]
                else:
                    needed.add(v)
            seg.read = HostRead(v, brk.kind, brk.loc, v if src.kind == "input" else -1,
                                src.tensor if src.kind in ("param", "const") else None)
        seg.build(outs, cfg, loaned=lend if i == k else 0)
        needed.update(seg.carried)
        segs[i] = seg
    for i in range(first, k):
        segs[i].children[cap.breaks[i].outcome] = segs[i + 1]
    needed_from_prefix.update(x for x in needed if cap.segment_of(x) < first)
    return segs[first:]


class Miss(Exception):
    """A run read an outcome that no capture has seen."""

    def __init__(self, seg, outcome):
        super().__init__(seg, outcome)
        self.seg, self.outcome = seg, outcome


def run_path(root, inputs):
    """Run the segments the reads choose, from root. Returns the last
    segment's plan outputs and that segment; raises Miss."""
    env = {}
    seg = root
    while True:
        ins = inputs + [env[v] for v in seg.carried] if seg.carried else inputs
        res = seg.plan.run(ins)
        if seg.read is None:
            return res, seg
        env.update(zip(seg.outs, res))
        outcome = seg.read.outcome(env, inputs)
        nxt = seg.children.get(outcome)
        if nxt is None:
            raise Miss(seg, outcome)
        seg = nxt


def finish(outputs, res, leaves):
    """The user's result of a run; the .grad of parameters and of arguments
    (leaves: the call's tensor leaves) set as the traced call left them
    (whole training steps)."""
    for slot in outputs.grads:
        grad = None if slot.index is None else res[slot.index]
        if slot.param is None:
            leaves[slot.arg].grad = grad
        else:
            slot.param.grad = grad
    return unflatten(outputs.spec, res[:outputs.n_user])


def merge(root, cap, cfg):
    """Merge a new capture into the tree under root.

    Returns root, with the capture's new segments added; a new root built
    from the capture alone when it recorded different ops for a prefix the
    tree has (the function depends on something other than its arguments);
    or None when the tree already held the whole capture."""
    path = []
    seg = root
    i = 0
    k = len(cap.breaks)
    while True:
        b, e = cap.bounds[i], cap.bounds[i + 1]
        if seg.begin != b or seg.end != e or seg.fingerprint != cap.graph.fingerprint(b, e) \
                or (seg.read is None) != (i == k):
            return build_segments(cap, 0, cfg, set())[0]
        path.append(seg)
        if i == k:
            return None
        nxt = seg.children.get(cap.breaks[i].outcome)
        if nxt is None:
            break
        seg, i = nxt, i + 1
    needed = set()
    segs = build_segments(cap, i + 1, cfg, needed)
    seg.children[cap.breaks[i].outcome] = segs[0]
    # Earlier segments must hand the new ones what they read.
    for j, anc in enumerate(path):
        extra = [x for x in sorted(needed) if cap.segment_of(x) == j and x not in anc.outs]
        if extra:
            anc.build(anc.outs + extra, cfg)
    return root


def describe_outcome(kind, x):
    """An outcome as the user would print it."""
    if kind == READ_BOOL:
        return str(bool(x))
    return repr(x)
