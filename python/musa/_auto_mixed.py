"""musa.auto_mixed_graph: run a function or module eagerly or compiled
(musa.jit), chosen per function from its bytecode and from measurement, and
explained (docs/auto_mixed_graph.md).

The policy, in order:
1. Bytecode. The code of the function (and of the user functions and module
   forwards it reaches) is read with `dis`. Python side effects (print, I/O,
   global or nonlocal writes, attribute writes on objects other than self,
   mutation of outer containers), calls into other libraries (NumPy ...) and
   loops whose count depends on tensor values keep it dynamic: a compiled
   replay would skip the effect or the loop would recompile every call. Host
   reads and branches on tensor values are noted; musa.jit guards them (a
   compiled variant per branch), so they do not block.
2. Shapes. The first `warmup` calls run eagerly and are timed. If their
   argument shapes (or structure) differ, and no declared dynamic dim covers
   the change, it stays dynamic until the same signature repeats `warmup`
   times in a row.
3. Measurement. Then one compiled trial: the first compiled call (its
   compile cost), and `measure` more. It stays static only if the compiled
   calls are faster (by `min_speedup`) and the saving pays the compile cost
   back within `payback_calls` calls; otherwise it goes back to eager, once.
4. Watch. Static, a new signature makes musa.jit compile a variant; more
   than `max_variants` of them, or a capture that falls back to eager, sends
   it back to dynamic. At most `max_compiles` trials are made in all.

Every call returns what eager would (musa.jit's guarantee); each decision is
logged once (logger "musa.auto_mixed_graph") and kept for explain().
"""
import builtins
import collections
import dis
import functools
import linecache
import logging
import os
import statistics
import sys
import time
import types
import warnings

from . import _C

_log = logging.getLogger("musa.auto_mixed_graph")

__all__ = ["auto_mixed_graph", "AutoMixedGraph", "Finding"]

Finding = collections.namedtuple("Finding", ["kind", "file", "line", "detail", "blocking"])

# findings that keep a function dynamic
_BLOCKING = {"side_effect", "global_write", "outer_mutation", "foreign_library", "loop_on_values"}
_HOST_READS = {"item", "tolist", "numpy", "__bool__", "__int__", "__float__", "__index__"}
_HOST_BUILTINS = {"bool", "int", "float"}
_EFFECT_BUILTINS = {"print", "open", "input", "exec", "eval", "breakpoint"}
_MUTATORS = {"append", "extend", "insert", "add", "update", "pop", "remove", "clear", "setdefault",
             "__setitem__", "write", "writelines"}
_PURE_BUILTINS = {"len", "isinstance", "hasattr", "getattr", "range", "enumerate", "zip", "min", "max",
                  "abs", "type", "callable", "tuple", "list", "dict", "sorted", "reversed", "any", "all"}
_SKIP_PREFIXES = (os.path.dirname(os.path.abspath(__file__)) + os.sep, os.path.dirname(os.__file__) + os.sep)


# ---- bytecode analysis ----

def _user_code(code):
    f = os.path.abspath(code.co_filename)
    return not f.startswith(_SKIP_PREFIXES) and "site-packages" not in f and "dist-packages" not in f


def _code_of(obj):
    """(code, the names it can see: globals, and its closure's cells)."""
    obj = getattr(obj, "__func__", obj)
    while isinstance(obj, functools.partial):
        obj = obj.func
    obj = getattr(obj, "__wrapped__", obj)
    code = getattr(obj, "__code__", None)
    names = dict(getattr(obj, "__globals__", {}))
    for name, cell in zip(code.co_freevars if code else (), getattr(obj, "__closure__", None) or ()):
        try:
            names[name] = cell.cell_contents
        except ValueError:  # an empty cell
            pass
    return code, names


class _Scanner:
    """Findings of the code objects reachable from a function or module."""

    def __init__(self):
        self.findings, self.seen = [], set()

    def add(self, kind, code, line, detail):
        key = (kind, code.co_filename, line, detail)
        if key not in self.seen:
            self.seen.add(key)
            self.findings.append(Finding(kind, code.co_filename, line, detail, kind in _BLOCKING))

    def scan_callable(self, obj, depth=0):
        code, globs = _code_of(obj)
        if code is not None and _user_code(code):
            self.scan(code, globs, depth)

    def scan(self, code, globs, depth=0, is_method=None, cls=None):
        if ("code", code) in self.seen:
            return
        self.seen.add(("code", code))
        instrs = list(dis.get_instructions(code))
        line = code.co_firstlineno
        is_method = code.co_varnames[:1] == ("self",) if is_method is None else is_method
        stmt_start = 0
        for i, ins in enumerate(instrs):
            if ins.starts_line is not None:
                line, stmt_start = ins.starts_line, i
            op, arg = ins.opname, ins.argval
            prev = instrs[i - 1] if i else None
            if op in ("LOAD_ATTR", "LOAD_METHOD") and arg in _HOST_READS:
                self._host_read(code, line, f".{arg}() reads a tensor on the host")
            elif op in ("LOAD_ATTR", "LOAD_METHOD") and cls is not None and prev is not None and \
                    prev.opname == "LOAD_FAST" and prev.argval == "self" and depth < 4 and \
                    isinstance(getattr(cls, arg, None), types.FunctionType):
                method_code, method_globs = _code_of(getattr(cls, arg))  # self.helper(...): read it too
                if method_code is not None and _user_code(method_code):
                    self.scan(method_code, method_globs, depth + 1, True, cls)
            elif op == "LOAD_GLOBAL":
                name = arg
                target = globs.get(name, getattr(builtins, name, None))
                if name in _EFFECT_BUILTINS and name not in globs:
                    self.add("side_effect", code, line, f"{name}() runs on every call in Python")
                elif name in _HOST_BUILTINS and name not in globs:
                    self._host_read(code, line, f"{name}(...) reads a value on the host (a tensor's, if it is one)")
                elif isinstance(target, types.ModuleType) and _foreign(target):
                    self.add("foreign_library", code, line, f"calls into {target.__name__} "
                             f"(tensors passed to it are read on the host, outside any graph)")
                elif isinstance(target, (types.FunctionType, functools.partial)) and depth < 4:
                    self.scan_callable(target, depth + 1)
                nxt = instrs[i + 1] if i + 1 < len(instrs) else None
                if nxt is not None and nxt.opname in ("LOAD_METHOD", "LOAD_ATTR") and nxt.argval in _MUTATORS \
                        and not isinstance(target, types.ModuleType):
                    self.add("outer_mutation", code, line, f"{name}.{nxt.argval}(...) changes an object "
                             f"outside the function")
            elif op in ("LOAD_DEREF", "LOAD_CLASSDEREF"):
                if isinstance(globs.get(arg), types.ModuleType) and _foreign(globs[arg]):
                    self.add("foreign_library", code, line, f"calls into {globs[arg].__name__} "
                             f"(tensors passed to it are read on the host, outside any graph)")
                nxt = instrs[i + 1] if i + 1 < len(instrs) else None
                if nxt is not None and nxt.opname in ("LOAD_METHOD", "LOAD_ATTR") and nxt.argval in _MUTATORS:
                    self.add("outer_mutation", code, line, f"{arg}.{nxt.argval}(...) changes an object "
                             f"outside the function")
            elif op == "STORE_GLOBAL":
                self.add("global_write", code, line, f"writes the global {arg!r}")
            elif op == "STORE_DEREF" and arg in code.co_freevars:
                self.add("global_write", code, line, f"writes the enclosing function's {arg!r}")
            elif op == "STORE_ATTR":
                owner = prev.argval if prev is not None and prev.opname == "LOAD_FAST" else None
                if not (is_method and owner == "self"):
                    self.add("side_effect", code, line, f"sets the attribute {arg!r} of "
                             f"{owner or 'an object'} other than self")
            elif op == "STORE_SUBSCR":
                # the stack is value, container, key: the container's load is
                # just before a one-instruction key
                for back in instrs[max(stmt_start, i - 2):i]:
                    if back.opname in ("LOAD_GLOBAL", "LOAD_DEREF") and \
                            not isinstance(globs.get(back.argval), (types.ModuleType, type)):
                        self.add("outer_mutation", code, line, f"item assignment into {back.argval}")
                        break
            elif op.startswith(("POP_JUMP", "JUMP_IF")) and "NONE" not in op:
                cond = instrs[stmt_start:i]
                calls = [c for c in cond if c.opname in ("CALL", "CALL_FUNCTION", "CALL_METHOD", "PRECALL")]
                names = {c.argval for c in cond if c.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
                if calls and any(c.opname == "COMPARE_OP" for c in cond) and not names & _PURE_BUILTINS:
                    self._branch(code, line)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                self.scan(const, globs, depth, False, cls)

    def _source(self, code, line):
        return linecache.getline(code.co_filename, line).strip()

    def _host_read(self, code, line, detail):
        if self._source(code, line).startswith(("while ", "for ")):
            self.add("loop_on_values", code, line, "a loop whose count depends on values read on the host")
        else:
            self.add("host_read", code, line, detail)

    def _branch(self, code, line):
        text = self._source(code, line)
        if text.startswith("while "):
            self.add("loop_on_values", code, line, "a while loop on a computed value")
        else:
            self.add("data_branch", code, line, "a branch on a computed value (a guard: one compiled "
                     "variant per outcome)")


def _foreign(module):
    name = module.__name__.split(".")[0]
    return name not in ("musa", "math", "torch", "functools", "itertools", "operator", "collections",
                        "typing", "warnings", "logging", "builtins")


def analyze(target):
    """The findings of a function's (or a module's forwards') bytecode."""
    from .nn import Module
    sc = _Scanner()
    if isinstance(target, Module):
        for m in target.modules():
            fwd = type(m).forward
            code, globs = _code_of(fwd)
            if code is not None and _user_code(code):
                sc.scan(code, globs, 0, True, type(m))
    else:
        sc.scan_callable(target)
    return sc.findings


# ---- argument signatures ----

def _signature(obj, depth=0):
    """(structure, shapes): the argument tree's shape, and its tensors' shapes
    and dtypes. Numbers and strings count by value (musa.jit specialises on
    them); other objects by type and identity."""
    if isinstance(obj, _C.Tensor):
        return "T", ((tuple(obj.shape), obj.dtype),)
    if depth > 6:
        return "...", ()
    if isinstance(obj, (list, tuple)):
        parts = [_signature(o, depth + 1) for o in obj]
        return ("(" if isinstance(obj, tuple) else "[") + ",".join(p[0] for p in parts) + ")", \
            tuple(s for p in parts for s in p[1])
    if isinstance(obj, dict):
        parts = [(k, _signature(v, depth + 1)) for k, v in obj.items()]
        return "{" + ",".join(f"{k}:{p[0]}" for k, p in parts) + "}", tuple(s for _, p in parts for s in p[1])
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return repr(obj), ()
    from .nn import Module
    if isinstance(obj, Module):
        return f"<{type(obj).__name__}>", ()
    return f"<{type(obj).__name__}@{id(obj):x}>", ()


_FLAT = {}  # tensors-only calls: n -> their structure string


def _call_signature(args, kwargs):
    """_signature((args, kwargs)), quicker for the common call of plain
    tensors."""
    if not kwargs and all(type(a) is _C.Tensor for a in args):
        n = len(args)
        structure = _FLAT.get(n)
        if structure is None:
            structure = _FLAT[n] = "((" + ",".join(["T"] * n) + "),{})"
        return structure, tuple((tuple(a.shape), a.dtype) for a in args)
    return _signature((args, kwargs))


def _covered(a, b, dynamic):
    """Whether signatures a and b differ only in declared dynamic dims."""
    if a[0] != b[0] or len(a[1]) != len(b[1]) or not dynamic:
        return a == b
    for (sa, da), (sb, db) in zip(a[1], b[1]):
        if da != db or len(sa) != len(sb):
            return False
        if any(x != y and i not in dynamic for i, (x, y) in enumerate(zip(sa, sb))):
            return False
    return True


# ---- the wrapper ----

class AutoMixedGraph:
    """A callable that runs its target eagerly or compiled; explain() says
    which and why."""

    def __init__(self, target, *, warmup=3, measure=3, min_speedup=1.05, payback_calls=1000, max_variants=3,
                 max_compiles=3, dynamic=None, config=None):
        from .nn import Module
        if not callable(target):
            raise TypeError(f"[auto_mixed_graph] expected a function or a module, got {type(target).__name__}")
        for name, v in (("warmup", warmup), ("measure", measure), ("max_variants", max_variants),
                        ("max_compiles", max_compiles), ("payback_calls", payback_calls)):
            if isinstance(v, bool) or not isinstance(v, int) or v < (0 if name == "max_compiles" else 1):
                raise ValueError(f"[auto_mixed_graph] {name} must be a positive int, got {v!r}")
        if not isinstance(min_speedup, (int, float)) or min_speedup <= 0:
            raise ValueError(f"[auto_mixed_graph] min_speedup must be a positive number, got {min_speedup!r}")
        self._target = target
        self._is_module = isinstance(target, Module)
        self._warmup, self._measure, self._min_speedup = warmup, measure, float(min_speedup)
        self._payback, self._max_variants, self._max_compiles = payback_calls, max_variants, max_compiles
        # dynamic: musa.jit's {argument: dims}; a change in those dims is not a new shape
        self._jit_dynamic = dynamic
        self._dynamic = {d for dims in (dynamic or {}).values() for d in ([dims] if isinstance(dims, int) else dims)}
        self._config = config
        self._waiting = False  # dynamic because shapes changed: try again once they settle
        self._clock = time.perf_counter  # (tests substitute a clock)
        self.findings = analyze(target)
        self._blocking = [f for f in self.findings if f.blocking]
        self.mode = "dynamic" if self._blocking else "warmup"
        self.calls = 0
        self.compiles = 0
        self._compiled = None
        self._signatures = collections.Counter()
        self._recent = collections.deque(maxlen=64)
        self._eager_times, self._compiled_times = [], []
        self._compile_cost = None
        self._trial_left = 0
        self._static_sigs = set()  # the signatures compiled (or covered by dynamic dims)
        self._fast = set()  # those that ran compiled without a capture warning
        self.decisions = []
        self._said = set()
        if self._blocking:
            f = self._blocking[0]
            self._decide("dynamic", f"the bytecode has {len(self._blocking)} finding(s) that a compiled replay "
                         f"would not reproduce; first: {f.kind} at {_where(f)}: {f.detail}")
        functools.update_wrapper(self, target if not self._is_module else type(target).forward, updated=())

    # -- decisions --

    def _decide(self, mode, reason):
        self.mode = mode
        if reason not in self._said:
            self._said.add(reason)
            self.decisions.append((self.calls, mode, reason))
            _log.info("%s: %s (%s)", self._name(), mode, reason)

    def _name(self):
        return type(self._target).__name__ if self._is_module else getattr(self._target, "__qualname__",
                                                                             repr(self._target))

    # -- running --

    def __call__(self, *args, **kwargs):
        self.calls += 1
        mode = self.mode
        if mode == "dynamic" and not self._waiting:  # decided: nothing to watch
            return self._target(*args, **kwargs)
        sig = _call_signature(args, kwargs)
        if mode == "static" and sig in self._fast:  # a signature that ran compiled before
            self._signatures[sig] += 1
            return self._compiled(*args, **kwargs)
        self._signatures[sig] += 1
        self._recent.append(sig)
        if self.mode in ("warmup", "dynamic"):
            out = self._timed_eager(args, kwargs)
            self._after_eager(sig)
            return out
        if self.mode == "trial":
            return self._trial_call(sig, args, kwargs)
        return self._static_call(sig, args, kwargs)

    def _timed_eager(self, args, kwargs):
        t0 = self._clock()
        out = self._target(*args, **kwargs)
        self._eager_times.append(self._clock() - t0)
        del self._eager_times[:-32]
        return out

    def _stable(self):
        """Whether the last `warmup` calls had one signature (declared dynamic
        dims aside)."""
        if len(self._recent) < self._warmup:
            return False
        last = list(self._recent)[-self._warmup:]
        return all(_covered(last[0], s, self._dynamic) for s in last[1:])

    def _after_eager(self, sig):
        if self._blocking or self.compiles >= self._max_compiles:
            return
        if self.mode == "warmup" and len(self._recent) >= self._warmup and not self._stable():
            first = list(self._recent)[-self._warmup:]
            n = len(set(first))
            what = "shapes" if len({sig[0] for sig in first}) == 1 else "structure (or objects)"
            self._waiting = True
            self._decide("dynamic", f"the argument {what} changed: {n} signatures in the first {self._warmup} "
                         f"calls (declare dynamic= dims if one dim varies)")
            return
        if self._stable() and (self.mode == "warmup" or self._waiting):
            self._waiting = False
            self._start_trial()

    def _start_trial(self):
        from . import jit
        if self._compiled is None:
            if self._is_module:
                fn = jit._module_forward(self._target)
            else:
                fn = self._target
            self._compiled = jit.jit(fn, config=self._config, dynamic=self._jit_dynamic)
        self.compiles += 1
        self._compiled_times, self._compile_cost = [], None
        self._trial_left = self._measure + 1
        self.mode = "trial"

    def _run_compiled(self, args, kwargs):
        """The compiled call, timed; (out, whether musa.jit ran it eagerly)."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            t0 = self._clock()
            out = self._compiled(*args, **kwargs)
            dt = self._clock() - t0
        fell_back = [str(w.message) for w in caught if "runs eagerly" in str(w.message)]
        for w in caught:
            if "runs eagerly" not in str(w.message):
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return out, dt, fell_back

    def _trial_call(self, sig, args, kwargs):
        out, dt, fell_back = self._run_compiled(args, kwargs)
        if fell_back:
            self._static_sigs.add(sig)
            self._decide("dynamic", f"musa.jit could not capture it: {fell_back[0]}")
            return out
        if self._compile_cost is None:
            eager = statistics.median(self._eager_times)
            self._compile_cost = max(dt - eager, 0.0)
        else:
            self._compiled_times.append(dt)
        self._trial_left -= 1
        if self._trial_left == 0:
            self._judge(sig)
        return out

    def _judge(self, sig):
        eager = statistics.median(self._eager_times[-max(self._warmup, 3):])
        compiled = statistics.median(self._compiled_times)
        self._static_sigs.add(sig)
        gain = eager - compiled
        if compiled * self._min_speedup > eager:
            self._decide("dynamic", f"compiled calls are not faster: {compiled * 1e6:.1f} us against "
                         f"{eager * 1e6:.1f} us eager (needs {self._min_speedup:.2f}x)")
            return
        payback = self._compile_cost / gain
        if payback > self._payback:
            self._decide("dynamic", f"the compile cost ({self._compile_cost * 1e3:.1f} ms) would take "
                         f"{payback:.0f} calls to pay back (limit {self._payback})")
            return
        self._decide("static", f"compiled calls take {compiled * 1e6:.1f} us against {eager * 1e6:.1f} us "
                     f"eager ({eager / compiled:.2f}x); the compile cost "
                     f"({self._compile_cost * 1e3:.1f} ms) pays back in {payback:.0f} calls")

    def _static_call(self, sig, args, kwargs):
        if not any(_covered(sig, s, self._dynamic) for s in self._static_sigs):
            self._static_sigs.add(sig)
            if len(self._static_sigs) > self._max_variants:
                self._decide("dynamic", f"the argument shapes keep changing: {len(self._static_sigs)} "
                             f"signatures (limit {self._max_variants} compiled variants)")
                return self._timed_eager(args, kwargs)
        out, dt, fell_back = self._run_compiled(args, kwargs)
        if fell_back:
            self._decide("dynamic", f"musa.jit fell back to eager: {fell_back[0]}")
        else:
            self._fast.add(sig)  # compiled (or captured) now: later calls go straight through
            self._compiled_times.append(dt)
            del self._compiled_times[:-32]
        return out

    # -- reporting --

    def explain(self):
        """A readable report: the mode, the findings, the times, the shapes
        seen and every decision with its reason."""
        lines = [f"auto_mixed_graph({self._name()}): {self.mode} after {self.calls} call(s), "
                 f"{self.compiles} compile trial(s)"]
        lines.append("findings:" if self.findings else "findings: none")
        for f in self.findings:
            lines.append(f"  {'BLOCKS ' if f.blocking else ''}{f.kind} at {_where(f)}: {f.detail}")
            src = linecache.getline(f.file, f.line).strip()
            if src:
                lines.append(f"      {src}")
        if self._eager_times:
            lines.append(f"eager: median {statistics.median(self._eager_times) * 1e6:.1f} us over "
                         f"{len(self._eager_times)} call(s)")
        if self._compiled_times:
            lines.append(f"compiled: median {statistics.median(self._compiled_times) * 1e6:.1f} us over "
                         f"{len(self._compiled_times)} call(s)")
        if self._compile_cost is not None:
            lines.append(f"compile cost: {self._compile_cost * 1e3:.1f} ms")
        lines.append(f"signatures seen: {len(self._signatures)}")
        for (structure, shapes), n in self._signatures.most_common(5):
            shown = ", ".join(f"{tuple(s)}:{str(d).split('.')[-1]}" for s, d in shapes) or "-"
            lines.append(f"  {n} call(s): {shown}")
        lines.append("decisions:" if self.decisions else "decisions: none yet")
        for call, mode, reason in self.decisions:
            lines.append(f"  at call {call}: {mode}: {reason}")
        return "\n".join(lines)

    def __repr__(self):
        return f"AutoMixedGraph({self._name()}, mode={self.mode!r})"


def _where(f):
    return f"{os.path.basename(f.file)}:{f.line}"


def auto_mixed_graph(target=None, **options):
    """Run a function, module or training step eagerly or compiled, chosen
    from its bytecode and measured times: `auto_mixed_graph(fn)`,
    `@auto_mixed_graph` or `@auto_mixed_graph(warmup=5)`. See
    AutoMixedGraph for the options and explain() for its reasons."""
    if target is None:
        return lambda t: AutoMixedGraph(t, **options)
    return AutoMixedGraph(target, **options)
