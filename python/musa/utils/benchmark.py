"""musa.utils.benchmark: PyTorch's torch.utils.benchmark Timer and
Measurement, on Python's timeit.

    t = Timer("x @ y", globals={"x": a, "y": b}, num_threads=2)
    m = t.blocked_autorange(min_run_time=0.5)
    print(m.median, m.iqr)   # seconds per run

Timer runs stmt (after setup) with musa's thread count set to num_threads
for the measurement (and put back after). A Measurement holds the raw
times of its blocks, each of number_per_run runs: times are per run,
median, mean and iqr over them. Compare prints many Measurements as
PyTorch's does: a table per label, a row per sub_label (or statement) and
thread count, a column per description, the medians in one unit.
"""
import math
import statistics
import timeit as _timeit

__all__ = ["Timer", "Measurement", "Compare"]


def _fmt(seconds):
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if seconds >= scale or unit == "ns":
            return f"{seconds / scale:.2f} {unit}"


class Measurement:
    """The result of a Timer: raw_times[i] is the time of block i, which ran
    the statement number_per_run times."""

    def __init__(self, number_per_run, raw_times, task_spec):
        self.number_per_run = number_per_run
        self.raw_times = list(raw_times)
        self.task_spec = task_spec

    @property
    def times(self):
        """Seconds per run, one per block."""
        return [t / self.number_per_run for t in self.raw_times]

    @property
    def median(self):
        return statistics.median(self.times)

    @property
    def mean(self):
        return statistics.fmean(self.times)

    @property
    def iqr(self):
        """The interquartile range of the per-run times (0 for fewer than 2)."""
        t = sorted(self.times)
        if len(t) < 2:
            return 0.0
        q = statistics.quantiles(t, n=4, method="inclusive")
        return q[2] - q[0]

    @property
    def significant_figures(self):
        """Digits of the median the spread supports, 1 to 4, as PyTorch
        estimates them: the median over a 90% confidence interval (1.645
        standard deviations of the middle half of the times, over the
        square root of their count; at least 25 ns)."""
        t = sorted(self.times)
        mid = t[len(t) // 4:math.ceil(3 * len(t) / 4)]
        mean = statistics.fmean(mid)
        std = math.sqrt(statistics.fmean([(x - mean) ** 2 for x in mid]))
        ci = max(1.645 * std / math.sqrt(len(mid)), 25e-9)
        return min(max(math.floor(math.log10(self.median / ci)), 1), 4)

    def meets_confidence(self, threshold=0.1):
        return self.iqr / self.median < threshold if self.median else True

    @property
    def has_warnings(self):
        """The IQR is 10% of the median or more (PyTorch's warning)."""
        return bool(self.times) and not self.meets_confidence()

    @property
    def title(self):
        return self.task_spec["label"] or self.task_spec["stmt"]

    def __getattr__(self, name):  # label, sub_label, description, stmt, setup, num_threads
        spec = self.__dict__.get("task_spec")
        if spec is not None and name in spec:
            return spec[name]
        raise AttributeError(f"'Measurement' object has no attribute {name!r}")

    def __repr__(self):
        s = self.task_spec
        lines = [f"<musa.utils.benchmark.Measurement object at {hex(id(self))}>", self.title]
        if s["setup"] != "pass":
            lines.append(f"setup: {s['setup']}")
        n = len(self.times)
        if n > 1:
            q = sorted(self.times)
            lo, hi = (statistics.quantiles(q, n=4, method="inclusive")[i] for i in (0, 2))
            lines += [f"  Median: {_fmt(self.median)}",
                      f"  IQR:    {_fmt(self.iqr)} ({_fmt(lo)} to {_fmt(hi)})"]
        else:
            lines.append(f"  {_fmt(self.median)}")
        threads = s["num_threads"]
        lines.append(f"  {n} measurement{'s' if n != 1 else ''}, {self.number_per_run} runs "
                     f"{'per measurement' if n != 1 else ''}, {threads} "
                     f"thread{'s' if threads != 1 else ''}")
        if self.has_warnings:
            lines.append(f"  WARNING: Interquartile range is {100 * self.iqr / self.median:.1f}% "
                         f"of the median measurement.")
        return "\n".join(lines)


class Timer:
    """Times stmt, a Python statement (a string), after setup, with the
    names of globals in scope, on num_threads musa threads."""

    def __init__(self, stmt="pass", setup="pass", global_setup="", timer=_timeit.default_timer,
                 globals=None, label=None, sub_label=None, description=None, env=None,
                 num_threads=1, language="python"):
        if language not in ("python", "py"):
            raise ValueError(f"[Timer] language {language!r}: musa times Python statements")
        for name, v in (("stmt", stmt), ("setup", setup), ("global_setup", global_setup)):
            if not isinstance(v, str):
                raise TypeError(f"[Timer] {name} must be a str, got {type(v).__name__}")
        if not isinstance(num_threads, int) or num_threads < 1:
            raise ValueError(f"[Timer] num_threads must be a positive int, got {num_threads!r}")
        self._globals = dict(globals or {})
        if global_setup:
            exec(global_setup, self._globals)
        self._timer = _timeit.Timer(stmt=stmt, setup=setup, timer=timer, globals=self._globals)
        self._spec = {"stmt": stmt, "setup": setup, "global_setup": global_setup,
                      "label": label, "sub_label": sub_label, "description": description,
                      "env": env, "num_threads": num_threads}

    def _run(self, number):
        from .. import get_num_threads, set_num_threads
        before = get_num_threads()
        set_num_threads(self._spec["num_threads"])
        try:
            return self._timer.timeit(number)
        finally:
            set_num_threads(before)

    def timeit(self, number=1000000):
        """One block of number runs."""
        if not isinstance(number, int) or number < 1:
            raise ValueError(f"[Timer.timeit] number must be a positive int, got {number!r}")
        self._run(max(number // 100, 1))  # warm up
        return Measurement(number, [self._run(number)], self._spec)

    def _block_size(self, min_run_time):
        """Runs per block: a power of ten whose block takes at least a
        thousandth of min_run_time (so the timer's overhead is negligible)."""
        number = 1
        while True:
            t = self._run(number)
            if t >= min_run_time / 1000 or number >= 10 ** 9:
                return number
            number *= 10

    def blocked_autorange(self, callback=None, min_run_time=0.2):
        """Blocks of a fixed size until min_run_time seconds have run."""
        number = self._block_size(min_run_time)
        times, total = [], 0.0
        while total < min_run_time or not times:
            t = self._run(number)
            times.append(t)
            total += t
            if callback is not None:
                callback(number, t)
        return Measurement(number, times, self._spec)

    def adaptive_autorange(self, threshold=0.1, *, min_run_time=0.01, max_run_time=10.0,
                           callback=None):
        """Blocks until the spread (IQR / median) is under threshold, after at
        least min_run_time seconds and 3 blocks, or until max_run_time."""
        number = self._block_size(min_run_time)
        times, total = [], 0.0
        while True:
            t = self._run(number)
            times.append(t)
            total += t
            if callback is not None:
                callback(number, t)
            m = Measurement(number, times, self._spec)
            if (total >= min_run_time and len(times) >= 3 and m.meets_confidence(threshold)) \
                    or total >= max_run_time:
                return m

    def repeat(self, repeat=-1, number=-1):
        raise NotImplementedError("[Timer.repeat] use Timer.blocked_autorange (as PyTorch says)")

    def autorange(self, callback=None):
        raise NotImplementedError("[Timer.autorange] use Timer.blocked_autorange (as PyTorch "
                                  "says)")


# ---- Compare ----

_UNITS = (("ns", 1e-9, "nanosecond"), ("us", 1e-6, "microsecond"), ("ms", 1e-3, "millisecond"),
          ("s", 1.0, "second"))
_ANSI_END = "\033[0m\033[0m"


def _unit(seconds):
    """The unit a table whose fastest median is `seconds` is printed in."""
    for unit in reversed(_UNITS):
        if seconds >= unit[1]:
            return unit
    return _UNITS[0]


def _row_name(m):
    return m.sub_label or m.stmt or "[Unknown]"


def _env(m):
    return "Unspecified env" if m.env is None else str(m.env)


def _merged(results):
    """Measurements of the same task (every field of the spec equal) as one,
    their per-run times pooled."""
    groups = {}
    for m in results:
        key = tuple(sorted((k, repr(v)) for k, v in m.task_spec.items()))
        groups.setdefault(key, []).append(m)
    return [ms[0] if len(ms) == 1 else
            Measurement(1, [t for m in ms for t in m.times], ms[0].task_spec)
            for ms in groups.values()]


class Compare:
    """The results of many Measurements as tables, as PyTorch prints them:
    one per label; rows by thread count, env and sub_label (or the
    statement); columns by description; each cell a median."""

    def __init__(self, results):
        self._results = []
        self._trim = False
        self._colorize = None  # None, "columnwise" or "rowwise"
        self._warnings = False
        self.extend_results(results)

    def extend_results(self, results):
        results = list(results)
        for r in results:
            if not isinstance(r, Measurement):
                raise ValueError(f"[Compare] expected Measurements, got {type(r).__name__}")
        self._results += results

    def trim_significant_figures(self):
        """Print each median to the digits its spread supports."""
        self._trim = True

    def colorize(self, rowwise=False):
        """Colour cells by how far they are from the best of their column
        (or row): green within 1%, blue within 10%, red at 2x and 5x."""
        self._colorize = "rowwise" if rowwise else "columnwise"

    def highlight_warnings(self):
        """Mark medians whose IQR is over 10% of them."""
        self._warnings = True

    def print(self):
        print(str(self))

    def __str__(self):
        by_label = {}
        for m in _merged(self._results):
            by_label.setdefault(m.label, []).append(m)
        return "\n".join(self._table(ms) for ms in by_label.values())

    def _table(self, ms):
        unit, scale, unit_name = _unit(min(m.median for m in ms))
        rows, cols = [], []
        for m in ms:
            rk, ck = (m.num_threads, _env(m), _row_name(m)), m.description
            rows += [rk] if rk not in rows else []
            cols += [ck] if ck not in cols else []
        rows.sort(key=lambda k: k[:2])  # by threads, env; first seen within
        cell = {((m.num_threads, _env(m), _row_name(m)), m.description): m for m in ms}
        warn = self._warnings and any(m.has_warnings for m in ms)
        envs = {k[1] for k in rows}
        # digits: as many whole digits as the largest median, decimals to the
        # least precise measurement of the column when trimming, else one
        fmts = []
        for c in cols:
            col = [cell[(r, c)] for r in rows if (r, c) in cell]
            lead = [math.ceil(math.log10(m.median / scale)) if m.median > 0 else 1 for m in col]
            dec = min(max(m.significant_figures - d, 0) for m, d in zip(col, lead)) \
                if self._trim else 1
            flag = self._warnings and any(m.has_warnings for m in col)  # the column's marks
            fmts.append((max(lead) + dec + (1 if dec else 0), dec, flag))

        def text(m, k):
            width, dec, flag = fmts[k]
            if m is None:
                return ""
            v = m.median / scale
            if self._trim and v > 0:  # to its significant figures
                v = round(v, m.significant_figures - math.ceil(math.log10(v)))
            s = f"{v:>{width}.{dec}f}"
            if flag:
                s += f" (! {100 * m.iqr / m.median:.0f}%)" if m.has_warnings else " " * 7
            return s

        head = [""] + [c or "" for c in cols]
        body, shown = [], object()
        env_width = max(len(str(e)) for e in envs) if len(envs) > 1 else 0
        for i, r in enumerate(rows):
            if i == 0 or r[0] != rows[i - 1][0]:
                shown = object()  # a new thread count shows its first env again
            env = f"({r[1]})" if len(envs) > 1 and r[1] != shown else ""
            shown = r[1]
            body.append(["  " + env.ljust(env_width + 4) + r[2]] +
                        [text(cell.get((r, c)), k) for k, c in enumerate(cols)])
        widths = [max(len(x[i]) for x in [head] + body) for i in range(len(head))]
        lines = ["  |  ".join(h.center(w) for h, w in zip(head, widths))]
        total = len(lines[0])
        threads = None
        for r, cells in zip(rows, body):
            if r[0] != threads:
                threads = r[0]
                lines.append(f"{threads} threads: ".ljust(total, "-"))
            out = [cells[0].ljust(widths[0])]
            for k, (s, w) in enumerate(zip(cells[1:], widths[1:])):
                out.append(self._paint(s.center(w), cell.get((r, cols[k])), r, cols[k], cell,
                                       rows, cols))
            lines.append("  |  ".join(out))
        label = f" {ms[0].label or ''} ".center(total - 2, "-")
        foot = [f"Times are in {unit_name}s ({unit})."]
        if warn:
            foot.append("(! XX%) Measurement has high variance, where XX is the IQR / median * "
                        "100.")
        return "\n".join([f"[{label}]"] + lines + [""] + foot) + "\n"

    def _paint(self, s, m, r, c, cell, rows, cols):
        if self._colorize is None or m is None:
            return s
        peers = [cell.get((r, c2)) for c2 in cols] if self._colorize == "rowwise" else \
            [cell.get((r2, c)) for r2 in rows if r2[0] == r[0]]
        best = min(p.median for p in peers if p is not None)
        v = m.median
        if v <= best * 1.01 or v <= best + 100e-9:
            code = "\033[92m\033[1m"
        elif v <= best * 1.1:
            code = "\033[34m\033[1m"
        elif v >= best * 5:
            code = "\033[31m\033[1m"
        elif v >= best * 2:
            code = "\033[2m\033[91m"
        else:
            return s
        return code + s + _ANSI_END
