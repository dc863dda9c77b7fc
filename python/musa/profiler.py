"""musa.profiler: what ran, where the time went, as PyTorch's profiler shows it.

    with musa.profiler.profile(record_shapes=True, profile_memory=True) as prof:
        with musa.profiler.record_function("train step"):
            step(x, y)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10))
    prof.export_chrome_trace("trace.json")       # Perfetto, chrome://tracing

``musa.Profiler()`` is the same profiler with the defaults. It records, on
every thread: each eagerly dispatched op (with its input dtypes and shapes
under ``record_shapes``), each instruction of a compiled plan (a fused group
is named by its ops: ``fused(add, mul, relu)``), each autograd node's
backward (``MulBackward``), ``record_function`` ranges, and under
``profile_memory`` each allocation and free with the allocator's running
total; ``with_stack`` gives ops and ranges the line that called them, and
a plan's instructions the line that made them. The recorder is C (``musa_profiler_*`` in musa.h; ``musa-run
--profile`` writes the same trace). One profiler runs at a time.
"""
import collections
import os

from . import _C

# events' source lines name the first frame outside the musa package (the
# same hook the jit's recorded nodes use)
_C._jit_location(os.path.dirname(__file__) + os.sep)  # as imported, like musa.jit

__all__ = ["profile", "record_function", "ProfilerActivity", "FunctionEvent", "EventList"]

_KINDS = ("op", "plan", "backward", "user_annotation", "memory", "stream")
_SHAPES, _MEMORY, _STACK = 1, 2, 4


class ProfilerActivity:
    """The activities a profile can record; musa runs on the CPU only."""
    CPU = "cpu"


class FunctionEvent(collections.namedtuple(
        "FunctionEvent",
        "name kind thread start_us duration_us input_shapes bytes total_bytes stack")):
    """One recorded event. kind is "op", "plan", "backward",
    "user_annotation", "memory" or "stream" (an op or compiled run executed
    by a stream's worker, on that stream's lane); times are microseconds from the start;
    bytes (memory events) is positive for an allocation and negative for a
    free, total_bytes the allocator's current bytes after it; stack (with
    with_stack, for ops and ranges) the caller's line, ["train.py:12"]: the
    innermost frame outside musa; for a plan instruction, the line that made
    its (last) op when the function was captured. input_shapes (with
    record_shapes) lists an op's inputs, "float32[64, 128], int64[64]"; a
    plan instruction's are its (last) op's."""

    @property
    def end_us(self):
        return self.start_us + self.duration_us


class FunctionEventAvg:
    """Events of one name (and input shapes, when grouped by them)."""

    def __init__(self, key, kind, input_shapes="", location=""):
        self.key, self.kind, self.input_shapes = key, kind, input_shapes
        self.location = location
        self.count = 0
        self.cpu_time_total = 0.0       # us, children included
        self.self_cpu_time_total = 0.0  # us, children excluded
        self.cpu_memory_usage = 0       # bytes allocated minus freed, children included
        self.self_cpu_memory_usage = 0

    @property
    def cpu_time(self):
        return self.cpu_time_total / self.count if self.count else 0.0

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key!r} count={self.count} "
                f"cpu_time_total={self.cpu_time_total:.3f}us "
                f"self_cpu_time_total={self.self_cpu_time_total:.3f}us>")


_SORT_KEYS = {
    "cpu_time_total": lambda a: a.cpu_time_total,
    "self_cpu_time_total": lambda a: a.self_cpu_time_total,
    "cpu_time": lambda a: a.cpu_time,
    "count": lambda a: a.count,
    "cpu_memory_usage": lambda a: a.cpu_memory_usage,
    "self_cpu_memory_usage": lambda a: a.self_cpu_memory_usage,
}


def _fmt_time(us):
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _fmt_mem(b):
    sign, b = ("-" if b < 0 else ""), abs(b)
    for unit, size in (("Gb", 1 << 30), ("Mb", 1 << 20), ("Kb", 1 << 10)):
        if b >= size:
            return f"{sign}{b / size:.2f} {unit}"
    return f"{sign}{b} b"


class EventList(list):
    """key_averages()'s rows, with PyTorch's table."""

    def __init__(self, rows, self_total, memory):
        super().__init__(rows)
        self._self_total, self._memory = self_total, memory

    def table(self, sort_by="cpu_time_total", row_limit=100, header=None):
        if sort_by not in _SORT_KEYS:
            raise ValueError(f"[profiler] sort_by must be one of {sorted(_SORT_KEYS)}, "
                             f"got {sort_by!r}")
        rows = sorted(self, key=_SORT_KEYS[sort_by], reverse=True)
        if row_limit is not None and row_limit >= 0:
            rows = rows[:row_limit]
        shapes = any(r.input_shapes for r in rows)
        where = any(r.location for r in rows)
        total = self._self_total or 1.0
        cols = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
        if self._memory:
            cols += ["CPU Mem", "Self CPU Mem"]
        cols += ["# of Calls"]
        if shapes:
            cols += ["Input Shapes"]
        if where:
            cols += ["Source Location"]
        body = []
        for r in rows:
            line = [r.key, f"{100 * r.self_cpu_time_total / total:.2f}%",
                    _fmt_time(r.self_cpu_time_total), f"{100 * r.cpu_time_total / total:.2f}%",
                    _fmt_time(r.cpu_time_total), _fmt_time(r.cpu_time)]
            if self._memory:
                line += [_fmt_mem(r.cpu_memory_usage), _fmt_mem(r.self_cpu_memory_usage)]
            line += [str(r.count)]
            if shapes:
                line += [r.input_shapes]
            if where:
                line += [r.location]
            body.append(line)
        widths = [max([len(c)] + [len(b[i]) for b in body]) for i, c in enumerate(cols)]
        rule = "  ".join("-" * w for w in widths)
        fmt = lambda cells: "  ".join(  # noqa: E731  (names left, numbers right)
            c.ljust(w) if i == 0 or cols[i] in ("Input Shapes", "Source Location") else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths)))
        out = ([header] if header else []) + [rule, fmt(cols), rule] + [fmt(b) for b in body]
        out += [rule, f"Self CPU time total: {_fmt_time(self._self_total)}"]
        return "\n".join(out) + "\n"

    def __str__(self):
        return self.table()


class profile:
    """Record what runs inside ``with`` (or between start() and stop()).

    activities: accepted for PyTorch's API; musa records its CPU work.
    record_shapes: each op event carries its inputs' dtypes and shapes (a
        compiled plan's instruction: its last op's).
    profile_memory: allocations and frees, with the running total.
    with_stack: each op and range carries the line that called it (the
        innermost frame outside musa; a plan's instruction, the line that
        made it), as key_averages(group_by_stack_n=1) groups them.
    """

    def __init__(self, activities=None, record_shapes=False, profile_memory=False,
                 with_stack=False):
        if activities is not None:
            bad = [a for a in activities if a != ProfilerActivity.CPU]
            if bad:
                raise ValueError(f"[profiler] musa records the CPU only; got activities {bad}")
        self.record_shapes, self.profile_memory = bool(record_shapes), bool(profile_memory)
        self.with_stack = bool(with_stack)
        self._events = None
        self._running = False

    def start(self):
        _C._profiler_start((_SHAPES if self.record_shapes else 0) |
                           (_MEMORY if self.profile_memory else 0) |
                           (_STACK if self.with_stack else 0))
        self._running, self._events = True, None
        return self

    def stop(self):
        if not self._running:
            raise RuntimeError("[profiler] this profiler is not running")
        self._running = False
        _C._profiler_stop()
        self._events = [FunctionEvent(n, _KINDS[k], tid, s / 1e3, d / 1e3, det, b, tot,
                                      [loc] if loc else [])
                        for n, det, k, tid, s, d, b, tot, loc in _C._profiler_events()]

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    def _finished(self, what):
        if self._running:
            raise RuntimeError(f"[profiler] {what}: stop the profiler first (leave the with block)")
        if self._events is None:
            raise RuntimeError(f"[profiler] {what}: nothing was recorded (never started)")
        return self._events

    def events(self):
        """Every event, in start order (an enclosing event first)."""
        return list(self._finished("events"))

    def export_chrome_trace(self, path):
        """Write the session as Trace Event Format JSON (Perfetto, chrome://tracing)."""
        self._finished("export_chrome_trace")
        _C._profiler_write_chrome_trace(path)

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        """Totals per event name (and input shapes, and with
        group_by_stack_n > 0 the calling line): counts, total and self
        time, and with profile_memory the memory each allocated."""
        events = self._finished("key_averages")
        rows = {}
        # self time and memory by nesting: per thread, an event's children
        # are the events that start inside it (events are in start order)
        stacks = collections.defaultdict(list)  # tid -> [[event, row, child_us, child_mem]]

        def close(frame):
            e, row, child_us, child_mem, self_mem = frame
            row.self_cpu_time_total += e.duration_us - child_us
            row.self_cpu_memory_usage += self_mem
            row.cpu_memory_usage += self_mem + child_mem
            return self_mem + child_mem

        def pop_until(stack, t):
            while stack and stack[-1][0].end_us <= t:
                mem = close(stack.pop())
                if stack:  # (its time was added to the parent's when it was pushed)
                    stack[-1][3] += mem

        self_total = 0.0
        for e in events:
            stack = stacks[e.thread]
            pop_until(stack, e.start_us)
            if e.kind == "memory":
                if stack:
                    stack[-1][4] += e.bytes
                continue
            name = e.name + " (stream)" if e.kind == "stream" else e.name
            key = (name, e.input_shapes if group_by_input_shape else "",
                   e.stack[0] if group_by_stack_n > 0 and e.stack else "")
            row = rows.get(key)
            if row is None:
                row = rows[key] = FunctionEventAvg(name, e.kind, key[1], key[2])
            row.count += 1
            row.cpu_time_total += e.duration_us
            if stack:
                stack[-1][2] += e.duration_us
            else:
                self_total += e.duration_us
            stack.append([e, row, 0.0, 0, 0])
        for stack in stacks.values():
            pop_until(stack, float("inf"))
        return EventList(rows.values(), self_total, self.profile_memory)


class record_function:
    """A named range in the profile: ``with record_function("load"):`` or
    as a decorator. Costs one C call when no profiler runs."""

    def __init__(self, name):
        if not isinstance(name, str):
            raise TypeError(f"[record_function] name must be a str, got {type(name).__name__}")
        self.name = name
        self._begin = 0

    def __enter__(self):
        self._begin = _C._range_begin()
        return self

    def __exit__(self, *exc):
        _C._range_end(self.name, self._begin)
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with record_function(self.name):
                return fn(*args, **kwargs)
        return wrapped
