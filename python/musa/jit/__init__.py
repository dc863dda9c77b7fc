"""musa.jit: capture Python functions and modules into static graphs.

    @musa.jit
    def model(x, y):
        return x * y

    compiled = model.compile()              # builds nothing yet, runs nothing
    compiled(musa.tensor([1.0]), musa.tensor([2.0]))
    print(compiled.get_graph())

    traced = musa.jit.trace(module, (example,))   # capture now, from an example
    model.compile(config=musa.Config(fusion_level=2))   # a Module, compiled in place

How a call runs (see docs/jit.md):

* The call's signature (tensor dtypes, shapes and devices, the other
  arguments' values, grad mode, the module's training flag) picks a cache
  entry. A miss captures the function once in trace mode: it runs eagerly (so
  the first call's result is the eager result) while the dispatcher records
  every op into a graph, which the passes optimise and the planner lowers.
* A host read of a tensor value while capturing (``bool(t)``, ``t.item()``,
  ``if t > 0:``) is a graph break: the graph is cut there into segments. A
  run executes a segment, reads the value, and continues with the segment
  captured for that outcome. An outcome never seen triggers a new capture
  (logged), so a branch is never silently baked in.
* Recompiles are logged on the ``musa.jit`` logger, one line each, naming the
  function, the argument, the dimension and the values. Past
  ``Config.max_variants`` variants the function runs eagerly, with one
  warning.
"""
import functools
import logging
import os
import sys
import types
import warnings

from .. import _C, _capture

_C._jit_location(os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep)

log = logging.getLogger("musa.jit")

__all__ = ["Config", "jit", "trace", "CompiledFunction", "TracedModule", "guard",
           "outside_capture"]

guard = _capture.guard
outside_capture = _capture.outside_capture


class Config:
    """Settings of a compiled function or module.

    fusion_level: 0 no fusion; 1 (default) elementwise chains, elementwise
        producers of row reductions and elementwise epilogues of matmul/conv;
        2 the same (codegen through the system compiler is not built: level 2
        uses the fused-tile kernel, the documented fallback).
    memory_arena: plan intermediates into one arena with reuse (default on).
    num_threads: threads for concurrent branches (None: musa.get_num_threads()).
    dynamic: {argument name or index: {dim: (min, max)}} dims that may vary
        without recompiling.
    disable_passes: pass names to skip ("simplify", "cse", "fold", "dce", "fuse").
    max_variants: compiled variants per function before it runs eagerly.
    verify: run the IR verifier after every pass.
    remat: in compiled training, recompute cheap elementwise values in the
        backward instead of saving them (default on).
    """

    def __init__(self, fusion_level=1, memory_arena=True, num_threads=None, dynamic=None,
                 disable_passes=(), max_variants=8, verify=False, poison=False, remat=True):
        if fusion_level not in (0, 1, 2):
            raise ValueError(f"musa.Config: fusion_level must be 0, 1 or 2, got {fusion_level!r}")
        if num_threads is not None and (not isinstance(num_threads, int) or num_threads < 1):
            raise ValueError(f"musa.Config: num_threads must be a positive int, got {num_threads!r}")
        if not isinstance(max_variants, int) or max_variants < 1:
            raise ValueError(f"musa.Config: max_variants must be a positive int, got {max_variants!r}")
        self.fusion_level = fusion_level
        self.memory_arena = bool(memory_arena)
        self.num_threads = num_threads
        self.dynamic = {}
        self.disable_passes = tuple(disable_passes)
        self.max_variants = max_variants
        self.verify = bool(verify)
        self.poison = bool(poison)
        self.remat = bool(remat)
        for arg, dims in (dynamic or {}).items():
            if isinstance(dims, int):
                dims = {dims: (1, 1 << 62)}
            for d, rng in dims.items():
                lo, hi = rng if rng is not None else (1, 1 << 62)
                self.dynamic_dim(arg, d, lo, hi)

    def enable_memory_arena(self, on=True):
        """Plan intermediates into one arena (True) or give each its own region."""
        self.memory_arena = bool(on)
        return self

    def set_fusion_level(self, level):
        self.__init__(level, self.memory_arena, self.num_threads, None, self.disable_passes,
                      self.max_variants, self.verify, self.poison)
        return self

    def set_num_threads(self, n):
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"musa.Config: num_threads must be a positive int, got {n!r}")
        self.num_threads = n
        return self

    def dynamic_dim(self, arg, dim, min=1, max=1 << 62):
        """Let dim `dim` of argument `arg` (name or position) vary in [min, max]."""
        if not isinstance(dim, int) or not isinstance(min, int) or not isinstance(max, int) \
                or min < 0 or max < min:
            raise ValueError(f"musa.Config.dynamic_dim: bad dim/range {dim!r}, ({min!r}, {max!r})")
        self.dynamic.setdefault(arg, {})[dim] = (min, max)
        return self

    def disable_pass(self, name):
        self.disable_passes = self.disable_passes + (name,)
        return self

    def __repr__(self):
        return (f"musa.Config(fusion_level={self.fusion_level}, memory_arena={self.memory_arena}, "
                f"num_threads={self.num_threads}, dynamic={self.dynamic}, "
                f"disable_passes={self.disable_passes}, max_variants={self.max_variants})")


# ---- argument structures ----

_Tensor = _C.Tensor


class _ModuleArg:
    """A Module passed as an argument (e.g. self of a compiled method): keyed
    by identity and training flag, so train()/eval() recompiles."""
    __slots__ = ("obj", "key")

    def __init__(self, obj):
        self.obj, self.key = obj, (id(obj), obj.training)

    def __hash__(self):
        return hash(self.key)

    def __eq__(self, other):
        return isinstance(other, _ModuleArg) and self.key == other.key

    def __repr__(self):
        return f"{type(self.obj).__name__}(training={self.obj.training})"


def _flatten(obj, leaves):
    """A hashable spec of obj with tensors replaced by their index in leaves."""
    if isinstance(obj, _Tensor):
        leaves.append(obj)
        return ("T", len(leaves) - 1)
    if isinstance(obj, tuple):
        return ("U", tuple(_flatten(o, leaves) for o in obj))
    if isinstance(obj, list):
        return ("L", tuple(_flatten(o, leaves) for o in obj))
    if isinstance(obj, dict):
        return ("D", tuple((k, _flatten(v, leaves)) for k, v in obj.items()))
    if hasattr(obj, "training") and hasattr(obj, "_modules"):  # a musa.nn.Module
        return ("M", _ModuleArg(obj))
    return ("V", obj)


def _unflatten(spec, leaves):
    kind, body = spec
    if kind == "T":
        return leaves[body]
    if kind == "U":
        return tuple(_unflatten(s, leaves) for s in body)
    if kind == "L":
        return [_unflatten(s, leaves) for s in body]
    if kind == "D":
        return {k: _unflatten(s, leaves) for k, s in body}
    if kind == "M":
        return body.obj
    return body


@functools.lru_cache(maxsize=512)
def _param_names(fn):
    try:
        import inspect
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return []


def _leaf_names(fn, spec_args, spec_kwargs):
    """Readable names of the tensor leaves: the parameter names of fn."""
    params = _param_names(fn)
    names = {}

    def walk(spec, name):
        kind, body = spec
        if kind == "T":
            names[body] = name
        elif kind in ("U", "L"):
            for i, s in enumerate(body):
                walk(s, f"{name}[{i}]")
        elif kind == "D":
            for k, s in body:
                walk(s, f"{name}[{k!r}]")

    for i, s in enumerate(spec_args[1]):
        walk(s, params[i] if i < len(params) else f"args[{i}]")
    for k, s in spec_kwargs[1]:
        walk(s, k)
    return names


# ---- segments (graph breaks) ----

class _Seg:
    """Nodes [begin, end) of a capture, compiled; ends in a break or the outputs."""
    __slots__ = ("src", "begin", "end", "outs", "carried", "graph", "plan", "raw_text", "brk",
                 "children", "fp", "leaf")

    def __init__(self, src, begin, end, fp):
        self.src, self.begin, self.end, self.fp = src, begin, end, fp
        self.children = {}
        self.brk = None   # (value id, kind, loc, input index or -1, param tensor or None)
        self.leaf = None  # (output spec, names) for the last segment

    def build(self, outs, cfg, mutations=None, n_inputs=-1, remat=False):
        if mutations is None:
            mutations = self.end == self.src.nodes_len
        graph, carried = self.src.segment(self.begin, self.end, list(outs), mutations, n_inputs,
                                          remat)
        self.raw_text = graph.text()
        graph.optimize(fusion_level=cfg.fusion_level,
                       disabled=",".join(cfg.disable_passes) or None, verify=cfg.verify)
        self.plan = graph.compile(num_threads=cfg.num_threads or 0,
                                  memory_arena=cfg.memory_arena, poison=cfg.poison)
        self.graph, self.outs, self.carried = graph, list(outs), carried


class _Capture:
    """One trace of the function: the graph, its breaks and outputs.

    leaf: what the last segment's outputs mean: (output structure, number of
    user outputs, [(parameter, output index or None)] whose .grad the run
    sets, as the traced call left them)."""

    def __init__(self, graph, out_spec, out_ids, out_leaves):
        self.graph = graph
        self.out_spec = out_spec
        self.out_ids = out_ids
        self.out_leaves = out_leaves
        self.leaf = (out_spec, len(out_ids), ())
        self.breaks = graph.breaks()
        n = graph.nodes_len
        self.bounds = [0] + [b[1] for b in self.breaks] + [n]

    def producer(self, v):
        return self.graph.value(v)[1]


def _seg_of(cap, v):
    p = cap.producer(v)
    if p < 0:
        return -1
    for i in range(len(cap.bounds) - 1):
        if cap.bounds[i] <= p < cap.bounds[i + 1]:
            return i
    return -1


def _build_segments(cap, first, cfg, needed_from_prefix):
    """Segments first..k of a capture, built last to first. Returns them and
    adds to needed_from_prefix the values they read from segments < first."""
    k = len(cap.breaks)
    segs = [None] * (k + 1)
    needed = set()
    for i in range(k, first - 1, -1):
        b, e = cap.bounds[i], cap.bounds[i + 1]
        seg = _Seg(cap.graph, b, e, cap.graph.fingerprint(b, e))
        if i == k:
            outs = list(cap.out_ids)
        else:
            v, _at, kind, _outcome, loc = cap.breaks[i]
            kind_v, prod, tensor = cap.graph.value(v)
            outs = [x for x in sorted(needed) if _seg_of(cap, x) == i]
            if kind_v == "node":
                if _seg_of(cap, v) == i:
                    outs = [v] + [x for x in outs if x != v]
                else:
                    needed.add(v)
            seg.brk = (v, kind, loc, v if kind_v == "input" else -1,
                       tensor if kind_v in ("param", "const") else None)
        seg.build(outs, cfg)
        needed.update(c for c in seg.carried)
        segs[i] = seg
    for i in range(first, k):
        segs[i].children[cap.breaks[i][3]] = segs[i + 1]
    needed_from_prefix.update(x for x in needed if _seg_of(cap, x) < first)
    return segs[first:]


def _read_break(seg, env, inputs):
    v, kind, _loc, input_idx, tensor = seg.brk
    t = env.get(v)
    if t is None:
        t = inputs[input_idx] if input_idx >= 0 else tensor
    x = t.item()
    return float(x != 0) if kind == "bool" else float(x)


class _Entry:
    """The compiled variants for one call signature."""
    __slots__ = ("root", "eager", "reason", "dyn", "dyn_plans", "train", "by_size")

    def __init__(self, by_size=False):
        self.by_size = by_size  # a marker: the declared dynamic dims do not hold here, so
        # calls look up the entry filed under their exact sizes
        self.root = None
        self.eager = False
        self.reason = None
        self.dyn = None        # dynamic dims: (capture, size info, overrides fn)
        self.dyn_plans = {}
        self.train = None      # _Training: compiled forward and backward, one tape node


class _Unsupported(Exception):
    pass


class _Miss(Exception):
    def __init__(self, seg, outcome):
        self.seg, self.outcome = seg, outcome


def _run_path(entry, inputs):
    env = {}
    seg = entry.root
    while True:
        ins = inputs + [env[v] for v in seg.carried] if seg.carried else inputs
        res = seg.plan.run(ins)
        if seg.brk is None:
            return res, seg
        for v, t in zip(seg.outs, res):
            env[v] = t
        outcome = _read_break(seg, env, inputs)
        nxt = seg.children.get(outcome)
        if nxt is None:
            raise _Miss(seg, outcome)
        seg = nxt


def _finish(leaf, res):
    """The user's outputs of a run; parameters' .grad set as the traced
    call left them (whole training steps)."""
    spec, n, grads = leaf
    for p, idx in grads:
        p.grad = None if idx is None else res[idx]
    return _unflatten(spec, res[:n])


def _describe_spec_change(a, b):
    """The first difference between two argument structures, in words."""
    ka, kb = a[0], b[0]
    if ka != kb:
        return f"the argument structure changed ({ka} -> {kb})"
    if ka == "M":
        if a[1].obj is not b[1].obj:
            return f"a different {type(b[1].obj).__name__} module is passed"
        return (f"module {type(b[1].obj).__name__} training changed: {a[1].key[1]} -> "
                f"{b[1].key[1]}")
    if ka == "V":
        return f"a non-tensor argument changed: {a[1]!r} -> {b[1]!r}"[:300]
    if ka in ("U", "L", "D"):
        if len(a[1]) != len(b[1]):
            return f"the argument structure changed ({len(a[1])} -> {len(b[1])} items)"
        for x, y in zip(a[1], b[1]):
            if ka == "D":
                if x[0] != y[0]:
                    return f"a keyword argument changed: {x[0]!r} -> {y[0]!r}"
                x, y = x[1], y[1]
            if x != y:
                return _describe_spec_change(x, y)
    return "the non-tensor arguments or the argument structure changed"


def _describe_guard_change(whats, old, new):
    for what, a, b in zip(whats, old, new):
        if a == b:
            continue
        if isinstance(a, tuple) and isinstance(b, tuple) and all(
                isinstance(x, tuple) and len(x) == 2 for x in a + b):
            da, db = dict(a), dict(b)
            keys = [k for k in dict.fromkeys(list(da) + list(db)) if da.get(k) != db.get(k)]
            return f"{what} changed: " + ", ".join(f"{k} {da.get(k)!r} -> {db.get(k)!r}"
                                                    for k in keys)
        return f"{what} changed: {a!r} -> {b!r}"[:300]
    return "Python state the function depends on changed"


def _describe_outcome(kind, x):
    if kind == "bool":
        return str(bool(x))
    return repr(x)


# ---- compiled functions ----

class CompiledFunction:
    """A function captured into static graphs, one per call signature."""

    def __init__(self, fn, config=None, *, name=None, extra_key=None, retrace=True):
        self._fn = fn
        self.config = config or Config()
        self._cache = {}
        self._guards = {}  # key -> fn: Python state the captures depended on (musa.jit.guard)
        self._guard_what = {}  # key -> what the guard's recompile log calls it
        self._variants = 0
        self._eager_all = False
        self._last = None
        self._name = name or getattr(fn, "__qualname__", None) or repr(fn)
        self._extra_key = extra_key
        self._retrace = retrace
        self.recompile_log = []
        self.compiles = 0
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__wrapped__ = fn

    # -- the public surface --

    def compile(self, config=None):
        """A compiled callable with this config; captures on its first call."""
        return CompiledFunction(self._fn, config or self.config, name=self._name,
                                extra_key=self._extra_key, retrace=self._retrace)

    def get_graph(self, optimized=True):
        """The IR of the last compiled variant, as text (segments in order;
        forward then backward for a function compiled for training)."""
        if self._last is None:
            raise RuntimeError(f"musa.jit: {self._name} has not been compiled yet; call it first")
        dyn = next((e.dyn[0] for e in self._cache.values()
                    if e.dyn is not None and self._last in e.dyn_plans.values()), None)
        if dyn is not None:
            return ("# captured once for the dynamic range, planned per size\n" +
                    dyn.graph.text())
        train = next((e.train for e in self._cache.values()
                      if e.train is not None and e.train.fwd is self._last), None)
        if train is not None:
            pick = (lambda sg: sg.graph.text()) if optimized else (lambda sg: sg.raw_text)
            return "# forward\n" + pick(train.fwd) + "\n# backward\n" + pick(train.bwd)
        texts = []
        seg, n = self._last, 0
        chain = []
        while seg is not None:
            chain.append(seg)
            seg = next(iter(seg.children.values()), None)
        for seg in chain:
            t = seg.graph.text() if optimized else seg.raw_text
            if len(chain) > 1:
                head = f"# segment {n}"
                if seg.brk is not None:
                    head += f", ends reading %{seg.brk[0]} on the host at {seg.brk[2]}"
                t = head + "\n" + t
            texts.append(t)
            n += 1
        return "\n".join(texts)

    def graph_json(self):
        """The JSON form of the last compiled variant's (first segment's) graph."""
        import json
        if self._last is None:
            raise RuntimeError(f"musa.jit: {self._name} has not been compiled yet; call it first")
        return json.loads(self._last.graph.json())

    def memory_plan(self):
        """Planned arena bytes versus the naive sum, for the last compiled variant."""
        if self._last is None:
            raise RuntimeError(f"musa.jit: {self._name} has not been compiled yet; call it first")
        s = dict(self._last.plan.stats())
        s["buffers"] = self._last.plan.buffers()
        return s

    def plan_stats(self):
        if self._last is None:
            raise RuntimeError(f"musa.jit: {self._name} has not been compiled yet; call it first")
        return self._last.plan.stats()

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return types.MethodType(self, obj)

    def __repr__(self):
        return f"<musa.jit compiled {self._name}>"

    # -- calls --

    def _key(self, spec, leaves, names, merge_dynamic=True):
        dyn = self.config.dynamic if merge_dynamic else None
        sig = []
        for i, t in enumerate(leaves):
            shape = tuple(t.shape)
            d = (dyn.get(names.get(i)) or dyn.get(i)) if dyn else None
            if d:
                shape = tuple("dyn" if k in d and d[k][0] <= s <= d[k][1] else s
                              for k, s in enumerate(shape))
            sig.append((t.dtype, shape, t.requires_grad))
        extra = self._extra_key() if self._extra_key else None
        py = tuple(fn() for fn in self._guards.values()) if self._guards else ()
        return (spec, tuple(sig), _C.is_grad_enabled(), extra, py)

    def __call__(self, *args, **kwargs):
        if self._eager_all or _C._jit_capturing():  # inside another capture: inline
            return self._fn(*args, **kwargs)
        leaves = []
        spec = (_flatten(args, leaves), _flatten(kwargs, leaves))
        try:
            key = self._key(spec, leaves, _leaf_names(self._fn, *spec)
                            if self.config.dynamic else {})
            entry = self._cache.get(key)
            if entry is not None and entry.by_size:
                key = self._key(spec, leaves, {}, merge_dynamic=False)
                entry = self._cache.get(key)
        except TypeError:  # an unhashable argument: run eagerly
            return self._fn(*args, **kwargs)
        if entry is None:
            entry = self._new_entry(key, leaves, spec)
            if self._eager_all:
                return self._fn(*args, **kwargs)
            return self._capture(entry, key, args, kwargs, leaves, spec)
        if entry.eager:
            return self._fn(*args, **kwargs)
        if entry.train is not None:
            return entry.train.call(leaves)
        inputs = [t if t.is_contiguous() else t.contiguous() for t in leaves]
        if entry.dyn is not None:
            return self._run_dynamic(entry, args, kwargs, leaves, inputs, spec)
        root = entry.root
        if root.brk is None and root.leaf[2]:
            # a whole step: its zero_grad ran at capture; drop the old
            # gradients now, as it would, instead of holding two sets
            for p, idx in root.leaf[2]:
                if idx is not None:
                    p.grad = None
        try:
            res, leaf = _run_path(entry, inputs)
        except _Miss as m:
            return self._guard_miss(entry, m, args, kwargs, leaves, spec)
        self._copy_back(leaves, inputs)
        return _finish(leaf.leaf, res)

    def _copy_back(self, leaves, inputs):
        for t, c in zip(leaves, inputs):
            if t is not c and c._version != 0:
                t.copy_(c)

    def _new_entry(self, key, leaves, spec):
        if self._cache:
            self._log_recompile(key, spec)
        entry = _Entry()
        self._cache[key] = entry
        return entry

    def _log_recompile(self, key, spec):
        reason = None
        names = _leaf_names(self._fn, *spec)
        for other in reversed(list(self._cache)):  # the latest variant first
            if self._cache[other].by_size:
                continue
            if other[0] != key[0]:  # (positional spec, keyword spec)
                part = 0 if other[0][0] != key[0][0] else 1
                reason = _describe_spec_change(other[0][part], key[0][part])
                break
            for i, (a, b) in enumerate(zip(other[1], key[1])):
                nm = names.get(i, f"tensor {i}")
                if a[0] != b[0]:
                    reason = f"argument '{nm}' dtype changed: {a[0]} -> {b[0]}"
                elif len(a[1]) != len(b[1]):
                    reason = f"argument '{nm}' rank changed: {len(a[1])} -> {len(b[1])}"
                else:
                    for d, (x, y) in enumerate(zip(a[1], b[1])):
                        if x != y:
                            reason = f"argument '{nm}' dim {d} changed: {x} -> {y}"
                            break
                if a[2] != b[2] and reason is None:
                    reason = f"argument '{nm}' requires_grad changed: {a[2]} -> {b[2]}"
                if reason:
                    break
            if reason is None and other[2] != key[2]:
                reason = f"grad mode changed: {other[2]} -> {key[2]}"
            if reason is None and other[3] != key[3]:
                reason = f"module state changed: {other[3]} -> {key[3]}"
            if reason is None and other[4] != key[4]:
                reason = _describe_guard_change([self._guard_what.get(k) or f"Python state {k!r}"
                                                 for k in self._guards], other[4], key[4])
            if reason:
                break
        self._note_recompile(reason or "new signature")

    def _note_recompile(self, reason):
        self._variants += 1
        line = f"musa.jit: recompiling {self._name} (variant {self._variants + 1}): {reason}"
        self.recompile_log.append(line)
        log.warning(line)
        if self._variants + 1 > self.config.max_variants:
            self._eager_all = True
            warnings.warn(f"musa.jit: {self._name} was compiled {self._variants + 1} times "
                          f"(limit {self.config.max_variants}); running it eagerly from now on. "
                          f"Declare varying dims dynamic (musa.Config.dynamic_dim) to avoid this.",
                          RuntimeWarning, stacklevel=4)

    def _trace(self, args, kwargs, leaves, spec, mode="trace", shapes=None):
        """Capture one run. Returns (capture or None, result, reason)."""
        inputs = [t if t.is_contiguous() else t.contiguous() for t in leaves]
        if mode == "symbolic":
            inputs = [_C._empty_meta(t.dtype, s) for t, s in zip(leaves, shapes)]
        a2 = _unflatten(spec[0], inputs)
        k2 = _unflatten(spec[1], inputs)
        names = _leaf_names(self._fn, *spec)
        g = _C.Graph()
        g.capture_begin(mode)
        out = None
        try:
            for i, t in enumerate(inputs):
                g.add_input(t, names.get(i))
            out = self._fn(*a2, **k2)
            out_leaves = []
            out_spec = _flatten(out, out_leaves)
            g.set_outputs(out_leaves)
            out_ids = g.outputs
        except BaseException:
            try:
                g.capture_end()
            except Exception:
                pass
            raise
        try:
            g.capture_end()
        except (NotImplementedError, RuntimeError, ValueError) as e:
            if mode == "trace":
                self._copy_back(leaves, inputs)
            return None, out, str(e)
        self.compiles += 1
        if mode == "trace":
            self._copy_back(leaves, inputs)
        return _Capture(g, out_spec, out_ids, out_leaves), out, None

    def _capture(self, entry, key, args, kwargs, leaves, spec):
        with _capture.collect() as collected:
            cap, out, reason = self._trace(args, kwargs, leaves, spec)
        key = self._rekey(entry, key, collected.guards)
        if cap is None:
            entry.eager, entry.reason = True, reason
            warnings.warn(f"musa.jit: {self._name} runs eagerly: {reason}", RuntimeWarning,
                          stacklevel=3)
            return out
        try:
            kind = self._classify(cap, leaves)
            if kind == "train":
                entry.train = _Training(self, cap, leaves, spec)
                self._last = entry.train.fwd
                self._file_by_size(entry, key, leaves)
                return out
        except _Unsupported as e:
            entry.eager, entry.reason = True, str(e)
            warnings.warn(f"musa.jit: {self._name} runs eagerly: {e}", RuntimeWarning,
                          stacklevel=3)
            return out
        merged = any("dyn" in sig[1] for sig in key[1])  # the key merged dynamic dims
        if merged and not cap.breaks and self._setup_dynamic(entry, cap, args, kwargs, leaves,
                                                             spec):
            return out
        segs = _build_segments(cap, 0, self.config, set())
        entry.root = segs[0]
        segs[-1].leaf = cap.leaf
        self._last = segs[0]
        self._file_by_size(entry, key, leaves)
        return out

    def _file_by_size(self, entry, key, leaves):
        """The entry's plans are for the exact sizes of this call: when its
        key merged dynamic dims (the capture could not use them), file it
        under the exact sizes and leave a by_size marker under the merged key."""
        exact = (key[0], self._key(key[0], leaves, {}, merge_dynamic=False)[1]) + key[2:]
        if exact == key:
            return
        self._cache[key] = _Entry(by_size=True)
        self._cache[exact] = entry

    def _rekey(self, entry, key, registered):
        """File the entry under the Python guards its capture registered,
        with the values the capture saw."""
        if not registered:
            return key
        for k, (fn, _v, what) in registered.items():
            self._guards.setdefault(k, fn)
            self._guard_what.setdefault(k, what)
        old_py = dict(zip(list(self._guards)[:len(key[4])], key[4]))
        py = tuple(registered[k][1] if k in registered else old_py.get(k, self._guards[k]())
                   for k in self._guards)
        if self._cache.get(key) is entry:
            del self._cache[key]
        key = key[:4] + (py,)
        self._cache[key] = entry
        return key

    def _classify(self, cap, leaves):
        """'train' (outputs need autograd: a compiled forward and backward on
        one tape node), or 'plain' (inference, or a whole training step whose
        backward and optimizer update ran inside: parameters' .grad become
        extra outputs)."""
        g = cap.graph
        if not g.requires_grad:
            return "plain"

        def made_here(t):  # a tensor the graph computed (not one bound by reference)
            v = g.value_of(t) if t is not None else -1
            return v >= 0 and g.value(v)[0] == "node"

        params = [(v, t) for v, t in g.params() if t.requires_grad]
        grads = [(t, t.grad) for _v, t in params]
        backward_ran = any(made_here(gr) for _t, gr in grads)
        updated = any(g.value_of(t) != v for v, t in params)  # renamed: written in place
        if backward_ran or updated:
            # A whole step: each run leaves .grad as the traced call did
            # (None, the pre-existing tensor written in place, or new values).
            n = len(cap.out_leaves)
            new = [(t, gr) for t, gr in grads if made_here(gr)]
            g.set_outputs(list(cap.out_leaves) + [gr for _t, gr in new])
            cap.out_ids = g.outputs
            assign = [(t, None) for t, gr in grads if gr is None]
            assign += [(t, n + k) for k, (t, _gr) in enumerate(new)]
            cap.leaf = (cap.out_spec, n, tuple(assign))
            return "plain"
        if _C.is_grad_enabled() and any(t.requires_grad for t in cap.out_leaves):
            if cap.breaks:
                raise _Unsupported("it needs autograd and reads tensor values on the host "
                                   "(graph breaks are compiled for inference and whole steps)")
            return "train"
        return "plain"

    def _guard_miss(self, entry, miss, args, kwargs, leaves, spec):
        seg = miss.seg
        v, kind, loc, _i, _t = seg.brk
        seen = _describe_outcome(kind, miss.outcome)
        known = ", ".join(_describe_outcome(kind, k) for k in seg.children)
        if not self._retrace:
            raise RuntimeError(f"musa.jit: guard failed in {self._name}: the value read on the "
                               f"host at {loc} is {seen}, but the graph was traced for {known}; "
                               f"retrace with the Python function")
        self._note_recompile(f"guard at {loc}: the value read on the host is {seen} "
                             f"(compiled for {known})")
        if self._eager_all:
            return self._fn(*args, **kwargs)
        cap, out, reason = self._trace(args, kwargs, leaves, spec)
        if cap is None:
            entry.eager, entry.reason = True, reason
            warnings.warn(f"musa.jit: {self._name} runs eagerly: {reason}", RuntimeWarning,
                          stacklevel=3)
            return out
        self._insert(entry, cap)
        return out

    def _insert(self, entry, cap):
        """Merge a new capture into the tree of segments."""
        path = []
        seg = entry.root
        i = 0
        k = len(cap.breaks)
        while True:
            b, e = cap.bounds[i], cap.bounds[i + 1]
            if seg.begin != b or seg.end != e or seg.fp != cap.graph.fingerprint(b, e) \
                    or (seg.brk is None) != (i == k):
                # The function recorded different ops for the same prefix
                # (it depends on something other than its arguments).
                segs = _build_segments(cap, 0, self.config, set())
                segs[-1].leaf = cap.leaf
                entry.root = segs[0]
                self._last = segs[0]
                log.warning("musa.jit: %s recorded different ops for the same inputs; "
                            "keeping only the latest capture", self._name)
                return
            path.append(seg)
            if i == k:
                return
            outcome = cap.breaks[i][3]
            nxt = seg.children.get(outcome)
            if nxt is None:
                break
            seg, i = nxt, i + 1
        needed = set()
        segs = _build_segments(cap, i + 1, self.config, needed)
        segs[-1].leaf = cap.leaf
        seg.children[cap.breaks[i][3]] = segs[0]
        # Earlier segments must hand the new ones what they read.
        for j, anc in enumerate(path):
            extra = [x for x in sorted(needed) if _seg_of(cap, x) == j and x not in anc.outs]
            if extra:
                anc.build(anc.outs + extra, self.config)
        self._last = entry.root

    # -- dynamic dims --

    def _setup_dynamic(self, entry, cap, args, kwargs, leaves, spec):
        """Capture once more, symbolically, with every dynamic dim one larger
        (or smaller): integer attributes that moved follow the dim."""
        names = _leaf_names(self._fn, *spec)
        dyn = self.config.dynamic
        shapes0 = [list(t.shape) for t in leaves]
        shapes1 = [list(s) for s in shapes0]
        dims = []
        for i, t in enumerate(leaves):
            d = dyn.get(names.get(i)) or dyn.get(i)
            for k, (lo, hi) in (d or {}).items():
                if k < len(shapes0[i]):
                    s = shapes0[i][k]
                    if not lo <= s <= hi:  # this variant is outside the range: static
                        return False
                    shapes1[i][k] = s + 1 if s + 1 <= hi else s - 1
                    dims.append((i, k))
        if not dims or any(shapes1[i][k] < 0 for i, k in dims):
            return False
        step = {(i, k): shapes1[i][k] - shapes0[i][k] for i, k in dims}
        if len(set(step.values())) != 1:
            return False
        try:
            cap1, _, reason = self._trace(args, kwargs, leaves, spec, mode="symbolic",
                                          shapes=shapes1)
        except Exception as e:  # the function cannot run on other sizes
            reason, cap1 = str(e), None
        self.compiles -= 1 if cap1 is not None else 0
        over = _attr_slopes(cap.graph, cap1.graph) if cap1 is not None else None
        if over is None:
            log.warning("musa.jit: %s: dynamic dims not usable (%s); compiling per size",
                        self._name, reason or "the graph changes with the size")
            return False
        base = shapes0[dims[0][0]][dims[0][1]]
        entry.dyn = (cap, dims, base, over)
        _mark_symbolic(cap.graph, cap1.graph, base, dyn.get(names.get(dims[0][0])) or
                       dyn.get(dims[0][0]), dims[0][1])
        return True

    def _run_dynamic(self, entry, args, kwargs, leaves, inputs, spec):
        cap, dims, base, over = entry.dyn
        shapes = tuple(tuple(t.shape) for t in inputs)
        seg = entry.dyn_plans.get(shapes)
        if seg is None:
            i, k = dims[0]
            size = shapes[i][k]
            if any(shapes[a][b] != size for a, b in dims):
                return self._fn(*args, **kwargs)
            delta = size - base
            overrides = [(n, f, [v0 + s * delta for v0, s in zip(vals, slope)])
                         for n, f, vals, slope in over]
            try:
                g = cap.graph.respecialize([list(s) for s in shapes], overrides)
            except (ValueError, TypeError, RuntimeError) as e:
                self._note_recompile(f"dynamic dims of {self._name} do not hold at {shapes}: {e}")
                return self._fn(*args, **kwargs)
            seg = _Seg(g, 0, g.nodes_len, 0)
            seg.build(g.outputs, self.config)
            seg.leaf = cap.leaf
            entry.dyn_plans[shapes] = seg
            self._last = seg
        res = seg.plan.run(inputs)
        self._copy_back(leaves, inputs)
        return _finish(seg.leaf, res)


class _Training:
    """A compiled function whose outputs need autograd: a forward plan and a
    backward plan from static autodiff, joined to the eager tape as one node.

    The joint graph is the captured forward plus the backward that
    musa_graph_autodiff appends (the op table's formulas, run symbolically).
    It is cut after the forward. The forward plan returns the outputs and
    the values the backward reads (saved activations). The backward plan
    takes the inputs, the output gradients and those values, and returns
    the gradients of the inputs and parameters that require grad."""

    def __init__(self, owner, cap, leaves, spec):
        cfg = owner.config
        g = cap.graph
        self.owner, self.spec = owner, spec
        n_in = g.num_inputs
        n_fwd = g.nodes_len
        outs = list(cap.out_ids)
        self.n_out = len(outs)
        self.out_spec = cap.out_spec
        self.diff = [k for k, t in enumerate(cap.out_leaves)
                     if t.requires_grad and t.dtype.is_floating_point]
        in_wrt = [i for i, t in enumerate(leaves) if t.requires_grad]
        params = [(v, t) for v, t in g.params() if t.requires_grad]
        self.params = [t for _v, t in params]
        self.n_in = n_in
        self.wrt_pos = in_wrt + [n_in + j for j in range(len(params))]
        gouts = [g.new_input(outs[k], f"grad_output{k}") for k in self.diff]
        try:
            grads = g.autodiff([outs[k] for k in self.diff], gouts,
                               [g.inputs_list()[i] for i in in_wrt] + [v for v, _t in params])
        except (RuntimeError, ValueError, TypeError, NotImplementedError) as e:
            raise _Unsupported(f"static autodiff failed: {e}") from None
        self.grads = grads
        self.joint = g
        self.has_random = g.has_random
        self.has_mutation = g.num_mutations > 0
        self.bwd = _Seg(g, n_fwd, g.nodes_len, 0)
        self.bwd.build([x for x in grads if x >= 0], cfg, mutations=False, remat=cfg.remat)
        self.fwd = _Seg(g, 0, n_fwd, 0)
        self.fwd.build(outs + list(self.bwd.carried), cfg, mutations=True, n_inputs=n_in)
        self.fwd.leaf = (cap.out_spec, self.n_out, ())
        self.n_saved = len(self.bwd.carried)

    def call(self, leaves):
        tensors = [t if t.is_contiguous() else t.contiguous() for t in leaves]
        if not _C.is_grad_enabled():
            res = self.fwd.plan.run(tensors)
            return _unflatten(self.out_spec, res[:self.n_out])
        outs = _CompiledNode.apply(self, *(tensors + self.params))
        return _unflatten(self.out_spec, list(outs))

    def memory(self):
        return self.fwd.plan.stats(), self.bwd.plan.stats()


def _compiled_node_class():
    from ..autograd import Function

    class CompiledFunction(Function):
        @staticmethod
        def forward(ctx, tv, *tensors):
            ins = list(tensors[:tv.n_in])
            res = tv.fwd.plan.run(ins)
            ctx.tv, ctx.ins, ctx.tensors = tv, ins, tensors
            ctx.saved = res[tv.n_out:]
            outs = res[:tv.n_out]
            nondiff = [outs[k] for k in range(tv.n_out) if k not in tv.diff]
            if nondiff:
                ctx.mark_non_differentiable(*nondiff)
            return tuple(outs)

        @staticmethod
        def backward(ctx, *gouts):
            tv = ctx.tv
            if _C.is_grad_enabled():
                grads = _double_backward(tv, ctx.tensors, gouts)
            else:
                g = [gouts[k].contiguous() for k in tv.diff]
                res = iter(tv.bwd.plan.run(ctx.ins + g + list(ctx.saved)))
                grads = [next(res) if x >= 0 else None for x in tv.grads]
            out = [None] * len(ctx.tensors)
            for j, pos in enumerate(tv.wrt_pos):
                out[pos] = grads[j]
            return (None,) + tuple(out)

    return CompiledFunction


def _double_backward(tv, tensors, gouts):
    """create_graph through a compiled function: the joint forward and
    backward graph runs again through the dispatcher on the same tensors
    (the same backward formulas, now recorded on the tape), so the gradients
    have history and second derivatives equal eager ones."""
    if tv.has_random or tv.has_mutation:
        raise RuntimeError(
            f"musa.jit: a gradient with create_graph=True through compiled {tv.owner._name}, "
            f"which draws random numbers or updates state in place, would not match eager; "
            f"run it eagerly for higher-order gradients")
    want = [x for x in tv.grads if x >= 0]
    ins = list(tensors[:tv.n_in]) + [gouts[k] for k in tv.diff]
    res = iter(tv.joint.run_eager(ins, want))
    return [next(res) if x >= 0 else None for x in tv.grads]


class _LazyNode:
    cls = None

    def apply(self, *args):
        if _LazyNode.cls is None:
            _LazyNode.cls = _compiled_node_class()
        return _LazyNode.cls.apply(*args)


_CompiledNode = _LazyNode()


def _mark_symbolic(g0, g1, base, ranges, dim):
    """Record in g0's IR which dims follow the dynamic size (they differ
    between the captures at base and base +- 1)."""
    lo, hi = ranges[dim]
    sym = g0.add_symbol("s0", lo, hi, base)
    for v in range(min(g0.num_values, g1.num_values)):
        a, b = g0.value_info(v).shape, g1.value_info(v).shape
        if len(a) != len(b):
            continue
        for d, (x, y) in enumerate(zip(a, b)):
            if x != y:
                g0.set_symbolic(v, d, sym)


def _attr_slopes(g0, g1):
    """[(node, field, values at g0, slope)] for int attributes that differ
    between two captures at sizes one apart, or None if the graphs differ
    otherwise. Attributes of other types (floats included) must not move."""
    n0 = [(i, g0.node_info(i)) for i in range(g0.nodes_len)]
    n0 = [(i, a) for i, a in n0 if a is not None]  # None: removed by a pass
    n1 = [b for b in map(g1.node_info, range(g1.nodes_len)) if b is not None]
    if len(n0) != len(n1):
        return None
    over = []
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
                over.append((idx, f, [v0], [v1 - v0]))
            elif isinstance(v0, list) and isinstance(v1, list) and len(v0) == len(v1) and \
                    all(isinstance(x, int) for x in v0 + v1):
                over.append((idx, f, v0, [y - x for x, y in zip(v0, v1)]))
            else:
                return None
    return over


# ---- entry points ----

def jit(fn=None, *, fusion_level=None, dynamic=None, config=None):
    """Compile a function: ``@musa.jit`` or ``@musa.jit(fusion_level=2, dynamic=...)``."""
    cfg = config or Config()
    if fusion_level is not None or dynamic is not None:
        cfg = Config(fusion_level if fusion_level is not None else cfg.fusion_level,
                     cfg.memory_arena, cfg.num_threads, dynamic, cfg.disable_passes,
                     cfg.max_variants, cfg.verify, cfg.poison)
        for k, v in (config.dynamic if config else {}).items():
            cfg.dynamic.setdefault(k, {}).update(v)

    def wrap(f):
        if not callable(f):
            raise TypeError(f"musa.jit: expected a function, got {type(f).__name__}")
        return CompiledFunction(f, cfg)

    return wrap(fn) if fn is not None else wrap


class TracedModule:
    """A module (or function) captured from example inputs by musa.jit.trace."""

    def __init__(self, target, compiled, example_out):
        self._target = target
        self._compiled = compiled
        self._example_out = example_out

    def __call__(self, *args, **kwargs):
        return self._compiled(*args, **kwargs)

    def forward(self, *args, **kwargs):
        return self._compiled(*args, **kwargs)

    def get_graph(self, optimized=True):
        return self._compiled.get_graph(optimized)

    def graph_json(self):
        return self._compiled.graph_json()

    def memory_plan(self):
        return self._compiled.memory_plan()

    @property
    def recompile_log(self):
        return self._compiled.recompile_log

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._target, name)

    def __repr__(self):
        return f"TracedModule({self._target!r})"


def _module_forward(module):
    from ..nn import Module
    fwd = Module._call_impl

    def forward(*args, **kwargs):
        return fwd(module, *args, **kwargs)

    forward.__qualname__ = f"{type(module).__name__}.forward"
    try:
        import inspect
        forward.__signature__ = inspect.signature(module.forward)
    except (TypeError, ValueError):
        pass
    return forward


def _compare(a, b, path="output"):
    la, lb = [], []
    sa, sb = _flatten(a, la), _flatten(b, lb)
    if len(la) != len(lb):
        raise RuntimeError(f"musa.jit.trace: check_trace: {path} structure differs")
    for i, (x, y) in enumerate(zip(la, lb)):
        if tuple(x.shape) != tuple(y.shape) or x.dtype != y.dtype:
            raise RuntimeError(f"musa.jit.trace: check_trace: {path} {i} is {y.dtype}"
                               f"{tuple(y.shape)} compiled but {x.dtype}{tuple(x.shape)} eager")
        if x.numel() and x.dtype.is_floating_point:
            d = float((x.double() - y.double()).abs().max())
            tol = 1e-5 * (1 + float(x.double().abs().max()))
            if not d <= tol:
                raise RuntimeError(f"musa.jit.trace: check_trace: {path} {i} differs from the "
                                   f"eager result by {d:.3g}")
        elif x.numel() and not bool((x == y).all()):
            raise RuntimeError(f"musa.jit.trace: check_trace: {path} {i} differs from eager")


def trace(module_or_fn, example_inputs, check_trace=True, config=None):
    """Capture a module or function now, from example inputs.

    Every host read while tracing becomes a guard checked at each call; a
    failed guard retraces (logged). With check_trace, the compiled graph is
    run on the example inputs and compared with the eager result."""
    from ..nn import Module
    if not isinstance(example_inputs, (tuple, list)):
        example_inputs = (example_inputs,)
    if isinstance(module_or_fn, Module):
        fn = _module_forward(module_or_fn)
        extra = (lambda m=module_or_fn: m.training)
    elif callable(module_or_fn):
        fn, extra = module_or_fn, None
    else:
        raise TypeError(f"musa.jit.trace: expected a Module or a function, got "
                        f"{type(module_or_fn).__name__}")
    compiled = CompiledFunction(fn, config or Config(), extra_key=extra)
    out = compiled(*example_inputs)
    if check_trace and compiled._last is not None:
        again = compiled(*example_inputs)
        _compare(out, again)
    return TracedModule(module_or_fn, compiled, out)


def compile_module(module, config=None):
    """Compile a Module in place: its calls run a compiled forward."""
    fn = _module_forward(module)
    object.__setattr__(module, "_compiled_call",
                       CompiledFunction(fn, config or Config(),
                                        extra_key=(lambda m=module: m.training)))
    return module


class _JitModule(types.ModuleType):
    """``musa.jit`` is both this module and the decorator."""

    def __call__(self, fn=None, **kwargs):
        return jit(fn, **kwargs)


sys.modules[__name__].__class__ = _JitModule
