"""What a compiled step needs in memory, predicted from its plan, and the
largest batch that fits a budget.

The prediction counts what the allocator counts (musa.memory_stats()): every
tensor a run touches, each rounded to its allocator size class - the
inputs, the parameters, constants and optimizer state bound into the graph
(one storage counted once), the plan's block (intermediates of forward,
backward and update, and kernel workspace, laid out by the memory planner;
allocated on the first run and kept; a whole step's new gradients live in
it too, lent to the parameters' .grad), and the output buffers a run
allocates. Nothing here runs the step.

Invariant: ``peak_bytes`` is the sum of ``parts``; the measured allocator
peak of a steady-state run differs from it only by tensors the step does not
touch (e.g. the previous step's result, still held by the caller).
"""
from .. import _C


def _bytes(info):
    n = _C.empty(0, dtype=info.dtype).element_size()
    for d in info.shape:
        n *= d
    return n


def plan_memory(seg):
    """The memory plan of a built Segment as a dict (see module doc)."""
    g, plan = seg.graph, seg.plan
    stats = dict(plan.stats())
    size = _C._alloc_size
    tensors = []  # (kind, what, bytes)
    for v in g.inputs_list():
        info = g.value_info(v)
        tensors.append(("input", info.name or f"%{v}", size(_bytes(info))))
    seen = set()
    for v in range(g.num_values):
        val = g.value(v)
        t = val.tensor
        if val.kind not in ("param", "const") or t is None:
            continue
        key = t.data_ptr() - t.storage_offset() * t.element_size()
        if key in seen:
            continue
        seen.add(key)
        tensors.append(("parameter" if val.kind == "param" else "constant", f"%{v} " +
                        "x".join(map(str, t.shape)), size(t.numel() * t.element_size())))
    lent = {v for v, yes in zip(g.outputs, plan.loaned()) if yes}  # in the plan's block
    for v in dict.fromkeys(g.outputs):
        val = g.value(v)
        if val.kind == "node" and v not in lent:
            info = g.value_info(v)
            tensors.append(("output", f"%{v}", size(_bytes(info))))
    held = stats["held_bytes"]
    parts = {"inputs": 0, "parameters and state": 0, "plan block (intermediates and workspace)":
             held, "outputs": 0}
    for kind, _what, b in tensors:
        key = {"input": "inputs", "output": "outputs"}.get(kind, "parameters and state")
        parts[key] += b
    # the largest intermediates, with the op and line that make them
    bufs = sorted(plan.buffers(), key=lambda b: -b[2])[:10]
    largest = []
    for value, _off, nbytes, first, last in bufs:
        prod = g.value(value).producer
        info = g.node_info(prod) if prod >= 0 else None
        largest.append({"value": value, "bytes": nbytes, "op": info.op if info else None,
                        "loc": info.loc if info else None, "live_steps": (first, last)})
    stats.update(peak_bytes=sum(parts.values()), parts=parts,
                 remat_budget=getattr(seg, "remat_budget", 0),
                 tensors=sorted(tensors, key=lambda x: -x[2]), largest_intermediates=largest)
    return stats  # with the plan's own figures (arena_bytes, naive_bytes, ...)


def max_batch(variant, cfg, budget):
    """The largest size of a dynamic variant's dims whose step fits in
    `budget` bytes (its predicted peak), or None if even the smallest does
    not. A binary search over the declared range, planning the step at each
    size it tries (about log2 of the range plans; peaks grow with the size)."""
    from ._segments import whole
    lo, hi = variant.range

    def fits(size):
        shapes = variant.shapes_at(size)
        seg = variant.plans.get(shapes)
        if seg is None:
            try:
                seg = whole(variant.respecialize(shapes, size), cfg, variant.capture.outputs)
            except MemoryError:  # over Config.memory_budget even recomputing
                return False
        return plan_memory(seg)["peak_bytes"] <= budget

    if not fits(lo):
        return None
    while lo < hi:  # fits(lo) holds
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _mib(n):
    return f"{n / (1 << 20):.2f} MiB"


def winograd_room(seg, budget):
    """The bytes Winograd convolutions' workspaces may add to seg's plan
    block under budget (the room above its predicted peak), or 0 when none
    of its convolutions marked winograd runs direct."""
    if not seg.plan.stats()["winograd_direct"]:
        return 0
    return max(budget - plan_memory(seg)["peak_bytes"], 0)


def next_remat_budget(seg, budget, tries, remat=True):
    """After planning seg: None when its predicted peak fits in budget bytes,
    else the remat pass's budget for the next try (its estimate of live
    intermediate bytes: the room left by inputs, parameters and outputs, then less
    by what the last plan was over, at least an eighth). tries lists the
    peaks so far. Raises MemoryError naming the smallest peak reached and
    what makes it up when no room is left, after 8 tries, or at once
    without remat (Config(remat=False): nothing is recomputed)."""
    m = plan_memory(seg)
    peak = m["peak_bytes"]
    if peak <= budget:
        return None
    if not tries:
        target = (budget - m["parts"]["inputs"] - m["parts"]["parameters and state"] -
                  m["parts"]["outputs"])
    else:  # down by the excess, and at least an eighth
        target = seg.remat_budget - max(peak - budget, seg.remat_budget // 8)
    tries.append(peak)
    if len(tries) >= 8 or not remat:
        target = 0
    if target > 0:
        return target
    parts = ", ".join(f"{k} {_mib(v)}" for k, v in m["parts"].items())
    big = "; ".join(f"{_mib(x['bytes'])} from {x['op']}" + (f" at {x['loc']}" if x["loc"] else "")
                    for x in m["largest_intermediates"][:3])
    how = ("recomputing activations the plan needs" if remat else
           "with remat=False (nothing recomputed) the plan needs")
    raise MemoryError(f"[jit] memory_budget {_mib(budget)} ({budget} bytes) cannot be met: "
                      f"{how} {_mib(min(tries))} at best "
                      f"({min(tries)} bytes; the last plan: {parts}); largest intermediates: "
                      f"{big or 'none'}")
