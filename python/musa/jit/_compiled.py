"""CompiledFunction: a function captured into static graphs, one compiled
variant per call signature, with the recompile log and the variant limit.

A call flattens its arguments (_args), builds its CacheKey (_keys) and runs
the Entry filed under it: a tree of segments (_segments), a dynamic variant
(_dynamic), a training node (_training), or the Python function when the
capture could not be compiled. A miss captures the function (_tracing) and
returns the eager result of that run.

Invariants:
* Each Entry is exactly one of: a segment tree (``root``), a dynamic
  variant, a training node, eager, or a ``by_size`` marker. A marker sits
  under a key that merged dynamic dims whose capture could not use them; the
  call then looks up the entry filed under its exact sizes.
* Every capture after the first is logged as a recompile, with a reason,
  and counts towards ``Config.max_variants``; past it, every call runs
  eagerly (one RuntimeWarning).
* ``_guards`` keeps each Python guard (musa.jit.guard) once, in the order
  first registered; keys carry the guards' values in that order.
"""
import threading
import types
import warnings
import weakref

from .. import _C, _capture
from ._args import (TENSOR, contiguous, copy_back, flatten_call, leaf_names, new_tuple,
                    overlapping, positional_spec, unflatten)
from ._config import Config
from ._dynamic import DynamicTraining, DynamicVariant, check_slopes, probe
from ._keys import CacheKey, describe_change, signature
from ._segments import (Miss, build_segments, chain, describe_outcome, drop_grads, finish,
                        merge, run_path)
from ._tracing import Trace, Unsupported, needs_tape_node, reads_host, trace
from ._training import TrainingNode

_ALL = weakref.WeakSet()  # every CompiledFunction: musa.compiler.reset() drops their plans


class _Log:
    """The musa.jit logger (``logging.getLogger("musa.jit")``), imported at
    its first message: logging (with traceback, string and their imports)
    is 0.4 MiB of resident memory a compiled step would otherwise pay on
    import. Only recompiles and fallbacks log."""
    __slots__ = ()

    def __getattr__(self, name):
        import logging
        return getattr(logging.getLogger("musa.jit"), name)


log = _Log()


class Entry:
    """The compiled variant of one cache key."""
    __slots__ = ("root", "eager", "reason", "dynamic", "train", "by_size", "writes_args")

    def __init__(self, by_size=False):
        self.by_size = by_size  # a marker: look up the call's exact sizes instead
        self.root = None        # Segment: the tree of segments
        self.eager = False      # the capture failed: run the Python function
        self.reason = None      # why it runs eagerly
        self.dynamic = None     # DynamicVariant: planned per size
        self.train = None       # TrainingNode: compiled forward and backward, one tape node
        self.writes_args = False  # the function writes into an argument


class CompiledFunction:
    """A function captured into static graphs, one per call signature."""

    def __init__(self, fn, config=None, *, name=None, extra_key=None, retrace=True,
                 fullgraph=False):
        self._fn = fn
        self._fullgraph = fullgraph  # musa.compile(fullgraph=True): no breaks, no eager runs
        self.config = config or Config()
        # Captures and merges run one at a time; an entry is filed in the
        # cache only once complete, so lock-free lookups never see a partial one.
        self._lock = threading.RLock()
        self._cache = {}   # CacheKey -> Entry
        self._guards = {}  # guard key -> _capture.Guard: Python state the captures depend on
        self._variants = 0
        self._warned_overlap = False
        self._eager_all = False
        self._last = None  # the Segment of the last compiled variant (first segment)
        self._fast = None  # (plan, state, out spec or None): the fast path (_fast_path)
        self._name = name or getattr(fn, "__qualname__", None) or repr(fn)
        self._extra_key = extra_key
        self._retrace = retrace
        self.recompile_log = []
        self.compiles = 0
        self._saved_call = None  # (spec, [(shape, dtype)]) of the last capture: what save() saves
        self._config_note = None  # why the next capture recompiles: a setting changed
        self.config._attach(self)
        _ALL.add(self)
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__wrapped__ = fn

    # -- the public surface --

    def compile(self, config=None):
        """A compiled callable with this config; captures on its first call."""
        return CompiledFunction(self._fn, config or self.config, name=self._name,
                                extra_key=self._extra_key, retrace=self._retrace,
                                fullgraph=self._fullgraph)

    def _compiled_yet(self):
        if self._last is None:
            raise RuntimeError(f"[jit] {self._name} has not been compiled yet; call it first")

    def get_graph(self, optimized=True):
        """The IR of the last compiled variant, as text (segments in order;
        forward then backward for a function compiled for training). The
        text is a musa.viz.GraphText: with optimized=True its to_dot() and
        to_json() give the same graphs as a picture and as JSON."""
        from ..viz import GraphText
        self._compiled_yet()
        dyn = next((e.dynamic for e in self._cache.values()
                    if e.dynamic is not None and self._last in e.dynamic.plans.values()), None)
        if dyn is not None:
            g = dyn.capture.graph
            return GraphText("# captured once for the dynamic range, planned per size\n" +
                             g.text(), [("captured for the dynamic range", g)])
        train = next((e.train for e in self._cache.values()
                      if e.train is not None and getattr(e.train, "fwd", None) is self._last),
                     None)
        train = train or next((n for e in self._cache.values()
                               if isinstance(e.train, DynamicTraining)
                               for n in e.train.nodes.values() if n.fwd is self._last), None)
        if train is not None:
            if not optimized:
                return GraphText("# forward\n" + train.fwd.raw_text + "\n# backward\n" +
                                 train.bwd.raw_text)
            return GraphText("# forward\n" + train.fwd.graph.text() + "\n# backward\n" +
                             train.bwd.graph.text(),
                             [("forward", train.fwd.graph), ("backward", train.bwd.graph)])
        segs = chain(self._last)
        texts, graphs = [], []
        for n, seg in enumerate(segs):
            t = seg.graph.text() if optimized else seg.raw_text
            title = ""
            if len(segs) > 1:
                title = head = f"# segment {n}"
                if seg.read is not None:
                    head += f", ends reading %{seg.read.value} on the host at {seg.read.loc}"
                t = head + "\n" + t
            texts.append(t)
            graphs.append((title.lstrip("# "), seg.graph))
        return GraphText("\n".join(texts), graphs if optimized else ())

    def graph_json(self):
        """The JSON form of the last compiled variant's (first segment's) graph."""
        import json
        self._compiled_yet()
        return json.loads(self._last.graph.json())

    def memory_plan(self):
        """What a run of the last compiled variant needs in memory, from its
        plan (nothing runs; with dynamic dims, the plan of the size last
        run): ``peak_bytes`` (what musa.memory_stats() will
        count at the run's peak, within the tensors the run touches), its
        ``parts`` (inputs, parameters and state, the plan's block, outputs),
        every ``tensors`` entry and the ``largest_intermediates`` with the op
        and line that make them; plus the planner's figures (arena_bytes
        versus naive_bytes) and ``buffers``. For a function compiled for
        training (a forward and a backward plan) it is the forward's."""
        from ._memory import plan_memory
        self._compiled_yet()
        s = plan_memory(self._last)
        s["buffers"] = self._last.plan.buffers()
        return s

    def max_batch(self, budget_bytes):
        """The largest size of the declared dynamic dim whose run fits in
        budget_bytes (memory_plan's peak), or None when even the smallest
        does not. Needs a variant compiled with dynamic dims
        (Config.dynamic); plans the step at the sizes it tries."""
        from ._memory import max_batch
        self._compiled_yet()
        dyn = next((e.dynamic for e in self._cache.values() if e.dynamic is not None), None)
        if dyn is None:
            raise RuntimeError(f"[jit] max_batch: {self._name} has no variant with dynamic "
                               f"dims; declare them with musa.Config(dynamic=...)")
        return max_batch(dyn, self.config, budget_bytes)

    def save(self, path):
        """Save the last compiled signature as a .musa model (musa.jit.load
        reads it; so does musa_model_load in C). See musa/jit/_save.py."""
        from ._save import save
        save(self, path)

    def plan_stats(self):
        self._compiled_yet()
        return self._last.plan.stats()

    def plan_text(self):
        """The steps of the last compiled variant's plan (first segment), one
        line each: kernels, fused groups (``fused[...]``), multi-tensor
        updates (``multi[sgd_update x62, 11173962 elements]``)."""
        self._compiled_yet()
        return self._last.plan.text()

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return types.MethodType(self, obj)

    def __repr__(self):
        return f"<musa.jit compiled {self._name}>"

    # -- calls --

    def _key(self, spec, leaves, names, merge_dynamic=True):
        dynamic = self.config.dynamic if merge_dynamic else None
        extra = self._extra_key() if self._extra_key else None
        guards = tuple([g.fn() for g in self._guards.values()]) if self._guards else ()
        return new_tuple(CacheKey, (spec, signature(leaves, dynamic, names), _C.is_grad_enabled(),
                                    _C._autocast_state(), extra, guards))

    def __call__(self, *args, **kwargs):
        fast = self._fast
        if fast is not None and not kwargs:
            plan, state, tail = fast
            if plan is None:  # a training node: C checks, Python makes the tape node
                if _C._jit_call_matches(args, state):
                    return tail.call(list(args))
            else:
                res = plan.call(args, state)
                if res is not NotImplemented:
                    return res if tail is None else unflatten(tail, res)
        if self._eager_all or _C._jit_capturing():  # inside another capture: inline
            return self._fn(*args, **kwargs)
        leaves = []
        spec = flatten_call(args, kwargs, leaves)
        try:
            key, entry = self._lookup(spec, leaves)
        except TypeError:  # an unhashable argument: run eagerly
            return self._fn(*args, **kwargs)
        if fast is None and entry is not None and not kwargs:
            self._fast = self._fast_path(key, entry, spec, leaves)
        if entry is None:
            with self._lock:
                key, entry = self._lookup(spec, leaves)  # another thread may have captured it
                if entry is None:
                    if self._cache:
                        self._log_recompile(key, spec)
                    elif self._config_note:
                        line = f"musa.jit: recompiling {self._name}: {self._config_note}"
                        self.recompile_log.append(line)
                        log.warning(line)
                    self._config_note = None
                    if self._eager_all:
                        return self._fn(*args, **kwargs)
                    return self._capture(key, leaves, spec, args, kwargs)
        return self._run(entry, args, kwargs, leaves, spec)

    def _fast_path(self, key, entry, spec, leaves):
        """The fast path of calls that would run this entry as one plan
        (Plan.call: the argument, mode and guard checks of the key, and
        the run, in C; NotImplemented sends a call here) or as one training
        node ((None, state, node): the same checks, then node.call), or None
        where the entry needs more of the full path: a dynamic, eager or
        segmented variant, keyword or non-tensor arguments, non-contiguous
        arguments, writes into arguments. The extra key (a module's
        training flag) is checked like a guard."""
        root, train = entry.root, entry.train
        if ((root is None or root.read is not None) and not isinstance(train, TrainingNode) or
                entry.eager or entry.writes_args or entry.by_size or self.config.dynamic or
                spec is not positional_spec(len(leaves)) or
                not all([t.is_contiguous() for t in leaves]) or
                len(key.guards) != len(self._guards)):
            return None
        guards = tuple(zip([g.fn for g in self._guards.values()], key.guards))
        if self._extra_key is not None:
            guards += ((self._extra_key, key.extra),)
        if root is None:
            return None, (key.signature, key.grad_enabled, key.autocast, guards, (), (), -1, 0), train
        out = root.outputs
        grads = out.grads
        state = (key.signature, key.grad_enabled, key.autocast, guards,
                 tuple([s.param for s in grads if s.index is not None and s.param is not None]),
                 tuple([(s.arg if s.param is None else s.param, -1 if s.index is None else s.index)
                        for s in grads]),
                 out.spec.body if out.spec.kind is TENSOR else -1, out.n_user)
        return root.plan, state, (None if out.spec.kind is TENSOR else out.spec)

    def _run(self, entry, args, kwargs, leaves, spec):
        """Run a complete entry for this call."""
        if entry.eager:
            return self._fn(*args, **kwargs)
        if entry.writes_args and len(leaves) > 1 and overlapping(leaves):
            # a plan takes its arguments as separate memory (copies where not
            # contiguous): a write into one would not be seen through another
            return self._run_overlapping(args, kwargs, "writes into an argument, and ")
        if entry.train is not None:
            if isinstance(entry.train, DynamicTraining):
                node = entry.train.node_for(leaves, tuple(tuple(t.shape) for t in leaves))
                if node is None:  # its dynamic dims differ in size: eager
                    return self._fn(*args, **kwargs)
                self._last = node.fwd
                return node.call(leaves)
            return entry.train.call(leaves)
        inputs = contiguous(leaves)
        if entry.dynamic is not None:
            return self._run_dynamic(entry.dynamic, args, kwargs, leaves, inputs)
        root = entry.root
        if root.read is None:
            drop_grads(root.outputs)
        try:
            res, last = run_path(root, inputs)
        except Miss as m:
            with self._lock:
                return self._guard_miss(entry, m, args, kwargs, leaves, spec)
        copy_back(leaves, inputs, res)
        return finish(last.outputs, res, leaves)

    def _config_changed(self, what):
        """Config setting `what` changed: the variants planned under the old
        settings go, and the next call captures again (a logged recompile).
        memory_plan() and the other views keep describing the last plan
        until then."""
        self._drop_plans(f"config changed: {what}")

    def _drop_plans(self, note=None):
        """Forget every variant (and the variant count): the next call
        captures again, logged with `note` when one is given."""
        with self._lock:
            if self._cache:  # a fresh start: the variant count too
                self._cache.clear()
                self._fast = None
                self._variants, self._eager_all = 0, False
                self._config_note = note

    def _run_overlapping(self, args, kwargs, what=""):
        """Run a call whose arguments share memory eagerly (logged once)."""
        if not self._warned_overlap:
            self._warned_overlap = True
            log.warning("musa.jit: %s %sthis call's arguments share memory; such calls run "
                        "eagerly", self._name, what)
        return self._fn(*args, **kwargs)

    def _log_recompile(self, key, spec):
        names = leaf_names(self._fn, spec)
        whats = [g.what or f"Python state {k!r}" for k, g in self._guards.items()]
        reason = None
        for other, entry in reversed(list(self._cache.items())):  # the latest variant first
            if not entry.by_size:
                reason = describe_change(other, key, names, whats)
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

    def _trace(self, leaves, spec, symbolic_shapes=None, count=False):
        """Capture one call (see _tracing.trace); a successful capture of a
        call (trace mode, or a symbolic first capture: count) counts in
        ``compiles``."""
        self._fast = None  # the entries change
        t = trace(self._fn, leaves, spec, leaf_names(self._fn, spec), symbolic_shapes)
        if t.capture is not None and (symbolic_shapes is None or count):
            self.compiles += 1
        return t

    def _not_full(self, reason):
        """musa.compile(fullgraph=True) refuses a capture that is not one
        graph (a graph break, or a call that would run eagerly)."""
        raise RuntimeError(f"[compile] fullgraph=True, but {self._name} is not one graph: "
                           f"{reason}")

    def _run_eagerly(self, entry, reason, out):
        """Mark the entry eager (one warning, naming why); returns out."""
        self._fast = None  # the entries change
        entry.eager, entry.reason = True, reason
        warnings.warn(f"musa.jit: {self._name} runs eagerly: {reason}", RuntimeWarning,
                      stacklevel=4)
        return out

    def _lookup(self, spec, leaves):
        """(key, entry or None) for a call, following a by_size marker to
        the entry filed under the call's exact sizes."""
        key = self._key(spec, leaves, leaf_names(self._fn, spec) if self.config.dynamic else {})
        entry = self._cache.get(key)
        if entry is not None and entry.by_size:
            key = self._key(spec, leaves, {}, merge_dynamic=False)
            entry = self._cache.get(key)
        return key, entry

    def _capture(self, key, leaves, spec, args, kwargs):
        """Capture this call into a new entry and file it once complete: a
        capture that raises (an error or Ctrl-C in the function) leaves the
        cache as it was. Returns the call's result: eager's when traced, the
        new plan's when captured symbolically (Config.capture). Called with
        the lock held."""
        self._fast = None  # the entries change
        entry = Entry()
        self._saved_call = (spec, [(tuple(t.shape), t.dtype) for t in leaves])
        cap, symbolic = None, False
        if self._symbolic_first():
            with _capture.collect() as collected:
                try:
                    t = self._trace(leaves, spec, [tuple(x.shape) for x in leaves], count=True)
                except Exception as e:  # e.g. a host read in a callee: traced below, where
                    t = Trace(None, None, str(e))  # an error of the function's own recurs
            if t.capture is not None and not t.capture.breaks:
                cap, out, reason, symbolic = t.capture, None, None, True
            elif self.config.capture == "symbolic":
                cap, out, reason = None, None, t.reason or "it reads tensor values on the host"
            elif self._fullgraph:  # before tracing: nothing has run
                self._not_full(f"capturing it without running it stopped at: "
                               f"{t.reason or 'a host read'} (a host read such as t.item(), "
                               f"bool(t) or `if t > 0:` cuts the graph)")
            else:
                log.warning("musa.jit: %s: symbolic capture not possible (%s); tracing it",
                            self._name, t.reason or "it reads tensor values on the host")
        if not symbolic and self.config.capture != "symbolic":
            if len(leaves) > 1 and overlapping(leaves):
                # a trace runs the function on contiguous copies of its
                # arguments, where a write into one would not reach another
                return self._run_overlapping(args, kwargs, "needs tracing, and ")
            with _capture.collect() as collected:
                cap, out, reason = self._trace(leaves, spec)
        changed = _capture.changed_fixed(collected.fixed)
        if changed:
            if symbolic:
                cap.graph.restore_grads()
            what, then, now = changed[0]
            raise RuntimeError(
                f"[jit] {self._name}: {what} changed during the call ({then!r} -> {now!r}) "
                f"after the step that reads it was recorded; a compiled call runs only the "
                f"recorded ops and would not change it again (an lr scheduler's step() "
                f"inside the compiled function?). Make the change outside it: "
                f"loss = step(x, y); scheduler.step()")
        key = self._guard_key(key, collected.guards)
        try:
            out = self._compile_capture(entry, key, cap, out, reason, leaves, spec, args, kwargs)
        except BaseException:  # e.g. MemoryError: over Config.memory_budget
            if symbolic:
                cap.graph.restore_grads()
            raise
        # what planning freed (graphs, the builder's tables) goes back to the
        # system before the plan's block is allocated above it: the MLP's
        # step peaked 0.9 MiB lower, GPT-tiny's under a memory_budget 0.6
        _C._alloc_trim()
        if symbolic:
            # the function never really ran: leaves get their .grad back (the
            # symbolic backward left meta tensors there), then the call runs
            cap.graph.restore_grads()
            if entry.eager:  # compiling failed: the call still has to happen
                return self._fn(*args, **kwargs)
            return self._run(entry, args, kwargs, leaves, spec)
        return out

    def _compile_capture(self, entry, key, cap, out, reason, leaves, spec, args, kwargs):
        """Plan a capture into entry and file it; returns the call's result
        where it is known already (traced or run eagerly)."""
        by_size = False
        if self._fullgraph and (cap is None or cap.breaks):
            self._not_full(reason or "it reads tensor values on the host")
        if cap is None:
            out = self._run_eagerly(entry, reason, out)
            if self.config.capture == "symbolic":  # nothing ran for real yet
                out = self._fn(*args, **kwargs)
        else:
            entry.writes_args = cap.writes_args
            try:
                if needs_tape_node(cap):
                    if key.merges_dynamic and self._setup_dynamic(entry, cap, leaves, spec):
                        # one capture for every size: a forward and backward per size
                        entry.train = DynamicTraining(entry.dynamic, leaves, self.config,
                                                      self._name)
                        entry.dynamic = None
                        node = entry.train.node_for(leaves, tuple(tuple(t.shape)
                                                                  for t in leaves))
                        self._last = node.fwd
                    else:
                        entry.train = TrainingNode(cap, leaves, self.config, self._name)
                        self._last, by_size = entry.train.fwd, True
            except Unsupported as e:
                if self._fullgraph:
                    self._not_full(str(e))
                out = self._run_eagerly(entry, str(e), out)
            if not entry.train and not entry.eager:
                if not (key.merges_dynamic and not cap.breaks and
                        self._setup_dynamic(entry, cap, leaves, spec)):
                    entry.root = build_segments(cap, 0, self.config, set())[0]
                    self._last, by_size = entry.root, True
        self._file(entry, key, leaves, by_size)
        return out

    def _symbolic_first(self):
        """Whether to capture symbolically first (Config.capture)."""
        mode = self.config.capture
        return mode == "symbolic" or (mode == "auto" and not reads_host(self._fn))

    def _file(self, entry, key, leaves, by_size):
        """File a complete entry. Plans made for this call's exact sizes
        (by_size) under a key that merged dynamic dims (the capture could not
        use them) go under the exact sizes, with a by_size marker under the
        merged key."""
        self._fast = None  # the entries change
        if by_size and key.merges_dynamic:
            self._cache[key._replace(signature=signature(leaves))] = entry
            self._cache[key] = Entry(by_size=True)
        else:
            self._cache[key] = entry

    def _guard_key(self, key, registered):
        """The key with the Python guards its capture registered, at the
        values the capture saw (new guards join the function's list)."""
        if not registered:
            return key
        for k, g in registered.items():
            self._guards.setdefault(k, g)
        known = dict(zip(list(self._guards)[:len(key.guards)], key.guards))
        values = tuple(registered[k].value if k in registered else
                       known[k] if k in known else self._guards[k].fn()
                       for k in self._guards)
        return key._replace(guards=values)

    def _guard_miss(self, entry, miss, args, kwargs, leaves, spec):
        """A host read gave an outcome no capture has seen: capture again and
        merge (logged), or raise when retracing is off."""
        self._fast = None  # the entries change
        read = miss.seg.read
        seen = describe_outcome(read.kind, miss.outcome)
        known = ", ".join(describe_outcome(read.kind, k) for k in miss.seg.children)
        if not self._retrace:
            raise RuntimeError(f"[jit] guard failed in {self._name}: the value read on the "
                               f"host at {read.loc} is {seen}, but the graph was traced for "
                               f"{known}; retrace with the Python function")
        self._note_recompile(f"guard at {read.loc}: the value read on the host is {seen} "
                             f"(compiled for {known})")
        if self._eager_all:
            return self._fn(*args, **kwargs)
        cap, out, reason = self._trace(leaves, spec)
        if cap is None:
            return self._run_eagerly(entry, reason, out)
        root = merge(entry.root, cap, self.config)
        if root is not None and root is not entry.root:
            log.warning("musa.jit: %s recorded different ops for the same inputs; "
                        "keeping only the latest capture", self._name)
        if root is not None:
            entry.root = self._last = root
        return out

    # -- dynamic dims --

    def _setup_dynamic(self, entry, cap, leaves, spec):
        """Capture once more, symbolically, with every dynamic dim one larger
        (or smaller): integer attributes that moved follow the dim. Returns
        whether the entry is now a dynamic variant."""
        names = leaf_names(self._fn, spec)
        found = probe(leaves, names, self.config.dynamic)
        if found is None:
            return False
        def capture_at(shapes):
            c, _, why = self._trace(leaves, spec, symbolic_shapes=shapes)
            return (c.graph if c is not None else None), why
        g1, slopes, reason = check_slopes(capture_at, cap.graph, found, leaves, names,
                                          self.config.dynamic)
        if slopes is None:
            log.warning("musa.jit: %s: dynamic dims not usable (%s); compiling per size",
                        self._name, reason)
            return False
        entry.dynamic = DynamicVariant(cap, g1, found, slopes, self.config.dynamic, names)
        return True

    def _run_dynamic(self, variant, args, kwargs, leaves, inputs):
        """Run the plan for these sizes, specialising it on first use."""
        shapes = tuple(tuple(t.shape) for t in inputs)
        seg = variant.plans.get(shapes)
        if seg is None:
            size = variant.size(shapes)
            if size is None:
                return self._fn(*args, **kwargs)
            try:
                g = variant.respecialize(shapes, size)
            except (ValueError, TypeError, RuntimeError) as e:
                self._note_recompile(f"dynamic dims of {self._name} do not hold at {shapes}: {e}")
                return self._fn(*args, **kwargs)
            seg = variant.add_plan(shapes, g, self.config)
        self._last = seg  # memory_plan() and the other views describe the size last run
        drop_grads(seg.outputs)
        res = seg.plan.run(inputs)
        copy_back(leaves, inputs, res)
        return finish(seg.outputs, res, leaves)
